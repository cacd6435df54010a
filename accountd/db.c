
/*
 * The database, asynchronously: PQconnectStartParams/PQconnectPoll to
 * connect, PQsendQueryParams and PQflush to send, PQconsumeInput,
 * PQisBusy and PQgetResult to read, all driven by the event loop.  One
 * query at a time; values are always bound parameters.
 *
 * Records leave the queue in batches, one statement each, and are
 * acknowledged only once PostgreSQL reports the statement committed
 * (ReadyForQuery after the result, no error).  A replayed record finds
 * its row and is a success too, so a batch whose outcome was lost with
 * the connection is simply sent again.
 *
 * A batch refused for its data (SQLSTATE class 22 or 23: an unknown
 * tenant, an impossible time) is retried in halves down to the record
 * PostgreSQL still refuses, which goes to llm.usage_rejected: one bad
 * record never blocks the queue.  Any other failure keeps the queue,
 * drops the connection and reconnects with backoff.
 *
 * The same connection LISTENs on llmgw_keys, which a trigger notifies on
 * every change of llm.api_keys or llm.tenants, by the commands or by plain
 * SQL, and runs the snapshot query between batches: the key snapshot is
 * rewritten at most once per DB_SNAPSHOT_DEBOUNCE however many changes
 * come, after each connection (a notification sent while nobody listened
 * is lost), and when the next key expires.
 */


#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "accountd.h"


#define DB_CONNECT_TIMEOUT        10000
#define DB_QUERY_TIMEOUT          30000
#define DB_BACKOFF_MIN            500
#define DB_BACKOFF_MAX            30000
#define DB_SNAPSHOT_RETRY         5000
#define DB_SNAPSHOT_DEBOUNCE      200
#define DB_CHANNEL                "llmgw_keys"

#define DB_PARAMS                 15
#define DB_REJECT_PARAMS          (DB_PARAMS + 1)
#define DB_ERROR_MAX              512


typedef enum {
    DB_DOWN = 0,
    DB_CONNECTING,
    DB_IDLE,
    DB_BUSY
} db_state_e;


typedef enum {
    DB_Q_INSERT = 0,
    DB_Q_REJECT,
    DB_Q_SNAPSHOT,
    DB_Q_LISTEN,
    DB_Q_SESSION,
    DB_Q_PREPARE,
    DB_Q_LEASE
} db_query_e;


/* leases asked for by the workers, answered in order */
#define DB_LEASES_MAX             1024

typedef struct {
    acd_client_t   *client;
    llm_lease_t     req;
} db_lease_t;


/* one record's parameters: its text as PostgreSQL takes it, its numbers */
typedef struct {
    char         request_id[LLM_RECORD_ID_MAX + 1];
    char         model[LLM_RECORD_MODEL_MAX + 1];
    char         finish_reason[LLM_RECORD_FINISH_MAX + 1];
    const char  *api;
    int64_t      num[DB_PARAMS];      /* by column; text ones unused */
    unsigned     has_key:1;
    unsigned     has_finish:1;
} db_row_t;


typedef struct {
    db_state_e      state;
    db_query_e      query;
    PGconn         *conn;
    acd_event_t     ev;
    unsigned        flushing:1;
    unsigned        reconnect:1;
    unsigned        snapshot_wanted:1;
    unsigned        connected_once:1;

    int64_t         timer_at;
    int64_t         backoff;
    int64_t         batch_at;          /* a batch not full goes then */
    int64_t         snapshot_at;
    int64_t         snapshot_sent;
    uint64_t        snapshot_gen;      /* its wall-clock time, for sets */
    int             snapshot_fd;

    PGresult       *result;
    size_t          batch_n;
    int64_t         batch_sent;       /* metrics_usec() */
    size_t          retry_left;       /* at the head, after a refusal */
    size_t          retry_max;        /* their batches' size meanwhile */
    char            error[DB_ERROR_MAX];

    /* parameters of the statement in flight, for up to rows_cap rows */
    size_t          rows_cap;
    db_row_t       *rows;
    char           *arrays;           /* the batch's 15 arrays, binary */
    const char     *array[DB_PARAMS];
    int             array_len[DB_PARAMS];

    /* text parameters of any other statement */
    const char     *values[DB_REJECT_PARAMS];
    char            num[DB_PARAMS][24];

    /* the batch's request_ids: row + 1 by hash, open addressing */
    uint32_t       *ids;
    size_t          ids_mask;
} db_t;


static void db_connect(void);
static void db_connect_poll(void);
static void db_watch(uint32_t events);
static void db_handler(acd_event_t *ev, uint32_t events);
static void db_read(void);
static void db_flush(void);
static void db_done(PGresult *res);
static void db_failed(PGresult *res);
static void db_down(const char *reason);
static int db_send(const char *sql, int nparams);
static void db_send_batch(void);
static void db_arrays(size_t n);
static unsigned char *db_put32(unsigned char *p, uint32_t v);
static void db_text(char *dst, size_t cap, const char *src, size_t len);
static void db_send_reject(void);
static void db_send_lease(void);
static void db_lease_answer(PGresult *res);
static void db_send_snapshot(void);
static void db_snapshot_at(int64_t at);
static void db_notifies(void);
static int db_prepare(size_t n);
static void db_bind(size_t row, const llm_record_t *rec);
static void db_bind_text(size_t row);
static int db_id_seen(size_t row);
static void db_ack(size_t n);
static void db_notice(void *arg, const char *message);
static void db_error_text(char *buf, size_t cap, const char *msg);
static const char *db_api_name(uint8_t api);


static db_lease_t  db_leases[DB_LEASES_MAX];
static size_t      db_leases_head;
static size_t      db_leases_n;
static char        db_lease_num[4][24];
static char        db_lease_model[LLM_RECORD_MODEL_MAX + 1];
static char        db_gateway[256];


static db_t  db = {
    .ev = { .fd = -1 },
    .snapshot_fd = -1,
    .backoff = DB_BACKOFF_MIN
};


