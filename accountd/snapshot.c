
/*
 * The key snapshot: every usable key with its tenant, in the format of
 * llm_key.h, for nginx to load.  Written to "<key_snapshot>.tmp", synced
 * and renamed over the old file, so that a reader sees the old snapshot
 * or the new one and never a part.
 *
 * The daemon and the commands may write it at the same time.  A lock on
 * "<key_snapshot>.lock", taken before the query and held until the rename,
 * orders them: the snapshot of the later query is the one that stays, and
 * a key just revoked cannot come back from an older query.
 */


#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accountd.h"
#include "log.h"
#include "snapshot.h"


#define SNAPSHOT_MODE             0640


static int snapshot_path(char *buf, size_t cap, const char *path,
    const char *suffix);
static int snapshot_hex(const char *s, uint8_t *out, size_t n);
static void snapshot_sync_dir(const char *path);


/*
 * Returns the lock's descriptor, or -1 if it is held elsewhere (and wait
 * is 0) or cannot be taken.
 */

int
snapshot_lock(const char *path, int wait)
{
    int   fd;
    char  lock[4096];

    if (snapshot_path(lock, sizeof(lock), path, ".lock") != 0) {
        return -1;
    }

    fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, SNAPSHOT_MODE);
    if (fd == -1) {
        log_error("could not open \"%s\": %s", lock, strerror(errno));
        return -1;
    }

    while (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) == -1) {

        if (errno == EINTR) {
            continue;
        }

        if (errno == EWOULDBLOCK) {
            log_debug("\"%s\" is locked, the snapshot is written later",
                      lock);

        } else {
            log_error("flock() on \"%s\" failed: %s", lock, strerror(errno));
        }

        close(fd);
        return -1;
    }

    return fd;
}


void
snapshot_unlock(int fd)
{
    if (fd != -1) {
        close(fd);
    }
}


/*
 * Writes the result of SNAPSHOT_QUERY.  *next_expiry is the number of
 * milliseconds until the next key in it expires, or -1.
 */

int
snapshot_write(const char *path, PGresult *res, uint64_t generation,
    int64_t *next_expiry)
{
    int              fd, i, rows, keys;
    char             tmp[4096], line[LLM_KEY_LINE_MAX + 2];
    FILE            *f;
    size_t           n;
    llm_key_entry_t  e;

    *next_expiry = -1;

    if (snapshot_path(tmp, sizeof(tmp), path, ".tmp") != 0) {
        return -1;
    }

    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, SNAPSHOT_MODE);
    if (fd == -1) {
        log_error("could not open \"%s\": %s", tmp, strerror(errno));
        return -1;
    }

    /* whatever the umask, and whatever an old file had */
    if (fchmod(fd, SNAPSHOT_MODE) == -1) {
        log_error("fchmod() of \"%s\" failed: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }

    f = fdopen(fd, "w");
    if (f == NULL) {
        log_error("fdopen() failed: %s", strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }

    fputs(LLM_KEY_SNAPSHOT_HEADER "\n", f);
    fprintf(f, LLM_KEY_GENERATION "%llu\n", (unsigned long long) generation);

    rows = PQntuples(res);
    keys = 0;

    for (i = 0; i < rows; i++) {

        if (snapshot_entry(res, i, &e) != 0) {
            log_warning("key %s does not fit the snapshot format, left out",
                        PQgetvalue(res, i, 1));
            continue;
        }

        n = llm_key_format_line(&e, line, sizeof(line));

        if (n == 0) {
            log_warning("key %s does not fit the snapshot format, left out",
                        PQgetvalue(res, i, 1));
            continue;
        }

        fwrite(line, 1, n, f);
        keys++;
    }

    if (rows && !PQgetisnull(res, 0, 7)) {
        *next_expiry = strtoll(PQgetvalue(res, 0, 7), NULL, 10);

        if (*next_expiry < 0) {
            *next_expiry = 0;
        }
    }

    if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0) {
        log_error("could not write \"%s\": %s", tmp, strerror(errno));
        fclose(f);
        unlink(tmp);
        return -1;
    }

    if (fclose(f) != 0) {
        log_error("could not write \"%s\": %s", tmp, strerror(errno));
        unlink(tmp);
        return -1;
    }

    if (rename(tmp, path) == -1) {
        log_error("could not rename \"%s\" to \"%s\": %s", tmp, path,
                  strerror(errno));
        unlink(tmp);
        return -1;
    }

    snapshot_sync_dir(path);

    log_info("key snapshot \"%s\" written, %d keys", path, keys);

    return 0;
}


/*
 * The command line and start-up: one blocking query.  The daemon also
 * publishes the key set (publish, keyset_publish), the commands do not
 * (NULL).
 */

int
snapshot_blocking(PGconn *conn, const char *path,
    int (*publish)(PGresult *res, uint64_t generation))
{
    int        fd, rc;
    int64_t    next;
    uint64_t   generation;
    PGresult  *res;

    if (path == NULL || path[0] == '\0') {
        log_warning("\"key_snapshot\" is not set, no key snapshot written");
        return -1;
    }

    fd = snapshot_lock(path, 1);
    if (fd == -1) {
        return -1;
    }

    generation = snapshot_generation();

    res = PQexecParams(conn, SNAPSHOT_QUERY, 0, NULL, NULL, NULL, NULL, 0);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        log_error("key snapshot query failed: %s",
                  PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY)
                  ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY)
                  : PQerrorMessage(conn));
        PQclear(res);
        snapshot_unlock(fd);
        return -1;
    }

    rc = snapshot_write(path, res, generation, &next);

    if (publish != NULL) {
        (void) publish(res, generation);
    }

    PQclear(res);
    snapshot_unlock(fd);

    return rc;
}


