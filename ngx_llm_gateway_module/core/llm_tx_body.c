
/*
 * A backend's whole answer, or its error, in the client's dialect; see
 * llm_tx_body.h.
 */


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "llm_tx_body.h"


/* the finishes the dialects share */
typedef enum {
    LLM_TX_BODY_END = 0,        /* stop, end_turn, stop_sequence */
    LLM_TX_BODY_LENGTH,         /* length, max_tokens */
    LLM_TX_BODY_TOOLS,          /* tool_calls, tool_use */
    LLM_TX_BODY_FILTER          /* content_filter, refusal */
} llm_tx_body_finish_e;


typedef struct {
    const char      *id;        /* NULL: derived */
    const char      *name;
    const char      *args;      /* Chat's arguments text, or NULL */
    const cJSON     *input;     /* Messages' input, or NULL */
} llm_tx_body_tool_t;


/* an answer in neither dialect: pointers into the parsed backend's body */
typedef struct {
    const char          *id;
    const char          *model;
    const char          *refusal;

    const char         **text;
    size_t               ntext;
    llm_tx_body_tool_t  *tool;
    size_t               ntool;

    llm_tx_body_finish_e finish;

    int64_t              input;         /* the whole prompt, cached too */
    int64_t              cached;        /* of it read from the cache */
    int64_t              cache_write;   /* of it written to the cache */
    int64_t              output;
    int64_t              reasoning;     /* of the output */
} llm_tx_body_answer_t;


typedef struct {
    const llm_tx_conf_t  *cf;
    unsigned              nomem:1;
} llm_tx_body_ctx_t;


/* what an error body says, from either dialect's shape */
typedef struct {
    const char  *message;
    const char  *type;
    const char  *code;
    const char  *param;
    unsigned     anthropic:1;   /* {"type":"error",...} */
} llm_tx_body_err_t;


static cJSON *llm_tx_body_parse(const char *body, size_t len);
static int llm_tx_body_read_chat(const cJSON *root,
    llm_tx_body_answer_t *a);
static int llm_tx_body_chat_tools(const cJSON *msg,
    llm_tx_body_answer_t *a);
static int llm_tx_body_read_messages(const cJSON *root,
    llm_tx_body_answer_t *a);
static void llm_tx_body_read_usage(const cJSON *u, int anthropic,
    llm_tx_body_answer_t *a);
static int64_t llm_tx_body_tokens(const cJSON *o, const char *name);
static const cJSON *llm_tx_body_get(const cJSON *o, const char *name);
static const char *llm_tx_body_str(const cJSON *o, const char *name);
static cJSON *llm_tx_body_write_chat(llm_tx_body_ctx_t *t,
    const llm_tx_body_answer_t *a);
static cJSON *llm_tx_body_chat_message(llm_tx_body_ctx_t *t,
    const llm_tx_body_answer_t *a);
static cJSON *llm_tx_body_write_messages(llm_tx_body_ctx_t *t,
    const llm_tx_body_answer_t *a);
static cJSON *llm_tx_body_tool_input(llm_tx_body_ctx_t *t,
    const llm_tx_body_tool_t *tool);
static cJSON *llm_tx_body_write_responses(llm_tx_body_ctx_t *t,
    const llm_tx_body_answer_t *a);
static void llm_tx_body_responses_output(llm_tx_body_ctx_t *t,
    const llm_tx_body_answer_t *a, cJSON *output, const char *status);
static void llm_tx_body_responses_rest(llm_tx_body_ctx_t *t, cJSON *o);
static void llm_tx_body_responses_usage(llm_tx_body_ctx_t *t, cJSON *o,
    const llm_tx_body_answer_t *a);
static char *llm_tx_body_arguments(llm_tx_body_ctx_t *t,
    const llm_tx_body_tool_t *tool);
static void llm_tx_body_model(llm_tx_body_ctx_t *t, cJSON *o,
    const llm_tx_body_answer_t *a);
static void llm_tx_body_id(llm_tx_body_ctx_t *t, char *buf,
    const char *prefix, const char *given, const char *salt, size_t index);
static cJSON *llm_tx_body_obj(llm_tx_body_ctx_t *t, cJSON *parent,
    const char *name);
static cJSON *llm_tx_body_arr(llm_tx_body_ctx_t *t, cJSON *parent,
    const char *name);
static int llm_tx_body_add(llm_tx_body_ctx_t *t, cJSON *parent,
    const char *name, cJSON *v);
static void llm_tx_body_add_str(llm_tx_body_ctx_t *t, cJSON *o,
    const char *name, const char *s);
static void llm_tx_body_add_int(llm_tx_body_ctx_t *t, cJSON *o,
    const char *name, int64_t v);
static void llm_tx_body_add_null(llm_tx_body_ctx_t *t, cJSON *o,
    const char *name);
static int llm_tx_body_print(llm_tx_body_ctx_t *t, cJSON *o, char **out,
    size_t *out_len);
static void llm_tx_body_read_error(const cJSON *root, llm_tx_body_err_t *e);
static char *llm_tx_body_message(const char *s, unsigned status);
static cJSON *llm_tx_body_anthropic_error(llm_tx_body_ctx_t *t,
    unsigned status, const llm_tx_body_err_t *e, const char *msg);
static const char *llm_tx_body_anthropic_type(unsigned status,
    const llm_tx_body_err_t *e);
static cJSON *llm_tx_body_openai_error(llm_tx_body_ctx_t *t,
    unsigned status, const llm_tx_body_err_t *e, const char *msg);
static int llm_tx_body_is(const char *s, const char *const *list);
static int llm_tx_body_has(const char *s, const char *word);


/* Anthropic's error types, as its API documents them */
static const char *const  llm_tx_body_anthropic_types[] = {
    "invalid_request_error", "authentication_error", "billing_error",
    "permission_error", "not_found_error", "request_too_large",
    "rate_limit_error", "api_error", "overloaded_error", "timeout_error",
    NULL
};

