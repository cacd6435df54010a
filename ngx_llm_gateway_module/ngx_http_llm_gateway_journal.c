
/*
 * The journal of settle records: a ring in its own shared zone, written
 * once by the worker that settles a request and read by whichever worker
 * sends to accountd.  Every admitted request holds a place in it until it
 * settles, so that its record always fits.  The ring's logic is
 * core/llm_journal.c; here are its zone and the lock around each call.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_journal.h"


static ngx_int_t ngx_http_llm_gateway_init_journal(ngx_shm_zone_t *shm_zone,
    void *data);


/* who reads the journal, told of each record written; set at init */
ngx_http_llm_gateway_journal_written_pt  ngx_http_llm_gateway_journal_written;


/* the journal's zone, from llm_gateway_accountd */

ngx_int_t
ngx_http_llm_gateway_journal_add(ngx_conf_t *cf,
    ngx_http_llm_gateway_main_conf_t *lmcf)
{
    ngx_str_t  name = ngx_string("llm_gateway_accountd");

    lmcf->journal = ngx_shared_memory_add(cf, &name, lmcf->accountd_buffer,
                                          &ngx_http_llm_gateway_module);
    if (lmcf->journal == NULL) {
        return NGX_ERROR;
    }

    if (lmcf->journal->data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_gateway_accountd\" is duplicate");
        return NGX_ERROR;
    }

    lmcf->journal->init = ngx_http_llm_gateway_init_journal;
    lmcf->journal->data = lmcf;

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_gateway_init_journal(ngx_shm_zone_t *shm_zone, void *data)
{
    size_t            size;
    u_char           *ring;
    llm_journal_t    *j, *oj;
    ngx_slab_pool_t  *shpool;

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (data) {
        /* a reload: the journal and what it holds go on */
        oj = ((ngx_http_llm_gateway_main_conf_t *) data)->journal_data;

        if (oj && oj->version == LLM_JOURNAL_VERSION) {
            ((ngx_http_llm_gateway_main_conf_t *) shm_zone->data)
                ->journal_data = oj;
            return NGX_OK;
        }
    }

    if (shm_zone->shm.exists) {
        j = shpool->data;

        if (j && j->version == LLM_JOURNAL_VERSION) {
            ((ngx_http_llm_gateway_main_conf_t *) shm_zone->data)
                ->journal_data = j;
            return NGX_OK;
        }
    }

    j = ngx_slab_calloc(shpool, sizeof(llm_journal_t));
    if (j == NULL) {
        return NGX_ERROR;
    }

    /* the free pages of the new slab are one run: the ring takes them */
    size = shpool->pfree * ngx_pagesize;
    ring = NULL;
    shpool->log_nomem = 0;

    while (size >= 2 * LLM_JOURNAL_PLACE) {
        ring = ngx_slab_alloc(shpool, size);
        if (ring) {
            break;
        }

        size -= ngx_pagesize;
    }

    shpool->log_nomem = 1;

    if (ring == NULL || llm_journal_init(j, ring, size) != 0) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "llm_gateway_accountd buffer of %uz is too small",
                      shm_zone->shm.size);
        return NGX_ERROR;
    }

    shpool->data = j;

    ((ngx_http_llm_gateway_main_conf_t *) shm_zone->data)->journal_data = j;

    return NGX_OK;
}


llm_journal_t *
ngx_http_llm_gateway_journal_lock(ngx_http_llm_gateway_main_conf_t *lmcf)
{
    ngx_slab_pool_t  *shpool;

    shpool = (ngx_slab_pool_t *) lmcf->journal->shm.addr;

    ngx_shmtx_lock(&shpool->mutex);

    return lmcf->journal_data;
}


void
ngx_http_llm_gateway_journal_unlock(ngx_http_llm_gateway_main_conf_t *lmcf)
{
    ngx_slab_pool_t  *shpool;

    shpool = (ngx_slab_pool_t *) lmcf->journal->shm.addr;

    ngx_shmtx_unlock(&shpool->mutex);
}


/* at admission: a place for the request's record */

ngx_int_t
ngx_http_llm_gateway_journal_hold(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_int_t                          rc;
    llm_journal_t                     *j;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(ctx->request,
                                         ngx_http_llm_gateway_module);

    if (lmcf->journal_data == NULL) {
        return NGX_OK;
    }

    j = ngx_http_llm_gateway_journal_lock(lmcf);

    if (llm_journal_hold(j)) {
        ctx->journal_held = 1;
        rc = NGX_OK;

    } else if (lmcf->accountd_full_admit) {
        rc = NGX_OK;

    } else {
        j->refused++;
        rc = NGX_DECLINED;
    }

    ngx_http_llm_gateway_journal_unlock(lmcf);

    return rc;
}


/* the journal's counters, for the metrics; all 0 without a journal */

void
ngx_http_llm_gateway_journal_stats(ngx_http_llm_gateway_main_conf_t *lmcf,
    ngx_http_llm_gateway_journal_stats_t *st)
{
    llm_journal_t  *j;

    ngx_memzero(st, sizeof(ngx_http_llm_gateway_journal_stats_t));

    if (lmcf->journal_data == NULL) {
        return;
    }

    j = ngx_http_llm_gateway_journal_lock(lmcf);
    llm_journal_stats(j, &st->journal);
    ngx_http_llm_gateway_journal_unlock(lmcf);
}


/* a request that will not be recorded after all gives its place back */

void
ngx_http_llm_gateway_journal_unhold(ngx_http_llm_gateway_ctx_t *ctx)
{
    llm_journal_t                     *j;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    if (!ctx->journal_held) {
        return;
    }

    ctx->journal_held = 0;

    lmcf = ngx_http_get_module_main_conf(ctx->request,
                                         ngx_http_llm_gateway_module);

    j = ngx_http_llm_gateway_journal_lock(lmcf);
    llm_journal_unhold(j);
    ngx_http_llm_gateway_journal_unlock(lmcf);
}


/*
 * The record of a settled request, which held a place (held) or not: into
 * the journal, then on its way.
 */

void
ngx_http_llm_gateway_journal_put(ngx_http_llm_gateway_main_conf_t *lmcf,
    llm_record_t *rec, ngx_uint_t held, ngx_log_t *log)
{
    size_t                            n;
    uint64_t                          lost;
    ngx_int_t                         rc;
    u_char                            frame[LLM_RECORD_MAX_FRAME];
    llm_journal_t                    *j;

    if (lmcf->journal_data == NULL) {
        return;
    }

    n = llm_record_encode(rec, frame, sizeof(frame));

    j = ngx_http_llm_gateway_journal_lock(lmcf);

    rc = llm_journal_write(j, frame, n, held);
    lost = j->lost;

    ngx_http_llm_gateway_journal_unlock(lmcf);

    if (rc != 0) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "llm gateway: accountd journal full, record of request "
                      "\"%*s\" lost (%uL so far)", (size_t) rec->request_id_len,
                      rec->request_id, lost);
        return;
    }

    if (ngx_http_llm_gateway_journal_written) {
        ngx_http_llm_gateway_journal_written();
    }
}
