
/*
 * ngx_http_llm_gateway_module: the upstream side.
 *
 * A backend is one provider endpoint or key, with its own limits: the
 * pacer (llm_pacer.c) in its own shared memory zone lets requests leave
 * no faster than its RPM and TPM, so that it has no reason to answer 429;
 * its answers are read (llm_provider.c) to tell "busy, retry in seconds"
 * from "quota spent until its reset"; a circuit breaker (llm_breaker.c)
 * limits a tenant whose requests fail in a row, and takes the backend out
 * when they fail for more than one.  A role is a name clients call,
 * served by an ordered list of backends: a spent, busy or broken one
 * leaves the candidates and the next takes the request, also after it
 * answered, before the client saw a byte.
 */


#include "ngx_http_llm_gateway_module.h"
#include "llm_provider.h"


/* the waiter asks again at least this often (ms): plans can move earlier */
#define NGX_HTTP_LLM_GATEWAY_PACE_POLL     250

/* " Left out: ..." of a refusal, at most */
#define NGX_HTTP_LLM_GATEWAY_LEFT_OUT      256

/* a waiter that has not asked this long is taken for gone (a dead worker) */
#define NGX_HTTP_LLM_GATEWAY_PACE_STALE    3000

/* the ring without an RPM limit: its size is then the requests a minute */
#define NGX_HTTP_LLM_GATEWAY_PACE_ENTRIES  100000

/*
 * A generous time a token (ms, 20 a second): a non-streamed request cut
 * by a timeout sooner than its max_tokens take at this pace may still
 * have been generating.
 */
#define NGX_HTTP_LLM_GATEWAY_MS_PER_TOKEN  50


static ngx_int_t ngx_http_llm_gateway_backend_init_zone(
    ngx_shm_zone_t *shm_zone, void *data);
static ngx_http_llm_gateway_member_t *ngx_http_llm_gateway_choose(
    ngx_http_request_t *r, ngx_http_llm_gateway_ctx_t *ctx, int64_t now);
static ngx_uint_t ngx_http_llm_gateway_eligible(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_uint_t i);
static ngx_uint_t ngx_http_llm_gateway_backend_state(
    ngx_http_llm_gateway_backend_t *b, int64_t tenant, int64_t now,
    ngx_uint_t take, ngx_uint_t *trials, int64_t taken, int64_t *until);
static ngx_int_t ngx_http_llm_gateway_use(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_member_t *m);
static ngx_int_t ngx_http_llm_gateway_pace_ask(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_msec_t *delay);
static void ngx_http_llm_gateway_pace_handler(ngx_http_request_t *r);
static void ngx_http_llm_gateway_pace_refuse(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_pacer_rc_e rc, int64_t wait);
static void ngx_http_llm_gateway_unserved(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_uint_t state, int64_t until,
    int64_t now);
static void ngx_http_llm_gateway_left_out(ngx_http_llm_gateway_ctx_t *ctx,
    u_char *buf);