/* OpenAI's types and codes of a spent account, on any status */
static const char *const  llm_tx_body_billing[] = {
    "insufficient_quota", "billing_hard_limit_reached", "billing_not_active",
    NULL
};


int
llm_tx_body(const llm_tx_conf_t *cf, const char *body, size_t len,
    char **out, size_t *out_len)
{
    int                   rc;
    cJSON                *root, *o;
    llm_tx_body_ctx_t     t;
    llm_tx_body_answer_t  a;

    *out = NULL;
    *out_len = 0;

    t.cf = cf;
    t.nomem = 0;

    memset(&a, 0, sizeof(llm_tx_body_answer_t));

    root = llm_tx_body_parse(body, len);
    if (root == NULL) {
        /* cJSON tells no shortage from garbage: the gateway's 502 either */
        return -1;
    }

    if (cf->from == LLM_API_OPENAI) {
        rc = llm_tx_body_read_chat(root, &a);

    } else if (cf->from == LLM_API_ANTHROPIC) {
        rc = llm_tx_body_read_messages(root, &a);

    } else {
        rc = -1;
    }

    o = NULL;

    if (rc == 0) {
        switch (cf->to) {

        case LLM_API_OPENAI:
            o = llm_tx_body_write_chat(&t, &a);
            break;

        case LLM_API_ANTHROPIC:
            o = llm_tx_body_write_messages(&t, &a);
            break;

        case LLM_API_RESPONSES:
            o = llm_tx_body_write_responses(&t, &a);
            break;

        default:
            rc = -1;
        }
    }

    if (rc == 0) {
        rc = llm_tx_body_print(&t, o, out, out_len);
    }

    cJSON_Delete(o);
    cJSON_free(a.text);
    cJSON_free(a.tool);
    cJSON_Delete(root);

    return rc;
}


/* one JSON value, and nothing after it but blanks */

static cJSON *
llm_tx_body_parse(const char *body, size_t len)
{
    cJSON       *root;
    const char  *end, *last;

    if (body == NULL || len == 0) {
        return NULL;
    }

    end = NULL;

    root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (root == NULL) {
        return NULL;
    }

    for (last = body + len; end != NULL && end < last; end++) {
        if (*end != ' ' && *end != '\t' && *end != '\r' && *end != '\n'
            && *end != '\0')
        {
            cJSON_Delete(root);
            return NULL;
        }
    }

    return root;
}


/*
 * Chat's {"choices":[{"message":{...},"finish_reason"}],"usage"}: the
 * first choice, the only one (n > 1 is refused before).
 */

static int
llm_tx_body_read_chat(const cJSON *root, llm_tx_body_answer_t *a)
{
    const char   *s;
    const cJSON  *choice, *msg, *c, *part;

    choice = cJSON_GetArrayItem(llm_tx_body_get(root,
                                                                 "choices"),
                                0);
    msg = llm_tx_body_get(choice, "message");

    if (!cJSON_IsObject(root) || !cJSON_IsObject(msg)) {
        return -1;
    }

    a->id = llm_tx_body_str(root, "id");
    a->model = llm_tx_body_str(root, "model");

    s = llm_tx_body_str(msg, "refusal");
    a->refusal = (s && *s) ? s : NULL;

    c = llm_tx_body_get(msg, "content");

    a->text = cJSON_malloc((cJSON_GetArraySize(c) + 1) * sizeof(char *));
    if (a->text == NULL) {
        return -2;
    }

    if (cJSON_IsString(c) && c->valuestring[0]) {
        a->text[a->ntext++] = c->valuestring;

    } else if (cJSON_IsArray(c)) {
        /* the parts some compatible backends give */
        cJSON_ArrayForEach(part, c) {
            s = llm_tx_body_str(part, "text");

            if (s && *s) {
                a->text[a->ntext++] = s;
            }
        }
    }

    if (llm_tx_body_chat_tools(msg, a) != 0) {
        return -2;
    }

    s = llm_tx_body_str(choice, "finish_reason");

    if (s == NULL || strcmp(s, "stop") == 0) {
        a->finish = LLM_TX_BODY_END;

    } else if (strcmp(s, "length") == 0) {
        a->finish = LLM_TX_BODY_LENGTH;

    } else if (strcmp(s, "tool_calls") == 0
               || strcmp(s, "function_call") == 0)
    {
        a->finish = LLM_TX_BODY_TOOLS;

    } else if (strcmp(s, "content_filter") == 0) {
        a->finish = LLM_TX_BODY_FILTER;
    }

    llm_tx_body_read_usage(llm_tx_body_get(root, "usage"),
                           0, a);

    return 0;
}


/* tool_calls, and the deprecated function_call, as one list */

static int
llm_tx_body_chat_tools(const cJSON *msg, llm_tx_body_answer_t *a)
{
    const cJSON         *calls, *call, *fn;
    llm_tx_body_tool_t  *tool;

    calls = llm_tx_body_get(msg, "tool_calls");

    a->tool = cJSON_malloc((cJSON_GetArraySize(calls) + 1)
                           * sizeof(llm_tx_body_tool_t));
    if (a->tool == NULL) {
        return -2;
    }

    if (cJSON_IsArray(calls)) {
        cJSON_ArrayForEach(call, calls) {
            fn = llm_tx_body_get(call, "function");

            if (!cJSON_IsObject(fn)) {
                continue;
            }

            tool = &a->tool[a->ntool++];
            tool->id = llm_tx_body_str(call, "id");
            tool->name = llm_tx_body_str(fn, "name");
            tool->args = llm_tx_body_str(fn, "arguments");
            tool->input = NULL;
        }
    }

    fn = llm_tx_body_get(msg, "function_call");

    if (cJSON_IsObject(fn)) {
        tool = &a->tool[a->ntool++];
        tool->id = NULL;
        tool->name = llm_tx_body_str(fn, "name");
        tool->args = llm_tx_body_str(fn, "arguments");
        tool->input = NULL;
    }

    return 0;
}


