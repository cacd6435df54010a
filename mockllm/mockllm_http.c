
/*
 * HTTP/1.x requests: the request line, the headers mockllm cares about,
 * bodies by Content-Length or chunked, and the response head.
 */


#include <strings.h>

#include "mockllm.h"
#include "mockllm_buf.h"
#include "mockllm_http.h"
#include "mockllm_limits.h"
#include "mockllm_tenant.h"


#define MOCKLLM_TOKENS_MAX      1000000
#define MOCKLLM_PAD_MAX         (16 * 1024 * 1024)
#define MOCKLLM_REPEAT_MAX      1000


enum {
    MOCKLLM_CHUNK_SIZE_START = 0,
    MOCKLLM_CHUNK_SIZE,
    MOCKLLM_CHUNK_EXT,
    MOCKLLM_CHUNK_SIZE_LF,
    MOCKLLM_CHUNK_DATA,
    MOCKLLM_CHUNK_DATA_CR,
    MOCKLLM_CHUNK_DATA_LF,
    MOCKLLM_CHUNK_TRAILER_START,
    MOCKLLM_CHUNK_TRAILER,
    MOCKLLM_CHUNK_LAST_LF,
    MOCKLLM_CHUNK_DONE,

    MOCKLLM_CHUNK_BAD = -1,
    MOCKLLM_CHUNK_TOO_LARGE = -2
};


enum {
    MOCKLLM_H_CONTENT_LENGTH = 0,
    MOCKLLM_H_TRANSFER_ENCODING,
    MOCKLLM_H_CONNECTION,
    MOCKLLM_H_EXPECT,
    MOCKLLM_H_REQUEST_ID,
    MOCKLLM_H_TENANT,
    MOCKLLM_H_TOKENS,
    MOCKLLM_H_PROMPT_TOKENS,
    MOCKLLM_H_CACHED_TOKENS,
    MOCKLLM_H_CACHE_CREATION_TOKENS,
    MOCKLLM_H_REASONING_TOKENS,
    MOCKLLM_H_TTFB,
    MOCKLLM_H_DELAY,
    MOCKLLM_H_DIE_AFTER,
    MOCKLLM_H_DIE_HOW,
    MOCKLLM_H_ERROR_AFTER,
    MOCKLLM_H_NO_USAGE,
    MOCKLLM_H_MALFORMED,
    MOCKLLM_H_USAGE,
    MOCKLLM_H_USAGE_REPEAT,
    MOCKLLM_H_PAD_BYTES,
    MOCKLLM_H_STATUS,
    MOCKLLM_H_TOOL_CALLS,
    MOCKLLM_H_ANTHROPIC_VERSION,
    MOCKLLM_H_MODEL
};


typedef struct {
    const char          *name;
    size_t               len;
    int                  id;
} mockllm_http_header_t;


#define mockllm_http_h(name, id)  { name, sizeof(name) - 1, id }

