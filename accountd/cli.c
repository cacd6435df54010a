
/*
 * The commands: tenants, keys, the snapshot, capacity, and the books
 * (closing periods, invoices).  They run once and exit,
 * so they use blocking libpq; values are bound parameters as in the
 * daemon.  Results go to stdout, messages to stderr.
 *
 * A new key is printed once, alone on the last line of stdout, and is
 * never logged or stored: the database gets its HMAC under the secret of
 * key_secret_file, its display prefix and its tier.
 *
 * Every change of keys or tenants also notifies the daemon (a trigger,
 * sql/002_key_lifecycle.sql), which rewrites the snapshot; the commands
 * write it themselves all the same, so that it is current when they
 * return.
 */


#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "accountd.h"
#include "cli.h"
#include "conf.h"
#include "log.h"
#include "pq.h"
#include "snapshot.h"
#include "llm_capacity.h"


#define CLI_CONNECT_TIMEOUT       10
#define CLI_SECRET_FILE_MAX       4096
/* 100 years: any longer is a typo, and far dates overflow timestamps */
#define CLI_DURATION_MAX          (100LL * 365 * 86400)
#define CLI_TIME_FORMAT           "'YYYY-MM-DD HH24:MI:SS'"
#define CLI_INVALID_NAME          "1 to %d of A-Z a-z 0-9 _ . -"
#define CLI_PLANS_MAX             32
/* the parameters of the statement that issues a key */
#define CLI_ISSUE_PARAMS          8


typedef struct {
    const char   *name;
    int           flag;
    const char   *value;
    int           seen;
} cli_opt_t;


/* a statement that issues a key: see cli_key_issue() */
typedef struct {
    const char   *what;
    const char   *sql;
    int           nparams;
    const char   *none;         /* no row: the message, with $1 */
    const char   *unsaved;      /* the snapshot was not written */
    unsigned      rotated:1;
} cli_issue_t;


static int cli_tenant_create(int argc, char **argv);
static int cli_tenant_update(int argc, char **argv);
static int cli_tenant_list(int argc, char **argv);
static int cli_key_create(int argc, char **argv);
static int cli_key_update(int argc, char **argv);
static int cli_key_list(int argc, char **argv);
static int cli_key_revoke(int argc, char **argv);
static int cli_key_rotate(int argc, char **argv);
static int cli_snapshot(int argc, char **argv);
static int cli_capacity(int argc, char **argv);
static int cli_period_close(int argc, char **argv);
static int cli_invoice_list(int argc, char **argv);
static int cli_invoice_export(int argc, char **argv);
static int cli_month(const char *s, char *out, size_t cap);
static int cli_capacity_plans(const char *value, char *tiers, char *tpms);
static void cli_capacity_report(PGresult *res, long long capacity,
    long long days, double k);
static int cli_opts(int argc, char **argv, cli_opt_t *opts,
    const char **arg);
static int cli_name(const char *what, const char *value, size_t max);
static int cli_amount(const char *what, const char *s);
static const char *cli_cap(const char *s);
static int cli_duration(const char *what, const char *s, int zero,
    char *out, size_t cap);
static int cli_key_find(PGconn *conn, const char *arg, char *id, size_t cap);
static int cli_key_issue(PGconn *conn, const cli_issue_t *is,
    const char **values, int live);
static int cli_key_new(char *key, char *prefix, uint8_t *hash, int live);
static PGconn *cli_connect(void);
static int cli_list(const char *what, const char *sql, int n,
    const char **values, const char **head);
static int cli_failed(PGresult *res, PGconn *conn, const char *what);
static void cli_table(FILE *out, PGresult *res, const char **head);
static int cli_secret(uint8_t *secret, size_t cap);


typedef struct {
    const char   *noun;
    const char   *verb;
    int         (*handler)(int argc, char **argv);
} cli_command_t;


static cli_command_t  cli_commands[] = {
    { "tenant", "create", cli_tenant_create },
    { "tenant", "update", cli_tenant_update },
    { "tenant", "list", cli_tenant_list },
    { "key", "create", cli_key_create },
    { "key", "update", cli_key_update },
    { "key", "list", cli_key_list },
    { "key", "revoke", cli_key_revoke },
    { "key", "rotate", cli_key_rotate },
    { "snapshot", NULL, cli_snapshot },
    { "capacity", NULL, cli_capacity },
    { "period", "close", cli_period_close },
    { "invoice", "list", cli_invoice_list },
    { "invoice", "export", cli_invoice_export },
    { NULL, NULL, NULL }
};


int
cli_main(int argc, char **argv)
{
    cli_command_t  *cmd;

    for (cmd = cli_commands; cmd->noun; cmd++) {

        if (strcmp(argv[0], cmd->noun) != 0) {
            continue;
        }

        if (cmd->verb == NULL) {
            return cmd->handler(argc - 1, argv + 1);
        }

        if (argc > 1 && strcmp(argv[1], cmd->verb) == 0) {
            return cmd->handler(argc - 2, argv + 2);
        }
    }

    fprintf(stderr, "accountd: unknown command \"%s%s%s\", see -h\n",
            argv[0], argc > 1 ? " " : "", argc > 1 ? argv[1] : "");

    return 2;
}


static int
cli_tenant_create(int argc, char **argv)
{
    int          rc;
    PGconn      *conn;
    PGresult    *res;
    const char  *values[5], *state;
    cli_opt_t    opts[] = {
        { "name", 0, NULL, 0 },
        { "tier", 0, NULL, 0 },
        { "daily-cap-usd", 0, NULL, 0 },
        { "monthly-cap-usd", 0, NULL, 0 },
        { "time-zone", 0, NULL, 0 },
        { NULL, 0, NULL, 0 }
    };

    if (cli_opts(argc, argv, opts, NULL) != 0) {
        return 2;
    }

    if (opts[0].value == NULL || opts[1].value == NULL) {
        fprintf(stderr, "usage: accountd tenant create --name NAME "
                "--tier TIER [--daily-cap-usd AMOUNT] "
                "[--monthly-cap-usd AMOUNT] [--time-zone TZ]\n");
        return 2;
    }

    if (cli_name("tenant name", opts[0].value, LLM_KEY_TENANT_MAX) != 0
        || cli_name("tier", opts[1].value, LLM_KEY_TIER_MAX) != 0
        || cli_amount("--daily-cap-usd", opts[2].value) != 0
        || cli_amount("--monthly-cap-usd", opts[3].value) != 0)
    {
        return 1;
    }

    conn = cli_connect();
    if (conn == NULL) {
        return 1;
    }

    values[0] = opts[0].value;
    values[1] = opts[1].value;
    values[2] = cli_cap(opts[2].value);
    values[3] = cli_cap(opts[3].value);
    values[4] = opts[4].value;

    /* amounts become exact pico-dollars in SQL, never a float */
    res = PQexecParams(conn,
                       "INSERT INTO llm.tenants (name, tier, daily_cap_pusd,"
                       " monthly_cap_pusd, time_zone)"
                       " VALUES ($1, $2, llm.usd_to_pusd($3),"
                       " llm.usd_to_pusd($4), coalesce($5, 'UTC'))"
                       " RETURNING tenant_id",
                       5, NULL, values, NULL, NULL, 0);

    state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

    if (state != NULL && strcmp(state, "23505") == 0) {
        log_error("tenant \"%s\" exists", opts[0].value);
        rc = 1;

    } else if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = cli_failed(res, conn, "tenant create");

    } else {
        printf("%s\n", PQgetvalue(res, 0, 0));
        rc = 0;
    }

    PQclear(res);
    PQfinish(conn);

    return rc;
}


