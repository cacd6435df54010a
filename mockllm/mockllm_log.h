
/*
 * mockllm_log.c: mockllm's messages, one line each, to stderr.
 */

#ifndef _MOCKLLM_LOG_H_INCLUDED_
#define _MOCKLLM_LOG_H_INCLUDED_


#include "mockllm.h"


void mockllm_log(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));


#endif /* _MOCKLLM_LOG_H_INCLUDED_ */
