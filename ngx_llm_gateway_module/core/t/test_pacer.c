
/*
 * The pacer against a fake clock: even spacing, no minute over a limit,
 * waiting on tokens, the oversize request refused at once, no trace of a
 * cancelled wait, corrections that do not mix, then FIFO, the tenants'
 * shares of the queue, the bounds, the clock, and long random runs whose
 * every minute is checked.
 */



#include "llm_pacer.h"
#include "tap.h"


#define W  LLM_PACER_WINDOW

/* room for a pacer of 8,192 entries, aligned for its int64_t */
#define PACER_WORDS  ((sizeof(llm_pacer_t) + 8192 * sizeof(llm_pacer_entry_t)) \
                      / 8 + 1)

static uint64_t  mem_a[PACER_WORDS], mem_b[PACER_WORDS], mem_c[PACER_WORDS];


static llm_pacer_t *
pacer(uint64_t *mem, int64_t rpm, int64_t tpm, int64_t max_wait,
    uint32_t max_queue, uint32_t entries, int64_t now)
{
    llm_pacer_conf_t  cf;

    cf.rpm = rpm;
    cf.tpm = tpm;
    cf.max_wait_ms = max_wait;
    cf.max_queue = max_queue;
    cf.stale_ms = 0;

    if (entries == 0) {
        entries = llm_pacer_entries(&cf);
    }

    return llm_pacer_init(mem, llm_pacer_size(entries), &cf, now);
}


/*
 * Two pacers hold the same state: the same clock, the same started
 * entries (start, tokens) and the same waiters (plan, tokens), in order.
 * Ticket numbers and ring positions are names, not state.
 */

static int
same(const llm_pacer_t *a, const llm_pacer_t *b)
{
    uint32_t                  i;
    const llm_pacer_entry_t  *x, *y;

    if (a->now_ms != b->now_ms || a->tokens != b->tokens
        || a->queued != b->queued || a->started != b->started
        || a->waiting != b->waiting)
    {
        return 0;
    }

    for (i = 0; i < a->started + a->waiting; i++) {
        x = &a->entry[(a->head + i) % a->size];
        y = &b->entry[(b->head + i) % b->size];

        if (x->start_ms != y->start_ms || x->tokens != y->tokens) {
            return 0;
        }
    }

    return 1;
}


static llm_pacer_entry_t *
entry(llm_pacer_t *p, uint32_t i)
{
    return &p->entry[(p->head + i) % p->size];
}


/* 002: "requests put in one after another leave at exactly even gaps" */

static void
test_spacing(void)
{
    int             i, even, early;
    int64_t         at, now, plan[8];
    uint64_t        t[8];
    llm_pacer_t    *p;

    /* six a minute: ten seconds apart */
    p = pacer(mem_a, 6, 0, 600000, 100, 0, 1000000);

    tap_is(p->spacing_ms, 10000, "rpm 6: spacing 10 s");

    now = 1000000;
    tap_is(llm_pacer_ask(p, 1, now, &plan[0], &t[0]), LLM_PACER_GO,
           "the first of a burst of 8 starts at once");

    for (i = 1; i < 8; i++) {
        (void) llm_pacer_ask(p, 1, now, &plan[i], &t[i]);
    }

    even = 1;
    for (i = 0; i < 8; i++) {
        even &= plan[i] == now + i * 10000;
    }

    tap_ok(even, "the other 7 are planned 10 s apart: the first minute's "
           "line does not rush out");
    tap_is(p->waiting, 7, "7 waiting");

    even = 1;
    early = 0;
    for (i = 1; i < 8; i++) {
        early += llm_pacer_go(p, &t[i], plan[i] - 1, &at) != LLM_PACER_WAIT;
        even &= llm_pacer_go(p, &t[i], plan[i], &at) == LLM_PACER_GO
                && at == plan[i];
    }

    tap_is(early, 0, "none starts 1 ms before its plan");
    tap_ok(even, "each starts on its plan when asked then");

    /* after a long quiet time the spacing still holds from the first */
    now = 5000000;
    tap_is(llm_pacer_ask(p, 1, now, &at, &t[0]), LLM_PACER_GO,
           "after a quiet time: at once");
    tap_is(llm_pacer_ask(p, 1, now, &at, &t[1]), LLM_PACER_WAIT,
           "the next waits");
    tap_is(at, now + 10000, "one spacing");

    /* 7 a minute: 8,571.4 ms, rounded up, so 7 never cross a minute */
    p = pacer(mem_a, 7, 0, 600000, 100, 0, 0);
    tap_is(p->spacing_ms, 8572, "rpm 7: spacing 8,572 ms");

    for (i = 0; i < 8; i++) {
        (void) llm_pacer_ask(p, 1, 0, &plan[i], &t[i]);
    }

    tap_is(plan[7], 7 * 8572, "the 8th starts 60,004 ms after the first");

    /* without an RPM limit there is no spacing */
    p = pacer(mem_a, 0, 1000, 600000, 100, 16, 0);
    tap_is(llm_pacer_ask(p, 1, 0, &at, &t[0]), LLM_PACER_GO, "rpm 0: go");
    tap_is(llm_pacer_ask(p, 1, 0, &at, &t[1]), LLM_PACER_GO, "and go");
}


/*
 * 002: "waiting on tokens even when requests are free".  Its example: TPM
 * 100,000 and requests of 25,000 (prompt plus max_tokens): four fill the
 * minute, the fifth waits for the first to leave, and if earlier answers
 * come back short it may go sooner.
 */

static void
test_tokens(void)
{
    int             i;
    int64_t         at, n, tok, plan[5];
    uint64_t        t[5], tk;
    llm_pacer_t    *p;

    /* 1,000 a minute: 60 ms apart, never the limit here */
    p = pacer(mem_a, 1000, 100000, 120000, 100, 0, 0);

    for (i = 0; i < 5; i++) {
        (void) llm_pacer_ask(p, 25000, i * 60, &plan[i], &t[i]);

        if (i < 4) {
            (void) llm_pacer_go(p, &t[i], i * 60, &at);
        }
    }

    tap_is(plan[3], 180, "four of 25,000 go 60 ms apart");
    tap_is(plan[4], W, "the fifth waits for the first to leave the minute");

    llm_pacer_window(p, 240, &n, &tok);
    tap_ok(n == 4 && tok == 100000, "4 requests of 1,000 used, 100,000 "
           "tokens of 100,000: tokens bind");

    /* the first answer was short: 24,000 back, not enough alone */
    tap_is(llm_pacer_correct(p, t[0], 1000, 5000), 0, "first corrected");
    (void) llm_pacer_next(p, 5000, &tk, &at);
    tap_ok(tk == t[4] && at == W, "76,000 + 25,000 > 100,000: the fifth "
           "keeps its plan");

    /* the second too: 53,000 + 25,000 fit */
    (void) llm_pacer_correct(p, t[1], 2000, 6000);
    (void) llm_pacer_next(p, 6000, &tk, &at);
    tap_is(at, 6000, "a second short answer: the fifth may go now");

    tap_is(llm_pacer_go(p, &t[4], 6000, &at), LLM_PACER_GO, "and goes");

    llm_pacer_window(p, 6000, &n, &tok);
    tap_is(tok, 1000 + 2000 + 3 * 25000, "the ledger holds the usage of "
           "the corrected and the estimates of the others");
    tap_is(n, 5, "5 requests");

    llm_pacer_window(p, W + 60, &n, &tok);
    tap_ok(n == 3 && tok == 75000, "a minute on, the first two have left");
}


