
/*
 * Shared capacity by weight, on a fake clock: tenants asking
 * more than the capacity get their weighted shares of it, an idle one's
 * share goes to the others by weight, below the capacity each gets what
 * it asks, a minimum is kept, a lower priority borrows less, and
 * backpressure halves the capacity and the ceiling of requests in flight
 * and lets them recover.  Tenants count by their demand: stale ones, in
 * any number, leave the sums after the window without anything walking
 * them, and a trickle of tiny requests holds next to nothing.
 */


#include <stdio.h>
#include <string.h>

#include "llm_fair.h"
#include "tap.h"


#define SIM_TENANTS  8
#define SIM_STALE    4000


typedef struct {
    llm_fair_class_t   cls;
    llm_fair_tenant_t  t;
    int64_t            every_ms;     /* asks one request this often; 0: idle */
    int64_t            cost;
    int64_t            next_ms;
    int64_t            admitted;     /* tokens, in the measured span */
    int64_t            refused;
    int64_t            cluster;
} sim_tenant_t;


typedef struct {
    llm_fair_t         f;
    sim_tenant_t       t[SIM_TENANTS];
    int                n;
    int64_t            now;
    int                scrape;       /* every tenant's expire, each ms */
} sim_t;


static void
sim_init(sim_t *s, int64_t capacity)
{
    llm_fair_conf_t  cf;

    memset(s, 0, sizeof(*s));
    memset(&cf, 0, sizeof(cf));

    cf.capacity = capacity;

    s->now = 1000;
    s->scrape = 1;
    llm_fair_init(&s->f, &cf, s->now);
}


static sim_tenant_t *
sim_add(sim_t *s, int64_t weight, int64_t minimum, int priority,
    int64_t every_ms, int64_t cost)
{
    sim_tenant_t  *t;

    t = &s->t[s->n++];
    t->cls.weight = weight;
    t->cls.minimum = minimum;
    t->cls.priority = priority;
    t->every_ms = every_ms;
    t->cost = cost;
    t->next_ms = s->now;

    return t;
}


/*
 * ms of simulated time, a millisecond a step; each tenant asks on its
 * period, and what is admitted is used in full at once.  measure: count
 * what is admitted.
 */

static void
sim_run(sim_t *s, int64_t ms, int measure)
{
    int            i;
    int64_t        end, wait;
    llm_fair_rc_e  rc;
    sim_tenant_t  *t;

    end = s->now + ms;

    for ( /* void */ ; s->now < end; s->now++) {
        for (i = 0; i < s->n; i++) {
            t = &s->t[i];

            if (s->scrape) {
                (void) llm_fair_expire(&s->f, &t->t, s->now);
            }

            if (t->every_ms == 0 || s->now < t->next_ms) {
                continue;
            }

            t->next_ms = s->now + t->every_ms;

            llm_fair_touch(&s->f, &t->t, &t->cls, t->cost, s->now);
            rc = llm_fair_admit(&s->f, &t->t, t->cost, s->now, &wait);

            if (rc == LLM_FAIR_OK) {
                llm_fair_settle(&s->f, &t->t, t->cost, t->cost, s->now);

                if (measure) {
                    t->admitted += t->cost;
                }

            } else if (measure) {
                t->refused++;
                t->cluster += (rc == LLM_FAIR_CLUSTER);
            }
        }
    }
}


static void
sim_reset(sim_t *s)
{
    int  i;

    for (i = 0; i < s->n; i++) {
        s->t[i].admitted = 0;
        s->t[i].refused = 0;
        s->t[i].cluster = 0;
    }
}


/* within 10 % of want */
static int
near(int64_t got, int64_t want)
{
    return got * 10 >= want * 9 && got * 10 <= want * 11;
}


