
/*
 * libFuzzer target for the request inspector.  The first byte chooses the
 * API (bits 0-1, and the second byte's bit 6 for the second four: OpenAI,
 * Anthropic, Responses, count_tokens; Embeddings, OpenAI whose backend
 * wants max_tokens, Anthropic, Responses), the tier's max_tokens (bits
 * 2-4) and its default (bits 5-6), and whether the model is an alias to
 * resolve (bit 7); the second byte the depth limit (bits 0-3), the string
 * limit (bits 4-5) and the alias (bits 6-7, which also choose the API's
 * four and above_max=lower).  The rest is the body.  What is accepted must
 * be within the tier's limits, and the body the upstream gets, spliced or
 * rebuilt, must read as the same request with nothing left to add.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "llm_inspect.h"


/*
 * A rebuilt body's numbers are printed by cJSON, with 15 significant digits
 * when they read back within DBL_EPSILON: above about 4.5e15 a max_tokens
 * may move by 2.  No tier goes near it.
 */
#define FUZZ_TOKENS_MAX   1000000000000000LL


static void fuzz_accepted(const llm_inspect_conf_t *cf, const char *body,
    size_t len, const llm_request_t *req);
static void fuzz_embeddings(size_t len, const llm_request_t *req);
static void fuzz_same(const llm_request_t *a, const llm_request_t *b,
    const char *how);
static void fuzz_alias(llm_request_t *req, unsigned n);
static void fuzz_rewrite(const llm_inspect_conf_t *cf, const char *body,
    size_t len, const llm_request_t *req);
static void fuzz_usage(const char *body, size_t len);
static void fuzz_fail(const char *how, const char *what);


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


static const llm_api_e  fuzz_apis[] = {
    LLM_API_OPENAI, LLM_API_ANTHROPIC, LLM_API_RESPONSES, LLM_API_COUNT_TOKENS,
    LLM_API_EMBEDDINGS, LLM_API_OPENAI, LLM_API_ANTHROPIC, LLM_API_RESPONSES
};

static const int64_t  fuzz_limits[] = {
    1, 2, 256, 4096, 100000, 1000000, 1000000000, FUZZ_TOKENS_MAX
};

static const int64_t  fuzz_defaults[] = { 1, 256, 4096, FUZZ_TOKENS_MAX };

static const size_t  fuzz_depths[] = {
    1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32, 64, 128, 256
};

static const size_t  fuzz_strings[] = { 8, 64, 4096, (size_t) -1 };


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int                  rc;
    size_t               len;
    unsigned             which;
    const char          *body;
    llm_request_t        req, again;
    llm_inspect_conf_t   cf;

    if (size < 2) {
        return 0;
    }

    cf.max_tokens_limit = fuzz_limits[(data[0] >> 2) & 0x07];
    cf.default_max_tokens = fuzz_defaults[(data[0] >> 5) & 0x03];
    cf.max_depth = fuzz_depths[data[1] & 0x0f];
    cf.max_string = fuzz_strings[(data[1] >> 4) & 0x03];
    cf.image_tokens = 1000;
    cf.context_tokens = 50000;

    /* shares its bit with the alias: both are tried with and without */
    cf.lower = (data[1] >> 7) & 1;

    /* as nginx -t insists */
    if (cf.default_max_tokens > cf.max_tokens_limit) {
        cf.default_max_tokens = cf.max_tokens_limit;
    }

    body = (const char *) data + 2;
    len = size - 2;

    /* the second byte's bit 6, shared with the alias's choice */
    which = (data[0] & 0x03) | ((data[1] >> 4) & 0x04);

    rc = llm_inspect(fuzz_apis[which], body, len, &cf, &req);

    if (rc != 0) {
        if (rc != -1 || req.message == NULL) {
            fuzz_fail("refused", "no message for the client");
        }

        return 0;
    }

    fuzz_accepted(&cf, body, len, &req);

    rc = llm_inspect(fuzz_apis[which], body, len, &cf, &again);

    if (rc != 0) {
        fuzz_fail("again", "refused the second time");
    }

    fuzz_same(&req, &again, "again");

    if (data[0] & 0x80) {
        fuzz_alias(&req, data[1] >> 6);
    }

    /* Chat's second entry: a backend that wants max_tokens for the default */
    req.chat_max_tokens = (which == 5);

    fuzz_rewrite(&cf, body, len, &req);

    return 0;
}


