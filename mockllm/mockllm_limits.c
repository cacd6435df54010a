
/*
 * The limits of a real provider key, for the gateway's outbound pacer to
 * be tested against: requests a minute (-r), tokens a minute (-T) and a
 * token quota a period (-D, -P).  One mockllm is one key: the state is
 * shared by the threads, under one lock, and exists only when a limit is
 * on; without one, nothing here is ever called but the cheap checks of
 * mockllm_limits_on and c->lim.arrived.
 *
 * The minute slides: a request admitted at a counts in every window
 * (t - 60 s, t] with a <= t < a + 60 s.  Its entry holds its charge, the
 * prompt and the most it may answer (what OpenAI counts); when its
 * response is over the entry is corrected to the prompt and the tokens
 * actually sent, and keeps its arrival time.  The entries are a ring,
 * oldest first, of RPM entries, which admission never overfills; without
 * -r it grows up to MOCKLLM_WINDOW_MAX and then forgets its oldest entry
 * early.  Requests are numbered in the order they were admitted, so that
 * the end of one finds its entry, if it is still there, by its number.
 *
 * Quota periods are aligned to the start: period k is [k P, (k + 1) P)
 * since mockllm started.  The period's use is charged and corrected as
 * the window's is.
 */


#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "mockllm.h"
#include "mockllm_buf.h"
#include "mockllm_limits.h"
#include "mockllm_log.h"
#include "mockllm_timer.h"


#define MOCKLLM_WINDOW_MS    60000
#define MOCKLLM_WINDOW_INIT  1024
#define MOCKLLM_WINDOW_MAX   (1024 * 1024)


typedef struct {
    uint64_t             at;             /* ms since the start */
    int64_t              tokens;
} mockllm_limits_entry_t;


typedef struct {
    uint64_t             requests;
    uint64_t             admitted;
    uint64_t             refused_inflight;
    uint64_t             max_inflight;
    uint64_t             refused_rpm;
    uint64_t             refused_tpm;
    uint64_t             refused_quota;
    uint64_t             max_rpm_window;
    uint64_t             max_short_window;
    int64_t              max_tpm_window;
    uint64_t             first_ms;
    uint64_t             last_ms;
    int64_t              period_used;
} mockllm_limits_stats_t;


typedef struct {
    pthread_mutex_t      lock;

    int64_t              inflight_max;   /* -c: 0, no limit */
    int64_t              inflight;       /* requests admitted, not over */
    int64_t              rpm;            /* 0: no limit */
    uint64_t             short_ms;       /* -s: 0, or RPM also per this */
    int64_t              short_max;      /* ... at most this many */
    int64_t              tpm;
    int64_t              quota;
    uint64_t             period;         /* ms */
    uint64_t             start;          /* the monotonic clock, ms */

    mockllm_limits_entry_t  *ring;
    size_t               cap;
    size_t               head;           /* the oldest entry */
    size_t               n;
    uint64_t             head_seq;       /* its number */
    int64_t              tokens;         /* of the entries */

    int64_t              used;           /* of the quota, in ... */
    int64_t              used_period;    /* ... this period */
    uint64_t             epoch;

    mockllm_limits_stats_t  stats;

    unsigned             grow:1;         /* no -r: the ring grows */
    unsigned             full_logged:1;
} mockllm_limits_t;


static void mockllm_limits_expire(uint64_t now);
static size_t mockllm_limits_recent(uint64_t now, size_t *first);
static void mockllm_limits_push(uint64_t now, int64_t charge);
static void mockllm_limits_drop(void);
static uint64_t mockllm_limits_tpm_wait(int64_t charge, uint64_t now);
static void mockllm_limits_remaining(mockllm_limit_t *l, uint64_t now);
static void mockllm_limits_openai(mockllm_buf_t *b, const char *what,
    int64_t limit, int64_t remaining, uint64_t reset);
