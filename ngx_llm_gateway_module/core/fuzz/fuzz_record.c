
/*
 * libFuzzer target for the record codec and the lease frames.  The input
 * is first the stream one side of the socket reads: frame after frame, each
 * decoded as its type byte says, until one is incomplete or malformed.  A
 * frame that decodes encodes to the same bytes (the encoding is
 * canonical; a settle record of version 2 to those of version 3, its two
 * fields added empty), every shorter prefix of it asks for more bytes,
 * and the other codec refuses it.  Then the same bytes fill a record and
 * a lease field by field: what encodes decodes to what it was, or is
 * refused if its type or api is one the decoder does not take.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm_record.h"


typedef struct {
    const uint8_t  *p;
    size_t          len;
} fuzz_src_t;


static void fuzz_stream(const uint8_t *data, size_t size);
static void fuzz_record_frame(const uint8_t *p, size_t n,
    const llm_record_t *rec);
static void fuzz_record_again(const uint8_t *p, size_t n,
    const llm_record_t *rec);
static void fuzz_lease_frame(const uint8_t *p, size_t n,
    const llm_lease_t *l);
static void fuzz_prefixes(const uint8_t *p, size_t n, int lease);
static void fuzz_record_fields(const uint8_t *data, size_t size);
static void fuzz_lease_fields(const uint8_t *data, size_t size);
static int fuzz_lease_same(const llm_lease_t *a, const llm_lease_t *b);
static uint64_t fuzz_take(fuzz_src_t *s, size_t n);
static void fuzz_take_str(fuzz_src_t *s, char *dst, size_t n);
static void fuzz_fail(const char *how, const char *what);


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_stream(data, size);
    fuzz_record_fields(data, size);
    fuzz_lease_fields(data, size);

    return 0;
}


static void
fuzz_stream(const uint8_t *data, size_t size)
{
    int             rrc, lrc;
    size_t          off, len, rused, lused;
    uint8_t         t;
    llm_lease_t     l;
    llm_record_t    rec;
    const uint8_t  *p;

    for (off = 0; off < size; /* void */ ) {
        p = data + off;
        len = size - off;

        rused = 0;
        lused = 0;

        rrc = llm_record_decode(p, len, &rec, &rused);
        lrc = llm_record_lease_decode(p, len, &l, &lused);

        if (rrc < -1 || rrc > 1 || lrc < -1 || lrc > 1) {
            fuzz_fail("stream", "a decoder returned something else");
        }

        if (len < 6) {
            if (rrc == 1 || lrc == 1) {
                fuzz_fail("stream", "a frame of fewer than 6 bytes");
            }

            return;
        }

        t = p[5];

        if (t == LLM_REC_SETTLE || t == LLM_REC_ACK) {
            if (lrc != -1) {
                fuzz_fail("stream", "the lease codec took a record");
            }

            if (rrc != 1) {
                return;
            }

            if (rused <= 4 || rused > len) {
                fuzz_fail("record", "consumed is out of range");
            }

            fuzz_record_frame(p, rused, &rec);
            off += rused;

        } else if (t >= LLM_REC_LEASE_REQ && t <= LLM_REC_LEASE_RETURN) {
            if (rrc != -1) {
                fuzz_fail("stream", "the record codec took a lease frame");
            }

            if (lrc != 1) {
                return;
            }

            if (lused <= 4 || lused > len) {
                fuzz_fail("lease", "consumed is out of range");
            }

            fuzz_lease_frame(p, lused, &l);
            off += lused;

        } else {
            if (rrc == 1 || lrc == 1) {
                fuzz_fail("stream", "a frame of a foreign type decoded");
            }

            return;
        }
    }
}


