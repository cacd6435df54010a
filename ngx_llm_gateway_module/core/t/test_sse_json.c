
/*
 * The reader of whole JSON bodies against its oracle (sse_ref.c: the
 * reader that parsed every body with cJSON).  Bodies of every dialect as
 * mockllm writes them, and bodies made to trip the scan (duplicate
 * members, escaped names, usage-named objects nested, figures of every
 * form, NUL bytes, bad UTF-8, bad escapes, deep nesting, blanks of every
 * kind everywhere, what follows the object), are read by both under
 * every API: whole, cut at every byte, with each byte changed, and then
 * mutated at random.  The two must agree on the return value and on
 * every field of the usage.
 *
 * In the bodies ' stands for "; a case with a length is taken as it is,
 * NUL bytes and all.
 */


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sse_ref.h"
#include "tap.h"

#include "sse_ref.c"


#define nelts(a)        (sizeof(a) / sizeof((a)[0]))

#define BODY_MAX        16384
#define MUTANTS         40000


typedef struct {
    const char   *name;
    const char   *text;
    size_t        len;              /* 0: ' for ", up to the NUL */
} json_case_t;


/* a case with NUL bytes: its length */
#define JSON_NUL(name, s)  { name, s, sizeof(s) - 1 }

#define CHAT  "{'id':'chatcmpl-mock-1','object':'chat.completion',"         \
    "'created':1796315280,'model':'gpt-4o-mini','choices':[{'index':0,"      \
    "'message':{'role':'assistant','content':'tok1 tok2 tok3 tok4 tok5 tok6" \
    " tok7 tok8 tok9 tok10 tok11 tok12 tok13 tok14 tok15 tok16 '},"          \
    "'finish_reason':'stop'}],'usage':{'prompt_tokens':14,"                  \
    "'completion_tokens':16,'total_tokens':30,'prompt_tokens_details':"      \
    "{'cached_tokens':0}}}"

#define MSG   "{'id':'msg_mock_2','type':'message','role':'assistant',"     \
    "'model':'claude-3-5-haiku','content':[{'type':'text','text':'tok1 tok2" \
    " tok3 tok4 tok5 tok6 tok7 tok8 tok9 tok10 tok11 tok12 tok13 tok14 "     \
    "tok15 tok16 '}],'stop_reason':'end_turn','stop_sequence':null,"         \
    "'usage':{'input_tokens':14,'output_tokens':16,"                         \
    "'cache_read_input_tokens':0,'cache_creation_input_tokens':0}}"

#define RESP  "{'id':'resp_mock_3','object':'response','created_at':"      \
    "1796315280,'status':'completed','model':'gpt-4o-mini','output':[{"      \
    "'type':'message','id':'msg_mock_3','status':'completed','role':"        \
    "'assistant','content':[{'type':'output_text','text':'tok1 tok2 tok3 "   \
    "tok4 tok5 tok6 tok7 tok8 tok9 tok10 tok11 tok12 tok13 tok14 tok15 "     \
    "tok16 ','annotations':[]}]}],'usage':{'input_tokens':14,"               \
    "'input_tokens_details':{'cached_tokens':0},'output_tokens':16,"         \
    "'output_tokens_details':{'reasoning_tokens':0},'total_tokens':30},"     \
    "'error':null,'incomplete_details':null,'instructions':null,"            \
    "'max_output_tokens':40,'parallel_tool_calls':true,"                     \
    "'previous_response_id':null,'reasoning':{'effort':null,'summary':"      \
    "null},'store':true,'temperature':1.0,'text':{'format':{'type':"         \
    "'text'}},'tool_choice':'auto','tools':[],'top_p':1.0,'truncation':"     \
    "'disabled','user':null,'metadata':{}}"

#define EMB   "{'object':'list','data':[{'object':'embedding','index':0,"   \
    "'embedding':[-0.032555446,-0.0077009392,0.0292108152,-0.00104627153,"   \
    "1e-5,-2E+3,0,-0,12.5e-3]}],'model':'text-embedding-3-small',"           \
    "'usage':{'prompt_tokens':3,'total_tokens':3}}"


