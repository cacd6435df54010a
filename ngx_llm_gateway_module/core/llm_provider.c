
/*
 * Reading a provider's refusal: busy, spent or failed, and for how long;
 * see llm_provider.h.
 */


#include "llm_provider.h"
#include "llm_time.h"


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
 * back when someone pays, not at a reset: looked at again this often.
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


static void llm_provider_scan(const llm_provider_str_t *body, int64_t now_ms,
    llm_provider_scan_t *sc);
static int64_t llm_provider_header_wait(const llm_provider_in_t *in,
    const char **from);
static int64_t llm_provider_reset_wait(const llm_provider_in_t *in,
    const char **from);
static int llm_provider_zero(const char *s, size_t len);


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


static int64_t
llm_provider_clamp(int64_t ms)
{
    return ms > LLM_PROVIDER_WAIT_MAX ? LLM_PROVIDER_WAIT_MAX : ms;
}


/* a remaining count of 0: digits, all of them 0, blanks around */

static int
llm_provider_zero(const char *s, size_t len)
{
    size_t  i;

    for (i = 0; i < len && llm_provider_blank((unsigned char) s[i]); i++) {
        /* void */
    }

    if (i == len || s[i] != '0') {
        return 0;
    }

    while (i < len && s[i] == '0') {
        i++;
    }

    while (i < len && llm_provider_blank((unsigned char) s[i])) {
        i++;
    }

    return i == len;
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
            pt = llm_time_next_midnight_pacific(in->now_ms);

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
            wait = llm_time_next_midnight(in->now_ms);
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
    const llm_provider_str_t  *h;

    h = &in->header[LLM_PROVIDER_RETRY_AFTER_MS];

    if (h->data) {
        ms = llm_time_ms(h->data, h->len);

        if (ms >= 0) {
            *from = "retry-after-ms";
            return ms;
        }
    }

    h = &in->header[LLM_PROVIDER_RETRY_AFTER];

    if (h->data) {
        ms = llm_time_retry_after(h->data, h->len, in->now_ms);

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
    int64_t                    r, any, out;
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

        r = llm_time_reset(reset->data, reset->len, in->now_ms);

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

        if (llm_provider_zero(left->data, left->len) && r > out) {
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
    int64_t         ms;
    llm_time_cur_t  c;

    c.p = s;
    c.end = s + len;

    switch (kind) {

    case LLM_PROVIDER_WAIT_DELAY:
        ms = llm_time_parse_duration(&c, 0);
        break;

    case LLM_PROVIDER_WAIT_PHRASE:
        ms = llm_time_parse_duration(&c, 1);
        break;

    default: /* LLM_PROVIDER_WAIT_REGAIN */
        ms = llm_time_parse_timestamp(&c, 1);
        ms = ms == INT64_MIN ? -1 : llm_time_wait_until(ms, now_ms);
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
