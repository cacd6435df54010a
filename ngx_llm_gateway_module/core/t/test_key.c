
/*
 * API keys: generation, the checksum, well-formedness, HMAC-SHA256 against
 * RFC 4231, the secret file, the snapshot line format and model lists.
 */


#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "llm_key.h"
#include "llm_record.h"
#include "tap.h"


static void test_hex(const uint8_t *in, size_t len, char *out);
static void test_generate(void);
static void test_checksum(void);
static void test_well_formed(void);
static void test_hmac(void);
static void test_mac(void);
static void test_secret(void);
static void test_parse(void);
static void test_format(void);
static void test_names(void);
static void test_models(void);
static void test_frames(void);
static int test_parse_str(const char *line, llm_key_entry_t *e);
static void test_model_list(char *out, size_t len);


#define TEST_HASH                                                             \
    "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"

/*
 * Checksums computed outside our code:
 *
 *     $ printf %s llmgw_live_0123456789abcdefghijABCDEFGHIJ01 \
 *           | sha256sum | cut -c1-8
 *     3c89d35f
 *
 * 0x3c89d35f = 1015665503 = ((((1*62 + 6)*62 + 45)*62 + 38)*62 + 61)*62 + 41,
 * in base62 digits (0-9 A-Z a-z) "16jczf".  And for
 * llmgw_test_ followed by 32 "z": 1190c05b = 294699099, digits
 * 0 19 58 32 43 17, "0JwWhH": the leading zero is kept.
 */
#define TEST_KEY_LIVE                                                         \
    "llmgw_live_0123456789abcdefghijABCDEFGHIJ01" "16jczf"
#define TEST_KEY_TEST                                                         \
    "llmgw_test_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz" "0JwWhH"

#define TEST_BASE62                                                           \
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


int
main(void)
{
    test_generate();
    test_checksum();
    test_well_formed();
    test_hmac();
    test_secret();
    test_parse();
    test_format();
    test_names();
    test_models();
    test_frames();

    return tap_done();
}


static void
test_hex(const uint8_t *in, size_t len, char *out)
{
    size_t  i;

    for (i = 0; i < len; i++) {
        sprintf(out + 2 * i, "%02x", in[i]);
    }

    out[2 * len] = '\0';
}


static int
test_parse_str(const char *line, llm_key_entry_t *e)
{
    return llm_key_parse_line(line, strlen(line), e);
}


/* a valid list of exactly len characters: names of 9 and a shorter last */

static void
test_model_list(char *out, size_t len)
{
    size_t  i;

    for (i = 0; i < len; i++) {
        out[i] = (i % 10 == 9 && i + 1 < len) ? ',' : "abc-1.2:x/"[i % 10];
    }

    out[len] = '\0';
}


static void
test_generate(void)
{
    int     i, j, bad, same;
    char    key[LLM_KEY_LEN + 1], prev[LLM_KEY_LEN + 1];
    size_t  seen[256];

    tap_is(llm_key_generate(key, sizeof(key), 1), 0, "generate a live key");
    tap_is(strlen(key), LLM_KEY_LEN, "the key is %d characters",
           LLM_KEY_LEN);
    tap_ok(memcmp(key, LLM_KEY_PREFIX_LIVE, LLM_KEY_PREFIX_LEN) == 0,
           "live keys have the live prefix");
    tap_ok(llm_key_well_formed(key, strlen(key)), "a live key is well formed");

    tap_is(llm_key_generate(key, sizeof(key), 0), 0, "generate a test key");
    tap_ok(memcmp(key, LLM_KEY_PREFIX_TEST, LLM_KEY_PREFIX_LEN) == 0,
           "test keys have the test prefix");
    tap_ok(llm_key_well_formed(key, strlen(key)), "a test key is well formed");

    tap_is(llm_key_generate(key, LLM_KEY_LEN, 1), -1,
           "generate refuses a buffer without room for the NUL");

    /* every base62 character turns up, and nothing else does */

    memset(seen, 0, sizeof(seen));
    bad = 0;
    same = 0;
    prev[0] = '\0';

    for (i = 0; i < 2000; i++) {
        if (llm_key_generate(key, sizeof(key), 1) != 0
            || !llm_key_well_formed(key, strlen(key)))
        {
            bad++;
        }

        if (strcmp(key, prev) == 0) {
            same++;
        }

        memcpy(prev, key, sizeof(key));

        /* the random part only: the checksum's first digit is below 5 */

        for (j = LLM_KEY_PREFIX_LEN;
             j < LLM_KEY_PREFIX_LEN + LLM_KEY_RANDOM_LEN;
             j++)
        {
            seen[(unsigned char) key[j]]++;
        }
    }

    tap_is(bad, 0, "2000 keys are well formed");
    tap_is(same, 0, "no key repeats the previous one");

    /*
     * 64000 characters over 62 values: about 1032 each.  A modulo-biased
     * generator (256 % 62 = 8) would give the first 8 about 1.25 times the
     * others; with rejection every count stays well within 850..1250.
     */

    bad = 0;

    for (i = 0; i < 256; i++) {
        if (strchr(TEST_BASE62, i) && i != 0)
        {
            if (seen[i] < 850 || seen[i] > 1250) {
                bad++;
            }

        } else if (seen[i]) {
            bad++;
        }
    }

    tap_is(bad, 0, "characters are evenly spread over base62");
}


