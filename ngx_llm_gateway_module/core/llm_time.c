
/*
 * The times and durations providers write, read into waits: see
 * llm_time.h.  Dates are of the proleptic Gregorian calendar, computed
 * with days since the epoch (no libc: no time zone, no locale, no limit
 * at 2038), and every sum saturates.
 */


#include "llm_time.h"


#define LLM_TIME_DAY_MS             86400000LL
#define LLM_TIME_HOUR_MS            3600000LL

/* durations are summed in ns up to just over the longest wait */
#define LLM_TIME_NS_CAP             ((LLM_TIME_WAIT_MAX + 1) * 1000000LL)

/* integers saturate here: above any wait in ns, far below INT64_MAX */
#define LLM_TIME_INT_CAP            1000000000000000000LL

/* dates of years 1 to 9999 only; a clock beyond 2^60 ms is not one */
#define LLM_TIME_CLOCK_MAX          (1LL << 60)


static int64_t llm_time_http_date(llm_time_cur_t *c, int64_t now_ms);


static const char  *llm_time_months[] = {
    "jan", "feb", "mar", "apr", "may", "jun",
    "jul", "aug", "sep", "oct", "nov", "dec"
};


static int
llm_time_lower(int c)
{
    return (c >= 'A' && c <= 'Z') ? c | 0x20 : c;
}


static int
llm_time_digit(int c)
{
    return c >= '0' && c <= '9';
}


static int
llm_time_alpha(int c)
{
    c = llm_time_lower(c);

    return c >= 'a' && c <= 'z';
}


static int
llm_time_blank(int c)
{
    return c == ' ' || c == '\t';
}


static void
llm_time_skip_blanks(llm_time_cur_t *c)
{
    while (c->p < c->end && llm_time_blank((unsigned char) *c->p)) {
        c->p++;
    }
}


static int
llm_time_peek(llm_time_cur_t *c)
{
    return c->p < c->end ? (unsigned char) *c->p : -1;
}


/* the next byte if it is ch, in any case */

static int
llm_time_take(llm_time_cur_t *c, int ch)
{
    if (c->p < c->end && llm_time_lower((unsigned char) *c->p) == ch) {
        c->p++;
        return 1;
    }

    return 0;
}


/* a lowercase word, in any case */

static int
llm_time_take_word(llm_time_cur_t *c, const char *w)
{
    const char  *p;

    for (p = c->p; *w; w++, p++) {
        if (p == c->end || llm_time_lower((unsigned char) *p) != *w) {
            return 0;
        }
    }

    c->p = p;

    return 1;
}


/* s, of len bytes, is the lowercase name, in any case */

static int
llm_time_is(const char *name, const char *s, size_t len)
{
    size_t  i;

    for (i = 0; i < len; i++) {
        if (name[i] == '\0'
            || llm_time_lower((unsigned char) s[i])
               != (unsigned char) name[i])
        {
            return 0;
        }
    }

    return name[len] == '\0';
}


/* between min and max digits, exactly; -1 otherwise */

static int64_t
llm_time_digits(llm_time_cur_t *c, int min, int max)
{
    int      n;
    int64_t  v;

    v = 0;

    for (n = 0; n < max && c->p < c->end && llm_time_digit(*c->p); n++) {
        v = v * 10 + (*c->p++ - '0');
    }

    return n < min ? -1 : v;
}


/* any number of digits, saturating; -1 if none */

static int64_t
llm_time_number(llm_time_cur_t *c)
{
    int64_t  v;

    if (c->p == c->end || !llm_time_digit(*c->p)) {
        return -1;
    }

    v = 0;

    while (c->p < c->end && llm_time_digit(*c->p)) {
        v = v > LLM_TIME_INT_CAP / 10 ? LLM_TIME_INT_CAP
                                          : v * 10 + (*c->p - '0');
        c->p++;
    }

    return v;
}


/*
 * A fraction after '.': its first *n digits (at most 9) in *f, and 1 if
 * any digit after those is not 0.  Without a digit after the '.', the
 * '.' is not taken.
 */

