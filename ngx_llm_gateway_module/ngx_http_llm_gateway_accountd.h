
#ifndef _NGX_HTTP_LLM_GATEWAY_ACCOUNTD_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_ACCOUNTD_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


ngx_int_t ngx_http_llm_gateway_accountd_init(ngx_cycle_t *cycle);
void ngx_http_llm_gateway_accountd_exit(ngx_cycle_t *cycle);
ngx_uint_t ngx_http_llm_gateway_accountd_up(void);
ngx_uint_t ngx_http_llm_gateway_accountd_sent(void);
ngx_int_t ngx_http_llm_gateway_accountd_lease(llm_lease_t *l);
void ngx_http_llm_gateway_accountd_worker(ngx_http_llm_gateway_zone_t *zone,
    int64_t now);


#endif /* _NGX_HTTP_LLM_GATEWAY_ACCOUNTD_H_INCLUDED_ */
