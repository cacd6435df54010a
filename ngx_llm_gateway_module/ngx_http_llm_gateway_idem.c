
/*
 * ngx_http_llm_gateway_module: Idempotency-Key.
 *
 * A client that got no answer does not know whether its request ran; a
 * retry runs the expensive, non-deterministic generation again and pays
 * for it twice.  With an Idempotency-Key, the first request with a key
 * (per tenant) runs and its response, as the client got it, is kept in
 * shared memory; a request with the same key and the same body is then
 * served that response again, or, while the first still runs, joins it
 * and gets its bytes as they come.  Neither is admitted or recorded: the
 * work is billed once.  The same key with another body is refused.  Only
 * a whole 2xx response is replayed: a refusal or a failure is not a
 * result, and the next request with its key runs.
 *
 * A key belongs to its tenant, its location and its API, and look-ups
 * compare all of them and the key's bytes, not its hash alone: keys are
 * the clients', and forging crc32 collisions is easy.  A tenant holds at
 * most its share of the zone; room is made from results past retain and
 * from the tenant's own, never from another tenant's.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_idem.h"
#include "ngx_http_llm_gateway_clock.h"
#include "ngx_http_llm_gateway_ctx.h"
#include "ngx_http_llm_gateway_reply.h"
#include "ngx_http_llm_gateway_request.h"
#include "ngx_http_llm_gateway_zone.h"

#include <openssl/sha.h>


/* a joiner looks for the first request's new bytes this often (ms) */
#define NGX_HTTP_LLM_GATEWAY_IDEM_POLL     10

#define NGX_HTTP_LLM_GATEWAY_IDEM_KEY_MAX  255

/* a tenant's share of the zone unless per_tenant= says: a quarter */
#define NGX_HTTP_LLM_GATEWAY_IDEM_SHARE    4

/* the zone's layout, checked when a zone is reused */
#define NGX_HTTP_LLM_GATEWAY_IDEM_VERSION  2

/* the workers whose requests read one entry at once */
#define NGX_HTTP_LLM_GATEWAY_IDEM_READERS  8

/* a first request silent this long (ms): is its worker still there? */
#define NGX_HTTP_LLM_GATEWAY_IDEM_CHECK    1000

/* entries the sweep looks at for each it may free */
#define NGX_HTTP_LLM_GATEWAY_IDEM_LOOK     4


typedef struct ngx_http_llm_gateway_piece_s  ngx_http_llm_gateway_piece_t;

struct ngx_http_llm_gateway_piece_s {
    ngx_http_llm_gateway_piece_t  *next;
    size_t                         len;
    u_char                         data[1];
};


/* a tenant with results kept: what they take of the zone */
typedef struct {
    ngx_rbtree_node_t              node;      /* key: tenant id */
    ngx_queue_t                    queue;     /* its entries, LRU */
    int64_t                        tenant_id;
    size_t                         held;      /* bytes, as the slab has them */
} ngx_http_llm_gateway_idem_tenant_t;


/*
 * The requests of one worker that read an entry: counted per worker, so
 * that those of a worker that died hold it no longer.
 */
typedef struct {
    ngx_pid_t                      pid;
    uint32_t                       n;
} ngx_http_llm_gateway_idem_reader_t;


/* a key's entry: the response as the first client got it */
typedef struct {
    ngx_rbtree_node_t              node;      /* key: crc32 ^ tenant id */
    ngx_queue_t                    queue;     /* done ones, by expires */
    ngx_queue_t                    tqueue;    /* its tenant's LRU */
    ngx_http_llm_gateway_idem_tenant_t  *tenant;
    int64_t                        tenant_id;
    int64_t                        expires;   /* wall ms; 0: running */
    int64_t                        touched;   /* wall ms: the first was
                                                 last known to run */
    ngx_pid_t                      owner;     /* the first's worker */
    u_char                         body_hash[SHA256_DIGEST_LENGTH];
    ngx_uint_t                     status;    /* 0: no header yet */
    ngx_http_llm_gateway_idem_reader_t
                                   readers[NGX_HTTP_LLM_GATEWAY_IDEM_READERS];
    size_t                         size;      /* bytes kept */
    size_t                         held;      /* its slab bytes, pieces too */
    u_char                         scope[SHA256_DIGEST_LENGTH];
    ngx_http_llm_gateway_piece_t  *first;
    ngx_http_llm_gateway_piece_t  *last;
    u_char                         type[64];  /* its Content-Type */
    u_char                         type_len;
    unsigned                       done:1;
    unsigned                       replayable:1;
    unsigned                       truncated:1;   /* above max_size */
    unsigned                       cut:1;     /* ends short of its end */
    u_short                        key_len;
    u_char                         key[1];
} ngx_http_llm_gateway_idem_t;


typedef struct {
    ngx_uint_t                     version;   /* of the layout, first */
    ngx_rbtree_t                   rbtree;
    ngx_rbtree_node_t              sentinel;
    ngx_queue_t                    queue;     /* done entries, by
                                                 expires, oldest last */
    ngx_rbtree_t                   tenants;
    ngx_rbtree_node_t              tenants_sentinel;
} ngx_http_llm_gateway_idem_sh_t;


typedef struct {
    ngx_http_llm_gateway_idem_sh_t  *sh;
    ngx_slab_pool_t                 *shpool;
    size_t                           share;     /* a tenant's, in bytes */
} ngx_http_llm_gateway_idem_zone_t;


static ngx_int_t ngx_http_llm_gateway_idem_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static ngx_int_t ngx_http_llm_gateway_idem_found(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_idem_zone_t *z,
    ngx_http_llm_gateway_idem_t *e, u_char *digest, int64_t now,
    ngx_pool_cleanup_t *cln);
static ngx_int_t ngx_http_llm_gateway_idem_create(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_idem_zone_t *z,
    ngx_str_t *key, uint32_t hash, u_char *digest, u_char *scope,
    int64_t now, ngx_pool_cleanup_t *cln);
static ngx_buf_t *ngx_http_llm_gateway_idem_copy(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_idem_t *e);
static void ngx_http_llm_gateway_idem_send(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_buf_t *b, ngx_uint_t end,
    ngx_uint_t cut, ngx_uint_t stream, const char *closing, const char *why);
static ngx_int_t ngx_http_llm_gateway_idem_scope(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, u_char *scope);
static ngx_http_llm_gateway_idem_t *ngx_http_llm_gateway_idem_find(
    ngx_http_llm_gateway_idem_zone_t *z, uint32_t hash, int64_t tenant_id,
    u_char *scope, ngx_str_t *key);
static ngx_int_t ngx_http_llm_gateway_idem_order(int64_t tenant_id,
    u_char *scope, u_char *key, size_t len, ngx_http_llm_gateway_idem_t *e);
