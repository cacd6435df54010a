
/*
 * The road to accountd: the journal of settle records in shared memory,
 * and each worker's non-blocking Unix socket connection that sends them.
 *
 * The journal is a ring in its own shared zone, so that what accountd has
 * not acknowledged survives a reload (new workers send what old ones left)
 * and a crashed worker (its records are taken back).  A record is written
 * once, by the worker that settles the request; any worker may send it.
 * accountd acknowledges each record, in order, once PostgreSQL committed
 * it, and only then may its space be reused.  Sent twice, a record is
 * harmless: accountd's INSERT ... ON CONFLICT DO NOTHING keeps one.
 *
 * Every admitted request holds a place in the journal from admission to
 * settlement, so that its record always fits: when no place is left, new
 * requests are refused with 503 (llm_gateway_accountd ... full=refuse, the
 * default) or admitted and, should their record not fit, counted as lost
 * (full=admit).
 */


#include "ngx_http_llm_gateway_module.h"


/* reconnection backs off from the first to the last delay, in ms */
#define NGX_HTTP_LLM_GATEWAY_RETRY_MIN     250
#define NGX_HTTP_LLM_GATEWAY_RETRY_MAX     4000

/* how often records of dead workers are looked for, in ms */
#define NGX_HTTP_LLM_GATEWAY_REAP          1000

/* records a worker has sent and not yet seen acknowledged, at most */
#define NGX_HTTP_LLM_GATEWAY_WINDOW        4096

#define NGX_HTTP_LLM_GATEWAY_JOURNAL_VERSION  1

#define NGX_HTTP_LLM_GATEWAY_PENDING       0
#define NGX_HTTP_LLM_GATEWAY_SENT          1
#define NGX_HTTP_LLM_GATEWAY_ACKED         2


/* an entry of the ring: this header, then one frame; 16-byte aligned */
typedef struct {
    uint32_t                     len;       /* of the frame; 0: padding */
    uint32_t                     state;
    ngx_pid_t                    owner;     /* the worker that sent it */
    uint32_t                     reserved;
} ngx_http_llm_gateway_entry_t;


#define ngx_http_llm_gateway_entry_size(len)                                 \
    ngx_align(sizeof(ngx_http_llm_gateway_entry_t) + (len), 16)

#define NGX_HTTP_LLM_GATEWAY_ENTRY_MAX                                       \
    ngx_http_llm_gateway_entry_size(LLM_RECORD_MAX_FRAME)


/*
 * Positions are logical and only grow; an entry is at pos % size.  An
 * entry never wraps: the end of the ring is padded instead.
 */
typedef struct {
    ngx_uint_t                   version;
    size_t                       size;
    uint64_t                     head;      /* the oldest entry kept */
    uint64_t                     tail;      /* where the next one goes */
    uint64_t                     unsent;    /* nothing pending before it */
    size_t                       held;      /* places held by requests */
    uint64_t                     written;
    uint64_t                     acked;
    uint64_t                     lost;
    uint64_t                     refused;
    u_char                      *ring;
} ngx_http_llm_gateway_journal_t;


typedef struct {
    ngx_peer_connection_t        peer;
    ngx_url_t                   *url;
    ngx_log_t                   *log;

    /* frames copied out of the journal to be sent: [pos, last) */
    u_char                      *out;
    u_char                      *pos;
    u_char                      *last;
    size_t                       out_size;

    /* the journal positions sent and not yet acknowledged, in order */
    uint64_t                    *sent;
    ngx_uint_t                   sent_head;
    ngx_uint_t                   sent_n;

    /* many key frames a read when a set comes */
    u_char                       in[65536];
    size_t                       in_len;

    ngx_event_t                  reconnect;
    ngx_event_t                  reap;
    ngx_event_t                  send;      /* posted: the records written */
    ngx_msec_t                   retry;
    unsigned                     down:1;
} ngx_http_llm_gateway_accountd_t;


static ngx_int_t ngx_http_llm_gateway_init_journal(ngx_shm_zone_t *shm_zone,
    void *data);
static ngx_http_llm_gateway_entry_t *ngx_http_llm_gateway_entry(
    ngx_http_llm_gateway_journal_t *j, uint64_t pos);
