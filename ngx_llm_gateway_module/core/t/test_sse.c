
/*
 * The usage extractor: canned streams fed whole, split in two at every
 * byte, and one byte at a time, must all give the same usage; then whole
 * JSON bodies.
 *
 * The streams are written with ' for " to keep them legible; no stream
 * needs a real '.
 *
 *     test_sse --corpus DIR    writes the streams as fuzzer seeds
 */


#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "llm_sse.h"
#include "tap.h"


#define OPENAI          LLM_API_OPENAI
#define ANTHROPIC       LLM_API_ANTHROPIC
#define MAX             LLM_USAGE_TOKENS_MAX

#define BUF_SIZE        4096
#define SMALL_BUF       256

/* the fuzzer's first byte: the API, a small buffer, the split point */
#define SEED_ANTHROPIC  0x01
#define SEED_SMALL      0x02
#define SEED_HALF       0x80


typedef struct {
    const char   *name;
    llm_api_e     api;
    size_t        cap;              /* 0: BUF_SIZE */
    const char   *stream;
    llm_usage_t   want;
} sse_case_t;


typedef struct {
    const char   *name;
    llm_api_e     api;
    const char   *body;
    int           rc;
    llm_usage_t   want;
} json_case_t;


#define OAI_CHUNK                                                             \
    "data: {'id':'chatcmpl-9xK2','object':'chat.completion.chunk',"           \
    "'created':1718000000,'model':'gpt-4o-mini-2024-07-18',"                  \
    "'system_fingerprint':'fp_0ba0d124f1',"

#define OAI_ROLE                                                              \
    "'choices':[{'index':0,'delta':{'role':'assistant','content':'',"         \
    "'refusal':null},'logprobs':null,'finish_reason':null}]"

#define OAI_TEXT(t)                                                           \
    "'choices':[{'index':0,'delta':{'content':'" t "'},'logprobs':null,"      \
    "'finish_reason':null}]"

#define OAI_FINISH(r)                                                         \
    "'choices':[{'index':0,'delta':{},'logprobs':null,"                       \
    "'finish_reason':'" r "'}]"

#define OAI_USAGE(in, out, cached)                                            \
    "'choices':[],'usage':{'prompt_tokens':" in ",'completion_tokens':" out   \
    ",'total_tokens':0,'prompt_tokens_details':{'cached_tokens':" cached      \
    ",'audio_tokens':0},'completion_tokens_details':{'reasoning_tokens':0,"   \
    "'audio_tokens':0,'accepted_prediction_tokens':0,"                        \
    "'rejected_prediction_tokens':0}}"

#define ANT_START(usage)                                                      \
    "event: message_start\n"                                                  \
    "data: {'type':'message_start','message':{'id':'msg_01XFDUDYJgAA',"       \
    "'type':'message','role':'assistant','content':[],"                       \
    "'model':'claude-sonnet-4-20250514','stop_reason':null,"                  \
    "'stop_sequence':null,'usage':" usage "}}\n\n"

#define ANT_CONTENT                                                           \
    "event: content_block_start\n"                                            \
    "data: {'type':'content_block_start','index':0,"                          \
    "'content_block':{'type':'text','text':''}}\n\n"                          \
    "event: ping\n"                                                           \
    "data: {'type': 'ping'}\n\n"                                              \
    "event: content_block_delta\n"                                            \
    "data: {'type':'content_block_delta','index':0,"                          \
    "'delta':{'type':'text_delta','text':'Hello'}}\n\n"                       \
    "event: content_block_delta\n"                                            \
    "data: {'type':'content_block_delta','index':0,"                          \
    "'delta':{'type':'text_delta','text':', world: usage, error.'}}\n\n"      \
    "event: content_block_stop\n"                                             \
    "data: {'type':'content_block_stop','index':0}\n\n"

#define ANT_DELTA(reason, usage)                                              \
    "event: message_delta\n"                                                  \
    "data: {'type':'message_delta','delta':{'stop_reason':" reason ","        \
    "'stop_sequence':null},'usage':" usage "}\n\n"

#define ANT_STOP                                                              \
    "event: message_stop\n"                                                   \
    "data: {'type':'message_stop'}\n\n"

#define X50  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"