/*
 * One statement a batch, prepared once a connection: the records come as
 * 15 arrays, a column each, and everything is done for the whole batch at
 * once rather than row by row (PostgreSQL's CPU a record is what the
 * gateway's throughput is bounded by; see "Benchmarks" in the README):
 *
 *   r:   the records, the arrays unnested side by side in the select
 *        list (in FROM, each array would be copied into a store first);
 *   e:   the rows llm.usage has already for the batch's request_ids, one
 *        scan of each partition's primary key for all of them (sql/010);
 *   pm:  the price of each model of the batch (sql/008's llm.price_at) at
 *        its earliest and latest ts in the batch: the same row at both
 *        means no price change between them, and every record of that
 *        model gets it; otherwise each is looked up at its own ts;
 *   ins: the records whose request_id is new, with their cost, by a plain
 *        INSERT (OFFSET 0 keeps the price and the cost computed once a
 *        row: inlined, they were computed again for each use);
 *   and a record whose request_id is there already is a replay, ignored
 *        if its figures are the same, and refused into llm.usage_rejected,
 *        and logged, if they are not.
 *
 * A request's figures are never counted twice, nor changed once written.
 * Nothing in a batch shares a request_id: the look-up sees only what was
 * there before the statement, so db_send_batch() cuts a batch before a
 * request_id it holds already.  The primary key has the last word: a row
 * another writer inserted since the look-up fails the batch with a unique
 * violation, and it is written again in halves, each finding that row.
 * ON CONFLICT would check every row against the index once more, for
 * what the look-up covers.
 */

#define DB_INSERT_NAME            "llmgw_insert"

static const char  db_insert_sql[] =
    "WITH r AS MATERIALIZED (SELECT a.*,"
    " timestamptz 'epoch' + a.ts_ms * interval '1 millisecond' AS ts"
    " FROM (SELECT unnest($1::text[]) AS request_id,"
    " unnest($2::bigint[]) AS tenant_id, unnest($3::bigint[]) AS key_id,"
    " unnest($4::text[]) AS model, unnest($5::text[]) AS api,"
    " unnest($6::bigint[]) AS input_tokens,"
    " unnest($7::bigint[]) AS output_tokens,"
    " unnest($8::bigint[]) AS cached_input_tokens,"
    " unnest($9::bigint[]) AS cache_write_tokens,"
    " unnest($10::bigint[]) AS reasoning_tokens,"
    " unnest($11::bigint[]) AS reserved_tokens,"
    " unnest($12::text[]) AS finish_reason, unnest($13::int[]) AS status,"
    " unnest($14::int[]) AS flags, unnest($15::bigint[]) AS ts_ms) a"
    "), e AS MATERIALIZED ("
    "SELECT u.request_id, u.tenant_id, u.key_id, u.model, u.api,"
    " u.input_tokens, u.output_tokens, u.cached_input_tokens,"
    " u.cache_write_tokens, u.reasoning_tokens, u.reserved_tokens,"
    " u.finish_reason, u.status, u.flags, u.ts"
    " FROM llm.usage_of_requests($1::text[]) u"
    "), pm AS MATERIALIZED ("
    "SELECT m.model, lo.*::llm.prices AS price,"
    " (lo.model, lo.effective_from)"
    " IS NOT DISTINCT FROM (hi.model, hi.effective_from) AS same"
    " FROM (SELECT r.model, min(r.ts) AS lo_ts, max(r.ts) AS hi_ts"
    " FROM r GROUP BY r.model) m"
    " LEFT JOIN LATERAL llm.price_at(m.model, m.lo_ts) lo ON true"
    " LEFT JOIN LATERAL llm.price_at(m.model, m.hi_ts) hi ON true"
    "), ins AS ("
    "INSERT INTO llm.usage (request_id, tenant_id, key_id, model, api,"
    " input_tokens, output_tokens, cached_input_tokens, cache_write_tokens,"
    " reasoning_tokens, reserved_tokens, finish_reason, status, flags, ts,"
    " cost_pusd)"
    " SELECT c.request_id, c.tenant_id, c.key_id, c.model, c.api,"
    " c.input_tokens, c.output_tokens, c.cached_input_tokens,"
    " c.cache_write_tokens, c.reasoning_tokens, c.reserved_tokens,"
    " c.finish_reason, c.status, c.flags, c.ts,"
    " CASE WHEN c.c <= 9223372036854775807 THEN c.c::bigint END"
    " FROM (SELECT q.*, llm.cost_numeric(q.price, q.input_tokens,"
    " q.cached_input_tokens, q.cache_write_tokens, q.output_tokens) AS c"
    " FROM (SELECT r.*, CASE WHEN pm.same THEN pm.price"
    " ELSE (SELECT x.*::llm.prices FROM llm.price_at(r.model, r.ts) x)"
    " END AS price"
    " FROM r LEFT JOIN pm ON pm.model = r.model"
    " WHERE NOT EXISTS (SELECT FROM e WHERE e.request_id = r.request_id)"
    " OFFSET 0) q OFFSET 0) c"
    ")"
    " INSERT INTO llm.usage_rejected (request_id, tenant_id, key_id, model,"
    " api, input_tokens, output_tokens, cached_input_tokens,"
    " cache_write_tokens, reasoning_tokens, reserved_tokens, finish_reason,"
    " status, flags, ts_ms, error)"
    " SELECT r.request_id, r.tenant_id, r.key_id, r.model, r.api,"
    " r.input_tokens, r.output_tokens, r.cached_input_tokens,"
    " r.cache_write_tokens, r.reasoning_tokens, r.reserved_tokens,"
    " r.finish_reason, r.status, r.flags, r.ts_ms,"
    " 'llm.usage has this request_id already, with other figures'"
    " FROM r JOIN e u ON u.request_id = r.request_id"
    " WHERE (u.tenant_id, u.key_id, u.model, u.api, u.input_tokens,"
    " u.output_tokens, u.cached_input_tokens, u.cache_write_tokens,"
    " u.reasoning_tokens, u.reserved_tokens, u.finish_reason, u.status,"
    " u.flags, u.ts)"
    " IS DISTINCT FROM (r.tenant_id, r.key_id, r.model, r.api,"
    " r.input_tokens, r.output_tokens, r.cached_input_tokens,"
    " r.cache_write_tokens, r.reasoning_tokens, r.reserved_tokens,"
    " r.finish_reason, r.status, r.flags, r.ts)"
    " ON CONFLICT (request_id) DO NOTHING"
    " RETURNING request_id";

/*
 * The arrays go in PostgreSQL's binary format (array_recv): no number is
 * printed here to be parsed there, nor any text quoted.  Each is a header
 * of 5 integers, then every element as its length (-1 for NULL) and its
 * bytes.  The element types by column, as pg_type has them forever:
 * text 25, bigint 20, int 23.
 */

#define DB_ARRAY_HEADER           20

/* the longest of one row's 15 elements, lengths included */
#define DB_ARRAY_ROW_MAX                                                      \
    (4 * 4 + LLM_RECORD_ID_MAX + LLM_RECORD_MODEL_MAX + sizeof("responses")   \
     + LLM_RECORD_FINISH_MAX + 9 * (4 + 8) + 2 * (4 + 4))

