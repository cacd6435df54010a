
/*
 * The pacer's wait: a request leaves for its backend no faster than the
 * backend's RPM and TPM allow (llm_pacer.c, in the backend zone), waiting
 * on a timer for its turn, or is refused when its wait would be too long.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_pace.h"
#include "ngx_http_llm_gateway_clock.h"
#include "ngx_http_llm_gateway_ctx.h"
#include "ngx_http_llm_gateway_reply.h"
#include "ngx_http_llm_gateway_request.h"
#include "ngx_http_llm_gateway_route.h"


/* the waiter asks again at least this often (ms): plans can move earlier */
#define NGX_HTTP_LLM_GATEWAY_PACE_POLL     250


static ngx_int_t ngx_http_llm_gateway_pace_try(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_msec_t *delay);
static ngx_int_t ngx_http_llm_gateway_pace_next(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_msec_t *delay);
static void ngx_http_llm_gateway_pace_handler(ngx_http_request_t *r);
static void ngx_http_llm_gateway_pace_refuse(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_pacer_rc_e rc, int64_t wait);


/*
 * After admission, before the upstream: the backend's pacer.  NGX_OK: go
 * now; NGX_AGAIN: the request waits, its timer set; NGX_DECLINED:
 * refused, ctx says why.
 */

ngx_int_t
ngx_http_llm_gateway_pace(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_int_t     rc;
    ngx_msec_t    delay;
    ngx_event_t  *wev;

    if (ctx->backend == NULL) {
        return NGX_OK;
    }

    ctx->pace_asked = ngx_http_llm_gateway_clock_now_ms();

    rc = ngx_http_llm_gateway_pace_next(r, ctx, &delay);

    if (rc != NGX_AGAIN) {
        return rc;
    }

    /* as limit_req delays: the client may go meanwhile */
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_llm_gateway_pace_handler;

    wev = r->connection->write;
    wev->delayed = 1;
    ngx_add_timer(wev, delay);

    return NGX_AGAIN;
}


/*
 * The pacer asked, first or again.  A busy backend (the provider said how
 * long) holds the request as its queue would, within max_wait.
 */

