
/*
 * The usage extractor against its oracle (sse_ref.c: the parser before
 * its scans were made faster).  Streams of every dialect, and events made
 * to trip a scan (strings and escapes across every 64-byte boundary,
 * escaped names, duplicate members, names nested where they do not
 * count, huge figures, NUL bytes, unterminated strings, a backslash at
 * the end), are fed to both under every API: whole, split in two at
 * every byte, a byte at a time, event by event, into a small buffer, into
 * one that grows, and through the filter with and without the cut; then
 * thousands of mutations of them, a few splits each.  After every feed
 * the two must agree on everything: what was consumed, the usage to the
 * last flag and byte, the state, the events given and the bytes sent.
 *
 * In the streams ' stands for ", as in test_sse.c; a case with a length
 * is taken as it is, NUL bytes and all.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sse_ref.h"
#include "tap.h"

#include "sse_ref.c"


#define nelts(a)        (sizeof(a) / sizeof((a)[0]))

#define BUF_SIZE        4096
#define SMALL_BUF       64
#define GROW_FROM       16
#define GROW_MAX        2048
#define OUT_SIZE        65536
#define HOLD_SIZE       512
#define MUTANTS         4000
#define LENGTHS         160


typedef struct {
    const char   *name;
    const char   *text;
    size_t        len;              /* 0: ' for ", up to the NUL */
} diff_case_t;


/* how a run feeds the stream */
typedef enum {
    diff_feed = 0,
    diff_yield,                     /* event by event, as the cut does */
    diff_filter,                    /* llm_sse_filter(), nothing cut */
    diff_strip,                     /* llm_sse_filter(), the usage cut */
    diff_hows
} diff_how_e;


typedef struct {
    llm_api_e     api;
    diff_how_e    how;
    size_t        cap;              /* GROW_FROM: a buffer that grows */
    size_t        split;            /* the first part; then by step */
    size_t        step;             /* 0: the rest at once */
} diff_run_t;


/* one parser and what it gave */
typedef struct {
    llm_sse_t     p;
    uint64_t      events;           /* a hash of the events given */
    size_t        nevents;
    char         *out;
    size_t        out_len;
    char          hold[HOLD_SIZE];
} diff_side_t;


#define OAI  "data: {'id':'chatcmpl-1234567890','object':"                    \
             "'chat.completion.chunk','created':1700000000,'model':"          \
             "'gpt-4o-mini-2024-07-18','system_fingerprint':'fp_0123',"
#define OAI_TEXT(t)                                                           \
             OAI "'choices':[{'index':0,'delta':{'content':'" t "'},"         \
             "'logprobs':null,'finish_reason':null}]}\n\n"
#define OAI_END                                                               \
             OAI "'choices':[{'index':0,'delta':{},'logprobs':null,"          \
             "'finish_reason':'stop'}]}\n\n"                                  \
             OAI "'choices':[],'usage':{'prompt_tokens':19,"                  \
             "'completion_tokens':10,'total_tokens':29,"                      \
             "'prompt_tokens_details':{'cached_tokens':3},"                   \
             "'completion_tokens_details':{'reasoning_tokens':2}}}\n\n"       \
             "data: [DONE]\n\n"

#define ANT_START                                                             \
    "event: message_start\n"                                                  \
    "data: {'type':'message_start','message':{'id':'msg_01XFDUDYJgAA',"       \
    "'type':'message','role':'assistant','content':[],"                       \
    "'model':'claude-sonnet-4-20250514','stop_reason':null,"                  \
    "'stop_sequence':null,'usage':{'input_tokens':25,"                        \
    "'cache_creation_input_tokens':0,'cache_read_input_tokens':7,"            \
    "'output_tokens':1}}}\n\n"
#define ANT_DELTA(kind, member, t)                                            \
    "event: content_block_delta\n"                                            \
    "data: {'type':'content_block_delta','index':0,'delta':{'type':'"         \
    kind "','" member "':'" t "'}}\n\n"
