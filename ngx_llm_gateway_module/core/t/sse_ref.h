
/*
 * The usage extractor as it was before its scans were made faster
 * (sse_ref.c, a verbatim copy of llm_sse.c), under other names: the
 * oracle test_sse_diff and fuzz_sse hold the fast one to.  Every
 * result, for every input and every split of it, must be the same.
 */

#ifndef _LLM_SSE_REF_H_INCLUDED_
#define _LLM_SSE_REF_H_INCLUDED_


#include "llm_sse.h"


void llm_sse_ref_init(llm_sse_t *p, llm_api_e api, char *buf, size_t cap);
size_t llm_sse_ref_feed(llm_sse_t *p, const char *data, size_t len);
int llm_sse_ref_filter(llm_sse_t *p, const char *data, size_t len,
    llm_sse_out_pt out, void *ctx);
int llm_sse_ref_filter_end(llm_sse_t *p, llm_sse_out_pt out, void *ctx,
    const char **closing);
const char *llm_sse_ref_closing(const llm_sse_t *p);
size_t llm_sse_ref_error_event(llm_api_e api, const char *message,
    char *buf, size_t cap);
void llm_sse_ref_finish(llm_sse_t *p);
int llm_sse_ref_pending(const llm_sse_t *p);
int llm_sse_ref_usage_from_json(llm_api_e api, const char *body, size_t len,
    llm_usage_t *u);
int llm_sse_ref_usage_from_tail(llm_api_e api, const char *tail, size_t len,
    llm_usage_t *u);
llm_sse_kind_e llm_sse_ref_kind(const char *s, size_t n);


#endif /* _LLM_SSE_REF_H_INCLUDED_ */