/* in the order of the ids: a bad header is named by its id */
static const mockllm_http_header_t  mockllm_http_headers[] = {
    mockllm_http_h("content-length", MOCKLLM_H_CONTENT_LENGTH),
    mockllm_http_h("transfer-encoding", MOCKLLM_H_TRANSFER_ENCODING),
    mockllm_http_h("connection", MOCKLLM_H_CONNECTION),
    mockllm_http_h("expect", MOCKLLM_H_EXPECT),
    mockllm_http_h("x-request-id", MOCKLLM_H_REQUEST_ID),
    mockllm_http_h("x-mock-tenant", MOCKLLM_H_TENANT),
    mockllm_http_h("x-mock-tokens", MOCKLLM_H_TOKENS),
    mockllm_http_h("x-mock-prompt-tokens", MOCKLLM_H_PROMPT_TOKENS),
    mockllm_http_h("x-mock-cached-tokens", MOCKLLM_H_CACHED_TOKENS),
    mockllm_http_h("x-mock-cache-creation-tokens",
                   MOCKLLM_H_CACHE_CREATION_TOKENS),
    mockllm_http_h("x-mock-reasoning-tokens", MOCKLLM_H_REASONING_TOKENS),
    mockllm_http_h("x-mock-ttfb-ms", MOCKLLM_H_TTFB),
    mockllm_http_h("x-mock-delay-ms", MOCKLLM_H_DELAY),
    mockllm_http_h("x-mock-die-after", MOCKLLM_H_DIE_AFTER),
    mockllm_http_h("x-mock-die-how", MOCKLLM_H_DIE_HOW),
    mockllm_http_h("x-mock-error-after", MOCKLLM_H_ERROR_AFTER),
    mockllm_http_h("x-mock-no-usage", MOCKLLM_H_NO_USAGE),
    mockllm_http_h("x-mock-malformed", MOCKLLM_H_MALFORMED),
    mockllm_http_h("x-mock-usage", MOCKLLM_H_USAGE),
    mockllm_http_h("x-mock-usage-repeat", MOCKLLM_H_USAGE_REPEAT),
    mockllm_http_h("x-mock-pad-bytes", MOCKLLM_H_PAD_BYTES),
    mockllm_http_h("x-mock-status", MOCKLLM_H_STATUS),
    mockllm_http_h("x-mock-tool-calls", MOCKLLM_H_TOOL_CALLS),
    mockllm_http_h("anthropic-version", MOCKLLM_H_ANTHROPIC_VERSION),
    mockllm_http_h("x-mock-model", MOCKLLM_H_MODEL)
};

#define MOCKLLM_HTTP_NHEADERS                                                 \
    (sizeof(mockllm_http_headers) / sizeof(mockllm_http_headers[0]))


static int mockllm_http_find_end(mockllm_conn_t *c);
static int mockllm_http_parse_head(mockllm_conn_t *c);
static int mockllm_http_request_line(mockllm_conn_t *c, char *p, char *end);
static int mockllm_http_header(mockllm_conn_t *c, char *p, char *end);
static int mockllm_http_header_value(mockllm_conn_t *c, int id, char *v,
    size_t n);
static int mockllm_http_header_number(mockllm_conn_t *c, int id, char *v,
    size_t n);
static int mockllm_http_dechunk(mockllm_conn_t *c);
static int mockllm_http_chunk_byte(mockllm_conn_t *c, int state,
    unsigned char ch, size_t len);
static int mockllm_http_tchar(unsigned char ch);
static int mockllm_http_hex(unsigned char ch);
static int64_t mockllm_http_number(const char *p, size_t n, int64_t max);
static int mockllm_http_flag(const char *p, size_t n);
static int mockllm_http_has_token(const char *p, size_t n, const char *tok);
static const char *mockllm_http_reason(int status);


/* x-mock-delay-ms of a request without it: mockllm -d */
int64_t  mockllm_http_delay;


