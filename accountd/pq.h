
/*
 * accountd's pq.c: libpq helpers: blocking connect, messages, text.
 */

#ifndef _ACCOUNTD_PQ_H_INCLUDED_
#define _ACCOUNTD_PQ_H_INCLUDED_


#include "accountd.h"


#define PQ_ERROR_MAX              512

PGconn *pq_connect(const char *url, int timeout);
void pq_error_text(char *buf, size_t cap, const char *msg);
void pq_text(char *dst, size_t cap, const char *src, size_t len);
void pq_notice(void *arg, const char *message);


#endif /* _ACCOUNTD_PQ_H_INCLUDED_ */
