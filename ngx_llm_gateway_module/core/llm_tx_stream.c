
/*
 * The stream translator; see llm_tx_stream.h.
 *
 * Each backend's parser turns its events into a few operations (start,
 * text, tool start, tool arguments, finish, usage, end, error), which the
 * client's writer turns into events: two parsers and three writers, not
 * four translators.
 */


#include <stdio.h>
#include <string.h>

#include <cJSON.h>

#include "llm_sse.h"
#include "llm_tx_stream.h"


#define LLM_TX_OUT_SIZE           2048

/* the client's open block */
#define LLM_TX_NONE               0
#define LLM_TX_TEXT               1
#define LLM_TX_TOOL               2
#define LLM_TX_SKIP               3     /* a backend's block we skip */

/* tags of the derived ids */
#define LLM_TX_ID_ITEM            'i'
#define LLM_TX_ID_CALL            'c'

#define LLM_TX_TOOLS_MAX          64    /* the bits of tools_seen */


/* stop reasons, whatever the dialect */
enum {
    llm_tx_stop = 0,
    llm_tx_length,
    llm_tx_tool_use,
    llm_tx_filter,
    llm_tx_stop_sequence,
    llm_tx_pause
};


/* indexes into tokens */
enum {
    llm_tx_input = 0,
    llm_tx_cache_write,
    llm_tx_cache_read,
    llm_tx_output
};


/* the client's bytes of one backend event, sent in pieces as they fill */
typedef struct {
    char            buf[LLM_TX_OUT_SIZE];
    size_t          len;
    llm_tx_out_pt   out;
    void           *ctx;
    int             rc;
} llm_tx_out_t;


typedef struct {
    const char     *s;
    unsigned        reason;
} llm_tx_reason_t;


static const llm_tx_reason_t  llm_tx_openai_reasons[] = {
    { "stop", llm_tx_stop },
    { "length", llm_tx_length },
    { "tool_calls", llm_tx_tool_use },
    { "function_call", llm_tx_tool_use },
    { "content_filter", llm_tx_filter },
    { NULL, 0 }
};

static const llm_tx_reason_t  llm_tx_anthropic_reasons[] = {
    { "end_turn", llm_tx_stop },
    { "max_tokens", llm_tx_length },
    { "stop_sequence", llm_tx_stop_sequence },
    { "tool_use", llm_tx_tool_use },
    { "refusal", llm_tx_filter },
    { "pause_turn", llm_tx_pause },
    { NULL, 0 }
};

/* by reason: what Chat and Messages call it */
static const char  *llm_tx_openai_names[] = {
    "stop", "length", "tool_calls", "content_filter", "stop", "stop"
};

static const char  *llm_tx_anthropic_names[] = {
    "end_turn", "max_tokens", "tool_use", "refusal", "stop_sequence",
    "pause_turn"
};

/* Anthropic's error types; an OpenAI one not among them is api_error */
static const char  *llm_tx_anthropic_errors[] = {
    "invalid_request_error", "authentication_error", "permission_error",
    "not_found_error", "request_too_large", "rate_limit_error",
    "api_error", "overloaded_error", NULL
};


static int llm_tx_chat_event(llm_tx_stream_t *t, llm_tx_out_t *o,
    const char *data, size_t len);
static int llm_tx_chat_tools(llm_tx_stream_t *t, llm_tx_out_t *o,
    const cJSON *calls);
static void llm_tx_chat_usage(llm_tx_stream_t *t, const cJSON *usage);
static int llm_tx_messages_event(llm_tx_stream_t *t, llm_tx_out_t *o,
    const char *event, size_t event_len, const char *data, size_t len);
static const char *llm_tx_messages_named(const char *event, size_t len);
static int llm_tx_messages_block(llm_tx_stream_t *t, llm_tx_out_t *o,
    const cJSON *root, int start);
static void llm_tx_messages_usage(llm_tx_stream_t *t, const cJSON *usage);

static int llm_tx_start(llm_tx_stream_t *t, llm_tx_out_t *o,
    const cJSON *model);
static int llm_tx_text(llm_tx_stream_t *t, llm_tx_out_t *o, const char *s);
static int llm_tx_tool(llm_tx_stream_t *t, llm_tx_out_t *o, const char *id,
    const char *name);
static int llm_tx_args(llm_tx_stream_t *t, llm_tx_out_t *o, const char *s);
static int llm_tx_close(llm_tx_stream_t *t, llm_tx_out_t *o);
static int llm_tx_finish(llm_tx_stream_t *t, llm_tx_out_t *o,
    unsigned reason);
static int llm_tx_conclude(llm_tx_stream_t *t, llm_tx_out_t *o);
static int llm_tx_end(llm_tx_stream_t *t, llm_tx_out_t *o);
static int llm_tx_backend_error(llm_tx_stream_t *t, llm_tx_out_t *o,
    const cJSON *error);
static int llm_tx_fail(llm_tx_stream_t *t, llm_tx_out_t *o,
    const char *message);
static void llm_tx_resp_error(llm_tx_stream_t *t, llm_tx_out_t *o,
    const char *code, const char *message);
static void llm_tx_abort(llm_tx_stream_t *t, llm_tx_out_t *o);

static void llm_tx_chat_head(llm_tx_stream_t *t, llm_tx_out_t *o);
static void llm_tx_chat_tail(llm_tx_out_t *o, const char *reason);
static void llm_tx_chat_usage_chunk(llm_tx_stream_t *t, llm_tx_out_t *o);
static void llm_tx_msg_event(llm_tx_out_t *o, const char *type);
static void llm_tx_msg_delta(llm_tx_stream_t *t, llm_tx_out_t *o);
static void llm_tx_resp_event(llm_tx_stream_t *t, llm_tx_out_t *o,
    const char *type);
static void llm_tx_resp_object(llm_tx_stream_t *t, llm_tx_out_t *o,
    int final);
static void llm_tx_resp_item(llm_tx_stream_t *t, llm_tx_out_t *o,
    unsigned n, int final);
static void llm_tx_resp_item_id(llm_tx_stream_t *t, llm_tx_out_t *o,
    unsigned n);
static void llm_tx_resp_added(llm_tx_stream_t *t, llm_tx_out_t *o);
static void llm_tx_resp_done(llm_tx_stream_t *t, llm_tx_out_t *o);
static void llm_tx_resp_usage(llm_tx_stream_t *t, llm_tx_out_t *o);
static int llm_tx_keep(llm_tx_stream_t *t, const char *s, size_t n);
static int llm_tx_item(llm_tx_stream_t *t, unsigned tool, const char *id,
    const char *name);

static void llm_tx_id(const llm_tx_stream_t *t, int tag, unsigned n,
    char *hex);
static void llm_tx_model(llm_tx_stream_t *t, llm_tx_out_t *o);
static unsigned llm_tx_reason(const llm_tx_reason_t *r, const cJSON *item);
static int64_t llm_tx_tokens(const cJSON *obj, const char *name,
    int64_t dflt);
static const char *llm_tx_string(const cJSON *obj, const char *name);
static uint64_t llm_tx_hash(const char *s);
static int llm_tx_is_done(const char *s, size_t n);

static void llm_tx_put(llm_tx_out_t *o, const char *s, size_t n);
static void llm_tx_puts(llm_tx_out_t *o, const char *s);
static void llm_tx_put_str(llm_tx_out_t *o, const char *s, size_t n);
static void llm_tx_put_num(llm_tx_out_t *o, int64_t n);
static int llm_tx_flush(llm_tx_out_t *o);


