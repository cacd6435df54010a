
/*
 * Usage extraction from SSE streams and JSON bodies; see llm_sse.h.
 */


#include <string.h>

#include <cJSON.h>

#include "llm_sse.h"


#define LLM_SSE_IGNORE            0
#define LLM_SSE_DATA              1
#define LLM_SSE_EVENT             2

#define LLM_SSE_BOM               "\xEF\xBB\xBF"


enum {
    sw_line_start = 0,
    sw_name,
    sw_space,
    sw_value
};


/* Anthropic's event types that carry what we want */
typedef enum {
    llm_sse_other = 0,
    llm_sse_message_start,
    llm_sse_message_delta,
    llm_sse_message_stop,
    llm_sse_error
} llm_sse_kind_e;


/* indexes into llm_sse_t.tokens */
enum {
    llm_sse_input = 0,
    llm_sse_cache_creation,
    llm_sse_cache_read,
    llm_sse_output
};


static void llm_sse_line_end(llm_sse_t *p);
static void llm_sse_field(llm_sse_t *p);
static void llm_sse_value(llm_sse_t *p, const char *s, size_t n);
static void llm_sse_append(llm_sse_t *p, const char *s, size_t n);
static void llm_sse_dispatch(llm_sse_t *p);
static void llm_sse_openai(llm_sse_t *p);
static void llm_sse_anthropic(llm_sse_t *p);
static void llm_sse_openai_json(const cJSON *root, llm_usage_t *u);
static void llm_sse_anthropic_usage(const cJSON *usage, uint64_t *tokens,
    llm_usage_t *u);
static uint64_t llm_sse_tokens(const cJSON *obj, const char *name,
    uint64_t dflt, llm_usage_t *u);
static void llm_sse_finish_reason(const cJSON *item, llm_usage_t *u);
static llm_sse_kind_e llm_sse_kind(const char *s, size_t n);
static int llm_sse_openai_wanted(const char *s, size_t n);
static int llm_sse_anthropic_wanted(const char *s, size_t n);
static const char *llm_sse_key(const char *s, const char *end,
    const char *key, size_t n);
static const char *llm_sse_ws(const char *s, const char *end);
static int llm_sse_is_done(const char *s, size_t n);


void
llm_sse_init(llm_sse_t *p, llm_api_e api, char *buf, size_t cap)
{
    memset(p, 0, sizeof(llm_sse_t));

    p->api = api;
    p->buf = buf;
    p->cap = buf ? cap : 0;
}


void
llm_sse_feed(llm_sse_t *p, const char *data, size_t len)
{
    char         ch;
    const char  *pos, *end, *q;

    if (len == 0) {
        return;
    }

    pos = data;
    end = data + len;

    while (pos < end) {
        ch = *pos;

        if (p->last_cr) {
            p->last_cr = 0;

            if (ch == '\n') {
                pos++;
                continue;
            }
        }

        if (ch == '\r' || ch == '\n') {
            llm_sse_line_end(p);
            p->last_cr = (ch == '\r');
            pos++;
            continue;
        }

        switch (p->state) {

        case sw_line_start:

            if (ch == ':') {
                p->field = LLM_SSE_IGNORE;
                p->state = sw_value;
                pos++;
                break;
            }

            p->field_len = 0;
            p->state = sw_name;

            /* fall through */

        case sw_name:

            if (ch == ':') {
                llm_sse_field(p);
                p->state = sw_space;
                pos++;
                break;
            }

            if (p->field_len < sizeof(p->field_name)) {
                p->field_name[p->field_len++] = ch;

            } else {
                p->field_len = sizeof(p->field_name) + 1;
            }

            pos++;
            break;

        case sw_space:

            p->state = sw_value;

            if (ch == ' ') {
                pos++;
                break;
            }

            /* fall through */

        default: /* sw_value */

            for (q = pos + 1; q < end && *q != '\r' && *q != '\n'; q++) {
                /* void */
            }

            llm_sse_value(p, pos, q - pos);
            pos = q;
            break;
        }
    }
}