static void mockllm_limits_anthropic(mockllm_buf_t *b, const char *what,
    int64_t limit, int64_t remaining, uint64_t reset);


int                      mockllm_limits_on;
int64_t                (*mockllm_limits_spent)(mockllm_conn_t *c);

static mockllm_limits_t  mockllm_lim = {
    .lock = PTHREAD_MUTEX_INITIALIZER
};


/* called once, before the threads start; each value 0 when not given */

int
mockllm_limits_init(int64_t rpm, int64_t tpm, int64_t quota, int64_t period,
    int64_t short_ms, int64_t inflight)
{
    mockllm_limits_t  *l;

    if (rpm == 0 && tpm == 0 && quota == 0 && inflight == 0) {
        return MOCKLLM_OK;
    }

    l = &mockllm_lim;

    l->inflight_max = inflight;
    l->rpm = rpm;

    /* as providers quantize: 1,200 a minute is 20 in any second */
    if (rpm && short_ms) {
        l->short_ms = (uint64_t) short_ms;
        l->short_max = (rpm * short_ms + 59999) / 60000;
    }

    l->tpm = tpm;
    l->quota = quota;
    l->period = (uint64_t) period * 1000;
    l->start = mockllm_timer_now();

    l->grow = (rpm == 0);
    l->cap = rpm ? (size_t) rpm : MOCKLLM_WINDOW_INIT;

    l->ring = malloc(l->cap * sizeof(mockllm_limits_entry_t));
    if (l->ring == NULL) {
        mockllm_log("malloc() failed");
        return MOCKLLM_ERROR;
    }

    mockllm_limits_on = 1;

    return MOCKLLM_OK;
}


/*
 * POST /limits/inflight/N: the ceiling of -c from now on (0: none), as a
 * provider that adds or loses servers; there with any limit on.
 */

void
mockllm_limits_set_inflight(int64_t n)
{
    mockllm_limits_t  *l;

    l = &mockllm_lim;

    pthread_mutex_lock(&l->lock);
    l->inflight_max = n;
    pthread_mutex_unlock(&l->lock);
}


/* an LLM request: it gets x-mock-arrival-ms, whatever its answer */

void
mockllm_limits_arrive(mockllm_conn_t *c)
{
    c->lim.arrival = mockllm_timer_now() - mockllm_lim.start;
    c->lim.arrived = 1;
}


/*
 * The request, valid and costing charge tokens at most, meets the limits:
 * RPM, then TPM, then the quota.  A refused request leaves no trace but
 * the counters.  The clock is read under the lock, so that arrivals are
 * in order across the threads.
 */

