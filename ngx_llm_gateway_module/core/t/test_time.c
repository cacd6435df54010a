
/*
 * The times and durations of providers' refusals, each reader alone:
 * Retry-After's delta-seconds and three date forms, retry-after-ms, Go's
 * durations, RFC 3339 resets, the same in running text as a body has
 * them, the midnights; garbage, cuts and overflows.
 */


#include "llm_time.h"
#include "tap.h"


/* Mon, 10 Jun 2024 12:00:00 GMT: 05:00 in California (PDT) */
#define NOW            1718020800000LL
#define SEC            1000LL
#define HOUR           3600000LL
#define WEEK           LLM_TIME_WAIT_MAX


/* Retry-After */

static const struct {
    const char  *value;
    int64_t      ms;
} retry_afters[] = {
    { "120", 120 * SEC },
    { "0", 0 },
    { " \t7 \t", 7 * SEC },
    { "1.5", 1500 },
    { "0.0001", 1 },
    { "604800", WEEK },
    { "604801", WEEK },
    { "99999999999999999999999999999999999999", WEEK },
    { "-1", -1 },
    { "+1", -1 },
    { "7s", -1 },
    { "7 8", -1 },
    { "1.", -1 },
    { "", -1 },
    { " ", -1 },

    /* IMF-fixdate, RFC 850, asctime */
    { "Mon, 10 Jun 2024 12:00:30 GMT", 30 * SEC },
    { "Monday, 10-Jun-24 12:00:30 GMT", 30 * SEC },
    { "Mon Jun 10 12:00:30 2024", 30 * SEC },
    { "Tue Jun 11  12:00:00 2024", 24 * HOUR },
    { "Sun Jun  9 12:00:00 2024", 0 },
    { "mon, 10 jun 2024 12:00:30 gmt", 30 * SEC },
    { "MON, 10 JUN 2024 12:00:30 GMT", 30 * SEC },
    { "Mon, 10 Jun 2024 12:00:30 UTC", 30 * SEC },
    { "Fri, 10 Jun 2024 12:00:30 GMT", 30 * SEC },
    { "Mon,  10  Jun  2024  12:00:30  GMT ", 30 * SEC },
    { "Mon, 10 Jun 2024 12:00:00 GMT", 0 },
    { "Mon, 10 Jun 2024 11:59:59 GMT", 0 },
    { "Sun, 06 Nov 1994 08:49:37 GMT", 0 },
    { "Sunday, 06-Nov-94 08:49:37 GMT", 0 },
    { "Sun Nov  6 08:49:37 1994", 0 },
    { "Thu, 01 Jan 1970 00:00:00 GMT", 0 },
    { "Sat, 01 Jan 0001 00:00:00 GMT", 0 },
    { "Fri, 31 Dec 9999 23:59:59 GMT", WEEK },
    { "Thu, 29 Feb 2024 00:00:00 GMT", 0 },
    { "Mon, 17 Jun 2024 12:00:00 GMT", WEEK },
    { "Mon, 17 Jun 2024 12:00:01 GMT", WEEK },
    { "Mon, 17 Jun 2024 11:59:59 GMT", WEEK - SEC },
    { "Mon, 10 Jun 2024 12:00:60 GMT", 60 * SEC },

    /* RFC 850's two digits: within 50 years of now */
    { "Wednesday, 10-Jun-70 12:00:00 GMT", WEEK },
    { "Wednesday, 10-Jun-80 12:00:00 GMT", 0 },
    { "Tuesday, 11-Jun-2024 12:00:00 GMT", 24 * HOUR },

    /* not dates */
    { "Mon, 32 Jun 2024 12:00:00 GMT", -1 },
    { "Mon, 31 Jun 2024 12:00:00 GMT", -1 },
    { "Wed, 29 Feb 2023 12:00:00 GMT", -1 },
    { "Mon, 00 Jun 2024 12:00:00 GMT", -1 },
    { "Mon, 10 Jux 2024 12:00:00 GMT", -1 },
    { "Mon, 10 Jun 2024 24:00:00 GMT", -1 },
    { "Mon, 10 Jun 2024 12:60:00 GMT", -1 },
    { "Mon, 10 Jun 2024 12:00:61 GMT", -1 },
    { "Mon, 10 Jun 2024 12:00:30", -1 },
    { "Mon, 10 Jun 2024 12:00:30 PST", -1 },
    { "Mon, 10 Jun 2024 12:00:30 GMT x", -1 },
    { "Mon, 10 Jun 24 12:00:30 GMT", -1 },
    { "Mon, 10 Jun 20245 12:00:30 GMT", -1 },
    { "Mon, 10 Jun 2024 1:00:30 GMT", -1 },
    { "Mon, 100 Jun 2024 12:00:30 GMT", -1 },
    { "Mon 10 Jun 2024 12:00:30 GMT", -1 },
    { "Mon Jun 10 12:00:30", -1 },
    { "Mon Jun 10 12:00:30 24", -1 },
    { "Monday, 10-Jun-24 12:00:30", -1 },
    { "Monday, 10-Jun 24 12:00:30 GMT", -1 },
    { "Mon,", -1 },
    { "Mon", -1 },
    { "tomorrow", -1 },
    { "2024-06-10T12:00:30Z", -1 },
};


