
/*
 * How far quotas can be oversold: see llm_capacity.h.
 */


#include <math.h>

#include "llm_capacity.h"


/* p = 0.08 is not a binary fraction: 250 x 0.08 x 60,000 is C, not above */
#define LLM_CAPACITY_SLACK  1e-9


static double llm_capacity_load_of(int64_t n, double m, double p, double k);
static int llm_capacity_fits(int64_t n, int64_t capacity, double m, double p,
    double k);


int64_t
llm_capacity_by_mean(int64_t capacity, int64_t plan_tpm, double p)
{
    return llm_capacity_with_headroom(capacity, plan_tpm, p, 0);
}


int64_t
llm_capacity_with_headroom(int64_t capacity, int64_t plan_tpm, double p,
    double k)
{
    double   a, b, x, m;
    int64_t  n;

    if (!(p > 0) || plan_tpm <= 0) {
        /* nobody uses anything, or a plan of nothing: no limit */
        return -1;
    }

    if (capacity <= 0) {
        return 0;
    }

    if (p > 1) {
        p = 1;
    }

    if (!(k >= 0)) {
        k = 0;
    }

    m = (double) plan_tpm;

    /* a x^2 + b x - C <= 0, x = sqrt(N) */
    a = p * m;
    b = k * sqrt(p * (1 - p)) * m;
    x = (-b + sqrt(b * b + 4 * a * (double) capacity)) / (2 * a);

    if (!(x * x < 9e18)) {
        return INT64_MAX;
    }

    n = (int64_t) (x * x);

    /* the root rounded: the integer itself decides */
    while (n > 0 && !llm_capacity_fits(n, capacity, m, p, k)) {
        n--;
    }

    while (n < INT64_MAX && llm_capacity_fits(n + 1, capacity, m, p, k)) {
        n++;
    }

    return n;
}


void
llm_capacity_load(const llm_capacity_plan_t *plans, size_t n, double *mean,
    double *sd)
{
    size_t  i;
    double  mu, var, m, p;

    mu = 0;
    var = 0;

    for (i = 0; i < n; i++) {
        m = (double) plans[i].plan_tpm;
        p = plans[i].p;

        if (!(p > 0) || plans[i].tenants <= 0 || m <= 0) {
            continue;
        }

        if (p > 1) {
            p = 1;
        }

        mu += (double) plans[i].tenants * p * m;
        var += (double) plans[i].tenants * p * (1 - p) * m * m;
    }

    *mean = mu;
    *sd = sqrt(var);
}


static double
llm_capacity_load_of(int64_t n, double m, double p, double k)
{
    return (double) n * p * m + k * sqrt((double) n * p * (1 - p)) * m;
}


static int
llm_capacity_fits(int64_t n, int64_t capacity, double m, double p, double k)
{
    return llm_capacity_load_of(n, m, p, k)
           <= (double) capacity * (1 + LLM_CAPACITY_SLACK);
}