int
mockllm_limits_admit(mockllm_conn_t *c, int64_t charge)
{
    int                      reason;
    size_t                   first, recent;
    int64_t                  k;
    uint64_t                 now;
    mockllm_limit_t         *q;
    mockllm_limits_t        *l;
    mockllm_limits_stats_t  *s;

    l = &mockllm_lim;
    s = &l->stats;
    q = &c->lim;

    reason = MOCKLLM_LIMIT_OK;
    k = 0;

    pthread_mutex_lock(&l->lock);

    now = mockllm_timer_now() - l->start;

    mockllm_limits_expire(now);

    q->arrival = now;
    q->epoch = l->epoch;
    q->checked = 1;

    s->requests++;

    if (l->quota) {
        k = (int64_t) (now / l->period);

        if (k != l->used_period) {
            l->used = 0;
            l->used_period = k;
        }
    }

    if (l->inflight_max && l->inflight >= l->inflight_max) {
        /* overloaded: a server that cannot take more, not a rate */
        reason = MOCKLLM_LIMIT_INFLIGHT;
        s->refused_inflight++;

        q->limit = l->inflight_max;
        q->used = l->inflight;
        q->retry = 1000;

    } else if (l->rpm && (int64_t) l->n >= l->rpm) {
        reason = MOCKLLM_LIMIT_RPM;
        s->refused_rpm++;

        q->limit = l->rpm;
        q->used = (int64_t) l->n;
        q->requested = 1;
        q->retry = l->ring[l->head].at + MOCKLLM_WINDOW_MS - now;

    } else if (l->short_ms
               && (int64_t) mockllm_limits_recent(now, &first)
                  >= l->short_max)
    {
        reason = MOCKLLM_LIMIT_RPM;
        s->refused_rpm++;

        q->limit = l->rpm;
        q->used = (int64_t) l->n;
        q->requested = 1;
        q->retry = l->ring[first].at + l->short_ms - now;

    } else if (l->tpm && l->tokens + charge > l->tpm) {
        reason = MOCKLLM_LIMIT_TPM;
        s->refused_tpm++;

        q->limit = l->tpm;
        q->used = l->tokens;
        q->requested = charge;

        if (charge > l->tpm) {
            /* no wait would ever let it in */
            q->too_large = 1;

        } else {
            q->retry = mockllm_limits_tpm_wait(charge, now);
        }

    } else if (l->quota && l->used + charge > l->quota) {
        reason = MOCKLLM_LIMIT_QUOTA;
        s->refused_quota++;

        q->limit = l->quota;
        q->used = l->used;
        q->requested = charge;
        q->retry = (uint64_t) (k + 1) * l->period - now;

    } else {
        mockllm_limits_push(now, charge);

        l->used += charge;

        if (l->inflight_max) {
            l->inflight++;
            q->inflight = 1;

            if ((uint64_t) l->inflight > s->max_inflight) {
                s->max_inflight = (uint64_t) l->inflight;
            }
        }

        q->seq = l->head_seq + l->n - 1;
        q->charge = charge;
        q->period = k;
        q->charged = 1;

        if (s->admitted++ == 0) {
            s->first_ms = now;
        }

        s->last_ms = now;

        if (l->n > s->max_rpm_window) {
            s->max_rpm_window = l->n;
        }

        if (l->short_ms) {
            recent = mockllm_limits_recent(now, &first);

            if (recent > s->max_short_window) {
                s->max_short_window = recent;
            }
        }

        if (l->tokens > s->max_tpm_window) {
            s->max_tpm_window = l->tokens;
        }
    }

    mockllm_limits_remaining(q, now);

    pthread_mutex_unlock(&l->lock);

    q->refused = reason;

    return reason;
}


/*
 * The response is over, or the connection is: the request's entry and
 * the period's use are corrected to the prompt and the tokens it really
 * sent, unless they have left the window or the period, or were reset.
 */

void
mockllm_limits_end(mockllm_conn_t *c)
{
    size_t             i;
    int64_t            tokens;
    mockllm_limit_t   *q;
    mockllm_limits_t  *l;

    q = &c->lim;

    if (!q->arrived) {
        return;
    }

    if (q->charged) {
        l = &mockllm_lim;
        tokens = mockllm_limits_spent(c);

        pthread_mutex_lock(&l->lock);

        if (q->epoch == l->epoch) {

            if (q->seq >= l->head_seq && q->seq < l->head_seq + l->n) {
                i = (l->head + (q->seq - l->head_seq)) % l->cap;
                l->tokens += tokens - l->ring[i].tokens;
                l->ring[i].tokens = tokens;
            }

            if (l->quota && q->period == l->used_period) {
                l->used += tokens - q->charge;
            }
        }

        /* a live count: a reset of the counters does not end a request */
        if (q->inflight) {
            l->inflight--;
        }

        pthread_mutex_unlock(&l->lock);
    }

    memset(q, 0, sizeof(mockllm_limit_t));
}


/*
 * The headers of a limited mock's LLM response: its arrival, and what the
 * provider says of the limits, in its own headers.  On a refusal, when to
 * try again: OpenAI in seconds and milliseconds, Anthropic in seconds.
 */

