
/*
 * The timers of a loop: at most one a connection, in a binary heap by
 * deadline, so that thousands of paced streams cost a log a tick.  Delays
 * are timers, never a sleep.  The clock is the monotonic one, in
 * milliseconds.
 */


#include <stdint.h>
#include <time.h>

#include "mockllm.h"
#include "mockllm_timer.h"


static void mockllm_timer_add(mockllm_conn_t *c, uint64_t at);
static void mockllm_heap_up(mockllm_heap_t *h, size_t i);
static void mockllm_heap_down(mockllm_heap_t *h, size_t i);


uint64_t
mockllm_timer_now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return (uint64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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


void
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
