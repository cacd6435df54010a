
/*
 * The inspector against its reference (inspect_diff.h): bodies chosen to
 * split a parser from cJSON (escapes in names, repeats, numbers of every
 * shape, NUL, bad UTF-8, nesting, cuts), the fuzz seeds, and random
 * mutations of both, under every API and several tiers.  Any difference,
 * in a field, a refusal or a byte sent upstream, fails.
 */


#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect_diff.h"
#include "tap.h"


#define DIFF_MUTATIONS  60000
#define DIFF_BODY_MAX   8192


static const llm_api_e  diff_apis[] = {
    LLM_API_OPENAI, LLM_API_ANTHROPIC, LLM_API_RESPONSES,
    LLM_API_COUNT_TOKENS, LLM_API_EMBEDDINGS
};

/* default, maximum, depth, string, image, context, lower */
static const llm_inspect_conf_t  diff_confs[] = {
    { 256, 4096, 8, 64, 1000, 100000, 0 },
    { 256, 4096, 64, 1 << 20, 1000, 128000, 1 },
    { 1, 1, 2, 8, 1, 1, 1 },
    { 4096, 1000000000, 256, (size_t) -1, 1000, 50000, 0 },
};

static const char  *diff_bodies[] = {
    "{\"model\":\"mock-bench\",\"max_tokens\":64,\"messages\":[{\"role\":"
    "\"user\",\"content\":\"Say hello to the gateway.\"}]}",
    "{\"model\":\"mock-bench\",\"max_tokens\":64,\"stream\":true,"
    "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
    "{\"model\":\"m\",\"stream\":true,\"stream_options\":{},"
    "\"messages\":[]}",
    "{\"model\":\"m\",\"max_tokens\":null,\"messages\":[]}",
    "{\"model\":\"m\",\"max_tokens\":99999999,\"messages\":[]}",

    /* names escaped, repeated, nested under a top-level name */
    "{\"m\\u006fdel\":\"a\",\"messages\":[]}",
    "{\"model\":\"a\",\"model\":\"b\",\"messages\":[]}",
    "{\"model\":\"a\",\"m\\u006fdel\":\"b\",\"messages\":[]}",
    "{\"model\":\"a\",\"messages\":[{\"model\":\"b\",\"max_tokens\":9,"
    "\"role\":\"user\",\"content\":\"x\"}]}",
    "{\"model\":\"a\",\"messages\":[],\"x\":{\"a\":1,\"a\":2}}",
    "{\"a\":1,\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"g\":1,\"h\":1,"
    "\"i\":1,\"j\":1,\"k\":1,\"l\":1,\"m\":1,\"n\":1,\"o\":1,\"p\":1,"
    "\"q\":1,\"model\":\"x\",\"messages\":[],\"b\":2}",
    "{\"MODEL\":\"a\",\"model\":\"b\",\"messages\":[]}",
    "{\"model\":\"a\\u0000b\",\"messages\":[]}",
    "{\"model\":\"a\\u00zzb\",\"messages\":[]}",
    "{\"model\":\"a\\uD83D\\uDE00\",\"messages\":[]}",
    "{\"model\":\"a\\uD83D\",\"messages\":[]}",
    "{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"content\":"
    "\"\\b\\f\\n\\r\\t\\/\\\"\\\\\\u0041\\u00e9\\u20AC\\uD83D\\uDE01"
    "\\uDBFF\\uDFFF\\u0800\\u07ff\"}]}",
    "{\"model\":\"a\\uDE00\",\"messages\":[]}",
    "{\"model\":\"a\\x\",\"messages\":[]}",
    "{\"model\":\"\xff\xfe\xc3\",\"messages\":[]}",
    "\xef\xbb\xbf{\"model\":\"a\",\"messages\":[]}",

    /* numbers */
    "{\"model\":\"m\",\"max_tokens\":1e2,\"messages\":[]}",
    "{\"model\":\"m\",\"max_tokens\":100.0,\"messages\":[]}",
    "{\"model\":\"m\",\"max_tokens\":0100,\"messages\":[]}",
    "{\"model\":\"m\",\"max_tokens\":-0,\"messages\":[]}",
    "{\"model\":\"m\",\"max_tokens\":-5,\"messages\":[]}",
    "{\"model\":\"m\",\"max_tokens\":+5,\"messages\":[]}",
    "{\"model\":\"m\",\"max_tokens\":5.,\"messages\":[]}",
    "{\"model\":\"m\",\"max_tokens\":1e,\"messages\":[]}",
    "{\"model\":\"m\",\"max_tokens\":1-2,\"messages\":[]}",
    "{\"model\":\"m\",\"max_tokens\":9007199254740993,\"messages\":[]}",
    "{\"model\":\"m\",\"max_tokens\":999999999999999,\"messages\":[]}",
    "{\"model\":\"m\",\"max_tokens\":1000000000000000,\"messages\":[]}",
    "{\"model\":\"m\",\"max_tokens\":1e400,\"messages\":[]}",
    "{\"model\":\"m\",\"n\":2.5e0,\"max_tokens\":0.5e1,\"messages\":[]}",
    "{\"model\":\"m\",\"max_tokens\":"
    "1000000000000000000000000000000000000000000000000000000000000000000,"
    "\"messages\":[]}",
    "{\"model\":\"m\",\"messages\":[],\"tools\":[{\"type\":\"function\","
    "\"function\":{\"name\":\"f\",\"x\":[1.5,-0,1e20,123456789012345678,"
    "-3,0.1,1E-7]}}]}",

    /* what the scan refuses, and truncations */
    "{\"model\":\"m\",\"messages\":[]}x",
    "{\"model\":\"m\",\"messages\":[]}\x01",
    "{\"model\":\"m\x01\",\"messages\":[]}",
    "{\"model\":\"m\",\x0b\"messages\":[]}",
    "{\"model\":\"m\",\"messages\":[[[[[[[[[[[[]]]]]]]]]]]]}",
    "{\"model\":\"m\",\"messages\":[",
    "{\"model\":\"m\",\"messages\":[]",
    "{\"model\":\"m\\",
    "{\"model\":\"m\",\"messages\":[],}",
    "{\"model\":\"m\",\"messages\":[1,]}",
    "{\"model\":\"m\",\"messages\":tru}",
    "{\"model\":\"m\",\"messages\":nullx}",
    "{}",
    " { } ",
    "[]",
    "\"x\"",

    /* every API's parts */
    "{\"model\":\"m\",\"max_tokens\":10,\"system\":[{\"type\":\"text\","
    "\"text\":\"be brief\"}],\"messages\":[{\"role\":\"user\",\"content\":"
    "[{\"type\":\"text\",\"text\":\"a\\nb\"},{\"type\":\"image\"},"
    "{\"type\":\"tool_result\",\"tool_use_id\":\"t1\",\"content\":"
    "\"{\\\"a\\\":1}\"},{\"type\":\"tool_use\",\"id\":\"x\",\"input\":"
    "{\"q\":2}}]}],\"tools\":[{\"name\":\"f\"},{\"type\":\"bash_2025\"},"
    "{\"type\":\"web_search_2025\"}],\"thinking\":{\"budget_tokens\":5}}",
    "{\"model\":\"m\",\"input\":[{\"type\":\"message\",\"role\":\"user\","
    "\"content\":[{\"type\":\"input_text\",\"text\":\"hi\"},{\"type\":"
    "\"input_image\"}]},{\"type\":\"function_call\",\"arguments\":"
    "\"{}\",\"name\":\"f\",\"call_id\":\"c\"},{\"type\":"
    "\"function_call_output\",\"call_id\":\"c\",\"output\":\"ok\"},"
    "{\"type\":\"reasoning\",\"summary\":[]}],\"instructions\":\"x\","
    "\"max_output_tokens\":50,\"background\":false}",
    "{\"model\":\"m\",\"input\":\"hello\",\"previous_response_id\":\"r\"}",
    "{\"model\":\"e\",\"input\":[\"a\",\"bc\"],\"encoding_format\":"
    "\"float\",\"dimensions\":3}",
    "{\"model\":\"e\",\"input\":[[1,2,3],[4]]}",
    "{\"model\":\"e\",\"input\":[1,2,-3]}",
    "{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"tool_call_id\":"
    "\"c\",\"content\":[{\"type\":\"text\",\"text\":\"r\"}]},{\"role\":"
    "\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\","
    "\"function\":{\"arguments\":\"{\\\"x\\\":\\\"\\u00e9\\\"}\"}}],"
    "\"refusal\":\"no\",\"audio\":{\"id\":\"a\"}}],\"n\":3,"
    "\"max_completion_tokens\":7,\"prediction\":{\"content\":\"abc\"},"
    "\"service_tier\":\"auto\",\"web_search_options\":{}}",
};

