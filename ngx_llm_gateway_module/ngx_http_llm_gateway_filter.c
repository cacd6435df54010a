
/*
 * The metering gate: header and body filters.  The header filter adds
 * x-request-id and the x-ratelimit-* headers and chooses how to meter;
 * the body filter reads every buffer (SSE events, or a copy of a JSON
 * body) and passes it on in the same call, unchanged.
 */


#include "ngx_http_llm_gateway_module.h"


static ngx_int_t ngx_http_llm_gateway_header_filter(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_gateway_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);
static void ngx_http_llm_gateway_rename_upstream_id(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_gateway_copy_json(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, u_char *p, size_t len);


static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;


ngx_int_t
ngx_http_llm_gateway_filter_init(ngx_conf_t *cf)
{
    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_llm_gateway_header_filter;

    ngx_http_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_llm_gateway_body_filter;

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_gateway_header_filter(ngx_http_request_t *r)
{
    ngx_str_t                    *type;
    ngx_table_elt_t              *h;
    ngx_http_llm_gateway_ctx_t   *ctx;

    if (r != r->main) {
        return ngx_http_next_header_filter(r);
    }

    ctx = ngx_http_llm_gateway_get_ctx(r);

    if (ctx == NULL) {
        return ngx_http_next_header_filter(r);
    }

    ngx_http_llm_gateway_rename_upstream_id(r);

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h->hash = 1;
    ngx_str_set(&h->key, "x-request-id");
    h->value = ctx->request_id;

    if (ngx_http_llm_gateway_set_ratelimit_headers(r, ctx) != NGX_OK
        || ngx_http_llm_gateway_set_sunset_headers(r, ctx) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (!ctx->admitted || ctx->err_status) {
        return ngx_http_next_header_filter(r);
    }

    /* encoded bytes cannot be read: the reservation then stands in full */
    if (r->headers_out.content_encoding
        && r->headers_out.content_encoding->value.len)
    {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm gateway: upstream response is encoded, "
                      "usage not read");
        return ngx_http_next_header_filter(r);
    }

    type = &r->headers_out.content_type;

    if (type->len >= sizeof("text/event-stream") - 1
        && ngx_strncasecmp(type->data, (u_char *) "text/event-stream",
                           sizeof("text/event-stream") - 1)
           == 0)
    {
        ctx->sse.buf = ngx_pnalloc(r->pool, NGX_HTTP_LLM_GATEWAY_EVENT_MAX);
        if (ctx->sse.buf == NULL) {
            return NGX_ERROR;
        }

        llm_sse_init(&ctx->sse, ctx->req.api, ctx->sse.buf,
                     NGX_HTTP_LLM_GATEWAY_EVENT_MAX);

        ctx->streaming = 1;
        ctx->metering = 1;

        /*
         * Each event must reach the client as it comes: the same switch
         * that "X-Accel-Buffering: no" flips, read right after this filter.
         */
        if (r->upstream) {
            r->upstream->buffering = 0;
        }

    } else if (type->len >= sizeof("application/json") - 1
               && ngx_strncasecmp(type->data, (u_char *) "application/json",
                                  sizeof("application/json") - 1)
                  == 0)
    {
        ctx->metering = 1;
    }

    if (ctx->metering) {
        /* file buffers (sendfile) would pass unread */
        r->filter_need_in_memory = 1;
    }

    return ngx_http_next_header_filter(r);
}


static ngx_int_t
ngx_http_llm_gateway_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    size_t                       len;
    ngx_buf_t                   *b;
    ngx_chain_t                 *cl;
    ngx_http_llm_gateway_ctx_t  *ctx;

    if (r != r->main) {
        return ngx_http_next_body_filter(r, in);
    }

    ctx = ngx_http_llm_gateway_get_ctx(r);

    if (ctx == NULL || !ctx->metering || ctx->response_done) {
        return ngx_http_next_body_filter(r, in);
    }

    ngx_http_llm_gateway_json_pool(r->pool);

    for (cl = in; cl; cl = cl->next) {
        b = cl->buf;

        if (ngx_buf_in_memory(b)) {
            len = b->last - b->pos;

            if (ctx->streaming) {
                llm_sse_feed(&ctx->sse, (char *) b->pos, len);

            } else if (ngx_http_llm_gateway_copy_json(r, ctx, b->pos, len)
                       != NGX_OK)
            {
                ngx_http_llm_gateway_json_pool(NULL);
                return NGX_ERROR;
            }

        } else if (ngx_buf_size(b)) {
            /* a body the proxy spooled to disk is not read back here */
            ctx->json_overflow = 1;
        }

        if (b->last_buf) {
            ngx_http_llm_gateway_response_end(ctx);
            break;
        }
    }

    ngx_http_llm_gateway_json_pool(NULL);

    return ngx_http_next_body_filter(r, in);
}


void
ngx_http_llm_gateway_response_end(ngx_http_llm_gateway_ctx_t *ctx)
{
    if (ctx->response_done || !ctx->metering) {
        return;
    }

    ctx->response_done = 1;

    if (ctx->streaming) {
        llm_sse_finish(&ctx->sse);
        return;
    }

    if (!ctx->json_overflow && ctx->json_len) {
        (void) llm_usage_from_json(ctx->req.api, (char *) ctx->json,
                                   ctx->json_len, &ctx->sse.usage);
    }
}


/*
 * The client sees one x-request-id, the gateway's, which names its ledger
 * row; the provider's own id stays visible for support cases.
 */

static void
ngx_http_llm_gateway_rename_upstream_id(ngx_http_request_t *r)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    part = &r->headers_out.headers.part;
    h = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                return;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].hash != 0
            && h[i].key.len == sizeof("x-request-id") - 1
            && ngx_strncasecmp(h[i].key.data, (u_char *) "x-request-id",
                               sizeof("x-request-id") - 1)
               == 0)
        {
            ngx_str_set(&h[i].key, "x-upstream-request-id");
        }
    }
}


/*
 * A copy, bounded by llm_gateway_response_buffer, so that the original
 * buffers go on at once; it grows by doubling from the Content-Length or
 * 16k, in the request pool.
 */

static ngx_int_t
ngx_http_llm_gateway_copy_json(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, u_char *p, size_t len)
{
    u_char                           *n;
    size_t                            size;
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    if (ctx->json_overflow || len == 0) {
        return NGX_OK;
    }

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    if (ctx->json_len + len > llcf->response_buffer) {
        ctx->json_overflow = 1;
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm gateway: response larger than "
                      "llm_gateway_response_buffer, usage not read");
        return NGX_OK;
    }

    if (ctx->json == NULL || ctx->json_len + len > ctx->json_size) {
        size = ctx->json_size ? ctx->json_size * 2 : 16384;

        if (ctx->json == NULL && r->headers_out.content_length_n > 0) {
            size = r->headers_out.content_length_n;
        }

        while (size < ctx->json_len + len) {
            size *= 2;
        }

        size = ngx_min(size, llcf->response_buffer);

        n = ngx_pnalloc(r->pool, size);
        if (n == NULL) {
            return NGX_ERROR;
        }

        if (ctx->json) {
            ngx_memcpy(n, ctx->json, ctx->json_len);
            ngx_pfree(r->pool, ctx->json);
        }

        ctx->json = n;
        ctx->json_size = size;
    }

    ngx_memcpy(ctx->json + ctx->json_len, p, len);
    ctx->json_len += len;

    return NGX_OK;
}
