
/*
 * The settle record codec.  See llm_record.h for the wire format.
 */


#include <string.h>

#include "llm_record.h"


/* the three length bytes of version 2's variable part */
#define LLM_RECORD_MIN_PAYLOAD    (LLM_RECORD_FIXED_LEN + 3)


static uint8_t *llm_record_put_u16(uint8_t *p, uint16_t v);
static uint8_t *llm_record_put_u32(uint8_t *p, uint32_t v);
static uint8_t *llm_record_put_u64(uint8_t *p, uint64_t v);
static uint8_t *llm_record_put_str(uint8_t *p, const char *s, uint8_t len);
static uint16_t llm_record_get_u16(const uint8_t *p);
static uint32_t llm_record_get_u32(const uint8_t *p);
static uint64_t llm_record_get_u64(const uint8_t *p);
static int llm_record_get_str(const uint8_t *buf, size_t *off, size_t end,
    size_t after, char *field, uint8_t *field_len, size_t max);
static int llm_record_api_valid(uint8_t type, uint8_t api);


size_t
llm_record_set(char *field, uint8_t *field_len, size_t cap, const char *s,
    size_t len)
{
    if (cap > UINT8_MAX) {
        cap = UINT8_MAX;
    }

    if (len > cap) {
        len = cap;
    }

    if (len) {
        memcpy(field, s, len);
    }

    *field_len = (uint8_t) len;

    return len;
}


size_t
llm_record_encode(const llm_record_t *rec, uint8_t *buf, size_t cap)
{
    int       settle;
    size_t    plen;
    uint8_t  *p;

    if (rec->request_id_len > LLM_RECORD_ID_MAX
        || rec->model_len > LLM_RECORD_MODEL_MAX
        || rec->finish_reason_len > LLM_RECORD_FINISH_MAX
        || rec->backend_len > LLM_RECORD_BACKEND_MAX
        || rec->provider_key_len > LLM_RECORD_BACKEND_MAX
        || rec->response_id_len > LLM_RECORD_UPSTREAM_MAX
        || rec->upstream_model_len > LLM_RECORD_UPSTREAM_MAX)
    {
        return 0;
    }

    /* an acknowledgement keeps the layout an older nginx reads */
    settle = (rec->type != LLM_REC_ACK);

    plen = LLM_RECORD_MIN_PAYLOAD + rec->request_id_len + rec->model_len
           + rec->finish_reason_len;

    if (settle) {
        plen += 2 + rec->backend_len + 3 + rec->provider_key_len
                + rec->response_id_len + rec->upstream_model_len;
    }

    if (cap < 4 + plen) {
        return 0;
    }

    p = llm_record_put_u32(buf, (uint32_t) plen);

    *p++ = settle ? LLM_RECORD_VERSION : LLM_FRAME_VERSION;
    *p++ = rec->type;
    p = llm_record_put_u16(p, rec->status);
    p = llm_record_put_u32(p, rec->flags);
    p = llm_record_put_u64(p, (uint64_t) rec->tenant_id);
    p = llm_record_put_u64(p, (uint64_t) rec->key_id);
    p = llm_record_put_u64(p, rec->input_tokens);
    p = llm_record_put_u64(p, rec->output_tokens);
    p = llm_record_put_u64(p, rec->cached_input_tokens);
    p = llm_record_put_u64(p, rec->cache_write_tokens);
    p = llm_record_put_u64(p, rec->reasoning_tokens);
    p = llm_record_put_u64(p, rec->reserved_tokens);
    p = llm_record_put_u64(p, (uint64_t) rec->ts_ms);
    *p++ = rec->api;
    p = llm_record_put_str(p, rec->request_id, rec->request_id_len);
    p = llm_record_put_str(p, rec->model, rec->model_len);
    p = llm_record_put_str(p, rec->finish_reason, rec->finish_reason_len);

    if (settle) {
        *p++ = rec->up_api;
        p = llm_record_put_str(p, rec->backend, rec->backend_len);
        p = llm_record_put_str(p, rec->provider_key, rec->provider_key_len);
        p = llm_record_put_str(p, rec->response_id, rec->response_id_len);
        p = llm_record_put_str(p, rec->upstream_model,
                               rec->upstream_model_len);
    }

    return (size_t) (p - buf);
}


