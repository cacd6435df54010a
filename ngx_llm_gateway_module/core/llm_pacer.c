
/*
 * The outbound pacer: a sliding one-minute ledger, even spacing and a FIFO
 * queue of planned starts; see llm_pacer.h.
 */


#include "llm_pacer.h"


/* the i-th entry from the head; head and i are below size, below 2^31 */

static inline llm_pacer_entry_t *
llm_pacer_at(llm_pacer_t *p, uint32_t i)
{
    i += p->head;

    return &p->entry[i >= p->size ? i - p->size : i];
}


static int64_t
llm_pacer_clamp(int64_t tokens)
{
    if (tokens < 0) {
        return 0;
    }

    return tokens > LLM_PACER_MAX ? LLM_PACER_MAX : tokens;
}


static void llm_pacer_remove(llm_pacer_t *p, uint32_t i);


uint32_t
llm_pacer_entries(const llm_pacer_conf_t *cf)
{
    int64_t  n;

    if (cf->rpm <= 0) {
        return 0;
    }

    n = cf->rpm + (int64_t) cf->max_queue;

    return n > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t) n;
}


size_t
llm_pacer_size(uint32_t n)
{
    return sizeof(llm_pacer_t) + (size_t) n * sizeof(llm_pacer_entry_t);
}


llm_pacer_t *
llm_pacer_init(void *mem, size_t size, const llm_pacer_conf_t *cf,
    int64_t now_ms)
{
    size_t        n;
    llm_pacer_t  *p;

    if (size < llm_pacer_size(1)
        || cf->rpm < 0 || cf->rpm > LLM_PACER_MAX
        || cf->tpm < 0 || cf->tpm > LLM_PACER_MAX
        || cf->max_wait_ms < 0 || cf->stale_ms < 0)
    {
        return NULL;
    }

    n = (size - sizeof(llm_pacer_t)) / sizeof(llm_pacer_entry_t);

    p = mem;

    p->conf = *cf;

    /* rounded up, so that spacing alone never lets RPM + 1 into a minute */
    p->spacing_ms = cf->rpm
                    ? (LLM_PACER_WINDOW + cf->rpm - 1) / cf->rpm : 0;

    p->now_ms = now_ms;
    p->tokens = 0;
    p->queued = 0;
    p->next_ticket = 1;
    p->size = n > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t) n;
    p->head = 0;
    p->started = 0;
    p->waiting = 0;

    return p;
}


/*
 * The earliest start, not before now, for a request of tokens after the
 * first n entries (started, then planned), whose tokens sum to sum.  It
 * is never before the last of them: FIFO.  Each limit gives a bound of the
 * form "this entry has left the window", so the latest bound is the
 * answer, and every later minute only loses entries.
 */

static int64_t
llm_pacer_place(llm_pacer_t *p, uint32_t n, int64_t sum, int64_t tokens,
    int64_t now)
{
    int64_t             t, bound;
    uint32_t            i;
    llm_pacer_entry_t  *e;

    t = now;

    if (n == 0) {
        return t;
    }

    bound = llm_pacer_at(p, n - 1)->start_ms + p->spacing_ms;
    t = bound > t ? bound : t;

    if (p->conf.rpm && (int64_t) n >= p->conf.rpm) {
        bound = llm_pacer_at(p, n - p->conf.rpm)->start_ms + LLM_PACER_WINDOW;
        t = bound > t ? bound : t;
    }

    if (p->conf.tpm && sum + tokens > p->conf.tpm) {

        /* tokens <= tpm: at the latest, all n have left and it fits */
        e = NULL;

        for (i = 0; i < n && sum + tokens > p->conf.tpm; i++) {
            e = llm_pacer_at(p, i);
            sum -= e->tokens;
        }

        bound = e->start_ms + LLM_PACER_WINDOW;
        t = bound > t ? bound : t;
    }

    return t;
}


/*
 * The plan of a new request were tokens no limit: one spacing after the
 * last start, one after each waiter.  The RPM window adds nothing to it,
 * as RPM spacings, rounded up, are at least a minute.
 */

