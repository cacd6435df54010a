
/*
 * The admission gate, in the preaccess phase: authenticate, read the body
 * without blocking, inspect it, reserve n_in + max_tokens in the tenant's
 * bucket under the zone lock, or refuse with an OpenAI-format error.
 */


#include "ngx_http_llm_gateway_module.h"


static void ngx_http_llm_gateway_body_handler(ngx_http_request_t *r);
static ngx_http_llm_gateway_ctx_t *ngx_http_llm_gateway_bare_ctx(
    ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_gateway_inspect(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static void ngx_http_llm_gateway_admit(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static void ngx_http_llm_gateway_admit_replay(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static void ngx_http_llm_gateway_wait_handler(ngx_http_request_t *r);
static void ngx_http_llm_gateway_unavailable(ngx_http_llm_gateway_ctx_t *ctx,
    const char *code, const char *message, int64_t seconds);
static void ngx_http_llm_gateway_ask_lease(ngx_http_llm_gateway_ctx_t *ctx);
static ngx_int_t ngx_http_llm_gateway_downgrade(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_tier_t *tier);
static void ngx_http_llm_gateway_downgrade_undo(
    ngx_http_llm_gateway_ctx_t *ctx);
static void ngx_http_llm_gateway_budget_refuse(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_int_t rc, int64_t now,
    int64_t until);
static ngx_int_t ngx_http_llm_gateway_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *body);
static ngx_int_t ngx_http_llm_gateway_rewrite_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *body);
static ngx_int_t ngx_http_llm_gateway_identity(ngx_http_request_t *r);
static void ngx_http_llm_gateway_too_large(ngx_http_llm_gateway_ctx_t *ctx);
static ngx_http_llm_gateway_alias_t *ngx_http_llm_gateway_find_alias(
    ngx_http_llm_gateway_loc_conf_t *llcf, char *model, size_t len);
static ngx_int_t ngx_http_llm_gateway_limit_headers(ngx_http_request_t *r,
    ngx_str_t *names, int64_t limit, int64_t remaining, int64_t reset_ms);
static ngx_http_llm_gateway_tier_t *ngx_http_llm_gateway_find_tier(
    ngx_http_llm_gateway_loc_conf_t *llcf, ngx_str_t *name);
static u_char *ngx_http_llm_gateway_duration(u_char *p, int64_t ms);
static ngx_int_t ngx_http_llm_gateway_retry_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
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
static u_char *ngx_http_llm_gateway_log_text(ngx_pool_t *pool, u_char *s,
    size_t len, size_t max, ngx_str_t *out);
static u_char *ngx_http_llm_gateway_escape_bytes(ngx_pool_t *pool, u_char *s,
    size_t len, size_t max, ngx_uint_t quotes, ngx_str_t *out);


ngx_int_t
ngx_http_llm_gateway_access_handler(ngx_http_request_t *r)
{
    ngx_int_t                          rc;
    ngx_pool_cleanup_t                *cln;
    ngx_http_variable_value_t         *vv;
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

    ctx = ngx_http_llm_gateway_get_ctx(r);

    if (ctx == NULL) {
        ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_gateway_ctx_t));
        if (ctx == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        /*
         * The cleanup settles what the log phase did not, and finds the
         * context again after an internal redirect, which clears r->ctx.
         */
        cln = ngx_pool_cleanup_add(r->pool, 0);
        if (cln == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        cln->handler = ngx_http_llm_gateway_cleanup;
        cln->data = ctx;

        ctx->request = r;
        ctx->status = NGX_DECLINED;

        ngx_http_set_ctx(r, ctx, ngx_http_llm_gateway_module);

        lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

        vv = ngx_http_get_indexed_variable(r, lmcf->request_id_index);
        if (vv == NULL || vv->not_found) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ctx->request_id.data = vv->data;
        ctx->request_id.len = vv->len;

        if (r->method != NGX_HTTP_POST) {
            ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_NOT_ALLOWED,
                                        "invalid_request_error",
                                        "method_not_allowed", NULL,
                                        "Only POST is served here.");

        } else if (ngx_http_llm_gateway_auth(r, ctx) == NGX_OK) {

            ctx->tier = ngx_http_llm_gateway_find_tier(llcf, &ctx->key->tier);

            if (ctx->tier == NULL) {
                ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_FORBIDDEN,
                                            "permission_error",
                                            "tier_not_allowed", NULL,
                                            "This API key's tier is not "
                                            "served at this endpoint.");
            }
        }

        /* a body announced too large is refused before it is read */
        if (ctx->err_status == 0
            && r->headers_in.content_length_n > (off_t) llcf->max_body)
        {
            ngx_http_llm_gateway_too_large(ctx);
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

    /* where a failover starts the request again (backend.c) */
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
            && ngx_http_llm_gateway_log_allowed(r, ctx))
        {
            ngx_http_llm_gateway_log_refusal(r, ctx, llcf);
        }

        rc = ngx_http_llm_gateway_send_error(r, ctx);
        ngx_http_finalize_request(r, rc);
        return NGX_DONE;
    }

    /* on to the upstream: only the headers it may have */
    if (ctx->status == NGX_DECLINED
        && ngx_http_llm_gateway_pass_only(r, ctx) != NGX_OK)
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
    (void) ngx_http_llm_gateway_log_text(r->pool, ctx->err_message,
                                     ngx_strlen(ctx->err_message), 512,
                                     &msg);

    if (ctx->err_param) {
        (void) ngx_http_llm_gateway_safe(r->pool, (u_char *) ctx->err_param,
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
ngx_http_llm_gateway_ask_lease(ngx_http_llm_gateway_ctx_t *ctx)
{
    llm_lease_t  l;

    if (ctx->lease_want < 0) {
        return;
    }

    ngx_memzero(&l, sizeof(llm_lease_t));

    l.type = LLM_REC_LEASE_REQ;
    l.tenant_id = ctx->key->tenant_id;
    l.key_id = ctx->budget_id < 0 ? -ctx->budget_id : 0;
    l.want = ctx->lease_want;
    l.model_len = (uint8_t) ngx_min(ctx->req.model_len, LLM_RECORD_MODEL_MAX);
    ngx_memcpy(l.model, ctx->req.model, l.model_len);

    (void) ngx_http_llm_gateway_lease_ask(&l);

    ctx->lease_want = -1;
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

    if (!ngx_http_llm_gateway_model_allowed(ctx,
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
    if (ngx_http_llm_gateway_safe(r->pool, (u_char *) ctx->req.model,
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

        ngx_http_llm_gateway_ask_lease(ctx);

        /* without accountd no answer comes: refused at once */
        if (now < ctx->wait_until && ngx_http_llm_gateway_accountd_up()) {
            ctx->waiting = 1;
            return;
        }

        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "llm gateway: no answer from accountd about the "
                      "spend cap of tenant \"%V\"", &ctx->key->tenant);

        ngx_http_llm_gateway_unavailable(ctx, "budget_unavailable",
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

        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                    "insufficient_quota",
                                    "insufficient_quota", NULL, (char *) p);
        ctx->rejected_by = ngx_http_llm_gateway_by_quota;
        return;

    default: /* NGX_ERROR */
        (void) ngx_http_llm_gateway_safe(r->pool, (u_char *) ctx->req.model,
                                         ctx->req.model_len,
                                         NGX_HTTP_LLM_GATEWAY_SAFE_MAX,
                                         &model);

        p = ngx_pnalloc(r->pool, model.len + 96);
        if (p != NULL) {
            ngx_sprintf(p, "Model \"%V\" has no price: a tenant with a "
                        "spend cap cannot call it.%Z", &model);
        }

        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_FORBIDDEN,
                                    "permission_error", "model_not_priced",
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

        ngx_http_llm_gateway_ask_lease(ctx);

        if (now < ctx->wait_until && ngx_http_llm_gateway_accountd_up()) {
            ctx->waiting = 1;
            return;
        }

        ngx_http_llm_gateway_unavailable(ctx, "price_unavailable",
                                         "The gateway cannot check the "
                                         "model's price right now; retry "
                                         "shortly.", 1);
        return;
    }

    (void) ngx_http_llm_gateway_safe(r->pool, (u_char *) ctx->req.model,
                                     ctx->req.model_len,
                                     NGX_HTTP_LLM_GATEWAY_SAFE_MAX, &model);

    p = ngx_pnalloc(r->pool, model.len + 96);
    if (p != NULL) {
        ngx_sprintf(p, "Model \"%V\" has no price: this tier does not "
                    "serve unpriced models.%Z", &model);
    }

    ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_FORBIDDEN, "permission_error",
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

    rc = ngx_http_llm_gateway_body(r, ctx, &body);

    if (rc == NGX_ERROR) {
        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                    "server_error", "internal_error", NULL,
                                    "Internal error.");
        return NGX_DECLINED;
    }

    if (rc != NGX_OK) {
        return NGX_DECLINED;
    }

    /* a chunked body announces no length */
    if (body.len > llcf->max_body) {
        ngx_http_llm_gateway_too_large(ctx);
        return NGX_DECLINED;
    }

    icf.default_max_tokens = tier->default_max_tokens;
    icf.max_tokens_limit = tier->max_tokens;
    icf.max_depth = llcf->max_depth;
    icf.max_string = llcf->max_string;
    icf.image_tokens = tier->image_tokens;
    icf.context_tokens = tier->context;

    ngx_http_llm_gateway_json_pool(r->pool);

    if (llm_inspect(llcf->api, (char *) body.data, body.len, &icf, &ctx->req)
        != 0)
    {
        ngx_http_llm_gateway_json_pool(NULL);

        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_BAD_REQUEST,
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
    allowed = ngx_http_llm_gateway_model_allowed(ctx, ctx->req.model,
                                                  ctx->req.model_len);

    /* a role: its backend for this attempt, and that backend's model */
    rc = ngx_http_llm_gateway_route(r, ctx);

    if (rc == NGX_ERROR) {
        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                    "server_error", "internal_error", NULL,
                                    "Internal error.");
        return NGX_DECLINED;
    }

    if (rc == NGX_DECLINED) {
        return NGX_DECLINED;
    }

    if (ctx->role) {
        allowed = allowed
                  || ngx_http_llm_gateway_model_allowed(ctx, ctx->req.model,
                                                        ctx->req.model_len);
    }

    alias = ctx->role ? NULL
                      : ngx_http_llm_gateway_find_alias(llcf, ctx->req.model,
                                                        ctx->req.model_len);

    if (alias != NULL) {
        if (llm_inspect_set_model(&ctx->req, (char *) alias->model.data,
                                  alias->model.len)
            != 0)
        {
            ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                        "server_error", "internal_error",
                                        NULL, "Internal error.");
            return NGX_DECLINED;
        }

        allowed = allowed
                  || ngx_http_llm_gateway_model_allowed(ctx, ctx->req.model,
                                                        ctx->req.model_len);
    }

    if (!allowed) {
        (void) ngx_http_llm_gateway_safe(r->pool, (u_char *) ctx->req.model,
                                         ctx->req.model_len,
                                         NGX_HTTP_LLM_GATEWAY_SAFE_MAX,
                                         &model);

        p = ngx_pnalloc(r->pool, model.len + 64);
        if (p != NULL) {
            ngx_sprintf(p, "This API key or its tier may not call model "
                        "\"%V\".%Z", &model);
        }

        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_FORBIDDEN,
                                    "permission_error", "model_not_allowed",
                                    "model", (char *) p);
        return NGX_DECLINED;
    }

    ctx->body = body;
    ctx->inspected = 1;

    return NGX_OK;
}


static void
ngx_http_llm_gateway_admit(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char                           *p;
    int64_t                           cost, now, until, wall, fwait;
    ngx_str_t                         body;
    ngx_int_t                         brc_budget, prc;
    llm_fair_rc_e                     frc;
    llm_admit_t                       adm;
    llm_bucket_rc_e                   brc;
    ngx_http_llm_gateway_node_t      *node, *holder;
    ngx_http_llm_gateway_tier_t      *tier;
    ngx_http_llm_gateway_zone_t      *zone;
    ngx_http_llm_gateway_loc_conf_t  *llcf;
    ngx_http_llm_gateway_main_conf_t *lmcf;

    if (!ctx->inspected
        && ngx_http_llm_gateway_inspect(r, ctx) != NGX_OK)
    {
        return;
    }

    /* a request that was made before, by its Idempotency-Key */
    switch (ngx_http_llm_gateway_idem_begin(r, ctx)) {

    case NGX_OK:
        break;

    case NGX_ERROR:
        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                    "server_error", "internal_error", NULL,
                                    "Internal error.");
        return;

    case NGX_DONE:
        /* served from the store: a request, if not tokens */
        ngx_http_llm_gateway_admit_replay(r, ctx);
        return;

    default: /* NGX_DECLINED: refused */
        return;
    }

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);
    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);
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

        ngx_http_llm_gateway_unavailable(ctx, "accounting_unavailable",
                                         "The gateway cannot record usage "
                                         "right now; retry shortly.", 5);
        return;
    }

    node = ngx_http_llm_gateway_lookup(zone, ctx->key->tenant_id, 1);

    if (node == NULL) {
        goto full;
    }

    now = ngx_http_llm_gateway_now_ms();

    if (node->state.tpm.last_ms == -1) {
        llm_tenant_init(&node->state, &tier->limits, now);
    }

    ngx_http_llm_gateway_name_node(node, ctx->key);

    /* the spend cap first: a request it cannot pay for takes no tokens */
    ctx->lease_want = -1;

    brc_budget = NGX_OK;
    holder = NULL;

    /* caps run on the wall clock: their periods are days and months */
    wall = ngx_http_llm_gateway_wall_ms();

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

        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                    "invalid_request_error",
                                    "unbounded_prompt", ctx->req.unbounded,
                                    (char *) p);
        return;
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
            goto full;
        }

        until = holder ? holder->budget_resets : 0;

        ngx_http_llm_gateway_journal_unhold(ctx);
        ngx_shmtx_unlock(&zone->shpool->mutex);

        ngx_http_llm_gateway_budget_refuse(r, ctx, brc_budget, wall, until);
        return;
    }

    /*
     * A model without a price is free to a tenant without a cap: a tier
     * may refuse it (unpriced=refuse), and the metrics count it.  Only
     * accountd knows prices: such a tier asks about a model not seen
     * lately.
     */
    if (lmcf->journal_data && !ctx->budget_held) {
        prc = ngx_http_llm_gateway_budget_priced(ctx, holder ? holder : node,
                                                 wall, tier->unpriced_refuse);

        if (prc != NGX_OK && tier->unpriced_refuse) {
            ngx_http_llm_gateway_journal_unhold(ctx);
            ngx_shmtx_unlock(&zone->shpool->mutex);

            ngx_http_llm_gateway_unpriced_refuse(r, ctx, prc, wall);
            return;
        }
    }

    /* what this gateway may admit of the tier's limits: all, alone */
    node->demand += cost;
    ngx_http_llm_gateway_share_limits(node, &tier->limits, &ctx->limits);

    if (zone->capacity) {
        ngx_http_llm_gateway_soft_limits(tier, &ctx->limits);
    }

    brc = llm_admit(&node->state, &ctx->limits, cost, now, &adm);

    ctx->soft = adm.soft;

    ctx->reserved = cost;

    /* the zone's ceiling, and the tenant's share of its capacity */
    frc = LLM_FAIR_OK;
    fwait = 0;

    if (brc == LLM_BUCKET_OK && (zone->capacity || zone->inflight)) {
        frc = ngx_http_llm_gateway_fair(ctx, zone, node, cost, now, &fwait);

        if (frc != LLM_FAIR_OK) {
            llm_release_from(&node->state, &ctx->limits, ctx->soft, cost, 0,
                             now);

            if (ctx->budget_held) {
                ngx_http_llm_gateway_budget_unreserve(ctx, node);
            }

            ngx_http_llm_gateway_journal_unhold(ctx);
            ngx_shmtx_unlock(&zone->shpool->mutex);

            ngx_http_llm_gateway_fair_refuse(r, ctx, frc, fwait);
            return;
        }
    }

    if (brc == LLM_BUCKET_OK
        && ngx_http_llm_gateway_flight_start(ctx) != NGX_OK)
    {
        /* no room to keep it in flight: as full as without a node */
        llm_release_from(&node->state, &ctx->limits, ctx->soft, cost, 0,
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

        goto full;
    }

    if (brc != LLM_BUCKET_OK) {
        if (ctx->budget_held) {
            ngx_http_llm_gateway_budget_unreserve(ctx, node);
        }

        ngx_http_llm_gateway_journal_unhold(ctx);
    }

    ctx->remaining = llm_bucket_available(&node->state.tpm);
    ctx->reset_ms = llm_bucket_full_in(&node->state.tpm, &ctx->limits.tpm);

    if (tier->limits.rpm.rate) {
        ctx->remaining_requests = llm_bucket_available(&node->state.rpm);
        ctx->reset_requests_ms = llm_bucket_full_in(&node->state.rpm,
                                                    &ctx->limits.rpm);
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    if (brc == LLM_BUCKET_OK && ctx->downgraded_from.len) {
        ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0,
                      "llm gateway: spend cap of tenant \"%V\": \"%V\" "
                      "served by \"%V\"", &ctx->key->tenant,
                      &ctx->downgraded_from, &tier->downgrade);
    }

    /* the next lease, asked for before the budget runs out */
    ngx_http_llm_gateway_ask_lease(ctx);

    if (brc == LLM_BUCKET_NEVER) {
        p = ngx_pnalloc(r->pool, 256);
        if (p != NULL) {
            ngx_sprintf(p, "Request too large: %L tokens (prompt about %L + "
                        "output up to %L, n %L x max_tokens %L) exceed this "
                        "tier's capacity of %L tokens.%Z", cost,
                        ctx->req.prompt_tokens, ctx->req.output_bound,
                        ctx->req.n, ctx->req.max_tokens,
                        tier->limits.tpm.burst);
        }

        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS, "tokens",
                                    "request_too_large", "max_tokens",
                                    (char *) p);
        ctx->rejected_by = ngx_http_llm_gateway_by_tokens;
        ctx->never = 1;
        return;
    }

    if (brc == LLM_BUCKET_WAIT) {
        ctx->retry_after = llm_bucket_seconds(adm.wait_ms);
        ctx->retry_after_ms = adm.wait_ms;

        p = ngx_pnalloc(r->pool, 200);
        if (p == NULL) {
            return;
        }

        switch (adm.limit) {

        case LLM_LIMIT_REQUESTS:
            ngx_sprintf(p, "Rate limit reached for requests per min (RPM): "
                        "limit %L. Please try again in %Ls.%Z",
                        tier->limits.rpm.rate, ctx->retry_after);
            ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                        "requests", "rate_limit_exceeded",
                                        NULL, (char *) p);
            ctx->rejected_by = ngx_http_llm_gateway_by_requests;
            break;

        case LLM_LIMIT_CONCURRENCY:
            ngx_sprintf(p, "Too many requests in flight: limit %L. Please "
                        "retry shortly.%Z", tier->limits.concurrency);
            ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                        "requests",
                                        "concurrency_limit_exceeded", NULL,
                                        (char *) p);
            ctx->rejected_by = ngx_http_llm_gateway_by_concurrency;
            break;

        default: /* LLM_LIMIT_TOKENS */
            ngx_sprintf(p, "Rate limit reached for tokens per min (TPM): "
                        "limit %L, requested %L. Please try again in %Ls.%Z",
                        tier->limits.tpm.rate, cost, ctx->retry_after);
            ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                        "tokens", "rate_limit_exceeded",
                                        NULL, (char *) p);
            ctx->rejected_by = ngx_http_llm_gateway_by_tokens;
        }

        return;
    }

    ctx->admitted = 1;
    ctx->admitted_ms = now;

    if ((llm_inspect_needs_rewrite(&ctx->req)
         && ngx_http_llm_gateway_rewrite_body(r, ctx, &body) != NGX_OK)
        || ngx_http_llm_gateway_identity(r) != NGX_OK)
    {
        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                    "server_error", "internal_error", NULL,
                                    "Internal error.");
    }

    return;

