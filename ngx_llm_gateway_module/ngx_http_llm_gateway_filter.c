
/*
 * The metering gate: header and body filters.  The header filter adds
 * x-request-id and the x-ratelimit-* headers and chooses how to meter;
 * the body filter reads every buffer (SSE events, or a copy of a JSON
 * body) and passes it on in the same call.  The bytes go unchanged but
 * for two things: the usage chunk the gateway asked for on the client's
 * behalf is cut out (llm_sse_filter()), and a stream the upstream fails
 * to finish gets a terminal in-band error event and a proper end.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_filter.h"
#include "ngx_http_llm_gateway_auth.h"
#include "ngx_http_llm_gateway_backend.h"
#include "ngx_http_llm_gateway_ctx.h"
#include "ngx_http_llm_gateway_failover.h"
#include "ngx_http_llm_gateway_flight.h"
#include "ngx_http_llm_gateway_idem.h"
#include "ngx_http_llm_gateway_json.h"
#include "ngx_http_llm_gateway_reply.h"
#include "ngx_http_llm_gateway_translate.h"


/*
 * The SSE parser's event buffer, per open stream: it starts small, as most
 * events are a few hundred bytes, and grows up to the larger of the
 * maximum and llm_gateway_response_buffer; an event larger still is
 * skipped and flagged.
 */
#define NGX_HTTP_LLM_GATEWAY_EVENT_INIT    1024
#define NGX_HTTP_LLM_GATEWAY_EVENT_MAX     16384

/* the most held back to cut out a usage chunk: real ones are < 1k */
#define NGX_HTTP_LLM_GATEWAY_HOLD_MAX      4096

/* a translated stream's output buffer: many events, reused once sent */
#define NGX_HTTP_LLM_GATEWAY_TX_BUF        4096


/* the dialect the backend answers in: the client's unless translated */
#define ngx_http_llm_gateway_filter_api(ctx)                                  \
    ((ctx)->translated ? (ctx)->up_api : (ctx)->req.api)


/* the pieces of a stream's buffer the client gets, as a chain */
typedef struct {
    ngx_http_request_t          *request;
    ngx_buf_t                   *buf;       /* the buffer being filtered */
    ngx_buf_t                   *last_buf;  /* the last piece's */
    ngx_chain_t                **last;
    ngx_chain_t                **tail;      /* last, before this buffer */
    ngx_http_llm_gateway_ctx_t  *ctx;
    ngx_buf_t                   *tx;        /* a translation's, to append to */
    unsigned                     used:1;    /* buf itself is a piece */
} ngx_http_llm_gateway_out_t;


static ngx_int_t ngx_http_llm_gateway_header_filter(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_gateway_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);
static void ngx_http_llm_gateway_rename_upstream_id(ngx_http_request_t *r);
static ngx_uint_t ngx_http_llm_gateway_hidden(ngx_str_t *key);
static ngx_int_t ngx_http_llm_gateway_send_413(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_chain_t *in);
static ngx_int_t ngx_http_llm_gateway_copy_tail(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, u_char *p, size_t len);
static ngx_int_t ngx_http_llm_gateway_copy_json(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, u_char *p, size_t len);
static ngx_int_t ngx_http_llm_gateway_stream_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_chain_t *in, ngx_chain_t **out);
static int ngx_http_llm_gateway_out(void *data, const char *p, size_t len);
static ngx_int_t ngx_http_llm_gateway_out_copy(ngx_http_llm_gateway_out_t *o,
    const char *p, size_t len);
static ngx_int_t ngx_http_llm_gateway_stream_end(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_out_t *o);
static void ngx_http_llm_gateway_upstream_finalize(ngx_http_request_t *r,
    ngx_int_t rc);
static ngx_int_t ngx_http_llm_gateway_stream_init(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static ngx_int_t ngx_http_llm_gateway_hold(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static ngx_int_t ngx_http_llm_gateway_held_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_chain_t *in);
static int ngx_http_llm_gateway_out_tx(void *data, const char *p,
    size_t len);
static ngx_int_t ngx_http_llm_gateway_tx_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_chain_t *in, ngx_chain_t **out);
static ngx_buf_t *ngx_http_llm_gateway_tx_buf(ngx_http_llm_gateway_out_t *o,
    size_t len);
