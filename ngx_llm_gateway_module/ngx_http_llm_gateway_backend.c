
/*
 * The upstream side's configuration: llm_gateway_backend (one provider
 * endpoint or key, with its own limits, its pacer and breaker in a shared
 * zone) and llm_gateway_role (a name clients call, served by an ordered
 * list of backends), and the backends' state as the metrics show it.
 * Routing is ngx_http_llm_gateway_route.c, the pacer's wait _pace.c, the
 * answers and failover _failover.c.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_backend.h"
#include "ngx_http_llm_gateway_clock.h"


/* a waiter that has not asked this long is taken for gone (a dead worker) */
#define NGX_HTTP_LLM_GATEWAY_PACE_STALE    3000

/* the ring without an RPM limit: its size is then the requests a minute */
#define NGX_HTTP_LLM_GATEWAY_PACE_ENTRIES  100000

static char *ngx_http_llm_gateway_backend_zone(ngx_conf_t *cf,
    ngx_http_llm_gateway_backend_t *b);
static ngx_int_t ngx_http_llm_gateway_backend_name(
    ngx_http_llm_gateway_backend_t *b, ngx_str_t *v);
static ngx_int_t ngx_http_llm_gateway_backend_dialect(
    ngx_http_llm_gateway_backend_t *b, ngx_str_t *v);
static ngx_int_t ngx_http_llm_gateway_backend_init_zone(
    ngx_shm_zone_t *shm_zone, void *data);


static ngx_uint_t  ngx_http_llm_gateway_backend_tag;


/*
 * llm_gateway_backend name [upstream=name] [rpm=n] [tpm=n] [queue=n]
 *     [max_wait=time] [failures=n] [fail_timeout=time]
 *     [limit_param=max_completion_tokens|max_tokens]
 *     [api=openai|anthropic|responses] [provider_key=name];
 */

char *
ngx_http_llm_gateway_backend_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_llm_gateway_main_conf_t *lmcf = conf;

    u_char                          *p;
    ngx_int_t                        n;
    ngx_str_t                       *value, s, name;
    ngx_uint_t                       i;
    ngx_msec_t                       ms;
    ngx_http_llm_gateway_backend_t  *b, **bp;

    value = cf->args->elts;

    if (lmcf->backends == NULL) {
        lmcf->backends = ngx_array_create(cf->pool, 4,
                                  sizeof(ngx_http_llm_gateway_backend_t *));
        if (lmcf->backends == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    if (ngx_http_llm_gateway_backend_find(lmcf, &value[1]) != NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "duplicate backend \"%V\"",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    if (value[1].len > LLM_RECORD_BACKEND_MAX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "backend name \"%V\" is longer than %d bytes",
                           &value[1], LLM_RECORD_BACKEND_MAX);
        return NGX_CONF_ERROR;
    }

    if (lmcf->backends->nelts == NGX_HTTP_LLM_GATEWAY_BACKENDS) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "more than %d backends",
                           NGX_HTTP_LLM_GATEWAY_BACKENDS);
        return NGX_CONF_ERROR;
    }

    b = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_gateway_backend_t));
    if (b == NULL) {
        return NGX_CONF_ERROR;
    }

    b->name = value[1];
    b->upstream = value[1];
    b->pacer.max_queue = 100;
    b->pacer.max_wait_ms = 30000;
    b->pacer.stale_ms = NGX_HTTP_LLM_GATEWAY_PACE_STALE;
    b->failures = 5;
    b->fail_timeout = 10000;

    for (i = 2; i < cf->args->nelts; i++) {

        n = ngx_http_llm_gateway_backend_name(b, &value[i]);

        if (n == NGX_ERROR) {
            goto invalid;
        }

        if (n == NGX_OK
            || ngx_http_llm_gateway_backend_dialect(b, &value[i]) == NGX_OK)
        {
            continue;
        }

        if (ngx_strncmp(value[i].data, "max_wait=", 9) == 0
            || ngx_strncmp(value[i].data, "fail_timeout=", 13) == 0)
        {
            p = (u_char *) ngx_strchr(value[i].data, '=') + 1;
            s.data = p;
            s.len = value[i].data + value[i].len - p;

            ms = ngx_parse_time(&s, 0);
            if (ms == (ngx_msec_t) NGX_ERROR) {
                goto invalid;
            }

            if (value[i].data[0] == 'm') {
                b->pacer.max_wait_ms = ms;

            } else {
                b->fail_timeout = ms;
            }

            continue;
        }

        p = (u_char *) ngx_strchr(value[i].data, '=');
        if (p == NULL) {
            goto invalid;
        }

        n = ngx_atoi(p + 1, value[i].data + value[i].len - p - 1);
        if (n == NGX_ERROR || n > 1000000000) {
            goto invalid;
        }

        name.data = value[i].data;
        name.len = p - value[i].data;

        if (name.len == 3 && ngx_strncmp(name.data, "rpm", 3) == 0) {
            b->pacer.rpm = n;

        } else if (name.len == 3 && ngx_strncmp(name.data, "tpm", 3) == 0) {
            b->pacer.tpm = n;

        } else if (name.len == 5 && ngx_strncmp(name.data, "queue", 5) == 0) {

            /* a longer queue's polls would hold the lock too long */
            if (n > LLM_PACER_QUEUE_MAX) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "\"%V\": queue is at most %d",
                                   &value[i], LLM_PACER_QUEUE_MAX);
                return NGX_CONF_ERROR;
            }

            b->pacer.max_queue = (uint32_t) n;

        } else if (name.len == 8 && ngx_strncmp(name.data, "failures", 8) == 0)
        {
            b->failures = n;

        } else {
            goto invalid;
        }
    }

    b->breaker.failures = (uint32_t) b->failures;
    b->breaker.fail_timeout = (int64_t) b->fail_timeout;

    bp = ngx_array_push(lmcf->backends);
    if (bp == NULL) {
        return NGX_CONF_ERROR;
    }

    *bp = b;

    return ngx_http_llm_gateway_backend_zone(cf, b);

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid parameter \"%V\"",
                       &value[i]);
    return NGX_CONF_ERROR;
}


