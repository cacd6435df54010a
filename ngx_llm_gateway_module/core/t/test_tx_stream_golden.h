
/* test_tx_stream --golden, reviewed */


static const char  gold_chat_text_messages[] =
    "event: message_start\ndata: {'type':'message_start','message':{'id':'msg_7d80362b080ad6d8','type':'message','role':'assistant','model':'gpt-4o-2024-08-06','content':[],'stop_reason':null,'stop_sequence':null,'usage':{'input_tokens':90,'output_tokens':0}}}\n\n"
    "event: content_block_start\ndata: {'type':'content_block_start','index':0,'content_block':{'type':'text','text':''}}\n\n"
    "event: content_block_delta\ndata: {'type':'content_block_delta','index':0,'delta':{'type':'text_delta','text':'Hello'}}\n\n"
    "event: content_block_delta\ndata: {'type':'content_block_delta','index':0,'delta':{'type':'text_delta','text':', \\'world\\'\\n caf\303\251'}}\n\n"
    "event: content_block_stop\ndata: {'type':'content_block_stop','index':0}\n\n"
    "event: message_delta\ndata: {'type':'message_delta','delta':{'stop_reason':'end_turn','stop_sequence':null},'usage':{'input_tokens':20,'cache_creation_input_tokens':0,'cache_read_input_tokens':100,'output_tokens':9}}\n\n"
    "event: message_stop\ndata: {'type':'message_stop'}\n\n"
    "";


static const char  gold_chat_tools_messages[] =
    "event: message_start\ndata: {'type':'message_start','message':{'id':'msg_7d80362b080ad6d8','type':'message','role':'assistant','model':'gpt-4o-2024-08-06','content':[],'stop_reason':null,'stop_sequence':null,'usage':{'input_tokens':90,'output_tokens':0}}}\n\n"
    "event: content_block_start\ndata: {'type':'content_block_start','index':0,'content_block':{'type':'tool_use','id':'call_Ab1','name':'get_weather','input':{}}}\n\n"
    "event: content_block_delta\ndata: {'type':'content_block_delta','index':0,'delta':{'type':'input_json_delta','partial_json':'{\\'ci'}}\n\n"
    "event: content_block_delta\ndata: {'type':'content_block_delta','index':0,'delta':{'type':'input_json_delta','partial_json':'ty\\': \\'Par'}}\n\n"
    "event: content_block_delta\ndata: {'type':'content_block_delta','index':0,'delta':{'type':'input_json_delta','partial_json':'is\\'}'}}\n\n"
    "event: content_block_stop\ndata: {'type':'content_block_stop','index':0}\n\n"
    "event: content_block_start\ndata: {'type':'content_block_start','index':1,'content_block':{'type':'tool_use','id':'call_Cd2','name':'get_time','input':{}}}\n\n"
    "event: content_block_delta\ndata: {'type':'content_block_delta','index':1,'delta':{'type':'input_json_delta','partial_json':'{\\'tz\\':'}}\n\n"
    "event: content_block_delta\ndata: {'type':'content_block_delta','index':1,'delta':{'type':'input_json_delta','partial_json':' \\'CET\\'}'}}\n\n"
    "event: content_block_stop\ndata: {'type':'content_block_stop','index':1}\n\n"
    "event: message_delta\ndata: {'type':'message_delta','delta':{'stop_reason':'tool_use','stop_sequence':null},'usage':{'input_tokens':20,'cache_creation_input_tokens':0,'cache_read_input_tokens':100,'output_tokens':9}}\n\n"
    "event: message_stop\ndata: {'type':'message_stop'}\n\n"
    "";