static void
fuzz_accepted(const llm_inspect_conf_t *cf, const char *body, size_t len,
    const llm_request_t *req)
{
    size_t  i;

    if (req->param != NULL || req->message != NULL) {
        fuzz_fail("accepted", "with a refusal's message");
    }

    if (req->model_len == 0 || req->model_len >= LLM_RECORD_MODEL_MAX
        || req->model[req->model_len] != '\0'
        || strlen(req->model) != req->model_len)
    {
        fuzz_fail("accepted", "the model is empty, too long or unterminated");
    }

    if (req->api == LLM_API_EMBEDDINGS) {
        fuzz_embeddings(len, req);
        return;
    }

    /* a count generates nothing: no limit read, none written in */
    if (req->api == LLM_API_COUNT_TOKENS) {
        if (req->max_tokens != 0 || req->max_tokens_missing
            || req->output_bound != 0)
        {
            fuzz_fail("accepted", "a token count with an output limit");
        }

    } else if (req->max_tokens < 1 || req->max_tokens > cf->max_tokens_limit)
    {
        fuzz_fail("accepted", "max_tokens is beyond the tier's limit");
    }

    if (req->max_tokens_lowered
        && (!cf->lower || !req->rebuild
            || req->max_tokens != cf->max_tokens_limit
            || req->max_tokens_asked <= cf->max_tokens_limit))
    {
        fuzz_fail("accepted", "lowered, but not to the tier's limit");
    }

    if (req->max_tokens_missing
        && req->max_tokens != cf->default_max_tokens)
    {
        fuzz_fail("accepted", "a missing max_tokens is not the default");
    }

    /*
     * Every message costs at least two bytes of the body and counts 3, a
     * text of b bytes takes at least b + 2 and counts (b + 3) / 4, data
     * at most one a byte; tools add the providers' tool prompt.
     */
    if (req->prompt_tokens < 3
        || (uint64_t) req->prompt_tokens
           > 6 + 2 * (uint64_t) len
             + (uint64_t) req->parts.images * cf->image_tokens
             + (req->parts.tools ? LLM_INSPECT_TOOLS_PROMPT : 0)
             + (req->unbounded ? (uint64_t) cf->context_tokens : 0))
    {
        fuzz_fail("accepted", "the prompt estimate is out of range");
    }

    /* the bound is one: never below the bytes, nor below the estimate */
    if (req->prompt_bound < (int64_t) len
        || req->prompt_bound < req->prompt_tokens
        || (req->unbounded && req->prompt_bound < cf->context_tokens))
    {
        fuzz_fail("accepted", "the prompt's bound is not one");
    }

    if (req->n < 1 || req->n > LLM_INSPECT_N_MAX
        || (req->api != LLM_API_OPENAI && req->n != 1)
        || req->output_bound < req->n * req->max_tokens)
    {
        fuzz_fail("accepted", "n or the output bound is wrong");
    }

    if ((uint64_t) req->parts.messages + req->parts.images + req->parts.files
        + req->parts.audio + req->parts.tools > len)
    {
        fuzz_fail("accepted", "more parts than bytes");
    }

    if ((req->parts.files || req->parts.audio || req->parts.refs)
        && req->unbounded == NULL)
    {
        fuzz_fail("accepted", "a file, audio or reference counted bounded");
    }

    for (i = 0; i < req->model_len; i++) {
        if ((unsigned char) req->model[i] < 0x20 || req->model[i] == 0x7f) {
            fuzz_fail("accepted", "a control character in the model");
        }
    }

    if (req->add_include_usage
        && (req->api != LLM_API_OPENAI || !req->stream))
    {
        fuzz_fail("accepted", "usage asked for outside an OpenAI stream");
    }

    if (req->model_changed) {
        fuzz_fail("accepted", "the model changed by itself");
    }

    if (req->api == LLM_API_OPENAI && req->stream
        && !llm_inspect_needs_rewrite(req))
    {
        fuzz_usage(body, len);
    }
}