/*
 * The names it goes by: upstream=, where its requests go, and
 * provider_key=, the ledger's, for setting beside the provider's bill.
 * NGX_DECLINED: neither; NGX_ERROR: one, invalid.
 */

static ngx_int_t
ngx_http_llm_gateway_backend_name(ngx_http_llm_gateway_backend_t *b,
    ngx_str_t *v)
{
    if (ngx_strncmp(v->data, "upstream=", 9) == 0) {
        b->upstream.data = v->data + 9;
        b->upstream.len = v->len - 9;

        return b->upstream.len ? NGX_OK : NGX_ERROR;
    }

    if (ngx_strncmp(v->data, "provider_key=", 13) != 0) {
        return NGX_DECLINED;
    }

    b->provider_key.data = v->data + 13;
    b->provider_key.len = v->len - 13;

    if (b->provider_key.len == 0
        || b->provider_key.len > LLM_RECORD_BACKEND_MAX
        || strspn((char *) b->provider_key.data, LLM_USAGE_IDENT_CHARS)
           != b->provider_key.len)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * What the backend's API is: api=, and limit_param=, the name Chat's
 * default output limit goes under (OpenAI's reasoning models refuse
 * max_tokens; some compatible servers know only it).
 */

static ngx_int_t
ngx_http_llm_gateway_backend_dialect(ngx_http_llm_gateway_backend_t *b,
    ngx_str_t *v)
{
    if (ngx_strcmp(v->data, "limit_param=max_tokens") == 0) {
        b->chat_max_tokens = 1;
        return NGX_OK;
    }

    if (ngx_strcmp(v->data, "limit_param=max_completion_tokens") == 0) {
        b->chat_max_tokens = 0;
        return NGX_OK;
    }

    /* api=: the dialect it speaks, translated to where a client's is not */
    if (ngx_strcmp(v->data, "api=openai") == 0) {
        b->api = LLM_API_OPENAI;
        return NGX_OK;
    }

    if (ngx_strcmp(v->data, "api=anthropic") == 0) {
        b->api = LLM_API_ANTHROPIC;
        return NGX_OK;
    }

    if (ngx_strcmp(v->data, "api=responses") == 0) {
        b->api = LLM_API_RESPONSES;
        return NGX_OK;
    }

    return NGX_DECLINED;
}


static char *
ngx_http_llm_gateway_backend_zone(ngx_conf_t *cf,
    ngx_http_llm_gateway_backend_t *b)
{
    size_t           size;
    ngx_int_t        n;
    ngx_str_t        name;
    ngx_shm_zone_t  *shm_zone;

    /* a zone of its own, sized by its limits: its name is the backend's */
    n = 0;

    if (b->pacer.rpm || b->pacer.tpm) {
        n = llm_pacer_entries(&b->pacer);

        if (n == 0) {
            n = NGX_HTTP_LLM_GATEWAY_PACE_ENTRIES + b->pacer.max_queue;
        }

        b->entries = (uint32_t) n;
    }

    size = ngx_align(sizeof(ngx_http_llm_gateway_backend_sh_t)
                     + (n ? llm_pacer_size((uint32_t) n) : 0), ngx_pagesize);

    /* the slab pool's own: a descriptor a page, its header and slots */
    size += ngx_align(size / ngx_pagesize * sizeof(ngx_slab_page_t),
                      ngx_pagesize)
            + 8 * ngx_pagesize;

    name.len = sizeof("llm_backend_") - 1 + b->name.len;
    name.data = ngx_pnalloc(cf->pool, name.len);
    if (name.data == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_sprintf(name.data, "llm_backend_%V", &b->name);

    /* a tag of their own: the llm_gateway_zone walks see only theirs */
    shm_zone = ngx_shared_memory_add(cf, &name, size,
                                     &ngx_http_llm_gateway_backend_tag);
    if (shm_zone == NULL) {
        return NGX_CONF_ERROR;
    }

    shm_zone->init = ngx_http_llm_gateway_backend_init_zone;
    shm_zone->data = b;
    b->shm_zone = shm_zone;

    return NGX_CONF_OK;
}


/*
 * The state survives a reload when the zone does (same name, same size):
 * a pacer whose limits changed starts empty.
 */

static ngx_int_t
ngx_http_llm_gateway_backend_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_http_llm_gateway_backend_t  *ob = data;

    uint64_t                            ticket;
    ngx_slab_pool_t                    *shpool;
    llm_pacer_conf_t                   *pc;
    ngx_http_llm_gateway_backend_t     *b;
    ngx_http_llm_gateway_backend_sh_t  *sh;

    b = shm_zone->data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;
    b->shpool = shpool;

    if (ob && ob->sh && ob->sh->version == NGX_HTTP_LLM_GATEWAY_BACKEND_VERSION)
    {
        b->sh = ob->sh;
        sh = b->sh;

        ngx_shmtx_lock(&shpool->mutex);

        pc = sh->pacer ? &sh->pacer->conf : NULL;

        if (ob->entries != b->entries
            || (pc && (pc->rpm != b->pacer.rpm || pc->tpm != b->pacer.tpm)))
        {
            /*
             * Other limits: a new pacer, in the same zone (its size may
             * not have changed with them).  Tickets go on from where they
             * were: requests in flight hold some.
             */
            ticket = sh->pacer ? sh->pacer->next_ticket : 1;

            if (sh->pacer) {
                ngx_slab_free_locked(shpool, sh->pacer);
                sh->pacer = NULL;
            }

            if (b->entries) {
                sh->pacer = ngx_slab_alloc_locked(shpool,
                                                  llm_pacer_size(b->entries));

                if (sh->pacer == NULL
                    || llm_pacer_init(sh->pacer, llm_pacer_size(b->entries),
                                      &b->pacer,
                                      ngx_http_llm_gateway_clock_now_ms())
                       == NULL)
                {
                    ngx_shmtx_unlock(&shpool->mutex);
                    return NGX_ERROR;
                }

                sh->pacer->next_ticket = ticket;
            }

        } else if (pc) {
            /* the queue's bounds apply to the waiters from now on */
            pc->max_queue = b->pacer.max_queue;
            pc->max_wait_ms = b->pacer.max_wait_ms;
        }

        ngx_shmtx_unlock(&shpool->mutex);

        return NGX_OK;
    }

    if (shm_zone->shm.exists) {
        b->sh = shpool->data;
        return NGX_OK;
    }

    sh = ngx_slab_alloc(shpool, sizeof(ngx_http_llm_gateway_backend_sh_t));
    if (sh == NULL) {
        return NGX_ERROR;
    }

    ngx_memzero(sh, sizeof(ngx_http_llm_gateway_backend_sh_t));

    sh->version = NGX_HTTP_LLM_GATEWAY_BACKEND_VERSION;

    if (b->entries) {
        sh->pacer = ngx_slab_alloc(shpool, llm_pacer_size(b->entries));
        if (sh->pacer == NULL) {
            return NGX_ERROR;
        }

        if (llm_pacer_init(sh->pacer, llm_pacer_size(b->entries), &b->pacer,
                           ngx_http_llm_gateway_clock_now_ms())
            == NULL)
        {
            return NGX_ERROR;
        }
    }

    b->sh = sh;
    shpool->data = sh;

    return NGX_OK;
}


/* llm_gateway_role name backend [model=name] [priority=n] [weight=n]; */

char *
ngx_http_llm_gateway_backend_role_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_llm_gateway_main_conf_t *lmcf = conf;

    ngx_int_t                       n;
    ngx_str_t                      *value;
    ngx_uint_t                      i;
    ngx_http_llm_gateway_role_t    *role;
    ngx_http_llm_gateway_member_t  *m;

    value = cf->args->elts;

    if (!llm_key_models_valid((char *) value[1].data, value[1].len)
        || ngx_strlchr(value[1].data, value[1].data + value[1].len, ',')
        || value[1].data[0] == '*')
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid role name \"%V\"",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    if (lmcf->roles == NULL) {
        lmcf->roles = ngx_array_create(cf->pool, 4,
                                       sizeof(ngx_http_llm_gateway_role_t));
        if (lmcf->roles == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    role = ngx_http_llm_gateway_backend_role_find(lmcf, value[1].data,
                                                  value[1].len);

    if (role == NULL) {
        role = ngx_array_push(lmcf->roles);
        if (role == NULL) {
            return NGX_CONF_ERROR;
        }

        role->name = value[1];

        if (ngx_array_init(&role->members, cf->pool, 4,
                           sizeof(ngx_http_llm_gateway_member_t))
            != NGX_OK)
        {
            return NGX_CONF_ERROR;
        }
    }

    if (role->members.nelts == NGX_HTTP_LLM_GATEWAY_BACKENDS) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "role \"%V\" has more than %d backends",
                           &value[1], NGX_HTTP_LLM_GATEWAY_BACKENDS);
        return NGX_CONF_ERROR;
    }

    m = ngx_array_push(&role->members);
    if (m == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(m, sizeof(ngx_http_llm_gateway_member_t));

    m->backend = ngx_http_llm_gateway_backend_find(lmcf, &value[2]);

    if (m->backend == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "unknown backend \"%V\": \"llm_gateway_backend\" "
                           "must define it first", &value[2]);
        return NGX_CONF_ERROR;
    }

    m->priority = 1;
    m->weight = 1;

    for (i = 3; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "model=", 6) == 0) {
            m->model.data = value[i].data + 6;
            m->model.len = value[i].len - 6;

            if (m->model.len == 0 || m->model.len >= LLM_RECORD_MODEL_MAX
                || !llm_key_models_valid((char *) m->model.data, m->model.len)
                || ngx_strlchr(m->model.data, m->model.data + m->model.len,
                               ','))
            {
                goto invalid;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "priority=", 9) == 0) {
            n = ngx_atoi(value[i].data + 9, value[i].len - 9);
            if (n == NGX_ERROR || n > 1000) {
                goto invalid;
            }

            m->priority = n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "weight=", 7) == 0) {
            n = ngx_atoi(value[i].data + 7, value[i].len - 7);
            if (n == NGX_ERROR || n == 0 || n > 1000) {
                goto invalid;
            }

            m->weight = n;
            continue;
        }

        goto invalid;
    }

    return NGX_CONF_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid parameter \"%V\"",
                       &value[i]);
    return NGX_CONF_ERROR;
}


