
/*
 * A deterministic simulation of the road of a settle record: nginx workers
 * sharing one journal and one table of requests in flight, their Unix
 * socket connections to accountd, accountd's queue and its batches into
 * PostgreSQL.  One seed drives everything: requests arriving and
 * settling, how the sockets cut the bytes, the order of events, and
 * faults at any step: a worker killed (its records reaped by the others,
 * its requests in flight settled by them; a new worker may get its pid)
 * or reloaded, accountd killed or stopped, PostgreSQL restarted or a
 * statement failing, its commit's answer lost, a connection broken with
 * bytes in flight, accountd answering out of order or twice.  Then the
 * faults stop, everything drains, and the invariants are checked:
 *
 *     (a) every request settled, by its worker or by another, has
 *         exactly one row, with the figures of its record, and no other
 *         request has one; no request is left in flight
 *     (b) no request_id twice, none refused for other figures
 *     (d) nothing outstanding: the journal empty (every record
 *         acknowledged, the ring reclaimed), no place held, accountd's
 *         queue empty
 *
 * Spend caps (c) are not modelled.  The simulation found that a worker
 * killed between a request's journal place and its flight left the place
 * held (admit.c now takes both under the zone's lock), and that a killed
 * worker's flights went unsettled when a new worker got its pid (the new
 * one now settles them first).
 *
 * Real code: the journal (llm_journal.c) shared by the workers, the codec
 * (llm_record.c, llm_key.c's frame type) for every byte on the sockets,
 * accountd's queue (accountd/queue.c).  Modelled, step by step after the
 * code they stand for: the worker's events (ngx_http_llm_gateway_
 * accountd.c: flush, read, close, retry, reap; settle.c: the flights and
 * their reaper), accountd's connections (client.c), its loop (main.c)
 * and batches (ingest.c), PostgreSQL as INSERT ... ON CONFLICT on
 * request_id, the kernel's socket buffers, the clock.  A crash while a
 * lock is held is not modelled: each call into the journal is atomic.
 *
 *     sim_protocol                  seeds 1 to 10000 (LLMGW_CHAOS_LONG=1:
 *                                   200000 from a random one)
 *     sim_protocol --seeds N --from S
 *     sim_protocol --seed N [-v]    one seed again, step by step with -v
 */


#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "accountd.h"
#include "queue.h"
#include "llm_journal.h"
#include "llm_key.h"
#include "llm_record.h"
#include "tap.h"


#define SIM_WORKERS_MAX     8
#define SIM_CONNS_MAX       48
#define SIM_CLIENTS_MAX     48
#define SIM_REQS_MAX        160
#define SIM_INFLIGHT_MAX    24
#define SIM_PIPE_MAX        2048
#define SIM_RING_MAX        (16 * LLM_JOURNAL_PLACE)
#define SIM_OUT_MAX         2048
#define SIM_WINDOW_MAX      64
#define SIM_W_IN            (2 * LLM_RECORD_MAX_FRAME)
#define SIM_C_IN_MAX        2048
#define SIM_C_OUT           ((SIM_WINDOW_MAX + 4) * LLM_RECORD_MAX_FRAME)
#define SIM_BATCH_MAX       8
#define SIM_QUEUE_MAX       6

/* a drain ends within: the longest back-offs and then some */
#define SIM_DRAIN_STEPS     100000
#define SIM_DRAIN_TIME      300000

/* the worker's, as in ngx_http_llm_gateway_accountd.c */
#define SIM_RETRY_MIN       250
#define SIM_RETRY_MAX       4000
#define SIM_REAP            1000
#define SIM_REAP_FLIGHTS    1000

/* accountd's, as in dbconn.c and main.c */
#define SIM_DB_BACKOFF_MIN  500
#define SIM_DB_BACKOFF_MAX  30000
#define SIM_SHUTDOWN_WAIT   2000

#define SIM_AGAIN           -2
#define SIM_ERROR           -1


typedef enum {
    SIM_REQ_NONE = 0,
    SIM_REQ_INFLIGHT,           /* in the zone's flights, with its place */
    SIM_REQ_REFUSED,            /* 503: no place in the journal */
    SIM_REQ_ABORTED,            /* refused after its place, given back */
    SIM_REQ_WRITTEN,            /* settled: its record is in the journal */
    SIM_REQ_LOST                /* settled without a place, did not fit */
} sim_req_state_e;


typedef enum {
    SIM_DB_DOWN = 0,
    SIM_DB_IDLE,
    SIM_DB_BUSY
} sim_db_state_e;


/* the faults, in the order of the counts printed */
typedef enum {
    SIM_F_WORKER = 0,           /* kill -9 of a worker */
    SIM_F_RELOAD,               /* a new generation, the old one exits */
    SIM_F_ACCOUNTD,             /* kill -9 of accountd */
    SIM_F_STOP,                 /* accountd stopped (SIGTERM) */
    SIM_F_PG,                   /* PostgreSQL restarted */
    SIM_F_FAIL,                 /* a statement fails */
    SIM_F_COMMIT_LOST,          /* committed, the answer lost */
    SIM_F_BREAK,                /* a connection broken, bytes in flight */
    SIM_F_W_CLOSE,              /* the worker closes its connection */
    SIM_F_A_CLOSE,              /* accountd closes a client */
    SIM_F_REORDER,              /* accountd acknowledges out of order */
    SIM_F_DUP_ACK,              /* accountd acknowledges twice */
    SIM_F_N
} sim_fault_e;


static const char  *sim_fault_names[SIM_F_N] = {
    "worker killed", "reload", "accountd killed", "accountd stopped",
    "postgres restarted", "statement failed", "commit answer lost",
    "connection broken", "worker closed", "accountd closed",
    "acks reordered", "ack doubled"
};


typedef struct {
    size_t                cap;
    size_t                len;
    uint8_t               buf[SIM_PIPE_MAX];
} sim_pipe_t;


/* a Unix stream socket: what one end sent and the other has not read */
typedef struct {
    unsigned              used:1;
    unsigned              w_open:1;       /* the worker's end */
    unsigned              a_open:1;       /* accountd's (or its backlog) */
    unsigned              broken:1;       /* neither end gets more */
    int                   id;
    int                   worker;
    sim_pipe_t            up;             /* worker to accountd */
    sim_pipe_t            down;           /* accountd to worker */
    acd_client_t         *client;         /* once accepted */
} sim_conn_t;


/* client.c's connection, as much of it as carries records */
struct acd_client_s {
    unsigned              used:1;
    unsigned              eof:1;
    unsigned              closed:1;
    unsigned              write_failed:1;
    unsigned              dirty:1;
    int                   id;
    sim_conn_t           *conn;
    size_t                pending;
    size_t                in_len;
    size_t                out_pos;
    size_t                out_len;
    uint8_t               in[SIM_C_IN_MAX];
    uint8_t               out[SIM_C_OUT];
};


typedef struct {
    sim_req_state_e       state;
    int                   worker;         /* -1: its worker was killed */
    int32_t               pid;            /* the flight's */
    unsigned              held:1;
    unsigned              reaped:1;       /* settled by another worker */
    unsigned              committed:1;
    uint32_t              again;          /* inserts ON CONFLICT skipped */
    llm_record_t          rec;            /* as settled */
    llm_record_t          row;            /* as committed */
} sim_req_t;


/* a worker: ngx_http_llm_gateway_accountd_t and its requests */
typedef struct {
    unsigned              alive:1;
    unsigned              exiting:1;
    unsigned              write_ready:1;
    unsigned              send_posted:1;
    unsigned              down:1;
    int32_t               pid;
    sim_conn_t           *conn;
    size_t                pos;
    size_t                last;
    llm_journal_window_t  window;
    size_t                in_len;
    int64_t               reconnect_at;   /* 0: no timer */
    int64_t               reap_at;
    int64_t               flights_at;     /* settle.c's reaper */
    int64_t               retry;
    int                   ninflight;

    /* not cleared when a worker starts */
    int                   inflight[SIM_INFLIGHT_MAX];
    uint64_t              sent[SIM_WINDOW_MAX];
    uint8_t               in[SIM_W_IN];
    uint8_t               out[SIM_OUT_MAX];
} sim_worker_t;


typedef enum {
    SIM_A_ARRIVE = 0,
    SIM_A_SETTLE,
    SIM_A_POSTED,
    SIM_A_WRITABLE,
    SIM_A_READABLE,
    SIM_A_RECONNECT,
    SIM_A_REAP,
    SIM_A_FLIGHTS,
    SIM_A_EXIT,
    SIM_A_ACCEPT,
    SIM_A_C_READ,
    SIM_A_C_WRITE,
    SIM_A_DB_RESULT,
    SIM_A_ACD_TIMER,
    SIM_A_ACD_START,
    SIM_A_PG_START,
    SIM_A_N
} sim_action_e;


static const char  *sim_action_names[SIM_A_N] = {
    "arrive", "settle", "send", "writable", "readable", "reconnect", "reap",
    "reap flights", "exit", "accept", "client read", "client write", "db result",
    "accountd timer", "accountd start", "postgres start"
};


