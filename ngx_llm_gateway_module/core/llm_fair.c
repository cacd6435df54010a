
/*
 * Shared capacity by weight: see llm_fair.h.
 *
 * Buckets count in ticks, 1/60,000 of a token: a rate of r tokens a
 * minute is then r ticks a millisecond, and every refill is exact.
 */


#include "llm_fair.h"


#define LLM_FAIR_TICKS          60000

/* bounds that keep every product in int64_t */
#define LLM_FAIR_RATE_MAX       1000000000000LL     /* tokens a minute */
#define LLM_FAIR_WEIGHT_MAX     1000000
#define LLM_FAIR_DT_MAX         3600000             /* ms refilled at once */

/*
 * A tenant asking a quarter of its share counts whole, as it always did:
 * what it leaves goes to the pool, the higher priorities first.  Below,
 * what it asks, so that the pool lends little that others hold.
 */
#define LLM_FAIR_SLACK          4

/*
 * Backpressure: the floor of the capacity (per mille of C), the recovery
 * (per mille of C and of the ceiling, a second; all of it in RECOVER_MS),
 * and the least time between two reductions.
 */
#define LLM_FAIR_FLOOR          100
#define LLM_FAIR_RECOVERY       50
#define LLM_FAIR_RECOVER_MS     (1000000 / LLM_FAIR_RECOVERY)
#define LLM_FAIR_HOLD_MS        1000


static void llm_fair_update(llm_fair_t *f, int64_t now);
static void llm_fair_refill(llm_fair_t *f, llm_fair_tenant_t *t, int64_t now);
static int64_t llm_fair_cap(llm_fair_t *f, llm_fair_tenant_t *t);
static int64_t llm_fair_clamp(int64_t v, int64_t max);
static void llm_fair_count(llm_fair_t *f, llm_fair_tenant_t *t,
    int64_t sign);
static int64_t llm_fair_share_of(llm_fair_t *f, const llm_fair_class_t *cls,
    int64_t weights, int64_t minimums);
static void llm_fair_demand(llm_fair_t *f, llm_fair_tenant_t *t,
    int64_t cost, int64_t now);
static uint32_t llm_fair_part(llm_fair_t *f, llm_fair_tenant_t *t);
static void llm_fair_link(llm_fair_t *f, llm_fair_tenant_t *t);
static void llm_fair_unlink(llm_fair_t *f, llm_fair_tenant_t *t);
static void llm_fair_configure(llm_fair_t *f, const llm_fair_conf_t *cf);
static void llm_fair_window(llm_fair_t *f, int64_t now, int64_t tokens);
static int64_t llm_fair_burst(llm_fair_t *f);


void
llm_fair_init(llm_fair_t *f, const llm_fair_conf_t *cf, int64_t now)
{
    llm_fair_configure(f, cf);

    f->pool = f->conf.burst * LLM_FAIR_TICKS;
    f->last_ms = now;
    f->weights = 0;
    f->minimums = 0;
    f->active = 0;
    f->latest = NULL;
    f->oldest = NULL;
    f->flights = 0;
    f->reductions = 0;

    f->capacity_now = f->conf.capacity;
    f->inflight_now = f->conf.inflight * 1000;
    f->reduced = 0;
    f->pressed_ms = now - LLM_FAIR_HOLD_MS;

    f->win_ms = now;
    f->win_tokens = 0;
    f->last_tokens = 0;
}


void
llm_fair_reconf(llm_fair_t *f, const llm_fair_conf_t *cf, int64_t now)
{
    llm_fair_update(f, now);
    llm_fair_configure(f, cf);

    /* the operator says what the upstream sustains: it is believed */
    f->capacity_now = f->conf.capacity;
    f->inflight_now = f->conf.inflight * 1000;
    f->reduced = 0;

    /* what it owes too: a burst at most, as llm_fair_admit() keeps it */
    if (f->pool > f->conf.burst * LLM_FAIR_TICKS) {
        f->pool = f->conf.burst * LLM_FAIR_TICKS;

    } else if (f->pool < -f->conf.burst * LLM_FAIR_TICKS) {
        f->pool = -f->conf.burst * LLM_FAIR_TICKS;
    }
}