/* the tier is that of the tenant's new keys: existing keys keep theirs */

static int
cli_tenant_update(int argc, char **argv)
{
    int          rc;
    PGconn      *conn;
    PGresult    *res;
    const char  *values[6], *state;
    cli_opt_t    opts[] = {
        { "name", 0, NULL, 0 },
        { "tier", 0, NULL, 0 },
        { "rename", 0, NULL, 0 },
        { "daily-cap-usd", 0, NULL, 0 },
        { "monthly-cap-usd", 0, NULL, 0 },
        { "time-zone", 0, NULL, 0 },
        { NULL, 0, NULL, 0 }
    };

    if (cli_opts(argc, argv, opts, NULL) != 0) {
        return 2;
    }

    if (opts[0].value == NULL
        || (opts[1].value == NULL && opts[2].value == NULL
            && opts[3].value == NULL && opts[4].value == NULL
            && opts[5].value == NULL))
    {
        fprintf(stderr, "usage: accountd tenant update --name NAME "
                "[--tier TIER] [--rename NEW] [--daily-cap-usd AMOUNT|none] "
                "[--monthly-cap-usd AMOUNT|none] [--time-zone TZ]\n");
        return 2;
    }

    if ((opts[1].value != NULL
         && cli_name("tier", opts[1].value, LLM_KEY_TIER_MAX) != 0)
        || (opts[2].value != NULL
            && cli_name("tenant name", opts[2].value, LLM_KEY_TENANT_MAX)
               != 0)
        || cli_amount("--daily-cap-usd", opts[3].value) != 0
        || cli_amount("--monthly-cap-usd", opts[4].value) != 0)
    {
        return 1;
    }

    conn = cli_connect();
    if (conn == NULL) {
        return 1;
    }

    values[0] = opts[0].value;
    values[1] = opts[1].value;
    values[2] = opts[2].value;
    values[3] = opts[3].value;
    values[4] = opts[4].value;
    values[5] = opts[5].value;

    /* a cap not given stays; "none" removes it */
    res = PQexecParams(conn,
                       "UPDATE llm.tenants"
                       " SET tier = coalesce($2::text, tier),"
                       " name = coalesce($3::text, name),"
                       " daily_cap_pusd = CASE WHEN $4::text IS NULL"
                       " THEN daily_cap_pusd WHEN $4 = 'none' THEN NULL"
                       " ELSE llm.usd_to_pusd($4) END,"
                       " monthly_cap_pusd = CASE WHEN $5::text IS NULL"
                       " THEN monthly_cap_pusd WHEN $5 = 'none' THEN NULL"
                       " ELSE llm.usd_to_pusd($5) END,"
                       " time_zone = coalesce($6::text, time_zone)"
                       " WHERE name = $1 RETURNING tenant_id",
                       6, NULL, values, NULL, NULL, 0);

    state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

    if (state != NULL && strcmp(state, "23505") == 0) {
        log_error("tenant \"%s\" exists", opts[2].value);
        rc = 1;
        goto done;
    }

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = cli_failed(res, conn, "tenant update");
        goto done;
    }

    if (PQntuples(res) == 0) {
        log_error("no tenant named \"%s\"", opts[0].value);
        rc = 1;
        goto done;
    }

    printf("%s\n", PQgetvalue(res, 0, 0));
    fflush(stdout);

    rc = 0;

    /* the snapshot names each key's tenant */

    if (opts[2].value != NULL
        && snapshot_blocking(conn, acd_cf.key_snapshot, NULL) != 0)
    {
        log_error("the tenant is renamed but the snapshot was not written: "
                  "run \"accountd snapshot\"");
        rc = 1;
    }

done:

    PQclear(res);
    PQfinish(conn);

    return rc;
}


static int
cli_tenant_list(int argc, char **argv)
{
    const char  *head[] = { "id", "name", "tier", "daily_cap_usd",
                            "monthly_cap_usd", "time_zone", NULL };

    if (argc != 0) {
        fprintf(stderr, "usage: accountd tenant list\n");
        return 2;
    }

    return cli_list("tenant list",
                    "SELECT tenant_id, name, tier,"
                    " coalesce((daily_cap_pusd * 0.000000000001)::text, '-'),"
                    " coalesce((monthly_cap_pusd * 0.000000000001)::text,"
                    " '-'), time_zone"
                    " FROM llm.tenants ORDER BY tenant_id",
                    0, NULL, head);
}


/*
 * A cap as written: dollars with at most 12 decimals, or "none" where a
 * cap may be removed.  PostgreSQL turns it into pico-dollars exactly.
 */

static int
cli_amount(const char *what, const char *s)
{
    size_t       i, dot, digits;

    if (s == NULL || strcmp(s, "none") == 0) {
        return 0;
    }

    dot = 0;
    digits = 0;

    for (i = 0; s[i]; i++) {
        if (s[i] == '.' && dot == 0 && digits > 0) {
            dot = i;
            continue;
        }

        if (s[i] < '0' || s[i] > '9') {
            break;
        }

        digits++;
    }

    if (s[i] != '\0' || digits == 0 || (dot && s[dot + 1] == '\0')
        || (dot ? dot : i) > 7 || (dot && i - dot - 1 > 12))
    {
        log_error("%s \"%s\": dollars, such as 12.50 (at most 7 digits and "
                  "12 decimals)", what, s);
        return -1;
    }

    return 0;
}


/* "none" on creation is no cap: NULL */

static const char *
cli_cap(const char *s)
{
    return (s == NULL || strcmp(s, "none") == 0) ? NULL : s;
}


/*
 * What "key create" and "key rotate" share: the new key, of the kind
 * asked for, bound with its HMAC as $2 and its display prefix as $3 of a
 * statement that inserts it and returns its key_id, tenant, tier, models
 * and expiry (and, for a rotation, the old key's id, prefix and new
 * expiry); the snapshot written before the key is shown; the key printed
 * once and wiped.
 */

static const cli_issue_t  cli_key_create_issue = {
    "key create",
    "INSERT INTO llm.api_keys"
    " (tenant_id, key_hash, display_prefix, tier, models,"
    " expires_at, daily_cap_pusd, monthly_cap_pusd)"
    " SELECT tenant_id, $2::bytea, $3::text,"
    " coalesce($4::text, tier),"
    " string_to_array($5::text, ','),"
    " now() + $6::bigint * interval '1 second',"
    " llm.usd_to_pusd($7), llm.usd_to_pusd($8)"
    " FROM llm.tenants WHERE name = $1"
    " RETURNING key_id, $1::text, tier,"
    " coalesce(array_to_string(models, ','), '*'),"
    " coalesce(to_char(expires_at, " CLI_TIME_FORMAT "),"
    " '-')",
    8,
    "no tenant named \"%s\"",
    "the key is created but the snapshot was not written: "
    "run \"accountd snapshot\"",
    0
};