typedef struct {
    int                   action;
    int                   who;
    uint32_t              weight;
} sim_choice_t;


typedef struct {
    uint64_t              seeds;
    uint64_t              steps;
    uint64_t              settled;
    uint64_t              refused;
    uint64_t              lost;
    uint64_t              died;           /* in flight when killed */
    uint64_t              flights;        /* settled by another worker */
    uint64_t              reused;         /* by a new worker with its pid */
    uint64_t              again;          /* duplicates ON CONFLICT kept out */
    uint64_t              reaped;
    uint64_t              adopted;
    uint64_t              padded;
    uint64_t              mismatched;     /* ACKs the worker refused */
    uint64_t              paused;
    uint64_t              cut_frames;     /* a frame cut by a broken socket */
    uint64_t              faults[SIM_F_N];
} sim_stats_t;


typedef struct {
    /* this seed's shape */
    uint64_t              seed;
    uint64_t              rng;
    int                   nworkers;
    size_t                ring_size;
    size_t                window_cap;
    size_t                out_size;
    size_t                pipe_cap;
    size_t                c_in_cap;
    size_t                batch_max;
    int                   full_admit;
    int                   pid_reuse;
    int                   nreqs_max;
    int                   active_steps;
    uint32_t              fault_ppm;
    uint32_t              fault_weight[SIM_F_N];

    /* the world */
    int64_t               now;
    uint64_t              step;
    int                   draining;
    int64_t               drain_until;
    int                   failed;
    char                  why[256];
    int32_t               next_pid;
    int                   next_id;

    llm_journal_t         journal;
    uint8_t               ring[SIM_RING_MAX] __attribute__((aligned(16)));

    sim_worker_t          workers[SIM_WORKERS_MAX];
    sim_conn_t            conns[SIM_CONNS_MAX];

    /* accountd */
    int                   acd_up;
    int                   acd_stopping;
    int64_t               acd_start_at;
    int64_t               acd_stop_at;
    int                   paused;
    acd_client_t          clients[SIM_CLIENTS_MAX];

    /* dbconn.c's and ingest.c's state, and what the server was sent */
    sim_db_state_e        db_state;
    int64_t               db_timer_at;
    int64_t               db_backoff;
    size_t                batch_n;
    llm_record_t          batch[SIM_BATCH_MAX];

    /* PostgreSQL */
    int                   pg_up;
    int64_t               pg_start_at;

    int                   nreqs;
    sim_req_t             reqs[SIM_REQS_MAX];

    int                   spawn_owed;
    sim_fault_e           misack;         /* armed for the next batch */
    uint64_t              trail;

    sim_stats_t           st;
} sim_t;


static uint64_t sim_rand(void);
static uint32_t sim_below(uint32_t n);
static int sim_ppm(uint32_t ppm);
static void sim_trace(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void sim_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static ssize_t sim_recv(sim_conn_t *c, int worker, uint8_t *buf,
    size_t size);
static ssize_t sim_send(sim_conn_t *c, int worker, const uint8_t *buf,
    size_t size);
static sim_conn_t *sim_conn_new(int worker);
static void sim_conn_gc(sim_conn_t *c);
static void sim_conn_close_worker(sim_conn_t *c);
static void sim_conn_close_accountd(sim_conn_t *c);

static void sim_worker_spawn(int reuse);
static void sim_worker_connect(sim_worker_t *w);
static void sim_worker_retry(sim_worker_t *w);
static void sim_worker_flush(sim_worker_t *w);
static void sim_worker_claim(sim_worker_t *w);
static void sim_worker_read(sim_worker_t *w);
static int sim_worker_frame(sim_worker_t *w, uint8_t *buf, size_t len,
    size_t *used);
static void sim_worker_close(sim_worker_t *w);
static void sim_worker_release(sim_worker_t *w);
static void sim_worker_reap(sim_worker_t *w);
static int sim_alive(int32_t pid, void *data);
static void sim_worker_exit(sim_worker_t *w);
static void sim_worker_kill(sim_worker_t *w);
static void sim_worker_flights(sim_worker_t *w, int first);
static void sim_arrive(sim_worker_t *w);
static void sim_settle(sim_worker_t *w);
static void sim_record(sim_worker_t *w, sim_req_t *r, int k);

static void sim_acd_start(void);
static void sim_acd_kill(void);
static void sim_acd_iteration(void);
static void sim_acd_accept(sim_conn_t *conn);
static void sim_client_read(acd_client_t *c);
static void sim_client_process(acd_client_t *c);
static void sim_client_write(acd_client_t *c);
static void sim_client_close(acd_client_t *c);
static void sim_client_free(acd_client_t *c);
static void sim_client_ack(acd_client_t *c, const llm_record_t *rec);
static void sim_client_release(acd_client_t *c);
static void sim_client_resume(void);
static void sim_db_send(void);
static void sim_db_commit(size_t n);
static void sim_db_done(void);
static void sim_db_down(void);
static void sim_db_timer(void);

static void sim_fault(void);
static int sim_misack(acd_client_t *c, sim_fault_e f);
static int sim_choices(sim_choice_t *ch, uint32_t *total);
static void sim_act(sim_choice_t *c);
static int64_t sim_next_timer(void);
static const char *sim_quiet(void);
static void sim_check_step(void);
static void sim_check_end(void);
static int sim_run(uint64_t seed);
static void sim_mix(uint64_t v);
static uint64_t sim_digest(void);


static sim_t   sim;
static int     sim_verbose;


int
main(int argc, char **argv)
{
    int              i, one, failures;
    char            *env;
    double           secs;
    uint64_t         from, seeds, seed, again, d1, d2, s, f;
    sim_stats_t      total;
    struct timespec  t0, t1;

    from = 1;
    seeds = 10000;
    one = 0;

    env = getenv("LLMGW_CHAOS_LONG");

    if (env && strcmp(env, "1") == 0) {
        seeds = 200000;
        from = 1 + ((uint64_t) time(NULL) * 2654435761u + getpid())
                   % 1000000000;
    }

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            from = strtoull(argv[++i], NULL, 10);
            seeds = 1;
            one = 1;

        } else if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
            seeds = strtoull(argv[++i], NULL, 10);

        } else if (strcmp(argv[i], "--from") == 0 && i + 1 < argc) {
            from = strtoull(argv[++i], NULL, 10);

        } else if (strcmp(argv[i], "-v") == 0) {
            sim_verbose = 1;

        } else {
            fprintf(stderr, "usage: %s [--seeds N] [--from S] "
                    "[--seed N [-v]]\n", argv[0]);
            return 2;
        }
    }

    /* accountd's ring, a few records long, so that it fills and pauses */
    if (queue_init(SIM_QUEUE_MAX) != 0) {
        return 2;
    }

    printf("# seeds %" PRIu64 " to %" PRIu64 "\n", from, from + seeds - 1);

    memset(&total, 0, sizeof(sim_stats_t));
    failures = 0;
    again = from + seeds / 2;
    d1 = 0;

    clock_gettime(CLOCK_MONOTONIC, &t0);

    for (seed = from; seed < from + seeds; seed++) {

        if (sim_run(seed) != 0) {
            failures++;

            printf("# seed %" PRIu64 " failed at step %" PRIu64 ": %s\n"
                   "#   replay: sim_protocol --seed %" PRIu64 " -v\n",
                   seed, sim.step, sim.why, seed);

            if (failures >= 10) {
                printf("# stopping after 10 failed seeds\n");
                break;
            }
        }

        if (seed == again) {
            d1 = sim_digest();
        }

        total.seeds++;
        total.steps += sim.st.steps;
        total.settled += sim.st.settled;
        total.refused += sim.st.refused;
        total.lost += sim.st.lost;
        total.died += sim.st.died;
        total.flights += sim.st.flights;
        total.reused += sim.st.reused;
        total.again += sim.st.again;
        total.reaped += sim.st.reaped;
        total.adopted += sim.st.adopted;
        total.padded += sim.st.padded;
        total.mismatched += sim.st.mismatched;
        total.paused += sim.st.paused;
        total.cut_frames += sim.st.cut_frames;

        for (f = 0; f < SIM_F_N; f++) {
            total.faults[f] += sim.st.faults[f];
        }
    }

    clock_gettime(CLOCK_MONOTONIC, &t1);
    secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;

    tap_ok(failures == 0, "%" PRIu64 " seeds: invariants (a), (b), (d) "
           "after every one", total.seeds);

    printf("# %.1f s, %.0f seeds/s, %" PRIu64 " steps; %" PRIu64
           " records settled (%" PRIu64 " by another worker, %" PRIu64
           " of them by one with the dead one's pid), %" PRIu64
           " requests refused (journal full), %" PRIu64 " records lost "
           "(full=admit), %" PRIu64 " requests died with a worker\n", secs,
           total.seeds / (secs > 0 ? secs : 1), total.steps, total.settled,
           total.flights, total.reused, total.refused, total.lost,
           total.died);
    printf("# %" PRIu64 " duplicates kept out by ON CONFLICT, %" PRIu64
           " records reaped, %" PRIu64 " adopted, %" PRIu64 " paddings, "
           "%" PRIu64 " ACKs refused, %" PRIu64 " queue pauses, %" PRIu64
           " frames cut\n", total.again, total.reaped, total.adopted,
           total.padded, total.mismatched, total.paused, total.cut_frames);

    printf("#");
    for (f = 0; f < SIM_F_N; f++) {
        printf(" %s %" PRIu64 "%s", sim_fault_names[f], total.faults[f],
               f + 1 < SIM_F_N ? "," : "\n");
    }

    if (one) {
        return tap_done();
    }

    /* what the runs above went through, so that they prove something */

    s = 0;
    for (f = 0; f < SIM_F_N; f++) {
        s += (total.faults[f] > 0);
    }

    if (seeds >= 1000) {
        tap_ok(s == SIM_F_N && total.again && total.reaped && total.padded
               && total.mismatched && total.paused && total.cut_frames
               && total.refused && total.lost && total.died
               && total.adopted && total.flights && total.reused,
               "every fault happened, and every path they lead to");
    }

    /* a seed replays exactly, whatever ran before it */

    if (again < seed) {
        sim_run(again);
        d2 = sim_digest();

        tap_ok(d1 == d2, "seed %" PRIu64 " again: the same steps, the same "
               "end", again);
    }

    return tap_done();
}