void
mockllm_limits_head(mockllm_conn_t *c, mockllm_buf_t *b)
{
    int               openai;
    uint64_t          s;
    mockllm_limit_t  *q;

    q = &c->lim;

    mockllm_buf_adds(b, "\r\nx-mock-arrival-ms: ");
    mockllm_buf_add_num(b, q->arrival);

    if (!q->checked) {
        return;
    }

    openai = (c->resp.api != MOCKLLM_API_ANTHROPIC);

    if (mockllm_lim.rpm) {
        if (openai) {
            mockllm_limits_openai(b, "requests", mockllm_lim.rpm,
                                  q->rpm_remaining, q->rpm_reset);

        } else {
            mockllm_limits_anthropic(b, "requests", mockllm_lim.rpm,
                                     q->rpm_remaining, q->rpm_reset);
        }
    }

    if (mockllm_lim.tpm) {
        if (openai) {
            mockllm_limits_openai(b, "tokens", mockllm_lim.tpm,
                                  q->tpm_remaining, q->tpm_reset);

        } else {
            mockllm_limits_anthropic(b, "tokens", mockllm_lim.tpm,
                                     q->tpm_remaining, q->tpm_reset);
        }
    }

    /* an overloaded answer's Retry-After is the status line's (http.c) */
    if (q->refused == MOCKLLM_LIMIT_OK || q->too_large
        || q->refused == MOCKLLM_LIMIT_INFLIGHT)
    {
        return;
    }

    s = (q->retry + 999) / 1000;

    mockllm_buf_adds(b, "\r\nretry-after: ");
    mockllm_buf_add_num(b, s);

    if (openai && q->refused != MOCKLLM_LIMIT_QUOTA) {
        mockllm_buf_adds(b, "\r\nretry-after-ms: ");
        mockllm_buf_add_num(b, q->retry);
    }
}


/* GET /limits, and POST /limits/reset, which answers what it zeroed */

void
mockllm_limits_json(mockllm_buf_t *b, int reset)
{
    uint64_t                 now;
    mockllm_limits_t        *l;
    mockllm_limits_stats_t   s;

    l = &mockllm_lim;

    pthread_mutex_lock(&l->lock);

    now = mockllm_timer_now() - l->start;

    s = l->stats;
    s.period_used = 0;

    if (l->quota && (int64_t) (now / l->period) == l->used_period) {
        s.period_used = l->used;
    }

    if (reset) {
        /* the requests still out are not corrected: their epoch is over */
        memset(&l->stats, 0, sizeof(mockllm_limits_stats_t));

        l->head_seq += l->n;
        l->head = 0;
        l->n = 0;
        l->tokens = 0;
        l->used = 0;
        l->epoch++;
    }

    pthread_mutex_unlock(&l->lock);

    mockllm_buf_adds(b, "{\"requests\":");
    mockllm_buf_add_num(b, s.requests);
    mockllm_buf_adds(b, ",\"admitted\":");
    mockllm_buf_add_num(b, s.admitted);
    mockllm_buf_adds(b, ",\"refused_inflight\":");
    mockllm_buf_add_num(b, s.refused_inflight);
    mockllm_buf_adds(b, ",\"max_inflight\":");
    mockllm_buf_add_num(b, s.max_inflight);
    mockllm_buf_adds(b, ",\"refused_rpm\":");
    mockllm_buf_add_num(b, s.refused_rpm);
    mockllm_buf_adds(b, ",\"refused_tpm\":");
    mockllm_buf_add_num(b, s.refused_tpm);
    mockllm_buf_adds(b, ",\"refused_quota\":");
    mockllm_buf_add_num(b, s.refused_quota);
    mockllm_buf_adds(b, ",\"max_rpm_window\":");
    mockllm_buf_add_num(b, s.max_rpm_window);
    mockllm_buf_adds(b, ",\"max_short_window\":");
    mockllm_buf_add_num(b, s.max_short_window);
    mockllm_buf_adds(b, ",\"max_tpm_window\":");
    mockllm_buf_add_num(b, s.max_tpm_window);
    mockllm_buf_adds(b, ",\"first_ms\":");
    mockllm_buf_add_num(b, s.first_ms);
    mockllm_buf_adds(b, ",\"last_ms\":");
    mockllm_buf_add_num(b, s.last_ms);
    mockllm_buf_adds(b, ",\"period_used\":");
    mockllm_buf_add_num(b, s.period_used);
    mockllm_buf_adds(b, "}");
}


