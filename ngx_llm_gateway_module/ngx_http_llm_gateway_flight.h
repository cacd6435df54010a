
#ifndef _NGX_HTTP_LLM_GATEWAY_FLIGHT_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_FLIGHT_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


ngx_int_t ngx_http_llm_gateway_flight_start(ngx_http_llm_gateway_ctx_t *ctx);
void ngx_http_llm_gateway_flight_note(ngx_http_llm_gateway_ctx_t *ctx);


#endif /* _NGX_HTTP_LLM_GATEWAY_FLIGHT_H_INCLUDED_ */
