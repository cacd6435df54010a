
/*
 * The first gate: the API key, from "Authorization: Bearer", "x-api-key"
 * (Anthropic clients) or "api-key" (Azure clients), hashed with HMAC-SHA256
 * under the server-side secret and looked up in the snapshot's sorted
 * array.  Every refusal has the same body, so that it tells an attacker
 * nothing; nothing of a key is ever logged, and the key headers never
 * reach the upstream, whose credential the location sets.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_auth.h"
#include "ngx_http_llm_gateway_clock.h"
#include "ngx_http_llm_gateway_keys.h"
#include "ngx_http_llm_gateway_reply.h"
#include "ngx_http_llm_gateway_request.h"
#include "ngx_http_llm_gateway_zone.h"


/* a client header kept from the upstream: where it is, and its name */
typedef struct {
    ngx_table_elt_t             *header;
    ngx_str_t                    key;
    u_char                      *lowcase_key;
    ngx_uint_t                   hash;
} ngx_http_llm_gateway_dropped_t;


static ngx_int_t ngx_http_llm_gateway_get_key(ngx_http_request_t *r,
    ngx_str_t *key);
static void ngx_http_llm_gateway_hide_keys(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_gateway_auth_bad_keys(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_uint_t failed);
static void ngx_http_llm_gateway_locked(ngx_http_llm_gateway_ctx_t *ctx,
    int64_t left);
static ngx_int_t ngx_http_llm_gateway_addr_key(ngx_http_request_t *r,
    ngx_uint_t prefix6, u_char *addr, size_t *len);
static ngx_http_llm_gateway_addr_t *ngx_http_llm_gateway_addr(
    ngx_http_llm_gateway_addrs_t *addrs, u_char *addr, size_t len,
    ngx_uint_t create);
static void ngx_http_llm_gateway_addr_free(ngx_http_llm_gateway_addrs_t *addrs,
    ngx_http_llm_gateway_addr_t *a);
static void ngx_http_llm_gateway_addr_expire(
    ngx_http_llm_gateway_addrs_t *addrs, int64_t now, ngx_msec_t window,
    ngx_uint_t n);
static ngx_int_t ngx_http_llm_gateway_addrs_init(ngx_shm_zone_t *shm_zone,
    void *data);
static void ngx_http_llm_gateway_addr_rbtree_insert_value(
    ngx_rbtree_node_t *temp, ngx_rbtree_node_t *node,
    ngx_rbtree_node_t *sentinel);
static ngx_uint_t ngx_http_llm_gateway_key_header(ngx_str_t *key);
static ngx_int_t ngx_http_llm_gateway_mac(
    ngx_http_llm_gateway_main_conf_t *lmcf, u_char *key, size_t len,
    u_char *hash);
static void ngx_http_llm_gateway_mac_free(void *data);


/* the bad-key stores' zones, apart from the tenant zones */
static ngx_uint_t  ngx_http_llm_gateway_addrs_tag;


/* bumped whenever the layout of a bad-key store changes */
#define NGX_HTTP_LLM_GATEWAY_ADDRS_VERSION  1


/*
 * The key's HMAC, with a context this worker keys once (llm_key_mac):
 * it goes with the cycle whose secret it holds.
 */

static ngx_int_t
ngx_http_llm_gateway_mac(ngx_http_llm_gateway_main_conf_t *lmcf,
    u_char *key, size_t len, u_char *hash)
{
    ngx_pool_cleanup_t  *cln;

    if (lmcf->mac == NULL) {
        cln = ngx_pool_cleanup_add(ngx_cycle->pool, 0);
        if (cln == NULL) {
            return NGX_ERROR;
        }

        lmcf->mac = llm_key_mac_new(lmcf->secret, lmcf->secret_len);
        if (lmcf->mac == NULL) {
            ngx_log_error(NGX_LOG_ALERT, ngx_cycle->log, 0,
                          "llm gateway: HMAC-SHA256 is not available");
            return NGX_ERROR;
        }

        cln->handler = ngx_http_llm_gateway_mac_free;
        cln->data = lmcf->mac;
    }

    return llm_key_mac(lmcf->mac, (char *) key, len, hash) == 0 ? NGX_OK
                                                               : NGX_ERROR;
}


static void
ngx_http_llm_gateway_mac_free(void *data)
{
    llm_key_mac_free(data);
}


ngx_int_t
ngx_http_llm_gateway_auth(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char                             hash[LLM_KEY_HASH_LEN];
    ngx_int_t                          rc, locked;
    ngx_str_t                          key;
    ngx_http_llm_gateway_key_t        *k;
    ngx_http_llm_gateway_table_t      *t;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    t = ngx_http_llm_gateway_keys_table(lmcf);

    /*
     * An address that sent too many bad keys gets no lookup, but for a
     * few a second: a valid key behind the same address (a NAT, a proxy)
     * is still served, and the HMACs an attacker costs stay bounded.
     */
    locked = ngx_http_llm_gateway_auth_bad_keys(r, ctx, 0);

    if (locked == NGX_DECLINED) {
        ngx_http_llm_gateway_hide_keys(r);
        return NGX_DECLINED;
    }

    k = NULL;

    /* a malformed key (its checksum) costs no HMAC and no lookup */
    if (ngx_http_llm_gateway_get_key(r, &key) == NGX_OK
        && lmcf->secret_len
        && llm_key_well_formed((char *) key.data, key.len)
        && ngx_http_llm_gateway_mac(lmcf, key.data, key.len, hash) == NGX_OK)
    {
        k = ngx_http_llm_gateway_keys_find(t, hash);
        ngx_explicit_memzero(hash, sizeof(hash));
    }

    ngx_http_llm_gateway_hide_keys(r);

    /* expired keys, rotated ones past their grace, stop by themselves */
    if (k == NULL || (k->expires && ngx_time() >= k->expires)) {
        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_UNAUTHORIZED,
                                          "invalid_request_error",
                                          "invalid_api_key", NULL,
                                          "Invalid API key.");
        (void) ngx_http_llm_gateway_auth_bad_keys(r, ctx, 1);

        if (locked == NGX_AGAIN) {
            ngx_http_llm_gateway_locked(ctx, ctx->retry_after_ms);
        }

        rc = NGX_DECLINED;

    } else {
        ctx->key = k;
        ctx->table = t;
        t->refs++;
        rc = NGX_OK;
    }

    return rc;
}