int
mockllm_http_parse(mockllm_conn_t *c)
{
    int  rc;

    if (c->hdr_len == 0) {
        rc = mockllm_http_find_end(c);
        if (rc != MOCKLLM_OK) {
            return rc;
        }

        rc = mockllm_http_parse_head(c);
        if (rc != MOCKLLM_OK) {
            return rc;
        }

        c->body_start = c->hdr_len;

        if (c->req.chunked) {
            c->body_len = 0;
            c->chunk_state = MOCKLLM_CHUNK_SIZE_START;

        } else {
            c->body_len = c->req.content_length > 0
                          ? (size_t) c->req.content_length : 0;
        }
    }

    if (c->req.chunked) {
        rc = mockllm_http_dechunk(c);

    } else if (c->in.len < c->hdr_len + c->body_len) {
        rc = MOCKLLM_AGAIN;

    } else {
        c->req_len = c->hdr_len + c->body_len;
        rc = MOCKLLM_OK;
    }

    if (rc == MOCKLLM_AGAIN && c->req.expect && !c->req.http10
        && !c->continued)
    {
        mockllm_buf_adds(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
        c->continued = 1;
    }

    return rc;
}


static int
mockllm_http_find_end(mockllm_conn_t *c)
{
    char    *p, *nl, *last;
    size_t   n;

    /* empty lines between requests are tolerated */
    if (c->scan == 0) {
        for (n = 0; n < c->in.len; n++) {
            if (c->in.data[n] != '\r' && c->in.data[n] != '\n') {
                break;
            }
        }

        if (n) {
            memmove(c->in.data, c->in.data + n, c->in.len - n);
            c->in.len -= n;
        }
    }

    /* before the first read there is no buffer */
    if (c->in.len == 0) {
        return MOCKLLM_AGAIN;
    }

    p = c->in.data + c->scan;
    last = c->in.data + c->in.len;

    for ( ;; ) {
        nl = (p < last) ? memchr(p, '\n', last - p) : NULL;

        if (nl == NULL) {
            c->scan = c->in.len;
            break;
        }

        if (nl + 1 < last && nl[1] == '\n') {
            c->hdr_len = nl + 2 - c->in.data;
            break;
        }

        if (nl + 2 < last && nl[1] == '\r' && nl[2] == '\n') {
            c->hdr_len = nl + 3 - c->in.data;
            break;
        }

        if (nl + 1 == last || (nl + 2 == last && nl[1] == '\r')) {
            /* the next line has not arrived yet: look at it again */
            c->scan = nl - c->in.data;
            break;
        }

        p = nl + 1;
    }

    if (c->hdr_len && c->hdr_len <= MOCKLLM_HEADER_MAX) {
        return MOCKLLM_OK;
    }

    if (c->hdr_len || c->in.len > MOCKLLM_HEADER_MAX) {
        c->err_status = 431;
        c->err_msg = "request header fields too large";
        return MOCKLLM_ERROR;
    }

    return MOCKLLM_AGAIN;
}


static int
mockllm_http_parse_head(mockllm_conn_t *c)
{
    char  *p, *end, *nl, *le;

    c->req.content_length = MOCKLLM_NONE;
    c->req.tokens = MOCKLLM_NONE;
    c->req.prompt_tokens = MOCKLLM_NONE;
    c->req.cached_tokens = 0;
    c->req.cache_creation_tokens = 0;
    c->req.reasoning_tokens = MOCKLLM_NONE;
    c->req.ttfb = 0;
    c->req.delay = mockllm_http_delay;
    c->req.die_after = MOCKLLM_NONE;
    c->req.error_after = MOCKLLM_NONE;
    c->req.usage_repeat = 1;
    c->req.pad_bytes = 0;
    c->req.status = 0;
    c->req.tool_calls = 0;
    c->req.die_how = MOCKLLM_DIE_CLOSE;

    p = c->in.data;
    end = p + c->hdr_len;

    nl = memchr(p, '\n', end - p);
    le = (nl > p && nl[-1] == '\r') ? nl - 1 : nl;

    if (mockllm_http_request_line(c, p, le) != MOCKLLM_OK) {
        c->err_status = 400;
        c->err_msg = "malformed request line";
        return MOCKLLM_ERROR;
    }

    for (p = nl + 1; p < end; p = nl + 1) {
        nl = memchr(p, '\n', end - p);
        le = (nl > p && nl[-1] == '\r') ? nl - 1 : nl;

        if (le == p) {
            break;
        }

        if (mockllm_http_header(c, p, le) != MOCKLLM_OK) {
            if (c->err_status == 0) {
                c->err_status = 400;
                c->err_msg = "malformed header";
            }

            return MOCKLLM_ERROR;
        }
    }

    if (c->req.chunked && c->req.content_length != MOCKLLM_NONE) {
        c->err_status = 400;
        c->err_msg = "both Content-Length and Transfer-Encoding";
        return MOCKLLM_ERROR;
    }

    if (c->req.content_length > MOCKLLM_BODY_MAX) {
        c->err_status = 413;
        c->err_msg = "request body too large";
        return MOCKLLM_ERROR;
    }

    return MOCKLLM_OK;
}


static int
mockllm_http_request_line(mockllm_conn_t *c, char *p, char *end)
{
    char           *m, *t, *q;
    unsigned char   ch;

    for (m = p; p < end && mockllm_http_tchar(*p); p++) {
        /* void */
    }

    if (p == m || p == end || *p != ' ') {
        return MOCKLLM_ERROR;
    }

    if (p - m == 3 && memcmp(m, "GET", 3) == 0) {
        c->req.method = MOCKLLM_METHOD_GET;

    } else if (p - m == 4 && memcmp(m, "POST", 4) == 0) {
        c->req.method = MOCKLLM_METHOD_POST;

    } else {
        c->req.method = MOCKLLM_METHOD_OTHER;
    }

    for (t = ++p; p < end; p++) {
        ch = (unsigned char) *p;

        if (ch <= 0x20 || ch >= 0x7f) {
            break;
        }
    }

    if (p == t || p == end || *p != ' ' || *t != '/') {
        return MOCKLLM_ERROR;
    }

    q = memchr(t, '?', p - t);

    c->req.path_start = t - c->in.data;
    c->req.path_len = (q ? q : p) - t;

    p++;

    if (end - p != 8 || memcmp(p, "HTTP/1.", 7) != 0) {
        return MOCKLLM_ERROR;
    }

    if (p[7] == '0') {
        c->req.http10 = 1;

    } else if (p[7] != '1') {
        return MOCKLLM_ERROR;
    }

    return MOCKLLM_OK;
}


static int
mockllm_http_header(mockllm_conn_t *c, char *p, char *end)
{
    char           *name, *v, *q;
    size_t          i, n;
    unsigned char   ch;

    /* a leading space is an obsolete folded line: not a tchar, rejected */
    for (name = p; p < end && mockllm_http_tchar(*p); p++) {
        /* void */
    }

    if (p == name || p == end || *p != ':') {
        return MOCKLLM_ERROR;
    }

    n = p - name;

    for (p++; p < end && (*p == ' ' || *p == '\t'); p++) {
        /* void */
    }

    while (end > p && (end[-1] == ' ' || end[-1] == '\t')) {
        end--;
    }

    v = p;

    for (q = v; q < end; q++) {
        ch = (unsigned char) *q;

        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
            return MOCKLLM_ERROR;
        }
    }

    for (i = 0; i < MOCKLLM_HTTP_NHEADERS; i++) {
        if (mockllm_http_headers[i].len == n
            && strncasecmp(mockllm_http_headers[i].name, name, n) == 0)
        {
            return mockllm_http_header_value(c, mockllm_http_headers[i].id,
                                             v, end - v);
        }
    }

    return MOCKLLM_OK;
}


