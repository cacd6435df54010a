
/*
 * API keys: generation, HMAC and the snapshot line format.  See llm_key.h.
 */


#include <limits.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "llm_key.h"
#include "llm_record.h"


#define LLM_KEY_FIELDS            8

/*
 * 248 is the largest multiple of 62 that fits in a byte: a byte at or
 * above it is thrown away, so that every character is equally likely.
 */
#define LLM_KEY_BASE62_LIMIT      248


static const char  llm_key_base62[] =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";


static int llm_key_check(const char *s, char out[LLM_KEY_CHECK_LEN]);
static int llm_key_is_base62(int c);
static int llm_key_is_name_char(int c);
static int llm_key_is_model_char(int c);
static int llm_key_hex_value(int c);
static int llm_key_hex_lower(int c);
static int llm_key_parse_int(const char *s, size_t len, int64_t *out);
static int llm_key_parse_id(const char *s, size_t len, int64_t *out);
static int llm_key_parse_caps(const char *s, size_t len, uint8_t *out);
static size_t llm_key_put_id(char *p, int64_t v);


int
llm_key_generate(char *out, size_t cap, int live)
{
    size_t   n, i;
    uint8_t  rnd[64];

    if (cap < LLM_KEY_LEN + 1) {
        return -1;
    }

    memcpy(out, live ? LLM_KEY_PREFIX_LIVE : LLM_KEY_PREFIX_TEST,
           LLM_KEY_PREFIX_LEN);

    n = LLM_KEY_PREFIX_LEN;
    i = sizeof(rnd);

    while (n < LLM_KEY_PREFIX_LEN + LLM_KEY_RANDOM_LEN) {

        if (i == sizeof(rnd)) {
            if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
                OPENSSL_cleanse(rnd, sizeof(rnd));
                OPENSSL_cleanse(out, n);
                return -1;
            }

            i = 0;
        }

        if (rnd[i] < LLM_KEY_BASE62_LIMIT) {
            out[n++] = llm_key_base62[rnd[i] % 62];
        }

        i++;
    }

    OPENSSL_cleanse(rnd, sizeof(rnd));

    if (llm_key_check(out, out + n) != 0) {
        OPENSSL_cleanse(out, n);
        return -1;
    }

    out[LLM_KEY_LEN] = '\0';

    return 0;
}


int
llm_key_well_formed(const char *s, size_t len)
{
    char    check[LLM_KEY_CHECK_LEN];
    size_t  i;

    if (len != LLM_KEY_LEN) {
        return 0;
    }

    if (memcmp(s, LLM_KEY_PREFIX_LIVE, LLM_KEY_PREFIX_LEN) != 0
        && memcmp(s, LLM_KEY_PREFIX_TEST, LLM_KEY_PREFIX_LEN) != 0)
    {
        return 0;
    }

    for (i = LLM_KEY_PREFIX_LEN; i < len; i++) {
        if (!llm_key_is_base62((unsigned char) s[i])) {
            return 0;
        }
    }

    if (llm_key_check(s, check) != 0) {
        return 0;
    }

    return memcmp(check, s + LLM_KEY_PREFIX_LEN + LLM_KEY_RANDOM_LEN,
                  LLM_KEY_CHECK_LEN) == 0;
}


int
llm_key_hmac(const uint8_t *secret, size_t secret_len, const char *key,
    size_t key_len, uint8_t out[LLM_KEY_HASH_LEN])
{
    unsigned int  n;

    if (secret_len == 0 || secret_len > INT_MAX) {
        return -1;
    }

    n = 0;

    if (HMAC(EVP_sha256(), secret, (int) secret_len,
             (const unsigned char *) key, key_len, out, &n)
        == NULL)
    {
        return -1;
    }

    return n == LLM_KEY_HASH_LEN ? 0 : -1;
}


static EVP_MD  *llm_key_sha256;


struct llm_key_mac_s {
    EVP_MAC      *mac;
    EVP_MAC_CTX  *ctx;
};