/* what a mutation splices in */
static const char  *diff_tokens[] = {
    "\"model\"", "\"messages\"", "\"max_tokens\"", "\"max_completion_tokens\"",
    "\"max_output_tokens\"", "\"n\"", "\"stream\"", "\"stream_options\"",
    "\"include_usage\"", "\"tools\"", "\"system\"", "\"input\"",
    "\"instructions\"", "\"type\"", "\"text\"", "\"content\"", "\"role\"",
    "\"image_url\"", "\"tool_calls\"", "\"thinking\"", "\"budget_tokens\"",
    "true", "false", "null", "0", "-0", "1e3", "1.5", "4096", "99999999",
    "9007199254740993", "{", "}", "[", "]", ",", ":", "\"", "\\", "\\u0000",
    "\\u006f", "\\ud83d\\ude00", "\\udbff\\udfff", "\\udc00", "\\uzzzz",
    "\\u007f", "\\u0080", "\\u07FF", "\\u0800", "\\uffff", "\\b", "\\f",
    "\\n", "\\r", "\\t", "\\/", "\\\"", "\\\\", " ",
    "\x00", "\x01", "\x7f", "\xc3\xa9", "\xff", "\xef\xbb\xbf",
    "{\"a\":1,\"a\":2}", "[{\"type\":\"text\",\"text\":\"x\"}]",
    "\"MAX_TOKENS\"", "\"Model\"",
};


