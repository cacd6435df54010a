
/*
 * accountd's keys.c: LISTEN for key changes, the key snapshot query.
 */

#ifndef _ACCOUNTD_KEYS_H_INCLUDED_
#define _ACCOUNTD_KEYS_H_INCLUDED_


#include "accountd.h"


int keys_init(void);
void keys_start(int written);
void keys_request(void);
int keys_wanted(void);
void keys_send(void);
int64_t keys_timer_at(void);
void keys_timer(int64_t now);
void keys_close(void);


#endif /* _ACCOUNTD_KEYS_H_INCLUDED_ */
