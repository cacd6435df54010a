
/*
 * libFuzzer target for the upstream pacer.  The first 8 bytes choose the
 * conf:
 *
 *     0-1  rpm, little-endian, modulo 601
 *     2-3  tpm, little-endian, times 3/2 (up to 98,302)
 *     4    max_wait_ms, in 500 ms
 *     5    max_queue, bits 0-5; the tenants less one, bits 6-7
 *     6    stale_ms, in 100 ms; 0: never
 *     7    the ring's entries less one, when rpm is 0
 *
 * The rest is a program, an op a byte (bits 0-2 the op, bits 3-7 its x)
 * and the op's own bytes after it, 0 once the input ends:
 *
 *     0  advance    x bit 2 clear: the clock moves (n + 1) units, n the
 *                   next byte, the unit 1 ms, 50 ms, 1 s or 15 s (x bits
 *                   0-1); set: calls lag 8 ms times the next byte behind
 *                   the clock from now on (another worker's cached time)
 *     1  ask        x bits 3-4: 1 to 4 asks; x bits 0-2: the estimate's
 *                   kind, the next two bytes its value (see fuzz_tokens);
 *                   with more than one tenant, a byte more: whose
 *     2  go         the next byte picks a ticket (see fuzz_pick)
 *     3  due        the first waiter's plan (next), the clock moved to it
 *                   and x * x ms beyond, then its go
 *     4  cancel     a ticket picked
 *     5  correct    a ticket picked, then the usage as for ask
 *     6  next
 *     7  window
 *
 * The fuzzer keeps its own books: the starts and their tokens as now
 * corrected, the waiters, each ticket's fate.  At every start it checks
 * the rules themselves: not before the ask, at least a spacing after the
 * previous start, no waiter of its tenant asked earlier nor any of an
 * earlier round still in line, one start a round for each tenant, and the
 * minute ending then, as then known, within RPM and TPM.  The books place
 * each waiter by their own rounds, shares and taken places, as the
 * pacer's header tells.  Each waiter's plan is
 * worked out again from scratch, the earliest time the requests ahead
 * and their tokens allow, and so is the plan were tokens no limit, which
 * alone may refuse a request as TOO_LONG; every result must be the one
 * the books predict, and after every op the pacer's window, queue and
 * ring must be the books'.
 *
 * FUZZ_PACER_TRACE=1 in the environment prints each call and its result.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm_pacer.h"


#define FUZZ_OPS       2000

/* at most 4 asks an op, and a new ticket for each start: below this */
#define FUZZ_TICKETS   (8 * FUZZ_OPS + 2)

/* max_queue is 6 bits */
#define FUZZ_QUEUE     64

#define FUZZ_NOW       1718020800000LL
#define FUZZ_W         LLM_PACER_WINDOW

/*
 * The books' loops over a minute of starts, not traced for coverage: they
 * would cost most of the time, and it is the pacer's paths that count.
 */
#define FUZZ_BOOKS     __attribute__((noinline, no_sanitize("coverage")))


typedef enum {
    FUZZ_NONE = 0,
    FUZZ_WAITING,
    FUZZ_STARTED,
    FUZZ_CANCELLED,
    FUZZ_DROPPED,
    FUZZ_RENAMED                      /* started with a new ticket */
} fuzz_state_e;


typedef struct {
    uint64_t            ticket;
    uint64_t            tenant;
    uint64_t            round;
    int64_t             start_ms;     /* started: when; waiting: the plan */
    int64_t             tokens;       /* as the pacer keeps them, clamped */
    int64_t             asked_ms;
    int64_t             seen_ms;      /* a waiter: when it last asked */
    int64_t             bound_ms;     /* a waiter: its plan were tokens no
                                         limit */
} fuzz_req_t;


typedef struct {
    int64_t             start_ms;
    int64_t             tokens;
    int64_t             before;       /* the tokens of those ahead of it */
} fuzz_ahead_t;