static uint64_t  diff_rand_state = 0x9e3779b97f4a7c15ULL;


static uint64_t
diff_rand(void)
{
    uint64_t  x = diff_rand_state;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;

    return diff_rand_state = x;
}


static void
diff_report(const char *d, llm_api_e api, size_t conf, const char *body,
    size_t len)
{
    size_t  i;

    printf("# %s: api %d, conf %zu, body: ", d, (int) api, conf);

    for (i = 0; i < len && i < 400; i++) {
        if ((unsigned char) body[i] < 0x20 || (unsigned char) body[i] > 0x7e)
        {
            printf("\\x%02x", (unsigned char) body[i]);

        } else {
            putchar(body[i]);
        }
    }

    putchar('\n');
}


/* every API, every tier, each alias choice; the first difference, or 0 */

static int
diff_all(const char *body, size_t len)
{
    size_t       a, c;
    unsigned     alias;
    const char  *d;

    for (a = 0; a < sizeof(diff_apis) / sizeof(diff_apis[0]); a++) {
        for (c = 0; c < sizeof(diff_confs) / sizeof(diff_confs[0]); c++) {
            for (alias = 0; alias < 8; alias += 3) {
                d = inspect_diff(diff_apis[a], body, len, &diff_confs[c],
                                 alias);

                if (d != NULL) {
                    diff_report(d, diff_apis[a], c, body, len);
                    return -1;
                }
            }
        }
    }

    return 0;
}


