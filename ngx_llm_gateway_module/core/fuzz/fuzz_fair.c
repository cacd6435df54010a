
/*
 * libFuzzer target for the fairness core.  The input is read a byte at a
 * time, 0 once it ends; a value is three bytes (see fuzz_value: small,
 * thousands, millions, either side of 10^12, negative, near INT64_MAX or
 * INT64_MIN, multiples of 10^12).  First a configuration and four
 * classes:
 *
 *     0       bits 0-1: the clock's start, 1718020800000, 0, 1000 or
 *             2^40 ms
 *     1-15    capacity, burst, share_ms, active_ms, inflight (values)
 *     16-43   four classes: weight, minimum (values), priority (a signed
 *             byte)
 *
 * then a program for four tenants.  An op is its byte (bits 0-3 the op,
 * bits 4-5 the tenant, bits 6-7 its x), a clock step (see fuzz_step:
 * none, milliseconds to hours, or back by up to a second: the cached
 * clocks of the workers sharing a zone differ a little) and its own bytes:
 *
 *     0, 12   touch      in class x, a cost
 *     1       expire
 *     2, 11   admit      a cost
 *     3       settle     reserved and used; x: used as read, as reserved,
 *                        reserved less it, reserved and it
 *     4       start
 *     5       end
 *     6       pressure   for a request admitted: x 0, now; 1, at the last
 *                        reduction; 2, just before it; 3, a byte x 64 ms
 *                        ago
 *     7       reconf     a configuration, as at 1-15
 *     8       rate
 *     9       capacity
 *     10      ceiling
 *     13      request    as the module asks: touch in class x with a
 *                        cost, start, admit it, end if refused
 *     14      done       settle as 3, then end
 *     15      sweep      every tenant's expire
 *
 * The fuzzer keeps its own books: the configuration and the classes as
 * the core normalizes them, which tenants are active, when each was last
 * seen and in which order, its demand and the part of it counted, the
 * requests in flight, the reductions.  A touch expires, oldest first and
 * LLM_FAIR_EXPIRE at most, the other tenants idle for active_ms.  After
 * every op the sums, the list of the active, flights and counters must be
 * the books', the rates and parts what the header's formulas give, the
 * shares counted no more than the capacity, and every bucket, capacity
 * and ceiling within its bounds; each op's answer is checked against what
 * its state allows
 * (a refused admit with a share that holds the cost is a failure, and so
 * is a wait after which it still would not, or a longer one).  What a
 * call will find is asked of a copy of the state: the queries update it.
 *
 * FUZZ_FAIR_TRACE=1 in the environment prints each call and its result.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm_fair.h"


#define FUZZ_OPS        4096
#define FUZZ_TENANTS    4
#define FUZZ_CLASSES    4

#define FUZZ_NOW        1718020800000LL

/* as llm_fair.c: a tick is 1/60,000 of a token; its bounds */
#define FUZZ_TICKS      60000
#define FUZZ_RATE_MAX   1000000000000LL
#define FUZZ_WEIGHT_MAX 1000000
#define FUZZ_INFLIGHT_MAX  1000000
#define FUZZ_FLOOR      100             /* per mille of the capacity */
#define FUZZ_HOLD_MS    1000
#define FUZZ_SLACK      4               /* a quarter of a share: whole */


typedef enum {
    FUZZ_TOUCH = 0,
    FUZZ_EXPIRE,
    FUZZ_ADMIT,
    FUZZ_SETTLE,
    FUZZ_START,
    FUZZ_END,
    FUZZ_PRESSURE,
    FUZZ_RECONF,
    FUZZ_RATE,
    FUZZ_CAPACITY,
    FUZZ_CEILING,
    FUZZ_REQUEST,
    FUZZ_DONE,
    FUZZ_SWEEP
} fuzz_op_e;


typedef struct {
    llm_fair_class_t    cls;          /* as counted */
    int64_t             seen_ms;
    int64_t             demand;       /* ticks */
    uint64_t            order;        /* its last touch, of all */
    uint32_t            part;
    unsigned            active:1;
} fuzz_tenant_t;


typedef struct {
    llm_fair_t         *f;
    llm_fair_tenant_t  *t[FUZZ_TENANTS];

    llm_fair_conf_t     conf;         /* as the core normalizes it */
    llm_fair_class_t    cls[FUZZ_CLASSES];      /* as given */
    fuzz_tenant_t       s[FUZZ_TENANTS];

    int64_t             now;
    int64_t             latest;       /* the pool's refill: the latest
                                         clock of a call that updates */
    int64_t             flights;
    uint64_t            reductions;
    uint64_t            touches;

    const uint8_t      *in;
    const uint8_t      *end;
} fuzz_t;


static void fuzz_touch(fuzz_t *z, unsigned i, unsigned k, int64_t cost);
static uint32_t fuzz_want_part(fuzz_t *z, unsigned i);
static int64_t fuzz_share_of(fuzz_t *z, const llm_fair_class_t *cls,
    int64_t weights, int64_t minimums);
static void fuzz_list(fuzz_t *z);
static int fuzz_expire(fuzz_t *z, unsigned i);
static llm_fair_rc_e fuzz_admit(fuzz_t *z, unsigned i, int64_t cost);
static void fuzz_settle(fuzz_t *z, unsigned i, int64_t reserved,
    int64_t used);
