
/*
 * libFuzzer target for the breaker that no one tenant can hold open.
 * The input is read a byte at a time, 0 once it ends.  First the
 * configuration: failures (a byte, 0..7) and fail_timeout (a byte, in
 * units of 250 ms), then a program.  An op is its byte (bits 0-1 the op,
 * bits 2-3 the tenant, 1..4, bits 4-6 a request's place, bit 7 a flag)
 * and a byte more:
 *
 *     0   ask        at the place, taking trials if the flag is set; the
 *                    byte: a clock step (its value squared, ms)
 *     1   result     of the request at the place: the byte's bits 0-1
 *                    the result, its bits 2-7 the provider's wait (s;
 *                    0: none)
 *     2   untried    of the request at the place
 *     3   step       the clock, the byte x 100 ms
 *
 * The fuzzer keeps its own books: the tenants of the backend's run since
 * its last success, whether a failure of the backend's own is in it,
 * whether it is broken, the requests holding trials.  After every op:
 *
 *   - a refusal's end is later than now, and never before the window's;
 *   - the backend opens only for a run with two tenants in it, a failure
 *     of its own, or when it was broken already;
 *   - an opening lasts its wait and at most a quarter of it more, and is
 *     told its end;
 *   - two requests never hold the backend's trial, or one tenant's, in
 *     the same opening within fail_timeout.
 *
 * FUZZ_BREAKER_TRACE=1 in the environment prints each call.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm_breaker.h"


#define FUZZ_PLACES     8
#define FUZZ_NOW        1718020800000LL


typedef struct {
    int64_t     tenant;       /* 0: none here */
    int         trials;
    int64_t     taken_ms;
    uint64_t    gen;          /* the opening its backend trial is of */
    uint64_t    tgen;         /* its tenant's */
} fuzz_req_t;


typedef struct {
    llm_breaker_t        br;
    llm_breaker_conf_t   conf;
    int64_t              now;
    unsigned             run;         /* tenants in the run, bits */
    int                  own;
    int                  broken;
    uint64_t             gen;
    uint64_t             tgen[5];
    fuzz_req_t           req[FUZZ_PLACES];
    const uint8_t       *in;
    const uint8_t       *end;
} fuzz_t;


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


static fuzz_t  fuzz_a;
static int     fuzz_tracing = -1;


static unsigned
fuzz_take(fuzz_t *f)
{
    return f->in < f->end ? *f->in++ : 0;
}


static void
fuzz_fail(fuzz_t *f, const char *what)
{
    fprintf(stderr, "fuzz_breaker: at %lld: %s\n",
            (long long) (f->now - FUZZ_NOW), what);
    abort();
}


static int
fuzz_bits(unsigned v)
{
    int  n;

    for (n = 0; v; v &= v - 1) {
        n++;
    }

    return n;
}


static void
fuzz_ask(fuzz_t *f, fuzz_req_t *q, int64_t tenant, int take)
{
    int                   i, trials, took;
    int64_t               until;
    fuzz_req_t           *o;
    llm_breaker_state_e   s;

    trials = q->tenant == tenant ? q->trials : 0;

    /* as the module: trials are taken once, by a request holding none */
    take = take && trials == 0;

    s = llm_breaker_state(&f->br, &f->conf, tenant, f->now, take, &trials,
                          q->taken_ms, &until);
    took = q->tenant == tenant ? q->trials : 0;

    if (fuzz_tracing) {
        fprintf(stderr, "%lld ask %lld take %d: %d until %lld trials %d\n",
                (long long) (f->now - FUZZ_NOW), (long long) tenant, take,
                s, (long long) (until - f->now), trials);
    }

    if (s != LLM_BREAKER_UP && until <= f->now) {
        fuzz_fail(f, "a refusal that ends now");
    }

    if (s == LLM_BREAKER_OPEN && f->br.open_until > f->now
        && until < f->br.open_until)
    {
        fuzz_fail(f, "told to come back before the reopening");
    }

    if (s != LLM_BREAKER_UP) {
        return;
    }

    took = trials & ~took;

    if (q->tenant != tenant) {
        q->tenant = tenant;
        q->trials = 0;
    }

    for (i = 0; i < FUZZ_PLACES; i++) {
        o = &f->req[i];

        if (o == q || o->tenant == 0
            || o->taken_ms + f->conf.fail_timeout <= f->now)
        {
            continue;
        }

        if ((took & LLM_BREAKER_TRIAL) && (o->trials & LLM_BREAKER_TRIAL)
            && o->gen == f->gen)
        {
            fuzz_fail(f, "two holders of the backend's trial");
        }

        if ((took & LLM_BREAKER_OWN_TRIAL)
            && (o->trials & LLM_BREAKER_OWN_TRIAL) && o->tenant == tenant
            && o->tgen == f->tgen[tenant])
        {
            fuzz_fail(f, "two holders of a tenant's trial");
        }
    }

    if (took) {
        q->taken_ms = f->now;
        q->gen = f->gen;
        q->tgen = f->tgen[tenant];
    }

    q->trials = trials;
}


