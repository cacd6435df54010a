
/*
 * The settle record codec: the layout byte by byte, round trips,
 * truncation, corruption, frames back to back, and the records of
 * versions 2 and 3 older nginxes send.
 */


#include <stdint.h>
#include <string.h>

#include "llm_record.h"
#include "tap.h"


static void test_sample(llm_record_t *rec);
static int test_sane(const llm_record_t *rec);
static uint32_t test_rand(void);
static uint64_t test_get(const uint8_t *p, size_t width);
static void test_layout(void);
static void test_flags(void);
static void test_round_trip(void);
static void test_truncation(void);
static void test_corruption(void);
static void test_random(void);
static void test_back_to_back(void);
static void test_rejects(void);
static void test_set(void);
static void test_lease(void);
static size_t test_old_frame(const llm_record_t *rec, uint8_t *buf,
    unsigned version);
static void test_v2(void);
static void test_backend(void);
static void test_v3(void);


/*
 * Where the format puts things, written out rather than derived from the
 * codec's constants, so that the two are checked against each other.
 */
#define TEST_OFF_API       84
#define TEST_OFF_ID_LEN    85
#define TEST_OFF_UP_API    115
#define TEST_OFF_BACKEND   116
#define TEST_OFF_RESP_ID   129


static uint32_t  test_seed = 2463534242u;


int
main(void)
{
    test_layout();
    test_flags();
    test_round_trip();
    test_truncation();
    test_corruption();
    test_random();
    test_back_to_back();
    test_rejects();
    test_set();
    test_lease();
    test_v2();
    test_backend();
    test_v3();

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
    rec->cache_write_tokens = 300;
    rec->reasoning_tokens = 640;
    rec->reserved_tokens = 8000;
    rec->ts_ms = 1795954800123LL;
    rec->api = LLM_API_ANTHROPIC;
    rec->up_api = LLM_API_OPENAI;

    llm_record_set_request_id(rec, "req-0001", 8);
    llm_record_set_model(rec, "claude-sonnet-4", 15);
    llm_record_set_finish_reason(rec, "stop", 4);
    llm_record_set_backend(rec, "gpt-a", 5);
    llm_record_set_provider_key(rec, "proj-a", 6);
    llm_record_set_response_id(rec, "chatcmpl-1", 10);
    llm_record_set_upstream_model(rec, "gpt-4o-2024", 11);
}