static void
llm_fair_configure(llm_fair_t *f, const llm_fair_conf_t *cf)
{
    f->conf = *cf;
    f->conf.capacity = llm_fair_clamp(cf->capacity, LLM_FAIR_RATE_MAX);

    if (f->conf.burst <= 0) {
        f->conf.burst = f->conf.capacity / 6;
    }

    f->conf.burst = llm_fair_clamp(f->conf.burst, LLM_FAIR_RATE_MAX);

    if (f->conf.share_ms <= 0) {
        f->conf.share_ms = 10000;
    }

    f->conf.share_ms = llm_fair_clamp(f->conf.share_ms, 60000);

    if (f->conf.active_ms <= 0) {
        f->conf.active_ms = 10000;
    }

    f->conf.inflight = llm_fair_clamp(cf->inflight, LLM_FAIR_INFLIGHT_MAX);
}


void
llm_fair_touch(llm_fair_t *f, llm_fair_tenant_t *t,
    const llm_fair_class_t *cls, int64_t cost, int64_t now)
{
    unsigned            n, was;
    llm_fair_tenant_t  *o;
    llm_fair_class_t    c;

    c = *cls;
    c.weight = c.weight < 1 ? 1 : llm_fair_clamp(c.weight,
                                                 LLM_FAIR_WEIGHT_MAX);
    c.minimum = llm_fair_clamp(c.minimum, LLM_FAIR_RATE_MAX);

    if (c.priority < 0) {
        c.priority = 0;

    } else if (c.priority >= LLM_FAIR_PRIORITIES) {
        c.priority = LLM_FAIR_PRIORITIES - 1;
    }

    llm_fair_update(f, now);

    was = t->active;

    if (was) {
        /* out of the sums while its part and its tier are new */
        llm_fair_refill(f, t, now);
        llm_fair_count(f, t, -1);
        llm_fair_unlink(f, t);
        t->active = 0;
    }

    /* the least recently seen: stale ones out, a few at a time */
    for (n = 0; n < LLM_FAIR_EXPIRE && f->oldest != NULL; n++) {
        o = f->oldest;

        if (now - o->seen_ms < f->conf.active_ms) {
            break;
        }

        llm_fair_count(f, o, -1);
        llm_fair_unlink(f, o);
        o->active = 0;
    }

    llm_fair_demand(f, t, cost, now);

    t->cls = c;
    t->part = llm_fair_part(f, t);
    t->active = 1;
    llm_fair_count(f, t, 1);
    llm_fair_link(f, t);

    if (!was) {
        /* a tenant coming back starts with its share whole */
        t->last_ms = now;
        t->share = llm_fair_cap(f, t);
    }

    if (now > t->seen_ms) {
        t->seen_ms = now;
    }
}


int
llm_fair_expire(llm_fair_t *f, llm_fair_tenant_t *t, int64_t now)
{
    /* a difference: active_ms is as large as it was given */
    if (!t->active || now - t->seen_ms < f->conf.active_ms) {
        return 0;
    }

    llm_fair_leave(f, t, now);

    return 1;
}


void
llm_fair_leave(llm_fair_t *f, llm_fair_tenant_t *t, int64_t now)
{
    if (!t->active) {
        return;
    }

    llm_fair_update(f, now);
    llm_fair_count(f, t, -1);
    llm_fair_unlink(f, t);
    t->active = 0;
}


int64_t
llm_fair_rate(llm_fair_t *f, llm_fair_tenant_t *t)
{
    int64_t  w, g;

    if (!t->active) {
        return 0;
    }

    /* the others as they count */
    w = f->weights - t->cls.weight * (int64_t) t->part;
    g = f->minimums
        - (int64_t) ((__int128) t->cls.minimum * t->part / LLM_FAIR_WHOLE);

    return llm_fair_share_of(f, &t->cls, w, g);
}


/* a share of its class, whole, beside others of these sums */

static int64_t
llm_fair_share_of(llm_fair_t *f, const llm_fair_class_t *cls,
    int64_t weights, int64_t minimums)
{
    int64_t  c, g, w;

    c = f->capacity_now;
    g = minimums + cls->minimum;
    w = weights + cls->weight * LLM_FAIR_WHOLE;

    if (g >= c) {
        /* the minimums alone are more than there is: each in proportion */
        return g ? (int64_t) ((__int128) cls->minimum * c / g) : 0;
    }

    return cls->minimum
           + (int64_t) ((__int128) cls->weight * LLM_FAIR_WHOLE * (c - g)
                        / w);
}