#define ANT_END                                                               \
    "event: content_block_stop\ndata: {'type':'content_block_stop',"          \
    "'index':0}\n\n"                                                          \
    "event: message_delta\n"                                                  \
    "data: {'type':'message_delta','delta':{'stop_reason':'end_turn',"        \
    "'stop_sequence':null},'usage':{'output_tokens':15}}\n\n"                 \
    "event: message_stop\ndata: {'type':'message_stop'}\n\n"

#define RSP_DELTA(t)                                                          \
    "event: response.output_text.delta\n"                                     \
    "data: {'type':'response.output_text.delta','sequence_number':4,"         \
    "'item_id':'msg_1','output_index':0,'content_index':0,'delta':'" t        \
    "'}\n\n"
#define RSP_END                                                               \
    "event: response.completed\n"                                             \
    "data: {'type':'response.completed','sequence_number':9,'response':"      \
    "{'id':'resp_1','object':'response','status':'completed','model':"        \
    "'gpt-4o','output':[{'type':'message','content':[{'type':"                \
    "'output_text','text':'Hi there'}]}],'usage':{'input_tokens':11,"         \
    "'input_tokens_details':{'cached_tokens':0},'output_tokens':4,"           \
    "'output_tokens_details':{'reasoning_tokens':0},'total_tokens':15}}}"     \
    "\n\n"

/* 60 bytes: a string of it crosses a 64-byte boundary of any event */
#define LONG60  "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWX"


