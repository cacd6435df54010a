
/*
 * The usage extractor: canned streams fed whole, split in two at every
 * byte, one byte at a time, and event by event (yield), must all give the
 * same usage; then whole JSON bodies; then the filter that cuts the
 * usage-only chunk out of a stream, the bytes that close a cut stream, the
 * error event, and the settlement rule.
 *
 * Every figure expected is worked out from the input by hand, in the
 * comment beside it where it is not obvious.  delta_bytes counts decoded
 * UTF-8: an escape is one byte, \uXXXX the bytes of its code point.
 *
 * The streams are written with ' for " to keep them legible; no stream
 * needs a real '.  A \' in a stream is an escaped quote in its JSON.
 *
 *     test_sse --corpus DIR    writes the streams as fuzzer seeds
 */


#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cJSON.h>

#include "llm_settle.h"
#include "tap.h"


#define OPENAI          LLM_API_OPENAI
#define ANTHROPIC       LLM_API_ANTHROPIC
#define RESPONSES       LLM_API_RESPONSES
#define MAX             LLM_USAGE_TOKENS_MAX

#define BUF_SIZE        4096
#define SMALL_BUF       256
#define OUT_SIZE        16384

/*
 * The fuzzer's first byte (fuzz/fuzz_sse.c): bits 0-1 the API, bit 2 a
 * small buffer, bits 3-7 where to split, in 32nds.
 */
#define SEED_OPENAI     0x00
#define SEED_ANTHROPIC  0x01
#define SEED_RESPONSES  0x02
#define SEED_SMALL      0x04
#define SEED_HALF       (16 << 3)


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


/* OpenAI Chat Completions */

#define OAI_CHUNK                                                             \
    "data: {'id':'chatcmpl-9xK2','object':'chat.completion.chunk',"           \
    "'created':1718000000,'model':'gpt-4o-mini-2024-07-18',"                  \
    "'system_fingerprint':'fp_0ba0d124f1',"

#define OAI_ROLE                                                              \
    "'choices':[{'index':0,'delta':{'role':'assistant','content':'',"         \
    "'refusal':null},'logprobs':null,'finish_reason':null}]"

#define OAI_DELTA(member, t)                                                  \
    "'choices':[{'index':0,'delta':{'" member "':'" t "'},'logprobs':null,"   \
    "'finish_reason':null}]"

#define OAI_TEXT(t)     OAI_DELTA("content", t)

#define OAI_FINISH(r)                                                         \
    "'choices':[{'index':0,'delta':{},'logprobs':null,"                       \
    "'finish_reason':'" r "'}]"

#define OAI_USAGE_R(in, out, cached, reasoning)                               \
    "'choices':[],'usage':{'prompt_tokens':" in ",'completion_tokens':" out   \
    ",'total_tokens':0,'prompt_tokens_details':{'cached_tokens':" cached      \
    ",'audio_tokens':0},'completion_tokens_details':{'reasoning_tokens':"     \
    reasoning ",'audio_tokens':0,'accepted_prediction_tokens':0,"             \
    "'rejected_prediction_tokens':0}}"

#define OAI_USAGE(in, out, cached)  OAI_USAGE_R(in, out, cached, "0")

#define OAI_TOOL(i, head, args)                                               \
    "'choices':[{'index':0,'delta':{'tool_calls':[{'index':" i "," head       \
    "'function':{" args "}}]},'logprobs':null,'finish_reason':null}]"


/* Anthropic Messages */

#define ANT_START(usage)                                                      \
    "event: message_start\n"                                                  \
    "data: {'type':'message_start','message':{'id':'msg_01XFDUDYJgAA',"       \
    "'type':'message','role':'assistant','content':[],"                       \
    "'model':'claude-sonnet-4-20250514','stop_reason':null,"                  \
    "'stop_sequence':null,'usage':" usage "}}\n\n"

/* two text deltas: 'Hello' 5 bytes, ', world: usage, error.' 22 */
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

#define ANT_BLOCK(event, i, body)                                             \
    "event: " event "\n"                                                      \
    "data: {'type':'" event "','index':" i "," body "}\n\n"

#define ANT_BLOCK_STOP(i)                                                     \
    "event: content_block_stop\n"                                            \
    "data: {'type':'content_block_stop','index':" i "}\n\n"

#define ANT_DELTA(reason, usage)                                              \
    "event: message_delta\n"                                                  \
    "data: {'type':'message_delta','delta':{'stop_reason':" reason ","        \
    "'stop_sequence':null},'usage':" usage "}\n\n"

#define ANT_STOP                                                              \
    "event: message_stop\n"                                                   \
    "data: {'type':'message_stop'}\n\n"


/* OpenAI Responses */

#define RSP_ID    "resp_68af4030592c81938ec0a5fbab4a3e9f05438e46a5f9a4cc"
#define RSP_RS    "rs_68af4031e5a08193b8a5a4c0a77f0ba705438e46a5f9a4cc"
#define RSP_MSG   "msg_68af40337e7c8193b3ec3b2b9eb0d8d605438e46a5f9a4cc"

#define RSP_OBJECT(status, error, incomplete, output, usage)                  \
    "{'id':'" RSP_ID "','object':'response','created_at':1756315696,"         \
    "'status':'" status "','background':false,'error':" error ","             \
    "'incomplete_details':" incomplete ",'instructions':"                     \
    "'Answer in one line.','max_output_tokens':null,'max_tool_calls':null,"   \
    "'model':'o4-mini-2025-04-16','output':[" output "],"                     \
    "'parallel_tool_calls':true,'previous_response_id':null,"                 \
    "'reasoning':{'effort':'medium','summary':'auto'},"                       \
    "'service_tier':'auto','store':true,'temperature':1.0,"                   \
    "'text':{'format':{'type':'text'},'verbosity':'medium'},"                 \
    "'tool_choice':'auto','tools':[],'top_logprobs':0,'top_p':1.0,"           \
    "'truncation':'disabled','usage':" usage ",'user':null,'metadata':{}}"

#define RSP_USAGE(in, cached, out, reasoning)                                 \
    "{'input_tokens':" in ",'input_tokens_details':{'cached_tokens':"         \
    cached "},'output_tokens':" out ",'output_tokens_details':"               \
    "{'reasoning_tokens':" reasoning "},'total_tokens':0}"

/* the data of an event, with or without its event: line */
#define RSP_DATA(type, seq)                                                   \
    "data: {'type':'response." type "','sequence_number':" seq ","

#define RSP_EVENT(type, seq)                                                  \
    "event: response." type "\n" RSP_DATA(type, seq)

#define RSP_START                                                             \
    RSP_EVENT("created", "0") "'response':"                                   \
    RSP_OBJECT("in_progress", "null", "null", "", "null") "}\n\n"             \
    RSP_EVENT("in_progress", "1") "'response':"                               \
    RSP_OBJECT("in_progress", "null", "null", "", "null") "}\n\n"

#define RSP_SUMMARY     "{'type':'summary_text','text':'**Greeting**'}"

#define RSP_REASONING(summary)                                                \
    "{'id':'" RSP_RS "','type':'reasoning','summary':[" summary "]}"

#define RSP_MESSAGE(status, content)                                          \
    "{'id':'" RSP_MSG "','type':'message','status':'" status "',"             \
    "'content':[" content "],'role':'assistant'}"

#define RSP_PART(t)                                                           \
    "{'type':'output_text','annotations':[],'logprobs':[],'text':'" t "'}"

#define RSP_MESSAGE_ADDED(seq, i)                                             \
    RSP_EVENT("output_item.added", seq) "'output_index':" i ",'item':"        \
    RSP_MESSAGE("in_progress", "") "}\n\n"

#define RSP_PART_ADDED(seq, i)                                                \
    RSP_EVENT("content_part.added", seq) "'item_id':'" RSP_MSG "',"           \
    "'output_index':" i ",'content_index':0,'part':" RSP_PART("") "}\n\n"

#define RSP_TEXT_DELTA(seq, i, t)                                             \
    RSP_EVENT("output_text.delta", seq) "'item_id':'" RSP_MSG "',"            \
    "'output_index':" i ",'content_index':0,'delta':'" t "',"                 \
    "'logprobs':[],'obfuscation':'dX1Lq4sJvHb'}\n\n"

/* the text again, whole: it must not count twice */
#define RSP_TEXT_DONE(seq, seq2, i, t)                                        \
    RSP_EVENT("output_text.done", seq) "'item_id':'" RSP_MSG "',"             \
    "'output_index':" i ",'content_index':0,'text':'" t "',"                  \
    "'logprobs':[]}\n\n"                                                      \
    RSP_EVENT("content_part.done", seq2) "'item_id':'" RSP_MSG "',"           \
    "'output_index':" i ",'content_index':0,'part':" RSP_PART(t) "}\n\n"

#define RSP_END(type, seq, status, error, incomplete, output, usage)          \
    RSP_EVENT(type, seq) "'response':"                                        \
    RSP_OBJECT(status, error, incomplete, output, usage) "}\n\n"


#define X50  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"


