
/*
 * The worker's client of accountd: a non-blocking Unix socket connection
 * that sends the journal's records (ngx_http_llm_gateway_journal.c) and
 * leases, and receives acknowledgements, leases and key snapshots.
 *
 * The journal survives a reload (new workers send what old ones left) and
 * a crashed worker (its records are taken back).  accountd acknowledges
 * each record, in order, once PostgreSQL committed it, and only then may
 * its space be reused.  Sent twice, a record is harmless: accountd's
 * INSERT ... ON CONFLICT DO NOTHING keeps one.
 *
 * When no place is left in the journal, new requests are refused with 503
 * (llm_gateway_accountd ... full=refuse, the default) or admitted and,
 * should their record not fit, counted as lost (full=admit).
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_accountd.h"
#include "ngx_http_llm_gateway_budget.h"
#include "ngx_http_llm_gateway_journal.h"
#include "ngx_http_llm_gateway_keys.h"
#include "llm_journal.h"


/* reconnection backs off from the first to the last delay, in ms */
#define NGX_HTTP_LLM_GATEWAY_RETRY_MIN     250
#define NGX_HTTP_LLM_GATEWAY_RETRY_MAX     4000

/* how often records of dead workers are looked for, in ms */
#define NGX_HTTP_LLM_GATEWAY_REAP          1000

/* records a worker has sent and not yet seen acknowledged, at most */
#define NGX_HTTP_LLM_GATEWAY_WINDOW        4096


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
    llm_journal_window_t         window;

    /* many key frames a read when a set comes */
    u_char                       in[65536];
    size_t                       in_len;

    ngx_event_t                  reconnect;
    ngx_event_t                  reap;
    ngx_event_t                  send;      /* posted: the records written */
    ngx_msec_t                   retry;
    unsigned                     down:1;
} ngx_http_llm_gateway_accountd_t;


static void ngx_http_llm_gateway_release(ngx_http_llm_gateway_accountd_t *ad);
static void ngx_http_llm_gateway_claim(ngx_http_llm_gateway_accountd_t *ad);
static int ngx_http_llm_gateway_alive(int32_t pid, void *data);
static void ngx_http_llm_gateway_reap(ngx_event_t *ev);
static void ngx_http_llm_gateway_accountd_send_demand(
    ngx_http_llm_gateway_accountd_t *ad);
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
static void ngx_http_llm_gateway_accountd_backoff(
    ngx_http_llm_gateway_accountd_t *ad);
static void ngx_http_llm_gateway_written(void);


static ngx_http_llm_gateway_accountd_t  *ngx_http_llm_gateway_accountd_peer;


/*
 * Pending entries, oldest first, into this worker's out buffer: they are
 * its to send until acknowledged or given back.
 */

static void
ngx_http_llm_gateway_claim(ngx_http_llm_gateway_accountd_t *ad)
{
    size_t                             n;
    llm_journal_t                     *j;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_llm_gateway_module);

    j = ngx_http_llm_gateway_journal_lock(lmcf);
    n = llm_journal_claim(j, ngx_pid, &ad->window, ad->out, ad->out_size);
    ngx_http_llm_gateway_journal_unlock(lmcf);

    ad->pos = ad->out;
    ad->last = ad->out + n;
}


/* what this worker sent and accountd did not acknowledge is pending again */

static void
ngx_http_llm_gateway_release(ngx_http_llm_gateway_accountd_t *ad)
{
    llm_journal_t                     *j;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_llm_gateway_module);

    j = ngx_http_llm_gateway_journal_lock(lmcf);
    llm_journal_release(j, ngx_pid, &ad->window);
    ngx_http_llm_gateway_journal_unlock(lmcf);

    ad->pos = ad->out;
    ad->last = ad->out;
}


/* kill(pid, 0) only asks whether it lives */

static int
ngx_http_llm_gateway_alive(int32_t pid, void *data)
{
    return kill(pid, 0) == 0 || ngx_errno != NGX_ESRCH;
}


/*
 * Entries sent by a worker that is gone without giving them back (killed,
 * crashed) are pending again.
 */