/*
 * Bad keys per client address, in the location's store of them: past
 * llm_gateway_bad_keys within the window, 429 until the window ends.
 * failed = 0 checks: NGX_OK, not locked; NGX_AGAIN, locked, but one of
 * the few keys a second it may still have looked up; NGX_DECLINED,
 * refused.  failed = 1 counts one more.  An address the store has no
 * room for is not counted: never refused for it.
 */

static ngx_int_t
ngx_http_llm_gateway_auth_bad_keys(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_uint_t failed)
{
    u_char                            addr[16];
    size_t                            len;
    int64_t                           now, left;
    ngx_int_t                         rc;
    ngx_http_llm_gateway_addr_t      *a;
    ngx_http_llm_gateway_addrs_t     *addrs;
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    if (llcf->bad_keys == 0
        || llcf->bad_keys_store == NULL
        || ngx_http_llm_gateway_addr_key(r, llcf->bad_keys_prefix6, addr,
                                         &len)
           != NGX_OK)
    {
        return NGX_OK;
    }

    addrs = llcf->bad_keys_store->data;
    now = ngx_http_llm_gateway_clock_now_ms();
    left = 0;
    rc = NGX_OK;

    ngx_shmtx_lock(&addrs->shpool->mutex);

    /* a few stale addresses go on every request, so that few are evicted */
    ngx_http_llm_gateway_addr_expire(addrs, now, llcf->bad_keys_window,
                                     failed ? 2 : 1);

    a = ngx_http_llm_gateway_addr(addrs, addr, len, failed);

    if (a != NULL) {
        if (now - a->start_ms >= (int64_t) llcf->bad_keys_window) {
            a->start_ms = now;
            a->failures = 0;
        }

        a->failures += failed;

        if (a->failures >= llcf->bad_keys) {
            left = a->start_ms + llcf->bad_keys_window - now;
        }

        if (!failed && left) {
            rc = NGX_DECLINED;

            if (a->check_s != now / 1000) {
                a->check_s = now / 1000;
                a->checks = 0;
            }

            if (a->checks < llcf->bad_keys_checks) {
                a->checks++;
                rc = NGX_AGAIN;
            }
        }
    }

    ngx_shmtx_unlock(&addrs->shpool->mutex);

    if (failed) {
        /* what the failure found, for a locked address's refusal */
        ctx->retry_after_ms = left;
        return NGX_OK;
    }

    if (rc == NGX_DECLINED) {
        ngx_http_llm_gateway_locked(ctx, left);
    }

    return rc;
}


