
/*
 * Reading a provider's refusal.  The same 429 means either "briefly busy:
 * come back in seconds" or "spent: the daily quota, the account's credit,
 * the prepaid balance is gone, come back after the reset"; told the first
 * when it is the second, a client knocks on a closed window every second.
 * In: the status, a few headers, whatever part of the body was read, and
 * the wall clock.  Out: a class, a wait and a code for the client.
 *
 * The class.  Body words decide when there are any, because only the body
 * names the limit.  The first word of this list found anywhere in the
 * body wins, so that a word further down cannot overrule one above it:
 *
 *     PerDay, per day, per_day, per-day, daily             spent
 *     insufficient_quota, credit balance, billing_hard_limit,
 *     billing_not_active, usage limit                      spent
 *     PerMinute, per minute, per_minute, per-minute,
 *     rate_limit_exceeded, rate_limit_error, rate limit,
 *     overloaded, RESOURCE_EXHAUSTED                       busy
 *     exceeded your current quota, quota, billing, credit  spent
 *     too many requests                                    busy
 *
 * A daily limit comes first: OpenAI says "Rate limit reached ... on
 * requests per day (RPD)" with code rate_limit_exceeded.  Limits per
 * minute come before the generic quota words: Gemini's per-minute 429
 * says "You exceeded your current quota, please check your plan and
 * billing details" and only its quota id (...PerMinutePerProject...)
 * tells, and Azure's call-rate 429 links to aka.ms/oai/quotaincrease.
 *
 * Then by status:
 *
 *     429, 503, 529    the words; without any, 503 and 529 are busy
 *                      (provider_overloaded) and a 429 busy unless its
 *                      wait is longer than an hour: nobody says "retry in
 *                      5 hours" for a limit per minute, so it is spent
 *     402              spent
 *     400, 403         ok (the client's fault: no breaker trips), but
 *                      spent on the account words of the second line,
 *                      which Anthropic ("Your credit balance is too low")
 *                      and OpenAI (billing_hard_limit_reached) send as a
 *                      400; other 4xx bodies may echo a model name
 *     408              failed
 *     other 1xx-4xx    ok
 *     other 5xx        failed (provider_error), but busy on "overloaded"
 *     < 100, > 599     failed: unreadable
 *
 * A busy 503 or 529, or a busy "overloaded", has the code
 * provider_overloaded; other busy ones provider_rate_limited; spent ones
 * insufficient_quota; failed ones provider_error; ok ones none.
 *
 * The wait, the first that reads:
 *
 *     retry-after-ms           milliseconds; OpenAI's SDKs read it first
 *     Retry-After              delta-seconds, or an HTTP-date (IMF-fixdate,
 *                              RFC 850, asctime) made a wait with now_ms
 *     "retryDelay": "34s"      Gemini's RetryInfo, in the body
 *     retry after 7 seconds,   the body's words (Azure's; OpenAI's "try
 *     retry in 12.8s,          again in 1.8s"; Gemini's "Please retry in
 *     try again in 1m30s       ...s")
 *     regain access on DATE    Anthropic's "You will regain access on
 *       at HH:MM UTC           2025-08-01 at 00:00 UTC"
 *     x-ratelimit-reset-*,     on a 429 only (they describe the limits,
 *     anthropic-ratelimit-     not the refusal): the latest reset of the
 *       *-reset                limits whose remaining is 0, if any is
 *                              known to be, else the latest of all
 *
 * and none (-1) otherwise; the caller picks a default then (1 s, or
 * 10 s for Gemini's limits per minute).  A date in the past is
 * a wait of 0.  Waits above LLM_PROVIDER_WAIT_MAX are taken as it.  A
 * spent verdict without a wait gets, for the account's words (credit,
 * billing, insufficient_quota, a plan's usage limit) and a 402, ten
 * minutes: such an account comes back when someone pays, not at a reset,
 * and is looked at again then; for the others (a daily limit, a quota)
 * the time to the next midnight UTC, when daily quotas commonly reset; a
 * retry then is cheap if it has not.
 * A Gemini daily quota (a quota id with PerDay) resets at midnight US
 * Pacific time, so it waits until then at least, whatever short
 * retryDelay the body has beside it.
 *
 * The body may be cut anywhere (only what was read is looked at), may be
 * the raw bytes of a chunked transfer (read through the chunk framing
 * when it starts like one), may be anything: it is searched for words,
 * never parsed as JSON, case-insensitively, its first LLM_PROVIDER_BODY_MAX
 * bytes.  A value is believed only when something follows it in what was
 * read: "retry after 12" at the very end may be 120 cut short.  Every
 * word found is final, so once the deciding word has been read whole, no
 * longer part of the same body gives another class.  Headers are matched
 * case-insensitively too; garbage in any of them is ignored; numbers
 * saturate, never overflow.  Plain C, no allocation, no floats.
 */