typedef struct {
    llm_pacer_t        *p;
    llm_pacer_conf_t    cf;
    int64_t             spacing;
    uint32_t            size;

    const uint8_t      *in;
    const uint8_t      *end;

    int64_t             now;          /* the driver's clock */
    int64_t             lag;          /* calls are this behind it */
    int64_t             seen;         /* the latest clock given */
    uint64_t            next_ticket;

    unsigned            tenants;      /* 1 to 4 */
    uint64_t            tenant;       /* of the asks of this op */
    uint64_t            round;        /* of the latest start */
    uint64_t            evicted;

    fuzz_req_t          start[FUZZ_TICKETS];    /* in start order */
    uint32_t            nstart;
    uint32_t            from;                   /* the oldest in the minute */

    fuzz_req_t          wait[FUZZ_QUEUE];
    uint32_t            nwait;

    /*
     * The requests ahead of a new one, from the oldest in the minute: the
     * starts, at their index in start[], then the waiters at their plans;
     * reqs[] the same, planned as if tokens were no limit.
     */
    fuzz_ahead_t        ahead[FUZZ_TICKETS + FUZZ_QUEUE];
    fuzz_ahead_t        reqs[FUZZ_TICKETS + FUZZ_QUEUE];

    uint8_t             state[FUZZ_TICKETS];    /* by ticket */
    uint32_t            index[FUZZ_TICKETS];    /* started: in start[] */
} fuzz_t;


static void fuzz_conf(fuzz_t *f, const uint8_t *data);
static void fuzz_update(fuzz_t *f, int64_t call);
static void fuzz_plans(fuzz_t *f) FUZZ_BOOKS;
static void fuzz_set(fuzz_t *f, uint32_t m, int64_t start_ms,
    int64_t tokens, int64_t bound_ms);
static int64_t fuzz_earliest(fuzz_t *f, const fuzz_ahead_t *a, uint32_t m,
    int64_t tokens, int tpm) FUZZ_BOOKS;
static int64_t fuzz_max(int64_t a, int64_t b);
static void fuzz_ask(fuzz_t *f, int64_t tokens);
static void fuzz_go(fuzz_t *f, uint64_t ticket);
static void fuzz_cancel(fuzz_t *f, uint64_t ticket);
static void fuzz_correct(fuzz_t *f, uint64_t ticket, int64_t tokens);
static int fuzz_next(fuzz_t *f, uint64_t *ticket, int64_t *at);
static void fuzz_window(fuzz_t *f);
static void fuzz_started(fuzz_t *f, const fuzz_req_t *r) FUZZ_BOOKS;
static void fuzz_leave(fuzz_t *f, uint32_t k);
static uint64_t fuzz_round(fuzz_t *f, uint64_t tenant, uint32_t *mine);
static uint32_t fuzz_tenants(fuzz_t *f);
static int fuzz_victim(fuzz_t *f, uint64_t tenant, uint32_t cap);
static uint32_t fuzz_behind(fuzz_t *f, uint64_t round);
static void fuzz_check(fuzz_t *f) FUZZ_BOOKS;
static fuzz_state_e fuzz_state(fuzz_t *f, uint64_t ticket);
static uint64_t fuzz_pick(fuzz_t *f, unsigned b);
static int64_t fuzz_tokens(fuzz_t *f, unsigned kind, unsigned v);
static int64_t fuzz_clamp(int64_t tokens);
static unsigned fuzz_take(fuzz_t *f);
static void fuzz_trace(fuzz_t *f, const char *op, uint64_t ticket,
    int64_t tokens, int rc, int64_t at);
static void fuzz_fail(fuzz_t *f, const char *how, const char *what);


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


