
/*
 * ttfb: time to first byte of a streamed (SSE) chat completion, the same
 * request sent to several targets, compared.
 *
 *     ttfb [-n ROUNDS] [-w WARMUP] [-g US] [-c STREAMS] [-s SECONDS]
 *          [-r ROUNDS] [-t MS] [-o FILE.json]
 *          NAME[:MODEL]=http://127.0.0.1:PORT/PATH ...
 *
 * Three series, each with the targets in an order shuffled every round, so
 * that a drift of the machine (frequency, another process) falls on every
 * target alike:
 *
 *   fresh       -n rounds (after -w warm-ups), one request per target
 *               each, each over a new TCP connection ("Connection: close",
 *               read to the server's close); -g pauses between requests
 *   keepalive   the same over one kept-alive connection per target
 *   concurrent  -c streams at once, paced by the mock (x-mock-delay-ms),
 *               for -s seconds per target and round, -r rounds: the first
 *               starts are spread over one stream's duration, and a stream
 *               that ends is followed by another after a random pause, so
 *               that the load is steady and a start does not coincide with
 *               an end by construction
 *
 * Two times per request, from just before the request is written (the
 * connection is already established) on CLOCK_MONOTONIC: "headers", when
 * the end of the response headers arrives, and "event", when the "data:"
 * of the first SSE event arrives.  Every response is read to its end.
 *
 * The last target is the one compared: its p50 and p99 over each other
 * target's.  It prints a table and writes the same numbers as JSON.  No
 * time fails: it exits 1 only when a request fails (not 200, incomplete,
 * no event), at once, with what came.  $LLMGW_KEY, when set, goes in
 * Authorization to every target (the mock ignores it): the bytes sent are
 * the same everywhere, apart from the path and Host, and the model where
 * a target names one (the mock serves each family on its own endpoints).
 */


#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "client.h"


#define BENCH_TARGETS_MAX  8
#define BENCH_STREAMS_MAX  1024
#define BENCH_HEAD_MAX     16384
#define BENCH_SNIP         200


typedef struct {
    const char          *name;
    const char          *url;
    const char          *model;         /* NULL: the client's default */
    bench_url_t          peer;
} bench_target_t;


typedef struct {
    const char          *name;
    const char          *what;          /* one line for the table */
    int                  keepalive;
    int                  streams;       /* 0: one request at a time */
    int                  tokens;
    int                  max_tokens;
    int                  delay_ms;
    int                  rounds;
    double               busy;          /* % of all CPUs, while it ran */
} bench_series_t;


/* the times of one series at one target, in microseconds */

typedef struct {
    double              *hdr;
    double              *evt;
    int                 *round;
    size_t               n;
    size_t               cap;
    uint64_t             requests;      /* warm-ups included */
} bench_samples_t;


typedef struct {
    int                  fd;
    int                  active;
    int                  connected;
    uint64_t             due;
    uint64_t             t0;
    bench_resp_t         resp;
    char                 head[BENCH_HEAD_MAX];
    char                 snip[BENCH_SNIP];  /* the first body bytes */
} bench_stream_t;


static uint64_t bench_random(void);
static void bench_pause(void);
static void bench_loadavg(char *buf, size_t size);
static void bench_order(int *order);
static int bench_cpu(uint64_t *busy, uint64_t *total);
static int bench_target(bench_target_t *t, char *spec);
static size_t bench_series_request(bench_target_t *t, bench_series_t *s,
    char *buf);
static int bench_resp_ok(bench_resp_t *r);
static void bench_fail(bench_target_t *t, bench_series_t *s,
    bench_resp_t *r, const char *fmt, ...);
static int bench_one(bench_target_t *t, bench_series_t *s, int *fd,
    double *hdr, double *evt);
static void bench_sequential(bench_series_t *s, bench_samples_t *sm);
static void bench_concurrent(bench_series_t *s, bench_samples_t *sm);
static void bench_window(bench_target_t *t, bench_series_t *s,
    bench_samples_t *sm, int round);