static const char  gold_chat_length_messages[] =
    "event: message_start\ndata: {'type':'message_start','message':{'id':'msg_7d80362b080ad6d8','type':'message','role':'assistant','model':'gpt-4o-2024-08-06','content':[],'stop_reason':null,'stop_sequence':null,'usage':{'input_tokens':90,'output_tokens':0}}}\n\n"
    "event: content_block_start\ndata: {'type':'content_block_start','index':0,'content_block':{'type':'text','text':''}}\n\n"
    "event: content_block_delta\ndata: {'type':'content_block_delta','index':0,'delta':{'type':'text_delta','text':'Once upon'}}\n\n"
    "event: content_block_stop\ndata: {'type':'content_block_stop','index':0}\n\n"
    "event: message_delta\ndata: {'type':'message_delta','delta':{'stop_reason':'max_tokens','stop_sequence':null},'usage':{'input_tokens':20,'cache_creation_input_tokens':0,'cache_read_input_tokens':100,'output_tokens':9}}\n\n"
    "event: message_stop\ndata: {'type':'message_stop'}\n\n"
    "";


static const char  gold_chat_error_messages[] =
    "event: message_start\ndata: {'type':'message_start','message':{'id':'msg_7d80362b080ad6d8','type':'message','role':'assistant','model':'gpt-4o-2024-08-06','content':[],'stop_reason':null,'stop_sequence':null,'usage':{'input_tokens':90,'output_tokens':0}}}\n\n"
    "event: content_block_start\ndata: {'type':'content_block_start','index':0,'content_block':{'type':'text','text':''}}\n\n"
    "event: content_block_delta\ndata: {'type':'content_block_delta','index':0,'delta':{'type':'text_delta','text':'Half'}}\n\n"
    "event: content_block_stop\ndata: {'type':'content_block_stop','index':0}\n\n"
    "event: error\ndata: {'type':'error','error':{'type':'api_error','message':'The server had an error'}}\n\n"
    "";


static const char  gold_chat_text_responses[] =
    "event: response.created\ndata: {'type':'response.created','sequence_number':0,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'gpt-4o-2024-08-06','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.in_progress\ndata: {'type':'response.in_progress','sequence_number':1,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'gpt-4o-2024-08-06','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.output_item.added\ndata: {'type':'response.output_item.added','sequence_number':2,'output_index':0,'item':{'id':'msg_8edb9ab1f0f1a1c3','type':'message','status':'in_progress','role':'assistant','content':[]}}\n\n"
    "event: response.content_part.added\ndata: {'type':'response.content_part.added','sequence_number':3,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'part':{'type':'output_text','text':'','annotations':[]}}\n\n"
    "event: response.output_text.delta\ndata: {'type':'response.output_text.delta','sequence_number':4,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'delta':'Hello','logprobs':[]}\n\n"
    "event: response.output_text.delta\ndata: {'type':'response.output_text.delta','sequence_number':5,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'delta':', \\'world\\'\\n caf\303\251','logprobs':[]}\n\n"
    "event: response.output_text.done\ndata: {'type':'response.output_text.done','sequence_number':6,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'text':'Hello, \\'world\\'\\n caf\303\251','logprobs':[]}\n\n"
    "event: response.content_part.done\ndata: {'type':'response.content_part.done','sequence_number':7,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'part':{'type':'output_text','text':'Hello, \\'world\\'\\n caf\303\251','annotations':[]}}\n\n"
    "event: response.output_item.done\ndata: {'type':'response.output_item.done','sequence_number':8,'output_index':0,'item':{'id':'msg_8edb9ab1f0f1a1c3','type':'message','status':'completed','role':'assistant','content':[{'type':'output_text','text':'Hello, \\'world\\'\\n caf\303\251','annotations':[]}]}}\n\n"
    "event: response.completed\ndata: {'type':'response.completed','sequence_number':9,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'completed','model':'gpt-4o-2024-08-06','output':[{'id':'msg_8edb9ab1f0f1a1c3','type':'message','status':'completed','role':'assistant','content':[{'type':'output_text','text':'Hello, \\'world\\'\\n caf\303\251','annotations':[]}]}],'usage':{'input_tokens':120,'input_tokens_details':{'cached_tokens':100},'output_tokens':9,'output_tokens_details':{'reasoning_tokens':0},'total_tokens':129},'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "";


