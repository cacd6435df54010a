
/*
 * The stream translator: a backend's SSE events (Chat Completions chunks
 * or Messages events, as llm_sse.h's event callback gives them) become the
 * client's (Chat Completions, Messages or Responses), one backend event in,
 * zero or more whole client events out before it returns.  Nothing is held
 * longer than one event: only what the next event decides waits for it
 * (the Messages message_delta and the Responses response.completed wait
 * for the usage chunk that follows Chat's finish chunk).
 *
 * Decisions:
 *   - Messages blocks cannot interleave: a Chat tool call of a new index
 *     closes the open block; a later piece of a closed index is an error.
 *     A piece of the open index (or of none) with another id or name is
 *     a new call.
 *   - Chat choices other than index 0 are ignored; thinking blocks and
 *     Chat's reasoning deltas have no equivalent in the other stream and
 *     are skipped; Chat's refusal deltas are text.
 *   - A "stop" (end_turn) after tool calls is tool_use (tool_calls), and
 *     after a Chat refusal Messages' refusal, as llm_tx_body.c has it.
 *   - The finish ends the content: text and tool calls after it are
 *     dropped, so nothing opens after message_delta or the finish chunk.
 *   - Usage is cumulative: the last given before the end counts, and only
 *     usage with or after the finish concludes (backends that repeat
 *     their usage on every chunk).
 *   - An error (invalid JSON, an event llm_sse skipped as too large, an
 *     interleaved tool call, too many output items) closes what
 *     llm_tx_stream_abort() closes and writes llm_sse_error_event() of the
 *     client's dialect (for Responses with its sequence_number); the
 *     backend's own in-band error is translated.  Either ends the
 *     client's stream (done).
 *   - Responses' done events and final object repeat every text and
 *     argument: they are kept in memory from cf->grow, at most cf->max
 *     bytes; the memory (t->mem) is the caller's to free.
 *
 * Plain C with cJSON, no nginx types.
 */

#ifndef _LLM_TX_STREAM_H_INCLUDED_
#define _LLM_TX_STREAM_H_INCLUDED_


#include "llm_tx.h"


#define LLM_TX_STREAM_MODEL_MAX   128
#define LLM_TX_STREAM_ITEMS       32


/* a Responses output item: offsets into the kept memory */
typedef struct {
    uint32_t        call_off;
    uint32_t        call_len;
    uint32_t        name_off;
    uint32_t        name_len;
    uint32_t        text_off;
    uint32_t        text_len;
    unsigned        tool:1;         /* a function_call, not a message */
    unsigned        incomplete:1;
} llm_tx_stream_item_t;


typedef struct {
    llm_tx_conf_t   cf;             /* a copy: its strings must outlive t */

    char            hash[17];       /* the seed of derived ids, in hex */
    char            model[LLM_TX_STREAM_MODEL_MAX];
    size_t          model_len;

    /* the usage, as Anthropic counts it: input, cache creation, cache
       read, output; and the reasoning part of the output */
    int64_t         tokens[4];
    int64_t         reasoning;

    uint64_t        seq;            /* Responses' sequence_number */
    uint64_t        tools_seen;     /* Chat tool-call indexes started */
    int             tool_index;     /* Chat's open tool call, or -1 */
    uint64_t        tool_id;        /* hashes of its id and name, or 0 */
    uint64_t        tool_name;
    unsigned        block;          /* Messages: the next block's index */
    unsigned        ntools;         /* Chat: tool calls given so far */

    unsigned        reason;         /* the stop reason, llm_tx_stream.c's */
    unsigned        open;           /* the client's open block: none, text,
                                       tool */
    unsigned        from_block;     /* Messages backend: its open block */

    unsigned        started:1;
    unsigned        refused:1;      /* Chat gave a refusal delta */
    unsigned        finished:1;     /* the stop reason is known */
    unsigned        have_usage:1;   /* the final usage came */
    unsigned        concluded:1;    /* message_delta, the usage chunk or
                                       response.completed was written */
    unsigned        ending:1;       /* the backend's terminal event came */
    unsigned        done:1;
    unsigned        errored:1;      /* it ended with an error event */
    unsigned        failed:1;       /* out or grow failed */

    /* Responses: the items and their texts */
    llm_tx_stream_item_t  items[LLM_TX_STREAM_ITEMS];
    unsigned        nitems;
    char           *mem;
    size_t          mem_len;
    size_t          mem_cap;
} llm_tx_stream_t;


/* cf is copied; the strings it points to must last as long as t */
void llm_tx_stream_init(llm_tx_stream_t *t, const llm_tx_conf_t *cf);

/*
 * One backend event (event may be empty: OpenAI names none).  A Messages
 * event is what its event line says when that is message_start,
 * message_delta, message_stop or error, as the meter (llm_sse) reads it
 * (message_stop and error even without data), none when it names the end
 * of a Responses stream, else what its data's "type" says.  skipped:
 * llm_sse dropped its data as too large.  The usage the client is shown
 * is cf->meter's where there is one.  Returns 0, or
 * -1 if out failed or the memory could not grow (beyond cf->max); then
 * every later call returns -1 too.
 */
int llm_tx_stream_event(llm_tx_stream_t *t, const char *event,
    size_t event_len, const char *data, size_t len, unsigned skipped,
    llm_tx_out_pt out, void *ctx);

/*
 * 1 once the client's stream has its terminal event: Chat's [DONE],
 * Messages' message_stop, Responses' response.completed or incomplete, or
 * an error event written in-band.
 */
int llm_tx_stream_done(const llm_tx_stream_t *t);

/* 1 if it ended with an error event: the backend's, or its own */
#define llm_tx_stream_errored(t)  ((t)->errored)

/*
 * The backend's stream ended before its end: closes what the client's
 * stream has open, before the gateway's own error event
 * (llm_sse_error_event() of the client's dialect).  Chat: nothing.
 * Messages: content_block_stop of an open block, so that a client that
 * keeps what came before the error (the SDKs raise the error event
 * wherever it comes) holds only whole blocks; no message_delta nor
 * message_stop, as the error is the end.  Responses: nothing, its "error"
 * event being the end whatever is in progress.  Marks the stream done:
 * later events give nothing.  Returns 0, or -1 if out failed (now or
 * before).
 */
int llm_tx_stream_abort(llm_tx_stream_t *t, llm_tx_out_pt out, void *ctx);

/*
 * llm_tx_stream_abort() and the gateway's error event, message (plain
 * ASCII) in the client's dialect: llm_sse_error_event()'s shape, with
 * Responses' sequence_number continuing the stream's.  Nothing if the
 * client's stream is done already.  Returns 0, or -1 if out failed.
 */
int llm_tx_stream_fail(llm_tx_stream_t *t, const char *message,
    llm_tx_out_pt out, void *ctx);


#endif /* _LLM_TX_STREAM_H_INCLUDED_ */
