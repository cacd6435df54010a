
/*
 * Spend caps.  A tenant's budget reaches this gateway as leases that
 * accountd takes from PostgreSQL (llm.take_lease): the gateway spends only
 * what it leased, so that all gateways together never pass the cap.  A key
 * with a cap of its own has its own budget (a node under -key_id), leased
 * against both its cap and its tenant's.
 *
 * At admission a request reserves its worst-case cost, an upper bound of
 * its prompt (the body's bytes: a token is at least one) at the input
 * price plus max_tokens at the output price, from the leased budget in the
 * zone; at settlement the difference to its real cost goes back.  A budget
 * whose cap is unknown, or short, waits for a lease (accountd answers in a
 * round trip); one whose cap is spent is refused with 429
 * insufficient_quota until its period ends.  Budget left idle goes back to
 * PostgreSQL, for the other gateways.
 *
 * Which caps a key answers to comes with the key set: a key and tenant
 * without any cost nothing here.  A key set of version 2 does not say: its
 * tenants are asked about once a second.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_budget.h"
#include "ngx_http_llm_gateway_clock.h"
#include "ngx_http_llm_gateway_zone.h"


/* what a price place is taken for */
#define NGX_HTTP_LLM_GATEWAY_PRICE_SOME    1
#define NGX_HTTP_LLM_GATEWAY_PRICE_NONE    2


/* what accountd said holds this long; then it is asked again */
#define NGX_HTTP_LLM_GATEWAY_CAP_FRESH     1000

/* a model's prices hold this long */
#define NGX_HTTP_LLM_GATEWAY_PRICE_FRESH   60000

/* a lease is this many worst-case requests, and at least this much */
#define NGX_HTTP_LLM_GATEWAY_LEASE_REQS    16
#define NGX_HTTP_LLM_GATEWAY_LEASE_MIN     1000000000LL   /* 1/1000 $ */

/* budget not reserved from for this long goes back (ms) */
#define NGX_HTTP_LLM_GATEWAY_LEASE_IDLE    3000


static ngx_http_llm_gateway_price_t *ngx_http_llm_gateway_price(
    ngx_http_llm_gateway_shctx_t *sh, u_char *model, size_t len,
    ngx_uint_t create);
static void ngx_http_llm_gateway_budget_want(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_node_t *node, int64_t want, int64_t now);


/*
 * Under the zone's lock, with the tenant's node: in *holder the node whose
 * budget the request spends, NULL if it has no cap to answer to.
 * NGX_ERROR: the zone has no room for its key's.
 */

ngx_int_t
ngx_http_llm_gateway_budget_node(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_node_t *node, ngx_http_llm_gateway_node_t **holder)
{
    ngx_uint_t                    caps;
    ngx_http_llm_gateway_node_t  *kn;

    caps = ctx->key->caps;

    if (caps & LLM_KEY_CAP_KEY && !(caps & LLM_KEY_CAP_UNKNOWN)) {
        kn = ngx_http_llm_gateway_zone_lookup(ctx->zone, -ctx->key->key_id, 1);

        if (kn == NULL) {
            return NGX_ERROR;
        }

        kn->owner_id = ctx->key->tenant_id;
        node = kn;

    } else if (caps == 0) {
        /* no cap, as the key set says: nothing to ask accountd */
        *holder = NULL;
        return NGX_OK;
    }

    ctx->budget_id = node->tenant_id;
    *holder = node;

    return NGX_OK;
}


/*
 * Under the zone's lock.  NGX_OK: admitted as far as the budget goes (and
 * reserved, if capped); NGX_AGAIN: wait for accountd's answer to a lease;
 * NGX_DECLINED: the cap is spent; NGX_ERROR: no price to bound the cost.
 */

