
/*
 * The nginx workers' connections, one a worker: the state machine of
 * each.  Frames are read into a fixed buffer and decoded with the shared
 * codec; a settle record goes into the queue with a reference to its
 * connection, and its ACK is written back on that connection once the
 * database has committed it.  A lease request goes into the queue's ring
 * of leases the same way, and its answer comes back on its connection
 * after the ACKs before it.  A connection that sends a malformed frame is
 * closed: the byte stream cannot be resynchronised.
 *
 * A closed connection stays allocated while records that came from it are
 * still queued, and is freed at the end of the loop iteration, never
 * while an epoll event may still point to it.  Whoever waits for a
 * connection to close (the listener, out of descriptors) is called
 * through client_closed, set at init.
 *
 * The other way, the key set goes out on every connection as soon as it
 * is accepted and again after each rewrite.  A set once started is sent
 * to its END before anything else (the worker applies only whole sets),
 * then the ACKs that waited, then the newest set if there is a newer
 * one: sets in between are skipped.  The set's bytes are shared, see
 * keyset.c; ACK frames and the set's frames meet only at frame
 * boundaries, so the ACK frame that is being sent is tracked (out_frame).
 *
 * A failed send() ends the sending only: what the client sent before it
 * went away is still read to its end and written to the database.
 */


#define _GNU_SOURCE

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "accountd.h"
#include "client.h"
#include "event.h"
#include "keyset.h"
#include "log.h"
#include "queue.h"
#include "stats.h"


#define CLIENT_IN_SIZE            16384
/* ACKs a client has not read; beyond this it is not read from either */
#define CLIENT_OUT_HIGH           (1024 * 1024)
#define CLIENT_OUT_KEEP           65536

#define CLIENT_WARN_EVERY         10000
#define CLIENT_WARN_PAUSE         1000


struct acd_client_s {
    acd_event_t      ev;
    uint64_t         id;
    pid_t            pid;
    uid_t            uid;
    size_t           pending;

    uint8_t         *out;
    size_t           out_pos;
    size_t           out_len;
    size_t           out_cap;
    /* the first ACK frame boundary at or after out_pos */
    size_t           out_frame;

    acd_keyset_t    *set;              /* the set being sent */
    size_t           set_pos;
    uint64_t         set_gen;          /* the last set started */

    unsigned         eof:1;
    unsigned         closed:1;
    unsigned         dirty:1;
    unsigned         acks_first:1;
    unsigned         write_failed:1;

    acd_client_t    *next;
    acd_client_t    *prev;
    acd_client_t    *dirty_next;
    acd_client_t    *zombie_next;

    size_t           in_len;
    uint8_t          in[CLIENT_IN_SIZE];
};


static void client_pause(void);
static void client_resume(void);
static void client_handler(acd_event_t *ev, uint32_t events);
static void client_read(acd_client_t *c);
static void client_process(acd_client_t *c);
static int client_queue_lease(acd_client_t *c, const llm_lease_t *req);
static void client_write(acd_client_t *c);
static int client_set_waiting(acd_client_t *c);
static void client_write_failed(acd_client_t *c);
static void client_update(acd_client_t *c);
static void client_dirty(acd_client_t *c);
static int client_room(acd_client_t *c, size_t need);
static void client_close(acd_client_t *c);


void  (*client_closed)(void);

static int            client_paused;
static int64_t        client_paused_at;
static int64_t        client_warned_at = -CLIENT_WARN_EVERY;
static unsigned       client_n;

static acd_client_t  *clients;
static acd_client_t  *dirty;
static acd_client_t  *zombies;


/*
 * A connection accepted, its peer checked: the newest key set goes out at
 * once (a worker that read a newer snapshot file ignores it: generations
 * tell).
 */

int
client_new(int fd, uint64_t id, pid_t pid, uid_t uid)
{
    acd_client_t  *c;

    c = calloc(1, sizeof(acd_client_t));
    if (c == NULL) {
        log_error("out of memory for a client");
        close(fd);
        return -1;
    }

    c->id = id;
    c->pid = pid;
    c->uid = uid;

    c->ev.fd = fd;
    c->ev.handler = client_handler;
    c->ev.data = c;

    c->next = clients;
    if (clients) {
        clients->prev = c;
    }
    clients = c;
    client_n++;

    client_update(c);

    if (keyset_newest() != NULL) {
        client_dirty(c);
    }

    return 0;
}