static llm_fair_rc_e fuzz_start(fuzz_t *z);
static void fuzz_end(fuzz_t *z);
static void fuzz_pressure(fuzz_t *z, unsigned x);
static void fuzz_reconf(fuzz_t *z, const llm_fair_conf_t *cf);
static void fuzz_rate(fuzz_t *z, unsigned i);
static void fuzz_capacity(fuzz_t *z);
static void fuzz_ceiling(fuzz_t *z);
static void fuzz_check(fuzz_t *z);
static int64_t fuzz_want_rate(fuzz_t *z, unsigned i);
static int fuzz_same(const llm_fair_t *a, const llm_fair_t *b);
static void fuzz_read_conf(fuzz_t *z, llm_fair_conf_t *cf);
static void fuzz_norm_conf(llm_fair_conf_t *e, const llm_fair_conf_t *cf);
static void fuzz_norm_class(llm_fair_class_t *e, const llm_fair_class_t *c);
static void fuzz_used(fuzz_t *z, unsigned x, int64_t *reserved,
    int64_t *used);
static int64_t fuzz_step(unsigned b);
static int64_t fuzz_value(fuzz_t *z);
static int64_t fuzz_clamp(int64_t v, int64_t max);
static void fuzz_latest(fuzz_t *z);
static unsigned fuzz_take(fuzz_t *z);
static void fuzz_trace(fuzz_t *z, const char *op, int tenant, int64_t a,
    int64_t b, int64_t rc);
static void fuzz_fail(fuzz_t *z, const char *how, const char *what);


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


static fuzz_t  fuzz_z;
static int     fuzz_tracing = -1;

static const uint8_t  fuzz_ops[16] = {
    FUZZ_TOUCH, FUZZ_EXPIRE, FUZZ_ADMIT, FUZZ_SETTLE, FUZZ_START, FUZZ_END,
    FUZZ_PRESSURE, FUZZ_RECONF, FUZZ_RATE, FUZZ_CAPACITY, FUZZ_CEILING,
    FUZZ_ADMIT, FUZZ_TOUCH, FUZZ_REQUEST, FUZZ_DONE, FUZZ_SWEEP
};


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int64_t           cost, reserved, used;
    unsigned          b, i, k, x, op;
    uint32_t          ops;
    fuzz_t           *z;
    llm_fair_conf_t   cf;

    static const int64_t  starts[] = {
        FUZZ_NOW, 0, 1000, 1LL << 40
    };

    if (size == 0) {
        return 0;
    }

    if (fuzz_tracing < 0) {
        fuzz_tracing = getenv("FUZZ_FAIR_TRACE") != NULL;
    }

    z = &fuzz_z;
    memset(z, 0, sizeof(fuzz_t));

    z->in = data;
    z->end = data + size;

    z->now = starts[fuzz_take(z) & 0x03];
    z->latest = z->now;

    fuzz_read_conf(z, &cf);
    fuzz_norm_conf(&z->conf, &cf);

    for (k = 0; k < FUZZ_CLASSES; k++) {
        z->cls[k].weight = fuzz_value(z);
        z->cls[k].minimum = fuzz_value(z);
        z->cls[k].priority = (int8_t) fuzz_take(z);
    }

    /*
     * Each in memory of its own size, so that ASan sees a field past it;
     * the zone's state is not zeroed (init must set what it reads), a
     * tenant's is (the module zeroes a new node).
     */
    z->f = malloc(sizeof(llm_fair_t));

    if (z->f == NULL) {
        fuzz_fail(z, "malloc", "no memory");
    }

    memset(z->f, 0xa5, sizeof(llm_fair_t));

    for (i = 0; i < FUZZ_TENANTS; i++) {
        z->t[i] = calloc(1, sizeof(llm_fair_tenant_t));

        if (z->t[i] == NULL) {
            fuzz_fail(z, "calloc", "no memory");
        }
    }

    llm_fair_init(z->f, &cf, z->now);

    fuzz_trace(z, "init", -1, cf.capacity, cf.inflight, 0);

    if (z->f->capacity_now != z->conf.capacity || z->f->reduced
        || z->f->pool != z->conf.burst * FUZZ_TICKS)
    {
        fuzz_fail(z, "init", "not at its whole capacity");
    }

    fuzz_check(z);

    for (ops = 0; z->in < z->end && ops < FUZZ_OPS; ops++) {
        b = fuzz_take(z);
        op = fuzz_ops[b & 0x0f];
        i = (b >> 4) & 0x03;
        x = b >> 6;

        z->now += fuzz_step(fuzz_take(z));

        switch (op) {

        case FUZZ_TOUCH:
            fuzz_touch(z, i, x, fuzz_value(z));
            break;

        case FUZZ_EXPIRE:
            (void) fuzz_expire(z, i);
            break;

        case FUZZ_ADMIT:
            (void) fuzz_admit(z, i, fuzz_value(z));
            break;

        case FUZZ_SETTLE:
            fuzz_used(z, x, &reserved, &used);
            fuzz_settle(z, i, reserved, used);
            break;

        case FUZZ_START:
            (void) fuzz_start(z);
            break;

        case FUZZ_END:
            fuzz_end(z);
            break;

        case FUZZ_PRESSURE:
            fuzz_pressure(z, x);
            break;

        case FUZZ_RECONF:
            fuzz_read_conf(z, &cf);
            fuzz_reconf(z, &cf);
            break;

        case FUZZ_RATE:
            fuzz_rate(z, i);
            break;

        case FUZZ_CAPACITY:
            fuzz_capacity(z);
            break;

        case FUZZ_CEILING:
            fuzz_ceiling(z);
            break;

        case FUZZ_REQUEST:
            cost = fuzz_value(z);
            fuzz_touch(z, i, x, cost);

            if (fuzz_start(z) == LLM_FAIR_OK
                && fuzz_admit(z, i, cost) != LLM_FAIR_OK)
            {
                fuzz_end(z);
            }

            break;

        case FUZZ_DONE:
            fuzz_used(z, x, &reserved, &used);
            fuzz_settle(z, i, reserved, used);
            fuzz_end(z);
            break;

        default: /* FUZZ_SWEEP */
            for (k = 0; k < FUZZ_TENANTS; k++) {
                (void) fuzz_expire(z, k);
            }
        }
    }

    free(z->f);

    for (i = 0; i < FUZZ_TENANTS; i++) {
        free(z->t[i]);
    }

    return 0;
}


