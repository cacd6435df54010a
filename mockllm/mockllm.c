
/*
 * mockllm: a mock LLM upstream for the gateway's tests and benchmarks.
 *
 *     mockllm -l 127.0.0.1:PORT [-t THREADS] [-r RPM [-s MS]] [-T TPM]
 *             [-D TOKENS [-P SECONDS]] [-c N] [-d MS]
 *
 * What it answers, how it reads a body, its x-mock-* headers and its
 * provider limits are specified once, in mockllm/README.md.  This file
 * holds the options and the event loops (a thread each, on its own
 * SO_REUSEPORT listener), with their connections and timers.
 */


/* accept4() */
#define _GNU_SOURCE

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <linux/sockios.h>

#include "mockllm.h"


#define MOCKLLM_THREADS_MAX  64
#define MOCKLLM_RPM_MAX      1000000
#define MOCKLLM_LIMIT_MAX    1000000000000LL
#define MOCKLLM_EVENTS       512
#define MOCKLLM_RECV_MIN     4096


typedef struct {
    mockllm_conn_t     **nodes;
    size_t               n;
    size_t               cap;
} mockllm_heap_t;


struct mockllm_loop_s {
    int                  epfd;
    int                  lfd;
    int                  wakefd;
    pthread_t            tid;
    uint64_t             now;            /* monotonic milliseconds */
    mockllm_heap_t       timers;
    size_t               nconns;
    mockllm_conn_t      *conns;
};


static int mockllm_listen(struct sockaddr_storage *sa, socklen_t len,
    int reuseport);
static int mockllm_parse_addr(const char *s, struct sockaddr_storage *sa,
    socklen_t *len);
static void mockllm_raise_nofile(void);
static int mockllm_loop_init(mockllm_loop_t *loop, int lfd);
static void *mockllm_loop_run(void *data);
static void mockllm_loop_free(mockllm_loop_t *loop);
static void mockllm_accept(mockllm_loop_t *loop);
static int mockllm_conn_run(mockllm_conn_t *c);
static int mockllm_conn_recv(mockllm_conn_t *c);
static int mockllm_conn_flush(mockllm_conn_t *c);
static int mockllm_conn_drain(mockllm_conn_t *c);
static int mockllm_conn_reset(mockllm_conn_t *c);
static void mockllm_conn_close(mockllm_conn_t *c);
static void mockllm_timer_add(mockllm_conn_t *c, uint64_t at);
static void mockllm_timer_del(mockllm_conn_t *c);
static void mockllm_heap_up(mockllm_heap_t *h, size_t i);
static void mockllm_heap_down(mockllm_heap_t *h, size_t i);
static int64_t mockllm_parse_num(const char *s, int64_t max);
static void mockllm_usage(void);


volatile int  mockllm_failed;
int64_t       mockllm_delay;

static char   mockllm_wake_tag;


