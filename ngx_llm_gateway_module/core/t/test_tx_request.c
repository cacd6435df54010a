
/*
 * The request translator: every mapping both ways with the exact body the
 * backend gets, every refusal with the member it names, and what must not
 * break it (escapes, a huge body, memory).  Bodies are written with ' for
 * " (an apostrophe in a text is \u0027).
 */


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "llm_tx_request.h"
#include "tap.h"


#define O  LLM_API_OPENAI
#define A  LLM_API_ANTHROPIC
#define R  LLM_API_RESPONSES


typedef struct {
    llm_api_e     from;
    llm_api_e     to;
    const char   *body;
    const char   *want;        /* the body sent, or NULL: refused */
    const char   *param;       /* refused: the member named */
} tx_case_t;


/* Chat Completions -> Messages */

static const tx_case_t  chat_cases[] = {

    { O, A, "{'model':'x','messages':[{'role':'system','content':'S'},"
            "{'role':'user','content':'hi'}],'max_tokens':5}",
      "{'model':'M','max_tokens':100,'system':'S','messages':[{'role':"
      "'user','content':'hi'}]}", NULL },

    /* system and developer parts, wherever; user parts of every kind */
    { O, A, "{'model':'x','messages':[{'role':'developer','content':[{'type':"
            "'text','text':'A'},{'type':'text','text':'B'}]},{'role':"
            "'system','content':'C'},{'role':'user','content':[{'type':"
            "'text','text':'look'},{'type':'image_url','image_url':{'url':"
            "'data:image/png;base64,iVBO','detail':'low'}},{'type':"
            "'image_url','image_url':{'url':'https://e.x/a.jpg'}},{'type':"
            "'file','file':{'file_data':'data:application/pdf;base64,JVBE',"
            "'filename':'a.pdf'}}]},{'role':'system','content':''}]}",
      "{'model':'M','max_tokens':100,'system':[{'type':'text','text':'A'},"
      "{'type':'text','text':'B'},{'type':'text','text':'C'}],'messages':"
      "[{'role':'user','content':[{'type':'text','text':'look'},{'type':"
      "'image','source':{'type':'base64','media_type':'image/png','data':"
      "'iVBO'}},{'type':'image','source':{'type':'url','url':"
      "'https://e.x/a.jpg'}},{'type':'document','source':{'type':'base64',"
      "'media_type':'application/pdf','data':'JVBE'}}]}]}", NULL },

    /* one system part is an array still */
    { O, A, "{'model':'x','messages':[{'role':'system','content':[{'type':"
            "'text','text':'S'}]},{'role':'user','content':'hi'}]}",
      "{'model':'M','max_tokens':100,'system':[{'type':'text','text':'S'}],"
      "'messages':[{'role':'user','content':'hi'}]}", NULL },

    /*
     * Tool calls and their results: the results of a turn in one user
     * message, with the user's text after them; no-ops not written.
     */
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'},{'role':"
            "'assistant','content':'let me','tool_calls':[{'id':'call_1',"
            "'type':'function','function':{'name':'f','arguments':"
            "'{\\'a\\':1}'}},{'id':'call_2','type':'function','function':"
            "{'name':'g','arguments':''}}]},{'role':'tool','tool_call_id':"
            "'call_1','content':'r1'},{'role':'tool','tool_call_id':"
            "'call_2','content':[{'type':'text','text':'r2'}]},{'role':"
            "'user','content':'more'},{'role':'user','content':'again'}],"
            "'tools':[{'type':'function','function':{'name':'f',"
            "'description':'F','parameters':{'type':'object','properties':"
            "{'a':{'type':'integer'}}},'strict':true}},{'type':'function',"
            "'function':{'name':'g'}}],'tool_choice':'required',"
            "'parallel_tool_calls':false,'stop':'END','temperature':0.5,"
            "'top_p':0.9,'user':'u1','stream':true,'stream_options':"
            "{'include_usage':true},'n':1,'logprobs':false,"
            "'presence_penalty':0,'frequency_penalty':0,'response_format':"
            "{'type':'text'},'store':true,'service_tier':'auto',"
            "'max_completion_tokens':7,'logit_bias':{},'modalities':"
            "['text']}",
      "{'model':'M','max_tokens':100,'messages':[{'role':'user','content':"
      "'q'},{'role':'assistant','content':[{'type':'text','text':'let me'},"
      "{'type':'tool_use','id':'call_1','name':'f','input':{'a':1}},{'type':"
      "'tool_use','id':'call_2','name':'g','input':{}}]},{'role':'user',"
      "'content':[{'type':'tool_result','tool_use_id':'call_1','content':"
      "'r1'},{'type':'tool_result','tool_use_id':'call_2','content':[{'type':"
      "'text','text':'r2'}]},{'type':'text','text':'more'},{'type':'text',"
      "'text':'again'}]}],'tools':[{'name':'f','description':'F',"
      "'input_schema':{'type':'object','properties':{'a':{'type':"
      "'integer'}}}},{'name':'g','input_schema':{'type':'object',"
      "'properties':{}}}],'tool_choice':{'type':'any',"
      "'disable_parallel_tool_use':true},'stop_sequences':['END'],"
      "'temperature':0.5,'top_p':0.9,'metadata':{'user_id':'u1'},"
      "'stream':true}", NULL },

    /* refusal parts and the refusal member are text; "" is skipped */
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'},{'role':"
            "'assistant','content':[{'type':'text','text':''},{'type':"
            "'refusal','refusal':'no'}]},{'role':'assistant','content':'',"
            "'refusal':'nope'},{'role':'assistant','content':''}],'tools':"
            "[{'type':'function','function':{'name':'f'}}],"
            "'parallel_tool_calls':false,'stop':['a','b']}",
      "{'model':'M','max_tokens':100,'messages':[{'role':'user','content':"
      "'q'},{'role':'assistant','content':[{'type':'text','text':'no'},"
      "{'type':'text','text':'nope'}]}],'tools':[{'name':'f',"
      "'input_schema':{'type':'object','properties':{}}}],'tool_choice':"
      "{'type':'auto','disable_parallel_tool_use':true},'stop_sequences':"
      "['a','b']}", NULL },

    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'}],"
            "'tools':[{'type':'function','function':{'name':'f'}}],"
            "'tool_choice':{'type':'function','function':{'name':'f'}}}",
      "{'model':'M','max_tokens':100,'messages':[{'role':'user','content':"
      "'q'}],'tools':[{'name':'f','input_schema':{'type':'object',"
      "'properties':{}}}],'tool_choice':{'type':'tool','name':'f'}}", NULL },

    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'}],"
            "'tools':[{'type':'function','function':{'name':'f'}}],"
            "'tool_choice':'none','parallel_tool_calls':false}",
      "{'model':'M','max_tokens':100,'messages':[{'role':'user','content':"
      "'q'}],'tools':[{'name':'f','input_schema':{'type':'object',"
      "'properties':{}}}],'tool_choice':{'type':'none'}}", NULL },

    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'}],"
            "'tools':[{'type':'function','function':{'name':'f'}}],"
            "'tool_choice':'auto'}",
      "{'model':'M','max_tokens':100,'messages':[{'role':'user','content':"
      "'q'}],'tools':[{'name':'f','input_schema':{'type':'object',"
      "'properties':{}}}],'tool_choice':{'type':'auto'}}", NULL },

    /* an untyped schema typed; empty stop sequences dropped */
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'}],"
            "'tools':[{'type':'function','function':{'name':'f',"
            "'parameters':{'properties':{}}}},{'type':'function',"
            "'function':{'name':'g','parameters':{'type':null}}}],"
            "'stop':['','a','']}",
      "{'model':'M','max_tokens':100,'messages':[{'role':'user','content':"
      "'q'}],'tools':[{'name':'f','input_schema':{'properties':{},'type':"
      "'object'}},{'name':'g','input_schema':{'type':'object'}}],"
      "'stop_sequences':['a']}", NULL },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'}],"
            "'stop':'','temperature':0}",
      "{'model':'M','max_tokens':100,'messages':[{'role':'user','content':"
      "'q'}],'temperature':0}", NULL },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'}],"
            "'stop':['a',2]}", NULL, "stop[1]" },

    /* null is absent; a choice without tools is not written */
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'},null],"
            "'tool_choice':'auto','tools':null,'temperature':null,'stop':"
            "null,'seed':null,'stream':false}",
      NULL, "messages[1]" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'}],"
            "'tool_choice':'auto','tools':null,'temperature':null,'stop':"
            "null,'seed':null,'stream':false,'tools':[]}",
      "{'model':'M','max_tokens':100,'messages':[{'role':'user','content':"
      "'q'}]}", NULL },

    /* refused: what Messages cannot say */
    { O, A, "{'model':'x','messages':[],'n':2}", NULL, "n" },
    { O, A, "{'model':'x','messages':[],'logprobs':true}", NULL, "logprobs" },
    { O, A, "{'model':'x','messages':[],'top_logprobs':2}", NULL,
      "top_logprobs" },
    { O, A, "{'model':'x','messages':[],'logit_bias':{'1':2}}", NULL,
      "logit_bias" },
    { O, A, "{'model':'x','messages':[],'seed':1}", NULL, "seed" },
    { O, A, "{'model':'x','messages':[],'frequency_penalty':0.5}", NULL,
      "frequency_penalty" },
    { O, A, "{'model':'x','messages':[],'presence_penalty':-1}", NULL,
      "presence_penalty" },
    { O, A, "{'model':'x','messages':[],'response_format':{'type':"
            "'json_object'}}", NULL, "response_format" },
    { O, A, "{'model':'x','messages':[],'response_format':{'type':"
            "'text','x':1}}", NULL, "response_format" },
    { O, A, "{'model':'x','messages':[],'modalities':['text','audio']}",
      NULL, "modalities" },
    { O, A, "{'model':'x','messages':[],'audio':{'voice':'a'}}", NULL,
      "audio" },
    { O, A, "{'model':'x','messages':[],'prediction':{'type':'content'}}",
      NULL, "prediction" },
    { O, A, "{'model':'x','messages':[],'web_search_options':{}}", NULL,
      "web_search_options" },
    { O, A, "{'model':'x','messages':[],'reasoning_effort':'low'}", NULL,
      "reasoning_effort" },
    { O, A, "{'model':'x','messages':[],'service_tier':'flex'}", NULL,
      "service_tier" },
    { O, A, "{'model':'x','messages':[],'metadata':{'a':'b'}}", NULL,
      "metadata" },
    { O, A, "{'model':'x','messages':[],'functions':[]}", NULL,
      "functions" },
    { O, A, "{'model':'x','messages':[],'function_call':'auto'}", NULL,
      "function_call" },
    { O, A, "{'model':'x','messages':[],'Max_Tokens':1}", NULL,
      "Max_Tokens" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'}],"
            "'temperature':1.5}", NULL,
      "temperature" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'}],"
            "'temperature':-0.1}", NULL,
      "temperature" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'}],"
            "'top_p':1.01}", NULL, "top_p" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'}],"
            "'temperature':'1'}", NULL, "temperature" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'}],"
            "'stop':[1]}", NULL, "stop[0]" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'}],"
            "'tools':[{'type':'custom','custom':{'name':'x'}}]}", NULL,
      "tools[0].type" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'}],"
            "'tools':[{'type':'function','function':{'name':'f','x':1}}]}",
      NULL, "tools[0].function.x" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'}],"
            "'tools':[{'type':'function','function':{'name':'f'}}],"
            "'tool_choice':'sometimes'}", NULL, "tool_choice" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q',"
            "'name':'bob'}]}", NULL, "messages[0].name" },
    { O, A, "{'model':'x','messages':[{'role':'function','name':'f',"
            "'content':'q'}]}", NULL, "messages[0].role" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':[{'type':"
            "'text','text':'a'},{'type':'input_audio','input_audio':{}}]}]}",
      NULL, "messages[0].content[1].type" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':[{'type':"
            "'file','file':{'file_id':'f1'}}]}]}", NULL,
      "messages[0].content[0].file.file_id" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':[{'type':"
            "'file','file':{'file_data':'data:text/plain;base64,AA'}}]}]}",
      NULL, "messages[0].content[0].file.file_data" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':[{'type':"
            "'image_url','image_url':{'url':'data:image/bmp;base64,AA'}}]}]}",
      NULL, "messages[0].content[0].image_url.url" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':[{'type':"
            "'image_url','image_url':{'url':'ftp://x'}}]}]}", NULL,
      "messages[0].content[0].image_url.url" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':[{'type':"
            "'image_url','image_url':{'url':'data:image/png,AA'}}]}]}", NULL,
      "messages[0].content[0].image_url.url" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'},{'role':"
            "'assistant','tool_calls':[{'id':'c','type':'function',"
            "'function':{'name':'f','arguments':'[1]'}}]}]}", NULL,
      "messages[1].tool_calls[0].function.arguments" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'},{'role':"
            "'assistant','tool_calls':[{'id':'c','type':'function',"
            "'function':{'name':'f','arguments':'{} x'}}]}]}", NULL,
      "messages[1].tool_calls[0].function.arguments" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'},{'role':"
            "'assistant','tool_calls':[{'type':'function','function':"
            "{'name':'f','arguments':'{}'}}]}]}", NULL,
      "messages[1].tool_calls[0].id" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'},{'role':"
            "'assistant','content':'a','audio':{'id':'x'}}]}", NULL,
      "messages[1].audio" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'},{'role':"
            "'assistant','content':'a','function_call':{'name':'f'}}]}",
      NULL, "messages[1].function_call" },
    { O, A, "{'model':'x','messages':[{'role':'tool','content':'q'}]}", NULL,
      "messages[0].tool_call_id" },
    { O, A, "{'model':'x','messages':[{'role':'system','content':'q'}]}",
      NULL, "messages" },
    { O, A, "{'model':'x','messages':[{'role':'system','content':[{'type':"
            "'image_url','image_url':{'url':'https://x'}}]}]}", NULL,
      "messages[0].content[0].type" },
    { O, A, "{'model':'x','messages':{}}", NULL, "messages" },
    { O, A, "{'model':'x','messages':[{'content':'q'}]}", NULL,
      "messages[0].role" },

    /* tool call ids Anthropic would refuse: named here */
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'},{'role':"
            "'assistant','tool_calls':[{'id':'functions.get_weather:0',"
            "'type':'function','function':{'name':'f','arguments':'{}'}}]}]}",
      NULL, "messages[1].tool_calls[0].id" },
    { O, A, "{'model':'x','messages':[{'role':'user','content':'q'},{'role':"
            "'assistant','tool_calls':[{'id':'','type':'function','function':"
            "{'name':'f','arguments':'{}'}}]}]}", NULL,
      "messages[1].tool_calls[0].id" },
    { O, A, "{'model':'x','messages':[{'role':'tool','tool_call_id':"
            "'call 1','content':'r'}]}", NULL, "messages[0].tool_call_id" },
    { O, A, "{'model':'x','messages':[{'role':'tool','tool_call_id':'',"
            "'content':'r'}]}", NULL, "messages[0].tool_call_id" },
    { O, A, "{'model':'x','messages':[{'role':'tool','tool_call_id':"
            "'toolu_01-A_z9','content':'r'}]}",
      "{'model':'M','max_tokens':100,'messages':[{'role':'user','content':"
      "[{'type':'tool_result','tool_use_id':'toolu_01-A_z9','content':"
      "'r'}]}]}", NULL },
};