/* Messages' {"type":"message","content":[blocks],"stop_reason","usage"} */

static int
llm_tx_body_read_messages(const cJSON *root, llm_tx_body_answer_t *a)
{
    int                  n;
    const char          *s, *type;
    const cJSON         *content, *b, *typ;
    llm_tx_body_tool_t  *tool;

    content = llm_tx_body_get(root, "content");
    typ = llm_tx_body_get(root, "type");

    if (!cJSON_IsObject(root) || !cJSON_IsArray(content)
        || (typ != NULL
            && !(cJSON_IsString(typ) && strcmp(typ->valuestring, "message")
                                        == 0)))
    {
        return -1;
    }

    a->id = llm_tx_body_str(root, "id");
    a->model = llm_tx_body_str(root, "model");

    n = cJSON_GetArraySize(content);

    a->text = cJSON_malloc((n + 1) * sizeof(char *));
    a->tool = cJSON_malloc((n + 1) * sizeof(llm_tx_body_tool_t));

    if (a->text == NULL || a->tool == NULL) {
        return -2;
    }

    cJSON_ArrayForEach(b, content) {
        type = llm_tx_body_str(b, "type");

        if (type == NULL) {
            continue;
        }

        if (strcmp(type, "text") == 0) {
            s = llm_tx_body_str(b, "text");

            if (s && *s) {
                a->text[a->ntext++] = s;
            }

        } else if (strcmp(type, "tool_use") == 0) {
            tool = &a->tool[a->ntool++];
            tool->id = llm_tx_body_str(b, "id");
            tool->name = llm_tx_body_str(b, "name");
            tool->args = NULL;
            tool->input = llm_tx_body_get(b, "input");
        }

        /* thinking, redacted_thinking, server tools: see the header */
    }

    s = llm_tx_body_str(root, "stop_reason");

    if (s == NULL) {
        a->finish = LLM_TX_BODY_END;

    } else if (strcmp(s, "max_tokens") == 0
               || strcmp(s, "model_context_window_exceeded") == 0)
    {
        a->finish = LLM_TX_BODY_LENGTH;

    } else if (strcmp(s, "tool_use") == 0) {
        a->finish = LLM_TX_BODY_TOOLS;

    } else if (strcmp(s, "refusal") == 0) {
        a->finish = LLM_TX_BODY_FILTER;

    } else {
        /* end_turn, stop_sequence, pause_turn */
        a->finish = LLM_TX_BODY_END;
    }

    llm_tx_body_read_usage(llm_tx_body_get(root, "usage"),
                           1, a);

    return 0;
}


/*
 * Into the whole prompt and its cached part: Anthropic's input_tokens
 * leaves the cache reads and writes out, OpenAI's prompt_tokens holds
 * them.
 */

static void
llm_tx_body_read_usage(const cJSON *u, int anthropic,
    llm_tx_body_answer_t *a)
{
    const cJSON  *d;

    if (anthropic) {
        a->cached = llm_tx_body_tokens(u, "cache_read_input_tokens");
        a->cache_write = llm_tx_body_tokens(u, "cache_creation_input_tokens");
        a->input = llm_tx_body_tokens(u, "input_tokens") + a->cached
                   + a->cache_write;
        a->output = llm_tx_body_tokens(u, "output_tokens");

        /* the meter's sum is clamped too, and its parts within it */
        if (a->input > LLM_TX_BODY_TOKENS_MAX) {
            a->input = LLM_TX_BODY_TOKENS_MAX;
            a->cached = (a->cached < a->input) ? a->cached : a->input;
            a->cache_write = (a->cache_write < a->input) ? a->cache_write
                                                         : a->input;
        }

        return;
    }

    a->input = llm_tx_body_tokens(u, "prompt_tokens");
    a->output = llm_tx_body_tokens(u, "completion_tokens");

    d = llm_tx_body_get(u, "prompt_tokens_details");
    a->cached = llm_tx_body_tokens(d, "cached_tokens");

    d = llm_tx_body_get(u, "completion_tokens_details");
    a->reasoning = llm_tx_body_tokens(d, "reasoning_tokens");

    if (a->cached > a->input) {
        a->cached = a->input;
    }

    if (a->reasoning > a->output) {
        a->reasoning = a->output;
    }
}


static int64_t
llm_tx_body_tokens(const cJSON *o, const char *name)
{
    double        v;
    const cJSON  *n;

    n = llm_tx_body_get(o, name);

    if (!cJSON_IsNumber(n)) {
        return 0;
    }

    v = n->valuedouble;

    /* as llm_sse_tokens(): NaN fails the first */
    if (!(v >= 0)) {
        return 0;
    }

    if (v > (double) LLM_TX_BODY_TOKENS_MAX) {
        return LLM_TX_BODY_TOKENS_MAX;
    }

    return (int64_t) v;
}


/* cJSON's lookup gives an array's unnamed first item: objects only */

static const cJSON *
llm_tx_body_get(const cJSON *o, const char *name)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, name)
                             : NULL;
}


static const char *
llm_tx_body_str(const cJSON *o, const char *name)
{
    const cJSON  *s;

    s = llm_tx_body_get(o, name);

    return cJSON_IsString(s) ? s->valuestring : NULL;
}


/* --- the writers ----------------------------------------------------- */


