
/*
 * The oracle's reference: llm_inspect.c as it was before bodies were
 * parsed into blocks (llm_json.c), cJSON's parse and every walk, kept to
 * compare the inspector with (t/inspect_diff.h).  Its exported names are
 * renamed by the includer.  Change it only with a change of behaviour
 * that llm_inspect.c makes on purpose, the same change.
 */


#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cJSON.h>

#include "llm_inspect.h"


/* integers above 2^53 are not exact in cJSON's double */
#define LLM_INSPECT_INT_MAX       9007199254740992.0

/* a limit's figure in a message, as its define says */
#define LLM_INSPECT_STR(n)        LLM_INSPECT_STR_(n)
#define LLM_INSPECT_STR_(n)       #n

/* an object with more members is checked for repeats by sorting */
#define LLM_INSPECT_PAIRWISE      16


/* what a walk over the prompt finds */
typedef struct {
    llm_api_e           api;
    llm_request_t      *req;
    int64_t             text;        /* tokens: ceil(bytes / 4) a text */
    int64_t             dense;       /* tokens of structured parts */
    int64_t             predicted;   /* bytes of a predicted output */
    unsigned            result:1;    /* in a tool's result */
} llm_inspect_walk_t;


/*
 * Members of the other dialects that change what is generated or billed:
 * an upstream refuses them, or worse, obeys one the gateway did not read.
 */
static const char  *llm_inspect_foreign_openai[] = {
    "max_output_tokens", "max_tokens_to_sample", "system", "stop_sequences",
    "top_k", "thinking", "input", "instructions", "previous_response_id",
    NULL
};

static const char  *llm_inspect_foreign_anthropic[] = {
    "n", "max_completion_tokens", "max_output_tokens", "max_tokens_to_sample",
    "stream_options", "input", "instructions", "previous_response_id",
    "functions", NULL
};

/* the members that change what is generated or billed, in their case */
static const char  *llm_inspect_cased[] = {
    "model", "messages", "input", "max_tokens", "max_completion_tokens",
    "max_output_tokens", "n", "stream", "tools", "system", NULL
};

static const char  *llm_inspect_foreign_responses[] = {
    "max_tokens", "max_completion_tokens", "max_tokens_to_sample", "n",
    "messages", "system", "stop_sequences", "top_k", "functions", NULL
};


static int llm_inspect_fail(llm_request_t *req, const char *param,
    const char *message);
static int llm_inspect_embeddings(const cJSON *root, llm_request_t *req);
static int llm_inspect_embed_input(const cJSON *input, llm_request_t *req);
static int64_t llm_inspect_embed_tokens(const cJSON *v);
static int llm_inspect_members(llm_api_e api, const cJSON *root,
    llm_request_t *req);
static void llm_inspect_copy_name(llm_request_t *req, const char *name);
static int llm_inspect_model(const cJSON *root, llm_request_t *req);
static int llm_inspect_options(llm_api_e api, const cJSON *root,
    llm_request_t *req);
static int llm_inspect_estimate(llm_api_e api, const cJSON *root, size_t len,
    const llm_inspect_conf_t *cf, llm_request_t *req);
static int llm_inspect_usage(llm_api_e api, const cJSON *root,
    llm_request_t *req);
static const char *llm_inspect_repeated(const cJSON *v);
static int llm_inspect_name_cmp(const void *a, const void *b);
static int llm_inspect_limit(llm_api_e api, const cJSON *root,
    const llm_inspect_conf_t *cf, llm_request_t *req);
static int llm_inspect_n(const cJSON *root, llm_request_t *req);
static int llm_inspect_integer(const cJSON *v, double *d);
static int llm_inspect_prompt(llm_inspect_walk_t *w, const cJSON *root);
static int llm_inspect_item(llm_inspect_walk_t *w, const cJSON *m);
static int llm_inspect_content(llm_inspect_walk_t *w, const cJSON *content,
    const char *param);
static int llm_inspect_part(llm_inspect_walk_t *w, const cJSON *part,
    const char *param);
static int llm_inspect_tools(llm_inspect_walk_t *w, const cJSON *tools,
    const char *param);
static void llm_inspect_ref(llm_inspect_walk_t *w, const cJSON *v,
    const char *name);
static void llm_inspect_unbounded(llm_request_t *req, const char *what);
static int64_t llm_inspect_text(const cJSON *v);
static int64_t llm_inspect_string(const cJSON *v);
static int64_t llm_inspect_json_bytes(const cJSON *v);
static int64_t llm_inspect_dense(const cJSON *v);
static int64_t llm_inspect_dense_bytes(const char *s, size_t len);
static int64_t llm_inspect_json_tokens(const cJSON *v);
static unsigned llm_inspect_class(unsigned c);
static int llm_inspect_result(llm_inspect_walk_t *w, const cJSON *v,
    const char *param);
static int llm_inspect_is(const cJSON *v, const char *s);
static int llm_inspect_rebuild_limit(cJSON *root, const llm_request_t *req);


int
llm_inspect(llm_api_e api, const char *body, size_t len,
    const llm_inspect_conf_t *cf, llm_request_t *req)
{
    int           rc;
    const char   *name;
    cJSON        *root;

    memset(req, 0, sizeof(llm_request_t));
    req->api = api;
    req->n = 1;

    /* a Messages body without its output limit: it generates nothing */
    if (api == LLM_API_COUNT_TOKENS) {
        api = LLM_API_ANTHROPIC;
    }

    if (llm_inspect_scan(body, len, cf->max_depth, cf->max_string, &name)
        != 0)
    {
        return llm_inspect_fail(req, NULL, name);
    }

    root = cJSON_ParseWithLength(body, len);
    if (root == NULL) {
        return llm_inspect_fail(req, NULL,
                                "the request body is not valid JSON");
    }

    rc = -1;

    if (!cJSON_IsObject(root)) {
        llm_inspect_fail(req, NULL, "the request body must be a JSON object");
        goto done;
    }

    /* in this order: the first reason to refuse is the one given */

    if (api == LLM_API_EMBEDDINGS) {
        rc = llm_inspect_embeddings(root, req);
        goto done;
    }

    if (llm_inspect_members(api, root, req) != 0
        || llm_inspect_model(root, req) != 0
        || (req->api != LLM_API_COUNT_TOKENS
            && llm_inspect_limit(api, root, cf, req) != 0)
        || (api == LLM_API_OPENAI && llm_inspect_n(root, req) != 0)
        || llm_inspect_options(api, root, req) != 0
        || llm_inspect_estimate(api, root, len, cf, req) != 0
        || llm_inspect_usage(api, root, req) != 0)
    {
        goto done;
    }

    rc = 0;

done:

    cJSON_Delete(root);

    return rc;
}