static int
mockllm_http_header_value(mockllm_conn_t *c, int id, char *v, size_t n)
{
    size_t          i;
    int64_t         val;
    mockllm_req_t  *r;

    r = &c->req;

    switch (id) {

    case MOCKLLM_H_CONTENT_LENGTH:
        val = mockllm_http_number(v, n, MOCKLLM_BODY_MAX + 1);

        if (val < 0
            || (r->content_length != MOCKLLM_NONE && r->content_length != val))
        {
            c->err_status = 400;
            c->err_msg = "invalid Content-Length";
            return MOCKLLM_ERROR;
        }

        r->content_length = val;
        return MOCKLLM_OK;

    case MOCKLLM_H_TRANSFER_ENCODING:
        if (n != 7 || strncasecmp(v, "chunked", 7) != 0) {
            c->err_status = 501;
            c->err_msg = "unsupported Transfer-Encoding";
            return MOCKLLM_ERROR;
        }

        r->chunked = 1;
        return MOCKLLM_OK;

    case MOCKLLM_H_CONNECTION:
        if (mockllm_http_has_token(v, n, "close")) {
            r->conn_close = 1;
        }

        if (mockllm_http_has_token(v, n, "keep-alive")) {
            r->keepalive = 1;
        }

        return MOCKLLM_OK;

    case MOCKLLM_H_EXPECT:
        if (n == 12 && strncasecmp(v, "100-continue", 12) == 0) {
            r->expect = 1;
        }

        return MOCKLLM_OK;

    case MOCKLLM_H_REQUEST_ID:
        if (n > sizeof(r->request_id)) {
            n = sizeof(r->request_id);
        }

        memcpy(r->request_id, v, n);
        r->request_id_len = n;
        return MOCKLLM_OK;

    case MOCKLLM_H_MODEL:
        /* a name as providers write theirs: nothing to escape in JSON */
        for (i = 0; i < n && i < sizeof(r->served_model); i++) {
            if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                       "0123456789-_.:/", v[i]) == NULL)
            {
                break;
            }
        }

        if (n == 0 || i < n) {
            r->bad_header = mockllm_http_headers[id].name;
            return MOCKLLM_OK;
        }

        memcpy(r->served_model, v, n);
        r->served_model_len = n;
        return MOCKLLM_OK;

    case MOCKLLM_H_TENANT:
        if (n > sizeof(r->tenant)) {
            n = sizeof(r->tenant);
        }

        memcpy(r->tenant, v, n);
        r->tenant_len = n;
        return MOCKLLM_OK;

    case MOCKLLM_H_NO_USAGE:
        r->no_usage = mockllm_http_flag(v, n);
        return MOCKLLM_OK;

    case MOCKLLM_H_MALFORMED:
        r->malformed = mockllm_http_flag(v, n);
        return MOCKLLM_OK;

    case MOCKLLM_H_DIE_HOW:
        if (n == 5 && strncasecmp(v, "close", 5) == 0) {
            r->die_how = MOCKLLM_DIE_CLOSE;

        } else if (n == 5 && strncasecmp(v, "reset", 5) == 0) {
            r->die_how = MOCKLLM_DIE_RESET;

        } else if (n == 5 && strncasecmp(v, "stall", 5) == 0) {
            r->die_how = MOCKLLM_DIE_STALL;

        } else {
            r->bad_header = mockllm_http_headers[id].name;
        }

        return MOCKLLM_OK;

    case MOCKLLM_H_ANTHROPIC_VERSION:
        r->anthropic_version = 1;
        return MOCKLLM_OK;

    case MOCKLLM_H_USAGE:
        /*
         * An offset, not a pointer: the buffer may move while the body
         * is read.  The JSON is checked when the request is handled.
         */
        r->usage_start = v - c->in.data;
        r->usage_len = n;
        r->usage_given = 1;
        return MOCKLLM_OK;

    default:
        return mockllm_http_header_number(c, id, v, n);
    }
}


