
/*
 * The request translator: the body of a client of one dialect (Chat
 * Completions, Messages, Responses) rewritten as the body a backend of
 * another (Chat Completions or Messages) reads as the same request.  What
 * cannot be said in the backend's dialect is refused, naming the member;
 * a member whose value is its default (n 1, logprobs false, a penalty 0,
 * response_format text, parallel_tool_calls true, store, stream_options)
 * is accepted and not written.  Member names are compared as cJSON does
 * (case-sensitive); a null member is an absent one.  Plain C with cJSON,
 * no nginx types; all memory comes from cJSON's hooks.
 *
 * Every translation writes "model" (the conf's) and the output limit the
 * gateway admitted, under the backend's name: Messages' max_tokens,
 * Chat's max_completion_tokens (or max_tokens, chat_max_tokens).
 *
 * Chat Completions -> Messages:
 *   system and developer messages (a string or text parts), wherever they
 *     are: the top-level "system", a string when there is one plain
 *     string, else text blocks in order
 *   user: a string stays a string; parts: text -> text, image_url with a
 *     data: URL -> image base64 (jpeg, png, gif, webp), with an http(s)
 *     URL -> image url (detail is dropped: a hint), file with file_data
 *     (a PDF data: URL) -> document base64; input_audio, file_id: refused
 *   assistant: content (a string, text or refusal parts) and "refusal" ->
 *     text blocks, "" skipped; tool_calls -> tool_use blocks {id, name,
 *     input}, input the arguments parsed: not a JSON object is refused,
 *     "" is {}; an id not of 1 to 256 letters, digits, '_' or '-'
 *     (Anthropic's rule) is refused
 *   tool: {tool_call_id, content} -> a tool_result {tool_use_id, content}
 *     (tool_call_id as the tool calls' ids)
 *     in a user message; messages of the same role in a row (tool
 *     messages are the user's) are merged into one, their blocks in order,
 *     for Messages wants a turn's results in the user message after it;
 *     a message left empty is dropped; no message left is refused
 *   function messages, functions, function_call, a message's name,
 *     audio: refused
 *   tools [{type function, function {name, description, parameters,
 *     strict}}] -> [{name, description, input_schema: the parameters
 *     (with "type": "object" when they have no type) or an empty object
 *     schema}]; strict is not written (Messages has no such switch);
 *     another type of tool is refused
 *   tool_choice auto, none, required, {function {name}} -> {type auto},
 *     {type none}, {type any}, {type tool, name}; parallel_tool_calls
 *     false -> disable_parallel_tool_use (on auto when no choice was
 *     given); without tools neither is written (Messages refuses it)
 *   stop (a string or strings) -> stop_sequences, without empty ones
 *     (they stop nothing; Messages refuses them); temperature and top_p
 *     -> the same, refused above 1 (Messages' range); user ->
 *     metadata.user_id; stream -> stream
 *   refused: n above 1, logprobs, top_logprobs, logit_bias (but {}),
 *     seed, a penalty other than 0, response_format other than text,
 *     modalities (but ["text"]), prediction, web_search_options,
 *     reasoning_effort, service_tier (but auto), metadata; any member not
 *     named here
 *
 * Messages -> Chat Completions:
 *   system -> a first system message, its content the string or the text
 *     blocks as text parts; cache_control anywhere is not written (a
 *     caching hint: OpenAI caches prefixes by itself)
 *   user: a string stays a string; blocks: text -> text, image base64 ->
 *     image_url with a data: URL, image url -> image_url, document base64
 *     PDF -> file {filename "document.pdf", file_data: a data: URL};
 *     other sources refused; tool_result -> a tool message {tool_call_id,
 *     content: the string, the text blocks joined with newlines, or ""}, the
 *     tool messages before the rest of that user message; a result with
 *     an image is refused; is_error is not written (the text says it)
 *   assistant: text blocks -> content (a string, the texts concatenated;
 *     null when there are tool calls alone); tool_use -> tool_calls
 *     [{id, type function, function {name, arguments: the input printed
 *     compactly}}]; thinking and the server tools' blocks are refused;
 *     a document's title, context or citations are refused
 *   tools [{name, description, input_schema}] -> [{type function,
 *     function {name, description, parameters}}]; a server tool (a type
 *     other than custom) is refused
 *   tool_choice auto, any, tool, none -> "auto", "required", {type
 *     function, function {name}}, "none"; disable_parallel_tool_use ->
 *     parallel_tool_calls false; without tools neither is written
 *   stop_sequences -> stop (more than 4 refused: OpenAI's limit);
 *     temperature, top_p -> the same; metadata.user_id -> user; stream ->
 *     stream with stream_options.include_usage (the gateway meters it)
 *   refused: top_k, thinking enabled, service_tier (but auto),
 *     mcp_servers, container; any member not named here
 *
 * Responses -> Chat Completions (and -> Messages: to Chat, then Chat to
 * Messages; what Messages refuses of arguments, temperature, images and
 * files is named in the client's terms, anything else the second step
 * refuses by the member of the Chat body, "messages[i]..."):
 *   instructions -> a first system message; input a string -> one user
 *     message; items: message (user, assistant, system, developer; a
 *     string or input_text, output_text, refusal parts -> text,
 *     input_image with image_url -> image_url (its detail low, high or
 *     auto -> image_url.detail: it sets the image's cost; Messages has
 *     none), input_file with file_data -> file; file_id refused; ids and
 *     statuses not written), function_call {call_id, name, arguments} ->
 *     tool_calls of an assistant message, the one before when it is one
 *     (after its text), function_call_output {call_id, output} -> a tool
 *     message; to Messages a call_id is held to Anthropic's rule for ids
 *     (above) and refused by its own name; any other item (reasoning,
 *     item_reference...) refused
 *   tools [{type function, name, description, parameters, strict}] ->
 *     Chat's tools, strict true unless false (Responses' functions are
 *     strict by default, Chat's not; Messages has no strict: not written);
 *     built-in tools refused; tool_choice "auto", "none",
 *     "required", {type function, name} -> Chat's form
 *   temperature, top_p, user, parallel_tool_calls -> the same; stream ->
 *     as Chat's; store accepted, not written
 *   refused: text.format other than text, reasoning, include (but []),
 *     previous_response_id, conversation, prompt, truncation (but
 *     disabled), background (but false), metadata, service_tier (but
 *     auto); any member not named here
 */