/* splitmix64 */

static uint64_t
sim_rand(void)
{
    uint64_t  z;

    z = (sim.rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;

    return z ^ (z >> 31);
}


static uint32_t
sim_below(uint32_t n)
{
    return n ? (uint32_t) (sim_rand() % n) : 0;
}


static int
sim_ppm(uint32_t ppm)
{
    return sim_below(1000000) < ppm;
}


static void
sim_trace(const char *fmt, ...)
{
    va_list  ap;

    if (!sim_verbose) {
        return;
    }

    printf("# %6" PRIu64 " %7lld ", sim.step, (long long) sim.now);

    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);

    printf("\n");
}


static void
sim_fail(const char *fmt, ...)
{
    va_list  ap;

    if (sim.failed) {
        return;
    }

    sim.failed = 1;

    va_start(ap, fmt);
    vsnprintf(sim.why, sizeof(sim.why), fmt, ap);
    va_end(ap);

    sim_trace("FAILED: %s", sim.why);
}


/*
 * The socket, as read and written from one end: bytes, 0 at the end of
 * what the peer sent before it closed, SIM_AGAIN, SIM_ERROR.  The kernel
 * may hand over fewer bytes than asked for, and does here.
 */

static ssize_t
sim_recv(sim_conn_t *c, int worker, uint8_t *buf, size_t size)
{
    size_t       n;
    sim_pipe_t  *p;

    p = worker ? &c->down : &c->up;

    if (p->len == 0) {
        if (c->broken || !(worker ? c->a_open : c->w_open)) {
            return 0;
        }

        return SIM_AGAIN;
    }

    n = p->len < size ? p->len : size;

    if (sim_below(3) == 0) {
        n = 1 + sim_below((uint32_t) n);
    }

    memcpy(buf, p->buf, n);
    memmove(p->buf, p->buf + n, p->len - n);
    p->len -= n;

    return (ssize_t) n;
}


static ssize_t
sim_send(sim_conn_t *c, int worker, const uint8_t *buf, size_t size)
{
    size_t       n;
    sim_pipe_t  *p;

    p = worker ? &c->up : &c->down;

    if (c->broken || !(worker ? c->a_open : c->w_open)) {
        return SIM_ERROR;
    }

    if (p->len == p->cap) {
        return SIM_AGAIN;
    }

    n = p->cap - p->len;
    n = n < size ? n : size;

    if (sim_below(4) == 0) {
        n = 1 + sim_below((uint32_t) n);
    }

    memcpy(p->buf + p->len, buf, n);
    p->len += n;

    return (ssize_t) n;
}


static sim_conn_t *
sim_conn_new(int worker)
{
    int          i;
    sim_conn_t  *c;

    for (i = 0; i < SIM_CONNS_MAX; i++) {
        c = &sim.conns[i];

        if (c->used) {
            continue;
        }

        c->used = 1;
        c->w_open = 1;
        c->a_open = 1;
        c->broken = 0;
        c->id = sim.next_id++;
        c->worker = worker;
        c->up.cap = sim.pipe_cap;
        c->up.len = 0;
        c->down.cap = sim.pipe_cap;
        c->down.len = 0;
        c->client = NULL;

        return c;
    }

    return NULL;
}


static void
sim_conn_gc(sim_conn_t *c)
{
    if (!c->w_open && !c->a_open) {
        c->used = 0;
    }
}


/* what the worker had not read is gone; what it sent is still read */

static void
sim_conn_close_worker(sim_conn_t *c)
{
    c->w_open = 0;
    c->down.len = 0;
    c->worker = -1;

    sim_conn_gc(c);
}


static void
sim_conn_close_accountd(sim_conn_t *c)
{
    c->a_open = 0;
    c->up.len = 0;
    c->client = NULL;

    sim_conn_gc(c);
}


/* --- the workers: ngx_http_llm_gateway_accountd.c ----------------------- */


static void
sim_worker_spawn(int reuse)
{
    int            i, k, n;
    int32_t        pid, dead[SIM_WORKERS_MAX];
    sim_worker_t  *w;

    for (i = 0; i < SIM_WORKERS_MAX; i++) {
        if (!sim.workers[i].alive) {
            break;
        }
    }

    if (i == SIM_WORKERS_MAX) {
        /* a slot is freed when an exiting worker is done */
        sim.spawn_owed++;
        return;
    }

    w = &sim.workers[i];
    pid = sim.next_pid++;

    /* a pid the kernel gives again, that of a worker that died */

    if (reuse && sim.pid_reuse) {
        n = 0;

        for (k = 0; k < SIM_WORKERS_MAX; k++) {
            if (!sim.workers[k].alive && sim.workers[k].pid
                && !sim_alive(sim.workers[k].pid, NULL))
            {
                dead[n++] = sim.workers[k].pid;
            }
        }

        if (n) {
            pid = dead[sim_below(n)];
        }
    }

    memset(w, 0, offsetof(sim_worker_t, inflight));

    w->alive = 1;
    w->pid = pid;
    w->window.pos = w->sent;
    w->window.cap = sim.window_cap;

    sim_trace("w%d: started, pid %d", i, (int) pid);

    /* settle.c's reaper_init(): flights under its pid are a dead one's */
    sim_worker_flights(w, 1);

    /* ngx_http_llm_gateway_accountd_init() */
    sim.st.adopted += llm_journal_adopt(&sim.journal, pid);

    w->reap_at = sim.now + SIM_REAP;
    w->flights_at = sim.now + SIM_REAP_FLIGHTS;

    sim_worker_connect(w);
}


static void
sim_worker_connect(sim_worker_t *w)
{
    int  i;

    i = (int) (w - sim.workers);

    /* accountd away: no socket, or one nobody listens on */
    if (!sim.acd_up || sim.acd_stopping) {
        sim_trace("w%d: connect failed", i);
        w->down = 1;
        sim_worker_retry(w);
        return;
    }

    w->conn = sim_conn_new(i);
    if (w->conn == NULL) {
        sim_fail("out of simulated connections");
        return;
    }

    sim_trace("w%d: connected, c%d", i, w->conn->id);

    /* a Unix socket connects at once: NGX_OK, writable */
    w->write_ready = 1;
    w->down = 0;
    w->retry = 0;
    w->in_len = 0;

    sim_worker_flush(w);
}


static void
sim_worker_retry(sim_worker_t *w)
{
    if (w->exiting || w->reconnect_at) {
        return;
    }

    w->retry = w->retry ? (w->retry * 2 < SIM_RETRY_MAX ? w->retry * 2
                                                        : SIM_RETRY_MAX)
                        : SIM_RETRY_MIN;

    w->reconnect_at = sim.now + w->retry;
}


static void
sim_worker_flush(sim_worker_t *w)
{
    ssize_t  n;

    if (!w->write_ready) {
        return;
    }

    for ( ;; ) {

        if (w->pos == w->last) {
            sim_worker_claim(w);

            if (w->pos == w->last) {
                return;
            }
        }

        n = sim_send(w->conn, 1, w->out + w->pos, w->last - w->pos);

        if (n == SIM_AGAIN) {
            w->write_ready = 0;
            return;
        }

        if (n == SIM_ERROR) {
            sim_worker_close(w);
            return;
        }

        if ((size_t) n < w->last - w->pos) {
            /* ngx_unix_send(): a short write, not ready until the event */
            w->write_ready = 0;
            w->pos += n;
            return;
        }

        w->pos += n;
    }
}