/* Messages -> Chat Completions */

static const tx_case_t  msg_cases[] = {

    { A, O, "{'model':'x','max_tokens':5,'system':'S','messages':[{'role':"
            "'user','content':'hi'}]}",
      "{'model':'M','messages':[{'role':'system','content':'S'},{'role':"
      "'user','content':'hi'}],'max_completion_tokens':100}", NULL },

    /* cache_control is not written */
    { A, O, "{'model':'x','max_tokens':5,'system':[{'type':'text','text':"
            "'A','cache_control':{'type':'ephemeral'}},{'type':'text',"
            "'text':'B'}],'messages':[{'role':'user','content':[{'type':"
            "'text','text':'look','cache_control':{'type':'ephemeral'}},"
            "{'type':'image','source':{'type':'base64','media_type':"
            "'image/png','data':'iVBO'}},{'type':'image','source':{'type':"
            "'url','url':'https://e.x/a.jpg'}},{'type':'document','source':"
            "{'type':'base64','media_type':'application/pdf','data':"
            "'JVBE'}}]}]}",
      "{'model':'M','messages':[{'role':'system','content':[{'type':'text',"
      "'text':'A'},{'type':'text','text':'B'}]},{'role':'user','content':"
      "[{'type':'text','text':'look'},{'type':'image_url','image_url':"
      "{'url':'data:image/png;base64,iVBO'}},{'type':'image_url',"
      "'image_url':{'url':'https://e.x/a.jpg'}},{'type':'file','file':"
      "{'filename':'document.pdf','file_data':"
      "'data:application/pdf;base64,JVBE'}}]}],'max_completion_tokens':"
      "100}", NULL },

    /*
     * Tool results before the rest of their user message; a result's text
     * blocks joined; is_error not written; tool_use alone has content null.
     */
    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'user',"
            "'content':'q'},{'role':'assistant','content':[{'type':'text',"
            "'text':'let '},{'type':'text','text':'me'},{'type':'tool_use',"
            "'id':'toolu_1','name':'f','input':{'a':[1,2],'b':'\\u00e9'}},"
            "{'type':'tool_use','id':'toolu_2','name':'g','input':{}}]},"
            "{'role':'user','content':[{'type':'text','text':'after'},"
            "{'type':'tool_result','tool_use_id':'toolu_1','content':'r1'},"
            "{'type':'tool_result','tool_use_id':'toolu_2','is_error':true,"
            "'content':[{'type':'text','text':'x'},{'type':'text','text':"
            "'y'}]}]},{'role':'assistant','content':[{'type':'tool_use',"
            "'id':'toolu_3','name':'f','input':{}}]},{'role':'user',"
            "'content':[{'type':'tool_result','tool_use_id':'toolu_3'}]},"
            "{'role':'assistant','content':[]}],"
            "'tools':[{'name':'f','description':'F','input_schema':{'type':"
            "'object'}},{'type':'custom','name':'g','input_schema':{'type':"
            "'object'},'cache_control':{'type':'ephemeral'}}],'tool_choice':"
            "{'type':'any','disable_parallel_tool_use':true},"
            "'stop_sequences':['a','b','c','d'],'temperature':1,'top_p':0.5,"
            "'metadata':{'user_id':'u'},'stream':true,'thinking':{'type':"
            "'disabled'},'service_tier':'auto'}",
      "{'model':'M','messages':[{'role':'user','content':'q'},{'role':"
      "'assistant','content':'let me','tool_calls':[{'id':'toolu_1','type':"
      "'function','function':{'name':'f','arguments':"
      "'{\\'a\\':[1,2],\\'b\\':\\'\xc3\xa9\\'}'}},{'id':'toolu_2','type':"
      "'function','function':{'name':'g','arguments':'{}'}}]},{'role':"
      "'tool','tool_call_id':'toolu_1','content':'r1'},{'role':'tool',"
      "'tool_call_id':'toolu_2','content':'x\\ny'},{'role':'user','content':"
      "[{'type':'text','text':'after'}]},{'role':'assistant','content':null,"
      "'tool_calls':[{'id':'toolu_3','type':'function','function':{'name':"
      "'f','arguments':'{}'}}]},{'role':'tool','tool_call_id':'toolu_3',"
      "'content':''},{'role':'assistant','content':''}],"
      "'max_completion_tokens':100,'tools':[{'type':"
      "'function','function':{'name':'f','description':'F','parameters':"
      "{'type':'object'}}},{'type':'function','function':{'name':'g',"
      "'parameters':{'type':'object'}}}],'tool_choice':'required',"
      "'parallel_tool_calls':false,'stop':['a','b','c','d'],'temperature':"
      "1,'top_p':0.5,'user':'u','stream':true,'stream_options':"
      "{'include_usage':true}}", NULL },

    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'user',"
            "'content':'q'}],'tools':[{'name':'f','input_schema':{'type':"
            "'object'}}],'tool_choice':{'type':'tool','name':'f'}}",
      "{'model':'M','messages':[{'role':'user','content':'q'}],"
      "'max_completion_tokens':100,'tools':[{'type':'function','function':"
      "{'name':'f','parameters':{'type':'object'}}}],'tool_choice':{'type':"
      "'function','function':{'name':'f'}}}", NULL },
    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'user',"
            "'content':'q'}],'tools':[{'name':'f','input_schema':{'type':"
            "'object'}}],'tool_choice':{'type':'none'}}",
      "{'model':'M','messages':[{'role':'user','content':'q'}],"
      "'max_completion_tokens':100,'tools':[{'type':'function','function':"
      "{'name':'f','parameters':{'type':'object'}}}],'tool_choice':'none'}",
      NULL },
    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'user',"
            "'content':'q'}],'tools':[{'name':'f','input_schema':{'type':"
            "'object'}}],'tool_choice':{'type':'auto'}}",
      "{'model':'M','messages':[{'role':'user','content':'q'}],"
      "'max_completion_tokens':100,'tools':[{'type':'function','function':"
      "{'name':'f','parameters':{'type':'object'}}}],'tool_choice':'auto'}",
      NULL },

    /* no system message of no parts */
    { A, O, "{'model':'x','max_tokens':5,'system':[],'messages':[{'role':"
            "'user','content':[]},{'role':'user','content':'q'}]}",
      "{'model':'M','messages':[{'role':'user','content':'q'}],"
      "'max_completion_tokens':100}", NULL },

    /* refused */
    { A, O, "{'model':'x','max_tokens':5,'messages':[],'top_k':2}", NULL,
      "top_k" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[],'thinking':{'type':"
            "'enabled','budget_tokens':100}}", NULL, "thinking" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[],'service_tier':"
            "'standard_only'}", NULL, "service_tier" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[],'mcp_servers':[]}",
      NULL, "mcp_servers" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[],'container':'c'}",
      NULL, "container" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[],'stop_sequences':"
            "['a','b','c','d','e']}", NULL, "stop_sequences" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[],'temperature':1.1}",
      NULL, "temperature" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[],'metadata':"
            "{'user_id':'u','x':1}}", NULL, "metadata.x" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[],'tools':[{'type':"
            "'web_search_20250305','name':'web_search'}]}", NULL,
      "tools[0].type" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'user',"
            "'content':'q'},{'role':'assistant','content':[{'type':"
            "'thinking','thinking':'hm','signature':'s'}]}]}", NULL,
      "messages[1].content[0].type" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'user',"
            "'content':'q'},{'role':'assistant','content':[{'type':'text',"
            "'text':'a'},{'type':'redacted_thinking','data':'s'}]}]}", NULL,
      "messages[1].content[1].type" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'user',"
            "'content':'q'},{'role':'assistant','content':[{'type':"
            "'server_tool_use','id':'s','name':'web_search','input':{}}]}]}",
      NULL, "messages[1].content[0].type" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'user',"
            "'content':[{'type':'web_search_tool_result','tool_use_id':'s',"
            "'content':[]}]}]}", NULL, "messages[0].content[0].type" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'user',"
            "'content':[{'type':'document','source':{'type':'url','url':"
            "'https://x/a.pdf'}}]}]}", NULL,
      "messages[0].content[0].source.type" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'user',"
            "'content':[{'type':'document','source':{'type':'text',"
            "'media_type':'text/plain','data':'AA'}}]}]}", NULL,
      "messages[0].content[0].source.type" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'user',"
            "'content':[{'type':'image','source':{'type':'file','file_id':"
            "'f'}}]}]}", NULL, "messages[0].content[0].source.type" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'user',"
            "'content':[{'type':'tool_result','tool_use_id':'t','content':"
            "[{'type':'text','text':'a'},{'type':'image','source':{'type':"
            "'base64','media_type':'image/png','data':'AA'}}]}]}]}", NULL,
      "messages[0].content[0].content[1].type" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'user',"
            "'content':[{'type':'text','text':'a','citations':[]}]}]}", NULL,
      "messages[0].content[0].citations" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'user',"
            "'content':[{'type':'tool_use','id':'a','name':'b','input':{}}]}"
            "]}", NULL, "messages[0].content[0].type" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'system',"
            "'content':'q'}]}", NULL, "messages[0].role" },
    { A, O, "{'model':'x','max_tokens':5,'messages':[{'role':'user',"
            "'content':'q'},{'role':'assistant','content':[{'type':"
            "'tool_use','id':'a','name':'b','input':[1]}]}]}", NULL,
      "messages[1].content[0].input" },
};


