
/*
 * Routing: the backend a request goes to, among its role's members, as
 * their pacers, quotas and circuit breakers allow; the breaker learns how
 * each request ended.  What leaves every backend out is told to the client.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_route.h"
#include "ngx_http_llm_gateway_auth.h"
#include "ngx_http_llm_gateway_backend.h"
#include "ngx_http_llm_gateway_budget.h"
#include "ngx_http_llm_gateway_clock.h"
#include "ngx_http_llm_gateway_reply.h"
#include "ngx_http_llm_gateway_translate.h"


/* " Left out: ..." of a refusal, at most */
#define NGX_HTTP_LLM_GATEWAY_LEFT_OUT      384


static ngx_uint_t ngx_http_llm_gateway_eligible(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_uint_t i);
static void ngx_http_llm_gateway_left_out(ngx_http_llm_gateway_ctx_t *ctx,
    u_char *buf);
static void ngx_http_llm_gateway_ineligible(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static ngx_uint_t ngx_http_llm_gateway_route_native(ngx_http_request_t *r,
    ngx_http_llm_gateway_member_t *m);


static const char  *ngx_http_llm_gateway_states[] = {
    "up", "busy", "quota spent", "failing", "failing for your requests"
};


/*
 * At inspection: a model that names a role is served by its first
 * candidate, whose model the upstream, the spend cap and the ledger see.
 * NGX_DECLINED: refused (none can serve it now), ctx says why.
 */

ngx_int_t
ngx_http_llm_gateway_route(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_http_llm_gateway_member_t     *m;
    ngx_http_llm_gateway_loc_conf_t   *llcf;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    ctx->role = ngx_http_llm_gateway_backend_role_find(
                    lmcf, (u_char *) ctx->req.model, ctx->req.model_len);

    if (ctx->role == NULL) {
        llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);
        ctx->backend = llcf->backend;
        ngx_http_llm_gateway_translate_use(r, ctx);

        /* the location's own backend: route_translatable(), once the
           alias is resolved */
        return NGX_OK;
    }

    ctx->role_name.len = ctx->req.model_len;
    ctx->role_name.data = ngx_pnalloc(r->pool, ctx->req.model_len);
    if (ctx->role_name.data == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(ctx->role_name.data, ctx->req.model, ctx->req.model_len);

    m = ngx_http_llm_gateway_route_choose(r, ctx,
                                          ngx_http_llm_gateway_clock_wall_ms());

    if (m == NULL) {
        return NGX_DECLINED;
    }

    return ngx_http_llm_gateway_route_use(r, ctx, m);
}


/*
 * The candidate for the next attempt: among the role's backends not tried
 * yet and up, those of the best priority, one of them at random by
 * weight.  None: the request is refused with the earliest time one comes
 * back, and NULL.
 */

ngx_http_llm_gateway_member_t *
ngx_http_llm_gateway_route_choose(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, int64_t now)
{
    int64_t                         until, first, tenant;
    uint32_t                        out;
    ngx_uint_t                      i, n, best, total, pick, state, worst;
    ngx_uint_t                      trials, native, only_native;
    ngx_http_llm_gateway_member_t  *m, *chosen;

    m = ctx->role->members.elts;
    tenant = ngx_http_llm_gateway_tenant(ctx);

    /* a pass rules out one candidate, unless states change meanwhile */
    for (n = 0; n < 2 * NGX_HTTP_LLM_GATEWAY_BACKENDS; n++) {
        out = ctx->tried | ctx->not_allowed | ctx->not_priced
              | ctx->not_covered | ctx->not_translated;

        best = NGX_MAX_UINT32_VALUE;
        total = 0;
        native = 0;

        for (i = 0; i < ctx->role->members.nelts; i++) {
            if ((out & ((uint32_t) 1 << i))
                || ngx_http_llm_gateway_route_state(m[i].backend, tenant,
                                                      now, 0, NULL, 0, &until)
                   != NGX_HTTP_LLM_GATEWAY_UP)
            {
                continue;
            }

            if (m[i].priority < best) {
                best = m[i].priority;
                total = 0;
                native = 0;
            }

            if (m[i].priority == best) {
                total += m[i].weight;

                if (ngx_http_llm_gateway_route_native(r, &m[i])) {
                    native += m[i].weight;
                }
            }
        }

        if (total == 0) {
            break;
        }

        /* of the best, those that need no translation, if any */
        only_native = (native != 0);
        total = only_native ? native : total;

        pick = (ngx_uint_t) ngx_random() % total;
        chosen = NULL;

        for (i = 0; i < ctx->role->members.nelts; i++) {
            if ((out & ((uint32_t) 1 << i)) || m[i].priority != best
                || (only_native
                    && !ngx_http_llm_gateway_route_native(r, &m[i]))
                || ngx_http_llm_gateway_route_state(m[i].backend, tenant,
                                                      now, 0, NULL, 0,
                                                      &until)
                   != NGX_HTTP_LLM_GATEWAY_UP)
            {
                continue;
            }

            if (pick < m[i].weight) {
                chosen = &m[i];
                break;
            }

            pick -= m[i].weight;
        }

        if (chosen == NULL) {
            /* its state changed meanwhile: the next pass sees it */
            continue;
        }

        /* one the request may not use: the next pass goes without it */
        if (!ngx_http_llm_gateway_eligible(r, ctx, chosen - m)) {
            continue;
        }

        /* a half-open breaker lets one request through: this one, if free */
        trials = 0;

        if (ngx_http_llm_gateway_route_state(chosen->backend, tenant, now,
                                               1, &trials, 0, &until)
            == NGX_HTTP_LLM_GATEWAY_UP)
        {
            ctx->tried |= (uint32_t) 1 << (chosen - m);
            ctx->trial = trials;
            ctx->trial_ms = now;
            return chosen;
        }

        ctx->tried |= (uint32_t) 1 << (chosen - m);
    }

    /*
     * None: the reason that lasts least, and when it ends, among those the
     * request may use; those it may not never come back for it.
     */
    first = -1;
    worst = NGX_HTTP_LLM_GATEWAY_UP;
    out = ctx->not_allowed | ctx->not_priced | ctx->not_covered
          | ctx->not_translated;

    for (i = 0; i < ctx->role->members.nelts; i++) {
        if (out & ((uint32_t) 1 << i) & ~ctx->tried) {
            continue;
        }

        /* one that is down now, and the request could never use */
        if (!(ctx->tried & ((uint32_t) 1 << i))
            && !ngx_http_llm_gateway_eligible(r, ctx, i))
        {
            continue;
        }

        state = ngx_http_llm_gateway_route_state(m[i].backend, tenant, now,
                                                   0, NULL, 0, &until);

        if (state == NGX_HTTP_LLM_GATEWAY_UP) {
            /* tried already in this request: it answered badly just now */
            state = NGX_HTTP_LLM_GATEWAY_OPEN;
            until = now + 1000;
        }

        if (first == -1 || until < first) {
            first = until;
            worst = state;
        }
    }

    ngx_http_llm_gateway_route_unserved(r, ctx, worst, first, now);

    return NULL;
}


/*
 * Whether the request may go to the role's member i: the key and its tier
 * allow the role itself or the member's model, a tier that serves priced
 * models only knows its price, and a spend cap held for the request
 * covers it.  Else 0, and why in ctx: a failover never serves a model the
 * client could not have asked for.
 */

static ngx_uint_t
ngx_http_llm_gateway_eligible(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_uint_t i)
{
    uint32_t                        bit;
    ngx_str_t                      *model;
    ngx_http_llm_gateway_member_t  *m;

    m = ctx->role->members.elts;
    model = m[i].model.len ? &m[i].model : &ctx->role_name;
    bit = (uint32_t) 1 << i;

    if (!ngx_http_llm_gateway_auth_model_allowed(ctx,
                                                 (char *) ctx->role_name.data,
                                                 ctx->role_name.len)
        && !ngx_http_llm_gateway_auth_model_allowed(ctx, (char *) model->data,
                                                         model->len))
    {
        ctx->not_allowed |= bit;
        return 0;
    }

    if (ngx_http_llm_gateway_budget_unpriced(r, ctx, model)) {
        ctx->not_priced |= bit;
        return 0;
    }

    if (!ngx_http_llm_gateway_budget_covers(ctx, model)) {
        ctx->not_covered |= bit;
        return 0;
    }

    if (!ngx_http_llm_gateway_translate_can(r, ctx, m[i].backend, model)) {
        ctx->not_translated |= bit;
        return 0;
    }

    return 1;
}


/* m speaks the client's dialect: nothing to translate */

static ngx_uint_t
ngx_http_llm_gateway_route_native(ngx_http_request_t *r,
    ngx_http_llm_gateway_member_t *m)
{
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    return ngx_http_llm_gateway_translate_api(r, m->backend) == llcf->api;
}


/*
 * A request to the location's own backend, of another dialect, with the
 * model it calls (an alias resolved): a request that backend's dialect
 * cannot take is a 400.  NGX_DECLINED: refused, ctx says why.
 */

ngx_int_t
ngx_http_llm_gateway_route_translatable(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_str_t    model;
    const char  *param, *message;

    model.data = (u_char *) ctx->req.model;
    model.len = ctx->req.model_len;

    if (ngx_http_llm_gateway_translate_can(r, ctx, ctx->backend, &model)) {
        return NGX_OK;
    }

    if (ctx->tx == NULL) {
        return NGX_ERROR;
    }

    ngx_http_llm_gateway_translate_refusal(ctx, &param, &message);
    ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                      "invalid_request_error",
                                      "unsupported_parameter", param,
                                      message);
    ctx->never = 1;

    return NGX_DECLINED;
}


