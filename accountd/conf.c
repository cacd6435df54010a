
/*
 * The configuration file: "key = value" lines, '#' starts a comment line.
 * Every setting is in conf_table below, with its type, range and default;
 * defaults go through the same parser as the file.  Relative paths are
 * taken relative to the directory of the configuration file.
 */


#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accountd.h"
#include "conf.h"
#include "log.h"


#define CONF_LINE_MAX             4096


typedef enum {
    CONF_STR,
    CONF_PATH,
    CONF_INT,
    CONF_MODE,
    CONF_ADDR,
    CONF_USERS
} conf_type_e;


typedef struct {
    const char    *name;
    conf_type_e    type;
    size_t         offset;
    const char    *dflt;
    long           min;
    long           max;
} conf_entry_t;


static conf_entry_t  conf_table[] = {

    { "database_url", CONF_STR,
      offsetof(acd_conf_t, database_url), "", 0, 0 },

    /* the operators' commands' role: "" is database_url's */
    { "admin_database_url", CONF_STR,
      offsetof(acd_conf_t, admin_database_url), "", 0, 0 },

    { "listen", CONF_PATH,
      offsetof(acd_conf_t, listen), "", 0, 0 },

    { "listen_mode", CONF_MODE,
      offsetof(acd_conf_t, listen_mode), "0660", 0, 0777 },

    /* the socket's group, a name or a number; "": accountd's own */
    { "listen_group", CONF_STR,
      offsetof(acd_conf_t, listen_group), "", 0, 0 },

    /* the peers served besides accountd's own user: names or numbers */
    { "allow_users", CONF_USERS,
      offsetof(acd_conf_t, allow_users), "", 0, 0 },

    { "key_secret_file", CONF_PATH,
      offsetof(acd_conf_t, key_secret_file), "", 0, 0 },

    { "key_snapshot", CONF_PATH,
      offsetof(acd_conf_t, key_snapshot), "", 0, 0 },

    { "pidfile", CONF_PATH,
      offsetof(acd_conf_t, pidfile), "", 0, 0 },

    { "logfile", CONF_PATH,
      offsetof(acd_conf_t, logfile), "", 0, 0 },

    { "verbose", CONF_INT,
      offsetof(acd_conf_t, verbose), "0", 0, 3 },

    /* PostgreSQL takes at most 65535 parameters, 13 a record */
    { "batch_max", CONF_INT,
      offsetof(acd_conf_t, batch_max), "1024", 1, 4096 },

    /* ms a batch that is not full waits for more records */
    { "batch_delay", CONF_INT,
      offsetof(acd_conf_t, batch_delay), "5", 0, 1000 },

    { "queue_max", CONF_INT,
      offsetof(acd_conf_t, queue_max), "100000", 1000, 10000000 },

    /* what llm.budget_leases calls this gateway; the host's name if "" */
    { "gateway_name", CONF_STR,
      offsetof(acd_conf_t, gateway_name), "", 0, 0 },

    /* the metrics' HTTP listener, a numeric address and a port; "off" */
    { "metrics_listen", CONF_ADDR,
      offsetof(acd_conf_t, metrics_listen), "off", 0, 0 },

    { NULL, 0, 0, NULL, 0, 0 }
};


acd_conf_t   acd_cf;
char        *acd_conf_file;
int          acd_verbose_args;


static char *conf_trim(char *s);
static int conf_env(char **value, const char *name);
static int conf_set(const conf_entry_t *e, acd_conf_t *cf, const char *dir,
    const char *value, const char *file, int line);
static int conf_set_users(acd_conf_t *cf, const char *value,
    const char *file, int line);


