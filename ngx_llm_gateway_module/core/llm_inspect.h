
/*
 * Request-body inspection: what the gateway must know before it admits a
 * request, read exactly as the upstream of its dialect reads it (model,
 * output limit, n, stream, the prompt's parts), a prompt-token estimate
 * and an upper bound of what the request can cost, the 400s for bodies it
 * must refuse, and the splice that adds what the upstream request needs
 * (stream_options.include_usage, a default output limit under the name
 * the upstream's API wants: max_completion_tokens or max_tokens for Chat,
 * max_tokens for Anthropic, max_output_tokens for Responses).
 *
 * An output limit above the tier's maximum is refused, or where the tier
 * says so lowered to it: the upstream then gets the maximum under the
 * member the client named.
 * Plain C with cJSON, no nginx types; cJSON allocates through its hooks.
 * A body is parsed into cJSON's tree by llm_json.h, in a few blocks; what
 * that parser does not take, cJSON parses, after the scan.
 *
 * The prompt estimate: for every message, ceil(bytes / 4) of each text it
 * carries (a string content, or the "text" of each text part) plus 3;
 * plus ceil(bytes / 4) of a system prompt (Anthropic "system", Responses
 * "instructions"); plus 3.  A Responses "input" string is one message.
 * Structured parts (tool definitions, tool calls and their arguments, what
 * tools returned, ids) are data, not prose, and denser: each run of
 * letters, digits or punctuation is at least a token (see
 * llm_inspect_dense()), which keeps them above a tokenizer's count where
 * bytes / 4 fell below it by a third; a prompt with tools adds the
 * providers' tool prompt (Anthropic's tool-use system prompt, OpenAI's
 * framing of the functions).  Each image adds the configured worst case of
 * one image; a prompt with parts whose tokens its bytes do not bound
 * (files, audio, stored context, server tools) is reserved as the
 * configured context.
 *
 * The bound: a tokenizer makes at most one token of a byte, so the prompt
 * is at most the body's length, plus 4 a message, 16, 1024 for the
 * providers' tool prompt, the images' worst case and the context where
 * its parts are unbounded; the output is at most n times the limit.
 *
 * An embeddings request (OpenAI's "input": a string, strings, tokens or
 * token arrays) has no output and no framing: its estimate is
 * ceil(bytes / 4) of each string and the length of each token array, its
 * bound the bytes of each string and the length of each token array.
 */

#ifndef _LLM_INSPECT_H_INCLUDED_
#define _LLM_INSPECT_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>

#include "llm_record.h"


/* the most a splice adds to a body */
#define LLM_INSPECT_SPLICE_MAX    96

/* the most of a refusal's message that carries figures */
#define LLM_INSPECT_TEXT_MAX      128


/* the most of a member's name a refusal gives back */
#define LLM_INSPECT_NAME_MAX      64

/* choices a Chat Completions request may ask for, as OpenAI allows */
#define LLM_INSPECT_N_MAX         128

/* what the providers add to the prompt of a request with tools */
#define LLM_INSPECT_TOOLS_PROMPT  1024

/*
 * What the estimate takes for it: Anthropic's largest tool-use system
 * prompt (530 tokens, tool_choice auto); OpenAI's framing of the functions
 * beyond their JSON, which the estimate counts above its rendering.
 */
#define LLM_INSPECT_TOOLS_ANTHROPIC  530
#define LLM_INSPECT_TOOLS_OPENAI     16

/* OpenAI's limits of an embeddings request */
#define LLM_INSPECT_EMBED_INPUTS  2048     /* inputs in one request */
#define LLM_INSPECT_EMBED_TOKENS  8192     /* tokens of one input */
#define LLM_INSPECT_EMBED_TOTAL   300000   /* tokens of all the inputs */


typedef struct {
    int64_t    default_max_tokens;   /* used when the body has none */
    int64_t    max_tokens_limit;     /* the largest accepted */
    size_t     max_depth;            /* of nested objects and arrays */
    size_t     max_string;           /* bytes of one string, as sent */
    int64_t    image_tokens;         /* the most one image costs */
    int64_t    context_tokens;       /* the most a prompt can hold */
    int        lower;                /* a limit above max_tokens_limit is
                                        lowered to it, not refused */
} llm_inspect_conf_t;


/* the prompt's parts, as its upstream counts them */
typedef struct {
    uint32_t   messages;             /* Responses: input items */
    uint32_t   images;
    uint32_t   files;
    uint32_t   audio;
    uint32_t   tools;
    uint32_t   refs;                 /* references to stored context */
} llm_parts_t;


