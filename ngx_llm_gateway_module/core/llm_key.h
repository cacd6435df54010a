
/*
 * API keys: their format, their HMAC-SHA256 under the server-side secret,
 * and the key snapshot file that accountd writes from PostgreSQL and nginx
 * loads.  Plain C on OpenSSL's libcrypto, no nginx types, no allocation.
 *
 * A key is LLM_KEY_PREFIX_LIVE or LLM_KEY_PREFIX_TEST, then
 * LLM_KEY_RANDOM_LEN characters of base62 from the OS CSPRNG (190 bits),
 * then LLM_KEY_CHECK_LEN characters of base62 checksum: the first 4 bytes
 * of SHA-256 over the prefix and the random part, read big-endian, as a
 * fixed-width base62 number, most significant digit first.  A key with a
 * wrong checksum is refused without any lookup, and secret scanners match
 * the prefix and the length.
 *
 * The secret file holds the secret as hex (at least 32 bytes once decoded),
 * optionally followed by a newline.
 *
 * The snapshot is text, one key a line, fields separated by one space:
 *
 *     llmgw-keys 3
 *     <hmac, 64 hex> <key_id> <tenant_id> <tier> <tenant name> <expires>
 *         <models> <caps>
 *
 * (one line).  The first line names the format and its version.  Tier and
 * tenant names are [A-Za-z0-9_.-], 1 to 31 and 1 to 63 characters.
 * <expires> is the unix time, in seconds, from which the key no longer
 * works, or 0 for never.  <models> is "*" for any model, or the models the
 * key may call, comma-separated, each [A-Za-z0-9_.:/@+-], 1 to 127
 * characters.  <caps> says which spend caps the key's requests answer to,
 * so that a gateway knows without asking: "-" none, "t" its tenant's, "k"
 * its own, "tk" both.  Lines of version 2, without <caps>, are still read:
 * their caps are unknown, and learned from accountd.  Lines starting with
 * '#' and empty lines are ignored.
 */

#ifndef _LLM_KEY_H_INCLUDED_
#define _LLM_KEY_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


#define LLM_KEY_PREFIX_LIVE       "llmgw_live_"
#define LLM_KEY_PREFIX_TEST       "llmgw_test_"
#define LLM_KEY_PREFIX_LEN        11
#define LLM_KEY_RANDOM_LEN        32
#define LLM_KEY_CHECK_LEN         6
#define LLM_KEY_LEN               (LLM_KEY_PREFIX_LEN + LLM_KEY_RANDOM_LEN    \
                                   + LLM_KEY_CHECK_LEN)
/* how much of a key may be shown: the prefix and 4 random characters */
#define LLM_KEY_DISPLAY_LEN       (LLM_KEY_PREFIX_LEN + 4)

#define LLM_KEY_HASH_LEN          32
#define LLM_KEY_SECRET_MIN        32
#define LLM_KEY_SECRET_MAX        128

#define LLM_KEY_TIER_MAX          32
#define LLM_KEY_TENANT_MAX        64

#define LLM_KEY_MODELS_MAX        1024      /* with its NUL */
#define LLM_KEY_MODEL_MAX         128       /* one name, with its NUL */

#define LLM_KEY_SNAPSHOT_HEADER   "llmgw-keys 3"
#define LLM_KEY_SNAPSHOT_HEADER_2 "llmgw-keys 2"
/* the second line: "# generation <ms>", when the rows were read */
#define LLM_KEY_GENERATION        "# generation "
/* the longest snapshot line, without its newline */
#define LLM_KEY_LINE_MAX          (64 + 1 + 20 + 1 + 20 + 1                  \
                                   + LLM_KEY_TIER_MAX + LLM_KEY_TENANT_MAX    \
                                   + 20 + 1 + LLM_KEY_MODELS_MAX + 3)


/* the caps field: which spend caps apply, if known */
#define LLM_KEY_CAP_TENANT        0x01
#define LLM_KEY_CAP_KEY           0x02
#define LLM_KEY_CAP_UNKNOWN       0x80


typedef struct {
    uint8_t    hash[LLM_KEY_HASH_LEN];
    int64_t    key_id;
    int64_t    tenant_id;
    int64_t    expires;                       /* unix seconds, 0: never */
    char       tier[LLM_KEY_TIER_MAX];        /* NUL-terminated */
    char       tenant[LLM_KEY_TENANT_MAX];    /* NUL-terminated */
    char       models[LLM_KEY_MODELS_MAX];    /* NUL-terminated, "*": any */
    uint8_t    caps;                          /* LLM_KEY_CAP_* */
} llm_key_entry_t;