int
main(int argc, char **argv)
{
    int                      ch, i, n, fd, sig;
    char                    *addr, *end;
    long                     threads;
    int64_t                  rpm, tpm, quota, period, short_ms, inflight;
    sigset_t                 set;
    socklen_t                len;
    mockllm_loop_t          *loops;
    struct sockaddr_storage  sa;

    addr = NULL;
    threads = 1;
    rpm = 0;
    short_ms = 0;
    inflight = 0;
    tpm = 0;
    quota = 0;
    period = 86400;

    while ((ch = getopt(argc, argv, "l:t:r:s:c:T:D:P:d:h")) != -1) {
        switch (ch) {

        case 'l':
            addr = optarg;
            break;

        case 't':
            errno = 0;
            threads = strtol(optarg, &end, 10);

            if (errno || *end != '\0' || threads < 1
                || threads > MOCKLLM_THREADS_MAX)
            {
                mockllm_log("invalid thread count \"%s\"", optarg);
                return 2;
            }

            break;

        case 'r':
            rpm = mockllm_parse_num(optarg, MOCKLLM_RPM_MAX);

            if (rpm < 1) {
                mockllm_log("invalid requests per minute \"%s\"", optarg);
                return 2;
            }

            break;

        case 'c':
            inflight = mockllm_parse_num(optarg, 1000000);

            if (inflight < 1) {
                mockllm_log("invalid requests in flight \"%s\"", optarg);
                return 2;
            }

            break;

        case 's':
            short_ms = mockllm_parse_num(optarg, 60000);

            if (short_ms < 1) {
                mockllm_log("invalid short window \"%s\"", optarg);
                return 2;
            }

            break;

        case 'T':
            tpm = mockllm_parse_num(optarg, MOCKLLM_LIMIT_MAX);

            if (tpm < 1) {
                mockllm_log("invalid tokens per minute \"%s\"", optarg);
                return 2;
            }

            break;

        case 'D':
            quota = mockllm_parse_num(optarg, MOCKLLM_LIMIT_MAX);

            if (quota < 1) {
                mockllm_log("invalid token quota \"%s\"", optarg);
                return 2;
            }

            break;

        case 'P':
            period = mockllm_parse_num(optarg, MOCKLLM_LIMIT_MAX / 1000);

            if (period < 1) {
                mockllm_log("invalid quota period \"%s\"", optarg);
                return 2;
            }

            break;

        case 'd':
            /* 0 is the default, and may be given */
            mockllm_delay = strcmp(optarg, "0") == 0
                            ? 0 : mockllm_parse_num(optarg, MOCKLLM_DELAY_MAX);

            if (mockllm_delay < 0) {
                mockllm_log("invalid token delay \"%s\"", optarg);
                return 2;
            }

            break;

        default:
            mockllm_usage();
            return ch == 'h' ? 0 : 2;
        }
    }

    if (addr == NULL || optind != argc) {
        mockllm_usage();
        return 2;
    }

    if (mockllm_parse_addr(addr, &sa, &len) != MOCKLLM_OK) {
        return 2;
    }

    if (mockllm_limits_init(rpm, tpm, quota, period, short_ms, inflight)
        != MOCKLLM_OK)
    {
        return 1;
    }

    /*
     * The signals are taken by sigwait() in the main thread only; the
     * threads inherit the mask.  Writes to a closed peer are errors, never
     * signals.
     */

    signal(SIGPIPE, SIG_IGN);

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    mockllm_raise_nofile();

    loops = calloc(threads, sizeof(mockllm_loop_t));
    if (loops == NULL) {
        mockllm_log("calloc() failed");
        return 1;
    }

    n = (int) threads;

    for (i = 0; i < n; i++) {
        fd = mockllm_listen(&sa, len, n > 1);
        if (fd == -1) {
            return 1;
        }

        if (mockllm_loop_init(&loops[i], fd) != MOCKLLM_OK) {
            return 1;
        }
    }

    for (i = 0; i < n; i++) {
        if (pthread_create(&loops[i].tid, NULL, mockllm_loop_run, &loops[i])
            != 0)
        {
            mockllm_log("pthread_create() failed");
            return 1;
        }
    }

    for ( ;; ) {
        if (sigwait(&set, &sig) == 0) {
            break;
        }
    }

    for (i = 0; i < n; i++) {
        if (eventfd_write(loops[i].wakefd, 1) == -1) {
            mockllm_log("eventfd_write() failed: %s", strerror(errno));
        }
    }

    for (i = 0; i < n; i++) {
        pthread_join(loops[i].tid, NULL);
        mockllm_loop_free(&loops[i]);
    }

    free(loops);

    return mockllm_failed ? 1 : 0;
}


/* a positive decimal number up to max, or -1 */

static int64_t
mockllm_parse_num(const char *s, int64_t max)
{
    char       *end;
    long long   v;

    errno = 0;
    v = strtoll(s, &end, 10);

    if (errno || end == s || *end != '\0' || v < 1 || v > max) {
        return -1;
    }

    return v;
}