void
llm_sse_finish(llm_sse_t *p)
{
    if (p->state != sw_line_start) {
        llm_sse_line_end(p);
    }

    llm_sse_dispatch(p);

    p->last_cr = 0;
}


/*
 * A body that parses as a JSON object is whole, so it sets done: the
 * caller flags the others as partial.
 */

int
llm_usage_from_json(llm_api_e api, const char *body, size_t len,
    llm_usage_t *u)
{
    uint64_t      tokens[4];
    cJSON        *root;
    const cJSON  *item;

    memset(u, 0, sizeof(llm_usage_t));

    if (len == 0) {
        return 0;
    }

    root = cJSON_ParseWithLength(body, len);
    if (root == NULL) {
        return 0;
    }

    if (!cJSON_IsObject(root)) {
        goto done;
    }

    u->done = 1;

    if (api == LLM_API_OPENAI) {
        llm_sse_openai_json(root, u);
        goto done;
    }

    if (api != LLM_API_ANTHROPIC) {
        goto done;
    }

    item = cJSON_GetObjectItemCaseSensitive(root, "type");

    if (cJSON_IsString(item) && strcmp(item->valuestring, "error") == 0) {
        u->error = 1;
    }

    item = cJSON_GetObjectItemCaseSensitive(root, "error");

    if (item != NULL && !cJSON_IsNull(item)) {
        u->error = 1;
    }

    item = cJSON_GetObjectItemCaseSensitive(root, "usage");

    if (cJSON_IsObject(item)) {
        memset(tokens, 0, sizeof(tokens));
        llm_sse_anthropic_usage(item, tokens, u);
    }

    item = cJSON_GetObjectItemCaseSensitive(root, "stop_reason");
    llm_sse_finish_reason(item, u);

done:

    cJSON_Delete(root);

    return u->have_usage;
}


static void
llm_sse_line_end(llm_sse_t *p)
{
    switch (p->state) {

    case sw_line_start:
        llm_sse_dispatch(p);
        break;

    case sw_name:
        /* a line without a colon is a field with an empty value */
        llm_sse_field(p);
        break;

    default:
        break;
    }

    p->state = sw_line_start;
    p->started = 1;
}


static void
llm_sse_field(llm_sse_t *p)
{
    size_t       n;
    const char  *name;

    name = p->field_name;
    n = p->field_len;

    if (!p->started
        && n >= 3 && n <= sizeof(p->field_name)
        && memcmp(name, LLM_SSE_BOM, 3) == 0)
    {
        name += 3;
        n -= 3;
    }

    if (n == 4 && memcmp(name, "data", 4) == 0) {
        p->field = LLM_SSE_DATA;

        if (p->have_data) {
            llm_sse_append(p, "\n", 1);
        }

        p->have_data = 1;

    } else if (n == 5 && memcmp(name, "event", 5) == 0) {
        p->field = LLM_SSE_EVENT;
        p->event_len = 0;

    } else {
        p->field = LLM_SSE_IGNORE;
    }
}


static void
llm_sse_value(llm_sse_t *p, const char *s, size_t n)
{
    switch (p->field) {

    case LLM_SSE_DATA:
        llm_sse_append(p, s, n);
        break;

    case LLM_SSE_EVENT:

        if (p->event_len + n <= sizeof(p->event)) {
            memcpy(p->event + p->event_len, s, n);
            p->event_len += n;

        } else {
            p->event_len = sizeof(p->event) + 1;
        }

        break;

    default:
        break;
    }
}


static void
llm_sse_append(llm_sse_t *p, const char *s, size_t n)
{
    if (p->skip_event || n == 0) {
        return;
    }

    if (n > p->cap - p->len) {
        p->skip_event = 1;
        p->usage.truncated = 1;
        return;
    }

    memcpy(p->buf + p->len, s, n);
    p->len += n;
}


