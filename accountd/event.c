
/*
 * The event loop's mechanism, below every subsystem: one epoll instance,
 * the events registered in it, the monotonic clock that timers are read
 * against, and one wait with the dispatch of what it returned.  Which
 * subsystem runs in what order in an iteration is main.c's business; a
 * subsystem here only says which events of its descriptors it wants.
 */


#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "accountd.h"
#include "event.h"
#include "log.h"


#define EVENT_MAX                 64


int  acd_shutting_down;

static int  event_epoll = -1;


int
event_init(void)
{
    event_epoll = epoll_create1(EPOLL_CLOEXEC);

    return event_epoll == -1 ? -1 : 0;
}


void
event_done(void)
{
    if (event_epoll != -1) {
        close(event_epoll);
        event_epoll = -1;
    }
}


int
event_set(acd_event_t *ev, uint32_t events)
{
    struct epoll_event  ee;

    if (events == 0) {
        event_del(ev);
        return 0;
    }

    if (ev->active && ev->events == events) {
        return 0;
    }

    ee.events = events;
    ee.data.ptr = ev;

    if (ev->active) {
        if (epoll_ctl(event_epoll, EPOLL_CTL_MOD, ev->fd, &ee) == 0) {
            ev->events = events;
            return 0;
        }

        if (errno != ENOENT) {
            log_error("epoll_ctl(MOD, %d) failed: %s", ev->fd,
                      strerror(errno));
            return -1;
        }
    }

    if (epoll_ctl(event_epoll, EPOLL_CTL_ADD, ev->fd, &ee) == -1) {
        log_error("epoll_ctl(ADD, %d) failed: %s", ev->fd, strerror(errno));
        return -1;
    }

    ev->active = 1;
    ev->events = events;

    return 0;
}


void
event_del(acd_event_t *ev)
{
    if (ev->active) {

        /* the descriptor may be closed already: the kernel forgot it */
        (void) epoll_ctl(event_epoll, EPOLL_CTL_DEL, ev->fd, NULL);

        ev->active = 0;
        ev->events = 0;
    }
}


int64_t
event_now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


/*
 * Waits for events until "at" (0: no timer is set) and runs their
 * handlers.  Returns 1 if the wait was interrupted, -1 if it failed.
 */

int
event_process(int64_t at)
{
    int                 i, n, timeout;
    int64_t             now;
    acd_event_t        *ev;
    struct epoll_event  events[EVENT_MAX];

    now = event_now();

    if (at == 0) {
        timeout = -1;

    } else if (at <= now) {
        timeout = 0;

    } else {
        timeout = at - now > INT_MAX ? INT_MAX : (int) (at - now);
    }

    n = epoll_wait(event_epoll, events, EVENT_MAX, timeout);

    if (n == -1) {
        if (errno == EINTR) {
            return 1;
        }

        log_error("epoll_wait() failed: %s, exiting", strerror(errno));
        return -1;
    }

    for (i = 0; i < n; i++) {
        ev = events[i].data.ptr;
        ev->handler(ev, events[i].events);
    }

    return 0;
}
