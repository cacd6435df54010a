
/*
 * ngx_http_llm_gateway_module: Idempotency-Key (issue 9, source document
 * 000, 7.2.14).
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
 */


#include "ngx_http_llm_gateway_module.h"

#include <openssl/sha.h>


/* a joiner looks for the first request's new bytes this often (ms) */
#define NGX_HTTP_LLM_GATEWAY_IDEM_POLL     10

#define NGX_HTTP_LLM_GATEWAY_IDEM_KEY_MAX  255


typedef struct ngx_http_llm_gateway_piece_s  ngx_http_llm_gateway_piece_t;

struct ngx_http_llm_gateway_piece_s {
    ngx_http_llm_gateway_piece_t  *next;
    size_t                         len;
    u_char                         data[1];
};


/* a key's entry: the response as the first client got it */
typedef struct {
    ngx_rbtree_node_t              node;      /* key: crc32 */
    ngx_queue_t                    queue;     /* LRU */
    int64_t                        tenant_id;
    int64_t                        expires;   /* wall ms; 0: running */
    int64_t                        touched;   /* wall ms: bytes came */
    ngx_pid_t                      owner;     /* the first's worker */
    u_char                         body_hash[SHA256_DIGEST_LENGTH];
    ngx_uint_t                     status;    /* 0: no header yet */
    ngx_uint_t                     refs;      /* joiners reading it */
    size_t                         size;      /* bytes kept */
    ngx_http_llm_gateway_piece_t  *first;
    ngx_http_llm_gateway_piece_t  *last;
    u_char                         type[64];  /* its Content-Type */
    u_char                         type_len;
    unsigned                       done:1;
    unsigned                       replayable:1;
    unsigned                       truncated:1;   /* above max_size */
    u_short                        key_len;
    u_char                         key[1];
} ngx_http_llm_gateway_idem_t;


typedef struct {
    ngx_rbtree_t                   rbtree;
    ngx_rbtree_node_t              sentinel;
    ngx_queue_t                    queue;
} ngx_http_llm_gateway_idem_sh_t;


typedef struct {
    ngx_http_llm_gateway_idem_sh_t  *sh;
    ngx_slab_pool_t                 *shpool;
} ngx_http_llm_gateway_idem_zone_t;


static ngx_int_t ngx_http_llm_gateway_idem_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static ngx_http_llm_gateway_idem_t *ngx_http_llm_gateway_idem_find(
    ngx_http_llm_gateway_idem_zone_t *z, uint32_t hash, int64_t tenant_id,
    ngx_str_t *key);
static void *ngx_http_llm_gateway_idem_alloc(
    ngx_http_llm_gateway_idem_zone_t *z, size_t size, int64_t now);
static void ngx_http_llm_gateway_idem_free(
    ngx_http_llm_gateway_idem_zone_t *z, ngx_http_llm_gateway_idem_t *e);
static void ngx_http_llm_gateway_idem_expire(
    ngx_http_llm_gateway_idem_zone_t *z, int64_t now, ngx_uint_t n);
static void ngx_http_llm_gateway_idem_rbtree_insert_value(
    ngx_rbtree_node_t *temp, ngx_rbtree_node_t *node,
    ngx_rbtree_node_t *sentinel);
static void ngx_http_llm_gateway_idem_step(ngx_http_request_t *r);
static void ngx_http_llm_gateway_idem_release(void *data);


static ngx_uint_t  ngx_http_llm_gateway_idem_tag;


/*
 * llm_gateway_idempotency zone=name:size [retain=time] [max_size=size];
 */

