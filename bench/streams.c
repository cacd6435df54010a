
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


#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>


#define STREAMS_MAX        100000
#define STREAMS_HEAD_MAX   8192
#define STREAMS_REQ_MAX    2048
#define STREAMS_EVENTS     1024


enum {
    STREAMS_ST_HEAD = 0,
    STREAMS_ST_SIZE,
    STREAMS_ST_SIZE_EXT,
    STREAMS_ST_DATA,
    STREAMS_ST_DATA_END,
    STREAMS_ST_TRAILER,
    STREAMS_ST_TRAILER_LINE,
    STREAMS_ST_LENGTH,
    STREAMS_ST_UNTIL_CLOSE,
    STREAMS_ST_DONE
};


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
    int                  fd;
    int                  phase;
    int                  state;         /* of the response parser */
    int                  status;
    int                  line;          /* matched of "data:", -1: none */
    int                  open;          /* counted in streams_open */
    int64_t              left;          /* of the chunk or the body */
    int64_t              events;
    uint64_t             t_sent;        /* the request written, ns */
    uint64_t             t_last;        /* the last event's arrival, ns */
    size_t               head_len;
    char                *head;          /* until the headers are in */
} streams_conn_t;


static uint64_t streams_now(void);
static int streams_url(const char *url);
static size_t streams_request(char *buf);
static void streams_start(streams_conn_t *c);
static void streams_handle(streams_conn_t *c, uint32_t events);
static int streams_feed(streams_conn_t *c, const char *p, size_t n,
    uint64_t now);
static void streams_head(streams_conn_t *c);
static void streams_event(streams_conn_t *c, uint64_t now);
static void streams_end(streams_conn_t *c, int fail);
static void streams_progress(uint64_t now);
static void streams_summary(uint64_t now);
static uint32_t streams_rank(uint32_t *v, size_t n, double p);
static int streams_cmp(const void *a, const void *b);


static const char    *streams_names[STREAMS_F_N] = {
    "connect", "status", "closed", "malformed", "short", "deadline"
};

static int                  streams_n = 2000;
static int                  streams_delay = 50;
static int                  streams_tokens = 600;
static int                  streams_ramp = 2000;
static int                  streams_epfd;
static char                 streams_host[64];
static const char          *streams_path;
static struct sockaddr_in   streams_addr;
static char                 streams_req[STREAMS_REQ_MAX];
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
static uint32_t            *streams_gaps;   /* microseconds */
static size_t               streams_ngaps;
static size_t               streams_gaps_cap;
static uint32_t            *streams_opens;  /* to the headers, µs */
static size_t               streams_nopens;
static const char          *streams_key;

static const char           streams_body_fmt[] =
    "{\"model\":\"mock-gpt-4o-mini\",\"stream\":true,\"max_tokens\":%d,"
    "\"messages\":[{\"role\":\"user\","
    "\"content\":\"Tell the gateway a long story.\"}]}";


