
/*
 * ngx_http_llm_gateway_module: directives, configuration, the shared
 * memory zone of tenant buckets, and phase registration.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_accountd.h"
#include "ngx_http_llm_gateway_admit.h"
#include "ngx_http_llm_gateway_auth.h"
#include "ngx_http_llm_gateway_backend.h"
#include "ngx_http_llm_gateway_clock.h"
#include "ngx_http_llm_gateway_ctx.h"
#include "ngx_http_llm_gateway_filter.h"
#include "ngx_http_llm_gateway_idem.h"
#include "ngx_http_llm_gateway_journal.h"
#include "ngx_http_llm_gateway_json.h"
#include "ngx_http_llm_gateway_keys.h"
#include "ngx_http_llm_gateway_metrics.h"
#include "ngx_http_llm_gateway_models.h"
#include "ngx_http_llm_gateway_reply.h"
#include "ngx_http_llm_gateway_settle.h"
#include "ngx_http_llm_gateway_translate.h"
#include "ngx_http_llm_gateway_zone.h"

#include <cJSON.h>


/* the store of an llm_gateway_zone whose bad keys name none */
#define NGX_HTTP_LLM_GATEWAY_BAD_KEYS_SIZE  (1024 * 1024)


static ngx_int_t ngx_http_llm_gateway_load_keys(ngx_conf_t *cf,
    ngx_http_llm_gateway_main_conf_t *lmcf, ngx_str_t *secret);
static ngx_int_t ngx_http_llm_gateway_copy(ngx_conf_t *cf, ngx_str_t *to,
    char *from);
static u_char *ngx_http_llm_gateway_read_file(ngx_conf_t *cf,
    ngx_str_t *name, size_t *len);
static int ngx_libc_cdecl ngx_http_llm_gateway_cmp_keys(const void *one,
    const void *two);