char *
ngx_http_llm_gateway_idem_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_llm_gateway_main_conf_t *lmcf = conf;

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
        return NGX_OK;
    }

    z->shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        z->sh = z->shpool->data;
        return NGX_OK;
    }

    z->sh = ngx_slab_alloc(z->shpool, sizeof(ngx_http_llm_gateway_idem_sh_t));
    if (z->sh == NULL) {
        return NGX_ERROR;
    }

    z->shpool->data = z->sh;

    ngx_rbtree_init(&z->sh->rbtree, &z->sh->sentinel,
                    ngx_http_llm_gateway_idem_rbtree_insert_value);
    ngx_queue_init(&z->sh->queue);

    z->shpool->log_nomem = 0;

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
    size_t                              len;
    int64_t                             now;
    uint32_t                            hash;
    ngx_str_t                           key, name = ngx_string("idempotency-key");
    ngx_table_elt_t                    *h;
    ngx_pool_cleanup_t                 *cln;
    ngx_http_llm_gateway_idem_t        *e;
    ngx_http_llm_gateway_idem_zone_t   *z;
    ngx_http_llm_gateway_main_conf_t   *lmcf;
    u_char                              digest[SHA256_DIGEST_LENGTH];

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    if (lmcf->idem_zone == NULL || ctx->idem_checked) {
        return NGX_OK;
    }

    ctx->idem_checked = 1;

    h = ngx_http_llm_gateway_find_header(r, &name);

    if (h == NULL) {
        return NGX_OK;
    }

    key = h->value;

    if (key.len == 0 || key.len > NGX_HTTP_LLM_GATEWAY_IDEM_KEY_MAX) {
        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                    "invalid_request_error",
                                    "invalid_idempotency_key",
                                    "Idempotency-Key",
                                    "The Idempotency-Key header must be 1 "
                                    "to 255 characters.");
        return NGX_DECLINED;
    }

    (void) SHA256(ctx->body.data, ctx->body.len, digest);

    hash = ngx_crc32_short(key.data, key.len)
           ^ (uint32_t) ctx->key->tenant_id;

    z = lmcf->idem_zone->data;
    now = ngx_http_llm_gateway_wall_ms();

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    ngx_shmtx_lock(&z->shpool->mutex);

    ngx_http_llm_gateway_idem_expire(z, now, 2);

    e = ngx_http_llm_gateway_idem_find(z, hash, ctx->key->tenant_id, &key);

    if (e && ngx_memcmp(e->body_hash, digest, sizeof(digest)) != 0) {
        ngx_shmtx_unlock(&z->shpool->mutex);

        ngx_http_llm_gateway_refuse(ctx, 422, "invalid_request_error",
                                    "idempotency_key_reused",
                                    "Idempotency-Key",
                                    "This Idempotency-Key was used with "
                                    "another request body.");
        return NGX_DECLINED;
    }

    /*
     * A first request whose worker died (killed, crashed) never ends: its
     * entry ends with it, as a failure.
     */
    if (e && !e->done && e->owner != ngx_pid
        && kill(e->owner, 0) == -1 && ngx_errno == NGX_ESRCH)
    {
        e->done = 1;
        e->expires = now;
    }

    if (e && e->done && !e->replayable) {

        if (e->refs) {
            /* its last readers still read it: a retry comes shortly */
            ngx_shmtx_unlock(&z->shpool->mutex);

            ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_CONFLICT,
                                        "invalid_request_error",
                                        "idempotency_key_in_use",
                                        "Idempotency-Key",
                                        "A request with this Idempotency-Key "
                                        "just ended; retry shortly.");
            ctx->retry_after = 1;
            ctx->retry_after_ms = 1000;
            return NGX_DECLINED;
        }

        /* a refusal or a failure is not a result: this one runs */
        ngx_http_llm_gateway_idem_free(z, e);
        e = NULL;
    }

    if (e) {
        /* the same request: served what the first one got, or gets */
        e->refs++;
        ngx_queue_remove(&e->queue);
        ngx_queue_insert_head(&z->sh->queue, &e->queue);

        ngx_shmtx_unlock(&z->shpool->mutex);

        ctx->idem = e;
        ctx->idem_zone = z;
        ctx->idem_joiner = 1;

        cln->handler = ngx_http_llm_gateway_idem_release;
        cln->data = ctx;

        return NGX_DONE;
    }

    len = offsetof(ngx_http_llm_gateway_idem_t, key) + key.len;

    e = ngx_http_llm_gateway_idem_alloc(z, len, now);

    if (e == NULL) {
        ngx_shmtx_unlock(&z->shpool->mutex);

        /* no room: the request runs, unprotected, as without a key */
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm gateway: idempotency zone full, key not kept");
        return NGX_OK;
    }

    ngx_memzero(e, len);

    e->node.key = hash;
    e->tenant_id = ctx->key->tenant_id;
    e->owner = ngx_pid;
    e->touched = now;
    ngx_memcpy(e->body_hash, digest, sizeof(digest));
    e->key_len = (u_short) key.len;
    ngx_memcpy(e->key, key.data, key.len);

    ngx_rbtree_insert(&z->sh->rbtree, &e->node);
    ngx_queue_insert_head(&z->sh->queue, &e->queue);

    ngx_shmtx_unlock(&z->shpool->mutex);

    ctx->idem = e;
    ctx->idem_zone = z;
    ctx->idem_owner = 1;

    cln->handler = ngx_http_llm_gateway_idem_release;
    cln->data = ctx;

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
    size_t                              len;
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

    e->touched = ngx_http_llm_gateway_wall_ms();

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

        piece = ngx_http_llm_gateway_idem_alloc(z,
                    offsetof(ngx_http_llm_gateway_piece_t, data) + len,
                    ngx_http_llm_gateway_wall_ms());
        if (piece == NULL) {
            e->truncated = 1;
            break;
        }

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
}


/*
 * The first request ended: its response is a result to replay if it is a
 * whole 2xx; otherwise the next request with its key runs.
 */