static const char  gold_chat_tools_responses[] =
    "event: response.created\ndata: {'type':'response.created','sequence_number':0,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'gpt-4o-2024-08-06','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.in_progress\ndata: {'type':'response.in_progress','sequence_number':1,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'gpt-4o-2024-08-06','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.output_item.added\ndata: {'type':'response.output_item.added','sequence_number':2,'output_index':0,'item':{'id':'fc_8edb9ab1f0f1a1c3','type':'function_call','status':'in_progress','arguments':'','call_id':'call_Ab1','name':'get_weather'}}\n\n"
    "event: response.function_call_arguments.delta\ndata: {'type':'response.function_call_arguments.delta','sequence_number':3,'item_id':'fc_8edb9ab1f0f1a1c3','output_index':0,'delta':'{\\'ci'}\n\n"
    "event: response.function_call_arguments.delta\ndata: {'type':'response.function_call_arguments.delta','sequence_number':4,'item_id':'fc_8edb9ab1f0f1a1c3','output_index':0,'delta':'ty\\': \\'Par'}\n\n"
    "event: response.function_call_arguments.delta\ndata: {'type':'response.function_call_arguments.delta','sequence_number':5,'item_id':'fc_8edb9ab1f0f1a1c3','output_index':0,'delta':'is\\'}'}\n\n"
    "event: response.function_call_arguments.done\ndata: {'type':'response.function_call_arguments.done','sequence_number':6,'item_id':'fc_8edb9ab1f0f1a1c3','output_index':0,'name':'get_weather','arguments':'{\\'city\\': \\'Paris\\'}'}\n\n"
    "event: response.output_item.done\ndata: {'type':'response.output_item.done','sequence_number':7,'output_index':0,'item':{'id':'fc_8edb9ab1f0f1a1c3','type':'function_call','status':'completed','arguments':'{\\'city\\': \\'Paris\\'}','call_id':'call_Ab1','name':'get_weather'}}\n\n"
    "event: response.output_item.added\ndata: {'type':'response.output_item.added','sequence_number':8,'output_index':1,'item':{'id':'fc_eee0eea99abbe532','type':'function_call','status':'in_progress','arguments':'','call_id':'call_Cd2','name':'get_time'}}\n\n"
    "event: response.function_call_arguments.delta\ndata: {'type':'response.function_call_arguments.delta','sequence_number':9,'item_id':'fc_eee0eea99abbe532','output_index':1,'delta':'{\\'tz\\':'}\n\n"
    "event: response.function_call_arguments.delta\ndata: {'type':'response.function_call_arguments.delta','sequence_number':10,'item_id':'fc_eee0eea99abbe532','output_index':1,'delta':' \\'CET\\'}'}\n\n"
    "event: response.function_call_arguments.done\ndata: {'type':'response.function_call_arguments.done','sequence_number':11,'item_id':'fc_eee0eea99abbe532','output_index':1,'name':'get_time','arguments':'{\\'tz\\': \\'CET\\'}'}\n\n"
    "event: response.output_item.done\ndata: {'type':'response.output_item.done','sequence_number':12,'output_index':1,'item':{'id':'fc_eee0eea99abbe532','type':'function_call','status':'completed','arguments':'{\\'tz\\': \\'CET\\'}','call_id':'call_Cd2','name':'get_time'}}\n\n"
    "event: response.completed\ndata: {'type':'response.completed','sequence_number':13,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'completed','model':'gpt-4o-2024-08-06','output':[{'id':'fc_8edb9ab1f0f1a1c3','type':'function_call','status':'completed','arguments':'{\\'city\\': \\'Paris\\'}','call_id':'call_Ab1','name':'get_weather'},{'id':'fc_eee0eea99abbe532','type':'function_call','status':'completed','arguments':'{\\'tz\\': \\'CET\\'}','call_id':'call_Cd2','name':'get_time'}],'usage':{'input_tokens':120,'input_tokens_details':{'cached_tokens':100},'output_tokens':9,'output_tokens_details':{'reasoning_tokens':0},'total_tokens':129},'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "";


