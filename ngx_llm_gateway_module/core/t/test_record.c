
/*
 * The settle record codec: round trips, truncation, corruption, and
 * frames back to back.
 */


#include <stdint.h>
#include <string.h>

#include "llm_record.h"
#include "tap.h"


static void test_sample(llm_record_t *rec);
static int test_same(const llm_record_t *a, const llm_record_t *b);
static int test_sane(const llm_record_t *rec);
static uint32_t test_rand(void);
static void test_round_trip(void);
static void test_truncation(void);
static void test_corruption(void);
static void test_random(void);
static void test_back_to_back(void);
static void test_rejects(void);
static void test_set(void);


static uint32_t  test_seed = 2463534242u;


int
main(void)
{
    test_round_trip();
    test_truncation();
    test_corruption();
    test_random();
    test_back_to_back();
    test_rejects();
    test_set();

    return tap_done();
}


static void
test_sample(llm_record_t *rec)
{
    memset(rec, 0, sizeof(llm_record_t));

    rec->type = LLM_REC_SETTLE;
    rec->status = 200;
    rec->flags = LLM_REC_F_PARTIAL | LLM_REC_F_CLAMPED;
    rec->tenant_id = 42;
    rec->key_id = 7;
    rec->input_tokens = 2000;
    rec->output_tokens = 1500;
    rec->cached_input_tokens = 128;
    rec->reserved_tokens = 8000;
    rec->ts_ms = 1795954800123LL;
    rec->api = LLM_API_ANTHROPIC;

    llm_record_set_request_id(rec, "req-0001", 8);
    llm_record_set_model(rec, "claude-sonnet-4", 15);
    llm_record_set_finish_reason(rec, "stop", 4);
}


static int
test_same(const llm_record_t *a, const llm_record_t *b)
{
    return a->type == b->type
           && a->status == b->status
           && a->flags == b->flags
           && a->tenant_id == b->tenant_id
           && a->key_id == b->key_id
           && a->input_tokens == b->input_tokens
           && a->output_tokens == b->output_tokens
           && a->cached_input_tokens == b->cached_input_tokens
           && a->reserved_tokens == b->reserved_tokens
           && a->ts_ms == b->ts_ms
           && a->api == b->api
           && a->request_id_len == b->request_id_len
           && a->model_len == b->model_len
           && a->finish_reason_len == b->finish_reason_len
           && memcmp(a->request_id, b->request_id, a->request_id_len) == 0
           && memcmp(a->model, b->model, a->model_len) == 0
           && memcmp(a->finish_reason, b->finish_reason,
                     a->finish_reason_len) == 0;
}


static int
test_sane(const llm_record_t *rec)
{
    return rec->request_id_len <= LLM_RECORD_ID_MAX
           && rec->model_len <= LLM_RECORD_MODEL_MAX
           && rec->finish_reason_len <= LLM_RECORD_FINISH_MAX
           && (rec->type == LLM_REC_SETTLE || rec->type == LLM_REC_ACK);
}


/* xorshift32: deterministic, so that a failure can be replayed */

static uint32_t
test_rand(void)
{
    test_seed ^= test_seed << 13;
    test_seed ^= test_seed >> 17;
    test_seed ^= test_seed << 5;

    return test_seed;
}


static void
test_round_trip(void)
{
    int           rc;
    size_t        n, used;
    uint8_t       buf[LLM_RECORD_MAX_FRAME];
    llm_record_t  rec, out;

    test_sample(&rec);

    n = llm_record_encode(&rec, buf, sizeof(buf));
    tap_is(n, 4 + LLM_RECORD_FIXED_LEN + 3 + 8 + 15 + 4,
           "encode returns the frame length");

    used = 0;
    rc = llm_record_decode(buf, n, &out, &used);
    tap_is(rc, 1, "decode of a whole frame returns 1");
    tap_is(used, n, "decode consumes the whole frame");
    tap_ok(test_same(&rec, &out), "round trip keeps every field");

    /* extreme values: all fields at their widest */

    memset(&rec, 0, sizeof(llm_record_t));
    rec.type = LLM_REC_SETTLE;
    rec.status = UINT16_MAX;
    rec.flags = UINT32_MAX;
    rec.tenant_id = INT64_MAX;
    rec.key_id = INT64_MIN;
    rec.input_tokens = UINT64_MAX;
    rec.output_tokens = UINT64_MAX - 1;
    rec.cached_input_tokens = 1;
    rec.reserved_tokens = 0x0102030405060708ULL;
    rec.ts_ms = -1;
    rec.api = LLM_API_OPENAI;
    memset(rec.request_id, 'r', LLM_RECORD_ID_MAX);
    rec.request_id_len = LLM_RECORD_ID_MAX;
    memset(rec.model, 'm', LLM_RECORD_MODEL_MAX);
    rec.model_len = LLM_RECORD_MODEL_MAX;
    memset(rec.finish_reason, 'f', LLM_RECORD_FINISH_MAX);
    rec.finish_reason_len = LLM_RECORD_FINISH_MAX;

    n = llm_record_encode(&rec, buf, sizeof(buf));
    tap_is(n, LLM_RECORD_MAX_FRAME, "the largest record fills MAX_FRAME");

    rc = llm_record_decode(buf, n, &out, &used);
    tap_ok(rc == 1 && test_same(&rec, &out),
           "round trip of extreme values");

    tap_is(llm_record_encode(&rec, buf, n - 1), 0,
           "encode into a buffer one byte short returns 0");

    /* empty strings */

    memset(&rec, 0, sizeof(llm_record_t));
    rec.type = LLM_REC_ACK;

    n = llm_record_encode(&rec, buf, sizeof(buf));
    tap_is(n, 4 + LLM_RECORD_FIXED_LEN + 3, "the smallest frame");

    rc = llm_record_decode(buf, n, &out, &used);
    tap_ok(rc == 1 && test_same(&rec, &out),
           "round trip of an empty ack");

    rec.request_id_len = LLM_RECORD_ID_MAX + 1;
    tap_is(llm_record_encode(&rec, buf, sizeof(buf)), 0,
           "encode refuses an out-of-range length");

    /* big-endian on the wire */

    test_sample(&rec);
    n = llm_record_encode(&rec, buf, sizeof(buf));
    tap_ok(buf[0] == 0 && buf[1] == 0 && buf[2] == 0 && buf[3] == n - 4
           && buf[4] == LLM_RECORD_VERSION && buf[5] == LLM_REC_SETTLE
           && buf[6] == 0 && buf[7] == 200 && buf[19] == 42
           && buf[4 + 64] == LLM_API_ANTHROPIC && buf[4 + 65] == 8,
           "header bytes are where the format says");
}