static void
test_checksum(void)
{
    int    i, c, bad;
    char   key[LLM_KEY_LEN + 1], orig;

    tap_ok(llm_key_well_formed(TEST_KEY_LIVE, LLM_KEY_LEN),
           "a live key with its checksum computed by sha256sum");
    tap_ok(llm_key_well_formed(TEST_KEY_TEST, LLM_KEY_LEN),
           "a test key whose checksum starts with 0");

    memcpy(key, TEST_KEY_LIVE, sizeof(key));
    key[LLM_KEY_LEN - 1] = 'g';
    tap_ok(!llm_key_well_formed(key, LLM_KEY_LEN), "the last digit off by one");

    memcpy(key, TEST_KEY_LIVE, sizeof(key));
    memcpy(key + LLM_KEY_LEN - LLM_KEY_CHECK_LEN, "1190c0", 6);
    tap_ok(!llm_key_well_formed(key, LLM_KEY_LEN), "the checksum as hex");

    /* the live key's checksum does not fit the test prefix */
    memcpy(key, TEST_KEY_LIVE, sizeof(key));
    memcpy(key, LLM_KEY_PREFIX_TEST, LLM_KEY_PREFIX_LEN);
    tap_ok(!llm_key_well_formed(key, LLM_KEY_LEN),
           "the checksum covers the prefix");

    /*
     * Every character of a generated key, replaced by each other base62
     * character.  For the random part a miss needs the first 32 bits of
     * SHA-256 to collide: about 2000 tries, odds of 1 in 2 million.
     */

    tap_is(llm_key_generate(key, sizeof(key), 1), 0, "generate a key");
    tap_ok(llm_key_well_formed(key, LLM_KEY_LEN), "it is well formed");

    bad = 0;

    for (i = 0; i < LLM_KEY_LEN; i++) {
        orig = key[i];

        for (c = 0; c < 62; c++) {
            if (TEST_BASE62[c] == orig) {
                continue;
            }

            key[i] = TEST_BASE62[c];

            if (llm_key_well_formed(key, LLM_KEY_LEN)) {
                bad++;
            }
        }

        key[i] = orig;
    }

    tap_is(bad, 0, "any one character changed makes it malformed");
    tap_ok(llm_key_well_formed(key, LLM_KEY_LEN), "and restored it is not");
}


static void
test_well_formed(void)
{
    char  key[LLM_KEY_LEN + 2];

    memcpy(key, TEST_KEY_LIVE, LLM_KEY_LEN);
    key[LLM_KEY_LEN] = '\0';

    tap_ok(llm_key_well_formed(key, LLM_KEY_LEN), "a hand-made key");
    tap_ok(!llm_key_well_formed(key, LLM_KEY_LEN - 1), "one short");

    key[LLM_KEY_LEN] = 'x';
    tap_ok(!llm_key_well_formed(key, LLM_KEY_LEN + 1), "one long");

    key[20] = '_';
    tap_ok(!llm_key_well_formed(key, LLM_KEY_LEN), "a non-base62 character");

    key[20] = '9';
    tap_ok(llm_key_well_formed(key, LLM_KEY_LEN), "restored");

    key[LLM_KEY_LEN - 1] = '\0';
    tap_ok(!llm_key_well_formed(key, LLM_KEY_LEN), "a NUL inside");

    tap_ok(!llm_key_well_formed("sk_live_0123456789abcdefghijABCDEFGHIJ01"
                                "xxx16jczf", LLM_KEY_LEN),
           "a foreign prefix");

    tap_ok(!llm_key_well_formed("LLMGW_LIVE_0123456789abcdefghijABCDEFGHIJ01"
                                "16jczf", LLM_KEY_LEN),
           "the prefix is case-sensitive");

    tap_ok(!llm_key_well_formed("llmgw_live_0123456789abcdefghijABCDEFGHIJ01",
                                LLM_KEY_LEN - LLM_KEY_CHECK_LEN),
           "a version 1 key, without a checksum");
}