static const json_case_t  json_cases[] = {

    /* as mockllm writes them */
    { "chat", CHAT, 0 },
    { "messages", MSG, 0 },
    { "responses", RESP, 0 },
    { "embeddings", EMB, 0 },

    /* by hand: every member read, escapes in the text */
    { "chat, tools and reasoning",
      "{'id':'chatcmpl-9','model':'o3-mini','choices':[{'index':0,"
      "'message':{'role':'assistant','content':'line\\none \\'q\\' \\\\ "
      "\\/ \\b\\f\\r\\t caf\\u00e9 \\u4e2d \\u007f','refusal':null,"
      "'reasoning_content':'hmm','tool_calls':[{'id':'call_1','type':"
      "'function','function':{'name':'f','arguments':'{\\'a\\':1}'}}]},"
      "'finish_reason':'tool_calls'},{'index':1,'finish_reason':'stop'}],"
      "'usage':{'prompt_tokens':1200,'completion_tokens':300,"
      "'prompt_tokens_details':{'cached_tokens':1024,'audio_tokens':0},"
      "'completion_tokens_details':{'reasoning_tokens':256}},"
      "'system_fingerprint':'fp_1'}", 0 },
    { "messages, thinking and tools",
      "{'id':'msg_01','type':'message','role':'assistant','model':"
      "'claude-sonnet-4','content':[{'type':'thinking','thinking':'let me "
      "see','signature':'sig'},{'type':'text','text':'Hi \\u00e9'},{'type':"
      "'tool_use','id':'tu_1','name':'f','input':{'text':'arg'}}],"
      "'stop_reason':'tool_use','usage':{'input_tokens':10,"
      "'cache_creation_input_tokens':2000,'cache_read_input_tokens':3000,"
      "'output_tokens':77}}", 0 },
    { "responses, incomplete",
      "{'id':'resp_1','status':'incomplete','incomplete_details':{'reason':"
      "'max_output_tokens'},'model':'gpt-4.1','output':[{'type':'message',"
      "'content':[{'type':'output_text','text':'abc'},{'type':'refusal',"
      "'refusal':'no'}]},{'type':'function_call','arguments':'{}'}],"
      "'usage':{'input_tokens':5,'output_tokens':9,'output_tokens_details':"
      "{'reasoning_tokens':4}}}", 0 },
    { "responses, incomplete without a reason",
      "{'status':'incomplete','incomplete_details':{'reason':7}}", 0 },
    { "responses, failed",
      "{'id':'resp_2','status':'failed','error':{'code':'server_error',"
      "'message':'boom'},'usage':null}", 0 },
    { "anthropic error",
      "{'type':'error','error':{'type':'overloaded_error','message':"
      "'Overloaded'}}", 0 },
    { "openai error",
      "{'error':{'message':'bad','type':'invalid_request_error','param':"
      "null,'code':null}}", 0 },

    /* duplicates: the first wins a lookup, every one counts as text */
    { "usage a number, then an object",
      "{'usage':5,'usage':{'prompt_tokens':3,'input_tokens':3}}", 0 },
    { "two usages",
      "{'usage':{'prompt_tokens':1,'input_tokens':1,'completion_tokens':2},"
      "'usage':{'prompt_tokens':9,'input_tokens':9,'output_tokens':9}}", 0 },
    { "figures twice",
      "{'usage':{'prompt_tokens':null,'prompt_tokens':7,'input_tokens':"
      "'x','input_tokens':8,'output_tokens':1,'output_tokens':2,"
      "'prompt_tokens_details':{'cached_tokens':1,'cached_tokens':9},"
      "'prompt_tokens_details':{'cached_tokens':5}}}", 0 },
    { "ids twice",
      "{'id':5,'id':'second','model':'m1','model':'m2','type':'message',"
      "'type':'error','error':null,'error':{},'stop_reason':'a',"
      "'stop_reason':'b','status':'completed','status':'incomplete',"
      "'content':'one','content':'two','text':'x','text':'yy'}", 0 },
    { "choices twice",
      "{'choices':{'finish_reason':'x'},'choices':[{'finish_reason':'y'}]}",
      0 },
    { "the first choice not an object",
      "{'choices':[[{'finish_reason':'x'}],{'finish_reason':'y'}]}", 0 },
    { "no choices", "{'choices':[],'usage':{'prompt_tokens':1}}", 0 },
    { "finish twice",
      "{'choices':[{'finish_reason':null,'finish_reason':'length',"
      "'message':{'finish_reason':'x'}}]}", 0 },

    /* names escaped, nested, close */
    { "usage escaped",
      "{'us\\u0061ge':{'prompt_tokens':3,'input_tokens':3},"
      "'usage':{'prompt_tokens':4,'input_tokens':4}}", 0 },
    { "content escaped",
      "{'cont\\u0065nt':'abc','t\\u0065xt':'abcd','text':'z','id':'i'}", 0 },
    { "a name with an escaped quote",
      "{'id\\'':'x','id':'y','usage\\\\':{'prompt_tokens':1}}", 0 },
    { "usage nested",
      "{'choices':[{'message':{'usage':{'prompt_tokens':9,'content':'abc'},"
      "'content':'abcdef'}}],'x':{'id':'inner','model':'inner','usage':"
      "{'input_tokens':5}},'data':[{'usage':{'prompt_tokens':2}}]}", 0 },
    { "text inside usage",
      "{'usage':{'prompt_tokens':1,'input_tokens':1,'content':'aaa',"
      "'text':'bbb','x':{'text':'ccc'}},'content':'d','text':'e'}", 0 },
    { "text not a string",
      "{'content':['abc','def'],'text':{'text':'g'},'arguments':5,"
      "'refusal':null,'thinking':true,'partial_json':'pj'}", 0 },
    { "details not objects",
      "{'usage':{'prompt_tokens':10,'input_tokens':10,'output_tokens':10,"
      "'completion_tokens':10,'prompt_tokens_details':[{'cached_tokens':3}],"
      "'completion_tokens_details':'x','input_tokens_details':null,"
      "'output_tokens_details':{'reasoning_tokens':[1]}}}", 0 },
    { "usage not an object",
      "{'usage':[{'prompt_tokens':1}],'id':'x'}", 0 },

    /* figures */
    { "huge figures",
      "{'usage':{'prompt_tokens':1e300,'completion_tokens':"
      "99999999999999999999,'input_tokens':1E2,'output_tokens':"
      "123456789012345,'cache_read_input_tokens':1234567890123456,"
      "'cache_creation_input_tokens':100000001}}", 0 },
    { "negative and fractions",
      "{'usage':{'prompt_tokens':-5,'completion_tokens':3.7,'input_tokens':"
      "-0,'output_tokens':0.0,'cache_read_input_tokens':2.5e0,"
      "'prompt_tokens_details':{'cached_tokens':-1e-3}}}", 0 },
    { "figures at the limit",
      "{'usage':{'prompt_tokens':100000000,'completion_tokens':100000001,"
      "'input_tokens':99999999,'output_tokens':000}}", 0 },
    { "figures of cJSON's own",
      "{'usage':{'prompt_tokens':01,'input_tokens':01}}", 0 },
    { "a figure cJSON cuts", "{'usage':{'prompt_tokens':1.}}", 0 },
    { "a figure with a plus", "{'usage':{'prompt_tokens':+1}}", 0 },
    { "a figure of 63 bytes",
      "{'usage':{'prompt_tokens':1.0000000000000000000000000000000000000"
      "000000000000000000000001,'input_tokens':2}}", 0 },
    { "a figure of 64 bytes",
      "{'usage':{'prompt_tokens':1.00000000000000000000000000000000000000"
      "000000000000000000000001,'input_tokens':2}}", 0 },
    { "a number of 64 bytes elsewhere",
      "{'x':1.00000000000000000000000000000000000000"
      "000000000000000000000001,'usage':{'input_tokens':2}}", 0 },
    { "an exponent cut", "{'x':1e,'usage':{'input_tokens':2}}", 0 },
    { "a sign alone", "{'x':-,'usage':{'input_tokens':2}}", 0 },
    { "a figure strtod stops in", "{'x':1-2,'usage':{'input_tokens':2}}",
      0 },

    /* strings */
    { "bad escapes", "{'content':'a\\x','usage':{'input_tokens':2}}", 0 },
    { "a short \\u", "{'content':'a\\u12','usage':{'input_tokens':2}}", 0 },
    { "a \\u not hex",
      "{'content':'a\\uZZZZb','usage':{'input_tokens':2}}", 0 },
    { "a \\u not hex elsewhere",
      "{'x':'a\\u00g0b','usage':{'input_tokens':2}}", 0 },
    { "a lone surrogate",
      "{'content':'a\\ud800','usage':{'input_tokens':2}}", 0 },
    { "a low surrogate", "{'content':'\\udc00'}", 0 },
    { "a pair", "{'content':'\\ud83d\\ude00','text':'\\uD83D\\uDE00x'}",
      0 },
    { "a \\u0000 in the text",
      "{'content':'ab\\u0000cd','text':'ab\\u0000cd'}", 0 },
    { "a \\u0000 in the id", "{'id':'ab\\u0000cd','model':'m\\u0000'}", 0 },
    { "control bytes",
      "{'id':'a\x01' ,'content':'\x1f\x7f\t','model':'m'}", 0 },
    { "bad UTF-8",
      "{'id':'\xff\xfe','model':'\xc3','content':'\xe9\x80','text':'\xf0',"
      "'choices':[{'finish_reason':'\xff\x80stop'}],'stop_reason':'\xc3\xa9'"
      "}", 0 },
    { "an id too long",
      "{'id':'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
      "a','model':'gpt x'}", 0 },
    { "a reason too long",
      "{'stop_reason':'abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnop"
      "qrstuvwxyz','choices':[{'finish_reason':'abcdefghijklmnopqrstuvwxyz"
      "0123456789abcdefghijklmnopqrstuvwxyz'}],'status':'abcdefghijklmnopq"
      "rstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz'}", 0 },
    { "unterminated", "{'id':'abc", 0 },
    { "a backslash at the end", "{'id':'abc\\", 0 },

    /* NUL bytes, counted in */
    JSON_NUL("a NUL in a name", "{\"usage\0x\":{\"prompt_tokens\":3,"
             "\"input_tokens\":3},\"content\0\":\"ab\"}"),
    JSON_NUL("a NUL in the text",
             "{\"content\":\"ab\0cd\",\"text\":\"ab\0cd\"}"),
    JSON_NUL("a NUL in the id", "{\"id\":\"ab\0cd\",\"model\":\"m\0\"}"),
    JSON_NUL("a NUL between", "{\"id\":\"a\"\0,\0\"usage\"\0:\0"
             "{\"input_tokens\":\0" "2}}"),
    JSON_NUL("a NUL after", "{\"id\":\"a\"}\0garbage"),
    JSON_NUL("a NUL before", "\0\0{\"id\":\"a\"}"),

    /* the document */
    { "blanks of every kind",
      " \t\r\n\x01\x1f{ \x02'id' \x7f:'x'}", 0 },
    { "blanks everywhere",
      " { 'id' : 'chatcmpl-1' , 'choices' : [ { 'finish_reason' : 'stop' "
      ", 'message' : { 'content' : 'abc' } } ] , 'usage' : { "
      "'prompt_tokens' : 3 , 'prompt_tokens_details' : { 'cached_tokens' : "
      "1 } } } ", 0 },
    { "blanks to the end", "{'id':'x' \n", 0 },
    { "what follows", "{'id':'x','usage':{'input_tokens':2}}garbage{", 0 },
    { "a second object", "{'id':'x'}{'id':'y'}", 0 },
    { "a BOM", "\xEF\xBB\xBF{'id':'x','usage':{'input_tokens':2}}", 0 },
    { "a BOM alone", "\xEF\xBB\xBF{}", 0 },
    { "an array", "[{'id':'x'}]", 0 },
    { "a string", "'id'", 0 },
    { "a number", "12", 0 },
    { "null", "null", 0 },
    { "empty", "{}", 0 },
    { "blanks in the empty", "{ \n }", 0 },
    { "a trailing comma", "{'id':'x',}", 0 },
    { "a comma first", "{,'id':'x'}", 0 },
    { "a list's trailing comma", "{'choices':[1,],'id':'x'}", 0 },
    { "no colon", "{'id' 'x'}", 0 },
    { "a name not a string", "{id:'x'}", 0 },
    { "literals", "{'a':true,'b':false,'c':null,'error':false}", 0 },
    { "literals cut", "{'a':tru}", 0 },
    { "literals long", "{'a':nullx}", 0 },
    { "literals wrong", "{'a':nul,'b':1}", 0 },
    { "a literal at the end", "{'a':null", 0 },
};


