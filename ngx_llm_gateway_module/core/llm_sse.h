
/*
 * Usage extraction from upstream responses: an incremental Server-Sent
 * Events parser for streams and a one-shot reader for JSON bodies, for the
 * OpenAI Chat Completions, OpenAI Responses and Anthropic Messages
 * formats; what was seen is settled by llm_settle.h.
 *
 * The parser never holds the caller's bytes back: it copies what it needs
 * (the data of the current event, bounded by the buffer the caller gives)
 * and the caller passes its buffers on at once.  A stream split at any byte
 * boundary gives the same result.  Plain C with cJSON, no nginx types; all
 * memory comes from the caller (the event buffer) or cJSON's hooks.
 *
 * Besides the upstream's own figures it counts the generated text of every
 * delta event (content, reasoning, refusals, tool-call arguments), so that a
 * stream which ends without its usage is still metered.
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

#define LLM_USAGE_IDENT_MAX       LLM_RECORD_UPSTREAM_MAX
#define LLM_USAGE_IDENT_CHARS                                                 \
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.:/@+"


/* the event types that carry what the meter wants */
typedef enum {
    llm_sse_other = 0,
    llm_sse_message_start,
    llm_sse_message_delta,
    llm_sse_message_stop,
    llm_sse_error,
    llm_sse_response_end        /* response.completed, .incomplete, .failed */
} llm_sse_kind_e;


typedef struct {
    /* the upstream's figures, each the largest it reported */
    uint64_t   input_tokens;         /* the whole prompt, cached included */
    uint64_t   output_tokens;        /* reasoning included */
    uint64_t   cached_input_tokens;  /* read from the prompt cache */
    uint64_t   cache_write_tokens;   /* written to it (Anthropic) */
    uint64_t   reasoning_tokens;

    /* what the gateway counted itself, from the delta events */
    uint64_t   delta_events;         /* events that carried generated text */
    uint64_t   delta_bytes;          /* bytes of that text, decoded */

    char       finish_reason[LLM_USAGE_FINISH_MAX];   /* NUL-terminated */

    /*
     * What the upstream calls the response and the model that made it, for
     * setting the ledger beside the provider's bill: NUL-terminated, ""
     * when it said none, or one longer than LLM_USAGE_IDENT_MAX or of
     * other bytes than LLM_USAGE_IDENT_CHARS (then it is not kept at all).
     */
    char       response_id[LLM_USAGE_IDENT_MAX + 1];
    char       upstream_model[LLM_USAGE_IDENT_MAX + 1];

    unsigned   have_usage:1;     /* the final usage was seen */
    unsigned   have_input:1;     /* the prompt's size was reported (an
                                    Anthropic message_start) */
    unsigned   done:1;           /* the stream's terminal event was seen */
    unsigned   clamped:1;        /* a figure was out of range */
    unsigned   malformed:1;      /* a figure was not a number, or below 0:
                                    the gateway's own count stands in */
    unsigned   repeated:1;       /* the final usage came more than once */
    unsigned   truncated:1;      /* an event exceeded the buffer */
    unsigned   error:1;          /* an in-band error event was seen */
} llm_usage_t;


/*
 * An event as llm_sse_dispatch() read it, before it is forgotten: its type
 * (empty if it had none or a name longer than LLM_SSE_EVENT_MAX), its
 * data (the lines joined by '\n'), and whether that data overflowed the
 * buffer (then the data given is not the event's: not to be used).
 * Events without a data field are not given, as SSE dispatches none.
 */
typedef void (*llm_sse_event_pt)(void *ctx, const char *event,
    size_t event_len, const char *data, size_t len, unsigned skipped);


