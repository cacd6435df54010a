
/*
 * The settling gate: at the end of every admitted request, exactly once,
 * refund what the reservation did not use and hand a settle record to
 * accountd.  The log phase settles; a request-pool cleanup settles what
 * the log phase never saw.  Records go to accountd over one non-blocking
 * Unix socket connection per worker, from a bounded buffer.
 */


#include "ngx_http_llm_gateway_module.h"


/* reconnection backs off from the first to the last delay, in ms */
#define NGX_HTTP_LLM_GATEWAY_RETRY_MIN  250
#define NGX_HTTP_LLM_GATEWAY_RETRY_MAX  4000


typedef struct {
    ngx_peer_connection_t        peer;
    ngx_url_t                   *url;
    ngx_log_t                   *log;

    /*
     * Frames not yet acknowledged: [head, last); bytes before pos are sent.
     * accountd acknowledges a record, in order, once PostgreSQL committed
     * it; only then does head pass it.  After a reconnection everything
     * from head goes again: accountd's ON CONFLICT makes that harmless.
     */
    u_char                      *start;
    u_char                      *end;
    u_char                      *head;
    u_char                      *pos;
    u_char                      *last;

    /* many key frames a read when a set comes */
    u_char                       in[65536];
    size_t                       in_len;

    ngx_event_t                  reconnect;
    ngx_msec_t                   retry;
    unsigned                     down:1;

    ngx_uint_t                   acked;
    ngx_uint_t                   dropped;
} ngx_http_llm_gateway_accountd_t;


static void ngx_http_llm_gateway_record(ngx_http_llm_gateway_ctx_t *ctx,
    llm_settle_t *st);
static void ngx_http_llm_gateway_connect(ngx_event_t *ev);
static void ngx_http_llm_gateway_flush(ngx_http_llm_gateway_accountd_t *ad);
static ngx_int_t ngx_http_llm_gateway_ack(
    ngx_http_llm_gateway_accountd_t *ad, llm_record_t *ack);
static int ngx_http_llm_gateway_frame(ngx_http_llm_gateway_accountd_t *ad,
    u_char *buf, size_t len, size_t *used);
static void ngx_http_llm_gateway_write_handler(ngx_event_t *ev);
static void ngx_http_llm_gateway_read_handler(ngx_event_t *ev);
static void ngx_http_llm_gateway_close(ngx_http_llm_gateway_accountd_t *ad);
static void ngx_http_llm_gateway_retry(ngx_http_llm_gateway_accountd_t *ad);


static ngx_http_llm_gateway_accountd_t  *ngx_http_llm_gateway_accountd_peer;


ngx_int_t
ngx_http_llm_gateway_log_handler(ngx_http_request_t *r)
{
    ngx_http_llm_gateway_ctx_t  *ctx;

    ctx = ngx_http_llm_gateway_get_ctx(r);

    if (ctx != NULL) {
        ngx_http_llm_gateway_settle(ctx);
    }

    return NGX_OK;
}


void
ngx_http_llm_gateway_cleanup(void *data)
{
    ngx_http_llm_gateway_ctx_t  *ctx = data;

    ngx_http_llm_gateway_settle(ctx);
    ngx_http_llm_gateway_keys_release(ctx);
}


