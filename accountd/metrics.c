
/*
 * accountd's own metrics: an HTTP listener (metrics_listen) that answers
 * GET /metrics with the counters of stats.c and a few gauges read from the
 * subsystems, in the Prometheus text format, version 0.0.4.
 *
 * The listener is one more socket of the event loop, and nothing in it
 * waits: a connection reads its request into a fixed buffer, gets its
 * response built at once from the counters, sends it as fast as the client
 * takes it and is closed.  What a client can hold is bounded: the request
 * (METRICS_REQUEST_MAX bytes), the connections (METRICS_CONN_MAX; one more
 * is told 503 and closed), their time (METRICS_TIMEOUT from accept to
 * close) and the work of one event (METRICS_ACCEPT_MAX accepts), so that a
 * slow, silent or flooding client never delays the records.
 *
 * Only a connection's own handler or the timer closes it, never while
 * another event of the same epoll_wait() may point to it: it is freed at
 * once.
 */


#define _GNU_SOURCE

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "accountd.h"
#include "client.h"
#include "conf.h"
#include "dbconn.h"
#include "event.h"
#include "log.h"
#include "metrics.h"
#include "queue.h"
#include "stats.h"


#define METRICS_CONN_MAX          8
#define METRICS_REQUEST_MAX       4096
#define METRICS_BODY_MAX          16384
#define METRICS_HEADER_MAX        256
#define METRICS_TIMEOUT           5000
#define METRICS_LINGER            1000
#define METRICS_ACCEPT_MAX        16
#define METRICS_RETRY             1000
#define METRICS_WARN_EVERY        10000

#define METRICS_PREFIX            "llmgw_accountd_"


typedef enum {
    METRICS_READ = 0,
    METRICS_WRITE,
    METRICS_LINGER_READ
} metrics_state_e;


typedef struct metrics_conn_s  metrics_conn_t;

struct metrics_conn_s {
    acd_event_t       ev;
    metrics_state_e   state;
    int64_t           deadline;

    char             *out;
    size_t            out_pos;
    size_t            out_len;

    metrics_conn_t   *next;
    metrics_conn_t   *prev;

    size_t            in_len;
    char              in[METRICS_REQUEST_MAX];
};


typedef struct {
    char     *p;
    size_t    len;
    size_t    cap;
    unsigned  overflow:1;
} metrics_buf_t;


static void metrics_accept(acd_event_t *ev, uint32_t events);
static void metrics_handler(acd_event_t *ev, uint32_t events);
static void metrics_read(metrics_conn_t *c);
static void metrics_request(metrics_conn_t *c);
static void metrics_respond(metrics_conn_t *c, int status, int head);
static void metrics_write(metrics_conn_t *c);
static void metrics_linger(metrics_conn_t *c);
static void metrics_conn_close(metrics_conn_t *c);
static void metrics_body(metrics_buf_t *b);
static void metrics_head(metrics_buf_t *b, const char *name,
    const char *type, const char *help);
static void metrics_value(metrics_buf_t *b, const char *name,
    const char *type, const char *help, uint64_t v);
static void metrics_printf(metrics_buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));


static const char  metrics_busy[] =
    "HTTP/1.1 503 Service Unavailable\r\n"
    "Content-Type: text/plain; charset=utf-8\r\n"
    "Content-Length: 21\r\n"
    "Connection: close\r\n"
    "\r\n"
    "too many connections\n";


static acd_event_t      metrics_ev = { .fd = -1 };
static metrics_conn_t  *metrics_conns;
static unsigned         metrics_nconns;
static int64_t          metrics_retry_at;
static int64_t          metrics_warned_at = -METRICS_WARN_EVERY;
static double           metrics_start;
static char             metrics_body_buf[METRICS_BODY_MAX];