/* no member twice in an object, none of another API */

static int
llm_inspect_members(llm_api_e api, const cJSON *root, llm_request_t *req)
{
    size_t        i;
    const char   *name, **foreign;
    const cJSON  *v;

    name = llm_inspect_repeated(root);

    if (name != NULL) {
        llm_inspect_copy_name(req, name);

        return llm_inspect_fail(req, req->name, "a member appears more than "
                                "once in an object of the request body");
    }

    foreign = (api == LLM_API_ANTHROPIC) ? llm_inspect_foreign_anthropic
              : (api == LLM_API_RESPONSES) ? llm_inspect_foreign_responses
              : llm_inspect_foreign_openai;

    for (i = 0; foreign[i]; i++) {
        v = cJSON_GetObjectItemCaseSensitive(root, foreign[i]);

        if (v != NULL && !cJSON_IsNull(v)) {
            return llm_inspect_fail(req, foreign[i], "this member is not "
                                    "part of this API: it would not be read "
                                    "as it was meant");
        }
    }

    /*
     * An upstream that matches names without case (Go's encoding/json, say)
     * would read "MAX_TOKENS" as the limit the gateway did not see.
     */
    for (v = root->child; v; v = v->next) {
        for (i = 0; llm_inspect_cased[i]; i++) {
            if (strcasecmp(v->string, llm_inspect_cased[i]) == 0
                && strcmp(v->string, llm_inspect_cased[i]) != 0)
            {
                llm_inspect_copy_name(req, v->string);

                return llm_inspect_fail(req, req->name, "a member's name "
                                        "differs from one this API reads "
                                        "only in case");
            }
        }
    }

    return 0;
}


/* a client's member name, fit for a JSON string and a log line */

static void
llm_inspect_copy_name(llm_request_t *req, const char *name)
{
    size_t  i;

    /* the name lives in the tree, which goes */
    for (i = 0; name[i] && i < LLM_INSPECT_NAME_MAX - 1; i++) {
        req->name[i] = (name[i] > 0x20 && name[i] < 0x7f && name[i] != '"'
                        && name[i] != '\\')
                       ? name[i] : '?';
    }

    req->name[i] = '\0';
}


static int
llm_inspect_model(const cJSON *root, llm_request_t *req)
{
    size_t        i;
    const cJSON  *model;

    model = cJSON_GetObjectItemCaseSensitive(root, "model");

    if (!cJSON_IsString(model) || model->valuestring[0] == '\0') {
        return llm_inspect_fail(req, "model",
                                "model must be a non-empty string");
    }

    req->model_len = strlen(model->valuestring);

    if (req->model_len >= LLM_RECORD_MODEL_MAX) {
        return llm_inspect_fail(req, "model", "model is too long");
    }

    /* it is written into headers, log lines and the ledger */
    for (i = 0; i < req->model_len; i++) {
        if ((unsigned char) model->valuestring[i] < 0x20
            || model->valuestring[i] == 0x7f)
        {
            return llm_inspect_fail(req, "model", "model must not contain "
                                    "control characters");
        }
    }

    memcpy(req->model, model->valuestring, req->model_len + 1);

    return 0;
}


/* what the gateway does not serve, and the stream flag */

static int
llm_inspect_options(llm_api_e api, const cJSON *root, llm_request_t *req)
{
    const cJSON  *v;

    /*
     * A service tier priced above the model's price: the ledger would
     * bill it at the model's.
     */
    v = cJSON_GetObjectItemCaseSensitive(root, "service_tier");

    if (cJSON_IsString(v)
        && (strcmp(v->valuestring, "priority") == 0
            || strcmp(v->valuestring, "scale") == 0))
    {
        return llm_inspect_fail(req, "service_tier", "this service tier is "
                                "not offered through this gateway");
    }

    /* answered later, elsewhere: its usage never passes the gateway */
    if (api == LLM_API_RESPONSES
        && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "background")))
    {
        return llm_inspect_fail(req, "background", "background responses "
                                "are not served through this gateway: it "
                                "meters a response as it passes");
    }

    /* thinking is part of max_tokens: Anthropic refuses a budget above it */
    if (api == LLM_API_ANTHROPIC && req->api != LLM_API_COUNT_TOKENS) {
        v = cJSON_GetObjectItemCaseSensitive(root, "thinking");
        v = cJSON_GetObjectItemCaseSensitive(v, "budget_tokens");

        if (cJSON_IsNumber(v) && v->valuedouble >= (double) req->max_tokens) {

            if (req->max_tokens_lowered) {
                snprintf(req->text, sizeof(req->text),
                         "thinking.budget_tokens must be below max_tokens, "
                         "which this tier lowers to %lld.",
                         (long long) req->max_tokens);
                return llm_inspect_fail(req, "thinking", req->text);
            }

            return llm_inspect_fail(req, "thinking", "thinking.budget_tokens "
                                    "must be below max_tokens");
        }
    }

    v = cJSON_GetObjectItemCaseSensitive(root, "stream");

    if (v != NULL && !cJSON_IsNull(v)) {
        if (!cJSON_IsBool(v)) {
            return llm_inspect_fail(req, "stream", "stream must be a boolean");
        }

        req->stream = cJSON_IsTrue(v);
    }

    return 0;
}


/* the prompt walked, and the bounds of the request's tokens */

static int
llm_inspect_estimate(llm_api_e api, const cJSON *root, size_t len,
    const llm_inspect_conf_t *cf, llm_request_t *req)
{
    int64_t              fixed;
    llm_inspect_walk_t   w;

    memset(&w, 0, sizeof(llm_inspect_walk_t));
    w.api = api;
    w.req = req;

    if (llm_inspect_prompt(&w, root) != 0) {
        return -1;
    }

    req->prompt_tokens = w.text + w.dense
                         + (int64_t) req->parts.images * cf->image_tokens;

    /* the providers' own prompt that explains the tools to the model */
    if (req->parts.tools) {
        req->prompt_tokens += (api == LLM_API_ANTHROPIC)
                              ? LLM_INSPECT_TOOLS_ANTHROPIC
                              : LLM_INSPECT_TOOLS_OPENAI;
    }

    fixed = (int64_t) len + 4 * (int64_t) req->parts.messages + 16
            + (req->parts.tools ? LLM_INSPECT_TOOLS_PROMPT : 0)
            + (int64_t) req->parts.images * cf->image_tokens;

    if (req->unbounded) {
        /* nothing smaller is an upper bound */
        req->prompt_tokens = cf->context_tokens > req->prompt_tokens
                             ? cf->context_tokens : req->prompt_tokens;
        fixed += cf->context_tokens;
    }

    req->prompt_bound = fixed;

    /* a prompt never costs less than the estimate reserved for it */
    if (req->prompt_bound < req->prompt_tokens) {
        req->prompt_bound = req->prompt_tokens;
    }

    req->output_bound = req->n * req->max_tokens + w.predicted;

    return 0;
}