static int
test_sane(const llm_record_t *rec)
{
    return rec->request_id_len <= LLM_RECORD_ID_MAX
           && rec->model_len <= LLM_RECORD_MODEL_MAX
           && rec->finish_reason_len <= LLM_RECORD_FINISH_MAX
           && rec->backend_len <= LLM_RECORD_BACKEND_MAX
           && rec->provider_key_len <= LLM_RECORD_BACKEND_MAX
           && rec->response_id_len <= LLM_RECORD_UPSTREAM_MAX
           && rec->upstream_model_len <= LLM_RECORD_UPSTREAM_MAX
           && rec->up_api <= LLM_API_EMBEDDINGS
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


/* a big-endian integer of width bytes */

static uint64_t
test_get(const uint8_t *p, size_t width)
{
    size_t    i;
    uint64_t  v;

    v = 0;

    for (i = 0; i < width; i++) {
        v = v << 8 | p[i];
    }

    return v;
}


/* the sample frame, field by field, as the comment in llm_record.h says */

static void
test_layout(void)
{
    size_t        n, i;
    uint8_t       buf[LLM_RECORD_MAX_FRAME];
    llm_record_t  rec;

    static const struct {
        const char  *name;
        size_t       off;
        size_t       width;
        uint64_t     value;
    } fields[] = {
        { "length",               0, 4, 148 },
        { "version",              4, 1, 4 },
        { "type",                 5, 1, LLM_REC_SETTLE },
        { "status",               6, 2, 200 },
        { "flags",                8, 4, 0x6 },
        { "tenant_id",           12, 8, 42 },
        { "key_id",              20, 8, 7 },
        { "input_tokens",        28, 8, 2000 },
        { "output_tokens",       36, 8, 1500 },
        { "cached_input_tokens", 44, 8, 128 },
        { "cache_write_tokens",  52, 8, 300 },
        { "reasoning_tokens",    60, 8, 640 },
        { "reserved_tokens",     68, 8, 8000 },
        { "ts_ms",               76, 8, 0x1a2273f75fbULL },
        { "api",                 84, 1, LLM_API_ANTHROPIC },
        { "request_id length",   85, 1, 8 },
        { "model length",        94, 1, 15 },
        { "finish length",      110, 1, 4 },
        { "up_api",             115, 1, LLM_API_OPENAI },
        { "backend length",     116, 1, 5 },
        { "provider_key length", 122, 1, 6 },
        { "response_id length", 129, 1, 10 },
        { "upstream_model length", 140, 1, 11 },
    };

    test_sample(&rec);

    n = llm_record_encode(&rec, buf, sizeof(buf));
    tap_is(n, 152, "the sample frame is 152 bytes");
    tap_is(LLM_RECORD_FIXED_LEN, 81, "the fixed part is 81 bytes");
    tap_is(LLM_RECORD_VERSION, 4, "the format is version 4");
    tap_is(LLM_FRAME_VERSION, 2, "the other frames stay at version 2");
    tap_is(LLM_RECORD_MAX_FRAME, 573, "the largest frame is 573 bytes");
    tap_is(LLM_RECORD_V3_MAX_FRAME, 378,
           "the largest of version 3 is 378 bytes");
    tap_is(LLM_RECORD_V2_MAX_FRAME, 312,
           "the largest of version 2 is 312 bytes");

    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        tap_is(test_get(buf + fields[i].off, fields[i].width),
               fields[i].value, "%s: %zu bytes at %zu", fields[i].name,
               fields[i].width, fields[i].off);
    }

    tap_ok(memcmp(buf + 86, "req-0001", 8) == 0
           && memcmp(buf + 95, "claude-sonnet-4", 15) == 0
           && memcmp(buf + 111, "stop", 4) == 0
           && memcmp(buf + 117, "gpt-a", 5) == 0
           && memcmp(buf + 123, "proj-a", 6) == 0
           && memcmp(buf + 130, "chatcmpl-1", 10) == 0
           && memcmp(buf + 141, "gpt-4o-2024", 11) == 0,
           "the strings follow their lengths");
}


/* the bits are the database's too: sql/003_metering.sql */