/*
 * The generation of a key set: the wall-clock time, in milliseconds, at
 * which its query was sent.  A set whose query went later holds at least
 * what an earlier one held, so a worker takes a set only if its generation
 * is above that of its table, whether that came from the file or a set.
 */

uint64_t
snapshot_generation(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_REALTIME, &ts);

    return (uint64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


static int
snapshot_path(char *buf, size_t cap, const char *path, const char *suffix)
{
    int  n;

    n = snprintf(buf, cap, "%s%s", path, suffix);

    if (n < 0 || (size_t) n >= cap) {
        log_error("key_snapshot path \"%s\" is too long", path);
        return -1;
    }

    return 0;
}


/* one row of SNAPSHOT_QUERY; -1 if it does not fit the format */

int
snapshot_entry(PGresult *res, int row, llm_key_entry_t *e)
{
    char        *end;
    const char  *tier, *tenant, *models;

    memset(e, 0, sizeof(llm_key_entry_t));

    if (PQgetlength(res, row, 0) != 2 * LLM_KEY_HASH_LEN
        || snapshot_hex(PQgetvalue(res, row, 0), e->hash, LLM_KEY_HASH_LEN)
           != 0)
    {
        return -1;
    }

    errno = 0;

    e->key_id = strtoll(PQgetvalue(res, row, 1), &end, 10);
    if (errno || *end != '\0') {
        return -1;
    }

    e->tenant_id = strtoll(PQgetvalue(res, row, 2), &end, 10);
    if (errno || *end != '\0') {
        return -1;
    }

    e->expires = strtoll(PQgetvalue(res, row, 5), &end, 10);
    if (errno || *end != '\0') {
        return -1;
    }

    tier = PQgetvalue(res, row, 3);
    tenant = PQgetvalue(res, row, 4);
    models = PQgetvalue(res, row, 6);

    if (strlen(tier) >= LLM_KEY_TIER_MAX
        || strlen(tenant) >= LLM_KEY_TENANT_MAX
        || strlen(models) >= LLM_KEY_MODELS_MAX)
    {
        return -1;
    }

    strcpy(e->tier, tier);
    strcpy(e->tenant, tenant);
    strcpy(e->models, models);

    /* LLM_KEY_CAP_TENANT | LLM_KEY_CAP_KEY */
    e->caps = (uint8_t) (atoi(PQgetvalue(res, row, 8)) & 3);

    return 0;
}


static int
snapshot_hex(const char *s, uint8_t *out, size_t n)
{
    int     d[2], k;
    char    c;
    size_t  i;

    for (i = 0; i < n; i++) {
        for (k = 0; k < 2; k++) {
            c = s[2 * i + k];

            if (c >= '0' && c <= '9') {
                d[k] = c - '0';

            } else if (c >= 'a' && c <= 'f') {
                d[k] = c - 'a' + 10;

            } else {
                return -1;
            }
        }

        out[i] = (uint8_t) (d[0] << 4 | d[1]);
    }

    return 0;
}


/* the rename itself must survive a crash */

static void
snapshot_sync_dir(const char *path)
{
    int    fd;
    char  *copy;

    copy = strdup(path);
    if (copy == NULL) {
        return;
    }

    fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd != -1) {
        if (fsync(fd) == -1) {
            log_warning("fsync() of the directory of \"%s\" failed: %s",
                        path, strerror(errno));
        }

        close(fd);
    }

    free(copy);
}