ngx_int_t
ngx_http_llm_gateway_budget_admit(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_node_t *node, int64_t now, int64_t prompt_bound)
{
    int64_t                        worst, in, lease;
    ngx_http_llm_gateway_price_t  *price;

    ctx->lease_want = -1;

    if (node->budget_seen && now >= node->budget_until) {
        /* a new period: what was leased for the last one is gone */
        node->budget = 0;
        node->spent = 0;
        node->budget_seen = 0;
    }

    if (node->budget_seen == 0) {
        ngx_http_llm_gateway_budget_want(ctx, node,
                                         NGX_HTTP_LLM_GATEWAY_LEASE_MIN,
                                         now);
        return NGX_AGAIN;
    }

    if (!node->capped) {
        if (now - node->budget_seen > NGX_HTTP_LLM_GATEWAY_CAP_FRESH) {
            /* a cap set meanwhile is learned by the next requests */
            ngx_http_llm_gateway_budget_want(ctx, node, 0, now);
        }

        return NGX_OK;
    }

    price = ngx_http_llm_gateway_price(ctx->zone->sh, (u_char *) ctx->req.model,
                                       ctx->req.model_len, 0);

    if (price == NULL || now - price->seen > NGX_HTTP_LLM_GATEWAY_PRICE_FRESH)
    {
        ngx_http_llm_gateway_budget_want(ctx, node,
                                         NGX_HTTP_LLM_GATEWAY_LEASE_MIN,
                                         now);
        return NGX_AGAIN;
    }

    if (price->p[LLM_LEASE_IN] < 0 || price->p[LLM_LEASE_OUT] < 0) {
        /* a spent cap is the answer, whatever the model */
        return node->spent ? NGX_DECLINED : NGX_ERROR;
    }

    /* cache writes may cost more than plain input: the larger bounds both */
    in = ngx_max(price->p[LLM_LEASE_IN], price->p[LLM_LEASE_CACHE_WRITE]);
    worst = prompt_bound * in
            + ctx->req.output_bound * price->p[LLM_LEASE_OUT];

    if (node->budget >= worst) {
        node->budget -= worst;
        node->budget_used = now;
        node->budget_holds++;

        ctx->budget_reserved = worst;
        ctx->budget_held = 1;
        ctx->budget_until = node->budget_until;
        ngx_memcpy(ctx->prices, price->p, sizeof(ctx->prices));

        /* the next lease before this one runs out */
        if (node->budget < worst * (NGX_HTTP_LLM_GATEWAY_LEASE_REQS / 4)
            || now - node->budget_seen > NGX_HTTP_LLM_GATEWAY_CAP_FRESH)
        {
            lease = ngx_max(worst * NGX_HTTP_LLM_GATEWAY_LEASE_REQS,
                            NGX_HTTP_LLM_GATEWAY_LEASE_MIN);
            ngx_http_llm_gateway_budget_want(ctx, node, lease, now);
        }

        return NGX_OK;
    }

    ctx->budget_worst = worst;

    if (node->spent
        && now - node->budget_seen <= NGX_HTTP_LLM_GATEWAY_CAP_FRESH)
    {
        return NGX_DECLINED;
    }

    lease = ngx_max(worst * NGX_HTTP_LLM_GATEWAY_LEASE_REQS,
                    NGX_HTTP_LLM_GATEWAY_LEASE_MIN);
    ngx_http_llm_gateway_budget_want(ctx, node, lease, now);

    return NGX_AGAIN;
}


/* a lease to ask for, once a second at most while one is unanswered */

static void
ngx_http_llm_gateway_budget_want(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_node_t *node, int64_t want, int64_t now)
{
    if (node->budget_asked && now - node->budget_asked < 1000) {
        return;
    }

    node->budget_asked = now;
    ctx->lease_want = want;
}


/*
 * Under the zone's lock, with the tenant's node: the difference to the
 * real cost goes back.
 */

void
ngx_http_llm_gateway_budget_settle(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_node_t *node, llm_settle_t *st)
{
    if (!ctx->budget_held) {
        return;
    }

    ctx->budget_reserved -= ngx_http_llm_gateway_budget_cost(ctx->prices, st);

    ngx_http_llm_gateway_budget_unreserve(ctx, node);
}


/* what a settled request cost, in pico-dollars, at the prices given */

int64_t
ngx_http_llm_gateway_budget_cost(int64_t *prices, llm_settle_t *st)
{
    int64_t  uncached;

    uncached = (int64_t) st->input_tokens - (int64_t) st->cached_input_tokens
               - (int64_t) st->cache_write_tokens;

    /* the same rule as llm.usage_cost() */
    return ngx_max(uncached, 0) * prices[LLM_LEASE_IN]
           + (int64_t) st->cached_input_tokens
             * ngx_max(prices[LLM_LEASE_CACHED], 0)
           + (int64_t) st->cache_write_tokens
             * ngx_max(prices[LLM_LEASE_CACHE_WRITE], 0)
           + (int64_t) st->output_tokens * prices[LLM_LEASE_OUT];
}


/* the same: a request that was not served gives it all back */

void
ngx_http_llm_gateway_budget_unreserve(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_node_t *node)
{
    ngx_http_llm_gateway_budget_give_back(ctx->zone, node, ctx->budget_id,
                                          ctx->budget_until,
                                          ctx->budget_reserved);

    ctx->budget_reserved = 0;
    ctx->budget_held = 0;
}