full:

    ngx_http_llm_gateway_journal_unhold(ctx);
    ngx_shmtx_unlock(&zone->shpool->mutex);

    ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                  "llm_gateway_zone \"%V\" is full",
                  &llcf->shm_zone->shm.name);

    ngx_http_llm_gateway_unavailable(ctx, "gateway_overloaded",
                                     "The gateway is overloaded; retry "
                                     "shortly.", 1);
}


/*
 * A request served from the Idempotency-Key store (idem.c) is neither sent
 * upstream nor billed, and takes no tokens; but it is a request, and takes
 * one from the tenant's requests a minute as any other does.
 */

static void
ngx_http_llm_gateway_admit_replay(ngx_http_request_t *r,
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
    now = ngx_http_llm_gateway_now_ms();

    ngx_shmtx_lock(&zone->shpool->mutex);

    node = ngx_http_llm_gateway_lookup(zone, ctx->key->tenant_id, 1);

    if (node == NULL) {
        ngx_shmtx_unlock(&zone->shpool->mutex);

        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                      "llm_gateway_zone \"%V\" is full",
                      &llcf->shm_zone->shm.name);

        ngx_http_llm_gateway_unavailable(ctx, "gateway_overloaded",
                                         "The gateway is overloaded; retry "
                                         "shortly.", 1);
        return;
    }

    if (node->state.tpm.last_ms == -1) {
        llm_tenant_init(&node->state, &tier->limits, now);
    }

    ngx_http_llm_gateway_name_node(node, ctx->key);
    ngx_http_llm_gateway_share_limits(node, &tier->limits, &ctx->limits);

    brc = llm_bucket_reserve(&node->state.rpm, &ctx->limits.rpm, 1, now,
                             &wait);

    ctx->zone = zone;
    ctx->remaining = llm_bucket_available(&node->state.tpm);
    ctx->reset_ms = llm_bucket_full_in(&node->state.tpm, &ctx->limits.tpm);
    ctx->remaining_requests = llm_bucket_available(&node->state.rpm);
    ctx->reset_requests_ms = llm_bucket_full_in(&node->state.rpm,
                                                &ctx->limits.rpm);

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

    ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS, "requests",
                                "rate_limit_exceeded", NULL, (char *) p);
    ctx->rejected_by = ngx_http_llm_gateway_by_requests;
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

        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_SERVICE_UNAVAILABLE,
                                    "server_error", "upstream_saturated",
                                    NULL, (char *) p);
        ctx->rejected_by = ngx_http_llm_gateway_by_saturation;
        return;
    }

    ngx_sprintf(p, "The shared capacity is in full use: this tenant's "
                "share is %L tokens a minute. Please try again in %Ls.%Z",
                ctx->fair_rate, ctx->retry_after);

    ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS, "tokens",
                                "capacity_exceeded", NULL, (char *) p);
    ctx->rejected_by = ngx_http_llm_gateway_by_capacity;
}


