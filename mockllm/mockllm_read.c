
/*
 * The body of an LLM request, read as each provider reads it: strict JSON
 * (RFC 8259), then the members of the dialect of the endpoint, a tool
 * conversation's history and the model's family, as mockllm/README.md
 * says, apart from the gateway's own reading of the same rules.  What it
 * read is reported in x-mock-read, refused or not, so that a test can put
 * it beside the gateway's own reading; the tool calls to answer are noted
 * for the response.
 */


#include <stdarg.h>
#include <stdio.h>
#include <cJSON.h>

#include "mockllm.h"
#include "mockllm_buf.h"
#include "mockllm_embed.h"
#include "mockllm_read.h"


#define MOCKLLM_N_MAX           128
#define MOCKLLM_INT_MAX         2147483647
#define MOCKLLM_DEPTH_MAX       1000


typedef struct {
    const unsigned char  *p;             /* in the request, writable */
    const unsigned char  *end;
    int                   depth;
    unsigned              model_ctl:1;   /* the last top-level "model" */
    unsigned              name_nul:1;    /* a member name with U+0000 */
} mockllm_json_t;


static int mockllm_json_value(mockllm_json_t *j, int model);
static int mockllm_json_string(mockllm_json_t *j, char *name, size_t *len,
    int *nul, int *ctl);
static int mockllm_json_hex4(mockllm_json_t *j, uint32_t *cp);
static int mockllm_json_utf8(mockllm_json_t *j, unsigned char ch);
static int mockllm_json_number(mockllm_json_t *j);
static int mockllm_json_literal(mockllm_json_t *j, const char *s, size_t n);
static void mockllm_json_ws(mockllm_json_t *j);

static void mockllm_read_chat(mockllm_conn_t *c, cJSON *root);
static void mockllm_read_chat_limit(mockllm_read_t *rd, cJSON *root);
static int mockllm_read_reasoning(cJSON *model);
static void mockllm_read_anthropic(mockllm_conn_t *c, cJSON *root,
    int count);
static void mockllm_read_responses(mockllm_conn_t *c, cJSON *root);
static void mockllm_read_chat_history(mockllm_read_t *rd, cJSON *msgs);
static void mockllm_read_chat_unanswered(mockllm_read_t *rd, cJSON *asst,
    int k);
static void mockllm_read_chat_calls(mockllm_read_t *rd, cJSON *calls, int i);
static void mockllm_read_anthropic_use(mockllm_read_t *rd, cJSON *block,
    int i, int k);
static void mockllm_read_anthropic_history(mockllm_read_t *rd, cJSON *msgs);
static void mockllm_read_responses_history(mockllm_read_t *rd, cJSON *input);
static void mockllm_read_responses_call(mockllm_read_t *rd, cJSON *item,
    int i);
static void mockllm_read_tools(mockllm_conn_t *c, int api, cJSON *root,
    int answered);
static int mockllm_read_tool(mockllm_read_t *rd, int api, cJSON *tool, int i,
    cJSON **name, cJSON **props);
static void mockllm_read_call(mockllm_conn_t *c, int64_t i, cJSON *name,
    cJSON *props);
static void mockllm_read_family(mockllm_read_t *rd, int api, cJSON *model);
static cJSON *mockllm_read_blocks(cJSON *msg);
static int mockllm_read_has(cJSON *list, const char *name, const char *value);
static int mockllm_read_is(cJSON *obj, const char *name, const char *value);
static const char *mockllm_read_string(cJSON *obj, const char *name);
static cJSON *mockllm_read_last(cJSON *list);
static void mockllm_read_foreign(mockllm_read_t *rd, int api, cJSON *root,
    const char **names);
static int64_t mockllm_read_limit(mockllm_read_t *rd, int api, cJSON *root,
    const char *name, int64_t max);
static void mockllm_read_stream(mockllm_read_t *rd, int api, cJSON *root);
static int64_t mockllm_read_count(mockllm_read_t *rd, int api, cJSON *root,
    const char *name);
static void mockllm_read_anthropic_blocks(mockllm_read_t *rd, cJSON *blocks,
    const char *where, int nested);
static void mockllm_read_responses_parts(mockllm_read_t *rd, cJSON *parts,
    const char *where);
static int64_t mockllm_read_text(cJSON *item);
static cJSON *mockllm_read_get(cJSON *obj, const char *name);
static const char *mockllm_read_type(cJSON *obj);
static int mockllm_read_int(cJSON *v, int64_t min, int64_t max,
    int64_t *out);
static void mockllm_read_bad(mockllm_read_t *rd, int api, const char *param,
    const char *expected);
static void mockllm_read_missing(mockllm_read_t *rd, int api,
    const char *param);
static void mockllm_read_refuse(mockllm_read_t *rd, const char *param,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void mockllm_read_out(mockllm_conn_t *c, cJSON *model);
static void mockllm_read_num(mockllm_buf_t *b, const char *name, int64_t v);


/* the members of the other dialects that change generation or billing */

static const char  *mockllm_read_not_chat[] = {
    "max_output_tokens", "max_tokens_to_sample", "system", "stop_sequences",
    "top_k", "thinking", "input", "instructions", "previous_response_id",
    NULL
};

static const char  *mockllm_read_not_anthropic[] = {
    "n", "max_completion_tokens", "max_output_tokens",
    "max_tokens_to_sample", "stream_options", "input", "instructions",
    "previous_response_id", "functions", NULL
};

/* what a Messages request has and a count of its tokens does not */
static const char  *mockllm_read_not_count[] = {
    "max_tokens", "stream", "stop_sequences", "temperature", "top_k",
    "top_p", "metadata", "service_tier", NULL
};

static const char  *mockllm_read_not_responses[] = {
    "max_tokens", "max_completion_tokens", "max_tokens_to_sample", "n",
    "messages", "system", "stop_sequences", "top_k", "functions", NULL
};


void
mockllm_read(mockllm_conn_t *c, int api)
{
    int              valid, count;
    cJSON           *root, *model;
    mockllm_json_t   j;
    mockllm_read_t  *rd;

    rd = &c->rd;

    memset(rd, 0, sizeof(mockllm_read_t));

    rd->max = MOCKLLM_MAX_DEFAULT;
    rd->n = 1;

    /* a count is read as Messages, refused in its words */
    count = (api == MOCKLLM_API_COUNT_TOKENS);

    if (count) {
        api = MOCKLLM_API_ANTHROPIC;
    }

    c->model.len = 0;
    c->instr.len = 0;
    c->readout.len = 0;
    c->calls.len = 0;

    j.p = (const unsigned char *) c->in.data + c->body_start;
    j.end = j.p + c->body_len;
    j.depth = 0;
    j.model_ctl = 0;
    j.name_nul = 0;

    mockllm_json_ws(&j);
    valid = (mockllm_json_value(&j, 0) == MOCKLLM_OK);
    mockllm_json_ws(&j);
    valid = valid && j.p == j.end;

    /*
     * cJSON is laxer than RFC 8259 (raw control bytes, trailing bytes,
     * "01"): what it can read is reported even when refused.
     */
    root = cJSON_ParseWithLength(c->in.data + c->body_start, c->body_len);

    if (!valid || !cJSON_IsObject(root)) {
        mockllm_read_refuse(rd, "", "We could not parse the JSON body of "
                            "your request.");
    }

    if (j.name_nul) {
        mockllm_read_refuse(rd, "", "A member name contains U+0000.");
    }

    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return;
    }

    rd->object = 1;

    model = mockllm_read_get(root, "model");

    if (!cJSON_IsString(model) || model->valuestring[0] == '\0'
        || j.model_ctl)
    {
        if (model == NULL) {
            mockllm_read_missing(rd, api, "model");

        } else {
            mockllm_read_bad(rd, api, "model", "a non-empty string without "
                             "control characters");
        }

    } else if (c->req.served_model_len) {
        mockllm_buf_add(&c->model, c->req.served_model,
                        c->req.served_model_len);

    } else {
        mockllm_buf_add_json(&c->model, model->valuestring,
                             strlen(model->valuestring));
    }

    switch (api) {

    case MOCKLLM_API_OPENAI:
        mockllm_read_chat(c, root);
        break;

    case MOCKLLM_API_ANTHROPIC:
        mockllm_read_anthropic(c, root, count);
        break;

    case MOCKLLM_API_EMBEDDINGS:
        mockllm_embed_read(c, root);
        break;

    default:
        mockllm_read_responses(c, root);
    }

    mockllm_read_family(rd, api, model);
    mockllm_read_out(c, cJSON_IsString(model) ? model : NULL);

    cJSON_Delete(root);
}