static void ngx_http_llm_gateway_idem_rbtree_insert_value(
    ngx_rbtree_node_t *temp, ngx_rbtree_node_t *node,
    ngx_rbtree_node_t *sentinel);
static ngx_http_llm_gateway_idem_tenant_t *ngx_http_llm_gateway_idem_tenant(
    ngx_http_llm_gateway_idem_zone_t *z, int64_t tenant_id, int64_t now);
static void ngx_http_llm_gateway_idem_tenant_insert_value(
    ngx_rbtree_node_t *temp, ngx_rbtree_node_t *node,
    ngx_rbtree_node_t *sentinel);
static size_t ngx_http_llm_gateway_idem_cost(size_t size);
static void *ngx_http_llm_gateway_idem_alloc(
    ngx_http_llm_gateway_idem_zone_t *z,
    ngx_http_llm_gateway_idem_tenant_t *t, size_t size, int64_t now);
static ngx_int_t ngx_http_llm_gateway_idem_evict(
    ngx_http_llm_gateway_idem_zone_t *z,
    ngx_http_llm_gateway_idem_tenant_t *t);
static void ngx_http_llm_gateway_idem_free(
    ngx_http_llm_gateway_idem_zone_t *z, ngx_http_llm_gateway_idem_t *e);
static void ngx_http_llm_gateway_idem_forget(
    ngx_http_llm_gateway_idem_zone_t *z, ngx_http_llm_gateway_idem_t *e,
    ngx_http_llm_gateway_idem_tenant_t *keep);
static void ngx_http_llm_gateway_idem_expire(
    ngx_http_llm_gateway_idem_zone_t *z, int64_t now, ngx_uint_t n,
    ngx_http_llm_gateway_idem_tenant_t *keep);
static ngx_uint_t ngx_http_llm_gateway_idem_failed(
    ngx_http_llm_gateway_ctx_t *ctx, ngx_uint_t *cut);
static void ngx_http_llm_gateway_idem_finish(
    ngx_http_llm_gateway_idem_zone_t *z, ngx_http_llm_gateway_idem_t *e,
    ngx_uint_t replayable, int64_t now, ngx_msec_t retain);
static ngx_uint_t ngx_http_llm_gateway_idem_alive(
    ngx_http_llm_gateway_idem_zone_t *z, ngx_http_llm_gateway_idem_t *e,
    int64_t now, ngx_uint_t force);
static ngx_uint_t ngx_http_llm_gateway_idem_readers(
    ngx_http_llm_gateway_idem_t *e);
static ngx_int_t ngx_http_llm_gateway_idem_join(
    ngx_http_llm_gateway_idem_t *e);
static void ngx_http_llm_gateway_idem_leave(ngx_http_llm_gateway_idem_t *e);
static void ngx_http_llm_gateway_idem_step(ngx_http_request_t *r);
static const char *ngx_http_llm_gateway_idem_closing(
    ngx_http_llm_gateway_idem_t *e);
static ngx_chain_t *ngx_http_llm_gateway_idem_error_event(
    ngx_http_request_t *r, ngx_http_llm_gateway_ctx_t *ctx,
    const char *closing, const char *why);
static void ngx_http_llm_gateway_idem_release(void *data);


static ngx_uint_t  ngx_http_llm_gateway_idem_tag;


/*
 * llm_gateway_idempotency zone=name:size [retain=time] [max_size=size]
 *     [per_tenant=size];
 */

char *
ngx_http_llm_gateway_idem_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_llm_gateway_main_conf_t *lmcf = conf;

    size_t                             share;
    ngx_str_t                         *value, s;
    ngx_uint_t                         i;
    ngx_msec_t                         ms;
    ngx_shm_zone_t                    *shm_zone;
    ngx_http_llm_gateway_idem_zone_t  *z;

    if (lmcf->idem_zone) {
        return "is duplicate";
    }

    value = cf->args->elts;

    lmcf->idem_retain = 86400000;
    lmcf->idem_max = 1024 * 1024;

    shm_zone = NULL;
    share = 0;

    for (i = 1; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "zone=", 5) == 0) {
            shm_zone = ngx_http_llm_gateway_zone_add(cf, &value[i],
                                               &ngx_http_llm_gateway_idem_tag);
            if (shm_zone == NULL) {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "retain=", 7) == 0) {
            s.data = value[i].data + 7;
            s.len = value[i].len - 7;

            ms = ngx_parse_time(&s, 0);
            if (ms == (ngx_msec_t) NGX_ERROR || ms == 0) {
                goto invalid;
            }

            lmcf->idem_retain = ms;
            continue;
        }

        if (ngx_strncmp(value[i].data, "max_size=", 9) == 0) {
            s.data = value[i].data + 9;
            s.len = value[i].len - 9;

            lmcf->idem_max = ngx_parse_size(&s);
            if (lmcf->idem_max == (size_t) NGX_ERROR) {
                goto invalid;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "per_tenant=", 11) == 0) {
            s.data = value[i].data + 11;
            s.len = value[i].len - 11;

            share = ngx_parse_size(&s);
            if (share == (size_t) NGX_ERROR || share == 0) {
                goto invalid;
            }

            continue;
        }

        goto invalid;
    }

    if (shm_zone == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\" must have \"zone\" parameter", &cmd->name);
        return NGX_CONF_ERROR;
    }

    z = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_gateway_idem_zone_t));
    if (z == NULL) {
        return NGX_CONF_ERROR;
    }

    z->share = share ? share
                     : shm_zone->shm.size / NGX_HTTP_LLM_GATEWAY_IDEM_SHARE;

    shm_zone->init = ngx_http_llm_gateway_idem_init_zone;
    shm_zone->data = z;
    lmcf->idem_zone = shm_zone;

    return NGX_CONF_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid parameter \"%V\"",
                       &value[i]);
    return NGX_CONF_ERROR;
}


static ngx_int_t
ngx_http_llm_gateway_idem_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_http_llm_gateway_idem_zone_t  *oz = data;

    ngx_http_llm_gateway_idem_zone_t  *z;

    z = shm_zone->data;

    if (oz) {
        z->sh = oz->sh;
        z->shpool = oz->shpool;
        goto version;
    }

    z->shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        z->sh = z->shpool->data;
        goto version;
    }

    z->sh = ngx_slab_alloc(z->shpool, sizeof(ngx_http_llm_gateway_idem_sh_t));
    if (z->sh == NULL) {
        return NGX_ERROR;
    }

    z->shpool->data = z->sh;
    z->sh->version = NGX_HTTP_LLM_GATEWAY_IDEM_VERSION;

    ngx_rbtree_init(&z->sh->rbtree, &z->sh->sentinel,
                    ngx_http_llm_gateway_idem_rbtree_insert_value);
    ngx_queue_init(&z->sh->queue);
    ngx_rbtree_init(&z->sh->tenants, &z->sh->tenants_sentinel,
                    ngx_http_llm_gateway_idem_tenant_insert_value);

    z->shpool->log_nomem = 0;

    return NGX_OK;