static const diff_case_t  diff_cases[] = {

    { "openai stream",
      OAI "'choices':[{'index':0,'delta':{'role':'assistant','content':'',"
      "'refusal':null},'logprobs':null,'finish_reason':null}]}\n\n"
      OAI_TEXT("Hello") OAI_TEXT(" tok12") OAI_END, 0 },

    { "openai text with escapes",
      OAI_TEXT("caf\\u00e9 \\'q\\' \\\\ \\n\\t\\/ \\ud83d\\ude00 \\u20ac")
      OAI_TEXT("\\uD83D\\uDE00\\u0000\\u07ff\\u0800\\uffff") OAI_END, 0 },

    { "openai escapes at every offset",
      OAI_TEXT("\\n" LONG60 "\\n" LONG60 "\\u00e9" LONG60 "\\\\")
      OAI_TEXT("a\\n" LONG60 "\\'" LONG60 "\\u00e9a" LONG60)
      OAI_TEXT("ab\\u00e9" LONG60 "a\\'" LONG60 "a\\\\b" LONG60 "\\"), 0 },

    { "openai long texts",
      OAI_TEXT(LONG60 LONG60 LONG60 LONG60 LONG60 LONG60 LONG60)
      "data: {'choices':[{'delta':{'content':'" LONG60 "'}}]}\n\n"
      "data: {'choices':[{'delta':{'content':'" LONG60 "!!!'}}]}\n\n"
      "data: {'choices':[{'delta':{'content':'" LONG60 "!!!!'}}]}\n\n"
      "data: {'choices':[{'delta':{'content':'" LONG60 "!!!!!'}}]}\n\n",
      0 },

    { "openai other text members",
      OAI "'choices':[{'index':0,'delta':{'reasoning_content':'think',"
      "'reasoning':'more','refusal':'no','tool_calls':[{'index':0,"
      "'function':{'name':'get','arguments':'{\\'a\\':1}'}}]}}]}\n\n", 0 },

    { "openai duplicate and nested names",
      "data: {'choices':[{'delta':{'content':'a','content':'bb'}}],"
      "'x':{'usage':{'content':'ccc'}},'usage':null,'usage':null}\n\n"
      "data: {'usage':{'prompt_tokens':1},'usage':{'prompt_tokens':2,"
      "'completion_tokens':3},'choices':[]}\n\n"
      "data: {'choices':[{'finish_reason':null,'finish_reason':'length'}]}"
      "\n\n", 0 },

    { "openai escaped names",
      "data: {'choices':[{'delta':{'cont\\u0065nt':'abc'}}]}\n\n"
      "data: {'choices':[{'delta':{'content':'x\\\\u0065'}}]}\n\n"
      "data: {'choices':[],'usag\\u0065':{'prompt_tokens':5}}\n\n"
      "data: {'choices':[{'finish_r\\u0065ason':'stop'}]}\n\n"
      "data: {'choices':[{'delta':{'con\\'tent':'abc'}}]}\n\n", 0 },

    { "openai figures",
      "data: {'choices':[],'usage':{'prompt_tokens':1e400,"
      "'completion_tokens':-0,'prompt_tokens_details':{'cached_tokens':"
      "99999999999999999999}}}\n\n"
      "data: {'choices':[],'usage':{'prompt_tokens':1.5,"
      "'completion_tokens':'7','completion_tokens_details':"
      "{'reasoning_tokens':-1}}}\n\n"
      "data: {'choices':[],'usage':{'prompt_tokens':100000001,"
      "'completion_tokens':true}}\n\n", 0 },

    { "openai error and done",
      "event: error\ndata: {'error':{'message':'boom','type':'x'}}\n\n"
      "data: {'error':null,'choices':[{'delta':{'content':'ok'}}]}\n\n"
      "data:  [DONE] \n\n", 0 },

    { "openai unterminated", OAI_TEXT("abc") "data: {'choices':[{'delta':"
      "{'content':'never closed", 0 },

    { "openai backslash at the end",
      "data: {'choices':[{'delta':{'content':'abc\\", 0 },

    { "openai short unicode at the end",
      "data: {'choices':[{'delta':{'content':'ab\\u12", 0 },

    { "openai bad unicode",
      "data: {'choices':[{'delta':{'content':'\\uzz12\\u00G1\\u'}}]}\n\n"
      "data: {'choices':[{'delta':{'content':'\\u\\'\\u00'}}]}\n\n", 0 },

    { "openai lexical oddities",
      "data: {'choices':[{'delta':{'content' : 'spaced' , 'content'\t:\n"
      "'tabbed'}}]}\n\n"
      "data: {'content':\\'x'} 'content':'y' \\'content':'z'\n\n"
      "data: 'content'\n\n"
      "data: 'content':\n\n"
      "data: 'content': 12\n\n"
      "data: ''''':'''\n\n"
      "data: {'finish_reason':'stop'\n\n", 0 },

    { "openai nul bytes",
      "data: {\"choices\":[{\"delta\":{\"content\":\"a\0b\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"con\0tent\":\"ab\"}}]}\n\n"
      "data: {\"choices\":[{\"finish_reason\":\"st\0op\"}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"\0\"}}]}\n\0\n",
      160 },

    { "sse lines",
      "\xEF\xBB\xBF" "data:{'choices':[{'delta':{'content':'bom'}}]}\r\n\r\n"
      ": a comment\r"
      "data: {'choices':[{'delta':\rdata: {'content':'two lines'}}]}\r\r"
      "id: 7\nretry: 100\nevent: message\n"
      "data: {'choices':[{'delta':{'content':'lf'}}]}\n\n"
      "datum: {'content':'not data'}\n\n"
      "data\ndata\n\n"
      "event: a very long event name, longer than the buffer\n"
      "data: {'choices':[{'delta':{'content':'x'}}]}\n\n"
      "data: {'choices':[{'delta':{'content':'no end'}}]}", 0 },

    { "anthropic stream",
      ANT_START
      "event: content_block_start\ndata: {'type':'content_block_start',"
      "'index':0,'content_block':{'type':'text','text':''}}\n\n"
      "event: ping\ndata: {'type': 'ping'}\n\n"
      ANT_DELTA("text_delta", "text", "Hello")
      ANT_DELTA("thinking_delta", "thinking", "hm \\u00e9")
      ANT_DELTA("input_json_delta", "partial_json", "{\\'a\\':")
      ANT_DELTA("text_delta", "text", LONG60 "\\n" LONG60 "\\'" LONG60)
      ANT_END, 0 },

    { "anthropic types in the data",
      "data: {'type':'message_start','message':{'id':'m1','model':'c',"
      "'usage':{'input_tokens':5,'output_tokens':1}}}\n\n"
      "data: {'type':'content_block_delta','delta':{'type':'text_delta',"
      "'text':'abc'}}\n\n"
      "data: {'type':'message_delta','usage':{'output_tokens':9},"
      "'delta':{'stop_reason':'max_tokens'}}\n\n"
      "data: {'delta':{'text':'x'},'type':'message_other'}\n\n"
      "data: {'type' : 'error','error':{'type':'overloaded_error'}}\n\n"
      "data: {'typ\\u0065':'message_stop'}\n\n"
      "data: {'type':'message\\u005fstop'}\n\n"
      "data: {'type':'message_stop'}\n\n", 0 },

    { "anthropic repeated and odd",
      ANT_START ANT_START
      "event: message_delta\ndata: {'type':'message_delta','usage':"
      "{'input_tokens':100000000,'cache_read_input_tokens':1,"
      "'output_tokens':-3}}\n\n"
      "event: message_delta\ndata: {'usage':{'output_tokens':4}}\n\n"
      "event: error\ndata: {'type':'error'}\n\n"
      "event: message_stop\ndata: \n\n", 0 },

    { "responses stream",
      "event: response.created\ndata: {'type':'response.created',"
      "'response':{'id':'resp_1','status':'in_progress'}}\n\n"
      RSP_DELTA("Hi") RSP_DELTA(" there \\u00e9") RSP_DELTA(LONG60 LONG60)
      "event: response.function_call_arguments.delta\n"
      "data: {'type':'response.function_call_arguments.delta',"
      "'delta':'{\\'x\\''}\n\n"
      RSP_END, 0 },

    { "responses types in the data",
      "data: {'type':'response.output_text.delta','delta':'ab'}\n\n"
      "data: {'delta':'cd','type':'response.output_text.delta'}\n\n"
      "data: {'type':'response.incomplete','response':{'status':"
      "'incomplete','incomplete_details':{'reason':'max_output_tokens'},"
      "'usage':{'input_tokens':3,'output_tokens':2}}}\n\n"
      "data: {'type':'response.failed','response':{'status':'failed',"
      "'error':{'code':'x'}}}\n\n"
      "data: {'type':'error','code':'boom'}\n\n"
      "data: {'type':\\'response.completed'}\n\n"
      "data: {'type':'response.completed','response':null}\n\n", 0 },
};


