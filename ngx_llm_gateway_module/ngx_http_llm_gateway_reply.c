
/*
 * What the gateway answers itself: every refusal and error body, in the
 * format of the endpoint's API (OpenAI's or Anthropic's), the ids that
 * name a response, and the headers that explain a limit (x-ratelimit-*,
 * retry-after, the sunset of a deprecated model).  Every gate refuses
 * through here, so that the refusals read alike.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_reply.h"
#include "ngx_http_llm_gateway_ctx.h"


static ngx_uint_t ngx_http_llm_gateway_anthropic_version(
    ngx_http_request_t *r);
static const char *ngx_http_llm_gateway_anthropic_type(ngx_uint_t status);
static u_char *ngx_http_llm_gateway_openai_error(u_char *p,
    ngx_http_llm_gateway_ctx_t *ctx, size_t mlen);
static u_char *ngx_http_llm_gateway_json_param(u_char *p,
    ngx_http_llm_gateway_ctx_t *ctx);
static u_char *ngx_http_llm_gateway_anthropic_error(u_char *p,
    ngx_http_llm_gateway_ctx_t *ctx, size_t mlen);
static ngx_http_llm_gateway_ctx_t *ngx_http_llm_gateway_bare_ctx(
    ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_gateway_retry_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static ngx_int_t ngx_http_llm_gateway_limit_headers(ngx_http_request_t *r,
    ngx_str_t *names, int64_t limit, int64_t remaining, int64_t reset_ms);
static u_char *ngx_http_llm_gateway_duration(u_char *p, int64_t ms);
static u_char *ngx_http_llm_gateway_escape_bytes(ngx_pool_t *pool, u_char *s,
    size_t len, size_t max, ngx_uint_t quotes, ngx_str_t *out);


/* 503: the gateway, not the client, is short of something for a while */

void
ngx_http_llm_gateway_reply_unavailable(ngx_http_llm_gateway_ctx_t *ctx,
    const char *code, const char *message, int64_t seconds)
{
    ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_SERVICE_UNAVAILABLE,
                                      "server_error", code, NULL, message);

    ctx->retry_after = seconds;
    ctx->retry_after_ms = seconds * 1000;
}


void
ngx_http_llm_gateway_reply_refuse(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_uint_t status, const char *type, const char *code, const char *param,
    const char *message)
{
    ctx->err_status = status;
    ctx->err_type = type;
    ctx->err_code = code;
    ctx->err_param = param;
    ctx->err_message = (u_char *) (message ? message : "Refused.");
}


/*
 * The error format of the request's endpoint: Anthropic's on the Messages
 * API, OpenAI's on OpenAI's APIs.  Where the location does not say (one
 * that serves both, or none: nginx's own refusal of a request it could
 * not take), the anthropic-version header, which Anthropic's clients
 * send with every request.  Decided once for the request: a refusal
 * after an internal redirect keeps the format of its endpoint.
 */

ngx_uint_t
ngx_http_llm_gateway_reply_dialect(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_uint_t                        dialect;
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    if (ctx != NULL && ctx->dialect) {
        return ctx->dialect;
    }

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    switch (llcf->enable ? llcf->api : 0) {

    case LLM_API_COUNT_TOKENS:
    case LLM_API_ANTHROPIC:
        dialect = NGX_HTTP_LLM_GATEWAY_ANTHROPIC;
        break;

    case LLM_API_MODELS:
    case LLM_API_NONE:
    case 0:
        dialect = ngx_http_llm_gateway_anthropic_version(r)
                  ? NGX_HTTP_LLM_GATEWAY_ANTHROPIC
                  : NGX_HTTP_LLM_GATEWAY_OPENAI;
        break;

    default:
        dialect = NGX_HTTP_LLM_GATEWAY_OPENAI;
    }

    if (ctx != NULL) {
        ctx->dialect = dialect;
    }

    return dialect;
}


static ngx_uint_t
ngx_http_llm_gateway_anthropic_version(ngx_http_request_t *r)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    /* a request line nginx could not read leaves the list empty, zeroed */
    part = &r->headers_in.headers.part;
    h = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                return 0;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].key.len == sizeof("anthropic-version") - 1
            && ngx_strncasecmp(h[i].key.data, (u_char *) "anthropic-version",
                               sizeof("anthropic-version") - 1)
               == 0)
        {
            return 1;
        }
    }
}


