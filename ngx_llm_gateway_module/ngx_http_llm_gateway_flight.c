
/*
 * The requests in flight, listed in the tenant zone from admission to
 * settlement with what settling them takes, so that another worker can
 * settle those of a worker that died.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_flight.h"
#include "ngx_http_llm_gateway_backend.h"
#include "ngx_http_llm_gateway_zone.h"


static void ngx_http_llm_gateway_flight_backend(
    ngx_http_llm_gateway_ctx_t *ctx);


/*
 * Under the zone's lock, as a request is admitted: it is in flight, and
 * what settling it takes is in the zone.  NGX_ERROR: no room.
 */

ngx_int_t
ngx_http_llm_gateway_flight_start(ngx_http_llm_gateway_ctx_t *ctx)
{
    size_t                          id_len, model_len;
    ngx_http_llm_gateway_zone_t    *zone;
    ngx_http_llm_gateway_flight_t  *f;

    zone = ctx->zone;

    id_len = ngx_min(ctx->request_id.len, LLM_RECORD_ID_MAX);
    model_len = ngx_min(ctx->req.model_len, LLM_RECORD_MODEL_MAX);

    /* a role's request may fail over to a model of any length */
    f = ngx_http_llm_gateway_zone_alloc(zone,
                                        offsetof(ngx_http_llm_gateway_flight_t,
                                                 data)
                                        + id_len
                                        + (ctx->role ? LLM_RECORD_MODEL_MAX
                                                     : model_len));
    if (f == NULL) {
        return NGX_ERROR;
    }

    ngx_memzero(f, offsetof(ngx_http_llm_gateway_flight_t, data));

    f->pid = ngx_pid;
    f->tenant_id = ctx->key->tenant_id;
    f->key_id = ctx->key->key_id;
    f->reserved = ctx->reserved;
    f->limits = ctx->limits;
    f->budget_held = ctx->budget_held;
    f->budget_id = ctx->budget_id;
    f->budget_reserved = ctx->budget_reserved;
    f->budget_until = ctx->budget_until;
    ngx_memcpy(f->prices, ctx->prices, sizeof(f->prices));
    f->prompt_estimate = llm_inspect_unmetered_prompt(&ctx->req);
    f->prompt_bound = ctx->req.prompt_bound;
    f->max_tokens = ctx->req.output_bound;
    f->api = (u_char) ctx->req.api;
    f->stream = ctx->req.stream;
    f->journal_held = ctx->journal_held;
    f->fair_held = ctx->fair_held;
    f->fair_flight = ctx->fair_flight;
    f->soft = ctx->soft;

    f->request_id_len = (u_char) id_len;
    f->model_len = (u_char) model_len;
    ngx_memcpy(f->data, ctx->request_id.data, id_len);
    ngx_memcpy(f->data + id_len, ctx->req.model, model_len);

    ngx_queue_insert_tail(&zone->sh->flights, &f->queue);

    ctx->flight = f;

    /* what it goes to, should its worker die before the answer */
    ngx_http_llm_gateway_flight_backend(ctx);

    return NGX_OK;
}


/*
 * What the response has told so far, for whoever settles it: only this
 * worker writes it, and another reads it only once this one is gone.
 */

void
ngx_http_llm_gateway_flight_note(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_http_request_t  *r;

    if (ctx->flight == NULL) {
        return;
    }

    r = ctx->request;

    ctx->flight->status = r->upstream ? r->upstream->headers_in.status_n
                                      : r->headers_out.status;
    ctx->flight->usage = ctx->sse.usage;

    /* what served it, the last attempt's */
    ngx_http_llm_gateway_flight_backend(ctx);
}


static void
ngx_http_llm_gateway_flight_backend(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_http_llm_gateway_flight_t  *f = ctx->flight;

    if (ctx->backend == NULL || ctx->up_api > LLM_API_EMBEDDINGS) {
        return;
    }

    f->up_api = (u_char) ctx->up_api;
    f->backend_len = (u_char) ngx_min(ctx->backend->name.len,
                                      LLM_RECORD_BACKEND_MAX);
    ngx_memcpy(f->backend, ctx->backend->name.data, f->backend_len);
}