static int
llm_time_fraction(llm_time_cur_t *c, int64_t *f, int *n)
{
    int  more;

    *f = 0;
    *n = 0;

    if (c->end - c->p < 2 || c->p[0] != '.' || !llm_time_digit(c->p[1])) {
        return 0;
    }

    c->p++;
    more = 0;

    while (c->p < c->end && llm_time_digit(*c->p)) {
        if (*n < 9) {
            *f = *f * 10 + (*c->p - '0');
            (*n)++;

        } else if (*c->p != '0') {
            more = 1;
        }

        c->p++;
    }

    return more;
}


static int64_t
llm_time_clamp(int64_t ms)
{
    return ms > LLM_TIME_WAIT_MAX ? LLM_TIME_WAIT_MAX : ms;
}


/*
 * A number of units (of unit ns each; a power of ten, or 60 s, or 1 h)
 * with a fraction, in ns, rounded up, saturating at LLM_TIME_NS_CAP.
 */

static int64_t
llm_time_scale(int64_t i, int64_t f, int n, int more, int64_t unit)
{
    int      d;
    int64_t  v, p;

    /* the fraction digits the unit divides exactly */
    for (d = 0, p = unit; d < 9 && p % 10 == 0; d++, p /= 10) {
        /* void */
    }

    while (n > d) {
        more |= f % 10 != 0;
        f /= 10;
        n--;
    }

    for (p = unit; n > 0; n--) {
        p /= 10;
    }

    if (i > LLM_TIME_NS_CAP / unit) {
        return LLM_TIME_NS_CAP;
    }

    v = i * unit + f * p + more;

    return v > LLM_TIME_NS_CAP ? LLM_TIME_NS_CAP : v;
}


static int64_t
llm_time_ns_to_ms(int64_t ns)
{
    return llm_time_clamp((ns + 999999) / 1000000);
}


/* a decimal number of units, "7" or "1.5", as ms rounded up */

static int64_t
llm_time_decimal(llm_time_cur_t *c, int64_t unit_ns)
{
    int      n, more;
    int64_t  i, f;

    i = llm_time_number(c);

    if (i < 0) {
        return -1;
    }

    more = llm_time_fraction(c, &f, &n);

    return llm_time_ns_to_ms(llm_time_scale(i, f, n, more, unit_ns));
}


/* the whole of s but blanks */

static int
llm_time_done(llm_time_cur_t *c)
{
    llm_time_skip_blanks(c);

    return c->p == c->end;
}


int64_t
llm_time_retry_after(const char *s, size_t len, int64_t now_ms)
{
    int64_t         ms;
    llm_time_cur_t  c;

    if (s == NULL) {
        return -1;
    }

    c.p = s;
    c.end = s + len;

    llm_time_skip_blanks(&c);

    if (llm_time_digit(llm_time_peek(&c))) {
        ms = llm_time_decimal(&c, 1000000000);
        return llm_time_done(&c) ? ms : -1;
    }

    ms = llm_time_http_date(&c, now_ms);

    return (ms >= 0 && llm_time_done(&c)) ? ms : -1;
}


/* retry-after-ms: a decimal number of milliseconds, rounded up */

int64_t
llm_time_ms(const char *s, size_t len)
{
    int64_t         ms;
    llm_time_cur_t  c;

    if (s == NULL) {
        return -1;
    }

    c.p = s;
    c.end = s + len;

    llm_time_skip_blanks(&c);
    ms = llm_time_decimal(&c, 1000000);

    return (ms >= 0 && llm_time_done(&c)) ? ms : -1;
}


int64_t
llm_time_duration(const char *s, size_t len)
{
    int64_t         ms;
    llm_time_cur_t  c;

    if (s == NULL) {
        return -1;
    }

    c.p = s;
    c.end = s + len;

    llm_time_skip_blanks(&c);
    ms = llm_time_parse_duration(&c, 0);

    return (ms >= 0 && llm_time_done(&c)) ? ms : -1;
}