/* shutdown: no new records; ACKs still go out */

void
client_shutdown(void)
{
    acd_client_t  *c;

    for (c = clients; c; c = c->next) {
        client_update(c);
    }
}


static void
client_pause(void)
{
    acd_client_t  *c;

    if (client_paused) {
        return;
    }

    client_paused = 1;
    client_paused_at = event_now();

    /* under a sustained overload this flaps: one warning a while is enough */

    if (client_paused_at - client_warned_at >= CLIENT_WARN_EVERY) {
        client_warned_at = client_paused_at;
        log_warning("queue full (%zu records), not reading from clients",
                    queue_len());

    } else {
        log_debug("queue full (%zu records), not reading from clients",
                  queue_len());
    }

    for (c = clients; c; c = c->next) {
        client_update(c);
    }
}


static void
client_resume(void)
{
    acd_client_t  *c, *next;

    if (!client_paused || !queue_has_room()) {
        return;
    }

    client_paused = 0;

    if (event_now() - client_paused_at >= CLIENT_WARN_PAUSE) {
        log_info("queue down to %zu records, reading from clients again",
                 queue_len());

    } else {
        log_debug("queue down to %zu records, reading from clients again",
                  queue_len());
    }

    /* frames already buffered are taken first: no event will say so */

    for (c = clients; c; c = next) {
        next = c->next;

        client_process(c);

        if (!c->closed) {
            client_update(c);
        }
    }
}


void
client_ack(acd_client_t *c, const llm_record_t *rec)
{
    size_t        n;
    llm_record_t  ack;

    if (client_room(c, LLM_RECORD_MAX_FRAME) != 0) {
        return;
    }

    memset(&ack, 0, sizeof(llm_record_t));
    ack.type = LLM_REC_ACK;
    memcpy(ack.request_id, rec->request_id, rec->request_id_len);
    ack.request_id_len = rec->request_id_len;

    n = llm_record_encode(&ack, c->out + c->out_len, c->out_cap - c->out_len);
    c->out_len += n;

    client_dirty(c);
}


/* accountd's answer to a lease asked for, after the ACKs before it */

void
client_lease(acd_client_t *c, const llm_lease_t *l)
{
    if (client_room(c, LLM_LEASE_MAX_FRAME) != 0) {
        return;
    }

    c->out_len += llm_record_lease_encode(l, c->out + c->out_len,
                                          c->out_cap - c->out_len);

    client_dirty(c);
}


/* room for a frame at the end of the client's out buffer */

static int
client_room(acd_client_t *c, size_t need)
{
    size_t    cap;
    uint8_t  *p;

    if (c->closed || c->write_failed) {
        return -1;
    }

    if (c->out_cap - c->out_len < need) {

        if (c->out_pos) {
            memmove(c->out, c->out + c->out_pos, c->out_len - c->out_pos);
            c->out_len -= c->out_pos;
            c->out_frame -= c->out_pos;
            c->out_pos = 0;
        }

        if (c->out_cap - c->out_len < need) {
            cap = c->out_cap ? c->out_cap * 2 : 4096;

            p = realloc(c->out, cap);
            if (p == NULL) {
                log_error("out of memory for the ACKs of client #%llu, "
                          "closing it", (unsigned long long) c->id);
                client_close(c);
                return -1;
            }

            c->out = p;
            c->out_cap = cap;
        }
    }

    return 0;
}


/* a record from c has left the queue */

void
client_release(acd_client_t *c)
{
    c->pending--;

    if (c->pending == 0) {

        if (c->closed) {
            c->zombie_next = zombies;
            zombies = c;

        } else if (c->eof && c->out_len == c->out_pos) {
            client_close(c);
        }
    }
}


/* once an iteration: write the ACKs of this iteration in one go */

void
client_flush(void)
{
    acd_client_t  *c, *next;

    for (c = dirty; c; c = next) {
        next = c->dirty_next;
        c->dirty = 0;
        c->dirty_next = NULL;

        if (!c->closed) {
            client_write(c);
        }
    }

    dirty = NULL;

    if (client_paused) {
        client_resume();
    }
}