static const uint32_t  db_array_oid[DB_PARAMS] = {
    25, 20, 20, 25, 25, 20, 20, 20, 20, 20, 20, 25, 23, 23, 20
};

static const int  db_binary[DB_PARAMS] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
};

/*
 * A lease of the tenant's caps, or of one key's (llm.take_lease, sql/007),
 * and the prices of the model asked about as they are now: its own, else
 * those of "*".
 */
static const char  db_lease_sql[] =
    "SELECT l.granted_pusd, coalesce(l.remaining_pusd, -1),"
    " (extract(epoch FROM l.resets_at) * 1000)::bigint,"
    " (extract(epoch FROM l.lease_until) * 1000)::bigint,"
    " coalesce(p.input_per_mtok, -1), coalesce(p.output_per_mtok, -1),"
    " coalesce(p.cached_input_per_mtok, -1),"
    " coalesce(p.cache_write_per_mtok, -1)"
    " FROM llm.take_lease($1::bigint, $5::bigint, $2::text, $3::bigint) l"
    " LEFT JOIN LATERAL (SELECT * FROM llm.prices"
    " WHERE model IN ($4::text, '*') AND effective_from <= now()"
    " ORDER BY model = $4::text DESC, effective_from DESC LIMIT 1) p"
    " ON true";

/* sql/007: budget a gateway leased and gives back unspent */
static const char  db_return_sql[] =
    "SELECT llm.return_lease($1::bigint, $5::bigint, $2::text, $3::bigint,"
    " timestamptz 'epoch' + $4::bigint * interval '1 millisecond')";

/* sql/006: this gateway's share of a tenant's rate limits */
static const char  db_share_sql[] =
    "SELECT llm.take_share($1::bigint, $2::text, $3::bigint)";

static const char  db_reject_sql[] =
    "INSERT INTO llm.usage_rejected (request_id, tenant_id, key_id, model,"
    " api, input_tokens, output_tokens, cached_input_tokens,"
    " cache_write_tokens, reasoning_tokens, reserved_tokens, finish_reason,"
    " status, flags, ts_ms, error)"
    " VALUES ($1::text, $2::bigint, $3::bigint, $4::text, $5::text,"
    " $6::bigint, $7::bigint, $8::bigint, $9::bigint, $10::bigint,"
    " $11::bigint, $12::text, $13::int, $14::int, $15::bigint, $16::text)"
    " ON CONFLICT (request_id) DO NOTHING";


int
db_init(void)
{
    db.ev.handler = db_handler;
    db.snapshot_wanted = 1;

    return db_prepare(acd_cf.batch_max);
}


void
db_start(int snapshot_written)
{
    db.snapshot_wanted = !snapshot_written;

    db_connect();
}


/* called once a loop iteration: start a query if there is work */

void
db_kick(void)
{
    int64_t  now;

    if (db.state != DB_IDLE) {
        return;
    }

    if (db.reconnect) {
        db.reconnect = 0;
        db_down("the database_url changed");
        db.timer_at = acd_now();
        return;
    }

    /* requests wait for their lease: it goes first */
    if (db_leases_n) {
        db_send_lease();
        return;
    }

    if (db.snapshot_wanted && !acd_shutting_down) {
        db_send_snapshot();

        if (db.state != DB_IDLE) {
            return;
        }
    }

    if (db.retry_left) {
        db_send_batch();
        return;
    }

    if (queue_len() == 0) {
        return;
    }

    /*
     * What a statement costs PostgreSQL besides its rows (its plan, its
     * triggers, the commit) is shared by the rows of a batch: a batch that
     * is not full waits batch_delay for more, as a group commit does.
     */
    if (queue_len() < (size_t) acd_cf.batch_max && acd_cf.batch_delay
        && !acd_shutting_down)
    {
        now = acd_now();

        if (db.batch_at == 0) {
            db.batch_at = now + acd_cf.batch_delay;
        }

        if (now < db.batch_at) {
            return;
        }
    }

    db.batch_at = 0;
    db_send_batch();
}


void
db_snapshot_request(void)
{
    db.snapshot_wanted = 1;
}


void
db_conf_changed(const acd_conf_t *old)
{
    if (strcmp(old->database_url, acd_cf.database_url) == 0) {
        return;
    }

    switch (db.state) {

    case DB_DOWN:
        db.timer_at = acd_now();
        break;

    case DB_CONNECTING:
        db_down("the database_url changed");
        db.timer_at = acd_now();
        break;

    case DB_IDLE:
    case DB_BUSY:
        db.reconnect = 1;
        break;
    }
}


int64_t
db_timer_at(void)
{
    int64_t  at;

    at = db.timer_at;

    if (db.snapshot_at && (at == 0 || db.snapshot_at < at)) {
        at = db.snapshot_at;
    }

    /* it waits for an idle connection, not for the time */
    if (db.batch_at && db.state == DB_IDLE && (at == 0 || db.batch_at < at)) {
        at = db.batch_at;
    }

    return at;
}


void
db_timer(int64_t now)
{
    if (db.snapshot_at && now >= db.snapshot_at) {
        db.snapshot_at = 0;
        db.snapshot_wanted = 1;
    }

    if (db.timer_at == 0 || now < db.timer_at) {
        return;
    }

    db.timer_at = 0;

    switch (db.state) {

    case DB_DOWN:
        if (!acd_shutting_down) {
            db_connect();
        }
        break;

    case DB_CONNECTING:
        db_down("connection timed out");
        break;

    case DB_BUSY:
        db_down("query timed out");
        break;

    case DB_IDLE:
        break;
    }
}


int
db_connected(void)
{
    return db.state == DB_IDLE || db.state == DB_BUSY;
}


/* at shutdown: whether waiting can still get the queue written */

int
db_flushable(void)
{
    return (db.state == DB_IDLE || db.state == DB_BUSY)
           && (db.state == DB_BUSY || queue_len() || db.retry_left);
}


void
db_close(void)
{
    if (db.conn != NULL) {
        event_del(&db.ev);
        PQfinish(db.conn);
        db.conn = NULL;
    }

    if (db.snapshot_fd != -1) {
        snapshot_unlock(db.snapshot_fd);
        db.snapshot_fd = -1;
    }

    db.state = DB_DOWN;
}


/* for the command line and the snapshot at start-up */