static ngx_int_t ngx_http_llm_gateway_tx_send(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_chain_t *out);
static ngx_int_t ngx_http_llm_gateway_tx_failed(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_out_t *o);
static void ngx_http_llm_gateway_held_failed(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_int_t rc);


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
    ngx_int_t                    rc;
    ngx_str_t                   *type;
    ngx_http_llm_gateway_ctx_t  *ctx;

    if (r != r->main) {
        return ngx_http_next_header_filter(r);
    }

    ctx = ngx_http_llm_gateway_ctx_get(r);

    if (r->err_status == NGX_HTTP_REQUEST_ENTITY_TOO_LARGE
        && ngx_http_llm_gateway_reply_replace_413(r, &ctx) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (ctx == NULL) {
        return ngx_http_next_header_filter(r);
    }

    /* the upstream has had the request: the client's headers come back */
    ngx_http_llm_gateway_auth_pass_restore(ctx);

    /* a backend's answer: read, and maybe passed to the next backend */
    if (ctx->admitted) {
        rc = ngx_http_llm_gateway_failover_answer(r, ctx);

        if (rc == NGX_DONE) {
            /* the request runs again: the upstream ends without a byte */
            return NGX_ERROR;
        }

        if (rc == NGX_ERROR) {
            return NGX_ERROR;
        }
    }

    ngx_http_llm_gateway_rename_upstream_id(r);

    if (ngx_http_llm_gateway_reply_id_headers(r, ctx) != NGX_OK
        || ngx_http_llm_gateway_reply_ratelimit_headers(r, ctx) != NGX_OK
        || ngx_http_llm_gateway_reply_sunset_headers(r, ctx) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (!ctx->admitted || ctx->err_status) {
        return ngx_http_next_header_filter(r);
    }

    ngx_http_llm_gateway_flight_note(ctx);

    /* to learn how the upstream ended: cleanly, failed, or cut off */
    if (r->upstream
        && r->upstream->finalize_request
           != ngx_http_llm_gateway_upstream_finalize)
    {
        ctx->upstream_finalize = r->upstream->finalize_request;
        r->upstream->finalize_request = ngx_http_llm_gateway_upstream_finalize;
    }

    type = &r->headers_out.content_type;

    /* a translated answer: a stream event by event, else held whole */
    if (ctx->translated) {
        if (r->headers_out.status >= NGX_HTTP_OK
            && r->headers_out.status < NGX_HTTP_SPECIAL_RESPONSE
            && type->len >= sizeof("text/event-stream") - 1
            && ngx_strncasecmp(type->data, (u_char *) "text/event-stream",
                               sizeof("text/event-stream") - 1)
               == 0
            && (r->headers_out.content_encoding == NULL
                || r->headers_out.content_encoding->value.len == 0))
        {
            if (ngx_http_llm_gateway_stream_init(r, ctx) != NGX_OK
                || ngx_http_llm_gateway_translate_stream_init(r, ctx)
                   != NGX_OK)
            {
                return NGX_ERROR;
            }

            ngx_http_clear_content_length(r);
            ngx_http_clear_accept_ranges(r);
            ngx_http_clear_etag(r);

            r->filter_need_in_memory = 1;

            return ngx_http_next_header_filter(r);
        }

        return ngx_http_llm_gateway_hold(r, ctx);
    }

    /* encoded bytes cannot be read: the reservation then stands in full */
    if (r->headers_out.content_encoding
        && r->headers_out.content_encoding->value.len)
    {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm gateway: upstream response is encoded, "
                      "usage not read");
        ctx->unreadable = 1;
        return ngx_http_next_header_filter(r);
    }

    if (type->len >= sizeof("text/event-stream") - 1
        && ngx_strncasecmp(type->data, (u_char *) "text/event-stream",
                           sizeof("text/event-stream") - 1)
           == 0)
    {
        if (ngx_http_llm_gateway_stream_init(r, ctx) != NGX_OK) {
            return NGX_ERROR;
        }

        /* the client did not ask for the usage chunk: it is ours */
        if (ctx->req.add_include_usage) {
            ctx->sse.hold = ngx_pnalloc(r->pool,
                                        NGX_HTTP_LLM_GATEWAY_HOLD_MAX);
            if (ctx->sse.hold == NULL) {
                return NGX_ERROR;
            }

            ctx->sse.hold_cap = NGX_HTTP_LLM_GATEWAY_HOLD_MAX;
            ctx->sse.strip = 1;
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

    } else {
        ctx->unreadable = 1;
    }

    return ngx_http_next_header_filter(r);
}


/* the parser of a stream in the backend's dialect, as it passes */

static ngx_int_t
ngx_http_llm_gateway_stream_init(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    /* most events are a few hundred bytes: a larger one grows it */
    ctx->sse.buf = ngx_pnalloc(r->pool, NGX_HTTP_LLM_GATEWAY_EVENT_INIT);
    if (ctx->sse.buf == NULL) {
        return NGX_ERROR;
    }

    llm_sse_init(&ctx->sse, ngx_http_llm_gateway_filter_api(ctx),
                 ctx->sse.buf, NGX_HTTP_LLM_GATEWAY_EVENT_INIT);

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    /* an event larger than the buffer (a Responses stream's last repeats
       the whole output) grows it, up to llm_gateway_response_buffer */
    ctx->sse.grow = ngx_http_llm_gateway_json_grow;
    ctx->sse.grow_ctx = r->pool;
    ctx->sse.max = ngx_max(llcf->response_buffer,
                           NGX_HTTP_LLM_GATEWAY_EVENT_MAX);

    ctx->streaming = 1;
    ctx->metering = 1;

    /*
     * Each event must reach the client as it comes: the same switch that
     * "X-Accel-Buffering: no" flips, read right after this filter.
     */
    if (r->upstream) {
        r->upstream->buffering = 0;
    }

    return NGX_OK;
}


/*
 * A translated whole answer (a success or an error) goes out once it is
 * all in and written in the client's dialect: its headers wait for it, as
 * the XSLT filter's do, so that its length and an answer that cannot be
 * translated (a 502) are known before them.
 */

static ngx_int_t
ngx_http_llm_gateway_hold(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ctx->tx_hold = 1;
    ctx->metering = 1;

    r->filter_need_in_memory = 1;

    if (r->header_only) {
        return ngx_http_next_header_filter(r);
    }

    return NGX_OK;
}


/*
 * A held answer the upstream cut: nothing of it was sent, so the client
 * gets an error of its own dialect with the gateway's status (nginx would
 * close the connection without a byte once the upstream's header was
 * "sent").
 */

static void
ngx_http_llm_gateway_held_failed(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_int_t rc)
{
    ngx_buf_t    *b;
    ngx_chain_t   out;

    r->headers_out.status = (rc == NGX_HTTP_GATEWAY_TIME_OUT)
                            ? NGX_HTTP_GATEWAY_TIME_OUT
                            : NGX_HTTP_BAD_GATEWAY;
    r->headers_out.status_line.len = 0;
    r->keepalive = 0;

    /* what came is not the answer: not read, not translated */
    ctx->json_overflow = 1;

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return;
    }

    b->last_buf = 1;

    out.buf = b;
    out.next = NULL;

    (void) ngx_http_output_filter(r, &out);
}


