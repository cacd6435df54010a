
/*
 * The breaker that no one tenant can hold open, on a fake clock and a
 * fake random number.
 */


#include <string.h>

#include "llm_breaker.h"
#include "tap.h"


#define A  101
#define B  202
#define C  303


static const llm_breaker_conf_t  conf = { 3, 10000 };


/* a request of tenant at now through the breaker: its state, its trials */
static llm_breaker_state_e
ask(llm_breaker_t *br, int64_t tenant, int64_t now, int *trials,
    int64_t *until)
{
    *trials = 0;

    return llm_breaker_state(br, &conf, tenant, now, 1, trials, now, until);
}


static void
fail(llm_breaker_t *br, int64_t tenant, llm_breaker_result_e res,
    int trials, uint32_t rnd, int64_t now)
{
    llm_breaker_result(br, &conf, tenant, res, trials, now, -1, rnd, now);
}


int
main(void)
{
    int             i, trials, t2, bad;
    int64_t         now, until, open_until;
    uint32_t        rnd;
    llm_breaker_t   br;

    /* one tenant failing alone is limited; the others are not */
    memset(&br, 0, sizeof(br));
    now = 1000000;

    for (i = 0; i < 3; i++) {
        tap_is(ask(&br, A, now, &trials, &until), LLM_BREAKER_UP,
               "A's request %d goes", i + 1);
        fail(&br, A, LLM_BREAKER_FAILED, trials, 0, now);
    }

    tap_is(ask(&br, A, now, &trials, &until), LLM_BREAKER_LIMITED,
           "A after 3 failures in a row: limited");
    tap_is(until, now + 10000 + 2500,
           "told the end of the window, fail_timeout and a quarter");
    tap_is(ask(&br, B, now, &trials, &until), LLM_BREAKER_UP,
           "B is served");
    tap_is(br.opened, 0, "the backend's breaker did not open");
    tap_is(br.limited, 1, "one tenant limited");

    /* A keeps failing between B's successes: never the backend */
    for (i = 0; i < 20; i++) {
        now += 13000;
        tap_ok(ask(&br, A, now, &trials, &until) == LLM_BREAKER_UP
               && trials == LLM_BREAKER_OWN_TRIAL,
               "A's limit over (%d): it takes its own trial", i);
        t2 = 0;
        tap_is(ask(&br, A, now, &t2, &until), LLM_BREAKER_LIMITED,
               "one at a time: A's next waits for it");
        fail(&br, A, LLM_BREAKER_FAILED, trials, (uint32_t) i * 977, now);

        (void) ask(&br, B, now, &t2, &until);
        llm_breaker_result(&br, &conf, B, LLM_BREAKER_OK, t2, now, -1, 0,
                           now);
    }

    tap_is(br.opened, 0, "after 20 more of A's: still never opened");
    tap_is(ask(&br, B, now, &trials, &until), LLM_BREAKER_UP, "B served");

    /* even in a row with nobody else succeeding, one tenant is not enough */
    memset(&br, 0, sizeof(br));

    for (i = 0; i < 10; i++) {
        fail(&br, A, LLM_BREAKER_FAILED, 0, 0, now);
    }

    tap_is(br.opened, 0, "10 failures in a row of A alone: not opened");
    tap_is(ask(&br, C, now, &trials, &until), LLM_BREAKER_UP, "C served");

    /* a second tenant's failure in the run opens it */
    fail(&br, B, LLM_BREAKER_FAILED, 0, 0, now);
    tap_is(br.opened, 1, "B's failure after A's in the run: opened");
    tap_is(ask(&br, C, now, &trials, &until), LLM_BREAKER_OPEN,
           "C finds it open");

    /* a success ends the run */
    memset(&br, 0, sizeof(br));
    fail(&br, A, LLM_BREAKER_FAILED, 0, 0, now);
    fail(&br, A, LLM_BREAKER_FAILED, 0, 0, now);
    llm_breaker_result(&br, &conf, C, LLM_BREAKER_OK, 0, now, -1, 0, now);
    fail(&br, B, LLM_BREAKER_FAILED, 0, 0, now);
    fail(&br, B, LLM_BREAKER_FAILED, 0, 0, now);
    tap_is(br.opened, 0, "two tenants, a success between their runs: closed");
    fail(&br, A, LLM_BREAKER_FAILED, 0, 0, now);
    tap_is(br.opened, 1, "three in a row of A and B: opened");

    /* a failure no request causes opens it alone */
    memset(&br, 0, sizeof(br));

    for (i = 0; i < 3; i++) {
        fail(&br, A, LLM_BREAKER_BACKEND, 0, 0, now);
    }

    tap_is(br.opened, 1, "3 connection failures of one tenant: opened");
    tap_is(ask(&br, A, now + 10000 + 2500, &trials, &until), LLM_BREAKER_UP,
           "its window over: half-open");
    tap_is(trials, LLM_BREAKER_TRIAL, "A, not blamed, takes the trial");

    /* a tenant's own timeouts of long generations: never the run's */
    memset(&br, 0, sizeof(br));

    for (i = 0; i < 3; i++) {
        fail(&br, A, LLM_BREAKER_TENANT_ONLY, 0, 0, now);
        fail(&br, B, LLM_BREAKER_TENANT_ONLY, 0, 0, now);
    }

    tap_is(br.fails, 0, "two tenants' long generations cut: not in the run");
    tap_is(br.opened, 0, "not opened");
    tap_is(ask(&br, A, now, &trials, &until), LLM_BREAKER_LIMITED,
           "A limited by them");
    tap_is(ask(&br, C, now, &trials, &until), LLM_BREAKER_UP, "C served");

    /* the half-open trial: not the opener's while others ask */
    memset(&br, 0, sizeof(br));
    fail(&br, B, LLM_BREAKER_FAILED, 0, 0, now);
    fail(&br, C, LLM_BREAKER_FAILED, 0, 0, now);
    fail(&br, A, LLM_BREAKER_FAILED, 0, 12345, now);
    tap_is(br.opened, 1, "A's failure opened it");

    open_until = br.open_until;
    tap_ok(open_until >= now + 10000 && open_until <= now + 12500,
           "it reopens within the window");
    tap_is(ask(&br, B, now + 5000, &trials, &until), LLM_BREAKER_OPEN,
           "B asks while it is open");

    tap_is(ask(&br, A, open_until, &trials, &until), LLM_BREAKER_OPEN,
           "at the reopening to the ms, A does not get the trial");
    tap_ok(until > open_until, "and is told to come later");
    tap_is(ask(&br, B, open_until + 1, &trials, &until), LLM_BREAKER_UP,
           "B gets it");
    tap_is(trials, LLM_BREAKER_TRIAL, "as the trial");
    tap_is(ask(&br, A, open_until + 2, &t2, &until), LLM_BREAKER_OPEN,
           "one trial at a time");

    llm_breaker_result(&br, &conf, B, LLM_BREAKER_OK, trials, open_until + 1,
                       -1, 0, open_until + 50);
    tap_is(llm_breaker_open(&br, open_until + 50), 0, "B's trial closed it");

    /* with nobody else asking, the opener gets it after fail_timeout */
    memset(&br, 0, sizeof(br));
    fail(&br, B, LLM_BREAKER_FAILED, 0, 0, now);
    fail(&br, C, LLM_BREAKER_FAILED, 0, 0, now);
    fail(&br, A, LLM_BREAKER_FAILED, 0, 0, now);
    tap_is(ask(&br, A, br.open_until, &trials, &until), LLM_BREAKER_UP,
           "nobody else asked: the opener has the trial");

    /* a trial that never reached the backend is free again */
    llm_breaker_untried(&br, &conf, A, trials, br.open_until);
    tap_is(ask(&br, B, br.open_until, &trials, &until), LLM_BREAKER_UP,
           "given back: B takes it");
    tap_is(trials, LLM_BREAKER_TRIAL, "as the trial");

    /* not given back by a holder whose fail_timeout passed */
    t2 = trials;
    tap_is(ask(&br, C, br.open_until + 10000, &trials, &until),
           LLM_BREAKER_UP, "B's trial outlived fail_timeout: C takes it");
    llm_breaker_untried(&br, &conf, B, t2, br.open_until);
    tap_is(ask(&br, A, br.open_until + 10001, &t2, &until), LLM_BREAKER_OPEN,
           "B giving back its old trial does not free C's");
    trials = LLM_BREAKER_TRIAL;

    /* a trial held is honoured when asked again */
    t2 = trials;
    tap_is(llm_breaker_state(&br, &conf, B, br.open_until + 10002, 0, &t2,
                             br.open_until + 10000, &until),
           LLM_BREAKER_UP, "C, holding the trial, goes when asked again");
    t2 = LLM_BREAKER_TRIAL;
    tap_is(llm_breaker_state(&br, &conf, B, br.open_until + 10002, 0, &t2,
                             br.open_until, &until),
           LLM_BREAKER_OPEN, "B, holding the old one, does not");
    tap_is(t2, 0, "and is told it holds none");

    /* jitter: reopenings spread over the window, told its end */
    bad = 0;
    open_until = -1;

    for (rnd = 0; rnd < 5000; rnd += 7) {
        memset(&br, 0, sizeof(br));
        fail(&br, B, LLM_BREAKER_FAILED, 0, rnd, now);
        fail(&br, C, LLM_BREAKER_FAILED, 0, rnd, now);
        fail(&br, A, LLM_BREAKER_FAILED, 0, rnd * 2654435761u, now);

        if (br.open_until < now + 10000 || br.open_until > now + 12500
            || br.told_until != now + 12500)
        {
            bad++;
        }

        if (br.open_until != open_until) {
            open_until = br.open_until;
            i++;
        }
    }

    tap_is(bad, 0, "every reopening in [10 s, 12.5 s], told 12.5 s");
    tap_ok(i > 100, "and they vary (%d changes)", i);

    /* the table: more failing tenants than places */
    memset(&br, 0, sizeof(br));

    for (i = 0; i < 3 * LLM_BREAKER_TENANTS; i++) {
        llm_breaker_result(&br, &conf, 1000 + i, LLM_BREAKER_TENANT_ONLY, 0,
                           now + i, -1, 0, now + i);
    }

    for (i = 0; i < 3; i++) {
        fail(&br, A, LLM_BREAKER_TENANT_ONLY, 0, 0, now + 100);
    }

    tap_is(ask(&br, A, now + 100, &trials, &until), LLM_BREAKER_LIMITED,
           "a full table still counts a new tenant");

    return tap_done();
}
