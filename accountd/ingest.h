
/*
 * accountd's ingest.c: the settle records' batches, their retries and ACKs.
 */

#ifndef _ACCOUNTD_INGEST_H_INCLUDED_
#define _ACCOUNTD_INGEST_H_INCLUDED_


#include "accountd.h"


int ingest_init(void);
void ingest_kick(void);
int64_t ingest_timer_at(void);
int ingest_retrying(void);


#endif /* _ACCOUNTD_INGEST_H_INCLUDED_ */
