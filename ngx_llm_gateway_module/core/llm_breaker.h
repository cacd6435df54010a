
/*
 * A backend's circuit breaker that no one tenant can hold open.
 *
 * A request's failure is first its tenant's: each tenant that failed has
 * a count of its own failures in a row in a small table
 * (LLM_BREAKER_TENANTS), and a tenant whose count reaches the backend's
 * failures is limited, alone, for fail_timeout: its requests are refused
 * while those of the others go on.  After that it has one trial at a
 * time, as a half-open breaker would; a success of its own frees it.
 *
 * The backend's breaker counts the failures in a row of everyone (a
 * success of anyone ends the run), and opens when the run has reached
 * failures with at least two distinct tenants in it, or with a failure
 * no request could cause (the connection to the backend failed): a
 * provider that is down fails every tenant's requests, so the second
 * tenant that asks confirms it, while one tenant whose requests make the
 * provider fail, on purpose or not, cannot take the backend from the
 * others.  Tenants are accounts, made by the operator: a hostile client
 * cannot make a second one.
 *
 * A half-open breaker's trial is not given to the tenant whose failure
 * opened it, nor to one limited by its own failures, while another tenant
 * has asked within fail_timeout: the others' requests tell whether the
 * backend is back.
 *
 * Every opening, the backend's or a tenant's, lasts its wait (the longer
 * of fail_timeout and the provider's) and a random part of up to a
 * quarter of it more; what a refusal tells is the end of that window,
 * when it is certainly over, so that nobody can time the reopening from
 * a Retry-After, and no Retry-After is early.
 *
 * A failure can also be the tenant's only: the caller says so for an
 * upstream timeout of a long generation (the table holds the tenant's
 * count; the backend's run is left alone).
 *
 * Plain C, no nginx types, no allocation, no locks: the caller holds the
 * lock of the memory it lives in and gives the clock and a random number.
 */

#ifndef _LLM_BREAKER_H_INCLUDED_
#define _LLM_BREAKER_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


/* tenants with failures remembered; a new one takes the stalest place */
#define LLM_BREAKER_TENANTS   16

/* the trials a request took, as *took says */
#define LLM_BREAKER_TRIAL     1    /* the backend's half-open trial */
#define LLM_BREAKER_OWN_TRIAL 2    /* its tenant's */


typedef struct {
    uint32_t   failures;        /* in a row that open; 0: never */
    int64_t    fail_timeout;    /* ms */
} llm_breaker_conf_t;


typedef struct {
    int64_t    tenant;          /* 0: a free place */
    int64_t    last_ms;         /* its last failure */
    int64_t    limited_until;
    int64_t    told_until;      /* the end of the window, as told */
    int64_t    trial_until;
    uint32_t   fails;           /* its own, in a row */
    uint32_t   run;             /* the backend's run it last failed in */
} llm_breaker_tenant_t;


typedef struct {
    int64_t    open_until;
    int64_t    told_until;
    int64_t    trial_until;
    int64_t    opener;          /* whose failure opened it */
    int64_t    others_ms;       /* when another tenant last asked */
    uint32_t   fails;           /* everyone's, in a row */
    uint32_t   tenants;         /* distinct in the run */
    uint32_t   run;
    uint32_t   own;             /* failures of its own in the run */
    uint32_t   broken;          /* opened, not closed by a success since */
    uint32_t   padding;
    uint64_t   opened;          /* times it opened */
    uint64_t   limited;         /* times a tenant was limited */
    llm_breaker_tenant_t  tenant[LLM_BREAKER_TENANTS];
} llm_breaker_t;


typedef enum {
    LLM_BREAKER_UP = 0,
    LLM_BREAKER_OPEN,           /* out for everyone */
    LLM_BREAKER_LIMITED         /* out for this tenant: its own failures */
} llm_breaker_state_e;


typedef enum {
    LLM_BREAKER_OK = 0,
    LLM_BREAKER_FAILED,         /* the tenant's and the run's */
    LLM_BREAKER_TENANT_ONLY,    /* the tenant's: a long generation cut */
    LLM_BREAKER_BACKEND         /* no request caused it: the run's */
} llm_breaker_result_e;


/*
 * Whether tenant's request may go to the backend at now (ms).  *trials
 * (NULL: none): the trials the request holds already, taken at taken (a
 * trial is held while it is the one taken then: one another took after
 * its fail_timeout is not); take: it takes those free that it needs (the
 * backend's, its own), *trials then what it holds.  *until: when a
 * refusal ends, as told.
 */
llm_breaker_state_e llm_breaker_state(llm_breaker_t *br,
    const llm_breaker_conf_t *conf, int64_t tenant, int64_t now, int take,
    int *trials, int64_t taken, int64_t *until);

/*
 * What the backend did with tenant's request.  took: the trials it holds,
 * taken at taken (ms; a trial taken since by another after this one's
 * fail_timeout is not this one's to give back); wait: ms the provider
 * asked for (-1: none); rnd: any random number.
 */
void llm_breaker_result(llm_breaker_t *br, const llm_breaker_conf_t *conf,
    int64_t tenant, llm_breaker_result_e res, int took, int64_t taken,
    int64_t wait, uint32_t rnd, int64_t now);

/* trials taken by a request that never reached the backend: free again */
void llm_breaker_untried(llm_breaker_t *br, const llm_breaker_conf_t *conf,
    int64_t tenant, int took, int64_t taken);

/* out for everyone now, or half-open (until a success) */
int llm_breaker_open(const llm_breaker_t *br, int64_t now);


#endif /* _LLM_BREAKER_H_INCLUDED_ */
