
/*
 * libFuzzer target for whole answers and errors between dialects.  The
 * input reads like the answer it stands for:
 *
 *     c r                 the backend's dialect and the client's: c(hat),
 *                         m(essages), r(esponses, the client's only)
 *     {"choices": ...}    the body, to the end
 *
 * or "m c 429" for an error of that status.  The body is copied to a
 * buffer of its size, so that ASan sees a byte read past it.  A
 * translated answer must be valid JSON of the client's dialect, its
 * figures whole numbers that add up, and the same when translated again;
 * an answer that is not one is -1, never anything else.  An error always
 * translates, into the client's error shape, its message whole UTF-8
 * within the bound.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "llm_tx_body.h"


static void fuzz_answer(const llm_tx_conf_t *cf, const char *body,
    size_t len);
static void fuzz_chat(cJSON *j);
static void fuzz_messages(cJSON *j);
static void fuzz_responses(cJSON *j);
static void fuzz_error(const llm_tx_conf_t *cf, unsigned status,
    const char *body, size_t len);
static int64_t fuzz_figure(cJSON *j, const char *a, const char *b);
static const char *fuzz_str(cJSON *j, const char *a, const char *b);
static int fuzz_utf8(const char *s);
static void fuzz_fail(const char *how, const char *what);


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char           *body;
    size_t          len, i;
    unsigned        status;
    const char     *p, *end, *eol;
    llm_tx_conf_t   cf;

    p = (const char *) data;
    end = p + size;

    eol = memchr(p, '\n', size);
    eol = eol ? eol : end;

    memset(&cf, 0, sizeof(llm_tx_conf_t));

    cf.from = (eol > p && p[0] == 'm') ? LLM_API_ANTHROPIC : LLM_API_OPENAI;
    cf.to = LLM_API_OPENAI;

    if (eol - p > 2) {
        cf.to = p[2] == 'm' ? LLM_API_ANTHROPIC
                : p[2] == 'r' ? LLM_API_RESPONSES : LLM_API_OPENAI;
    }

    status = 0;

    for (i = 3; p + i < eol; i++) {
        if (p[i] >= '0' && p[i] <= '9' && status < 100000) {
            status = status * 10 + (unsigned) (p[i] - '0');
        }
    }

    cf.model = "fuzz-model";
    cf.model_len = sizeof("fuzz-model") - 1;
    cf.id = "fuzz-request";
    cf.id_len = sizeof("fuzz-request") - 1;
    cf.created = 1733100000;
    cf.max_tokens = (int64_t) (size % 3) * 100;

    p = eol < end ? eol + 1 : end;
    len = (size_t) (end - p);

    body = malloc(len ? len : 1);
    if (body == NULL) {
        fuzz_fail("malloc", "no memory");
    }

    memcpy(body, p, len);

    if (status) {
        fuzz_error(&cf, status, body, len);

    } else {
        fuzz_answer(&cf, body, len);
    }

    free(body);

    return 0;
}


static void
fuzz_answer(const llm_tx_conf_t *cf, const char *body, size_t len)
{
    int      rc, again;
    char    *out, *out2;
    size_t   out_len, out2_len;
    cJSON   *j;

    rc = llm_tx_body(cf, body, len, &out, &out_len);

    if (rc == -1) {
        if (out != NULL || out_len != 0) {
            fuzz_fail("answer", "-1 with an output");
        }

        return;
    }

    if (rc != 0 || out == NULL) {
        fuzz_fail("answer", "neither 0 nor -1");
    }

    if (strlen(out) != out_len) {
        fuzz_fail("answer", "a length not the output's");
    }

    again = llm_tx_body(cf, body, len, &out2, &out2_len);

    if (again != 0 || out2_len != out_len || memcmp(out, out2, out_len)) {
        fuzz_fail("answer", "another output the second time");
    }

    cJSON_free(out2);

    j = cJSON_ParseWithLength(out, out_len);
    if (j == NULL) {
        fuzz_fail("answer", "not JSON");
    }

    if (cf->to == LLM_API_OPENAI) {
        fuzz_chat(j);

    } else if (cf->to == LLM_API_ANTHROPIC) {
        fuzz_messages(j);

    } else {
        fuzz_responses(j);
    }

    cJSON_Delete(j);
    cJSON_free(out);
}


static void
fuzz_chat(cJSON *j)
{
    cJSON       *c, *m, *calls, *call;
    const char  *s;

    if (strcmp(fuzz_str(j, "object", NULL), "chat.completion") != 0
        || strncmp(fuzz_str(j, "id", NULL), "chatcmpl-", 9) != 0
        || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "model")))
    {
        fuzz_fail("chat", "not a chat.completion");
    }

    c = cJSON_GetObjectItemCaseSensitive(j, "choices");

    if (cJSON_GetArraySize(c) != 1) {
        fuzz_fail("chat", "not one choice");
    }

    c = cJSON_GetArrayItem(c, 0);
    m = cJSON_GetObjectItemCaseSensitive(c, "message");
    s = fuzz_str(c, "finish_reason", NULL);

    if (strcmp(s, "stop") && strcmp(s, "length") && strcmp(s, "tool_calls")
        && strcmp(s, "content_filter"))
    {
        fuzz_fail("chat", "a finish_reason of none");
    }

    if (!cJSON_IsObject(m)
        || strcmp(fuzz_str(m, "role", NULL), "assistant") != 0
        || !(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "content"))
             || cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(m, "content"))))
    {
        fuzz_fail("chat", "no message");
    }

    calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");

    cJSON_ArrayForEach(call, calls) {
        if (fuzz_str(call, "id", NULL)[0] == '\0'
            || strcmp(fuzz_str(call, "type", NULL), "function") != 0
            || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(
                   cJSON_GetObjectItemCaseSensitive(call, "function"),
                   "arguments")))
        {
            fuzz_fail("chat", "a tool call without id or arguments");
        }
    }

    if (fuzz_figure(j, "usage", "total_tokens")
        != fuzz_figure(j, "usage", "prompt_tokens")
           + fuzz_figure(j, "usage", "completion_tokens")
        || fuzz_figure(cJSON_GetObjectItemCaseSensitive(j, "usage"),
                       "prompt_tokens_details", "cached_tokens")
           > fuzz_figure(j, "usage", "prompt_tokens"))
    {
        fuzz_fail("chat", "usage that does not add up");
    }
}


static void
fuzz_messages(cJSON *j)
{
    cJSON       *c, *b;
    const char  *s, *type;

    if (strcmp(fuzz_str(j, "type", NULL), "message") != 0
        || strcmp(fuzz_str(j, "role", NULL), "assistant") != 0
        || strncmp(fuzz_str(j, "id", NULL), "msg_", 4) != 0
        || !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j,
                                                          "stop_sequence")))
    {
        fuzz_fail("messages", "not a message");
    }

    s = fuzz_str(j, "stop_reason", NULL);

    if (strcmp(s, "end_turn") && strcmp(s, "max_tokens")
        && strcmp(s, "tool_use") && strcmp(s, "refusal"))
    {
        fuzz_fail("messages", "a stop_reason of none");
    }

    c = cJSON_GetObjectItemCaseSensitive(j, "content");

    if (!cJSON_IsArray(c)) {
        fuzz_fail("messages", "no content");
    }

    cJSON_ArrayForEach(b, c) {
        type = fuzz_str(b, "type", NULL);

        if (strcmp(type, "text") == 0) {
            if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(b, "text")))
            {
                fuzz_fail("messages", "a text block without text");
            }

        } else if (strcmp(type, "tool_use") != 0
                   || fuzz_str(b, "id", NULL)[0] == '\0'
                   || !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(b,
                                                                   "input")))
        {
            fuzz_fail("messages", "a block neither text nor tool_use");
        }
    }

    fuzz_figure(j, "usage", "input_tokens");
    fuzz_figure(j, "usage", "output_tokens");
    fuzz_figure(j, "usage", "cache_read_input_tokens");
    fuzz_figure(j, "usage", "cache_creation_input_tokens");
}


static void
fuzz_responses(cJSON *j)
{
    cJSON       *item, *u;
    const char  *s, *type;

    s = fuzz_str(j, "status", NULL);

    if (strcmp(fuzz_str(j, "object", NULL), "response") != 0
        || strncmp(fuzz_str(j, "id", NULL), "resp_", 5) != 0
        || (strcmp(s, "completed") && strcmp(s, "incomplete")))
    {
        fuzz_fail("responses", "not a response");
    }

    if ((strcmp(s, "incomplete") == 0)
        != cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j,
                                                  "incomplete_details")))
    {
        fuzz_fail("responses", "incomplete without its details");
    }

    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(j, "output")) {
        type = fuzz_str(item, "type", NULL);

        if (strcmp(type, "message") == 0) {
            if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(item,
                                                               "content")))
            {
                fuzz_fail("responses", "a message without content");
            }

        } else if (strcmp(type, "function_call") != 0
                   || fuzz_str(item, "call_id", NULL)[0] == '\0'
                   || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(item,
                                                               "arguments")))
        {
            fuzz_fail("responses", "an item of no kind");
        }
    }

    u = cJSON_GetObjectItemCaseSensitive(j, "usage");

    if (fuzz_figure(j, "usage", "total_tokens")
        != fuzz_figure(j, "usage", "input_tokens")
           + fuzz_figure(j, "usage", "output_tokens")
        || fuzz_figure(u, "input_tokens_details", "cached_tokens")
           > fuzz_figure(j, "usage", "input_tokens")
        || fuzz_figure(u, "output_tokens_details", "reasoning_tokens")
           > fuzz_figure(j, "usage", "output_tokens"))
    {
        fuzz_fail("responses", "usage that does not add up");
    }
}


static void
fuzz_error(const llm_tx_conf_t *cf, unsigned status, const char *body,
    size_t len)
{
    int          rc;
    char        *out;
    size_t       out_len;
    cJSON       *j, *err;
    const char  *msg;

    rc = llm_tx_body_error(cf, status, body, len, &out, &out_len);

    if (rc != 0 || out == NULL || strlen(out) != out_len) {
        fuzz_fail("error", "no error body");
    }

    j = cJSON_ParseWithLength(out, out_len);
    if (j == NULL) {
        fuzz_fail("error", "not JSON");
    }

    err = cJSON_GetObjectItemCaseSensitive(j, "error");
    msg = fuzz_str(err, "message", NULL);

    if (msg[0] == '\0' || strlen(msg) > LLM_TX_BODY_MESSAGE_MAX
        || !fuzz_utf8(msg))
    {
        fuzz_fail("error", "a message empty, too long or not UTF-8");
    }

    if (cf->to == LLM_API_ANTHROPIC) {
        if (strcmp(fuzz_str(j, "type", NULL), "error") != 0
            || (strstr(fuzz_str(err, "type", NULL), "_error") == NULL
                && strcmp(fuzz_str(err, "type", NULL), "request_too_large")))
        {
            fuzz_fail("error", "not Anthropic's");
        }

    } else if (cJSON_GetObjectItemCaseSensitive(j, "type") != NULL
               || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(err,
                                                                   "type"))
               || !cJSON_HasObjectItem(err, "param")
               || !cJSON_HasObjectItem(err, "code"))
    {
        fuzz_fail("error", "not OpenAI's");
    }

    cJSON_Delete(j);
    cJSON_free(out);
}


/* j.a.b, a whole number of tokens that must be there */