/* 002: "a request larger than the TPM limit alone is refused at once" */

static void
test_too_large(void)
{
    int64_t         at;
    uint64_t        t;
    llm_pacer_t    *p, *q;

    p = pacer(mem_a, 60, 1000, 600000, 100, 0, 0);
    (void) llm_pacer_ask(p, 400, 0, &at, &t);
    (void) llm_pacer_ask(p, 400, 0, &at, &t);

    q = pacer(mem_b, 60, 1000, 600000, 100, 0, 0);
    memcpy(q, p, llm_pacer_size(p->size));

    tap_is(llm_pacer_ask(p, 1001, 0, &at, &t), LLM_PACER_TOO_LARGE,
           "1,001 tokens under TPM 1,000: refused");
    tap_ok(at == 0 && t == 0, "at once, no ticket");
    tap_ok(same(p, q) && p->next_ticket == q->next_ticket,
           "and no trace, not even a ticket");

    tap_is(llm_pacer_ask(p, 1000, 0, &at, &t), LLM_PACER_WAIT,
           "exactly TPM may wait");
    tap_is(at, 1000 + W, "until the minute is empty");

    tap_is(llm_pacer_ask(p, LLM_PACER_MAX * 4, 0, &at, &t),
           LLM_PACER_TOO_LARGE, "a huge count is clamped, not overflowed");
}


/* 002: "a request cancelled while waiting leaves nothing in the ledger" */

static void
test_cancel(void)
{
    int64_t         at, plan_a, plan_b;
    uint64_t        a[5], b[5];
    llm_pacer_t    *p, *q, *r;

    /* the only waiter: back to the state before it came */
    p = pacer(mem_a, 6, 10000, 600000, 100, 0, 0);
    (void) llm_pacer_ask(p, 5000, 0, &at, &a[0]);

    q = pacer(mem_b, 6, 10000, 600000, 100, 0, 0);
    memcpy(q, p, llm_pacer_size(p->size));

    (void) llm_pacer_ask(p, 5000, 100, &at, &a[1]);
    tap_ok(p->waiting == 1 && p->queued == 5000, "a waiter of 5,000");

    (void) llm_pacer_window(q, 200, &at, &at);
    tap_is(llm_pacer_cancel(p, a[1], 200), 0, "cancelled");
    tap_ok(same(p, q), "the state is the pacer's that never saw it");

    tap_is(llm_pacer_cancel(p, a[1], 200), -1, "twice: not found");
    tap_is(llm_pacer_cancel(p, a[0], 200), -1, "a started request is not "
           "cancelled");
    tap_is(llm_pacer_go(p, &a[1], 20000, &at), LLM_PACER_NOT_FOUND,
           "nor started later");

    /*
     * In the middle of the line: A goes, B C D wait.  C is cancelled; a
     * pacer that saw A B D at the same times must hold the same state,
     * D in C's slot, and answer the same from then on.
     */
    p = pacer(mem_a, 6, 0, 600000, 100, 0, 0);
    q = pacer(mem_b, 6, 0, 600000, 100, 0, 0);

    (void) llm_pacer_ask(p, 10, 0, &at, &a[0]);
    (void) llm_pacer_ask(q, 10, 0, &at, &b[0]);
    (void) llm_pacer_ask(p, 10, 1000, &at, &a[1]);
    (void) llm_pacer_ask(q, 10, 1000, &at, &b[1]);
    (void) llm_pacer_ask(p, 10, 2000, &at, &a[2]);
    (void) llm_pacer_ask(p, 10, 3000, &plan_a, &a[3]);
    (void) llm_pacer_ask(q, 10, 3000, &plan_b, &b[3]);

    tap_ok(plan_a == 30000 && plan_b == 20000, "D: 30 s behind C, 20 s "
           "without it");

    (void) llm_pacer_window(q, 4000, &at, &at);
    tap_is(llm_pacer_cancel(p, a[2], 4000), 0, "C cancelled");
    tap_ok(same(p, q), "state as if C had never come");

    (void) llm_pacer_next(p, 4000, &a[4], &at);
    tap_ok(a[4] == a[1] && at == 10000, "B is still first, at 10 s");

    tap_is(llm_pacer_go(p, &a[3], 9000, &at), LLM_PACER_WAIT,
           "D cannot pass B");
    tap_is(at, 20000, "D's plan is C's old one");

    (void) llm_pacer_window(q, 9000, &at, &at);
    tap_ok(same(p, q), "still the same after D asked too early");

    tap_is(llm_pacer_go(p, &a[1], 20000, &at), LLM_PACER_GO, "B, late");
    tap_is(llm_pacer_go(q, &b[1], 20000, &at), LLM_PACER_GO, "B, late, "
           "in the other");
    tap_ok(same(p, q), "the same");

    tap_ok(llm_pacer_go(p, &a[3], 30000, &plan_a) == LLM_PACER_GO
           && llm_pacer_go(q, &b[3], 30000, &plan_b) == LLM_PACER_GO
           && same(p, q), "D behind the late B at 30 s in both");

    /*
     * A large waiter cancelled in front of a small one: tokens make the
     * small one's plan earlier at once.
     */
    p = pacer(mem_a, 60, 1000, 600000, 100, 0, 0);
    r = pacer(mem_c, 60, 1000, 600000, 100, 0, 0);

    (void) llm_pacer_ask(p, 900, 0, &at, &a[0]);
    (void) llm_pacer_ask(r, 900, 0, &at, &b[0]);
    (void) llm_pacer_ask(p, 800, 0, &at, &a[1]);
    (void) llm_pacer_ask(p, 100, 0, &plan_a, &a[2]);
    tap_is(plan_a, W + 1000, "the small one waits behind the large one");

    (void) llm_pacer_ask(r, 100, 0, &plan_b, &b[2]);
    tap_is(plan_b, 1000, "without the large one it waits one spacing");

    tap_is(llm_pacer_cancel(p, a[1], 500), 0, "the large one gives up");
    (void) llm_pacer_window(r, 500, &at, &at);
    tap_ok(same(p, r), "as if it had never come");
    tap_ok(llm_pacer_go(p, &a[2], 1000, &at) == LLM_PACER_GO && at == 1000,
           "the small one goes at 1 s");
}


