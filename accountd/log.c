
/*
 * Log lines: "2026-11-29 12:00:00.123 LOG message", one write(2) each, to
 * the logfile or to stderr.  ERROR, WARNING and LOG always go out; DEBUG,
 * NOISE and TRACE need verbose 1, 2 and 3.
 */


#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accountd.h"
#include "log.h"


#define LOG_LINE_MAX              4096


int  acd_verbose;

static int  log_fd = STDERR_FILENO;

static const char  *log_levels[] = {
    "FATAL", "ERROR", "WARNING", "LOG", "DEBUG", "NOISE", "TRACE"
};


static void log_vmsg(acd_log_level_e level, const char *fmt, va_list ap);


int
log_open(const char *path)
{
    int  fd;

    if (path == NULL || path[0] == '\0') {
        fd = STDERR_FILENO;

    } else {
        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
        if (fd == -1) {
            return -1;
        }
    }

    if (log_fd != STDERR_FILENO) {
        close(log_fd);
    }

    log_fd = fd;

    return 0;
}


void
log_close(void)
{
    if (log_fd != STDERR_FILENO) {
        close(log_fd);
        log_fd = STDERR_FILENO;
    }
}


void
log_msg(acd_log_level_e level, const char *fmt, ...)
{
    va_list  ap;

    if (level >= ACD_LOG_DEBUG
        && (int) level - ACD_LOG_DEBUG + 1 > acd_verbose)
    {
        return;
    }

    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}


void
log_fatal(const char *fmt, ...)
{
    va_list  ap;

    va_start(ap, fmt);
    log_vmsg(ACD_LOG_FATAL, fmt, ap);
    va_end(ap);

    exit(1);
}


/*
 * Copies src into dst with every byte that is not printable ASCII replaced
 * by '?': what clients and the database send must not forge log lines,
 * and text columns must not receive invalid UTF-8.
 */

size_t
log_clean(char *dst, size_t cap, const char *src, size_t len)
{
    size_t  i;

    if (cap == 0) {
        return 0;
    }

    if (len > cap - 1) {
        len = cap - 1;
    }

    for (i = 0; i < len; i++) {
        dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
    }

    dst[len] = '\0';

    return len;
}


static void
log_vmsg(acd_log_level_e level, const char *fmt, va_list ap)
{
    int              n, err;
    char             line[LOG_LINE_MAX];
    size_t           len;
    struct tm        tm;
    struct timespec  ts;

    err = errno;

    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);

    len = strftime(line, sizeof(line), "%Y-%m-%d %H:%M:%S", &tm);

    n = snprintf(line + len, sizeof(line) - len, ".%03ld %s ",
                 ts.tv_nsec / 1000000, log_levels[level]);
    len += n;

    n = vsnprintf(line + len, sizeof(line) - len - 1, fmt, ap);

    if (n < 0) {
        n = 0;
    }

    len += (size_t) n < sizeof(line) - len - 1 ? (size_t) n
                                               : sizeof(line) - len - 2;

    /* a message never spans lines */
    while (len && line[len - 1] == '\n') {
        len--;
    }

    line[len++] = '\n';

    if (write(log_fd, line, len) == -1) {
        /* nowhere left to complain */
    }

    errno = err;
}