/* Responses -> Chat Completions, -> Messages */

#define RESP_ITEMS                                                            \
    "{'model':'x','input':[{'role':'user','content':[{'type':'input_text',"  \
    "'text':'look'},{'type':'input_image','image_url':"                       \
    "'data:image/png;base64,iVBO','detail':'auto'},{'type':'input_file',"     \
    "'filename':'a.pdf','file_data':'data:application/pdf;base64,JVBE'}]},"   \
    "{'type':'message','role':'assistant','id':'msg_1','status':"             \
    "'completed','content':[{'type':'output_text','text':'ok',"               \
    "'annotations':[]}]},{'type':'function_call','call_id':'call_1','name':"  \
    "'f','arguments':'{\\'a\\':1}','id':'fc_1','status':'completed'},"        \
    "{'type':'function_call','call_id':'call_2','name':'g','arguments':"      \
    "'{}'},{'type':'function_call_output','call_id':'call_1','output':"       \
    "'r1'},{'type':'function_call_output','call_id':'call_2','output':"       \
    "[{'type':'input_text','text':'r2'}]},{'type':'function_call',"           \
    "'call_id':'call_3','name':'f','arguments':'{}'},{'type':"                \
    "'function_call_output','call_id':'call_3','output':'r3'},{'role':"       \
    "'developer','content':'D'}],'tools':[{'type':'function','name':'f',"     \
    "'description':'F','parameters':{'type':'object'},'strict':true},"        \
    "{'type':'function','name':'g'}],'tool_choice':{'type':'function',"       \
    "'name':'f'},'parallel_tool_calls':false,'temperature':0.3,'top_p':1,"    \
    "'user':'u','stream':true,'store':true}"