static void bench_add(bench_samples_t *sm, double hdr, double evt,
    int round);
static double bench_ratio(double a, double b);
static double bench_p50_half(bench_samples_t *sm, int parity);
static void bench_print(bench_series_t *s, bench_samples_t *sm);
static void bench_json(FILE *f, bench_series_t *series, int nseries,
    bench_samples_t (*sm)[BENCH_TARGETS_MAX]);
static void bench_json_stats(FILE *f, const char *name, bench_stats_t *st,
    const char *sep);


static bench_target_t   bench_targets[BENCH_TARGETS_MAX];
static int              bench_ntargets;
static int              bench_timeout_ms = 10000;
static int              bench_warmup = 20;
static int              bench_window_secs = 2;
static int              bench_gap_us;
static uint64_t         bench_seed = 88172645463325252ULL;
static int              bench_epfd = -1;
static char             bench_load[2][64];     /* /proc/loadavg, start, end */


int
main(int argc, char **argv)
{
    int               i, j, opt, n, streams, secs, rounds, nseries;
    uint64_t          busy0, total0, busy1, total1;
    char              stamp[32];
    FILE             *f;
    time_t            now;
    const char       *out;
    bench_series_t    series[3];
    bench_samples_t   samples[3][BENCH_TARGETS_MAX];

    n = 300;
    streams = 32;
    secs = 2;
    rounds = 3;
    out = NULL;

    while ((opt = getopt(argc, argv, "n:w:g:c:s:r:t:o:")) != -1) {
        switch (opt) {
        case 'n': n = atoi(optarg); break;
        case 'g': bench_gap_us = atoi(optarg); break;
        case 'w': bench_warmup = atoi(optarg); break;
        case 'c': streams = atoi(optarg); break;
        case 's': secs = atoi(optarg); break;
        case 'r': rounds = atoi(optarg); break;
        case 't': bench_timeout_ms = atoi(optarg); break;
        case 'o': out = optarg; break;
        default:
            fprintf(stderr, "usage: ttfb [-n ROUNDS] [-w WARMUP] [-g US] "
                    "[-c STREAMS] [-s SECONDS] [-r ROUNDS] [-t MS] "
                    "[-o FILE] NAME=URL ...\n");
            return 2;
        }
    }

    if (n < 1 || bench_warmup < 0 || bench_gap_us < 0 || streams < 0
        || streams > BENCH_STREAMS_MAX || secs < 1 || rounds < 1
        || bench_timeout_ms < 1)
    {
        fprintf(stderr, "ttfb: a count out of range\n");
        return 2;
    }

    for (i = optind; i < argc; i++) {
        if (bench_ntargets == BENCH_TARGETS_MAX
            || bench_target(&bench_targets[bench_ntargets++], argv[i]) != 0)
        {
            fprintf(stderr, "ttfb: bad target \"%s\" (NAME[:MODEL]=http://"
                    "127.0.0.1:PORT/PATH, at most %d)\n", argv[i],
                    BENCH_TARGETS_MAX);
            return 2;
        }
    }

    if (bench_ntargets < 2) {
        fprintf(stderr, "ttfb: give at least two targets\n");
        return 2;
    }

    bench_window_secs = secs;

    /* a closed peer is an error to report, not a reason to die silently */
    signal(SIGPIPE, SIG_IGN);

    bench_epfd = epoll_create1(0);
    if (bench_epfd == -1) {
        perror("epoll_create1");
        return 1;
    }

    nseries = 0;

    /* name, what, keepalive, streams, tokens, max_tokens, delay, rounds */

    series[nseries++] = (bench_series_t) {
        "fresh", "a new TCP connection per request",
        0, 0, 16, 16, 0, n, -1 };

    series[nseries++] = (bench_series_t) {
        "keepalive", "one kept-alive connection per target",
        1, 0, 16, 16, 0, n, -1 };

    if (streams > 0) {
        series[nseries++] = (bench_series_t) {
            "concurrent", NULL,
            0, streams, 20, 20, 20, rounds, -1 };
    }

    memset(samples, 0, sizeof(samples));

    /* the machine is shared: a busy one makes every number larger */
    bench_loadavg(bench_load[0], sizeof(bench_load[0]));

    for (i = 0; i < nseries; i++) {
        series[i].busy = -1;
        busy0 = 0;
        total0 = 0;
        bench_cpu(&busy0, &total0);

        if (series[i].streams) {
            bench_concurrent(&series[i], samples[i]);

        } else {
            bench_sequential(&series[i], samples[i]);
        }

        if (bench_cpu(&busy1, &total1) == 0 && total1 > total0) {
            series[i].busy = 100.0 * (busy1 - busy0) / (total1 - total0);
        }

        bench_print(&series[i], samples[i]);
    }

    bench_loadavg(bench_load[1], sizeof(bench_load[1]));

    printf("\nload average (1, 5, 15 min) at the start %s, at the end %s\n",
           bench_load[0], bench_load[1]);

    if (out == NULL) {
        return 0;
    }

    f = fopen(out, "w");
    if (f == NULL) {
        perror(out);
        return 1;
    }

    now = time(NULL);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(f, "{\n  \"bench\": \"ttfb\",\n  \"time\": \"%s\",\n", stamp);

    bench_json(f, series, nseries, samples);

    if (fclose(f) != 0) {
        perror(out);
        return 1;
    }

    printf("\nwritten to %s\n", out);

    for (i = 0; i < nseries; i++) {
        for (j = 0; j < bench_ntargets; j++) {
            free(samples[i][j].hdr);
            free(samples[i][j].evt);
            free(samples[i][j].round);
        }
    }

    return 0;
}