/*
 * Under the zone's lock: a reservation of the budget of budget_id (node, or
 * the key's node under it) ends, and amount of it goes back.
 */

void
ngx_http_llm_gateway_budget_give_back(ngx_http_llm_gateway_zone_t *zone,
    ngx_http_llm_gateway_node_t *node, int64_t budget_id, int64_t until,
    int64_t amount)
{
    if (node == NULL || node->tenant_id != budget_id) {
        node = ngx_http_llm_gateway_zone_lookup(zone, budget_id, 0);

        if (node == NULL) {
            return;
        }
    }

    /* what a period that is over reserved is not the next one's */
    if (node->budget_seen && node->budget_until == until) {
        node->budget += amount;
    }

    if (node->budget_holds) {
        node->budget_holds--;
    }
}


/*
 * Under the zone's lock: whether the model has a price, for a request
 * whose budget did not look (a tenant without a cap), as far as the zone
 * knows from accountd's leases.  NGX_OK: priced; NGX_DECLINED: accountd
 * said it has none; NGX_AGAIN: not known (if ask: not lately), and if
 * ask, asked for with the next lease (ctx->lease_want).  Only a tier
 * with unpriced=refuse asks: a lease takes a row lock in PostgreSQL.
 */

ngx_int_t
ngx_http_llm_gateway_budget_priced(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_node_t *node, int64_t now, ngx_uint_t ask)
{
    ngx_uint_t                     unpriced;
    ngx_http_llm_gateway_price_t  *price;

    price = ngx_http_llm_gateway_price(ctx->zone->sh, (u_char *) ctx->req.model,
                                       ctx->req.model_len, 0);

    if (price == NULL) {
        if (ask) {
            ngx_http_llm_gateway_budget_want(ctx, node, 0, now);
        }

        return NGX_AGAIN;
    }

    unpriced = (price->p[LLM_LEASE_IN] < 0 || price->p[LLM_LEASE_OUT] < 0);

    /*
     * An old word is asked again.  A price stands meanwhile (and through
     * an outage of accountd: a model priced a minute ago is still served);
     * an old "no price" refuses nothing until accountd says it again.
     */
    if (ask && now - price->seen > NGX_HTTP_LLM_GATEWAY_PRICE_FRESH) {
        ngx_http_llm_gateway_budget_want(ctx, node, 0, now);

        if (unpriced) {
            return NGX_AGAIN;
        }
    }

    if (unpriced) {
        ctx->unpriced = 1;
        return NGX_DECLINED;
    }

    return NGX_OK;
}


/* accountd's answer, for the tenant's or key's node in each zone */

void
ngx_http_llm_gateway_budget_lease(ngx_cycle_t *cycle, llm_lease_t *l,
    ngx_log_t *log)
{
    int64_t                            now, id;
    ngx_uint_t                         i;
    ngx_list_part_t                   *part;
    ngx_http_llm_gateway_node_t       *node;
    ngx_http_llm_gateway_zone_t       *zone;
    ngx_http_llm_gateway_price_t      *price;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_llm_gateway_module);

    now = ngx_http_llm_gateway_clock_wall_ms();
    id = l->key_id ? -l->key_id : l->tenant_id;

    part = &cycle->shared_memory.part;
    i = 0;

    while ((zone = ngx_http_llm_gateway_zone_next(lmcf, &part, &i))) {

        ngx_shmtx_lock(&zone->shpool->mutex);

        node = ngx_http_llm_gateway_zone_lookup(zone, id, 0);

        if (node == NULL) {
            ngx_shmtx_unlock(&zone->shpool->mutex);
            continue;
        }

        if (l->type == LLM_REC_SHARE) {
            node->share_ppm = l->granted;
            ngx_shmtx_unlock(&zone->shpool->mutex);
            continue;
        }

        node->budget_asked = 0;

        if (l->remaining == -2) {
            /* accountd could not ask PostgreSQL: the wait ends */
            ngx_shmtx_unlock(&zone->shpool->mutex);
            continue;
        }

        if (node->budget_seen == 0 || now >= node->budget_until) {
            node->budget = 0;
        }

        /* a grant may be spent until its shortest capped period ends */
        node->budget += l->granted;
        node->budget_until = l->until_ms ? l->until_ms : l->resets_at_ms;
        node->budget_resets = l->resets_at_ms;
        node->budget_seen = now;
        node->capped = (l->remaining != -1);
        node->spent = (node->capped && l->remaining == 0);

        price = ngx_http_llm_gateway_price(zone->sh, (u_char *) l->model,
                                           l->model_len,
                                           (l->prices[LLM_LEASE_IN] < 0
                                            || l->prices[LLM_LEASE_OUT] < 0)
                                           ? NGX_HTTP_LLM_GATEWAY_PRICE_NONE
                                           : NGX_HTTP_LLM_GATEWAY_PRICE_SOME);
        price->seen = now;
        ngx_memcpy(price->p, l->prices, sizeof(price->p));

        ngx_shmtx_unlock(&zone->shpool->mutex);
    }

    ngx_log_debug5(NGX_LOG_DEBUG_HTTP, log, 0,
                   "llm gateway lease: tenant %L key %L, granted %L, "
                   "left %L, until %L", l->tenant_id, l->key_id, l->granted,
                   l->remaining, l->until_ms);
}