static void
test_truncation(void)
{
    int           rc, bad;
    size_t        n, i, used;
    uint8_t       buf[LLM_RECORD_MAX_FRAME];
    llm_record_t  rec, out;

    test_sample(&rec);
    n = llm_record_encode(&rec, buf, sizeof(buf));

    bad = 0;

    for (i = 0; i < n; i++) {
        used = 12345;
        rc = llm_record_decode(buf, i, &out, &used);

        if (rc != 0 || used != 12345) {
            bad++;
        }
    }

    tap_is(bad, 0, "each of the %d truncations returns 0", (int) n);
}


static void
test_corruption(void)
{
    int           rc, bad, accepted;
    size_t        n, i, used;
    unsigned      v;
    uint8_t       buf[LLM_RECORD_MAX_FRAME], copy[LLM_RECORD_MAX_FRAME];
    llm_record_t  rec, out;

    test_sample(&rec);
    n = llm_record_encode(&rec, buf, sizeof(buf));

    bad = 0;
    accepted = 0;

    /* every value at every position */

    for (i = 0; i < n; i++) {
        for (v = 0; v < 256; v++) {
            memcpy(copy, buf, n);
            copy[i] = (uint8_t) v;
            used = 0;

            rc = llm_record_decode(copy, n, &out, &used);

            if (rc == 1) {
                accepted++;

                if (!test_sane(&out) || used > n) {
                    bad++;
                }

            } else if (rc != 0 && rc != -1) {
                bad++;
            }
        }
    }

    tap_is(bad, 0, "single-byte corruption never decodes out of range");
    tap_ok(accepted > 0, "corrupted numbers still decode (%d)", accepted);

    memcpy(copy, buf, n);
    copy[4] = LLM_RECORD_VERSION + 1;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "a wrong version is rejected");
    tap_is(llm_record_decode(copy, 5, &out, &used), -1,
           "a wrong version is rejected before the frame is complete");

    memcpy(copy, buf, n);
    copy[5] = 3;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "an unknown type is rejected");

    memcpy(copy, buf, n);
    copy[4 + 64] = 0;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "a settle record without an api is rejected");

    memcpy(copy, buf, n);
    copy[4 + 64] = 3;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "an unknown api is rejected");

    /* the request_id length says one byte more than there is */
    memcpy(copy, buf, n);
    copy[4 + 65] = 9;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "string lengths must add up to the payload length");

    memcpy(copy, buf, n);
    copy[4 + 65] = LLM_RECORD_ID_MAX + 1;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "a request_id longer than its maximum is rejected");
}