static void *ngx_http_llm_gateway_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_llm_gateway_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_llm_gateway_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static char *ngx_http_llm_gateway_zone(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_llm_gateway_keys(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_llm_gateway_accountd(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_llm_gateway(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_http_llm_gateway_tier_param(
    ngx_http_llm_gateway_tier_t *tier, ngx_str_t *v);
static char *ngx_http_llm_gateway_tier_check(ngx_conf_t *cf,
    ngx_http_llm_gateway_tier_t *tier);
static char *ngx_http_llm_gateway_tier(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_llm_gateway_alias(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_llm_gateway_report_conf(
    ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_llm_gateway_pass_headers(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);
static char *ngx_http_llm_gateway_bad_keys_conf(
    ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_llm_gateway_diagnostics_conf(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);
static char *ngx_http_llm_gateway_sunset(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static time_t ngx_http_llm_gateway_parse_date(u_char *p, size_t len);
static ngx_int_t ngx_http_llm_gateway_parse_int(ngx_str_t *value, size_t skip,
    int64_t *n);
static ngx_int_t ngx_http_llm_gateway_add_variables(ngx_conf_t *cf);
static ngx_int_t ngx_http_llm_gateway_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_llm_gateway_uri_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_llm_gateway_init(ngx_conf_t *cf);
static ngx_int_t ngx_http_llm_gateway_init_process(ngx_cycle_t *cycle);
static void ngx_http_llm_gateway_reconf(ngx_cycle_t *cycle,
    ngx_http_llm_gateway_main_conf_t *lmcf);
static void ngx_http_llm_gateway_exit_process(ngx_cycle_t *cycle);


static ngx_conf_enum_t  ngx_http_llm_gateway_log_levels[] = {
    { ngx_string("info"), NGX_LOG_INFO },
    { ngx_string("notice"), NGX_LOG_NOTICE },
    { ngx_string("warn"), NGX_LOG_WARN },
    { ngx_string("error"), NGX_LOG_ERR },
    { ngx_null_string, 0 }
};


typedef struct {
    ngx_str_t                    name;
    size_t                       offset;
} ngx_http_llm_gateway_tier_param_t;


static ngx_http_llm_gateway_tier_param_t  ngx_http_llm_gateway_tier_params[] = {
    { ngx_string("tpm="),
      offsetof(ngx_http_llm_gateway_tier_t, limits.tpm.rate) },
    { ngx_string("burst="),
      offsetof(ngx_http_llm_gateway_tier_t, limits.tpm.burst) },
    { ngx_string("rpm="),
      offsetof(ngx_http_llm_gateway_tier_t, limits.rpm.rate) },
    { ngx_string("concurrency="),
      offsetof(ngx_http_llm_gateway_tier_t, limits.concurrency) },
    { ngx_string("max_tokens="),
      offsetof(ngx_http_llm_gateway_tier_t, max_tokens) },
    { ngx_string("default_max_tokens="),
      offsetof(ngx_http_llm_gateway_tier_t, default_max_tokens) },
    { ngx_string("weight="),
      offsetof(ngx_http_llm_gateway_tier_t, weight) },
    { ngx_string("minimum="),
      offsetof(ngx_http_llm_gateway_tier_t, minimum) },
    { ngx_string("priority="),
      offsetof(ngx_http_llm_gateway_tier_t, priority) },
    { ngx_string("image_tokens="),
      offsetof(ngx_http_llm_gateway_tier_t, image_tokens) },
    { ngx_string("context="),
      offsetof(ngx_http_llm_gateway_tier_t, context) },
    { ngx_null_string, 0 }
};


static ngx_command_t  ngx_http_llm_gateway_commands[] = {

    { ngx_string("llm_gateway_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE123,
      ngx_http_llm_gateway_zone,
      0,
      0,
      NULL },

    { ngx_string("llm_gateway_keys"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE2,
      ngx_http_llm_gateway_keys,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_gateway_accountd"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE123,
      ngx_http_llm_gateway_accountd,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_gateway"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE123,
      ngx_http_llm_gateway,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_gateway_idempotency"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_http_llm_gateway_idem_conf,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_gateway_backend"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_http_llm_gateway_backend_conf,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_gateway_role"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_http_llm_gateway_backend_role_conf,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_gateway_tier"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_2MORE,
      ngx_http_llm_gateway_tier,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_gateway_alias"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE2,
      ngx_http_llm_gateway_alias,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_gateway_sunset"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE23,
      ngx_http_llm_gateway_sunset,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_gateway_bad_keys"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_http_llm_gateway_bad_keys_conf,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_gateway_max_body"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_gateway_loc_conf_t, max_body),
      NULL },

    { ngx_string("llm_gateway_max_depth"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_gateway_loc_conf_t, max_depth),
      NULL },

    { ngx_string("llm_gateway_max_string"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_gateway_loc_conf_t, max_string),
      NULL },

    { ngx_string("llm_gateway_response_buffer"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_gateway_loc_conf_t, response_buffer),
      NULL },

    { ngx_string("llm_gateway_metrics"),
      NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_llm_gateway_report_conf,
      0,
      0,
      ngx_http_llm_gateway_metrics_handler },

    { ngx_string("llm_gateway_status"),
      NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_llm_gateway_report_conf,
      0,
      0,
      ngx_http_llm_gateway_metrics_status_handler },

    { ngx_string("llm_gateway_reject_log_level"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_gateway_loc_conf_t, reject_log_level),
      &ngx_http_llm_gateway_log_levels },

    { ngx_string("llm_gateway_reject_log_rate"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_gateway_loc_conf_t, reject_log_rate),
      NULL },

    { ngx_string("llm_gateway_pass_headers"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_http_llm_gateway_pass_headers,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_gateway_diagnostics"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_http_llm_gateway_diagnostics_conf,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_gateway_error"),
      NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_llm_gateway_report_conf,
      0,
      0,
      ngx_http_llm_gateway_reply_error_handler },

      ngx_null_command
};


typedef enum {
    NGX_HTTP_LLM_GATEWAY_VAR_REQUEST_ID = 0,
    NGX_HTTP_LLM_GATEWAY_VAR_TENANT,
    NGX_HTTP_LLM_GATEWAY_VAR_KEY_ID,
    NGX_HTTP_LLM_GATEWAY_VAR_TIER,
    NGX_HTTP_LLM_GATEWAY_VAR_MODEL,
    NGX_HTTP_LLM_GATEWAY_VAR_INPUT_TOKENS,
    NGX_HTTP_LLM_GATEWAY_VAR_OUTPUT_TOKENS,
    NGX_HTTP_LLM_GATEWAY_VAR_FINISH_REASON,
    NGX_HTTP_LLM_GATEWAY_VAR_BACKEND,
    NGX_HTTP_LLM_GATEWAY_VAR_UPSTREAM,
    NGX_HTTP_LLM_GATEWAY_VAR_QUEUE_MS,
    NGX_HTTP_LLM_GATEWAY_VAR_MAX_TOKENS,
    NGX_HTTP_LLM_GATEWAY_VAR_N,
    NGX_HTTP_LLM_GATEWAY_VAR_STREAM,
    NGX_HTTP_LLM_GATEWAY_VAR_PARTS,
    NGX_HTTP_LLM_GATEWAY_VAR_UPSTREAM_URI
} ngx_http_llm_gateway_var_e;


/* for log_format and proxy_set_header; none holds key material */
static ngx_http_variable_t  ngx_http_llm_gateway_vars[] = {

    { ngx_string("llm_request_id"), NULL, ngx_http_llm_gateway_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_REQUEST_ID, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_tenant"), NULL, ngx_http_llm_gateway_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_TENANT, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_key_id"), NULL, ngx_http_llm_gateway_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_KEY_ID, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_tier"), NULL, ngx_http_llm_gateway_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_TIER, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_model"), NULL, ngx_http_llm_gateway_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_MODEL, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_input_tokens"), NULL, ngx_http_llm_gateway_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_INPUT_TOKENS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_output_tokens"), NULL, ngx_http_llm_gateway_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_OUTPUT_TOKENS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_finish_reason"), NULL, ngx_http_llm_gateway_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_FINISH_REASON, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_backend"), NULL, ngx_http_llm_gateway_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_BACKEND, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_upstream"), NULL, ngx_http_llm_gateway_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_UPSTREAM, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_queue_ms"), NULL, ngx_http_llm_gateway_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_QUEUE_MS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    /* the request as inspected: what the upstream will read */
    { ngx_string("llm_max_tokens"), NULL, ngx_http_llm_gateway_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_MAX_TOKENS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_n"), NULL, ngx_http_llm_gateway_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_N, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_stream"), NULL, ngx_http_llm_gateway_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_STREAM, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_parts"), NULL, ngx_http_llm_gateway_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_PARTS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_upstream_uri"), NULL, ngx_http_llm_gateway_uri_variable,
      NGX_HTTP_LLM_GATEWAY_VAR_UPSTREAM_URI, NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


static ngx_http_module_t  ngx_http_llm_gateway_module_ctx = {
    ngx_http_llm_gateway_add_variables,    /* preconfiguration */
    ngx_http_llm_gateway_init,             /* postconfiguration */

    ngx_http_llm_gateway_create_main_conf, /* create main configuration */
    NULL,                                  /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    ngx_http_llm_gateway_create_loc_conf,  /* create location configuration */
    ngx_http_llm_gateway_merge_loc_conf    /* merge location configuration */
};


ngx_module_t  ngx_http_llm_gateway_module = {
    NGX_MODULE_V1,
    &ngx_http_llm_gateway_module_ctx,      /* module context */
    ngx_http_llm_gateway_commands,         /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    ngx_http_llm_gateway_init_process,     /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_http_llm_gateway_exit_process,     /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


/*
 * A reload's capacity= and inflight= apply when its workers start: a
 * reload that fails leaves the old ones to the old workers.  The first
 * new worker finds them changed, the others find nothing to do.
 */

static void
ngx_http_llm_gateway_reconf(ngx_cycle_t *cycle,
    ngx_http_llm_gateway_main_conf_t *lmcf)
{
    ngx_uint_t                    i;
    llm_fair_conf_t               fair;
    ngx_list_part_t              *part;
    ngx_http_llm_gateway_zone_t  *zone;

    part = &cycle->shared_memory.part;
    i = 0;

    while ((zone = ngx_http_llm_gateway_zone_next(lmcf, &part, &i))) {

        ngx_shmtx_lock(&zone->shpool->mutex);

        if (zone->sh->fair.conf.capacity != zone->capacity
            || zone->sh->fair.conf.inflight != zone->inflight)
        {
            ngx_memzero(&fair, sizeof(llm_fair_conf_t));
            fair.capacity = zone->capacity;
            fair.inflight = zone->inflight;

            llm_fair_reconf(&zone->sh->fair, &fair,
                            ngx_http_llm_gateway_clock_now_ms());
        }

        ngx_shmtx_unlock(&zone->shpool->mutex);
    }
}


static void *
ngx_http_llm_gateway_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_gateway_main_conf_t));
    if (lmcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     lmcf->secret_len = 0;
     *     lmcf->keys_file = { 0, NULL };
     *     lmcf->accountd = NULL;
     */

    if (ngx_array_init(&lmcf->keys, cf->pool, 16,
                       sizeof(ngx_http_llm_gateway_key_t))
        != NGX_OK)
    {
        return NULL;
    }

    lmcf->accountd_buffer = NGX_CONF_UNSET_SIZE;
    lmcf->request_id_index = NGX_ERROR;

    return lmcf;
}


static void *
ngx_http_llm_gateway_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_llm_gateway_loc_conf_t  *conf;

    conf = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_gateway_loc_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     conf->shm_zone = NULL;
     *     conf->api = 0;
     */

    conf->enable = NGX_CONF_UNSET;
    conf->tiers = NGX_CONF_UNSET_PTR;
    conf->aliases = NGX_CONF_UNSET_PTR;
    conf->sunsets = NGX_CONF_UNSET_PTR;
    conf->response_buffer = NGX_CONF_UNSET_SIZE;
    conf->max_body = NGX_CONF_UNSET_SIZE;
    conf->max_string = NGX_CONF_UNSET_SIZE;
    conf->max_depth = NGX_CONF_UNSET_UINT;
    conf->reject_log_level = NGX_CONF_UNSET_UINT;
    conf->bad_keys = NGX_CONF_UNSET_UINT;
    conf->bad_keys_window = NGX_CONF_UNSET_MSEC;
    conf->bad_keys_checks = NGX_CONF_UNSET_UINT;
    conf->bad_keys_prefix6 = NGX_CONF_UNSET_UINT;
    conf->bad_keys_zone = NGX_CONF_UNSET_PTR;
    conf->reject_log_rate = NGX_CONF_UNSET_UINT;
    conf->pass_headers = NGX_CONF_UNSET_PTR;
    conf->diagnostics = NGX_CONF_UNSET_PTR;

    return conf;
}


static char *
ngx_http_llm_gateway_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_llm_gateway_loc_conf_t  *prev = parent;
    ngx_http_llm_gateway_loc_conf_t  *conf = child;

    size_t                             size;
    ngx_str_t                          name;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    if (conf->enable == NGX_CONF_UNSET) {
        conf->enable = prev->enable;
        conf->shm_zone = prev->shm_zone;
        conf->api = prev->api;
        conf->backend_name = prev->backend_name;
    }

    ngx_conf_merge_value(conf->enable, prev->enable, 0);

    if (conf->api == 0) {
        conf->api = LLM_API_OPENAI;
    }

    /* like proxy_set_header: a level with no tiers inherits them all */
    ngx_conf_merge_ptr_value(conf->tiers, prev->tiers, NULL);
    ngx_conf_merge_ptr_value(conf->aliases, prev->aliases, NULL);
    ngx_conf_merge_ptr_value(conf->sunsets, prev->sunsets, NULL);

    ngx_conf_merge_size_value(conf->response_buffer, prev->response_buffer,
                              1024 * 1024);
    ngx_conf_merge_size_value(conf->max_body, prev->max_body, 1024 * 1024);
    ngx_conf_merge_size_value(conf->max_string, prev->max_string,
                              conf->max_body);
    ngx_conf_merge_uint_value(conf->max_depth, prev->max_depth, 64);
    ngx_conf_merge_uint_value(conf->reject_log_level, prev->reject_log_level,
                              NGX_LOG_ERR);
    ngx_conf_merge_uint_value(conf->bad_keys, prev->bad_keys, 20);
    ngx_conf_merge_msec_value(conf->bad_keys_window, prev->bad_keys_window,
                              60000);
    ngx_conf_merge_uint_value(conf->bad_keys_checks, prev->bad_keys_checks,
                              5);
    ngx_conf_merge_uint_value(conf->bad_keys_prefix6, prev->bad_keys_prefix6,
                              64);
    ngx_conf_merge_ptr_value(conf->bad_keys_zone, prev->bad_keys_zone, NULL);
    ngx_conf_merge_uint_value(conf->reject_log_rate, prev->reject_log_rate,
                              5);
    ngx_conf_merge_ptr_value(conf->pass_headers, prev->pass_headers, NULL);
    ngx_conf_merge_ptr_value(conf->diagnostics, prev->diagnostics, NULL);

    if (!conf->enable) {
        return NGX_CONF_OK;
    }

    if (conf->tiers == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_gateway\" is on but no \"llm_gateway_tier\" "
                           "is defined for it");
        return NGX_CONF_ERROR;
    }

    lmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_gateway_module);

    if (conf->backend_name.len) {
        conf->backend = ngx_http_llm_gateway_backend_find(lmcf,
                                                          &conf->backend_name);
        if (conf->backend == NULL) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "unknown backend \"%V\" in \"llm_gateway\"",
                               &conf->backend_name);
            return NGX_CONF_ERROR;
        }
    }

    /* by default each llm_gateway_zone's addresses have a store apart */
    conf->bad_keys_store = conf->bad_keys_zone;

    if (conf->bad_keys && conf->bad_keys_store == NULL) {
        name.len = sizeof("llm_gateway_bad_keys:") - 1
                   + conf->shm_zone->shm.name.len;
        name.data = ngx_pnalloc(cf->pool, name.len);
        if (name.data == NULL) {
            return NGX_CONF_ERROR;
        }

        ngx_sprintf(name.data, "llm_gateway_bad_keys:%V",
                    &conf->shm_zone->shm.name);

        size = NGX_HTTP_LLM_GATEWAY_BAD_KEYS_SIZE;
        conf->bad_keys_store = ngx_http_llm_gateway_auth_addrs_add(cf, &name,
                                                                   size);
        if (conf->bad_keys_store == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    if (lmcf->keys_file.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_gateway\" is on but \"llm_gateway_keys\" "
                           "is not set");
        return NGX_CONF_ERROR;
    }

    if (lmcf->accountd == NULL && !lmcf->warned) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "\"llm_gateway\" is on but \"llm_gateway_accountd\" "
                           "is not set: usage is metered but not recorded");
        lmcf->warned = 1;
    }

    return NGX_CONF_OK;
}