static void
mockllm_read_chat(mockllm_conn_t *c, cJSON *root)
{
    char             where[MOCKLLM_READ_PARAM_LEN];
    int              i, k;
    cJSON           *msgs, *msg, *content, *part, *list;
    const char      *type;
    mockllm_read_t  *rd;

    rd = &c->rd;

    mockllm_read_foreign(rd, MOCKLLM_API_OPENAI, root,
                         mockllm_read_not_chat);

    mockllm_read_chat_limit(rd, root);

    if (mockllm_read_get(root, "n")) {
        rd->n = mockllm_read_limit(rd, MOCKLLM_API_OPENAI, root, "n",
                                   MOCKLLM_N_MAX);
    }

    mockllm_read_stream(rd, MOCKLLM_API_OPENAI, root);

    rd->usage_chunk = cJSON_IsTrue(mockllm_read_get(
                          mockllm_read_get(root, "stream_options"),
                          "include_usage"));

    rd->prompt = 3;

    msgs = mockllm_read_get(root, "messages");

    if (msgs == NULL) {
        mockllm_read_missing(rd, MOCKLLM_API_OPENAI, "messages");

    } else if (!cJSON_IsArray(msgs)) {
        mockllm_read_bad(rd, MOCKLLM_API_OPENAI, "messages", "an array");
    }

    /* cJSON_ArrayForEach() takes no expression */
    list = cJSON_IsArray(msgs) ? msgs : NULL;
    i = 0;

    cJSON_ArrayForEach(msg, list) {
        rd->messages++;
        rd->prompt += 3;

        if (!cJSON_IsObject(msg)) {
            snprintf(where, sizeof(where), "messages[%d]", i);
            mockllm_read_bad(rd, MOCKLLM_API_OPENAI, where, "an object");
            i++;
            continue;
        }

        content = mockllm_read_get(msg, "content");
        rd->prompt += mockllm_read_text(content);

        if (cJSON_IsArray(content)) {
            k = 0;

            cJSON_ArrayForEach(part, content) {
                type = mockllm_read_type(part);

                if (type && strcmp(type, "text") == 0) {
                    /* void */

                } else if (type && strcmp(type, "image_url") == 0) {
                    rd->images++;

                } else if (type && strcmp(type, "input_audio") == 0) {
                    rd->audio++;

                } else if (type && strcmp(type, "file") == 0) {
                    rd->files++;

                } else {
                    snprintf(where, sizeof(where),
                             "messages[%d].content[%d].type", i, k);
                    mockllm_read_bad(rd, MOCKLLM_API_OPENAI, where,
                                     "one of 'text', 'image_url', "
                                     "'input_audio', 'file'");
                }

                k++;
            }

        } else if (content && !cJSON_IsString(content)) {
            snprintf(where, sizeof(where), "messages[%d].content", i);
            mockllm_read_bad(rd, MOCKLLM_API_OPENAI, where,
                             "a string or an array");
        }

        i++;
    }

    rd->tools = mockllm_read_count(rd, MOCKLLM_API_OPENAI, root, "tools")
                + mockllm_read_count(rd, MOCKLLM_API_OPENAI, root,
                                     "functions");

    mockllm_read_chat_history(rd, list);
    mockllm_read_tools(c, MOCKLLM_API_OPENAI, root,
                       mockllm_read_is(mockllm_read_last(list), "role",
                                       "tool"));
}


/*
 * Chat's output limit, as OpenAI reads it: both names at once refused,
 * max_tokens refused by the reasoning models, with OpenAI's messages.
 */

static void
mockllm_read_chat_limit(mockllm_read_t *rd, cJSON *root)
{
    int     first;
    cJSON  *mct, *mt;

    mct = mockllm_read_get(root, "max_completion_tokens");
    mt = mockllm_read_get(root, "max_tokens");

    rd->max_given = (mct || mt);
    first = (rd->status == 0);

    if (mct && mt) {
        mockllm_read_refuse(rd, "max_tokens", "Setting 'max_tokens' and "
                            "'max_completion_tokens' at the same time is "
                            "not supported.");
        rd->code = first ? "invalid_parameter_combination" : rd->code;
        rd->max = MOCKLLM_NONE;

    } else if (mct) {
        rd->max = mockllm_read_limit(rd, MOCKLLM_API_OPENAI, root,
                                     "max_completion_tokens",
                                     MOCKLLM_INT_MAX);

    } else if (mt && mockllm_read_reasoning(mockllm_read_get(root, "model")))
    {
        mockllm_read_refuse(rd, "max_tokens", "Unsupported parameter: "
                            "'max_tokens' is not supported with this model. "
                            "Use 'max_completion_tokens' instead.");
        rd->code = first ? "unsupported_parameter" : rd->code;
        rd->max = MOCKLLM_NONE;

    } else if (mt) {
        rd->max = mockllm_read_limit(rd, MOCKLLM_API_OPENAI, root,
                                     "max_tokens", MOCKLLM_INT_MAX);
    }
}


/* the mock's reasoning models: "mock-o" and a digit, as mock-o3-mini */

static int
mockllm_read_reasoning(cJSON *model)
{
    const char  *s;

    if (!cJSON_IsString(model)) {
        return 0;
    }

    s = model->valuestring;

    return strncmp(s, "mock-o", 6) == 0 && s[6] >= '0' && s[6] <= '9';
}