static void
test_flags(void)
{
    tap_is(LLM_REC_F_ESTIMATED, 1, "flag estimated is bit 0");
    tap_is(LLM_REC_F_PARTIAL, 2, "flag partial is bit 1");
    tap_is(LLM_REC_F_CLAMPED, 4, "flag clamped is bit 2");
    tap_is(LLM_REC_F_REPEATED, 8, "flag repeated is bit 3");
    tap_is(LLM_REC_F_OVERSIZE, 16, "flag oversize is bit 4");
    tap_is(LLM_API_OPENAI * 1000 + LLM_API_ANTHROPIC * 100
           + LLM_API_RESPONSES * 10 + LLM_API_EMBEDDINGS,
           1234, "apis: openai 1, anthropic 2, responses 3, embeddings 4");
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
    tap_is(n, 4 + LLM_RECORD_FIXED_LEN + 3 + 8 + 15 + 4 + 2 + 5
              + 3 + 6 + 10 + 11,
           "encode returns the frame length");

    used = 0;
    rc = llm_record_decode(buf, n, &out, &used);
    tap_is(rc, 1, "decode of a whole frame returns 1");
    tap_is(used, n, "decode consumes the whole frame");
    tap_ok(llm_record_same(&rec, &out), "round trip keeps every field");

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
    rec.cache_write_tokens = UINT64_MAX - 2;
    rec.reasoning_tokens = 0x8000000000000000ULL;
    rec.reserved_tokens = 0x0102030405060708ULL;
    rec.ts_ms = -1;
    rec.api = LLM_API_OPENAI;
    memset(rec.request_id, 'r', LLM_RECORD_ID_MAX);
    rec.request_id_len = LLM_RECORD_ID_MAX;
    memset(rec.model, 'm', LLM_RECORD_MODEL_MAX);
    rec.model_len = LLM_RECORD_MODEL_MAX;
    memset(rec.finish_reason, 'f', LLM_RECORD_FINISH_MAX);
    rec.finish_reason_len = LLM_RECORD_FINISH_MAX;
    rec.up_api = LLM_API_EMBEDDINGS;
    memset(rec.backend, 'b', LLM_RECORD_BACKEND_MAX);
    rec.backend_len = LLM_RECORD_BACKEND_MAX;
    memset(rec.provider_key, 'k', LLM_RECORD_BACKEND_MAX);
    rec.provider_key_len = LLM_RECORD_BACKEND_MAX;
    memset(rec.response_id, 'i', LLM_RECORD_UPSTREAM_MAX);
    rec.response_id_len = LLM_RECORD_UPSTREAM_MAX;
    memset(rec.upstream_model, 'u', LLM_RECORD_UPSTREAM_MAX);
    rec.upstream_model_len = LLM_RECORD_UPSTREAM_MAX;

    n = llm_record_encode(&rec, buf, sizeof(buf));
    tap_is(n, LLM_RECORD_MAX_FRAME, "the largest record fills MAX_FRAME");

    rc = llm_record_decode(buf, n, &out, &used);
    tap_ok(rc == 1 && llm_record_same(&rec, &out),
           "round trip of extreme values");

    tap_is(llm_record_encode(&rec, buf, n - 1), 0,
           "encode into a buffer one byte short returns 0");

    /* empty strings */

    memset(&rec, 0, sizeof(llm_record_t));
    rec.type = LLM_REC_ACK;

    n = llm_record_encode(&rec, buf, sizeof(buf));
    tap_is(n, 4 + LLM_RECORD_FIXED_LEN + 3,
           "the smallest frame, an ack of version 2");
    tap_is(buf[4], LLM_FRAME_VERSION, "an ack is written at version 2");

    rc = llm_record_decode(buf, n, &out, &used);
    tap_ok(rc == 1 && llm_record_same(&rec, &out),
           "round trip of an empty ack");

    /* a Responses record with the new flags and figures */

    test_sample(&rec);
    rec.api = LLM_API_RESPONSES;
    rec.flags = LLM_REC_F_ESTIMATED | LLM_REC_F_REPEATED
                | LLM_REC_F_OVERSIZE;
    rec.cache_write_tokens = 0;
    rec.reasoning_tokens = 1499;
    llm_record_set_model(&rec, "o4-mini", 7);
    llm_record_set_finish_reason(&rec, "max_output_tokens", 17);

    n = llm_record_encode(&rec, buf, sizeof(buf));
    rc = llm_record_decode(buf, n, &out, &used);
    tap_ok(rc == 1 && used == n && llm_record_same(&rec, &out)
           && out.api == LLM_API_RESPONSES && out.reasoning_tokens == 1499
           && out.flags == 0x19,
           "round trip of api responses, its flags and reasoning tokens");

    /* each new figure alone, so that neither is read from the other */

    test_sample(&rec);
    rec.cache_write_tokens = 0x1111111111111111ULL;
    rec.reasoning_tokens = 0;
    n = llm_record_encode(&rec, buf, sizeof(buf));
    rc = llm_record_decode(buf, n, &out, &used);
    tap_ok(rc == 1 && out.cache_write_tokens == 0x1111111111111111ULL
           && out.reasoning_tokens == 0 && out.cached_input_tokens == 128
           && out.reserved_tokens == 8000,
           "cache_write_tokens round trips on its own");

    rec.cache_write_tokens = 0;
    rec.reasoning_tokens = 0x2222222222222222ULL;
    n = llm_record_encode(&rec, buf, sizeof(buf));
    rc = llm_record_decode(buf, n, &out, &used);
    tap_ok(rc == 1 && out.reasoning_tokens == 0x2222222222222222ULL
           && out.cache_write_tokens == 0 && out.cached_input_tokens == 128
           && out.reserved_tokens == 8000,
           "reasoning_tokens round trips on its own");

    rec.request_id_len = LLM_RECORD_ID_MAX + 1;
    tap_is(llm_record_encode(&rec, buf, sizeof(buf)), 0,
           "encode refuses an out-of-range length");

    /* a request that reached no backend */

    test_sample(&rec);
    rec.up_api = 0;
    rec.backend_len = 0;
    rec.provider_key_len = 0;
    rec.response_id_len = 0;
    rec.upstream_model_len = 0;
    n = llm_record_encode(&rec, buf, sizeof(buf));
    rc = llm_record_decode(buf, n, &out, &used);
    tap_ok(n == 4 + LLM_RECORD_FIXED_LEN + 3 + 8 + 15 + 4 + 2 + 3 && rc == 1
           && used == n && llm_record_same(&rec, &out) && out.up_api == 0
           && out.backend_len == 0,
           "a record without a backend: up_api 0, its name empty");

    /* big-endian on the wire */

    test_sample(&rec);
    n = llm_record_encode(&rec, buf, sizeof(buf));
    tap_ok(buf[0] == 0 && buf[1] == 0 && buf[2] == 0 && buf[3] == n - 4
           && buf[4] == LLM_RECORD_VERSION && buf[5] == LLM_REC_SETTLE
           && buf[6] == 0 && buf[7] == 200 && buf[19] == 42
           && buf[TEST_OFF_API] == LLM_API_ANTHROPIC
           && buf[TEST_OFF_ID_LEN] == 8,
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
    size_t        n, i, k, used;
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

    /* a peer still speaking version 1 (a 65-byte fixed part) */
    memcpy(copy, buf, n);
    copy[4] = 1;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "a version 1 frame is rejected");

    memcpy(copy, buf, n);
    copy[5] = 3;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "an unknown type is rejected");

    memcpy(copy, buf, n);
    copy[TEST_OFF_API] = 0;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "a settle record without an api is rejected");

    memcpy(copy, buf, n);
    copy[TEST_OFF_API] = LLM_API_RESPONSES;
    rc = llm_record_decode(copy, n, &out, &used);
    tap_ok(rc == 1 && out.api == LLM_API_RESPONSES,
           "api 3, responses, is accepted");

    memcpy(copy, buf, n);
    copy[TEST_OFF_API] = LLM_API_EMBEDDINGS;
    rc = llm_record_decode(copy, n, &out, &used);
    tap_ok(rc == 1 && out.api == LLM_API_EMBEDDINGS,
           "api 4, embeddings, is accepted");

    /* the values beyond are the gateway's own answers, never recorded */
    memcpy(copy, buf, n);
    copy[TEST_OFF_API] = 5;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "an unknown api is rejected");

    memcpy(copy, buf, n);
    copy[TEST_OFF_API] = 0xff;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "api 255 is rejected");

    /* an ack is of version 2 */
    k = test_old_frame(&rec, copy, 2);
    copy[5] = LLM_REC_ACK;
    copy[TEST_OFF_API] = 0;
    rc = llm_record_decode(copy, k, &out, &used);
    tap_ok(rc == 1 && out.type == LLM_REC_ACK && out.api == 0,
           "an ack without an api is accepted");

    copy[TEST_OFF_API] = 5;
    tap_is(llm_record_decode(copy, k, &out, &used), -1,
           "an ack with an unknown api is rejected");

    /* the request_id length says one byte more than there is */
    memcpy(copy, buf, n);
    copy[TEST_OFF_ID_LEN] = 9;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "string lengths must add up to the payload length");

    memcpy(copy, buf, n);
    copy[TEST_OFF_ID_LEN] = LLM_RECORD_ID_MAX + 1;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "a request_id longer than its maximum is rejected");

    /* the fields of version 3 */

    memcpy(copy, buf, n);
    copy[4] = LLM_FRAME_VERSION;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "a frame of version 3 labelled 2 is rejected");

    memcpy(copy, buf, n);
    copy[TEST_OFF_UP_API] = LLM_API_COUNT_TOKENS;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "an up_api beyond those recorded is rejected");

    memcpy(copy, buf, n);
    copy[TEST_OFF_UP_API] = 0xff;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "up_api 255 is rejected");

    memcpy(copy, buf, n);
    copy[TEST_OFF_UP_API] = LLM_API_ANTHROPIC;
    rc = llm_record_decode(copy, n, &out, &used);
    tap_ok(rc == 1 && out.up_api == LLM_API_ANTHROPIC && out.backend_len == 5,
           "up_api 2, anthropic, is accepted");

    memcpy(copy, buf, n);
    copy[TEST_OFF_BACKEND] = 6;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "a backend length past the payload is rejected");

    memcpy(copy, buf, n);
    copy[TEST_OFF_BACKEND] = 4;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "a backend length short of the payload is rejected");

    memcpy(copy, buf, n);
    copy[5] = LLM_REC_ACK;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "an ack of version 3 is rejected");
    tap_is(llm_record_decode(copy, 6, &out, &used), -1,
           "an ack of version 3 is rejected at its type byte");
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
            buf[4] = (i & 8) ? LLM_FRAME_VERSION : LLM_RECORD_VERSION;
            buf[5] = 1 + (i & 2) / 2;
            buf[TEST_OFF_API] = (i >> 2) % 4;
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
        rec.cached_input_tokens = test_rand() % 1000;
        rec.cache_write_tokens = (uint64_t) test_rand() << 32 | test_rand();
        rec.reasoning_tokens = (uint64_t) test_rand() << 7;
        rec.reserved_tokens = test_rand();
        rec.ts_ms = (int64_t) test_rand() * 1000;
        rec.api = 1 + test_rand() % 3;
        rec.request_id_len = test_rand() % (LLM_RECORD_ID_MAX + 1);
        rec.model_len = test_rand() % (LLM_RECORD_MODEL_MAX + 1);
        rec.finish_reason_len = test_rand() % (LLM_RECORD_FINISH_MAX + 1);

        for (k = 0; k < rec.model_len; k++) {
            rec.model[k] = (char) test_rand();
        }

        /* an ack carries neither: it is written at version 2 */
        if (rec.type == LLM_REC_SETTLE) {
            rec.up_api = test_rand() % (LLM_API_EMBEDDINGS + 1);
            rec.backend_len = test_rand() % (LLM_RECORD_BACKEND_MAX + 1);

            for (k = 0; k < rec.backend_len; k++) {
                rec.backend[k] = (char) test_rand();
            }
        }

        n = llm_record_encode(&rec, buf, sizeof(buf));
        rc = llm_record_decode(buf, n, &out, &used);

        if (n == 0 || rc != 1 || used != n || !llm_record_same(&rec, &out)) {
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
    b.up_api = 0;
    b.backend_len = 0;
    b.provider_key_len = 0;
    b.response_id_len = 0;
    b.upstream_model_len = 0;

    n1 = llm_record_encode(&a, buf, sizeof(buf));
    n2 = llm_record_encode(&b, buf + n1, sizeof(buf) - n1);

    rc = llm_record_decode(buf, n1 + n2, &out, &used);
    tap_ok(rc == 1 && used == n1 && llm_record_same(&a, &out),
           "first of two frames");

    rc = llm_record_decode(buf + used, n1 + n2 - used, &out, &used);
    tap_ok(rc == 1 && used == n2 && llm_record_same(&b, &out),
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

    n = llm_record_set_backend(&rec, big, LLM_RECORD_BACKEND_MAX + 1);
    tap_ok(n == LLM_RECORD_BACKEND_MAX
           && rec.backend_len == LLM_RECORD_BACKEND_MAX,
           "set truncates a backend of 65 bytes to 64");
}


/* the lease frames: both kinds round-trip, whole and cut, and wrong ones */

static void
test_lease(void)
{
    int          rc;
    size_t       n, used, cut;
    uint8_t      buf[LLM_LEASE_MAX_FRAME + 8];
    llm_lease_t  l, got;

    memset(&l, 0, sizeof(llm_lease_t));
    l.type = LLM_REC_LEASE_REQ;
    l.tenant_id = 42;
    l.key_id = 9;
    l.want = 16000000000LL;
    l.model_len = 11;
    memcpy(l.model, "mock-capped", 11);

    n = llm_record_lease_encode(&l, buf, sizeof(buf));
    tap_is(n, 4 + 2 + 8 * 4 + 1 + 11, "a lease request: its length");

    rc = llm_record_lease_decode(buf, n, &got, &used);
    tap_ok(rc == 1 && used == n && got.type == LLM_REC_LEASE_REQ
           && got.tenant_id == 42 && got.key_id == 9
           && got.want == 16000000000LL && got.until_ms == 0
           && got.model_len == 11 && memcmp(got.model, "mock-capped", 11) == 0,
           "a lease request round-trips");

    memset(&l, 0, sizeof(llm_lease_t));
    l.type = LLM_REC_LEASE_RETURN;
    l.tenant_id = 42;
    l.want = 123456789;
    l.until_ms = 1795996800000LL;

    n = llm_record_lease_encode(&l, buf, sizeof(buf));
    rc = llm_record_lease_decode(buf, n, &got, &used);
    tap_ok(rc == 1 && used == n && got.type == LLM_REC_LEASE_RETURN
           && got.tenant_id == 42 && got.key_id == 0
           && got.want == 123456789 && got.until_ms == 1795996800000LL,
           "a return round-trips");

    l.type = LLM_REC_LEASE_RETURN + 1;
    tap_is(llm_record_lease_encode(&l, buf, sizeof(buf)), 0,
           "an unknown type is not written");

    memset(&l, 0, sizeof(llm_lease_t));
    l.type = LLM_REC_LEASE;
    l.tenant_id = -7;
    l.granted = 1900000000;
    l.remaining = -1;
    l.resets_at_ms = 1795996800000LL;
    l.until_ms = 1795910400000LL;
    l.prices[LLM_LEASE_IN] = 1000000;
    l.prices[LLM_LEASE_OUT] = 2000000;
    l.prices[LLM_LEASE_CACHED] = -1;
    l.prices[LLM_LEASE_CACHE_WRITE] = 1250000;
    l.model_len = 0;

    n = llm_record_lease_encode(&l, buf, sizeof(buf));
    rc = llm_record_lease_decode(buf, n, &got, &used);
    tap_ok(rc == 1 && used == n && got.type == LLM_REC_LEASE
           && got.tenant_id == -7 && got.granted == 1900000000
           && got.remaining == -1 && got.resets_at_ms == 1795996800000LL
           && got.until_ms == 1795910400000LL
           && got.prices[LLM_LEASE_IN] == 1000000
           && got.prices[LLM_LEASE_OUT] == 2000000
           && got.prices[LLM_LEASE_CACHED] == -1
           && got.prices[LLM_LEASE_CACHE_WRITE] == 1250000
           && got.model_len == 0,
           "a lease answer round-trips, negative figures too");

    for (cut = 0; cut < n; cut++) {
        if (llm_record_lease_decode(buf, cut, &got, &used) != 0) {
            break;
        }
    }

    tap_ok(cut == n, "a cut lease frame asks for more bytes");

    tap_is(llm_record_lease_encode(&l, buf, n - 1), 0,
           "no room: nothing written");

    buf[5] = LLM_REC_SETTLE;
    tap_is(llm_record_lease_decode(buf, n, &got, &used), -1,
           "another type is refused");

    buf[5] = LLM_REC_LEASE;
    buf[3]++;
    tap_is(llm_record_lease_decode(buf, n + 1, &got, &used), -1,
           "a length that does not add up is refused");
}


/*
 * A record as an older nginx writes it: version 3 ends after backend,
 * version 2 after finish_reason
 */

static size_t
test_old_frame(const llm_record_t *rec, uint8_t *buf, unsigned version)
{
    size_t  n;

    n = llm_record_encode(rec, buf, LLM_RECORD_MAX_FRAME);
    n -= 3 + rec->provider_key_len + rec->response_id_len
         + rec->upstream_model_len;

    if (version == 2) {
        n -= 2 + rec->backend_len;
    }

    buf[0] = 0;
    buf[1] = 0;
    buf[2] = (uint8_t) ((n - 4) >> 8);
    buf[3] = (uint8_t) (n - 4);
    buf[4] = (uint8_t) version;

    return n;
}


static void
test_v2(void)
{
    int           rc, bad;
    size_t        n, i, used;
    uint8_t       buf[LLM_RECORD_MAX_FRAME], copy[LLM_RECORD_MAX_FRAME];
    llm_record_t  rec, out;

    test_sample(&rec);
    n = test_old_frame(&rec, buf, 2);
    tap_is(n, 115, "a record of version 2 is 115 bytes");

    used = 0;
    rc = llm_record_decode(buf, n, &out, &used);
    rec.up_api = 0;
    rec.backend_len = 0;
    rec.provider_key_len = 0;
    rec.response_id_len = 0;
    rec.upstream_model_len = 0;
    tap_ok(rc == 1 && used == n && llm_record_same(&rec, &out),
           "a record of version 2 decodes, with up_api 0 and no backend");

    bad = 0;

    for (i = 0; i < n; i++) {
        used = 12345;

        if (llm_record_decode(buf, i, &out, &used) != 0 || used != 12345) {
            bad++;
        }
    }

    tap_is(bad, 0, "each of the %d truncations of version 2 returns 0",
           (int) n);

    /* the tail of version 3 behind a frame labelled 2 */

    test_sample(&rec);
    llm_record_encode(&rec, copy, sizeof(copy));
    copy[4] = LLM_FRAME_VERSION;
    copy[2] = 0;
    copy[3] = (uint8_t) (n + 2 - 4);
    copy[TEST_OFF_BACKEND] = 0;
    tap_is(llm_record_decode(copy, n + 2, &out, &used), -1,
           "version 2 with the bytes of version 3 behind is rejected");

    memcpy(copy, buf, n);
    copy[4] = 3;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "version 3 without its last fields is rejected");

    copy[4] = LLM_RECORD_VERSION;
    tap_is(llm_record_decode(copy, n, &out, &used), -1,
           "version 4 without its last fields is rejected");

    /* an ack of version 2: what accountd sends, what an older one sends */

    memcpy(copy, buf, n);
    copy[5] = LLM_REC_ACK;
    rc = llm_record_decode(copy, n, &out, &used);
    tap_ok(rc == 1 && out.type == LLM_REC_ACK && out.request_id_len == 8
           && out.up_api == 0 && out.backend_len == 0,
           "an ack of version 2 decodes");

    /* bounds of version 2: its own maximum, not that of version 3 */

    memcpy(copy, buf, n);
    copy[2] = (LLM_RECORD_V2_MAX_FRAME - 3) >> 8;
    copy[3] = (LLM_RECORD_V2_MAX_FRAME - 3) & 0xff;
    tap_is(llm_record_decode(copy, 5, &out, &used), -1,
           "version 2 longer than its maximum is rejected at its version");

    copy[2] = (LLM_RECORD_V2_MAX_FRAME - 4) >> 8;
    copy[3] = (LLM_RECORD_V2_MAX_FRAME - 4) & 0xff;
    tap_is(llm_record_decode(copy, 6, &out, &used), 0,
           "the largest payload of version 2 is accepted");

    memcpy(copy, buf, n);
    copy[3] = LLM_RECORD_FIXED_LEN + 4;
    tap_is(llm_record_decode(copy, 5, &out, &used), 0,
           "the smallest payload of version 2 waits");

    copy[4] = 3;
    tap_is(llm_record_decode(copy, 5, &out, &used), -1,
           "version 3 without room for its fields is rejected at once");

    copy[3] = LLM_RECORD_FIXED_LEN + 3 + 2;
    tap_is(llm_record_decode(copy, 5, &out, &used), 0,
           "the smallest payload of version 3 waits");

    copy[4] = LLM_RECORD_VERSION;
    tap_is(llm_record_decode(copy, 5, &out, &used), -1,
           "version 4 without room for its fields is rejected at once");
}


