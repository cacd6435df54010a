
/*
 * ngx_http_llm_gateway_module: the types every file shares, the confs,
 * the zones' layout and the request's ctx.  Each file's functions are in
 * its own header; LAYERS says which file may call which.
 *
 *   authenticate (auth.c) -> inspect and admit (admit.c) -> proxy ->
 *   meter the response (filter.c) -> settle and record (settle.c)
 */

#ifndef _NGX_HTTP_LLM_GATEWAY_MODULE_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_MODULE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "llm_breaker.h"
#include "llm_bucket.h"
#include "llm_fair.h"
#include "llm_inspect.h"
#include "llm_journal.h"
#include "llm_key.h"
#include "llm_pacer.h"
#include "llm_record.h"
#include "llm_settle.h"
#include "llm_sse.h"
#include "llm_tx.h"


/* as accountd's, which the two are released with */
#define NGX_HTTP_LLM_GATEWAY_VERSION       "0.1.0"


typedef struct {
    ngx_str_t                    name;
    llm_limits_t                 limits;    /* rpm, tpm, concurrency */
    int64_t                      max_tokens;
    int64_t                      default_max_tokens;
    u_char                      *models;    /* as in a key: "*" or a list */
    ngx_str_t                    downgrade; /* served when the cap is short */
    int64_t                      weight;    /* its share of a zone's capacity */
    int64_t                      minimum;   /* guaranteed of it, tokens/min */
    int64_t                      priority;  /* 0 (batch) to 3 (first) */
    int64_t                      image_tokens;   /* the most of an image */
    int64_t                      context;   /* the most of a prompt whose
                                               parts do not bound it */
    ngx_uint_t                   unbounded_refuse; /* such a prompt is
                                               refused under a cap */
    unsigned                     unpriced_refuse:1;
    unsigned                     above_max_lower:1; /* an output limit
                                               above max_tokens is lowered
                                               to it, not refused */
} ngx_http_llm_gateway_tier_t;


/* llm_gateway_alias: a name clients call, and the pinned model it means */
typedef struct {
    ngx_str_t                    name;
    ngx_str_t                    model;
} ngx_http_llm_gateway_alias_t;


/* llm_gateway_sunset: a model going away, and when */
typedef struct {
    ngx_str_t                    model;
    time_t                       deprecated;   /* 0: not said */
    time_t                       sunset;
} ngx_http_llm_gateway_sunset_t;


/* bumped whenever the layout of a backend's zone changes */
#define NGX_HTTP_LLM_GATEWAY_BACKEND_VERSION  3


/* the upstream side's own types are in ngx_http_llm_gateway_backend.h */
typedef struct ngx_http_llm_gateway_backend_s  ngx_http_llm_gateway_backend_t;
typedef struct ngx_http_llm_gateway_role_s     ngx_http_llm_gateway_role_t;


/* one key of the snapshot, in a sorted array */
typedef struct {
    u_char                       hash[LLM_KEY_HASH_LEN];
    int64_t                      key_id;
    int64_t                      tenant_id;
    time_t                       expires;   /* 0: never */
    ngx_uint_t                   caps;      /* LLM_KEY_CAP_* */
    ngx_str_t                    tier;
    ngx_str_t                    tenant;
    ngx_str_t                    models;    /* "*": any */
} ngx_http_llm_gateway_key_t;


/*
 * The worker's key table: the snapshot read with the configuration, then
 * each whole set accountd pushes.  A request holds a reference to the
 * table its key came from; a replaced table goes when the last one ends.
 */
typedef struct {
    ngx_pool_t                  *pool;      /* NULL: the configuration's */
    ngx_http_llm_gateway_key_t  *keys;      /* sorted by hash */
    ngx_uint_t                   nkeys;
    ngx_uint_t                   expected;  /* while it is received */
    ngx_uint_t                   refs;
    uint64_t                     generation;
    unsigned                     retired:1;
} ngx_http_llm_gateway_table_t;


/*
 * A model's prices as accountd gave them (µ$ per Mtok; -1: none), kept in
 * the zone for all its tenants: a price is the model's, not a tenant's.
 */