static const tx_case_t  resp_cases[] = {

    { R, O, "{'model':'x','instructions':'I','input':'hi',"
            "'max_output_tokens':9,'store':false,'text':{'format':{'type':"
            "'text'}},'include':[],'truncation':'disabled','background':"
            "false,'service_tier':'auto'}",
      "{'model':'M','messages':[{'role':'system','content':'I'},{'role':"
      "'user','content':'hi'}],'max_completion_tokens':100}", NULL },

    { R, O, RESP_ITEMS,
      "{'model':'M','messages':[{'role':'user','content':[{'type':'text',"
      "'text':'look'},{'type':'image_url','image_url':{'url':"
      "'data:image/png;base64,iVBO','detail':'auto'}},{'type':'file',"
      "'file':{'filename':"
      "'a.pdf','file_data':'data:application/pdf;base64,JVBE'}}]},{'role':"
      "'assistant','content':[{'type':'text','text':'ok'}],'tool_calls':"
      "[{'id':'call_1','type':'function','function':{'name':'f',"
      "'arguments':'{\\'a\\':1}'}},{'id':'call_2','type':'function',"
      "'function':{'name':'g','arguments':'{}'}}]},{'role':'tool',"
      "'tool_call_id':'call_1','content':'r1'},{'role':'tool',"
      "'tool_call_id':'call_2','content':[{'type':'text','text':'r2'}]},"
      "{'role':'assistant','content':null,'tool_calls':[{'id':'call_3',"
      "'type':'function','function':{'name':'f','arguments':'{}'}}]},"
      "{'role':'tool','tool_call_id':'call_3','content':'r3'},{'role':"
      "'developer','content':'D'}],'max_completion_tokens':100,'tools':"
      "[{'type':'function','function':{'name':'f','description':'F',"
      "'parameters':{'type':'object'},'strict':true}},{'type':'function',"
      "'function':{'name':'g','strict':true}}],'tool_choice':{'type':"
      "'function',"
      "'function':{'name':'f'}},'parallel_tool_calls':false,'temperature':"
      "0.3,'top_p':1,'user':'u','stream':true,'stream_options':"
      "{'include_usage':true}}", NULL },

    { R, A, RESP_ITEMS,
      "{'model':'M','max_tokens':100,'system':'D','messages':[{'role':"
      "'user','content':[{'type':'text','text':'look'},{'type':'image',"
      "'source':{'type':'base64','media_type':'image/png','data':'iVBO'}},"
      "{'type':'document','source':{'type':'base64','media_type':"
      "'application/pdf','data':'JVBE'}}]},{'role':'assistant','content':"
      "[{'type':'text','text':'ok'},{'type':'tool_use','id':'call_1','name':"
      "'f','input':{'a':1}},{'type':'tool_use','id':'call_2','name':'g',"
      "'input':{}}]},{'role':'user','content':[{'type':'tool_result',"
      "'tool_use_id':'call_1','content':'r1'},{'type':'tool_result',"
      "'tool_use_id':'call_2','content':[{'type':'text','text':'r2'}]}]},"
      "{'role':'assistant','content':[{'type':'tool_use','id':'call_3',"
      "'name':'f','input':{}}]},{'role':'user','content':[{'type':"
      "'tool_result','tool_use_id':'call_3','content':'r3'}]}],'tools':"
      "[{'name':'f','description':'F','input_schema':{'type':'object'}},"
      "{'name':'g','input_schema':{'type':'object','properties':{}}}],"
      "'tool_choice':{'type':'tool','name':'f',"
      "'disable_parallel_tool_use':true},'temperature':0.3,'top_p':1,"
      "'metadata':{'user_id':'u'},'stream':true}", NULL },

    { R, A, "{'model':'x','instructions':'I','input':'hi','tools':[{'type':"
            "'function','name':'f'}],'tool_choice':'required'}",
      "{'model':'M','max_tokens':100,'system':'I','messages':[{'role':"
      "'user','content':'hi'}],'tools':[{'name':'f','input_schema':{'type':"
      "'object','properties':{}}}],'tool_choice':{'type':'any'}}", NULL },

    /* Chat's range is wider */
    { R, O, "{'model':'x','input':'q','temperature':1.5}",
      "{'model':'M','messages':[{'role':'user','content':'q'}],"
      "'max_completion_tokens':100,'temperature':1.5}", NULL },

    /* refused */
    { R, O, "{'model':'x','input':'q','reasoning':{'effort':'low'}}", NULL,
      "reasoning" },
    { R, O, "{'model':'x','input':'q','text':{'format':{'type':"
            "'json_schema'}}}", NULL, "text.format" },
    { R, O, "{'model':'x','input':'q','text':{'verbosity':'low'}}", NULL,
      "text.verbosity" },
    { R, O, "{'model':'x','input':'q','include':['x']}", NULL, "include" },
    { R, O, "{'model':'x','input':'q','previous_response_id':'r'}", NULL,
      "previous_response_id" },
    { R, O, "{'model':'x','input':'q','conversation':'c'}", NULL,
      "conversation" },
    { R, O, "{'model':'x','input':'q','prompt':{'id':'p'}}", NULL,
      "prompt" },
    { R, O, "{'model':'x','input':'q','truncation':'auto'}", NULL,
      "truncation" },
    { R, O, "{'model':'x','input':'q','background':true}", NULL,
      "background" },
    { R, O, "{'model':'x','input':'q','metadata':{}}", NULL, "metadata" },
    { R, O, "{'model':'x','input':'q','tools':[{'type':'web_search'}]}",
      NULL, "tools[0].type" },
    { R, O, "{'model':'x','input':'q','tools':[{'type':'function','name':"
            "'f'}],'tool_choice':{'type':'file_search'}}", NULL,
      "tool_choice" },
    { R, O, "{'model':'x','input':[{'type':'reasoning','id':'r','summary':"
            "[]}]}", NULL, "input[0].type" },
    { R, O, "{'model':'x','input':[{'type':'item_reference','id':'r'}]}",
      NULL, "input[0].type" },
    { R, O, "{'model':'x','input':[{'role':'user','content':[{'type':"
            "'input_image','file_id':'f'}]}]}", NULL,
      "input[0].content[0].file_id" },
    { R, O, "{'model':'x','input':[{'role':'user','content':[{'type':"
            "'input_image','detail':'auto'}]}]}", NULL,
      "input[0].content[0].image_url" },
    { R, O, "{'model':'x','input':[{'role':'user','content':[{'type':"
            "'input_file','file_id':'f'}]}]}", NULL,
      "input[0].content[0].file_id" },
    { R, O, "{'model':'x','input':[{'role':'assistant','content':[{'type':"
            "'input_image','image_url':'https://x'}]}]}", NULL,
      "input[0].content[0].type" },
    { R, O, "{'model':'x','input':[{'role':'tool','content':'x'}]}", NULL,
      "input[0].role" },
    { R, O, "{'model':'x','input':[{'type':'function_call_output',"
            "'call_id':'c','output':[{'type':'input_image','image_url':"
            "'https://x'}]}]}", NULL, "input[0].output[0].type" },
    { R, A, "{'model':'x','input':[{'role':'user','content':'q'},{'type':"
            "'function_call','call_id':'c','name':'f','arguments':'nope'}]}",
      NULL, "input[1].arguments" },
    { R, A, "{'model':'x','input':'q','temperature':1.5}", NULL,
      "temperature" },

    /* what Messages takes of images and files, named in Responses' terms */
    { R, A, "{'model':'x','input':[{'role':'user','content':[{'type':"
            "'input_image','image_url':'ftp://x'}]}]}", NULL,
      "input[0].content[0].image_url" },
    { R, A, "{'model':'x','input':[{'role':'user','content':[{'type':"
            "'input_image','image_url':'data:image/tiff;base64,AA'}]}]}",
      NULL, "input[0].content[0].image_url" },
    { R, A, "{'model':'x','input':[{'role':'user','content':[{'type':"
            "'input_file','file_data':'data:text/csv;base64,AA'}]}]}",
      NULL, "input[0].content[0].file_data" },
    { R, A, "{'model':'x','input':[{'role':'user','content':[{'type':"
            "'input_file','file_data':'JVBE'}]}]}",
      NULL, "input[0].content[0].file_data" },
    { R, A, "{'model':'x','input':[{'role':'user','content':[{'type':"
            "'input_image','image_url':'https://x/a.png'},{'type':"
            "'input_image','image_url':'data:image/gif;base64,R0lG'}]}]}",
      "{'model':'M','max_tokens':100,'messages':[{'role':'user','content':"
      "[{'type':'image','source':{'type':'url','url':'https://x/a.png'}},"
      "{'type':'image','source':{'type':'base64','media_type':'image/gif',"
      "'data':'R0lG'}}]}]}", NULL },

    /* Chat takes any: the backend judges */
    { R, O, "{'model':'x','input':[{'role':'user','content':[{'type':"
            "'input_image','image_url':'ftp://x'}]}]}",
      "{'model':'M','messages':[{'role':'user','content':[{'type':"
      "'image_url','image_url':{'url':'ftp://x'}}]}],"
      "'max_completion_tokens':100}", NULL },

    /* an image's detail: Chat's too (it sets the cost), Messages' none */
    { R, O, "{'model':'x','input':[{'role':'user','content':[{'type':"
            "'input_image','image_url':'https://a/b.png','detail':'low'}]}]}",
      "{'model':'M','messages':[{'role':'user','content':[{'type':"
      "'image_url','image_url':{'url':'https://a/b.png','detail':'low'}}]}],"
      "'max_completion_tokens':100}", NULL },
    { R, O, "{'model':'x','input':[{'role':'user','content':[{'type':"
            "'input_image','image_url':'https://a/b.png','detail':'tiny'}]}]}",
      NULL, "input[0].content[0].detail" },
    { R, O, "{'model':'x','input':[{'role':'user','content':[{'type':"
            "'input_image','image_url':'https://a/b.png','detail':1}]}]}",
      NULL, "input[0].content[0].detail" },
    { R, A, "{'model':'x','input':[{'role':'user','content':[{'type':"
            "'input_image','image_url':'https://a/b.png','detail':'low'}]}]}",
      "{'model':'M','max_tokens':100,'messages':[{'role':'user','content':"
      "[{'type':'image','source':{'type':'url','url':'https://a/b.png'}}]}]}",
      NULL },

    /* functions: strict unless said not, as Responses has it */
    { R, O, "{'model':'x','input':'q','tools':[{'type':'function','name':"
            "'f','strict':false},{'type':'function','name':'g'}]}",
      "{'model':'M','messages':[{'role':'user','content':'q'}],"
      "'max_completion_tokens':100,'tools':[{'type':'function','function':"
      "{'name':'f','strict':false}},{'type':'function','function':{'name':"
      "'g','strict':true}}]}", NULL },
    { R, A, "{'model':'x','input':'q','tools':[{'type':'function','name':"
            "'g'}]}",
      "{'model':'M','max_tokens':100,'messages':[{'role':'user','content':"
      "'q'}],'tools':[{'name':'g','input_schema':{'type':'object',"
      "'properties':{}}}]}", NULL },

    /* call ids: Messages' rule, named in Responses' terms; Chat any */
    { R, A, "{'model':'x','input':[{'role':'user','content':'q'},{'type':"
            "'function_call','call_id':'functions.f:0','name':'f',"
            "'arguments':'{}'}]}", NULL, "input[1].call_id" },
    { R, A, "{'model':'x','input':[{'type':'function_call_output',"
            "'call_id':'c/1','output':'r'}]}", NULL, "input[0].call_id" },
    { R, O, "{'model':'x','input':[{'type':'function_call_output',"
            "'call_id':'c/1','output':'r'}]}",
      "{'model':'M','messages':[{'role':'tool','tool_call_id':'c/1',"
      "'content':'r'}],'max_completion_tokens':100}", NULL },
};