static void
test_retry_after(void)
{
    size_t       i;
    const char  *s;

    for (i = 0; i < sizeof(retry_afters) / sizeof(retry_afters[0]); i++) {
        s = retry_afters[i].value;

        tap_is(llm_time_retry_after(s, strlen(s), NOW),
               retry_afters[i].ms, "retry-after \"%s\"", s);
    }

    tap_is(llm_time_retry_after(NULL, 3, NOW), -1, "retry-after NULL");
    tap_is(llm_time_retry_after("12", 1, NOW), 1 * SEC,
           "retry-after reads len bytes only");

    /* any clock, any date: no overflow */
    s = "Fri, 31 Dec 9999 23:59:59 GMT";
    tap_is(llm_time_retry_after(s, strlen(s), INT64_MIN), WEEK,
           "a far date at the clock's minimum: a week");
    tap_is(llm_time_retry_after(s, strlen(s), INT64_MAX), 0,
           "at its maximum: past");
    s = "Wednesday, 10-Jun-70 12:00:00 GMT";
    tap_is(llm_time_retry_after(s, strlen(s), INT64_MAX), -1,
           "RFC 850 at a clock beyond 9999: unreadable");
    tap_is(llm_time_retry_after(s, strlen(s), INT64_MIN), -1,
           "or before year 1");
    tap_is(llm_time_retry_after(s, strlen(s), 0), WEEK,
           "RFC 850 at the epoch: 10 Jun 1970, ahead");
}


/* Go's durations: x-ratelimit-reset-*, retryDelay */

static const struct {
    const char  *value;
    int64_t      ms;
} durations[] = {
    { "1s", 1000 },
    { "6m0s", 360000 },
    { "20ms", 20 },
    { "1.5s", 1500 },
    { "2h3m4.5s", 7384500 },
    { "34s", 34000 },
    { "8.64s", 8640 },
    { "23h59m0s", 86340000 },
    { "59m59.999s", 3599999 },
    { "1h", 3600000 },
    { "0", 0 },
    { "0s", 0 },
    { " 1s\t", 1000 },
    { "1ms", 1 },
    { "500us", 1 },
    { "1500us", 2 },
    { "1\xc2\xb5s", 1 },
    { "1\xce\xbcs", 1 },
    { "1ns", 1 },
    { "0.0001s", 1 },
    { "1.0001ms", 2 },
    { "12.887438443s", 12888 },
    { "1.2345678901234s", 1235 },
    { "1.0000000000001s", 1001 },
    { ".5s", 500 },
    { "1.5h", 5400000 },
    { "0.1m", 6000 },
    { "6M0S", 360000 },
    { "1h1h", 7200000 },
    { "168h", WEEK },
    { "168h1ms", WEEK },
    { "9999999h", WEEK },
    { "99999999999999999999999999999s", WEEK },
    { "99999999999999999999999999999ns", WEEK },
    { "1.99999999999999999999999999999h", 7200000 },
    { "", -1 },
    { "s", -1 },
    { "1", -1 },
    { "1.5", -1 },
    { "00", -1 },
    { "1x", -1 },
    { "1d", -1 },
    { "1s2", -1 },
    { "1s 2m", -1 },
    { "-1s", -1 },
    { "+1s", -1 },
    { "1 s", -1 },
    { "1.s", -1 },
    { "1seconds", -1 },
    { "1\xc2s", -1 },
    { "\xc2\xb5s", -1 },
};


static void
test_durations(void)
{
    size_t       i;
    const char  *s;

    for (i = 0; i < sizeof(durations) / sizeof(durations[0]); i++) {
        s = durations[i].value;

        tap_is(llm_time_duration(s, strlen(s)), durations[i].ms,
               "duration \"%s\"", s);
    }

    tap_is(llm_time_duration(NULL, 2), -1, "duration NULL");
    tap_is(llm_time_duration("1ms", 2), 60000, "len bytes only: 1m");
}


/* resets: durations, or RFC 3339 times (Anthropic's) */