typedef struct {
    int64_t                      seen;      /* ms; 0: an empty place */
    int64_t                      p[4];      /* LLM_LEASE_IN ... */
    u_char                       len;
    u_char                       model[LLM_RECORD_MODEL_MAX];
} ngx_http_llm_gateway_price_t;


/* the most of a client's string a log line or a header shows */
#define NGX_HTTP_LLM_GATEWAY_SAFE_MAX      64

/* the models priced at once; the one seen longest ago makes room */
#define NGX_HTTP_LLM_GATEWAY_PRICES        32


/* llmgw_requests_total's status classes: 1xx to 5xx */
#define NGX_HTTP_LLM_GATEWAY_CLASSES       5

/* what refused a request (429, 503): llmgw_rejected_total's reasons */
typedef enum {
    ngx_http_llm_gateway_by_none = 0,
    ngx_http_llm_gateway_by_requests,
    ngx_http_llm_gateway_by_tokens,
    ngx_http_llm_gateway_by_concurrency,
    ngx_http_llm_gateway_by_quota,
    ngx_http_llm_gateway_by_capacity,      /* its share of capacity= */
    ngx_http_llm_gateway_by_saturation,    /* 503: the upstream pushed back */
    ngx_http_llm_gateway_by_last
} ngx_http_llm_gateway_by_e;


/* a tenant's counters since its node was made (zone.c, metrics.c) */
typedef struct {
    uint64_t                     requests[NGX_HTTP_LLM_GATEWAY_CLASSES];
    uint64_t                     rejected[ngx_http_llm_gateway_by_last];
    uint64_t                     input_tokens;
    uint64_t                     output_tokens;
    uint64_t                     cached_tokens;
    uint64_t                     cost;      /* pico-dollars, where priced */
    uint64_t                     over_bound;  /* reported above it */
    uint64_t                     unpriced_requests;
    uint64_t                     unpriced_tokens;   /* input and output */
} ngx_http_llm_gateway_stats_t;


/*
 * A tenant's state in the zone, shared by all workers.  A key with a spend
 * cap of its own has a node too, under the negated key_id, for its budget
 * only.
 */
typedef struct {
    ngx_rbtree_node_t            node;      /* key: tenant_id */
    ngx_queue_t                  queue;     /* LRU, for expiry */
    int64_t                      tenant_id;      /* or -key_id */
    int64_t                      owner_id;       /* a key's: its tenant */
    llm_tenant_t                 state;

    /* its spend caps as leased to this gateway (budget.c) */
    int64_t                      budget;         /* pico-dollars free */
    int64_t                      budget_until;   /* ms: it may be spent */
    int64_t                      budget_resets;  /* ms: the cap is new */
    int64_t                      budget_seen;    /* ms: accountd's word */
    int64_t                      budget_asked;   /* ms: a lease asked for */
    int64_t                      budget_used;    /* ms: last reserved from */
    ngx_uint_t                   budget_holds;   /* reservations out */
    unsigned                     capped:1;
    unsigned                     spent:1;

    /* its limits shared with other gateways (budget.c): demand, share */
    int64_t                      demand;         /* tokens asked since */
    int64_t                      share_ppm;      /* 0: not known, all */

    /* its share of the zone's capacity (llm_gateway_zone capacity=) */
    llm_fair_tenant_t            fair;

    /* what the metrics and the status page say of it */
    ngx_http_llm_gateway_stats_t stats;
    int64_t                      log_s;     /* the second of log lines */
    ngx_uint_t                   logs;      /* refusals logged in it */
    u_char                       name_len;
    u_char                       tier_len;
    u_char                       name[LLM_KEY_TENANT_MAX];
    u_char                       tier[LLM_KEY_TIER_MAX];
} ngx_http_llm_gateway_node_t;


/*
 * A request in flight, in the zone: what settling it takes, so that the
 * requests of a worker that died (killed, crashed) are settled by the
 * others (settle.c).  Its worker alone writes it, and frees it as it
 * settles; the usage as far as it was read is copied in as it passes.
 */
