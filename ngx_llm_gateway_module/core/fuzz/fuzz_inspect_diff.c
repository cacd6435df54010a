
/*
 * libFuzzer target: the inspector against its reference (t/inspect_diff.h),
 * every field, refusal and byte sent upstream the same.  The first two
 * bytes choose as in fuzz_inspect.c: the API (byte 0 bits 0-1 and byte 1
 * bit 6), the tier's maximum (bits 2-4) and default (bits 5-6), the depth
 * (byte 1 bits 0-3) and string limits (bits 4-5), lowering (byte 1 bit
 * 7); byte 0 bit 7 and byte 1 bits 6-7 the alias.  The rest is the body,
 * so that fuzz_inspect's seeds serve here too.
 */


#include <stdint.h>
#include <stdio.h>

#include "../t/inspect_diff.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


static const llm_api_e  fuzz_apis[] = {
    LLM_API_OPENAI, LLM_API_ANTHROPIC, LLM_API_RESPONSES, LLM_API_COUNT_TOKENS,
    LLM_API_EMBEDDINGS, LLM_API_OPENAI, LLM_API_ANTHROPIC, LLM_API_RESPONSES
};

static const int64_t  fuzz_limits[] = {
    1, 2, 256, 4096, 100000, 1000000, 1000000000, 1000000000000000LL
};

static const int64_t  fuzz_defaults[] = { 1, 256, 4096, 1000000000000000LL };

static const size_t  fuzz_depths[] = {
    1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32, 64, 128, 256
};

static const size_t  fuzz_strings[] = { 8, 64, 4096, (size_t) -1 };


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned             which, alias;
    const char          *d;
    llm_inspect_conf_t   cf;

    if (size < 2) {
        return 0;
    }

    cf.max_tokens_limit = fuzz_limits[(data[0] >> 2) & 0x07];
    cf.default_max_tokens = fuzz_defaults[(data[0] >> 5) & 0x03];
    cf.max_depth = fuzz_depths[data[1] & 0x0f];
    cf.max_string = fuzz_strings[(data[1] >> 4) & 0x03];
    cf.image_tokens = 1000;
    cf.context_tokens = 50000;
    cf.lower = (data[1] >> 7) & 1;

    if (cf.default_max_tokens > cf.max_tokens_limit) {
        cf.default_max_tokens = cf.max_tokens_limit;
    }

    which = (data[0] & 0x03) | ((data[1] >> 4) & 0x04);
    alias = ((data[0] >> 7) | (data[1] >> 5)) & 0x07;

    d = inspect_diff(fuzz_apis[which], (const char *) data + 2, size - 2, &cf,
                     alias | (which == 5));

    if (d != NULL) {
        fprintf(stderr, "fuzz_inspect_diff: %s\n", d);
        __builtin_trap();
    }

    return 0;
}
