
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
#include "mockllm_http.h"
#include "mockllm_limits.h"
#include "mockllm_llm.h"
#include "mockllm_log.h"
#include "mockllm_loop.h"


#define MOCKLLM_THREADS_MAX  64
#define MOCKLLM_RPM_MAX      1000000
#define MOCKLLM_LIMIT_MAX    1000000000000LL

/* mockllm_options(): -h, nothing more to do */
#define MOCKLLM_DONE         1


typedef struct {
    char                *addr;
    long                 threads;
    int64_t              rpm;
    int64_t              tpm;
    int64_t              quota;
    int64_t              period;
    int64_t              short_ms;
    int64_t              inflight;
} mockllm_opts_t;


static int mockllm_options(int argc, char **argv, mockllm_opts_t *o);
static int mockllm_listen(struct sockaddr_storage *sa, socklen_t len,
    int reuseport);
static int mockllm_parse_addr(const char *s, struct sockaddr_storage *sa,
    socklen_t *len);
static void mockllm_raise_nofile(void);
static int64_t mockllm_parse_num(const char *s, int64_t max);
static void mockllm_usage(void);


int
main(int argc, char **argv)
{
    int                      i, n, fd, sig, rc;
    sigset_t                 set;
    socklen_t                len;
    mockllm_opts_t           o;
    mockllm_loop_t          *loops;
    struct sockaddr_storage  sa;

    rc = mockllm_options(argc, argv, &o);
    if (rc != MOCKLLM_OK) {
        return rc == MOCKLLM_DONE ? 0 : 2;
    }

    if (mockllm_parse_addr(o.addr, &sa, &len) != MOCKLLM_OK) {
        return 2;
    }

    mockllm_limits_spent = mockllm_llm_spent;

    if (mockllm_limits_init(o.rpm, o.tpm, o.quota, o.period, o.short_ms,
                            o.inflight)
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

    loops = calloc(o.threads, sizeof(mockllm_loop_t));
    if (loops == NULL) {
        mockllm_log("calloc() failed");
        return 1;
    }

    n = (int) o.threads;

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
        (void) mockllm_loop_stop(&loops[i]);
    }

    for (i = 0; i < n; i++) {
        pthread_join(loops[i].tid, NULL);
        mockllm_loop_free(&loops[i]);
    }

    free(loops);

    return mockllm_failed ? 1 : 0;
}


static int
mockllm_options(int argc, char **argv, mockllm_opts_t *o)
{
    int    ch;
    char  *end;

    o->addr = NULL;
    o->threads = 1;
    o->rpm = 0;
    o->short_ms = 0;
    o->inflight = 0;
    o->tpm = 0;
    o->quota = 0;
    o->period = 86400;

    while ((ch = getopt(argc, argv, "l:t:r:s:c:T:D:P:d:h")) != -1) {
        switch (ch) {

        case 'l':
            o->addr = optarg;
            break;

        case 't':
            errno = 0;
            o->threads = strtol(optarg, &end, 10);

            if (errno || *end != '\0' || o->threads < 1
                || o->threads > MOCKLLM_THREADS_MAX)
            {
                mockllm_log("invalid thread count \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        case 'r':
            o->rpm = mockllm_parse_num(optarg, MOCKLLM_RPM_MAX);

            if (o->rpm < 1) {
                mockllm_log("invalid requests per minute \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        case 'c':
            o->inflight = mockllm_parse_num(optarg, 1000000);

            if (o->inflight < 1) {
                mockllm_log("invalid requests in flight \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        case 's':
            o->short_ms = mockllm_parse_num(optarg, 60000);

            if (o->short_ms < 1) {
                mockllm_log("invalid short window \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        case 'T':
            o->tpm = mockllm_parse_num(optarg, MOCKLLM_LIMIT_MAX);

            if (o->tpm < 1) {
                mockllm_log("invalid tokens per minute \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        case 'D':
            o->quota = mockllm_parse_num(optarg, MOCKLLM_LIMIT_MAX);

            if (o->quota < 1) {
                mockllm_log("invalid token quota \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        case 'P':
            o->period = mockllm_parse_num(optarg, MOCKLLM_LIMIT_MAX / 1000);

            if (o->period < 1) {
                mockllm_log("invalid quota period \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        case 'd':
            /* 0 is the default, and may be given */
            mockllm_http_delay = strcmp(optarg, "0") == 0
                            ? 0 : mockllm_parse_num(optarg, MOCKLLM_DELAY_MAX);

            if (mockllm_http_delay < 0) {
                mockllm_log("invalid token delay \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        default:
            mockllm_usage();
            return ch == 'h' ? MOCKLLM_DONE : MOCKLLM_ERROR;
        }
    }

    if (o->addr == NULL || optind != argc) {
        mockllm_usage();
        return MOCKLLM_ERROR;
    }

    return MOCKLLM_OK;
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