static void
mockllm_read_anthropic(mockllm_conn_t *c, cJSON *root, int count)
{
    char             where[MOCKLLM_READ_PARAM_LEN];
    int              i;
    cJSON           *system, *msgs, *msg, *content, *block, *thinking;
    cJSON           *list;
    int64_t          budget;
    const char      *type;
    mockllm_read_t  *rd;

    rd = &c->rd;

    mockllm_read_foreign(rd, MOCKLLM_API_ANTHROPIC, root,
                         mockllm_read_not_anthropic);

    if (count) {
        /* nothing is generated: no limit, none to hold a budget to */
        mockllm_read_foreign(rd, MOCKLLM_API_ANTHROPIC, root,
                             mockllm_read_not_count);
        rd->max = MOCKLLM_NONE;

    } else if (mockllm_read_get(root, "max_tokens") == NULL) {
        mockllm_read_missing(rd, MOCKLLM_API_ANTHROPIC, "max_tokens");
        rd->max = MOCKLLM_NONE;

    } else {
        rd->max = mockllm_read_limit(rd, MOCKLLM_API_ANTHROPIC, root,
                                     "max_tokens", MOCKLLM_INT_MAX);
        rd->max_given = 1;
    }

    if (!count) {
        mockllm_read_stream(rd, MOCKLLM_API_ANTHROPIC, root);
    }

    rd->prompt = 3;

    system = mockllm_read_get(root, "system");

    if (cJSON_IsArray(system)) {
        i = 0;

        cJSON_ArrayForEach(block, system) {
            type = mockllm_read_type(block);

            if (type == NULL || strcmp(type, "text") != 0) {
                snprintf(where, sizeof(where), "system.%d.type", i);
                mockllm_read_bad(rd, MOCKLLM_API_ANTHROPIC, where, "'text'");
            }

            i++;
        }

    } else if (system && !cJSON_IsString(system)) {
        mockllm_read_bad(rd, MOCKLLM_API_ANTHROPIC, "system",
                         "a string or an array of text blocks");
    }

    rd->prompt += mockllm_read_text(system);

    msgs = mockllm_read_get(root, "messages");

    if (msgs == NULL) {
        mockllm_read_missing(rd, MOCKLLM_API_ANTHROPIC, "messages");

    } else if (!cJSON_IsArray(msgs)) {
        mockllm_read_bad(rd, MOCKLLM_API_ANTHROPIC, "messages",
                         "a valid list");
    }

    /* cJSON_ArrayForEach() takes no expression */
    list = cJSON_IsArray(msgs) ? msgs : NULL;
    i = 0;

    cJSON_ArrayForEach(msg, list) {
        rd->messages++;
        rd->prompt += 3;

        if (!cJSON_IsObject(msg)) {
            snprintf(where, sizeof(where), "messages.%d", i);
            mockllm_read_bad(rd, MOCKLLM_API_ANTHROPIC, where,
                             "a valid dictionary");
            i++;
            continue;
        }

        content = mockllm_read_get(msg, "content");
        rd->prompt += mockllm_read_text(content);

        snprintf(where, sizeof(where), "messages.%d.content", i);

        if (cJSON_IsArray(content)) {
            mockllm_read_anthropic_blocks(rd, content, where, 0);

        } else if (content && !cJSON_IsString(content)) {
            mockllm_read_bad(rd, MOCKLLM_API_ANTHROPIC, where,
                             "a string or a list of blocks");
        }

        i++;
    }

    rd->tools = mockllm_read_count(rd, MOCKLLM_API_ANTHROPIC, root, "tools");

    mockllm_read_anthropic_history(rd, list);
    mockllm_read_tools(c, MOCKLLM_API_ANTHROPIC, root,
                       mockllm_read_has(mockllm_read_blocks(
                                            mockllm_read_last(list)),
                                        "type", "tool_result"));
    rd->refs = mockllm_read_count(rd, MOCKLLM_API_ANTHROPIC, root,
                                  "mcp_servers");

    if (mockllm_read_get(root, "container")) {
        rd->refs++;
    }

    /* the thinking budget is part of max_tokens */
    thinking = mockllm_read_get(root, "thinking");

    if (mockllm_read_get(thinking, "budget_tokens")) {
        if (mockllm_read_int(mockllm_read_get(thinking, "budget_tokens"), 1,
                             MOCKLLM_INT_MAX, &budget)
            != MOCKLLM_OK)
        {
            mockllm_read_bad(rd, MOCKLLM_API_ANTHROPIC,
                             "thinking.budget_tokens", "a positive integer");

        } else if (rd->max != MOCKLLM_NONE && budget >= rd->max) {
            mockllm_read_refuse(rd, "thinking.budget_tokens",
                                "`max_tokens` must be greater than "
                                "`thinking.budget_tokens`.");
        }
    }
}


/*
 * Blocks of an Anthropic message's content, or of a tool_result's
 * (nested): the images and documents in a tool_result count as such.
 */

static void
mockllm_read_anthropic_blocks(mockllm_read_t *rd, cJSON *blocks,
    const char *where, int nested)
{
    char         in[MOCKLLM_READ_PARAM_LEN];
    int          k;
    cJSON       *block, *content;
    const char  *type;

    k = 0;

    cJSON_ArrayForEach(block, blocks) {
        type = mockllm_read_type(block);

        if (type && strcmp(type, "text") == 0) {
            /* void */

        } else if (type && strcmp(type, "image") == 0) {
            rd->images++;

        } else if (type && strcmp(type, "document") == 0) {
            rd->files++;

        } else if (type && !nested && strcmp(type, "tool_use") == 0) {
            /* void */

        } else if (type && !nested && strcmp(type, "tool_result") == 0) {
            content = mockllm_read_get(block, "content");
            snprintf(in, sizeof(in), "%s.%d.content", where, k);

            if (cJSON_IsArray(content)) {
                mockllm_read_anthropic_blocks(rd, content, in, 1);

            } else if (content && !cJSON_IsString(content)) {
                mockllm_read_bad(rd, MOCKLLM_API_ANTHROPIC, in,
                                 "a string or a list of blocks");
            }

        } else {
            snprintf(in, sizeof(in), "%s.%d.type", where, k);
            mockllm_read_bad(rd, MOCKLLM_API_ANTHROPIC, in,
                             nested ? "one of 'text', 'image', 'document'"
                                    : "one of 'text', 'image', 'document', "
                                      "'tool_use', 'tool_result'");
        }

        k++;
    }
}


static void
mockllm_read_responses(mockllm_conn_t *c, cJSON *root)
{
    char             where[MOCKLLM_READ_PARAM_LEN];
    int              i;
    cJSON           *input, *item, *instr, *content, *list;
    const char      *type;
    mockllm_read_t  *rd;

    static const char  *refs[] = {
        "previous_response_id", "conversation", "prompt", NULL
    };

    rd = &c->rd;

    mockllm_read_foreign(rd, MOCKLLM_API_RESPONSES, root,
                         mockllm_read_not_responses);

    if (mockllm_read_get(root, "max_output_tokens")) {
        rd->max = mockllm_read_limit(rd, MOCKLLM_API_RESPONSES, root,
                                     "max_output_tokens", MOCKLLM_INT_MAX);
        rd->max_given = 1;
    }

    mockllm_read_stream(rd, MOCKLLM_API_RESPONSES, root);

    for (i = 0; refs[i]; i++) {
        if (mockllm_read_get(root, refs[i])) {
            rd->refs++;
        }
    }

    rd->prompt = 3;

    input = mockllm_read_get(root, "input");

    if (cJSON_IsString(input)) {
        /* a string input is one user message */
        rd->messages = 1;
        rd->prompt += 3 + mockllm_read_text(input);

    } else if (input == NULL) {
        if (rd->refs == 0) {
            mockllm_read_missing(rd, MOCKLLM_API_RESPONSES, "input");
        }

    } else if (!cJSON_IsArray(input)) {
        mockllm_read_bad(rd, MOCKLLM_API_RESPONSES, "input",
                         "a string or an array");
    }

    list = cJSON_IsArray(input) ? input : NULL;
    i = 0;

    cJSON_ArrayForEach(item, list) {
        rd->messages++;
        rd->prompt += 3;

        type = mockllm_read_type(item);

        if (type == NULL && cJSON_IsObject(item)
            && mockllm_read_get(item, "type") == NULL
            && mockllm_read_get(item, "role"))
        {
            type = "message";
        }

        if (type && strcmp(type, "message") == 0) {
            content = mockllm_read_get(item, "content");
            rd->prompt += mockllm_read_text(content);

            snprintf(where, sizeof(where), "input[%d].content", i);

            if (cJSON_IsArray(content)) {
                mockllm_read_responses_parts(rd, content, where);

            } else if (content && !cJSON_IsString(content)) {
                mockllm_read_bad(rd, MOCKLLM_API_RESPONSES, where,
                                 "a string or an array");
            }

        } else if (type && strcmp(type, "function_call_output") == 0) {
            content = mockllm_read_get(item, "output");

            if (cJSON_IsArray(content)) {
                snprintf(where, sizeof(where), "input[%d].output", i);
                mockllm_read_responses_parts(rd, content, where);
            }

        } else if (type && strcmp(type, "item_reference") == 0) {
            rd->refs++;

        } else if (type && (strcmp(type, "function_call") == 0
                            || strcmp(type, "reasoning") == 0))
        {
            /* void */

        } else {
            snprintf(where, sizeof(where), "input[%d]", i);
            mockllm_read_bad(rd, MOCKLLM_API_RESPONSES, where,
                             "a message, function_call, "
                             "function_call_output, item_reference or "
                             "reasoning item");
        }

        i++;
    }

    instr = mockllm_read_get(root, "instructions");

    if (instr && !cJSON_IsString(instr)) {
        mockllm_read_bad(rd, MOCKLLM_API_RESPONSES, "instructions",
                         "a string");

    } else if (instr) {
        /* counted as Anthropic's system is, and echoed */
        rd->prompt += mockllm_read_text(instr);

        mockllm_buf_add_json(&c->instr, instr->valuestring,
                             strlen(instr->valuestring));
        rd->instructions = 1;
    }

    rd->tools = mockllm_read_count(rd, MOCKLLM_API_RESPONSES, root, "tools");

    mockllm_read_responses_history(rd, list);
    mockllm_read_tools(c, MOCKLLM_API_RESPONSES, root,
                       mockllm_read_is(mockllm_read_last(list), "type",
                                       "function_call_output"));
}