static char *
ngx_http_llm_gateway_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_str_t                    *value;
    ngx_uint_t                    i;
    ngx_shm_zone_t               *shm_zone;
    ngx_http_llm_gateway_zone_t  *zone;

    value = cf->args->elts;

    zone = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_gateway_zone_t));
    if (zone == NULL) {
        return NGX_CONF_ERROR;
    }

    shm_zone = ngx_http_llm_gateway_zone_add(cf, &value[1],
                                             &ngx_http_llm_gateway_module);
    if (shm_zone == NULL) {
        return NGX_CONF_ERROR;
    }

    shm_zone->init = ngx_http_llm_gateway_zone_init;
    shm_zone->data = zone;
    zone->name = shm_zone->shm.name;

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "capacity=", 9) == 0) {
            if (zone->capacity) {
                return "has duplicate \"capacity\"";
            }

            if (ngx_http_llm_gateway_parse_int(&value[i], 9, &zone->capacity)
                == NGX_OK
                && zone->capacity > 0 && zone->capacity <= LLM_BUCKET_MAX)
            {
                continue;
            }

        } else if (ngx_strncmp(value[i].data, "inflight=", 9) == 0) {
            if (zone->inflight) {
                return "has duplicate \"inflight\"";
            }

            if (ngx_http_llm_gateway_parse_int(&value[i], 9, &zone->inflight)
                == NGX_OK
                && zone->inflight > 0
                && zone->inflight <= LLM_FAIR_INFLIGHT_MAX)
            {
                continue;
            }
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\" (capacity: 1 to %L "
                           "tokens a minute, inflight: 1 to %d)", &value[i],
                           LLM_BUCKET_MAX, LLM_FAIR_INFLIGHT_MAX);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static char *