int
main(int argc, char **argv)
{
    int                  i, n, opt, progress, deadline_s, timeout;
    uint64_t             now, next_start, next_progress, deadline, t;
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

    if (streams_url(argv[optind]) != 0) {
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

    streams_key = getenv("LLMGW_KEY");
    streams_req_len = streams_request(streams_req);

    streams_conns = calloc(streams_n, sizeof(streams_conn_t));
    streams_gaps_cap = (size_t) streams_n * (streams_tokens - 1);
    streams_gaps = malloc(streams_gaps_cap * sizeof(uint32_t));
    streams_opens = malloc(streams_n * sizeof(uint32_t));

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

    streams_t0 = streams_now();
    deadline = streams_t0 + (uint64_t) deadline_s * 1000000000;
    next_progress = streams_t0 + (uint64_t) progress * 1000000;
    next_start = streams_t0;

    for ( ;; ) {
        now = streams_now();

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

    streams_summary(streams_now());

    return streams_failed ? 1 : 0;
}


static uint64_t
streams_now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}


/* http://127.0.0.1:PORT/PATH: an IPv4 address, no name to resolve */

static int
streams_url(const char *url)
{
    char        *end;
    long         port;
    const char  *host, *colon, *slash;

    if (strncmp(url, "http://", 7) != 0) {
        return -1;
    }

    host = url + 7;
    colon = strchr(host, ':');
    slash = strchr(host, '/');

    if (colon == NULL || slash == NULL || colon > slash
        || (size_t) (slash - host) >= sizeof(streams_host))
    {
        return -1;
    }

    memcpy(streams_host, host, colon - host);
    streams_host[colon - host] = '\0';

    memset(&streams_addr, 0, sizeof(streams_addr));
    streams_addr.sin_family = AF_INET;

    if (inet_pton(AF_INET, streams_host, &streams_addr.sin_addr) != 1) {
        return -1;
    }

    port = strtol(colon + 1, &end, 10);
    if (end != slash || port < 1 || port > 65535) {
        return -1;
    }

    streams_addr.sin_port = htons((uint16_t) port);

    memcpy(streams_host, host, slash - host);
    streams_host[slash - host] = '\0';
    streams_path = slash;

    return 0;
}


static size_t
streams_request(char *buf)
{
    int   n, len;
    char  body[512], auth[256];

    len = snprintf(body, sizeof(body), streams_body_fmt, streams_tokens);

    auth[0] = '\0';
    if (streams_key) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %.200s\r\n",
                 streams_key);
    }

    n = snprintf(buf, STREAMS_REQ_MAX,
                 "POST %s HTTP/1.1\r\n"
                 "Host: %s\r\n"
                 "%s"
                 "Content-Type: application/json\r\n"
                 "Accept: text/event-stream\r\n"
                 "x-mock-tokens: %d\r\n"
                 "x-mock-delay-ms: %d\r\n"
                 "x-mock-ttfb-ms: 0\r\n"
                 "Content-Length: %d\r\n"
                 "\r\n"
                 "%s",
                 streams_path, streams_host, auth, streams_tokens,
                 streams_delay, len, body);

    return (size_t) n;
}


static void
streams_start(streams_conn_t *c)
{
    int                 fd, one;
    struct epoll_event  ev;

    c->phase = STREAMS_CONNECTING;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        if (streams_fails[STREAMS_F_CONNECT] == 0) {
            fprintf(stderr, "streams: socket: %s\n", strerror(errno));
        }

        streams_end(c, STREAMS_F_CONNECT);
        return;
    }

    c->fd = fd;

    /* the request is one write; nothing should wait for Nagle */
    one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

    if (connect(fd, (struct sockaddr *) &streams_addr, sizeof(streams_addr))
        == -1 && errno != EINPROGRESS)
    {
        if (streams_fails[STREAMS_F_CONNECT] == 0) {
            fprintf(stderr, "streams: connect: %s\n", strerror(errno));
        }

        streams_end(c, STREAMS_F_CONNECT);
        return;
    }

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
    ssize_t             n;
    uint64_t            now;
    socklen_t           len;
    struct epoll_event  ev;
    static char         buf[65536];

    if (c->phase == STREAMS_CONNECTING) {
        err = 0;
        len = sizeof(err);
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);

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

        c->head = malloc(STREAMS_HEAD_MAX);
        if (c->head == NULL) {
            fprintf(stderr, "streams: out of memory\n");
            exit(1);
        }

        c->phase = STREAMS_READING;
        c->line = 0;
        c->t_sent = streams_now();
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
    now = streams_now();

    if (n == -1) {
        if (errno == EAGAIN || errno == EINTR) {
            return;
        }

        streams_end(c, STREAMS_F_CLOSED);
        return;
    }

    rc = streams_feed(c, buf, (size_t) n, now);

    if (rc == 0) {
        if (n == 0) {
            streams_end(c, STREAMS_F_CLOSED);
        }

        return;
    }

    if (rc == -1) {
        streams_end(c, STREAMS_F_MALFORMED);

    } else if (c->status != 200) {
        streams_end(c, STREAMS_F_STATUS);

    } else if (c->events < streams_tokens + 1) {
        streams_end(c, STREAMS_F_SHORT);

    } else {
        streams_end(c, -1);
    }
}


/*
 * Feeds what one recv() returned, which arrived at "now".  Returns 1 when
 * the response is complete, 0 for more, -1 when it is malformed.  A body
 * without length or chunks ends at the close: n == 0 says so.
 */