int
main(void)
{
    int                       i;
    static sim_t              s;
    int64_t                   c, got, wait, active;
    sim_tenant_t             *a, *b, *d, *x, *y, *h, *l;
    llm_fair_conf_t           cf;
    llm_fair_class_t          one;
    static llm_fair_tenant_t  stale[SIM_STALE];

    /* three tenants of weights 1, 1 and 2, each asking far more than C */
    c = 600000;
    sim_init(&s, c);
    a = sim_add(&s, 1, 0, 1, 2, 1000);
    b = sim_add(&s, 1, 0, 1, 2, 1000);
    d = sim_add(&s, 2, 0, 1, 2, 1000);

    sim_run(&s, 60000, 0);
    sim_run(&s, 120000, 1);

    tap_ok(near(a->admitted / 2, c / 4), "1:1:2 over capacity: a has 25 %% "
           "(%lld a minute)", (long long) a->admitted / 2);
    tap_ok(near(b->admitted / 2, c / 4), "b has 25 %% (%lld)",
           (long long) b->admitted / 2);
    tap_ok(near(d->admitted / 2, c / 2), "d has 50 %% (%lld)",
           (long long) d->admitted / 2);
    tap_ok(near((a->admitted + b->admitted + d->admitted) / 2, c),
           "and all of it is used (%lld)",
           (long long) (a->admitted + b->admitted + d->admitted) / 2);
    tap_ok(a->refused > 0 && a->cluster == 0,
           "the excess is refused, as theirs, not the cluster's");

    /* a goes idle: b and d split its share by weight, 1:2 */
    a->every_ms = 0;
    sim_run(&s, 30000, 0);
    sim_reset(&s);
    sim_run(&s, 120000, 1);

    tap_is(s.f.active, 2, "a idle 10 s is no longer active");
    tap_ok(near(b->admitted / 2, c / 3), "a idle: b has a third (%lld)",
           (long long) b->admitted / 2);
    tap_ok(near(d->admitted / 2, c * 2 / 3), "d two thirds (%lld)",
           (long long) d->admitted / 2);

    /* below capacity: 100,000 a minute each, 300,000 in all; all of it */
    sim_init(&s, c);
    a = sim_add(&s, 1, 0, 1, 600, 1000);
    b = sim_add(&s, 1, 0, 1, 600, 1000);
    d = sim_add(&s, 2, 0, 1, 600, 1000);
    sim_run(&s, 60000, 0);
    sim_run(&s, 60000, 1);

    tap_is(a->refused + b->refused + d->refused, 0,
           "below capacity: nothing refused");
    tap_ok(near(a->admitted, 100000) && near(d->admitted, 100000),
           "each gets what it asks (%lld, %lld)", (long long) a->admitted,
           (long long) d->admitted);

    /* above its share but the others idle: it takes the idle capacity */
    sim_init(&s, c);
    a = sim_add(&s, 1, 0, 1, 200, 1000);    /* 300,000 a minute */
    b = sim_add(&s, 1, 0, 1, 3000, 1000);   /* 20,000 */
    d = sim_add(&s, 2, 0, 1, 3000, 1000);   /* 20,000 */
    sim_run(&s, 60000, 0);
    sim_run(&s, 60000, 1);

    tap_is(a->refused, 0, "a burst above its 150,000 share into idle "
           "capacity: not refused");
    tap_ok(near(a->admitted, 300000), "it gets its 300,000 (%lld)",
           (long long) a->admitted);

    /* a minimum: x (weight 1, 300,000 guaranteed) against y (weight 10) */
    sim_init(&s, c);
    x = sim_add(&s, 1, 300000, 1, 2, 1000);
    y = sim_add(&s, 10, 0, 1, 2, 1000);
    sim_run(&s, 60000, 0);
    sim_run(&s, 60000, 1);

    tap_is(llm_fair_rate(&s.f, &x->t), 300000 + 300000 / 11,
           "x's share: its minimum and a weight of the rest");
    tap_ok(x->admitted >= 300000 * 9 / 10, "x gets at least its minimum "
           "(%lld)", (long long) x->admitted);
    tap_ok(near(y->admitted, 300000 * 10 / 11), "y the rest (%lld)",
           (long long) y->admitted);

    /* priority: h asks less than its share, l more; l borrows, h is served */
    sim_init(&s, c);
    h = sim_add(&s, 1, 0, 3, 300, 1000);    /* 200,000 a minute */
    l = sim_add(&s, 1, 0, 0, 1, 1000);      /* 60,000,000 */
    sim_run(&s, 60000, 0);
    sim_run(&s, 60000, 1);

    tap_is(h->refused, 0, "a higher priority under its share: all served");
    tap_ok(l->admitted >= 300000 * 9 / 10, "the lower one has its share at "
           "least (%lld)", (long long) l->admitted);
    tap_ok(near(h->admitted + l->admitted, c), "and the capacity is used "
           "(%lld)", (long long) (h->admitted + l->admitted));

    /*
     * priority when capacity frees up: m uses half its 200,000 share, l
     * and h ask far more than theirs, l first each millisecond; what m
     * leaves goes to h, of the higher priority
     */
    sim_init(&s, c);
    x = sim_add(&s, 1, 0, 1, 600, 1000);    /* 100,000 a minute */
    l = sim_add(&s, 1, 0, 0, 1, 1000);
    h = sim_add(&s, 1, 0, 3, 1, 1000);
    sim_run(&s, 60000, 0);
    sim_run(&s, 60000, 1);

    tap_is(x->refused, 0, "m, under its share, is not refused");
    tap_ok(near(h->admitted, 300000) && near(l->admitted, 200000),
           "h, priority 3, takes the 100,000 m leaves; l, priority 0, "
           "keeps its share (%lld, %lld)", (long long) h->admitted,
           (long long) l->admitted);

    sim_init(&s, c);
    x = sim_add(&s, 1, 0, 1, 600, 1000);
    l = sim_add(&s, 1, 0, 1, 1, 1000);
    h = sim_add(&s, 1, 0, 1, 1, 1000);
    sim_run(&s, 60000, 0);
    sim_run(&s, 60000, 1);

    tap_ok(l->admitted > 200000 * 11 / 10, "at the same priority, whoever "
           "asks first takes it (%lld, %lld)", (long long) h->admitted,
           (long long) l->admitted);

    /* backpressure: halves now, recovers by 5 % of C a second */
    sim_init(&s, c);
    a = sim_add(&s, 1, 0, 1, 2, 1000);
    sim_run(&s, 20000, 0);

    tap_is(llm_fair_pressure(&s.f, s.now, s.now), 1, "pressure: reduced");
    tap_is(llm_fair_capacity(&s.f, s.now), c / 2, "to half of C, all of it "
           "admitted in the last second");
    tap_is(llm_fair_pressure(&s.f, s.now + 999, s.now + 999), 0,
           "again within a second: not reduced again");
    tap_is(llm_fair_capacity(&s.f, s.now + 999), c / 2 + c * 999 / 20000,
           "and recovering");

    for (got = 0; got < 5; got++) {
        sim_run(&s, 1000, 0);
        llm_fair_pressure(&s.f, s.now, s.now);
    }

    tap_is(llm_fair_capacity(&s.f, s.now), c / 10, "once a second: down "
           "to a tenth");
    tap_is(s.f.reductions, 6, "six reductions");

    sim_reset(&s);
    sim_run(&s, 1000, 1);
    tap_ok(a->cluster > 0 && a->cluster == a->refused,
           "refusals while reduced are the cluster's");
    tap_is(llm_fair_capacity(&s.f, s.now), c * 150 / 1000,
           "a second later: 15 %%");

    sim_run(&s, 17000, 0);
    tap_is(llm_fair_capacity(&s.f, s.now), c, "18 s later: all of C");

    sim_reset(&s);
    sim_run(&s, 60000, 1);
    tap_ok(near(a->admitted, c), "and a uses all of it again (%lld)",
           (long long) a->admitted);

    /* pressure when far less than C is admitted: half of what is */
    sim_init(&s, c);
    a = sim_add(&s, 1, 0, 1, 200, 1000);    /* 300,000 a minute */
    sim_run(&s, 20000, 0);

    llm_fair_pressure(&s.f, s.now, s.now);
    tap_is(llm_fair_capacity(&s.f, s.now), 150000, "300,000 a minute "
           "admitted of 600,000: reduced to 150,000 at once");

    tap_is(llm_fair_rate(&s.f, &a->t), 150000, "and a's share with it");

    sim_run(&s, 20000, 0);
    sim_reset(&s);
    sim_run(&s, 60000, 1);
    tap_is(a->refused, 0, "recovered: a is served in full again");

    /* the ceiling of requests in flight */
    memset(&cf, 0, sizeof(cf));
    cf.inflight = 8;
    llm_fair_init(&s.f, &cf, 1000);

    for (got = 0; got < 8; got++) {
        (void) llm_fair_start(&s.f, 1000, &wait);
    }

    tap_is(s.f.flights, 8, "eight in flight under a ceiling of 8");
    tap_is(llm_fair_start(&s.f, 1000, &wait), LLM_FAIR_CLUSTER,
           "the ninth is refused, the cluster's");
    tap_is(wait, 1000, "retry in a second: one ending makes room");
    llm_fair_end(&s.f);
    tap_is(llm_fair_start(&s.f, 1000, &wait), LLM_FAIR_OK,
           "one ended: room for one");

    tap_is(llm_fair_pressure(&s.f, 1000, 1000), 1, "pressure with 8 in flight");
    tap_is(llm_fair_ceiling(&s.f, 1000), 4, "the ceiling halves to 4");
    tap_is(llm_fair_capacity(&s.f, 1000), 0, "no capacity configured: 0");

    for (got = 0; got < 5; got++) {
        llm_fair_end(&s.f);
    }

    tap_is(llm_fair_start(&s.f, 1000, &wait), LLM_FAIR_OK, "3 in flight: "
           "one more");
    tap_is(llm_fair_start(&s.f, 1000, &wait), LLM_FAIR_CLUSTER, "4: none");
    tap_is(llm_fair_ceiling(&s.f, 3499), 4, "the ceiling recovers by 0.4 "
           "a second: 4 until 2.5 s");
    tap_is(llm_fair_ceiling(&s.f, 3500), 5, "5 then");
    tap_is(llm_fair_ceiling(&s.f, 21000), 8, "all 8 after 20 s");
    tap_is(llm_fair_pressure(&s.f, 21000, 999), 0, "a request admitted "
           "before the last reduction: no reduction, a minute on");

    llm_fair_pressure(&s.f, 21000, 21000);
    tap_is(llm_fair_ceiling(&s.f, 21000), 2, "4 in flight at the next "
           "pressure: 2");

    for (got = 0; got < 4; got++) {
        llm_fair_end(&s.f);
    }

    llm_fair_pressure(&s.f, 22000, 22000);
    tap_is(llm_fair_ceiling(&s.f, 22000), 1, "none in flight: one, never 0");

    /* the wait for a ceiling that recovers soon */
    cf.inflight = 100;
    llm_fair_init(&s.f, &cf, 1000);

    for (got = 0; got < 100; got++) {
        (void) llm_fair_start(&s.f, 1000, &wait);
    }

    llm_fair_pressure(&s.f, 1000, 1000);

    for (got = 0; got < 50; got++) {
        llm_fair_end(&s.f);
    }

    tap_is(llm_fair_start(&s.f, 1000, &wait), LLM_FAIR_CLUSTER, "ceiling "
           "50 of 100, 50 in flight: refused");
    tap_is(wait, 200, "the 51st place comes in 200 ms (5 a second)");
    tap_is(llm_fair_start(&s.f, 1200, &wait), LLM_FAIR_OK, "and then it is "
           "there");

    /* a reload: the configuration is believed, pressure forgotten */
    cf.inflight = 10;
    cf.capacity = 60000;
    llm_fair_reconf(&s.f, &cf, 1300);
    tap_is(llm_fair_ceiling(&s.f, 1300), 10, "reloaded: ceiling 10");
    tap_is(llm_fair_capacity(&s.f, 1300), 60000, "capacity 60,000");
    tap_is(s.f.flights, 51, "the requests in flight are still counted");

    /* a request larger than a share's 10 s waits for a whole share */
    sim_init(&s, 60000);
    a = sim_add(&s, 1, 0, 1, 0, 0);
    b = sim_add(&s, 1, 0, 1, 0, 0);
    llm_fair_touch(&s.f, &a->t, &a->cls, 20000, s.now);
    llm_fair_touch(&s.f, &b->t, &b->cls, 20000, s.now);

    /* drain the pool, then a's share */
    s.f.pool = 0;
    tap_is(llm_fair_admit(&s.f, &a->t, 20000, s.now, &wait), LLM_FAIR_OK,
           "a request of 20,000 when a share holds 5,000: admitted, owed");
    tap_ok(a->t.share < 0, "a owes it");
    got = llm_fair_admit(&s.f, &a->t, 1000, s.now, &wait);
    tap_is(got, LLM_FAIR_SHARE, "the next waits");
    tap_ok(wait > 10000 && wait <= 40000, "until the debt is paid (%lld ms)",
           (long long) wait);
    tap_is(llm_fair_admit(&s.f, &b->t, 1000, s.now, &wait), LLM_FAIR_OK,
           "b is not held by a's debt");

    /* a tenant forgotten while active (its node freed) leaves the sums */
    llm_fair_leave(&s.f, &a->t, s.now);
    tap_ok(s.f.active == 1 && s.f.weights == LLM_FAIR_WHOLE && !a->t.active,
           "a left: b alone counts");
    tap_is(llm_fair_rate(&s.f, &b->t), 60000, "and has all of it");

    /*
     * 4,000 tenants of weight 1 ask 8 tokens once each, then nothing;
     * weights 1 and 3 ask far more than C; nothing but their requests
     * expires anyone
     */
    c = 600000;
    sim_init(&s, c);
    s.scrape = 0;
    one.weight = 1;
    one.minimum = 0;
    one.priority = 1;
    memset(stale, 0, sizeof(stale));

    for (got = 0, i = 0; i < SIM_STALE; i++) {
        llm_fair_touch(&s.f, &stale[i], &one, 8, s.now);
        got += llm_fair_admit(&s.f, &stale[i], 8, s.now, &wait)
               == LLM_FAIR_OK;
        s.now += (i % 4 == 3);
    }

    tap_is(got, SIM_STALE, "4,000 stale ones asked, served");
    tap_is(s.f.active, SIM_STALE, "4,000 active within the window");
    tap_ok(s.f.weights < SIM_STALE * (LLM_FAIR_WHOLE / 1000), "each counts "
           "less than a thousandth of its weight (%lld per million in all)",
           (long long) s.f.weights);

    l = sim_add(&s, 1, 0, 1, 2, 1000);
    h = sim_add(&s, 3, 0, 1, 2, 1000);
    l->next_ms = s.now + 10000;
    h->next_ms = s.now + 10001;
    sim_run(&s, 10000, 0);

    active = s.f.active;
    sim_run(&s, 1, 0);
    tap_is(active - s.f.active + 1, LLM_FAIR_EXPIRE,
           "the first request after the window expires %d of them, no more",
           LLM_FAIR_EXPIRE);

    sim_run(&s, 500, 0);
    tap_ok(s.f.active == 2 && s.f.weights == 4 * LLM_FAIR_WHOLE,
           "half a second of requests later, none of them counts: 2 active, "
           "weights %lld per million", (long long) s.f.weights);

    sim_run(&s, 30000, 0);
    sim_run(&s, 60000, 1);

    tap_ok(near(l->admitted * 3, h->admitted) && near(l->admitted, c / 4),
           "weights 1 and 3 beside 4,000 stale tenants: %lld and %lld "
           "(ratio %.2f)", (long long) l->admitted, (long long) h->admitted,
           (double) h->admitted / (double) (l->admitted ? l->admitted : 1));

    /* 3 tenants ask 8 tokens every 5 s beside weights 1 and 3 */
    sim_init(&s, c);
    s.scrape = 0;
    l = sim_add(&s, 1, 0, 1, 2, 1000);
    h = sim_add(&s, 3, 0, 1, 2, 1000);
    a = sim_add(&s, 1, 0, 1, 5000, 8);
    b = sim_add(&s, 1, 0, 1, 5000, 8);
    d = sim_add(&s, 1, 0, 1, 5000, 8);
    sim_run(&s, 30000, 0);
    sim_run(&s, 60000, 1);

    tap_is(s.f.active, 5, "the trickles are active");
    tap_ok(a->t.part < LLM_FAIR_WHOLE / 1000, "a trickle counts what it "
           "asks, %u per million of its weight", a->t.part);
    tap_ok(near(l->admitted * 3, h->admitted) && near(l->admitted, c / 4),
           "weights 1 and 3 beside three trickles: %lld and %lld (ratio "
           "%.2f)", (long long) l->admitted, (long long) h->admitted,
           (double) h->admitted / (double) (l->admitted ? l->admitted : 1));
    tap_is(a->refused + b->refused + d->refused, 0,
           "and every trickle is served");

    /* a trickle that asks far more counts whole within a second */
    a->every_ms = 2;
    a->cost = 1000;
    a->next_ms = s.now;
    sim_run(&s, 1000, 0);

    tap_is(a->t.part, LLM_FAIR_WHOLE, "a trickle asking more: whole");

    sim_reset(&s);
    sim_run(&s, 60000, 1);
    tap_ok(near(a->admitted, c / 5) && near(l->admitted, c / 5)
           && near(h->admitted, c * 3 / 5),
           "1:1:3 then (%lld, %lld, %lld)", (long long) a->admitted,
           (long long) l->admitted, (long long) h->admitted);

    return tap_done();
}