/* a model's prices, by its whole name, among those the zone keeps */

static ngx_http_llm_gateway_price_t *
ngx_http_llm_gateway_price(ngx_http_llm_gateway_shctx_t *sh, u_char *model,
    size_t len, ngx_uint_t create)
{
    ngx_uint_t                     i, unpriced;
    ngx_http_llm_gateway_price_t  *p, *oldest, *oldest_unpriced;

    len = ngx_min(len, LLM_RECORD_MODEL_MAX);
    oldest = &sh->prices[0];
    oldest_unpriced = NULL;
    unpriced = 0;

    for (i = 0; i < NGX_HTTP_LLM_GATEWAY_PRICES; i++) {
        p = &sh->prices[i];

        if (p->seen && p->len == len && ngx_memcmp(p->model, model, len) == 0)
        {
            return p;
        }

        if (p->seen < oldest->seen) {
            oldest = p;
        }

        if (p->seen && (p->p[LLM_LEASE_IN] < 0 || p->p[LLM_LEASE_OUT] < 0)) {
            unpriced++;

            if (oldest_unpriced == NULL || p->seen < oldest_unpriced->seen) {
                oldest_unpriced = p;
            }
        }
    }

    if (!create) {
        return NULL;
    }

    /*
     * Names without a price are the client's to choose: they take at most
     * half the places, so that a flood of made-up models cannot push the
     * priced ones out and make every capped request wait for accountd.
     */
    if (create == NGX_HTTP_LLM_GATEWAY_PRICE_NONE && oldest->seen
        && unpriced >= NGX_HTTP_LLM_GATEWAY_PRICES / 2)
    {
        oldest = oldest_unpriced;
    }

    oldest->len = (u_char) len;
    ngx_memcpy(oldest->model, model, len);

    return oldest;
}


/*
 * Rate limits shared by gateways: the tier's limits scaled by this
 * gateway's share of the tenant's recent demand (sql/006).  The rates are
 * shared, the bursts not: a request as large as the tier's burst still
 * passes somewhere, and a window of a minute holds L and the bursts.
 */

void
ngx_http_llm_gateway_budget_share_limits(ngx_http_llm_gateway_node_t *node,
    const llm_limits_t *tier, llm_limits_t *out)
{
    *out = *tier;

    if (node->share_ppm <= 0 || node->share_ppm >= 1000000) {
        return;
    }

    out->tpm.rate = ngx_max(tier->tpm.rate * node->share_ppm / 1000000, 1);

    if (tier->rpm.rate) {
        out->rpm.rate = ngx_max(tier->rpm.rate * node->share_ppm / 1000000,
                                1);
    }
}


/*
 * Once a second, by whichever worker comes first: the tokens each tenant
 * asked of this gateway since, as SHARE_REQ frames, most recent first, and
 * the budget left idle, as LEASE_RETURN frames.
 */

