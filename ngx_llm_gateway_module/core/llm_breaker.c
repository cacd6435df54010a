
/*
 * A backend's circuit breaker that no one tenant can hold open
 * (llm_breaker.h says how).
 */


#include <string.h>

#include "llm_breaker.h"


static llm_breaker_tenant_t *llm_breaker_find(llm_breaker_t *br,
    int64_t tenant);
static llm_breaker_tenant_t *llm_breaker_place(llm_breaker_t *br,
    const llm_breaker_conf_t *conf, int64_t tenant, int64_t now);
static void llm_breaker_window(int64_t now, int64_t wait, uint32_t rnd,
    int64_t *until, int64_t *told);


llm_breaker_state_e
llm_breaker_state(llm_breaker_t *br, const llm_breaker_conf_t *conf,
    int64_t tenant, int64_t now, int take, int *trials, int64_t taken,
    int64_t *until)
{
    int                    suspect, trial, own_trial, held;
    llm_breaker_tenant_t  *t;

    held = trials ? *trials : 0;

    *until = now;

    t = tenant ? llm_breaker_find(br, tenant) : NULL;

    if (br->trial_until != taken + conf->fail_timeout) {
        held &= ~LLM_BREAKER_TRIAL;
    }

    if (t == NULL || t->trial_until != taken + conf->fail_timeout) {
        held &= ~LLM_BREAKER_OWN_TRIAL;
    }

    if (trials) {
        *trials = held;
    }

    /* its failures may be what opened it: the others tell if it is back */
    suspect = (br->broken && tenant == br->opener)
              || (t && conf->failures && t->fails >= conf->failures);

    if (br->open_until > now) {
        if (!suspect) {
            br->others_ms = now;
        }

        *until = br->told_until;
        return LLM_BREAKER_OPEN;
    }

    own_trial = 0;

    if (t && conf->failures && t->fails >= conf->failures) {

        if (t->limited_until > now) {
            *until = t->told_until;
            return LLM_BREAKER_LIMITED;
        }

        if (held & LLM_BREAKER_OWN_TRIAL) {
            /* its own: on */

        } else if (t->trial_until > now) {
            *until = t->trial_until;
            return LLM_BREAKER_LIMITED;

        } else {
            own_trial = 1;
        }
    }

    trial = 0;

    if (br->broken && !(held & LLM_BREAKER_TRIAL)) {

        if (br->trial_until > now) {
            if (!suspect) {
                br->others_ms = now;
            }

            *until = br->trial_until;
            return LLM_BREAKER_OPEN;
        }

        if (suspect && br->others_ms
            && now - br->others_ms < conf->fail_timeout)
        {
            *until = br->others_ms + conf->fail_timeout;
            return LLM_BREAKER_OPEN;
        }

        if (!suspect) {
            br->others_ms = now;
        }

        trial = 1;
    }

    if (take && trials) {
        if (trial) {
            br->trial_until = now + conf->fail_timeout;
            *trials |= LLM_BREAKER_TRIAL;
        }

        if (own_trial) {
            t->trial_until = now + conf->fail_timeout;
            *trials |= LLM_BREAKER_OWN_TRIAL;
        }
    }

    return LLM_BREAKER_UP;
}


