
/*
 * The tenant zone: its shared memory, each tenant's node (lookup,
 * creation, expiry of the idle ones), the counters the metrics read, and
 * the walk over every zone of the configuration.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_zone.h"
#include "ngx_http_llm_gateway_clock.h"


static ngx_uint_t ngx_http_llm_gateway_expire(
    ngx_http_llm_gateway_shctx_t *sh, ngx_slab_pool_t *shpool, ngx_uint_t n);
static void ngx_http_llm_gateway_rbtree_insert_value(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel);


/*
 * Finds the tenant's node, creating it with a full bucket.  The caller
 * holds the zone's lock.  NULL if the zone is full even after expiry.
 */

ngx_http_llm_gateway_node_t *
ngx_http_llm_gateway_zone_lookup(ngx_http_llm_gateway_zone_t *zone,
    int64_t tenant_id, ngx_uint_t create)
{
    ngx_rbtree_key_t              hash;
    ngx_rbtree_node_t            *node, *sentinel;
    ngx_http_llm_gateway_node_t  *ln;

    hash = (ngx_rbtree_key_t) tenant_id;

    node = zone->sh->rbtree.root;
    sentinel = zone->sh->rbtree.sentinel;

    while (node != sentinel) {

        if (hash != node->key) {
            node = (hash < node->key) ? node->left : node->right;
            continue;
        }

        ln = (ngx_http_llm_gateway_node_t *) node;

        if (ln->tenant_id == tenant_id) {
            ngx_queue_remove(&ln->queue);
            ngx_queue_insert_head(&zone->sh->queue, &ln->queue);
            return ln;
        }

        node = (tenant_id < ln->tenant_id) ? node->left : node->right;
    }

    if (!create) {
        return NULL;
    }

    ln = ngx_http_llm_gateway_zone_alloc(zone,
                                         sizeof(ngx_http_llm_gateway_node_t));
    if (ln == NULL) {
        return NULL;
    }

    ngx_memzero(ln, sizeof(ngx_http_llm_gateway_node_t));

    ln->node.key = hash;
    ln->tenant_id = tenant_id;

    /* the bucket is filled by the caller, who knows the tier */
    ln->state.tpm.last_ms = -1;

    ngx_rbtree_insert(&zone->sh->rbtree, &ln->node);
    ngx_queue_insert_head(&zone->sh->queue, &ln->queue);

    return ln;
}


/*
 * Memory in the zone, under its lock: when there is none, the least
 * recently used idle tenants make room, and the next 16 if a whole page
 * must be freed for a chunk of another size.
 */

void *
ngx_http_llm_gateway_zone_alloc(ngx_http_llm_gateway_zone_t *zone, size_t size)
{
    void        *p;
    ngx_uint_t   i;

    for (i = 0; i < 4; i++) {
        p = ngx_slab_alloc_locked(zone->shpool, size);

        if (p != NULL || !ngx_http_llm_gateway_expire(zone->sh, zone->shpool,
                                                      16))
        {
            return p;
        }
    }

    return NULL;
}


/*
 * Frees up to n least recently used tenants that hold nothing: no request
 * in flight, no reservation of their budget.  Their buckets are forgotten,
 * which can only give them more room, never less, and only after they were
 * idle the longest; so is what they had leased of a cap, which is then
 * never spent.  The most recent node is the caller's: it stays.
 */

static ngx_uint_t
ngx_http_llm_gateway_expire(ngx_http_llm_gateway_shctx_t *sh,
    ngx_slab_pool_t *shpool, ngx_uint_t n)
{
    ngx_uint_t                    freed;
    ngx_queue_t                  *q, *prev;
    ngx_http_llm_gateway_node_t  *ln;

    freed = 0;

    for (q = ngx_queue_last(&sh->queue);
         q != ngx_queue_sentinel(&sh->queue) && n;
         q = prev)
    {
        prev = ngx_queue_prev(q);

        ln = ngx_queue_data(q, ngx_http_llm_gateway_node_t, queue);

        if (ln->state.inflight || ln->budget_holds
            || q == ngx_queue_head(&sh->queue))
        {
            continue;
        }

        /* an active tenant's weight leaves the shares with it */
        llm_fair_leave(&sh->fair, &ln->fair,
                       ngx_http_llm_gateway_clock_now_ms());

        ngx_queue_remove(q);
        ngx_rbtree_delete(&sh->rbtree, &ln->node);
        ngx_slab_free_locked(shpool, ln);
        freed++;
        n--;
    }

    return freed;
}