static const sse_case_t  sse_cases[] = {

    { "openai, stream_options.include_usage", OPENAI, 0,
      OAI_CHUNK OAI_ROLE ",'usage':null}\n\n"
      OAI_CHUNK OAI_TEXT("Hello") ",'usage':null}\n\n"
      OAI_CHUNK OAI_TEXT(" there, finish_reason: stop") ",'usage':null}\n\n"
      OAI_CHUNK OAI_FINISH("stop") ",'usage':null}\n\n"
      OAI_CHUNK OAI_USAGE("12", "3", "0") "}\n\n"
      "data: [DONE]\n\n",
      { .input_tokens = 12, .output_tokens = 3, .finish_reason = "stop",
        .have_usage = 1, .done = 1 } },

    { "openai, no usage", OPENAI, 0,
      OAI_CHUNK OAI_ROLE "}\n\n"
      OAI_CHUNK OAI_TEXT("Hi") "}\n\n"
      OAI_CHUNK OAI_FINISH("stop") "}\n\n"
      "data: [DONE]\n\n",
      { .finish_reason = "stop", .done = 1 } },

    { "openai, cached tokens", OPENAI, 0,
      OAI_CHUNK OAI_ROLE ",'usage':null}\n\n"
      OAI_CHUNK OAI_TEXT("Once upon") ",'usage':null}\n\n"
      OAI_CHUNK OAI_FINISH("length") ",'usage':null}\n\n"
      OAI_CHUNK OAI_USAGE("2006", "300", "1920") "}\n\n"
      "data: [DONE]\n\n",
      { .input_tokens = 2006, .output_tokens = 300,
        .cached_input_tokens = 1920, .finish_reason = "length",
        .have_usage = 1, .done = 1 } },

    { "openai, CRLF line endings", OPENAI, 0,
      OAI_CHUNK OAI_TEXT("Hello") ",'usage':null}\r\n\r\n"
      OAI_CHUNK OAI_FINISH("stop") ",'usage':null}\r\n\r\n"
      "data: {'choices':[],\r\n"
      "data: 'usage':{'prompt_tokens':12,'completion_tokens':3,\r\n"
      "data: 'prompt_tokens_details':{'cached_tokens':2}}}\r\n\r\n"
      "data: [DONE]\r\n\r\n",
      { .input_tokens = 12, .output_tokens = 3, .cached_input_tokens = 2,
        .finish_reason = "stop", .have_usage = 1, .done = 1 } },

    { "openai, comments, retry, id, JSON over two data lines", OPENAI, 0,
      ": OPENROUTER PROCESSING\n\n"
      ":\n"
      "retry: 3000\n"
      "id: 41\n"
      "data:{'choices':[],'usage':{'prompt_tokens':1,"
      "'completion_tokens':1}}\n\n"
      "id\n"
      "data: {'choices':[],\n"
      "data: 'usage':{'prompt_tokens':7,'completion_tokens':9}}\n"
      ": a comment inside the event\n"
      "\n"
      "data: {'usage':{'prompt_tokens':12\n"
      "data: 34}}\n\n"
      "data:  [DONE] \n\n",
      { .input_tokens = 7, .output_tokens = 9,
        .have_usage = 1, .done = 1 } },

    { "openai, in-band error", OPENAI, 0,
      OAI_CHUNK OAI_TEXT("Hel") "}\n\n"
      "data: {'error':{'message':'The server had an error while processing "
      "your request.','type':'server_error','param':null,'code':null}}\n\n",
      { .error = 1 } },

    { "openai, an error event", OPENAI, 0,
      OAI_CHUNK OAI_TEXT("Hel") "}\n\n"
      "event: error\n"
      "data: {'message':'upstream went away'}\n\n",
      { .error = 1 } },

    { "openai, malformed frame then usage", OPENAI, 0,
      "data: {'choices':[],'usage':{'prompt_tokens':5,\n\n"
      "data: {'usage':{'prompt_tokens':\n\n"
      OAI_CHUNK OAI_USAGE("40", "2", "0") "}\n\n"
      "data: [DONE]\n\n",
      { .input_tokens = 40, .output_tokens = 2,
        .have_usage = 1, .done = 1 } },

    { "openai, event larger than the buffer, then usage", OPENAI,
      SMALL_BUF,
      "data: {'choices':[],'usage':{'prompt_tokens':999999,"
      "'completion_tokens':999999},'x':'"
      X50 X50 X50 X50 X50 "'}\n\n"
      "data: {'choices':[],\n"
      "data: '" X50 X50 X50 X50 X50 "'}\n\n"
      "data: {'choices':[],'usage':{'prompt_tokens':20,"
      "'completion_tokens':5}}\n\n"
      "data: [DONE]\n\n",
      { .input_tokens = 20, .output_tokens = 5,
        .have_usage = 1, .done = 1, .truncated = 1 } },

    { "openai, hostile: -5, 1.5, \"10\"", OPENAI, 0,
      "data: {'choices':[],'usage':{'prompt_tokens':-5,"
      "'completion_tokens':1.5,"
      "'prompt_tokens_details':{'cached_tokens':'10'}}}\n\n",
      { .output_tokens = 1, .have_usage = 1, .clamped = 1 } },

    { "openai, hostile: 1e30, cached above prompt", OPENAI, 0,
      "data: {'choices':[],'usage':{'prompt_tokens':10,"
      "'completion_tokens':1e30,"
      "'prompt_tokens_details':{'cached_tokens':11}}}\n\n",
      { .input_tokens = 10, .output_tokens = MAX, .cached_input_tokens = 10,
        .have_usage = 1, .clamped = 1 } },

    { "openai, hostile: duplicated usage, the last one counts", OPENAI, 0,
      "data: {'choices':[],'usage':{'prompt_tokens':1000,"
      "'completion_tokens':1000}}\n\n"
      "data: {'choices':[],'usage':{'prompt_tokens':7,"
      "'completion_tokens':8}}\n\n"
      "data: [DONE]\n\n",
      { .input_tokens = 7, .output_tokens = 8,
        .have_usage = 1, .done = 1 } },

    { "openai, in range and exact: 1e2, 100000000", OPENAI, 0,
      "data: {'usage':{'prompt_tokens':1e2,"
      "'completion_tokens':100000000,'prompt_tokens_details':null}}\n\n",
      { .input_tokens = 100, .output_tokens = MAX, .have_usage = 1 } },

    { "openai, finish_reason printable", OPENAI, 0,
      "data: {'choices':[{'index':0,'delta':{},'finish_reason':"
      "'st\\u00f6p\\nx'}]}\n\n"
      "data: {'choices':[{'index':0,'delta':{},'finish_reason':null}]}\n\n",
      { .finish_reason = "st??p?x" } },

    { "openai, finish_reason bounded", OPENAI, 0,
      "data: {'choices':[{'index':0,'delta':{},'finish_reason':"
      "'content_filter_with_a_much_too_long_name'}]}\n\n",
      { .finish_reason = "content_filter_with_a_much_too_" } },

    { "openai, cut before the final blank line", OPENAI, 0,
      OAI_CHUNK OAI_FINISH("stop") ",'usage':null}\n\n"
      OAI_CHUNK OAI_USAGE("12", "3", "0") "}\n",
      { .input_tokens = 12, .output_tokens = 3, .finish_reason = "stop",
        .have_usage = 1 } },

    { "openai, cut before the line end", OPENAI, 0,
      OAI_CHUNK OAI_USAGE("12", "3", "0") "}",
      { .input_tokens = 12, .output_tokens = 3, .have_usage = 1 } },

    { "openai, cut inside the usage frame", OPENAI, 0,
      OAI_CHUNK OAI_FINISH("stop") ",'usage':null}\n\n"
      "data: {'choices':[],'usage':{'prompt_tokens':12,'compl",
      { .finish_reason = "stop" } },

    { "openai, BOM, odd fields, a long event name", OPENAI, 0,
      "\xEF\xBB\xBF" "data: {'usage':{'prompt_tokens':1}}\n\n"
      "Data: {'usage':{'prompt_tokens':2}}\n\n"
      "data : {'usage':{'prompt_tokens':3}}\n\n"
      "datadata: {'usage':{'prompt_tokens':4}}\n\n"
      "event: error_but_a_name_of_more_than_thirty_two_bytes\n"
      "data: {}\n\n"
      "data\n\n"
      "event\n\n",
      { .input_tokens = 1, .have_usage = 1 } },

    { "openai, a BOM only at the start", OPENAI, 0,
      "data: {'usage':{'prompt_tokens':1}}\n\n"
      "\xEF\xBB\xBF" "data: {'usage':{'prompt_tokens':2}}\n\n",
      { .input_tokens = 1, .have_usage = 1 } },

    { "anthropic, full sequence with cache tokens", ANTHROPIC, 0,
      ANT_START("{'input_tokens':10,'cache_creation_input_tokens':200,"
                "'cache_read_input_tokens':1800,'output_tokens':1}")
      ANT_CONTENT
      ANT_DELTA("'end_turn'", "{'output_tokens':42}")
      ANT_STOP,
      { .input_tokens = 2010, .output_tokens = 42,
        .cached_input_tokens = 1800, .finish_reason = "end_turn",
        .have_usage = 1, .done = 1 } },

    { "anthropic, cumulative deltas", ANTHROPIC, 0,
      ANT_START("{'input_tokens':25,'output_tokens':1}")
      ANT_CONTENT
      ANT_DELTA("null", "{'output_tokens':5}")
      ANT_CONTENT
      ANT_DELTA("null", "{'output_tokens':17}")
      ANT_DELTA("'max_tokens'", "{'output_tokens':64}")
      ANT_STOP,
      { .input_tokens = 25, .output_tokens = 64,
        .finish_reason = "max_tokens", .have_usage = 1, .done = 1 } },

    { "anthropic, message_delta revises the input", ANTHROPIC, 0,
      ANT_START("{'input_tokens':25,'cache_creation_input_tokens':3,"
                "'cache_read_input_tokens':0,'output_tokens':1}")
      ANT_DELTA("'tool_use'", "{'input_tokens':30,"
                "'cache_read_input_tokens':5,'output_tokens':9}")
      ANT_STOP,
      { .input_tokens = 38, .output_tokens = 9, .cached_input_tokens = 5,
        .finish_reason = "tool_use", .have_usage = 1, .done = 1 } },

    { "anthropic, CR line endings", ANTHROPIC, 0,
      "event: message_start\r"
      "data: {'type':'message_start','message':{'usage':"
      "{'input_tokens':3,'output_tokens':1}}}\r\r"
      "event: content_block_delta\r"
      "data: {'type':'content_block_delta','index':0,"
      "'delta':{'type':'text_delta','text':'Hi'}}\r\r"
      "event: message_delta\r"
      "data: {'type':'message_delta','delta':{'stop_reason':'end_turn'},"
      "'usage':{'output_tokens':2}}\r\r"
      "event: message_stop\r"
      "data: {'type':'message_stop'}\r\r",
      { .input_tokens = 3, .output_tokens = 2, .finish_reason = "end_turn",
        .have_usage = 1, .done = 1 } },

    { "anthropic, the type from the data alone", ANTHROPIC, 0,
      "data: {'type':'message_start','message':{'usage':"
      "{'input_tokens':3,'cache_read_input_tokens':4,"
      "'output_tokens':1}}}\n\n"
      "event: message\n"
      "data: {'type':'content_block_delta','index':0,"
      "'delta':{'type':'text_delta','text':'message_stop'}}\n\n"
      "data: {'type' : 'message_delta','delta':{'stop_reason':"
      "'stop_sequence'},'usage':{'output_tokens':6}}\n\n"
      "data: {'type':'message_stop'}\n\n",
      { .input_tokens = 7, .output_tokens = 6, .cached_input_tokens = 4,
        .finish_reason = "stop_sequence", .have_usage = 1, .done = 1 } },

    { "anthropic, the type from the event line alone", ANTHROPIC, 0,
      "event:message_start\n"
      "data: {'message':{'usage':{'input_tokens':4,'output_tokens':1}}}\n\n"
      "event: message_delta\r\n"
      "data: {'delta':{'stop_reason':'end_turn'},\r\n"
      "data: 'usage':{'output_tokens':3}}\r\n\r\n"
      "event:  message_stop\n"
      "data: {}\n\n",
      { .input_tokens = 4, .output_tokens = 3, .finish_reason = "end_turn",
        .have_usage = 1 } },

    { "anthropic, error event", ANTHROPIC, 0,
      ANT_START("{'input_tokens':10,'output_tokens':1}")
      ANT_CONTENT
      "event: error\n"
      "data: {'type':'error','error':{'type':'overloaded_error',"
      "'message':'Overloaded'}}\n\n",
      { .input_tokens = 10, .output_tokens = 1, .have_usage = 1,
        .error = 1 } },

    { "anthropic, an error in the data alone", ANTHROPIC, 0,
      "data: {'type':'error','error':{'type':'api_error',"
      "'message':'Internal server error'}}\n\n",
      { .error = 1 } },

    { "anthropic, hostile figures", ANTHROPIC, 0,
      ANT_START("{'input_tokens':5,'cache_read_input_tokens':1e30,"
                "'cache_creation_input_tokens':'7','output_tokens':-1}")
      ANT_DELTA("3", "{'output_tokens':2.5}")
      ANT_DELTA("null", "{'output_tokens':null}"),
      { .input_tokens = MAX, .output_tokens = 2, .cached_input_tokens = MAX,
        .have_usage = 1, .clamped = 1 } },

    { "anthropic, event larger than the buffer", ANTHROPIC, SMALL_BUF,
      ANT_START("{'input_tokens':9,'output_tokens':1}")
      "event: message_delta\n"
      "data: {'type':'message_delta','delta':{'stop_reason':'end_turn'},"
      "'usage':{'output_tokens':99},'pad':'" X50 X50 X50 X50 "'}\n\n"
      ANT_DELTA("'end_turn'", "{'output_tokens':4}")
      ANT_STOP,
      { .input_tokens = 9, .output_tokens = 4, .finish_reason = "end_turn",
        .have_usage = 1, .done = 1, .truncated = 1 } },

    { "anthropic, cut before the final blank line", ANTHROPIC, 0,
      ANT_START("{'input_tokens':10,'output_tokens':1}")
      "event: message_delta\n"
      "data: {'type':'message_delta','delta':{'stop_reason':'end_turn'},"
      "'usage':{'output_tokens':8}}",
      { .input_tokens = 10, .output_tokens = 8, .finish_reason = "end_turn",
        .have_usage = 1 } },
};


