
/*
 * The times and durations providers write in their refusals, read into
 * waits: delta-seconds and HTTP-dates (Retry-After), Go's durations
 * (OpenAI's x-ratelimit-reset-*, Gemini's retryDelay), RFC 3339 times
 * (Anthropic's resets), and the same as people write them in a body
 * ("retry after 7 seconds", "regain access on 2025-08-01 at 00:00 UTC").
 * And the next midnight, UTC or US Pacific, when daily quotas reset.
 *
 * Each wait is in ms from now_ms within [0, LLM_TIME_WAIT_MAX], or -1
 * when the text is not one; a time in the past is a wait of 0.  Any case;
 * numbers saturate, never overflow.  Plain C, no allocation, no floats,
 * no libc time: the wall clock is the caller's.
 */

#ifndef _LLM_TIME_H_INCLUDED_
#define _LLM_TIME_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>


/* waits above this (a week) are taken as this */
#define LLM_TIME_WAIT_MAX          604800000LL


/* a place in a text being read, for a reader of running text */
typedef struct {
    const char  *p;
    const char  *end;
} llm_time_cur_t;


/*
 * A whole value, blanks around it allowed.
 *
 * retry_after: delta-seconds ("120"; "1.5" is taken, rounded up) or an
 * HTTP-date in any of its three forms (RFC 9110, 5.6.7), a two-digit
 * RFC 850 year taken within 50 years of now.
 * ms: a decimal number of milliseconds, as retry-after-ms has it.
 * duration: Go's ("1s", "6m0s", "20ms", "1.5s", "2h3m4.5s", "34s", "0";
 * ns, us or a micro sign, ms, s, m, h), sub-millisecond parts rounded up.
 * A number without a unit is not one.
 * reset: a duration or an RFC 3339 time ("2024-08-27T12:34:56Z"),
 * whichever the value is.
 */
int64_t llm_time_retry_after(const char *s, size_t len, int64_t now_ms);
int64_t llm_time_ms(const char *s, size_t len);
int64_t llm_time_duration(const char *s, size_t len);
int64_t llm_time_reset(const char *s, size_t len, int64_t now_ms);

/*
 * At c, in running text; c is left after what was read.
 *
 * parse_duration: a duration in ms rounded up, or -1.  Strict (words 0):
 * Go's.  With words, as people write: blanks between a number and its
 * unit and between parts, the units' long names ("7 seconds", "2 mins"),
 * and a lone number taken as seconds.
 * parse_timestamp: a time as ms since the epoch, or INT64_MIN.  RFC 3339
 * (words 0), leniently without a zone (UTC) or a time (midnight); with
 * words, "2025-08-01 at 00:00 UTC", the time required.  A fraction of a
 * second is rounded up.
 * wait_until: a time as a wait from now_ms.
 */
int64_t llm_time_parse_duration(llm_time_cur_t *c, int words);
int64_t llm_time_parse_timestamp(llm_time_cur_t *c, int words);
int64_t llm_time_wait_until(int64_t at_ms, int64_t now_ms);

/*
 * The time to the next midnight: UTC, in (0, 24 h]; US Pacific, in
 * (0, 25 h] (PST, and PDT by the rules since 2007: from the second
 * Sunday of March to the first Sunday of November, at 2 AM local time).
 */
int64_t llm_time_next_midnight(int64_t now_ms);
int64_t llm_time_next_midnight_pacific(int64_t now_ms);


#endif /* _LLM_TIME_H_INCLUDED_ */
