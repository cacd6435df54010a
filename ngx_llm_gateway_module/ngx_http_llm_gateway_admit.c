
/*
 * The admission gate, in the preaccess phase: authenticate, read the body
 * without blocking, inspect it, reserve n_in + max_tokens in the tenant's
 * bucket under the zone lock, or refuse with an OpenAI-format error.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_admit.h"
#include "ngx_http_llm_gateway_accountd.h"
#include "ngx_http_llm_gateway_auth.h"
#include "ngx_http_llm_gateway_budget.h"
#include "ngx_http_llm_gateway_clock.h"
#include "ngx_http_llm_gateway_ctx.h"
#include "ngx_http_llm_gateway_flight.h"
#include "ngx_http_llm_gateway_idem.h"
#include "ngx_http_llm_gateway_journal.h"
#include "ngx_http_llm_gateway_json.h"
#include "ngx_http_llm_gateway_models.h"
#include "ngx_http_llm_gateway_pace.h"
#include "ngx_http_llm_gateway_reply.h"
#include "ngx_http_llm_gateway_request.h"
#include "ngx_http_llm_gateway_route.h"
#include "ngx_http_llm_gateway_zone.h"


/* a request waiting for a lease looks again this often, this long (ms) */
#define NGX_HTTP_LLM_GATEWAY_WAIT_STEP     5
#define NGX_HTTP_LLM_GATEWAY_WAIT_MAX      3000