static void ngx_http_llm_gateway_reclaim(ngx_http_llm_gateway_journal_t *j);
static void ngx_http_llm_gateway_release(ngx_http_llm_gateway_accountd_t *ad);
static void ngx_http_llm_gateway_claim(ngx_http_llm_gateway_accountd_t *ad);
static void ngx_http_llm_gateway_reap(ngx_event_t *ev);
static void ngx_http_llm_gateway_report(ngx_http_llm_gateway_accountd_t *ad);
static ngx_int_t ngx_http_llm_gateway_out_frame(
    ngx_http_llm_gateway_accountd_t *ad, llm_lease_t *l);
static void ngx_http_llm_gateway_connect(ngx_event_t *ev);
static void ngx_http_llm_gateway_flush(ngx_http_llm_gateway_accountd_t *ad);
static ngx_int_t ngx_http_llm_gateway_ack(
    ngx_http_llm_gateway_accountd_t *ad, llm_record_t *ack);
static int ngx_http_llm_gateway_frame(ngx_http_llm_gateway_accountd_t *ad,
    u_char *buf, size_t len, size_t *used);
static void ngx_http_llm_gateway_write_handler(ngx_event_t *ev);
static void ngx_http_llm_gateway_send(ngx_event_t *ev);
static void ngx_http_llm_gateway_read_handler(ngx_event_t *ev);
static void ngx_http_llm_gateway_close(ngx_http_llm_gateway_accountd_t *ad);
static void ngx_http_llm_gateway_retry(ngx_http_llm_gateway_accountd_t *ad);


static ngx_http_llm_gateway_accountd_t  *ngx_http_llm_gateway_accountd_peer;


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
    size_t                           size;
    ngx_slab_pool_t                 *shpool;
    ngx_http_llm_gateway_journal_t  *j, *oj;

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (data) {
        /* a reload: the journal and what it holds go on */
        oj = ((ngx_http_llm_gateway_main_conf_t *) data)->journal_data;

        if (oj && oj->version == NGX_HTTP_LLM_GATEWAY_JOURNAL_VERSION) {
            ((ngx_http_llm_gateway_main_conf_t *) shm_zone->data)
                ->journal_data = oj;
            return NGX_OK;
        }
    }

    if (shm_zone->shm.exists) {
        j = shpool->data;

        if (j && j->version == NGX_HTTP_LLM_GATEWAY_JOURNAL_VERSION) {
            ((ngx_http_llm_gateway_main_conf_t *) shm_zone->data)
                ->journal_data = j;
            return NGX_OK;
        }
    }

    j = ngx_slab_calloc(shpool, sizeof(ngx_http_llm_gateway_journal_t));
    if (j == NULL) {
        return NGX_ERROR;
    }

    /* the free pages of the new slab are one run: the ring takes them */
    size = shpool->pfree * ngx_pagesize;
    shpool->log_nomem = 0;

    while (size >= 2 * NGX_HTTP_LLM_GATEWAY_ENTRY_MAX) {
        j->ring = ngx_slab_alloc(shpool, size);
        if (j->ring) {
            break;
        }

        size -= ngx_pagesize;
    }

    shpool->log_nomem = 1;

    if (j->ring == NULL) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "llm_gateway_accountd buffer of %uz is too small",
                      shm_zone->shm.size);
        return NGX_ERROR;
    }

    j->size = size;
    j->version = NGX_HTTP_LLM_GATEWAY_JOURNAL_VERSION;

    shpool->data = j;

    ((ngx_http_llm_gateway_main_conf_t *) shm_zone->data)->journal_data = j;

    return NGX_OK;
}


static ngx_http_llm_gateway_entry_t *
ngx_http_llm_gateway_entry(ngx_http_llm_gateway_journal_t *j, uint64_t pos)
{
    return (ngx_http_llm_gateway_entry_t *) (j->ring + pos % j->size);
}


/*
 * At admission: a place for the request's record.  One entry's worth more
 * is always left for the padding at the ring's end.
 */

ngx_int_t
ngx_http_llm_gateway_journal_hold(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_int_t                          rc;
    ngx_slab_pool_t                   *shpool;
    ngx_http_llm_gateway_journal_t    *j;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(ctx->request,
                                         ngx_http_llm_gateway_module);

    j = lmcf->journal_data;

    if (j == NULL) {
        return NGX_OK;
    }

    shpool = (ngx_slab_pool_t *) lmcf->journal->shm.addr;

    ngx_shmtx_lock(&shpool->mutex);

    if ((j->tail - j->head) + j->held + 2 * NGX_HTTP_LLM_GATEWAY_ENTRY_MAX
        <= j->size)
    {
        j->held += NGX_HTTP_LLM_GATEWAY_ENTRY_MAX;
        ctx->journal_held = 1;
        rc = NGX_OK;

    } else if (lmcf->accountd_full_admit) {
        rc = NGX_OK;

    } else {
        j->refused++;
        rc = NGX_DECLINED;
    }

    ngx_shmtx_unlock(&shpool->mutex);

    return rc;
}


