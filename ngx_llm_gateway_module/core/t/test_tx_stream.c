
/*
 * The stream translator: golden streams of each translated pair (backend
 * Chat or Messages, client Chat, Messages or Responses), each fed through
 * llm_sse and the translator whole, split in two at every byte and one
 * byte at a time, must give the golden output byte for byte; that output,
 * read back by llm_sse of the client's dialect and by a reader of its
 * events here, must be a whole stream with the backend's usage, text and
 * tool arguments.  Then the bounds: errors, memory, items, interleaving.
 *
 * The streams are written with ' for " to keep them legible; no stream
 * needs a real '.
 *
 *     test_tx_stream --golden       prints the outputs, to review and paste
 *     test_tx_stream --corpus DIR   writes the streams as fuzzer seeds
 */


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "llm_sse.h"
#include "llm_tx_stream.h"
#include "tap.h"


#define OPENAI          LLM_API_OPENAI
#define ANTHROPIC       LLM_API_ANTHROPIC
#define RESPONSES       LLM_API_RESPONSES

#define BUF_SIZE        16384
#define MEM_MAX         65536


/* what translate() does besides: a smaller llm_sse buffer, a failing out */
static size_t  sse_cap = BUF_SIZE;
static int     fail_after;
static int     last_done;
static uint64_t  last_output;   /* what llm_sse metered of the stream */
static uint64_t  last_input;


typedef struct {
    char       *p;
    size_t      len;
    size_t      cap;
    int         fail_after;     /* out fails on this call, if > 0 */
    int         calls;
} out_t;


typedef struct {
    llm_tx_stream_t  *t;
    out_t            *out;
    int               rc;
    size_t            after_done;    /* bytes written once done */
} feed_t;


typedef struct {
    const char   *name;
    llm_api_e     from;
    llm_api_e     to;
    const char   *stream;
    const char   *golden;
    int           error;          /* the stream ends with an error */
    const char   *text;           /* every text piece, joined */
    const char   *args[2];        /* each tool call's arguments */
    uint64_t      input;          /* the usage the client must read */
    uint64_t      cached;
    uint64_t      output;
    const char   *finish;         /* as llm_sse of the client reads it */
} tx_case_t;


/* the client's stream, read back */
typedef struct {
    llm_api_e     api;
    int           bad;            /* an event that is not JSON */
    int           events;
    char          text[1024];
    char          args[4][256];
    char          done_args[4][256];
    int           tools;
    char          final_text[1024];    /* Responses: the final object's */
    char          final_args[4][256];
} reader_t;


static void reader_final(reader_t *r, const cJSON *resp);


/* backend Chat Completions */

#define CHAT_HEAD                                                             \
    "data: {'id':'chatcmpl-abc','object':'chat.completion.chunk',"            \
    "'created':1718000000,'model':'gpt-4o-2024-08-06',"

#define CHAT_ROLE                                                             \
    CHAT_HEAD "'choices':[{'index':0,'delta':{'role':'assistant',"            \
    "'content':'','refusal':null},'logprobs':null,'finish_reason':null}]}\n\n"

#define CHAT_TEXT(s)                                                          \
    CHAT_HEAD "'choices':[{'index':0,'delta':{'content':'" s "'},"            \
    "'logprobs':null,'finish_reason':null}]}\n\n"

#define CHAT_FINISH(r)                                                        \
    CHAT_HEAD "'choices':[{'index':0,'delta':{},'logprobs':null,"             \
    "'finish_reason':'" r "'}]}\n\n"

#define CHAT_USAGE                                                            \
    CHAT_HEAD "'choices':[],'usage':{'prompt_tokens':120,"                    \
    "'completion_tokens':9,'total_tokens':129,"                               \
    "'prompt_tokens_details':{'cached_tokens':100},"                          \
    "'completion_tokens_details':{'reasoning_tokens':0}}}\n\n"

#define CHAT_TOOL_START(i, id, name)                                          \
    CHAT_HEAD "'choices':[{'index':0,'delta':{'tool_calls':[{'index':" i      \
    ",'id':'" id "','type':'function','function':{'name':'" name "',"         \
    "'arguments':''}}]},'logprobs':null,'finish_reason':null}]}\n\n"

#define CHAT_TOOL_ARGS(i, a)                                                  \
    CHAT_HEAD "'choices':[{'index':0,'delta':{'tool_calls':[{'index':" i      \
    ",'function':{'arguments':'" a "'}}]},'logprobs':null,"                   \
    "'finish_reason':null}]}\n\n"

#define CHAT_DONE       "data: [DONE]\n\n"

static const char  chat_text[] =
    CHAT_ROLE
    CHAT_TEXT("Hello")
    CHAT_TEXT(", \\'world\\'\\n caf\\u00e9")
    CHAT_FINISH("stop")
    CHAT_USAGE
    CHAT_DONE;

static const char  chat_tools[] =
    CHAT_ROLE
    CHAT_TOOL_START("0", "call_Ab1", "get_weather")
    CHAT_TOOL_ARGS("0", "{\\'ci")
    CHAT_TOOL_ARGS("0", "ty\\': \\'Par")
    CHAT_TOOL_ARGS("0", "is\\'}")
    CHAT_TOOL_START("1", "call_Cd2", "get_time")
    CHAT_TOOL_ARGS("1", "{\\'tz\\':")
    CHAT_TOOL_ARGS("1", " \\'CET\\'}")
    CHAT_FINISH("tool_calls")
    CHAT_USAGE
    CHAT_DONE;

static const char  chat_length[] =
    CHAT_ROLE
    CHAT_TEXT("Once upon")
    CHAT_FINISH("length")
    CHAT_USAGE
    CHAT_DONE;

static const char  chat_error[] =
    CHAT_ROLE
    CHAT_TEXT("Half")
    "data: {'error':{'message':'The server had an error','type':"
    "'server_error','param':null,'code':null}}\n\n";


/* backend Messages */

#define MSG_START                                                             \
    "event: message_start\n"                                                  \
    "data: {'type':'message_start','message':{'id':'msg_01X','type':"         \
    "'message','role':'assistant','model':'claude-sonnet-4-5',"               \
    "'content':[],'stop_reason':null,'stop_sequence':null,'usage':"           \
    "{'input_tokens':20,'cache_creation_input_tokens':30,"                    \
    "'cache_read_input_tokens':100,'output_tokens':1}}}\n\n"

#define MSG_BLOCK_TEXT(i)                                                     \
    "event: content_block_start\n"                                            \
    "data: {'type':'content_block_start','index':" i ",'content_block':"      \
    "{'type':'text','text':''}}\n\n"

#define MSG_TEXT(i, s)                                                        \
    "event: content_block_delta\n"                                            \
    "data: {'type':'content_block_delta','index':" i ",'delta':"              \
    "{'type':'text_delta','text':'" s "'}}\n\n"

#define MSG_BLOCK_TOOL(i, id, name)                                           \
    "event: content_block_start\n"                                            \
    "data: {'type':'content_block_start','index':" i ",'content_block':"      \
    "{'type':'tool_use','id':'" id "','name':'" name "','input':{}}}\n\n"

#define MSG_ARGS(i, a)                                                        \
    "event: content_block_delta\n"                                            \
    "data: {'type':'content_block_delta','index':" i ",'delta':"              \
    "{'type':'input_json_delta','partial_json':'" a "'}}\n\n"

#define MSG_STOP_BLOCK(i)                                                     \
    "event: content_block_stop\n"                                             \
    "data: {'type':'content_block_stop','index':" i "}\n\n"

#define MSG_DELTA(r)                                                          \
    "event: message_delta\n"                                                  \
    "data: {'type':'message_delta','delta':{'stop_reason':'" r "',"           \
    "'stop_sequence':null},'usage':{'output_tokens':9}}\n\n"

#define MSG_STOP                                                              \
    "event: message_stop\ndata: {'type':'message_stop'}\n\n"

#define MSG_PING        "event: ping\ndata: {'type':'ping'}\n\n"

static const char  msg_text[] =
    MSG_START
    MSG_PING
    MSG_BLOCK_TEXT("0")
    MSG_TEXT("0", "Hello")
    MSG_TEXT("0", ", \\'world\\'\\n caf\\u00e9")
    MSG_STOP_BLOCK("0")
    MSG_DELTA("end_turn")
    MSG_STOP;