static const char  gold_chat_length_responses[] =
    "event: response.created\ndata: {'type':'response.created','sequence_number':0,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'gpt-4o-2024-08-06','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.in_progress\ndata: {'type':'response.in_progress','sequence_number':1,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'gpt-4o-2024-08-06','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.output_item.added\ndata: {'type':'response.output_item.added','sequence_number':2,'output_index':0,'item':{'id':'msg_8edb9ab1f0f1a1c3','type':'message','status':'in_progress','role':'assistant','content':[]}}\n\n"
    "event: response.content_part.added\ndata: {'type':'response.content_part.added','sequence_number':3,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'part':{'type':'output_text','text':'','annotations':[]}}\n\n"
    "event: response.output_text.delta\ndata: {'type':'response.output_text.delta','sequence_number':4,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'delta':'Once upon','logprobs':[]}\n\n"
    "event: response.output_text.done\ndata: {'type':'response.output_text.done','sequence_number':5,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'text':'Once upon','logprobs':[]}\n\n"
    "event: response.content_part.done\ndata: {'type':'response.content_part.done','sequence_number':6,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'part':{'type':'output_text','text':'Once upon','annotations':[]}}\n\n"
    "event: response.output_item.done\ndata: {'type':'response.output_item.done','sequence_number':7,'output_index':0,'item':{'id':'msg_8edb9ab1f0f1a1c3','type':'message','status':'incomplete','role':'assistant','content':[{'type':'output_text','text':'Once upon','annotations':[]}]}}\n\n"
    "event: response.incomplete\ndata: {'type':'response.incomplete','sequence_number':8,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'incomplete','model':'gpt-4o-2024-08-06','output':[{'id':'msg_8edb9ab1f0f1a1c3','type':'message','status':'incomplete','role':'assistant','content':[{'type':'output_text','text':'Once upon','annotations':[]}]}],'usage':{'input_tokens':120,'input_tokens_details':{'cached_tokens':100},'output_tokens':9,'output_tokens_details':{'reasoning_tokens':0},'total_tokens':129},'error':null,'incomplete_details':{'reason':'max_output_tokens'},'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "";


static const char  gold_chat_error_responses[] =
    "event: response.created\ndata: {'type':'response.created','sequence_number':0,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'gpt-4o-2024-08-06','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.in_progress\ndata: {'type':'response.in_progress','sequence_number':1,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'gpt-4o-2024-08-06','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.output_item.added\ndata: {'type':'response.output_item.added','sequence_number':2,'output_index':0,'item':{'id':'msg_8edb9ab1f0f1a1c3','type':'message','status':'in_progress','role':'assistant','content':[]}}\n\n"
    "event: response.content_part.added\ndata: {'type':'response.content_part.added','sequence_number':3,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'part':{'type':'output_text','text':'','annotations':[]}}\n\n"
    "event: response.output_text.delta\ndata: {'type':'response.output_text.delta','sequence_number':4,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'delta':'Half','logprobs':[]}\n\n"
    "event: error\ndata: {'type':'error','sequence_number':5,'code':'server_error','message':'The server had an error','param':null,'error':{'message':'The server had an error','type':'server_error','param':null,'code':'server_error'}}\n\n"
    "";


static const char  gold_msg_text_chat[] =
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{'role':'assistant','content':''},'logprobs':null,'finish_reason':null}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{'content':'Hello'},'logprobs':null,'finish_reason':null}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{'content':', \\'world\\'\\n caf\303\251'},'logprobs':null,'finish_reason':null}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{},'logprobs':null,'finish_reason':'stop'}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[],'usage':{'prompt_tokens':150,'completion_tokens':9,'total_tokens':159,'prompt_tokens_details':{'cached_tokens':100}}}\n\n"
    "data: [DONE]\n\n"
    "";