/*
 * 002: "two requests corrected at the same time do not mix their tokens".
 * Five in flight, corrected in another order than they started: each
 * correction changes its own entry, and the order does not matter.
 */

static void
test_corrections(void)
{
    int             i, k, own, other, done[5] = { 0 };
    int64_t         at, want, sum;
    uint64_t        a[5], b[5];
    llm_pacer_t    *p, *q;
    static const int  order[5] = { 2, 0, 4, 1, 3 };

    p = pacer(mem_a, 600, 1000000, 600000, 100, 0, 0);
    q = pacer(mem_b, 600, 1000000, 600000, 100, 0, 0);

    for (i = 0; i < 5; i++) {
        (void) llm_pacer_ask(p, 1000 * (i + 1), i * 100, &at, &a[i]);
        (void) llm_pacer_ask(q, 1000 * (i + 1), i * 100, &at, &b[i]);
    }

    own = 1;
    other = 1;

    for (k = 0; k < 5; k++) {
        (void) llm_pacer_correct(p, a[order[k]], 11 * (order[k] + 1),
                                 1000 + k);
        done[order[k]] = 1;
        sum = 0;

        for (i = 0; i < 5; i++) {
            want = done[i] ? 11 * (i + 1) : 1000 * (i + 1);

            if (entry(p, i)->ticket != a[i] || entry(p, i)->tokens != want) {
                if (i == order[k]) {
                    own = 0;

                } else {
                    other = 0;
                }
            }

            sum += entry(p, i)->tokens;
        }

        if (sum != p->tokens) {
            other = 0;
        }
    }

    tap_ok(own, "each correction set its own entry to its usage");
    tap_ok(other, "and no other entry, the sum following");
    tap_is(p->tokens, 11 * 15, "all corrected: 165 tokens");

    for (k = 4; k >= 0; k--) {
        (void) llm_pacer_correct(q, b[order[k]], 11 * (order[k] + 1),
                                 1000 + 4 - k);
    }

    tap_ok(same(p, q), "corrected in the reverse order: the same ledger");

    tap_is(llm_pacer_correct(p, a[3], 70, 2000), 0, "corrected again");
    tap_is(entry(p, 3)->tokens, 70, "the usage replaces, never adds");
    tap_is(p->tokens, 11 * 15 - 44 + 70, "the sum follows");

    tap_is(llm_pacer_correct(p, 999, 5, 2000), -1, "unknown ticket");
    tap_is(p->tokens, 11 * 15 - 44 + 70, "changes nothing");

    tap_is(llm_pacer_ask(p, 999950, 2000, &at, &a[0]), LLM_PACER_WAIT,
           "a large one waits");
    tap_is(llm_pacer_correct(p, a[0], 1, 2000), -1, "a waiter has no "
           "usage to correct");

    tap_is(llm_pacer_correct(p, a[4], 0, 2000), 0, "refused by the "
           "provider: 0 tokens");
    tap_is(p->started, 5, "it still counts as a request");

    tap_is(llm_pacer_correct(p, a[1], 5, W + 100), -1, "an entry that "
           "has left the minute is not found");
}


/* FIFO: a small request never passes a large one waiting on tokens */

static void
test_fifo(void)
{
    int64_t         at, plan_b, plan_c;
    uint64_t        a, b, c, tk;
    llm_pacer_t    *p;

    p = pacer(mem_a, 60, 10000, 600000, 100, 0, 0);

    tap_is(llm_pacer_ask(p, 8000, 0, &at, &a), LLM_PACER_GO, "A goes");
    tap_is(llm_pacer_ask(p, 5000, 10, &plan_b, &b), LLM_PACER_WAIT,
           "B waits on tokens");
    tap_is(plan_b, W, "until A leaves");
    tap_is(llm_pacer_ask(p, 10, 5000, &plan_c, &c), LLM_PACER_WAIT,
           "C, small, would fit now but waits");
    tap_is(plan_c, W + 1000, "one spacing behind B");

    tap_is(llm_pacer_go(p, &c, 6000, &at), LLM_PACER_WAIT, "C early: wait");
    tap_is(llm_pacer_go(p, &c, W + 2000, &at), LLM_PACER_WAIT,
           "C past its plan, B not gone: C still waits");
    tap_is(at, W + 3000, "and is planned behind B's start, now due");

    (void) llm_pacer_next(p, W + 2000, &tk, &at);
    tap_ok(tk == b && at == W + 2000, "B is first, due now");

    tap_is(llm_pacer_go(p, &b, W + 2000, &at), LLM_PACER_GO, "B goes");
    tap_is(llm_pacer_go(p, &c, W + 3000, &at), LLM_PACER_GO, "then C");
    tap_is(llm_pacer_go(p, &b, W + 4000, &at), LLM_PACER_GO,
           "asking again for a started one says so");
    tap_is(at, W + 2000, "with its start");
    tap_is(llm_pacer_next(p, W + 4000, &tk, &at), 0, "nobody waits");

    /* without RPM there is no spacing: plans can be equal, order holds */
    p = pacer(mem_a, 0, 1000, 600000, 2, 16, 0);

    (void) llm_pacer_ask(p, 900, 0, &at, &a);
    (void) llm_pacer_ask(p, 500, 0, &plan_b, &b);
    tap_is(plan_b, W, "rpm 0: B waits for A's tokens to leave");

    tap_is(llm_pacer_ask(p, 10, W, &plan_c, &c), LLM_PACER_WAIT,
           "C, due as B is, still waits behind B");
    tap_is(plan_c, W, "planned with B");
    tap_is(llm_pacer_ask(p, 10, W, &at, &tk), LLM_PACER_FULL,
           "D, due too, is a third waiter: the queue of 2 is full");
    tap_is(llm_pacer_go(p, &c, W, &at), LLM_PACER_WAIT, "C cannot go first");
    tap_is(llm_pacer_go(p, &b, W, &at), LLM_PACER_GO, "B goes");
    tap_is(llm_pacer_go(p, &c, W, &at), LLM_PACER_GO, "then C, the same ms");
}


/*
 * Drive the queue: the first waiter goes at its plan, again and again,
 * until nobody waits or n have gone; each start's tenant in order[].
 */

static int
drain(llm_pacer_t *p, uint64_t *order, int64_t *when, int n)
{
    int       i;
    int64_t   at;
    uint64_t  tk;

    for (i = 0; i < n && llm_pacer_next(p, p->now_ms, &tk, &at); i++) {
        order[i] = entry(p, p->started)->tenant;

        if (when) {
            when[i] = at;
        }

        if (llm_pacer_go(p, &tk, at, &at) != LLM_PACER_GO) {
            return -1;
        }
    }

    return i;
}


/* the queue shared among tenants: starts round them, places capped */