static int64_t
llm_pacer_requests_bound(llm_pacer_t *p, int64_t now)
{
    int64_t  t;

    t = now;

    if (p->started) {
        t = llm_pacer_at(p, p->started - 1)->start_ms + p->spacing_ms;
        t = t > now ? t : now;
    }

    return t + (int64_t) p->waiting * p->spacing_ms;
}


/* the waiters from the k-th on planned again, at now */

static void
llm_pacer_replan(llm_pacer_t *p, uint32_t k)
{
    int64_t             sum;
    uint32_t            i, n;
    llm_pacer_entry_t  *e;

    sum = p->tokens;

    for (i = 0; i < k; i++) {
        sum += llm_pacer_at(p, p->started + i)->tokens;
    }

    for (i = k; i < p->waiting; i++) {
        n = p->started + i;
        e = llm_pacer_at(p, n);
        e->start_ms = llm_pacer_place(p, n, sum, e->tokens, p->now_ms);
        sum += e->tokens;
    }
}


/*
 * The clock, the window and the plans brought to now.  Plans made earlier
 * stay right as long as the first waiter's is not past: each is the
 * earliest time after the previous one, and now is not after it.  A first
 * waiter whose plan has passed has not been started by its caller yet,
 * and the waiters behind it move with it.
 */

static void
llm_pacer_update(llm_pacer_t *p, int64_t now_ms)
{
    uint32_t            i;
    llm_pacer_entry_t  *e;

    if (now_ms > p->now_ms) {
        p->now_ms = now_ms;
    }

    while (p->started) {
        e = llm_pacer_at(p, 0);

        if (e->start_ms + LLM_PACER_WINDOW > p->now_ms) {
            break;
        }

        p->tokens -= e->tokens;
        p->head = (p->head + 1 == p->size) ? 0 : p->head + 1;
        p->started--;
    }

    /*
     * Every waiter silent for stale_ms goes, wherever it is in the queue:
     * its callers ask far more often than that, so it is a dead one, and
     * each dead one ahead would otherwise hold the queue stale_ms more.
     */
    if (p->conf.stale_ms) {
        i = p->started;

        while (i < p->started + p->waiting) {
            if (llm_pacer_at(p, i)->seen_ms + p->conf.stale_ms < p->now_ms) {
                llm_pacer_remove(p, i);
                continue;
            }

            i++;
        }
    }

    if (p->waiting && llm_pacer_at(p, p->started)->start_ms < p->now_ms) {
        llm_pacer_replan(p, 0);
    }
}


/* the waiter at i leaves; the ones behind it are planned again */

static void
llm_pacer_remove(llm_pacer_t *p, uint32_t i)
{
    uint32_t  k;

    k = i - p->started;

    p->queued -= llm_pacer_at(p, i)->tokens;

    for ( /* void */ ; i + 1 < p->started + p->waiting; i++) {
        *llm_pacer_at(p, i) = *llm_pacer_at(p, i + 1);
    }

    p->waiting--;

    llm_pacer_replan(p, k);
}


/* tickets only grow along the ring: a binary search of [lo, hi) */

static int64_t
llm_pacer_find(llm_pacer_t *p, uint32_t lo, uint32_t hi, uint64_t ticket)
{
    uint32_t            mid;
    llm_pacer_entry_t  *e;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        e = llm_pacer_at(p, mid);

        if (e->ticket == ticket) {
            return mid;
        }

        if (e->ticket < ticket) {
            lo = mid + 1;

        } else {
            hi = mid;
        }
    }

    return -1;
}