static void ngx_http_llm_gateway_ineligible(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static void ngx_http_llm_gateway_verdict(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v);
static void ngx_http_llm_gateway_saturated(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v);
static void ngx_http_llm_gateway_tried(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, const char *code);
static ngx_int_t ngx_http_llm_gateway_pace_next(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_msec_t *delay);
static void ngx_http_llm_gateway_backend_result(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v, int64_t now);
static llm_breaker_result_e ngx_http_llm_gateway_backend_blame(
    ngx_http_request_t *r, ngx_http_llm_gateway_ctx_t *ctx);
static ngx_int_t ngx_http_llm_gateway_retry(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static ngx_int_t ngx_http_llm_gateway_replace_answer(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v);
static ngx_int_t ngx_http_llm_gateway_backend_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx);
static ngx_int_t ngx_http_llm_gateway_clear_headers(ngx_http_request_t *r);


/* what keeps a backend from the candidates, in the order it is told */
enum {
    NGX_HTTP_LLM_GATEWAY_UP = 0,
    NGX_HTTP_LLM_GATEWAY_BUSY,
    NGX_HTTP_LLM_GATEWAY_SPENT,
    NGX_HTTP_LLM_GATEWAY_OPEN,
    NGX_HTTP_LLM_GATEWAY_LIMITED
};


static ngx_uint_t  ngx_http_llm_gateway_backend_tag;


static const char  *ngx_http_llm_gateway_states[] = {
    "up", "busy", "quota spent", "failing", "failing for your requests"
};


/* whose requests: a breaker counts failures by tenant */
#define ngx_http_llm_gateway_tenant(ctx)                                     \
    ((ctx)->key ? (ctx)->key->tenant_id : 0)


/*
 * llm_gateway_backend name [upstream=name] [rpm=n] [tpm=n] [queue=n]
 *     [max_wait=time] [failures=n] [fail_timeout=time];
 */

char *
ngx_http_llm_gateway_backend_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_llm_gateway_main_conf_t *lmcf = conf;

    u_char                           *p;
    size_t                            size;
    ngx_int_t                         n;
    ngx_str_t                        *value, s, name;
    ngx_uint_t                        i;
    ngx_msec_t                        ms;
    ngx_shm_zone_t                   *shm_zone;
    ngx_http_llm_gateway_backend_t   *b, **bp;

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

        if (ngx_strncmp(value[i].data, "upstream=", 9) == 0) {
            b->upstream.data = value[i].data + 9;
            b->upstream.len = value[i].len - 9;

            if (b->upstream.len == 0) {
                goto invalid;
            }

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

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid parameter \"%V\"",
                       &value[i]);
    return NGX_CONF_ERROR;
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
                                      ngx_http_llm_gateway_now_ms())
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
                           ngx_http_llm_gateway_now_ms())
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
ngx_http_llm_gateway_role_conf(ngx_conf_t *cf, ngx_command_t *cmd,
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

    role = ngx_http_llm_gateway_role_find(lmcf, value[1].data, value[1].len);

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
ngx_http_llm_gateway_role_find(ngx_http_llm_gateway_main_conf_t *lmcf,
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


/*
 * At inspection: a model that names a role is served by its first
 * candidate, whose model the upstream, the spend cap and the ledger see.
 * NGX_DECLINED: refused (none can serve it now), ctx says why.
 */

ngx_int_t
ngx_http_llm_gateway_route(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_http_llm_gateway_member_t     *m;
    ngx_http_llm_gateway_loc_conf_t   *llcf;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    ctx->role = ngx_http_llm_gateway_role_find(lmcf, (u_char *) ctx->req.model,
                                               ctx->req.model_len);

    if (ctx->role == NULL) {
        llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);
        ctx->backend = llcf->backend;
        return NGX_OK;
    }

    ctx->role_name.len = ctx->req.model_len;
    ctx->role_name.data = ngx_pnalloc(r->pool, ctx->req.model_len);
    if (ctx->role_name.data == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(ctx->role_name.data, ctx->req.model, ctx->req.model_len);

    m = ngx_http_llm_gateway_choose(r, ctx, ngx_http_llm_gateway_wall_ms());

    if (m == NULL) {
        return NGX_DECLINED;
    }

    return ngx_http_llm_gateway_use(r, ctx, m);
}


/*
 * The candidate for the next attempt: among the role's backends not tried
 * yet and up, those of the best priority, one of them at random by
 * weight.  None: the request is refused with the earliest time one comes
 * back, and NULL.
 */

static ngx_http_llm_gateway_member_t *
ngx_http_llm_gateway_choose(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, int64_t now)
{
    int64_t                         until, first, tenant;
    uint32_t                        out;
    ngx_uint_t                      i, n, best, total, pick, state, worst;
    ngx_uint_t                      trials;
    ngx_http_llm_gateway_member_t  *m, *chosen;

    m = ctx->role->members.elts;
    tenant = ngx_http_llm_gateway_tenant(ctx);

    /* a pass rules out one candidate, unless states change meanwhile */
    for (n = 0; n < 2 * NGX_HTTP_LLM_GATEWAY_BACKENDS; n++) {
        out = ctx->tried | ctx->not_allowed | ctx->not_priced
              | ctx->not_covered;

        best = NGX_MAX_UINT32_VALUE;
        total = 0;

        for (i = 0; i < ctx->role->members.nelts; i++) {
            if ((out & ((uint32_t) 1 << i))
                || ngx_http_llm_gateway_backend_state(m[i].backend, tenant,
                                                      now, 0, NULL, 0, &until)
                   != NGX_HTTP_LLM_GATEWAY_UP)
            {
                continue;
            }

            if (m[i].priority < best) {
                best = m[i].priority;
                total = 0;
            }

            if (m[i].priority == best) {
                total += m[i].weight;
            }
        }

        if (total == 0) {
            break;
        }

        pick = (ngx_uint_t) ngx_random() % total;
        chosen = NULL;

        for (i = 0; i < ctx->role->members.nelts; i++) {
            if ((out & ((uint32_t) 1 << i)) || m[i].priority != best
                || ngx_http_llm_gateway_backend_state(m[i].backend, tenant,
                                                      now, 0, NULL, 0,
                                                      &until)
                   != NGX_HTTP_LLM_GATEWAY_UP)
            {
                continue;
            }

            if (pick < m[i].weight) {
                chosen = &m[i];
                break;
            }

            pick -= m[i].weight;
        }

        if (chosen == NULL) {
            /* its state changed meanwhile: the next pass sees it */
            continue;
        }

        /* one the request may not use: the next pass goes without it */
        if (!ngx_http_llm_gateway_eligible(r, ctx, chosen - m)) {
            continue;
        }

        /* a half-open breaker lets one request through: this one, if free */
        trials = 0;

        if (ngx_http_llm_gateway_backend_state(chosen->backend, tenant, now,
                                               1, &trials, 0, &until)
            == NGX_HTTP_LLM_GATEWAY_UP)
        {
            ctx->tried |= (uint32_t) 1 << (chosen - m);
            ctx->trial = trials;
            ctx->trial_ms = now;
            return chosen;
        }

        ctx->tried |= (uint32_t) 1 << (chosen - m);
    }

    /*
     * None: the reason that lasts least, and when it ends, among those the
     * request may use; those it may not never come back for it.
     */
    first = -1;
    worst = NGX_HTTP_LLM_GATEWAY_UP;
    out = ctx->not_allowed | ctx->not_priced | ctx->not_covered;

    for (i = 0; i < ctx->role->members.nelts; i++) {
        if (out & ((uint32_t) 1 << i) & ~ctx->tried) {
            continue;
        }

        /* one that is down now, and the request could never use */
        if (!(ctx->tried & ((uint32_t) 1 << i))
            && !ngx_http_llm_gateway_eligible(r, ctx, i))
        {
            continue;
        }

        state = ngx_http_llm_gateway_backend_state(m[i].backend, tenant, now,
                                                   0, NULL, 0, &until);

        if (state == NGX_HTTP_LLM_GATEWAY_UP) {
            /* tried already in this request: it answered badly just now */
            state = NGX_HTTP_LLM_GATEWAY_OPEN;
            until = now + 1000;
        }

        if (first == -1 || until < first) {
            first = until;
            worst = state;
        }
    }

    ngx_http_llm_gateway_unserved(r, ctx, worst, first, now);

    return NULL;
}


/*
 * Whether the request may go to the role's member i: the key and its tier
 * allow the role itself or the member's model, a tier that serves priced
 * models only knows its price, and a spend cap held for the request
 * covers it.  Else 0, and why in ctx: a failover never serves a model the
 * client could not have asked for.
 */

static ngx_uint_t
ngx_http_llm_gateway_eligible(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_uint_t i)
{
    uint32_t                        bit;
    ngx_str_t                      *model;
    ngx_http_llm_gateway_member_t  *m;

    m = ctx->role->members.elts;
    model = m[i].model.len ? &m[i].model : &ctx->role_name;
    bit = (uint32_t) 1 << i;

    if (!ngx_http_llm_gateway_model_allowed(ctx, (char *) ctx->role_name.data,
                                            ctx->role_name.len)
        && !ngx_http_llm_gateway_model_allowed(ctx, (char *) model->data,
                                               model->len))
    {
        ctx->not_allowed |= bit;
        return 0;
    }

    if (ngx_http_llm_gateway_budget_unpriced(r, ctx, model)) {
        ctx->not_priced |= bit;
        return 0;
    }

    if (!ngx_http_llm_gateway_budget_covers(ctx, model)) {
        ctx->not_covered |= bit;
        return 0;
    }

    return 1;
}


/*
 * Under the backend's lock: up for tenant's request, or what keeps it out
 * and until when (wall ms).  *trials: the half-open trials (the
 * backend's, the tenant's own) the request holds; take: it takes those
 * it needs that are free, added to *trials.
 */

static ngx_uint_t
ngx_http_llm_gateway_backend_state(ngx_http_llm_gateway_backend_t *b,
    int64_t tenant, int64_t now, ngx_uint_t take, ngx_uint_t *trials,
    int64_t taken, int64_t *until)
{
    int                                 took;
    ngx_uint_t                          state, busy;
    llm_breaker_state_e                 bs;
    ngx_http_llm_gateway_backend_sh_t  *sh;

    sh = b->sh;
    state = NGX_HTTP_LLM_GATEWAY_UP;
    *until = now;
    took = trials ? (int) *trials : 0;

    ngx_shmtx_lock(&b->shpool->mutex);

    if (sh->spent_until > now) {
        state = NGX_HTTP_LLM_GATEWAY_SPENT;
        *until = sh->spent_until;

    } else {
        /* a busy backend's trial is the request's that goes after */
        busy = (sh->busy_until > now);

        bs = llm_breaker_state(&sh->breaker, &b->breaker, tenant, now,
                               take && !busy, &took, taken, until);

        if (bs == LLM_BREAKER_OPEN) {
            state = NGX_HTTP_LLM_GATEWAY_OPEN;

        } else if (bs == LLM_BREAKER_LIMITED) {
            state = NGX_HTTP_LLM_GATEWAY_LIMITED;

        } else if (busy) {
            state = NGX_HTTP_LLM_GATEWAY_BUSY;
            *until = sh->busy_until;
        }
    }

    ngx_shmtx_unlock(&b->shpool->mutex);

    if (trials) {
        *trials = (ngx_uint_t) took;
    }

    return state;
}


/* the attempt goes to m: its model into the body, its name for the log */

static ngx_int_t
ngx_http_llm_gateway_use(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_member_t *m)
{
    ngx_str_t  *model;

    ctx->backend = m->backend;

    model = m->model.len ? &m->model : &ctx->role_name;

    if (ctx->req.model_len == model->len
        && ngx_strncmp(ctx->req.model, model->data, model->len) == 0)
    {
        return NGX_OK;
    }

    if (llm_inspect_set_model(&ctx->req, (char *) model->data, model->len)
        != 0)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * After admission, before the upstream: the backend's pacer.  NGX_OK: go
 * now; NGX_AGAIN: the request waits, its timer set; NGX_DECLINED:
 * refused, ctx says why.
 */

ngx_int_t
ngx_http_llm_gateway_pace(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_int_t     rc;
    ngx_msec_t    delay;
    ngx_event_t  *wev;

    if (ctx->backend == NULL) {
        return NGX_OK;
    }

    ctx->pace_asked = ngx_http_llm_gateway_now_ms();

    rc = ngx_http_llm_gateway_pace_next(r, ctx, &delay);

    if (rc != NGX_AGAIN) {
        return rc;
    }

    /* as limit_req delays: the client may go meanwhile */
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_llm_gateway_pace_handler;

    wev = r->connection->write;
    wev->delayed = 1;
    ngx_add_timer(wev, delay);

    return NGX_AGAIN;
}


/*
 * The pacer asked, first or again.  A busy backend (the provider said how
 * long) holds the request as its queue would, within max_wait.
 */

static ngx_int_t
ngx_http_llm_gateway_pace_ask(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_msec_t *delay)
{
    int64_t                             now, wall, until, start, wait;
    uint64_t                            tenant;
    ngx_uint_t                          state, trials;
    llm_pacer_rc_e                      rc;
    ngx_http_llm_gateway_backend_t     *b;
    ngx_http_llm_gateway_backend_sh_t  *sh;

    b = ctx->backend;
    sh = b->sh;

    now = ngx_http_llm_gateway_now_ms();
    wall = ngx_http_llm_gateway_wall_ms();

    if (ctx->pace_ticket == 0) {
        /*
         * A role's trials were taken when its backend was chosen; a
         * backend's own are taken once, by the first ask.
         */
        trials = ctx->trial;
        state = ngx_http_llm_gateway_backend_state(b,
                                           ngx_http_llm_gateway_tenant(ctx),
                                           wall,
                                           ctx->role == NULL && !ctx->trial,
                                           &trials, ctx->trial_ms, &until);
        if (ctx->role == NULL && !ctx->trial && trials) {
            ctx->trial_ms = wall;
        }

        ctx->trial = trials;

        if (state == NGX_HTTP_LLM_GATEWAY_BUSY
            && until - wall + (now - ctx->pace_asked)
               <= (int64_t) b->pacer.max_wait_ms)
        {
            ctx->pace_waited = 1;
            *delay = (ngx_msec_t) ngx_min(until - wall,
                                          NGX_HTTP_LLM_GATEWAY_PACE_POLL);
            *delay = ngx_max(*delay, 1);
            return NGX_AGAIN;
        }

        if (state != NGX_HTTP_LLM_GATEWAY_UP) {
            ngx_http_llm_gateway_unserved(r, ctx, state, until, wall);
            return NGX_DECLINED;
        }
    }

    if (sh->pacer == NULL) {
        ngx_shmtx_lock(&b->shpool->mutex);
        sh->stats.started++;

        if (ctx->pace_waited) {
            sh->stats.waited++;
            sh->stats.waited_ms += now - ctx->pace_asked;
        }

        ngx_shmtx_unlock(&b->shpool->mutex);

        ctx->paced = 1;
        ctx->queued_ms += now - ctx->pace_asked;

        return NGX_OK;
    }

    /* the queue's places and starts are shared among tenants */
    tenant = ctx->key ? (uint64_t) ctx->key->tenant_id : 0;

    ngx_shmtx_lock(&b->shpool->mutex);

    if (ctx->pace_ticket == 0) {
        rc = llm_pacer_ask_for(sh->pacer, tenant, ctx->reserved, now, &start,
                               &ctx->pace_ticket);

    } else {
        rc = llm_pacer_go(sh->pacer, &ctx->pace_ticket, now, &start);

        if (rc == LLM_PACER_NOT_FOUND) {
            /*
             * Taken for gone while this worker was stalled, or its place
             * taken by a tenant under its share: in line again, if its
             * own share has room.
             */
            rc = llm_pacer_ask_for(sh->pacer, tenant, ctx->reserved, now,
                                   &start, &ctx->pace_ticket);
        }
    }

    switch (rc) {

    case LLM_PACER_GO:
        sh->stats.started++;

        if (ctx->pace_waited) {
            sh->stats.waited++;
            sh->stats.waited_ms += now - ctx->pace_asked;
        }

        ctx->paced = 1;
        break;

    case LLM_PACER_WAIT:
        ctx->pace_waited = 1;

        /* held by tokens beyond max_wait: it gives up at its deadline */
        if (now - ctx->pace_asked >= (int64_t) b->pacer.max_wait_ms) {
            (void) llm_pacer_cancel(sh->pacer, ctx->pace_ticket, now);
            ctx->pace_ticket = 0;
            sh->stats.refused++;
            rc = LLM_PACER_TOO_LONG;
        }

        break;

    default:
        sh->stats.refused++;
        ctx->pace_ticket = 0;
    }

    ngx_shmtx_unlock(&b->shpool->mutex);

    switch (rc) {

    case LLM_PACER_GO:
        ctx->queued_ms += now - ctx->pace_asked;

        if (now > ctx->pace_asked) {
            ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                          "llm gateway: waited %L ms for backend \"%V\"",
                          now - ctx->pace_asked, &b->name);
        }

        return NGX_OK;

    case LLM_PACER_WAIT:
        /* plans move earlier when others leave or use less: looked at often */
        wait = ngx_min(start - now, NGX_HTTP_LLM_GATEWAY_PACE_POLL);
        wait = ngx_min(wait, ctx->pace_asked + (int64_t) b->pacer.max_wait_ms
                             - now);
        *delay = (ngx_msec_t) ngx_max(wait, 1);
        return NGX_AGAIN;

    default:
        ngx_http_llm_gateway_pace_refuse(r, ctx, rc, start - now);
        return NGX_DECLINED;
    }
}


/*
 * A role's backend that cannot take the request now (its queue is full,
 * the wait too long, the request too large for it, or it went out since
 * it was chosen) passes it to the next candidate, before any upstream saw
 * it.  When none can, the first refusal is the answer.
 */

static ngx_int_t
ngx_http_llm_gateway_pace_next(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_msec_t *delay)
{
    u_char                          *message;
    int64_t                          now, retry_after, retry_after_ms;
    ngx_int_t                        rc;
    ngx_uint_t                       status, never;
    const char                      *type, *code, *param;
    ngx_http_llm_gateway_member_t   *m;
    ngx_http_llm_gateway_backend_t  *prev;

    rc = ngx_http_llm_gateway_pace_ask(r, ctx, delay);

    if (rc != NGX_DECLINED || ctx->role == NULL) {
        return rc;
    }

    status = ctx->err_status;
    type = ctx->err_type;
    code = ctx->err_code;
    param = ctx->err_param;
    message = ctx->err_message;
    retry_after = ctx->retry_after;
    retry_after_ms = ctx->retry_after_ms;
    never = ctx->never;

    ngx_http_llm_gateway_tried(r, ctx, code);
    ngx_http_llm_gateway_backend_done(ctx, ctx->backend, 0);
    prev = ctx->backend;

    for ( ;; ) {
        ctx->err_status = 0;
        ctx->never = 0;

        m = ngx_http_llm_gateway_choose(r, ctx,
                                        ngx_http_llm_gateway_wall_ms());

        if (m == NULL) {
            break;
        }

        if (ngx_http_llm_gateway_use(r, ctx, m) != NGX_OK
            || ngx_http_llm_gateway_reprepare(r, ctx) != NGX_OK)
        {
            break;
        }

        ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0,
                      "llm gateway: \"%V\" goes from backend \"%V\" to "
                      "\"%V\": %s", &ctx->role_name, &prev->name,
                      &ctx->backend->name, code);

        now = ngx_http_llm_gateway_now_ms();

        ctx->queued_ms += now - ctx->pace_asked;
        ctx->pace_asked = now;
        ctx->pace_waited = 0;

        rc = ngx_http_llm_gateway_pace_ask(r, ctx, delay);

        if (rc != NGX_DECLINED) {
            return rc;
        }

        ngx_http_llm_gateway_tried(r, ctx, ctx->err_code);
        ngx_http_llm_gateway_backend_done(ctx, ctx->backend, 0);
        prev = ctx->backend;
    }

    /* the first backend's refusal, which says the most */
    ctx->err_status = status;
    ctx->err_type = type;
    ctx->err_code = code;
    ctx->err_param = param;
    ctx->err_message = message;
    ctx->retry_after = retry_after;
    ctx->retry_after_ms = retry_after_ms;
    ctx->never = never;

    return NGX_DECLINED;
}


static void
ngx_http_llm_gateway_pace_handler(ngx_http_request_t *r)
{
    ngx_int_t                    rc;
    ngx_msec_t                   delay;
    ngx_event_t                 *wev;
    ngx_http_llm_gateway_ctx_t  *ctx;

    wev = r->connection->write;

    if (wev->delayed) {
        if (ngx_handle_write_event(wev, 0) != NGX_OK) {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        }

        return;
    }

    ctx = ngx_http_llm_gateway_get_ctx(r);

    rc = ngx_http_llm_gateway_pace_next(r, ctx, &delay);

    if (rc == NGX_AGAIN) {
        wev->delayed = 1;
        ngx_add_timer(wev, delay);
        return;
    }

    if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    r->read_event_handler = ngx_http_block_reading;

    /* on to the upstream, or the refusal, from the preaccess phase again */
    ctx->status = NGX_DECLINED;

    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
}


static void
ngx_http_llm_gateway_pace_refuse(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_pacer_rc_e rc, int64_t wait)
{
    u_char                          *p;
    ngx_str_t                        name;
    ngx_http_llm_gateway_backend_t  *b;

    b = ctx->backend;

    /* the backend's name is the operator's: said where diagnostics are on */
    ngx_str_null(&name);

    if (ngx_http_llm_gateway_diagnostics(r)) {
        name = b->name;
    }

    p = ngx_pnalloc(r->pool, 256 + name.len);
    if (p == NULL) {
        return;
    }

    if (rc == LLM_PACER_TOO_LARGE) {
        ngx_sprintf(p, "Request too large: %L tokens exceed the %L tokens a "
                    "minute the upstream%s%V%s allows.%Z",
                    ctx->reserved, b->pacer.tpm, name.len ? " \"" : "",
                    &name, name.len ? "\"" : "");

        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS, "tokens",
                                    "request_too_large", "max_tokens",
                                    (char *) p);
        ctx->never = 1;
        return;
    }

    if (rc == LLM_PACER_FULL || wait < 1000) {
        wait = 1000;
    }

    ctx->retry_after = llm_bucket_seconds(wait);
    ctx->retry_after_ms = wait;

    ngx_sprintf(p, "The upstream%s%V%s is at its rate limit; its queue %s. "
                "Please try again in %Ls.%Z", name.len ? " \"" : "", &name,
                name.len ? "\"" : "",
                rc == LLM_PACER_FULL ? "is full" : "is longer than we wait",
                ctx->retry_after);

    ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS, "requests",
                                "provider_rate_limited", NULL, (char *) p);
}


