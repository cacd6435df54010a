
/*
 * accountd: receives settle records from the nginx workers over a Unix
 * socket and writes each one to PostgreSQL exactly once; manages tenants
 * and API keys and writes the key snapshot that nginx loads.
 *
 * One thread, one epoll loop.  Subsystems, one file each, in layers
 * (accountd/LAYERS): a file calls only into the layers below its own.
 *
 *     main.c      arguments, daemon set-up, the order of a loop
 *                 iteration, signals
 *     cli.c       the subcommands (blocking libpq)
 *     metrics.c   the HTTP listener of the counters (Prometheus)
 *     db.c        which query goes next on the database connection
 *     ingest.c    the settle records' batches, their retries and ACKs
 *     lease.c     the workers' lease and share requests
 *     keys.c      LISTEN for key changes, the key snapshot query
 *     dbconn.c    the asynchronous libpq connection's state machine
 *     listener.c  the Unix socket, the peers allowed, accepting
 *     client.c    a worker's connection: frames, ACKs, leases' answers,
 *                 the key set sent to it
 *     keyset.c    the key set pushed to the workers, built once a rewrite
 *     snapshot.c  writing the key snapshot file
 *     queue.c     records and lease requests on their way to the database
 *     stats.c     the counters
 *     conf.c      the configuration file and its table
 *     pq.c        libpq helpers: blocking connect, messages, text
 *     event.c     epoll, the events, the clock
 *     log.c       log lines, gated by verbosity
 */

#ifndef _ACCOUNTD_H_INCLUDED_
#define _ACCOUNTD_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <libpq-fe.h>

#include "llm_key.h"
#include "llm_record.h"


#define ACCOUNTD_VERSION          "0.1.0"
#define ACCOUNTD_DEFAULT_CONF     "/etc/llmgw/accountd.conf"


/* conf.c */

typedef struct {
    char      *database_url;
    char      *listen;
    int        listen_mode;
    char      *listen_group;
    char      *allow_users;
    uid_t     *allow_uids;
    unsigned   nallow_uids;
    char      *key_secret_file;
    char      *key_snapshot;
    char      *pidfile;
    char      *logfile;
    int        verbose;
    int        batch_max;
    int        batch_delay;
    int        queue_max;
    char      *gateway_name;
    char      *metrics_listen;
    int        absent;      /* an optional file that does not exist */
} acd_conf_t;

extern acd_conf_t  acd_cf;
extern char       *acd_conf_file;
extern int         acd_verbose_args;

int conf_load(const char *path, acd_conf_t *cf, int optional);
int conf_reload(void (*changed)(const acd_conf_t *old));
void conf_free(acd_conf_t *cf);
void conf_log_unset(const char *name);
int conf_parse_addr(const char *s, struct sockaddr_storage *sa,
    socklen_t *len);


/* log.c */

typedef enum {
    ACD_LOG_FATAL = 0,
    ACD_LOG_ERROR,
    ACD_LOG_WARNING,
    ACD_LOG_INFO,
    ACD_LOG_DEBUG,
    ACD_LOG_NOISE,
    ACD_LOG_TRACE
} acd_log_level_e;

extern int  acd_verbose;

int log_open(const char *path);
void log_close(void);
void log_msg(acd_log_level_e level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void log_fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));
size_t log_clean(char *dst, size_t cap, const char *src, size_t len);

#define log_error(...)    log_msg(ACD_LOG_ERROR, __VA_ARGS__)
#define log_warning(...)  log_msg(ACD_LOG_WARNING, __VA_ARGS__)
#define log_info(...)     log_msg(ACD_LOG_INFO, __VA_ARGS__)

/* the argument list is not even evaluated below the verbosity */
#define log_debug(...)                                                        \
    do {                                                                      \
        if (acd_verbose >= 1) log_msg(ACD_LOG_DEBUG, __VA_ARGS__);            \
    } while (0)
#define log_noise(...)                                                        \
    do {                                                                      \
        if (acd_verbose >= 2) log_msg(ACD_LOG_NOISE, __VA_ARGS__);            \
    } while (0)
#define log_trace(...)                                                        \
    do {                                                                      \
        if (acd_verbose >= 3) log_msg(ACD_LOG_TRACE, __VA_ARGS__);            \
    } while (0)


/* event.c */

typedef struct acd_event_s  acd_event_t;

typedef void (*acd_event_handler_pt)(acd_event_t *ev, uint32_t events);

struct acd_event_s {
    int                    fd;
    uint32_t               events;
    unsigned               active:1;
    acd_event_handler_pt   handler;
    void                  *data;
};

extern int  acd_shutting_down;

int event_init(void);
void event_done(void);
int event_set(acd_event_t *ev, uint32_t events);
void event_del(acd_event_t *ev);
int64_t event_now(void);
int event_process(int64_t at);


/* listener.c */

extern void  (*listener_connected)(void);

int listener_init(void);
void listener_close(void);
void listener_recheck(void);


/* client.c */

typedef struct acd_client_s  acd_client_t;

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


/* queue.c */

#define QUEUE_LEASES_MAX          1024

typedef struct {
    llm_record_t    rec;
    acd_client_t   *client;
} acd_item_t;

typedef struct {
    llm_lease_t     req;
    acd_client_t   *client;
} acd_lease_item_t;