typedef struct {
    ngx_queue_t                  queue;     /* sh->flights */
    ngx_pid_t                    pid;
    ngx_uint_t                   status;    /* the response's; 0: none yet */
    int64_t                      tenant_id;
    int64_t                      key_id;
    int64_t                      reserved;  /* tokens */
    llm_limits_t                 limits;
    int64_t                      budget_id;
    int64_t                      budget_reserved;
    int64_t                      budget_until;
    int64_t                      prices[4];
    int64_t                      prompt_estimate;
    int64_t                      prompt_bound;
    int64_t                      max_tokens;  /* all choices' */
    llm_usage_t                  usage;
    u_char                       api;
    u_char                       up_api;    /* the backend's dialect */
    u_char                       request_id_len;
    u_char                       model_len;
    u_char                       backend_len;
    u_char                       backend[LLM_RECORD_BACKEND_MAX];
    unsigned                     stream:1;  /* the client asked for one */
    unsigned                     budget_held:1;
    unsigned                     journal_held:1;
    unsigned                     fair_held:1;   /* a share of capacity */
    unsigned                     fair_flight:1; /* under the ceiling */
    unsigned                     soft:1;    /* tokens beyond the tier's tpm */
    u_char                       data[1];   /* the request id, the model */
} ngx_http_llm_gateway_flight_t;


typedef struct {
    ngx_uint_t                   version;
    ngx_rbtree_t                 rbtree;
    ngx_rbtree_node_t            sentinel;
    ngx_queue_t                  queue;
    ngx_uint_t                   count;
    uint64_t                     evictions;  /* to make room, stale or not */
} ngx_http_llm_gateway_addrs_sh_t;


typedef struct {
    ngx_http_llm_gateway_addrs_sh_t  *sh;
    ngx_slab_pool_t              *shpool;
    ngx_str_t                     name;
} ngx_http_llm_gateway_addrs_t;


/*
 * A worker's connection to accountd as it last said (each says once a
 * second, settle.c), for the metrics: a place a process slot, modulo.
 */
typedef struct {
    ngx_pid_t                    pid;
    ngx_uint_t                   connected;
    ngx_uint_t                   sent;      /* records not acknowledged */
    int64_t                      seen;      /* ms */
} ngx_http_llm_gateway_worker_t;

#define NGX_HTTP_LLM_GATEWAY_WORKERS       64


/* bumped whenever the layout of the zone changes */
#define NGX_HTTP_LLM_GATEWAY_ZONE_VERSION  19


typedef struct {
    ngx_uint_t                   version;
    ngx_rbtree_t                 rbtree;
    ngx_rbtree_node_t            sentinel;
    ngx_queue_t                  queue;
    ngx_queue_t                  flights;
    int64_t                      demand_reported;   /* ms, by any worker */
    ngx_http_llm_gateway_price_t prices[NGX_HTTP_LLM_GATEWAY_PRICES];
    ngx_http_llm_gateway_worker_t workers[NGX_HTTP_LLM_GATEWAY_WORKERS];
    llm_fair_t                   fair;      /* capacity=, inflight= */
    uint64_t                     log_suppressed[2];  /* address, tenant */
    int64_t                      log_s;     /* the second of logs */
    ngx_uint_t                   logs;      /* refusals without an address
                                               entry logged in it */
} ngx_http_llm_gateway_shctx_t;


typedef struct {
    ngx_http_llm_gateway_shctx_t  *sh;
    ngx_slab_pool_t              *shpool;
    ngx_str_t                     name;
    int64_t                       capacity;  /* tokens a minute; 0: none */
    int64_t                       inflight;  /* requests at once; 0: none */
} ngx_http_llm_gateway_zone_t;


typedef struct {
    ngx_array_t                  keys;      /* ngx_http_llm_gateway_key_t */
    ngx_http_llm_gateway_table_t table;     /* over keys */
    u_char                       secret[LLM_KEY_SECRET_MAX];
    size_t                       secret_len;
    llm_key_mac_t               *mac;       /* a worker's, keyed once */
    ngx_str_t                    keys_file;

    ngx_url_t                   *accountd;
    size_t                       accountd_buffer;
    ngx_flag_t                   accountd_full_admit;
    ngx_shm_zone_t              *journal;
    void                        *journal_data;

    ngx_shm_zone_t              *idem_zone;
    ngx_msec_t                   idem_retain;
    size_t                       idem_max;

    ngx_array_t                 *backends;  /* backend_t * */
    ngx_array_t                 *roles;     /* ngx_http_llm_gateway_role_t */

    ngx_int_t                    request_id_index;
    unsigned                     warned:1;
} ngx_http_llm_gateway_main_conf_t;