/*
 * Under the backend's lock: up for tenant's request, or what keeps it out
 * and until when (wall ms).  *trials: the half-open trials (the
 * backend's, the tenant's own) the request holds; take: it takes those
 * it needs that are free, added to *trials.
 */

ngx_uint_t
ngx_http_llm_gateway_route_state(ngx_http_llm_gateway_backend_t *b,
    int64_t tenant, int64_t now, ngx_uint_t take, ngx_uint_t *trials,
    int64_t taken, int64_t *until)
{
    int                                 took;
    ngx_uint_t                          state, busy;
    llm_breaker_state_e                 bs;
    ngx_http_llm_gateway_backend_sh_t  *sh;

    sh = b->sh;
    state = NGX_HTTP_LLM_GATEWAY_UP;
    *until = now;
    took = trials ? (int) *trials : 0;

    ngx_shmtx_lock(&b->shpool->mutex);

    if (sh->spent_until > now) {
        state = NGX_HTTP_LLM_GATEWAY_SPENT;
        *until = sh->spent_until;

    } else {
        /* a busy backend's trial is the request's that goes after */
        busy = (sh->busy_until > now);

        bs = llm_breaker_state(&sh->breaker, &b->breaker, tenant, now,
                               take && !busy, &took, taken, until);

        if (bs == LLM_BREAKER_OPEN) {
            state = NGX_HTTP_LLM_GATEWAY_OPEN;

        } else if (bs == LLM_BREAKER_LIMITED) {
            state = NGX_HTTP_LLM_GATEWAY_LIMITED;

        } else if (busy) {
            state = NGX_HTTP_LLM_GATEWAY_BUSY;
            *until = sh->busy_until;
        }
    }

    ngx_shmtx_unlock(&b->shpool->mutex);

    if (trials) {
        *trials = (ngx_uint_t) took;
    }

    return state;
}