/*
 * Anthropic streams always carry usage; an OpenAI stream carries it only
 * when asked, and the gateway must meter every stream.
 */

static int
llm_inspect_usage(llm_api_e api, const cJSON *root, llm_request_t *req)
{
    const cJSON  *opts, *usage;

    if (api != LLM_API_OPENAI || !req->stream) {
        return 0;
    }

    opts = cJSON_GetObjectItemCaseSensitive(root, "stream_options");

    if (opts != NULL && !cJSON_IsNull(opts) && !cJSON_IsObject(opts)) {
        return llm_inspect_fail(req, "stream_options",
                                "stream_options must be an object");
    }

    usage = cJSON_GetObjectItemCaseSensitive(opts, "include_usage");

    if (!cJSON_IsTrue(usage)) {
        req->add_include_usage = 1;

        /* present without usage: replaced, not spliced */
        if (opts != NULL) {
            req->rebuild = 1;
        }
    }

    return 0;
}


/*
 * An embeddings request, read as OpenAI reads it: its five members and no
 * other (a member the gateway did not read could change what is billed),
 * the model, the input.  No output: nothing but the prompt to reserve.
 */

static int
llm_inspect_embeddings(const cJSON *root, llm_request_t *req)
{
    double        d;
    const char   *name;
    const cJSON  *v;

    v = NULL;
    name = llm_inspect_repeated(root);

    if (name == NULL) {
        for (v = root->child; v; v = v->next) {
            if (strcmp(v->string, "model") != 0
                && strcmp(v->string, "input") != 0
                && strcmp(v->string, "encoding_format") != 0
                && strcmp(v->string, "dimensions") != 0
                && strcmp(v->string, "user") != 0)
            {
                name = v->string;
                break;
            }
        }
    }

    if (name != NULL) {
        llm_inspect_copy_name(req, name);

        return llm_inspect_fail(req, req->name,
                                (v == NULL) ? "a member appears more than "
                                              "once in an object of the "
                                              "request body"
                                            : "this member is not part of "
                                              "the embeddings API");
    }

    if (llm_inspect_model(root, req) != 0) {
        return -1;
    }

    v = cJSON_GetObjectItemCaseSensitive(root, "encoding_format");

    if (v != NULL && !cJSON_IsNull(v)
        && !llm_inspect_is(v, "float") && !llm_inspect_is(v, "base64"))
    {
        return llm_inspect_fail(req, "encoding_format", "encoding_format "
                                "must be \"float\" or \"base64\"");
    }

    v = cJSON_GetObjectItemCaseSensitive(root, "dimensions");

    if (v != NULL && !cJSON_IsNull(v)
        && (!cJSON_IsNumber(v) || llm_inspect_integer(v, &d) != 0 || d < 1))
    {
        return llm_inspect_fail(req, "dimensions", "dimensions must be a "
                                "positive integer");
    }

    v = cJSON_GetObjectItemCaseSensitive(root, "user");

    if (v != NULL && !cJSON_IsNull(v) && !cJSON_IsString(v)) {
        return llm_inspect_fail(req, "user", "user must be a string");
    }

    return llm_inspect_embed_input(cJSON_GetObjectItemCaseSensitive(root,
                                                                    "input"),
                                   req);
}


/*
 * A string, an array of strings, an array of tokens (one input) or an
 * array of token arrays.  A token array's length is its tokens, exactly:
 * it is held to OpenAI's limits here.  A string's tokens are not known
 * before the upstream's tokenizer runs: the upstream holds it to them.
 */

static int
llm_inspect_embed_input(const cJSON *input, llm_request_t *req)
{
    int64_t       n, total, bytes, inputs;
    const cJSON  *v, *first;

    if (input == NULL || cJSON_IsNull(input)) {
        return llm_inspect_fail(req, "input", "input is required");
    }

    if (cJSON_IsString(input)) {
        if (input->valuestring[0] == '\0') {
            return llm_inspect_fail(req, "input", "input must not be an "
                                    "empty string");
        }

        bytes = (int64_t) strlen(input->valuestring);

        req->prompt_tokens = (bytes + 3) / 4;
        req->prompt_bound = bytes;

        return 0;
    }

    if (!cJSON_IsArray(input)) {
        return llm_inspect_fail(req, "input", "input must be a string, an "
                                "array of strings, an array of tokens or an "
                                "array of token arrays");
    }

    first = input->child;

    if (first == NULL) {
        return llm_inspect_fail(req, "input", "input must not be an empty "
                                "array");
    }

    if (cJSON_IsNumber(first)) {
        /* one input, as tokens */
        n = llm_inspect_embed_tokens(input);

        if (n < 0) {
            return llm_inspect_fail(req, "input", "a token must be an "
                                    "integer from 0 to 2147483647");
        }

        if (n > LLM_INSPECT_EMBED_TOKENS) {
            return llm_inspect_fail(req, "input", "an input must not be "
                                    "above "
                                    LLM_INSPECT_STR(LLM_INSPECT_EMBED_TOKENS)
                                    " tokens");
        }

        req->prompt_tokens = n;
        req->prompt_bound = n;

        return 0;
    }

    inputs = 0;
    total = 0;
    bytes = 0;

    cJSON_ArrayForEach(v, input) {

        if (++inputs > LLM_INSPECT_EMBED_INPUTS) {
            return llm_inspect_fail(req, "input", "input must not hold more "
                                    "than "
                                    LLM_INSPECT_STR(LLM_INSPECT_EMBED_INPUTS)
                                    " inputs");
        }

        if (cJSON_IsString(first)) {
            if (!cJSON_IsString(v) || v->valuestring[0] == '\0') {
                return llm_inspect_fail(req, "input", "each input of an "
                                        "array of strings must be a "
                                        "non-empty string");
            }

            n = (int64_t) strlen(v->valuestring);

            bytes += n;
            req->prompt_tokens += (n + 3) / 4;
            continue;
        }

        if (!cJSON_IsArray(first) || !cJSON_IsArray(v) || v->child == NULL) {
            return llm_inspect_fail(req, "input", "each input of an array "
                                    "of token arrays must be a non-empty "
                                    "array of tokens");
        }

        n = llm_inspect_embed_tokens(v);

        if (n < 0) {
            return llm_inspect_fail(req, "input", "a token must be an "
                                    "integer from 0 to 2147483647");
        }

        if (n > LLM_INSPECT_EMBED_TOKENS) {
            return llm_inspect_fail(req, "input", "an input must not be "
                                    "above "
                                    LLM_INSPECT_STR(LLM_INSPECT_EMBED_TOKENS)
                                    " tokens");
        }

        total += n;

        if (total > LLM_INSPECT_EMBED_TOTAL) {
            return llm_inspect_fail(req, "input", "the inputs must not be "
                                    "above "
                                    LLM_INSPECT_STR(LLM_INSPECT_EMBED_TOTAL)
                                    " tokens in all");
        }
    }

    req->prompt_tokens += total;
    req->prompt_bound = bytes + total;

    return 0;
}