/*
 * One statement, so that the new key and the old key's expiry are
 * committed together: a key is never left without its successor, nor a
 * successor made for a key that stays.
 */

static const cli_issue_t  cli_key_rotate_issue = {
    "key rotate",
    "WITH old AS ("
    " UPDATE llm.api_keys"
    " SET expires_at = least(expires_at,"
    " now() + $4::bigint * interval '1 second')"
    " WHERE key_id = $1::bigint AND revoked_at IS NULL"
    " RETURNING key_id, tenant_id, tier, models,"
    " display_prefix, expires_at),"
    " new AS ("
    " INSERT INTO llm.api_keys"
    " (tenant_id, key_hash, display_prefix, tier, models,"
    " rotated_from)"
    " SELECT tenant_id, $2::bytea, $3::text, tier,"
    " models, key_id FROM old"
    " RETURNING key_id, tenant_id, tier, models)"
    " SELECT new.key_id, t.name, new.tier,"
    " coalesce(array_to_string(new.models, ','), '*'), '-',"
    " old.key_id, old.display_prefix,"
    " to_char(old.expires_at, " CLI_TIME_FORMAT ")"
    " FROM new CROSS JOIN old"
    " JOIN llm.tenants t ON t.tenant_id = new.tenant_id",
    4,
    "key %s was revoked meanwhile: nothing done",
    "the key is rotated but the snapshot was not written: "
    "run \"accountd snapshot\"",
    1
};


/* values: the statement's, but for $2 and $3, which are set here */

static int
cli_key_issue(PGconn *conn, const cli_issue_t *is, const char **values,
    int live)
{
    int        rc, lengths[CLI_ISSUE_PARAMS], formats[CLI_ISSUE_PARAMS];
    char       key[LLM_KEY_LEN + 1], prefix[LLM_KEY_DISPLAY_LEN + 1];
    uint8_t    hash[LLM_KEY_HASH_LEN];
    PGresult  *res;

    if (cli_key_new(key, prefix, hash, live) != 0) {
        return 1;
    }

    values[1] = (const char *) hash;
    values[2] = prefix;

    memset(lengths, 0, sizeof(lengths));
    memset(formats, 0, sizeof(formats));
    lengths[1] = LLM_KEY_HASH_LEN;
    formats[1] = 1;

    rc = 1;

    res = PQexecParams(conn, is->sql, is->nparams, NULL, values, lengths,
                       formats, 0);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = cli_failed(res, conn, is->what);
        goto done;
    }

    if (PQntuples(res) == 0) {
        log_error(is->none, values[0]);
        goto done;
    }

    /* live before it is shown; a failed snapshot still shows the key */

    rc = 0;

    if (snapshot_blocking(conn, acd_cf.key_snapshot, NULL) != 0) {
        log_error("%s", is->unsaved);
        rc = 1;
    }

    if (is->rotated) {
        printf("key %s (%s) expires %s\n", PQgetvalue(res, 0, 5),
               PQgetvalue(res, 0, 6), PQgetvalue(res, 0, 7));
    }

    printf("key_id %s, tenant %s, tier %s, prefix %s, models %s, "
           "expires %s\n",
           PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
           PQgetvalue(res, 0, 2), prefix, PQgetvalue(res, 0, 3),
           PQgetvalue(res, 0, 4));
    printf("%s\n", key);
    fflush(stdout);

done:

    OPENSSL_cleanse(key, sizeof(key));
    PQclear(res);

    return rc;
}


static int
cli_key_create(int argc, char **argv)
{
    int          rc;
    char         expires[24];
    PGconn      *conn;
    const char  *values[CLI_ISSUE_PARAMS], *models;
    cli_opt_t    opts[] = {
        { "tenant", 0, NULL, 0 },
        { "tier", 0, NULL, 0 },
        { "test", 1, NULL, 0 },
        { "models", 0, NULL, 0 },
        { "expires-in", 0, NULL, 0 },
        { "daily-cap-usd", 0, NULL, 0 },
        { "monthly-cap-usd", 0, NULL, 0 },
        { NULL, 0, NULL, 0 }
    };

    if (cli_opts(argc, argv, opts, NULL) != 0) {
        return 2;
    }

    if (opts[0].value == NULL) {
        fprintf(stderr, "usage: accountd key create --tenant NAME "
                "[--tier TIER] [--models LIST] [--expires-in DURATION] "
                "[--daily-cap-usd AMOUNT] [--monthly-cap-usd AMOUNT] "
                "[--test]\n");
        return 2;
    }

    if ((opts[1].value != NULL
         && cli_name("tier", opts[1].value, LLM_KEY_TIER_MAX) != 0)
        || cli_amount("--daily-cap-usd", opts[5].value) != 0
        || cli_amount("--monthly-cap-usd", opts[6].value) != 0)
    {
        return 1;
    }

    models = opts[3].value;

    if (models != NULL && !llm_key_models_valid(models, strlen(models))) {
        log_error("invalid --models \"%s\": \"*\", or model names separated "
                  "by commas, each 1 to %d of A-Z a-z 0-9 _ . : / @ + -, "
                  "at most %d characters in all", models,
                  LLM_KEY_MODEL_MAX - 1, LLM_KEY_MODELS_MAX - 1);
        return 2;
    }

    /* NULL in the database: any model */
    if (models != NULL && strcmp(models, "*") == 0) {
        models = NULL;
    }

    if (opts[4].value != NULL
        && cli_duration("--expires-in", opts[4].value, 0, expires,
                        sizeof(expires))
           != 0)
    {
        return 2;
    }

    conn = cli_connect();
    if (conn == NULL) {
        return 1;
    }

    values[0] = opts[0].value;
    values[3] = opts[1].value;
    values[4] = models;
    values[5] = opts[4].value ? expires : NULL;
    values[6] = cli_cap(opts[5].value);
    values[7] = cli_cap(opts[6].value);

    /* amounts become exact pico-dollars in SQL, never a float */
    rc = cli_key_issue(conn, &cli_key_create_issue, values, !opts[2].seen);

    PQfinish(conn);

    return rc;
}


/*
 * A key's own caps, on top of its tenant's.  They are not in the key
 * snapshot: the gateways learn them with their leases.
 */