static fuzz_t  fuzz_a;
static int     fuzz_tracing = -1;


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t             size_p;
    int64_t            at;
    unsigned           b, x, i, n, kind, v;
    uint32_t           ops;
    uint64_t           t;
    fuzz_t            *f;
    llm_pacer_conf_t   bad;

    static const int64_t   units[] = { 1, 50, 1000, 15000 };
    static const uint64_t  tenants[] = { 0, 1, 0x8000000000000000ULL,
                                         UINT64_MAX };

    if (size < 8) {
        return 0;
    }

    if (fuzz_tracing < 0) {
        fuzz_tracing = getenv("FUZZ_PACER_TRACE") != NULL;
    }

    f = &fuzz_a;

    /* the books are reset field by field: the arrays are written first */
    f->nstart = 0;
    f->from = 0;
    f->nwait = 0;
    f->next_ticket = 1;
    f->tenant = 0;
    f->round = 0;
    f->evicted = 0;
    f->now = FUZZ_NOW;
    f->seen = FUZZ_NOW;
    f->lag = 0;
    f->in = data + 8;
    f->end = data + size;

    fuzz_conf(f, data);

    /* a ring of its own size, so that ASan sees an entry past it */
    size_p = llm_pacer_size(f->size);
    f->p = malloc(size_p);

    if (f->p == NULL) {
        fuzz_fail(f, "malloc", "no memory");
    }

    /* garbage in the ring, to be seen if an unwritten entry is read */
    memset(f->p, 0xa5, size_p);

    bad = f->cf;
    bad.rpm = -1 - (int64_t) data[0];

    if (llm_pacer_init(f->p, size_p, &bad, FUZZ_NOW) != NULL
        || llm_pacer_init(f->p, llm_pacer_size(0), &f->cf, FUZZ_NOW) != NULL)
    {
        fuzz_fail(f, "init", "a conf or a size it cannot take taken");
    }

    if (llm_pacer_init(f->p, size_p, &f->cf, FUZZ_NOW) != f->p) {
        fuzz_fail(f, "init", "a valid conf refused");
    }

    if (f->p->size != f->size || f->p->spacing_ms != f->spacing) {
        fuzz_fail(f, "init", "another ring or spacing");
    }

    if (fuzz_tracing) {
        fprintf(stderr, "conf rpm %lld tpm %lld max_wait %lld max_queue %u "
                "stale %lld entries %u spacing %lld tenants %u\n",
                (long long) f->cf.rpm, (long long) f->cf.tpm,
                (long long) f->cf.max_wait_ms, f->cf.max_queue,
                (long long) f->cf.stale_ms, f->size,
                (long long) f->spacing, f->tenants);
    }

    for (ops = 0; f->in < f->end && ops < FUZZ_OPS; ops++) {
        b = fuzz_take(f);
        x = b >> 3;

        switch (b & 0x07) {

        case 0:
            n = fuzz_take(f);

            if (x & 0x04) {
                f->lag = 8 * (int64_t) n;

            } else {
                f->now += (n + 1) * units[x & 0x03];
            }

            if (fuzz_tracing) {
                fprintf(stderr, "clock %lld lag %lld\n",
                        (long long) (f->now - FUZZ_NOW), (long long) f->lag);
            }

            break;

        case 1:
            kind = x & 0x07;
            v = fuzz_take(f);
            v |= fuzz_take(f) << 8;

            if (f->tenants > 1) {
                f->tenant = tenants[fuzz_take(f) % f->tenants];
            }

            for (i = 0; i <= (x >> 3); i++) {
                fuzz_ask(f, fuzz_tokens(f, kind, v));
            }

            break;

        case 2:
            fuzz_go(f, fuzz_pick(f, fuzz_take(f)));
            break;

        case 3:
            if (fuzz_next(f, &t, &at)) {
                at += (int64_t) x * x + f->lag;
                f->now = fuzz_max(f->now, at);
                fuzz_go(f, t);
            }

            break;

        case 4:
            fuzz_cancel(f, fuzz_pick(f, fuzz_take(f)));
            break;

        case 5:
            t = fuzz_pick(f, fuzz_take(f));
            v = fuzz_take(f);
            v |= fuzz_take(f) << 8;
            fuzz_correct(f, t, fuzz_tokens(f, x & 0x07, v));
            break;

        case 6:
            (void) fuzz_next(f, &t, &at);
            break;

        default:
            fuzz_window(f);
        }

        fuzz_check(f);
    }

    free(f->p);

    return 0;
}


static void
fuzz_conf(fuzz_t *f, const uint8_t *data)
{
    llm_pacer_conf_t  *cf;

    cf = &f->cf;

    cf->rpm = (data[0] | data[1] << 8) % 601;
    cf->tpm = (int64_t) (data[2] | data[3] << 8) * 3 / 2;
    cf->max_wait_ms = 500 * (int64_t) data[4];
    cf->max_queue = data[5] & 0x3f;
    f->tenants = 1 + (data[5] >> 6);
    cf->stale_ms = 100 * (int64_t) data[6];

    f->spacing = cf->rpm ? (FUZZ_W + cf->rpm - 1) / cf->rpm : 0;
    f->size = llm_pacer_entries(cf);

    if (cf->rpm == 0) {
        /* the caller's choice: the ring is the limit */
        f->size = 1 + (uint32_t) data[7];

    } else if (f->size != cf->rpm + cf->max_queue) {
        fuzz_fail(f, "entries", "not a minute's starts and the queue");
    }
}


/*
 * The books brought to a call's clock as the pacer's header tells: the
 * latest clock seen, the starts a minute old out of the window, every
 * waiter silent longer than stale_ms dropped, wherever it waits, and the
 * plans worked out again.
 */

static void
fuzz_update(fuzz_t *f, int64_t call)
{
    uint32_t  k;

    if (call > f->seen) {
        f->seen = call;
    }

    while (f->from < f->nstart
           && f->start[f->from].start_ms + FUZZ_W <= f->seen)
    {
        f->from++;
    }

    k = 0;

    while (f->cf.stale_ms && k < f->nwait) {
        if (f->wait[k].seen_ms + f->cf.stale_ms < f->seen) {
            f->state[f->wait[k].ticket] = FUZZ_DROPPED;
            fuzz_leave(f, k);
            continue;
        }

        k++;
    }

    fuzz_plans(f);
}


