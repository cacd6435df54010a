
#ifndef _NGX_HTTP_LLM_GATEWAY_ADMIT_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_ADMIT_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


ngx_int_t ngx_http_llm_gateway_admit_handler(ngx_http_request_t *r);


#endif /* _NGX_HTTP_LLM_GATEWAY_ADMIT_H_INCLUDED_ */
