
/*
 * Usage extraction from SSE streams and JSON bodies; see llm_sse.h.
 */


#include <stdio.h>
#include <string.h>

#include <cJSON.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "llm_sse.h"


#define LLM_SSE_IGNORE            0
#define LLM_SSE_DATA              1
#define LLM_SSE_EVENT             2

#define LLM_SSE_BOM               "\xEF\xBB\xBF"

#define LLM_SSE_NOWHERE           ((size_t) -1)

#define llm_sse_max(a, b)         ((a) > (b) ? (a) : (b))
#define llm_sse_digit(c)          ((c) >= '0' && (c) <= '9')

/* the bytes llm_sse_block() classifies at once */
#define LLM_SSE_BLOCK             64


enum {
    sw_line_start = 0,
    sw_name,
    sw_space,
    sw_value
};


/* indexes into llm_sse_t.tokens */
enum {
    llm_sse_input = 0,
    llm_sse_cache_creation,
    llm_sse_cache_read,
    llm_sse_output
};


/* llm_sse_count_walk()'s place: the block at base, its bits not yet read */
typedef struct {
    size_t      base;
    uint64_t    mask;
} llm_sse_scan_t;


/*
 * The members whose string values are generated text, per API: what a
 * delta event carries, and where a whole JSON response has it.  With
 * their lengths, and a bit for each length and each first byte (its low
 * six bits) in the list: every member name of every event is looked up,
 * and these alone turn most away.  Each list is written once, as a macro
 * of its names.
 */
typedef struct {
    const char  *name;
    size_t       len;
} llm_sse_name_t;

typedef struct {
    uint64_t          lens;
    uint64_t          firsts;
    llm_sse_name_t    name[6];
} llm_sse_names_t;

#define llm_sse_len(s)       (1ULL << (sizeof(s) - 1)) |
#define llm_sse_first(s)     (1ULL << (s[0] & 63)) |
#define llm_sse_name(s)      { s, sizeof(s) - 1 },
#define llm_sse_names(list)  { list(llm_sse_len) 0, list(llm_sse_first) 0,   \
                               { list(llm_sse_name) { NULL, 0 } } }

#define LLM_SSE_OPENAI_TEXT(name)                                             \
    name("content") name("reasoning_content") name("reasoning")              \
    name("refusal") name("arguments")

/* an OpenAI event with one of these not null may carry the usage */
#define LLM_SSE_OPENAI_WANTED(name)                                           \
    name("usage") name("finish_reason") name("error")

#define LLM_SSE_ANTHROPIC_TEXT(name)                                          \
    name("text") name("thinking") name("partial_json")

#define LLM_SSE_RESPONSES_DELTA(name)                                         \
    name("delta")

#define LLM_SSE_RESPONSES_TEXT(name)                                          \
    name("text") name("arguments") name("refusal")

static const llm_sse_names_t  llm_sse_openai_text =
    llm_sse_names(LLM_SSE_OPENAI_TEXT);
static const llm_sse_names_t  llm_sse_openai_wanted =
    llm_sse_names(LLM_SSE_OPENAI_WANTED);
static const llm_sse_names_t  llm_sse_anthropic_text =
    llm_sse_names(LLM_SSE_ANTHROPIC_TEXT);
static const llm_sse_names_t  llm_sse_responses_delta =
    llm_sse_names(LLM_SSE_RESPONSES_DELTA);
static const llm_sse_names_t  llm_sse_responses_text =
    llm_sse_names(LLM_SSE_RESPONSES_TEXT);


/*
 * llm_sse_usage_from_json()'s scan: a body of the simple shape is read in
 * one pass, without a tree.  The members the usage is read from are kept
 * as cJSON nodes of a small tree of their own, the first of each name in
 * its object, as cJSON_GetObjectItemCaseSensitive() finds them, so that
 * the readers of a parsed body read it the same.  Whatever the scan does
 * not take (an escaped name, a NUL, a figure that is not a plain integer,
 * a surrogate, deep nesting) is parsed by cJSON instead.
 */

#define LLM_SSE_JSON_DEPTH        32
#define LLM_SSE_JSON_NODES        40
#define LLM_SSE_JSON_POOL         1024

/* what a string held: the scan's own reading of it is not cJSON's */
#define LLM_SSE_JSON_ESCAPE       1
#define LLM_SSE_JSON_NUL          2

/* a value's flags */
#define LLM_SSE_JSON_COUNT        1     /* text below is counted */
#define LLM_SSE_JSON_TEXT         2     /* this string is text */
#define LLM_SSE_JSON_FIGURE       4     /* this number is a token count */


/* the objects (and the one array) whose members are kept */
enum {
    llm_sse_json_none = 0,
    llm_sse_json_root,
    llm_sse_json_usage,
    llm_sse_json_details,
    llm_sse_json_choice,
    llm_sse_json_incomplete,
    llm_sse_json_choices
};


typedef struct {
    const char  *name;
    size_t       len;
    unsigned     role;              /* of its value, if an object */
    unsigned     flags;
} llm_sse_json_name_t;


typedef struct {
    const char                 *end;
    const llm_sse_names_t      *keys;       /* NULL: no text counted */
    uint64_t                    bytes;
    size_t                      nodes;
    size_t                      used;
    cJSON                       node[LLM_SSE_JSON_NODES];
    char                        pool[LLM_SSE_JSON_POOL];
} llm_sse_json_t;


#define llm_sse_json_name(s, role, flags)  { s, sizeof(s) - 1, role, flags }

/* every API's names at once: a name an API does not read is never read */

static const llm_sse_json_name_t  llm_sse_json_root_names[] = {
    llm_sse_json_name("id", llm_sse_json_none, 0),
    llm_sse_json_name("model", llm_sse_json_none, 0),
    llm_sse_json_name("error", llm_sse_json_none, 0),
    llm_sse_json_name("type", llm_sse_json_none, 0),
    llm_sse_json_name("status", llm_sse_json_none, 0),
    llm_sse_json_name("stop_reason", llm_sse_json_none, 0),
    llm_sse_json_name("usage", llm_sse_json_usage, 0),
    llm_sse_json_name("choices", llm_sse_json_choices, 0),
    llm_sse_json_name("incomplete_details", llm_sse_json_incomplete, 0),
    { NULL, 0, 0, 0 }
};

static const llm_sse_json_name_t  llm_sse_json_usage_names[] = {
    llm_sse_json_name("prompt_tokens", llm_sse_json_none,
                      LLM_SSE_JSON_FIGURE),
    llm_sse_json_name("completion_tokens", llm_sse_json_none,
                      LLM_SSE_JSON_FIGURE),
    llm_sse_json_name("input_tokens", llm_sse_json_none,
                      LLM_SSE_JSON_FIGURE),
    llm_sse_json_name("output_tokens", llm_sse_json_none,
                      LLM_SSE_JSON_FIGURE),
    llm_sse_json_name("cache_creation_input_tokens", llm_sse_json_none,
                      LLM_SSE_JSON_FIGURE),
    llm_sse_json_name("cache_read_input_tokens", llm_sse_json_none,
                      LLM_SSE_JSON_FIGURE),
    llm_sse_json_name("prompt_tokens_details", llm_sse_json_details, 0),
    llm_sse_json_name("completion_tokens_details", llm_sse_json_details, 0),
    llm_sse_json_name("input_tokens_details", llm_sse_json_details, 0),
    llm_sse_json_name("output_tokens_details", llm_sse_json_details, 0),
    { NULL, 0, 0, 0 }
};

static const llm_sse_json_name_t  llm_sse_json_details_names[] = {
    llm_sse_json_name("cached_tokens", llm_sse_json_none,
                      LLM_SSE_JSON_FIGURE),
    llm_sse_json_name("reasoning_tokens", llm_sse_json_none,
                      LLM_SSE_JSON_FIGURE),
    { NULL, 0, 0, 0 }
};

static const llm_sse_json_name_t  llm_sse_json_choice_names[] = {
    llm_sse_json_name("finish_reason", llm_sse_json_none, 0),
    { NULL, 0, 0, 0 }
};

static const llm_sse_json_name_t  llm_sse_json_incomplete_names[] = {
    llm_sse_json_name("reason", llm_sse_json_none, 0),
    { NULL, 0, 0, 0 }
};

/* by role */
static const llm_sse_json_name_t  *llm_sse_json_names[] = {
    NULL,
    llm_sse_json_root_names,
    llm_sse_json_usage_names,
    llm_sse_json_details_names,
    llm_sse_json_choice_names,
    llm_sse_json_incomplete_names,
    NULL
};


