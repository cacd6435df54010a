
#ifndef _NGX_HTTP_LLM_GATEWAY_CTX_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_CTX_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


/* what the request pool's cleanup calls: settling, set at init */
typedef void (*ngx_http_llm_gateway_ctx_end_pt)(
    ngx_http_llm_gateway_ctx_t *ctx);

extern ngx_http_llm_gateway_ctx_end_pt  ngx_http_llm_gateway_ctx_end;

ngx_http_llm_gateway_ctx_t *ngx_http_llm_gateway_ctx_create(
    ngx_http_request_t *r);
ngx_http_llm_gateway_ctx_t *ngx_http_llm_gateway_ctx_get(ngx_http_request_t *r);
ngx_int_t ngx_http_llm_gateway_ctx_request_id(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_int_t index);


#endif /* _NGX_HTTP_LLM_GATEWAY_CTX_H_INCLUDED_ */