/*
 * The usage is read from the bytes as they pass: the upstream must not
 * compress them.  nginx's own gzip filter may still compress for the
 * client, after the metering filter has seen them.
 */

static ngx_int_t
ngx_http_llm_gateway_identity(ngx_http_request_t *r)
{
    ngx_str_t         name = ngx_string("accept-encoding");
    ngx_table_elt_t  *h;

    h = ngx_http_llm_gateway_find_header(r, &name);

    if (h != NULL) {
        ngx_str_set(&h->value, "identity");
    }

    return NGX_OK;
}


/*
 * The context of the request, also after an internal redirect (error_page,
 * try_files, X-Accel-Redirect), which clears r->ctx: it is found again
 * through the pool cleanup that settles it, so a request is admitted and
 * settled once whatever locations it passes through.
 */

ngx_http_llm_gateway_ctx_t *
ngx_http_llm_gateway_get_ctx(ngx_http_request_t *r)
{
    ngx_pool_cleanup_t          *cln;
    ngx_http_llm_gateway_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_gateway_module);

    if (ctx != NULL || !r->internal || r->pool == NULL) {
        return ctx;
    }

    for (cln = r->pool->cleanup; cln; cln = cln->next) {
        if (cln->handler == ngx_http_llm_gateway_cleanup) {
            ctx = cln->data;
            ngx_http_set_ctx(r, ctx, ngx_http_llm_gateway_module);
            return ctx;
        }
    }

    return NULL;
}