/*
 * Each waiter's plan: the earliest time, not before now, that the starts
 * in the window and the waiters ahead at their plans allow; its bound
 * likewise, every request taken as of no tokens.
 */

static void
fuzz_plans(fuzz_t *f)
{
    uint32_t     k, m;
    fuzz_req_t  *w;

    for (k = 0; k < f->nwait; k++) {
        w = &f->wait[k];
        m = f->nstart + k;

        w->start_ms = fuzz_earliest(f, f->ahead, m, w->tokens, 1);
        w->bound_ms = fuzz_earliest(f, f->reqs, m, 0, 0);

        fuzz_set(f, m, w->start_ms, w->tokens, w->bound_ms);
    }
}


static void
fuzz_set(fuzz_t *f, uint32_t m, int64_t start_ms, int64_t tokens,
    int64_t bound_ms)
{
    fuzz_ahead_t  *a;

    a = &f->ahead[m];
    a->start_ms = start_ms;
    a->tokens = tokens;
    a->before = m ? a[-1].before + a[-1].tokens : 0;

    f->reqs[m].start_ms = bound_ms;
    f->reqs[m].tokens = 0;
    f->reqs[m].before = 0;
}


/*
 * The earliest start, not before now, of a request of tokens behind the
 * requests in a from the oldest in the minute to m: a spacing after the
 * last one, once all but RPM - 1 of them have left the minute, and once
 * the fewest oldest have left that the rest and it fit in TPM (found by
 * halves: what stays only shrinks as more leave).
 */

static int64_t
fuzz_earliest(fuzz_t *f, const fuzz_ahead_t *a, uint32_t m, int64_t tokens,
    int tpm)
{
    int64_t   t, end;
    uint32_t  lo, hi, mid;

    t = f->seen;
    lo = f->from;

    if (m == lo) {
        return t;
    }

    t = fuzz_max(t, a[m - 1].start_ms + f->spacing);

    if (f->cf.rpm && m - lo >= f->cf.rpm) {
        t = fuzz_max(t, a[m - f->cf.rpm].start_ms + FUZZ_W);
    }

    if (tpm && f->cf.tpm) {
        end = a[m - 1].before + a[m - 1].tokens;
        hi = m;

        while (lo < hi) {
            mid = lo + (hi - lo) / 2;

            if (end - a[mid].before + tokens <= f->cf.tpm) {
                hi = mid;

            } else {
                lo = mid + 1;
            }
        }

        if (lo > f->from) {
            t = fuzz_max(t, a[lo - 1].start_ms + FUZZ_W);
        }
    }

    return t;
}


static int64_t
fuzz_max(int64_t a, int64_t b)
{
    return a > b ? a : b;
}