ngx_http_llm_gateway_keys(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_gateway_main_conf_t *lmcf = conf;

    ngx_str_t  *value, secret;

    if (lmcf->keys_file.data) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strncmp(value[2].data, "secret=", 7) != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\", expected "
                           "\"secret=file\"", &value[2]);
        return NGX_CONF_ERROR;
    }

    lmcf->keys_file = value[1];

    secret.data = value[2].data + 7;
    secret.len = value[2].len - 7;

    if (ngx_conf_full_name(cf->cycle, &lmcf->keys_file, 1) != NGX_OK
        || ngx_conf_full_name(cf->cycle, &secret, 1) != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    if (ngx_http_llm_gateway_load_keys(cf, lmcf, &secret) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/*
 * The snapshot is read once per configuration load, in the master: workers
 * only search the sorted array, never touch the file.
 */

static ngx_int_t
ngx_http_llm_gateway_load_keys(ngx_conf_t *cf,
    ngx_http_llm_gateway_main_conf_t *lmcf, ngx_str_t *secret)
{
    int                          n;
    off_t                        gen;
    u_char                      *text, *p, *last, *eol;
    size_t                       len;
    ngx_uint_t                   line, i;
    llm_key_entry_t              e;
    ngx_http_llm_gateway_key_t  *k;

    text = ngx_http_llm_gateway_read_file(cf, secret, &len);
    if (text == NULL) {
        return NGX_ERROR;
    }

    n = llm_key_secret_decode((char *) text, len, lmcf->secret,
                              LLM_KEY_SECRET_MAX);

    ngx_explicit_memzero(text, len);

    if (n < 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "secret file \"%V\" must hold at least %d bytes "
                           "as hex", secret, LLM_KEY_SECRET_MIN);
        return NGX_ERROR;
    }

    lmcf->secret_len = n;

    text = ngx_http_llm_gateway_read_file(cf, &lmcf->keys_file, &len);
    if (text == NULL) {
        return NGX_ERROR;
    }

    last = text + len;
    line = 0;

    for (p = text; p < last; p = eol + 1) {
        eol = ngx_strlchr(p, last, '\n');
        if (eol == NULL) {
            eol = last;
        }

        line++;

        /* version 2 has no caps: they are learned from accountd */
        if (line == 1
            && ((size_t) (eol - p) != sizeof(LLM_KEY_SNAPSHOT_HEADER) - 1
                || (ngx_strncmp(p, LLM_KEY_SNAPSHOT_HEADER, eol - p) != 0
                    && ngx_strncmp(p, LLM_KEY_SNAPSHOT_HEADER_2, eol - p)
                       != 0)))
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"%V\" is not a key snapshot: its first line "
                               "must be \"%s\"", &lmcf->keys_file,
                               LLM_KEY_SNAPSHOT_HEADER);
            return NGX_ERROR;
        }

        if ((size_t) (eol - p) > sizeof(LLM_KEY_GENERATION) - 1
            && ngx_strncmp(p, LLM_KEY_GENERATION,
                           sizeof(LLM_KEY_GENERATION) - 1)
               == 0)
        {
            gen = ngx_atoof(p + sizeof(LLM_KEY_GENERATION) - 1,
                            eol - p - (sizeof(LLM_KEY_GENERATION) - 1));
            if (gen == NGX_ERROR) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid generation in \"%V\"",
                                   &lmcf->keys_file);
                return NGX_ERROR;
            }

            lmcf->table.generation = (uint64_t) gen;
            continue;
        }

        n = llm_key_parse_line((char *) p, eol - p, &e);

        if (n == 0) {
            continue;
        }

        if (n < 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid key snapshot line %ui in \"%V\"",
                               line, &lmcf->keys_file);
            return NGX_ERROR;
        }

        k = ngx_array_push(&lmcf->keys);
        if (k == NULL) {
            return NGX_ERROR;
        }

        ngx_memcpy(k->hash, e.hash, LLM_KEY_HASH_LEN);
        k->key_id = e.key_id;
        k->tenant_id = e.tenant_id;
        k->expires = (time_t) e.expires;
        k->caps = e.caps;

        if (ngx_http_llm_gateway_copy(cf, &k->tier, e.tier) != NGX_OK
            || ngx_http_llm_gateway_copy(cf, &k->tenant, e.tenant) != NGX_OK
            || ngx_http_llm_gateway_copy(cf, &k->models, e.models) != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    if (line == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\" is empty, not a key snapshot",
                           &lmcf->keys_file);
        return NGX_ERROR;
    }

    ngx_qsort(lmcf->keys.elts, lmcf->keys.nelts,
              sizeof(ngx_http_llm_gateway_key_t),
              ngx_http_llm_gateway_cmp_keys);

    k = lmcf->keys.elts;

    for (i = 1; i < lmcf->keys.nelts; i++) {
        if (ngx_memcmp(k[i - 1].hash, k[i].hash, LLM_KEY_HASH_LEN) == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "key snapshot \"%V\" lists key id %L twice",
                               &lmcf->keys_file, k[i].key_id);
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_gateway_copy(ngx_conf_t *cf, ngx_str_t *to, char *from)
{
    to->len = ngx_strlen(from);
    to->data = ngx_pnalloc(cf->pool, to->len + 1);

    if (to->data == NULL) {
        return NGX_ERROR;
    }

    /* NUL-terminated too: llm_key_model_allowed() takes a C string */
    ngx_cpystrn(to->data, (u_char *) from, to->len + 1);

    return NGX_OK;
}


static u_char *
ngx_http_llm_gateway_read_file(ngx_conf_t *cf, ngx_str_t *name, size_t *len)
{
    u_char           *buf;
    ssize_t           n;
    ngx_file_t        file;
    ngx_file_info_t   fi;

    ngx_memzero(&file, sizeof(ngx_file_t));

    file.name = *name;
    file.log = cf->log;

    file.fd = ngx_open_file(name->data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);

    if (file.fd == NGX_INVALID_FILE) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           ngx_open_file_n " \"%V\" failed", name);
        return NULL;
    }

    buf = NULL;

    if (ngx_fd_info(file.fd, &fi) == NGX_FILE_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           ngx_fd_info_n " \"%V\" failed", name);
        goto done;
    }

    *len = (size_t) ngx_file_size(&fi);

    buf = ngx_pnalloc(cf->temp_pool, *len + 1);
    if (buf == NULL) {
        goto done;
    }

    n = ngx_read_file(&file, buf, *len, 0);

    if (n != (ssize_t) *len) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "could not read \"%V\" whole", name);
        buf = NULL;
    }

done:

    if (ngx_close_file(file.fd) == NGX_FILE_ERROR) {
        ngx_log_error(NGX_LOG_ALERT, cf->log, ngx_errno,
                      ngx_close_file_n " \"%V\" failed", name);
    }

    return buf;
}


static int ngx_libc_cdecl
ngx_http_llm_gateway_cmp_keys(const void *one, const void *two)
{
    const ngx_http_llm_gateway_key_t  *a = one;
    const ngx_http_llm_gateway_key_t  *b = two;

    return ngx_memcmp(a->hash, b->hash, LLM_KEY_HASH_LEN);
}


