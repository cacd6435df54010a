
/*
 * The LLM endpoints: routing, the request JSON, and the OpenAI (Chat
 * Completions and Responses) and Anthropic responses, text or tool calls,
 * whole or streamed.  mockllm/README.md specifies them.
 */


#include <stdio.h>
#include <time.h>
#include <cJSON.h>

#include "mockllm.h"
#include "mockllm_buf.h"
#include "mockllm_embed.h"
#include "mockllm_http.h"
#include "mockllm_limits.h"
#include "mockllm_llm.h"
#include "mockllm_read.h"
#include "mockllm_tenant.h"
#include "mockllm_timer.h"


#define MOCKLLM_PUMP_SIZE       (64 * 1024)


enum {
    MOCKLLM_R_HEALTH = 0,
    MOCKLLM_R_STATS,
    MOCKLLM_R_ERROR,
    MOCKLLM_R_COMPLETION,
    MOCKLLM_R_LIMITS,
    MOCKLLM_R_LIMITS_RESET,
    MOCKLLM_R_COUNT_TOKENS,
    MOCKLLM_R_MODELS
};


enum {
    MOCKLLM_P_START = 0,
    MOCKLLM_P_TTFB,
    MOCKLLM_P_TOKENS,
    MOCKLLM_P_PUMP,
    MOCKLLM_P_DONE
};


/* the usage members that x-mock-usage can replace, one bit each */
enum {
    MOCKLLM_U_PROMPT_TOKENS = 0,
    MOCKLLM_U_COMPLETION_TOKENS,
    MOCKLLM_U_TOTAL_TOKENS,
    MOCKLLM_U_PROMPT_TOKENS_DETAILS,
    MOCKLLM_U_COMPLETION_TOKENS_DETAILS,
    MOCKLLM_U_INPUT_TOKENS,
    MOCKLLM_U_INPUT_TOKENS_DETAILS,
    MOCKLLM_U_OUTPUT_TOKENS,
    MOCKLLM_U_OUTPUT_TOKENS_DETAILS,
    MOCKLLM_U_CACHE_READ_INPUT_TOKENS,
    MOCKLLM_U_CACHE_CREATION_INPUT_TOKENS,
    MOCKLLM_U_N
};


/* in the order of the bits */
static const char  *mockllm_llm_usage_keys[] = {
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "prompt_tokens_details",
    "completion_tokens_details",
    "input_tokens",
    "input_tokens_details",
    "output_tokens",
    "output_tokens_details",
    "cache_read_input_tokens",
    "cache_creation_input_tokens"
};


#define MOCKLLM_DEFAULT_TOKENS      16

#define MOCKLLM_OPENAI_ERROR                                                  \
    "The server had an error while processing your request."

#define MOCKLLM_OPENAI_QUOTA                                                  \
    "You exceeded your current quota, please check your plan and billing "    \
    "details."

#define MOCKLLM_ANTHROPIC_QUOTA                                               \
    "This request would exceed your organization's daily token quota."

#define mockllm_str_eq(p, n, s)                                               \
    ((n) == sizeof(s) - 1 && memcmp(p, s, sizeof(s) - 1) == 0)


static void mockllm_llm_count(mockllm_conn_t *c);
static void mockllm_llm_route(mockllm_conn_t *c);
static int mockllm_llm_usage_header(mockllm_conn_t *c);
static void mockllm_llm_parse(mockllm_conn_t *c);
static void mockllm_llm_error(mockllm_conn_t *c, int status, const char *type,
    const char *code, const char *msg);
static void mockllm_llm_status(mockllm_conn_t *c, int status);
static void mockllm_llm_limit(mockllm_conn_t *c);
static void mockllm_llm_respond(mockllm_conn_t *c);
static void mockllm_llm_error_body(mockllm_conn_t *c);
static void mockllm_llm_complete(mockllm_conn_t *c);
static size_t mockllm_llm_content(mockllm_conn_t *c, mockllm_buf_t *b);
static void mockllm_llm_openai_usage(mockllm_conn_t *c, mockllm_buf_t *b);
static void mockllm_llm_anthropic_usage(mockllm_conn_t *c, mockllm_buf_t *b,
    int64_t output);
static void mockllm_llm_responses_usage(mockllm_conn_t *c, mockllm_buf_t *b);
static void mockllm_llm_embeddings_usage(mockllm_conn_t *c, mockllm_buf_t *b);
static int mockllm_llm_usage_key(mockllm_conn_t *c, mockllm_buf_t *b, int key,
    int *n);
static void mockllm_llm_usage_num(mockllm_conn_t *c, mockllm_buf_t *b,
    int key, int64_t v, int *n);
static void mockllm_llm_usage_end(mockllm_conn_t *c, mockllm_buf_t *b, int n);
static size_t mockllm_llm_resp_object(mockllm_conn_t *c, mockllm_buf_t *b,
    int final);
static size_t mockllm_llm_resp_item(mockllm_conn_t *c, mockllm_buf_t *b,
    int final);
static size_t mockllm_llm_resp_part(mockllm_conn_t *c, mockllm_buf_t *b,
    int final);
static void mockllm_llm_resp_event(mockllm_conn_t *c, const char *type);
static void mockllm_llm_resp_item_id(mockllm_conn_t *c, mockllm_buf_t *b);
static void mockllm_llm_stream_start(mockllm_conn_t *c);
static void mockllm_llm_stream_run(mockllm_conn_t *c, int64_t budget);
static void mockllm_llm_stream_token(mockllm_conn_t *c);
static void mockllm_llm_stream_end(mockllm_conn_t *c);
static void mockllm_llm_resp_stream_end(mockllm_conn_t *c);
static void mockllm_llm_stream_error(mockllm_conn_t *c);
static void mockllm_llm_event(mockllm_conn_t *c);
static void mockllm_llm_event_n(mockllm_conn_t *c, int64_t n);
static void mockllm_llm_done(mockllm_conn_t *c);
static void mockllm_llm_models_route(mockllm_conn_t *c, const char *path,
    size_t n);
static void mockllm_llm_models_body(mockllm_conn_t *c);
static void mockllm_llm_model_object(mockllm_conn_t *c, mockllm_buf_t *b,
    size_t i);
static void mockllm_llm_die(mockllm_conn_t *c);
static size_t mockllm_llm_calls_body(mockllm_conn_t *c, mockllm_buf_t *b);
static void mockllm_llm_resp_call(mockllm_conn_t *c, mockllm_buf_t *b,
    int64_t i, int final, size_t *cut);
static void mockllm_llm_args(mockllm_conn_t *c, mockllm_buf_t *b, int64_t i,
    int64_t from, int64_t to, int esc, size_t *cut);
static void mockllm_llm_call_id(mockllm_conn_t *c, mockllm_buf_t *b,
    const char *prefix, int64_t i);
static void mockllm_llm_call_name(mockllm_conn_t *c, mockllm_buf_t *b,
    int64_t i);
static void mockllm_llm_call_token(mockllm_conn_t *c);
static void mockllm_llm_calls_end(mockllm_conn_t *c);
static void mockllm_llm_call_open(mockllm_conn_t *c, int64_t i);
static void mockllm_llm_call_piece(mockllm_conn_t *c, int64_t i, int64_t from,
    int64_t to);
static void mockllm_llm_call_close(mockllm_conn_t *c, int64_t i);


/* shared by all the threads: ids are unique per process */
static uint64_t  mockllm_requests;


/* the models it lists, newest first, and when each was "released" */
static const struct {
    const char          *id;
    const char          *name;
    int64_t              created;
    const char          *created_at;
} mockllm_llm_models[] = {
    { "mock-claude-sonnet-4", "Mock Claude Sonnet 4", 1747872000,
      "2025-05-22T00:00:00Z" },
    { "mock-claude-3-5-haiku", "Mock Claude Haiku 3.5", 1729555200,
      "2024-10-22T00:00:00Z" },
    { "mock-gpt-4o-mini", "Mock GPT-4o mini", 1721172741,
      "2024-07-16T23:32:21Z" },
    { "mock-gpt-4o", "Mock GPT-4o", 1715367049,
      "2024-05-10T18:50:49Z" }
};

#define MOCKLLM_NMODELS                                                       \
    (sizeof(mockllm_llm_models) / sizeof(mockllm_llm_models[0]))


void
mockllm_llm_handle(mockllm_conn_t *c)
{
    mockllm_req_t   *q;
    mockllm_resp_t  *r;

    q = &c->req;
    r = &c->resp;

    memset(r, 0, sizeof(mockllm_resp_t));

    r->id = __atomic_add_fetch(&mockllm_requests, 1, __ATOMIC_RELAXED);
    r->die_after = MOCKLLM_NONE;
    r->error_after = MOCKLLM_NONE;
    r->chunked = !q->http10;

    c->busy = 1;
    c->close = q->conn_close || (q->http10 && !q->keepalive);

    mockllm_llm_route(c);

    if (r->kind == MOCKLLM_R_COMPLETION && q->tenant_len) {
        mockllm_llm_count(c);
    }

    if (mockllm_limits_on && r->kind == MOCKLLM_R_COMPLETION) {
        mockllm_limits_arrive(c);
    }

    if (r->kind == MOCKLLM_R_COMPLETION || r->kind == MOCKLLM_R_COUNT_TOKENS)
    {
        /* read first, for x-mock-read; the headers' errors come before */
        mockllm_llm_parse(c);

        if (q->bad_header) {
            mockllm_llm_error(c, 400, "invalid_request_error", NULL,
                              "invalid value in an x-mock- header");

        } else if (mockllm_llm_usage_header(c) != MOCKLLM_OK) {
            mockllm_llm_error(c, 400, "invalid_request_error", NULL,
                              "x-mock-usage must be a JSON object");

        } else if (q->status >= 400) {
            mockllm_llm_status(c, (int) q->status);
        }
    }

    /* only a valid request meets the limits: the charge needs its body */
    if (mockllm_limits_on && r->kind == MOCKLLM_R_COMPLETION) {
        mockllm_llm_limit(c);
    }

    /* a provider refuses at once */
    if (q->ttfb > 0 && !c->lim.refused) {
        r->phase = MOCKLLM_P_TTFB;
        mockllm_timer_set(c, q->ttfb);
        return;
    }

    mockllm_llm_respond(c);
}