/* dictionary of the mutations: what the scans look for, and what trips */
static const char  *diff_tokens[] = {
    "\"", "\\", "\\\"", "\\\\", "\\u", "\\u00", "\\u0065", "\\u00e9",
    "\\ud83d", ":", "\":\"", "\",\"", "{", "}", "[", "]", " ", "\t", "\n",
    "\r", "\r\n", "\n\n", "\0", "null", "n", "\"content\":\"",
    "\"content\":", "\"usage\":{", "\"usage\":", "\"finish_reason\":\"",
    "\"error\":", "\"type\":\"", "message_", "message_delta",
    "message_start", "message_stop", "\"text\":\"", "\"delta\":\"",
    "\"delta\":{", "response.completed", "\"prompt_tokens\":",
    "\"input_tokens\":", "\"output_tokens\":", "1e30", "-1", "data: ",
    "data:", "event: ", "event: error\n", "[DONE]", "\xEF\xBB\xBF",
    LONG60
};


static char *
diff_grow(void *ctx, char *old, size_t len, size_t size)
{
    char  *b;

    b = malloc(size);
    if (b == NULL) {
        return NULL;
    }

    memcpy(b, old, len);
    free(old);

    return b;
}


static uint64_t
diff_hash(uint64_t h, const char *s, size_t n)
{
    size_t    i;
    uint64_t  w;

    /* eight bytes at a time: the runs give millions of events */
    for (i = 0; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }

    for ( /* void */ ; i < n; i++) {
        h = (h ^ (unsigned char) s[i]) * 0x100000001b3ULL;
    }

    return h;
}