/*
 * A duration as OpenAI writes it, Go's way, to the millisecond: "0s",
 * "20ms", "1.234s", "6m0s", "1h0m0s".
 */

size_t
mockllm_limits_duration(char *buf, size_t len, uint64_t ms)
{
    int       n;
    char     *p, *last;
    uint64_t  h, m, s, f;

    if (ms == 0) {
        n = snprintf(buf, len, "0s");
        return n > 0 && (size_t) n < len ? (size_t) n : 0;
    }

    if (ms < 1000) {
        n = snprintf(buf, len, "%llums", (unsigned long long) ms);
        return n > 0 && (size_t) n < len ? (size_t) n : 0;
    }

    h = ms / 3600000;
    m = ms / 60000 % 60;
    s = ms / 1000 % 60;
    f = ms % 1000;

    p = buf;
    last = buf + len;

    if (h) {
        p += snprintf(p, last - p, "%lluh", (unsigned long long) h);
    }

    if (h || m) {
        p += snprintf(p, last - p, "%llum", (unsigned long long) m);
    }

    p += snprintf(p, last - p, "%llu", (unsigned long long) s);

    if (f) {
        p += snprintf(p, last - p, ".%03llu", (unsigned long long) f);

        while (p[-1] == '0') {
            p--;
        }
    }

    p += snprintf(p, last - p, "s");

    return p < last ? (size_t) (p - buf) : 0;
}


/* the entries that arrived 60 s ago or before leave the window */

static void
mockllm_limits_expire(uint64_t now)
{
    mockllm_limits_t  *l;

    l = &mockllm_lim;

    while (l->n && l->ring[l->head].at + MOCKLLM_WINDOW_MS <= now) {
        mockllm_limits_drop();
    }
}


/* the arrivals in the last short_ms, newest back; *first: the oldest */

static size_t
mockllm_limits_recent(uint64_t now, size_t *first)
{
    size_t             n, i;
    mockllm_limits_t  *l;

    l = &mockllm_lim;

    for (n = 0; n < l->n; n++) {
        i = (l->head + l->n - 1 - n) % l->cap;

        if (l->ring[i].at + l->short_ms <= now) {
            break;
        }

        *first = i;
    }

    return n;
}


static void
mockllm_limits_push(uint64_t now, int64_t charge)
{
    size_t                   cap, tail;
    mockllm_limits_t        *l;
    mockllm_limits_entry_t  *ring;

    l = &mockllm_lim;

    if (l->n == l->cap) {
        ring = NULL;
        cap = l->cap * 2 < MOCKLLM_WINDOW_MAX ? l->cap * 2
                                              : MOCKLLM_WINDOW_MAX;

        /* only without -r: with it, admission never fills the ring */
        if (l->grow && cap > l->cap) {
            ring = malloc(cap * sizeof(mockllm_limits_entry_t));
        }

        if (ring != NULL) {
            tail = l->cap - l->head;

            memcpy(ring, l->ring + l->head,
                   tail * sizeof(mockllm_limits_entry_t));
            memcpy(ring + tail, l->ring,
                   l->head * sizeof(mockllm_limits_entry_t));

            free(l->ring);

            l->ring = ring;
            l->cap = cap;
            l->head = 0;

        } else {
            if (!l->full_logged) {
                mockllm_log("limits: more than %zu requests in a minute, "
                            "the oldest are forgotten early", l->cap);
                l->full_logged = 1;
            }

            mockllm_limits_drop();
        }
    }

    tail = (l->head + l->n) % l->cap;

    l->ring[tail].at = now;
    l->ring[tail].tokens = charge;
    l->n++;
    l->tokens += charge;
}