typedef struct {
    llm_api_e     api;
    llm_usage_t   usage;

    /* the data of the event being read, joined by '\n' as SSE says */
    char         *buf;
    size_t        cap;
    size_t        len;

    /*
     * If set, a larger event grows buf, up to max bytes: grow returns
     * size bytes holding the len of old (and may free old), or NULL.
     */
    char       *(*grow)(void *ctx, char *old, size_t len, size_t size);
    void         *grow_ctx;
    size_t        max;

    /* if set, given every event (the translators' feed) */
    llm_sse_event_pt   on_event;
    void              *event_ctx;

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
    unsigned      in_event:1;       /* a line of the current event was read */

    /*
     * With yield set, llm_sse_feed() returns right after the blank line
     * that ends an event, with dispatched set; usage_only says whether
     * that event was an OpenAI usage-only chunk (no choices).
     */
    unsigned      yield:1;
    unsigned      dispatched:1;
    unsigned      usage_only:1;

    /* llm_sse_filter(): cut the usage-only chunk out of what is sent */
    unsigned      strip:1;
    unsigned      holding:1;        /* the current event is in hold */
    unsigned      drop_lf:1;        /* a cut event ended with a CR */
    unsigned      stripped:1;       /* one was cut */
    char         *hold;
    size_t        hold_len;
    size_t        hold_cap;
} llm_sse_t;


/*
 * llm_sse_filter() gives the bytes to send in pieces: each either points
 * into the buffer fed (and may be sent from there) or into the hold (and
 * must be copied: the hold is reused).
 */
typedef int (*llm_sse_out_pt)(void *data, const char *p, size_t len);


/* buf holds one event's data; 16 KiB is plenty for real streams */
void llm_sse_init(llm_sse_t *p, llm_api_e api, char *buf, size_t cap);

/*
 * Returns the bytes consumed: all of them, unless p->yield is set and an
 * event ended first.
 */
size_t llm_sse_feed(llm_sse_t *p, const char *data, size_t len);

/*
 * Feeds one buffer of a stream and gives to out, in order, what the client
 * must receive of it.  Without p->strip, that is the whole buffer.  With
 * it (the gateway asked an OpenAI upstream for the usage the client did
 * not ask for), the usage-only chunk is left out: cut from the buffer when
 * it begins there; else, once the choices have finished, the unfinished
 * event at the end of a buffer is held (in hold, hold_cap bytes) until it
 * ends, so that it can be dropped whole.  Before the finish nothing is
 * held: content is never delayed.  Returns -1 if out did, else 0.
 */
int llm_sse_filter(llm_sse_t *p, const char *data, size_t len,
    llm_sse_out_pt out, void *ctx);

/*
 * The stream ended: dispatches what is pending and gives out what is held
 * (unless it is the usage chunk, cut short).  *closing is what then ends
 * the stream's unfinished line or event (llm_sse_closing()), for an error
 * event to follow.
 */
int llm_sse_filter_end(llm_sse_t *p, llm_sse_out_pt out, void *ctx,
    const char **closing);

/*
 * The bytes that end whatever a cut stream left unfinished (a line, an
 * event), so that an event sent after them stands on its own.
 */
const char *llm_sse_closing(const llm_sse_t *p);

/*
 * Writes the terminal in-band error event the client gets when the
 * upstream fails mid-stream, in the API's own format.  message must need
 * no JSON escaping.  Returns its length, 0 if cap is too small.
 */
size_t llm_sse_error_event(llm_api_e api, const char *message, char *buf,
    size_t cap);

/* The stream ended: dispatch an event not yet terminated by a blank line. */
void llm_sse_finish(llm_sse_t *p);

/* 1 if the stream stopped inside a line, 2 inside an event, 0 between */
int llm_sse_pending(const llm_sse_t *p);

/*
 * Reads the usage of a whole non-streaming JSON response.  Returns 1 if a
 * usage object was found, 0 if not (u is still filled as far as it goes,
 * the generated text counted as one delta).
 */
int llm_sse_usage_from_json(llm_api_e api, const char *body, size_t len,
    llm_usage_t *u);

/*
 * The last bytes of an embeddings list too large to keep whole: its usage,
 * the last member of the list as OpenAI writes it, if they end with it
 * and with the list's closing brace.  Returns 1 if it was found (and sets
 * done), 0 if not; other APIs have no such tail.
 */
#define LLM_SSE_TAIL_MAX          1024

int llm_sse_usage_from_tail(llm_api_e api, const char *tail, size_t len,
    llm_usage_t *u);


/*
 * The type an event line (or a "type") names, as the meter reads it: an
 * event so named is that, whatever its data's "type" says.
 */
llm_sse_kind_e llm_sse_kind(const char *s, size_t n);


#endif /* _LLM_SSE_H_INCLUDED_ */
