
#ifndef _NGX_HTTP_LLM_GATEWAY_SETTLE_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_SETTLE_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


ngx_int_t ngx_http_llm_gateway_settle_handler(ngx_http_request_t *r);
void ngx_http_llm_gateway_settle(ngx_http_llm_gateway_ctx_t *ctx);
void ngx_http_llm_gateway_settle_cleanup(ngx_http_llm_gateway_ctx_t *ctx);
void ngx_http_llm_gateway_settle_reaper_init(ngx_cycle_t *cycle);


#endif /* _NGX_HTTP_LLM_GATEWAY_SETTLE_H_INCLUDED_ */