static void
ngx_http_llm_gateway_rbtree_insert_value(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel)
{
    ngx_rbtree_node_t            **p;
    ngx_http_llm_gateway_node_t   *ln, *lnt;

    for ( ;; ) {

        if (node->key < temp->key) {
            p = &temp->left;

        } else if (node->key > temp->key) {
            p = &temp->right;

        } else { /* node->key == temp->key */

            ln = (ngx_http_llm_gateway_node_t *) node;
            lnt = (ngx_http_llm_gateway_node_t *) temp;

            p = (ln->tenant_id < lnt->tenant_id) ? &temp->left : &temp->right;
        }

        if (*p == sentinel) {
            break;
        }

        temp = *p;
    }

    *p = node;
    node->parent = temp;
    node->left = sentinel;
    node->right = sentinel;
    ngx_rbt_red(node);
}


ngx_int_t
ngx_http_llm_gateway_zone_init(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_http_llm_gateway_zone_t  *ozone = data;

    size_t                        len;
    llm_fair_conf_t               fair;
    ngx_http_llm_gateway_zone_t  *zone;

    zone = shm_zone->data;

    if (ozone) {
        zone->sh = ozone->sh;
        zone->shpool = ozone->shpool;
        goto version;
    }

    zone->shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        zone->sh = zone->shpool->data;
        goto version;
    }

    zone->sh = ngx_slab_alloc(zone->shpool,
                              sizeof(ngx_http_llm_gateway_shctx_t));
    if (zone->sh == NULL) {
        return NGX_ERROR;
    }

    zone->shpool->data = zone->sh;

    ngx_rbtree_init(&zone->sh->rbtree, &zone->sh->sentinel,
                    ngx_http_llm_gateway_rbtree_insert_value);

    ngx_queue_init(&zone->sh->queue);

    ngx_queue_init(&zone->sh->flights);

    zone->sh->version = NGX_HTTP_LLM_GATEWAY_ZONE_VERSION;

    ngx_memzero(&fair, sizeof(llm_fair_conf_t));
    fair.capacity = zone->capacity;
    fair.inflight = zone->inflight;
    llm_fair_init(&zone->sh->fair, &fair, ngx_http_llm_gateway_clock_now_ms());

    len = sizeof(" in llm_gateway_zone \"\"") + shm_zone->shm.name.len;

    zone->shpool->log_ctx = ngx_slab_alloc(zone->shpool, len);
    if (zone->shpool->log_ctx == NULL) {
        return NGX_ERROR;
    }

    ngx_sprintf(zone->shpool->log_ctx, " in llm_gateway_zone \"%V\"%Z",
                &shm_zone->shm.name);

    /* a full zone is handled: expiry, then a 503 */
    zone->shpool->log_nomem = 0;

    return NGX_OK;

version:

    /* a reload into a module built with another layout cannot reuse it */
    if (zone->sh->version != NGX_HTTP_LLM_GATEWAY_ZONE_VERSION) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "llm_gateway_zone \"%V\" was made by another version "
                      "of the module: restart nginx, or rename or resize "
                      "the zone", &shm_zone->shm.name);
        return NGX_ERROR;
    }

    /* a new capacity= or inflight=: the new workers apply it (reconf) */

    return NGX_OK;
}


/*
 * A shared memory zone of its own, from "zone=name:size", with the tag
 * that tells whose it is; NULL after saying what is wrong with it.
 */

ngx_shm_zone_t *
ngx_http_llm_gateway_zone_add(ngx_conf_t *cf, ngx_str_t *value, void *tag)
{
    u_char          *p;
    ssize_t          size;
    ngx_str_t        name, s;
    ngx_shm_zone_t  *shm_zone;

    if (ngx_strncmp(value->data, "zone=", 5) != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\", expected "
                           "\"zone=name:size\"", value);
        return NULL;
    }

    name.data = value->data + 5;

    p = (u_char *) ngx_strchr(name.data, ':');

    if (p == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid zone size \"%V\"", value);
        return NULL;
    }

    name.len = p - name.data;

    s.data = p + 1;
    s.len = value->data + value->len - s.data;

    size = ngx_parse_size(&s);

    if (size == NGX_ERROR || name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid zone size \"%V\"", value);
        return NULL;
    }

    if (size < (ssize_t) (8 * ngx_pagesize)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "zone \"%V\" is too small", value);
        return NULL;
    }

    shm_zone = ngx_shared_memory_add(cf, &name, size, tag);
    if (shm_zone == NULL) {
        return NULL;
    }

    if (shm_zone->data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "duplicate zone \"%V\"",
                           &name);
        return NULL;
    }

    return shm_zone;
}


