
/*
 * A minimal TAP producer for the C unit tests: prove runs the test
 * binaries directly.  Header-only; every test file includes it once.
 */

#ifndef _LLM_TAP_H_INCLUDED_
#define _LLM_TAP_H_INCLUDED_


#include <stdarg.h>
#include <stdio.h>
#include <string.h>


static int  tap_run;
static int  tap_failed;


static int
tap_ok(int cond, const char *fmt, ...)
{
    va_list  ap;

    tap_run++;

    if (!cond) {
        tap_failed++;
        printf("not ");
    }

    printf("ok %d - ", tap_run);

    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);

    printf("\n");

    return cond;
}


#define tap_is(got, want, ...)                                                \
    do {                                                                      \
        long long  tap_g_ = (long long) (got);                                \
        long long  tap_w_ = (long long) (want);                               \
                                                                              \
        if (!tap_ok(tap_g_ == tap_w_, __VA_ARGS__)) {                         \
            printf("#   got: %lld\n#   expected: %lld\n", tap_g_, tap_w_);    \
        }                                                                     \
    } while (0)


#define tap_is_str(got, want, ...)                                            \
    do {                                                                      \
        const char  *tap_g_ = (got);                                          \
        const char  *tap_w_ = (want);                                         \
                                                                              \
        if (!tap_ok(strcmp(tap_g_, tap_w_) == 0, __VA_ARGS__)) {              \
            printf("#   got: '%s'\n#   expected: '%s'\n", tap_g_, tap_w_);    \
        }                                                                     \
    } while (0)


static int
tap_done(void)
{
    printf("1..%d\n", tap_run);

    return tap_failed ? 1 : 0;
}


#endif /* _LLM_TAP_H_INCLUDED_ */
