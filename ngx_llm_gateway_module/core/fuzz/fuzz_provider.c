
/*
 * libFuzzer target for the refusal reader.  The input reads like the
 * response it stands for:
 *
 *     429 1718020800000 40          status, the clock (ms), a cut
 *     retry-after: 7                headers, until an empty line; the
 *     x-ratelimit-reset-tokens: 6s  ones not read are skipped
 *
 *     {"error": ...}                the body, to the end
 *
 * The clock and the cut are optional.  Every value and the body are
 * copied to buffers of their size, so that ASan sees a byte read past
 * one.  The verdict must be one the status allows, its wait within range,
 * and the same when read again.  The body cut at the cut must give a
 * sane verdict too, and the same class for the same reason if the whole
 * body's deciding word is in the cut whole.  Each value and the body
 * also go through the parsers alone.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm_provider.h"


#define FUZZ_NOW   1718020800000LL


static void fuzz_sane(const llm_provider_in_t *in,
    const llm_provider_verdict_t *v, const char *how);
static void fuzz_parsers(const char *s, size_t len, int64_t now);
static void fuzz_cut(llm_provider_in_t *in, const llm_provider_verdict_t *v,
    const char *body, size_t len, size_t cut);
static int fuzz_has(const char *s, size_t len, const char *word);
static int64_t fuzz_number(const char **p, const char *end, int *found);
static char *fuzz_copy(const char *s, size_t len);
static void fuzz_fail(const char *how, const char *what);


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int                     h, found;
    char                   *copy[LLM_PROVIDER_HEADERS], *body;
    size_t                  i, len, cut;
    int64_t                 n;
    const char             *p, *end, *eol, *line, *colon, *v, *ve;
    llm_provider_in_t       in;
    llm_provider_verdict_t  first, again;

    p = (const char *) data;
    end = p + size;

    memset(&in, 0, sizeof(llm_provider_in_t));
    memset(copy, 0, sizeof(copy));

    eol = memchr(p, '\n', size);
    eol = eol ? eol : end;

    n = fuzz_number(&p, eol, &found);
    in.status = n > 99999 ? 99999 : n < -99999 ? -99999 : (int) n;
    n = fuzz_number(&p, eol, &found);
    in.now_ms = found ? n : FUZZ_NOW;
    n = fuzz_number(&p, eol, &found);
    cut = found ? (size_t) (n < 0 ? -(n + 1) : n) : (size_t) -1;

    /* the headers */

    p = eol < end ? eol + 1 : end;

    while (p < end) {
        line = p;
        eol = memchr(line, '\n', (size_t) (end - line));
        eol = eol ? eol : end;
        ve = (eol > line && eol[-1] == '\r') ? eol - 1 : eol;
        p = eol < end ? eol + 1 : end;

        if (ve == line) {
            /* the empty line: the body follows */
            break;
        }

        colon = memchr(line, ':', (size_t) (ve - line));

        if (colon == NULL) {
            continue;
        }

        h = llm_provider_header(line, (size_t) (colon - line));

        if (h < -1 || h >= LLM_PROVIDER_HEADERS) {
            fuzz_fail("header", "an index out of range");
        }

        if (h < 0) {
            continue;
        }

        for (v = colon + 1; v < ve && (*v == ' ' || *v == '\t'); v++) {
            /* void */
        }

        free(copy[h]);
        copy[h] = fuzz_copy(v, (size_t) (ve - v));
        in.header[h].data = copy[h];
        in.header[h].len = (size_t) (ve - v);

        fuzz_parsers(copy[h], in.header[h].len, in.now_ms);
    }

    len = (size_t) (end - p);
    body = fuzz_copy(p, len);

    in.body.data = body;
    in.body.len = len;

    llm_provider_read(&in, &first);
    fuzz_sane(&in, &first, "whole");

    llm_provider_read(&in, &again);

    if (again.cls != first.cls || again.retry_ms != first.retry_ms
        || again.code != first.code || again.why != first.why
        || again.wait_from != first.wait_from)
    {
        fuzz_fail("again", "another verdict");
    }

    fuzz_parsers(body, len, in.now_ms);

    fuzz_cut(&in, &first, body, len, cut == (size_t) -1 ? len / 2
                                                        : cut % (len + 1));

    free(body);

    for (i = 0; i < LLM_PROVIDER_HEADERS; i++) {
        free(copy[i]);
    }

    return 0;
}