static void
fuzz_touch(fuzz_t *z, unsigned i, unsigned k, int64_t cost)
{
    int                 was;
    unsigned            j, n, o;
    int64_t             cap, dt;
    llm_fair_tenant_t  *t;
    fuzz_tenant_t      *s;

    t = z->t[i];
    s = &z->s[i];
    was = t->active;

    llm_fair_touch(z->f, t, &z->cls[k], cost, z->now);
    fuzz_latest(z);

    fuzz_trace(z, "touch", i, k, cost, 0);

    /* the others idle for active_ms, the least recently touched first */
    s->active = 0;

    for (n = 0; n < LLM_FAIR_EXPIRE; n++) {
        o = FUZZ_TENANTS;

        for (j = 0; j < FUZZ_TENANTS; j++) {
            if (z->s[j].active
                && (o == FUZZ_TENANTS || z->s[j].order < z->s[o].order))
            {
                o = j;
            }
        }

        if (o == FUZZ_TENANTS
            || z->now - z->s[o].seen_ms < z->conf.active_ms)
        {
            break;
        }

        z->s[o].active = 0;
    }

    /* its demand: linear decay over the window, then what it asks */
    dt = z->now - s->seen_ms;

    if (dt >= z->conf.active_ms || s->demand < 0) {
        s->demand = 0;

    } else if (dt > 0) {
        s->demand -= (int64_t) ((__int128) s->demand * dt
                                / z->conf.active_ms);
    }

    s->demand += fuzz_clamp(cost, FUZZ_RATE_MAX) * FUZZ_TICKS;

    if (s->demand > FUZZ_RATE_MAX * FUZZ_TICKS) {
        s->demand = FUZZ_RATE_MAX * FUZZ_TICKS;
    }

    if (t->demand != s->demand) {
        fuzz_fail(z, "touch", "another demand");
    }

    fuzz_norm_class(&s->cls, &z->cls[k]);
    s->part = fuzz_want_part(z, i);
    s->order = ++z->touches;
    s->active = 1;

    if (t->part != s->part) {
        fuzz_fail(z, "touch", "a part not of its demand");
    }

    if (z->now > s->seen_ms) {
        s->seen_ms = z->now;
    }

    if (t->seen_ms != s->seen_ms) {
        fuzz_fail(z, "touch", "another time seen");
    }

    /* a tenant coming back starts with its share whole */
    if (!was) {
        cap = llm_fair_rate(z->f, t) * z->f->conf.share_ms;

        if (t->share != cap || t->last_ms != z->now) {
            fuzz_fail(z, "touch", "a share back not whole, or not now");
        }
    }

    fuzz_check(z);
}


static int
fuzz_expire(fuzz_t *z, unsigned i)
{
    int             rc, want;
    fuzz_tenant_t  *s;

    s = &z->s[i];

    want = s->active
           && (__int128) z->now - s->seen_ms >= z->conf.active_ms;

    rc = llm_fair_expire(z->f, z->t[i], z->now);

    fuzz_trace(z, "expire", i, 0, 0, rc);

    if (rc != want) {
        fuzz_fail(z, "expire", want ? "an idle tenant kept"
                                    : "an active tenant expired");
    }

    if (rc) {
        s->active = 0;
        fuzz_latest(z);
    }

    fuzz_check(z);

    return rc;
}