void
llm_tx_stream_init(llm_tx_stream_t *t, const llm_tx_conf_t *cf)
{
    memset(t, 0, sizeof(llm_tx_stream_t));

    t->cf = *cf;
    t->tool_index = -1;

    llm_tx_id(t, 0, 0, t->hash);
}


int
llm_tx_stream_event(llm_tx_stream_t *t, const char *event,
    size_t event_len, const char *data, size_t len, unsigned skipped,
    llm_tx_out_pt out, void *ctx)
{
    int           rc;
    llm_tx_out_t  o;

    if (t->failed) {
        return -1;
    }

    if (t->done) {
        return 0;
    }

    o.len = 0;
    o.out = out;
    o.ctx = ctx;
    o.rc = 0;

    if (skipped) {
        rc = llm_tx_fail(t, &o, "upstream event too large");

    } else if (t->cf.from == LLM_API_ANTHROPIC) {
        rc = llm_tx_messages_event(t, &o, event, event_len, data, len);

    } else {
        rc = llm_tx_chat_event(t, &o, data, len);
    }

    if (llm_tx_flush(&o) != 0 || rc != 0) {
        t->failed = 1;
        return -1;
    }

    return 0;
}


int
llm_tx_stream_done(const llm_tx_stream_t *t)
{
    return t->done;
}


int
llm_tx_stream_abort(llm_tx_stream_t *t, llm_tx_out_pt out, void *ctx)
{
    llm_tx_out_t  o;

    if (t->failed) {
        return -1;
    }

    o.len = 0;
    o.out = out;
    o.ctx = ctx;
    o.rc = 0;

    llm_tx_abort(t, &o);

    if (llm_tx_flush(&o) != 0) {
        t->failed = 1;
        return -1;
    }

    return 0;
}


int
llm_tx_stream_fail(llm_tx_stream_t *t, const char *message,
    llm_tx_out_pt out, void *ctx)
{
    llm_tx_out_t  o;

    if (t->failed) {
        return -1;
    }

    if (t->done) {
        return 0;
    }

    o.len = 0;
    o.out = out;
    o.ctx = ctx;
    o.rc = 0;

    llm_tx_fail(t, &o, message);

    if (llm_tx_flush(&o) != 0) {
        t->failed = 1;
        return -1;
    }

    return 0;
}


/* the backend's parsers */

static int
llm_tx_chat_event(llm_tx_stream_t *t, llm_tx_out_t *o, const char *data,
    size_t len)
{
    int           rc;
    cJSON        *root;
    const cJSON  *choice, *delta, *item, *usage;

    if (llm_tx_is_done(data, len)) {
        return llm_tx_end(t, o);
    }

    root = cJSON_ParseWithLength(data, len);

    if (root == NULL || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return llm_tx_fail(t, o, "invalid upstream event");
    }

    item = cJSON_GetObjectItemCaseSensitive(root, "error");

    if (item != NULL && !cJSON_IsNull(item)) {
        rc = llm_tx_backend_error(t, o, item);
        goto done;
    }

    rc = llm_tx_start(t, o, cJSON_GetObjectItemCaseSensitive(root, "model"));
    if (rc != 0) {
        goto done;
    }

    choice = NULL;

    cJSON_ArrayForEach(item,
                       cJSON_GetObjectItemCaseSensitive(root, "choices"))
    {
        if (llm_tx_tokens(item, "index", 0) == 0) {
            choice = item;
            break;
        }
    }

    delta = cJSON_GetObjectItemCaseSensitive(choice, "delta");

    item = cJSON_GetObjectItemCaseSensitive(delta, "content");

    if (cJSON_IsString(item) && item->valuestring[0] != '\0') {
        rc = llm_tx_text(t, o, item->valuestring);
    }

    item = cJSON_GetObjectItemCaseSensitive(delta, "refusal");

    if (rc == 0 && cJSON_IsString(item) && item->valuestring[0] != '\0') {
        t->refused |= !t->finished;
        rc = llm_tx_text(t, o, item->valuestring);
    }

    if (rc == 0) {
        rc = llm_tx_chat_tools(t, o,
                     cJSON_GetObjectItemCaseSensitive(delta, "tool_calls"));
    }

    if (rc != 0 || t->done) {
        goto done;
    }

    /*
     * Some backends give their usage, cumulative, on every chunk: this
     * chunk's is read before its finish concludes, and only the usage
     * with or after the finish is the final one.
     */

    usage = cJSON_GetObjectItemCaseSensitive(root, "usage");

    if (cJSON_IsObject(usage)) {
        llm_tx_chat_usage(t, usage);
    }

    item = cJSON_GetObjectItemCaseSensitive(choice, "finish_reason");

    if (cJSON_IsString(item) && !t->finished) {
        t->have_usage = cJSON_IsObject(usage);
        rc = llm_tx_finish(t, o, llm_tx_reason(llm_tx_openai_reasons, item));

    } else if (cJSON_IsObject(usage) && t->finished) {
        t->have_usage = 1;
        rc = llm_tx_conclude(t, o);
    }

done:

    cJSON_Delete(root);

    return rc;
}


/*
 * Pieces of tool calls by index: a new index closes the open block, as a
 * Messages block must end before the next starts; coming back to one
 * closed is an error.  A piece of the same index (or none, read as 0)
 * with another id or name than the last call's is a call of its own:
 * servers that leave out or reuse the index would otherwise have two
 * calls merged, under the first one's name.
 */

static int
llm_tx_chat_tools(llm_tx_stream_t *t, llm_tx_out_t *o, const cJSON *calls)
{
    int           rc;
    int64_t       index;
    uint64_t      id, name;
    const char   *args;
    const cJSON  *call, *fn;

    if (t->finished) {
        return 0;
    }

    cJSON_ArrayForEach(call, calls) {

        index = llm_tx_tokens(call, "index", 0);
        fn = cJSON_GetObjectItemCaseSensitive(call, "function");

        id = llm_tx_hash(llm_tx_string(call, "id"));
        name = llm_tx_hash(llm_tx_string(fn, "name"));

        if (index == t->tool_index
            && ((id && t->tool_id && id != t->tool_id)
                || (name && t->tool_name && name != t->tool_name)))
        {
            /* the same index, another call: no interleaving */
            t->tools_seen &= ~((uint64_t) 1 << index);
            t->tool_index = -1;
        }

        if (index != t->tool_index || t->open != LLM_TX_TOOL) {

            if (index < 0 || index >= LLM_TX_TOOLS_MAX) {
                return llm_tx_fail(t, o, "tool call index out of range");
            }

            if (t->tools_seen & ((uint64_t) 1 << index)) {
                return llm_tx_fail(t, o, "interleaved tool calls");
            }

            t->tools_seen |= (uint64_t) 1 << index;
            t->tool_index = (int) index;
            t->tool_id = id;
            t->tool_name = name;

            rc = llm_tx_tool(t, o, llm_tx_string(call, "id"),
                             llm_tx_string(fn, "name"));
            if (rc != 0 || t->done) {
                return rc;
            }
        }

        args = llm_tx_string(fn, "arguments");

        if (args != NULL && args[0] != '\0') {
            rc = llm_tx_args(t, o, args);
            if (rc != 0) {
                return rc;
            }
        }
    }

    return 0;
}


/* OpenAI's prompt includes its cached part, Anthropic's input not */