static int64_t
fuzz_figure(cJSON *j, const char *a, const char *b)
{
    cJSON  *n;

    n = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(j, a), b);

    if (!cJSON_IsNumber(n) || n->valuedouble < 0
        || n->valuedouble > 4.0 * (double) LLM_TX_BODY_TOKENS_MAX
        || n->valuedouble != (double) (int64_t) n->valuedouble)
    {
        fuzz_fail("usage", "a figure not a whole number in range");
    }

    return (int64_t) n->valuedouble;
}


static const char *
fuzz_str(cJSON *j, const char *a, const char *b)
{
    cJSON  *s;

    s = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, a) : NULL;

    if (b != NULL) {
        s = cJSON_IsObject(s) ? cJSON_GetObjectItemCaseSensitive(s, b)
                              : NULL;
    }

    return cJSON_IsString(s) ? s->valuestring : "";
}


/* well-formed UTF-8, without overlongs, surrogates or beyond U+10FFFF */

static int
fuzz_utf8(const char *s)
{
    size_t                i, n, k;
    uint32_t              c;
    const unsigned char  *u;

    u = (const unsigned char *) s;

    for (i = 0; u[i]; i += n) {
        n = u[i] < 0x80 ? 1 : (u[i] & 0xe0) == 0xc0 ? 2
            : (u[i] & 0xf0) == 0xe0 ? 3 : (u[i] & 0xf8) == 0xf0 ? 4 : 0;

        if (n == 0) {
            return 0;
        }

        c = n == 1 ? u[i] : u[i] & (0x7f >> n);

        for (k = 1; k < n; k++) {
            if ((u[i + k] & 0xc0) != 0x80) {
                return 0;
            }

            c = (c << 6) | (u[i + k] & 0x3f);
        }

        if ((n == 2 && c < 0x80) || (n == 3 && c < 0x800)
            || (n == 4 && c < 0x10000) || c > 0x10ffff
            || (c >= 0xd800 && c <= 0xdfff))
        {
            return 0;
        }
    }

    return 1;
}


static void
fuzz_fail(const char *how, const char *what)
{
    fprintf(stderr, "fuzz_tx_body: %s: %s\n", how, what);
    __builtin_trap();
}