static const json_case_t  json_cases[] = {

    { "openai, chat.completion with cached tokens", OPENAI,
      "{'id':'chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG','object':"
      "'chat.completion','created':1741570283,'model':'gpt-4o-2024-08-06',"
      "'choices':[{'index':0,'message':{'role':'assistant','content':"
      "'The image shows a wooden boardwalk.','refusal':null},"
      "'logprobs':null,'finish_reason':'stop'}],"
      "'usage':{'prompt_tokens':1117,'completion_tokens':46,"
      "'total_tokens':1163,'prompt_tokens_details':{'cached_tokens':1024,"
      "'audio_tokens':0},'completion_tokens_details':{'reasoning_tokens':0,"
      "'audio_tokens':0}},'service_tier':'default'}",
      1,
      { .input_tokens = 1117, .output_tokens = 46,
        .cached_input_tokens = 1024, .finish_reason = "stop",
        .have_usage = 1, .done = 1 } },

    { "openai, no usage", OPENAI,
      "{'object':'chat.completion','choices':[{'index':0,'message':"
      "{'role':'assistant','content':'x'},'finish_reason':'length'}]}",
      0,
      { .finish_reason = "length", .done = 1 } },

    { "openai, error body", OPENAI,
      "{'error':{'message':'Incorrect API key provided.','type':"
      "'invalid_request_error','param':null,'code':'invalid_api_key'}}",
      0,
      { .error = 1, .done = 1 } },

    { "openai, hostile figures", OPENAI,
      "{'usage':{'prompt_tokens':-5,'completion_tokens':'10',"
      "'prompt_tokens_details':{'cached_tokens':1.5}}}",
      1,
      { .have_usage = 1, .done = 1, .clamped = 1 } },

    { "anthropic, message with cache tokens", ANTHROPIC,
      "{'id':'msg_013Zva2CMHLNnXjNJJKqJ2EF','type':'message','role':"
      "'assistant','model':'claude-sonnet-4-20250514','content':[{'type':"
      "'text','text':'Hi!'}],'stop_reason':'end_turn','stop_sequence':null,"
      "'usage':{'input_tokens':2095,'cache_creation_input_tokens':100,"
      "'cache_read_input_tokens':3000,'output_tokens':503}}",
      1,
      { .input_tokens = 5195, .output_tokens = 503,
        .cached_input_tokens = 3000, .finish_reason = "end_turn",
        .have_usage = 1, .done = 1 } },

    { "anthropic, error body", ANTHROPIC,
      "{'type':'error','error':{'type':'rate_limit_error',"
      "'message':'Number of request tokens has exceeded your rate limit'}}",
      0,
      { .error = 1, .done = 1 } },

    { "anthropic, usage with output only", ANTHROPIC,
      "{'type':'message','stop_reason':'max_tokens',"
      "'usage':{'output_tokens':1e9}}",
      1,
      { .output_tokens = MAX, .finish_reason = "max_tokens",
        .have_usage = 1, .done = 1, .clamped = 1 } },

    { "openai, truncated body", OPENAI,
      "{'choices':[{'finish_reason':'stop'}],'usage':{'prompt_tokens':3",
      0,
      { .done = 0 } },

    { "openai, not an object", OPENAI, "[{'usage':{}}]", 0, { .done = 0 } },

    { "anthropic, empty body", ANTHROPIC, "", 0, { .done = 0 } },
};