int
metrics_init(void)
{
    int                       fd, on;
    socklen_t                 len;
    struct timespec           ts;
    struct sockaddr_storage   sa;

    clock_gettime(CLOCK_REALTIME, &ts);
    metrics_start = (double) ts.tv_sec + ts.tv_nsec / 1e9;

    if (acd_cf.metrics_listen[0] == '\0') {
        return 0;
    }

    if (conf_parse_addr(acd_cf.metrics_listen, &sa, &len) != 0) {
        log_error("invalid \"metrics_listen\" \"%s\"", acd_cf.metrics_listen);
        return -1;
    }

    fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        log_error("socket() failed: %s", strerror(errno));
        return -1;
    }

    /* a restart must not wait for the connections the last one closed */
    on = 1;

    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) == -1) {
        log_error("setsockopt(SO_REUSEADDR) failed: %s", strerror(errno));
        goto failed;
    }

    if (bind(fd, (struct sockaddr *) &sa, len) == -1) {
        log_error("bind() to \"%s\" failed: %s", acd_cf.metrics_listen,
                  strerror(errno));
        goto failed;
    }

    if (listen(fd, 64) == -1) {
        log_error("listen() on \"%s\" failed: %s", acd_cf.metrics_listen,
                  strerror(errno));
        goto failed;
    }

    metrics_ev.fd = fd;
    metrics_ev.handler = metrics_accept;

    if (event_set(&metrics_ev, EPOLLIN) != 0) {
        metrics_ev.fd = -1;
        goto failed;
    }

    log_info("metrics on http://%s/metrics", acd_cf.metrics_listen);

    return 0;

failed:

    close(fd);

    return -1;
}


void
metrics_close(void)
{
    if (metrics_ev.fd != -1) {
        event_del(&metrics_ev);
        close(metrics_ev.fd);
        metrics_ev.fd = -1;
    }

    while (metrics_conns) {
        metrics_conn_close(metrics_conns);
    }
}


int64_t
metrics_timer_at(void)
{
    int64_t          at;
    metrics_conn_t  *c;

    at = metrics_retry_at;

    for (c = metrics_conns; c; c = c->next) {
        if (at == 0 || c->deadline < at) {
            at = c->deadline;
        }
    }

    return at;
}


void
metrics_timer(int64_t now)
{
    metrics_conn_t  *c, *next;

    if (metrics_retry_at && now >= metrics_retry_at) {
        metrics_retry_at = 0;

        if (metrics_ev.fd != -1) {
            event_set(&metrics_ev, EPOLLIN);
        }
    }

    for (c = metrics_conns; c; c = next) {
        next = c->next;

        if (now >= c->deadline) {
            if (c->state != METRICS_LINGER_READ) {
                log_debug("metrics: a client timed out, closing");
            }

            metrics_conn_close(c);
        }
    }
}


static void
metrics_accept(acd_event_t *ev, uint32_t events)
{
    int              i, fd;
    int64_t          now;
    metrics_conn_t  *c;

    /* the rest waits for the next iteration: the records go first */

    for (i = 0; i < METRICS_ACCEPT_MAX; i++) {
        fd = accept4(ev->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd == -1) {
            if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) {
                return;
            }

            /* not accepting for a while, or epoll would spin */
            log_error("metrics: accept() failed: %s, not accepting for "
                      "%d ms", strerror(errno), METRICS_RETRY);
            event_set(ev, 0);
            metrics_retry_at = event_now() + METRICS_RETRY;
            return;
        }

        if (metrics_nconns == METRICS_CONN_MAX) {
            now = event_now();

            if (now - metrics_warned_at >= METRICS_WARN_EVERY) {
                metrics_warned_at = now;
                log_warning("metrics: %d connections open, refusing more",
                            METRICS_CONN_MAX);
            }

            (void) send(fd, metrics_busy, sizeof(metrics_busy) - 1,
                        MSG_NOSIGNAL | MSG_DONTWAIT);
            close(fd);
            continue;
        }

        c = calloc(1, sizeof(metrics_conn_t));
        if (c == NULL) {
            log_error("metrics: out of memory for a connection");
            close(fd);
            return;
        }

        c->ev.fd = fd;
        c->ev.handler = metrics_handler;
        c->ev.data = c;
        c->state = METRICS_READ;
        c->deadline = event_now() + METRICS_TIMEOUT;

        c->next = metrics_conns;
        if (metrics_conns) {
            metrics_conns->prev = c;
        }
        metrics_conns = c;
        metrics_nconns++;

        if (event_set(&c->ev, EPOLLIN) != 0) {
            metrics_conn_close(c);
        }
    }
}