static void
ngx_http_llm_gateway_locked(ngx_http_llm_gateway_ctx_t *ctx, int64_t left)
{
    if (left <= 0) {
        ctx->retry_after_ms = 0;
        return;
    }

    ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                      "invalid_request_error",
                                      "too_many_bad_keys",
                                      NULL,
                                      "Too many requests with invalid API "
                                      "keys from this address.");
    ctx->retry_after = llm_bucket_seconds(left);
    ctx->retry_after_ms = left;
}


/*
 * The client's address as the bad keys and the log lines count it: an
 * IPv4 address (an IPv4-mapped one too), or an IPv6 address cut to its
 * first prefix6 bits, since one host owns a whole /64.
 */

static ngx_int_t
ngx_http_llm_gateway_addr_key(ngx_http_request_t *r, ngx_uint_t prefix6,
    u_char *addr, size_t *len)
{
    struct sockaddr_in   *sin;
#if (NGX_HAVE_INET6)
    u_char               *p;
    ngx_uint_t            n;
    struct sockaddr_in6  *sin6;
#endif

    switch (r->connection->sockaddr->sa_family) {

    case AF_INET:
        sin = (struct sockaddr_in *) r->connection->sockaddr;
        ngx_memcpy(addr, &sin->sin_addr, 4);
        *len = 4;
        return NGX_OK;

#if (NGX_HAVE_INET6)
    case AF_INET6:
        sin6 = (struct sockaddr_in6 *) r->connection->sockaddr;
        p = sin6->sin6_addr.s6_addr;

        if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
            ngx_memcpy(addr, p + 12, 4);
            *len = 4;
            return NGX_OK;
        }

        n = prefix6 / 8;

        ngx_memcpy(addr, p, n);
        ngx_memzero(addr + n, 16 - n);

        if (prefix6 % 8) {
            addr[n] = p[n] & (u_char) (0xff << (8 - prefix6 % 8));
        }

        *len = 16;
        return NGX_OK;
#endif

    default: /* a unix socket has no address to hold to account */
        return NGX_DECLINED;
    }
}


/*
 * A refusal's log line, at most llm_gateway_reject_log_rate a second for
 * a client address and for a tenant: a flood of refusals is a flood of
 * requests, not of log lines.  The lines left out are counted
 * (llmgw_log_suppressed_total).  1: log it.
 */