static const struct {
    const char  *value;
    int64_t      ms;
} resets[] = {
    { "2024-06-10T12:00:21Z", 21 * SEC },
    { "2024-06-10T12:00:21.5Z", 21500 },
    { "2024-06-10T12:00:21.0001Z", 21001 },
    { "2024-06-10T12:00:21.123456789123Z", 21124 },
    { "2024-06-10t12:00:21z", 21 * SEC },
    { "2024-06-10 12:00:21Z", 21 * SEC },
    { "2024-06-10T14:00:21+02:00", 21 * SEC },
    { "2024-06-10T05:00:21-07:00", 21 * SEC },
    { "2024-06-10T05:00:21-0700", 21 * SEC },
    { "2024-06-10T12:00:21", 21 * SEC },
    { "2024-06-11", 12 * HOUR },
    { "2024-06-10T11:00:00Z", 0 },
    { "2024-06-10", 0 },
    { "2030-01-01T00:00:00Z", WEEK },
    { "30s", 30 * SEC },
    { " 30s ", 30 * SEC },
    { "0", 0 },
    { "2024-13-10T12:00:00Z", -1 },
    { "2024-06-31T12:00:00Z", -1 },
    { "2024-06-10T25:00:00Z", -1 },
    { "2024-06-10T12:00:00+24:00", -1 },
    { "2024-06-10T12:00:00+02:60", -1 },
    { "2024-06-10T12:00:00+2", -1 },
    { "2024-06-10T12:00:21Zjunk", -1 },
    { "2024-06-10T12", -1 },
    { "2024-06-10T", -1 },
    { "2024-6-10", -1 },
    { "0000-01-01T00:00:00Z", -1 },
    { "1718020821", -1 },
    { "garbage", -1 },
    { "", -1 },
};


static void
test_resets(void)
{
    size_t       i;
    const char  *s;

    for (i = 0; i < sizeof(resets) / sizeof(resets[0]); i++) {
        s = resets[i].value;

        tap_is(llm_time_reset(s, strlen(s), NOW), resets[i].ms,
               "reset \"%s\"", s);
    }

    s = "9999-12-31T23:59:59.999Z";
    tap_is(llm_time_reset(s, strlen(s), INT64_MIN), WEEK,
           "the latest time at the clock's minimum: a week");
    tap_is(llm_time_reset(s, strlen(s), INT64_MAX), 0,
           "at its maximum: past");
}


/* the midnights, either side of the clock changes of 2024 */

static const struct {
    const char  *name;
    int64_t      now;
    int64_t      utc;
    int64_t      pacific;
} midnights[] = {
    { "June, noon UTC (05:00 PDT)", NOW, 12 * HOUR, 19 * HOUR },
    { "January, noon UTC (04:00 PST)", 1705320000000LL, 12 * HOUR,
      20 * HOUR },
    { "10 Mar 01:00 PST, an hour before PDT", 1710061200000LL, 15 * HOUR,
      22 * HOUR },
    { "9 Mar 00:00 PST", 1709971200000LL, 16 * HOUR, 24 * HOUR },
    { "3 Nov 00:00 PDT, a day of 25 hours", 1730617200000LL, 17 * HOUR,
      25 * HOUR },
    { "3 Nov 01:30 PDT", 1730622600000LL, 15 * HOUR + 30 * 60 * SEC,
      23 * HOUR + 30 * 60 * SEC },
    { "the epoch", 0, 24 * HOUR, 8 * HOUR },
    { "a millisecond before it", -1, 1, 8 * HOUR + 1 },
};


static void
test_midnights(void)
{
    size_t   i;
    int64_t  t, u, p;
    int      bad;

    for (i = 0; i < sizeof(midnights) / sizeof(midnights[0]); i++) {
        tap_is(llm_time_next_midnight(midnights[i].now), midnights[i].utc,
               "%s: to midnight UTC", midnights[i].name);
        tap_is(llm_time_next_midnight_pacific(midnights[i].now),
               midnights[i].pacific, "  to midnight Pacific");
    }

    /* every 7 minutes of 2024 and 2025: within range, and a midnight */
    bad = 0;

    for (t = 1704067200000LL; t < 1767225600000LL; t += 7 * 60 * SEC + 1) {
        u = llm_time_next_midnight(t);
        p = llm_time_next_midnight_pacific(t);

        bad += u <= 0 || u > 24 * HOUR || (t + u) % (24 * HOUR) != 0;
        bad += p <= 0 || p > 25 * HOUR
               || ((t + p) % (24 * HOUR) != 7 * HOUR
                   && (t + p) % (24 * HOUR) != 8 * HOUR);
    }

    tap_is(bad, 0, "2024 and 2025 in steps of 7 minutes: midnights");

    tap_ok(llm_time_next_midnight(INT64_MIN) > 0
           && llm_time_next_midnight(INT64_MAX) > 0
           && llm_time_next_midnight_pacific(INT64_MIN) > 0
           && llm_time_next_midnight_pacific(INT64_MAX) > 0,
           "the clock's ends: no overflow");
}


/* retry-after-ms */