static char *
ngx_http_llm_gateway_accountd(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_gateway_main_conf_t *lmcf = conf;

    ssize_t      size;
    ngx_str_t   *value, s;
    ngx_url_t   *u;
    ngx_uint_t   i;

    if (lmcf->accountd) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strncmp(value[1].data, "unix:", 5) != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "accountd address \"%V\" must be \"unix:path\"",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    u = ngx_pcalloc(cf->pool, sizeof(ngx_url_t));
    if (u == NULL) {
        return NGX_CONF_ERROR;
    }

    u->url = value[1];
    u->no_resolve = 1;

    if (ngx_parse_url(cf->pool, u) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%s in \"%V\"", u->err,
                           &u->url);
        return NGX_CONF_ERROR;
    }

    lmcf->accountd = u;
    lmcf->accountd_buffer = 4 * 1024 * 1024;
    lmcf->accountd_full_admit = 0;

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "buffer=", 7) == 0) {
            s.data = value[i].data + 7;
            s.len = value[i].len - 7;

            size = ngx_parse_size(&s);

            /* the slab's own pages, and room for a few records */
            if (size == NGX_ERROR || size < 64 * 1024) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid buffer size \"%V\", at least "
                                   "64k", &value[i]);
                return NGX_CONF_ERROR;
            }

            lmcf->accountd_buffer = size;
            continue;
        }

        if (ngx_strcmp(value[i].data, "full=refuse") == 0) {
            lmcf->accountd_full_admit = 0;
            continue;
        }

        if (ngx_strcmp(value[i].data, "full=admit") == 0) {
            lmcf->accountd_full_admit = 1;
            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\"", &value[i]);
        return NGX_CONF_ERROR;
    }

    if (ngx_http_llm_gateway_journal_add(cf, lmcf) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static char *
ngx_http_llm_gateway(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_gateway_loc_conf_t *llcf = conf;

    ngx_str_t   *value, s;
    ngx_uint_t   i;

    if (llcf->enable != NGX_CONF_UNSET) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (cf->args->nelts == 2 && ngx_strcmp(value[1].data, "off") == 0) {
        llcf->enable = 0;
        return NGX_CONF_OK;
    }

    for (i = 1; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "zone=", 5) == 0) {

            s.len = value[i].len - 5;
            s.data = value[i].data + 5;

            llcf->shm_zone = ngx_shared_memory_add(cf, &s, 0,
                                                 &ngx_http_llm_gateway_module);
            if (llcf->shm_zone == NULL) {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "backend=", 8) == 0) {
            llcf->backend_name.data = value[i].data + 8;
            llcf->backend_name.len = value[i].len - 8;
            continue;
        }

        if (ngx_strcmp(value[i].data, "api=openai") == 0) {
            llcf->api = LLM_API_OPENAI;
            continue;
        }

        if (ngx_strcmp(value[i].data, "api=anthropic") == 0) {
            llcf->api = LLM_API_ANTHROPIC;
            continue;
        }

        if (ngx_strcmp(value[i].data, "api=responses") == 0) {
            llcf->api = LLM_API_RESPONSES;
            continue;
        }

        if (ngx_strcmp(value[i].data, "api=embeddings") == 0) {
            llcf->api = LLM_API_EMBEDDINGS;
            continue;
        }

        if (ngx_strcmp(value[i].data, "api=count_tokens") == 0) {
            llcf->api = LLM_API_COUNT_TOKENS;
            continue;
        }

        /* answered by the gateway: the key's models, or a 404 */
        if (ngx_strcmp(value[i].data, "api=models") == 0) {
            llcf->api = LLM_API_MODELS;
            ngx_http_llm_gateway_models_init();
            continue;
        }

        if (ngx_strcmp(value[i].data, "api=none") == 0) {
            llcf->api = LLM_API_NONE;
            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\"", &value[i]);
        return NGX_CONF_ERROR;
    }

    if (llcf->shm_zone == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\" must have \"zone\" parameter",
                           &cmd->name);
        return NGX_CONF_ERROR;
    }

    llcf->enable = 1;

    return NGX_CONF_OK;
}


static char *
ngx_http_llm_gateway_tier(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_gateway_loc_conf_t *llcf = conf;

    ngx_str_t                          *value;
    ngx_uint_t                          i;
    ngx_http_llm_gateway_tier_t        *tier, *t;

    value = cf->args->elts;

    if (!llm_key_name_valid((char *) value[1].data, value[1].len,
                            LLM_KEY_TIER_MAX))
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid tier name \"%V\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    if (llcf->tiers == NGX_CONF_UNSET_PTR) {
        llcf->tiers = ngx_array_create(cf->pool, 4,
                                       sizeof(ngx_http_llm_gateway_tier_t));
        if (llcf->tiers == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    t = llcf->tiers->elts;

    for (i = 0; i < llcf->tiers->nelts; i++) {
        if (t[i].name.len == value[1].len
            && ngx_strncmp(t[i].name.data, value[1].data, value[1].len) == 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "duplicate tier \"%V\"", &value[1]);
            return NGX_CONF_ERROR;
        }
    }

    tier = ngx_array_push(llcf->tiers);
    if (tier == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(tier, sizeof(ngx_http_llm_gateway_tier_t));

    tier->name = value[1];

    tier->models = (u_char *) "*";

    /* a share of a zone's capacity: weight 1, no minimum, priority 1 */
    tier->weight = 1;
    tier->priority = 1;

    /* nothing free by accident: a model without a price is refused */
    tier->unpriced_refuse = 1;

    /* unset: see below */
    tier->image_tokens = -1;
    tier->context = -1;

    for (i = 2; i < cf->args->nelts; i++) {
        if (ngx_http_llm_gateway_tier_param(tier, &value[i]) != NGX_OK) {
            goto invalid;
        }
    }

    return ngx_http_llm_gateway_tier_check(cf, tier);

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid parameter \"%V\" of tier \"%V\"",
                       &value[i], &value[1]);
    return NGX_CONF_ERROR;
}


/* one key=value of llm_gateway_tier; NGX_ERROR: it is invalid */