static int
streams_feed(streams_conn_t *c, const char *p, size_t n, uint64_t now)
{
    char         ch;
    size_t       k;
    const char  *end, *nl;

    static const char  data[] = "data:";

    end = p + n;

    if (n == 0) {
        if (c->state == STREAMS_ST_UNTIL_CLOSE) {
            c->state = STREAMS_ST_DONE;
            return 1;
        }

        return c->state == STREAMS_ST_DONE ? 1 : 0;
    }

    while (p < end) {

        switch (c->state) {

        case STREAMS_ST_HEAD:
            if (c->head_len == STREAMS_HEAD_MAX - 1) {
                return -1;
            }

            c->head[c->head_len++] = *p++;

            if (c->head_len >= 4
                && memcmp(c->head + c->head_len - 4, "\r\n\r\n", 4) == 0)
            {
                c->head[c->head_len] = '\0';
                streams_head(c);
            }

            break;

        case STREAMS_ST_SIZE:
            ch = *p++;

            if (ch >= '0' && ch <= '9') {
                c->left = c->left * 16 + (ch - '0');

            } else if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f') {
                c->left = c->left * 16 + ((ch | 0x20) - 'a' + 10);

            } else if (ch == ';' || ch == '\r') {
                c->state = STREAMS_ST_SIZE_EXT;

            } else if (ch == '\n') {
                c->state = c->left ? STREAMS_ST_DATA : STREAMS_ST_TRAILER;

            } else {
                return -1;
            }

            if (c->left > (int64_t) 1 << 40) {
                return -1;
            }

            break;

        case STREAMS_ST_SIZE_EXT:
            if (*p++ == '\n') {
                c->state = c->left ? STREAMS_ST_DATA : STREAMS_ST_TRAILER;
            }

            break;

        case STREAMS_ST_DATA:
        case STREAMS_ST_LENGTH:
        case STREAMS_ST_UNTIL_CLOSE:
            k = end - p;

            if (c->state != STREAMS_ST_UNTIL_CLOSE && (int64_t) k > c->left) {
                k = (size_t) c->left;
            }

            c->left -= k;

            /*
             * An event is a line that begins "data:", wherever the chunks
             * and the reads split it; the rest of a line is skipped.
             */

            while (k) {
                if (c->line < 0) {
                    nl = memchr(p, '\n', k);

                    if (nl == NULL) {
                        p += k;
                        break;
                    }

                    k -= nl + 1 - p;
                    p = nl + 1;
                    c->line = 0;
                    continue;
                }

                ch = *p++;
                k--;

                if (ch == data[c->line]) {
                    if (++c->line == 5) {
                        streams_event(c, now);
                        c->line = -1;
                    }

                } else {
                    c->line = ch == '\n' ? 0 : -1;
                }
            }

            if (c->state == STREAMS_ST_DATA && c->left == 0) {
                c->state = STREAMS_ST_DATA_END;

            } else if (c->state == STREAMS_ST_LENGTH && c->left == 0) {
                c->state = STREAMS_ST_DONE;
            }

            break;

        case STREAMS_ST_DATA_END:
            ch = *p++;

            if (ch == '\n') {
                c->state = STREAMS_ST_SIZE;

            } else if (ch != '\r') {
                return -1;
            }

            break;

        case STREAMS_ST_TRAILER:
            ch = *p++;

            if (ch == '\n') {
                c->state = STREAMS_ST_DONE;

            } else if (ch != '\r') {
                c->state = STREAMS_ST_TRAILER_LINE;
            }

            break;

        case STREAMS_ST_TRAILER_LINE:
            if (*p++ == '\n') {
                c->state = STREAMS_ST_TRAILER;
            }

            break;

        case STREAMS_ST_DONE:
            /* nothing may follow a response we did not pipeline */
            return -1;
        }
    }

    return c->state == STREAMS_ST_DONE ? 1 : 0;
}


/* the status, how the body is framed; the stream is open */