/* the body as one piece of memory */

static ngx_int_t
ngx_http_llm_gateway_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *body)
{
    u_char       *p;
    size_t        len;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    if (r->request_body == NULL || r->request_body->bufs == NULL) {
        ngx_str_set(body, "");
        return NGX_OK;
    }

    if (r->request_body->temp_file) {
        ngx_http_llm_gateway_too_large(ctx);
        return NGX_DECLINED;
    }

    cl = r->request_body->bufs;

    if (cl->next == NULL) {
        b = cl->buf;

        /* an empty chunked body is a last buffer without memory */
        if (b->pos == b->last) {
            ngx_str_set(body, "");
            return NGX_OK;
        }

        body->data = b->pos;
        body->len = b->last - b->pos;
        return NGX_OK;
    }

    len = 0;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        len += cl->buf->last - cl->buf->pos;
    }

    p = ngx_pnalloc(r->pool, len);
    if (p == NULL) {
        return NGX_ERROR;
    }

    body->data = p;
    body->len = len;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        /* the last buffer of a chunked body may have no memory */
        if (cl->buf->pos != cl->buf->last) {
            p = ngx_cpymem(p, cl->buf->pos, cl->buf->last - cl->buf->pos);
        }
    }

    return NGX_OK;
}


/*
 * 413: above llm_gateway_max_body, or spooled to a file because it is
 * above client_body_buffer_size (the gateway reads bodies in memory only).
 */