/*
 * The numeric x-mock- headers.  A bad one is the client's mistake, not a
 * protocol error: it is answered with a 400 that keeps the connection.
 */

static int
mockllm_http_header_number(mockllm_conn_t *c, int id, char *v, size_t n)
{
    int64_t         val, max, *field;
    mockllm_req_t  *r;

    r = &c->req;

    switch (id) {

    case MOCKLLM_H_TOKENS:
        max = MOCKLLM_TOKENS_MAX;
        field = &r->tokens;
        break;

    case MOCKLLM_H_PROMPT_TOKENS:
        max = INT32_MAX;
        field = &r->prompt_tokens;
        break;

    case MOCKLLM_H_CACHED_TOKENS:
        max = INT32_MAX;
        field = &r->cached_tokens;
        break;

    case MOCKLLM_H_CACHE_CREATION_TOKENS:
        max = INT32_MAX;
        field = &r->cache_creation_tokens;
        break;

    case MOCKLLM_H_REASONING_TOKENS:
        max = MOCKLLM_TOKENS_MAX;
        field = &r->reasoning_tokens;
        break;

    case MOCKLLM_H_TTFB:
        max = MOCKLLM_DELAY_MAX;
        field = &r->ttfb;
        break;

    case MOCKLLM_H_DELAY:
        max = MOCKLLM_DELAY_MAX;
        field = &r->delay;
        break;

    case MOCKLLM_H_DIE_AFTER:
        max = MOCKLLM_TOKENS_MAX;
        field = &r->die_after;
        break;

    case MOCKLLM_H_ERROR_AFTER:
        max = MOCKLLM_TOKENS_MAX;
        field = &r->error_after;
        break;

    case MOCKLLM_H_USAGE_REPEAT:
        max = MOCKLLM_REPEAT_MAX;
        field = &r->usage_repeat;
        break;

    case MOCKLLM_H_PAD_BYTES:
        max = MOCKLLM_PAD_MAX;
        field = &r->pad_bytes;
        break;

    case MOCKLLM_H_TOOL_CALLS:
        max = MOCKLLM_CALLS_MAX;
        field = &r->tool_calls;
        break;

    default: /* MOCKLLM_H_STATUS */
        max = 999;
        field = &r->status;
        break;
    }

    /* above the bound is refused, not cut to it */
    val = mockllm_http_number(v, n, max + 1);
    val = (val > max) ? -1 : val;

    if (id == MOCKLLM_H_STATUS && val != 200 && (val < 400 || val > 599)) {
        val = -1;
    }

    *field = val;

    if (val < 0) {
        r->bad_header = mockllm_http_headers[id].name;
    }

    return MOCKLLM_OK;
}


