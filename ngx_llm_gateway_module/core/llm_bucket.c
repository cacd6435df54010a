
/*
 * Token bucket in exact integer arithmetic; see llm_bucket.h.
 */


#include "llm_bucket.h"


static int64_t
llm_bucket_full(const llm_bucket_conf_t *cf)
{
    return cf->burst * LLM_BUCKET_SCALE;
}


void
llm_bucket_init(llm_bucket_t *b, const llm_bucket_conf_t *cf, int64_t now_ms)
{
    b->level = llm_bucket_full(cf);
    b->last_ms = now_ms;
}


void
llm_bucket_refill(llm_bucket_t *b, const llm_bucket_conf_t *cf,
    int64_t now_ms)
{
    int64_t  full, need, elapsed;

    /* a clock that steps back refills nothing and keeps the later mark */
    if (now_ms <= b->last_ms) {
        return;
    }

    elapsed = now_ms - b->last_ms;
    b->last_ms = now_ms;

    full = llm_bucket_full(cf);

    if (b->level >= full) {
        b->level = full;
        return;
    }

    need = full - b->level;

    /* elapsed * rate could overflow after a long idle time: compare first */
    if (elapsed >= (need + cf->rate - 1) / cf->rate) {
        b->level = full;

    } else {
        b->level += elapsed * cf->rate;
    }
}


llm_bucket_rc_e
llm_bucket_reserve(llm_bucket_t *b, const llm_bucket_conf_t *cf, int64_t cost,
    int64_t now_ms, int64_t *wait_ms)
{
    int64_t  scaled;

    *wait_ms = 0;

    if (cost > cf->burst) {
        return LLM_BUCKET_NEVER;
    }

    llm_bucket_refill(b, cf, now_ms);

    scaled = cost * LLM_BUCKET_SCALE;

    if (b->level >= scaled) {
        b->level -= scaled;
        return LLM_BUCKET_OK;
    }

    /* (c - b) / r, with r in units per millisecond, rounded up */
    *wait_ms = (scaled - b->level + cf->rate - 1) / cf->rate;

    return LLM_BUCKET_WAIT;
}


void
llm_bucket_settle(llm_bucket_t *b, const llm_bucket_conf_t *cf,
    int64_t reserved, int64_t used, int64_t now_ms)
{
    int64_t  full;

    llm_bucket_refill(b, cf, now_ms);

    full = llm_bucket_full(cf);

    /* both are at most LLM_BUCKET_MAX, so the product cannot overflow */
    b->level += (reserved - used) * LLM_BUCKET_SCALE;

    if (b->level > full) {
        b->level = full;

    } else if (b->level < -full) {
        b->level = -full;
    }
}


int64_t
llm_bucket_available(const llm_bucket_t *b)
{
    return b->level > 0 ? b->level / LLM_BUCKET_SCALE : 0;
}


int64_t
llm_bucket_full_in(const llm_bucket_t *b, const llm_bucket_conf_t *cf)
{
    int64_t  need;

    need = llm_bucket_full(cf) - b->level;

    return need > 0 ? (need + cf->rate - 1) / cf->rate : 0;
}


int64_t
llm_bucket_seconds(int64_t ms)
{
    return ms > 0 ? (ms + 999) / 1000 : 0;
}


void
llm_bucket_tenant_init(llm_tenant_t *t, const llm_limits_t *l, int64_t now_ms)
{
    if (l->rpm.rate) {
        llm_bucket_init(&t->rpm, &l->rpm, now_ms);

    } else {
        t->rpm.level = 0;
        t->rpm.last_ms = now_ms;
    }

    llm_bucket_init(&t->tpm, &l->tpm, now_ms);

    /* made full when first needed: a zone may get its capacity later */
    t->soft.level = 0;
    t->soft.last_ms = -1;

    t->inflight = 0;
}


/* how long until the bucket holds cost, without taking it; 0: it does */

static int64_t
llm_bucket_wait(llm_bucket_t *b, const llm_bucket_conf_t *cf, int64_t cost,
    int64_t now_ms)
{
    int64_t  scaled;

    llm_bucket_refill(b, cf, now_ms);

    scaled = cost * LLM_BUCKET_SCALE;

    if (b->level >= scaled) {
        return 0;
    }

    return (scaled - b->level + cf->rate - 1) / cf->rate;
}


llm_bucket_rc_e
llm_bucket_admit(llm_tenant_t *t, const llm_limits_t *l, int64_t cost,
    int64_t now_ms, llm_admit_t *out)
{
    int      soft;
    int64_t  wr, wt, ws;

    out->rc = LLM_BUCKET_OK;
    out->limit = LLM_LIMIT_NONE;
    out->wait_ms = 0;
    out->soft = 0;

    if (cost > l->tpm.burst) {
        out->rc = LLM_BUCKET_NEVER;
        out->limit = LLM_LIMIT_TOKENS;
        return out->rc;
    }

    wr = l->rpm.rate ? llm_bucket_wait(&t->rpm, &l->rpm, 1, now_ms) : 0;
    wt = llm_bucket_wait(&t->tpm, &l->tpm, cost, now_ms);

    soft = 0;

    if (wt && l->soft.rate && cost <= l->soft.burst) {
        if (t->soft.last_ms == -1) {
            llm_bucket_init(&t->soft, &l->soft, now_ms);
        }

        ws = llm_bucket_wait(&t->soft, &l->soft, cost, now_ms);

        if (ws == 0) {
            soft = 1;
            wt = 0;

        } else if (ws < wt) {
            wt = ws;
        }
    }

    if (wr || wt) {
        out->rc = LLM_BUCKET_WAIT;
        out->limit = (wr > wt) ? LLM_LIMIT_REQUESTS : LLM_LIMIT_TOKENS;
        out->wait_ms = (wr > wt) ? wr : wt;
        return out->rc;
    }

    if (l->concurrency && t->inflight >= l->concurrency) {
        out->rc = LLM_BUCKET_WAIT;
        out->limit = LLM_LIMIT_CONCURRENCY;
        out->wait_ms = 1000;
        return out->rc;
    }

    if (l->rpm.rate) {
        t->rpm.level -= LLM_BUCKET_SCALE;
    }

    if (soft) {
        t->soft.level -= cost * LLM_BUCKET_SCALE;
        out->soft = 1;

    } else {
        t->tpm.level -= cost * LLM_BUCKET_SCALE;
    }

    t->inflight++;

    return LLM_BUCKET_OK;
}


void
llm_bucket_release(llm_tenant_t *t, const llm_limits_t *l, int64_t reserved,
    int64_t used, int64_t now_ms)
{
    llm_bucket_release_from(t, l, 0, reserved, used, now_ms);
}


void
llm_bucket_release_from(llm_tenant_t *t, const llm_limits_t *l, int soft,
    int64_t reserved, int64_t used, int64_t now_ms)
{
    /* a soft quota gone since (a reload): the TPM bucket takes it */
    if (soft && l->soft.rate && t->soft.last_ms != -1) {
        llm_bucket_settle(&t->soft, &l->soft, reserved, used, now_ms);

    } else {
        llm_bucket_settle(&t->tpm, &l->tpm, reserved, used, now_ms);
    }

    if (t->inflight > 0) {
        t->inflight--;
    }
}