static void
llm_sse_dispatch(llm_sse_t *p)
{
    if (p->have_data && !p->skip_event) {

        if (p->api == LLM_API_OPENAI) {
            llm_sse_openai(p);

        } else if (p->api == LLM_API_ANTHROPIC) {
            llm_sse_anthropic(p);
        }
    }

    p->len = 0;
    p->event_len = 0;
    p->have_data = 0;
    p->skip_event = 0;
}


static void
llm_sse_openai(llm_sse_t *p)
{
    cJSON  *root;

    if (llm_sse_kind(p->event, p->event_len) == llm_sse_error) {
        p->usage.error = 1;
    }

    if (llm_sse_is_done(p->buf, p->len)) {
        p->usage.done = 1;
        return;
    }

    /* most events are content deltas: they are not worth a parse */

    if (!llm_sse_openai_wanted(p->buf, p->len)) {
        return;
    }

    root = cJSON_ParseWithLength(p->buf, p->len);
    if (root == NULL) {
        return;
    }

    if (cJSON_IsObject(root)) {
        llm_sse_openai_json(root, &p->usage);
    }

    cJSON_Delete(root);
}


/*
 * The event: line names the type; an event it does not name as one of
 * ours (no event: line at all, or "message", its default) is looked for
 * in the data's "type".
 */

static void
llm_sse_anthropic(llm_sse_t *p)
{
    cJSON           *root;
    const cJSON     *item;
    llm_sse_kind_e   kind;

    kind = llm_sse_kind(p->event, p->event_len);

    switch (kind) {

    case llm_sse_message_stop:
        p->usage.done = 1;
        return;

    case llm_sse_error:
        p->usage.error = 1;
        return;

    case llm_sse_other:

        if (!llm_sse_anthropic_wanted(p->buf, p->len)) {
            return;
        }

        break;

    default:
        break;
    }

    root = cJSON_ParseWithLength(p->buf, p->len);
    if (root == NULL) {
        return;
    }

    if (!cJSON_IsObject(root)) {
        goto done;
    }

    if (kind == llm_sse_other) {
        item = cJSON_GetObjectItemCaseSensitive(root, "type");

        if (cJSON_IsString(item)) {
            kind = llm_sse_kind(item->valuestring,
                                strlen(item->valuestring));
        }
    }

    switch (kind) {

    case llm_sse_message_start:
        item = cJSON_GetObjectItemCaseSensitive(root, "message");
        item = cJSON_GetObjectItemCaseSensitive(item, "usage");

        if (cJSON_IsObject(item)) {
            memset(p->tokens, 0, sizeof(p->tokens));
            llm_sse_anthropic_usage(item, p->tokens, &p->usage);
        }

        break;

    case llm_sse_message_delta:
        item = cJSON_GetObjectItemCaseSensitive(root, "usage");

        if (cJSON_IsObject(item)) {
            llm_sse_anthropic_usage(item, p->tokens, &p->usage);
        }

        item = cJSON_GetObjectItemCaseSensitive(root, "delta");
        item = cJSON_GetObjectItemCaseSensitive(item, "stop_reason");
        llm_sse_finish_reason(item, &p->usage);
        break;

    case llm_sse_message_stop:
        p->usage.done = 1;
        break;

    case llm_sse_error:
        p->usage.error = 1;
        break;

    default:
        break;
    }

done:

    cJSON_Delete(root);
}