static const sse_case_t  sse_cases[] = {

    /* OpenAI Chat Completions */

    /* 'Hello' 5 + ' there, finish_reason: stop' 27; the role's '' is none */
    { "openai, stream_options.include_usage", OPENAI, 0,
      OAI_CHUNK OAI_ROLE ",'usage':null}\n\n"
      OAI_CHUNK OAI_TEXT("Hello") ",'usage':null}\n\n"
      OAI_CHUNK OAI_TEXT(" there, finish_reason: stop") ",'usage':null}\n\n"
      OAI_CHUNK OAI_FINISH("stop") ",'usage':null}\n\n"
      OAI_CHUNK OAI_USAGE("12", "3", "0") "}\n\n"
      "data: [DONE]\n\n",
      { .input_tokens = 12, .output_tokens = 3,
        .delta_events = 2, .delta_bytes = 32, .finish_reason = "stop",
        .have_usage = 1, .have_input = 1, .done = 1 } },

    /* a member name written with an escape: parsed, so billed as read */
    { "openai, the usage's name escaped", OPENAI, 0,
      OAI_CHUNK OAI_ROLE "}\n\n"
      OAI_CHUNK OAI_FINISH("stop") "}\n\n"
      OAI_CHUNK "'choices':[],'usag\\u0065':{'prompt_tokens':12,"
      "'completion_tokens':3,'total_tokens':15}}\n\n"
      "data: [DONE]\n\n",
      { .input_tokens = 12, .output_tokens = 3, .finish_reason = "stop",
        .have_usage = 1, .have_input = 1, .done = 1 } },

    { "openai, no usage", OPENAI, 0,
      OAI_CHUNK OAI_ROLE "}\n\n"
      OAI_CHUNK OAI_TEXT("Hi") "}\n\n"
      OAI_CHUNK OAI_FINISH("stop") "}\n\n"
      "data: [DONE]\n\n",
      { .delta_events = 1, .delta_bytes = 2, .finish_reason = "stop",
        .done = 1 } },

    { "openai, cached tokens", OPENAI, 0,
      OAI_CHUNK OAI_ROLE ",'usage':null}\n\n"
      OAI_CHUNK OAI_TEXT("Once upon") ",'usage':null}\n\n"
      OAI_CHUNK OAI_FINISH("length") ",'usage':null}\n\n"
      OAI_CHUNK OAI_USAGE("2006", "300", "1920") "}\n\n"
      "data: [DONE]\n\n",
      { .input_tokens = 2006, .output_tokens = 300,
        .cached_input_tokens = 1920, .delta_events = 1, .delta_bytes = 9,
        .finish_reason = "length", .have_usage = 1, .have_input = 1,
        .done = 1 } },

    { "openai, CRLF line endings", OPENAI, 0,
      OAI_CHUNK OAI_TEXT("Hello") ",'usage':null}\r\n\r\n"
      OAI_CHUNK OAI_FINISH("stop") ",'usage':null}\r\n\r\n"
      "data: {'choices':[],\r\n"
      "data: 'usage':{'prompt_tokens':12,'completion_tokens':3,\r\n"
      "data: 'prompt_tokens_details':{'cached_tokens':2}}}\r\n\r\n"
      "data: [DONE]\r\n\r\n",
      { .input_tokens = 12, .output_tokens = 3, .cached_input_tokens = 2,
        .delta_events = 1, .delta_bytes = 5, .finish_reason = "stop",
        .have_usage = 1, .have_input = 1, .done = 1 } },

    /* two usage objects (1/1, then 7/9), one broken (12\n34) */
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
        .have_usage = 1, .have_input = 1, .done = 1, .repeated = 1 } },

    { "openai, in-band error", OPENAI, 0,
      OAI_CHUNK OAI_TEXT("Hel") "}\n\n"
      "data: {'error':{'message':'The server had an error while processing "
      "your request.','type':'server_error','param':null,'code':null}}\n\n",
      { .delta_events = 1, .delta_bytes = 3, .error = 1 } },

    { "openai, an error event", OPENAI, 0,
      OAI_CHUNK OAI_TEXT("Hel") "}\n\n"
      "event: error\n"
      "data: {'message':'upstream went away'}\n\n",
      { .delta_events = 1, .delta_bytes = 3, .error = 1 } },

    { "openai, malformed frame then usage", OPENAI, 0,
      "data: {'choices':[],'usage':{'prompt_tokens':5,\n\n"
      "data: {'usage':{'prompt_tokens':\n\n"
      OAI_CHUNK OAI_USAGE("40", "2", "0") "}\n\n"
      "data: [DONE]\n\n",
      { .input_tokens = 40, .output_tokens = 2,
        .have_usage = 1, .have_input = 1, .done = 1 } },

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
        .have_usage = 1, .have_input = 1, .done = 1, .truncated = 1 } },

    /* content larger than the buffer: that text is not seen either */
    { "openai, a content delta larger than the buffer", OPENAI, SMALL_BUF,
      "data: {'choices':[{'delta':{'content':'ab'}}]}\n\n"
      "data: {'choices':[{'delta':{'content':'"
      X50 X50 X50 X50 X50 "'}}]}\n\n"
      "data: {'choices':[{'delta':{'content':'cd'}}]}\n\n",
      { .delta_events = 2, .delta_bytes = 4, .truncated = 1 } },

    { "openai, hostile: -5, 1.5, \"10\"", OPENAI, 0,
      "data: {'choices':[],'usage':{'prompt_tokens':-5,"
      "'completion_tokens':1.5,"
      "'prompt_tokens_details':{'cached_tokens':'10'}}}\n\n",
      { .output_tokens = 1, .have_usage = 1, .have_input = 1,
        .clamped = 1 } },

    { "openai, hostile: 1e30, cached above prompt", OPENAI, 0,
      "data: {'choices':[],'usage':{'prompt_tokens':10,"
      "'completion_tokens':1e30,"
      "'prompt_tokens_details':{'cached_tokens':11}}}\n\n",
      { .input_tokens = 10, .output_tokens = MAX, .cached_input_tokens = 10,
        .have_usage = 1, .have_input = 1, .clamped = 1 } },

    { "openai, hostile: duplicated usage, the largest counts", OPENAI, 0,
      "data: {'choices':[],'usage':{'prompt_tokens':1000,"
      "'completion_tokens':1000}}\n\n"
      "data: {'choices':[],'usage':{'prompt_tokens':7,"
      "'completion_tokens':8}}\n\n"
      "data: [DONE]\n\n",
      { .input_tokens = 1000, .output_tokens = 1000,
        .have_usage = 1, .have_input = 1, .done = 1, .repeated = 1 } },

    /* each figure the larger of the two, whichever chunk it came in */
    { "openai, the usage chunk repeated with other figures", OPENAI, 0,
      OAI_CHUNK OAI_TEXT("Hi") ",'usage':null}\n\n"
      OAI_CHUNK OAI_FINISH("stop") ",'usage':null}\n\n"
      OAI_CHUNK OAI_USAGE_R("12", "5", "4", "2") "}\n\n"
      OAI_CHUNK OAI_USAGE_R("12", "3", "8", "0") "}\n\n"
      "data: [DONE]\n\n",
      { .input_tokens = 12, .output_tokens = 5, .cached_input_tokens = 8,
        .reasoning_tokens = 2, .delta_events = 1, .delta_bytes = 2,
        .finish_reason = "stop", .have_usage = 1, .have_input = 1,
        .done = 1, .repeated = 1 } },

    { "openai, in range and exact: 1e2, 100000000", OPENAI, 0,
      "data: {'usage':{'prompt_tokens':1e2,"
      "'completion_tokens':100000000,'prompt_tokens_details':null}}\n\n",
      { .input_tokens = 100, .output_tokens = MAX, .have_usage = 1,
        .have_input = 1 } },

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
        .have_usage = 1, .have_input = 1 } },

    { "openai, cut before the line end", OPENAI, 0,
      OAI_CHUNK OAI_USAGE("12", "3", "0") "}",
      { .input_tokens = 12, .output_tokens = 3, .have_usage = 1,
        .have_input = 1 } },

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
      { .input_tokens = 1, .have_usage = 1, .have_input = 1 } },

    { "openai, a BOM only at the start", OPENAI, 0,
      "data: {'usage':{'prompt_tokens':1}}\n\n"
      "\xEF\xBB\xBF" "data: {'usage':{'prompt_tokens':2}}\n\n",
      { .input_tokens = 1, .have_usage = 1, .have_input = 1 } },

    /* 'The answer is 42.' 17 bytes; 320 of the 339 tokens reasoning */
    { "openai, reasoning tokens", OPENAI, 0,
      OAI_CHUNK OAI_ROLE ",'usage':null}\n\n"
      OAI_CHUNK OAI_TEXT("The answer is 42.") ",'usage':null}\n\n"
      OAI_CHUNK OAI_FINISH("stop") ",'usage':null}\n\n"
      OAI_CHUNK OAI_USAGE_R("25", "339", "0", "320") "}\n\n"
      "data: [DONE]\n\n",
      { .input_tokens = 25, .output_tokens = 339, .reasoning_tokens = 320,
        .delta_events = 1, .delta_bytes = 17, .finish_reason = "stop",
        .have_usage = 1, .have_input = 1, .done = 1 } },

    { "openai, reasoning above the output is clamped", OPENAI, 0,
      OAI_CHUNK OAI_FINISH("stop") ",'usage':null}\n\n"
      OAI_CHUNK OAI_USAGE_R("10", "5", "0", "9") "}\n\n"
      "data: [DONE]\n\n",
      { .input_tokens = 10, .output_tokens = 5, .reasoning_tokens = 5,
        .finish_reason = "stop", .have_usage = 1, .have_input = 1,
        .done = 1, .clamped = 1 } },

    /*
     * The text of reasoning deltas (reasoning_content, reasoning), a
     * refusal and content: 'Okay, ' 6, 'the user says hi.' 17, 'Hmm' 3,
     * 'No.' 3, 'Hi!' 3: 5 events, 32 bytes.  'role' and a null content
     * are not text.
     */
    { "openai, reasoning, refusal and content deltas", OPENAI, 0,
      "data: {'choices':[{'index':0,'delta':{'role':'assistant',"
      "'content':null,'reasoning_content':'Okay, '},"
      "'finish_reason':null}]}\n\n"
      OAI_CHUNK OAI_DELTA("reasoning_content", "the user says hi.") "}\n\n"
      OAI_CHUNK OAI_DELTA("reasoning", "Hmm") "}\n\n"
      OAI_CHUNK OAI_DELTA("refusal", "No.") "}\n\n"
      OAI_CHUNK OAI_TEXT("Hi!") "}\n\n"
      OAI_CHUNK OAI_FINISH("stop") "}\n\n"
      OAI_CHUNK OAI_USAGE_R("8", "12", "0", "9") "}\n\n"
      "data: [DONE]\n\n",
      { .input_tokens = 8, .output_tokens = 12, .reasoning_tokens = 9,
        .delta_events = 5, .delta_bytes = 32, .finish_reason = "stop",
        .have_usage = 1, .have_input = 1, .done = 1 } },

    /*
     * Arguments as sent: {\"loc decodes to {"loc (5 bytes), then
     * ation\": \"Paris\"} to ation": "Paris"} (16), then {} (2) for a
     * second call; the empty first piece and the names are not text.
     */
    { "openai, tool-call argument deltas with escaped quotes", OPENAI, 0,
      OAI_CHUNK OAI_TOOL("0", "'id':'call_DdmO9pD3xa9XTPNJ32zg2hcA',"
                         "'type':'function',",
                         "'name':'get_weather','arguments':''") "}\n\n"
      OAI_CHUNK OAI_TOOL("0", "", "'arguments':'{\\'loc'") "}\n\n"
      OAI_CHUNK OAI_TOOL("0", "", "'arguments':'ation\\': \\'Paris\\'}'")
      "}\n\n"
      OAI_CHUNK OAI_TOOL("1", "'id':'call_Yn6QH2qTq5cXz4mW',"
                         "'type':'function',",
                         "'name':'get_time','arguments':'{}'") "}\n\n"
      OAI_CHUNK OAI_FINISH("tool_calls") "}\n\n"
      "data: [DONE]\n\n",
      { .delta_events = 3, .delta_bytes = 23, .finish_reason = "tool_calls",
        .done = 1 } },

    /*
     * caf\u00e9 \ud83d\ude00: 3 + 2 + 1 + 2 + 2 = 10 (the surrogate pair
     * is the 4 bytes of U+1F600); \u20ac5: 3 + 1; raw UTF-8 na\xc3\xafve:
     * 6; line\nnext \\ \"q\": 4 + 1 + 4 + 1 + 1 + 1 + 3 = 15.
     */
    { "openai, escapes and unicode", OPENAI, 0,
      OAI_CHUNK OAI_TEXT("caf\\u00e9 \\ud83d\\ude00") "}\n\n"
      OAI_CHUNK OAI_TEXT("\\u20AC5") "}\n\n"
      OAI_CHUNK OAI_TEXT("na\xc3\xaf" "ve") "}\n\n"
      OAI_CHUNK OAI_TEXT("line\\nnext \\\\ \\'q\\'") "}\n\n"
      OAI_CHUNK OAI_FINISH("stop") "}\n\n",
      { .delta_events = 4, .delta_bytes = 35, .finish_reason = "stop" } },

    /* text that looks like members or [DONE] is text: 26 + 12 bytes */
    { "openai, text that looks like JSON", OPENAI, 0,
      OAI_CHUNK OAI_TEXT("{\\'content\\':\\'x\\',\\'usage\\':{}}") "}\n\n"
      OAI_CHUNK OAI_TEXT("data: [DONE]") "}\n\n",
      { .delta_events = 2, .delta_bytes = 38 } },


    /* Anthropic Messages */

    { "anthropic, full sequence with cache tokens", ANTHROPIC, 0,
      ANT_START("{'input_tokens':10,'cache_creation_input_tokens':200,"
                "'cache_read_input_tokens':1800,'output_tokens':1}")
      ANT_CONTENT
      ANT_DELTA("'end_turn'", "{'output_tokens':42}")
      ANT_STOP,
      { .input_tokens = 2010, .output_tokens = 42,
        .cached_input_tokens = 1800, .cache_write_tokens = 200,
        .delta_events = 2, .delta_bytes = 27, .finish_reason = "end_turn",
        .have_usage = 1, .have_input = 1, .done = 1 } },

    /* a type written with an escape, on a ping's event line */
    { "anthropic, message_delta's type escaped", ANTHROPIC, 0,
      ANT_START("{'input_tokens':25,'output_tokens':1}")
      "event: ping\n"
      "data: {'type':'message\\u005fdelta','delta':{'stop_reason':"
      "'end_turn'},'usage':{'output_tokens':50}}\n\n"
      ANT_STOP,
      { .input_tokens = 25, .output_tokens = 50, .finish_reason = "end_turn",
        .have_usage = 1, .have_input = 1, .done = 1 } },

    /* three message_delta: the usage came more than once */
    { "anthropic, cumulative deltas", ANTHROPIC, 0,
      ANT_START("{'input_tokens':25,'output_tokens':1}")
      ANT_CONTENT
      ANT_DELTA("null", "{'output_tokens':5}")
      ANT_CONTENT
      ANT_DELTA("null", "{'output_tokens':17}")
      ANT_DELTA("'max_tokens'", "{'output_tokens':64}")
      ANT_STOP,
      { .input_tokens = 25, .output_tokens = 64,
        .delta_events = 4, .delta_bytes = 54,
        .finish_reason = "max_tokens", .have_usage = 1, .have_input = 1,
        .done = 1, .repeated = 1 } },

    /* 30 + 3 (kept from the start) + 5 */
    { "anthropic, message_delta revises the input", ANTHROPIC, 0,
      ANT_START("{'input_tokens':25,'cache_creation_input_tokens':3,"
                "'cache_read_input_tokens':0,'output_tokens':1}")
      ANT_DELTA("'tool_use'", "{'input_tokens':30,"
                "'cache_read_input_tokens':5,'output_tokens':9}")
      ANT_STOP,
      { .input_tokens = 38, .output_tokens = 9, .cached_input_tokens = 5,
        .cache_write_tokens = 3, .finish_reason = "tool_use",
        .have_usage = 1, .have_input = 1, .done = 1 } },

    /*
     * The second message_delta reports less output (12) than the first
     * (40) and a cache read (3): input 30 + 5 + 3 = 38, output 40.
     */
    { "anthropic, message_delta repeated with other figures", ANTHROPIC, 0,
      ANT_START("{'input_tokens':30,'cache_creation_input_tokens':5,"
                "'cache_read_input_tokens':0,'output_tokens':1}")
      ANT_CONTENT
      ANT_DELTA("'end_turn'", "{'input_tokens':30,"
                "'cache_creation_input_tokens':5,'output_tokens':40}")
      ANT_DELTA("'end_turn'", "{'output_tokens':12,"
                "'cache_read_input_tokens':3}")
      ANT_STOP,
      { .input_tokens = 38, .output_tokens = 40, .cached_input_tokens = 3,
        .cache_write_tokens = 5, .delta_events = 2, .delta_bytes = 27,
        .finish_reason = "end_turn", .have_usage = 1, .have_input = 1,
        .done = 1, .repeated = 1 } },

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
      { .input_tokens = 3, .output_tokens = 2, .delta_events = 1,
        .delta_bytes = 2, .finish_reason = "end_turn", .have_usage = 1,
        .have_input = 1, .done = 1 } },

    /* the text 'message_stop' (12 bytes) is text, not an event */
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
        .delta_events = 1, .delta_bytes = 12,
        .finish_reason = "stop_sequence", .have_usage = 1, .have_input = 1,
        .done = 1 } },

    /* 'event:  message_stop' names ' message_stop': not the end */
    { "anthropic, the type from the event line alone", ANTHROPIC, 0,
      "event:message_start\n"
      "data: {'message':{'usage':{'input_tokens':4,'output_tokens':1}}}\n\n"
      "event: message_delta\r\n"
      "data: {'delta':{'stop_reason':'end_turn'},\r\n"
      "data: 'usage':{'output_tokens':3}}\r\n\r\n"
      "event:  message_stop\n"
      "data: {}\n\n",
      { .input_tokens = 4, .output_tokens = 3, .finish_reason = "end_turn",
        .have_usage = 1, .have_input = 1 } },

    /* message_start alone reports the prompt, not the final usage */
    { "anthropic, error event", ANTHROPIC, 0,
      ANT_START("{'input_tokens':10,'output_tokens':1}")
      ANT_CONTENT
      "event: error\n"
      "data: {'type':'error','error':{'type':'overloaded_error',"
      "'message':'Overloaded'}}\n\n",
      { .input_tokens = 10, .output_tokens = 1, .delta_events = 2,
        .delta_bytes = 27, .have_input = 1, .error = 1 } },

    { "anthropic, an error in the data alone", ANTHROPIC, 0,
      "data: {'type':'error','error':{'type':'api_error',"
      "'message':'Internal server error'}}\n\n",
      { .error = 1 } },

    { "anthropic, cut after message_start", ANTHROPIC, 0,
      ANT_START("{'input_tokens':2095,'cache_creation_input_tokens':100,"
                "'cache_read_input_tokens':3000,'output_tokens':1}")
      ANT_CONTENT
      "event: content_block_delta\n"
      "data: {'type':'content_block_delta','index':0,'delta':{'type':",
      { .input_tokens = 5195, .output_tokens = 1,
        .cached_input_tokens = 3000, .cache_write_tokens = 100,
        .delta_events = 2, .delta_bytes = 27, .have_input = 1 } },

    /*
     * input 5 + a cache read clamped to MAX, the whole clamped to MAX;
     * '7' and -1 are not counts; 2.5 is 2, and a null keeps it
     */
    { "anthropic, hostile figures", ANTHROPIC, 0,
      ANT_START("{'input_tokens':5,'cache_read_input_tokens':1e30,"
                "'cache_creation_input_tokens':'7','output_tokens':-1}")
      ANT_DELTA("3", "{'output_tokens':2.5}")
      ANT_DELTA("null", "{'output_tokens':null}"),
      { .input_tokens = MAX, .output_tokens = 2, .cached_input_tokens = MAX,
        .have_usage = 1, .have_input = 1, .clamped = 1, .repeated = 1 } },

    { "anthropic, event larger than the buffer", ANTHROPIC, SMALL_BUF,
      ANT_START("{'input_tokens':9,'output_tokens':1}")
      "event: message_delta\n"
      "data: {'type':'message_delta','delta':{'stop_reason':'end_turn'},"
      "'usage':{'output_tokens':99},'pad':'" X50 X50 X50 X50 "'}\n\n"
      ANT_DELTA("'end_turn'", "{'output_tokens':4}")
      ANT_STOP,
      { .input_tokens = 9, .output_tokens = 4, .finish_reason = "end_turn",
        .have_usage = 1, .have_input = 1, .done = 1, .truncated = 1 } },

    { "anthropic, cut before the final blank line", ANTHROPIC, 0,
      ANT_START("{'input_tokens':10,'output_tokens':1}")
      "event: message_delta\n"
      "data: {'type':'message_delta','delta':{'stop_reason':'end_turn'},"
      "'usage':{'output_tokens':8}}",
      { .input_tokens = 10, .output_tokens = 8, .finish_reason = "end_turn",
        .have_usage = 1, .have_input = 1 } },

    /*
     * thinking 'The user wants the weather.' 27, text 'Let me check.' 13,
     * partial_json {"location": "San Fra 21 and ncisco, CA"} 12; the
     * signature, the empty pieces and the tool's name are not text.
     */
    { "anthropic, thinking, text and tool input deltas", ANTHROPIC, 0,
      ANT_START("{'input_tokens':472,'cache_creation_input_tokens':0,"
                "'cache_read_input_tokens':0,'output_tokens':2}")
      ANT_BLOCK("content_block_start", "0", "'content_block':"
                "{'type':'thinking','thinking':'','signature':''}")
      ANT_BLOCK("content_block_delta", "0", "'delta':"
                "{'type':'thinking_delta','thinking':"
                "'The user wants the weather.'}")
      ANT_BLOCK("content_block_delta", "0", "'delta':"
                "{'type':'signature_delta','signature':"
                "'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds'}")
      ANT_BLOCK_STOP("0")
      ANT_BLOCK("content_block_start", "1", "'content_block':"
                "{'type':'text','text':''}")
      ANT_BLOCK("content_block_delta", "1", "'delta':"
                "{'type':'text_delta','text':'Let me check.'}")
      ANT_BLOCK_STOP("1")
      ANT_BLOCK("content_block_start", "2", "'content_block':"
                "{'type':'tool_use','id':'toolu_01T1x1fJ34qAmk2tNTrN7Up6',"
                "'name':'get_weather','input':{}}")
      ANT_BLOCK("content_block_delta", "2", "'delta':"
                "{'type':'input_json_delta','partial_json':''}")
      ANT_BLOCK("content_block_delta", "2", "'delta':"
                "{'type':'input_json_delta','partial_json':"
                "'{\\'location\\': \\'San Fra'}")
      ANT_BLOCK("content_block_delta", "2", "'delta':"
                "{'type':'input_json_delta','partial_json':"
                "'ncisco, CA\\'}'}")
      ANT_BLOCK_STOP("2")
      ANT_DELTA("'tool_use'", "{'output_tokens':89}")
      ANT_STOP,
      { .input_tokens = 472, .output_tokens = 89, .delta_events = 4,
        .delta_bytes = 73, .finish_reason = "tool_use", .have_usage = 1,
        .have_input = 1, .done = 1 } },


    /* OpenAI Responses */

    /*
     * The deltas: '**Greeting**' 12 (reasoning summary), 'Hello' 5,
     * ' there!' 7, ' How can I help?' 16: 4 events, 40 bytes.  The done
     * events and response.completed repeat the text: not counted again.
     */
    { "responses, full sequence with cached and reasoning tokens",
      RESPONSES, 0,
      RSP_START
      RSP_EVENT("output_item.added", "2") "'output_index':0,'item':"
      RSP_REASONING("") "}\n\n"
      RSP_EVENT("reasoning_summary_part.added", "3") "'item_id':'" RSP_RS
      "','output_index':0,'summary_index':0,'part':"
      "{'type':'summary_text','text':''}}\n\n"
      RSP_EVENT("reasoning_summary_text.delta", "4") "'item_id':'" RSP_RS
      "','output_index':0,'summary_index':0,'delta':'**Greeting**',"
      "'obfuscation':'Xq3'}\n\n"
      RSP_EVENT("reasoning_summary_text.done", "5") "'item_id':'" RSP_RS
      "','output_index':0,'summary_index':0,'text':'**Greeting**'}\n\n"
      RSP_EVENT("reasoning_summary_part.done", "6") "'item_id':'" RSP_RS
      "','output_index':0,'summary_index':0,'part':" RSP_SUMMARY "}\n\n"
      RSP_EVENT("output_item.done", "7") "'output_index':0,'item':"
      RSP_REASONING(RSP_SUMMARY) "}\n\n"
      RSP_MESSAGE_ADDED("8", "1")
      RSP_PART_ADDED("9", "1")
      RSP_TEXT_DELTA("10", "1", "Hello")
      RSP_TEXT_DELTA("11", "1", " there!")
      RSP_TEXT_DELTA("12", "1", " How can I help?")
      RSP_TEXT_DONE("13", "14", "1", "Hello there! How can I help?")
      RSP_EVENT("output_item.done", "15") "'output_index':1,'item':"
      RSP_MESSAGE("completed", RSP_PART("Hello there! How can I help?"))
      "}\n\n"
      RSP_END("completed", "16", "completed", "null", "null",
              RSP_REASONING(RSP_SUMMARY) ","
              RSP_MESSAGE("completed",
                          RSP_PART("Hello there! How can I help?")),
              RSP_USAGE("2064", "1920", "83", "64")),
      { .input_tokens = 2064, .output_tokens = 83,
        .cached_input_tokens = 1920, .reasoning_tokens = 64,
        .delta_events = 4, .delta_bytes = 40, .finish_reason = "completed",
        .have_usage = 1, .have_input = 1, .done = 1 } },

    /* 'Once upon' 9, ' a time' 7 */
    { "responses, incomplete: max_output_tokens", RESPONSES, 0,
      RSP_START
      RSP_MESSAGE_ADDED("2", "0")
      RSP_PART_ADDED("3", "0")
      RSP_TEXT_DELTA("4", "0", "Once upon")
      RSP_TEXT_DELTA("5", "0", " a time")
      RSP_TEXT_DONE("6", "7", "0", "Once upon a time")
      RSP_END("incomplete", "8", "incomplete", "null",
              "{'reason':'max_output_tokens'}",
              RSP_MESSAGE("incomplete", RSP_PART("Once upon a time")),
              RSP_USAGE("15", "0", "16", "0")),
      { .input_tokens = 15, .output_tokens = 16, .delta_events = 2,
        .delta_bytes = 16, .finish_reason = "max_output_tokens",
        .have_usage = 1, .have_input = 1, .done = 1 } },

    { "responses, failed", RESPONSES, 0,
      RSP_START
      RSP_MESSAGE_ADDED("2", "0")
      RSP_TEXT_DELTA("3", "0", "Par")
      RSP_END("failed", "4", "failed",
              "{'code':'server_error','message':"
              "'The model failed to generate a response.'}",
              "null", "", "null"),
      { .delta_events = 1, .delta_bytes = 3, .finish_reason = "failed",
        .done = 1, .error = 1 } },

    { "responses, failed with its usage", RESPONSES, 0,
      RSP_START
      RSP_TEXT_DELTA("2", "0", "Par")
      RSP_END("failed", "3", "failed",
              "{'code':'server_error','message':'Sorry.'}", "null", "",
              RSP_USAGE("40", "0", "1", "0")),
      { .input_tokens = 40, .output_tokens = 1, .delta_events = 1,
        .delta_bytes = 3, .finish_reason = "failed", .have_usage = 1,
        .have_input = 1, .done = 1, .error = 1 } },

    { "responses, an in-band error event", RESPONSES, 0,
      RSP_START
      RSP_TEXT_DELTA("2", "0", "Hel")
      "event: error\n"
      "data: {'type':'error','code':'server_error','message':'The server "
      "had an error while processing your request.','param':null,"
      "'sequence_number':3}\n\n",
      { .delta_events = 1, .delta_bytes = 3, .error = 1 } },

    { "responses, an error in the data alone", RESPONSES, 0,
      RSP_DATA("output_text.delta", "2") "'delta':'Hel'}\n\n"
      "data: {'type':'error','code':'rate_limit_exceeded',"
      "'message':'Rate limit reached','param':null,"
      "'sequence_number':3}\n\n",
      { .delta_events = 1, .delta_bytes = 3, .error = 1 } },

    /* the types from the data: 'Hi' 2, counted once */
    { "responses, without event: lines", RESPONSES, 0,
      RSP_DATA("created", "0") "'response':"
      RSP_OBJECT("in_progress", "null", "null", "", "null") "}\n\n"
      RSP_DATA("output_text.delta", "1") "'item_id':'" RSP_MSG "',"
      "'output_index':0,'content_index':0,'delta':'Hi'}\n\n"
      RSP_DATA("output_text.done", "2") "'item_id':'" RSP_MSG "',"
      "'output_index':0,'content_index':0,'text':'Hi'}\n\n"
      RSP_DATA("completed", "3") "'response':"
      RSP_OBJECT("completed", "null", "null",
                 RSP_MESSAGE("completed", RSP_PART("Hi")),
                 RSP_USAGE("9", "0", "2", "0")) "}\n\n",
      { .input_tokens = 9, .output_tokens = 2, .delta_events = 1,
        .delta_bytes = 2, .finish_reason = "completed", .have_usage = 1,
        .have_input = 1, .done = 1 } },

    /* 'The capital' 11, ' of France' 10, ' is' 3; then cut */
    { "responses, cut mid-stream", RESPONSES, 0,
      RSP_START
      RSP_MESSAGE_ADDED("2", "0")
      RSP_PART_ADDED("3", "0")
      RSP_TEXT_DELTA("4", "0", "The capital")
      RSP_TEXT_DELTA("5", "0", " of France")
      RSP_TEXT_DELTA("6", "0", " is")
      RSP_EVENT("output_text.delta", "7") "'item_id':'msg_68af",
      { .delta_events = 3, .delta_bytes = 24 } },

    /* a function call's arguments: {"city": "Paris"} 17 */
    { "responses, function call arguments", RESPONSES, 0,
      RSP_START
      RSP_EVENT("function_call_arguments.delta", "2") "'item_id':"
      "'fc_68af4035','output_index':0,'delta':'{\\'city\\': '}\n\n"
      RSP_EVENT("function_call_arguments.delta", "3") "'item_id':"
      "'fc_68af4035','output_index':0,'delta':'\\'Paris\\'}'}\n\n"
      RSP_EVENT("function_call_arguments.done", "4") "'item_id':"
      "'fc_68af4035','output_index':0,"
      "'arguments':'{\\'city\\': \\'Paris\\'}'}\n\n"
      RSP_END("completed", "5", "completed", "null", "null",
              "{'type':'function_call','id':'fc_68af4035','call_id':"
              "'call_1','name':'get_weather','arguments':"
              "'{\\'city\\': \\'Paris\\'}','status':'completed'}",
              RSP_USAGE("60", "0", "18", "0")),
      { .input_tokens = 60, .output_tokens = 18, .delta_events = 2,
        .delta_bytes = 17, .finish_reason = "completed", .have_usage = 1,
        .have_input = 1, .done = 1 } },

    /*
     * The count's two ways: an event without a backslash is read as
     * strings two quotes each, one with a backslash is walked through its
     * escapes; both by 64-byte blocks of the data.  The offsets are the
     * data's: OpenAI's text here starts at 33, Anthropic's at 77.
     */

    /* 100 bytes, from 33 to 133: over three blocks */
    { "scan, a text over three blocks", OPENAI, 0,
      "data: {'choices':[{'delta':{'content':'" X50 X50 "'}}]}\n\n",
      { .delta_events = 1, .delta_bytes = 100 } },

    /* an event shorter than a block */
    { "scan, a short event", OPENAI, 0,
      "data: {'content':'hi'}\n\n",
      { .delta_events = 1, .delta_bytes = 2 } },

    /*
     * \u00e9 at 62 (over the first block's end: 2), \n at 128 (the third
     * block's first byte: 1), \' at 130 (1): 29 + 2 + 60 + 1 + 1 + 3 = 96
     */
    { "scan, escapes over the blocks' edges", OPENAI, 0,
      "data: {'choices':[{'delta':{'content':'"
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\u00e9"
      "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
      "\\n\\'ccc'}}]}\n\n",
      { .delta_events = 1, .delta_bytes = 96 } },

    /* a backslash at 63, the last byte of a block, its n at 64: 30 + 1 */
    { "scan, an escape split by a block", OPENAI, 0,
      "data: {'choices':[{'delta':{'content':'"
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\n'}}]}\n\n",
      { .delta_events = 1, .delta_bytes = 31 } },

    /* outside a string a backslash is text: the quote after it opens one */
    { "scan, a backslash outside a string", OPENAI, 0,
      "data: {'a':1,\\'content':'xy'}\n\n",
      { .delta_events = 1, .delta_bytes = 2 } },

    /*
     * \u takes the four bytes after it, a quote among them: the text runs
     * to the end, a (1), \u'bc' as U+0BC0 (3, a non-digit read as 0), }
     * (1)
     */
    { "scan, a \\u over a quote", OPENAI, 0,
      "data: {'content':'a\\u'bc'}\n\n",
      { .delta_events = 1, .delta_bytes = 5 } },

    /* the stream ends in a text: it counts as far as it goes */
    { "scan, a text cut short", OPENAI, 0,
      "data: {'content':'abc",
      { .delta_events = 1, .delta_bytes = 3 } },

    /* the same with a backslash last, which counts for nothing */
    { "scan, a text cut short after a backslash", OPENAI, 0,
      "data: {'content':'abc\\",
      { .delta_events = 1, .delta_bytes = 3 } },

    /* and with a \u short of its four digits, a byte for \u and each */
    { "scan, a text cut short in a \\u", OPENAI, 0,
      "data: {'content':'ab\\u12",
      { .delta_events = 1, .delta_bytes = 5 } },

    /* a value, not a name, though a colon follows: 'x' is no member */
    { "scan, a text value followed by a colon", OPENAI, 0,
      "data: {'content':'content':'x'}\n\n",
      { .delta_events = 1, .delta_bytes = 7 } },

    /* an escaped name is not read by the scan but parsed: no text */
    { "scan, an escaped name", OPENAI, 0,
      "data: {'choices':[{'delta':{'cont\\u0065nt':'abc'}}]}\n\n",
      { 0 } },

    /* \u00e9 at 126, over the second block's end: 49 + 2 + 1 */
    { "scan, anthropic escapes over a block's edge", ANTHROPIC, 0,
      "event: content_block_delta\n"
      "data: {'type':'content_block_delta','index':0,"
      "'delta':{'type':'text_delta','text':'"
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\u00e9b'}}\n\n",
      { .delta_events = 1, .delta_bytes = 52 } },

    { "scan, a responses delta of two blocks", RESPONSES, 0,
      "data: {'type':'response.output_text.delta','delta':'" X50 X50
      "'}\n\n",
      { .delta_events = 1, .delta_bytes = 100 } },
};