static void ngx_http_llm_gateway_body_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_gateway_inspect(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static void ngx_http_llm_gateway_admit(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static ngx_int_t ngx_http_llm_gateway_admit_translatable(
    ngx_http_request_t *r, ngx_http_llm_gateway_ctx_t *ctx);
static ngx_int_t ngx_http_llm_gateway_admit_idem(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static ngx_int_t ngx_http_llm_gateway_admit_budget(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_node_t *node);
static ngx_int_t ngx_http_llm_gateway_admit_tokens(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_node_t *node,
    int64_t cost, int64_t now, llm_admit_t *adm, llm_bucket_rc_e *brc);
static void ngx_http_llm_gateway_admit_limited(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_bucket_rc_e brc, llm_admit_t *adm,
    int64_t cost);
static void ngx_http_llm_gateway_admit_request(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static ngx_int_t ngx_http_llm_gateway_admit_method(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *id);
static ngx_int_t ngx_http_llm_gateway_admit_models(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *id);
static void ngx_http_llm_gateway_admit_count(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static void ngx_http_llm_gateway_wait_handler(ngx_http_request_t *r);
static void ngx_http_llm_gateway_admit_lease(ngx_http_llm_gateway_ctx_t *ctx);
static void ngx_http_llm_gateway_admit_ask(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_str_t *model, int64_t want);
static void ngx_http_llm_gateway_admit_role_prices(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, int64_t now);
static ngx_int_t ngx_http_llm_gateway_downgrade(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_tier_t *tier);
static void ngx_http_llm_gateway_downgrade_undo(
    ngx_http_llm_gateway_ctx_t *ctx);
static void ngx_http_llm_gateway_budget_refuse(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_int_t rc, int64_t now,
    int64_t until);
static void ngx_http_llm_gateway_admit_headroom(
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_node_t *node,
    int64_t now);
static void ngx_http_llm_gateway_soft_limits(ngx_http_llm_gateway_tier_t *tier,
    llm_limits_t *limits);
static llm_fair_rc_e ngx_http_llm_gateway_fair(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_zone_t *zone, ngx_http_llm_gateway_node_t *node,
    int64_t cost, int64_t now, int64_t *wait);
static void ngx_http_llm_gateway_fair_refuse(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_fair_rc_e rc, int64_t wait);
static void ngx_http_llm_gateway_unpriced_refuse(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_int_t rc, int64_t now);
static void ngx_http_llm_gateway_log_refusal(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_loc_conf_t *llcf);


ngx_int_t
ngx_http_llm_gateway_admit_handler(ngx_http_request_t *r)
{
    ngx_int_t                          rc;
    ngx_str_t                          id;
    ngx_http_llm_gateway_ctx_t        *ctx;
    ngx_http_llm_gateway_loc_conf_t   *llcf;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    if (r != r->main) {
        return NGX_DECLINED;
    }

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    if (!llcf->enable) {
        return NGX_DECLINED;
    }

    ctx = ngx_http_llm_gateway_ctx_get(r);

    if (ctx == NULL) {
        ctx = ngx_http_llm_gateway_ctx_create(r);
        if (ctx == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

        if (ngx_http_llm_gateway_ctx_request_id(r, ctx,
                                                 lmcf->request_id_index)
            != NGX_OK)
        {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        /* the endpoint's error format, kept past an internal redirect */
        (void) ngx_http_llm_gateway_reply_dialect(r, ctx);

        if (ngx_http_llm_gateway_admit_method(r, ctx, &id) != NGX_OK) {
            /* refused: no key is looked at for a path or a method */

        } else if (ngx_http_llm_gateway_auth(r, ctx) == NGX_OK) {

            ctx->tier = ngx_http_llm_gateway_request_find_tier(llcf,
                                                               &ctx->key->tier);

            if (ctx->tier == NULL) {
                ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_FORBIDDEN,
                                                  "permission_error",
                                                  "tier_not_allowed", NULL,
                                                  "This API key's tier is not "
                                                  "served at this endpoint.");
            }
        }

        if (ctx->err_status == 0 && llcf->api == LLM_API_MODELS) {
            rc = ngx_http_llm_gateway_admit_models(r, ctx, &id);

            if (rc != NGX_DECLINED) {
                ngx_http_finalize_request(r, rc);
                return NGX_DONE;
            }
        }

        /* a body announced too large is refused before it is read */
        if (ctx->err_status == 0
            && r->headers_in.content_length_n > (off_t) llcf->max_body)
        {
            ngx_http_llm_gateway_reply_too_large(ctx);
        }

        if (ctx->err_status == 0) {
            ctx->status = NGX_DONE;

            /* one buffer in memory: a body in a temp file is refused */
            r->request_body_in_single_buf = 1;

            rc = ngx_http_read_client_request_body(r,
                                            ngx_http_llm_gateway_body_handler);
            if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
                return rc;
            }

            ngx_http_finalize_request(r, NGX_DONE);
            return NGX_DONE;
        }
    }

    /* where a failover starts the request again (failover.c) */
    ctx->phase = r->phase_handler;

    if (ctx->idem_joiner && !ctx->err_status) {
        return ngx_http_llm_gateway_idem_serve(r, ctx);
    }

    /*
     * Admitted: the backend's pacer next, here, so that a request that
     * failed over to another backend is paced by that one too.
     */
    if (ctx->admitted && ctx->backend && !ctx->paced && !ctx->err_status
        && ctx->status == NGX_DECLINED
        && ngx_http_llm_gateway_pace(r, ctx) == NGX_AGAIN)
    {
        return NGX_AGAIN;
    }

    if (ctx->err_status) {
        if ((ctx->err_status != NGX_HTTP_UNAUTHORIZED || ctx->key)
            && r->connection->log->log_level >= llcf->reject_log_level
            && ngx_http_llm_gateway_auth_log_allowed(r, ctx))
        {
            ngx_http_llm_gateway_log_refusal(r, ctx, llcf);
        }

        /*
         * A half-open trial its backend was chosen with is the next
         * request's before the refusal goes out, not when this request is
         * freed: the client may send the next one at once, to any worker.
         */
        if (!ctx->admitted && ctx->trial) {
            ngx_http_llm_gateway_route_done(ctx, ctx->backend, 0);
        }

        rc = ngx_http_llm_gateway_reply_send(r, ctx);
        ngx_http_finalize_request(r, rc);
        return NGX_DONE;
    }

    /* on to the upstream: only the headers it may have */
    if (ctx->status == NGX_DECLINED
        && ngx_http_llm_gateway_auth_pass_only(r, ctx) != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ctx->status;
}


static void
ngx_http_llm_gateway_log_refusal(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_loc_conf_t *llcf)
{
    ngx_str_t  msg, param;

    ngx_str_null(&param);

    /* a message may quote what the client sent: escaped again, bounded */
    (void) ngx_http_llm_gateway_reply_log_text(r->pool, ctx->err_message,
                                           ngx_strlen(ctx->err_message), 512,
                                           &msg);

    if (ctx->err_param) {
        (void) ngx_http_llm_gateway_reply_safe(r->pool,
                                               (u_char *) ctx->err_param,
                                               ngx_strlen(ctx->err_param),
                                               NGX_HTTP_LLM_GATEWAY_SAFE_MAX,
                                               &param);
    }

    ngx_log_error(llcf->reject_log_level, r->connection->log, 0,
                  "llm gateway refused with %ui: %V%s%V%s",
                  ctx->err_status, &msg,
                  ctx->err_param ? " (\"" : "",
                  &param,
                  ctx->err_param ? "\")" : "");
}


static void
ngx_http_llm_gateway_body_handler(ngx_http_request_t *r)
{
    ngx_http_llm_gateway_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_gateway_module);

    ngx_http_llm_gateway_admit(r, ctx);

    if (ctx->waiting) {
        /* for a lease: looked at again shortly, as limit_req delays */
        ctx->waiting = 0;

        r->read_event_handler = ngx_http_test_reading;
        r->write_event_handler = ngx_http_llm_gateway_wait_handler;

        r->connection->write->delayed = 1;
        ngx_add_timer(r->connection->write, NGX_HTTP_LLM_GATEWAY_WAIT_STEP);

        return;
    }

    ctx->status = NGX_DECLINED;

    r->preserve_body = 1;

    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
}


static void
ngx_http_llm_gateway_wait_handler(ngx_http_request_t *r)
{
    ngx_event_t  *wev;

    wev = r->connection->write;

    if (wev->delayed) {
        if (ngx_handle_write_event(wev, 0) != NGX_OK) {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        }

        return;
    }

    if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    r->read_event_handler = ngx_http_block_reading;

    ngx_http_llm_gateway_body_handler(r);
}


/* the lease the budget asked for, if any, for the tenant or the key */

static void
ngx_http_llm_gateway_admit_lease(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_str_t  model;

    if (ctx->lease_want < 0) {
        return;
    }

    model.data = (u_char *) ctx->req.model;
    model.len = ctx->req.model_len;

    ngx_http_llm_gateway_admit_ask(ctx, &model, ctx->lease_want);

    ctx->lease_want = -1;
}


/* a lease asked of accountd: want pico-dollars, and the model's prices */

static void
ngx_http_llm_gateway_admit_ask(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_str_t *model, int64_t want)
{
    llm_lease_t  l;

    ngx_memzero(&l, sizeof(llm_lease_t));

    l.type = LLM_REC_LEASE_REQ;
    l.tenant_id = ctx->key->tenant_id;
    l.key_id = ctx->budget_id < 0 ? -ctx->budget_id : 0;
    l.want = want;
    l.model_len = (uint8_t) ngx_min(model->len, LLM_RECORD_MODEL_MAX);
    ngx_memcpy(l.model, model->data, l.model_len);

    (void) ngx_http_llm_gateway_accountd_lease(&l);
}


/*
 * A tier that refuses unpriced models fails a role's request over only to
 * a model whose price the zone knows (a failover cannot wait for
 * accountd): the role's other models are asked about now, those the zone
 * has no recent word on.
 */

static void
ngx_http_llm_gateway_admit_role_prices(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, int64_t now)
{
    uint32_t                           ask;
    ngx_uint_t                         i;
    ngx_http_llm_gateway_member_t     *m;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    if (ctx->role == NULL || !ctx->tier->unpriced_refuse
        || lmcf->journal_data == NULL)
    {
        return;
    }

    m = ctx->role->members.elts;

    /* what to ask under the lock, asked without it */
    ask = 0;

    ngx_shmtx_lock(&ctx->zone->shpool->mutex);

    for (i = 0; i < ctx->role->members.nelts; i++) {
        if (!ngx_http_llm_gateway_budget_known(ctx, m[i].model.len
                                                    ? &m[i].model
                                                    : &ctx->role_name, now))
        {
            ask |= (uint32_t) 1 << i;
        }
    }

    ngx_shmtx_unlock(&ctx->zone->shpool->mutex);

    for (i = 0; ask; i++, ask >>= 1) {
        if (ask & 1) {
            ngx_http_llm_gateway_admit_ask(ctx, m[i].model.len
                                                ? &m[i].model
                                                : &ctx->role_name, 0);
        }
    }
}


/*
 * The tier's cheaper model instead of a refusal for a spent cap: the
 * request is served by it, and says so.  NGX_DECLINED: it is that model
 * already, or one the key or its tier may not call.  The model asked for
 * is kept, for ngx_http_llm_gateway_downgrade_undo().
 */

static ngx_int_t
ngx_http_llm_gateway_downgrade(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_tier_t *tier)
{
    ngx_str_t  *from, *model;

    if (ctx->req.model_len == tier->downgrade.len
        && ngx_strncmp(ctx->req.model, tier->downgrade.data,
                       tier->downgrade.len) == 0)
    {
        return NGX_DECLINED;
    }

    if (!ngx_http_llm_gateway_auth_model_allowed(ctx,
                                                 (char *) tier->downgrade.data,
                                                 tier->downgrade.len))
    {
        return NGX_DECLINED;
    }

    model = &ctx->downgrade_asked;

    model->len = ctx->req.model_len;
    model->data = ngx_pnalloc(r->pool, model->len);
    if (model->data == NULL) {
        return NGX_DECLINED;
    }

    ngx_memcpy(model->data, ctx->req.model, model->len);

    from = &ctx->downgraded_from;

    /* for a response header and a log line: escaped, bounded */
    if (ngx_http_llm_gateway_reply_safe(r->pool, (u_char *) ctx->req.model,
                                        ctx->req.model_len,
                                        NGX_HTTP_LLM_GATEWAY_SAFE_MAX, from)
        == NULL)
    {
        return NGX_DECLINED;
    }

    if (llm_inspect_set_model(&ctx->req, (char *) tier->downgrade.data,
                              tier->downgrade.len)
        != 0)
    {
        from->len = 0;
        return NGX_DECLINED;
    }

    return NGX_OK;
}


/*
 * The cheaper model cannot be paid for either (or has no price): the
 * request is refused as asked, with nothing said of a downgrade.
 */

static void
ngx_http_llm_gateway_downgrade_undo(ngx_http_llm_gateway_ctx_t *ctx)
{
    ctx->downgraded_from.len = 0;

    (void) llm_inspect_set_model(&ctx->req, (char *) ctx->downgrade_asked.data,
                                 ctx->downgrade_asked.len);
}


/*
 * What the budget said, for the request: wait for a lease (asked for
 * here), or a refusal.  A cap that is spent is not a rate limit: the
 * client is told so, and not to retry before the period ends.
 */

static void
ngx_http_llm_gateway_budget_refuse(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_int_t rc, int64_t now,
    int64_t until)
{
    u_char     *p;
    ngx_str_t   model;

    switch (rc) {

    case NGX_AGAIN:

        if (ctx->wait_until == 0) {
            ctx->wait_until = now + NGX_HTTP_LLM_GATEWAY_WAIT_MAX;
        }

        ngx_http_llm_gateway_admit_lease(ctx);

        /* without accountd no answer comes: refused at once */
        if (now < ctx->wait_until && ngx_http_llm_gateway_accountd_up()) {
            ctx->waiting = 1;
            return;
        }

        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "llm gateway: no answer from accountd about the "
                      "spend cap of tenant \"%V\"", &ctx->key->tenant);

        ngx_http_llm_gateway_reply_unavailable(ctx, "budget_unavailable",
                                               "The gateway cannot check the "
                                               "spend cap right now; retry "
                                               "shortly.", 1);
        return;

    case NGX_DECLINED:
        ctx->retry_after_ms = ngx_max(until - now, 1000);
        ctx->retry_after = (ctx->retry_after_ms + 999) / 1000;
        ctx->never = 1;

        p = ngx_pnalloc(r->pool, 160);
        if (p != NULL) {
            ngx_sprintf(p, "You exceeded your spend cap; it resets in %Ls. "
                        "Raise the cap or wait for the reset.%Z",
                        ctx->retry_after);
        }

        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                          "insufficient_quota",
                                          "insufficient_quota", NULL,
                                          (char *) p);
        ctx->rejected_by = ngx_http_llm_gateway_by_quota;
        return;

    default: /* NGX_ERROR */
        (void) ngx_http_llm_gateway_reply_safe(r->pool,
                                               (u_char *) ctx->req.model,
                                               ctx->req.model_len,
                                               NGX_HTTP_LLM_GATEWAY_SAFE_MAX,
                                               &model);

        p = ngx_pnalloc(r->pool, model.len + 96);
        if (p != NULL) {
            ngx_sprintf(p, "Model \"%V\" has no price: a tenant with a "
                        "spend cap cannot call it.%Z", &model);
        }

        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_FORBIDDEN,
                                          "permission_error",
                                          "model_not_priced",
                                          "model", (char *) p);
        return;
    }
}


/*
 * A tier with unpriced=refuse: a model accountd has no price for is
 * refused; one whose price is not known yet waits for accountd's word,
 * as a spend cap's lease is waited for.
 */

static void
ngx_http_llm_gateway_unpriced_refuse(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_int_t rc, int64_t now)
{
    u_char     *p;
    ngx_str_t   model;

    if (rc == NGX_AGAIN) {
        if (ctx->wait_until == 0) {
            ctx->wait_until = now + NGX_HTTP_LLM_GATEWAY_WAIT_MAX;
        }

        ngx_http_llm_gateway_admit_lease(ctx);

        if (now < ctx->wait_until && ngx_http_llm_gateway_accountd_up()) {
            ctx->waiting = 1;
            return;
        }

        ngx_http_llm_gateway_reply_unavailable(ctx, "price_unavailable",
                                               "The gateway cannot check the "
                                               "model's price right now; retry "
                                               "shortly.", 1);
        return;
    }

    (void) ngx_http_llm_gateway_reply_safe(r->pool, (u_char *) ctx->req.model,
                                           ctx->req.model_len,
                                           NGX_HTTP_LLM_GATEWAY_SAFE_MAX,
                                           &model);

    p = ngx_pnalloc(r->pool, model.len + 96);
    if (p != NULL) {
        ngx_sprintf(p, "Model \"%V\" has no price: this tier does not "
                    "serve unpriced models.%Z", &model);
    }

    ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_FORBIDDEN,
                                      "permission_error",
                                      "model_not_priced", "model", (char *) p);
    ctx->never = 1;
}


/*
 * The body, read once, inspected once: a request that waits for a lease
 * comes back to ngx_http_llm_gateway_admit() only.  NGX_OK if it may go
 * on to admission (ctx->body is its body), else it is refused.
 */

static ngx_int_t
ngx_http_llm_gateway_inspect(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char                           *p;
    ngx_int_t                         rc;
    ngx_str_t                         body, model;
    ngx_uint_t                        allowed;
    llm_inspect_conf_t                icf;
    ngx_http_llm_gateway_tier_t      *tier;
    ngx_http_llm_gateway_alias_t     *alias;
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);
    tier = ctx->tier;

    rc = ngx_http_llm_gateway_request_body(r, ctx, &body);

    if (rc == NGX_ERROR) {
        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                          "server_error", "internal_error",
                                          NULL,
                                          "Internal error.");
        return NGX_DECLINED;
    }

    if (rc != NGX_OK) {
        return NGX_DECLINED;
    }

    /* a chunked body announces no length */
    if (body.len > llcf->max_body) {
        ngx_http_llm_gateway_reply_too_large(ctx);
        return NGX_DECLINED;
    }

    icf.default_max_tokens = tier->default_max_tokens;
    icf.max_tokens_limit = tier->max_tokens;
    icf.max_depth = llcf->max_depth;
    icf.max_string = llcf->max_string;
    icf.image_tokens = tier->image_tokens;
    icf.context_tokens = tier->context;
    icf.lower = tier->above_max_lower;

    ngx_http_llm_gateway_json_pool(r->pool);

    if (llm_inspect(llcf->api, (char *) body.data, body.len, &icf, &ctx->req)
        != 0)
    {
        ngx_http_llm_gateway_json_pool(NULL);

        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                          "invalid_request_error",
                                          ctx->req.param ? "invalid_value"
                                                         : "invalid_json",
                                          ctx->req.param, ctx->req.message);
        return NGX_DECLINED;
    }

    ngx_http_llm_gateway_json_pool(NULL);

    /*
     * The key and its tier must both allow the model; either may name the
     * alias the client calls or the model it stands for.
     */
    allowed = ngx_http_llm_gateway_auth_model_allowed(ctx, ctx->req.model,
                                                       ctx->req.model_len);

    /* what a backend of another dialect gets translated */
    ctx->body = body;

    /* a role: its backend for this attempt, and that backend's model */
    rc = ngx_http_llm_gateway_route(r, ctx);

    if (rc == NGX_ERROR) {
        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                          "server_error", "internal_error",
                                          NULL,
                                          "Internal error.");
        return NGX_DECLINED;
    }

    if (rc == NGX_DECLINED) {
        return NGX_DECLINED;
    }

    if (ctx->role) {
        allowed = allowed
                  || ngx_http_llm_gateway_auth_model_allowed(
                         ctx, ctx->req.model, ctx->req.model_len);
    }

    alias = ctx->role ? NULL
                      : ngx_http_llm_gateway_request_find_alias(
                            llcf, ctx->req.model, ctx->req.model_len);

    if (alias != NULL) {
        if (llm_inspect_set_model(&ctx->req, (char *) alias->model.data,
                                  alias->model.len)
            != 0)
        {
            ngx_http_llm_gateway_reply_refuse(ctx,
                                              NGX_HTTP_INTERNAL_SERVER_ERROR,
                                              "server_error", "internal_error",
                                              NULL, "Internal error.");
            return NGX_DECLINED;
        }

        allowed = allowed
                  || ngx_http_llm_gateway_auth_model_allowed(
                         ctx, ctx->req.model, ctx->req.model_len);
    }

    if (!allowed) {
        (void) ngx_http_llm_gateway_reply_safe(r->pool,
                                               (u_char *) ctx->req.model,
                                               ctx->req.model_len,
                                               NGX_HTTP_LLM_GATEWAY_SAFE_MAX,
                                               &model);

        p = ngx_pnalloc(r->pool, model.len + 64);
        if (p != NULL) {
            ngx_sprintf(p, "This API key or its tier may not call model "
                        "\"%V\".%Z", &model);
        }

        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_FORBIDDEN,
                                          "permission_error",
                                          "model_not_allowed",
                                          "model", (char *) p);
        return NGX_DECLINED;
    }

    if (ngx_http_llm_gateway_admit_translatable(r, ctx) != NGX_OK) {
        return NGX_DECLINED;
    }

    ctx->body = body;
    ctx->inspected = 1;

    return NGX_OK;
}


