
/*
 * The outbound pacer: requests to one upstream, or one provider key,
 * leave no faster than its RPM and TPM, so that the provider has no
 * reason to answer 429.
 *
 * A request may start at the latest of three times, never earlier:
 *
 *     the last start + spacing          spacing = ceil(60 s / RPM)
 *     the RPM window has room           the oldest counted start has left
 *     the TPM window has room           enough of the oldest tokens have
 *                                       left for this request's
 *
 * The windows slide: a start at s counts in every minute (t - 60 s, t]
 * with s <= t < s + 60 s.  The spacing, rounded up, already keeps any
 * minute to RPM starts; the RPM window is checked anyway, as the rule.
 *
 * Tokens work like a card pre-authorisation: a request reserves its
 * estimate when it starts and its entry is corrected to the actual usage
 * when it completes, that entry alone.  A request of more than TPM tokens
 * is refused at once: no wait would ever let it in.
 *
 * Waiters form a queue behind the started requests, shared among the
 * tenants that wait: its starts go round the tenants, one waiter of each
 * a round (a tenant's first waiter joins the current round unless it
 * started in it already; each next one, the round after its last), in
 * the order they came within a round.  Its places are shared too: a
 * tenant holds at most max(1, max_queue / the tenants waiting, it
 * included), and one under that share finding the queue full takes the
 * place of the newest waiter of a tenant over it (of the last 8 tenants
 * in the queue), which then finds itself gone, as a dropped one.  A
 * tenant alone has the whole queue, in the order its waiters came.
 *
 * Each waiter has a planned start, computed as if every waiter ahead of
 * it starts at its own: that planned slot is what keeps the spacing even
 * and a later round behind an earlier one.  Plans are derived, never a
 * commitment:
 * they are made again whenever a cancel or a correction changes what is
 * ahead, so that a cancelled waiter leaves the queue and the ledger as if
 * it had never come, and a short answer lets the waiters in earlier.  A
 * waiter starts only when the caller asks for it, with llm_pacer_go(), and
 * its entry then records the time it really started.
 *
 * A waiter whose caller is gone (a killed process) would hold the queue
 * forever: a waiter that has not asked for stale_ms (its caller asks far
 * more often) is dropped, as if cancelled, wherever it is in the queue,
 * and its llm_pacer_go() then finds nothing.
 *
 * All state is one flat struct without pointers, sized and placed by the
 * caller (nginx shared memory, later): a ring of entries, the started
 * ones oldest first, then the waiters in order.  Integer milliseconds and
 * tokens, an injectable clock: every call takes now_ms, and a clock that
 * steps back (another worker's cached time) is taken as the latest one
 * seen.  No allocation; the caller holds the lock around every call.
 * Every call is linear in the entries at most: the plans are made again
 * in one pass, the bound of tokens moving forward with them (a few
 * stale waiters dropped at once cost a pass each), and the queue is
 * looked through for stale waiters only once the one asked the longest
 * ago may be.  Plain C, no nginx types.
 */

#ifndef _LLM_PACER_H_INCLUDED_
#define _LLM_PACER_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


#define LLM_PACER_WINDOW          60000

/*
 * The longest queue a configuration may ask for: every waiter's poll (4 a
 * second) looks the queue through under the lock, so a full queue's polls
 * cost its square; make bench-micro measures it at this size.
 */
#define LLM_PACER_QUEUE_MAX       2000

/* tokens above this are taken as this: no sum in the ring can overflow */
#define LLM_PACER_MAX             1000000000000LL


typedef struct {
    int64_t    rpm;              /* requests a minute; 0: no limit */
    int64_t    tpm;              /* tokens a minute; 0: no limit */
    int64_t    max_wait_ms;      /* the longest wait the requests ahead
                                    impose: more is refused (TOO_LONG) */
    uint32_t   max_queue;        /* waiters at most; 0: nobody waits */
    int64_t    stale_ms;         /* a waiter silent this long is dropped;
                                    0: never */
} llm_pacer_conf_t;


typedef struct {
    uint64_t   ticket;
    uint64_t   tenant;
    uint64_t   round;            /* its turn among the tenants' */
    int64_t    start_ms;         /* started: when; waiting: the plan */
    int64_t    tokens;           /* the estimate, or the usage once known */
    int64_t    seen_ms;          /* a waiter: when it last asked */
} llm_pacer_entry_t;


