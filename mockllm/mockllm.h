
/*
 * mockllm: the mock LLM upstream.  The behaviour is documented at the top
 * of mockllm.c.  Each file declares what it offers the others in its own
 * header (mockllm_buf.h for mockllm_buf.c); this one holds what they share:
 * the limits, the codes and the connection with its parts.
 */

#ifndef _MOCKLLM_H_INCLUDED_
#define _MOCKLLM_H_INCLUDED_


#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>


#define MOCKLLM_OK              0
#define MOCKLLM_ERROR          -1
#define MOCKLLM_AGAIN          -2
#define MOCKLLM_CLOSE          -3

#define MOCKLLM_HEADER_MAX      (64 * 1024)
#define MOCKLLM_BODY_MAX        (32 * 1024 * 1024)
#define MOCKLLM_IN_MAX          (MOCKLLM_HEADER_MAX + MOCKLLM_BODY_MAX       \
                                 + 64 * 1024)

#define MOCKLLM_MAX_DEFAULT     64
#define MOCKLLM_DELAY_MAX       3600000
#define MOCKLLM_REQUEST_ID_LEN  256
#define MOCKLLM_LIMIT_MSG_LEN   256
#define MOCKLLM_READ_MSG_LEN    256
#define MOCKLLM_READ_PARAM_LEN  96
#define MOCKLLM_CALLS_MAX       16      /* x-mock-tool-calls */

#define MOCKLLM_NONE           -1

#define MOCKLLM_METHOD_OTHER    0
#define MOCKLLM_METHOD_GET      1
#define MOCKLLM_METHOD_POST     2

#define MOCKLLM_API_OPENAI      0
#define MOCKLLM_API_ANTHROPIC   1
#define MOCKLLM_API_RESPONSES   2
#define MOCKLLM_API_EMBEDDINGS  3
/* Messages' count_tokens: an Anthropic body without its output limit */
#define MOCKLLM_API_COUNT_TOKENS  5

/* what refused a request: the limits, checked in this order */
#define MOCKLLM_LIMIT_OK        0
#define MOCKLLM_LIMIT_RPM       1
#define MOCKLLM_LIMIT_TPM       2
#define MOCKLLM_LIMIT_QUOTA     3
#define MOCKLLM_LIMIT_INFLIGHT  4       /* checked first: overloaded */

/* x-mock-die-how */
#define MOCKLLM_DIE_CLOSE       0
#define MOCKLLM_DIE_RESET       1
#define MOCKLLM_DIE_STALL       2


typedef struct mockllm_loop_s  mockllm_loop_t;
typedef struct mockllm_conn_s  mockllm_conn_t;


/*
 * Requests in flight per tenant, named by the x-mock-tenant header (the
 * gateway under test sends it), and the most ever seen at once: what a
 * concurrency limit must never let pass.  GET /stats/NAME.
 */
#define MOCKLLM_TENANT_LEN   64

typedef struct {
    char                 name[MOCKLLM_TENANT_LEN];
    size_t               len;
    int64_t              inflight;
    int64_t              max;
} mockllm_tenant_t;


/*
 * A growable byte buffer.  A failed allocation sets oom and turns every
 * later append into a no-op, so that a whole response is built without
 * a check after each piece and is checked once at the end.
 */
typedef struct {
    char                *data;
    size_t               len;
    size_t               cap;
    unsigned             oom:1;
} mockllm_buf_t;