int queue_init(size_t max);
size_t queue_len(void);
int queue_full(void);
int queue_has_room(void);
acd_item_t *queue_push(void);
acd_item_t *queue_at(size_t i);
void queue_pop(size_t n);
acd_lease_item_t *queue_lease_push(void);
acd_lease_item_t *queue_lease_head(void);
void queue_lease_pop(void);


/* pq.c */

#define PQ_ERROR_MAX              512

PGconn *pq_connect(const char *url, int timeout);
void pq_error_text(char *buf, size_t cap, const char *msg);
void pq_text(char *dst, size_t cap, const char *src, size_t len);
void pq_notice(void *arg, const char *message);


/* dbconn.c */

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


/* ingest.c */

int ingest_init(void);
void ingest_kick(void);
int64_t ingest_timer_at(void);
int ingest_retrying(void);


/* lease.c */

int lease_waiting(void);
void lease_send(void);


/* keys.c */

int keys_init(void);
void keys_start(int written);
void keys_request(void);
int keys_wanted(void);
void keys_send(void);
int64_t keys_timer_at(void);
void keys_timer(int64_t now);
void keys_close(void);


/* db.c */

int db_init(void);
void db_start(int snapshot_written);
void db_kick(void);
int64_t db_timer_at(void);
void db_timer(int64_t now);
int db_flushable(void);
void db_close(void);


/* snapshot.c */

/*
 * An expiry is written rounded down: nginx may refuse a key up to a second
 * early, never accept it late; 'infinity', which SQL allows, is never.
 * Column 7 is the same on every row: the milliseconds until the next key
 * expires, NULL if none will.  Column 8 says which caps the key answers to
 * (1: its tenant's, 2: its own; sql/007).
 */
#define SNAPSHOT_QUERY                                                        \
    "SELECT encode(k.key_hash, 'hex'), k.key_id, k.tenant_id, k.tier,"        \
    " t.name,"                                                                \
    " CASE WHEN isfinite(k.expires_at)"                                       \
    " THEN floor(extract(epoch FROM k.expires_at))::bigint ELSE 0 END,"       \
    " coalesce(array_to_string(k.models, ','), '*'),"                         \
    " (extract(epoch FROM min(k.expires_at)"                                  \
    " FILTER (WHERE isfinite(k.expires_at)) OVER () - now()) * 1000)::bigint,"\
    " (t.daily_cap_pusd IS NOT NULL OR t.monthly_cap_pusd IS NOT NULL)::int"  \
    " + 2 * (k.daily_cap_pusd IS NOT NULL"                                    \
    " OR k.monthly_cap_pusd IS NOT NULL)::int"                                \
    " FROM llm.api_keys k JOIN llm.tenants t USING (tenant_id)"               \
    " WHERE k.revoked_at IS NULL"                                             \
    " AND (k.expires_at IS NULL OR k.expires_at > now())"                     \
    " ORDER BY k.key_id"

int snapshot_lock(const char *path, int wait);
void snapshot_unlock(int fd);
int snapshot_write(const char *path, PGresult *res, uint64_t generation,
    int64_t *next_expiry);
uint64_t snapshot_generation(void);
int snapshot_blocking(PGconn *conn, const char *path,
    int (*publish)(PGresult *res, uint64_t generation));
int snapshot_entry(PGresult *res, int row, llm_key_entry_t *e);


/* keyset.c */

typedef struct {
    uint64_t   generation;
    uint32_t   count;
    unsigned   refs;
    size_t     len;
    uint8_t   *data;           /* BEGIN, count KEY frames, END */
} acd_keyset_t;

int keyset_publish(PGresult *res, uint64_t generation);
acd_keyset_t *keyset_newest(void);
void keyset_ref(acd_keyset_t *ks);
void keyset_unref(acd_keyset_t *ks);
void keyset_done(void);


/* stats.c */

/* records a batch: 1, 2, 4 ... 4096 (batch_max's largest) */
#define STATS_BATCH_BUCKETS       13
/* seconds from a batch's statement sent to its commit's result */
#define STATS_RTT_BUCKETS         12

typedef struct {
    uint64_t   records_received;
    uint64_t   records_committed;
    uint64_t   records_rejected;
    uint64_t   records_dropped;
    uint64_t   batches;
    uint64_t   batch_bucket[STATS_BATCH_BUCKETS];
    uint64_t   batch_sum;
    uint64_t   rtt_bucket[STATS_RTT_BUCKETS];
    uint64_t   rtt_sum_us;
    uint64_t   db_reconnects;
    uint64_t   leases_granted;
    uint64_t   leases_refused;
    uint64_t   lease_pusd;
    uint64_t   keysets_pushed;
    uint64_t   peers_refused;
} acd_stats_t;

/* a bucket's upper bound, and as printed */
typedef struct {
    int64_t      usec;
    const char  *le;
} stats_le_t;

extern acd_stats_t       acd_stats;
extern const stats_le_t  stats_rtt_le[STATS_RTT_BUCKETS];

int64_t stats_usec(void);
void stats_batch(size_t n, size_t rejected, int64_t usec);


/* metrics.c */

int metrics_init(void);
void metrics_close(void);
int64_t metrics_timer_at(void);
void metrics_timer(int64_t now);


/* cli.c */

int cli_main(int argc, char **argv);


#endif /* _ACCOUNTD_H_INCLUDED_ */
