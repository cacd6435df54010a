
/*
 * Ingest: the settle records leave the queue in batches, one statement
 * each, and are acknowledged only once PostgreSQL reports the statement
 * committed (ReadyForQuery after the result, no error).  A replayed record
 * finds its row and is a success too, so a batch whose outcome was lost
 * with the connection is simply sent again.
 *
 * A batch refused for its data (SQLSTATE class 22 or 23: an unknown
 * tenant, an impossible time) is retried in halves down to the record
 * PostgreSQL still refuses, which goes to llm.usage_rejected: one bad
 * record never blocks the queue.  Any other failure keeps the queue and
 * drops the connection, which reconnects with backoff (dbconn.c).
 */


#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accountd.h"
#include "client.h"
#include "conf.h"
#include "dbconn.h"
#include "event.h"
#include "ingest.h"
#include "log.h"
#include "pq.h"
#include "queue.h"
#include "stats.h"


#define INGEST_PARAMS             20
#define INGEST_REJECT_PARAMS      (INGEST_PARAMS + 1)


/* one record's parameters: its text as PostgreSQL takes it, its numbers */
typedef struct {
    char         request_id[LLM_RECORD_ID_MAX + 1];
    char         model[LLM_RECORD_MODEL_MAX + 1];
    char         finish_reason[LLM_RECORD_FINISH_MAX + 1];
    char         backend[LLM_RECORD_BACKEND_MAX + 1];
    char         provider_key[LLM_RECORD_BACKEND_MAX + 1];
    char         response_id[LLM_RECORD_UPSTREAM_MAX + 1];
    char         upstream_model[LLM_RECORD_UPSTREAM_MAX + 1];
    const char  *api;
    const char  *up_api;             /* NULL: no backend said */
    int64_t      num[INGEST_PARAMS];  /* by column; text ones unused */
    unsigned     has_key:1;
    unsigned     has_finish:1;
    unsigned     has_backend:1;
} ingest_row_t;


typedef struct {
    int64_t         batch_at;          /* a batch not full goes then */
    size_t          batch_n;
    int64_t         batch_sent;        /* stats_usec() */
    size_t          retry_left;        /* at the head, after a refusal */
    size_t          retry_max;         /* their batches' size meanwhile */

    /* parameters of the statement in flight, for up to rows_cap rows */
    size_t          rows_cap;
    ingest_row_t   *rows;
    char           *arrays;            /* the batch's 20 arrays, binary */
    const char     *array[INGEST_PARAMS];
    int             array_len[INGEST_PARAMS];

    /* text parameters of the statement that rejects one record */
    const char     *values[INGEST_REJECT_PARAMS];
    char            num[INGEST_PARAMS][24];

    /* the batch's request_ids: row + 1 by hash, open addressing */
    uint32_t       *ids;
    size_t          ids_mask;
} ingest_t;


static void ingest_send(void);
static void ingest_arrays(size_t n);
static unsigned char *ingest_put32(unsigned char *p, uint32_t v);
static void ingest_send_reject(void);
static void ingest_batch_done(PGresult *res);
static void ingest_batch_failed(const char *state);
static void ingest_reject_done(PGresult *res);
static void ingest_reject_failed(const char *state);
static void ingest_lost(int busy);
static int ingest_prepare(size_t n);
static void ingest_bind(size_t row, const llm_record_t *rec);
static void ingest_bind_text(size_t row);
static int ingest_id_seen(size_t row);
static void ingest_ack(size_t n);
static const char *ingest_api_name(uint8_t api);


static ingest_t  ingest;

static const dbconn_query_t  ingest_batch_query = {
    ingest_batch_done, ingest_batch_failed, ingest_lost
};

static const dbconn_query_t  ingest_reject_query = {
    ingest_reject_done, ingest_reject_failed, ingest_lost
};


/*
 * One statement a batch, prepared once a connection: the records go as 20
 * arrays, a column each, to llm.ingest_batch() (sql/014, sql/016), which
 * does everything for the whole batch at once, as the ledger's owner:
 * accountd's role may not write llm.usage itself, and the database alone
 * costs a row.  It returns the request_ids of the replays whose figures
 * differ from those written, which it put in llm.usage_rejected.
 *
 * A request's figures are never counted twice, nor changed once written.
 * Nothing in a batch shares a request_id: the function's look-up sees only
 * what was there before the statement, so ingest_send() cuts a batch
 * before a request_id it holds already.  llm.usage_request_ids has the
 * last word: a row another writer inserted since the look-up fails the
 * batch with a unique violation, and it is written again in halves, each
 * finding that row.
 */