llm_pacer_rc_e
llm_pacer_ask(llm_pacer_t *p, int64_t tokens, int64_t now_ms,
    int64_t *start_at, uint64_t *ticket)
{
    int64_t             t, now;
    uint32_t            n;
    llm_pacer_entry_t  *e;

    llm_pacer_update(p, now_ms);

    now = p->now_ms;
    tokens = llm_pacer_clamp(tokens);

    *start_at = now;
    *ticket = 0;

    if (p->conf.tpm && tokens > p->conf.tpm) {
        return LLM_PACER_TOO_LARGE;
    }

    n = p->started + p->waiting;

    if (n == p->size) {
        return LLM_PACER_FULL;
    }

    t = llm_pacer_place(p, n, p->tokens + p->queued, tokens, now);

    /* a start due now still waits behind a waiter that has not gone */
    if (t > now || p->waiting) {

        if (p->waiting >= p->conf.max_queue) {
            return LLM_PACER_FULL;
        }

        /*
         * Only the requests bound the wait for sure: a plan held back by
         * tokens assumes every estimate is used for a whole minute, and
         * the corrections bring it forward, often by far.
         */
        if (llm_pacer_requests_bound(p, now) - now > p->conf.max_wait_ms) {
            *start_at = t;
            return LLM_PACER_TOO_LONG;
        }
    }

    e = llm_pacer_at(p, n);
    e->ticket = p->next_ticket++;
    e->start_ms = t;
    e->tokens = tokens;
    e->seen_ms = now;

    *start_at = t;
    *ticket = e->ticket;

    if (p->waiting) {
        p->waiting++;
        p->queued += tokens;
        return LLM_PACER_WAIT;
    }

    if (t > now) {
        p->waiting = 1;
        p->queued = tokens;
        return LLM_PACER_WAIT;
    }

    p->started++;
    p->tokens += tokens;

    return LLM_PACER_GO;
}


llm_pacer_rc_e
llm_pacer_go(llm_pacer_t *p, uint64_t ticket, int64_t now_ms,
    int64_t *start_at)
{
    int64_t             i;
    llm_pacer_entry_t  *e;

    llm_pacer_update(p, now_ms);

    *start_at = p->now_ms;

    i = llm_pacer_find(p, 0, p->started + p->waiting, ticket);

    if (i < 0) {
        return LLM_PACER_NOT_FOUND;
    }

    e = llm_pacer_at(p, i);
    *start_at = e->start_ms;

    if (i < p->started) {
        return LLM_PACER_GO;
    }

    e->seen_ms = p->now_ms;

    /* after the update, the first waiter's plan is now at the earliest */
    if (i > p->started || e->start_ms > p->now_ms) {
        return LLM_PACER_WAIT;
    }

    p->started++;
    p->waiting--;
    p->tokens += e->tokens;
    p->queued -= e->tokens;

    return LLM_PACER_GO;
}


int
llm_pacer_cancel(llm_pacer_t *p, uint64_t ticket, int64_t now_ms)
{
    int64_t  i;

    llm_pacer_update(p, now_ms);

    i = llm_pacer_find(p, p->started, p->started + p->waiting, ticket);

    if (i < 0) {
        return -1;
    }

    llm_pacer_remove(p, (uint32_t) i);

    return 0;
}


int
llm_pacer_correct(llm_pacer_t *p, uint64_t ticket, int64_t tokens,
    int64_t now_ms)
{
    int64_t             i;
    llm_pacer_entry_t  *e;

    llm_pacer_update(p, now_ms);

    i = llm_pacer_find(p, 0, p->started, ticket);

    if (i < 0) {
        return -1;
    }

    tokens = llm_pacer_clamp(tokens);

    e = llm_pacer_at(p, i);

    if (e->tokens != tokens) {
        p->tokens += tokens - e->tokens;
        e->tokens = tokens;

        llm_pacer_replan(p, 0);
    }

    return 0;
}


int
llm_pacer_next(llm_pacer_t *p, int64_t now_ms, uint64_t *ticket,
    int64_t *start_at)
{
    llm_pacer_entry_t  *e;

    llm_pacer_update(p, now_ms);

    if (p->waiting == 0) {
        *ticket = 0;
        *start_at = p->now_ms;
        return 0;
    }

    e = llm_pacer_at(p, p->started);

    *ticket = e->ticket;
    *start_at = e->start_ms;

    return 1;
}


void
llm_pacer_window(llm_pacer_t *p, int64_t now_ms, int64_t *requests,
    int64_t *tokens)
{
    llm_pacer_update(p, now_ms);

    *requests = p->started;
    *tokens = p->tokens;
}