static void llm_sse_line_end(llm_sse_t *p);
static size_t llm_sse_known_field(llm_sse_t *p, const char *pos,
    const char *end);
static void llm_sse_field(llm_sse_t *p);
static void llm_sse_value(llm_sse_t *p, const char *s, size_t n);
static void llm_sse_append(llm_sse_t *p, const char *s, size_t n);
static void llm_sse_dispatch(llm_sse_t *p);
static void llm_sse_openai(llm_sse_t *p);
static void llm_sse_anthropic(llm_sse_t *p);
static void llm_sse_responses(llm_sse_t *p);
static const llm_sse_names_t *llm_sse_usage_root(llm_api_e api,
    const cJSON *root, llm_usage_t *u);
static int llm_sse_json_scan(llm_sse_json_t *js, llm_api_e api,
    const char *body, size_t len);
static const char *llm_sse_json_value(llm_sse_json_t *js, const char *p,
    unsigned depth, cJSON *node, unsigned role, unsigned flags);
static const char *llm_sse_json_object(llm_sse_json_t *js, const char *p,
    unsigned depth, cJSON *node, unsigned role, unsigned flags);
static const char *llm_sse_json_array(llm_sse_json_t *js, const char *p,
    unsigned depth, cJSON *node, unsigned role, unsigned flags);
static cJSON *llm_sse_json_member(llm_sse_json_t *js, cJSON *node,
    unsigned role, const char *name, size_t len, unsigned *crole,
    unsigned *flags);
static const char *llm_sse_json_string(const char *p, const char *end,
    uint64_t *bytes, unsigned *what);
static inline const char *llm_sse_json_stop(const char *p, const char *end);
static const char *llm_sse_json_number(const char *p, const char *end,
    uint64_t *n, unsigned *plain);
static const char *llm_sse_json_ws(const char *p, const char *end);
static void llm_sse_openai_json(const cJSON *root, llm_usage_t *u,
    unsigned *usage_only);
static void llm_sse_embeddings_json(const cJSON *root, llm_usage_t *u);
static size_t llm_sse_back_blanks(const char *s, size_t len);
static void llm_sse_responses_json(const cJSON *resp, llm_usage_t *u);
static void llm_sse_anthropic_usage(const cJSON *usage, uint64_t *tokens,
    llm_usage_t *u);
static void llm_sse_final(llm_usage_t *u, uint64_t in, uint64_t out,
    uint64_t cached, uint64_t reasoning);
static uint64_t llm_sse_tokens(const cJSON *obj, const char *name,
    uint64_t dflt, llm_usage_t *u);
static void llm_sse_finish_reason(const cJSON *item, llm_usage_t *u);
static void llm_sse_set_reason(llm_usage_t *u, const char *s);
static void llm_sse_ident(const cJSON *obj, llm_usage_t *u);
static void llm_sse_ident_set(char *field, const cJSON *item);
static int llm_sse_anthropic_wanted(const char *s, size_t n);
static int llm_sse_escaped_ascii(const char *s, size_t n);
static llm_sse_kind_e llm_sse_data_type(const char *s, size_t n);
static int llm_sse_count(llm_usage_t *u, const char *s, size_t n,
    const llm_sse_names_t *keys, const llm_sse_names_t *wanted,
    unsigned *escaped);
static int llm_sse_count_plain(llm_usage_t *u, const char *s, size_t n,
    const llm_sse_names_t *keys, const llm_sse_names_t *wanted);
static int llm_sse_count_walk(llm_usage_t *u, const char *s, size_t n,
    const llm_sse_names_t *keys, const llm_sse_names_t *wanted);
static inline unsigned llm_sse_member(const char *s, size_t n, size_t open,
    size_t len, const llm_sse_names_t *keys, const llm_sse_names_t *wanted,
    unsigned *found);
static inline size_t llm_sse_hit(llm_sse_scan_t *sc, const char *s,
    size_t n);
static inline void llm_sse_skip(llm_sse_scan_t *sc, const char *s, size_t n,
    size_t i);
static uint64_t llm_sse_block(const char *s, size_t n, size_t base, char c,
    char d);
static inline uint64_t llm_sse_classify(const char *p, char c, char d);
#if defined(__SSE2__)
static inline uint64_t llm_sse_classify16(const char *p, __m128i vc,
    __m128i vd);
#endif
static void llm_sse_count_json(llm_usage_t *u, const cJSON *item,
    const llm_sse_names_t *keys, uint64_t *bytes);
static inline int llm_sse_is_key(const llm_sse_names_t *keys, const char *s,
    size_t n);
static const char *llm_sse_string(const char *s, const char *end,
    uint64_t *bytes);
static unsigned llm_sse_utf8_len(const char *hex);
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