static void
test_hmac(void)
{
    char     hex[2 * LLM_KEY_HASH_LEN + 1];
    uint8_t  key[131], out[LLM_KEY_HASH_LEN];

    /* RFC 4231, test case 2 */

    tap_is(llm_key_hmac((const uint8_t *) "Jefe", 4,
                        "what do ya want for nothing?", 28, out),
           0, "hmac succeeds");
    test_hex(out, sizeof(out), hex);
    tap_is_str(hex, TEST_HASH, "RFC 4231 test case 2");

    /* RFC 4231, test case 1 */

    memset(key, 0x0b, 20);
    llm_key_hmac(key, 20, "Hi There", 8, out);
    test_hex(out, sizeof(out), hex);
    tap_is_str(hex,
               "b0344c61d8db38535ca8afceaf0bf12b"
               "881dc200c9833da726e9376c2e32cff7",
               "RFC 4231 test case 1");

    /* RFC 4231, test case 6: a key longer than the block */

    memset(key, 0xaa, sizeof(key));
    llm_key_hmac(key, sizeof(key),
                 "Test Using Larger Than Block-Size Key - Hash Key First",
                 54, out);
    test_hex(out, sizeof(out), hex);
    tap_is_str(hex,
               "60e431591ee0b67f0d8a26aacbf5b77f"
               "8e0bc6213728c5140546040f0ee37f54",
               "RFC 4231 test case 6");

    tap_is(llm_key_hmac(key, 0, "x", 1, out), -1, "an empty secret fails");

    test_mac();
}


/* the context keyed once gives the one-shot HMAC's answers, call after call */

static void
test_mac(void)
{
    int             i, bad;
    char            hex[2 * LLM_KEY_HASH_LEN + 1], msg[64];
    uint8_t         key[131], out[LLM_KEY_HASH_LEN], ref[LLM_KEY_HASH_LEN];
    llm_key_mac_t  *m;

    m = llm_key_mac_new((const uint8_t *) "Jefe", 4);
    tap_ok(m != NULL, "a keyed context");

    tap_is(llm_key_mac(m, "what do ya want for nothing?", 28, out), 0,
           "it succeeds");
    test_hex(out, sizeof(out), hex);
    tap_is_str(hex, TEST_HASH, "RFC 4231 test case 2");

    tap_is(llm_key_mac(m, "what do ya want for nothing?", 28, out), 0,
           "again");
    test_hex(out, sizeof(out), hex);
    tap_is_str(hex, TEST_HASH, "the same answer the second time");

    llm_key_mac_free(m);

    memset(key, 0xaa, sizeof(key));
    m = llm_key_mac_new(key, sizeof(key));
    bad = 0;

    for (i = 0; i < 1000; i++) {
        snprintf(msg, sizeof(msg), "llmgw_live_%d", i * 7919);
        llm_key_hmac(key, sizeof(key), msg, strlen(msg), ref);

        if (llm_key_mac(m, msg, strlen(msg), out) != 0
            || memcmp(out, ref, sizeof(out)) != 0)
        {
            bad++;
        }
    }

    tap_is(bad, 0, "1000 messages, a block-size-plus key: as HMAC()");

    llm_key_mac_free(m);

    tap_ok(llm_key_mac_new(key, 0) == NULL, "an empty secret: no context");
    llm_key_mac_free(NULL);
}


static void
test_secret(void)
{
    int      n;
    char     text[200];
    uint8_t  out[LLM_KEY_SECRET_MAX];

    memset(text, 'a', 64);
    memcpy(text + 64, "\n", 2);

    n = llm_key_secret_decode(text, strlen(text), out, sizeof(out));
    tap_is(n, 32, "64 hex digits and a newline decode to 32 bytes");
    tap_ok(out[0] == 0xaa && out[31] == 0xaa, "the bytes are right");

    memcpy(text, "  0123456789ABCDEFabcdef", 24);
    memset(text + 24, 'a', 44);
    text[68] = '\0';
    n = llm_key_secret_decode(text, strlen(text), out, sizeof(out));
    tap_ok(n == 33 && out[0] == 0x01 && out[7] == 0xef && out[8] == 0xab,
           "leading spaces, both cases of hex");

    tap_is(llm_key_secret_decode(text + 2, 62, out, sizeof(out)), -1,
           "31 bytes are too short");

    tap_is(llm_key_secret_decode(text + 2, 63, out, sizeof(out)), -1,
           "an odd number of digits");

    memset(text, 'a', 64);
    text[10] = 'g';
    tap_is(llm_key_secret_decode(text, 64, out, sizeof(out)), -1,
           "a non-hex digit");

    text[10] = ' ';
    tap_is(llm_key_secret_decode(text, 64, out, sizeof(out)), -1,
           "a space inside");

    memset(text, 'b', 68);
    tap_is(llm_key_secret_decode(text, 68, out, 33), -1,
           "more than cap bytes");
    tap_is(llm_key_secret_decode(text, 68, out, 34), 34, "exactly cap bytes");

    tap_is(llm_key_secret_decode("", 0, out, sizeof(out)), -1,
           "an empty file");
}


