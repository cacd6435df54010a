
/*
 * accountd's log.c: log lines, gated by verbosity.
 */

#ifndef _ACCOUNTD_LOG_H_INCLUDED_
#define _ACCOUNTD_LOG_H_INCLUDED_


#include "accountd.h"


typedef enum {
    ACD_LOG_FATAL = 0,
    ACD_LOG_ERROR,
    ACD_LOG_WARNING,
    ACD_LOG_INFO,
    ACD_LOG_DEBUG,
    ACD_LOG_NOISE,
    ACD_LOG_TRACE
} acd_log_level_e;

extern int  acd_verbose;

int log_open(const char *path);
void log_close(void);
void log_msg(acd_log_level_e level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void log_fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));
size_t log_clean(char *dst, size_t cap, const char *src, size_t len);

#define log_error(...)    log_msg(ACD_LOG_ERROR, __VA_ARGS__)
#define log_warning(...)  log_msg(ACD_LOG_WARNING, __VA_ARGS__)
#define log_info(...)     log_msg(ACD_LOG_INFO, __VA_ARGS__)

/* the argument list is not even evaluated below the verbosity */
#define log_debug(...)                                                        \
    do {                                                                      \
        if (acd_verbose >= 1) log_msg(ACD_LOG_DEBUG, __VA_ARGS__);            \
    } while (0)
#define log_noise(...)                                                        \
    do {                                                                      \
        if (acd_verbose >= 2) log_msg(ACD_LOG_NOISE, __VA_ARGS__);            \
    } while (0)
#define log_trace(...)                                                        \
    do {                                                                      \
        if (acd_verbose >= 3) log_msg(ACD_LOG_TRACE, __VA_ARGS__);            \
    } while (0)


#endif /* _ACCOUNTD_LOG_H_INCLUDED_ */
