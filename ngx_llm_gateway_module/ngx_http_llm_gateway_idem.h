
#ifndef _NGX_HTTP_LLM_GATEWAY_IDEM_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_IDEM_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


char *ngx_http_llm_gateway_idem_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_int_t ngx_http_llm_gateway_idem_begin(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
void ngx_http_llm_gateway_idem_keep(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_chain_t *in);
void ngx_http_llm_gateway_idem_end(ngx_http_llm_gateway_ctx_t *ctx);
ngx_int_t ngx_http_llm_gateway_idem_serve(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);


#endif /* _NGX_HTTP_LLM_GATEWAY_IDEM_H_INCLUDED_ */
