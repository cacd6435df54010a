
/*
 * Request-body inspection; see llm_inspect.h.
 */


#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cJSON.h>

#include "llm_inspect.h"


/* integers above 2^53 are not exact in cJSON's double */
#define LLM_INSPECT_INT_MAX       9007199254740992.0


/*
 * The members the gateway reads.  cJSON keeps the first of repeated names,
 * most upstreams the last: a body that repeats one could be admitted for one
 * thing and served as another, so it is refused.
 */
static const char  *llm_inspect_members[] = {
    "model", "max_tokens", "max_completion_tokens", "max_output_tokens",
    "stream", "stream_options", "messages", "system", "input",
    "instructions", NULL
};

/* and inside stream_options */
static const char  *llm_inspect_options[] = { "include_usage", NULL };


static int llm_inspect_fail(llm_request_t *req, const char *param,
    const char *message);
static const char *llm_inspect_repeated(const cJSON *obj,
    const char **members);
static int64_t llm_inspect_text(const cJSON *v);
static int64_t llm_inspect_messages(const cJSON *messages);
static const char *llm_inspect_max_name(const llm_request_t *req);


int
llm_inspect(llm_api_e api, const char *body, size_t len,
    const llm_inspect_conf_t *cf, llm_request_t *req)
{
    int            rc;
    double         d;
    const char    *name;
    const cJSON   *v, *model, *opts, *usage;
    cJSON         *root;

    memset(req, 0, sizeof(llm_request_t));
    req->api = api;

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

    name = llm_inspect_repeated(root, llm_inspect_members);

    if (name != NULL) {
        llm_inspect_fail(req, name, "a member appears more than once");
        goto done;
    }

    model = cJSON_GetObjectItemCaseSensitive(root, "model");

    if (!cJSON_IsString(model) || model->valuestring[0] == '\0') {
        llm_inspect_fail(req, "model", "model must be a non-empty string");
        goto done;
    }

    req->model_len = strlen(model->valuestring);

    if (req->model_len >= LLM_RECORD_MODEL_MAX) {
        llm_inspect_fail(req, "model", "model is too long");
        goto done;
    }

    memcpy(req->model, model->valuestring, req->model_len + 1);

    if (api == LLM_API_RESPONSES) {
        name = "max_output_tokens";
        v = cJSON_GetObjectItemCaseSensitive(root, name);

    } else {
        name = "max_completion_tokens";
        v = cJSON_GetObjectItemCaseSensitive(root, name);

        if (v == NULL || cJSON_IsNull(v)) {
            name = "max_tokens";
            v = cJSON_GetObjectItemCaseSensitive(root, name);
        }
    }

    if (v == NULL || cJSON_IsNull(v)) {
        req->max_tokens = cf->default_max_tokens;
        req->max_tokens_missing = 1;

        /* a "max_tokens": null must be replaced, not followed by another */
        req->rebuild = (v != NULL);

    } else {
        if (!cJSON_IsNumber(v)) {
            llm_inspect_fail(req, name, "max_tokens must be an integer");
            goto done;
        }

        d = v->valuedouble;

        if (d != floor(d) || d < 1 || d > LLM_INSPECT_INT_MAX) {
            llm_inspect_fail(req, name,
                             "max_tokens must be a positive integer");
            goto done;
        }

        if (d > (double) cf->max_tokens_limit) {
            llm_inspect_fail(req, name,
                             "max_tokens is above this tier's maximum");
            goto done;
        }

        req->max_tokens = (int64_t) d;
    }

    v = cJSON_GetObjectItemCaseSensitive(root, "stream");

    if (v != NULL && !cJSON_IsNull(v)) {
        if (!cJSON_IsBool(v)) {
            llm_inspect_fail(req, "stream", "stream must be a boolean");
            goto done;
        }

        req->stream = cJSON_IsTrue(v);
    }

    if (api == LLM_API_RESPONSES) {
        /* a string is one user message; an array holds items */
        v = cJSON_GetObjectItemCaseSensitive(root, "input");

        if (cJSON_IsString(v)) {
            req->prompt_tokens = 3 + llm_inspect_text(v) + 3;

        } else if (cJSON_IsArray(v)) {
            req->prompt_tokens = llm_inspect_messages(v) + 3;

        } else {
            llm_inspect_fail(req, "input",
                             "input must be a string or an array");
            goto done;
        }

        req->prompt_tokens += llm_inspect_text(
                   cJSON_GetObjectItemCaseSensitive(root, "instructions"));

    } else {
        v = cJSON_GetObjectItemCaseSensitive(root, "messages");

        if (!cJSON_IsArray(v)) {
            llm_inspect_fail(req, "messages", "messages must be an array");
            goto done;
        }

        req->prompt_tokens = llm_inspect_messages(v) + 3;

        if (api == LLM_API_ANTHROPIC) {
            req->prompt_tokens += llm_inspect_text(
                         cJSON_GetObjectItemCaseSensitive(root, "system"));
        }
    }

    /*
     * Anthropic streams always carry usage; an OpenAI stream carries it only
     * when asked, and the gateway must meter every stream.
     */
    if (api == LLM_API_OPENAI && req->stream) {
        opts = cJSON_GetObjectItemCaseSensitive(root, "stream_options");

        if (opts != NULL && !cJSON_IsNull(opts) && !cJSON_IsObject(opts)) {
            llm_inspect_fail(req, "stream_options",
                             "stream_options must be an object");
            goto done;
        }

        if (cJSON_IsObject(opts)
            && llm_inspect_repeated(opts, llm_inspect_options) != NULL)
        {
            llm_inspect_fail(req, "stream_options",
                             "a member appears more than once");
            goto done;
        }

        usage = cJSON_GetObjectItemCaseSensitive(opts, "include_usage");

        if (!cJSON_IsTrue(usage)) {
            req->add_include_usage = 1;

            /* present without usage: replaced, not spliced */
            if (opts != NULL) {
                req->rebuild = 1;
            }
        }
    }

    rc = 0;

done:

    cJSON_Delete(root);

    return rc;
}