static void
mockllm_usage(void)
{
    fprintf(stderr, "usage: mockllm -l ADDR:PORT [-t THREADS] [-r RPM "
                    "[-s MS]] [-T TPM] [-D TOKENS [-P SECONDS]] [-c N] "
                    "[-d MS]\n"
                    "  ADDR is a loopback address: 127.0.0.1, [::1]\n"
                    "  -r, -T: requests, tokens a minute (sliding)\n"
                    "  -s: RPM also in any MS, pro rata\n"
                    "  -c: requests in flight at most (503 beyond)\n"
                    "  -D, -P: a quota of TOKENS each SECONDS (86400)\n"
                    "  -d: ms before each streamed token (x-mock-delay-ms "
                    "wins)\n");
}


/* the tenants' table, shared by the threads: found under a lock, counted
 * with atomics */

static mockllm_tenant_t  mockllm_tenants[MOCKLLM_TENANTS];
static size_t            mockllm_ntenants;
static pthread_mutex_t   mockllm_tenants_lock = PTHREAD_MUTEX_INITIALIZER;


mockllm_tenant_t *
mockllm_tenant(const char *name, size_t len)
{
    size_t             i;
    mockllm_tenant_t  *t;

    t = NULL;

    pthread_mutex_lock(&mockllm_tenants_lock);

    for (i = 0; i < mockllm_ntenants; i++) {
        if (mockllm_tenants[i].len == len
            && memcmp(mockllm_tenants[i].name, name, len) == 0)
        {
            t = &mockllm_tenants[i];
            break;
        }
    }

    /* a full table counts nothing more: the tests use a few tenants */
    if (t == NULL && mockllm_ntenants < MOCKLLM_TENANTS) {
        t = &mockllm_tenants[mockllm_ntenants++];
        memcpy(t->name, name, len);
        t->len = len;
    }

    pthread_mutex_unlock(&mockllm_tenants_lock);

    return t;
}


/* the request of c is over, one way or another */

void
mockllm_tenant_end(mockllm_conn_t *c)
{
    if (c->tenant != NULL) {
        __atomic_sub_fetch(&c->tenant->inflight, 1, __ATOMIC_RELAXED);
        c->tenant = NULL;
    }
}


void
mockllm_log(const char *fmt, ...)
{
    char     buf[512];
    va_list  args;

    va_start(args, fmt);
    vsnprintf(buf, sizeof(buf), fmt, args);
    va_end(args);

    fprintf(stderr, "mockllm: %s\n", buf);
}


static int
mockllm_parse_addr(const char *s, struct sockaddr_storage *sa,
    socklen_t *len)
{
    char                 host[64], *end;
    long                 port;
    const char          *colon;
    size_t               n;
    struct sockaddr_in  *sin;
    struct sockaddr_in6 *sin6;

    memset(sa, 0, sizeof(struct sockaddr_storage));

    colon = strrchr(s, ':');

    if (colon == NULL) {
        goto invalid;
    }

    errno = 0;
    port = strtol(colon + 1, &end, 10);

    if (errno || end == colon + 1 || *end != '\0' || port < 1
        || port > 65535)
    {
        goto invalid;
    }

    n = colon - s;

    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
        s++;
        n -= 2;
    }

    if (n == 0 || n >= sizeof(host)) {
        goto invalid;
    }

    memcpy(host, s, n);
    host[n] = '\0';

    if (strcmp(host, "localhost") == 0) {
        strcpy(host, "127.0.0.1");
    }

    sin = (struct sockaddr_in *) sa;
    sin6 = (struct sockaddr_in6 *) sa;

    if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t) port);
        *len = sizeof(struct sockaddr_in);

        if ((ntohl(sin->sin_addr.s_addr) >> 24) != 127) {
            goto remote;
        }

        return MOCKLLM_OK;
    }

    if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t) port);
        *len = sizeof(struct sockaddr_in6);

        if (!IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr)) {
            goto remote;
        }

        return MOCKLLM_OK;
    }