/* dictionary of the mutations: the JSON a scan must read as cJSON does */
static const char  *json_tokens[] = {
    "\"", "\\", "\\\"", "\\\\", "\\u", "\\u00", "\\u0065", "\\u00e9",
    "\\u0000", "\\ud83d", "\\ude00", "\\x", ":", "\":\"", "\",\"", "{", "}",
    "[", "]", ",", " ", "\t", "\n", "\r", "\x01", "\0", "null", "true",
    "false", "n", "-", "+", ".", "e", "E", "0", "01", "1e30", "-1", "1.5",
    "123456789012345", "1234567890123456", "\"content\":\"", "\"text\":\"",
    "\"usage\":{", "\"usage\":", "\"us\\u0061ge\":", "\"id\":\"",
    "\"model\":\"", "\"choices\":[{", "\"finish_reason\":\"",
    "\"stop_reason\":\"", "\"status\":\"incomplete\"",
    "\"incomplete_details\":{\"reason\":\"", "\"error\":", "\"type\":\"",
    "error", "\"prompt_tokens\":", "\"input_tokens\":",
    "\"output_tokens\":", "\"completion_tokens\":", "\"cached_tokens\":",
    "\"reasoning_tokens\":", "\"prompt_tokens_details\":{",
    "\"cache_read_input_tokens\":", "\xEF\xBB\xBF", "\xff", "\xc3\xa9",
};