static void
diff_event(void *ctx, const char *event, size_t event_len, const char *data,
    size_t len, unsigned skipped)
{
    uint64_t      h;
    diff_side_t  *d = ctx;

    h = d->events ^ (event_len * 31 + len * 7 + skipped);
    h = diff_hash(h, event, event_len);

    if (!skipped) {
        h = diff_hash(h, data, len);
    }

    d->events = h * 0x100000001b3ULL;
    d->nevents++;
}


static int
diff_out(void *ctx, const char *p, size_t len)
{
    diff_side_t  *d = ctx;

    if (len > OUT_SIZE - d->out_len) {
        return -1;
    }

    memcpy(d->out + d->out_len, p, len);
    d->out_len += len;

    return 0;
}


static void
diff_init(diff_side_t *d, const diff_run_t *r, int ref)
{
    char    *buf;
    size_t   cap;

    cap = r->cap;

    buf = malloc(cap);
    d->out = malloc(OUT_SIZE);
    if (buf == NULL || d->out == NULL) {
        perror("malloc");
        exit(2);
    }

    if (ref) {
        llm_sse_ref_init(&d->p, r->api, buf, cap);

    } else {
        llm_sse_init(&d->p, r->api, buf, cap);
    }

    if (cap == GROW_FROM) {
        d->p.grow = diff_grow;
        d->p.max = GROW_MAX;
    }

    d->p.on_event = diff_event;
    d->p.event_ctx = d;
    d->p.yield = (r->how == diff_yield);
    d->p.strip = (r->how == diff_strip);
    d->p.hold = d->hold;
    d->p.hold_cap = sizeof(d->hold);

    d->events = 0xcbf29ce484222325ULL;
    d->nevents = 0;
    d->out_len = 0;
}


static void
diff_free(diff_side_t *d)
{
    free(d->p.buf);
    free(d->out);
}


static int
diff_usage_same(const llm_usage_t *a, const llm_usage_t *b)
{
    return a->input_tokens == b->input_tokens
           && a->output_tokens == b->output_tokens
           && a->cached_input_tokens == b->cached_input_tokens
           && a->cache_write_tokens == b->cache_write_tokens
           && a->reasoning_tokens == b->reasoning_tokens
           && a->delta_events == b->delta_events
           && a->delta_bytes == b->delta_bytes
           && memcmp(a->finish_reason, b->finish_reason,
                     sizeof(a->finish_reason)) == 0
           && memcmp(a->response_id, b->response_id,
                     sizeof(a->response_id)) == 0
           && memcmp(a->upstream_model, b->upstream_model,
                     sizeof(a->upstream_model)) == 0
           && a->have_usage == b->have_usage
           && a->have_input == b->have_input
           && a->done == b->done
           && a->clamped == b->clamped
           && a->malformed == b->malformed
           && a->repeated == b->repeated
           && a->truncated == b->truncated
           && a->error == b->error;
}


/* everything one parser holds that the other must hold too */

static const char *
diff_same(const diff_side_t *a, const diff_side_t *b)
{
    const llm_sse_t  *p = &a->p, *q = &b->p;

    if (!diff_usage_same(&p->usage, &q->usage)) {
        return "the usage";
    }

    if (p->len != q->len || p->cap != q->cap
        || (p->len && memcmp(p->buf, q->buf, p->len) != 0))
    {
        return "the event's data";
    }

    if (p->event_len != q->event_len
        || memcmp(p->event, q->event,
                  (p->event_len < sizeof(p->event)) ? p->event_len
                                                    : sizeof(p->event))
           != 0
        || memcmp(p->tokens, q->tokens, sizeof(p->tokens)) != 0)
    {
        return "the event's type or the figures";
    }

    if (p->state != q->state || p->field != q->field
        || p->field_len != q->field_len || p->skip_event != q->skip_event
        || p->have_data != q->have_data || p->last_cr != q->last_cr
        || p->started != q->started || p->in_event != q->in_event
        || p->dispatched != q->dispatched || p->usage_only != q->usage_only)
    {
        return "the line state";
    }

    if (p->holding != q->holding || p->hold_len != q->hold_len
        || memcmp(p->hold, q->hold, p->hold_len) != 0
        || p->drop_lf != q->drop_lf || p->stripped != q->stripped)
    {
        return "the hold";
    }

    if (a->events != b->events || a->nevents != b->nevents) {
        return "the events given";
    }

    if (a->out_len != b->out_len || memcmp(a->out, b->out, a->out_len) != 0)
    {
        return "the bytes sent";
    }

    return NULL;
}