/* a whole body's text counts as one delta event */

static const json_case_t  json_cases[] = {

    /* 'The image shows a wooden boardwalk.' 35 bytes */
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
        .cached_input_tokens = 1024, .delta_events = 1, .delta_bytes = 35,
        .finish_reason = "stop", .have_usage = 1, .have_input = 1,
        .done = 1 } },

    { "openai, reasoning tokens", OPENAI,
      "{'object':'chat.completion','model':'o3-mini-2025-01-31',"
      "'choices':[{'index':0,'message':{'role':'assistant','content':"
      "'42','refusal':null},'finish_reason':'stop'}],"
      "'usage':{'prompt_tokens':31,'completion_tokens':529,"
      "'total_tokens':560,'prompt_tokens_details':{'cached_tokens':0},"
      "'completion_tokens_details':{'reasoning_tokens':512}}}",
      1,
      { .input_tokens = 31, .output_tokens = 529, .reasoning_tokens = 512,
        .delta_events = 1, .delta_bytes = 2, .finish_reason = "stop",
        .have_usage = 1, .have_input = 1, .done = 1 } },

    { "openai, no usage", OPENAI,
      "{'object':'chat.completion','choices':[{'index':0,'message':"
      "{'role':'assistant','content':'x'},'finish_reason':'length'}]}",
      0,
      { .delta_events = 1, .delta_bytes = 1, .finish_reason = "length",
        .done = 1 } },

    /* 'Sure.' 5 + 'Easy.' 5 + {"a":1} 7 */
    { "openai, no usage: the text of content, reasoning, arguments",
      OPENAI,
      "{'id':'chatcmpl-1','object':'chat.completion','choices':[{'index':0,"
      "'message':{'role':'assistant','content':'Sure.',"
      "'reasoning_content':'Easy.','tool_calls':[{'id':'call_1',"
      "'type':'function','function':{'name':'f','arguments':"
      "'{\\'a\\':1}'}}],'refusal':null},'finish_reason':'tool_calls'}]}",
      0,
      { .delta_events = 1, .delta_bytes = 17, .finish_reason = "tool_calls",
        .done = 1 } },

    /* a 'content' inside the usage is not text: 'ok' 2 */
    { "openai, the usage subtree is not text", OPENAI,
      "{'choices':[{'message':{'content':'ok'},'finish_reason':'stop'}],"
      "'usage':{'prompt_tokens':3,'completion_tokens':1,"
      "'content':'not generated','details':[{'refusal':'no'}]}}",
      1,
      { .input_tokens = 3, .output_tokens = 1, .delta_events = 1,
        .delta_bytes = 2, .finish_reason = "stop", .have_usage = 1,
        .have_input = 1, .done = 1 } },

    { "openai, error body", OPENAI,
      "{'error':{'message':'Incorrect API key provided.','type':"
      "'invalid_request_error','param':null,'code':'invalid_api_key'}}",
      0,
      { .error = 1, .done = 1 } },

    /* cached 1.5 is 1, then more than the prompt (0): 0 */
    { "openai, hostile figures", OPENAI,
      "{'usage':{'prompt_tokens':-5,'completion_tokens':'10',"
      "'prompt_tokens_details':{'cached_tokens':1.5}}}",
      1,
      { .have_usage = 1, .have_input = 1, .done = 1, .clamped = 1 } },

    /* 'Hi!' 3 */
    { "anthropic, message with cache tokens", ANTHROPIC,
      "{'id':'msg_013Zva2CMHLNnXjNJJKqJ2EF','type':'message','role':"
      "'assistant','model':'claude-sonnet-4-20250514','content':[{'type':"
      "'text','text':'Hi!'}],'stop_reason':'end_turn','stop_sequence':null,"
      "'usage':{'input_tokens':2095,'cache_creation_input_tokens':100,"
      "'cache_read_input_tokens':3000,'output_tokens':503}}",
      1,
      { .input_tokens = 5195, .output_tokens = 503,
        .cached_input_tokens = 3000, .cache_write_tokens = 100,
        .delta_events = 1, .delta_bytes = 3, .finish_reason = "end_turn",
        .have_usage = 1, .have_input = 1, .done = 1 } },

    /* 'Hmm.' 4 + 'Done.' 5; a tool's input is an object, not text */
    { "anthropic, no usage: the text of thinking and text", ANTHROPIC,
      "{'type':'message','role':'assistant','content':["
      "{'type':'thinking','thinking':'Hmm.','signature':'EqQBCgIYAhIM'},"
      "{'type':'text','text':'Done.'},"
      "{'type':'tool_use','id':'toolu_1','name':'f','input':{'q':'x'}}],"
      "'stop_reason':'tool_use'}",
      0,
      { .delta_events = 1, .delta_bytes = 9, .finish_reason = "tool_use",
        .done = 1 } },

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
        .have_usage = 1, .have_input = 1, .done = 1, .clamped = 1 } },

    /*
     * The summary '**Greeting**' 12 and 'Hello there! How can I help?'
     * 28; the 'text' member that configures the format is an object.
     */
    { "responses, completed with its usage", RESPONSES,
      RSP_OBJECT("completed", "null", "null",
                 RSP_REASONING(RSP_SUMMARY) ","
                 RSP_MESSAGE("completed",
                             RSP_PART("Hello there! How can I help?")),
                 RSP_USAGE("2064", "1920", "83", "64")),
      1,
      { .input_tokens = 2064, .output_tokens = 83,
        .cached_input_tokens = 1920, .reasoning_tokens = 64,
        .delta_events = 1, .delta_bytes = 40, .finish_reason = "completed",
        .have_usage = 1, .have_input = 1, .done = 1 } },

    { "responses, incomplete: max_output_tokens", RESPONSES,
      RSP_OBJECT("incomplete", "null", "{'reason':'max_output_tokens'}",
                 RSP_REASONING(""),
                 RSP_USAGE("20", "0", "256", "256")),
      1,
      { .input_tokens = 20, .output_tokens = 256, .reasoning_tokens = 256,
        .finish_reason = "max_output_tokens", .have_usage = 1,
        .have_input = 1, .done = 1 } },

    { "responses, incomplete without a reason", RESPONSES,
      RSP_OBJECT("incomplete", "null", "null", "",
                 RSP_USAGE("20", "0", "7", "0")),
      1,
      { .input_tokens = 20, .output_tokens = 7,
        .finish_reason = "incomplete", .have_usage = 1, .have_input = 1,
        .done = 1 } },

    { "responses, failed", RESPONSES,
      RSP_OBJECT("failed", "{'code':'server_error','message':'Sorry.'}",
                 "null", "", "null"),
      0,
      { .finish_reason = "failed", .done = 1, .error = 1 } },

    { "responses, error body", RESPONSES,
      "{'error':{'message':'Invalid value for input.','type':"
      "'invalid_request_error','param':'input','code':null}}",
      0,
      { .error = 1, .done = 1 } },

    /*
     * arguments {"city":"Paris"} 16 and the refusal 'I can\u2019t help.'
     * 1 + 1 + 3 + 3 + 1 + 1 + 5 = 15
     */
    { "responses, no usage: the text of arguments and refusals", RESPONSES,
      "{'id':'resp_1','object':'response','status':'completed','output':["
      "{'type':'function_call','id':'fc_1','call_id':'call_1',"
      "'name':'get_weather','arguments':'{\\'city\\':\\'Paris\\'}',"
      "'status':'completed'},"
      "{'type':'message','role':'assistant','content':[{'type':'refusal',"
      "'refusal':'I can\\u2019t help.'}]}],'usage':null}",
      0,
      { .delta_events = 1, .delta_bytes = 31, .finish_reason = "completed",
        .done = 1 } },

    { "openai, truncated body", OPENAI,
      "{'choices':[{'finish_reason':'stop'}],'usage':{'prompt_tokens':3",
      0,
      { .done = 0 } },

    { "openai, not an object", OPENAI, "[{'usage':{}}]", 0, { .done = 0 } },

    { "anthropic, empty body", ANTHROPIC, "", 0, { .done = 0 } },
};