#define nelts(a)  (sizeof(a) / sizeof((a)[0]))


static char *
unquote(const char *s, size_t *len)
{
    char    *d;
    size_t   i, n;

    n = strlen(s);

    d = malloc(n + 1);
    if (d == NULL) {
        perror("malloc");
        exit(2);
    }

    for (i = 0; i < n; i++) {
        d[i] = (s[i] == '\'') ? '"' : s[i];
    }

    d[n] = '\0';
    *len = n;

    return d;
}


/* a read-only copy: the parser crashes if it writes into its input */

static const char *
readonly_copy(const char *s, size_t len, size_t *mapped)
{
    char    *m;
    size_t   page, size;

    page = sysconf(_SC_PAGESIZE);
    size = (len / page + 1) * page;

    m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
             -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }

    memcpy(m, s, len);

    if (mprotect(m, size, PROT_READ) != 0) {
        perror("mprotect");
        exit(2);
    }

    *mapped = size;

    return m;
}


/* step 0: whole; otherwise parts of step bytes after the first split */

static void
feed(const sse_case_t *c, const char *s, size_t len, size_t split,
    size_t step, llm_usage_t *u)
{
    char       *buf;
    size_t      cap, off, n;
    llm_sse_t   p;

    cap = c->cap ? c->cap : BUF_SIZE;

    buf = malloc(cap);
    if (buf == NULL) {
        perror("malloc");
        exit(2);
    }

    llm_sse_init(&p, c->api, buf, cap);

    if (step == 0) {
        llm_sse_feed(&p, s, split);
        llm_sse_feed(&p, s + split, len - split);

    } else {
        for (off = 0; off < len; off += n) {
            n = (len - off < step) ? len - off : step;
            llm_sse_feed(&p, s + off, n);
        }
    }

    llm_sse_finish(&p);

    *u = p.usage;

    free(buf);
}


