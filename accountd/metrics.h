
/*
 * accountd's metrics.c: the HTTP listener of the counters (Prometheus).
 */

#ifndef _ACCOUNTD_METRICS_H_INCLUDED_
#define _ACCOUNTD_METRICS_H_INCLUDED_


#include "accountd.h"


int metrics_init(void);
void metrics_close(void);
int64_t metrics_timer_at(void);
void metrics_timer(int64_t now);


#endif /* _ACCOUNTD_METRICS_H_INCLUDED_ */