static void
sim_worker_claim(sim_worker_t *w)
{
    size_t  n;

    n = llm_journal_claim(&sim.journal, w->pid, &w->window, w->out,
                          sim.out_size);

    w->pos = 0;
    w->last = n;

    if (n) {
        sim_trace("w%d: claimed %zu bytes, window %zu",
                  (int) (w - sim.workers), n, w->window.n);
    }
}


static void
sim_worker_read(sim_worker_t *w)
{
    int      rc;
    size_t   used, pos;
    ssize_t  n;

    for ( ;; ) {
        n = sim_recv(w->conn, 1, w->in + w->in_len,
                     sizeof(w->in) - w->in_len);

        if (n == SIM_AGAIN) {
            break;
        }

        if (n == SIM_ERROR || n == 0) {
            sim_trace("w%d: accountd closed the connection",
                      (int) (w - sim.workers));
            sim_worker_close(w);
            return;
        }

        w->in_len += n;
        pos = 0;

        for ( ;; ) {
            rc = sim_worker_frame(w, w->in + pos, w->in_len - pos, &used);

            if (rc == 0) {
                break;
            }

            if (rc < 0) {
                sim_trace("w%d: unexpected frame, reconnecting",
                          (int) (w - sim.workers));
                sim.st.mismatched++;
                sim_worker_close(w);
                return;
            }

            pos += used;
        }

        memmove(w->in, w->in + pos, w->in_len - pos);
        w->in_len -= pos;
    }

    if (w->conn && w->pos == w->last) {
        sim_worker_flush(w);
    }
}


static int
sim_worker_frame(sim_worker_t *w, uint8_t *buf, size_t len, size_t *used)
{
    int           rc;
    llm_record_t  ack;

    switch (llm_key_frame_type(buf, len)) {

    case -1:
        return 0;

    case LLM_REC_ACK:
        rc = llm_record_decode(buf, len, &ack, used);

        if (rc == 1
            && llm_journal_ack(&sim.journal, w->pid, &w->window,
                               (uint8_t *) ack.request_id,
                               ack.request_id_len)
               != 0)
        {
            return -1;
        }

        return rc;

    default:
        return -1;
    }
}


static void
sim_worker_close(sim_worker_t *w)
{
    if (w->conn) {
        sim_conn_close_worker(w->conn);
        w->conn = NULL;
    }

    sim_worker_release(w);

    w->down = 1;

    sim_worker_retry(w);
}


static void
sim_worker_release(sim_worker_t *w)
{
    llm_journal_release(&sim.journal, w->pid, &w->window);

    w->pos = 0;
    w->last = 0;
}


static void
sim_worker_reap(sim_worker_t *w)
{
    size_t   n;
    int32_t  dead;

    n = llm_journal_reap(&sim.journal, w->pid, sim_alive, NULL, &dead);

    if (n) {
        sim_trace("w%d: %zu records of pid %d to send again",
                  (int) (w - sim.workers), n, (int) dead);
        sim.st.reaped += n;
    }

    if (w->conn) {
        sim_worker_flush(w);
    }

    w->reap_at = w->exiting ? 0 : sim.now + SIM_REAP;
}


static int
sim_alive(int32_t pid, void *data)
{
    int  i;

    for (i = 0; i < SIM_WORKERS_MAX; i++) {
        if (sim.workers[i].alive && sim.workers[i].pid == pid) {
            return 1;
        }
    }

    return 0;
}


/* ngx_http_llm_gateway_accountd_exit(): the last request is done */

static void
sim_worker_exit(sim_worker_t *w)
{
    sim_trace("w%d: exits", (int) (w - sim.workers));

    w->send_posted = 0;

    if (w->conn) {
        sim_conn_close_worker(w->conn);
        w->conn = NULL;
    }

    sim_worker_release(w);

    w->alive = 0;
}


/*
 * kill -9: nothing given back.  What it sent waits for a journal reaper,
 * its flights for a flight reaper.
 */

static void
sim_worker_kill(sim_worker_t *w)
{
    int         i;
    sim_req_t  *r;

    sim_trace("w%d: killed, %d requests in flight",
              (int) (w - sim.workers), w->ninflight);

    if (w->conn) {
        sim_conn_close_worker(w->conn);
        w->conn = NULL;
    }

    for (i = 0; i < w->ninflight; i++) {
        r = &sim.reqs[w->inflight[i]];
        r->worker = -1;
        sim.st.died++;
    }

    w->ninflight = 0;
    w->alive = 0;
}


/* settle.c's reaper: the flights of dead workers, settled and recorded */

static void
sim_worker_flights(sim_worker_t *w, int first)
{
    int         k;
    sim_req_t  *r;

    for (k = 0; k < sim.nreqs; k++) {
        r = &sim.reqs[k];

        if (r->state != SIM_REQ_INFLIGHT) {
            continue;
        }

        if (first) {
            /* a worker just started has none of its own yet */
            if (r->pid != w->pid) {
                continue;
            }

            sim.st.reused++;

        } else if (r->pid == w->pid || sim_alive(r->pid, NULL)) {
            continue;
        }

        /* estimated, cut short: other figures than its worker's would be */
        r->rec.flags |= LLM_REC_F_ESTIMATED | LLM_REC_F_PARTIAL;
        r->rec.output_tokens = 0;
        llm_record_set_finish_reason(&r->rec, "worker_exited", 13);

        r->reaped = 1;
        sim.st.flights++;

        sim_trace("w%d: flight r%d of pid %d settled",
                  (int) (w - sim.workers), k, (int) r->pid);

        sim_record(w, r, k);
    }

    w->flights_at = w->exiting ? 0 : sim.now + SIM_REAP_FLIGHTS;
}


/* a request, admitted with a place in the journal, or not */

static void
sim_arrive(sim_worker_t *w)
{
    int            k;
    size_t         n, len;
    char           id[LLM_RECORD_ID_MAX + 1], model[LLM_RECORD_MODEL_MAX];
    sim_req_t     *r;
    llm_record_t  *rec;

    k = sim.nreqs++;
    r = &sim.reqs[k];

    memset(r, 0, offsetof(sim_req_t, rec));
    r->worker = (int) (w - sim.workers);

    /* ids and models of every length: frames of every size, paddings */

    len = sim_below(2) ? 5 + sim_below(10) : 5 + sim_below(60);
    n = (size_t) snprintf(id, sizeof(id), "r%d.", k);

    while (n < len) {
        id[n++] = 'a' + sim_below(26);
    }

    memset(&r->rec, 0, sizeof(llm_record_t));
    rec = &r->rec;

    rec->type = LLM_REC_SETTLE;
    rec->status = 200;
    rec->tenant_id = 1 + sim_below(3);
    rec->key_id = 1 + sim_below(5);
    rec->input_tokens = sim_below(100000);
    rec->output_tokens = sim_below(10000);
    rec->ts_ms = 1795954800000LL + sim.now;
    rec->api = LLM_API_OPENAI;

    llm_record_set_request_id(rec, id, n);

    n = sim_below(4) ? 5 + sim_below(20) : sim_below(LLM_RECORD_MODEL_MAX + 1);
    memset(model, 'm', n);
    llm_record_set_model(rec, model, n);
    llm_record_set_finish_reason(rec, "stop", sim_below(5));

    /*
     * Under the zone's lock, as admit.c does: the place, then the flight,
     * or the place given back when a limit or the budget refuses.
     */

    if (llm_journal_hold(&sim.journal)) {
        r->held = 1;

    } else if (!sim.full_admit) {
        sim.journal.refused++;
        r->state = SIM_REQ_REFUSED;
        sim.st.refused++;
        sim_trace("w%d: r%d refused, journal full", r->worker, k);
        return;
    }

    if (sim_below(8) == 0) {
        if (r->held) {
            llm_journal_unhold(&sim.journal);
        }

        r->state = SIM_REQ_ABORTED;
        sim_trace("w%d: r%d refused after its place", r->worker, k);
        return;
    }

    r->state = SIM_REQ_INFLIGHT;
    r->pid = w->pid;
    w->inflight[w->ninflight++] = k;

    sim_trace("w%d: r%d in flight, with%s a place", r->worker, k,
              r->held ? "" : "out");
}


/* a request's next step: into the zone's flights, or settled */

static void
sim_settle(sim_worker_t *w)
{
    int         i, k;
    sim_req_t  *r;

    i = (int) sim_below(w->ninflight);
    k = w->inflight[i];
    r = &sim.reqs[k];

    w->inflight[i] = w->inflight[--w->ninflight];

    sim_record(w, r, k);
}


/* under the zone's lock: the record into the journal, the flight gone */