PGconn *
db_connect_blocking(const char *url, int timeout)
{
    char           t[16];
    PGconn        *conn;
    const char    *keys[4], *values[4];

    snprintf(t, sizeof(t), "%d", timeout);

    /* the URL's own connect_timeout, if any, wins: it comes later */
    keys[0] = "connect_timeout";
    values[0] = t;
    keys[1] = "fallback_application_name";
    values[1] = "accountd";
    keys[2] = "dbname";
    values[2] = url;
    keys[3] = NULL;
    values[3] = NULL;

    conn = PQconnectdbParams(keys, values, 1);

    if (conn == NULL) {
        log_error("out of memory connecting to the database");
        return NULL;
    }

    if (PQstatus(conn) != CONNECTION_OK) {
        db_error_text(db.error, sizeof(db.error), PQerrorMessage(conn));
        log_error("could not connect to the database: %s", db.error);
        PQfinish(conn);
        return NULL;
    }

    PQsetNoticeProcessor(conn, db_notice, NULL);

    return conn;
}


static void
db_connect(void)
{
    const char  *keys[3], *values[3];

    keys[0] = "fallback_application_name";
    values[0] = "accountd";
    keys[1] = "dbname";
    values[1] = acd_cf.database_url;
    keys[2] = NULL;
    values[2] = NULL;

    db.conn = PQconnectStartParams(keys, values, 1);

    if (db.conn == NULL) {
        log_error("out of memory connecting to the database");
        db_down(NULL);
        return;
    }

    if (PQstatus(db.conn) == CONNECTION_BAD) {
        db_error_text(db.error, sizeof(db.error), PQerrorMessage(db.conn));
        db_down(db.error);
        return;
    }

    log_debug("connecting to the database");

    db.state = DB_CONNECTING;
    db.timer_at = acd_now() + DB_CONNECT_TIMEOUT;

    /* PQconnectStart behaves as if PQconnectPoll had said "writing" */
    db_watch(EPOLLOUT);
}


static void
db_connect_poll(void)
{
    switch (PQconnectPoll(db.conn)) {

    case PGRES_POLLING_READING:
        db_watch(EPOLLIN);
        return;

    case PGRES_POLLING_WRITING:
        db_watch(EPOLLOUT);
        return;

    case PGRES_POLLING_FAILED:
        db_error_text(db.error, sizeof(db.error), PQerrorMessage(db.conn));
        db_down(db.error);
        return;

    case PGRES_POLLING_OK:
        break;

    default:
        db_down("unexpected state of PQconnectPoll()");
        return;
    }

    if (PQsetnonblocking(db.conn, 1) != 0) {
        db_down("PQsetnonblocking() failed");
        return;
    }

    PQsetNoticeProcessor(db.conn, db_notice, NULL);

    log_info("connected to database \"%s\" on \"%s\"", PQdb(db.conn),
             PQhost(db.conn));

    if (db.connected_once) {
        acd_stats.db_reconnects++;
    }

    db.connected_once = 1;

    db.state = DB_IDLE;
    db.timer_at = 0;
    db_watch(EPOLLIN);

    if (db.state != DB_IDLE) {
        return;
    }

    /*
     * A record is acknowledged when its commit returns: that must mean it
     * is on disk, whatever the server's default (a server set up for speed
     * with synchronous_commit off would lose acknowledged records in a
     * crash).  The batch statement computes every cost, NULL for a model
     * without a price: llm.usage's trigger need not look again (sql/010).
     */
    db.query = DB_Q_SESSION;

    db_send("SELECT set_config('synchronous_commit', 'on', false),"
            " set_config('llmgw.cost_computed', 'on', false)", 0);
}


/*
 * libpq may close and open sockets while connecting, and a new one can
 * reuse the old number after the kernel dropped the old registration:
 * during the connection the socket is registered afresh at every step.
 */

static void
db_watch(uint32_t events)
{
    event_del(&db.ev);

    db.ev.fd = PQsocket(db.conn);

    if (db.ev.fd == -1) {
        db_down("the connection has no socket");
        return;
    }

    if (event_set(&db.ev, events) != 0) {
        db_down("could not watch the database socket");
    }
}


static void
db_handler(acd_event_t *ev, uint32_t events)
{
    switch (db.state) {

    case DB_CONNECTING:
        db_connect_poll();
        return;

    case DB_IDLE:
    case DB_BUSY:

        if ((events & EPOLLOUT) && db.flushing) {
            db_flush();

            if (db.state != DB_BUSY) {
                return;
            }
        }

        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
            db_read();
        }

        return;

    case DB_DOWN:
        return;
    }
}


static void
db_read(void)
{
    PGresult        *res;
    ExecStatusType   st;

    if (!PQconsumeInput(db.conn)) {
        db_error_text(db.error, sizeof(db.error), PQerrorMessage(db.conn));
        db_down(db.error);
        return;
    }

    db_notifies();

    if (db.state == DB_IDLE) {

        /* nothing is expected: the server is going away, or a notice */

        if (PQstatus(db.conn) != CONNECTION_OK) {
            db_down("connection lost");
        }

        return;
    }

    if (db.flushing) {
        db_flush();

        if (db.state != DB_BUSY) {
            return;
        }
    }

    /*
     * Only ReadyForQuery (PQgetResult() returning NULL) says that the
     * implicit transaction committed: an error at commit would come as a
     * second result, possibly in a later read.  The first error wins.
     */

    while (!PQisBusy(db.conn)) {
        res = PQgetResult(db.conn);

        if (res == NULL) {
            res = db.result;
            db.result = NULL;

            /* a notification after a result is parsed by PQgetResult() */
            db_notifies();

            db_done(res);
            PQclear(res);
            return;
        }

        st = PQresultStatus(res);

        if (db.result == NULL
            || (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK
                && (PQresultStatus(db.result) == PGRES_COMMAND_OK
                    || PQresultStatus(db.result) == PGRES_TUPLES_OK)))
        {
            PQclear(db.result);
            db.result = res;

        } else {
            PQclear(res);
        }
    }
}


static void
db_flush(void)
{
    switch (PQflush(db.conn)) {

    case 0:
        db.flushing = 0;
        event_set(&db.ev, EPOLLIN);
        return;

    case 1:
        db.flushing = 1;
        event_set(&db.ev, EPOLLIN | EPOLLOUT);
        return;

    default:
        db_error_text(db.error, sizeof(db.error), PQerrorMessage(db.conn));
        db_down(db.error);
        return;
    }
}