static void
test_tenants(void)
{
    int             i, n, ok, worst;
    int64_t         at, plan, before, when[64];
    uint64_t        t, a[16], b[8], order[64];
    llm_pacer_t    *p;

    /* one a second; A asks 10 at once, B 3 just after */
    p = pacer(mem_a, 60, 0, 600000, 100, 0, 0);

    tap_is(llm_pacer_ask_for(p, 1, 1, 0, &at, &a[0]), LLM_PACER_GO,
           "tenants: A's first goes");

    for (i = 1; i < 10; i++) {
        (void) llm_pacer_ask_for(p, 1, 1, 0, &at, &a[i]);
    }

    tap_is(at, 9000, "A's tenth is planned 9 s on");

    for (i = 0; i < 3; i++) {
        tap_is(llm_pacer_ask_for(p, 2, 1, 10, &plan, &b[i]), LLM_PACER_WAIT,
               "B's %d waits", i + 1);
        tap_is(plan, 1000 + 2000 * i, "B's %d planned at %d s, not behind "
               "all of A", i + 1, 1 + 2 * i);
    }

    tap_is(p->tenants, 2, "two tenants wait");

    n = drain(p, order, NULL, 64);
    tap_is(n, 12, "all 12 waiters go");

    ok = 1;

    for (i = 0; i < n; i++) {
        ok &= order[i] == (uint64_t) ((i < 6 && i % 2 == 0) ? 2 : 1);
    }

    tap_ok(ok, "B, A, B, A, B, A, then the rest of A");
    tap_is(p->tenants, 0, "nobody waits");

    /* started entries' tickets still grow: each found for its correction */
    ok = 1;

    for (i = 1; i < (int) p->started; i++) {
        ok &= entry(p, i)->ticket > entry(p, i - 1)->ticket;
    }

    tap_ok(ok, "the started tickets grow along the ring");
    tap_is(llm_pacer_correct(p, entry(p, p->started - 1)->ticket, 0, 20000),
           0, "the last started found by its ticket, corrected");

    /*
     * B, one request at a time, against A keeping 30 waiters: each B waits
     * at most two spacings (the start due and one of A's), as with two
     * tenants each has every other start.
     */
    p = pacer(mem_a, 60, 0, 600000, 100, 0, 0);

    for (i = 0; i < 30; i++) {
        (void) llm_pacer_ask_for(p, 1, 1, 0, &at, &t);
    }

    worst = 0;

    for (i = 0; i < 10; i++) {
        (void) llm_pacer_ask_for(p, 2, 1, p->now_ms, &plan, &b[0]);
        worst = plan - p->now_ms > worst ? plan - p->now_ms : worst;

        /* A's starts before it, A asking again as each goes */
        while (llm_pacer_next(p, p->now_ms, &t, &at) && t != b[0]) {
            tap_ok(llm_pacer_go(p, &t, at, &at) == LLM_PACER_GO
                   && llm_pacer_ask_for(p, 1, 1, at, &at, &t)
                      == LLM_PACER_WAIT, "A goes and asks again");
        }

        if (llm_pacer_go(p, &b[0], plan, &at) != LLM_PACER_GO) {
            break;
        }
    }

    tap_is(i, 10, "B served 10 of 10 behind a queue of 30");
    tap_ok(worst <= 2000, "B waited 2 spacings at most (%d ms)", worst);

    /* places: a queue of 10, A alone has all of it */
    p = pacer(mem_a, 60, 0, 600000, 10, 0, 0);

    (void) llm_pacer_ask_for(p, 1, 1, 0, &at, &t);

    for (i = 0; i < 10; i++) {
        tap_is(llm_pacer_ask_for(p, 1, 1, 0, &at, &a[i]), LLM_PACER_WAIT,
               "alone, A's waiter %d queued", i + 1);
    }

    tap_is(llm_pacer_ask_for(p, 1, 1, 0, &at, &t), LLM_PACER_FULL,
           "A's 11th: the queue is full");

    /* B under its share of 5 takes the places of A's newest */
    for (i = 0; i < 5; i++) {
        tap_is(llm_pacer_ask_for(p, 2, 1, 10, &at, &b[i]), LLM_PACER_WAIT,
               "B's %d queued in a full queue", i + 1);
    }

    tap_is(p->evicted, 5, "A's 5 newest gave their places");
    tap_is(p->waiting, 10, "still 10 waiting");
    tap_is(llm_pacer_go(p, &a[9], 20, &at), LLM_PACER_NOT_FOUND,
           "A's newest finds itself gone");
    tap_is(llm_pacer_go(p, &a[4], 20, &at), LLM_PACER_WAIT,
           "A's fifth is still queued");
    tap_is(llm_pacer_ask_for(p, 1, 1, 30, &at, &t), LLM_PACER_FULL,
           "A asks again: at its share, refused");
    tap_is(llm_pacer_ask_for(p, 2, 1, 30, &at, &t), LLM_PACER_FULL,
           "B's 6th: at its share too");

    /* a third tenant: shares of 3, and it takes one of the largest */
    tap_is(llm_pacer_ask_for(p, 3, 1, 40, &plan, &t), LLM_PACER_WAIT,
           "C queued");
    tap_is(plan, 2000, "C second: in the current round, behind B's");
    tap_is(p->tenants, 3, "three tenants wait");

    /* A's refusals leave the others' plans as they were */
    before = entry(p, p->started + 1)->start_ms;

    for (i = 0; i < 1000; i++) {
        (void) llm_pacer_ask_for(p, 1, 1, 50, &at, &t);
    }

    tap_is(entry(p, p->started + 1)->start_ms, before,
           "1,000 refusals of A moved nobody's plan");
    tap_is(p->waiting, 10, "nor took a place");

    /* a cancel of B's gives the place back: B may ask again */
    tap_is(llm_pacer_cancel(p, b[4], 60), 0, "B cancels one");
    tap_ok(p->waiting == 9 && p->tenants == 3, "9 wait, 3 tenants");

    n = drain(p, order, when, 64);
    tap_is(n, 9, "the rest go");

    ok = 1;

    for (i = 1; i < n; i++) {
        ok &= when[i] - when[i - 1] >= 1000;
    }

    tap_ok(ok, "a spacing between each");
    tap_is(p->tenants, 0, "no tenant waits");

    /* the waiter furthest planned leaves, not one of the tenant asking */
    p = pacer(mem_a, 60, 0, 600000, 4, 0, 0);

    (void) llm_pacer_ask_for(p, 1, 1, 0, &at, &t);
    (void) llm_pacer_ask_for(p, 2, 1, 0, &at, &b[0]);
    (void) llm_pacer_ask_for(p, 1, 1, 0, &at, &a[0]);
    (void) llm_pacer_ask_for(p, 1, 1, 0, &at, &a[1]);
    (void) llm_pacer_ask_for(p, 1, 1, 0, &at, &a[2]);

    tap_is(llm_pacer_ask_for(p, 2, 1, 0, &at, &b[1]), LLM_PACER_WAIT,
           "B's second in a full queue of 4, A holding 3");
    tap_is(llm_pacer_go(p, &a[2], 0, &at), LLM_PACER_NOT_FOUND,
           "A's newest left");
    tap_is(llm_pacer_go(p, &b[0], 0, &at), LLM_PACER_WAIT, "B's first stays");

    /* a tenant alone: in the order they came, as one FIFO */
    p = pacer(mem_a, 60, 0, 600000, 100, 0, 0);

    for (i = 0; i < 16; i++) {
        (void) llm_pacer_ask_for(p, 7, 1, i, &at, &a[i]);
    }

    ok = 1;

    for (i = 1; i < 16; i++) {
        ok &= entry(p, i)->ticket == a[i];
    }

    tap_ok(ok, "a tenant alone: its waiters in the order they came");
}


