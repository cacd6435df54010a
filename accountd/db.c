
/*
 * The database side of the loop: one connection (dbconn.c), one query at
 * a time, and which goes next.  A worker waits for its lease: leases go
 * first (lease.c), then the key snapshot when one is wanted (keys.c), then
 * the records (ingest.c).
 */


#include "accountd.h"
#include "db.h"
#include "dbconn.h"
#include "event.h"
#include "ingest.h"
#include "keys.h"
#include "lease.h"
#include "queue.h"


int
db_init(void)
{
    /* the order of the set-up statements: the batch's, then LISTEN */

    if (ingest_init() != 0) {
        return -1;
    }

    return keys_init();
}


void
db_start(int snapshot_written)
{
    keys_start(snapshot_written);

    dbconn_start();
}


/* called once a loop iteration: start a query if there is work */

void
db_kick(void)
{
    if (!dbconn_ready()) {
        return;
    }

    if (lease_waiting()) {
        lease_send();
        return;
    }

    if (keys_wanted() && !acd_shutting_down) {
        keys_send();

        if (!dbconn_idle()) {
            return;
        }
    }

    ingest_kick();
}


int64_t
db_timer_at(void)
{
    int64_t  at, t;

    at = dbconn_timer_at();

    t = keys_timer_at();

    if (t && (at == 0 || t < at)) {
        at = t;
    }

    t = ingest_timer_at();

    if (t && (at == 0 || t < at)) {
        at = t;
    }

    return at;
}


void
db_timer(int64_t now)
{
    keys_timer(now);
    dbconn_timer(now);
}


/* at shutdown: whether waiting can still get the queue written */

int
db_flushable(void)
{
    return dbconn_connected()
           && (dbconn_busy() || queue_len() || ingest_retrying());
}


void
db_close(void)
{
    dbconn_close();
    keys_close();
}