int
llm_record_decode(const uint8_t *buf, size_t len, llm_record_t *rec,
    size_t *consumed)
{
    size_t          plen, off, end, tail;
    unsigned        v;
    const uint8_t  *p;

    if (len < 4) {
        return 0;
    }

    plen = llm_record_get_u32(buf);

    if (plen < LLM_RECORD_MIN_PAYLOAD || plen > LLM_RECORD_MAX_FRAME - 4) {
        return -1;
    }

    /*
     * The version and type are checked as soon as they arrive, so that a
     * peer speaking something else is told off before it fills the buffer.
     */

    if (len < 5) {
        return 0;
    }

    v = buf[4];

    if (v < LLM_FRAME_VERSION || v > LLM_RECORD_VERSION) {
        return -1;
    }

    /* the length bytes (and up_api) behind finish_reason */
    tail = (v >= 3 ? 2 : 0) + (v >= 4 ? 3 : 0);

    if (plen < LLM_RECORD_MIN_PAYLOAD + tail
        || (v == 2 && plen > LLM_RECORD_V2_MAX_FRAME - 4)
        || (v == 3 && plen > LLM_RECORD_V3_MAX_FRAME - 4))
    {
        return -1;
    }

    if (len > 5
        && !(buf[5] == LLM_REC_SETTLE || (buf[5] == LLM_REC_ACK && v == 2)))
    {
        return -1;
    }

    end = 4 + plen;

    if (len < end) {
        return 0;
    }

    p = buf + 4;

    memset(rec, 0, sizeof(llm_record_t));

    rec->type = p[1];
    rec->status = llm_record_get_u16(p + 2);
    rec->flags = llm_record_get_u32(p + 4);
    rec->tenant_id = (int64_t) llm_record_get_u64(p + 8);
    rec->key_id = (int64_t) llm_record_get_u64(p + 16);
    rec->input_tokens = llm_record_get_u64(p + 24);
    rec->output_tokens = llm_record_get_u64(p + 32);
    rec->cached_input_tokens = llm_record_get_u64(p + 40);
    rec->cache_write_tokens = llm_record_get_u64(p + 48);
    rec->reasoning_tokens = llm_record_get_u64(p + 56);
    rec->reserved_tokens = llm_record_get_u64(p + 64);
    rec->ts_ms = (int64_t) llm_record_get_u64(p + 72);
    rec->api = p[80];

    if (!llm_record_api_valid(rec->type, rec->api)) {
        return -1;
    }

    off = 4 + LLM_RECORD_FIXED_LEN;

    /*
     * Each length byte is inside the payload (plen >= MIN_PAYLOAD + tail):
     * each string leaves room for the bytes behind it, the lengths of the
     * strings after it and, from version 3, up_api.
     */

    if (llm_record_get_str(buf, &off, end, 2 + tail, rec->request_id,
                           &rec->request_id_len, LLM_RECORD_ID_MAX)
        != 0
        || llm_record_get_str(buf, &off, end, 1 + tail, rec->model,
                              &rec->model_len, LLM_RECORD_MODEL_MAX)
           != 0
        || llm_record_get_str(buf, &off, end, tail,
                              rec->finish_reason, &rec->finish_reason_len,
                              LLM_RECORD_FINISH_MAX)
           != 0)
    {
        return -1;
    }

    if (v >= 3) {
        rec->up_api = buf[off++];

        /* 0: no backend served */
        if (rec->up_api && !llm_record_api_valid(rec->type, rec->up_api)) {
            return -1;
        }

        if (llm_record_get_str(buf, &off, end, v >= 4 ? 3 : 0, rec->backend,
                               &rec->backend_len, LLM_RECORD_BACKEND_MAX)
            != 0)
        {
            return -1;
        }
    }

    if (v >= 4
        && (llm_record_get_str(buf, &off, end, 2, rec->provider_key,
                               &rec->provider_key_len, LLM_RECORD_BACKEND_MAX)
            != 0
            || llm_record_get_str(buf, &off, end, 1, rec->response_id,
                                  &rec->response_id_len,
                                  LLM_RECORD_UPSTREAM_MAX)
               != 0
            || llm_record_get_str(buf, &off, end, 0, rec->upstream_model,
                                  &rec->upstream_model_len,
                                  LLM_RECORD_UPSTREAM_MAX)
               != 0))
    {
        return -1;
    }

    if (off != end) {
        return -1;
    }

    *consumed = end;

    return 1;
}