static void
sim_record(sim_worker_t *w, sim_req_t *r, int k)
{
    size_t    n;
    uint64_t  tail;
    uint8_t   frame[LLM_RECORD_MAX_FRAME];

    n = llm_record_encode(&r->rec, frame, sizeof(frame));

    tail = sim.journal.tail;

    if (llm_journal_write(&sim.journal, frame, n, r->held) != 0) {

        if (r->held) {
            sim_fail("r%d lost though it held a place (used %" PRIu64
                     ", held %zu, size %zu, tail at %" PRIu64 ")", k,
                     sim.journal.tail - sim.journal.head, sim.journal.held,
                     sim.journal.size, sim.journal.tail % sim.journal.size);
        }

        r->state = SIM_REQ_LOST;
        sim.st.lost++;
        sim_trace("r%d lost, journal full", k);
        return;
    }

    if (sim.journal.tail - tail > llm_journal_entry_size(n)) {
        sim.st.padded++;
    }

    r->state = SIM_REQ_WRITTEN;
    sim.st.settled++;

    sim_trace("r%d settled, %zu bytes at %" PRIu64, k, n,
              sim.journal.tail - llm_journal_entry_size(n));

    if (w->conn) {
        w->send_posted = 1;
    }
}


/* --- accountd: client.c and ingest.c ------------------------------------- */


static void
sim_acd_start(void)
{
    int  i;

    sim_trace("accountd: started");

    for (i = 0; i < SIM_CLIENTS_MAX; i++) {
        sim.clients[i].used = 0;
    }

    queue_pop(queue_len());

    sim.acd_up = 1;
    sim.acd_stopping = 0;
    sim.acd_start_at = 0;
    sim.paused = 0;

    sim.db_state = SIM_DB_DOWN;
    sim.db_backoff = SIM_DB_BACKOFF_MIN;
    sim.batch_n = 0;

    /* db_start(): connects at once */
    sim_db_timer();
}


/* gone: the queue, the connections; a statement sent may yet commit */

static void
sim_acd_kill(void)
{
    int            i;
    acd_client_t  *c;

    sim_trace("accountd: gone, %zu records queued", queue_len());

    if (sim.db_state == SIM_DB_BUSY && sim_below(2)) {
        sim_db_commit(sim.batch_n);
    }

    for (i = 0; i < SIM_CLIENTS_MAX; i++) {
        c = &sim.clients[i];

        if (c->used && c->conn) {
            sim_conn_close_accountd(c->conn);
        }

        c->used = 0;
    }

    /* connections not yet accepted go with the listening socket */

    for (i = 0; i < SIM_CONNS_MAX; i++) {
        if (sim.conns[i].used && sim.conns[i].a_open) {
            sim_conn_close_accountd(&sim.conns[i]);
        }
    }

    queue_pop(queue_len());

    sim.acd_up = 0;
    sim.acd_stopping = 0;
    sim.paused = 0;
    sim.db_state = SIM_DB_DOWN;
    sim.batch_n = 0;
    sim.acd_start_at = sim.now + sim_below(3000);
}


/* main_loop() after the events: db_timer, client_flush, db_kick */

static void
sim_acd_iteration(void)
{
    int            i, idle;
    acd_client_t  *c;

    if (sim.db_timer_at && sim.now >= sim.db_timer_at) {
        sim_db_timer();
    }

    for (i = 0; i < SIM_CLIENTS_MAX; i++) {
        c = &sim.clients[i];

        if (c->used && c->dirty) {
            c->dirty = 0;

            if (!c->closed) {
                sim_client_write(c);
            }
        }
    }

    if (sim.paused) {
        sim_client_resume();
    }

    if (sim.db_state == SIM_DB_IDLE && queue_len()) {
        sim_db_send();
    }

    /* stopping: done once nothing more can be written or acknowledged */

    if (sim.acd_stopping) {
        idle = 1;

        for (i = 0; i < SIM_CLIENTS_MAX; i++) {
            c = &sim.clients[i];

            if (c->used && !c->closed && c->out_len > c->out_pos) {
                idle = 0;
            }
        }

        if ((sim.db_state != SIM_DB_BUSY
             && (sim.db_state != SIM_DB_IDLE || queue_len() == 0)
             && idle)
            || sim.now >= sim.acd_stop_at)
        {
            sim_acd_kill();
        }
    }
}


static void
sim_acd_accept(sim_conn_t *conn)
{
    int            i;
    acd_client_t  *c;

    for (i = 0; i < SIM_CLIENTS_MAX; i++) {
        if (!sim.clients[i].used) {
            break;
        }
    }

    if (i == SIM_CLIENTS_MAX) {
        sim_fail("out of simulated clients");
        return;
    }

    c = &sim.clients[i];

    c->used = 1;
    c->eof = 0;
    c->closed = 0;
    c->write_failed = 0;
    c->dirty = 0;
    c->id = conn->id;
    c->conn = conn;
    c->pending = 0;
    c->in_len = 0;
    c->out_pos = 0;
    c->out_len = 0;

    conn->client = c;

    sim_trace("accountd: accepted c%d", conn->id);
}


static void
sim_client_read(acd_client_t *c)
{
    ssize_t  n;

    n = sim_recv(c->conn, 0, c->in + c->in_len, sim.c_in_cap - c->in_len);

    if (n == SIM_AGAIN) {
        return;
    }

    if (n == SIM_ERROR) {
        sim_client_close(c);
        return;
    }

    if (n == 0) {
        c->eof = 1;

    } else {
        c->in_len += (size_t) n;
    }

    sim_client_process(c);

    if (c->closed) {
        return;
    }

    if (c->eof) {
        if (c->in_len) {
            sim.st.cut_frames++;
        }

        sim_trace("accountd: c%d closed by the worker, %zu pending", c->id,
                  c->pending);

        if (c->pending == 0 && c->out_len == c->out_pos) {
            sim_client_close(c);
        }
    }
}


static void
sim_client_process(acd_client_t *c)
{
    int            rc;
    size_t         pos, used;
    acd_item_t    *item;
    llm_record_t   rec;

    pos = 0;

    while (pos < c->in_len) {

        if (queue_full()) {
            if (!sim.paused) {
                sim.paused = 1;
                sim.st.paused++;
                sim_trace("accountd: queue full, not reading");
            }

            break;
        }

        rc = llm_record_decode(c->in + pos, c->in_len - pos, &rec, &used);

        if (rc == 0) {
            break;
        }

        if (rc == -1 || rec.type != LLM_REC_SETTLE
            || rec.request_id_len == 0)
        {
            sim_fail("accountd: c%d sent a malformed frame", c->id);
            sim_client_close(c);
            return;
        }

        item = queue_push();
        item->rec = rec;
        item->client = c;
        c->pending++;

        pos += used;

        sim_trace("accountd: c%d: record %.*s queued", c->id,
                  rec.request_id_len, rec.request_id);
    }

    if (pos) {
        memmove(c->in, c->in + pos, c->in_len - pos);
        c->in_len -= pos;
    }
}


static void
sim_client_write(acd_client_t *c)
{
    ssize_t  n;

    if (c->write_failed) {
        return;
    }

    while (c->out_pos < c->out_len) {
        n = sim_send(c->conn, 0, c->out + c->out_pos, c->out_len - c->out_pos);

        if (n == SIM_AGAIN) {
            return;
        }

        if (n == SIM_ERROR) {
            /* client_write_failed(): nothing more is sent */
            c->write_failed = 1;
            c->out_pos = 0;
            c->out_len = 0;

            if (c->eof && c->pending == 0) {
                sim_client_close(c);
            }

            return;
        }

        c->out_pos += (size_t) n;
    }

    c->out_pos = 0;
    c->out_len = 0;

    if (c->eof && c->pending == 0) {
        sim_client_close(c);
    }
}


static void
sim_client_close(acd_client_t *c)
{
    if (c->closed) {
        return;
    }

    sim_trace("accountd: c%d closed, %zu pending", c->id, c->pending);

    if (c->conn) {
        sim_conn_close_accountd(c->conn);
        c->conn = NULL;
    }

    c->closed = 1;

    if (c->pending == 0) {
        sim_client_free(c);
    }
}


static void
sim_client_free(acd_client_t *c)
{
    c->used = 0;
}


static void
sim_client_ack(acd_client_t *c, const llm_record_t *rec)
{
    llm_record_t  ack;

    if (c->closed || c->write_failed) {
        return;
    }

    if (c->out_len + LLM_RECORD_MAX_FRAME > sizeof(c->out)) {
        sim_fail("accountd: c%d has more ACKs than its worker's window",
                 c->id);
        return;
    }

    memset(&ack, 0, sizeof(llm_record_t));
    ack.type = LLM_REC_ACK;
    memcpy(ack.request_id, rec->request_id, rec->request_id_len);
    ack.request_id_len = rec->request_id_len;

    c->out_len += llm_record_encode(&ack, c->out + c->out_len,
                                    sizeof(c->out) - c->out_len);
    c->dirty = 1;
}


static void
sim_client_release(acd_client_t *c)
{
    c->pending--;

    if (c->pending == 0) {

        if (c->closed) {
            sim_client_free(c);

        } else if (c->eof && c->out_len == c->out_pos) {
            sim_client_close(c);
        }
    }
}