static ngx_int_t
ngx_http_llm_gateway_tier_param(ngx_http_llm_gateway_tier_t *tier,
    ngx_str_t *v)
{
    ngx_http_llm_gateway_tier_param_t  *p;

    if (ngx_strncmp(v->data, "models=", 7) == 0) {
        if (!llm_key_models_valid((char *) v->data + 7,
                                  v->len - 7))
        {
            return NGX_ERROR;
        }

        /* NUL-terminated, as configuration strings are */
        tier->models = v->data + 7;
        return NGX_OK;
    }

    if (v->len == 16
        && ngx_strncmp(v->data, "unbounded=refuse", 16) == 0)
    {
        tier->unbounded_refuse = 1;
        return NGX_OK;
    }

    if (v->len == 17
        && ngx_strncmp(v->data, "unbounded=reserve", 17) == 0)
    {
        tier->unbounded_refuse = 0;
        return NGX_OK;
    }

    if (ngx_strncmp(v->data, "downgrade=", 10) == 0) {
        /* one model name, as in a models list */
        if (v->len == 10
            || v->len - 10 >= LLM_KEY_MODEL_MAX
            || ngx_strlchr(v->data + 10,
                           v->data + v->len, ',')
            || ngx_strlchr(v->data + 10,
                           v->data + v->len, '*')
            || !llm_key_models_valid((char *) v->data + 10,
                                     v->len - 10))
        {
            return NGX_ERROR;
        }

        tier->downgrade.data = v->data + 10;
        tier->downgrade.len = v->len - 10;
        return NGX_OK;
    }

    /* an output limit above max_tokens: refused, or lowered to it */
    if (ngx_strcmp(v->data, "above_max=refuse") == 0
        || ngx_strcmp(v->data, "above_max=lower") == 0)
    {
        tier->above_max_lower = (v->data[10] == 'l');
        return NGX_OK;
    }

    /* a model without a price: served (allow) or refused */
    if (ngx_strcmp(v->data, "unpriced=refuse") == 0
        || ngx_strcmp(v->data, "unpriced=allow") == 0)
    {
        tier->unpriced_refuse = (v->data[9] == 'r');
        return NGX_OK;
    }

    for (p = ngx_http_llm_gateway_tier_params; p->name.len; p++) {
        if (v->len > p->name.len
            && ngx_strncmp(v->data, p->name.data, p->name.len) == 0)
        {
            break;
        }
    }

    if (p->name.len == 0
        || ngx_http_llm_gateway_parse_int(v, p->name.len,
                                          (int64_t *) ((u_char *) tier
                                                       + p->offset))
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* the tier's defaults, and what its parameters must hold together */

static char *
ngx_http_llm_gateway_tier_check(ngx_conf_t *cf,
    ngx_http_llm_gateway_tier_t *tier)
{
    if (tier->limits.tpm.rate == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "tier \"%V\" must have \"tpm\" parameter",
                           &tier->name);
        return NGX_CONF_ERROR;
    }

    /* the seeds' walkthrough: a burst of 1.5 minutes' worth */
    if (tier->limits.tpm.burst == 0) {
        tier->limits.tpm.burst = tier->limits.tpm.rate
                                 + tier->limits.tpm.rate / 2;
    }

    /* a minute's worth of requests may come at once */
    tier->limits.rpm.burst = tier->limits.rpm.rate;

    if (tier->weight < 1) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "weight of tier \"%V\" must be at least 1",
                           &tier->name);
        return NGX_CONF_ERROR;
    }

    if (tier->priority >= LLM_FAIR_PRIORITIES) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "priority of tier \"%V\" must be 0 to %d",
                           &tier->name, LLM_FAIR_PRIORITIES - 1);
        return NGX_CONF_ERROR;
    }

    if (tier->max_tokens == 0) {
        tier->max_tokens = ngx_min(tier->limits.tpm.burst, 1000000);
    }

    if (tier->default_max_tokens == 0) {
        tier->default_max_tokens = ngx_min(tier->max_tokens, 4096);
    }

    /*
     * The most an image costs among the providers' rules (OpenAI's patch
     * models, Anthropic's 1.15 megapixels); a prompt whose size its body
     * does not tell is as large as a long context window.
     */
    if (tier->image_tokens < 0) {
        tier->image_tokens = 3000;
    }

    if (tier->context < 0) {
        tier->context = 200000;
    }

    if (tier->default_max_tokens > tier->max_tokens) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "tier \"%V\": \"default_max_tokens\" is above "
                           "\"max_tokens\"", &tier->name);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/*
 * Like stub_status: the location answers with what cmd->post handles,
 * the metrics or the status page.
 */

static char *
ngx_http_llm_gateway_report_conf(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = (ngx_http_handler_pt) cmd->post;

    return NGX_CONF_OK;
}


/*
 * Client request headers that reach the upstream besides the built-in
 * ones (auth.c): names, or prefixes ending in "*", kept in lower case.
 * Like proxy_set_header, a level that names none inherits its parent's.
 */

static char *
ngx_http_llm_gateway_pass_headers(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_llm_gateway_loc_conf_t *llcf = conf;

    u_char      *c;
    ngx_str_t   *value, *name;
    ngx_uint_t   i;

    if (llcf->pass_headers == NGX_CONF_UNSET_PTR) {
        llcf->pass_headers = ngx_array_create(cf->pool, 4, sizeof(ngx_str_t));
        if (llcf->pass_headers == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    value = cf->args->elts;

    for (i = 1; i < cf->args->nelts; i++) {

        if (value[i].len == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "empty header name");
            return NGX_CONF_ERROR;
        }

        for (c = value[i].data; c < value[i].data + value[i].len; c++) {
            if (*c == '*' && c == value[i].data + value[i].len - 1
                && value[i].len > 1)
            {
                break;
            }

            if (!(*c == '-' || *c == '_' || (*c >= '0' && *c <= '9')
                  || ((*c | 0x20) >= 'a' && (*c | 0x20) <= 'z')))
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid header name \"%V\"", &value[i]);
                return NGX_CONF_ERROR;
            }
        }

        name = ngx_array_push(llcf->pass_headers);
        if (name == NULL) {
            return NGX_CONF_ERROR;
        }

        ngx_strlow(value[i].data, value[i].data, value[i].len);
        *name = value[i];
    }

    return NGX_CONF_OK;
}


/*
 * llm_gateway_diagnostics off | on | address[/prefix] ...;
 *
 * The gateway's own headers that name backends (and their waits): off,
 * for every client, or for clients of the networks listed only.
 */

static char *
ngx_http_llm_gateway_diagnostics_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_llm_gateway_loc_conf_t *llcf = conf;

    ngx_int_t    rc;
    ngx_str_t   *value;
    ngx_uint_t   i;
    ngx_cidr_t  *cidr;

    if (llcf->diagnostics != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (cf->args->nelts == 2 && ngx_strcmp(value[1].data, "off") == 0) {
        llcf->diagnostics = NULL;
        return NGX_CONF_OK;
    }

    llcf->diagnostics = ngx_array_create(cf->pool, 2, sizeof(ngx_cidr_t));
    if (llcf->diagnostics == NULL) {
        return NGX_CONF_ERROR;
    }

    if (cf->args->nelts == 2 && ngx_strcmp(value[1].data, "on") == 0) {
        return NGX_CONF_OK;
    }

    for (i = 1; i < cf->args->nelts; i++) {
        cidr = ngx_array_push(llcf->diagnostics);
        if (cidr == NULL) {
            return NGX_CONF_ERROR;
        }

        rc = ngx_ptocidr(&value[i], cidr);

        if (rc == NGX_ERROR) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid network \"%V\"", &value[i]);
            return NGX_CONF_ERROR;
        }

        if (rc == NGX_DONE) {
            ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                               "low address bits of %V are meaningless",
                               &value[i]);
        }
    }

    return NGX_CONF_OK;
}