#define INGEST_INSERT_NAME            "llmgw_insert"

static const char  ingest_insert_sql[] =
    "SELECT r FROM llm.ingest_batch($1::text[], $2::bigint[], $3::bigint[],"
    " $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[],"
    " $9::bigint[], $10::bigint[], $11::bigint[], $12::text[], $13::int[],"
    " $14::int[], $15::bigint[], $16::text[], $17::text[], $18::text[],"
    " $19::text[], $20::text[]) r";

/*
 * The arrays go in PostgreSQL's binary format (array_recv): no number is
 * printed here to be parsed there, nor any text quoted.  Each is a header
 * of 5 integers, then every element as its length (-1 for NULL) and its
 * bytes.  The element types by column, as pg_type has them forever:
 * text 25, bigint 20, int 23.
 */

#define INGEST_ARRAY_HEADER       20

/* the longest of one row's 20 elements, lengths included */
#define INGEST_ARRAY_ROW_MAX                                                  \
    (9 * 4 + LLM_RECORD_ID_MAX + LLM_RECORD_MODEL_MAX + sizeof("embeddings")  \
     + LLM_RECORD_FINISH_MAX + sizeof("embeddings")                           \
     + 2 * LLM_RECORD_BACKEND_MAX + 2 * LLM_RECORD_UPSTREAM_MAX               \
     + 9 * (4 + 8) + 2 * (4 + 4))

static const uint32_t  ingest_array_oid[INGEST_PARAMS] = {
    25, 20, 20, 25, 25, 20, 20, 20, 20, 20, 20, 25, 23, 23, 20, 25, 25, 25,
    25, 25
};

static const int  ingest_binary[INGEST_PARAMS] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
};

static const char  ingest_reject_sql[] =
    "INSERT INTO llm.usage_rejected (request_id, tenant_id, key_id, model,"
    " api, input_tokens, output_tokens, cached_input_tokens,"
    " cache_write_tokens, reasoning_tokens, reserved_tokens, finish_reason,"
    " status, flags, ts_ms, upstream_api, backend, provider_key,"
    " response_id, upstream_model, error)"
    " VALUES ($1::text, $2::bigint, $3::bigint, $4::text, $5::text,"
    " $6::bigint, $7::bigint, $8::bigint, $9::bigint, $10::bigint,"
    " $11::bigint, $12::text, $13::int, $14::int, $15::bigint, $16::text,"
    " $17::text, $18::text, $19::text, $20::text, $21::text)"
    " ON CONFLICT (request_id) DO NOTHING";


static const dbconn_setup_t  ingest_setup = {
    INGEST_INSERT_NAME, ingest_insert_sql, INGEST_PARAMS, NULL
};


int
ingest_init(void)
{
    if (dbconn_setup(&ingest_setup) != 0) {
        return -1;
    }

    return ingest_prepare(acd_cf.batch_max);
}


/*
 * Called with the connection idle and nothing more urgent to send: the
 * rest of a refused batch first, then what the queue holds.
 */

void
ingest_kick(void)
{
    int64_t  now;

    if (ingest.retry_left) {
        ingest_send();
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
        now = event_now();

        if (ingest.batch_at == 0) {
            ingest.batch_at = now + acd_cf.batch_delay;
        }

        if (now < ingest.batch_at) {
            return;
        }
    }

    ingest.batch_at = 0;
    ingest_send();
}


/* a batch waiting for more records; it waits for an idle connection too */

int64_t
ingest_timer_at(void)
{
    return dbconn_idle() ? ingest.batch_at : 0;
}


/* what is left of a refused batch: it is at the queue's head */

int
ingest_retrying(void)
{
    return ingest.retry_left != 0;
}