static void
db_done(PGresult *res)
{
    int             i;
    size_t          n;
    int64_t         next;
    ExecStatusType  st;
    char            id[LLM_RECORD_ID_MAX + 1];
    acd_item_t     *item;

    st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

    db.state = DB_IDLE;
    db.timer_at = 0;

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        db_failed(res);
        return;
    }

    db.backoff = DB_BACKOFF_MIN;

    switch (db.query) {

    case DB_Q_INSERT:
        n = db.batch_n;

        log_debug("batch of %zu records committed", n);

        for (i = 0; i < PQntuples(res); i++) {
            log_clean(id, sizeof(id), PQgetvalue(res, i, 0),
                      PQgetlength(res, i, 0));
            log_error("record \"%s\" refused: llm.usage has this "
                      "request_id already, with other figures; kept in "
                      "llm.usage_rejected", id);
        }

        metrics_batch(n, (size_t) PQntuples(res),
                      metrics_usec() - db.batch_sent);

        db_ack(n);

        /* past the refused record, batches double again */
        if (db.retry_left) {
            db.retry_left -= n < db.retry_left ? n : db.retry_left;
            db.retry_max = 2 * n;
        }

        break;

    case DB_Q_REJECT:
        item = queue_at(0);
        log_clean(id, sizeof(id), item->rec.request_id,
                  item->rec.request_id_len);
        log_error("record \"%s\" (tenant %lld) refused by llm.usage: %s; "
                  "kept in llm.usage_rejected", id,
                  (long long) item->rec.tenant_id, db.error);

        acd_stats.records_rejected++;

        db_ack(1);

        if (db.retry_left) {
            db.retry_left--;
        }

        break;

    case DB_Q_SNAPSHOT:
        if (snapshot_write(acd_cf.key_snapshot, res, db.snapshot_gen, &next)
            == 0)
        {
            if (next >= 0) {
                /* a second late rather than a hair early, and no spin */
                db_snapshot_at(acd_now() + next + 1000);
            }

        } else {
            db_snapshot_at(acd_now() + DB_SNAPSHOT_RETRY);
        }

        /* the workers need the keys even if the disk refused the file */
        (void) keyset_publish(res, db.snapshot_gen);

        snapshot_unlock(db.snapshot_fd);
        db.snapshot_fd = -1;

        break;

    case DB_Q_SESSION:
        /* the batch statement, planned once a connection */
        db.query = DB_Q_PREPARE;

        if (!PQsendPrepare(db.conn, DB_INSERT_NAME, db_insert_sql, DB_PARAMS,
                           NULL))
        {
            db_error_text(db.error, sizeof(db.error),
                          PQerrorMessage(db.conn));
            db_down(db.error);
            break;
        }

        db.state = DB_BUSY;
        db.timer_at = acd_now() + DB_QUERY_TIMEOUT;
        db_flush();
        break;

    case DB_Q_PREPARE:
        db.query = DB_Q_LISTEN;
        db_send("LISTEN " DB_CHANNEL, 0);
        break;

    case DB_Q_LEASE:
        db_lease_answer(res);
        break;

    case DB_Q_LISTEN:
        log_debug("listening on \"" DB_CHANNEL "\"");

        db.snapshot_wanted = 1;

        break;
    }
}


static void
db_failed(PGresult *res)
{
    char         id[LLM_RECORD_ID_MAX + 1];
    const char  *state, *msg;
    acd_item_t  *item;

    state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;

    if (state == NULL) {
        state = "?????";
    }

    if (msg == NULL) {
        msg = PQerrorMessage(db.conn);
    }

    snprintf(db.error, sizeof(db.error), "%s %s", state, msg);
    db_error_text(db.error, sizeof(db.error), db.error);

    if (PQstatus(db.conn) != CONNECTION_OK) {
        db_down(db.error);
        return;
    }

    if (db.query == DB_Q_LISTEN || db.query == DB_Q_SESSION
        || db.query == DB_Q_PREPARE)
    {
        db_down(db.error);
        return;
    }

    if (db.query == DB_Q_LEASE) {
        /* the worker's wait ends without a lease: it refuses, and asks again */
        log_error("lease query failed: %s", db.error);
        db_lease_answer(NULL);
        return;
    }

    if (db.query == DB_Q_SNAPSHOT) {
        log_error("key snapshot query failed: %s", db.error);
        snapshot_unlock(db.snapshot_fd);
        db.snapshot_fd = -1;
        db_snapshot_at(acd_now() + DB_SNAPSHOT_RETRY);
        return;
    }

    if (strncmp(state, "22", 2) != 0 && strncmp(state, "23", 2) != 0) {
        db_down(db.error);
        return;
    }

    /*
     * The data is refused: find the record that PostgreSQL will not take,
     * in halves, then halves of the half refused, down to the record.  A
     * few statements a bad record: one a record of a large batch held the
     * queue up for as long as a thousand commits.
     */

    if (db.query == DB_Q_INSERT && db.batch_n > 1) {
        log_warning("batch of %zu records refused (%s), writing it in "
                    "halves", db.batch_n, db.error);

        if (db.retry_left == 0) {
            db.retry_left = db.batch_n;
        }

        db.retry_max = (db.batch_n + 1) / 2;
        return;
    }

    if (db.query == DB_Q_INSERT) {
        db_send_reject();
        return;
    }

    /* even llm.usage_rejected will not take it: the log is all there is */

    item = queue_at(0);
    log_clean(id, sizeof(id), item->rec.request_id, item->rec.request_id_len);

    log_error("record dropped, refused by llm.usage_rejected too (%s): "
              "request_id \"%s\" tenant_id %lld key_id %lld "
              "input_tokens %" PRIu64 " output_tokens %" PRIu64
              " cached_input_tokens %" PRIu64 " reserved_tokens %" PRIu64
              " status %u flags %u ts_ms %lld", db.error, id,
              (long long) item->rec.tenant_id, (long long) item->rec.key_id,
              item->rec.input_tokens, item->rec.output_tokens,
              item->rec.cached_input_tokens, item->rec.reserved_tokens,
              (unsigned) item->rec.status, (unsigned) item->rec.flags,
              (long long) item->rec.ts_ms);

    acd_stats.records_dropped++;

    db_ack(1);

    if (db.retry_left) {
        db.retry_left--;
    }
}


