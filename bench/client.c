
/*
 * The HTTP/1.1 client of the benchmarks' C programs: see client.h.
 */


#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "client.h"


static void bench_resp_head(bench_resp_t *r);
static int bench_cmp(const void *a, const void *b);


static const char  bench_body_fmt[] =
    "{\"model\":\"%s\",\"stream\":true,\"max_tokens\":%d,"
    "\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}";


uint64_t
bench_now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}


/* http://127.0.0.1:PORT/PATH: an IPv4 address, no name to resolve */

int
bench_url(bench_url_t *u, const char *url)
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
        || (size_t) (slash - host) >= sizeof(u->host))
    {
        return -1;
    }

    memcpy(u->host, host, colon - host);
    u->host[colon - host] = '\0';

    memset(&u->addr, 0, sizeof(u->addr));
    u->addr.sin_family = AF_INET;

    if (inet_pton(AF_INET, u->host, &u->addr.sin_addr) != 1) {
        return -1;
    }

    port = strtol(colon + 1, &end, 10);
    if (end != slash || port < 1 || port > 65535) {
        return -1;
    }

    u->addr.sin_port = htons((uint16_t) port);

    memcpy(u->host, host, slash - host);
    u->host[slash - host] = '\0';
    u->path = slash;

    return 0;
}


/*
 * A streaming chat completion of BENCH_REQ_MAX bytes at most, the mock's
 * pace in its headers.  $LLMGW_KEY, when set, goes in Authorization (the
 * mock ignores it): the bytes are the same for every target, apart from
 * the path and Host.
 */

size_t
bench_request(bench_url_t *u, bench_req_t *q, char *buf)
{
    int          n, len;
    char         body[512], auth[256], delay[64];
    const char  *key;

    len = snprintf(body, sizeof(body), bench_body_fmt,
                   q->model ? q->model : "mock-gpt-4o-mini", q->max_tokens,
                   q->content);

    auth[0] = '\0';
    key = getenv("LLMGW_KEY");

    if (key) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %.200s\r\n",
                 key);
    }

    delay[0] = '\0';
    if (q->delay_ms) {
        snprintf(delay, sizeof(delay), "x-mock-delay-ms: %d\r\n",
                 q->delay_ms);
    }

    n = snprintf(buf, BENCH_REQ_MAX,
                 "POST %s HTTP/1.1\r\n"
                 "Host: %s\r\n"
                 "%s"
                 "Content-Type: application/json\r\n"
                 "Accept: text/event-stream\r\n"
                 "%s"
                 "x-mock-tokens: %d\r\n"
                 "x-mock-ttfb-ms: 0\r\n"
                 "%s"
                 "Content-Length: %d\r\n"
                 "\r\n"
                 "%s",
                 u->path, u->host, q->close ? "Connection: close\r\n" : "",
                 auth, q->tokens, delay, len, body);

    return (size_t) n;
}


/*
 * A blocking socket gets timeout_ms for every send and recv; a
 * nonblocking one is connecting, to be waited for with EPOLLOUT and
 * bench_connected().  -1 and errno on failure.
 */

int
bench_connect(bench_url_t *u, int nonblock, int timeout_ms)
{
    int             fd, one, err;
    struct timeval  tv;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC
                         | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd == -1) {
        return -1;
    }

    /* the request is one write; nothing should wait for Nagle */
    one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

    if (!nonblock) {
        /* a server that stops answering ends the run, not hangs it */
        tv.tv_sec = timeout_ms / 1000;
        tv.tv_usec = (timeout_ms % 1000) * 1000;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    }

    if (connect(fd, (struct sockaddr *) &u->addr, sizeof(u->addr)) == -1
        && !(nonblock && errno == EINPROGRESS))
    {
        err = errno;
        close(fd);
        errno = err;
        return -1;
    }

    return fd;
}


/* a nonblocking connect has ended: 0, or its errno */

int
bench_connected(int fd)
{
    int        err;
    socklen_t  len;

    err = 0;
    len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);

    return err;
}


/*
 * head: head_max bytes for the headers; snip: snip_max bytes for the
 * first of the body, for a message when it is not what was expected, or
 * NULL.  The handlers are the caller's to set after.
 */

void
bench_resp_init(bench_resp_t *r, char *head, size_t head_max, char *snip,
    size_t snip_max)
{
    memset(r, 0, sizeof(bench_resp_t));

    r->state = BENCH_ST_HEAD;
    r->head = head;
    r->head_max = head_max;
    r->snip = snip;
    r->snip_max = snip ? snip_max : 0;
}


/*
 * Feeds what one recv() returned, which arrived at "now".  Returns 1 when
 * the response is complete, 0 for more, -1 when it is malformed or cut.
 * A body without length or chunks ends at the close: the caller says so
 * with n == 0.
 */