invalid:

    mockllm_log("invalid listen address \"%s\"", s);
    return MOCKLLM_ERROR;

remote:

    /* a mock must never be reachable from another machine */
    mockllm_log("\"%s\" is not a loopback address", host);
    return MOCKLLM_ERROR;
}


static int
mockllm_listen(struct sockaddr_storage *sa, socklen_t len, int reuseport)
{
    int  fd, on;

    fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        mockllm_log("socket() failed: %s", strerror(errno));
        return -1;
    }

    on = 1;

    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) == -1
        || (reuseport
            && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on))
               == -1))
    {
        mockllm_log("setsockopt() failed: %s", strerror(errno));
        close(fd);
        return -1;
    }

    if (bind(fd, (struct sockaddr *) sa, len) == -1) {
        mockllm_log("bind() failed: %s", strerror(errno));
        close(fd);
        return -1;
    }

    if (listen(fd, 4096) == -1) {
        mockllm_log("listen() failed: %s", strerror(errno));
        close(fd);
        return -1;
    }

    return fd;
}


/* thousands of paced streams need more than the usual 1024 descriptors */

static void
mockllm_raise_nofile(void)
{
    struct rlimit  rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;

        if (setrlimit(RLIMIT_NOFILE, &rl) == -1) {
            mockllm_log("setrlimit(RLIMIT_NOFILE) failed: %s",
                        strerror(errno));
        }
    }
}


static int
mockllm_loop_init(mockllm_loop_t *loop, int lfd)
{
    struct epoll_event  ev;

    loop->lfd = lfd;

    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->epfd == -1) {
        mockllm_log("epoll_create1() failed: %s", strerror(errno));
        return MOCKLLM_ERROR;
    }

    loop->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (loop->wakefd == -1) {
        mockllm_log("eventfd() failed: %s", strerror(errno));
        return MOCKLLM_ERROR;
    }

    ev.events = EPOLLIN | EPOLLET;
    ev.data.ptr = loop;

    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, lfd, &ev) == -1) {
        mockllm_log("epoll_ctl() failed: %s", strerror(errno));
        return MOCKLLM_ERROR;
    }

    ev.events = EPOLLIN;
    ev.data.ptr = &mockllm_wake_tag;

    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->wakefd, &ev) == -1) {
        mockllm_log("epoll_ctl() failed: %s", strerror(errno));
        return MOCKLLM_ERROR;
    }

    return MOCKLLM_OK;
}


static void *
mockllm_loop_run(void *data)
{
    int                  i, n, timeout;
    mockllm_conn_t      *c;
    mockllm_loop_t      *loop;
    struct epoll_event   events[MOCKLLM_EVENTS];

    loop = data;
    loop->now = mockllm_clock();

    for ( ;; ) {
        timeout = -1;

        if (loop->timers.n) {
            c = loop->timers.nodes[0];
            timeout = c->timer_at > loop->now
                      ? (int) (c->timer_at - loop->now) : 0;
        }

        n = epoll_wait(loop->epfd, events, MOCKLLM_EVENTS, timeout);

        if (n == -1) {
            if (errno == EINTR) {
                continue;
            }

            mockllm_log("epoll_wait() failed: %s", strerror(errno));
            mockllm_failed = 1;
            kill(getpid(), SIGTERM);
            return NULL;
        }

        loop->now = mockllm_clock();

        for (i = 0; i < n; i++) {

            if (events[i].data.ptr == &mockllm_wake_tag) {
                return NULL;
            }

            if (events[i].data.ptr == loop) {
                mockllm_accept(loop);
                continue;
            }

            c = events[i].data.ptr;

            if (events[i].events & (EPOLLERR | EPOLLHUP)) {
                mockllm_conn_close(c);
                continue;
            }

            if (mockllm_conn_run(c) == MOCKLLM_CLOSE) {
                mockllm_conn_close(c);
            }
        }

        while (loop->timers.n) {
            c = loop->timers.nodes[0];

            if (c->timer_at > loop->now) {
                break;
            }

            mockllm_timer_del(c);

            if (c->lingering) {
                mockllm_conn_close(c);
                continue;
            }

            mockllm_advance(c);

            if (mockllm_conn_run(c) == MOCKLLM_CLOSE) {
                mockllm_conn_close(c);
            }
        }
    }
}