static const struct {
    const char  *value;
    int64_t      ms;
} mss[] = {
    { "120", 120 },
    { " 0 ", 0 },
    { "1.5", 2 },
    { "0.0001", 1 },
    { "604800000", WEEK },
    { "604800001", WEEK },
    { "99999999999999999999999999999999999999", WEEK },
    { "", -1 },
    { "-1", -1 },
    { "12ms", -1 },
    { "1.", -1 },
    { ".5", -1 },
};


static void
test_ms(void)
{
    size_t       i;
    const char  *s;

    for (i = 0; i < sizeof(mss) / sizeof(mss[0]); i++) {
        s = mss[i].value;

        tap_is(llm_time_ms(s, strlen(s)), mss[i].ms, "ms \"%s\"", s);
    }

    tap_is(llm_time_ms(NULL, 3), -1, "ms NULL");
    tap_is(llm_time_ms("125", 2), 12, "ms reads len bytes only");
}


/*
 * In running text, as a body has them: the cursor is left after what was
 * read, and what follows is not taken.
 */

static const struct {
    const char  *text;
    int          words;
    int64_t      ms;
    size_t       left;          /* bytes of text after the cursor */
} texts[] = {
    { "34s\", \"x\"", 0, 34 * SEC, 6 },
    { "1m30s and more", 0, 90 * SEC, 9 },
    { "7 seconds.", 1, 7 * SEC, 1 },
    { "2 mins 3 secs, then", 1, 123 * SEC, 6 },
    { "1.5 hours", 1, 90 * 60 * SEC, 0 },
    { "12.8s.", 1, 12800, 1 },
    { "7", 1, 7 * SEC, 0 },
    { "7", 0, -1, 1 },
    { "7 seconds", 0, -1, 9 },
    { "soon", 1, -1, 4 },
};


static void
test_parse_duration(void)
{
    size_t           i;
    int64_t          ms;
    const char      *s;
    llm_time_cur_t   c;

    for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        s = texts[i].text;
        c.p = s;
        c.end = s + strlen(s);

        ms = llm_time_parse_duration(&c, texts[i].words);

        tap_is(ms, texts[i].ms, "duration in \"%s\" (words %d)", s,
               texts[i].words);

        if (ms >= 0) {
            tap_is(c.end - c.p, texts[i].left, "... and %zu bytes left",
                   texts[i].left);
        }
    }
}


static const struct {
    const char  *text;
    int          words;
    int64_t      at;            /* ms since the epoch */
    size_t       left;
} stamps[] = {
    { "2024-06-10T12:00:30Z, then", 0, NOW + 30 * SEC, 6 },
    { "2024-06-10 14:00:00+02:00", 0, NOW, 0 },
    { "2024-06-10", 0, NOW - 12 * HOUR, 0 },
    { "2024-06-10T12:00:00.0001Z", 0, NOW + 1, 0 },
    { "2025-08-01 at 00:00 UTC.", 1, 1754006400000LL, 1 },
    { "2025-08-01 AT 00:00 utc", 1, 1754006400000LL, 0 },
    { "2025-08-01.", 1, INT64_MIN, 0 },
    { "2025-02-29T00:00:00Z", 0, INT64_MIN, 0 },
    { "2025-08-01 at 24:00 UTC", 1, INT64_MIN, 0 },
};


static void
test_parse_timestamp(void)
{
    size_t           i;
    int64_t          at;
    const char      *s;
    llm_time_cur_t   c;

    for (i = 0; i < sizeof(stamps) / sizeof(stamps[0]); i++) {
        s = stamps[i].text;
        c.p = s;
        c.end = s + strlen(s);

        at = llm_time_parse_timestamp(&c, stamps[i].words);

        tap_is(at, stamps[i].at, "time in \"%s\" (words %d)", s,
               stamps[i].words);

        if (at != INT64_MIN) {
            tap_is(c.end - c.p, stamps[i].left, "... and %zu bytes left",
                   stamps[i].left);
        }
    }
}


static void
test_wait_until(void)
{
    tap_is(llm_time_wait_until(NOW + 5 * SEC, NOW), 5 * SEC,
           "wait until 5 s ahead");
    tap_is(llm_time_wait_until(NOW - 5 * SEC, NOW), 0, "a time past: 0");
    tap_is(llm_time_wait_until(NOW, NOW), 0, "now: 0");
    tap_is(llm_time_wait_until(NOW + 30LL * 86400 * SEC, NOW), WEEK,
           "a month ahead: a week");
    tap_is(llm_time_wait_until(253402300799000LL, INT64_MIN), WEEK,
           "year 9999 at the clock's minimum: a week, no overflow");
}


int
main(void)
{
    test_retry_after();
    test_ms();
    test_durations();
    test_resets();
    test_parse_duration();
    test_parse_timestamp();
    test_wait_until();
    test_midnights();

    return tap_done();
}
