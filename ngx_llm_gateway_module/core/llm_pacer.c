
/*
 * The outbound pacer: a sliding one-minute ledger, even spacing and a
 * queue of planned starts shared among tenants; see llm_pacer.h.
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
static void llm_pacer_leave(llm_pacer_t *p, uint32_t i);
static int64_t llm_pacer_victim(llm_pacer_t *p, uint64_t tenant,
    uint32_t cap);


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
    p->round = 0;
    p->evicted = 0;
    p->stale_at = 0;
    p->tenants = 0;
    p->size = n > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t) n;
    p->head = 0;
    p->started = 0;
    p->waiting = 0;

    return p;
}


/*
 * The earliest start, not before now, for a request of tokens after the
 * first n entries (started, then planned), whose tokens sum to sum.  It
 * is never before the last of them: their order.  Each limit gives a
 * bound of the form "this entry has left the window", so the latest bound
 * is the answer, and every later minute only loses entries.
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
 * The plan of a new request were tokens no limit, k waiters ahead of it:
 * one spacing after the last start, one after each of them.  The RPM
 * window adds nothing to it, as RPM spacings, rounded up, are at least a
 * minute.
 */

static int64_t
llm_pacer_requests_bound(llm_pacer_t *p, uint32_t k, int64_t now)
{
    int64_t  t;

    t = now;

    if (p->started) {
        t = llm_pacer_at(p, p->started - 1)->start_ms + p->spacing_ms;
        t = t > now ? t : now;
    }

    return t + (int64_t) k * p->spacing_ms;
}


/*
 * The waiters from the k-th on planned again, at now, in one pass: as
 * llm_pacer_place() for each, but the entries whose tokens must have left
 * for the next waiter's to fit are never fewer than for the one before
 * (the sum up to it and its own only grows), so the bound of tokens moves
 * forward with the waiters instead of starting again from the oldest.
 */