static void
db_down(const char *reason)
{
    int64_t  now;

    if (db.state != DB_DOWN && reason != NULL) {
        log_error("database connection %s: %s",
                  db.state == DB_CONNECTING ? "failed" : "lost", reason);

    } else if (reason != NULL) {
        log_error("could not connect to the database: %s", reason);
    }

    if (db.conn != NULL) {
        event_del(&db.ev);
        PQfinish(db.conn);
        db.conn = NULL;
    }

    PQclear(db.result);
    db.result = NULL;
    db.ev.fd = -1;
    db.flushing = 0;

    if (db.state == DB_BUSY && db.query == DB_Q_SNAPSHOT) {
        db.snapshot_wanted = 1;
    }

    if (db.snapshot_fd != -1) {
        snapshot_unlock(db.snapshot_fd);
        db.snapshot_fd = -1;
    }

    /* a batch in flight is sent again: it is still at the queue's head */
    db.batch_n = 0;
    db.state = DB_DOWN;

    now = acd_now();
    db.timer_at = now + db.backoff;

    log_info("reconnecting in %lld ms, %zu records queued",
             (long long) db.backoff, queue_len());

    db.backoff *= 2;
    if (db.backoff > DB_BACKOFF_MAX) {
        db.backoff = DB_BACKOFF_MAX;
    }
}


static int
db_send(const char *sql, int nparams)
{
    if (!PQsendQueryParams(db.conn, sql, nparams, NULL, db.values, NULL,
                           NULL, 0))
    {
        db_error_text(db.error, sizeof(db.error), PQerrorMessage(db.conn));
        db_down(db.error);
        return -1;
    }

    db.state = DB_BUSY;
    db.timer_at = acd_now() + DB_QUERY_TIMEOUT;

    db_flush();

    return 0;
}


static void
db_send_batch(void)
{
    size_t  n, i;

    n = queue_len();

    if (n == 0) {
        db.retry_left = 0;
        return;
    }

    if (n > (size_t) acd_cf.batch_max) {
        n = acd_cf.batch_max;
    }

    if (db.retry_left) {
        n = n < db.retry_left ? n : db.retry_left;
        n = n < db.retry_max ? n : db.retry_max;
    }

    if (db_prepare(n) != 0) {
        return;
    }

    memset(db.ids, 0, (db.ids_mask + 1) * sizeof(uint32_t));

    for (i = 0; i < n; i++) {
        db_bind(i, &queue_at(i)->rec);

        /*
         * A record sent again while its first copy is still queued (a
         * worker that reconnected) waits for the next batch, which finds
         * the first copy written: the look-up does not see what the
         * statement itself inserts.
         */
        if (db_id_seen(i)) {
            n = i;
            break;
        }
    }

    db_arrays(n);

    db.query = DB_Q_INSERT;
    db.batch_n = n;

    log_noise("sending a batch of %zu records", n);

    db.batch_sent = metrics_usec();

    if (!PQsendQueryPrepared(db.conn, DB_INSERT_NAME, DB_PARAMS, db.array,
                             db.array_len, db_binary, 0))
    {
        db_error_text(db.error, sizeof(db.error), PQerrorMessage(db.conn));
        db_down(db.error);
        return;
    }

    db.state = DB_BUSY;
    db.timer_at = acd_now() + DB_QUERY_TIMEOUT;

    db_flush();
}


/* the bound rows as one array a column, in the binary format */

static void
db_arrays(size_t n)
{
    size_t          i, k, len;
    uint64_t        v;
    db_row_t       *r;
    const char     *t;
    unsigned char  *p, *start, *nulls;

    p = (unsigned char *) db.arrays;

    for (k = 0; k < DB_PARAMS; k++) {
        start = p;

        p = db_put32(p, 1);                     /* dimensions */
        nulls = p;
        p = db_put32(p, 0);
        p = db_put32(p, db_array_oid[k]);
        p = db_put32(p, n);
        p = db_put32(p, 1);                     /* lower bound */

        for (i = 0; i < n; i++) {
            r = &db.rows[i];

            /* for a number, t says only whether it is NULL */
            switch (k) {

            case 0:
                t = r->request_id;
                break;

            case 2:
                t = r->has_key ? "" : NULL;
                break;

            case 3:
                t = r->model;
                break;

            case 4:
                t = r->api;
                break;

            case 11:
                t = r->has_finish ? r->finish_reason : NULL;
                break;

            default:
                t = "";
            }

            if (t == NULL) {
                p = db_put32(p, (uint32_t) -1);
                db_put32(nulls, 1);
                continue;
            }

            if (db_array_oid[k] == 25) {
                len = strlen(t);
                p = db_put32(p, len);
                memcpy(p, t, len);
                p += len;
                continue;
            }

            v = (uint64_t) r->num[k];

            if (db_array_oid[k] == 23) {
                p = db_put32(p, 4);
                p = db_put32(p, (uint32_t) v);
                continue;
            }

            p = db_put32(p, 8);
            p = db_put32(p, (uint32_t) (v >> 32));
            p = db_put32(p, (uint32_t) v);
        }

        db.array[k] = (const char *) start;
        db.array_len[k] = p - start;
    }
}


/* network byte order */

static unsigned char *
db_put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char) (v >> 24);
    p[1] = (unsigned char) (v >> 16);
    p[2] = (unsigned char) (v >> 8);
    p[3] = (unsigned char) v;

    return p + 4;
}


/*
 * A text field as PostgreSQL takes it: UTF-8 as it came (a model may be
 * named in any script, and must match its price), a byte that is not
 * valid UTF-8, or a control character, as '?'.  A character that does not
 * fit whole is left out.
 */

static void
db_text(char *dst, size_t cap, const char *src, size_t len)
{
    size_t          i, n, k;
    unsigned char   c, lo, hi;

    i = 0;
    n = 0;

    while (i < len && n + 1 < cap) {
        c = (unsigned char) src[i];
        lo = 0x80;
        hi = 0xbf;

        if (c >= 0x20 && c < 0x7f) {
            k = 1;

        } else if (c >= 0xc2 && c <= 0xdf) {
            k = 2;

        } else if (c >= 0xe0 && c <= 0xef) {
            k = 3;
            lo = (c == 0xe0) ? 0xa0 : 0x80;     /* no overlong form */
            hi = (c == 0xed) ? 0x9f : 0xbf;     /* no surrogate */

        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 4;
            lo = (c == 0xf0) ? 0x90 : 0x80;
            hi = (c == 0xf4) ? 0x8f : 0xbf;     /* up to U+10FFFF */

        } else {
            k = 0;
        }

        if (k > 1
            && (i + k > len
                || (unsigned char) src[i + 1] < lo
                || (unsigned char) src[i + 1] > hi
                || (k > 2 && ((unsigned char) src[i + 2] & 0xc0) != 0x80)
                || (k > 3 && ((unsigned char) src[i + 3] & 0xc0) != 0x80)))
        {
            k = 0;
        }

        if (k == 0) {
            dst[n++] = '?';
            i++;
            continue;
        }

        if (n + k + 1 > cap) {
            break;
        }

        memcpy(dst + n, src + i, k);
        n += k;
        i += k;
    }

    dst[n] = '\0';
}