void
ngx_http_llm_gateway_settle(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_uint_t                    status;
    llm_settle_t                  st;
    llm_settle_in_t               in;
    ngx_http_request_t           *r;
    ngx_http_upstream_t          *u;
    ngx_http_llm_gateway_node_t  *node;
    ngx_http_llm_gateway_zone_t  *zone;

    if (!ctx->admitted || ctx->settled) {
        return;
    }

    r = ctx->request;
    u = r->upstream;

    ctx->settled = 1;

    /*
     * A response cut before its end was never parsed to its end: take
     * what its events or its body said so far.  In the pool cleanup
     * r->pool is gone and cJSON falls back to malloc.
     */
    if (ctx->metering && !ctx->response_done) {
        ngx_http_llm_gateway_json_pool(r->pool);
        ngx_http_llm_gateway_response_end(ctx);
        ngx_http_llm_gateway_json_pool(NULL);
    }

    status = r->err_status ? r->err_status : r->headers_out.status;

    if (status == NGX_HTTP_CLIENT_CLOSED_REQUEST
        || (r->connection->error && !ctx->upstream_failed))
    {
        ctx->client_closed = 1;
    }

    ngx_memzero(&in, sizeof(llm_settle_in_t));

    in.prompt_estimate = ctx->req.prompt_tokens;
    in.max_tokens = ctx->req.max_tokens;

    if (ctx->upstream_failed) {
        in.end = LLM_END_UPSTREAM_ERROR;

    } else if (ctx->client_closed) {
        in.end = LLM_END_CLIENT_CLOSED;

    } else {
        in.end = LLM_END_CLEAN;
    }

    if (u == NULL || u->headers_in.status_n) {
        /* the upstream (or whatever made the content) answered: it decides */
        if (u) {
            status = u->headers_in.status_n;
        }

        in.upstream_ok = (status >= NGX_HTTP_OK
                          && status < NGX_HTTP_SPECIAL_RESPONSE);

    } else {
        /*
         * No answer: a client that left after the prompt went up may
         * still owe it; anything else failed before the upstream worked.
         */
        in.upstream_ok = (ctx->client_closed && u->request_sent);
    }

    if (in.upstream_ok && !ctx->streaming
        && (ctx->unreadable || (ctx->response_done && !ctx->sse.usage.done
                                && ctx->json_len)))
    {
        /*
         * A whole body is generated before it is sent: one that could
         * not be read, or was cut, cost all that was reserved.
         */
        in.end = LLM_END_UNREADABLE;
    }

    llm_usage_settle(&ctx->sse.usage, &in, &st);

    if (in.end == LLM_END_UNREADABLE
        && (ctx->upstream_failed || ctx->client_closed))
    {
        st.flags |= LLM_REC_F_PARTIAL;
        st.finish_reason = ctx->upstream_failed ? "upstream_error"
                                                : "client_closed";
    }

    ctx->input_tokens = st.input_tokens;
    ctx->output_tokens = st.output_tokens;
    ctx->finish_reason = st.finish_reason;

    zone = ctx->zone;

    ngx_shmtx_lock(&zone->shpool->mutex);

    /* a node with a request in flight is never expired */
    node = ngx_http_llm_gateway_lookup(zone, ctx->key->tenant_id);

    if (node != NULL) {
        if (node->state.tpm.last_ms == -1) {
            llm_tenant_init(&node->state, &ctx->tier->limits,
                            ngx_http_llm_gateway_now_ms());
        }

        llm_release(&node->state, &ctx->tier->limits, ctx->reserved,
                    st.input_tokens + st.output_tokens,
                    ngx_http_llm_gateway_now_ms());
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    ngx_log_debug7(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm gateway settle: reserved %L, in %uL, out %uL, "
                   "cached %uL, end %d, flags %uD, finish \"%s\"",
                   ctx->reserved, st.input_tokens, st.output_tokens,
                   st.cached_input_tokens, (int) in.end, st.flags,
                   st.finish_reason);

    ngx_http_llm_gateway_record(ctx, &st);
}


static void
ngx_http_llm_gateway_record(ngx_http_llm_gateway_ctx_t *ctx,
    llm_settle_t *st)
{
    size_t                            n;
    ngx_time_t                       *tp;
    llm_record_t                      rec;
    ngx_http_request_t               *r;
    ngx_http_llm_gateway_accountd_t  *ad;

    ad = ngx_http_llm_gateway_accountd_peer;

    if (ad == NULL) {
        return;
    }

    r = ctx->request;

    ngx_memzero(&rec, sizeof(llm_record_t));

    tp = ngx_timeofday();

    rec.type = LLM_REC_SETTLE;
    rec.status = r->err_status ? r->err_status : r->headers_out.status;
    rec.flags = st->flags;
    rec.tenant_id = ctx->key->tenant_id;
    rec.key_id = ctx->key->key_id;
    rec.input_tokens = st->input_tokens;
    rec.output_tokens = st->output_tokens;
    rec.cached_input_tokens = st->cached_input_tokens;
    rec.cache_write_tokens = st->cache_write_tokens;
    rec.reasoning_tokens = st->reasoning_tokens;
    rec.reserved_tokens = ctx->reserved;
    rec.ts_ms = (int64_t) tp->sec * 1000 + tp->msec;
    rec.api = ctx->req.api;

    llm_record_set_request_id(&rec, (char *) ctx->request_id.data,
                              ctx->request_id.len);
    llm_record_set_model(&rec, ctx->req.model, ctx->req.model_len);
    llm_record_set_finish_reason(&rec, st->finish_reason,
                                 ngx_strlen(st->finish_reason));

    if ((size_t) (ad->end - ad->last) < LLM_RECORD_MAX_FRAME
        && ad->head > ad->start)
    {
        n = ad->last - ad->head;
        ngx_memmove(ad->start, ad->head, n);
        ad->pos -= ad->head - ad->start;
        ad->head = ad->start;
        ad->last = ad->start + n;
    }

    n = llm_record_encode(&rec, ad->last, ad->end - ad->last);

    if (n == 0) {
        ad->dropped++;
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "llm gateway: accountd buffer full, record of "
                      "request \"%V\" dropped", &ctx->request_id);
        return;
    }

    ad->last += n;

    if (ad->peer.connection) {
        ngx_http_llm_gateway_flush(ad);
    }
}


