
/*
 * The token bucket against a fake clock: a worked refill and admission
 * walkthrough, and the edges of the arithmetic.
 */


#include "llm_bucket.h"
#include "tap.h"


static void
test_walkthrough(void)
{
    int                 i, ok;
    int64_t             wait, now;
    llm_bucket_t        b;
    llm_bucket_conf_t   cf = { 60000, 90000 };    /* r = 1,000 tokens/s */

    now = 1000000;
    llm_bucket_init(&b, &cf, now);

    /* requests of 2,000 in + 6,000 max_tokens reserve 8,000: 11 fit */
    ok = 0;
    for (i = 0; i < 11; i++) {
        ok += llm_bucket_reserve(&b, &cf, 8000, now, &wait) == LLM_BUCKET_OK;
    }

    tap_is(ok, 11, "eleven reservations of 8,000 fit in 90,000");
    tap_is(llm_bucket_available(&b), 2000, "2,000 tokens left");

    /* R12 arrives 200 ms later: 2,200 left, short by 5,800 */
    now += 200;

    tap_is(llm_bucket_reserve(&b, &cf, 8000, now, &wait), LLM_BUCKET_WAIT,
           "R12 must wait");
    tap_is(wait, 5800, "exactly 5,800 ms");
    tap_is(llm_bucket_seconds(wait), 6, "Retry-After 6 (5.8 rounded up)");
    tap_is(llm_bucket_available(&b), 2200, "a refused request takes nothing");

    /* R1 finishes with 1,500 out of 6,000: 4,500 come back */
    llm_bucket_settle(&b, &cf, 8000, 3500, now);
    tap_is(llm_bucket_available(&b), 6700, "refund of 4,500");

    now += 1299;
    tap_is(llm_bucket_reserve(&b, &cf, 8000, now, &wait), LLM_BUCKET_WAIT,
           "1 ms early is still too early");
    tap_is(wait, 1, "by exactly 1 ms");

    now += 1;
    tap_is(llm_bucket_reserve(&b, &cf, 8000, now, &wait), LLM_BUCKET_OK,
           "R12's retry passes on time");
    tap_is(llm_bucket_available(&b), 0, "bucket empty");
}


static void
test_edges(void)
{
    int64_t             wait;
    llm_bucket_t        b;
    llm_bucket_conf_t   cf = { 7, 100 };          /* 7 tokens a minute */

    llm_bucket_init(&b, &cf, 0);

    tap_is(llm_bucket_reserve(&b, &cf, 101, 0, &wait), LLM_BUCKET_NEVER,
           "a cost above the capacity can never be admitted");
    tap_is(wait, 0, "and has no wait");

    tap_is(llm_bucket_reserve(&b, &cf, 100, 0, &wait), LLM_BUCKET_OK,
           "the whole capacity at once");

    /* one token at 7 per minute: 60000/7 ms = 8571.43, rounded up */
    tap_is(llm_bucket_reserve(&b, &cf, 1, 0, &wait), LLM_BUCKET_WAIT,
           "empty");
    tap_is(wait, 8572, "fractional refill rounds the wait up");
    tap_is(llm_bucket_reserve(&b, &cf, 1, 8571, &wait), LLM_BUCKET_WAIT,
           "8571 ms is not enough");
    tap_is(llm_bucket_reserve(&b, &cf, 1, 8572, &wait), LLM_BUCKET_OK,
           "8572 ms is");

    /* the clock stepping back neither refills nor breaks anything */
    llm_bucket_refill(&b, &cf, 10);
    tap_is(b.last_ms, 8572, "a clock stepping back keeps the later mark");

    /* a very long idle time fills the bucket without overflow */
    llm_bucket_refill(&b, &cf, INT64_MAX / 2);
    tap_is(llm_bucket_available(&b), 100, "long idle: full, no overflow");
    tap_is(llm_bucket_full_in(&b, &cf), 0, "full now");
}


static void
test_settle(void)
{
    int64_t             wait;
    llm_bucket_t        b;
    llm_bucket_conf_t   cf = { 600, 1000 };       /* 10 tokens a second */

    llm_bucket_init(&b, &cf, 0);

    llm_bucket_reserve(&b, &cf, 500, 0, &wait);
    llm_bucket_settle(&b, &cf, 500, 900, 0);
    tap_is(llm_bucket_available(&b), 100, "usage above the reservation "
           "is charged");

    llm_bucket_reserve(&b, &cf, 100, 0, &wait);
    llm_bucket_settle(&b, &cf, 100, 400, 0);
    tap_is(llm_bucket_available(&b), 0, "debt shows as nothing available");
    tap_is(llm_bucket_reserve(&b, &cf, 10, 0, &wait), LLM_BUCKET_WAIT,
           "debt must be paid back first");
    tap_is(wait, 31000, "300 of debt plus 10 at 10/s: 31 s");

    llm_bucket_settle(&b, &cf, 0, 5000, 0);
    tap_is(b.level, -1000LL * LLM_BUCKET_SCALE, "debt floored at the "
           "capacity");

    llm_bucket_settle(&b, &cf, 5000, 0, 0);
    tap_is(llm_bucket_available(&b), 1000, "refund capped at the capacity");
    tap_is(llm_bucket_full_in(&b, &cf), 0, "full");

    llm_bucket_reserve(&b, &cf, 1, 0, &wait);
    tap_is(llm_bucket_full_in(&b, &cf), 100, "one token is 100 ms");
}


/* RPM 500 and TPM 60,000 cross at 120 tokens a request */