version:

    /* a reload into a module built with another layout cannot reuse it */
    if (z->sh->version != NGX_HTTP_LLM_GATEWAY_IDEM_VERSION) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "llm_gateway_idempotency zone \"%V\" was made by "
                      "another version of the module: restart nginx, or "
                      "rename or resize the zone", &shm_zone->shm.name);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * After inspection, before admission.  NGX_OK: the request runs (the
 * first with its key, or one without a key); NGX_DONE: it is served from
 * the store, ctx->idem says which; NGX_DECLINED: refused, ctx says why.
 */

ngx_int_t
ngx_http_llm_gateway_idem_begin(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    int64_t                              now;
    uint32_t                             hash;
    ngx_int_t                            rc;
    ngx_str_t                            key;
    ngx_table_elt_t                     *h;
    ngx_pool_cleanup_t                  *cln;
    ngx_http_llm_gateway_idem_t         *e;
    ngx_http_llm_gateway_idem_zone_t    *z;
    ngx_http_llm_gateway_main_conf_t    *lmcf;
    u_char                               digest[SHA256_DIGEST_LENGTH];
    u_char                               scope[SHA256_DIGEST_LENGTH];

    static ngx_str_t  name = ngx_string("idempotency-key");

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    if (lmcf->idem_zone == NULL || ctx->idem_checked) {
        return NGX_OK;
    }

    ctx->idem_checked = 1;

    h = ngx_http_llm_gateway_request_find_header(r, &name);

    if (h == NULL) {
        return NGX_OK;
    }

    key = h->value;

    if (key.len == 0 || key.len > NGX_HTTP_LLM_GATEWAY_IDEM_KEY_MAX) {
        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                          "invalid_request_error",
                                          "invalid_idempotency_key",
                                          "Idempotency-Key",
                                          "The Idempotency-Key header must be "
                                          "1 "
                                          "to 255 characters.");
        return NGX_DECLINED;
    }

    (void) SHA256(ctx->body.data, ctx->body.len, digest);

    if (ngx_http_llm_gateway_idem_scope(r, ctx, scope) != NGX_OK) {
        return NGX_ERROR;
    }

    /* the tree's key only: equal ones are told apart by what they are */
    hash = ngx_crc32_short(key.data, key.len)
           ^ (uint32_t) ctx->key->tenant_id;

    z = lmcf->idem_zone->data;
    now = ngx_http_llm_gateway_clock_wall_ms();

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    ngx_shmtx_lock(&z->shpool->mutex);

    ngx_http_llm_gateway_idem_expire(z, now, 2, NULL);

    e = ngx_http_llm_gateway_idem_find(z, hash, ctx->key->tenant_id, scope,
                                       &key);

    if (e) {
        rc = ngx_http_llm_gateway_idem_found(r, ctx, z, e, digest, now, cln);

        if (rc != NGX_OK) {
            return rc;
        }
    }

    return ngx_http_llm_gateway_idem_create(r, ctx, z, &key, hash, digest,
                                            scope, now, cln);
}


/*
 * A request with the key was made before, under the zone's lock: refused
 * (NGX_DECLINED), served what the first one got (NGX_DONE), both with the
 * zone unlocked, or NGX_OK: the entry is no result, this request runs.
 */

static ngx_int_t
ngx_http_llm_gateway_idem_found(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_idem_zone_t *z,
    ngx_http_llm_gateway_idem_t *e, u_char *digest, int64_t now,
    ngx_pool_cleanup_t *cln)
{
    if (ngx_memcmp(e->body_hash, digest, SHA256_DIGEST_LENGTH) != 0) {
        ngx_shmtx_unlock(&z->shpool->mutex);

        ngx_http_llm_gateway_reply_refuse(ctx, 422, "invalid_request_error",
                                          "idempotency_key_reused",
                                          "Idempotency-Key",
                                          "This Idempotency-Key was used with "
                                          "another request body.");
        return NGX_DECLINED;
    }

    if (!e->done) {
        ngx_http_llm_gateway_idem_alive(z, e, now, 1);
    }

    /* a result past retain is none, though the sweep has not freed it */
    if ((e->done && (!e->replayable || e->expires <= now)
         && ngx_http_llm_gateway_idem_readers(e))
        || (!e->done && e->truncated))
    {
        /*
         * Its last readers still read it, or it runs but is too large to
         * be kept whole: a retry after its end runs.
         */
        ngx_shmtx_unlock(&z->shpool->mutex);

        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_CONFLICT,
                                          "invalid_request_error",
                                          "idempotency_key_in_use",
                                          "Idempotency-Key",
                                          e->done ? "A request with this "
                                                    "Idempotency-Key just "
                                                    "ended; "
                                                    "retry shortly."
                                                  : "A request with this "
                                                    "Idempotency-Key still "
                                                    "runs, "
                                                    "and its response is too "
                                                    "large "
                                                    "to share; retry once it "
                                                    "has ended.");
        ctx->retry_after = 1;
        ctx->retry_after_ms = 1000;
        return NGX_DECLINED;
    }

    if (e->done && (!e->replayable || e->expires <= now)) {
        /* a refusal or a failure is not a result: this one runs */
        ngx_http_llm_gateway_idem_forget(z, e, NULL);
        return NGX_OK;
    }

    /* the same request: served what the first one got, or gets */
    if (ngx_http_llm_gateway_idem_join(e) != NGX_OK) {
        ngx_shmtx_unlock(&z->shpool->mutex);

        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_CONFLICT,
                                          "invalid_request_error",
                                          "idempotency_key_in_use",
                                          "Idempotency-Key",
                                          "Too many requests with this "
                                          "Idempotency-Key are served at "
                                          "once; retry shortly.");
        ctx->retry_after = 1;
        ctx->retry_after_ms = 1000;
        return NGX_DECLINED;
    }

    ngx_queue_remove(&e->tqueue);
    ngx_queue_insert_head(&e->tenant->queue, &e->tqueue);

    ngx_shmtx_unlock(&z->shpool->mutex);

    ctx->idem = e;
    ctx->idem_zone = z;
    ctx->idem_joiner = 1;

    cln->handler = ngx_http_llm_gateway_idem_release;
    cln->data = ctx;

    return NGX_DONE;
}


/*
 * The first request with the key, under the zone's lock, which it
 * unlocks: its entry, for those that come with the key while it runs and
 * after it ended.  Without room, it runs as without a key.
 */