/* once an iteration, after every event was handled */

void
client_reap(void)
{
    acd_client_t  *c;

    while (zombies) {
        c = zombies;
        zombies = c->zombie_next;
        free(c->out);
        free(c);
    }
}


/* a new key set: every connection not in the middle of one starts it */

void
client_keyset(void)
{
    acd_client_t  *c;

    for (c = clients; c; c = c->next) {
        if (c->set == NULL && !c->write_failed) {
            client_dirty(c);
        }
    }
}


/* the nginx workers connected */

unsigned
client_count(void)
{
    return client_n;
}


/* every ACK has been written */

int
client_idle(void)
{
    acd_client_t  *c;

    for (c = clients; c; c = c->next) {
        if (c->out_len > c->out_pos) {
            return 0;
        }
    }

    return 1;
}


/*
 * allow_users read again (SIGHUP): a connection of a user no longer in it
 * (allowed() says) is closed, as a new one would be refused; what it sent
 * and was not acknowledged stays in the gateway's journal.
 */

void
client_recheck(int (*allowed)(uid_t uid))
{
    acd_client_t  *c, *next;

    for (c = clients; c; c = next) {
        next = c->next;

        if (c->closed || allowed(c->uid)) {
            continue;
        }

        log_warning("client #%llu closed: uid %u (pid %d) is no longer in "
                    "\"allow_users\"", (unsigned long long) c->id,
                    (unsigned) c->uid, (int) c->pid);

        acd_stats.peers_refused++;
        client_close(c);
    }
}


static void
client_handler(acd_event_t *ev, uint32_t events)
{
    acd_client_t  *c;

    c = ev->data;

    if (c->closed) {
        return;
    }

    /* frames sent just before a hang-up are still read */

    if (events & (EPOLLIN | EPOLLHUP)) {
        client_read(c);

        if (c->closed) {
            return;
        }
    }

    if (events & EPOLLOUT) {
        client_write(c);

        if (c->closed) {
            return;
        }
    }

    if ((events & EPOLLERR) && !(events & EPOLLIN)) {
        log_info("client #%llu (pid %d): connection error, closing",
                 (unsigned long long) c->id, (int) c->pid);
        client_close(c);
    }
}
static void
client_read(acd_client_t *c)
{
    ssize_t  n;

    if (c->eof || client_paused || acd_shutting_down
        || c->in_len == CLIENT_IN_SIZE)
    {
        return;
    }

    n = read(c->ev.fd, c->in + c->in_len, CLIENT_IN_SIZE - c->in_len);

    if (n == -1) {
        if (errno == EAGAIN || errno == EINTR) {
            return;
        }

        log_info("client #%llu (pid %d): read() failed: %s, closing",
                 (unsigned long long) c->id, (int) c->pid, strerror(errno));
        client_close(c);
        return;
    }

    if (n == 0) {
        c->eof = 1;

    } else {
        c->in_len += (size_t) n;
    }

    client_process(c);

    if (c->closed) {
        return;
    }

    if (c->eof) {
        if (c->in_len) {
            log_warning("client #%llu (pid %d) closed the connection "
                        "inside a frame (%zu bytes)",
                        (unsigned long long) c->id, (int) c->pid, c->in_len);
        }

        log_debug("client #%llu (pid %d) closed the connection, "
                  "%zu records pending", (unsigned long long) c->id,
                  (int) c->pid, c->pending);

        if (c->pending == 0 && c->out_len == c->out_pos) {
            client_close(c);
            return;
        }
    }

    client_update(c);
}
static void
client_process(acd_client_t *c)
{
    int            rc;
    char           id[LLM_RECORD_ID_MAX + 1];
    size_t         pos, used;
    acd_item_t    *item;
    llm_lease_t    lease;
    llm_record_t   rec;

    pos = 0;

    while (pos < c->in_len) {

        if (queue_full()) {
            client_pause();
            break;
        }

        if (c->in_len - pos >= 6
            && (c->in[pos + 5] == LLM_REC_LEASE_REQ
                || c->in[pos + 5] == LLM_REC_SHARE_REQ
                || c->in[pos + 5] == LLM_REC_LEASE_RETURN))
        {
            rc = llm_record_lease_decode(c->in + pos, c->in_len - pos, &lease,
                                         &used);
            if (rc == 0) {
                break;
            }

            if (rc == 1
                && lease.type != LLM_REC_LEASE
                && lease.type != LLM_REC_SHARE
                && client_queue_lease(c, &lease) == 0)
            {
                c->pending++;
                pos += used;
                continue;
            }

            if (rc == 1) {
                /* no room to ask the database: no lease, ask again */
                pos += used;
                continue;
            }

            log_error("client #%llu (pid %d) sent a malformed lease frame, "
                      "closing the connection", (unsigned long long) c->id,
                      (int) c->pid);
            client_close(c);
            return;
        }

        rc = llm_record_decode(c->in + pos, c->in_len - pos, &rec, &used);

        if (rc == 0) {
            break;
        }

        if (rc == -1) {
            log_error("client #%llu (pid %d) sent a malformed frame, "
                      "closing the connection", (unsigned long long) c->id,
                      (int) c->pid);
            client_close(c);
            return;
        }

        if (rec.type != LLM_REC_SETTLE) {
            log_error("client #%llu (pid %d) sent a frame of type %d, "
                      "closing the connection", (unsigned long long) c->id,
                      (int) c->pid, rec.type);
            client_close(c);
            return;
        }

        if (rec.request_id_len == 0) {
            log_error("client #%llu (pid %d) sent a record without "
                      "request_id, closing the connection",
                      (unsigned long long) c->id, (int) c->pid);
            client_close(c);
            return;
        }

        item = queue_push();
        item->rec = rec;
        item->client = c;
        c->pending++;
        acd_stats.records_received++;

        pos += used;

        if (acd_verbose >= 3) {
            log_clean(id, sizeof(id), rec.request_id, rec.request_id_len);
            log_trace("client #%llu: record \"%s\", tenant %lld, "
                      "queued %zu", (unsigned long long) c->id, id,
                      (long long) rec.tenant_id, queue_len());
        }
    }

    if (pos) {
        memmove(c->in, c->in + pos, c->in_len - pos);
        c->in_len -= pos;
    }
}
/* a lease to ask the database for, in order, after the ACKs before it */

