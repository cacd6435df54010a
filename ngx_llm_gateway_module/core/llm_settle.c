
/*
 * The settlement rule; see llm_settle.h.
 */


#include <string.h>

#include "llm_settle.h"


#define llm_settle_max(a, b)      ((a) > (b) ? (a) : (b))


static uint64_t llm_usage_output_bound(const llm_usage_t *u,
    const llm_settle_in_t *in);
static void llm_usage_figures(const llm_usage_t *u,
    const llm_settle_in_t *in, llm_settle_t *out);


uint64_t
llm_settle_output_estimate(const llm_usage_t *u)
{
    uint64_t  n;

    n = u->delta_bytes / 4 + (u->delta_bytes % 4 != 0);
    n = llm_settle_max(n, u->delta_events);

    return llm_settle_max(n, u->output_tokens);
}


/*
 * The output counted, held to max_tokens: the upstream generates no more,
 * whatever ceil(bytes / 4) of the text says.  A figure the upstream
 * reported stands.
 */
static uint64_t
llm_usage_output_bound(const llm_usage_t *u, const llm_settle_in_t *in)
{
    uint64_t  n;

    n = llm_settle_output_estimate(u);

    if (in->max_tokens > 0 && n > in->max_tokens) {
        n = llm_settle_max(in->max_tokens, u->output_tokens);
    }

    return n;
}


void
llm_settle_usage(const llm_usage_t *u, const llm_settle_in_t *in,
    llm_settle_t *out)
{
    llm_usage_figures(u, in, out);

    if (in->max_tokens > 0 && out->output_tokens > in->max_tokens) {
        out->output_tokens = in->max_tokens;
        out->flags |= LLM_REC_F_BOUND;
    }

    if (out->reasoning_tokens > out->output_tokens) {
        out->reasoning_tokens = out->output_tokens;
    }

    if (in->prompt_bound > 0 && out->input_tokens > in->prompt_bound) {
        out->flags |= LLM_REC_F_BOUND;

        if (in->hold_prompt) {
            out->input_tokens = in->prompt_bound;
        }
    }

    if (out->cached_input_tokens > out->input_tokens) {
        out->cached_input_tokens = out->input_tokens;
    }

    if (out->cache_write_tokens > out->input_tokens - out->cached_input_tokens)
    {
        out->cache_write_tokens = out->input_tokens - out->cached_input_tokens;
    }
}


static void
llm_usage_figures(const llm_usage_t *u, const llm_settle_in_t *in,
    llm_settle_t *out)
{
    unsigned   whole;
    llm_end_e  end;

    memset(out, 0, sizeof(llm_settle_t));

    /* the upstream's own figures, whole: it reported the prompt too */
    whole = u->have_usage && u->have_input && !u->malformed;

    out->finish_reason = u->finish_reason;

    if (u->clamped) {
        out->flags |= LLM_REC_F_CLAMPED;
    }

    if (u->repeated) {
        out->flags |= LLM_REC_F_REPEATED;
    }

    if (u->truncated) {
        out->flags |= LLM_REC_F_OVERSIZE;
    }

    if (whole) {
        out->input_tokens = u->input_tokens;
        out->output_tokens = u->output_tokens;
        out->cached_input_tokens = u->cached_input_tokens;
        out->cache_write_tokens = u->cache_write_tokens;
        out->reasoning_tokens = u->reasoning_tokens;
    }

    if (!in->upstream_ok) {
        /* one that refused or failed processed nothing to charge */
        return;
    }

    end = in->end;

    if (end == LLM_END_CLEAN && (!u->done || u->error)) {
        end = LLM_END_UPSTREAM_ERROR;
    }

    if (end != LLM_END_CLEAN && end != LLM_END_UNREADABLE) {
        out->flags |= LLM_REC_F_PARTIAL;
    }

    if (whole) {
        return;
    }

    out->flags |= LLM_REC_F_ESTIMATED;

    if (end == LLM_END_UNREADABLE) {
        /* nothing the gateway cannot prove is refunded */
        out->input_tokens = llm_settle_max(in->prompt_estimate,
                                        u->have_input && !u->malformed
                                        ? u->input_tokens : 0);
        out->output_tokens = llm_settle_max(in->max_tokens,
                                         llm_usage_output_bound(u, in));
        return;
    }

    out->input_tokens = (u->have_input && !u->malformed) ? u->input_tokens
                                                         : in->prompt_estimate;
    out->cached_input_tokens = u->cached_input_tokens;
    out->cache_write_tokens = u->cache_write_tokens;
    out->output_tokens = llm_usage_output_bound(u, in);

    if (end == LLM_END_CLIENT_CLOSED) {
        out->finish_reason = "client_closed";

    } else if (end == LLM_END_UPSTREAM_ERROR) {
        out->finish_reason = "upstream_error";
    }
}