/* the request could not be read: answer and close */

void
mockllm_llm_handle_bad(mockllm_conn_t *c)
{
    mockllm_resp_t  *r;

    r = &c->resp;

    memset(r, 0, sizeof(mockllm_resp_t));

    r->id = __atomic_add_fetch(&mockllm_requests, 1, __ATOMIC_RELAXED);

    c->busy = 1;
    c->close = 1;
    c->linger = 1;

    mockllm_llm_error(c, c->err_status, "invalid_request_error", NULL,
                      c->err_msg);
    mockllm_llm_respond(c);
}


/* a timer of the connection fired, or the output drained for a pump */

void
mockllm_llm_advance(mockllm_conn_t *c)
{
    switch (c->resp.phase) {

    case MOCKLLM_P_TTFB:
        mockllm_llm_respond(c);
        break;

    case MOCKLLM_P_TOKENS:
        mockllm_llm_stream_run(c, 1);
        break;

    case MOCKLLM_P_PUMP:
        mockllm_llm_stream_run(c, 0);
        break;

    default:
        break;
    }
}


/* one more of the tenant's requests in flight, and the most so far */

static void
mockllm_llm_count(mockllm_conn_t *c)
{
    int64_t            n, max;
    mockllm_tenant_t  *t;

    t = mockllm_tenant(c->req.tenant, c->req.tenant_len);
    if (t == NULL) {
        return;
    }

    c->tenant = t;

    n = __atomic_add_fetch(&t->inflight, 1, __ATOMIC_RELAXED);
    max = __atomic_load_n(&t->max, __ATOMIC_RELAXED);

    while (n > max
           && !__atomic_compare_exchange_n(&t->max, &max, n, 0,
                                           __ATOMIC_RELAXED,
                                           __ATOMIC_RELAXED))
    {
        /* max was reloaded: try again */
    }
}


static void
mockllm_llm_route(mockllm_conn_t *c)
{
    char            *path;
    size_t           n, k;
    int64_t          v;
    mockllm_req_t   *q;
    mockllm_resp_t  *r;

    q = &c->req;
    r = &c->resp;

    path = c->in.data + q->path_start;
    n = q->path_len;

    if (q->method == MOCKLLM_METHOD_POST) {

        if (mockllm_str_eq(path, n, "/v1/chat/completions")) {
            r->kind = MOCKLLM_R_COMPLETION;
            r->api = MOCKLLM_API_OPENAI;
            return;
        }

        if (mockllm_str_eq(path, n, "/v1/messages")) {
            r->kind = MOCKLLM_R_COMPLETION;
            r->api = MOCKLLM_API_ANTHROPIC;
            return;
        }

        if (mockllm_str_eq(path, n, "/v1/responses")) {
            r->kind = MOCKLLM_R_COMPLETION;
            r->api = MOCKLLM_API_RESPONSES;
            return;
        }

        if (mockllm_str_eq(path, n, "/v1/embeddings")) {
            r->kind = MOCKLLM_R_COMPLETION;
            r->api = MOCKLLM_API_EMBEDDINGS;
            return;
        }

        if (mockllm_str_eq(path, n, "/v1/messages/count_tokens")) {
            r->kind = MOCKLLM_R_COUNT_TOKENS;
            r->api = MOCKLLM_API_ANTHROPIC;
            return;
        }

        if (mockllm_limits_on && mockllm_str_eq(path, n, "/limits/reset")) {
            r->kind = MOCKLLM_R_LIMITS_RESET;
            return;
        }

        k = sizeof("/limits/inflight/") - 1;

        if (mockllm_limits_on && n > k && n < k + 8
            && memcmp(path, "/limits/inflight/", k) == 0)
        {
            for (v = 0; k < n && path[k] >= '0' && path[k] <= '9'; k++) {
                v = v * 10 + (path[k] - '0');
            }

            if (k == n) {
                mockllm_limits_set_inflight(v);
                r->kind = MOCKLLM_R_LIMITS;
                return;
            }
        }

    } else if (q->method == MOCKLLM_METHOD_GET
               && n >= sizeof("/v1/models") - 1
               && memcmp(path, "/v1/models", sizeof("/v1/models") - 1) == 0)
    {
        mockllm_llm_models_route(c, path, n);
        return;

    } else if (q->method == MOCKLLM_METHOD_GET
               && mockllm_str_eq(path, n, "/health"))
    {
        r->kind = MOCKLLM_R_HEALTH;
        return;

    } else if (q->method == MOCKLLM_METHOD_GET && mockllm_limits_on
               && mockllm_str_eq(path, n, "/limits"))
    {
        r->kind = MOCKLLM_R_LIMITS;
        return;

    } else if (q->method == MOCKLLM_METHOD_GET
               && n > sizeof("/stats/") - 1
               && memcmp(path, "/stats/", sizeof("/stats/") - 1) == 0)
    {
        r->kind = MOCKLLM_R_STATS;
        r->stats = mockllm_tenant(path + sizeof("/stats/") - 1,
                                  n - (sizeof("/stats/") - 1));
        return;
    }

    mockllm_llm_error(c, 404, "invalid_request_error", "unknown_url",
                      "unknown endpoint");
}


/*
 * x-mock-usage: the JSON is checked here, once; the names of its members
 * say which usage members are left out, and the text between its braces
 * is written as it came, after the members that are kept.
 */

static int
mockllm_llm_usage_header(mockllm_conn_t *c)
{
    char            *p;
    cJSON           *root, *m;
    size_t           i, n;
    const char      *end;
    mockllm_req_t   *q;
    mockllm_resp_t  *r;

    q = &c->req;
    r = &c->resp;

    if (!q->usage_given) {
        return MOCKLLM_OK;
    }

    p = c->in.data + q->usage_start;
    n = q->usage_len;

    /* the braces are looked at too: cJSON skips a UTF-8 BOM */
    if (n < 2 || p[0] != '{' || p[n - 1] != '}') {
        return MOCKLLM_ERROR;
    }

    end = NULL;
    root = cJSON_ParseWithLengthOpts(p, n, &end, 0);

    if (!cJSON_IsObject(root) || end != p + n) {
        cJSON_Delete(root);
        return MOCKLLM_ERROR;
    }

    cJSON_ArrayForEach(m, root) {
        for (i = 0; i < MOCKLLM_U_N; i++) {
            if (strcmp(m->string, mockllm_llm_usage_keys[i]) == 0) {
                r->usage_skip |= 1u << i;
            }
        }
    }

    cJSON_Delete(root);

    /* the header's value is trimmed: only the inside can have blanks */
    p++;
    n -= 2;

    while (n && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }

    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) {
        n--;
    }

    r->usage_extra = p;
    r->usage_extra_len = n;

    return MOCKLLM_OK;
}


static void
mockllm_llm_parse(mockllm_conn_t *c)
{
    int64_t          max;
    mockllm_req_t   *q;
    mockllm_read_t  *rd;
    mockllm_resp_t  *r;

    q = &c->req;
    r = &c->resp;
    rd = &c->rd;

    mockllm_read(c, r->kind == MOCKLLM_R_COUNT_TOKENS
                    ? MOCKLLM_API_COUNT_TOKENS : r->api);

    r->read = rd->object;

    if (rd->status) {
        mockllm_llm_error(c, rd->status,
                          rd->type ? rd->type : "invalid_request_error",
                          rd->code, rd->msg);
        r->param = 1;
        r->err_param = rd->param[0] ? rd->param : NULL;
        return;
    }

    max = rd->max;
    r->max_out = rd->max_given ? rd->max : MOCKLLM_NONE;
    r->choices = rd->n;
    r->stream = (rd->stream == 1);
    r->usage_chunk = rd->usage_chunk;
    r->instructions = rd->instructions;

    r->prompt = q->prompt_tokens >= 0 ? q->prompt_tokens : rd->prompt;

    /* cached tokens are part of the prompt, as with the real providers */
    r->cached = q->cached_tokens < r->prompt ? q->cached_tokens : r->prompt;

    /* so are Anthropic's cache writes, beside the cache reads */
    if (r->api == MOCKLLM_API_ANTHROPIC) {
        r->cache_creation = q->cache_creation_tokens < r->prompt - r->cached
                            ? q->cache_creation_tokens
                            : r->prompt - r->cached;
    }

    r->n_out = q->tokens >= 0 ? q->tokens : MOCKLLM_DEFAULT_TOKENS;

    if (r->n_out > max) {
        r->n_out = max;
        r->capped = 1;
    }

    /*
     * Tool calls answer one choice, each call K tokens, the text's, with
     * whole arguments: never capped
     */
    if (rd->calls) {
        r->calls = rd->calls;
        r->per_call = r->n_out;
        r->n_out = r->calls * r->per_call;
        r->choices = 1;
        r->capped = 0;
    }

    /* reasoning tokens are part of the output, as with the real providers */
    if (q->reasoning_tokens >= 0) {
        r->reasoning = q->reasoning_tokens < r->n_out ? q->reasoning_tokens
                                                      : r->n_out;
        r->details = 1;
    }

    if (q->die_after >= 0) {
        r->die_after = q->die_after < r->n_out ? q->die_after : r->n_out;
    }

    if (q->error_after >= 0 && r->stream) {
        r->error_after = q->error_after < r->n_out ? q->error_after
                                                   : r->n_out;
    }

    r->usage = !q->no_usage;
    r->usage_chunk &= r->usage;
    r->malformed = q->malformed;
    r->repeat = q->usage_repeat;
    r->pad = r->stream ? q->pad_bytes : 0;
    r->delay = q->delay;
    r->created = time(NULL);

    if (r->stream && q->http10) {
        /* no chunked encoding for HTTP/1.0: the close ends the stream */
        c->close = 1;
    }
}