static void
llm_tx_chat_usage(llm_tx_stream_t *t, const cJSON *usage)
{
    int64_t       in, cached;
    const cJSON  *item;

    in = llm_tx_tokens(usage, "prompt_tokens", 0);
    item = cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens_details");
    cached = llm_tx_tokens(item, "cached_tokens", 0);

    if (cached > in) {
        cached = in;
    }

    t->tokens[llm_tx_input] = in - cached;
    t->tokens[llm_tx_cache_write] = 0;
    t->tokens[llm_tx_cache_read] = cached;
    t->tokens[llm_tx_output] = llm_tx_tokens(usage, "completion_tokens", 0);

    item = cJSON_GetObjectItemCaseSensitive(usage,
                                            "completion_tokens_details");
    t->reasoning = llm_tx_tokens(item, "reasoning_tokens", 0);
}


static int
llm_tx_messages_event(llm_tx_stream_t *t, llm_tx_out_t *o, const char *event,
    size_t event_len, const char *data, size_t len)
{
    int           rc;
    cJSON        *root;
    const char   *type, *named;
    const cJSON  *item, *usage;

    named = llm_tx_messages_named(event, event_len);

    if (named && named[0] == '\0') {
        /* no Messages event, as the meter takes it: not even parsed */
        return 0;
    }

    root = cJSON_ParseWithLength(data, len);

    if (root == NULL || !cJSON_IsObject(root)) {
        cJSON_Delete(root);

        /* the meter reads these two by their name alone */
        if (named && strcmp(named, "message_stop") == 0) {
            return llm_tx_end(t, o);
        }

        if (named && strcmp(named, "error") == 0) {
            return llm_tx_backend_error(t, o, NULL);
        }

        return llm_tx_fail(t, o, "invalid upstream event");
    }

    type = named ? named : llm_tx_string(root, "type");
    rc = 0;

    if (type == NULL) {
        /* not an event of the Messages API: skipped as unknown types are */

    } else if (strcmp(type, "content_block_delta") == 0) {
        rc = llm_tx_messages_block(t, o, root, 0);

    } else if (strcmp(type, "content_block_start") == 0) {
        rc = llm_tx_messages_block(t, o, root, 1);

    } else if (strcmp(type, "content_block_stop") == 0) {

        if (t->from_block != LLM_TX_SKIP && t->from_block != LLM_TX_NONE) {
            rc = llm_tx_close(t, o);
        }

        t->from_block = LLM_TX_NONE;

    } else if (strcmp(type, "message_start") == 0) {
        item = cJSON_GetObjectItemCaseSensitive(root, "message");
        llm_tx_messages_usage(t,
                            cJSON_GetObjectItemCaseSensitive(item, "usage"));
        rc = llm_tx_start(t, o,
                          cJSON_GetObjectItemCaseSensitive(item, "model"));

    } else if (strcmp(type, "message_delta") == 0) {
        item = cJSON_GetObjectItemCaseSensitive(root, "delta");
        item = cJSON_GetObjectItemCaseSensitive(item, "stop_reason");

        usage = cJSON_GetObjectItemCaseSensitive(root, "usage");

        /* as for Chat: the usage first, final only with the finish */
        llm_tx_messages_usage(t, usage);

        rc = llm_tx_start(t, o, NULL);

        if (rc == 0 && cJSON_IsString(item) && !t->finished) {
            t->have_usage = cJSON_IsObject(usage);
            rc = llm_tx_finish(t, o,
                               llm_tx_reason(llm_tx_anthropic_reasons, item));

        } else if (rc == 0 && cJSON_IsObject(usage) && t->finished) {
            t->have_usage = 1;
            rc = llm_tx_conclude(t, o);
        }

    } else if (strcmp(type, "message_stop") == 0) {
        rc = llm_tx_end(t, o);

    } else if (strcmp(type, "error") == 0) {
        rc = llm_tx_backend_error(t, o,
                                cJSON_GetObjectItemCaseSensitive(root,
                                                                 "error"));
    }

    /* ping and the types to come: nothing */

    cJSON_Delete(root);

    return rc;
}


/*
 * The event line's name where the meter reads it over the data's "type"
 * (llm_sse_kind()), so that an event whose two disagree is translated as
 * it is billed; the end of a Responses stream, which the meter takes for
 * no Messages event, as "" (skipped).  NULL: the data's "type" says.
 */

static const char *
llm_tx_messages_named(const char *event, size_t len)
{
    switch (llm_sse_kind(event, len)) {

    case llm_sse_message_start:
        return "message_start";

    case llm_sse_message_delta:
        return "message_delta";

    case llm_sse_message_stop:
        return "message_stop";

    case llm_sse_error:
        return "error";

    case llm_sse_response_end:
        return "";

    default:
        return NULL;
    }
}


static int
llm_tx_messages_block(llm_tx_stream_t *t, llm_tx_out_t *o,
    const cJSON *root, int start)
{
    int           rc;
    const char   *type, *s;
    const cJSON  *item;

    rc = llm_tx_start(t, o, NULL);
    if (rc != 0) {
        return rc;
    }

    item = cJSON_GetObjectItemCaseSensitive(root,
                                            start ? "content_block" : "delta");
    type = llm_tx_string(item, "type");

    if (type == NULL) {
        return 0;
    }

    if (start) {

        if (strcmp(type, "text") == 0) {
            t->from_block = LLM_TX_TEXT;
            s = llm_tx_string(item, "text");

            return (s != NULL && s[0] != '\0') ? llm_tx_text(t, o, s) : 0;
        }

        if (strcmp(type, "tool_use") == 0) {
            t->from_block = LLM_TX_TOOL;

            return llm_tx_tool(t, o, llm_tx_string(item, "id"),
                               llm_tx_string(item, "name"));
        }

        /* thinking, redacted_thinking, server tools: no equivalent */
        t->from_block = LLM_TX_SKIP;

        return 0;
    }

    if (t->from_block == LLM_TX_TEXT && strcmp(type, "text_delta") == 0) {
        s = llm_tx_string(item, "text");

        return (s != NULL && s[0] != '\0') ? llm_tx_text(t, o, s) : 0;
    }

    if (t->from_block == LLM_TX_TOOL
        && strcmp(type, "input_json_delta") == 0)
    {
        s = llm_tx_string(item, "partial_json");

        return (s != NULL && s[0] != '\0') ? llm_tx_args(t, o, s) : 0;
    }

    return 0;
}


/* each figure cumulative: one given replaces the one before */

static void
llm_tx_messages_usage(llm_tx_stream_t *t, const cJSON *usage)
{
    if (!cJSON_IsObject(usage)) {
        return;
    }

    t->tokens[llm_tx_input] = llm_tx_tokens(usage, "input_tokens",
                                            t->tokens[llm_tx_input]);
    t->tokens[llm_tx_cache_write] =
        llm_tx_tokens(usage, "cache_creation_input_tokens",
                      t->tokens[llm_tx_cache_write]);
    t->tokens[llm_tx_cache_read] =
        llm_tx_tokens(usage, "cache_read_input_tokens",
                      t->tokens[llm_tx_cache_read]);
    t->tokens[llm_tx_output] = llm_tx_tokens(usage, "output_tokens",
                                             t->tokens[llm_tx_output]);
}


/* the operations, written in the client's dialect */

