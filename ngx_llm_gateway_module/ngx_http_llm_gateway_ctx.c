
/*
 * The request's context: made at admission, found again after an internal
 * redirect, and settled by its pool's cleanup whatever happens to the
 * request.  The settling is the settle gate's: it sets the handler at init,
 * as a filter sets the next one.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_ctx.h"


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


static void
ngx_http_llm_gateway_ctx_cleanup(void *data)
{
    ngx_http_llm_gateway_ctx_end(data);
}