static void
mockllm_read_responses_parts(mockllm_read_t *rd, cJSON *parts,
    const char *where)
{
    char         in[MOCKLLM_READ_PARAM_LEN];
    int          k;
    cJSON       *part;
    const char  *type;

    k = 0;

    cJSON_ArrayForEach(part, parts) {
        type = mockllm_read_type(part);

        if (type && (strcmp(type, "input_text") == 0
                     || strcmp(type, "output_text") == 0))
        {
            /* void */

        } else if (type && strcmp(type, "input_image") == 0) {
            rd->images++;

        } else if (type && strcmp(type, "input_file") == 0) {
            rd->files++;

        } else if (type && strcmp(type, "input_audio") == 0) {
            rd->audio++;

        } else {
            snprintf(in, sizeof(in), "%s[%d].type", where, k);
            mockllm_read_bad(rd, MOCKLLM_API_RESPONSES, in,
                             "one of 'input_text', 'output_text', "
                             "'input_image', 'input_file', 'input_audio'");
        }

        k++;
    }
}


/*
 * A Chat conversation's tool messages, as OpenAI holds them: each answers
 * a call of the assistant message just before them, and each such call is
 * answered before the next other message.
 */

static void
mockllm_read_chat_history(mockllm_read_t *rd, cJSON *msgs)
{
    char         where[MOCKLLM_READ_PARAM_LEN];
    int          i, k, first;
    cJSON       *msg, *asst, *id, *calls;
    const char  *role;

    asst = NULL;
    i = 0;
    k = 0;

    cJSON_ArrayForEach(msg, msgs) {
        role = mockllm_read_string(msg, "role");

        if (role && strcmp(role, "tool") == 0) {
            id = mockllm_read_get(msg, "tool_call_id");
            first = (rd->status == 0);

            if (!cJSON_IsString(id)) {
                snprintf(where, sizeof(where), "messages[%d].tool_call_id",
                         i);
                mockllm_read_missing(rd, MOCKLLM_API_OPENAI, where);
                rd->code = first ? "missing_required_parameter" : rd->code;

            } else if (asst == NULL
                       || !mockllm_read_has(mockllm_read_get(asst,
                                                             "tool_calls"),
                                            "id", id->valuestring))
            {
                snprintf(where, sizeof(where), "messages.[%d].role", i);
                mockllm_read_refuse(rd, where, "Invalid parameter: messages "
                                    "with role 'tool' must be a response to "
                                    "a preceeding message with "
                                    "'tool_calls'.");
            }

            i++;
            continue;
        }

        if (asst) {
            mockllm_read_chat_unanswered(rd, asst, k);
            asst = NULL;
        }

        calls = mockllm_read_get(msg, "tool_calls");

        if (role && strcmp(role, "assistant") == 0 && cJSON_IsArray(calls)
            && cJSON_GetArraySize(calls) > 0)
        {
            mockllm_read_chat_calls(rd, calls, i);
            asst = msg;
            k = i;
        }

        i++;
    }

    if (asst) {
        mockllm_read_chat_unanswered(rd, asst, k);
    }
}


/* each call of the assistant message k has its tool message after it */

static void
mockllm_read_chat_unanswered(mockllm_read_t *rd, cJSON *asst, int k)
{
    char         where[MOCKLLM_READ_PARAM_LEN];
    cJSON       *call, *id, *msg;
    const char  *role;

    cJSON_ArrayForEach(call, mockllm_read_get(asst, "tool_calls")) {
        id = mockllm_read_get(call, "id");

        if (!cJSON_IsString(id)) {
            continue;
        }

        for (msg = asst->next; msg; msg = msg->next) {
            role = mockllm_read_string(msg, "role");

            if (role == NULL || strcmp(role, "tool") != 0) {
                msg = NULL;
                break;
            }

            if (mockllm_read_is(msg, "tool_call_id", id->valuestring)) {
                break;
            }
        }

        if (msg == NULL) {
            snprintf(where, sizeof(where), "messages.[%d].role", k);
            mockllm_read_refuse(rd, where, "An assistant message with "
                                "'tool_calls' must be followed by tool "
                                "messages responding to each "
                                "'tool_call_id'. The following tool_call_ids "
                                "did not have response messages: %.64s",
                                id->valuestring);
            return;
        }
    }
}


/*
 * The calls of a Chat assistant message, as OpenAI types them: an id, the
 * type function, the function's name and its arguments as a string (not
 * an object: a translation's mistake).
 */

static void
mockllm_read_chat_calls(mockllm_read_t *rd, cJSON *calls, int i)
{
    char         where[MOCKLLM_READ_PARAM_LEN];
    int          j, first;
    cJSON       *call, *fn, *args;
    const char  *type;

    j = 0;

    cJSON_ArrayForEach(call, calls) {
        fn = mockllm_read_get(call, "function");
        args = mockllm_read_get(fn, "arguments");
        type = mockllm_read_string(call, "type");
        first = (rd->status == 0);

        if (mockllm_read_string(call, "id") == NULL) {
            snprintf(where, sizeof(where), "messages[%d].tool_calls[%d].id",
                     i, j);
            mockllm_read_missing(rd, MOCKLLM_API_OPENAI, where);

        } else if (type == NULL || strcmp(type, "function") != 0) {
            snprintf(where, sizeof(where),
                     "messages[%d].tool_calls[%d].type", i, j);
            mockllm_read_bad(rd, MOCKLLM_API_OPENAI, where, "'function'");

        } else if (mockllm_read_string(fn, "name") == NULL) {
            snprintf(where, sizeof(where),
                     "messages[%d].tool_calls[%d].function.name", i, j);
            mockllm_read_missing(rd, MOCKLLM_API_OPENAI, where);

        } else if (!cJSON_IsString(args)) {
            snprintf(where, sizeof(where),
                     "messages[%d].tool_calls[%d].function.arguments", i, j);

            if (args == NULL) {
                mockllm_read_missing(rd, MOCKLLM_API_OPENAI, where);

            } else {
                mockllm_read_refuse(rd, where, "Invalid type for '%s': "
                                    "expected a string, but got %s instead.",
                                    where, cJSON_IsObject(args)
                                           ? "an object" : "another type");
                rd->code = first ? "invalid_type" : rd->code;
            }
        }

        j++;
    }
}


/*
 * An Anthropic tool_use block, as Anthropic types it: an id of its
 * pattern, a name, and the input as an object.
 */