static ngx_int_t
ngx_http_llm_gateway_pace_try(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_msec_t *delay)
{
    int64_t                             now, wall, until, start, wait;
    uint64_t                            tenant;
    ngx_uint_t                          state, trials;
    llm_pacer_rc_e                      rc;
    ngx_http_llm_gateway_backend_t     *b;
    ngx_http_llm_gateway_backend_sh_t  *sh;

    b = ctx->backend;
    sh = b->sh;

    now = ngx_http_llm_gateway_clock_now_ms();
    wall = ngx_http_llm_gateway_clock_wall_ms();

    if (ctx->pace_ticket == 0) {
        /*
         * A role's trials were taken when its backend was chosen; a
         * backend's own are taken once, by the first ask.
         */
        trials = ctx->trial;
        state = ngx_http_llm_gateway_route_state(b,
                                           ngx_http_llm_gateway_tenant(ctx),
                                           wall,
                                           ctx->role == NULL && !ctx->trial,
                                           &trials, ctx->trial_ms, &until);
        if (ctx->role == NULL && !ctx->trial && trials) {
            ctx->trial_ms = wall;
        }

        ctx->trial = trials;

        if (state == NGX_HTTP_LLM_GATEWAY_BUSY
            && until - wall + (now - ctx->pace_asked)
               <= (int64_t) b->pacer.max_wait_ms)
        {
            ctx->pace_waited = 1;
            *delay = (ngx_msec_t) ngx_min(until - wall,
                                          NGX_HTTP_LLM_GATEWAY_PACE_POLL);
            *delay = ngx_max(*delay, 1);
            return NGX_AGAIN;
        }

        if (state != NGX_HTTP_LLM_GATEWAY_UP) {
            ngx_http_llm_gateway_route_unserved(r, ctx, state, until, wall);
            return NGX_DECLINED;
        }
    }

    if (sh->pacer == NULL) {
        ngx_shmtx_lock(&b->shpool->mutex);
        sh->stats.started++;

        if (ctx->pace_waited) {
            sh->stats.waited++;
            sh->stats.waited_ms += now - ctx->pace_asked;
        }

        ngx_shmtx_unlock(&b->shpool->mutex);

        ctx->paced = 1;
        ctx->queued_ms += now - ctx->pace_asked;

        return NGX_OK;
    }

    /* the queue's places and starts are shared among tenants */
    tenant = ctx->key ? (uint64_t) ctx->key->tenant_id : 0;

    ngx_shmtx_lock(&b->shpool->mutex);

    if (ctx->pace_ticket == 0) {
        rc = llm_pacer_ask_for(sh->pacer, tenant, ctx->reserved, now, &start,
                               &ctx->pace_ticket);

    } else {
        rc = llm_pacer_go(sh->pacer, &ctx->pace_ticket, now, &start);

        if (rc == LLM_PACER_NOT_FOUND) {
            /*
             * Taken for gone while this worker was stalled, or its place
             * taken by a tenant under its share: in line again, if its
             * own share has room.
             */
            rc = llm_pacer_ask_for(sh->pacer, tenant, ctx->reserved, now,
                                   &start, &ctx->pace_ticket);
        }
    }

    switch (rc) {

    case LLM_PACER_GO:
        sh->stats.started++;

        if (ctx->pace_waited) {
            sh->stats.waited++;
            sh->stats.waited_ms += now - ctx->pace_asked;
        }

        ctx->paced = 1;
        break;

    case LLM_PACER_WAIT:
        ctx->pace_waited = 1;

        /* held by tokens beyond max_wait: it gives up at its deadline */
        if (now - ctx->pace_asked >= (int64_t) b->pacer.max_wait_ms) {
            (void) llm_pacer_cancel(sh->pacer, ctx->pace_ticket, now);
            ctx->pace_ticket = 0;
            sh->stats.refused++;
            rc = LLM_PACER_TOO_LONG;
        }

        break;

    default:
        sh->stats.refused++;
        ctx->pace_ticket = 0;
    }

    ngx_shmtx_unlock(&b->shpool->mutex);

    switch (rc) {

    case LLM_PACER_GO:
        ctx->queued_ms += now - ctx->pace_asked;

        if (now > ctx->pace_asked) {
            ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                          "llm gateway: waited %L ms for backend \"%V\"",
                          now - ctx->pace_asked, &b->name);
        }

        return NGX_OK;

    case LLM_PACER_WAIT:
        /* plans move earlier when others leave or use less: looked at often */
        wait = ngx_min(start - now, NGX_HTTP_LLM_GATEWAY_PACE_POLL);
        wait = ngx_min(wait, ctx->pace_asked + (int64_t) b->pacer.max_wait_ms
                             - now);
        *delay = (ngx_msec_t) ngx_max(wait, 1);
        return NGX_AGAIN;

    default:
        ngx_http_llm_gateway_pace_refuse(r, ctx, rc, start - now);
        return NGX_DECLINED;
    }
}


/*
 * A role's backend that cannot take the request now (its queue is full,
 * the wait too long, the request too large for it, or it went out since
 * it was chosen) passes it to the next candidate, before any upstream saw
 * it.  When none can, the first refusal is the answer.
 */

