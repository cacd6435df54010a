
/*
 * mockllm_read.c: the body of an LLM request, read as the provider reads it.
 */

#ifndef _MOCKLLM_READ_H_INCLUDED_
#define _MOCKLLM_READ_H_INCLUDED_


#include "mockllm.h"


void mockllm_read(mockllm_conn_t *c, int api);


#endif /* _MOCKLLM_READ_H_INCLUDED_ */