/* the tokens of a token array, or -1 if one is not a token */

static int64_t
llm_inspect_embed_tokens(const cJSON *v)
{
    double        d;
    int64_t       n;
    const cJSON  *t;

    n = 0;

    cJSON_ArrayForEach(t, v) {
        if (!cJSON_IsNumber(t) || llm_inspect_integer(t, &d) != 0
            || d < 0 || d > 2147483647.0)
        {
            return -1;
        }

        n++;
    }

    return n;
}


static int
llm_inspect_fail(llm_request_t *req, const char *param, const char *message)
{
    req->param = param;
    req->message = message;

    return -1;
}


/*
 * The output limit, under the one name the dialect has.  Chat has two for
 * one limit: a body that names both could be read by one name here and
 * by the other upstream, so it is refused, as OpenAI refuses it.  Above
 * the tier's maximum it is refused, or lowered to it where the tier says
 * so; what is not an exact positive integer is refused either way.
 */

static int
llm_inspect_limit(llm_api_e api, const cJSON *root,
    const llm_inspect_conf_t *cf, llm_request_t *req)
{
    double         d;
    const char    *name;
    const cJSON   *v, *other;

    if (api == LLM_API_RESPONSES) {
        name = "max_output_tokens";

    } else {
        name = "max_tokens";
    }

    v = cJSON_GetObjectItemCaseSensitive(root, name);
    other = NULL;

    if (api == LLM_API_OPENAI) {
        other = cJSON_GetObjectItemCaseSensitive(root,
                                                 "max_completion_tokens");

        if (other != NULL && !cJSON_IsNull(other)) {
            if (v != NULL && !cJSON_IsNull(v)) {
                return llm_inspect_fail(req, "max_tokens",
                                        "Setting 'max_tokens' and "
                                        "'max_completion_tokens' at the "
                                        "same time is not supported.");
            }

            name = "max_completion_tokens";
            v = other;
            other = NULL;
        }
    }

    if (v == NULL || cJSON_IsNull(v)) {
        req->max_tokens = cf->default_max_tokens;
        req->max_tokens_missing = 1;

        /*
         * A null limit must be replaced, not followed by another; Chat's
         * default may go under either name, so either null is removed.
         */
        req->rebuild = (v != NULL || other != NULL);
        return 0;
    }

    req->max_name = name;

    if (!cJSON_IsNumber(v)) {
        return llm_inspect_fail(req, name, "the output limit must be an "
                                "integer");
    }

    if (llm_inspect_integer(v, &d) != 0 || d < 1) {
        return llm_inspect_fail(req, name, "the output limit must be a "
                                "positive integer");
    }

    if (d > (double) cf->max_tokens_limit) {

        /* 2^53 may stand for a larger integer: what was asked is unknown */
        if (!cf->lower || d >= LLM_INSPECT_INT_MAX) {
            snprintf(req->text, sizeof(req->text),
                     "%s is %.0f; this tier allows at most %lld.", name, d,
                     (long long) cf->max_tokens_limit);
            return llm_inspect_fail(req, name, req->text);
        }

        /* the upstream gets the maximum, under the member the client sent */
        req->max_tokens_asked = (int64_t) d;
        req->max_tokens = cf->max_tokens_limit;
        req->max_tokens_lowered = 1;
        req->rebuild = 1;
        return 0;
    }

    req->max_tokens = (int64_t) d;

    return 0;
}


/* Chat's n: every choice is generated, and billed */

static int
llm_inspect_n(const cJSON *root, llm_request_t *req)
{
    double         d;
    const cJSON   *v;

    v = cJSON_GetObjectItemCaseSensitive(root, "n");

    if (v == NULL || cJSON_IsNull(v)) {
        return 0;
    }

    if (!cJSON_IsNumber(v) || llm_inspect_integer(v, &d) != 0
        || d < 1 || d > LLM_INSPECT_N_MAX)
    {
        return llm_inspect_fail(req, "n", "n must be an integer from 1 "
                                "to 128");
    }

    req->n = (int64_t) d;

    return 0;
}


static int
llm_inspect_integer(const cJSON *v, double *d)
{
    *d = v->valuedouble;

    if (*d != floor(*d) || *d < -LLM_INSPECT_INT_MAX
        || *d > LLM_INSPECT_INT_MAX)
    {
        return -1;
    }

    return 0;
}


/* the messages or input items, the system prompt, tools and references */

