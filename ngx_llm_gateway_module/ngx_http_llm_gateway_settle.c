
/*
 * The settling gate: at the end of every admitted request, exactly once,
 * refund what the reservation did not use and hand a settle record to
 * accountd.  The log phase settles; a request-pool cleanup settles what
 * the log phase never saw; another worker settles what a worker that died
 * had in flight.  Records go into the journal in shared memory
 * (ngx_http_llm_gateway_journal.c), and from there to accountd
 * (ngx_http_llm_gateway_accountd.c).
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_settle.h"
#include "ngx_http_llm_gateway_backend.h"
#include "ngx_http_llm_gateway_accountd.h"
#include "ngx_http_llm_gateway_auth.h"
#include "ngx_http_llm_gateway_budget.h"
#include "ngx_http_llm_gateway_clock.h"
#include "ngx_http_llm_gateway_ctx.h"
#include "ngx_http_llm_gateway_filter.h"
#include "ngx_http_llm_gateway_idem.h"
#include "ngx_http_llm_gateway_journal.h"
#include "ngx_http_llm_gateway_json.h"
#include "ngx_http_llm_gateway_keys.h"
#include "ngx_http_llm_gateway_route.h"
#include "ngx_http_llm_gateway_zone.h"


/* how often each worker looks for requests of exited workers, in ms */
#define NGX_HTTP_LLM_GATEWAY_REAP_FLIGHTS  1000


static void ngx_http_llm_gateway_record(ngx_http_llm_gateway_ctx_t *ctx,
    llm_settle_t *st, llm_record_t *rec);
static void ngx_http_llm_gateway_settle_usage(ngx_http_llm_gateway_ctx_t *ctx,
    llm_settle_in_t *in, llm_settle_t *st);
static void ngx_http_llm_gateway_settle_zone(ngx_http_llm_gateway_ctx_t *ctx,
    llm_settle_t *st, llm_record_t *rec);
static void ngx_http_llm_gateway_reap_flights(ngx_event_t *ev);
static void ngx_http_llm_gateway_settle_flight(
    ngx_http_llm_gateway_main_conf_t *lmcf, ngx_http_llm_gateway_zone_t *zone,
    ngx_http_llm_gateway_flight_t *f, int64_t now, ngx_log_t *log);


static ngx_event_t       ngx_http_llm_gateway_reaper;

/* the event's data: its debug lines read a connection's fd there */
static ngx_connection_t  ngx_http_llm_gateway_reaper_conn;


ngx_int_t
ngx_http_llm_gateway_settle_handler(ngx_http_request_t *r)
{
    ngx_http_llm_gateway_ctx_t  *ctx;

    ctx = ngx_http_llm_gateway_ctx_get(r);

    if (ctx != NULL) {
        ngx_http_llm_gateway_settle(ctx);
        ngx_http_llm_gateway_idem_end(ctx);
        ngx_http_llm_gateway_zone_count_refused(ctx);
    }

    return NGX_OK;
}


void
ngx_http_llm_gateway_settle_cleanup(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_http_llm_gateway_settle(ctx);
    ngx_http_llm_gateway_keys_release(ctx);
}


void
ngx_http_llm_gateway_settle(ngx_http_llm_gateway_ctx_t *ctx)
{
    llm_settle_t         st;
    llm_record_t         rec;
    llm_settle_in_t      in;
    ngx_http_request_t  *r;

    if (!ctx->admitted) {
        /*
         * Refused after its backend was chosen: a half-open trial it was
         * chosen with is the next request's, not held for fail_timeout by
         * a request that cost its tenant nothing.
         */
        if (ctx->trial) {
            ngx_http_llm_gateway_route_done(ctx, ctx->backend, 0);
        }

        return;
    }

    if (ctx->settled) {
        return;
    }

    r = ctx->request;

    ctx->settled = 1;

    /*
     * A response cut before its end was never parsed to its end: take
     * what its events or its body said so far.  In the pool cleanup
     * r->pool is gone and cJSON falls back to malloc.
     */
    if (ctx->metering && !ctx->response_done) {
        ngx_http_llm_gateway_json_pool(r->pool);
        ngx_http_llm_gateway_filter_response_end(ctx);
        ngx_http_llm_gateway_json_pool(NULL);
    }

    ngx_http_llm_gateway_settle_usage(ctx, &in, &st);

    ctx->input_tokens = st.input_tokens;
    ctx->output_tokens = st.output_tokens;
    ctx->finish_reason = st.finish_reason;

    /* the backend's minute: what it used, or nothing if it refused */
    ngx_http_llm_gateway_route_done(ctx, ctx->backend,
                                      in.upstream_ok
                                      ? (int64_t) (st.input_tokens
                                                   + st.output_tokens)
                                      : 0);

    ngx_log_debug7(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm gateway settle: reserved %L, in %uL, out %uL, "
                   "cached %uL, end %d, flags %uD, finish \"%s\"",
                   ctx->reserved, st.input_tokens, st.output_tokens,
                   st.cached_input_tokens, (int) in.end, st.flags,
                   st.finish_reason);

    ngx_http_llm_gateway_record(ctx, &st, &rec);

    ngx_http_llm_gateway_settle_zone(ctx, &st, &rec);
}