int64_t
llm_time_reset(const char *s, size_t len, int64_t now_ms)
{
    int64_t         at;
    llm_time_cur_t  c;

    if (s == NULL) {
        return -1;
    }

    at = llm_time_duration(s, len);

    if (at >= 0) {
        return at;
    }

    c.p = s;
    c.end = s + len;

    llm_time_skip_blanks(&c);
    at = llm_time_parse_timestamp(&c, 0);

    if (at == INT64_MIN || !llm_time_done(&c)) {
        return -1;
    }

    return llm_time_wait_until(at, now_ms);
}


/* the units of a duration; with words, the body's spellings too */

static const struct {
    const char  *name;
    int64_t      ns;
    int          words;
} llm_time_units[] = {
    { "ns", 1, 0 },
    { "us", 1000, 0 },
    { "\xc2\xb5s", 1000, 0 },            /* U+00B5 micro sign */
    { "\xce\xbcs", 1000, 0 },            /* U+03BC Greek mu */
    { "ms", 1000000, 0 },
    { "s", 1000000000, 0 },
    { "m", 60000000000LL, 0 },
    { "h", 3600000000000LL, 0 },
    { "msec", 1000000, 1 },
    { "msecs", 1000000, 1 },
    { "millisecond", 1000000, 1 },
    { "milliseconds", 1000000, 1 },
    { "sec", 1000000000, 1 },
    { "secs", 1000000000, 1 },
    { "second", 1000000000, 1 },
    { "seconds", 1000000000, 1 },
    { "min", 60000000000LL, 1 },
    { "mins", 60000000000LL, 1 },
    { "minute", 60000000000LL, 1 },
    { "minutes", 60000000000LL, 1 },
    { "hr", 3600000000000LL, 1 },
    { "hrs", 3600000000000LL, 1 },
    { "hour", 3600000000000LL, 1 },
    { "hours", 3600000000000LL, 1 },
    { "day", 86400000000000LL, 1 },
    { "days", 86400000000000LL, 1 }
};

#define LLM_TIME_UNITS                                                        \
    (sizeof(llm_time_units) / sizeof(llm_time_units[0]))


/*
 * A duration: parts of a number and a unit, "2h3m4.5s", in ms rounded up,
 * or -1.  Strict (words 0): Go's, a unit to every part but a lone "0".
 * With words, as people write in the body: blanks between a number and
 * its unit and between parts, the units' long names, and a lone number
 * taken as seconds.  c is left after what was read.
 */

int64_t
llm_time_parse_duration(llm_time_cur_t *c, int words)
{
    int              n, more, parts;
    size_t           k, len;
    int64_t          i, f, ns, part;
    const char      *start;
    llm_time_cur_t   r, u;

    ns = 0;
    parts = 0;

    for ( ;; ) {
        r = *c;

        if (words && parts) {
            llm_time_skip_blanks(&r);
        }

        i = llm_time_number(&r);
        more = llm_time_fraction(&r, &f, &n);

        if (i < 0 && n == 0) {
            break;
        }

        if (i < 0) {
            /* ".5s": Go takes it */
            i = 0;
        }

        u = r;

        if (words) {
            llm_time_skip_blanks(&u);
        }

        /* the unit: letters, or Go's micro signs */
        start = u.p;

        while (u.p < u.end
               && (llm_time_alpha((unsigned char) *u.p)
                   || (unsigned char) *u.p >= 0x80))
        {
            u.p++;
        }

        len = (size_t) (u.p - start);
        part = -1;

        for (k = 0; k < LLM_TIME_UNITS; k++) {
            if (llm_time_units[k].words > words
                || !llm_time_is(llm_time_units[k].name, start, len))
            {
                continue;
            }

            part = llm_time_scale(i, f, n, more, llm_time_units[k].ns);
            break;
        }

        if (part < 0) {

            if (len == 0 && u.p == u.end && parts) {
                /* "1m3": a value cut short */
                return -1;
            }

            if (parts) {
                break;
            }

            if (words && len == 0) {
                /* "retry after 7": seconds */
                *c = r;
                part = llm_time_scale(i, f, n, more, 1000000000);
                return llm_time_ns_to_ms(part);
            }

            if (i == 0 && n == 0 && r.p - c->p == 1 && !words) {
                /* Go's "0" */
                *c = r;
                return 0;
            }

            return -1;
        }

        *c = u;
        ns = ns > LLM_TIME_NS_CAP - part ? LLM_TIME_NS_CAP : ns + part;
        parts++;
    }

    return parts ? llm_time_ns_to_ms(ns) : -1;
}