/* no backend can serve the request now: why, and when one can */

static void
ngx_http_llm_gateway_unserved(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_uint_t state, int64_t until,
    int64_t now)
{
    u_char      *p, left[NGX_HTTP_LLM_GATEWAY_LEFT_OUT];
    ngx_str_t    name, tried;
    ngx_uint_t   diag;

    if (until == -1) {
        ngx_http_llm_gateway_ineligible(r, ctx);
        return;
    }

    diag = ngx_http_llm_gateway_diagnostics(r);

    ngx_str_null(&name);
    ngx_str_null(&tried);

    if (diag) {
        tried = ctx->tried_names;
    }

    if (ctx->role) {
        /* the name the client called: escaped, bounded */
        (void) ngx_http_llm_gateway_safe(r->pool, ctx->role_name.data,
                                         ctx->role_name.len,
                                         NGX_HTTP_LLM_GATEWAY_SAFE_MAX, &name);

    } else if (diag) {
        /* the location's own backend: a name the client did not call */
        name = ctx->backend->name;
    }

    ngx_http_llm_gateway_left_out(ctx, left);

    ctx->retry_after_ms = ngx_max(until - now, 1000);
    ctx->retry_after = llm_bucket_seconds(ctx->retry_after_ms);

    p = ngx_pnalloc(r->pool, 256 + sizeof(left) + name.len + tried.len);
    if (p == NULL) {
        return;
    }

    if (state == NGX_HTTP_LLM_GATEWAY_LIMITED) {
        /* the tenant's own failures: the others are served meanwhile */
        ngx_sprintf(p, "Your requests%s%V%s failed, too many in a row; no "
                    "more of yours are sent for %Ls. Other clients are not "
                    "affected.%s%V%s%s%Z", name.len ? " to \"" : "", &name,
                    name.len ? "\"" : "", ctx->retry_after,
                    tried.len ? " Tried: " : "", &tried, tried.len ? "." : "",
                    left);

        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                    "requests", "too_many_failures", NULL,
                                    (char *) p);
        return;
    }

    ngx_sprintf(p, "%s%s%V%s %s%s; the first comes back in %Ls.%s%V%s%s%Z",
                ctx->role ? "Every backend of" : "The backend",
                name.len ? " \"" : "", &name, name.len ? "\"" : "",
                ctx->role ? "is unavailable, the first " : "is ",
                ngx_http_llm_gateway_states[state], ctx->retry_after,
                tried.len ? " Tried: " : "", &tried, tried.len ? "." : "",
                left);

    switch (state) {

    case NGX_HTTP_LLM_GATEWAY_SPENT:
        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                    "insufficient_quota", "insufficient_quota",
                                    NULL, (char *) p);
        break;

    case NGX_HTTP_LLM_GATEWAY_BUSY:
        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                    "requests", "provider_rate_limited",
                                    NULL, (char *) p);
        break;

    default:
        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_SERVICE_UNAVAILABLE,
                                    "server_error", "backend_unavailable",
                                    NULL, (char *) p);
    }
}