static void
sim_client_resume(void)
{
    int            i;
    acd_client_t  *c;

    if (!queue_has_room()) {
        return;
    }

    sim.paused = 0;

    for (i = 0; i < SIM_CLIENTS_MAX; i++) {
        c = &sim.clients[i];

        if (c->used && !c->closed) {
            sim_client_process(c);
        }
    }
}


/* db_send_batch(): what the server gets is a copy of the queue's head */

static void
sim_db_send(void)
{
    size_t  i, n;

    n = queue_len();

    if (n > sim.batch_max) {
        n = sim.batch_max;
    }

    for (i = 0; i < n; i++) {
        sim.batch[i] = queue_at(i)->rec;
    }

    sim.batch_n = n;
    sim.db_state = SIM_DB_BUSY;

    sim_trace("accountd: batch of %zu sent", n);
}


/* PostgreSQL: INSERT ... ON CONFLICT on request_id, committed */

static void
sim_db_commit(size_t n)
{
    int            k;
    size_t         i;
    char           id[LLM_RECORD_ID_MAX + 1];
    sim_req_t     *r;
    llm_record_t  *rec;

    for (i = 0; i < n; i++) {
        rec = &sim.batch[i];

        memcpy(id, rec->request_id, rec->request_id_len);
        id[rec->request_id_len] = '\0';

        k = (id[0] == 'r') ? atoi(id + 1) : -1;

        if (k < 0 || k >= sim.nreqs) {
            sim_fail("a row for request_id \"%s\", never settled", id);
            return;
        }

        r = &sim.reqs[k];

        if (!r->committed) {
            r->committed = 1;
            r->row = *rec;
            continue;
        }

        if (!llm_record_same(&r->row, rec)) {
            sim_fail("r%d again with other figures: to llm.usage_rejected",
                     k);
            return;
        }

        r->again++;
        sim.st.again++;
    }

    sim_trace("postgres: batch of %zu committed", n);
}


/* db_done() of a batch: committed, each record acknowledged */

static void
sim_db_done(void)
{
    size_t       i, n;
    acd_item_t  *item;

    n = sim.batch_n;

    sim_db_commit(n);

    for (i = 0; i < n; i++) {
        item = queue_at(i);
        sim_client_ack(item->client, &item->rec);
        sim_client_release(item->client);
    }

    if (sim.misack != SIM_F_N) {
        for (i = 0; i < n; i++) {
            if (sim_misack(queue_at(i)->client, sim.misack)) {
                sim.st.faults[sim.misack]++;
                sim.misack = SIM_F_N;
                break;
            }
        }
    }

    queue_pop(n);

    sim.batch_n = 0;
    sim.db_state = SIM_DB_IDLE;
    sim.db_backoff = SIM_DB_BACKOFF_MIN;
}


/* db_down(): the batch in flight is sent again, from the queue's head */

static void
sim_db_down(void)
{
    sim_trace("accountd: database connection lost, %zu queued",
              queue_len());

    sim.batch_n = 0;
    sim.db_state = SIM_DB_DOWN;
    sim.db_timer_at = sim.now + sim.db_backoff;

    sim.db_backoff *= 2;
    if (sim.db_backoff > SIM_DB_BACKOFF_MAX) {
        sim.db_backoff = SIM_DB_BACKOFF_MAX;
    }
}


static void
sim_db_timer(void)
{
    sim.db_timer_at = 0;

    if (sim.db_state != SIM_DB_DOWN) {
        return;
    }

    if (!sim.pg_up) {
        sim_db_down();
        return;
    }

    sim_trace("accountd: database connected");

    sim.db_state = SIM_DB_IDLE;
}


/* --- faults -------------------------------------------------------------- */


static void
sim_fault(void)
{
    int             i, n, live[SIM_WORKERS_MAX];
    uint32_t        total, x;
    sim_fault_e     f;
    sim_conn_t     *c, *open[SIM_CONNS_MAX];
    sim_worker_t   *w;

    total = 0;
    for (f = 0; f < SIM_F_N; f++) {
        total += sim.fault_weight[f];
    }

    if (total == 0) {
        return;
    }

    x = sim_below(total);
    for (f = 0; x >= sim.fault_weight[f]; f++) {
        x -= sim.fault_weight[f];
    }

    n = 0;
    for (i = 0; i < SIM_WORKERS_MAX; i++) {
        if (sim.workers[i].alive) {
            live[n++] = i;
        }
    }

    switch (f) {

    case SIM_F_WORKER:
        if (n == 0) {
            return;
        }

        w = &sim.workers[live[sim_below(n)]];
        x = w->exiting;
        sim_worker_kill(w);

        /* the master starts another; an exiting one is not replaced */
        if (!x) {
            sim_worker_spawn(1);
        }

        break;

    case SIM_F_RELOAD:
        x = 0;

        for (i = 0; i < n; i++) {
            w = &sim.workers[live[i]];

            if (!w->exiting) {
                w->exiting = 1;
                x++;
            }
        }

        sim_trace("reload: %u workers exiting", x);

        while (x--) {
            sim_worker_spawn(1);
        }

        break;

    case SIM_F_ACCOUNTD:
        if (!sim.acd_up) {
            return;
        }

        sim_acd_kill();
        break;

    case SIM_F_STOP:
        if (!sim.acd_up || sim.acd_stopping) {
            return;
        }

        /* listener_close(): the socket goes, records are no longer read */
        sim_trace("accountd: stopping");

        for (i = 0; i < SIM_CONNS_MAX; i++) {
            c = &sim.conns[i];

            if (c->used && c->a_open && c->client == NULL) {
                sim_conn_close_accountd(c);
            }
        }

        sim.acd_stopping = 1;
        sim.acd_stop_at = sim.now + SIM_SHUTDOWN_WAIT;
        break;

    case SIM_F_PG:
        if (!sim.pg_up) {
            return;
        }

        sim_trace("postgres: restarting");

        if (sim.db_state == SIM_DB_BUSY && sim_below(2)) {
            sim_db_commit(sim.batch_n);
        }

        sim.pg_up = 0;
        sim.pg_start_at = sim.now + sim_below(5000);

        if (sim.acd_up && sim.db_state != SIM_DB_DOWN) {
            sim_db_down();
        }

        break;

    case SIM_F_FAIL:
    case SIM_F_COMMIT_LOST:
        if (!sim.acd_up || sim.db_state != SIM_DB_BUSY) {
            return;
        }

        if (f == SIM_F_COMMIT_LOST) {
            sim_db_commit(sim.batch_n);
        }

        sim_db_down();
        break;

    case SIM_F_BREAK:
    case SIM_F_W_CLOSE:
    case SIM_F_A_CLOSE:
        n = 0;
        for (i = 0; i < SIM_CONNS_MAX; i++) {
            c = &sim.conns[i];

            if (c->used && c->w_open && c->a_open && !c->broken
                && (f != SIM_F_A_CLOSE || c->client))
            {
                open[n++] = c;
            }
        }

        if (n == 0) {
            return;
        }

        c = open[sim_below(n)];

        if (f == SIM_F_W_CLOSE) {
            sim_trace("c%d: the worker closes it", c->id);
            sim_worker_close(&sim.workers[c->worker]);
            break;
        }

        if (f == SIM_F_A_CLOSE) {
            sim_trace("c%d: accountd closes it", c->id);
            sim_client_close(c->client);
            break;
        }

        /* what either end had not read yet is partly gone, maybe mid-frame */
        c->up.len = sim_below((uint32_t) c->up.len + 1);
        c->down.len = sim_below((uint32_t) c->down.len + 1);
        c->broken = 1;

        sim_trace("c%d: broken, %zu and %zu bytes left in flight", c->id,
                  c->up.len, c->down.len);
        break;

    case SIM_F_REORDER:
    case SIM_F_DUP_ACK:
        /* on the next batch's ACKs */
        sim.misack = f;
        return;

    default:
        return;
    }

    sim.st.faults[f]++;
    sim_mix(0x10000 | f);
}


/*
 * accountd breaks its word: the first two ACK frames a client has to send
 * swapped, or the first one twice.  1 if done.
 */

static int
sim_misack(acd_client_t *c, sim_fault_e f)
{
    size_t    la, lb;
    uint8_t  *p, tmp[2 * LLM_RECORD_MAX_FRAME];

    if (c->closed || c->write_failed || c->out_pos != 0 || c->out_len < 4) {
        return 0;
    }

    p = c->out;
    la = 4 + ((size_t) p[0] << 24 | (size_t) p[1] << 16
              | (size_t) p[2] << 8 | p[3]);

    if (f == SIM_F_DUP_ACK) {
        if (c->out_len + la > sizeof(c->out)) {
            return 0;
        }

        memmove(p + la, p, c->out_len);
        c->out_len += la;

        sim_trace("accountd: c%d: an ACK twice", c->id);
        return 1;
    }

    if (la + 4 > c->out_len) {
        return 0;
    }

    lb = 4 + ((size_t) p[la] << 24 | (size_t) p[la + 1] << 16
              | (size_t) p[la + 2] << 8 | p[la + 3]);

    memcpy(tmp, p + la, lb);
    memcpy(tmp + lb, p, la);
    memcpy(p, tmp, la + lb);

    sim_trace("accountd: c%d: two ACKs swapped", c->id);

    return 1;
}


