
#ifndef _NGX_HTTP_LLM_GATEWAY_MODELS_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_MODELS_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


void ngx_http_llm_gateway_models_init(void);
ngx_int_t ngx_http_llm_gateway_models_path(ngx_http_request_t *r,
    ngx_str_t *id);
void ngx_http_llm_gateway_models_unknown(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
ngx_int_t ngx_http_llm_gateway_models_send(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *id);


#endif /* _NGX_HTTP_LLM_GATEWAY_MODELS_H_INCLUDED_ */