/* xorshift64: the same pseudo-random pauses in every run */

static uint64_t
bench_random(void)
{
    bench_seed ^= bench_seed << 13;
    bench_seed ^= bench_seed >> 7;
    bench_seed ^= bench_seed << 17;

    return bench_seed;
}


/*
 * -g: a pause between two requests, so that what one request leaves to do
 * (the gateway's settle record, accountd's INSERT, a close) is done before
 * the next one, which may go to another target, is timed
 */

static void
bench_pause(void)
{
    struct timespec  ts;

    if (bench_gap_us == 0) {
        return;
    }

    ts.tv_sec = bench_gap_us / 1000000;
    ts.tv_nsec = (long) (bench_gap_us % 1000000) * 1000;

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
        /* void */
    }
}


/* the three load averages of /proc/loadavg */

static void
bench_loadavg(char *buf, size_t size)
{
    int     n;
    FILE   *f;
    double  a[3];

    snprintf(buf, size, "?");

    f = fopen("/proc/loadavg", "r");
    if (f == NULL) {
        return;
    }

    n = fscanf(f, "%lf %lf %lf", &a[0], &a[1], &a[2]);
    fclose(f);

    if (n == 3) {
        snprintf(buf, size, "%.2f %.2f %.2f", a[0], a[1], a[2]);
    }
}


/*
 * The CPU time of the whole machine, from the first line of /proc/stat:
 * what the bench itself costs is part of it, a run that something else
 * shared shows as far more.
 */

static int
bench_cpu(uint64_t *busy, uint64_t *total)
{
    int                 n, i;
    FILE               *f;
    unsigned long long  v[8];

    f = fopen("/proc/stat", "r");
    if (f == NULL) {
        return -1;
    }

    n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu",
               &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);

    if (n != 8) {
        return -1;
    }

    *total = 0;
    for (i = 0; i < 8; i++) {
        *total += v[i];
    }

    /* idle and iowait are the time nothing ran */
    *busy = *total - v[3] - v[4];

    return 0;
}


/* NAME[:MODEL]=http://127.0.0.1:PORT/PATH */