static llm_fair_rc_e
fuzz_admit(fuzz_t *z, unsigned i, int64_t cost)
{
    int64_t             wait, last, cap, need, r, reserve;
    __int128            have;
    llm_fair_t         *f;
    llm_fair_rc_e       rc;
    llm_fair_tenant_t  *t;

    f = z->f;
    t = z->t[i];
    last = t->last_ms;

    wait = -1;
    rc = llm_fair_admit(f, t, cost, z->now, &wait);
    fuzz_latest(z);

    fuzz_trace(z, "admit", i, cost, wait, rc);

    /* nothing the rate depends on changed after the refill */
    r = llm_fair_rate(f, t);
    cap = r * f->conf.share_ms;
    cost = fuzz_clamp(cost, FUZZ_RATE_MAX) * FUZZ_TICKS;
    need = cost < cap ? cost : cap;

    if (rc == LLM_FAIR_OK) {
        if (wait != 0) {
            fuzz_fail(z, "admit", "admitted with a wait");
        }

        /*
         * Owed: one share at most for what was borrowed, a request
         * larger than a share less the share it waited for.
         */
        if (t->share < -cap && (__int128) t->share < (__int128) cap - cost) {
            fuzz_fail(z, "admit", "a share owes more than it may");
        }

        if (t->active && z->now > last && t->share > cap) {
            fuzz_fail(z, "admit", "a share above its cap after a refill");
        }

        fuzz_check(z);

        return rc;
    }

    if (rc != LLM_FAIR_SHARE && rc != LLM_FAIR_CLUSTER) {
        fuzz_fail(z, "admit", "an unknown answer");
    }

    if ((rc == LLM_FAIR_CLUSTER) != (f->capacity_now < f->conf.capacity)) {
        fuzz_fail(z, "admit", "the cluster's refusal, or the tenant's, "
                  "the other way round");
    }

    if (cap > 0 && t->share >= need) {
        fuzz_fail(z, "admit", "refused, its share holding the cost");
    }

    reserve = f->conf.burst * FUZZ_TICKS / (2 * LLM_FAIR_PRIORITIES)
              * (LLM_FAIR_PRIORITIES - 1 - t->cls.priority);

    if ((__int128) f->pool >= (__int128) cost + reserve) {
        fuzz_fail(z, "admit", "refused, the pool holding the cost and the "
                  "reserve");
    }

    /* the wait: the first ms its share holds the cost at its rate now */
    if (r > 0) {
        have = (__int128) t->share + (__int128) r * wait;

        if (wait < 1 || have < need
            || (wait > 1 && have - r >= need))
        {
            fuzz_fail(z, "admit", "not the wait its share needs");
        }

    } else if (wait != 1000) {
        fuzz_fail(z, "admit", "no rate, and not a second's wait");
    }

    fuzz_check(z);

    return rc;
}


static void
fuzz_settle(fuzz_t *z, unsigned i, int64_t reserved, int64_t used)
{
    int64_t             before, cap, back, low;
    llm_fair_tenant_t  *t;

    t = z->t[i];
    before = t->share;

    llm_fair_settle(z->f, t, reserved, used, z->now);
    fuzz_latest(z);

    fuzz_trace(z, "settle", i, reserved, used, 0);

    if (!t->active) {
        if (t->share != before) {
            fuzz_fail(z, "settle", "an inactive tenant's share changed");
        }

        fuzz_check(z);
        return;
    }

    cap = llm_fair_rate(z->f, t) * z->f->conf.share_ms;

    if (t->share > cap) {
        fuzz_fail(z, "settle", "a share above its cap");
    }

    back = fuzz_clamp(reserved, FUZZ_RATE_MAX)
           - fuzz_clamp(used, FUZZ_RATE_MAX);

    /* more used than reserved is owed as what was borrowed: a share */
    low = back < 0 ? -cap : cap;
    low = before < low ? before : low;

    if (t->share < low) {
        fuzz_fail(z, "settle", "a share owes more than it may");
    }

    fuzz_check(z);
}


static llm_fair_rc_e
fuzz_start(fuzz_t *z)
{
    int64_t        wait, ceiling;
    llm_fair_t     g;
    llm_fair_rc_e  rc;

    /* the ceiling now, on a copy: its queries update */
    memcpy(&g, z->f, sizeof(llm_fair_t));
    ceiling = llm_fair_ceiling(&g, z->now);

    wait = -1;
    rc = llm_fair_start(z->f, z->now, &wait);
    fuzz_latest(z);

    fuzz_trace(z, "start", -1, z->flights, wait, rc);

    if (z->conf.inflight == 0 || z->flights < ceiling) {
        if (rc != LLM_FAIR_OK || wait != 0) {
            fuzz_fail(z, "start", "refused under the ceiling");
        }

        z->flights++;
        fuzz_check(z);

        return rc;
    }

    if (rc != LLM_FAIR_CLUSTER) {
        fuzz_fail(z, "start", "not refused at the ceiling");
    }

    if (wait < 1 || wait > 1000) {
        fuzz_fail(z, "start", "a wait not of 1 ms to a second");
    }

    if (!z->f->reduced && wait != 1000) {
        fuzz_fail(z, "start", "a ceiling not recovering, and not a second");
    }

    /*
     * Then the recovering ceiling has room, if it can have; not on a
     * clock behind the latest, which finds the ceiling as recovered then.
     */
    if (wait < 1000 && z->flights < z->conf.inflight
        && z->now == z->latest)
    {
        memcpy(&g, z->f, sizeof(llm_fair_t));

        if (llm_fair_ceiling(&g, z->now + wait) <= z->flights) {
            fuzz_fail(z, "start", "no room after the wait");
        }
    }

    fuzz_check(z);

    return rc;
}