static int
usage_eq(const llm_usage_t *a, const llm_usage_t *b)
{
    return a->input_tokens == b->input_tokens
           && a->output_tokens == b->output_tokens
           && a->cached_input_tokens == b->cached_input_tokens
           && strcmp(a->finish_reason, b->finish_reason) == 0
           && a->have_usage == b->have_usage
           && a->done == b->done
           && a->clamped == b->clamped
           && a->truncated == b->truncated
           && a->error == b->error;
}


static void
usage_diag(const char *what, const llm_usage_t *u)
{
    printf("#   %s: in=%llu out=%llu cached=%llu finish='%s' usage=%u "
           "done=%u clamped=%u truncated=%u error=%u\n", what,
           (unsigned long long) u->input_tokens,
           (unsigned long long) u->output_tokens,
           (unsigned long long) u->cached_input_tokens, u->finish_reason,
           u->have_usage, u->done, u->clamped, u->truncated, u->error);
}


static void
usage_is(const llm_usage_t *got, const llm_usage_t *want, const char *fmt,
    const char *name)
{
    if (!tap_ok(usage_eq(got, want), fmt, name)) {
        usage_diag("got", got);
        usage_diag("expected", want);
    }
}


static void
test_stream(const sse_case_t *c)
{
    char         *copy;
    size_t        len, split, mapped;
    const char   *ro;
    llm_usage_t   u;

    copy = unquote(c->stream, &len);
    ro = readonly_copy(copy, len, &mapped);

    feed(c, ro, len, len, 0, &u);
    usage_is(&u, &c->want, "%s: whole", c->name);

    for (split = 0; split <= len; split++) {
        feed(c, ro, len, split, 0, &u);

        if (!usage_eq(&u, &c->want)) {
            break;
        }
    }

    if (!tap_ok(split > len, "%s: split in two at every byte", c->name)) {
        printf("#   split at %zu of %zu\n", split, len);
        usage_diag("got", &u);
        usage_diag("expected", &c->want);
    }

    feed(c, ro, len, 0, 1, &u);
    usage_is(&u, &c->want, "%s: one byte at a time", c->name);

    tap_ok(memcmp(ro, copy, len) == 0, "%s: input unchanged", c->name);

    munmap((void *) ro, mapped);
    free(copy);
}