#ifndef _LLM_TX_REQUEST_H_INCLUDED_
#define _LLM_TX_REQUEST_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>

#include "llm_tx.h"


typedef struct {
    llm_api_e    from;             /* the client's: OPENAI, ANTHROPIC,
                                      RESPONSES */
    llm_api_e    to;               /* the backend's: OPENAI, ANTHROPIC */

    /* what the backend gets as "model"; NULL: the client's */
    const char  *model;
    size_t       model_len;

    /* the output limit the gateway admitted: always written */
    int64_t      max_tokens;

    unsigned     chat_max_tokens:1;  /* to Chat: under max_tokens, else
                                        max_completion_tokens */
} llm_tx_request_conf_t;


typedef struct {
    char        *body;             /* from cJSON's allocator: cJSON_free() */
    size_t       len;

    /* refused: the member, as "messages[2].content[0].type", and why;
       printable ASCII without quotes or backslashes */
    char         param[LLM_TX_PARAM_MAX];
    char         message[LLM_TX_MESSAGE_MAX];

    unsigned     stream:1;         /* the body asks to stream */
} llm_tx_request_t;


/*
 * 0 translated (out->body, out->len); -1 refused (a 400 naming
 * out->param, out->message); -2 out of memory, or not a JSON object.
 * out->body is NULL but on 0.  A call's arguments that cJSON could not
 * parse for want of memory read as not an object: refused.
 */
int llm_tx_request(const llm_tx_request_conf_t *cf, const char *body,
    size_t len, llm_tx_request_t *out);

/* 1 if requests of "from" can go to a backend of "to" */
int llm_tx_request_supported(llm_api_e from, llm_api_e to);


#endif /* _LLM_TX_REQUEST_H_INCLUDED_ */