static void
ngx_http_llm_gateway_too_large(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                "invalid_request_error", "request_too_large",
                                NULL, "The request body is larger than this "
                                "endpoint accepts.");
}


/*
 * The upstream gets what the gateway needs: usage in every stream and a
 * max_tokens that bounds the reservation.  The proxy module sends
 * r->request_body->bufs with headers_in.content_length_n as its length.
 */

static ngx_int_t
ngx_http_llm_gateway_rewrite_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *body)
{
    u_char       *p, *s;
    size_t        len;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    if (ctx->req.rebuild) {
        ngx_http_llm_gateway_json_pool(r->pool);
        s = (u_char *) llm_inspect_rebuild((char *) body->data, body->len,
                                           &ctx->req);
        ngx_http_llm_gateway_json_pool(NULL);

        if (s == NULL) {
            return NGX_ERROR;
        }

        p = s;
        len = ngx_strlen(s);

    } else {
        p = ngx_pnalloc(r->pool, body->len + LLM_INSPECT_SPLICE_MAX);
        if (p == NULL) {
            return NGX_ERROR;
        }

        len = llm_inspect_splice((char *) body->data, body->len, &ctx->req,
                                 (char *) p,
                                 body->len + LLM_INSPECT_SPLICE_MAX);
        if (len == 0) {
            return NGX_ERROR;
        }
    }

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->pos = p;
    b->last = p + len;
    b->start = p;
    b->end = p + len;
    b->temporary = 1;
    b->last_buf = 1;
    b->last_in_chain = 1;

    cl = ngx_alloc_chain_link(r->pool);
    if (cl == NULL) {
        return NGX_ERROR;
    }

    cl->buf = b;
    cl->next = NULL;

    r->request_body->bufs = cl;
    r->headers_in.content_length_n = len;

    if (r->headers_in.content_length) {
        s = ngx_pnalloc(r->pool, NGX_OFF_T_LEN);
        if (s == NULL) {
            return NGX_ERROR;
        }

        r->headers_in.content_length->value.data = s;
        r->headers_in.content_length->value.len = ngx_sprintf(s, "%uz", len)
                                                  - s;
    }

    return NGX_OK;
}


