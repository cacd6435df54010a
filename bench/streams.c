
/*
 * streams: many long-lived SSE streams at once, paced by the mock, and the
 * gaps between the events as they arrive.
 *
 *     streams [-c STREAMS] [-d DELAY_MS] [-k TOKENS] [-r RAMP_MS]
 *             [-t DEADLINE_S] [-p PROGRESS_MS] http://127.0.0.1:PORT/PATH
 *
 * Opens -c connections (2000), one every -r / -c ms (ramp 2000 ms), and
 * sends each the same streaming chat completion, with x-mock-delay-ms: -d
 * (50) and x-mock-tokens: -k (600): 30 s at 20 tokens a second.  Each
 * response is read as HTTP/1.1, chunked or not, at any split of its bytes;
 * an event is a line that begins "data:", timestamped on CLOCK_MONOTONIC
 * when the read that holds it returns.
 *
 * Event 0 is the role chunk that goes with the headers, events 1 to -k the
 * tokens, then the finish, usage and [DONE] that follow the last token at
 * once: the gaps kept are those from token 1 to token 2, ..., token k-1 to
 * token k, -k - 1 a stream, so that neither the wait for the first token
 * nor the finishing events are counted as a gap.
 *
 * Every -p ms (1000) it prints "progress MS OPEN EVENTS COMPLETED FAILED"
 * (OPEN: streams with their headers in and not ended), and "all-open MS"
 * once all of them are open at once: the driver samples the server then.
 * At the end, a summary, and one line "STREAMS {json}".  It stops by
 * itself at -t seconds (ramp + tokens * delay + 30 s), streams still open
 * counted as failed.  Exits 1 when a stream failed.  $LLMGW_KEY, when set,
 * goes in Authorization (the mock ignores it).
 */


#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"


#define STREAMS_MAX        100000
#define STREAMS_HEAD_MAX   8192
#define STREAMS_EVENTS     1024


enum {
    STREAMS_IDLE = 0,
    STREAMS_CONNECTING,
    STREAMS_READING,
    STREAMS_OVER
};


/* why a stream failed, for the summary */

enum {
    STREAMS_F_CONNECT = 0,
    STREAMS_F_STATUS,
    STREAMS_F_CLOSED,
    STREAMS_F_MALFORMED,
    STREAMS_F_SHORT,
    STREAMS_F_DEADLINE,
    STREAMS_F_N
};


typedef struct {
    bench_resp_t         resp;          /* head: malloc()ed, until in */
    int                  fd;
    int                  phase;
    int                  open;          /* counted in streams_open */
    uint64_t             t_sent;        /* the request written, ns */
    uint64_t             t_last;        /* the last event's arrival, ns */
} streams_conn_t;


static void streams_start(streams_conn_t *c);
static void streams_handle(streams_conn_t *c, uint32_t events);
static void streams_head(bench_resp_t *r, uint64_t now);
static void streams_event(bench_resp_t *r, uint64_t now);
static void streams_end(streams_conn_t *c, int fail);
static void streams_progress(uint64_t now);
static void streams_summary(uint64_t now);


static const char    *streams_names[STREAMS_F_N] = {
    "connect", "status", "closed", "malformed", "short", "deadline"
};

static int                  streams_n = 2000;
static int                  streams_delay = 50;
static int                  streams_tokens = 600;
static int                  streams_ramp = 2000;
static int                  streams_epfd;
static bench_url_t          streams_url;
static char                 streams_req[BENCH_REQ_MAX];
static size_t               streams_req_len;
static streams_conn_t      *streams_conns;
static uint64_t             streams_t0;
static uint64_t             streams_all_open;
static int                  streams_started;
static int                  streams_opened;
static int                  streams_open;
static int                  streams_peak;
static int                  streams_completed;
static int                  streams_failed;
static int                  streams_fails[STREAMS_F_N];
static uint64_t             streams_nevents;
static double              *streams_gaps;   /* microseconds */
static size_t               streams_ngaps;
static size_t               streams_gaps_cap;
static double              *streams_opens;  /* to the headers, µs */
static size_t               streams_nopens;