static int
llm_inspect_fail(llm_request_t *req, const char *param, const char *message)
{
    req->param = param;
    req->message = message;

    return -1;
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


static const char *
llm_inspect_repeated(const cJSON *obj, const char **members)
{
    size_t         i;
    unsigned       seen;
    const cJSON   *m;

    seen = 0;

    for (m = obj->child; m; m = m->next) {
        for (i = 0; members[i]; i++) {
            if (strcmp(m->string, members[i]) != 0) {
                continue;
            }

            if (seen & (1u << i)) {
                return members[i];
            }

            seen |= 1u << i;
            break;
        }
    }

    return NULL;
}


/* ceil(bytes / 4) of a string, or of the "text" of each part of an array */
static int64_t
llm_inspect_text(const cJSON *v)
{
    int64_t        n;
    const cJSON   *part, *text;

    if (cJSON_IsString(v)) {
        return ((int64_t) strlen(v->valuestring) + 3) / 4;
    }

    n = 0;

    if (cJSON_IsArray(v)) {
        cJSON_ArrayForEach(part, v) {
            text = cJSON_GetObjectItemCaseSensitive(part, "text");

            if (cJSON_IsString(text)) {
                n += ((int64_t) strlen(text->valuestring) + 3) / 4;
            }
        }
    }

    return n;
}


static int64_t
llm_inspect_messages(const cJSON *messages)
{
    int64_t        n;
    const cJSON   *m;

    n = 0;

    cJSON_ArrayForEach(m, messages) {
        n += 3 + llm_inspect_text(cJSON_GetObjectItemCaseSensitive(m,
                                                                  "content"));
    }

    return n;
}


/* the member the upstream reads the output limit from */
static const char *
llm_inspect_max_name(const llm_request_t *req)
{
    return (req->api == LLM_API_RESPONSES) ? "max_output_tokens"
                                           : "max_tokens";
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

    if (req->max_tokens_missing) {
        cJSON_DeleteItemFromObjectCaseSensitive(root,
                                                llm_inspect_max_name(req));

        if (cJSON_AddNumberToObject(root, llm_inspect_max_name(req),
                                    (double) req->max_tokens)
            == NULL)
        {
            goto done;
        }
    }

    s = cJSON_PrintUnformatted(root);

done:

    cJSON_Delete(root);

    return s;
}