static int
cli_key_update(int argc, char **argv)
{
    int          rc;
    char         id[24];
    PGconn      *conn;
    PGresult    *res;
    const char  *values[3], *arg;
    cli_opt_t    opts[] = {
        { "daily-cap-usd", 0, NULL, 0 },
        { "monthly-cap-usd", 0, NULL, 0 },
        { NULL, 0, NULL, 0 }
    };

    if (cli_opts(argc, argv, opts, &arg) != 0 || arg == NULL
        || (opts[0].value == NULL && opts[1].value == NULL))
    {
        fprintf(stderr, "usage: accountd key update ID|PREFIX "
                "[--daily-cap-usd AMOUNT|none] "
                "[--monthly-cap-usd AMOUNT|none]\n");
        return 2;
    }

    if (cli_amount("--daily-cap-usd", opts[0].value) != 0
        || cli_amount("--monthly-cap-usd", opts[1].value) != 0)
    {
        return 1;
    }

    conn = cli_connect();
    if (conn == NULL) {
        return 1;
    }

    res = NULL;

    rc = cli_key_find(conn, arg, id, sizeof(id));
    if (rc != 0) {
        goto done;
    }

    values[0] = id;
    values[1] = opts[0].value;
    values[2] = opts[1].value;

    /* a cap not given stays; "none" removes it */
    res = PQexecParams(conn,
                       "UPDATE llm.api_keys k"
                       " SET daily_cap_pusd = CASE WHEN $2::text IS NULL"
                       " THEN k.daily_cap_pusd WHEN $2 = 'none' THEN NULL"
                       " ELSE llm.usd_to_pusd($2) END,"
                       " monthly_cap_pusd = CASE WHEN $3::text IS NULL"
                       " THEN k.monthly_cap_pusd WHEN $3 = 'none' THEN NULL"
                       " ELSE llm.usd_to_pusd($3) END"
                       " FROM llm.tenants t"
                       " WHERE k.key_id = $1::bigint"
                       " AND t.tenant_id = k.tenant_id"
                       " RETURNING k.key_id, t.name,"
                       " coalesce((k.daily_cap_pusd * 0.000000000001)::text,"
                       " '-'),"
                       " coalesce((k.monthly_cap_pusd * 0.000000000001)"
                       "::text, '-')",
                       3, NULL, values, NULL, NULL, 0);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = cli_failed(res, conn, "key update");
        goto done;
    }

    if (PQntuples(res) == 0) {
        log_error("no key with id %s", id);
        rc = 1;
        goto done;
    }

    printf("key_id %s, tenant %s, daily cap %s, monthly cap %s\n",
           PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
           PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3));
    fflush(stdout);

    rc = 0;

done:

    PQclear(res);
    PQfinish(conn);

    return rc;
}


static int
cli_key_list(int argc, char **argv)
{
    const char  *values[1];
    const char  *head[] = { "id", "tenant", "tier", "prefix",
                            "daily_cap_usd", "monthly_cap_usd", "created",
                            "expires", "revoked", "models", NULL };
    cli_opt_t    opts[] = {
        { "tenant", 0, NULL, 0 },
        { NULL, 0, NULL, 0 }
    };

    if (cli_opts(argc, argv, opts, NULL) != 0) {
        return 2;
    }

    values[0] = opts[0].value;

    return cli_list("key list",
                    "SELECT k.key_id, t.name, k.tier, k.display_prefix,"
                    " coalesce((k.daily_cap_pusd * 0.000000000001)::text,"
                    " '-'),"
                    " coalesce((k.monthly_cap_pusd * 0.000000000001)::text,"
                    " '-'),"
                    " to_char(k.created_at, " CLI_TIME_FORMAT "),"
                    " coalesce(to_char(k.expires_at, " CLI_TIME_FORMAT "),"
                    " '-'),"
                    " coalesce(to_char(k.revoked_at, " CLI_TIME_FORMAT "),"
                    " '-'),"
                    " coalesce(array_to_string(k.models, ','), '*')"
                    " FROM llm.api_keys k JOIN llm.tenants t"
                    " USING (tenant_id)"
                    " WHERE $1::text IS NULL OR t.name = $1"
                    " ORDER BY k.key_id",
                    1, values, head);
}


static int
cli_key_revoke(int argc, char **argv)
{
    int          rc;
    char         id[24];
    PGconn      *conn;
    PGresult    *res;
    const char  *values[1], *arg;

    if (cli_opts(argc, argv, NULL, &arg) != 0 || arg == NULL) {
        fprintf(stderr, "usage: accountd key revoke ID|PREFIX\n");
        return 2;
    }

    conn = cli_connect();
    if (conn == NULL) {
        return 1;
    }

    res = NULL;

    rc = cli_key_find(conn, arg, id, sizeof(id));
    if (rc != 0) {
        goto done;
    }

    values[0] = id;

    res = PQexecParams(conn,
                       "UPDATE llm.api_keys SET revoked_at = now()"
                       " WHERE key_id = $1::bigint AND revoked_at IS NULL"
                       " RETURNING key_id",
                       1, NULL, values, NULL, NULL, 0);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = cli_failed(res, conn, "key revoke");
        goto done;
    }

    if (PQntuples(res) == 0) {
        PQclear(res);

        res = PQexecParams(conn,
                           "SELECT 1 FROM llm.api_keys"
                           " WHERE key_id = $1::bigint",
                           1, NULL, values, NULL, NULL, 0);

        if (PQresultStatus(res) != PGRES_TUPLES_OK) {
            rc = cli_failed(res, conn, "key revoke");
            goto done;
        }

        if (PQntuples(res) == 0) {
            log_error("no key with id %s", id);
            rc = 1;
            goto done;
        }

        printf("key %s was already revoked\n", id);

    } else {
        printf("key %s revoked\n", id);
    }

    fflush(stdout);

    /* written even if it was revoked before: the last write may have failed */
    rc = snapshot_blocking(conn, acd_cf.key_snapshot, NULL) == 0 ? 0 : 1;

done:

    PQclear(res);
    PQfinish(conn);

    return rc;
}


static int
cli_key_rotate(int argc, char **argv)
{
    int          rc, live;
    char         id[24], grace[24];
    PGconn      *conn;
    PGresult    *res;
    const char  *values[CLI_ISSUE_PARAMS], *arg;
    cli_opt_t    opts[] = {
        { "grace", 0, NULL, 0 },
        { NULL, 0, NULL, 0 }
    };

    if (cli_opts(argc, argv, opts, &arg) != 0
        || arg == NULL || opts[0].value == NULL)
    {
        fprintf(stderr, "usage: accountd key rotate ID|PREFIX "
                "--grace DURATION\n");
        return 2;
    }

    if (cli_duration("--grace", opts[0].value, 1, grace, sizeof(grace))
        != 0)
    {
        return 2;
    }

    res = NULL;

    conn = cli_connect();
    if (conn == NULL) {
        return 1;
    }

    rc = cli_key_find(conn, arg, id, sizeof(id));
    if (rc != 0) {
        goto done;
    }

    rc = 1;
    values[0] = id;

    res = PQexecParams(conn,
                       "SELECT display_prefix, revoked_at IS NOT NULL"
                       " FROM llm.api_keys WHERE key_id = $1::bigint",
                       1, NULL, values, NULL, NULL, 0);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = cli_failed(res, conn, "key rotate");
        goto done;
    }

    if (PQntuples(res) == 0) {
        log_error("no key with id %s", id);
        goto done;
    }

    if (strcmp(PQgetvalue(res, 0, 1), "t") == 0) {
        log_error("key %s is revoked: create a new key instead", id);
        goto done;
    }

    /* the new key is of the old one's kind, live or test */

    live = strncmp(PQgetvalue(res, 0, 0), LLM_KEY_PREFIX_TEST,
                   LLM_KEY_PREFIX_LEN) != 0;

    PQclear(res);
    res = NULL;

    values[0] = id;
    values[3] = grace;

    rc = cli_key_issue(conn, &cli_key_rotate_issue, values, live);

