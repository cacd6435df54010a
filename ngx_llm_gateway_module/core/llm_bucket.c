
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