/* the attempt goes to m: its model into the body, its name for the log */

ngx_int_t
ngx_http_llm_gateway_route_use(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_member_t *m)
{
    ngx_str_t  *model;

    ctx->backend = m->backend;
    ngx_http_llm_gateway_translate_use(r, ctx);

    model = m->model.len ? &m->model : &ctx->role_name;

    if (ctx->req.model_len == model->len
        && ngx_strncmp(ctx->req.model, model->data, model->len) == 0)
    {
        return NGX_OK;
    }

    if (llm_inspect_set_model(&ctx->req, (char *) model->data, model->len)
        != 0)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* no backend can serve the request now: why, and when one can */

void
ngx_http_llm_gateway_route_unserved(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_uint_t state, int64_t until,
    int64_t now)
{
    u_char      *p, left[NGX_HTTP_LLM_GATEWAY_LEFT_OUT];
    ngx_str_t    name, tried;
    ngx_uint_t   diag;

    if (until == -1) {
        ngx_http_llm_gateway_ineligible(r, ctx);
        return;
    }

    diag = ngx_http_llm_gateway_route_diagnostics(r);

    ngx_str_null(&name);
    ngx_str_null(&tried);

    if (diag) {
        tried = ctx->tried_names;
    }

    if (ctx->role) {
        /* the name the client called: escaped, bounded */
        (void) ngx_http_llm_gateway_reply_safe(r->pool, ctx->role_name.data,
                                               ctx->role_name.len,
                                               NGX_HTTP_LLM_GATEWAY_SAFE_MAX,
                                               &name);

    } else if (diag) {
        /* the location's own backend: a name the client did not call */
        name = ctx->backend->name;
    }

    ngx_http_llm_gateway_left_out(ctx, left);

    ctx->retry_after_ms = ngx_max(until - now, 1000);
    ctx->retry_after = llm_bucket_seconds(ctx->retry_after_ms);

    p = ngx_pnalloc(r->pool, 256 + sizeof(left) + name.len + tried.len);
    if (p == NULL) {
        return;
    }

    if (state == NGX_HTTP_LLM_GATEWAY_LIMITED) {
        /* the tenant's own failures: the others are served meanwhile */
        ngx_sprintf(p, "Your requests%s%V%s failed, too many in a row; no "
                    "more of yours are sent for %Ls. Other clients are not "
                    "affected.%s%V%s%s%Z", name.len ? " to \"" : "", &name,
                    name.len ? "\"" : "", ctx->retry_after,
                    tried.len ? " Tried: " : "", &tried, tried.len ? "." : "",
                    left);

        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                          "requests", "too_many_failures", NULL,
                                          (char *) p);
        return;
    }

    ngx_sprintf(p, "%s%s%V%s %s%s; the first comes back in %Ls.%s%V%s%s%Z",
                ctx->role ? "Every backend of" : "The backend",
                name.len ? " \"" : "", &name, name.len ? "\"" : "",
                ctx->role ? "is unavailable, the first " : "is ",
                ngx_http_llm_gateway_states[state], ctx->retry_after,
                tried.len ? " Tried: " : "", &tried, tried.len ? "." : "",
                left);

    switch (state) {

    case NGX_HTTP_LLM_GATEWAY_SPENT:
        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                          "insufficient_quota",
                                          "insufficient_quota",
                                          NULL, (char *) p);
        break;

    case NGX_HTTP_LLM_GATEWAY_BUSY:
        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                          "requests", "provider_rate_limited",
                                          NULL, (char *) p);
        break;

    default:
        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_SERVICE_UNAVAILABLE,
                                          "server_error", "backend_unavailable",
                                          NULL, (char *) p);
    }
}