static int
llm_tx_start(llm_tx_stream_t *t, llm_tx_out_t *o, const cJSON *model)
{
    size_t  n;

    if (t->started) {
        return 0;
    }

    t->started = 1;

    if (cJSON_IsString(model)) {
        n = strlen(model->valuestring);

        if (n > 0 && n < sizeof(t->model)) {
            memcpy(t->model, model->valuestring, n);
            t->model_len = n;
        }
    }

    switch (t->cf.to) {

    case LLM_API_ANTHROPIC:
        llm_tx_msg_event(o, "message_start");
        llm_tx_puts(o, ",\"message\":{\"id\":\"msg_");
        llm_tx_puts(o, t->hash);
        llm_tx_puts(o, "\",\"type\":\"message\",\"role\":\"assistant\","
                       "\"model\":");
        llm_tx_model(t, o);
        llm_tx_puts(o, ",\"content\":[],\"stop_reason\":null,"
                       "\"stop_sequence\":null,\"usage\":{\"input_tokens\":");
        llm_tx_put_num(o, t->cf.est_input);
        llm_tx_puts(o, ",\"output_tokens\":0}}}\n\n");
        break;

    case LLM_API_RESPONSES:
        llm_tx_resp_event(t, o, "response.created");
        llm_tx_puts(o, ",\"response\":");
        llm_tx_resp_object(t, o, 0);
        llm_tx_puts(o, "}\n\n");

        llm_tx_resp_event(t, o, "response.in_progress");
        llm_tx_puts(o, ",\"response\":");
        llm_tx_resp_object(t, o, 0);
        llm_tx_puts(o, "}\n\n");
        break;

    default:
        llm_tx_chat_head(t, o);
        llm_tx_puts(o, "{\"role\":\"assistant\",\"content\":\"\"}");
        llm_tx_chat_tail(o, NULL);
        break;
    }

    return 0;
}


static int
llm_tx_text(llm_tx_stream_t *t, llm_tx_out_t *o, const char *s)
{
    int           rc;
    size_t        n;
    llm_tx_stream_item_t  *it;

    /* after the finish: the client's stream is past its content */
    if (t->finished) {
        return 0;
    }

    n = strlen(s);

    if (t->open != LLM_TX_TEXT) {
        rc = llm_tx_close(t, o);
        if (rc != 0) {
            return rc;
        }

        t->open = LLM_TX_TEXT;

        switch (t->cf.to) {

        case LLM_API_ANTHROPIC:
            llm_tx_msg_event(o, "content_block_start");
            llm_tx_puts(o, ",\"index\":");
            llm_tx_put_num(o, t->block++);
            llm_tx_puts(o, ",\"content_block\":{\"type\":\"text\","
                           "\"text\":\"\"}}\n\n");
            break;

        case LLM_API_RESPONSES:
            rc = llm_tx_item(t, 0, NULL, NULL);
            if (rc != 0) {
                return (rc > 0) ? llm_tx_fail(t, o, "too many output items")
                                : rc;
            }

            llm_tx_resp_added(t, o);
            break;

        default:
            break;
        }
    }

    switch (t->cf.to) {

    case LLM_API_ANTHROPIC:
        llm_tx_msg_event(o, "content_block_delta");
        llm_tx_puts(o, ",\"index\":");
        llm_tx_put_num(o, t->block - 1);
        llm_tx_puts(o, ",\"delta\":{\"type\":\"text_delta\",\"text\":");
        llm_tx_put_str(o, s, n);
        llm_tx_puts(o, "}}\n\n");
        break;

    case LLM_API_RESPONSES:
        if (llm_tx_keep(t, s, n) != 0) {
            return -1;
        }

        it = &t->items[t->nitems - 1];
        it->text_len += n;

        llm_tx_resp_event(t, o, "response.output_text.delta");
        llm_tx_resp_item_id(t, o, t->nitems - 1);
        llm_tx_puts(o, ",\"content_index\":0,\"delta\":");
        llm_tx_put_str(o, s, n);
        llm_tx_puts(o, ",\"logprobs\":[]}\n\n");
        break;

    default:
        llm_tx_chat_head(t, o);
        llm_tx_puts(o, "{\"content\":");
        llm_tx_put_str(o, s, n);
        llm_tx_puts(o, "}");
        llm_tx_chat_tail(o, NULL);
        break;
    }

    return 0;
}


static int
llm_tx_tool(llm_tx_stream_t *t, llm_tx_out_t *o, const char *id,
    const char *name)
{
    int    rc;
    char   hex[17];

    if (t->finished) {
        return 0;
    }

    rc = llm_tx_close(t, o);
    if (rc != 0) {
        return rc;
    }

    t->open = LLM_TX_TOOL;
    name = name ? name : "";

    if (id == NULL || id[0] == '\0') {
        llm_tx_id(t, LLM_TX_ID_CALL, t->ntools, hex);
    }

    switch (t->cf.to) {

    case LLM_API_ANTHROPIC:
        llm_tx_msg_event(o, "content_block_start");
        llm_tx_puts(o, ",\"index\":");
        llm_tx_put_num(o, t->block++);
        llm_tx_puts(o, ",\"content_block\":{\"type\":\"tool_use\",\"id\":");

        if (id == NULL || id[0] == '\0') {
            llm_tx_puts(o, "\"toolu_");
            llm_tx_puts(o, hex);
            llm_tx_puts(o, "\"");

        } else {
            llm_tx_put_str(o, id, strlen(id));
        }

        llm_tx_puts(o, ",\"name\":");
        llm_tx_put_str(o, name, strlen(name));
        llm_tx_puts(o, ",\"input\":{}}}\n\n");
        break;

    case LLM_API_RESPONSES:
        rc = llm_tx_item(t, 1, id, name);

        if (rc == 0 && (id == NULL || id[0] == '\0')) {
            t->items[t->nitems - 1].call_off = t->mem_len;
            rc = llm_tx_keep(t, "call_", 5);
            rc = rc ? rc : llm_tx_keep(t, hex, 16);
            t->items[t->nitems - 1].call_len = 21;
            t->items[t->nitems - 1].text_off = t->mem_len;
        }

        if (rc != 0) {
            return (rc > 0) ? llm_tx_fail(t, o, "too many output items") : rc;
        }

        llm_tx_resp_added(t, o);
        break;

    default:
        llm_tx_chat_head(t, o);
        llm_tx_puts(o, "{\"tool_calls\":[{\"index\":");
        llm_tx_put_num(o, t->ntools);
        llm_tx_puts(o, ",\"id\":");

        if (id == NULL || id[0] == '\0') {
            llm_tx_puts(o, "\"call_");
            llm_tx_puts(o, hex);
            llm_tx_puts(o, "\"");

        } else {
            llm_tx_put_str(o, id, strlen(id));
        }

        llm_tx_puts(o, ",\"type\":\"function\",\"function\":{\"name\":");
        llm_tx_put_str(o, name, strlen(name));
        llm_tx_puts(o, ",\"arguments\":\"\"}}]}");
        llm_tx_chat_tail(o, NULL);
        break;
    }

    t->ntools++;

    return 0;
}


static int
llm_tx_args(llm_tx_stream_t *t, llm_tx_out_t *o, const char *s)
{
    size_t  n;

    if (t->open != LLM_TX_TOOL) {
        return 0;
    }

    n = strlen(s);

    switch (t->cf.to) {

    case LLM_API_ANTHROPIC:
        llm_tx_msg_event(o, "content_block_delta");
        llm_tx_puts(o, ",\"index\":");
        llm_tx_put_num(o, t->block - 1);
        llm_tx_puts(o, ",\"delta\":{\"type\":\"input_json_delta\","
                       "\"partial_json\":");
        llm_tx_put_str(o, s, n);
        llm_tx_puts(o, "}}\n\n");
        break;

    case LLM_API_RESPONSES:
        if (llm_tx_keep(t, s, n) != 0) {
            return -1;
        }

        t->items[t->nitems - 1].text_len += n;

        llm_tx_resp_event(t, o, "response.function_call_arguments.delta");
        llm_tx_resp_item_id(t, o, t->nitems - 1);
        llm_tx_puts(o, ",\"delta\":");
        llm_tx_put_str(o, s, n);
        llm_tx_puts(o, "}\n\n");
        break;

    default:
        llm_tx_chat_head(t, o);
        llm_tx_puts(o, "{\"tool_calls\":[{\"index\":");
        llm_tx_put_num(o, t->ntools - 1);
        llm_tx_puts(o, ",\"function\":{\"arguments\":");
        llm_tx_put_str(o, s, n);
        llm_tx_puts(o, "}}]}");
        llm_tx_chat_tail(o, NULL);
        break;
    }

    return 0;
}