int
conf_load(const char *path, acd_conf_t *cf, int optional)
{
    int                  n, rc;
    char                 buf[CONF_LINE_MAX], *p, *key, *value, *dir;
    char                *slash;
    FILE                *f;
    unsigned char        seen[sizeof(conf_table) / sizeof(conf_entry_t)];
    const conf_entry_t  *e;

    memset(cf, 0, sizeof(acd_conf_t));
    memset(seen, 0, sizeof(seen));

    dir = strdup(path);
    if (dir == NULL) {
        log_error("out of memory");
        return -1;
    }

    slash = strrchr(dir, '/');
    if (slash == NULL) {
        strcpy(dir, ".");

    } else if (slash == dir) {
        dir[1] = '\0';

    } else {
        *slash = '\0';
    }

    rc = -1;

    for (e = conf_table; e->name; e++) {
        if (conf_set(e, cf, dir, e->dflt, "default", 0) != 0) {
            goto done;
        }
    }

    f = fopen(path, "re");
    if (f == NULL) {
        /* a command needs the database only: the defaults and the env */
        if (optional && errno == ENOENT) {
            cf->absent = 1;
            goto env;
        }

        log_error("could not open configuration file \"%s\": %s",
                  path, strerror(errno));
        goto done;
    }

    n = 0;

    while (fgets(buf, sizeof(buf), f) != NULL) {
        n++;

        if (strchr(buf, '\n') == NULL && !feof(f)) {
            log_error("%s:%d: line too long", path, n);
            goto close;
        }

        p = conf_trim(buf);

        if (*p == '\0' || *p == '#') {
            continue;
        }

        value = strchr(p, '=');
        if (value == NULL) {
            log_error("%s:%d: expected \"key = value\"", path, n);
            goto close;
        }

        *value++ = '\0';
        key = conf_trim(p);
        value = conf_trim(value);

        for (e = conf_table; e->name; e++) {
            if (strcmp(e->name, key) == 0) {
                break;
            }
        }

        if (e->name == NULL) {
            log_error("%s:%d: unknown setting \"%s\"", path, n, key);
            goto close;
        }

        if (seen[e - conf_table]) {
            log_error("%s:%d: \"%s\" is duplicate", path, n, key);
            goto close;
        }

        seen[e - conf_table] = 1;

        if (conf_set(e, cf, dir, value, path, n) != 0) {
            goto close;
        }
    }

    if (ferror(f)) {
        log_error("could not read \"%s\": %s", path, strerror(errno));
        goto close;
    }

env:

    if (conf_env(&cf->database_url, "LLMGW_DATABASE_URL") != 0
        || conf_env(&cf->admin_database_url, "LLMGW_ADMIN_DATABASE_URL") != 0)
    {
        log_error("out of memory");
        goto close;
    }

    rc = 0;

close:

    if (f != NULL) {
        fclose(f);
    }

done:

    free(dir);

    if (rc != 0) {
        conf_free(cf);
    }

    return rc;
}


/*
 * SIGHUP: a new configuration replaces the old one only if it loads
 * completely.  The socket, the pidfile and the queue size are set up once.
 * The subsystem that acts on a change at run time (the database
 * connection, for database_url) is told through "changed", with the old
 * configuration, before that is freed.
 */

int
conf_reload(void (*changed)(const acd_conf_t *old))
{
    acd_conf_t  cf, old;

    if (conf_load(acd_conf_file, &cf, 0) != 0) {
        log_error("configuration not reloaded, keeping the old one");
        return -1;
    }

    if (strcmp(cf.listen, acd_cf.listen) != 0
        || cf.listen_mode != acd_cf.listen_mode)
    {
        log_warning("a change of \"listen\" or \"listen_mode\" "
                    "needs a restart");
    }

    if (strcmp(cf.listen_group, acd_cf.listen_group) != 0) {
        log_warning("a change of \"listen_group\" needs a restart");
    }

    if (strcmp(cf.pidfile, acd_cf.pidfile) != 0) {
        log_warning("a change of \"pidfile\" needs a restart");
    }

    if (cf.queue_max != acd_cf.queue_max) {
        log_warning("a change of \"queue_max\" needs a restart");
    }

    if (strcmp(cf.metrics_listen, acd_cf.metrics_listen) != 0) {
        log_warning("a change of \"metrics_listen\" needs a restart");
    }

    /* keep what cannot change at run time */

    free(cf.listen);
    cf.listen = strdup(acd_cf.listen);
    cf.listen_mode = acd_cf.listen_mode;
    free(cf.listen_group);
    cf.listen_group = strdup(acd_cf.listen_group);
    free(cf.pidfile);
    cf.pidfile = strdup(acd_cf.pidfile);
    cf.queue_max = acd_cf.queue_max;
    free(cf.metrics_listen);
    cf.metrics_listen = strdup(acd_cf.metrics_listen);

    if (cf.listen == NULL || cf.listen_group == NULL || cf.pidfile == NULL
        || cf.metrics_listen == NULL)
    {
        log_error("out of memory, configuration not reloaded");
        conf_free(&cf);
        return -1;
    }

    if (strcmp(cf.logfile, acd_cf.logfile) != 0 || cf.logfile[0] != '\0') {

        /* reopened even if unchanged: this is how logs are rotated */

        if (log_open(cf.logfile) != 0) {
            log_error("could not open logfile \"%s\": %s, keeping the old "
                      "one", cf.logfile, strerror(errno));
            free(cf.logfile);
            cf.logfile = strdup(acd_cf.logfile);
        }
    }

    old = acd_cf;
    acd_cf = cf;
    acd_verbose = acd_cf.verbose + acd_verbose_args;

    changed(&old);

    conf_free(&old);

    log_info("configuration reloaded from \"%s\"", acd_conf_file);

    return 0;
}