ngx_int_t
ngx_http_llm_gateway_accountd_init(ngx_cycle_t *cycle)
{
    ngx_http_llm_gateway_accountd_t   *ad;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    if (ngx_http_cycle_get_module_main_conf(cycle, ngx_http_core_module)
        == NULL)
    {
        return NGX_OK;
    }

    lmcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_llm_gateway_module);

    if (lmcf == NULL || lmcf->accountd == NULL) {
        return NGX_OK;
    }

    ad = ngx_pcalloc(cycle->pool, sizeof(ngx_http_llm_gateway_accountd_t));
    if (ad == NULL) {
        return NGX_ERROR;
    }

    /* once per worker, sized by the directive */
    ad->start = ngx_palloc(cycle->pool, lmcf->accountd_buffer);
    if (ad->start == NULL) {
        return NGX_ERROR;
    }

    ad->end = ad->start + lmcf->accountd_buffer;
    ad->head = ad->start;
    ad->pos = ad->start;
    ad->last = ad->start;

    ad->url = lmcf->accountd;
    ad->log = cycle->log;

    ad->reconnect.handler = ngx_http_llm_gateway_connect;
    ad->reconnect.data = ad;
    ad->reconnect.log = cycle->log;
    ad->reconnect.cancelable = 1;

    ngx_http_llm_gateway_accountd_peer = ad;

    ngx_http_llm_gateway_connect(&ad->reconnect);

    return NGX_OK;
}


void
ngx_http_llm_gateway_accountd_exit(ngx_cycle_t *cycle)
{
    ngx_http_llm_gateway_accountd_t  *ad;

    ad = ngx_http_llm_gateway_accountd_peer;

    if (ad == NULL) {
        return;
    }

    if (ad->peer.connection && ad->head < ad->last) {
        ngx_http_llm_gateway_flush(ad);
    }

    if (ad->head < ad->last) {
        ngx_log_error(NGX_LOG_ERR, cycle->log, 0,
                      "llm gateway: %uz bytes of settle records not "
                      "delivered to accountd at exit", ad->last - ad->head);
    }

    if (ad->peer.connection) {
        ngx_close_connection(ad->peer.connection);
        ad->peer.connection = NULL;
    }

    ngx_http_llm_gateway_accountd_peer = NULL;
}