/*
 * The filter's streams: what precedes the usage-only chunk, the chunk,
 * and what follows it.  The client gets all but the chunk.
 */

typedef struct {
    const char   *name;
    const char   *before;
    const char   *usage;
    const char   *after;
    unsigned      crlf:1;           /* every LF is sent as CRLF */
} strip_case_t;


#define STRIP_ROLE      OAI_CHUNK OAI_ROLE ",'usage':null}\n\n"
#define STRIP_HELLO     OAI_CHUNK OAI_TEXT("Hello") ",'usage':null}\n\n"
#define STRIP_FINISH    OAI_CHUNK OAI_FINISH("stop") ",'usage':null}\n\n"
#define STRIP_USAGE     OAI_CHUNK OAI_USAGE("12", "3", "0") "}\n\n"
#define STRIP_DONE      "data: [DONE]\n\n"


static const strip_case_t  strip_cases[] = {
    { "LF", STRIP_ROLE STRIP_HELLO STRIP_FINISH, STRIP_USAGE, STRIP_DONE, 0 },
    { "CRLF", STRIP_ROLE STRIP_HELLO STRIP_FINISH, STRIP_USAGE, STRIP_DONE,
      1 },
};

/* the usage of every strip stream: 'Hello' 5 */
static const llm_usage_t  strip_want = {
    .input_tokens = 12, .output_tokens = 3, .delta_events = 1,
    .delta_bytes = 5, .finish_reason = "stop", .have_usage = 1,
    .have_input = 1, .done = 1
};

/* the usage-only chunk before any finish_reason */
static const strip_case_t  early_cases[] = {
    { "early usage, LF", STRIP_ROLE, STRIP_USAGE,
      STRIP_HELLO STRIP_FINISH STRIP_DONE, 0 },
    { "early usage, CRLF", STRIP_ROLE, STRIP_USAGE,
      STRIP_HELLO STRIP_FINISH STRIP_DONE, 1 },
};

/* no hold, and one smaller than a usage chunk */
static const size_t  small_holds[] = { 0, 100 };


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


/*
 * step 0: in two parts at split; otherwise step bytes at a time.  With
 * yield, each part is fed event by event, as the strip filter does: a
 * return before the part's end must come right after the blank line that
 * ended an event, between events.  *stops counts the returns that
 * dispatched; *bad those that broke the rule.
 */

static void
feed(const sse_case_t *c, const char *s, size_t len, size_t split,
    size_t step, unsigned yield, llm_usage_t *u, size_t *stops, int *bad)
{
    char       *buf;
    size_t      cap, off, n, used;
    llm_sse_t   p;

    cap = c->cap ? c->cap : BUF_SIZE;

    buf = malloc(cap);
    if (buf == NULL) {
        perror("malloc");
        exit(2);
    }

    llm_sse_init(&p, c->api, buf, cap);
    p.yield = yield;

    *stops = 0;
    *bad = 0;

    for (off = 0; off < len; off += used) {

        if (step) {
            n = (len - off < step) ? len - off : step;

        } else {
            n = (off < split) ? split - off : len - off;
        }

        used = llm_sse_feed(&p, s + off, n);

        if (!yield) {
            *bad += (used != n);

        } else if (used == 0 || used > n
                   || (used < n && !p.dispatched)
                   || (p.dispatched
                       && (llm_sse_pending(&p) != 0
                           || (s[off + used - 1] != '\n'
                               && s[off + used - 1] != '\r'))))
        {
            (*bad)++;
        }

        if (used == 0 || used > n) {
            break;
        }

        *stops += p.dispatched;
    }

    llm_sse_finish(&p);

    *u = p.usage;

    free(buf);
}


/* the events a stream holds: its blank lines, CRLF being one line end */

static size_t
blank_lines(const char *s, size_t len)
{
    size_t    i, n;
    unsigned  empty;

    n = 0;
    empty = 1;

    for (i = 0; i < len; i++) {

        if (s[i] != '\r' && s[i] != '\n') {
            empty = 0;
            continue;
        }

        n += empty;
        empty = 1;

        if (s[i] == '\r' && i + 1 < len && s[i + 1] == '\n') {
            i++;
        }
    }

    return n;
}


static int
usage_eq(const llm_usage_t *a, const llm_usage_t *b)
{
    return a->input_tokens == b->input_tokens
           && a->output_tokens == b->output_tokens
           && a->cached_input_tokens == b->cached_input_tokens
           && a->cache_write_tokens == b->cache_write_tokens
           && a->reasoning_tokens == b->reasoning_tokens
           && a->delta_events == b->delta_events
           && a->delta_bytes == b->delta_bytes
           && strcmp(a->finish_reason, b->finish_reason) == 0
           && a->have_usage == b->have_usage
           && a->have_input == b->have_input
           && a->done == b->done
           && a->clamped == b->clamped
           && a->repeated == b->repeated
           && a->truncated == b->truncated
           && a->error == b->error;
}


static void
usage_diag(const char *what, const llm_usage_t *u)
{
    printf("#   %s: in=%llu out=%llu cached=%llu cache_write=%llu "
           "reasoning=%llu deltas=%llu bytes=%llu finish='%s'\n"
           "#     usage=%u input=%u done=%u clamped=%u repeated=%u "
           "truncated=%u error=%u\n", what,
           (unsigned long long) u->input_tokens,
           (unsigned long long) u->output_tokens,
           (unsigned long long) u->cached_input_tokens,
           (unsigned long long) u->cache_write_tokens,
           (unsigned long long) u->reasoning_tokens,
           (unsigned long long) u->delta_events,
           (unsigned long long) u->delta_bytes, u->finish_reason,
           u->have_usage, u->have_input, u->done, u->clamped, u->repeated,
           u->truncated, u->error);
}


static int
usage_is(const llm_usage_t *got, const llm_usage_t *want, const char *fmt,
    const char *name)
{
    if (tap_ok(usage_eq(got, want), fmt, name)) {
        return 1;
    }

    usage_diag("got", got);
    usage_diag("expected", want);

    return 0;
}


static void
test_stream(const sse_case_t *c)
{
    int           bad;
    char         *copy;
    size_t        len, split, mapped, stops, want_stops;
    unsigned      yield;
    const char   *ro;
    llm_usage_t   u;

    copy = unquote(c->stream, &len);
    ro = readonly_copy(copy, len, &mapped);

    feed(c, ro, len, len, 0, 0, &u, &stops, &bad);
    usage_is(&u, &c->want, "%s: whole", c->name);

    feed(c, ro, len, len, 0, 1, &u, &want_stops, &bad);
    usage_is(&u, &c->want, "%s: event by event", c->name);

    if (!tap_ok(bad == 0 && want_stops == blank_lines(ro, len),
                "%s: event by event, a stop after each event", c->name))
    {
        printf("#   %d bad stops, %zu stops for %zu events\n", bad,
               want_stops, blank_lines(ro, len));
    }

    /* whole and event by event, at every split */

    for (split = 0; split <= len; split++) {
        for (yield = 0; yield < 2; yield++) {
            feed(c, ro, len, split, 0, yield, &u, &stops, &bad);

            if (!usage_eq(&u, &c->want) || bad
                || (yield && stops != want_stops))
            {
                goto failed;
            }
        }
    }

failed:

    if (!tap_ok(split > len, "%s: split in two at every byte", c->name)) {
        printf("#   split at %zu of %zu%s: %d bad stops, %zu of %zu\n",
               split, len, yield ? ", event by event" : "", bad, stops,
               want_stops);
        usage_diag("got", &u);
        usage_diag("expected", &c->want);
    }

    feed(c, ro, len, 0, 1, 0, &u, &stops, &bad);
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

    rc = llm_sse_usage_from_json(c->api, ro, len, &u);

    tap_is(rc, c->rc, "json %s: returns %d", c->name, c->rc);
    usage_is(&u, &c->want, "json %s: usage", c->name);

    munmap((void *) ro, mapped);
    free(copy);
}


static void
test_pending(void)
{
    char         buf[BUF_SIZE], data[BUF_SIZE];
    size_t       len;
    llm_sse_t    p;
    const char  *s;

    static const char  e1[] = "data: {\"choices\":[],"
                              "\"usage\":{\"prompt_tokens\":4}}\r\n\r\n";
    static const char  e2[] = "data: {\"choices\":[{\"delta\":{}}],"
                              "\"usage\":{\"prompt_tokens\":5}}\n\n";
    static const char  e3[] = "data: [DONE]";

    s = "data: {\"usage\":{\"prompt_tokens\":4}}\r";

    llm_sse_init(&p, OPENAI, buf, sizeof(buf));
    tap_is(llm_sse_feed(&p, s, strlen(s)), strlen(s),
           "feed returns what it consumed: all of it without yield");
    tap_is(llm_sse_feed(&p, NULL, 0), 0, "an empty feed consumes nothing");

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

    /* yield: one event per call, the LF of a CRLF with it */

    len = snprintf(data, sizeof(data), "%s%s%s", e1, e2, e3);

    llm_sse_init(&p, OPENAI, buf, sizeof(buf));
    p.yield = 1;

    tap_is(llm_sse_feed(&p, data, len), sizeof(e1) - 1,
           "yield: the first event, its CRLF blank line included");
    tap_ok(p.dispatched && p.usage_only && p.usage.input_tokens == 4,
           "yield: dispatched, a usage-only chunk");

    s = data + sizeof(e1) - 1;

    tap_is(llm_sse_feed(&p, s, strlen(s)), sizeof(e2) - 1,
           "yield: the second event");
    tap_ok(p.dispatched && !p.usage_only && p.usage.input_tokens == 5,
           "yield: a chunk with choices is not usage-only");

    s += sizeof(e2) - 1;

    tap_is(llm_sse_feed(&p, s, strlen(s)), sizeof(e3) - 1,
           "yield: the unfinished rest, all of it");
    tap_ok(!p.dispatched && !p.usage_only, "yield: nothing dispatched");
}


/* the filter */

typedef struct {
    char      *data;
    size_t     len;
    size_t     cap;
    unsigned   fail:1;          /* the sink refuses */
} sink_t;


static int
sink_out(void *ctx, const char *p, size_t len)
{
    sink_t  *k = ctx;

    if (k->fail || len > k->cap - k->len) {
        return -1;
    }

    memcpy(k->data + k->len, p, len);
    k->len += len;

    return 0;
}


/*
 * Feeds s through llm_sse_filter() in pieces ending at the ncuts cuts (in
 * order; equal cuts make an empty piece), then ends the stream.  given[i]
 * is how much the sink holds after piece i.
 */

static int
filter_run(const char *s, size_t len, const size_t *cuts, size_t ncuts,
    unsigned strip, size_t hold_cap, sink_t *k, size_t *given,
    llm_sse_t *pp, const char **closing)
{
    char         buf[BUF_SIZE], hold[BUF_SIZE];
    size_t       i, from, to;
    llm_sse_t    p;

    llm_sse_init(&p, OPENAI, buf, sizeof(buf));
    p.strip = strip;
    p.hold = hold_cap ? hold : NULL;
    p.hold_cap = (hold_cap < sizeof(hold)) ? hold_cap : sizeof(hold);

    k->len = 0;
    from = 0;

    for (i = 0; i <= ncuts; i++) {
        to = (i < ncuts) ? cuts[i] : len;

        if (llm_sse_filter(&p, s + from, to - from, sink_out, k) != 0) {
            return -1;
        }

        if (given) {
            given[i] = k->len;
        }

        from = to;
    }

    if (llm_sse_filter_end(&p, sink_out, k, closing) != 0) {
        return -1;
    }

    *pp = p;

    return 0;
}


/* the stream with and without its usage-only chunk, in read-only copies */

typedef struct {
    const char   *full;
    size_t        len;
    size_t        full_mapped;
    const char   *cut;
    size_t        cut_len;
    size_t        cut_mapped;
    size_t        start;            /* where the usage chunk begins */
    size_t        end;              /* and ends, its blank line included */
    size_t        dispatch;         /* where its blank line is read */
} strip_stream_t;


static size_t
strip_append(char *d, const char *s, unsigned crlf)
{
    char    *q;
    size_t   i, n, len;

    q = unquote(s, &len);

    for (i = 0, n = 0; i < len; i++) {
        if (crlf && q[i] == '\n') {
            d[n++] = '\r';
        }

        d[n++] = q[i];
    }

    free(q);

    return n;
}


static void
strip_stream(const strip_case_t *c, strip_stream_t *st)
{
    char    full[OUT_SIZE], cut[OUT_SIZE];
    size_t  n, m;

    n = strip_append(full, c->before, c->crlf);
    memcpy(cut, full, n);

    st->start = n;

    n += strip_append(full + n, c->usage, c->crlf);

    st->end = n;
    st->dispatch = c->crlf ? n - 1 : n;

    m = strip_append(full + n, c->after, c->crlf);
    memcpy(cut + st->start, full + n, m);

    st->len = n + m;
    st->cut_len = st->start + m;

    st->full = readonly_copy(full, st->len, &st->full_mapped);
    st->cut = readonly_copy(cut, st->cut_len, &st->cut_mapped);
}


static void
strip_free(strip_stream_t *st)
{
    munmap((void *) st->full, st->full_mapped);
    munmap((void *) st->cut, st->cut_mapped);
}


static int
sink_is(const sink_t *k, const char *s, size_t len)
{
    return k->len == len && memcmp(k->data, s, len) == 0;
}


static void
sink_diag(const sink_t *k, const char *s, size_t len)
{
    size_t  i;

    for (i = 0; i < k->len && i < len && k->data[i] == s[i]; i++) {
        /* void */
    }

    printf("#   got %zu bytes, expected %zu; they differ from byte %zu\n",
           k->len, len, i);
}