static int
bench_target(bench_target_t *t, char *spec)
{
    char        *eq, *colon;
    const char  *p;

    eq = strchr(spec, '=');
    if (eq == NULL || eq == spec) {
        return -1;
    }

    *eq = '\0';
    t->name = spec;
    t->url = eq + 1;
    t->model = NULL;

    colon = strchr(spec, ':');
    if (colon != NULL) {
        if (colon == spec || colon[1] == '\0') {
            return -1;
        }

        *colon = '\0';
        t->model = colon + 1;

        /* written into the body as it is: a name of the mock's, short */
        for (p = t->model; *p; p++) {
            if ((unsigned char) *p < 0x20 || *p == '"' || *p == '\\'
                || p - t->model >= 64)
            {
                return -1;
            }
        }
    }

    return bench_url(&t->peer, t->url);
}


/* the same request for every target, apart from the path and Host */

static size_t
bench_series_request(bench_target_t *t, bench_series_t *s, char *buf)
{
    bench_req_t  q;

    q = (bench_req_t) {
        "Say hello to the gateway.", s->max_tokens, s->tokens, s->delay_ms,
        !s->keepalive, t->model };

    return bench_request(&t->peer, &q, buf);
}


static int
bench_resp_ok(bench_resp_t *r)
{
    return r->state == BENCH_ST_DONE && r->status == 200 && r->events > 0;
}


static void
bench_fail(bench_target_t *t, bench_series_t *s, bench_resp_t *r,
    const char *fmt, ...)
{
    va_list  args;

    fprintf(stderr, "\nttfb: FAILED: %s, %s (%s): ", s->name, t->name,
            t->url);

    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);

    if (r) {
        fprintf(stderr, "\nstatus %d, %lld events, %s\n%.*s%.*s\n",
                r->status, (long long) r->events,
                r->state == BENCH_ST_DONE ? "complete" : "incomplete",
                (int) r->head_len, r->head, (int) r->snip_len, r->snip);
    }

    fputc('\n', stderr);

    exit(1);
}


/*
 * One request at a time over a blocking socket: *fd is the kept-alive
 * connection, or -1.  The clock starts once the connection is
 * established, just before the request is written.
 */

static int
bench_one(bench_target_t *t, bench_series_t *s, int *fd, double *hdr,
    double *evt)
{
    char                 buf[65536], req[BENCH_REQ_MAX];
    size_t               len, sent;
    ssize_t              k;
    uint64_t             t0, now;
    static char          head[BENCH_HEAD_MAX], snip[BENCH_SNIP];
    static bench_resp_t  r;

    len = bench_series_request(t, s, req);

    if (*fd == -1) {
        *fd = bench_connect(&t->peer, 0, bench_timeout_ms);
        if (*fd == -1) {
            bench_fail(t, s, NULL, "connect: %s", strerror(errno));
        }
    }

    bench_resp_init(&r, head, sizeof(head), snip, sizeof(snip));

    t0 = bench_now();

    for (sent = 0; sent < len; sent += k) {
        k = send(*fd, req + sent, len - sent, 0);
        if (k <= 0) {
            bench_fail(t, s, NULL, "send: %s", strerror(errno));
        }
    }

    for ( ;; ) {
        k = recv(*fd, buf, sizeof(buf), 0);
        now = bench_now();

        if (k < 0) {
            if (errno == EINTR) {
                continue;
            }

            bench_fail(t, s, &r, "recv: %s", errno == EAGAIN
                       ? "timed out" : strerror(errno));
        }

        k = bench_resp_feed(&r, buf, (size_t) k, now);

        if (k == -1) {
            bench_fail(t, s, &r, "a malformed or cut response");
        }

        if (k == 1) {
            break;
        }
    }

    if (!bench_resp_ok(&r)) {
        bench_fail(t, s, &r, "not a complete 200 stream with events");
    }

    if (!s->keepalive || r.close) {
        /* read to the server's close, so that it is the one to wait */
        while ((k = recv(*fd, buf, sizeof(buf), 0)) > 0) {
            /* void */
        }

        close(*fd);
        *fd = -1;
    }

    *hdr = (double) (r.t_hdr - t0) / 1000.0;
    *evt = (double) (r.t_evt - t0) / 1000.0;

    return 0;
}