static cJSON *
llm_tx_body_write_chat(llm_tx_body_ctx_t *t, const llm_tx_body_answer_t *a)
{
    char          id[LLM_TX_ID_MAX + 1];
    const char   *finish;
    cJSON        *o, *choices, *choice, *u, *d;

    static const char  *finishes[] = {
        "stop", "length", "tool_calls", "content_filter"
    };

    o = cJSON_CreateObject();
    if (o == NULL) {
        t->nomem = 1;
        return NULL;
    }

    llm_tx_body_id(t, id, "chatcmpl-", a->id, "resp", 0);
    llm_tx_body_add_str(t, o, "id", id);
    llm_tx_body_add_str(t, o, "object", "chat.completion");
    llm_tx_body_add_int(t, o, "created", t->cf->created);
    llm_tx_body_model(t, o, a);

    choices = llm_tx_body_arr(t, o, "choices");
    choice = llm_tx_body_obj(t, choices, NULL);

    llm_tx_body_add_int(t, choice, "index", 0);
    llm_tx_body_add(t, choice, "message", llm_tx_body_chat_message(t, a));
    llm_tx_body_add_null(t, choice, "logprobs");

    finish = finishes[a->finish];

    if (a->finish == LLM_TX_BODY_END && a->ntool) {
        finish = "tool_calls";
    }

    llm_tx_body_add_str(t, choice, "finish_reason", finish);

    u = llm_tx_body_obj(t, o, "usage");
    llm_tx_body_add_int(t, u, "prompt_tokens", a->input);
    llm_tx_body_add_int(t, u, "completion_tokens", a->output);
    llm_tx_body_add_int(t, u, "total_tokens", a->input + a->output);

    d = llm_tx_body_obj(t, u, "prompt_tokens_details");
    llm_tx_body_add_int(t, d, "cached_tokens", a->cached);

    d = llm_tx_body_obj(t, u, "completion_tokens_details");
    llm_tx_body_add_int(t, d, "reasoning_tokens", a->reasoning);

    return o;
}


/* the texts as one string, or null; tool_calls when there are any */

static cJSON *
llm_tx_body_chat_message(llm_tx_body_ctx_t *t, const llm_tx_body_answer_t *a)
{
    char    *s, *p, *args, id[LLM_TX_ID_MAX + 1];
    size_t   i, n;
    cJSON   *m, *calls, *call, *fn;

    m = cJSON_CreateObject();
    if (m == NULL) {
        t->nomem = 1;
        return NULL;
    }

    llm_tx_body_add_str(t, m, "role", "assistant");

    for (n = 0, i = 0; i < a->ntext; i++) {
        n += strlen(a->text[i]);
    }

    if (a->ntext == 0) {
        llm_tx_body_add_null(t, m, "content");

    } else {
        s = cJSON_malloc(n + 1);

        if (s == NULL) {
            t->nomem = 1;

        } else {
            for (p = s, i = 0; i < a->ntext; i++) {
                n = strlen(a->text[i]);
                memcpy(p, a->text[i], n);
                p += n;
            }

            *p = '\0';

            llm_tx_body_add_str(t, m, "content", s);
            cJSON_free(s);
        }
    }

    if (a->ntool) {
        calls = llm_tx_body_arr(t, m, "tool_calls");

        for (i = 0; i < a->ntool; i++) {
            call = llm_tx_body_obj(t, calls, NULL);

            llm_tx_body_id(t, id, "call_", NULL, "call", i);
            llm_tx_body_add_str(t, call, "id",
                                (a->tool[i].id && a->tool[i].id[0])
                                ? a->tool[i].id : id);
            llm_tx_body_add_str(t, call, "type", "function");

            fn = llm_tx_body_obj(t, call, "function");
            llm_tx_body_add_str(t, fn, "name",
                                a->tool[i].name ? a->tool[i].name : "");

            args = llm_tx_body_arguments(t, &a->tool[i]);
            llm_tx_body_add_str(t, fn, "arguments", args ? args : "{}");
            cJSON_free(args);
        }
    }

    if (a->refusal) {
        llm_tx_body_add_str(t, m, "refusal", a->refusal);

    } else {
        llm_tx_body_add_null(t, m, "refusal");
    }

    return m;
}


static cJSON *
llm_tx_body_write_messages(llm_tx_body_ctx_t *t,
    const llm_tx_body_answer_t *a)
{
    char          id[LLM_TX_ID_MAX + 1];
    size_t        i;
    const char   *stop;
    cJSON        *o, *content, *b, *u;

    static const char  *stops[] = {
        "end_turn", "max_tokens", "tool_use", "refusal"
    };

    o = cJSON_CreateObject();
    if (o == NULL) {
        t->nomem = 1;
        return NULL;
    }

    llm_tx_body_id(t, id, "msg_", a->id, "resp", 0);
    llm_tx_body_add_str(t, o, "id", id);
    llm_tx_body_add_str(t, o, "type", "message");
    llm_tx_body_add_str(t, o, "role", "assistant");
    llm_tx_body_model(t, o, a);

    content = llm_tx_body_arr(t, o, "content");

    for (i = 0; i < a->ntext + (a->refusal != NULL); i++) {
        b = llm_tx_body_obj(t, content, NULL);
        llm_tx_body_add_str(t, b, "type", "text");
        llm_tx_body_add_str(t, b, "text",
                            i < a->ntext ? a->text[i] : a->refusal);
    }

    for (i = 0; i < a->ntool; i++) {
        b = llm_tx_body_obj(t, content, NULL);
        llm_tx_body_add_str(t, b, "type", "tool_use");

        llm_tx_body_id(t, id, "toolu_", NULL, "call", i);
        llm_tx_body_add_str(t, b, "id", (a->tool[i].id && a->tool[i].id[0])
                                        ? a->tool[i].id : id);
        llm_tx_body_add_str(t, b, "name",
                            a->tool[i].name ? a->tool[i].name : "");
        llm_tx_body_add(t, b, "input", llm_tx_body_tool_input(t, &a->tool[i]));
    }

    stop = stops[a->finish];

    if (a->finish == LLM_TX_BODY_END && a->refusal) {
        stop = "refusal";

    } else if (a->finish == LLM_TX_BODY_END && a->ntool) {
        stop = "tool_use";
    }

    llm_tx_body_add_str(t, o, "stop_reason", stop);
    llm_tx_body_add_null(t, o, "stop_sequence");

    u = llm_tx_body_obj(t, o, "usage");
    llm_tx_body_add_int(t, u, "input_tokens",
                        a->input - a->cached - a->cache_write > 0
                        ? a->input - a->cached - a->cache_write : 0);
    llm_tx_body_add_int(t, u, "output_tokens", a->output);
    llm_tx_body_add_int(t, u, "cache_read_input_tokens", a->cached);
    llm_tx_body_add_int(t, u, "cache_creation_input_tokens", a->cache_write);

    return o;
}