static void
test_parse(void)
{
    int              rc, i;
    char             line[LLM_KEY_LINE_MAX + 16];
    llm_key_entry_t  e;

    tap_is(test_parse_str(LLM_KEY_SNAPSHOT_HEADER, &e), 0, "the header");
    tap_is(test_parse_str("llmgw-keys 2", &e), 0, "the header of version 2");
    tap_is(test_parse_str("", &e), 0, "an empty line");
    tap_is(test_parse_str("# comment", &e), 0, "a comment");

    rc = test_parse_str(TEST_HASH " 17 4 gold acme.corp-1 1790000000"
                        " gpt-4o,claude-3-5-sonnet@20241022", &e);
    tap_is(rc, 1, "a key line");
    tap_ok(e.hash[0] == 0x5b && e.hash[31] == 0x43, "the hash");
    tap_ok(e.key_id == 17 && e.tenant_id == 4, "the ids");
    tap_is_str(e.tier, "gold", "the tier");
    tap_is_str(e.tenant, "acme.corp-1", "the tenant");
    tap_is(e.expires, 1790000000, "the expiry");
    tap_is_str(e.models, "gpt-4o,claude-3-5-sonnet@20241022", "the models");

    rc = test_parse_str(TEST_HASH " 17 4 gold acme 0 *", &e);
    tap_ok(rc == 1 && e.expires == 0 && strcmp(e.models, "*") == 0,
           "no expiry, any model");
    tap_is(e.caps, LLM_KEY_CAP_UNKNOWN, "a line of version 2: caps unknown");

    /* the caps, version 3 */

    rc = test_parse_str(TEST_HASH " 17 4 gold acme 0 * -", &e);
    tap_ok(rc == 1 && e.caps == 0, "caps -: none");
    rc = test_parse_str(TEST_HASH " 17 4 gold acme 0 * t", &e);
    tap_ok(rc == 1 && e.caps == LLM_KEY_CAP_TENANT, "caps t: the tenant's");
    rc = test_parse_str(TEST_HASH " 17 4 gold acme 0 a,b k", &e);
    tap_ok(rc == 1 && e.caps == LLM_KEY_CAP_KEY
           && strcmp(e.models, "a,b") == 0, "caps k: the key's");
    rc = test_parse_str(TEST_HASH " 17 4 gold acme 0 * tk", &e);
    tap_ok(rc == 1 && e.caps == (LLM_KEY_CAP_TENANT | LLM_KEY_CAP_KEY),
           "caps tk: both");

    tap_is(test_parse_str(TEST_HASH " 17 4 gold acme 0 * kt", &e), -1,
           "caps kt: not in order");
    tap_is(test_parse_str(TEST_HASH " 17 4 gold acme 0 * tt", &e), -1,
           "caps tt");
    tap_is(test_parse_str(TEST_HASH " 17 4 gold acme 0 * t-", &e), -1,
           "caps t-");
    tap_is(test_parse_str(TEST_HASH " 17 4 gold acme 0 * x", &e), -1,
           "caps x");
    tap_is(test_parse_str(TEST_HASH " 17 4 gold acme 0 * t k", &e), -1,
           "nine fields");

    rc = test_parse_str(TEST_HASH " 9223372036854775807 1 t a"
                        " 9223372036854775807 *", &e);
    tap_ok(rc == 1 && e.key_id == INT64_MAX && e.expires == INT64_MAX,
           "the largest id and expiry");

    tap_is(test_parse_str(TEST_HASH " 9223372036854775808 1 t a 0 *", &e),
           -1, "an id above INT64_MAX");
    tap_is(test_parse_str(TEST_HASH " 99999999999999999999 1 t a 0 *", &e),
           -1, "an id of 20 digits");
    tap_is(test_parse_str(TEST_HASH " 0 1 t a 0 *", &e), -1, "id 0");
    tap_is(test_parse_str(TEST_HASH " 01 1 t a 0 *", &e), -1,
           "a leading zero");
    tap_is(test_parse_str(TEST_HASH " -1 1 t a 0 *", &e), -1, "a sign");
    tap_is(test_parse_str(TEST_HASH " +1 1 t a 0 *", &e), -1, "a plus sign");
    tap_is(test_parse_str(TEST_HASH " 1x 1 t a 0 *", &e), -1, "a letter");

    /* <expires> */

    tap_is(test_parse_str(TEST_HASH " 1 1 t a 00 *", &e), -1,
           "expires 00");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0123 *", &e), -1,
           "expires with a leading zero");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a -1 *", &e), -1,
           "a negative expiry");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a +5 *", &e), -1,
           "expires with a plus sign");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 1.5 *", &e), -1,
           "a fractional expiry");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0x10 *", &e), -1,
           "a hex expiry");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 9223372036854775808 *", &e),
           -1, "an expiry above INT64_MAX");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a never *", &e), -1,
           "expires \"never\"");

    /* <models> */

    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0 a,,b", &e), -1,
           "models a,,b");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0 a,", &e), -1,
           "models a,");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0 ,a", &e), -1,
           "models ,a");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0 ,", &e), -1, "models ,");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0 *,a", &e), -1,
           "models *,a");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0 a,*", &e), -1,
           "models a,*");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0 **", &e), -1, "models **");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0 gpt;4", &e), -1,
           "a model with a semicolon");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0 caf\xc3\xa9", &e), -1,
           "a non-ASCII model");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0 a\"b", &e), -1,
           "a model with a quote");

    /* the field count and the separators */

    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0", &e), -1, "six fields");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a", &e), -1,
           "five fields, version 1");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0 * b", &e), -1,
           "eight fields, the last not caps");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0 a b", &e), -1,
           "a model with a space");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0 ", &e), -1,
           "empty models");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a  *", &e), -1,
           "empty expires");
    tap_is(test_parse_str(TEST_HASH "  1 1 t a 0 *", &e), -1,
           "a double space");
    tap_is(test_parse_str(" " TEST_HASH " 1 1 t a 0 *", &e), -1,
           "a leading space");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0 * ", &e), -1,
           "a trailing space");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a 0 *\r", &e), -1,
           "a carriage return");
    tap_is(test_parse_str(TEST_HASH "\t1 1 t a 0 *", &e), -1, "a tab");

    tap_is(test_parse_str("5BDCC146BF60754E6A042426089575C75A003F089D2739839"
                          "DEC58B964EC3843 1 1 t a 0 *", &e),
           -1, "uppercase hex");
    tap_is(test_parse_str("5bdcc146bf60754e6a042426089575c75a003f089d2739839"
                          "dec58b964ec384 1 1 t a 0 *", &e),
           -1, "63 hex digits");
    tap_is(test_parse_str("5bdcc146bf60754e6a042426089575c75a003f089d2739839"
                          "dec58b964ec3843a 1 1 t a 0 *", &e),
           -1, "65 hex digits");
    tap_is(test_parse_str("zbdcc146bf60754e6a042426089575c75a003f089d2739839"
                          "dec58b964ec3843 1 1 t a 0 *", &e),
           -1, "a non-hex digit");

    tap_is(test_parse_str(TEST_HASH " 1 1 t/x a 0 *", &e), -1, "a bad tier");
    tap_is(test_parse_str(TEST_HASH " 1 1 t a;b 0 *", &e), -1,
           "a bad tenant");
    tap_is(test_parse_str("llmgw-keys 1", &e), -1, "the version 1 header");
    tap_is(test_parse_str("llmgw-keys 4", &e), -1, "another version");

    /* the longest valid names, and one character more */

    i = snprintf(line, sizeof(line), "%s 1 1 ", TEST_HASH);
    memset(line + i, 't', LLM_KEY_TIER_MAX - 1);
    i += LLM_KEY_TIER_MAX - 1;
    line[i++] = ' ';
    memset(line + i, 'n', LLM_KEY_TENANT_MAX - 1);
    i += LLM_KEY_TENANT_MAX - 1;
    memcpy(line + i, " 0 *", 5);

    tap_is(test_parse_str(line, &e), 1, "the longest names");
    tap_is(strlen(e.tenant), LLM_KEY_TENANT_MAX - 1, "the longest tenant");

    memcpy(line + i, "n 0 *", 6);
    tap_is(test_parse_str(line, &e), -1, "a tenant one character too long");

    i = snprintf(line, sizeof(line), "%s 1 1 ", TEST_HASH);
    memset(line + i, 't', LLM_KEY_TIER_MAX);
    i += LLM_KEY_TIER_MAX;
    memcpy(line + i, " a 0 *", 7);
    tap_is(test_parse_str(line, &e), -1, "a tier one character too long");

    /* the longest model name, the longest list, and one character more */

    i = snprintf(line, sizeof(line), "%s 1 1 t a 0 ", TEST_HASH);
    memset(line + i, 'm', LLM_KEY_MODEL_MAX - 1);
    line[i + LLM_KEY_MODEL_MAX - 1] = '\0';
    tap_is(test_parse_str(line, &e), 1, "a model of %d characters",
           LLM_KEY_MODEL_MAX - 1);

    memset(line + i, 'm', LLM_KEY_MODEL_MAX);
    line[i + LLM_KEY_MODEL_MAX] = '\0';
    tap_is(test_parse_str(line, &e), -1, "a model of %d characters",
           LLM_KEY_MODEL_MAX);

    test_model_list(line + i, LLM_KEY_MODELS_MAX - 1);
    tap_is(test_parse_str(line, &e), 1, "models of %d characters",
           LLM_KEY_MODELS_MAX - 1);
    tap_is(strlen(e.models), LLM_KEY_MODELS_MAX - 1, "all of them kept");

    test_model_list(line + i, LLM_KEY_MODELS_MAX);
    tap_is(test_parse_str(line, &e), -1, "models of %d characters",
           LLM_KEY_MODELS_MAX);

    tap_is(llm_key_parse_line(TEST_HASH " 1 1 t a 0 *\0b",
                              sizeof(TEST_HASH " 1 1 t a 0 *\0b") - 1, &e),
           -1,
           "a NUL inside the line");
}