done:

    PQclear(res);
    PQfinish(conn);

    return rc;
}


static int
cli_snapshot(int argc, char **argv)
{
    int      rc;
    PGconn  *conn;

    if (argc != 0) {
        fprintf(stderr, "usage: accountd snapshot\n");
        return 2;
    }

    if (acd_cf.key_snapshot[0] == '\0') {
        conf_log_unset("key_snapshot");
        return 1;
    }

    conn = cli_connect();
    if (conn == NULL) {
        return 1;
    }

    rc = snapshot_blocking(conn, acd_cf.key_snapshot, NULL) == 0 ? 0 : 1;

    PQfinish(conn);

    return rc;
}


/*
 * "--name VALUE", "--name=VALUE", or "--flag"; each at most once.  With
 * arg, one argument that is not an option may come anywhere.
 */

static int
cli_opts(int argc, char **argv, cli_opt_t *opts, const char **arg)
{
    int         i;
    char       *a, *eq;
    size_t      len;
    cli_opt_t  *o;

    if (arg != NULL) {
        *arg = NULL;
    }

    for (i = 0; i < argc; i++) {
        a = argv[i];

        if (strncmp(a, "--", 2) != 0) {

            if (arg != NULL && *arg == NULL) {
                *arg = a;
                continue;
            }

            fprintf(stderr, "accountd: unexpected argument \"%s\"\n", a);
            return -1;
        }

        a += 2;
        eq = strchr(a, '=');
        len = eq ? (size_t) (eq - a) : strlen(a);

        for (o = opts; o != NULL && o->name; o++) {
            if (strlen(o->name) == len && strncmp(o->name, a, len) == 0) {
                break;
            }
        }

        if (o == NULL || o->name == NULL) {
            fprintf(stderr, "accountd: unknown option \"%s\"\n", argv[i]);
            return -1;
        }

        if (o->seen) {
            fprintf(stderr, "accountd: \"--%s\" is duplicate\n", o->name);
            return -1;
        }

        o->seen = 1;

        if (o->flag) {
            if (eq != NULL) {
                fprintf(stderr, "accountd: \"--%s\" takes no value\n",
                        o->name);
                return -1;
            }

            continue;
        }

        if (eq != NULL) {
            o->value = eq + 1;

        } else if (i + 1 < argc) {
            o->value = argv[++i];

        } else {
            fprintf(stderr, "accountd: \"--%s\" needs a value\n", o->name);
            return -1;
        }
    }

    return 0;
}


static int
cli_name(const char *what, const char *value, size_t max)
{
    if (llm_key_name_valid(value, strlen(value), max)) {
        return 0;
    }

    log_error("invalid %s \"%s\": " CLI_INVALID_NAME, what, value,
              (int) max - 1);

    return -1;
}


/*
 * "30s", "15m", "12h", "30d": a whole number of seconds, minutes, hours
 * or days, written as decimal seconds for a bigint parameter.  Zero only
 * if zero is allowed, and no leading zeros, signs or spaces.
 */

static int
cli_duration(const char *what, const char *s, int zero, char *out,
    size_t cap)
{
    size_t     len, i;
    long long  v, unit;

    len = strlen(s);
    v = 0;
    unit = 0;

    if (len >= 2 && len <= 12) {

        switch (s[len - 1]) {

        case 's':
            unit = 1;
            break;

        case 'm':
            unit = 60;
            break;

        case 'h':
            unit = 3600;
            break;

        case 'd':
            unit = 86400;
            break;
        }
    }

    for (i = 0; unit && i < len - 1; i++) {
        if (s[i] < '0' || s[i] > '9' || (i == 0 && s[0] == '0' && len > 2)) {
            unit = 0;
            break;
        }

        v = v * 10 + (s[i] - '0');
    }

    if (unit == 0 || (v == 0 && !zero) || v > CLI_DURATION_MAX / unit) {
        log_error("invalid %s \"%s\": a %snumber and a unit, s, m, h or d "
                  "(e.g. 30s, 15m, 12h, 30d), at most 100 years", what, s,
                  zero ? "" : "positive ");
        return -1;
    }

    snprintf(out, cap, "%lld", v * unit);

    return 0;
}


/*
 * An all-digits argument is a key id; anything else is a display prefix
 * as "key list" shows it, which must name exactly one key not revoked.
 * Returns 0 with the id, or the exit code.
 */

static int
cli_key_find(PGconn *conn, const char *arg, char *id, size_t cap)
{
    int          rc, n;
    size_t       len;
    PGresult    *res;
    const char  *values[1];
    const char  *head[] = { "id", "tenant", "tier", "prefix", "created",
                            "expires", NULL };

    len = strlen(arg);

    if (len && strspn(arg, "0123456789") == len) {

        if (arg[0] == '0' || len > 19 || len + 1 > cap) {
            log_error("invalid key id \"%s\"", arg);
            return 2;
        }

        memcpy(id, arg, len + 1);
        return 0;
    }

    /* not echoed: it may be a whole key pasted by mistake */

    if (len != LLM_KEY_DISPLAY_LEN) {
        log_error("give a key id, or a key prefix of %d characters as "
                  "\"key list\" shows it", LLM_KEY_DISPLAY_LEN);
        return 2;
    }

    values[0] = arg;

    res = PQexecParams(conn,
                       "SELECT k.key_id, t.name, k.tier, k.display_prefix,"
                       " to_char(k.created_at, " CLI_TIME_FORMAT "),"
                       " coalesce(to_char(k.expires_at, " CLI_TIME_FORMAT
                       "), '-')"
                       " FROM llm.api_keys k JOIN llm.tenants t"
                       " USING (tenant_id)"
                       " WHERE k.display_prefix = $1"
                       " AND k.revoked_at IS NULL"
                       " ORDER BY k.key_id",
                       1, NULL, values, NULL, NULL, 0);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = cli_failed(res, conn, "key lookup");
        PQclear(res);
        return rc;
    }

    n = PQntuples(res);

    if (n == 0) {
        log_error("no key that is not revoked has the prefix \"%s\"", arg);
        PQclear(res);
        return 1;
    }

    if (n > 1) {
        log_error("%d keys have the prefix \"%s\", give the id of one:",
                  n, arg);
        cli_table(stderr, res, head);
        PQclear(res);
        return 1;
    }

    snprintf(id, cap, "%s", PQgetvalue(res, 0, 0));

    PQclear(res);

    return 0;
}


