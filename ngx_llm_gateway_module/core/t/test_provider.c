
/*
 * Reading providers' refusals: the 429s, 529s and 400s of OpenAI,
 * Anthropic, Gemini and Azure OpenAI as they send them, read whole, cut at
 * every byte and chunk-encoded; the header names.  The times and
 * durations alone are test_time.c's.
 */


#include <stdlib.h>
#include <strings.h>

#include "llm_provider.h"
#include "tap.h"


/* Mon, 10 Jun 2024 12:00:00 GMT: 05:00 in California (PDT) */
#define NOW            1718020800000LL
#define SEC            1000LL
#define HOUR           3600000LL
#define TO_MIDNIGHT    (12 * HOUR)
#define TO_MIDNIGHT_PT (19 * HOUR)
#define TEN_MIN        (10 * 60 * SEC)
#define WEEK           LLM_PROVIDER_WAIT_MAX

#define BUSY           LLM_PROVIDER_BUSY
#define SPENT          LLM_PROVIDER_SPENT
#define FAILED         LLM_PROVIDER_FAILED
#define OK             LLM_PROVIDER_OK

#define RATE_LIMITED   "provider_rate_limited"
#define OVERLOADED     "provider_overloaded"
#define QUOTA          "insufficient_quota"
#define ERROR          "provider_error"


/* the bodies, as the providers send them */

#define OPENAI_RPM                                                            \
    "{\n    \"error\": {\n        \"message\": \"Rate limit reached for "     \
    "gpt-4o-mini in organization org-K7pQ2x on requests per min (RPM): "     \
    "Limit 500, Used 500, Requested 1. Please try again in 120ms. Visit "    \
    "https://platform.openai.com/account/rate-limits to learn more.\",\n"    \
    "        \"type\": \"requests\",\n        \"param\": null,\n"            \
    "        \"code\": \"rate_limit_exceeded\"\n    }\n}\n"

#define OPENAI_TPM                                                            \
    "{\n    \"error\": {\n        \"message\": \"Rate limit reached for "     \
    "gpt-4o in organization org-K7pQ2x on tokens per min (TPM): Limit "      \
    "30000, Used 28500, Requested 2000. Please try again in 1s. Visit "      \
    "https://platform.openai.com/account/rate-limits to learn more.\",\n"    \
    "        \"type\": \"tokens\",\n        \"param\": null,\n"              \
    "        \"code\": \"rate_limit_exceeded\"\n    }\n}\n"

#define OPENAI_RPD                                                            \
    "{\n    \"error\": {\n        \"message\": \"Rate limit reached for "     \
    "gpt-4o-mini in organization org-K7pQ2x on requests per day (RPD): "     \
    "Limit 10000, Used 10000, Requested 1. Please try again in 8.64s. "      \
    "Visit https://platform.openai.com/account/rate-limits to learn "        \
    "more.\",\n        \"type\": \"requests\",\n        \"param\": null,\n"  \
    "        \"code\": \"rate_limit_exceeded\"\n    }\n}\n"

#define OPENAI_QUOTA                                                          \
    "{\n    \"error\": {\n        \"message\": \"You exceeded your current "  \
    "quota, please check your plan and billing details. For more "           \
    "information on this error, read the docs: https://platform.openai.com"  \
    "/docs/guides/error-codes/api-errors.\",\n        \"type\": "            \
    "\"insufficient_quota\",\n        \"param\": null,\n        \"code\": "  \
    "\"insufficient_quota\"\n    }\n}\n"

#define OPENAI_HARD_LIMIT                                                     \
    "{\"error\":{\"message\":\"Billing hard limit has been reached\","       \
    "\"type\":\"invalid_request_error\",\"param\":null,"                     \
    "\"code\":\"billing_hard_limit_reached\"}}"

#define OPENAI_OVERLOADED                                                     \
    "{\"error\":{\"message\":\"That model is currently overloaded with "     \
    "other requests. You can retry your request, or contact us through "    \
    "our help center at help.openai.com if the error persists.\","          \
    "\"type\":\"server_error\",\"param\":null,\"code\":null}}"

#define OPENAI_500                                                            \
    "{\"error\":{\"message\":\"The server had an error while processing "    \
    "your request. Sorry about that!\",\"type\":\"server_error\","          \
    "\"param\":null,\"code\":null}}"

#define OPENAI_CONTEXT                                                        \
    "{\"error\":{\"message\":\"This model's maximum context length is "      \
    "128000 tokens. However, your messages resulted in 130412 tokens. "     \
    "Please reduce the length of the messages.\",\"type\":"                 \
    "\"invalid_request_error\",\"param\":\"messages\",\"code\":"             \
    "\"context_length_exceeded\"}}"

#define OPENAI_KEY                                                            \
    "{\"error\":{\"message\":\"Incorrect API key provided: sk-proj-****"     \
    "abcd. You can find your API key at https://platform.openai.com/"       \
    "account/api-keys.\",\"type\":\"invalid_request_error\",\"param\":"      \
    "null,\"code\":\"invalid_api_key\"}}"