/*
 * The string at *off, its length byte then its bytes, leaving at least
 * after bytes of the payload for the fields behind it
 */

static int
llm_record_get_str(const uint8_t *buf, size_t *off, size_t end, size_t after,
    char *field, uint8_t *field_len, size_t max)
{
    uint8_t  n;

    n = buf[(*off)++];

    if (n > max || *off + n + after > end) {
        return -1;
    }

    memcpy(field, buf + *off, n);
    *field_len = n;
    *off += n;

    return 0;
}


int
llm_record_same(const llm_record_t *a, const llm_record_t *b)
{
    return a->type == b->type
           && a->status == b->status
           && a->flags == b->flags
           && a->tenant_id == b->tenant_id
           && a->key_id == b->key_id
           && a->input_tokens == b->input_tokens
           && a->output_tokens == b->output_tokens
           && a->cached_input_tokens == b->cached_input_tokens
           && a->cache_write_tokens == b->cache_write_tokens
           && a->reasoning_tokens == b->reasoning_tokens
           && a->reserved_tokens == b->reserved_tokens
           && a->ts_ms == b->ts_ms
           && a->api == b->api
           && a->up_api == b->up_api
           && a->request_id_len == b->request_id_len
           && a->model_len == b->model_len
           && a->finish_reason_len == b->finish_reason_len
           && a->backend_len == b->backend_len
           && memcmp(a->request_id, b->request_id, a->request_id_len) == 0
           && memcmp(a->model, b->model, a->model_len) == 0
           && memcmp(a->finish_reason, b->finish_reason,
                     a->finish_reason_len) == 0
           && memcmp(a->backend, b->backend, a->backend_len) == 0
           && a->provider_key_len == b->provider_key_len
           && a->response_id_len == b->response_id_len
           && a->upstream_model_len == b->upstream_model_len
           && memcmp(a->provider_key, b->provider_key, a->provider_key_len)
              == 0
           && memcmp(a->response_id, b->response_id, a->response_id_len) == 0
           && memcmp(a->upstream_model, b->upstream_model,
                     a->upstream_model_len) == 0;
}


static int
llm_record_api_valid(uint8_t type, uint8_t api)
{
    if (api == LLM_API_OPENAI || api == LLM_API_ANTHROPIC
        || api == LLM_API_RESPONSES || api == LLM_API_EMBEDDINGS)
    {
        return 1;
    }

    /* an acknowledgement carries no api */
    return type == LLM_REC_ACK && api == 0;
}


static uint8_t *
llm_record_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t) (v >> 8);
    p[1] = (uint8_t) v;

    return p + 2;
}


static uint8_t *
llm_record_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t) (v >> 24);
    p[1] = (uint8_t) (v >> 16);
    p[2] = (uint8_t) (v >> 8);
    p[3] = (uint8_t) v;

    return p + 4;
}


static uint8_t *
llm_record_put_u64(uint8_t *p, uint64_t v)
{
    p = llm_record_put_u32(p, (uint32_t) (v >> 32));

    return llm_record_put_u32(p, (uint32_t) v);
}


static uint8_t *
llm_record_put_str(uint8_t *p, const char *s, uint8_t len)
{
    *p++ = len;

    if (len) {
        memcpy(p, s, len);
    }

    return p + len;
}


static uint16_t
llm_record_get_u16(const uint8_t *p)
{
    return (uint16_t) ((p[0] << 8) | p[1]);
}