static void
llm_pacer_replan(llm_pacer_t *p, uint32_t k)
{
    int64_t             sum, gone, t, bound;
    uint32_t            i, j, n;
    llm_pacer_entry_t  *e;

    sum = p->tokens;

    for (i = 0; i < k; i++) {
        sum += llm_pacer_at(p, p->started + i)->tokens;
    }

    /* the entries [0, j) have left the window, gone their tokens */
    j = 0;
    gone = 0;

    for (i = k; i < p->waiting; i++) {
        n = p->started + i;
        e = llm_pacer_at(p, n);

        t = p->now_ms;

        if (n) {
            bound = llm_pacer_at(p, n - 1)->start_ms + p->spacing_ms;
            t = bound > t ? bound : t;
        }

        if (p->conf.rpm && (int64_t) n >= p->conf.rpm) {
            bound = llm_pacer_at(p, n - p->conf.rpm)->start_ms
                    + LLM_PACER_WINDOW;
            t = bound > t ? bound : t;
        }

        if (p->conf.tpm && sum + e->tokens > p->conf.tpm) {

            /* its tokens <= tpm: at the latest, all n have left */
            while (j < n && sum - gone + e->tokens > p->conf.tpm) {
                gone += llm_pacer_at(p, j)->tokens;
                j++;
            }

            bound = llm_pacer_at(p, j - 1)->start_ms + LLM_PACER_WINDOW;
            t = bound > t ? bound : t;
        }

        e->start_ms = t;
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
    int64_t             seen;
    uint32_t            i, k;
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
     * Until the one asked the longest ago may be, none is looked at.
     */
    k = p->waiting;

    if (p->conf.stale_ms && p->waiting && p->stale_at < p->now_ms) {
        i = p->started;
        seen = p->now_ms;

        while (i < p->started + p->waiting) {
            e = llm_pacer_at(p, i);

            if (e->seen_ms + p->conf.stale_ms < p->now_ms) {
                llm_pacer_leave(p, i);
                k = k < i - p->started ? k : i - p->started;
                continue;
            }

            seen = e->seen_ms < seen ? e->seen_ms : seen;
            i++;
        }

        p->stale_at = seen + p->conf.stale_ms;
    }

    if (p->waiting && llm_pacer_at(p, p->started)->start_ms < p->now_ms) {
        k = 0;
    }

    if (k < p->waiting) {
        llm_pacer_replan(p, k);
    }
}


/* does tenant have a waiter, but the one at i? */

static int
llm_pacer_waits(llm_pacer_t *p, uint64_t tenant, uint32_t i)
{
    uint32_t  n;

    for (n = p->started; n < p->started + p->waiting; n++) {
        if (n != i && llm_pacer_at(p, n)->tenant == tenant) {
            return 1;
        }
    }

    return 0;
}


/* the waiter at i leaves, the plans behind it not made again yet */

static void
llm_pacer_leave(llm_pacer_t *p, uint32_t i)
{
    llm_pacer_entry_t  *e;

    e = llm_pacer_at(p, i);

    p->queued -= e->tokens;

    if (!llm_pacer_waits(p, e->tenant, i)) {
        p->tenants--;
    }

    for ( /* void */ ; i + 1 < p->started + p->waiting; i++) {
        *llm_pacer_at(p, i) = *llm_pacer_at(p, i + 1);
    }

    p->waiting--;
}


/* the waiter at i leaves; the ones behind it are planned again */

static void
llm_pacer_remove(llm_pacer_t *p, uint32_t i)
{
    llm_pacer_leave(p, i);
    llm_pacer_replan(p, i - p->started);
}


/* the started entries' tickets only grow: a binary search */

static int64_t
llm_pacer_find(llm_pacer_t *p, uint64_t ticket)
{
    uint32_t            lo, hi, mid;
    llm_pacer_entry_t  *e;

    lo = 0;
    hi = p->started;

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


/* the waiters are in their order of starts, not of tickets: each looked at */

static int64_t
llm_pacer_find_waiter(llm_pacer_t *p, uint64_t ticket)
{
    uint32_t  i;

    for (i = p->started; i < p->started + p->waiting; i++) {
        if (llm_pacer_at(p, i)->ticket == ticket) {
            return i;
        }
    }

    return -1;
}


/*
 * The round of a new waiter of tenant, and its waiters in *mine: the
 * current round, unless it started in it already; the one after its last
 * waiter's.  The started entries' rounds grow along the ring, and none is
 * after the current one: only the last ones can be in it.
 */

static uint64_t
llm_pacer_round(llm_pacer_t *p, uint64_t tenant, uint32_t *mine)
{
    uint32_t            i;
    uint64_t            round;
    llm_pacer_entry_t  *e;

    round = p->round;
    *mine = 0;

    for (i = p->started; i > 0; i--) {
        e = llm_pacer_at(p, i - 1);

        if (e->round != p->round) {
            break;
        }

        if (e->tenant == tenant) {
            round = p->round + 1;
            break;
        }
    }

    for (i = p->started; i < p->started + p->waiting; i++) {
        e = llm_pacer_at(p, i);

        if (e->tenant == tenant) {
            (*mine)++;
            round = e->round + 1 > round ? e->round + 1 : round;
        }
    }

    return round;
}


/*
 * A tenant under its share, cap, finds the queue full: the newest waiter
 * of a tenant over the share is to leave.  One exists (the places of the
 * tenants within it and its own would not fill the queue); the last 8
 * tenants in the queue are looked at, the one planned furthest first.
 */

#define LLM_PACER_VICTIMS  8

static int64_t
llm_pacer_victim(llm_pacer_t *p, uint64_t tenant, uint32_t cap)
{
    uint32_t            i, n, seen, held;
    uint64_t            looked[LLM_PACER_VICTIMS];
    llm_pacer_entry_t  *e;

    seen = 0;

    for (i = p->started + p->waiting; i > p->started; i--) {
        e = llm_pacer_at(p, i - 1);

        if (e->tenant == tenant) {
            continue;
        }

        for (n = 0; n < seen && looked[n] != e->tenant; n++) {
            /* void */
        }

        if (n < seen) {
            continue;
        }

        held = 0;

        for (n = p->started; n < p->started + p->waiting; n++) {
            held += llm_pacer_at(p, n)->tenant == e->tenant;
        }

        if (held > cap) {
            return i - 1;
        }

        if (seen == LLM_PACER_VICTIMS) {
            break;
        }

        looked[seen++] = e->tenant;
    }

    return -1;
}


/* a new waiter's place in the queue: behind its round and the ones before */

static uint32_t
llm_pacer_behind(llm_pacer_t *p, uint64_t round)
{
    uint32_t  k;

    for (k = p->waiting; k > 0; k--) {
        if (llm_pacer_at(p, p->started + k - 1)->round <= round) {
            break;
        }
    }

    return k;
}


llm_pacer_rc_e
llm_pacer_ask(llm_pacer_t *p, int64_t tokens, int64_t now_ms,
    int64_t *start_at, uint64_t *ticket)
{
    return llm_pacer_ask_for(p, 0, tokens, now_ms, start_at, ticket);
}


llm_pacer_rc_e
llm_pacer_ask_for(llm_pacer_t *p, uint64_t tenant, int64_t tokens,
    int64_t now_ms, int64_t *start_at, uint64_t *ticket)
{
    int64_t             t, now, sum, v;
    uint32_t            n, i, k, mine, active, cap;
    uint64_t            round;
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

    if (p->waiting == 0) {

        if (n == p->size) {
            return LLM_PACER_FULL;
        }

        t = llm_pacer_place(p, n, p->tokens, tokens, now);

        if (t <= now) {
            e = llm_pacer_at(p, n);
            e->ticket = p->next_ticket++;
            e->tenant = tenant;
            e->round = ++p->round;
            e->start_ms = now;
            e->tokens = tokens;
            e->seen_ms = now;

            *ticket = e->ticket;

            p->started++;
            p->tokens += tokens;

            return LLM_PACER_GO;
        }
    }

    /* a start due now still waits behind a waiter that has not gone */

    round = llm_pacer_round(p, tenant, &mine);

    active = p->tenants + (mine == 0);
    cap = p->conf.max_queue / active;
    cap = cap ? cap : 1;

    if (p->conf.max_queue == 0 || mine >= cap) {
        return LLM_PACER_FULL;
    }

    v = -1;

    if (p->waiting >= p->conf.max_queue || n == p->size) {
        v = p->waiting ? llm_pacer_victim(p, tenant, cap) : -1;

        if (v < 0) {
            return LLM_PACER_FULL;
        }
    }

    k = llm_pacer_behind(p, round);

    /*
     * Only the requests bound the wait for sure: a plan held back by
     * tokens assumes every estimate is used for a whole minute, and the
     * corrections bring it forward, often by far.  The place to be taken
     * counts as gone, but goes only once the request is queued.
     */
    if (llm_pacer_requests_bound(p, k - (v >= 0 && v < p->started + k), now)
        - now > p->conf.max_wait_ms)
    {
        sum = p->tokens;

        for (i = 0; i < k; i++) {
            sum += llm_pacer_at(p, p->started + i)->tokens;
        }

        *start_at = llm_pacer_place(p, p->started + k, sum, tokens, now);
        return LLM_PACER_TOO_LONG;
    }

    if (v >= 0) {
        llm_pacer_remove(p, (uint32_t) v);
        p->evicted++;
        k = llm_pacer_behind(p, round);
    }

    sum = p->tokens;

    for (i = 0; i < k; i++) {
        sum += llm_pacer_at(p, p->started + i)->tokens;
    }

    t = llm_pacer_place(p, p->started + k, sum, tokens, now);

    n = p->started + p->waiting;

    for (i = n; i > p->started + k; i--) {
        *llm_pacer_at(p, i) = *llm_pacer_at(p, i - 1);
    }

    e = llm_pacer_at(p, p->started + k);
    e->ticket = p->next_ticket++;
    e->tenant = tenant;
    e->round = round;
    e->start_ms = t;
    e->tokens = tokens;
    e->seen_ms = now;

    *start_at = t;
    *ticket = e->ticket;

    p->waiting++;
    p->queued += tokens;
    p->tenants += (mine == 0);

    /* the ones behind it: one spacing (and its tokens) later */
    llm_pacer_replan(p, k + 1);

    return LLM_PACER_WAIT;
}


llm_pacer_rc_e
llm_pacer_go(llm_pacer_t *p, uint64_t *ticket, int64_t now_ms,
    int64_t *start_at)
{
    int64_t             i;
    llm_pacer_entry_t  *e;

    llm_pacer_update(p, now_ms);

    *start_at = p->now_ms;

    i = llm_pacer_find(p, *ticket);

    if (i >= 0) {
        *start_at = llm_pacer_at(p, i)->start_ms;
        return LLM_PACER_GO;
    }

    i = llm_pacer_find_waiter(p, *ticket);

    if (i < 0) {
        return LLM_PACER_NOT_FOUND;
    }

    e = llm_pacer_at(p, i);
    *start_at = e->start_ms;

    e->seen_ms = p->now_ms;

    /* after the update, the first waiter's plan is now at the earliest */
    if (i > p->started || e->start_ms > p->now_ms) {
        return LLM_PACER_WAIT;
    }

    if (!llm_pacer_waits(p, e->tenant, i)) {
        p->tenants--;
    }

    if (p->started && e->ticket < llm_pacer_at(p, p->started - 1)->ticket) {
        e->ticket = p->next_ticket++;
        *ticket = e->ticket;
    }

    p->round = e->round;
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

    i = llm_pacer_find_waiter(p, ticket);

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

    i = llm_pacer_find(p, ticket);

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