static int
llm_time_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}


static int
llm_time_month_days(int64_t y, int64_t m)
{
    static const int  days[] = {
        31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31
    };

    return (m == 2 && llm_time_leap(y)) ? 29 : days[m - 1];
}


/* days since 1970-01-01 of a date of the proleptic Gregorian calendar */

static int64_t
llm_time_days(int64_t y, int64_t m, int64_t d)
{
    int64_t  era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

    return era * 146097 + doe - 719468;
}


/* the year of a day since 1970-01-01 */

static int64_t
llm_time_year(int64_t z)
{
    int64_t  era, doe, yoe, doy, mp;

    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;

    return yoe + era * 400 + (mp >= 10);
}


static int64_t
llm_time_floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}


/* at, ms since the epoch, as a wait from now: 0 if past */

int64_t
llm_time_wait_until(int64_t at_ms, int64_t now_ms)
{
    if (at_ms <= now_ms) {
        return 0;
    }

    /* at_ms is within the years 1 to 9999: no overflow */
    if (at_ms - LLM_TIME_WAIT_MAX > now_ms) {
        return LLM_TIME_WAIT_MAX;
    }

    return at_ms - now_ms;
}


/* ms since the epoch of a valid date and time, or INT64_MIN */

static int64_t
llm_time_epoch_ms(int64_t y, int64_t mo, int64_t d, int64_t h, int64_t mi,
    int64_t s)
{
    if (y < 1 || y > 9999 || mo < 1 || mo > 12 || d < 1
        || d > llm_time_month_days(y, mo) || h < 0 || h > 23 || mi < 0
        || mi > 59 || s < 0 || s > 60)
    {
        return INT64_MIN;
    }

    return llm_time_days(y, mo, d) * LLM_TIME_DAY_MS
           + h * LLM_TIME_HOUR_MS + mi * 60000
           + s * 1000;
}


/* at least one blank */

static int
llm_time_space(llm_time_cur_t *c)
{
    if (!llm_time_blank(llm_time_peek(c))) {
        return 0;
    }

    llm_time_skip_blanks(c);

    return 1;
}


static int64_t
llm_time_month(llm_time_cur_t *c)
{
    int64_t  m;

    for (m = 0; m < 12; m++) {
        if (llm_time_take_word(c, llm_time_months[m])) {
            return m + 1;
        }
    }

    return -1;
}


/* "08:49:37" */

static int
llm_time_hms(llm_time_cur_t *c, int64_t *h, int64_t *mi, int64_t *s)
{
    *h = llm_time_digits(c, 2, 2);

    if (*h < 0 || !llm_time_take(c, ':')) {
        return 0;
    }

    *mi = llm_time_digits(c, 2, 2);

    if (*mi < 0 || !llm_time_take(c, ':')) {
        return 0;
    }

    *s = llm_time_digits(c, 2, 2);

    return *s >= 0;
}


/*
 * An HTTP-date as a wait from now_ms, or -1 (RFC 9110, 5.6.7):
 *
 *     Sun, 06 Nov 1994 08:49:37 GMT     IMF-fixdate
 *     Sunday, 06-Nov-94 08:49:37 GMT    RFC 850
 *     Sun Nov  6 08:49:37 1994          asctime
 *
 * The day's name is not checked against the date: the date is what
 * counts.  Any case; any run of blanks for one.
 */