/* Chat has no block ends; Messages' and Responses' are written */

static int
llm_tx_close(llm_tx_stream_t *t, llm_tx_out_t *o)
{
    if (t->open == LLM_TX_NONE) {
        return 0;
    }

    switch (t->cf.to) {

    case LLM_API_ANTHROPIC:
        llm_tx_msg_event(o, "content_block_stop");
        llm_tx_puts(o, ",\"index\":");
        llm_tx_put_num(o, t->block - 1);
        llm_tx_puts(o, "}\n\n");
        break;

    case LLM_API_RESPONSES:
        llm_tx_resp_done(t, o);
        break;

    default:
        break;
    }

    t->open = LLM_TX_NONE;

    return 0;
}


static int
llm_tx_finish(llm_tx_stream_t *t, llm_tx_out_t *o, unsigned reason)
{
    int  rc;

    if (t->finished) {
        return 0;
    }

    t->finished = 1;

    /*
     * Backends may end tool calls with "stop" (a forced tool_choice,
     * several OpenAI-compatible servers): the client's agent loop waits
     * for tool_use, as llm_tx_body.c gives for a whole answer; and
     * Messages has a refusal stop reason where Chat has refusal deltas.
     */

    if (reason == llm_tx_stop && t->refused
        && t->cf.to == LLM_API_ANTHROPIC)
    {
        reason = llm_tx_filter;

    } else if (reason == llm_tx_stop && t->ntools > 0) {
        reason = llm_tx_tool_use;
    }

    t->reason = reason;

    if (t->cf.to == LLM_API_RESPONSES && t->open != LLM_TX_NONE
        && (reason == llm_tx_length || reason == llm_tx_filter))
    {
        t->items[t->nitems - 1].incomplete = 1;
    }

    rc = llm_tx_close(t, o);
    if (rc != 0) {
        return rc;
    }

    if (t->cf.to == LLM_API_OPENAI) {
        llm_tx_chat_head(t, o);
        llm_tx_puts(o, "{}");
        llm_tx_chat_tail(o, llm_tx_openai_names[reason]);
    }

    return llm_tx_conclude(t, o);
}


/* the stop reason and the usage are both known */

static int
llm_tx_conclude(llm_tx_stream_t *t, llm_tx_out_t *o)
{
    int  rc;

    if (!t->finished || !t->have_usage || t->concluded) {
        return 0;
    }

    /*
     * With the meter's figures, not before the backend's terminal event:
     * a usage the backend repeats after its finish may raise them, and
     * the client is shown what is billed.
     */
    if (t->cf.meter && !t->ending) {
        return 0;
    }

    /* nothing opens after the finish; closed again all the same */
    rc = llm_tx_close(t, o);
    if (rc != 0) {
        return rc;
    }

    t->concluded = 1;

    switch (t->cf.to) {

    case LLM_API_ANTHROPIC:
        llm_tx_msg_delta(t, o);
        break;

    case LLM_API_RESPONSES:
        llm_tx_resp_event(t, o, (t->reason == llm_tx_length
                                 || t->reason == llm_tx_filter)
                                ? "response.incomplete"
                                : "response.completed");
        llm_tx_puts(o, ",\"response\":");
        llm_tx_resp_object(t, o, 1);
        llm_tx_puts(o, "}\n\n");
        t->done = 1;
        break;

    default:
        if (t->cf.include_usage) {
            llm_tx_chat_usage_chunk(t, o);
        }

        break;
    }

    return 0;
}


/* the backend's stream ended ([DONE], message_stop) */

static int
llm_tx_end(llm_tx_stream_t *t, llm_tx_out_t *o)
{
    int  rc;

    rc = llm_tx_start(t, o, NULL);

    if (rc == 0) {
        rc = llm_tx_finish(t, o, llm_tx_stop);
    }

    if (rc != 0) {
        return rc;
    }

    /* without the usage: the figures known, as the backend gave none */
    t->have_usage = 1;
    t->ending = 1;

    rc = llm_tx_conclude(t, o);
    if (rc != 0) {
        return rc;
    }

    switch (t->cf.to) {

    case LLM_API_ANTHROPIC:
        llm_tx_msg_event(o, "message_stop");
        llm_tx_puts(o, "}\n\n");
        break;

    case LLM_API_RESPONSES:
        break;

    default:
        llm_tx_puts(o, "data: [DONE]\n\n");
        break;
    }

    t->done = 1;

    return 0;
}


static int
llm_tx_backend_error(llm_tx_stream_t *t, llm_tx_out_t *o,
    const cJSON *error)
{
    unsigned     i;
    const char  *type, *message, *code;

    llm_tx_abort(t, o);

    type = llm_tx_string(error, "type");
    message = llm_tx_string(error, "message");
    code = llm_tx_string(error, "code");
    message = message ? message : "upstream error";

    switch (t->cf.to) {

    case LLM_API_ANTHROPIC:

        for (i = 0; type && llm_tx_anthropic_errors[i]; i++) {
            if (strcmp(type, llm_tx_anthropic_errors[i]) == 0) {
                break;
            }
        }

        if (type == NULL || llm_tx_anthropic_errors[i] == NULL) {
            type = (type && strstr(type, "rate_limit")) ? "rate_limit_error"
                                                        : "api_error";
        }

        llm_tx_msg_event(o, "error");
        llm_tx_puts(o, ",\"error\":{\"type\":");
        llm_tx_put_str(o, type, strlen(type));
        llm_tx_puts(o, ",\"message\":");
        llm_tx_put_str(o, message, strlen(message));
        llm_tx_puts(o, "}}\n\n");
        break;

    case LLM_API_RESPONSES:
        code = code ? code : (type ? type : "server_error");

        /* as llm_sse_error_event(): "error" makes the SDKs raise it */
        llm_tx_resp_error(t, o, code, message);
        break;

    default:

        if (type == NULL || strcmp(type, "api_error") == 0
            || strcmp(type, "overloaded_error") == 0)
        {
            type = "server_error";
        }

        llm_tx_puts(o, "data: {\"error\":{\"message\":");
        llm_tx_put_str(o, message, strlen(message));
        llm_tx_puts(o, ",\"type\":");
        llm_tx_put_str(o, type, strlen(type));
        llm_tx_puts(o, ",\"param\":null,\"code\":null}}\n\n");
        break;
    }

    t->done = 1;
    t->errored = 1;

    return 0;
}


/* what the translator cannot carry on from: the gateway's error event */

static int
llm_tx_fail(llm_tx_stream_t *t, llm_tx_out_t *o, const char *message)
{
    size_t  n;
    char    buf[512];

    llm_tx_abort(t, o);

    if (t->cf.to == LLM_API_RESPONSES) {
        /* llm_sse_error_event()'s shape, in the stream's numbering */
        llm_tx_resp_error(t, o, "upstream_error", message);

    } else {
        n = llm_sse_error_event(t->cf.to, message, buf, sizeof(buf));
        llm_tx_put(o, buf, n);
    }

    t->errored = 1;

    return 0;
}