/* --- the loop ------------------------------------------------------------ */


static int
sim_choices(sim_choice_t *ch, uint32_t *total)
{
    int             i, n;
    uint32_t        t;
    sim_conn_t     *c;
    acd_client_t   *cl;
    sim_worker_t   *w;

    n = 0;
    t = 0;

#define sim_choice(a, i, wt)                                                  \
    do {                                                                      \
        ch[n].action = (a);                                                   \
        ch[n].who = (i);                                                      \
        ch[n].weight = (wt);                                                  \
        t += (wt);                                                            \
        n++;                                                                  \
    } while (0)

    for (i = 0; i < SIM_WORKERS_MAX; i++) {
        w = &sim.workers[i];

        if (!w->alive) {
            continue;
        }

        if (!sim.draining && !w->exiting && sim.nreqs < sim.nreqs_max
            && w->ninflight < SIM_INFLIGHT_MAX)
        {
            sim_choice(SIM_A_ARRIVE, i, 3);
        }

        if (w->ninflight) {
            sim_choice(SIM_A_SETTLE, i, 3);
        }

        if (w->send_posted) {
            sim_choice(SIM_A_POSTED, i, 6);
        }

        if (w->conn) {
            c = w->conn;

            if (!w->write_ready
                && (c->up.len < c->up.cap || c->broken || !c->a_open))
            {
                sim_choice(SIM_A_WRITABLE, i, 4);
            }

            if (c->down.len || c->broken || !c->a_open) {
                sim_choice(SIM_A_READABLE, i, 4);
            }
        }

        if (w->reconnect_at && sim.now >= w->reconnect_at) {
            sim_choice(SIM_A_RECONNECT, i, 8);
        }

        if (w->reap_at && sim.now >= w->reap_at) {
            sim_choice(SIM_A_REAP, i, 8);
        }

        if (w->flights_at && sim.now >= w->flights_at) {
            sim_choice(SIM_A_FLIGHTS, i, 8);
        }

        if (w->exiting && w->ninflight == 0) {
            sim_choice(SIM_A_EXIT, i, 4);
        }
    }

    if (sim.acd_up) {

        for (i = 0; i < SIM_CONNS_MAX; i++) {
            c = &sim.conns[i];

            if (c->used && c->a_open && c->client == NULL
                && !sim.acd_stopping)
            {
                sim_choice(SIM_A_ACCEPT, i, 4);
            }
        }

        for (i = 0; i < SIM_CLIENTS_MAX; i++) {
            cl = &sim.clients[i];

            if (!cl->used || cl->closed) {
                continue;
            }

            c = cl->conn;

            if (!cl->eof && !sim.paused && !sim.acd_stopping
                && cl->in_len < sim.c_in_cap
                && (c->up.len || c->broken || !c->w_open))
            {
                sim_choice(SIM_A_C_READ, i, 4);
            }

            if (!cl->write_failed && cl->out_len > cl->out_pos
                && (c->down.len < c->down.cap || c->broken || !c->w_open))
            {
                sim_choice(SIM_A_C_WRITE, i, 4);
            }
        }

        if (sim.db_state == SIM_DB_BUSY) {
            sim_choice(SIM_A_DB_RESULT, 0, 4);
        }

        if ((sim.db_timer_at && sim.now >= sim.db_timer_at)
            || (sim.acd_stopping && sim.now >= sim.acd_stop_at))
        {
            sim_choice(SIM_A_ACD_TIMER, 0, 8);
        }

    } else if (sim.now >= sim.acd_start_at) {
        sim_choice(SIM_A_ACD_START, 0, 8);
    }

    if (!sim.pg_up && sim.now >= sim.pg_start_at) {
        sim_choice(SIM_A_PG_START, 0, 8);
    }

#undef sim_choice

    *total = t;

    return n;
}


static void
sim_act(sim_choice_t *c)
{
    sim_conn_t    *conn;
    acd_client_t  *cl;
    sim_worker_t  *w;

    /* the workers' actions come first; who is a worker's index in them */
    w = (c->action <= SIM_A_EXIT) ? &sim.workers[c->who] : NULL;

    switch (c->action) {

    case SIM_A_ARRIVE:
        sim_arrive(w);
        break;

    case SIM_A_SETTLE:
        sim_settle(w);
        break;

    case SIM_A_POSTED:
        w->send_posted = 0;

        if (w->conn) {
            sim_worker_flush(w);
        }

        break;

    case SIM_A_WRITABLE:
        w->write_ready = 1;
        sim_worker_flush(w);
        break;

    case SIM_A_READABLE:
        sim_worker_read(w);
        break;

    case SIM_A_RECONNECT:
        w->reconnect_at = 0;
        sim_worker_connect(w);
        break;

    case SIM_A_REAP:
        sim_worker_reap(w);
        break;

    case SIM_A_FLIGHTS:
        sim_worker_flights(w, 0);
        break;

    case SIM_A_EXIT:
        sim_worker_exit(w);
        break;

    case SIM_A_ACCEPT:
        conn = &sim.conns[c->who];
        sim_acd_accept(conn);
        sim_acd_iteration();
        break;

    case SIM_A_C_READ:
        cl = &sim.clients[c->who];
        sim_client_read(cl);
        sim_acd_iteration();
        break;

    case SIM_A_C_WRITE:
        cl = &sim.clients[c->who];
        sim_client_write(cl);
        sim_acd_iteration();
        break;

    case SIM_A_DB_RESULT:
        sim_db_done();
        sim_acd_iteration();
        break;

    case SIM_A_ACD_TIMER:
        sim_acd_iteration();
        break;

    case SIM_A_ACD_START:
        sim_acd_start();
        sim_acd_iteration();
        break;

    case SIM_A_PG_START:
        sim_trace("postgres: up");
        sim.pg_up = 1;
        sim.pg_start_at = 0;
        break;
    }
}


/* the earliest timer to come, or -1 */

static int64_t
sim_next_timer(void)
{
    int            i;
    int64_t        at;
    sim_worker_t  *w;

#define sim_timer(t)                                                          \
    if ((t) && (at == -1 || (t) < at)) {                                      \
        at = (t);                                                             \
    }

    at = -1;

    for (i = 0; i < SIM_WORKERS_MAX; i++) {
        w = &sim.workers[i];

        if (w->alive) {
            sim_timer(w->reconnect_at);
            sim_timer(w->reap_at);
            sim_timer(w->flights_at);
        }
    }

    if (sim.acd_up) {
        sim_timer(sim.db_timer_at);

        if (sim.acd_stopping) {
            sim_timer(sim.acd_stop_at);
        }

    } else {
        sim_timer(sim.acd_start_at ? sim.acd_start_at : sim.now);
    }

    if (!sim.pg_up) {
        sim_timer(sim.pg_start_at ? sim.pg_start_at : sim.now);
    }

#undef sim_timer

    return at;
}


/*
 * Drained: every record committed and acknowledged, nothing moving.
 * NULL, or what still moves.
 */

static const char *
sim_quiet(void)
{
    int            i;
    sim_conn_t    *c;
    acd_client_t  *cl;
    sim_worker_t  *w;

    if (!sim.acd_up || sim.acd_stopping) {
        return "accountd is not running";
    }

    if (sim.db_state == SIM_DB_BUSY || queue_len()) {
        return "accountd's queue is not empty";
    }

    if (sim.journal.head != sim.journal.tail) {
        return "the journal is not empty";
    }

    for (i = 0; i < SIM_WORKERS_MAX; i++) {
        w = &sim.workers[i];

        if (w->alive && (w->ninflight || w->pos != w->last || w->exiting)) {
            return "a worker is busy";
        }
    }

    for (i = 0; i < SIM_CONNS_MAX; i++) {
        c = &sim.conns[i];

        if (c->used && (c->up.len || c->down.len)) {
            return "bytes in flight";
        }
    }

    for (i = 0; i < SIM_CLIENTS_MAX; i++) {
        cl = &sim.clients[i];

        if (cl->used && cl->out_len > cl->out_pos) {
            return "ACKs to be sent";
        }
    }

    for (i = 0; i < sim.nreqs; i++) {
        if (sim.reqs[i].state == SIM_REQ_INFLIGHT && sim.reqs[i].worker == -1
            && !sim_alive(sim.reqs[i].pid, NULL))
        {
            return "a dead worker's flight to settle";
        }
    }

    return NULL;
}


/* what must hold between any two steps */