/* Messages' input: an object; Chat's arguments parsed, or kept as _raw */

static cJSON *
llm_tx_body_tool_input(llm_tx_body_ctx_t *t, const llm_tx_body_tool_t *tool)
{
    cJSON  *in;

    if (tool->input) {
        in = cJSON_Duplicate(tool->input, 1);

    } else if (tool->args == NULL || tool->args[0] == '\0') {
        in = cJSON_CreateObject();

    } else {
        in = llm_tx_body_parse(tool->args, strlen(tool->args));

        if (in != NULL && !cJSON_IsObject(in)) {
            cJSON_Delete(in);
            in = NULL;
        }

        if (in == NULL) {
            in = cJSON_CreateObject();

            if (in != NULL
                && cJSON_AddStringToObject(in, "_raw", tool->args) == NULL)
            {
                cJSON_Delete(in);
                in = NULL;
            }
        }
    }

    if (in == NULL) {
        t->nomem = 1;
    }

    return in;
}


static cJSON *
llm_tx_body_write_responses(llm_tx_body_ctx_t *t,
    const llm_tx_body_answer_t *a)
{
    char          id[LLM_TX_ID_MAX + 1];
    const char   *status, *reason;
    cJSON        *o, *d;

    o = cJSON_CreateObject();
    if (o == NULL) {
        t->nomem = 1;
        return NULL;
    }

    status = "completed";
    reason = NULL;

    if (a->finish == LLM_TX_BODY_LENGTH) {
        status = "incomplete";
        reason = "max_output_tokens";

    } else if (a->finish == LLM_TX_BODY_FILTER) {
        status = "incomplete";
        reason = "content_filter";
    }

    llm_tx_body_id(t, id, "resp_", a->id, "resp", 0);
    llm_tx_body_add_str(t, o, "id", id);
    llm_tx_body_add_str(t, o, "object", "response");
    llm_tx_body_add_int(t, o, "created_at", t->cf->created);
    llm_tx_body_add_str(t, o, "status", status);
    llm_tx_body_model(t, o, a);

    llm_tx_body_responses_output(t, a, llm_tx_body_arr(t, o, "output"),
                                 status);
    llm_tx_body_responses_usage(t, o, a);

    llm_tx_body_add_null(t, o, "error");

    if (reason) {
        d = llm_tx_body_obj(t, o, "incomplete_details");
        llm_tx_body_add_str(t, d, "reason", reason);

    } else {
        llm_tx_body_add_null(t, o, "incomplete_details");
    }

    if (t->cf->max_tokens > 0) {
        llm_tx_body_add_int(t, o, "max_output_tokens", t->cf->max_tokens);

    } else {
        llm_tx_body_add_null(t, o, "max_output_tokens");
    }

    llm_tx_body_responses_rest(t, o);

    return o;
}


/*
 * The message item (when there is text, a refusal, or nothing else),
 * then a function_call item for each tool call.
 */

static void
llm_tx_body_responses_output(llm_tx_body_ctx_t *t,
    const llm_tx_body_answer_t *a, cJSON *output, const char *status)
{
    char    *args, id[LLM_TX_ID_MAX + 1];
    size_t   i;
    cJSON   *item, *content, *part;

    if (a->ntext || a->refusal || a->ntool == 0) {
        item = llm_tx_body_obj(t, output, NULL);

        llm_tx_body_id(t, id, "msg_", NULL, "msg", 0);
        llm_tx_body_add_str(t, item, "type", "message");
        llm_tx_body_add_str(t, item, "id", id);
        llm_tx_body_add_str(t, item, "status", status);
        llm_tx_body_add_str(t, item, "role", "assistant");

        content = llm_tx_body_arr(t, item, "content");

        for (i = 0; i < a->ntext || (i == 0 && a->refusal == NULL); i++) {
            part = llm_tx_body_obj(t, content, NULL);
            llm_tx_body_add_str(t, part, "type", "output_text");
            llm_tx_body_add_str(t, part, "text",
                                i < a->ntext ? a->text[i] : "");
            llm_tx_body_arr(t, part, "annotations");
        }

        if (a->refusal) {
            part = llm_tx_body_obj(t, content, NULL);
            llm_tx_body_add_str(t, part, "type", "refusal");
            llm_tx_body_add_str(t, part, "refusal", a->refusal);
        }
    }

    for (i = 0; i < a->ntool; i++) {
        item = llm_tx_body_obj(t, output, NULL);

        llm_tx_body_add_str(t, item, "type", "function_call");
        llm_tx_body_id(t, id, "fc_", NULL, "fc", i);
        llm_tx_body_add_str(t, item, "id", id);

        llm_tx_body_id(t, id, "call_", NULL, "call", i);
        llm_tx_body_add_str(t, item, "call_id",
                            (a->tool[i].id && a->tool[i].id[0])
                            ? a->tool[i].id : id);
        llm_tx_body_add_str(t, item, "name",
                            a->tool[i].name ? a->tool[i].name : "");

        args = llm_tx_body_arguments(t, &a->tool[i]);
        llm_tx_body_add_str(t, item, "arguments", args ? args : "{}");
        cJSON_free(args);

        llm_tx_body_add_str(t, item, "status", "completed");
    }
}