#define OPENAI_NO_MODEL                                                       \
    "{\"error\":{\"message\":\"The model `gpt-daily-quota-billing` does "    \
    "not exist or you do not have access to it.\",\"type\":"                \
    "\"invalid_request_error\",\"param\":null,\"code\":"                     \
    "\"model_not_found\"}}"

#define ANTHROPIC_RATE                                                        \
    "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\","          \
    "\"message\":\"This request would exceed the rate limit for your "      \
    "organization (f2d4e9b1-3c7a-4b8e-9d21-6a5f0c8e7b43) of 50,000 input "  \
    "tokens per minute. For details, refer to: https://docs.anthropic.com" \
    "/en/api/rate-limits. You can see the response headers for current "    \
    "usage. Please reduce the prompt length or the maximum tokens "         \
    "requested, or try again later. You may also contact sales at "         \
    "https://www.anthropic.com/contact-sales to discuss your options for "  \
    "a rate limit increase.\"}}"

#define ANTHROPIC_HEADERS                                                     \
    "anthropic-ratelimit-requests-limit: 50\n"                                \
    "anthropic-ratelimit-requests-remaining: 49\n"                            \
    "anthropic-ratelimit-requests-reset: 2024-06-10T12:00:01Z\n"              \
    "anthropic-ratelimit-input-tokens-limit: 50000\n"                         \
    "anthropic-ratelimit-input-tokens-remaining: 0\n"                         \
    "anthropic-ratelimit-input-tokens-reset: 2024-06-10T12:00:21Z\n"          \
    "anthropic-ratelimit-output-tokens-limit: 10000\n"                        \
    "anthropic-ratelimit-output-tokens-remaining: 10000\n"                    \
    "anthropic-ratelimit-output-tokens-reset: 2024-06-10T12:00:00Z\n"         \
    "anthropic-ratelimit-tokens-limit: 60000\n"                               \
    "anthropic-ratelimit-tokens-remaining: 0\n"                               \
    "anthropic-ratelimit-tokens-reset: 2024-06-10T12:00:21Z\n"                \
    "request-id: req_011CQ8xVd6kqQ4Jb5Y2TgPZr\n"

#define ANTHROPIC_OVERLOADED                                                  \
    "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","          \
    "\"message\":\"Overloaded\"}}"

#define ANTHROPIC_CREDIT                                                      \
    "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","     \
    "\"message\":\"Your credit balance is too low to access the "           \
    "Anthropic API. Please go to Plans & Billing to upgrade or purchase "  \
    "credits.\"}}"

#define ANTHROPIC_USAGE                                                       \
    "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","     \
    "\"message\":\"You have reached your specified API usage limits. You "  \
    "will regain access on 2024-06-15 at 00:00 UTC.\"}}"

#define GEMINI(quota_id, value, delay)                                        \
    "{\n  \"error\": {\n    \"code\": 429,\n    \"message\": \"You "          \
    "exceeded your current quota, please check your plan and billing "      \
    "details. For more information on this error, head to: https://ai."     \
    "google.dev/gemini-api/docs/rate-limits.\",\n    \"status\": "           \
    "\"RESOURCE_EXHAUSTED\",\n    \"details\": [\n      {\n        "          \
    "\"@type\": \"type.googleapis.com/google.rpc.QuotaFailure\",\n        "  \
    "\"violations\": [\n          {\n            \"quotaMetric\": "           \
    "\"generativelanguage.googleapis.com/generate_content_free_tier_"       \
    "requests\",\n            \"quotaId\": \"" quota_id "\",\n            "  \
    "\"quotaDimensions\": {\n              \"location\": \"global\",\n     " \
    "         \"model\": \"gemini-2.0-flash\"\n            },\n            " \
    "\"quotaValue\": \"" value "\"\n          }\n        ]\n      },\n      " \
    "{\n        \"@type\": \"type.googleapis.com/google.rpc.Help\",\n      " \
    "  \"links\": [\n          {\n            \"description\": \"Learn more " \
    "about Gemini API quotas\",\n            \"url\": \"https://ai.google."  \
    "dev/gemini-api/docs/rate-limits\"\n          }\n        ]\n      },\n " \
    "     {\n        \"@type\": \"type.googleapis.com/google.rpc.RetryInfo" \
    "\",\n        \"retryDelay\": \"" delay "\"\n      }\n    ]\n  }\n}\n"