static const char  msg_tools[] =
    MSG_START
    "event: content_block_start\n"
    "data: {'type':'content_block_start','index':0,'content_block':"
    "{'type':'thinking','thinking':''}}\n\n"
    "event: content_block_delta\n"
    "data: {'type':'content_block_delta','index':0,'delta':"
    "{'type':'thinking_delta','thinking':'Let me see'}}\n\n"
    MSG_STOP_BLOCK("0")
    MSG_BLOCK_TOOL("1", "toolu_01A", "get_weather")
    MSG_ARGS("1", "{\\'ci")
    MSG_ARGS("1", "ty\\': \\'Par")
    MSG_ARGS("1", "is\\'}")
    MSG_STOP_BLOCK("1")
    "event: future_event\ndata: {'type':'future_event'}\n\n"
    MSG_BLOCK_TOOL("2", "toolu_01B", "get_time")
    MSG_ARGS("2", "{\\'tz\\':")
    MSG_ARGS("2", " \\'CET\\'}")
    MSG_STOP_BLOCK("2")
    MSG_DELTA("tool_use")
    MSG_STOP;

static const char  msg_length[] =
    MSG_START
    MSG_BLOCK_TEXT("0")
    MSG_TEXT("0", "Once upon")
    MSG_STOP_BLOCK("0")
    MSG_DELTA("max_tokens")
    MSG_STOP;

static const char  msg_error[] =
    MSG_START
    MSG_BLOCK_TEXT("0")
    MSG_TEXT("0", "Half")
    "event: error\n"
    "data: {'type':'error','error':{'type':'overloaded_error',"
    "'message':'Overloaded'}}\n\n";


#define TEXT            "Hello, \"world\"\n caf\xc3\xa9"
#define ARGS0           "{\"city\": \"Paris\"}"
#define ARGS1           "{\"tz\": \"CET\"}"


#include "test_tx_stream_golden.h"


static tx_case_t  cases[] = {

    /* Chat -> Messages: Anthropic's input leaves the cache out */
    { "chat text to messages", OPENAI, ANTHROPIC, chat_text,
      gold_chat_text_messages, 0, TEXT, { NULL, NULL }, 120, 100, 9,
      "end_turn" },
    { "chat tools to messages", OPENAI, ANTHROPIC, chat_tools,
      gold_chat_tools_messages, 0, "", { ARGS0, ARGS1 }, 120, 100, 9,
      "tool_use" },
    { "chat length to messages", OPENAI, ANTHROPIC, chat_length,
      gold_chat_length_messages, 0, "Once upon", { NULL, NULL }, 120, 100,
      9, "max_tokens" },
    { "chat error to messages", OPENAI, ANTHROPIC, chat_error,
      gold_chat_error_messages, 1, "Half", { NULL, NULL }, 0, 0, 0, "" },

    { "chat text to responses", OPENAI, RESPONSES, chat_text,
      gold_chat_text_responses, 0, TEXT, { NULL, NULL }, 120, 100, 9,
      "completed" },
    { "chat tools to responses", OPENAI, RESPONSES, chat_tools,
      gold_chat_tools_responses, 0, "", { ARGS0, ARGS1 }, 120, 100, 9,
      "completed" },
    { "chat length to responses", OPENAI, RESPONSES, chat_length,
      gold_chat_length_responses, 0, "Once upon", { NULL, NULL }, 120, 100,
      9, "max_output_tokens" },
    { "chat error to responses", OPENAI, RESPONSES, chat_error,
      gold_chat_error_responses, 1, "Half", { NULL, NULL }, 0, 0, 0, "" },

    /* Messages -> Chat: 20 + 30 + 100 of prompt, 100 of it cached */
    { "messages text to chat", ANTHROPIC, OPENAI, msg_text,
      gold_msg_text_chat, 0, TEXT, { NULL, NULL }, 150, 100, 9, "stop" },
    { "messages tools to chat", ANTHROPIC, OPENAI, msg_tools,
      gold_msg_tools_chat, 0, "", { ARGS0, ARGS1 }, 150, 100, 9,
      "tool_calls" },
    { "messages length to chat", ANTHROPIC, OPENAI, msg_length,
      gold_msg_length_chat, 0, "Once upon", { NULL, NULL }, 150, 100, 9,
      "length" },
    { "messages error to chat", ANTHROPIC, OPENAI, msg_error,
      gold_msg_error_chat, 1, "Half", { NULL, NULL }, 0, 0, 0, "" },

    { "messages text to responses", ANTHROPIC, RESPONSES, msg_text,
      gold_msg_text_responses, 0, TEXT, { NULL, NULL }, 150, 100, 9,
      "completed" },
    { "messages tools to responses", ANTHROPIC, RESPONSES, msg_tools,
      gold_msg_tools_responses, 0, "", { ARGS0, ARGS1 }, 150, 100, 9,
      "completed" },
    { "messages length to responses", ANTHROPIC, RESPONSES, msg_length,
      gold_msg_length_responses, 0, "Once upon", { NULL, NULL }, 150, 100,
      9, "max_output_tokens" },
    { "messages error to responses", ANTHROPIC, RESPONSES, msg_error,
      gold_msg_error_responses, 1, "Half", { NULL, NULL }, 0, 0, 0, "" },

    { NULL, 0, 0, NULL, NULL, 0, NULL, { NULL, NULL }, 0, 0, 0, NULL }
};


static char *
quotes(const char *s)
{
    char    *d;
    size_t   i, n;

    n = strlen(s);
    d = malloc(n + 1);

    for (i = 0; i <= n; i++) {
        d[i] = (s[i] == '\'') ? '"' : s[i];
    }

    return d;
}


static int
out_add(void *ctx, const char *p, size_t len)
{
    out_t  *o;

    o = ctx;
    o->calls++;

    if (o->fail_after && o->calls >= o->fail_after) {
        return -1;
    }

    if (o->len + len + 1 > o->cap) {
        o->cap = (o->len + len + 1) * 2;
        o->p = realloc(o->p, o->cap);
    }

    memcpy(o->p + o->len, p, len);
    o->len += len;
    o->p[o->len] = '\0';

    return 0;
}


static char *
mem_grow(void *ctx, char *old, size_t len, size_t size)
{
    return realloc(old, size);
}


static void
on_event(void *ctx, const char *event, size_t event_len, const char *data,
    size_t len, unsigned skipped)
{
    size_t   before;
    feed_t  *f;

    f = ctx;

    if (f->rc != 0) {
        return;
    }

    before = f->out->len;

    if (llm_tx_stream_done(f->t)) {
        f->rc = llm_tx_stream_event(f->t, event, event_len, data, len,
                                    skipped, out_add, f->out);
        f->after_done += f->out->len - before;
        return;
    }

    f->rc = llm_tx_stream_event(f->t, event, event_len, data, len, skipped,
                                out_add, f->out);
}


static void
conf(llm_tx_conf_t *cf, llm_api_e from, llm_api_e to)
{
    memset(cf, 0, sizeof(llm_tx_conf_t));

    cf->from = from;
    cf->to = to;
    cf->model = "my-model";
    cf->model_len = 8;
    cf->id = "req-42";
    cf->id_len = 6;
    cf->created = 1718000000;
    cf->est_input = 90;
    cf->max_tokens = 1024;
    cf->grow = mem_grow;
    cf->max = MEM_MAX;
    cf->include_usage = 1;
}


/*
 * Feeds s through llm_sse (yield mode, as the gateway does) in pieces of
 * step bytes after a first of split; returns the client's bytes (malloc'd).
 */