static int
llm_inspect_prompt(llm_inspect_walk_t *w, const cJSON *root)
{
    const cJSON    *v, *m;
    llm_request_t  *req;

    req = w->req;

    if (w->api == LLM_API_RESPONSES) {
        v = cJSON_GetObjectItemCaseSensitive(root, "input");

        llm_inspect_ref(w, cJSON_GetObjectItemCaseSensitive(root,
                                                    "previous_response_id"),
                        "previous_response_id");
        llm_inspect_ref(w, cJSON_GetObjectItemCaseSensitive(root,
                                                            "conversation"),
                        "conversation");
        llm_inspect_ref(w, cJSON_GetObjectItemCaseSensitive(root, "prompt"),
                        "prompt");

        if (cJSON_IsString(v)) {
            /* one user message */
            req->parts.messages = 1;
            w->text += 3 + llm_inspect_string(v);

        } else if (cJSON_IsArray(v)) {
            cJSON_ArrayForEach(m, v) {
                if (llm_inspect_item(w, m) != 0) {
                    return -1;
                }
            }

        } else if (v != NULL && !cJSON_IsNull(v)) {
            return llm_inspect_fail(req, "input",
                                    "input must be a string or an array");

        } else if (req->parts.refs == 0) {
            return llm_inspect_fail(req, "input", "input is required "
                                    "without previous_response_id, "
                                    "conversation or prompt");
        }

        w->text += llm_inspect_text(cJSON_GetObjectItemCaseSensitive(root,
                                                             "instructions"));

    } else {
        v = cJSON_GetObjectItemCaseSensitive(root, "messages");

        if (!cJSON_IsArray(v)) {
            return llm_inspect_fail(req, "messages",
                                    "messages must be an array");
        }

        cJSON_ArrayForEach(m, v) {
            if (llm_inspect_item(w, m) != 0) {
                return -1;
            }
        }

        if (w->api == LLM_API_ANTHROPIC) {
            /* text blocks only, as Anthropic takes them */
            v = cJSON_GetObjectItemCaseSensitive(root, "system");

            if (cJSON_IsArray(v)) {
                cJSON_ArrayForEach(m, v) {
                    if (!cJSON_IsObject(m)
                        || !llm_inspect_is(cJSON_GetObjectItemCaseSensitive(
                                               m, "type"), "text"))
                    {
                        return llm_inspect_fail(req, "system", "system "
                                                "holds text blocks only");
                    }
                }
            }

            w->text += llm_inspect_text(v);

            v = cJSON_GetObjectItemCaseSensitive(root, "mcp_servers");

            if (cJSON_IsArray(v)) {
                cJSON_ArrayForEach(m, v) {
                    llm_inspect_ref(w, m, "mcp_servers");
                }
            }

            llm_inspect_ref(w, cJSON_GetObjectItemCaseSensitive(root,
                                                                "container"),
                            "container");

        } else {
            if (llm_inspect_tools(w, cJSON_GetObjectItemCaseSensitive(root,
                                                                "functions"),
                                  "functions")
                != 0)
            {
                return -1;
            }

            v = cJSON_GetObjectItemCaseSensitive(root, "web_search_options");

            if (v != NULL && !cJSON_IsNull(v)) {
                llm_inspect_unbounded(req, "web_search_options");
            }

            /* predicted output that is not used is billed as output */
            v = cJSON_GetObjectItemCaseSensitive(root, "prediction");
            v = cJSON_GetObjectItemCaseSensitive(v, "content");
            w->predicted = llm_inspect_json_bytes(v);
        }
    }

    if (llm_inspect_tools(w, cJSON_GetObjectItemCaseSensitive(root, "tools"),
                          "tools")
        != 0)
    {
        return -1;
    }

    w->text += 3;

    return 0;
}


/* a message, or a Responses input item */

static int
llm_inspect_item(llm_inspect_walk_t *w, const cJSON *m)
{
    const char     *param;
    const cJSON    *v, *call;
    llm_request_t  *req;

    req = w->req;
    param = (w->api == LLM_API_RESPONSES) ? "input" : "messages";

    if (!cJSON_IsObject(m)) {
        return llm_inspect_fail(req, param, "each message must be an object");
    }

    req->parts.messages++;
    w->text += 3;

    v = cJSON_GetObjectItemCaseSensitive(m, "type");

    if (w->api == LLM_API_RESPONSES && v != NULL && !cJSON_IsNull(v)
        && !llm_inspect_is(v, "message"))
    {
        if (llm_inspect_is(v, "item_reference")) {
            llm_inspect_ref(w, m, "item_reference");
            return 0;
        }

        if (llm_inspect_is(v, "function_call")
            || llm_inspect_is(v, "custom_tool_call"))
        {
            w->dense += llm_inspect_dense(
                            cJSON_GetObjectItemCaseSensitive(m, "arguments"))
                        + llm_inspect_dense(
                            cJSON_GetObjectItemCaseSensitive(m, "input"))
                        + llm_inspect_dense(
                            cJSON_GetObjectItemCaseSensitive(m, "name"))
                        + llm_inspect_dense(
                            cJSON_GetObjectItemCaseSensitive(m, "call_id"));
            return 0;
        }

        if (llm_inspect_is(v, "function_call_output")
            || llm_inspect_is(v, "custom_tool_call_output"))
        {
            w->dense += llm_inspect_dense(
                            cJSON_GetObjectItemCaseSensitive(m, "call_id"));

            return llm_inspect_result(w,
                             cJSON_GetObjectItemCaseSensitive(m, "output"),
                             param);
        }

        if (llm_inspect_is(v, "computer_call_output")) {
            /* a screenshot */
            req->parts.images++;
            w->dense += llm_inspect_json_tokens(m);
            return 0;
        }

        if (llm_inspect_is(v, "reasoning")
            || llm_inspect_is(v, "file_search_call")
            || llm_inspect_is(v, "web_search_call")
            || llm_inspect_is(v, "computer_call")
            || llm_inspect_is(v, "local_shell_call")
            || llm_inspect_is(v, "local_shell_call_output")
            || llm_inspect_is(v, "mcp_call")
            || llm_inspect_is(v, "mcp_list_tools")
            || llm_inspect_is(v, "mcp_approval_request")
            || llm_inspect_is(v, "mcp_approval_response")
            || llm_inspect_is(v, "image_generation_call")
            || llm_inspect_is(v, "code_interpreter_call"))
        {
            w->dense += llm_inspect_json_tokens(m);
            return 0;
        }

        return llm_inspect_fail(req, param, "an input item of a type this "
                                "API does not have");
    }

    v = cJSON_GetObjectItemCaseSensitive(m, "content");

    /* what a tool returned to Chat: a message of the role "tool" */
    if (w->api == LLM_API_OPENAI
        && (llm_inspect_is(cJSON_GetObjectItemCaseSensitive(m, "role"),
                           "tool")
            || llm_inspect_is(cJSON_GetObjectItemCaseSensitive(m, "role"),
                              "function")))
    {
        w->dense += llm_inspect_dense(
                        cJSON_GetObjectItemCaseSensitive(m, "tool_call_id"))
                    + llm_inspect_dense(
                        cJSON_GetObjectItemCaseSensitive(m, "name"));

        return llm_inspect_result(w, v, param);
    }

    if (cJSON_IsArray(v)) {
        if (llm_inspect_content(w, v, param) != 0) {
            return -1;
        }

    } else {
        w->text += llm_inspect_text(v);
    }

    if (w->api == LLM_API_OPENAI) {
        v = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");

        if (cJSON_IsArray(v)) {
            cJSON_ArrayForEach(call, v) {
                w->dense += llm_inspect_json_tokens(call);
            }
        }

        w->dense += llm_inspect_json_tokens(
                        cJSON_GetObjectItemCaseSensitive(m, "function_call"));
        w->text += llm_inspect_text(
                       cJSON_GetObjectItemCaseSensitive(m, "refusal"));

        /* an earlier answer's audio, by its id */
        llm_inspect_ref(w, cJSON_GetObjectItemCaseSensitive(m, "audio"),
                        "audio");
    }

    return 0;
}