/* what the request used, from what its response told and how it ended */

static void
ngx_http_llm_gateway_settle_usage(ngx_http_llm_gateway_ctx_t *ctx,
    llm_settle_in_t *in, llm_settle_t *st)
{
    ngx_uint_t            status;
    ngx_http_request_t   *r;
    ngx_http_upstream_t  *u;

    r = ctx->request;
    u = r->upstream;

    status = r->err_status ? r->err_status : r->headers_out.status;

    if (status == NGX_HTTP_CLIENT_CLOSED_REQUEST
        || (r->connection->error && !ctx->upstream_failed))
    {
        ctx->client_closed = 1;
    }

    ngx_memzero(in, sizeof(llm_settle_in_t));

    in->prompt_estimate = llm_inspect_unmetered_prompt(&ctx->req);
    in->prompt_bound = ctx->req.prompt_bound;
    in->hold_prompt = ctx->budget_held;
    in->max_tokens = ctx->req.output_bound;

    if (ctx->upstream_failed) {
        in->end = LLM_END_UPSTREAM_ERROR;

    } else if (ctx->client_closed) {
        in->end = LLM_END_CLIENT_CLOSED;

    } else {
        in->end = LLM_END_CLEAN;
    }

    if (u == NULL || u->headers_in.status_n) {
        /* the upstream (or whatever made the content) answered: it decides */
        if (u) {
            status = u->headers_in.status_n;
        }

        in->upstream_ok = (status >= NGX_HTTP_OK
                           && status < NGX_HTTP_SPECIAL_RESPONSE);

    } else {
        /*
         * No answer: a client that left after the prompt went up may
         * still owe it; anything else failed before the upstream worked.
         */
        in->upstream_ok = (ctx->client_closed && u->request_sent);
    }

    if (in->upstream_ok && !ctx->streaming
        && (ctx->unreadable || (ctx->response_done && !ctx->sse.usage.done
                                && (ctx->json_len || ctx->upstream_failed))))
    {
        /*
         * A whole body is generated before it is sent: one that could
         * not be read, or was cut, cost all that was reserved, also when
         * none of it came (a reset, a stall after the header).
         */
        in->end = LLM_END_UNREADABLE;
    }

    llm_settle_usage(&ctx->sse.usage, in, st);

    if (in->end == LLM_END_UNREADABLE
        && (ctx->upstream_failed || ctx->client_closed))
    {
        st->flags |= LLM_REC_F_PARTIAL;
        st->finish_reason = ctx->upstream_failed ? "upstream_error"
                                                 : "client_closed";
    }

    if ((st->flags & LLM_REC_F_BOUND)
        && ngx_http_llm_gateway_auth_log_allowed(r, ctx))
    {
        /* once a request: a hostile or broken upstream, a worst case set
           too low, shows */
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm gateway: upstream reported more than request "
                      "\"%V\" could cost (in %uL, out %uL); its bound: in "
                      "%L, out %L", &ctx->request_id,
                      ctx->sse.usage.input_tokens,
                      ctx->sse.usage.output_tokens, ctx->req.prompt_bound,
                      ctx->req.output_bound);
    }
}


/*
 * Under the zone's lock: the tenant's tokens and slots back, its counters
 * and budget settled, the record into the journal, the request no longer
 * in flight.
 */

