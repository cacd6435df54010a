
/*
 * Reading the backend's answer before the client sees a byte: a busy,
 * spent or failing backend is told apart (llm_provider.c), leaves the
 * candidates, and the request goes to the next one; the last answer is
 * replaced with the gateway's own when no backend is left.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_failover.h"
#include "ngx_http_llm_gateway_clock.h"
#include "ngx_http_llm_gateway_reply.h"
#include "ngx_http_llm_gateway_request.h"
#include "ngx_http_llm_gateway_route.h"
#include "llm_provider.h"
#include "llm_time.h"


/*
 * A generous time a token (ms, 20 a second): a non-streamed request cut
 * by a timeout sooner than its max_tokens take at this pace may still
 * have been generating.
 */
#define NGX_HTTP_LLM_GATEWAY_MS_PER_TOKEN  50


static void ngx_http_llm_gateway_saturated(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v);
static void ngx_http_llm_gateway_verdict(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v);
static void ngx_http_llm_gateway_backend_result(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v, int64_t now);
static llm_breaker_result_e ngx_http_llm_gateway_backend_blame(
    ngx_http_request_t *r, ngx_http_llm_gateway_ctx_t *ctx);
static ngx_int_t ngx_http_llm_gateway_failover_next(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static ngx_int_t ngx_http_llm_gateway_replace_answer(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v);
static ngx_int_t ngx_http_llm_gateway_clear_headers(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_gateway_backend_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);


/*
 * The header filter: the upstream answered.  Its answer is read for the
 * backend's state; a refusal or failure of a role's backend goes to the
 * next candidate if there is one (NGX_DONE: the filter stops here, the
 * request runs again), else the client is told in the gateway's words.
 */

ngx_int_t
ngx_http_llm_gateway_failover_answer(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    int                      k;
    ngx_int_t                rc;
    ngx_buf_t               *b;
    ngx_uint_t               i;
    ngx_list_part_t         *part;
    ngx_table_elt_t         *h;
    ngx_http_upstream_t     *u;
    llm_provider_in_t        in;
    llm_provider_verdict_t   v;

    u = r->upstream;

    /* read for a backend's state, or for its zone's backpressure */
    if (ctx->backend == NULL && !ctx->fair_flight) {
        return NGX_OK;
    }

    /* the gateway's own refusal after admission (its pacer): named too */
    if (ctx->err_status) {
        return ctx->backend ? ngx_http_llm_gateway_backend_headers(r, ctx)
                            : NGX_OK;
    }

    if (u == NULL || ctx->answered) {
        return NGX_OK;
    }

    /*
     * An answer is read while its upstream is live: one dropped for a
     * failover (or finalized for error_page) is not the next backend's.
     */
    if (u->headers_in.status_n && u->cleanup == NULL) {
        return NGX_OK;
    }

    ctx->answered = 1;

    ngx_memzero(&in, sizeof(llm_provider_in_t));

    /* 0: nginx's own answer (502, 504): the upstream gave none */
    in.status = u->headers_in.status_n ? (int) u->headers_in.status_n : 502;
    in.now_ms = ngx_http_llm_gateway_clock_wall_ms();

    /* the headers that say how long, as the provider sent them */
    part = &u->headers_in.headers.part;
    h = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                break;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].hash == 0) {
            continue;
        }

        k = llm_provider_header((const char *) h[i].key.data, h[i].key.len);

        if (k >= 0 && in.header[k].data == NULL) {
            in.header[k].data = (const char *) h[i].value.data;
            in.header[k].len = h[i].value.len;
        }
    }

    /*
     * A refusal's body is small and nearly always came with its headers:
     * what of it was read is what the wording is looked for in.
     */
    b = &u->buffer;

    if (in.status >= 400 && b->start && b->last > b->pos) {
        in.body.data = (const char *) b->pos;
        in.body.len = b->last - b->pos;    /* the reader bounds it */
    }

    llm_provider_read(&in, &v);

    if (ctx->backend == NULL) {
        /* a location without backends: the answer goes as it came */
        ngx_http_llm_gateway_saturated(r, ctx, &v);
        return NGX_OK;
    }

    ngx_http_llm_gateway_backend_result(r, ctx, &v, in.now_ms);

    if (v.cls == LLM_PROVIDER_OK) {
        return ngx_http_llm_gateway_backend_headers(r, ctx);
    }

    ngx_http_llm_gateway_verdict(r, ctx, &v);

    /*
     * Only an answer is passed on: nginx's own 502 or 504 comes from a
     * finalization under way (the breaker has counted it).
     */
    if (ctx->role && u->headers_in.status_n) {
        rc = ngx_http_llm_gateway_failover_next(r, ctx);

        if (rc == NGX_DONE || rc == NGX_ERROR) {
            return rc;
        }
    }

    /* the answer the client gets: one another backend took is not */
    ngx_http_llm_gateway_saturated(r, ctx, &v);

    if (v.cls == LLM_PROVIDER_FAILED) {
        /* passed as it came: no other backend could take it */
        ctx->err_status = 0;
        return ngx_http_llm_gateway_backend_headers(r, ctx);
    }

    return ngx_http_llm_gateway_replace_answer(r, ctx, &v);
}