typedef struct {
    ngx_flag_t                   enable;
    ngx_shm_zone_t              *shm_zone;
    llm_api_e                    api;
    ngx_array_t                 *tiers;     /* ngx_http_llm_gateway_tier_t */
    ngx_array_t                 *aliases;   /* ngx_http_llm_gateway_alias_t */
    ngx_array_t                 *sunsets;   /* ngx_http_llm_gateway_sunset_t */
    size_t                       response_buffer;
    size_t                       max_body;
    size_t                       max_string;
    ngx_uint_t                   max_depth;
    ngx_uint_t                   reject_log_level;
    ngx_uint_t                   reject_log_rate;  /* lines a second */
    ngx_uint_t                   bad_keys;  /* 0: no limit */
    ngx_msec_t                   bad_keys_window;
    ngx_uint_t                   bad_keys_checks;  /* a second, locked */
    ngx_uint_t                   bad_keys_prefix6;  /* bits of IPv6 */
    ngx_shm_zone_t              *bad_keys_zone;    /* zone= */
    ngx_shm_zone_t              *bad_keys_store;   /* it, or the default */
    ngx_array_t                 *pass_headers;     /* ngx_str_t, lowcase */
    ngx_array_t                 *diagnostics;      /* ngx_cidr_t; none: all,
                                                      NULL: off */
    ngx_str_t                    backend_name;
    ngx_http_llm_gateway_backend_t  *backend;   /* backend= */
} ngx_http_llm_gateway_loc_conf_t;


