
/*
 * libFuzzer target for the key snapshot lines and the key-set frames.  The
 * input is read twice: as snapshot text, line by line, and as the frames
 * accountd pushes, frame after frame.  A line that parses formats back to
 * itself, unless it is of version 2 (seven fields: its caps are unknown
 * and it is never written), and its entry goes through a KEY frame
 * unchanged.  A frame that decodes encodes to the same bytes (a KEY frame
 * without its caps byte, from an older accountd, gains one), every
 * shorter prefix of it asks for more bytes, and a KEY frame's entry goes
 * through a snapshot line unchanged.  Then the input is read as a secret
 * file and as a client's key.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm_key.h"
#include "llm_record.h"


static void fuzz_lines(const uint8_t *data, size_t size);
static void fuzz_line(const char *line, size_t len);
static void fuzz_frames(const uint8_t *data, size_t size);
static void fuzz_begin_frame(const uint8_t *p, size_t n, int type,
    uint64_t generation, uint32_t count);
static void fuzz_key_frame(const uint8_t *p, size_t n,
    const llm_key_entry_t *e);
static void fuzz_prefixes(const uint8_t *p, size_t n, int key);
static void fuzz_entry(const llm_key_entry_t *e, const char *how);
static void fuzz_through_frame(const llm_key_entry_t *e);
static void fuzz_through_line(const llm_key_entry_t *e);
static int fuzz_same(const llm_key_entry_t *a, const llm_key_entry_t *b);
static void fuzz_secret(const uint8_t *data, size_t size);
static void fuzz_fail(const char *how, const char *what);


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_lines(data, size);
    fuzz_frames(data, size);
    fuzz_secret(data, size);

    return 0;
}


static void
fuzz_lines(const uint8_t *data, size_t size)
{
    const uint8_t  *p, *nl, *last;

    last = data + size;

    for (p = data; p < last; p = nl + 1) {
        nl = memchr(p, '\n', (size_t) (last - p));

        if (nl == NULL) {
            nl = last;
        }

        fuzz_line((const char *) p, (size_t) (nl - p));
    }
}


static void
fuzz_line(const char *line, size_t len)
{
    int               rc;
    char             *copy, *out;
    size_t            i, spaces;
    llm_key_entry_t   e;

    /* a copy of exactly its length, so that a read past it shows */

    copy = malloc(len + 1);
    out = malloc(len + 1);
    if (copy == NULL || out == NULL) {
        abort();
    }

    memcpy(copy, line, len);

    rc = llm_key_parse_line(copy, len, &e);

    if (rc == 0) {
        if (len != 0 && copy[0] != '#'
            && !(len == sizeof(LLM_KEY_SNAPSHOT_HEADER) - 1
                 && memcmp(copy, LLM_KEY_SNAPSHOT_HEADER, len) == 0)
            && !(len == sizeof(LLM_KEY_SNAPSHOT_HEADER_2) - 1
                 && memcmp(copy, LLM_KEY_SNAPSHOT_HEADER_2, len) == 0))
        {
            fuzz_fail("line", "skipped a line that is not a comment");
        }

        goto done;
    }

    if (rc != 1) {
        if (rc != -1) {
            fuzz_fail("line", "returned something else");
        }

        goto done;
    }

    fuzz_entry(&e, "line");

    for (spaces = 0, i = 0; i < len; i++) {
        spaces += (copy[i] == ' ');
    }

    if (e.caps == LLM_KEY_CAP_UNKNOWN) {
        if (spaces != 6) {
            fuzz_fail("line", "caps unknown on a line of eight fields");
        }

        if (llm_key_format_line(&e, out, len + 1) != 0) {
            fuzz_fail("line", "a line without caps was formatted");
        }

    } else {
        if (spaces != 7) {
            fuzz_fail("line", "caps known on a line of seven fields");
        }

        /* one spelling of a key: parse and format are each other's inverse */

        if (llm_key_format_line(&e, out, len) != 0) {
            fuzz_fail("line", "formatted into less room than it needs");
        }

        if (llm_key_format_line(&e, out, len + 1) != len + 1
            || memcmp(out, copy, len) != 0 || out[len] != '\n')
        {
            fuzz_fail("line", "does not format to the line it came from");
        }
    }

    fuzz_through_frame(&e);

done:

    free(out);
    free(copy);
}