static ngx_int_t
ngx_http_llm_gateway_idem_create(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_idem_zone_t *z,
    ngx_str_t *key, uint32_t hash, u_char *digest, u_char *scope,
    int64_t now, ngx_pool_cleanup_t *cln)
{
    size_t                               len;
    ngx_http_llm_gateway_idem_t         *e;
    ngx_http_llm_gateway_idem_tenant_t  *t;

    len = offsetof(ngx_http_llm_gateway_idem_t, key) + key->len;

    t = ngx_http_llm_gateway_idem_tenant(z, ctx->key->tenant_id, now);

    e = t ? ngx_http_llm_gateway_idem_alloc(z, t, len, now) : NULL;

    if (e == NULL) {
        if (t && ngx_queue_empty(&t->queue)) {
            ngx_rbtree_delete(&z->sh->tenants, &t->node);
            ngx_slab_free_locked(z->shpool, t);
        }

        ngx_shmtx_unlock(&z->shpool->mutex);

        /* no room: the request runs, unprotected, as without a key */
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm gateway: idempotency zone full, or the tenant's "
                      "share of it, key not kept");
        return NGX_OK;
    }

    ngx_memzero(e, len);

    e->node.key = hash;
    e->tenant = t;
    e->tenant_id = ctx->key->tenant_id;
    e->owner = ngx_pid;
    e->touched = now;
    e->held = ngx_http_llm_gateway_idem_cost(len);
    ngx_memcpy(e->body_hash, digest, SHA256_DIGEST_LENGTH);
    ngx_memcpy(e->scope, scope, SHA256_DIGEST_LENGTH);
    e->key_len = (u_short) key->len;
    ngx_memcpy(e->key, key->data, key->len);

    ngx_rbtree_insert(&z->sh->rbtree, &e->node);
    ngx_queue_init(&e->queue);
    ngx_queue_insert_head(&t->queue, &e->tqueue);

    ngx_shmtx_unlock(&z->shpool->mutex);

    ctx->idem = e;
    ctx->idem_zone = z;
    ctx->idem_owner = 1;

    cln->handler = ngx_http_llm_gateway_idem_release;
    cln->data = ctx;

    return NGX_OK;
}


/*
 * What a result belongs to besides its tenant: the API, the server (the
 * address the request came to and the server's name) and the location.
 * A digest of them, each part preceded by its length.
 */

static ngx_int_t
ngx_http_llm_gateway_idem_scope(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, u_char *scope)
{
    u_char                    *p, *buf;
    size_t                     len;
    ngx_str_t                  addr, *part[3];
    ngx_uint_t                 i;
    ngx_http_core_srv_conf_t  *cscf;
    ngx_http_core_loc_conf_t  *clcf;
    u_char                     text[NGX_SOCKADDR_STRLEN];

    addr.data = text;
    addr.len = NGX_SOCKADDR_STRLEN;

    if (ngx_connection_local_sockaddr(r->connection, &addr, 1) != NGX_OK) {
        return NGX_ERROR;
    }

    cscf = ngx_http_get_module_srv_conf(r, ngx_http_core_module);
    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    part[0] = &addr;
    part[1] = &cscf->server_name;
    part[2] = &clcf->name;

    len = 2;

    for (i = 0; i < 3; i++) {
        len += sizeof(uint32_t) + part[i]->len;
    }

    buf = ngx_pnalloc(r->pool, len);
    if (buf == NULL) {
        return NGX_ERROR;
    }

    p = buf;

    *p++ = (u_char) ctx->req.api;

    /* "location = /x" and "location /x" are two */
    *p++ = (u_char) (clcf->exact_match | clcf->noregex << 1
                     | clcf->named << 2
#if (NGX_PCRE)
                     | (clcf->regex != NULL) << 3
#endif
                     );

    for (i = 0; i < 3; i++) {
        *p++ = (u_char) (part[i]->len >> 24);
        *p++ = (u_char) (part[i]->len >> 16);
        *p++ = (u_char) (part[i]->len >> 8);
        *p++ = (u_char) part[i]->len;
        p = ngx_cpymem(p, part[i]->data, part[i]->len);
    }

    (void) SHA256(buf, p - buf, scope);

    return NGX_OK;
}


/*
 * The first request's bytes as its client gets them, from the body
 * filter: kept for the others, up to max_size.
 */

void
ngx_http_llm_gateway_idem_keep(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_chain_t *in)
{
    size_t                              len, size;
    int64_t                             now;
    ngx_uint_t                          last, status;
    ngx_buf_t                          *b;
    ngx_chain_t                        *cl;
    ngx_http_llm_gateway_idem_t        *e;
    ngx_http_llm_gateway_piece_t       *piece;
    ngx_http_llm_gateway_idem_zone_t   *z;
    ngx_http_llm_gateway_main_conf_t   *lmcf;

    if (!ctx->idem_owner || ctx->idem == NULL) {
        return;
    }

    e = ctx->idem;
    z = ctx->idem_zone;
    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    ngx_shmtx_lock(&z->shpool->mutex);

    if (e->status == 0) {
        e->status = r->headers_out.status;

        len = ngx_min(r->headers_out.content_type.len, sizeof(e->type));
        ngx_memcpy(e->type, r->headers_out.content_type.data, len);
        e->type_len = (u_char) len;
    }

    e->touched = ngx_http_llm_gateway_clock_wall_ms();

    for (cl = in; cl && !e->truncated; cl = cl->next) {
        b = cl->buf;

        if (!ngx_buf_in_memory(b)) {
            if (ngx_buf_size(b)) {
                e->truncated = 1;
            }

            continue;
        }

        len = b->last - b->pos;

        if (len == 0) {
            continue;
        }

        if (e->size + len > lmcf->idem_max) {
            e->truncated = 1;
            break;
        }

        size = offsetof(ngx_http_llm_gateway_piece_t, data) + len;

        /* beyond the tenant's share or the zone: kept no further */
        now = ngx_http_llm_gateway_clock_wall_ms();
        piece = ngx_http_llm_gateway_idem_alloc(z, e->tenant, size, now);
        if (piece == NULL) {
            e->truncated = 1;
            break;
        }

        e->held += ngx_http_llm_gateway_idem_cost(size);

        piece->next = NULL;
        piece->len = len;
        ngx_memcpy(piece->data, b->pos, len);

        if (e->last) {
            e->last->next = piece;

        } else {
            e->first = piece;
        }

        e->last = piece;
        e->size += len;
    }

    ngx_shmtx_unlock(&z->shpool->mutex);

    last = 0;

    for (cl = in; cl; cl = cl->next) {
        last |= cl->buf->last_buf;
    }

    status = r->err_status ? r->err_status : r->headers_out.status;

    /*
     * A response that is not a 2xx, or a 2xx stream that ended in an error
     * event, is no result: its key is free before its last byte leaves,
     * not once the request is freed, which the client's own retry of it
     * may well come before.
     */
    if (last
        && (status < NGX_HTTP_OK || status >= 300
            || ngx_http_llm_gateway_idem_failed(ctx, NULL)))
    {
        ngx_http_llm_gateway_idem_end(ctx);
    }
}


