
/*
 * libFuzzer target for the request translator.  The first byte chooses
 * the pair (bits 0-1: Chat to Messages, Messages to Chat, Responses to
 * Chat, Responses to Messages), Chat's name of the limit (bit 2), whether
 * the conf names the model (bit 3) and the limit (bits 4-6); the rest is
 * the client's body, anything at all.  A refusal must name the member in
 * printable words; a translation must be a body of the backend's dialect
 * with what it requires, the conf's model and limit, no empty text block
 * nor two messages of one role in a row for Messages, and the usage chunk
 * asked for a Chat stream.  The Messages-to-Chat output is translated back
 * (whatever the answer) for the coverage of bodies the translator wrote.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "llm_inspect.h"
#include "llm_tx_request.h"


/*
 * What the gateway admits: deep and long enough for anything libFuzzer
 * makes.  A call's arguments, a string in the client's body, are an object
 * in Messages' as deep as cJSON reads one: the backend's depth is more.
 */
static const llm_inspect_conf_t  fuzz_inspect_conf = {
    256, 1000000000, 64, (size_t) -1, 1000, 100000, 0
};

#define FUZZ_DEPTH_MAX   (64 + 1000 + 8)


static void fuzz_refused(const llm_tx_request_t *out);
static void fuzz_translated(const llm_tx_request_conf_t *cf,
    const llm_tx_request_t *out);
static void fuzz_messages(const cJSON *root);
static void fuzz_chat(const llm_tx_request_conf_t *cf, const cJSON *root);
static void fuzz_inspected(const llm_tx_request_conf_t *cf,
    const char *body, size_t len, const llm_tx_request_t *out);
static void fuzz_printable(const char *s, size_t size, const char *what);
static void fuzz_fail(const char *how, const char *what);


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


static const llm_api_e  fuzz_from[] = {
    LLM_API_OPENAI, LLM_API_ANTHROPIC, LLM_API_RESPONSES, LLM_API_RESPONSES
};

static const llm_api_e  fuzz_to[] = {
    LLM_API_ANTHROPIC, LLM_API_OPENAI, LLM_API_OPENAI, LLM_API_ANTHROPIC
};

static const int64_t  fuzz_limits[] = {
    1, 16, 256, 4096, 8192, 64000, 128000, 1000000000
};


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int                    rc;
    llm_tx_request_t       out, back;
    llm_tx_request_conf_t  cf;

    if (size < 1) {
        return 0;
    }

    memset(&cf, 0, sizeof(llm_tx_request_conf_t));

    cf.from = fuzz_from[data[0] & 0x03];
    cf.to = fuzz_to[data[0] & 0x03];
    cf.chat_max_tokens = (data[0] >> 2) & 1;
    cf.max_tokens = fuzz_limits[(data[0] >> 4) & 0x07];

    if (data[0] & 0x08) {
        /* the length, not the terminator, ends the name */
        cf.model = "fuzz-model-and-more";
        cf.model_len = sizeof("fuzz-model") - 1;
    }

    rc = llm_tx_request(&cf, (const char *) data + 1, size - 1, &out);

    if (rc == -1) {
        fuzz_refused(&out);
        return 0;
    }

    if (rc == -2) {
        if (out.body != NULL) {
            fuzz_fail("failed", "with a body");
        }

        return 0;
    }

    if (rc != 0) {
        fuzz_fail("answer", "neither 0, -1 nor -2");
    }

    fuzz_translated(&cf, &out);
    fuzz_inspected(&cf, (const char *) data + 1, size - 1, &out);

    if (cf.from == LLM_API_ANTHROPIC) {
        cf.from = LLM_API_OPENAI;
        cf.to = LLM_API_ANTHROPIC;

        rc = llm_tx_request(&cf, out.body, out.len, &back);

        if (rc == -1) {
            fuzz_refused(&back);

        } else if (rc == 0) {
            fuzz_translated(&cf, &back);
            cJSON_free(back.body);

        } else {
            fuzz_fail("back", "a body the translator wrote is not JSON");
        }
    }

    cJSON_free(out.body);

    return 0;
}


static void
fuzz_refused(const llm_tx_request_t *out)
{
    if (out->body != NULL || out->stream) {
        fuzz_fail("refused", "with a body or a stream");
    }

    if (out->message[0] == '\0') {
        fuzz_fail("refused", "without a message");
    }

    fuzz_printable(out->param, sizeof(out->param), "param");
    fuzz_printable(out->message, sizeof(out->message), "message");
}