void
ngx_http_llm_gateway_idem_end(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_uint_t                         status;
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

    ngx_shmtx_lock(&z->shpool->mutex);

    if (e->status == 0) {
        e->status = status;
    }

    e->done = 1;
    e->replayable = status >= NGX_HTTP_OK && status < 300 && !e->truncated
                    && ctx->response_done && !ctx->upstream_failed
                    && !ctx->client_closed;
    e->expires = ngx_http_llm_gateway_wall_ms()
                 + (e->replayable ? (int64_t) lmcf->idem_retain : 0);

    if (!e->replayable && e->refs == 0) {
        ngx_http_llm_gateway_idem_free(z, e);
    }

    ngx_shmtx_unlock(&z->shpool->mutex);
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
    u_char                            *p;
    size_t                             len, skip;
    ngx_int_t                          rc;
    ngx_str_t                          v;
    ngx_buf_t                         *b;
    ngx_uint_t                         done, last, status;
    ngx_chain_t                        out;
    ngx_event_t                       *wev;
    ngx_http_llm_gateway_ctx_t        *ctx;
    ngx_http_llm_gateway_idem_t       *e;
    ngx_http_llm_gateway_piece_t      *piece;
    ngx_http_llm_gateway_idem_zone_t  *z;

    ctx = ngx_http_llm_gateway_get_ctx(r);
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

    ngx_shmtx_lock(&z->shpool->mutex);

    status = e->status;
    done = e->done;

    if (status && ctx->idem_sent < e->size) {
        len = e->size - ctx->idem_sent;

        b = ngx_create_temp_buf(r->pool, len);

        if (b != NULL) {
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
        }
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

    if (status && b == NULL && ctx->idem_sent < e->size) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    if (!r->header_sent && status) {
        r->headers_out.content_type_len = r->headers_out.content_type.len;
        r->headers_out.content_length_n = -1;

        ngx_str_set(&v, "true");

        if (ngx_http_llm_gateway_add_header(r, "Idempotent-Replayed", &v)
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

    if (b != NULL || (done && status)) {

        if (b == NULL) {
            b = ngx_calloc_buf(r->pool);
            if (b == NULL) {
                ngx_http_finalize_request(r, NGX_ERROR);
                return;
            }
        }

        /* the chunked filter moves last_buf to its own buffer: kept here */
        last = done && ctx->idem_sent == e->size;

        b->flush = 1;
        b->last_buf = last;

        out.buf = b;
        out.next = NULL;

        rc = ngx_http_output_filter(r, &out);

        if (rc == NGX_ERROR) {
            ngx_http_finalize_request(r, NGX_ERROR);
            return;
        }

        if (last) {
            ngx_http_finalize_request(r, rc);
            return;
        }
    }

    ngx_add_timer(wev, NGX_HTTP_LLM_GATEWAY_IDEM_POLL);
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

    e->refs--;

    if (e->refs == 0 && e->done && !e->replayable) {
        ngx_http_llm_gateway_idem_free(z, e);
    }

    ngx_shmtx_unlock(&z->shpool->mutex);
}


static ngx_http_llm_gateway_idem_t *
ngx_http_llm_gateway_idem_find(ngx_http_llm_gateway_idem_zone_t *z,
    uint32_t hash, int64_t tenant_id, ngx_str_t *key)
{
    ngx_rbtree_node_t            *node, *sentinel;
    ngx_http_llm_gateway_idem_t  *e;

    node = z->sh->rbtree.root;
    sentinel = z->sh->rbtree.sentinel;

    while (node != sentinel) {

        if (hash < node->key) {
            node = node->left;
            continue;
        }

        if (hash > node->key) {
            node = node->right;
            continue;
        }

        e = (ngx_http_llm_gateway_idem_t *) node;

        if (e->tenant_id == tenant_id && e->key_len == key->len
            && ngx_memcmp(e->key, key->data, key->len) == 0)
        {
            return e;
        }

        /* the same hash: equal keys go right, as insert_value puts them */
        node = node->right;
    }

    return NULL;
}


static void
ngx_http_llm_gateway_idem_rbtree_insert_value(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel)
{
    ngx_rbtree_node_t  **p;

    for ( ;; ) {
        p = (node->key < temp->key) ? &temp->left : &temp->right;

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


/* under the lock: room is made from the oldest results when needed */

static void *
ngx_http_llm_gateway_idem_alloc(ngx_http_llm_gateway_idem_zone_t *z,
    size_t size, int64_t now)
{
    void  *p;

    p = ngx_slab_alloc_locked(z->shpool, size);

    if (p == NULL) {
        ngx_http_llm_gateway_idem_expire(z, 0, 16);
        p = ngx_slab_alloc_locked(z->shpool, size);
    }

    return p;
}


/*
 * n at most from the least recently used end: those expired by now, or
 * with now 0 any that is done and unread, to make room.
 */

static void
ngx_http_llm_gateway_idem_expire(ngx_http_llm_gateway_idem_zone_t *z,
    int64_t now, ngx_uint_t n)
{
    ngx_queue_t                  *q, *prev;
    ngx_http_llm_gateway_idem_t  *e;

    for (q = ngx_queue_last(&z->sh->queue);
         q != ngx_queue_sentinel(&z->sh->queue) && n;
         q = prev)
    {
        prev = ngx_queue_prev(q);
        e = ngx_queue_data(q, ngx_http_llm_gateway_idem_t, queue);

        if (!e->done || e->refs || (now && e->expires > now)) {
            continue;
        }

        ngx_http_llm_gateway_idem_free(z, e);
        n--;
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

    ngx_queue_remove(&e->queue);
    ngx_rbtree_delete(&z->sh->rbtree, &e->node);
    ngx_slab_free_locked(z->shpool, e);
}