static const llm_api_e  json_apis[] = {
    LLM_API_OPENAI, LLM_API_ANTHROPIC, LLM_API_RESPONSES, LLM_API_EMBEDDINGS,
    (llm_api_e) 99
};


static int
json_usage_same(const llm_usage_t *a, const llm_usage_t *b)
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


/*
 * The body read by both under every API, from a copy of its own size, so
 * that a read past its end is a fault under the sanitizers.  Returns the
 * APIs under which the two differed, the first one told with what.
 */

static size_t
json_diff(const char *what, const char *s, size_t len)
{
    int           ra, rb;
    char         *c;
    size_t        i, fails;
    llm_usage_t   ua, ub;

    c = malloc(len ? len : 1);
    if (c == NULL) {
        perror("malloc");
        exit(2);
    }

    memcpy(c, s, len);
    fails = 0;

    for (i = 0; i < nelts(json_apis); i++) {
        ra = llm_sse_usage_from_json(json_apis[i], c, len, &ua);
        rb = llm_sse_ref_usage_from_json(json_apis[i], c, len, &ub);

        if (ra == rb && json_usage_same(&ua, &ub)) {
            continue;
        }

        if (fails++ == 0) {
            printf("# %s, %zu bytes, api %d: %d/%d in %llu/%llu out "
                   "%llu/%llu delta %llu/%llu '%s'/'%s' '%s'/'%s'\n",
                   what, len, (int) json_apis[i], ra, rb,
                   (unsigned long long) ua.input_tokens,
                   (unsigned long long) ub.input_tokens,
                   (unsigned long long) ua.output_tokens,
                   (unsigned long long) ub.output_tokens,
                   (unsigned long long) ua.delta_bytes,
                   (unsigned long long) ub.delta_bytes,
                   ua.finish_reason, ub.finish_reason,
                   ua.response_id, ub.response_id);
        }
    }

    free(c);

    return fails;
}