static void
ngx_http_llm_gateway_settle_zone(ngx_http_llm_gateway_ctx_t *ctx,
    llm_settle_t *st, llm_record_t *rec)
{
    int64_t                            now, used;
    ngx_http_request_t                *r;
    ngx_http_llm_gateway_node_t       *node;
    ngx_http_llm_gateway_zone_t       *zone;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    r = ctx->request;

    zone = ctx->zone;

    used = st->input_tokens + st->output_tokens;

    ngx_shmtx_lock(&zone->shpool->mutex);

    now = ngx_http_llm_gateway_clock_now_ms();

    /* a node with a request in flight is never expired */
    node = ngx_http_llm_gateway_zone_lookup(zone, ctx->key->tenant_id, 1);

    if (node != NULL) {
        if (node->state.tpm.last_ms == -1) {
            llm_bucket_tenant_init(&node->state, &ctx->tier->limits, now);
        }

        llm_bucket_release_from(&node->state, &ctx->limits, ctx->soft,
                         ctx->reserved, used, now);

        if (ctx->fair_held) {
            llm_fair_settle(&zone->sh->fair, &node->fair, ctx->reserved,
                            used, now);
            ctx->fair_held = 0;
        }

        ngx_http_llm_gateway_zone_count(node, rec->status, st,
                                        ctx->budget_held
                                        ? ngx_http_llm_gateway_budget_cost(
                                              ctx->prices, st)
                                        : 0);
        ctx->counted = 1;

        /* served free: a model accountd has no price for */
        if (ctx->unpriced) {
            node->stats.unpriced_requests++;
            node->stats.unpriced_tokens += st->input_tokens
                                           + st->output_tokens;
        }

        ngx_http_llm_gateway_budget_settle(ctx, node, st);
    }

    if (ctx->fair_flight) {
        llm_fair_end(&zone->sh->fair);
        ctx->fair_flight = 0;
    }

    /*
     * The record goes into the journal as the request stops being in
     * flight, under the zone's lock: a worker killed at any point leaves
     * either its request in flight, for another to settle, or its record.
     */
    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    ngx_http_llm_gateway_journal_put(lmcf, rec, ctx->journal_held,
                                     r->connection->log);
    ctx->journal_held = 0;

    if (ctx->flight) {
        ngx_queue_remove(&ctx->flight->queue);
        ngx_slab_free_locked(zone->shpool, ctx->flight);
        ctx->flight = NULL;
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);
}


static void
ngx_http_llm_gateway_record(ngx_http_llm_gateway_ctx_t *ctx,
    llm_settle_t *st, llm_record_t *rec)
{
    ngx_time_t          *tp;
    ngx_http_request_t  *r;

    r = ctx->request;

    ngx_memzero(rec, sizeof(llm_record_t));

    tp = ngx_timeofday();

    rec->type = LLM_REC_SETTLE;
    rec->status = r->err_status ? r->err_status : r->headers_out.status;
    rec->flags = st->flags;
    rec->tenant_id = ctx->key->tenant_id;
    rec->key_id = ctx->key->key_id;
    rec->input_tokens = st->input_tokens;
    rec->output_tokens = st->output_tokens;
    rec->cached_input_tokens = st->cached_input_tokens;
    rec->cache_write_tokens = st->cache_write_tokens;
    rec->reasoning_tokens = st->reasoning_tokens;
    rec->reserved_tokens = ctx->reserved;
    rec->ts_ms = (int64_t) tp->sec * 1000 + tp->msec;
    rec->api = ctx->req.api;

    /* the APIs a ledger row names: those of requests that generate */
    if (ctx->backend && ctx->up_api <= LLM_API_EMBEDDINGS) {
        rec->up_api = (uint8_t) ctx->up_api;
        llm_record_set_backend(rec, (char *) ctx->backend->name.data,
                               ctx->backend->name.len);
        llm_record_set_provider_key(rec,
                                    (char *) ctx->backend->provider_key.data,
                                    ctx->backend->provider_key.len);
    }

    /* what the upstream said it was: the meter kept only clean names */
    llm_record_set_response_id(rec, ctx->sse.usage.response_id,
                               ngx_strlen(ctx->sse.usage.response_id));
    llm_record_set_upstream_model(rec, ctx->sse.usage.upstream_model,
                                  ngx_strlen(ctx->sse.usage.upstream_model));

    llm_record_set_request_id(rec, (char *) ctx->request_id.data,
                              ctx->request_id.len);
    llm_record_set_model(rec, ctx->req.model, ctx->req.model_len);
    llm_record_set_finish_reason(rec, st->finish_reason,
                                 ngx_strlen(st->finish_reason));
}