/*
 * " Left out: 1 backend whose model ...": the role's backends the request
 * may not use, and why, as a NUL-terminated sentence (empty: none).
 */

static void
ngx_http_llm_gateway_left_out(ngx_http_llm_gateway_ctx_t *ctx, u_char *buf)
{
    u_char      *p;
    ngx_uint_t   i, n[4];

    static const char  *why[] = {
        "whose model this API key or its tier may not call",
        "whose model has no price (this tier serves priced models only)",
        "whose model costs more than the spend cap held for the request",
        "whose API this request cannot be translated to"
    };

    n[0] = (ngx_uint_t) __builtin_popcount(ctx->not_allowed & ~ctx->tried);
    n[1] = (ngx_uint_t) __builtin_popcount(ctx->not_priced & ~ctx->tried);
    n[2] = (ngx_uint_t) __builtin_popcount(ctx->not_covered & ~ctx->tried);
    n[3] = (ngx_uint_t) __builtin_popcount(ctx->not_translated
                                           & ~ctx->tried);

    p = buf;

    for (i = 0; i < 4; i++) {
        if (n[i] == 0) {
            continue;
        }

        p = ngx_sprintf(p, "%s%ui backend%s %s",
                        p == buf ? " Left out: " : ", ", n[i],
                        n[i] == 1 ? "" : "s", why[i]);
    }

    if (p != buf) {
        *p++ = '.';
    }

    *p = '\0';
}


/*
 * No backend of the role is one the request may use: the model is as
 * good as not allowed, not priced or beyond the cap, and that is said,
 * not a time at which one comes back.
 */