static void
fuzz_end(fuzz_t *z)
{
    llm_fair_end(z->f);

    fuzz_trace(z, "end", -1, z->flights, 0, 0);

    if (z->flights > 0) {
        z->flights--;
    }

    fuzz_check(z);
}


static void
fuzz_pressure(fuzz_t *z, unsigned x)
{
    int           rc, want;
    int64_t       floor, c, n, since;
    llm_fair_t    g, *f;

    f = z->f;

    switch (x) {

    case 0:
        since = z->now;
        break;

    case 1:
        since = f->pressed_ms;
        break;

    case 2:
        since = f->pressed_ms - 1;
        break;

    default:
        since = z->now - (int64_t) fuzz_take(z) * 64;
    }

    /* the state brought to now, as the pressure's own update does */
    memcpy(&g, f, sizeof(llm_fair_t));
    (void) llm_fair_capacity(&g, z->now);

    /* once a second, and not for a request sent before the last one */
    want = (__int128) z->now - f->pressed_ms >= FUZZ_HOLD_MS
           && since >= f->pressed_ms;

    rc = llm_fair_pressure(f, z->now, since);
    fuzz_latest(z);

    fuzz_trace(z, "pressure", -1, f->capacity_now, f->inflight_now, rc);

    if (rc != want) {
        fuzz_fail(z, "pressure", want ? "not reduced after a second"
                                      : "reduced again within a second, or "
                                        "for a request sent before");
    }

    if (!rc) {
        if (!fuzz_same(&g, f)) {
            fuzz_fail(z, "pressure", "not reduced, and yet changed");
        }

        fuzz_check(z);
        return;
    }

    z->reductions++;

    floor = f->conf.capacity * FUZZ_FLOOR / 1000;
    c = g.capacity_now / 2 > floor ? g.capacity_now / 2 : floor;

    if (f->capacity_now > c || !f->reduced || f->pressed_ms != z->now) {
        fuzz_fail(z, "pressure", "the capacity not halved at most");
    }

    n = g.inflight_now / 2 > 1000 ? g.inflight_now / 2 : 1000;
    n = n < f->conf.inflight * 1000 ? n : f->conf.inflight * 1000;

    if (f->inflight_now > n) {
        fuzz_fail(z, "pressure", "the ceiling not halved at most");
    }

    /* what the pool holds is as much smaller as the capacity */
    if (f->conf.capacity
        && (__int128) f->pool
           > (__int128) f->conf.burst * f->capacity_now / f->conf.capacity
             * FUZZ_TICKS)
    {
        fuzz_fail(z, "pressure", "the pool above its reduced burst");
    }

    fuzz_check(z);
}


static void
fuzz_reconf(fuzz_t *z, const llm_fair_conf_t *cf)
{
    llm_fair_t  *f;

    f = z->f;

    fuzz_norm_conf(&z->conf, cf);

    llm_fair_reconf(f, cf, z->now);
    fuzz_latest(z);

    fuzz_trace(z, "reconf", -1, cf->capacity, cf->inflight, 0);

    /* the operator is believed: no pressure left */
    if (f->reduced || f->capacity_now != z->conf.capacity
        || f->inflight_now != z->conf.inflight * 1000)
    {
        fuzz_fail(z, "reconf", "pressure not forgotten");
    }

    fuzz_check(z);
}


static void
fuzz_rate(fuzz_t *z, unsigned i)
{
    int64_t     r;
    llm_fair_t  g;

    memcpy(&g, z->f, sizeof(llm_fair_t));

    r = llm_fair_rate(z->f, z->t[i]);

    fuzz_trace(z, "rate", i, r, 0, 0);

    if (!fuzz_same(&g, z->f)) {
        fuzz_fail(z, "rate", "a query changed the state");
    }

    fuzz_check(z);
}


static void
fuzz_capacity(fuzz_t *z)
{
    int64_t     c;
    llm_fair_t  g;

    c = llm_fair_capacity(z->f, z->now);
    fuzz_latest(z);

    fuzz_trace(z, "capacity", -1, c, 0, 0);

    if (c != z->f->capacity_now) {
        fuzz_fail(z, "capacity", "not the capacity now");
    }

    /*
     * It only recovers with time; a clock behind the latest may find it
     * as recovered by the latest, and less a second later.
     */
    memcpy(&g, z->f, sizeof(llm_fair_t));

    if (z->now == z->latest && llm_fair_capacity(&g, z->now + 1000) < c) {
        fuzz_fail(z, "capacity", "less a second later");
    }

    fuzz_check(z);
}


static void
fuzz_ceiling(fuzz_t *z)
{
    int64_t     n, want;
    llm_fair_t  g;

    n = llm_fair_ceiling(z->f, z->now);
    fuzz_latest(z);

    fuzz_trace(z, "ceiling", -1, n, 0, 0);

    want = z->f->inflight_now / 1000;
    want = z->conf.inflight == 0 ? 0 : (want > 1 ? want : 1);

    if (n != want) {
        fuzz_fail(z, "ceiling", "not the ceiling now");
    }

    memcpy(&g, z->f, sizeof(llm_fair_t));

    if (z->now == z->latest && llm_fair_ceiling(&g, z->now + 1000) < n) {
        fuzz_fail(z, "ceiling", "lower a second later");
    }

    fuzz_check(z);
}