/* an array of content parts or blocks */

static int
llm_inspect_content(llm_inspect_walk_t *w, const cJSON *content,
    const char *param)
{
    const cJSON  *part;

    cJSON_ArrayForEach(part, content) {
        if (llm_inspect_part(w, part, param) != 0) {
            return -1;
        }
    }

    return 0;
}


static int
llm_inspect_part(llm_inspect_walk_t *w, const cJSON *part, const char *param)
{
    const cJSON    *type, *v;
    llm_request_t  *req;

    req = w->req;

    if (!cJSON_IsObject(part)) {
        return llm_inspect_fail(req, param, "each content part must be an "
                                "object");
    }

    type = cJSON_GetObjectItemCaseSensitive(part, "type");

    if (!cJSON_IsString(type)) {
        return llm_inspect_fail(req, param, "each content part must have a "
                                "type");
    }

    if ((w->api != LLM_API_RESPONSES && llm_inspect_is(type, "text"))
        || (w->api == LLM_API_RESPONSES
            && (llm_inspect_is(type, "input_text")
                || llm_inspect_is(type, "output_text"))))
    {
        v = cJSON_GetObjectItemCaseSensitive(part, "text");

        if (w->result) {
            w->dense += llm_inspect_dense(v);

        } else {
            w->text += llm_inspect_text(v);
        }

        return 0;
    }

    if (llm_inspect_is(type, "refusal") && w->api != LLM_API_ANTHROPIC) {
        w->text += llm_inspect_text(
                       cJSON_GetObjectItemCaseSensitive(part, "refusal"));
        return 0;
    }

    switch (w->api) {

    case LLM_API_OPENAI:
        if (llm_inspect_is(type, "image_url")) {
            req->parts.images++;
            return 0;
        }

        if (llm_inspect_is(type, "input_audio")) {
            req->parts.audio++;
            llm_inspect_unbounded(req, "input_audio");
            return 0;
        }

        if (llm_inspect_is(type, "file")) {
            req->parts.files++;
            llm_inspect_unbounded(req, "file");
            return 0;
        }

        break;

    case LLM_API_ANTHROPIC:
        if (llm_inspect_is(type, "image")) {
            req->parts.images++;
            return 0;
        }

        if (llm_inspect_is(type, "document")) {
            req->parts.files++;
            llm_inspect_unbounded(req, "document");
            return 0;
        }

        if (llm_inspect_is(type, "tool_result")) {
            w->dense += llm_inspect_dense(
                            cJSON_GetObjectItemCaseSensitive(part,
                                                             "tool_use_id"));

            return llm_inspect_result(w,
                             cJSON_GetObjectItemCaseSensitive(part, "content"),
                             param);
        }

        if (llm_inspect_is(type, "tool_use")
            || llm_inspect_is(type, "server_tool_use")
            || llm_inspect_is(type, "thinking")
            || llm_inspect_is(type, "redacted_thinking")
            || llm_inspect_is(type, "search_result")
            || llm_inspect_is(type, "web_search_tool_result")
            || llm_inspect_is(type, "web_fetch_tool_result")
            || llm_inspect_is(type, "code_execution_tool_result"))
        {
            w->dense += llm_inspect_json_tokens(part);
            return 0;
        }

        if (llm_inspect_is(type, "container_upload")) {
            req->parts.files++;
            llm_inspect_unbounded(req, "container_upload");
            return 0;
        }

        break;

    default: /* LLM_API_RESPONSES */
        if (llm_inspect_is(type, "input_image")) {
            req->parts.images++;
            return 0;
        }

        if (llm_inspect_is(type, "input_file")) {
            req->parts.files++;
            llm_inspect_unbounded(req, "input_file");
            return 0;
        }

        if (llm_inspect_is(type, "input_audio")) {
            req->parts.audio++;
            llm_inspect_unbounded(req, "input_audio");
            return 0;
        }

        break;
    }

    return llm_inspect_fail(req, param, "a content part of a type this API "
                            "does not have");
}


/*
 * What a tool returned: a string, or parts (text, images, files), its
 * text counted as the data it usually is, not as prose.
 */

static int
llm_inspect_result(llm_inspect_walk_t *w, const cJSON *v, const char *param)
{
    int       rc;
    unsigned  outer;

    if (!cJSON_IsArray(v)) {
        w->dense += llm_inspect_dense(v);
        return 0;
    }

    outer = w->result;
    w->result = 1;

    rc = llm_inspect_content(w, v, param);

    w->result = outer;

    return rc;
}


/*
 * Tool definitions are prompt.  A tool the provider runs itself (search,
 * code, a remote server) adds what it found to the prompt: unbounded.
 */

static int
llm_inspect_tools(llm_inspect_walk_t *w, const cJSON *tools,
    const char *param)
{
    const cJSON    *t, *type;
    llm_request_t  *req;

    req = w->req;

    if (tools == NULL || cJSON_IsNull(tools)) {
        return 0;
    }

    if (!cJSON_IsArray(tools)) {
        return llm_inspect_fail(req, param, "tools must be an array");
    }

    cJSON_ArrayForEach(t, tools) {
        if (!cJSON_IsObject(t)) {
            return llm_inspect_fail(req, param, "each tool must be an "
                                    "object");
        }

        req->parts.tools++;
        w->dense += llm_inspect_json_tokens(t);

        type = cJSON_GetObjectItemCaseSensitive(t, "type");

        if (type == NULL || cJSON_IsNull(type)
            || llm_inspect_is(type, "function")
            || llm_inspect_is(type, "custom"))
        {
            continue;
        }

        if (!cJSON_IsString(type)) {
            return llm_inspect_fail(req, param, "a tool's type must be a "
                                    "string");
        }

        /* the client runs these: what they return comes in the next call */
        if (strncmp(type->valuestring, "bash_", 5) == 0
            || strncmp(type->valuestring, "text_editor_", 12) == 0
            || strncmp(type->valuestring, "computer_", 9) == 0
            || llm_inspect_is(type, "local_shell"))
        {
            continue;
        }

        llm_inspect_unbounded(req, param);
    }

    return 0;
}