size_t
llm_sse_feed(llm_sse_t *p, const char *data, size_t len)
{
    char         ch;
    size_t       n;
    const char  *pos, *end, *q, *cr;

    p->dispatched = 0;
    p->usage_only = 0;

    if (len == 0) {
        return 0;
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

            if (p->yield && p->dispatched) {
                /* the LF of a CRLF belongs to the event it ends */
                if (p->last_cr && pos < end && *pos == '\n') {
                    p->last_cr = 0;
                    pos++;
                }

                break;
            }

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

            if ((ch == 'd' || ch == 'e')
                && (n = llm_sse_known_field(p, pos, end)) != 0)
            {
                pos += n;
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

            /* the line's end: a data line is most of an event's bytes */
            q = memchr(pos + 1, '\n', end - pos - 1);

            if (q == NULL) {
                q = end;
            }

            cr = memchr(pos + 1, '\r', q - pos - 1);

            if (cr != NULL) {
                q = cr;
            }

            llm_sse_value(p, pos, q - pos);
            pos = q;
            break;
        }
    }

    return pos - data;
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


int
llm_sse_pending(const llm_sse_t *p)
{
    if (p->state != sw_line_start) {
        return 1;
    }

    return p->in_event ? 2 : 0;
}


int
llm_sse_filter(llm_sse_t *p, const char *data, size_t len,
    llm_sse_out_pt out, void *ctx)
{
    size_t    off, used, start, ev;
    unsigned  cut;

    if (len == 0) {
        return 0;
    }

    if (!p->strip) {
        p->yield = 0;
        (void) llm_sse_feed(p, data, len);

        return out(ctx, data, len);
    }

    p->yield = 1;

    /* given out or dropped: the bytes before start */
    start = 0;
    off = 0;

    /* the LF of a CRLF split by the buffers belongs to what came before */
    if (p->last_cr && data[0] == '\n') {
        (void) llm_sse_feed(p, data, 1);
        off = 1;

        if (p->holding && p->hold_len < p->hold_cap) {
            p->hold[p->hold_len++] = '\n';
            start = 1;

        } else if (p->holding) {
            if (out(ctx, p->hold, p->hold_len) != 0) {
                return -1;
            }

            p->hold_len = 0;
            p->holding = 0;

        } else if (p->drop_lf) {
            start = 1;
        }
    }

    p->drop_lf = 0;

    /* where the current event began in data; nowhere if it did before */
    ev = (llm_sse_pending(p) == 0 && !p->holding) ? off : LLM_SSE_NOWHERE;

    while (off < len) {
        used = llm_sse_feed(p, data + off, len - off);

        if (p->holding) {

            if (used <= p->hold_cap - p->hold_len) {
                memcpy(p->hold + p->hold_len, data + off, used);
                p->hold_len += used;
                start = off + used;

            } else {
                /* too long for a usage chunk: it goes as it is */
                if (out(ctx, p->hold, p->hold_len) != 0) {
                    return -1;
                }

                p->hold_len = 0;
                p->holding = 0;
                start = off;
            }
        }

        off += used;

        if (!p->dispatched) {
            continue;
        }

        if (p->usage_only) {
            cut = 0;

            if (p->holding) {
                p->hold_len = 0;
                p->holding = 0;
                cut = 1;

            } else if (ev != LLM_SSE_NOWHERE) {
                if (ev > start && out(ctx, data + start, ev - start) != 0) {
                    return -1;
                }

                start = off;
                cut = 1;
            }

            p->stripped |= cut;

            /* a CR at the very end: its LF may open the next buffer */
            p->drop_lf = (cut && p->last_cr && off == len);

        } else if (p->holding) {

            if (out(ctx, p->hold, p->hold_len) != 0) {
                return -1;
            }

            p->hold_len = 0;
            p->holding = 0;
        }

        ev = off;
    }

    /*
     * Once the choices have finished, the unfinished event at the end may
     * be the usage chunk: it waits in hold for the rest of it.
     */

    if (!p->holding && ev != LLM_SSE_NOWHERE && ev < len
        && p->usage.finish_reason[0] != '\0' && len - ev <= p->hold_cap
        && llm_sse_pending(p))
    {
        if (ev > start && out(ctx, data + start, ev - start) != 0) {
            return -1;
        }

        memcpy(p->hold, data + ev, len - ev);
        p->hold_len = len - ev;
        p->holding = 1;
        start = len;
    }

    return (start < len) ? out(ctx, data + start, len - start) : 0;
}


int
llm_sse_filter_end(llm_sse_t *p, llm_sse_out_pt out, void *ctx,
    const char **closing)
{
    *closing = llm_sse_closing(p);

    p->usage_only = 0;
    llm_sse_finish(p);

    if (!p->holding) {
        return 0;
    }

    p->holding = 0;

    if (p->usage_only) {
        /* the usage chunk, cut short of its blank line: still ours */
        p->stripped = 1;
        *closing = "";
        return 0;
    }

    return out(ctx, p->hold, p->hold_len);
}


const char *
llm_sse_closing(const llm_sse_t *p)
{
    switch (llm_sse_pending(p)) {

    case 1:
        return "\n\n";

    case 2:
        /* after a CR an LF alone would only complete its line end */
        return p->last_cr ? "\n\n" : "\n";

    default:
        return "";
    }
}


size_t
llm_sse_error_event(llm_api_e api, const char *message, char *buf,
    size_t cap)
{
    int  n;

    switch (api) {

    case LLM_API_ANTHROPIC:
        n = snprintf(buf, cap, "event: error\n"
                     "data: {\"type\":\"error\",\"error\":"
                     "{\"type\":\"api_error\",\"message\":\"%s\"}}\n\n",
                     message);
        break;

    case LLM_API_RESPONSES:
        /* the "error" member makes the SDKs raise it, as for Chat */
        n = snprintf(buf, cap, "event: error\n"
                     "data: {\"type\":\"error\",\"code\":\"upstream_error\","
                     "\"message\":\"%s\",\"param\":null,"
                     "\"error\":{\"message\":\"%s\",\"type\":\"server_error\","
                     "\"param\":null,\"code\":\"upstream_error\"}}\n\n",
                     message, message);
        break;

    default:
        n = snprintf(buf, cap, "data: {\"error\":{\"message\":\"%s\","
                     "\"type\":\"server_error\",\"param\":null,"
                     "\"code\":\"upstream_error\"}}\n\n", message);
        break;
    }

    return (n > 0 && (size_t) n < cap) ? (size_t) n : 0;
}


/*
 * A body that parses as a JSON object is whole, so it sets done: the
 * caller flags the others as partial.
 */

int
llm_sse_usage_from_json(llm_api_e api, const char *body, size_t len,
    llm_usage_t *u)
{
    uint64_t                bytes;
    cJSON                  *root;
    llm_sse_json_t          js;
    const llm_sse_names_t  *keys;

    memset(u, 0, sizeof(llm_usage_t));

    if (len == 0) {
        return 0;
    }

    bytes = 0;

    if (llm_sse_json_scan(&js, api, body, len) == 0) {
        keys = llm_sse_usage_root(api, &js.node[0], u);
        bytes = keys ? js.bytes : 0;

    } else {
        root = cJSON_ParseWithLength(body, len);
        if (root == NULL) {
            return 0;
        }

        if (cJSON_IsObject(root)) {
            keys = llm_sse_usage_root(api, root, u);

            if (keys) {
                llm_sse_count_json(u, root, keys, &bytes);
            }
        }

        cJSON_Delete(root);
    }

    /* the whole text, as one delta, for when the usage is missing */

    if (bytes) {
        u->delta_events = 1;
        u->delta_bytes = bytes;
    }

    return u->have_usage;
}


/*
 * What a whole object tells, parsed or scanned.  Returns the names of its
 * text, NULL if it has none to count.
 */

static const llm_sse_names_t *
llm_sse_usage_root(llm_api_e api, const cJSON *root, llm_usage_t *u)
{
    uint64_t      tokens[4];
    unsigned      usage_only;
    const cJSON  *item;

    u->done = 1;

    switch (api) {

    case LLM_API_OPENAI:
        llm_sse_openai_json(root, u, &usage_only);
        return &llm_sse_openai_text;

    case LLM_API_RESPONSES:
        llm_sse_responses_json(root, u);
        return &llm_sse_responses_text;

    case LLM_API_EMBEDDINGS:
        llm_sse_embeddings_json(root, u);

        /* no text: the vectors are not billed as output */
        return NULL;

    case LLM_API_ANTHROPIC:
        llm_sse_ident(root, u);

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
            u->have_input = 1;
            u->have_usage = 1;
        }

        item = cJSON_GetObjectItemCaseSensitive(root, "stop_reason");
        llm_sse_finish_reason(item, u);

        return &llm_sse_anthropic_text;

    default:
        return NULL;
    }
}


/*
 * Returns 0 if the body was read, its members kept in js->node (the root
 * first) and its text in js->bytes; -1 if cJSON must read it.  Only what
 * cJSON would take is taken: after the object whatever follows, as
 * cJSON_ParseWithLength() leaves it; bytes up to ' ' are blanks, as there.
 */

static int
llm_sse_json_scan(llm_sse_json_t *js, llm_api_e api, const char *body,
    size_t len)
{
    const char  *p;

    js->end = body + len;
    js->bytes = 0;
    js->nodes = 1;
    js->used = 0;

    js->keys = (api == LLM_API_OPENAI) ? &llm_sse_openai_text
               : (api == LLM_API_RESPONSES) ? &llm_sse_responses_text
               : (api == LLM_API_ANTHROPIC) ? &llm_sse_anthropic_text
               : NULL;

    /* a BOM, or anything but an object, goes to cJSON */
    p = llm_sse_json_ws(body, js->end);

    if (p == js->end || *p != '{') {
        return -1;
    }

    memset(&js->node[0], 0, sizeof(cJSON));

    p = llm_sse_json_object(js, p, 1, &js->node[0], llm_sse_json_root,
                            js->keys ? LLM_SSE_JSON_COUNT : 0);

    return p ? 0 : -1;
}


/*
 * p: the value's first byte, before js->end.  node (if the value is kept):
 * where it is written, as cJSON would have it; role: what its members
 * are, if it is an object (or the choices).  Returns what follows it,
 * NULL to leave the body to cJSON.
 */

static const char *
llm_sse_json_value(llm_sse_json_t *js, const char *p, unsigned depth,
    cJSON *node, unsigned role, unsigned flags)
{
    size_t       n;
    uint64_t     bytes;
    unsigned     what, plain;
    const char  *q;

    switch (*p) {

    case '"':
        q = llm_sse_json_string(p + 1, js->end, &bytes, &what);
        if (q == NULL) {
            return NULL;
        }

        /* cJSON's text ends at a NUL */
        if (flags & LLM_SSE_JSON_TEXT) {
            if (what & LLM_SSE_JSON_NUL) {
                return NULL;
            }

            js->bytes += bytes;
        }

        if (node == NULL) {
            return q + 1;
        }

        /* kept as sent: one with escapes is decoded by cJSON */
        n = q - (p + 1);

        if (what || n >= LLM_SSE_JSON_POOL - js->used) {
            return NULL;
        }

        node->type = cJSON_String;
        node->valuestring = js->pool + js->used;
        memcpy(node->valuestring, p + 1, n);
        node->valuestring[n] = '\0';
        js->used += n + 1;

        return q + 1;

    case '{':
        return llm_sse_json_object(js, p, depth + 1, node,
                                   (role == llm_sse_json_choices)
                                   ? llm_sse_json_none : role,
                                   flags & LLM_SSE_JSON_COUNT);

    case '[':
        return llm_sse_json_array(js, p, depth + 1, node,
                                  (role == llm_sse_json_choices)
                                  ? role : llm_sse_json_none,
                                  flags & LLM_SSE_JSON_COUNT);

    case 'n':
        n = 4;
        what = cJSON_NULL;
        q = "null";
        break;

    case 't':
        n = 4;
        what = cJSON_True;
        q = "true";
        break;

    case 'f':
        n = 5;
        what = cJSON_False;
        q = "false";
        break;

    default:
        q = llm_sse_json_number(p, js->end, &bytes, &plain);
        if (q == NULL) {
            return NULL;
        }

        /* a figure is read by the scan only if it is exact as a double */
        if (node) {
            if ((flags & LLM_SSE_JSON_FIGURE) && !plain) {
                return NULL;
            }

            node->type = cJSON_Number;
            node->valuedouble = plain ? (double) bytes : 0;
        }

        return q;
    }

    if ((size_t) (js->end - p) < n || memcmp(p, q, n) != 0) {
        return NULL;
    }

    if (node) {
        node->type = what;
    }

    return p + n;
}