static void
test_format(void)
{
    int              rc;
    char             buf[LLM_KEY_LINE_MAX + 2];
    size_t           n;
    llm_key_entry_t  e, back;

    rc = test_parse_str(TEST_HASH " 123 45 silver tenant_1 1790000000"
                        " gpt-4o,o1:2024/x+y tk", &e);
    n = llm_key_format_line(&e, buf, sizeof(buf));

    tap_ok(rc == 1 && n > 0 && buf[n - 1] == '\n', "format ends in newline");

    buf[n] = '\0';
    tap_is_str(buf, TEST_HASH " 123 45 silver tenant_1 1790000000"
               " gpt-4o,o1:2024/x+y tk\n",
               "format gives back the parsed line");

    rc = llm_key_parse_line(buf, n - 1, &back);
    tap_ok(rc == 1 && memcmp(&e, &back, sizeof(e)) == 0,
           "parse of format is the identity");

    tap_is(llm_key_format_line(&e, buf, n - 1), 0,
           "format into a buffer one short returns 0");
    tap_is(llm_key_format_line(&e, buf, n), n, "format into an exact buffer");

    e.expires = 0;
    strcpy(e.models, "*");
    n = llm_key_format_line(&e, buf, sizeof(buf));
    buf[n] = '\0';
    tap_is_str(buf, TEST_HASH " 123 45 silver tenant_1 0 * tk\n",
               "no expiry, any model");

    e.caps = LLM_KEY_CAP_KEY;
    n = llm_key_format_line(&e, buf, sizeof(buf));
    tap_ok(n > 2 && memcmp(buf + n - 3, " k\n", 3) == 0, "caps: k");

    e.caps = 0;
    n = llm_key_format_line(&e, buf, sizeof(buf));
    tap_ok(n > 2 && memcmp(buf + n - 3, " -\n", 3) == 0, "caps: none");

    e.caps = LLM_KEY_CAP_UNKNOWN;
    tap_is(llm_key_format_line(&e, buf, sizeof(buf)), 0,
           "unknown caps are not written");
    e.caps = 0;

    memset(&e, 0, sizeof(e));
    memset(e.hash, 0xff, sizeof(e.hash));
    e.key_id = INT64_MAX;
    e.tenant_id = INT64_MAX;
    e.expires = INT64_MAX;
    memset(e.tier, 'T', LLM_KEY_TIER_MAX - 1);
    memset(e.tenant, '-', LLM_KEY_TENANT_MAX - 1);
    test_model_list(e.models, LLM_KEY_MODELS_MAX - 1);

    n = llm_key_format_line(&e, buf, sizeof(buf));
    tap_ok(n > 0 && n <= LLM_KEY_LINE_MAX + 1, "the longest line fits");

    rc = llm_key_parse_line(buf, n - 1, &back);
    tap_ok(rc == 1 && memcmp(&e, &back, sizeof(e)) == 0,
           "the longest line round trips");

    e.tier[LLM_KEY_TIER_MAX - 1] = 'T';
    tap_is(llm_key_format_line(&e, buf, sizeof(buf)), 0,
           "an unterminated tier");

    strcpy(e.tier, "a b");
    tap_is(llm_key_format_line(&e, buf, sizeof(buf)), 0,
           "a tier with a space");

    strcpy(e.tier, "gold");
    e.tenant[0] = '\0';
    tap_is(llm_key_format_line(&e, buf, sizeof(buf)), 0, "an empty tenant");

    strcpy(e.tenant, "acme");
    e.expires = -1;
    tap_is(llm_key_format_line(&e, buf, sizeof(buf)), 0, "a negative expiry");

    e.expires = 0;
    memset(e.models, 'm', sizeof(e.models));
    tap_is(llm_key_format_line(&e, buf, sizeof(buf)), 0,
           "unterminated models");

    e.models[0] = '\0';
    tap_is(llm_key_format_line(&e, buf, sizeof(buf)), 0, "empty models");

    strcpy(e.models, "a,,b");
    tap_is(llm_key_format_line(&e, buf, sizeof(buf)), 0, "models a,,b");

    strcpy(e.models, "*");
    tap_ok(llm_key_format_line(&e, buf, sizeof(buf)) > 0, "models *");

    e.key_id = 0;
    tap_is(llm_key_format_line(&e, buf, sizeof(buf)), 0, "key_id 0");
}


