
#ifndef _NGX_HTTP_LLM_GATEWAY_ZONE_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_ZONE_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


ngx_int_t ngx_http_llm_gateway_zone_init(ngx_shm_zone_t *shm_zone, void *data);
ngx_http_llm_gateway_zone_t *ngx_http_llm_gateway_zone_next(
    ngx_http_llm_gateway_main_conf_t *lmcf, ngx_list_part_t **part,
    ngx_uint_t *i);
void ngx_http_llm_gateway_zone_name_node(ngx_http_llm_gateway_node_t *node,
    ngx_http_llm_gateway_key_t *key);
void ngx_http_llm_gateway_zone_count(ngx_http_llm_gateway_node_t *node,
    ngx_uint_t status, llm_settle_t *st, int64_t cost);
void ngx_http_llm_gateway_zone_count_refused(ngx_http_llm_gateway_ctx_t *ctx);
void *ngx_http_llm_gateway_zone_alloc(ngx_http_llm_gateway_zone_t *zone,
    size_t size);
ngx_http_llm_gateway_node_t *ngx_http_llm_gateway_zone_lookup(
    ngx_http_llm_gateway_zone_t *zone, int64_t tenant_id, ngx_uint_t create);
ngx_shm_zone_t *ngx_http_llm_gateway_zone_add(ngx_conf_t *cf, ngx_str_t *value,
    void *tag);


#endif /* _NGX_HTTP_LLM_GATEWAY_ZONE_H_INCLUDED_ */