static void
fuzz_ask(fuzz_t *f, int64_t tokens)
{
    int                  waits, victim;
    int64_t              t, at, want_at, clamped, bound;
    uint32_t             n, k, mine, cap;
    uint64_t             ticket, want_ticket, round;
    fuzz_req_t           r;
    llm_pacer_rc_e       rc, want;

    fuzz_update(f, f->now - f->lag);

    clamped = fuzz_clamp(tokens);

    /* the requests ahead end there */
    n = f->nstart + f->nwait;

    want = LLM_PACER_GO;
    want_at = f->seen;
    want_ticket = 0;
    t = f->seen;
    victim = -1;
    round = 0;
    mine = 0;
    cap = 0;

    if (f->cf.tpm && clamped > f->cf.tpm) {
        want = LLM_PACER_TOO_LARGE;

    } else if (n - f->from == f->size && f->nwait == 0) {
        want = LLM_PACER_FULL;

    } else {
        t = fuzz_earliest(f, f->ahead, n, clamped, 1);

        /* a start due now still waits behind a waiter */
        waits = t > f->seen || f->nwait;

        if (waits) {
            round = fuzz_round(f, f->tenant, &mine);
            cap = f->cf.max_queue / (fuzz_tenants(f) + (mine == 0));
            cap = cap ? cap : 1;
        }

        if (waits && (f->cf.max_queue == 0 || mine >= cap)) {
            want = LLM_PACER_FULL;

        } else if (waits
                   && (f->nwait >= f->cf.max_queue || n - f->from == f->size)
                   && (victim = fuzz_victim(f, f->tenant, cap)) < 0)
        {
            want = LLM_PACER_FULL;

        } else if (waits) {
            k = fuzz_behind(f, round);

            /* were tokens no limit: a spacing each, the taken one gone */
            bound = fuzz_earliest(f, f->reqs, f->nstart, 0, 0)
                    + (int64_t) (k - (victim >= 0 && (uint32_t) victim < k))
                      * f->spacing;

            if (bound - f->seen > f->cf.max_wait_ms) {
                want = LLM_PACER_TOO_LONG;
                want_at = fuzz_earliest(f, f->ahead, f->nstart + k, clamped,
                                        1);

            } else {
                /* the plan once the books have it in its place, below */
                want = LLM_PACER_WAIT;
                want_ticket = f->next_ticket;
            }

        } else {
            want_at = t;
            want_ticket = f->next_ticket;
        }
    }

    rc = llm_pacer_ask_for(f->p, f->tenant, tokens, f->now - f->lag, &at,
                           &ticket);

    fuzz_trace(f, "ask", ticket, tokens, (int) rc, at);

    if (rc != want) {
        fuzz_fail(f, "ask", "another answer");
    }

    if (rc != LLM_PACER_WAIT && at != want_at) {
        fuzz_fail(f, "ask", "another start");
    }

    if (ticket != want_ticket) {
        fuzz_fail(f, "ask", "another ticket");
    }

    /* a ring of RPM + max_queue entries is never full before the queue */
    if (rc == LLM_PACER_FULL && f->cf.rpm && f->nwait < f->cf.max_queue
        && f->tenants == 1)
    {
        fuzz_fail(f, "ask", "the ring full, not the queue");
    }

    if (rc != LLM_PACER_GO && rc != LLM_PACER_WAIT) {
        return;
    }

    f->next_ticket++;

    r.ticket = ticket;
    r.tenant = f->tenant;
    r.round = round;
    r.start_ms = at;
    r.tokens = clamped;
    r.asked_ms = f->seen;
    r.seen_ms = f->seen;
    r.bound_ms = 0;

    if (rc == LLM_PACER_GO) {
        r.round = ++f->round;
        fuzz_started(f, &r);
        fuzz_plans(f);
        return;
    }

    if (victim >= 0) {
        f->state[f->wait[victim].ticket] = FUZZ_DROPPED;
        f->evicted++;
        fuzz_leave(f, (uint32_t) victim);
        fuzz_plans(f);
    }

    k = fuzz_behind(f, round);

    memmove(&f->wait[k + 1], &f->wait[k],
            (f->nwait - k) * sizeof(fuzz_req_t));
    f->wait[k] = r;
    f->nwait++;
    f->state[ticket] = FUZZ_WAITING;

    fuzz_plans(f);

    if (at != f->wait[k].start_ms) {
        fuzz_fail(f, "ask", "another plan");
    }
}


/*
 * The round of a new waiter of tenant: the latest start's, unless the
 * tenant started in it; one after each of its waiters'.
 */

static uint64_t
fuzz_round(fuzz_t *f, uint64_t tenant, uint32_t *mine)
{
    uint32_t  i;
    uint64_t  round;

    round = f->round;
    *mine = 0;

    for (i = f->from; i < f->nstart; i++) {
        if (f->start[i].tenant == tenant && f->start[i].round == f->round) {
            round = f->round + 1;
        }
    }

    for (i = 0; i < f->nwait; i++) {
        if (f->wait[i].tenant == tenant) {
            (*mine)++;

            if (f->wait[i].round >= round) {
                round = f->wait[i].round + 1;
            }
        }
    }

    return round;
}


/* the tenants with waiters */

static uint32_t
fuzz_tenants(fuzz_t *f)
{
    uint32_t  i, j, n;

    n = 0;

    for (i = 0; i < f->nwait; i++) {
        for (j = 0; j < i && f->wait[j].tenant != f->wait[i].tenant; j++) {
            /* void */
        }

        n += (j == i);
    }

    return n;
}


/* whose place is taken: the newest of the last 8 other tenants over cap */

static int
fuzz_victim(fuzz_t *f, uint64_t tenant, uint32_t cap)
{
    int       k;
    uint32_t  i, held, looked;
    uint64_t  seen[8];

    looked = 0;

    for (k = (int) f->nwait - 1; k >= 0; k--) {
        if (f->wait[k].tenant == tenant) {
            continue;
        }

        for (i = 0; i < looked && seen[i] != f->wait[k].tenant; i++) {
            /* void */
        }

        if (i < looked) {
            continue;
        }

        held = 0;

        for (i = 0; i < f->nwait; i++) {
            held += f->wait[i].tenant == f->wait[k].tenant;
        }

        if (held > cap) {
            return k;
        }

        if (looked == 8) {
            return -1;
        }

        seen[looked++] = f->wait[k].tenant;
    }

    return -1;
}