static void
fuzz_record_frame(const uint8_t *p, size_t n, const llm_record_t *rec)
{
    unsigned  upstream;

    if (n > LLM_RECORD_MAX_FRAME
        || rec->request_id_len > LLM_RECORD_ID_MAX
        || rec->model_len > LLM_RECORD_MODEL_MAX
        || rec->finish_reason_len > LLM_RECORD_FINISH_MAX
        || rec->backend_len > LLM_RECORD_BACKEND_MAX
        || rec->provider_key_len > LLM_RECORD_BACKEND_MAX
        || rec->response_id_len > LLM_RECORD_UPSTREAM_MAX
        || rec->upstream_model_len > LLM_RECORD_UPSTREAM_MAX
        || (rec->type != LLM_REC_SETTLE && rec->type != LLM_REC_ACK)
        || (rec->api > LLM_API_EMBEDDINGS)
        || (rec->up_api > LLM_API_EMBEDDINGS)
        || (rec->api == 0 && rec->type != LLM_REC_ACK))
    {
        fuzz_fail("record", "a field is out of range");
    }

    upstream = rec->provider_key_len || rec->response_id_len
               || rec->upstream_model_len;

    if (p[4] == LLM_FRAME_VERSION
        ? n > LLM_RECORD_V2_MAX_FRAME || rec->up_api || rec->backend_len
          || upstream
        : p[4] == 3
        ? n > LLM_RECORD_V3_MAX_FRAME || rec->type != LLM_REC_SETTLE
          || upstream
        : p[4] != LLM_RECORD_VERSION || rec->type != LLM_REC_SETTLE)
    {
        fuzz_fail("record", "a version and its fields do not agree");
    }

    fuzz_prefixes(p, n, 0);
    fuzz_record_again(p, n, rec);
}


/*
 * The frame encoded again, into exactly its size, so that an overflow
 * shows: the same bytes, or those of version 4 for one of an older
 * version (its bytes, then the empty fields it lacks)
 */

static void
fuzz_record_again(const uint8_t *p, size_t n, const llm_record_t *rec)
{
    size_t    m, extra, i;
    uint8_t  *out;

    /* up_api and the lengths of the fields of later versions */
    extra = (p[4] == LLM_FRAME_VERSION) ? 2 + 3 : (p[4] == 3) ? 3 : 0;

    if (extra && rec->type == LLM_REC_SETTLE) {
        m = n + extra;

        out = malloc(m);
        if (out == NULL) {
            abort();
        }

        if (llm_record_encode(rec, out, m) != m
            || out[0] != 0 || out[1] != 0
            || (size_t) ((out[2] << 8) | out[3]) != m - 4
            || out[4] != LLM_RECORD_VERSION
            || memcmp(out + 5, p + 5, n - 5) != 0)
        {
            fuzz_fail("record", "an older version is not version 4 without "
                      "its last fields");
        }

        for (i = n; i < m; i++) {
            if (out[i] != 0) {
                fuzz_fail("record", "an older version is not version 4 "
                          "without its last fields");
            }
        }

        free(out);
        return;
    }

    out = malloc(n);
    if (out == NULL) {
        abort();
    }

    if (llm_record_encode(rec, out, n - 1) != 0) {
        fuzz_fail("record", "encoded into less room than it needs");
    }

    if (llm_record_encode(rec, out, n) != n || memcmp(out, p, n) != 0) {
        fuzz_fail("record", "does not encode to the bytes it came from");
    }

    free(out);
}


static void
fuzz_lease_frame(const uint8_t *p, size_t n, const llm_lease_t *l)
{
    uint8_t  *out;

    if (n > LLM_LEASE_MAX_FRAME || l->model_len > LLM_RECORD_MODEL_MAX
        || l->type < LLM_REC_LEASE_REQ || l->type > LLM_REC_LEASE_RETURN)
    {
        fuzz_fail("lease", "a field is out of range");
    }

    fuzz_prefixes(p, n, 1);

    out = malloc(n);
    if (out == NULL) {
        abort();
    }

    if (llm_record_lease_encode(l, out, n - 1) != 0) {
        fuzz_fail("lease", "encoded into less room than it needs");
    }

    if (llm_record_lease_encode(l, out, n) != n || memcmp(out, p, n) != 0) {
        fuzz_fail("lease", "does not encode to the bytes it came from");
    }

    free(out);
}


/*
 * Each prefix of a frame is copied to the end of one allocation, so that a
 * read past its length is a read past the allocation.
 */

static void
fuzz_prefixes(const uint8_t *p, size_t n, int lease)
{
    int           rc;
    size_t        k, used;
    uint8_t      *buf;
    llm_lease_t   l;
    llm_record_t  rec;

    buf = malloc(n);
    if (buf == NULL) {
        abort();
    }

    for (k = 0; k < n; k++) {
        memcpy(buf + n - k, p, k);

        if (lease) {
            rc = llm_record_lease_decode(buf + n - k, k, &l, &used);

        } else {
            rc = llm_record_decode(buf + n - k, k, &rec, &used);
        }

        if (rc != 0) {
            fuzz_fail(lease ? "lease" : "record",
                      "a prefix of a frame is not asked to wait");
        }
    }

    free(buf);
}


/* the input as a record's fields; every length one past its limit too */