static ngx_int_t
ngx_http_llm_gateway_pace_next(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_msec_t *delay)
{
    u_char                          *message;
    int64_t                          now, wall, retry_after, retry_after_ms;
    ngx_int_t                        rc;
    ngx_uint_t                       status, never;
    const char                      *type, *code, *param;
    ngx_http_llm_gateway_member_t   *m;
    ngx_http_llm_gateway_backend_t  *prev;

    rc = ngx_http_llm_gateway_pace_try(r, ctx, delay);

    if (rc != NGX_DECLINED || ctx->role == NULL) {
        return rc;
    }

    status = ctx->err_status;
    type = ctx->err_type;
    code = ctx->err_code;
    param = ctx->err_param;
    message = ctx->err_message;
    retry_after = ctx->retry_after;
    retry_after_ms = ctx->retry_after_ms;
    never = ctx->never;

    ngx_http_llm_gateway_route_tried(r, ctx, code);
    ngx_http_llm_gateway_route_done(ctx, ctx->backend, 0);
    prev = ctx->backend;

    for ( ;; ) {
        ctx->err_status = 0;
        ctx->never = 0;

        wall = ngx_http_llm_gateway_clock_wall_ms();
        m = ngx_http_llm_gateway_route_choose(r, ctx, wall);

        if (m == NULL) {
            break;
        }

        if (ngx_http_llm_gateway_route_use(r, ctx, m) != NGX_OK
            || ngx_http_llm_gateway_request_reprepare(r, ctx) != NGX_OK)
        {
            break;
        }

        ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0,
                      "llm gateway: \"%V\" goes from backend \"%V\" to "
                      "\"%V\": %s", &ctx->role_name, &prev->name,
                      &ctx->backend->name, code);

        now = ngx_http_llm_gateway_clock_now_ms();

        ctx->queued_ms += now - ctx->pace_asked;
        ctx->pace_asked = now;
        ctx->pace_waited = 0;

        rc = ngx_http_llm_gateway_pace_try(r, ctx, delay);

        if (rc != NGX_DECLINED) {
            return rc;
        }

        ngx_http_llm_gateway_route_tried(r, ctx, ctx->err_code);
        ngx_http_llm_gateway_route_done(ctx, ctx->backend, 0);
        prev = ctx->backend;
    }

    /* the first backend's refusal, which says the most */
    ctx->err_status = status;
    ctx->err_type = type;
    ctx->err_code = code;
    ctx->err_param = param;
    ctx->err_message = message;
    ctx->retry_after = retry_after;
    ctx->retry_after_ms = retry_after_ms;
    ctx->never = never;

    return NGX_DECLINED;
}


static void
ngx_http_llm_gateway_pace_handler(ngx_http_request_t *r)
{
    ngx_int_t                    rc;
    ngx_msec_t                   delay;
    ngx_event_t                 *wev;
    ngx_http_llm_gateway_ctx_t  *ctx;

    wev = r->connection->write;

    if (wev->delayed) {
        if (ngx_handle_write_event(wev, 0) != NGX_OK) {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        }

        return;
    }

    ctx = ngx_http_llm_gateway_ctx_get(r);

    rc = ngx_http_llm_gateway_pace_next(r, ctx, &delay);

    if (rc == NGX_AGAIN) {
        wev->delayed = 1;
        ngx_add_timer(wev, delay);
        return;
    }

    if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    r->read_event_handler = ngx_http_block_reading;

    /* on to the upstream, or the refusal, from the preaccess phase again */
    ctx->status = NGX_DECLINED;

    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
}


static void
ngx_http_llm_gateway_pace_refuse(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_pacer_rc_e rc, int64_t wait)
{
    u_char                          *p;
    ngx_str_t                        name;
    const char                      *limit;
    ngx_http_llm_gateway_backend_t  *b;

    b = ctx->backend;
    limit = ngx_http_llm_gateway_request_limit_name(ctx);

    /* the backend's name is the operator's: said where diagnostics are on */
    ngx_str_null(&name);

    if (ngx_http_llm_gateway_route_diagnostics(r)) {
        name = b->name;
    }

    p = ngx_pnalloc(r->pool, 256 + name.len);
    if (p == NULL) {
        return;
    }

    if (rc == LLM_PACER_TOO_LARGE) {
        ngx_sprintf(p, "Request too large: %L tokens exceed the %L tokens a "
                    "minute the upstream%s%V%s allows.%Z",
                    ctx->reserved, b->pacer.tpm, name.len ? " \"" : "",
                    &name, name.len ? "\"" : "");

        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                          "tokens", "request_too_large",
                                          ctx->req.api == LLM_API_EMBEDDINGS
                                          ? "input" : limit, (char *) p);
        ctx->never = 1;
        return;
    }

    if (rc == LLM_PACER_FULL || wait < 1000) {
        wait = 1000;
    }

    ctx->retry_after = llm_bucket_seconds(wait);
    ctx->retry_after_ms = wait;

    ngx_sprintf(p, "The upstream%s%V%s is at its rate limit; its queue %s. "
                "Please try again in %Ls.%Z", name.len ? " \"" : "", &name,
                name.len ? "\"" : "",
                rc == LLM_PACER_FULL ? "is full" : "is longer than we wait",
                ctx->retry_after);

    ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                      "requests",
                                      "provider_rate_limited", NULL,
                                      (char *) p);
}