static int
client_queue_lease(acd_client_t *c, const llm_lease_t *req)
{
    acd_lease_item_t  *l;

    l = queue_lease_push();

    if (l == NULL) {
        log_warning("%d leases waiting for the database: one more refused",
                    QUEUE_LEASES_MAX);
        return -1;
    }

    l->client = c;
    l->req = *req;

    return 0;
}
static void
client_write(acd_client_t *c)
{
    size_t          len;
    ssize_t         n;
    const uint8_t  *p;
    acd_keyset_t   *ks;

    if (c->write_failed) {
        return;
    }

    for ( ;; ) {

        if (c->set == NULL && client_set_waiting(c)
            && c->out_pos == c->out_frame
            && !(c->acks_first && c->out_pos < c->out_len))
        {
            ks = keyset_newest();
            keyset_ref(ks);
            c->set = ks;
            c->set_pos = 0;
            c->set_gen = ks->generation;
            c->acks_first = 0;
        }

        if (c->set != NULL) {
            p = c->set->data + c->set_pos;
            len = c->set->len - c->set_pos;

        } else if (c->out_pos < c->out_len) {
            p = c->out + c->out_pos;

            /* a set waits: only to the end of this ACK frame */
            len = (client_set_waiting(c) && !c->acks_first ? c->out_frame
                                                          : c->out_len)
                  - c->out_pos;

        } else {
            break;
        }

        n = send(c->ev.fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n == -1) {
            if (errno == EAGAIN) {
                break;
            }

            if (errno == EINTR) {
                continue;
            }

            client_write_failed(c);
            return;
        }

        if (c->set == NULL) {
            c->out_pos += (size_t) n;
            c->acks_first = 0;

            while (c->out_frame < c->out_pos) {
                p = c->out + c->out_frame;
                c->out_frame += 4 + ((size_t) p[0] << 24 | (size_t) p[1] << 16
                                     | (size_t) p[2] << 8 | p[3]);
            }

            continue;
        }

        c->set_pos += (size_t) n;

        if (c->set_pos == c->set->len) {
            log_debug("client #%llu (pid %d): key set %llu sent, %u keys",
                      (unsigned long long) c->id, (int) c->pid,
                      (unsigned long long) c->set->generation,
                      (unsigned) c->set->count);

            keyset_unref(c->set);
            c->set = NULL;
            acd_stats.keysets_pushed++;

            /* the ACKs that waited for this set go before the next one */
            c->acks_first = 1;
        }
    }

    if (c->out_pos == c->out_len) {
        c->out_pos = 0;
        c->out_len = 0;
        c->out_frame = 0;

        /* a burst of ACKs once is no reason to keep a large buffer */
        if (c->out_cap > CLIENT_OUT_KEEP) {
            free(c->out);
            c->out = NULL;
            c->out_cap = 0;
        }

        if (c->eof && c->pending == 0) {
            client_close(c);
            return;
        }
    }

    client_update(c);
}
/*
 * Nothing more is sent, and the connection is closed once what the client
 * sent has been read: a worker that sent records and closed at once must
 * not lose them because its key set could not be sent.
 */

