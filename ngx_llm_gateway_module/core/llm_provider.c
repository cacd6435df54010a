
/*
 * Reading a provider's refusal: busy, spent or failed, and for how long;
 * see llm_provider.h.
 */


#include "llm_provider.h"


#define LLM_PROVIDER_DAY_MS         86400000LL
#define LLM_PROVIDER_HOUR_MS        3600000LL

/* durations are summed in ns up to just over the longest wait */
#define LLM_PROVIDER_NS_CAP         ((LLM_PROVIDER_WAIT_MAX + 1) * 1000000LL)

/* integers saturate here: above any wait in ns, far below INT64_MAX */
#define LLM_PROVIDER_INT_CAP        1000000000000000000LL

/* dates of years 1 to 9999 only; a clock beyond 2^60 ms is not one */
#define LLM_PROVIDER_CLOCK_MAX      (1LL << 60)

/* the bytes of a wait's value kept, as read after its word */
#define LLM_PROVIDER_CAPTURE_MAX    48

/* the longest body word, and one */
#define LLM_PROVIDER_WORD_MAX       32


/* body words */
#define LLM_PROVIDER_STRONG         0x01    /* spent on a 400 or 403 too */
#define LLM_PROVIDER_OVERLOAD       0x02    /* busy: provider_overloaded */
#define LLM_PROVIDER_GEMINI_DAY     0x04    /* resets at midnight Pacific */
#define LLM_PROVIDER_VALUE          0x08    /* a wait follows */
#define LLM_PROVIDER_ACCOUNT        0x10    /* credit, billing: 10 min */


/*
 * A spent account (credit, balance, billing, a plan's usage limit) comes
 * back when someone pays, not at a reset: looked at again this often
 * (source 002's default for account limits and prepaid balances).
 */
#define LLM_PROVIDER_ACCOUNT_WAIT   600000


typedef struct {
    const char            *text;    /* lowercase */
    size_t                 len;
    llm_provider_class_e   cls;     /* or the kind of wait */
    unsigned               flags;
    const char            *why;
} llm_provider_word_t;


/* the kinds of wait in the body, in their order of precedence */
#define LLM_PROVIDER_WAIT_DELAY     0       /* "retryDelay": "34s" */
#define LLM_PROVIDER_WAIT_PHRASE    1       /* retry after 7 seconds */
#define LLM_PROVIDER_WAIT_REGAIN    2       /* regain access on ... */
#define LLM_PROVIDER_WAIT_KINDS     3


typedef struct {
    const char  *p;
    const char  *end;
} llm_provider_cur_t;


typedef struct {
    const char  *p;
    const char  *end;
    int          state;
    uint64_t     left;              /* of the current chunk */
} llm_provider_body_t;


/* the body reader's states */
#define LLM_PROVIDER_BODY_RAW       0
#define LLM_PROVIDER_BODY_SIZE      1       /* a chunk size, hex digits */
#define LLM_PROVIDER_BODY_EXT       2       /* its extensions, up to LF */
#define LLM_PROVIDER_BODY_SIZE_LF   3
#define LLM_PROVIDER_BODY_DATA      4
#define LLM_PROVIDER_BODY_DATA_CR   5
#define LLM_PROVIDER_BODY_DATA_LF   6
#define LLM_PROVIDER_BODY_DONE      7


/* a word's Knuth-Morris-Pratt automaton */
typedef struct {
    uint8_t     fail[LLM_PROVIDER_WORD_MAX];
    uint8_t     at;                 /* bytes matched */
} llm_provider_kmp_t;


typedef struct {
    const llm_provider_word_t  *word;       /* the first in the list */
    const llm_provider_word_t  *strong;     /* the first strong one */
    const llm_provider_word_t  *overload;   /* any overload word */
    int64_t                     wait[LLM_PROVIDER_WAIT_KINDS]; /* -1: none */
    const char                 *wait_from[LLM_PROVIDER_WAIT_KINDS];
} llm_provider_scan_t;


/* a word longer than LLM_PROVIDER_WORD_MAX does not compile */
#define llm_provider_word(s, cls, flags, why)                                 \
    { s, sizeof(s) - 1                                                        \
         + 0 * sizeof(char[sizeof(s) <= LLM_PROVIDER_WORD_MAX ? 1 : -1]),     \
      cls, flags, why }

/*
 * Their order is their precedence: the first found decides.  See the
 * head comment of llm_provider.h.  Each why is "body: " and the word as
 * providers write it.  The waits come last; their "class" is their kind.
 */