static void
mockllm_loop_free(mockllm_loop_t *loop)
{
    while (loop->conns) {
        mockllm_conn_close(loop->conns);
    }

    free(loop->timers.nodes);

    close(loop->lfd);
    close(loop->wakefd);
    close(loop->epfd);
}


uint64_t
mockllm_clock(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return (uint64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


static void
mockllm_accept(mockllm_loop_t *loop)
{
    int                  fd, on;
    size_t               cap;
    mockllm_conn_t      *c, **nodes;
    struct epoll_event   ev;

    for ( ;; ) {
        fd = accept4(loop->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd == -1) {
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }

            if (errno != EAGAIN) {
                mockllm_log("accept4() failed: %s", strerror(errno));
            }

            return;
        }

        on = 1;
        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));

        /* a connection has at most one timer: the heap never grows later */
        if (loop->timers.cap <= loop->nconns) {
            cap = loop->timers.cap ? loop->timers.cap * 2 : 1024;

            nodes = realloc(loop->timers.nodes,
                            cap * sizeof(mockllm_conn_t *));
            if (nodes == NULL) {
                mockllm_log("realloc() failed");
                close(fd);
                continue;
            }

            loop->timers.nodes = nodes;
            loop->timers.cap = cap;
        }

        c = calloc(1, sizeof(mockllm_conn_t));
        if (c == NULL) {
            mockllm_log("calloc() failed");
            close(fd);
            continue;
        }

        c->fd = fd;
        c->loop = loop;
        c->timer_idx = SIZE_MAX;

        ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
        ev.data.ptr = c;

        if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) == -1) {
            mockllm_log("epoll_ctl() failed: %s", strerror(errno));
            close(fd);
            free(c);
            continue;
        }

        c->next = loop->conns;

        if (loop->conns) {
            loop->conns->prev = c;
        }

        loop->conns = c;
        loop->nconns++;
    }
}


/*
 * Drives a connection as far as it can go without waiting: sends what is
 * queued, finishes the response, takes the next request from the buffer
 * or the socket.  Edge-triggered, so it reads until EAGAIN whenever it is
 * idle; while a response is in progress the input is left in the socket.
 */

static int
mockllm_conn_run(mockllm_conn_t *c)
{
    int  rc;

    if (c->lingering) {
        return mockllm_conn_drain(c);
    }

    for ( ;; ) {
        if (c->in.oom || c->out.oom || c->tmp.oom || c->prefix.oom
            || c->model.oom || c->instr.oom || c->readout.oom)
        {
            mockllm_log("out of memory");
            return MOCKLLM_CLOSE;
        }

        if (c->sent < c->out.len) {
            rc = mockllm_conn_flush(c);

            if (rc == MOCKLLM_ERROR) {
                return MOCKLLM_CLOSE;
            }

            if (rc == MOCKLLM_AGAIN) {
                return MOCKLLM_OK;
            }
        }

        if (c->busy) {
            if (!c->done) {
                if (c->pump) {
                    c->pump = 0;
                    mockllm_advance(c);
                    continue;
                }

                if (c->stall) {
                    /*
                     * Nothing more is ever sent; the input is read only
                     * to see the peer's close, which ends the connection.
                     */
                    return mockllm_conn_drain(c);
                }

                return MOCKLLM_OK;
            }

            if (!c->close) {
                mockllm_http_finish(c);

            } else if (c->linger) {
                /* let the client read the error before a reset */
                shutdown(c->fd, SHUT_WR);
                c->lingering = 1;
                mockllm_timer_set(c, MOCKLLM_LINGER_MS);
                return mockllm_conn_drain(c);

            } else if (c->reset) {
                return mockllm_conn_reset(c);

            } else {
                return MOCKLLM_CLOSE;
            }
        }

        rc = mockllm_http_parse(c);

        if (rc == MOCKLLM_OK) {
            mockllm_handle(c);
            continue;
        }

        if (rc == MOCKLLM_ERROR) {
            mockllm_handle_bad(c);
            continue;
        }

        if (c->sent < c->out.len) {
            /* 100 Continue */
            continue;
        }

        rc = mockllm_conn_recv(c);

        if (rc != MOCKLLM_OK) {
            return rc == MOCKLLM_AGAIN ? MOCKLLM_OK : MOCKLLM_CLOSE;
        }
    }
}