static char *
translate(const llm_tx_conf_t *cf, const char *s, size_t split, size_t step,
    int *rc, size_t *after_done)
{
    char             *buf;
    size_t            len, off, n, used;
    out_t             out;
    feed_t            f;
    llm_sse_t         p;
    llm_tx_conf_t     mcf;
    llm_tx_stream_t   t;

    buf = malloc(sse_cap);
    memset(&out, 0, sizeof(out_t));
    out_add(&out, "", 0);
    out.calls = 0;
    out.fail_after = fail_after;

    /* as the gateway has it: the figures shown are the meter's */
    mcf = *cf;
    mcf.meter = &p.usage;
    llm_tx_stream_init(&t, &mcf);

    f.t = &t;
    f.out = &out;
    f.rc = 0;
    f.after_done = 0;

    llm_sse_init(&p, cf->from, buf, sse_cap);
    p.yield = 1;
    p.on_event = on_event;
    p.event_ctx = &f;

    len = strlen(s);
    off = 0;

    while (off < len) {
        n = (off == 0 && split) ? split : step;
        n = (n > len - off) ? len - off : n;

        while (n) {
            used = llm_sse_feed(&p, s + off, n);
            off += used;
            n -= used;
        }
    }

    llm_sse_finish(&p);

    last_done = llm_tx_stream_done(&t);
    last_output = p.usage.output_tokens;
    last_input = p.usage.input_tokens;

    free(t.mem);
    free(buf);

    *rc = f.rc;

    if (after_done) {
        *after_done = f.after_done;
    }

    return out.p;
}


/* the client's events, read back */

/* an index as the client reads it: -1 when it is not a number */
static int
reader_int(const cJSON *j)
{
    return cJSON_IsNumber(j) ? j->valueint : -1;
}


static void
reader_event(void *ctx, const char *event, size_t event_len,
    const char *data, size_t len, unsigned skipped)
{
    int           i;
    cJSON        *root;
    reader_t     *r;
    const char   *type, *s;
    const cJSON  *item, *call;

    r = ctx;
    r->events++;

    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        return;
    }

    root = cJSON_ParseWithLength(data, len);

    if (!cJSON_IsObject(root)) {
        r->bad++;
        cJSON_Delete(root);
        return;
    }

    item = cJSON_GetObjectItemCaseSensitive(root, "type");
    type = cJSON_IsString(item) ? item->valuestring : "";

    switch (r->api) {

    case OPENAI:
        item = cJSON_GetObjectItemCaseSensitive(root, "choices");
        item = cJSON_GetArrayItem(item, 0);
        item = cJSON_GetObjectItemCaseSensitive(item, "delta");

        s = cJSON_GetStringValue(cJSON_GetObjectItem(item, "content"));
        if (s) {
            strcat(r->text, s);
        }

        cJSON_ArrayForEach(call, cJSON_GetObjectItem(item, "tool_calls")) {
            i = reader_int(cJSON_GetObjectItem(call, "index"));
            s = cJSON_GetStringValue(cJSON_GetObjectItem(
                    cJSON_GetObjectItem(call, "function"), "arguments"));

            if (i >= 0 && i < 4 && s) {
                strcat(r->args[i], s);
                r->tools = (i + 1 > r->tools) ? i + 1 : r->tools;
            }
        }

        break;

    case ANTHROPIC:
        if (strcmp(type, "content_block_delta") != 0) {
            break;
        }

        item = cJSON_GetObjectItemCaseSensitive(root, "delta");
        s = cJSON_GetStringValue(cJSON_GetObjectItem(item, "text"));

        if (s) {
            strcat(r->text, s);
        }

        s = cJSON_GetStringValue(cJSON_GetObjectItem(item, "partial_json"));
        i = reader_int(cJSON_GetObjectItem(root, "index"));

        /* the tools are the blocks after the text, if any */
        if (s && i >= 0 && i < 4) {
            strcat(r->args[i], s);
            r->tools = (i + 1 > r->tools) ? i + 1 : r->tools;
        }

        break;

    default:
        i = reader_int(cJSON_GetObjectItem(root, "output_index"));
        i = (i >= 0 && i < 4) ? i : 0;

        if (strcmp(type, "response.output_text.delta") == 0) {
            strcat(r->text, cJSON_GetStringValue(
                                cJSON_GetObjectItem(root, "delta")));

        } else if (strcmp(type, "response.function_call_arguments.delta")
                   == 0)
        {
            strcat(r->args[i], cJSON_GetStringValue(
                                   cJSON_GetObjectItem(root, "delta")));
            r->tools = (i + 1 > r->tools) ? i + 1 : r->tools;

        } else if (strcmp(type, "response.function_call_arguments.done")
                   == 0)
        {
            strcat(r->done_args[i], cJSON_GetStringValue(
                                        cJSON_GetObjectItem(root,
                                                            "arguments")));

        } else if (strncmp(type, "response.", 9) == 0) {
            reader_final(r, cJSON_GetObjectItem(root, "response"));
        }

        break;
    }

    cJSON_Delete(root);
}


/* the output of Responses' final object: its texts and arguments */

static void
reader_final(reader_t *r, const cJSON *resp)
{
    int           n;
    const char   *s;
    const cJSON  *item, *part;

    n = 0;

    cJSON_ArrayForEach(item, cJSON_GetObjectItem(resp, "output")) {
        s = cJSON_GetStringValue(cJSON_GetObjectItem(item, "arguments"));

        if (s && n < 4) {
            strcat(r->final_args[n++], s);
        }

        cJSON_ArrayForEach(part, cJSON_GetObjectItem(item, "content")) {
            s = cJSON_GetStringValue(cJSON_GetObjectItem(part, "text"));

            if (s) {
                strcat(r->final_text, s);
            }
        }
    }
}


/* the arguments of the n-th tool call the client saw */

static const char *
reader_args(reader_t *r, int n)
{
    int  i;

    for (i = 0; i < 4; i++) {
        if (r->args[i][0] && n-- == 0) {
            return r->args[i];
        }
    }

    return "";
}


static void
check_client(const tx_case_t *c, const char *out)
{
    int        i;
    char      *buf;
    reader_t   r;
    llm_sse_t  p;

    buf = malloc(BUF_SIZE * 4);

    memset(&r, 0, sizeof(reader_t));
    r.api = c->to;

    llm_sse_init(&p, c->to, buf, BUF_SIZE * 4);
    p.on_event = reader_event;
    p.event_ctx = &r;

    llm_sse_feed(&p, out, strlen(out));
    llm_sse_finish(&p);

    tap_is(r.bad, 0, "%s: every client event is JSON", c->name);
    tap_is(llm_sse_pending(&p), 0, "%s: the client's stream ends between "
           "events", c->name);

    if (c->error) {
        tap_ok(p.usage.error, "%s: the client reads an error", c->name);
        tap_is_str(r.text, c->text, "%s: the text before it", c->name);
        free(buf);
        return;
    }

    tap_ok(p.usage.done, "%s: the client's stream is done", c->name);
    tap_ok(p.usage.have_usage, "%s: with its usage", c->name);
    tap_is(p.usage.input_tokens, c->input, "%s: input tokens", c->name);
    tap_is(p.usage.cached_input_tokens, c->cached, "%s: cached tokens",
           c->name);
    tap_is(p.usage.output_tokens, c->output, "%s: output tokens", c->name);
    tap_is_str(p.usage.finish_reason, c->finish, "%s: finish reason",
               c->name);
    tap_is_str(r.text, c->text, "%s: the text", c->name);

    if (c->to == RESPONSES) {
        tap_is_str(r.final_text, c->text, "%s: the text in the response",
                   c->name);
    }

    for (i = 0; i < 2; i++) {
        if (c->args[i]) {
            tap_is_str(reader_args(&r, i), c->args[i],
                       "%s: tool call %d's arguments", c->name, i);

            if (c->to == RESPONSES) {
                tap_is_str(r.done_args[i], c->args[i],
                           "%s: tool call %d's arguments done", c->name, i);
                tap_is_str(r.final_args[i], c->args[i],
                           "%s: tool call %d's arguments in the response",
                           c->name, i);
            }
        }
    }

    free(buf);
}