llm_fair_rc_e
llm_fair_admit(llm_fair_t *f, llm_fair_tenant_t *t, int64_t cost,
    int64_t now, int64_t *wait_ms)
{
    int64_t  need, cap, reserve, r;

    llm_fair_update(f, now);
    llm_fair_refill(f, t, now);

    *wait_ms = 0;

    cost = llm_fair_clamp(cost, LLM_FAIR_RATE_MAX) * LLM_FAIR_TICKS;
    cap = llm_fair_cap(f, t);

    /* a request larger than a whole share waits for a whole share */
    need = cost < cap ? cost : cap;

    if (cap > 0 && t->share >= need) {
        t->share -= cost;
        f->pool -= cost;

        if (f->pool < -f->conf.burst * LLM_FAIR_TICKS) {
            f->pool = -f->conf.burst * LLM_FAIR_TICKS;
        }

        llm_fair_window(f, now, cost / LLM_FAIR_TICKS);

        return LLM_FAIR_OK;
    }

    /* idle capacity: the lower the priority, the more is left to others */
    reserve = llm_fair_burst(f) / (2 * LLM_FAIR_PRIORITIES)
              * (LLM_FAIR_PRIORITIES - 1 - t->cls.priority);

    if (f->pool >= cost + reserve) {
        f->pool -= cost;
        t->share -= cost;

        /* what it borrowed is owed up to one share, no more */
        if (t->share < -cap) {
            t->share = -cap;
        }

        llm_fair_window(f, now, cost / LLM_FAIR_TICKS);

        return LLM_FAIR_OK;
    }

    r = llm_fair_rate(f, t);

    *wait_ms = r > 0 ? (need - t->share + r - 1) / r : 1000;

    if (*wait_ms < 1) {
        *wait_ms = 1;
    }

    return f->capacity_now < f->conf.capacity ? LLM_FAIR_CLUSTER
                                              : LLM_FAIR_SHARE;
}


void
llm_fair_settle(llm_fair_t *f, llm_fair_tenant_t *t, int64_t reserved,
    int64_t used, int64_t now)
{
    int64_t  back, cap, owed;

    llm_fair_update(f, now);
    llm_fair_refill(f, t, now);

    back = (llm_fair_clamp(reserved, LLM_FAIR_RATE_MAX)
            - llm_fair_clamp(used, LLM_FAIR_RATE_MAX))
           * LLM_FAIR_TICKS;

    f->pool += back;

    if (f->pool > llm_fair_burst(f)) {
        f->pool = llm_fair_burst(f);
    }

    /*
     * More used than reserved is owed as if borrowed: the pool a burst,
     * the share a share at most (or what a request larger than a share
     * left it owing), else an upstream's usage would sink both, without
     * end and past int64_t.
     */
    if (f->pool < -f->conf.burst * LLM_FAIR_TICKS) {
        f->pool = -f->conf.burst * LLM_FAIR_TICKS;
    }

    if (!t->active) {
        return;
    }

    cap = llm_fair_cap(f, t);
    owed = t->share < -cap ? t->share : -cap;

    t->share += back;

    if (t->share > cap) {
        t->share = cap;

    } else if (t->share < owed) {
        t->share = owed;
    }
}


llm_fair_rc_e
llm_fair_start(llm_fair_t *f, int64_t now, int64_t *wait_ms)
{
    int64_t  need, per_s;

    llm_fair_update(f, now);

    *wait_ms = 0;

    if (f->conf.inflight == 0 || f->flights < llm_fair_ceiling(f, now)) {
        f->flights++;
        return LLM_FAIR_OK;
    }

    *wait_ms = 1000;

    if (f->inflight_now < f->conf.inflight * 1000) {
        /* the ceiling recovers by inflight x 50 milli-requests a second */
        need = (f->flights + 1) * 1000 - f->inflight_now;
        per_s = f->conf.inflight * LLM_FAIR_RECOVERY;

        if ((need * 1000 + per_s - 1) / per_s < *wait_ms) {
            *wait_ms = (need * 1000 + per_s - 1) / per_s;
        }
    }

    return LLM_FAIR_CLUSTER;
}


