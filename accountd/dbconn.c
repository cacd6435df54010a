
/*
 * The connection to the database, asynchronously: PQconnectStartParams and
 * PQconnectPoll to connect, PQsendQueryParams and PQflush to send,
 * PQconsumeInput, PQisBusy and PQgetResult to read, all driven by the
 * event loop.  One query at a time; values are always bound parameters.
 *
 * The states: DOWN (with a timer to connect again, backing off), then
 * CONNECTING, then the set-up statements, then IDLE and BUSY in turn.
 * Whoever sends a query names its dbconn_query_t, whose handlers get its
 * result, its failure, or the loss of the connection: this file knows
 * nothing of what the queries are for.
 *
 * A new connection first sets its session, then runs the statements
 * registered with dbconn_setup(), in order: the batch statement is
 * prepared there and LISTEN is sent.  A failure of any of them drops the
 * connection.
 */


#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "accountd.h"
#include "conf.h"
#include "dbconn.h"
#include "event.h"
#include "log.h"
#include "pq.h"
#include "queue.h"
#include "stats.h"


#define DBCONN_CONNECT_TIMEOUT    10000
#define DBCONN_QUERY_TIMEOUT      30000
#define DBCONN_BACKOFF_MIN        500
#define DBCONN_BACKOFF_MAX        30000
#define DBCONN_SETUP_MAX          4


typedef enum {
    DBCONN_DOWN = 0,
    DBCONN_CONNECTING,
    DBCONN_IDLE,
    DBCONN_BUSY
} dbconn_state_e;


typedef struct {
    dbconn_state_e          state;
    const dbconn_query_t   *query;     /* in flight, or the last one */
    PGconn                 *conn;
    acd_event_t             ev;
    unsigned                flushing:1;
    unsigned                reconnect:1;
    unsigned                connected_once:1;

    int64_t                 timer_at;
    int64_t                 backoff;

    PGresult               *result;
    char                    error[PQ_ERROR_MAX];

    size_t                  nsetup;
    size_t                  setup_next;
    const dbconn_setup_t   *setup[DBCONN_SETUP_MAX];
} dbconn_t;


static void dbconn_connect(void);
static void dbconn_connect_poll(void);
static void dbconn_watch(uint32_t events);
static void dbconn_handler(acd_event_t *ev, uint32_t events);
static void dbconn_read(void);
static void dbconn_flush(void);
static void dbconn_done(PGresult *res);
static void dbconn_failed(PGresult *res);
static void dbconn_notifies(void);
static void dbconn_sent(void);
static void dbconn_setup_done(PGresult *res);


void  (*dbconn_notify)(int n);


static dbconn_t  dbconn = {
    .ev = { .fd = -1, .handler = dbconn_handler },
    .backoff = DBCONN_BACKOFF_MIN
};

/* a failure of a set-up statement drops the connection */
static const dbconn_query_t  dbconn_setup_query = {
    dbconn_setup_done, NULL, NULL
};


/* a statement run on every new connection, in the order registered */

int
dbconn_setup(const dbconn_setup_t *s)
{
    if (dbconn.nsetup == DBCONN_SETUP_MAX) {
        return -1;
    }

    dbconn.setup[dbconn.nsetup++] = s;

    return 0;
}


void
dbconn_start(void)
{
    dbconn_connect();
}


/*
 * Once a loop iteration, before a query is started: whether the
 * connection is there and idle.  A changed database_url is acted on here,
 * between queries.
 */

int
dbconn_ready(void)
{
    if (dbconn.state != DBCONN_IDLE) {
        return 0;
    }

    if (dbconn.reconnect) {
        dbconn.reconnect = 0;
        dbconn_down("the database_url changed");
        dbconn.timer_at = event_now();
        return 0;
    }

    return 1;
}


int
dbconn_idle(void)
{
    return dbconn.state == DBCONN_IDLE;
}


int
dbconn_busy(void)
{
    return dbconn.state == DBCONN_BUSY;
}


int
dbconn_connected(void)
{
    return dbconn.state == DBCONN_IDLE || dbconn.state == DBCONN_BUSY;
}


/* the text of the last failure, for one log line */

const char *
dbconn_error(void)
{
    return dbconn.error;
}