static void
llm_tx_resp_error(llm_tx_stream_t *t, llm_tx_out_t *o, const char *code,
    const char *message)
{
    llm_tx_resp_event(t, o, "error");
    llm_tx_puts(o, ",\"code\":");
    llm_tx_put_str(o, code, strlen(code));
    llm_tx_puts(o, ",\"message\":");
    llm_tx_put_str(o, message, strlen(message));
    llm_tx_puts(o, ",\"param\":null,\"error\":{\"message\":");
    llm_tx_put_str(o, message, strlen(message));
    llm_tx_puts(o, ",\"type\":\"server_error\",\"param\":null,"
                   "\"code\":");
    llm_tx_put_str(o, code, strlen(code));
    llm_tx_puts(o, "}}\n\n");
}


/* see llm_tx_stream_abort() */

static void
llm_tx_abort(llm_tx_stream_t *t, llm_tx_out_t *o)
{
    if (t->done) {
        return;
    }

    if (t->cf.to == LLM_API_ANTHROPIC && t->open != LLM_TX_NONE) {
        llm_tx_msg_event(o, "content_block_stop");
        llm_tx_puts(o, ",\"index\":");
        llm_tx_put_num(o, t->block - 1);
        llm_tx_puts(o, "}\n\n");
    }

    t->open = LLM_TX_NONE;
    t->done = 1;
}


/* the client's events */

static void
llm_tx_chat_head(llm_tx_stream_t *t, llm_tx_out_t *o)
{
    llm_tx_puts(o, "data: {\"id\":\"chatcmpl-");
    llm_tx_puts(o, t->hash);
    llm_tx_puts(o, "\",\"object\":\"chat.completion.chunk\",\"created\":");
    llm_tx_put_num(o, t->cf.created);
    llm_tx_puts(o, ",\"model\":");
    llm_tx_model(t, o);
    llm_tx_puts(o, ",\"choices\":[{\"index\":0,\"delta\":");
}


static void
llm_tx_chat_tail(llm_tx_out_t *o, const char *reason)
{
    llm_tx_puts(o, ",\"logprobs\":null,\"finish_reason\":");

    if (reason == NULL) {
        llm_tx_puts(o, "null}]}\n\n");
        return;
    }

    llm_tx_puts(o, "\"");
    llm_tx_puts(o, reason);
    llm_tx_puts(o, "\"}]}\n\n");
}


/*
 * The figures the client is shown, in Messages' terms (the prompt without
 * its cache reads and writes): the meter's when there is one, else the
 * translator's own.
 */

static void
llm_tx_figures(const llm_tx_stream_t *t, int64_t *f, int64_t *reasoning)
{
    uint64_t            in, part;
    const llm_usage_t  *u = t->cf.meter;

    if (u == NULL) {
        memcpy(f, t->tokens, sizeof(t->tokens));
        *reasoning = t->reasoning;
        return;
    }

    in = u->input_tokens;

    /* each within the prompt, and the two together too */
    f[llm_tx_cache_read] = (int64_t) (u->cached_input_tokens < in
                                      ? u->cached_input_tokens : in);
    part = in - (uint64_t) f[llm_tx_cache_read];
    f[llm_tx_cache_write] = (int64_t) (u->cache_write_tokens < part
                                       ? u->cache_write_tokens : part);
    f[llm_tx_input] = (int64_t) (part - (uint64_t) f[llm_tx_cache_write]);
    f[llm_tx_output] = (int64_t) u->output_tokens;

    /* the ledger bills no more output than the request could make */
    if (t->cf.output_bound > 0 && f[llm_tx_output] > t->cf.output_bound) {
        f[llm_tx_output] = t->cf.output_bound;
    }

    *reasoning = (int64_t) ((int64_t) u->reasoning_tokens < f[llm_tx_output]
                            ? (int64_t) u->reasoning_tokens
                            : f[llm_tx_output]);
}


static void
llm_tx_chat_usage_chunk(llm_tx_stream_t *t, llm_tx_out_t *o)
{
    int64_t  in, f[4], reasoning;

    llm_tx_figures(t, f, &reasoning);

    in = f[llm_tx_input] + f[llm_tx_cache_write] + f[llm_tx_cache_read];

    llm_tx_puts(o, "data: {\"id\":\"chatcmpl-");
    llm_tx_puts(o, t->hash);
    llm_tx_puts(o, "\",\"object\":\"chat.completion.chunk\",\"created\":");
    llm_tx_put_num(o, t->cf.created);
    llm_tx_puts(o, ",\"model\":");
    llm_tx_model(t, o);
    llm_tx_puts(o, ",\"choices\":[],\"usage\":{\"prompt_tokens\":");
    llm_tx_put_num(o, in);
    llm_tx_puts(o, ",\"completion_tokens\":");
    llm_tx_put_num(o, f[llm_tx_output]);
    llm_tx_puts(o, ",\"total_tokens\":");
    llm_tx_put_num(o, in + f[llm_tx_output]);
    llm_tx_puts(o, ",\"prompt_tokens_details\":{\"cached_tokens\":");
    llm_tx_put_num(o, f[llm_tx_cache_read]);
    llm_tx_puts(o, "}}}\n\n");
}


/* event: TYPE, data: {"type":"TYPE" and what the caller adds */

static void
llm_tx_msg_event(llm_tx_out_t *o, const char *type)
{
    llm_tx_puts(o, "event: ");
    llm_tx_puts(o, type);
    llm_tx_puts(o, "\ndata: {\"type\":\"");
    llm_tx_puts(o, type);
    llm_tx_puts(o, "\"");
}