/* 0 on success, -1 if the CSPRNG failed or cap < LLM_KEY_LEN + 1 */
int llm_key_generate(char *out, size_t cap, int live);

/* 1 if s is one of our keys (prefix, length, alphabet, checksum), else 0 */
int llm_key_well_formed(const char *s, size_t len);

/* 0 on success, -1 on failure */
int llm_key_hmac(const uint8_t *secret, size_t secret_len,
    const char *key, size_t key_len, uint8_t out[LLM_KEY_HASH_LEN]);

/*
 * The same HMAC under one secret, keyed once: OpenSSL's one-shot HMAC()
 * looks the digest up and keys it on every call, several microseconds,
 * most of what a request's authentication costs.  A context is for one
 * process (or thread) at a time.
 */
typedef struct llm_key_mac_s  llm_key_mac_t;

/* NULL on failure */
llm_key_mac_t *llm_key_mac_new(const uint8_t *secret, size_t secret_len);
/* 0 on success, -1 on failure */
int llm_key_mac(llm_key_mac_t *m, const char *key, size_t key_len,
    uint8_t out[LLM_KEY_HASH_LEN]);
void llm_key_mac_free(llm_key_mac_t *m);

/*
 * Decodes the secret file's text (hex, surrounding whitespace allowed).
 * Returns the number of bytes, or -1 if it is not hex or is shorter than
 * LLM_KEY_SECRET_MIN or longer than cap.
 */
int llm_key_secret_decode(const char *text, size_t len, uint8_t *out,
    size_t cap);

/*
 * Parses one snapshot line (without its newline).  Returns 1 for a key,
 * 0 for the header, a comment or an empty line, -1 for anything else.
 */
int llm_key_parse_line(const char *line, size_t len, llm_key_entry_t *e);

/* Formats one line with its newline; returns its length, or 0 if cap is
 * too small or a name is not valid */
size_t llm_key_format_line(const llm_key_entry_t *e, char *buf, size_t cap);

/* 1 if s is a valid tier or tenant name of at most max-1 characters */
int llm_key_name_valid(const char *s, size_t len, size_t max);

/* 1 if s is a valid <models> field: "*" or a comma-separated list */
int llm_key_models_valid(const char *s, size_t len);

/* 1 if the <models> field lets the key call model (len bytes) */
int llm_key_model_allowed(const char *models, const char *model, size_t len);


/*
 * The key set, pushed by accountd to every nginx worker over the records
 * socket after each snapshot rewrite and on each new connection, so that a
 * change reaches running workers without a reload.  Frames share the record
 * framing (llm_record.h): u32 length, u8 version, u8 type, then:
 *
 *     LLM_REC_KEYS_BEGIN   u64 generation, u32 count
 *     LLM_REC_KEY          32 bytes hash, i64 key_id, i64 tenant_id,
 *                          i64 expires, u8 tier length + tier,
 *                          u8 tenant length + tenant,
 *                          u16 models length + models, u8 caps
 *     LLM_REC_KEYS_END     u64 generation, u32 count
 *
 * A set is BEGIN, count KEY frames in ascending memcmp order of their hash,
 * and END; only a whole set replaces the worker's table.  A KEY frame
 * without its last byte (an older accountd) has unknown caps.
 */

#define LLM_KEY_FRAME_MAX         (4 + 2 + LLM_KEY_HASH_LEN + 3 * 8           \
                                   + 1 + LLM_KEY_TIER_MAX                     \
                                   + 1 + LLM_KEY_TENANT_MAX                   \
                                   + 2 + LLM_KEY_MODELS_MAX + 1)


/* the frame's type, or -1 if fewer than 6 bytes are there */
int llm_key_frame_type(const uint8_t *buf, size_t len);

size_t llm_key_encode_begin(uint8_t *buf, size_t cap, int type,
    uint64_t generation, uint32_t count);
size_t llm_key_encode_entry(uint8_t *buf, size_t cap,
    const llm_key_entry_t *e);

/*
 * As llm_record_decode: 1 and *consumed for a whole frame, 0 for more
 * bytes, -1 for a malformed one (names and models are validated).
 */
int llm_key_decode_begin(const uint8_t *buf, size_t len, int *type,
    uint64_t *generation, uint32_t *count, size_t *consumed);
int llm_key_decode_entry(const uint8_t *buf, size_t len, llm_key_entry_t *e,
    size_t *consumed);


#endif /* _LLM_KEY_H_INCLUDED_ */
