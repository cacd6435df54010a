
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
 *
 * Each file declares what it offers the others in its own header (conf.h
 * for conf.c); this one holds only what they all share.
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


/* a worker's connection (client.c), which the queue's items name */
typedef struct acd_client_s  acd_client_t;


#endif /* _ACCOUNTD_H_INCLUDED_ */