/*
 * Anthropic's error type for a status, as its API documents them; other
 * 4xx are invalid_request_error there, other 5xx api_error.
 */

static const char *
ngx_http_llm_gateway_anthropic_type(ngx_uint_t status)
{
    switch (status) {

    case NGX_HTTP_UNAUTHORIZED:
        return "authentication_error";

    case 402:
        return "billing_error";

    case NGX_HTTP_FORBIDDEN:
        return "permission_error";

    case NGX_HTTP_NOT_FOUND:
        return "not_found_error";

    case NGX_HTTP_REQUEST_ENTITY_TOO_LARGE:
        return "request_too_large";

    case NGX_HTTP_TOO_MANY_REQUESTS:
        return "rate_limit_error";

    case NGX_HTTP_SERVICE_UNAVAILABLE:
    case 529:
        return "overloaded_error";

    case NGX_HTTP_GATEWAY_TIME_OUT:
        return "timeout_error";
    }

    return status < 500 ? "invalid_request_error" : "api_error";
}


/*
 * The refusal's JSON body in the endpoint's format, with the headers that
 * say what it is.
 */

static ngx_buf_t *
ngx_http_llm_gateway_error_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char     *p;
    size_t      len, mlen, plen;
    ngx_buf_t  *b;
    ngx_uint_t  anthropic;

    anthropic = (ngx_http_llm_gateway_reply_dialect(r, ctx)
                 == NGX_HTTP_LLM_GATEWAY_ANTHROPIC);

    mlen = ngx_strlen(ctx->err_message);

    /* a param may be a member's name, which the client chose */
    plen = ctx->err_param ? ngx_strlen(ctx->err_param) : 0;

    /* each member either format may write, the longer frame's */
    len = sizeof("{\"type\":\"error\",\"error\":{\"type\":\"\",\"message\":"
                 "\"\",\"details\":{\"error_code\":\"\",\"limit\":\"\","
                 "\"param\":\"\",\"retry_after_ms\":}},\"request_id\":\"\"}\n")
          - 1 + NGX_INT64_LEN + sizeof("invalid_request_error") - 1
          + mlen + ngx_escape_json(NULL, ctx->err_message, mlen)
          + ngx_strlen(ctx->err_type) + ngx_strlen(ctx->err_code)
          + plen + ngx_escape_json(NULL, (u_char *) ctx->err_param, plen)
          + 4 + ctx->request_id.len;

    b = ngx_create_temp_buf(r->pool, len);
    if (b == NULL) {
        return NULL;
    }

    p = anthropic ? ngx_http_llm_gateway_anthropic_error(b->last, ctx, mlen)
                  : ngx_http_llm_gateway_openai_error(b->last, ctx, mlen);

    b->last = p;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    r->headers_out.status = ctx->err_status;
    r->headers_out.content_length_n = b->last - b->pos;
    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;

    return b;
}


/* OpenAI's error object: {"error":{"message","type","param","code"}} */

static u_char *
ngx_http_llm_gateway_openai_error(u_char *p, ngx_http_llm_gateway_ctx_t *ctx,
    size_t mlen)
{
    p = ngx_cpymem(p, "{\"error\":{\"message\":\"",
                   sizeof("{\"error\":{\"message\":\"") - 1);
    p = (u_char *) ngx_escape_json(p, ctx->err_message, mlen);
    p = ngx_sprintf(p, "\",\"type\":\"%s\",\"param\":", ctx->err_type);

    if (ctx->err_param) {
        *p++ = '"';
        p = ngx_http_llm_gateway_json_param(p, ctx);
        *p++ = '"';

    } else {
        p = ngx_cpymem(p, "null", 4);
    }

    p = ngx_sprintf(p, ",\"code\":\"%s\"", ctx->err_code);

    /* what Retry-After and retry-after-ms say, for clients that read JSON */
    if (ctx->retry_after) {
        p = ngx_sprintf(p, ",\"retry_after_ms\":%L", ctx->retry_after_ms);
    }

    return ngx_cpymem(p, "}}\n", 3);
}


static u_char *
ngx_http_llm_gateway_json_param(u_char *p, ngx_http_llm_gateway_ctx_t *ctx)
{
    return (u_char *) ngx_escape_json(p, (u_char *) ctx->err_param,
                                      ngx_strlen(ctx->err_param));
}