static void
ngx_http_llm_gateway_ineligible(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char      *p, left[NGX_HTTP_LLM_GATEWAY_LEFT_OUT];
    uint32_t     other;
    ngx_str_t    name;
    const char  *param, *message;

    other = (ctx->not_allowed | ctx->not_priced | ctx->not_covered)
            & ~ctx->tried;

    /* only dialects that cannot take it: the request is the client's error */
    if (other == 0 && (ctx->not_translated & ~ctx->tried)) {
        ngx_http_llm_gateway_translate_refusal(ctx, &param, &message);
        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                          "invalid_request_error",
                                          "unsupported_parameter", param,
                                          message);
        ctx->never = 1;
        return;
    }

    (void) ngx_http_llm_gateway_reply_safe(r->pool, ctx->role_name.data,
                                           ctx->role_name.len,
                                           NGX_HTTP_LLM_GATEWAY_SAFE_MAX,
                                           &name);

    ngx_http_llm_gateway_left_out(ctx, left);

    p = ngx_pnalloc(r->pool, 128 + sizeof(left) + name.len);
    if (p != NULL) {
        ngx_sprintf(p, "No backend of \"%V\" can serve this request.%s%Z",
                    &name, left);
    }

    if (ctx->not_covered & ~ctx->tried) {
        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                          "insufficient_quota",
                                          "insufficient_quota",
                                          NULL, (char *) p);
        return;
    }

    ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_FORBIDDEN,
                                      "permission_error",
                                      (ctx->not_priced & ~ctx->tried)
                                      ? "model_not_priced"
                                      : "model_not_allowed",
                                      "model", (char *) p);
    ctx->never = 1;
}


/*
 * Whether this client may be told which backends served it, failed it or
 * kept it waiting (llm_gateway_diagnostics): their names are the
 * operator's, not the tenants'.
 */

ngx_uint_t
ngx_http_llm_gateway_route_diagnostics(ngx_http_request_t *r)
{
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    if (llcf->diagnostics == NULL) {
        return 0;
    }

    return llcf->diagnostics->nelts == 0
           || ngx_cidr_match(r->connection->sockaddr, llcf->diagnostics)
              == NGX_OK;
}


/* "a=code, b=code": what the failover header and a refusal tell */

void
ngx_http_llm_gateway_route_tried(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, const char *code)
{
    u_char     *p;
    size_t      len;
    ngx_str_t  *name;

    name = &ctx->backend->name;

    len = ctx->tried_names.len + name->len + ngx_strlen(code) + 3;

    p = ngx_pnalloc(r->pool, len);
    if (p == NULL) {
        return;
    }

    /* the names so far first: tried_names is written over after */
    ctx->tried_names.len = ngx_sprintf(p, "%V%s%V=%s",
                                       &ctx->tried_names,
                                       ctx->tried_names.len ? ", " : "",
                                       name, code)
                           - p;
    ctx->tried_names.data = p;
}


/*
 * The request ended: its entry in the pacer's minute is corrected to what
 * it used (0: the provider refused it), so that the waiters behind it
 * may go earlier.
 */

void
ngx_http_llm_gateway_route_done(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_backend_t *b, int64_t tokens)
{
    int64_t  now;

    if (b == NULL) {
        return;
    }

    now = ngx_http_llm_gateway_clock_now_ms();

    ngx_shmtx_lock(&b->shpool->mutex);

    /* a half-open trial that never reached it: the next request's */
    if (ctx->trial && !ctx->answered) {
        llm_breaker_untried(&b->sh->breaker, &b->breaker,
                            ngx_http_llm_gateway_tenant(ctx), ctx->trial,
                            ctx->trial_ms);
    }

    ctx->trial = 0;

    if (ctx->pace_ticket && b->sh->pacer) {

        if (ctx->paced) {
            (void) llm_pacer_correct(b->sh->pacer, ctx->pace_ticket, tokens,
                                     now);

        } else {
            /* still waiting: it leaves the queue without a trace */
            (void) llm_pacer_cancel(b->sh->pacer, ctx->pace_ticket, now);
        }
    }

    ngx_shmtx_unlock(&b->shpool->mutex);

    ctx->pace_ticket = 0;
}