typedef struct {
    /* the request, and the verdict of the access gate (admit.c) */
    ngx_http_request_t          *request;
    ngx_int_t                    status;
    ngx_str_t                    request_id;

    /* the key and the table that holds it alive (auth.c, keys.c) */
    ngx_http_llm_gateway_key_t  *key;
    ngx_http_llm_gateway_table_t *table;
    ngx_array_t                 *dropped;   /* auth.c's _dropped_t: client
                                               headers kept from the
                                               upstream, names saved */

    /* admission (admit.c): the tier, the zone, what was reserved */
    ngx_http_llm_gateway_tier_t *tier;
    ngx_http_llm_gateway_zone_t *zone;
    ngx_http_llm_gateway_flight_t *flight;  /* flight.c */
    llm_request_t                req;
    ngx_str_t                    body;      /* as inspected */
    int64_t                      reserved;
    llm_limits_t                 limits;    /* the tier's, this gateway's
                                               share of them */
    int64_t                      fair_rate; /* refused: its share, or
                                               the ceiling */
    int64_t                      admitted_ms;   /* by the zone's clock */
    int64_t                      wait_until;    /* ms, for a lease */
    ngx_int_t                    phase;     /* its preaccess handler */

    unsigned                     inspected:1;
    unsigned                     admitted:1;
    unsigned                     waiting:1;     /* for a lease */
    unsigned                     never:1;   /* refusal can never succeed */
    unsigned                     fair_held:1;   /* a share of capacity */
    unsigned                     fair_flight:1; /* counted in flight */
    unsigned                     at_ceiling:1;  /* refused, not reduced */
    unsigned                     soft:1;    /* beyond the tier's tpm */
    unsigned                     journal_held:1; /* a place for the record
                                                    (journal.c) */

    /* the spend cap (budget.c): the worst case reserved, at these prices */
    int64_t                      budget_id;       /* whose: a node's id */
    int64_t                      budget_reserved;
    int64_t                      budget_until;    /* of its period */
    int64_t                      budget_worst;
    int64_t                      prices[4];
    int64_t                      lease_want;      /* -1: none to ask */
    ngx_str_t                    downgraded_from; /* the model asked for */
    ngx_str_t                    downgrade_asked; /* the same, as sent */

    unsigned                     budget_held:1;   /* a reservation, even 0 */
    unsigned                     unpriced:1;      /* accountd has no price */

    /* a refusal waiting to be sent, and the limit headers (reply.c) */
    ngx_buf_t                   *err_body;  /* instead of nginx's page */
    ngx_uint_t                   err_status;
    const char                  *err_type;
    const char                  *err_code;
    const char                  *err_param;
    u_char                      *err_message;
    int64_t                      retry_after;     /* seconds, rounded up */
    int64_t                      retry_after_ms;
    ngx_http_llm_gateway_by_e    rejected_by;     /* a 429's reason */
    unsigned                     dialect:2;       /* its error format,
                                                     once decided */

    /* for the x-ratelimit-* headers, read under the zone lock */
    int64_t                      remaining;
    int64_t                      reset_ms;
    int64_t                      remaining_requests;
    int64_t                      reset_requests_ms;
    unsigned                     headroom:1;      /* the four are read */

    /* the upstream side (route.c, pace.c, failover.c) */
    ngx_http_llm_gateway_role_t *role;
    ngx_str_t                    role_name;
    ngx_http_llm_gateway_backend_t  *backend;  /* this attempt's */
    uint32_t                     tried;     /* the role's members, bits */
    uint32_t                     not_allowed;   /* by the key or tier */
    uint32_t                     not_priced;    /* the tier wants a price */
    uint32_t                     not_covered;   /* by the spend cap held */
    ngx_str_t                    tried_names;   /* "a=code, b=code" */
    uint64_t                     pace_ticket;
    int64_t                      pace_asked;    /* ms */
    int64_t                      queued_ms;     /* waited, all attempts */
    int64_t                      trial_ms;      /* wall: trials taken */

    unsigned                     paced:1;       /* started by the pacer */
    unsigned                     pace_waited:1;
    unsigned                     answered:1;    /* the answer was read */
    unsigned                     trial:2;       /* half-open trials */
    unsigned                     pressed:1;     /* told of saturation */

    /* translation (translate.c): this attempt's backend's dialect */
    llm_api_e                    up_api;
    void                        *tx;            /* translate.c's state */
    uint32_t                     not_translated;  /* members whose dialect
                                                    cannot take it */
    ngx_chain_t                 *tx_free;       /* a translated stream's */
    ngx_chain_t                 *tx_busy;       /* buffers (filter.c) */

    unsigned                     translated:1;  /* up_api is not the
                                                   location's */
    unsigned                     tx_hold:1;     /* a whole answer, held to
                                                   be translated */
    unsigned                     version_added:1;  /* anthropic-version,
                                                      for a translation */
    unsigned                     tx_sent:1;     /* the client's first event
                                                   went out */

    /* the response as it passes (filter.c) */
    llm_sse_t                    sse;
    u_char                      *json;      /* non-streaming body copy */
    size_t                       json_len;
    size_t                       json_size;

    /* the proxy's own, wrapped to learn how the upstream ended */
    void                       (*upstream_finalize)(ngx_http_request_t *r,
                                                    ngx_int_t rc);
    const char                  *fail_reason;

    unsigned                     streaming:1;
    unsigned                     metering:1;
    unsigned                     json_overflow:1;
    unsigned                     json_tail:1;      /* json: the last bytes */
    unsigned                     response_done:1;
    unsigned                     unreadable:1;     /* usage cannot be read */
    unsigned                     upstream_failed:1;
    unsigned                     client_closed:1;
    unsigned                     error_event:1;    /* the gateway ended it */

    /* Idempotency-Key (idem.c) */
    void                        *idem;          /* its entry */
    void                        *idem_zone;
    size_t                       idem_sent;     /* a joiner's offset */

    unsigned                     idem_checked:1;
    unsigned                     idem_owner:1;  /* the first with its key */
    unsigned                     idem_joiner:1; /* served from the store */

    /* settling (settle.c): for $llm_input_tokens and the others */
    int64_t                      input_tokens;
    int64_t                      output_tokens;
    const char                  *finish_reason;

    unsigned                     settled:1;
    unsigned                     counted:1;     /* in its tenant's stats */
} ngx_http_llm_gateway_ctx_t;


/* the journal's counters, as the metrics show them */
typedef struct {
    llm_journal_stats_t          journal;
    ngx_uint_t                   connected;  /* this worker, to accountd */
} ngx_http_llm_gateway_journal_stats_t;


extern ngx_module_t  ngx_http_llm_gateway_module;


#endif /* _NGX_HTTP_LLM_GATEWAY_MODULE_H_INCLUDED_ */