/* a reference to stored context: its size is not in the body */

static void
llm_inspect_ref(llm_inspect_walk_t *w, const cJSON *v, const char *name)
{
    if (v == NULL || cJSON_IsNull(v)) {
        return;
    }

    w->req->parts.refs++;
    llm_inspect_unbounded(w->req, name);
}


static void
llm_inspect_unbounded(llm_request_t *req, const char *what)
{
    if (req->unbounded == NULL) {
        req->unbounded = what;
    }
}


/*
 * The name of a member that appears twice in any object of v, or NULL.
 * Small objects are compared pairwise; larger ones sorted, so that a body
 * of many members costs n log n, not n squared.
 */

static const char *
llm_inspect_repeated(const cJSON *v)
{
    size_t         i, j, n;
    const char    *name, **names;
    const cJSON   *m, *c;

    if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) {
        return NULL;
    }

    if (cJSON_IsObject(v)) {
        n = 0;

        for (m = v->child; m; m = m->next) {
            n++;
        }

        if (n <= LLM_INSPECT_PAIRWISE) {
            for (m = v->child; m; m = m->next) {
                for (c = m->next; c; c = c->next) {
                    if (strcmp(m->string, c->string) == 0) {
                        return m->string;
                    }
                }
            }

        } else {
            names = cJSON_malloc(n * sizeof(char *));
            if (names == NULL) {
                return "";
            }

            i = 0;

            for (m = v->child; m; m = m->next) {
                names[i++] = m->string;
            }

            qsort(names, n, sizeof(char *), llm_inspect_name_cmp);

            name = NULL;

            for (j = 1; j < n; j++) {
                if (strcmp(names[j - 1], names[j]) == 0) {
                    name = names[j];
                    break;
                }
            }

            cJSON_free(names);

            if (name != NULL) {
                return name;
            }
        }
    }

    for (c = v->child; c; c = c->next) {
        name = llm_inspect_repeated(c);

        if (name != NULL) {
            return name;
        }
    }

    return NULL;
}


static int
llm_inspect_name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char **) a, *(const char **) b);
}


int
llm_inspect_scan(const char *body, size_t len, size_t max_depth,
    size_t max_string, const char **what)
{
    size_t                depth, slen;
    unsigned              in_string, escaped, closed;
    const unsigned char  *p, *last;

    depth = 0;
    slen = 0;
    in_string = 0;
    escaped = 0;
    closed = 0;

    last = (const unsigned char *) body + len;

    for (p = (const unsigned char *) body; p < last; p++) {

        if (in_string) {
            if (*p < 0x20) {
                /* JSON has no raw control bytes in strings; cJSON reads them */
                *what = "a control character in a string of the request body";
                return -1;
            }

            if (escaped) {
                escaped = 0;

                /*
                 * A NUL would end the string where the gateway reads it
                 * (the model it allows and prices) and not where the
                 * upstream does.
                 */
                if (*p == 'u' && last - p > 4 && memcmp(p + 1, "0000", 4) == 0)
                {
                    *what = "a string in the request body holds \\u0000";
                    return -1;
                }

            } else if (*p == '\\') {
                escaped = 1;

            } else if (*p == '"') {
                in_string = 0;
                continue;
            }

            if (++slen > max_string) {
                *what = "a string in the request body is too long";
                return -1;
            }

            continue;
        }

        /* what cJSON would skip, and what it would not read at all */
        if ((*p < 0x20 && *p != ' ' && *p != '\t' && *p != '\n'
             && *p != '\r')
            || (closed && *p != ' ' && *p != '\t' && *p != '\n'
                && *p != '\r'))
        {
            *what = closed ? "text after the JSON value of the request body"
                           : "a control character in the request body";
            return -1;
        }

        switch (*p) {

        case '"':
            in_string = 1;
            slen = 0;
            break;

        case '{':
        case '[':
            if (++depth > max_depth) {
                *what = "the request body is nested too deeply";
                return -1;
            }

            break;

        case '}':
        case ']':
            if (depth && --depth == 0) {
                closed = 1;
            }

            break;
        }
    }

    return 0;
}


/* ceil(bytes / 4) of a string, or of the "text" of each part of an array */
static int64_t
llm_inspect_text(const cJSON *v)
{
    int64_t        n;
    const cJSON   *part;

    if (cJSON_IsString(v)) {
        return llm_inspect_string(v);
    }

    n = 0;

    if (cJSON_IsArray(v)) {
        cJSON_ArrayForEach(part, v) {
            n += llm_inspect_string(cJSON_GetObjectItemCaseSensitive(part,
                                                                     "text"));
        }
    }

    return n;
}


static int64_t
llm_inspect_string(const cJSON *v)
{
    if (!cJSON_IsString(v)) {
        return 0;
    }

    return ((int64_t) strlen(v->valuestring) + 3) / 4;
}


/*
 * About the bytes of v as compact JSON: names and strings as decoded, two
 * quotes each, a colon or comma each, a number as 8.  The tree is as deep
 * as the scan allowed.
 */

static int64_t
llm_inspect_json_bytes(const cJSON *v)
{
    int64_t        n;
    const cJSON   *c;

    if (v == NULL) {
        return 0;
    }

    if (cJSON_IsString(v)) {
        return (int64_t) strlen(v->valuestring) + 2;
    }

    if (cJSON_IsNumber(v)) {
        return 8;
    }

    if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) {
        return 5;
    }

    n = 2;

    for (c = v->child; c; c = c->next) {
        n += 1 + llm_inspect_json_bytes(c);

        if (c->string != NULL) {
            n += (int64_t) strlen(c->string) + 3;
        }
    }

    return n;
}


/*
 * Tokens of text that is data rather than prose (JSON, numbers, ids, code):
 * bytes / 4 holds for words, but such text is two or three times denser.
 * Each run of one kind of byte is at least a token, as the tokenizers
 * split them: letters five a token (a capital after a small letter starts
 * a run), digits three, punctuation two, other bytes (UTF-8) two; blanks
 * go with the next word, a run of them is one.  It stays above o200k's
 * count of JSON data, ids and prose alike, and never above one a byte;
 * base64 is denser still.
 */

static int64_t
llm_inspect_dense(const cJSON *v)
{
    if (!cJSON_IsString(v)) {
        return 0;
    }

    return llm_inspect_dense_bytes(v->valuestring, strlen(v->valuestring));
}