/*
 * What the request set and the answer echoes, which the SDKs read: the
 * backend's answer does not say it, so the defaults, and nothing stored.
 */

static void
llm_tx_body_responses_rest(llm_tx_body_ctx_t *t, cJSON *o)
{
    cJSON  *d;

    llm_tx_body_add_null(t, o, "instructions");
    llm_tx_body_add(t, o, "parallel_tool_calls", cJSON_CreateTrue());
    llm_tx_body_add_null(t, o, "previous_response_id");

    d = llm_tx_body_obj(t, o, "reasoning");
    llm_tx_body_add_null(t, d, "effort");
    llm_tx_body_add_null(t, d, "summary");

    llm_tx_body_add(t, o, "store", cJSON_CreateFalse());
    llm_tx_body_add_null(t, o, "temperature");

    d = llm_tx_body_obj(t, llm_tx_body_obj(t, o, "text"), "format");
    llm_tx_body_add_str(t, d, "type", "text");

    llm_tx_body_add_str(t, o, "tool_choice", "auto");
    llm_tx_body_arr(t, o, "tools");
    llm_tx_body_add_null(t, o, "top_p");
    llm_tx_body_add_str(t, o, "truncation", "disabled");
    llm_tx_body_add_null(t, o, "user");
    llm_tx_body_obj(t, o, "metadata");
}


static void
llm_tx_body_responses_usage(llm_tx_body_ctx_t *t, cJSON *o,
    const llm_tx_body_answer_t *a)
{
    cJSON  *u, *d;

    u = llm_tx_body_obj(t, o, "usage");
    llm_tx_body_add_int(t, u, "input_tokens", a->input);

    d = llm_tx_body_obj(t, u, "input_tokens_details");
    llm_tx_body_add_int(t, d, "cached_tokens", a->cached);

    llm_tx_body_add_int(t, u, "output_tokens", a->output);

    d = llm_tx_body_obj(t, u, "output_tokens_details");
    llm_tx_body_add_int(t, d, "reasoning_tokens", a->reasoning);

    llm_tx_body_add_int(t, u, "total_tokens", a->input + a->output);
}


/* Chat's and Responses' arguments: the text, or Messages' input printed */

static char *
llm_tx_body_arguments(llm_tx_body_ctx_t *t, const llm_tx_body_tool_t *tool)
{
    char  *s;

    if (tool->input == NULL) {
        if (tool->args == NULL) {
            return NULL;
        }

        s = cJSON_malloc(strlen(tool->args) + 1);

        if (s == NULL) {
            t->nomem = 1;
            return NULL;
        }

        return strcpy(s, tool->args);
    }

    s = llm_tx_print(tool->input);

    if (s == NULL) {
        t->nomem = 1;
    }

    return s;
}


/* the backend's model, or where it has none the one the client called */

static void
llm_tx_body_model(llm_tx_body_ctx_t *t, cJSON *o,
    const llm_tx_body_answer_t *a)
{
    char  *s;

    if (a->model) {
        llm_tx_body_add_str(t, o, "model", a->model);
        return;
    }

    s = cJSON_malloc(t->cf->model_len + 1);

    if (s == NULL) {
        t->nomem = 1;
        return;
    }

    if (t->cf->model_len) {
        memcpy(s, t->cf->model, t->cf->model_len);
    }

    s[t->cf->model_len] = '\0';

    llm_tx_body_add_str(t, o, "model", s);
    cJSON_free(s);
}


/*
 * prefix and the backend's id less its own prefix, if it has a usable one,
 * else prefix and FNV-1a of cf->id, salt and index: see the header.
 */

static void
llm_tx_body_id(llm_tx_body_ctx_t *t, char *buf, const char *prefix,
    const char *given, const char *salt, size_t index)
{
    char          num[24];
    size_t        i, n, plen;
    uint64_t      h;
    const char   *p;

    static const char  *prefixes[] = { "chatcmpl-", "msg_", "resp_", NULL };

    plen = strlen(prefix);

    if (given != NULL) {
        for (i = 0; prefixes[i]; i++) {
            n = strlen(prefixes[i]);

            if (strncmp(given, prefixes[i], n) == 0 && given[n]) {
                given += n;
                break;
            }
        }

        n = strspn(given, "abcdefghijklmnopqrstuvwxyz"
                          "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-");

        if (n > 0 && given[n] == '\0' && plen + n <= LLM_TX_ID_MAX) {
            memcpy(buf, prefix, plen);
            memcpy(buf + plen, given, n + 1);
            return;
        }
    }

    h = 0xcbf29ce484222325ULL;

    for (i = 0; i < t->cf->id_len; i++) {
        h = (h ^ (unsigned char) t->cf->id[i]) * 0x100000001b3ULL;
    }

    snprintf(num, sizeof(num), "%zu", index);

    for (p = salt; *p; p++) {
        h = (h ^ (unsigned char) *p) * 0x100000001b3ULL;
    }

    for (p = num; *p; p++) {
        h = (h ^ (unsigned char) *p) * 0x100000001b3ULL;
    }

    snprintf(buf, LLM_TX_ID_MAX + 1, "%s%016llx", prefix,
             (unsigned long long) h);
}


/* --- building: every shortage noted once, the tree freed whole ------- */


static cJSON *
llm_tx_body_obj(llm_tx_body_ctx_t *t, cJSON *parent, const char *name)
{
    cJSON  *o;

    if (parent == NULL) {
        t->nomem = 1;
        return NULL;
    }

    o = cJSON_CreateObject();

    return llm_tx_body_add(t, parent, name, o) == 0 ? o : NULL;
}


static cJSON *
llm_tx_body_arr(llm_tx_body_ctx_t *t, cJSON *parent, const char *name)
{
    cJSON  *o;

    if (parent == NULL) {
        t->nomem = 1;
        return NULL;
    }

    o = cJSON_CreateArray();

    return llm_tx_body_add(t, parent, name, o) == 0 ? o : NULL;
}