static ngx_int_t
ngx_http_llm_gateway_held_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_chain_t *in)
{
    ngx_int_t     rc;
    ngx_str_t     body;
    ngx_buf_t    *b;
    ngx_chain_t  *cl, out;
    ngx_uint_t    last;

    last = 0;

    for (cl = in; cl; cl = cl->next) {
        b = cl->buf;

        if (ngx_buf_in_memory(b)) {
            if (ngx_http_llm_gateway_copy_json(r, ctx, b->pos,
                                               b->last - b->pos)
                != NGX_OK)
            {
                return NGX_ERROR;
            }

        } else if (ngx_buf_size(b)) {
            ctx->json_overflow = 1;
        }

        /* consumed: the proxy may reuse it */
        b->pos = b->last;
        b->file_pos = b->file_last;

        if (b->last_buf) {
            last = 1;
        }
    }

    if (!last) {
        return NGX_OK;
    }

    ngx_http_llm_gateway_filter_response_end(ctx);

    if (ngx_http_llm_gateway_translate_body(r, ctx, &body) != NGX_OK) {
        return NGX_ERROR;
    }

    ctx->tx_hold = 0;

    ngx_http_clear_content_length(r);
    ngx_http_clear_accept_ranges(r);
    ngx_http_clear_etag(r);
    ngx_http_clear_last_modified(r);

    /* the answer is the gateway's writing: in no encoding */
    if (r->headers_out.content_encoding) {
        r->headers_out.content_encoding->hash = 0;
        r->headers_out.content_encoding = NULL;
    }

    r->headers_out.content_length_n = body.len;
    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;
    r->headers_out.charset.len = 0;

    rc = ngx_http_next_header_filter(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->pos = body.data;
    b->last = body.data + body.len;
    b->start = b->pos;
    b->end = b->last;
    b->memory = 1;
    b->last_buf = 1;
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    ngx_http_llm_gateway_idem_keep(r, ctx, &out);

    return ngx_http_next_body_filter(r, &out);
}


static ngx_int_t
ngx_http_llm_gateway_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    size_t                       len;
    ngx_int_t                    rc;
    ngx_buf_t                   *b;
    ngx_chain_t                 *cl, *out;
    ngx_http_llm_gateway_ctx_t  *ctx;

    if (r != r->main) {
        return ngx_http_next_body_filter(r, in);
    }

    ctx = ngx_http_llm_gateway_ctx_get(r);

    if (ctx != NULL && ctx->err_body) {
        return ngx_http_llm_gateway_send_413(r, ctx, in);
    }

    if (ctx == NULL || !ctx->metering || ctx->response_done) {
        if (ctx != NULL) {
            ngx_http_llm_gateway_idem_keep(r, ctx, in);
        }

        return ngx_http_next_body_filter(r, in);
    }

    ngx_http_llm_gateway_json_pool(r->pool);

    if (ctx->tx_hold) {
        rc = ngx_http_llm_gateway_held_body(r, ctx, in);
        ngx_http_llm_gateway_json_pool(NULL);
        return rc;
    }

    if (ctx->streaming && ctx->translated) {
        rc = ngx_http_llm_gateway_tx_body(r, ctx, in, &out);

        if (rc == NGX_OK && (out != NULL || in == NULL)) {
            rc = ngx_http_llm_gateway_tx_send(r, ctx, out);
        }

        ngx_http_llm_gateway_json_pool(NULL);
        ngx_http_llm_gateway_flight_note(ctx);

        return rc;
    }

    if (ctx->streaming) {
        rc = ngx_http_llm_gateway_stream_body(r, ctx, in, &out);
        ngx_http_llm_gateway_json_pool(NULL);

        ngx_http_llm_gateway_flight_note(ctx);

        if (rc != NGX_OK) {
            return NGX_ERROR;
        }

        if (out == NULL && in != NULL) {
            /* all of it was held or cut: nothing to send yet */
            return NGX_OK;
        }

        ngx_http_llm_gateway_idem_keep(r, ctx, out);

        rc = ngx_http_next_body_filter(r, out);

        /*
         * The links are ours, and the filters below keep copies of them,
         * not them: back to the pool's free list, or a stream would leave
         * one in its request pool for every buffer.
         */

        while (out) {
            cl = out->next;
            ngx_free_chain(r->pool, out);
            out = cl;
        }

        return rc;
    }

    for (cl = in; cl; cl = cl->next) {
        b = cl->buf;

        if (ngx_buf_in_memory(b)) {
            len = b->last - b->pos;

            if (ngx_http_llm_gateway_copy_json(r, ctx, b->pos, len)
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
            ngx_http_llm_gateway_filter_response_end(ctx);
            break;
        }
    }

    ngx_http_llm_gateway_json_pool(NULL);

    ngx_http_llm_gateway_idem_keep(r, ctx, in);

    return ngx_http_next_body_filter(r, in);
}


/*
 * nginx's 413 page goes unsent, consumed: the JSON error goes in its
 * place, once; later calls only flush what is left of it.
 */

static ngx_int_t
ngx_http_llm_gateway_send_413(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_chain_t *in)
{
    ngx_chain_t   out, *cl;

    for (cl = in; cl; cl = cl->next) {
        cl->buf->pos = cl->buf->last;
        cl->buf->file_pos = cl->buf->file_last;
    }

    if (ctx->response_done) {
        return ngx_http_next_body_filter(r, NULL);
    }

    ctx->response_done = 1;

    out.buf = ctx->err_body;
    out.next = NULL;

    ngx_http_llm_gateway_idem_keep(r, ctx, &out);

    return ngx_http_next_body_filter(r, &out);
}


/*
 * Each upstream buffer goes on in the same call.  What llm_sse_filter()
 * gives out from the start of a buffer is sent from the buffer itself;
 * anything else (a piece after a cut, what was held) is copied, because
 * the proxy reuses its buffer as soon as the buffer itself is sent.  The
 * buffer's flush and last flags go on its last piece.
 */

static ngx_int_t
ngx_http_llm_gateway_stream_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_chain_t *in, ngx_chain_t **out)
{
    size_t                       len;
    ngx_buf_t                   *b, *last;
    ngx_chain_t                 *cl, *ln;
    ngx_http_llm_gateway_out_t   o;

    ngx_memzero(&o, sizeof(ngx_http_llm_gateway_out_t));

    o.request = r;
    o.last = out;
    *out = NULL;

    for (cl = in; cl; cl = cl->next) {
        b = cl->buf;

        o.buf = b;
        o.used = 0;
        o.tail = o.last;

        if (ngx_buf_in_memory(b) && ngx_buf_size(b)) {
            len = b->last - b->pos;

            if (llm_sse_filter(&ctx->sse, (char *) b->pos, len,
                               ngx_http_llm_gateway_out, &o)
                != 0)
            {
                return NGX_ERROR;
            }

            if (!o.used) {
                b->pos = b->last;
            }

        } else if (ngx_buf_size(b)) {
            /* not in memory after all: it passes unread */
            ln = ngx_alloc_chain_link(r->pool);
            if (ln == NULL) {
                return NGX_ERROR;
            }

            ln->buf = b;
            *o.last = ln;
            o.last = &ln->next;
            o.used = 1;
        }

        if (b->last_buf
            && ngx_http_llm_gateway_stream_end(r, ctx, &o) != NGX_OK)
        {
            return NGX_ERROR;
        }

        if (!(b->flush || b->last_buf || b->last_in_chain || b->sync)) {
            continue;
        }

        /* the flags go on the last piece of this buffer, or alone */

        if (o.tail != o.last) {
            last = o.last_buf;

        } else {
            last = ngx_calloc_buf(r->pool);
            if (last == NULL) {
                return NGX_ERROR;
            }

            ln = ngx_alloc_chain_link(r->pool);
            if (ln == NULL) {
                return NGX_ERROR;
            }

            ln->buf = last;
            *o.last = ln;
            o.last = &ln->next;
        }

        if (last != b) {
            last->flush = b->flush;
            last->last_buf = b->last_buf;
            last->last_in_chain = b->last_in_chain;
            last->sync = b->sync;

            b->flush = 0;
            b->last_buf = 0;
            b->last_in_chain = 0;
            b->sync = 0;
        }
    }

    *o.last = NULL;

    return NGX_OK;
}


