
#ifndef _NGX_HTTP_LLM_GATEWAY_PACE_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_PACE_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


ngx_int_t ngx_http_llm_gateway_pace(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);


#endif /* _NGX_HTTP_LLM_GATEWAY_PACE_H_INCLUDED_ */
