
/*
 * The settling gate: at the end of every admitted request, exactly once,
 * refund what the reservation did not use and hand a settle record to
 * accountd.  The log phase settles; a request-pool cleanup settles what
 * the log phase never saw.  Records go into the journal in shared memory,
 * and from there to accountd (ngx_http_llm_gateway_accountd.c).
 */


#include "ngx_http_llm_gateway_module.h"


static void ngx_http_llm_gateway_record(ngx_http_llm_gateway_ctx_t *ctx,
    llm_settle_t *st);


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
                                && (ctx->json_len || ctx->upstream_failed))))
    {
        /*
         * A whole body is generated before it is sent: one that could
         * not be read, or was cut, cost all that was reserved, also when
         * none of it came (a reset, a stall after the header).
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
    node = ngx_http_llm_gateway_lookup(zone, ctx->key->tenant_id, 1);

    if (node != NULL) {
        if (node->state.tpm.last_ms == -1) {
            llm_tenant_init(&node->state, &ctx->tier->limits,
                            ngx_http_llm_gateway_now_ms());
        }

        llm_release(&node->state, &ctx->limits, ctx->reserved,
                    st.input_tokens + st.output_tokens,
                    ngx_http_llm_gateway_now_ms());

        ngx_http_llm_gateway_budget_settle(ctx, node, &st);
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
    ngx_time_t          *tp;
    llm_record_t         rec;
    ngx_http_request_t  *r;

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

    ngx_http_llm_gateway_journal_write(ctx, &rec);
}