/* a waiter of round goes behind every waiter of its round and before */

static uint32_t
fuzz_behind(fuzz_t *f, uint64_t round)
{
    uint32_t  k;

    for (k = f->nwait; k > 0 && f->wait[k - 1].round > round; k--) {
        /* void */
    }

    return k;
}


static void
fuzz_go(fuzz_t *f, uint64_t ticket)
{
    int64_t              at, want_at;
    uint32_t             k;
    uint64_t             asked, want_ticket;
    fuzz_req_t           r;
    llm_pacer_rc_e       rc, want;

    fuzz_update(f, f->now - f->lag);

    want = LLM_PACER_NOT_FOUND;
    want_ticket = ticket;
    asked = ticket;
    want_at = f->seen;
    k = 0;

    switch (fuzz_state(f, ticket)) {

    case FUZZ_STARTED:
        r = f->start[f->index[ticket]];

        if (f->index[ticket] >= f->from) {
            want = LLM_PACER_GO;
            want_at = r.start_ms;
        }

        break;

    case FUZZ_WAITING:
        while (f->wait[k].ticket != ticket) {
            k++;
        }

        want = (k == 0 && f->wait[0].start_ms <= f->seen) ? LLM_PACER_GO
                                                         : LLM_PACER_WAIT;
        want_at = f->wait[k].start_ms;

        /* a start behind a later ticket's: a new one */
        if (want == LLM_PACER_GO && f->nstart > f->from
            && f->start[f->nstart - 1].ticket > ticket)
        {
            want_ticket = f->next_ticket;
        }

        break;

    default:
        break;
    }

    rc = llm_pacer_go(f->p, &ticket, f->now - f->lag, &at);

    fuzz_trace(f, "go", ticket, 0, (int) rc, at);

    if (rc != want) {
        fuzz_fail(f, "go", "another answer");
    }

    if (at != want_at) {
        fuzz_fail(f, "go", "another start");
    }

    if (ticket != want_ticket) {
        fuzz_fail(f, "go", "another ticket");
    }

    if (fuzz_state(f, asked) != FUZZ_WAITING) {
        return;
    }

    f->wait[k].seen_ms = f->seen;

    if (rc == LLM_PACER_GO) {
        r = f->wait[0];
        fuzz_leave(f, 0);

        if (ticket != asked) {
            f->state[asked] = FUZZ_RENAMED;
            f->next_ticket++;
            r.ticket = ticket;
        }

        f->round = r.round;
        fuzz_started(f, &r);
    }

    fuzz_plans(f);
}


static void
fuzz_cancel(fuzz_t *f, uint64_t ticket)
{
    int       rc, want;
    uint32_t  k;

    fuzz_update(f, f->now - f->lag);

    want = fuzz_state(f, ticket) == FUZZ_WAITING ? 0 : -1;

    rc = llm_pacer_cancel(f->p, ticket, f->now - f->lag);

    fuzz_trace(f, "cancel", ticket, 0, rc, 0);

    if (rc != want) {
        fuzz_fail(f, "cancel", "another answer");
    }

    if (rc != 0) {
        return;
    }

    for (k = 0; f->wait[k].ticket != ticket; k++) {
        /* void */
    }

    f->state[ticket] = FUZZ_CANCELLED;
    fuzz_leave(f, k);
    fuzz_plans(f);
}


static void
fuzz_correct(fuzz_t *f, uint64_t ticket, int64_t tokens)
{
    int          rc, want;
    uint32_t     i;
    fuzz_req_t  *r;

    fuzz_update(f, f->now - f->lag);

    want = (fuzz_state(f, ticket) == FUZZ_STARTED
            && f->index[ticket] >= f->from) ? 0 : -1;

    rc = llm_pacer_correct(f->p, ticket, tokens, f->now - f->lag);

    fuzz_trace(f, "correct", ticket, tokens, rc, 0);

    if (rc != want) {
        fuzz_fail(f, "correct", "another answer");
    }

    if (rc != 0) {
        return;
    }

    f->start[f->index[ticket]].tokens = fuzz_clamp(tokens);

    for (i = f->index[ticket]; i < f->nstart; i++) {
        r = &f->start[i];
        fuzz_set(f, i, r->start_ms, r->tokens, r->start_ms);
    }

    fuzz_plans(f);
}