/* the llm_gateway_zone zones of the cycle, one a call, then NULL */

ngx_http_llm_gateway_zone_t *
ngx_http_llm_gateway_zone_next(ngx_http_llm_gateway_main_conf_t *lmcf,
    ngx_list_part_t **part, ngx_uint_t *i)
{
    ngx_shm_zone_t               *shm_zone;
    ngx_http_llm_gateway_zone_t  *zone;

    for ( ;; ) {

        if (*i >= (*part)->nelts) {
            if ((*part)->next == NULL) {
                return NULL;
            }

            *part = (*part)->next;
            *i = 0;
            continue;
        }

        shm_zone = (ngx_shm_zone_t *) (*part)->elts + (*i)++;

        if (shm_zone->tag != &ngx_http_llm_gateway_module
            || shm_zone == lmcf->journal)
        {
            continue;
        }

        zone = shm_zone->data;

        if (zone != NULL && zone->sh != NULL) {
            return zone;
        }
    }
}


/* a key's tenant and tier, as the labels name it; under the zone's lock */

void
ngx_http_llm_gateway_zone_name_node(ngx_http_llm_gateway_node_t *node,
    ngx_http_llm_gateway_key_t *key)
{
    size_t  len;

    len = ngx_min(key->tenant.len, LLM_KEY_TENANT_MAX);

    if (node->name_len != len
        || ngx_memcmp(node->name, key->tenant.data, len) != 0)
    {
        ngx_memcpy(node->name, key->tenant.data, len);
        node->name_len = (u_char) len;
    }

    len = ngx_min(key->tier.len, LLM_KEY_TIER_MAX);

    if (node->tier_len != len
        || ngx_memcmp(node->tier, key->tier.data, len) != 0)
    {
        ngx_memcpy(node->tier, key->tier.data, len);
        node->tier_len = (u_char) len;
    }
}


/*
 * A request ended: its status and what it used, under the zone's lock.
 * The cost only where the gateway knows the model's prices (0 otherwise):
 * those of a tenant with a spend cap, leased with them.  llm.usage has
 * every one.
 */

void
ngx_http_llm_gateway_zone_count(ngx_http_llm_gateway_node_t *node,
    ngx_uint_t status, llm_settle_t *st, int64_t cost)
{
    ngx_http_llm_gateway_stats_t  *s;

    s = &node->stats;

    if (status >= 100 && status < 600) {
        s->requests[status / 100 - 1]++;
    }

    if (st == NULL) {
        return;
    }

    s->input_tokens += st->input_tokens;
    s->output_tokens += st->output_tokens;
    s->cached_tokens += st->cached_input_tokens;

    if (st->flags & LLM_REC_F_BOUND) {
        s->over_bound++;
    }

    if (cost > 0) {
        s->cost += cost;
    }
}


/* a request of a known tenant that was not admitted, in the log phase */

void
ngx_http_llm_gateway_zone_count_refused(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_uint_t                        status;
    ngx_http_request_t               *r;
    ngx_http_llm_gateway_node_t      *node;
    ngx_http_llm_gateway_zone_t      *zone;
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    if (ctx->admitted || ctx->counted || ctx->key == NULL) {
        return;
    }

    ctx->counted = 1;

    r = ctx->request;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    if (llcf->shm_zone == NULL) {
        return;
    }

    zone = llcf->shm_zone->data;
    status = r->err_status ? r->err_status : r->headers_out.status;

    ngx_shmtx_lock(&zone->shpool->mutex);

    node = ngx_http_llm_gateway_zone_lookup(zone, ctx->key->tenant_id, 1);

    if (node != NULL) {
        ngx_http_llm_gateway_zone_name_node(node, ctx->key);
        ngx_http_llm_gateway_zone_count(node, status, NULL, 0);

        if (ctx->rejected_by != ngx_http_llm_gateway_by_none) {
            node->stats.rejected[ctx->rejected_by]++;
        }
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);
}


