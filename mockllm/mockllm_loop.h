
/*
 * mockllm_loop.c: the event loop of one thread.
 */

#ifndef _MOCKLLM_LOOP_H_INCLUDED_
#define _MOCKLLM_LOOP_H_INCLUDED_


#include "mockllm.h"


extern volatile int  mockllm_failed;

int mockllm_loop_init(mockllm_loop_t *loop, int lfd);
void *mockllm_loop_run(void *data);
int mockllm_loop_stop(mockllm_loop_t *loop);
void mockllm_loop_free(mockllm_loop_t *loop);


#endif /* _MOCKLLM_LOOP_H_INCLUDED_ */