/*
 * The upstream pushes back: busy (its 429 or 503, overloaded), or no
 * answer at all (unreachable, too slow) or a proxy's in front of it (502,
 * 504).  What the zone admits is reduced at once (llm_fair.c); a quota
 * spent is not saturation.
 */

static void
ngx_http_llm_gateway_saturated(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v)
{
    int                           reduced;
    int64_t                       now, capacity, ceiling;
    ngx_uint_t                    status;
    ngx_http_llm_gateway_zone_t  *zone;

    if (!ctx->fair_flight || ctx->pressed) {
        return;
    }

    status = r->upstream->headers_in.status_n;

    if (v->cls != LLM_PROVIDER_BUSY
        && !(v->cls == LLM_PROVIDER_FAILED
             && (status == 0 || status == NGX_HTTP_BAD_GATEWAY
                 || status == NGX_HTTP_GATEWAY_TIME_OUT)))
    {
        return;
    }

    ctx->pressed = 1;
    zone = ctx->zone;
    now = ngx_http_llm_gateway_clock_now_ms();

    ngx_shmtx_lock(&zone->shpool->mutex);

    reduced = llm_fair_pressure(&zone->sh->fair, now, ctx->admitted_ms);
    capacity = llm_fair_capacity(&zone->sh->fair, now);
    ceiling = llm_fair_ceiling(&zone->sh->fair, now);

    ngx_shmtx_unlock(&zone->shpool->mutex);

    if (reduced) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm gateway: the upstream pushes back (%ui, %s): "
                      "llm_gateway_zone \"%V\" admits %L tokens a minute "
                      "and %L requests at once, recovering", status,
                      v->why ? v->why : "-", &zone->name, capacity, ceiling);
    }
}


/* the log line, and the tried list the headers and the refusal tell */

static void
ngx_http_llm_gateway_verdict(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v)
{
    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                  "llm gateway: backend \"%V\" answered %ui: %s (%s), "
                  "retry in %L ms", &ctx->backend->name,
                  r->upstream->headers_in.status_n, v->code,
                  v->why ? v->why : "-", v->retry_ms);

    ngx_http_llm_gateway_route_tried(r, ctx, v->code);
}


/* what the answer says of the backend, under its lock */

static void
ngx_http_llm_gateway_backend_result(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v, int64_t now)
{
    int64_t                             wait, tenant;
    ngx_int_t                           res;
    ngx_http_llm_gateway_backend_t     *b;
    ngx_http_llm_gateway_backend_sh_t  *sh;

    b = ctx->backend;
    sh = b->sh;
    tenant = ngx_http_llm_gateway_tenant(ctx);

    /* -1: no word on its health */
    res = -1;

    if (v->cls == LLM_PROVIDER_OK) {
        res = LLM_BREAKER_OK;

    } else if (v->cls == LLM_PROVIDER_FAILED
               || (v->cls == LLM_PROVIDER_BUSY
                   && ngx_strcmp(v->code, "provider_overloaded") == 0))
    {
        /* an overloaded backend is failing too: a breaker counts it */
        res = ngx_http_llm_gateway_backend_blame(r, ctx);
    }

    ngx_shmtx_lock(&b->shpool->mutex);

    switch (v->cls) {

    case LLM_PROVIDER_OK:
        break;

    case LLM_PROVIDER_BUSY:
        sh->stats.busy++;
        wait = v->retry_ms >= 0 ? v->retry_ms : 1000;
        sh->busy_until = ngx_max(sh->busy_until, now + wait);

        if (res == -1) {
            break;
        }

        /* fall through */

    case LLM_PROVIDER_FAILED:
        sh->stats.failed++;
        break;

    default: /* LLM_PROVIDER_SPENT */
        sh->stats.spent++;
        sh->spent_until = now + (v->retry_ms >= 0
                                 ? v->retry_ms
                                 : llm_time_next_midnight(now));
    }

    if (res == -1) {
        llm_breaker_untried(&sh->breaker, &b->breaker, tenant, ctx->trial,
                            ctx->trial_ms);

    } else {
        llm_breaker_result(&sh->breaker, &b->breaker, tenant,
                           (llm_breaker_result_e) res, ctx->trial,
                           ctx->trial_ms, v->retry_ms, (uint32_t) ngx_random(),
                           now);
    }

    ngx_shmtx_unlock(&b->shpool->mutex);

    ctx->trial = 0;
}