llm_key_mac_t *
llm_key_mac_new(const uint8_t *secret, size_t secret_len)
{
    char           digest[] = "SHA256";
    OSSL_PARAM     params[2];
    llm_key_mac_t  *m;

    if (secret_len == 0) {
        return NULL;
    }

    m = OPENSSL_zalloc(sizeof(llm_key_mac_t));
    if (m == NULL) {
        return NULL;
    }

    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
                                                 digest, 0);
    params[1] = OSSL_PARAM_construct_end();

    m->mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    m->ctx = m->mac ? EVP_MAC_CTX_new(m->mac) : NULL;

    if (m->ctx == NULL
        || EVP_MAC_init(m->ctx, secret, secret_len, params) != 1)
    {
        llm_key_mac_free(m);
        return NULL;
    }

    return m;
}


int
llm_key_mac(llm_key_mac_t *m, const char *key, size_t key_len,
    uint8_t out[LLM_KEY_HASH_LEN])
{
    size_t  n;

    /* without a key, init starts again from the keyed state */
    if (EVP_MAC_init(m->ctx, NULL, 0, NULL) != 1
        || EVP_MAC_update(m->ctx, (const unsigned char *) key, key_len) != 1
        || EVP_MAC_final(m->ctx, out, &n, LLM_KEY_HASH_LEN) != 1)
    {
        return -1;
    }

    return n == LLM_KEY_HASH_LEN ? 0 : -1;
}


void
llm_key_mac_free(llm_key_mac_t *m)
{
    if (m == NULL) {
        return;
    }

    EVP_MAC_CTX_free(m->ctx);
    EVP_MAC_free(m->mac);
    OPENSSL_free(m);
}


int
llm_key_secret_decode(const char *text, size_t len, uint8_t *out, size_t cap)
{
    int     hi, lo;
    size_t  i, n;

    while (len && (text[len - 1] == ' ' || text[len - 1] == '\t'
                   || text[len - 1] == '\n' || text[len - 1] == '\r'))
    {
        len--;
    }

    i = 0;

    while (i < len && (text[i] == ' ' || text[i] == '\t'
                       || text[i] == '\n' || text[i] == '\r'))
    {
        i++;
    }

    if ((len - i) % 2 || (len - i) / 2 < LLM_KEY_SECRET_MIN
        || (len - i) / 2 > cap)
    {
        return -1;
    }

    for (n = 0; i < len; i += 2) {
        hi = llm_key_hex_value((unsigned char) text[i]);
        lo = llm_key_hex_value((unsigned char) text[i + 1]);

        if (hi < 0 || lo < 0) {
            OPENSSL_cleanse(out, n);
            return -1;
        }

        out[n++] = (uint8_t) (hi << 4 | lo);
    }

    return (int) n;
}


int
llm_key_parse_line(const char *line, size_t len, llm_key_entry_t *e)
{
    int          i, hi, lo;
    size_t       j, flen[LLM_KEY_FIELDS];
    const char  *f[LLM_KEY_FIELDS], *p, *last, *sp;

    if (len == 0 || line[0] == '#') {
        return 0;
    }

    if ((len == sizeof(LLM_KEY_SNAPSHOT_HEADER) - 1
         && memcmp(line, LLM_KEY_SNAPSHOT_HEADER, len) == 0)
        || (len == sizeof(LLM_KEY_SNAPSHOT_HEADER_2) - 1
            && memcmp(line, LLM_KEY_SNAPSHOT_HEADER_2, len) == 0))
    {
        return 0;
    }

    if (len > LLM_KEY_LINE_MAX) {
        return -1;
    }

    p = line;
    last = line + len;

    /* seven fields (version 2) or eight */
    for (i = 0; i < LLM_KEY_FIELDS; i++) {
        sp = memchr(p, ' ', (size_t) (last - p));

        if (sp == NULL) {
            sp = last;

        } else if (i == LLM_KEY_FIELDS - 1) {
            return -1;
        }

        f[i] = p;
        flen[i] = (size_t) (sp - p);

        /* an empty field is a doubled or a leading space */
        if (flen[i] == 0) {
            return -1;
        }

        p = sp + 1;

        if (sp == last) {
            i++;
            break;
        }
    }

    if (i < LLM_KEY_FIELDS - 1) {
        return -1;
    }

    memset(e, 0, sizeof(llm_key_entry_t));

    if (flen[0] != 2 * LLM_KEY_HASH_LEN) {
        return -1;
    }

    /* lowercase only: one key, one spelling */

    for (j = 0; j < LLM_KEY_HASH_LEN; j++) {
        hi = llm_key_hex_lower((unsigned char) f[0][2 * j]);
        lo = llm_key_hex_lower((unsigned char) f[0][2 * j + 1]);

        if (hi < 0 || lo < 0) {
            return -1;
        }

        e->hash[j] = (uint8_t) (hi << 4 | lo);
    }

    if (llm_key_parse_id(f[1], flen[1], &e->key_id) != 0
        || llm_key_parse_id(f[2], flen[2], &e->tenant_id) != 0)
    {
        return -1;
    }

    if (!llm_key_name_valid(f[3], flen[3], LLM_KEY_TIER_MAX)
        || !llm_key_name_valid(f[4], flen[4], LLM_KEY_TENANT_MAX))
    {
        return -1;
    }

    if (llm_key_parse_int(f[5], flen[5], &e->expires) != 0
        || !llm_key_models_valid(f[6], flen[6]))
    {
        return -1;
    }

    memcpy(e->tier, f[3], flen[3]);
    e->tier[flen[3]] = '\0';
    memcpy(e->tenant, f[4], flen[4]);
    e->tenant[flen[4]] = '\0';
    memcpy(e->models, f[6], flen[6]);
    e->models[flen[6]] = '\0';

    if (i < LLM_KEY_FIELDS) {
        e->caps = LLM_KEY_CAP_UNKNOWN;
        return 1;
    }

    return llm_key_parse_caps(f[7], flen[7], &e->caps) == 0 ? 1 : -1;
}