void
llm_fair_end(llm_fair_t *f)
{
    if (f->flights > 0) {
        f->flights--;
    }
}


int
llm_fair_pressure(llm_fair_t *f, int64_t now, int64_t admitted_ms)
{
    int64_t  c, n, floor;

    llm_fair_update(f, now);

    /*
     * Once a second at most; and a request sent before the last reduction
     * tells of the load before it (a slow one's 504 may come a minute on)
     */
    if (now - f->pressed_ms < LLM_FAIR_HOLD_MS
        || admitted_ms < f->pressed_ms)
    {
        return 0;
    }

    /* what was admitted in the last second (or this one), a minute of it */
    llm_fair_window(f, now, 0);

    c = (f->last_tokens > f->win_tokens ? f->last_tokens : f->win_tokens)
        * 60;

    if (c > f->capacity_now) {
        c = f->capacity_now;
    }

    c /= 2;
    floor = f->conf.capacity * LLM_FAIR_FLOOR / 1000;

    f->capacity_base = c > floor ? c : floor;
    f->capacity_now = f->capacity_base;

    n = f->flights * 1000;

    if (n > f->inflight_now) {
        n = f->inflight_now;
    }

    n /= 2;

    f->inflight_base = n > 1000 ? n : 1000;

    if (f->inflight_base > f->conf.inflight * 1000) {
        f->inflight_base = f->conf.inflight * 1000;
    }

    f->inflight_now = f->inflight_base;

    f->pressed_ms = now;
    f->reduced = 1;
    f->reductions++;

    /* what the pool holds above the smaller burst is not there any more */
    if (f->pool > llm_fair_burst(f)) {
        f->pool = llm_fair_burst(f);
    }

    return 1;
}


int64_t
llm_fair_capacity(llm_fair_t *f, int64_t now)
{
    llm_fair_update(f, now);

    return f->capacity_now;
}


int64_t
llm_fair_ceiling(llm_fair_t *f, int64_t now)
{
    llm_fair_update(f, now);

    if (f->conf.inflight == 0) {
        return 0;
    }

    return f->inflight_now >= 1000 ? f->inflight_now / 1000 : 1;
}


/* the pool refilled at the capacity now; backpressure recovering */

static void
llm_fair_update(llm_fair_t *f, int64_t now)
{
    int64_t  dt;

    if (f->reduced) {
        dt = now - f->pressed_ms;

        /* linear from the reduction: all of it back in RECOVER_MS */
        if (dt >= LLM_FAIR_RECOVER_MS) {
            f->capacity_now = f->conf.capacity;
            f->inflight_now = f->conf.inflight * 1000;
            f->reduced = 0;

        } else if (dt > 0) {
            f->capacity_now = f->capacity_base
                              + f->conf.capacity * dt / LLM_FAIR_RECOVER_MS;
            f->inflight_now = f->inflight_base
                              + f->conf.inflight * 1000 * dt
                                / LLM_FAIR_RECOVER_MS;

            if (f->capacity_now > f->conf.capacity) {
                f->capacity_now = f->conf.capacity;
            }

            if (f->inflight_now > f->conf.inflight * 1000) {
                f->inflight_now = f->conf.inflight * 1000;
            }
        }
    }

    if (now <= f->last_ms) {
        return;
    }

    dt = now - f->last_ms;
    f->last_ms = now;

    if (dt > LLM_FAIR_DT_MAX) {
        dt = LLM_FAIR_DT_MAX;
    }

    f->pool += f->capacity_now * dt;

    if (f->pool > llm_fair_burst(f)) {
        f->pool = llm_fair_burst(f);
    }
}


/* the pool's burst, in ticks, as much smaller as the capacity now is */

static int64_t
llm_fair_burst(llm_fair_t *f)
{
    if (f->capacity_now >= f->conf.capacity || f->conf.capacity == 0) {
        return f->conf.burst * LLM_FAIR_TICKS;
    }

    return (int64_t) ((__int128) f->conf.burst * f->capacity_now
                      / f->conf.capacity) * LLM_FAIR_TICKS;
}


/* tokens admitted in this second and in the last */