/*
 * The targets of a round in an order of their own (Fisher-Yates): each
 * follows each other as often, so that what one request leaves behind
 * (the mock's state, a cache, a timer) does not fall on one target alone.
 */

static void
bench_order(int *order)
{
    int  j, k, t;

    for (j = 0; j < bench_ntargets; j++) {
        order[j] = j;
    }

    for (j = bench_ntargets - 1; j > 0; j--) {
        k = (int) (bench_random() % (uint64_t) (j + 1));
        t = order[j];
        order[j] = order[k];
        order[k] = t;
    }
}


static void
bench_sequential(bench_series_t *s, bench_samples_t *sm)
{
    int     i, j, k, fd[BENCH_TARGETS_MAX], order[BENCH_TARGETS_MAX];
    double  hdr, evt;

    for (j = 0; j < bench_ntargets; j++) {
        fd[j] = -1;
    }

    /* warm-ups: the upstream keepalive connections, caches, the branch
     * predictors; not counted */
    for (i = 0; i < bench_warmup; i++) {
        for (j = 0; j < bench_ntargets; j++) {
            bench_pause();
            bench_one(&bench_targets[j], s, &fd[j], &hdr, &evt);
            sm[j].requests++;
        }
    }

    for (i = 0; i < s->rounds; i++) {
        bench_order(order);

        for (k = 0; k < bench_ntargets; k++) {
            j = order[k];

            bench_pause();
            bench_one(&bench_targets[j], s, &fd[j], &hdr, &evt);
            sm[j].requests++;
            bench_add(&sm[j], hdr, evt, i);
        }
    }

    for (j = 0; j < bench_ntargets; j++) {
        if (fd[j] != -1) {
            close(fd[j]);
        }
    }
}


static void
bench_concurrent(bench_series_t *s, bench_samples_t *sm)
{
    int  i, k, order[BENCH_TARGETS_MAX];

    for (i = 0; i < s->rounds; i++) {
        bench_order(order);

        for (k = 0; k < bench_ntargets; k++) {
            bench_window(&bench_targets[order[k]], s, &sm[order[k]], i);
        }
    }
}


/*
 * One window of s->streams streams at one target, each started again when
 * it ends, for -s seconds; then what is in flight is read to its end.  The
 * first starts are spread over one stream's duration (tokens * delay), so
 * that the streams do not all begin and end together.
 */