/*
 * Whose failure it is.  An upstream the request never reached failed for
 * everyone.  A non-streamed request cut by a timeout sooner than its
 * max_tokens could be generated at MS_PER_TOKEN may still have been
 * generating: the timeout is its tenant's alone, not a sign of the
 * backend's health.  Any other (an answer of 5xx, a timeout of a stream
 * or of a request that had time enough, a connection cut) is the
 * tenant's and counts in the backend's run.
 */

static llm_breaker_result_e
ngx_http_llm_gateway_backend_blame(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    int64_t               elapsed, expected;
    ngx_http_upstream_t  *u;

    u = r->upstream;

    if (u->headers_in.status_n) {
        return LLM_BREAKER_FAILED;
    }

    if (!u->request_sent) {
        return LLM_BREAKER_BACKEND;
    }

    if (!ctx->req.stream
        && (r->err_status == NGX_HTTP_GATEWAY_TIME_OUT
            || r->headers_out.status == NGX_HTTP_GATEWAY_TIME_OUT))
    {
        elapsed = (int64_t) (ngx_current_msec - u->start_time);
        expected = ngx_min(ctx->req.max_tokens, 100000000)
                   * NGX_HTTP_LLM_GATEWAY_MS_PER_TOKEN;

        if (elapsed < expected) {
            return LLM_BREAKER_TENANT_ONLY;
        }
    }

    return LLM_BREAKER_FAILED;
}


/*
 * The next candidate takes the request, as if it had been chosen first:
 * the upstream's answer is dropped before the client saw any of it, and
 * the request runs from the preaccess phase again (an internal redirect to
 * its own URI, as error_page does), where it is paced by the new backend.
 * The admission stays: the same tokens, the same reservation of the cap,
 * so a model that costs more than the one reserved for is not a candidate.
 */

static ngx_int_t
ngx_http_llm_gateway_failover_next(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_uint_t                       trial;
    ngx_http_upstream_t             *u;
    ngx_pool_cleanup_pt              cleanup;
    ngx_http_llm_gateway_member_t   *m;
    ngx_http_llm_gateway_backend_t  *prev;

    prev = ctx->backend;

    m = ngx_http_llm_gateway_route_choose(r, ctx,
                                          ngx_http_llm_gateway_clock_wall_ms());

    if (m == NULL) {
        /* route_choose() said why, with the earliest time one comes back */
        return NGX_DECLINED;
    }

    /* the trials route_choose() took are the new backend's */
    trial = ctx->trial;
    ctx->trial = 0;

    /* the refused request is in the old pacer's minute, with no tokens */
    ngx_http_llm_gateway_route_done(ctx, prev, 0);

    ctx->pace_ticket = 0;
    ctx->pace_waited = 0;
    ctx->paced = 0;
    ctx->trial = trial;

    if (ngx_http_llm_gateway_route_use(r, ctx, m) != NGX_OK
        || ngx_http_llm_gateway_request_reprepare(r, ctx) != NGX_OK)
    {
        return NGX_ERROR;
    }

    ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0,
                  "llm gateway: \"%V\" goes from backend \"%V\" to \"%V\"",
                  &ctx->role_name, &prev->name, &ctx->backend->name);

    ngx_shmtx_lock(&prev->shpool->mutex);
    prev->sh->stats.failovers++;
    ngx_shmtx_unlock(&prev->shpool->mutex);

    ctx->answered = 0;

    /*
     * The upstream is finalized now, as nginx does before error_page: its
     * cleanup would take the request's count with it, so it gets one.
     */
    u = r->upstream;

    if (u->cleanup) {
        cleanup = *u->cleanup;
        r->main->count++;
        cleanup(r);
    }

    /* what the dropped answer set is not the next one's */
    if (ngx_http_llm_gateway_clear_headers(r) != NGX_OK) {
        return NGX_ERROR;
    }

    /*
     * The same location again, from the gateway's own phase handler, once
     * the upstream's stack has unwound: the request is posted, and holds
     * a count that the old upstream's finalization takes.  Not an internal
     * redirect: that would find the location again from a URI a rewrite
     * may have changed, and counts against nginx's limit of 10.
     */
    r->phase_handler = ctx->phase;
    r->write_event_handler = ngx_http_core_run_phases;

    r->main->count++;

    if (ngx_http_post_request(r, NULL) != NGX_OK) {
        return NGX_ERROR;
    }

    return NGX_DONE;
}


