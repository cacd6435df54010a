
/* mockllm's messages: one line each, to stderr */


#include <stdarg.h>
#include <stdio.h>

#include "mockllm.h"
#include "mockllm_log.h"


void
mockllm_log(const char *fmt, ...)
{
    char     buf[512];
    va_list  args;

    va_start(args, fmt);
    vsnprintf(buf, sizeof(buf), fmt, args);
    va_end(args);

    fprintf(stderr, "mockllm: %s\n", buf);
}