/* the journal's counters, for the metrics; all 0 without a journal */

void
ngx_http_llm_gateway_journal_stats(ngx_http_llm_gateway_main_conf_t *lmcf,
    ngx_http_llm_gateway_journal_stats_t *st)
{
    ngx_slab_pool_t                 *shpool;
    ngx_http_llm_gateway_journal_t  *j;

    ngx_memzero(st, sizeof(ngx_http_llm_gateway_journal_stats_t));

    j = lmcf->journal_data;

    if (j == NULL) {
        return;
    }

    shpool = (ngx_slab_pool_t *) lmcf->journal->shm.addr;

    ngx_shmtx_lock(&shpool->mutex);

    st->written = j->written;
    st->acked = j->acked;
    st->lost = j->lost;
    st->refused = j->refused;
    st->size = j->size;
    st->used = (size_t) (j->tail - j->head);
    st->held = j->held;

    ngx_shmtx_unlock(&shpool->mutex);

    st->connected = ngx_http_llm_gateway_accountd_up();
}


/* a request that will not be recorded after all gives its place back */

void
ngx_http_llm_gateway_journal_unhold(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_slab_pool_t                   *shpool;
    ngx_http_llm_gateway_journal_t    *j;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    if (!ctx->journal_held) {
        return;
    }

    ctx->journal_held = 0;

    lmcf = ngx_http_get_module_main_conf(ctx->request,
                                         ngx_http_llm_gateway_module);
    j = lmcf->journal_data;
    shpool = (ngx_slab_pool_t *) lmcf->journal->shm.addr;

    ngx_shmtx_lock(&shpool->mutex);
    j->held -= NGX_HTTP_LLM_GATEWAY_ENTRY_MAX;
    ngx_shmtx_unlock(&shpool->mutex);
}


/*
 * The record of a settled request, which held a place (held) or not: into
 * the journal, then on its way.
 */

void
ngx_http_llm_gateway_journal_put(ngx_http_llm_gateway_main_conf_t *lmcf,
    llm_record_t *rec, ngx_uint_t held, ngx_log_t *log)
{
    size_t                             n, need, room;
    uint64_t                           lost;
    u_char                             frame[LLM_RECORD_MAX_FRAME];
    ngx_slab_pool_t                   *shpool;
    ngx_http_llm_gateway_entry_t      *e;
    ngx_http_llm_gateway_journal_t    *j;
    ngx_http_llm_gateway_accountd_t   *ad;

    j = lmcf->journal_data;

    if (j == NULL) {
        return;
    }

    n = llm_record_encode(rec, frame, sizeof(frame));
    need = ngx_http_llm_gateway_entry_size(n);

    shpool = (ngx_slab_pool_t *) lmcf->journal->shm.addr;

    ngx_shmtx_lock(&shpool->mutex);

    if (held) {
        j->held -= NGX_HTTP_LLM_GATEWAY_ENTRY_MAX;
    }

    /* what is free, less the places requests hold */
    room = j->size - (j->tail - j->head);
    room = (room > j->held) ? room - j->held : 0;

    e = ngx_http_llm_gateway_entry(j, j->tail);

    if (j->size - j->tail % j->size < need) {
        /* the rest of the ring is padding: the entry goes at its start */
        if (room < j->size - j->tail % j->size + need) {
            goto full;
        }

        e->len = 0;
        e->state = NGX_HTTP_LLM_GATEWAY_ACKED;
        room -= j->size - j->tail % j->size;
        j->tail += j->size - j->tail % j->size;

        e = ngx_http_llm_gateway_entry(j, j->tail);
    }

    if (n == 0 || room < need) {
        goto full;
    }

    e->len = n;
    e->state = NGX_HTTP_LLM_GATEWAY_PENDING;
    e->owner = 0;
    ngx_memcpy((u_char *) e + sizeof(ngx_http_llm_gateway_entry_t), frame, n);

    j->tail += need;
    j->written++;

    ngx_shmtx_unlock(&shpool->mutex);

    /*
     * Sent once the events at hand are handled: the records of the
     * requests that ended meanwhile go in one write.
     */
    ad = ngx_http_llm_gateway_accountd_peer;

    if (ad && ad->peer.connection && !ad->send.posted) {
        ngx_post_event(&ad->send, &ngx_posted_events);
    }

    return;

full:

    lost = ++j->lost;

    ngx_shmtx_unlock(&shpool->mutex);

    ngx_log_error(NGX_LOG_ERR, log, 0,
                  "llm gateway: accountd journal full, record of request "
                  "\"%*s\" lost (%uL so far)", (size_t) rec->request_id_len,
                  rec->request_id, lost);
}