/*
 * The first request ended: its response is a result to replay if it is a
 * whole 2xx; otherwise the next request with its key runs.
 */

void
ngx_http_llm_gateway_idem_end(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_uint_t                         status, cut, failed;
    ngx_http_request_t                *r;
    ngx_http_llm_gateway_idem_t       *e;
    ngx_http_llm_gateway_idem_zone_t  *z;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    if (!ctx->idem_owner || ctx->idem == NULL) {
        return;
    }

    r = ctx->request;
    e = ctx->idem;
    z = ctx->idem_zone;
    ctx->idem = NULL;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    status = r->err_status ? r->err_status : r->headers_out.status;

    failed = ngx_http_llm_gateway_idem_failed(ctx, &cut);

    ngx_shmtx_lock(&z->shpool->mutex);

    if (e->done) {
        /* ended as a failure already: its worker was taken for dead */
        ngx_shmtx_unlock(&z->shpool->mutex);
        return;
    }

    if (e->status == 0) {
        e->status = status;
    }

    e->cut = e->truncated || cut;

    ngx_http_llm_gateway_idem_finish(z, e,
                          status >= NGX_HTTP_OK && status < 300
                          && !e->truncated && !failed
                          && ctx->response_done && !ctx->upstream_failed
                          && !ctx->client_closed,
                          ngx_http_llm_gateway_clock_wall_ms(),
                          lmcf->idem_retain);

    if (!e->replayable && ngx_http_llm_gateway_idem_readers(e) == 0) {
        ngx_http_llm_gateway_idem_forget(z, e, NULL);
    }

    ngx_shmtx_unlock(&z->shpool->mutex);
}


static ngx_uint_t
ngx_http_llm_gateway_idem_failed(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_uint_t *cut)
{
    ngx_uint_t    c;
    llm_usage_t  *u;

    /*
     * Whether what was kept ends as a response ends: a stream with its
     * terminal event (the upstream's, or the gateway's error event), a
     * body with its last buffer.  Joiners of one that does not are told.
     */
    u = &ctx->sse.usage;

    if (ctx->streaming) {
        c = !(u->done || u->error || ctx->error_event);

    } else if (ctx->metering) {
        c = !ctx->response_done;

    } else {
        c = ctx->upstream_failed || ctx->client_closed;
    }

    if (cut) {
        *cut = c;
    }

    /*
     * Not a result either: a stream that ended without its terminal event,
     * one that ended in an error event (the provider's, in a 200, or the
     * gateway's), and a body that carries an error.
     */
    return c || ctx->error_event
           || (ctx->streaming && !u->done)
           || (ctx->metering && u->error);
}


/*
 * A request served from the store: in the preaccess phase, instead of
 * going on; it ends when it has sent all of the first one's response.
 */

ngx_int_t
ngx_http_llm_gateway_idem_serve(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_llm_gateway_idem_step;

    ngx_http_llm_gateway_idem_step(r);

    return NGX_DONE;
}


static void
ngx_http_llm_gateway_idem_step(ngx_http_request_t *r)
{
    int64_t                            now;
    ngx_int_t                          rc;
    ngx_str_t                          v;
    ngx_buf_t                         *b;
    ngx_uint_t                         end, cut, stream, status, nomem;
    const char                        *closing, *why;
    ngx_event_t                       *wev;
    ngx_http_llm_gateway_ctx_t        *ctx;
    ngx_http_llm_gateway_idem_t       *e;
    ngx_http_llm_gateway_idem_zone_t  *z;

    ctx = ngx_http_llm_gateway_ctx_get(r);
    wev = r->connection->write;

    if (wev->timer_set) {
        ngx_del_timer(wev);
    }

    /* what is still on its way to the client goes first */
    if (r->buffered || r->connection->buffered) {
        rc = ngx_http_output_filter(r, NULL);

        if (rc == NGX_ERROR) {
            ngx_http_finalize_request(r, NGX_ERROR);
            return;
        }

        if (r->buffered || r->connection->buffered) {
            ngx_add_timer(wev, NGX_HTTP_LLM_GATEWAY_IDEM_POLL);

            if (ngx_handle_write_event(wev, 0) != NGX_OK) {
                ngx_http_finalize_request(r, NGX_ERROR);
            }

            return;
        }
    }

    e = ctx->idem;
    z = ctx->idem_zone;
    b = NULL;
    closing = NULL;
    nomem = 0;

    ngx_shmtx_lock(&z->shpool->mutex);

    now = ngx_http_llm_gateway_clock_wall_ms();
    (void) ngx_http_llm_gateway_idem_alive(z, e, now, 0);

    status = e->status;

    if (e->done && status == 0) {
        /* the first ended (or its worker died) before its answer */
        ngx_shmtx_unlock(&z->shpool->mutex);

        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm gateway: the first request with this "
                      "Idempotency-Key ended before its answer, "
                      "nothing to replay");

        ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_BAD_GATEWAY,
                                          "server_error",
                                          "upstream_error", NULL,
                                          "The first request with this "
                                          "Idempotency-Key failed before it "
                                          "had "
                                          "an answer; retry it.");

        ngx_http_finalize_request(r,
                                  ngx_http_llm_gateway_reply_send(r, ctx));
        return;
    }

    /* past max_size nothing more comes: the end, short of it */
    cut = e->cut || e->truncated;

    why = e->truncated ? "the response was larger than what is kept for a "
                         "retry"
                       : "the first request with this Idempotency-Key "
                         "ended early";

    stream = e->type_len >= sizeof("text/event-stream") - 1
             && ngx_strncasecmp(e->type, (u_char *) "text/event-stream",
                                sizeof("text/event-stream") - 1)
                == 0;

    if (status && ctx->idem_sent < e->size) {
        b = ngx_http_llm_gateway_idem_copy(r, ctx, e);
        nomem = (b == NULL);
    }

    end = status && (e->done || cut) && ctx->idem_sent == e->size;

    if (end && cut && stream) {
        closing = ngx_http_llm_gateway_idem_closing(e);
    }

    if (!r->header_sent && status) {
        r->headers_out.status = status;
        r->headers_out.content_type.len = e->type_len;
        r->headers_out.content_type.data = ngx_pnalloc(r->pool, e->type_len);

        if (r->headers_out.content_type.data) {
            ngx_memcpy(r->headers_out.content_type.data, e->type,
                       e->type_len);
        }
    }

    ngx_shmtx_unlock(&z->shpool->mutex);

    if (nomem) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    if (!r->header_sent && status) {
        r->headers_out.content_type_len = r->headers_out.content_type.len;
        r->headers_out.content_length_n = -1;

        ngx_str_set(&v, "true");

        if (ngx_http_llm_gateway_reply_add_header(r, "Idempotent-Replayed", &v)
            != NGX_OK)
        {
            ngx_http_finalize_request(r, NGX_ERROR);
            return;
        }

        rc = ngx_http_send_header(r);

        if (rc == NGX_ERROR || rc > NGX_OK) {
            ngx_http_finalize_request(r, rc);
            return;
        }
    }

    ngx_http_llm_gateway_idem_send(r, ctx, b, end, cut, stream, closing,
                                   why);
}