static int
ngx_http_llm_gateway_out(void *data, const char *p, size_t len)
{
    ngx_chain_t                 *ln;
    ngx_http_llm_gateway_out_t  *o = data;

    if (len == 0) {
        return 0;
    }

    /* the buffer's own start, not yet given out: send it from there */

    if (o->buf && !o->used && (u_char *) p == o->buf->pos) {
        ln = ngx_alloc_chain_link(o->request->pool);
        if (ln == NULL) {
            return -1;
        }

        o->buf->last = o->buf->pos + len;
        o->used = 1;

        ln->buf = o->buf;
        *o->last = ln;
        o->last = &ln->next;
        o->last_buf = o->buf;

        return 0;
    }

    return (ngx_http_llm_gateway_out_copy(o, p, len) == NGX_OK) ? 0 : -1;
}


/*
 * A translated stream: each buffer of the backend's is read and consumed;
 * what the translator writes goes into buffers of the module's own, events
 * after events, reused once sent (ctx->tx_free, tx_busy), so that a long
 * stream holds a few of them, not one an event.
 */

static ngx_int_t
ngx_http_llm_gateway_tx_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_chain_t *in, ngx_chain_t **out)
{
    size_t                       used;
    ngx_int_t                    rc;
    ngx_buf_t                   *b, *last;
    ngx_uint_t                   flush, last_buf, last_in_chain, sync;
    ngx_chain_t                 *cl;
    ngx_http_llm_gateway_out_t   o;

    ngx_memzero(&o, sizeof(ngx_http_llm_gateway_out_t));

    o.request = r;
    o.ctx = ctx;
    o.last = out;
    *out = NULL;

    flush = 0;
    last_buf = 0;
    last_in_chain = 0;
    sync = 0;

    for (cl = in; cl; cl = cl->next) {
        b = cl->buf;

        while (ngx_buf_in_memory(b) && b->pos < b->last) {
            /* the first event the client gets goes before the others */
            rc = ngx_http_llm_gateway_translate_stream(ctx, b->pos,
                                                       b->last - b->pos,
                                                       !ctx->tx_sent, &used,
                                                   ngx_http_llm_gateway_out_tx,
                                                       &o);
            b->pos += used;

            if (rc == NGX_DECLINED
                && ngx_http_llm_gateway_tx_failed(r, ctx, &o) != NGX_OK)
            {
                return NGX_ERROR;
            }

            if (!ctx->tx_sent && o.last_buf != NULL) {
                ctx->tx_sent = 1;
                o.last_buf->flush = 1;
                *o.last = NULL;

                if (ngx_http_llm_gateway_tx_send(r, ctx, *out) == NGX_ERROR) {
                    return NGX_ERROR;
                }

                o.last = out;
                o.last_buf = NULL;
                o.tx = NULL;
                *out = NULL;
            }
        }

        /* read or not (a file buffer is not), it is not the client's */
        b->pos = b->last;
        b->file_pos = b->file_last;

        flush |= b->flush;
        last_in_chain |= b->last_in_chain;
        sync |= b->sync;

        if (b->last_buf) {
            last_buf = 1;

            if (ngx_http_llm_gateway_stream_end(r, ctx, &o) != NGX_OK) {
                return NGX_ERROR;
            }
        }
    }

    if (flush || last_buf || last_in_chain || sync) {
        last = o.last_buf;

        if (last == NULL) {
            /* nothing written: the flags alone, in a buffer of no memory */
            last = ngx_http_llm_gateway_tx_buf(&o, 0);
            if (last == NULL) {
                return NGX_ERROR;
            }

            last->temporary = 0;
        }

        last->flush = flush;
        last->last_buf = last_buf;
        last->last_in_chain = last_in_chain;
        last->sync = sync;
    }

    *o.last = NULL;

    return NGX_OK;
}