static void
client_write_failed(acd_client_t *c)
{
    log_info("client #%llu (pid %d): send() failed: %s, closing once "
             "what it sent is read", (unsigned long long) c->id,
             (int) c->pid, strerror(errno));

    c->write_failed = 1;

    if (c->set != NULL) {
        keyset_unref(c->set);
        c->set = NULL;
    }

    if (c->out_len > c->out_pos) {
        log_info("client #%llu (pid %d): %zu bytes of ACKs not sent",
                 (unsigned long long) c->id, (int) c->pid,
                 c->out_len - c->out_pos);
    }

    c->out_pos = 0;
    c->out_len = 0;
    c->out_frame = 0;

    if (c->eof && c->pending == 0) {
        client_close(c);
        return;
    }

    client_update(c);
}
/* a set newer than the last one started is there */

static int
client_set_waiting(acd_client_t *c)
{
    acd_keyset_t  *ks;

    ks = keyset_newest();

    return ks != NULL && ks->generation > c->set_gen;
}
static void
client_update(acd_client_t *c)
{
    uint32_t  events;

    events = 0;

    if (!c->eof && !client_paused && !acd_shutting_down
        && c->out_len - c->out_pos < CLIENT_OUT_HIGH
        && c->in_len < CLIENT_IN_SIZE)
    {
        events |= EPOLLIN;
    }

    if (!c->write_failed
        && (c->out_len > c->out_pos || c->set != NULL
            || client_set_waiting(c)))
    {
        events |= EPOLLOUT;
    }

    if (event_set(&c->ev, events) != 0) {
        client_close(c);
    }
}
/* written at the end of the iteration, by client_flush() */

static void
client_dirty(acd_client_t *c)
{
    if (!c->dirty) {
        c->dirty = 1;
        c->dirty_next = dirty;
        dirty = c;
    }
}
static void
client_close(acd_client_t *c)
{
    if (c->closed) {
        return;
    }

    event_del(&c->ev);
    close(c->ev.fd);
    c->ev.fd = -1;
    c->closed = 1;

    if (c->prev) {
        c->prev->next = c->next;

    } else {
        clients = c->next;
    }

    if (c->next) {
        c->next->prev = c->prev;
    }

    c->next = NULL;
    c->prev = NULL;
    client_n--;

    if (c->out_len > c->out_pos) {
        log_info("client #%llu (pid %d) closed with %zu bytes of ACKs "
                 "unsent", (unsigned long long) c->id, (int) c->pid,
                 c->out_len - c->out_pos);
    }

    if (c->set != NULL) {
        log_debug("client #%llu (pid %d) closed while key set %llu was "
                  "being sent", (unsigned long long) c->id, (int) c->pid,
                  (unsigned long long) c->set->generation);

        keyset_unref(c->set);
        c->set = NULL;
    }

    if (c->pending) {
        log_debug("client #%llu (pid %d) closed, %zu of its records are "
                  "still to be written", (unsigned long long) c->id,
                  (int) c->pid, c->pending);

    } else {
        c->zombie_next = zombies;
        zombies = c;
    }

    if (client_closed != NULL) {
        client_closed();
    }
}
