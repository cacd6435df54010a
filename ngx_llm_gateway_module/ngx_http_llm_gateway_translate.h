
#ifndef _NGX_HTTP_LLM_GATEWAY_TRANSLATE_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_TRANSLATE_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


llm_api_e ngx_http_llm_gateway_translate_api(ngx_http_request_t *r,
    ngx_http_llm_gateway_backend_t *b);
void ngx_http_llm_gateway_translate_use(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
ngx_uint_t ngx_http_llm_gateway_translate_can(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_backend_t *b,
    ngx_str_t *model);
void ngx_http_llm_gateway_translate_refusal(ngx_http_llm_gateway_ctx_t *ctx,
    const char **param, const char **message);
ngx_int_t ngx_http_llm_gateway_translate_request(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *out);
void ngx_http_llm_gateway_translate_uri(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *uri);
ngx_int_t ngx_http_llm_gateway_translate_stream_init(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
ngx_int_t ngx_http_llm_gateway_translate_stream(ngx_http_llm_gateway_ctx_t *ctx,
    u_char *p, size_t len, ngx_uint_t one, size_t *used, llm_tx_out_pt out,
    void *data);
ngx_int_t ngx_http_llm_gateway_translate_stream_end(
    ngx_http_llm_gateway_ctx_t *ctx, llm_tx_out_pt out, void *data,
    ngx_uint_t *done);
ngx_int_t ngx_http_llm_gateway_translate_stream_fail(
    ngx_http_llm_gateway_ctx_t *ctx, const char *message, llm_tx_out_pt out,
    void *data);
ngx_uint_t ngx_http_llm_gateway_translate_stream_done(
    ngx_http_llm_gateway_ctx_t *ctx);
ngx_int_t ngx_http_llm_gateway_translate_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *body);


#endif /* _NGX_HTTP_LLM_GATEWAY_TRANSLATE_H_INCLUDED_ */