/*
 * " Left out: 1 backend whose model ...": the role's backends the request
 * may not use, and why, as a NUL-terminated sentence (empty: none).
 */

static void
ngx_http_llm_gateway_left_out(ngx_http_llm_gateway_ctx_t *ctx, u_char *buf)
{
    u_char      *p;
    ngx_uint_t   i, n[3];

    static const char  *why[] = {
        "whose model this API key or its tier may not call",
        "whose model has no price (this tier serves priced models only)",
        "whose model costs more than the spend cap held for the request"
    };

    n[0] = (ngx_uint_t) __builtin_popcount(ctx->not_allowed & ~ctx->tried);
    n[1] = (ngx_uint_t) __builtin_popcount(ctx->not_priced & ~ctx->tried);
    n[2] = (ngx_uint_t) __builtin_popcount(ctx->not_covered & ~ctx->tried);

    p = buf;

    for (i = 0; i < 3; i++) {
        if (n[i] == 0) {
            continue;
        }

        p = ngx_sprintf(p, "%s%ui backend%s %s",
                        p == buf ? " Left out: " : ", ", n[i],
                        n[i] == 1 ? "" : "s", why[i]);
    }

    if (p != buf) {
        *p++ = '.';
    }

    *p = '\0';
}


/*
 * No backend of the role is one the request may use: the model is as
 * good as not allowed, not priced or beyond the cap, and that is said,
 * not a time at which one comes back.
 */

