
#ifndef _NGX_HTTP_LLM_GATEWAY_REQUEST_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_REQUEST_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


ngx_table_elt_t *ngx_http_llm_gateway_request_find_header(ngx_http_request_t *r,
    ngx_str_t *name);
ngx_int_t ngx_http_llm_gateway_request_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *body);
ngx_http_llm_gateway_alias_t *ngx_http_llm_gateway_request_find_alias(
    ngx_http_llm_gateway_loc_conf_t *llcf, char *model, size_t len);
ngx_http_llm_gateway_tier_t *ngx_http_llm_gateway_request_find_tier(
    ngx_http_llm_gateway_loc_conf_t *llcf, ngx_str_t *name);
const char *ngx_http_llm_gateway_request_limit_name(
    ngx_http_llm_gateway_ctx_t *ctx);
ngx_int_t ngx_http_llm_gateway_request_rewrite_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *body);
ngx_int_t ngx_http_llm_gateway_request_identity(ngx_http_request_t *r);
ngx_int_t ngx_http_llm_gateway_request_reprepare(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);


#endif /* _NGX_HTTP_LLM_GATEWAY_REQUEST_H_INCLUDED_ */