/* what the request line and the headers asked for */
typedef struct {
    int                  method;
    size_t               path_start;     /* offsets into the input buffer */
    size_t               path_len;

    int64_t              content_length;
    int64_t              tokens;
    int64_t              prompt_tokens;
    int64_t              cached_tokens;
    int64_t              cache_creation_tokens;
    int64_t              reasoning_tokens;
    int64_t              ttfb;
    int64_t              delay;
    int64_t              die_after;
    int64_t              error_after;
    int64_t              usage_repeat;
    int64_t              pad_bytes;
    int64_t              status;
    int64_t              tool_calls;
    int                  die_how;
    const char          *bad_header;     /* a malformed x-mock- header */

    size_t               usage_start;    /* x-mock-usage, an offset into */
    size_t               usage_len;      /* the input buffer */

    unsigned             http10:1;
    unsigned             keepalive:1;
    unsigned             conn_close:1;
    unsigned             chunked:1;
    unsigned             expect:1;
    unsigned             no_usage:1;
    unsigned             malformed:1;
    unsigned             usage_given:1;
    unsigned             anthropic_version:1;  /* Anthropic's models list */

    size_t               request_id_len;
    char                 request_id[MOCKLLM_REQUEST_ID_LEN];
    size_t               tenant_len;
    char                 tenant[MOCKLLM_TENANT_LEN];

    /* x-mock-model: the model the answer names, as a provider names the
       dated model it ran for an alias; 0: the one asked for */
    size_t               served_model_len;
    char                 served_model[MOCKLLM_TENANT_LEN];
} mockllm_req_t;


/*
 * A request's part in the provider-side limits, only when a limit is on:
 * its window entry and charge, for the correction at its end, and what
 * its response headers and a refusal's message say.
 */
typedef struct {
    uint64_t             arrival;        /* ms since mockllm started */
    uint64_t             seq;            /* of its window entry */
    uint64_t             epoch;          /* POST /limits/reset counts up */
    int64_t              charge;         /* tokens charged at arrival */
    int64_t              period;         /* the quota period charged */

    int64_t              limit;          /* of the limit that refused */
    int64_t              used;
    int64_t              requested;
    uint64_t             retry;          /* ms */

    int64_t              rpm_remaining;
    uint64_t             rpm_reset;      /* ms until the window is empty */
    int64_t              tpm_remaining;
    uint64_t             tpm_reset;

    int                  refused;        /* MOCKLLM_LIMIT_* */

    unsigned             arrived:1;      /* an LLM request: the headers */
    unsigned             checked:1;      /* ... and it met the limits */
    unsigned             charged:1;      /* ... which took it */
    unsigned             too_large:1;    /* more than TPM alone */
    unsigned             inflight:1;     /* counted in flight (-c) */

    char                 msg[MOCKLLM_LIMIT_MSG_LEN];
} mockllm_limit_t;


/*
 * A tool call to answer, as offsets into the connection's calls buffer:
 * its tool's name escaped for a JSON string, and the start of its
 * arguments, {"PROP":", as JSON text and escaped again for a JSON string.
 */
typedef struct {
    size_t               name;
    size_t               name_len;
    size_t               key;
    size_t               key_len;
    size_t               key_esc;
    size_t               key_esc_len;
} mockllm_call_t;


/*
 * What the body of an LLM request says, read as the provider reads it
 * (mockllm_read.c): what x-mock-read reports, the prompt, and the first
 * reason to refuse it, if any.  MOCKLLM_NONE in max, n or stream: the
 * member's value is refused, and written "?".
 */
typedef struct {
    int64_t              max;
    int64_t              n;
    int64_t              stream;
    int64_t              messages;
    int64_t              images;
    int64_t              files;
    int64_t              audio;
    int64_t              tools;
    int64_t              refs;
    int64_t              prompt;         /* P, before x-mock-prompt-tokens */
    int64_t              calls;          /* tool calls to answer, or 0 */

    int                  status;         /* 400, 404, or 0: nothing refused */
    const char          *type;           /* the error's; NULL: invalid_... */

    unsigned             object:1;       /* the body is an object: a reading */
    unsigned             max_given:1;
    unsigned             usage_chunk:1;  /* OpenAI include_usage */
    unsigned             instructions:1; /* Responses: instr is set */

    char                 msg[MOCKLLM_READ_MSG_LEN];
    char                 param[MOCKLLM_READ_PARAM_LEN];  /* "": null */
    const char          *code;           /* OpenAI's "code"; NULL: null */

    mockllm_call_t       call[MOCKLLM_CALLS_MAX];
} mockllm_read_t;