static void
test_case(const tx_case_t *c)
{
    int             rc, same;
    char           *stream, *golden, *got, *again;
    size_t          len, split, after;
    llm_tx_conf_t   cf;

    conf(&cf, c->from, c->to);

    stream = quotes(c->stream);
    golden = quotes(c->golden);

    got = translate(&cf, stream, 0, (size_t) -1, &rc, &after);

    tap_is(rc, 0, "%s: translated", c->name);
    tap_is(after, 0, "%s: nothing after done", c->name);

    if (!tap_ok(strcmp(got, golden) == 0, "%s: the golden output", c->name)) {
        printf("# got:\n%s\n", got);
    }

    check_client(c, got);

    len = strlen(stream);
    same = 1;

    for (split = 1; split < len && same; split++) {
        again = translate(&cf, stream, split, (size_t) -1, &rc, NULL);
        same = (rc == 0 && strcmp(again, golden) == 0);

        if (!same) {
            printf("# split at %zu:\n%s\n", split, again);
        }

        free(again);
    }

    tap_ok(same, "%s: the same split at every byte", c->name);

    again = translate(&cf, stream, 0, 1, &rc, NULL);
    tap_ok(rc == 0 && strcmp(again, golden) == 0,
           "%s: the same byte by byte", c->name);
    free(again);

    free(got);
    free(stream);
    free(golden);
}


/* the bounds and the odd streams */

static char *
run(llm_tx_conf_t *cf, const char *stream, int *rc)
{
    char  *s, *got;

    s = quotes(stream);
    got = translate(cf, s, 0, (size_t) -1, rc, NULL);
    free(s);

    return got;
}


/* the last "name":N of the client's bytes, -1 if none */

static long long
figure(const char *s, const char *name)
{
    char         key[64];
    long long    v;
    const char  *p;

    snprintf(key, sizeof(key), "\"%s\":", name);
    v = -1;

    for (p = s; (p = strstr(p, key)) != NULL; p++) {
        v = strtoll(p + strlen(key), NULL, 10);
    }

    return v;
}


static int
count(const char *s, const char *what)
{
    int  n;

    for (n = 0; (s = strstr(s, what)) != NULL; s++) {
        n++;
    }

    return n;
}


static void
test_errors(void)
{
    int            rc;
    char          *got, *big;
    llm_tx_conf_t  cf;

    conf(&cf, OPENAI, ANTHROPIC);

    /* invalid JSON: the open block closed, the error, then nothing */
    got = run(&cf, CHAT_ROLE CHAT_TEXT("Hi") "data: {'choices':[\n\n"
                   CHAT_TEXT("more") CHAT_FINISH("stop") CHAT_DONE, &rc);
    tap_is(rc, 0, "invalid JSON: not a failure");
    tap_ok(last_done, "invalid JSON: done");
    tap_ok(strstr(got, "event: content_block_stop\ndata: {\"type\":"
                  "\"content_block_stop\",\"index\":0}\n\nevent: error\n"
                  "data: {\"type\":\"error\",\"error\":{\"type\":"
                  "\"api_error\",\"message\":\"invalid upstream event\"}}"
                  "\n\n") != NULL,
           "invalid JSON: block stop, then the error event");
    tap_is(count(got, "more"), 0, "invalid JSON: nothing after it");
    tap_is(count(got, "message_stop"), 0, "invalid JSON: no message_stop");
    free(got);

    conf(&cf, ANTHROPIC, OPENAI);
    got = run(&cf, MSG_START "event: content_block_start\ndata: {\n\n"
                   MSG_STOP, &rc);
    tap_ok(rc == 0 && last_done
           && strstr(got, "data: {\"error\":{\"message\":\"invalid upstream "
                     "event\"") != NULL
           && count(got, "[DONE]") == 0,
           "invalid JSON from Messages: Chat's error, no [DONE]");
    free(got);

    /* an event larger than llm_sse's buffer */
    conf(&cf, OPENAI, RESPONSES);
    sse_cap = 128;
    got = run(&cf, CHAT_ROLE, &rc);
    tap_ok(rc == 0 && strstr(got, "too large") != NULL,
           "the role chunk itself is too large for 128 bytes");
    free(got);
    sse_cap = 200;
    big = quotes(CHAT_ROLE CHAT_TEXT("0123456789012345678901234567890"));
    got = translate(&cf, big, 0, (size_t) -1, &rc, NULL);
    sse_cap = BUF_SIZE;
    tap_ok(rc == 0 && last_done
           && strstr(got, "event: error\ndata: {\"type\":\"error\","
                     "\"sequence_number\":0,"
                     "\"code\":\"upstream_error\",\"message\":\"upstream "
                     "event too large\"") != NULL,
           "an event too large for llm_sse: the error event, done");
    free(got);
    free(big);

    /* the backend's own error, first: no start before it */
    conf(&cf, ANTHROPIC, OPENAI);
    got = run(&cf, "event: error\ndata: {'type':'error','error':{'type':"
                   "'rate_limit_error','message':'Slow \\'down\\''}}\n\n",
              &rc);
    tap_is_str(got, "data: {\"error\":{\"message\":\"Slow \\\"down\\\"\","
               "\"type\":\"rate_limit_error\",\"param\":null,"
               "\"code\":null}}\n\n",
               "a first error: Chat's error alone, its message escaped");
    free(got);

    got = run(&cf, MSG_START "event: error\ndata: {'error':{'type':"
                   "'api_error','message':'Internal'}}\n\n", &rc);
    tap_ok(last_done && strstr(got, "data: {\"error\":{\"message\":"
                               "\"Internal\",\"type\":\"server_error\"")
                        != NULL,
           "an error event without its type: the event line says it");
    free(got);

    /*
     * A backend whose event line and data disagree: the client is sent
     * what the meter reads, the event line's message_ and error events
     */
    got = run(&cf, MSG_START MSG_BLOCK_TEXT("0") MSG_TEXT("0", "Hi")
                   "event: message_stop\ndata: {'type':'content_block_delta',"
                   "'index':0,'delta':{'type':'text_delta','text':'unbilled'}}"
                   "\n\n" MSG_TEXT("0", "after") MSG_DELTA("end_turn"),
              &rc);
    tap_ok(rc == 0 && count(got, "unbilled") == 0 && count(got, "after") == 0
           && count(got, "[DONE]") == 1,
           "message_stop over a text delta's data: the stream ends there");
    free(got);

    got = run(&cf, MSG_START MSG_BLOCK_TEXT("0")
                   "event: message_delta\ndata: {'type':'content_block_delta',"
                   "'index':0,'delta':{'type':'text_delta','text':'unbilled'},"
                   "'usage':{'output_tokens':7}}\n\n"
                   MSG_STOP_BLOCK("0") MSG_STOP, &rc);
    tap_ok(rc == 0 && count(got, "unbilled") == 0
           && strstr(got, "\"completion_tokens\":7,") != NULL
           && last_output == 7,
           "message_delta over a text delta's data: its usage, no text, "
           "as metered");
    free(got);

    got = run(&cf, MSG_START MSG_BLOCK_TEXT("0") MSG_TEXT("0", "Hi")
                   "event: content_block_delta\ndata: {'type':'message_delta',"
                   "'delta':{'stop_reason':'end_turn'},'usage':"
                   "{'output_tokens':5}}\n\n" MSG_STOP, &rc);
    tap_ok(rc == 0 && strstr(got, "\"completion_tokens\":5,") != NULL
           && last_output == 5,
           "a delta's event line over message_delta's data: the data's "
           "type, as metered");
    free(got);

    got = run(&cf, MSG_START MSG_BLOCK_TEXT("0")
                   "event: error\ndata: {'type':'content_block_delta',"
                   "'index':0,'delta':{'type':'text_delta','text':'unbilled'}}"
                   "\n\n", &rc);
    tap_ok(rc == 0 && last_done && count(got, "unbilled") == 0
           && strstr(got, "data: {\"error\":") != NULL,
           "error over a text delta's data: the error");
    free(got);

    got = run(&cf, MSG_START MSG_BLOCK_TEXT("0") MSG_TEXT("0", "Hi")
                   MSG_STOP_BLOCK("0") MSG_DELTA("end_turn")
                   "event: message_stop\ndata: x\n\n", &rc);
    tap_ok(rc == 0 && last_done && count(got, "[DONE]") == 1
           && count(got, "error") == 0,
           "message_stop whose data is not JSON: the end, as metered");
    free(got);

    got = run(&cf, MSG_START MSG_BLOCK_TEXT("0") MSG_TEXT("0", "Hi")
                   "event: response.completed\ndata: {'type':'message_delta',"
                   "'delta':{'stop_reason':'end_turn'},'usage':"
                   "{'output_tokens':500}}\n\n" MSG_STOP_BLOCK("0")
                   MSG_DELTA("end_turn") MSG_STOP, &rc);
    tap_is(figure(got, "completion_tokens"), (long long) last_output,
           "a Responses end's name over message_delta's data: the figure "
           "the meter took (%llu)", (unsigned long long) last_output);
    free(got);

    /* figures that go down, or above what holds them: shown as metered */
    got = run(&cf, "event: message_start\ndata: {'type':'message_start',"
                   "'message':{'usage':{'input_tokens':100,"
                   "'output_tokens':1}}}\n\n" MSG_BLOCK_TEXT("0")
                   MSG_TEXT("0", "Hi") MSG_STOP_BLOCK("0")
                   "event: message_delta\ndata: {'type':'message_delta',"
                   "'delta':{'stop_reason':'end_turn'},'usage':"
                   "{'input_tokens':3,'output_tokens':2}}\n\n" MSG_STOP,
              &rc);
    tap_ok(last_input == 100
           && figure(got, "prompt_tokens") == (long long) last_input,
           "an input figure that goes down: the meter's, the larger");
    free(got);

    got = run(&cf, "event: message_start\ndata: {'type':'message_start',"
                   "'message':{'usage':{'input_tokens':100000000,"
                   "'cache_read_input_tokens':100000000,"
                   "'cache_creation_input_tokens':500000000,"
                   "'output_tokens':1}}}\n\n" MSG_DELTA("end_turn")
                   MSG_STOP, &rc);
    tap_ok(figure(got, "prompt_tokens") == (long long) last_input
           && last_input == LLM_USAGE_TOKENS_MAX
           && figure(got, "cached_tokens") <= (long long) last_input,
           "a prompt whose parts sum above the most: clamped as metered");
    free(got);

    got = run(&cf, MSG_START MSG_BLOCK_TEXT("0") MSG_TEXT("0", "Hi")
                   "event: response.completed\ndata: x\n\n"
                   MSG_TEXT("0", "more") MSG_STOP_BLOCK("0")
                   MSG_DELTA("end_turn") MSG_STOP, &rc);
    tap_ok(rc == 0 && count(got, "more") == 1 && count(got, "error") == 0
           && count(got, "[DONE]") == 1,
           "a Responses end's name with data not JSON: skipped, as metered");
    free(got);

    got = run(&cf, MSG_START MSG_BLOCK_TEXT("0")
                   "event: error\ndata: x\n\n", &rc);
    tap_ok(last_done && strstr(got, "\"message\":\"upstream error\"")
                        != NULL,
           "an error by its name, its data not JSON: the error");
    free(got);

    /* the output held to what the request could make, as settled */
    cf.output_bound = 6;
    got = run(&cf, MSG_START MSG_BLOCK_TEXT("0") MSG_TEXT("0", "Hi")
                   MSG_STOP_BLOCK("0") MSG_DELTA("end_turn") MSG_STOP, &rc);
    tap_ok(figure(got, "completion_tokens") == 6 && last_output == 9,
           "an output above the request's bound: the bound, as billed");
    free(got);
    cf.output_bound = 0;

    conf(&cf, OPENAI, RESPONSES);
    got = run(&cf, CHAT_ROLE CHAT_TEXT("Hi") CHAT_FINISH("stop")
                   "data: {'id':'c','object':'chat.completion.chunk',"
                   "'choices':[],'usage':{'prompt_tokens':5,"
                   "'completion_tokens':3,'total_tokens':8,"
                   "'completion_tokens_details':{'reasoning_tokens':900}}}"
                   "\n\n" CHAT_DONE, &rc);
    tap_ok(figure(got, "reasoning_tokens") == 3
           && figure(got, "output_tokens") == 3,
           "reasoning above the output: the output, as metered");
    free(got);

    conf(&cf, ANTHROPIC, OPENAI);
    cf.model = NULL;
    got = run(&cf, "event: message_start\ndata: {'type':'message_start',"
                   "'message':{}}\n\n", &rc);
    tap_ok(strstr(got, "\"model\":\"\"") != NULL,
           "no model from the backend nor the client: an empty one");
    free(got);

    conf(&cf, OPENAI, ANTHROPIC);
    got = run(&cf, "data: {'error':{'message':'Rate limit reached','type':"
                   "'requests','code':'rate_limit_exceeded'}}\n\n", &rc);
    tap_is_str(got, "event: error\ndata: {\"type\":\"error\",\"error\":"
               "{\"type\":\"api_error\",\"message\":\"Rate limit reached\"}}"
               "\n\n", "an OpenAI type Anthropic lacks: api_error");
    free(got);
}