/*
 * An embeddings request: no output, nothing written in; a token and a
 * string's byte each take a byte of the body at least, so the bound is
 * within it, and a string of b bytes estimated (b + 3) / 4 is within it.
 */

static void
fuzz_embeddings(size_t len, const llm_request_t *req)
{
    if (req->max_tokens != 0 || req->output_bound != 0 || req->n != 1
        || req->stream || llm_inspect_needs_rewrite(req))
    {
        fuzz_fail("embeddings", "an output, a stream or a rewrite");
    }

    if (req->prompt_tokens < 1 || req->prompt_bound < req->prompt_tokens
        || req->prompt_bound > (int64_t) len
        || req->prompt_tokens > 2048 * (int64_t) 8192)
    {
        fuzz_fail("embeddings", "the estimate or its bound is out of range");
    }

    if (memcmp(&req->parts, &(llm_parts_t) { 0 }, sizeof(llm_parts_t)) != 0
        || req->unbounded != NULL)
    {
        fuzz_fail("embeddings", "parts of a chat prompt");
    }
}


static void
fuzz_same(const llm_request_t *a, const llm_request_t *b, const char *how)
{
    if (a->api != b->api
        || a->model_len != b->model_len
        || strcmp(a->model, b->model) != 0
        || a->max_tokens != b->max_tokens
        || a->n != b->n
        || a->output_bound != b->output_bound
        || a->prompt_tokens != b->prompt_tokens
        || a->prompt_bound != b->prompt_bound
        || memcmp(&a->parts, &b->parts, sizeof(llm_parts_t)) != 0
        || a->stream != b->stream
        || a->max_tokens_missing != b->max_tokens_missing
        || a->add_include_usage != b->add_include_usage
        || a->rebuild != b->rebuild
        || a->model_changed != b->model_changed)
    {
        fuzz_fail(how, "not the same request");
    }
}


/* a resolved alias: short, the longest that fits, or one that needs escapes */

static void
fuzz_alias(llm_request_t *req, unsigned n)
{
    char           name[LLM_RECORD_MODEL_MAX + 1];
    size_t         len;
    llm_request_t  before;

    memset(name, 'x', sizeof(name));

    /* too long or empty: refused, and the request is left as it was */

    memcpy(&before, req, sizeof(llm_request_t));

    if (llm_inspect_set_model(req, name, LLM_RECORD_MODEL_MAX) != -1
        || llm_inspect_set_model(req, name, 0) != -1
        || memcmp(&before, req, sizeof(llm_request_t)) != 0)
    {
        fuzz_fail("alias", "a name that does not fit was taken");
    }

    switch (n) {

    case 0:
        len = sizeof("gpt-4o-mini-2024-07-18") - 1;
        memcpy(name, "gpt-4o-mini-2024-07-18", len);
        break;

    case 1:
        len = 1;
        break;

    case 2:
        len = LLM_RECORD_MODEL_MAX - 1;
        break;

    default:
        len = sizeof("q\"b\\s/\xc3\xa9") - 1;
        memcpy(name, "q\"b\\s/\xc3\xa9", len);
        break;
    }

    if (llm_inspect_set_model(req, name, len) != 0) {
        fuzz_fail("alias", "a name that fits was refused");
    }

    if (req->model_len != len || memcmp(req->model, name, len) != 0
        || req->model[len] != '\0'
        || !req->model_changed || !req->rebuild)
    {
        fuzz_fail("alias", "the model is not the alias's");
    }
}


