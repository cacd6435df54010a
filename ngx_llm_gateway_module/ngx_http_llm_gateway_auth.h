
#ifndef _NGX_HTTP_LLM_GATEWAY_AUTH_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_AUTH_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


/*
 * A client address (an IPv6 prefix) that sent bad keys, in a zone of its
 * own (llm_gateway_bad_keys zone=): a flood of them takes nothing from
 * the tenants and the requests in flight.  A zone layout: its size is
 * what bench/micro prints.
 */
typedef struct {
    ngx_rbtree_node_t            node;      /* key: crc32 of the address */
    ngx_queue_t                  queue;     /* LRU: expiry, eviction */
    int64_t                      start_ms;  /* the window began */
    ngx_uint_t                   failures;
    int64_t                      check_s;   /* the second of checks */
    int64_t                      log_s;     /* the second of log lines */
    ngx_uint_t                   checks;    /* keys looked up while locked */
    ngx_uint_t                   logs;      /* refusals logged */
    u_short                      len;
    u_char                       addr[16];
} ngx_http_llm_gateway_addr_t;


ngx_int_t ngx_http_llm_gateway_auth(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
ngx_shm_zone_t *ngx_http_llm_gateway_auth_addrs_add(ngx_conf_t *cf,
    ngx_str_t *name, size_t size);
ngx_http_llm_gateway_addrs_t *ngx_http_llm_gateway_auth_addrs_next(
    ngx_list_part_t **part, ngx_uint_t *i);
ngx_int_t ngx_http_llm_gateway_auth_pass_only(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
void ngx_http_llm_gateway_auth_pass_restore(ngx_http_llm_gateway_ctx_t *ctx);
ngx_uint_t ngx_http_llm_gateway_auth_log_allowed(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
ngx_uint_t ngx_http_llm_gateway_auth_model_allowed(
    ngx_http_llm_gateway_ctx_t *ctx, const char *model, size_t len);


#endif /* _NGX_HTTP_LLM_GATEWAY_AUTH_H_INCLUDED_ */