/* ' for ", into a buffer of the caller's */

static char *
tx_q(const char *s)
{
    char    *p, *b;
    size_t   n;

    n = strlen(s);
    b = malloc(n + 1);

    if (b == NULL) {
        abort();
    }

    memcpy(b, s, n + 1);

    for (p = b; *p; p++) {
        if (*p == '\'') {
            *p = '"';
        }
    }

    return b;
}


static llm_tx_request_conf_t
tx_conf(llm_api_e from, llm_api_e to)
{
    llm_tx_request_conf_t  cf;

    memset(&cf, 0, sizeof(llm_tx_request_conf_t));

    cf.from = from;
    cf.to = to;
    cf.model = "M";
    cf.model_len = 1;
    cf.max_tokens = 100;

    return cf;
}


static void
tx_printable(const char *s, const char *what)
{
    size_t  i;

    for (i = 0; s[i]; i++) {
        if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\') {
            break;
        }
    }

    tap_ok(s[i] == '\0', "%s is printable, without quotes", what);
}


static void
tx_cases(const tx_case_t *c, size_t n, const char *set)
{
    int                    rc;
    char                  *body, *want;
    size_t                 i;
    llm_tx_request_t       out;
    llm_tx_request_conf_t  cf;

    for (i = 0; i < n; i++) {
        cf = tx_conf(c[i].from, c[i].to);
        body = tx_q(c[i].body);

        rc = llm_tx_request(&cf, body, strlen(body), &out);

        if (c[i].want) {
            want = tx_q(c[i].want);

            if (tap_ok(rc == 0, "%s %zu: translated", set, i)) {
                tap_is_str(out.body, want, "%s %zu: the body", set, i);
                tap_is(out.len, strlen(out.body), "%s %zu: its length",
                       set, i);
                tap_is(out.stream, strstr(want, "\"stream\":true") != NULL,
                       "%s %zu: stream", set, i);

            } else {
                printf("#   %d %s: %s\n", rc, out.param, out.message);
            }

            cJSON_free(out.body);
            free(want);

        } else {
            tap_is(rc, -1, "%s %zu: refused", set, i);
            tap_is_str(out.param, c[i].param, "%s %zu: names %s", set, i,
                       c[i].param);
            tap_ok(out.message[0] != '\0' && out.body == NULL,
                   "%s %zu: a message, no body", set, i);
            cJSON_free(out.body);
        }

        free(body);
    }
}


