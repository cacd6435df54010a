
/*
 * mockllm_limits.c: the limits of a real provider key.
 */

#ifndef _MOCKLLM_LIMITS_H_INCLUDED_
#define _MOCKLLM_LIMITS_H_INCLUDED_


#include "mockllm.h"


extern int       mockllm_limits_on;
/* what a request used, for the correction at its end: mockllm_llm_spent */
extern int64_t  (*mockllm_limits_spent)(mockllm_conn_t *c);

int mockllm_limits_init(int64_t rpm, int64_t tpm, int64_t quota,
    int64_t period, int64_t short_ms, int64_t inflight);
void mockllm_limits_arrive(mockllm_conn_t *c);
int mockllm_limits_admit(mockllm_conn_t *c, int64_t charge);
void mockllm_limits_end(mockllm_conn_t *c);
void mockllm_limits_head(mockllm_conn_t *c, mockllm_buf_t *b);
void mockllm_limits_json(mockllm_buf_t *b, int reset);
void mockllm_limits_set_inflight(int64_t n);
size_t mockllm_limits_duration(char *buf, size_t len, uint64_t ms);


#endif /* _MOCKLLM_LIMITS_H_INCLUDED_ */
