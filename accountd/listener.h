
/*
 * accountd's listener.c: the Unix socket, the peers allowed, accepting.
 */

#ifndef _ACCOUNTD_LISTENER_H_INCLUDED_
#define _ACCOUNTD_LISTENER_H_INCLUDED_


#include "accountd.h"


extern void  (*listener_connected)(void);

int listener_init(void);
void listener_close(void);
void listener_recheck(void);


#endif /* _ACCOUNTD_LISTENER_H_INCLUDED_ */