static int
fuzz_next(fuzz_t *f, uint64_t *ticket, int64_t *at)
{
    int  rc;

    fuzz_update(f, f->now - f->lag);

    rc = llm_pacer_next(f->p, f->now - f->lag, ticket, at);

    fuzz_trace(f, "next", *ticket, 0, rc, *at);

    if (rc != (f->nwait != 0)) {
        fuzz_fail(f, "next", "another answer");
    }

    if (*ticket != (f->nwait ? f->wait[0].ticket : 0)
        || *at != (f->nwait ? f->wait[0].start_ms : f->seen))
    {
        fuzz_fail(f, "next", "another waiter or plan");
    }

    return rc;
}


static void
fuzz_window(fuzz_t *f)
{
    int64_t   n, tokens, sum;
    uint32_t  i;

    fuzz_update(f, f->now - f->lag);

    llm_pacer_window(f->p, f->now - f->lag, &n, &tokens);

    fuzz_trace(f, "window", 0, tokens, (int) n, 0);

    sum = 0;

    for (i = f->from; i < f->nstart; i++) {
        sum += f->start[i].tokens;
    }

    if (n != (int64_t) (f->nstart - f->from) || tokens != sum) {
        fuzz_fail(f, "window", "not the minute's starts and tokens");
    }
}


/* the rules of a start, from the log alone */

static void
fuzz_started(fuzz_t *f, const fuzz_req_t *r)
{
    int64_t            n, sum;
    uint32_t           i;
    const fuzz_req_t  *prev;

    if (r->start_ms != f->seen || r->start_ms < r->asked_ms) {
        fuzz_fail(f, "start", "not now, or before its ask");
    }

    if (f->nstart) {
        prev = &f->start[f->nstart - 1];

        if (f->nstart > f->from && prev->ticket >= r->ticket) {
            fuzz_fail(f, "start", "after a later ticket");
        }

        if (r->start_ms < prev->start_ms + f->spacing) {
            fuzz_fail(f, "start", "less than a spacing after the last");
        }
    }

    for (i = 0; i < f->nwait; i++) {
        if (f->wait[i].round < r->round
            || (f->wait[i].tenant == r->tenant
                && f->wait[i].asked_ms < r->asked_ms))
        {
            fuzz_fail(f, "start", "ahead of an earlier round or of a "
                      "waiter of its tenant asked earlier");
        }
    }

    for (i = f->from; i < f->nstart; i++) {
        if (f->start[i].tenant == r->tenant && f->start[i].round == r->round) {
            fuzz_fail(f, "start", "a tenant's second start in a round");
        }
    }

    n = 1;
    sum = r->tokens;

    for (i = f->nstart;
         i > 0 && f->start[i - 1].start_ms > r->start_ms - FUZZ_W;
         i--)
    {
        n++;
        sum += f->start[i - 1].tokens;
    }

    if (f->cf.rpm && n > f->cf.rpm) {
        fuzz_fail(f, "start", "a minute over RPM");
    }

    if (f->cf.tpm && sum > f->cf.tpm) {
        fuzz_fail(f, "start", "a minute over TPM as known at the start");
    }

    f->state[r->ticket] = FUZZ_STARTED;
    f->index[r->ticket] = f->nstart;
    fuzz_set(f, f->nstart, r->start_ms, r->tokens, r->start_ms);
    f->start[f->nstart++] = *r;
}


/* the k-th waiter leaves the books */

static void
fuzz_leave(fuzz_t *f, uint32_t k)
{
    memmove(&f->wait[k], &f->wait[k + 1],
            (f->nwait - k - 1) * sizeof(fuzz_req_t));

    f->nwait--;
}


/* the pacer's state against the books: the window, the queue, the ring */

