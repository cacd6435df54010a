
/*
 * libFuzzer target for the usage extractor.  The first byte chooses the
 * API (bits 0-1: OpenAI, Anthropic, Responses, OpenAI with the usage
 * chunk cut), a small event buffer (bit 2) and where to split the rest
 * (bits 3-7, in 32nds of it).  The rest is fed whole, in two parts, a byte
 * at a time, and event by event (yield), which must all give the same
 * usage, within range; then it is read as a JSON body (and as an
 * embeddings list, and its last bytes as the end of one), and each is
 * settled every way.  Through the filter that cuts the usage chunk, what
 * comes out must read the same but for the usage, and, without the cut,
 * be the input.  Every feed and filter runs the oracle beside it (the
 * parser before its scans were made faster, t/sse_ref.c), which must
 * consume the same, hold the same state and read the same usage, to the
 * last flag and byte, after every call; the JSON reader runs the
 * oracle's, which parsed every body with cJSON, and must read the same.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm_settle.h"
#include "../t/sse_ref.h"

#include "../t/sse_ref.c"


#define min(a, b)  ((a) < (b) ? (a) : (b))


#define FUZZ_BUF_SIZE   4096
#define FUZZ_SMALL_BUF  64


static void fuzz_feed(llm_api_e api, size_t cap, const char *s, size_t len,
    size_t split, size_t step, int yield, llm_usage_t *u);
static void fuzz_settle(const llm_usage_t *u, const char *how);
static void fuzz_check(const llm_usage_t *u, const char *how);
static void fuzz_same(const llm_usage_t *a, const llm_usage_t *b,
    const char *how);
static void fuzz_twin(const llm_sse_t *p, const llm_sse_t *r,
    const char *how);
static void fuzz_json(llm_api_e api, const char *s, size_t len,
    const llm_usage_t *u, int rc, const char *how);
static void fuzz_fail(const char *how, const char *what);
static void fuzz_filter(size_t cap, const char *s, size_t len, size_t split,
    int strip, const llm_usage_t *whole);
static int fuzz_out(void *data, const char *p, size_t len);


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int           rc;
    size_t        len, split, cap;
    llm_api_e     api;
    const char   *s;
    llm_usage_t   whole, part, byte, event, json;

    static const llm_api_e  apis[] = {
        LLM_API_OPENAI, LLM_API_ANTHROPIC, LLM_API_RESPONSES, LLM_API_OPENAI
    };

    if (size == 0) {
        return 0;
    }

    api = apis[data[0] & 0x03];
    cap = (data[0] & 0x04) ? FUZZ_SMALL_BUF : FUZZ_BUF_SIZE;

    s = (const char *) data + 1;
    len = size - 1;
    split = len * (data[0] >> 3) / 32;

    fuzz_feed(api, cap, s, len, len, 0, 0, &whole);
    fuzz_check(&whole, "whole");
    fuzz_settle(&whole, "whole");

    fuzz_feed(api, cap, s, len, split, 0, 0, &part);
    fuzz_same(&whole, &part, "split in two");

    fuzz_feed(api, cap, s, len, 0, 1, 0, &byte);
    fuzz_same(&whole, &byte, "one byte at a time");

    fuzz_feed(api, cap, s, len, split, 0, 1, &event);
    fuzz_same(&whole, &event, "event by event");

    fuzz_filter(cap, s, len, split, (data[0] & 0x03) == 3, &whole);

    rc = llm_sse_usage_from_json(api, s, len, &json);
    fuzz_json(api, s, len, &json, rc, "json");
    fuzz_check(&json, "json");
    fuzz_settle(&json, "json");

    if (rc != (int) json.have_usage) {
        fuzz_fail("json", "the return value is not have_usage");
    }

    /* the end of an embeddings list: its input alone, and whole */
    rc = llm_sse_usage_from_json(LLM_API_EMBEDDINGS, s, len, &json);
    fuzz_json(LLM_API_EMBEDDINGS, s, len, &json, rc, "embeddings");
    fuzz_check(&json, "embeddings");

    if (rc != (int) json.have_usage || json.output_tokens != 0) {
        fuzz_fail("embeddings", "an output, or the wrong return value");
    }

    rc = llm_sse_usage_from_tail(LLM_API_EMBEDDINGS,
                                 s + len - min(len, LLM_SSE_TAIL_MAX),
                                 min(len, LLM_SSE_TAIL_MAX), &json);
    fuzz_check(&json, "tail");
    fuzz_settle(&json, "tail");

    if (rc != (int) json.have_usage || json.output_tokens != 0
        || (rc && !json.done))
    {
        fuzz_fail("tail", "an output, or a usage not whole");
    }

    return 0;
}


