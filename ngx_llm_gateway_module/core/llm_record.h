
/*
 * The settle record: what an nginx worker tells accountd about one finished
 * request, and accountd's acknowledgement.  The same codec runs on both
 * sides of the Unix socket.  Plain C, no nginx types, no allocation.
 *
 * Wire format, all integers big-endian:
 *
 *     u32  length of what follows (the payload)
 *     u8   version (LLM_RECORD_VERSION; an ack's LLM_FRAME_VERSION)
 *     u8   type (llm_record_type_e)
 *     u16  http status sent to the client
 *     u32  flags (LLM_REC_F_*)
 *     i64  tenant_id
 *     i64  key_id
 *     u64  input_tokens
 *     u64  output_tokens
 *     u64  cached_input_tokens
 *     u64  cache_write_tokens
 *     u64  reasoning_tokens
 *     u64  reserved_tokens
 *     i64  ts_ms (unix time of completion, milliseconds)
 *     u8   api (llm_api_e)
 *     u8   request_id length, then the bytes
 *     u8   model length, then the bytes
 *     u8   finish_reason length, then the bytes
 *     u8   up_api (llm_api_e: the dialect of the backend that served; 0
 *          when none did)
 *     u8   backend length, then the bytes (the llm_gateway_backend's name)
 *     u8   provider_key length, then the bytes (the name of the provider's
 *          key that backend uses, as the provider's bill names it)
 *     u8   response_id length, then the bytes (the upstream's "id")
 *     u8   upstream_model length, then the bytes (the model the upstream
 *          said made the response)
 *
 * A settle record is written at version 4; one of version 3, from an older
 * nginx, ends after backend and is read without the last three; one of
 * version 2 ends after finish_reason and is read with up_api 0 and no
 * backend.  An acknowledgement (LLM_REC_ACK) is always written and read
 * at version 2, the layout of version 3 without its last two fields, so
 * that an older nginx still reads it; only request_id is meaningful in it.
 * The other frames (the key set, leases, shares) stay at version 2 too
 * (LLM_FRAME_VERSION).
 */

#ifndef _LLM_RECORD_H_INCLUDED_
#define _LLM_RECORD_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


/* the settle record's version; every other frame's is LLM_FRAME_VERSION */
#define LLM_RECORD_VERSION        4
#define LLM_FRAME_VERSION         2

#define LLM_RECORD_ID_MAX         64
#define LLM_RECORD_MODEL_MAX      128
#define LLM_RECORD_FINISH_MAX     32
#define LLM_RECORD_BACKEND_MAX    64
#define LLM_RECORD_UPSTREAM_MAX   64

/* the fixed part of the payload: 1+1+2+4 + 8*9 + 1 */
#define LLM_RECORD_FIXED_LEN      81

/* the largest frame of version 2: an acknowledgement's, an old record's */
#define LLM_RECORD_V2_MAX_FRAME   (4 + LLM_RECORD_FIXED_LEN                  \
                                   + 1 + LLM_RECORD_ID_MAX                    \
                                   + 1 + LLM_RECORD_MODEL_MAX                 \
                                   + 1 + LLM_RECORD_FINISH_MAX)

/* the largest frame of version 3: up_api and backend added */
#define LLM_RECORD_V3_MAX_FRAME   (LLM_RECORD_V2_MAX_FRAME                   \
                                   + 1 + 1 + LLM_RECORD_BACKEND_MAX)

/* the largest frame: a record of version 4, what the upstream said added */
#define LLM_RECORD_MAX_FRAME      (LLM_RECORD_V3_MAX_FRAME                   \
                                   + 1 + LLM_RECORD_BACKEND_MAX               \
                                   + 1 + LLM_RECORD_UPSTREAM_MAX              \
                                   + 1 + LLM_RECORD_UPSTREAM_MAX)