/*
 * Decodes in place: the decoded body never outruns the raw bytes, and what
 * is left undecoded is moved down behind it, so the buffer holds about the
 * body and no more.
 */

static int
mockllm_http_dechunk(mockllm_conn_t *c)
{
    int      state;
    char    *d, *p, *last;
    size_t   n;

    d = c->in.data + c->body_start + c->body_len;
    p = d;
    last = c->in.data + c->in.len;
    state = c->chunk_state;

    while (p < last && state != MOCKLLM_CHUNK_DONE) {

        if (state == MOCKLLM_CHUNK_DATA) {
            n = last - p;

            if (n > c->chunk_size) {
                n = c->chunk_size;
            }

            memmove(d, p, n);
            d += n;
            p += n;
            c->chunk_size -= n;

            if (c->chunk_size == 0) {
                state = MOCKLLM_CHUNK_DATA_CR;
            }

            continue;
        }

        state = mockllm_http_chunk_byte(c, state, (unsigned char) *p++,
                                        d - c->in.data - c->body_start);

        if (state == MOCKLLM_CHUNK_BAD) {
            goto bad;
        }

        if (state == MOCKLLM_CHUNK_TOO_LARGE) {
            goto too_large;
        }
    }

    c->chunk_state = state;
    c->body_len = d - c->in.data - c->body_start;

    if (state == MOCKLLM_CHUNK_DONE) {
        c->req_len = p - c->in.data;
        return MOCKLLM_OK;
    }

    n = last - p;
    memmove(d, p, n);
    c->in.len = d + n - c->in.data;

    return MOCKLLM_AGAIN;

bad:

    c->err_status = 400;
    c->err_msg = "malformed chunked body";
    return MOCKLLM_ERROR;

too_large:

    c->err_status = 413;
    c->err_msg = "request body too large";
    return MOCKLLM_ERROR;
}