/* step 0: in two parts at split; otherwise step bytes at a time */

static void
fuzz_feed(llm_api_e api, size_t cap, const char *s, size_t len, size_t split,
    size_t step, int yield, llm_usage_t *u)
{
    char       *buf, *rbuf;
    size_t      off, n, used;
    llm_sse_t   p, r;

    /* exactly cap bytes, so that the sanitizer sees an overflow */

    buf = malloc(cap);
    rbuf = malloc(cap);
    if (buf == NULL || rbuf == NULL) {
        abort();
    }

    llm_sse_init(&p, api, buf, cap);
    llm_sse_ref_init(&r, api, rbuf, cap);

    if (yield) {
        /* as the gateway's filter does when it may cut an event out */
        p.yield = 1;
        r.yield = 1;

        for (off = 0; off < len; off += used) {
            n = (off < split) ? split - off : len - off;
            used = llm_sse_feed(&p, s + off, n);

            if (used == 0 || used > n || (used < n && !p.dispatched)) {
                fuzz_fail("event by event", "feed stopped where no event "
                          "ended");
            }

            if (llm_sse_ref_feed(&r, s + off, n) != used) {
                fuzz_fail("event by event", "the oracle consumed other "
                          "bytes");
            }

            fuzz_twin(&p, &r, "event by event");
        }

    } else if (step == 0) {
        llm_sse_feed(&p, s, split);
        llm_sse_ref_feed(&r, s, split);
        fuzz_twin(&p, &r, "split in two");

        llm_sse_feed(&p, s + split, len - split);
        llm_sse_ref_feed(&r, s + split, len - split);

    } else {
        for (off = 0; off < len; off += n) {
            n = (len - off < step) ? len - off : step;
            llm_sse_feed(&p, s + off, n);
            llm_sse_ref_feed(&r, s + off, n);
            fuzz_twin(&p, &r, "step by step");
        }
    }

    llm_sse_finish(&p);
    llm_sse_ref_finish(&r);
    fuzz_twin(&p, &r, "finish");

    if (p.len > p.cap) {
        fuzz_fail("feed", "the event length is beyond the buffer");
    }

    *u = p.usage;

    free(rbuf);
    free(buf);
}


static void
fuzz_check(const llm_usage_t *u, const char *how)
{
    size_t          i;
    unsigned char   c;

    if (u->input_tokens > LLM_USAGE_TOKENS_MAX
        || u->output_tokens > LLM_USAGE_TOKENS_MAX
        || u->cached_input_tokens > LLM_USAGE_TOKENS_MAX
        || u->cache_write_tokens > LLM_USAGE_TOKENS_MAX
        || u->reasoning_tokens > LLM_USAGE_TOKENS_MAX)
    {
        fuzz_fail(how, "a figure is out of range");
    }

    if (u->cached_input_tokens > u->input_tokens
        || u->cache_write_tokens > u->input_tokens)
    {
        fuzz_fail(how, "more cached tokens than input tokens");
    }

    if (u->reasoning_tokens > u->output_tokens) {
        fuzz_fail(how, "more reasoning tokens than output tokens");
    }

    if (!u->have_usage && !u->have_input
        && (u->input_tokens || u->output_tokens || u->cached_input_tokens
            || u->cache_write_tokens || u->reasoning_tokens))
    {
        fuzz_fail(how, "figures without a usage object");
    }

    if (u->delta_bytes == 0 && u->delta_events != 0) {
        fuzz_fail(how, "delta events without text");
    }

    for (i = 0; i < LLM_USAGE_FINISH_MAX; i++) {
        c = (unsigned char) u->finish_reason[i];

        if (c == '\0') {
            return;
        }

        if (c < 0x20 || c >= 0x7f) {
            fuzz_fail(how, "finish_reason is not printable ASCII");
        }
    }

    fuzz_fail(how, "finish_reason is not NUL-terminated");
}


/*
 * Whatever ended the response, the settled figures follow the rule, and
 * never pass the bounds: 500 out, 2000 in.
 */