/* the kept bytes the client has not had yet, under the zone's lock */

static ngx_buf_t *
ngx_http_llm_gateway_idem_copy(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_idem_t *e)
{
    u_char                        *p;
    size_t                         len, skip;
    ngx_buf_t                     *b;
    ngx_http_llm_gateway_piece_t  *piece;

    len = e->size - ctx->idem_sent;

    b = ngx_create_temp_buf(r->pool, len);

    if (b == NULL) {
        return NULL;
    }

    skip = ctx->idem_sent;
    p = b->last;

    for (piece = e->first; piece; piece = piece->next) {
        if (skip >= piece->len) {
            skip -= piece->len;
            continue;
        }

        p = ngx_cpymem(p, piece->data + skip, piece->len - skip);
        skip = 0;
    }

    b->last = p;
    ctx->idem_sent = e->size;

    return b;
}


/*
 * The bytes copied, and at the end the terminal error event of a stream
 * cut short; then the next look at the store, unless the end was sent.
 */

static void
ngx_http_llm_gateway_idem_send(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_buf_t *b, ngx_uint_t end,
    ngx_uint_t cut, ngx_uint_t stream, const char *closing, const char *why)
{
    ngx_int_t    rc;
    ngx_chain_t  out, *cl;

    if (b != NULL || end) {

        if (b == NULL) {
            b = ngx_calloc_buf(r->pool);
            if (b == NULL) {
                ngx_http_finalize_request(r, NGX_ERROR);
                return;
            }
        }

        b->flush = 1;

        out.buf = b;
        out.next = NULL;

        if (end && cut && stream) {
            /* the terminal error event of any stream cut short */
            out.next = ngx_http_llm_gateway_idem_error_event(r, ctx, closing,
                                                             why);
            if (out.next == NULL) {
                ngx_http_finalize_request(r, NGX_ERROR);
                return;
            }
        }

        /* the chunked filter moves last_buf to its own buffer: kept here */
        for (cl = &out; cl->next; cl = cl->next) { /* void */ }

        cl->buf->last_buf = end && !(cut && !stream);

        rc = ngx_http_output_filter(r, &out);

        if (rc == NGX_ERROR) {
            ngx_http_finalize_request(r, NGX_ERROR);
            return;
        }

        if (end && cut && !stream) {
            /* a body cut short ends as a proxied one does: without its end */
            ngx_http_finalize_request(r, NGX_ERROR);
            return;
        }

        if (end) {
            ngx_http_finalize_request(r, rc);
            return;
        }
    }

    ngx_add_timer(r->connection->write, NGX_HTTP_LLM_GATEWAY_IDEM_POLL);
}


/*
 * What ends the line or the event that the kept bytes leave unfinished,
 * as llm_sse_closing() says of a stream it read: their last three bytes
 * tell.  SSE lines end with CR, LF or CRLF; a blank one ends an event.
 */

static const char *
ngx_http_llm_gateway_idem_closing(ngx_http_llm_gateway_idem_t *e)
{
    size_t                         i, n;
    u_char                         c[3];
    ngx_http_llm_gateway_piece_t  *piece;

    c[0] = '\0';
    c[1] = '\0';
    c[2] = '\0';
    n = 0;

    for (piece = e->first; piece; piece = piece->next) {
        for (i = (piece->len > 3) ? piece->len - 3 : 0; i < piece->len; i++) {
            c[0] = c[1];
            c[1] = c[2];
            c[2] = piece->data[i];
            n++;
        }
    }

    if (n == 0) {
        return "";
    }

    switch (c[2]) {

    case LF:
        if (n >= 2 && c[1] == CR) {
            return (n == 2 || c[0] == CR || c[0] == LF) ? "" : "\n";
        }

        return (n == 1 || c[1] == LF) ? "" : "\n";

    case CR:
        /* an LF alone would only complete its line end */
        return (n == 1 || c[1] == CR || c[1] == LF) ? "" : "\n\n";

    default:
        return "\n\n";
    }
}


/* a joiner's stream cut short: as filter.c ends one the upstream cut */

static ngx_chain_t *
ngx_http_llm_gateway_idem_error_event(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, const char *closing, const char *why)
{
    size_t        n, len;
    u_char        msg[200];
    ngx_buf_t    *b;
    ngx_chain_t  *cl;
    char          event[512];

    ngx_snprintf(msg, sizeof(msg), "The response ended before it was "
                 "complete (%s); request %V.%Z", why, &ctx->request_id);

    n = llm_sse_error_event(ctx->req.api, (char *) msg, event, sizeof(event));
    len = ngx_strlen(closing);

    b = ngx_create_temp_buf(r->pool, len + n);
    if (b == NULL) {
        return NULL;
    }

    b->last = ngx_cpymem(b->last, closing, len);
    b->last = ngx_cpymem(b->last, event, n);
    b->flush = 1;

    cl = ngx_alloc_chain_link(r->pool);
    if (cl == NULL) {
        return NULL;
    }

    cl->buf = b;
    cl->next = NULL;

    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                  "llm gateway: replayed stream ended short (%s), "
                  "error event sent", why);

    return cl;
}


/* a request's hold on its entry ends with it */

static void
ngx_http_llm_gateway_idem_release(void *data)
{
    ngx_http_llm_gateway_ctx_t  *ctx = data;

    ngx_http_llm_gateway_idem_t       *e;
    ngx_http_llm_gateway_idem_zone_t  *z;

    if (ctx->idem_owner) {
        /* the log phase did it, unless the request ended before it */
        ngx_http_llm_gateway_idem_end(ctx);
        return;
    }

    e = ctx->idem;

    if (e == NULL) {
        return;
    }

    z = ctx->idem_zone;
    ctx->idem = NULL;

    ngx_shmtx_lock(&z->shpool->mutex);

    ngx_http_llm_gateway_idem_leave(e);

    if (e->done
        && (!e->replayable
            || e->expires <= ngx_http_llm_gateway_clock_wall_ms())
        && ngx_http_llm_gateway_idem_readers(e) == 0)
    {
        ngx_http_llm_gateway_idem_forget(z, e, NULL);
    }

    ngx_shmtx_unlock(&z->shpool->mutex);
}