/*
 * What the client gets of a translated stream: kept for the idempotency
 * key, sent, and the buffers that went back to the free list.
 */

static ngx_int_t
ngx_http_llm_gateway_tx_send(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_chain_t *out)
{
    ngx_int_t  rc;

    ngx_http_llm_gateway_idem_keep(r, ctx, out);

    rc = ngx_http_next_body_filter(r, out);

    ngx_chain_update_chains(r->pool, &ctx->tx_free, &ctx->tx_busy, &out,
                            (ngx_buf_tag_t) &ngx_http_llm_gateway_module);

    return rc;
}


/* a translator's output is its own: copied, into the current buffer */

static int
ngx_http_llm_gateway_out_tx(void *data, const char *p, size_t len)
{
    ngx_buf_t                   *b;
    ngx_http_llm_gateway_out_t  *o = data;

    if (len == 0) {
        return 0;
    }

    b = o->tx;

    if (b == NULL || (size_t) (b->end - b->last) < len) {
        b = ngx_http_llm_gateway_tx_buf(o, len);
        if (b == NULL) {
            return -1;
        }

        o->tx = b;
    }

    b->last = ngx_cpymem(b->last, p, len);

    return 0;
}


/* a buffer of at least len bytes, free or new, at the end of the chain */

static ngx_buf_t *
ngx_http_llm_gateway_tx_buf(ngx_http_llm_gateway_out_t *o, size_t len)
{
    size_t        size;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    cl = ngx_chain_get_free_buf(o->request->pool, &o->ctx->tx_free);
    if (cl == NULL) {
        return NULL;
    }

    b = cl->buf;

    if (len && (b->start == NULL || (size_t) (b->end - b->start) < len)) {
        size = ngx_max(len, NGX_HTTP_LLM_GATEWAY_TX_BUF);

        b->start = ngx_palloc(o->request->pool, size);
        if (b->start == NULL) {
            return NULL;
        }

        b->end = b->start + size;
    }

    b->pos = b->start;
    b->last = b->start;
    b->temporary = (b->start != NULL);
    b->flush = 0;
    b->last_buf = 0;
    b->last_in_chain = 0;
    b->sync = 0;
    b->tag = (ngx_buf_tag_t) &ngx_http_llm_gateway_module;

    cl->next = NULL;
    *o->last = cl;
    o->last = &cl->next;
    o->last_buf = b;

    return b;
}