/* one part of the stream, fed to both; NULL if they agree */

static const char *
diff_part(diff_side_t *a, diff_side_t *b, const diff_run_t *r,
    const char *s, size_t n)
{
    int          ra, rb;
    size_t       ua, ub;
    const char  *what;

    if (r->how == diff_filter || r->how == diff_strip) {
        ra = llm_sse_filter(&a->p, s, n, diff_out, a);
        rb = llm_sse_ref_filter(&b->p, s, n, diff_out, b);

        return (ra != rb) ? "what the filter returned" : diff_same(a, b);
    }

    /* event by event, as the cut does, up to the part's end */
    while (n) {
        ua = llm_sse_feed(&a->p, s, n);
        ub = llm_sse_ref_feed(&b->p, s, n);

        if (ua != ub || ua == 0 || ua > n) {
            return "the bytes consumed";
        }

        what = diff_same(a, b);
        if (what) {
            return what;
        }

        s += ua;
        n -= ua;
    }

    return NULL;
}


/* one run: NULL if the two agree to the end */

static const char *
diff_run(const diff_run_t *r, const char *s, size_t len)
{
    int           ra, rb;
    size_t        off, n;
    const char   *what, *ca, *cb;
    diff_side_t   a, b;

    diff_init(&a, r, 0);
    diff_init(&b, r, 1);

    what = NULL;

    for (off = 0; off < len && what == NULL; off += n) {
        n = (off < r->split) ? r->split - off
            : (r->step && r->step < len - off) ? r->step : len - off;

        what = diff_part(&a, &b, r, s + off, n);

        if (what == NULL
            && (llm_sse_pending(&a.p) != llm_sse_ref_pending(&b.p)
                || strcmp(llm_sse_closing(&a.p),
                          llm_sse_ref_closing(&b.p)) != 0))
        {
            what = "pending, or the bytes that close it";
        }
    }

    if (what == NULL) {
        if (r->how == diff_filter || r->how == diff_strip) {
            ra = llm_sse_filter_end(&a.p, diff_out, &a, &ca);
            rb = llm_sse_ref_filter_end(&b.p, diff_out, &b, &cb);

            if (ra != rb || strcmp(ca, cb) != 0) {
                what = "the filter's end";
            }

        } else {
            llm_sse_finish(&a.p);
            llm_sse_ref_finish(&b.p);
        }
    }

    if (what == NULL) {
        what = diff_same(&a, &b);
    }

    diff_free(&a);
    diff_free(&b);

    return what;
}


static const char *
diff_api_name(llm_api_e api)
{
    switch (api) {
    case LLM_API_OPENAI:
        return "openai";
    case LLM_API_ANTHROPIC:
        return "anthropic";
    case LLM_API_RESPONSES:
        return "responses";
    default:
        return "other";
    }
}


static const char  *diff_how_names[] = {
    "fed", "event by event", "filtered", "filtered with the cut"
};


static void
diff_diag(const diff_run_t *r, const char *what)
{
    printf("#   %s differs: %s, %s, a buffer of %zu%s, split at %zu, "
           "then by %zu\n", what, diff_api_name(r->api),
           diff_how_names[r->how], r->cap,
           (r->cap == GROW_FROM) ? " that grows" : "", r->split, r->step);
}


static const llm_api_e  diff_apis[] = {
    LLM_API_OPENAI, LLM_API_ANTHROPIC, LLM_API_RESPONSES
};

