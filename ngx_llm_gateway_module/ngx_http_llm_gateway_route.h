
/*
 * What the upstream side's files share: why a backend is left out of the
 * candidates, and the routing they all come back to.
 */

#ifndef _NGX_HTTP_LLM_GATEWAY_ROUTE_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_ROUTE_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_backend.h"


/* what keeps a backend from the candidates, in the order it is told */
enum {
    NGX_HTTP_LLM_GATEWAY_UP = 0,
    NGX_HTTP_LLM_GATEWAY_BUSY,
    NGX_HTTP_LLM_GATEWAY_SPENT,
    NGX_HTTP_LLM_GATEWAY_OPEN,
    NGX_HTTP_LLM_GATEWAY_LIMITED
};


/* whose requests: a breaker counts failures by tenant */
#define ngx_http_llm_gateway_tenant(ctx)                                     \
    ((ctx)->key ? (ctx)->key->tenant_id : 0)


ngx_http_llm_gateway_member_t *ngx_http_llm_gateway_route_choose(
    ngx_http_request_t *r, ngx_http_llm_gateway_ctx_t *ctx, int64_t now);
ngx_int_t ngx_http_llm_gateway_route_use(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_member_t *m);
void ngx_http_llm_gateway_route_unserved(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_uint_t state, int64_t until,
    int64_t now);
ngx_uint_t ngx_http_llm_gateway_route_state(
    ngx_http_llm_gateway_backend_t *b, int64_t tenant, int64_t now,
    ngx_uint_t take, ngx_uint_t *trials, int64_t taken, int64_t *until);
void ngx_http_llm_gateway_route_tried(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, const char *code);
ngx_uint_t ngx_http_llm_gateway_route_diagnostics(ngx_http_request_t *r);
ngx_int_t ngx_http_llm_gateway_route(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
void ngx_http_llm_gateway_route_done(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_backend_t *b, int64_t tokens);
ngx_int_t ngx_http_llm_gateway_route_translatable(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);


#endif /* _NGX_HTTP_LLM_GATEWAY_ROUTE_H_INCLUDED_ */