static void
mockllm_llm_error(mockllm_conn_t *c, int status, const char *type,
    const char *code, const char *msg)
{
    mockllm_resp_t  *r;

    r = &c->resp;

    r->kind = MOCKLLM_R_ERROR;
    r->status = status;
    r->err_type = type;
    r->err_code = code;
    r->err_msg = msg;
    r->err_param = NULL;
    r->param = 0;
}


/* x-mock-status: the error each provider gives with that status */

static void
mockllm_llm_status(mockllm_conn_t *c, int status)
{
    if (c->resp.api != MOCKLLM_API_ANTHROPIC) {

        switch (status) {

        case 401:
            mockllm_llm_error(c, status, "invalid_request_error",
                              "invalid_api_key",
                              "Incorrect API key provided");
            return;

        case 403:
            mockllm_llm_error(c, status, "invalid_request_error",
                              "permission_denied",
                              "You are not allowed to use this model");
            return;

        case 404:
            mockllm_llm_error(c, status, "invalid_request_error",
                              "model_not_found",
                              "The model does not exist");
            return;

        case 429:
            mockllm_llm_error(c, status, "requests", "rate_limit_exceeded",
                              "Rate limit reached");
            return;

        case 503:
            mockllm_llm_error(c, status, "server_error", NULL,
                              "The engine is currently overloaded");
            return;

        default:
            if (status < 500) {
                mockllm_llm_error(c, status, "invalid_request_error", NULL,
                                  "Mock client error");

            } else {
                mockllm_llm_error(c, status, "server_error", NULL,
                                  "The server had an error while "
                                  "processing your request");
            }

            return;
        }
    }

    switch (status) {

    case 401:
        mockllm_llm_error(c, status, "authentication_error", NULL,
                          "invalid x-api-key");
        return;

    case 403:
        mockllm_llm_error(c, status, "permission_error", NULL,
                          "Your API key does not have permission");
        return;

    case 404:
        mockllm_llm_error(c, status, "not_found_error", NULL,
                          "The requested resource could not be found");
        return;

    case 413:
        mockllm_llm_error(c, status, "request_too_large", NULL,
                          "Request exceeds the maximum allowed size");
        return;

    case 429:
        mockllm_llm_error(c, status, "rate_limit_error", NULL,
                          "Number of request tokens has exceeded your "
                          "rate limit");
        return;

    case 503:
    case 529:
        mockllm_llm_error(c, status, "overloaded_error", NULL, "Overloaded");
        return;

    default:
        if (status < 500) {
            mockllm_llm_error(c, status, "invalid_request_error", NULL,
                              "Mock client error");

        } else {
            mockllm_llm_error(c, status, "api_error", NULL,
                              "Internal server error");
        }

        return;
    }
}


static void
mockllm_llm_respond(mockllm_conn_t *c)
{
    mockllm_resp_t  *r;

    r = &c->resp;

    switch (r->kind) {

    case MOCKLLM_R_HEALTH:
        mockllm_http_head(c, 200, "text/plain", 2);
        mockllm_buf_adds(&c->out, "ok");
        mockllm_llm_done(c);
        return;

    case MOCKLLM_R_STATS:
        c->tmp.len = 0;
        mockllm_buf_adds(&c->tmp, "{\"inflight\":");
        mockllm_buf_add_num(&c->tmp, r->stats ? __atomic_load_n(
                            &r->stats->inflight, __ATOMIC_RELAXED) : 0);
        mockllm_buf_adds(&c->tmp, ",\"max_inflight\":");
        mockllm_buf_add_num(&c->tmp, r->stats ? __atomic_load_n(
                            &r->stats->max, __ATOMIC_RELAXED) : 0);
        mockllm_buf_adds(&c->tmp, "}");
        mockllm_http_head(c, 200, "application/json", c->tmp.len);
        mockllm_buf_add(&c->out, c->tmp.data, c->tmp.len);
        mockllm_llm_done(c);
        return;

    case MOCKLLM_R_LIMITS:
    case MOCKLLM_R_LIMITS_RESET:
        c->tmp.len = 0;
        mockllm_limits_json(&c->tmp, r->kind == MOCKLLM_R_LIMITS_RESET);
        mockllm_http_head(c, 200, "application/json", c->tmp.len);
        mockllm_buf_add(&c->out, c->tmp.data, c->tmp.len);
        mockllm_llm_done(c);
        return;

    case MOCKLLM_R_COUNT_TOKENS:
        /* the prompt as /v1/messages would bill it, cached or not */
        c->tmp.len = 0;
        mockllm_buf_adds(&c->tmp, "{\"input_tokens\":");
        mockllm_buf_add_num(&c->tmp, r->prompt);
        mockllm_buf_adds(&c->tmp, "}");
        mockllm_http_head(c, 200, "application/json", c->tmp.len);
        mockllm_buf_add(&c->out, c->tmp.data, c->tmp.len);
        mockllm_llm_done(c);
        return;

    case MOCKLLM_R_MODELS:
        mockllm_llm_models_body(c);
        mockllm_http_head(c, 200, "application/json", c->tmp.len);
        mockllm_buf_add(&c->out, c->tmp.data, c->tmp.len);
        mockllm_llm_done(c);
        return;

    case MOCKLLM_R_ERROR:
        mockllm_llm_error_body(c);
        mockllm_http_head(c, r->status, "application/json", c->tmp.len);
        mockllm_buf_add(&c->out, c->tmp.data, c->tmp.len);
        mockllm_llm_done(c);
        return;

    default:
        if (r->stream) {
            mockllm_llm_stream_start(c);

        } else {
            mockllm_llm_complete(c);
        }
    }
}


static void
mockllm_llm_error_body(mockllm_conn_t *c)
{
    mockllm_buf_t   *b;
    mockllm_resp_t  *r;

    r = &c->resp;
    b = &c->tmp;

    b->len = 0;

    if (r->api == MOCKLLM_API_ANTHROPIC) {
        mockllm_buf_adds(b, "{\"type\":\"error\",\"error\":{\"type\":\"");
        mockllm_buf_addz(b, r->err_type);
        mockllm_buf_adds(b, "\",\"message\":\"");
        mockllm_buf_add_json(b, r->err_msg, strlen(r->err_msg));
        mockllm_buf_adds(b, "\"}}");
        return;
    }

    mockllm_buf_adds(b, "{\"error\":{\"message\":\"");
    mockllm_buf_add_json(b, r->err_msg, strlen(r->err_msg));
    mockllm_buf_adds(b, "\",\"type\":\"");
    mockllm_buf_addz(b, r->err_type);

    if (r->param && r->err_param) {
        mockllm_buf_adds(b, "\",\"param\":\"");
        mockllm_buf_add_json(b, r->err_param, strlen(r->err_param));
        mockllm_buf_adds(b, "\"");

    } else if (r->param) {
        mockllm_buf_adds(b, "\",\"param\":null");

    } else {
        mockllm_buf_adds(b, "\"");
    }

    if (r->err_code) {
        mockllm_buf_adds(b, ",\"code\":\"");
        mockllm_buf_addz(b, r->err_code);
        mockllm_buf_adds(b, "\"}}");

    } else {
        mockllm_buf_adds(b, ",\"code\":null}}");
    }
}


/*
 * The provider-side limits: the request is charged its prompt and the
 * most it may answer, or refused with the provider's 429 for the limit it
 * would pass.
 */

static void
mockllm_llm_limit(mockllm_conn_t *c)
{
    int               reason;
    char              wait[64];
    int64_t           max;
    mockllm_limit_t  *q;
    mockllm_resp_t   *r;

    r = &c->resp;
    q = &c->lim;

    max = r->max_out != MOCKLLM_NONE ? r->max_out
                                     : MOCKLLM_MAX_DEFAULT;

    reason = mockllm_limits_admit(c, r->prompt + max * r->choices);

    if (reason == MOCKLLM_LIMIT_OK) {
        return;
    }

    if (reason == MOCKLLM_LIMIT_INFLIGHT) {
        /* the provider's own overloaded answer, as x-mock-status gives it */
        mockllm_llm_status(c, r->api == MOCKLLM_API_ANTHROPIC ? 529 : 503);
        return;
    }

    if (r->api == MOCKLLM_API_ANTHROPIC) {

        if (reason == MOCKLLM_LIMIT_QUOTA) {
            mockllm_llm_error(c, 429, "rate_limit_error", NULL,
                              MOCKLLM_ANTHROPIC_QUOTA);
            return;
        }

        snprintf(q->msg, sizeof(q->msg),
                 "This request would exceed the rate limit for your "
                 "organization of %lld %s per minute.",
                 (long long) q->limit,
                 reason == MOCKLLM_LIMIT_RPM ? "requests" : "tokens");

        mockllm_llm_error(c, 429, "rate_limit_error", NULL, q->msg);
        return;
    }

    if (reason == MOCKLLM_LIMIT_QUOTA) {
        mockllm_llm_error(c, 429, "insufficient_quota", "insufficient_quota",
                          MOCKLLM_OPENAI_QUOTA);
        r->param = 1;
        return;
    }

    mockllm_limits_duration(wait, sizeof(wait), q->retry);

    if (reason == MOCKLLM_LIMIT_RPM) {
        snprintf(q->msg, sizeof(q->msg),
                 "Rate limit reached for requests per min (RPM): Limit %lld, "
                 "Used %lld, Requested 1. Please try again in %s.",
                 (long long) q->limit, (long long) q->used, wait);

        mockllm_llm_error(c, 429, "requests", "rate_limit_exceeded", q->msg);

    } else if (q->too_large) {
        snprintf(q->msg, sizeof(q->msg),
                 "Request too large for tokens per min (TPM): Limit %lld, "
                 "Requested %lld. The input or output tokens must be "
                 "reduced in order to run successfully.",
                 (long long) q->limit, (long long) q->requested);

        mockllm_llm_error(c, 429, "tokens", "rate_limit_exceeded", q->msg);

    } else {
        snprintf(q->msg, sizeof(q->msg),
                 "Rate limit reached for tokens per min (TPM): Limit %lld, "
                 "Used %lld, Requested %lld. Please try again in %s.",
                 (long long) q->limit, (long long) q->used,
                 (long long) q->requested, wait);

        mockllm_llm_error(c, 429, "tokens", "rate_limit_exceeded", q->msg);
    }

    r->param = 1;
}