static const size_t  diff_caps[] = { BUF_SIZE, SMALL_BUF, GROW_FROM };


/*
 * A stream under every API, every way: split at every byte, a byte and a
 * few bytes at a time; the JSON readers on it too.  Returns the runs that
 * differed (the first one told).
 */

static size_t
diff_stream(const char *s, size_t len)
{
    size_t       fails, k, i, c, h, st;
    diff_run_t   r;
    const char  *what;
    llm_usage_t  ua, ub;

    static const size_t  steps[] = { 1, 2, 3, 7, 64 };

    fails = 0;

    for (i = 0; i < nelts(diff_apis); i++) {
        r.api = diff_apis[i];

        for (c = 0; c < nelts(diff_caps); c++) {
            r.cap = diff_caps[c];

            /* the filter cares for the event's bytes, not the buffer's */
            for (h = 0; h < (c == 0 ? diff_hows : diff_filter); h++) {
                r.how = h;
                r.step = 0;

                for (k = 0; k <= len; k++) {
                    r.split = k;

                    what = diff_run(&r, s, len);

                    if (what && fails++ == 0) {
                        diff_diag(&r, what);
                    }
                }

                for (st = 0; st < nelts(steps); st++) {
                    r.split = 0;
                    r.step = steps[st];

                    what = diff_run(&r, s, len);

                    if (what && fails++ == 0) {
                        diff_diag(&r, what);
                    }
                }
            }
        }

        if (llm_sse_usage_from_json(r.api, s, len, &ua)
            != llm_sse_ref_usage_from_json(r.api, s, len, &ub)
            || !diff_usage_same(&ua, &ub))
        {
            fails++;
        }
    }

    return fails;
}


static char *
diff_text(const diff_case_t *c, size_t *len)
{
    char    *d;
    size_t   i, n;

    n = c->len ? c->len : strlen(c->text);

    d = malloc(n + 1);
    if (d == NULL) {
        perror("malloc");
        exit(2);
    }

    for (i = 0; i < n; i++) {
        d[i] = (c->len == 0 && c->text[i] == '\'') ? '"' : c->text[i];
    }

    d[n] = '\0';
    *len = n;

    return d;
}


static void
test_cases(void)
{
    char    *s;
    size_t   i, len;

    for (i = 0; i < nelts(diff_cases); i++) {
        s = diff_text(&diff_cases[i], &len);

        tap_is(diff_stream(s, len), 0, "%s: the same, every way",
               diff_cases[i].name);

        free(s);
    }
}


/*
 * One text event of every length up to LENGTHS bytes of text, with an
 * escape, a quote or an unterminated end at each place in turn: every
 * string and escape across every boundary of the scan, and events
 * shorter and longer than one window.
 */

static void
test_lengths(void)
{
    char         ev[512];
    size_t       fails, n, len, i, k, at, m;
    diff_run_t   r;
    const char  *what;

    static const char  *heads[] = {
        "data: {\"choices\":[{\"delta\":{\"content\":\"",
        "data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"",
        "data: {\"type\":\"response.output_text.delta\",\"delta\":\"",
        "data: {\"usage\":{\"prompt_tokens\":1},\"x\":\""
    };

    static const char  *marks[] = {
        "\\n", "\\u00e9", "\\\"", "\\\\", "\\", "\"", "\\u0041",
        "\\ud83d"
    };

    fails = 0;

    for (i = 0; i < nelts(heads); i++) {
        for (n = 0; n <= LENGTHS; n++) {
            for (at = 0; at <= n; at++) {
                k = (n + at) % nelts(marks);
                m = strlen(marks[k]);

                len = strlen(heads[i]);
                memcpy(ev, heads[i], len);
                memset(ev + len, 'a', at);
                len += at;
                memcpy(ev + len, marks[k], m);
                len += m;
                memset(ev + len, 'b', n - at);
                len += n - at;
                memcpy(ev + len, "\"}}]}\n\n", 8);
                len += 8;

                r.api = diff_apis[(n + at) % nelts(diff_apis)];
                r.how = diff_feed;
                r.cap = BUF_SIZE;
                r.step = 0;
                r.split = len;

                what = diff_run(&r, ev, len);

                if (what == NULL) {
                    r.split = (n * 13 + at) % (len + 1);
                    r.how = (n + at) % diff_hows;
                    what = diff_run(&r, ev, len);
                }

                if (what && fails++ == 0) {
                    diff_diag(&r, what);
                    printf("#   %.*s\n", (int) len, ev);
                }
            }
        }
    }

    tap_is(fails, 0, "a text of every length up to %d, a mark at every "
           "place", LENGTHS);
}