static void
llm_fair_window(llm_fair_t *f, int64_t now, int64_t tokens)
{
    if (now - f->win_ms >= 1000) {
        f->last_tokens = (now - f->win_ms < 2000) ? f->win_tokens : 0;
        f->win_ms = now;
        f->win_tokens = 0;
    }

    f->win_tokens += tokens;

    if (f->win_tokens > LLM_FAIR_RATE_MAX) {
        f->win_tokens = LLM_FAIR_RATE_MAX;
    }
}


/* the tenant's share refilled at its rate now */

static void
llm_fair_refill(llm_fair_t *f, llm_fair_tenant_t *t, int64_t now)
{
    int64_t  dt, cap;

    if (!t->active || now <= t->last_ms) {
        return;
    }

    dt = now - t->last_ms;
    t->last_ms = now;

    if (dt > LLM_FAIR_DT_MAX) {
        dt = LLM_FAIR_DT_MAX;
    }

    cap = llm_fair_cap(f, t);

    t->share += llm_fair_rate(f, t) * dt;

    if (t->share > cap) {
        t->share = cap;
    }
}


/* a share holds share_ms of its rate, in ticks */

static int64_t
llm_fair_cap(llm_fair_t *f, llm_fair_tenant_t *t)
{
    return llm_fair_rate(f, t) * f->conf.share_ms;
}


static int64_t
llm_fair_clamp(int64_t v, int64_t max)
{
    return v < 0 ? 0 : (v > max ? max : v);
}


static void
llm_fair_count(llm_fair_t *f, llm_fair_tenant_t *t, int64_t sign)
{
    f->weights += sign * t->cls.weight * (int64_t) t->part;
    f->minimums += sign * (int64_t) ((__int128) t->cls.minimum * t->part
                                     / LLM_FAIR_WHOLE);
    f->active += sign;
}


/*
 * Its demand: what it asked decays linearly over active_ms, all of it
 * after that long; d tokens asked a window, at any spacing, keep it at d
 * (d = d (1 - dt / window) + d dt / window).
 */

static void
llm_fair_demand(llm_fair_t *f, llm_fair_tenant_t *t, int64_t cost,
    int64_t now)
{
    int64_t  dt;

    dt = now - t->seen_ms;

    if (dt >= f->conf.active_ms || t->demand < 0) {
        t->demand = 0;

    } else if (dt > 0) {
        t->demand -= (int64_t) ((__int128) t->demand * dt
                                / f->conf.active_ms);
    }

    t->demand += llm_fair_clamp(cost, LLM_FAIR_RATE_MAX) * LLM_FAIR_TICKS;

    /* a window of the largest capacity at most: a whole part is all */
    if (t->demand > LLM_FAIR_RATE_MAX * LLM_FAIR_TICKS) {
        t->demand = LLM_FAIR_RATE_MAX * LLM_FAIR_TICKS;
    }
}


/*
 * Its part, out of the sums: x, its demand against a window of the share
 * it would have counted whole, up to an eighth; whole from a quarter,
 * 8x - 1 between.
 */

static uint32_t
llm_fair_part(llm_fair_t *f, llm_fair_tenant_t *t)
{
    int64_t   x;
    __int128  window;

    window = (__int128) llm_fair_share_of(f, &t->cls, f->weights,
                                          f->minimums)
             * f->conf.active_ms;

    if (window <= 0 || (__int128) t->demand * LLM_FAIR_SLACK >= window) {
        return LLM_FAIR_WHOLE;
    }

    x = (int64_t) ((__int128) t->demand * LLM_FAIR_WHOLE / window);

    return (uint32_t) (x * 8 - LLM_FAIR_WHOLE > x ? x * 8 - LLM_FAIR_WHOLE
                                                  : x);
}


/* the list of the active, latest first */

static void
llm_fair_link(llm_fair_t *f, llm_fair_tenant_t *t)
{
    t->older = f->latest;
    t->newer = NULL;

    if (f->latest != NULL) {
        f->latest->newer = t;

    } else {
        f->oldest = t;
    }

    f->latest = t;
}


static void
llm_fair_unlink(llm_fair_t *f, llm_fair_tenant_t *t)
{
    if (t->newer != NULL) {
        t->newer->older = t->older;

    } else {
        f->latest = t->older;
    }

    if (t->older != NULL) {
        t->older->newer = t->newer;

    } else {
        f->oldest = t->newer;
    }

    t->newer = NULL;
    t->older = NULL;
}