/* acknowledged entries at the head, and padding, make room again */

static void
ngx_http_llm_gateway_reclaim(ngx_http_llm_gateway_journal_t *j)
{
    ngx_http_llm_gateway_entry_t  *e;

    while (j->head < j->tail) {
        e = ngx_http_llm_gateway_entry(j, j->head);

        if (e->len == 0) {
            j->head += j->size - j->head % j->size;
            continue;
        }

        if (e->state != NGX_HTTP_LLM_GATEWAY_ACKED) {
            break;
        }

        j->head += ngx_http_llm_gateway_entry_size(e->len);
    }

    if (j->unsent < j->head) {
        j->unsent = j->head;
    }
}


/*
 * Pending entries, oldest first, into this worker's out buffer: they are
 * its to send until acknowledged or given back.
 */

static void
ngx_http_llm_gateway_claim(ngx_http_llm_gateway_accountd_t *ad)
{
    uint64_t                           pos;
    ngx_slab_pool_t                   *shpool;
    ngx_http_llm_gateway_entry_t      *e;
    ngx_http_llm_gateway_journal_t    *j;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_llm_gateway_module);
    j = lmcf->journal_data;
    shpool = (ngx_slab_pool_t *) lmcf->journal->shm.addr;

    ad->pos = ad->out;
    ad->last = ad->out;

    ngx_shmtx_lock(&shpool->mutex);

    pos = ngx_max(j->unsent, j->head);

    while (pos < j->tail) {
        e = ngx_http_llm_gateway_entry(j, pos);

        if (e->len == 0) {
            pos += j->size - pos % j->size;
            continue;
        }

        if (e->state == NGX_HTTP_LLM_GATEWAY_PENDING) {

            if ((size_t) (ad->out + ad->out_size - ad->last) < e->len
                || ad->sent_n == NGX_HTTP_LLM_GATEWAY_WINDOW)
            {
                break;
            }

            ad->last = ngx_cpymem(ad->last,
                                  (u_char *) e
                                  + sizeof(ngx_http_llm_gateway_entry_t),
                                  e->len);

            e->state = NGX_HTTP_LLM_GATEWAY_SENT;
            e->owner = ngx_pid;

            ad->sent[(ad->sent_head + ad->sent_n)
                     % NGX_HTTP_LLM_GATEWAY_WINDOW] = pos;
            ad->sent_n++;
        }

        pos += ngx_http_llm_gateway_entry_size(e->len);
    }

    /* all before pos is claimed; a full window stops at a pending one */
    j->unsent = pos;

    ngx_shmtx_unlock(&shpool->mutex);
}


/* what this worker sent and accountd did not acknowledge is pending again */

static void
ngx_http_llm_gateway_release(ngx_http_llm_gateway_accountd_t *ad)
{
    uint64_t                           pos;
    ngx_uint_t                         i;
    ngx_slab_pool_t                   *shpool;
    ngx_http_llm_gateway_entry_t      *e;
    ngx_http_llm_gateway_journal_t    *j;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_llm_gateway_module);
    j = lmcf->journal_data;
    shpool = (ngx_slab_pool_t *) lmcf->journal->shm.addr;

    ngx_shmtx_lock(&shpool->mutex);

    for (i = 0; i < ad->sent_n; i++) {
        pos = ad->sent[(ad->sent_head + i) % NGX_HTTP_LLM_GATEWAY_WINDOW];
        e = ngx_http_llm_gateway_entry(j, pos);

        if (e->state == NGX_HTTP_LLM_GATEWAY_SENT && e->owner == ngx_pid) {
            e->state = NGX_HTTP_LLM_GATEWAY_PENDING;

            if (pos < j->unsent) {
                j->unsent = pos;
            }
        }
    }

    ngx_shmtx_unlock(&shpool->mutex);

    ad->sent_head = 0;
    ad->sent_n = 0;
    ad->pos = ad->out;
    ad->last = ad->out;
}