static int
mockllm_conn_recv(mockllm_conn_t *c)
{
    char     *p;
    size_t    want, cap;
    ssize_t   n;

    want = c->in.len + MOCKLLM_RECV_MIN;

    /* a body of known length is read into a buffer of its size at once */
    if (c->hdr_len && !c->req.chunked
        && c->hdr_len + c->body_len > want)
    {
        want = c->hdr_len + c->body_len;
    }

    if (want > c->in.cap) {
        cap = c->in.cap ? c->in.cap : 2 * MOCKLLM_RECV_MIN;

        while (cap < want) {
            cap *= 2;
        }

        if (cap > MOCKLLM_IN_MAX) {
            cap = MOCKLLM_IN_MAX;
        }

        if (cap <= c->in.len) {
            /* the parser bounds every request well below this */
            mockllm_log("request too large");
            return MOCKLLM_ERROR;
        }

        p = realloc(c->in.data, cap);
        if (p == NULL) {
            mockllm_log("realloc() failed");
            return MOCKLLM_ERROR;
        }

        c->in.data = p;
        c->in.cap = cap;
    }

    for ( ;; ) {
        n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len, 0);

        if (n > 0) {
            c->in.len += n;
            return MOCKLLM_OK;
        }

        if (n == 0) {
            return MOCKLLM_CLOSE;
        }

        if (errno == EINTR) {
            continue;
        }

        if (errno == EAGAIN) {
            return MOCKLLM_AGAIN;
        }

        return MOCKLLM_ERROR;
    }
}


static int
mockllm_conn_flush(mockllm_conn_t *c)
{
    ssize_t  n;

    while (c->sent < c->out.len) {
        n = send(c->fd, c->out.data + c->sent, c->out.len - c->sent,
                 MSG_NOSIGNAL);

        if (n >= 0) {
            c->sent += n;
            continue;
        }

        if (errno == EINTR) {
            continue;
        }

        if (errno == EAGAIN) {
            return MOCKLLM_AGAIN;
        }

        return MOCKLLM_ERROR;
    }

    c->out.len = 0;
    c->sent = 0;

    return MOCKLLM_OK;
}


static int
mockllm_conn_drain(mockllm_conn_t *c)
{
    char     buf[4096];
    ssize_t  n;

    for ( ;; ) {
        n = recv(c->fd, buf, sizeof(buf), 0);

        if (n > 0) {
            continue;
        }

        if (n == -1 && errno == EINTR) {
            continue;
        }

        if (n == -1 && errno == EAGAIN) {
            return MOCKLLM_OK;
        }

        return MOCKLLM_CLOSE;
    }
}


/*
 * x-mock-die-how: reset.  A reset drops what the peer has not yet
 * acknowledged, so the ACKs are awaited first, polled on a short timer, for
 * the peer to see exactly the tokens before the cut; one that does not read
 * is reset anyway after MOCKLLM_LINGER_MS.
 */