/* the location's backend, of another dialect, for the model called */

static ngx_int_t
ngx_http_llm_gateway_admit_translatable(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_int_t  rc;

    if (!ctx->translated || ctx->role) {
        return NGX_OK;
    }

    rc = ngx_http_llm_gateway_route_translatable(r, ctx);

    if (rc == NGX_ERROR) {
        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                          "server_error", "internal_error",
                                          NULL, "Internal error.");
    }

    return rc;
}


static void
ngx_http_llm_gateway_admit(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    int64_t                           cost, now;
    ngx_str_t                         body;
    ngx_int_t                         rc;
    llm_admit_t                       adm;
    llm_bucket_rc_e                   brc;
    ngx_http_llm_gateway_node_t      *node;
    ngx_http_llm_gateway_tier_t      *tier;
    ngx_http_llm_gateway_zone_t      *zone;
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    if (!ctx->inspected
        && ngx_http_llm_gateway_inspect(r, ctx) != NGX_OK)
    {
        return;
    }

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    if (llcf->api == LLM_API_COUNT_TOKENS) {
        ngx_http_llm_gateway_admit_count(r, ctx);
        return;
    }

    if (ngx_http_llm_gateway_admit_idem(r, ctx) != NGX_OK) {
        return;
    }

    tier = ctx->tier;
    body = ctx->body;

    cost = ctx->req.prompt_tokens + ctx->req.output_bound;

    zone = llcf->shm_zone->data;
    ctx->zone = zone;

    ngx_shmtx_lock(&zone->shpool->mutex);

    /*
     * A place for the record first: a request whose usage could not be
     * recorded is not served (llm_gateway_accountd full=refuse).  The
     * place is taken, and given back or kept with the request in flight,
     * under the zone's lock (the journal's is taken inside it): a worker
     * killed at any point leaves neither without the other.
     */
    if (ngx_http_llm_gateway_journal_hold(ctx) != NGX_OK) {
        ngx_shmtx_unlock(&zone->shpool->mutex);

        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "llm gateway: accountd journal full, request refused");

        ngx_http_llm_gateway_reply_unavailable(ctx, "accounting_unavailable",
                                               "The gateway cannot record "
                                               "usage "
                                               "right now; retry shortly.", 5);
        return;
    }

    node = ngx_http_llm_gateway_zone_lookup(zone, ctx->key->tenant_id, 1);

    if (node == NULL) {
        goto full;
    }

    now = ngx_http_llm_gateway_clock_now_ms();

    if (node->state.tpm.last_ms == -1) {
        llm_bucket_tenant_init(&node->state, &tier->limits, now);
    }

    ngx_http_llm_gateway_zone_name_node(node, ctx->key);

    /* what a refusal before the buckets reports: they as they are */
    ngx_http_llm_gateway_admit_headroom(ctx, node, now);

    rc = ngx_http_llm_gateway_admit_budget(r, ctx, node);

    if (rc == NGX_ERROR) {
        goto full;
    }

    if (rc != NGX_OK) {
        return;
    }

    rc = ngx_http_llm_gateway_admit_tokens(r, ctx, node, cost, now, &adm,
                                           &brc);

    if (rc == NGX_ERROR) {
        goto full;
    }

    if (rc != NGX_OK) {
        return;
    }

    ngx_http_llm_gateway_admit_headroom(ctx, node, now);

    ngx_shmtx_unlock(&zone->shpool->mutex);

    if (brc == LLM_BUCKET_OK && ctx->downgraded_from.len) {
        ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0,
                      "llm gateway: spend cap of tenant \"%V\": \"%V\" "
                      "served by \"%V\"", &ctx->key->tenant,
                      &ctx->downgraded_from, &tier->downgrade);
    }

    /* the next lease, asked for before the budget runs out */
    ngx_http_llm_gateway_admit_lease(ctx);
    ngx_http_llm_gateway_admit_role_prices(r, ctx, now);

    if (brc != LLM_BUCKET_OK) {
        ngx_http_llm_gateway_admit_limited(r, ctx, brc, &adm, cost);
        return;
    }

    ctx->admitted = 1;
    ctx->admitted_ms = now;

    if (((llm_inspect_needs_rewrite(&ctx->req) || ctx->translated)
         && ngx_http_llm_gateway_request_rewrite_body(r, ctx, &body) != NGX_OK)
        || ngx_http_llm_gateway_request_identity(r) != NGX_OK)
    {
        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                          "server_error", "internal_error",
                                          NULL,
                                          "Internal error.");
    }

    return;