static int64_t
llm_time_http_date(llm_time_cur_t *c, int64_t now_ms)
{
    int64_t  y, mo, d, h, mi, s, now_y, at;

    if (!llm_time_alpha(llm_time_peek(c))) {
        return -1;
    }

    while (llm_time_alpha(llm_time_peek(c))) {
        c->p++;
    }

    if (llm_time_take(c, ',')) {
        if (!llm_time_space(c)) {
            return -1;
        }

        d = llm_time_digits(c, 1, 2);

        if (d < 0) {
            return -1;
        }

        if (llm_time_space(c)) {
            /* IMF-fixdate */
            mo = llm_time_month(c);

            if (mo < 0 || !llm_time_space(c)) {
                return -1;
            }

            y = llm_time_digits(c, 4, 4);

        } else if (llm_time_take(c, '-')) {
            /* RFC 850 */
            mo = llm_time_month(c);

            if (mo < 0 || !llm_time_take(c, '-')) {
                return -1;
            }

            y = llm_time_digits(c, 2, 4);

            if (y >= 0 && y < 100) {
                if (now_ms < -LLM_TIME_CLOCK_MAX
                    || now_ms > LLM_TIME_CLOCK_MAX)
                {
                    return -1;
                }

                now_y = llm_time_year(
                            llm_time_floor_div(now_ms,
                                                   LLM_TIME_DAY_MS));
                y += now_y - now_y % 100;

                if (y > now_y + 50) {
                    y -= 100;
                }
            }

        } else {
            return -1;
        }

        if (y < 0 || !llm_time_space(c)
            || !llm_time_hms(c, &h, &mi, &s)
            || !llm_time_space(c)
            || !(llm_time_take_word(c, "gmt")
                 || llm_time_take_word(c, "utc")))
        {
            return -1;
        }

    } else {
        /* asctime */
        if (!llm_time_space(c)) {
            return -1;
        }

        mo = llm_time_month(c);

        if (mo < 0 || !llm_time_space(c)) {
            return -1;
        }

        d = llm_time_digits(c, 1, 2);

        if (d < 0 || !llm_time_space(c)
            || !llm_time_hms(c, &h, &mi, &s)
            || !llm_time_space(c))
        {
            return -1;
        }

        y = llm_time_digits(c, 4, 4);
    }

    at = llm_time_epoch_ms(y, mo, d, h, mi, s);

    return at == INT64_MIN ? -1 : llm_time_wait_until(at, now_ms);
}


/*
 * A time as ms since the epoch, or INT64_MIN.  RFC 3339 (words 0):
 * "2024-08-27T12:34:56.123Z", "2024-08-27 12:34:56+09:00", and leniently
 * without a zone (UTC) or a time (midnight); the body's (words 1):
 * "2025-08-01 at 00:00 UTC", the time required.  Any case; a fraction
 * rounded up.  c is left after what was read.
 */