static char *
json_text(const json_case_t *c, size_t *len)
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


/* each body whole, cut at every byte, and with each byte changed */

static void
test_cases(void)
{
    char     *s, save;
    size_t    i, k, b, len, fails;

    static const char  bytes[] = "\"\\:,{}[] \n\0\x01" "0-.e9nu\xff";

    for (i = 0; i < nelts(json_cases); i++) {
        s = json_text(&json_cases[i], &len);

        fails = json_diff(json_cases[i].name, s, len);

        for (k = 0; k < len; k++) {
            fails += json_diff(json_cases[i].name, s, k);
        }

        for (k = 0; k < len; k++) {
            save = s[k];

            for (b = 0; b < sizeof(bytes) - 1; b++) {
                s[k] = bytes[b];
                fails += json_diff(json_cases[i].name, s, len);
            }

            s[k] = save;
        }

        tap_is(fails, 0, "%s: the same, whole, cut and changed",
               json_cases[i].name);

        free(s);
    }
}


/* a body as mockllm writes it, with blanks of every kind between tokens */

static void
test_blanks(void)
{
    char         *s, *d;
    size_t        i, j, k, m, n, len, fails;
    unsigned      in, tok;
    const char   *b;

    static const char  *blanks[] = { " ", "\t\r\n", "\x01", "\x1f \x7f",
                                     "\0" };

    fails = 0;

    for (i = 0; i < 3; i++) {
        s = json_text(&json_cases[i], &len);
        d = malloc(len * 12);

        if (d == NULL) {
            perror("malloc");
            exit(2);
        }

        for (k = 0; k < nelts(blanks); k++) {
            b = blanks[k];
            m = strlen(b) + (k == nelts(blanks) - 1);
            n = 0;
            in = 0;

            /* around every token: a string's quotes, the structure */
            for (j = 0; j < len; j++) {
                tok = !in && (s[j] == '"' || strchr("{}[]:,", s[j]));

                if (tok) {
                    memcpy(d + n, b, m);
                    n += m;
                }

                d[n++] = s[j];
                in ^= (s[j] == '"' && (j == 0 || s[j - 1] != '\\'));

                if (tok || (!in && s[j] == '"')) {
                    memcpy(d + n, b, m);
                    n += m;
                }
            }

            fails += json_diff("blanks", d, n);
        }

        free(d);
        free(s);
    }

    tap_is(fails, 0, "blanks of every kind between every token, the same");
}


