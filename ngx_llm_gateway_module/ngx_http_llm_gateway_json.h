
#ifndef _NGX_HTTP_LLM_GATEWAY_JSON_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_JSON_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


void ngx_http_llm_gateway_json_init(void);
ngx_pool_t *ngx_http_llm_gateway_json_pool(ngx_pool_t *pool);
char *ngx_http_llm_gateway_json_grow(void *data, char *old, size_t len,
    size_t size);


#endif /* _NGX_HTTP_LLM_GATEWAY_JSON_H_INCLUDED_ */