/*
 * Entries sent by a worker that is gone without giving them back (killed,
 * crashed) are pending again.  kill(pid, 0) only asks whether it lives.
 */

static void
ngx_http_llm_gateway_reap(ngx_event_t *ev)
{
    uint64_t                           pos;
    ngx_pid_t                          alive, dead;
    ngx_uint_t                         n;
    ngx_slab_pool_t                   *shpool;
    ngx_http_llm_gateway_entry_t      *e;
    ngx_http_llm_gateway_journal_t    *j;
    ngx_http_llm_gateway_main_conf_t  *lmcf;
    ngx_http_llm_gateway_accountd_t   *ad;

    ad = ev->data;

    lmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_llm_gateway_module);
    j = lmcf->journal_data;
    shpool = (ngx_slab_pool_t *) lmcf->journal->shm.addr;

    alive = 0;
    dead = 0;
    n = 0;

    ngx_shmtx_lock(&shpool->mutex);

    for (pos = j->head; pos < j->tail; /* void */ ) {
        e = ngx_http_llm_gateway_entry(j, pos);

        if (e->len == 0) {
            pos += j->size - pos % j->size;
            continue;
        }

        if (e->state == NGX_HTTP_LLM_GATEWAY_SENT && e->owner != ngx_pid
            && e->owner != alive)
        {
            if (e->owner == dead
                || (kill(e->owner, 0) == -1 && ngx_errno == NGX_ESRCH))
            {
                dead = e->owner;
                e->state = NGX_HTTP_LLM_GATEWAY_PENDING;
                n++;

                if (pos < j->unsent) {
                    j->unsent = pos;
                }

            } else {
                alive = e->owner;
            }
        }

        pos += ngx_http_llm_gateway_entry_size(e->len);
    }

    ngx_shmtx_unlock(&shpool->mutex);

    if (n) {
        ngx_log_error(NGX_LOG_NOTICE, ad->log, 0,
                      "llm gateway: %ui records of exited worker %P to "
                      "send again", n, dead);
    }

    /* also what a worker without a connection wrote: anyone may send it */
    if (ad->peer.connection) {
        ngx_http_llm_gateway_flush(ad);
        ngx_http_llm_gateway_report(ad);
    }

    if (!ngx_exiting && !ngx_terminate) {
        ngx_add_timer(&ad->reap, NGX_HTTP_LLM_GATEWAY_REAP);
    }
}


ngx_int_t
ngx_http_llm_gateway_accountd_init(ngx_cycle_t *cycle)
{
    ngx_http_llm_gateway_accountd_t   *ad;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    if (ngx_http_cycle_get_module_main_conf(cycle, ngx_http_core_module)
        == NULL)
    {
        return NGX_OK;
    }

    lmcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_llm_gateway_module);

    if (lmcf == NULL || lmcf->accountd == NULL) {
        return NGX_OK;
    }

    ad = ngx_pcalloc(cycle->pool, sizeof(ngx_http_llm_gateway_accountd_t));
    if (ad == NULL) {
        return NGX_ERROR;
    }

    ad->out_size = 65536;

    ad->out = ngx_palloc(cycle->pool, ad->out_size);
    ad->sent = ngx_palloc(cycle->pool,
                          NGX_HTTP_LLM_GATEWAY_WINDOW * sizeof(uint64_t));

    if (ad->out == NULL || ad->sent == NULL) {
        return NGX_ERROR;
    }

    ad->pos = ad->out;
    ad->last = ad->out;

    ad->url = lmcf->accountd;
    ad->log = cycle->log;

    ad->reconnect.handler = ngx_http_llm_gateway_connect;
    ad->reconnect.data = ad;
    ad->reconnect.log = cycle->log;
    ad->reconnect.cancelable = 1;

    ad->reap.handler = ngx_http_llm_gateway_reap;
    ad->reap.data = ad;
    ad->reap.log = cycle->log;
    ad->reap.cancelable = 1;

    ad->send.handler = ngx_http_llm_gateway_send;
    ad->send.data = ad;
    ad->send.log = cycle->log;

    ngx_http_llm_gateway_accountd_peer = ad;

    ngx_add_timer(&ad->reap, NGX_HTTP_LLM_GATEWAY_REAP);

    ngx_http_llm_gateway_connect(&ad->reconnect);

    return NGX_OK;
}