/*
 * What an admitted request cost in the end: its prompt and the tokens it
 * sent, up to the cut of x-mock-die-after or x-mock-error-after, or the
 * close of the connection.
 */

int64_t
mockllm_llm_spent(mockllm_conn_t *c)
{
    mockllm_resp_t  *r;

    r = &c->resp;

    if (r->stream) {
        return r->prompt + r->sent * r->choices;
    }

    if (r->phase != MOCKLLM_P_DONE) {
        /* closed while x-mock-ttfb-ms held the answer back */
        return r->prompt;
    }

    return r->prompt + (r->die_after >= 0 ? r->die_after
                                          : r->n_out * r->choices);
}


/* a whole, non-streaming response */

static void
mockllm_llm_complete(mockllm_conn_t *c)
{
    size_t           cut;
    int64_t          k;
    mockllm_buf_t   *b;
    mockllm_resp_t  *r;

    r = &c->resp;
    b = &c->tmp;

    b->len = 0;

    if (r->api == MOCKLLM_API_OPENAI) {
        mockllm_buf_adds(b, "{\"id\":\"chatcmpl-mock-");
        mockllm_buf_add_num(b, r->id);
        mockllm_buf_adds(b, "\",\"object\":\"chat.completion\",\"created\":");
        mockllm_buf_add_num(b, r->created);
        mockllm_buf_adds(b, ",\"model\":\"");
        mockllm_buf_add(b, c->model.data, c->model.len);
        mockllm_buf_adds(b, "\",\"choices\":[");

        /* x-mock-die-after cuts the first choice */
        cut = b->len;

        for (k = 0; k < r->choices; k++) {
            mockllm_buf_adds(b, "{\"index\":");
            mockllm_buf_add_num(b, k);

            if (r->calls) {
                mockllm_buf_adds(b, ",\"message\":{\"role\":\"assistant\","
                                    "\"content\":null,\"tool_calls\":[");
                cut = mockllm_llm_calls_body(c, b);
                mockllm_buf_adds(b, "]},\"finish_reason\":\"tool_calls\"}");
                break;
            }

            mockllm_buf_adds(b, ",\"message\":{\"role\":\"assistant\","
                                "\"content\":\"");

            if (k == 0) {
                cut = mockllm_llm_content(c, b);

            } else {
                mockllm_llm_content(c, b);
            }

            if (r->capped) {
                mockllm_buf_adds(b, "\"},\"finish_reason\":\"length\"}");

            } else {
                mockllm_buf_adds(b, "\"},\"finish_reason\":\"stop\"}");
            }

            if (k + 1 < r->choices) {
                mockllm_buf_adds(b, ",");
            }
        }

        mockllm_buf_adds(b, "]");

        if (r->usage) {
            mockllm_buf_adds(b, ",\"usage\":");
            mockllm_llm_openai_usage(c, b);
        }

        mockllm_buf_adds(b, "}");

    } else if (r->api == MOCKLLM_API_RESPONSES) {
        cut = mockllm_llm_resp_object(c, b, 1);

    } else if (r->api == MOCKLLM_API_EMBEDDINGS) {
        mockllm_embed_data(c, b);

        if (r->usage) {
            mockllm_buf_adds(b, ",\"usage\":");
            mockllm_llm_embeddings_usage(c, b);
        }

        mockllm_buf_adds(b, "}");

        /* x-mock-die-after cuts it in the middle of the vectors */
        cut = b->len / 2;

    } else {
        mockllm_buf_adds(b, "{\"id\":\"msg_mock_");
        mockllm_buf_add_num(b, r->id);
        mockllm_buf_adds(b, "\",\"type\":\"message\",\"role\":\"assistant\","
                            "\"model\":\"");
        mockllm_buf_add(b, c->model.data, c->model.len);
        mockllm_buf_adds(b, "\",\"content\":[");

        if (r->calls) {
            cut = mockllm_llm_calls_body(c, b);
            mockllm_buf_adds(b, "],\"stop_reason\":\"tool_use\"");

        } else {
            mockllm_buf_adds(b, "{\"type\":\"text\",\"text\":\"");
            cut = mockllm_llm_content(c, b);
            mockllm_buf_addz(b, r->capped
                                ? "\"}],\"stop_reason\":\"max_tokens\""
                                : "\"}],\"stop_reason\":\"end_turn\"");
        }

        mockllm_buf_adds(b, ",\"stop_sequence\":null");

        if (r->usage) {
            mockllm_buf_adds(b, ",\"usage\":");
            mockllm_llm_anthropic_usage(c, b, r->n_out);
        }

        mockllm_buf_adds(b, "}");
    }

    if (r->malformed) {
        /* a proper prefix of an object is never valid JSON */
        b->len /= 2;
    }

    mockllm_http_head(c, 200, "application/json", b->len);

    if (r->die_after >= 0) {
        mockllm_buf_add(&c->out, b->data, cut < b->len ? cut : b->len);
        mockllm_llm_die(c);
        return;
    }

    mockllm_buf_add(&c->out, b->data, b->len);
    mockllm_llm_done(c);
}


/*
 * Appends the n_out tokens of the text, "tok1 tok2 ... ", and returns
 * where x-mock-die-after cuts the body.
 */

static size_t
mockllm_llm_content(mockllm_conn_t *c, mockllm_buf_t *b)
{
    size_t           cut;
    int64_t          i;
    mockllm_resp_t  *r;

    r = &c->resp;

    cut = b->len;

    for (i = 1; i <= r->n_out; i++) {
        mockllm_buf_adds(b, "tok");
        mockllm_buf_add_num(b, i);
        mockllm_buf_adds(b, " ");

        if (i == r->die_after) {
            cut = b->len;
        }
    }

    return cut;
}


/*
 * The usage objects.  The members are written one by one, each unless
 * x-mock-usage replaces it, and then x-mock-usage's own: without that
 * header the bytes are those of a fixed format.
 */

static void
mockllm_llm_openai_usage(mockllm_conn_t *c, mockllm_buf_t *b)
{
    int              n;
    mockllm_resp_t  *r;

    r = &c->resp;
    n = 0;

    mockllm_buf_adds(b, "{");

    mockllm_llm_usage_num(c, b, MOCKLLM_U_PROMPT_TOKENS, r->prompt, &n);
    mockllm_llm_usage_num(c, b, MOCKLLM_U_COMPLETION_TOKENS,
                          r->n_out * r->choices, &n);
    mockllm_llm_usage_num(c, b, MOCKLLM_U_TOTAL_TOKENS,
                          r->prompt + r->n_out * r->choices, &n);

    if (mockllm_llm_usage_key(c, b, MOCKLLM_U_PROMPT_TOKENS_DETAILS, &n)) {
        mockllm_buf_adds(b, "{\"cached_tokens\":");
        mockllm_buf_add_num(b, r->cached);
        mockllm_buf_adds(b, "}");
    }

    /* only on x-mock-reasoning-tokens: the bytes stay as they were */
    if (r->details
        && mockllm_llm_usage_key(c, b, MOCKLLM_U_COMPLETION_TOKENS_DETAILS,
                                 &n))
    {
        mockllm_buf_adds(b, "{\"reasoning_tokens\":");
        mockllm_buf_add_num(b, r->reasoning);
        mockllm_buf_adds(b, ",\"audio_tokens\":0,"
                            "\"accepted_prediction_tokens\":0,"
                            "\"rejected_prediction_tokens\":0}");
    }

    mockllm_llm_usage_end(c, b, n);
}


/* Anthropic's input_tokens leaves the cache reads and writes out */

static void
mockllm_llm_anthropic_usage(mockllm_conn_t *c, mockllm_buf_t *b,
    int64_t output)
{
    int              n;
    mockllm_resp_t  *r;

    r = &c->resp;
    n = 0;

    mockllm_buf_adds(b, "{");

    mockllm_llm_usage_num(c, b, MOCKLLM_U_INPUT_TOKENS,
                          r->prompt - r->cached - r->cache_creation, &n);
    mockllm_llm_usage_num(c, b, MOCKLLM_U_OUTPUT_TOKENS, output, &n);
    mockllm_llm_usage_num(c, b, MOCKLLM_U_CACHE_READ_INPUT_TOKENS, r->cached,
                          &n);
    mockllm_llm_usage_num(c, b, MOCKLLM_U_CACHE_CREATION_INPUT_TOKENS,
                          r->cache_creation, &n);

    mockllm_llm_usage_end(c, b, n);
}


static void
mockllm_llm_responses_usage(mockllm_conn_t *c, mockllm_buf_t *b)
{
    int              n;
    mockllm_resp_t  *r;

    r = &c->resp;
    n = 0;

    mockllm_buf_adds(b, "{");

    mockllm_llm_usage_num(c, b, MOCKLLM_U_INPUT_TOKENS, r->prompt, &n);

    if (mockllm_llm_usage_key(c, b, MOCKLLM_U_INPUT_TOKENS_DETAILS, &n)) {
        mockllm_buf_adds(b, "{\"cached_tokens\":");
        mockllm_buf_add_num(b, r->cached);
        mockllm_buf_adds(b, "}");
    }

    mockllm_llm_usage_num(c, b, MOCKLLM_U_OUTPUT_TOKENS, r->n_out, &n);

    if (mockllm_llm_usage_key(c, b, MOCKLLM_U_OUTPUT_TOKENS_DETAILS, &n)) {
        mockllm_buf_adds(b, "{\"reasoning_tokens\":");
        mockllm_buf_add_num(b, r->reasoning);
        mockllm_buf_adds(b, "}");
    }

    mockllm_llm_usage_num(c, b, MOCKLLM_U_TOTAL_TOKENS, r->prompt + r->n_out,
                          &n);

    mockllm_llm_usage_end(c, b, n);
}


/* an embeddings list's: the input is all there is */