/* v goes into parent (an array when name is NULL), or is freed: -1 */

static int
llm_tx_body_add(llm_tx_body_ctx_t *t, cJSON *parent, const char *name,
    cJSON *v)
{
    cJSON_bool  ok;

    if (v == NULL || parent == NULL) {
        t->nomem = 1;
        cJSON_Delete(v);
        return -1;
    }

    ok = name ? cJSON_AddItemToObject(parent, name, v)
              : cJSON_AddItemToArray(parent, v);

    if (!ok) {
        t->nomem = 1;
        cJSON_Delete(v);
        return -1;
    }

    return 0;
}


static void
llm_tx_body_add_str(llm_tx_body_ctx_t *t, cJSON *o, const char *name,
    const char *s)
{
    llm_tx_body_add(t, o, name, cJSON_CreateString(s));
}


/* a whole number as its digits: cJSON writes doubles */

static void
llm_tx_body_add_int(llm_tx_body_ctx_t *t, cJSON *o, const char *name,
    int64_t v)
{
    char  num[LLM_TX_INT_LEN + 1];

    num[llm_tx_int(num, v)] = '\0';

    llm_tx_body_add(t, o, name, cJSON_CreateRaw(num));
}


static void
llm_tx_body_add_null(llm_tx_body_ctx_t *t, cJSON *o, const char *name)
{
    llm_tx_body_add(t, o, name, cJSON_CreateNull());
}


static int
llm_tx_body_print(llm_tx_body_ctx_t *t, cJSON *o, char **out,
    size_t *out_len)
{
    if (t->nomem || o == NULL) {
        return -2;
    }

    *out = llm_tx_print(o);
    if (*out == NULL) {
        return -2;
    }

    *out_len = strlen(*out);

    return 0;
}


/* --- errors ---------------------------------------------------------- */


int
llm_tx_body_error(const llm_tx_conf_t *cf, unsigned status,
    const char *body, size_t len, char **out, size_t *out_len)
{
    int                rc;
    char              *msg;
    cJSON             *root, *o;
    llm_tx_body_ctx_t  t;
    llm_tx_body_err_t  e;

    *out = NULL;
    *out_len = 0;

    t.cf = cf;
    t.nomem = 0;

    memset(&e, 0, sizeof(llm_tx_body_err_t));

    /* a body cJSON could not parse for want of memory reads as garbage */
    root = llm_tx_body_parse(body, len);
    llm_tx_body_read_error(root, &e);

    msg = llm_tx_body_message(e.message, status);

    if (msg == NULL) {
        cJSON_Delete(root);
        return -2;
    }

    if (cf->to == LLM_API_ANTHROPIC) {
        o = llm_tx_body_anthropic_error(&t, status, &e, msg);

    } else {
        o = llm_tx_body_openai_error(&t, status, &e, msg);
    }

    rc = llm_tx_body_print(&t, o, out, out_len);

    cJSON_Delete(o);
    cJSON_free(msg);
    cJSON_Delete(root);

    return rc;
}


/*
 * {"type":"error","error":{"type","message"}}, {"error":{"message","type",
 * "param","code"}}, {"error":"message"} or {"message":...}: whichever it
 * is, whatever the backend's dialect.
 */

static void
llm_tx_body_read_error(const cJSON *root, llm_tx_body_err_t *e)
{
    const char   *type;
    const cJSON  *err;

    if (!cJSON_IsObject(root)) {
        return;
    }

    err = llm_tx_body_get(root, "error");
    type = llm_tx_body_str(root, "type");

    if (cJSON_IsString(err)) {
        e->message = err->valuestring;
        return;
    }

    if (!cJSON_IsObject(err)) {
        e->message = llm_tx_body_str(root, "message");
        return;
    }

    e->anthropic = (type != NULL && strcmp(type, "error") == 0);
    e->message = llm_tx_body_str(err, "message");
    e->type = llm_tx_body_str(err, "type");
    e->code = llm_tx_body_str(err, "code");
    e->param = llm_tx_body_str(err, "param");
}


/*
 * The message, cut to whole characters within LLM_TX_BODY_MESSAGE_MAX
 * bytes, each byte of invalid UTF-8 made U+FFFD; or the status's.
 */

static char *
llm_tx_body_message(const char *s, unsigned status)
{
    char           *m, *p;
    size_t          i, k, n, len;
    const unsigned char  *u;

    if (s == NULL || s[0] == '\0') {
        m = cJSON_malloc(64);

        if (m != NULL) {
            snprintf(m, 64, "The backend answered %u.", status);
        }

        return m;
    }

    len = LLM_TX_BODY_MESSAGE_MAX;

    m = cJSON_malloc(len + 1);
    if (m == NULL) {
        return NULL;
    }

    u = (const unsigned char *) s;
    p = m;

    for (i = 0; u[i] && (size_t) (p - m) < len; i += n) {

        n = u[i] < 0x80 ? 1
            : (u[i] >= 0xc2 && u[i] <= 0xdf) ? 2
            : (u[i] >= 0xe0 && u[i] <= 0xef) ? 3
            : (u[i] >= 0xf0 && u[i] <= 0xf4) ? 4 : 0;

        for (k = 1; k < n; k++) {
            if ((u[i + k] & 0xc0) != 0x80) {
                n = 0;
                break;
            }
        }

        /* overlong, surrogates, above U+10FFFF */
        if ((n == 3 && ((u[i] == 0xe0 && u[i + 1] < 0xa0)
                        || (u[i] == 0xed && u[i + 1] >= 0xa0)))
            || (n == 4 && ((u[i] == 0xf0 && u[i + 1] < 0x90)
                           || (u[i] == 0xf4 && u[i + 1] >= 0x90))))
        {
            n = 0;
        }

        if (n == 0) {
            if ((size_t) (p - m) + 3 > len) {
                break;
            }

            memcpy(p, "\xef\xbf\xbd", 3);
            p += 3;
            n = 1;
            continue;
        }

        if ((size_t) (p - m) + n > len) {
            break;
        }

        memcpy(p, s + i, n);
        p += n;
    }

    *p = '\0';

    return m;
}