static void
test_random(void)
{
    int           rc, bad;
    size_t        n, i, k, len, used;
    uint8_t       buf[LLM_RECORD_MAX_FRAME * 2];
    llm_record_t  rec, out;

    bad = 0;

    /* random bytes behind a plausible length prefix */

    for (i = 0; i < 200000; i++) {
        len = test_rand() % sizeof(buf);

        for (k = 0; k < len; k++) {
            buf[k] = (uint8_t) test_rand();
        }

        if (len >= 6 && (i & 1)) {
            n = LLM_RECORD_FIXED_LEN + 3 + test_rand() % 230;
            buf[0] = 0;
            buf[1] = 0;
            buf[2] = (uint8_t) (n >> 8);
            buf[3] = (uint8_t) n;
            buf[4] = LLM_RECORD_VERSION;
            buf[5] = 1 + (i & 2) / 2;
            buf[4 + 64] = 1 + (i & 4) / 4;
        }

        used = 0;
        rc = llm_record_decode(buf, len, &out, &used);

        if (rc == 1 && (!test_sane(&out) || used > len)) {
            bad++;
        }

        if (rc < -1 || rc > 1) {
            bad++;
        }
    }

    tap_is(bad, 0, "random input never decodes out of range");

    /* random valid records always round trip */

    bad = 0;

    for (i = 0; i < 10000; i++) {
        memset(&rec, 0, sizeof(llm_record_t));
        rec.type = 1 + test_rand() % 2;
        rec.status = (uint16_t) test_rand();
        rec.flags = test_rand();
        rec.tenant_id = (int64_t) ((uint64_t) test_rand() << 32 | test_rand());
        rec.key_id = (int64_t) test_rand();
        rec.input_tokens = test_rand();
        rec.output_tokens = (uint64_t) test_rand() << 20;
        rec.ts_ms = (int64_t) test_rand() * 1000;
        rec.api = 1 + test_rand() % 2;
        rec.request_id_len = test_rand() % (LLM_RECORD_ID_MAX + 1);
        rec.model_len = test_rand() % (LLM_RECORD_MODEL_MAX + 1);
        rec.finish_reason_len = test_rand() % (LLM_RECORD_FINISH_MAX + 1);

        for (k = 0; k < rec.model_len; k++) {
            rec.model[k] = (char) test_rand();
        }

        n = llm_record_encode(&rec, buf, sizeof(buf));
        rc = llm_record_decode(buf, n, &out, &used);

        if (n == 0 || rc != 1 || used != n || !test_same(&rec, &out)) {
            bad++;
        }
    }

    tap_is(bad, 0, "random records round trip");
}


static void
test_back_to_back(void)
{
    int           rc;
    size_t        n1, n2, used;
    uint8_t       buf[LLM_RECORD_MAX_FRAME * 2];
    llm_record_t  a, b, out;

    test_sample(&a);
    test_sample(&b);
    b.type = LLM_REC_ACK;
    b.api = 0;
    llm_record_set_request_id(&b, "req-0002", 8);
    b.model_len = 0;
    b.finish_reason_len = 0;

    n1 = llm_record_encode(&a, buf, sizeof(buf));
    n2 = llm_record_encode(&b, buf + n1, sizeof(buf) - n1);

    rc = llm_record_decode(buf, n1 + n2, &out, &used);
    tap_ok(rc == 1 && used == n1 && test_same(&a, &out),
           "first of two frames");

    rc = llm_record_decode(buf + used, n1 + n2 - used, &out, &used);
    tap_ok(rc == 1 && used == n2 && test_same(&b, &out),
           "second of two frames");

    rc = llm_record_decode(buf, n1 + 3, &out, &used);
    tap_ok(rc == 1 && used == n1, "a frame followed by a partial frame");

    rc = llm_record_decode(buf + n1, 3, &out, &used);
    tap_is(rc, 0, "the partial frame wants more");
}


static void
test_rejects(void)
{
    size_t        used;
    uint8_t       buf[LLM_RECORD_MAX_FRAME];
    llm_record_t  rec, out;

    test_sample(&rec);
    llm_record_encode(&rec, buf, sizeof(buf));

    buf[3] = LLM_RECORD_FIXED_LEN + 2;
    tap_is(llm_record_decode(buf, 4, &out, &used), -1,
           "a payload shorter than the fixed part is rejected at once");

    buf[2] = (LLM_RECORD_MAX_FRAME - 3) >> 8;
    buf[3] = (LLM_RECORD_MAX_FRAME - 3) & 0xff;
    tap_is(llm_record_decode(buf, 4, &out, &used), -1,
           "a payload longer than the maximum is rejected at once");

    buf[2] = (LLM_RECORD_MAX_FRAME - 4) >> 8;
    buf[3] = (LLM_RECORD_MAX_FRAME - 4) & 0xff;
    tap_is(llm_record_decode(buf, 4, &out, &used), 0,
           "the largest payload length is accepted");

    memcpy(buf, "GET / HTTP/1.1\r\n", 16);
    tap_is(llm_record_decode(buf, 16, &out, &used), -1,
           "an HTTP request is garbage");
}


static void
test_set(void)
{
    size_t        n;
    llm_record_t  rec;
    char          big[300];

    memset(big, 'x', sizeof(big));
    memset(&rec, 0, sizeof(llm_record_t));

    n = llm_record_set_model(&rec, big, sizeof(big));
    tap_ok(n == LLM_RECORD_MODEL_MAX && rec.model_len == n,
           "set truncates to the field's size");

    n = llm_record_set_request_id(&rec, "abc", 3);
    tap_ok(n == 3 && rec.request_id_len == 3
           && memcmp(rec.request_id, "abc", 3) == 0,
           "set copies a short string");

    n = llm_record_set_finish_reason(&rec, NULL, 0);
    tap_ok(n == 0 && rec.finish_reason_len == 0, "set of an empty string");
}