static void
mockllm_read_anthropic_use(mockllm_read_t *rd, cJSON *block, int i, int k)
{
    cJSON       *input;
    const char  *id, *p;

    id = mockllm_read_string(block, "id");
    input = mockllm_read_get(block, "input");

    for (p = id; p && *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
              || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
        {
            break;
        }
    }

    if (id == NULL) {
        mockllm_read_refuse(rd, "messages", "messages.%d.content.%d.tool_use"
                            ".id: Field required", i, k);

    } else if (*p || p == id) {
        mockllm_read_refuse(rd, "messages", "messages.%d.content.%d.tool_use"
                            ".id: String should match pattern "
                            "'^[a-zA-Z0-9_-]+$'", i, k);

    } else if (mockllm_read_string(block, "name") == NULL) {
        mockllm_read_refuse(rd, "messages", "messages.%d.content.%d.tool_use"
                            ".name: Field required", i, k);

    } else if (!cJSON_IsObject(input)) {
        mockllm_read_refuse(rd, "messages", "messages.%d.content.%d.tool_use"
                            ".input: %s", i, k,
                            input ? "Input should be a valid dictionary"
                                  : "Field required");
    }
}


/*
 * An Anthropic conversation's tool results, as Anthropic holds them: the
 * tool_result blocks of a message answer the tool_use blocks of the one
 * before, each of them.
 */

static void
mockllm_read_anthropic_history(mockllm_read_t *rd, cJSON *msgs)
{
    int          i, k;
    cJSON       *msg, *prev, *block, *id;
    const char  *type;

    prev = NULL;
    i = 0;

    cJSON_ArrayForEach(msg, msgs) {
        k = 0;

        cJSON_ArrayForEach(block, mockllm_read_blocks(msg)) {
            type = mockllm_read_type(block);
            id = mockllm_read_get(block, "tool_use_id");

            if (type && strcmp(type, "tool_use") == 0) {
                mockllm_read_anthropic_use(rd, block, i, k);

            } else if (type == NULL || strcmp(type, "tool_result") != 0) {
                /* void */

            } else if (!cJSON_IsString(id)) {
                mockllm_read_refuse(rd, "messages", "messages.%d.content.%d"
                                    ".tool_use_id: Field required", i, k);

            } else if (!mockllm_read_has(mockllm_read_blocks(prev), "id",
                                         id->valuestring))
            {
                mockllm_read_refuse(rd, "messages", "messages.%d.content.%d:"
                                    " unexpected `tool_use_id` found in "
                                    "`tool_result` blocks: %.64s. Each "
                                    "`tool_result` block must have a "
                                    "corresponding `tool_use` block in the "
                                    "previous message.", i, k,
                                    id->valuestring);
            }

            k++;
        }

        cJSON_ArrayForEach(block, mockllm_read_blocks(prev)) {
            type = mockllm_read_type(block);
            id = mockllm_read_get(block, "id");

            if (type && strcmp(type, "tool_use") == 0 && cJSON_IsString(id)
                && !mockllm_read_has(mockllm_read_blocks(msg), "tool_use_id",
                                     id->valuestring))
            {
                mockllm_read_refuse(rd, "messages", "messages.%d: `tool_use` "
                                    "ids were found without `tool_result` "
                                    "blocks immediately after: %.64s. Each "
                                    "`tool_use` block must have a "
                                    "corresponding `tool_result` block in "
                                    "the next message.", i - 1,
                                    id->valuestring);
            }
        }

        prev = msg;
        i++;
    }
}


/*
 * The Responses input's function_call_output items: each answers a
 * function_call of the input, unless the context is stored elsewhere
 * (previous_response_id, conversation, prompt, item_reference).
 */

static void
mockllm_read_responses_history(mockllm_read_t *rd, cJSON *input)
{
    char         where[MOCKLLM_READ_PARAM_LEN];
    int          i;
    cJSON       *item, *id, *call;
    const char  *type;

    i = 0;

    cJSON_ArrayForEach(item, input) {
        type = mockllm_read_type(item);
        id = mockllm_read_get(item, "call_id");

        if (type && strcmp(type, "function_call") == 0) {
            mockllm_read_responses_call(rd, item, i);
        }

        if (type == NULL || strcmp(type, "function_call_output") != 0) {
            i++;
            continue;
        }

        if (!cJSON_IsString(id)) {
            snprintf(where, sizeof(where), "input[%d].call_id", i);
            mockllm_read_missing(rd, MOCKLLM_API_RESPONSES, where);
            i++;
            continue;
        }

        cJSON_ArrayForEach(call, input) {
            type = mockllm_read_type(call);

            if (type && strcmp(type, "function_call") == 0
                && mockllm_read_is(call, "call_id", id->valuestring))
            {
                break;
            }
        }

        if (call == NULL && rd->refs == 0) {
            mockllm_read_refuse(rd, "input", "No tool call found for "
                                "function call output with call_id %.64s.",
                                id->valuestring);
        }

        i++;
    }
}


/* a Responses function_call item: its call_id, name and arguments */

static void
mockllm_read_responses_call(mockllm_read_t *rd, cJSON *item, int i)
{
    char          where[MOCKLLM_READ_PARAM_LEN];
    size_t        k;
    const char   *name;

    static const char  *members[] = { "call_id", "name", "arguments", NULL };

    for (k = 0; members[k]; k++) {
        name = members[k];

        if (mockllm_read_get(item, name) == NULL) {
            snprintf(where, sizeof(where), "input[%d].%s", i, name);
            mockllm_read_missing(rd, MOCKLLM_API_RESPONSES, where);

        } else if (mockllm_read_string(item, name) == NULL) {
            snprintf(where, sizeof(where), "input[%d].%s", i, name);
            mockllm_read_bad(rd, MOCKLLM_API_RESPONSES, where, "a string");
        }
    }
}


/*
 * The tools the request declares that the client runs, and whether the
 * answer is calls of them: x-mock-tool-calls of them, unless tool_choice
 * says none or the last message is a tool result (answered), at least one
 * when tool_choice forces a call, at most one without parallel calls.
 */

static void
mockllm_read_tools(mockllm_conn_t *c, int api, cJSON *root, int answered)
{
    int              i, ntools, forced, parallel;
    cJSON           *tool, *name, *props, *choice, *named, *list;
    cJSON           *found, *found_props;
    cJSON           *names[MOCKLLM_CALLS_MAX], *schemas[MOCKLLM_CALLS_MAX];
    int64_t          n, k;
    const char      *type;
    mockllm_read_t  *rd;

    rd = &c->rd;

    choice = mockllm_read_get(root, "tool_choice");
    type = cJSON_IsString(choice) ? choice->valuestring
                                  : mockllm_read_type(choice);
    named = NULL;

    if (type && cJSON_IsObject(choice)
        && (strcmp(type, "function") == 0 || strcmp(type, "tool") == 0))
    {
        named = mockllm_read_get(api == MOCKLLM_API_OPENAI
                                 ? mockllm_read_get(choice, "function")
                                 : choice, "name");
        named = cJSON_IsString(named) ? named : NULL;
    }

    forced = type && (strcmp(type, "required") == 0
                      || strcmp(type, "any") == 0);

    if (api == MOCKLLM_API_ANTHROPIC) {
        parallel = !cJSON_IsTrue(mockllm_read_get(choice,
                                            "disable_parallel_tool_use"));

    } else {
        parallel = !cJSON_IsFalse(mockllm_read_get(root,
                                                   "parallel_tool_calls"));
    }

    list = mockllm_read_get(root, "tools");
    list = cJSON_IsArray(list) ? list : NULL;
    ntools = 0;
    i = 0;
    found = NULL;
    found_props = NULL;

    cJSON_ArrayForEach(tool, list) {
        if (mockllm_read_tool(rd, api, tool, i++, &name, &props)
            != MOCKLLM_OK)
        {
            continue;
        }

        if (named && strcmp(name->valuestring, named->valuestring) == 0) {
            found = name;
            found_props = props;
        }

        if (ntools < MOCKLLM_CALLS_MAX) {
            names[ntools] = name;
            schemas[ntools] = props;
        }

        ntools++;
    }

    if (named && found == NULL) {
        mockllm_read_refuse(rd, "tool_choice", api == MOCKLLM_API_ANTHROPIC
                            ? "tool_choice.name: Tool '%.64s' not found in "
                              "tools"
                            : "Invalid value for 'tool_choice': no function "
                              "named '%.64s' was specified in the 'tools' "
                              "parameter.", named->valuestring);
    }

    if (ntools == 0 || answered || rd->status
        || (type && strcmp(type, "none") == 0))
    {
        return;
    }

    n = c->req.tool_calls;

    if (n == 0 && (forced || named)) {
        n = 1;
    }

    if (!parallel && n > 1) {
        n = 1;
    }

    for (k = 0; k < n; k++) {
        if (found) {
            mockllm_read_call(c, k, found, found_props);

        } else {
            mockllm_read_call(c, k, names[k % ntools], schemas[k % ntools]);
        }
    }

    rd->calls = n;
}