/*
 * The provider's refusal in the gateway's words: 429 with its wait, busy
 * (provider_rate_limited) or spent (insufficient_quota), whatever the
 * provider's format; its own headers go.
 */

static ngx_int_t
ngx_http_llm_gateway_replace_answer(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v)
{
    int64_t   now, until;

    now = ngx_http_llm_gateway_clock_wall_ms();

    until = now + (v->retry_ms >= 0
                   ? v->retry_ms
                   : (v->cls == LLM_PROVIDER_SPENT
                      ? llm_time_next_midnight(now) : 1000));

    /* a role's refusal was made by route_choose(), for all its backends */
    if (ctx->err_status == 0) {
        ngx_http_llm_gateway_route_unserved(r, ctx,
                                            v->cls == LLM_PROVIDER_SPENT
                                            ? NGX_HTTP_LLM_GATEWAY_SPENT
                                            : NGX_HTTP_LLM_GATEWAY_BUSY,
                                            until, now);
    }

    if (v->cls == LLM_PROVIDER_BUSY
        && ngx_strcmp(v->code, "provider_overloaded") == 0)
    {
        ctx->err_status = NGX_HTTP_SERVICE_UNAVAILABLE;
        ctx->err_type = "server_error";
        ctx->err_code = "provider_overloaded";
    }

    /* the provider's headers go with its answer */
    if (ngx_http_llm_gateway_clear_headers(r) != NGX_OK
        || ngx_http_llm_gateway_reply_error_headers(r, ctx) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return ngx_http_llm_gateway_backend_headers(r, ctx);
}


/* r->headers_out as a new request's, the upstream's answer gone */

static ngx_int_t
ngx_http_llm_gateway_clear_headers(ngx_http_request_t *r)
{
    ngx_memzero(&r->headers_out, sizeof(ngx_http_headers_out_t));

    if (ngx_list_init(&r->headers_out.headers, r->pool, 20,
                      sizeof(ngx_table_elt_t))
        != NGX_OK
        || ngx_list_init(&r->headers_out.trailers, r->pool, 4,
                         sizeof(ngx_table_elt_t))
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    r->headers_out.content_length_n = -1;
    r->headers_out.last_modified_time = -1;

    return NGX_OK;
}


/* which backend served, and how long the request waited for it */

static ngx_int_t
ngx_http_llm_gateway_backend_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char     *p;
    ngx_str_t   v;

    if (!ngx_http_llm_gateway_route_diagnostics(r)) {
        return NGX_OK;
    }

    if (ngx_http_llm_gateway_reply_add_header(r, "x-llmgw-backend",
                                              &ctx->backend->name)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (ctx->tried_names.len
        && ngx_http_llm_gateway_reply_add_header(r, "x-llmgw-failover",
                                                 &ctx->tried_names)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (!ctx->pace_waited && ctx->queued_ms == 0) {
        return NGX_OK;
    }

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    v.data = p;
    v.len = ngx_sprintf(p, "%L", ctx->queued_ms) - p;

    return ngx_http_llm_gateway_reply_add_header(r, "x-llmgw-queue-ms", &v);
}
