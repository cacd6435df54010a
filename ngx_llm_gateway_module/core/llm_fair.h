
/*
 * Shared capacity by weight, and backpressure: the fairness core.
 *
 * An upstream pool sustains C tokens a minute.  Fixed quotas waste it
 * (idle tenants' shares lie unused), a free-for-all lets one tenant take
 * it all.  The hybrid: every active tenant has a share of C,
 *
 *     r_i = g_i + w_i / sum(active w) x (C - sum(active g))
 *
 * (g its guaranteed minimum, w its weight), and may burst above it into
 * capacity nobody uses.  Two token buckets, refilled lazily on an
 * injectable clock, all integers (tokens x 1000 as milli-tokens, ms):
 *
 *     the pool       refills at C, holds up to the pool's burst
 *     each share     refills at r_i, holds up to r_i x share_ms
 *
 * A request of cost tokens is admitted
 *
 *     from its share when its share holds the cost: always, congested or
 *     not (no tenant is starved below its share, or its minimum);
 *
 *     beyond its share ("borrowing" idle capacity) when the pool holds the
 *     cost and the reserve of the tenant's priority: lower priorities
 *     stop borrowing first, so that capacity freed goes to higher ones;
 *
 * and both buckets pay; a share may owe (at most its capacity), paid back
 * by its refills.  Otherwise it is refused with the wait until its share
 * holds the cost.  When demand exceeds C the pool is empty and every
 * tenant gets its share; below C the pool lends and each gets what it
 * asks (its tier's own buckets still apply, outside this core).
 *
 * Active: a tenant that asked within active_ms, counted by its demand.
 * Its demand is the tokens it asked (admitted or not), decaying linearly
 * over active_ms: asking d tokens a window keeps it at d, whatever the
 * spacing.  With x_i = demand_i / (r_i x active_ms), what it asks of the
 * share r_i it would have were it counted whole, r_i = g_i + w_i / (w_i +
 * sum(other p w)) x (C - g_i - sum(other p g)), the sums count the part
 *
 *     p_i = min(1, max(x_i, 8 x_i - 1))
 *
 * of its weight and minimum.  A tenant asking a quarter of its share or
 * more counts whole, as before: what it leaves unused goes to the pool,
 * the higher priorities first.  Below an eighth it counts as much as it
 * asks, so that a trickle of tiny requests, or a tenant that asked once,
 * holds next to nothing, and what the pool lends (first come, first
 * served) is little that others hold; steeply between.  Its own share is
 * r_i all the same (what it does not use is idle capacity anyway), and
 * asking more brings its part up to the whole within a quarter of a
 * window.  With every part whole the shares are the formula above;
 * otherwise they add up to the capacity at most.  The part is computed
 * on each of its requests, against the others as they count then.
 *
 * Each request also expires, at most LLM_FAIR_EXPIRE of them, the active
 * tenants least recently seen that have not asked for active_ms: the
 * core keeps them in a list of its own, latest first, and work bounded
 * by request takes every stale tenant out of the sums, however many,
 * without anything walking all of them (a scrape may, llm_fair_expire()).
 *
 * Backpressure: a saturated upstream (its 429 or 503, a failed
 * connection) reduces what is admitted at once, and it recovers gradually:
 *
 *     the capacity      to half of what was admitted in the last second,
 *                       if that is less than the capacity now, or to half
 *                       the capacity now; never below a tenth of C
 *     the ceiling       (requests in flight at once, if configured) to
 *                       half of those in flight, or of the ceiling now;
 *                       never below one
 *
 * once a second at most, and not for a request admitted before the last
 * reduction (it was sent when more was admitted), and both recover by a
 * twentieth of their configured size a second.  A refusal while the
 * capacity is reduced, or by the ceiling, is the cluster's, not the
 * tenant's.
 *
 * Plain C, no nginx types, no allocation: the state is in memory the
 * caller gives (nginx shared memory) and the caller holds the lock.
 */

#ifndef _LLM_FAIR_H_INCLUDED_
#define _LLM_FAIR_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


#define LLM_FAIR_PRIORITIES      4       /* 0 (batch) to 3 (first) */
#define LLM_FAIR_INFLIGHT_MAX    1000000 /* the largest ceiling */
#define LLM_FAIR_WHOLE           1000000 /* a whole part, per million */
#define LLM_FAIR_EXPIRE          16      /* stale tenants out, a request */


typedef struct {
    int64_t      capacity;       /* C, tokens a minute */
    int64_t      burst;          /* the pool's tokens at once; 0: C / 6 */
    int64_t      share_ms;       /* a share holds r_i x this; 0: 10 s */
    int64_t      active_ms;      /* active this long after a request,
                                    the window of its demand; 0: 10 s */
    int64_t      inflight;       /* requests at once; 0: no ceiling */
} llm_fair_conf_t;