/* a new key, its display prefix and its HMAC under key_secret_file */

static int
cli_key_new(char *key, char *prefix, uint8_t *hash, int live)
{
    int      n, rc;
    uint8_t  secret[LLM_KEY_SECRET_MAX];

    n = cli_secret(secret, sizeof(secret));
    if (n < 0) {
        return -1;
    }

    rc = -1;

    if (llm_key_generate(key, LLM_KEY_LEN + 1, live) != 0) {
        log_error("could not generate a key: the random generator failed");
        goto done;
    }

    if (llm_key_hmac(secret, n, key, LLM_KEY_LEN, hash) != 0) {
        log_error("HMAC-SHA256 failed");
        OPENSSL_cleanse(key, LLM_KEY_LEN + 1);
        goto done;
    }

    memcpy(prefix, key, LLM_KEY_DISPLAY_LEN);
    prefix[LLM_KEY_DISPLAY_LEN] = '\0';

    rc = 0;

done:

    OPENSSL_cleanse(secret, sizeof(secret));

    return rc;
}


static const char  cli_capacity_sql[] =
    "WITH plans (tier, tpm) AS ("
    "  SELECT * FROM unnest($1::text[], $2::bigint[])),"
    " span AS ("
    "  SELECT now() - make_interval(days => $3::int) AS since,"
    "         now() AS until),"
    " tenant AS ("
    "  SELECT t.tenant_id, p.tier, p.tpm,"
    "         greatest(t.created_at, span.since) AS since, span.until"
    "  FROM llm.tenants t JOIN plans p ON p.tier = t.tier"
    "  CROSS JOIN span),"
    " used AS ("
    "  SELECT tenant.tier, tenant.tpm,"
    "         (SELECT coalesce(sum(u.input_tokens"
    "                              + coalesce(u.output_tokens, 0)), 0)"
    "          FROM llm.usage u WHERE u.tenant_id = tenant.tenant_id"
    "          AND u.ts >= tenant.since AND u.ts < tenant.until)"
    "           AS tokens,"
    "         greatest(extract(epoch FROM tenant.until - tenant.since)"
    "                  / 60, 1) AS minutes"
    "  FROM tenant)"
    " SELECT p.tier, p.tpm, count(used.tpm),"
    "        coalesce(avg(least(coalesce(used.tokens"
    "                                    / (used.tpm * used.minutes), 0),"
    "                           1)), 0)::float8,"
    "        coalesce(sum(used.tokens), 0)"
    " FROM plans p LEFT JOIN used ON used.tier = p.tier"
    " GROUP BY p.tier, p.tpm ORDER BY p.tier";


/*
 * How far each plan can be oversold: each
 * plan's mean utilisation over the last days, from llm.usage, and the
 * tenants of it the capacity supports by the mean and with k sigma of
 * headroom (llm_capacity.h); then whether the plans sold now fit.
 *
 * A tenant's utilisation is the tokens it used (input and output) over
 * the period, or since it was created if later, divided by its plan's
 * tokens a minute times the minutes; a tenant that used nothing counts,
 * at 0.  A plan is a tier and its TPM, as the gateway's llm_gateway_tier
 * says: the database does not know the TPM, so it is given.
 */

static int
cli_capacity(int argc, char **argv)
{
    int          rc;
    char        *end, days_s[32];
    char         tiers[CLI_PLANS_MAX * 40], tpms[CLI_PLANS_MAX * 24];
    double       k;
    PGconn      *conn;
    PGresult    *res;
    long long    capacity, days;
    const char  *values[3];
    cli_opt_t    opts[] = {
        { "capacity", 0, NULL, 0 },
        { "plans", 0, NULL, 0 },
        { "days", 0, NULL, 0 },
        { "sigma", 0, NULL, 0 },
        { NULL, 0, NULL, 0 }
    };

    if (cli_opts(argc, argv, opts, NULL) != 0) {
        return 2;
    }

    if (opts[0].value == NULL || opts[1].value == NULL) {
        fprintf(stderr, "usage: accountd capacity --capacity TPM "
                "--plans TIER=TPM[,TIER=TPM...] [--days N] [--sigma K]\n");
        return 2;
    }

    errno = 0;
    capacity = strtoll(opts[0].value, &end, 10);

    if (errno || *end != '\0' || capacity <= 0) {
        fprintf(stderr, "accountd: invalid capacity \"%s\"\n", opts[0].value);
        return 2;
    }

    days = 30;

    if (opts[2].value) {
        errno = 0;
        days = strtoll(opts[2].value, &end, 10);

        if (errno || *end != '\0' || days < 1 || days > 3660) {
            fprintf(stderr, "accountd: invalid days \"%s\"\n",
                    opts[2].value);
            return 2;
        }
    }

    k = 3;

    if (opts[3].value) {
        errno = 0;
        k = strtod(opts[3].value, &end);

        if (errno || *end != '\0' || !(k >= 0) || k > 10) {
            fprintf(stderr, "accountd: invalid sigma \"%s\"\n",
                    opts[3].value);
            return 2;
        }
    }

    rc = cli_capacity_plans(opts[1].value, tiers, tpms);
    if (rc != 0) {
        return rc;
    }

    snprintf(days_s, sizeof(days_s), "%lld", days);

    values[0] = tiers;
    values[1] = tpms;
    values[2] = days_s;

    conn = cli_connect();
    if (conn == NULL) {
        return 1;
    }

    res = PQexecParams(conn, cli_capacity_sql, 3, NULL, values, NULL, NULL,
                       0);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = cli_failed(res, conn, "capacity");
        PQclear(res);
        PQfinish(conn);
        return rc;
    }

    cli_capacity_report(res, capacity, days, k);

    PQclear(res);
    PQfinish(conn);

    return 0;
}


/* the plans as two PostgreSQL arrays: {pro,free} and {60000,10000} */

static int
cli_capacity_plans(const char *value, char *tiers, char *tpms)
{
    int         n;
    char       *list, *item, *save, *eq, *end, *tp, *mp;
    long long   tpm;

    list = strdup(value);
    if (list == NULL) {
        return 1;
    }

    tp = tiers;
    mp = tpms;
    *tp++ = '{';
    *mp++ = '{';
    n = 0;

    for (item = strtok_r(list, ",", &save); item;
         item = strtok_r(NULL, ",", &save))
    {
        eq = strchr(item, '=');

        if (eq == NULL || n == CLI_PLANS_MAX) {
            goto invalid;
        }

        *eq = '\0';
        errno = 0;
        tpm = strtoll(eq + 1, &end, 10);

        if (cli_name("tier", item, 31) != 0) {
            free(list);
            return 2;
        }

        if (errno || *end != '\0' || tpm <= 0) {
            goto invalid;
        }

        tp += sprintf(tp, "%s%s", n ? "," : "", item);
        mp += sprintf(mp, "%s%lld", n ? "," : "", tpm);
        n++;
    }

    free(list);

    if (n == 0) {
        fprintf(stderr, "accountd: no plans in \"%s\"\n", value);
        return 2;
    }

    *tp++ = '}';
    *tp = '\0';
    *mp++ = '}';
    *mp = '\0';

    return 0;

invalid:

    fprintf(stderr, "accountd: invalid plans \"%s\": TIER=TPM[,TIER=TPM...]\n",
            value);
    free(list);
    return 2;
}