void
dbconn_conf_changed(const acd_conf_t *old)
{
    if (strcmp(old->database_url, acd_cf.database_url) == 0) {
        return;
    }

    switch (dbconn.state) {

    case DBCONN_DOWN:
        dbconn.timer_at = event_now();
        break;

    case DBCONN_CONNECTING:
        dbconn_down("the database_url changed");
        dbconn.timer_at = event_now();
        break;

    case DBCONN_IDLE:
    case DBCONN_BUSY:
        dbconn.reconnect = 1;
        break;
    }
}


int64_t
dbconn_timer_at(void)
{
    return dbconn.timer_at;
}


void
dbconn_timer(int64_t now)
{
    if (dbconn.timer_at == 0 || now < dbconn.timer_at) {
        return;
    }

    dbconn.timer_at = 0;

    switch (dbconn.state) {

    case DBCONN_DOWN:
        if (!acd_shutting_down) {
            dbconn_connect();
        }
        break;

    case DBCONN_CONNECTING:
        dbconn_down("connection timed out");
        break;

    case DBCONN_BUSY:
        dbconn_down("query timed out");
        break;

    case DBCONN_IDLE:
        break;
    }
}


void
dbconn_close(void)
{
    if (dbconn.conn != NULL) {
        event_del(&dbconn.ev);
        PQfinish(dbconn.conn);
        dbconn.conn = NULL;
    }

    dbconn.state = DBCONN_DOWN;
}


/* values: nparams texts, NULL for SQL's NULL */

int
dbconn_send(const dbconn_query_t *q, const char *sql, int nparams,
    const char *const *values)
{
    dbconn.query = q;

    if (!PQsendQueryParams(dbconn.conn, sql, nparams, NULL, values, NULL,
                           NULL, 0))
    {
        pq_error_text(dbconn.error, sizeof(dbconn.error),
                      PQerrorMessage(dbconn.conn));
        dbconn_down(dbconn.error);
        return -1;
    }

    dbconn_sent();

    return 0;
}


int
dbconn_send_prepared(const dbconn_query_t *q, const char *name, int nparams,
    const char *const *values, const int *lengths, const int *formats)
{
    dbconn.query = q;

    if (!PQsendQueryPrepared(dbconn.conn, name, nparams, values, lengths,
                             formats, 0))
    {
        pq_error_text(dbconn.error, sizeof(dbconn.error),
                      PQerrorMessage(dbconn.conn));
        dbconn_down(dbconn.error);
        return -1;
    }

    dbconn_sent();

    return 0;
}


void
dbconn_down(const char *reason)
{
    int                    busy;
    const dbconn_query_t  *q;

    if (dbconn.state != DBCONN_DOWN && reason != NULL) {
        log_error("database connection %s: %s",
                  dbconn.state == DBCONN_CONNECTING ? "failed" : "lost",
                  reason);

    } else if (reason != NULL) {
        log_error("could not connect to the database: %s", reason);
    }

    if (dbconn.conn != NULL) {
        event_del(&dbconn.ev);
        PQfinish(dbconn.conn);
        dbconn.conn = NULL;
    }

    PQclear(dbconn.result);
    dbconn.result = NULL;
    dbconn.ev.fd = -1;
    dbconn.flushing = 0;

    busy = (dbconn.state == DBCONN_BUSY);
    q = dbconn.query;

    dbconn.state = DBCONN_DOWN;
    dbconn.query = NULL;

    if (q != NULL && q->lost != NULL) {
        q->lost(busy);
    }

    dbconn.timer_at = event_now() + dbconn.backoff;

    log_info("reconnecting in %lld ms, %zu records queued",
             (long long) dbconn.backoff, queue_len());

    dbconn.backoff *= 2;
    if (dbconn.backoff > DBCONN_BACKOFF_MAX) {
        dbconn.backoff = DBCONN_BACKOFF_MAX;
    }
}