static ngx_http_llm_gateway_alias_t *
ngx_http_llm_gateway_find_alias(ngx_http_llm_gateway_loc_conf_t *llcf,
    char *model, size_t len)
{
    ngx_uint_t                     i;
    ngx_http_llm_gateway_alias_t  *a;

    if (llcf->aliases == NULL) {
        return NULL;
    }

    a = llcf->aliases->elts;

    for (i = 0; i < llcf->aliases->nelts; i++) {
        if (a[i].name.len == len
            && ngx_strncmp(a[i].name.data, model, len) == 0)
        {
            return &a[i];
        }
    }

    return NULL;
}


static ngx_http_llm_gateway_tier_t *
ngx_http_llm_gateway_find_tier(ngx_http_llm_gateway_loc_conf_t *llcf,
    ngx_str_t *name)
{
    ngx_uint_t                    i;
    ngx_http_llm_gateway_tier_t  *t;

    t = llcf->tiers->elts;

    for (i = 0; i < llcf->tiers->nelts; i++) {
        if (t[i].name.len == name->len
            && ngx_strncmp(t[i].name.data, name->data, name->len) == 0)
        {
            return &t[i];
        }
    }

    return NULL;
}


/* 503: the gateway, not the client, is short of something for a while */

static void
ngx_http_llm_gateway_unavailable(ngx_http_llm_gateway_ctx_t *ctx,
    const char *code, const char *message, int64_t seconds)
{
    ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_SERVICE_UNAVAILABLE,
                                "server_error", code, NULL, message);

    ctx->retry_after = seconds;
    ctx->retry_after_ms = seconds * 1000;
}