static void
test_json(const json_case_t *c)
{
    int           rc;
    char         *copy;
    size_t        len, mapped;
    const char   *ro;
    llm_usage_t   u;

    copy = unquote(c->body, &len);
    ro = readonly_copy(copy, len, &mapped);

    rc = llm_usage_from_json(c->api, ro, len, &u);

    tap_is(rc, c->rc, "json %s: returns %d", c->name, c->rc);
    usage_is(&u, &c->want, "json %s: usage", c->name);

    munmap((void *) ro, mapped);
    free(copy);
}


static void
test_pending(void)
{
    char         buf[BUF_SIZE];
    llm_sse_t    p;
    const char  *s;

    s = "data: {\"usage\":{\"prompt_tokens\":4}}\r";

    llm_sse_init(&p, OPENAI, buf, sizeof(buf));
    llm_sse_feed(&p, s, strlen(s));
    llm_sse_feed(&p, NULL, 0);

    tap_is(p.usage.have_usage, 0, "no usage before the blank line");

    llm_sse_feed(&p, "\n", 1);

    tap_is(p.usage.have_usage, 0, "CR then LF in the next feed is one end");

    llm_sse_feed(&p, "\r\n", 2);

    tap_is(p.usage.input_tokens, 4, "the blank line dispatches");

    llm_sse_finish(&p);
    llm_sse_finish(&p);

    tap_is(p.usage.input_tokens, 4, "finish after the end changes nothing");

    llm_sse_init(&p, OPENAI, NULL, 0);
    llm_sse_feed(&p, "data:\n\ndata: x\n\n", 16);
    llm_sse_finish(&p);

    tap_is(p.usage.truncated, 1, "no buffer: an event with data is skipped");
}


