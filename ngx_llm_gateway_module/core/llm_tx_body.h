
/*
 * A backend's whole answer, or its error, in the client's dialect: Chat
 * Completions or Messages (the backend's, cf->from) as Chat Completions,
 * Messages or Responses (the client's, cf->to).  The answer is read into
 * one neutral form (texts, a refusal, tool calls, a finish, usage) and
 * written from it, so that every pair goes the same way.
 *
 * What does not cross:
 *   - Messages' thinking and redacted_thinking blocks, and its server
 *     tools' blocks: neither Chat nor Responses can carry them (their
 *     signatures are Anthropic's), so they are left out; their tokens
 *     stay in the output figure, as Anthropic counts them.
 *   - Chat's logprobs, annotations and audio: never asked for through a
 *     translated request.
 *   - A Chat tool call's arguments that are not a JSON object (OpenAI
 *     documents that a model may write invalid JSON there): Messages'
 *     input must be an object, and an empty one would hide the model's
 *     words, so the text is kept whole as {"_raw": "<arguments>"}; a
 *     client's schema check then fails visibly, as an OpenAI client's
 *     JSON parse would.  The text of a Messages input is printed as Chat's
 *     and Responses' arguments.
 *   - A Chat refusal (message.refusal) is Messages' text with stop_reason
 *     refusal, and Responses' refusal content part.
 *
 * Usage: Messages' input_tokens leaves out cache reads and writes, Chat's
 * prompt_tokens and Responses' input_tokens hold them: the figures are
 * converted so that each means what its dialect says.  A figure is read
 * as the meter reads it: not a number, or below 0, counts as 0, a fraction
 * as its whole part, above LLM_TX_BODY_TOKENS_MAX as that; a cached count
 * above its prompt is the prompt.
 *
 * Ids: the answer's id keeps the backend's, its prefix (chatcmpl-, msg_,
 * resp_) made the client's, when it is made of [A-Za-z0-9_-] and fits
 * LLM_TX_ID_MAX; tool call ids pass unchanged.  An id the backend did not
 * give is the prefix and 16 hex digits of FNV-1a (64 bits) over cf->id,
 * then a salt ("resp", "msg", "fc", "call"), then the item's index in
 * decimal: the same request gives the same ids.
 */

#ifndef _LLM_TX_BODY_H_INCLUDED_
#define _LLM_TX_BODY_H_INCLUDED_


#include "llm_sse.h"
#include "llm_tx.h"


/*
 * The most of a token figure read: the meter's (llm_sse), so that the
 * client is shown what the ledger bills
 */
#define LLM_TX_BODY_TOKENS_MAX    ((int64_t) LLM_USAGE_TOKENS_MAX)

/* the most of a backend's error message kept, in bytes, whole characters */
#define LLM_TX_BODY_MESSAGE_MAX   2048


/*
 * A whole 2xx answer of the backend (cf->from) as the client's (cf->to).
 * 0; -1 when it is not one of cf->from (the gateway then sends a 502 of
 * its own), or not JSON, or a dialect neither side may speak; -2 out of
 * memory.  *out, NUL-terminated, from cJSON's allocator (cJSON_free).
 * cf->model, cf->id, cf->created and (Responses' max_output_tokens)
 * cf->max_tokens are read; the rest is the streams'.
 */
int llm_tx_body(const llm_tx_conf_t *cf, const char *body, size_t len,
    char **out, size_t *out_len);

/*
 * An error answer of the backend (status >= 400, body its error JSON, or
 * anything) as the client's error body: Anthropic's
 * {"type":"error","error":{"type","message"},"request_id"} or OpenAI's
 * {"error":{"message","type","param","code"}}, which Responses uses too.
 * The message is kept (whole characters, at most LLM_TX_BODY_MESSAGE_MAX
 * bytes, invalid UTF-8 replaced); a body without one gets "The backend
 * answered <status>.".  The type is mapped by the status, and by the
 * backend's type and code where they say more (billing, quota).  0 or -2;
 * *out as llm_tx_body()'s.
 */
int llm_tx_body_error(const llm_tx_conf_t *cf, unsigned status,
    const char *body, size_t len, char **out, size_t *out_len);


#endif /* _LLM_TX_BODY_H_INCLUDED_ */