int
main(int argc, char **argv)
{
    int                  i, n, opt, progress, deadline_s, timeout;
    uint64_t             now, next_start, next_progress, deadline, t;
    bench_req_t          req;
    struct rlimit        rl;
    struct epoll_event   events[STREAMS_EVENTS];

    deadline_s = 0;
    progress = 1000;

    while ((opt = getopt(argc, argv, "c:d:k:r:t:p:")) != -1) {
        switch (opt) {
        case 'c': streams_n = atoi(optarg); break;
        case 'd': streams_delay = atoi(optarg); break;
        case 'k': streams_tokens = atoi(optarg); break;
        case 'r': streams_ramp = atoi(optarg); break;
        case 't': deadline_s = atoi(optarg); break;
        case 'p': progress = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: streams [-c STREAMS] [-d DELAY_MS] "
                    "[-k TOKENS] [-r RAMP_MS] [-t DEADLINE_S] "
                    "[-p PROGRESS_MS] http://127.0.0.1:PORT/PATH\n");
            return 2;
        }
    }

    if (streams_n < 1 || streams_n > STREAMS_MAX || streams_delay < 0
        || streams_tokens < 2 || streams_tokens > 1000000
        || streams_ramp < 0 || deadline_s < 0 || progress < 10
        || optind != argc - 1)
    {
        fprintf(stderr, "streams: a count out of range, or not one URL\n");
        return 2;
    }

    if (bench_url(&streams_url, argv[optind]) != 0) {
        fprintf(stderr, "streams: bad URL \"%s\" (http://127.0.0.1:PORT/"
                "PATH)\n", argv[optind]);
        return 2;
    }

    if (deadline_s == 0) {
        deadline_s = streams_ramp / 1000
                     + (int) ((int64_t) streams_tokens * streams_delay / 1000)
                     + 30;
    }

    /* a descriptor a stream, and a few for stdio and epoll */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0
        && rl.rlim_cur < (rlim_t) streams_n + 16)
    {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0
        || rl.rlim_cur < (rlim_t) streams_n + 16)
    {
        fprintf(stderr, "streams: RLIMIT_NOFILE %llu is below %d streams: "
                "raise the hard limit (ulimit -Hn)\n",
                (unsigned long long) rl.rlim_cur, streams_n);
        return 1;
    }

    req = (bench_req_t) {
        "Tell the gateway a long story.", streams_tokens, streams_tokens,
        streams_delay, 0, NULL };

    streams_req_len = bench_request(&streams_url, &req, streams_req);

    streams_conns = calloc(streams_n, sizeof(streams_conn_t));
    streams_gaps_cap = (size_t) streams_n * (streams_tokens - 1);
    streams_gaps = malloc(streams_gaps_cap * sizeof(double));
    streams_opens = malloc(streams_n * sizeof(double));

    if (streams_conns == NULL || streams_gaps == NULL
        || streams_opens == NULL)
    {
        fprintf(stderr, "streams: out of memory\n");
        return 1;
    }

    for (i = 0; i < streams_n; i++) {
        streams_conns[i].fd = -1;
    }

    /* a closed peer is a failed stream to count, not a reason to die */
    signal(SIGPIPE, SIG_IGN);

    streams_epfd = epoll_create1(EPOLL_CLOEXEC);
    if (streams_epfd == -1) {
        perror("epoll_create1");
        return 1;
    }

    setvbuf(stdout, NULL, _IOLBF, 0);

    printf("streams: %d to %s, %d tokens %d ms apart, ramp %d ms, "
           "deadline %d s\n", streams_n, argv[optind], streams_tokens,
           streams_delay, streams_ramp, deadline_s);

    streams_t0 = bench_now();
    deadline = streams_t0 + (uint64_t) deadline_s * 1000000000;
    next_progress = streams_t0 + (uint64_t) progress * 1000000;
    next_start = streams_t0;

    for ( ;; ) {
        now = bench_now();

        /* the ramp: stream i starts at i * ramp / n */
        while (streams_started < streams_n && next_start <= now) {
            streams_start(&streams_conns[streams_started++]);
            next_start = streams_t0 + (uint64_t) streams_started
                         * streams_ramp * 1000000 / streams_n;
        }

        if (streams_completed + streams_failed == streams_n) {
            break;
        }

        if (now >= deadline) {
            for (i = 0; i < streams_n; i++) {
                if (streams_conns[i].phase != STREAMS_OVER) {
                    streams_end(&streams_conns[i], STREAMS_F_DEADLINE);
                }
            }

            fprintf(stderr, "streams: the deadline of %d s: streams still "
                    "open counted as failed\n", deadline_s);
            break;
        }

        if (now >= next_progress) {
            streams_progress(now);
            next_progress += (uint64_t) progress * 1000000;
        }

        t = next_progress < deadline ? next_progress : deadline;

        if (streams_started < streams_n && next_start < t) {
            t = next_start;
        }

        timeout = t > now ? (int) ((t - now + 999999) / 1000000) : 0;

        n = epoll_wait(streams_epfd, events, STREAMS_EVENTS, timeout);

        if (n == -1) {
            if (errno == EINTR) {
                continue;
            }

            perror("epoll_wait");
            return 1;
        }

        for (i = 0; i < n; i++) {
            streams_handle(events[i].data.ptr, events[i].events);
        }
    }

    streams_summary(bench_now());

    return streams_failed ? 1 : 0;
}