static void
llm_tx_msg_delta(llm_tx_stream_t *t, llm_tx_out_t *o)
{
    int64_t  f[4], reasoning;

    llm_tx_figures(t, f, &reasoning);

    llm_tx_msg_event(o, "message_delta");
    llm_tx_puts(o, ",\"delta\":{\"stop_reason\":\"");
    llm_tx_puts(o, llm_tx_anthropic_names[t->reason]);
    llm_tx_puts(o, "\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":");
    llm_tx_put_num(o, f[llm_tx_input]);
    llm_tx_puts(o, ",\"cache_creation_input_tokens\":");
    llm_tx_put_num(o, f[llm_tx_cache_write]);
    llm_tx_puts(o, ",\"cache_read_input_tokens\":");
    llm_tx_put_num(o, f[llm_tx_cache_read]);
    llm_tx_puts(o, ",\"output_tokens\":");
    llm_tx_put_num(o, f[llm_tx_output]);
    llm_tx_puts(o, "}}\n\n");
}


static void
llm_tx_resp_event(llm_tx_stream_t *t, llm_tx_out_t *o, const char *type)
{
    llm_tx_msg_event(o, type);
    llm_tx_puts(o, ",\"sequence_number\":");
    llm_tx_put_num(o, (int64_t) t->seq++);
}


static void
llm_tx_resp_object(llm_tx_stream_t *t, llm_tx_out_t *o, int final)
{
    unsigned  i, incomplete;

    incomplete = final && (t->reason == llm_tx_length
                           || t->reason == llm_tx_filter);

    llm_tx_puts(o, "{\"id\":\"resp_");
    llm_tx_puts(o, t->hash);
    llm_tx_puts(o, "\",\"object\":\"response\",\"created_at\":");
    llm_tx_put_num(o, t->cf.created);
    llm_tx_puts(o, !final ? ",\"status\":\"in_progress\""
                   : incomplete ? ",\"status\":\"incomplete\""
                   : ",\"status\":\"completed\"");
    llm_tx_puts(o, ",\"model\":");
    llm_tx_model(t, o);
    llm_tx_puts(o, ",\"output\":[");

    for (i = 0; final && i < t->nitems; i++) {
        if (i) {
            llm_tx_puts(o, ",");
        }

        llm_tx_resp_item(t, o, i, 1);
    }

    llm_tx_puts(o, "],\"usage\":");

    if (final) {
        llm_tx_resp_usage(t, o);

    } else {
        llm_tx_puts(o, "null");
    }

    llm_tx_puts(o, ",\"error\":null,\"incomplete_details\":");

    if (incomplete) {
        llm_tx_puts(o, (t->reason == llm_tx_length)
                       ? "{\"reason\":\"max_output_tokens\"}"
                       : "{\"reason\":\"content_filter\"}");

    } else {
        llm_tx_puts(o, "null");
    }

    llm_tx_puts(o, ",\"instructions\":null,\"max_output_tokens\":");

    if (t->cf.max_tokens > 0) {
        llm_tx_put_num(o, t->cf.max_tokens);

    } else {
        llm_tx_puts(o, "null");
    }

    llm_tx_puts(o, ",\"parallel_tool_calls\":true,"
                   "\"previous_response_id\":null,"
                   "\"reasoning\":{\"effort\":null,\"summary\":null},"
                   "\"store\":false,\"temperature\":null,"
                   "\"text\":{\"format\":{\"type\":\"text\"}},"
                   "\"tool_choice\":\"auto\",\"tools\":[],"
                   "\"top_p\":null,\"truncation\":\"disabled\","
                   "\"user\":null,\"metadata\":{}}");
}


/* an output item, as output_item.added (empty) or .done and the end */

static void
llm_tx_resp_item(llm_tx_stream_t *t, llm_tx_out_t *o, unsigned n, int final)
{
    char                  hex[17];
    llm_tx_stream_item_t  *it;

    it = &t->items[n];
    llm_tx_id(t, LLM_TX_ID_ITEM, n, hex);

    llm_tx_puts(o, it->tool ? "{\"id\":\"fc_" : "{\"id\":\"msg_");
    llm_tx_puts(o, hex);
    llm_tx_puts(o, it->tool ? "\",\"type\":\"function_call\""
                            : "\",\"type\":\"message\"");
    llm_tx_puts(o, !final ? ",\"status\":\"in_progress\""
                   : it->incomplete ? ",\"status\":\"incomplete\""
                   : ",\"status\":\"completed\"");

    if (it->tool) {
        llm_tx_puts(o, ",\"arguments\":");
        llm_tx_put_str(o, t->mem + it->text_off, final ? it->text_len : 0);
        llm_tx_puts(o, ",\"call_id\":");
        llm_tx_put_str(o, t->mem + it->call_off, it->call_len);
        llm_tx_puts(o, ",\"name\":");
        llm_tx_put_str(o, t->mem + it->name_off, it->name_len);
        llm_tx_puts(o, "}");
        return;
    }

    llm_tx_puts(o, ",\"role\":\"assistant\",\"content\":[");

    if (final) {
        llm_tx_puts(o, "{\"type\":\"output_text\",\"text\":");
        llm_tx_put_str(o, t->mem + it->text_off, it->text_len);
        llm_tx_puts(o, ",\"annotations\":[]}");
    }

    llm_tx_puts(o, "]}");
}


/* ,"item_id":"...","output_index":n */

static void
llm_tx_resp_item_id(llm_tx_stream_t *t, llm_tx_out_t *o, unsigned n)
{
    char  hex[17];

    llm_tx_id(t, LLM_TX_ID_ITEM, n, hex);

    llm_tx_puts(o, t->items[n].tool ? ",\"item_id\":\"fc_"
                                    : ",\"item_id\":\"msg_");
    llm_tx_puts(o, hex);
    llm_tx_puts(o, "\",\"output_index\":");
    llm_tx_put_num(o, n);
}


static void
llm_tx_resp_added(llm_tx_stream_t *t, llm_tx_out_t *o)
{
    unsigned  n;

    n = t->nitems - 1;

    llm_tx_resp_event(t, o, "response.output_item.added");
    llm_tx_puts(o, ",\"output_index\":");
    llm_tx_put_num(o, n);
    llm_tx_puts(o, ",\"item\":");
    llm_tx_resp_item(t, o, n, 0);
    llm_tx_puts(o, "}\n\n");

    if (t->items[n].tool) {
        return;
    }

    llm_tx_resp_event(t, o, "response.content_part.added");
    llm_tx_resp_item_id(t, o, n);
    llm_tx_puts(o, ",\"content_index\":0,\"part\":{\"type\":\"output_text\","
                   "\"text\":\"\",\"annotations\":[]}}\n\n");
}


static void
llm_tx_resp_done(llm_tx_stream_t *t, llm_tx_out_t *o)
{
    unsigned               n;
    llm_tx_stream_item_t  *it;

    n = t->nitems - 1;
    it = &t->items[n];

    if (it->tool) {
        llm_tx_resp_event(t, o, "response.function_call_arguments.done");
        llm_tx_resp_item_id(t, o, n);
        llm_tx_puts(o, ",\"name\":");
        llm_tx_put_str(o, t->mem + it->name_off, it->name_len);
        llm_tx_puts(o, ",\"arguments\":");
        llm_tx_put_str(o, t->mem + it->text_off, it->text_len);
        llm_tx_puts(o, "}\n\n");

    } else {
        llm_tx_resp_event(t, o, "response.output_text.done");
        llm_tx_resp_item_id(t, o, n);
        llm_tx_puts(o, ",\"content_index\":0,\"text\":");
        llm_tx_put_str(o, t->mem + it->text_off, it->text_len);
        llm_tx_puts(o, ",\"logprobs\":[]}\n\n");

        llm_tx_resp_event(t, o, "response.content_part.done");
        llm_tx_resp_item_id(t, o, n);
        llm_tx_puts(o, ",\"content_index\":0,\"part\":{\"type\":"
                       "\"output_text\",\"text\":");
        llm_tx_put_str(o, t->mem + it->text_off, it->text_len);
        llm_tx_puts(o, ",\"annotations\":[]}}\n\n");
    }

    llm_tx_resp_event(t, o, "response.output_item.done");
    llm_tx_puts(o, ",\"output_index\":");
    llm_tx_put_num(o, n);
    llm_tx_puts(o, ",\"item\":");
    llm_tx_resp_item(t, o, n, 1);
    llm_tx_puts(o, "}\n\n");
}


/* Responses' input_tokens, as OpenAI's prompt_tokens, include the cache */

static void
llm_tx_resp_usage(llm_tx_stream_t *t, llm_tx_out_t *o)
{
    int64_t  in, f[4], reasoning;

    llm_tx_figures(t, f, &reasoning);

    in = f[llm_tx_input] + f[llm_tx_cache_write] + f[llm_tx_cache_read];

    llm_tx_puts(o, "{\"input_tokens\":");
    llm_tx_put_num(o, in);
    llm_tx_puts(o, ",\"input_tokens_details\":{\"cached_tokens\":");
    llm_tx_put_num(o, f[llm_tx_cache_read]);
    llm_tx_puts(o, "},\"output_tokens\":");
    llm_tx_put_num(o, f[llm_tx_output]);
    llm_tx_puts(o, ",\"output_tokens_details\":{\"reasoning_tokens\":");
    llm_tx_put_num(o, reasoning);
    llm_tx_puts(o, "},\"total_tokens\":");
    llm_tx_put_num(o, in + f[llm_tx_output]);
    llm_tx_puts(o, "}");
}


/* appends to the kept memory; -1 beyond cf->max or if it cannot grow */

static int
llm_tx_keep(llm_tx_stream_t *t, const char *s, size_t n)
{
    char    *p;
    size_t   size;

    if (n == 0) {
        return 0;
    }

    if (n > t->mem_cap - t->mem_len) {

        if (t->cf.grow == NULL || n > t->cf.max
            || t->mem_len > t->cf.max - n || t->cf.max > UINT32_MAX)
        {
            return -1;
        }

        for (size = t->mem_cap ? t->mem_cap * 2 : 1024;
             size < t->mem_len + n;
             size *= 2)
        {
            /* void */
        }

        size = (size > t->cf.max) ? t->cf.max : size;

        p = t->cf.grow(t->cf.grow_ctx, t->mem, t->mem_len, size);
        if (p == NULL) {
            return -1;
        }

        t->mem = p;
        t->mem_cap = size;
    }

    memcpy(t->mem + t->mem_len, s, n);
    t->mem_len += n;

    return 0;
}


/* a new Responses item: 1 if there are too many, -1 if memory failed */

static int
llm_tx_item(llm_tx_stream_t *t, unsigned tool, const char *id,
    const char *name)
{
    size_t                 n;
    llm_tx_stream_item_t  *it;

    if (t->nitems == LLM_TX_STREAM_ITEMS) {
        return 1;
    }

    it = &t->items[t->nitems++];
    memset(it, 0, sizeof(llm_tx_stream_item_t));

    it->tool = tool;

    if (id != NULL) {
        n = strlen(id);
        it->call_off = t->mem_len;
        it->call_len = n;

        if (llm_tx_keep(t, id, n) != 0) {
            return -1;
        }
    }

    if (name != NULL) {
        n = strlen(name);
        it->name_off = t->mem_len;
        it->name_len = n;

        if (llm_tx_keep(t, name, n) != 0) {
            return -1;
        }
    }

    it->text_off = t->mem_len;

    return 0;
}


/* utilities */

/*
 * FNV-1a of the request id, a tag and a number: 16 hex digits, the same
 * for the same request, the seed of every id the backend did not give.
 */

static void
llm_tx_id(const llm_tx_stream_t *t, int tag, unsigned n, char *hex)
{
    size_t      i;
    uint64_t    h;
    static const char  digits[] = "0123456789abcdef";

    h = 0xcbf29ce484222325ULL;

    for (i = 0; i < t->cf.id_len; i++) {
        h = (h ^ (unsigned char) t->cf.id[i]) * 0x100000001b3ULL;
    }

    h = (h ^ (unsigned char) tag) * 0x100000001b3ULL;

    for (i = 0; i < 4; i++) {
        h = (h ^ ((n >> (i * 8)) & 0xff)) * 0x100000001b3ULL;
    }

    for (i = 0; i < 16; i++) {
        hex[15 - i] = digits[(h >> (i * 4)) & 0xf];
    }

    hex[16] = '\0';
}


/* the backend's model if it named one, else the one the client called */

static void
llm_tx_model(llm_tx_stream_t *t, llm_tx_out_t *o)
{
    if (t->model_len) {
        llm_tx_put_str(o, t->model, t->model_len);

    } else {
        llm_tx_put_str(o, t->cf.model ? t->cf.model : "",
                       t->cf.model ? t->cf.model_len : 0);
    }
}


/* an unknown reason is a plain stop */

static unsigned
llm_tx_reason(const llm_tx_reason_t *r, const cJSON *item)
{
    for ( /* void */ ; r->s; r++) {
        if (strcmp(r->s, item->valuestring) == 0) {
            return r->reason;
        }
    }

    return llm_tx_stop;
}


/* a figure: an integer from 0 to LLM_USAGE_TOKENS_MAX, else dflt */

static int64_t
llm_tx_tokens(const cJSON *obj, const char *name, int64_t dflt)
{
    double        d;
    const cJSON  *item;

    item = cJSON_GetObjectItemCaseSensitive(obj, name);

    if (!cJSON_IsNumber(item)) {
        return dflt;
    }

    d = item->valuedouble;

    if (!(d >= 0)) {
        return 0;
    }

    if (d > (double) LLM_USAGE_TOKENS_MAX) {
        return (int64_t) LLM_USAGE_TOKENS_MAX;
    }

    return (int64_t) d;
}


static const char *
llm_tx_string(const cJSON *obj, const char *name)
{
    const cJSON  *item;

    item = cJSON_GetObjectItemCaseSensitive(obj, name);

    return cJSON_IsString(item) ? item->valuestring : NULL;
}


/* FNV-1a, never 0: 0 is "none given" */

static uint64_t
llm_tx_hash(const char *s)
{
    uint64_t  h;

    if (s == NULL || s[0] == '\0') {
        return 0;
    }

    for (h = 0xcbf29ce484222325ULL; *s; s++) {
        h = (h ^ (unsigned char) *s) * 0x100000001b3ULL;
    }

    return h | 1;
}


static int
llm_tx_is_done(const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')) {
        s++;
        n--;
    }

    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n'
                 || s[n - 1] == '\r'))
    {
        n--;
    }

    return n == 6 && memcmp(s, "[DONE]", 6) == 0;
}