#define GEMINI_MINUTE                                                         \
    GEMINI("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "15",     \
           "34s")

#define GEMINI_DAY                                                            \
    GEMINI("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "200",       \
           "43s")

/* the newer message, which says the wait in words too */
#define GEMINI_TOKENS                                                         \
    "{\"error\":{\"code\":429,\"message\":\"You exceeded your current "      \
    "quota, please check your plan and billing details. For more "          \
    "information on this error, head to: https://ai.google.dev/gemini-api" \
    "/docs/rate-limits. To monitor your current usage, head to: https://"   \
    "ai.dev/usage?tab=rate-limit. \\n* Quota exceeded for metric: "         \
    "generativelanguage.googleapis.com/generate_content_free_tier_input_"   \
    "token_count, limit: 250000, model: gemini-2.5-flash\\nPlease retry "   \
    "in 12.887438443s.\",\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{"  \
    "\"@type\":\"type.googleapis.com/google.rpc.QuotaFailure\","            \
    "\"violations\":[{\"quotaMetric\":\"generativelanguage.googleapis.com/" \
    "generate_content_free_tier_input_token_count\",\"quotaId\":"           \
    "\"GenerateContentInputTokensPerModelPerMinute-FreeTier\","             \
    "\"quotaValue\":\"250000\"}]},{\"@type\":\"type.googleapis.com/google." \
    "rpc.RetryInfo\",\"retryDelay\":\"12s\"}]}}"

#define GEMINI_503                                                            \
    "{\n  \"error\": {\n    \"code\": 503,\n    \"message\": \"The model is " \
    "overloaded. Please try again later.\",\n    \"status\": "               \
    "\"UNAVAILABLE\"\n  }\n}\n"

#define AZURE(kind)                                                           \
    "{\"error\":{\"code\":\"429\",\"message\": \"Requests to the "           \
    "ChatCompletions_Create Operation under Azure OpenAI API version "      \
    "2024-02-01 have exceeded " kind " rate limit of your current OpenAI "  \
    "S0 pricing tier. Please retry after 7 seconds. Please go here: "       \
    "https://aka.ms/oai/quotaincrease if you would like to further "        \
    "increase the default rate limit.\"}}"

#define DEEPSEEK_402                                                          \
    "{\"error\":{\"message\":\"Insufficient Balance\",\"type\":"             \
    "\"unknown_error\",\"param\":null,\"code\":\"invalid_request_error\"}}"

#define NGINX_502                                                             \
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"    \
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx"        \
    "</center>\r\n</body>\r\n</html>\r\n"

#define TOO_MANY                                                              \
    "<html><head><title>429 Too Many Requests</title></head><body>"         \
    "<h1>Too Many Requests</h1></body></html>"


typedef struct {
    const char            *name;
    int                    status;
    const char            *headers;     /* "name: value" lines */
    const char            *body;
    llm_provider_class_e   cls;
    int64_t                retry_ms;
    const char            *code;
    const char            *wait_from;
    const char            *decider;     /* the body's deciding word */
} refusal_t;


static const refusal_t  refusals[] = {

    /* OpenAI */

    { "openai rpm", 429,
      "x-ratelimit-limit-requests: 500\n"
      "x-ratelimit-remaining-requests: 0\n"
      "x-ratelimit-reset-requests: 120ms\n"
      "x-ratelimit-remaining-tokens: 29000\n"
      "x-ratelimit-reset-tokens: 2s\n",
      OPENAI_RPM, BUSY, 120, RATE_LIMITED, "body: try again in",
      "rate limit" },

    { "openai rpm, the body cut before its wait: the limit at 0", 429,
      "x-ratelimit-remaining-requests: 0\n"
      "x-ratelimit-reset-requests: 120ms\n"
      "x-ratelimit-remaining-tokens: 29000\n"
      "x-ratelimit-reset-tokens: 2s\n",
      "{\"error\":{\"message\":\"Rate limit reached for gpt-4o-mini in "
      "organization org-K7pQ2x on requests per min (RPM)",
      BUSY, 120, RATE_LIMITED, "x-ratelimit-reset-requests", "rate limit" },

    { "openai tpm", 429,
      "retry-after-ms: 998\n"
      "retry-after: 1\n"
      "x-ratelimit-remaining-tokens: 0\n"
      "x-ratelimit-reset-tokens: 6m0s\n",
      OPENAI_TPM, BUSY, 998, RATE_LIMITED, "retry-after-ms", "rate limit" },

    { "openai rpd: per day, the wait said", 429,
      "x-ratelimit-remaining-requests: 0\n"
      "x-ratelimit-reset-requests: 8.64s\n",
      OPENAI_RPD, SPENT, 8640, QUOTA, "body: try again in", "per day" },

    { "openai insufficient_quota: the account, 10 minutes", 429, "",
      OPENAI_QUOTA, SPENT, TEN_MIN, QUOTA, "account: 10 minutes",
      "exceeded your current quota" },

    { "openai billing hard limit, a 400", 400, "", OPENAI_HARD_LIMIT,
      SPENT, TEN_MIN, QUOTA, "account: 10 minutes", "billing_hard_limit" },

    { "openai overloaded 503", 503, "", OPENAI_OVERLOADED,
      BUSY, -1, OVERLOADED, NULL, "overloaded" },

    { "openai 500", 500, "", OPENAI_500, FAILED, -1, ERROR, NULL, NULL },
    { "openai 500, retry-after", 500, "Retry-After: 30\n", OPENAI_500,
      FAILED, 30 * SEC, ERROR, "retry-after", NULL },
    { "openai context length 400", 400, "", OPENAI_CONTEXT,
      OK, -1, NULL, NULL, NULL },
    { "openai invalid key 401", 401, "", OPENAI_KEY,
      OK, -1, NULL, NULL, NULL },
    { "openai no model 404: words in a model's name", 404, "",
      OPENAI_NO_MODEL, OK, -1, NULL, NULL, NULL },

    /* Anthropic */

    { "anthropic rate_limit_error", 429, "retry-after: 21\n" ANTHROPIC_HEADERS,
      ANTHROPIC_RATE, BUSY, 21 * SEC, RATE_LIMITED, "retry-after",
      "rate_limit_error" },

    { "anthropic, no retry-after: the limits at 0", 429, ANTHROPIC_HEADERS,
      ANTHROPIC_RATE, BUSY, 21 * SEC, RATE_LIMITED,
      "anthropic-ratelimit-tokens-reset", "rate_limit_error" },

    { "anthropic, only requests at 0", 429,
      "anthropic-ratelimit-requests-remaining: 0\n"
      "anthropic-ratelimit-requests-reset: 2024-06-10T12:00:01Z\n"
      "anthropic-ratelimit-tokens-remaining: 31337\n"
      "anthropic-ratelimit-tokens-reset: 2024-06-10T12:00:50Z\n",
      ANTHROPIC_RATE, BUSY, 1 * SEC, RATE_LIMITED,
      "anthropic-ratelimit-requests-reset", "rate_limit_error" },

    { "anthropic, none known at 0: the latest", 429,
      "anthropic-ratelimit-requests-reset: 2024-06-10T12:00:01Z\n"
      "anthropic-ratelimit-tokens-reset: 2024-06-10T12:00:50Z\n",
      ANTHROPIC_RATE, BUSY, 50 * SEC, RATE_LIMITED,
      "anthropic-ratelimit-tokens-reset", "rate_limit_error" },

    { "anthropic overloaded 529", 529, "", ANTHROPIC_OVERLOADED,
      BUSY, -1, OVERLOADED, NULL, "overloaded" },
    { "anthropic 529, no body", 529, "", "",
      BUSY, -1, OVERLOADED, NULL, NULL },

    { "anthropic credit balance, a 400", 400, "", ANTHROPIC_CREDIT,
      SPENT, TEN_MIN, QUOTA, "account: 10 minutes", "credit balance" },

    { "anthropic usage limits: the date said", 400, "", ANTHROPIC_USAGE,
      SPENT, 108 * HOUR, QUOTA, "body: regain access on", "usage limit" },

    /* Gemini */

    { "gemini PerMinute", 429, "", GEMINI_MINUTE,
      BUSY, 34 * SEC, RATE_LIMITED, "body: retryDelay",
      "RESOURCE_EXHAUSTED" },

    { "gemini PerDay: midnight Pacific, not 43 s", 429, "", GEMINI_DAY,
      SPENT, TO_MIDNIGHT_PT, QUOTA, "midnight Pacific", "PerDay" },

    { "gemini tokens PerMinute, retryDelay before the words", 429, "",
      GEMINI_TOKENS, BUSY, 12 * SEC, RATE_LIMITED, "body: retryDelay",
      "RESOURCE_EXHAUSTED" },

    { "gemini 503", 503, "", GEMINI_503, BUSY, -1, OVERLOADED, NULL,
      "overloaded" },

    /* Azure OpenAI */

    { "azure call rate", 429,
      "retry-after: 7\nx-ratelimit-remaining-requests: 0\n"
      "x-ms-region: East US\n", AZURE("call"),
      BUSY, 7 * SEC, RATE_LIMITED, "retry-after", "rate limit" },

    { "azure token rate, the wait only in words", 429, "", AZURE("token"),
      BUSY, 7 * SEC, RATE_LIMITED, "body: retry after", "rate limit" },

    /* by status, without words */

    { "429, nothing said", 429, "", "", BUSY, -1, RATE_LIMITED, NULL, NULL },
    { "429 html", 429, "", TOO_MANY, BUSY, -1, RATE_LIMITED, NULL,
      "Too Many Requests" },
    { "429, a wait of an hour", 429, "retry-after: 3600\n", "",
      BUSY, HOUR, RATE_LIMITED, "retry-after", NULL },
    { "429, a wait of an hour and a second: spent", 429,
      "retry-after: 3601\n", "",
      SPENT, HOUR + SEC, QUOTA, "retry-after", NULL },
    { "429, five hours: spent", 429, "retry-after: 18000\n", "{}",
      SPENT, 5 * HOUR, QUOTA, "retry-after", NULL },
    { "429, a reset in 23 h 59 m: spent", 429,
      "x-ratelimit-remaining-requests: 0\n"
      "x-ratelimit-reset-requests: 23h59m0s\n", "",
      SPENT, 24 * HOUR - 60 * SEC, QUOTA, "x-ratelimit-reset-requests",
      NULL },
    { "429, a month: a week", 429, "retry-after: 2592000\n", "",
      SPENT, WEEK, QUOTA, "retry-after", NULL },
    { "402", 402, "", DEEPSEEK_402, SPENT, TEN_MIN, QUOTA,
      "account: 10 minutes", NULL },
    { "402, retry-after", 402, "retry-after: 600\n", "",
      SPENT, 600 * SEC, QUOTA, "retry-after", NULL },
    { "503, retry-after", 503, "retry-after: 120\n", "",
      BUSY, 120 * SEC, OVERLOADED, "retry-after", NULL },
    { "502 html", 502, "", NGINX_502, FAILED, -1, ERROR, NULL, NULL },
    { "504", 504, "", "", FAILED, -1, ERROR, NULL, NULL },
    { "408", 408, "retry-after: 1\n", "", FAILED, SEC, ERROR, "retry-after",
      NULL },
    { "413", 413, "retry-after: 1\n", "", OK, -1, NULL, NULL, NULL },
    { "422", 422, "", "{\"detail\":\"quota\"}", OK, -1, NULL, NULL, NULL },
    { "403, quota words but no account's", 403, "",
      "{\"error\":{\"message\":\"Project quota settings forbid this\"}}",
      OK, -1, NULL, NULL, NULL },
    { "200", 200, "retry-after: 5\n", OPENAI_QUOTA, OK, -1, NULL, NULL,
      NULL },
    { "204", 204, "", "", OK, -1, NULL, NULL, NULL },
    { "301", 301, "", "", OK, -1, NULL, NULL, NULL },
    { "status 0", 0, "", OPENAI_QUOTA, FAILED, -1, ERROR, NULL, NULL },
    { "status -429", -429, "", "", FAILED, -1, ERROR, NULL, NULL },
    { "status 600", 600, "", "", FAILED, -1, ERROR, NULL, NULL },
    { "status 4290", 4290, "", "", FAILED, -1, ERROR, NULL, NULL },

    /* the headers' precedence, and garbage in them */

    { "retry-after-ms over retry-after", 429,
      "retry-after: 9\nretry-after-ms: 250\n", "",
      BUSY, 250, RATE_LIMITED, "retry-after-ms", NULL },
    { "retry-after-ms with a fraction", 429, "retry-after-ms: 1500.25\n", "",
      BUSY, 1501, RATE_LIMITED, "retry-after-ms", NULL },
    { "retry-after-ms garbage: retry-after", 429,
      "retry-after-ms: soon\nretry-after: 3\n", "",
      BUSY, 3 * SEC, RATE_LIMITED, "retry-after", NULL },
    { "retry-after-ms negative: retry-after", 429,
      "retry-after-ms: -5\nretry-after: 3\n", "",
      BUSY, 3 * SEC, RATE_LIMITED, "retry-after", NULL },
    { "retry-after-ms 1e3", 429, "retry-after-ms: 1e3\n", "",
      BUSY, -1, RATE_LIMITED, NULL, NULL },
    { "retry-after-ms overflow", 429,
      "retry-after-ms: 99999999999999999999999999999999\n", "",
      SPENT, WEEK, QUOTA, "retry-after-ms", NULL },
    { "retry-after overflow", 429,
      "retry-after: 184467440737095516160\n", "",
      SPENT, WEEK, QUOTA, "retry-after", NULL },
    { "retry-after date", 429, "retry-after: Mon, 10 Jun 2024 12:00:30 GMT\n",
      "", BUSY, 30 * SEC, RATE_LIMITED, "retry-after", NULL },
    { "retry-after date in the past", 429,
      "retry-after: Sun, 06 Nov 1994 08:49:37 GMT\n", "",
      BUSY, 0, RATE_LIMITED, "retry-after", NULL },
    { "retry-after garbage, the body's words", 429,
      "retry-after: tomorrow\n", AZURE("call"),
      BUSY, 7 * SEC, RATE_LIMITED, "body: retry after", "rate limit" },
    { "a header's value in capitals", 429,
      "X-RateLimit-Reset-Tokens: 6M0S\nX-RATELIMIT-REMAINING-TOKENS: 0\n", "",
      BUSY, 360 * SEC, RATE_LIMITED, "x-ratelimit-reset-tokens", NULL },
    { "the remaining overflows: not 0", 429,
      "x-ratelimit-remaining-tokens: 99999999999999999999999999\n"
      "x-ratelimit-reset-tokens: 30s\n"
      "x-ratelimit-remaining-requests: 00\n"
      "x-ratelimit-reset-requests: 2s\n", "",
      BUSY, 2 * SEC, RATE_LIMITED, "x-ratelimit-reset-requests", NULL },
    { "resets in garbage", 429,
      "x-ratelimit-reset-tokens: 6m0\n"
      "x-ratelimit-reset-requests: -1s\n"
      "anthropic-ratelimit-tokens-reset: 2024-02-30T00:00:00Z\n"
      "anthropic-ratelimit-requests-reset: 2024-06-10T12:00:05Z\n", "",
      BUSY, 5 * SEC, RATE_LIMITED, "anthropic-ratelimit-requests-reset",
      NULL },
    { "resets on a 503 are not read", 503,
      "x-ratelimit-remaining-tokens: 0\nx-ratelimit-reset-tokens: 30s\n", "",
      BUSY, -1, OVERLOADED, NULL, NULL },
};


static const char  *classes[] = { "ok", "busy", "spent", "failed" };


/* s for a test's name: control bytes escaped */

static const char *
show(const char *s, size_t len)
{
    size_t       i, o;
    static char  buf[256];

    for (i = 0, o = 0; i < len && o < sizeof(buf) - 5; i++) {
        if ((unsigned char) s[i] < 0x20) {
            o += (size_t) sprintf(buf + o, "\\x%02x", (unsigned char) s[i]);

        } else {
            buf[o++] = s[i];
        }
    }

    buf[o] = '\0';

    return buf;
}


/* headers from "name: value" lines; the values point into text */

static void
input(llm_provider_in_t *in, int status, const char *headers,
    const char *body, size_t len)
{
    int          h;
    const char  *p, *colon, *eol, *v;

    memset(in, 0, sizeof(llm_provider_in_t));

    in->status = status;
    in->now_ms = NOW;
    in->body.data = body;
    in->body.len = len;

    for (p = headers; *p; p = *eol ? eol + 1 : eol) {
        eol = strchr(p, '\n');
        eol = eol ? eol : p + strlen(p);
        colon = memchr(p, ':', (size_t) (eol - p));

        if (colon == NULL) {
            continue;
        }

        h = llm_provider_header(p, (size_t) (colon - p));

        if (h < 0) {
            continue;
        }

        for (v = colon + 1; v < eol && *v == ' '; v++) {
            /* void */
        }

        in->header[h].data = v;
        in->header[h].len = (size_t) (eol - v);
    }
}


static void
read_one(const refusal_t *r, const char *body, size_t len,
    llm_provider_verdict_t *v)
{
    llm_provider_in_t  in;

    input(&in, r->status, r->headers, body, len);
    llm_provider_read(&in, v);
}


/* what every verdict is, whatever its input */

static int
sane(const llm_provider_verdict_t *v)
{
    if (v->why == NULL || (v->retry_ms < 0) != (v->wait_from == NULL)
        || v->retry_ms < -1 || v->retry_ms > WEEK)
    {
        return 0;
    }

    switch (v->cls) {

    case OK:
        return v->code == NULL && v->retry_ms == -1;

    case BUSY:
        return v->code && (strcmp(v->code, RATE_LIMITED) == 0
                           || strcmp(v->code, OVERLOADED) == 0);

    case SPENT:
        return v->code && strcmp(v->code, QUOTA) == 0 && v->retry_ms >= 0;

    case FAILED:
        return v->code && strcmp(v->code, ERROR) == 0;
    }

    return 0;
}


static void
test_refusals(void)
{
    size_t                  i;
    const refusal_t        *r;
    llm_provider_verdict_t  v;

    for (i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        r = &refusals[i];

        read_one(r, r->body, strlen(r->body), &v);

        tap_is(v.cls, r->cls, "%s: class", r->name);
        tap_is(v.retry_ms, r->retry_ms, "  retry_ms");
        tap_is_str(v.code ? v.code : "(none)", r->code ? r->code : "(none)",
                   "  code");
        tap_is_str(v.wait_from ? v.wait_from : "(none)",
                   r->wait_from ? r->wait_from : "(none)", "  the wait from");
        tap_ok(sane(&v), "  sane (why: %s)", v.why);
    }
}


/*
 * Every cut of every body: sane, and, once the deciding word has been
 * read whole, the class of the whole body; without one, from the start.
 * Each cut is copied to a buffer of its size, so that ASan sees a byte
 * read past it.
 */

static void
test_cuts(void)
{
    int                     wrong, insane, decided;
    char                   *copy;
    size_t                  i, k, len, from;
    const char             *d;
    const refusal_t        *r;
    llm_provider_verdict_t  v;

    for (i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        r = &refusals[i];
        len = strlen(r->body);
        from = 0;

        if (r->decider) {
            d = NULL;

            for (k = 0; k + strlen(r->decider) <= len; k++) {
                if (strncasecmp(r->body + k, r->decider,
                                strlen(r->decider)) == 0)
                {
                    d = r->body + k;
                    break;
                }
            }

            if (!tap_ok(d != NULL, "%s: the deciding word is in the body",
                        r->name))
            {
                continue;
            }

            from = (size_t) (d - r->body) + strlen(r->decider);
        }

        wrong = 0;
        insane = 0;
        decided = 0;

        for (k = 0; k <= len; k++) {
            copy = malloc(k ? k : 1);
            memcpy(copy, r->body, k);

            read_one(r, copy, k, &v);
            free(copy);

            insane += !sane(&v);

            if (k >= from) {
                decided++;
                wrong += v.cls != r->cls;
            }
        }

        tap_ok(insane == 0 && wrong == 0,
               "%s: %zu cuts sane, the class from byte %zu on (%d cuts)",
               r->name, len + 1, from, decided);
    }
}


/*
 * The bodies chunk-encoded as the bytes came, in chunks of every size
 * from 1 to 40 and one larger than the body, hex in either case, an
 * extension on the first: the verdict of the body.  Then every cut of
 * one: sane.
 */

static size_t
chunked(char *out, const char *body, size_t len, size_t size)
{
    size_t  n, k, o;

    o = 0;

    for (k = 0; k < len; k += n) {
        n = len - k < size ? len - k : size;
        o += (size_t) sprintf(out + o, (size & 1) ? "%zx%s\r\n" : "%zX%s\r\n",
                              n, k == 0 ? ";ext=\"a b\"" : "");
        memcpy(out + o, body + k, n);
        o += n;
        out[o++] = '\r';
        out[o++] = '\n';
    }

    o += (size_t) sprintf(out + o, "0\r\n\r\n");

    return o;
}


static void
test_chunked(void)
{
    int                     same, insane;
    char                   *out, *copy;
    size_t                  i, n, size, len, k;
    const refusal_t        *r;
    llm_provider_verdict_t  v, w;

    out = malloc(1 << 20);

    for (i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        r = &refusals[i];
        len = strlen(r->body);

        if (len == 0) {
            continue;
        }

        read_one(r, r->body, len, &v);
        same = 1;

        for (size = 1; size <= 41; size++) {
            n = chunked(out, r->body, len, size == 41 ? len + 1 : size);
            read_one(r, out, n, &w);

            same &= w.cls == v.cls && w.retry_ms == v.retry_ms
                    && strcmp(w.why, v.why) == 0;
        }

        tap_ok(same, "%s, chunked: the same verdict", r->name);
    }

    /* Gemini's words split by the framing: PerMinute read, not "quota" */
    for (r = refusals; strcmp(r->name, "gemini PerMinute") != 0; r++) {
        /* void */
    }

    n = chunked(out, r->body, strlen(r->body), 7);
    read_one(r, out, n, &v);
    tap_is(v.cls, BUSY, "gemini in chunks of 7: busy");
    tap_is(v.retry_ms, 34 * SEC, "  34 s, its retryDelay cut as \"3\" \"4s\"");

    insane = 0;

    for (k = 0; k <= n; k++) {
        copy = malloc(k ? k : 1);
        memcpy(copy, out, k);
        read_one(r, copy, k, &w);
        free(copy);
        insane += !sane(&w);
    }

    tap_is(insane, 0, "  every cut of it sane");

    /* framing gone wrong midway: read as it is from there */
    read_one(r, "5\r\n{\"a\":\r\nxyz insufficient_quota", 32, &v);
    tap_is(v.cls, SPENT, "bad framing: the rest read raw");

    read_one(r, "1a\r\n", 4, &v);
    tap_is(v.cls, BUSY, "a size line alone: nothing");

    read_one(r, "0\r\n\r\ninsufficient_quota", 25, &v);
    tap_is(v.cls, BUSY, "nothing after the last chunk");

    /* JSON never starts like a chunk size */
    read_one(r, "{\"e\":\"insufficient_quota\"}", 26, &v);
    tap_is(v.cls, SPENT, "a JSON body is not chunked");

    free(out);
}


/*
 * A wait in the body is believed only when something follows it: cut
 * anywhere, it is either the whole value or none, never a shorter one.
 */

static const struct {
    const char  *body;
    int64_t      wait;
} waits_cut[] = {
    { "Please retry after 7 seconds. Please go here", 7 * SEC },
    { "Please retry after 120 seconds. Thanks", 120 * SEC },
    { "Please try again in 1.8s. Visit", 1800 },
    { "Please try again in 1m30s. Visit", 90 * SEC },
    { "try again in 2 minutes and", 120 * SEC },
    { "Please retry in 12.887438443s.\"", 12888 },
    { "\"retryDelay\": \"34s\"\n", 34 * SEC },
    { "\"retryDelay\":\"0.5s\"}", 500 },
    { "You will regain access on 2024-06-15 at 00:00 UTC.\"}}", 108 * HOUR },
    { "regain access on 2024-06-10 at 12:00:30 utc. Bye", 30 * SEC },
    { "regain access on 2024-06-10 at 05:00:30-07:00, or", 30 * SEC },
    { "regain access on 2024-06-11 at 00:00.\n", 12 * HOUR },
};


static void
test_waits_cut(void)
{
    int                     bad, whole;
    char                   *copy;
    size_t                  i, k, len;
    llm_provider_in_t       in;
    llm_provider_verdict_t  v;

    for (i = 0; i < sizeof(waits_cut) / sizeof(waits_cut[0]); i++) {
        len = strlen(waits_cut[i].body);
        bad = 0;
        whole = 0;

        for (k = 0; k <= len; k++) {
            copy = malloc(k ? k : 1);
            memcpy(copy, waits_cut[i].body, k);

            input(&in, 503, "", copy, k);
            llm_provider_read(&in, &v);
            free(copy);

            bad += v.retry_ms != -1 && v.retry_ms != waits_cut[i].wait;
            whole = v.retry_ms == waits_cut[i].wait;
        }

        tap_ok(bad == 0 && whole, "\"%s\": %lld ms, or none when cut",
               show(waits_cut[i].body, len), (long long) waits_cut[i].wait);
    }
}


/* more words: each alone, in a 429 */

static const struct {
    const char            *body;
    int                    status;
    llm_provider_class_e   cls;
    int64_t                wait;
} words[] = {
    { "tokens per day (TPD)", 429, SPENT, TO_MIDNIGHT },
    { "DAILY limit", 429, SPENT, TO_MIDNIGHT },
    { "generate_content_requests_per_day_per_project", 429, SPENT,
      TO_MIDNIGHT },
    { "generate_content_requests_per_minute_per_project", 429, BUSY, -1 },
    { "Quota exceeded for quota metric 'Requests' and limit 'Requests per "
      "minute'", 429, BUSY, -1 },
    { "QUOTA", 429, SPENT, TO_MIDNIGHT },
    { "rate limit, quota", 429, BUSY, -1 },
    { "quota; rate limit", 429, BUSY, -1 },
    { "a quota per day, per minute", 429, SPENT, TO_MIDNIGHT },
    { "per million tokens billing", 429, SPENT, TEN_MIN },
    { "Rate limit exceeded: free-models-per-day. Add 10 credits to unlock "
      "1000 free model requests per day", 429, SPENT, TO_MIDNIGHT },
    { "Number of request tokens has exceeded your per-minute rate limit",
      429, BUSY, -1 },
    { "Number of request tokens has exceeded your daily rate limit", 429,
      SPENT, TO_MIDNIGHT },
    { "credits", 429, SPENT, TEN_MIN },
    { "Codex usage limit reached", 429, SPENT, TEN_MIN },
    { "billing_not_active", 403, SPENT, TEN_MIN },
    { "billing", 403, OK, -1 },
    { "insufficient_quota", 404, OK, -1 },
    { "Overloaded", 500, BUSY, -1 },
    { "rate limit", 500, FAILED, -1 },
    { "insufficient_quota", 503, SPENT, TEN_MIN },
    { "try again in 5 days. Bye", 429, SPENT, 5 * 24 * HOUR },
    { "try again in 7 fortnights. Bye", 429, BUSY, -1 },
    { "retry after 7. Bye", 429, BUSY, 7 * SEC },
    { "retry after soon. Bye", 429, BUSY, -1 },
    { "retry after soon, retry after 3 s. Bye", 429, BUSY, 3 * SEC },
    { "\"retryDelay\": \"3 s\" retry in 4s. Bye", 429, BUSY, 4 * SEC },
    { "regain access on 2024-02-30 at 00:00 UTC. Bye", 400, OK, -1 },
    { "usage limit; regain access on 2024-02-30 at 00:00 UTC. Bye", 400, SPENT,
      TEN_MIN },
    { "usage limit; regain access on 2024-06-10 at 11:00 UTC. Bye", 400, SPENT,
      0 },
    { "usage limit; regain access on 2099-06-10 at 11:00 UTC. Bye", 400, SPENT,
      WEEK },
    { "per\0day", 429, BUSY, -1 },
};


static void
test_words(void)
{
    size_t                  i, len;
    llm_provider_in_t       in;
    llm_provider_verdict_t  v;

    for (i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        len = strlen(words[i].body);

        if (strcmp(words[i].body, "per") == 0) {
            len = 7;
        }

        input(&in, words[i].status, "", words[i].body, len);
        llm_provider_read(&in, &v);

        tap_ok(v.cls == words[i].cls && v.retry_ms == words[i].wait
               && sane(&v), "%d \"%s\": %s, wait %lld (%s)",
               words[i].status, show(words[i].body, len),
               classes[words[i].cls], (long long) words[i].wait, v.why);
    }
}


/* the body's first LLM_PROVIDER_BODY_MAX bytes only */

static void
test_long_body(void)
{
    char                   *body;
    size_t                  len;
    llm_provider_in_t       in;
    llm_provider_verdict_t  v;

    len = LLM_PROVIDER_BODY_MAX + 100;
    body = malloc(len);
    memset(body, ' ', len);

    memcpy(body + LLM_PROVIDER_BODY_MAX - 18, "insufficient_quota", 18);
    input(&in, 429, "", body, len);
    llm_provider_read(&in, &v);
    tap_is(v.cls, SPENT, "a word ending at the last byte looked at: read");

    memset(body, ' ', len);
    memcpy(body + LLM_PROVIDER_BODY_MAX - 17, "insufficient_quota", 18);
    input(&in, 429, "", body, len);
    llm_provider_read(&in, &v);
    tap_is(v.cls, BUSY, "one byte further: not");

    input(&in, 429, "", NULL, 10);
    llm_provider_read(&in, &v);
    tap_ok(v.cls == BUSY && sane(&v), "no body, a length: nothing read");

    free(body);
}


static void
test_headers(void)
{
    tap_is(llm_provider_header("Retry-After", 11), LLM_PROVIDER_RETRY_AFTER,
           "header Retry-After");
    tap_is(llm_provider_header("RETRY-AFTER-MS", 14),
           LLM_PROVIDER_RETRY_AFTER_MS, "header RETRY-AFTER-MS");
    tap_is(llm_provider_header("anthropic-ratelimit-output-tokens-remaining",
                               43),
           LLM_PROVIDER_ANTHROPIC_OUTPUT_REMAINING,
           "header anthropic-ratelimit-output-tokens-remaining");
    tap_is(llm_provider_header("retry-after-m", 13), -1,
           "header retry-after-m: no");
    tap_is(llm_provider_header("retry-after-msx", 15), -1,
           "header retry-after-msx: no");
    tap_is(llm_provider_header("retry-after", 5), -1, "header retry: no");
    tap_is(llm_provider_header("", 0), -1, "header \"\": no");
    tap_is(llm_provider_header(NULL, 0), -1, "header NULL: no");
}


int
main(void)
{
    test_refusals();
    test_cuts();
    test_chunked();
    test_waits_cut();
    test_words();
    test_long_body();
    test_headers();

    return tap_done();
}