static void
bench_window(bench_target_t *t, bench_series_t *s, bench_samples_t *sm,
    int round)
{
    int                    i, n, k, active, timeout, err;
    char                   buf[65536], req[BENCH_REQ_MAX];
    size_t                 len;
    ssize_t                r;
    uint64_t               start, end, now, spread, next;
    bench_stream_t        *st;
    struct epoll_event     ev, events[64];
    static bench_stream_t  streams[BENCH_STREAMS_MAX];

    len = bench_series_request(t, s, req);

    spread = (uint64_t) s->tokens * s->delay_ms * 1000000 / s->streams;
    start = bench_now();
    end = start + (uint64_t) bench_window_secs * 1000000000;

    for (i = 0; i < s->streams; i++) {
        streams[i].fd = -1;
        streams[i].active = 0;
        streams[i].due = start + i * spread;
    }

    active = 0;

    for ( ;; ) {
        now = bench_now();
        next = 0;

        for (i = 0; i < s->streams; i++) {
            st = &streams[i];

            if (st->active || now >= end) {
                continue;
            }

            if (st->due > now) {
                if (next == 0 || st->due < next) {
                    next = st->due;
                }

                continue;
            }

            st->fd = bench_connect(&t->peer, 1, 0);
            if (st->fd == -1) {
                bench_fail(t, s, NULL, "connect: %s", strerror(errno));
            }

            st->active = 1;
            st->connected = 0;
            st->t0 = now;
            bench_resp_init(&st->resp, st->head, sizeof(st->head), st->snip,
                            sizeof(st->snip));

            ev.events = EPOLLOUT;
            ev.data.ptr = st;
            epoll_ctl(bench_epfd, EPOLL_CTL_ADD, st->fd, &ev);
            active++;
        }

        if (active == 0 && now >= end) {
            break;
        }

        timeout = 100;

        if (next) {
            timeout = (int) ((next - now + 999999) / 1000000);
        }

        n = epoll_wait(bench_epfd, events, 64, timeout);

        if (n == -1 && errno != EINTR) {
            bench_fail(t, s, NULL, "epoll_wait: %s", strerror(errno));
        }

        for (k = 0; k < n; k++) {
            st = events[k].data.ptr;
            now = bench_now();

            if (!st->connected) {
                err = bench_connected(st->fd);

                if (err) {
                    bench_fail(t, s, NULL, "connect: %s", strerror(err));
                }

                /* the clock starts here, as for one request at a time */
                st->connected = 1;
                st->t0 = bench_now();

                r = send(st->fd, req, len, 0);
                if (r != (ssize_t) len) {
                    bench_fail(t, s, NULL, "send: %s",
                               r == -1 ? strerror(errno) : "short");
                }

                ev.events = EPOLLIN;
                ev.data.ptr = st;
                epoll_ctl(bench_epfd, EPOLL_CTL_MOD, st->fd, &ev);
                continue;
            }

            r = recv(st->fd, buf, sizeof(buf), 0);
            now = bench_now();

            if (r == -1) {
                if (errno == EAGAIN || errno == EINTR) {
                    continue;
                }

                bench_fail(t, s, &st->resp, "recv: %s", strerror(errno));
            }

            if (st->resp.state == BENCH_ST_DONE) {
                /* after the end only the server's close may come */
                if (r > 0) {
                    bench_fail(t, s, &st->resp, "bytes after the end");
                }

            } else {
                if (bench_resp_feed(&st->resp, buf, (size_t) r, now) == -1) {
                    bench_fail(t, s, &st->resp,
                               "a malformed or cut response");
                }

                if (r > 0) {
                    continue;
                }
            }

            if (!bench_resp_ok(&st->resp)) {
                bench_fail(t, s, &st->resp,
                           "not a complete 200 stream with events");
            }

            /* the close: the stream is over, another takes its place */
            epoll_ctl(bench_epfd, EPOLL_CTL_DEL, st->fd, NULL);
            close(st->fd);
            st->fd = -1;
            st->active = 0;
            /*
             * another starts after a random pause of 0 to 2 spreads: were
             * it at once, every stream would begin exactly as one ends,
             * and every time to first byte would meet the end of another
             * stream (at the gateway: its settling, accountd's INSERT)
             */
            st->due = now + bench_random() % (2 * spread + 1);
            active--;
            sm->requests++;

            if (st->t0 < end) {
                bench_add(sm, (double) (st->resp.t_hdr - st->t0) / 1000.0,
                          (double) (st->resp.t_evt - st->t0) / 1000.0,
                          round);
            }
        }

        /* a stream that has not ended in time fails the run */
        now = bench_now();

        for (i = 0; i < s->streams; i++) {
            st = &streams[i];

            if (st->active
                && now - st->t0 > (uint64_t) bench_timeout_ms * 1000000)
            {
                bench_fail(t, s, &st->resp, "timed out");
            }
        }
    }
}


static void
bench_add(bench_samples_t *sm, double hdr, double evt, int round)
{
    size_t  cap;

    if (sm->n == sm->cap) {
        cap = sm->cap ? sm->cap * 2 : 512;

        sm->hdr = realloc(sm->hdr, cap * sizeof(double));
        sm->evt = realloc(sm->evt, cap * sizeof(double));
        sm->round = realloc(sm->round, cap * sizeof(int));

        if (sm->hdr == NULL || sm->evt == NULL || sm->round == NULL) {
            fprintf(stderr, "ttfb: out of memory\n");
            exit(1);
        }

        sm->cap = cap;
    }

    sm->hdr[sm->n] = hdr;
    sm->evt[sm->n] = evt;
    sm->round[sm->n] = round;
    sm->n++;
}