size_t
llm_key_format_line(const llm_key_entry_t *e, char *buf, size_t cap)
{
    char          line[LLM_KEY_LINE_MAX + 1];
    char         *p;
    size_t        i, tier_len, tenant_len, models_len;
    static char   hex[] = "0123456789abcdef";

    tier_len = strnlen(e->tier, LLM_KEY_TIER_MAX);
    tenant_len = strnlen(e->tenant, LLM_KEY_TENANT_MAX);
    models_len = strnlen(e->models, LLM_KEY_MODELS_MAX);

    if (!llm_key_name_valid(e->tier, tier_len, LLM_KEY_TIER_MAX)
        || !llm_key_name_valid(e->tenant, tenant_len, LLM_KEY_TENANT_MAX)
        || !llm_key_models_valid(e->models, models_len))
    {
        return 0;
    }

    /* the parser takes only positive ids: write nothing it would refuse */
    if (e->key_id <= 0 || e->tenant_id <= 0 || e->expires < 0) {
        return 0;
    }

    p = line;

    for (i = 0; i < LLM_KEY_HASH_LEN; i++) {
        *p++ = hex[e->hash[i] >> 4];
        *p++ = hex[e->hash[i] & 0x0f];
    }

    *p++ = ' ';
    p += llm_key_put_id(p, e->key_id);
    *p++ = ' ';
    p += llm_key_put_id(p, e->tenant_id);
    *p++ = ' ';
    memcpy(p, e->tier, tier_len);
    p += tier_len;
    *p++ = ' ';
    memcpy(p, e->tenant, tenant_len);
    p += tenant_len;
    *p++ = ' ';
    p += llm_key_put_id(p, e->expires);
    *p++ = ' ';
    memcpy(p, e->models, models_len);
    p += models_len;
    *p++ = ' ';

    if (e->caps & LLM_KEY_CAP_UNKNOWN) {
        return 0;
    }

    if (e->caps == 0) {
        *p++ = '-';
    }

    if (e->caps & LLM_KEY_CAP_TENANT) {
        *p++ = 't';
    }

    if (e->caps & LLM_KEY_CAP_KEY) {
        *p++ = 'k';
    }

    *p++ = '\n';

    if ((size_t) (p - line) > cap) {
        return 0;
    }

    memcpy(buf, line, (size_t) (p - line));

    return (size_t) (p - line);
}


int
llm_key_name_valid(const char *s, size_t len, size_t max)
{
    size_t  i;

    if (len == 0 || len + 1 > max) {
        return 0;
    }

    for (i = 0; i < len; i++) {
        if (!llm_key_is_name_char((unsigned char) s[i])) {
            return 0;
        }
    }

    return 1;
}