static void
test_tools(void)
{
    int            rc, i;
    char          *got, *s;
    size_t         n;
    llm_tx_conf_t  cf;

    conf(&cf, OPENAI, ANTHROPIC);

    /* 0, 1, then 0 again: Messages blocks cannot interleave */
    got = run(&cf, CHAT_ROLE CHAT_TOOL_START("0", "call_a", "f")
                   CHAT_TOOL_ARGS("0", "{")
                   CHAT_TOOL_START("1", "call_b", "g")
                   CHAT_TOOL_ARGS("0", "}") CHAT_DONE, &rc);
    tap_ok(rc == 0 && last_done
           && strstr(got, "\"message\":\"interleaved tool calls\"") != NULL
           && count(got, "event: content_block_stop") == 2
           && count(got, "message_stop") == 0,
           "a piece of a closed tool call: both blocks closed, the error");
    free(got);

    /* a tool index beyond the bits kept */
    got = run(&cf, CHAT_ROLE CHAT_TOOL_START("63", "call_a", "f")
                   CHAT_TOOL_START("64", "call_b", "g") CHAT_DONE, &rc);
    tap_ok(rc == 0 && count(got, "\"id\":\"call_a\"") == 1
           && strstr(got, "tool call index out of range") != NULL,
           "tool index 63 is taken, 64 is an error");
    free(got);

    /* no id: one derived from the request id, the same every time */
    got = run(&cf, CHAT_ROLE
                   CHAT_HEAD "'choices':[{'index':0,'delta':{'tool_calls':"
                   "[{'index':0,'function':{'name':'f','arguments':'{}'}}]},"
                   "'finish_reason':null}]}\n\n" CHAT_DONE, &rc);
    s = strstr(got, "\"id\":\"toolu_");
    tap_ok(s != NULL && strlen(s) > 28 && s[28] == '"',
           "a tool call without an id gets toolu_ and 16 hex digits");
    s = run(&cf, CHAT_ROLE
                 CHAT_HEAD "'choices':[{'index':0,'delta':{'tool_calls':"
                 "[{'index':0,'function':{'name':'f','arguments':'{}'}}]},"
                 "'finish_reason':null}]}\n\n" CHAT_DONE, &rc);
    tap_is_str(s, got, "the same request: the same ids");
    free(s);
    cf.id = "req-43";
    s = run(&cf, CHAT_ROLE
                 CHAT_HEAD "'choices':[{'index':0,'delta':{'tool_calls':"
                 "[{'index':0,'function':{'name':'f','arguments':'{}'}}]},"
                 "'finish_reason':null}]}\n\n" CHAT_DONE, &rc);
    tap_ok(strcmp(s, got) != 0, "another request: other ids");
    free(s);
    free(got);

    /* Responses keeps LLM_TX_STREAM_ITEMS items, and refuses one more */
    conf(&cf, OPENAI, RESPONSES);
    n = 0;
    s = malloc(65536);
    n += sprintf(s, "%s", CHAT_ROLE);

    for (i = 0; i <= LLM_TX_STREAM_ITEMS; i++) {
        n += sprintf(s + n, CHAT_HEAD "'choices':[{'index':0,'delta':"
                     "{'tool_calls':[{'index':%d,'id':'call_%d','function':"
                     "{'name':'f','arguments':'{}'}}]}}]}\n\n", i, i);
    }

    sprintf(s + n, "%s", CHAT_FINISH("tool_calls") CHAT_USAGE CHAT_DONE);
    got = run(&cf, s, &rc);
    tap_ok(rc == 0 && last_done
           && count(got, "event: response.output_item.added")
              == LLM_TX_STREAM_ITEMS
           && strstr(got, "too many output items") != NULL
           && count(got, "event: response.completed") == 0,
           "Responses: %d items, then an error", LLM_TX_STREAM_ITEMS);
    free(got);
    free(s);
}