static void
metrics_handler(acd_event_t *ev, uint32_t events)
{
    metrics_conn_t  *c;

    c = ev->data;

    switch (c->state) {

    case METRICS_READ:
        metrics_read(c);
        return;

    case METRICS_WRITE:
        metrics_write(c);
        return;

    case METRICS_LINGER_READ:
        metrics_linger(c);
        return;
    }
}


static void
metrics_read(metrics_conn_t *c)
{
    ssize_t  n;

    n = recv(c->ev.fd, c->in + c->in_len, METRICS_REQUEST_MAX - c->in_len,
             0);

    if (n == -1) {
        if (errno == EAGAIN || errno == EINTR) {
            return;
        }

        metrics_conn_close(c);
        return;
    }

    if (n == 0) {
        /* gone before asking */
        metrics_conn_close(c);
        return;
    }

    c->in_len += (size_t) n;

    if (memmem(c->in, c->in_len, "\r\n\r\n", 4) != NULL
        || memmem(c->in, c->in_len, "\n\n", 2) != NULL)
    {
        metrics_request(c);
        return;
    }

    if (c->in_len == METRICS_REQUEST_MAX) {
        metrics_respond(c, 431, 0);
    }
}


/* "GET /metrics HTTP/1.1": the request line is all that matters */

static void
metrics_request(metrics_conn_t *c)
{
    int          head;
    char        *p, *end, *method, *target, *version;
    size_t       mlen, tlen;

    p = c->in;
    end = memchr(p, '\n', c->in_len);

    if (end > p && end[-1] == '\r') {
        end--;
    }

    method = p;
    p = memchr(p, ' ', end - p);

    if (p == NULL || p == method) {
        metrics_respond(c, 400, 0);
        return;
    }

    mlen = p - method;
    target = ++p;
    p = memchr(p, ' ', end - p);

    if (p == NULL || p == target) {
        metrics_respond(c, 400, 0);
        return;
    }

    tlen = p - target;
    version = p + 1;

    if (end - version != 8 || memcmp(version, "HTTP/1.", 7) != 0
        || version[7] < '0' || version[7] > '9')
    {
        metrics_respond(c, 400, 0);
        return;
    }

    head = (mlen == 4 && memcmp(method, "HEAD", 4) == 0);

    if (!head && !(mlen == 3 && memcmp(method, "GET", 3) == 0)) {
        metrics_respond(c, 405, 0);
        return;
    }

    p = memchr(target, '?', tlen);

    if (p != NULL) {
        tlen = p - target;
    }

    if (tlen != 8 || memcmp(target, "/metrics", 8) != 0) {
        metrics_respond(c, 404, head);
        return;
    }

    metrics_respond(c, 200, head);
}


static void
metrics_respond(metrics_conn_t *c, int status, int head)
{
    const char     *reason, *type, *extra;
    metrics_buf_t   body, h;

    body.p = metrics_body_buf;
    body.len = 0;
    body.cap = sizeof(metrics_body_buf);
    body.overflow = 0;

    type = "text/plain; charset=utf-8";
    extra = "";

    switch (status) {

    case 200:
        reason = "OK";
        type = "text/plain; version=0.0.4; charset=utf-8";
        metrics_body(&body);

        if (body.overflow) {
            log_error("metrics: the response is larger than %d bytes",
                      METRICS_BODY_MAX);
            status = 500;
            reason = "Internal Server Error";
            type = "text/plain; charset=utf-8";
            body.len = 0;
            body.overflow = 0;
            metrics_printf(&body, "response too large\n");
        }

        break;

    case 404:
        reason = "Not Found";
        metrics_printf(&body, "not found: only /metrics is here\n");
        break;

    case 405:
        reason = "Method Not Allowed";
        extra = "Allow: GET, HEAD\r\n";
        metrics_printf(&body, "method not allowed\n");
        break;

    case 431:
        reason = "Request Header Fields Too Large";
        metrics_printf(&body, "request too large\n");
        break;

    default:
        status = 400;
        reason = "Bad Request";
        metrics_printf(&body, "bad request\n");
        break;
    }

    c->out = malloc(METRICS_HEADER_MAX + body.len);
    if (c->out == NULL) {
        log_error("metrics: out of memory for a response");
        metrics_conn_close(c);
        return;
    }

    h.p = c->out;
    h.len = 0;
    h.cap = METRICS_HEADER_MAX;
    h.overflow = 0;

    metrics_printf(&h, "HTTP/1.1 %d %s\r\n"
                   "Content-Type: %s\r\n"
                   "Content-Length: %zu\r\n"
                   "%s"
                   "Connection: close\r\n"
                   "\r\n", status, reason, type, body.len, extra);

    if (h.overflow) {
        metrics_conn_close(c);
        return;
    }

    if (!head) {
        memcpy(c->out + h.len, body.p, body.len);
        h.len += body.len;
    }

    c->out_pos = 0;
    c->out_len = h.len;
    c->state = METRICS_WRITE;

    metrics_write(c);
}


