
/*
 * cJSON's allocator: the request pool while the gateway parses, malloc
 * outside such a bracket.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_json.h"

#include <cJSON.h>


static void *ngx_http_llm_gateway_json_alloc(size_t size);
static void ngx_http_llm_gateway_json_free(void *p);


/* the pool cJSON allocates from while the gateway parses; see json_pool() */
static ngx_pool_t  *ngx_http_llm_gateway_cjson_pool;


/*
 * cJSON allocates through global hooks: while the gateway parses, they take
 * memory from the request pool, which goes with the request.  Outside such
 * a bracket (a settle in the pool cleanup, where r->pool is gone) they use
 * malloc and free.  Every bracket encloses whole parse-and-delete cycles,
 * so memory is always freed by the allocator that gave it.
 */

ngx_pool_t *
ngx_http_llm_gateway_json_pool(ngx_pool_t *pool)
{
    ngx_pool_t  *prev;

    /* the bracket being left, for one opened inside another */
    prev = ngx_http_llm_gateway_cjson_pool;
    ngx_http_llm_gateway_cjson_pool = pool;

    return prev;
}


static void *
ngx_http_llm_gateway_json_alloc(size_t size)
{
    if (ngx_http_llm_gateway_cjson_pool == NULL) {
        return malloc(size);
    }

    return ngx_palloc(ngx_http_llm_gateway_cjson_pool, size);
}


static void
ngx_http_llm_gateway_json_free(void *p)
{
    if (ngx_http_llm_gateway_cjson_pool == NULL) {
        free(p);
        return;
    }

    /* large blocks go back at once, small ones with the pool */
    (void) ngx_pfree(ngx_http_llm_gateway_cjson_pool, p);
}


void
ngx_http_llm_gateway_json_init(void)
{
    cJSON_Hooks  hooks;

    hooks.malloc_fn = ngx_http_llm_gateway_json_alloc;
    hooks.free_fn = ngx_http_llm_gateway_json_free;
    cJSON_InitHooks(&hooks);
}


/*
 * What a core keeps beyond its own state (an event, a text) grows in the
 * request pool: a buffer of size bytes holding the len of old, whose
 * block, a large allocation once it grows, goes back.
 */

char *
ngx_http_llm_gateway_json_grow(void *data, char *old, size_t len,
    size_t size)
{
    u_char      *p;
    ngx_pool_t  *pool = data;

    p = ngx_pnalloc(pool, size);
    if (p == NULL) {
        return NULL;
    }

    if (old) {
        ngx_memcpy(p, old, len);
        ngx_pfree(pool, old);
    }

    return (char *) p;
}