static void
fuzz_rewrite(const llm_inspect_conf_t *cf, const char *body, size_t len,
    const llm_request_t *req)
{
    char                *out;
    size_t               n, cap;
    llm_request_t        up;
    llm_inspect_conf_t   ucf;

    if (!llm_inspect_needs_rewrite(req)) {
        return;
    }

    if (req->rebuild) {
        out = llm_inspect_rebuild(body, len, req);
        if (out == NULL) {
            fuzz_fail("rebuild", "an accepted body was not rebuilt");
        }

        n = strlen(out);

    } else {
        /* exactly what the header asks for, so that an overflow shows */
        cap = len + LLM_INSPECT_SPLICE_MAX;

        out = malloc(cap);
        if (out == NULL) {
            abort();
        }

        if (llm_inspect_splice(body, len, req, out, cap - 1) != 0) {
            fuzz_fail("splice", "wrote into less than the room asked for");
        }

        n = llm_inspect_splice(body, len, req, out, cap);

        if (n <= len || n > cap) {
            fuzz_fail("splice", "the spliced length is out of range");
        }
    }

    /*
     * The gateway never inspects what it sends, and the body may grow past
     * the string limit: a name spliced in, a control character printed as
     * \u00XX.  The depth stays.
     */
    ucf = *cf;
    ucf.max_string = (size_t) -1;

    if (llm_inspect(req->api, out, n, &ucf, &up) != 0) {
        fprintf(stderr, "fuzz_inspect: %s: %.*s\n", up.message, (int) n, out);
        fuzz_fail("upstream", "the body sent upstream is refused");
    }

    if (up.model_len != req->model_len || strcmp(up.model, req->model) != 0
        || up.max_tokens != req->max_tokens
        || up.n != req->n
        || up.output_bound != req->output_bound
        || memcmp(&up.parts, &req->parts, sizeof(llm_parts_t)) != 0
        || up.stream != req->stream
        || up.prompt_tokens != req->prompt_tokens)
    {
        fprintf(stderr, "fuzz_inspect: %.*s\n", (int) n, out);
        fuzz_fail("upstream", "the body sent upstream is another request");
    }

    if (llm_inspect_needs_rewrite(&up)) {
        fprintf(stderr, "fuzz_inspect: %.*s\n", (int) n, out);
        fuzz_fail("upstream", "the body sent upstream still lacks something");
    }

    if (up.api == LLM_API_OPENAI && up.stream) {
        fuzz_usage(out, n);
    }

    if (req->rebuild) {
        cJSON_free(out);

    } else {
        free(out);
    }
}


/*
 * An OpenAI stream the gateway lets through as it is must carry usage
 * whichever of a repeated include_usage the upstream reads: most read the
 * last, cJSON the first.
 */

static void
fuzz_usage(const char *body, size_t len)
{
    cJSON        *root;
    const cJSON  *opts, *m;

    root = cJSON_ParseWithLength(body, len);
    if (root == NULL) {
        fuzz_fail("usage", "the body no longer parses");
    }

    opts = cJSON_GetObjectItemCaseSensitive(root, "stream_options");

    if (!cJSON_IsObject(opts)) {
        fuzz_fail("usage", "a stream without stream_options");
    }

    for (m = opts->child; m; m = m->next) {
        if (strcmp(m->string, "include_usage") == 0 && !cJSON_IsTrue(m)) {
            fuzz_fail("usage", "an include_usage the upstream may read "
                      "is not true");
        }
    }

    cJSON_Delete(root);
}


static void
fuzz_fail(const char *how, const char *what)
{
    fprintf(stderr, "fuzz_inspect: %s: %s\n", how, what);
    __builtin_trap();
}