/*
 * The requests in flight of workers that are gone without settling them
 * (killed, crashed) are settled by the first worker to find them, at most
 * a second later: their concurrency slots, tokens, budget and journal
 * places go back, and each gets its record, flagged estimated and partial,
 * finish_reason "worker_exited".  What it cost is known only as far as the
 * response had passed: a stream pays the prompt and the text streamed, a
 * whole body, read only at its end, pays its reservation in full.
 */

void
ngx_http_llm_gateway_settle_reaper_init(ngx_cycle_t *cycle)
{
    ngx_http_llm_gateway_reaper_conn.fd = (ngx_socket_t) -1;

    ngx_http_llm_gateway_reaper.handler = ngx_http_llm_gateway_reap_flights;
    ngx_http_llm_gateway_reaper.data = &ngx_http_llm_gateway_reaper_conn;
    ngx_http_llm_gateway_reaper.log = cycle->log;
    ngx_http_llm_gateway_reaper.cancelable = 1;

    /*
     * Before any request: flights under this worker's pid are those of a
     * worker that died with the same pid, which the others take for alive.
     */
    ngx_http_llm_gateway_reap_flights(&ngx_http_llm_gateway_reaper);
}


static void
ngx_http_llm_gateway_reap_flights(ngx_event_t *ev)
{
    int64_t                            now;
    ngx_pid_t                          alive[16], dead;
    ngx_uint_t                         i, k, nalive, n;
    ngx_queue_t                       *q, *next;
    ngx_list_part_t                   *part;
    ngx_http_llm_gateway_zone_t       *zone;
    ngx_http_llm_gateway_flight_t     *f;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_llm_gateway_module);

    now = ngx_http_llm_gateway_clock_now_ms();

    part = &((ngx_cycle_t *) ngx_cycle)->shared_memory.part;
    i = 0;

    while ((zone = ngx_http_llm_gateway_zone_next(lmcf, &part, &i))) {

        nalive = 0;
        dead = 0;
        n = 0;

        ngx_shmtx_lock(&zone->shpool->mutex);

        ngx_http_llm_gateway_accountd_worker(zone, now);

        for (q = ngx_queue_head(&zone->sh->flights);
             q != ngx_queue_sentinel(&zone->sh->flights);
             q = next)
        {
            next = ngx_queue_next(q);
            f = ngx_queue_data(q, ngx_http_llm_gateway_flight_t, queue);

            if (f->pid == ngx_pid) {
                if (ev->timedout) {
                    continue;
                }

                /* the first look, from settle_reaper_init(): not ours */
                dead = f->pid;
                n++;
                ngx_http_llm_gateway_settle_flight(lmcf, zone, f, now,
                                                   ev->log);
                continue;
            }

            for (k = 0; k < nalive; k++) {
                if (alive[k] == f->pid) {
                    break;
                }
            }

            if (k < nalive) {
                continue;
            }

            /* kill(pid, 0) only asks whether it lives */
            if (f->pid != dead
                && (kill(f->pid, 0) == 0 || ngx_errno != NGX_ESRCH))
            {
                if (nalive < sizeof(alive) / sizeof(alive[0])) {
                    alive[nalive++] = f->pid;
                }

                continue;
            }

            dead = f->pid;
            n++;

            ngx_http_llm_gateway_settle_flight(lmcf, zone, f, now, ev->log);
        }

        ngx_shmtx_unlock(&zone->shpool->mutex);

        if (n) {
            ngx_log_error(NGX_LOG_WARN, ev->log, 0,
                          "llm gateway: %ui requests in flight in exited "
                          "worker %P settled", n, dead);
        }
    }

    if (!ngx_exiting && !ngx_terminate) {
        ngx_add_timer(ev, NGX_HTTP_LLM_GATEWAY_REAP_FLIGHTS);
    }
}


/* under the zone's lock: settles, records and frees a dead worker's */

