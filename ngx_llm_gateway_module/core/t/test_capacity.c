
/*
 * The oversubscription planner against a worked example:
 * C = 1,200,000 TPM, plans of 60,000, p = 0.08: 250 tenants by the
 * mean, about 132 with 3 sigma.
 */


#include <math.h>
#include <stdio.h>

#include "llm_capacity.h"
#include "tap.h"


typedef struct {
    const char  *name;
    int64_t      capacity;
    int64_t      plan;
    double       p;
    double       k;
    int64_t      want;
} case_t;


static const case_t  cases[] = {

    /* the source's example */
    { "by the mean", 1200000, 60000, 0.08, 0, 250 },
    { "with 3 sigma", 1200000, 60000, 0.08, 3, 132 },

    /* no oversubscription when everyone uses everything */
    { "p = 1: C / M, by the mean", 1200000, 60000, 1, 0, 20 },
    { "p = 1: C / M, with 3 sigma (no variance)", 1200000, 60000, 1, 3, 20 },
    { "p above 1 is 1", 1200000, 60000, 7, 3, 20 },

    /* the bounds */
    { "p = 0: no limit", 1200000, 60000, 0, 3, -1 },
    { "p negative: no limit", 1200000, 60000, -0.5, 3, -1 },
    { "p NaN: no limit", 1200000, 60000, NAN, 3, -1 },
    { "a plan of 0: no limit", 1200000, 0, 0.5, 3, -1 },
    { "no capacity: none", 0, 60000, 0.08, 3, 0 },
    { "a plan larger than the capacity, p = 1: none", 50000, 60000, 1, 0,
      0 },
    { "one that fits by the mean, not with headroom", 60000, 60000, 0.9, 3,
      0 },
    { "k negative is 0", 1200000, 60000, 0.08, -3, 250 },

    /* more headroom, fewer tenants */
    { "1 sigma", 1200000, 60000, 0.08, 1, 201 },
    { "2 sigma", 1200000, 60000, 0.08, 2, 163 },

    /* a huge capacity does not overflow */
    { "a capacity of 2^62 tokens, plans of 1", 4611686018427387904LL, 1,
      0.5, 3, 9223372036854775807LL },
};


/* the largest N that fits, counted one by one */
static int64_t
brute(int64_t capacity, int64_t plan, double p, double k)
{
    int64_t  n;
    double   m;

    m = (double) plan;

    for (n = 0; ; n++) {
        if ((double) (n + 1) * p * m + k * sqrt((double) (n + 1) * p * (1 - p))
                                          * m
            > (double) capacity * (1 + 1e-9))
        {
            return n;
        }
    }
}


int
main(void)
{
    size_t               i;
    int                  bad, c;
    double               mean, sd, p, k;
    int64_t              got;
    llm_capacity_plan_t  plans[3];

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        got = llm_capacity_with_headroom(cases[i].capacity, cases[i].plan,
                                         cases[i].p, cases[i].k);

        if (cases[i].want == 9223372036854775807LL) {
            tap_ok(got > 1000000000000000000LL, "%s: %lld", cases[i].name,
                   (long long) got);
            continue;
        }

        tap_is(got, cases[i].want, "%s", cases[i].name);
    }

    tap_is(llm_capacity_by_mean(1200000, 60000, 0.08), 250,
           "by_mean is headroom 0");

    /* the oversell: 12.5 times, and 6.6 with headroom */
    tap_ok(fabs(250.0 * 60000 / 1200000 - 12.5) < 1e-9, "250: 12.5 x");
    tap_ok(fabs(132.0 * 60000 / 1200000 - 6.6) < 1e-9, "132: 6.6 x");

    /* the load of 250 at p = 0.08: the capacity, sigma about 257,000 */
    plans[0] = (llm_capacity_plan_t) { 60000, 0.08, 250 };
    llm_capacity_load(plans, 1, &mean, &sd);
    tap_ok(fabs(mean - 1200000) < 1e-3, "250 tenants: a mean load of C");
    tap_ok(fabs(sd - sqrt(18.4) * 60000) < 1e-3 && (int) (sd / 1000) == 257,
           "and a sigma of about 257,000 (%.0f)", sd);

    /* plans add up as independent trials; idle and empty ones count 0 */
    plans[1] = (llm_capacity_plan_t) { 10000, 0.5, 40 };
    plans[2] = (llm_capacity_plan_t) { 600000, 0, 3 };
    llm_capacity_load(plans, 3, &mean, &sd);
    tap_ok(fabs(mean - (1200000 + 40 * 0.5 * 10000)) < 1e-3,
           "two plans: the means add");
    tap_ok(fabs(sd * sd - (250 * 0.08 * 0.92 * 60000.0 * 60000
                           + 40 * 0.25 * 10000.0 * 10000)) < 1,
           "and the variances");

    /* against counting, over a grid */
    bad = 0;
    c = 0;

    for (p = 0.01; p <= 1.0; p += 0.037) {
        for (k = 0; k <= 4; k += 0.5) {
            got = llm_capacity_with_headroom(1200000, 60000, p, k);
            bad += got != brute(1200000, 60000, p, k);
            c++;
        }
    }

    tap_is(bad, 0, "the root agrees with counting, %d cases", c);

    return tap_done();
}