static void
ingest_send(void)
{
    size_t  n, i;

    n = queue_len();

    if (n == 0) {
        ingest.retry_left = 0;
        return;
    }

    if (n > (size_t) acd_cf.batch_max) {
        n = acd_cf.batch_max;
    }

    if (ingest.retry_left) {
        n = n < ingest.retry_left ? n : ingest.retry_left;
        n = n < ingest.retry_max ? n : ingest.retry_max;
    }

    if (ingest_prepare(n) != 0) {
        return;
    }

    memset(ingest.ids, 0, (ingest.ids_mask + 1) * sizeof(uint32_t));

    for (i = 0; i < n; i++) {
        ingest_bind(i, &queue_at(i)->rec);

        /*
         * A record sent again while its first copy is still queued (a
         * worker that reconnected) waits for the next batch, which finds
         * the first copy written: the look-up does not see what the
         * statement itself inserts.
         */
        if (ingest_id_seen(i)) {
            n = i;
            break;
        }
    }

    ingest_arrays(n);

    ingest.batch_n = n;

    log_noise("sending a batch of %zu records", n);

    ingest.batch_sent = stats_usec();

    (void) dbconn_send_prepared(&ingest_batch_query, INGEST_INSERT_NAME,
                                INGEST_PARAMS, ingest.array,
                                ingest.array_len, ingest_binary);
}


static void
ingest_batch_done(PGresult *res)
{
    int     i;
    size_t  n;
    char    id[LLM_RECORD_ID_MAX + 1];

    n = ingest.batch_n;

    log_debug("batch of %zu records committed", n);

    for (i = 0; i < PQntuples(res); i++) {
        log_clean(id, sizeof(id), PQgetvalue(res, i, 0),
                  PQgetlength(res, i, 0));
        log_error("record \"%s\" refused: llm.usage has this "
                  "request_id already, with other figures; kept in "
                  "llm.usage_rejected", id);
    }

    stats_batch(n, (size_t) PQntuples(res), stats_usec() - ingest.batch_sent);

    ingest_ack(n);

    /* past the refused record, batches double again */
    if (ingest.retry_left) {
        ingest.retry_left -= n < ingest.retry_left ? n : ingest.retry_left;
        ingest.retry_max = 2 * n;
    }
}


static void
ingest_batch_failed(const char *state)
{
    if (strncmp(state, "22", 2) != 0 && strncmp(state, "23", 2) != 0) {
        dbconn_down(dbconn_error());
        return;
    }

    /*
     * The data is refused: find the record that PostgreSQL will not take,
     * in halves, then halves of the half refused, down to the record.  A
     * few statements a bad record: one a record of a large batch held the
     * queue up for as long as a thousand commits.
     */

    if (ingest.batch_n > 1) {
        log_warning("batch of %zu records refused (%s), writing it in "
                    "halves", ingest.batch_n, dbconn_error());

        if (ingest.retry_left == 0) {
            ingest.retry_left = ingest.batch_n;
        }

        ingest.retry_max = (ingest.batch_n + 1) / 2;
        return;
    }

    ingest_send_reject();
}


static void
ingest_send_reject(void)
{
    ingest_bind(0, &queue_at(0)->rec);
    ingest_bind_text(0);
    ingest.values[INGEST_PARAMS] = dbconn_error();

    ingest.batch_n = 1;

    (void) dbconn_send(&ingest_reject_query, ingest_reject_sql,
                       INGEST_REJECT_PARAMS, ingest.values);
}


static void
ingest_reject_done(PGresult *res)
{
    char         id[LLM_RECORD_ID_MAX + 1];
    acd_item_t  *item;

    item = queue_at(0);
    log_clean(id, sizeof(id), item->rec.request_id,
              item->rec.request_id_len);
    log_error("record \"%s\" (tenant %lld) refused by llm.usage: %s; "
              "kept in llm.usage_rejected", id,
              (long long) item->rec.tenant_id, dbconn_error());

    acd_stats.records_rejected++;

    ingest_ack(1);

    if (ingest.retry_left) {
        ingest.retry_left--;
    }
}


/* even llm.usage_rejected will not take it: the log is all there is */