static void
mockllm_llm_embeddings_usage(mockllm_conn_t *c, mockllm_buf_t *b)
{
    int  n;

    n = 0;

    mockllm_buf_adds(b, "{");

    mockllm_llm_usage_num(c, b, MOCKLLM_U_PROMPT_TOKENS, c->resp.prompt, &n);
    mockllm_llm_usage_num(c, b, MOCKLLM_U_TOTAL_TOKENS, c->resp.prompt, &n);

    mockllm_llm_usage_end(c, b, n);
}


/* starts the member, or says that x-mock-usage replaces it */

static int
mockllm_llm_usage_key(mockllm_conn_t *c, mockllm_buf_t *b, int key, int *n)
{
    if (c->resp.usage_skip & (1u << key)) {
        return 0;
    }

    if ((*n)++) {
        mockllm_buf_adds(b, ",");
    }

    mockllm_buf_adds(b, "\"");
    mockllm_buf_addz(b, mockllm_llm_usage_keys[key]);
    mockllm_buf_adds(b, "\":");

    return 1;
}


static void
mockllm_llm_usage_num(mockllm_conn_t *c, mockllm_buf_t *b, int key,
    int64_t v, int *n)
{
    if (mockllm_llm_usage_key(c, b, key, n)) {
        mockllm_buf_add_num(b, v);
    }
}


static void
mockllm_llm_usage_end(mockllm_conn_t *c, mockllm_buf_t *b, int n)
{
    mockllm_resp_t  *r;

    r = &c->resp;

    if (r->usage_extra_len) {
        if (n) {
            mockllm_buf_adds(b, ",");
        }

        mockllm_buf_add(b, r->usage_extra, r->usage_extra_len);
    }

    mockllm_buf_adds(b, "}");
}


/*
 * The Responses object, as response.created and response.in_progress
 * carry it (not final: no output, no usage yet), or as the whole body and
 * response.completed do.  Returns where x-mock-die-after cuts it.
 */

static size_t
mockllm_llm_resp_object(mockllm_conn_t *c, mockllm_buf_t *b, int final)
{
    size_t           cut;
    mockllm_resp_t  *r;

    r = &c->resp;

    mockllm_buf_adds(b, "{\"id\":\"resp_mock_");
    mockllm_buf_add_num(b, r->id);
    mockllm_buf_adds(b, "\",\"object\":\"response\",\"created_at\":");
    mockllm_buf_add_num(b, r->created);

    if (!final) {
        mockllm_buf_adds(b, ",\"status\":\"in_progress\"");

    } else if (r->capped) {
        mockllm_buf_adds(b, ",\"status\":\"incomplete\"");

    } else {
        mockllm_buf_adds(b, ",\"status\":\"completed\"");
    }

    mockllm_buf_adds(b, ",\"model\":\"");
    mockllm_buf_add(b, c->model.data, c->model.len);
    mockllm_buf_adds(b, "\",\"output\":[");

    cut = b->len;

    if (final && r->calls) {
        cut = mockllm_llm_calls_body(c, b);

    } else if (final) {
        cut = mockllm_llm_resp_item(c, b, 1);
    }

    mockllm_buf_adds(b, "],\"usage\":");

    if (final && r->usage) {
        mockllm_llm_responses_usage(c, b);

    } else {
        mockllm_buf_adds(b, "null");
    }

    mockllm_buf_adds(b, ",\"error\":null,\"incomplete_details\":");

    if (final && r->capped) {
        mockllm_buf_adds(b, "{\"reason\":\"max_output_tokens\"}");

    } else {
        mockllm_buf_adds(b, "null");
    }

    mockllm_buf_adds(b, ",\"instructions\":");

    if (r->instructions) {
        mockllm_buf_adds(b, "\"");
        mockllm_buf_add(b, c->instr.data, c->instr.len);
        mockllm_buf_adds(b, "\"");

    } else {
        mockllm_buf_adds(b, "null");
    }

    mockllm_buf_adds(b, ",\"max_output_tokens\":");

    if (r->max_out >= 0) {
        mockllm_buf_add_num(b, r->max_out);

    } else {
        mockllm_buf_adds(b, "null");
    }

    mockllm_buf_adds(b, ",\"parallel_tool_calls\":true,"
                        "\"previous_response_id\":null,"
                        "\"reasoning\":{\"effort\":null,\"summary\":null},"
                        "\"store\":true,\"temperature\":1.0,"
                        "\"text\":{\"format\":{\"type\":\"text\"}},"
                        "\"tool_choice\":\"auto\",\"tools\":[],"
                        "\"top_p\":1.0,\"truncation\":\"disabled\","
                        "\"user\":null,\"metadata\":{}}");

    return cut;
}


/* the one output item, a message: empty, or with the whole text */

static size_t
mockllm_llm_resp_item(mockllm_conn_t *c, mockllm_buf_t *b, int final)
{
    size_t           cut;
    mockllm_resp_t  *r;

    r = &c->resp;

    mockllm_buf_adds(b, "{\"type\":\"message\",\"id\":\"msg_mock_");
    mockllm_buf_add_num(b, r->id);

    if (!final) {
        mockllm_buf_adds(b, "\",\"status\":\"in_progress\"");

    } else if (r->capped) {
        mockllm_buf_adds(b, "\",\"status\":\"incomplete\"");

    } else {
        mockllm_buf_adds(b, "\",\"status\":\"completed\"");
    }

    mockllm_buf_adds(b, ",\"role\":\"assistant\",\"content\":[");

    cut = b->len;

    if (final) {
        cut = mockllm_llm_resp_part(c, b, 1);
    }

    mockllm_buf_adds(b, "]}");

    return cut;
}


/* the one content part, output_text: empty, or with the whole text */

static size_t
mockllm_llm_resp_part(mockllm_conn_t *c, mockllm_buf_t *b, int final)
{
    size_t  cut;

    mockllm_buf_adds(b, "{\"type\":\"output_text\",\"text\":\"");

    cut = b->len;

    if (final) {
        cut = mockllm_llm_content(c, b);
    }

    mockllm_buf_adds(b, "\",\"annotations\":[]}");

    return cut;
}


/* starts a Responses event in tmp: its name, type and sequence_number */

static void
mockllm_llm_resp_event(mockllm_conn_t *c, const char *type)
{
    mockllm_buf_t  *b;

    b = &c->tmp;

    mockllm_buf_adds(b, "event: ");
    mockllm_buf_addz(b, type);
    mockllm_buf_adds(b, "\ndata: {\"type\":\"");
    mockllm_buf_addz(b, type);
    mockllm_buf_adds(b, "\",\"sequence_number\":");
    mockllm_buf_add_num(b, c->resp.seq++);
}


/* ,"item_id":"msg_mock_N","output_index":0,"content_index":0 */

static void
mockllm_llm_resp_item_id(mockllm_conn_t *c, mockllm_buf_t *b)
{
    mockllm_buf_adds(b, ",\"item_id\":\"msg_mock_");
    mockllm_buf_add_num(b, c->resp.id);
    mockllm_buf_adds(b, "\",\"output_index\":0,\"content_index\":0");
}


static void
mockllm_llm_stream_start(mockllm_conn_t *c)
{
    int64_t          k;
    mockllm_buf_t   *b, *p;
    mockllm_resp_t  *r;

    r = &c->resp;
    b = &c->tmp;
    p = &c->prefix;

    mockllm_http_head(c, 200, "text/event-stream", -1);

    b->len = 0;

    if (r->api == MOCKLLM_API_OPENAI) {
        /* every chunk starts the same: format that once */
        p->len = 0;
        mockllm_buf_adds(p, "data: {\"id\":\"chatcmpl-mock-");
        mockllm_buf_add_num(p, r->id);
        mockllm_buf_adds(p, "\",\"object\":\"chat.completion.chunk\","
                            "\"created\":");
        mockllm_buf_add_num(p, r->created);
        mockllm_buf_adds(p, ",\"model\":\"");
        mockllm_buf_add(p, c->model.data, c->model.len);
        mockllm_buf_adds(p, "\",\"choices\":[");

        for (k = 0; k < r->choices; k++) {
            mockllm_buf_add(b, p->data, p->len);
            mockllm_buf_adds(b, "{\"index\":");
            mockllm_buf_add_num(b, k);
            mockllm_buf_adds(b, ",\"delta\":{\"role\":\"assistant\","
                                "\"content\":");
            mockllm_buf_addz(b, r->calls ? "null" : "\"\"");
            mockllm_buf_adds(b, "},\"finish_reason\":null}]}\n\n");
            mockllm_llm_event(c);
        }

    } else if (r->api == MOCKLLM_API_RESPONSES) {
        mockllm_llm_resp_event(c, "response.created");
        mockllm_buf_adds(b, ",\"response\":");
        mockllm_llm_resp_object(c, b, 0);
        mockllm_buf_adds(b, "}\n\n");
        mockllm_llm_event(c);

        mockllm_llm_resp_event(c, "response.in_progress");
        mockllm_buf_adds(b, ",\"response\":");
        mockllm_llm_resp_object(c, b, 0);
        mockllm_buf_adds(b, "}\n\n");
        mockllm_llm_event(c);

        /* with tool calls, each item is added as its call begins */
        if (!r->calls) {
            mockllm_llm_resp_event(c, "response.output_item.added");
            mockllm_buf_adds(b, ",\"output_index\":0,\"item\":");
            mockllm_llm_resp_item(c, b, 0);
            mockllm_buf_adds(b, "}\n\n");
            mockllm_llm_event(c);

            mockllm_llm_resp_event(c, "response.content_part.added");
            mockllm_llm_resp_item_id(c, b);
            mockllm_buf_adds(b, ",\"part\":");
            mockllm_llm_resp_part(c, b, 0);
            mockllm_buf_adds(b, "}\n\n");
            mockllm_llm_event(c);
        }

    } else {
        mockllm_buf_adds(b, "event: message_start\ndata: {\"type\":"
                            "\"message_start\",\"message\":{\"id\":"
                            "\"msg_mock_");
        mockllm_buf_add_num(b, r->id);
        mockllm_buf_adds(b, "\",\"type\":\"message\",\"role\":\"assistant\","
                            "\"model\":\"");
        mockllm_buf_add(b, c->model.data, c->model.len);
        mockllm_buf_adds(b, "\",\"content\":[],\"stop_reason\":null,"
                            "\"stop_sequence\":null");

        if (r->usage) {
            /*
             * Anthropic's input_tokens leaves the cache reads and writes
             * out; x-mock-usage is for message_delta's usage, not this one
             */
            mockllm_buf_adds(b, ",\"usage\":{\"input_tokens\":");
            mockllm_buf_add_num(b, r->prompt - r->cached - r->cache_creation);
            mockllm_buf_adds(b, ",\"output_tokens\":1,"
                                "\"cache_read_input_tokens\":");
            mockllm_buf_add_num(b, r->cached);
            mockllm_buf_adds(b, ",\"cache_creation_input_tokens\":");
            mockllm_buf_add_num(b, r->cache_creation);
            mockllm_buf_adds(b, "}");
        }

        mockllm_buf_adds(b, "}}\n\n");
        mockllm_llm_event(c);

        /* with tool calls, each block starts as its call begins */
        if (!r->calls) {
            mockllm_buf_adds(b, "event: content_block_start\ndata: "
                                "{\"type\":\"content_block_start\","
                                "\"index\":0,\"content_block\":"
                                "{\"type\":\"text\",\"text\":\"\"}}\n\n");
            mockllm_llm_event(c);

            mockllm_buf_adds(b, "event: ping\ndata: {\"type\":\"ping\"}"
                                "\n\n");
            mockllm_llm_event(c);
        }
    }

    if (r->pad) {
        /* x-mock-pad-bytes: one long comment line, which clients skip */
        mockllm_buf_reserve(b, r->pad + 4);
        mockllm_buf_adds(b, ": ");

        if (!b->oom) {
            memset(b->data + b->len, 'x', r->pad);
            b->len += r->pad;
        }

        mockllm_buf_adds(b, "\n\n");
        mockllm_llm_event(c);
    }

    mockllm_llm_stream_run(c, 0);
}