static char *
ngx_http_llm_gateway_bad_keys_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_llm_gateway_loc_conf_t *llcf = conf;

    u_char      *p;
    ssize_t      size;
    ngx_int_t    n;
    ngx_str_t   *value, s, name;
    ngx_uint_t   i;

    if (llcf->bad_keys != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (cf->args->nelts == 2 && ngx_strcmp(value[1].data, "off") == 0) {
        llcf->bad_keys = 0;
        return NGX_CONF_OK;
    }

    n = ngx_atoi(value[1].data, value[1].len);
    if (n <= 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid number \"%V\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    llcf->bad_keys = n;

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "window=", 7) == 0) {
            s.data = value[i].data + 7;
            s.len = value[i].len - 7;

            llcf->bad_keys_window = ngx_parse_time(&s, 0);

            if (llcf->bad_keys_window == (ngx_msec_t) NGX_ERROR
                || llcf->bad_keys_window == 0)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid window \"%V\"", &value[i]);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        /* the valid keys a locked address may still have looked up */
        if (ngx_strncmp(value[i].data, "checks=", 7) == 0) {
            n = ngx_atoi(value[i].data + 7, value[i].len - 7);
            if (n == NGX_ERROR) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid checks \"%V\"", &value[i]);
                return NGX_CONF_ERROR;
            }

            llcf->bad_keys_checks = n;
            continue;
        }

        /* how much of an IPv6 address is one client */
        if (ngx_strncmp(value[i].data, "ipv6_prefix=", 12) == 0) {
            n = ngx_atoi(value[i].data + 12, value[i].len - 12);
            if (n < 1 || n > 128) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid ipv6_prefix \"%V\"", &value[i]);
                return NGX_CONF_ERROR;
            }

            llcf->bad_keys_prefix6 = n;
            continue;
        }

        /* the store of the counters, apart from the tenants */
        if (ngx_strncmp(value[i].data, "zone=", 5) == 0) {
            name.data = value[i].data + 5;
            p = (u_char *) ngx_strlchr(name.data,
                                       value[i].data + value[i].len, ':');

            if (p == NULL || p == name.data) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid zone size \"%V\"", &value[i]);
                return NGX_CONF_ERROR;
            }

            name.len = p - name.data;
            s.data = p + 1;
            s.len = value[i].data + value[i].len - s.data;

            size = ngx_parse_size(&s);

            if (size == NGX_ERROR) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid zone size \"%V\"", &value[i]);
                return NGX_CONF_ERROR;
            }

            if (size < (ssize_t) (8 * ngx_pagesize)) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "zone \"%V\" is too small", &value[i]);
                return NGX_CONF_ERROR;
            }

            llcf->bad_keys_zone = ngx_http_llm_gateway_auth_addrs_add(cf, &name,
                                                                      size);
            if (llcf->bad_keys_zone == NULL) {
                return NGX_CONF_ERROR;
            }

            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\"", &value[i]);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static char *
ngx_http_llm_gateway_alias(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_gateway_loc_conf_t *llcf = conf;

    ngx_str_t                     *value;
    ngx_uint_t                     i;
    ngx_http_llm_gateway_alias_t  *a;

    value = cf->args->elts;

    for (i = 1; i < 3; i++) {
        if (!llm_key_models_valid((char *) value[i].data, value[i].len)
            || ngx_strlchr(value[i].data, value[i].data + value[i].len, ',')
            || value[i].data[0] == '*')
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid model name \"%V\"", &value[i]);
            return NGX_CONF_ERROR;
        }
    }

    if (llcf->aliases == NGX_CONF_UNSET_PTR) {
        llcf->aliases = ngx_array_create(cf->pool, 4,
                                         sizeof(ngx_http_llm_gateway_alias_t));
        if (llcf->aliases == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    a = llcf->aliases->elts;

    for (i = 0; i < llcf->aliases->nelts; i++) {
        if (a[i].name.len == value[1].len
            && ngx_strncmp(a[i].name.data, value[1].data, value[1].len) == 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "duplicate alias \"%V\"", &value[1]);
            return NGX_CONF_ERROR;
        }
    }

    a = ngx_array_push(llcf->aliases);
    if (a == NULL) {
        return NGX_CONF_ERROR;
    }

    a->name = value[1];
    a->model = value[2];

    return NGX_CONF_OK;
}


static char *
ngx_http_llm_gateway_sunset(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_gateway_loc_conf_t *llcf = conf;

    ngx_str_t                      *value;
    ngx_http_llm_gateway_sunset_t  *sn;

    value = cf->args->elts;

    if (llcf->sunsets == NGX_CONF_UNSET_PTR) {
        llcf->sunsets = ngx_array_create(cf->pool, 4,
                                        sizeof(ngx_http_llm_gateway_sunset_t));
        if (llcf->sunsets == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    sn = ngx_array_push(llcf->sunsets);
    if (sn == NULL) {
        return NGX_CONF_ERROR;
    }

    sn->model = value[1];
    sn->deprecated = 0;
    sn->sunset = ngx_http_llm_gateway_parse_date(value[2].data, value[2].len);

    if (sn->sunset == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid date \"%V\", expected YYYY-MM-DD or "
                           "YYYY-MM-DDTHH:MM:SSZ", &value[2]);
        return NGX_CONF_ERROR;
    }

    if (cf->args->nelts == 4) {
        if (ngx_strncmp(value[3].data, "deprecated=", 11) != 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid parameter \"%V\"", &value[3]);
            return NGX_CONF_ERROR;
        }

        sn->deprecated = ngx_http_llm_gateway_parse_date(value[3].data + 11,
                                                         value[3].len - 11);
        if (sn->deprecated == NGX_ERROR || sn->deprecated > sn->sunset) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid deprecation date \"%V\"", &value[3]);
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}


/* "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM:SSZ", UTC, to unix time */

static time_t
ngx_http_llm_gateway_parse_date(u_char *p, size_t len)
{
    ngx_int_t  y, m, d, hh, mm, ss, era, yoe, doy, doe, days;

    if (len != 10 && len != 20) {
        return NGX_ERROR;
    }

    y = ngx_atoi(p, 4);
    m = ngx_atoi(p + 5, 2);
    d = ngx_atoi(p + 8, 2);
    hh = 0;
    mm = 0;
    ss = 0;

    if (p[4] != '-' || p[7] != '-') {
        return NGX_ERROR;
    }

    if (len == 20) {
        if (p[10] != 'T' || p[13] != ':' || p[16] != ':' || p[19] != 'Z') {
            return NGX_ERROR;
        }

        hh = ngx_atoi(p + 11, 2);
        mm = ngx_atoi(p + 14, 2);
        ss = ngx_atoi(p + 17, 2);
    }

    if (y < 1970 || m < 1 || m > 12 || d < 1 || d > 31
        || hh < 0 || hh > 23 || mm < 0 || mm > 59 || ss < 0 || ss > 60)
    {
        return NGX_ERROR;
    }

    /* days since 1970-01-01 of a proleptic Gregorian date */
    y -= m <= 2;
    era = y / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    days = era * 146097 + doe - 719468;

    return (time_t) days * 86400 + hh * 3600 + mm * 60 + ss;
}


static ngx_int_t
ngx_http_llm_gateway_parse_int(ngx_str_t *value, size_t skip, int64_t *n)
{
    off_t  v;

    v = ngx_atoof(value->data + skip, value->len - skip);

    if (v <= 0 || v > LLM_BUCKET_MAX) {
        return NGX_ERROR;
    }

    *n = v;

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_gateway_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_http_llm_gateway_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}


/* $llm_upstream_uri: always a path, the location's where not translated */