static void
fuzz_record_fields(const uint8_t *data, size_t size)
{
    int           rc, valid;
    size_t        n, used;
    uint8_t      *buf;
    fuzz_src_t    s;
    llm_record_t  rec, back;

    s.p = data;
    s.len = size;

    memset(&rec, 0, sizeof(llm_record_t));

    rec.type = (uint8_t) fuzz_take(&s, 1);
    rec.status = (uint16_t) fuzz_take(&s, 2);
    rec.flags = (uint32_t) fuzz_take(&s, 4);
    rec.tenant_id = (int64_t) fuzz_take(&s, 8);
    rec.key_id = (int64_t) fuzz_take(&s, 8);
    rec.input_tokens = fuzz_take(&s, 8);
    rec.output_tokens = fuzz_take(&s, 8);
    rec.cached_input_tokens = fuzz_take(&s, 8);
    rec.cache_write_tokens = fuzz_take(&s, 8);
    rec.reasoning_tokens = fuzz_take(&s, 8);
    rec.reserved_tokens = fuzz_take(&s, 8);
    rec.ts_ms = (int64_t) fuzz_take(&s, 8);
    rec.api = (uint8_t) fuzz_take(&s, 1);
    rec.request_id_len = fuzz_take(&s, 1) % (LLM_RECORD_ID_MAX + 2);
    rec.model_len = fuzz_take(&s, 1) % (LLM_RECORD_MODEL_MAX + 2);
    rec.finish_reason_len = fuzz_take(&s, 1) % (LLM_RECORD_FINISH_MAX + 2);
    rec.up_api = (uint8_t) fuzz_take(&s, 1);
    rec.backend_len = fuzz_take(&s, 1) % (LLM_RECORD_BACKEND_MAX + 2);
    rec.provider_key_len = fuzz_take(&s, 1) % (LLM_RECORD_BACKEND_MAX + 2);
    rec.response_id_len = fuzz_take(&s, 1) % (LLM_RECORD_UPSTREAM_MAX + 2);
    rec.upstream_model_len = fuzz_take(&s, 1)
                             % (LLM_RECORD_UPSTREAM_MAX + 2);
    fuzz_take_str(&s, rec.request_id, LLM_RECORD_ID_MAX);
    fuzz_take_str(&s, rec.model, LLM_RECORD_MODEL_MAX);
    fuzz_take_str(&s, rec.finish_reason, LLM_RECORD_FINISH_MAX);
    fuzz_take_str(&s, rec.backend, LLM_RECORD_BACKEND_MAX);
    fuzz_take_str(&s, rec.provider_key, LLM_RECORD_BACKEND_MAX);
    fuzz_take_str(&s, rec.response_id, LLM_RECORD_UPSTREAM_MAX);
    fuzz_take_str(&s, rec.upstream_model, LLM_RECORD_UPSTREAM_MAX);

    buf = malloc(LLM_RECORD_MAX_FRAME);
    if (buf == NULL) {
        abort();
    }

    n = llm_record_encode(&rec, buf, LLM_RECORD_MAX_FRAME);

    if (rec.request_id_len > LLM_RECORD_ID_MAX
        || rec.model_len > LLM_RECORD_MODEL_MAX
        || rec.finish_reason_len > LLM_RECORD_FINISH_MAX
        || rec.backend_len > LLM_RECORD_BACKEND_MAX
        || rec.provider_key_len > LLM_RECORD_BACKEND_MAX
        || rec.response_id_len > LLM_RECORD_UPSTREAM_MAX
        || rec.upstream_model_len > LLM_RECORD_UPSTREAM_MAX)
    {
        if (n != 0) {
            fuzz_fail("record fields", "a string too long was encoded");
        }

        goto done;
    }

    /* an acknowledgement is of version 2: none of the later fields */
    if (rec.type == LLM_REC_ACK) {
        rec.up_api = 0;
        rec.backend_len = 0;
        rec.provider_key_len = 0;
        rec.response_id_len = 0;
        rec.upstream_model_len = 0;
    }

    if (n != (size_t) 4 + LLM_RECORD_FIXED_LEN + 3 + rec.request_id_len
             + rec.model_len + rec.finish_reason_len
             + (rec.type == LLM_REC_ACK
                ? 0 : 2 + rec.backend_len + 3 + rec.provider_key_len
                      + rec.response_id_len + rec.upstream_model_len))
    {
        fuzz_fail("record fields", "the frame has the wrong length");
    }

    valid = (rec.type == LLM_REC_SETTLE || rec.type == LLM_REC_ACK)
            && ((rec.api >= LLM_API_OPENAI
                 && rec.api <= LLM_API_EMBEDDINGS)
                || (rec.type == LLM_REC_ACK && rec.api == 0))
            && rec.up_api <= LLM_API_EMBEDDINGS;

    rc = llm_record_decode(buf, n, &back, &used);

    if (!valid) {
        if (rc != -1) {
            fuzz_fail("record fields", "a type or api the decoder must "
                      "refuse was taken");
        }

        goto done;
    }

    if (rc != 1 || used != n || !llm_record_same(&rec, &back)) {
        fuzz_fail("record fields", "does not decode to what was encoded");
    }

done:

    free(buf);
}