static void
fuzz_settle(const llm_usage_t *u, const char *how)
{
    int              ok, end;
    llm_settle_t     s;
    llm_settle_in_t  in;

    for (ok = 0; ok < 2; ok++) {
        for (end = LLM_END_CLEAN; end <= LLM_END_UNREADABLE; end++) {
            in.prompt_estimate = 1000;
            in.prompt_bound = 2000;
            in.hold_prompt = 1;
            in.max_tokens = 500;
            in.upstream_ok = ok;
            in.end = end;

            llm_settle_usage(u, &in, &s);

            if (s.output_tokens > in.max_tokens
                || s.input_tokens > in.prompt_bound
                || s.cached_input_tokens + s.cache_write_tokens
                   > s.input_tokens
                || s.reasoning_tokens > s.output_tokens)
            {
                fuzz_fail(how, "settle: beyond the bounds");
            }

            /* held to a bound: only what the upstream said can be */
            if ((s.flags & LLM_REC_F_BOUND)
                && u->output_tokens <= in.max_tokens
                && u->input_tokens <= in.prompt_bound)
            {
                fuzz_fail(how, "settle: flagged bound, nothing above it");
            }

            if (u->have_usage && u->have_input && !u->malformed) {
                if (s.input_tokens != min(u->input_tokens, in.prompt_bound)
                    || s.output_tokens != min(u->output_tokens,
                                              in.max_tokens)
                    || (s.flags & LLM_REC_F_ESTIMATED))
                {
                    fuzz_fail(how, "settle: not the upstream's figures");
                }

                continue;
            }

            if (!ok) {
                if (s.input_tokens || s.output_tokens || s.flags & 0x3) {
                    fuzz_fail(how, "settle: a failed upstream charged");
                }

                continue;
            }

            if (!(s.flags & LLM_REC_F_ESTIMATED)
                || s.output_tokens < min(u->output_tokens, in.max_tokens)
                || ((!u->have_input || u->malformed)
                    && s.input_tokens != in.prompt_estimate))
            {
                fuzz_fail(how, "settle: a bad estimate");
            }
        }
    }
}


static void
fuzz_same(const llm_usage_t *a, const llm_usage_t *b, const char *how)
{
    if (a->input_tokens != b->input_tokens
        || a->output_tokens != b->output_tokens
        || a->cached_input_tokens != b->cached_input_tokens
        || a->cache_write_tokens != b->cache_write_tokens
        || a->reasoning_tokens != b->reasoning_tokens
        || a->delta_events != b->delta_events
        || a->delta_bytes != b->delta_bytes
        || a->have_input != b->have_input
        || a->repeated != b->repeated
        || strcmp(a->finish_reason, b->finish_reason) != 0
        || a->have_usage != b->have_usage
        || a->done != b->done
        || a->clamped != b->clamped
        || a->malformed != b->malformed
        || a->truncated != b->truncated
        || a->error != b->error)
    {
        fuzz_fail(how, "the usage differs from the whole feed's");
    }
}


/*
 * The JSON reader and the oracle's (which parsed every body with cJSON)
 * on the same body: the same return, the same usage, ids and all.
 */

static void
fuzz_json(llm_api_e api, const char *s, size_t len, const llm_usage_t *u,
    int rc, const char *how)
{
    llm_usage_t  r;

    if (llm_sse_ref_usage_from_json(api, s, len, &r) != rc) {
        fuzz_fail(how, "the oracle returns otherwise");
    }

    fuzz_same(u, &r, how);

    if (memcmp(u->response_id, r.response_id, sizeof(r.response_id)) != 0
        || memcmp(u->upstream_model, r.upstream_model,
                  sizeof(r.upstream_model))
           != 0
        || memcmp(u->finish_reason, r.finish_reason,
                  sizeof(r.finish_reason))
           != 0)
    {
        fuzz_fail(how, "the oracle reads another id, model or reason");
    }
}


/* the parser and the oracle after the same bytes: the same in all */

static void
fuzz_twin(const llm_sse_t *p, const llm_sse_t *r, const char *how)
{
    const llm_usage_t  *a = &p->usage, *b = &r->usage;

    fuzz_same(a, b, how);

    if (memcmp(a->finish_reason, b->finish_reason,
               sizeof(a->finish_reason)) != 0
        || memcmp(a->response_id, b->response_id, sizeof(a->response_id))
           != 0
        || memcmp(a->upstream_model, b->upstream_model,
                  sizeof(a->upstream_model)) != 0)
    {
        fuzz_fail(how, "the oracle read another reason, id or model");
    }

    if (p->len != r->len || (p->len && memcmp(p->buf, r->buf, p->len) != 0)
        || p->event_len != r->event_len
        || memcmp(p->tokens, r->tokens, sizeof(p->tokens)) != 0
        || p->state != r->state || p->field != r->field
        || p->skip_event != r->skip_event || p->have_data != r->have_data
        || p->last_cr != r->last_cr || p->started != r->started
        || p->in_event != r->in_event || p->dispatched != r->dispatched
        || p->usage_only != r->usage_only || p->holding != r->holding
        || p->hold_len != r->hold_len || p->drop_lf != r->drop_lf
        || p->stripped != r->stripped)
    {
        fuzz_fail(how, "the oracle is in another state");
    }
}