static void
ngx_http_llm_gateway_ineligible(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char     *p, left[NGX_HTTP_LLM_GATEWAY_LEFT_OUT];
    ngx_str_t   name;

    (void) ngx_http_llm_gateway_safe(r->pool, ctx->role_name.data,
                                     ctx->role_name.len,
                                     NGX_HTTP_LLM_GATEWAY_SAFE_MAX, &name);

    ngx_http_llm_gateway_left_out(ctx, left);

    p = ngx_pnalloc(r->pool, 128 + sizeof(left) + name.len);
    if (p != NULL) {
        ngx_sprintf(p, "No backend of \"%V\" can serve this request.%s%Z",
                    &name, left);
    }

    if (ctx->not_covered & ~ctx->tried) {
        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                    "insufficient_quota", "insufficient_quota",
                                    NULL, (char *) p);
        return;
    }

    ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_FORBIDDEN, "permission_error",
                                (ctx->not_priced & ~ctx->tried)
                                ? "model_not_priced" : "model_not_allowed",
                                "model", (char *) p);
    ctx->never = 1;
}

/*
 * The header filter: the upstream answered.  Its answer is read for the
 * backend's state; a refusal or failure of a role's backend goes to the
 * next candidate if there is one (NGX_DONE: the filter stops here, the
 * request runs again), else the client is told in the gateway's words.
 */