static const char *
llm_sse_json_object(llm_sse_json_t *js, const char *p, unsigned depth,
    cJSON *node, unsigned role, unsigned flags)
{
    size_t       len;
    uint64_t     bytes;
    unsigned     what, crole, cflags;
    cJSON       *child;
    const char  *end, *name;

    if (depth > LLM_SSE_JSON_DEPTH) {
        return NULL;
    }

    if (node) {
        node->type = cJSON_Object;
    }

    end = js->end;
    p = llm_sse_json_ws(p + 1, end);

    if (p < end && *p == '}') {
        return p + 1;
    }

    for ( ;; ) {
        if (p == end || *p != '"') {
            return NULL;
        }

        name = p + 1;
        p = llm_sse_json_string(name, end, &bytes, &what);

        /* a name as sent is the name cJSON reads only without these */
        if (p == NULL || what) {
            return NULL;
        }

        len = p - name;

        p = llm_sse_json_ws(p + 1, end);

        if (p == end || *p != ':') {
            return NULL;
        }

        p = llm_sse_json_ws(p + 1, end);

        if (p == end) {
            return NULL;
        }

        crole = llm_sse_json_none;
        cflags = flags;
        child = NULL;

        if (role != llm_sse_json_none) {
            child = llm_sse_json_member(js, node, role, name, len, &crole,
                                        &cflags);
            if (child == node) {
                return NULL;
            }
        }

        /* as llm_sse_count_json(): no text under a usage */
        if (flags & LLM_SSE_JSON_COUNT) {
            if (len == 5 && memcmp(name, "usage", 5) == 0) {
                cflags &= ~LLM_SSE_JSON_COUNT;

            } else if (*p == '"' && llm_sse_is_key(js->keys, name, len)) {
                cflags |= LLM_SSE_JSON_TEXT;
            }
        }

        p = llm_sse_json_value(js, p, depth, child, crole, cflags);

        if (p == NULL) {
            return NULL;
        }

        p = llm_sse_json_ws(p, end);

        if (p == end) {
            return NULL;
        }

        if (*p == '}') {
            return p + 1;
        }

        if (*p != ',') {
            return NULL;
        }

        p = llm_sse_json_ws(p + 1, end);
    }
}


static const char *
llm_sse_json_array(llm_sse_json_t *js, const char *p, unsigned depth,
    cJSON *node, unsigned role, unsigned flags)
{
    cJSON       *child;
    unsigned     first;
    const char  *end;

    if (depth > LLM_SSE_JSON_DEPTH) {
        return NULL;
    }

    if (node) {
        node->type = cJSON_Array;
    }

    end = js->end;
    p = llm_sse_json_ws(p + 1, end);

    if (p < end && *p == ']') {
        return p + 1;
    }

    for (first = 1; /* void */; first = 0) {
        if (p == end) {
            return NULL;
        }

        child = NULL;

        /* only the first choice is read, and only if it is an object */
        if (first && role == llm_sse_json_choices && *p == '{') {
            if (js->nodes == LLM_SSE_JSON_NODES) {
                return NULL;
            }

            child = &js->node[js->nodes++];
            memset(child, 0, sizeof(cJSON));
            node->child = child;
        }

        /* an element has no name: a string in a list is no text */
        p = llm_sse_json_value(js, p, depth, child,
                               child ? llm_sse_json_choice
                                     : llm_sse_json_none,
                               flags & LLM_SSE_JSON_COUNT);

        if (p == NULL) {
            return NULL;
        }

        p = llm_sse_json_ws(p, end);

        if (p == end) {
            return NULL;
        }

        if (*p == ']') {
            return p + 1;
        }

        if (*p != ',') {
            return NULL;
        }

        p = llm_sse_json_ws(p + 1, end);
    }
}


/*
 * The node a member of a kept object is written to, if its name is one
 * read there and the first of it (cJSON's lookup finds the first); NULL
 * if not kept; node itself if the nodes ran out.
 */

static cJSON *
llm_sse_json_member(llm_sse_json_t *js, cJSON *node, unsigned role,
    const char *name, size_t len, unsigned *crole, unsigned *flags)
{
    cJSON                      *c, **last;
    const llm_sse_json_name_t  *k;

    for (k = llm_sse_json_names[role]; k->name; k++) {
        if (k->len == len && memcmp(k->name, name, len) == 0) {
            break;
        }
    }

    if (k->name == NULL) {
        return NULL;
    }

    for (last = &node->child; *last; last = &(*last)->next) {
        if ((*last)->string == k->name) {
            return NULL;
        }
    }

    if (js->nodes == LLM_SSE_JSON_NODES) {
        return node;
    }

    c = &js->node[js->nodes++];
    memset(c, 0, sizeof(cJSON));
    c->string = (char *) k->name;
    *last = c;

    *crole = k->role;
    *flags |= k->flags;

    return c;
}


/*
 * p: just after an opening quote.  Returns the closing quote, NULL if
 * cJSON would refuse the string or decode it otherwise than read here (a
 * surrogate, a \u that is not hex).  *bytes: its length as decoded;
 * *what: whether it had an escape, a NUL.
 */

static const char *
llm_sse_json_string(const char *p, const char *end, uint64_t *bytes,
    unsigned *what)
{
    unsigned     cp, i, c;
    uint64_t     n;
    const char  *q;

    n = 0;
    *what = 0;

    for ( ;; ) {
        q = llm_sse_json_stop(p, end);
        n += q - p;

        if (q == end) {
            return NULL;
        }

        if (*q == '"') {
            break;
        }

        if (*q == '\0') {
            *what |= LLM_SSE_JSON_NUL;
            n++;
            p = q + 1;
            continue;
        }

        if (end - q < 2) {
            return NULL;
        }

        *what |= LLM_SSE_JSON_ESCAPE;

        switch (q[1]) {

        case '"': case '\\': case '/': case 'b': case 'f': case 'n':
        case 'r': case 't':
            n++;
            p = q + 2;
            continue;

        case 'u':
            break;

        default:
            return NULL;
        }

        if (end - q < 6) {
            return NULL;
        }

        cp = 0;

        for (i = 2; i < 6; i++) {
            c = (unsigned char) q[i];
            c = (c >= '0' && c <= '9') ? c - '0'
                : ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
                  ? (c | 0x20) - 'a' + 10 : 16;

            if (c == 16) {
                return NULL;
            }

            cp = cp * 16 + c;
        }

        if (cp >= 0xd800 && cp < 0xe000) {
            return NULL;
        }

        if (cp == 0) {
            *what |= LLM_SSE_JSON_NUL;
        }

        n += (cp < 0x80) ? 1 : (cp < 0x800) ? 2 : 3;
        p = q + 6;
    }

    *bytes = n;

    return q;
}


/* the next quote, backslash or NUL in [p, end), or end */

static inline const char *
llm_sse_json_stop(const char *p, const char *end)
{
#if defined(__SSE2__)
    unsigned  m;
    __m128i   v, vq, vb, vz;

    vq = _mm_set1_epi8('"');
    vb = _mm_set1_epi8('\\');
    vz = _mm_setzero_si128();

    while (end - p >= 16) {
        v = _mm_loadu_si128((const __m128i *) p);
        m = (unsigned) _mm_movemask_epi8(
                _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, vq),
                                          _mm_cmpeq_epi8(v, vb)),
                             _mm_cmpeq_epi8(v, vz)));

        if (m) {
            return p + __builtin_ctz(m);
        }

        p += 16;
    }
#endif

    while (p < end && *p != '"' && *p != '\\' && *p != '\0') {
        p++;
    }

    return p;
}


/*
 * A number as JSON writes it, and then no byte cJSON would take into it:
 * cJSON gives strtod() the run of such bytes (63 at most), and a number
 * is valid only if strtod() reads the whole run.  *plain: an integer of
 * up to 15 digits, *n its value, exact as a double.
 */