static ngx_http_llm_gateway_idem_t *
ngx_http_llm_gateway_idem_find(ngx_http_llm_gateway_idem_zone_t *z,
    uint32_t hash, int64_t tenant_id, u_char *scope, ngx_str_t *key)
{
    ngx_int_t                     rc;
    ngx_rbtree_node_t            *node, *sentinel;
    ngx_http_llm_gateway_idem_t  *e;

    node = z->sh->rbtree.root;
    sentinel = z->sh->rbtree.sentinel;

    while (node != sentinel) {

        if (hash != node->key) {
            node = (hash < node->key) ? node->left : node->right;
            continue;
        }

        /* the same hash: ordered as insert_value put them */

        e = (ngx_http_llm_gateway_idem_t *) node;

        rc = ngx_http_llm_gateway_idem_order(tenant_id, scope, key->data,
                                             key->len, e);

        if (rc == 0) {
            return e;
        }

        node = (rc < 0) ? node->left : node->right;
    }

    return NULL;
}


/* an entry's place among those of its hash: tenant, scope, then the key */

static ngx_int_t
ngx_http_llm_gateway_idem_order(int64_t tenant_id, u_char *scope,
    u_char *key, size_t len, ngx_http_llm_gateway_idem_t *e)
{
    ngx_int_t  rc;

    if (tenant_id != e->tenant_id) {
        return (tenant_id < e->tenant_id) ? -1 : 1;
    }

    rc = ngx_memcmp(scope, e->scope, SHA256_DIGEST_LENGTH);

    if (rc != 0) {
        return rc;
    }

    if (len != e->key_len) {
        return (len < e->key_len) ? -1 : 1;
    }

    return ngx_memcmp(key, e->key, len);
}