ngx_int_t
ngx_http_llm_gateway_backend_answer(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    int                      k;
    ngx_int_t                rc;
    ngx_buf_t               *b;
    ngx_uint_t               i;
    ngx_list_part_t         *part;
    ngx_table_elt_t         *h;
    ngx_http_upstream_t     *u;
    llm_provider_in_t        in;
    llm_provider_verdict_t   v;

    u = r->upstream;

    /* read for a backend's state, or for its zone's backpressure */
    if (ctx->backend == NULL && !ctx->fair_flight) {
        return NGX_OK;
    }

    /* the gateway's own refusal after admission (its pacer): named too */
    if (ctx->err_status) {
        return ctx->backend ? ngx_http_llm_gateway_backend_headers(r, ctx)
                            : NGX_OK;
    }

    if (u == NULL || ctx->answered) {
        return NGX_OK;
    }

    /*
     * An answer is read while its upstream is live: one dropped for a
     * failover (or finalized for error_page) is not the next backend's.
     */
    if (u->headers_in.status_n && u->cleanup == NULL) {
        return NGX_OK;
    }

    ctx->answered = 1;

    ngx_memzero(&in, sizeof(llm_provider_in_t));

    /* 0: nginx's own answer (502, 504): the upstream gave none */
    in.status = u->headers_in.status_n ? (int) u->headers_in.status_n : 502;
    in.now_ms = ngx_http_llm_gateway_wall_ms();

    /* the headers that say how long, as the provider sent them */
    part = &u->headers_in.headers.part;
    h = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                break;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].hash == 0) {
            continue;
        }

        k = llm_provider_header((const char *) h[i].key.data, h[i].key.len);

        if (k >= 0 && in.header[k].data == NULL) {
            in.header[k].data = (const char *) h[i].value.data;
            in.header[k].len = h[i].value.len;
        }
    }

    /*
     * A refusal's body is small and nearly always came with its headers:
     * what of it was read is what the wording is looked for in.
     */
    b = &u->buffer;

    if (in.status >= 400 && b->start && b->last > b->pos) {
        in.body.data = (const char *) b->pos;
        in.body.len = b->last - b->pos;    /* the reader bounds it */
    }

    llm_provider_read(&in, &v);

    if (ctx->backend == NULL) {
        /* a location without backends: the answer goes as it came */
        ngx_http_llm_gateway_saturated(r, ctx, &v);
        return NGX_OK;
    }

    ngx_http_llm_gateway_backend_result(r, ctx, &v, in.now_ms);

    if (v.cls == LLM_PROVIDER_OK) {
        return ngx_http_llm_gateway_backend_headers(r, ctx);
    }

    ngx_http_llm_gateway_verdict(r, ctx, &v);

    /*
     * Only an answer is passed on: nginx's own 502 or 504 comes from a
     * finalization under way (the breaker has counted it).
     */
    if (ctx->role && u->headers_in.status_n) {
        rc = ngx_http_llm_gateway_retry(r, ctx);

        if (rc == NGX_DONE || rc == NGX_ERROR) {
            return rc;
        }
    }

    /* the answer the client gets: one another backend took is not */
    ngx_http_llm_gateway_saturated(r, ctx, &v);

    if (v.cls == LLM_PROVIDER_FAILED) {
        /* passed as it came: no other backend could take it */
        ctx->err_status = 0;
        return ngx_http_llm_gateway_backend_headers(r, ctx);
    }

    return ngx_http_llm_gateway_replace_answer(r, ctx, &v);
}


/*
 * The upstream pushes back: busy (its 429 or 503, overloaded), or no
 * answer at all (unreachable, too slow) or a proxy's in front of it (502,
 * 504).  What the zone admits is reduced at once (llm_fair.c); a quota
 * spent is not saturation.
 */

static void
ngx_http_llm_gateway_saturated(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v)
{
    int                           reduced;
    int64_t                       now, capacity, ceiling;
    ngx_uint_t                    status;
    ngx_http_llm_gateway_zone_t  *zone;

    if (!ctx->fair_flight || ctx->pressed) {
        return;
    }

    status = r->upstream->headers_in.status_n;

    if (v->cls != LLM_PROVIDER_BUSY
        && !(v->cls == LLM_PROVIDER_FAILED
             && (status == 0 || status == NGX_HTTP_BAD_GATEWAY
                 || status == NGX_HTTP_GATEWAY_TIME_OUT)))
    {
        return;
    }

    ctx->pressed = 1;
    zone = ctx->zone;
    now = ngx_http_llm_gateway_now_ms();

    ngx_shmtx_lock(&zone->shpool->mutex);

    reduced = llm_fair_pressure(&zone->sh->fair, now, ctx->admitted_ms);
    capacity = llm_fair_capacity(&zone->sh->fair, now);
    ceiling = llm_fair_ceiling(&zone->sh->fair, now);

    ngx_shmtx_unlock(&zone->shpool->mutex);

    if (reduced) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm gateway: the upstream pushes back (%ui, %s): "
                      "llm_gateway_zone \"%V\" admits %L tokens a minute "
                      "and %L requests at once, recovering", status,
                      v->why ? v->why : "-", &zone->name, capacity, ceiling);
    }
}


/* the log line, and the tried list the headers and the refusal tell */

static void
ngx_http_llm_gateway_verdict(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v)
{
    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                  "llm gateway: backend \"%V\" answered %ui: %s (%s), "
                  "retry in %L ms", &ctx->backend->name,
                  r->upstream->headers_in.status_n, v->code,
                  v->why ? v->why : "-", v->retry_ms);

    ngx_http_llm_gateway_tried(r, ctx, v->code);
}


/* "a=code, b=code": what the failover header and a refusal tell */