/* the messages a refusal gives: as the header says */

static void
tx_messages(void)
{
    int                    rc;
    char                  *body;
    llm_tx_request_t       out;
    llm_tx_request_conf_t  cf;

    cf = tx_conf(O, A);
    body = tx_q("{'model':'x','messages':[],'logprobs':true}");
    rc = llm_tx_request(&cf, body, strlen(body), &out);
    tap_is(rc, -1, "logprobs refused");
    tap_is_str(out.message, "'logprobs' cannot be sent to a backend of "
               "another dialect", "the message names it");
    free(body);

    /* a member's name with a quote, a backslash, a control byte, UTF-8 */
    body = tx_q("{'model':'x','messages':[],'a\\'b\\\\c\\u0001d\xc3\xa9':1}");
    rc = llm_tx_request(&cf, body, strlen(body), &out);
    tap_is(rc, -1, "a strange member refused");
    tap_is_str(out.param, "a?b?c?d??", "its name made printable");
    tx_printable(out.param, "the param");
    tx_printable(out.message, "the message");
    free(body);

    /* a role of the client's in the message */
    body = tx_q("{'model':'x','messages':[{'role':'\\'\\\\'}]}");
    rc = llm_tx_request(&cf, body, strlen(body), &out);
    tap_is(rc, -1, "a strange role refused");
    tap_is_str(out.param, "messages[0].role", "the role named");
    tx_printable(out.message, "the message");
    free(body);

    /* a path longer than the room for it is cut, not overrun */
    body = tx_q("{'model':'x','messages':[{'role':'user','content':'q'}],"
                "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx':1}");
    rc = llm_tx_request(&cf, body, strlen(body), &out);
    tap_is(rc, -1, "a long member refused");
    tap_is(strlen(out.param), LLM_TX_PARAM_MAX - 1, "its name cut to fit");
    tap_ok(strlen(out.message) < LLM_TX_MESSAGE_MAX, "the message fits");
    free(body);
}