void
ngx_http_llm_gateway_accountd_exit(ngx_cycle_t *cycle)
{
    ngx_http_llm_gateway_accountd_t  *ad;

    ad = ngx_http_llm_gateway_accountd_peer;

    if (ad == NULL) {
        return;
    }

    if (ad->send.posted) {
        ngx_delete_posted_event(&ad->send);
    }

    if (ad->peer.connection) {
        ngx_close_connection(ad->peer.connection);
        ad->peer.connection = NULL;
    }

    /* another worker, or the next generation, sends them */
    ngx_http_llm_gateway_release(ad);

    ngx_http_llm_gateway_accountd_peer = NULL;
}


static void
ngx_http_llm_gateway_connect(ngx_event_t *ev)
{
    ngx_int_t                         rc;
    ngx_connection_t                 *c;
    ngx_file_info_t                   fi;
    struct sockaddr_un               *sun;
    ngx_http_llm_gateway_accountd_t  *ad;

    ad = ev->data;

    /*
     * While accountd is away its socket is gone: a look at the path, a local
     * metadata call outside any request, spares a failed connect() and its
     * log line every retry.
     */
    sun = (struct sockaddr_un *) ad->url->addrs[0].sockaddr;

    if (ngx_file_info(sun->sun_path, &fi) == NGX_FILE_ERROR) {
        if (!ad->down) {
            ngx_log_error(NGX_LOG_WARN, ad->log, ngx_errno,
                          "llm gateway: accountd socket \"%V\" is not there; "
                          "records are kept and sent when it is back",
                          &ad->url->url);
            ad->down = 1;
        }

        ngx_http_llm_gateway_retry(ad);
        return;
    }

    ngx_memzero(&ad->peer, sizeof(ngx_peer_connection_t));

    ad->peer.sockaddr = ad->url->addrs[0].sockaddr;
    ad->peer.socklen = ad->url->addrs[0].socklen;
    ad->peer.name = &ad->url->url;
    ad->peer.get = ngx_event_get_peer;
    ad->peer.log = ad->log;
    ad->peer.log_error = NGX_ERROR_ERR;

    rc = ngx_event_connect_peer(&ad->peer);

    if (rc == NGX_ERROR || rc == NGX_BUSY || rc == NGX_DECLINED) {
        if (ad->peer.connection) {
            ngx_close_connection(ad->peer.connection);
            ad->peer.connection = NULL;
        }

        ad->down = 1;
        ngx_http_llm_gateway_retry(ad);
        return;
    }

    c = ad->peer.connection;

    c->data = ad;
    c->log = ad->log;
    c->read->handler = ngx_http_llm_gateway_read_handler;
    c->write->handler = ngx_http_llm_gateway_write_handler;
    c->read->log = ad->log;
    c->write->log = ad->log;

    if (ad->down && rc == NGX_OK) {
        ngx_log_error(NGX_LOG_NOTICE, ad->log, 0,
                      "llm gateway: connected to accountd again");
        ad->down = 0;
    }

    ad->retry = 0;
    ad->in_len = 0;

    if (rc == NGX_OK) {
        ngx_http_llm_gateway_flush(ad);
    }
}


static void
ngx_http_llm_gateway_retry(ngx_http_llm_gateway_accountd_t *ad)
{
    if (ngx_exiting || ngx_terminate || ad->reconnect.timer_set) {
        return;
    }

    ad->retry = ad->retry ? ngx_min(ad->retry * 2,
                                    NGX_HTTP_LLM_GATEWAY_RETRY_MAX)
                          : NGX_HTTP_LLM_GATEWAY_RETRY_MIN;

    ngx_add_timer(&ad->reconnect, ad->retry);
}


static void
ngx_http_llm_gateway_flush(ngx_http_llm_gateway_accountd_t *ad)
{
    ssize_t            n;
    ngx_connection_t  *c;

    c = ad->peer.connection;

    /* connecting, or the socket is full: the write event comes back */
    if (!c->write->ready) {
        return;
    }

    for ( ;; ) {

        if (ad->pos == ad->last) {
            ngx_http_llm_gateway_claim(ad);

            if (ad->pos == ad->last) {
                return;
            }
        }

        n = c->send(c, ad->pos, ad->last - ad->pos);

        if (n == NGX_AGAIN) {
            if (ngx_handle_write_event(c->write, 0) != NGX_OK) {
                ngx_http_llm_gateway_close(ad);
            }

            return;
        }

        if (n == NGX_ERROR) {
            ngx_http_llm_gateway_close(ad);
            return;
        }

        ad->pos += n;
    }
}