static size_t
diff_mutate(char *b, size_t len)
{
    size_t       at, n, k;
    const char  *t;

    at = len ? diff_rand() % (len + 1) : 0;

    switch (diff_rand() % 5) {

    case 0:
        if (at < len) {
            b[at] ^= (char) (1 << (diff_rand() % 8));
        }

        return len;

    case 1:
        n = diff_rand() % 8 + 1;
        n = (at + n > len) ? len - at : n;
        memmove(b + at, b + at + n, len - at - n);
        return len - n;

    case 2:
        /* a cut, as a truncated body */
        return at;

    case 3:
        n = diff_rand() % 16 + 1;
        k = len ? diff_rand() % len : 0;
        n = (k + n > len) ? len - k : n;

        if (len + n > DIFF_BODY_MAX) {
            return len;
        }

        memmove(b + at + n, b + at, len - at);
        /* the slice may straddle at: its bytes there are still in place */
        memmove(b + at, b + k + (k >= at ? n : 0), n);
        return len + n;

    default:
        k = diff_rand() % (sizeof(diff_tokens) / sizeof(diff_tokens[0]));
        t = diff_tokens[k];

        /* "\x00" is one byte */
        n = (*t == '\0') ? 1 : strlen(t);

        if (len + n > DIFF_BODY_MAX) {
            return len;
        }

        memmove(b + at + n, b + at, len - at);
        memcpy(b + at, t, n);
        return len + n;
    }
}


/* the fuzz seeds, without their two bytes of configuration */

static size_t
diff_seeds(char seeds[][DIFF_BODY_MAX], size_t *lens, size_t max)
{
    char            path[2048], dir[1024], *slash;
    size_t          n, got;
    FILE           *f;
    DIR            *d;
    struct dirent  *e;

    snprintf(dir, sizeof(dir), "%s", __FILE__);
    slash = strrchr(dir, '/');

    if (slash == NULL) {
        return 0;
    }

    snprintf(slash, sizeof(dir) - (slash - dir), "/../fuzz/corpus/inspect");

    d = opendir(dir);
    if (d == NULL) {
        return 0;
    }

    n = 0;

    while (n < max && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }

        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);

        f = fopen(path, "rb");
        if (f == NULL) {
            continue;
        }

        got = fread(seeds[n], 1, DIFF_BODY_MAX, f);
        fclose(f);

        if (got > 2) {
            memmove(seeds[n], seeds[n] + 2, got - 2);
            lens[n++] = got - 2;
        }
    }

    closedir(d);

    return n;
}


int
main(void)
{
    int            bad;
    size_t         i, k, len, n, nseeds;
    static char    seeds[128][DIFF_BODY_MAX], body[DIFF_BODY_MAX * 2];
    static size_t  lens[128];

    n = sizeof(diff_bodies) / sizeof(diff_bodies[0]);
    bad = 0;

    for (i = 0; i < n && !bad; i++) {
        bad = diff_all(diff_bodies[i], strlen(diff_bodies[i]));
    }

    tap_ok(!bad, "%zu chosen bodies: the same as the reference", n);

    /* the seeds first; the chosen bodies join them for the mutations */
    nseeds = diff_seeds(seeds, lens, 128 - n);

    tap_ok(nseeds > 0, "the fuzz seeds are read");

    bad = 0;

    for (i = 0; i < nseeds && !bad; i++) {
        bad = diff_all(seeds[i], lens[i]);
    }

    tap_ok(!bad, "%zu fuzz seeds: the same as the reference", nseeds);

    for (i = 0; i < n; i++) {
        lens[nseeds] = strlen(diff_bodies[i]);
        memcpy(seeds[nseeds], diff_bodies[i], lens[nseeds]);
        nseeds++;
    }

    bad = 0;

    for (i = 0; i < DIFF_MUTATIONS && !bad; i++) {
        k = diff_rand() % nseeds;
        len = lens[k];
        memcpy(body, seeds[k], len);

        for (k = diff_rand() % 4 + 1; k; k--) {
            len = diff_mutate(body, len);
        }

        k = diff_rand();

        if (inspect_diff(diff_apis[k % 5], body, len,
                         &diff_confs[(k >> 8) % 4], (unsigned) (k >> 16) % 8)
            != NULL)
        {
            bad = diff_all(body, len);

            if (!bad) {
                printf("# a difference that diff_all() did not find\n");
                bad = 1;
            }
        }
    }

    tap_ok(!bad, "%d mutations: the same as the reference", DIFF_MUTATIONS);

    return tap_done();
}
