
/*
 * The commands: tenants, keys and the snapshot.  They run once and exit,
 * so they use blocking libpq; values are bound parameters as in the
 * daemon.  Results go to stdout, messages to stderr.
 *
 * A new key is printed once, alone on the last line of stdout, and is
 * never logged or stored: the database gets its HMAC under the secret of
 * key_secret_file, its display prefix and its tier.
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


#define CLI_CONNECT_TIMEOUT       10
#define CLI_SECRET_FILE_MAX       4096


typedef struct {
    const char   *name;
    int           flag;
    const char   *value;
    int           seen;
} cli_opt_t;


static int cli_tenant_create(int argc, char **argv);
static int cli_tenant_list(int argc, char **argv);
static int cli_key_create(int argc, char **argv);
static int cli_key_list(int argc, char **argv);
static int cli_key_revoke(int argc, char **argv);
static int cli_snapshot(int argc, char **argv);
static int cli_opts(int argc, char **argv, cli_opt_t *opts);
static PGconn *cli_connect(void);
static int cli_list(const char *what, const char *sql, int n,
    const char **values, const char **head);
static int cli_failed(PGresult *res, PGconn *conn, const char *what);
static void cli_table(PGresult *res, const char **head);
static int cli_secret(uint8_t *secret, size_t cap);


typedef struct {
    const char   *noun;
    const char   *verb;
    int         (*handler)(int argc, char **argv);
} cli_command_t;


static cli_command_t  cli_commands[] = {
    { "tenant", "create", cli_tenant_create },
    { "tenant", "list", cli_tenant_list },
    { "key", "create", cli_key_create },
    { "key", "list", cli_key_list },
    { "key", "revoke", cli_key_revoke },
    { "snapshot", NULL, cli_snapshot },
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
    const char  *values[2], *state;
    cli_opt_t    opts[] = {
        { "name", 0, NULL, 0 },
        { "tier", 0, NULL, 0 },
        { NULL, 0, NULL, 0 }
    };

    if (cli_opts(argc, argv, opts) != 0) {
        return 2;
    }

    if (opts[0].value == NULL || opts[1].value == NULL) {
        fprintf(stderr, "usage: accountd tenant create --name NAME "
                "--tier TIER\n");
        return 2;
    }

    if (!llm_key_name_valid(opts[0].value, strlen(opts[0].value),
                            LLM_KEY_TENANT_MAX))
    {
        log_error("invalid tenant name \"%s\": 1 to %d of A-Z a-z 0-9 _ . -",
                  opts[0].value, LLM_KEY_TENANT_MAX - 1);
        return 1;
    }

    if (!llm_key_name_valid(opts[1].value, strlen(opts[1].value),
                            LLM_KEY_TIER_MAX))
    {
        log_error("invalid tier \"%s\": 1 to %d of A-Z a-z 0-9 _ . -",
                  opts[1].value, LLM_KEY_TIER_MAX - 1);
        return 1;
    }

    conn = cli_connect();
    if (conn == NULL) {
        return 1;
    }

    values[0] = opts[0].value;
    values[1] = opts[1].value;

    res = PQexecParams(conn,
                       "INSERT INTO llm.tenants (name, tier)"
                       " VALUES ($1, $2) RETURNING tenant_id",
                       2, NULL, values, NULL, NULL, 0);

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


static int
cli_tenant_list(int argc, char **argv)
{
    const char  *head[] = { "id", "name", "tier", NULL };

    if (argc != 0) {
        fprintf(stderr, "usage: accountd tenant list\n");
        return 2;
    }

    return cli_list("tenant list",
                    "SELECT tenant_id, name, tier FROM llm.tenants"
                    " ORDER BY tenant_id",
                    0, NULL, head);
}


static int
cli_key_create(int argc, char **argv)
{
    int          rc, secret_len;
    char         key[LLM_KEY_LEN + 1], prefix[LLM_KEY_DISPLAY_LEN + 1];
    PGconn      *conn;
    uint8_t      secret[LLM_KEY_SECRET_MAX], hash[LLM_KEY_HASH_LEN];
    PGresult    *res;
    const char  *values[4];
    int          lengths[4], formats[4];
    cli_opt_t    opts[] = {
        { "tenant", 0, NULL, 0 },
        { "tier", 0, NULL, 0 },
        { "test", 1, NULL, 0 },
        { NULL, 0, NULL, 0 }
    };

    if (cli_opts(argc, argv, opts) != 0) {
        return 2;
    }

    if (opts[0].value == NULL) {
        fprintf(stderr, "usage: accountd key create --tenant NAME "
                "[--tier TIER] [--test]\n");
        return 2;
    }

    if (opts[1].value != NULL
        && !llm_key_name_valid(opts[1].value, strlen(opts[1].value),
                               LLM_KEY_TIER_MAX))
    {
        log_error("invalid tier \"%s\": 1 to %d of A-Z a-z 0-9 _ . -",
                  opts[1].value, LLM_KEY_TIER_MAX - 1);
        return 1;
    }

    secret_len = cli_secret(secret, sizeof(secret));
    if (secret_len < 0) {
        return 1;
    }

    conn = cli_connect();
    if (conn == NULL) {
        OPENSSL_cleanse(secret, sizeof(secret));
        return 1;
    }

    rc = 1;
    res = NULL;

    if (llm_key_generate(key, sizeof(key), !opts[2].seen) != 0) {
        log_error("could not generate a key: the random generator failed");
        goto done;
    }

    if (llm_key_hmac(secret, secret_len, key, LLM_KEY_LEN, hash) != 0) {
        log_error("HMAC-SHA256 failed");
        goto done;
    }

    memcpy(prefix, key, LLM_KEY_DISPLAY_LEN);
    prefix[LLM_KEY_DISPLAY_LEN] = '\0';

    values[0] = opts[0].value;
    values[1] = (const char *) hash;
    values[2] = prefix;
    values[3] = opts[1].value;

    memset(lengths, 0, sizeof(lengths));
    memset(formats, 0, sizeof(formats));
    lengths[1] = LLM_KEY_HASH_LEN;
    formats[1] = 1;

    res = PQexecParams(conn,
                       "INSERT INTO llm.api_keys"
                       " (tenant_id, key_hash, display_prefix, tier)"
                       " SELECT tenant_id, $2::bytea, $3::text,"
                       " coalesce($4::text, tier)"
                       " FROM llm.tenants WHERE name = $1"
                       " RETURNING key_id, tier",
                       4, NULL, values, lengths, formats, 0);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        rc = cli_failed(res, conn, "key create");
        goto done;
    }

    if (PQntuples(res) == 0) {
        log_error("no tenant named \"%s\"", opts[0].value);
        goto done;
    }

    /* live before it is shown; a failed snapshot still shows the key */

    rc = 0;

    if (snapshot_blocking(conn, acd_cf.key_snapshot) != 0) {
        log_error("the key is created but the snapshot was not written: "
                  "run \"accountd snapshot\"");
        rc = 1;
    }

    printf("key_id %s, tenant %s, tier %s, prefix %s\n",
           PQgetvalue(res, 0, 0), opts[0].value, PQgetvalue(res, 0, 1),
           prefix);
    printf("%s\n", key);
    fflush(stdout);