/* a tool call id's length: Anthropic takes 256 bytes */

static void
tx_tool_id_len(void)
{
    int                    rc;
    char                  *body;
    size_t                 n;
    llm_tx_request_t       out;
    llm_tx_request_conf_t  cf;

    cf = tx_conf(O, A);
    body = malloc(1024);

    for (n = 256; n <= 257; n++) {
        sprintf(body, "{\"model\":\"x\",\"messages\":[{\"role\":\"tool\","
                "\"tool_call_id\":\"%0*d\",\"content\":\"r\"}]}",
                (int) n, 0);
        rc = llm_tx_request(&cf, body, strlen(body), &out);

        if (n == 256) {
            tap_ok(rc == 0, "a tool call id of 256 bytes passes");
            cJSON_free(out.body);

        } else {
            tap_ok(rc == -1
                   && strcmp(out.param, "messages[0].tool_call_id") == 0
                   && strstr(out.message, "1 to 256 letters") != NULL,
                   "one of 257 is refused, naming it: %s", out.message);
        }
    }

    free(body);
}


/* the pairs; what is not JSON */

static void
tx_pairs(void)
{
    int                    rc;
    llm_tx_request_t       out;
    llm_tx_request_conf_t  cf;

    tap_ok(llm_tx_request_supported(O, A), "chat to messages");
    tap_ok(llm_tx_request_supported(A, O), "messages to chat");
    tap_ok(llm_tx_request_supported(R, O), "responses to chat");
    tap_ok(llm_tx_request_supported(R, A), "responses to messages");
    tap_ok(!llm_tx_request_supported(O, O), "not chat to chat");
    tap_ok(!llm_tx_request_supported(A, A), "not messages to messages");
    tap_ok(!llm_tx_request_supported(O, R), "not to responses");
    tap_ok(!llm_tx_request_supported(LLM_API_EMBEDDINGS, A),
           "not embeddings");
    tap_ok(!llm_tx_request_supported(LLM_API_COUNT_TOKENS, O),
           "not a count");

    cf = tx_conf(O, O);
    rc = llm_tx_request(&cf, "{}", 2, &out);
    tap_ok(rc == -1 && out.body == NULL, "an unsupported pair is refused");

    cf = tx_conf(O, A);
    tap_is(llm_tx_request(&cf, "nope", 4, &out), -2, "not JSON");
    tap_is(llm_tx_request(&cf, "[1]", 3, &out), -2, "not an object");
    tap_is(llm_tx_request(&cf, "{\"a\":", 5, &out), -2, "cut short");
    tap_is(llm_tx_request(&cf, "", 0, &out), -2, "empty");
    tap_ok(out.body == NULL, "no body");
}


/* the conf's output limit and its name; the model: the conf's, or not */

static void
tx_conf_cases(void)
{
    int                    rc;
    char                  *body;
    llm_tx_request_t       out;
    llm_tx_request_conf_t  cf;

    cf = tx_conf(A, O);
    cf.chat_max_tokens = 1;
    cf.max_tokens = 4096;
    cf.model = "gpt-4o-mini and more";
    cf.model_len = 11;
    body = tx_q("{'model':'x','max_tokens':5,'messages':[{'role':'user',"
                "'content':'q'}]}");
    rc = llm_tx_request(&cf, body, strlen(body), &out);
    tap_is(rc, 0, "translated");
    tap_is_str(out.body, "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":"
               "\"user\",\"content\":\"q\"}],\"max_tokens\":4096}",
               "max_tokens for chat_max_tokens, the model's length");
    cJSON_free(out.body);
    free(body);

    cf = tx_conf(O, A);
    cf.model = NULL;
    cf.max_tokens = 1;
    body = tx_q("{'model':'claude-x','messages':[{'role':'user','content':"
                "'q'}]}");
    rc = llm_tx_request(&cf, body, strlen(body), &out);
    tap_is(rc, 0, "translated");
    tap_is_str(out.body, "{\"model\":\"claude-x\",\"max_tokens\":1,"
               "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
               "the client's model without one in the conf");
    cJSON_free(out.body);
    free(body);
}


static cJSON *
tx_parsed(llm_api_e from, llm_api_e to, const char *body)
{
    int                    rc;
    cJSON                 *root;
    llm_tx_request_t       out;
    llm_tx_request_conf_t  cf;

    cf = tx_conf(from, to);
    rc = llm_tx_request(&cf, body, strlen(body), &out);

    if (rc != 0) {
        printf("#   %d %s: %s\n", rc, out.param, out.message);
        return NULL;
    }

    root = cJSON_Parse(out.body);
    cJSON_free(out.body);

    return root;
}


/* Chat -> Messages -> Chat gives the same tool calls and results */