static void
streams_start(streams_conn_t *c)
{
    int                 fd;
    struct epoll_event  ev;

    c->phase = STREAMS_CONNECTING;

    fd = bench_connect(&streams_url, 1, 0);
    if (fd == -1) {
        if (streams_fails[STREAMS_F_CONNECT] == 0) {
            fprintf(stderr, "streams: connect: %s\n", strerror(errno));
        }

        streams_end(c, STREAMS_F_CONNECT);
        return;
    }

    c->fd = fd;

    ev.events = EPOLLOUT;
    ev.data.ptr = c;

    if (epoll_ctl(streams_epfd, EPOLL_CTL_ADD, fd, &ev) == -1) {
        fprintf(stderr, "streams: epoll_ctl: %s\n", strerror(errno));
        streams_end(c, STREAMS_F_CONNECT);
    }
}


static void
streams_handle(streams_conn_t *c, uint32_t events)
{
    int                 err, rc;
    char               *head;
    ssize_t             n;
    uint64_t            now;
    struct epoll_event  ev;
    static char         buf[65536];

    if (c->phase == STREAMS_CONNECTING) {
        err = bench_connected(c->fd);

        if (err) {
            if (streams_fails[STREAMS_F_CONNECT] == 0) {
                fprintf(stderr, "streams: connect: %s\n", strerror(err));
            }

            streams_end(c, STREAMS_F_CONNECT);
            return;
        }

        /* a few hundred bytes into an empty socket buffer: all at once */
        n = send(c->fd, streams_req, streams_req_len, 0);

        if (n != (ssize_t) streams_req_len) {
            fprintf(stderr, "streams: send: %s\n",
                    n == -1 ? strerror(errno) : "short");
            streams_end(c, STREAMS_F_CONNECT);
            return;
        }

        head = malloc(STREAMS_HEAD_MAX);
        if (head == NULL) {
            fprintf(stderr, "streams: out of memory\n");
            exit(1);
        }

        bench_resp_init(&c->resp, head, STREAMS_HEAD_MAX, NULL, 0);
        c->resp.on_head = streams_head;
        c->resp.on_event = streams_event;
        c->resp.data = c;

        c->phase = STREAMS_READING;
        c->t_sent = bench_now();
        streams_opened++;

        ev.events = EPOLLIN;
        ev.data.ptr = c;
        epoll_ctl(streams_epfd, EPOLL_CTL_MOD, c->fd, &ev);
        return;
    }

    if (c->phase != STREAMS_READING) {
        return;
    }

    n = recv(c->fd, buf, sizeof(buf), 0);
    now = bench_now();

    if (n == -1) {
        if (errno == EAGAIN || errno == EINTR) {
            return;
        }

        streams_end(c, STREAMS_F_CLOSED);
        return;
    }

    rc = bench_resp_feed(&c->resp, buf, (size_t) n, now);

    if (rc == 0) {
        return;
    }

    if (rc == -1) {
        /* the close before the end is the server's, not a bad response */
        streams_end(c, n == 0 ? STREAMS_F_CLOSED : STREAMS_F_MALFORMED);

    } else if (c->resp.status != 200) {
        streams_end(c, STREAMS_F_STATUS);

    } else if (c->resp.events < streams_tokens + 1) {
        streams_end(c, STREAMS_F_SHORT);

    } else {
        streams_end(c, -1);
    }
}


/* the headers are in: the stream is open */

static void
streams_head(bench_resp_t *r, uint64_t now)
{
    streams_conn_t  *c;

    c = r->data;

    streams_opens[streams_nopens++] = (double) ((now - c->t_sent) / 1000);

    if (r->status != 200 && streams_fails[STREAMS_F_STATUS] == 0) {
        fprintf(stderr, "streams: status %d:\n%s\n", r->status, r->head);
    }

    free(r->head);
    r->head = NULL;

    if (r->status == 200) {
        c->open = 1;

        if (++streams_open > streams_peak) {
            streams_peak = streams_open;
        }

        if (streams_open == streams_n && streams_all_open == 0) {
            streams_all_open = now;
            printf("all-open %.0f\n",
                   (double) (streams_all_open - streams_t0) / 1e6);
        }
    }
}


