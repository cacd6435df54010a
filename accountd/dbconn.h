
/*
 * accountd's dbconn.c: the asynchronous libpq connection's state machine.
 */

#ifndef _ACCOUNTD_DBCONN_H_INCLUDED_
#define _ACCOUNTD_DBCONN_H_INCLUDED_


#include "accountd.h"
#include "conf.h"


/*
 * A query's handlers: its result, its failure (the error is in
 * dbconn_error(); NULL: the connection is dropped), and the loss of the
 * connection while it was the last query sent (busy: still in flight).
 */
typedef struct {
    void        (*done)(PGresult *res);
    void        (*failed)(const char *sqlstate);
    void        (*lost)(int busy);
} dbconn_query_t;

/* run on every new connection; name: prepared as that statement */
typedef struct {
    const char   *name;
    const char   *sql;
    int           nparams;
    void        (*done)(void);
} dbconn_setup_t;

extern void  (*dbconn_notify)(int n);

int dbconn_setup(const dbconn_setup_t *s);
void dbconn_start(void);
int dbconn_ready(void);
int dbconn_idle(void);
int dbconn_busy(void);
int dbconn_connected(void);
const char *dbconn_error(void);
void dbconn_conf_changed(const acd_conf_t *old);
int64_t dbconn_timer_at(void);
void dbconn_timer(int64_t now);
void dbconn_close(void);
int dbconn_send(const dbconn_query_t *q, const char *sql, int nparams,
    const char *const *values);
int dbconn_send_prepared(const dbconn_query_t *q, const char *name,
    int nparams, const char *const *values, const int *lengths,
    const int *formats);
void dbconn_down(const char *reason);


#endif /* _ACCOUNTD_DBCONN_H_INCLUDED_ */
