
/*
 * The token bucket, in exact integer arithmetic with an injectable clock:
 *
 *     b(t) = min(B, b(t0) + r (t - t0)),  admit if b >= c, then b -= c,
 *     Retry-After = ceil((c - b) / r)
 *
 * The level is kept in units of 1/60000 token, so that a rate given in
 * tokens per minute refills exactly `rate` units per millisecond: no
 * rounding ever accumulates.  Plain C, no nginx types.
 */

#ifndef _LLM_BUCKET_H_INCLUDED_
#define _LLM_BUCKET_H_INCLUDED_


#include <stdint.h>


#define LLM_BUCKET_SCALE          60000

/* rates and capacities above this would overflow the scaled level */
#define LLM_BUCKET_MAX            1000000000000LL


typedef struct {
    int64_t    rate;             /* tokens per minute, > 0 */
    int64_t    burst;            /* capacity in tokens, > 0 */
} llm_bucket_conf_t;


typedef struct {
    /*
     * Scaled level.  It may go below zero when a request used more than it
     * reserved (the prompt estimate was low): the debt is paid back by the
     * refill before anyone else is admitted.
     */
    int64_t    level;
    int64_t    last_ms;          /* time of the last refill */
} llm_bucket_t;


typedef enum {
    LLM_BUCKET_OK = 0,
    LLM_BUCKET_WAIT,             /* short now; *wait_ms says for how long */
    LLM_BUCKET_NEVER             /* cost exceeds the capacity */
} llm_bucket_rc_e;


/* a new bucket is full */
void llm_bucket_init(llm_bucket_t *b, const llm_bucket_conf_t *cf,
    int64_t now_ms);

void llm_bucket_refill(llm_bucket_t *b, const llm_bucket_conf_t *cf,
    int64_t now_ms);

/*
 * Refills, then takes cost tokens if they are there.  On LLM_BUCKET_WAIT,
 * *wait_ms is the exact time, rounded up to a millisecond, after which the
 * same reservation would succeed if nothing else happened.
 */
llm_bucket_rc_e llm_bucket_reserve(llm_bucket_t *b,
    const llm_bucket_conf_t *cf, int64_t cost, int64_t now_ms,
    int64_t *wait_ms);

/*
 * Settles a reservation: the request reserved `reserved` tokens and used
 * `used`.  The difference is given back (capped at the capacity) or, if
 * it used more, taken as debt (floored at minus the capacity).
 */
void llm_bucket_settle(llm_bucket_t *b, const llm_bucket_conf_t *cf,
    int64_t reserved, int64_t used, int64_t now_ms);

/* whole tokens available now (after refill), never below zero */
int64_t llm_bucket_available(const llm_bucket_t *b);

/* milliseconds until the bucket is full again, rounded up */
int64_t llm_bucket_full_in(const llm_bucket_t *b, const llm_bucket_conf_t *cf);

/* ceil(ms / 1000): the Retry-After value in whole seconds */
int64_t llm_bucket_seconds(int64_t ms);


/*
 * A tenant's admission state: requests per minute, tokens per minute and
 * requests in flight, reserved all at once or not at all.
 */

typedef enum {
    LLM_LIMIT_NONE = 0,
    LLM_LIMIT_REQUESTS,
    LLM_LIMIT_TOKENS,
    LLM_LIMIT_CONCURRENCY
} llm_limit_e;


/*
 * A soft quota: when the TPM bucket is short,
 * the tokens may come from a second bucket that refills at burst - tpm a
 * minute, so that a tenant's sustained rate is at most its burst.  The
 * caller sets it only where something else says capacity is idle (a
 * zone's capacity, llm_fair.c), and puts the request to that test.
 */
typedef struct {
    llm_bucket_conf_t  rpm;      /* rate 0: no limit on requests */
    llm_bucket_conf_t  tpm;
    llm_bucket_conf_t  soft;     /* rate 0: none, the tpm is hard */
    int64_t            concurrency;   /* 0: no limit */
} llm_limits_t;


typedef struct {
    llm_bucket_t       rpm;
    llm_bucket_t       tpm;
    llm_bucket_t       soft;
    int64_t            inflight;
} llm_tenant_t;


typedef struct {
    llm_bucket_rc_e    rc;
    llm_limit_e        limit;    /* the limit that refused */
    int64_t            wait_ms;  /* until every limit would admit it */
    int                soft;     /* admitted: the tokens from the soft one */
} llm_admit_t;


/* a new tenant: full buckets, nothing in flight */
void llm_bucket_tenant_init(llm_tenant_t *t, const llm_limits_t *l,
    int64_t now_ms);

/*
 * Admits a request of cost tokens if every limit allows it, taking one
 * request, cost tokens (from the TPM bucket, or when it is short from the
 * soft one: out->soft) and a concurrency slot; else takes nothing.  A
 * concurrency refusal has no exact wait: wait_ms is 1000, "retry shortly".
 */
llm_bucket_rc_e llm_bucket_admit(llm_tenant_t *t, const llm_limits_t *l,
    int64_t cost, int64_t now_ms, llm_admit_t *out);

/* the request ended: its slot back, tokens settled; its request stays used */
void llm_bucket_release(llm_tenant_t *t, const llm_limits_t *l,
    int64_t reserved, int64_t used, int64_t now_ms);

/* the same, the tokens settled with the bucket they came from */
void llm_bucket_release_from(llm_tenant_t *t, const llm_limits_t *l, int soft,
    int64_t reserved, int64_t used, int64_t now_ms);


#endif /* _LLM_BUCKET_H_INCLUDED_ */