full:

    ngx_http_llm_gateway_journal_unhold(ctx);
    ngx_shmtx_unlock(&zone->shpool->mutex);

    ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                  "llm_gateway_zone \"%V\" is full",
                  &llcf->shm_zone->shm.name);

    ngx_http_llm_gateway_reply_unavailable(ctx, "gateway_overloaded",
                                           "The gateway is overloaded; retry "
                                           "shortly.", 1);
}


/*
 * A request that was made before, by its Idempotency-Key: NGX_OK, it
 * runs; otherwise it is refused or served from the store.
 */

static ngx_int_t
ngx_http_llm_gateway_admit_idem(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    switch (ngx_http_llm_gateway_idem_begin(r, ctx)) {

    case NGX_OK:
        return NGX_OK;

    case NGX_ERROR:
        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                          "server_error", "internal_error",
                                          NULL,
                                          "Internal error.");
        return NGX_ERROR;

    case NGX_DONE:
        /* served from the store: a request, if not tokens */
        ngx_http_llm_gateway_admit_request(r, ctx);
        return NGX_DONE;

    default: /* NGX_DECLINED: refused */
        return NGX_DECLINED;
    }
}


/*
 * The spend cap, under the zone's lock: a request it cannot pay for takes
 * no tokens.  NGX_DECLINED: refused, the zone unlocked; NGX_ERROR: no room.
 */