typedef enum {
    LLM_REC_SETTLE = 1,
    LLM_REC_ACK = 2,

    /* the key set, accountd to nginx: see llm_key.h */
    LLM_REC_KEYS_BEGIN = 3,
    LLM_REC_KEY = 4,
    LLM_REC_KEYS_END = 5,

    /* spend caps: a lease asked for, and what accountd granted */
    LLM_REC_LEASE_REQ = 6,
    LLM_REC_LEASE = 7,

    /*
     * Rate limits shared by gateways: a tenant's demand here (in "want",
     * tokens a second), and this gateway's share of its limits (in
     * "granted", parts per million).  The lease frames' layouts.
     */
    LLM_REC_SHARE_REQ = 8,
    LLM_REC_SHARE = 9,

    /* budget a gateway leased and gives back unspent: a request's layout */
    LLM_REC_LEASE_RETURN = 10
} llm_record_type_e;


typedef enum {
    LLM_API_OPENAI = 1,          /* Chat Completions */
    LLM_API_ANTHROPIC = 2,       /* Messages */
    LLM_API_RESPONSES = 3,       /* OpenAI Responses */
    LLM_API_EMBEDDINGS = 4,      /* OpenAI Embeddings */

    /* never in a record: not billed, or answered by the gateway itself */
    LLM_API_COUNT_TOKENS = 5,    /* Messages' count_tokens, passed on */
    LLM_API_MODELS = 6,          /* the key's models, from the config */
    LLM_API_NONE = 7             /* any other path: a 404 */
} llm_api_e;


/* token counts are (partly) the gateway's: see llm_settle_usage() */
#define LLM_REC_F_ESTIMATED       0x0001
/* the response ended early (client abort, upstream died or failed) */
#define LLM_REC_F_PARTIAL         0x0002
/* a usage figure was out of range or not an integer, and was clamped */
#define LLM_REC_F_CLAMPED         0x0004
/* the final usage was reported more than once: the largest counts */
#define LLM_REC_F_REPEATED        0x0008
/* an event was larger than the parser's buffer and was skipped */
#define LLM_REC_F_OVERSIZE        0x0010
/* the upstream reported more than the request could cost: held to it */
#define LLM_REC_F_BOUND           0x0020


typedef struct {
    uint8_t    type;
    uint16_t   status;
    uint32_t   flags;
    int64_t    tenant_id;
    int64_t    key_id;
    uint64_t   input_tokens;
    uint64_t   output_tokens;
    uint64_t   cached_input_tokens;
    uint64_t   cache_write_tokens;
    uint64_t   reasoning_tokens;
    uint64_t   reserved_tokens;
    int64_t    ts_ms;
    uint8_t    api;                  /* the client's dialect */
    uint8_t    up_api;               /* the backend's; 0: no backend */

    uint8_t    request_id_len;
    uint8_t    model_len;
    uint8_t    finish_reason_len;
    uint8_t    backend_len;
    uint8_t    provider_key_len;
    uint8_t    response_id_len;
    uint8_t    upstream_model_len;
    char       request_id[LLM_RECORD_ID_MAX];
    char       model[LLM_RECORD_MODEL_MAX];
    char       finish_reason[LLM_RECORD_FINISH_MAX];
    char       backend[LLM_RECORD_BACKEND_MAX];
    char       provider_key[LLM_RECORD_BACKEND_MAX];
    char       response_id[LLM_RECORD_UPSTREAM_MAX];
    char       upstream_model[LLM_RECORD_UPSTREAM_MAX];
} llm_record_t;


/*
 * Copies a string field into the record, truncated to the field's size.
 * Returns the length stored.
 */
size_t llm_record_set(char *field, uint8_t *field_len, size_t cap,
    const char *s, size_t len);

#define llm_record_set_request_id(rec, s, n)                                  \
    llm_record_set((rec)->request_id, &(rec)->request_id_len,                 \
                   LLM_RECORD_ID_MAX, s, n)
#define llm_record_set_model(rec, s, n)                                       \
    llm_record_set((rec)->model, &(rec)->model_len, LLM_RECORD_MODEL_MAX, s, n)