void
mockllm_http_head(mockllm_conn_t *c, int status, const char *content_type,
    int64_t content_length)
{
    mockllm_buf_t  *b;

    b = &c->out;

    if (status == 200) {
        mockllm_buf_adds(b, "HTTP/1.1 200 OK\r\nContent-Type: ");

    } else {
        mockllm_buf_adds(b, "HTTP/1.1 ");
        mockllm_buf_add_num(b, status);
        mockllm_buf_adds(b, " ");
        mockllm_buf_addz(b, mockllm_http_reason(status));
        mockllm_buf_adds(b, "\r\nContent-Type: ");
    }

    mockllm_buf_addz(b, content_type);

    if (content_length >= 0) {
        mockllm_buf_adds(b, "\r\nContent-Length: ");
        mockllm_buf_add_num(b, content_length);

    } else {
        mockllm_buf_adds(b, "\r\nCache-Control: no-cache");

        if (c->resp.chunked) {
            mockllm_buf_adds(b, "\r\nTransfer-Encoding: chunked");
        }
    }

    if ((status == 429 && !c->lim.refused) || status == 503
        || status == 529)
    {
        mockllm_buf_adds(b, "\r\nRetry-After: 1");
    }

    if (c->lim.arrived) {
        mockllm_limits_head(c, b);
    }

    if (c->resp.read) {
        mockllm_buf_adds(b, "\r\nx-mock-read: ");
        mockllm_buf_add(b, c->readout.data, c->readout.len);
    }

    mockllm_buf_adds(b, "\r\nx-mock-request-id: ");
    mockllm_buf_add_num(b, c->resp.id);

    if (c->req.request_id_len) {
        mockllm_buf_adds(b, "\r\nx-mock-saw-request-id: ");
        mockllm_buf_add(b, c->req.request_id, c->req.request_id_len);
    }

    if (c->close) {
        mockllm_buf_adds(b, "\r\nConnection: close\r\n\r\n");

    } else if (c->req.http10) {
        mockllm_buf_adds(b, "\r\nConnection: keep-alive\r\n\r\n");

    } else {
        mockllm_buf_adds(b, "\r\n\r\n");
    }
}


/* the response is out: drop the request, keep what follows it */

void
mockllm_http_finish(mockllm_conn_t *c)
{
    size_t  rest;

    mockllm_tenant_end(c);
    mockllm_limits_end(c);

    rest = c->in.len - c->req_len;

    if (rest) {
        memmove(c->in.data, c->in.data + c->req_len, rest);
    }

    c->in.len = rest;

    c->scan = 0;
    c->hdr_len = 0;
    c->req_len = 0;
    c->body_start = 0;
    c->body_len = 0;
    c->chunk_size = 0;
    c->chunk_state = 0;
    c->err_status = 0;
    c->err_msg = NULL;

    c->busy = 0;
    c->done = 0;
    c->continued = 0;

    memset(&c->req, 0, sizeof(mockllm_req_t));

    mockllm_buf_shrink(&c->in);
    mockllm_buf_shrink(&c->out);
    mockllm_buf_shrink(&c->tmp);
}


/*
 * One byte of the chunked framing in state; len is the body decoded so
 * far.  Returns the next state, or MOCKLLM_CHUNK_BAD or _TOO_LARGE.
 */

