
/*
 * mockllm_timer.c: the timers of a loop, in a heap by deadline.
 */

#ifndef _MOCKLLM_TIMER_H_INCLUDED_
#define _MOCKLLM_TIMER_H_INCLUDED_


#include "mockllm.h"


uint64_t mockllm_timer_now(void);
void mockllm_timer_set(mockllm_conn_t *c, int64_t ms);
void mockllm_timer_next(mockllm_conn_t *c, int64_t ms);
void mockllm_timer_del(mockllm_conn_t *c);


#endif /* _MOCKLLM_TIMER_H_INCLUDED_ */