static void
llm_tx_put(llm_tx_out_t *o, const char *s, size_t n)
{
    size_t  k;

    while (n) {

        if (o->len == sizeof(o->buf) && llm_tx_flush(o) != 0) {
            return;
        }

        k = sizeof(o->buf) - o->len;
        k = (k > n) ? n : k;

        memcpy(o->buf + o->len, s, k);
        o->len += k;
        s += k;
        n -= k;
    }
}


static void
llm_tx_puts(llm_tx_out_t *o, const char *s)
{
    llm_tx_put(o, s, strlen(s));
}


/* a JSON string, quoted: what JSON must escape is, the rest as it is */

static void
llm_tx_put_str(llm_tx_out_t *o, const char *s, size_t n)
{
    char           esc[8];
    size_t         i, start;
    unsigned char  c;
    static const char  digits[] = "0123456789abcdef";

    llm_tx_put(o, "\"", 1);

    for (i = 0, start = 0; i < n; i++) {
        c = (unsigned char) s[i];

        if (c >= 0x20 && c != '"' && c != '\\') {
            continue;
        }

        llm_tx_put(o, s + start, i - start);
        start = i + 1;

        switch (c) {
        case '"':  llm_tx_put(o, "\\\"", 2); break;
        case '\\': llm_tx_put(o, "\\\\", 2); break;
        case '\n': llm_tx_put(o, "\\n", 2); break;
        case '\r': llm_tx_put(o, "\\r", 2); break;
        case '\t': llm_tx_put(o, "\\t", 2); break;
        default:
            memcpy(esc, "\\u00", 4);
            esc[4] = digits[c >> 4];
            esc[5] = digits[c & 0xf];
            llm_tx_put(o, esc, 6);
            break;
        }
    }

    llm_tx_put(o, s + start, n - start);
    llm_tx_put(o, "\"", 1);
}


static void
llm_tx_put_num(llm_tx_out_t *o, int64_t n)
{
    char  buf[LLM_TX_INT_LEN];

    llm_tx_put(o, buf, llm_tx_int(buf, n));
}


static int
llm_tx_flush(llm_tx_out_t *o)
{
    if (o->rc == 0 && o->len && o->out(o->ctx, o->buf, o->len) != 0) {
        o->rc = -1;
    }

    o->len = 0;

    return o->rc;
}