/* nesting around the usage, about the scan's depth and beyond */

static void
test_depth(void)
{
    char      d[512];
    size_t    depth, n, k, fails;

    fails = 0;

    for (depth = 0; depth < 48; depth++) {
        n = (size_t) snprintf(d, sizeof(d), "{\"usage\":{\"input_tokens\":1,"
                              "\"prompt_tokens\":1},\"x\":");

        for (k = 0; k < depth; k++) {
            d[n++] = (k & 1) ? '[' : '{';

            if (!(k & 1)) {
                n += (size_t) snprintf(d + n, sizeof(d) - n, "\"text\":");
            }
        }

        d[n++] = '1';

        for (k = depth; k > 0; k--) {
            d[n++] = ((k - 1) & 1) ? ']' : '}';
        }

        d[n++] = '}';

        fails += json_diff("depth", d, n);
        fails += json_diff("depth, cut", d, n - 1);
    }

    tap_is(fails, 0, "nested 0 to 47 deep, the same");
}


static uint64_t  json_seed = 0x2545f4914f6cdd1dULL;


static uint64_t
json_rand(void)
{
    json_seed ^= json_seed >> 12;
    json_seed ^= json_seed << 25;
    json_seed ^= json_seed >> 27;

    return json_seed * 0x9e3779b97f4a7c15ULL;
}


/* a body changed at random a few times: insertions, bytes, cuts, copies */

static size_t
json_mutate(char *d, size_t cap, const char *s, size_t len)
{
    size_t       n, i, at, k, m;
    const char  *t;

    memcpy(d, s, len);
    n = len;

    for (i = 1 + json_rand() % 6; i; i--) {
        at = n ? json_rand() % (n + 1) : 0;

        switch (json_rand() % 4) {

        case 0:
            t = json_tokens[json_rand() % nelts(json_tokens)];
            m = strlen(t) ? strlen(t) : 1;

            if (m <= cap - n) {
                memmove(d + at + m, d + at, n - at);
                memcpy(d + at, t, m);
                n += m;
            }

            break;

        case 1:
            if (at < n) {
                d[at] = "\"\\:{}[], \n\0nu0e5-.\x01\xff"[json_rand() % 21];
            }

            break;

        case 2:
            m = json_rand() % 16;
            m = (m > n - at) ? n - at : m;
            memmove(d + at, d + at + m, n - at - m);
            n -= m;
            break;

        default:
            k = n ? json_rand() % n : 0;
            m = json_rand() % 80;
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
    char    *m, *s;
    size_t   fails, i, n, len;

    m = malloc(BODY_MAX);
    if (m == NULL) {
        perror("malloc");
        exit(2);
    }

    fails = 0;

    for (i = 0; i < MUTANTS; i++) {
        s = json_text(&json_cases[i % nelts(json_cases)], &len);
        n = json_mutate(m, BODY_MAX, s, len);
        free(s);

        fails += json_diff("mutant", m, n);
    }

    free(m);

    tap_is(fails, 0, "%d mutations of the bodies, the same", MUTANTS);
}


int
main(void)
{
    test_cases();
    test_blanks();
    test_depth();
    test_mutants();

    return tap_done();
}
