
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

/* per mille of C: the floor of backpressure, and its recovery a second */
#define LLM_FAIR_FACTOR_MIN     100
#define LLM_FAIR_RECOVERY       50


static void llm_fair_update(llm_fair_t *f, int64_t now);
static void llm_fair_refill(llm_fair_t *f, llm_fair_tenant_t *t, int64_t now);
static int64_t llm_fair_cap(llm_fair_t *f, llm_fair_tenant_t *t);
static int64_t llm_fair_clamp(int64_t v, int64_t max);
static void llm_fair_count(llm_fair_t *f, const llm_fair_class_t *cls,
    int64_t sign);


void
llm_fair_init(llm_fair_t *f, const llm_fair_conf_t *cf, int64_t now)
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

    f->pool = f->conf.burst * LLM_FAIR_TICKS;
    f->last_ms = now;
    f->factor = 1000;
    f->factor_ms = now;
    f->weights = 0;
    f->minimums = 0;
    f->active = 0;
}


void
llm_fair_touch(llm_fair_t *f, llm_fair_tenant_t *t,
    const llm_fair_class_t *cls, int64_t now)
{
    llm_fair_class_t  c;

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

    if (t->active) {
        /* its tier may have changed: the sums follow */
        llm_fair_refill(f, t, now);
        llm_fair_count(f, &t->cls, -1);
        t->cls = c;
        llm_fair_count(f, &t->cls, 1);

    } else {
        /* a tenant coming back starts with its share whole */
        t->cls = c;
        t->active = 1;
        llm_fair_count(f, &t->cls, 1);

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
    if (!t->active || t->seen_ms + f->conf.active_ms > now) {
        return 0;
    }

    llm_fair_update(f, now);
    llm_fair_count(f, &t->cls, -1);
    t->active = 0;

    return 1;
}


int64_t
llm_fair_rate(llm_fair_t *f, llm_fair_tenant_t *t)
{
    int64_t  c, g;

    if (!t->active || f->weights <= 0) {
        return 0;
    }

    c = f->conf.capacity * f->factor / 1000;
    g = f->minimums;

    if (g >= c) {
        /* the minimums alone are more than there is: each in proportion */
        return g ? (int64_t) ((__int128) t->cls.minimum * c / g) : 0;
    }

    return t->cls.minimum + t->cls.weight * (c - g) / f->weights;
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

        return LLM_FAIR_OK;
    }

    /* idle capacity: the lower the priority, the more is left to others */
    reserve = f->conf.burst * LLM_FAIR_TICKS
              / (2 * LLM_FAIR_PRIORITIES)
              * (LLM_FAIR_PRIORITIES - 1 - t->cls.priority);

    if (f->pool >= cost + reserve) {
        f->pool -= cost;
        t->share -= cost;

        /* what it borrowed is owed up to one share, no more */
        if (t->share < -cap) {
            t->share = -cap;
        }

        return LLM_FAIR_OK;
    }

    r = llm_fair_rate(f, t);

    *wait_ms = r > 0 ? (need - t->share + r - 1) / r : 1000;

    if (*wait_ms < 1) {
        *wait_ms = 1;
    }

    return f->factor < 1000 ? LLM_FAIR_CLUSTER : LLM_FAIR_SHARE;
}


void
llm_fair_settle(llm_fair_t *f, llm_fair_tenant_t *t, int64_t reserved,
    int64_t used, int64_t now)
{
    int64_t  back, cap;

    llm_fair_update(f, now);
    llm_fair_refill(f, t, now);

    back = (llm_fair_clamp(reserved, LLM_FAIR_RATE_MAX)
            - llm_fair_clamp(used, LLM_FAIR_RATE_MAX))
           * LLM_FAIR_TICKS;

    f->pool += back;

    if (f->pool > f->conf.burst * LLM_FAIR_TICKS) {
        f->pool = f->conf.burst * LLM_FAIR_TICKS;
    }

    if (!t->active) {
        return;
    }

    cap = llm_fair_cap(f, t);

    t->share += back;

    if (t->share > cap) {
        t->share = cap;
    }
}


void
llm_fair_pressure(llm_fair_t *f, int64_t now)
{
    llm_fair_update(f, now);

    f->factor /= 2;

    if (f->factor < LLM_FAIR_FACTOR_MIN) {
        f->factor = LLM_FAIR_FACTOR_MIN;
    }

    f->factor_ms = now;

    /* what the pool holds above the new burst is not there any more */
    if (f->pool > f->conf.burst * f->factor / 1000 * LLM_FAIR_TICKS) {
        f->pool = f->conf.burst * f->factor / 1000 * LLM_FAIR_TICKS;
    }
}


int64_t
llm_fair_capacity(llm_fair_t *f, int64_t now)
{
    llm_fair_update(f, now);

    return f->conf.capacity * f->factor / 1000;
}


/* the pool refilled at the capacity now; backpressure recovering */

static void
llm_fair_update(llm_fair_t *f, int64_t now)
{
    int64_t  dt, inc;

    if (f->factor < 1000 && now > f->factor_ms) {
        inc = (now - f->factor_ms) * LLM_FAIR_RECOVERY / 1000;

        if (inc > 0) {
            f->factor_ms += inc * 1000 / LLM_FAIR_RECOVERY;
            f->factor += inc;

            if (f->factor >= 1000) {
                f->factor = 1000;
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

    f->pool += f->conf.capacity * f->factor / 1000 * dt;

    if (f->pool > f->conf.burst * LLM_FAIR_TICKS) {
        f->pool = f->conf.burst * LLM_FAIR_TICKS;
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
llm_fair_count(llm_fair_t *f, const llm_fair_class_t *cls, int64_t sign)
{
    f->weights += sign * cls->weight;
    f->minimums += sign * cls->minimum;
    f->active += sign;
}