static void
cli_capacity_report(PGresult *res, long long capacity, long long days,
    double k)
{
    int                   i, n;
    double                mean, sd, p;
    int64_t               by_mean, by_k;
    llm_capacity_plan_t   plans[CLI_PLANS_MAX];

    printf("capacity %lld tokens a minute; utilisation over the last %lld "
           "days; headroom %.4g sigma\n\n", capacity, days, k);
    printf("%-16s %10s %8s %12s %10s %10s %10s %10s\n", "plan", "tpm",
           "tenants", "utilisation", "by_mean", "x", "headroom", "x");

    n = PQntuples(res);

    for (i = 0; i < n && i < CLI_PLANS_MAX; i++) {
        plans[i].plan_tpm = strtoll(PQgetvalue(res, i, 1), NULL, 10);
        plans[i].tenants = strtoll(PQgetvalue(res, i, 2), NULL, 10);
        p = strtod(PQgetvalue(res, i, 3), NULL);
        plans[i].p = p;

        by_mean = llm_capacity_by_mean(capacity, plans[i].plan_tpm, p);
        by_k = llm_capacity_with_headroom(capacity, plans[i].plan_tpm, p, k);

        if (by_mean < 0) {
            printf("%-16s %10lld %8lld %11.2f%% %10s %10s %10s %10s\n",
                   PQgetvalue(res, i, 0), (long long) plans[i].plan_tpm,
                   (long long) plans[i].tenants, 100 * p, "-", "-", "-",
                   "-");
            continue;
        }

        printf("%-16s %10lld %8lld %11.2f%% %10lld %9.1fx %10lld %9.1fx\n",
               PQgetvalue(res, i, 0), (long long) plans[i].plan_tpm,
               (long long) plans[i].tenants, 100 * p, (long long) by_mean,
               (double) by_mean * plans[i].plan_tpm / capacity,
               (long long) by_k,
               (double) by_k * plans[i].plan_tpm / capacity);
    }

    llm_capacity_load(plans, i, &mean, &sd);

    printf("\nthe plans sold now: a mean load of %.0f tokens a minute, "
           "sigma %.0f; mean + %.4g sigma = %.0f, %s the capacity\n",
           mean, sd, k, mean + k * sd,
           mean + k * sd <= (double) capacity ? "within" : "OVER");
}


/*
 * Closes the periods due (ended --grace ago, 3 days unless told), of
 * every tenant or of one; with --month, the tenant's periods up to that
 * month's, which must be due.  Prints the invoices written, or, closed
 * already, found: closing twice changes nothing.
 */

#define CLI_INVOICE_COLUMNS                                                   \
    " i.invoice_id, i.tenant, to_char(i.period_start, 'YYYY-MM'),"            \
    " i.time_zone, i.currency,"                                               \
    " (i.total_minor::numeric / 100)::numeric(20, 2)::text,"                  \
    " i.requests, i.unpriced_requests,"                                       \
    " to_char(i.closed_at AT TIME ZONE 'UTC', " CLI_TIME_FORMAT ")"

static const char  *cli_invoice_head[] = {
    "invoice", "tenant", "period", "time_zone", "currency", "total",
    "requests", "unpriced", "closed_utc", NULL
};


static int
cli_period_close(int argc, char **argv)
{
    int          rc;
    char         month[16], grace[24], tenant[24], *ids, *before;
    PGconn      *conn;
    PGresult    *res;
    const char  *values[3], *shown[4];
    cli_opt_t    opts[] = {
        { "tenant", 0, NULL, 0 },
        { "month", 0, NULL, 0 },
        { "grace", 0, NULL, 0 },
        { NULL, 0, NULL, 0 }
    };

    if (cli_opts(argc, argv, opts, NULL) != 0
        || (opts[1].value != NULL && opts[0].value == NULL))
    {
        fprintf(stderr, "usage: accountd period close [--tenant NAME "
                "[--month YYYY-MM]] [--grace DURATION]\n");
        return 2;
    }

    if (cli_duration("grace", opts[2].value ? opts[2].value : "3d", 1, grace,
                     sizeof(grace)) != 0
        || (opts[1].value != NULL
            && cli_month(opts[1].value, month, sizeof(month)) != 0))
    {
        return 2;
    }

    conn = cli_connect();
    if (conn == NULL) {
        return 1;
    }

    rc = 1;
    before = NULL;
    values[0] = grace;
    values[1] = NULL;
    values[2] = opts[1].value ? month : NULL;

    if (opts[0].value != NULL) {
        res = PQexecParams(conn, "SELECT tenant_id FROM llm.tenants"
                           " WHERE name = $1", 1, NULL, &opts[0].value, NULL,
                           NULL, 0);

        if (PQresultStatus(res) != PGRES_TUPLES_OK) {
            rc = cli_failed(res, conn, "period close");
            goto done;
        }

        if (PQntuples(res) == 0) {
            log_error("no tenant named \"%s\"", opts[0].value);
            goto done;
        }

        snprintf(tenant, sizeof(tenant), "%s", PQgetvalue(res, 0, 0));
        values[1] = tenant;
        PQclear(res);
    }

    /*
     * A month closes the tenant's earlier periods with it: what they had
     * before, so that those written now are told from those found.
     */
    if (values[2] != NULL) {
        res = PQexecParams(conn, "SELECT coalesce(array_agg(invoice_id),"
                           " '{}')::text FROM llm.invoices"
                           " WHERE tenant_id = $1::bigint"
                           " AND period_start <= $2::date",
                           2, NULL, values + 1, NULL, NULL, 0);

        if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
            rc = cli_failed(res, conn, "period close");
            goto done;
        }

        before = strdup(PQgetvalue(res, 0, 0));
        PQclear(res);
        res = NULL;

        if (before == NULL) {
            log_error("period close: %s", strerror(errno));
            goto done;
        }
    }

    /*
     * One statement: every invoice is written, or none.  What it wrote is
     * read by the next one, which sees it.
     */
    res = PQexecParams(conn,
                       "SELECT coalesce(array_agg(c.id), '{}')::text FROM ("
                       "SELECT llm.close_periods(make_interval("
                       "secs => $1::bigint), now(), $2::bigint) AS id"
                       " WHERE $3::date IS NULL"
                       " UNION ALL SELECT llm.close_period($2::bigint,"
                       " $3::date, make_interval(secs => $1::bigint))"
                       " WHERE $3::date IS NOT NULL) c",
                       3, NULL, values, NULL, NULL, 0);

    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        rc = cli_failed(res, conn, "period close");
        goto done;
    }

    ids = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);

    if (ids == NULL) {
        res = NULL;
        log_error("period close: %s", strerror(errno));
        goto done;
    }

    /* the month's invoice, and those of earlier periods written with it */
    shown[0] = ids;
    shown[1] = values[1];
    shown[2] = values[2];
    shown[3] = before;

    res = PQexecParams(conn,
                       "SELECT" CLI_INVOICE_COLUMNS " FROM llm.invoices i"
                       " WHERE i.invoice_id = ANY ($1::text[])"
                       " OR (i.tenant_id = $2::bigint"
                       " AND i.period_start <= $3::date"
                       " AND NOT i.invoice_id = ANY ($4::text[]))"
                       " ORDER BY i.tenant_id, i.period_start",
                       4, NULL, shown, NULL, NULL, 0);
    free(ids);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = cli_failed(res, conn, "period close");
        goto done;
    }

    cli_table(stdout, res, cli_invoice_head);
    rc = 0;