static void
fuzz_translated(const llm_tx_request_conf_t *cf, const llm_tx_request_t *out)
{
    cJSON        *root;
    const cJSON  *model, *stream;

    if (out->body == NULL || strlen(out->body) != out->len) {
        fuzz_fail("translated", "no body, or not its length");
    }

    root = cJSON_ParseWithLength(out->body, out->len);

    if (!cJSON_IsObject(root)) {
        fprintf(stderr, "fuzz_tx_request: %s\n", out->body);
        fuzz_fail("translated", "the body is not a JSON object");
    }

    model = cJSON_GetObjectItemCaseSensitive(root, "model");

    if (!cJSON_IsString(model)
        || (cf->model
            && (strlen(model->valuestring) != cf->model_len
                || memcmp(model->valuestring, cf->model, cf->model_len)
                   != 0)))
    {
        fuzz_fail("translated", "not the conf's model");
    }

    stream = cJSON_GetObjectItemCaseSensitive(root, "stream");

    if (out->stream != (cJSON_IsTrue(stream) ? 1 : 0)) {
        fuzz_fail("translated", "the stream flag is not the body's");
    }

    if (cf->to == LLM_API_ANTHROPIC) {
        fuzz_messages(root);

    } else {
        fuzz_chat(cf, root);
    }

    if (cJSON_GetObjectItemCaseSensitive(root,
            cf->to == LLM_API_ANTHROPIC ? "max_tokens"
            : cf->chat_max_tokens ? "max_tokens" : "max_completion_tokens")
        ->valuedouble != (double) cf->max_tokens)
    {
        fuzz_fail("translated", "not the conf's output limit");
    }

    cJSON_Delete(root);
}


/* what Messages requires, and refuses */

static void
fuzz_messages(const cJSON *root)
{
    const char   *prev, *role;
    const cJSON  *msgs, *m, *content, *b, *text;

    if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(root, "max_tokens"))
        || cJSON_GetObjectItemCaseSensitive(root, "max_completion_tokens")
        || cJSON_GetObjectItemCaseSensitive(root, "stream_options"))
    {
        fuzz_fail("messages", "no max_tokens, or a member of Chat's");
    }

    msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");

    if (!cJSON_IsArray(msgs) || msgs->child == NULL) {
        fuzz_fail("messages", "no messages");
    }

    prev = NULL;

    cJSON_ArrayForEach(m, msgs) {
        role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m,
                                                                     "role"));
        content = cJSON_GetObjectItemCaseSensitive(m, "content");

        if (role == NULL
            || (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0))
        {
            fuzz_fail("messages", "a role Messages does not have");
        }

        if (prev && strcmp(prev, role) == 0) {
            fuzz_fail("messages", "two messages of one role in a row");
        }

        prev = role;

        if (cJSON_IsString(content)) {
            if (content->valuestring[0] == '\0') {
                fuzz_fail("messages", "an empty message");
            }

            continue;
        }

        if (!cJSON_IsArray(content) || content->child == NULL) {
            fuzz_fail("messages", "a message without content");
        }

        cJSON_ArrayForEach(b, content) {
            text = cJSON_GetObjectItemCaseSensitive(b, "text");

            if (text && (!cJSON_IsString(text)
                         || text->valuestring[0] == '\0'))
            {
                fuzz_fail("messages", "an empty text block");
            }
        }
    }
}


static void
fuzz_chat(const llm_tx_request_conf_t *cf, const cJSON *root)
{
    const cJSON  *msgs, *opts;

    msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");

    if (!cJSON_IsArray(msgs)) {
        fuzz_fail("chat", "no messages");
    }

    if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(root,
            cf->chat_max_tokens ? "max_tokens" : "max_completion_tokens"))
        || cJSON_GetObjectItemCaseSensitive(root,
            cf->chat_max_tokens ? "max_completion_tokens" : "max_tokens"))
    {
        fuzz_fail("chat", "the limit not under the conf's name alone");
    }

    opts = cJSON_GetObjectItemCaseSensitive(root, "stream_options");

    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "stream"))
        && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(opts,
                                                          "include_usage")))
    {
        fuzz_fail("chat", "a stream without its usage");
    }
}


/*
 * A body the gateway admits from the client gives one it admits for the
 * backend, read as the same request: the gateway reads a body as its
 * upstream does, so the backend reads it.
 */

static void
fuzz_inspected(const llm_tx_request_conf_t *cf, const char *body, size_t len,
    const llm_tx_request_t *out)
{
    llm_request_t       req, up;
    llm_inspect_conf_t  icf;

    if (llm_inspect(cf->from, body, len, &fuzz_inspect_conf, &req) != 0) {
        return;
    }

    icf = fuzz_inspect_conf;
    icf.max_depth = FUZZ_DEPTH_MAX;

    if (llm_inspect(cf->to, out->body, out->len, &icf, &up) != 0) {
        fprintf(stderr, "fuzz_tx_request: %s: %s\n%s\n", up.param,
                up.message, out->body);
        fuzz_fail("inspected", "the backend's body is refused");
    }

    if (up.max_tokens != cf->max_tokens || up.max_tokens_missing
        || up.stream != out->stream || up.stream != req.stream
        || up.add_include_usage)
    {
        fprintf(stderr, "fuzz_tx_request: %s\n", out->body);
        fuzz_fail("inspected", "the backend's body is another request");
    }
}


static void
fuzz_printable(const char *s, size_t size, const char *what)
{
    size_t  i;

    for (i = 0; i < size && s[i]; i++) {
        if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\') {
            fuzz_fail(what, "a byte that is not printable, or a quote");
        }
    }

    if (i == size) {
        fuzz_fail(what, "not terminated");
    }
}


static void
fuzz_fail(const char *how, const char *what)
{
    fprintf(stderr, "fuzz_tx_request: %s: %s\n", how, what);
    __builtin_trap();
}
