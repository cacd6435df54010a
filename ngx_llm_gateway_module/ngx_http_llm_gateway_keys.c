
/*
 * The worker's key table: the one from llm_gateway_keys at start, then
 * each snapshot accountd sends, built aside and swapped in whole.  A
 * request holds the table it was admitted with until it settles.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_keys.h"


/* a key set larger than this is refused: about 200 MB per worker */
#define NGX_HTTP_LLM_GATEWAY_KEYS_MAX      2000000


static void ngx_http_llm_gateway_keys_free(ngx_http_llm_gateway_table_t *t);


/* the table lookups use, and the one being received */
static ngx_http_llm_gateway_table_t  *ngx_http_llm_gateway_active;
static ngx_http_llm_gateway_table_t  *ngx_http_llm_gateway_building;


/* the table new requests take: the last one received, or the file's */

ngx_http_llm_gateway_table_t *
ngx_http_llm_gateway_keys_table(ngx_http_llm_gateway_main_conf_t *lmcf)
{
    return ngx_http_llm_gateway_active ? ngx_http_llm_gateway_active
                                       : &lmcf->table;
}


ngx_http_llm_gateway_key_t *
ngx_http_llm_gateway_keys_find(ngx_http_llm_gateway_table_t *t, u_char *hash)
{
    ngx_int_t                    rc;
    ngx_uint_t                   lo, hi, mid;
    ngx_http_llm_gateway_key_t  *keys;

    keys = t->keys;
    lo = 0;
    hi = t->nkeys;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;

        rc = ngx_memcmp(hash, keys[mid].hash, LLM_KEY_HASH_LEN);

        if (rc == 0) {
            return &keys[mid];
        }

        if (rc < 0) {
            hi = mid;

        } else {
            lo = mid + 1;
        }
    }

    return NULL;
}


/*
 * Key sets from accountd.  One is received frame by frame into a pool of
 * its own, in the order accountd sends (ascending hash, checked), and
 * replaces the active table only once whole.
 */

void
ngx_http_llm_gateway_keys_init(ngx_http_llm_gateway_main_conf_t *lmcf)
{
    /* the generation was read with the file */
    lmcf->table.pool = NULL;
    lmcf->table.keys = lmcf->keys.elts;
    lmcf->table.nkeys = lmcf->keys.nelts;
    lmcf->table.refs = 0;

    ngx_http_llm_gateway_active = &lmcf->table;
    ngx_http_llm_gateway_building = NULL;
}


void
ngx_http_llm_gateway_keys_release(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_http_llm_gateway_table_t  *t;

    t = ctx->table;

    if (t == NULL) {
        return;
    }

    ctx->table = NULL;
    ctx->key = NULL;

    if (--t->refs == 0 && t->retired) {
        ngx_http_llm_gateway_keys_free(t);
    }
}


ngx_int_t
ngx_http_llm_gateway_keys_begin(uint64_t generation, uint32_t count,
    ngx_log_t *log)
{
    ngx_pool_t                    *pool;
    ngx_http_llm_gateway_table_t  *t;

    ngx_http_llm_gateway_keys_abort();

    /* accountd is trusted, but a wrong count must not ask for gigabytes */
    if (count > NGX_HTTP_LLM_GATEWAY_KEYS_MAX) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "llm gateway: key set of %uD keys refused, the most "
                      "is %d", count, NGX_HTTP_LLM_GATEWAY_KEYS_MAX);
        return NGX_ERROR;
    }

    pool = ngx_create_pool(16384, log);
    if (pool == NULL) {
        return NGX_ERROR;
    }

    t = ngx_pcalloc(pool, sizeof(ngx_http_llm_gateway_table_t));
    if (t == NULL) {
        ngx_destroy_pool(pool);
        return NGX_ERROR;
    }

    t->pool = pool;
    t->generation = generation;

    if (count) {
        t->keys = ngx_palloc(pool, count * sizeof(ngx_http_llm_gateway_key_t));
        if (t->keys == NULL) {
            ngx_destroy_pool(pool);
            return NGX_ERROR;
        }
    }

    /* the count accountd announced, to be met exactly */
    t->expected = count;

    ngx_http_llm_gateway_building = t;

    return NGX_OK;
}


ngx_int_t
ngx_http_llm_gateway_keys_add(llm_key_entry_t *e)
{
    ngx_str_t                      *str[3];
    ngx_uint_t                      i;
    const char                     *from[3];
    ngx_http_llm_gateway_key_t     *k;
    ngx_http_llm_gateway_table_t   *t;

    t = ngx_http_llm_gateway_building;

    if (t == NULL || t->nkeys == t->expected) {
        return NGX_ERROR;
    }

    k = &t->keys[t->nkeys];

    if (t->nkeys
        && ngx_memcmp(k[-1].hash, e->hash, LLM_KEY_HASH_LEN) >= 0)
    {
        return NGX_ERROR;
    }

    ngx_memcpy(k->hash, e->hash, LLM_KEY_HASH_LEN);
    k->key_id = e->key_id;
    k->tenant_id = e->tenant_id;
    k->expires = (time_t) e->expires;
    k->caps = e->caps;

    str[0] = &k->tier;
    str[1] = &k->tenant;
    str[2] = &k->models;
    from[0] = e->tier;
    from[1] = e->tenant;
    from[2] = e->models;

    for (i = 0; i < 3; i++) {
        str[i]->len = ngx_strlen(from[i]);
        str[i]->data = ngx_pnalloc(t->pool, str[i]->len + 1);

        if (str[i]->data == NULL) {
            return NGX_ERROR;
        }

        /* NUL-terminated: llm_key_model_allowed() takes C strings */
        ngx_cpystrn(str[i]->data, (u_char *) from[i], str[i]->len + 1);
    }

    t->nkeys++;

    return NGX_OK;
}


ngx_int_t
ngx_http_llm_gateway_keys_end(uint64_t generation, uint32_t count,
    ngx_log_t *log)
{
    ngx_http_llm_gateway_table_t  *t, *old;

    t = ngx_http_llm_gateway_building;

    if (t == NULL || t->generation != generation || t->nkeys != count
        || t->expected != count)
    {
        return NGX_ERROR;
    }

    ngx_http_llm_gateway_building = NULL;

    old = ngx_http_llm_gateway_active;

    /* older than the table (the file the worker started with, say) */
    if (old != NULL && generation <= old->generation) {
        ngx_log_error(NGX_LOG_INFO, log, 0,
                      "llm gateway: key set %uL from accountd is not newer "
                      "than %uL, ignored", generation, old->generation);
        ngx_http_llm_gateway_keys_free(t);
        return NGX_OK;
    }

    ngx_http_llm_gateway_active = t;

    if (old != NULL && old->pool != NULL) {
        old->retired = 1;

        if (old->refs == 0) {
            ngx_http_llm_gateway_keys_free(old);
        }
    }

    ngx_log_error(NGX_LOG_INFO, log, 0,
                  "llm gateway: key set %uL from accountd, %ui keys",
                  generation, t->nkeys);

    return NGX_OK;
}


void
ngx_http_llm_gateway_keys_abort(void)
{
    if (ngx_http_llm_gateway_building) {
        ngx_http_llm_gateway_keys_free(ngx_http_llm_gateway_building);
        ngx_http_llm_gateway_building = NULL;
    }
}


static void
ngx_http_llm_gateway_keys_free(ngx_http_llm_gateway_table_t *t)
{
    /* the table itself lives in its pool */
    ngx_destroy_pool(t->pool);
}