static int
mockllm_http_chunk_byte(mockllm_conn_t *c, int state, unsigned char ch,
    size_t len)
{
    int  v;

    switch (state) {

    case MOCKLLM_CHUNK_SIZE_START:
        v = mockllm_http_hex(ch);
        if (v < 0) {
            return MOCKLLM_CHUNK_BAD;
        }

        c->chunk_size = v;
        state = MOCKLLM_CHUNK_SIZE;
        break;

    case MOCKLLM_CHUNK_SIZE:
        v = mockllm_http_hex(ch);

        if (v >= 0) {
            c->chunk_size = c->chunk_size * 16 + v;

            if (c->chunk_size > MOCKLLM_BODY_MAX) {
                return MOCKLLM_CHUNK_TOO_LARGE;
            }

            break;
        }

        if (ch == ';' || ch == ' ' || ch == '\t') {
            state = MOCKLLM_CHUNK_EXT;
            break;
        }

        /* fall through */

    case MOCKLLM_CHUNK_EXT:
        if (ch == '\r') {
            state = MOCKLLM_CHUNK_SIZE_LF;
            break;
        }

        if (ch != '\n') {
            if ((ch < 0x20 && ch != '\t') || ch == 0x7f
                || state == MOCKLLM_CHUNK_SIZE)
            {
                return MOCKLLM_CHUNK_BAD;
            }

            break;
        }

        /* fall through */

    case MOCKLLM_CHUNK_SIZE_LF:
        if (ch != '\n') {
            return MOCKLLM_CHUNK_BAD;
        }

        if (len + c->chunk_size > MOCKLLM_BODY_MAX) {
            return MOCKLLM_CHUNK_TOO_LARGE;
        }

        state = c->chunk_size ? MOCKLLM_CHUNK_DATA
                              : MOCKLLM_CHUNK_TRAILER_START;
        break;

    case MOCKLLM_CHUNK_DATA_CR:
        if (ch == '\r') {
            state = MOCKLLM_CHUNK_DATA_LF;
            break;
        }

        /* fall through */

    case MOCKLLM_CHUNK_DATA_LF:
        if (ch != '\n') {
            return MOCKLLM_CHUNK_BAD;
        }

        state = MOCKLLM_CHUNK_SIZE_START;
        break;

    case MOCKLLM_CHUNK_TRAILER_START:
        if (ch == '\r') {
            state = MOCKLLM_CHUNK_LAST_LF;

        } else if (ch == '\n') {
            state = MOCKLLM_CHUNK_DONE;

        } else {
            state = MOCKLLM_CHUNK_TRAILER;
        }

        break;

    case MOCKLLM_CHUNK_TRAILER:
        if (ch == '\n') {
            state = MOCKLLM_CHUNK_TRAILER_START;
        }

        break;

    default: /* MOCKLLM_CHUNK_LAST_LF */
        if (ch != '\n') {
            return MOCKLLM_CHUNK_BAD;
        }

        state = MOCKLLM_CHUNK_DONE;
        break;
    }

    return state;
}


static int
mockllm_http_tchar(unsigned char ch)
{
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
        || (ch >= '0' && ch <= '9'))
    {
        return 1;
    }

    return ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}


static int
mockllm_http_hex(unsigned char ch)
{
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }

    ch |= 0x20;

    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }

    return -1;
}


/* decimal digits only; values above max are clamped to max */

static int64_t
mockllm_http_number(const char *p, size_t n, int64_t max)
{
    size_t   i;
    int64_t  v;

    if (n == 0) {
        return -1;
    }

    v = 0;

    for (i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }

        if (v < max) {
            v = v * 10 + (p[i] - '0');
        }
    }

    return v > max ? max : v;
}


static int
mockllm_http_flag(const char *p, size_t n)
{
    if (n == 0
        || (n == 1 && p[0] == '0')
        || (n == 5 && strncasecmp(p, "false", 5) == 0))
    {
        return 0;
    }

    return 1;
}


static int
mockllm_http_has_token(const char *p, size_t n, const char *tok)
{
    size_t  len, i, j, e;

    len = strlen(tok);

    for (i = 0; i < n; i = j + 1) {
        while (i < n && (p[i] == ' ' || p[i] == '\t')) {
            i++;
        }

        for (j = i; j < n && p[j] != ','; j++) {
            /* void */
        }

        for (e = j; e > i && (p[e - 1] == ' ' || p[e - 1] == '\t'); e--) {
            /* void */
        }

        if (e - i == len && strncasecmp(p + i, tok, len) == 0) {
            return 1;
        }
    }

    return 0;
}


static const char *
mockllm_http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 529: return "Overloaded";
    default:  return status < 500 ? "Client Error" : "Server Error";
    }
}