static void
llm_sse_openai_json(const cJSON *root, llm_usage_t *u)
{
    uint64_t      in, cached;
    const cJSON  *item, *usage;

    item = cJSON_GetObjectItemCaseSensitive(root, "error");

    if (item != NULL && !cJSON_IsNull(item)) {
        u->error = 1;
    }

    usage = cJSON_GetObjectItemCaseSensitive(root, "usage");

    if (cJSON_IsObject(usage)) {
        in = llm_sse_tokens(usage, "prompt_tokens", 0, u);

        item = cJSON_GetObjectItemCaseSensitive(usage,
                                                "prompt_tokens_details");
        cached = llm_sse_tokens(item, "cached_tokens", 0, u);

        /* a cached token is a prompt token: never bill more cached ones */

        if (cached > in) {
            cached = in;
            u->clamped = 1;
        }

        u->input_tokens = in;
        u->cached_input_tokens = cached;
        u->output_tokens = llm_sse_tokens(usage, "completion_tokens", 0, u);
        u->have_usage = 1;
    }

    item = cJSON_GetObjectItemCaseSensitive(root, "choices");

    if (!cJSON_IsArray(item)) {
        return;
    }

    item = cJSON_GetArrayItem(item, 0);
    item = cJSON_GetObjectItemCaseSensitive(item, "finish_reason");
    llm_sse_finish_reason(item, u);
}


/*
 * Anthropic counts the prompt in three parts: input_tokens are only those
 * after the last cache breakpoint.  Our input_tokens is the whole prompt,
 * as OpenAI's prompt_tokens is: input_tokens + cache_creation_input_tokens
 * + cache_read_input_tokens; cached_input_tokens is cache_read_input_tokens.
 * Each figure is cumulative, so one present replaces the one before.
 */

static void
llm_sse_anthropic_usage(const cJSON *usage, uint64_t *tokens,
    llm_usage_t *u)
{
    uint64_t  in;

    tokens[llm_sse_input] = llm_sse_tokens(usage, "input_tokens",
                                           tokens[llm_sse_input], u);
    tokens[llm_sse_cache_creation] =
        llm_sse_tokens(usage, "cache_creation_input_tokens",
                       tokens[llm_sse_cache_creation], u);
    tokens[llm_sse_cache_read] =
        llm_sse_tokens(usage, "cache_read_input_tokens",
                       tokens[llm_sse_cache_read], u);
    tokens[llm_sse_output] = llm_sse_tokens(usage, "output_tokens",
                                            tokens[llm_sse_output], u);

    in = tokens[llm_sse_input] + tokens[llm_sse_cache_creation]
         + tokens[llm_sse_cache_read];

    if (in > LLM_USAGE_TOKENS_MAX) {
        in = LLM_USAGE_TOKENS_MAX;
        u->clamped = 1;
    }

    u->input_tokens = in;
    u->cached_input_tokens = tokens[llm_sse_cache_read];
    u->output_tokens = tokens[llm_sse_output];
    u->have_usage = 1;
}


/*
 * A missing or null figure is dflt.  Anything else that is not an integer
 * in range is clamped into it, or ignored if it is not a number at all.
 */

static uint64_t
llm_sse_tokens(const cJSON *obj, const char *name, uint64_t dflt,
    llm_usage_t *u)
{
    double        d;
    uint64_t      n;
    const cJSON  *item;

    item = cJSON_GetObjectItemCaseSensitive(obj, name);

    if (item == NULL || cJSON_IsNull(item)) {
        return dflt;
    }

    if (!cJSON_IsNumber(item)) {
        u->clamped = 1;
        return dflt;
    }

    d = item->valuedouble;

    if (!(d >= 0)) {
        u->clamped = 1;
        return 0;
    }

    if (d > (double) LLM_USAGE_TOKENS_MAX) {
        u->clamped = 1;
        return LLM_USAGE_TOKENS_MAX;
    }

    n = (uint64_t) d;

    if ((double) n != d) {
        u->clamped = 1;
    }

    return n;
}


/*
 * The reason goes into the settle record and on to the database as text:
 * anything but printable ASCII, which real reasons are, becomes '?'.
 */