/* 0 for a target without samples, so that the JSON stays JSON */

static double
bench_ratio(double a, double b)
{
    return b > 0 ? a / b : 0.0;
}


/*
 * The p50 of the first events of the even (or odd) rounds only: the two
 * halves of one target differ by noise alone, which tells how far apart
 * two targets may be and still be the same.
 */

static double
bench_p50_half(bench_samples_t *sm, int parity)
{
    size_t         i, n;
    double        *v;
    bench_stats_t  st;

    v = malloc((sm->n + 1) * sizeof(double));
    if (v == NULL) {
        fprintf(stderr, "ttfb: out of memory\n");
        exit(1);
    }

    n = 0;
    for (i = 0; i < sm->n; i++) {
        if (sm->round[i] % 2 == parity) {
            v[n++] = sm->evt[i];
        }
    }

    bench_stats(v, n, &st);
    free(v);

    return st.p50;
}


static void
bench_print(bench_series_t *s, bench_samples_t *sm)
{
    int            j, last;
    double         a, b;
    bench_stats_t  h[BENCH_TARGETS_MAX], e[BENCH_TARGETS_MAX];

    last = bench_ntargets - 1;

    printf("\n== %s: ", s->name);

    if (s->streams) {
        printf("%d concurrent streams of %d tokens, one every %d ms; "
               "%d rounds of %d s per target\n",
               s->streams, s->tokens, s->delay_ms, s->rounds,
               bench_window_secs);

    } else {
        printf("%s; %d rounds, %d warm-ups\n", s->what, s->rounds,
               bench_warmup);
    }

    printf("%-12s %6s | %-35s | %-35s\n", "", "",
           "   time to headers (us)", "   time to first event (us)");
    printf("%-12s %6s | %8s %8s %8s %8s | %8s %8s %8s %8s\n",
           "target", "n", "p50", "p90", "p99", "mean",
           "p50", "p90", "p99", "mean");

    for (j = 0; j < bench_ntargets; j++) {
        bench_stats(sm[j].hdr, sm[j].n, &h[j]);
        bench_stats(sm[j].evt, sm[j].n, &e[j]);

        printf("%-12s %6zu | %8.1f %8.1f %8.1f %8.1f | %8.1f %8.1f %8.1f "
               "%8.1f\n", bench_targets[j].name, sm[j].n,
               h[j].p50, h[j].p90, h[j].p99, h[j].mean,
               e[j].p50, e[j].p90, e[j].p99, e[j].mean);
    }

    for (j = 0; j < last; j++) {
        printf("%s/%s: headers p50 x%.3f p99 x%.3f; first event "
               "p50 x%.3f p99 x%.3f (p50 %+.1f us)\n",
               bench_targets[last].name, bench_targets[j].name,
               bench_ratio(h[last].p50, h[j].p50),
               bench_ratio(h[last].p99, h[j].p99),
               bench_ratio(e[last].p50, e[j].p50),
               bench_ratio(e[last].p99, e[j].p99),
               e[last].p50 - e[j].p50);
    }

    if (s->busy >= 0) {
        printf("the machine's CPUs were %.0f%% busy meanwhile (this bench "
               "included)\n", s->busy);
    }

    printf("noise, first event p50 of even/odd rounds:");

    for (j = 0; j < bench_ntargets; j++) {
        a = bench_p50_half(&sm[j], 0);
        b = bench_p50_half(&sm[j], 1);
        printf(" %s x%.3f", bench_targets[j].name, bench_ratio(a, b));
    }

    printf("\n");
    fflush(stdout);
}