static const char  gold_msg_tools_chat[] =
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{'role':'assistant','content':''},'logprobs':null,'finish_reason':null}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{'tool_calls':[{'index':0,'id':'toolu_01A','type':'function','function':{'name':'get_weather','arguments':''}}]},'logprobs':null,'finish_reason':null}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{'tool_calls':[{'index':0,'function':{'arguments':'{\\'ci'}}]},'logprobs':null,'finish_reason':null}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{'tool_calls':[{'index':0,'function':{'arguments':'ty\\': \\'Par'}}]},'logprobs':null,'finish_reason':null}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{'tool_calls':[{'index':0,'function':{'arguments':'is\\'}'}}]},'logprobs':null,'finish_reason':null}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{'tool_calls':[{'index':1,'id':'toolu_01B','type':'function','function':{'name':'get_time','arguments':''}}]},'logprobs':null,'finish_reason':null}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{'tool_calls':[{'index':1,'function':{'arguments':'{\\'tz\\':'}}]},'logprobs':null,'finish_reason':null}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{'tool_calls':[{'index':1,'function':{'arguments':' \\'CET\\'}'}}]},'logprobs':null,'finish_reason':null}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{},'logprobs':null,'finish_reason':'tool_calls'}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[],'usage':{'prompt_tokens':150,'completion_tokens':9,'total_tokens':159,'prompt_tokens_details':{'cached_tokens':100}}}\n\n"
    "data: [DONE]\n\n"
    "";


static const char  gold_msg_length_chat[] =
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{'role':'assistant','content':''},'logprobs':null,'finish_reason':null}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{'content':'Once upon'},'logprobs':null,'finish_reason':null}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{},'logprobs':null,'finish_reason':'length'}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[],'usage':{'prompt_tokens':150,'completion_tokens':9,'total_tokens':159,'prompt_tokens_details':{'cached_tokens':100}}}\n\n"
    "data: [DONE]\n\n"
    "";


static const char  gold_msg_error_chat[] =
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{'role':'assistant','content':''},'logprobs':null,'finish_reason':null}]}\n\n"
    "data: {'id':'chatcmpl-7d80362b080ad6d8','object':'chat.completion.chunk','created':1718000000,'model':'claude-sonnet-4-5','choices':[{'index':0,'delta':{'content':'Half'},'logprobs':null,'finish_reason':null}]}\n\n"
    "data: {'error':{'message':'Overloaded','type':'server_error','param':null,'code':null}}\n\n"
    "";


static const char  gold_msg_text_responses[] =
    "event: response.created\ndata: {'type':'response.created','sequence_number':0,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'claude-sonnet-4-5','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.in_progress\ndata: {'type':'response.in_progress','sequence_number':1,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'claude-sonnet-4-5','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.output_item.added\ndata: {'type':'response.output_item.added','sequence_number':2,'output_index':0,'item':{'id':'msg_8edb9ab1f0f1a1c3','type':'message','status':'in_progress','role':'assistant','content':[]}}\n\n"
    "event: response.content_part.added\ndata: {'type':'response.content_part.added','sequence_number':3,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'part':{'type':'output_text','text':'','annotations':[]}}\n\n"
    "event: response.output_text.delta\ndata: {'type':'response.output_text.delta','sequence_number':4,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'delta':'Hello','logprobs':[]}\n\n"
    "event: response.output_text.delta\ndata: {'type':'response.output_text.delta','sequence_number':5,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'delta':', \\'world\\'\\n caf\303\251','logprobs':[]}\n\n"
    "event: response.output_text.done\ndata: {'type':'response.output_text.done','sequence_number':6,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'text':'Hello, \\'world\\'\\n caf\303\251','logprobs':[]}\n\n"
    "event: response.content_part.done\ndata: {'type':'response.content_part.done','sequence_number':7,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'part':{'type':'output_text','text':'Hello, \\'world\\'\\n caf\303\251','annotations':[]}}\n\n"
    "event: response.output_item.done\ndata: {'type':'response.output_item.done','sequence_number':8,'output_index':0,'item':{'id':'msg_8edb9ab1f0f1a1c3','type':'message','status':'completed','role':'assistant','content':[{'type':'output_text','text':'Hello, \\'world\\'\\n caf\303\251','annotations':[]}]}}\n\n"
    "event: response.completed\ndata: {'type':'response.completed','sequence_number':9,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'completed','model':'claude-sonnet-4-5','output':[{'id':'msg_8edb9ab1f0f1a1c3','type':'message','status':'completed','role':'assistant','content':[{'type':'output_text','text':'Hello, \\'world\\'\\n caf\303\251','annotations':[]}]}],'usage':{'input_tokens':150,'input_tokens_details':{'cached_tokens':100},'output_tokens':9,'output_tokens_details':{'reasoning_tokens':0},'total_tokens':159},'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "";