static int
mockllm_conn_reset(mockllm_conn_t *c)
{
    int              n;
    struct linger    l;
    mockllm_resp_t  *r;

    r = &c->resp;

    if (r->reset_at == 0) {
        r->reset_at = c->loop->now + MOCKLLM_LINGER_MS;
    }

    if (ioctl(c->fd, SIOCOUTQ, &n) == 0 && n > 0
        && c->loop->now < r->reset_at)
    {
        mockllm_timer_set(c, MOCKLLM_RESET_POLL_MS);
        return MOCKLLM_OK;
    }

    l.l_onoff = 1;
    l.l_linger = 0;

    if (setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)) == -1) {
        mockllm_log("setsockopt(SO_LINGER) failed: %s", strerror(errno));
    }

    return MOCKLLM_CLOSE;
}


static void
mockllm_conn_close(mockllm_conn_t *c)
{
    mockllm_loop_t  *loop;

    loop = c->loop;

    mockllm_tenant_end(c);
    mockllm_limits_end(c);
    mockllm_timer_del(c);

    if (c->prev) {
        c->prev->next = c->next;

    } else {
        loop->conns = c->next;
    }

    if (c->next) {
        c->next->prev = c->prev;
    }

    loop->nconns--;

    close(c->fd);

    mockllm_buf_free(&c->in);
    mockllm_buf_free(&c->out);
    mockllm_buf_free(&c->tmp);
    mockllm_buf_free(&c->prefix);
    mockllm_buf_free(&c->model);
    mockllm_buf_free(&c->instr);
    mockllm_buf_free(&c->readout);

    free(c);
}


void
mockllm_timer_set(mockllm_conn_t *c, int64_t ms)
{
    mockllm_timer_add(c, c->loop->now + ms);
}


/*
 * The next tick of a paced stream counts from the last deadline, not from
 * when the loop got to it: under load a stream falls behind by the time
 * one pass of the loop takes, not by that time on every token.
 */

void
mockllm_timer_next(mockllm_conn_t *c, int64_t ms)
{
    mockllm_timer_add(c, c->timer_at + ms);
}


static void
mockllm_timer_add(mockllm_conn_t *c, uint64_t at)
{
    mockllm_heap_t  *h;

    mockllm_timer_del(c);

    h = &c->loop->timers;

    c->timer_at = at;
    c->timer_idx = h->n;
    h->nodes[h->n++] = c;

    mockllm_heap_up(h, c->timer_idx);
}


static void
mockllm_timer_del(mockllm_conn_t *c)
{
    size_t           i;
    mockllm_heap_t  *h;

    i = c->timer_idx;

    if (i == SIZE_MAX) {
        return;
    }

    h = &c->loop->timers;
    c->timer_idx = SIZE_MAX;

    if (i == --h->n) {
        return;
    }

    h->nodes[i] = h->nodes[h->n];
    h->nodes[i]->timer_idx = i;

    mockllm_heap_up(h, i);
    mockllm_heap_down(h, h->nodes[i]->timer_idx);
}


static void
mockllm_heap_up(mockllm_heap_t *h, size_t i)
{
    size_t           parent;
    mockllm_conn_t  *c;

    c = h->nodes[i];

    while (i > 0) {
        parent = (i - 1) / 2;

        if (h->nodes[parent]->timer_at <= c->timer_at) {
            break;
        }

        h->nodes[i] = h->nodes[parent];
        h->nodes[i]->timer_idx = i;
        i = parent;
    }

    h->nodes[i] = c;
    c->timer_idx = i;
}


static void
mockllm_heap_down(mockllm_heap_t *h, size_t i)
{
    size_t           child;
    mockllm_conn_t  *c;

    c = h->nodes[i];

    for ( ;; ) {
        child = 2 * i + 1;

        if (child >= h->n) {
            break;
        }

        if (child + 1 < h->n
            && h->nodes[child + 1]->timer_at < h->nodes[child]->timer_at)
        {
            child++;
        }

        if (c->timer_at <= h->nodes[child]->timer_at) {
            break;
        }

        h->nodes[i] = h->nodes[child];
        h->nodes[i]->timer_idx = i;
        i = child;
    }

    h->nodes[i] = c;
    c->timer_idx = i;
}