static uint64_t  diff_seed = 0x9e3779b97f4a7c15ULL;


static uint64_t
diff_rand(void)
{
    diff_seed ^= diff_seed >> 12;
    diff_seed ^= diff_seed << 25;
    diff_seed ^= diff_seed >> 27;

    return diff_seed * 0x2545f4914f6cdd1dULL;
}


/* a case changed at random a few times: insertions, bytes, cuts, copies */

static size_t
diff_mutate(char *d, size_t cap, const char *s, size_t len)
{
    size_t       n, i, at, k, m;
    const char  *t;

    memcpy(d, s, len);
    n = len;

    for (i = 1 + diff_rand() % 8; i; i--) {
        at = n ? diff_rand() % (n + 1) : 0;

        switch (diff_rand() % 4) {

        case 0:
            t = diff_tokens[diff_rand() % nelts(diff_tokens)];
            m = strlen(t) ? strlen(t) : 1;

            if (m <= cap - n) {
                memmove(d + at + m, d + at, n - at);
                memcpy(d + at, t, m);
                n += m;
            }

            break;

        case 1:
            if (at < n) {
                d[at] = "\"\\:{}, \n\r\0nu0e5\t"[diff_rand() % 17];
            }

            break;

        case 2:
            m = diff_rand() % 16;
            m = (m > n - at) ? n - at : m;
            memmove(d + at, d + at + m, n - at - m);
            n -= m;
            break;

        default:
            k = n ? diff_rand() % n : 0;
            m = diff_rand() % 80;
            m = (m > n - k) ? n - k : m;

            if (m <= cap - n) {
                memmove(d + at + m, d + at, n - at);
                memmove(d + at, d + k + (k >= at ? m : 0), m);
                n += m;
            }

            break;
        }
    }

    return n;
}


static void
test_mutants(void)
{
    char         *m, *s;
    size_t        fails, i, n, len, j;
    diff_run_t    r;
    const char   *what;
    llm_usage_t   ua, ub;

    m = malloc(8192);
    if (m == NULL) {
        perror("malloc");
        exit(2);
    }

    fails = 0;

    for (i = 0; i < MUTANTS; i++) {
        s = diff_text(&diff_cases[i % nelts(diff_cases)], &len);
        n = diff_mutate(m, 8192, s, len);
        free(s);

        for (j = 0; j < 6; j++) {
            r.api = diff_apis[diff_rand() % nelts(diff_apis)];
            r.cap = diff_caps[diff_rand() % nelts(diff_caps)];
            r.how = (j == 0) ? diff_feed : diff_rand() % diff_hows;
            r.split = (j == 0) ? n : diff_rand() % (n + 1);
            r.step = (j == 1) ? 1 : (j == 2) ? 1 + diff_rand() % 70 : 0;

            what = diff_run(&r, m, n);

            if (what && fails++ == 0) {
                diff_diag(&r, what);
            }
        }

        if (llm_sse_usage_from_json(r.api, m, n, &ua)
            != llm_sse_ref_usage_from_json(r.api, m, n, &ub)
            || !diff_usage_same(&ua, &ub))
        {
            fails++;
        }
    }

    free(m);

    tap_is(fails, 0, "%d mutations of the cases, the same", MUTANTS);
}


int
main(void)
{
    test_cases();
    test_lengths();
    test_mutants();

    return tap_done();
}