int64_t
llm_time_parse_timestamp(llm_time_cur_t *c, int words)
{
    int             n, more;
    int64_t         y, mo, d, h, mi, s, f, off, at, sign;
    llm_time_cur_t  r;

    y = llm_time_digits(c, 4, 4);

    if (y < 0 || !llm_time_take(c, '-')) {
        return INT64_MIN;
    }

    mo = llm_time_digits(c, 2, 2);

    if (mo < 0 || !llm_time_take(c, '-')) {
        return INT64_MIN;
    }

    d = llm_time_digits(c, 2, 2);

    if (d < 0) {
        return INT64_MIN;
    }

    h = 0;
    mi = 0;
    s = 0;
    f = 0;
    n = 0;
    more = 0;
    off = 0;

    r = *c;

    if (words ? (llm_time_space(&r) && llm_time_take_word(&r, "at")
                 && llm_time_space(&r))
              : (llm_time_take(&r, 't') || llm_time_take(&r, ' ')))
    {
        h = llm_time_digits(&r, 2, 2);

        if (h < 0 || !llm_time_take(&r, ':')) {
            return INT64_MIN;
        }

        mi = llm_time_digits(&r, 2, 2);

        if (mi < 0) {
            return INT64_MIN;
        }

        if (llm_time_take(&r, ':')) {
            s = llm_time_digits(&r, 2, 2);

            if (s < 0) {
                return INT64_MIN;
            }

            more = llm_time_fraction(&r, &f, &n);
        }

        *c = r;

        if (words) {
            llm_time_skip_blanks(&r);
        }

        if (llm_time_take(&r, 'z')) {
            *c = r;

        } else if (llm_time_take_word(&r, "utc")
                   || llm_time_take_word(&r, "gmt"))
        {
            *c = r;

        } else if (llm_time_peek(&r) == '+'
                   || llm_time_peek(&r) == '-')
        {
            sign = llm_time_peek(&r) == '-' ? -1 : 1;
            r.p++;

            off = llm_time_digits(&r, 2, 2);

            if (off < 0 || off > 23) {
                return INT64_MIN;
            }

            off *= 60;
            (void) llm_time_take(&r, ':');

            at = llm_time_digits(&r, 2, 2);

            if (at < 0 || at > 59) {
                return INT64_MIN;
            }

            off = sign * (off + at) * 60000;
            *c = r;
        }

    } else if (words) {
        /* the body's date without its time may be one cut short */
        return INT64_MIN;
    }

    at = llm_time_epoch_ms(y, mo, d, h, mi, s);

    if (at == INT64_MIN) {
        return INT64_MIN;
    }

    /* the fraction in ms, rounded up */
    while (n > 3) {
        more |= f % 10 != 0;
        f /= 10;
        n--;
    }

    while (n < 3) {
        f *= 10;
        n++;
    }

    return at + f + more - off;
}


int64_t
llm_time_next_midnight(int64_t now_ms)
{
    int64_t  r;

    r = now_ms % LLM_TIME_DAY_MS;

    if (r < 0) {
        r += LLM_TIME_DAY_MS;
    }

    return LLM_TIME_DAY_MS - r;
}


/* UTC's offset of US Pacific time at t: PDT from the second Sunday of
 * March, 10:00 UTC, to the first Sunday of November, 09:00 UTC */

static int64_t
llm_time_pacific_offset(int64_t t)
{
    int64_t  y, mar, nov, start, end;

    y = llm_time_year(llm_time_floor_div(t, LLM_TIME_DAY_MS));

    /* 1970-01-01 was a Thursday: the first Sunday on or after day z */
    mar = llm_time_days(y, 3, 1);
    mar += (7 - ((mar % 7 + 7 + 4) % 7)) % 7 + 7;

    nov = llm_time_days(y, 11, 1);
    nov += (7 - ((nov % 7 + 7 + 4) % 7)) % 7;

    start = mar * LLM_TIME_DAY_MS + 10 * LLM_TIME_HOUR_MS;
    end = nov * LLM_TIME_DAY_MS + 9 * LLM_TIME_HOUR_MS;

    return (t >= start && t < end) ? -7 * LLM_TIME_HOUR_MS
                                   : -8 * LLM_TIME_HOUR_MS;
}


int64_t
llm_time_next_midnight_pacific(int64_t now_ms)
{
    int64_t  off, local, at;

    if (now_ms < -LLM_TIME_CLOCK_MAX || now_ms > LLM_TIME_CLOCK_MAX) {
        return llm_time_next_midnight(now_ms);
    }

    off = llm_time_pacific_offset(now_ms);
    local = now_ms + off;
    local = (llm_time_floor_div(local, LLM_TIME_DAY_MS) + 1)
            * LLM_TIME_DAY_MS;

    /*
     * The clocks change at 2 AM, never at midnight: the offset at that
     * midnight is the one of the day it starts.
     */
    at = local - off;
    off = llm_time_pacific_offset(at);
    at = local - off;

    return at - now_ms;
}