static ngx_int_t
ngx_http_llm_gateway_uri_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_str_t  uri;

    ngx_http_llm_gateway_translate_uri(r->main,
                                       ngx_http_llm_gateway_ctx_get(r->main),
                                       &uri);

    v->data = uri.data;
    v->len = uri.len;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_gateway_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    u_char                      *p;
    int64_t                      n;
    ngx_http_llm_gateway_ctx_t  *ctx;

    ctx = ngx_http_llm_gateway_ctx_get(r->main);

    v->not_found = 1;

    if (ctx == NULL) {
        return NGX_OK;
    }

    n = -1;
    p = NULL;

    switch (data) {

    case NGX_HTTP_LLM_GATEWAY_VAR_REQUEST_ID:
        v->data = ctx->request_id.data;
        v->len = ctx->request_id.len;
        break;

    case NGX_HTTP_LLM_GATEWAY_VAR_TENANT:
    case NGX_HTTP_LLM_GATEWAY_VAR_TIER:
        if (ctx->key == NULL) {
            return NGX_OK;
        }

        if (data == NGX_HTTP_LLM_GATEWAY_VAR_TENANT) {
            v->data = ctx->key->tenant.data;
            v->len = ctx->key->tenant.len;

        } else {
            v->data = ctx->key->tier.data;
            v->len = ctx->key->tier.len;
        }

        break;

    case NGX_HTTP_LLM_GATEWAY_VAR_KEY_ID:
        if (ctx->key == NULL) {
            return NGX_OK;
        }

        n = ctx->key->key_id;
        break;

    case NGX_HTTP_LLM_GATEWAY_VAR_MODEL:
        if (ctx->req.model_len == 0) {
            return NGX_OK;
        }

        v->data = (u_char *) ctx->req.model;
        v->len = ctx->req.model_len;
        break;

    case NGX_HTTP_LLM_GATEWAY_VAR_INPUT_TOKENS:
    case NGX_HTTP_LLM_GATEWAY_VAR_OUTPUT_TOKENS:
        if (!ctx->settled) {
            return NGX_OK;
        }

        n = (data == NGX_HTTP_LLM_GATEWAY_VAR_INPUT_TOKENS)
            ? ctx->input_tokens : ctx->output_tokens;
        break;

    case NGX_HTTP_LLM_GATEWAY_VAR_BACKEND:
    case NGX_HTTP_LLM_GATEWAY_VAR_UPSTREAM:
        if (ctx->backend == NULL) {
            return NGX_OK;
        }

        if (data == NGX_HTTP_LLM_GATEWAY_VAR_BACKEND) {
            v->data = ctx->backend->name.data;
            v->len = ctx->backend->name.len;

        } else {
            v->data = ctx->backend->upstream.data;
            v->len = ctx->backend->upstream.len;
        }

        break;

    case NGX_HTTP_LLM_GATEWAY_VAR_QUEUE_MS:
        if (ctx->backend == NULL) {
            return NGX_OK;
        }

        n = ctx->queued_ms;
        break;

    case NGX_HTTP_LLM_GATEWAY_VAR_MAX_TOKENS:
    case NGX_HTTP_LLM_GATEWAY_VAR_N:
    case NGX_HTTP_LLM_GATEWAY_VAR_STREAM:
        if (!ctx->inspected) {
            return NGX_OK;
        }

        n = (data == NGX_HTTP_LLM_GATEWAY_VAR_MAX_TOKENS) ? ctx->req.max_tokens
            : (data == NGX_HTTP_LLM_GATEWAY_VAR_N) ? ctx->req.n
            : ctx->req.stream;
        break;

    case NGX_HTTP_LLM_GATEWAY_VAR_PARTS:
        if (!ctx->inspected) {
            return NGX_OK;
        }

        p = ngx_pnalloc(r->pool, sizeof("m= i= f= a= t= r=")
                                 + 6 * NGX_INT32_LEN);
        if (p == NULL) {
            return NGX_ERROR;
        }

        v->data = p;
        v->len = ngx_sprintf(p, "m=%uD i=%uD f=%uD a=%uD t=%uD r=%uD",
                             ctx->req.parts.messages, ctx->req.parts.images,
                             ctx->req.parts.files, ctx->req.parts.audio,
                             ctx->req.parts.tools, ctx->req.parts.refs)
                 - p;
        break;

    default: /* NGX_HTTP_LLM_GATEWAY_VAR_FINISH_REASON */
        if (!ctx->settled || ctx->finish_reason[0] == '\0') {
            return NGX_OK;
        }

        v->data = (u_char *) ctx->finish_reason;
        v->len = ngx_strlen(ctx->finish_reason);
        break;
    }

    if (n >= 0) {
        p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
        if (p == NULL) {
            return NGX_ERROR;
        }

        v->data = p;
        v->len = ngx_sprintf(p, "%L", n) - p;
    }

    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_gateway_init(ngx_conf_t *cf)
{
    ngx_str_t                          name = ngx_string("request_id");
    ngx_array_t                       *a;
    ngx_http_handler_pt               *h;
    ngx_http_core_main_conf_t         *cmcf;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_gateway_module);

    lmcf->request_id_index = ngx_http_get_variable_index(cf, &name);
    if (lmcf->request_id_index == NGX_ERROR) {
        return NGX_ERROR;
    }

    ngx_conf_init_size_value(lmcf->accountd_buffer, 4 * 1024 * 1024);

    ngx_http_llm_gateway_json_init();

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    /*
     * The preaccess phase, like limit_req: "satisfy any" in the access phase
     * cannot then let a refused request through.
     */
    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_llm_gateway_admit_handler;

    /*
     * Log-phase handlers run in the order they were added: settling goes
     * first, so that log_format sees $llm_input_tokens and the others.
     */
    a = &cmcf->phases[NGX_HTTP_LOG_PHASE].handlers;

    h = ngx_array_push(a);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h = a->elts;
    ngx_memmove(&h[1], &h[0], (a->nelts - 1) * sizeof(ngx_http_handler_pt));
    h[0] = ngx_http_llm_gateway_settle_handler;

    /* the request pool's cleanup settles what the log phase did not */
    ngx_http_llm_gateway_ctx_end = ngx_http_llm_gateway_settle_cleanup;

    return ngx_http_llm_gateway_filter_init(cf);
}


static ngx_int_t
ngx_http_llm_gateway_init_process(ngx_cycle_t *cycle)
{
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    /* the cache manager and loader serve no requests */
    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return NGX_OK;
    }

    if (ngx_http_cycle_get_module_main_conf(cycle, ngx_http_core_module)
        == NULL)
    {
        return NGX_OK;
    }

    lmcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_llm_gateway_module);
    if (lmcf == NULL) {
        return NGX_OK;
    }

    ngx_http_llm_gateway_keys_init(lmcf);
    ngx_http_llm_gateway_reconf(cycle, lmcf);
    ngx_http_llm_gateway_settle_reaper_init(cycle);

    return ngx_http_llm_gateway_accountd_init(cycle);
}


static void
ngx_http_llm_gateway_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_llm_gateway_accountd_exit(cycle);
}