static void
streams_head(streams_conn_t *c)
{
    char      *line, *v;
    uint64_t   now;

    now = streams_now();
    streams_opens[streams_nopens++] = (uint32_t) ((now - c->t_sent) / 1000);

    if (strncmp(c->head, "HTTP/1.", 7) == 0 && c->head_len > 12) {
        c->status = atoi(c->head + 9);
    }

    c->state = STREAMS_ST_UNTIL_CLOSE;
    c->left = 0;

    for (line = strstr(c->head, "\r\n"); line; line = strstr(line, "\r\n")) {
        line += 2;

        v = strchr(line, ':');
        if (v == NULL) {
            break;
        }

        v++;
        v += strspn(v, " \t");

        if (strncasecmp(line, "transfer-encoding:", 18) == 0
            && strncasecmp(v, "chunked", 7) == 0)
        {
            c->state = STREAMS_ST_SIZE;

        } else if (strncasecmp(line, "content-length:", 15) == 0
                   && c->state != STREAMS_ST_SIZE)
        {
            c->left = strtoll(v, NULL, 10);
            c->state = c->left ? STREAMS_ST_LENGTH : STREAMS_ST_DONE;
        }
    }

    if (c->status != 200 && streams_fails[STREAMS_F_STATUS] == 0) {
        fprintf(stderr, "streams: status %d:\n%s\n", c->status, c->head);
    }

    free(c->head);
    c->head = NULL;

    if (c->status == 200) {
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
streams_event(streams_conn_t *c, uint64_t now)
{
    uint64_t  gap;

    /* from token 1 to token 2, ..., to the last token */
    if (c->events >= 2 && c->events <= streams_tokens
        && streams_ngaps < streams_gaps_cap)
    {
        gap = (now - c->t_last) / 1000;
        streams_gaps[streams_ngaps++] = gap > UINT32_MAX ? UINT32_MAX
                                                         : (uint32_t) gap;
    }

    c->events++;
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

    free(c->head);
    c->head = NULL;

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
                streams_names[fail], (long long) c->events);
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
    double               sum, mean, dur, cpu, wait;
    size_t               j, n, no;
    uint32_t            *g, *op;
    struct rusage        ru;
    unsigned long long   ss[2];

    n = streams_ngaps;
    g = streams_gaps;
    no = streams_nopens;
    op = streams_opens;

    qsort(g, n, sizeof(uint32_t), streams_cmp);
    qsort(op, no, sizeof(uint32_t), streams_cmp);

    sum = 0;
    for (j = 0; j < n; j++) {
        sum += g[j];
    }

    mean = n ? sum / n : 0;
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

    printf("gaps: %zu, µs: p50 %u, p90 %u, p99 %u, p99.9 %u, max %u, "
           "mean %.0f\n", n, streams_rank(g, n, 50), streams_rank(g, n, 90),
           streams_rank(g, n, 99), streams_rank(g, n, 99.9),
           streams_rank(g, n, 100), mean);

    printf("request to headers, µs: p50 %u, p99 %u, max %u\n",
           streams_rank(op, no, 50), streams_rank(op, no, 99),
           streams_rank(op, no, 100));

    printf("STREAMS {\"streams\":%d,\"started\":%d,\"opened\":%d,"
           "\"peak_open\":%d,\"completed\":%d,\"failed\":%d,\"fail\":{",
           streams_n, streams_started, streams_opened, streams_peak,
           streams_completed, streams_failed);

    for (i = 0; i < STREAMS_F_N; i++) {
        printf("%s\"%s\":%d", i ? "," : "", streams_names[i],
               streams_fails[i]);
    }

    printf("},\"events\":%llu,\"tokens\":%d,\"delay_ms\":%d,"
           "\"ramp_ms\":%d,\"gaps\":%zu,\"gap_us\":{\"p50\":%u,"
           "\"p90\":%u,\"p99\":%u,\"p999\":%u,\"max\":%u,"
           "\"mean\":%.1f},\"headers_us\":{\"p50\":%u,\"p99\":%u,"
           "\"max\":%u},\"all_open_ms\":%.0f,\"duration_ms\":%.0f,"
           "\"client_cpu_us\":%.0f,\"client_wait_us\":%.0f}\n",
           (unsigned long long) streams_nevents, streams_tokens,
           streams_delay, streams_ramp, n, streams_rank(g, n, 50),
           streams_rank(g, n, 90), streams_rank(g, n, 99),
           streams_rank(g, n, 99.9), streams_rank(g, n, 100), mean,
           streams_rank(op, no, 50), streams_rank(op, no, 99),
           streams_rank(op, no, 100),
           streams_all_open
           ? (double) (streams_all_open - streams_t0) / 1e6 : -1.0,
           dur, cpu, wait);
}


/* nearest rank, of sorted v */

static uint32_t
streams_rank(uint32_t *v, size_t n, double p)
{
    size_t  i;

    if (n == 0) {
        return 0;
    }

    i = (size_t) ceil(p / 100.0 * n);

    return v[i ? i - 1 : 0];
}


static int
streams_cmp(const void *a, const void *b)
{
    uint32_t  x, y;

    x = *(const uint32_t *) a;
    y = *(const uint32_t *) b;

    return (x > y) - (x < y);
}