int
bench_resp_feed(bench_resp_t *r, const char *p, size_t n, uint64_t now)
{
    char         ch;
    size_t       k;
    const char  *end, *nl;

    static const char  data[] = "data:";

    end = p + n;

    if (n == 0) {
        if (r->state == BENCH_ST_UNTIL_CLOSE) {
            r->state = BENCH_ST_DONE;
            return 1;
        }

        return r->state == BENCH_ST_DONE ? 1 : -1;
    }

    while (p < end) {

        switch (r->state) {

        case BENCH_ST_HEAD:
            if (r->head_len == r->head_max - 1) {
                return -1;
            }

            r->head[r->head_len++] = *p++;

            if (r->head_len >= 4
                && memcmp(r->head + r->head_len - 4, "\r\n\r\n", 4) == 0)
            {
                r->head[r->head_len] = '\0';
                r->t_hdr = now;
                bench_resp_head(r);

                if (r->on_head) {
                    r->on_head(r, now);
                }
            }

            break;

        case BENCH_ST_SIZE:
            ch = *p++;

            if (ch >= '0' && ch <= '9') {
                r->left = r->left * 16 + (ch - '0');

            } else if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f') {
                r->left = r->left * 16 + ((ch | 0x20) - 'a' + 10);

            } else if (ch == ';' || ch == '\r') {
                r->state = BENCH_ST_SIZE_EXT;

            } else if (ch == '\n') {
                r->state = r->left ? BENCH_ST_DATA : BENCH_ST_TRAILER;

            } else {
                return -1;
            }

            if (r->left > (int64_t) 1 << 40) {
                return -1;
            }

            break;

        case BENCH_ST_SIZE_EXT:
            if (*p++ == '\n') {
                r->state = r->left ? BENCH_ST_DATA : BENCH_ST_TRAILER;
            }

            break;

        case BENCH_ST_DATA:
        case BENCH_ST_LENGTH:
        case BENCH_ST_UNTIL_CLOSE:
            k = end - p;

            if (r->state != BENCH_ST_UNTIL_CLOSE && (int64_t) k > r->left) {
                k = (size_t) r->left;
            }

            if (r->snip_len < r->snip_max) {
                n = r->snip_max - r->snip_len;
                n = n < k ? n : k;
                memcpy(r->snip + r->snip_len, p, n);
                r->snip_len += n;
            }

            r->left -= k;

            /*
             * An event is a line that begins "data:", wherever the chunks
             * and the reads split it; the rest of a line is skipped.
             */

            while (k) {
                if (r->line < 0) {
                    nl = memchr(p, '\n', k);

                    if (nl == NULL) {
                        p += k;
                        break;
                    }

                    k -= nl + 1 - p;
                    p = nl + 1;
                    r->line = 0;
                    continue;
                }

                ch = *p++;
                k--;

                if (ch == data[r->line]) {
                    if (++r->line == 5) {
                        if (r->events == 0) {
                            r->t_evt = now;
                        }

                        if (r->on_event) {
                            r->on_event(r, now);
                        }

                        r->events++;
                        r->line = -1;
                    }

                } else {
                    r->line = ch == '\n' ? 0 : -1;
                }
            }

            if (r->state == BENCH_ST_DATA && r->left == 0) {
                r->state = BENCH_ST_DATA_END;

            } else if (r->state == BENCH_ST_LENGTH && r->left == 0) {
                r->state = BENCH_ST_DONE;
            }

            break;

        case BENCH_ST_DATA_END:
            ch = *p++;

            if (ch == '\n') {
                r->state = BENCH_ST_SIZE;

            } else if (ch != '\r') {
                return -1;
            }

            break;

        case BENCH_ST_TRAILER:
            ch = *p++;

            if (ch == '\n') {
                r->state = BENCH_ST_DONE;

            } else if (ch != '\r') {
                r->state = BENCH_ST_TRAILER_LINE;
            }

            break;

        case BENCH_ST_TRAILER_LINE:
            if (*p++ == '\n') {
                r->state = BENCH_ST_TRAILER;
            }

            break;

        case BENCH_ST_DONE:
            /* nothing may follow a response we did not pipeline */
            return -1;
        }
    }

    return r->state == BENCH_ST_DONE ? 1 : 0;
}


/* the status, and how the body is framed */

static void
bench_resp_head(bench_resp_t *r)
{
    char  *line, *v;

    r->status = 0;

    if (strncmp(r->head, "HTTP/1.", 7) == 0 && r->head_len > 12) {
        r->status = atoi(r->head + 9);
    }

    r->state = BENCH_ST_UNTIL_CLOSE;
    r->left = 0;

    for (line = strstr(r->head, "\r\n"); line; line = strstr(line, "\r\n")) {
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
            r->chunked = 1;
            r->state = BENCH_ST_SIZE;

        } else if (strncasecmp(line, "content-length:", 15) == 0
                   && !r->chunked)
        {
            r->left = strtoll(v, NULL, 10);
            r->state = r->left ? BENCH_ST_LENGTH : BENCH_ST_DONE;

        } else if (strncasecmp(line, "connection:", 11) == 0
                   && strncasecmp(v, "close", 5) == 0)
        {
            r->close = 1;
        }
    }
}


/* of a copy: v keeps its order */

void
bench_stats(double *v, size_t n, bench_stats_t *st)
{
    size_t   i;
    double  *s, sum;

    memset(st, 0, sizeof(bench_stats_t));
    st->n = n;

    if (n == 0) {
        return;
    }

    s = malloc(n * sizeof(double));
    if (s == NULL) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }

    memcpy(s, v, n * sizeof(double));
    qsort(s, n, sizeof(double), bench_cmp);

    sum = 0;
    for (i = 0; i < n; i++) {
        sum += s[i];
    }

#define bench_rank(p)  s[(size_t) ceil((p) / 100.0 * n) - 1]

    st->p50 = bench_rank(50);
    st->p90 = bench_rank(90);
    st->p99 = bench_rank(99);
    st->p999 = bench_rank(99.9);
    st->mean = sum / n;
    st->min = s[0];
    st->max = s[n - 1];

#undef bench_rank

    free(s);
}


static int
bench_cmp(const void *a, const void *b)
{
    double  x, y;

    x = *(const double *) a;
    y = *(const double *) b;

    return (x > y) - (x < y);
}