static void
db_send_reject(void)
{
    db_bind(0, &queue_at(0)->rec);
    db_bind_text(0);
    db.values[DB_PARAMS] = db.error;

    db.query = DB_Q_REJECT;
    db.batch_n = 1;

    db_send(db_reject_sql, DB_REJECT_PARAMS);
}


static void
db_send_snapshot(void)
{
    db.snapshot_wanted = 0;

    if (acd_cf.key_snapshot[0] == '\0') {
        log_warning("\"key_snapshot\" is not set, no key snapshot written");
        return;
    }

    db.snapshot_fd = snapshot_lock(acd_cf.key_snapshot, 0);

    if (db.snapshot_fd == -1) {
        /* another accountd command is writing it: later */
        db_snapshot_at(acd_now() + DB_SNAPSHOT_DEBOUNCE);
        return;
    }

    db.query = DB_Q_SNAPSHOT;
    db.snapshot_sent = acd_now();
    db.snapshot_gen = snapshot_generation();

    if (db_send(SNAPSHOT_QUERY, 0) != 0) {
        db.snapshot_wanted = 1;
    }
}


/*
 * A worker connected.  It read the snapshot file when nginx loaded its
 * configuration, perhaps newer than the last set built (the CLI writes the
 * file at once, the set follows the notification): it gets a set built
 * after it came, never an older one.
 */

void
db_snapshot_soon(void)
{
    int64_t  at;

    at = db.snapshot_sent + DB_SNAPSHOT_DEBOUNCE;

    db_snapshot_at(at > acd_now() ? at : acd_now());
}


/* the earliest of the rewrites asked for wins */

static void
db_snapshot_at(int64_t at)
{
    if (db.snapshot_at == 0 || at < db.snapshot_at) {
        db.snapshot_at = at;
    }
}


/*
 * A snapshot query in flight may have started before the change that a
 * notification reports: every notification asks for a rewrite of its own,
 * no sooner than DB_SNAPSHOT_DEBOUNCE after the last query was sent.
 */

static void
db_notifies(void)
{
    int        n;
    int64_t    at;
    PGnotify  *nf;

    n = 0;

    while ((nf = PQnotifies(db.conn)) != NULL) {
        PQfreemem(nf);
        n++;
    }

    if (n == 0 || acd_shutting_down) {
        return;
    }

    log_noise("%d notifications on \"" DB_CHANNEL "\"", n);

    at = db.snapshot_sent + DB_SNAPSHOT_DEBOUNCE;

    db_snapshot_at(at > acd_now() ? at : acd_now());
}


/* room for the statement and parameters of n rows */

static int
db_prepare(size_t n)
{
    size_t   cap, mask;
    void    *rows, *arrays, *ids;

    if (n <= db.rows_cap) {
        return 0;
    }

    cap = n;

    /* at most half full */
    for (mask = 1; mask < 2 * cap; mask <<= 1) { /* void */ }
    mask--;

    ids = realloc(db.ids, (mask + 1) * sizeof(uint32_t));
    if (ids != NULL) {
        db.ids = ids;
        db.ids_mask = mask;
    }

    rows = realloc(db.rows, cap * sizeof(db_row_t));
    if (rows != NULL) {
        db.rows = rows;
    }

    arrays = realloc(db.arrays,
                     cap * DB_ARRAY_ROW_MAX + DB_PARAMS * DB_ARRAY_HEADER);
    if (arrays != NULL) {
        db.arrays = arrays;
    }

    if (rows == NULL || arrays == NULL || ids == NULL) {
        log_error("out of memory for a batch of %zu records", n);
        return -1;
    }

    db.rows_cap = cap;

    return 0;
}


static void
db_bind(size_t row, const llm_record_t *rec)
{
    size_t     i;
    uint32_t   flags;
    uint64_t   tokens[6];
    db_row_t  *r;

    r = &db.rows[row];

    flags = rec->flags;

    tokens[0] = rec->input_tokens;
    tokens[1] = rec->output_tokens;
    tokens[2] = rec->cached_input_tokens;
    tokens[3] = rec->cache_write_tokens;
    tokens[4] = rec->reasoning_tokens;
    tokens[5] = rec->reserved_tokens;

    /* bigint holds 63 bits */
    for (i = 0; i < 6; i++) {
        if (tokens[i] > INT64_MAX) {
            tokens[i] = INT64_MAX;
            flags |= LLM_REC_F_CLAMPED;
        }
    }

    db_text(r->request_id, sizeof(r->request_id), rec->request_id,
              rec->request_id_len);
    db_text(r->model, sizeof(r->model), rec->model, rec->model_len);
    db_text(r->finish_reason, sizeof(r->finish_reason), rec->finish_reason,
              rec->finish_reason_len);

    r->api = db_api_name(rec->api);
    r->has_key = rec->key_id > 0;
    r->has_finish = rec->finish_reason_len != 0;

    r->num[1] = rec->tenant_id;
    r->num[2] = rec->key_id;

    for (i = 0; i < 6; i++) {
        r->num[5 + i] = (int64_t) tokens[i];
    }

    r->num[12] = rec->status;
    r->num[13] = (int32_t) flags;
    r->num[14] = rec->ts_ms;
}


/* row's parameters as text, for db_reject_sql */

static void
db_bind_text(size_t row)
{
    size_t     k;
    db_row_t  *r;

    r = &db.rows[row];

    for (k = 0; k < DB_PARAMS; k++) {
        if (db_array_oid[k] != 25) {
            snprintf(db.num[k], sizeof(db.num[k]), "%lld",
                     (long long) r->num[k]);
            db.values[k] = db.num[k];
        }
    }

    db.values[0] = r->request_id;
    db.values[2] = r->has_key ? db.num[2] : NULL;
    db.values[3] = r->model;
    db.values[4] = r->api;
    db.values[11] = r->has_finish ? r->finish_reason : NULL;
}


/*
 * Whether the batch has row's request_id already, as bound (two that
 * differ only in bytes db_text() replaced are the same to PostgreSQL);
 * if not, it is added.
 */

static int
db_id_seen(size_t row)
{
    size_t          k;
    uint32_t        h;
    const char     *p;

    /* FNV-1a */
    h = 2166136261u;

    for (p = db.rows[row].request_id; *p; p++) {
        h = (h ^ (unsigned char) *p) * 16777619u;
    }

    for (k = h & db.ids_mask; db.ids[k]; k = (k + 1) & db.ids_mask) {
        if (strcmp(db.rows[db.ids[k] - 1].request_id,
                   db.rows[row].request_id)
            == 0)
        {
            return 1;
        }
    }

    db.ids[k] = row + 1;

    return 0;
}


