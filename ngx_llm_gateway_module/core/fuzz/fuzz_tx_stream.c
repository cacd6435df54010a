
/*
 * libFuzzer target for the stream translator.  The first byte chooses the
 * pair (bits 0-1: Chat to Messages, Chat to Responses, Messages to Chat,
 * Messages to Responses), a small event buffer and little memory (bit 2),
 * include_usage (bit 3) and where to split the rest (bits 4-7, in 16ths
 * of it).  The rest is the backend's stream, fed through llm_sse and the
 * translator whole and in two parts, which must give the same bytes; what
 * comes out must be a stream of the client's dialect: every event whole
 * JSON (or Chat's [DONE]), named by its type where the dialect names
 * events, nothing after the terminal event, and a stream that ends
 * between events; done, it was read as done or as an error.  And in
 * order: Messages' message_start first, blocks started only when none is
 * open and with the next index, deltas and stops of the open one,
 * message_delta once with no block open, message_stop after it;
 * Responses' sequence_number on every event, from 0 without a gap, items
 * added when none is open and done before response.completed; Chat's
 * content not after its finish.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "llm_sse.h"
#include "llm_tx_stream.h"


#define FUZZ_BUF_SIZE   4096
#define FUZZ_SMALL_BUF  256
#define FUZZ_MEM        65536
#define FUZZ_SMALL_MEM  512


typedef struct {
    char             *p;
    size_t            len;
    size_t            cap;
} fuzz_out_t;


typedef struct {
    llm_tx_stream_t  *t;
    fuzz_out_t       *out;
    int               rc;
    size_t            after_done;
} fuzz_feed_t;


typedef struct {
    llm_api_e         api;
    int               bad;
    const char       *why;      /* the first order broken */

    int               started;
    int               open;     /* the open block (Messages) or item */
    int               next;     /* Messages: the next block's index */
    int               delta;    /* message_delta, Chat's finish seen */
    int               end;      /* the terminal event seen */
    int64_t           seq;      /* Responses: the next sequence_number */
} fuzz_reader_t;


static void fuzz_translate(const llm_tx_conf_t *cf, size_t cap,
    const char *s, size_t len, size_t split, fuzz_out_t *out, int *rc,
    int *done);
static void fuzz_event(void *ctx, const char *event, size_t event_len,
    const char *data, size_t len, unsigned skipped);
static void fuzz_read(void *ctx, const char *event, size_t event_len,
    const char *data, size_t len, unsigned skipped);
static const char *fuzz_order(fuzz_reader_t *r, const cJSON *root,
    const char *type);
static const char *fuzz_order_messages(fuzz_reader_t *r, const cJSON *root,
    const char *type);
static const char *fuzz_order_responses(fuzz_reader_t *r, const cJSON *root,
    const char *type);
static int fuzz_out(void *ctx, const char *p, size_t len);
static char *fuzz_grow(void *ctx, char *old, size_t len, size_t size);
static void fuzz_fail(const char *what);


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int             rc, rc2, done, done2;
    char           *buf;
    size_t          len, split, cap;
    llm_sse_t       p;
    fuzz_out_t      whole, part;
    const char     *s;
    fuzz_reader_t   r;
    llm_tx_conf_t   cf;

    static const llm_api_e  from[] = {
        LLM_API_OPENAI, LLM_API_OPENAI, LLM_API_ANTHROPIC, LLM_API_ANTHROPIC
    };
    static const llm_api_e  to[] = {
        LLM_API_ANTHROPIC, LLM_API_RESPONSES, LLM_API_OPENAI,
        LLM_API_RESPONSES
    };

    if (size == 0) {
        return 0;
    }

    memset(&cf, 0, sizeof(llm_tx_conf_t));

    cf.from = from[data[0] & 0x03];
    cf.to = to[data[0] & 0x03];
    cf.model = "m";
    cf.model_len = 1;
    cf.id = "fuzz";
    cf.id_len = 4;
    cf.created = 1;
    cf.est_input = 3;
    cf.max_tokens = 16;
    cf.grow = fuzz_grow;
    cf.max = (data[0] & 0x04) ? FUZZ_SMALL_MEM : FUZZ_MEM;
    cf.include_usage = (data[0] & 0x08) ? 1 : 0;

    cap = (data[0] & 0x04) ? FUZZ_SMALL_BUF : FUZZ_BUF_SIZE;

    s = (const char *) data + 1;
    len = size - 1;
    split = len * (data[0] >> 4) / 16;

    fuzz_translate(&cf, cap, s, len, len, &whole, &rc, &done);
    fuzz_translate(&cf, cap, s, len, split, &part, &rc2, &done2);

    if (rc != rc2 || done != done2 || whole.len != part.len
        || (whole.len && memcmp(whole.p, part.p, whole.len) != 0))
    {
        fuzz_fail("split in two, another output");
    }

    /* the client's stream, read back */

    buf = malloc(FUZZ_MEM * 16);
    memset(&r, 0, sizeof(fuzz_reader_t));
    r.api = cf.to;
    r.open = -1;

    llm_sse_init(&p, cf.to, buf, FUZZ_MEM * 16);
    p.on_event = fuzz_read;
    p.event_ctx = &r;

    llm_sse_feed(&p, whole.p ? whole.p : "", whole.len);

    if (llm_sse_pending(&p) != 0) {
        fuzz_fail("the output ends inside an event");
    }

    llm_sse_finish(&p);

    if (r.bad) {
        fuzz_fail("an output event is not JSON of its type");
    }

    if (r.why) {
        fuzz_fail(r.why);
    }

    if (rc == 0 && done && !p.usage.done && !p.usage.error) {
        fuzz_fail("done, but the client reads neither its end nor an error");
    }

    if (rc == 0 && !done && (p.usage.done || p.usage.error)) {
        fuzz_fail("the client reads an end the translator did not give");
    }

    free(buf);
    free(whole.p);
    free(part.p);

    return 0;
}


