
/*
 * What the translators between dialects share: the request's side of a
 * translated answer and the sink their output goes to.  A translated
 * request is one whose client speaks one dialect (Chat Completions,
 * Messages, Responses) and whose backend another (Chat Completions or
 * Messages): llm_tx_request.h writes the backend's request,
 * llm_tx_stream.h the client's stream, llm_tx_body.h the client's whole
 * answer or error.  Plain C with cJSON, no nginx types.
 */

#ifndef _LLM_TX_H_INCLUDED_
#define _LLM_TX_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>

#include "llm_record.h"
#include "llm_sse.h"


/* the most of a refusal's field path and message */
#define LLM_TX_PARAM_MAX          96
#define LLM_TX_MESSAGE_MAX        256

/* the most of an id the client's dialect needs and the backend's lacks */
#define LLM_TX_ID_MAX             64


/*
 * Takes len bytes of the client's answer; they are copied or sent before
 * it returns.  Returns 0, or -1 to stop the translation.
 */
typedef int (*llm_tx_out_pt)(void *ctx, const char *p, size_t len);

/*
 * Gives size bytes holding the len first bytes of old (which it may free),
 * or NULL: the memory of what a translator keeps beyond its fixed state.
 */
typedef char *(*llm_tx_grow_pt)(void *ctx, char *old, size_t len,
    size_t size);


/* the request an answer is translated for */
typedef struct {
    llm_api_e       from;          /* the backend's: OPENAI, ANTHROPIC */
    llm_api_e       to;            /* the client's: OPENAI, ANTHROPIC,
                                      RESPONSES */

    /* the model the client called, where the backend's answer has none */
    const char     *model;
    size_t          model_len;

    /* the gateway's request id: the seed of ids the backend did not give */
    const char     *id;
    size_t          id_len;

    int64_t         created;       /* unix seconds: OpenAI's "created" */
    int64_t         est_input;     /* the prompt estimate: Anthropic's
                                      message_start, before the figure */
    int64_t         max_tokens;    /* the output limit the backend got */

    /*
     * The meter's reading of the backend's stream (llm_sse's usage, brought
     * up to date before each event reaches the translator): the figures
     * the client is shown, so that they are what the ledger bills.  NULL:
     * the translator's own reading of the events.
     */
    const llm_usage_t  *meter;
    int64_t             output_bound;  /* with the meter: the most of the
                                          output the ledger bills, 0 none */

    /* memory for what must be kept (Responses' final object), at most max */
    llm_tx_grow_pt  grow;
    void           *grow_ctx;
    size_t          max;

    unsigned        include_usage:1;   /* Chat: the client asked for the
                                          usage chunk */
} llm_tx_conf_t;


/* the longest of llm_tx_int()'s figures: "-9223372036854775808" */
#define LLM_TX_INT_LEN            20


struct cJSON;

/* n in decimal, as "%lld" writes it, into buf (LLM_TX_INT_LEN bytes at
   least, no NUL); returns the length */
size_t llm_tx_int(char *buf, int64_t n);

/*
 * cJSON_PrintUnformatted(root), byte for byte, but that a whole number
 * below 10^15 is written without the C library's floating point, which
 * the cJSON of Debian 12 goes through for every number.  The tree is
 * changed while it prints, and as it was on return: no other thread may
 * read it meanwhile.  NULL: no memory.
 */
char *llm_tx_print(const struct cJSON *root);


#endif /* _LLM_TX_H_INCLUDED_ */