static int64_t
llm_inspect_dense_bytes(const char *s, size_t len)
{
    int64_t               n;
    size_t                run;
    unsigned              k, c, prev;
    const unsigned char  *p, *last;

    static const unsigned char  per[] = { 5, 3, 2, 2 };

    n = 0;
    p = (const unsigned char *) s;
    last = p + len;

    while (p < last) {
        k = llm_inspect_class(*p);
        run = 1;
        prev = *p++;

        while (p < last && llm_inspect_class(*p) == k) {
            c = *p;

            if (k == 0 && c >= 'A' && c <= 'Z' && prev >= 'a' && prev <= 'z')
            {
                break;
            }

            prev = c;
            p++;
            run++;
        }

        if (k == 4) {
            n += (run > 1);

        } else {
            n += (int64_t) ((run + per[k] - 1) / per[k]);
        }
    }

    return n;
}


/* letters 0, digits 1, punctuation 2, other bytes 3, blanks 4 */

static unsigned
llm_inspect_class(unsigned c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        return 0;
    }

    if (c >= '0' && c <= '9') {
        return 1;
    }

    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        return 4;
    }

    return (c < 0x80) ? 2 : 3;
}


/*
 * Tokens of v as compact JSON: each name and string by the rule above,
 * plus one for the quotes and the colon or comma next to them; an object
 * or array one; a number its digits, or 5 with a fraction.  The tree is as
 * deep as the scan allowed.
 */

static int64_t
llm_inspect_json_tokens(const cJSON *v)
{
    int          w;
    int64_t      n;
    char         digits[24];
    const cJSON *c;

    if (v == NULL) {
        return 0;
    }

    if (cJSON_IsString(v)) {
        return llm_inspect_dense(v) + 1;
    }

    if (cJSON_IsNumber(v)) {
        if (v->valuedouble == floor(v->valuedouble)
            && fabs(v->valuedouble) < 1e15)
        {
            w = snprintf(digits, sizeof(digits), "%.0f", v->valuedouble);
            return llm_inspect_dense_bytes(digits, (size_t) w) + 1;
        }

        return 5;
    }

    if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) {
        return 1;
    }

    n = 1;

    for (c = v->child; c; c = c->next) {
        n += llm_inspect_json_tokens(c);

        if (c->string != NULL) {
            n += 1 + llm_inspect_dense_bytes(c->string, strlen(c->string));
        }
    }

    return n;
}


static int
llm_inspect_is(const cJSON *v, const char *s)
{
    return cJSON_IsString(v) && strcmp(v->valuestring, s) == 0;
}


const char *
llm_inspect_max_name(const llm_request_t *req)
{
    if (req->max_name != NULL) {
        return req->max_name;
    }

    /* OpenAI's reasoning models refuse max_tokens in Chat */
    switch (req->api) {

    case LLM_API_OPENAI:
        return req->chat_max_tokens ? "max_tokens" : "max_completion_tokens";

    case LLM_API_RESPONSES:
        return "max_output_tokens";

    default:
        return "max_tokens";
    }
}


int
llm_inspect_set_model(llm_request_t *req, const char *model, size_t len)
{
    if (len == 0 || len >= LLM_RECORD_MODEL_MAX) {
        return -1;
    }

    memcpy(req->model, model, len);
    req->model[len] = '\0';
    req->model_len = len;

    req->model_changed = 1;
    req->rebuild = 1;

    return 0;
}


size_t
llm_inspect_splice(const char *body, size_t len, const llm_request_t *req,
    char *out, size_t cap)
{
    size_t   i, n, rest;
    int      w;

    if (cap < len + LLM_INSPECT_SPLICE_MAX) {
        return 0;
    }

    /* the body parsed as an object, so a '{' comes first after blanks */
    for (i = 0; i < len && body[i] != '{'; i++) { /* void */ }

    if (i == len) {
        return 0;
    }

    i++;
    memcpy(out, body, i);
    n = i;

    if (req->add_include_usage) {
        w = snprintf(out + n, cap - n, "\"stream_options\":"
                     "{\"include_usage\":true},");
        n += w;
    }

    if (req->max_tokens_missing) {
        w = snprintf(out + n, cap - n, "\"%s\":%lld,",
                     llm_inspect_max_name(req), (long long) req->max_tokens);
        n += w;
    }

    /* the last member spliced in needs no comma before an empty object */
    rest = len - i;

    for ( /* void */ ; i < len; i++) {
        if (body[i] != ' ' && body[i] != '\t' && body[i] != '\r'
            && body[i] != '\n')
        {
            break;
        }
    }

    if (i < len && body[i] == '}') {
        n--;
    }

    memcpy(out + n, body + len - rest, rest);

    return n + rest;
}


char *
llm_inspect_rebuild(const char *body, size_t len, const llm_request_t *req)
{
    char    *s;
    cJSON   *root, *opts;

    root = cJSON_ParseWithLength(body, len);
    if (root == NULL) {
        return NULL;
    }

    s = NULL;

    if (req->model_changed
        && !cJSON_ReplaceItemInObjectCaseSensitive(root, "model",
                                               cJSON_CreateString(req->model)))
    {
        goto done;
    }

    if (req->add_include_usage) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, "stream_options");

        opts = cJSON_AddObjectToObject(root, "stream_options");
        if (opts == NULL
            || cJSON_AddTrueToObject(opts, "include_usage") == NULL)
        {
            goto done;
        }
    }

    if ((req->max_tokens_missing || req->max_tokens_lowered)
        && llm_inspect_rebuild_limit(root, req) != 0)
    {
        goto done;
    }

    s = cJSON_PrintUnformatted(root);

done:

    cJSON_Delete(root);

    return s;
}


/* the limit the upstream obeys, under its one name: no null beside it */

static int
llm_inspect_rebuild_limit(cJSON *root, const llm_request_t *req)
{
    cJSON        *v;
    const char   *name;
    const char  **p;

    static const char  *names[] = {
        "max_tokens", "max_completion_tokens", "max_output_tokens", NULL
    };

    name = llm_inspect_max_name(req);

    for (p = names; *p; p++) {
        v = cJSON_GetObjectItemCaseSensitive(root, *p);

        if (v != NULL && (strcmp(*p, name) == 0 || cJSON_IsNull(v))) {
            cJSON_DeleteItemFromObjectCaseSensitive(root, *p);
        }
    }

    if (cJSON_AddNumberToObject(root, name, (double) req->max_tokens)
        == NULL)
    {
        return -1;
    }

    return 0;
}