static char *
no_grow(void *ctx, char *old, size_t len, size_t size)
{
    return NULL;
}


static void
test_memory(void)
{
    int            rc;
    char          *got, *s, *p;
    size_t         i;
    llm_tx_conf_t  cf;

    /* the texts Responses keeps: at most cf->max bytes */
    conf(&cf, ANTHROPIC, RESPONSES);
    cf.max = 2048;

    s = malloc(8192);
    p = s + sprintf(s, "%s", MSG_START MSG_BLOCK_TEXT("0"));

    for (i = 0; i < 3; i++) {
        p += sprintf(p, MSG_TEXT("0", "%0700d"), 0);
    }

    sprintf(p, "%s", MSG_STOP_BLOCK("0") MSG_DELTA("end_turn") MSG_STOP);

    got = run(&cf, s, &rc);
    tap_is(rc, -1, "Responses: text beyond cf->max fails the translation");
    tap_is(count(got, "event: response.output_text.delta"), 2,
           "the two deltas that fitted were sent");
    free(got);

    cf.max = 4096;
    got = run(&cf, s, &rc);
    tap_ok(rc == 0 && last_done && count(got, "event: response.completed") == 1,
           "the same text within cf->max is translated");
    free(got);

    cf.grow = no_grow;
    got = run(&cf, s, &rc);
    tap_is(rc, -1, "memory that cannot grow fails the translation");
    free(got);

    cf.grow = NULL;
    got = run(&cf, s, &rc);
    tap_is(rc, -1, "no memory at all fails it too");
    free(got);

    /* the text is not kept for the other clients */
    conf(&cf, ANTHROPIC, OPENAI);
    cf.grow = NULL;
    cf.max = 0;
    got = run(&cf, s, &rc);
    tap_ok(rc == 0 && last_done, "Chat keeps nothing: no memory needed");
    free(got);

    /* out fails: -1, then -1 for every later event */
    fail_after = 2;
    got = run(&cf, s, &rc);
    fail_after = 0;
    tap_is(rc, -1, "out failing fails the translation");
    tap_is_str(got, "data: {\"id\":\"chatcmpl-7d80362b080ad6d8\",\"object\":"
               "\"chat.completion.chunk\",\"created\":1718000000,\"model\":"
               "\"claude-sonnet-4-5\",\"choices\":[{\"index\":0,\"delta\":"
               "{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,"
               "\"finish_reason\":null}]}\n\n",
               "and nothing is written after it");
    free(got);
    free(s);
}


static void
test_streams(void)
{
    int            rc;
    char          *got, *s;
    llm_tx_conf_t  cf;

    /* no usage chunk: message_delta at [DONE], with what is known */
    conf(&cf, OPENAI, ANTHROPIC);
    got = run(&cf, CHAT_ROLE CHAT_TEXT("Hi") CHAT_FINISH("content_filter")
                   CHAT_DONE, &rc);
    tap_ok(strstr(got, "{\"stop_reason\":\"refusal\",\"stop_sequence\":null},"
                  "\"usage\":{\"input_tokens\":0,"
                  "\"cache_creation_input_tokens\":0,"
                  "\"cache_read_input_tokens\":0,\"output_tokens\":0}}\n\n"
                  "event: message_stop\n") != NULL,
           "[DONE] without usage: message_delta, then message_stop");
    free(got);

    /* the usage in the finish chunk: message_delta at [DONE], which may
       follow a usage that raises it */
    got = run(&cf, CHAT_ROLE
                   CHAT_HEAD "'choices':[{'index':0,'delta':{},"
                   "'finish_reason':'function_call'}],'usage':"
                   "{'prompt_tokens':5,'completion_tokens':3}}\n\n", &rc);
    tap_ok(count(got, "message_delta") == 0 && !last_done,
           "the usage with the finish: no message_delta before [DONE]");
    free(got);
    got = run(&cf, CHAT_ROLE
                   CHAT_HEAD "'choices':[{'index':0,'delta':{},"
                   "'finish_reason':'function_call'}],'usage':"
                   "{'prompt_tokens':5,'completion_tokens':3}}\n\n"
                   CHAT_HEAD "'choices':[],'usage':{'prompt_tokens':5,"
                   "'completion_tokens':40}}\n\n" CHAT_DONE, &rc);
    tap_ok(strstr(got, "\"stop_reason\":\"tool_use\"") != NULL
           && strstr(got, "\"input_tokens\":5,") != NULL
           && figure(got, "output_tokens") == 40
           && (long long) last_output == 40 && last_done,
           "a usage repeated after the finish: message_delta at [DONE], "
           "the larger, as metered");
    free(got);

    /* the first event gives the client its first at once */
    got = run(&cf, CHAT_ROLE, &rc);
    tap_ok(strncmp(got, "event: message_start\n", 21) == 0,
           "the first chunk gives message_start at once");
    free(got);

    /* stop reasons Chat has no name for */
    conf(&cf, ANTHROPIC, OPENAI);
    got = run(&cf, MSG_START MSG_DELTA("refusal") MSG_STOP, &rc);
    tap_ok(strstr(got, "\"finish_reason\":\"content_filter\"") != NULL,
           "refusal is content_filter");
    free(got);
    got = run(&cf, MSG_START MSG_DELTA("pause_turn") MSG_STOP, &rc);
    tap_ok(strstr(got, "\"finish_reason\":\"stop\"") != NULL,
           "pause_turn is stop");
    free(got);
    got = run(&cf, MSG_START MSG_DELTA("stop_sequence") MSG_STOP, &rc);
    tap_ok(strstr(got, "\"finish_reason\":\"stop\"") != NULL,
           "stop_sequence is stop");
    free(got);

    /* without include_usage, no usage chunk */
    cf.include_usage = 0;
    got = run(&cf, MSG_START MSG_BLOCK_TEXT("0") MSG_TEXT("0", "x")
                   MSG_STOP_BLOCK("0") MSG_DELTA("end_turn") MSG_STOP, &rc);
    tap_ok(count(got, "\"usage\"") == 0 && count(got, "[DONE]") == 1,
           "include_usage off: no usage chunk");
    free(got);

    /* a delta before message_start, unknown and odd events */
    cf.include_usage = 1;
    got = run(&cf, MSG_PING MSG_TEXT("0", "x")
                   "event: content_block_start\ndata: {'type':"
                   "'content_block_start','index':0}\n\n"
                   "data: {'no_type':1}\n\n"
                   "event: message_delta\ndata: {'type':'message_delta',"
                   "'delta':{}}\n\n" MSG_STOP, &rc);
    tap_ok(rc == 0 && last_done && count(got, "\"role\":\"assistant\"") == 1
           && count(got, "\"finish_reason\":\"stop\"") == 1,
           "odd events: a start, a stop, [DONE]");
    free(got);

    /* a text larger than the output buffer, escaped across its flushes */
    conf(&cf, OPENAI, ANTHROPIC);
    s = malloc(16384);
    sprintf(s, "%s" CHAT_HEAD "'choices':[{'index':0,'delta':{'content':'",
            CHAT_ROLE);

    while (strlen(s) < 12000) {
        strcat(s, "ab\\n\\u0001\\'");
    }

    strcat(s, "'}}]}\n\n" CHAT_DONE);
    got = run(&cf, s, &rc);
    tap_ok(rc == 0 && last_done && count(got, "ab\\n\\u0001\\\"") > 800,
           "a long text: escaped whole across the output buffer");
    free(got);
    free(s);
}


static int
test_abort_one(llm_api_e from, llm_api_e to, const char *stream,
    const char *want)
{
    int              ok;
    char            *s, *d;
    out_t            out;
    llm_tx_conf_t    cf;
    llm_tx_stream_t  t;

    conf(&cf, from, to);
    llm_tx_stream_init(&t, &cf);

    memset(&out, 0, sizeof(out_t));
    s = quotes(stream);

    /* one event is enough: the translator is fed events, not bytes */
    d = strstr(s, "data: ") + 6;
    llm_tx_stream_event(&t, "", 0, d, strlen(d) - 2, 0, out_add, &out);
    out.len = 0;

    if (out.p) {
        out.p[0] = '\0';
    }

    ok = llm_tx_stream_abort(&t, out_add, &out) == 0
         && strcmp(out.p ? out.p : "", want) == 0
         && llm_tx_stream_done(&t);

    free(out.p);
    free(s);
    free(t.mem);

    return ok;
}


