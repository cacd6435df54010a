
/*
 * The key set pushed to the nginx workers: the rows of the key snapshot,
 * encoded once per rewrite as the frames of llm_key.h (BEGIN, one KEY a
 * key in ascending memcmp order of its hash, END) into one buffer that
 * every connection sends from.
 *
 * The newest set is held by keyset_last; a connection that is still
 * sending an older one holds a reference to it, and a set is freed when
 * the last reference goes: however slow a client, it keeps at most the
 * one set it is sending.
 *
 * Generations start from the wall clock in milliseconds and then only
 * grow, so that a worker sees them increase across a restart too.
 */


#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accountd.h"
#include "keyset.h"
#include "log.h"
#include "snapshot.h"


typedef struct {
    uint8_t    hash[LLM_KEY_HASH_LEN];
    int        row;
} keyset_row_t;


static int keyset_cmp(const void *a, const void *b);
static int keyset_append(acd_keyset_t *ks, size_t *cap, const uint8_t *p,
    size_t n);


static acd_keyset_t  *keyset_last;
static uint64_t       keyset_generation;


/*
 * Builds the set from the result of SNAPSHOT_QUERY and makes it the
 * newest; the caller tells the connections.  Rows that do not fit the
 * snapshot format are left out, as from the snapshot, whose writer has
 * logged them.
 */

int
keyset_publish(PGresult *res, uint64_t generation)
{
    int                rows, i;
    size_t             n, k, cap, keys, begin;
    uint8_t            frame[LLM_KEY_FRAME_MAX];
    acd_keyset_t      *ks;
    keyset_row_t      *idx;
    llm_key_entry_t    e;

    rows = PQntuples(res);

    idx = malloc((rows ? rows : 1) * sizeof(keyset_row_t));
    if (idx == NULL) {
        log_error("out of memory for a key set of %d keys", rows);
        return -1;
    }

    keys = 0;

    for (i = 0; i < rows; i++) {
        if (snapshot_entry(res, i, &e) != 0) {
            continue;
        }

        memcpy(idx[keys].hash, e.hash, LLM_KEY_HASH_LEN);
        idx[keys].row = i;
        keys++;
    }

    qsort(idx, keys, sizeof(keyset_row_t), keyset_cmp);

    ks = calloc(1, sizeof(acd_keyset_t));
    if (ks == NULL) {
        goto nomem;
    }

    /* most keys take about a hundred bytes */
    cap = 2 * 18 + keys * 128;

    ks->data = malloc(cap);
    if (ks->data == NULL) {
        goto nomem;
    }

    /* a clock that steps back must not make a newer set look older */
    ks->generation = generation > keyset_generation ? generation
                                                    : keyset_generation + 1;
    ks->refs = 1;

    /* BEGIN is written again once the count is known */
    begin = llm_key_encode_begin(ks->data, cap, LLM_REC_KEYS_BEGIN,
                                 ks->generation, 0);
    ks->len = begin;

    for (k = 0; k < keys; k++) {
        if (snapshot_entry(res, idx[k].row, &e) != 0) {
            continue;
        }

        n = llm_key_encode_entry(frame, sizeof(frame), &e);

        if (n == 0) {
            log_warning("key %lld does not fit the key set, left out",
                        (long long) e.key_id);
            continue;
        }

        if (keyset_append(ks, &cap, frame, n) != 0) {
            goto nomem;
        }

        ks->count++;
    }

    /*
     * Rows but no key: the rows, not the keys, are wrong (a schema the
     * daemon does not understand).  An empty set would lock every client
     * out; the workers keep the keys they have.
     */
    if (keys > 0 && ks->count == 0) {
        log_error("none of the %zu keys fits a key set, none published",
                  keys);
        free(idx);
        free(ks->data);
        free(ks);
        return -1;
    }

    n = llm_key_encode_begin(frame, sizeof(frame), LLM_REC_KEYS_END,
                             ks->generation, ks->count);

    if (keyset_append(ks, &cap, frame, n) != 0) {
        goto nomem;
    }

    llm_key_encode_begin(ks->data, begin, LLM_REC_KEYS_BEGIN,
                         ks->generation, ks->count);

    free(idx);

    keyset_generation = ks->generation;

    log_info("key set %llu built, %u keys",
             (unsigned long long) ks->generation, (unsigned) ks->count);

    keyset_unref(keyset_last);
    keyset_last = ks;

    return 0;

nomem:

    log_error("out of memory for a key set of %zu keys", keys);

    if (ks != NULL) {
        free(ks->data);
        free(ks);
    }

    free(idx);

    return -1;
}


/* the newest set, or NULL */

acd_keyset_t *
keyset_newest(void)
{
    return keyset_last;
}


void
keyset_ref(acd_keyset_t *ks)
{
    ks->refs++;
}


void
keyset_unref(acd_keyset_t *ks)
{
    if (ks == NULL) {
        return;
    }

    if (--ks->refs == 0) {
        log_noise("key set %llu freed", (unsigned long long) ks->generation);
        free(ks->data);
        free(ks);
    }
}


/* at exit: connections still open keep theirs */

void
keyset_done(void)
{
    keyset_unref(keyset_last);
    keyset_last = NULL;
}


static int
keyset_cmp(const void *a, const void *b)
{
    const keyset_row_t  *ra, *rb;

    ra = a;
    rb = b;

    return memcmp(ra->hash, rb->hash, LLM_KEY_HASH_LEN);
}


static int
keyset_append(acd_keyset_t *ks, size_t *cap, const uint8_t *p, size_t n)
{
    size_t    c;
    uint8_t  *data;

    if (*cap - ks->len < n) {
        c = *cap * 2 > ks->len + n ? *cap * 2 : ks->len + n;

        data = realloc(ks->data, c);
        if (data == NULL) {
            return -1;
        }

        ks->data = data;
        *cap = c;
    }

    memcpy(ks->data + ks->len, p, n);
    ks->len += n;

    return 0;
}