static void
ngx_http_llm_gateway_tried(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, const char *code)
{
    u_char     *p;
    size_t      len;
    ngx_str_t  *name;

    name = &ctx->backend->name;

    len = ctx->tried_names.len + name->len + ngx_strlen(code) + 3;

    p = ngx_pnalloc(r->pool, len);
    if (p == NULL) {
        return;
    }

    /* the names so far first: tried_names is written over after */
    ctx->tried_names.len = ngx_sprintf(p, "%V%s%V=%s",
                                       &ctx->tried_names,
                                       ctx->tried_names.len ? ", " : "",
                                       name, code)
                           - p;
    ctx->tried_names.data = p;
}


/* what the answer says of the backend, under its lock */

static void
ngx_http_llm_gateway_backend_result(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v, int64_t now)
{
    int64_t                             wait, tenant;
    ngx_int_t                           res;
    ngx_http_llm_gateway_backend_t     *b;
    ngx_http_llm_gateway_backend_sh_t  *sh;

    b = ctx->backend;
    sh = b->sh;
    tenant = ngx_http_llm_gateway_tenant(ctx);

    /* -1: no word on its health */
    res = -1;

    if (v->cls == LLM_PROVIDER_OK) {
        res = LLM_BREAKER_OK;

    } else if (v->cls == LLM_PROVIDER_FAILED
               || (v->cls == LLM_PROVIDER_BUSY
                   && ngx_strcmp(v->code, "provider_overloaded") == 0))
    {
        /* an overloaded backend is failing too: a breaker counts it */
        res = ngx_http_llm_gateway_backend_blame(r, ctx);
    }

    ngx_shmtx_lock(&b->shpool->mutex);

    switch (v->cls) {

    case LLM_PROVIDER_OK:
        break;

    case LLM_PROVIDER_BUSY:
        sh->stats.busy++;
        wait = v->retry_ms >= 0 ? v->retry_ms : 1000;
        sh->busy_until = ngx_max(sh->busy_until, now + wait);

        if (res == -1) {
            break;
        }

        /* fall through */

    case LLM_PROVIDER_FAILED:
        sh->stats.failed++;
        break;

    default: /* LLM_PROVIDER_SPENT */
        sh->stats.spent++;
        sh->spent_until = now + (v->retry_ms >= 0
                                 ? v->retry_ms
                                 : llm_provider_next_midnight(now));
    }

    if (res == -1) {
        llm_breaker_untried(&sh->breaker, &b->breaker, tenant, ctx->trial,
                            ctx->trial_ms);

    } else {
        llm_breaker_result(&sh->breaker, &b->breaker, tenant,
                           (llm_breaker_result_e) res, ctx->trial,
                           ctx->trial_ms, v->retry_ms, (uint32_t) ngx_random(),
                           now);
    }

    ngx_shmtx_unlock(&b->shpool->mutex);

    ctx->trial = 0;
}


/*
 * Whose failure it is.  An upstream the request never reached failed for
 * everyone.  A non-streamed request cut by a timeout sooner than its
 * max_tokens could be generated at MS_PER_TOKEN may still have been
 * generating: the timeout is its tenant's alone, not a sign of the
 * backend's health.  Any other (an answer of 5xx, a timeout of a stream
 * or of a request that had time enough, a connection cut) is the
 * tenant's and counts in the backend's run.
 */

static llm_breaker_result_e
ngx_http_llm_gateway_backend_blame(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    int64_t               elapsed, expected;
    ngx_http_upstream_t  *u;

    u = r->upstream;

    if (u->headers_in.status_n) {
        return LLM_BREAKER_FAILED;
    }

    if (!u->request_sent) {
        return LLM_BREAKER_BACKEND;
    }

    if (!ctx->req.stream
        && (r->err_status == NGX_HTTP_GATEWAY_TIME_OUT
            || r->headers_out.status == NGX_HTTP_GATEWAY_TIME_OUT))
    {
        elapsed = (int64_t) (ngx_current_msec - u->start_time);
        expected = ngx_min(ctx->req.max_tokens, 100000000)
                   * NGX_HTTP_LLM_GATEWAY_MS_PER_TOKEN;

        if (elapsed < expected) {
            return LLM_BREAKER_TENANT_ONLY;
        }
    }

    return LLM_BREAKER_FAILED;
}


/*
 * The next candidate takes the request, as if it had been chosen first:
 * the upstream's answer is dropped before the client saw any of it, and
 * the request runs from the preaccess phase again (an internal redirect to
 * its own URI, as error_page does), where it is paced by the new backend.
 * The admission stays: the same tokens, the same reservation of the cap,
 * so a model that costs more than the one reserved for is not a candidate.
 */

static ngx_int_t
ngx_http_llm_gateway_retry(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_uint_t                       trial;
    ngx_http_upstream_t             *u;
    ngx_pool_cleanup_pt              cleanup;
    ngx_http_llm_gateway_member_t   *m;
    ngx_http_llm_gateway_backend_t  *prev;

    prev = ctx->backend;

    m = ngx_http_llm_gateway_choose(r, ctx, ngx_http_llm_gateway_wall_ms());

    if (m == NULL) {
        /* choose() said why, with the earliest time one comes back */
        return NGX_DECLINED;
    }

    /* the trials choose() took are the new backend's */
    trial = ctx->trial;
    ctx->trial = 0;

    /* the refused request is in the old pacer's minute, with no tokens */
    ngx_http_llm_gateway_backend_done(ctx, prev, 0);

    ctx->pace_ticket = 0;
    ctx->pace_waited = 0;
    ctx->paced = 0;
    ctx->trial = trial;

    if (ngx_http_llm_gateway_use(r, ctx, m) != NGX_OK
        || ngx_http_llm_gateway_reprepare(r, ctx) != NGX_OK)
    {
        return NGX_ERROR;
    }

    ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0,
                  "llm gateway: \"%V\" goes from backend \"%V\" to \"%V\"",
                  &ctx->role_name, &prev->name, &ctx->backend->name);

    ngx_shmtx_lock(&prev->shpool->mutex);
    prev->sh->stats.failovers++;
    ngx_shmtx_unlock(&prev->shpool->mutex);

    ctx->answered = 0;

    /*
     * The upstream is finalized now, as nginx does before error_page: its
     * cleanup would take the request's count with it, so it gets one.
     */
    u = r->upstream;

    if (u->cleanup) {
        cleanup = *u->cleanup;
        r->main->count++;
        cleanup(r);
    }

    /* what the dropped answer set is not the next one's */
    if (ngx_http_llm_gateway_clear_headers(r) != NGX_OK) {
        return NGX_ERROR;
    }

    /*
     * The same location again, from the gateway's own phase handler, once
     * the upstream's stack has unwound: the request is posted, and holds
     * a count that the old upstream's finalization takes.  Not an internal
     * redirect: that would find the location again from a URI a rewrite
     * may have changed, and counts against nginx's limit of 10.
     */
    r->phase_handler = ctx->phase;
    r->write_event_handler = ngx_http_core_run_phases;

    r->main->count++;

    if (ngx_http_post_request(r, NULL) != NGX_OK) {
        return NGX_ERROR;
    }

    return NGX_DONE;
}


