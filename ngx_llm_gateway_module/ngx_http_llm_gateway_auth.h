
#ifndef _NGX_HTTP_LLM_GATEWAY_AUTH_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_AUTH_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


ngx_int_t ngx_http_llm_gateway_auth(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
ngx_shm_zone_t *ngx_http_llm_gateway_auth_addrs_add(ngx_conf_t *cf,
    ngx_str_t *name, size_t size);
ngx_http_llm_gateway_addrs_t *ngx_http_llm_gateway_auth_addrs_next(
    ngx_list_part_t **part, ngx_uint_t *i);
ngx_int_t ngx_http_llm_gateway_auth_pass_only(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
void ngx_http_llm_gateway_auth_pass_restore(ngx_http_llm_gateway_ctx_t *ctx);
ngx_uint_t ngx_http_llm_gateway_auth_log_allowed(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
ngx_uint_t ngx_http_llm_gateway_auth_model_allowed(
    ngx_http_llm_gateway_ctx_t *ctx, const char *model, size_t len);


#endif /* _NGX_HTTP_LLM_GATEWAY_AUTH_H_INCLUDED_ */