static void
tx_round_trip(void)
{
    char   *body, *mid;
    cJSON  *in, *m, *back;

    body = tx_q("{'model':'M','messages':[{'role':'user','content':'q'},"
                "{'role':'assistant','content':null,'tool_calls':[{'id':"
                "'call_Ab-1_x','type':'function','function':{'name':'f',"
                "'arguments':'{\\'city\\':\\'Paris\\',\\'n\\':[1,2.5,"
                "{\\'d\\':true}]}'}},{'id':'toolu_01X','type':'function',"
                "'function':{'name':'g','arguments':'{}'}}]},{'role':'tool',"
                "'tool_call_id':'call_Ab-1_x','content':'sunny'},{'role':"
                "'tool','tool_call_id':'toolu_01X','content':'ok'}],"
                "'max_completion_tokens':100}");

    in = cJSON_Parse(body);
    m = tx_parsed(O, A, body);
    mid = m ? cJSON_PrintUnformatted(m) : NULL;
    back = mid ? tx_parsed(A, O, mid) : NULL;

    tap_ok(back != NULL, "round trip translated");

    if (back) {
        tap_ok(cJSON_Compare(in, back, 1), "the same Chat body comes back");
        tap_ok(cJSON_Compare(
                   cJSON_GetObjectItem(cJSON_GetArrayItem(
                       cJSON_GetObjectItem(in, "messages"), 1),
                       "tool_calls"),
                   cJSON_GetObjectItem(cJSON_GetArrayItem(
                       cJSON_GetObjectItem(back, "messages"), 1),
                       "tool_calls"), 1),
               "the same tool_calls");
    }

    cJSON_Delete(in);
    cJSON_Delete(m);
    cJSON_Delete(back);
    cJSON_free(mid);
    free(body);
}


/* escapes and non-ASCII text pass as the same strings */

static void
tx_unicode(void)
{
    char   *body;
    cJSON  *out, *v;

    body = tx_q("{'model':'x','messages':[{'role':'system','content':"
                "'\\u00e9\\u4e2d\\ud83d\\ude00 \\'q\\' \\\\ \\/ \\b\\f\\n\\r"
                "\\t \\u0001'},{'role':'user','content':'\xe2\x82\xac'}]}");
    out = tx_parsed(O, A, body);
    v = cJSON_GetObjectItem(out, "system");

    tap_ok(cJSON_IsString(v)
           && strcmp(v->valuestring, "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"
                     " \"q\" \\ / \b\f\n\r\t \x01") == 0,
           "escapes and surrogates read and written back");

    v = cJSON_GetObjectItem(cJSON_GetArrayItem(
            cJSON_GetObjectItem(out, "messages"), 0), "content");
    tap_ok(cJSON_IsString(v) && strcmp(v->valuestring, "\xe2\x82\xac") == 0,
           "UTF-8 passes");

    cJSON_Delete(out);
    free(body);
}


/* a body of megabytes: a long text, many messages, deep tool input */

static void
tx_huge(void)
{
    int                    rc;
    char                  *body, *p;
    size_t                 i, n, cap;
    cJSON                 *root;
    llm_tx_request_t       out;
    llm_tx_request_conf_t  cf;

    n = 8 * 1024 * 1024;
    cap = n + 40 * 20000 + 256;
    body = malloc(cap);

    if (body == NULL) {
        abort();
    }

    p = body;
    p += sprintf(p, "{\"model\":\"x\",\"messages\":[{\"role\":\"user\","
                 "\"content\":\"");
    memset(p, 'a', n);
    p += n;
    p += sprintf(p, "\"}");

    /* 20000 messages, each role twice: merged into 10000 */
    for (i = 0; i < 20000; i++) {
        p += sprintf(p, ",{\"role\":\"%s\",\"content\":\"m\"}",
                     (i / 2) % 2 ? "user" : "assistant");
    }

    p += sprintf(p, "]}");

    cf = tx_conf(O, A);
    rc = llm_tx_request(&cf, body, p - body, &out);
    tap_is(rc, 0, "a huge body translated");

    root = rc == 0 ? cJSON_Parse(out.body) : NULL;

    tap_is(cJSON_GetArraySize(cJSON_GetObjectItem(root, "messages")), 10001,
           "its messages merged by role");
    tap_ok(out.len > n, "its text kept");

    cJSON_Delete(root);
    cJSON_free(out.body);
    free(body);
}

/* allocations through cJSON's hooks, the n-th and later failing */

static long  tx_live;
static long  tx_allocs;
static long  tx_fail_at;


static void *
tx_malloc(size_t size)
{
    void  *p;

    if (tx_fail_at >= 0 && tx_allocs >= tx_fail_at) {
        return NULL;
    }

    p = malloc(size);

    if (p) {
        tx_allocs++;
        tx_live++;
    }

    return p;
}


static void
tx_free(void *p)
{
    if (p) {
        tx_live--;
    }

    free(p);
}


/*
 * Every allocation failing in turn: -2 and nothing left allocated, or a
 * translation.  A call's arguments that cJSON could not parse for want of
 * memory read as not an object: refused, as the header allows.
 */

static void
tx_oom(const tx_case_t *c, const char *what)
{
    int                    rc, bad;
    long                   n;
    char                  *body;
    cJSON_Hooks            hooks;
    llm_tx_request_t       out;
    llm_tx_request_conf_t  cf;

    hooks.malloc_fn = tx_malloc;
    hooks.free_fn = tx_free;
    cJSON_InitHooks(&hooks);

    cf = tx_conf(c->from, c->to);
    body = tx_q(c->body);
    bad = 0;

    for (n = 0; n < 100000; n++) {
        tx_allocs = 0;
        tx_fail_at = n;

        rc = llm_tx_request(&cf, body, strlen(body), &out);

        if (rc == 0) {
            cJSON_free(out.body);
        }

        if (tx_live != 0
            || !(rc == 0 || (rc == -2 && out.body == NULL)
                 || (rc == -1 && strstr(out.param, "arguments"))))
        {
            bad++;
        }

        if (rc == 0 && tx_allocs < n) {
            break;
        }
    }

    tx_fail_at = -1;
    cJSON_InitHooks(NULL);

    tap_ok(bad == 0 && n > 10, "%s: %ld allocations failing in turn, "
           "nothing leaked, no wrong answer", what, n);

    free(body);
}


int
main(void)
{
    tx_cases(chat_cases, sizeof(chat_cases) / sizeof(chat_cases[0]),
             "chat");
    tx_cases(msg_cases, sizeof(msg_cases) / sizeof(msg_cases[0]),
             "messages");
    tx_cases(resp_cases, sizeof(resp_cases) / sizeof(resp_cases[0]),
             "responses");

    tx_messages();
    tx_tool_id_len();
    tx_pairs();
    tx_conf_cases();
    tx_round_trip();
    tx_unicode();
    tx_huge();

    tx_oom(&chat_cases[3], "chat to messages");
    tx_oom(&msg_cases[2], "messages to chat");
    tx_oom(&resp_cases[1], "responses to chat");
    tx_oom(&resp_cases[2], "responses to messages");

    return tap_done();
}