static void
test_strip(const strip_case_t *c)
{
    int              fails, held;
    char             data[OUT_SIZE];
    size_t           i, j, h, cuts[2], given[3];
    sink_t           k;
    unsigned         inside;
    llm_sse_t        p;
    const char      *closing;
    strip_stream_t   st;

    strip_stream(c, &st);

    k.data = data;
    k.cap = sizeof(data);
    k.fail = 0;

    /* without strip, every byte goes out as it came */

    for (i = 0; i <= st.len; i++) {
        cuts[0] = i;

        if (filter_run(st.full, st.len, cuts, 1, 0, BUF_SIZE, &k, NULL, &p,
                       &closing) != 0
            || !sink_is(&k, st.full, st.len)
            || !usage_eq(&p.usage, &strip_want) || p.stripped
            || *closing != '\0')
        {
            break;
        }
    }

    if (!tap_ok(i > st.len, "strip %s: without strip, the stream as it is",
                c->name))
    {
        printf("#   split at %zu of %zu\n", i, st.len);
        sink_diag(&k, st.full, st.len);
        usage_diag("got", &p.usage);
    }

    /*
     * Split in two: the usage chunk is gone, nothing else; and the bytes
     * of the choices, up to the finish chunk's end, go out at once.
     */

    fails = 0;
    held = 0;

    for (i = 0; i <= st.len; i++) {
        cuts[0] = i;

        if (filter_run(st.full, st.len, cuts, 1, 1, BUF_SIZE, &k, given, &p,
                       &closing) != 0
            || !sink_is(&k, st.cut, st.cut_len)
            || !usage_eq(&p.usage, &strip_want) || !p.stripped
            || *closing != '\0')
        {
            if (fails++ < 3) {
                printf("#   split at %zu of %zu (the chunk is %zu-%zu)\n",
                       i, st.len, st.start, st.end);
                sink_diag(&k, st.cut, st.cut_len);
                usage_diag("got", &p.usage);
            }
        }

        if (i <= st.start && given[0] != i) {
            held++;
        }
    }

    tap_is(fails, 0, "strip %s: split in two at every byte, the usage chunk "
           "is cut", c->name);
    tap_is(held, 0, "strip %s: split in two, nothing before the usage chunk "
           "is held", c->name);

    /*
     * Split in three: near each other everywhere, and far apart.
     */

    fails = 0;
    held = 0;

    for (i = 0; i <= st.len; i++) {
        for (j = i + 1; j <= st.len; j += (j < i + 40) ? 1 : 37) {
            cuts[0] = i;
            cuts[1] = j;

            if (filter_run(st.full, st.len, cuts, 2, 1, BUF_SIZE, &k, given,
                           &p, &closing) != 0
                || !sink_is(&k, st.cut, st.cut_len)
                || !usage_eq(&p.usage, &strip_want) || !p.stripped)
            {
                if (fails++ < 3) {
                    printf("#   split at %zu and %zu of %zu\n", i, j, st.len);
                    sink_diag(&k, st.cut, st.cut_len);
                }
            }

            if ((i <= st.start && given[0] != i)
                || (j <= st.start && given[1] != j))
            {
                held++;
            }
        }
    }

    tap_is(fails, 0, "strip %s: split in three, the usage chunk is cut",
           c->name);
    tap_is(held, 0, "strip %s: split in three, nothing before the usage "
           "chunk is held", c->name);

    /*
     * An empty buffer between any two bytes changes nothing.
     */

    fails = 0;

    for (i = 0; i <= st.len; i++) {
        cuts[0] = i;
        cuts[1] = i;

        if (filter_run(st.full, st.len, cuts, 2, 1, BUF_SIZE, &k, NULL, &p,
                       &closing) != 0
            || !sink_is(&k, st.cut, st.cut_len))
        {
            if (fails++ < 3) {
                printf("#   an empty buffer at %zu of %zu\n", i, st.len);
                sink_diag(&k, st.cut, st.cut_len);
            }
        }
    }

    tap_is(fails, 0, "strip %s: an empty buffer anywhere changes nothing",
           c->name);

    /*
     * Without a hold, or with one too small for the chunk, the chunk can
     * only be cut when it begins and ends in one buffer; else it passes
     * whole.
     */

    for (h = 0; h < nelts(small_holds); h++) {
        fails = 0;

        for (i = 0; i <= st.len; i++) {
            cuts[0] = i;
            inside = (i > st.start && i < st.dispatch);

            if (filter_run(st.full, st.len, cuts, 1, 1, small_holds[h], &k,
                           NULL, &p, &closing) != 0
                || (inside && (!sink_is(&k, st.full, st.len) || p.stripped))
                || (!inside
                    && (!sink_is(&k, st.cut, st.cut_len) || !p.stripped))
                || !usage_eq(&p.usage, &strip_want))
            {
                if (fails++ < 3) {
                    printf("#   split at %zu of %zu (the chunk is %zu-%zu)\n",
                           i, st.len, st.start, st.end);
                    sink_diag(&k, inside ? st.full : st.cut,
                              inside ? st.len : st.cut_len);
                }
            }
        }

        tap_is(fails, 0, "strip %s: a hold of %zu bytes, the chunk is cut "
               "only when it is in one buffer", c->name, small_holds[h]);
    }

    /*
     * The stream cut inside the usage chunk: once its JSON is whole, it is
     * dropped, and nothing is left to close; before, it is not known for
     * the usage chunk and goes out, mid-line.
     */

    fails = 0;
    cuts[0] = st.start;

    /* "}\n\n" or "}\r\n\r\n": where the chunk's JSON ends */
    j = st.end - (c->crlf ? 4 : 2);

    for (i = st.start + 1; i < st.end; i++) {

        if (filter_run(st.full, i, cuts, 1, 1, BUF_SIZE, &k, NULL, &p,
                       &closing) != 0
            || (i < j && (!sink_is(&k, st.full, i)
                          || strcmp(closing, "\n\n") != 0))
            || (i >= j && (!sink_is(&k, st.cut, st.start)
                           || *closing != '\0' || !p.usage.have_usage)))
        {
            if (fails++ < 3) {
                printf("#   cut at %zu (the chunk is %zu-%zu): closing "
                       "'%s'\n", i, st.start, st.end, closing);
                sink_diag(&k, i < j ? st.full : st.cut,
                          i < j ? i : st.start);
            }
        }
    }

    tap_is(fails, 0, "strip %s: a stream cut inside the usage chunk",
           c->name);

    /* the sink's failure is the filter's */

    k.fail = 1;
    cuts[0] = st.len / 2;
    tap_is(filter_run(st.full, st.len, cuts, 1, 1, BUF_SIZE, &k, NULL, &p,
                      &closing), -1, "strip %s: out fails, filter fails",
           c->name);
    tap_is(filter_run(st.full, st.len, cuts, 1, 0, BUF_SIZE, &k, NULL, &p,
                      &closing), -1, "strip %s: out fails, without strip too",
           c->name);
    k.fail = 0;

    strip_free(&st);
}


/*
 * A usage-only chunk before any finish_reason is never held: it is cut
 * when it begins and ends in one buffer, and passes whole when a split
 * falls inside it.
 */

static void
test_strip_early(const strip_case_t *c)
{
    int              fails;
    char             data[OUT_SIZE];
    size_t           i, cuts[1];
    sink_t           k;
    llm_sse_t        p;
    unsigned         inside;
    const char      *closing;
    strip_stream_t   st;

    strip_stream(c, &st);

    k.data = data;
    k.cap = sizeof(data);
    k.fail = 0;


    fails = 0;

    for (i = 0; i <= st.len; i++) {
        cuts[0] = i;
        inside = (i > st.start && i < st.dispatch);

        if (filter_run(st.full, st.len, cuts, 1, 1, BUF_SIZE, &k, NULL, &p,
                       &closing) != 0
            || (inside && (!sink_is(&k, st.full, st.len) || p.stripped))
            || (!inside && (!sink_is(&k, st.cut, st.cut_len) || !p.stripped))
            || !usage_eq(&p.usage, &strip_want))
        {
            if (fails++ < 3) {
                printf("#   split at %zu of %zu (the chunk is %zu-%zu), "
                       "%s\n", i, st.len, st.start, st.end,
                       inside ? "inside" : "outside");
                sink_diag(&k, inside ? st.full : st.cut,
                          inside ? st.len : st.cut_len);
                usage_diag("got", &p.usage);
            }
        }
    }

    tap_is(fails, 0, "strip %s: passes whole when split inside, else cut",
           c->name);

    strip_free(&st);
}


/* the event buffer grows as the gateway's does, from its pool */

static char *
grow_buf(void *ctx, char *old, size_t len, size_t size)
{
    char    *b;
    size_t  *grown = ctx;

    b = malloc(size);
    if (b == NULL) {
        return NULL;
    }

    memcpy(b, old, len);
    free(old);

    (*grown)++;

    return b;
}


/*
 * A Responses stream's last event repeats the whole output: with a text of
 * 100 kB it is larger than any fixed event buffer, and grows it up to max.
 */

static void
test_grow(void)
{
    char         *stream, *buf;
    size_t        n, len, step, grown;
    llm_sse_t     p;

    static const char  head[] =
        "event: response.output_text.delta\n"
        "data: {\"type\":\"response.output_text.delta\",\"delta\":\"x\"}\n\n"
        "event: response.completed\n"
        "data: {\"type\":\"response.completed\",\"response\":{"
        "\"status\":\"completed\",\"output\":[{\"type\":\"message\","
        "\"content\":[{\"type\":\"output_text\",\"text\":\"";
    static const char  tail[] =
        "\"}]}],\"usage\":{\"input_tokens\":12,\"output_tokens\":25000,"
        "\"output_tokens_details\":{\"reasoning_tokens\":7}}}}\n\n";

    n = 100000;
    len = sizeof(head) - 1 + n + sizeof(tail) - 1;

    stream = malloc(len);
    if (stream == NULL) {
        perror("malloc");
        exit(2);
    }

    memcpy(stream, head, sizeof(head) - 1);
    memset(stream + sizeof(head) - 1, 'y', n);
    memcpy(stream + sizeof(head) - 1 + n, tail, sizeof(tail) - 1);

    for (step = 0; step < 2; step++) {
        buf = malloc(SMALL_BUF);
        grown = 0;

        llm_sse_init(&p, LLM_API_RESPONSES, buf, SMALL_BUF);
        p.grow = grow_buf;
        p.grow_ctx = &grown;
        p.max = 1024 * 1024;

        if (step == 0) {
            llm_sse_feed(&p, stream, len);

        } else {
            for (n = 0; n < len; n += 4093) {
                llm_sse_feed(&p, stream + n, (len - n < 4093) ? len - n : 4093);
            }
        }

        llm_sse_finish(&p);

        tap_ok(p.usage.have_usage && p.usage.output_tokens == 25000
               && p.usage.reasoning_tokens == 7 && p.usage.done
               && !p.usage.truncated,
               "a 100 kB last event grows the buffer: its usage is read (%s)",
               step ? "in 4093-byte parts" : "whole");
        tap_ok(grown > 0 && p.cap >= 100000 && p.cap <= 1024 * 1024,
               "  grown %zu times, to %zu bytes", grown, p.cap);

        free(p.buf);
    }

    buf = malloc(SMALL_BUF);
    grown = 0;

    llm_sse_init(&p, LLM_API_RESPONSES, buf, SMALL_BUF);
    p.grow = grow_buf;
    p.grow_ctx = &grown;
    p.max = 65536;

    llm_sse_feed(&p, stream, len);
    llm_sse_finish(&p);

    tap_ok(!p.usage.have_usage && p.usage.truncated
           && p.usage.delta_events == 1 && p.cap <= 65536,
           "beyond max: skipped and flagged, the deltas still counted");

    free(p.buf);
    free(stream);
}


/*
 * A chunk without choices but with an error, or with text, is the
 * client's: only a usage chunk with nothing else is cut (found by the
 * fuzzer).
 */

static void
test_strip_not_cut(void)
{
    char         buf[BUF_SIZE], hold[BUF_SIZE], data[OUT_SIZE];
    size_t       i, n;
    sink_t       k;
    llm_sse_t    p;
    const char  *closing;

    static const char  *streams[] = {
        "data: {\"choices\":[{\"finish_reason\":\"stop\"}]}\n\n"
        "data: {\"error\":{\"message\":\"x\"},\"usage\":"
        "{\"prompt_tokens\":1}}\n\n",

        "data: {\"choices\":[{\"finish_reason\":\"stop\"}]}\n\n"
        "data: {\"choices\":[],\"reasoning_content\":\"hmm\",\"usage\":"
        "{\"prompt_tokens\":1}}\n\ndata: [DONE]\n\n",
    };

    for (i = 0; i < nelts(streams); i++) {
        n = strlen(streams[i]);

        llm_sse_init(&p, OPENAI, buf, sizeof(buf));
        p.strip = 1;
        p.hold = hold;
        p.hold_cap = sizeof(hold);

        k.data = data;
        k.len = 0;
        k.cap = sizeof(data);
        k.fail = 0;

        llm_sse_filter(&p, streams[i], n / 2, sink_out, &k);
        llm_sse_filter(&p, streams[i] + n / 2, n - n / 2, sink_out, &k);
        llm_sse_filter_end(&p, sink_out, &k, &closing);

        tap_ok(k.len == n && memcmp(data, streams[i], n) == 0,
               "not a usage chunk alone: passed (%s)",
               i ? "text" : "an error");
    }
}


/*
 * The CR/LF corners of the filter, each alone: a CRLF stream whose usage
 * chunk follows, in the next buffer, the LF of the blank line before it; an
 * empty buffer between the CR and the LF that end a cut chunk; and a
 * usage chunk that passes (split inside, before the finish) after one was
 * cut, ending with a CR at the end of its buffer.
 */

static void
test_strip_crlf(void)
{
    char         buf[BUF_SIZE], hold[BUF_SIZE], data[OUT_SIZE];
    sink_t       k;
    llm_sse_t    p;
    const char  *closing;

    static const char  a[] = "data: {\"choices\":[{\"finish_reason\":"
                             "\"stop\"}]}\r\n\r";
    static const char  b[] = "\ndata: {\"choices\":[],\"usage\":"
                             "{\"prompt_tokens\":1}}\r\n\r\ndata: [DONE]"
                             "\r\n\r\n";
    static const char  want1[] = "data: {\"choices\":[{\"finish_reason\":"
                                 "\"stop\"}]}\r\n\r\ndata: [DONE]\r\n\r\n";

    static const char  c[] = "data: {\"choices\":[],\"usage\":"
                             "{\"prompt_tokens\":1}}\r\n\r";
    static const char  d[] = "\ndata: [DONE]\r\n\r\n";

    static const char  e[] = "data: {\"choices\":[],\"usage\":"
                             "{\"prompt_tokens\":1}}\r\n\r\n"
                             "data: {\"choices\":[],\"usage\":";
    static const char  f[] = "{\"prompt_tokens\":2}}\r\n\r";
    static const char  want3[] = "data: {\"choices\":[],\"usage\":"
                                 "{\"prompt_tokens\":2}}\r\n\r\n"
                                 "data: [DONE]\r\n\r\n";

    k.data = data;
    k.cap = sizeof(data);
    k.fail = 0;


    llm_sse_init(&p, OPENAI, buf, sizeof(buf));
    p.strip = 1;
    p.hold = hold;
    p.hold_cap = sizeof(hold);
    k.len = 0;

    llm_sse_filter(&p, a, sizeof(a) - 1, sink_out, &k);
    llm_sse_filter(&p, b, sizeof(b) - 1, sink_out, &k);
    llm_sse_filter_end(&p, sink_out, &k, &closing);

    if (!tap_ok(sink_is(&k, want1, sizeof(want1) - 1),
                "strip: the LF before a cut chunk, in its buffer, stays"))
    {
        sink_diag(&k, want1, sizeof(want1) - 1);
    }


    llm_sse_init(&p, OPENAI, buf, sizeof(buf));
    p.strip = 1;
    p.hold = hold;
    p.hold_cap = sizeof(hold);
    k.len = 0;

    llm_sse_filter(&p, c, sizeof(c) - 1, sink_out, &k);
    llm_sse_filter(&p, "", 0, sink_out, &k);
    llm_sse_filter(&p, d, sizeof(d) - 1, sink_out, &k);
    llm_sse_filter_end(&p, sink_out, &k, &closing);

    if (!tap_ok(sink_is(&k, d + 1, sizeof(d) - 2),
                "strip: an empty buffer after a cut chunk's CR"))
    {
        sink_diag(&k, d + 1, sizeof(d) - 2);
    }


    llm_sse_init(&p, OPENAI, buf, sizeof(buf));
    p.strip = 1;
    p.hold = hold;
    p.hold_cap = sizeof(hold);
    k.len = 0;

    llm_sse_filter(&p, e, sizeof(e) - 1, sink_out, &k);
    llm_sse_filter(&p, f, sizeof(f) - 1, sink_out, &k);
    llm_sse_filter(&p, d, sizeof(d) - 1, sink_out, &k);
    llm_sse_filter_end(&p, sink_out, &k, &closing);

    if (!tap_ok(sink_is(&k, want3, sizeof(want3) - 1),
                "strip: a usage chunk that passes keeps its LF"))
    {
        sink_diag(&k, want3, sizeof(want3) - 1);
    }
}


/*
 * Where a stream may stop, what llm_sse_pending() says there, and what
 * llm_sse_closing() adds so that an error event after it stands alone:
 * the cut stream, closed, then the error event, must read as the usage
 * event (prompt_tokens 4) and an error.
 */