done:

    OPENSSL_cleanse(key, sizeof(key));
    OPENSSL_cleanse(secret, sizeof(secret));
    PQclear(res);
    PQfinish(conn);

    return rc;
}


static int
cli_key_list(int argc, char **argv)
{
    const char  *values[1];
    const char  *head[] = { "id", "tenant", "tier", "prefix", "created",
                            "revoked", NULL };
    cli_opt_t    opts[] = {
        { "tenant", 0, NULL, 0 },
        { NULL, 0, NULL, 0 }
    };

    if (cli_opts(argc, argv, opts) != 0) {
        return 2;
    }

    values[0] = opts[0].value;

    return cli_list("key list",
                    "SELECT k.key_id, t.name, k.tier, k.display_prefix,"
                    " to_char(k.created_at, 'YYYY-MM-DD HH24:MI:SS'),"
                    " coalesce(to_char(k.revoked_at,"
                    " 'YYYY-MM-DD HH24:MI:SS'), '-')"
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
    char        *end;
    long long    id;
    PGconn      *conn;
    PGresult    *res;
    const char  *values[1];

    if (argc != 1) {
        fprintf(stderr, "usage: accountd key revoke KEY_ID\n");
        return 2;
    }

    errno = 0;
    id = strtoll(argv[0], &end, 10);

    if (argv[0][0] < '1' || argv[0][0] > '9' || *end != '\0' || errno) {
        log_error("invalid key id \"%s\"", argv[0]);
        return 2;
    }

    conn = cli_connect();
    if (conn == NULL) {
        return 1;
    }

    values[0] = argv[0];

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
            log_error("no key with id %lld", id);
            rc = 1;
            goto done;
        }

        printf("key %lld was already revoked\n", id);

    } else {
        printf("key %lld revoked\n", id);
    }

    /* written even if it was revoked before: the last write may have failed */
    rc = snapshot_blocking(conn, acd_cf.key_snapshot) == 0 ? 0 : 1;

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
        log_error("\"key_snapshot\" is not set in \"%s\"", acd_conf_file);
        return 1;
    }

    conn = cli_connect();
    if (conn == NULL) {
        return 1;
    }

    rc = snapshot_blocking(conn, acd_cf.key_snapshot) == 0 ? 0 : 1;

    PQfinish(conn);

    return rc;
}


/* "--name VALUE", "--name=VALUE", or "--flag"; each at most once */

static int
cli_opts(int argc, char **argv, cli_opt_t *opts)
{
    int         i;
    char       *arg, *eq;
    size_t      len;
    cli_opt_t  *o;

    for (i = 0; i < argc; i++) {
        arg = argv[i];

        if (strncmp(arg, "--", 2) != 0) {
            fprintf(stderr, "accountd: unexpected argument \"%s\"\n", arg);
            return -1;
        }

        arg += 2;
        eq = strchr(arg, '=');
        len = eq ? (size_t) (eq - arg) : strlen(arg);

        for (o = opts; o->name; o++) {
            if (strlen(o->name) == len && strncmp(o->name, arg, len) == 0) {
                break;
            }
        }

        if (o->name == NULL) {
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


static PGconn *
cli_connect(void)
{
    return db_connect_blocking(acd_cf.database_url, CLI_CONNECT_TIMEOUT);
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
        cli_table(res, head);
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
cli_table(PGresult *res, const char **head)
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
        printf("%-*s%s", c + 1 < cols ? width[c] : 0, head[c],
               c + 1 < cols ? "  " : "\n");
    }

    for (r = 0; r < rows; r++) {
        for (c = 0; c < cols; c++) {
            printf("%-*s%s", c + 1 < cols ? width[c] : 0,
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
        log_error("\"key_secret_file\" is not set in \"%s\"", acd_conf_file);
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