#define llm_record_set_finish_reason(rec, s, n)                               \
    llm_record_set((rec)->finish_reason, &(rec)->finish_reason_len,           \
                   LLM_RECORD_FINISH_MAX, s, n)
#define llm_record_set_backend(rec, s, n)                                     \
    llm_record_set((rec)->backend, &(rec)->backend_len,                       \
                   LLM_RECORD_BACKEND_MAX, s, n)
#define llm_record_set_provider_key(rec, s, n)                                \
    llm_record_set((rec)->provider_key, &(rec)->provider_key_len,             \
                   LLM_RECORD_BACKEND_MAX, s, n)
#define llm_record_set_response_id(rec, s, n)                                 \
    llm_record_set((rec)->response_id, &(rec)->response_id_len,               \
                   LLM_RECORD_UPSTREAM_MAX, s, n)
#define llm_record_set_upstream_model(rec, s, n)                              \
    llm_record_set((rec)->upstream_model, &(rec)->upstream_model_len,         \
                   LLM_RECORD_UPSTREAM_MAX, s, n)

/*
 * Writes one frame: a settle record at version 4, an acknowledgement at
 * version 2.  Returns its length (at most LLM_RECORD_MAX_FRAME), or 0 if
 * cap is too small or a length is beyond its field.
 */
size_t llm_record_encode(const llm_record_t *rec, uint8_t *buf, size_t cap);

/*
 * Reads one frame from the start of buf.  Returns 1 and sets *consumed
 * when a whole frame was decoded, 0 when more bytes are needed, -1 when
 * the bytes are not a valid frame (the stream cannot be resynchronised:
 * the caller closes the connection).  A settle record of version 2, 3 or 4,
 * an acknowledgement of version 2.
 */
int llm_record_decode(const uint8_t *buf, size_t len, llm_record_t *rec,
    size_t *consumed);

/*
 * 1 if two records carry the same fields, those the wire carries: what a
 * round trip must keep, and what a replay must repeat to be the same record
 */
int llm_record_same(const llm_record_t *a, const llm_record_t *b);


/*
 * A lease of a tenant's budget, or of one key's (key_id > 0: its leases
 * count against its tenant's caps too), in pico-dollars.  nginx asks for
 * want; accountd answers with the grant (0: a cap is spent), what the caps
 * leave after it (-1: no cap), when the binding period begins again, until
 * when the grant may be spent (the end of the shortest capped period), and
 * the prices of the model asked about, in micro-dollars per million tokens
 * (-1: it has none).  A return gives back want, leased for the period
 * that ends at until_ms.  All are frames of their own:
 *
 *     u32 length, u8 version (LLM_FRAME_VERSION), u8 type,
 *     i64 tenant_id, i64 key_id, i64 want, i64 until_ms (request, return)
 *     or i64 granted, i64 remaining, i64 resets_at_ms, i64 until_ms,
 *     i64 prices[4] (answer), then u8 model length and the model.
 */

#define LLM_LEASE_IN              0
#define LLM_LEASE_OUT             1
#define LLM_LEASE_CACHED          2
#define LLM_LEASE_CACHE_WRITE     3

#define LLM_LEASE_MAX_FRAME       (4 + 2 + 8 * 10 + 1 + LLM_RECORD_MODEL_MAX)


typedef struct {
    uint8_t    type;                 /* LLM_REC_LEASE_REQ ... _RETURN */
    int64_t    tenant_id;
    int64_t    key_id;               /* 0: the tenant's own caps */
    int64_t    want;
    int64_t    granted;
    int64_t    remaining;
    int64_t    resets_at_ms;
    int64_t    until_ms;
    int64_t    prices[4];
    uint8_t    model_len;
    char       model[LLM_RECORD_MODEL_MAX];
} llm_lease_t;


size_t llm_record_lease_encode(const llm_lease_t *l, uint8_t *buf, size_t cap);

/* as llm_record_decode(), for the lease frames */
int llm_record_lease_decode(const uint8_t *buf, size_t len, llm_lease_t *l,
    size_t *consumed);


#endif /* _LLM_RECORD_H_INCLUDED_ */
