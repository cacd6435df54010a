
/*
 * Keeping the keys current: the daemon's connection LISTENs on
 * llmgw_keys, which a trigger notifies on every change of llm.api_keys or
 * llm.tenants, by the commands or by plain SQL, and runs the snapshot query
 * between batches.  Its result is written to the key snapshot file
 * (snapshot.c) and built into the key set pushed to the workers
 * (keyset.c, client.c).
 *
 * The snapshot is rewritten at most once per KEYS_DEBOUNCE however many
 * changes come, after each connection (a notification sent while nobody
 * listened is lost), when a worker connects, and when the next key
 * expires.
 */


#include "accountd.h"
#include "client.h"
#include "conf.h"
#include "dbconn.h"
#include "event.h"
#include "keys.h"
#include "keyset.h"
#include "listener.h"
#include "log.h"
#include "snapshot.h"


#define KEYS_RETRY                5000
#define KEYS_DEBOUNCE             200
#define KEYS_CHANNEL              "llmgw_keys"


typedef struct {
    unsigned   wanted:1;
    int64_t    at;
    int64_t    sent;
    uint64_t   generation;         /* its wall-clock time, for sets */
    int        fd;                 /* the snapshot's lock */
} keys_t;


static void keys_listening(void);
static void keys_done(PGresult *res);
static void keys_failed(const char *state);
static void keys_lost(int busy);
static void keys_notified(int n);
static void keys_soon(void);
static void keys_at(int64_t at);
static void keys_unlock(void);


static keys_t  keys = {
    .wanted = 1,
    .fd = -1
};

static const dbconn_setup_t  keys_setup = {
    NULL, "LISTEN " KEYS_CHANNEL, 0, keys_listening
};

static const dbconn_query_t  keys_query = {
    keys_done, keys_failed, keys_lost
};


int
keys_init(void)
{
    dbconn_notify = keys_notified;
    listener_connected = keys_soon;

    return dbconn_setup(&keys_setup);
}


/* the start-up wrote the snapshot, or the loop is to write one at once */

void
keys_start(int written)
{
    keys.wanted = !written;
}


/* SIGHUP: the key_snapshot path may have changed */

void
keys_request(void)
{
    keys.wanted = 1;
}


int
keys_wanted(void)
{
    return keys.wanted;
}


void
keys_send(void)
{
    keys.wanted = 0;

    if (acd_cf.key_snapshot[0] == '\0') {
        log_warning("\"key_snapshot\" is not set, no key snapshot written");
        return;
    }

    keys.fd = snapshot_lock(acd_cf.key_snapshot, 0);

    if (keys.fd == -1) {
        /* another accountd command is writing it: later */
        keys_at(event_now() + KEYS_DEBOUNCE);
        return;
    }

    keys.sent = event_now();
    keys.generation = snapshot_generation();

    if (dbconn_send(&keys_query, SNAPSHOT_QUERY, 0, NULL) != 0) {
        keys.wanted = 1;
    }
}


int64_t
keys_timer_at(void)
{
    return keys.at;
}


void
keys_timer(int64_t now)
{
    if (keys.at && now >= keys.at) {
        keys.at = 0;
        keys.wanted = 1;
    }
}


void
keys_close(void)
{
    keys_unlock();
}


static void
keys_listening(void)
{
    log_debug("listening on \"" KEYS_CHANNEL "\"");

    keys.wanted = 1;
}


static void
keys_done(PGresult *res)
{
    int64_t  next;

    if (snapshot_write(acd_cf.key_snapshot, res, keys.generation, &next)
        == 0)
    {
        if (next >= 0) {
            /* a second late rather than a hair early, and no spin */
            keys_at(event_now() + next + 1000);
        }

    } else {
        keys_at(event_now() + KEYS_RETRY);
    }

    /* the workers need the keys even if the disk refused the file */
    if (keyset_publish(res, keys.generation) == 0) {
        client_keyset();
    }

    keys_unlock();
}


static void
keys_failed(const char *state)
{
    log_error("key snapshot query failed: %s", dbconn_error());
    keys_unlock();
    keys_at(event_now() + KEYS_RETRY);
}


static void
keys_lost(int busy)
{
    if (busy) {
        keys.wanted = 1;
    }

    keys_unlock();
}


/*
 * A snapshot query in flight may have started before the change that a
 * notification reports: every notification asks for a rewrite of its own,
 * no sooner than KEYS_DEBOUNCE after the last query was sent.
 */

static void
keys_notified(int n)
{
    if (acd_shutting_down) {
        return;
    }

    log_noise("%d notifications on \"" KEYS_CHANNEL "\"", n);

    keys_soon();
}


/*
 * Also when a worker connects.  It read the snapshot file when nginx
 * loaded its configuration, perhaps newer than the last set built (the CLI
 * writes the file at once, the set follows the notification): it gets a
 * set built after it came, never an older one.
 */

static void
keys_soon(void)
{
    int64_t  at;

    at = keys.sent + KEYS_DEBOUNCE;

    keys_at(at > event_now() ? at : event_now());
}


/* the earliest of the rewrites asked for wins */

static void
keys_at(int64_t at)
{
    if (keys.at == 0 || at < keys.at) {
        keys.at = at;
    }
}


static void
keys_unlock(void)
{
    if (keys.fd != -1) {
        snapshot_unlock(keys.fd);
        keys.fd = -1;
    }
}
