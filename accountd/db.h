
/*
 * accountd's db.c: which query goes next on the database connection.
 */

#ifndef _ACCOUNTD_DB_H_INCLUDED_
#define _ACCOUNTD_DB_H_INCLUDED_


#include "accountd.h"


int db_init(void);
void db_start(int snapshot_written);
void db_kick(void);
int64_t db_timer_at(void);
void db_timer(int64_t now);
int db_flushable(void);
void db_close(void);


#endif /* _ACCOUNTD_DB_H_INCLUDED_ */