static void
fuzz_frames(const uint8_t *data, size_t size)
{
    int               rc, type;
    size_t            off, len, used;
    uint32_t          count;
    uint64_t          generation;
    const uint8_t    *p;
    llm_key_entry_t   e;

    for (off = 0; off < size; off += used) {
        p = data + off;
        len = size - off;
        used = 0;

        switch (llm_key_frame_type(p, len)) {

        case -1:
            if (len >= 6) {
                fuzz_fail("frames", "no type in 6 bytes");
            }

            return;

        case LLM_REC_KEYS_BEGIN:
        case LLM_REC_KEYS_END:
            rc = llm_key_decode_begin(p, len, &type, &generation, &count,
                                      &used);
            if (rc != 1) {
                return;
            }

            if (used <= 4 || used > len) {
                fuzz_fail("begin", "consumed is out of range");
            }

            fuzz_begin_frame(p, used, type, generation, count);
            break;

        case LLM_REC_KEY:
            rc = llm_key_decode_entry(p, len, &e, &used);
            if (rc != 1) {
                return;
            }

            if (used <= 4 || used > len) {
                fuzz_fail("key", "consumed is out of range");
            }

            fuzz_key_frame(p, used, &e);
            break;

        default:
            if (llm_key_decode_begin(p, len, &type, &generation, &count,
                                     &used) == 1
                || llm_key_decode_entry(p, len, &e, &used) == 1)
            {
                fuzz_fail("frames", "a frame of a foreign type decoded");
            }

            return;
        }
    }
}


static void
fuzz_begin_frame(const uint8_t *p, size_t n, int type, uint64_t generation,
    uint32_t count)
{
    uint8_t  *out;

    if (type != p[5]) {
        fuzz_fail("begin", "not the frame's type");
    }

    fuzz_prefixes(p, n, 0);

    out = malloc(n);
    if (out == NULL) {
        abort();
    }

    if (llm_key_encode_begin(out, n - 1, type, generation, count) != 0) {
        fuzz_fail("begin", "encoded into less room than it needs");
    }

    if (llm_key_encode_begin(out, n, type, generation, count) != n
        || memcmp(out, p, n) != 0)
    {
        fuzz_fail("begin", "does not encode to the bytes it came from");
    }

    free(out);
}


static void
fuzz_key_frame(const uint8_t *p, size_t n, const llm_key_entry_t *e)
{
    size_t            m, used;
    uint8_t          *out;
    llm_key_entry_t   back;

    fuzz_entry(e, "key");
    fuzz_prefixes(p, n, 1);

    out = malloc(n + 1);
    if (out == NULL) {
        abort();
    }

    m = llm_key_encode_entry(out, n + 1, e);

    if (m == n) {
        if (memcmp(out, p, n) != 0) {
            fuzz_fail("key", "does not encode to the bytes it came from");
        }

    } else if (m == n + 1) {
        /* no caps byte: the length grows by one, and the byte says so */

        if (e->caps != LLM_KEY_CAP_UNKNOWN
            || out[n] != LLM_KEY_CAP_UNKNOWN
            || memcmp(out + 4, p + 4, n - 4) != 0
            || ((uint32_t) out[0] << 24 | (uint32_t) out[1] << 16
                | (uint32_t) out[2] << 8 | out[3])
               != ((uint32_t) p[0] << 24 | (uint32_t) p[1] << 16
                   | (uint32_t) p[2] << 8 | p[3]) + 1)
        {
            fuzz_fail("key", "does not encode to the bytes it came from "
                      "and its caps");
        }

        if (llm_key_decode_entry(out, m, &back, &used) != 1 || used != m
            || !fuzz_same(e, &back))
        {
            fuzz_fail("key", "with its caps it decodes to another entry");
        }

    } else {
        fuzz_fail("key", "encodes to a frame of another length");
    }

    free(out);

    if (!(e->caps & LLM_KEY_CAP_UNKNOWN)) {
        fuzz_through_line(e);
    }
}


/*
 * Each prefix of a frame is copied to the end of one allocation, so that a
 * read past its length is a read past the allocation.
 */

static void
fuzz_prefixes(const uint8_t *p, size_t n, int key)
{
    int               rc, type;
    size_t            k, used;
    uint8_t          *buf;
    uint32_t          count;
    uint64_t          generation;
    llm_key_entry_t   e;

    buf = malloc(n);
    if (buf == NULL) {
        abort();
    }

    for (k = 0; k < n; k++) {
        memcpy(buf + n - k, p, k);

        if (key) {
            rc = llm_key_decode_entry(buf + n - k, k, &e, &used);

        } else {
            rc = llm_key_decode_begin(buf + n - k, k, &type, &generation,
                                      &count, &used);
        }

        if (rc != 0) {
            fuzz_fail(key ? "key" : "begin",
                      "a prefix of a frame is not asked to wait");
        }
    }

    free(buf);
}


/* what a worker puts in its table must be what the format allows */

