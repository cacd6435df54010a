
/*
 * What the translators share: figures written without printf, and
 * cJSON's printer without its floating point for whole numbers.  Each
 * translated request and event writes several; glibc's printf and sscanf
 * are a large part of what a translation costs, and more when it runs
 * with the caches cold, between two paced events.
 */

#include <math.h>
#include <string.h>
#include <cJSON.h>
#include "llm_tx.h"


/* cJSON writes "%1.15g": from 10^15 on, a whole number has an exponent */
#define LLM_TX_EXACT  999999999999999.0


static size_t llm_tx_print_mark(cJSON *item, int siblings, char *digits,
    size_t at);
static void llm_tx_print_unmark(cJSON *item, int siblings,
    const char *digits, size_t size);


size_t
llm_tx_int(char *buf, int64_t n)
{
    char      tmp[LLM_TX_INT_LEN];
    size_t    len, i;
    uint64_t  u;

    u = n < 0 ? (uint64_t) 0 - (uint64_t) n : (uint64_t) n;
    i = sizeof(tmp);

    do {
        tmp[--i] = (char) ('0' + u % 10);
        u /= 10;
    } while (u);

    if (n < 0) {
        tmp[--i] = '-';
    }

    len = sizeof(tmp) - i;
    memcpy(buf, tmp + i, len);

    return len;
}


/*
 * Each whole number becomes, for the time of the print, a raw item that
 * holds its digits by reference (cJSON_IsReference: cJSON does not free
 * them), in one buffer; a raw item of the caller's own is left as it is.
 */

char *
llm_tx_print(const cJSON *tree)
{
    char    *s, *digits;
    cJSON   *root;
    size_t   n;

    /* changed for the time of the print, as it was on return */
    root = (cJSON *) tree;

    n = llm_tx_print_mark(root, 0, NULL, 0);

    if (n == 0) {
        return cJSON_PrintUnformatted(root);
    }

    digits = cJSON_malloc(n);
    if (digits == NULL) {
        return NULL;
    }

    (void) llm_tx_print_mark(root, 0, digits, 0);

    s = cJSON_PrintUnformatted(root);

    llm_tx_print_unmark(root, 0, digits, n);
    cJSON_free(digits);

    return s;
}


/*
 * item, and its siblings after it if asked (not the root's: the printed
 * item may be a member of a larger tree).  With digits NULL, the bytes
 * the digits take: each figure and its NUL.  A number that is a
 * reference is left as it is.
 */

static size_t
llm_tx_print_mark(cJSON *item, int siblings, char *digits, size_t at)
{
    double  d;
    size_t  len;

    for ( /* void */ ; item; item = siblings ? item->next : NULL) {
        if (item->child) {
            at = llm_tx_print_mark(item->child, 1, digits, at);
            continue;
        }

        /* the flags above the type's byte (a constant name) stay */
        if ((item->type & 0xff) != cJSON_Number
            || (item->type & cJSON_IsReference))
        {
            continue;
        }

        d = item->valuedouble;

        if (!(d >= -LLM_TX_EXACT && d <= LLM_TX_EXACT) || d != floor(d)
            || (d == 0 && signbit(d)))
        {
            continue;
        }

        if (digits == NULL) {
            at += LLM_TX_INT_LEN + 1;
            continue;
        }

        len = llm_tx_int(digits + at, (int64_t) d);
        digits[at + len] = '\0';

        item->type = (item->type & ~0xff) | cJSON_Raw | cJSON_IsReference;
        item->valuestring = digits + at;

        at += len + 1;
    }

    return at;
}


static void
llm_tx_print_unmark(cJSON *item, int siblings, const char *digits,
    size_t size)
{
    for ( /* void */ ; item; item = siblings ? item->next : NULL) {
        if (item->child) {
            llm_tx_print_unmark(item->child, 1, digits, size);
            continue;
        }

        if ((item->type & 0xff) == cJSON_Raw
            && (item->type & cJSON_IsReference)
            && item->valuestring >= digits
            && item->valuestring < digits + size)
        {
            item->type = (item->type & ~(0xff | cJSON_IsReference))
                         | cJSON_Number;
            item->valuestring = NULL;
        }
    }
}
