
/*
 * Writes the seed corpora of fuzz_inspect, fuzz_record and fuzz_key into
 * <dir>/inspect, <dir>/record and <dir>/key with the codecs themselves, so
 * that a change of format is one run away from new seeds: make fuzz-seeds
 * writes them into fuzz/corpus.  Those of fuzz_provider, text, go into
 * <dir>/provider; its gemini-chunked is chunk-encoded here.  fuzz_pacer's
 * programs go into <dir>/pacer, fuzz_fair's into <dir>/fair.
 *
 * Nothing runs it on its own; the files it writes are committed.  Inputs
 * a fuzzer found are committed as they were found, not written here.
 */


#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "llm_key.h"
#include "llm_record.h"


/*
 * fuzz_inspect's first two bytes: the API, the tier's max_tokens (index 3:
 * 4096) and its default (index 1: 256); the depth limit (index 13: 64) and
 * the string limit (index 2: 4096).  See fuzz_inspect.c.
 */
#define SEED_OPENAI        0x2c
#define SEED_ANTHROPIC     0x2d
#define SEED_RESPONSES     0x2e
#define SEED_COUNT         0x2f
#define SEED_EMBEDDINGS    0x2c      /* with SEED_SECOND */
#define SEED_SECOND        0x40      /* the second four APIs */
#define SEED_ALIAS         0x80
#define SEED_OPENAI_MT     0x2d      /* with SEED_SECOND: a backend's
                                        limit_param=max_tokens */
#define SEED_LOWER         0x80      /* above_max=lower */
#define SEED_LIMITS        0x2d

#define SEED_HASH                                                             \
    "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"


typedef struct {
    const char  *name;
    uint8_t      conf[2];
    const char  *body;
} seed_inspect_t;