/*
 * The translator could not go on (its memory, a write): the client's
 * stream ends with the gateway's error event, the backend's goes on being
 * metered.
 */

static ngx_int_t
ngx_http_llm_gateway_tx_failed(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_out_t *o)
{
    size_t   n;
    u_char   msg[160];
    char     event[512];

    ngx_snprintf(msg, sizeof(msg), "The gateway could not translate the "
                 "response; request %V.%Z", &ctx->request_id);

    n = llm_sse_error_event(ctx->req.api, (char *) msg, event, sizeof(event));

    ctx->error_event = 1;

    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "llm gateway: the stream of backend \"%V\" could not be "
                  "translated, error event sent", &ctx->backend->name);

    return ngx_http_llm_gateway_out_copy(o, event, n);
}


static ngx_int_t
ngx_http_llm_gateway_out_copy(ngx_http_llm_gateway_out_t *o, const char *p,
    size_t len)
{
    ngx_buf_t    *b;
    ngx_chain_t  *ln;

    if (len == 0) {
        return NGX_OK;
    }

    b = ngx_create_temp_buf(o->request->pool, len);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->last = ngx_cpymem(b->pos, p, len);
    b->tag = (ngx_buf_tag_t) &ngx_http_llm_gateway_module;

    ln = ngx_alloc_chain_link(o->request->pool);
    if (ln == NULL) {
        return NGX_ERROR;
    }

    ln->buf = b;
    *o->last = ln;
    o->last = &ln->next;
    o->last_buf = b;
    o->tx = NULL;

    return NGX_OK;
}


/*
 * The stream ends here: what was held goes out, and if the upstream never
 * finished it (no [DONE], message_stop or response.completed, and no
 * error event of its own), the client gets the gateway's error event
 * instead of a silent cut.
 */