/* the backend's name: its bounds, as the other strings' */

static void
test_backend(void)
{
    int           rc;
    size_t        n, used;
    uint8_t       buf[LLM_RECORD_MAX_FRAME + 8];
    llm_record_t  rec, out;

    test_sample(&rec);
    memset(rec.backend, 'b', LLM_RECORD_BACKEND_MAX);
    rec.backend_len = LLM_RECORD_BACKEND_MAX;
    rec.up_api = LLM_API_ANTHROPIC;

    n = llm_record_encode(&rec, buf, sizeof(buf));
    rc = llm_record_decode(buf, n, &out, &used);
    tap_ok(rc == 1 && out.backend_len == 64 && llm_record_same(&rec, &out),
           "a backend of 64 bytes round trips");

    /* the 65th byte, as an older or a hostile peer could send it */

    buf[TEST_OFF_BACKEND] = LLM_RECORD_BACKEND_MAX + 1;
    buf[n] = 'b';
    buf[3]++;
    tap_is(llm_record_decode(buf, n + 1, &out, &used), -1,
           "a backend of 65 bytes is rejected");

    buf[TEST_OFF_BACKEND] = 0xff;
    tap_is(llm_record_decode(buf, n + 1, &out, &used), -1,
           "a backend length of 255 is rejected");

    rec.backend_len = LLM_RECORD_BACKEND_MAX + 1;
    tap_is(llm_record_encode(&rec, buf, sizeof(buf)), 0,
           "encode refuses a backend of 65 bytes");

    /* an ack names no backend, whatever the record held */

    test_sample(&rec);
    rec.type = LLM_REC_ACK;
    n = llm_record_encode(&rec, buf, sizeof(buf));
    rc = llm_record_decode(buf, n, &out, &used);
    tap_ok(n == 115 && buf[4] == LLM_FRAME_VERSION && rc == 1
           && out.up_api == 0 && out.backend_len == 0
           && out.request_id_len == 8,
           "an ack leaves out up_api and the backend");
}