static void
sim_check_step(void)
{
    int             k;
    size_t          held;
    sim_req_t      *r;
    llm_journal_t  *j;

    j = &sim.journal;

    if (j->head > j->unsent || j->unsent > j->tail
        || j->tail - j->head > j->size)
    {
        sim_fail("journal positions: head %" PRIu64 " unsent %" PRIu64
                 " tail %" PRIu64, j->head, j->unsent, j->tail);
        return;
    }

    held = 0;

    for (k = 0; k < sim.nreqs; k++) {
        r = &sim.reqs[k];

        if (r->held && r->state == SIM_REQ_INFLIGHT) {
            held += LLM_JOURNAL_PLACE;
        }
    }

    if (j->held != held) {
        sim_fail("journal holds %zu bytes for requests, they hold %zu",
                 j->held, held);
    }
}


/* after the drain: (a), (b), (d) */

static void
sim_check_end(void)
{
    int                   i;
    uint64_t              pos;
    sim_req_t            *r;
    llm_journal_t        *j;
    sim_worker_t         *w;
    llm_journal_entry_t  *e;

    j = &sim.journal;

    for (i = 0; i < sim.nreqs && !sim.failed; i++) {
        r = &sim.reqs[i];

        if (r->state == SIM_REQ_WRITTEN) {

            /* (a) */
            if (!r->committed) {
                sim_fail("(a) r%d was settled and has no row", i);

            } else if (!llm_record_same(&r->row, &r->rec)) {
                sim_fail("(a) r%d has a row with other figures", i);
            }

        } else if (r->committed) {
            sim_fail("(a) r%d has a row and was never settled", i);

        } else if (r->state == SIM_REQ_INFLIGHT) {
            sim_fail("(a) r%d is still in flight", i);
        }
    }

    /* (d) */

    for (pos = j->head; pos < j->tail && !sim.failed; /* void */ ) {
        e = (llm_journal_entry_t *) (j->ring + pos % j->size);

        if (e->len && e->state != LLM_JOURNAL_ACKED) {
            sim_fail("(d) the journal keeps an entry at %" PRIu64
                     ", state %u, owner %d", pos, e->state, (int) e->owner);
        }

        pos += e->len ? llm_journal_entry_size(e->len)
                      : j->size - pos % j->size;
    }

    if (!sim.failed && j->head != j->tail) {
        sim_fail("(d) the journal is not empty: head %" PRIu64 ", tail %"
                 PRIu64, j->head, j->tail);
    }

    if (!sim.failed && j->written != j->acked) {
        sim_fail("(d) %" PRIu64 " records written, %" PRIu64 " acknowledged",
                 j->written, j->acked);
    }

    if (!sim.failed && j->held != 0) {
        sim_fail("(d) %zu bytes held for requests", j->held);
    }

    if (!sim.failed && j->lost != sim.st.lost) {
        sim_fail("the journal counts %" PRIu64 " records lost, the requests "
                 "%" PRIu64, j->lost, sim.st.lost);
    }

    for (i = 0; i < SIM_WORKERS_MAX && !sim.failed; i++) {
        w = &sim.workers[i];

        if (w->alive && w->window.n) {
            sim_fail("(d) w%d waits for %zu ACKs", i, w->window.n);
        }
    }

    if (!sim.failed && queue_len()) {
        sim_fail("(d) accountd's queue holds %zu records", queue_len());
    }
}


static int
sim_run(uint64_t seed)
{
    int            i, n;
    int64_t        at;
    uint32_t       total, x;
    sim_fault_e    f;
    const char    *busy;
    sim_choice_t   ch[SIM_WORKERS_MAX * 8 + SIM_CONNS_MAX
                      + 2 * SIM_CLIENTS_MAX + 8];
    static const uint32_t  storms[] = { 0, 500, 3000, 10000, 40000 };
    static const size_t    windows[] = { 1, 2, 3, 5, 8, 64 };

    sim.seed = seed;
    sim.rng = seed * 0x2545f4914f6cdd1dULL;
    sim.now = 0;
    sim.step = 0;
    sim.draining = 0;
    sim.failed = 0;
    sim.why[0] = '\0';
    sim.next_pid = 100;
    sim.next_id = 1;
    sim.nreqs = 0;
    sim.spawn_owed = 0;
    sim.misack = SIM_F_N;
    sim.trail = 14695981039346656037ULL;
    memset(&sim.st, 0, sizeof(sim_stats_t));

    /* this seed's shape */

    sim.nworkers = 1 + sim_below(3);
    sim.ring_size = 2 * LLM_JOURNAL_PLACE
                    + 16 * sim_below((SIM_RING_MAX - 2 * LLM_JOURNAL_PLACE)
                                     / 16 / (1 + sim_below(4)) + 1);
    sim.window_cap = windows[sim_below(sizeof(windows) / sizeof(size_t))];
    sim.out_size = LLM_RECORD_MAX_FRAME
                   + sim_below(SIM_OUT_MAX - LLM_RECORD_MAX_FRAME + 1);
    sim.pipe_cap = sim_below(2) ? 1 + sim_below(256)
                                : 1 + sim_below(SIM_PIPE_MAX);
    sim.c_in_cap = LLM_RECORD_MAX_FRAME
                   + sim_below(SIM_C_IN_MAX - LLM_RECORD_MAX_FRAME + 1);
    sim.batch_max = 1 + sim_below(SIM_BATCH_MAX);
    sim.full_admit = sim_below(4) == 0;
    sim.pid_reuse = sim_below(4) == 0;
    sim.nreqs_max = 10 + sim_below(SIM_REQS_MAX - 10);
    sim.active_steps = 100 + sim_below(900);
    sim.fault_ppm = storms[sim_below(sizeof(storms) / sizeof(uint32_t))];

    for (f = 0; f < SIM_F_N; f++) {
        sim.fault_weight[f] = sim_below(4) ? sim_below(4) : 0;
    }

    memset(&sim.workers, 0, sizeof(sim.workers));

    for (i = 0; i < SIM_CONNS_MAX; i++) {
        sim.conns[i].used = 0;
    }

    if (llm_journal_init(&sim.journal, sim.ring, sim.ring_size) != 0) {
        sim_fail("journal of %zu bytes refused", sim.ring_size);
        return -1;
    }

    /* the ring's bytes as a reload leaves them: anything */
    memset(sim.ring, 0xa5, sim.ring_size);

    sim.pg_up = 1;
    sim.pg_start_at = 0;

    sim_acd_start();

    for (i = 0; i < sim.nworkers; i++) {
        sim_worker_spawn(0);
    }

    sim_trace("seed %" PRIu64 ": %d workers, ring %zu, window %zu, out %zu, "
              "socket %zu, accountd in %zu, batch %zu, full=%s, %u ppm faults",
              seed, sim.nworkers, sim.ring_size, sim.window_cap,
              sim.out_size, sim.pipe_cap, sim.c_in_cap, sim.batch_max,
              sim.full_admit ? "admit" : "refuse", sim.fault_ppm);

    for ( ;; ) {

        if (sim.failed) {
            break;
        }

        if (!sim.draining && (int) sim.step >= sim.active_steps) {
            sim.draining = 1;
            sim.drain_until = sim.now + SIM_DRAIN_TIME;
            sim.misack = SIM_F_N;
            sim_trace("drain");
        }

        if (sim.draining) {
            busy = sim_quiet();

            if (busy == NULL) {
                break;
            }

            if (sim.now > sim.drain_until
                || sim.step > (uint64_t) sim.active_steps + SIM_DRAIN_STEPS)
            {
                sim_fail("did not drain: %s", busy);
                break;
            }
        }

        sim.step++;
        sim.now += sim_below(3);

        if (sim.spawn_owed) {
            sim.spawn_owed--;
            sim_worker_spawn(1);
        }

        if (!sim.draining && sim_ppm(sim.fault_ppm)) {
            sim_fault();
            sim_check_step();
            continue;
        }

        n = sim_choices(ch, &total);

        if (n == 0) {
            at = sim_next_timer();

            if (at == -1) {
                sim_fail("nothing to do and no timer");
                break;
            }

            if (at > sim.now) {
                sim.now = at;
            }

            continue;
        }

        x = sim_below(total);
        for (i = 0; x >= ch[i].weight; i++) {
            x -= ch[i].weight;
        }

        sim_trace("%s %d", sim_action_names[ch[i].action], ch[i].who);
        sim_mix(ch[i].action << 8 | ch[i].who);

        sim_act(&ch[i]);
        sim_check_step();
    }

    if (!sim.failed) {
        sim_check_end();
    }

    sim.st.steps = sim.step;

    return sim.failed ? -1 : 0;
}


/* the run's steps (FNV-1a of each), and where they led */

static void
sim_mix(uint64_t v)
{
    sim.trail = (sim.trail ^ v) * 1099511628211ULL;
}


static uint64_t
sim_digest(void)
{
    int  i;

    sim_mix(sim.rng);
    sim_mix(sim.step);
    sim_mix(sim.now);
    sim_mix(sim.journal.tail);
    sim_mix(sim.journal.written);
    sim_mix(sim.st.again);

    for (i = 0; i < sim.nreqs; i++) {
        sim_mix(sim.reqs[i].state);
        sim_mix(sim.reqs[i].again);
    }

    return sim.trail;
}