static const seed_inspect_t  seed_inspect[] = {

    { "count-tokens", { SEED_COUNT, SEED_LIMITS },
      "{\"model\":\"claude\",\"system\":\"Be brief.\",\"thinking\":"
      "{\"type\":\"enabled\",\"budget_tokens\":9000},\"tools\":[{\"name\":"
      "\"t\",\"input_schema\":{}}],\"messages\":[{\"role\":\"user\","
      "\"content\":\"Say hello.\"}]}" },

    { "count-tokens-alias", { SEED_COUNT | SEED_ALIAS, SEED_LIMITS },
      "{\"model\":\"fast\",\"max_tokens\":null,\"messages\":[]}" },

    { "openai-max", { SEED_OPENAI, SEED_LIMITS },
      "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\","
      "\"content\":\"Say hello.\"}],\"max_tokens\":100}" },

    { "openai-no-max", { SEED_OPENAI, SEED_LIMITS },
      "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"system\","
      "\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi\"}]}" },

    { "openai-stream", { SEED_OPENAI, SEED_LIMITS },
      " \r\n\t{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\","
      "\"content\":\"Count to 3.\"}],\"stream\":true}" },

    { "openai-stream-usage", { SEED_OPENAI, SEED_LIMITS },
      "{\"model\":\"gpt-4o\",\"messages\":[],\"stream\":true,"
      "\"stream_options\":{\"include_usage\":true},"
      "\"max_completion_tokens\":50}" },

    { "openai-stream-no-usage", { SEED_OPENAI, SEED_LIMITS },
      "{\"model\":\"gpt-4o\",\"messages\":[],\"stream\":true,"
      "\"stream_options\":{\"include_usage\":false},\"max_tokens\":9}" },

    { "openai-nulls", { SEED_OPENAI, SEED_LIMITS },
      "{\"model\":\"m\",\"max_tokens\":null,\"max_completion_tokens\":null,"
      "\"messages\":[],\"stream\":true,\"stream_options\":null}" },

    { "openai-parts", { SEED_OPENAI, SEED_LIMITS },
      "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":["
      "{\"type\":\"text\",\"text\":\"What is in this image?\"},"
      "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://e.x/a.png\"}"
      "}]},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[]}],"
      "\"temperature\":0.2,\"tools\":[],\"max_tokens\":4096}" },

    { "openai-unicode", { SEED_OPENAI, SEED_LIMITS },
      "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":"
      "\"caf\\u00e9 \xc3\xa9t\xc3\xa9 \\ud83d\\ude00 \xf0\x9f\x98\x80 "
      "\\\"q\\\" \\\\ \\/ \\n\\t\"}],\"stream\":true,"
      "\"stream_options\":{}}" },

    { "openai-alias", { SEED_OPENAI_MT | SEED_ALIAS, SEED_LIMITS | 0xc0 },
      "{\"model\":\"chat-default\",\"max_tokens\":5,\"messages\":[]}" },

    { "openai-alias-stream", { SEED_OPENAI | SEED_ALIAS, SEED_LIMITS | 0x80 },
      "{\"model\":\"chat\",\"messages\":[],\"stream\":true}" },

    /* nested five deep: the limit 5 takes it, the limit 4 does not */
    { "openai-depth-5", { SEED_OPENAI, 0x24 },
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":["
      "{\"type\":\"text\",\"text\":\"x\"}]}]}" },

    { "openai-depth-4", { SEED_OPENAI, 0x23 },
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":["
      "{\"type\":\"text\",\"text\":\"x\"}]}]}" },

    /* strings of 64 bytes with the limit 64, then 65 */
    { "openai-string-64", { SEED_OPENAI, 0x1d },
      "{\"model\":\"m\",\"messages\":[{\"content\":"
      "\"0123456789012345678901234567890123456789012345678901234567890123\""
      "}]}" },

    { "openai-string-65", { SEED_OPENAI, 0x1d },
      "{\"model\":\"m\",\"messages\":[{\"content\":"
      "\"01234567890123456789012345678901234567890123456789012345678901234\""
      "}]}" },

    { "openai-limit", { SEED_OPENAI, SEED_LIMITS },
      "{\"model\":\"m\",\"messages\":[],\"max_tokens\":4096}" },

    { "openai-over-limit", { SEED_OPENAI, SEED_LIMITS },
      "{\"model\":\"m\",\"messages\":[],\"max_tokens\":4097}" },

    /* above the limit, lowered to it under the member sent */
    { "openai-lowered", { SEED_OPENAI, SEED_LIMITS | SEED_LOWER },
      "{\"model\":\"m\",\"messages\":[],\"max_tokens\":null,"
      "\"max_completion_tokens\":64000,\"stream\":true}" },

    { "openai-lowered-max-tokens",
      { SEED_OPENAI_MT, SEED_LIMITS | SEED_SECOND | SEED_LOWER },
      "{\"model\":\"m\",\"messages\":[],\"max_tokens\":8192,\"n\":2}" },

    { "openai-default-max-tokens",
      { SEED_OPENAI_MT, SEED_LIMITS | SEED_SECOND },
      "{\"model\":\"m\",\"messages\":[],\"max_completion_tokens\":null}" },

    { "anthropic-lowered", { SEED_ANTHROPIC, SEED_LIMITS | SEED_LOWER },
      "{\"model\":\"claude\",\"max_tokens\":64000,\"messages\":[]}" },

    { "responses-lowered", { SEED_RESPONSES, SEED_LIMITS | SEED_LOWER },
      "{\"model\":\"m\",\"input\":\"a\",\"max_output_tokens\":1e15}" },

    { "openai-repeated", { SEED_OPENAI, SEED_LIMITS },
      "{\"model\":\"cheap\",\"messages\":[],\"model\":\"dear\"}" },

    /* one limit under two names; n choices; another dialect's member */
    { "openai-two-limits", { SEED_OPENAI, SEED_LIMITS },
      "{\"model\":\"m\",\"messages\":[],\"max_completion_tokens\":1,"
      "\"max_tokens\":9000}" },

    { "openai-n", { SEED_OPENAI, SEED_LIMITS },
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
      "\"x\"}],\"max_tokens\":100,\"n\":8}" },

    { "anthropic-foreign", { SEED_ANTHROPIC, SEED_LIMITS },
      "{\"model\":\"m\",\"messages\":[],\"max_completion_tokens\":1,"
      "\"max_tokens\":9000}" },

    /* tools, tool calls, files and stored context */
    { "openai-tools", { SEED_OPENAI, SEED_LIMITS },
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":["
      "{\"type\":\"file\",\"file\":{\"file_id\":\"f\"}},"
      "{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"AA\"}}]},"
      "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":"
      "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}"
      ",{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"ok\"}],"
      "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
      "\"parameters\":{\"type\":\"object\"}}}],\"prediction\":{\"type\":"
      "\"content\",\"content\":\"abc\"}}" },

    /* what tools returned, in each dialect: counted as data */
    { "openai-tool-results", { SEED_OPENAI, SEED_LIMITS },
      "{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"tool_call_id\":"
      "\"call_1\",\"content\":\"{\\\"id\\\":\\\"ord_9f2\\\",\\\"qty\\\":3,"
      "\\\"price\\\":19.99}\"},{\"role\":\"tool\",\"tool_call_id\":\"call_2\","
      "\"content\":[{\"type\":\"text\",\"text\":\"[1000,1001,-2.5e3]\"}]},"
      "{\"role\":\"function\",\"name\":\"f\",\"content\":"
      "\"caf\xc3\xa9 a1B2\"}],"
      "\"functions\":[{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
      "\"properties\":{\"x\":{\"type\":\"integer\",\"maximum\":1e20}}}}]}" },

    { "anthropic-tool-results", { SEED_ANTHROPIC, SEED_LIMITS },
      "{\"model\":\"m\",\"max_tokens\":50,\"messages\":[{\"role\":\"user\","
      "\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\","
      "\"content\":\"{\\\"ok\\\":true}\"},{\"type\":\"tool_result\","
      "\"tool_use_id\":\"toolu_2\",\"is_error\":true,\"content\":[{\"type\":"
      "\"text\",\"text\":\"  \\n\\t x\"},{\"type\":\"image\","
      "\"source\":{}}]}]}],"
      "\"tools\":[{\"name\":\"f\",\"description\":\"d\",\"input_schema\":"
      "{\"type\":\"object\"}}]}" },

    { "responses-tool-results", { SEED_RESPONSES, SEED_LIMITS },
      "{\"model\":\"m\",\"input\":[{\"type\":\"function_call\",\"call_id\":"
      "\"c\",\"name\":\"f\",\"arguments\":\"{\\\"q\\\":\\\"x\\\"}\"},"
      "{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":"
      "[{\"type\":\"input_text\",\"text\":\"0xDEADbeef\"},{\"type\":"
      "\"input_image\",\"image_url\":\"u\"}]}],\"tools\":[{\"type\":"
      "\"function\",\"name\":\"f\",\"parameters\":{}}]}" },

    { "anthropic-parts", { SEED_ANTHROPIC, SEED_LIMITS },
      "{\"model\":\"m\",\"max_tokens\":50,\"system\":[{\"type\":\"text\","
      "\"text\":\"s\"}],\"messages\":[{\"role\":\"assistant\",\"content\""
      ":[{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":"
      "{\"q\":1}}]},{\"role\":\"user\",\"content\":[{\"type\":"
      "\"tool_result\",\"tool_use_id\":\"t\",\"content\":[{\"type\":"
      "\"image\",\"source\":{\"type\":\"url\",\"url\":\"u\"}}]}]}],"
      "\"tools\":[{\"name\":\"f\",\"input_schema\":{}},{\"type\":"
      "\"web_search_20250305\",\"name\":\"web_search\"}],"
      "\"mcp_servers\":[{\"type\":\"url\",\"url\":\"u\"}]}" },

    { "responses-refs", { SEED_RESPONSES, SEED_LIMITS },
      "{\"model\":\"m\",\"previous_response_id\":\"resp_1\",\"input\":["
      "{\"type\":\"item_reference\",\"id\":\"i\"},{\"type\":"
      "\"function_call_output\",\"call_id\":\"c\",\"output\":\"ok\"},"
      "{\"role\":\"user\",\"content\":[{\"type\":\"input_image\","
      "\"image_url\":\"u\"}]}],\"tools\":[{\"type\":\"file_search\"}]}" },

    /* most upstreams read the last include_usage: refused */
    { "openai-repeated-usage", { SEED_OPENAI, SEED_LIMITS },
      "{\"model\":\"m\",\"messages\":[],\"stream\":true,"
      "\"stream_options\":{\"include_usage\":true,"
      "\"include_usage\":false}}" },

    /* the tier's largest: 1e15, the default too */
    { "openai-huge", { SEED_OPENAI | 0x7c, SEED_LIMITS },
      "{\"model\":\"m\",\"messages\":[],\"max_tokens\":999999999999999,"
      "\"stream\":true,\"stream_options\":{}}" },

    { "openai-huge-default", { SEED_OPENAI | 0x7c, SEED_LIMITS },
      "{\"model\":\"m\",\"messages\":[],\"stream\":true,"
      "\"stream_options\":{}}" },

    { "anthropic-max", { SEED_ANTHROPIC, SEED_LIMITS },
      "{\"model\":\"claude-sonnet-4\",\"max_tokens\":1024,"
      "\"system\":\"You are terse.\",\"messages\":[{\"role\":\"user\","
      "\"content\":\"Hello\"}]}" },

    { "anthropic-no-max", { SEED_ANTHROPIC, SEED_LIMITS },
      "{\"model\":\"claude-haiku\",\"messages\":[{\"role\":\"user\","
      "\"content\":[{\"type\":\"text\",\"text\":\"Hi\"}]}],"
      "\"stream\":true}" },

    { "anthropic-blocks", { SEED_ANTHROPIC, SEED_LIMITS },
      "{\"model\":\"claude-sonnet-4\",\"max_tokens\":null,"
      "\"system\":[{\"type\":\"text\",\"text\":\"Rules.\","
      "\"cache_control\":{\"type\":\"ephemeral\"}}],\"messages\":["
      "{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{}},"
      "{\"type\":\"text\",\"text\":\"Describe.\"}]}],\"stream\":false}" },

    { "responses-string", { SEED_RESPONSES, SEED_LIMITS },
      "{\"model\":\"gpt-4.1\",\"input\":\"Say hello.\","
      "\"max_output_tokens\":30}" },

    { "responses-items", { SEED_RESPONSES, SEED_LIMITS },
      "{\"model\":\"gpt-4.1\",\"instructions\":\"Be kind.\",\"input\":["
      "{\"role\":\"user\",\"content\":\"hello\"},{\"role\":\"user\","
      "\"content\":[{\"type\":\"input_text\",\"text\":\"abcdefgh\"}]}]}" },

    { "responses-stream-null", { SEED_RESPONSES, SEED_LIMITS },
      "{\"model\":\"o4-mini\",\"input\":[],\"stream\":true,"
      "\"max_output_tokens\":null,\"reasoning\":{\"effort\":\"low\"}}" },

    { "embeddings-string", { SEED_EMBEDDINGS, SEED_LIMITS | SEED_SECOND },
      "{\"model\":\"text-embedding-3-small\",\"input\":\"The food was "
      "delicious.\",\"encoding_format\":\"float\"}" },

    { "embeddings-strings", { SEED_EMBEDDINGS, SEED_LIMITS | SEED_SECOND },
      "{\"input\":[\"caf\\u00e9\",\"b\"],\"model\":\"m\","
      "\"dimensions\":256,\"user\":\"u\"}" },

    { "embeddings-tokens", { SEED_EMBEDDINGS, SEED_LIMITS | SEED_SECOND },
      "{\"model\":\"m\",\"input\":[15339,1917,0,2147483647],"
      "\"encoding_format\":\"base64\"}" },

    { "embeddings-token-arrays",
      { SEED_EMBEDDINGS | SEED_ALIAS, SEED_LIMITS | SEED_SECOND },
      "{\"model\":\"embed\",\"input\":[[1,2],[3.0],[4,5,6]]}" },

    { "embeddings-foreign", { SEED_EMBEDDINGS, SEED_LIMITS | SEED_SECOND },
      "{\"model\":\"m\",\"input\":\"x\",\"max_tokens\":5}" },

    { "embeddings-mixed", { SEED_EMBEDDINGS, SEED_LIMITS | SEED_SECOND },
      "{\"model\":\"m\",\"input\":[[1],\"a\",[]]}" },

    { "not-object", { SEED_OPENAI, SEED_LIMITS }, "[1,2]" },

    { "not-json", { SEED_ANTHROPIC, SEED_LIMITS },
      "{\"model\":\"m\",\"messages\":[" },
};


/*
 * fuzz_provider's: a status line ("status [clock [cut]]"), headers, an
 * empty line and the body, as the providers send them.  See
 * fuzz_provider.c.
 */

#define SEED_GEMINI(quota_id, delay)                                          \
    "{\n  \"error\": {\n    \"code\": 429,\n    \"message\": \"You "          \
    "exceeded your current quota, please check your plan and billing "      \
    "details.\",\n    \"status\": \"RESOURCE_EXHAUSTED\",\n    \"details\": " \
    "[\n      {\n        \"@type\": \"type.googleapis.com/google.rpc."        \
    "QuotaFailure\",\n        \"violations\": [\n          {\n            "  \
    "\"quotaMetric\": \"generativelanguage.googleapis.com/generate_content_" \
    "free_tier_requests\",\n            \"quotaId\": \"" quota_id "\"\n     " \
    "     }\n        ]\n      },\n      {\n        \"@type\": \"type."       \
    "googleapis.com/google.rpc.RetryInfo\",\n        \"retryDelay\": \""     \
    delay "\"\n      }\n    ]\n  }\n}\n"

#define SEED_OPENAI_QUOTA                                                     \
    "{\n    \"error\": {\n        \"message\": \"You exceeded your current "  \
    "quota, please check your plan and billing details.\",\n        "       \
    "\"type\": \"insufficient_quota\",\n        \"param\": null,\n        "  \
    "\"code\": \"insufficient_quota\"\n    }\n}\n"


typedef struct {
    const char  *name;
    const char  *text;
} seed_provider_t;


static const seed_provider_t  seed_provider[] = {

    { "openai-rpm",
      "429\n"
      "x-ratelimit-limit-requests: 500\n"
      "x-ratelimit-remaining-requests: 0\n"
      "x-ratelimit-reset-requests: 120ms\n"
      "x-ratelimit-remaining-tokens: 29000\n"
      "x-ratelimit-reset-tokens: 2s\n"
      "\n"
      "{\"error\":{\"message\":\"Rate limit reached for gpt-4o-mini in "
      "organization org-K7pQ2x on requests per min (RPM): Limit 500, Used "
      "500, Requested 1. Please try again in 120ms. Visit https://platform."
      "openai.com/account/rate-limits to learn more.\",\"type\":"
      "\"requests\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}" },

    { "openai-tpm",
      "429\r\n"
      "retry-after-ms: 998\r\n"
      "retry-after: 1\r\n"
      "x-ratelimit-remaining-tokens: 0\r\n"
      "x-ratelimit-reset-tokens: 6m0s\r\n"
      "\r\n"
      "{\"error\":{\"message\":\"Rate limit reached for gpt-4o in "
      "organization org-K7pQ2x on tokens per min (TPM): Limit 30000, Used "
      "28500, Requested 2000. Please try again in 1.5s.\",\"type\":"
      "\"tokens\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}" },

    { "openai-rpd",
      "429\n"
      "x-ratelimit-remaining-requests: 0\n"
      "x-ratelimit-reset-requests: 23h59m0s\n"
      "\n"
      "{\"error\":{\"message\":\"Rate limit reached for gpt-4o-mini in "
      "organization org-K7pQ2x on requests per day (RPD): Limit 10000, "
      "Used 10000, Requested 1. Please try again in 8.64s.\",\"code\":"
      "\"rate_limit_exceeded\"}}" },

    { "openai-quota", "429\n\n" SEED_OPENAI_QUOTA },

    { "openai-quota-cut", "429 1718020800000 60\n\n" SEED_OPENAI_QUOTA },

    { "openai-billing-400",
      "400\n\n"
      "{\"error\":{\"message\":\"Billing hard limit has been reached\","
      "\"type\":\"invalid_request_error\",\"param\":null,"
      "\"code\":\"billing_hard_limit_reached\"}}" },

    { "anthropic-rate",
      "429 1718020800000\n"
      "retry-after: 21\n"
      "anthropic-ratelimit-requests-remaining: 49\n"
      "anthropic-ratelimit-requests-reset: 2024-06-10T12:00:01Z\n"
      "anthropic-ratelimit-input-tokens-remaining: 0\n"
      "anthropic-ratelimit-input-tokens-reset: 2024-06-10T12:00:21Z\n"
      "anthropic-ratelimit-output-tokens-remaining: 10000\n"
      "anthropic-ratelimit-output-tokens-reset: 2024-06-10T12:00:00.5Z\n"
      "anthropic-ratelimit-tokens-remaining: 0\n"
      "anthropic-ratelimit-tokens-reset: 2024-06-10T14:00:21+02:00\n"
      "\n"
      "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\","
      "\"message\":\"This request would exceed the rate limit for your "
      "organization of 50,000 input tokens per minute.\"}}" },

    { "anthropic-overloaded",
      "529\n\n"
      "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
      "\"message\":\"Overloaded\"}}" },

    { "anthropic-credit",
      "400\n\n"
      "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
      "\"message\":\"Your credit balance is too low to access the "
      "Anthropic API. Please go to Plans & Billing to upgrade or purchase "
      "credits.\"}}" },

    { "anthropic-usage",
      "400 1718020800000\n\n"
      "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
      "\"message\":\"You have reached your specified API usage limits. You "
      "will regain access on 2024-06-15 at 00:00 UTC.\"}}" },

    { "gemini-minute",
      "429\n\n"
      SEED_GEMINI("GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                  "34s") },

    { "gemini-day",
      "429 1730617200000\n\n"
      SEED_GEMINI("GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                  "43s") },

    { "gemini-503",
      "503\n\n"
      "{\"error\":{\"code\":503,\"message\":\"The model is overloaded. "
      "Please try again later.\",\"status\":\"UNAVAILABLE\"}}" },

    { "azure",
      "429\n"
      "retry-after: 7\n"
      "x-ratelimit-remaining-requests: 0\n"
      "\n"
      "{\"error\":{\"code\":\"429\",\"message\": \"Requests to the "
      "ChatCompletions_Create Operation under Azure OpenAI API version "
      "2024-02-01 have exceeded call rate limit of your current OpenAI S0 "
      "pricing tier. Please retry after 7 seconds. Please go here: "
      "https://aka.ms/oai/quotaincrease if you would like to further "
      "increase the default rate limit.\"}}" },

    { "dates",
      "429 1718020800000\n"
      "retry-after-ms: soon\n"
      "retry-after: Monday, 10-Jun-24 12:00:30 GMT\n"
      "\n" },

    { "asctime",
      "503 1718020800000\n"
      "Retry-After: Sun Jun  9 12:00:00 2024\n"
      "\n"
      "<html><body>Service Unavailable</body></html>" },

    { "imf-fixdate",
      "500\n"
      "RETRY-AFTER: Mon, 10 Jun 2024 12:00:30 GMT\n"
      "\n" },

    { "overflows",
      "429 -9223372036854775808 99999999999999999999\n"
      "retry-after-ms: 99999999999999999999999999\n"
      "retry-after: 184467440737095516160\n"
      "x-ratelimit-remaining-tokens: 99999999999999999999999\n"
      "x-ratelimit-reset-tokens: 9999999h9999999m\n"
      "\n"
      "try again in 99999999999999999999 hours and" },

    { "garbage",
      "429\n"
      "retry-after: Mon, 31 Feb 2024 25:61:61 GMT\n"
      "x-ratelimit-reset-requests: 1s2\n"
      "anthropic-ratelimit-tokens-reset: 2024-13-40T00:00:00Z\n"
      "no colon here\n"
      "\n"
      "\"retryDelay\": \"3 s\" retry after soon, regain access on 2024-" },

    { "ok", "200\nretry-after: 5\n\n{\"id\":\"chatcmpl-1\"}" },
};


/*
 * fuzz_pacer's: the conf (rpm, tpm, max_wait in 500 ms, max_queue, stale
 * in 100 ms, the ring when rpm is 0), then a program of ops.  See
 * fuzz_pacer.c.
 */

/* a tpm of 3k or 3k + 1 */
#define P_TPM(tpm)           (((tpm) * 2 + 2) / 3)
#define P_CONF(rpm, tpm, wait_ms, queue, stale_ms, ring)                      \
    (rpm) & 0xff, (rpm) >> 8, P_TPM(tpm) & 0xff, P_TPM(tpm) >> 8,           \
    (wait_ms) / 500, (queue), (stale_ms) / 100, (ring) - 1

/* the clock moves n (1 to 256) units: 1 ms, 50 ms, 1 s, 15 s */
#define P_MS                 0
#define P_50MS               1
#define P_S                  2
#define P_15S                3
#define P_ADVANCE(unit, n)   (unit) << 3, (n) - 1
#define P_LAG(ms)            4 << 3, (ms) / 8

/* the estimates and usages */
#define P_SMALL              0       /* v, below 256 */
#define P_VALUE              1       /* v */
#define P_BELOW_TPM          2       /* tpm - v */
#define P_ABOVE_TPM          3       /* tpm + v */
#define P_NEGATIVE           5       /* -v - 1 */
#define P_CAP                6       /* LLM_PACER_MAX - 128 + v */
#define P_EXTREME            7       /* v odd: INT64_MAX - v / 2; even: MIN */

/* the tickets: the k-th waiter, the k-th latest start, any, none */
#define P_WAITER(k)          (k)
#define P_STARTED(k)         (0x80 + (k))
#define P_ISSUED(k)          (0xc0 + (k))
#define P_NEVER(k)           (0xf0 + (k))

#define P_ASK(n, kind, v)                                                     \
                             1 | ((kind) | ((n) - 1) << 3) << 3,              \
                             (v) & 0xff, (v) >> 8
/* with more tenants than one (max_queue's bits 6-7), an ask says whose */
#define P_TENANTS(queue, n)  ((queue) | ((n) - 1) << 6)
#define P_ASK_FOR(n, kind, v, who)                                            \
                             P_ASK(n, kind, v), (who)
#define P_GO(pick)           2, (pick)
#define P_DUE(late)          3 | (late) << 3
#define P_CANCEL(pick)       4, (pick)
#define P_CORRECT(kind, pick, v)                                              \
                             5 | (kind) << 3, (pick), (v) & 0xff, (v) >> 8
#define P_NEXT               6
#define P_WINDOW             7


/* a burst of 8 at six a minute: 10 s apart, then quiet, then one */
static const uint8_t  seed_pacer_spacing[] = {
    P_CONF(6, 0, 120000, 16, 0, 1),
    P_ASK(4, P_SMALL, 1), P_ASK(4, P_SMALL, 1), P_NEXT,
    P_GO(P_WAITER(0)), P_GO(P_WAITER(1)),
    P_DUE(0), P_DUE(0), P_DUE(0), P_DUE(0), P_DUE(0), P_DUE(0), P_DUE(0),
    P_WINDOW, P_GO(P_STARTED(3)), P_ADVANCE(P_15S, 20),
    P_ASK(2, P_SMALL, 1), P_WINDOW, P_DUE(31), P_WINDOW
};

/* waits for tokens, brought forward by a correction; one too large */
static const uint8_t  seed_pacer_tokens[] = {
    P_CONF(0, 1000, 10000, 8, 0, 64),
    P_ASK(3, P_VALUE, 400), P_NEXT, P_ADVANCE(P_S, 5),
    P_CORRECT(P_VALUE, P_STARTED(0), 100), P_NEXT, P_DUE(0),
    P_CORRECT(P_SMALL, P_STARTED(2), 0), P_ASK(1, P_ABOVE_TPM, 1),
    P_ASK(1, P_BELOW_TPM, 0), P_WINDOW, P_ADVANCE(P_15S, 4), P_WINDOW,
    P_DUE(0), P_CORRECT(P_VALUE, P_STARTED(0), 1000), P_WINDOW
};

/* the first waiter goes silent: dropped, its go finds nothing */
static const uint8_t  seed_pacer_stale[] = {
    P_CONF(60, 0, 60000, 8, 2000, 1),
    P_ASK(4, P_SMALL, 1), P_ADVANCE(P_S, 3), P_NEXT,
    P_GO(P_ISSUED(2)), P_GO(P_WAITER(0)), P_ADVANCE(P_MS, 200),
    P_GO(P_WAITER(1)), P_DUE(0), P_DUE(0), P_ADVANCE(P_S, 10), P_NEXT,
    P_WINDOW
};

/* only the requests ahead refuse: 1 s apart, 3 s at most */
static const uint8_t  seed_pacer_too_long[] = {
    P_CONF(60, 0, 3000, 32, 0, 1),
    P_ASK(4, P_SMALL, 1), P_ASK(2, P_SMALL, 1), P_CANCEL(P_WAITER(1)),
    P_ASK(2, P_SMALL, 1), P_ADVANCE(P_MS, 1), P_ASK(1, P_SMALL, 1),
    P_DUE(0), P_ASK(1, P_SMALL, 1), P_DUE(5), P_DUE(0), P_DUE(0),
    P_WINDOW
};

/* two may wait: the third is refused, and taken once one gives up */
static const uint8_t  seed_pacer_queue_full[] = {
    P_CONF(60, 0, 60000, 2, 0, 1),
    P_ASK(4, P_SMALL, 1), P_CANCEL(P_WAITER(0)), P_ASK(2, P_SMALL, 1),
    P_DUE(0), P_ASK(1, P_SMALL, 1), P_WINDOW
};

/* a token-bound plan is queued however far */
static const uint8_t  seed_pacer_far[] = {
    P_CONF(120, 1000, 1000, 16, 0, 1),
    P_ASK(4, P_BELOW_TPM, 100), P_NEXT, P_CANCEL(P_WAITER(2)),
    P_CORRECT(P_SMALL, P_STARTED(0), 10), P_NEXT, P_DUE(0), P_DUE(0),
    P_WINDOW
};

/* cancels first, middle and last; a cancelled ticket is gone */
static const uint8_t  seed_pacer_cancel[] = {
    P_CONF(30, 6000, 60000, 10, 0, 1),
    P_ASK(4, P_VALUE, 700), P_ASK(4, P_VALUE, 700),
    P_CANCEL(P_WAITER(0)), P_CANCEL(P_WAITER(2)), P_CANCEL(P_WAITER(4)),
    P_GO(P_ISSUED(0)), P_CANCEL(P_ISSUED(0)),
    P_CORRECT(P_SMALL, P_WAITER(0), 1), P_NEXT, P_DUE(0),
    P_CANCEL(P_STARTED(0)), P_DUE(1), P_WINDOW
};

/*
 * Four tenants share a queue of 8: one fills it alone, the others take
 * places of its newest, their starts go round; one asks again at once
 */
static const uint8_t  seed_pacer_tenants[] = {
    P_CONF(60, 6000, 60000, P_TENANTS(8, 4), 0, 1),
    P_ASK_FOR(4, P_SMALL, 10, 0), P_ASK_FOR(4, P_SMALL, 10, 0),
    P_ASK_FOR(2, P_SMALL, 10, 1), P_ASK_FOR(1, P_VALUE, 2000, 2),
    P_ASK_FOR(4, P_SMALL, 10, 3), P_GO(P_ISSUED(1)), P_NEXT, P_DUE(0),
    P_ASK_FOR(1, P_SMALL, 10, 1), P_DUE(0), P_CANCEL(P_WAITER(2)),
    P_DUE(0), P_ASK_FOR(1, P_SMALL, 10, 1), P_DUE(0), P_DUE(0),
    P_CORRECT(P_SMALL, P_STARTED(0), 1), P_DUE(0), P_DUE(0), P_DUE(0),
    P_WINDOW
};

/* and with tokens binding, a stale one, a tenant asking often */
static const uint8_t  seed_pacer_tenants_tokens[] = {
    P_CONF(0, 1000, 30000, P_TENANTS(6, 3), 2000, 32),
    P_ASK_FOR(4, P_VALUE, 300, 0), P_ASK_FOR(2, P_VALUE, 300, 1),
    P_ASK_FOR(3, P_VALUE, 200, 2), P_DUE(0), P_ADVANCE(P_S, 3),
    P_ASK_FOR(1, P_SMALL, 5, 1), P_CORRECT(P_SMALL, P_STARTED(0), 0),
    P_DUE(0), P_DUE(0), P_ADVANCE(P_15S, 4), P_DUE(0), P_DUE(0),
    P_WINDOW
};

/* calls from a worker whose clock lags */
static const uint8_t  seed_pacer_lag[] = {
    P_CONF(120, 21000, 30000, 20, 5000, 1),
    P_LAG(400), P_ASK(4, P_VALUE, 3000), P_ADVANCE(P_MS, 250), P_DUE(0),
    P_LAG(0), P_DUE(3), P_LAG(2000), P_ASK(2, P_VALUE, 3000), P_DUE(0),
    P_ADVANCE(P_50MS, 10), P_LAG(1000), P_NEXT, P_WINDOW, P_DUE(0),
    P_WINDOW
};

/* negative, capped and extreme estimates and usages, odd tickets */
static const uint8_t  seed_pacer_extremes[] = {
    P_CONF(600, 98302, 127500, 63, 25500, 1),
    P_ASK(1, P_NEGATIVE, 9), P_ASK(1, P_CAP, 0), P_ASK(1, P_EXTREME, 1),
    P_ASK(1, P_EXTREME, 0), P_ASK(4, P_BELOW_TPM, 0),
    P_CORRECT(P_EXTREME, P_STARTED(0), 1),
    P_CORRECT(P_EXTREME, P_STARTED(1), 0),
    P_CORRECT(P_CAP, P_STARTED(0), 0xffff), P_NEXT,
    P_GO(P_NEVER(0)), P_GO(P_NEVER(3)), P_GO(P_NEVER(5)),
    P_GO(P_NEVER(8)), P_CANCEL(P_NEVER(4)),
    P_CORRECT(P_SMALL, P_NEVER(1), 5), P_DUE(0), P_WINDOW
};

/* no limit but the ring: 4 a minute, and nobody waits */
static const uint8_t  seed_pacer_ring[] = {
    P_CONF(0, 0, 0, 0, 0, 4),
    P_ASK(4, P_VALUE, 0xffff), P_ASK(1, P_SMALL, 1), P_WINDOW,
    P_ADVANCE(P_S, 59), P_ASK(1, P_SMALL, 1), P_ADVANCE(P_S, 1),
    P_ASK(2, P_SMALL, 1), P_WINDOW
};


/*
 * fuzz_fair's: the clock's start, the configuration (capacity, burst,
 * share_ms, active_ms, inflight) and four classes (weight, minimum,
 * priority), then a program of ops.  See fuzz_fair.c.
 */

/* a value: its kind and 16 bits */
#define F_VAL(kind, v)       (kind), (v) & 0xff, ((v) >> 8) & 0xff
#define F_ZERO               F_VAL(0, 0)
#define F_N(v)               F_VAL(1, v)             /* below 65,536 */
#define F_K(v)               F_VAL(2, v)             /* thousands */
#define F_M(v)               F_VAL(3, v)             /* millions */
#define F_NEAR_MAX(d)        F_VAL(4, 128 + (d))     /* 10^12 + d */
#define F_NEG(v)             F_VAL(5, (v) - 1)       /* -v */
#define F_INT64_MAX          F_VAL(6, 1)
#define F_INT64_MIN          F_VAL(6, 0)
#define F_T(v)               F_VAL(7, v)             /* 10^12 times v */

/* the clock starts at 1718020800000 ms, or at 0 (a host just booted) */
#define F_CLOCK_NOW          0
#define F_CLOCK_BOOT         1
#define F_CLOCK_2_40         3

#define F_CLASS(weight, minimum, priority)                                    \
                             weight, minimum, (uint8_t) (priority)

/* the clock's steps */
#define F_SAME               0
#define F_MS(n)              (n)                     /* 1 to 63 */
#define F_50MS(n)            (0x3f + (n))            /* n x 50 ms, n <= 64 */
#define F_S(n)               (0x7f + (n))            /* 1 to 64 s */
#define F_MIN(n)             (0xbf + (n))            /* 1 to 48 minutes */
#define F_H(n)               (0xef + (n))            /* 1 to 8 hours */
#define F_BACK(k)            (0xf8 + (k))            /* 8 << k ms back */

/* a settle's usage: as given, as reserved, reserved less it, more */
#define F_USED               0
#define F_AS_RESERVED        1
#define F_LESS               2
#define F_MORE               3

#define F_OP(op, t, x, step) (op) | (t) << 4 | (x) << 6, (step)

/* a touch asks 100,000 tokens: whole in most of the seeds' zones */
#define F_TOUCH(t, cls, step)                F_OP(0, t, cls, step), F_K(100)
#define F_TOUCH_COST(t, cls, step, cost)     F_OP(0, t, cls, step), cost
#define F_EXPIRE(t, step)                    F_OP(1, t, 0, step)
#define F_ADMIT(t, step, cost)               F_OP(2, t, 0, step), cost
#define F_SETTLE(t, how, step, reserved, used)                               \
                             F_OP(3, t, how, step), reserved, used
#define F_START(step)                        F_OP(4, 0, 0, step)
#define F_END(step)                          F_OP(5, 0, 0, step)
#define F_PRESSURE(step)                     F_OP(6, 0, 0, step)
#define F_PRESSURE_SENT(x, step)             F_OP(6, 0, x, step)
#define F_RECONF(step, capacity, burst, share_ms, active_ms, inflight)       \
                             F_OP(7, 0, 0, step), capacity, burst, share_ms, \
                             active_ms, inflight
#define F_RATE(t, step)                      F_OP(8, t, 0, step)
#define F_CAPACITY(step)                     F_OP(9, 0, 0, step)
#define F_CEILING(step)                      F_OP(10, 0, 0, step)
#define F_REQUEST(t, cls, step, cost)        F_OP(13, t, cls, step), cost
#define F_DONE(t, how, step, reserved, used)                                 \
                             F_OP(14, t, how, step), reserved, used
#define F_SWEEP(step)                        F_OP(15, 0, 0, step)

/* an op again and again: variadic, as an op is more than one byte */
#define F_5(...)             __VA_ARGS__, __VA_ARGS__, __VA_ARGS__,         \
                             __VA_ARGS__, __VA_ARGS__
#define F_15(...)            F_5(__VA_ARGS__), F_5(__VA_ARGS__),            \
                             F_5(__VA_ARGS__)

/* 600,000 a minute, the pool's burst and the shares' 10 s by default */
#define F_CONF_600K          F_K(600), F_ZERO, F_ZERO, F_ZERO, F_ZERO
#define F_CLASSES_1_1_2                                                       \
    F_CLASS(F_N(1), F_ZERO, 1), F_CLASS(F_N(1), F_ZERO, 1),                  \
    F_CLASS(F_N(2), F_ZERO, 1), F_CLASS(F_N(1), F_ZERO, 0)


/* c goes idle: expired after active_ms (3 s), a and b share its part */
static const uint8_t  seed_fair_idle[] = {
    F_CLOCK_NOW, F_K(60), F_ZERO, F_ZERO, F_K(3), F_ZERO,
    F_CLASS(F_N(1), F_ZERO, 1), F_CLASS(F_N(2), F_ZERO, 1),
    F_CLASS(F_N(1), F_K(6), 2), F_CLASS(F_N(1), F_ZERO, 0),
    F_REQUEST(0, 0, F_SAME, F_N(500)), F_REQUEST(1, 1, F_SAME, F_N(500)),
    F_REQUEST(2, 2, F_SAME, F_N(500)), F_RATE(0, F_SAME), F_RATE(2, F_SAME),
    F_DONE(0, F_AS_RESERVED, F_S(1), F_N(500), F_ZERO),
    F_DONE(1, F_LESS, F_SAME, F_N(500), F_N(200)),
    F_DONE(2, F_AS_RESERVED, F_SAME, F_N(500), F_ZERO),
    F_SWEEP(F_S(1)), F_REQUEST(0, 0, F_SAME, F_N(500)),
    F_REQUEST(1, 1, F_SAME, F_N(500)), F_SWEEP(F_50MS(19)),
    F_EXPIRE(2, F_50MS(1)), F_RATE(0, F_SAME), F_RATE(1, F_SAME),
    F_ADMIT(0, F_SAME, F_K(20)), F_ADMIT(0, F_SAME, F_K(20)),
    F_TOUCH(2, 3, F_S(2)), F_RATE(2, F_SAME), F_SWEEP(F_SAME),
    F_SETTLE(2, F_AS_RESERVED, F_SAME, F_N(500), F_ZERO),
    F_SWEEP(F_MIN(1)), F_RATE(0, F_SAME), F_TOUCH(3, 0, F_SAME),
    F_REQUEST(3, 0, F_SAME, F_K(1))
};

/*
 * A saturated upstream: halved once a second down to a tenth, not again
 * within the second, nor for requests sent before; the refusals the
 * cluster's; all of it back in 20 s.
 */
static const uint8_t  seed_fair_pressure[] = {
    F_CLOCK_NOW, F_K(600), F_ZERO, F_ZERO, F_ZERO, F_N(40),
    F_CLASS(F_N(1), F_ZERO, 1), F_CLASS(F_N(1), F_ZERO, 3),
    F_CLASS(F_N(3), F_K(60), 0), F_CLASS(F_N(1), F_ZERO, 2),
    F_REQUEST(0, 0, F_SAME, F_K(5)), F_REQUEST(1, 1, F_SAME, F_K(5)),
    F_REQUEST(2, 2, F_SAME, F_K(5)), F_REQUEST(0, 0, F_MS(20), F_K(5)),
    F_REQUEST(1, 1, F_SAME, F_K(5)), F_REQUEST(2, 2, F_SAME, F_K(5)),
    F_PRESSURE(F_50MS(10)), F_CAPACITY(F_SAME), F_CEILING(F_SAME),
    F_PRESSURE(F_50MS(19)), F_REQUEST(0, 0, F_SAME, F_K(5)),
    F_PRESSURE(F_50MS(1)), F_ADMIT(1, F_SAME, F_K(50)),
    F_PRESSURE(F_S(1)), F_PRESSURE(F_S(1)), F_PRESSURE(F_S(1)),
    F_PRESSURE(F_S(1)), F_CAPACITY(F_SAME), F_RATE(2, F_SAME),
    F_REQUEST(2, 2, F_SAME, F_K(100)), F_REQUEST(3, 3, F_SAME, F_K(1)),
    F_CAPACITY(F_S(5)), F_CEILING(F_SAME),
    F_DONE(0, F_MORE, F_SAME, F_K(5), F_K(5)),
    F_REQUEST(0, 0, F_SAME, F_K(5)), F_CAPACITY(F_S(15)),
    F_PRESSURE(F_SAME), F_PRESSURE(F_S(1)), F_CEILING(F_S(20)),
    F_REQUEST(1, 1, F_SAME, F_K(5)), F_PRESSURE_SENT(2, F_S(2)),
    F_PRESSURE_SENT(3, F_SAME), 40, F_PRESSURE_SENT(1, F_SAME),
    F_PRESSURE_SENT(3, F_S(2)), 10
};

/*
 * 30 at once: halved to 15, 15 end, the next waits 667 ms for the
 * recovering ceiling and then starts; none in flight: a ceiling of one;
 * reloads below the flights, and without a ceiling.
 */
static const uint8_t  seed_fair_ceiling[] = {
    F_CLOCK_NOW, F_ZERO, F_ZERO, F_ZERO, F_ZERO, F_N(30),
    F_CLASSES_1_1_2,
    F_15(F_START(F_SAME)), F_15(F_START(F_SAME)), F_START(F_SAME),
    F_PRESSURE(F_SAME), F_CEILING(F_SAME), F_15(F_END(F_SAME)),
    F_START(F_SAME), F_START(F_50MS(13)), F_START(F_MS(17)),
    F_START(F_SAME), F_CEILING(F_S(20)), F_START(F_SAME),
    F_15(F_END(F_SAME)), F_5(F_END(F_SAME)), F_PRESSURE(F_S(2)),
    F_CEILING(F_SAME), F_START(F_SAME), F_START(F_SAME),
    F_RECONF(F_SAME, F_ZERO, F_ZERO, F_ZERO, F_ZERO, F_N(10)),
    F_RECONF(F_MS(1), F_ZERO, F_ZERO, F_ZERO, F_ZERO, F_ZERO),
    F_START(F_SAME), F_START(F_SAME), F_START(F_SAME),
    F_RECONF(F_MS(1), F_ZERO, F_ZERO, F_ZERO, F_ZERO, F_N(2)),
    F_START(F_SAME), F_PRESSURE(F_SAME), F_START(F_50MS(10)),
    F_5(F_END(F_SAME)), F_START(F_SAME)
};

/*
 * Reloads: the capacity cut while the pool owes (owed a new burst at
 * most), to none, to 10^12 and beyond; pressure forgotten.
 */
static const uint8_t  seed_fair_reconf[] = {
    F_CLOCK_NOW, F_M(6), F_ZERO, F_ZERO, F_ZERO, F_ZERO,
    F_CLASS(F_N(1), F_ZERO, 1), F_CLASS(F_N(2), F_ZERO, 3),
    F_CLASS(F_N(1), F_K(100), 0), F_CLASS(F_N(1), F_ZERO, 2),
    F_REQUEST(0, 0, F_SAME, F_K(900)), F_REQUEST(1, 1, F_SAME, F_K(900)),
    F_RECONF(F_MS(1), F_K(60), F_ZERO, F_ZERO, F_ZERO, F_ZERO),
    F_ADMIT(0, F_SAME, F_K(1)), F_ADMIT(1, F_S(1), F_K(1)),
    F_PRESSURE(F_SAME),
    F_RECONF(F_MS(1), F_K(60), F_K(1), F_S(1), F_ZERO, F_N(4)),
    F_CAPACITY(F_SAME), F_REQUEST(2, 2, F_SAME, F_K(1)),
    F_RECONF(F_S(1), F_ZERO, F_ZERO, F_ZERO, F_ZERO, F_ZERO),
    F_REQUEST(0, 0, F_SAME, F_ZERO), F_REQUEST(0, 0, F_SAME, F_N(1)),
    F_RATE(2, F_SAME), F_SETTLE(0, F_MORE, F_SAME, F_N(1), F_K(5)),
    F_RECONF(F_S(1), F_NEAR_MAX(0), F_ZERO, F_N(60001), F_ZERO, F_ZERO),
    F_REQUEST(3, 3, F_SAME, F_NEAR_MAX(0)), F_RATE(3, F_SAME),
    F_RECONF(F_MS(1), F_T(7), F_T(9), F_NEG(1), F_NEG(1), F_M(9)),
    F_REQUEST(1, 1, F_S(10), F_T(1)), F_PRESSURE(F_SAME),
    F_RECONF(F_MS(1), F_M(6), F_ZERO, F_ZERO, F_ZERO, F_ZERO),
    F_CAPACITY(F_SAME)
};

/*
 * Minimums above the capacity: each in proportion; one expires and the
 * rest fit.  A weight of 0 counts as 1, a priority out of range is
 * brought into it, a tenant's tier changes.
 */
static const uint8_t  seed_fair_minimums[] = {
    F_CLOCK_NOW, F_K(100), F_ZERO, F_ZERO, F_ZERO, F_ZERO,
    F_CLASS(F_ZERO, F_K(80), 3), F_CLASS(F_N(1), F_K(50), 0),
    F_CLASS(F_M(2), F_ZERO, 2), F_CLASS(F_NEG(5), F_T(2), -1),
    F_TOUCH(0, 0, F_SAME), F_TOUCH(1, 1, F_SAME), F_RATE(0, F_SAME),
    F_RATE(1, F_SAME), F_REQUEST(0, 0, F_SAME, F_K(10)),
    F_REQUEST(1, 1, F_SAME, F_K(10)), F_REQUEST(1, 1, F_SAME, F_K(10)),
    F_TOUCH(2, 2, F_S(1)), F_RATE(2, F_SAME), F_SWEEP(F_S(9)),
    F_TOUCH(0, 0, F_SAME), F_TOUCH(2, 2, F_SAME), F_SWEEP(F_S(1)),
    F_RATE(0, F_SAME), F_RATE(2, F_SAME), F_TOUCH(3, 3, F_SAME),
    F_RATE(3, F_SAME), F_ADMIT(2, F_SAME, F_K(100)),
    F_TOUCH(0, 1, F_S(1)), F_RATE(0, F_SAME), F_TOUCH(3, 2, F_SAME),
    F_ADMIT(3, F_SAME, F_K(1))
};

/* every figure at its limit, in the configuration and the calls */
static const uint8_t  seed_fair_extremes[] = {
    F_CLOCK_2_40, F_INT64_MAX, F_INT64_MIN, F_INT64_MAX, F_INT64_MAX,
    F_INT64_MAX,
    F_CLASS(F_INT64_MAX, F_INT64_MAX, 127),
    F_CLASS(F_INT64_MIN, F_INT64_MIN, -128),
    F_CLASS(F_T(1000), F_NEAR_MAX(127), 3),
    F_CLASS(F_N(1), F_NEAR_MAX(-128), 0),
    F_REQUEST(0, 0, F_SAME, F_INT64_MAX),
    F_REQUEST(1, 1, F_SAME, F_INT64_MIN),
    F_REQUEST(2, 2, F_SAME, F_NEAR_MAX(1)),
    F_REQUEST(3, 3, F_SAME, F_T(65535)),
    F_SETTLE(0, F_USED, F_H(8), F_INT64_MIN, F_INT64_MAX),
    F_SETTLE(1, F_MORE, F_SAME, F_INT64_MAX, F_INT64_MAX),
    F_SETTLE(2, F_LESS, F_SAME, F_INT64_MIN, F_INT64_MAX),
    F_DONE(3, F_AS_RESERVED, F_BACK(7), F_INT64_MAX, F_ZERO),
    F_SWEEP(F_H(8)), F_PRESSURE(F_SAME), F_CAPACITY(F_BACK(7)),
    F_START(F_SAME), F_CEILING(F_SAME), F_ADMIT(0, F_SAME, F_INT64_MAX),
    F_RECONF(F_H(1), F_INT64_MIN, F_INT64_MAX, F_INT64_MIN, F_INT64_MIN,
             F_INT64_MIN),
    F_REQUEST(0, 1, F_SAME, F_NEAR_MAX(-1)), F_SWEEP(F_H(3)),
    F_RECONF(F_H(1), F_T(65535), F_NEAR_MAX(0), F_ZERO, F_T(1), F_M(1)),
    F_REQUEST(2, 0, F_SAME, F_T(1)), F_PRESSURE(F_MS(1)),
    F_RATE(2, F_SAME)
};

/*
 * Active for ever (active_ms near INT64_MAX): hours later still active,
 * not expired by a sum past int64_t; then a second.
 */
static const uint8_t  seed_fair_active[] = {
    F_CLOCK_NOW, F_K(60), F_ZERO, F_ZERO, F_INT64_MAX, F_ZERO,
    F_CLASSES_1_1_2,
    F_REQUEST(0, 0, F_SAME, F_K(1)), F_REQUEST(1, 1, F_SAME, F_K(1)),
    F_EXPIRE(0, F_H(8)), F_SWEEP(F_H(8)),
    F_RECONF(F_SAME, F_K(60), F_ZERO, F_ZERO, F_VAL(6, 201), F_ZERO),
    F_SWEEP(F_H(8)), F_RATE(0, F_SAME),
    F_RECONF(F_SAME, F_K(60), F_ZERO, F_ZERO, F_K(1), F_ZERO),
    F_EXPIRE(0, F_SAME), F_TOUCH(0, 0, F_SAME), F_SWEEP(F_50MS(19)),
    F_SWEEP(F_50MS(1))
};

/*
 * Demand: three tenants ask a few tokens (parts of a few per million),
 * one of them a trickle, one asks a quarter of its share and counts
 * whole; 20 s on a request expires the stale ones, oldest first, without
 * a sweep; one comes back after its demand decayed.
 */
static const uint8_t  seed_fair_demand[] = {
    F_CLOCK_NOW, F_K(600), F_ZERO, F_ZERO, F_ZERO, F_ZERO,
    F_CLASSES_1_1_2,
    F_REQUEST(0, 0, F_SAME, F_N(8)), F_REQUEST(1, 1, F_MS(1), F_N(8)),
    F_REQUEST(2, 2, F_MS(1), F_N(8)), F_RATE(0, F_SAME),
    F_REQUEST(3, 3, F_MS(1), F_K(25)), F_RATE(3, F_SAME),
    F_TOUCH_COST(0, 0, F_S(5), F_N(8)), F_TOUCH_COST(0, 0, F_S(5), F_N(8)),
    F_RATE(1, F_SAME), F_REQUEST(3, 3, F_S(4), F_K(5)),
    F_REQUEST(3, 3, F_S(20), F_K(5)), F_RATE(3, F_SAME),
    F_TOUCH_COST(1, 1, F_S(3), F_K(100)), F_RATE(1, F_SAME),
    F_REQUEST(2, 2, F_S(9), F_N(1)), F_REQUEST(2, 2, F_MS(1), F_ZERO),
    F_TOUCH_COST(0, 0, F_BACK(7), F_INT64_MAX), F_RATE(0, F_SAME)
};

/* nothing configured: a capacity of 0 admits no cost, no ceiling */
static const uint8_t  seed_fair_zero[] = {
    F_CLOCK_BOOT, F_ZERO, F_ZERO, F_ZERO, F_ZERO, F_ZERO,
    F_CLASS(F_ZERO, F_ZERO, 0), F_CLASS(F_ZERO, F_ZERO, 0),
    F_CLASS(F_ZERO, F_ZERO, 0), F_CLASS(F_ZERO, F_ZERO, 0),
    F_REQUEST(0, 0, F_SAME, F_ZERO), F_REQUEST(1, 1, F_SAME, F_N(1)),
    F_START(F_SAME), F_START(F_SAME), F_END(F_SAME), F_END(F_SAME),
    F_END(F_SAME), F_PRESSURE(F_S(1)), F_CAPACITY(F_SAME),
    F_CEILING(F_SAME), F_SETTLE(0, F_LESS, F_SAME, F_N(1), F_N(1)),
    F_RATE(0, F_SAME), F_SWEEP(F_S(10))
};

/*
 * Workers' clocks a little apart: calls up to a second behind the
 * latest, around a reduction and the ceiling; from a host just booted.
 */
static const uint8_t  seed_fair_clock[] = {
    F_CLOCK_BOOT, F_K(600), F_ZERO, F_ZERO, F_K(1), F_N(4),
    F_CLASSES_1_1_2,
    F_REQUEST(0, 0, F_SAME, F_K(2)), F_REQUEST(1, 1, F_BACK(3), F_K(2)),
    F_REQUEST(2, 2, F_MS(40), F_K(2)), F_REQUEST(0, 0, F_BACK(6), F_K(2)),
    F_PRESSURE(F_S(2)), F_CAPACITY(F_BACK(7)), F_PRESSURE(F_SAME),
    F_CEILING(F_MS(50)), F_START(F_BACK(2)), F_START(F_SAME),
    F_CAPACITY(F_S(1)), F_PRESSURE(F_BACK(0)), F_PRESSURE(F_50MS(1)),
    F_CEILING(F_BACK(7)), F_START(F_SAME), F_END(F_BACK(5)),
    F_EXPIRE(1, F_50MS(19)), F_EXPIRE(1, F_BACK(5)), F_TOUCH(1, 1, F_SAME),
    F_SWEEP(F_BACK(4)), F_ADMIT(1, F_SAME, F_K(3)),
    F_DONE(1, F_MORE, F_BACK(7), F_K(3), F_K(1)), F_CAPACITY(F_S(1))
};


/* fuzz_provider's Gemini body, chunked as it came: 7 bytes a chunk */

static size_t
seed_chunked(char *out, size_t cap, const char *head, const char *body)
{
    size_t  n, k, o, len;

    o = (size_t) snprintf(out, cap, "%s", head);
    len = strlen(body);

    for (k = 0; k < len && o + 32 < cap; k += n) {
        n = len - k < 7 ? len - k : 7;
        o += (size_t) snprintf(out + o, cap - o, "%zx%s\r\n", n,
                               k == 0 ? ";ext=1" : "");
        memcpy(out + o, body + k, n);
        o += n;
        o += (size_t) snprintf(out + o, cap - o, "\r\n");
    }

    o += (size_t) snprintf(out + o, cap - o, "0\r\n\r\n");

    return o;
}


static void seed_mkdir(const char *dir, const char *sub);
static void seed_write(const char *dir, const char *sub, const char *name,
    const void *p, size_t len);
static size_t seed_settle(uint8_t *buf, size_t cap, int full);
static void seed_entry(llm_key_entry_t *e, int64_t key_id, const char *tier,
    const char *tenant, const char *models, uint8_t caps);
static void seed_pacer(const char *dir);
static void seed_fair(const char *dir);


int
main(int argc, char **argv)
{
    char              line[LLM_KEY_LINE_MAX + 2];
    size_t            i, n, m;
    uint8_t           buf[4096];
    const char       *dir;
    llm_lease_t       l;
    llm_record_t      rec;
    llm_key_entry_t   e;

    if (argc != 2) {
        fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
        return 2;
    }

    dir = argv[1];

    seed_mkdir(dir, "inspect");
    seed_mkdir(dir, "record");
    seed_mkdir(dir, "key");
    seed_mkdir(dir, "provider");
    seed_mkdir(dir, "pacer");
    seed_mkdir(dir, "fair");

    for (i = 0; i < sizeof(seed_inspect) / sizeof(seed_inspect[0]); i++) {
        n = strlen(seed_inspect[i].body);

        memcpy(buf, seed_inspect[i].conf, 2);
        memcpy(buf + 2, seed_inspect[i].body, n);

        seed_write(dir, "inspect", seed_inspect[i].name, buf, n + 2);
    }

    /* the record codec */

    n = seed_settle(buf, sizeof(buf), 0);
    seed_write(dir, "record", "settle", buf, n);
    seed_write(dir, "record", "settle-short", buf, n - 1);

    n = seed_settle(buf, sizeof(buf), 1);
    seed_write(dir, "record", "settle-full", buf, n);

    /* as older nginxes send it: version 3, without what the upstream
       said, and version 2, without up_api and backend either */
    n = seed_settle(buf, sizeof(buf), 0) - 3 - 6 - 6 - 25;
    buf[3] = (uint8_t) (n - 4);
    buf[4] = 3;
    seed_write(dir, "record", "settle-v3", buf, n);

    n -= 2 + 8;
    buf[3] = (uint8_t) (n - 4);
    buf[4] = LLM_FRAME_VERSION;
    seed_write(dir, "record", "settle-v2", buf, n);

    m = seed_settle(buf, sizeof(buf), 0);
    memcpy(buf + m, buf, m);
    buf[m + 3] = (uint8_t) (n - 4);
    buf[m + 4] = LLM_FRAME_VERSION;
    seed_write(dir, "record", "settle-v4-v2", buf, m + n);

    memset(&rec, 0, sizeof(llm_record_t));
    rec.type = LLM_REC_ACK;
    llm_record_set_request_id(&rec, "req-0001", 8);

    m = seed_settle(buf, sizeof(buf), 0);
    n = llm_record_encode(&rec, buf + m, sizeof(buf) - m);
    seed_write(dir, "record", "ack", buf + m, n);
    seed_write(dir, "record", "settle-ack", buf, m + n);

    memset(&l, 0, sizeof(llm_lease_t));
    l.type = LLM_REC_LEASE_REQ;
    l.tenant_id = 7;
    l.key_id = 12;
    l.want = 5000000000;
    l.until_ms = 1790000000000;
    l.model_len = 6;
    memcpy(l.model, "gpt-4o", 6);

    n = llm_record_lease_encode(&l, buf, sizeof(buf));
    seed_write(dir, "record", "lease-req", buf, n);

    l.type = LLM_REC_LEASE_RETURN;
    n = llm_record_lease_encode(&l, buf, sizeof(buf));
    seed_write(dir, "record", "lease-return", buf, n);

    l.type = LLM_REC_LEASE;
    l.granted = 5000000000;
    l.remaining = -1;
    l.resets_at_ms = 1790006400000;
    l.prices[LLM_LEASE_IN] = 2500000;
    l.prices[LLM_LEASE_OUT] = 10000000;
    l.prices[LLM_LEASE_CACHED] = 1250000;
    l.prices[LLM_LEASE_CACHE_WRITE] = -1;

    n = llm_record_lease_encode(&l, buf, sizeof(buf));
    seed_write(dir, "record", "lease", buf, n);

    /* demand and share: no model */
    l.type = LLM_REC_SHARE_REQ;
    l.key_id = 0;
    l.want = 1200;
    l.model_len = 0;
    m = llm_record_lease_encode(&l, buf, sizeof(buf));

    l.type = LLM_REC_SHARE;
    l.granted = 500000;
    n = llm_record_lease_encode(&l, buf + m, sizeof(buf) - m);
    seed_write(dir, "record", "share", buf + m, n);
    seed_write(dir, "record", "share-req-share", buf, m + n);

    /* accountd's side: settles and lease requests mixed, the last cut */
    m = seed_settle(buf, sizeof(buf), 0);
    l.type = LLM_REC_LEASE_REQ;
    m += llm_record_lease_encode(&l, buf + m, sizeof(buf) - m);
    m += seed_settle(buf + m, sizeof(buf) - m, 1);
    seed_write(dir, "record", "mixed", buf, m - 3);

    /* the key snapshot */

    n = (size_t) snprintf((char *) buf, sizeof(buf),
            LLM_KEY_SNAPSHOT_HEADER "\n" LLM_KEY_GENERATION "1790000000123\n"
            SEED_HASH " 1 1 free acme 0 * tk\n"
            SEED_HASH " 12 7 pro acme-2 1700000000 gpt-4o,gpt-4o-mini -\n"
            "# a comment\n"
            "\n"
            SEED_HASH " 9223372036854775807 3 t.1 T_2 0 "
            "o1:2024/x+y@z,claude-3.5 k\n");
    seed_write(dir, "key", "snapshot", buf, n);

    n = (size_t) snprintf((char *) buf, sizeof(buf),
            LLM_KEY_SNAPSHOT_HEADER_2 "\n"
            SEED_HASH " 5 6 gold bigco 1790000000 *\n");
    seed_write(dir, "key", "snapshot-v2", buf, n);

    /* every field at its longest */
    seed_entry(&e, INT64_MAX, NULL, NULL, NULL, LLM_KEY_CAP_TENANT);
    n = llm_key_format_line(&e, line, sizeof(line));
    seed_write(dir, "key", "line-longest", line, n);

    n = llm_key_encode_begin(buf, sizeof(buf), LLM_REC_KEYS_BEGIN,
                             1790000000123, 2);
    seed_entry(&e, 1, "free", "acme", "*", LLM_KEY_CAP_TENANT);
    n += llm_key_encode_entry(buf + n, sizeof(buf) - n, &e);
    seed_entry(&e, 12, "pro", "acme-2", "gpt-4o,o1:2024/x+y", 0);
    n += llm_key_encode_entry(buf + n, sizeof(buf) - n, &e);
    n += llm_key_encode_begin(buf + n, sizeof(buf) - n, LLM_REC_KEYS_END,
                              1790000000123, 2);
    seed_write(dir, "key", "key-set", buf, n);

    /* an older accountd's KEY frame: no caps byte */
    seed_entry(&e, 3, "silver", "tenant_1", "gpt-4o", LLM_KEY_CAP_KEY);
    n = llm_key_encode_entry(buf, sizeof(buf), &e);
    buf[3]--;
    seed_write(dir, "key", "key-no-caps", buf, n - 1);

    seed_entry(&e, INT64_MAX, NULL, NULL, NULL,
               LLM_KEY_CAP_TENANT | LLM_KEY_CAP_KEY);
    n = llm_key_encode_entry(buf, sizeof(buf), &e);
    seed_write(dir, "key", "key-longest", buf, n);

    n = (size_t) snprintf((char *) buf, sizeof(buf), "  %s%s\n",
                          SEED_HASH, SEED_HASH);
    seed_write(dir, "key", "secret", buf, n);

    seed_write(dir, "key", "client-key",
               "llmgw_live_0123456789abcdefghijABCDEFGHIJ0116jczf",
               LLM_KEY_LEN);

    /* providers' refusals */

    for (i = 0; i < sizeof(seed_provider) / sizeof(seed_provider[0]); i++) {
        seed_write(dir, "provider", seed_provider[i].name,
                   seed_provider[i].text, strlen(seed_provider[i].text));
    }

    n = seed_chunked((char *) buf, sizeof(buf), "429\n\n",
            SEED_GEMINI("GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                        "34s"));
    seed_write(dir, "provider", "gemini-chunked", buf, n);

    seed_pacer(dir);
    seed_fair(dir);

    return 0;
}


#define seed_pacer_write(dir, name, a)                                        \
    seed_write(dir, "pacer", name, a, sizeof(a))

static void
seed_pacer(const char *dir)
{
    size_t   n, i;
    uint8_t  buf[8 + 600 * 4 + 16];

    static const uint8_t  conf[] = { P_CONF(600, 90000, 5000, 63, 0, 1) };
    static const uint8_t  ask[] = { P_ASK(1, P_VALUE, 150), P_DUE(0) };
    static const uint8_t  end[] = {
        P_ASK(4, P_VALUE, 150), P_NEXT, P_CORRECT(P_SMALL, P_STARTED(9), 0),
        P_NEXT, P_DUE(0), P_WINDOW
    };

    seed_pacer_write(dir, "spacing", seed_pacer_spacing);
    seed_pacer_write(dir, "tokens", seed_pacer_tokens);
    seed_pacer_write(dir, "stale", seed_pacer_stale);
    seed_pacer_write(dir, "too-long", seed_pacer_too_long);
    seed_pacer_write(dir, "queue-full", seed_pacer_queue_full);
    seed_pacer_write(dir, "far", seed_pacer_far);
    seed_pacer_write(dir, "cancel", seed_pacer_cancel);
    seed_pacer_write(dir, "lag", seed_pacer_lag);
    seed_pacer_write(dir, "extremes", seed_pacer_extremes);
    seed_pacer_write(dir, "ring", seed_pacer_ring);
    seed_pacer_write(dir, "tenants", seed_pacer_tenants);
    seed_pacer_write(dir, "tenants-tokens", seed_pacer_tenants_tokens);

    /* a full minute: 600 of 150 tokens, RPM and TPM reached together */
    memcpy(buf, conf, sizeof(conf));
    n = sizeof(conf);

    for (i = 0; i < 600; i++) {
        memcpy(buf + n, ask, sizeof(ask));
        n += sizeof(ask);
    }

    memcpy(buf + n, end, sizeof(end));
    n += sizeof(end);

    seed_write(dir, "pacer", "full-minute", buf, n);
}


#define seed_fair_write(dir, name, a)                                         \
    seed_write(dir, "fair", name, a, sizeof(a))

static void
seed_fair(const char *dir)
{
    size_t   n, i, k;
    uint8_t  buf[64 + 80 * 39 + 512];

    static const uint8_t  conf[] = { F_CLOCK_NOW, F_CONF_600K,
                                     F_CLASSES_1_1_2 };
    static const uint8_t  congestion_end[] = {
        F_RATE(0, F_SAME), F_RATE(1, F_SAME), F_RATE(2, F_SAME),
        F_SWEEP(F_S(5)), F_SWEEP(F_S(6)), F_REQUEST(0, 0, F_SAME, F_K(1))
    };
    static const uint8_t  overuse_conf[] = {
        F_CLOCK_NOW, F_K(60), F_ZERO, F_ZERO, F_ZERO, F_ZERO,
        F_CLASSES_1_1_2, F_TOUCH(0, 0, F_SAME), F_TOUCH(1, 1, F_SAME)
    };
    static const uint8_t  overuse[] = {
        F_SETTLE(0, F_USED, F_SAME, F_ZERO, F_INT64_MAX),
        F_SETTLE(2, F_MORE, F_SAME, F_ZERO, F_NEAR_MAX(0))
    };
    static const uint8_t  overuse_end[] = {
        F_ADMIT(0, F_SAME, F_K(1)), F_ADMIT(1, F_SAME, F_K(1)),
        F_ADMIT(0, F_S(10), F_K(1)), F_TOUCH(2, 2, F_SAME),
        F_ADMIT(2, F_SAME, F_K(1))
    };

    seed_fair_write(dir, "idle", seed_fair_idle);
    seed_fair_write(dir, "pressure", seed_fair_pressure);
    seed_fair_write(dir, "ceiling", seed_fair_ceiling);
    seed_fair_write(dir, "reconf", seed_fair_reconf);
    seed_fair_write(dir, "minimums", seed_fair_minimums);
    seed_fair_write(dir, "extremes", seed_fair_extremes);
    seed_fair_write(dir, "active", seed_fair_active);
    seed_fair_write(dir, "zero", seed_fair_zero);
    seed_fair_write(dir, "clock", seed_fair_clock);
    seed_fair_write(dir, "demand", seed_fair_demand);

    /*
     * Weights 1:1:2 asking 750 tokens a ms of 10: the pool drained, then
     * each its share and refused beyond it.
     */
    memcpy(buf, conf, sizeof(conf));
    n = sizeof(conf);

    for (i = 0; i < 80; i++) {
        for (k = 0; k < 3; k++) {
            const uint8_t  op[] = {
                F_REQUEST(k, k, k ? F_SAME : F_MS(4), F_K(1))
            };

            memcpy(buf + n, op, sizeof(op));
            n += sizeof(op);
        }

        for (k = 0; k < 3; k++) {
            const uint8_t  op[] = {
                F_DONE(k, F_AS_RESERVED, F_SAME, F_K(1), F_ZERO)
            };

            memcpy(buf + n, op, sizeof(op));
            n += sizeof(op);
        }
    }

    memcpy(buf + n, congestion_end, sizeof(congestion_end));
    n += sizeof(congestion_end);

    seed_write(dir, "fair", "congestion", buf, n);

    /*
     * An upstream reporting 10^12 tokens used of none reserved, 200 times,
     * an active tenant's and an inactive one's: the share owes a share,
     * the pool a burst, and neither past int64_t.
     */
    memcpy(buf, overuse_conf, sizeof(overuse_conf));
    n = sizeof(overuse_conf);

    for (i = 0; i < 100; i++) {
        memcpy(buf + n, overuse, sizeof(overuse));
        n += sizeof(overuse);
    }

    memcpy(buf + n, overuse_end, sizeof(overuse_end));
    n += sizeof(overuse_end);

    seed_write(dir, "fair", "overuse", buf, n);
}

/* full: every string at its longest and every figure at its largest */

static size_t
seed_settle(uint8_t *buf, size_t cap, int full)
{
    char          s[LLM_RECORD_MODEL_MAX];
    llm_record_t  rec;

    memset(&rec, 0, sizeof(llm_record_t));

    rec.type = LLM_REC_SETTLE;
    rec.status = 200;
    rec.tenant_id = 7;
    rec.key_id = 12;
    rec.input_tokens = 1200;
    rec.output_tokens = 350;
    rec.cached_input_tokens = 1024;
    rec.reasoning_tokens = 128;
    rec.reserved_tokens = 4096;
    rec.ts_ms = 1790000000123;
    rec.api = LLM_API_OPENAI;

    llm_record_set_request_id(&rec, "3f2b9c1d-0001", 13);
    llm_record_set_model(&rec, "gpt-4o-mini", 11);
    llm_record_set_finish_reason(&rec, "stop", 4);

    /* a Chat Completions request a Messages backend served */
    rec.up_api = LLM_API_ANTHROPIC;
    llm_record_set_backend(&rec, "claude-a", 8);

    /* what the upstream said: the key's name, its response id and model */
    llm_record_set_provider_key(&rec, "proj-a", 6);
    llm_record_set_response_id(&rec, "msg_01", 6);
    llm_record_set_upstream_model(&rec, "claude-3-5-haiku-20241022", 25);

    if (full) {
        memset(s, 'z', sizeof(s));

        rec.status = 499;
        rec.flags = LLM_REC_F_ESTIMATED | LLM_REC_F_PARTIAL
                    | LLM_REC_F_CLAMPED | LLM_REC_F_REPEATED
                    | LLM_REC_F_OVERSIZE;
        rec.tenant_id = INT64_MAX;
        rec.key_id = INT64_MAX;
        rec.input_tokens = UINT64_MAX;
        rec.output_tokens = UINT64_MAX;
        rec.cache_write_tokens = 77;
        rec.api = LLM_API_RESPONSES;

        llm_record_set_request_id(&rec, s, sizeof(s));
        llm_record_set_model(&rec, s, sizeof(s));
        llm_record_set_finish_reason(&rec, s, sizeof(s));
        llm_record_set_backend(&rec, s, sizeof(s));
        llm_record_set_provider_key(&rec, s, sizeof(s));
        llm_record_set_response_id(&rec, s, sizeof(s));
        llm_record_set_upstream_model(&rec, s, sizeof(s));
        rec.up_api = LLM_API_EMBEDDINGS;
    }

    return llm_record_encode(&rec, buf, cap);
}


/* NULL names: the longest valid */

static void
seed_entry(llm_key_entry_t *e, int64_t key_id, const char *tier,
    const char *tenant, const char *models, uint8_t caps)
{
    size_t  i;

    memset(e, 0, sizeof(llm_key_entry_t));

    for (i = 0; i < LLM_KEY_HASH_LEN; i++) {
        e->hash[i] = (uint8_t) (i * 37 + key_id);
    }

    e->key_id = key_id;
    e->tenant_id = key_id;
    e->expires = tier ? 0 : INT64_MAX;
    e->caps = caps;

    if (tier) {
        strcpy(e->tier, tier);
        strcpy(e->tenant, tenant);
        strcpy(e->models, models);
        return;
    }

    memset(e->tier, 'T', LLM_KEY_TIER_MAX - 1);
    memset(e->tenant, '-', LLM_KEY_TENANT_MAX - 1);

    /* names of 127 characters, comma-separated, filling the field */
    for (i = 0; i < LLM_KEY_MODELS_MAX - 1; i++) {
        e->models[i] = (i % LLM_KEY_MODEL_MAX == LLM_KEY_MODEL_MAX - 1)
                       ? ',' : "abc:/@+."[i % 8];
    }
}


static void
seed_mkdir(const char *dir, const char *sub)
{
    char  path[4096];

    snprintf(path, sizeof(path), "%s/%s", dir, sub);

    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
}


static void
seed_write(const char *dir, const char *sub, const char *name, const void *p,
    size_t len)
{
    char   path[4096];
    FILE  *f;

    snprintf(path, sizeof(path), "%s/%s/%s", dir, sub, name);

    f = fopen(path, "w");

    if (f == NULL || fwrite(p, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}