/* the queue and the ring are bounded; so is the wait */

static void
test_bounds(void)
{
    int             i, full;
    int64_t         at;
    uint64_t        t, u;
    llm_pacer_t    *p, *q;

    p = pacer(mem_a, 6, 0, 600000, 3, 0, 0);
    tap_is(p->size, 9, "6 a minute and 3 waiters: 9 entries");

    for (i = 0; i < 4; i++) {
        (void) llm_pacer_ask(p, 1, 0, &at, &t);
    }

    q = pacer(mem_b, 6, 0, 600000, 3, 0, 0);
    memcpy(q, p, llm_pacer_size(p->size));

    tap_is(llm_pacer_ask(p, 1, 0, &at, &t), LLM_PACER_FULL,
           "a fourth waiter: the queue is full");
    tap_ok(same(p, q) && p->next_ticket == q->next_ticket, "nothing kept");

    /* nobody waits at all */
    p = pacer(mem_a, 6, 0, 600000, 0, 0, 0);
    (void) llm_pacer_ask(p, 1, 0, &at, &t);
    tap_is(llm_pacer_ask(p, 1, 0, &at, &t), LLM_PACER_FULL,
           "max_queue 0: what cannot start now is refused");

    /* a wait of at most 25 s at 10 s a start */
    p = pacer(mem_a, 6, 0, 25000, 100, 0, 0);
    (void) llm_pacer_ask(p, 1, 0, &at, &t);
    (void) llm_pacer_ask(p, 1, 0, &at, &t);
    tap_is(llm_pacer_ask(p, 1, 0, &at, &t), LLM_PACER_WAIT, "20 s: waits");
    tap_is(llm_pacer_ask(p, 1, 0, &at, &t), LLM_PACER_TOO_LONG,
           "30 s: too long");
    tap_ok(at == 30000 && t == 0, "told when it could have started");
    tap_is(p->waiting, 2, "not queued");
    tap_is(llm_pacer_ask(p, 1, 5000, &at, &t), LLM_PACER_WAIT,
           "5 s later the same plan is within 25 s");

    p = pacer(mem_a, 6, 0, 0, 100, 0, 0);
    (void) llm_pacer_ask(p, 1, 0, &at, &t);
    tap_is(llm_pacer_ask(p, 1, 0, &at, &t), LLM_PACER_TOO_LONG,
           "max_wait 0: nobody waits either");

    /*
     * Tokens: 3 of 590 fill a minute of 2,000, the fourth is planned a
     * minute away, beyond a wait of 10 s, and queued all the same: the
     * first to end corrects its 590 to 14 and lets it in at once.
     */
    p = pacer(mem_a, 0, 2000, 10000, 100, 64, 0);
    (void) llm_pacer_ask(p, 590, 0, &at, &t);
    (void) llm_pacer_ask(p, 590, 0, &at, &t);
    (void) llm_pacer_ask(p, 590, 0, &at, &u);
    tap_is(llm_pacer_ask(p, 590, 0, &at, &t), LLM_PACER_WAIT,
           "held by tokens a minute: queued beyond max_wait");
    tap_is(at, 60000, "planned when the first leaves the window");
    tap_is(llm_pacer_correct(p, u, 14, 300), 0, "the third ends: 14 tokens");
    tap_is(llm_pacer_go(p, &t, 300, &at), LLM_PACER_GO,
           "and the fourth goes at once");

    /* without RPM the ring is the limit of a minute's requests */
    p = pacer(mem_a, 0, 0, 600000, 100, 4, 0);

    full = 0;
    for (i = 0; i < 5; i++) {
        full += llm_pacer_ask(p, 1, i, &at, &t) == LLM_PACER_FULL;
    }

    tap_is(full, 1, "rpm 0, 4 entries: the fifth in a minute is refused");
    tap_is(llm_pacer_ask(p, 1, W, &at, &t), LLM_PACER_GO,
           "the first has left: room again");

    tap_ok(llm_pacer_init(mem_a, sizeof(llm_pacer_t), &p->conf, 0) == NULL,
           "no entry fits: no pacer");
    p->conf.rpm = -1;
    tap_ok(llm_pacer_init(mem_a, llm_pacer_size(4), &p->conf, 0) == NULL,
           "a negative limit: no pacer");
}


/*
 * The clock: workers' cached times differ by a few milliseconds, so a
 * call may come with an earlier time than the last.  It is taken as the
 * latest seen: nothing starts before a plan, nothing leaves the window
 * early, nothing comes back.
 */

static void
test_clock(void)
{
    int64_t         at, n, tok;
    uint64_t        a, b, c;
    llm_pacer_t    *p;

    p = pacer(mem_a, 6, 1000, 600000, 100, 0, 100000);

    (void) llm_pacer_ask(p, 600, 100000, &at, &a);
    tap_is(llm_pacer_ask(p, 600, 99000, &at, &b), LLM_PACER_WAIT,
           "an earlier clock: still behind A");
    tap_is(at, 100000 + W, "planned from the latest time seen");
    tap_is(p->now_ms, 100000, "the mark does not go back");

    tap_is(llm_pacer_go(p, &b, 100000 + W - 1, &at), LLM_PACER_WAIT,
           "1 ms early");
    tap_is(llm_pacer_go(p, &b, 100000 + W, &at), LLM_PACER_GO, "on time");
    tap_is(llm_pacer_go(p, &b, 50, &at), LLM_PACER_GO, "asked again with "
           "a clock from long ago: started");
    tap_is(at, 100000 + W, "at its time");

    llm_pacer_window(p, 0, &n, &tok);
    tap_ok(n == 1 && tok == 600, "the window is the latest minute's");

    tap_is(llm_pacer_ask(p, 10, 100000 + W + 5000, &at, &c), LLM_PACER_WAIT,
           "C waits for the spacing");
    tap_is(llm_pacer_ask(p, 10, 100000 + W + 4000, &at, &c), LLM_PACER_WAIT,
           "D, a clock 1 s behind, waits behind C");
    tap_is(at, 100000 + W + 20000, "two spacings after B");
}