static void
metrics_write(metrics_conn_t *c)
{
    ssize_t  n;
    int64_t  at;

    while (c->out_pos < c->out_len) {
        n = send(c->ev.fd, c->out + c->out_pos, c->out_len - c->out_pos,
                 MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n == -1) {
            if (errno == EINTR) {
                continue;
            }

            if (errno == EAGAIN && event_set(&c->ev, EPOLLOUT) == 0) {
                return;
            }

            metrics_conn_close(c);
            return;
        }

        c->out_pos += (size_t) n;
    }

    free(c->out);
    c->out = NULL;

    /*
     * Closed at once with bytes of the client's unread, the connection
     * would be reset, and the response with it: the client's end is read
     * first, for a while.
     */

    if (shutdown(c->ev.fd, SHUT_WR) == -1) {
        metrics_conn_close(c);
        return;
    }

    c->state = METRICS_LINGER_READ;

    at = event_now() + METRICS_LINGER;

    if (c->deadline > at) {
        c->deadline = at;
    }

    if (event_set(&c->ev, EPOLLIN) != 0) {
        metrics_conn_close(c);
        return;
    }

    metrics_linger(c);
}


static void
metrics_linger(metrics_conn_t *c)
{
    int      i;
    ssize_t  n;

    for (i = 0; i < 4; i++) {
        n = recv(c->ev.fd, c->in, sizeof(c->in), 0);

        if (n > 0) {
            continue;
        }

        if (n == -1 && (errno == EAGAIN || errno == EINTR)) {
            return;
        }

        break;
    }

    if (i == 4) {
        return;
    }

    metrics_conn_close(c);
}


static void
metrics_conn_close(metrics_conn_t *c)
{
    event_del(&c->ev);
    close(c->ev.fd);

    if (c->prev) {
        c->prev->next = c->next;

    } else {
        metrics_conns = c->next;
    }

    if (c->next) {
        c->next->prev = c->prev;
    }

    metrics_nconns--;

    free(c->out);
    free(c);
}


/*
 * Every name is fixed and no label takes a value from a request or a
 * tenant: what a scrape returns has the same lines every time.
 */

