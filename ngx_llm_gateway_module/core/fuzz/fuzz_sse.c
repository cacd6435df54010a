
/*
 * libFuzzer target for the usage extractor.  The first byte chooses the
 * API (bit 0), a small event buffer (bit 1) and where to split the rest
 * (bits 2-7, in 64ths of it).  The rest is fed whole, in two parts and a
 * byte at a time, which must all give the same usage, within range; then
 * it is read as a JSON body.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm_sse.h"


#define FUZZ_BUF_SIZE   4096
#define FUZZ_SMALL_BUF  64


static void fuzz_feed(llm_api_e api, size_t cap, const char *s, size_t len,
    size_t split, size_t step, llm_usage_t *u);
static void fuzz_check(const llm_usage_t *u, const char *how);
static void fuzz_same(const llm_usage_t *a, const llm_usage_t *b,
    const char *how);
static void fuzz_fail(const char *how, const char *what);


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int           rc;
    size_t        len, split, cap;
    llm_api_e     api;
    const char   *s;
    llm_usage_t   whole, part, byte, json;

    if (size == 0) {
        return 0;
    }

    api = (data[0] & 0x01) ? LLM_API_ANTHROPIC : LLM_API_OPENAI;
    cap = (data[0] & 0x02) ? FUZZ_SMALL_BUF : FUZZ_BUF_SIZE;

    s = (const char *) data + 1;
    len = size - 1;
    split = len * (data[0] >> 2) / 64;

    fuzz_feed(api, cap, s, len, len, 0, &whole);
    fuzz_check(&whole, "whole");

    fuzz_feed(api, cap, s, len, split, 0, &part);
    fuzz_same(&whole, &part, "split in two");

    fuzz_feed(api, cap, s, len, 0, 1, &byte);
    fuzz_same(&whole, &byte, "one byte at a time");

    rc = llm_usage_from_json(api, s, len, &json);
    fuzz_check(&json, "json");

    if (rc != (int) json.have_usage) {
        fuzz_fail("json", "the return value is not have_usage");
    }

    return 0;
}


/* step 0: in two parts at split; otherwise step bytes at a time */

static void
fuzz_feed(llm_api_e api, size_t cap, const char *s, size_t len, size_t split,
    size_t step, llm_usage_t *u)
{
    char       *buf;
    size_t      off, n;
    llm_sse_t   p;

    /* exactly cap bytes, so that the sanitizer sees an overflow */

    buf = malloc(cap);
    if (buf == NULL) {
        abort();
    }

    llm_sse_init(&p, api, buf, cap);

    if (step == 0) {
        llm_sse_feed(&p, s, split);
        llm_sse_feed(&p, s + split, len - split);

    } else {
        for (off = 0; off < len; off += n) {
            n = (len - off < step) ? len - off : step;
            llm_sse_feed(&p, s + off, n);
        }
    }

    llm_sse_finish(&p);

    if (p.len > p.cap) {
        fuzz_fail("feed", "the event length is beyond the buffer");
    }

    *u = p.usage;

    free(buf);
}


static void
fuzz_check(const llm_usage_t *u, const char *how)
{
    size_t          i;
    unsigned char   c;

    if (u->input_tokens > LLM_USAGE_TOKENS_MAX
        || u->output_tokens > LLM_USAGE_TOKENS_MAX
        || u->cached_input_tokens > LLM_USAGE_TOKENS_MAX)
    {
        fuzz_fail(how, "a figure is out of range");
    }

    if (u->cached_input_tokens > u->input_tokens) {
        fuzz_fail(how, "more cached tokens than input tokens");
    }

    if (!u->have_usage
        && (u->input_tokens || u->output_tokens || u->cached_input_tokens))
    {
        fuzz_fail(how, "figures without a usage object");
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


static void
fuzz_same(const llm_usage_t *a, const llm_usage_t *b, const char *how)
{
    if (a->input_tokens != b->input_tokens
        || a->output_tokens != b->output_tokens
        || a->cached_input_tokens != b->cached_input_tokens
        || strcmp(a->finish_reason, b->finish_reason) != 0
        || a->have_usage != b->have_usage
        || a->done != b->done
        || a->clamped != b->clamped
        || a->truncated != b->truncated
        || a->error != b->error)
    {
        fuzz_fail(how, "the usage differs from the whole feed's");
    }
}


static void
fuzz_fail(const char *how, const char *what)
{
    fprintf(stderr, "fuzz_sse: %s: %s\n", how, what);
    abort();
}