/*
 * Anthropic's: {"type":"error","error":{"type","message"},"request_id"}.
 * The gateway's code, and what else OpenAI's object says, go in
 * error.details, where Anthropic puts its error_code (the SDKs read it as
 * errorCode, and give a code they do not know the plain type's class).
 */

static u_char *
ngx_http_llm_gateway_anthropic_error(u_char *p,
    ngx_http_llm_gateway_ctx_t *ctx, size_t mlen)
{
    p = ngx_sprintf(p, "{\"type\":\"error\",\"error\":{\"type\":\"%s\","
                    "\"message\":\"",
                    ngx_http_llm_gateway_anthropic_type(ctx->err_status));
    p = (u_char *) ngx_escape_json(p, ctx->err_message, mlen);
    p = ngx_sprintf(p, "\",\"details\":{\"error_code\":\"%s\"",
                    ctx->err_code);

    /* OpenAI's type of a 429 names the limit, Anthropic's does not */
    if (ctx->err_status == NGX_HTTP_TOO_MANY_REQUESTS
        && (ngx_strcmp(ctx->err_type, "tokens") == 0
            || ngx_strcmp(ctx->err_type, "requests") == 0))
    {
        p = ngx_sprintf(p, ",\"limit\":\"%s\"", ctx->err_type);
    }

    if (ctx->err_param) {
        p = ngx_cpymem(p, ",\"param\":\"", sizeof(",\"param\":\"") - 1);
        p = ngx_http_llm_gateway_json_param(p, ctx);
        *p++ = '"';
    }

    if (ctx->retry_after) {
        p = ngx_sprintf(p, ",\"retry_after_ms\":%L", ctx->retry_after_ms);
    }

    if (ctx->request_id.len == 0) {
        return ngx_cpymem(p, "}},\"request_id\":null}\n",
                          sizeof("}},\"request_id\":null}\n") - 1);
    }

    return ngx_sprintf(p, "}},\"request_id\":\"%V\"}\n", &ctx->request_id);
}


/*
 * x-request-id on every response of a gateway location, the request_id
 * of its ledger row; on an Anthropic endpoint the same id in request-id
 * too, which Anthropic's SDKs read (a response's _request_id, an error's
 * requestID).  An upstream's own headers of either name are renamed
 * before (filter.c).
 */

ngx_int_t
ngx_http_llm_gateway_reply_id_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    if (ngx_http_llm_gateway_reply_add_header(r, "x-request-id",
                                              &ctx->request_id)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (ngx_http_llm_gateway_reply_dialect(r, ctx)
        != NGX_HTTP_LLM_GATEWAY_ANTHROPIC)
    {
        return NGX_OK;
    }

    return ngx_http_llm_gateway_reply_add_header(r, "request-id",
                                                 &ctx->request_id);
}


/*
 * llm_gateway_error: where error_page sends nginx's own refusals of a
 * request it could not parse or take (400, 411, 413, 414, 494, 501), so
 * that a client of the gateway gets its JSON error, not an HTML page.
 * error_page leaves the status in r->err_status, but for 494 (a header
 * too large), which it makes 400 itself.
 */

