
/*
 * The HTTP/1.1 client of the benchmarks' C programs (ttfb, streams): a
 * URL, the streaming chat completion they send, a connection, a response
 * read incrementally with its SSE events timed as they arrive, and the
 * percentiles of what was timed.  No name to resolve, no TLS: the targets
 * are on the loopback.
 */

#ifndef _BENCH_CLIENT_H_INCLUDED_
#define _BENCH_CLIENT_H_INCLUDED_


#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>


#define BENCH_REQ_MAX  2048


/* http://127.0.0.1:PORT/PATH */

typedef struct {
    char                 host[64];      /* "127.0.0.1:PORT", for Host */
    const char          *path;
    struct sockaddr_in   addr;
} bench_url_t;


/* what varies between the requests of the benchmarks */

typedef struct {
    const char          *content;       /* the user's message */
    int                  max_tokens;
    int                  tokens;        /* x-mock-tokens */
    int                  delay_ms;      /* x-mock-delay-ms, 0: none */
    int                  close;         /* "Connection: close" */
    const char          *model;         /* NULL: mock-gpt-4o-mini */
} bench_req_t;


enum {
    BENCH_ST_HEAD = 0,
    BENCH_ST_SIZE,
    BENCH_ST_SIZE_EXT,
    BENCH_ST_DATA,
    BENCH_ST_DATA_END,
    BENCH_ST_TRAILER,
    BENCH_ST_TRAILER_LINE,
    BENCH_ST_LENGTH,
    BENCH_ST_UNTIL_CLOSE,
    BENCH_ST_DONE
};


typedef struct bench_resp_s  bench_resp_t;

typedef void (*bench_resp_handler_pt)(bench_resp_t *r, uint64_t now);


/* an HTTP/1.1 response read incrementally, at any split of its bytes */

struct bench_resp_s {
    int                     state;
    int                     status;
    int                     chunked;
    int                     close;
    int                     line;       /* matched of "data:", -1: none */
    int64_t                 left;       /* of the chunk or the body */
    int64_t                 events;
    uint64_t                t_hdr;      /* the end of the headers came */
    uint64_t                t_evt;      /* the first event came */
    char                   *head;       /* until the headers are in */
    size_t                  head_len;
    size_t                  head_max;
    char                   *snip;       /* the first body bytes, or NULL */
    size_t                  snip_len;
    size_t                  snip_max;

    /* once the headers are parsed: on_head may free head */
    bench_resp_handler_pt   on_head;
    /* at each event, with events still the count of those before it */
    bench_resp_handler_pt   on_event;
    void                   *data;
};


/* nearest-rank percentiles */

typedef struct {
    size_t               n;
    double               p50;
    double               p90;
    double               p99;
    double               p999;
    double               mean;
    double               min;
    double               max;
} bench_stats_t;


uint64_t bench_now(void);
int bench_url(bench_url_t *u, const char *url);
size_t bench_request(bench_url_t *u, bench_req_t *q, char *buf);
int bench_connect(bench_url_t *u, int nonblock, int timeout_ms);
int bench_connected(int fd);
void bench_resp_init(bench_resp_t *r, char *head, size_t head_max,
    char *snip, size_t snip_max);
int bench_resp_feed(bench_resp_t *r, const char *p, size_t n, uint64_t now);
void bench_stats(double *v, size_t n, bench_stats_t *st);


#endif /* _BENCH_CLIENT_H_INCLUDED_ */