static uint32_t
llm_record_get_u32(const uint8_t *p)
{
    return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16)
           | ((uint32_t) p[2] << 8) | (uint32_t) p[3];
}


static uint64_t
llm_record_get_u64(const uint8_t *p)
{
    return ((uint64_t) llm_record_get_u32(p) << 32)
           | llm_record_get_u32(p + 4);
}


size_t
llm_record_lease_encode(const llm_lease_t *l, uint8_t *buf, size_t cap)
{
    int       answer;
    size_t    i, len;
    uint8_t  *p;

    if (l->model_len > LLM_RECORD_MODEL_MAX
        || l->type < LLM_REC_LEASE_REQ || l->type > LLM_REC_LEASE_RETURN)
    {
        return 0;
    }

    answer = (l->type == LLM_REC_LEASE || l->type == LLM_REC_SHARE);

    len = 2 + 8 * 2 + (answer ? 8 * 8 : 8 * 2) + 1 + l->model_len;

    if (cap < 4 + len) {
        return 0;
    }

    p = llm_record_put_u32(buf, (uint32_t) len);
    *p++ = LLM_FRAME_VERSION;
    *p++ = l->type;
    p = llm_record_put_u64(p, (uint64_t) l->tenant_id);
    p = llm_record_put_u64(p, (uint64_t) l->key_id);

    if (!answer) {
        p = llm_record_put_u64(p, (uint64_t) l->want);
        p = llm_record_put_u64(p, (uint64_t) l->until_ms);

    } else {
        p = llm_record_put_u64(p, (uint64_t) l->granted);
        p = llm_record_put_u64(p, (uint64_t) l->remaining);
        p = llm_record_put_u64(p, (uint64_t) l->resets_at_ms);
        p = llm_record_put_u64(p, (uint64_t) l->until_ms);

        for (i = 0; i < 4; i++) {
            p = llm_record_put_u64(p, (uint64_t) l->prices[i]);
        }
    }

    *p++ = l->model_len;
    memcpy(p, l->model, l->model_len);

    return 4 + len;
}


int
llm_record_lease_decode(const uint8_t *buf, size_t len, llm_lease_t *l,
    size_t *consumed)
{
    int             answer;
    size_t          i, plen, fixed;
    const uint8_t  *p;

    if (len < 6) {
        return 0;
    }

    plen = llm_record_get_u32(buf);

    if (buf[4] != LLM_FRAME_VERSION
        || buf[5] < LLM_REC_LEASE_REQ || buf[5] > LLM_REC_LEASE_RETURN)
    {
        return -1;
    }

    answer = (buf[5] == LLM_REC_LEASE || buf[5] == LLM_REC_SHARE);
    fixed = 2 + 8 * 2 + (answer ? 8 * 8 : 8 * 2) + 1;

    if (plen < fixed || plen > fixed + LLM_RECORD_MODEL_MAX) {
        return -1;
    }

    if (len < 4 + plen) {
        return 0;
    }

    memset(l, 0, sizeof(llm_lease_t));

    p = buf + 4;
    l->type = p[1];
    l->tenant_id = (int64_t) llm_record_get_u64(p + 2);
    l->key_id = (int64_t) llm_record_get_u64(p + 10);
    p += 18;

    if (!answer) {
        l->want = (int64_t) llm_record_get_u64(p);
        l->until_ms = (int64_t) llm_record_get_u64(p + 8);
        p += 16;

    } else {
        l->granted = (int64_t) llm_record_get_u64(p);
        l->remaining = (int64_t) llm_record_get_u64(p + 8);
        l->resets_at_ms = (int64_t) llm_record_get_u64(p + 16);
        l->until_ms = (int64_t) llm_record_get_u64(p + 24);
        p += 32;

        for (i = 0; i < 4; i++) {
            l->prices[i] = (int64_t) llm_record_get_u64(p);
            p += 8;
        }
    }

    l->model_len = *p++;

    if (fixed + l->model_len != plen) {
        return -1;
    }

    memcpy(l->model, p, l->model_len);

    *consumed = 4 + plen;

    return 1;
}
