
/*
 * mockllm_llm.c: the LLM endpoints and their responses.
 */

#ifndef _MOCKLLM_LLM_H_INCLUDED_
#define _MOCKLLM_LLM_H_INCLUDED_


#include "mockllm.h"


void mockllm_llm_handle(mockllm_conn_t *c);
void mockllm_llm_handle_bad(mockllm_conn_t *c);
void mockllm_llm_advance(mockllm_conn_t *c);
int64_t mockllm_llm_spent(mockllm_conn_t *c);


#endif /* _MOCKLLM_LLM_H_INCLUDED_ */