static void
fuzz_translate(const llm_tx_conf_t *cf, size_t cap, const char *s,
    size_t len, size_t split, fuzz_out_t *out, int *rc, int *done)
{
    char             *buf;
    size_t            off, n, used;
    llm_sse_t         p;
    fuzz_feed_t       f;
    llm_tx_conf_t     mcf;
    llm_tx_stream_t   t;

    buf = malloc(cap);
    memset(out, 0, sizeof(fuzz_out_t));

    /* as the gateway has it: the figures shown are the meter's */
    mcf = *cf;
    mcf.meter = &p.usage;
    llm_tx_stream_init(&t, &mcf);

    f.t = &t;
    f.out = out;
    f.rc = 0;
    f.after_done = 0;

    llm_sse_init(&p, cf->from, buf, cap);
    p.yield = 1;
    p.on_event = fuzz_event;
    p.event_ctx = &f;

    for (off = 0; off < len; /* void */) {
        n = (off < split) ? split - off : len - off;

        while (n) {
            used = llm_sse_feed(&p, s + off, n);
            off += used;
            n -= used;
        }
    }

    llm_sse_finish(&p);

    if (f.after_done) {
        fuzz_fail("output after the terminal event");
    }

    *rc = f.rc;
    *done = llm_tx_stream_done(&t);

    free(t.mem);
    free(buf);
}


static void
fuzz_event(void *ctx, const char *event, size_t event_len, const char *data,
    size_t len, unsigned skipped)
{
    int           was;
    size_t        before;
    fuzz_feed_t  *f;

    f = ctx;

    if (f->rc != 0) {
        if (llm_tx_stream_event(f->t, event, event_len, data, len, skipped,
                                fuzz_out, f->out)
            != -1)
        {
            fuzz_fail("a failed translation carries on");
        }

        return;
    }

    was = llm_tx_stream_done(f->t);
    before = f->out->len;

    f->rc = llm_tx_stream_event(f->t, event, event_len, data, len, skipped,
                                fuzz_out, f->out);

    if (was) {
        f->after_done += f->out->len - before;
    }
}


static void
fuzz_read(void *ctx, const char *event, size_t event_len, const char *data,
    size_t len, unsigned skipped)
{
    cJSON          *root;
    const cJSON    *type;
    fuzz_reader_t  *r;

    r = ctx;

    if (skipped) {
        r->bad = 1;
        return;
    }

    if (r->api == LLM_API_OPENAI && len == 6 && memcmp(data, "[DONE]", 6) == 0)
    {
        r->why = r->why ? r->why : r->end ? "an event after the end" : NULL;
        r->end = 1;
        return;
    }

    root = cJSON_ParseWithLength(data, len);

    if (!cJSON_IsObject(root)) {
        r->bad = 1;
        cJSON_Delete(root);
        return;
    }

    /* llm_sse gives a name longer than it keeps as none */

    if (r->api != LLM_API_OPENAI) {
        type = cJSON_GetObjectItemCaseSensitive(root, "type");

        if (!cJSON_IsString(type)
            || (event_len == 0 && strlen(type->valuestring)
                                  <= LLM_SSE_EVENT_MAX)
            || (event_len != 0
                && (strlen(type->valuestring) != event_len
                    || memcmp(type->valuestring, event, event_len) != 0)))
        {
            r->bad = 1;
        }
    }

    if (r->why == NULL) {
        type = cJSON_GetObjectItemCaseSensitive(root, "type");
        r->why = fuzz_order(r, root, cJSON_IsString(type) ? type->valuestring
                                                         : "");
    }

    cJSON_Delete(root);
}


/* NULL, or what the event breaks of the order of its dialect's stream */