typedef struct {
    char    *buf;
    size_t   len;
    size_t   cap;
} fuzz_sink_t;


/* the filter in two parts at split, as the gateway's body filter runs it */

static void
fuzz_filter(size_t cap, const char *s, size_t len, size_t split, int strip,
    const llm_usage_t *whole)
{
    char         *buf, *rbuf, hold[512], rhold[512];
    llm_sse_t     p, r;
    const char   *closing, *rclosing;
    fuzz_sink_t   k, rk;
    llm_usage_t   again;

    buf = malloc(cap);
    rbuf = malloc(cap);
    k.buf = malloc(len + 1);
    rk.buf = malloc(len + 1);
    if (buf == NULL || rbuf == NULL || k.buf == NULL || rk.buf == NULL) {
        abort();
    }

    k.len = 0;
    k.cap = len + 1;
    rk.len = 0;
    rk.cap = len + 1;

    llm_sse_init(&p, LLM_API_OPENAI, buf, cap);
    p.strip = strip;
    p.hold = hold;
    p.hold_cap = sizeof(hold);

    if (llm_sse_filter(&p, s, split, fuzz_out, &k) != 0
        || llm_sse_filter(&p, s + split, len - split, fuzz_out, &k) != 0
        || llm_sse_filter_end(&p, fuzz_out, &k, &closing) != 0)
    {
        fuzz_fail("filter", "out failed");
    }

    /* the oracle's filter: the same bytes out, and the same end */

    llm_sse_ref_init(&r, LLM_API_OPENAI, rbuf, cap);
    r.strip = strip;
    r.hold = rhold;
    r.hold_cap = sizeof(rhold);

    if (llm_sse_ref_filter(&r, s, split, fuzz_out, &rk) != 0
        || llm_sse_ref_filter(&r, s + split, len - split, fuzz_out, &rk) != 0
        || llm_sse_ref_filter_end(&r, fuzz_out, &rk, &rclosing) != 0)
    {
        fuzz_fail("filter", "the oracle's out failed");
    }

    fuzz_twin(&p, &r, "filter");

    if (k.len != rk.len || memcmp(k.buf, rk.buf, k.len) != 0
        || strcmp(closing, rclosing) != 0)
    {
        fuzz_fail("filter", "the oracle sent other bytes");
    }

    if (!strip) {
        if (k.len != len || memcmp(k.buf, s, len) != 0) {
            fuzz_fail("filter", "the bytes changed without a cut");
        }

        goto done;
    }

    if (p.usage.delta_events != whole->delta_events
        || p.usage.input_tokens != whole->input_tokens
        || strcmp(p.usage.finish_reason, whole->finish_reason) != 0)
    {
        fuzz_fail("filter", "the usage differs from the whole feed's");
    }

    /* only usage chunks went: the rest reads as it did */

    fuzz_feed(LLM_API_OPENAI, cap, k.buf, k.len, k.len, 0, 0, &again);

    if (again.delta_events != whole->delta_events
        || again.delta_bytes != whole->delta_bytes
        || again.done != whole->done
        || again.error != whole->error
        || strcmp(again.finish_reason, whole->finish_reason) != 0)
    {
        fuzz_fail("filter", "the bytes sent read differently");
    }

done:

    free(rk.buf);
    free(k.buf);
    free(rbuf);
    free(buf);
}


static int
fuzz_out(void *data, const char *p, size_t len)
{
    fuzz_sink_t  *k = data;

    /* nothing is ever sent twice: the output is never longer */
    if (len > k->cap - k->len) {
        fuzz_fail("filter", "more bytes out than in");
    }

    memcpy(k->buf + k->len, p, len);
    k->len += len;

    return 0;
}


static void
fuzz_fail(const char *how, const char *what)
{
    fprintf(stderr, "fuzz_sse: %s: %s\n", how, what);
    abort();
}