static ngx_int_t
ngx_http_llm_gateway_admit_budget(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_node_t *node)
{
    u_char                            *p;
    int64_t                            until, wall;
    ngx_int_t                          brc_budget, prc;
    ngx_http_llm_gateway_node_t       *holder;
    ngx_http_llm_gateway_tier_t       *tier;
    ngx_http_llm_gateway_zone_t       *zone;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);
    tier = ctx->tier;
    zone = ctx->zone;

    ctx->lease_want = -1;

    brc_budget = NGX_OK;
    holder = NULL;

    /* caps run on the wall clock: their periods are days and months */
    wall = ngx_http_llm_gateway_clock_wall_ms();

    if (lmcf->journal_data) {
        brc_budget = ngx_http_llm_gateway_budget_node(ctx, node, &holder);
    }

    /* a cap cannot be held to a prompt whose size the body does not tell */
    if (holder != NULL && ctx->req.unbounded && tier->unbounded_refuse) {
        ngx_http_llm_gateway_journal_unhold(ctx);
        ngx_shmtx_unlock(&zone->shpool->mutex);

        p = ngx_pnalloc(r->pool, 200);
        if (p != NULL) {
            ngx_sprintf(p, "A spend cap applies to this key, and what "
                        "\"%s\" adds to the prompt is not known before it "
                        "runs: this tier refuses it under a cap.%Z",
                        ctx->req.unbounded);
        }

        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                          "invalid_request_error",
                                          "unbounded_prompt",
                                          ctx->req.unbounded,
                                          (char *) p);
        return NGX_DECLINED;
    }

    if (holder != NULL) {
        brc_budget = ngx_http_llm_gateway_budget_admit(ctx, holder, wall,
                                                    ctx->req.prompt_bound);

        if (brc_budget == NGX_DECLINED && tier->downgrade.len
            && ngx_http_llm_gateway_downgrade(r, ctx, tier) == NGX_OK)
        {
            /* the cheaper model, if the budget pays for it */
            brc_budget = ngx_http_llm_gateway_budget_admit(ctx, holder, wall,
                                                    ctx->req.prompt_bound);
        }

        /* nor can it pay for the cheaper one: refused as asked */
        if (brc_budget != NGX_OK && brc_budget != NGX_AGAIN
            && ctx->downgraded_from.len)
        {
            ngx_http_llm_gateway_downgrade_undo(ctx);
            brc_budget = NGX_DECLINED;
        }
    }

    if (brc_budget != NGX_OK) {

        /* no room for the key's budget */
        if (brc_budget == NGX_ERROR && holder == NULL) {
            return NGX_ERROR;
        }

        until = holder ? holder->budget_resets : 0;

        ngx_http_llm_gateway_journal_unhold(ctx);
        ngx_shmtx_unlock(&zone->shpool->mutex);

        ngx_http_llm_gateway_budget_refuse(r, ctx, brc_budget, wall, until);
        return NGX_DECLINED;
    }

    /*
     * A model without a price would be free to a tenant without a cap:
     * a tier refuses it unless it says unpriced=allow, and the metrics
     * count what is served.  Only accountd knows prices: a refusing tier
     * asks about a model not seen lately.
     */
    if (lmcf->journal_data && !ctx->budget_held) {
        prc = ngx_http_llm_gateway_budget_priced(ctx, holder ? holder : node,
                                                 wall, tier->unpriced_refuse);

        if (prc != NGX_OK && tier->unpriced_refuse) {
            ngx_http_llm_gateway_journal_unhold(ctx);
            ngx_shmtx_unlock(&zone->shpool->mutex);

            ngx_http_llm_gateway_unpriced_refuse(r, ctx, prc, wall);
            return NGX_DECLINED;
        }
    }

    return NGX_OK;
}