#define USAGE4  "data: {'choices':[],'usage':{'prompt_tokens':4}}"

static const struct {
    const char  *name;
    const char  *stream;
    int          pending;
    const char  *closing;
    uint64_t     input;
} closing_cases[] = {
    { "at the start", "", 0, "", 0 },
    { "between events", USAGE4 "\n\n", 0, "", 4 },
    { "between events, CRLF", USAGE4 "\r\n\r\n", 0, "", 4 },
    { "between events, CR", USAGE4 "\r\r", 0, "", 4 },
    { "between events, the LF of CRLF to come", USAGE4 "\r\n\r", 0, "", 4 },
    { "mid-line", USAGE4, 1, "\n\n", 4 },
    { "mid field name", USAGE4 "\nda", 1, "\n\n", 4 },
    { "mid-line, a comment", USAGE4 "\n: keep-alive", 1, "\n\n", 4 },
    { "mid-line after a CR", USAGE4 "\r: x", 1, "\n\n", 4 },
    { "after a line inside an event", USAGE4 "\n", 2, "\n", 4 },
    { "after a CRLF inside an event", USAGE4 "\r\n", 2, "\n", 4 },
    { "after a CR inside an event", USAGE4 "\r", 2, "\n\n", 4 },
    { "after an event: line", "event: x\n", 2, "\n", 0 },
};


static void
test_closing(void)
{
    int           pending;
    char          buf[BUF_SIZE], err[512], data[OUT_SIZE], *s;
    size_t        i, n, len, split, e, cuts[1];
    sink_t        k;
    llm_sse_t     p, q;
    const char   *closing, *end;

    e = llm_sse_error_event(OPENAI, "upstream timed out", err, sizeof(err));

    k.data = data;
    k.cap = sizeof(data);
    k.fail = 0;

    for (i = 0; i < nelts(closing_cases); i++) {
        s = unquote(closing_cases[i].stream, &len);

        /* the state does not depend on where the stream was split */

        for (split = 0; split <= len; split++) {
            llm_sse_init(&p, OPENAI, buf, sizeof(buf));
            llm_sse_feed(&p, s, split);
            llm_sse_feed(&p, s + split, len - split);

            pending = llm_sse_pending(&p);
            closing = llm_sse_closing(&p);

            if (pending != closing_cases[i].pending
                || strcmp(closing, closing_cases[i].closing) != 0)
            {
                break;
            }
        }

        if (!tap_ok(split > len, "closing %s: pending %d, closing '%s'",
                    closing_cases[i].name, closing_cases[i].pending,
                    closing_cases[i].closing[0] == '\0' ? ""
                    : closing_cases[i].closing[1] == '\0' ? "\\n"
                    : "\\n\\n"))
        {
            printf("#   split at %zu: pending %d, closing of %zu bytes\n",
                   split, pending, strlen(closing));
        }

        /* the stream, closed, then the error event, in a fresh parser */

        memcpy(data, s, len);
        n = len;
        memcpy(data + n, closing_cases[i].closing,
               strlen(closing_cases[i].closing));
        n += strlen(closing_cases[i].closing);
        memcpy(data + n, err, e);
        n += e;

        llm_sse_init(&q, OPENAI, buf, sizeof(buf));
        llm_sse_feed(&q, data, n);

        tap_ok(q.usage.error && q.usage.input_tokens
                                == closing_cases[i].input
               && llm_sse_pending(&q) == 0,
               "closing %s: then an error event reads alone",
               closing_cases[i].name);

        /* the filter gives the same closing at the end */

        cuts[0] = len / 2;

        if (filter_run(s, len, cuts, 1, 0, 0, &k, NULL, &p, &end) != 0) {
            end = "(failed)";
        }

        tap_is_str(end, closing_cases[i].closing,
                   "closing %s: filter_end says the same",
                   closing_cases[i].name);

        free(s);
    }
}


/* the error event of each API, read back as SSE and JSON */

static const char *
json_path(const cJSON *root, const char *a, const char *b)
{
    const cJSON  *item;

    item = cJSON_GetObjectItemCaseSensitive(root, a);

    if (b != NULL) {
        item = cJSON_GetObjectItemCaseSensitive(item, b);
    }

    return cJSON_IsString(item) ? item->valuestring : "(none)";
}


#define MESSAGE  "upstream timed out"

static const struct {
    llm_api_e     api;
    const char   *name;
    const char   *event;            /* the event: line's value */
    const char   *members[5][3];    /* parent, member, value */
} error_cases[] = {
    { OPENAI, "openai", "",
      { { "error", "message", MESSAGE },
        { "error", "type", "server_error" },
        { "error", "code", "upstream_error" } } },
    { ANTHROPIC, "anthropic", "error",
      { { "type", NULL, "error" },
        { "error", "type", "api_error" },
        { "error", "message", MESSAGE } } },
    { RESPONSES, "responses", "error",
      { { "type", NULL, "error" },
        { "code", NULL, "upstream_error" },
        { "message", NULL, MESSAGE },
        { "error", "message", MESSAGE },
        { "error", "code", "upstream_error" } } },
};


static void
test_error_event(void)
{
    char          buf[1024], pbuf[BUF_SIZE], event[64], data[1024];
    char         *line, *next;
    size_t        i, m, n, data_len;
    cJSON        *root;
    llm_sse_t     p;
    const char   *got;

    for (i = 0; i < nelts(error_cases); i++) {
        memset(buf, 0, sizeof(buf));

        n = llm_sse_error_event(error_cases[i].api, MESSAGE, buf,
                                sizeof(buf));

        tap_ok(n > 0 && n == strlen(buf) && n >= 2
               && memcmp(buf + n - 2, "\n\n", 2) == 0,
               "error event %s: %zu bytes, ending with a blank line",
               error_cases[i].name, n);

        /* its lines, as a client reads them: one event, one data line */

        data_len = 0;
        event[0] = '\0';

        for (line = buf; *line != '\0'; line = next + 1) {
            next = strchr(line, '\n');
            if (next == NULL) {
                break;
            }

            *next = '\0';

            if (strncmp(line, "event: ", 7) == 0) {
                snprintf(event, sizeof(event), "%s", line + 7);

            } else if (strncmp(line, "data: ", 6) == 0) {
                data_len = snprintf(data, sizeof(data), "%s", line + 6);
            }

            *next = '\n';
        }

        tap_is_str(event, error_cases[i].event, "error event %s: event '%s'",
                   error_cases[i].name, error_cases[i].event);

        root = cJSON_ParseWithLength(data, data_len);

        tap_ok(cJSON_IsObject(root), "error event %s: its data is JSON",
               error_cases[i].name);

        for (m = 0; m < 5 && error_cases[i].members[m][0] != NULL; m++) {
            got = json_path(root, error_cases[i].members[m][0],
                            error_cases[i].members[m][1]);

            tap_is_str(got, error_cases[i].members[m][2],
                       "error event %s: %s%s%s", error_cases[i].name,
                       error_cases[i].members[m][0],
                       error_cases[i].members[m][1] ? "." : "",
                       error_cases[i].members[m][1]
                       ? error_cases[i].members[m][1] : "");
        }

        cJSON_Delete(root);

        /* the gateway's own parser takes it for an in-band error */

        llm_sse_init(&p, error_cases[i].api, pbuf, sizeof(pbuf));
        llm_sse_feed(&p, buf, n);

        tap_ok(p.usage.error && llm_sse_pending(&p) == 0,
               "error event %s: read as an error, whole",
               error_cases[i].name);

        /* snprintf's NUL needs a byte more than the event */

        tap_is(llm_sse_error_event(error_cases[i].api, MESSAGE, buf, n + 1),
               n, "error event %s: fits in %zu bytes", error_cases[i].name,
               n + 1);
        tap_is(llm_sse_error_event(error_cases[i].api, MESSAGE, buf, n), 0,
               "error event %s: not in %zu", error_cases[i].name, n);
        tap_is(llm_sse_error_event(error_cases[i].api, MESSAGE, buf, 1), 0,
               "error event %s: not in 1", error_cases[i].name);
    }
}


/* ceil(bytes / 4), at least one token an event, at least the upstream's */

static const struct {
    uint64_t  events;
    uint64_t  bytes;
    uint64_t  output;
    uint64_t  want;
} estimate_cases[] = {
    { 0, 0, 0, 0 },
    { 1, 1, 0, 1 },
    { 1, 4, 0, 1 },
    { 1, 5, 0, 2 },
    { 3, 20, 0, 5 },
    { 3, 21, 0, 6 },
    { 10, 8, 0, 10 },
    { 3, 20, 9, 9 },
    { 3, 20, 4, 5 },
    { 0, 0, 7, 7 },
    { 2, 1000000001, 0, 250000001 },
};


static void
test_estimate(void)
{
    size_t       i;
    llm_usage_t  u;

    for (i = 0; i < nelts(estimate_cases); i++) {
        memset(&u, 0, sizeof(llm_usage_t));
        u.delta_events = estimate_cases[i].events;
        u.delta_bytes = estimate_cases[i].bytes;
        u.output_tokens = estimate_cases[i].output;

        tap_is(llm_settle_output_estimate(&u), estimate_cases[i].want,
               "estimate: %llu events, %llu bytes, output %llu: %llu",
               (unsigned long long) estimate_cases[i].events,
               (unsigned long long) estimate_cases[i].bytes,
               (unsigned long long) estimate_cases[i].output,
               (unsigned long long) estimate_cases[i].want);
    }
}


/*
 * The settlement rule, with an admission estimate of 100 and max_tokens
 * 50, for what a response may have shown:
 *
 *   final    the upstream's usage, whole (reported twice: repeated)
 *   input    only the prompt (an Anthropic message_start), then cut;
 *            a figure was clamped; 3 deltas of 20 bytes: output 5
 *   output   a usage without the prompt (message_delta alone): output
 *            42 beats the 5 counted
 *   nousage  a stream that ended well without usage: output 5
 *   nothing  nothing at all: output 0
 *   error    an in-band error (response.failed): 7 deltas of 9 bytes,
 *            output 7 (one an event beats ceil(9 / 4) = 3)
 *   cut      cut mid-stream after an oversized event: 2 deltas of 13
 *            bytes, output 4
 *   long     40 deltas of 231 bytes, no usage: ceil(231 / 4) = 58 is
 *            more than max_tokens lets the upstream generate: output 50
 *   over     the same with an output of 60 reported (message_delta
 *            alone): the upstream's figure stands
 */

static const llm_usage_t  settle_final = {
    .input_tokens = 2010, .output_tokens = 42, .cached_input_tokens = 1800,
    .cache_write_tokens = 200, .reasoning_tokens = 10, .delta_events = 3,
    .delta_bytes = 20, .finish_reason = "end_turn", .have_usage = 1,
    .have_input = 1, .done = 1, .repeated = 1
};

static const llm_usage_t  settle_input = {
    .input_tokens = 2010, .output_tokens = 1, .cached_input_tokens = 1800,
    .cache_write_tokens = 200, .delta_events = 3, .delta_bytes = 20,
    .have_input = 1, .clamped = 1
};

static const llm_usage_t  settle_output = {
    .output_tokens = 42, .delta_events = 3, .delta_bytes = 20,
    .finish_reason = "end_turn", .have_usage = 1, .done = 1
};

static const llm_usage_t  settle_nousage = {
    .delta_events = 3, .delta_bytes = 20, .finish_reason = "stop", .done = 1
};

static const llm_usage_t  settle_nothing;

static const llm_usage_t  settle_error = {
    .delta_events = 7, .delta_bytes = 9, .finish_reason = "failed",
    .done = 1, .error = 1
};

static const llm_usage_t  settle_cut = {
    .delta_events = 2, .delta_bytes = 13, .truncated = 1
};

static const llm_usage_t  settle_long = {
    .delta_events = 40, .delta_bytes = 231
};

static const llm_usage_t  settle_over = {
    .output_tokens = 60, .delta_events = 40, .delta_bytes = 231,
    .have_usage = 1
};


#define EST     LLM_REC_F_ESTIMATED
#define PART    LLM_REC_F_PARTIAL
#define CLAMP   LLM_REC_F_CLAMPED
#define REP     LLM_REC_F_REPEATED
#define OVER    LLM_REC_F_OVERSIZE
#define BOUND   LLM_REC_F_BOUND

#define CLEAN   LLM_END_CLEAN
#define CLOSED  LLM_END_CLIENT_CLOSED
#define FAILED  LLM_END_UPSTREAM_ERROR
#define UNREAD  LLM_END_UNREADABLE

#define FINAL   2010, 42, 1800, 200, 10


static const struct {
    const char         *name;
    const llm_usage_t  *u;
    unsigned            ok;
    llm_end_e           end;
    uint64_t            in, out, cached, cache_write, reasoning;
    uint32_t            flags;
    const char         *finish;
} settle_cases[] = {

    /* the upstream refused or failed: only its own usage is charged */

    { "final", &settle_final, 0, CLEAN,  FINAL, REP, "end_turn" },
    { "final", &settle_final, 0, CLOSED, FINAL, REP, "end_turn" },
    { "final", &settle_final, 0, FAILED, FINAL, REP, "end_turn" },
    { "final", &settle_final, 0, UNREAD, FINAL, REP, "end_turn" },

    { "input", &settle_input, 0, CLEAN,  0, 0, 0, 0, 0, CLAMP, "" },
    { "input", &settle_input, 0, CLOSED, 0, 0, 0, 0, 0, CLAMP, "" },
    { "input", &settle_input, 0, FAILED, 0, 0, 0, 0, 0, CLAMP, "" },
    { "input", &settle_input, 0, UNREAD, 0, 0, 0, 0, 0, CLAMP, "" },

    { "output", &settle_output, 0, CLEAN,  0, 0, 0, 0, 0, 0, "end_turn" },
    { "output", &settle_output, 0, CLOSED, 0, 0, 0, 0, 0, 0, "end_turn" },
    { "output", &settle_output, 0, FAILED, 0, 0, 0, 0, 0, 0, "end_turn" },
    { "output", &settle_output, 0, UNREAD, 0, 0, 0, 0, 0, 0, "end_turn" },

    { "nousage", &settle_nousage, 0, CLEAN,  0, 0, 0, 0, 0, 0, "stop" },
    { "nousage", &settle_nousage, 0, CLOSED, 0, 0, 0, 0, 0, 0, "stop" },
    { "nousage", &settle_nousage, 0, FAILED, 0, 0, 0, 0, 0, 0, "stop" },
    { "nousage", &settle_nousage, 0, UNREAD, 0, 0, 0, 0, 0, 0, "stop" },

    { "nothing", &settle_nothing, 0, CLEAN,  0, 0, 0, 0, 0, 0, "" },
    { "nothing", &settle_nothing, 0, CLOSED, 0, 0, 0, 0, 0, 0, "" },
    { "nothing", &settle_nothing, 0, FAILED, 0, 0, 0, 0, 0, 0, "" },
    { "nothing", &settle_nothing, 0, UNREAD, 0, 0, 0, 0, 0, 0, "" },

    { "error", &settle_error, 0, CLEAN,  0, 0, 0, 0, 0, 0, "failed" },
    { "error", &settle_error, 0, CLOSED, 0, 0, 0, 0, 0, 0, "failed" },
    { "error", &settle_error, 0, FAILED, 0, 0, 0, 0, 0, 0, "failed" },
    { "error", &settle_error, 0, UNREAD, 0, 0, 0, 0, 0, 0, "failed" },

    { "cut", &settle_cut, 0, CLEAN,  0, 0, 0, 0, 0, OVER, "" },
    { "cut", &settle_cut, 0, CLOSED, 0, 0, 0, 0, 0, OVER, "" },
    { "cut", &settle_cut, 0, FAILED, 0, 0, 0, 0, 0, OVER, "" },
    { "cut", &settle_cut, 0, UNREAD, 0, 0, 0, 0, 0, OVER, "" },

    /* 2xx: the final usage stands, however the response ended */

    { "final", &settle_final, 1, CLEAN,  FINAL, REP, "end_turn" },
    { "final", &settle_final, 1, CLOSED, FINAL, PART | REP, "end_turn" },
    { "final", &settle_final, 1, FAILED, FINAL, PART | REP, "end_turn" },
    { "final", &settle_final, 1, UNREAD, FINAL, REP, "end_turn" },

    /* not done: a clean end is an upstream error */

    { "input", &settle_input, 1, CLEAN,  2010, 5, 1800, 200, 0,
      EST | PART | CLAMP, "upstream_error" },
    { "input", &settle_input, 1, CLOSED, 2010, 5, 1800, 200, 0,
      EST | PART | CLAMP, "client_closed" },
    { "input", &settle_input, 1, FAILED, 2010, 5, 1800, 200, 0,
      EST | PART | CLAMP, "upstream_error" },
    /* unreadable: the reservation, or what the upstream said if more */
    { "input", &settle_input, 1, UNREAD, 2010, 50, 0, 0, 0,
      EST | CLAMP, "" },

    { "output", &settle_output, 1, CLEAN,  100, 42, 0, 0, 0,
      EST, "end_turn" },
    { "output", &settle_output, 1, CLOSED, 100, 42, 0, 0, 0,
      EST | PART, "client_closed" },
    { "output", &settle_output, 1, FAILED, 100, 42, 0, 0, 0,
      EST | PART, "upstream_error" },
    { "output", &settle_output, 1, UNREAD, 100, 50, 0, 0, 0,
      EST, "end_turn" },

    { "nousage", &settle_nousage, 1, CLEAN,  100, 5, 0, 0, 0,
      EST, "stop" },
    { "nousage", &settle_nousage, 1, CLOSED, 100, 5, 0, 0, 0,
      EST | PART, "client_closed" },
    { "nousage", &settle_nousage, 1, FAILED, 100, 5, 0, 0, 0,
      EST | PART, "upstream_error" },
    { "nousage", &settle_nousage, 1, UNREAD, 100, 50, 0, 0, 0,
      EST, "stop" },

    { "nothing", &settle_nothing, 1, CLEAN,  100, 0, 0, 0, 0,
      EST | PART, "upstream_error" },
    { "nothing", &settle_nothing, 1, CLOSED, 100, 0, 0, 0, 0,
      EST | PART, "client_closed" },
    { "nothing", &settle_nothing, 1, FAILED, 100, 0, 0, 0, 0,
      EST | PART, "upstream_error" },
    { "nothing", &settle_nothing, 1, UNREAD, 100, 50, 0, 0, 0,
      EST, "" },

    /* an in-band error is an upstream error, even at a clean end */

    { "error", &settle_error, 1, CLEAN,  100, 7, 0, 0, 0,
      EST | PART, "upstream_error" },
    { "error", &settle_error, 1, CLOSED, 100, 7, 0, 0, 0,
      EST | PART, "client_closed" },
    { "error", &settle_error, 1, FAILED, 100, 7, 0, 0, 0,
      EST | PART, "upstream_error" },
    { "error", &settle_error, 1, UNREAD, 100, 50, 0, 0, 0,
      EST, "failed" },

    { "cut", &settle_cut, 1, CLEAN,  100, 4, 0, 0, 0,
      EST | PART | OVER, "upstream_error" },
    { "cut", &settle_cut, 1, CLOSED, 100, 4, 0, 0, 0,
      EST | PART | OVER, "client_closed" },
    { "cut", &settle_cut, 1, FAILED, 100, 4, 0, 0, 0,
      EST | PART | OVER, "upstream_error" },
    { "cut", &settle_cut, 1, UNREAD, 100, 50, 0, 0, 0,
      EST | OVER, "" },

    /* the text's count held to max_tokens, the upstream's figure not */

    { "long", &settle_long, 1, CLEAN,  100, 50, 0, 0, 0,
      EST | PART, "upstream_error" },
    { "long", &settle_long, 1, CLOSED, 100, 50, 0, 0, 0,
      EST | PART, "client_closed" },
    { "long", &settle_long, 1, FAILED, 100, 50, 0, 0, 0,
      EST | PART, "upstream_error" },
    { "long", &settle_long, 1, UNREAD, 100, 50, 0, 0, 0,
      EST, "" },

    /* but never above what the request could produce */
    { "over", &settle_over, 1, CLOSED, 100, 50, 0, 0, 0,
      EST | PART | BOUND, "client_closed" },
    { "over", &settle_over, 1, UNREAD, 100, 50, 0, 0, 0,
      EST | BOUND, "" },
};