static void
test_admit(void)
{
    int            i, ok;
    int64_t        now;
    llm_admit_t    a;
    llm_tenant_t   t;
    llm_limits_t   l = { { 500, 500 }, { 60000, 60000 }, { 0, 0 }, 0 };

    now = 0;
    llm_bucket_tenant_init(&t, &l, now);

    /* small requests: requests per minute bind first */
    ok = 0;
    for (i = 0; i < 600; i++) {
        ok += llm_bucket_admit(&t, &l, 100, now, &a) == LLM_BUCKET_OK;
    }

    tap_is(ok, 500, "100-token requests: RPM binds at 500");
    tap_is(a.limit, LLM_LIMIT_REQUESTS, "the refusal names requests");
    tap_is(a.wait_ms, 120, "one request refills in 120 ms");
    tap_is(llm_bucket_available(&t.tpm), 10000, "refused requests took no "
           "tokens");

    llm_bucket_tenant_init(&t, &l, now);

    /* large requests: tokens per minute bind first */
    ok = 0;
    for (i = 0; i < 600; i++) {
        ok += llm_bucket_admit(&t, &l, 1000, now, &a) == LLM_BUCKET_OK;
    }

    tap_is(ok, 60, "1,000-token requests: TPM binds at 60");
    tap_is(a.limit, LLM_LIMIT_TOKENS, "the refusal names tokens");
    tap_is(a.wait_ms, 1000, "1,000 tokens refill in 1 s");
    tap_is(llm_bucket_available(&t.rpm), 440, "refused requests took no "
           "request");

    tap_is(llm_bucket_admit(&t, &l, 60001, now, &a), LLM_BUCKET_NEVER,
           "above the capacity: never");

    /* concurrency: slots come back at release */
    l.concurrency = 2;
    llm_bucket_tenant_init(&t, &l, now);

    tap_is(llm_bucket_admit(&t, &l, 10, now, &a), LLM_BUCKET_OK, "slot 1");
    tap_is(llm_bucket_admit(&t, &l, 10, now, &a), LLM_BUCKET_OK, "slot 2");
    tap_is(llm_bucket_admit(&t, &l, 10, now, &a), LLM_BUCKET_WAIT, "no slot 3");
    tap_is(a.limit, LLM_LIMIT_CONCURRENCY, "the refusal names concurrency");
    tap_is(llm_bucket_available(&t.tpm), 59980, "and took nothing");

    llm_bucket_release(&t, &l, 10, 4, now);
    tap_is(t.inflight, 1, "a release frees a slot");
    tap_is(llm_bucket_available(&t.tpm), 59986, "and refunds 6 tokens");
    tap_is(llm_bucket_admit(&t, &l, 10, now, &a), LLM_BUCKET_OK,
           "slot 2 again");

    /* no RPM limit at all */
    l.rpm.rate = 0;
    l.concurrency = 0;
    llm_bucket_tenant_init(&t, &l, now);

    ok = 0;
    for (i = 0; i < 1000; i++) {
        ok += llm_bucket_admit(&t, &l, 1, now, &a) == LLM_BUCKET_OK;
    }

    tap_is(ok, 1000, "rpm 0: requests are not counted");
}


/*
 * A soft quota: tpm 60,000 a minute, burst 90,000; beyond the TPM bucket
 * the soft one refills at 30,000, so that the sustained rate is 90,000.
 */

static void
test_soft(void)
{
    int            i, ok, soft;
    int64_t        now, got;
    llm_admit_t    a;
    llm_tenant_t   t;
    llm_limits_t   l = { { 0, 0 }, { 60000, 90000 }, { 30000, 30000 }, 0 };

    now = 0;
    llm_bucket_tenant_init(&t, &l, now);

    ok = 0;
    soft = 0;

    for (i = 0; i < 200; i++) {
        ok += llm_bucket_admit(&t, &l, 1000, now, &a) == LLM_BUCKET_OK;
        soft += a.soft;
    }

    tap_is(ok, 120, "at once: the burst of 90, then 30 of the soft bucket");
    tap_is(soft, 30, "30 from the soft one");
    tap_is(a.limit, LLM_LIMIT_TOKENS, "then refused by tokens");
    tap_is(a.wait_ms, 1000, "the sooner of the two: 1 s for the TPM bucket");

    llm_bucket_release_from(&t, &l, 1, 1000, 400, now);
    tap_is(llm_bucket_available(&t.soft), 600, "a soft one settles with "
           "the soft bucket");
    tap_is(llm_bucket_available(&t.tpm), 0, "not the TPM one");

    /* 2,000 tokens a second, 120,000 a minute, for ten minutes */
    got = 0;

    for (now = 1000; now <= 600000; now += 1000) {
        if (llm_bucket_admit(&t, &l, 2000, now, &a) == LLM_BUCKET_OK) {
            got += 2000;
        }
    }

    tap_ok(got >= 900000 - 2000 && got <= 900000 + 90000 + 30000,
           "asking 120,000 a minute: 90,000 a minute, its burst (%lld in "
           "10 min)", (long long) got);

    /* without the soft bucket the tpm is hard */
    l.soft.rate = 0;
    l.soft.burst = 0;
    llm_bucket_tenant_init(&t, &l, 0);
    got = 0;

    for (now = 1000; now <= 600000; now += 1000) {
        if (llm_bucket_admit(&t, &l, 2000, now, &a) == LLM_BUCKET_OK) {
            got += 2000;
        }
    }

    tap_ok(got >= 600000 - 2000 && got <= 600000 + 90000,
           "hard: 60,000 a minute (%lld in 10 min)", (long long) got);
    tap_is(a.soft, 0, "none from a soft bucket");
}


int
main(void)
{
    test_walkthrough();
    test_edges();
    test_settle();
    test_admit();
    test_soft();

    return tap_done();
}
