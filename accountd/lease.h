
/*
 * accountd's lease.c: the workers' lease and share requests.
 */

#ifndef _ACCOUNTD_LEASE_H_INCLUDED_
#define _ACCOUNTD_LEASE_H_INCLUDED_


#include "accountd.h"


int lease_waiting(void);
void lease_send(void);


#endif /* _ACCOUNTD_LEASE_H_INCLUDED_ */