/*
 * A tool the client runs: Chat's and Responses' of type function,
 * Anthropic's custom ones (its server tools are run by the model); its
 * name, required, and the properties of its schema.
 */

static int
mockllm_read_tool(mockllm_read_t *rd, int api, cJSON *tool, int i,
    cJSON **name, cJSON **props)
{
    char         where[MOCKLLM_READ_PARAM_LEN];
    cJSON       *fn;
    const char  *type;

    type = mockllm_read_type(tool);

    if (api == MOCKLLM_API_ANTHROPIC) {
        if (type && strcmp(type, "custom") != 0) {
            return MOCKLLM_ERROR;
        }

        fn = tool;
        *props = mockllm_read_get(mockllm_read_get(tool, "input_schema"),
                                  "properties");

        if (!cJSON_IsObject(mockllm_read_get(tool, "input_schema"))) {
            snprintf(where, sizeof(where), "tools.%d.custom.input_schema", i);

            if (mockllm_read_get(tool, "input_schema") == NULL) {
                mockllm_read_missing(rd, api, where);

            } else {
                mockllm_read_bad(rd, api, where, "a valid dictionary");
            }
        }

        snprintf(where, sizeof(where), "tools.%d.name", i);

    } else {
        if (type == NULL || strcmp(type, "function") != 0) {
            return MOCKLLM_ERROR;
        }

        fn = (api == MOCKLLM_API_OPENAI) ? mockllm_read_get(tool, "function")
                                         : tool;
        *props = mockllm_read_get(mockllm_read_get(fn, "parameters"),
                                  "properties");
        snprintf(where, sizeof(where),
                 api == MOCKLLM_API_OPENAI ? "tools[%d].function.name"
                                           : "tools[%d].name", i);
    }

    *name = mockllm_read_get(fn, "name");

    if (!cJSON_IsString(*name) || (*name)->valuestring[0] == '\0') {
        mockllm_read_missing(rd, api, where);
        return MOCKLLM_ERROR;
    }

    return MOCKLLM_OK;
}


/*
 * Call i of the answer: its tool's name, escaped, and the start of its
 * arguments, {"PROP":", PROP the first property of the tool's schema or
 * "arg", as JSON text and escaped again, to be put in a JSON string.
 */

static void
mockllm_read_call(mockllm_conn_t *c, int64_t i, cJSON *name, cJSON *props)
{
    const char      *prop;
    mockllm_buf_t   *b;
    mockllm_call_t  *call;

    b = &c->calls;
    call = &c->rd.call[i];

    prop = "arg";

    if (cJSON_IsObject(props) && props->child && props->child->string) {
        prop = props->child->string;
    }

    call->name = b->len;
    mockllm_buf_add_json(b, name->valuestring, strlen(name->valuestring));
    call->name_len = b->len - call->name;

    call->key = b->len;
    mockllm_buf_adds(b, "{\"");
    mockllm_buf_add_json(b, prop, strlen(prop));
    mockllm_buf_adds(b, "\":\"");
    call->key_len = b->len - call->key;

    /* reserved first: the key is escaped from the buffer into itself */
    mockllm_buf_reserve(b, call->key_len * 6);
    call->key_esc = b->len;

    if (!b->oom) {
        mockllm_buf_add_json(b, b->data + call->key, call->key_len);
    }

    call->key_esc_len = b->len - call->key_esc;
}


/*
 * The model families, as the providers have them: a model of the other
 * provider is not found.  The mock's generic names (m, mock-a) are
 * served everywhere.
 */

static void
mockllm_read_family(mockllm_read_t *rd, int api, cJSON *model)
{
    int          openai, anthropic;
    size_t       n;
    const char  *s;

    if (rd->status || !cJSON_IsString(model)) {
        return;
    }

    s = model->valuestring;

    anthropic = (strstr(s, "claude") != NULL);
    openai = !anthropic
             && (strstr(s, "gpt") || strstr(s, "embed")
                 || strstr(s, "davinci")
                 || (s[0] == 'o' && s[1] >= '0' && s[1] <= '9')
                 || (strncmp(s, "mock-o", 6) == 0
                     && s[6] >= '0' && s[6] <= '9'));

    /* bounded, at a character's start: the message is escaped as JSON */
    n = strlen(s);

    if (n > 128) {
        n = 128;

        while (n && ((unsigned char) s[n] & 0xc0) == 0x80) {
            n--;
        }
    }

    if (api == MOCKLLM_API_ANTHROPIC && openai) {
        mockllm_read_refuse(rd, "model", "model: %.*s", (int) n, s);
        rd->status = 404;
        rd->type = "not_found_error";

    } else if (api != MOCKLLM_API_ANTHROPIC && anthropic) {
        mockllm_read_refuse(rd, "model", "The model '%.*s' does not exist "
                            "or you do not have access to it.", (int) n, s);
        rd->status = 404;
        rd->code = "model_not_found";
    }
}


/* a message's content blocks, when they are an array */

static cJSON *
mockllm_read_blocks(cJSON *msg)
{
    cJSON  *content;

    content = mockllm_read_get(msg, "content");

    return cJSON_IsArray(content) ? content : NULL;
}


/* whether one of the objects of an array has the member with the value */

static int
mockllm_read_has(cJSON *list, const char *name, const char *value)
{
    cJSON  *item;

    cJSON_ArrayForEach(item, list) {
        if (mockllm_read_is(item, name, value)) {
            return 1;
        }
    }

    return 0;
}


static int
mockllm_read_is(cJSON *obj, const char *name, const char *value)
{
    const char  *s;

    s = mockllm_read_string(obj, name);

    return s && strcmp(s, value) == 0;
}


static const char *
mockllm_read_string(cJSON *obj, const char *name)
{
    cJSON  *v;

    v = mockllm_read_get(obj, name);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}


static cJSON *
mockllm_read_last(cJSON *list)
{
    cJSON  *item, *last;

    last = NULL;

    cJSON_ArrayForEach(item, list) {
        last = item;
    }

    return last;
}


static void
mockllm_read_foreign(mockllm_read_t *rd, int api, cJSON *root,
    const char **names)
{
    for ( /* void */ ; *names; names++) {
        if (mockllm_read_get(root, *names) == NULL) {
            continue;
        }

        switch (api) {

        case MOCKLLM_API_OPENAI:
            mockllm_read_refuse(rd, *names, "Unrecognized request argument "
                                "supplied: %s", *names);
            break;

        case MOCKLLM_API_ANTHROPIC:
            mockllm_read_refuse(rd, *names, "%s: Extra inputs are not "
                                "permitted", *names);
            break;

        default:
            mockllm_read_refuse(rd, *names, "Unsupported parameter: '%s'.",
                                *names);
        }
    }
}


/* an integer member from 1 to max: its value, or MOCKLLM_NONE */

static int64_t
mockllm_read_limit(mockllm_read_t *rd, int api, cJSON *root,
    const char *name, int64_t max)
{
    char     expected[64];
    int64_t  v;

    if (mockllm_read_int(mockllm_read_get(root, name), 1, max, &v)
        == MOCKLLM_OK)
    {
        return v;
    }

    snprintf(expected, sizeof(expected), "an integer from 1 to %lld",
             (long long) max);
    mockllm_read_bad(rd, api, name, expected);

    return MOCKLLM_NONE;
}


