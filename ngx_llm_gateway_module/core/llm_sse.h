
/*
 * Usage extraction from upstream responses: an incremental Server-Sent
 * Events parser for streams and a one-shot reader for JSON bodies, for the
 * OpenAI Chat Completions and Anthropic Messages formats.
 *
 * The parser never holds the caller's bytes back: it copies what it needs
 * (the data of the current event, bounded by the buffer the caller gives)
 * and the caller passes its buffers on at once.  A stream split at any byte
 * boundary gives the same result.  Plain C with cJSON, no nginx types; all
 * memory comes from the caller (the event buffer) or cJSON's hooks.
 */

#ifndef _LLM_SSE_H_INCLUDED_
#define _LLM_SSE_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>

#include "llm_record.h"


#define LLM_USAGE_FINISH_MAX      LLM_RECORD_FINISH_MAX

/* usage figures above this are clamped and flagged */
#define LLM_USAGE_TOKENS_MAX      100000000ULL

#define LLM_SSE_EVENT_MAX         32


typedef struct {
    uint64_t   input_tokens;
    uint64_t   output_tokens;
    uint64_t   cached_input_tokens;
    char       finish_reason[LLM_USAGE_FINISH_MAX];   /* NUL-terminated */

    unsigned   have_usage:1;     /* a usage object was seen */
    unsigned   done:1;           /* the stream's terminal event was seen */
    unsigned   clamped:1;        /* a figure was out of range */
    unsigned   truncated:1;      /* an event exceeded the buffer */
    unsigned   error:1;          /* an in-band error event was seen */
} llm_usage_t;


typedef struct {
    llm_api_e     api;
    llm_usage_t   usage;

    /* the data of the event being read, joined by '\n' as SSE says */
    char         *buf;
    size_t        cap;
    size_t        len;

    /* the event type; a name longer than the buffer matches nothing */
    char          event[LLM_SSE_EVENT_MAX];
    size_t        event_len;

    /*
     * Anthropic's input, cache creation, cache read and output figures:
     * message_delta may update any of them, and input_tokens is their sum.
     */
    uint64_t      tokens[4];

    /* line state */
    unsigned      state;
    unsigned      field;
    size_t        field_len;
    char          field_name[8];
    unsigned      skip_event:1;     /* this event's data overflowed buf */
    unsigned      have_data:1;
    unsigned      last_cr:1;        /* the previous byte was CR */
    unsigned      started:1;        /* a line has ended: no BOM any more */
} llm_sse_t;


/* buf holds one event's data; 64 KiB is plenty for real streams */
void llm_sse_init(llm_sse_t *p, llm_api_e api, char *buf, size_t cap);

void llm_sse_feed(llm_sse_t *p, const char *data, size_t len);

/* The stream ended: dispatch an event not yet terminated by a blank line. */
void llm_sse_finish(llm_sse_t *p);

/*
 * Reads the usage of a whole non-streaming JSON response.  Returns 1 if a
 * usage object was found, 0 if not (u is still filled as far as it goes).
 */
int llm_usage_from_json(llm_api_e api, const char *body, size_t len,
    llm_usage_t *u);


#endif /* _LLM_SSE_H_INCLUDED_ */