static void
test_abort(void)
{
    tap_ok(test_abort_one(OPENAI, ANTHROPIC, CHAT_TEXT("Hi"),
                          "event: content_block_stop\ndata: {\"type\":"
                          "\"content_block_stop\",\"index\":0}\n\n"),
           "abort, Messages client: the open block is closed");
    tap_ok(test_abort_one(OPENAI, ANTHROPIC, CHAT_ROLE, ""),
           "abort, Messages client, no block open: nothing");
    tap_ok(test_abort_one(OPENAI, RESPONSES, CHAT_TEXT("Hi"), ""),
           "abort, Responses client: nothing");
    tap_ok(test_abort_one(ANTHROPIC, OPENAI,
                          MSG_TEXT("0", "Hi"), ""),
           "abort, Chat client: nothing");
}


/* the finish: its stop reason, its usage, and nothing after it */

#define CHAT_CUMUL(d, n)                                                      \
    "data: {'choices':[{'index':0,'delta':{" d "}}],'usage':"                 \
    "{'prompt_tokens':50,'completion_tokens':" n "}}\n\n"

#define CHAT_CUMUL_FINISH(n)                                                  \
    "data: {'choices':[{'index':0,'delta':{},'finish_reason':'stop'}],"       \
    "'usage':{'prompt_tokens':50,'completion_tokens':" n "}}\n\n"

#define CHAT_NOINDEX(id, name, a)                                             \
    CHAT_HEAD "'choices':[{'index':0,'delta':{'tool_calls':[{'id':'" id       \
    "','type':'function','function':{'name':'" name "','arguments':'" a       \
    "'}}]}}]}\n\n"

static void
test_finish(void)
{
    int            rc;
    char          *got;
    llm_tx_conf_t  cf;

    /* tool calls ended by "stop": tool_use, as for a whole answer */
    conf(&cf, OPENAI, ANTHROPIC);
    got = run(&cf, CHAT_ROLE CHAT_TOOL_START("0", "call_a", "f")
                   CHAT_TOOL_ARGS("0", "{}") CHAT_FINISH("stop") CHAT_USAGE
                   CHAT_DONE, &rc);
    tap_ok(rc == 0 && strstr(got, "\"stop_reason\":\"tool_use\"") != NULL
           && count(got, "end_turn") == 0,
           "tool calls finished by stop: stop_reason tool_use");
    free(got);

    got = run(&cf, CHAT_ROLE CHAT_TEXT("Hi") CHAT_FINISH("stop") CHAT_DONE,
              &rc);
    tap_ok(strstr(got, "\"stop_reason\":\"end_turn\"") != NULL,
           "text finished by stop: still end_turn");
    free(got);

    got = run(&cf, CHAT_ROLE
                   CHAT_HEAD "'choices':[{'index':0,'delta':{'refusal':"
                   "'No.'}}]}\n\n" CHAT_FINISH("stop") CHAT_DONE, &rc);
    tap_ok(strstr(got, "\"stop_reason\":\"refusal\"") != NULL
           && strstr(got, "\"text\":\"No.\"") != NULL,
           "a refusal finished by stop: its text, stop_reason refusal");
    free(got);

    conf(&cf, ANTHROPIC, OPENAI);
    got = run(&cf, MSG_START MSG_BLOCK_TOOL("0", "toolu_1", "f")
                   MSG_ARGS("0", "{}") MSG_STOP_BLOCK("0")
                   MSG_DELTA("end_turn") MSG_STOP, &rc);
    tap_ok(strstr(got, "\"finish_reason\":\"tool_calls\"") != NULL,
           "Messages tool_use ended by end_turn: Chat's tool_calls");
    free(got);

    conf(&cf, OPENAI, RESPONSES);
    got = run(&cf, CHAT_ROLE CHAT_TOOL_START("0", "call_a", "f")
                   CHAT_TOOL_ARGS("0", "{}") CHAT_FINISH("stop") CHAT_USAGE
                   CHAT_DONE, &rc);
    tap_ok(rc == 0 && count(got, "event: response.completed") == 1
           && strstr(got, "\"type\":\"function_call\",\"status\":"
                     "\"completed\"") != NULL,
           "Responses: tool calls finished by stop, completed");
    free(got);

    /* cumulative usage on every chunk: the finish chunk's is final */
    conf(&cf, OPENAI, ANTHROPIC);
    got = run(&cf, CHAT_CUMUL("'content':'Hel'", "1")
                   CHAT_CUMUL("'content':'lo'", "3") CHAT_CUMUL_FINISH("4")
                   CHAT_DONE, &rc);
    tap_ok(strstr(got, "\"output_tokens\":4}") != NULL
           && count(got, "\"output_tokens\":3") == 0
           && count(got, "event: message_delta") == 1,
           "cumulative usage, Messages: the finish chunk's figure");
    free(got);

    conf(&cf, OPENAI, RESPONSES);
    got = run(&cf, CHAT_CUMUL("'content':'Hel'", "1")
                   CHAT_CUMUL("'content':'lo'", "3") CHAT_CUMUL_FINISH("4")
                   CHAT_DONE, &rc);
    tap_ok(strstr(got, "\"output_tokens\":4,") != NULL
           && count(got, "\"output_tokens\":3") == 0,
           "cumulative usage, Responses: the finish chunk's figure");
    free(got);

    /* usage before the finish, none with it: the last, at [DONE] */
    conf(&cf, OPENAI, ANTHROPIC);
    got = run(&cf, CHAT_CUMUL("'content':'Hel'", "2") CHAT_FINISH("stop")
                   CHAT_CUMUL("", "5") CHAT_DONE, &rc);
    tap_ok(strstr(got, "\"output_tokens\":5}") != NULL
           && count(got, "\"output_tokens\":2") == 0,
           "usage after the finish: the later figure");
    free(got);

    conf(&cf, ANTHROPIC, RESPONSES);
    got = run(&cf, MSG_START MSG_BLOCK_TEXT("0") MSG_TEXT("0", "x")
                   MSG_STOP_BLOCK("0")
                   "event: message_delta\ndata: {'type':'message_delta',"
                   "'delta':{},'usage':{'output_tokens':2}}\n\n"
                   "event: message_delta\ndata: {'type':'message_delta',"
                   "'delta':{'stop_reason':'end_turn'},'usage':"
                   "{'output_tokens':6}}\n\n" MSG_STOP, &rc);
    tap_ok(strstr(got, "\"output_tokens\":6,") != NULL
           && count(got, "\"output_tokens\":2") == 0,
           "Messages usage before its stop reason: not final");
    free(got);

    /* content after the finish: dropped, nothing opens after it */
    conf(&cf, OPENAI, ANTHROPIC);
    got = run(&cf, CHAT_ROLE CHAT_TEXT("Hi") CHAT_FINISH("stop") CHAT_USAGE
                   CHAT_TEXT(" more") CHAT_TOOL_START("0", "call_a", "f")
                   CHAT_DONE, &rc);
    tap_ok(rc == 0 && last_done && count(got, "more") == 0
           && count(got, "event: content_block_start") == 1
           && count(got, "event: content_block_stop") == 1
           && strstr(strstr(got, "message_delta"), "content_block") == NULL,
           "text and a tool after the finish: dropped");
    free(got);

    conf(&cf, OPENAI, RESPONSES);
    got = run(&cf, CHAT_ROLE CHAT_TEXT("Hi") CHAT_FINISH("stop")
                   CHAT_TEXT(" more") CHAT_USAGE CHAT_DONE, &rc);
    tap_ok(rc == 0 && last_done && count(got, "more") == 0
           && count(got, "event: response.output_item.added") == 1
           && count(got, "event: response.output_item.done") == 1,
           "Responses: text after the finish dropped, items paired");
    free(got);

    conf(&cf, ANTHROPIC, OPENAI);
    got = run(&cf, MSG_START MSG_BLOCK_TEXT("0") MSG_TEXT("0", "Hi")
                   MSG_STOP_BLOCK("0") MSG_DELTA("end_turn")
                   MSG_BLOCK_TEXT("1") MSG_TEXT("1", "more")
                   MSG_STOP_BLOCK("1") MSG_STOP, &rc);
    tap_ok(rc == 0 && last_done && count(got, "more") == 0
           && count(got, "[DONE]") == 1,
           "a Messages block after message_delta: dropped for Chat");
    free(got);

    /* tool calls without index: one call per id */
    conf(&cf, OPENAI, ANTHROPIC);
    got = run(&cf, CHAT_ROLE CHAT_NOINDEX("call_a", "get_weather", "{}")
                   CHAT_NOINDEX("call_b", "delete_all", "[]")
                   CHAT_FINISH("tool_calls") CHAT_DONE, &rc);
    tap_ok(rc == 0 && count(got, "\"type\":\"tool_use\"") == 2
           && strstr(got, "\"id\":\"call_b\",\"name\":\"delete_all\"")
              != NULL
           && count(got, "\"partial_json\":\"{}\"") == 1,
           "two calls without index: two tool_use blocks");
    free(got);

    got = run(&cf, CHAT_ROLE CHAT_NOINDEX("call_a", "f", "{")
                   CHAT_NOINDEX("call_a", "f", "}")
                   CHAT_TOOL_START("0", "call_a", "") CHAT_TOOL_ARGS("0", " ")
                   CHAT_FINISH("tool_calls") CHAT_DONE, &rc);
    tap_ok(rc == 0 && count(got, "\"type\":\"tool_use\"") == 1
           && count(got, "input_json_delta") == 3,
           "the same id and name again: the same call");
    free(got);

    got = run(&cf, CHAT_ROLE CHAT_TOOL_START("0", "call_a", "f")
                   CHAT_TOOL_START("0", "", "g") CHAT_DONE, &rc);
    tap_ok(rc == 0 && count(got, "\"type\":\"tool_use\"") == 2
           && strstr(got, "\"name\":\"g\"") != NULL,
           "the same index, another name: another call");
    free(got);

    conf(&cf, OPENAI, RESPONSES);
    got = run(&cf, CHAT_ROLE CHAT_NOINDEX("call_a", "get_weather", "{}")
                   CHAT_NOINDEX("call_b", "delete_all", "[]")
                   CHAT_FINISH("tool_calls") CHAT_USAGE CHAT_DONE, &rc);
    tap_ok(rc == 0 && count(got, "event: response.output_item.done") == 2
           && strstr(got, "\"arguments\":\"[]\",\"call_id\":\"call_b\","
                     "\"name\":\"delete_all\"") != NULL,
           "Responses: two calls without index, two function_call items");
    free(got);

    /* the translator's own error: in the stream's numbering */
    got = run(&cf, CHAT_ROLE CHAT_TEXT("a") "data: {not json\n\n", &rc);
    tap_ok(rc == 0 && last_done
           && strstr(got, "event: error\ndata: {\"type\":\"error\","
                     "\"sequence_number\":5,\"code\":\"upstream_error\"")
              != NULL,
           "Responses: the error event continues sequence_number");
    free(got);
}