typedef struct {
    int64_t      weight;         /* > 0 */
    int64_t      minimum;        /* guaranteed tokens a minute, 0: none */
    int          priority;       /* 0 to LLM_FAIR_PRIORITIES - 1 */
} llm_fair_class_t;


/*
 * A tenant's part, kept by the caller with its other state (zeroed when
 * new); in the list of the active while active, so that memory must not
 * be freed before llm_fair_leave().
 */
typedef struct llm_fair_tenant_s  llm_fair_tenant_t;

struct llm_fair_tenant_s {
    llm_fair_class_t   cls;      /* as it was counted in the sums */
    int64_t            share;    /* ticks, may be negative */
    int64_t            last_ms;  /* its refill */
    int64_t            seen_ms;  /* its last request */
    int64_t            demand;   /* ticks asked, decaying over active_ms */
    llm_fair_tenant_t *newer;    /* the active, latest first */
    llm_fair_tenant_t *older;
    uint32_t           part;     /* of its weight and minimum counted,
                                    per million */
    unsigned           active:1;
};


typedef struct {
    llm_fair_conf_t  conf;
    int64_t      pool;           /* ticks, may be negative */
    int64_t      last_ms;        /* the pool's refill */
    int64_t      weights;        /* sum of the active tenants' weights
                                    x their parts, per million */
    int64_t      minimums;       /* and of their minimums' parts */
    int64_t      active;         /* active tenants */
    llm_fair_tenant_t  *latest;  /* the active, by their last request */
    llm_fair_tenant_t  *oldest;

    /* backpressure: what is admitted now, and what it recovers from */
    int64_t      capacity_now;   /* tokens a minute */
    int64_t      inflight_now;   /* the ceiling, milli-requests */
    int64_t      capacity_base;  /* as reduced at pressed_ms */
    int64_t      inflight_base;
    int64_t      pressed_ms;     /* the last reduction */
    int64_t      flights;        /* requests in flight */
    int64_t      win_ms;         /* admitted tokens this second, and the */
    int64_t      win_tokens;     /* last: what a reduction halves */
    int64_t      last_tokens;
    uint64_t     reductions;     /* backpressure, since the start */
    unsigned     reduced:1;
} llm_fair_t;


typedef enum {
    LLM_FAIR_OK = 0,
    LLM_FAIR_SHARE,              /* refused: its share, *wait_ms */
    LLM_FAIR_CLUSTER             /* refused while the upstream pushes back */
} llm_fair_rc_e;


void llm_fair_init(llm_fair_t *f, const llm_fair_conf_t *cf, int64_t now);

/* a new configuration (a reload): the shares follow; pressure is forgotten */
void llm_fair_reconf(llm_fair_t *f, const llm_fair_conf_t *cf, int64_t now);

/*
 * A request of the tenant now, of cost tokens: active, counted in the
 * sums by its demand; and stale tenants expired, LLM_FAIR_EXPIRE at most.
 */
void llm_fair_touch(llm_fair_t *f, llm_fair_tenant_t *t,
    const llm_fair_class_t *cls, int64_t cost, int64_t now);

/* 1 if the tenant was idle for active_ms and left the sums */
int llm_fair_expire(llm_fair_t *f, llm_fair_tenant_t *t, int64_t now);

/* the tenant leaves the sums now, idle or not: its state is forgotten */
void llm_fair_leave(llm_fair_t *f, llm_fair_tenant_t *t, int64_t now);

/* its share now, tokens a minute: as if its part were whole */
int64_t llm_fair_rate(llm_fair_t *f, llm_fair_tenant_t *t);

llm_fair_rc_e llm_fair_admit(llm_fair_t *f, llm_fair_tenant_t *t,
    int64_t cost, int64_t now, int64_t *wait_ms);

/* the request ended: what it reserved and did not use comes back */
void llm_fair_settle(llm_fair_t *f, llm_fair_tenant_t *t, int64_t reserved,
    int64_t used, int64_t now);

/*
 * A request goes to the upstream: under the ceiling it is in flight
 * until llm_fair_end(); LLM_FAIR_CLUSTER: refused, *wait_ms is when the
 * ceiling, recovering, has room, a second at most (one ending may make
 * room sooner).
 */
llm_fair_rc_e llm_fair_start(llm_fair_t *f, int64_t now, int64_t *wait_ms);
void llm_fair_end(llm_fair_t *f);

/*
 * The upstream said it is saturated to a request admitted at admitted_ms:
 * 1 if what is admitted was reduced now.
 */
int llm_fair_pressure(llm_fair_t *f, int64_t now, int64_t admitted_ms);

/* the capacity now, tokens a minute, backpressure applied */
int64_t llm_fair_capacity(llm_fair_t *f, int64_t now);

/* the ceiling now, requests; 0: none */
int64_t llm_fair_ceiling(llm_fair_t *f, int64_t now);


#endif /* _LLM_FAIR_H_INCLUDED_ */