ngx_uint_t
ngx_http_llm_gateway_auth_log_allowed(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char                            addr[16];
    size_t                            len;
    int64_t                           now, sec;
    ngx_uint_t                        ok, found;
    ngx_http_llm_gateway_addr_t      *a;
    ngx_http_llm_gateway_node_t      *node;
    ngx_http_llm_gateway_zone_t      *zone;
    ngx_http_llm_gateway_addrs_t     *addrs;
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    if (llcf->shm_zone == NULL) {
        return 1;
    }

    zone = llcf->shm_zone->data;
    now = ngx_http_llm_gateway_clock_now_ms();
    sec = now / 1000;
    ok = 1;
    found = 0;

    /*
     * A request without a tenant by its address, if the address has an
     * entry (a bad key made it); else with every other such address: a
     * refusal never makes an entry.
     */
    if (ctx->key == NULL && llcf->bad_keys_store
        && ngx_http_llm_gateway_addr_key(r, llcf->bad_keys_prefix6, addr,
                                         &len)
           == NGX_OK)
    {
        addrs = llcf->bad_keys_store->data;

        ngx_shmtx_lock(&addrs->shpool->mutex);

        a = ngx_http_llm_gateway_addr(addrs, addr, len, 0);

        if (a != NULL) {
            found = 1;

            if (a->log_s != sec) {
                a->log_s = sec;
                a->logs = 0;
            }

            if (a->logs >= llcf->reject_log_rate) {
                ok = 0;

            } else {
                a->logs++;
            }
        }

        ngx_shmtx_unlock(&addrs->shpool->mutex);
    }

    ngx_shmtx_lock(&zone->shpool->mutex);

    if (ctx->key) {
        /* as the refusal's count will (zone.c) */
        node = ngx_http_llm_gateway_zone_lookup(zone, ctx->key->tenant_id, 1);

        if (node != NULL) {
            ngx_http_llm_gateway_zone_name_node(node, ctx->key);

            if (node->log_s != sec) {
                node->log_s = sec;
                node->logs = 0;
            }

            if (node->logs >= llcf->reject_log_rate) {
                zone->sh->log_suppressed[1]++;
                ok = 0;

            } else {
                node->logs++;
            }
        }

    } else if (!found) {
        if (zone->sh->log_s != sec) {
            zone->sh->log_s = sec;
            zone->sh->logs = 0;
        }

        if (zone->sh->logs >= llcf->reject_log_rate) {
            zone->sh->log_suppressed[0]++;
            ok = 0;

        } else {
            zone->sh->logs++;
        }

    } else if (!ok) {
        zone->sh->log_suppressed[0]++;
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    return ok;
}


static ngx_http_llm_gateway_addr_t *
ngx_http_llm_gateway_addr(ngx_http_llm_gateway_addrs_t *addrs, u_char *addr,
    size_t len, ngx_uint_t create)
{
    uint32_t                          hash;
    ngx_int_t                         rc;
    ngx_uint_t                        n;
    ngx_queue_t                      *q;
    ngx_rbtree_node_t                *node, *sentinel;
    ngx_http_llm_gateway_addr_t      *a;
    ngx_http_llm_gateway_addrs_sh_t  *sh;

    sh = addrs->sh;
    hash = ngx_crc32_short(addr, len);

    node = sh->rbtree.root;
    sentinel = sh->rbtree.sentinel;

    while (node != sentinel) {

        if (hash != node->key) {
            node = (hash < node->key) ? node->left : node->right;
            continue;
        }

        a = (ngx_http_llm_gateway_addr_t *) node;

        rc = ngx_memn2cmp(addr, a->addr, len, a->len);

        if (rc == 0) {
            ngx_queue_remove(&a->queue);
            ngx_queue_insert_head(&sh->queue, &a->queue);
            return a;
        }

        node = (rc < 0) ? node->left : node->right;
    }

    if (!create) {
        return NULL;
    }

    a = ngx_slab_alloc_locked(addrs->shpool,
                              sizeof(ngx_http_llm_gateway_addr_t));

    /*
     * A full store gives up the addresses least recently seen: many
     * addresses make the limit count less precisely, and never take the
     * room of anything else.  Entries are all of one size: one freed
     * makes room for one.
     */
    for (n = 0; a == NULL && n < 2; n++) {

        if (ngx_queue_empty(&sh->queue)) {
            return NULL;
        }

        q = ngx_queue_last(&sh->queue);
        ngx_http_llm_gateway_addr_free(addrs,
                     ngx_queue_data(q, ngx_http_llm_gateway_addr_t, queue));
        sh->evictions++;

        a = ngx_slab_alloc_locked(addrs->shpool,
                                  sizeof(ngx_http_llm_gateway_addr_t));
    }

    if (a == NULL) {
        return NULL;
    }

    ngx_memzero(a, sizeof(ngx_http_llm_gateway_addr_t));

    a->node.key = hash;
    a->len = (u_short) len;
    ngx_memcpy(a->addr, addr, len);

    ngx_rbtree_insert(&sh->rbtree, &a->node);
    ngx_queue_insert_head(&sh->queue, &a->queue);
    sh->count++;

    return a;
}


static void
ngx_http_llm_gateway_addr_free(ngx_http_llm_gateway_addrs_t *addrs,
    ngx_http_llm_gateway_addr_t *a)
{
    ngx_queue_remove(&a->queue);
    ngx_rbtree_delete(&addrs->sh->rbtree, &a->node);
    ngx_slab_free_locked(addrs->shpool, a);
    addrs->sh->count--;
}


/* the least recently seen addresses whose window has passed go */

static void
ngx_http_llm_gateway_addr_expire(ngx_http_llm_gateway_addrs_t *addrs,
    int64_t now, ngx_msec_t window, ngx_uint_t n)
{
    ngx_queue_t                  *q;
    ngx_http_llm_gateway_addr_t  *a;

    while (n-- && !ngx_queue_empty(&addrs->sh->queue)) {
        q = ngx_queue_last(&addrs->sh->queue);
        a = ngx_queue_data(q, ngx_http_llm_gateway_addr_t, queue);

        if (now - a->start_ms < (int64_t) window) {
            return;
        }

        ngx_http_llm_gateway_addr_free(addrs, a);
    }
}


static void
ngx_http_llm_gateway_addr_rbtree_insert_value(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel)
{
    ngx_rbtree_node_t            **p;
    ngx_http_llm_gateway_addr_t   *a, *at;

    for ( ;; ) {

        if (node->key < temp->key) {
            p = &temp->left;

        } else if (node->key > temp->key) {
            p = &temp->right;

        } else { /* node->key == temp->key */

            a = (ngx_http_llm_gateway_addr_t *) node;
            at = (ngx_http_llm_gateway_addr_t *) temp;

            p = (ngx_memn2cmp(a->addr, at->addr, a->len, at->len) < 0)
                ? &temp->left : &temp->right;
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


/*
 * A bad-key store: its zone, or the one of that name another location
 * made (llm_gateway_bad_keys zone=name:size names it in each of them).
 */

ngx_shm_zone_t *
ngx_http_llm_gateway_auth_addrs_add(ngx_conf_t *cf, ngx_str_t *name,
    size_t size)
{
    ngx_shm_zone_t                *shm_zone;
    ngx_http_llm_gateway_addrs_t  *addrs;

    shm_zone = ngx_shared_memory_add(cf, name, size,
                                     &ngx_http_llm_gateway_addrs_tag);
    if (shm_zone == NULL) {
        return NULL;
    }

    if (shm_zone->data) {
        return shm_zone;
    }

    addrs = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_gateway_addrs_t));
    if (addrs == NULL) {
        return NULL;
    }

    addrs->name = shm_zone->shm.name;

    shm_zone->init = ngx_http_llm_gateway_addrs_init;
    shm_zone->data = addrs;

    return shm_zone;
}


static ngx_int_t
ngx_http_llm_gateway_addrs_init(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_http_llm_gateway_addrs_t  *oaddrs = data;

    size_t                         len;
    ngx_http_llm_gateway_addrs_t  *addrs;

    addrs = shm_zone->data;

    if (oaddrs) {
        addrs->sh = oaddrs->sh;
        addrs->shpool = oaddrs->shpool;
        goto version;
    }

    addrs->shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        addrs->sh = addrs->shpool->data;
        goto version;
    }

    addrs->sh = ngx_slab_alloc(addrs->shpool,
                               sizeof(ngx_http_llm_gateway_addrs_sh_t));
    if (addrs->sh == NULL) {
        return NGX_ERROR;
    }

    ngx_memzero(addrs->sh, sizeof(ngx_http_llm_gateway_addrs_sh_t));

    addrs->shpool->data = addrs->sh;
    addrs->sh->version = NGX_HTTP_LLM_GATEWAY_ADDRS_VERSION;

    ngx_rbtree_init(&addrs->sh->rbtree, &addrs->sh->sentinel,
                    ngx_http_llm_gateway_addr_rbtree_insert_value);

    ngx_queue_init(&addrs->sh->queue);

    len = sizeof(" in llm_gateway_bad_keys zone \"\"") + shm_zone->shm.name.len;

    addrs->shpool->log_ctx = ngx_slab_alloc(addrs->shpool, len);
    if (addrs->shpool->log_ctx == NULL) {
        return NGX_ERROR;
    }

    ngx_sprintf(addrs->shpool->log_ctx,
                " in llm_gateway_bad_keys zone \"%V\"%Z", &shm_zone->shm.name);

    /* a full store is handled: eviction */
    addrs->shpool->log_nomem = 0;

    return NGX_OK;

version:

    if (addrs->sh->version != NGX_HTTP_LLM_GATEWAY_ADDRS_VERSION) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "llm_gateway_bad_keys zone \"%V\" was made by another "
                      "version of the module: restart nginx, or rename or "
                      "resize the zone", &shm_zone->shm.name);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* the bad-key stores of the cycle, one a call, then NULL */

ngx_http_llm_gateway_addrs_t *
ngx_http_llm_gateway_auth_addrs_next(ngx_list_part_t **part, ngx_uint_t *i)
{
    ngx_shm_zone_t                *shm_zone;
    ngx_http_llm_gateway_addrs_t  *addrs;

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

        if (shm_zone->tag != &ngx_http_llm_gateway_addrs_tag) {
            continue;
        }

        addrs = shm_zone->data;

        if (addrs != NULL && addrs->sh != NULL) {
            return addrs;
        }
    }
}