static void
ngx_http_llm_gateway_connect(ngx_event_t *ev)
{
    ngx_int_t                         rc;
    ngx_connection_t                 *c;
    ngx_file_info_t                   fi;
    struct sockaddr_un               *sun;
    ngx_http_llm_gateway_accountd_t  *ad;

    ad = ev->data;

    /*
     * While accountd is away its socket is gone: a look at the path, a local
     * metadata call outside any request, spares a failed connect() and its
     * log line every retry.
     */
    sun = (struct sockaddr_un *) ad->url->addrs[0].sockaddr;

    if (ngx_file_info(sun->sun_path, &fi) == NGX_FILE_ERROR) {
        if (!ad->down) {
            ngx_log_error(NGX_LOG_WARN, ad->log, ngx_errno,
                          "llm gateway: accountd socket \"%V\" is not there; "
                          "records are kept and sent when it is back",
                          &ad->url->url);
            ad->down = 1;
        }

        ngx_http_llm_gateway_retry(ad);
        return;
    }

    ngx_memzero(&ad->peer, sizeof(ngx_peer_connection_t));

    ad->peer.sockaddr = ad->url->addrs[0].sockaddr;
    ad->peer.socklen = ad->url->addrs[0].socklen;
    ad->peer.name = &ad->url->url;
    ad->peer.get = ngx_event_get_peer;
    ad->peer.log = ad->log;
    ad->peer.log_error = NGX_ERROR_ERR;

    rc = ngx_event_connect_peer(&ad->peer);

    if (rc == NGX_ERROR || rc == NGX_BUSY || rc == NGX_DECLINED) {
        if (ad->peer.connection) {
            ngx_close_connection(ad->peer.connection);
            ad->peer.connection = NULL;
        }

        ad->down = 1;
        ngx_http_llm_gateway_retry(ad);
        return;
    }

    c = ad->peer.connection;

    c->data = ad;
    c->log = ad->log;
    c->read->handler = ngx_http_llm_gateway_read_handler;
    c->write->handler = ngx_http_llm_gateway_write_handler;
    c->read->log = ad->log;
    c->write->log = ad->log;

    if (ad->down && rc == NGX_OK) {
        ngx_log_error(NGX_LOG_NOTICE, ad->log, 0,
                      "llm gateway: connected to accountd again, %uz bytes "
                      "of records to send", ad->last - ad->head);
        ad->down = 0;
    }

    ad->retry = 0;
    ad->in_len = 0;

    /* unsent and half-sent frames go again, whole: accountd deduplicates */
    ad->pos = ad->head;

    if (rc == NGX_OK) {
        ngx_http_llm_gateway_flush(ad);
    }
}


static void
ngx_http_llm_gateway_retry(ngx_http_llm_gateway_accountd_t *ad)
{
    if (ngx_exiting || ngx_terminate || ad->reconnect.timer_set) {
        return;
    }

    ad->retry = ad->retry ? ngx_min(ad->retry * 2,
                                    NGX_HTTP_LLM_GATEWAY_RETRY_MAX)
                          : NGX_HTTP_LLM_GATEWAY_RETRY_MIN;

    ngx_add_timer(&ad->reconnect, ad->retry);
}


static void
ngx_http_llm_gateway_flush(ngx_http_llm_gateway_accountd_t *ad)
{
    ssize_t            n;
    ngx_connection_t  *c;

    c = ad->peer.connection;

    /* connecting, or the socket is full: the write event comes back */
    if (!c->write->ready) {
        return;
    }

    while (ad->pos < ad->last) {
        n = c->send(c, ad->pos, ad->last - ad->pos);

        if (n == NGX_AGAIN) {
            if (ngx_handle_write_event(c->write, 0) != NGX_OK) {
                ngx_http_llm_gateway_close(ad);
            }

            return;
        }

        if (n == NGX_ERROR) {
            ngx_http_llm_gateway_close(ad);
            return;
        }

        ad->pos += n;
    }
}


/* an acknowledgement releases the oldest frame, which it must name */

static ngx_int_t
ngx_http_llm_gateway_ack(ngx_http_llm_gateway_accountd_t *ad,
    llm_record_t *ack)
{
    size_t        used;
    llm_record_t  rec;

    if (llm_record_decode(ad->head, ad->pos - ad->head, &rec, &used) != 1
        || rec.request_id_len != ack->request_id_len
        || ngx_memcmp(rec.request_id, ack->request_id, rec.request_id_len)
           != 0)
    {
        return NGX_ERROR;
    }

    ad->head += used;
    ad->acked++;

    if (ad->head == ad->last) {
        ad->head = ad->start;
        ad->pos = ad->start;
        ad->last = ad->start;
    }

    return NGX_OK;
}