/*
 * Emits tokens until the stream ends, dies, or needs to wait: for the next
 * tick when paced (budget is the number of tokens due now), or for the
 * client to read what is already queued when not.
 */

static void
mockllm_llm_stream_run(mockllm_conn_t *c, int64_t budget)
{
    mockllm_resp_t  *r;

    r = &c->resp;

    for ( ;; ) {
        if (r->sent == r->die_after) {
            mockllm_llm_die(c);
            return;
        }

        if (r->sent == r->error_after) {
            mockllm_llm_stream_error(c);
            return;
        }

        if (r->sent == r->n_out) {
            mockllm_llm_stream_end(c);
            return;
        }

        if (r->delay > 0) {
            if (budget == 0) {
                if (r->phase == MOCKLLM_P_TOKENS) {
                    mockllm_timer_next(c, r->delay);

                } else {
                    r->phase = MOCKLLM_P_TOKENS;
                    mockllm_timer_set(c, r->delay);
                }

                return;
            }

            budget--;

        } else if (c->out.len - c->sent > MOCKLLM_PUMP_SIZE) {
            r->phase = MOCKLLM_P_PUMP;
            c->pump = 1;
            return;
        }

        r->sent++;
        mockllm_llm_stream_token(c);
    }
}


static void
mockllm_llm_stream_token(mockllm_conn_t *c)
{
    int64_t          k;
    mockllm_buf_t   *b;
    mockllm_resp_t  *r;

    r = &c->resp;
    b = &c->tmp;

    if (r->calls) {
        mockllm_llm_call_token(c);
        return;
    }

    if (r->api == MOCKLLM_API_OPENAI) {
        /* the token of each choice, a chunk each, as OpenAI sends them */
        for (k = 0; k < r->choices; k++) {
            mockllm_buf_add(b, c->prefix.data, c->prefix.len);
            mockllm_buf_adds(b, "{\"index\":");
            mockllm_buf_add_num(b, k);
            mockllm_buf_adds(b, ",\"delta\":{\"content\":\"tok");
            mockllm_buf_add_num(b, r->sent);
            mockllm_buf_adds(b, " \"},\"finish_reason\":null}]}\n\n");

            if (k + 1 < r->choices) {
                mockllm_llm_event(c);
            }
        }

    } else if (r->api == MOCKLLM_API_RESPONSES) {
        mockllm_llm_resp_event(c, "response.output_text.delta");
        mockllm_llm_resp_item_id(c, b);
        mockllm_buf_adds(b, ",\"delta\":\"tok");
        mockllm_buf_add_num(b, r->sent);
        mockllm_buf_adds(b, " \",\"logprobs\":[]}\n\n");

    } else {
        mockllm_buf_adds(b, "event: content_block_delta\ndata: {\"type\":"
                            "\"content_block_delta\",\"index\":0,\"delta\":"
                            "{\"type\":\"text_delta\",\"text\":\"tok");
        mockllm_buf_add_num(b, r->sent);
        mockllm_buf_adds(b, " \"}}\n\n");
    }

    mockllm_llm_event(c);
}


static void
mockllm_llm_stream_end(mockllm_conn_t *c)
{
    int              n;
    int64_t          k;
    mockllm_buf_t   *b;
    mockllm_resp_t  *r;

    r = &c->resp;
    b = &c->tmp;

    mockllm_llm_calls_end(c);

    if (r->api == MOCKLLM_API_OPENAI) {

        if (r->malformed) {
            mockllm_buf_add(b, c->prefix.data, c->prefix.len);
            mockllm_buf_adds(b, "{\"index\":0,\"delta\":{\"content\":\n\n");
            mockllm_llm_event(c);
        }

        for (k = 0; k < r->choices; k++) {
            mockllm_buf_add(b, c->prefix.data, c->prefix.len);
            mockllm_buf_adds(b, "{\"index\":");
            mockllm_buf_add_num(b, k);

            if (r->calls) {
                mockllm_buf_adds(b, ",\"delta\":{},"
                                    "\"finish_reason\":\"tool_calls\"}]}"
                                    "\n\n");

            } else if (r->capped) {
                mockllm_buf_adds(b, ",\"delta\":{},"
                                    "\"finish_reason\":\"length\"}]}\n\n");

            } else {
                mockllm_buf_adds(b, ",\"delta\":{},"
                                    "\"finish_reason\":\"stop\"}]}\n\n");
            }

            mockllm_llm_event(c);
        }

        if (r->usage_chunk) {
            mockllm_buf_add(b, c->prefix.data, c->prefix.len);
            mockllm_buf_adds(b, "],\"usage\":");
            mockllm_llm_openai_usage(c, b);
            mockllm_buf_adds(b, "}\n\n");
            mockllm_llm_event_n(c, r->repeat);
        }

        mockllm_buf_adds(b, "data: [DONE]\n\n");
        mockllm_llm_event(c);

    } else if (r->api == MOCKLLM_API_RESPONSES) {
        mockllm_llm_resp_stream_end(c);

    } else {

        if (r->malformed) {
            mockllm_buf_adds(b, "event: content_block_delta\ndata: "
                                "{\"type\":\"content_block_delta\","
                                "\"index\":0,\"delta\":{\n\n");
            mockllm_llm_event(c);
        }

        if (!r->calls) {
            mockllm_buf_adds(b, "event: content_block_stop\ndata: "
                                "{\"type\":\"content_block_stop\","
                                "\"index\":0}\n\n");
            mockllm_llm_event(c);
        }

        mockllm_buf_adds(b, "event: message_delta\ndata: {\"type\":"
                            "\"message_delta\",\"delta\":{\"stop_reason\":");

        if (r->calls) {
            mockllm_buf_adds(b, "\"tool_use\"");

        } else if (r->capped) {
            mockllm_buf_adds(b, "\"max_tokens\"");

        } else {
            mockllm_buf_adds(b, "\"end_turn\"");
        }

        mockllm_buf_adds(b, ",\"stop_sequence\":null}");

        if (r->usage) {
            n = 0;
            mockllm_buf_adds(b, ",\"usage\":{");
            mockllm_llm_usage_num(c, b, MOCKLLM_U_OUTPUT_TOKENS, r->n_out,
                                  &n);
            mockllm_llm_usage_end(c, b, n);
        }

        mockllm_buf_adds(b, "}\n\n");
        mockllm_llm_event_n(c, r->repeat);

        mockllm_buf_adds(b, "event: message_stop\ndata: {\"type\":"
                            "\"message_stop\"}\n\n");
        mockllm_llm_event(c);
    }

    if (r->chunked) {
        mockllm_buf_adds(&c->out, "0\r\n\r\n");
    }

    mockllm_llm_done(c);
}


/*
 * The finishing events of a Responses stream: each of the done events
 * carries the whole text again, as the real ones do, and there is no
 * "data: [DONE]".
 */

static void
mockllm_llm_resp_stream_end(mockllm_conn_t *c)
{
    mockllm_buf_t   *b;
    mockllm_resp_t  *r;

    r = &c->resp;
    b = &c->tmp;

    if (r->malformed) {
        mockllm_llm_resp_event(c, "response.output_text.delta");
        mockllm_llm_resp_item_id(c, b);
        mockllm_buf_adds(b, ",\"delta\":\n\n");
        mockllm_llm_event(c);
    }

    /* with tool calls, each function_call item is done with its call */
    if (!r->calls) {
        mockllm_llm_resp_event(c, "response.output_text.done");
        mockllm_llm_resp_item_id(c, b);
        mockllm_buf_adds(b, ",\"text\":\"");
        mockllm_llm_content(c, b);
        mockllm_buf_adds(b, "\",\"logprobs\":[]}\n\n");
        mockllm_llm_event(c);

        mockllm_llm_resp_event(c, "response.content_part.done");
        mockllm_llm_resp_item_id(c, b);
        mockllm_buf_adds(b, ",\"part\":");
        mockllm_llm_resp_part(c, b, 1);
        mockllm_buf_adds(b, "}\n\n");
        mockllm_llm_event(c);

        mockllm_llm_resp_event(c, "response.output_item.done");
        mockllm_buf_adds(b, ",\"output_index\":0,\"item\":");
        mockllm_llm_resp_item(c, b, 1);
        mockllm_buf_adds(b, "}\n\n");
        mockllm_llm_event(c);
    }

    mockllm_llm_resp_event(c, r->capped ? "response.incomplete"
                                        : "response.completed");
    mockllm_buf_adds(b, ",\"response\":");
    mockllm_llm_resp_object(c, b, 1);
    mockllm_buf_adds(b, "}\n\n");
    mockllm_llm_event_n(c, r->repeat);
}