/* from the listener: a lease to ask the database for, in order */

int
db_lease(acd_client_t *c, const llm_lease_t *req)
{
    db_lease_t  *l;

    if (db_leases_n == DB_LEASES_MAX) {
        log_warning("%d leases waiting for the database: one more refused",
                    DB_LEASES_MAX);
        return -1;
    }

    l = &db_leases[(db_leases_head + db_leases_n) % DB_LEASES_MAX];
    l->client = c;
    l->req = *req;

    db_leases_n++;

    return 0;
}


static void
db_send_lease(void)
{
    db_lease_t  *l;

    l = &db_leases[db_leases_head];

    if (db_gateway[0] == '\0') {
        if (acd_cf.gateway_name && acd_cf.gateway_name[0]) {
            snprintf(db_gateway, sizeof(db_gateway), "%s",
                     acd_cf.gateway_name);

        } else if (gethostname(db_gateway, sizeof(db_gateway) - 1) != 0) {
            snprintf(db_gateway, sizeof(db_gateway), "gateway");
        }
    }

    db_text(db_lease_model, sizeof(db_lease_model), l->req.model,
              l->req.model_len);

    snprintf(db_lease_num[0], sizeof(db_lease_num[0]), "%lld",
             (long long) l->req.tenant_id);
    snprintf(db_lease_num[1], sizeof(db_lease_num[1]), "%lld",
             (long long) l->req.want);
    snprintf(db_lease_num[2], sizeof(db_lease_num[2]), "%lld",
             (long long) l->req.key_id);
    snprintf(db_lease_num[3], sizeof(db_lease_num[3]), "%lld",
             (long long) l->req.until_ms);

    db.values[0] = db_lease_num[0];
    db.values[1] = db_gateway;
    db.values[2] = db_lease_num[1];
    db.values[3] = db_lease_model;
    db.values[4] = db_lease_num[2];

    db.query = DB_Q_LEASE;

    switch (l->req.type) {

    case LLM_REC_SHARE_REQ:
        db_send(db_share_sql, 3);
        return;

    case LLM_REC_LEASE_RETURN:
        db.values[3] = db_lease_num[3];
        db_send(db_return_sql, 5);
        return;

    default:
        db_send(db_lease_sql, 5);
    }
}


/* the answer goes back to the worker that asked; res NULL: no lease */

static void
db_lease_answer(PGresult *res)
{
    int           i;
    db_lease_t   *l;
    llm_lease_t   a;

    l = &db_leases[db_leases_head];

    memset(&a, 0, sizeof(llm_lease_t));

    a.type = LLM_REC_LEASE;
    a.tenant_id = l->req.tenant_id;
    a.key_id = l->req.key_id;
    a.model_len = l->req.model_len;
    memcpy(a.model, l->req.model, a.model_len);

    if (l->req.type == LLM_REC_LEASE_RETURN) {
        /* nothing to answer: what did not come back stays leased */
        if (res && PQntuples(res) == 1) {
            log_info("tenant %lld key %lld: %s of %lld pico-dollars leased "
                     "given back", (long long) a.tenant_id,
                     (long long) a.key_id, PQgetvalue(res, 0, 0),
                     (long long) l->req.want);
        }

        listener_release(l->client);

        db_leases_head = (db_leases_head + 1) % DB_LEASES_MAX;
        db_leases_n--;
        return;
    }

    if (l->req.type == LLM_REC_SHARE_REQ) {
        a.type = LLM_REC_SHARE;
        a.model_len = 0;

        /* no answer: the whole limits, as a gateway alone has them */
        a.granted = (res && PQntuples(res) == 1)
                    ? strtoll(PQgetvalue(res, 0, 0), NULL, 10) : 1000000;

        log_debug("share for tenant %lld: %lld ppm (demand %lld)",
                  (long long) a.tenant_id, (long long) a.granted,
                  (long long) l->req.want);

    } else if (res && PQntuples(res) == 1) {
        a.granted = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        a.remaining = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
        a.resets_at_ms = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
        a.until_ms = strtoll(PQgetvalue(res, 0, 3), NULL, 10);

        for (i = 0; i < 4; i++) {
            a.prices[i] = strtoll(PQgetvalue(res, 0, 4 + i), NULL, 10);
        }

        if (a.granted > 0) {
            acd_stats.leases_granted++;
            acd_stats.lease_pusd += (uint64_t) a.granted;

        } else {
            acd_stats.leases_refused++;
        }

        log_debug("lease for tenant %lld key %lld: %lld of %lld granted, "
                  "%lld left", (long long) a.tenant_id, (long long) a.key_id,
                  (long long) a.granted,
                  (long long) l->req.want, (long long) a.remaining);

    } else {
        /* -2: not known now */
        a.remaining = -2;

        for (i = 0; i < 4; i++) {
            a.prices[i] = -1;
        }
    }

    listener_lease(l->client, &a);
    listener_release(l->client);

    db_leases_head = (db_leases_head + 1) % DB_LEASES_MAX;
    db_leases_n--;
}


/* as llm.usage.api spells it */

static const char *
db_api_name(uint8_t api)
{
    switch (api) {

    case LLM_API_ANTHROPIC:
        return "anthropic";

    case LLM_API_RESPONSES:
        return "responses";

    default:
        return "openai";
    }
}


/* the first n records are in the database: tell their senders */

static void
db_ack(size_t n)
{
    size_t       i;
    acd_item_t  *item;

    for (i = 0; i < n; i++) {
        item = queue_at(i);
        listener_ack(item->client, &item->rec);
        listener_release(item->client);
    }

    queue_pop(n);
    db.batch_n = 0;
}


static void
db_notice(void *arg, const char *message)
{
    char  buf[DB_ERROR_MAX];

    db_error_text(buf, sizeof(buf), message);
    log_debug("database notice: %s", buf);
}


/* libpq's messages end in a newline and may span lines */

static void
db_error_text(char *buf, size_t cap, const char *msg)
{
    size_t  i, len;

    len = strlen(msg);

    if (len > cap - 1) {
        len = cap - 1;
    }

    for (i = 0; i < len; i++) {
        buf[i] = (msg[i] == '\n' || msg[i] == '\t') ? ' ' : msg[i];
    }

    while (i && buf[i - 1] == ' ') {
        i--;
    }

    buf[i] = '\0';

    log_clean(buf, cap, buf, i);
}
