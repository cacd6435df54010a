
#ifndef _NGX_HTTP_LLM_GATEWAY_JOURNAL_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_JOURNAL_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


/* who reads the journal, told of each record written: set at init */
typedef void (*ngx_http_llm_gateway_journal_written_pt)(void);

extern ngx_http_llm_gateway_journal_written_pt
    ngx_http_llm_gateway_journal_written;

llm_journal_t *ngx_http_llm_gateway_journal_lock(
    ngx_http_llm_gateway_main_conf_t *lmcf);
void ngx_http_llm_gateway_journal_unlock(
    ngx_http_llm_gateway_main_conf_t *lmcf);
void ngx_http_llm_gateway_journal_put(ngx_http_llm_gateway_main_conf_t *lmcf,
    llm_record_t *rec, ngx_uint_t held, ngx_log_t *log);
void ngx_http_llm_gateway_journal_stats(ngx_http_llm_gateway_main_conf_t *lmcf,
    ngx_http_llm_gateway_journal_stats_t *st);
ngx_int_t ngx_http_llm_gateway_journal_add(ngx_conf_t *cf,
    ngx_http_llm_gateway_main_conf_t *lmcf);
ngx_int_t ngx_http_llm_gateway_journal_hold(ngx_http_llm_gateway_ctx_t *ctx);
void ngx_http_llm_gateway_journal_unhold(ngx_http_llm_gateway_ctx_t *ctx);


#endif /* _NGX_HTTP_LLM_GATEWAY_JOURNAL_H_INCLUDED_ */