/*
 * The tenant's tokens, requests and concurrency, then the zone's ceiling
 * and the tenant's share of its capacity, under the zone's lock.  *brc
 * tells whether the bucket admitted the request.  NGX_DECLINED: refused,
 * the zone unlocked; NGX_ERROR: no room to keep the request in flight.
 */

static ngx_int_t
ngx_http_llm_gateway_admit_tokens(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_node_t *node,
    int64_t cost, int64_t now, llm_admit_t *adm, llm_bucket_rc_e *brc)
{
    int64_t                       fwait;
    llm_fair_rc_e                 frc;
    ngx_http_llm_gateway_tier_t  *tier;
    ngx_http_llm_gateway_zone_t  *zone;

    tier = ctx->tier;
    zone = ctx->zone;

    /* what this gateway may admit of the tier's limits: all, alone */
    node->demand += cost;
    ngx_http_llm_gateway_budget_share_limits(node, &tier->limits, &ctx->limits);

    if (zone->capacity) {
        ngx_http_llm_gateway_soft_limits(tier, &ctx->limits);
    }

    *brc = llm_bucket_admit(&node->state, &ctx->limits, cost, now, adm);

    ctx->soft = adm->soft;

    ctx->reserved = cost;

    /* the zone's ceiling, and the tenant's share of its capacity */
    frc = LLM_FAIR_OK;
    fwait = 0;

    if (*brc == LLM_BUCKET_OK && (zone->capacity || zone->inflight)) {
        frc = ngx_http_llm_gateway_fair(ctx, zone, node, cost, now, &fwait);

        if (frc != LLM_FAIR_OK) {
            llm_bucket_release_from(&node->state, &ctx->limits, ctx->soft,
                                    cost, 0, now);

            if (ctx->budget_held) {
                ngx_http_llm_gateway_budget_unreserve(ctx, node);
            }

            ngx_http_llm_gateway_journal_unhold(ctx);
            ngx_shmtx_unlock(&zone->shpool->mutex);

            ngx_http_llm_gateway_fair_refuse(r, ctx, frc, fwait);
            return NGX_DECLINED;
        }
    }

    if (*brc == LLM_BUCKET_OK
        && ngx_http_llm_gateway_flight_start(ctx) != NGX_OK)
    {
        /* no room to keep it in flight: as full as without a node */
        llm_bucket_release_from(&node->state, &ctx->limits, ctx->soft, cost, 0,
                         now);

        if (ctx->fair_held) {
            llm_fair_settle(&zone->sh->fair, &node->fair, cost, 0, now);
            ctx->fair_held = 0;
        }

        if (ctx->fair_flight) {
            llm_fair_end(&zone->sh->fair);
            ctx->fair_flight = 0;
        }

        if (ctx->budget_held) {
            ngx_http_llm_gateway_budget_unreserve(ctx, node);
        }

        return NGX_ERROR;
    }

    if (*brc != LLM_BUCKET_OK) {
        if (ctx->budget_held) {
            ngx_http_llm_gateway_budget_unreserve(ctx, node);
        }

        ngx_http_llm_gateway_journal_unhold(ctx);
    }

    return NGX_OK;
}


/* 429: the request waits too long for its tokens, or never has enough */