/*
 * Anthropic's, and what OpenAI's said beyond its type in error.details,
 * as the gateway's own refusals put it.
 */

static cJSON *
llm_tx_body_anthropic_error(llm_tx_body_ctx_t *t, unsigned status,
    const llm_tx_body_err_t *e, const char *msg)
{
    char   *id;
    cJSON  *o, *err, *d;

    o = cJSON_CreateObject();
    if (o == NULL) {
        t->nomem = 1;
        return NULL;
    }

    llm_tx_body_add_str(t, o, "type", "error");

    err = llm_tx_body_obj(t, o, "error");
    llm_tx_body_add_str(t, err, "type", llm_tx_body_anthropic_type(status, e));
    llm_tx_body_add_str(t, err, "message", msg);

    if (!e->anthropic && (e->code || e->param)) {
        d = llm_tx_body_obj(t, err, "details");

        if (e->code) {
            llm_tx_body_add_str(t, d, "error_code", e->code);
        }

        /* OpenAI's type of a 429 names the limit, Anthropic's does not */
        if (status == 429 && e->type
            && (strcmp(e->type, "tokens") == 0
                || strcmp(e->type, "requests") == 0))
        {
            llm_tx_body_add_str(t, d, "limit", e->type);
        }

        if (e->param) {
            llm_tx_body_add_str(t, d, "param", e->param);
        }
    }

    if (t->cf->id_len == 0) {
        llm_tx_body_add_null(t, o, "request_id");
        return o;
    }

    id = cJSON_malloc(t->cf->id_len + 1);

    if (id == NULL) {
        t->nomem = 1;
        return o;
    }

    memcpy(id, t->cf->id, t->cf->id_len);
    id[t->cf->id_len] = '\0';

    llm_tx_body_add_str(t, o, "request_id", id);
    cJSON_free(id);

    return o;
}


static const char *
llm_tx_body_anthropic_type(unsigned status, const llm_tx_body_err_t *e)
{
    if (e->anthropic && llm_tx_body_is(e->type, llm_tx_body_anthropic_types))
    {
        return e->type;
    }

    /* OpenAI sends a spent account as a 400 or 403 too */
    if (status != 429
        && (llm_tx_body_is(e->type, llm_tx_body_billing)
            || llm_tx_body_is(e->code, llm_tx_body_billing)))
    {
        return "billing_error";
    }

    switch (status) {

    case 401:
        return "authentication_error";

    case 402:
        return "billing_error";

    case 403:
        return "permission_error";

    case 404:
        return "not_found_error";

    case 413:
        return "request_too_large";

    case 429:
        return "rate_limit_error";

    case 503:
    case 529:
        return "overloaded_error";

    case 504:
        return "timeout_error";
    }

    return status < 500 ? "invalid_request_error" : "api_error";
}


/*
 * OpenAI's, for Chat and Responses alike.  An OpenAI body keeps its type,
 * code and param; another's type is OpenAI's by the status, and its code
 * what OpenAI's clients act on: a 429 is rate_limit_exceeded, or
 * insufficient_quota when it speaks of a quota, credit or billing (then
 * of that type too, as OpenAI sends it).
 */

static cJSON *
llm_tx_body_openai_error(llm_tx_body_ctx_t *t, unsigned status,
    const llm_tx_body_err_t *e, const char *msg)
{
    int          spent;
    cJSON       *o, *err;
    const char  *type, *code, *param;

    o = cJSON_CreateObject();
    if (o == NULL) {
        t->nomem = 1;
        return NULL;
    }

    type = status < 500 ? "invalid_request_error" : "server_error";
    code = NULL;
    param = NULL;

    if (!e->anthropic && (e->type || e->code)) {
        type = e->type ? e->type : type;
        code = e->code;
        param = e->param;

    } else {
        spent = (e->type && strcmp(e->type, "billing_error") == 0)
                || status == 402
                || llm_tx_body_has(e->message, "quota")
                || llm_tx_body_has(e->message, "credit balance")
                || llm_tx_body_has(e->message, "billing");

        if (status == 429) {
            type = spent ? "insufficient_quota" : type;
            code = spent ? "insufficient_quota" : "rate_limit_exceeded";

        } else if (spent) {
            code = "insufficient_quota";

        } else if (status == 401) {
            code = "invalid_api_key";
        }
    }

    err = llm_tx_body_obj(t, o, "error");
    llm_tx_body_add_str(t, err, "message", msg);
    llm_tx_body_add_str(t, err, "type", type);

    if (param) {
        llm_tx_body_add_str(t, err, "param", param);

    } else {
        llm_tx_body_add_null(t, err, "param");
    }

    if (code) {
        llm_tx_body_add_str(t, err, "code", code);

    } else {
        llm_tx_body_add_null(t, err, "code");
    }

    return o;
}


static int
llm_tx_body_is(const char *s, const char *const *list)
{
    if (s == NULL) {
        return 0;
    }

    for ( /* void */ ; *list; list++) {
        if (strcmp(s, *list) == 0) {
            return 1;
        }
    }

    return 0;
}


/* word in s, in any case; word is lowercase */

static int
llm_tx_body_has(const char *s, const char *word)
{
    size_t  i, n;

    if (s == NULL) {
        return 0;
    }

    n = strlen(word);

    for ( /* void */ ; *s; s++) {
        for (i = 0; i < n; i++) {
            if ((s[i] | (s[i] >= 'A' && s[i] <= 'Z' ? 0x20 : 0)) != word[i]) {
                break;
            }
        }

        if (i == n) {
            return 1;
        }
    }

    return 0;
}