static const char  gold_msg_tools_responses[] =
    "event: response.created\ndata: {'type':'response.created','sequence_number':0,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'claude-sonnet-4-5','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.in_progress\ndata: {'type':'response.in_progress','sequence_number':1,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'claude-sonnet-4-5','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.output_item.added\ndata: {'type':'response.output_item.added','sequence_number':2,'output_index':0,'item':{'id':'fc_8edb9ab1f0f1a1c3','type':'function_call','status':'in_progress','arguments':'','call_id':'toolu_01A','name':'get_weather'}}\n\n"
    "event: response.function_call_arguments.delta\ndata: {'type':'response.function_call_arguments.delta','sequence_number':3,'item_id':'fc_8edb9ab1f0f1a1c3','output_index':0,'delta':'{\\'ci'}\n\n"
    "event: response.function_call_arguments.delta\ndata: {'type':'response.function_call_arguments.delta','sequence_number':4,'item_id':'fc_8edb9ab1f0f1a1c3','output_index':0,'delta':'ty\\': \\'Par'}\n\n"
    "event: response.function_call_arguments.delta\ndata: {'type':'response.function_call_arguments.delta','sequence_number':5,'item_id':'fc_8edb9ab1f0f1a1c3','output_index':0,'delta':'is\\'}'}\n\n"
    "event: response.function_call_arguments.done\ndata: {'type':'response.function_call_arguments.done','sequence_number':6,'item_id':'fc_8edb9ab1f0f1a1c3','output_index':0,'name':'get_weather','arguments':'{\\'city\\': \\'Paris\\'}'}\n\n"
    "event: response.output_item.done\ndata: {'type':'response.output_item.done','sequence_number':7,'output_index':0,'item':{'id':'fc_8edb9ab1f0f1a1c3','type':'function_call','status':'completed','arguments':'{\\'city\\': \\'Paris\\'}','call_id':'toolu_01A','name':'get_weather'}}\n\n"
    "event: response.output_item.added\ndata: {'type':'response.output_item.added','sequence_number':8,'output_index':1,'item':{'id':'fc_eee0eea99abbe532','type':'function_call','status':'in_progress','arguments':'','call_id':'toolu_01B','name':'get_time'}}\n\n"
    "event: response.function_call_arguments.delta\ndata: {'type':'response.function_call_arguments.delta','sequence_number':9,'item_id':'fc_eee0eea99abbe532','output_index':1,'delta':'{\\'tz\\':'}\n\n"
    "event: response.function_call_arguments.delta\ndata: {'type':'response.function_call_arguments.delta','sequence_number':10,'item_id':'fc_eee0eea99abbe532','output_index':1,'delta':' \\'CET\\'}'}\n\n"
    "event: response.function_call_arguments.done\ndata: {'type':'response.function_call_arguments.done','sequence_number':11,'item_id':'fc_eee0eea99abbe532','output_index':1,'name':'get_time','arguments':'{\\'tz\\': \\'CET\\'}'}\n\n"
    "event: response.output_item.done\ndata: {'type':'response.output_item.done','sequence_number':12,'output_index':1,'item':{'id':'fc_eee0eea99abbe532','type':'function_call','status':'completed','arguments':'{\\'tz\\': \\'CET\\'}','call_id':'toolu_01B','name':'get_time'}}\n\n"
    "event: response.completed\ndata: {'type':'response.completed','sequence_number':13,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'completed','model':'claude-sonnet-4-5','output':[{'id':'fc_8edb9ab1f0f1a1c3','type':'function_call','status':'completed','arguments':'{\\'city\\': \\'Paris\\'}','call_id':'toolu_01A','name':'get_weather'},{'id':'fc_eee0eea99abbe532','type':'function_call','status':'completed','arguments':'{\\'tz\\': \\'CET\\'}','call_id':'toolu_01B','name':'get_time'}],'usage':{'input_tokens':150,'input_tokens_details':{'cached_tokens':100},'output_tokens':9,'output_tokens_details':{'reasoning_tokens':0},'total_tokens':159},'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "";