static void
ngx_http_llm_gateway_admit_limited(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_bucket_rc_e brc, llm_admit_t *adm,
    int64_t cost)
{
    u_char                       *p;
    const char                   *name;
    ngx_http_llm_gateway_tier_t  *tier;

    tier = ctx->tier;

    if (brc == LLM_BUCKET_NEVER && ctx->req.api == LLM_API_EMBEDDINGS) {
        /* no output: the input alone is too large */
        p = ngx_pnalloc(r->pool, 160);
        if (p != NULL) {
            ngx_sprintf(p, "Request too large: the input, about %L tokens, "
                        "exceeds this tier's capacity of %L tokens.%Z",
                        cost, tier->limits.tpm.burst);
        }

        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                          "tokens", "request_too_large",
                                          "input", (char *) p);
        ctx->rejected_by = ngx_http_llm_gateway_by_tokens;
        ctx->never = 1;
        return;
    }

    if (brc == LLM_BUCKET_NEVER) {
        name = ngx_http_llm_gateway_request_limit_name(ctx);

        p = ngx_pnalloc(r->pool, 256);
        if (p != NULL) {
            ngx_sprintf(p, "Request too large: %L tokens (prompt about %L + "
                        "output up to %L, n %L x %s %L) exceed this "
                        "tier's capacity of %L tokens.%Z", cost,
                        ctx->req.prompt_tokens, ctx->req.output_bound,
                        ctx->req.n, name, ctx->req.max_tokens,
                        tier->limits.tpm.burst);
        }

        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                          "tokens",
                                          "request_too_large", name,
                                          (char *) p);
        ctx->rejected_by = ngx_http_llm_gateway_by_tokens;
        ctx->never = 1;
        return;
    }

    if (brc == LLM_BUCKET_WAIT) {
        ctx->retry_after = llm_bucket_seconds(adm->wait_ms);
        ctx->retry_after_ms = adm->wait_ms;

        p = ngx_pnalloc(r->pool, 200);
        if (p == NULL) {
            return;
        }

        switch (adm->limit) {

        case LLM_LIMIT_REQUESTS:
            ngx_sprintf(p, "Rate limit reached for requests per min (RPM): "
                        "limit %L. Please try again in %Ls.%Z",
                        tier->limits.rpm.rate, ctx->retry_after);
            ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                              "requests", "rate_limit_exceeded",
                                              NULL, (char *) p);
            ctx->rejected_by = ngx_http_llm_gateway_by_requests;
            break;

        case LLM_LIMIT_CONCURRENCY:
            ngx_sprintf(p, "Too many requests in flight: limit %L. Please "
                        "retry shortly.%Z", tier->limits.concurrency);
            ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                              "requests",
                                              "concurrency_limit_exceeded",
                                              NULL,
                                              (char *) p);
            ctx->rejected_by = ngx_http_llm_gateway_by_concurrency;
            break;

        default: /* LLM_LIMIT_TOKENS */
            ngx_sprintf(p, "Rate limit reached for tokens per min (TPM): "
                        "limit %L, requested %L. Please try again in %Ls.%Z",
                        tier->limits.tpm.rate, cost, ctx->retry_after);
            ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                              "tokens", "rate_limit_exceeded",
                                              NULL, (char *) p);
            ctx->rejected_by = ngx_http_llm_gateway_by_tokens;
        }

        return;
    }
}


/*
 * A request that costs no tokens: served from the Idempotency-Key store
 * (idem.c), a token count, the list of models.  It is neither reserved
 * for nor billed; but it is a request, and takes one from the tenant's
 * requests a minute as any other does.
 */

static void
ngx_http_llm_gateway_admit_request(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char                           *p;
    int64_t                           now, wait;
    llm_bucket_rc_e                   brc;
    ngx_http_llm_gateway_node_t      *node;
    ngx_http_llm_gateway_tier_t      *tier;
    ngx_http_llm_gateway_zone_t      *zone;
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    tier = ctx->tier;

    if (tier->limits.rpm.rate == 0) {
        return;
    }

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);
    zone = llcf->shm_zone->data;
    now = ngx_http_llm_gateway_clock_now_ms();

    ngx_shmtx_lock(&zone->shpool->mutex);

    node = ngx_http_llm_gateway_zone_lookup(zone, ctx->key->tenant_id, 1);

    if (node == NULL) {
        ngx_shmtx_unlock(&zone->shpool->mutex);

        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                      "llm_gateway_zone \"%V\" is full",
                      &llcf->shm_zone->shm.name);

        ngx_http_llm_gateway_reply_unavailable(ctx, "gateway_overloaded",
                                               "The gateway is overloaded; "
                                               "retry "
                                               "shortly.", 1);
        return;
    }

    if (node->state.tpm.last_ms == -1) {
        llm_bucket_tenant_init(&node->state, &tier->limits, now);
    }

    ngx_http_llm_gateway_zone_name_node(node, ctx->key);
    ngx_http_llm_gateway_budget_share_limits(node, &tier->limits, &ctx->limits);

    brc = llm_bucket_reserve(&node->state.rpm, &ctx->limits.rpm, 1, now,
                             &wait);

    ctx->zone = zone;
    ngx_http_llm_gateway_admit_headroom(ctx, node, now);

    ngx_shmtx_unlock(&zone->shpool->mutex);

    if (brc == LLM_BUCKET_OK) {
        return;
    }

    ctx->retry_after = llm_bucket_seconds(wait);
    ctx->retry_after_ms = wait;

    p = ngx_pnalloc(r->pool, 200);
    if (p != NULL) {
        ngx_sprintf(p, "Rate limit reached for requests per min (RPM): "
                    "limit %L. Please try again in %Ls.%Z",
                    tier->limits.rpm.rate, ctx->retry_after);
    }

    ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                      "requests",
                                      "rate_limit_exceeded", NULL, (char *) p);
    ctx->rejected_by = ngx_http_llm_gateway_by_requests;
}


/*
 * What the x-ratelimit-* headers report, under the zone's lock: each of the
 * tenant's buckets refilled to now, at the rate this gateway has of the
 * tier's limits, so that remaining is at most the capacity (the limit the
 * headers give) and the reset is 0 only when the bucket is full.
 */

static void
ngx_http_llm_gateway_admit_headroom(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_node_t *node, int64_t now)
{
    llm_limits_t  l;

    ngx_http_llm_gateway_budget_share_limits(node, &ctx->tier->limits, &l);

    llm_bucket_refill(&node->state.tpm, &l.tpm, now);

    ctx->remaining = ngx_min(llm_bucket_available(&node->state.tpm),
                             l.tpm.burst);
    ctx->reset_ms = llm_bucket_full_in(&node->state.tpm, &l.tpm);

    if (l.rpm.rate) {
        llm_bucket_refill(&node->state.rpm, &l.rpm, now);

        ctx->remaining_requests = ngx_min(
                                  llm_bucket_available(&node->state.rpm),
                                  l.rpm.burst);
        ctx->reset_requests_ms = llm_bucket_full_in(&node->state.rpm, &l.rpm);
    }

    ctx->headroom = 1;
}


/*
 * In a zone with a capacity the tier's tpm is a soft quota: beyond it,
 * up to its burst a minute, as this gateway's share of the tier's limits
 * is of them.  Whether capacity is idle, the zone's shares say after.
 */

