
#ifndef _NGX_HTTP_LLM_GATEWAY_BACKEND_H_INCLUDED_
#define _NGX_HTTP_LLM_GATEWAY_BACKEND_H_INCLUDED_


#include "ngx_http_llm_gateway_module.h"


/* backends at most, in all and in a role: a request's tried ones are bits */
#define NGX_HTTP_LLM_GATEWAY_BACKENDS      32


/* a backend's counters, in its zone */
typedef struct {
    uint64_t                     started;   /* requests sent to it */
    uint64_t                     waited;    /* of them, after a wait */
    uint64_t                     waited_ms; /* their waits in all */
    uint64_t                     refused;   /* by its pacer */
    uint64_t                     busy;      /* its answers: busy */
    uint64_t                     spent;     /* quota spent */
    uint64_t                     failed;    /* 5xx or none */
    uint64_t                     failovers; /* requests it passed on */
    uint64_t                     opened;    /* its breaker opened */
    uint64_t                     limited;   /* a tenant, by its failures */
} ngx_http_llm_gateway_backend_stats_t;


/* a backend's state, shared by all workers, under its zone's lock */
typedef struct {
    ngx_uint_t                   version;
    llm_pacer_t                 *pacer;        /* NULL: not paced */
    int64_t                      spent_until;  /* wall ms: its quota */
    int64_t                      busy_until;   /* wall ms: it said wait */
    llm_breaker_t                breaker;      /* wall ms */
    ngx_http_llm_gateway_backend_stats_t  stats;
} ngx_http_llm_gateway_backend_sh_t;


/* llm_gateway_backend: one provider endpoint or key */
struct ngx_http_llm_gateway_backend_s {
    ngx_str_t                    name;
    ngx_str_t                    upstream;     /* $llm_backend */
    ngx_str_t                    provider_key; /* as the provider's bill
                                                  names it; "": unnamed */
    llm_pacer_conf_t             pacer;        /* rpm, tpm 0: not paced */
    uint32_t                     entries;      /* its ring; 0: no pacer */
    ngx_uint_t                   failures;     /* in a row open it; 0: no */
    ngx_msec_t                   fail_timeout;
    llm_breaker_conf_t           breaker;
    llm_api_e                    api;          /* its dialect; 0: that of
                                                  each location it serves */
    ngx_uint_t                   chat_max_tokens;  /* limit_param=max_tokens:
                                                  Chat's default output
                                                  limit under that name */
    ngx_shm_zone_t              *shm_zone;
    ngx_slab_pool_t             *shpool;
    ngx_http_llm_gateway_backend_sh_t  *sh;
};


/* one line of llm_gateway_role */
typedef struct {
    ngx_http_llm_gateway_backend_t  *backend;
    ngx_str_t                    model;        /* empty: the role's name */
    ngx_uint_t                   priority;     /* lower first */
    ngx_uint_t                   weight;
} ngx_http_llm_gateway_member_t;


/* llm_gateway_role: a name clients call, and its backends */
struct ngx_http_llm_gateway_role_s {
    ngx_str_t                    name;
    ngx_array_t                  members;   /* ngx_http_llm_gateway_member_t */
};


/* what the metrics show of a backend */
typedef struct {
    ngx_http_llm_gateway_backend_stats_t  stats;
    int64_t                      window_requests;
    int64_t                      window_tokens;
    int64_t                      queue;
    int64_t                      spent_ms;
    int64_t                      busy_ms;
    ngx_uint_t                   open;
} ngx_http_llm_gateway_backend_snap_t;


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