static void
metrics_body(metrics_buf_t *b)
{
    int        i;
    uint64_t   cum;

    metrics_value(b, "records_received_total", "counter",
                  "Settle records read from the nginx workers.",
                  acd_stats.records_received);

    metrics_value(b, "records_committed_total", "counter",
                  "Settle records in llm.usage once their batch committed, "
                  "written or found there already as a replay.",
                  acd_stats.records_committed);

    metrics_value(b, "records_rejected_total", "counter",
                  "Settle records refused into llm.usage_rejected.",
                  acd_stats.records_rejected);

    metrics_value(b, "records_dropped_total", "counter",
                  "Settle records refused by llm.usage_rejected too, "
                  "only logged.", acd_stats.records_dropped);

    metrics_value(b, "queue_records", "gauge",
                  "Settle records received and not yet committed.",
                  (uint64_t) queue_len());

    metrics_value(b, "batches_total", "counter",
                  "Batch statements committed.", acd_stats.batches);

    metrics_head(b, "batch_records", "histogram",
                 "Settle records in each committed batch.");

    for (cum = 0, i = 0; i < STATS_BATCH_BUCKETS; i++) {
        cum += acd_stats.batch_bucket[i];
        metrics_printf(b, METRICS_PREFIX "batch_records_bucket{le=\"%lu\"} "
                       "%llu\n", 1UL << i, (unsigned long long) cum);
    }

    metrics_printf(b, METRICS_PREFIX "batch_records_bucket{le=\"+Inf\"} %llu\n"
                   METRICS_PREFIX "batch_records_sum %llu\n"
                   METRICS_PREFIX "batch_records_count %llu\n",
                   (unsigned long long) acd_stats.batches,
                   (unsigned long long) acd_stats.batch_sum,
                   (unsigned long long) acd_stats.batches);

    metrics_head(b, "db_roundtrip_seconds", "histogram",
                 "Seconds from a batch statement sent to its commit's "
                 "result.");

    for (cum = 0, i = 0; i < STATS_RTT_BUCKETS; i++) {
        cum += acd_stats.rtt_bucket[i];
        metrics_printf(b, METRICS_PREFIX "db_roundtrip_seconds_bucket"
                       "{le=\"%s\"} %llu\n", stats_rtt_le[i].le,
                       (unsigned long long) cum);
    }

    metrics_printf(b, METRICS_PREFIX "db_roundtrip_seconds_bucket"
                   "{le=\"+Inf\"} %llu\n"
                   METRICS_PREFIX "db_roundtrip_seconds_sum %llu.%06llu\n"
                   METRICS_PREFIX "db_roundtrip_seconds_count %llu\n",
                   (unsigned long long) acd_stats.batches,
                   (unsigned long long) (acd_stats.rtt_sum_us / 1000000),
                   (unsigned long long) (acd_stats.rtt_sum_us % 1000000),
                   (unsigned long long) acd_stats.batches);

    metrics_value(b, "db_connected", "gauge",
                  "1 while connected to PostgreSQL, else 0.",
                  (uint64_t) dbconn_connected());

    metrics_value(b, "db_reconnects_total", "counter",
                  "Connections to PostgreSQL made after the first one.",
                  acd_stats.db_reconnects);

    metrics_value(b, "clients", "gauge",
                  "nginx worker connections on the Unix socket.",
                  (uint64_t) client_count());

    metrics_value(b, "leases_granted_total", "counter",
                  "Budget leases answered with a grant above zero.",
                  acd_stats.leases_granted);

    metrics_value(b, "leases_refused_total", "counter",
                  "Budget leases answered with nothing: a cap is spent.",
                  acd_stats.leases_refused);

    metrics_value(b, "lease_picodollars_total", "counter",
                  "Pico-dollars granted by budget leases.",
                  acd_stats.lease_pusd);

    metrics_value(b, "keysets_pushed_total", "counter",
                  "Key sets sent whole to an nginx worker.",
                  acd_stats.keysets_pushed);

    metrics_value(b, "peers_refused_total", "counter",
                  "Connections to the Unix socket closed at once: their "
                  "user is not allowed.",
                  acd_stats.peers_refused);

    metrics_head(b, "start_time_seconds", "gauge",
                 "When accountd started, seconds since the epoch.");
    metrics_printf(b, METRICS_PREFIX "start_time_seconds %.3f\n",
                   metrics_start);

    metrics_head(b, "info", "gauge", "accountd's version, always 1.");
    metrics_printf(b, METRICS_PREFIX "info{version=\"%s\"} 1\n",
                   ACCOUNTD_VERSION);
}


static void
metrics_head(metrics_buf_t *b, const char *name, const char *type,
    const char *help)
{
    metrics_printf(b, "# HELP " METRICS_PREFIX "%s %s\n"
                   "# TYPE " METRICS_PREFIX "%s %s\n",
                   name, help, name, type);
}


static void
metrics_value(metrics_buf_t *b, const char *name, const char *type,
    const char *help, uint64_t v)
{
    metrics_head(b, name, type, help);
    metrics_printf(b, METRICS_PREFIX "%s %llu\n", name,
                   (unsigned long long) v);
}


/* a write past the end marks the buffer, which is then not sent */

static void
metrics_printf(metrics_buf_t *b, const char *fmt, ...)
{
    int      n;
    va_list  args;

    if (b->overflow) {
        return;
    }

    va_start(args, fmt);
    n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, args);
    va_end(args);

    if (n < 0 || (size_t) n >= b->cap - b->len) {
        b->overflow = 1;
        return;
    }

    b->len += (size_t) n;
}