static void
ngx_http_llm_gateway_reap(ngx_event_t *ev)
{
    size_t                             n;
    int32_t                            dead;
    llm_journal_t                     *j;
    ngx_http_llm_gateway_accountd_t   *ad;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    ad = ev->data;

    lmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_llm_gateway_module);

    j = ngx_http_llm_gateway_journal_lock(lmcf);
    n = llm_journal_reap(j, ngx_pid, ngx_http_llm_gateway_alive, NULL, &dead);
    ngx_http_llm_gateway_journal_unlock(lmcf);

    if (n) {
        ngx_log_error(NGX_LOG_NOTICE, ad->log, 0,
                      "llm gateway: %uz records of exited worker %P to "
                      "send again", n, (ngx_pid_t) dead);
    }

    /* also what a worker without a connection wrote: anyone may send it */
    if (ad->peer.connection) {
        ngx_http_llm_gateway_flush(ad);
        ngx_http_llm_gateway_accountd_send_demand(ad);
    }

    if (!ngx_exiting && !ngx_terminate) {
        ngx_add_timer(&ad->reap, NGX_HTTP_LLM_GATEWAY_REAP);
    }
}


ngx_int_t
ngx_http_llm_gateway_accountd_init(ngx_cycle_t *cycle)
{
    size_t                             n;
    llm_journal_t                     *j;
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
    ad->window.cap = NGX_HTTP_LLM_GATEWAY_WINDOW;
    ad->window.pos = ngx_palloc(cycle->pool,
                                ad->window.cap * sizeof(uint64_t));

    if (ad->out == NULL || ad->window.pos == NULL) {
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
    ngx_http_llm_gateway_journal_written = ngx_http_llm_gateway_written;

    /*
     * A pid is given again: entries sent by a dead worker that had this
     * one's are no reaper's (it is alive) and not in this one's window.
     */
    j = ngx_http_llm_gateway_journal_lock(lmcf);
    n = llm_journal_adopt(j, ngx_pid);
    ngx_http_llm_gateway_journal_unlock(lmcf);

    if (n) {
        ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                      "llm gateway: %uz records of an exited worker with "
                      "this pid to send again", n);
    }

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

        ngx_http_llm_gateway_accountd_backoff(ad);
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
        ngx_http_llm_gateway_accountd_backoff(ad);
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
ngx_http_llm_gateway_accountd_backoff(ngx_http_llm_gateway_accountd_t *ad)
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
ngx_http_llm_gateway_accountd_send_demand(ngx_http_llm_gateway_accountd_t *ad)
{
    ngx_uint_t    i, count;
    llm_lease_t   demand[128];

    count = ngx_http_llm_gateway_budget_demand((ngx_cycle_t *) ngx_cycle,
                                               demand,
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

    n = llm_record_lease_encode(l, ad->last, ad->out + ad->out_size - ad->last);
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


/* the records this worker sent and accountd has not acknowledged yet */

ngx_uint_t
ngx_http_llm_gateway_accountd_sent(void)
{
    ngx_http_llm_gateway_accountd_t  *ad;

    ad = ngx_http_llm_gateway_accountd_peer;

    return ad ? ad->window.n : 0;
}


/*
 * A lease of a budget asked for: after what is being sent, ahead of what
 * the journal holds.  NGX_DECLINED without a connection or room.
 */

ngx_int_t
ngx_http_llm_gateway_accountd_lease(llm_lease_t *l)
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
    int                                rc;
    llm_journal_t                     *j;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_llm_gateway_module);

    j = ngx_http_llm_gateway_journal_lock(lmcf);
    rc = llm_journal_ack(j, ngx_pid, &ad->window,
                         (u_char *) ack->request_id, ack->request_id_len);
    ngx_http_llm_gateway_journal_unlock(lmcf);

    return rc == 0 ? NGX_OK : NGX_ERROR;
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
        rc = llm_record_lease_decode(buf, len, &lease, used);

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

    ngx_http_llm_gateway_accountd_backoff(ad);
}


/*
 * A record is in the journal: it is sent once the events at hand are
 * handled, so that the records of the requests that ended meanwhile go in
 * one write.
 */

static void
ngx_http_llm_gateway_written(void)
{
    ngx_http_llm_gateway_accountd_t  *ad;

    ad = ngx_http_llm_gateway_accountd_peer;

    if (ad && ad->peer.connection && !ad->send.posted) {
        ngx_post_event(&ad->send, &ngx_posted_events);
    }
}


/* once a second, under the zone's lock: this worker and accountd */

void
ngx_http_llm_gateway_accountd_worker(ngx_http_llm_gateway_zone_t *zone,
    int64_t now)
{
    ngx_http_llm_gateway_worker_t  *w;

    w = &zone->sh->workers[ngx_process_slot % NGX_HTTP_LLM_GATEWAY_WORKERS];

    w->pid = ngx_pid;
    w->connected = ngx_http_llm_gateway_accountd_up();
    w->sent = ngx_http_llm_gateway_accountd_sent();
    w->seen = now;
}