static void
ngx_http_llm_gateway_idem_rbtree_insert_value(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel)
{
    ngx_rbtree_node_t           **p;
    ngx_http_llm_gateway_idem_t  *e;

    e = (ngx_http_llm_gateway_idem_t *) node;

    for ( ;; ) {

        if (node->key != temp->key) {
            p = (node->key < temp->key) ? &temp->left : &temp->right;

        } else {
            p = (ngx_http_llm_gateway_idem_order(e->tenant_id, e->scope,
                                          e->key, e->key_len,
                                          (ngx_http_llm_gateway_idem_t *) temp)
                 < 0)
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


/* under the lock: the tenant's node, made if it has none */

static ngx_http_llm_gateway_idem_tenant_t *
ngx_http_llm_gateway_idem_tenant(ngx_http_llm_gateway_idem_zone_t *z,
    int64_t tenant_id, int64_t now)
{
    ngx_rbtree_key_t                     key;
    ngx_rbtree_node_t                   *node, *sentinel;
    ngx_http_llm_gateway_idem_tenant_t  *t;

    key = (ngx_rbtree_key_t) tenant_id;

    node = z->sh->tenants.root;
    sentinel = z->sh->tenants.sentinel;

    while (node != sentinel) {

        if (key != node->key) {
            node = (key < node->key) ? node->left : node->right;
            continue;
        }

        t = (ngx_http_llm_gateway_idem_tenant_t *) node;

        if (t->tenant_id == tenant_id) {
            return t;
        }

        node = (tenant_id < t->tenant_id) ? node->left : node->right;
    }

    t = ngx_slab_alloc_locked(z->shpool,
                              sizeof(ngx_http_llm_gateway_idem_tenant_t));

    if (t == NULL) {
        ngx_http_llm_gateway_idem_expire(z, now, 16, NULL);

        t = ngx_slab_alloc_locked(z->shpool,
                                  sizeof(ngx_http_llm_gateway_idem_tenant_t));
        if (t == NULL) {
            return NULL;
        }
    }

    ngx_memzero(t, sizeof(ngx_http_llm_gateway_idem_tenant_t));

    t->node.key = key;
    t->tenant_id = tenant_id;
    ngx_queue_init(&t->queue);

    ngx_rbtree_insert(&z->sh->tenants, &t->node);

    return t;
}


static void
ngx_http_llm_gateway_idem_tenant_insert_value(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel)
{
    ngx_rbtree_node_t                  **p;
    ngx_http_llm_gateway_idem_tenant_t  *t;

    t = (ngx_http_llm_gateway_idem_tenant_t *) node;

    for ( ;; ) {

        if (node->key != temp->key) {
            p = (node->key < temp->key) ? &temp->left : &temp->right;

        } else {
            p = (t->tenant_id
                 < ((ngx_http_llm_gateway_idem_tenant_t *) temp)->tenant_id)
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


/* what size bytes take of the zone: the slab's chunk, or whole pages */

static size_t
ngx_http_llm_gateway_idem_cost(size_t size)
{
    size_t  n;

    if (size > ngx_pagesize / 2) {
        return ngx_align(size, ngx_pagesize);
    }

    for (n = 8; n < size; n <<= 1) { /* void */ }

    return n;
}


/*
 * Under the lock: size bytes for tenant t.  A tenant at its share makes
 * room from its own oldest results; a full zone from results past their
 * retain, then from the tenant's own: never from another tenant's that
 * are still kept.
 */

static void *
ngx_http_llm_gateway_idem_alloc(ngx_http_llm_gateway_idem_zone_t *z,
    ngx_http_llm_gateway_idem_tenant_t *t, size_t size, int64_t now)
{
    void    *p;
    size_t   cost;

    cost = ngx_http_llm_gateway_idem_cost(size);

    while (t->held + cost > z->share) {
        if (ngx_http_llm_gateway_idem_evict(z, t) != NGX_OK) {
            return NULL;
        }
    }

    p = ngx_slab_alloc_locked(z->shpool, size);

    if (p == NULL) {
        ngx_http_llm_gateway_idem_expire(z, now, 16, t);
        p = ngx_slab_alloc_locked(z->shpool, size);
    }

    while (p == NULL && ngx_http_llm_gateway_idem_evict(z, t) == NGX_OK) {
        p = ngx_slab_alloc_locked(z->shpool, size);
    }

    if (p != NULL) {
        t->held += cost;
    }

    return p;
}


/* the tenant's least recently used result that nobody reads goes */

static ngx_int_t
ngx_http_llm_gateway_idem_evict(ngx_http_llm_gateway_idem_zone_t *z,
    ngx_http_llm_gateway_idem_tenant_t *t)
{
    ngx_queue_t                  *q;
    ngx_http_llm_gateway_idem_t  *e;

    for (q = ngx_queue_last(&t->queue);
         q != ngx_queue_sentinel(&t->queue);
         q = ngx_queue_prev(q))
    {
        e = ngx_queue_data(q, ngx_http_llm_gateway_idem_t, tqueue);

        if (e->done && ngx_http_llm_gateway_idem_readers(e) == 0) {
            ngx_http_llm_gateway_idem_free(z, e);
            return NGX_OK;
        }
    }

    return NGX_DECLINED;
}


/*
 * n at most of the entries expired by now, from the queue's oldest end,
 * looking at no more than n * LOOK of them: it stops at the first not
 * expired, as all before it expire later.  A tenant left with none goes
 * too, but for keep.
 */

static void
ngx_http_llm_gateway_idem_expire(ngx_http_llm_gateway_idem_zone_t *z,
    int64_t now, ngx_uint_t n, ngx_http_llm_gateway_idem_tenant_t *keep)
{
    ngx_uint_t                    look, max;
    ngx_queue_t                  *q, *prev;
    ngx_http_llm_gateway_idem_t  *e;

    max = n * NGX_HTTP_LLM_GATEWAY_IDEM_LOOK;
    look = max;

    for (q = ngx_queue_last(&z->sh->queue);
         q != ngx_queue_sentinel(&z->sh->queue) && n && look;
         q = prev)
    {
        prev = ngx_queue_prev(q);
        e = ngx_queue_data(q, ngx_http_llm_gateway_idem_t, queue);

        look--;

        if (e->expires > now) {
            break;
        }

        /* still read: its last reader frees it */
        if (ngx_http_llm_gateway_idem_readers(e)) {
            continue;
        }

        ngx_http_llm_gateway_idem_forget(z, e, keep);
        n--;
    }

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0,
                   "llm gateway idempotency: the sweep looked at %ui",
                   max - look);
}


/*
 * Under the lock: the entry is done, a result for retain or none.  The
 * queue stays in the order of expires: results all keep retain (newest
 * first); one that is none expires now, before any, and goes last.
 */

static void
ngx_http_llm_gateway_idem_finish(ngx_http_llm_gateway_idem_zone_t *z,
    ngx_http_llm_gateway_idem_t *e, ngx_uint_t replayable, int64_t now,
    ngx_msec_t retain)
{
    e->done = 1;
    e->replayable = replayable ? 1 : 0;

    if (replayable) {
        e->expires = now + (int64_t) retain;
        ngx_queue_insert_head(&z->sh->queue, &e->queue);

    } else {
        e->expires = now;
        ngx_queue_insert_tail(&z->sh->queue, &e->queue);
    }
}


/*
 * Under the lock: whether the first request, still running, has a worker.
 * One whose worker died (killed, crashed) never ends: its entry ends with
 * it, as a failure.  Asked each time (force) or once the first has been
 * silent for CHECK.
 */

static ngx_uint_t
ngx_http_llm_gateway_idem_alive(ngx_http_llm_gateway_idem_zone_t *z,
    ngx_http_llm_gateway_idem_t *e, int64_t now, ngx_uint_t force)
{
    if (e->done || e->owner == ngx_pid) {
        return 1;
    }

    if (!force && now - e->touched < NGX_HTTP_LLM_GATEWAY_IDEM_CHECK) {
        return 1;
    }

    if (kill(e->owner, 0) == -1 && ngx_errno == NGX_ESRCH) {
        e->cut = 1;
        ngx_http_llm_gateway_idem_finish(z, e, 0, now, 0);
        return 0;
    }

    e->touched = now;

    return 1;
}


/*
 * Under the lock: the requests that read the entry, those of workers that
 * died not counted (and forgotten).
 */

static ngx_uint_t
ngx_http_llm_gateway_idem_readers(ngx_http_llm_gateway_idem_t *e)
{
    ngx_uint_t                           i, n;
    ngx_http_llm_gateway_idem_reader_t  *rd;

    n = 0;

    for (i = 0; i < NGX_HTTP_LLM_GATEWAY_IDEM_READERS; i++) {
        rd = &e->readers[i];

        if (rd->n == 0) {
            continue;
        }

        if (rd->pid != ngx_pid
            && kill(rd->pid, 0) == -1 && ngx_errno == NGX_ESRCH)
        {
            rd->n = 0;
            continue;
        }

        n += rd->n;
    }

    return n;
}


/* under the lock: one more reader in this worker, if it has a place */

static ngx_int_t
ngx_http_llm_gateway_idem_join(ngx_http_llm_gateway_idem_t *e)
{
    ngx_uint_t                           i;
    ngx_http_llm_gateway_idem_reader_t  *rd, *free;

    free = NULL;

    for (i = 0; i < NGX_HTTP_LLM_GATEWAY_IDEM_READERS; i++) {
        rd = &e->readers[i];

        if (rd->n && rd->pid == ngx_pid) {
            rd->n++;
            return NGX_OK;
        }

        if (rd->n == 0 && free == NULL) {
            free = rd;
        }
    }

    if (free == NULL) {
        /* a place held by a worker that died is free */
        (void) ngx_http_llm_gateway_idem_readers(e);

        for (i = 0; i < NGX_HTTP_LLM_GATEWAY_IDEM_READERS; i++) {
            if (e->readers[i].n == 0) {
                free = &e->readers[i];
                break;
            }
        }

        if (free == NULL) {
            return NGX_BUSY;
        }
    }

    free->pid = ngx_pid;
    free->n = 1;

    return NGX_OK;
}


static void
ngx_http_llm_gateway_idem_leave(ngx_http_llm_gateway_idem_t *e)
{
    ngx_uint_t  i;

    for (i = 0; i < NGX_HTTP_LLM_GATEWAY_IDEM_READERS; i++) {
        if (e->readers[i].n && e->readers[i].pid == ngx_pid) {
            e->readers[i].n--;
            return;
        }
    }
}


/* an entry goes, and its tenant if that was its last, unless it is keep */

static void
ngx_http_llm_gateway_idem_forget(ngx_http_llm_gateway_idem_zone_t *z,
    ngx_http_llm_gateway_idem_t *e, ngx_http_llm_gateway_idem_tenant_t *keep)
{
    ngx_http_llm_gateway_idem_tenant_t  *t;

    t = e->tenant;

    ngx_http_llm_gateway_idem_free(z, e);

    if (t != keep && ngx_queue_empty(&t->queue)) {
        ngx_rbtree_delete(&z->sh->tenants, &t->node);
        ngx_slab_free_locked(z->shpool, t);
    }
}


static void
ngx_http_llm_gateway_idem_free(ngx_http_llm_gateway_idem_zone_t *z,
    ngx_http_llm_gateway_idem_t *e)
{
    ngx_http_llm_gateway_piece_t  *piece, *next;

    for (piece = e->first; piece; piece = next) {
        next = piece->next;
        ngx_slab_free_locked(z->shpool, piece);
    }

    e->tenant->held -= e->held;

    ngx_queue_remove(&e->queue);
    ngx_queue_remove(&e->tqueue);
    ngx_rbtree_delete(&z->sh->rbtree, &e->node);
    ngx_slab_free_locked(z->shpool, e);
}