ngx_int_t
ngx_http_llm_gateway_reply_error_handler(ngx_http_request_t *r)
{
    ngx_uint_t                         status;
    const char                        *code, *msg;
    ngx_http_llm_gateway_ctx_t        *ctx;

    status = r->err_status ? r->err_status : NGX_HTTP_BAD_REQUEST;

    ctx = ngx_http_llm_gateway_ctx_get(r);

    if (ctx == NULL) {
        ctx = ngx_http_llm_gateway_bare_ctx(r);
        if (ctx == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    switch (status) {

    case NGX_HTTP_REQUEST_ENTITY_TOO_LARGE:
        ngx_http_llm_gateway_reply_too_large(ctx);
        goto send;

    case NGX_HTTP_LENGTH_REQUIRED:
        code = "length_required";
        msg = "The request body needs a Content-Length.";
        break;

    case NGX_HTTP_REQUEST_URI_TOO_LARGE:
        code = "uri_too_long";
        msg = "The request URI is too long.";
        break;

    case NGX_HTTP_NOT_IMPLEMENTED:
        code = "not_implemented";
        msg = "The request's transfer encoding is not supported.";
        break;

    case NGX_HTTP_BAD_REQUEST:
        code = "bad_request";
        msg = "The request is not valid HTTP, or its headers are too large.";
        break;

    default:
        if (status < NGX_HTTP_BAD_REQUEST || status > 599) {
            status = NGX_HTTP_BAD_REQUEST;
        }

        code = status < 500 ? "bad_request" : "server_error";
        msg = "The request was refused.";
    }

    ngx_http_llm_gateway_reply_refuse(ctx, status,
                                      status < 500 ? "invalid_request_error"
                                                   : "server_error",
                                      code, NULL, msg);

send:

    /* what ngx_http_send_header() sends, whatever error_page said */
    r->err_status = ctx->err_status;

    return ngx_http_llm_gateway_reply_send(r, ctx);
}


/*
 * A context for a request the gateway answers without admitting it (one
 * nginx refused itself): its request id, nothing to settle.
 */

static ngx_http_llm_gateway_ctx_t *
ngx_http_llm_gateway_bare_ctx(ngx_http_request_t *r)
{
    ngx_http_variable_value_t         *vv;
    ngx_http_llm_gateway_ctx_t        *ctx;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_gateway_ctx_t));
    if (ctx == NULL) {
        return NULL;
    }

    ctx->request = r;
    ctx->status = NGX_DECLINED;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    vv = ngx_http_get_indexed_variable(r, lmcf->request_id_index);

    if (vv != NULL && !vv->not_found) {
        ctx->request_id.data = vv->data;
        ctx->request_id.len = vv->len;
    }

    ngx_http_set_ctx(r, ctx, ngx_http_llm_gateway_module);

    return ctx;
}


/*
 * nginx's own 413, a body above client_max_body_size refused before or
 * while the gateway reads it, is an HTML page: in a gateway location it
 * becomes the gateway's own 413, in JSON.  The header filter asks; the
 * body filter sends ctx->err_body instead of the page.
 */

ngx_int_t
ngx_http_llm_gateway_reply_replace_413(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t **pctx)
{
    ngx_str_t                          v;
    ngx_http_llm_gateway_ctx_t        *ctx;
    ngx_http_llm_gateway_loc_conf_t   *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    if (!llcf->enable || r != r->main) {
        return NGX_OK;
    }

    ctx = *pctx;

    if (ctx == NULL) {
        ctx = ngx_http_llm_gateway_bare_ctx(r);
        if (ctx == NULL) {
            return NGX_ERROR;
        }

        *pctx = ctx;
    }

    ngx_http_llm_gateway_reply_too_large(ctx);

    ctx->err_body = ngx_http_llm_gateway_error_body(r, ctx);
    if (ctx->err_body == NULL) {
        return NGX_ERROR;
    }

    ngx_str_set(&v, "false");

    return ngx_http_llm_gateway_reply_add_header(r, "x-should-retry", &v);
}