static void
mockllm_read_stream(mockllm_read_t *rd, int api, cJSON *root)
{
    cJSON  *v;

    v = mockllm_read_get(root, "stream");

    if (v == NULL) {
        rd->stream = 0;

    } else if (cJSON_IsBool(v)) {
        rd->stream = cJSON_IsTrue(v);

    } else {
        mockllm_read_bad(rd, api, "stream", "a boolean");
        rd->stream = MOCKLLM_NONE;
    }
}


/* the entries of an array member: tools, functions, mcp_servers */

static int64_t
mockllm_read_count(mockllm_read_t *rd, int api, cJSON *root,
    const char *name)
{
    cJSON  *v;

    v = mockllm_read_get(root, name);

    if (v == NULL) {
        return 0;
    }

    if (!cJSON_IsArray(v)) {
        mockllm_read_bad(rd, api, name, "an array");
        return 0;
    }

    return cJSON_GetArraySize(v);
}


/*
 * ceil(bytes / 4) of a string, or the sum of it over the "text" strings
 * of an array's parts
 */

static int64_t
mockllm_read_text(cJSON *item)
{
    cJSON    *part, *text;
    int64_t   n;

    if (cJSON_IsString(item)) {
        return (strlen(item->valuestring) + 3) / 4;
    }

    n = 0;

    if (cJSON_IsArray(item)) {
        cJSON_ArrayForEach(part, item) {
            text = mockllm_read_get(part, "text");

            if (cJSON_IsString(text)) {
                n += (strlen(text->valuestring) + 3) / 4;
            }
        }
    }

    return n;
}


/*
 * A member of an object, the last of its name, as the providers' JSON
 * parsers keep; NULL when absent or null, which is the same.
 */

static cJSON *
mockllm_read_get(cJSON *obj, const char *name)
{
    cJSON  *m, *found;

    if (!cJSON_IsObject(obj)) {
        return NULL;
    }

    found = NULL;

    cJSON_ArrayForEach(m, obj) {
        if (m->string && strcmp(m->string, name) == 0) {
            found = m;
        }
    }

    return cJSON_IsNull(found) ? NULL : found;
}


/* the "type" of an object, if it is a string */

static const char *
mockllm_read_type(cJSON *obj)
{
    cJSON  *type;

    type = mockllm_read_get(obj, "type");

    return cJSON_IsString(type) ? type->valuestring : NULL;
}


/* a number of an integral value, 8, 8.0 or 8e0, from min to max */

static int
mockllm_read_int(cJSON *v, int64_t min, int64_t max, int64_t *out)
{
    double  d;

    if (!cJSON_IsNumber(v)) {
        return MOCKLLM_ERROR;
    }

    d = v->valuedouble;

    if (!(d >= (double) min && d <= (double) max) || d != (double) (int64_t) d)
    {
        return MOCKLLM_ERROR;
    }

    *out = (int64_t) d;

    return MOCKLLM_OK;
}


static void
mockllm_read_bad(mockllm_read_t *rd, int api, const char *param,
    const char *expected)
{
    if (api == MOCKLLM_API_ANTHROPIC) {
        mockllm_read_refuse(rd, param, "%s: Input should be %s", param,
                            expected);
        return;
    }

    mockllm_read_refuse(rd, param, "Invalid value for '%s': expected %s.",
                        param, expected);
}


static void
mockllm_read_missing(mockllm_read_t *rd, int api, const char *param)
{
    if (api == MOCKLLM_API_ANTHROPIC) {
        mockllm_read_refuse(rd, param, "%s: Field required", param);
        return;
    }

    mockllm_read_refuse(rd, param, "Missing required parameter: '%s'.",
                        param);
}


/* the first reason to refuse is the one given */

static void
mockllm_read_refuse(mockllm_read_t *rd, const char *param, const char *fmt,
    ...)
{
    va_list  args;

    if (rd->status) {
        return;
    }

    rd->status = 400;

    va_start(args, fmt);
    vsnprintf(rd->msg, sizeof(rd->msg), fmt, args);
    va_end(args);

    snprintf(rd->param, sizeof(rd->param), "%s", param);
}


/*
 * x-mock-read: model=M max=N n=N stream=0|1 m=N i=N f=N a=N t=N r=N, the
 * model's bytes outside 0x21-0x7e as %XX, "?" for a refused value
 */

static void
mockllm_read_out(mockllm_conn_t *c, cJSON *model)
{
    char             hex[3];
    const char      *p;
    mockllm_buf_t   *b;
    mockllm_read_t  *rd;

    static const char  digits[] = "0123456789ABCDEF";

    rd = &c->rd;
    b = &c->readout;

    mockllm_buf_adds(b, "model=");

    for (p = model ? model->valuestring : ""; *p; p++) {
        if (*p >= 0x21 && *p <= 0x7e) {
            mockllm_buf_add(b, p, 1);
            continue;
        }

        hex[0] = '%';
        hex[1] = digits[(unsigned char) *p >> 4];
        hex[2] = digits[(unsigned char) *p & 0xf];
        mockllm_buf_add(b, hex, 3);
    }

    mockllm_read_num(b, " max=", rd->max);
    mockllm_read_num(b, " n=", rd->n);
    mockllm_read_num(b, " stream=", rd->stream);
    mockllm_read_num(b, " m=", rd->messages);
    mockllm_read_num(b, " i=", rd->images);
    mockllm_read_num(b, " f=", rd->files);
    mockllm_read_num(b, " a=", rd->audio);
    mockllm_read_num(b, " t=", rd->tools);
    mockllm_read_num(b, " r=", rd->refs);
}


static void
mockllm_read_num(mockllm_buf_t *b, const char *name, int64_t v)
{
    mockllm_buf_addz(b, name);

    if (v == MOCKLLM_NONE) {
        mockllm_buf_adds(b, "?");

    } else {
        mockllm_buf_add_num(b, (uint64_t) v);
    }
}


/*
 * RFC 8259, strictly: what cJSON lets pass (raw control bytes in strings,
 * bytes after the value, "01", "1.", bad UTF-8) is refused here.  It also
 * notes what cJSON cannot show, as its strings end at U+0000: a member
 * name with U+0000, and a control character in the top-level "model".
 * The body is writable: such a name's U+0000 is made U+0001 in it.
 */

