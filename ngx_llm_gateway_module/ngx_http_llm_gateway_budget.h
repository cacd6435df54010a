
#ifndef _NGX_HTTP_LLM_GATEWAY_BUDGET_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_BUDGET_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


void ngx_http_llm_gateway_budget_give_back(ngx_http_llm_gateway_zone_t *zone,
    ngx_http_llm_gateway_node_t *node, int64_t budget_id, int64_t until,
    int64_t amount);
int64_t ngx_http_llm_gateway_budget_cost(int64_t *prices, llm_settle_t *st);
ngx_int_t ngx_http_llm_gateway_budget_admit(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_node_t *node, int64_t now, int64_t prompt_bound);
void ngx_http_llm_gateway_budget_settle(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_node_t *node, llm_settle_t *st);
void ngx_http_llm_gateway_budget_unreserve(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_node_t *node);
ngx_int_t ngx_http_llm_gateway_budget_node(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_node_t *node, ngx_http_llm_gateway_node_t **holder);
void ngx_http_llm_gateway_budget_lease(ngx_cycle_t *cycle, llm_lease_t *l,
    ngx_log_t *log);
void ngx_http_llm_gateway_budget_share_limits(ngx_http_llm_gateway_node_t *node,
    const llm_limits_t *tier, llm_limits_t *out);
ngx_uint_t ngx_http_llm_gateway_budget_demand(ngx_cycle_t *cycle,
    llm_lease_t *out, ngx_uint_t max);
ngx_uint_t ngx_http_llm_gateway_budget_covers(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_str_t *model);
ngx_uint_t ngx_http_llm_gateway_budget_known(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_str_t *model, int64_t now);
ngx_uint_t ngx_http_llm_gateway_budget_unpriced(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *model);
ngx_int_t ngx_http_llm_gateway_budget_priced(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_node_t *node, int64_t now, ngx_uint_t ask);


#endif /* _NGX_HTTP_LLM_GATEWAY_BUDGET_H_INCLUDED_ */