static void
test_settle(void)
{
    size_t            i;
    llm_settle_t      s;
    llm_settle_in_t   in;

    static const char  *ends[] = {
        "clean", "client closed", "upstream error", "unreadable"
    };

    for (i = 0; i < nelts(settle_cases); i++) {
        memset(&in, 0, sizeof(llm_settle_in_t));
        in.prompt_estimate = 100;
        in.max_tokens = 50;
        in.upstream_ok = settle_cases[i].ok;
        in.end = settle_cases[i].end;

        /* what a previous use left must not show */
        memset(&s, 0xa5, sizeof(llm_settle_t));

        llm_settle_usage(settle_cases[i].u, &in, &s);

        if (!tap_ok(s.input_tokens == settle_cases[i].in
                    && s.output_tokens == settle_cases[i].out
                    && s.cached_input_tokens == settle_cases[i].cached
                    && s.cache_write_tokens == settle_cases[i].cache_write
                    && s.reasoning_tokens == settle_cases[i].reasoning
                    && s.flags == settle_cases[i].flags
                    && s.finish_reason != NULL
                    && strcmp(s.finish_reason, settle_cases[i].finish) == 0,
                    "settle %s, %s, %s", settle_cases[i].name,
                    settle_cases[i].ok ? "2xx" : "not 2xx",
                    ends[settle_cases[i].end]))
        {
            printf("#   got: in=%llu out=%llu cached=%llu cache_write=%llu "
                   "reasoning=%llu flags=0x%x finish='%s'\n",
                   (unsigned long long) s.input_tokens,
                   (unsigned long long) s.output_tokens,
                   (unsigned long long) s.cached_input_tokens,
                   (unsigned long long) s.cache_write_tokens,
                   (unsigned long long) s.reasoning_tokens,
                   (unsigned) s.flags,
                   s.finish_reason ? s.finish_reason : "(null)");
            printf("#   expected: in=%llu out=%llu cached=%llu "
                   "cache_write=%llu reasoning=%llu flags=0x%x "
                   "finish='%s'\n",
                   (unsigned long long) settle_cases[i].in,
                   (unsigned long long) settle_cases[i].out,
                   (unsigned long long) settle_cases[i].cached,
                   (unsigned long long) settle_cases[i].cache_write,
                   (unsigned long long) settle_cases[i].reasoning,
                   (unsigned) settle_cases[i].flags,
                   settle_cases[i].finish);
        }
    }
}


/*
 * What a hostile or broken upstream reports: figures above what the
 * request could cost are held to it, and flagged; figures that are not
 * numbers are no usage at all.
 */

static void
test_settle_bounds(void)
{
    llm_usage_t       u;
    llm_settle_t      s;
    llm_settle_in_t   in;

    memset(&in, 0, sizeof(llm_settle_in_t));
    in.prompt_estimate = 100;
    in.max_tokens = 3 * 50;
    in.prompt_bound = 400;
    in.hold_prompt = 1;
    in.upstream_ok = 1;
    in.end = LLM_END_CLEAN;

    memset(&u, 0, sizeof(llm_usage_t));
    u.input_tokens = 100000000;
    u.output_tokens = 100000000;
    u.cached_input_tokens = 100000000;
    u.reasoning_tokens = 99999999;
    u.have_usage = 1;
    u.have_input = 1;
    u.done = 1;
    u.clamped = 1;

    llm_settle_usage(&u, &in, &s);

    tap_is(s.output_tokens, 150, "output above n x max_tokens: held to it");
    tap_is(s.input_tokens, 400, "prompt above its bound: held to it");
    tap_ok(s.cached_input_tokens <= s.input_tokens
           && s.reasoning_tokens <= s.output_tokens,
           "parts never above their whole");
    tap_ok(s.flags & LLM_REC_F_BOUND, "flagged bound");

    /* without a cap to keep, the prompt is what the provider bills */
    in.hold_prompt = 0;
    llm_settle_usage(&u, &in, &s);
    tap_ok(s.output_tokens == 150 && s.input_tokens == 100000000
           && (s.flags & LLM_REC_F_BOUND),
           "no cap: the output held, the prompt as reported, flagged");
    in.hold_prompt = 1;

    u.input_tokens = 300;
    u.output_tokens = 150;
    u.cached_input_tokens = 0;
    u.reasoning_tokens = 0;
    u.clamped = 0;

    llm_settle_usage(&u, &in, &s);

    tap_ok(s.input_tokens == 300 && s.output_tokens == 150
           && !(s.flags & LLM_REC_F_BOUND), "at the bound: as reported");

    /* "completion_tokens": "9000" counted 0 once */
    memset(&u, 0, sizeof(llm_usage_t));
    u.input_tokens = 120;
    u.output_tokens = 0;
    u.delta_events = 40;
    u.delta_bytes = 240;
    u.have_usage = 1;
    u.have_input = 1;
    u.done = 1;
    u.clamped = 1;
    u.malformed = 1;

    llm_settle_usage(&u, &in, &s);

    tap_is(s.output_tokens, 60, "a malformed figure: the gateway's count");
    tap_is(s.input_tokens, 100, "and the prompt's estimate");
    tap_ok((s.flags & LLM_REC_F_ESTIMATED) && (s.flags & LLM_REC_F_CLAMPED),
           "flagged estimated and clamped");

    /* as the reader of a body finds it */
    memset(&u, 0, sizeof(llm_usage_t));
    llm_sse_usage_from_json(LLM_API_OPENAI,
            "{\"choices\":[{\"message\":{\"content\":\"tok1 tok2 tok3 tok4 \"},"
            "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":10,"
            "\"completion_tokens\":\"9000\"}}", 139, &u);
    tap_ok(u.malformed, "a string figure in a body: malformed");

    llm_settle_usage(&u, &in, &s);
    tap_ok(s.output_tokens >= 4 && s.output_tokens <= 150
           && (s.flags & LLM_REC_F_ESTIMATED),
           "  settled at the gateway's count (%llu)",
           (unsigned long long) s.output_tokens);
}


/*
 * Whole bodies, read by the scan (the simple shape) or, for what it
 * leaves, by cJSON: the figures worked by hand, the same either way.
 */

static void
test_json_scan(void)
{
    int           rc;
    char          deep[256];
    size_t        n, k;
    const char   *b;
    llm_usage_t   u;

    /* as mockllm writes it: the text is tok1 .. tok16, 9 * 5 + 7 * 6 */
    b = "{\"id\":\"chatcmpl-mock-1\",\"object\":\"chat.completion\","
        "\"created\":1796315280,\"model\":\"gpt-4o-mini\",\"choices\":"
        "[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
        "\"tok1 tok2 tok3 tok4 tok5 tok6 tok7 tok8 tok9 tok10 tok11 tok12 "
        "tok13 tok14 tok15 tok16 \"},\"finish_reason\":\"stop\"}],"
        "\"usage\":{\"prompt_tokens\":14,\"completion_tokens\":16,"
        "\"total_tokens\":30,\"prompt_tokens_details\":"
        "{\"cached_tokens\":0}}}";

    rc = llm_sse_usage_from_json(LLM_API_OPENAI, b, strlen(b), &u);
    tap_ok(rc == 1 && u.done && u.have_usage && u.have_input
           && u.input_tokens == 14 && u.output_tokens == 16
           && u.cached_input_tokens == 0 && !u.clamped && !u.error,
           "json scan: mockllm's chat, 14 in, 16 out");
    tap_ok(u.delta_events == 1 && u.delta_bytes == 87,
           "  its text, 87 bytes, one delta");
    tap_is_str(u.finish_reason, "stop", "  its finish");
    tap_is_str(u.response_id, "chatcmpl-mock-1", "  its id");
    tap_is_str(u.upstream_model, "gpt-4o-mini", "  its model");

    /* a\n b, e-acute two bytes, a CJK three: 8; the cached and reasoning */
    b = " {\"choices\" : [ {\"message\":{\"content\":\"a\\nb\\u00e9\\u4e2d\"}"
        ", \"finish_reason\":\"length\"} ],\n\"usage\":{\"prompt_tokens\":"
        "100,\"completion_tokens\":20,\"prompt_tokens_details\":"
        "{\"cached_tokens\":30},\"completion_tokens_details\":"
        "{\"reasoning_tokens\":5}}}";

    rc = llm_sse_usage_from_json(LLM_API_OPENAI, b, strlen(b), &u);
    tap_ok(rc == 1 && u.input_tokens == 100 && u.output_tokens == 20
           && u.cached_input_tokens == 30 && u.reasoning_tokens == 5
           && u.delta_bytes == 8 && strcmp(u.finish_reason, "length") == 0,
           "json scan: escapes decoded, 8 bytes; 100 in (30 cached), 20 "
           "out (5 reasoning)");

    /* Anthropic's three parts of the prompt: 10 + 2000 + 3000 */
    b = "{\"id\":\"msg_01\",\"type\":\"message\",\"model\":\"claude\","
        "\"content\":[{\"type\":\"thinking\",\"thinking\":\"hmm\"},"
        "{\"type\":\"text\",\"text\":\"Hi\"}],\"stop_reason\":\"tool_use\","
        "\"usage\":{\"input_tokens\":10,\"cache_creation_input_tokens\":"
        "2000,\"cache_read_input_tokens\":3000,\"output_tokens\":77}}";

    rc = llm_sse_usage_from_json(LLM_API_ANTHROPIC, b, strlen(b), &u);
    tap_ok(rc == 1 && u.input_tokens == 5010 && u.cached_input_tokens == 3000
           && u.cache_write_tokens == 2000 && u.output_tokens == 77
           && u.delta_bytes == 5 && strcmp(u.finish_reason, "tool_use") == 0
           && strcmp(u.response_id, "msg_01") == 0,
           "json scan: a message, 5010 in, 77 out, 5 bytes of text");

    /* incomplete: the reason is why; abc + no + {} is the text */
    b = "{\"id\":\"resp_1\",\"status\":\"incomplete\",\"incomplete_details\":"
        "{\"reason\":\"max_output_tokens\"},\"output\":[{\"content\":[{"
        "\"text\":\"abc\"},{\"refusal\":\"no\"}]},{\"arguments\":\"{}\"}],"
        "\"usage\":{\"input_tokens\":5,\"output_tokens\":9,"
        "\"output_tokens_details\":{\"reasoning_tokens\":4}},"
        "\"text\":{\"format\":{\"type\":\"text\"}}}";

    rc = llm_sse_usage_from_json(LLM_API_RESPONSES, b, strlen(b), &u);
    tap_ok(rc == 1 && u.input_tokens == 5 && u.output_tokens == 9
           && u.reasoning_tokens == 4 && u.delta_bytes == 7
           && strcmp(u.finish_reason, "max_output_tokens") == 0,
           "json scan: a response cut short, its reason, 7 bytes of text");

    /* the first of two wins, as cJSON's lookup finds it; text counts all */
    b = "{\"usage\":{\"prompt_tokens\":1,\"content\":\"xyz\"},\"usage\":"
        "{\"prompt_tokens\":9},\"content\":\"ab\",\"content\":\"cde\"}";

    rc = llm_sse_usage_from_json(LLM_API_OPENAI, b, strlen(b), &u);
    tap_ok(rc == 1 && u.input_tokens == 1 && u.delta_bytes == 5,
           "json scan: the first usage, every text but the usage's");

    /* a 16-digit figure is left to cJSON: clamped to the most */
    b = "{\"usage\":{\"prompt_tokens\":1234567890123456}}";

    rc = llm_sse_usage_from_json(LLM_API_OPENAI, b, strlen(b), &u);
    tap_ok(rc == 1 && u.input_tokens == LLM_USAGE_TOKENS_MAX && u.clamped,
           "json fallback: a figure of 16 digits, clamped");

    b = "{\"usage\":{\"prompt_tokens\":3.7,\"completion_tokens\":1e3}}";

    rc = llm_sse_usage_from_json(LLM_API_OPENAI, b, strlen(b), &u);
    tap_ok(rc == 1 && u.input_tokens == 3 && u.output_tokens == 1000
           && u.clamped && !u.malformed,
           "json fallback: 3.7 is 3, clamped; 1e3 is 1000");

    /* cJSON decodes the name: the escaped usage is the first */
    b = "{\"us\\u0061ge\":{\"prompt_tokens\":3},\"usage\":"
        "{\"prompt_tokens\":4}}";

    rc = llm_sse_usage_from_json(LLM_API_OPENAI, b, strlen(b), &u);
    tap_ok(rc == 1 && u.input_tokens == 3,
           "json fallback: an escaped name is the name");

    /* cJSON's text ends at a NUL: ab */
    rc = llm_sse_usage_from_json(LLM_API_OPENAI,
                                 "{\"content\":\"ab\0cd\"}", 19, &u);
    tap_ok(rc == 0 && u.done && u.delta_bytes == 2,
           "json fallback: a NUL in the text ends it");

    /* 40 lists deep, past the scan's depth */
    n = (size_t) snprintf(deep, sizeof(deep), "{\"id\":\"x1\",\"a\":");

    for (k = 0; k < 40; k++) {
        deep[n++] = '[';
    }

    for (k = 0; k < 40; k++) {
        deep[n++] = ']';
    }

    deep[n++] = '}';

    rc = llm_sse_usage_from_json(LLM_API_OPENAI, deep, n, &u);
    tap_ok(rc == 0 && u.done && strcmp(u.response_id, "x1") == 0,
           "json fallback: deep nesting, read whole");

    rc = llm_sse_usage_from_json(LLM_API_OPENAI, deep, n - 1, &u);
    tap_ok(rc == 0 && !u.done && u.response_id[0] == '\0',
           "json: cut short, nothing read");

    /* what follows the object is not read, by cJSON either */
    b = "{\"usage\":{\"prompt_tokens\":2}} trailing {";

    rc = llm_sse_usage_from_json(LLM_API_OPENAI, b, strlen(b), &u);
    tap_ok(rc == 1 && u.done && u.input_tokens == 2,
           "json scan: what follows the object is left");

    b = "\xEF\xBB\xBF{\"usage\":{\"prompt_tokens\":2}}";

    rc = llm_sse_usage_from_json(LLM_API_OPENAI, b, strlen(b), &u);
    tap_ok(rc == 1 && u.done && u.input_tokens == 2,
           "json fallback: a BOM, skipped by cJSON");
}