/* the state against the books and its bounds */

static void
fuzz_check(fuzz_t *z)
{
    unsigned            i;
    int                 whole;
    int64_t             weights, minimums, active, burst, floor, c, r;
    int64_t             sum, ceiling, mins;
    llm_fair_t          g, *f;
    fuzz_tenant_t      *s;
    llm_fair_tenant_t  *t;

    f = z->f;

    if (f->conf.capacity != z->conf.capacity
        || f->conf.burst != z->conf.burst
        || f->conf.share_ms != z->conf.share_ms
        || f->conf.active_ms != z->conf.active_ms
        || f->conf.inflight != z->conf.inflight)
    {
        fuzz_fail(z, "check", "another configuration");
    }

    weights = 0;
    minimums = 0;
    active = 0;

    for (i = 0; i < FUZZ_TENANTS; i++) {
        s = &z->s[i];
        t = z->t[i];

        if (t->active != s->active) {
            fuzz_fail(z, "check", "another tenant active");
        }

        if (!s->active) {
            continue;
        }

        if (t->cls.weight != s->cls.weight
            || t->cls.minimum != s->cls.minimum
            || t->cls.priority != s->cls.priority)
        {
            fuzz_fail(z, "check", "another class counted");
        }

        if (t->part != s->part || s->part > LLM_FAIR_WHOLE) {
            fuzz_fail(z, "check", "another part counted");
        }

        weights += s->cls.weight * (int64_t) s->part;
        minimums += (int64_t) ((__int128) s->cls.minimum * s->part
                               / LLM_FAIR_WHOLE);
        active++;
    }

    if (f->weights != weights || f->minimums != minimums
        || f->active != active)
    {
        fuzz_fail(z, "check", "sums not of the active tenants");
    }

    fuzz_list(z);

    if (f->flights != z->flights || f->reductions != z->reductions) {
        fuzz_fail(z, "check", "other flights or reductions");
    }

    if (f->last_ms != z->latest) {
        fuzz_fail(z, "check", "the pool refilled to another time");
    }

    burst = f->conf.burst * FUZZ_TICKS;

    if (f->pool > burst || f->pool < -burst) {
        fuzz_fail(z, "check", "the pool beyond a burst");
    }

    floor = f->conf.capacity * FUZZ_FLOOR / 1000;
    c = f->capacity_now;

    if (c < floor || c > f->conf.capacity) {
        fuzz_fail(z, "check", "the capacity below its floor or above C");
    }

    if (f->conf.inflight == 0 ? f->inflight_now != 0
        : f->inflight_now < 1000 || f->inflight_now > f->conf.inflight * 1000)
    {
        fuzz_fail(z, "check", "the ceiling out of its bounds");
    }

    if (!f->reduced && (c != f->conf.capacity
                        || f->inflight_now != f->conf.inflight * 1000))
    {
        fuzz_fail(z, "check", "reduced, and not so marked");
    }

    memcpy(&g, f, sizeof(llm_fair_t));
    ceiling = llm_fair_ceiling(&g, z->now);

    if (f->conf.inflight == 0 ? ceiling != 0
        : ceiling < 1 || ceiling > f->conf.inflight)
    {
        fuzz_fail(z, "check", "a ceiling of none, or out of its bounds");
    }

    sum = 0;
    whole = 1;

    for (i = 0; i < FUZZ_TENANTS; i++) {
        s = &z->s[i];
        t = z->t[i];
        r = llm_fair_rate(f, t);

        if (r != fuzz_want_rate(z, i)) {
            fuzz_fail(z, "check", "a rate not of the formula");
        }

        if (!s->active) {
            continue;
        }

        if (r < 0 || r > c) {
            fuzz_fail(z, "check", "a rate beyond the capacity");
        }

        /* a minimum is kept while the minimums fit, else shared */
        mins = minimums - (int64_t) ((__int128) s->cls.minimum * s->part
                                     / LLM_FAIR_WHOLE)
               + s->cls.minimum;

        if (mins < c ? r < s->cls.minimum : r > s->cls.minimum) {
            fuzz_fail(z, "check", "a minimum not kept, or exceeded");
        }

        /* a share holds a share, and owes the largest request, at most */
        if (t->share < -FUZZ_RATE_MAX * FUZZ_TICKS
            || t->share > FUZZ_RATE_MAX * FUZZ_TICKS)
        {
            fuzz_fail(z, "check", "a share beyond any bound");
        }

        /* the shares as they count */
        sum += (int64_t) ((__int128) r * s->part / LLM_FAIR_WHOLE);
        whole &= s->part == LLM_FAIR_WHOLE;
    }

    /*
     * What the shares count adds up to the capacity at most, but for the
     * rounding of the minimums' parts; to all of it when every part is
     * whole.
     */
    if (sum > c + active || (active && whole && sum < c - active)) {
        fuzz_fail(z, "check", "the shares do not add up to the capacity");
    }
}