static void
test_fail(void)
{
    int              rc;
    char            *s;
    out_t            out;
    llm_tx_conf_t    cf;
    llm_tx_stream_t  t;

    conf(&cf, OPENAI, RESPONSES);
    llm_tx_stream_init(&t, &cf);
    memset(&out, 0, sizeof(out_t));

    s = quotes("{'choices':[{'index':0,'delta':{'content':'a'}}]}");
    llm_tx_stream_event(&t, "", 0, s, strlen(s), 0, out_add, &out);
    out.len = 0;
    rc = llm_tx_stream_fail(&t, "upstream timed out", out_add, &out);

    tap_ok(rc == 0 && llm_tx_stream_done(&t) && llm_tx_stream_errored(&t)
           && strncmp(out.p, "event: error\ndata: {\"type\":\"error\","
                      "\"sequence_number\":5,\"code\":\"upstream_error\","
                      "\"message\":\"upstream timed out\"", 91) == 0,
           "llm_tx_stream_fail, Responses: the error, numbered");

    out.len = 0;
    out.p[0] = '\0';
    rc = llm_tx_stream_fail(&t, "again", out_add, &out);
    tap_ok(rc == 0 && out.len == 0, "llm_tx_stream_fail once done: nothing");

    free(out.p);
    free(s);
    free(t.mem);

    conf(&cf, OPENAI, ANTHROPIC);
    llm_tx_stream_init(&t, &cf);
    memset(&out, 0, sizeof(out_t));
    s = quotes("{'choices':[{'index':0,'delta':{'content':'a'}}]}");
    llm_tx_stream_event(&t, "", 0, s, strlen(s), 0, out_add, &out);
    out.len = 0;
    rc = llm_tx_stream_fail(&t, "upstream timed out", out_add, &out);
    tap_is_str(out.p, "event: content_block_stop\ndata: {\"type\":"
               "\"content_block_stop\",\"index\":0}\n\nevent: error\n"
               "data: {\"type\":\"error\",\"error\":{\"type\":\"api_error\","
               "\"message\":\"upstream timed out\"}}\n\n",
               "llm_tx_stream_fail, Messages: the block closed, the error");
    free(out.p);
    free(s);
    free(t.mem);
}


/* --golden: the outputs as C strings, ' for " */

static void
print_golden(void)
{
    char            *stream, *got, *s;
    int              rc;
    const char      *names[] = {
        "chat_text_messages", "chat_tools_messages", "chat_length_messages",
        "chat_error_messages", "chat_text_responses", "chat_tools_responses",
        "chat_length_responses", "chat_error_responses", "msg_text_chat",
        "msg_tools_chat", "msg_length_chat", "msg_error_chat",
        "msg_text_responses", "msg_tools_responses", "msg_length_responses",
        "msg_error_responses"
    };
    llm_tx_conf_t    cf;
    const tx_case_t *c;

    printf("\n/* test_tx_stream --golden, reviewed */\n");

    for (c = cases; c->name; c++) {
        conf(&cf, c->from, c->to);
        stream = quotes(c->stream);
        got = translate(&cf, stream, 0, (size_t) -1, &rc, NULL);

        printf("\n\nstatic const char  gold_%s[] =\n    \"", names[c - cases]);

        for (s = got; *s; s++) {
            switch (*s) {
            case '"':  putchar('\''); break;
            case '\\': printf("\\\\"); break;
            case '\n':
                printf("\\n");
                if (s[1] == '\n') {
                    printf("\\n\"\n    \"");
                    s++;
                }
                break;
            default:
                if ((unsigned char) *s >= 0x80) {
                    printf("\\%03o", (unsigned char) *s);

                } else {
                    putchar(*s);
                }

                break;
            }
        }

        printf("\";\n");

        free(got);
        free(stream);
    }
}


/* the fuzzer's first byte: the pair, include_usage, a split in half */

static int
write_corpus(const char *dir)
{
    int               pair;
    char              path[512], *s;
    FILE             *f;
    const tx_case_t  *c;

    for (c = cases; c->name; c++) {
        pair = (c->from == ANTHROPIC ? 2 : 0) + (c->to == RESPONSES ? 1 : 0);

        snprintf(path, sizeof(path), "%s/%s", dir, c->name);

        for (s = path + strlen(dir) + 1; *s; s++) {
            *s = (*s == ' ') ? '_' : *s;
        }

        f = fopen(path, "w");
        if (f == NULL) {
            perror(path);
            return 1;
        }

        s = quotes(c->stream);
        fputc(pair | 0x08 | (8 << 4), f);
        fputs(s, f);
        fclose(f);
        free(s);
    }

    return 0;
}


int
main(int argc, char **argv)
{
    const tx_case_t  *c;

    if (argc == 3 && strcmp(argv[1], "--corpus") == 0) {
        return write_corpus(argv[2]);
    }

    if (argc > 1 && strcmp(argv[1], "--golden") == 0) {
        print_golden();
        return 0;
    }

    for (c = cases; c->name; c++) {
        test_case(c);
    }

    test_errors();
    test_tools();
    test_memory();
    test_streams();
    test_abort();
    test_finish();
    test_fail();

    return tap_done();
}
