
/*
 * Growable buffers and the appends that responses are built from.
 */


#include <stdlib.h>

#include "mockllm.h"
#include "mockllm_buf.h"


#define MOCKLLM_BUF_MIN   4096
#define MOCKLLM_BUF_KEEP  (256 * 1024)


void
mockllm_buf_reserve(mockllm_buf_t *b, size_t n)
{
    char    *p;
    size_t   cap;

    if (b->oom || b->cap - b->len >= n) {
        return;
    }

    cap = b->cap ? b->cap : MOCKLLM_BUF_MIN;

    while (cap - b->len < n) {
        if (cap > SIZE_MAX / 2) {
            b->oom = 1;
            return;
        }

        cap *= 2;
    }

    p = realloc(b->data, cap);
    if (p == NULL) {
        b->oom = 1;
        return;
    }

    b->data = p;
    b->cap = cap;
}


void
mockllm_buf_add(mockllm_buf_t *b, const void *p, size_t n)
{
    mockllm_buf_reserve(b, n);

    if (b->oom || n == 0) {
        return;
    }

    memcpy(b->data + b->len, p, n);
    b->len += n;
}


void
mockllm_buf_add_num(mockllm_buf_t *b, uint64_t v)
{
    char   tmp[20], *p;

    p = tmp + sizeof(tmp);

    do {
        *--p = (char) ('0' + v % 10);
        v /= 10;
    } while (v);

    mockllm_buf_add(b, p, tmp + sizeof(tmp) - p);
}


void
mockllm_buf_add_json(mockllm_buf_t *b, const char *s, size_t n)
{
    char           *d;
    size_t          i;
    unsigned char   ch;

    static const char  hex[] = "0123456789abcdef";

    /* the worst case, \u00XX, is six bytes for one */
    mockllm_buf_reserve(b, n * 6);

    if (b->oom) {
        return;
    }

    d = b->data + b->len;

    for (i = 0; i < n; i++) {
        ch = (unsigned char) s[i];

        switch (ch) {

        case '"':
        case '\\':
            *d++ = '\\';
            *d++ = (char) ch;
            break;

        case '\n':
            *d++ = '\\';
            *d++ = 'n';
            break;

        case '\r':
            *d++ = '\\';
            *d++ = 'r';
            break;

        case '\t':
            *d++ = '\\';
            *d++ = 't';
            break;

        default:
            if (ch < 0x20 || ch == 0x7f) {
                *d++ = '\\';
                *d++ = 'u';
                *d++ = '0';
                *d++ = '0';
                *d++ = hex[ch >> 4];
                *d++ = hex[ch & 0xf];

            } else {
                *d++ = (char) ch;
            }
        }
    }

    b->len = d - b->data;
}


/*
 * A connection that once took an 8 MiB body should not keep 8 MiB while
 * it sits idle; the bytes that are still in the buffer are kept.
 */

void
mockllm_buf_shrink(mockllm_buf_t *b)
{
    char    *p;
    size_t   cap;

    if (b->cap <= MOCKLLM_BUF_KEEP || b->len > MOCKLLM_BUF_KEEP / 2) {
        return;
    }

    cap = MOCKLLM_BUF_KEEP;

    p = realloc(b->data, cap);
    if (p == NULL) {
        return;
    }

    b->data = p;
    b->cap = cap;
}


void
mockllm_buf_free(mockllm_buf_t *b)
{
    free(b->data);

    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->oom = 0;
}