static void
ngx_http_llm_gateway_write_handler(ngx_event_t *ev)
{
    ngx_connection_t  *c;

    c = ev->data;

    ngx_http_llm_gateway_flush(c->data);
}


static void
ngx_http_llm_gateway_read_handler(ngx_event_t *ev)
{
    int                               rc;
    size_t                            used, pos;
    ssize_t                           n;
    ngx_connection_t                 *c;
    ngx_http_llm_gateway_accountd_t  *ad;

    c = ev->data;
    ad = c->data;

    if (c->close) {
        ngx_http_llm_gateway_close(ad);
        return;
    }

    for ( ;; ) {
        n = c->recv(c, ad->in + ad->in_len, sizeof(ad->in) - ad->in_len);

        if (n == NGX_AGAIN) {
            if (ngx_handle_read_event(c->read, 0) != NGX_OK) {
                ngx_http_llm_gateway_close(ad);
            }

            return;
        }

        if (n == NGX_ERROR || n == 0) {
            ngx_log_error(NGX_LOG_WARN, ad->log, 0,
                          "llm gateway: accountd closed the connection");
            ngx_http_llm_gateway_close(ad);
            return;
        }

        ad->in_len += n;
        pos = 0;

        for ( ;; ) {
            rc = ngx_http_llm_gateway_frame(ad, ad->in + pos,
                                            ad->in_len - pos, &used);

            if (rc == 0) {
                break;
            }

            if (rc < 0) {
                ngx_log_error(NGX_LOG_ERR, ad->log, 0,
                              "llm gateway: unexpected frame from accountd, "
                              "reconnecting");
                ngx_http_llm_gateway_close(ad);
                return;
            }

            pos += used;
        }

        /* what is left is the start of a frame */
        ngx_memmove(ad->in, ad->in + pos, ad->in_len - pos);
        ad->in_len -= pos;
    }
}


/*
 * One frame from accountd: an acknowledgement, or part of a key set.
 * 1 and *used when one was handled, 0 when more bytes are needed, -1 when
 * the stream is broken.
 */

static int
ngx_http_llm_gateway_frame(ngx_http_llm_gateway_accountd_t *ad, u_char *buf,
    size_t len, size_t *used)
{
    int              rc, type;
    uint32_t         count;
    uint64_t         generation;
    llm_record_t     ack;
    llm_key_entry_t  e;

    switch (llm_key_frame_type(buf, len)) {

    case -1:
        return 0;

    case LLM_REC_ACK:
        rc = llm_record_decode(buf, len, &ack, used);

        if (rc == 1 && ngx_http_llm_gateway_ack(ad, &ack) != NGX_OK) {
            return -1;
        }

        return rc;

    case LLM_REC_KEYS_BEGIN:
    case LLM_REC_KEYS_END:
        rc = llm_key_decode_begin(buf, len, &type, &generation,
                                  &count, used);
        if (rc != 1) {
            return rc;
        }

        if (type == LLM_REC_KEYS_BEGIN) {
            rc = ngx_http_llm_gateway_keys_begin(generation, count, ad->log);

        } else {
            rc = ngx_http_llm_gateway_keys_end(generation, count, ad->log);
        }

        return rc == NGX_OK ? 1 : -1;

    case LLM_REC_KEY:
        rc = llm_key_decode_entry(buf, len, &e, used);
        if (rc != 1) {
            return rc;
        }

        return ngx_http_llm_gateway_keys_add(&e) == NGX_OK ? 1 : -1;

    default:
        return -1;
    }
}


static void
ngx_http_llm_gateway_close(ngx_http_llm_gateway_accountd_t *ad)
{
    /* a set half received is worth nothing: accountd sends it again */
    ngx_http_llm_gateway_keys_abort();

    if (ad->peer.connection) {
        ngx_close_connection(ad->peer.connection);
        ad->peer.connection = NULL;
    }

    ad->pos = ad->head;
    ad->down = 1;

    ngx_http_llm_gateway_retry(ad);
}