static ngx_str_t  ngx_http_llm_gateway_key_headers[] = {
    ngx_string("x-api-key"),
    ngx_string("api-key"),
    ngx_null_string
};


static ngx_int_t
ngx_http_llm_gateway_get_key(ngx_http_request_t *r, ngx_str_t *key)
{
    ngx_str_t        *name;
    ngx_table_elt_t  *h;

    h = r->headers_in.authorization;

    if (h != NULL) {
        if (h->value.len <= sizeof("Bearer ") - 1
            || ngx_strncasecmp(h->value.data, (u_char *) "Bearer ",
                               sizeof("Bearer ") - 1)
               != 0)
        {
            return NGX_DECLINED;
        }

        key->data = h->value.data + sizeof("Bearer ") - 1;
        key->len = h->value.len - (sizeof("Bearer ") - 1);

        while (key->len && *key->data == ' ') {
            key->data++;
            key->len--;
        }

        return key->len ? NGX_OK : NGX_DECLINED;
    }

    for (name = ngx_http_llm_gateway_key_headers; name->len; name++) {
        h = ngx_http_llm_gateway_request_find_header(r, name);

        if (h != NULL && h->value.len) {
            *key = h->value;
            return NGX_OK;
        }
    }

    return NGX_DECLINED;
}


/*
 * The client's key must not travel on: each key header becomes an empty
 * "TE", a name the proxy module always drops from client headers (it sets
 * its own), and nobody reads it again.  The element stays where it is, so
 * that the pointers r->headers_in keeps into the list stay right.
 */