void
conf_free(acd_conf_t *cf)
{
    free(cf->database_url);
    free(cf->admin_database_url);
    free(cf->listen);
    free(cf->listen_group);
    free(cf->allow_users);
    free(cf->allow_uids);
    free(cf->key_secret_file);
    free(cf->key_snapshot);
    free(cf->pidfile);
    free(cf->logfile);
    free(cf->metrics_listen);
    free(cf->gateway_name);

    memset(cf, 0, sizeof(acd_conf_t));
}


/* an environment variable, if set, overrides the file's setting */

static int
conf_env(char **value, const char *name)
{
    char  *env, *v;

    env = getenv(name);

    if (env == NULL || env[0] == '\0') {
        return 0;
    }

    v = strdup(env);
    if (v == NULL) {
        return -1;
    }

    free(*value);
    *value = v;

    return 0;
}


static char *
conf_trim(char *s)
{
    char  *end;

    while (*s == ' ' || *s == '\t') {
        s++;
    }

    end = s + strlen(s);

    while (end > s && (end[-1] == ' ' || end[-1] == '\t'
                       || end[-1] == '\n' || end[-1] == '\r'))
    {
        end--;
    }

    *end = '\0';

    return s;
}


/*
 * "127.0.0.1:8082" or "[::1]:8082": numeric, so that nothing resolves a
 * name, which would block.
 */

int
conf_parse_addr(const char *s, struct sockaddr_storage *sa, socklen_t *len)
{
    long                  port;
    char                  host[INET6_ADDRSTRLEN], *end;
    size_t                n;
    const char           *h, *colon;
    struct sockaddr_in   *sin;
    struct sockaddr_in6  *sin6;

    memset(sa, 0, sizeof(struct sockaddr_storage));

    if (s[0] == '[') {
        h = s + 1;
        colon = strchr(h, ']');

        if (colon == NULL || colon[1] != ':') {
            return -1;
        }

        n = colon - h;
        colon++;

    } else {
        h = s;
        colon = strrchr(s, ':');

        if (colon == NULL) {
            return -1;
        }

        n = colon - h;
    }

    if (n == 0 || n >= sizeof(host)
        || colon[1] < '0' || colon[1] > '9')
    {
        return -1;
    }

    memcpy(host, h, n);
    host[n] = '\0';

    errno = 0;
    port = strtol(colon + 1, &end, 10);

    if (*end != '\0' || errno != 0 || port < 1 || port > 65535) {
        return -1;
    }

    if (s[0] == '[') {
        sin6 = (struct sockaddr_in6 *) sa;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t) port);
        *len = sizeof(struct sockaddr_in6);

        return inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1 ? 0 : -1;
    }

    sin = (struct sockaddr_in *) sa;
    sin->sin_family = AF_INET;
    sin->sin_port = htons((uint16_t) port);
    *len = sizeof(struct sockaddr_in);

    return inet_pton(AF_INET, host, &sin->sin_addr) == 1 ? 0 : -1;
}