void
ngx_http_llm_gateway_refuse(ngx_http_llm_gateway_ctx_t *ctx,
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
 * The refusal's JSON body, OpenAI's error object, with the headers that
 * say what it is.
 */

static ngx_buf_t *
ngx_http_llm_gateway_error_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char     *p;
    size_t      len, mlen;
    ngx_buf_t  *b;

    mlen = ngx_strlen(ctx->err_message);

    len = sizeof("{\"error\":{\"message\":\"\",\"type\":\"\",\"param\":\"\","
                 "\"code\":\"\",\"retry_after_ms\":}}\n") - 1 + NGX_INT64_LEN
          + mlen + ngx_escape_json(NULL, ctx->err_message, mlen)
          + ngx_strlen(ctx->err_type) + ngx_strlen(ctx->err_code)
          + (ctx->err_param ? ngx_strlen(ctx->err_param) : 4);

    b = ngx_create_temp_buf(r->pool, len);
    if (b == NULL) {
        return NULL;
    }

    p = ngx_cpymem(b->last, "{\"error\":{\"message\":\"",
                   sizeof("{\"error\":{\"message\":\"") - 1);
    p = (u_char *) ngx_escape_json(p, ctx->err_message, mlen);
    p = ngx_sprintf(p, "\",\"type\":\"%s\",\"param\":", ctx->err_type);

    if (ctx->err_param) {
        p = ngx_sprintf(p, "\"%s\"", ctx->err_param);

    } else {
        p = ngx_cpymem(p, "null", 4);
    }

    p = ngx_sprintf(p, ",\"code\":\"%s\"", ctx->err_code);

    /* what Retry-After and retry-after-ms say, for clients that read JSON */
    if (ctx->retry_after) {
        p = ngx_sprintf(p, ",\"retry_after_ms\":%L", ctx->retry_after_ms);
    }

    p = ngx_cpymem(p, "}}\n", 3);

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


/*
 * llm_gateway_error: where error_page sends nginx's own refusals of a
 * request it could not parse or take (400, 411, 413, 414, 494, 501), so
 * that a client of the gateway gets its JSON error, not an HTML page.
 * error_page leaves the status in r->err_status, but for 494 (a header
 * too large), which it makes 400 itself.
 */

ngx_int_t
ngx_http_llm_gateway_error_handler(ngx_http_request_t *r)
{
    ngx_uint_t                         status;
    const char                        *code, *msg;
    ngx_http_llm_gateway_ctx_t        *ctx;

    status = r->err_status ? r->err_status : NGX_HTTP_BAD_REQUEST;

    ctx = ngx_http_llm_gateway_get_ctx(r);

    if (ctx == NULL) {
        ctx = ngx_http_llm_gateway_bare_ctx(r);
        if (ctx == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    switch (status) {

    case NGX_HTTP_REQUEST_ENTITY_TOO_LARGE:
        ngx_http_llm_gateway_too_large(ctx);
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

    ngx_http_llm_gateway_refuse(ctx, status,
                                status < 500 ? "invalid_request_error"
                                             : "server_error",
                                code, NULL, msg);

send:

    /* what ngx_http_send_header() sends, whatever error_page said */
    r->err_status = ctx->err_status;

    return ngx_http_llm_gateway_send_error(r, ctx);
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
ngx_http_llm_gateway_replace_413(ngx_http_request_t *r,
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

    ngx_http_llm_gateway_too_large(ctx);

    ctx->err_body = ngx_http_llm_gateway_error_body(r, ctx);
    if (ctx->err_body == NULL) {
        return NGX_ERROR;
    }

    ngx_str_set(&v, "false");

    return ngx_http_llm_gateway_add_header(r, "x-should-retry", &v);
}


ngx_int_t
ngx_http_llm_gateway_send_error(ngx_http_request_t *r,
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
ngx_http_llm_gateway_error_headers(ngx_http_request_t *r,
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

        if (ngx_http_llm_gateway_add_header(r, "Retry-After", &v) != NGX_OK) {
            return NGX_ERROR;
        }

        /* the exact wait, which the official SDKs prefer when it is there */
        p += v.len;
        v.data = p;
        v.len = ngx_sprintf(p, "%L", ctx->retry_after_ms) - p;

        if (ngx_http_llm_gateway_add_header(r, "retry-after-ms", &v)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    /* the official SDKs obey this: a request that can never pass */
    if (ctx->never || ctx->err_status < 429) {
        ngx_str_set(&v, "false");

        if (ngx_http_llm_gateway_add_header(r, "x-should-retry", &v)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/*
 * A request that fails over to another backend: its body is written again
 * for that backend's model, and its flight says the model it now calls.
 */

ngx_int_t
ngx_http_llm_gateway_reprepare(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_http_llm_gateway_zone_t    *zone;
    ngx_http_llm_gateway_flight_t  *f;

    if (llm_inspect_needs_rewrite(&ctx->req)
        && ngx_http_llm_gateway_rewrite_body(r, ctx, &ctx->body) != NGX_OK)
    {
        return NGX_ERROR;
    }

    f = ctx->flight;

    if (f == NULL) {
        return NGX_OK;
    }

    zone = ctx->zone;

    ngx_shmtx_lock(&zone->shpool->mutex);

    /* a role's flight has room for any model (flight_start()) */
    f->model_len = (u_char) ngx_min(ctx->req.model_len, LLM_RECORD_MODEL_MAX);
    ngx_memcpy(f->data + f->request_id_len, ctx->req.model, f->model_len);

    ngx_shmtx_unlock(&zone->shpool->mutex);

    return NGX_OK;
}


/* x-ratelimit-* as OpenAI sends them, on refusals and admitted requests */

ngx_int_t
ngx_http_llm_gateway_set_ratelimit_headers(ngx_http_request_t *r,
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

    if (ctx->tier == NULL || ctx->zone == NULL) {
        return NGX_OK;
    }

    if (ngx_http_llm_gateway_limit_headers(r, tokens,
                                           ctx->tier->limits.tpm.rate,
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
                                              ctx->tier->limits.rpm.rate,
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
        if (ngx_http_llm_gateway_add_header(r, (char *) names[i].data, &v[i])
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/*
 * A model with a sunset date: "Deprecation: @<unix time>" (RFC 9745) and
 * "Sunset: <HTTP-date>" (RFC 8594) on every response for it.
 */

ngx_int_t
ngx_http_llm_gateway_set_sunset_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char                           *p;
    ngx_str_t                         v;
    ngx_uint_t                        i;
    ngx_http_llm_gateway_sunset_t    *sn;
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    /* the model asked for, when a spent cap had a cheaper one serve it */
    if (ctx->downgraded_from.len
        && ngx_http_llm_gateway_add_header(r, "x-llm-downgraded-from",
                                           &ctx->downgraded_from)
           != NGX_OK)
    {
        return NGX_ERROR;
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

    if (ngx_http_llm_gateway_add_header(r, "Deprecation", &v) != NGX_OK) {
        return NGX_ERROR;
    }

    p += v.len;
    v.data = p;
    v.len = ngx_http_time(p, sn[i].sunset) - p;

    return ngx_http_llm_gateway_add_header(r, "Sunset", &v);
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
ngx_http_llm_gateway_add_header(ngx_http_request_t *r, char *name,
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
ngx_http_llm_gateway_safe(ngx_pool_t *pool, u_char *s, size_t len,
    size_t max, ngx_str_t *out)
{
    return ngx_http_llm_gateway_escape_bytes(pool, s, len, max, 1, out);
}


/* a message of the gateway's own, which may quote an escaped string */

static u_char *
ngx_http_llm_gateway_log_text(ngx_pool_t *pool, u_char *s, size_t len,
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