int
llm_key_models_valid(const char *s, size_t len)
{
    size_t  i, n;

    if (len == 0 || len + 1 > LLM_KEY_MODELS_MAX) {
        return 0;
    }

    if (len == 1 && s[0] == '*') {
        return 1;
    }

    n = 0;

    for (i = 0; i < len; i++) {

        if (s[i] == ',') {
            /* an empty name: a leading, doubled or trailing comma */
            if (n == 0) {
                return 0;
            }

            n = 0;
            continue;
        }

        if (!llm_key_is_model_char((unsigned char) s[i])) {
            return 0;
        }

        if (++n + 1 > LLM_KEY_MODEL_MAX) {
            return 0;
        }
    }

    return n != 0;
}


int
llm_key_model_allowed(const char *models, const char *model, size_t len)
{
    const char  *p, *end;

    if (models[0] == '*' && models[1] == '\0') {
        return 1;
    }

    /* no listed name is empty, and an empty, invalid, list allows nothing */
    if (len == 0) {
        return 0;
    }

    p = models;

    for ( ;; ) {
        end = strchr(p, ',');

        if (end == NULL) {
            end = p + strlen(p);
        }

        if ((size_t) (end - p) == len && memcmp(p, model, len) == 0) {
            return 1;
        }

        if (*end == '\0') {
            return 0;
        }

        p = end + 1;
    }
}


/*
 * The checksum: the first 4 bytes of SHA-256 over the prefix and the
 * random part, read as a big-endian number, in LLM_KEY_CHECK_LEN base62
 * digits, the most significant first (62^6 > 2^32, so it always fits).
 */

static int
llm_key_check(const char *s, char out[LLM_KEY_CHECK_LEN])
{
    int            i;
    uint32_t       v;
    unsigned int   n;
    unsigned char  md[EVP_MAX_MD_SIZE];

    /*
     * Fetched once: EVP_sha256() makes OpenSSL 3 look the implementation
     * up on every digest.  A process is single-threaded here.
     */
    if (llm_key_sha256 == NULL) {
        llm_key_sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);

        if (llm_key_sha256 == NULL) {
            return -1;
        }
    }

    if (EVP_Digest(s, LLM_KEY_PREFIX_LEN + LLM_KEY_RANDOM_LEN, md, &n,
                   llm_key_sha256, NULL)
        != 1)
    {
        return -1;
    }

    v = (uint32_t) md[0] << 24 | (uint32_t) md[1] << 16
        | (uint32_t) md[2] << 8 | md[3];

    OPENSSL_cleanse(md, sizeof(md));

    for (i = LLM_KEY_CHECK_LEN - 1; i >= 0; i--) {
        out[i] = llm_key_base62[v % 62];
        v /= 62;
    }

    return 0;
}


static int
llm_key_is_base62(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z')
           || (c >= 'a' && c <= 'z');
}


static int
llm_key_is_name_char(int c)
{
    return llm_key_is_base62(c) || c == '_' || c == '.' || c == '-';
}


static int
llm_key_is_model_char(int c)
{
    return llm_key_is_name_char(c) || c == ':' || c == '/' || c == '@'
           || c == '+';
}


static int
llm_key_hex_value(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }

    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }

    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }

    return -1;
}


static int
llm_key_hex_lower(int c)
{
    return (c >= 'A' && c <= 'F') ? -1 : llm_key_hex_value(c);
}


/* a non-negative decimal int64 without sign or leading zeros */

static int
llm_key_parse_int(const char *s, size_t len, int64_t *out)
{
    if (len == 1 && s[0] == '0') {
        *out = 0;
        return 0;
    }

    return llm_key_parse_id(s, len, out);
}


/* a positive decimal int64 without sign or leading zeros */

static int
llm_key_parse_id(const char *s, size_t len, int64_t *out)
{
    size_t    i;
    uint64_t  v;

    if (len == 0 || len > 19 || s[0] == '0') {
        return -1;
    }

    v = 0;

    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }

        v = v * 10 + (uint64_t) (s[i] - '0');
    }

    /* 19 digits cannot overflow a uint64_t, but can exceed INT64_MAX */
    if (v > INT64_MAX) {
        return -1;
    }

    *out = (int64_t) v;

    return 0;
}


static size_t
llm_key_put_id(char *p, int64_t v)
{
    char      tmp[20];
    size_t    n, i;
    uint64_t  u;

    u = (uint64_t) v;
    n = 0;

    do {
        tmp[n++] = (char) ('0' + u % 10);
        u /= 10;
    } while (u);

    for (i = 0; i < n; i++) {
        p[i] = tmp[n - 1 - i];
    }

    return n;
}


