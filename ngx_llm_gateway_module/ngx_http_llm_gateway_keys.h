
#ifndef _NGX_HTTP_LLM_GATEWAY_KEYS_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_KEYS_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


void ngx_http_llm_gateway_keys_init(ngx_http_llm_gateway_main_conf_t *lmcf);
void ngx_http_llm_gateway_keys_release(ngx_http_llm_gateway_ctx_t *ctx);
ngx_int_t ngx_http_llm_gateway_keys_begin(uint64_t generation, uint32_t count,
    ngx_log_t *log);
ngx_int_t ngx_http_llm_gateway_keys_add(llm_key_entry_t *e);
ngx_int_t ngx_http_llm_gateway_keys_end(uint64_t generation, uint32_t count,
    ngx_log_t *log);
void ngx_http_llm_gateway_keys_abort(void);
ngx_http_llm_gateway_table_t *ngx_http_llm_gateway_keys_table(
    ngx_http_llm_gateway_main_conf_t *lmcf);
ngx_http_llm_gateway_key_t *ngx_http_llm_gateway_keys_find(
    ngx_http_llm_gateway_table_t *t, u_char *hash);


#endif /* _NGX_HTTP_LLM_GATEWAY_KEYS_H_INCLUDED_ */