static const char *
llm_sse_json_number(const char *p, const char *end, uint64_t *n,
    unsigned *plain)
{
    uint64_t     v;
    const char  *s;

    s = p;
    v = 0;

    if (*p == '-') {
        p++;
    }

    if (p == end || !llm_sse_digit(*p)) {
        return NULL;
    }

    if (*p == '0') {
        p++;

    } else {
        while (p < end && llm_sse_digit(*p)) {
            /* no overflow: 20 digits are beyond what *plain takes */
            v = (p - s < 19) ? v * 10 + (*p - '0') : v;
            p++;
        }
    }

    *plain = (*s != '-' && p - s <= 15);
    *n = v;

    if (p < end && *p == '.') {
        p++;

        if (p == end || !llm_sse_digit(*p)) {
            return NULL;
        }

        while (p < end && llm_sse_digit(*p)) {
            p++;
        }

        *plain = 0;
    }

    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;

        if (p < end && (*p == '+' || *p == '-')) {
            p++;
        }

        if (p == end || !llm_sse_digit(*p)) {
            return NULL;
        }

        while (p < end && llm_sse_digit(*p)) {
            p++;
        }

        *plain = 0;
    }

    if (p - s >= 64
        || (p < end && (llm_sse_digit(*p) || *p == '.' || *p == '+'
                        || *p == '-' || *p == 'e' || *p == 'E')))
    {
        return NULL;
    }

    return p;
}


/* cJSON's blanks: every byte up to ' ' */

static const char *
llm_sse_json_ws(const char *p, const char *end)
{
    while (p < end && (unsigned char) *p <= ' ') {
        p++;
    }

    return p;
}


int
llm_sse_usage_from_tail(llm_api_e api, const char *tail, size_t len,
    llm_usage_t *u)
{
    size_t        end, open, depth;
    cJSON        *usage;
    const cJSON  *item;

    memset(u, 0, sizeof(llm_usage_t));

    if (api != LLM_API_EMBEDDINGS) {
        return 0;
    }

    /* ..."usage" : { ... } } and blanks: from the end, backwards */

    end = llm_sse_back_blanks(tail, len);

    if (end == 0 || tail[end - 1] != '}') {
        return 0;
    }

    end = llm_sse_back_blanks(tail, end - 1);

    if (end == 0 || tail[end - 1] != '}') {
        return 0;
    }

    depth = 0;

    for (open = end; open > 0; open--) {
        if (tail[open - 1] == '}') {
            depth++;

        } else if (tail[open - 1] == '{' && --depth == 0) {
            break;
        }
    }

    if (open == 0) {
        return 0;
    }

    open--;

    len = llm_sse_back_blanks(tail, open);

    if (len == 0 || tail[len - 1] != ':') {
        return 0;
    }

    len = llm_sse_back_blanks(tail, len - 1);

    if (len < sizeof("{\"usage\"") - 1
        || memcmp(tail + len - (sizeof("\"usage\"") - 1), "\"usage\"",
                  sizeof("\"usage\"") - 1)
           != 0)
    {
        return 0;
    }

    /* a member of the list: after its comma */
    len = llm_sse_back_blanks(tail, len - (sizeof("\"usage\"") - 1));

    if (len == 0 || tail[len - 1] != ',') {
        return 0;
    }

    usage = cJSON_ParseWithLength(tail + open, end - open);
    if (usage == NULL) {
        return 0;
    }

    item = cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens");

    if (cJSON_IsObject(usage) && item != NULL && !cJSON_IsNull(item)) {
        llm_sse_final(u, llm_sse_tokens(usage, "prompt_tokens", 0, u), 0, 0,
                      0);
        u->done = 1;
    }

    cJSON_Delete(usage);

    return u->have_usage;
}


/* the length of s without the blanks at its end */

static size_t
llm_sse_back_blanks(const char *s, size_t len)
{
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'
                   || s[len - 1] == '\r' || s[len - 1] == '\n'))
    {
        len--;
    }

    return len;
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

        /* fall through */

    default:
        p->in_event = 1;
        break;
    }

    p->state = sw_line_start;
    p->started = 1;
}


/*
 * Most lines are data or event: such a name, when the buffer holds it
 * whole, is taken at once, not byte by byte, with its colon and the space
 * after it.  Returns the bytes taken, 0 for another name.
 */

static size_t
llm_sse_known_field(llm_sse_t *p, const char *pos, const char *end)
{
    size_t  n;

    if (end - pos >= 5 && memcmp(pos, "data:", 5) == 0) {
        n = 4;

    } else if (end - pos >= 6 && memcmp(pos, "event:", 6) == 0) {
        n = 5;

    } else {
        return 0;
    }

    memcpy(p->field_name, pos, n);
    p->field_len = n;
    llm_sse_field(p);

    if (pos + n + 1 < end && pos[n + 1] == ' ') {
        p->state = sw_value;
        return n + 2;
    }

    p->state = sw_space;

    return n + 1;
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
    char    *b;
    size_t   size;

    if (p->skip_event || n == 0) {
        return;
    }

    if (n > p->cap - p->len) {

        /* a Responses' last event repeats all the output: it may grow */
        if (p->grow == NULL || p->cap == 0 || p->max < p->len
            || n > p->max - p->len)
        {
            p->skip_event = 1;
            p->usage.truncated = 1;
            return;
        }

        for (size = p->cap * 2; size < p->len + n; size *= 2) {
            /* void */
        }

        size = (size > p->max) ? p->max : size;

        b = p->grow(p->grow_ctx, p->buf, p->len, size);
        if (b == NULL) {
            p->skip_event = 1;
            p->usage.truncated = 1;
            return;
        }

        p->buf = b;
        p->cap = size;
    }

    memcpy(p->buf + p->len, s, n);
    p->len += n;
}


static void
llm_sse_dispatch(llm_sse_t *p)
{
    if (p->have_data && !p->skip_event) {

        switch (p->api) {

        case LLM_API_OPENAI:
            llm_sse_openai(p);
            break;

        case LLM_API_ANTHROPIC:
            llm_sse_anthropic(p);
            break;

        case LLM_API_RESPONSES:
            llm_sse_responses(p);
            break;

        default:
            break;
        }
    }

    if (p->have_data && p->on_event) {
        p->on_event(p->event_ctx, p->event,
                    (p->event_len <= sizeof(p->event)) ? p->event_len : 0,
                    p->buf ? p->buf : "", p->len, p->skip_event);
    }

    p->len = 0;
    p->event_len = 0;
    p->have_data = 0;
    p->skip_event = 0;
    p->in_event = 0;
    p->dispatched = 1;
}