/*
 * Long random runs.  The driver plays the glue: requests arrive at random
 * with random estimates (some larger than TPM), the first waiter is
 * started when llm_pacer_next() says it is due, waiters give up at random,
 * and started requests complete after a random time and are corrected.
 * Every start and every usage is logged; then every minute is checked:
 * the count and the tokens only grow at a start, so the minutes ending at
 * a start are the fullest, and each of them is checked.
 */

#define SIM_MAX   40000

typedef struct {
    int64_t    ask_ms;
    int64_t    plan_ms;          /* first told */
    int64_t    start_ms;         /* -1 until it starts */
    int64_t    done_ms;          /* when it completes */
    int64_t    tokens;           /* now */
    int        state;            /* 1 waiting, 2 in flight, 3 done, 4 gone */
} sim_req_t;


enum { OP_ASK, OP_GO, OP_CANCEL, OP_CORRECT, OP_NEXT };

typedef struct {
    int        op;
    int64_t    now;
    uint64_t   ticket;
    int64_t    tokens;
    int        rc;
} sim_op_t;


typedef struct {
    llm_pacer_t   *p;
    uint64_t       rng;
    int64_t        now;
    int64_t        gap;          /* mean time between arrivals */
    int64_t        est_max;
    int            uniform;      /* every estimate est_max */
    int            jitter;       /* a call's clock lags up to this */
    int            late;         /* the first waiter starts up to this late */
    int            upward;       /* usage may exceed the estimate */
    int            cancel_pct;

    sim_req_t      req[SIM_MAX + 1];
    uint64_t       order[SIM_MAX];   /* tickets in start order */
    uint32_t       nstart;

    sim_op_t      *log;
    uint32_t       nlog;
    uint32_t       maxlog;

    /* what failed, once each */
    int            bad_fifo, bad_spacing, bad_plan, bad_wait, bad_queue,
                   bad_ledger, bad_tpm_at_start, bad_rc;
    long           count[LLM_PACER_NOT_FOUND + 1];
    long           cancelled, corrected;
    int64_t        completed_at;
    uint32_t       done_from;
} sim_t;

static sim_t  sim_a;


static uint64_t
rnd(sim_t *s)
{
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;

    return s->rng * 2685821657736338717ULL;
}


static int64_t
rnd_to(sim_t *s, int64_t n)
{
    return n > 0 ? (int64_t) (rnd(s) % (uint64_t) n) : 0;
}


static int64_t
sim_clock(sim_t *s)
{
    return s->now - rnd_to(s, s->jitter + 1);
}


static void
sim_log(sim_t *s, int op, int64_t now, uint64_t ticket, int64_t tokens,
    int rc)
{
    if (s->log && s->nlog < s->maxlog) {
        s->log[s->nlog++] = (sim_op_t) { op, now, ticket, tokens, rc };
    }
}


static void
sim_started(sim_t *s, uint64_t t, int64_t at)
{
    int64_t     sum;
    uint32_t    i;
    sim_req_t  *r;

    r = &s->req[t];
    r->state = 2;
    r->start_ms = at;
    r->done_ms = at + 200 + rnd_to(s, 3 * W);

    if (s->nstart) {
        r = &s->req[s->order[s->nstart - 1]];

        if (s->order[s->nstart - 1] >= t || r->start_ms > at) {
            s->bad_fifo++;
        }

        if (at - r->start_ms < s->p->spacing_ms) {
            s->bad_spacing++;
        }
    }

    s->order[s->nstart++] = t;

    r = &s->req[t];

    if (r->start_ms < r->ask_ms) {
        s->bad_plan++;
    }

    /* punctual, usage never above estimates: never later than first told */
    if (!s->late && !s->upward && !s->jitter && r->start_ms > r->plan_ms) {
        s->bad_plan++;
    }

    /* the ledger as known at this start: within TPM, even when upward */
    if (s->p->conf.tpm) {
        sum = 0;

        for (i = s->nstart; i > 0; i--) {
            r = &s->req[s->order[i - 1]];

            if (r->start_ms <= at - W) {
                break;
            }

            sum += r->tokens;
        }

        if (sum > s->p->conf.tpm) {
            s->bad_tpm_at_start++;
        }
    }
}


static void
sim_ask(sim_t *s)
{
    int64_t              est, at, now;
    uint64_t             t;
    llm_pacer_rc_e       rc;

    est = s->uniform ? s->est_max : 1 + rnd_to(s, s->est_max);

    if (!s->uniform && rnd_to(s, 200) == 0) {
        est = s->p->conf.tpm + 1 + rnd_to(s, 1000);
    }

    now = sim_clock(s);
    rc = llm_pacer_ask(s->p, est, now, &at, &t);
    sim_log(s, OP_ASK, now, t, est, rc);
    s->count[rc]++;

    if (rc == LLM_PACER_TOO_LARGE && (!s->p->conf.tpm || est <= s->p->conf.tpm))
    {
        s->bad_rc++;
    }

    if (rc != LLM_PACER_GO && rc != LLM_PACER_WAIT) {
        return;
    }

    if (t > SIM_MAX) {
        s->bad_rc++;
        return;
    }

    s->req[t] = (sim_req_t) { s->p->now_ms, at, -1, 0, est, 1 };

    /* only requests ahead may refuse: a plan held by tokens is queued */
    if (at - s->p->now_ms > s->p->conf.max_wait_ms
        && at - s->p->now_ms <= 60000
        && s->p->conf.tpm == 0)
    {
        s->bad_wait++;
    }

    if (s->p->waiting > s->p->conf.max_queue) {
        s->bad_queue++;
    }

    if (rc == LLM_PACER_GO) {
        sim_started(s, t, at);
    }
}


static void
sim_cancel(sim_t *s)
{
    int64_t     now;
    uint32_t    k;
    uint64_t    t;

    if (s->p->waiting == 0) {
        return;
    }

    k = (uint32_t) rnd_to(s, s->p->waiting);
    t = entry(s->p, s->p->started + k)->ticket;

    now = sim_clock(s);

    if (llm_pacer_cancel(s->p, t, now) != 0) {
        s->bad_rc++;
    }

    sim_log(s, OP_CANCEL, now, t, 0, 0);
    s->req[t].state = 4;
    s->cancelled++;
}


static void
sim_complete(sim_t *s)
{
    int64_t     used, now;
    uint32_t    i;
    sim_req_t  *r;

    if (s->now - s->completed_at < 250) {
        return;
    }

    s->completed_at = s->now;

    while (s->done_from < s->nstart
           && s->req[s->order[s->done_from]].state == 3)
    {
        s->done_from++;
    }

    for (i = s->done_from; i < s->nstart; i++) {
        r = &s->req[s->order[i]];

        if (r->state != 2 || r->done_ms > s->now) {
            continue;
        }

        used = s->upward ? rnd_to(s, 2 * r->tokens + 1)
                         : rnd_to(s, r->tokens + 1);

        now = sim_clock(s);
        (void) llm_pacer_correct(s->p, s->order[i], used, now);
        sim_log(s, OP_CORRECT, now, s->order[i], used, 0);

        /* an entry that has left the minute is not found: no matter */
        r->tokens = used;
        r->state = 3;
        s->corrected++;
    }
}