typedef struct {
    llm_api_e  api;

    char       model[LLM_RECORD_MODEL_MAX];
    size_t     model_len;

    int64_t    max_tokens;           /* the output limit of a choice */
    int64_t    max_tokens_asked;     /* lowered: what the client asked */
    int64_t    n;                    /* choices: 1 but in Chat */
    int64_t    output_bound;         /* the most it can produce */
    int64_t    prompt_tokens;        /* the estimate */
    int64_t    prompt_bound;         /* the most its prompt can be */

    llm_parts_t  parts;

    /* the first part whose tokens its bytes do not bound, or NULL */
    const char  *unbounded;

    unsigned   stream:1;
    unsigned   max_tokens_missing:1; /* the default must be written in */
    unsigned   max_tokens_lowered:1; /* above the maximum, lowered to it */
    unsigned   chat_max_tokens:1;    /* Chat: the default goes under
                                        max_tokens, not max_completion_tokens
                                        (the caller's, per upstream) */
    unsigned   add_include_usage:1;  /* stream_options.include_usage must
                                        be written in */
    unsigned   rebuild:1;            /* a member to write is there already
                                        (null, or stream_options without
                                        usage): re-serialise, not splice */
    unsigned   model_changed:1;      /* model was an alias, now resolved:
                                        the upstream gets req->model */

    /* the member the client sent the output limit in, or NULL */
    const char *max_name;

    /* on refusal: the offending field and a message */
    const char *param;
    const char *message;
    char        text[LLM_INSPECT_TEXT_MAX];  /* a message with figures */
    char        name[LLM_INSPECT_NAME_MAX];  /* a repeated member's, for
                                                param: printable ASCII */
} llm_request_t;


/*
 * A look at the raw bytes before any parse: the deepest nesting and the
 * longest string, so that a hostile body costs no more than its length;
 * and what JSON does not allow but cJSON reads (a raw control byte in a
 * string, \u0000, text after the value).
 * 0 if within the limits, else -1 and *what says which.
 */
int llm_inspect_scan(const char *body, size_t len, size_t max_depth,
    size_t max_string, const char **what);

/*
 * 0 if the body is acceptable, -1 with req->param and req->message if not.
 * It is scanned first (llm_inspect_scan).  Refused: an object that names a
 * member twice (cJSON keeps the first, most upstreams the last), a member
 * of another dialect that would change what is generated or billed, both
 * names of Chat's output limit, a part of a type the dialect does not have,
 * a model name with a control character.
 */
int llm_inspect(llm_api_e api, const char *body, size_t len,
    const llm_inspect_conf_t *cf, llm_request_t *req);

/*
 * The member the upstream reads the output limit from: the client's, or
 * the one the default is written under.
 */
const char *llm_inspect_max_name(const llm_request_t *req);

/*
 * The prompt a row bills when the upstream's usage never came: the
 * estimate, but for embeddings, whose whole cost is the input, which the
 * upstream counted before it sent a byte: the bound, so that cutting the
 * response short never bills less.
 */
#define llm_inspect_unmetered_prompt(req)                                     \
    ((req)->api == LLM_API_EMBEDDINGS ? (req)->prompt_bound                   \
                                      : (req)->prompt_tokens)

/* 1 if the upstream body must differ from the client's */
#define llm_inspect_needs_rewrite(req)                                        \
    ((req)->max_tokens_missing || (req)->add_include_usage || (req)->rebuild)

/*
 * Replaces the model (an alias resolved by the caller): the body must then be
 * re-serialised.  Returns -1 if the name does not fit.
 */
int llm_inspect_set_model(llm_request_t *req, const char *model, size_t len);

/*
 * Writes the upstream body into out (cap >= len + LLM_INSPECT_SPLICE_MAX)
 * by splicing the missing members in after the opening brace.  Returns the
 * new length.  Not for req->rebuild.
 */
size_t llm_inspect_splice(const char *body, size_t len,
    const llm_request_t *req, char *out, size_t cap);

/*
 * For req->rebuild: parses the body again, replaces stream_options, the
 * output limit and model as the flags say, and prints it.  The string comes
 * from cJSON's allocator (free it with cJSON_free); NULL on failure.
 */
char *llm_inspect_rebuild(const char *body, size_t len,
    const llm_request_t *req);


#endif /* _LLM_INSPECT_H_INCLUDED_ */