static void
dbconn_connect(void)
{
    const char  *keys[3], *values[3];

    keys[0] = "fallback_application_name";
    values[0] = "accountd";
    keys[1] = "dbname";
    values[1] = acd_cf.database_url;
    keys[2] = NULL;
    values[2] = NULL;

    dbconn.conn = PQconnectStartParams(keys, values, 1);

    if (dbconn.conn == NULL) {
        log_error("out of memory connecting to the database");
        dbconn_down(NULL);
        return;
    }

    if (PQstatus(dbconn.conn) == CONNECTION_BAD) {
        pq_error_text(dbconn.error, sizeof(dbconn.error),
                      PQerrorMessage(dbconn.conn));
        dbconn_down(dbconn.error);
        return;
    }

    log_debug("connecting to the database");

    dbconn.state = DBCONN_CONNECTING;
    dbconn.timer_at = event_now() + DBCONN_CONNECT_TIMEOUT;

    /* PQconnectStart behaves as if PQconnectPoll had said "writing" */
    dbconn_watch(EPOLLOUT);
}


static void
dbconn_connect_poll(void)
{
    switch (PQconnectPoll(dbconn.conn)) {

    case PGRES_POLLING_READING:
        dbconn_watch(EPOLLIN);
        return;

    case PGRES_POLLING_WRITING:
        dbconn_watch(EPOLLOUT);
        return;

    case PGRES_POLLING_FAILED:
        pq_error_text(dbconn.error, sizeof(dbconn.error),
                      PQerrorMessage(dbconn.conn));
        dbconn_down(dbconn.error);
        return;

    case PGRES_POLLING_OK:
        break;

    default:
        dbconn_down("unexpected state of PQconnectPoll()");
        return;
    }

    if (PQsetnonblocking(dbconn.conn, 1) != 0) {
        dbconn_down("PQsetnonblocking() failed");
        return;
    }

    PQsetNoticeProcessor(dbconn.conn, pq_notice, NULL);

    log_info("connected to database \"%s\" on \"%s\"", PQdb(dbconn.conn),
             PQhost(dbconn.conn));

    if (dbconn.connected_once) {
        acd_stats.db_reconnects++;
    }

    dbconn.connected_once = 1;

    dbconn.state = DBCONN_IDLE;
    dbconn.timer_at = 0;
    dbconn_watch(EPOLLIN);

    if (dbconn.state != DBCONN_IDLE) {
        return;
    }

    /*
     * A record is acknowledged when its commit returns: that must mean it
     * is on disk, whatever the server's default (a server set up for speed
     * with synchronous_commit off would lose acknowledged records in a
     * crash).
     */
    dbconn.setup_next = 0;

    dbconn_send(&dbconn_setup_query,
                "SELECT set_config('synchronous_commit', 'on', false)", 0,
                NULL);
}


/* the session is set, or the last set-up statement done: the next one */

static void
dbconn_setup_done(PGresult *res)
{
    const dbconn_setup_t  *s;

    if (dbconn.setup_next > 0) {
        s = dbconn.setup[dbconn.setup_next - 1];

        if (s->done != NULL) {
            s->done();
        }
    }

    if (dbconn.setup_next == dbconn.nsetup) {
        return;
    }

    s = dbconn.setup[dbconn.setup_next++];

    if (s->name == NULL) {
        dbconn_send(&dbconn_setup_query, s->sql, 0, NULL);
        return;
    }

    dbconn.query = &dbconn_setup_query;

    /* planned once a connection */
    if (!PQsendPrepare(dbconn.conn, s->name, s->sql, s->nparams, NULL)) {
        pq_error_text(dbconn.error, sizeof(dbconn.error),
                      PQerrorMessage(dbconn.conn));
        dbconn_down(dbconn.error);
        return;
    }

    dbconn_sent();
}


static void
dbconn_sent(void)
{
    dbconn.state = DBCONN_BUSY;
    dbconn.timer_at = event_now() + DBCONN_QUERY_TIMEOUT;

    dbconn_flush();
}


/*
 * libpq may close and open sockets while connecting, and a new one can
 * reuse the old number after the kernel dropped the old registration:
 * during the connection the socket is registered afresh at every step.
 */

static void
dbconn_watch(uint32_t events)
{
    event_del(&dbconn.ev);

    dbconn.ev.fd = PQsocket(dbconn.conn);

    if (dbconn.ev.fd == -1) {
        dbconn_down("the connection has no socket");
        return;
    }

    if (event_set(&dbconn.ev, events) != 0) {
        dbconn_down("could not watch the database socket");
    }
}