static const char  gold_msg_length_responses[] =
    "event: response.created\ndata: {'type':'response.created','sequence_number':0,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'claude-sonnet-4-5','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.in_progress\ndata: {'type':'response.in_progress','sequence_number':1,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'claude-sonnet-4-5','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.output_item.added\ndata: {'type':'response.output_item.added','sequence_number':2,'output_index':0,'item':{'id':'msg_8edb9ab1f0f1a1c3','type':'message','status':'in_progress','role':'assistant','content':[]}}\n\n"
    "event: response.content_part.added\ndata: {'type':'response.content_part.added','sequence_number':3,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'part':{'type':'output_text','text':'','annotations':[]}}\n\n"
    "event: response.output_text.delta\ndata: {'type':'response.output_text.delta','sequence_number':4,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'delta':'Once upon','logprobs':[]}\n\n"
    "event: response.output_text.done\ndata: {'type':'response.output_text.done','sequence_number':5,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'text':'Once upon','logprobs':[]}\n\n"
    "event: response.content_part.done\ndata: {'type':'response.content_part.done','sequence_number':6,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'part':{'type':'output_text','text':'Once upon','annotations':[]}}\n\n"
    "event: response.output_item.done\ndata: {'type':'response.output_item.done','sequence_number':7,'output_index':0,'item':{'id':'msg_8edb9ab1f0f1a1c3','type':'message','status':'completed','role':'assistant','content':[{'type':'output_text','text':'Once upon','annotations':[]}]}}\n\n"
    "event: response.incomplete\ndata: {'type':'response.incomplete','sequence_number':8,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'incomplete','model':'claude-sonnet-4-5','output':[{'id':'msg_8edb9ab1f0f1a1c3','type':'message','status':'completed','role':'assistant','content':[{'type':'output_text','text':'Once upon','annotations':[]}]}],'usage':{'input_tokens':150,'input_tokens_details':{'cached_tokens':100},'output_tokens':9,'output_tokens_details':{'reasoning_tokens':0},'total_tokens':159},'error':null,'incomplete_details':{'reason':'max_output_tokens'},'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "";


static const char  gold_msg_error_responses[] =
    "event: response.created\ndata: {'type':'response.created','sequence_number':0,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'claude-sonnet-4-5','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.in_progress\ndata: {'type':'response.in_progress','sequence_number':1,'response':{'id':'resp_7d80362b080ad6d8','object':'response','created_at':1718000000,'status':'in_progress','model':'claude-sonnet-4-5','output':[],'usage':null,'error':null,'incomplete_details':null,'instructions':null,'max_output_tokens':1024,'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':null,'summary':null},'store':false,'temperature':null,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],'top_p':null,'truncation':'disabled','user':null,'metadata':{}}}\n\n"
    "event: response.output_item.added\ndata: {'type':'response.output_item.added','sequence_number':2,'output_index':0,'item':{'id':'msg_8edb9ab1f0f1a1c3','type':'message','status':'in_progress','role':'assistant','content':[]}}\n\n"
    "event: response.content_part.added\ndata: {'type':'response.content_part.added','sequence_number':3,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'part':{'type':'output_text','text':'','annotations':[]}}\n\n"
    "event: response.output_text.delta\ndata: {'type':'response.output_text.delta','sequence_number':4,'item_id':'msg_8edb9ab1f0f1a1c3','output_index':0,'content_index':0,'delta':'Half','logprobs':[]}\n\n"
    "event: error\ndata: {'type':'error','sequence_number':5,'code':'overloaded_error','message':'Overloaded','param':null,'error':{'message':'Overloaded','type':'server_error','param':null,'code':'overloaded_error'}}\n\n"
    "";
