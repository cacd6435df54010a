
/*
 * The request's context: made at admission, found again after an internal
 * redirect, and settled by its pool's cleanup whatever happens to the
 * request.  The settling is the settle gate's: it sets the handler at init,
 * as a filter sets the next one.  The request's id is nginx's $request_id,
 * drawn here from a worker's store of random bytes when nothing read it
 * before.
 */


#include <openssl/rand.h>

#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_clock.h"
#include "ngx_http_llm_gateway_ctx.h"


/* 16 bytes a request id, as nginx's; 256 ids a draw from OpenSSL */
#define NGX_HTTP_LLM_GATEWAY_ID_BYTES   16
#define NGX_HTTP_LLM_GATEWAY_ID_STORE   4096


static void ngx_http_llm_gateway_ctx_cleanup(void *data);


ngx_http_llm_gateway_ctx_end_pt  ngx_http_llm_gateway_ctx_end;


ngx_http_llm_gateway_ctx_t *
ngx_http_llm_gateway_ctx_create(ngx_http_request_t *r)
{
    ngx_pool_cleanup_t          *cln;
    ngx_http_llm_gateway_ctx_t  *ctx;

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_gateway_ctx_t));
    if (ctx == NULL) {
        return NULL;
    }

    /*
     * The cleanup settles what the log phase did not, and finds the
     * context again after an internal redirect, which clears r->ctx.
     */
    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NULL;
    }

    cln->handler = ngx_http_llm_gateway_ctx_cleanup;
    cln->data = ctx;

    ctx->request = r;
    ctx->status = NGX_DECLINED;

    ngx_http_set_ctx(r, ctx, ngx_http_llm_gateway_module);

    return ctx;
}


/*
 * The context of the request, also after an internal redirect (error_page,
 * try_files, X-Accel-Redirect), which clears r->ctx: it is found again
 * through the pool cleanup that settles it, so a request is admitted and
 * settled once whatever locations it passes through.
 */

ngx_http_llm_gateway_ctx_t *
ngx_http_llm_gateway_ctx_get(ngx_http_request_t *r)
{
    ngx_pool_cleanup_t          *cln;
    ngx_http_llm_gateway_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_gateway_module);

    if (ctx != NULL || !r->internal || r->pool == NULL) {
        return ctx;
    }

    for (cln = r->pool->cleanup; cln; cln = cln->next) {
        if (cln->handler == ngx_http_llm_gateway_ctx_cleanup) {
            ctx = cln->data;
            ngx_http_set_ctx(r, ctx, ngx_http_llm_gateway_module);
            return ctx;
        }
    }

    return NULL;
}


/*
 * The request's id: $request_id if something evaluated it already (a map,
 * a log format read early), else 16 bytes in hex, as nginx makes it,
 * stored as its value so that the logs, the upstream's header and the
 * ledger name the request alike.  nginx draws its 16 bytes with a call to
 * RAND_bytes() each, which takes OpenSSL's locks and looks its generator
 * up every time (a few % of the worker); here one call fills a store a
 * worker has of its own (static: filled after the fork, never shared).
 * The first 6 bytes are the wall clock's milliseconds, big-endian, the
 * other 10 random (80 bits: unguessable, and unique among any number of
 * requests of a millisecond): the ledger's index of request ids then
 * grows at its right edge, in pages in memory, where random ids touched
 * a page anywhere in it at each insertion and each look-up.
 */

ngx_int_t
ngx_http_llm_gateway_ctx_request_id(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_int_t index)
{
    u_char                     *p;
    int64_t                     now;
    ngx_uint_t                  i;
    ngx_http_variable_value_t  *vv;

    static u_char   store[NGX_HTTP_LLM_GATEWAY_ID_STORE];
    static size_t   used = NGX_HTTP_LLM_GATEWAY_ID_STORE;

    vv = &r->variables[index];

    if (!vv->valid || vv->not_found) {
        if (used == NGX_HTTP_LLM_GATEWAY_ID_STORE) {
            if (RAND_bytes(store, NGX_HTTP_LLM_GATEWAY_ID_STORE) != 1) {
                ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                              "llm gateway: RAND_bytes() failed");
                return NGX_ERROR;
            }

            used = 0;
        }

        p = ngx_pnalloc(r->pool, 2 * NGX_HTTP_LLM_GATEWAY_ID_BYTES);
        if (p == NULL) {
            return NGX_ERROR;
        }

        now = ngx_http_llm_gateway_clock_wall_ms();

        for (i = 0; i < 6; i++) {
            store[used + i] = (u_char) (now >> (40 - 8 * i));
        }

        ngx_hex_dump(p, store + used, NGX_HTTP_LLM_GATEWAY_ID_BYTES);
        /* an id once: its bytes go */
        ngx_memzero(store + used, NGX_HTTP_LLM_GATEWAY_ID_BYTES);
        used += NGX_HTTP_LLM_GATEWAY_ID_BYTES;

        vv->len = 2 * NGX_HTTP_LLM_GATEWAY_ID_BYTES;
        vv->data = p;
        vv->valid = 1;
        vv->no_cacheable = 0;
        vv->not_found = 0;
    }

    ctx->request_id.data = vv->data;
    ctx->request_id.len = vv->len;

    return NGX_OK;
}


static void
ngx_http_llm_gateway_ctx_cleanup(void *data)
{
    ngx_http_llm_gateway_ctx_end(data);
}