static ngx_int_t
ngx_http_llm_gateway_stream_end(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_out_t *o)
{
    size_t        n;
    u_char        msg[160];
    ngx_uint_t    done;
    const char   *closing, *why;
    llm_usage_t  *u;
    char          event[512];

    if (ctx->response_done) {
        return NGX_OK;
    }

    ctx->response_done = 1;

    u = &ctx->sse.usage;

    if (ctx->translated) {
        /* the translator's output ends between events */
        closing = "";

        if (ngx_http_llm_gateway_translate_stream_end(ctx,
                                                   ngx_http_llm_gateway_out_tx,
                                                   o, &done)
                == NGX_OK
            && done)
        {
            /* the client's stream is whole, or ended with an error */
            ctx->error_event |= (done == 2 && !u->error);
            return NGX_OK;
        }

        if (ctx->error_event || r->connection->error || ctx->client_closed)
        {
            return NGX_OK;
        }

    } else {
        if (llm_sse_filter_end(&ctx->sse, ngx_http_llm_gateway_out, o,
                               &closing)
            != 0)
        {
            return NGX_ERROR;
        }

        if (u->done || u->error || r->connection->error
            || ctx->client_closed)
        {
            return NGX_OK;
        }
    }

    why = ctx->fail_reason ? ctx->fail_reason : "the stream ended early";

    ngx_snprintf(msg, sizeof(msg), "The upstream failed before the response "
                 "was complete (%s); request %V.%Z", why, &ctx->request_id);

    ctx->error_event = 1;

    /* a translation closes what it left open, and numbers the event */
    if (!ctx->translated
        || ngx_http_llm_gateway_translate_stream_fail(ctx, (char *) msg,
                                                   ngx_http_llm_gateway_out_tx,
                                                      o)
           != NGX_OK)
    {
        n = llm_sse_error_event(ctx->req.api, (char *) msg, event,
                                sizeof(event));

        if (ngx_http_llm_gateway_out_copy(o, closing, ngx_strlen(closing))
            != NGX_OK
            || ngx_http_llm_gateway_out_copy(o, event, n) != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                  "llm gateway: stream not finished by the upstream (%s), "
                  "error event sent", why);

    return NGX_OK;
}


/*
 * The proxy's finalize_request, wrapped: it is called with how the
 * upstream ended (0: cleanly) before nginx finishes the response.  A stream
 * cut by the upstream (reset, early close, timeout) would end without its
 * last chunk; the client gets an error event and the last chunk instead.
 */

static void
ngx_http_llm_gateway_upstream_finalize(ngx_http_request_t *r, ngx_int_t rc)
{
    ngx_buf_t                   *b;
    ngx_chain_t                 *out, *ln;
    ngx_http_llm_gateway_ctx_t  *ctx;
    ngx_http_llm_gateway_out_t   o;

    ctx = ngx_http_llm_gateway_ctx_get(r);

    if (ctx == NULL) {
        return;
    }

    ctx->upstream_finalize(r, rc);

    if (rc == 0 || rc == NGX_DECLINED) {
        return;
    }

    if (rc == NGX_HTTP_CLIENT_CLOSED_REQUEST
        || rc == NGX_HTTP_REQUEST_TIME_OUT
        || r->connection->error)
    {
        ctx->client_closed = 1;
        return;
    }

    ctx->upstream_failed = 1;
    ctx->fail_reason = (rc == NGX_HTTP_GATEWAY_TIME_OUT)
                       ? "the upstream timed out"
                       : "the upstream connection failed";

    if (ctx->tx_hold && !ctx->response_done && !r->header_sent) {
        ngx_http_llm_gateway_held_failed(r, ctx, rc);
        return;
    }

    if (!ctx->streaming || ctx->response_done || !r->header_sent) {
        return;
    }

    ngx_memzero(&o, sizeof(ngx_http_llm_gateway_out_t));

    out = NULL;
    o.request = r;
    o.ctx = ctx;
    o.last = &out;

    ngx_http_llm_gateway_json_pool(r->pool);

    if (ngx_http_llm_gateway_stream_end(r, ctx, &o) != NGX_OK) {
        ngx_http_llm_gateway_json_pool(NULL);
        return;
    }

    ngx_http_llm_gateway_json_pool(NULL);

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return;
    }

    b->last_buf = 1;

    ln = ngx_alloc_chain_link(r->pool);
    if (ln == NULL) {
        return;
    }

    ln->buf = b;
    ln->next = NULL;
    *o.last = ln;

    /* nginx closes the connection next: this is the response's end */
    (void) ngx_http_output_filter(r, out);
}


