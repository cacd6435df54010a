
#ifndef _NGX_HTTP_LLM_GATEWAY_FILTER_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_FILTER_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


ngx_int_t ngx_http_llm_gateway_filter_init(ngx_conf_t *cf);
void ngx_http_llm_gateway_filter_response_end(ngx_http_llm_gateway_ctx_t *ctx);


#endif /* _NGX_HTTP_LLM_GATEWAY_FILTER_H_INCLUDED_ */