void
llm_breaker_result(llm_breaker_t *br, const llm_breaker_conf_t *conf,
    int64_t tenant, llm_breaker_result_e res, int took, int64_t taken,
    int64_t wait, uint32_t rnd, int64_t now)
{
    llm_breaker_tenant_t  *t;

    t = tenant ? llm_breaker_find(br, tenant) : NULL;

    if (res == LLM_BREAKER_OK) {
        if (t) {
            memset(t, 0, sizeof(llm_breaker_tenant_t));
        }

        br->fails = 0;
        br->tenants = 0;
        br->own = 0;
        br->run++;
        br->broken = 0;
        br->trial_until = 0;
        return;
    }

    if (wait < conf->fail_timeout) {
        wait = conf->fail_timeout;
    }

    if (res != LLM_BREAKER_BACKEND && tenant) {

        if (t == NULL) {
            t = llm_breaker_place(br, conf, tenant, now);
        }

        t->fails++;
        t->last_ms = now;
        t->trial_until = 0;

        if (conf->failures && t->fails >= conf->failures) {
            if (t->limited_until <= now) {
                br->limited++;
            }

            llm_breaker_window(now, wait, rnd, &t->limited_until,
                               &t->told_until);
        }
    }

    if (res == LLM_BREAKER_TENANT_ONLY) {
        /* no verdict on the backend: its trial is the next request's */
        llm_breaker_untried(br, conf, 0, took & LLM_BREAKER_TRIAL, taken);
        return;
    }

    br->fails++;

    if (res == LLM_BREAKER_BACKEND) {
        br->own++;

    } else if (t == NULL) {
        br->tenants++;

    } else if (t->run != br->run) {
        t->run = br->run;
        br->tenants++;
    }

    if (br->broken
        || (conf->failures && br->fails >= conf->failures
            && (br->tenants >= 2 || br->own)))
    {
        if (br->open_until <= now) {
            br->opened++;
        }

        llm_breaker_window(now, wait, rnd >> 16 | rnd << 16,
                           &br->open_until, &br->told_until);
        br->trial_until = 0;
        br->opener = (res == LLM_BREAKER_BACKEND) ? 0 : tenant;
        br->others_ms = 0;
        br->broken = 1;
    }
}


void
llm_breaker_untried(llm_breaker_t *br, const llm_breaker_conf_t *conf,
    int64_t tenant, int took, int64_t taken)
{
    llm_breaker_tenant_t  *t;

    /* a trial is its holder's while it is the one taken at taken */
    if ((took & LLM_BREAKER_TRIAL)
        && br->trial_until == taken + conf->fail_timeout)
    {
        br->trial_until = 0;
    }

    if ((took & LLM_BREAKER_OWN_TRIAL) && tenant) {
        t = llm_breaker_find(br, tenant);

        if (t && t->trial_until == taken + conf->fail_timeout) {
            t->trial_until = 0;
        }
    }
}


int
llm_breaker_open(const llm_breaker_t *br, int64_t now)
{
    return br->open_until > now || br->broken;
}


static llm_breaker_tenant_t *
llm_breaker_find(llm_breaker_t *br, int64_t tenant)
{
    size_t  i;

    for (i = 0; i < LLM_BREAKER_TENANTS; i++) {
        if (br->tenant[i].tenant == tenant) {
            return &br->tenant[i];
        }
    }

    return NULL;
}


/*
 * A place for a tenant's first failure: a free one, else the stalest of
 * those not limited, else the stalest.  A tenant pushed out forgets its
 * count: with more failing tenants than places, the backend's run has
 * them all, and opens as for any backend that fails for many.
 */

static llm_breaker_tenant_t *
llm_breaker_place(llm_breaker_t *br, const llm_breaker_conf_t *conf,
    int64_t tenant, int64_t now)
{
    size_t                 i;
    llm_breaker_tenant_t  *t, *free, *idle, *any;

    free = NULL;
    idle = NULL;
    any = NULL;

    for (i = 0; i < LLM_BREAKER_TENANTS; i++) {
        t = &br->tenant[i];

        if (t->tenant == 0) {
            free = t;
            break;
        }

        if (any == NULL || t->last_ms < any->last_ms) {
            any = t;
        }

        if ((conf->failures == 0 || t->fails < conf->failures
             || t->limited_until <= now)
            && (idle == NULL || t->last_ms < idle->last_ms))
        {
            idle = t;
        }
    }

    t = free ? free : (idle ? idle : any);

    memset(t, 0, sizeof(llm_breaker_tenant_t));
    t->tenant = tenant;

    /* not in the run yet */
    t->run = br->run - 1;

    return t;
}


/*
 * An opening: the wait and a random part of up to a quarter of it more;
 * told, the window's end.
 */

static void
llm_breaker_window(int64_t now, int64_t wait, uint32_t rnd, int64_t *until,
    int64_t *told)
{
    int64_t  span;

    span = wait / 4;

    *until = now + wait + (span ? (int64_t) (rnd % (uint64_t) (span + 1)) : 0);
    *told = now + wait + span;
}