/* the list of the active: the books' tenants in the order of touches */

static void
fuzz_list(fuzz_t *z)
{
    unsigned            i, n, active;
    uint64_t            order;
    llm_fair_tenant_t  *t, *prev;

    active = 0;

    for (i = 0; i < FUZZ_TENANTS; i++) {
        active += z->s[i].active;
    }

    n = 0;
    order = 0;
    prev = NULL;

    for (t = z->f->oldest; t != NULL; t = t->newer) {
        for (i = 0; i < FUZZ_TENANTS && z->t[i] != t; i++) { /* void */ }

        if (i == FUZZ_TENANTS || !z->s[i].active || z->s[i].order <= order
            || t->older != prev || ++n > active)
        {
            fuzz_fail(z, "check", "the list of the active is not the books'");
        }

        order = z->s[i].order;
        prev = t;
    }

    if (n != active || z->f->latest != prev) {
        fuzz_fail(z, "check", "the list of the active misses some");
    }

    for (i = 0; i < FUZZ_TENANTS; i++) {
        if (!z->s[i].active
            && (z->t[i]->newer != NULL || z->t[i]->older != NULL))
        {
            fuzz_fail(z, "check", "an idle tenant still linked");
        }
    }
}


/*
 * r_i = g_i + w_i / (w_i + sum(other p w)) x (C - g_i - sum(other p g));
 * the minimums alone, if more
 */

static int64_t
fuzz_want_rate(fuzz_t *z, unsigned i)
{
    fuzz_tenant_t  *s;

    s = &z->s[i];

    if (!s->active) {
        return 0;
    }

    return fuzz_share_of(z, &s->cls,
                         z->f->weights - s->cls.weight * (int64_t) s->part,
                         z->f->minimums
                         - (int64_t) ((__int128) s->cls.minimum * s->part
                                      / LLM_FAIR_WHOLE));
}


static int64_t
fuzz_share_of(fuzz_t *z, const llm_fair_class_t *cls, int64_t weights,
    int64_t minimums)
{
    __int128  c, g, w;

    c = z->f->capacity_now;
    g = (__int128) minimums + cls->minimum;
    w = (__int128) weights + (__int128) cls->weight * LLM_FAIR_WHOLE;

    if (g >= c) {
        return g ? (int64_t) (cls->minimum * c / g) : 0;
    }

    return (int64_t) (cls->minimum
                      + cls->weight * LLM_FAIR_WHOLE * (c - g) / w);
}


/*
 * x = demand_i / (r_i x active_ms), r_i its share beside the others
 * active (the books), counted whole: p_i = max(x, 8x - 1), whole from a
 * quarter
 */

static uint32_t
fuzz_want_part(fuzz_t *z, unsigned i)
{
    unsigned        j;
    int64_t         w, g, x, p;
    __int128        window;
    fuzz_tenant_t  *s;

    w = 0;
    g = 0;

    for (j = 0; j < FUZZ_TENANTS; j++) {
        s = &z->s[j];

        if (j != i && s->active) {
            w += s->cls.weight * (int64_t) s->part;
            g += (int64_t) ((__int128) s->cls.minimum * s->part
                            / LLM_FAIR_WHOLE);
        }
    }

    s = &z->s[i];
    window = (__int128) fuzz_share_of(z, &s->cls, w, g) * z->conf.active_ms;

    if (window <= 0 || (__int128) s->demand * FUZZ_SLACK >= window) {
        return LLM_FAIR_WHOLE;
    }

    x = (int64_t) (s->demand * (__int128) LLM_FAIR_WHOLE / window);
    p = x * 8 - LLM_FAIR_WHOLE;

    if (x > LLM_FAIR_WHOLE / FUZZ_SLACK || (p > x ? p : x) > LLM_FAIR_WHOLE) {
        fuzz_fail(z, "part", "beyond a whole below a quarter");
    }

    return (uint32_t) (p > x ? p : x);
}


static int
fuzz_same(const llm_fair_t *a, const llm_fair_t *b)
{
    return memcmp(&a->conf, &b->conf, sizeof(llm_fair_conf_t)) == 0
           && a->pool == b->pool && a->last_ms == b->last_ms
           && a->weights == b->weights && a->minimums == b->minimums
           && a->active == b->active && a->latest == b->latest
           && a->oldest == b->oldest && a->capacity_now == b->capacity_now
           && a->inflight_now == b->inflight_now
           && a->capacity_base == b->capacity_base
           && a->inflight_base == b->inflight_base
           && a->pressed_ms == b->pressed_ms && a->flights == b->flights
           && a->win_ms == b->win_ms && a->win_tokens == b->win_tokens
           && a->last_tokens == b->last_tokens
           && a->reductions == b->reductions && a->reduced == b->reduced;
}


static void
fuzz_read_conf(fuzz_t *z, llm_fair_conf_t *cf)
{
    cf->capacity = fuzz_value(z);
    cf->burst = fuzz_value(z);
    cf->share_ms = fuzz_value(z);
    cf->active_ms = fuzz_value(z);
    cf->inflight = fuzz_value(z);
}


/* the configuration as llm_fair.h documents its defaults and bounds */