static void
llm_sse_openai(llm_sse_t *p)
{
    cJSON     *root;
    uint64_t   events;
    unsigned   usage_only, escaped;

    if (llm_sse_kind(p->event, p->event_len) == llm_sse_error) {
        p->usage.error = 1;
    }

    if (llm_sse_is_done(p->buf, p->len)) {
        p->usage.done = 1;
        return;
    }

    events = p->usage.delta_events;

    /* most events are content deltas: they are not worth a parse */

    if (!llm_sse_count(&p->usage, p->buf, p->len, &llm_sse_openai_text,
                       &llm_sse_openai_wanted, &escaped)
        && !(escaped && llm_sse_escaped_ascii(p->buf, p->len)))
    {
        return;
    }

    root = cJSON_ParseWithLength(p->buf, p->len);
    if (root == NULL) {
        return;
    }

    if (cJSON_IsObject(root)) {
        usage_only = 0;
        llm_sse_openai_json(root, &p->usage, &usage_only);

        /* text for the client is never cut, whatever else is there */
        p->usage_only = usage_only && p->usage.delta_events == events;
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
            llm_sse_count(&p->usage, p->buf, p->len, &llm_sse_anthropic_text,
                          NULL, NULL);
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

        if (cJSON_IsObject(item)) {
            llm_sse_ident(item, &p->usage);
        }

        item = cJSON_GetObjectItemCaseSensitive(item, "usage");

        if (cJSON_IsObject(item)) {
            llm_sse_anthropic_usage(item, p->tokens, &p->usage);
            p->usage.have_input = 1;
        }

        break;

    case llm_sse_message_delta:
        item = cJSON_GetObjectItemCaseSensitive(root, "usage");

        if (cJSON_IsObject(item)) {
            llm_sse_anthropic_usage(item, p->tokens, &p->usage);

            if (p->usage.have_usage) {
                p->usage.repeated = 1;
            }

            p->usage.have_usage = 1;
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
        /* its "type" says message_ but is not one of ours */
        llm_sse_count(&p->usage, p->buf, p->len, &llm_sse_anthropic_text,
                      NULL, NULL);
        break;
    }

done:

    cJSON_Delete(root);
}


/*
 * Responses: every event names its type, in the event: line and in the
 * data; only the last one (response.completed, .incomplete or .failed)
 * carries the usage, and there is no [DONE].
 */

static void
llm_sse_responses(llm_sse_t *p)
{
    cJSON           *root;
    llm_sse_kind_e   kind;

    kind = llm_sse_kind(p->event, p->event_len);

    if (kind == llm_sse_other) {
        kind = llm_sse_data_type(p->buf, p->len);
    }

    switch (kind) {

    case llm_sse_response_end:
        break;

    case llm_sse_error:
        p->usage.error = 1;
        return;

    default:
        llm_sse_count(&p->usage, p->buf, p->len, &llm_sse_responses_delta,
                      NULL, NULL);
        return;
    }

    root = cJSON_ParseWithLength(p->buf, p->len);
    if (root == NULL) {
        return;
    }

    if (cJSON_IsObject(root)) {
        llm_sse_responses_json(cJSON_GetObjectItemCaseSensitive(root,
                                                                "response"),
                               &p->usage);
        p->usage.done = 1;
    }

    cJSON_Delete(root);
}


static void
llm_sse_openai_json(const cJSON *root, llm_usage_t *u, unsigned *usage_only)
{
    unsigned      error;
    uint64_t      in, out, cached, reasoning;
    const cJSON  *item, *usage, *choices;

    llm_sse_ident(root, u);

    item = cJSON_GetObjectItemCaseSensitive(root, "error");
    error = (item != NULL && !cJSON_IsNull(item));

    if (error) {
        u->error = 1;
    }

    choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
    usage = cJSON_GetObjectItemCaseSensitive(root, "usage");

    if (cJSON_IsObject(usage)) {
        in = llm_sse_tokens(usage, "prompt_tokens", 0, u);
        out = llm_sse_tokens(usage, "completion_tokens", 0, u);

        item = cJSON_GetObjectItemCaseSensitive(usage,
                                                "prompt_tokens_details");
        cached = llm_sse_tokens(item, "cached_tokens", 0, u);

        item = cJSON_GetObjectItemCaseSensitive(usage,
                                                "completion_tokens_details");
        reasoning = llm_sse_tokens(item, "reasoning_tokens", 0, u);

        llm_sse_final(u, in, out, cached, reasoning);

        /* the chunk the gateway may cut: usage, and nothing else */
        *usage_only = !error
                      && (choices == NULL || cJSON_GetArraySize(choices) == 0);
    }

    if (!cJSON_IsArray(choices)) {
        return;
    }

    item = cJSON_GetArrayItem(choices, 0);
    item = cJSON_GetObjectItemCaseSensitive(item, "finish_reason");
    llm_sse_finish_reason(item, u);
}


/*
 * An embeddings list: the prompt is all it bills.  A usage without
 * prompt_tokens is no usage: the estimate stands for it, flagged.
 */

static void
llm_sse_embeddings_json(const cJSON *root, llm_usage_t *u)
{
    uint64_t      in;
    const cJSON  *item, *usage;

    /* a list has a model but no id */
    llm_sse_ident(root, u);

    item = cJSON_GetObjectItemCaseSensitive(root, "error");

    if (item != NULL && !cJSON_IsNull(item)) {
        u->error = 1;
    }

    usage = cJSON_GetObjectItemCaseSensitive(root, "usage");
    item = cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens");

    if (!cJSON_IsObject(usage) || item == NULL || cJSON_IsNull(item)) {
        return;
    }

    in = llm_sse_tokens(usage, "prompt_tokens", 0, u);

    llm_sse_final(u, in, 0, 0, 0);
}


/*
 * A Responses object: its usage, and as the finish reason its status
 * (completed, failed, cancelled) or, when incomplete, why.
 */

static void
llm_sse_responses_json(const cJSON *resp, llm_usage_t *u)
{
    uint64_t      in, out, cached, reasoning;
    const cJSON  *item, *usage;

    if (!cJSON_IsObject(resp)) {
        return;
    }

    llm_sse_ident(resp, u);

    item = cJSON_GetObjectItemCaseSensitive(resp, "error");

    if (item != NULL && !cJSON_IsNull(item)) {
        u->error = 1;
    }

    usage = cJSON_GetObjectItemCaseSensitive(resp, "usage");

    if (cJSON_IsObject(usage)) {
        in = llm_sse_tokens(usage, "input_tokens", 0, u);
        out = llm_sse_tokens(usage, "output_tokens", 0, u);

        item = cJSON_GetObjectItemCaseSensitive(usage, "input_tokens_details");
        cached = llm_sse_tokens(item, "cached_tokens", 0, u);

        item = cJSON_GetObjectItemCaseSensitive(usage,
                                                "output_tokens_details");
        reasoning = llm_sse_tokens(item, "reasoning_tokens", 0, u);

        llm_sse_final(u, in, out, cached, reasoning);
    }

    item = cJSON_GetObjectItemCaseSensitive(resp, "status");

    if (cJSON_IsString(item) && strcmp(item->valuestring, "incomplete") == 0)
    {
        item = cJSON_GetObjectItemCaseSensitive(resp, "incomplete_details");
        item = cJSON_GetObjectItemCaseSensitive(item, "reason");

        if (!cJSON_IsString(item)) {
            llm_sse_set_reason(u, "incomplete");
            return;
        }
    }

    llm_sse_finish_reason(item, u);
}


/*
 * Anthropic counts the prompt in three parts: input_tokens are only those
 * after the last cache breakpoint.  Our input_tokens is the whole prompt,
 * as OpenAI's prompt_tokens is: input_tokens + cache_creation_input_tokens
 * + cache_read_input_tokens; cached_input_tokens is cache_read_input_tokens
 * and cache_write_tokens cache_creation_input_tokens.  Each figure is
 * cumulative, so the largest seen counts.
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

    u->input_tokens = llm_sse_max(u->input_tokens, in);
    u->cached_input_tokens = llm_sse_max(u->cached_input_tokens,
                                         tokens[llm_sse_cache_read]);
    u->cache_write_tokens = llm_sse_max(u->cache_write_tokens,
                                        tokens[llm_sse_cache_creation]);
    u->output_tokens = llm_sse_max(u->output_tokens, tokens[llm_sse_output]);

    /* parts of the prompt are never more than the prompt */
    u->cached_input_tokens = (u->cached_input_tokens > u->input_tokens)
                             ? u->input_tokens : u->cached_input_tokens;
    u->cache_write_tokens = (u->cache_write_tokens > u->input_tokens)
                            ? u->input_tokens : u->cache_write_tokens;
}


/*
 * The final usage of an OpenAI response.  Sent twice, it is flagged, and
 * each figure is the larger of the two: a repeated report never lowers
 * the bill, nor can it refund what was produced.
 */