/* the response being produced, possibly over several timer ticks */
typedef struct {
    int                  kind;
    int                  api;
    mockllm_tenant_t    *stats;          /* GET /stats: which tenant */
    int64_t              model;          /* GET /v1/models/{id}: which;
                                            MOCKLLM_NONE: the list */
    int                  phase;
    int                  status;
    const char          *err_type;
    const char          *err_code;       /* NULL is JSON null */
    const char          *err_msg;
    const char          *err_param;      /* OpenAI: "param", if param */

    uint64_t             id;
    int64_t              created;
    int64_t              prompt;
    int64_t              cached;
    int64_t              cache_creation;
    int64_t              reasoning;
    int64_t              n_out;          /* of each choice */
    int64_t              calls;          /* tool calls instead of text */
    int64_t              per_call;       /* K: the tokens of each call */
    int64_t              opened;         /* calls whose stream has begun */
    int64_t              choices;        /* OpenAI Chat: n */
    int64_t              max_out;        /* Responses: echoed, or NONE */
    int64_t              sent;           /* content tokens emitted */
    int64_t              die_after;      /* MOCKLLM_NONE: never */
    int64_t              error_after;    /* MOCKLLM_NONE: never */
    int64_t              repeat;         /* of the usage-carrying event */
    int64_t              pad;
    int64_t              seq;            /* Responses: sequence_number */
    int64_t              delay;
    uint64_t             reset_at;       /* give up waiting for the ACKs */

    uint32_t             usage_skip;     /* x-mock-usage: what it replaces */
    const char          *usage_extra;    /* ... and its members, verbatim */
    size_t               usage_extra_len;

    unsigned             stream:1;
    unsigned             usage:1;        /* report usage at all */
    unsigned             usage_chunk:1;  /* OpenAI include_usage */
    unsigned             capped:1;
    unsigned             malformed:1;
    unsigned             chunked:1;      /* chunked framing of the stream */
    unsigned             details:1;      /* OpenAI completion_tokens_details */
    unsigned             instructions:1; /* Responses: instr is set */
    unsigned             param:1;        /* OpenAI error: "param" */
    unsigned             read:1;         /* x-mock-read is sent */
} mockllm_resp_t;


struct mockllm_conn_s {
    int                  fd;
    mockllm_loop_t      *loop;
    mockllm_conn_t      *prev;
    mockllm_conn_t      *next;

    mockllm_buf_t        in;
    size_t               scan;           /* header end search resumes here */
    size_t               hdr_len;        /* 0 until the headers are in */
    size_t               req_len;        /* raw bytes of the whole request */
    size_t               body_start;
    size_t               body_len;
    uint64_t             chunk_size;
    int                  chunk_state;

    mockllm_buf_t        out;
    size_t               sent;
    mockllm_buf_t        tmp;            /* one event or body being built */
    mockllm_buf_t        prefix;         /* the constant start of an event */
    mockllm_buf_t        model;          /* JSON-escaped */
    mockllm_buf_t        instr;          /* Responses instructions, too */
    mockllm_buf_t        readout;        /* the x-mock-read value */
    mockllm_buf_t        calls;          /* the tool calls' names, keys */

    mockllm_req_t        req;
    mockllm_read_t       rd;
    mockllm_resp_t       resp;

    int                  err_status;     /* set when the request is bad */
    const char          *err_msg;

    uint64_t             timer_at;       /* kept after it fires */
    size_t               timer_idx;

    mockllm_tenant_t    *tenant;         /* counted in flight, if named */
    mockllm_limit_t      lim;

    unsigned             busy:1;         /* a response is in progress */
    unsigned             done:1;         /* all of it is in out */
    unsigned             close:1;        /* close once out is sent */
    unsigned             linger:1;       /* ... and drain the input first */
    unsigned             lingering:1;
    unsigned             continued:1;    /* 100 Continue was queued */
    unsigned             pump:1;         /* more to write once out drains */
    unsigned             reset:1;        /* close with an RST */
    unsigned             stall:1;        /* never done: the peer closes */
};


typedef struct {
    mockllm_conn_t     **nodes;
    size_t               n;
    size_t               cap;
} mockllm_heap_t;


struct mockllm_loop_s {
    int                  epfd;
    int                  lfd;
    int                  wakefd;
    pthread_t            tid;
    uint64_t             now;            /* monotonic milliseconds */
    mockllm_heap_t       timers;
    size_t               nconns;
    mockllm_conn_t      *conns;
};


#endif /* _MOCKLLM_H_INCLUDED_ */
