
/*
 * How far quotas can be oversold.
 *
 * A capacity of C tokens a minute sells C / M plans of M TPM if every
 * tenant always used all of its plan.  They do not: measured, a tenant
 * uses a fraction p of its plan on average.  Each tenant is modelled,
 * roughly, as a Bernoulli trial: all of its plan with probability p,
 * nothing otherwise.  N tenants then load the capacity with
 *
 *     mu = N p M,        sigma = sqrt(N p (1 - p)) M
 *
 * By the mean alone N = C / (p M); with k sigma of headroom, the largest
 * N with N p M + k sqrt(N p (1 - p)) M <= C, a quadratic in sqrt(N).
 * The source's example: C = 1,200,000, M = 60,000, p = 0.08 gives 250 by
 * the mean and 132 with 3 sigma.
 *
 * The model is rough and says so: bursts are not independent (they come
 * at the same hours), load is not all or nothing, and p moves with time.
 * It gives the range to choose in, not the answer.  Statistics, not
 * money: doubles are fine here.  Plain C, no nginx types.
 */

#ifndef _LLM_CAPACITY_H_INCLUDED_
#define _LLM_CAPACITY_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


/* a plan sold, as measured */
typedef struct {
    int64_t    plan_tpm;         /* M */
    double     p;                /* mean utilisation of the plan, 0..1 */
    int64_t    tenants;          /* sold now */
} llm_capacity_plan_t;


/*
 * The tenants of a plan of plan_tpm the capacity supports if it sold that
 * plan alone, by the mean and with k sigma of headroom.  -1: without
 * limit (p is 0: nobody uses anything); 0 when not even one fits.
 */
int64_t llm_capacity_by_mean(int64_t capacity, int64_t plan_tpm, double p);
int64_t llm_capacity_with_headroom(int64_t capacity, int64_t plan_tpm,
    double p, double k);

/*
 * The load of the plans sold now, independent trials: its mean and its
 * standard deviation, tokens a minute.
 */
void llm_capacity_load(const llm_capacity_plan_t *plans, size_t n,
    double *mean, double *sd);


#endif /* _LLM_CAPACITY_H_INCLUDED_ */