ngx_uint_t
ngx_http_llm_gateway_budget_demand(ngx_cycle_t *cycle, llm_lease_t *out,
    ngx_uint_t max)
{
    int64_t                            now;
    ngx_uint_t                         i, n;
    ngx_queue_t                       *q;
    ngx_list_part_t                   *part;
    ngx_http_llm_gateway_node_t       *node;
    ngx_http_llm_gateway_zone_t       *zone;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_llm_gateway_module);

    now = ngx_http_llm_gateway_clock_wall_ms();
    n = 0;

    part = &cycle->shared_memory.part;
    i = 0;

    while ((zone = ngx_http_llm_gateway_zone_next(lmcf, &part, &i))) {

        ngx_shmtx_lock(&zone->shpool->mutex);

        if (now - zone->sh->demand_reported < 1000) {
            ngx_shmtx_unlock(&zone->shpool->mutex);
            continue;
        }

        zone->sh->demand_reported = now;

        for (q = ngx_queue_head(&zone->sh->queue);
             q != ngx_queue_sentinel(&zone->sh->queue) && n < max;
             q = ngx_queue_next(q))
        {
            node = ngx_queue_data(q, ngx_http_llm_gateway_node_t, queue);

            if (node->capped && node->budget > 0
                && now - node->budget_used > NGX_HTTP_LLM_GATEWAY_LEASE_IDLE
                && now - node->budget_seen > NGX_HTTP_LLM_GATEWAY_LEASE_IDLE
                && now < node->budget_until)
            {
                /*
                 * Idle budget goes back, for other gateways to lease; lost
                 * on the way, it is only never spent.
                 */
                ngx_memzero(&out[n], sizeof(llm_lease_t));
                out[n].type = LLM_REC_LEASE_RETURN;
                out[n].tenant_id = node->owner_id ? node->owner_id
                                                  : node->tenant_id;
                out[n].key_id = node->owner_id ? -node->tenant_id : 0;
                out[n].want = node->budget;
                out[n].until_ms = node->budget_until;
                n++;

                node->budget = 0;

                if (n == max) {
                    break;
                }
            }

            if (node->demand == 0) {
                continue;
            }

            ngx_memzero(&out[n], sizeof(llm_lease_t));
            out[n].type = LLM_REC_SHARE_REQ;
            out[n].tenant_id = node->tenant_id;
            out[n].want = node->demand;
            n++;

            node->demand = 0;
        }

        ngx_shmtx_unlock(&zone->shpool->mutex);
    }

    return n;
}


/*
 * May a request that failed over call model, within what its cap
 * reserved?  Yes when it reserved nothing, or when the model's known
 * prices are none above those it was reserved at.
 */

ngx_uint_t
ngx_http_llm_gateway_budget_covers(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_str_t *model)
{
    ngx_uint_t                     i, ok;
    ngx_http_llm_gateway_price_t  *price;

    if (!ctx->budget_held) {
        return 1;
    }

    if (model->len == ctx->req.model_len
        && ngx_strncmp(model->data, ctx->req.model, model->len) == 0)
    {
        return 1;
    }

    ok = 0;

    ngx_shmtx_lock(&ctx->zone->shpool->mutex);

    price = ngx_http_llm_gateway_price(ctx->zone->sh, model->data, model->len,
                                       0);

    /* a model without a price cannot be held to the cap */
    if (price != NULL
        && price->p[LLM_LEASE_IN] >= 0 && price->p[LLM_LEASE_OUT] >= 0)
    {
        ok = 1;

        for (i = 0; i < 4; i++) {
            if (price->p[i] > ngx_max(ctx->prices[i], 0)) {
                ok = 0;
            }
        }
    }

    ngx_shmtx_unlock(&ctx->zone->shpool->mutex);

    return ok;
}


/*
 * Under the zone's lock: whether the zone has accountd's word on the
 * model's price, lately.  A role's other models are asked about at
 * admission, so that a failover to one of them finds its price known.
 */

ngx_uint_t
ngx_http_llm_gateway_budget_known(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_str_t *model, int64_t now)
{
    ngx_http_llm_gateway_price_t  *price;

    price = ngx_http_llm_gateway_price(ctx->zone->sh, model->data,
                                       model->len, 0);

    return price != NULL
           && now - price->seen <= NGX_HTTP_LLM_GATEWAY_PRICE_FRESH;
}


/*
 * A model the request may be moved to (another backend of its role), for
 * a tier that serves priced models only: 1 if it may not have it, its
 * price known to be none or, once admitted (too late to wait for
 * accountd's word), not known at all.
 */

ngx_uint_t
ngx_http_llm_gateway_budget_unpriced(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *model)
{
    ngx_uint_t                         no;
    ngx_http_llm_gateway_zone_t       *zone;
    ngx_http_llm_gateway_price_t      *price;
    ngx_http_llm_gateway_loc_conf_t   *llcf;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);
    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    if (!ctx->tier->unpriced_refuse || lmcf->journal_data == NULL
        || llcf->shm_zone == NULL)
    {
        return 0;
    }

    zone = llcf->shm_zone->data;

    ngx_shmtx_lock(&zone->shpool->mutex);

    price = ngx_http_llm_gateway_price(zone->sh, model->data, model->len, 0);

    if (price == NULL) {
        no = ctx->inspected;

    } else {
        no = (price->p[LLM_LEASE_IN] < 0 || price->p[LLM_LEASE_OUT] < 0);
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    return no;
}