static void
fuzz_check(fuzz_t *f)
{
    int64_t                   n, tokens, sum, queued;
    uint32_t                  i, k;
    llm_pacer_t              *p;
    const fuzz_req_t         *r;
    const llm_pacer_entry_t  *e;

    p = f->p;

    /* the same clock: a call at it changes nothing */
    llm_pacer_window(p, f->seen, &n, &tokens);

    if (p->now_ms != f->seen) {
        fuzz_fail(f, "check", "another clock");
    }

    if (p->waiting > f->cf.max_queue || p->started + p->waiting > p->size) {
        fuzz_fail(f, "check", "a queue over max_queue or the ring");
    }

    if (n != (int64_t) (f->nstart - f->from) || p->waiting != f->nwait) {
        fuzz_fail(f, "check", "other starts in the minute or waiters");
    }

    sum = 0;

    for (i = 0; i < p->started; i++) {
        r = &f->start[f->from + i];
        e = &p->entry[(p->head + i) % p->size];

        if (e->ticket != r->ticket || e->start_ms != r->start_ms
            || e->tokens != r->tokens)
        {
            fuzz_fail(f, "check", "another start in the ring");
        }

        sum += r->tokens;
    }

    queued = 0;

    for (k = 0; k < p->waiting; k++) {
        r = &f->wait[k];
        e = &p->entry[(p->head + p->started + k) % p->size];

        if (e->ticket != r->ticket || e->tokens != r->tokens
            || e->tenant != r->tenant || e->round != r->round)
        {
            fuzz_fail(f, "check", "another waiter in the ring");
        }

        if (e->start_ms != r->start_ms) {
            fuzz_fail(f, "check", "a plan not the earliest");
        }

        queued += r->tokens;
    }

    if (tokens != sum || p->tokens != sum || p->queued != queued) {
        fuzz_fail(f, "check", "other sums of tokens");
    }

    if (p->tenants != fuzz_tenants(f) || p->round != f->round
        || p->evicted != f->evicted)
    {
        fuzz_fail(f, "check", "other tenants, round or places taken");
    }
}


static fuzz_state_e
fuzz_state(fuzz_t *f, uint64_t ticket)
{
    if (ticket == 0 || ticket >= f->next_ticket) {
        return FUZZ_NONE;
    }

    return f->state[ticket];
}


/*
 * A ticket: below 0x80 a waiter's, below 0xc0 a recent start's, below
 * 0xf0 any issued, whatever became of it; else one never issued.
 */

static uint64_t
fuzz_pick(fuzz_t *f, unsigned b)
{
    uint64_t  n;

    static const uint64_t  never[] = {
        0, 1, 2, 0x100000001ULL, 0x8000000000000000ULL, UINT64_MAX
    };

    if (b < 0x80 && f->nwait) {
        return f->wait[b % f->nwait].ticket;
    }

    if (b < 0xc0 && f->nstart) {
        return f->start[f->nstart - 1 - (b & 0x3f) % f->nstart].ticket;
    }

    n = f->next_ticket - 1;

    if (b < 0xf0 && n) {
        return n - (b & 0x3f) % n;
    }

    if (b & 0x08) {
        return f->next_ticket + (b & 0x07);
    }

    return never[(b & 0x07) % (sizeof(never) / sizeof(never[0]))];
}


/* an estimate or a usage: small, near TPM, negative, huge */

static int64_t
fuzz_tokens(fuzz_t *f, unsigned kind, unsigned v)
{
    int64_t  tpm;

    tpm = f->cf.tpm;

    switch (kind) {

    case 0:
        return v & 0xff;

    case 1:
        return v;

    case 2:
        return tpm - (v & 0xff);

    case 3:
        return tpm + (v & 0xff);

    case 4:
        return tpm / 2 + (v & 0xff) - 128;

    case 5:
        return -(int64_t) v - 1;

    case 6:
        return LLM_PACER_MAX - 128 + (v & 0xff);

    default:
        return (v & 1) ? INT64_MAX - (v >> 1) : INT64_MIN + (v >> 1);
    }
}


static int64_t
fuzz_clamp(int64_t tokens)
{
    return tokens < 0 ? 0 : tokens > LLM_PACER_MAX ? LLM_PACER_MAX : tokens;
}


static unsigned
fuzz_take(fuzz_t *f)
{
    return f->in < f->end ? *f->in++ : 0;
}


static void
fuzz_trace(fuzz_t *f, const char *op, uint64_t ticket, int64_t tokens,
    int rc, int64_t at)
{
    if (!fuzz_tracing) {
        return;
    }

    fprintf(stderr, "%-7s at %lld ticket %llu tokens %lld: rc %d start "
            "%lld (started %u waiting %u)\n", op,
            (long long) (f->seen - FUZZ_NOW), (unsigned long long) ticket,
            (long long) tokens, rc, (long long) (at ? at - FUZZ_NOW : 0),
            f->nstart - f->from, f->nwait);
}


static void
fuzz_fail(fuzz_t *f, const char *how, const char *what)
{
    fprintf(stderr, "fuzz_pacer: %s: %s (clock %lld, %u starts, %u "
            "waiting)\n", how, what, (long long) (f->seen - FUZZ_NOW),
            f->nstart, f->nwait);
    __builtin_trap();
}