/*
 * The provider's refusal in the gateway's words: 429 with its wait, busy
 * (provider_rate_limited) or spent (insufficient_quota), whatever the
 * provider's format; its own headers go.
 */

static ngx_int_t
ngx_http_llm_gateway_replace_answer(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_provider_verdict_t *v)
{
    int64_t   now, until;

    now = ngx_http_llm_gateway_wall_ms();

    until = now + (v->retry_ms >= 0
                   ? v->retry_ms
                   : (v->cls == LLM_PROVIDER_SPENT
                      ? llm_provider_next_midnight(now) : 1000));

    /* a role's refusal was made by choose(), for all its backends */
    if (ctx->err_status == 0) {
        ngx_http_llm_gateway_unserved(r, ctx,
                                      v->cls == LLM_PROVIDER_SPENT
                                      ? NGX_HTTP_LLM_GATEWAY_SPENT
                                      : NGX_HTTP_LLM_GATEWAY_BUSY,
                                      until, now);
    }

    if (v->cls == LLM_PROVIDER_BUSY && ngx_strcmp(v->code, "provider_overloaded")
                                       == 0)
    {
        ctx->err_status = NGX_HTTP_SERVICE_UNAVAILABLE;
        ctx->err_type = "server_error";
        ctx->err_code = "provider_overloaded";
    }

    /* the provider's headers go with its answer */
    if (ngx_http_llm_gateway_clear_headers(r) != NGX_OK
        || ngx_http_llm_gateway_error_headers(r, ctx) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return ngx_http_llm_gateway_backend_headers(r, ctx);
}


/* r->headers_out as a new request's, the upstream's answer gone */

static ngx_int_t
ngx_http_llm_gateway_clear_headers(ngx_http_request_t *r)
{
    ngx_memzero(&r->headers_out, sizeof(ngx_http_headers_out_t));

    if (ngx_list_init(&r->headers_out.headers, r->pool, 20,
                      sizeof(ngx_table_elt_t))
        != NGX_OK
        || ngx_list_init(&r->headers_out.trailers, r->pool, 4,
                         sizeof(ngx_table_elt_t))
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    r->headers_out.content_length_n = -1;
    r->headers_out.last_modified_time = -1;

    return NGX_OK;
}


/*
 * Whether this client may be told which backends served it, failed it or
 * kept it waiting (llm_gateway_diagnostics): their names are the
 * operator's, not the tenants'.
 */

ngx_uint_t
ngx_http_llm_gateway_diagnostics(ngx_http_request_t *r)
{
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    if (llcf->diagnostics == NULL) {
        return 0;
    }

    return llcf->diagnostics->nelts == 0
           || ngx_cidr_match(r->connection->sockaddr, llcf->diagnostics)
              == NGX_OK;
}


/* which backend served, and how long the request waited for it */

static ngx_int_t
ngx_http_llm_gateway_backend_headers(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char     *p;
    ngx_str_t   v;

    if (!ngx_http_llm_gateway_diagnostics(r)) {
        return NGX_OK;
    }

    if (ngx_http_llm_gateway_add_header(r, "x-llmgw-backend",
                                        &ctx->backend->name)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (ctx->tried_names.len
        && ngx_http_llm_gateway_add_header(r, "x-llmgw-failover",
                                           &ctx->tried_names)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (!ctx->pace_waited && ctx->queued_ms == 0) {
        return NGX_OK;
    }

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    v.data = p;
    v.len = ngx_sprintf(p, "%L", ctx->queued_ms) - p;

    return ngx_http_llm_gateway_add_header(r, "x-llmgw-queue-ms", &v);
}


/*
 * The request ended: its entry in the pacer's minute is corrected to what
 * it used (0: the provider refused it), so that the waiters behind it
 * may go earlier.
 */

void
ngx_http_llm_gateway_backend_done(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_http_llm_gateway_backend_t *b, int64_t tokens)
{
    int64_t  now;

    if (b == NULL) {
        return;
    }

    now = ngx_http_llm_gateway_now_ms();

    ngx_shmtx_lock(&b->shpool->mutex);

    /* a half-open trial that never reached it: the next request's */
    if (ctx->trial && !ctx->answered) {
        llm_breaker_untried(&b->sh->breaker, &b->breaker,
                            ngx_http_llm_gateway_tenant(ctx), ctx->trial,
                            ctx->trial_ms);
    }

    ctx->trial = 0;

    if (ctx->pace_ticket && b->sh->pacer) {

        if (ctx->paced) {
            (void) llm_pacer_correct(b->sh->pacer, ctx->pace_ticket, tokens,
                                     now);

        } else {
            /* still waiting: it leaves the queue without a trace */
            (void) llm_pacer_cancel(b->sh->pacer, ctx->pace_ticket, now);
        }
    }

    ngx_shmtx_unlock(&b->shpool->mutex);

    ctx->pace_ticket = 0;
}


/* for the metrics: a backend's counters and its queue, under its lock */

void
ngx_http_llm_gateway_backend_snapshot(ngx_http_llm_gateway_backend_t *b,
    ngx_http_llm_gateway_backend_snap_t *s)
{
    int64_t                             now, wall;
    ngx_http_llm_gateway_backend_sh_t  *sh;

    sh = b->sh;
    now = ngx_http_llm_gateway_now_ms();
    wall = ngx_http_llm_gateway_wall_ms();

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