static void
fuzz_result(fuzz_t *f, fuzz_req_t *q, unsigned b)
{
    int64_t                wait, w, before;
    llm_breaker_result_e   res;

    if (q->tenant == 0) {
        return;
    }

    res = (llm_breaker_result_e) (b & 3);
    wait = (b >> 2) ? (int64_t) (b >> 2) * 1000 : -1;
    before = f->br.open_until;

    if (fuzz_tracing) {
        fprintf(stderr, "%lld result %lld: %d wait %lld\n",
                (long long) (f->now - FUZZ_NOW), (long long) q->tenant, res,
                (long long) wait);
    }

    llm_breaker_result(&f->br, &f->conf, q->tenant, res, q->trials,
                       q->taken_ms, wait, (uint32_t) rand(), f->now);

    if (res != LLM_BREAKER_BACKEND) {
        f->tgen[q->tenant]++;
    }

    if (res == LLM_BREAKER_OK) {
        f->run = 0;
        f->own = 0;
        f->broken = 0;
        f->gen++;

    } else if (res == LLM_BREAKER_FAILED) {
        f->run |= 1u << q->tenant;

    } else if (res == LLM_BREAKER_BACKEND) {
        f->own = 1;
    }

    if (res == LLM_BREAKER_OK || res == LLM_BREAKER_TENANT_ONLY) {
        if (f->br.open_until != before) {
            fuzz_fail(f, "opened by a success or a tenant's own failure");
        }

    } else if (f->br.open_until != before) {
        /* it opened, or opened again, just now */
        if (!f->broken && fuzz_bits(f->run) < 2 && !f->own) {
            fuzz_fail(f, "opened for one tenant");
        }

        if (f->conf.failures == 0) {
            fuzz_fail(f, "opened with failures=0");
        }

        w = wait > f->conf.fail_timeout ? wait : f->conf.fail_timeout;

        if (f->br.open_until < f->now + w
            || f->br.open_until > f->now + w + w / 4
            || f->br.told_until != f->now + w + w / 4)
        {
            fuzz_fail(f, "an opening outside its window");
        }

        f->broken = 1;
        f->gen++;
    }

    memset(q, 0, sizeof(fuzz_req_t));
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int        i;
    unsigned   b, v, op;
    int64_t    tenant;
    fuzz_t    *f;

    if (size < 2) {
        return 0;
    }

    if (fuzz_tracing < 0) {
        fuzz_tracing = getenv("FUZZ_BREAKER_TRACE") != NULL;
    }

    f = &fuzz_a;
    memset(f, 0, sizeof(fuzz_t));
    srand(size);

    f->conf.failures = data[0] & 7;
    f->conf.fail_timeout = (int64_t) data[1] * 250;
    f->now = FUZZ_NOW;
    f->in = data + 2;
    f->end = data + size;

    while (f->in < f->end) {
        b = fuzz_take(f);
        v = fuzz_take(f);
        op = b & 3;
        tenant = ((b >> 2) & 3) + 1;
        i = (b >> 4) & 7;

        switch (op) {

        case 0:
            f->now += (int64_t) v * v;
            fuzz_ask(f, &f->req[i], tenant, b >> 7);
            break;

        case 1:
            fuzz_result(f, &f->req[i], v);
            break;

        case 2:
            if (f->req[i].tenant) {
                llm_breaker_untried(&f->br, &f->conf, f->req[i].tenant,
                                    f->req[i].trials, f->req[i].taken_ms);
                memset(&f->req[i], 0, sizeof(fuzz_req_t));
            }

            break;

        default:
            f->now += (int64_t) v * 100;
        }

        for (i = 0; i < LLM_BREAKER_TENANTS; i++) {
            if (f->br.tenant[i].tenant
                && f->br.tenant[i].told_until
                   < f->br.tenant[i].limited_until)
            {
                fuzz_fail(f, "a tenant told less than its limit");
            }
        }

        if (f->br.told_until < f->br.open_until) {
            fuzz_fail(f, "told less than the opening");
        }
    }

    return 0;
}
