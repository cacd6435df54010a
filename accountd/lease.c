
/*
 * Leases: what the workers ask accountd for besides writing records.  A
 * lease of a tenant's or a key's caps (llm.take_lease), budget given back
 * (llm.return_lease), a gateway's share of a tenant's rate limits
 * (llm.take_share).  The connections queue the requests (client.c,
 * queue.c); they go to the database one at a time, before any batch, and
 * the answer goes back on the connection that asked, after the ACKs
 * before it.
 */


#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accountd.h"
#include "client.h"
#include "conf.h"
#include "dbconn.h"
#include "lease.h"
#include "log.h"
#include "pq.h"
#include "queue.h"
#include "stats.h"


typedef struct {
    const char  *values[5];
    char         num[4][24];
    char         model[LLM_RECORD_MODEL_MAX + 1];
    char         gateway[256];
} lease_t;


static void lease_done(PGresult *res);
static void lease_failed(const char *state);
static void lease_answer(PGresult *res);


static lease_t  lease;

static const dbconn_query_t  lease_query = {
    lease_done, lease_failed, NULL
};


/*
 * A lease of the tenant's caps, or of one key's (llm.take_lease, sql/007),
 * and the prices of the model asked about as they are now: its own, else
 * those of "*".
 */
static const char  lease_sql[] =
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
static const char  lease_return_sql[] =
    "SELECT llm.return_lease($1::bigint, $5::bigint, $2::text, $3::bigint,"
    " timestamptz 'epoch' + $4::bigint * interval '1 millisecond')";

/* sql/006: this gateway's share of a tenant's rate limits */
static const char  lease_share_sql[] =
    "SELECT llm.take_share($1::bigint, $2::text, $3::bigint)";

/* a request waits: it goes before anything else */

int
lease_waiting(void)
{
    return queue_lease_head() != NULL;
}


void
lease_send(void)
{
    acd_lease_item_t  *l;

    l = queue_lease_head();

    if (lease.gateway[0] == '\0') {
        if (acd_cf.gateway_name && acd_cf.gateway_name[0]) {
            snprintf(lease.gateway, sizeof(lease.gateway), "%s",
                     acd_cf.gateway_name);

        } else if (gethostname(lease.gateway, sizeof(lease.gateway) - 1) != 0) {
            snprintf(lease.gateway, sizeof(lease.gateway), "gateway");
        }
    }

    pq_text(lease.model, sizeof(lease.model), l->req.model,
              l->req.model_len);

    snprintf(lease.num[0], sizeof(lease.num[0]), "%lld",
             (long long) l->req.tenant_id);
    snprintf(lease.num[1], sizeof(lease.num[1]), "%lld",
             (long long) l->req.want);
    snprintf(lease.num[2], sizeof(lease.num[2]), "%lld",
             (long long) l->req.key_id);
    snprintf(lease.num[3], sizeof(lease.num[3]), "%lld",
             (long long) l->req.until_ms);

    lease.values[0] = lease.num[0];
    lease.values[1] = lease.gateway;
    lease.values[2] = lease.num[1];
    lease.values[3] = lease.model;
    lease.values[4] = lease.num[2];

    switch (l->req.type) {

    case LLM_REC_SHARE_REQ:
        (void) dbconn_send(&lease_query, lease_share_sql, 3, lease.values);
        return;

    case LLM_REC_LEASE_RETURN:
        lease.values[3] = lease.num[3];
        (void) dbconn_send(&lease_query, lease_return_sql, 5, lease.values);
        return;

    default:
        (void) dbconn_send(&lease_query, lease_sql, 5, lease.values);
    }
}


/* the answer goes back to the worker that asked; res NULL: no lease */

static void
lease_answer(PGresult *res)
{
    int           i;
    acd_lease_item_t  *l;
    llm_lease_t   a;

    l = queue_lease_head();

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

        client_release(l->client);

        queue_lease_pop();
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

    client_lease(l->client, &a);
    client_release(l->client);

    queue_lease_pop();
}


static void
lease_done(PGresult *res)
{
    lease_answer(res);
}


/* the worker's wait ends without a lease: it refuses, and asks again */

static void
lease_failed(const char *state)
{
    log_error("lease query failed: %s", dbconn_error());
    lease_answer(NULL);
}