/* the tenants' demand here, for their share of the limits (sql/006) */

static void
ngx_http_llm_gateway_report(ngx_http_llm_gateway_accountd_t *ad)
{
    ngx_uint_t    i, count;
    llm_lease_t   demand[128];

    count = ngx_http_llm_gateway_demand((ngx_cycle_t *) ngx_cycle, demand,
                                        128);

    for (i = 0; i < count; i++) {
        if (ngx_http_llm_gateway_out_frame(ad, &demand[i]) != NGX_OK) {
            break;
        }
    }

    if (count) {
        ngx_http_llm_gateway_flush(ad);
    }
}


/* a lease or share frame, after what is being sent */

static ngx_int_t
ngx_http_llm_gateway_out_frame(ngx_http_llm_gateway_accountd_t *ad,
    llm_lease_t *l)
{
    size_t  n;

    if (ad->pos == ad->last) {
        ad->pos = ad->out;
        ad->last = ad->out;
    }

    n = llm_lease_encode(l, ad->last, ad->out + ad->out_size - ad->last);
    if (n == 0) {
        return NGX_DECLINED;
    }

    ad->last += n;

    return NGX_OK;
}


ngx_uint_t
ngx_http_llm_gateway_accountd_up(void)
{
    ngx_http_llm_gateway_accountd_t  *ad;

    ad = ngx_http_llm_gateway_accountd_peer;

    return ad && ad->peer.connection && !ad->down;
}


/*
 * A lease of a budget asked for: after what is being sent, ahead of what
 * the journal holds.  NGX_DECLINED without a connection or room.
 */

ngx_int_t
ngx_http_llm_gateway_lease_ask(llm_lease_t *l)
{
    ngx_http_llm_gateway_accountd_t  *ad;

    ad = ngx_http_llm_gateway_accountd_peer;

    if (ad == NULL || ad->peer.connection == NULL || ad->down) {
        return NGX_DECLINED;
    }

    if (ngx_http_llm_gateway_out_frame(ad, l) != NGX_OK) {
        return NGX_DECLINED;
    }

    ngx_http_llm_gateway_flush(ad);

    return NGX_OK;
}


/* an acknowledgement releases the oldest record sent, which it must name */

static ngx_int_t
ngx_http_llm_gateway_ack(ngx_http_llm_gateway_accountd_t *ad,
    llm_record_t *ack)
{
    size_t                             used;
    uint64_t                           pos;
    ngx_int_t                          rc;
    llm_record_t                       rec;
    ngx_slab_pool_t                   *shpool;
    ngx_http_llm_gateway_entry_t      *e;
    ngx_http_llm_gateway_journal_t    *j;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    if (ad->sent_n == 0) {
        return NGX_ERROR;
    }

    lmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_llm_gateway_module);
    j = lmcf->journal_data;
    shpool = (ngx_slab_pool_t *) lmcf->journal->shm.addr;

    pos = ad->sent[ad->sent_head];

    rc = NGX_ERROR;

    ngx_shmtx_lock(&shpool->mutex);

    e = ngx_http_llm_gateway_entry(j, pos);

    if (e->state == NGX_HTTP_LLM_GATEWAY_SENT && e->owner == ngx_pid
        && llm_record_decode((u_char *) e
                             + sizeof(ngx_http_llm_gateway_entry_t),
                             e->len, &rec, &used)
           == 1
        && rec.request_id_len == ack->request_id_len
        && ngx_memcmp(rec.request_id, ack->request_id, rec.request_id_len)
           == 0)
    {
        e->state = NGX_HTTP_LLM_GATEWAY_ACKED;
        j->acked++;

        ngx_http_llm_gateway_reclaim(j);

        rc = NGX_OK;
    }

    ngx_shmtx_unlock(&shpool->mutex);

    if (rc == NGX_OK) {
        ad->sent_head = (ad->sent_head + 1) % NGX_HTTP_LLM_GATEWAY_WINDOW;
        ad->sent_n--;
    }

    return rc;
}


static void
ngx_http_llm_gateway_send(ngx_event_t *ev)
{
    ngx_http_llm_gateway_accountd_t  *ad;

    ad = ev->data;

    if (ad->peer.connection) {
        ngx_http_llm_gateway_flush(ad);
    }
}


static void
ngx_http_llm_gateway_write_handler(ngx_event_t *ev)
{
    ngx_connection_t  *c;

    c = ev->data;

    ngx_http_llm_gateway_flush(c->data);
}