static void
test_names(void)
{
    tap_ok(llm_key_name_valid("A-z_0.9", 7, 8), "all the name characters");
    tap_ok(!llm_key_name_valid("abcdefgh", 8, 8), "max-1 is the longest");
    tap_ok(!llm_key_name_valid("", 0, 8), "empty");
    tap_ok(!llm_key_name_valid("a b", 3, 8), "a space");
    tap_ok(!llm_key_name_valid("caf\xc3\xa9", 5, 8), "non-ASCII");
}


static void
test_models(void)
{
    const char  *list;

    tap_ok(llm_key_models_valid("*", 1), "* is valid");
    tap_ok(llm_key_models_valid("a", 1), "one name");
    tap_ok(llm_key_models_valid("A-z_0.9:/@+", 11),
           "all the model name characters");
    tap_ok(llm_key_models_valid("gpt-4o,gpt-4o", 13),
           "a name twice does no harm");
    tap_ok(!llm_key_models_valid("", 0), "empty");
    tap_ok(!llm_key_models_valid("a,,b", 4), "a,,b");
    tap_ok(!llm_key_models_valid("a,", 2), "a,");
    tap_ok(!llm_key_models_valid(",a", 2), ",a");
    tap_ok(!llm_key_models_valid("*,a", 3), "*,a");
    tap_ok(!llm_key_models_valid("a*", 2), "a*");
    tap_ok(!llm_key_models_valid("a b", 3), "a space");
    tap_ok(!llm_key_models_valid("a\0b", 3), "a NUL");
    tap_ok(!llm_key_models_valid("a=b", 3), "a =");
    tap_ok(!llm_key_models_valid("a\xc3\xa9", 3), "non-ASCII");
    tap_ok(llm_key_models_valid("*x", 1), "only len bytes count");

    list = "gpt-4o,claude-3-5-sonnet@20241022,o1";

    tap_ok(llm_key_model_allowed("*", "gpt-4o", 6), "* allows gpt-4o");
    tap_ok(llm_key_model_allowed("*", "anything/at:all", 15),
           "* allows anything");
    tap_ok(llm_key_model_allowed(list, "gpt-4o", 6), "the first name");
    tap_ok(llm_key_model_allowed(list, "claude-3-5-sonnet@20241022", 26),
           "a middle name");
    tap_ok(llm_key_model_allowed(list, "o1", 2), "the last name");
    tap_ok(llm_key_model_allowed(list, "gpt-4o-mini", 6),
           "only len bytes of the model count");
    tap_ok(!llm_key_model_allowed(list, "gpt-4o-mini", 11),
           "a longer name is another model");
    tap_ok(!llm_key_model_allowed(list, "gpt-4", 5),
           "a prefix is another model");
    tap_ok(!llm_key_model_allowed(list, "o", 1), "a prefix of the last");
    tap_ok(!llm_key_model_allowed(list, "GPT-4o", 6), "case-sensitive");
    tap_ok(!llm_key_model_allowed(list, "gpt-4o,o1", 9),
           "two names are not one");
    tap_ok(!llm_key_model_allowed(list, "", 0), "an empty model");
    tap_ok(!llm_key_model_allowed(list, "*", 1), "* is no name");
    tap_ok(!llm_key_model_allowed("a", "a\0", 2), "a NUL in the model");
}


