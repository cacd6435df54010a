
/*
 * The settlement rule: what a response's parser saw (llm_sse.h), and what
 * the request asked for, turned into the figures it is recorded at.  Plain
 * C, no nginx types.
 */

#ifndef _LLM_SETTLE_H_INCLUDED_
#define _LLM_SETTLE_H_INCLUDED_


#include <stdint.h>

#include "llm_sse.h"


/*
 * The gateway's count of the output: the larger of the delta events that
 * carried text and ceil(text bytes / 4), and never less than the
 * upstream's own (cumulative) figure.
 */
uint64_t llm_settle_output_estimate(const llm_usage_t *u);


/* how a response ended */
typedef enum {
    LLM_END_CLEAN = 0,           /* as its protocol says */
    LLM_END_CLIENT_CLOSED,       /* the client went away first */
    LLM_END_UPSTREAM_ERROR,      /* the upstream died, reset, stalled or
                                    sent an in-band error */
    LLM_END_UNREADABLE           /* the body could not be read (encoded,
                                    larger than the buffer, on disk) */
} llm_end_e;


typedef struct {
    uint64_t      prompt_estimate;   /* the admission estimate */
    uint64_t      max_tokens;        /* the most it can produce: n times
                                        its output limit */
    uint64_t      prompt_bound;      /* the most its prompt can be; 0: no
                                        bound */
    unsigned      hold_prompt:1;     /* a figure above prompt_bound is held
                                        to it, not only flagged */
    unsigned      upstream_ok:1;     /* the upstream answered 2xx */
    llm_end_e     end;
} llm_settle_in_t;


typedef struct {
    uint64_t      input_tokens;
    uint64_t      output_tokens;
    uint64_t      cached_input_tokens;
    uint64_t      cache_write_tokens;
    uint64_t      reasoning_tokens;
    uint32_t      flags;             /* LLM_REC_F_* */
    const char   *finish_reason;     /* NUL-terminated; "" if none */
} llm_settle_t;


/*
 * The rule:
 *
 *   - the upstream refused or failed (not 2xx) and sent no usage: nothing;
 *   - the body could not be read: the reservation, prompt estimate plus
 *     max_tokens, stands in full;
 *   - the final usage was seen: the upstream's figures;
 *   - otherwise: the prompt as the upstream reported it, or the admission
 *     estimate, plus llm_settle_output_estimate() held to max_tokens (an
 *     output figure the upstream reported stands), flagged estimated.
 *
 * A response that did not end cleanly is flagged partial, and its finish
 * reason is client_closed or upstream_error unless the final usage came.
 * A figure that is not a number counts as no usage.  Whatever the upstream
 * said, the output is held to max_tokens (no model makes more), flagged
 * LLM_REC_F_BOUND.  A prompt above prompt_bound is flagged too, and held
 * to it with hold_prompt (a spend cap reserved that bound): the bound of a
 * prompt with images or stored context is a configured worst case, which
 * a provider's bill may pass.
 */
void llm_settle_usage(const llm_usage_t *u, const llm_settle_in_t *in,
    llm_settle_t *out);


#endif /* _LLM_SETTLE_H_INCLUDED_ */