static void
ngx_http_llm_gateway_read_handler(ngx_event_t *ev)
{
    int                               rc;
    size_t                            used, pos;
    ssize_t                           n;
    ngx_connection_t                 *c;
    ngx_http_llm_gateway_accountd_t  *ad;

    c = ev->data;
    ad = c->data;

    if (c->close) {
        ngx_http_llm_gateway_close(ad);
        return;
    }

    for ( ;; ) {
        n = c->recv(c, ad->in + ad->in_len, sizeof(ad->in) - ad->in_len);

        if (n == NGX_AGAIN) {
            if (ngx_handle_read_event(c->read, 0) != NGX_OK) {
                ngx_http_llm_gateway_close(ad);
            }

            break;
        }

        if (n == NGX_ERROR || n == 0) {
            ngx_log_error(NGX_LOG_WARN, ad->log, 0,
                          "llm gateway: accountd closed the connection");
            ngx_http_llm_gateway_close(ad);
            return;
        }

        ad->in_len += n;
        pos = 0;

        for ( ;; ) {
            rc = ngx_http_llm_gateway_frame(ad, ad->in + pos,
                                            ad->in_len - pos, &used);

            if (rc == 0) {
                break;
            }

            if (rc < 0) {
                ngx_log_error(NGX_LOG_ERR, ad->log, 0,
                              "llm gateway: unexpected frame from accountd, "
                              "reconnecting");
                ngx_http_llm_gateway_close(ad);
                return;
            }

            pos += used;
        }

        /* what is left is the start of a frame */
        ngx_memmove(ad->in, ad->in + pos, ad->in_len - pos);
        ad->in_len -= pos;
    }

    /* acknowledgements made room in the window: more can go */
    if (ad->peer.connection && ad->pos == ad->last) {
        ngx_http_llm_gateway_flush(ad);
    }
}


/*
 * One frame from accountd: an acknowledgement, or part of a key set.
 * 1 and *used when one was handled, 0 when more bytes are needed, -1 when
 * the stream is broken.
 */

static int
ngx_http_llm_gateway_frame(ngx_http_llm_gateway_accountd_t *ad, u_char *buf,
    size_t len, size_t *used)
{
    int              rc, type;
    uint32_t         count;
    uint64_t         generation;
    llm_lease_t      lease;
    llm_record_t     ack;
    llm_key_entry_t  e;

    switch (llm_key_frame_type(buf, len)) {

    case -1:
        return 0;

    case LLM_REC_ACK:
        rc = llm_record_decode(buf, len, &ack, used);

        if (rc == 1 && ngx_http_llm_gateway_ack(ad, &ack) != NGX_OK) {
            return -1;
        }

        return rc;

    case LLM_REC_LEASE:
    case LLM_REC_SHARE:
        rc = llm_lease_decode(buf, len, &lease, used);

        if (rc == 1) {
            ngx_http_llm_gateway_budget_lease((ngx_cycle_t *) ngx_cycle,
                                              &lease, ad->log);
        }

        return rc;

    case LLM_REC_KEYS_BEGIN:
    case LLM_REC_KEYS_END:
        rc = llm_key_decode_begin(buf, len, &type, &generation,
                                  &count, used);
        if (rc != 1) {
            return rc;
        }

        if (type == LLM_REC_KEYS_BEGIN) {
            rc = ngx_http_llm_gateway_keys_begin(generation, count, ad->log);

        } else {
            rc = ngx_http_llm_gateway_keys_end(generation, count, ad->log);
        }

        return rc == NGX_OK ? 1 : -1;

    case LLM_REC_KEY:
        rc = llm_key_decode_entry(buf, len, &e, used);
        if (rc != 1) {
            return rc;
        }

        return ngx_http_llm_gateway_keys_add(&e) == NGX_OK ? 1 : -1;

    default:
        return -1;
    }
}


static void
ngx_http_llm_gateway_close(ngx_http_llm_gateway_accountd_t *ad)
{
    /* a set half received is worth nothing: accountd sends it again */
    ngx_http_llm_gateway_keys_abort();

    if (ad->peer.connection) {
        ngx_close_connection(ad->peer.connection);
        ad->peer.connection = NULL;
    }

    /* what was sent and not acknowledged goes again, whole */
    ngx_http_llm_gateway_release(ad);

    ad->down = 1;

    ngx_http_llm_gateway_retry(ad);
}