static void
dbconn_handler(acd_event_t *ev, uint32_t events)
{
    switch (dbconn.state) {

    case DBCONN_CONNECTING:
        dbconn_connect_poll();
        return;

    case DBCONN_IDLE:
    case DBCONN_BUSY:

        if ((events & EPOLLOUT) && dbconn.flushing) {
            dbconn_flush();

            if (dbconn.state != DBCONN_BUSY) {
                return;
            }
        }

        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
            dbconn_read();
        }

        return;

    case DBCONN_DOWN:
        return;
    }
}


static void
dbconn_read(void)
{
    PGresult        *res;
    ExecStatusType   st;

    if (!PQconsumeInput(dbconn.conn)) {
        pq_error_text(dbconn.error, sizeof(dbconn.error),
                      PQerrorMessage(dbconn.conn));
        dbconn_down(dbconn.error);
        return;
    }

    dbconn_notifies();

    if (dbconn.state == DBCONN_IDLE) {

        /* nothing is expected: the server is going away, or a notice */

        if (PQstatus(dbconn.conn) != CONNECTION_OK) {
            dbconn_down("connection lost");
        }

        return;
    }

    if (dbconn.flushing) {
        dbconn_flush();

        if (dbconn.state != DBCONN_BUSY) {
            return;
        }
    }

    /*
     * Only ReadyForQuery (PQgetResult() returning NULL) says that the
     * implicit transaction committed: an error at commit would come as a
     * second result, possibly in a later read.  The first error wins.
     */

    while (!PQisBusy(dbconn.conn)) {
        res = PQgetResult(dbconn.conn);

        if (res == NULL) {
            res = dbconn.result;
            dbconn.result = NULL;

            /* a notification after a result is parsed by PQgetResult() */
            dbconn_notifies();

            dbconn_done(res);
            PQclear(res);
            return;
        }

        st = PQresultStatus(res);

        if (dbconn.result == NULL
            || (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK
                && (PQresultStatus(dbconn.result) == PGRES_COMMAND_OK
                    || PQresultStatus(dbconn.result) == PGRES_TUPLES_OK)))
        {
            PQclear(dbconn.result);
            dbconn.result = res;

        } else {
            PQclear(res);
        }
    }
}


static void
dbconn_flush(void)
{
    switch (PQflush(dbconn.conn)) {

    case 0:
        dbconn.flushing = 0;
        event_set(&dbconn.ev, EPOLLIN);
        return;

    case 1:
        dbconn.flushing = 1;
        event_set(&dbconn.ev, EPOLLIN | EPOLLOUT);
        return;

    default:
        pq_error_text(dbconn.error, sizeof(dbconn.error),
                      PQerrorMessage(dbconn.conn));
        dbconn_down(dbconn.error);
        return;
    }
}


static void
dbconn_done(PGresult *res)
{
    ExecStatusType  st;

    st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

    dbconn.state = DBCONN_IDLE;
    dbconn.timer_at = 0;

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        dbconn_failed(res);
        return;
    }

    dbconn.backoff = DBCONN_BACKOFF_MIN;

    dbconn.query->done(res);
}


/*
 * The error, as "SQLSTATE message", goes to dbconn.error; a lost
 * connection, or a query without a handler of its own failure, drops the
 * connection.
 */

static void
dbconn_failed(PGresult *res)
{
    const char  *state, *msg;

    state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;

    if (state == NULL) {
        state = "?????";
    }

    if (msg == NULL) {
        msg = PQerrorMessage(dbconn.conn);
    }

    snprintf(dbconn.error, sizeof(dbconn.error), "%s %s", state, msg);
    pq_error_text(dbconn.error, sizeof(dbconn.error), dbconn.error);

    if (PQstatus(dbconn.conn) != CONNECTION_OK
        || dbconn.query->failed == NULL)
    {
        dbconn_down(dbconn.error);
        return;
    }

    dbconn.query->failed(state);
}


static void
dbconn_notifies(void)
{
    int        n;
    PGnotify  *nf;

    n = 0;

    while ((nf = PQnotifies(dbconn.conn)) != NULL) {
        PQfreemem(nf);
        n++;
    }

    if (n && dbconn_notify != NULL) {
        dbconn_notify(n);
    }
}