void
ngx_http_llm_gateway_filter_response_end(ngx_http_llm_gateway_ctx_t *ctx)
{
    if (ctx->response_done || !ctx->metering) {
        return;
    }

    ctx->response_done = 1;

    if (ctx->streaming) {
        if (!ctx->translated) {
            /* a translated stream's end is the translator's (stream_end) */
            llm_sse_finish(&ctx->sse);
        }

        return;
    }

    if (ctx->json_overflow) {
        ctx->unreadable = 1;
        return;
    }

    if (ctx->json_tail) {
        (void) llm_sse_usage_from_tail(ngx_http_llm_gateway_filter_api(ctx),
                                       (char *) ctx->json,
                                       ctx->json_len, &ctx->sse.usage);

        if (!ctx->sse.usage.done) {
            ctx->unreadable = 1;
        }

        return;
    }

    if (!ctx->json_overflow && ctx->json_len) {
        (void) llm_sse_usage_from_json(ngx_http_llm_gateway_filter_api(ctx),
                                       (char *) ctx->json, ctx->json_len,
                                       &ctx->sse.usage);
    }
}


/*
 * The client sees one x-request-id (and on an Anthropic endpoint one
 * request-id), the gateway's, which names its ledger row; the provider's
 * own id, OpenAI's x-request-id or Anthropic's request-id, stays visible
 * as x-upstream-request-id for support cases.
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

        if (h[i].hash == 0) {
            continue;
        }

        if ((h[i].key.len == sizeof("x-request-id") - 1
             && ngx_strncasecmp(h[i].key.data, (u_char *) "x-request-id",
                                sizeof("x-request-id") - 1)
                == 0)
            || (h[i].key.len == sizeof("request-id") - 1
                && ngx_strncasecmp(h[i].key.data, (u_char *) "request-id",
                                   sizeof("request-id") - 1)
                   == 0))
        {
            ngx_str_set(&h[i].key, "x-upstream-request-id");
            continue;
        }

        if (ngx_http_llm_gateway_hidden(&h[i].key)) {
            h[i].hash = 0;
        }
    }
}


/*
 * The upstream's own limits and account are the operator's, not the
 * client's: its rate limit headers (the gateway sends its own, after
 * this) and the organisation or project its key belongs to.
 */

static ngx_uint_t
ngx_http_llm_gateway_hidden(ngx_str_t *key)
{
    ngx_str_t  *name;

    static ngx_str_t  prefixes[] = {
        ngx_string("x-ratelimit-"),
        ngx_string("anthropic-ratelimit-"),
        ngx_null_string
    };

    static ngx_str_t  names[] = {
        ngx_string("openai-organization"),
        ngx_string("openai-project"),
        ngx_string("anthropic-organization-id"),
        ngx_null_string
    };

    for (name = prefixes; name->len; name++) {
        if (key->len >= name->len
            && ngx_strncasecmp(key->data, name->data, name->len) == 0)
        {
            return 1;
        }
    }

    for (name = names; name->len; name++) {
        if (key->len == name->len
            && ngx_strncasecmp(key->data, name->data, name->len) == 0)
        {
            return 1;
        }
    }

    return 0;
}


/* the last LLM_SSE_TAIL_MAX bytes of a body too large to keep whole */

static ngx_int_t
ngx_http_llm_gateway_copy_tail(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, u_char *p, size_t len)
{
    u_char  *n;
    size_t   keep;

    if (ctx->json_size < LLM_SSE_TAIL_MAX) {
        n = ngx_pnalloc(r->pool, LLM_SSE_TAIL_MAX);
        if (n == NULL) {
            return NGX_ERROR;
        }

        keep = ngx_min(ctx->json_len, LLM_SSE_TAIL_MAX);

        if (keep) {
            ngx_memcpy(n, ctx->json + ctx->json_len - keep, keep);
        }

        ctx->json = n;
        ctx->json_len = keep;
        ctx->json_size = LLM_SSE_TAIL_MAX;
    }

    if (len >= LLM_SSE_TAIL_MAX) {
        ngx_memcpy(ctx->json, p + len - LLM_SSE_TAIL_MAX, LLM_SSE_TAIL_MAX);
        ctx->json_len = LLM_SSE_TAIL_MAX;
        return NGX_OK;
    }

    keep = ngx_min(ctx->json_len, LLM_SSE_TAIL_MAX - len);

    ngx_memmove(ctx->json, ctx->json + ctx->json_len - keep, keep);
    ngx_memcpy(ctx->json + keep, p, len);
    ctx->json_len = keep + len;

    return NGX_OK;
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

    if (ctx->json_tail) {
        return ngx_http_llm_gateway_copy_tail(r, ctx, p, len);
    }

    if (ctx->json_overflow || len == 0) {
        return NGX_OK;
    }

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    if (ctx->json_len + len > llcf->response_buffer
        && ctx->req.api == LLM_API_EMBEDDINGS)
    {
        /* a list of vectors: its usage comes last */
        ctx->json_tail = 1;
        return ngx_http_llm_gateway_copy_tail(r, ctx, p, len);
    }

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
