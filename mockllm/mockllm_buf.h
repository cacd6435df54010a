
/*
 * mockllm_buf.c: growable buffers and their appends.
 */

#ifndef _MOCKLLM_BUF_H_INCLUDED_
#define _MOCKLLM_BUF_H_INCLUDED_


#include "mockllm.h"


void mockllm_buf_reserve(mockllm_buf_t *b, size_t n);
void mockllm_buf_add(mockllm_buf_t *b, const void *p, size_t n);
void mockllm_buf_add_num(mockllm_buf_t *b, uint64_t v);
void mockllm_buf_add_json(mockllm_buf_t *b, const char *s, size_t n);
void mockllm_buf_shrink(mockllm_buf_t *b);
void mockllm_buf_free(mockllm_buf_t *b);

#define mockllm_buf_adds(b, s)  mockllm_buf_add(b, s, sizeof(s) - 1)
#define mockllm_buf_addz(b, s)  mockllm_buf_add(b, s, strlen(s))


#endif /* _MOCKLLM_BUF_H_INCLUDED_ */