static void
bench_json(FILE *f, bench_series_t *series, int nseries,
    bench_samples_t (*sm)[BENCH_TARGETS_MAX])
{
    int             i, j, last;
    long            cpus;
    double          a, b;
    bench_stats_t   h[BENCH_TARGETS_MAX], e[BENCH_TARGETS_MAX];
    struct utsname  u;

    last = bench_ntargets - 1;
    cpus = sysconf(_SC_NPROCESSORS_ONLN);

    if (uname(&u) != 0) {
        strcpy(u.release, "?");
    }

    fprintf(f, "  \"unit\": \"us\",\n  \"cpus\": %ld,\n"
            "  \"kernel\": \"%s\",\n  \"loadavg_start\": \"%s\",\n"
            "  \"loadavg_end\": \"%s\",\n  \"warmup\": %d,\n  \"endpoints\": [",
            cpus, u.release, bench_load[0], bench_load[1], bench_warmup);

    for (j = 0; j < bench_ntargets; j++) {
        fprintf(f, "%s\n    {\"name\": \"%s\", \"url\": \"%s\"}",
                j ? "," : "", bench_targets[j].name, bench_targets[j].url);
    }

    fprintf(f, "\n  ],\n  \"series\": {");

    for (i = 0; i < nseries; i++) {
        fprintf(f, "%s\n    \"%s\": {\n      \"keepalive\": %s, "
                "\"streams\": %d, \"tokens\": %d, \"max_tokens\": %d, "
                "\"delay_ms\": %d, \"rounds\": %d, \"cpu_busy_pct\": %.1f,",
                i ? "," : "", series[i].name,
                series[i].keepalive ? "true" : "false",
                series[i].streams, series[i].tokens, series[i].max_tokens,
                series[i].delay_ms, series[i].rounds, series[i].busy);

        if (series[i].streams) {
            fprintf(f, " \"window_s\": %d,", bench_window_secs);
        }

        fprintf(f, "\n      \"targets\": {");

        for (j = 0; j < bench_ntargets; j++) {
            bench_stats(sm[i][j].hdr, sm[i][j].n, &h[j]);
            bench_stats(sm[i][j].evt, sm[i][j].n, &e[j]);

            a = bench_p50_half(&sm[i][j], 0);
            b = bench_p50_half(&sm[i][j], 1);

            fprintf(f, "%s\n        \"%s\": {\"requests\": %llu, "
                    "\"noise_p50_even_odd\": %.4f,\n",
                    j ? "," : "", bench_targets[j].name,
                    (unsigned long long) sm[i][j].requests,
                    bench_ratio(a, b));
            bench_json_stats(f, "headers", &h[j], ",");
            bench_json_stats(f, "first_event", &e[j], "}");
        }

        fprintf(f, "\n      },\n      \"ratios\": {");

        for (j = 0; j < last; j++) {
            fprintf(f, "%s\n        \"%s/%s\": {\"headers_p50\": %.4f, "
                    "\"headers_p99\": %.4f, \"first_event_p50\": %.4f, "
                    "\"first_event_p99\": %.4f, "
                    "\"first_event_p50_diff_us\": %.1f}",
                    j ? "," : "", bench_targets[last].name,
                    bench_targets[j].name,
                    bench_ratio(h[last].p50, h[j].p50),
                    bench_ratio(h[last].p99, h[j].p99),
                    bench_ratio(e[last].p50, e[j].p50),
                    bench_ratio(e[last].p99, e[j].p99),
                    e[last].p50 - e[j].p50);
        }

        fprintf(f, "\n      }\n    }");
    }

    fprintf(f, "\n  }\n}\n");
}


static void
bench_json_stats(FILE *f, const char *name, bench_stats_t *st,
    const char *sep)
{
    fprintf(f, "          \"%s\": {\"n\": %zu, \"p50\": %.1f, \"p90\": %.1f, "
            "\"p99\": %.1f, \"mean\": %.1f, \"min\": %.1f, \"max\": %.1f}%s%s",
            name, st->n, st->p50, st->p90, st->p99, st->mean, st->min,
            st->max, sep, *sep == ',' ? "\n" : "");
}