static int
write_corpus(const char *dir)
{
    int          sel;
    char        *copy, path[4096];
    FILE        *f;
    size_t       i, len, cap;
    llm_api_e    api;
    const char  *text;

    for (i = 0; i < nelts(sse_cases) + nelts(json_cases); i++) {

        if (i < nelts(sse_cases)) {
            text = sse_cases[i].stream;
            api = sse_cases[i].api;
            cap = sse_cases[i].cap;

        } else {
            text = json_cases[i - nelts(sse_cases)].body;
            api = json_cases[i - nelts(sse_cases)].api;
            cap = 0;
        }

        sel = SEED_HALF;

        if (api == ANTHROPIC) {
            sel |= SEED_ANTHROPIC;
        }

        if (cap != 0) {
            sel |= SEED_SMALL;
        }

        snprintf(path, sizeof(path), "%s/%s-%02zu",
                 dir, i < nelts(sse_cases) ? "stream" : "json", i);

        f = fopen(path, "w");
        if (f == NULL) {
            fprintf(stderr, "%s: %s\n", path, strerror(errno));
            return 1;
        }

        copy = unquote(text, &len);

        fputc(sel, f);
        fwrite(copy, 1, len, f);

        free(copy);

        if (fclose(f) != 0) {
            fprintf(stderr, "%s: %s\n", path, strerror(errno));
            return 1;
        }
    }

    return 0;
}


int
main(int argc, char **argv)
{
    size_t  i;

    if (argc == 3 && strcmp(argv[1], "--corpus") == 0) {
        return write_corpus(argv[2]);
    }

    for (i = 0; i < nelts(sse_cases); i++) {
        test_stream(&sse_cases[i]);
    }

    for (i = 0; i < nelts(json_cases); i++) {
        test_json(&json_cases[i]);
    }

    test_pending();

    return tap_done();
}
