
/*
 * accountd's client.c: a worker's connection: frames, ACKs, leases' answers,
 * the key set sent to it.
 */

#ifndef _ACCOUNTD_CLIENT_H_INCLUDED_
#define _ACCOUNTD_CLIENT_H_INCLUDED_


#include "accountd.h"


extern void  (*client_closed)(void);

int client_new(int fd, uint64_t id, pid_t pid, uid_t uid);
void client_shutdown(void);
void client_ack(acd_client_t *c, const llm_record_t *rec);
void client_lease(acd_client_t *c, const llm_lease_t *l);
void client_release(acd_client_t *c);
void client_flush(void);
void client_reap(void);
int client_idle(void);
void client_keyset(void);
unsigned client_count(void);
void client_recheck(int (*allowed)(uid_t uid));


#endif /* _ACCOUNTD_CLIENT_H_INCLUDED_ */