static const llm_provider_word_t  llm_provider_words[] = {

    /* a daily limit */
    llm_provider_word("perday", LLM_PROVIDER_SPENT, LLM_PROVIDER_GEMINI_DAY,
                      "body: PerDay"),
    llm_provider_word("per day", LLM_PROVIDER_SPENT, 0, "body: per day"),
    llm_provider_word("per_day", LLM_PROVIDER_SPENT, 0, "body: per_day"),
    llm_provider_word("per-day", LLM_PROVIDER_SPENT, 0, "body: per-day"),
    llm_provider_word("daily", LLM_PROVIDER_SPENT, 0, "body: daily"),

    /* the account */
    llm_provider_word("insufficient_quota", LLM_PROVIDER_SPENT,
                      LLM_PROVIDER_STRONG|LLM_PROVIDER_ACCOUNT, "body: insufficient_quota"),
    llm_provider_word("credit balance", LLM_PROVIDER_SPENT,
                      LLM_PROVIDER_STRONG|LLM_PROVIDER_ACCOUNT, "body: credit balance"),
    llm_provider_word("billing_hard_limit", LLM_PROVIDER_SPENT,
                      LLM_PROVIDER_STRONG|LLM_PROVIDER_ACCOUNT, "body: billing_hard_limit"),
    llm_provider_word("billing_not_active", LLM_PROVIDER_SPENT,
                      LLM_PROVIDER_STRONG|LLM_PROVIDER_ACCOUNT, "body: billing_not_active"),
    llm_provider_word("usage limit", LLM_PROVIDER_SPENT,
                      LLM_PROVIDER_STRONG|LLM_PROVIDER_ACCOUNT, "body: usage limit"),

    /* a limit per minute, or load */
    llm_provider_word("perminute", LLM_PROVIDER_BUSY, 0, "body: PerMinute"),
    llm_provider_word("per minute", LLM_PROVIDER_BUSY, 0, "body: per minute"),
    llm_provider_word("per_minute", LLM_PROVIDER_BUSY, 0, "body: per_minute"),
    llm_provider_word("per-minute", LLM_PROVIDER_BUSY, 0, "body: per-minute"),
    llm_provider_word("rate_limit_exceeded", LLM_PROVIDER_BUSY, 0,
                      "body: rate_limit_exceeded"),
    llm_provider_word("rate_limit_error", LLM_PROVIDER_BUSY, 0,
                      "body: rate_limit_error"),
    llm_provider_word("rate limit", LLM_PROVIDER_BUSY, 0, "body: rate limit"),
    llm_provider_word("overloaded", LLM_PROVIDER_BUSY, LLM_PROVIDER_OVERLOAD,
                      "body: overloaded"),
    llm_provider_word("resource_exhausted", LLM_PROVIDER_BUSY, 0,
                      "body: RESOURCE_EXHAUSTED"),

    /* money and quotas, generally */
    llm_provider_word("exceeded your current quota", LLM_PROVIDER_SPENT,
                      LLM_PROVIDER_ACCOUNT,
                      "body: exceeded your current quota"),
    llm_provider_word("quota", LLM_PROVIDER_SPENT, 0, "body: quota"),
    llm_provider_word("billing", LLM_PROVIDER_SPENT, LLM_PROVIDER_ACCOUNT,
                      "body: billing"),
    llm_provider_word("credit", LLM_PROVIDER_SPENT, LLM_PROVIDER_ACCOUNT,
                      "body: credit"),

    /* speed, generally */
    llm_provider_word("too many requests", LLM_PROVIDER_BUSY, 0,
                      "body: too many requests"),

    /* the waits */
    llm_provider_word("\"retrydelay\"", LLM_PROVIDER_WAIT_DELAY,
                      LLM_PROVIDER_VALUE, "body: retryDelay"),
    llm_provider_word("retry after ", LLM_PROVIDER_WAIT_PHRASE,
                      LLM_PROVIDER_VALUE, "body: retry after"),
    llm_provider_word("retry in ", LLM_PROVIDER_WAIT_PHRASE,
                      LLM_PROVIDER_VALUE, "body: retry in"),
    llm_provider_word("try again in ", LLM_PROVIDER_WAIT_PHRASE,
                      LLM_PROVIDER_VALUE, "body: try again in"),
    llm_provider_word("regain access on ", LLM_PROVIDER_WAIT_REGAIN,
                      LLM_PROVIDER_VALUE, "body: regain access on")
};

#define LLM_PROVIDER_WORDS                                                    \
    (sizeof(llm_provider_words) / sizeof(llm_provider_words[0]))

/* the scan keeps the words in the bits of a uint32_t */
_Static_assert(LLM_PROVIDER_WORDS <= 32, "more body words than bits");


static const char  *llm_provider_names[LLM_PROVIDER_HEADERS] = {
    "retry-after-ms",
    "retry-after",
    "x-ratelimit-reset-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-tokens",
    "x-ratelimit-remaining-tokens",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-input-tokens-reset",
    "anthropic-ratelimit-input-tokens-remaining",
    "anthropic-ratelimit-output-tokens-reset",
    "anthropic-ratelimit-output-tokens-remaining"
};


static const char  *llm_provider_months[] = {
    "jan", "feb", "mar", "apr", "may", "jun",
    "jul", "aug", "sep", "oct", "nov", "dec"
};


static void llm_provider_scan(const llm_provider_str_t *body, int64_t now_ms,
    llm_provider_scan_t *sc);
static int64_t llm_provider_header_wait(const llm_provider_in_t *in,
    const char **from);
static int64_t llm_provider_reset_wait(const llm_provider_in_t *in,
    const char **from);
static int64_t llm_provider_go_duration(llm_provider_cur_t *c, int words);
static int64_t llm_provider_timestamp(llm_provider_cur_t *c, int words);
static int64_t llm_provider_http_date(llm_provider_cur_t *c, int64_t now_ms);
static int64_t llm_provider_wait_until(int64_t at_ms, int64_t now_ms);


static int
llm_provider_lower(int c)
{
    return (c >= 'A' && c <= 'Z') ? c | 0x20 : c;
}


static int
llm_provider_digit(int c)
{
    return c >= '0' && c <= '9';
}


static int
llm_provider_alpha(int c)
{
    c = llm_provider_lower(c);

    return c >= 'a' && c <= 'z';
}


static int
llm_provider_blank(int c)
{
    return c == ' ' || c == '\t';
}


static void
llm_provider_skip_blanks(llm_provider_cur_t *c)
{
    while (c->p < c->end && llm_provider_blank((unsigned char) *c->p)) {
        c->p++;
    }
}


static int
llm_provider_peek(llm_provider_cur_t *c)
{
    return c->p < c->end ? (unsigned char) *c->p : -1;
}