static const char *
fuzz_order(fuzz_reader_t *r, const cJSON *root, const char *type)
{
    const cJSON  *choice, *delta, *finish;

    if (r->end) {
        return "an event after the end";
    }

    if (r->api == LLM_API_ANTHROPIC) {
        return fuzz_order_messages(r, root, type);
    }

    if (r->api == LLM_API_RESPONSES) {
        return fuzz_order_responses(r, root, type);
    }

    if (cJSON_GetObjectItemCaseSensitive(root, "error")) {
        r->end = 1;
        return NULL;
    }

    choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root,
                                                                 "choices"),
                                0);
    delta = cJSON_GetObjectItemCaseSensitive(choice, "delta");
    finish = cJSON_GetObjectItemCaseSensitive(choice, "finish_reason");

    if (r->delta
        && (cJSON_GetObjectItemCaseSensitive(delta, "content")
            || cJSON_GetObjectItemCaseSensitive(delta, "tool_calls")))
    {
        return "Chat: content after the finish";
    }

    if (cJSON_IsString(finish)) {
        if (r->delta) {
            return "Chat: a second finish";
        }

        r->delta = 1;
    }

    return NULL;
}


static const char *
fuzz_order_messages(fuzz_reader_t *r, const cJSON *root, const char *type)
{
    int           index;
    const cJSON  *v;

    v = cJSON_GetObjectItemCaseSensitive(root, "index");
    index = cJSON_IsNumber(v) ? (int) v->valuedouble : -2;

    if (strcmp(type, "error") == 0) {
        r->end = 1;
        return NULL;
    }

    if (strcmp(type, "ping") == 0) {
        return NULL;
    }

    if (strcmp(type, "message_start") == 0) {
        if (r->started) {
            return "Messages: a second message_start";
        }

        r->started = 1;
        return NULL;
    }

    if (!r->started) {
        return "Messages: an event before message_start";
    }

    if (strcmp(type, "content_block_start") == 0) {
        if (r->delta) {
            return "Messages: a block after message_delta";
        }

        if (r->open >= 0) {
            return "Messages: a block started with one open";
        }

        if (index != r->next) {
            return "Messages: a block started out of order";
        }

        r->open = r->next++;
        return NULL;
    }

    if (strcmp(type, "content_block_delta") == 0
        || strcmp(type, "content_block_stop") == 0)
    {
        if (r->open < 0 || index != r->open) {
            return "Messages: a delta or stop of a block not open";
        }

        r->open = (type[14] == 's') ? -1 : r->open;
        return NULL;
    }

    if (strcmp(type, "message_delta") == 0) {
        if (r->open >= 0) {
            return "Messages: message_delta with a block open";
        }

        if (r->delta) {
            return "Messages: a second message_delta";
        }

        r->delta = 1;
        return NULL;
    }

    if (strcmp(type, "message_stop") == 0) {
        if (!r->delta) {
            return "Messages: message_stop without message_delta";
        }

        r->end = 1;
        return NULL;
    }

    return "Messages: an unknown event";
}


static const char *
fuzz_order_responses(fuzz_reader_t *r, const cJSON *root, const char *type)
{
    const cJSON  *v;

    v = cJSON_GetObjectItemCaseSensitive(root, "sequence_number");

    if (!cJSON_IsNumber(v) || v->valuedouble != (double) r->seq) {
        return "Responses: sequence_number missing or out of order";
    }

    r->seq++;

    if (strcmp(type, "error") == 0) {
        r->end = 1;
        return NULL;
    }

    if (strcmp(type, "response.completed") == 0
        || strcmp(type, "response.incomplete") == 0)
    {
        if (r->open >= 0) {
            return "Responses: the end with an item open";
        }

        r->end = 1;
        return NULL;
    }

    if (strcmp(type, "response.output_item.added") == 0) {
        if (r->open >= 0) {
            return "Responses: an item added with one open";
        }

        r->open = r->next++;
        return NULL;
    }

    if (strcmp(type, "response.output_item.done") == 0) {
        if (r->open < 0) {
            return "Responses: an item done not open";
        }

        r->open = -1;
        return NULL;
    }

    if (strncmp(type, "response.output_text.", 21) == 0
        || strncmp(type, "response.content_part.", 22) == 0
        || strncmp(type, "response.function_call_arguments.", 33) == 0)
    {
        return (r->open < 0) ? "Responses: an item's event, none open"
                             : NULL;
    }

    return NULL;
}


static int
fuzz_out(void *ctx, const char *p, size_t len)
{
    fuzz_out_t  *o;

    o = ctx;

    if (o->len + len > o->cap) {
        o->cap = (o->len + len) * 2;
        o->p = realloc(o->p, o->cap);
    }

    memcpy(o->p + o->len, p, len);
    o->len += len;

    return 0;
}


static char *
fuzz_grow(void *ctx, char *old, size_t len, size_t size)
{
    return realloc(old, size);
}


static void
fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz_tx_stream: %s\n", what);
    abort();
}