/*
 * The key-set frames.  Integers are big-endian, as in llm_record.c; the
 * payload starts after the u32 length with the version and the type.
 */

#define LLM_KEY_BEGIN_LEN         (2 + 8 + 4)


static uint8_t *
llm_key_put_u64(uint8_t *p, uint64_t v)
{
    int  i;

    for (i = 7; i >= 0; i--) {
        *p++ = (uint8_t) (v >> (8 * i));
    }

    return p;
}


static uint64_t
llm_key_get_u64(const uint8_t *p)
{
    int       i;
    uint64_t  v;

    v = 0;

    for (i = 0; i < 8; i++) {
        v = v << 8 | p[i];
    }

    return v;
}


static void
llm_key_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t) (v >> 24);
    p[1] = (uint8_t) (v >> 16);
    p[2] = (uint8_t) (v >> 8);
    p[3] = (uint8_t) v;
}


static uint32_t
llm_key_get_u32(const uint8_t *p)
{
    return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16
           | (uint32_t) p[2] << 8 | p[3];
}


int
llm_key_frame_type(const uint8_t *buf, size_t len)
{
    return len < 6 ? -1 : buf[5];
}


size_t
llm_key_encode_begin(uint8_t *buf, size_t cap, int type, uint64_t generation,
    uint32_t count)
{
    uint8_t  *p;

    if (cap < 4 + LLM_KEY_BEGIN_LEN
        || (type != LLM_REC_KEYS_BEGIN && type != LLM_REC_KEYS_END))
    {
        return 0;
    }

    llm_key_put_u32(buf, LLM_KEY_BEGIN_LEN);

    p = buf + 4;
    *p++ = LLM_FRAME_VERSION;
    *p++ = (uint8_t) type;
    p = llm_key_put_u64(p, generation);
    llm_key_put_u32(p, count);

    return 4 + LLM_KEY_BEGIN_LEN;
}


size_t
llm_key_encode_entry(uint8_t *buf, size_t cap, const llm_key_entry_t *e)
{
    size_t    tier_len, tenant_len, models_len, len;
    uint8_t  *p;

    tier_len = strnlen(e->tier, LLM_KEY_TIER_MAX);
    tenant_len = strnlen(e->tenant, LLM_KEY_TENANT_MAX);
    models_len = strnlen(e->models, LLM_KEY_MODELS_MAX);

    if (!llm_key_name_valid(e->tier, tier_len, LLM_KEY_TIER_MAX)
        || !llm_key_name_valid(e->tenant, tenant_len, LLM_KEY_TENANT_MAX)
        || !llm_key_models_valid(e->models, models_len)
        || e->key_id <= 0 || e->tenant_id <= 0 || e->expires < 0)
    {
        return 0;
    }

    len = 2 + LLM_KEY_HASH_LEN + 3 * 8 + 1 + tier_len + 1 + tenant_len
          + 2 + models_len + 1;

    if (cap < 4 + len) {
        return 0;
    }

    llm_key_put_u32(buf, (uint32_t) len);

    p = buf + 4;
    *p++ = LLM_FRAME_VERSION;
    *p++ = LLM_REC_KEY;
    memcpy(p, e->hash, LLM_KEY_HASH_LEN);
    p += LLM_KEY_HASH_LEN;
    p = llm_key_put_u64(p, (uint64_t) e->key_id);
    p = llm_key_put_u64(p, (uint64_t) e->tenant_id);
    p = llm_key_put_u64(p, (uint64_t) e->expires);
    *p++ = (uint8_t) tier_len;
    memcpy(p, e->tier, tier_len);
    p += tier_len;
    *p++ = (uint8_t) tenant_len;
    memcpy(p, e->tenant, tenant_len);
    p += tenant_len;
    *p++ = (uint8_t) (models_len >> 8);
    *p++ = (uint8_t) models_len;
    memcpy(p, e->models, models_len);
    p += models_len;
    *p = e->caps;

    return 4 + len;
}


/* the frame's whole length if it is all there, 0 if not, -1 if too long */