static void
ngx_http_llm_gateway_hide_keys(ngx_http_request_t *r)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    part = &r->headers_in.headers.part;
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

        if (!ngx_http_llm_gateway_key_header(&h[i].key)) {
            continue;
        }

        ngx_str_set(&h[i].key, "TE");
        ngx_str_set(&h[i].value, "");
        h[i].lowcase_key = (u_char *) "te";
        h[i].hash = ngx_hash_key(h[i].lowcase_key, 2);
    }

    r->headers_in.authorization = NULL;
}


/*
 * The client's request headers the upstream gets: these, those of
 * llm_gateway_pass_headers, and what the proxy sets itself (host,
 * connection, content-length, transfer-encoding).  Any other could choose
 * for the client what the operator's provider account does or bills
 * (OpenAI-Organization, OpenAI-Project, a mock's controls; a beta such as
 * Anthropic's context-1m changes the price of a token: an operator who
 * offers betas passes anthropic-beta or openai-beta).
 */

static ngx_str_t  ngx_http_llm_gateway_passed[] = {
    ngx_string("content-type"),
    ngx_string("accept"),
    ngx_string("user-agent"),
    ngx_string("anthropic-version"),
    ngx_string("host"),
    ngx_string("connection"),
    ngx_string("content-length"),
    ngx_string("transfer-encoding"),
    ngx_null_string
};


static ngx_uint_t
ngx_http_llm_gateway_header_passed(ngx_table_elt_t *h, ngx_array_t *extra)
{
    size_t      len;
    ngx_str_t  *name;
    ngx_uint_t  i;

    for (name = ngx_http_llm_gateway_passed; name->len; name++) {
        if (h->key.len == name->len
            && ngx_strncmp(h->lowcase_key, name->data, name->len) == 0)
        {
            return 1;
        }
    }

    if (extra == NULL) {
        return 0;
    }

    name = extra->elts;

    for (i = 0; i < extra->nelts; i++) {
        len = name[i].len;

        if (name[i].data[len - 1] == '*') {
            if (h->key.len >= len - 1
                && ngx_strncmp(h->lowcase_key, name[i].data, len - 1) == 0)
            {
                return 1;
            }

            continue;
        }

        if (h->key.len == len
            && ngx_strncmp(h->lowcase_key, name[i].data, len) == 0)
        {
            return 1;
        }
    }

    return 0;
}


/*
 * As the key headers: each header not passed becomes a "TE", which the
 * proxy module always drops from client headers, in its place in the
 * list.  Its value stays, so that what r->headers_in points to (a
 * cookie, X-Forwarded-For for $proxy_add_x_forwarded_for) is unchanged,
 * and its name is saved: once the upstream has the request (the header
 * filter) it comes back, for the $http_ variables of the access log.
 * The operator's own proxy_set_header lines still go, whatever their
 * name.
 */