/* the next byte if it is ch, in any case */

static int
llm_provider_take(llm_provider_cur_t *c, int ch)
{
    if (c->p < c->end && llm_provider_lower((unsigned char) *c->p) == ch) {
        c->p++;
        return 1;
    }

    return 0;
}


/* a lowercase word, in any case */

static int
llm_provider_take_word(llm_provider_cur_t *c, const char *w)
{
    const char  *p;

    for (p = c->p; *w; w++, p++) {
        if (p == c->end || llm_provider_lower((unsigned char) *p) != *w) {
            return 0;
        }
    }

    c->p = p;

    return 1;
}


/* s, of len bytes, is the lowercase name, in any case */

static int
llm_provider_is(const char *name, const char *s, size_t len)
{
    size_t  i;

    for (i = 0; i < len; i++) {
        if (name[i] == '\0'
            || llm_provider_lower((unsigned char) s[i])
               != (unsigned char) name[i])
        {
            return 0;
        }
    }

    return name[len] == '\0';
}


/* between min and max digits, exactly; -1 otherwise */

static int64_t
llm_provider_digits(llm_provider_cur_t *c, int min, int max)
{
    int      n;
    int64_t  v;

    v = 0;

    for (n = 0; n < max && c->p < c->end && llm_provider_digit(*c->p); n++) {
        v = v * 10 + (*c->p++ - '0');
    }

    return n < min ? -1 : v;
}


/* any number of digits, saturating; -1 if none */