ngx_int_t
ngx_http_llm_gateway_reply_send(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    /* the body may be unread (401): it must not be taken for a request */
    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    b = ngx_http_llm_gateway_error_body(r, ctx);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (ngx_http_llm_gateway_retry_headers(r, ctx) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


/*
 * An upstream's answer replaced by the refusal, from the header filter:
 * the body filter sends ctx->err_body instead of the upstream's body.
 */

ngx_int_t
ngx_http_llm_gateway_reply_error_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ctx->err_body = ngx_http_llm_gateway_error_body(r, ctx);
    if (ctx->err_body == NULL) {
        return NGX_ERROR;
    }

    return ngx_http_llm_gateway_retry_headers(r, ctx);
}


static ngx_int_t
ngx_http_llm_gateway_retry_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char     *p;
    ngx_str_t   v;

    if (ctx->retry_after) {
        p = ngx_pnalloc(r->pool, 2 * NGX_INT64_LEN);
        if (p == NULL) {
            return NGX_ERROR;
        }

        v.data = p;
        v.len = ngx_sprintf(p, "%L", ctx->retry_after) - p;

        if (ngx_http_llm_gateway_reply_add_header(r, "Retry-After",
                                                  &v) != NGX_OK) {
            return NGX_ERROR;
        }

        /* the exact wait, which the official SDKs prefer when it is there */
        p += v.len;
        v.data = p;
        v.len = ngx_sprintf(p, "%L", ctx->retry_after_ms) - p;

        if (ngx_http_llm_gateway_reply_add_header(r, "retry-after-ms", &v)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    /* the official SDKs obey this: a request that can never pass */
    if (ctx->never || ctx->err_status < 429) {
        ngx_str_set(&v, "false");

        if (ngx_http_llm_gateway_reply_add_header(r, "x-should-retry", &v)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/*
 * x-ratelimit-* as OpenAI sends them, on refusals and admitted requests,
 * of the buckets as admission left them: the limit is a bucket's capacity
 * (the tier's burst, its rpm), what remains is in that bucket, the reset
 * is when it is full again.  A refusal before the tenant's buckets were
 * read (no place in the journal or the zone) has none.
 */

ngx_int_t
ngx_http_llm_gateway_reply_ratelimit_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    static ngx_str_t  tokens[] = {
        ngx_string("x-ratelimit-limit-tokens"),
        ngx_string("x-ratelimit-remaining-tokens"),
        ngx_string("x-ratelimit-reset-tokens")
    };

    static ngx_str_t  requests[] = {
        ngx_string("x-ratelimit-limit-requests"),
        ngx_string("x-ratelimit-remaining-requests"),
        ngx_string("x-ratelimit-reset-requests")
    };

    if (ctx->tier == NULL || ctx->zone == NULL || !ctx->headroom) {
        return NGX_OK;
    }

    if (ngx_http_llm_gateway_limit_headers(r, tokens,
                                           ctx->tier->limits.tpm.burst,
                                           ctx->remaining, ctx->reset_ms)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* a tier without a request limit has none to report */
    if (ctx->tier->limits.rpm.rate == 0) {
        return NGX_OK;
    }

    return ngx_http_llm_gateway_limit_headers(r, requests,
                                              ctx->tier->limits.rpm.burst,
                                              ctx->remaining_requests,
                                              ctx->reset_requests_ms);
}


/* one limit's three headers: its size, what is left, when it is full */

static ngx_int_t
ngx_http_llm_gateway_limit_headers(ngx_http_request_t *r, ngx_str_t *names,
    int64_t limit, int64_t remaining, int64_t reset_ms)
{
    u_char      *p;
    ngx_str_t    v[3];
    ngx_uint_t   i;

    p = ngx_pnalloc(r->pool, 3 * NGX_INT64_LEN + 16);
    if (p == NULL) {
        return NGX_ERROR;
    }

    v[0].data = p;
    v[0].len = ngx_sprintf(p, "%L", limit) - p;
    p += v[0].len;

    v[1].data = p;
    v[1].len = ngx_sprintf(p, "%L", remaining) - p;
    p += v[1].len;

    v[2].data = p;
    v[2].len = ngx_http_llm_gateway_duration(p, reset_ms) - p;

    for (i = 0; i < 3; i++) {
        if (ngx_http_llm_gateway_reply_add_header(r, (char *) names[i].data,
                                                  &v[i])
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/*
 * What the gateway changed of the request (x-llm-downgraded-from,
 * x-llm-max-tokens-lowered), and for a model with a sunset date:
 * "Deprecation: @<unix time>" (RFC 9745) and "Sunset: <HTTP-date>"
 * (RFC 8594) on every response for it.
 */

ngx_int_t
ngx_http_llm_gateway_reply_sunset_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char                           *p;
    ngx_str_t                         v;
    ngx_uint_t                        i;
    ngx_http_llm_gateway_sunset_t    *sn;
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    /* the model asked for, when a spent cap had a cheaper one serve it */
    if (ctx->downgraded_from.len
        && ngx_http_llm_gateway_reply_add_header(r, "x-llm-downgraded-from",
                                                 &ctx->downgraded_from)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* the output limit asked for, when the tier lowered it to its maximum */
    if (ctx->req.max_tokens_lowered) {
        p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
        if (p == NULL) {
            return NGX_ERROR;
        }

        v.data = p;
        v.len = ngx_sprintf(p, "%L", ctx->req.max_tokens_asked) - p;

        if (ngx_http_llm_gateway_reply_add_header(r,
                                                  "x-llm-max-tokens-lowered",
                                                  &v)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    if (llcf->sunsets == NULL || ctx->req.model_len == 0) {
        return NGX_OK;
    }

    sn = llcf->sunsets->elts;

    for (i = 0; i < llcf->sunsets->nelts; i++) {
        if (sn[i].model.len == ctx->req.model_len
            && ngx_strncmp(sn[i].model.data, ctx->req.model,
                           ctx->req.model_len)
               == 0)
        {
            break;
        }
    }

    if (i == llcf->sunsets->nelts) {
        return NGX_OK;
    }

    p = ngx_pnalloc(r->pool, NGX_TIME_T_LEN + 1
                             + sizeof("Mon, 28 Sep 1970 06:00:00 GMT"));
    if (p == NULL) {
        return NGX_ERROR;
    }

    /* a sunset without its own deprecation date deprecates now */
    v.data = p;
    v.len = ngx_sprintf(p, "@%T", sn[i].deprecated ? sn[i].deprecated
                                                   : sn[i].sunset) - p;

    if (ngx_http_llm_gateway_reply_add_header(r, "Deprecation", &v) != NGX_OK) {
        return NGX_ERROR;
    }

    p += v.len;
    v.data = p;
    v.len = ngx_http_time(p, sn[i].sunset) - p;

    return ngx_http_llm_gateway_reply_add_header(r, "Sunset", &v);
}


/* a duration as OpenAI writes it: "250ms", "6s", "1m30.5s" */

static u_char *
ngx_http_llm_gateway_duration(u_char *p, int64_t ms)
{
    int64_t  m, s, f;

    if (ms < 1000) {
        return ngx_sprintf(p, "%Lms", ms);
    }

    m = ms / 60000;
    s = ms % 60000 / 1000;
    f = ms % 1000;

    if (m) {
        p = ngx_sprintf(p, "%Lm", m);
    }

    p = ngx_sprintf(p, "%L", s);

    if (f) {
        p = ngx_sprintf(p, ".%03L", f);

        while (p[-1] == '0') {
            p--;
        }
    }

    *p++ = 's';

    return p;
}


ngx_int_t
ngx_http_llm_gateway_reply_add_header(ngx_http_request_t *r, char *name,
    ngx_str_t *value)
{
    ngx_table_elt_t  *h;

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h->hash = 1;
    h->key.data = (u_char *) name;
    h->key.len = ngx_strlen(name);
    h->value = *value;

    return NGX_OK;
}


/*
 * A client's string as the module writes it into a log line or a
 * response header: control bytes, DEL, non-ASCII, quotes and backslashes
 * as \xNN, at most max bytes of it, then "...".  NUL-terminated.
 */

u_char *
ngx_http_llm_gateway_reply_safe(ngx_pool_t *pool, u_char *s, size_t len,
    size_t max, ngx_str_t *out)
{
    return ngx_http_llm_gateway_escape_bytes(pool, s, len, max, 1, out);
}


/* a message of the gateway's own, which may quote an escaped string */

u_char *
ngx_http_llm_gateway_reply_log_text(ngx_pool_t *pool, u_char *s, size_t len,
    size_t max, ngx_str_t *out)
{
    return ngx_http_llm_gateway_escape_bytes(pool, s, len, max, 0, out);
}


static u_char *
ngx_http_llm_gateway_escape_bytes(ngx_pool_t *pool, u_char *s, size_t len,
    size_t max, ngx_uint_t quotes, ngx_str_t *out)
{
    u_char   *p, *d;
    size_t    i, n;

    static u_char  hex[] = "0123456789abcdef";

    n = ngx_min(len, max);

    p = ngx_pnalloc(pool, n * 4 + sizeof("..."));
    if (p == NULL) {
        ngx_str_set(out, "-");
        return NULL;
    }

    d = p;

    for (i = 0; i < n; i++) {
        if (s[i] < 0x20 || s[i] >= 0x7f
            || (quotes && (s[i] == '"' || s[i] == '\\')))
        {
            *d++ = '\\';
            *d++ = 'x';
            *d++ = hex[s[i] >> 4];
            *d++ = hex[s[i] & 0xf];
            continue;
        }

        *d++ = s[i];
    }

    if (len > max) {
        d = ngx_cpymem(d, "...", 3);
    }

    *d = '\0';

    out->data = p;
    out->len = d - p;

    return p;
}


/*
 * 413: above llm_gateway_max_body, or spooled to a file because it is
 * above client_body_buffer_size (the gateway reads bodies in memory only).
 */

void
ngx_http_llm_gateway_reply_too_large(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                      "invalid_request_error",
                                      "request_too_large",
                                      NULL,
                                      "The request body is larger than this "
                                      "endpoint accepts.");
}