static void
fuzz_sane(const llm_provider_in_t *in, const llm_provider_verdict_t *v,
    const char *how)
{
    int          st, spent, busy, failed, ok;
    const char  *code;

    st = in->status;
    code = v->code ? v->code : "";

    ok = v->cls == LLM_PROVIDER_OK;
    busy = v->cls == LLM_PROVIDER_BUSY;
    spent = v->cls == LLM_PROVIDER_SPENT;
    failed = v->cls == LLM_PROVIDER_FAILED;

    if (!ok && !busy && !spent && !failed) {
        fuzz_fail(how, "no class");
    }

    if (v->why == NULL) {
        fuzz_fail(how, "no why");
    }

    if (v->retry_ms < -1 || v->retry_ms > LLM_PROVIDER_WAIT_MAX) {
        fuzz_fail(how, "a wait out of range");
    }

    if ((v->retry_ms == -1) != (v->wait_from == NULL)) {
        fuzz_fail(how, "a wait without its source, or a source alone");
    }

    if ((ok && v->code != NULL)
        || (busy && strcmp(code, "provider_rate_limited") != 0
            && strcmp(code, "provider_overloaded") != 0)
        || (spent && strcmp(code, "insufficient_quota") != 0)
        || (failed && strcmp(code, "provider_error") != 0))
    {
        fuzz_fail(how, "a code not of its class");
    }

    if (ok && v->retry_ms != -1) {
        fuzz_fail(how, "a wait for no refusal");
    }

    if (spent && v->retry_ms < 0) {
        fuzz_fail(how, "spent without a wait");
    }

    if (st < 100 || st > 599) {
        if (!failed || v->retry_ms != -1) {
            fuzz_fail(how, "an unreadable status read");
        }

    } else if (st < 400) {
        if (!ok) {
            fuzz_fail(how, "a refusal that is none");
        }

    } else if (st == 429) {
        if (!busy && !spent) {
            fuzz_fail(how, "a 429 neither busy nor spent");
        }

    } else if (st == 503 || st == 529) {
        if (!(busy && strcmp(code, "provider_overloaded") == 0) && !spent) {
            fuzz_fail(how, "a 503 or 529 neither overloaded nor spent");
        }

    } else if (st == 402) {
        if (!spent) {
            fuzz_fail(how, "a 402 not spent");
        }

    } else if (st == 408) {
        if (!failed) {
            fuzz_fail(how, "a 408 not failed");
        }

    } else if (st == 400 || st == 403) {
        if (!ok && !spent) {
            fuzz_fail(how, "a 400 or 403 neither ok nor spent");
        }

    } else if (st < 500) {
        if (!ok) {
            fuzz_fail(how, "a client error not ok");
        }

    } else if (!failed
               && !(busy && strcmp(code, "provider_overloaded") == 0))
    {
        fuzz_fail(how, "a 5xx neither failed nor overloaded");
    }
}


static void
fuzz_parsers(const char *s, size_t len, int64_t now)
{
    int64_t  ms[5];
    size_t   i;

    ms[0] = llm_time_retry_after(s, len, now);
    ms[1] = llm_time_duration(s, len);
    ms[2] = llm_time_reset(s, len, now);
    ms[3] = llm_time_next_midnight(now);
    ms[4] = llm_time_next_midnight_pacific(now);

    for (i = 0; i < 3; i++) {
        if (ms[i] < -1 || ms[i] > LLM_PROVIDER_WAIT_MAX) {
            fuzz_fail("parsers", "a wait out of range");
        }
    }

    if (ms[1] >= 0 && ms[2] != ms[1]) {
        fuzz_fail("parsers", "a duration read otherwise as a reset");
    }

    if (ms[3] <= 0 || ms[3] > 86400000 || ms[4] <= 0 || ms[4] > 90000000) {
        fuzz_fail("parsers", "a midnight out of range");
    }
}


/*
 * The body cut: sane.  If a refusal's class came from a body word and
 * the cut holds that word whole (in its raw bytes, not chunked, within
 * the part read), the cut gives the same class for the same reason: a
 * word found is final.
 */

static void
fuzz_cut(llm_provider_in_t *in, const llm_provider_verdict_t *v,
    const char *body, size_t len, size_t cut)
{
    int                     st, raw;
    char                   *part;
    size_t                  n;
    llm_provider_verdict_t  w;

    part = fuzz_copy(body, cut);

    in->body.data = part;
    in->body.len = cut;

    llm_provider_read(in, &w);
    fuzz_sane(in, &w, "cut");

    st = in->status;
    raw = len == 0 || !((body[0] >= '0' && body[0] <= '9')
                        || (body[0] >= 'a' && body[0] <= 'f')
                        || (body[0] >= 'A' && body[0] <= 'F'));
    n = cut < LLM_PROVIDER_BODY_MAX ? cut : LLM_PROVIDER_BODY_MAX;

    if ((st == 429 || st == 503 || st == 529) && raw
        && strncmp(v->why, "body: ", 6) == 0
        && fuzz_has(part, n, v->why + 6)
        && (w.cls != v->cls || strcmp(w.why, v->why) != 0))
    {
        fuzz_fail("cut", "the deciding word read, another class");
    }

    free(part);
}


/* word in s, in any case, as the reader compares */

static int
fuzz_lower(int c)
{
    return (c >= 'A' && c <= 'Z') ? c | 0x20 : c;
}


static int
fuzz_has(const char *s, size_t len, const char *word)
{
    size_t  i, k, n;

    n = strlen(word);

    for (i = 0; i + n <= len; i++) {
        for (k = 0; k < n; k++) {
            if (fuzz_lower((unsigned char) s[i + k])
                != fuzz_lower((unsigned char) word[k]))
            {
                break;
            }
        }

        if (k == n) {
            return 1;
        }
    }

    return 0;
}


/* an optionally signed decimal after blanks, saturating */

static int64_t
fuzz_number(const char **p, const char *end, int *found)
{
    int64_t      v;
    const char  *s;
    int          neg;

    s = *p;

    while (s < end && (*s == ' ' || *s == '\t' || *s == '\r')) {
        s++;
    }

    neg = s < end && *s == '-';
    s += neg;

    *found = s < end && *s >= '0' && *s <= '9';
    v = 0;

    while (s < end && *s >= '0' && *s <= '9') {
        v = v > (INT64_MAX - 9) / 10 ? INT64_MAX : v * 10 + (*s - '0');
        s++;
    }

    *p = s;

    return neg ? -v : v;
}


static char *
fuzz_copy(const char *s, size_t len)
{
    char  *p;

    p = malloc(len ? len : 1);

    if (p == NULL) {
        fuzz_fail("malloc", "no memory");
    }

    memcpy(p, s, len);

    return p;
}


static void
fuzz_fail(const char *how, const char *what)
{
    fprintf(stderr, "fuzz_provider: %s: %s\n", how, what);
    __builtin_trap();
}