static void
ngx_http_llm_gateway_soft_limits(ngx_http_llm_gateway_tier_t *tier,
    llm_limits_t *limits)
{
    int64_t  soft;

    soft = tier->limits.tpm.burst - tier->limits.tpm.rate;

    if (soft <= 0) {
        return;
    }

    if (limits->tpm.rate != tier->limits.tpm.rate) {
        soft = (int64_t) ((__int128) soft * limits->tpm.rate
                          / tier->limits.tpm.rate);
        soft = ngx_max(soft, 1);
    }

    limits->soft.rate = soft;
    limits->soft.burst = soft;
}


/*
 * Under the zone's lock: the tenant is active by what it asks, tenants
 * idle for a while are not (the core expires them, a few a request), the
 * request is in flight under the zone's ceiling, and it takes its cost
 * from the tenant's share of the capacity or from capacity nobody uses.
 */

static llm_fair_rc_e
ngx_http_llm_gateway_fair(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_zone_t *zone, ngx_http_llm_gateway_node_t *node,
    int64_t cost, int64_t now, int64_t *wait)
{
    llm_fair_t        *f;
    llm_fair_rc_e      rc;
    llm_fair_class_t   cls;

    f = &zone->sh->fair;

    if (zone->capacity) {
        cls.weight = ctx->tier->weight;
        cls.minimum = ctx->tier->minimum;
        cls.priority = (int) ctx->tier->priority;

        llm_fair_touch(f, &node->fair, &cls, cost, now);
    }

    rc = llm_fair_start(f, now, wait);

    if (rc != LLM_FAIR_OK) {
        /* the configured ceiling, nothing pushed back: said as such */
        ctx->at_ceiling = !f->reduced;
        ctx->fair_rate = llm_fair_ceiling(f, now);
        return rc;
    }

    ctx->fair_flight = 1;

    if (zone->capacity == 0) {
        return LLM_FAIR_OK;
    }

    rc = llm_fair_admit(f, &node->fair, cost, now, wait);

    if (rc == LLM_FAIR_OK) {
        ctx->fair_held = 1;
        return LLM_FAIR_OK;
    }

    llm_fair_end(f);
    ctx->fair_flight = 0;
    ctx->fair_rate = llm_fair_rate(f, &node->fair);

    return rc;
}


static void
ngx_http_llm_gateway_fair_refuse(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_fair_rc_e rc, int64_t wait)
{
    u_char  *p;

    ctx->retry_after_ms = ngx_max(wait, 1);
    ctx->retry_after = llm_bucket_seconds(ctx->retry_after_ms);

    p = ngx_pnalloc(r->pool, 200);
    if (p == NULL) {
        return;
    }

    if (rc == LLM_FAIR_CLUSTER) {
        if (ctx->at_ceiling) {
            ngx_sprintf(p, "The upstream has %L requests in flight, as many "
                        "as it takes. Please try again in %Ls.%Z",
                        ctx->fair_rate, ctx->retry_after);

        } else {
            ngx_sprintf(p, "The upstream is saturated: the gateway admits "
                        "less until it recovers. Please try again in "
                        "%Ls.%Z", ctx->retry_after);
        }

        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_SERVICE_UNAVAILABLE,
                                          "server_error", "upstream_saturated",
                                          NULL, (char *) p);
        ctx->rejected_by = ngx_http_llm_gateway_by_saturation;
        return;
    }

    ngx_sprintf(p, "The shared capacity is in full use: this tenant's "
                "share is %L tokens a minute. Please try again in %Ls.%Z",
                ctx->fair_rate, ctx->retry_after);

    ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS, "tokens",
                                      "capacity_exceeded", NULL, (char *) p);
    ctx->rejected_by = ngx_http_llm_gateway_by_capacity;
}


/*
 * The method and the path, before any key is looked at: a path no API
 * has is a 404 whatever the key, as the providers answer it.  *id: the
 * model a models location is asked about (empty: the list).
 */

static ngx_int_t
ngx_http_llm_gateway_admit_method(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *id)
{
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    if (llcf->api == LLM_API_NONE
        || (llcf->api == LLM_API_MODELS
            && ngx_http_llm_gateway_models_path(r, id) != NGX_OK))
    {
        ngx_http_llm_gateway_models_unknown(r, ctx);
        return NGX_DECLINED;
    }

    if (llcf->api == LLM_API_MODELS) {
        if (r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD)) {
            return NGX_OK;
        }

        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_NOT_ALLOWED,
                                          "invalid_request_error",
                                          "method_not_allowed", NULL,
                                          "Only GET is served here.");
        return NGX_DECLINED;
    }

    if (r->method != NGX_HTTP_POST) {
        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_NOT_ALLOWED,
                                          "invalid_request_error",
                                          "method_not_allowed", NULL,
                                          "Only POST is served here.");
        return NGX_DECLINED;
    }

    return NGX_OK;
}


/*
 * The models the key may call, answered here: a request of the tenant's
 * requests a minute, nothing upstream, nothing billed.  NGX_DECLINED:
 * refused, ctx says why; else what the request finalizes with.
 */

static ngx_int_t
ngx_http_llm_gateway_admit_models(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *id)
{
    ngx_http_llm_gateway_admit_request(r, ctx);

    if (ctx->err_status) {
        return NGX_DECLINED;
    }

    return ngx_http_llm_gateway_models_send(r, ctx, id);
}


/*
 * Messages' count_tokens, passed to the backend: it generates nothing and
 * costs nothing, so it takes a request from the requests a minute and no
 * tokens, no spend cap, no place in the journal: no record is written.
 * Its body was inspected as a Messages body (the model allowed, the
 * sizes); an alias or a role is resolved in it.
 */

static void
ngx_http_llm_gateway_admit_count(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_str_t  body;

    ngx_http_llm_gateway_admit_request(r, ctx);

    if (ctx->err_status) {
        return;
    }

    body = ctx->body;

    if ((llm_inspect_needs_rewrite(&ctx->req)
         && ngx_http_llm_gateway_request_rewrite_body(r, ctx, &body) != NGX_OK)
        || ngx_http_llm_gateway_request_identity(r) != NGX_OK)
    {
        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                          "server_error", "internal_error",
                                          NULL, "Internal error.");
    }
}