static void
streams_event(bench_resp_t *r, uint64_t now)
{
    streams_conn_t  *c;

    c = r->data;

    /* from token 1 to token 2, ..., to the last token */
    if (r->events >= 2 && r->events <= streams_tokens
        && streams_ngaps < streams_gaps_cap)
    {
        streams_gaps[streams_ngaps++] = (double) ((now - c->t_last) / 1000);
    }

    c->t_last = now;
    streams_nevents++;
}


/* fail: one of STREAMS_F_*, or -1 for a complete stream */

static void
streams_end(streams_conn_t *c, int fail)
{
    if (c->fd != -1) {
        epoll_ctl(streams_epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }

    free(c->resp.head);
    c->resp.head = NULL;

    if (c->open) {
        c->open = 0;
        streams_open--;
    }

    c->phase = STREAMS_OVER;

    if (fail == -1) {
        streams_completed++;
        return;
    }

    if (streams_fails[fail]++ == 0 && fail != STREAMS_F_DEADLINE) {
        fprintf(stderr, "streams: a stream failed (%s) after %lld events\n",
                streams_names[fail], (long long) c->resp.events);
    }

    streams_failed++;
}


static void
streams_progress(uint64_t now)
{
    printf("progress %.0f %d %llu %d %d\n",
           (double) (now - streams_t0) / 1e6, streams_open,
           (unsigned long long) streams_nevents, streams_completed,
           streams_failed);
}


static void
streams_summary(uint64_t now)
{
    int                  i;
    FILE                *f;
    double               dur, cpu, wait;
    bench_stats_t        g, op;
    struct rusage        ru;
    unsigned long long   ss[2];

    bench_stats(streams_gaps, streams_ngaps, &g);
    bench_stats(streams_opens, streams_nopens, &op);

    dur = (double) (now - streams_t0) / 1e6;

    /* what this client cost: a share of the machine the servers lacked */
    cpu = 0;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        cpu = ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec
              + ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec;
    }

    /* and how long it was runnable without a CPU: its gaps include that */
    wait = -1;
    f = fopen("/proc/self/schedstat", "r");
    if (f != NULL) {
        if (fscanf(f, "%llu %llu", &ss[0], &ss[1]) == 2) {
            wait = (double) ss[1] / 1000;
        }

        fclose(f);
    }

    printf("streams: %d started, %d opened, %d open at most, %d completed, "
           "%d failed", streams_started, streams_opened, streams_peak,
           streams_completed, streams_failed);

    for (i = 0; i < STREAMS_F_N; i++) {
        if (streams_fails[i]) {
            printf(" (%s %d)", streams_names[i], streams_fails[i]);
        }
    }

    printf("; %llu events in %.1f s\n", (unsigned long long) streams_nevents,
           dur / 1000);

    /* the times are whole microseconds */
    printf("gaps: %zu, µs: p50 %.0f, p90 %.0f, p99 %.0f, p99.9 %.0f, "
           "max %.0f, mean %.0f\n", g.n, g.p50, g.p90, g.p99, g.p999, g.max,
           g.mean);

    printf("request to headers, µs: p50 %.0f, p99 %.0f, max %.0f\n",
           op.p50, op.p99, op.max);

    printf("STREAMS {\"streams\":%d,\"started\":%d,\"opened\":%d,"
           "\"peak_open\":%d,\"completed\":%d,\"failed\":%d,\"fail\":{",
           streams_n, streams_started, streams_opened, streams_peak,
           streams_completed, streams_failed);

    for (i = 0; i < STREAMS_F_N; i++) {
        printf("%s\"%s\":%d", i ? "," : "", streams_names[i],
               streams_fails[i]);
    }

    printf("},\"events\":%llu,\"tokens\":%d,\"delay_ms\":%d,"
           "\"ramp_ms\":%d,\"gaps\":%zu,\"gap_us\":{\"p50\":%.0f,"
           "\"p90\":%.0f,\"p99\":%.0f,\"p999\":%.0f,\"max\":%.0f,"
           "\"mean\":%.1f},\"headers_us\":{\"p50\":%.0f,\"p99\":%.0f,"
           "\"max\":%.0f},\"all_open_ms\":%.0f,\"duration_ms\":%.0f,"
           "\"client_cpu_us\":%.0f,\"client_wait_us\":%.0f}\n",
           (unsigned long long) streams_nevents, streams_tokens,
           streams_delay, streams_ramp, g.n, g.p50, g.p90, g.p99, g.p999,
           g.max, g.mean, op.p50, op.p99, op.max,
           streams_all_open
           ? (double) (streams_all_open - streams_t0) / 1e6 : -1.0,
           dur, cpu, wait);
}