static void
ingest_reject_failed(const char *state)
{
    char         id[LLM_RECORD_ID_MAX + 1];
    acd_item_t  *item;

    if (strncmp(state, "22", 2) != 0 && strncmp(state, "23", 2) != 0) {
        dbconn_down(dbconn_error());
        return;
    }

    item = queue_at(0);
    log_clean(id, sizeof(id), item->rec.request_id, item->rec.request_id_len);

    log_error("record dropped, refused by llm.usage_rejected too (%s): "
              "request_id \"%s\" tenant_id %lld key_id %lld "
              "input_tokens %" PRIu64 " output_tokens %" PRIu64
              " cached_input_tokens %" PRIu64 " reserved_tokens %" PRIu64
              " status %u flags %u ts_ms %lld", dbconn_error(), id,
              (long long) item->rec.tenant_id, (long long) item->rec.key_id,
              item->rec.input_tokens, item->rec.output_tokens,
              item->rec.cached_input_tokens, item->rec.reserved_tokens,
              (unsigned) item->rec.status, (unsigned) item->rec.flags,
              (long long) item->rec.ts_ms);

    acd_stats.records_dropped++;

    ingest_ack(1);

    if (ingest.retry_left) {
        ingest.retry_left--;
    }
}


/* a batch in flight is sent again: it is still at the queue's head */

static void
ingest_lost(int busy)
{
    ingest.batch_n = 0;
}


/* the bound rows as one array a column, in the binary format */

static void
ingest_arrays(size_t n)
{
    size_t          i, k, len;
    uint64_t        v;
    ingest_row_t       *r;
    const char     *t;
    unsigned char  *p, *start, *nulls;

    p = (unsigned char *) ingest.arrays;

    for (k = 0; k < INGEST_PARAMS; k++) {
        start = p;

        p = ingest_put32(p, 1);                     /* dimensions */
        nulls = p;
        p = ingest_put32(p, 0);
        p = ingest_put32(p, ingest_array_oid[k]);
        p = ingest_put32(p, n);
        p = ingest_put32(p, 1);                     /* lower bound */

        for (i = 0; i < n; i++) {
            r = &ingest.rows[i];

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

            case 15:
                t = r->up_api;
                break;

            case 16:
                t = r->has_backend ? r->backend : NULL;
                break;

            case 17:
                t = r->provider_key[0] ? r->provider_key : NULL;
                break;

            case 18:
                t = r->response_id[0] ? r->response_id : NULL;
                break;

            case 19:
                t = r->upstream_model[0] ? r->upstream_model : NULL;
                break;

            default:
                t = "";
            }

            if (t == NULL) {
                p = ingest_put32(p, (uint32_t) -1);
                ingest_put32(nulls, 1);
                continue;
            }

            if (ingest_array_oid[k] == 25) {
                len = strlen(t);
                p = ingest_put32(p, len);
                memcpy(p, t, len);
                p += len;
                continue;
            }

            v = (uint64_t) r->num[k];

            if (ingest_array_oid[k] == 23) {
                p = ingest_put32(p, 4);
                p = ingest_put32(p, (uint32_t) v);
                continue;
            }

            p = ingest_put32(p, 8);
            p = ingest_put32(p, (uint32_t) (v >> 32));
            p = ingest_put32(p, (uint32_t) v);
        }

        ingest.array[k] = (const char *) start;
        ingest.array_len[k] = p - start;
    }
}


/* network byte order */

static unsigned char *
ingest_put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char) (v >> 24);
    p[1] = (unsigned char) (v >> 16);
    p[2] = (unsigned char) (v >> 8);
    p[3] = (unsigned char) v;

    return p + 4;
}


/* room for the statement and parameters of n rows */

static int
ingest_prepare(size_t n)
{
    size_t   cap, mask;
    void    *rows, *arrays, *ids;

    if (n <= ingest.rows_cap) {
        return 0;
    }

    cap = n;

    /* at most half full */
    for (mask = 1; mask < 2 * cap; mask <<= 1) { /* void */ }
    mask--;

    ids = realloc(ingest.ids, (mask + 1) * sizeof(uint32_t));
    if (ids != NULL) {
        ingest.ids = ids;
        ingest.ids_mask = mask;
    }

    rows = realloc(ingest.rows, cap * sizeof(ingest_row_t));
    if (rows != NULL) {
        ingest.rows = rows;
    }

    arrays = realloc(ingest.arrays,
                     cap * INGEST_ARRAY_ROW_MAX
                     + INGEST_PARAMS * INGEST_ARRAY_HEADER);
    if (arrays != NULL) {
        ingest.arrays = arrays;
    }

    if (rows == NULL || arrays == NULL || ids == NULL) {
        log_error("out of memory for a batch of %zu records", n);
        return -1;
    }

    ingest.rows_cap = cap;

    return 0;
}