done:

    free(before);
    PQclear(res);
    PQfinish(conn);

    return rc;
}


static int
cli_invoice_list(int argc, char **argv)
{
    const char  *values[1];
    cli_opt_t    opts[] = {
        { "tenant", 0, NULL, 0 },
        { NULL, 0, NULL, 0 }
    };

    if (cli_opts(argc, argv, opts, NULL) != 0) {
        fprintf(stderr, "usage: accountd invoice list [--tenant NAME]\n");
        return 2;
    }

    values[0] = opts[0].value;

    return cli_list("invoice list",
                    "SELECT" CLI_INVOICE_COLUMNS " FROM llm.invoices i"
                    " WHERE $1::text IS NULL OR i.tenant = $1"
                    " ORDER BY i.tenant_id, i.period_start",
                    1, values, cli_invoice_head);
}


/* a closed invoice as CSV on stdout, lines ended by CRLF (RFC 4180) */

static int
cli_invoice_export(int argc, char **argv)
{
    int          rc, i, n;
    PGconn      *conn;
    PGresult    *res;
    const char  *id;

    if (cli_opts(argc, argv, NULL, &id) != 0 || id == NULL) {
        fprintf(stderr, "usage: accountd invoice export INVOICE\n");
        return 2;
    }

    conn = cli_connect();
    if (conn == NULL) {
        return 1;
    }

    rc = 1;

    res = PQexecParams(conn,
                       "SELECT x FROM llm.invoice_csv($1) x"
                       " WHERE EXISTS (SELECT FROM llm.invoices"
                       " WHERE invoice_id = $1)",
                       1, NULL, &id, NULL, NULL, 0);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = cli_failed(res, conn, "invoice export");
        goto done;
    }

    n = PQntuples(res);

    if (n == 0) {
        log_error("no invoice \"%s\" (see \"accountd invoice list\")", id);
        goto done;
    }

    for (i = 0; i < n; i++) {
        printf("%s\r\n", PQgetvalue(res, i, 0));
    }

    rc = fflush(stdout) == 0 ? 0 : 1;

done:

    PQclear(res);
    PQfinish(conn);

    return rc;
}


/* "2026-11": the first day of the month, as a date PostgreSQL takes */

static int
cli_month(const char *s, char *out, size_t cap)
{
    if (strlen(s) != 7 || strspn(s, "0123456789") != 4 || s[4] != '-'
        || strspn(s + 5, "0123456789") != 2
        || !((s[5] == '0' && s[6] >= '1') || (s[5] == '1' && s[6] <= '2')))
    {
        log_error("invalid month \"%s\": YYYY-MM", s);
        return -1;
    }

    snprintf(out, cap, "%s-01", s);

    return 0;
}


/* as the operators' role (admin_database_url), which accountd's is not */

static PGconn *
cli_connect(void)
{
    return pq_connect(acd_cf.admin_database_url[0] != '\0'
                      ? acd_cf.admin_database_url : acd_cf.database_url,
                      CLI_CONNECT_TIMEOUT);
}


/* runs a query with bound parameters and prints its rows as a table */

static int
cli_list(const char *what, const char *sql, int n, const char **values,
    const char **head)
{
    int        rc;
    PGconn    *conn;
    PGresult  *res;

    conn = cli_connect();
    if (conn == NULL) {
        return 1;
    }

    res = PQexecParams(conn, sql, n, NULL, values, NULL, NULL, 0);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = cli_failed(res, conn, what);

    } else {
        cli_table(stdout, res, head);
        rc = 0;
    }

    PQclear(res);
    PQfinish(conn);

    return rc;
}


static int
cli_failed(PGresult *res, PGconn *conn, const char *what)
{
    const char  *msg;

    msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

    log_error("%s failed: %s", what, msg ? msg : PQerrorMessage(conn));

    return 1;
}


static void
cli_table(FILE *out, PGresult *res, const char **head)
{
    int     rows, cols, r, c, len;
    int     width[16];

    rows = PQntuples(res);
    cols = PQnfields(res);

    if (cols > 16) {
        cols = 16;
    }

    for (c = 0; c < cols; c++) {
        width[c] = (int) strlen(head[c]);

        for (r = 0; r < rows; r++) {
            len = PQgetlength(res, r, c);

            if (len > width[c]) {
                width[c] = len;
            }
        }
    }

    for (c = 0; c < cols; c++) {
        fprintf(out, "%-*s%s", c + 1 < cols ? width[c] : 0, head[c],
                c + 1 < cols ? "  " : "\n");
    }

    for (r = 0; r < rows; r++) {
        for (c = 0; c < cols; c++) {
            fprintf(out, "%-*s%s", c + 1 < cols ? width[c] : 0,
                    PQgetvalue(res, r, c), c + 1 < cols ? "  " : "\n");
        }
    }
}


static int
cli_secret(uint8_t *secret, size_t cap)
{
    int          fd, n;
    char         text[CLI_SECRET_FILE_MAX];
    ssize_t      len;
    struct stat  st;

    if (acd_cf.key_secret_file[0] == '\0') {
        conf_log_unset("key_secret_file");
        return -1;
    }

    fd = open(acd_cf.key_secret_file, O_RDONLY | O_CLOEXEC);
    if (fd == -1) {
        log_error("could not open \"%s\": %s", acd_cf.key_secret_file,
                  strerror(errno));
        return -1;
    }

    if (fstat(fd, &st) == 0 && (st.st_mode & 0004)) {
        log_warning("\"%s\" is readable by everyone", acd_cf.key_secret_file);
    }

    len = read(fd, text, sizeof(text));
    close(fd);

    if (len < 0) {
        log_error("could not read \"%s\": %s", acd_cf.key_secret_file,
                  strerror(errno));
        return -1;
    }

    n = -1;

    if ((size_t) len < sizeof(text)) {
        n = llm_key_secret_decode(text, (size_t) len, secret, cap);
    }

    OPENSSL_cleanse(text, sizeof(text));

    if (n < 0) {
        log_error("\"%s\" must hold %d to %d bytes as hex",
                  acd_cf.key_secret_file, LLM_KEY_SECRET_MIN,
                  LLM_KEY_SECRET_MAX);
        return -1;
    }

    return n;
}