static void
llm_sse_final(llm_usage_t *u, uint64_t in, uint64_t out, uint64_t cached,
    uint64_t reasoning)
{
    /* a cached token is a prompt token, a reasoning one an output one */

    if (cached > in) {
        cached = in;
        u->clamped = 1;
    }

    if (reasoning > out) {
        reasoning = out;
        u->clamped = 1;
    }

    if (u->have_usage) {
        u->repeated = 1;

        in = llm_sse_max(in, u->input_tokens);
        out = llm_sse_max(out, u->output_tokens);
        cached = llm_sse_max(cached, u->cached_input_tokens);
        reasoning = llm_sse_max(reasoning, u->reasoning_tokens);
    }

    u->input_tokens = in;
    u->output_tokens = out;
    u->cached_input_tokens = cached;
    u->reasoning_tokens = reasoning;
    u->have_input = 1;
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
        u->malformed = 1;
        return dflt;
    }

    d = item->valuedouble;

    if (!(d >= 0)) {
        u->clamped = 1;
        u->malformed = 1;
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


static void
llm_sse_finish_reason(const cJSON *item, llm_usage_t *u)
{
    if (cJSON_IsString(item)) {
        llm_sse_set_reason(u, item->valuestring);
    }
}


/*
 * The reason goes into the settle record and on to the database as text:
 * anything but printable ASCII, which real reasons are, becomes '?'.
 */

static void
llm_sse_set_reason(llm_usage_t *u, const char *s)
{
    size_t          i;
    unsigned char   c;

    for (i = 0; i < LLM_USAGE_FINISH_MAX - 1 && s[i] != '\0'; i++) {
        c = (unsigned char) s[i];
        u->finish_reason[i] = (c >= 0x20 && c < 0x7f) ? (char) c : '?';
    }

    u->finish_reason[i] = '\0';
}


/*
 * The response's "id" and "model", the first the upstream gave of each (an
 * OpenAI stream repeats them in every chunk): they go into the record and
 * the ledger as text, so only what real ids and names are made of is kept.
 */

static void
llm_sse_ident(const cJSON *obj, llm_usage_t *u)
{
    if (u->response_id[0] == '\0') {
        llm_sse_ident_set(u->response_id,
                          cJSON_GetObjectItemCaseSensitive(obj, "id"));
    }

    if (u->upstream_model[0] == '\0') {
        llm_sse_ident_set(u->upstream_model,
                          cJSON_GetObjectItemCaseSensitive(obj, "model"));
    }
}


static void
llm_sse_ident_set(char *field, const cJSON *item)
{
    size_t  n;

    if (!cJSON_IsString(item)) {
        return;
    }

    n = strlen(item->valuestring);

    if (n == 0 || n > LLM_USAGE_IDENT_MAX
        || strspn(item->valuestring, LLM_USAGE_IDENT_CHARS) != n)
    {
        return;
    }

    memcpy(field, item->valuestring, n + 1);
}


llm_sse_kind_e
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

    case 15:
        if (memcmp(s, "response.failed", 15) == 0) {
            return llm_sse_response_end;
        }

        break;

    case 18:
        if (memcmp(s, "response.completed", 18) == 0) {
            return llm_sse_response_end;
        }

        break;

    case 19:
        if (memcmp(s, "response.incomplete", 19) == 0) {
            return llm_sse_response_end;
        }

        break;
    }

    return llm_sse_other;
}


static int
llm_sse_anthropic_wanted(const char *s, size_t n)
{
    size_t       base, j, left;
    uint64_t     q;
    const char  *v;

    if (n == 0) {
        return 0;
    }

    if (llm_sse_escaped_ascii(s, n)) {
        return 1;
    }

    /* every quote but a last byte, in or out of a string */

    for (base = 0; base < n; base += LLM_SSE_BLOCK) {

        for (q = llm_sse_block(s, n, base, '"', '"'); q; q &= q - 1) {
            j = base + __builtin_ctzll(q);

            if (j + 1 >= n || s[j + 1] != 't') {
                continue;
            }

            v = llm_sse_key(s + j + 1, s + n, "type", 4);

            if (v == NULL) {
                continue;
            }

            left = s + n - v;

            if ((left >= 9 && memcmp(v, "\"message_", 9) == 0)
                || (left >= 7 && memcmp(v, "\"error\"", 7) == 0))
            {
                return 1;
            }
        }
    }

    return 0;
}


/*
 * Whether the data writes a printable ASCII character as \u0020-\u007f,
 * which no encoder needs: a name ("typ\u0065", "usag\u0065") or a type
 * ("message\u005fdelta") the scans above would not see, but cJSON and the
 * client do.  Such an event is parsed, so that it is billed as read.
 */

static int
llm_sse_escaped_ascii(const char *s, size_t n)
{
    const char  *q, *end;

    /* an event with an empty data field has no buffer yet */
    if (n == 0) {
        return 0;
    }

    end = s + n;

    for (q = s; (q = memchr(q, '\\', end - q)) != NULL; q += 2) {
        if (end - q < 6) {
            return 0;
        }

        if (q[1] == 'u' && q[2] == '0' && q[3] == '0'
            && q[4] >= '2' && q[4] <= '7')
        {
            return 1;
        }

        /* past the escape's two bytes: "\\u0065" is no \u0065 */
    }

    return 0;
}


/* the kind named by the first "type" member of an event's data */

static llm_sse_kind_e
llm_sse_data_type(const char *s, size_t n)
{
    uint64_t     bytes;
    const char  *q, *k, *v, *end;

    end = s + n;
    q = s;

    while (q < end) {
        q = memchr(q, '"', end - q);
        if (q == NULL) {
            break;
        }

        k = q + 1;
        q = llm_sse_string(k, end, &bytes);

        if (q == end) {
            break;
        }

        v = llm_sse_ws(++q, end);

        if (v == end || *v != ':') {
            continue;
        }

        if (q - k != 5 || memcmp(k, "type", 4) != 0) {
            q = v + 1;
            continue;
        }

        v = llm_sse_ws(v + 1, end);

        if (v == end || *v != '"') {
            break;
        }

        q = llm_sse_string(v + 1, end, &bytes);

        return (q == end) ? llm_sse_other : llm_sse_kind(v + 1, q - v - 1);
    }

    return llm_sse_other;
}


/*
 * Counts the generated text of a delta event: the string values of the
 * members named in keys, wherever they are.  Every string is skipped
 * whole, so text inside one never looks like a member.  Returns whether a
 * member named in wanted (if any) has a value other than null: such an
 * event is worth a parse, which decides.  *escaped (if given): whether
 * the data has a backslash at all.
 *
 * Only quotes and backslashes change what the scan reads, and the bits of
 * llm_sse_block() say where they are: most events have no backslash, and
 * then a string is two quotes in a row (llm_sse_count_plain()); the
 * others are walked from one such byte to the next (llm_sse_count_walk()).
 * Both read exactly as a walk byte by byte would.
 */

static int
llm_sse_count(llm_usage_t *u, const char *s, size_t n,
    const llm_sse_names_t *keys, const llm_sse_names_t *wanted,
    unsigned *escaped)
{
    unsigned  backslash;

    /* an event with an empty data field has no buffer yet */
    backslash = (n != 0 && memchr(s, '\\', n) != NULL);

    if (escaped) {
        *escaped = backslash;
    }

    if (n == 0) {
        return 0;
    }

    if (backslash) {
        return llm_sse_count_walk(u, s, n, keys, wanted);
    }

    return llm_sse_count_plain(u, s, n, keys, wanted);
}


/* no backslash: the first quote opens a string, the next closes it */

static int
llm_sse_count_plain(llm_usage_t *u, const char *s, size_t n,
    const llm_sse_names_t *keys, const llm_sse_names_t *wanted)
{
    size_t     base, open, len;
    uint64_t   q, total, lens;
    unsigned   text, found;

    found = 0;
    total = 0;
    text = 0;
    lens = keys->lens | (wanted ? wanted->lens : 0);

    base = 0;
    q = llm_sse_block(s, n, 0, '"', '"');

    for ( ;; ) {

        while (q == 0) {
            base += LLM_SSE_BLOCK;

            if (base >= n) {
                goto done;
            }

            q = llm_sse_block(s, n, base, '"', '"');
        }

        open = base + __builtin_ctzll(q) + 1;
        q &= q - 1;

        while (q == 0) {
            base += LLM_SSE_BLOCK;

            if (base >= n) {
                /* a text cut short counts as far as it goes */
                total += text ? n - open : 0;
                goto done;
            }

            q = llm_sse_block(s, n, base, '"', '"');
        }

        len = base + __builtin_ctzll(q) - open;
        q &= q - 1;

        if (text) {
            /* a value: the scan goes on after it, as after any string */
            total += len;
            text = 0;
            continue;
        }

        /* a name of no length looked for, member or not, changes nothing */
        if (len < 64 && (lens >> len & 1)) {
            text = llm_sse_member(s, n, open, len, keys, wanted, &found);
        }
    }

done:

    if (total) {
        u->delta_events++;
        u->delta_bytes += total;
    }

    return found;
}


/*
 * The walk: a backslash outside a string is text; inside one it takes
 * the next byte with it, or the next five after a 'u' if there are five.
 */