static void
sim_run(sim_t *s, long steps)
{
    long             i;
    int64_t          at, next_arrival, now;
    uint64_t         t;
    llm_pacer_rc_e   rc;

    next_arrival = s->now;

    for (i = 0; i < steps; i++) {

        /* the first waiter, when due (and up to `late` after) */
        now = sim_clock(s);

        if (llm_pacer_next(s->p, now, &t, &at)) {
            sim_log(s, OP_NEXT, now, 0, 0, 0);

            if (at <= s->now) {
                now = sim_clock(s);
                rc = llm_pacer_go(s->p, &t, now, &at);
                sim_log(s, OP_GO, now, t, 0, rc);

                if (rc == LLM_PACER_GO) {
                    sim_started(s, t, at);
                }

                continue;
            }

            at += rnd_to(s, s->late + 1);

        } else {
            sim_log(s, OP_NEXT, now, 0, 0, 0);
            at = INT64_MAX;
        }

        if (next_arrival <= s->now) {
            sim_ask(s);
            next_arrival = s->now + rnd_to(s, 2 * s->gap + 1);

            if (rnd_to(s, 100) < s->cancel_pct) {
                sim_cancel(s);
            }

            sim_complete(s);
            continue;
        }

        s->now = next_arrival < at ? next_arrival : at;
    }
}


/* every minute ending at a start, with the usage as it ended */

static void
sim_windows(sim_t *s, int64_t *worst_n, int64_t *worst_tok)
{
    int64_t     sum;
    uint32_t    i, j;
    sim_req_t  *r, *o;

    *worst_n = 0;
    *worst_tok = 0;
    sum = 0;

    for (i = 0, j = 0; i < s->nstart; i++) {
        r = &s->req[s->order[i]];
        sum += r->tokens;

        for ( ;; ) {
            o = &s->req[s->order[j]];

            if (o->start_ms > r->start_ms - W) {
                break;
            }

            sum -= o->tokens;
            j++;
        }

        if ((int64_t) (i - j + 1) > *worst_n) {
            *worst_n = i - j + 1;
        }

        if (sum > *worst_tok) {
            *worst_tok = sum;
        }
    }
}


/* the pacer's own books against the log */

static int
sim_books(sim_t *s)
{
    int64_t     n, tok, sum, cnt;
    uint32_t    i;
    sim_req_t  *r;

    llm_pacer_window(s->p, s->now, &n, &tok);

    sum = 0;
    cnt = 0;

    for (i = s->nstart; i > 0; i--) {
        r = &s->req[s->order[i - 1]];

        if (r->start_ms <= s->p->now_ms - W) {
            break;
        }

        sum += r->tokens;
        cnt++;
    }

    return n == cnt && tok == sum;
}


static void
sim_init(sim_t *s, llm_pacer_t *p, uint64_t seed)
{
    llm_pacer_t  *keep;

    keep = p;
    memset(s, 0, sizeof(*s));
    s->p = keep;
    s->rng = seed;
    s->now = p->now_ms;
}


static void
test_sim(const char *name, int64_t rpm, int64_t tpm, int64_t gap,
    int64_t est_max, int jitter, int late, int upward, uint64_t seed)
{
    int64_t       worst_n, worst_tok;
    sim_t        *s;
    llm_pacer_t  *p;

    s = &sim_a;
    p = pacer(mem_a, rpm, tpm, 90000, 64, 0, 1000000);
    sim_init(s, p, seed);

    s->gap = gap;
    s->est_max = est_max;
    s->jitter = jitter;
    s->late = late;
    s->upward = upward;
    s->cancel_pct = 5;

    /* up to the tickets the log can name */
    while (s->p->next_ticket < SIM_MAX - 200) {
        sim_run(s, 100);
    }

    sim_windows(s, &worst_n, &worst_tok);

    printf("# %s: %u starts, %ld waited, %ld too large, %ld full, "
           "%ld too long, %ld cancelled; fullest minute %lld requests, "
           "%lld tokens\n", name, s->nstart, s->count[LLM_PACER_WAIT],
           s->count[LLM_PACER_TOO_LARGE], s->count[LLM_PACER_FULL],
           s->count[LLM_PACER_TOO_LONG], s->cancelled,
           (long long) worst_n, (long long) worst_tok);

    tap_ok(s->nstart > SIM_MAX / 2 && s->count[LLM_PACER_WAIT] > 1000,
           "%s: a long run that waited", name);
    tap_ok(worst_n <= rpm, "%s: no minute over %lld requests", name,
           (long long) rpm);

    if (upward) {
        tap_is(s->bad_tpm_at_start, 0, "%s: at each start its minute's "
               "tokens, as then known, within %lld", name, (long long) tpm);

    } else {
        tap_ok(worst_tok <= tpm, "%s: no minute over %lld tokens", name,
               (long long) tpm);
    }

    tap_ok(worst_n == rpm || worst_tok > tpm * 9 / 10,
           "%s: and a limit was reached", name);
    tap_is(s->bad_fifo, 0, "%s: starts in ticket order", name);
    tap_is(s->bad_spacing, 0, "%s: starts at least %lld ms apart", name,
           (long long) p->spacing_ms);
    tap_is(s->bad_plan, 0, "%s: no start before its ask%s", name,
           (!late && !upward && !jitter)
           ? ", nor after the plan it was first told" : "");
    tap_is(s->bad_wait + s->bad_queue, 0, "%s: no plan beyond max_wait, no "
           "queue beyond max_queue", name);
    tap_is(s->bad_rc, 0, "%s: only oversize requests refused as too large",
           name);
    tap_ok(sim_books(s), "%s: the pacer's minute is the log's", name);
}


/*
 * No trace of a cancelled waiter, at random: run A, cancel one of its
 * waiters, then replay A's calls without that waiter's into B, at the
 * same times; the two must hold the same state.  Every estimate is the
 * same: then the waiter behind the cancelled one takes exactly its plan
 * in B, and nobody could have started in B earlier than in A.
 */