static int
llm_key_frame_len(const uint8_t *buf, size_t len, size_t *frame)
{
    uint32_t  n;

    if (len < 4) {
        return 0;
    }

    n = llm_key_get_u32(buf);

    if (n < 2 || n > LLM_KEY_FRAME_MAX - 4) {
        return -1;
    }

    if (len < 4 + (size_t) n) {
        return 0;
    }

    *frame = 4 + (size_t) n;

    return 1;
}


int
llm_key_decode_begin(const uint8_t *buf, size_t len, int *type,
    uint64_t *generation, uint32_t *count, size_t *consumed)
{
    int     rc;
    size_t  frame;

    rc = llm_key_frame_len(buf, len, &frame);
    if (rc != 1) {
        return rc;
    }

    if (frame != 4 + LLM_KEY_BEGIN_LEN || buf[4] != LLM_FRAME_VERSION
        || (buf[5] != LLM_REC_KEYS_BEGIN && buf[5] != LLM_REC_KEYS_END))
    {
        return -1;
    }

    *type = buf[5];
    *generation = llm_key_get_u64(buf + 6);
    *count = llm_key_get_u32(buf + 14);
    *consumed = frame;

    return 1;
}


int
llm_key_decode_entry(const uint8_t *buf, size_t len, llm_key_entry_t *e,
    size_t *consumed)
{
    int             rc;
    size_t          frame, n, tier_len, tenant_len;
    const uint8_t  *p, *last;

    rc = llm_key_frame_len(buf, len, &frame);
    if (rc != 1) {
        return rc;
    }

    if (buf[4] != LLM_FRAME_VERSION || buf[5] != LLM_REC_KEY
        || frame < 6 + LLM_KEY_HASH_LEN + 3 * 8 + 1 + 1 + 2)
    {
        return -1;
    }

    memset(e, 0, sizeof(llm_key_entry_t));

    p = buf + 6;
    last = buf + frame;

    memcpy(e->hash, p, LLM_KEY_HASH_LEN);
    p += LLM_KEY_HASH_LEN;
    e->key_id = (int64_t) llm_key_get_u64(p);
    e->tenant_id = (int64_t) llm_key_get_u64(p + 8);
    e->expires = (int64_t) llm_key_get_u64(p + 16);
    p += 24;

    if (e->key_id <= 0 || e->tenant_id <= 0 || e->expires < 0) {
        return -1;
    }

    tier_len = *p++;
    if (tier_len >= LLM_KEY_TIER_MAX || (size_t) (last - p) < tier_len + 1) {
        return -1;
    }

    memcpy(e->tier, p, tier_len);
    p += tier_len;

    tenant_len = *p++;
    if (tenant_len >= LLM_KEY_TENANT_MAX
        || (size_t) (last - p) < tenant_len + 2)
    {
        return -1;
    }

    memcpy(e->tenant, p, tenant_len);
    p += tenant_len;

    n = (size_t) p[0] << 8 | p[1];
    p += 2;

    if (n >= LLM_KEY_MODELS_MAX
        || ((size_t) (last - p) != n && (size_t) (last - p) != n + 1))
    {
        return -1;
    }

    memcpy(e->models, p, n);

    e->caps = ((size_t) (last - p) == n) ? LLM_KEY_CAP_UNKNOWN : p[n];

    if (e->caps & ~(LLM_KEY_CAP_TENANT | LLM_KEY_CAP_KEY | LLM_KEY_CAP_UNKNOWN))
    {
        return -1;
    }

    /* by the lengths sent: a NUL would hide what follows it */
    if (!llm_key_name_valid(e->tier, tier_len, LLM_KEY_TIER_MAX)
        || !llm_key_name_valid(e->tenant, tenant_len, LLM_KEY_TENANT_MAX)
        || !llm_key_models_valid(e->models, n))
    {
        return -1;
    }

    *consumed = frame;

    return 1;
}


/* "-", "t", "k" or "tk" */

static int
llm_key_parse_caps(const char *s, size_t len, uint8_t *out)
{
    if (len == 1 && s[0] == '-') {
        *out = 0;
        return 0;
    }

    *out = 0;

    if (len > 0 && s[0] == 't') {
        *out |= LLM_KEY_CAP_TENANT;
        s++;
        len--;
    }

    if (len > 0 && s[0] == 'k') {
        *out |= LLM_KEY_CAP_KEY;
        s++;
        len--;
    }

    return (len == 0 && *out != 0) ? 0 : -1;
}