static void
mockllm_limits_drop(void)
{
    mockllm_limits_t  *l;

    l = &mockllm_lim;

    l->tokens -= l->ring[l->head].tokens;
    l->head = (l->head + 1) % l->cap;
    l->head_seq++;
    l->n--;
}


/* until enough of the oldest tokens leave for charge to fit */

static uint64_t
mockllm_limits_tpm_wait(int64_t charge, uint64_t now)
{
    size_t             i, j;
    int64_t            need;
    mockllm_limits_t  *l;

    l = &mockllm_lim;

    need = l->tokens + charge - l->tpm;

    for (j = 0; j < l->n; j++) {
        i = (l->head + j) % l->cap;
        need -= l->ring[i].tokens;

        if (need <= 0) {
            return l->ring[i].at + MOCKLLM_WINDOW_MS - now;
        }
    }

    /* not reached: charge alone fits */
    return 0;
}


/* what is left of each limit, and when its window is empty again */

static void
mockllm_limits_remaining(mockllm_limit_t *q, uint64_t now)
{
    uint64_t           reset;
    mockllm_limits_t  *l;

    l = &mockllm_lim;

    reset = 0;

    if (l->n) {
        reset = l->ring[(l->head + l->n - 1) % l->cap].at
                + MOCKLLM_WINDOW_MS - now;
    }

    q->rpm_remaining = l->rpm > (int64_t) l->n ? l->rpm - (int64_t) l->n : 0;
    q->rpm_reset = reset;
    q->tpm_remaining = l->tpm > l->tokens ? l->tpm - l->tokens : 0;
    q->tpm_reset = reset;
}


static void
mockllm_limits_openai(mockllm_buf_t *b, const char *what, int64_t limit,
    int64_t remaining, uint64_t reset)
{
    char    buf[64];
    size_t  n;

    mockllm_buf_adds(b, "\r\nx-ratelimit-limit-");
    mockllm_buf_addz(b, what);
    mockllm_buf_adds(b, ": ");
    mockllm_buf_add_num(b, limit);

    mockllm_buf_adds(b, "\r\nx-ratelimit-remaining-");
    mockllm_buf_addz(b, what);
    mockllm_buf_adds(b, ": ");
    mockllm_buf_add_num(b, remaining);

    n = mockllm_limits_duration(buf, sizeof(buf), reset);

    mockllm_buf_adds(b, "\r\nx-ratelimit-reset-");
    mockllm_buf_addz(b, what);
    mockllm_buf_adds(b, ": ");
    mockllm_buf_add(b, buf, n);
}


/* Anthropic's reset is a time, RFC 3339, to the second rounded up */

static void
mockllm_limits_anthropic(mockllm_buf_t *b, const char *what, int64_t limit,
    int64_t remaining, uint64_t reset)
{
    char             buf[64];
    size_t           n;
    time_t           t;
    struct tm        tm;
    struct timespec  ts;

    clock_gettime(CLOCK_REALTIME, &ts);

    t = (time_t) ((ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + reset + 999)
                  / 1000);

    n = 0;

    if (gmtime_r(&t, &tm) != NULL) {
        n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    }

    mockllm_buf_adds(b, "\r\nanthropic-ratelimit-");
    mockllm_buf_addz(b, what);
    mockllm_buf_adds(b, "-limit: ");
    mockllm_buf_add_num(b, limit);

    mockllm_buf_adds(b, "\r\nanthropic-ratelimit-");
    mockllm_buf_addz(b, what);
    mockllm_buf_adds(b, "-remaining: ");
    mockllm_buf_add_num(b, remaining);

    mockllm_buf_adds(b, "\r\nanthropic-ratelimit-");
    mockllm_buf_addz(b, what);
    mockllm_buf_adds(b, "-reset: ");
    mockllm_buf_add(b, buf, n);
}