static void
test_sim_cancel(void)
{
    int             trial, ok, rcs;
    int64_t         at;
    uint32_t        i, k;
    uint64_t        x, t, tb;
    sim_op_t       *op;
    llm_pacer_t    *pa, *pb;
    static sim_op_t  log[200000];

    ok = 0;
    rcs = 0;

    for (trial = 0; trial < 200; trial++) {
        pa = pacer(mem_a, 30 + trial % 50, 20000, 10000000, 1000, 0, 0);
        sim_init(&sim_a, pa, 0x9e3779b97f4a7c15ULL + trial);

        sim_a.gap = 1000 + trial * 10;
        sim_a.est_max = 700;
        sim_a.uniform = 1;
        sim_a.cancel_pct = 3;
        sim_a.log = log;
        sim_a.maxlog = sizeof(log) / sizeof(log[0]);

        sim_run(&sim_a, 500 + trial * 20);

        /* until someone waits behind someone (a pacer that never does fails) */
        for (i = 0; pa->waiting < 2 && i < 100000; i++) {
            sim_run(&sim_a, 1);
        }

        if (pa->waiting < 2) {
            rcs++;
            continue;
        }

        k = (uint32_t) rnd_to(&sim_a, pa->waiting);
        x = entry(pa, pa->started + k)->ticket;
        at = sim_a.now;

        (void) llm_pacer_cancel(pa, x, at);

        pb = pacer(mem_b, pa->conf.rpm, pa->conf.tpm, pa->conf.max_wait_ms,
                   pa->conf.max_queue, 0, 0);

        for (i = 0; i < sim_a.nlog; i++) {
            op = &log[i];

            if (op->ticket == x) {
                continue;
            }

            t = op->ticket > x ? op->ticket - 1 : op->ticket;

            switch (op->op) {

            case OP_ASK:
                rcs += (int) llm_pacer_ask(pb, op->tokens, op->now, &at, &tb)
                       != op->rc || tb != t;
                break;

            case OP_GO:
                rcs += (int) llm_pacer_go(pb, &t, op->now, &at) != op->rc;
                break;

            case OP_CANCEL:
                rcs += llm_pacer_cancel(pb, t, op->now) != 0;
                break;

            case OP_CORRECT:
                (void) llm_pacer_correct(pb, t, op->tokens, op->now);
                break;

            default:
                (void) llm_pacer_next(pb, op->now, &tb, &at);
            }
        }

        llm_pacer_window(pb, sim_a.now, &at, &at);

        ok += same(pa, pb);
        rcs += sim_a.nlog == sim_a.maxlog;
    }

    tap_is(rcs, 0, "200 random runs replayed without the cancelled "
           "waiter: every answer the same");
    tap_is(ok, 200, "and the same state as the run that cancelled it");
}


/*
 * A waiter whose process died never asks again: silent for stale_ms, it is
 * dropped wherever it is in the queue, and the ones behind go instead.
 */

static void
test_stale(void)
{
    int      k;
    int64_t  at;
    uint64_t a, b, c, d[3], l;
    llm_pacer_t  *p;

    p = pacer(mem_a, 60, 0, 10000, 10, 0, 0);
    p->conf.stale_ms = 500;

    tap_is(llm_pacer_ask(p, 1, 0, &at, &a), LLM_PACER_GO, "stale: a goes");
    tap_is(llm_pacer_ask(p, 1, 0, &at, &b), LLM_PACER_WAIT, "stale: b waits");
    tap_is(llm_pacer_ask(p, 1, 0, &at, &c), LLM_PACER_WAIT, "stale: c waits");
    tap_is(at, 2000, "stale: c planned after b");

    /* b asks once more, then never again; c keeps asking */
    tap_is(llm_pacer_go(p, &b, 400, &at), LLM_PACER_WAIT, "stale: b not yet");
    tap_is(llm_pacer_go(p, &c, 400, &at), LLM_PACER_WAIT, "stale: c behind");
    tap_is(llm_pacer_go(p, &c, 800, &at), LLM_PACER_WAIT, "stale: c still");
    tap_is(p->waiting, 2, "stale: b silent 400 ms is kept");

    tap_is(llm_pacer_go(p, &c, 1200, &at), LLM_PACER_GO,
           "stale: b silent 800 ms is dropped, c goes in its slot");
    tap_is(llm_pacer_go(p, &b, 1200, &at), LLM_PACER_NOT_FOUND,
           "stale: b finds nothing");
    tap_is(p->started, 2, "stale: a and c started, b not");
    tap_is(p->waiting, 0, "stale: nobody waits");

    /* three dead ones ahead cost one stale_ms, not three */
    p = pacer(mem_a, 60, 0, 100000, 10, 0, 0);
    p->conf.stale_ms = 500;

    (void) llm_pacer_ask(p, 1, 0, &at, &a);

    for (k = 0; k < 3; k++) {
        (void) llm_pacer_ask(p, 1, 0, &at, &d[k]);
    }

    tap_is(llm_pacer_ask(p, 1, 0, &at, &l), LLM_PACER_WAIT, "dead: l waits");
    tap_is(at, 4000, "dead: behind three");
    tap_is(llm_pacer_go(p, &l, 400, &at), LLM_PACER_WAIT, "dead: l asks");
    tap_is(llm_pacer_go(p, &l, 800, &at), LLM_PACER_WAIT,
           "dead: at 800 ms the three are gone, l is first");
    tap_is(at, 1000, "dead: planned in the first one's slot");
    tap_is(p->waiting, 1, "dead: l alone waits");
    tap_is(llm_pacer_go(p, &l, 1000, &at), LLM_PACER_GO, "dead: l goes");

    /* a live waiter is never dropped, however long it waits */
    p = pacer(mem_a, 6, 0, 100000, 10, 0, 0);
    p->conf.stale_ms = 500;

    (void) llm_pacer_ask(p, 1, 0, &at, &a);
    (void) llm_pacer_ask(p, 1, 0, &at, &b);

    for (k = 1; k < 25; k++) {
        if (llm_pacer_go(p, &b, k * 400, &at) != LLM_PACER_WAIT) {
            break;
        }
    }

    tap_is(k, 25, "live: asking every 400 ms, it waits its 10 s");
    tap_is(llm_pacer_go(p, &b, 10000, &at), LLM_PACER_GO, "live: and goes");

    /* stale_ms 0: never dropped */
    p = pacer(mem_a, 60, 0, 100000, 10, 0, 0);

    tap_is(llm_pacer_ask(p, 1, 0, &at, &a), LLM_PACER_GO, "never: a goes");
    tap_is(llm_pacer_ask(p, 1, 0, &at, &b), LLM_PACER_WAIT, "never: b waits");
    llm_pacer_window(p, 50000, &at, &at);
    tap_is(p->waiting, 1, "never: b kept 50 s without asking");
}


int
main(void)
{
    test_spacing();
    test_tokens();
    test_too_large();
    test_cancel();
    test_corrections();
    test_fifo();
    test_tenants();
    test_bounds();
    test_clock();
    test_stale();

    /* requests bind: 60 a minute, small estimates */
    test_sim("rpm-bound", 60, 100000, 800, 1500, 0, 0, 0, 1);

    /* tokens bind: estimates of up to 30,000 against 90,000 a minute */
    test_sim("tpm-bound", 600, 90000, 600, 3000, 0, 0, 0, 2);

    /* both, with lagging clocks, late starts and usage over estimates */
    test_sim("sloppy", 120, 60000, 300, 4000, 5, 400, 1, 3);

    test_sim_cancel();

    return tap_done();
}