/*
 * What the upstream said (the provider's key, its response id, its model):
 * records of version 3 are read without them; their bounds are checked.
 */

static void
test_v3(void)
{
    int           rc, bad;
    size_t        n, i, used;
    uint8_t       buf[LLM_RECORD_MAX_FRAME + 8], copy[LLM_RECORD_MAX_FRAME];
    llm_record_t  rec, out;

    test_sample(&rec);
    n = test_old_frame(&rec, buf, 3);
    tap_is(n, 122, "a record of version 3 is 122 bytes");

    used = 0;
    rc = llm_record_decode(buf, n, &out, &used);
    rec.provider_key_len = 0;
    rec.response_id_len = 0;
    rec.upstream_model_len = 0;
    tap_ok(rc == 1 && used == n && llm_record_same(&rec, &out)
           && out.backend_len == 5,
           "a record of version 3 decodes, its backend kept, nothing of "
           "the upstream's");

    bad = 0;

    for (i = 0; i < n; i++) {
        used = 12345;

        if (llm_record_decode(buf, i, &out, &used) != 0 || used != 12345) {
            bad++;
        }
    }

    tap_is(bad, 0, "each of the %d truncations of version 3 returns 0",
           (int) n);

    /* the tail of version 4 behind a frame labelled 3 */

    test_sample(&rec);
    llm_record_encode(&rec, copy, sizeof(copy));
    copy[4] = 3;
    tap_is(llm_record_decode(copy, sizeof(copy), &out, &used), -1,
           "version 3 with the bytes of version 4 behind is rejected");

    copy[2] = (LLM_RECORD_V3_MAX_FRAME - 3) >> 8;
    copy[3] = (LLM_RECORD_V3_MAX_FRAME - 3) & 0xff;
    tap_is(llm_record_decode(copy, 5, &out, &used), -1,
           "version 3 longer than its maximum is rejected at its version");

    /* a response id of 65 bytes, as a hostile peer could send it */

    test_sample(&rec);
    n = llm_record_encode(&rec, buf, sizeof(buf));
    buf[TEST_OFF_RESP_ID] = LLM_RECORD_UPSTREAM_MAX + 1;
    tap_is(llm_record_decode(buf, n, &out, &used), -1,
           "a response id of 65 bytes is rejected");

    buf[TEST_OFF_RESP_ID] = 0xff;
    tap_is(llm_record_decode(buf, n, &out, &used), -1,
           "a response id length of 255 is rejected");

    rec.upstream_model_len = LLM_RECORD_UPSTREAM_MAX + 1;
    tap_is(llm_record_encode(&rec, buf, sizeof(buf)), 0,
           "encode refuses an upstream model of 65 bytes");

    n = llm_record_set_response_id(&rec, "x", 1);
    tap_ok(n == 1 && rec.response_id_len == 1 && rec.response_id[0] == 'x',
           "set copies a response id");

    /* an ack names nothing of the upstream's */

    test_sample(&rec);
    rec.type = LLM_REC_ACK;
    n = llm_record_encode(&rec, buf, sizeof(buf));
    rc = llm_record_decode(buf, n, &out, &used);
    tap_ok(n == 115 && rc == 1 && out.provider_key_len == 0
           && out.response_id_len == 0 && out.upstream_model_len == 0,
           "an ack leaves out what the upstream said");
}