static void
ingest_bind(size_t row, const llm_record_t *rec)
{
    size_t     i;
    uint32_t   flags;
    uint64_t   tokens[6];
    ingest_row_t  *r;

    r = &ingest.rows[row];

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

    pq_text(r->request_id, sizeof(r->request_id), rec->request_id,
              rec->request_id_len);
    pq_text(r->model, sizeof(r->model), rec->model, rec->model_len);
    pq_text(r->finish_reason, sizeof(r->finish_reason), rec->finish_reason,
              rec->finish_reason_len);
    pq_text(r->backend, sizeof(r->backend), rec->backend, rec->backend_len);
    pq_text(r->provider_key, sizeof(r->provider_key), rec->provider_key,
            rec->provider_key_len);
    pq_text(r->response_id, sizeof(r->response_id), rec->response_id,
            rec->response_id_len);
    pq_text(r->upstream_model, sizeof(r->upstream_model), rec->upstream_model,
            rec->upstream_model_len);

    r->api = ingest_api_name(rec->api);
    r->up_api = rec->up_api ? ingest_api_name(rec->up_api) : NULL;
    r->has_key = rec->key_id > 0;
    r->has_finish = rec->finish_reason_len != 0;
    r->has_backend = r->backend[0] != '\0';

    r->num[1] = rec->tenant_id;
    r->num[2] = rec->key_id;

    for (i = 0; i < 6; i++) {
        r->num[5 + i] = (int64_t) tokens[i];
    }

    r->num[12] = rec->status;
    r->num[13] = (int32_t) flags;
    r->num[14] = rec->ts_ms;
}


/* row's parameters as text, for ingest_reject_sql */

static void
ingest_bind_text(size_t row)
{
    size_t     k;
    ingest_row_t  *r;

    r = &ingest.rows[row];

    for (k = 0; k < INGEST_PARAMS; k++) {
        if (ingest_array_oid[k] != 25) {
            snprintf(ingest.num[k], sizeof(ingest.num[k]), "%lld",
                     (long long) r->num[k]);
            ingest.values[k] = ingest.num[k];
        }
    }

    ingest.values[0] = r->request_id;
    ingest.values[2] = r->has_key ? ingest.num[2] : NULL;
    ingest.values[3] = r->model;
    ingest.values[4] = r->api;
    ingest.values[11] = r->has_finish ? r->finish_reason : NULL;
    ingest.values[15] = r->up_api;
    ingest.values[16] = r->has_backend ? r->backend : NULL;
    ingest.values[17] = r->provider_key[0] ? r->provider_key : NULL;
    ingest.values[18] = r->response_id[0] ? r->response_id : NULL;
    ingest.values[19] = r->upstream_model[0] ? r->upstream_model : NULL;
}


/*
 * Whether the batch has row's request_id already, as bound (two that
 * differ only in bytes pq_text() replaced are the same to PostgreSQL);
 * if not, it is added.
 */

static int
ingest_id_seen(size_t row)
{
    size_t          k;
    uint32_t        h;
    const char     *p;

    /* FNV-1a */
    h = 2166136261u;

    for (p = ingest.rows[row].request_id; *p; p++) {
        h = (h ^ (unsigned char) *p) * 16777619u;
    }

    for (k = h & ingest.ids_mask; ingest.ids[k];
         k = (k + 1) & ingest.ids_mask)
    {
        if (strcmp(ingest.rows[ingest.ids[k] - 1].request_id,
                   ingest.rows[row].request_id)
            == 0)
        {
            return 1;
        }
    }

    ingest.ids[k] = row + 1;

    return 0;
}


/* as llm.usage.api spells it */

static const char *
ingest_api_name(uint8_t api)
{
    switch (api) {

    case LLM_API_ANTHROPIC:
        return "anthropic";

    case LLM_API_RESPONSES:
        return "responses";

    case LLM_API_EMBEDDINGS:
        return "embeddings";

    default:
        return "openai";
    }
}


/* the first n records are in the database: tell their senders */

static void
ingest_ack(size_t n)
{
    size_t       i;
    acd_item_t  *item;

    for (i = 0; i < n; i++) {
        item = queue_at(i);
        client_ack(item->client, &item->rec);
        client_release(item->client);
    }

    queue_pop(n);
    ingest.batch_n = 0;
}