static void
ngx_http_llm_gateway_settle_flight(ngx_http_llm_gateway_main_conf_t *lmcf,
    ngx_http_llm_gateway_zone_t *zone, ngx_http_llm_gateway_flight_t *f,
    int64_t now, ngx_log_t *log)
{
    int64_t                          cost;
    ngx_str_t                        name;
    ngx_time_t                      *tp;
    llm_settle_t                     st;
    llm_record_t                     rec;
    llm_settle_in_t                  in;
    ngx_http_llm_gateway_node_t     *node;
    ngx_http_llm_gateway_backend_t  *b;

    ngx_memzero(&in, sizeof(llm_settle_in_t));

    in.prompt_estimate = f->prompt_estimate;
    in.prompt_bound = f->prompt_bound;
    in.hold_prompt = f->budget_held;
    in.max_tokens = f->max_tokens;

    /* no response yet: the prompt may have gone up, and owes */
    in.upstream_ok = (f->status == 0
                      || (f->status >= NGX_HTTP_OK
                          && f->status < NGX_HTTP_SPECIAL_RESPONSE));

    if (f->usage.done && !f->usage.error) {
        in.end = LLM_END_CLEAN;

    } else if (f->stream) {
        in.end = LLM_END_UPSTREAM_ERROR;

    } else {
        in.end = LLM_END_UNREADABLE;
    }

    llm_settle_usage(&f->usage, &in, &st);

    /* its worker never ended it: whatever the upstream said, that is why */
    st.flags |= LLM_REC_F_PARTIAL;
    st.finish_reason = "worker_exited";

    node = ngx_http_llm_gateway_zone_lookup(zone, f->tenant_id, 0);

    if (node != NULL) {
        llm_bucket_release_from(&node->state, &f->limits, f->soft, f->reserved,
                         st.input_tokens + st.output_tokens, now);

        if (f->fair_held) {
            llm_fair_settle(&zone->sh->fair, &node->fair, f->reserved,
                            st.input_tokens + st.output_tokens, now);
        }

        ngx_http_llm_gateway_zone_count(node, f->status, &st,
                                        f->budget_held
                                        ? ngx_http_llm_gateway_budget_cost(
                                              f->prices, &st)
                                        : 0);
    }

    if (f->fair_flight) {
        llm_fair_end(&zone->sh->fair);
    }

    if (f->budget_held) {
        cost = ngx_http_llm_gateway_budget_cost(f->prices, &st);

        ngx_http_llm_gateway_budget_give_back(zone, node, f->budget_id,
                                              f->budget_until,
                                              f->budget_reserved - cost);
    }

    ngx_memzero(&rec, sizeof(llm_record_t));

    tp = ngx_timeofday();

    rec.type = LLM_REC_SETTLE;
    rec.status = (uint16_t) f->status;
    rec.flags = st.flags;
    rec.tenant_id = f->tenant_id;
    rec.key_id = f->key_id;
    rec.input_tokens = st.input_tokens;
    rec.output_tokens = st.output_tokens;
    rec.cached_input_tokens = st.cached_input_tokens;
    rec.cache_write_tokens = st.cache_write_tokens;
    rec.reasoning_tokens = st.reasoning_tokens;
    rec.reserved_tokens = f->reserved;
    rec.ts_ms = (int64_t) tp->sec * 1000 + tp->msec;
    rec.api = f->api;
    rec.up_api = f->up_api;
    llm_record_set_backend(&rec, (char *) f->backend, f->backend_len);

    name.data = f->backend;
    name.len = f->backend_len;
    b = f->backend_len ? ngx_http_llm_gateway_backend_find(lmcf, &name)
                       : NULL;

    if (b != NULL) {
        llm_record_set_provider_key(&rec, (char *) b->provider_key.data,
                                    b->provider_key.len);
    }

    llm_record_set_response_id(&rec, f->usage.response_id,
                               ngx_strlen(f->usage.response_id));
    llm_record_set_upstream_model(&rec, f->usage.upstream_model,
                                  ngx_strlen(f->usage.upstream_model));

    llm_record_set_request_id(&rec, (char *) f->data, f->request_id_len);
    llm_record_set_model(&rec, (char *) f->data + f->request_id_len,
                         f->model_len);
    llm_record_set_finish_reason(&rec, st.finish_reason,
                                 ngx_strlen(st.finish_reason));

    ngx_http_llm_gateway_journal_put(lmcf, &rec, f->journal_held, log);

    ngx_queue_remove(&f->queue);
    ngx_slab_free_locked(zone->shpool, f);
}
