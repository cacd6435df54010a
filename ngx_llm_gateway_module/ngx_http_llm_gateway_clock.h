
#ifndef _NGX_HTTP_LLM_GATEWAY_CLOCK_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_CLOCK_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


int64_t ngx_http_llm_gateway_clock_now_ms(void);
int64_t ngx_http_llm_gateway_clock_wall_ms(void);


#endif /* _NGX_HTTP_LLM_GATEWAY_CLOCK_H_INCLUDED_ */
