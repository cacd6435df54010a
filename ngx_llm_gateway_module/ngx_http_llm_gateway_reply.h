
#ifndef _NGX_HTTP_LLM_GATEWAY_REPLY_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_REPLY_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


/* the error formats, what ngx_http_llm_gateway_reply_dialect() returns */
#define NGX_HTTP_LLM_GATEWAY_OPENAI     1
#define NGX_HTTP_LLM_GATEWAY_ANTHROPIC  2


void ngx_http_llm_gateway_reply_too_large(ngx_http_llm_gateway_ctx_t *ctx);
void ngx_http_llm_gateway_reply_unavailable(ngx_http_llm_gateway_ctx_t *ctx,
    const char *code, const char *message, int64_t seconds);
u_char *ngx_http_llm_gateway_reply_log_text(ngx_pool_t *pool, u_char *s,
    size_t len, size_t max, ngx_str_t *out);
ngx_int_t ngx_http_llm_gateway_reply_error_handler(ngx_http_request_t *r);
u_char *ngx_http_llm_gateway_reply_safe(ngx_pool_t *pool, u_char *s, size_t len,
    size_t max, ngx_str_t *out);
ngx_int_t ngx_http_llm_gateway_reply_replace_413(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t **pctx);
ngx_int_t ngx_http_llm_gateway_reply_send(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
void ngx_http_llm_gateway_reply_refuse(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_uint_t status, const char *type, const char *code, const char *param,
    const char *message);
ngx_int_t ngx_http_llm_gateway_reply_ratelimit_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
ngx_int_t ngx_http_llm_gateway_reply_sunset_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
ngx_int_t ngx_http_llm_gateway_reply_add_header(ngx_http_request_t *r,
    char *name, ngx_str_t *value);
ngx_int_t ngx_http_llm_gateway_reply_error_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
ngx_uint_t ngx_http_llm_gateway_reply_dialect(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
ngx_int_t ngx_http_llm_gateway_reply_id_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);


#endif /* _NGX_HTTP_LLM_GATEWAY_REPLY_H_INCLUDED_ */
