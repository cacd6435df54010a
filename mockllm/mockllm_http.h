
/*
 * mockllm_http.c: HTTP/1.x requests and the response head.
 */

#ifndef _MOCKLLM_HTTP_H_INCLUDED_
#define _MOCKLLM_HTTP_H_INCLUDED_


#include "mockllm.h"


extern int64_t  mockllm_http_delay;

int mockllm_http_parse(mockllm_conn_t *c);
void mockllm_http_head(mockllm_conn_t *c, int status,
    const char *content_type, int64_t content_length);
void mockllm_http_finish(mockllm_conn_t *c);


#endif /* _MOCKLLM_HTTP_H_INCLUDED_ */