typedef struct {
    llm_pacer_conf_t   conf;
    int64_t            spacing_ms;
    int64_t            now_ms;       /* the latest clock seen */
    int64_t            tokens;       /* of the started entries */
    int64_t            queued;       /* of the waiters */
    uint64_t           next_ticket;
    uint64_t           round;        /* of the latest start */
    uint64_t           evicted;      /* waiters whose place was taken */
    int64_t            stale_at;     /* no waiter is stale before this */
    uint32_t           tenants;      /* with waiters */
    uint32_t           size;         /* entries the ring holds */
    uint32_t           head;         /* the oldest started entry */
    uint32_t           started;      /* entries from the head */
    uint32_t           waiting;      /* entries after them */
    llm_pacer_entry_t  entry[];
} llm_pacer_t;


typedef enum {
    LLM_PACER_GO = 0,            /* start now */
    LLM_PACER_WAIT,              /* queued: ask again at *start_at */
    LLM_PACER_TOO_LARGE,         /* more than TPM alone: never */
    LLM_PACER_FULL,              /* the queue (or the ring) is full */
    LLM_PACER_TOO_LONG,          /* the requests ahead: over max_wait_ms */
    LLM_PACER_NOT_FOUND          /* no waiter has this ticket */
} llm_pacer_rc_e;


/*
 * Entries a ring needs: a minute's starts (at most RPM) and the queue.
 * Without an RPM limit the caller chooses: a full ring refuses requests,
 * so its size is then the limit of requests a minute.
 */
uint32_t llm_pacer_entries(const llm_pacer_conf_t *cf);

/* bytes of a pacer of n entries */
size_t llm_pacer_size(uint32_t n);

/*
 * An empty pacer in mem, of size bytes (llm_pacer_size()), aligned for
 * int64_t.  NULL when not even one entry fits or the conf is invalid.
 */
llm_pacer_t *llm_pacer_init(void *mem, size_t size,
    const llm_pacer_conf_t *cf, int64_t now_ms);

/*
 * A new request of tenant, of tokens (its estimate).  GO: it started now,
 * its entry
 * is in the ledger.  WAIT: it is queued, planned to start at *start_at;
 * the caller asks llm_pacer_go() then.  TOO_LONG: the requests ahead
 * alone (RPM, spacing) hold it more than max_wait_ms; *start_at is when it
 * would have started, a Retry-After.  A plan held back by tokens is queued
 * however far: it assumes every estimate is used for a whole minute, and
 * the corrections bring it forward, often by far; the caller gives up at
 * its own deadline with llm_pacer_cancel().  On every refusal nothing is
 * kept.
 */
llm_pacer_rc_e llm_pacer_ask_for(llm_pacer_t *p, uint64_t tenant,
    int64_t tokens, int64_t now_ms, int64_t *start_at, uint64_t *ticket);

/* the same, of tenant 0 */
llm_pacer_rc_e llm_pacer_ask(llm_pacer_t *p, int64_t tokens, int64_t now_ms,
    int64_t *start_at, uint64_t *ticket);

/*
 * A waiter's turn?  GO: it started now (or had started at *start_at);
 * *ticket may then be a new one, the one its entry keeps from now on (the
 * started entries' tickets grow along the ring, and a waiter may start
 * before one that came earlier).  WAIT: not yet, or not first in line:
 * ask again at *start_at, which may have moved either way since it was
 * queued.  NOT_FOUND: no such ticket (dropped, or its place taken).
 */
llm_pacer_rc_e llm_pacer_go(llm_pacer_t *p, uint64_t *ticket, int64_t now_ms,
    int64_t *start_at);

/*
 * A waiter gives up: it leaves the queue as if it had never come, and the
 * waiters behind it are planned again.  0, or -1 if ticket is not waiting:
 * a started request is corrected instead (to 0 tokens when the provider
 * refused it: it still counts as a request).
 */
int llm_pacer_cancel(llm_pacer_t *p, uint64_t ticket, int64_t now_ms);

/*
 * A started request completed: tokens, its usage, replace its estimate in
 * its own entry.  0, or -1 if the entry is unknown or has left the window.
 */
int llm_pacer_correct(llm_pacer_t *p, uint64_t ticket, int64_t tokens,
    int64_t now_ms);

/* the first waiter and its plan: 1, or 0 when nobody waits */
int llm_pacer_next(llm_pacer_t *p, int64_t now_ms, uint64_t *ticket,
    int64_t *start_at);

/* the started requests and their tokens in the minute up to now */
void llm_pacer_window(llm_pacer_t *p, int64_t now_ms, int64_t *requests,
    int64_t *tokens);


#endif /* _LLM_PACER_H_INCLUDED_ */