/*
 * x-mock-error-after: the provider's in-band error instead of the rest,
 * and a clean end of the response, without the usage.
 */

static void
mockllm_llm_stream_error(mockllm_conn_t *c)
{
    mockllm_buf_t   *b;
    mockllm_resp_t  *r;

    r = &c->resp;
    b = &c->tmp;

    if (r->api == MOCKLLM_API_OPENAI) {
        mockllm_buf_adds(b, "data: {\"error\":{\"message\":\""
                            MOCKLLM_OPENAI_ERROR "\",\"type\":"
                            "\"server_error\",\"param\":null,"
                            "\"code\":null}}\n\n");

    } else if (r->api == MOCKLLM_API_RESPONSES) {
        mockllm_buf_adds(b, "event: error\ndata: {\"type\":\"error\","
                            "\"code\":\"server_error\",\"message\":\""
                            MOCKLLM_OPENAI_ERROR "\",\"param\":null,"
                            "\"sequence_number\":");
        mockllm_buf_add_num(b, r->seq++);
        mockllm_buf_adds(b, "}\n\n");

    } else {
        mockllm_buf_adds(b, "event: error\ndata: {\"type\":\"error\","
                            "\"error\":{\"type\":\"overloaded_error\","
                            "\"message\":\"Overloaded\"}}\n\n");
    }

    mockllm_llm_event(c);

    if (r->chunked) {
        mockllm_buf_adds(&c->out, "0\r\n\r\n");
    }

    mockllm_llm_done(c);
}


/* moves the event built in tmp to the output, as one chunk of its own */

static void
mockllm_llm_event(mockllm_conn_t *c)
{
    mockllm_llm_event_n(c, 1);
}


/* ... n times: x-mock-usage-repeat, for the usage-carrying event */

static void
mockllm_llm_event_n(mockllm_conn_t *c, int64_t n)
{
    char            hex[16], *p;
    size_t          len;
    mockllm_buf_t  *b;

    static const char  digits[] = "0123456789abcdef";

    b = &c->tmp;

    while (n-- > 0) {

        if (c->resp.chunked) {
            p = hex + sizeof(hex);
            *--p = '\n';
            *--p = '\r';

            len = b->len;

            do {
                *--p = digits[len & 0xf];
                len >>= 4;
            } while (len);

            mockllm_buf_add(&c->out, p, hex + sizeof(hex) - p);
            mockllm_buf_add(&c->out, b->data, b->len);
            mockllm_buf_adds(&c->out, "\r\n");

        } else {
            mockllm_buf_add(&c->out, b->data, b->len);
        }
    }

    b->len = 0;
}


static void
mockllm_llm_done(mockllm_conn_t *c)
{
    c->resp.phase = MOCKLLM_P_DONE;
    c->done = 1;
}


/*
 * x-mock-die-after: whatever is queued goes out, then the response is cut
 * short as x-mock-die-how says: a close, a reset, or nothing more at all
 * on an open connection, until the peer closes it.
 */

static void
mockllm_llm_die(mockllm_conn_t *c)
{
    c->resp.phase = MOCKLLM_P_DONE;

    if (c->req.die_how == MOCKLLM_DIE_STALL) {
        c->stall = 1;
        return;
    }

    c->done = 1;
    c->close = 1;
    c->reset = (c->req.die_how == MOCKLLM_DIE_RESET);
}


/*
 * The tool calls of an answer, in a whole body: Chat's tool_calls,
 * Anthropic's tool_use blocks, the Responses function_call items.
 * Returns where x-mock-die-after cuts the body.
 */

static size_t
mockllm_llm_calls_body(mockllm_conn_t *c, mockllm_buf_t *b)
{
    size_t           cut;
    int64_t          i;
    mockllm_resp_t  *r;

    r = &c->resp;

    cut = b->len;

    for (i = 0; i < r->calls; i++) {
        if (i) {
            mockllm_buf_adds(b, ",");
        }

        if (r->api == MOCKLLM_API_RESPONSES) {
            mockllm_llm_resp_call(c, b, i, 1, &cut);
            continue;
        }

        if (r->api == MOCKLLM_API_OPENAI) {
            mockllm_buf_adds(b, "{\"id\":\"");
            mockllm_llm_call_id(c, b, "call_mock_", i);
            mockllm_buf_adds(b, "\",\"type\":\"function\",\"function\":"
                                "{\"name\":\"");
            mockllm_llm_call_name(c, b, i);
            mockllm_buf_adds(b, "\",\"arguments\":\"");
            mockllm_llm_args(c, b, i, 1, r->per_call + 1, 1, &cut);
            mockllm_buf_adds(b, "\"}}");
            continue;
        }

        mockllm_buf_adds(b, "{\"type\":\"tool_use\",\"id\":\"");
        mockllm_llm_call_id(c, b, "toolu_mock_", i);
        mockllm_buf_adds(b, "\",\"name\":\"");
        mockllm_llm_call_name(c, b, i);
        mockllm_buf_adds(b, "\",\"input\":");
        mockllm_llm_args(c, b, i, 1, r->per_call + 1, 0, &cut);
        mockllm_buf_adds(b, "}");
    }

    return cut;
}


/*
 * A Responses function_call item: as output_item.added has it (no
 * arguments yet), or whole.
 */

static void
mockllm_llm_resp_call(mockllm_conn_t *c, mockllm_buf_t *b, int64_t i,
    int final, size_t *cut)
{
    mockllm_buf_adds(b, "{\"id\":\"");
    mockllm_llm_call_id(c, b, "fc_mock_", i);
    mockllm_buf_adds(b, "\",\"type\":\"function_call\",\"status\":");

    if (final) {
        mockllm_buf_adds(b, "\"completed\",\"arguments\":\"");
        mockllm_llm_args(c, b, i, 1, c->resp.per_call + 1, 1, cut);

    } else {
        mockllm_buf_adds(b, "\"in_progress\",\"arguments\":\"");
    }

    mockllm_buf_adds(b, "\",\"call_id\":\"");
    mockllm_llm_call_id(c, b, "call_mock_", i);
    mockllm_buf_adds(b, "\",\"name\":\"");
    mockllm_llm_call_name(c, b, i);
    mockllm_buf_adds(b, "\"}");
}


/*
 * Pieces from to to of call i's arguments, {"PROP":"tok1 tok2 ... tokK"}:
 * piece j of 1 to K is token j (the first with the key before it), piece
 * K + 1 the end; esc: escaped, for a JSON string.  cut is set after the
 * token x-mock-die-after names.
 */

static void
mockllm_llm_args(mockllm_conn_t *c, mockllm_buf_t *b, int64_t i,
    int64_t from, int64_t to, int esc, size_t *cut)
{
    int64_t          j, k;
    mockllm_call_t  *call;
    mockllm_resp_t  *r;

    r = &c->resp;
    call = &c->rd.call[i];
    k = r->per_call;

    for (j = from; j <= to; j++) {
        if (j == 1) {
            if (esc) {
                mockllm_buf_add(b, c->calls.data + call->key_esc,
                                call->key_esc_len);

            } else {
                mockllm_buf_add(b, c->calls.data + call->key, call->key_len);
            }
        }

        if (j > k) {
            if (esc) {
                mockllm_buf_adds(b, "\\\"}");

            } else {
                mockllm_buf_adds(b, "\"}");
            }

            continue;
        }

        mockllm_buf_addz(b, j > 1 ? " tok" : "tok");
        mockllm_buf_add_num(b, j);

        if (cut && i * k + j == r->die_after) {
            *cut = b->len;
        }
    }
}


static void
mockllm_llm_call_id(mockllm_conn_t *c, mockllm_buf_t *b, const char *prefix,
    int64_t i)
{
    mockllm_buf_addz(b, prefix);
    mockllm_buf_add_num(b, c->resp.id);
    mockllm_buf_adds(b, "_");
    mockllm_buf_add_num(b, i);
}


static void
mockllm_llm_call_name(mockllm_conn_t *c, mockllm_buf_t *b, int64_t i)
{
    mockllm_buf_add(b, c->calls.data + c->rd.call[i].name,
                    c->rd.call[i].name_len);
}


/*
 * One streamed token of the tool calls: the calls before its own are
 * closed and its own opened first, as a provider streams them one after
 * the other.
 */

static void
mockllm_llm_call_token(mockllm_conn_t *c)
{
    int64_t          i, j;
    mockllm_resp_t  *r;

    r = &c->resp;

    i = (r->sent - 1) / r->per_call;
    j = (r->sent - 1) % r->per_call + 1;

    while (r->opened <= i) {
        if (r->opened) {
            mockllm_llm_call_close(c, r->opened - 1);
        }

        mockllm_llm_call_open(c, r->opened++);
    }

    mockllm_llm_call_piece(c, i, j, j);
}


/* the end of the tokens: the calls not opened yet (K = 0), the last close */

static void
mockllm_llm_calls_end(mockllm_conn_t *c)
{
    mockllm_resp_t  *r;

    r = &c->resp;

    while (r->opened < r->calls) {
        if (r->opened) {
            mockllm_llm_call_close(c, r->opened - 1);
        }

        mockllm_llm_call_open(c, r->opened++);
    }

    if (r->calls) {
        mockllm_llm_call_close(c, r->calls - 1);
    }
}