ngx_http_llm_gateway_backend_t *
ngx_http_llm_gateway_backend_find(ngx_http_llm_gateway_main_conf_t *lmcf,
    ngx_str_t *name)
{
    ngx_uint_t                        i;
    ngx_http_llm_gateway_backend_t  **b;

    if (lmcf->backends == NULL) {
        return NULL;
    }

    b = lmcf->backends->elts;

    for (i = 0; i < lmcf->backends->nelts; i++) {
        if (b[i]->name.len == name->len
            && ngx_strncmp(b[i]->name.data, name->data, name->len) == 0)
        {
            return b[i];
        }
    }

    return NULL;
}


ngx_http_llm_gateway_role_t *
ngx_http_llm_gateway_backend_role_find(ngx_http_llm_gateway_main_conf_t *lmcf,
    u_char *name, size_t len)
{
    ngx_uint_t                    i;
    ngx_http_llm_gateway_role_t  *role;

    if (lmcf->roles == NULL) {
        return NULL;
    }

    role = lmcf->roles->elts;

    for (i = 0; i < lmcf->roles->nelts; i++) {
        if (role[i].name.len == len
            && ngx_strncmp(role[i].name.data, name, len) == 0)
        {
            return &role[i];
        }
    }

    return NULL;
}


/* for the metrics: a backend's counters and its queue, under its lock */

void
ngx_http_llm_gateway_backend_snapshot(ngx_http_llm_gateway_backend_t *b,
    ngx_http_llm_gateway_backend_snap_t *s)
{
    int64_t                             now, wall;
    ngx_http_llm_gateway_backend_sh_t  *sh;

    sh = b->sh;
    now = ngx_http_llm_gateway_clock_now_ms();
    wall = ngx_http_llm_gateway_clock_wall_ms();

    ngx_memzero(s, sizeof(ngx_http_llm_gateway_backend_snap_t));

    ngx_shmtx_lock(&b->shpool->mutex);

    s->stats = sh->stats;

    if (sh->pacer) {
        llm_pacer_window(sh->pacer, now, &s->window_requests,
                         &s->window_tokens);
        s->queue = sh->pacer->waiting;
    }

    s->spent_ms = sh->spent_until > wall ? sh->spent_until - wall : 0;
    s->busy_ms = sh->busy_until > wall ? sh->busy_until - wall : 0;
    s->open = llm_breaker_open(&sh->breaker, wall);
    s->stats.opened = sh->breaker.opened;
    s->stats.limited = sh->breaker.limited;

    ngx_shmtx_unlock(&b->shpool->mutex);
}