static int
conf_set(const conf_entry_t *e, acd_conf_t *cf, const char *dir,
    const char *value, const char *file, int line)
{
    int                       base;
    long                      n;
    char                     *end, *s, **sp;
    size_t                    len;
    socklen_t                 salen;
    struct sockaddr_storage   sa;

    switch (e->type) {

    case CONF_ADDR:

        if (value[0] == '\0' || strcmp(value, "off") == 0) {
            value = "";

        } else if (conf_parse_addr(value, &sa, &salen) != 0) {
            log_error("%s:%d: invalid value \"%s\" of \"%s\", expected "
                      "\"off\" or an IP address and a port, such as "
                      "127.0.0.1:8082", file, line, value, e->name);
            return -1;
        }

        /* fall through */

    case CONF_USERS:

        /* the numbers for the peer check, the text as given for the rest */

        if (e->type == CONF_USERS
            && conf_set_users(cf, value, file, line) != 0)
        {
            return -1;
        }

        /* fall through */

    case CONF_STR:
    case CONF_PATH:

        if (e->type == CONF_PATH && value[0] != '\0' && value[0] != '/') {
            len = strlen(dir) + 1 + strlen(value) + 1;
            s = malloc(len);

            if (s != NULL) {
                snprintf(s, len, "%s/%s", dir, value);
            }

        } else {
            s = strdup(value);
        }

        if (s == NULL) {
            log_error("out of memory");
            return -1;
        }

        sp = (char **) ((char *) cf + e->offset);
        free(*sp);
        *sp = s;

        return 0;

    case CONF_INT:
    case CONF_MODE:

        base = e->type == CONF_MODE ? 8 : 10;

        errno = 0;
        n = strtol(value, &end, base);

        if (value[0] == '\0' || *end != '\0' || errno != 0
            || n < e->min || n > e->max)
        {
            if (base == 8) {
                log_error("%s:%d: invalid value \"%s\" of \"%s\", "
                          "expected octal from %lo to %lo",
                          file, line, value, e->name, e->min, e->max);

            } else {
                log_error("%s:%d: invalid value \"%s\" of \"%s\", "
                          "expected an integer from %ld to %ld",
                          file, line, value, e->name, e->min, e->max);
            }

            return -1;
        }

        *(int *) ((char *) cf + e->offset) = (int) n;

        return 0;
    }

    return -1;
}


/*
 * "www-data root 33": user names or numbers, separated by blanks or commas.
 * Names are looked up once, here: a peer is then checked by its number.
 */

static int
conf_set_users(acd_conf_t *cf, const char *value, const char *file,
    int line)
{
    char           *copy, *tok, *save, *end;
    uid_t          *uids;
    unsigned        n;
    unsigned long   u;
    struct passwd  *pw;

    copy = strdup(value);
    uids = malloc((strlen(value) / 2 + 1) * sizeof(uid_t));

    if (copy == NULL || uids == NULL) {
        log_error("out of memory");
        free(copy);
        free(uids);
        return -1;
    }

    n = 0;

    for (tok = strtok_r(copy, " \t,", &save); tok != NULL;
         tok = strtok_r(NULL, " \t,", &save))
    {
        if (tok[0] >= '0' && tok[0] <= '9') {
            errno = 0;
            u = strtoul(tok, &end, 10);

            if (*end != '\0' || errno != 0 || u >= (uid_t) -1) {
                log_error("%s:%d: invalid user \"%s\" in \"allow_users\"",
                          file, line, tok);
                goto failed;
            }

            uids[n++] = (uid_t) u;
            continue;
        }

        pw = getpwnam(tok);

        if (pw == NULL) {
            log_error("%s:%d: unknown user \"%s\" in \"allow_users\"",
                      file, line, tok);
            goto failed;
        }

        uids[n++] = pw->pw_uid;
    }

    free(copy);
    free(cf->allow_uids);
    cf->allow_uids = uids;
    cf->nallow_uids = n;

    return 0;

failed:

    free(copy);
    free(uids);

    return -1;
}


/*
 * A setting a command needs is not set: where it should have been, or,
 * when no file was read at all, how to name one.
 */

void
conf_log_unset(const char *name)
{
    if (acd_cf.absent) {
        log_error("\"%s\" is not set: there is no configuration file "
                  "\"%s\" (name one with -c or LLMGW_ACCOUNTD_CONF)",
                  name, acd_conf_file);
        return;
    }

    log_error("\"%s\" is not set in \"%s\"", name, acd_conf_file);
}