static void
fuzz_lease_fields(const uint8_t *data, size_t size)
{
    int          rc;
    size_t       i, n, used;
    uint8_t     *buf;
    fuzz_src_t   s;
    llm_lease_t  l, back;

    /* from the end, so that the lease is not the record's bytes again */

    s.p = data;
    s.len = size;

    if (size > 1) {
        s.p = data + size / 2;
        s.len = size - size / 2;
    }

    memset(&l, 0, sizeof(llm_lease_t));

    l.type = LLM_REC_LEASE_REQ + fuzz_take(&s, 1) % 6;
    l.tenant_id = (int64_t) fuzz_take(&s, 8);
    l.key_id = (int64_t) fuzz_take(&s, 8);
    l.want = (int64_t) fuzz_take(&s, 8);
    l.granted = (int64_t) fuzz_take(&s, 8);
    l.remaining = (int64_t) fuzz_take(&s, 8);
    l.resets_at_ms = (int64_t) fuzz_take(&s, 8);
    l.until_ms = (int64_t) fuzz_take(&s, 8);

    for (i = 0; i < 4; i++) {
        l.prices[i] = (int64_t) fuzz_take(&s, 8);
    }

    l.model_len = fuzz_take(&s, 1) % (LLM_RECORD_MODEL_MAX + 2);
    fuzz_take_str(&s, l.model, LLM_RECORD_MODEL_MAX);

    buf = malloc(LLM_LEASE_MAX_FRAME);
    if (buf == NULL) {
        abort();
    }

    n = llm_record_lease_encode(&l, buf, LLM_LEASE_MAX_FRAME);

    /* LLM_REC_LEASE_RETURN + 1 is no lease frame */
    if (l.type > LLM_REC_LEASE_RETURN || l.model_len > LLM_RECORD_MODEL_MAX) {
        if (n != 0) {
            fuzz_fail("lease fields", "a bad type or model was encoded");
        }

        goto done;
    }

    rc = llm_record_lease_decode(buf, n, &back, &used);

    if (n == 0 || rc != 1 || used != n) {
        fuzz_fail("lease fields", "does not decode");
    }

    /* a request carries want, an answer what was granted */

    if (l.type == LLM_REC_LEASE || l.type == LLM_REC_SHARE) {
        l.want = 0;

    } else {
        l.granted = 0;
        l.remaining = 0;
        l.resets_at_ms = 0;
        memset(l.prices, 0, sizeof(l.prices));
    }

    if (!fuzz_lease_same(&l, &back)) {
        fuzz_fail("lease fields", "does not decode to what was encoded");
    }

done:

    free(buf);
}


static int
fuzz_lease_same(const llm_lease_t *a, const llm_lease_t *b)
{
    return a->type == b->type
           && a->tenant_id == b->tenant_id
           && a->key_id == b->key_id
           && a->want == b->want
           && a->granted == b->granted
           && a->remaining == b->remaining
           && a->resets_at_ms == b->resets_at_ms
           && a->until_ms == b->until_ms
           && memcmp(a->prices, b->prices, sizeof(a->prices)) == 0
           && a->model_len == b->model_len
           && memcmp(a->model, b->model, a->model_len) == 0;
}


/* n bytes, big-endian; zeros once the input runs out */

static uint64_t
fuzz_take(fuzz_src_t *s, size_t n)
{
    uint64_t  v;

    v = 0;

    while (n--) {
        v <<= 8;

        if (s->len) {
            v |= *s->p++;
            s->len--;
        }
    }

    return v;
}


static void
fuzz_take_str(fuzz_src_t *s, char *dst, size_t n)
{
    size_t  k;

    k = (s->len < n) ? s->len : n;

    if (k) {
        memcpy(dst, s->p, k);
    }

    memset(dst + k, 'x', n - k);

    s->p += k;
    s->len -= k;
}


static void
fuzz_fail(const char *how, const char *what)
{
    fprintf(stderr, "fuzz_record: %s: %s\n", how, what);
    __builtin_trap();
}
