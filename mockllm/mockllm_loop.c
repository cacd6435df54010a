
/*
 * The event loop of one thread, apart from the protocol: its own epoll
 * instance and SO_REUSEPORT listener, the connections it accepted, their
 * reads and writes, and the timers that fire on them.  A connection is
 * driven as far as it can go without waiting; what to answer is asked of
 * the protocol (mockllm_http.c parses a request, mockllm_llm.c answers
 * it and advances its response on every tick).
 */


/* accept4() */
#define _GNU_SOURCE

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>

#include "mockllm.h"
#include "mockllm_buf.h"
#include "mockllm_http.h"
#include "mockllm_limits.h"
#include "mockllm_llm.h"
#include "mockllm_log.h"
#include "mockllm_loop.h"
#include "mockllm_tenant.h"
#include "mockllm_timer.h"


#define MOCKLLM_EVENTS          512
#define MOCKLLM_RECV_MIN        4096
#define MOCKLLM_LINGER_MS       2000
#define MOCKLLM_RESET_POLL_MS   5


static void mockllm_accept(mockllm_loop_t *loop);
static int mockllm_conn_run(mockllm_conn_t *c);
static int mockllm_conn_recv(mockllm_conn_t *c);
static int mockllm_conn_flush(mockllm_conn_t *c);
static int mockllm_conn_drain(mockllm_conn_t *c);
static int mockllm_conn_reset(mockllm_conn_t *c);
static void mockllm_conn_close(mockllm_conn_t *c);


volatile int  mockllm_failed;

static char   mockllm_wake_tag;


int
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


void *
mockllm_loop_run(void *data)
{
    int                  i, n, timeout;
    mockllm_conn_t      *c;
    mockllm_loop_t      *loop;
    struct epoll_event   events[MOCKLLM_EVENTS];

    loop = data;
    loop->now = mockllm_timer_now();

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

        loop->now = mockllm_timer_now();

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

            mockllm_llm_advance(c);

            if (mockllm_conn_run(c) == MOCKLLM_CLOSE) {
                mockllm_conn_close(c);
            }
        }
    }
}


void
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


/* from the main thread: the loop returns at its next wake-up */

int
mockllm_loop_stop(mockllm_loop_t *loop)
{
    if (eventfd_write(loop->wakefd, 1) == -1) {
        mockllm_log("eventfd_write() failed: %s", strerror(errno));
        return MOCKLLM_ERROR;
    }

    return MOCKLLM_OK;
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
            || c->model.oom || c->instr.oom || c->readout.oom
            || c->calls.oom)
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
                    mockllm_llm_advance(c);
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
            mockllm_llm_handle(c);
            continue;
        }

        if (rc == MOCKLLM_ERROR) {
            mockllm_llm_handle_bad(c);
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
    mockllm_buf_free(&c->calls);

    free(c);
}