static void
mockllm_llm_call_open(mockllm_conn_t *c, int64_t i)
{
    mockllm_buf_t   *b;
    mockllm_resp_t  *r;

    r = &c->resp;
    b = &c->tmp;

    if (r->api == MOCKLLM_API_OPENAI) {
        mockllm_buf_add(b, c->prefix.data, c->prefix.len);
        mockllm_buf_adds(b, "{\"index\":0,\"delta\":{\"tool_calls\":"
                            "[{\"index\":");
        mockllm_buf_add_num(b, i);
        mockllm_buf_adds(b, ",\"id\":\"");
        mockllm_llm_call_id(c, b, "call_mock_", i);
        mockllm_buf_adds(b, "\",\"type\":\"function\",\"function\":"
                            "{\"name\":\"");
        mockllm_llm_call_name(c, b, i);
        mockllm_buf_adds(b, "\",\"arguments\":\"\"}}]},"
                            "\"finish_reason\":null}]}\n\n");

    } else if (r->api == MOCKLLM_API_RESPONSES) {
        mockllm_llm_resp_event(c, "response.output_item.added");
        mockllm_buf_adds(b, ",\"output_index\":");
        mockllm_buf_add_num(b, i);
        mockllm_buf_adds(b, ",\"item\":");
        mockllm_llm_resp_call(c, b, i, 0, NULL);
        mockllm_buf_adds(b, "}\n\n");

    } else {
        mockllm_buf_adds(b, "event: content_block_start\ndata: {\"type\":"
                            "\"content_block_start\",\"index\":");
        mockllm_buf_add_num(b, i);
        mockllm_buf_adds(b, ",\"content_block\":{\"type\":\"tool_use\","
                            "\"id\":\"");
        mockllm_llm_call_id(c, b, "toolu_mock_", i);
        mockllm_buf_adds(b, "\",\"name\":\"");
        mockllm_llm_call_name(c, b, i);
        mockllm_buf_adds(b, "\",\"input\":{}}}\n\n");

        if (i == 0) {
            /* after the first block's start, as Anthropic sends it */
            mockllm_llm_event(c);
            mockllm_buf_adds(b, "event: ping\ndata: {\"type\":\"ping\"}"
                                "\n\n");
        }
    }

    mockllm_llm_event(c);
}


/* one delta of call i's arguments: its pieces from to to */

static void
mockllm_llm_call_piece(mockllm_conn_t *c, int64_t i, int64_t from,
    int64_t to)
{
    mockllm_buf_t   *b;
    mockllm_resp_t  *r;

    r = &c->resp;
    b = &c->tmp;

    if (r->api == MOCKLLM_API_OPENAI) {
        mockllm_buf_add(b, c->prefix.data, c->prefix.len);
        mockllm_buf_adds(b, "{\"index\":0,\"delta\":{\"tool_calls\":"
                            "[{\"index\":");
        mockllm_buf_add_num(b, i);
        mockllm_buf_adds(b, ",\"function\":{\"arguments\":\"");
        mockllm_llm_args(c, b, i, from, to, 1, NULL);
        mockllm_buf_adds(b, "\"}}]},\"finish_reason\":null}]}\n\n");

    } else if (r->api == MOCKLLM_API_RESPONSES) {
        mockllm_llm_resp_event(c, "response.function_call_arguments.delta");
        mockllm_buf_adds(b, ",\"item_id\":\"");
        mockllm_llm_call_id(c, b, "fc_mock_", i);
        mockllm_buf_adds(b, "\",\"output_index\":");
        mockllm_buf_add_num(b, i);
        mockllm_buf_adds(b, ",\"delta\":\"");
        mockllm_llm_args(c, b, i, from, to, 1, NULL);
        mockllm_buf_adds(b, "\"}\n\n");

    } else {
        mockllm_buf_adds(b, "event: content_block_delta\ndata: {\"type\":"
                            "\"content_block_delta\",\"index\":");
        mockllm_buf_add_num(b, i);
        mockllm_buf_adds(b, ",\"delta\":{\"type\":\"input_json_delta\","
                            "\"partial_json\":\"");
        mockllm_llm_args(c, b, i, from, to, 1, NULL);
        mockllm_buf_adds(b, "\"}}\n\n");
    }

    mockllm_llm_event(c);
}


/* the end of call i's arguments, and the events that close it */

static void
mockllm_llm_call_close(mockllm_conn_t *c, int64_t i)
{
    mockllm_buf_t   *b;
    mockllm_resp_t  *r;

    r = &c->resp;
    b = &c->tmp;

    mockllm_llm_call_piece(c, i, r->per_call + 1, r->per_call + 1);

    if (r->api == MOCKLLM_API_ANTHROPIC) {
        mockllm_buf_adds(b, "event: content_block_stop\ndata: {\"type\":"
                            "\"content_block_stop\",\"index\":");
        mockllm_buf_add_num(b, i);
        mockllm_buf_adds(b, "}\n\n");
        mockllm_llm_event(c);

    } else if (r->api == MOCKLLM_API_RESPONSES) {
        mockllm_llm_resp_event(c, "response.function_call_arguments.done");
        mockllm_buf_adds(b, ",\"item_id\":\"");
        mockllm_llm_call_id(c, b, "fc_mock_", i);
        mockllm_buf_adds(b, "\",\"output_index\":");
        mockllm_buf_add_num(b, i);
        mockllm_buf_adds(b, ",\"arguments\":\"");
        mockllm_llm_args(c, b, i, 1, r->per_call + 1, 1, NULL);
        mockllm_buf_adds(b, "\"}\n\n");
        mockllm_llm_event(c);

        mockllm_llm_resp_event(c, "response.output_item.done");
        mockllm_buf_adds(b, ",\"output_index\":");
        mockllm_buf_add_num(b, i);
        mockllm_buf_adds(b, ",\"item\":");
        mockllm_llm_resp_call(c, b, i, 1, NULL);
        mockllm_buf_adds(b, "}\n\n");
        mockllm_llm_event(c);
    }
}


/*
 * GET /v1/models, /v1/models/{id}: its own models, in Anthropic's shape
 * when the request says anthropic-version, else OpenAI's; an id it does
 * not have is the 404 each gives.
 */

static void
mockllm_llm_models_route(mockllm_conn_t *c, const char *path, size_t n)
{
    size_t           i, k;
    mockllm_resp_t  *r;

    r = &c->resp;
    k = sizeof("/v1/models") - 1;

    r->api = c->req.anthropic_version ? MOCKLLM_API_ANTHROPIC
                                      : MOCKLLM_API_OPENAI;

    if (n == k) {
        r->kind = MOCKLLM_R_MODELS;
        r->model = MOCKLLM_NONE;
        return;
    }

    if (path[k] == '/' && n > k + 1) {
        for (i = 0; i < MOCKLLM_NMODELS; i++) {
            if (strlen(mockllm_llm_models[i].id) == n - k - 1
                && memcmp(path + k + 1, mockllm_llm_models[i].id, n - k - 1)
                   == 0)
            {
                r->kind = MOCKLLM_R_MODELS;
                r->model = (int64_t) i;
                return;
            }
        }

        /* the id quoted, bounded: the error body escapes it */
        n -= k + 1;
        n = n < 128 ? n : 128;

        if (r->api == MOCKLLM_API_ANTHROPIC) {
            snprintf(c->rd.msg, sizeof(c->rd.msg), "model: %.*s", (int) n,
                     path + k + 1);
            mockllm_llm_error(c, 404, "not_found_error", NULL, c->rd.msg);

        } else {
            snprintf(c->rd.msg, sizeof(c->rd.msg),
                     "The model '%.*s' does not exist", (int) n,
                     path + k + 1);
            mockllm_llm_error(c, 404, "invalid_request_error",
                              "model_not_found", c->rd.msg);
            r->param = 1;
            r->err_param = "model";
        }

        return;
    }

    mockllm_llm_error(c, 404, "invalid_request_error", "unknown_url",
                      "unknown endpoint");
}


static void
mockllm_llm_models_body(mockllm_conn_t *c)
{
    size_t           i;
    mockllm_buf_t   *b;
    mockllm_resp_t  *r;

    r = &c->resp;
    b = &c->tmp;

    b->len = 0;

    if (r->model != MOCKLLM_NONE) {
        mockllm_llm_model_object(c, b, (size_t) r->model);
        return;
    }

    mockllm_buf_addz(b, r->api == MOCKLLM_API_ANTHROPIC
                        ? "{\"data\":[" : "{\"object\":\"list\",\"data\":[");

    for (i = 0; i < MOCKLLM_NMODELS; i++) {
        if (i) {
            mockllm_buf_adds(b, ",");
        }

        mockllm_llm_model_object(c, b, i);
    }

    if (r->api != MOCKLLM_API_ANTHROPIC) {
        mockllm_buf_adds(b, "]}");
        return;
    }

    mockllm_buf_adds(b, "],\"has_more\":false,\"first_id\":\"");
    mockllm_buf_addz(b, mockllm_llm_models[0].id);
    mockllm_buf_adds(b, "\",\"last_id\":\"");
    mockllm_buf_addz(b, mockllm_llm_models[MOCKLLM_NMODELS - 1].id);
    mockllm_buf_adds(b, "\"}");
}


static void
mockllm_llm_model_object(mockllm_conn_t *c, mockllm_buf_t *b, size_t i)
{
    if (c->resp.api == MOCKLLM_API_ANTHROPIC) {
        mockllm_buf_adds(b, "{\"type\":\"model\",\"id\":\"");
        mockllm_buf_addz(b, mockllm_llm_models[i].id);
        mockllm_buf_adds(b, "\",\"display_name\":\"");
        mockllm_buf_addz(b, mockllm_llm_models[i].name);
        mockllm_buf_adds(b, "\",\"created_at\":\"");
        mockllm_buf_addz(b, mockllm_llm_models[i].created_at);
        mockllm_buf_adds(b, "\"}");
        return;
    }

    mockllm_buf_adds(b, "{\"id\":\"");
    mockllm_buf_addz(b, mockllm_llm_models[i].id);
    mockllm_buf_adds(b, "\",\"object\":\"model\",\"created\":");
    mockllm_buf_add_num(b, mockllm_llm_models[i].created);
    mockllm_buf_adds(b, ",\"owned_by\":\"mockllm\"}");
}