static ngx_uint_t
ngx_http_llm_gateway_auth_other_dialect(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_table_elt_t *h)
{
    /*
     * A translated request: Anthropic's headers go to Anthropic alone; so
     * does the version added for an earlier attempt's translation.
     */
    return (ctx->translated || ctx->version_added)
           && ctx->up_api != LLM_API_ANTHROPIC
           && h->key.len > sizeof("anthropic-") - 1
           && ngx_strncmp(h->lowcase_key, "anthropic-",
                          sizeof("anthropic-") - 1)
              == 0;
}


/*
 * A request translated for Anthropic's API needs the version header its
 * client did not send: the one the translation writes for.
 */

static ngx_int_t
ngx_http_llm_gateway_auth_anthropic_version(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_str_t         name = ngx_string("anthropic-version");
    ngx_table_elt_t  *h;

    if (!ctx->translated || ctx->up_api != LLM_API_ANTHROPIC
        || ngx_http_llm_gateway_request_find_header(r, &name) != NULL)
    {
        return NGX_OK;
    }

    h = ngx_list_push(&r->headers_in.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    ngx_str_set(&h->key, "anthropic-version");
    ngx_str_set(&h->value, "2023-06-01");
    h->lowcase_key = (u_char *) "anthropic-version";
    h->hash = ngx_hash_key(h->lowcase_key, h->key.len);

    ctx->version_added = 1;

    return NGX_OK;
}


ngx_int_t
ngx_http_llm_gateway_auth_pass_only(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_uint_t                        i;
    ngx_list_part_t                  *part;
    ngx_table_elt_t                  *h;
    ngx_http_llm_gateway_dropped_t   *saved;
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    if (ngx_http_llm_gateway_auth_anthropic_version(r, ctx) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ctx->dropped == NULL) {
        ctx->dropped = ngx_array_create(r->pool, 4,
                                    sizeof(ngx_http_llm_gateway_dropped_t));
        if (ctx->dropped == NULL) {
            return NGX_ERROR;
        }
    }

    part = &r->headers_in.headers.part;
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

        if (h[i].key.len == 0
            || (h[i].key.len == 2 && h[i].lowcase_key[0] == 't'
                && h[i].lowcase_key[1] == 'e')
            || (ngx_http_llm_gateway_header_passed(&h[i], llcf->pass_headers)
                && !ngx_http_llm_gateway_auth_other_dialect(ctx, &h[i])))
        {
            continue;
        }

        saved = ngx_array_push(ctx->dropped);
        if (saved == NULL) {
            return NGX_ERROR;
        }

        saved->header = &h[i];
        saved->key = h[i].key;
        saved->lowcase_key = h[i].lowcase_key;
        saved->hash = h[i].hash;

        ngx_str_set(&h[i].key, "TE");
        h[i].lowcase_key = (u_char *) "te";
        h[i].hash = ngx_hash_key(h[i].lowcase_key, 2);
    }

    return NGX_OK;
}


void
ngx_http_llm_gateway_auth_pass_restore(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_uint_t                       i;
    ngx_table_elt_t                 *h;
    ngx_http_llm_gateway_dropped_t  *saved;

    if (ctx->dropped == NULL) {
        return;
    }

    saved = ctx->dropped->elts;

    for (i = 0; i < ctx->dropped->nelts; i++) {
        h = saved[i].header;

        h->key = saved[i].key;
        h->lowcase_key = saved[i].lowcase_key;
        h->hash = saved[i].hash;
    }

    ctx->dropped->nelts = 0;
}


static ngx_uint_t
ngx_http_llm_gateway_key_header(ngx_str_t *key)
{
    ngx_str_t  *name;

    if (key->len == sizeof("authorization") - 1
        && ngx_strncasecmp(key->data, (u_char *) "authorization",
                           sizeof("authorization") - 1)
           == 0)
    {
        return 1;
    }

    for (name = ngx_http_llm_gateway_key_headers; name->len; name++) {
        if (key->len == name->len
            && ngx_strncasecmp(key->data, name->data, name->len) == 0)
        {
            return 1;
        }
    }

    return 0;
}


/* the key and its tier both let the request call model (len bytes) */

ngx_uint_t
ngx_http_llm_gateway_auth_model_allowed(ngx_http_llm_gateway_ctx_t *ctx,
    const char *model, size_t len)
{
    return llm_key_model_allowed((char *) ctx->key->models.data, model, len)
           && llm_key_model_allowed((char *) ctx->tier->models, model, len);
}