static void
test_frames(void)
{
    int              type, bad;
    size_t           n, m, used, i;
    uint8_t          buf[LLM_KEY_FRAME_MAX + 8], copy[LLM_KEY_FRAME_MAX + 8];
    uint32_t         count;
    uint64_t         gen;
    llm_key_entry_t  e, back;

    n = llm_key_encode_begin(buf, sizeof(buf), LLM_REC_KEYS_BEGIN,
                             1795968000123ULL, 42);
    tap_is(llm_key_frame_type(buf, n), LLM_REC_KEYS_BEGIN, "a begin frame");
    tap_is(llm_key_decode_begin(buf, n, &type, &gen, &count, &used), 1,
           "decodes");
    tap_ok(type == LLM_REC_KEYS_BEGIN && gen == 1795968000123ULL
           && count == 42 && used == n, "generation and count");
    tap_is(llm_key_decode_begin(buf, n - 1, &type, &gen, &count, &used), 0,
           "one byte short: more needed");
    tap_is(llm_key_encode_begin(buf, sizeof(buf), LLM_REC_KEY, 1, 1), 0,
           "begin refuses another type");

    n = llm_key_encode_begin(buf, sizeof(buf), LLM_REC_KEYS_END, 7, 3);
    tap_ok(llm_key_decode_begin(buf, n, &type, &gen, &count, &used) == 1
           && type == LLM_REC_KEYS_END && gen == 7 && count == 3,
           "an end frame");

    test_parse_str(TEST_HASH " 123 45 silver tenant_1 1790000000"
                   " gpt-4o,o1:2024/x+y t", &e);

    n = llm_key_encode_entry(buf, sizeof(buf), &e);
    tap_ok(n > 0 && llm_key_frame_type(buf, n) == LLM_REC_KEY,
           "a key frame");
    tap_is(llm_key_decode_entry(buf, n, &back, &used), 1, "decodes");
    tap_ok(used == n && memcmp(&e, &back, sizeof(e)) == 0,
           "the entry round trips");

    /* an older accountd's frame: no caps byte */
    memcpy(copy, buf, n - 1);
    copy[3]--;
    tap_ok(llm_key_decode_entry(copy, n - 1, &back, &used) == 1
           && used == n - 1 && back.caps == LLM_KEY_CAP_UNKNOWN
           && strcmp(back.models, e.models) == 0,
           "a frame without caps: caps unknown");

    copy[n - 1] = 0x10;
    memcpy(copy, buf, 4);
    tap_is(llm_key_decode_entry(copy, n, &back, &used), -1,
           "a caps byte with unknown bits");

    /* "silver" sent as "s\0lver": valid up to the NUL, but not as sent */
    memcpy(copy, buf, n);
    copy[4 + 2 + LLM_KEY_HASH_LEN + 3 * 8 + 1 + 1] = '\0';
    tap_is(llm_key_decode_entry(copy, n, &back, &used), -1,
           "a NUL inside the tier");

    bad = 0;

    for (i = 0; i < n; i++) {
        if (llm_key_decode_entry(buf, i, &back, &used) != 0) {
            bad++;
        }
    }

    tap_is(bad, 0, "every truncation asks for more");

    /* every byte of the frame changed to every value: never a crash, and
     * what decodes is valid */

    bad = 0;

    for (i = 0; i < n; i++) {
        for (m = 0; m < 256; m++) {
            memcpy(copy, buf, n);
            copy[i] = (uint8_t) m;

            if (llm_key_decode_entry(copy, n, &back, &used) == 1
                && (!llm_key_models_valid(back.models, strlen(back.models))
                    || back.key_id <= 0 || used > n))
            {
                bad++;
            }
        }
    }

    tap_is(bad, 0, "corrupted frames never decode into invalid entries");

    memset(&e, 0, sizeof(e));
    memset(e.hash, 0xff, sizeof(e.hash));
    e.key_id = INT64_MAX;
    e.tenant_id = INT64_MAX;
    e.expires = INT64_MAX;
    memset(e.tier, 'T', LLM_KEY_TIER_MAX - 1);
    memset(e.tenant, '-', LLM_KEY_TENANT_MAX - 1);
    test_model_list(e.models, LLM_KEY_MODELS_MAX - 1);

    n = llm_key_encode_entry(buf, sizeof(buf), &e);
    tap_ok(n > 0 && n <= LLM_KEY_FRAME_MAX, "the largest entry fits");
    tap_ok(llm_key_decode_entry(buf, n, &back, &used) == 1
           && memcmp(&e, &back, sizeof(e)) == 0, "and round trips");
    tap_is(llm_key_encode_entry(buf, n - 1, &e), 0, "a short buffer: 0");

    strcpy(e.models, "a,,b");
    tap_is(llm_key_encode_entry(buf, sizeof(buf), &e), 0,
           "invalid models are not encoded");
}
