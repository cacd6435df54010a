
/*
 * What every user of libpq here needs: a blocking connection (the commands
 * and the daemon's start-up), the server's messages made fit for one log
 * line, and text made fit for a text column.
 */


#include <stdio.h>
#include <string.h>

#include "accountd.h"
#include "log.h"
#include "pq.h"


/* blocking: for the command line and the snapshot at start-up */

PGconn *
pq_connect(const char *url, int timeout)
{
    char           t[16], error[PQ_ERROR_MAX];
    PGconn        *conn;
    const char    *keys[4], *values[4];

    snprintf(t, sizeof(t), "%d", timeout);

    /* the URL's own connect_timeout, if any, wins: it comes later */
    keys[0] = "connect_timeout";
    values[0] = t;
    keys[1] = "fallback_application_name";
    values[1] = "accountd";
    keys[2] = "dbname";
    values[2] = url;
    keys[3] = NULL;
    values[3] = NULL;

    conn = PQconnectdbParams(keys, values, 1);

    if (conn == NULL) {
        log_error("out of memory connecting to the database");
        return NULL;
    }

    if (PQstatus(conn) != CONNECTION_OK) {
        pq_error_text(error, sizeof(error), PQerrorMessage(conn));
        log_error("could not connect to the database: %s", error);
        PQfinish(conn);
        return NULL;
    }

    PQsetNoticeProcessor(conn, pq_notice, NULL);

    return conn;
}


/*
 * A text field as PostgreSQL takes it: UTF-8 as it came (a model may be
 * named in any script, and must match its price), a byte that is not
 * valid UTF-8, or a control character, as '?'.  A character that does not
 * fit whole is left out.
 */

void
pq_text(char *dst, size_t cap, const char *src, size_t len)
{
    size_t          i, n, k;
    unsigned char   c, lo, hi;

    i = 0;
    n = 0;

    while (i < len && n + 1 < cap) {
        c = (unsigned char) src[i];
        lo = 0x80;
        hi = 0xbf;

        if (c >= 0x20 && c < 0x7f) {
            k = 1;

        } else if (c >= 0xc2 && c <= 0xdf) {
            k = 2;

        } else if (c >= 0xe0 && c <= 0xef) {
            k = 3;
            lo = (c == 0xe0) ? 0xa0 : 0x80;     /* no overlong form */
            hi = (c == 0xed) ? 0x9f : 0xbf;     /* no surrogate */

        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 4;
            lo = (c == 0xf0) ? 0x90 : 0x80;
            hi = (c == 0xf4) ? 0x8f : 0xbf;     /* up to U+10FFFF */

        } else {
            k = 0;
        }

        if (k > 1
            && (i + k > len
                || (unsigned char) src[i + 1] < lo
                || (unsigned char) src[i + 1] > hi
                || (k > 2 && ((unsigned char) src[i + 2] & 0xc0) != 0x80)
                || (k > 3 && ((unsigned char) src[i + 3] & 0xc0) != 0x80)))
        {
            k = 0;
        }

        if (k == 0) {
            dst[n++] = '?';
            i++;
            continue;
        }

        if (n + k + 1 > cap) {
            break;
        }

        memcpy(dst + n, src + i, k);
        n += k;
        i += k;
    }

    dst[n] = '\0';
}


void
pq_notice(void *arg, const char *message)
{
    char  buf[PQ_ERROR_MAX];

    pq_error_text(buf, sizeof(buf), message);
    log_debug("database notice: %s", buf);
}


/* libpq's messages end in a newline and may span lines */

void
pq_error_text(char *buf, size_t cap, const char *msg)
{
    size_t  i, len;

    len = strlen(msg);

    if (len > cap - 1) {
        len = cap - 1;
    }

    for (i = 0; i < len; i++) {
        buf[i] = (msg[i] == '\n' || msg[i] == '\t') ? ' ' : msg[i];
    }

    while (i && buf[i - 1] == ' ') {
        i--;
    }

    buf[i] = '\0';

    log_clean(buf, cap, buf, i);
}
