
#ifndef _NGX_HTTP_LLM_GATEWAY_BACKEND_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_BACKEND_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


char *ngx_http_llm_gateway_backend_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_http_llm_gateway_backend_role_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_http_llm_gateway_backend_t *ngx_http_llm_gateway_backend_find(
    ngx_http_llm_gateway_main_conf_t *lmcf, ngx_str_t *name);
ngx_http_llm_gateway_role_t *ngx_http_llm_gateway_backend_role_find(
    ngx_http_llm_gateway_main_conf_t *lmcf, u_char *name, size_t len);
void ngx_http_llm_gateway_backend_snapshot(ngx_http_llm_gateway_backend_t *b,
    ngx_http_llm_gateway_backend_snap_t *s);


#endif /* _NGX_HTTP_LLM_GATEWAY_BACKEND_H_INCLUDED_ */