static int64_t
llm_provider_number(llm_provider_cur_t *c)
{
    int64_t  v;

    if (c->p == c->end || !llm_provider_digit(*c->p)) {
        return -1;
    }

    v = 0;

    while (c->p < c->end && llm_provider_digit(*c->p)) {
        v = v > LLM_PROVIDER_INT_CAP / 10 ? LLM_PROVIDER_INT_CAP
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
llm_provider_fraction(llm_provider_cur_t *c, int64_t *f, int *n)
{
    int  more;

    *f = 0;
    *n = 0;

    if (c->end - c->p < 2 || c->p[0] != '.' || !llm_provider_digit(c->p[1])) {
        return 0;
    }

    c->p++;
    more = 0;

    while (c->p < c->end && llm_provider_digit(*c->p)) {
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
llm_provider_clamp(int64_t ms)
{
    return ms > LLM_PROVIDER_WAIT_MAX ? LLM_PROVIDER_WAIT_MAX : ms;
}


/*
 * A number of units (of unit ns each; a power of ten, or 60 s, or 1 h)
 * with a fraction, in ns, rounded up, saturating at LLM_PROVIDER_NS_CAP.
 */

static int64_t
llm_provider_scale(int64_t i, int64_t f, int n, int more, int64_t unit)
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

    if (i > LLM_PROVIDER_NS_CAP / unit) {
        return LLM_PROVIDER_NS_CAP;
    }

    v = i * unit + f * p + more;

    return v > LLM_PROVIDER_NS_CAP ? LLM_PROVIDER_NS_CAP : v;
}


static int64_t
llm_provider_ns_to_ms(int64_t ns)
{
    return llm_provider_clamp((ns + 999999) / 1000000);
}


/* a decimal number of units, "7" or "1.5", as ms rounded up */

static int64_t
llm_provider_decimal(llm_provider_cur_t *c, int64_t unit_ns)
{
    int      n, more;
    int64_t  i, f;

    i = llm_provider_number(c);

    if (i < 0) {
        return -1;
    }

    more = llm_provider_fraction(c, &f, &n);

    return llm_provider_ns_to_ms(llm_provider_scale(i, f, n, more, unit_ns));
}


/* the whole of s but blanks */

static int
llm_provider_done(llm_provider_cur_t *c)
{
    llm_provider_skip_blanks(c);

    return c->p == c->end;
}


int
llm_provider_header(const char *name, size_t len)
{
    int          h;
    size_t       i;
    const char  *n;

    if (name == NULL) {
        return -1;
    }

    for (h = 0; h < LLM_PROVIDER_HEADERS; h++) {
        n = llm_provider_names[h];

        for (i = 0; i < len && n[i]; i++) {
            if (llm_provider_lower((unsigned char) name[i]) != n[i]) {
                break;
            }
        }

        if (i == len && n[i] == '\0') {
            return h;
        }
    }

    return -1;
}


void
llm_provider_read(const llm_provider_in_t *in, llm_provider_verdict_t *v)
{
    int                         st, overload;
    size_t                      k;
    int64_t                     wait, pt;
    llm_provider_scan_t         sc;
    const char                 *from;
    const llm_provider_word_t  *w;

    st = in->status;

    v->cls = LLM_PROVIDER_OK;
    v->retry_ms = -1;
    v->code = NULL;
    v->wait_from = NULL;

    if (st < 100 || st > 599) {
        v->cls = LLM_PROVIDER_FAILED;
        v->code = "provider_error";
        v->why = "status unreadable";
        return;
    }

    if (st < 400) {
        v->why = "not a refusal";
        return;
    }

    llm_provider_scan(&in->body, in->now_ms, &sc);

    from = NULL;
    wait = llm_provider_header_wait(in, &from);

    for (k = 0; wait < 0 && k < LLM_PROVIDER_WAIT_KINDS; k++) {
        if (sc.wait[k] >= 0) {
            wait = sc.wait[k];
            from = sc.wait_from[k];
        }
    }

    if (wait < 0 && st == 429) {
        wait = llm_provider_reset_wait(in, &from);
    }

    overload = 0;
    w = NULL;

    if (st == 429 || st == 503 || st == 529) {

        if (sc.word) {
            w = sc.word;
            v->cls = w->cls;
            v->why = w->why;
            overload = (w->flags & LLM_PROVIDER_OVERLOAD) != 0;

        } else if (st == 503) {
            v->cls = LLM_PROVIDER_BUSY;
            v->why = "status 503";

        } else if (st == 529) {
            v->cls = LLM_PROVIDER_BUSY;
            v->why = "status 529";

        } else if (wait > LLM_PROVIDER_SPENT_WAIT) {
            v->cls = LLM_PROVIDER_SPENT;
            v->why = "status 429, a wait over an hour";

        } else {
            v->cls = LLM_PROVIDER_BUSY;
            v->why = "status 429";
        }

        overload |= st != 429;

    } else if (st == 402) {
        v->cls = LLM_PROVIDER_SPENT;
        v->why = "status 402";

    } else if (st == 408) {
        v->cls = LLM_PROVIDER_FAILED;
        v->why = "status 408";

    } else if (st < 500) {

        if ((st == 400 || st == 403) && sc.strong) {
            w = sc.strong;
            v->cls = LLM_PROVIDER_SPENT;
            v->why = sc.strong->why;

        } else {
            v->why = "client error";
            return;
        }

    } else if (sc.overload) {
        v->cls = LLM_PROVIDER_BUSY;
        v->why = sc.overload->why;
        overload = 1;

    } else {
        v->cls = LLM_PROVIDER_FAILED;
        v->why = "server error";
    }

    switch (v->cls) {

    case LLM_PROVIDER_BUSY:
        v->code = overload ? "provider_overloaded" : "provider_rate_limited";
        break;

    case LLM_PROVIDER_SPENT:
        v->code = "insufficient_quota";

        if (w && (w->flags & LLM_PROVIDER_GEMINI_DAY)) {
            pt = llm_provider_next_midnight_pacific(in->now_ms);

            if (wait < pt) {
                wait = pt;
                from = "midnight Pacific";
            }

        } else if (wait < 0
                   && ((w && (w->flags & LLM_PROVIDER_ACCOUNT))
                       || in->status == 402))
        {
            wait = LLM_PROVIDER_ACCOUNT_WAIT;
            from = "account: 10 minutes";

        } else if (wait < 0) {
            wait = llm_provider_next_midnight(in->now_ms);
            from = "midnight UTC";
        }

        break;

    default:
        v->code = "provider_error";
        break;
    }

    if (wait >= 0) {
        v->retry_ms = llm_provider_clamp(wait);
        v->wait_from = from;
    }
}


/* retry-after-ms, then Retry-After */

static int64_t
llm_provider_header_wait(const llm_provider_in_t *in, const char **from)
{
    int64_t                    ms;
    llm_provider_cur_t         c;
    const llm_provider_str_t  *h;

    h = &in->header[LLM_PROVIDER_RETRY_AFTER_MS];

    if (h->data) {
        c.p = h->data;
        c.end = h->data + h->len;

        llm_provider_skip_blanks(&c);
        ms = llm_provider_decimal(&c, 1000000);

        if (ms >= 0 && llm_provider_done(&c)) {
            *from = "retry-after-ms";
            return ms;
        }
    }

    h = &in->header[LLM_PROVIDER_RETRY_AFTER];

    if (h->data) {
        ms = llm_provider_retry_after(h->data, h->len, in->now_ms);

        if (ms >= 0) {
            *from = "retry-after";
            return ms;
        }
    }

    return -1;
}


/*
 * The latest reset of the limits at 0 remaining, or else of all: the
 * refusal was for a limit that is out, and it is back when that resets.
 */

static int64_t
llm_provider_reset_wait(const llm_provider_in_t *in, const char **from)
{
    int                        h;
    int64_t                    r, n, any, out;
    llm_provider_cur_t         c;
    const char                *any_from, *out_from;
    const llm_provider_str_t  *reset, *left;

    any = -1;
    out = -1;
    any_from = NULL;
    out_from = NULL;

    for (h = LLM_PROVIDER_RESET_REQUESTS; h < LLM_PROVIDER_HEADERS; h += 2) {
        reset = &in->header[h];
        left = &in->header[h + 1];

        if (reset->data == NULL) {
            continue;
        }

        r = llm_provider_reset(reset->data, reset->len, in->now_ms);

        if (r < 0) {
            continue;
        }

        if (r > any) {
            any = r;
            any_from = llm_provider_names[h];
        }

        if (left->data == NULL) {
            continue;
        }

        c.p = left->data;
        c.end = left->data + left->len;

        llm_provider_skip_blanks(&c);
        n = llm_provider_number(&c);

        if (n == 0 && llm_provider_done(&c) && r > out) {
            out = r;
            out_from = llm_provider_names[h];
        }
    }

    if (out >= 0) {
        *from = out_from;
        return out;
    }

    if (any >= 0) {
        *from = any_from;
    }

    return any;
}


int64_t
llm_provider_retry_after(const char *s, size_t len, int64_t now_ms)
{
    int64_t             ms;
    llm_provider_cur_t  c;

    if (s == NULL) {
        return -1;
    }

    c.p = s;
    c.end = s + len;

    llm_provider_skip_blanks(&c);

    if (llm_provider_digit(llm_provider_peek(&c))) {
        ms = llm_provider_decimal(&c, 1000000000);
        return llm_provider_done(&c) ? ms : -1;
    }

    ms = llm_provider_http_date(&c, now_ms);

    return (ms >= 0 && llm_provider_done(&c)) ? ms : -1;
}


int64_t
llm_provider_duration(const char *s, size_t len)
{
    int64_t             ms;
    llm_provider_cur_t  c;

    if (s == NULL) {
        return -1;
    }

    c.p = s;
    c.end = s + len;

    llm_provider_skip_blanks(&c);
    ms = llm_provider_go_duration(&c, 0);

    return (ms >= 0 && llm_provider_done(&c)) ? ms : -1;
}


int64_t
llm_provider_reset(const char *s, size_t len, int64_t now_ms)
{
    int64_t             at;
    llm_provider_cur_t  c;

    if (s == NULL) {
        return -1;
    }

    at = llm_provider_duration(s, len);

    if (at >= 0) {
        return at;
    }

    c.p = s;
    c.end = s + len;

    llm_provider_skip_blanks(&c);
    at = llm_provider_timestamp(&c, 0);

    if (at == INT64_MIN || !llm_provider_done(&c)) {
        return -1;
    }

    return llm_provider_wait_until(at, now_ms);
}


/* the units of a duration; with words, the body's spellings too */

static const struct {
    const char  *name;
    int64_t      ns;
    int          words;
} llm_provider_units[] = {
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

#define LLM_PROVIDER_UNITS                                                    \
    (sizeof(llm_provider_units) / sizeof(llm_provider_units[0]))


/*
 * A duration: parts of a number and a unit, "2h3m4.5s", in ms rounded up,
 * or -1.  Strict (words 0): Go's, a unit to every part but a lone "0".
 * With words, as people write in the body: blanks between a number and
 * its unit and between parts, the units' long names, and a lone number
 * taken as seconds.  c is left after what was read.
 */

static int64_t
llm_provider_go_duration(llm_provider_cur_t *c, int words)
{
    int                 n, more, parts;
    size_t              k, len;
    int64_t             i, f, ns, part;
    llm_provider_cur_t  r, u;
    const char         *start;

    ns = 0;
    parts = 0;

    for ( ;; ) {
        r = *c;

        if (words && parts) {
            llm_provider_skip_blanks(&r);
        }

        i = llm_provider_number(&r);
        more = llm_provider_fraction(&r, &f, &n);

        if (i < 0 && n == 0) {
            break;
        }

        if (i < 0) {
            /* ".5s": Go takes it */
            i = 0;
        }

        u = r;

        if (words) {
            llm_provider_skip_blanks(&u);
        }

        /* the unit: letters, or Go's micro signs */
        start = u.p;

        while (u.p < u.end
               && (llm_provider_alpha((unsigned char) *u.p)
                   || (unsigned char) *u.p >= 0x80))
        {
            u.p++;
        }

        len = (size_t) (u.p - start);
        part = -1;

        for (k = 0; k < LLM_PROVIDER_UNITS; k++) {
            if (llm_provider_units[k].words > words
                || !llm_provider_is(llm_provider_units[k].name, start, len))
            {
                continue;
            }

            part = llm_provider_scale(i, f, n, more, llm_provider_units[k].ns);
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
                part = llm_provider_scale(i, f, n, more, 1000000000);
                return llm_provider_ns_to_ms(part);
            }

            if (i == 0 && n == 0 && r.p - c->p == 1 && !words) {
                /* Go's "0" */
                *c = r;
                return 0;
            }

            return -1;
        }

        *c = u;
        ns = ns > LLM_PROVIDER_NS_CAP - part ? LLM_PROVIDER_NS_CAP : ns + part;
        parts++;
    }

    return parts ? llm_provider_ns_to_ms(ns) : -1;
}


static int
llm_provider_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}


static int
llm_provider_month_days(int64_t y, int64_t m)
{
    static const int  days[] = {
        31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31
    };

    return (m == 2 && llm_provider_leap(y)) ? 29 : days[m - 1];
}


/* days since 1970-01-01 of a date of the proleptic Gregorian calendar */

static int64_t
llm_provider_days(int64_t y, int64_t m, int64_t d)
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
llm_provider_year(int64_t z)
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
llm_provider_floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}


/* at, ms since the epoch, as a wait from now: 0 if past */

static int64_t
llm_provider_wait_until(int64_t at_ms, int64_t now_ms)
{
    if (at_ms <= now_ms) {
        return 0;
    }

    /* at_ms is within the years 1 to 9999: no overflow */
    if (at_ms - LLM_PROVIDER_WAIT_MAX > now_ms) {
        return LLM_PROVIDER_WAIT_MAX;
    }

    return at_ms - now_ms;
}


/* ms since the epoch of a valid date and time, or INT64_MIN */

static int64_t
llm_provider_epoch_ms(int64_t y, int64_t mo, int64_t d, int64_t h, int64_t mi,
    int64_t s)
{
    if (y < 1 || y > 9999 || mo < 1 || mo > 12 || d < 1
        || d > llm_provider_month_days(y, mo) || h < 0 || h > 23 || mi < 0
        || mi > 59 || s < 0 || s > 60)
    {
        return INT64_MIN;
    }

    return llm_provider_days(y, mo, d) * LLM_PROVIDER_DAY_MS
           + h * LLM_PROVIDER_HOUR_MS + mi * 60000
           + s * 1000;
}


/* at least one blank */

static int
llm_provider_space(llm_provider_cur_t *c)
{
    if (!llm_provider_blank(llm_provider_peek(c))) {
        return 0;
    }

    llm_provider_skip_blanks(c);

    return 1;
}


static int64_t
llm_provider_month(llm_provider_cur_t *c)
{
    int64_t  m;

    for (m = 0; m < 12; m++) {
        if (llm_provider_take_word(c, llm_provider_months[m])) {
            return m + 1;
        }
    }

    return -1;
}


/* "08:49:37" */

static int
llm_provider_time(llm_provider_cur_t *c, int64_t *h, int64_t *mi, int64_t *s)
{
    *h = llm_provider_digits(c, 2, 2);

    if (*h < 0 || !llm_provider_take(c, ':')) {
        return 0;
    }

    *mi = llm_provider_digits(c, 2, 2);

    if (*mi < 0 || !llm_provider_take(c, ':')) {
        return 0;
    }

    *s = llm_provider_digits(c, 2, 2);

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
llm_provider_http_date(llm_provider_cur_t *c, int64_t now_ms)
{
    int64_t  y, mo, d, h, mi, s, now_y, at;

    if (!llm_provider_alpha(llm_provider_peek(c))) {
        return -1;
    }

    while (llm_provider_alpha(llm_provider_peek(c))) {
        c->p++;
    }

    if (llm_provider_take(c, ',')) {
        if (!llm_provider_space(c)) {
            return -1;
        }

        d = llm_provider_digits(c, 1, 2);

        if (d < 0) {
            return -1;
        }

        if (llm_provider_space(c)) {
            /* IMF-fixdate */
            mo = llm_provider_month(c);

            if (mo < 0 || !llm_provider_space(c)) {
                return -1;
            }

            y = llm_provider_digits(c, 4, 4);

        } else if (llm_provider_take(c, '-')) {
            /* RFC 850 */
            mo = llm_provider_month(c);

            if (mo < 0 || !llm_provider_take(c, '-')) {
                return -1;
            }

            y = llm_provider_digits(c, 2, 4);

            if (y >= 0 && y < 100) {
                if (now_ms < -LLM_PROVIDER_CLOCK_MAX
                    || now_ms > LLM_PROVIDER_CLOCK_MAX)
                {
                    return -1;
                }

                now_y = llm_provider_year(
                            llm_provider_floor_div(now_ms,
                                                   LLM_PROVIDER_DAY_MS));
                y += now_y - now_y % 100;

                if (y > now_y + 50) {
                    y -= 100;
                }
            }

        } else {
            return -1;
        }

        if (y < 0 || !llm_provider_space(c)
            || !llm_provider_time(c, &h, &mi, &s)
            || !llm_provider_space(c)
            || !(llm_provider_take_word(c, "gmt")
                 || llm_provider_take_word(c, "utc")))
        {
            return -1;
        }

    } else {
        /* asctime */
        if (!llm_provider_space(c)) {
            return -1;
        }

        mo = llm_provider_month(c);

        if (mo < 0 || !llm_provider_space(c)) {
            return -1;
        }

        d = llm_provider_digits(c, 1, 2);

        if (d < 0 || !llm_provider_space(c)
            || !llm_provider_time(c, &h, &mi, &s)
            || !llm_provider_space(c))
        {
            return -1;
        }

        y = llm_provider_digits(c, 4, 4);
    }

    at = llm_provider_epoch_ms(y, mo, d, h, mi, s);

    return at == INT64_MIN ? -1 : llm_provider_wait_until(at, now_ms);
}


/*
 * A time as ms since the epoch, or INT64_MIN.  RFC 3339 (words 0):
 * "2024-08-27T12:34:56.123Z", "2024-08-27 12:34:56+09:00", and leniently
 * without a zone (UTC) or a time (midnight); the body's (words 1):
 * "2025-08-01 at 00:00 UTC", the time required.  Any case; a fraction
 * rounded up.  c is left after what was read.
 */

static int64_t
llm_provider_timestamp(llm_provider_cur_t *c, int words)
{
    int                 n, more;
    int64_t             y, mo, d, h, mi, s, f, off, at, sign;
    llm_provider_cur_t  r;

    y = llm_provider_digits(c, 4, 4);

    if (y < 0 || !llm_provider_take(c, '-')) {
        return INT64_MIN;
    }

    mo = llm_provider_digits(c, 2, 2);

    if (mo < 0 || !llm_provider_take(c, '-')) {
        return INT64_MIN;
    }

    d = llm_provider_digits(c, 2, 2);

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

    if (words ? (llm_provider_space(&r) && llm_provider_take_word(&r, "at")
                 && llm_provider_space(&r))
              : (llm_provider_take(&r, 't') || llm_provider_take(&r, ' ')))
    {
        h = llm_provider_digits(&r, 2, 2);

        if (h < 0 || !llm_provider_take(&r, ':')) {
            return INT64_MIN;
        }

        mi = llm_provider_digits(&r, 2, 2);

        if (mi < 0) {
            return INT64_MIN;
        }

        if (llm_provider_take(&r, ':')) {
            s = llm_provider_digits(&r, 2, 2);

            if (s < 0) {
                return INT64_MIN;
            }

            more = llm_provider_fraction(&r, &f, &n);
        }

        *c = r;

        if (words) {
            llm_provider_skip_blanks(&r);
        }

        if (llm_provider_take(&r, 'z')) {
            *c = r;

        } else if (llm_provider_take_word(&r, "utc")
                   || llm_provider_take_word(&r, "gmt"))
        {
            *c = r;

        } else if (llm_provider_peek(&r) == '+'
                   || llm_provider_peek(&r) == '-')
        {
            sign = llm_provider_peek(&r) == '-' ? -1 : 1;
            r.p++;

            off = llm_provider_digits(&r, 2, 2);

            if (off < 0 || off > 23) {
                return INT64_MIN;
            }

            off *= 60;
            (void) llm_provider_take(&r, ':');

            at = llm_provider_digits(&r, 2, 2);

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

    at = llm_provider_epoch_ms(y, mo, d, h, mi, s);

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
llm_provider_next_midnight(int64_t now_ms)
{
    int64_t  r;

    r = now_ms % LLM_PROVIDER_DAY_MS;

    if (r < 0) {
        r += LLM_PROVIDER_DAY_MS;
    }

    return LLM_PROVIDER_DAY_MS - r;
}


/* UTC's offset of US Pacific time at t: PDT from the second Sunday of
 * March, 10:00 UTC, to the first Sunday of November, 09:00 UTC */

static int64_t
llm_provider_pacific_offset(int64_t t)
{
    int64_t  y, mar, nov, start, end;

    y = llm_provider_year(llm_provider_floor_div(t, LLM_PROVIDER_DAY_MS));

    /* 1970-01-01 was a Thursday: the first Sunday on or after day z */
    mar = llm_provider_days(y, 3, 1);
    mar += (7 - ((mar % 7 + 7 + 4) % 7)) % 7 + 7;

    nov = llm_provider_days(y, 11, 1);
    nov += (7 - ((nov % 7 + 7 + 4) % 7)) % 7;

    start = mar * LLM_PROVIDER_DAY_MS + 10 * LLM_PROVIDER_HOUR_MS;
    end = nov * LLM_PROVIDER_DAY_MS + 9 * LLM_PROVIDER_HOUR_MS;

    return (t >= start && t < end) ? -7 * LLM_PROVIDER_HOUR_MS
                                   : -8 * LLM_PROVIDER_HOUR_MS;
}


int64_t
llm_provider_next_midnight_pacific(int64_t now_ms)
{
    int64_t  off, local, at;

    if (now_ms < -LLM_PROVIDER_CLOCK_MAX || now_ms > LLM_PROVIDER_CLOCK_MAX) {
        return llm_provider_next_midnight(now_ms);
    }

    off = llm_provider_pacific_offset(now_ms);
    local = now_ms + off;
    local = (llm_provider_floor_div(local, LLM_PROVIDER_DAY_MS) + 1)
            * LLM_PROVIDER_DAY_MS;

    /*
     * The clocks change at 2 AM, never at midnight: the offset at that
     * midnight is the one of the day it starts.
     */
    at = local - off;
    off = llm_provider_pacific_offset(at);
    at = local - off;

    return at - now_ms;
}


/*
 * The body, read through a chunked transfer's framing when it starts
 * with a chunk size line ("1a2\r\n", "1a2;ext\r\n"): no JSON body does.
 * Framing that goes wrong later is read as it is, from there on.
 */

static int
llm_provider_hex(int c)
{
    c = llm_provider_lower(c);

    if (llm_provider_digit(c)) {
        return c - '0';
    }

    return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}


static void
llm_provider_body_init(llm_provider_body_t *b, const llm_provider_str_t *body)
{
    size_t       len;
    const char  *p;

    len = body->len < LLM_PROVIDER_BODY_MAX ? body->len
                                             : LLM_PROVIDER_BODY_MAX;
    b->p = body->data;
    b->end = body->data + len;
    b->state = LLM_PROVIDER_BODY_RAW;
    b->left = 0;

    for (p = b->p;
         p < b->end && p - b->p < 16 && llm_provider_hex(*p) >= 0;
         p++)
    {
        /* void */
    }

    if (p == b->p) {
        return;
    }

    while (p < b->end && llm_provider_blank(*p)) {
        p++;
    }

    if (p < b->end && (*p == ';' || *p == '\r' || *p == '\n')) {
        b->state = LLM_PROVIDER_BODY_SIZE;
    }
}


static int
llm_provider_body_next(llm_provider_body_t *b)
{
    int  c, x;

    while (b->p < b->end) {
        c = (unsigned char) *b->p++;

        switch (b->state) {

        case LLM_PROVIDER_BODY_RAW:
            return c;

        case LLM_PROVIDER_BODY_SIZE:
            x = llm_provider_hex(c);

            if (x >= 0) {
                b->left = b->left > (1ULL << 56) ? b->left
                                                 : b->left * 16 + x;
                break;
            }

            if (c == ';' || llm_provider_blank(c)) {
                b->state = LLM_PROVIDER_BODY_EXT;
                break;
            }

            if (c == '\r') {
                b->state = LLM_PROVIDER_BODY_SIZE_LF;
                break;
            }

            if (c == '\n') {
                b->state = b->left ? LLM_PROVIDER_BODY_DATA
                                   : LLM_PROVIDER_BODY_DONE;
                break;
            }

            b->state = LLM_PROVIDER_BODY_RAW;
            return c;

        case LLM_PROVIDER_BODY_EXT:
            if (c == '\n') {
                b->state = b->left ? LLM_PROVIDER_BODY_DATA
                                   : LLM_PROVIDER_BODY_DONE;
            }

            break;

        case LLM_PROVIDER_BODY_SIZE_LF:
            if (c == '\n') {
                b->state = b->left ? LLM_PROVIDER_BODY_DATA
                                   : LLM_PROVIDER_BODY_DONE;
                break;
            }

            b->state = LLM_PROVIDER_BODY_RAW;
            return c;

        case LLM_PROVIDER_BODY_DATA:
            if (--b->left == 0) {
                b->state = LLM_PROVIDER_BODY_DATA_CR;
            }

            return c;

        case LLM_PROVIDER_BODY_DATA_CR:
            if (c == '\r') {
                b->state = LLM_PROVIDER_BODY_DATA_LF;
                break;
            }

            if (c == '\n') {
                b->state = LLM_PROVIDER_BODY_SIZE;
                break;
            }

            b->state = LLM_PROVIDER_BODY_RAW;
            return c;

        case LLM_PROVIDER_BODY_DATA_LF:
            if (c == '\n') {
                b->state = LLM_PROVIDER_BODY_SIZE;
                break;
            }

            b->state = LLM_PROVIDER_BODY_RAW;
            return c;

        default: /* LLM_PROVIDER_BODY_DONE */
            return -1;
        }
    }

    return -1;
}


/*
 * A wait captured after its word: believed only when something follows
 * it, in the capture or after it (followed), so that a value cut by the
 * end of what was read ("1m3", "7 ", "1.") is not taken for a shorter
 * one.
 */

static void
llm_provider_capture(llm_provider_scan_t *sc, size_t kind, const char *s,
    size_t len,
    int followed, int64_t now_ms)
{
    int64_t             ms;
    llm_provider_cur_t  c;

    c.p = s;
    c.end = s + len;

    switch (kind) {

    case LLM_PROVIDER_WAIT_DELAY:
        ms = llm_provider_go_duration(&c, 0);
        break;

    case LLM_PROVIDER_WAIT_PHRASE:
        ms = llm_provider_go_duration(&c, 1);
        break;

    default: /* LLM_PROVIDER_WAIT_REGAIN */
        ms = llm_provider_timestamp(&c, 1);
        ms = ms == INT64_MIN ? -1 : llm_provider_wait_until(ms, now_ms);
        break;
    }

    /* blanks and a full stop may be where the value was cut */
    while (c.p < c.end && (*c.p == ' ' || *c.p == '.')) {
        c.p++;
    }

    if (ms >= 0 && (followed || c.p < c.end)) {
        sc->wait[kind] = ms;
    }
}


/*
 * One pass over the body: every word is looked for at once, each by its
 * own Knuth-Morris-Pratt automaton, so that the chunk framing costs
 * nothing and no byte is looked at twice.  A byte steps only the words
 * it may begin and those partly matched, a few at most.
 */

static void
llm_provider_scan(const llm_provider_str_t *body, int64_t now_ms,
    llm_provider_scan_t *sc)
{
    int                         ch, capturing, found;
    size_t                      i, k, q, n, kind;
    uint32_t                    first[256], live, step;
    char                        cap[LLM_PROVIDER_CAPTURE_MAX];
    llm_provider_kmp_t          kmp[LLM_PROVIDER_WORDS];
    llm_provider_body_t         b;
    const llm_provider_word_t  *w;

    sc->word = NULL;
    sc->strong = NULL;
    sc->overload = NULL;

    for (k = 0; k < LLM_PROVIDER_WAIT_KINDS; k++) {
        sc->wait[k] = -1;
        sc->wait_from[k] = NULL;
    }

    if (body->data == NULL || body->len == 0) {
        return;
    }

    for (i = 0; i < 256; i++) {
        first[i] = 0;
    }

    for (i = 0; i < LLM_PROVIDER_WORDS; i++) {
        w = &llm_provider_words[i];

        first[(unsigned char) w->text[0]] |= 1u << i;
        kmp[i].fail[0] = 0;
        kmp[i].at = 0;

        for (k = 0, q = 1; q < w->len; q++) {
            while (k > 0 && w->text[q] != w->text[k]) {
                k = kmp[i].fail[k - 1];
            }

            if (w->text[q] == w->text[k]) {
                k++;
            }

            kmp[i].fail[q] = (uint8_t) k;
        }
    }

    llm_provider_body_init(&b, body);

    capturing = 0;
    kind = 0;
    n = 0;
    live = 0;

    while ((ch = llm_provider_body_next(&b)) >= 0) {
        ch = llm_provider_lower(ch);

        if (capturing) {
            if (n == 0 && (llm_provider_blank(ch) || ch == '\r' || ch == '\n'
                           || ch == ':' || ch == '"'))
            {
                /* what comes between the word and its value */

            } else if (n < LLM_PROVIDER_CAPTURE_MAX
                       && (llm_provider_alpha(ch) || llm_provider_digit(ch)
                           || ch == '.' || ch == ':' || ch == '-'
                           || ch == ' '))
            {
                cap[n++] = (char) ch;

            } else {
                llm_provider_capture(sc, kind, cap, n,
                                     n < LLM_PROVIDER_CAPTURE_MAX, now_ms);
                capturing = 0;
            }
        }

        for (step = live | first[ch]; step; step &= step - 1) {
            i = (size_t) __builtin_ctz(step);
            w = &llm_provider_words[i];
            k = kmp[i].at;

            while (k > 0 && w->text[k] != ch) {
                k = kmp[i].fail[k - 1];
            }

            if (w->text[k] == ch) {
                k++;
            }

            found = k == w->len;

            if (found) {
                k = kmp[i].fail[k - 1];
            }

            kmp[i].at = (uint8_t) k;

            if (k) {
                live |= 1u << i;

            } else {
                live &= ~(1u << i);
            }

            if (!found) {
                continue;
            }

            if (w->flags & LLM_PROVIDER_VALUE) {
                if (!capturing && sc->wait[w->cls] < 0) {
                    capturing = 1;
                    kind = w->cls;
                    sc->wait_from[kind] = w->why;
                    n = 0;
                }

                continue;
            }

            if (sc->word == NULL || w < sc->word) {
                sc->word = w;
            }

            if ((w->flags & LLM_PROVIDER_STRONG)
                && (sc->strong == NULL || w < sc->strong))
            {
                sc->strong = w;
            }

            if (w->flags & LLM_PROVIDER_OVERLOAD) {
                sc->overload = w;
            }
        }
    }

    if (capturing) {
        llm_provider_capture(sc, kind, cap, n, 0, now_ms);
    }
}