/* an embeddings list bills its prompt alone; its vectors are no text */

static void
test_embeddings(void)
{
    int           rc;
    const char   *b;
    llm_usage_t   u;

    b = "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\","
        "\"index\":0,\"embedding\":[0.5,-0.5]}],\"model\":\"m\","
        "\"usage\":{\"prompt_tokens\":8,\"total_tokens\":8}}";

    rc = llm_sse_usage_from_json(LLM_API_EMBEDDINGS, b, strlen(b), &u);
    tap_is(rc, 1, "embeddings: the usage is found");
    tap_ok(u.have_usage && u.have_input && u.done && !u.error,
           "  whole, with its input");
    tap_is(u.input_tokens, 8, "  prompt_tokens is the input");
    tap_is(u.output_tokens + u.delta_events + u.delta_bytes, 0,
           "  and nothing is output");

    b = "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\","
        "\"index\":0,\"embedding\":\"AAAAPw==\"}],\"model\":\"m\"}";

    rc = llm_sse_usage_from_json(LLM_API_EMBEDDINGS, b, strlen(b), &u);
    tap_ok(rc == 0 && !u.have_usage && u.done && u.delta_bytes == 0,
           "embeddings without usage: whole, no usage, no text");

    b = "{\"object\":\"list\",\"data\":[],\"usage\":"
        "{\"total_tokens\":8}}";

    rc = llm_sse_usage_from_json(LLM_API_EMBEDDINGS, b, strlen(b), &u);
    tap_ok(rc == 0 && !u.have_usage,
           "embeddings: a usage without prompt_tokens is none");

    b = "{\"error\":{\"message\":\"x\",\"type\":\"invalid_request_error\","
        "\"param\":\"input\",\"code\":null}}";

    rc = llm_sse_usage_from_json(LLM_API_EMBEDDINGS, b, strlen(b), &u);
    tap_ok(rc == 0 && u.error, "embeddings: an error body is an error");

    /* the end of a list too large to keep */
    b = "0.25,-0.5]}],\"model\":\"text-embedding-3-small\",\"usage\":"
        "{\"prompt_tokens\":5120,\"total_tokens\":5120}}";

    rc = llm_sse_usage_from_tail(LLM_API_EMBEDDINGS, b, strlen(b), &u);
    tap_ok(rc == 1 && u.have_usage && u.done && u.input_tokens == 5120
           && u.output_tokens == 0, "embeddings tail: the usage, whole");

    b = "\"AAAAPw==\"}] , \"usage\" :\r\n { \"prompt_tokens\" : 9 } } \n";

    rc = llm_sse_usage_from_tail(LLM_API_EMBEDDINGS, b, strlen(b), &u);
    tap_ok(rc == 1 && u.input_tokens == 9, "embeddings tail: blanks between");

    b = "0.25]}],\"usage\":{\"prompt_tokens\":5}";
    rc = llm_sse_usage_from_tail(LLM_API_EMBEDDINGS, b, strlen(b), &u);
    tap_ok(rc == 0 && !u.done, "embeddings tail: not the end of the list");

    b = "0.25]}],\"usage\":{\"prompt_tokens\":5},\"model\":\"m\"}";
    rc = llm_sse_usage_from_tail(LLM_API_EMBEDDINGS, b, strlen(b), &u);
    tap_ok(rc == 0 && !u.done, "embeddings tail: usage not the last member");

    b = "0.25]}],\"x\":{\"usage\":{\"prompt_tokens\":5}}}";
    rc = llm_sse_usage_from_tail(LLM_API_EMBEDDINGS, b, strlen(b), &u);
    tap_ok(rc == 0, "embeddings tail: a usage inside another member");

    b = "5]}],\"usage\":{\"total_tokens\":5}}";
    rc = llm_sse_usage_from_tail(LLM_API_EMBEDDINGS, b, strlen(b), &u);
    tap_ok(rc == 0, "embeddings tail: no prompt_tokens");

    b = "\"usage\":{\"prompt_tokens\":5}}";
    rc = llm_sse_usage_from_tail(LLM_API_EMBEDDINGS, b, strlen(b), &u);
    tap_ok(rc == 0, "embeddings tail: cut before the comma");

    b = "5]}],\"usage\":{\"prompt_tokens\":5}}";
    rc = llm_sse_usage_from_tail(LLM_API_OPENAI, b, strlen(b), &u);
    tap_ok(rc == 0, "a chat body has no tail to read");
}


static int
write_seed(const char *dir, const char *kind, size_t i, int sel,
    const char *text)
{
    char    *copy, path[4096];
    FILE    *f;
    size_t   len;

    snprintf(path, sizeof(path), "%s/%s-%02zu", dir, kind, i);

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

    return 0;
}


static int
seed_api(llm_api_e api)
{
    switch (api) {

    case ANTHROPIC:
        return SEED_ANTHROPIC;

    case RESPONSES:
        return SEED_RESPONSES;

    default:
        return SEED_OPENAI;
    }
}


static int
write_corpus(const char *dir)
{
    int                  sel;
    char                 text[OUT_SIZE];
    size_t               i, n;
    const strip_case_t  *c;

    for (i = 0; i < nelts(sse_cases); i++) {
        sel = SEED_HALF | seed_api(sse_cases[i].api);

        if (sse_cases[i].cap != 0) {
            sel |= SEED_SMALL;
        }

        if (write_seed(dir, "stream", i, sel, sse_cases[i].stream) != 0) {
            return 1;
        }
    }

    for (i = 0; i < nelts(json_cases); i++) {
        sel = SEED_HALF | seed_api(json_cases[i].api);

        if (write_seed(dir, "json", i, sel, json_cases[i].body) != 0) {
            return 1;
        }
    }

    /* the filter's streams, whole: OpenAI streams like any other */

    for (i = 0; i < nelts(strip_cases) + nelts(early_cases); i++) {
        c = (i < nelts(strip_cases)) ? &strip_cases[i]
                                     : &early_cases[i - nelts(strip_cases)];

        n = strip_append(text, c->before, c->crlf);
        n += strip_append(text + n, c->usage, c->crlf);
        n += strip_append(text + n, c->after, c->crlf);
        text[n] = '\0';

        if (write_seed(dir, "strip", i, SEED_HALF | SEED_OPENAI, text) != 0) {
            return 1;
        }
    }

    return 0;
}


/*
 * The event callback: each event with data, once, as dispatched, with its
 * type (empty for none or one too long), its data joined by '\n', and the
 * skipped flag of one too large; the usage is what it is without it.
 */

typedef struct {
    int     n;
    char    log[1024];
} event_log_t;


static void
event_logger(void *ctx, const char *event, size_t event_len,
    const char *data, size_t len, unsigned skipped)
{
    event_log_t  *l;

    l = ctx;
    l->n++;

    snprintf(l->log + strlen(l->log), sizeof(l->log) - strlen(l->log),
             "[%.*s|%.*s|%u]", (int) event_len, event, (int) len, data,
             skipped);
}


static void
test_event_callback(void)
{
    size_t        i, n;
    char          buf[64], small[16];
    llm_sse_t     p, q;
    event_log_t   l;
    const char   *s;

    s = ": comment\n\n"
        "event: message_start\ndata: {\"a\":1}\n\n"
        "data: one\ndata: two\r\n\r\n"
        "event: only_a_type\n\n"
        "event: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\ndata: x\n\n"
        "data: 0123456789abcdefghij\n\n"
        "data: [DONE]\n\n";

    /* whole, and one byte at a time with yield: the same events */
    for (n = 0; n < 2; n++) {
        memset(&l, 0, sizeof(l));
        llm_sse_init(&p, LLM_API_OPENAI, n ? buf : small,
                     n ? sizeof(buf) : sizeof(small));
        p.on_event = event_logger;
        p.event_ctx = &l;
        p.yield = n;

        if (n) {
            for (i = 0; s[i]; i++) {
                llm_sse_feed(&p, s + i, 1);
            }

        } else {
            llm_sse_feed(&p, s, strlen(s));
        }

        llm_sse_finish(&p);

        tap_is(l.n, 5, "event callback: the events with data (%s)",
               n ? "byte by byte" : "whole");

        tap_is_str(l.log, n ? "[message_start|{\"a\":1}|0][|one\ntwo|0]"
                              "[|x|0][|0123456789abcdefghij|0][|[DONE]|0]"
                            : "[message_start|{\"a\":1}|0][|one\ntwo|0]"
                              "[|x|0][||1][|[DONE]|0]",
                   "event callback: types, data and the skipped flag (%s)",
                   n ? "64 bytes" : "16 bytes");
        tap_ok(p.usage.done, "event callback: the usage parser still ran");
    }

    /* the same usage with the callback as without */
    llm_sse_init(&q, LLM_API_OPENAI, buf, sizeof(buf));
    llm_sse_feed(&q, s, strlen(s));
    llm_sse_finish(&q);
    tap_ok(memcmp(&q.usage, &p.usage, sizeof(llm_usage_t)) == 0,
           "event callback: the usage is the same without it");
}


static void test_ident(void);


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

    for (i = 0; i < nelts(strip_cases); i++) {
        test_strip(&strip_cases[i]);
    }

    for (i = 0; i < nelts(early_cases); i++) {
        test_strip_early(&early_cases[i]);
    }

    test_strip_crlf();
    test_strip_not_cut();
    test_grow();
    test_closing();
    test_error_event();
    test_estimate();
    test_settle();
    test_settle_bounds();
    test_embeddings();
    test_json_scan();
    test_event_callback();
    test_ident();

    return tap_done();
}


/*
 * What the upstream calls the response and the model that made it, for
 * the ledger's reconciliation: from every API's stream, split anywhere,
 * and body; the first of each kept; anything but a clean name of at most
 * 64 bytes left out.
 */

typedef struct {
    const char   *name;
    llm_api_e     api;
    unsigned      json;
    const char   *text;
    const char   *id;
    const char   *model;
} ident_case_t;


static const ident_case_t  ident_cases[] = {
    { "openai stream", OPENAI, 0,
      "data: {\"id\":\"chatcmpl-A1\",\"object\":\"chat.completion.chunk\","
      "\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[{\"index\":0,"
      "\"delta\":{\"content\":\"hi\"}}]}\n\n"
      "data: {\"id\":\"chatcmpl-A1\",\"model\":\"gpt-4o-mini-2024-07-18\","
      "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}"
      "\n\n"
      "data: {\"id\":\"chatcmpl-A1\",\"model\":\"gpt-4o-mini-2024-07-18\","
      "\"choices\":[],\"usage\":{\"prompt_tokens\":3,"
      "\"completion_tokens\":1}}\n\ndata: [DONE]\n\n",
      "chatcmpl-A1", "gpt-4o-mini-2024-07-18" },

    { "openai stream cut before its finish", OPENAI, 0,
      "data: {\"id\":\"chatcmpl-A1\",\"model\":\"gpt-4o\",\"choices\":"
      "[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n",
      "", "" },

    { "anthropic stream", ANTHROPIC, 0,
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":"
      "{\"id\":\"msg_01XFDUDYJgAACzvnptvVoYEL\",\"type\":\"message\","
      "\"role\":\"assistant\",\"model\":\"claude-3-5-haiku-20241022\","
      "\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}"
      "\n\nevent: message_delta\ndata: {\"type\":\"message_delta\","
      "\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":"
      "{\"output_tokens\":2}}\n\nevent: message_stop\n"
      "data: {\"type\":\"message_stop\"}\n\n",
      "msg_01XFDUDYJgAACzvnptvVoYEL", "claude-3-5-haiku-20241022" },

    { "responses stream", RESPONSES, 0,
      "event: response.created\ndata: {\"type\":\"response.created\","
      "\"response\":{\"id\":\"resp_early\",\"model\":\"o4-mini\"}}\n\n"
      "event: response.completed\ndata: {\"type\":\"response.completed\","
      "\"response\":{\"id\":\"resp_67ccd2bed1ec8190\",\"model\":"
      "\"o4-mini-2025-04-16\",\"status\":\"completed\",\"usage\":"
      "{\"input_tokens\":4,\"output_tokens\":2}}}\n\n",
      "resp_67ccd2bed1ec8190", "o4-mini-2025-04-16" },

    { "openai body", OPENAI, 1,
      "{\"id\":\"chatcmpl-B2\",\"object\":\"chat.completion\",\"model\":"
      "\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,\"message\":"
      "{\"role\":\"assistant\",\"content\":\"x\"},\"finish_reason\":"
      "\"stop\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}",
      "chatcmpl-B2", "gpt-4o-2024-08-06" },

    { "anthropic body", ANTHROPIC, 1,
      "{\"id\":\"msg_02\",\"type\":\"message\",\"model\":"
      "\"claude-sonnet-4-20250514\",\"content\":[],\"stop_reason\":"
      "\"end_turn\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}",
      "msg_02", "claude-sonnet-4-20250514" },

    { "responses body", RESPONSES, 1,
      "{\"id\":\"resp_03\",\"object\":\"response\",\"model\":\"gpt-4.1\","
      "\"status\":\"completed\",\"usage\":{\"input_tokens\":1,"
      "\"output_tokens\":1}}",
      "resp_03", "gpt-4.1" },

    { "embeddings body: a model, no id", LLM_API_EMBEDDINGS, 1,
      "{\"object\":\"list\",\"data\":[],\"model\":"
      "\"text-embedding-3-small\",\"usage\":{\"prompt_tokens\":2,"
      "\"total_tokens\":2}}",
      "", "text-embedding-3-small" },

    { "names that are not clean are left out", OPENAI, 1,
      "{\"id\":\"chatcmpl \\\"x\",\"model\":\"gpt\\u00e9\","
      "\"choices\":[],\"usage\":{\"prompt_tokens\":1,"
      "\"completion_tokens\":1}}",
      "", "" },

    { "65 bytes is too long, 64 is not", OPENAI, 1,
      "{\"id\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\","
      "\"model\":\"mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm\","
      "\"choices\":[],\"usage\":{\"prompt_tokens\":1,"
      "\"completion_tokens\":1}}",
      "", "mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm" },

    { "not strings", ANTHROPIC, 1,
      "{\"id\":7,\"model\":[\"x\"],\"usage\":{\"input_tokens\":1,"
      "\"output_tokens\":1}}",
      "", "" },
};


static void
test_ident(void)
{
    int                  bad;
    size_t               i, len, split, stops;
    llm_usage_t          u;
    sse_case_t           c;
    const ident_case_t  *k;

    for (i = 0; i < nelts(ident_cases); i++) {
        k = &ident_cases[i];
        len = strlen(k->text);

        if (k->json) {
            (void) llm_sse_usage_from_json(k->api, k->text, len, &u);

            tap_ok(strcmp(u.response_id, k->id) == 0
                   && strcmp(u.upstream_model, k->model) == 0,
                   "ident %s: '%s' '%s'", k->name, u.response_id,
                   u.upstream_model);
            continue;
        }

        memset(&c, 0, sizeof(sse_case_t));
        c.name = k->name;
        c.api = k->api;

        for (split = 0; split <= len; split++) {
            feed(&c, k->text, len, split, 0, 0, &u, &stops, &bad);

            if (strcmp(u.response_id, k->id) != 0
                || strcmp(u.upstream_model, k->model) != 0)
            {
                break;
            }
        }

        if (!tap_ok(split > len, "ident %s: '%s' '%s', split at every byte",
                    k->name, k->id, k->model))
        {
            printf("#   split at %zu: '%s' '%s'\n", split, u.response_id,
                   u.upstream_model);
        }
    }
}