static void
fuzz_norm_conf(llm_fair_conf_t *e, const llm_fair_conf_t *cf)
{
    e->capacity = fuzz_clamp(cf->capacity, FUZZ_RATE_MAX);
    e->burst = cf->burst > 0 ? cf->burst : e->capacity / 6;
    e->burst = fuzz_clamp(e->burst, FUZZ_RATE_MAX);
    e->share_ms = cf->share_ms > 0 ? cf->share_ms : 10000;
    e->share_ms = fuzz_clamp(e->share_ms, 60000);
    e->active_ms = cf->active_ms > 0 ? cf->active_ms : 10000;
    e->inflight = fuzz_clamp(cf->inflight, FUZZ_INFLIGHT_MAX);
}


static void
fuzz_norm_class(llm_fair_class_t *e, const llm_fair_class_t *c)
{
    e->weight = c->weight < 1 ? 1 : fuzz_clamp(c->weight, FUZZ_WEIGHT_MAX);
    e->minimum = fuzz_clamp(c->minimum, FUZZ_RATE_MAX);
    e->priority = c->priority < 0 ? 0
                  : c->priority >= LLM_FAIR_PRIORITIES
                    ? LLM_FAIR_PRIORITIES - 1 : c->priority;
}


/* a settle's figures: used as read, as reserved, less, or more */

static void
fuzz_used(fuzz_t *z, unsigned x, int64_t *reserved, int64_t *used)
{
    int64_t  v;

    *reserved = fuzz_value(z);
    v = fuzz_value(z);

    switch (x) {

    case 0:
        *used = v;
        break;

    case 1:
        *used = *reserved;
        break;

    case 2:
        if (__builtin_sub_overflow(*reserved, v, used)) {
            *used = v > 0 ? INT64_MIN : INT64_MAX;
        }

        break;

    default:
        if (__builtin_add_overflow(*reserved, v, used)) {
            *used = v > 0 ? INT64_MAX : INT64_MIN;
        }
    }
}


/*
 * The clock: the same ms, 1 to 63 ms, 50 ms to 3.2 s, 1 to 64 s, 1 to 48
 * minutes, 1 to 8 hours, or back by 8 ms to a second.
 */

static int64_t
fuzz_step(unsigned b)
{
    if (b < 0x40) {
        return b;
    }

    if (b < 0x80) {
        return (b - 0x3f) * 50;
    }

    if (b < 0xc0) {
        return (b - 0x7f) * 1000LL;
    }

    if (b < 0xf0) {
        return (b - 0xbf) * 60000LL;
    }

    if (b < 0xf8) {
        return (b - 0xef) * 3600000LL;
    }

    return -(8LL << (b - 0xf8));
}


/*
 * A kind and 16 bits: v small, v, thousands, millions, 10^12 give or take
 * 128, negative, near INT64_MAX (v odd) or INT64_MIN, 10^12 times v.
 */

static int64_t
fuzz_value(fuzz_t *z)
{
    unsigned  kind, v;

    kind = fuzz_take(z) & 0x07;
    v = fuzz_take(z);
    v |= fuzz_take(z) << 8;

    switch (kind) {

    case 0:
        return v & 0xff;

    case 1:
        return v;

    case 2:
        return (int64_t) v * 1000;

    case 3:
        return (int64_t) v * 1000000;

    case 4:
        return FUZZ_RATE_MAX - 128 + (v & 0xff);

    case 5:
        return -(int64_t) v - 1;

    case 6:
        return (v & 1) ? INT64_MAX - (v >> 1) : INT64_MIN + (v >> 1);

    default:
        return (int64_t) v * FUZZ_RATE_MAX;
    }
}


static int64_t
fuzz_clamp(int64_t v, int64_t max)
{
    return v < 0 ? 0 : (v > max ? max : v);
}


/* a call that updates the pool refills it to now, never back */

static void
fuzz_latest(fuzz_t *z)
{
    if (z->now > z->latest) {
        z->latest = z->now;
    }
}


static unsigned
fuzz_take(fuzz_t *z)
{
    return z->in < z->end ? *z->in++ : 0;
}


static void
fuzz_trace(fuzz_t *z, const char *op, int tenant, int64_t a, int64_t b,
    int64_t rc)
{
    llm_fair_t  *f;

    if (!fuzz_tracing) {
        return;
    }

    f = z->f;

    fprintf(stderr, "%-8s at %lld tenant %d: %lld %lld rc %lld; pool %lld "
            "capacity %lld inflight %lld flights %lld", op,
            (long long) z->now, tenant, (long long) a, (long long) b,
            (long long) rc, (long long) f->pool,
            (long long) f->capacity_now, (long long) f->inflight_now,
            (long long) f->flights);

    if (tenant >= 0) {
        fprintf(stderr, " share %lld rate %lld",
                (long long) z->t[tenant]->share,
                (long long) llm_fair_rate(f, z->t[tenant]));
    }

    fprintf(stderr, "\n");
}


static void
fuzz_fail(fuzz_t *z, const char *how, const char *what)
{
    fprintf(stderr, "fuzz_fair: %s: %s (clock %lld, %lld in flight)\n",
            how, what, (long long) z->now, (long long) z->flights);
    __builtin_trap();
}