static void
llm_sse_finish_reason(const cJSON *item, llm_usage_t *u)
{
    size_t          i;
    unsigned char   c;
    const char     *s;

    if (!cJSON_IsString(item)) {
        return;
    }

    s = item->valuestring;

    for (i = 0; i < LLM_USAGE_FINISH_MAX - 1 && s[i] != '\0'; i++) {
        c = (unsigned char) s[i];
        u->finish_reason[i] = (c >= 0x20 && c < 0x7f) ? (char) c : '?';
    }

    u->finish_reason[i] = '\0';
}


static llm_sse_kind_e
llm_sse_kind(const char *s, size_t n)
{
    switch (n) {

    case 5:
        if (memcmp(s, "error", 5) == 0) {
            return llm_sse_error;
        }

        break;

    case 12:
        if (memcmp(s, "message_stop", 12) == 0) {
            return llm_sse_message_stop;
        }

        break;

    case 13:
        if (memcmp(s, "message_start", 13) == 0) {
            return llm_sse_message_start;
        }

        if (memcmp(s, "message_delta", 13) == 0) {
            return llm_sse_message_delta;
        }

        break;
    }

    return llm_sse_other;
}


/*
 * A cheap look for a key whose value matters: a non-null "usage" object,
 * a string "finish_reason", a non-null "error".  Inside JSON strings the
 * quotes are escaped, so text cannot look like a key; cJSON decides.
 */

static int
llm_sse_openai_wanted(const char *s, size_t n)
{
    const char  *q, *v, *end;

    if (n == 0) {
        return 0;
    }

    end = s + n;

    for (q = s; q + 1 < end; q++) {

        q = memchr(q, '"', end - q - 1);
        if (q == NULL) {
            break;
        }

        switch (q[1]) {

        case 'u':
            v = llm_sse_key(q + 1, end, "usage", 5);

            if (v != NULL && v < end && *v == '{') {
                return 1;
            }

            break;

        case 'f':
            v = llm_sse_key(q + 1, end, "finish_reason", 13);

            if (v != NULL && v < end && *v == '"') {
                return 1;
            }

            break;

        case 'e':
            v = llm_sse_key(q + 1, end, "error", 5);

            if (v != NULL && v < end && *v != 'n') {
                return 1;
            }

            break;
        }
    }

    return 0;
}


static int
llm_sse_anthropic_wanted(const char *s, size_t n)
{
    size_t       left;
    const char  *q, *v, *end;

    if (n == 0) {
        return 0;
    }

    end = s + n;

    for (q = s; q + 1 < end; q++) {

        q = memchr(q, '"', end - q - 1);
        if (q == NULL) {
            break;
        }

        if (q[1] != 't') {
            continue;
        }

        v = llm_sse_key(q + 1, end, "type", 4);

        if (v == NULL) {
            continue;
        }

        left = end - v;

        if ((left >= 9 && memcmp(v, "\"message_", 9) == 0)
            || (left >= 7 && memcmp(v, "\"error\"", 7) == 0))
        {
            return 1;
        }
    }

    return 0;
}


/*
 * If s, just after a quote, is key", a colon and a value, returns where
 * the value starts (end if it does not).
 */

static const char *
llm_sse_key(const char *s, const char *end, const char *key, size_t n)
{
    if ((size_t) (end - s) <= n || memcmp(s, key, n) != 0 || s[n] != '"') {
        return NULL;
    }

    s = llm_sse_ws(s + n + 1, end);

    if (s == end || *s != ':') {
        return NULL;
    }

    return llm_sse_ws(s + 1, end);
}


static const char *
llm_sse_ws(const char *s, const char *end)
{
    while (s < end
           && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'))
    {
        s++;
    }

    return s;
}


static int
llm_sse_is_done(const char *s, size_t n)
{
    const char  *end;

    if (n == 0) {
        return 0;
    }

    end = s + n;
    s = llm_sse_ws(s, end);

    while (end > s
           && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n'))
    {
        end--;
    }

    return end - s == 6 && memcmp(s, "[DONE]", 6) == 0;
}