static int
mockllm_json_value(mockllm_json_t *j, int model)
{
    int     nul, ctl, is_model;
    char    name[8];
    size_t  len;

    mockllm_json_ws(j);

    if (j->p == j->end) {
        return MOCKLLM_ERROR;
    }

    if (model) {
        j->model_ctl = 0;
    }

    switch (*j->p) {

    case '{':
    case '[':
        if (++j->depth > MOCKLLM_DEPTH_MAX) {
            return MOCKLLM_ERROR;
        }

        if (*j->p++ == '[') {
            mockllm_json_ws(j);

            if (j->p < j->end && *j->p == ']') {
                j->p++;
                j->depth--;
                return MOCKLLM_OK;
            }

            for ( ;; ) {
                if (mockllm_json_value(j, 0) != MOCKLLM_OK) {
                    return MOCKLLM_ERROR;
                }

                mockllm_json_ws(j);

                if (j->p == j->end) {
                    return MOCKLLM_ERROR;
                }

                if (*j->p++ == ']') {
                    break;
                }

                if (j->p[-1] != ',') {
                    return MOCKLLM_ERROR;
                }
            }

            j->depth--;
            return MOCKLLM_OK;
        }

        mockllm_json_ws(j);

        if (j->p < j->end && *j->p == '}') {
            j->p++;
            j->depth--;
            return MOCKLLM_OK;
        }

        for ( ;; ) {
            mockllm_json_ws(j);

            if (j->p == j->end || *j->p != '"') {
                return MOCKLLM_ERROR;
            }

            nul = 0;
            ctl = 0;

            if (mockllm_json_string(j, name, &len, &nul, &ctl) != MOCKLLM_OK)
            {
                return MOCKLLM_ERROR;
            }

            if (nul) {
                j->name_nul = 1;
            }

            is_model = (j->depth == 1 && len == 5
                        && memcmp(name, "model", 5) == 0);

            mockllm_json_ws(j);

            if (j->p == j->end || *j->p++ != ':') {
                return MOCKLLM_ERROR;
            }

            if (mockllm_json_value(j, is_model) != MOCKLLM_OK) {
                return MOCKLLM_ERROR;
            }

            mockllm_json_ws(j);

            if (j->p == j->end) {
                return MOCKLLM_ERROR;
            }

            if (*j->p++ == '}') {
                break;
            }

            if (j->p[-1] != ',') {
                return MOCKLLM_ERROR;
            }
        }

        j->depth--;
        return MOCKLLM_OK;

    case '"':
        nul = 0;
        ctl = 0;

        if (mockllm_json_string(j, NULL, NULL, &nul, &ctl) != MOCKLLM_OK) {
            return MOCKLLM_ERROR;
        }

        if (model) {
            j->model_ctl = ctl;
        }

        return MOCKLLM_OK;

    case 't':
        return mockllm_json_literal(j, "true", 4);

    case 'f':
        return mockllm_json_literal(j, "false", 5);

    case 'n':
        return mockllm_json_literal(j, "null", 4);

    default:
        return mockllm_json_number(j);
    }
}


/*
 * A string, j->p at its quote.  The name, if asked for, is its first
 * bytes when they are all ASCII (len is more than the buffer otherwise).
 */

static int
mockllm_json_string(mockllm_json_t *j, char *name, size_t *len, int *nul,
    int *ctl)
{
    size_t         k;
    uint32_t       cp, lo;
    unsigned char  ch;

    k = 0;
    j->p++;

    for ( ;; ) {
        if (j->p == j->end) {
            return MOCKLLM_ERROR;
        }

        ch = *j->p++;

        if (ch == '"') {
            break;
        }

        if (ch < 0x20) {
            return MOCKLLM_ERROR;
        }

        if (ch >= 0x80) {
            if (mockllm_json_utf8(j, ch) != MOCKLLM_OK) {
                return MOCKLLM_ERROR;
            }

            k = 8 + 1;
            continue;
        }

        cp = ch;

        if (ch == '\\') {
            if (j->p == j->end) {
                return MOCKLLM_ERROR;
            }

            switch (*j->p++) {

            case '"':
            case '\\':
            case '/':
                cp = j->p[-1];
                break;

            case 'b':
                cp = '\b';
                break;

            case 'f':
                cp = '\f';
                break;

            case 'n':
                cp = '\n';
                break;

            case 'r':
                cp = '\r';
                break;

            case 't':
                cp = '\t';
                break;

            case 'u':
                if (mockllm_json_hex4(j, &cp) != MOCKLLM_OK
                    || (cp >= 0xdc00 && cp <= 0xdfff))
                {
                    return MOCKLLM_ERROR;
                }

                if (cp >= 0xd800 && cp <= 0xdbff) {
                    /* a high surrogate must have its low one: as cJSON */
                    if (j->end - j->p < 6 || j->p[0] != '\\'
                        || j->p[1] != 'u')
                    {
                        return MOCKLLM_ERROR;
                    }

                    j->p += 2;

                    if (mockllm_json_hex4(j, &lo) != MOCKLLM_OK
                        || lo < 0xdc00 || lo > 0xdfff)
                    {
                        return MOCKLLM_ERROR;
                    }

                    cp = 0x10000;
                }

                break;

            default:
                return MOCKLLM_ERROR;
            }

            if (cp == 0) {
                *nul = 1;

                /*
                 * cJSON would end the name there: "max_tokens\u0000x" is
                 * not max_tokens, so it is made \u0001 for cJSON
                 */
                if (name) {
                    ((unsigned char *) j->p)[-1] = '1';
                }
            }

            if (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') {
                *ctl = 1;
            }
        }

        if (name && cp < 0x80 && k < 8) {
            name[k] = (char) cp;
        }

        k++;
    }

    if (len) {
        *len = k;
    }

    return MOCKLLM_OK;
}


static int
mockllm_json_hex4(mockllm_json_t *j, uint32_t *cp)
{
    int            i;
    uint32_t       v;
    unsigned char  ch;

    if (j->end - j->p < 4) {
        return MOCKLLM_ERROR;
    }

    v = 0;

    for (i = 0; i < 4; i++) {
        ch = *j->p++;

        if (ch >= '0' && ch <= '9') {
            v = v * 16 + (ch - '0');

        } else if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f') {
            v = v * 16 + ((ch | 0x20) - 'a' + 10);

        } else {
            return MOCKLLM_ERROR;
        }
    }

    *cp = v;

    return MOCKLLM_OK;
}


/* the rest of a UTF-8 sequence: no overlong form, surrogate, or > U+10FFFF */

static int
mockllm_json_utf8(mockllm_json_t *j, unsigned char ch)
{
    int            n;
    unsigned char  lo, hi;

    lo = 0x80;
    hi = 0xbf;

    if (ch >= 0xc2 && ch <= 0xdf) {
        n = 1;

    } else if (ch >= 0xe0 && ch <= 0xef) {
        n = 2;
        lo = (ch == 0xe0) ? 0xa0 : 0x80;
        hi = (ch == 0xed) ? 0x9f : 0xbf;

    } else if (ch >= 0xf0 && ch <= 0xf4) {
        n = 3;
        lo = (ch == 0xf0) ? 0x90 : 0x80;
        hi = (ch == 0xf4) ? 0x8f : 0xbf;

    } else {
        return MOCKLLM_ERROR;
    }

    if (j->end - j->p < n || j->p[0] < lo || j->p[0] > hi) {
        return MOCKLLM_ERROR;
    }

    for (j->p++, n--; n; n--, j->p++) {
        if ((*j->p & 0xc0) != 0x80) {
            return MOCKLLM_ERROR;
        }
    }

    return MOCKLLM_OK;
}


/* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */

static int
mockllm_json_number(mockllm_json_t *j)
{
    int  digits;

    if (j->p < j->end && *j->p == '-') {
        j->p++;
    }

    if (j->p == j->end) {
        return MOCKLLM_ERROR;
    }

    if (*j->p == '0') {
        j->p++;

    } else if (*j->p >= '1' && *j->p <= '9') {
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
            j->p++;
        }

    } else {
        return MOCKLLM_ERROR;
    }

    if (j->p < j->end && *j->p == '.') {
        j->p++;

        for (digits = 0; j->p < j->end && *j->p >= '0' && *j->p <= '9';
             digits++)
        {
            j->p++;
        }

        if (digits == 0) {
            return MOCKLLM_ERROR;
        }
    }

    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;

        if (j->p < j->end && (*j->p == '+' || *j->p == '-')) {
            j->p++;
        }

        for (digits = 0; j->p < j->end && *j->p >= '0' && *j->p <= '9';
             digits++)
        {
            j->p++;
        }

        if (digits == 0) {
            return MOCKLLM_ERROR;
        }
    }

    return MOCKLLM_OK;
}


static int
mockllm_json_literal(mockllm_json_t *j, const char *s, size_t n)
{
    if ((size_t) (j->end - j->p) < n || memcmp(j->p, s, n) != 0) {
        return MOCKLLM_ERROR;
    }

    j->p += n;

    return MOCKLLM_OK;
}


static void
mockllm_json_ws(mockllm_json_t *j)
{
    while (j->p < j->end
           && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n'
               || *j->p == '\r'))
    {
        j->p++;
    }
}