#ifndef _LLM_PROVIDER_H_INCLUDED_
#define _LLM_PROVIDER_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>

#include "llm_time.h"


/* waits above this (a week) are taken as this */
#define LLM_PROVIDER_WAIT_MAX      LLM_TIME_WAIT_MAX

/* a 429 without body words and a longer wait than this is spent */
#define LLM_PROVIDER_SPENT_WAIT    3600000LL

/*
 * The body's bytes looked at, at most, chunk framing included: refusals
 * are a few hundred bytes, an HTML error page a few thousand, and a read
 * costs some 15 ns a byte.
 */
#define LLM_PROVIDER_BODY_MAX      16384


typedef enum {
    LLM_PROVIDER_OK = 0,         /* not a refusal, or the client's fault */
    LLM_PROVIDER_BUSY,           /* a limit per minute, overload: seconds */
    LLM_PROVIDER_SPENT,          /* a daily quota, credit, balance: reset */
    LLM_PROVIDER_FAILED          /* the backend failed */
} llm_provider_class_e;


/* the headers read, by index; see llm_provider_header() for the names */
typedef enum {
    LLM_PROVIDER_RETRY_AFTER_MS = 0,        /* retry-after-ms */
    LLM_PROVIDER_RETRY_AFTER,               /* retry-after */

    /* the limits: each reset, then its remaining */
    LLM_PROVIDER_RESET_REQUESTS,            /* x-ratelimit-reset-requests */
    LLM_PROVIDER_REMAINING_REQUESTS,
    LLM_PROVIDER_RESET_TOKENS,              /* x-ratelimit-reset-tokens */
    LLM_PROVIDER_REMAINING_TOKENS,
    LLM_PROVIDER_ANTHROPIC_REQUESTS_RESET,  /* anthropic-ratelimit-... */
    LLM_PROVIDER_ANTHROPIC_REQUESTS_REMAINING,
    LLM_PROVIDER_ANTHROPIC_TOKENS_RESET,
    LLM_PROVIDER_ANTHROPIC_TOKENS_REMAINING,
    LLM_PROVIDER_ANTHROPIC_INPUT_RESET,
    LLM_PROVIDER_ANTHROPIC_INPUT_REMAINING,
    LLM_PROVIDER_ANTHROPIC_OUTPUT_RESET,
    LLM_PROVIDER_ANTHROPIC_OUTPUT_REMAINING,

    LLM_PROVIDER_HEADERS
} llm_provider_header_e;


typedef struct {
    const char  *data;           /* NULL: absent */
    size_t       len;
} llm_provider_str_t;


typedef struct {
    int                  status;
    int64_t              now_ms;     /* the wall clock, for dates */
    llm_provider_str_t   header[LLM_PROVIDER_HEADERS];
    llm_provider_str_t   body;       /* what was read of it */
} llm_provider_in_t;


typedef struct {
    llm_provider_class_e   cls;
    int64_t                retry_ms;   /* from now; -1: not said */
    const char            *code;       /* for the client; NULL when ok */
    const char            *why;        /* the class's reason, for a log */
    const char            *wait_from;  /* the wait's source; NULL: none */
} llm_provider_verdict_t;


/*
 * The index of a header by its name, any case, or -1 if it is not one
 * read: the caller walks the response's headers with it.
 */
int llm_provider_header(const char *name, size_t len);

void llm_provider_read(const llm_provider_in_t *in,
    llm_provider_verdict_t *v);


#endif /* _LLM_PROVIDER_H_INCLUDED_ */