static void
fuzz_entry(const llm_key_entry_t *e, const char *how)
{
    size_t       len;
    const char  *p, *end;

    if (e->key_id <= 0 || e->tenant_id <= 0 || e->expires < 0) {
        fuzz_fail(how, "an id or the expiry is out of range");
    }

    if (!llm_key_name_valid(e->tier, strnlen(e->tier, LLM_KEY_TIER_MAX),
                            LLM_KEY_TIER_MAX)
        || !llm_key_name_valid(e->tenant,
                               strnlen(e->tenant, LLM_KEY_TENANT_MAX),
                               LLM_KEY_TENANT_MAX))
    {
        fuzz_fail(how, "a name is not valid");
    }

    len = strnlen(e->models, LLM_KEY_MODELS_MAX);

    if (len == LLM_KEY_MODELS_MAX || !llm_key_models_valid(e->models, len)) {
        fuzz_fail(how, "the models are not valid");
    }

    if (e->caps & ~(LLM_KEY_CAP_TENANT | LLM_KEY_CAP_KEY | LLM_KEY_CAP_UNKNOWN))
    {
        fuzz_fail(how, "the caps are not valid");
    }

    /* every model listed is allowed, and no empty name */

    if (llm_key_model_allowed(e->models, "", 0)
        != (e->models[0] == '*' && e->models[1] == '\0'))
    {
        fuzz_fail(how, "an empty model name");
    }

    if (e->models[0] == '*' && e->models[1] == '\0') {
        return;
    }

    for (p = e->models; /* void */ ; p = end + 1) {
        end = strchr(p, ',');

        if (end == NULL) {
            end = p + strlen(p);
        }

        if (!llm_key_model_allowed(e->models, p, (size_t) (end - p))) {
            fuzz_fail(how, "a model listed is not allowed");
        }

        /* a name and a longer one that starts with it are not the same */
        if (llm_key_model_allowed(e->models, p, (size_t) (end - p) - 1)
            && memchr(e->models, ',', len) == NULL)
        {
            fuzz_fail(how, "a model's prefix is allowed");
        }

        if (*end == '\0') {
            break;
        }
    }
}


static void
fuzz_through_frame(const llm_key_entry_t *e)
{
    size_t            n, used;
    uint8_t          *buf;
    llm_key_entry_t   back;

    buf = malloc(LLM_KEY_FRAME_MAX);
    if (buf == NULL) {
        abort();
    }

    n = llm_key_encode_entry(buf, LLM_KEY_FRAME_MAX, e);

    if (n == 0 || llm_key_decode_entry(buf, n, &back, &used) != 1
        || used != n || !fuzz_same(e, &back))
    {
        fuzz_fail("line", "does not go through a KEY frame unchanged");
    }

    free(buf);
}


static void
fuzz_through_line(const llm_key_entry_t *e)
{
    char             *buf;
    size_t            n;
    llm_key_entry_t   back;

    buf = malloc(LLM_KEY_LINE_MAX + 1);
    if (buf == NULL) {
        abort();
    }

    n = llm_key_format_line(e, buf, LLM_KEY_LINE_MAX + 1);

    if (n == 0 || buf[n - 1] != '\n'
        || llm_key_parse_line(buf, n - 1, &back) != 1
        || !fuzz_same(e, &back))
    {
        fuzz_fail("key", "does not go through a snapshot line unchanged");
    }

    free(buf);
}


static int
fuzz_same(const llm_key_entry_t *a, const llm_key_entry_t *b)
{
    return memcmp(a->hash, b->hash, LLM_KEY_HASH_LEN) == 0
           && a->key_id == b->key_id
           && a->tenant_id == b->tenant_id
           && a->expires == b->expires
           && strcmp(a->tier, b->tier) == 0
           && strcmp(a->tenant, b->tenant) == 0
           && strcmp(a->models, b->models) == 0
           && a->caps == b->caps;
}


static void
fuzz_secret(const uint8_t *data, size_t size)
{
    int       n;
    uint8_t  *out;

    out = malloc(LLM_KEY_SECRET_MIN * 2);
    if (out == NULL) {
        abort();
    }

    n = llm_key_secret_decode((const char *) data, size, out,
                              LLM_KEY_SECRET_MIN * 2);

    if (n != -1 && (n < LLM_KEY_SECRET_MIN || n > LLM_KEY_SECRET_MIN * 2)) {
        fuzz_fail("secret", "a secret of the wrong length");
    }

    free(out);

    if (llm_key_well_formed((const char *) data, size)
        && (size != LLM_KEY_LEN
            || (memcmp(data, LLM_KEY_PREFIX_LIVE, LLM_KEY_PREFIX_LEN) != 0
                && memcmp(data, LLM_KEY_PREFIX_TEST, LLM_KEY_PREFIX_LEN)
                   != 0)))
    {
        fuzz_fail("key", "a key of the wrong shape is well formed");
    }
}


static void
fuzz_fail(const char *how, const char *what)
{
    fprintf(stderr, "fuzz_key: %s: %s\n", how, what);
    __builtin_trap();
}