static int
llm_sse_count_walk(llm_usage_t *u, const char *s, size_t n,
    const llm_sse_names_t *keys, const llm_sse_names_t *wanted)
{
    size_t           j, open, seg;
    uint64_t         bytes, total, lens;
    unsigned         text, found;
    llm_sse_scan_t   sc;

    found = 0;
    total = 0;
    text = 0;
    lens = keys->lens | (wanted ? wanted->lens : 0);

    sc.base = 0;
    sc.mask = llm_sse_block(s, n, 0, '"', '\\');

    for ( ;; ) {

        /* the next string's opening quote: a backslash before is text */
        do {
            j = llm_sse_hit(&sc, s, n);
        } while (j < n && s[j] != '"');

        if (j == n) {
            break;
        }

        open = j + 1;
        seg = open;
        bytes = 0;

        /* its closing quote, past the escapes */
        for ( ;; ) {
            j = llm_sse_hit(&sc, s, n);

            if (j == n || s[j] == '"') {
                break;
            }

            if (n - j < 2) {
                /* the string runs to the end, the backslash uncounted */
                bytes += j - seg;
                seg = n;
                j = n;
                break;
            }

            if (s[j + 1] != 'u' || n - j < 6) {
                bytes += j - seg + 1;
                seg = j + 2;

            } else {
                bytes += j - seg + (text ? llm_sse_utf8_len(s + j + 2) : 0);
                seg = j + 6;
            }

            /* what the escape took is no quote or backslash */
            llm_sse_skip(&sc, s, n, seg);
        }

        if (text) {
            /* a text cut short counts as far as it goes */
            total += bytes + (j - seg);
            text = 0;
            continue;
        }

        if (j == n) {
            break;
        }

        if (j - open < 64 && (lens >> (j - open) & 1)) {
            text = llm_sse_member(s, n, open, j - open, keys, wanted, &found);
        }
    }

    if (total) {
        u->delta_events++;
        u->delta_bytes += total;
    }

    return found;
}


/*
 * The string at open, len bytes, closed: if it is a member's name, sets
 * *found if wanted names it and its value is not null; returns whether
 * keys names it and its value is a string, the text the next string is.
 */

static inline unsigned
llm_sse_member(const char *s, size_t n, size_t open, size_t len,
    const llm_sse_names_t *keys, const llm_sse_names_t *wanted,
    unsigned *found)
{
    size_t  v;

    v = open + len + 1;

    if (v < n && (unsigned char) s[v] <= ' ') {
        v = llm_sse_ws(s + v, s + n) - s;
    }

    /* a value, not a member name */
    if (v == n || s[v] != ':') {
        return 0;
    }

    v = llm_sse_ws(s + v + 1, s + n) - s;

    if (wanted && !*found && v < n && s[v] != 'n'
        && llm_sse_is_key(wanted, s + open, len))
    {
        *found = 1;
    }

    /* the next string opens at v */
    return v < n && s[v] == '"' && llm_sse_is_key(keys, s + open, len);
}


/* where the next quote or backslash is, or n */

static inline size_t
llm_sse_hit(llm_sse_scan_t *sc, const char *s, size_t n)
{
    size_t  j;

    while (sc->mask == 0) {
        sc->base += LLM_SSE_BLOCK;

        if (sc->base >= n) {
            return n;
        }

        sc->mask = llm_sse_block(s, n, sc->base, '"', '\\');
    }

    j = sc->base + __builtin_ctzll(sc->mask);
    sc->mask &= sc->mask - 1;

    return j;
}


/* the bits before i are dropped: bytes an escape took */

static inline void
llm_sse_skip(llm_sse_scan_t *sc, const char *s, size_t n, size_t i)
{
    if (i - sc->base >= LLM_SSE_BLOCK) {
        sc->base += LLM_SSE_BLOCK;

        sc->mask = (sc->base < n) ? llm_sse_block(s, n, sc->base, '"', '\\')
                                  : 0;
    }

    sc->mask &= ~0ULL << (i - sc->base);
}


/*
 * A bit for each byte of the block of data at base that is c or d: its 64
 * bytes, or those up to the end.  Only the data's bytes are read.
 */

static uint64_t
llm_sse_block(const char *s, size_t n, size_t base, char c, char d)
{
    char  last[LLM_SSE_BLOCK];

    if (n - base >= LLM_SSE_BLOCK) {
        return llm_sse_classify(s + base, c, d);
    }

    if (n >= LLM_SSE_BLOCK) {
        /* the last 64 bytes, those before the block shifted out */
        return llm_sse_classify(s + n - LLM_SSE_BLOCK, c, d)
               >> (LLM_SSE_BLOCK - (n - base));
    }

    /* shorter than a block: a copy, padded with what is neither */
    memcpy(last, s, n);
    memset(last + n, 0, LLM_SSE_BLOCK - n);

    return llm_sse_classify(last, c, d);
}


static inline uint64_t
llm_sse_classify(const char *p, char c, char d)
{
#if defined(__SSE2__)
    __m128i   vc, vd;

    vc = _mm_set1_epi8(c);
    vd = _mm_set1_epi8(d);

    return llm_sse_classify16(p, vc, vd)
           | llm_sse_classify16(p + 16, vc, vd) << 16
           | llm_sse_classify16(p + 32, vc, vd) << 32
           | llm_sse_classify16(p + 48, vc, vd) << 48;

#else
    unsigned  k;
    uint64_t  m;

    m = 0;

    for (k = 0; k < LLM_SSE_BLOCK; k++) {
        m |= (uint64_t) (p[k] == c || p[k] == d) << k;
    }

    return m;
#endif
}


#if defined(__SSE2__)

static inline uint64_t
llm_sse_classify16(const char *p, __m128i vc, __m128i vd)
{
    __m128i  v;

    v = _mm_loadu_si128((const __m128i *) p);
    v = _mm_or_si128(_mm_cmpeq_epi8(v, vc), _mm_cmpeq_epi8(v, vd));

    return (unsigned) _mm_movemask_epi8(v);
}

#endif


static void
llm_sse_count_json(llm_usage_t *u, const cJSON *item,
    const llm_sse_names_t *keys, uint64_t *bytes)
{
    const char   *s;
    const cJSON  *child;

    cJSON_ArrayForEach(child, item) {

        if (cJSON_IsString(child)) {
            s = child->string;

            /* decoded already: its bytes are its length */
            if (s != NULL && llm_sse_is_key(keys, s, strlen(s))) {
                *bytes += strlen(child->valuestring);
            }

        } else if (cJSON_IsObject(child) || cJSON_IsArray(child)) {

            if (child->string == NULL || strcmp(child->string, "usage") != 0)
            {
                llm_sse_count_json(u, child, keys, bytes);
            }
        }
    }
}


/* s, n: a member name as sent, up to its closing quote (escapes kept) */

static inline int
llm_sse_is_key(const llm_sse_names_t *keys, const char *s, size_t n)
{
    const llm_sse_name_t  *k;

    if (n >= 64 || !(keys->lens >> n & 1)
        || !(keys->firsts >> (s[0] & 63) & 1))
    {
        return 0;
    }

    for (k = keys->name; k->name; k++) {

        /* most names of the same length differ at either end */
        if (k->len == n && k->name[0] == s[0] && k->name[n - 1] == s[n - 1]
            && memcmp(k->name, s, n) == 0)
        {
            return 1;
        }
    }

    return 0;
}


/*
 * From just after an opening quote to its closing quote (or end).  *bytes
 * is the string's length in UTF-8 as decoded: an escape is one byte, a
 * \uXXXX the bytes of its code point (a surrogate two, a pair four).
 * Decoded strings from cJSON have no escapes and count as they are.
 */

static const char *
llm_sse_string(const char *s, const char *end, uint64_t *bytes)
{
    uint64_t     n;
    const char  *q;

    /*
     * Most strings are short and have no escape: their bytes are their
     * length.  A loop, not memchr(): the call costs more than the bytes.
     */
    for (q = s; q < end && *q != '"' && *q != '\\'; q++) {
        /* void */
    }

    if (q == end || *q == '"') {
        *bytes = q - s;
        return q;
    }

    n = q - s;
    s = q;

    while (s < end && *s != '"') {

        if (*s != '\\') {
            n++;
            s++;
            continue;
        }

        if (end - s < 2) {
            s = end;
            break;
        }

        if (s[1] != 'u' || end - s < 6) {
            n++;
            s += 2;
            continue;
        }

        n += llm_sse_utf8_len(s + 2);
        s += 6;
    }

    *bytes = n;

    return s;
}


/*
 * The UTF-8 bytes of the code point of a \uXXXX (a surrogate two, so that
 * a pair is four); a digit that is not hex reads as 0.
 */

static unsigned
llm_sse_utf8_len(const char *hex)
{
    unsigned  cp, i, c;

    cp = 0;

    for (i = 0; i < 4; i++) {
        c = (unsigned char) hex[i];
        c = (c >= '0' && c <= '9') ? c - '0'
            : ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') ? (c | 0x20) - 'a' + 10
            : 0;
        cp = cp * 16 + c;
    }

    return (cp < 0x80) ? 1
           : (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000)) ? 2 : 3;
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
