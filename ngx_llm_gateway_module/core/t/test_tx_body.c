
/*
 * Whole answers and errors between dialects: every pair with text, with
 * two tool calls, with a length stop, with cached and cache-write usage,
 * with unicode; the errors of each status both ways; garbage bodies; the
 * bounds of figures, ids and messages; every allocation failing in turn.
 * The backends' bodies are as mockllm (our strict mock) and the
 * providers write them.
 */


#include <stdlib.h>

#include <cJSON.h>

#include "llm_tx_body.h"
#include "tap.h"


#define CHAT     LLM_API_OPENAI
#define MSGS     LLM_API_ANTHROPIC
#define RESP     LLM_API_RESPONSES

#define REQ_ID   "a1b2c3d4e5f60718"
#define CREATED  1733100000


/* mockllm's whole Chat answer, with its usage */
#define CHAT_TEXT                                                             \
    "{\"id\":\"chatcmpl-mock-7\",\"object\":\"chat.completion\","            \
    "\"created\":1700000000,\"model\":\"mock-gpt-4o\",\"choices\":[{"       \
    "\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"          \
    "\"tok1 tok2 \"},\"finish_reason\":\"stop\"}],\"usage\":{"              \
    "\"prompt_tokens\":12,\"completion_tokens\":2,\"total_tokens\":14,"     \
    "\"prompt_tokens_details\":{\"cached_tokens\":0}}}"

#define CHAT_LENGTH                                                           \
    "{\"id\":\"chatcmpl-mock-8\",\"object\":\"chat.completion\","            \
    "\"created\":1700000000,\"model\":\"mock-gpt-4o\",\"choices\":[{"       \
    "\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"          \
    "\"tok1 tok2 tok3 \"},\"finish_reason\":\"length\"}],\"usage\":{"       \
    "\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15,"     \
    "\"prompt_tokens_details\":{\"cached_tokens\":0}}}"

/* OpenAI's, with two parallel calls, cached tokens and reasoning */
#define CHAT_TOOLS                                                            \
    "{\n  \"id\": \"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG\",\n"             \
    "  \"object\": \"chat.completion\",\n  \"created\": 1741570283,\n"      \
    "  \"model\": \"gpt-4o-2024-08-06\",\n  \"choices\": [{\n"              \
    "    \"index\": 0,\n    \"message\": {\n      \"role\": \"assistant\","  \
    "\n      \"content\": null,\n      \"tool_calls\": [\n"                 \
    "        {\"id\": \"call_abc123\", \"type\": \"function\", "            \
    "\"function\": {\"name\": \"get_weather\", \"arguments\": "             \
    "\"{\\\"city\\\":\\\"Paris\\\"}\"}},\n"                                 \
    "        {\"id\": \"call_def456\", \"type\": \"function\", "            \
    "\"function\": {\"name\": \"get_time\", \"arguments\": "                \
    "\"{\\\"tz\\\":\\\"Europe/Paris\\\",\\\"n\\\":[1,2]}\"}}\n      ],\n"   \
    "      \"refusal\": null,\n      \"annotations\": []\n    },\n"         \
    "    \"logprobs\": null,\n    \"finish_reason\": \"tool_calls\"\n"      \
    "  }],\n  \"usage\": {\n    \"prompt_tokens\": 2000,\n"                 \
    "    \"completion_tokens\": 40,\n    \"total_tokens\": 2040,\n"         \
    "    \"prompt_tokens_details\": {\"cached_tokens\": 1536, "             \
    "\"audio_tokens\": 0},\n    \"completion_tokens_details\": {"           \
    "\"reasoning_tokens\": 16, \"audio_tokens\": 0}\n  },\n"                \
    "  \"service_tier\": \"default\",\n  \"system_fingerprint\": "          \
    "\"fp_fc9f1d7035\"\n}\n"

/* escaped and raw UTF-8, quotes, a backslash, a newline */
#define UNI_TEXT   "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x8e\x89" \
                   " \"q\" \\ \n\xe2\x82\xac"
#define UNI_JSON   "h\\u00e9llo \xe4\xb8\x96\xe7\x95\x8c \\ud83c\\udf89"     \
                   " \\\"q\\\" \\\\ \\n\xe2\x82\xac"

#define CHAT_UNICODE                                                          \
    "{\"id\":\"chatcmpl-u\",\"object\":\"chat.completion\",\"created\":1,"   \
    "\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":{\"role\":"      \
    "\"assistant\",\"content\":\"" UNI_JSON "\"},\"finish_reason\":"        \
    "\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":9,"    \
    "\"total_tokens\":14}}"

#define CHAT_BAD_ARGS                                                         \
    "{\"id\":\"chatcmpl-x\",\"object\":\"chat.completion\",\"created\":1,"   \
    "\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":{\"role\":"      \
    "\"assistant\",\"content\":\"Let me check.\",\"tool_calls\":["          \
    "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":"      \
    "\"f\",\"arguments\":\"{\\\"city\\\": \\\"Par\"}},"                     \
    "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":"      \
    "\"g\",\"arguments\":\"[1,2]\"}},"                                      \
    "{\"type\":\"function\",\"function\":{\"name\":\"h\","                  \
    "\"arguments\":\"\"}}]},\"finish_reason\":\"tool_calls\"}]}"

#define CHAT_REFUSAL                                                          \
    "{\"id\":\"chatcmpl-r\",\"object\":\"chat.completion\",\"created\":1,"   \
    "\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":{\"role\":"      \
    "\"assistant\",\"content\":null,\"refusal\":\"I can't help with "       \
    "that.\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":7,"  \
    "\"completion_tokens\":6,\"total_tokens\":13}}"

/* mockllm's whole Messages answer */
#define MSG_TEXT                                                              \
    "{\"id\":\"msg_mock_7\",\"type\":\"message\",\"role\":\"assistant\","    \
    "\"model\":\"mock-claude\",\"content\":[{\"type\":\"text\",\"text\":"   \
    "\"tok1 tok2 \"}],\"stop_reason\":\"end_turn\",\"stop_sequence\":null," \
    "\"usage\":{\"input_tokens\":12,\"output_tokens\":2,"                   \
    "\"cache_read_input_tokens\":0,\"cache_creation_input_tokens\":0}}"

#define MSG_LENGTH                                                            \
    "{\"id\":\"msg_mock_8\",\"type\":\"message\",\"role\":\"assistant\","    \
    "\"model\":\"mock-claude\",\"content\":[{\"type\":\"text\",\"text\":"   \
    "\"tok1 tok2 tok3 \"}],\"stop_reason\":\"max_tokens\","                 \
    "\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,"                \
    "\"output_tokens\":3,\"cache_read_input_tokens\":0,"                    \
    "\"cache_creation_input_tokens\":0}}"

/* Anthropic's: thinking, two texts, two tool uses; cache reads and writes */
#define MSG_TOOLS                                                             \
    "{\"id\":\"msg_01Aq9w938a90dw8q\",\"type\":\"message\",\"role\":"        \
    "\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":["  \
    "{\"type\":\"thinking\",\"thinking\":\"The user wants...\","            \
    "\"signature\":\"EqQBCgIYAhIM1gbcDa9GJwZA2b3h\"},"                      \
    "{\"type\":\"text\",\"text\":\"I'll check \"},"                         \
    "{\"type\":\"text\",\"text\":\"both.\"},"                               \
    "{\"type\":\"tool_use\",\"id\":\"toolu_01A09q90qw90lq917835lq9\","      \
    "\"name\":\"get_weather\",\"input\":{\"city\":\"Paris\"}},"             \
    "{\"type\":\"tool_use\",\"id\":\"toolu_01B\",\"name\":\"get_time\","    \
    "\"input\":{\"tz\":\"Europe/Paris\",\"n\":[1,2]}}],"                    \
    "\"stop_reason\":\"tool_use\",\"stop_sequence\":null,\"usage\":{"       \
    "\"input_tokens\":100,\"cache_creation_input_tokens\":200,"             \
    "\"cache_read_input_tokens\":1000,\"output_tokens\":50,"                \
    "\"service_tier\":\"standard\"}}"

#define MSG_UNICODE                                                           \
    "{\"id\":\"msg_u\",\"type\":\"message\",\"role\":\"assistant\","         \
    "\"model\":\"c\",\"content\":[{\"type\":\"text\",\"text\":\""           \
    UNI_JSON "\"}],\"stop_reason\":\"end_turn\",\"stop_sequence\":null,"    \
    "\"usage\":{\"input_tokens\":5,\"output_tokens\":9}}"

#define LARGEST                                                               \
    "{\"type\":\"message\",\"content\":[],\"usage\":{\"input_tokens\":"     \
    "1125899906842624,\"output_tokens\":1125899906842624,"                  \
    "\"cache_read_input_tokens\":1125899906842624,"                         \
    "\"cache_creation_input_tokens\":1125899906842624}}"

#define MSG_REFUSAL                                                           \
    "{\"id\":\"msg_r\",\"type\":\"message\",\"role\":\"assistant\","         \
    "\"model\":\"c\",\"content\":[{\"type\":\"text\",\"text\":\"No.\"}],"   \
    "\"stop_reason\":\"refusal\",\"stop_sequence\":null,\"usage\":{"        \
    "\"input_tokens\":5,\"output_tokens\":1}}"


static llm_tx_conf_t  conf;


static void
set_conf(llm_api_e from, llm_api_e to)
{
    memset(&conf, 0, sizeof(llm_tx_conf_t));

    conf.from = from;
    conf.to = to;
    conf.model = "the-model-called";
    conf.model_len = sizeof("the-model-called") - 1;
    conf.id = REQ_ID;
    conf.id_len = sizeof(REQ_ID) - 1;
    conf.created = CREATED;
    conf.max_tokens = 256;
}


/* the translation parsed, or NULL; *rc its code */

static cJSON *
tx(llm_api_e from, llm_api_e to, const char *body, int *rc)
{
    char    *out;
    size_t   len;
    cJSON   *j;

    set_conf(from, to);

    *rc = llm_tx_body(&conf, body, strlen(body), &out, &len);

    if (*rc != 0) {
        return NULL;
    }

    j = cJSON_ParseWithLength(out, len);

    if (j == NULL || strlen(out) != len) {
        printf("# not JSON: %s\n", out);
    }

    cJSON_free(out);

    return j;
}


static cJSON *
txe(llm_api_e from, llm_api_e to, unsigned status, const char *body)
{
    int      rc;
    char    *out;
    size_t   len;
    cJSON   *j;

    set_conf(from, to);

    rc = llm_tx_body_error(&conf, status, body, body ? strlen(body) : 0,
                           &out, &len);

    if (rc != 0) {
        printf("# llm_tx_body_error: %d\n", rc);
        return NULL;
    }

    j = cJSON_ParseWithLength(out, len);

    if (j == NULL) {
        printf("# not JSON: %s\n", out);
    }

    cJSON_free(out);

    return j;
}


/* a member by its path: "choices.0.message.content" */

static cJSON *
at(cJSON *j, const char *path)
{
    char         name[64];
    size_t       n;
    const char  *p, *dot;

    for (p = path; j != NULL && *p; p = *dot ? dot + 1 : dot) {
        dot = strchr(p, '.');
        dot = dot ? dot : p + strlen(p);
        n = (size_t) (dot - p);

        memcpy(name, p, n);
        name[n] = '\0';

        if (cJSON_IsArray(j)) {
            j = cJSON_GetArrayItem(j, atoi(name));

        } else {
            j = cJSON_GetObjectItemCaseSensitive(j, name);
        }
    }

    return j;
}


static const char *
str(cJSON *j, const char *path)
{
    cJSON  *v;

    v = at(j, path);

    return cJSON_IsString(v) ? v->valuestring : "(none)";
}


static long long
num(cJSON *j, const char *path)
{
    cJSON  *v;

    v = at(j, path);

    return cJSON_IsNumber(v) ? (long long) v->valuedouble : -1;
}


static int
is_null(cJSON *j, const char *path)
{
    return cJSON_IsNull(at(j, path));
}


static int
size(cJSON *j, const char *path)
{
    cJSON  *v;

    v = at(j, path);

    return cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
}


/* a member's JSON text, for objects */

static int
json_is(cJSON *j, const char *path, const char *want)
{
    int     ok;
    char   *s;

    s = cJSON_PrintUnformatted(at(j, path));
    ok = s != NULL && strcmp(s, want) == 0;

    if (!ok) {
        printf("#   got: %s\n#   expected: %s\n", s ? s : "(none)", want);
    }

    cJSON_free(s);

    return ok;
}


static void
test_chat_to_messages(void)
{
    int     rc;
    cJSON  *j;

    j = tx(CHAT, MSGS, CHAT_TEXT, &rc);
    tap_is(rc, 0, "chat > messages: text");
    tap_is_str(str(j, "id"), "msg_mock-7", "the id, the backend's");
    tap_is_str(str(j, "type"), "message", "type message");
    tap_is_str(str(j, "role"), "assistant", "role");
    tap_is_str(str(j, "model"), "mock-gpt-4o", "the backend's model");
    tap_is(size(j, "content"), 1, "one block");
    tap_is_str(str(j, "content.0.type"), "text", "a text block");
    tap_is_str(str(j, "content.0.text"), "tok1 tok2 ", "its text");
    tap_is_str(str(j, "stop_reason"), "end_turn", "stop: end_turn");
    tap_ok(is_null(j, "stop_sequence"), "stop_sequence null");
    tap_ok(json_is(j, "usage", "{\"input_tokens\":12,\"output_tokens\":2,"
                   "\"cache_read_input_tokens\":0,"
                   "\"cache_creation_input_tokens\":0}"), "usage");
    cJSON_Delete(j);

    j = tx(CHAT, MSGS, CHAT_TOOLS, &rc);
    tap_is(rc, 0, "chat > messages: two tool calls");
    tap_is(size(j, "content"), 2, "no text block for null content");
    tap_is_str(str(j, "content.0.type"), "tool_use", "tool_use");
    tap_is_str(str(j, "content.0.id"), "call_abc123", "its id unchanged");
    tap_is_str(str(j, "content.0.name"), "get_weather", "its name");
    tap_ok(json_is(j, "content.0.input", "{\"city\":\"Paris\"}"),
           "its input, the arguments parsed");
    tap_is_str(str(j, "content.1.id"), "call_def456", "the second's id");
    tap_ok(json_is(j, "content.1.input",
                   "{\"tz\":\"Europe/Paris\",\"n\":[1,2]}"), "its input");
    tap_is_str(str(j, "stop_reason"), "tool_use", "stop: tool_use");
    tap_ok(json_is(j, "usage", "{\"input_tokens\":464,\"output_tokens\":40,"
                   "\"cache_read_input_tokens\":1536,"
                   "\"cache_creation_input_tokens\":0}"),
           "usage: input less the cached");
    cJSON_Delete(j);

    j = tx(CHAT, MSGS, CHAT_LENGTH, &rc);
    tap_is_str(str(j, "stop_reason"), "max_tokens", "length: max_tokens");
    cJSON_Delete(j);

    j = tx(CHAT, MSGS, CHAT_UNICODE, &rc);
    tap_is_str(str(j, "content.0.text"), UNI_TEXT, "unicode kept");
    cJSON_Delete(j);

    j = tx(CHAT, MSGS, CHAT_BAD_ARGS, &rc);
    tap_is(rc, 0, "chat > messages: arguments not an object");
    tap_is(size(j, "content"), 4, "the text and three tool uses");
    tap_ok(json_is(j, "content.1.input", "{\"_raw\":\"{\\\"city\\\": "
                   "\\\"Par\"}"), "invalid JSON kept as _raw");
    tap_ok(json_is(j, "content.2.input", "{\"_raw\":\"[1,2]\"}"),
           "JSON not an object kept as _raw");
    tap_ok(json_is(j, "content.3.input", "{}"), "empty arguments: {}");
    tap_ok(strncmp(str(j, "content.3.id"), "toolu_", 6) == 0
           && strlen(str(j, "content.3.id")) == 22,
           "a missing tool id derived: %s", str(j, "content.3.id"));
    cJSON_Delete(j);

    j = tx(CHAT, MSGS, CHAT_REFUSAL, &rc);
    tap_is_str(str(j, "content.0.text"), "I can't help with that.",
               "a refusal is text");
    tap_is_str(str(j, "stop_reason"), "refusal", "with stop refusal");
    cJSON_Delete(j);
}


static void
test_messages_to_chat(void)
{
    int     rc;
    cJSON  *j;

    j = tx(MSGS, CHAT, MSG_TEXT, &rc);
    tap_is(rc, 0, "messages > chat: text");
    tap_is_str(str(j, "id"), "chatcmpl-mock_7", "the id, the backend's");
    tap_is_str(str(j, "object"), "chat.completion", "object");
    tap_is(num(j, "created"), CREATED, "created from the request");
    tap_is_str(str(j, "model"), "mock-claude", "model");
    tap_is(size(j, "choices"), 1, "one choice");
    tap_is(num(j, "choices.0.index"), 0, "index 0");
    tap_is_str(str(j, "choices.0.message.role"), "assistant", "role");
    tap_is_str(str(j, "choices.0.message.content"), "tok1 tok2 ", "text");
    tap_ok(at(j, "choices.0.message.tool_calls") == NULL,
           "no tool_calls without tools");
    tap_ok(is_null(j, "choices.0.message.refusal"), "refusal null");
    tap_ok(is_null(j, "choices.0.logprobs"), "logprobs null");
    tap_is_str(str(j, "choices.0.finish_reason"), "stop", "finish stop");
    tap_ok(json_is(j, "usage", "{\"prompt_tokens\":12,"
                   "\"completion_tokens\":2,\"total_tokens\":14,"
                   "\"prompt_tokens_details\":{\"cached_tokens\":0},"
                   "\"completion_tokens_details\":{\"reasoning_tokens\":0}}"),
           "usage");
    cJSON_Delete(j);

    j = tx(MSGS, CHAT, MSG_TOOLS, &rc);
    tap_is(rc, 0, "messages > chat: thinking, texts, two tool uses");
    tap_is_str(str(j, "choices.0.message.content"), "I'll check both.",
               "the texts joined, the thinking left out");
    tap_is(size(j, "choices.0.message.tool_calls"), 2, "two tool calls");
    tap_is_str(str(j, "choices.0.message.tool_calls.0.id"),
               "toolu_01A09q90qw90lq917835lq9", "the id unchanged");
    tap_is_str(str(j, "choices.0.message.tool_calls.0.type"), "function",
               "type function");
    tap_is_str(str(j, "choices.0.message.tool_calls.0.function.name"),
               "get_weather", "the name");
    tap_is_str(str(j, "choices.0.message.tool_calls.0.function.arguments"),
               "{\"city\":\"Paris\"}", "the input as arguments");
    tap_is_str(str(j, "choices.0.message.tool_calls.1.function.arguments"),
               "{\"tz\":\"Europe/Paris\",\"n\":[1,2]}", "the second's");
    tap_is_str(str(j, "choices.0.finish_reason"), "tool_calls",
               "finish tool_calls");
    tap_is(num(j, "usage.prompt_tokens"), 1300,
           "prompt: input, cache reads and writes");
    tap_is(num(j, "usage.prompt_tokens_details.cached_tokens"), 1000,
           "cached: the reads");
    tap_is(num(j, "usage.completion_tokens"), 50, "completion");
    tap_is(num(j, "usage.total_tokens"), 1350, "total");
    cJSON_Delete(j);

    j = tx(MSGS, CHAT, MSG_LENGTH, &rc);
    tap_is_str(str(j, "choices.0.finish_reason"), "length",
               "max_tokens: length");
    cJSON_Delete(j);

    j = tx(MSGS, CHAT, MSG_UNICODE, &rc);
    tap_is_str(str(j, "choices.0.message.content"), UNI_TEXT,
               "unicode kept");
    cJSON_Delete(j);

    j = tx(MSGS, CHAT, MSG_REFUSAL, &rc);
    tap_is_str(str(j, "choices.0.finish_reason"), "content_filter",
               "refusal: content_filter");
    cJSON_Delete(j);

    j = tx(MSGS, CHAT, "{\"id\":\"msg_e\",\"type\":\"message\","
           "\"content\":[],\"stop_reason\":\"end_turn\"}", &rc);
    tap_ok(is_null(j, "choices.0.message.content"), "no text: null");
    tap_is_str(str(j, "model"), "the-model-called",
               "no model: the one called");
    tap_is(num(j, "usage.total_tokens"), 0, "no usage: zeros");
    cJSON_Delete(j);
}


static void
test_stop_reasons(void)
{
    int          rc;
    char         body[512];
    size_t       i;
    cJSON       *j;

    static const char  *anthropic[][2] = {
        { "end_turn", "stop" }, { "max_tokens", "length" },
        { "stop_sequence", "stop" }, { "tool_use", "tool_calls" },
        { "refusal", "content_filter" }, { "pause_turn", "stop" },
        { "something_new", "stop" }
    };

    static const char  *openai[][2] = {
        { "stop", "end_turn" }, { "length", "max_tokens" },
        { "tool_calls", "tool_use" }, { "function_call", "tool_use" },
        { "content_filter", "refusal" }, { "other", "end_turn" }
    };

    for (i = 0; i < sizeof(anthropic) / sizeof(anthropic[0]); i++) {
        snprintf(body, sizeof(body), "{\"type\":\"message\",\"content\":"
                 "[],\"stop_reason\":\"%s\"}", anthropic[i][0]);
        j = tx(MSGS, CHAT, body, &rc);
        tap_is_str(str(j, "choices.0.finish_reason"), anthropic[i][1],
                   "%s: %s", anthropic[i][0], anthropic[i][1]);
        cJSON_Delete(j);
    }

    for (i = 0; i < sizeof(openai) / sizeof(openai[0]); i++) {
        snprintf(body, sizeof(body), "{\"choices\":[{\"message\":{},"
                 "\"finish_reason\":\"%s\"}]}", openai[i][0]);
        j = tx(CHAT, MSGS, body, &rc);
        tap_is_str(str(j, "stop_reason"), openai[i][1], "%s: %s",
                   openai[i][0], openai[i][1]);
        cJSON_Delete(j);
    }
}


static void
test_to_responses(void)
{
    int     rc;
    cJSON  *j;

    j = tx(CHAT, RESP, CHAT_TEXT, &rc);
    tap_is(rc, 0, "chat > responses: text");
    tap_is_str(str(j, "id"), "resp_mock-7", "the id");
    tap_is_str(str(j, "object"), "response", "object");
    tap_is(num(j, "created_at"), CREATED, "created_at");
    tap_is_str(str(j, "status"), "completed", "completed");
    tap_is_str(str(j, "model"), "mock-gpt-4o", "model");
    tap_is(size(j, "output"), 1, "one item");
    tap_is_str(str(j, "output.0.type"), "message", "a message");
    tap_ok(strncmp(str(j, "output.0.id"), "msg_", 4) == 0, "msg_ id");
    tap_is_str(str(j, "output.0.status"), "completed", "item completed");
    tap_is_str(str(j, "output.0.role"), "assistant", "role");
    tap_is_str(str(j, "output.0.content.0.type"), "output_text",
               "output_text");
    tap_is_str(str(j, "output.0.content.0.text"), "tok1 tok2 ", "its text");
    tap_is(size(j, "output.0.content.0.annotations"), 0, "annotations");
    tap_ok(json_is(j, "usage", "{\"input_tokens\":12,"
                   "\"input_tokens_details\":{\"cached_tokens\":0},"
                   "\"output_tokens\":2,"
                   "\"output_tokens_details\":{\"reasoning_tokens\":0},"
                   "\"total_tokens\":14}"), "usage");
    tap_ok(is_null(j, "error"), "error null");
    tap_ok(is_null(j, "incomplete_details"), "incomplete_details null");
    tap_is(num(j, "max_output_tokens"), 256, "max_output_tokens");
    tap_ok(cJSON_IsTrue(at(j, "parallel_tool_calls")), "parallel_tool_calls");
    tap_is_str(str(j, "tool_choice"), "auto", "tool_choice");
    tap_is(size(j, "tools"), 0, "tools");
    tap_is_str(str(j, "text.format.type"), "text", "text.format");
    tap_is_str(str(j, "truncation"), "disabled", "truncation");
    tap_ok(cJSON_IsObject(at(j, "metadata")), "metadata");
    tap_ok(cJSON_IsFalse(at(j, "store")), "store false: nothing stored");
    cJSON_Delete(j);

    j = tx(CHAT, RESP, CHAT_TOOLS, &rc);
    tap_is(rc, 0, "chat > responses: two tool calls");
    tap_is(size(j, "output"), 2, "two items, no empty message");
    tap_is_str(str(j, "output.0.type"), "function_call", "function_call");
    tap_ok(strncmp(str(j, "output.0.id"), "fc_", 3) == 0, "fc_ id");
    tap_ok(strcmp(str(j, "output.0.id"), str(j, "output.1.id")) != 0,
           "ids differ");
    tap_is_str(str(j, "output.0.call_id"), "call_abc123", "call_id");
    tap_is_str(str(j, "output.0.name"), "get_weather", "name");
    tap_is_str(str(j, "output.0.arguments"), "{\"city\":\"Paris\"}",
               "arguments unchanged");
    tap_is_str(str(j, "output.0.status"), "completed", "status");
    tap_is_str(str(j, "output.1.call_id"), "call_def456", "second call_id");
    tap_is(num(j, "usage.input_tokens"), 2000, "input, cached included");
    tap_is(num(j, "usage.input_tokens_details.cached_tokens"), 1536,
           "cached");
    tap_is(num(j, "usage.output_tokens_details.reasoning_tokens"), 16,
           "reasoning");
    tap_is(num(j, "usage.total_tokens"), 2040, "total");
    cJSON_Delete(j);

    j = tx(CHAT, RESP, CHAT_LENGTH, &rc);
    tap_is_str(str(j, "status"), "incomplete", "length: incomplete");
    tap_is_str(str(j, "incomplete_details.reason"), "max_output_tokens",
               "reason max_output_tokens");
    tap_is_str(str(j, "output.0.status"), "incomplete", "item incomplete");
    cJSON_Delete(j);

    j = tx(CHAT, RESP, CHAT_REFUSAL, &rc);
    tap_is_str(str(j, "output.0.content.0.type"), "refusal",
               "a refusal part");
    tap_is_str(str(j, "output.0.content.0.refusal"),
               "I can't help with that.", "its words");
    cJSON_Delete(j);

    j = tx(MSGS, RESP, MSG_TOOLS, &rc);
    tap_is(rc, 0, "messages > responses: texts and two tool uses");
    tap_is(size(j, "output"), 3, "a message and two calls");
    tap_is_str(str(j, "id"), "resp_01Aq9w938a90dw8q", "the id");
    tap_is(size(j, "output.0.content"), 2, "two text parts");
    tap_is_str(str(j, "output.0.content.1.text"), "both.", "the second");
    tap_is_str(str(j, "output.1.call_id"), "toolu_01A09q90qw90lq917835lq9",
               "call_id unchanged");
    tap_is_str(str(j, "output.2.arguments"),
               "{\"tz\":\"Europe/Paris\",\"n\":[1,2]}", "input printed");
    tap_is(num(j, "usage.input_tokens"), 1300, "input: all of the prompt");
    tap_is(num(j, "usage.input_tokens_details.cached_tokens"), 1000,
           "cached: the reads");
    tap_is(num(j, "usage.output_tokens"), 50, "output");
    tap_is(num(j, "usage.total_tokens"), 1350, "total");
    cJSON_Delete(j);

    j = tx(MSGS, RESP, MSG_LENGTH, &rc);
    tap_is_str(str(j, "status"), "incomplete", "max_tokens: incomplete");
    tap_is_str(str(j, "incomplete_details.reason"), "max_output_tokens",
               "max_output_tokens");
    cJSON_Delete(j);

    j = tx(MSGS, RESP, MSG_REFUSAL, &rc);
    tap_is_str(str(j, "incomplete_details.reason"), "content_filter",
               "refusal: content_filter");
    cJSON_Delete(j);

    j = tx(MSGS, RESP, MSG_UNICODE, &rc);
    tap_is_str(str(j, "output.0.content.0.text"), UNI_TEXT, "unicode kept");
    cJSON_Delete(j);

    j = tx(MSGS, RESP, "{\"type\":\"message\",\"content\":[]}", &rc);
    tap_is(size(j, "output"), 1, "nothing: one empty message");
    tap_is_str(str(j, "output.0.content.0.text"), "", "its text empty");
    cJSON_Delete(j);
}


/* what is not an answer of the backend's dialect */

static void
test_garbage(void)
{
    int          rc;
    size_t       i;
    cJSON       *j;

    static const struct {
        llm_api_e    from;
        const char  *body;
        const char  *why;
    } bad[] = {
        { CHAT, "", "empty" },
        { CHAT, "not json", "not JSON" },
        { CHAT, "{\"choices\":[{\"message\":{}}]", "cut" },
        { CHAT, "{}", "no choices" },
        { CHAT, "[]", "an array" },
        { CHAT, "null", "null" },
        { CHAT, "{\"choices\":[]}", "no choice" },
        { CHAT, "{\"choices\":[{\"message\":\"hi\"}]}", "message a string" },
        { CHAT, "{\"choices\":{\"message\":{}}}", "choices an object" },
        { CHAT, "[{\"message\":{}}]", "an array of choices" },
        { CHAT, MSG_TEXT, "a Messages answer" },
        { CHAT, "{\"error\":{\"message\":\"x\"}}", "an error" },
        { CHAT, CHAT_TEXT "x", "text after it" },
        { CHAT, CHAT_TEXT CHAT_TEXT, "two of them" },
        { MSGS, "{\"type\":\"error\",\"error\":{\"type\":\"api_error\"}}",
          "an Anthropic error" },
        { MSGS, CHAT_TEXT, "a Chat answer" },
        { MSGS, "{\"type\":\"message\",\"content\":\"hi\"}",
          "content a string" },
        { MSGS, "{\"type\":7,\"content\":[]}", "type a number" },
        { LLM_API_RESPONSES, CHAT_TEXT, "a backend of Responses" },
        { LLM_API_EMBEDDINGS, CHAT_TEXT, "a backend of embeddings" },
    };

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        j = tx(bad[i].from, MSGS, bad[i].body, &rc);
        tap_is(rc, -1, "-1: %s", bad[i].why);
        cJSON_Delete(j);
    }

    j = tx(CHAT, LLM_API_EMBEDDINGS, CHAT_TEXT, &rc);
    tap_is(rc, -1, "-1: a client of embeddings");
    cJSON_Delete(j);

    j = tx(CHAT, MSGS, " \r\n" CHAT_TEXT "\n\n", &rc);
    tap_is(rc, 0, "blanks around it are fine");
    cJSON_Delete(j);

    /* wrong types inside: read as absent */
    j = tx(CHAT, MSGS, "{\"id\":5,\"model\":[],\"choices\":[{\"message\":"
           "{\"content\":7,\"tool_calls\":{\"a\":1},\"refusal\":1},"
           "\"finish_reason\":3}],\"usage\":{\"prompt_tokens\":\"12\"}}", &rc);
    tap_is(rc, 0, "members of other types: absent");
    tap_is(size(j, "content"), 0, "no content");
    tap_is_str(str(j, "model"), "the-model-called", "the model called");
    tap_is(num(j, "usage.input_tokens"), 0, "a figure as a string: 0");
    cJSON_Delete(j);

    j = tx(MSGS, CHAT, "{\"type\":\"message\",\"content\":[7,[\"text\"],"
           "{\"type\":\"text\"},{\"type\":\"text\",\"text\":[\"a\"]},"
           "{\"type\":\"tool_use\"},{\"text\":\"x\"}]}", &rc);
    tap_is(rc, 0, "blocks of other shapes: skipped");
    tap_ok(is_null(j, "choices.0.message.content"), "no text");
    tap_is(size(j, "choices.0.message.tool_calls"), 1,
           "a bare tool_use kept");
    tap_is_str(str(j, "choices.0.message.tool_calls.0.function.arguments"),
               "{}", "its arguments {}");
    tap_ok(strncmp(str(j, "choices.0.message.tool_calls.0.id"), "call_", 5)
           == 0, "its id derived");
    cJSON_Delete(j);
}


/* every bound, and attempts around it */

static void
test_bounds(void)
{
    int     rc;
    char    body[1024], id1[LLM_TX_ID_MAX + 1], *long_id;
    cJSON  *j;
    size_t  i;

    static const struct {
        const char  *figure;
        long long    want;
    } figures[] = {
        { "12", 12 },
        { "0", 0 },
        { "-5", 0 },
        { "1.5", 1 },
        { "1e300", LLM_TX_BODY_TOKENS_MAX },
        { "-0", 0 },
        { "100000000", LLM_TX_BODY_TOKENS_MAX },
        { "100000001", LLM_TX_BODY_TOKENS_MAX },
        { "1125899906842624", LLM_TX_BODY_TOKENS_MAX },
        { "9007199254740992", LLM_TX_BODY_TOKENS_MAX },
        { "\"7\"", 0 },
        { "null", 0 },
        { "true", 0 },
    };

    for (i = 0; i < sizeof(figures) / sizeof(figures[0]); i++) {
        snprintf(body, sizeof(body), "{\"type\":\"message\",\"content\":[],"
                 "\"usage\":{\"input_tokens\":%s,\"output_tokens\":%s}}",
                 figures[i].figure, figures[i].figure);
        j = tx(MSGS, CHAT, body, &rc);
        tap_is(num(j, "usage.completion_tokens"), figures[i].want,
               "a figure of %s: %lld", figures[i].figure, figures[i].want);
        cJSON_Delete(j);
    }

    /* the largest of each, clamped as the meter clamps them and their
       sum: written whole, not as a double */
    j = tx(MSGS, CHAT, LARGEST, &rc);
    tap_is(rc, 0, "the largest figures");
    tap_is(num(j, "usage.completion_tokens"), LLM_TX_BODY_TOKENS_MAX,
           "a figure above the meter's most is that most");
    set_conf(MSGS, CHAT);
    {
        char    *out, want[2][64];
        size_t   len;

        /* the prompt, its three parts summed, clamped as the meter's */
        snprintf(want[0], sizeof(want[0]), "\"prompt_tokens\":%lld,",
                 (long long) LLM_TX_BODY_TOKENS_MAX);
        snprintf(want[1], sizeof(want[1]), "\"total_tokens\":%lld,",
                 2 * (long long) LLM_TX_BODY_TOKENS_MAX);

        llm_tx_body(&conf, LARGEST, sizeof(LARGEST) - 1, &out, &len);
        tap_ok(out && strstr(out, want[0]) && strstr(out, want[1]),
               "sums written as integers");
        cJSON_free(out);
    }
    cJSON_Delete(j);

    j = tx(CHAT, MSGS, "{\"choices\":[{\"message\":{}}],\"usage\":{"
           "\"prompt_tokens\":10,\"prompt_tokens_details\":{"
           "\"cached_tokens\":50}}}", &rc);
    tap_is(num(j, "usage.input_tokens"), 0, "cached above prompt: input 0");
    tap_is(num(j, "usage.cache_read_input_tokens"), 10,
           "and cached the prompt");
    cJSON_Delete(j);

    j = tx(CHAT, RESP, "{\"choices\":[{\"message\":{}}],\"usage\":{"
           "\"completion_tokens\":3,\"completion_tokens_details\":{"
           "\"reasoning_tokens\":9}}}", &rc);
    tap_is(num(j, "usage.output_tokens_details.reasoning_tokens"), 3,
           "reasoning above output: the output");
    cJSON_Delete(j);

    /* ids: the backend's when it fits and is plain, else derived */
    j = tx(CHAT, MSGS, "{\"choices\":[{\"message\":{}}]}", &rc);
    tap_ok(strlen(str(j, "id")) == 20
           && strspn(str(j, "id") + 4, "0123456789abcdef") == 16,
           "no id: msg_ and 16 hex digits: %s", str(j, "id"));
    snprintf(id1, sizeof(id1), "%s", str(j, "id"));
    cJSON_Delete(j);

    j = tx(CHAT, MSGS, "{\"choices\":[{\"message\":{}}]}", &rc);
    tap_is_str(str(j, "id"), id1, "the same request, the same id");
    cJSON_Delete(j);

    set_conf(CHAT, MSGS);
    conf.id = "another";
    conf.id_len = 7;
    {
        char    *out;
        size_t   len;

        llm_tx_body(&conf, "{\"choices\":[{\"message\":{}}]}", 29, &out,
                    &len);
        tap_ok(out && strstr(out, id1) == NULL, "another request, another");
        cJSON_free(out);
    }

    j = tx(CHAT, MSGS, "{\"id\":\"chatcmpl-a b\",\"choices\":[{\"message\""
           ":{}}]}", &rc);
    tap_is_str(str(j, "id"), id1, "an id with a blank: derived");
    cJSON_Delete(j);

    j = tx(CHAT, MSGS, "{\"id\":\"chatcmpl-\",\"choices\":[{\"message\""
           ":{}}]}", &rc);
    tap_is_str(str(j, "id"), "msg_chatcmpl-", "a bare prefix is the id");
    cJSON_Delete(j);

    long_id = malloc(LLM_TX_ID_MAX + 64);
    memset(long_id, 'x', LLM_TX_ID_MAX + 63);

    /* msg_ and LLM_TX_ID_MAX - 4 of them fit, one more does not */
    for (i = 0; i < 2; i++) {
        snprintf(body, sizeof(body), "{\"id\":\"chatcmpl-%.*s\","
                 "\"choices\":[{\"message\":{}}]}",
                 (int) (LLM_TX_ID_MAX - 4 + i), long_id);
        j = tx(CHAT, MSGS, body, &rc);
        tap_is(strlen(str(j, "id")), i == 0 ? LLM_TX_ID_MAX : 20,
               "an id of %d after the prefix: %s", (int) (60 + i),
               i == 0 ? "kept" : "derived");
        cJSON_Delete(j);
    }

    free(long_id);
}


static void
test_errors_to_anthropic(void)
{
    size_t   i;
    cJSON   *j;
    char     body[512];

    static const struct {
        unsigned     status;
        const char  *type;
    } types[] = {
        { 400, "invalid_request_error" }, { 401, "authentication_error" },
        { 402, "billing_error" }, { 403, "permission_error" },
        { 404, "not_found_error" }, { 413, "request_too_large" },
        { 422, "invalid_request_error" }, { 429, "rate_limit_error" },
        { 500, "api_error" }, { 502, "api_error" },
        { 503, "overloaded_error" }, { 504, "timeout_error" },
        { 529, "overloaded_error" }, { 599, "api_error" },
    };

    for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        snprintf(body, sizeof(body), "{\"error\":{\"message\":\"Status %u\","
                 "\"type\":\"x\",\"param\":null,\"code\":null}}",
                 types[i].status);
        j = txe(CHAT, MSGS, types[i].status, body);
        tap_is_str(str(j, "error.type"), types[i].type, "openai %u > %s",
                   types[i].status, types[i].type);
        cJSON_Delete(j);
    }

    j = txe(CHAT, MSGS, 429, "{\n    \"error\": {\n        \"message\": "
            "\"Rate limit reached for gpt-4o in organization org-K7pQ2x on "
            "tokens per min (TPM): Limit 30000, Used 28500, Requested 2000."
            "\",\n        \"type\": \"tokens\",\n        \"param\": null,\n"
            "        \"code\": \"rate_limit_exceeded\"\n    }\n}\n");
    tap_is_str(str(j, "type"), "error", "type error");
    tap_is_str(str(j, "error.type"), "rate_limit_error", "rate_limit_error");
    tap_is_str(str(j, "error.message"), "Rate limit reached for gpt-4o in "
               "organization org-K7pQ2x on tokens per min (TPM): Limit "
               "30000, Used 28500, Requested 2000.", "the message kept");
    tap_is_str(str(j, "error.details.error_code"), "rate_limit_exceeded",
               "the code in details");
    tap_is_str(str(j, "error.details.limit"), "tokens", "the limit");
    tap_is_str(str(j, "request_id"), REQ_ID, "the gateway's request id");
    cJSON_Delete(j);

    j = txe(CHAT, MSGS, 400, "{\"error\":{\"message\":\"Billing hard limit "
            "has been reached\",\"type\":\"invalid_request_error\","
            "\"param\":null,\"code\":\"billing_hard_limit_reached\"}}");
    tap_is_str(str(j, "error.type"), "billing_error",
               "a spent account's 400: billing_error");
    cJSON_Delete(j);

    j = txe(CHAT, MSGS, 429, "{\"error\":{\"message\":\"You exceeded your "
            "current quota\",\"type\":\"insufficient_quota\",\"param\":null,"
            "\"code\":\"insufficient_quota\"}}");
    tap_is_str(str(j, "error.type"), "rate_limit_error",
               "insufficient_quota's 429: rate_limit_error");
    tap_is_str(str(j, "error.details.error_code"), "insufficient_quota",
               "with its code");
    cJSON_Delete(j);

    j = txe(CHAT, MSGS, 400, "{\"error\":{\"message\":\"Invalid 'tools[0]"
            ".name'\",\"type\":\"invalid_request_error\",\"param\":"
            "\"tools[0].name\",\"code\":\"invalid_value\"}}");
    tap_is_str(str(j, "error.details.param"), "tools[0].name", "param");
    cJSON_Delete(j);

    j = txe(CHAT, MSGS, 503, "{\"error\":{\"message\":\"The engine is "
            "currently overloaded\",\"type\":\"server_error\",\"param\":null,"
            "\"code\":null}}");
    tap_ok(at(j, "error.details") == NULL, "nothing to detail: none");
    cJSON_Delete(j);

    j = txe(CHAT, MSGS, 500, "{\"type\":\"error\",\"error\":{\"type\":"
            "\"overloaded_error\",\"message\":\"Overloaded\"}}");
    tap_is_str(str(j, "error.type"), "overloaded_error",
               "an Anthropic body's own type kept");
    cJSON_Delete(j);

    j = txe(CHAT, MSGS, 500, "{\"type\":\"error\",\"error\":{\"type\":"
            "\"weird\",\"message\":\"x\"}}");
    tap_is_str(str(j, "error.type"), "api_error", "an unknown one: status");
    cJSON_Delete(j);

    set_conf(CHAT, MSGS);
    conf.id_len = 0;
    {
        int      rc;
        char    *out;
        size_t   len;

        rc = llm_tx_body_error(&conf, 500, "x", 1, &out, &len);
        j = cJSON_Parse(out);
        tap_ok(rc == 0 && is_null(j, "request_id"),
               "no request id: null");
        cJSON_Delete(j);
        cJSON_free(out);
    }
}


static void
test_errors_to_openai(void)
{
    size_t       i, k;
    cJSON       *j;
    char         body[512];
    llm_api_e    to;

    static const struct {
        unsigned     status;
        const char  *type;
        const char  *atype;
        const char  *code;      /* NULL: null */
    } types[] = {
        { 400, "invalid_request_error", "invalid_request_error", NULL },
        { 401, "invalid_request_error", "authentication_error",
          "invalid_api_key" },
        { 402, "invalid_request_error", "billing_error",
          "insufficient_quota" },
        { 403, "invalid_request_error", "permission_error", NULL },
        { 404, "invalid_request_error", "not_found_error", NULL },
        { 413, "invalid_request_error", "request_too_large", NULL },
        { 429, "invalid_request_error", "rate_limit_error",
          "rate_limit_exceeded" },
        { 500, "server_error", "api_error", NULL },
        { 503, "server_error", "overloaded_error", NULL },
        { 504, "server_error", "timeout_error", NULL },
        { 529, "server_error", "overloaded_error", NULL },
    };

    for (k = 0; k < 2; k++) {
        to = k ? RESP : CHAT;

        for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
            snprintf(body, sizeof(body), "{\"type\":\"error\",\"error\":{"
                     "\"type\":\"%s\",\"message\":\"Status %u\"},"
                     "\"request_id\":\"req_011CSHoEeqs5C35K2UUqR7Fy\"}",
                     types[i].atype, types[i].status);
            j = txe(MSGS, to, types[i].status, body);
            tap_is_str(str(j, "error.type"), types[i].type, "%s %u: %s",
                       k ? "responses" : "chat", types[i].status,
                       types[i].type);

            if (types[i].code) {
                tap_is_str(str(j, "error.code"), types[i].code, "code %s",
                           types[i].code);

            } else {
                tap_ok(is_null(j, "error.code"), "code null");
            }

            tap_ok(is_null(j, "error.param"), "param null");
            tap_ok(at(j, "request_id") == NULL && at(j, "type") == NULL,
                   "OpenAI's shape alone");
            cJSON_Delete(j);
        }
    }

    j = txe(MSGS, CHAT, 429, "{\"type\":\"error\",\"error\":{\"type\":"
            "\"rate_limit_error\",\"message\":\"This request would exceed "
            "your organization's daily token quota.\"}}");
    tap_is_str(str(j, "error.type"), "insufficient_quota",
               "a quota's 429: insufficient_quota");
    tap_is_str(str(j, "error.code"), "insufficient_quota", "its code too");
    tap_is_str(str(j, "error.message"), "This request would exceed your "
               "organization's daily token quota.", "the message");
    cJSON_Delete(j);

    j = txe(MSGS, CHAT, 400, "{\"type\":\"error\",\"error\":{\"type\":"
            "\"invalid_request_error\",\"message\":\"Your credit balance is "
            "too low to access the Anthropic API.\"}}");
    tap_is_str(str(j, "error.type"), "invalid_request_error",
               "credit balance's 400: invalid_request_error");
    tap_is_str(str(j, "error.code"), "insufficient_quota",
               "code insufficient_quota");
    cJSON_Delete(j);

    j = txe(CHAT, RESP, 400, "{\"error\":{\"message\":\"Invalid 'input'\","
            "\"type\":\"invalid_request_error\",\"param\":\"input\","
            "\"code\":\"invalid_value\"}}");
    tap_is_str(str(j, "error.type"), "invalid_request_error",
               "openai > responses: the type kept");
    tap_is_str(str(j, "error.param"), "input", "the param kept");
    tap_is_str(str(j, "error.code"), "invalid_value", "the code kept");
    cJSON_Delete(j);

    j = txe(CHAT, RESP, 429, "{\"error\":{\"message\":\"Rate limit\","
            "\"type\":\"requests\",\"param\":null,\"code\":"
            "\"rate_limit_exceeded\"}}");
    tap_is_str(str(j, "error.type"), "requests", "requests kept");
    cJSON_Delete(j);

    j = txe(MSGS, CHAT, 500, "{\"error\":\"upstream connect error\"}");
    tap_is_str(str(j, "error.message"), "upstream connect error",
               "an error string: the message");
    cJSON_Delete(j);

    j = txe(MSGS, CHAT, 500, "{\"message\":\"Internal failure\"}");
    tap_is_str(str(j, "error.message"), "Internal failure",
               "a top message");
    cJSON_Delete(j);
}


static void
test_error_garbage(void)
{
    size_t       i;
    cJSON       *j;
    char        *big, *p;
    size_t       n;

    static const char  *bodies[] = {
        "", "<html><body>502 Bad Gateway</body></html>", "{", "[]", "null",
        "{\"error\":{}}", "{\"error\":{\"message\":7}}", "{\"error\":[1]}",
        "{\"error\":{\"message\":\"\"}}", "{\"error\":{\"message\":\"x\"}} z",
        "\"just a string\"", "{\"type\":\"error\",\"error\":null}",
    };

    for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        j = txe(MSGS, CHAT, 503, bodies[i]);
        tap_is_str(str(j, "error.message"), "The backend answered 503.",
                   "openai: unreadable body %d", (int) i);
        tap_is_str(str(j, "error.type"), "server_error", "server_error");
        cJSON_Delete(j);

        j = txe(CHAT, MSGS, 418, bodies[i]);
        tap_is_str(str(j, "error.message"), "The backend answered 418.",
                   "anthropic: unreadable body %d", (int) i);
        tap_is_str(str(j, "error.type"), "invalid_request_error",
                   "invalid_request_error");
        cJSON_Delete(j);
    }

    j = txe(MSGS, CHAT, 500, NULL);
    tap_is_str(str(j, "error.message"), "The backend answered 500.",
               "no body at all");
    cJSON_Delete(j);

    j = txe(CHAT, MSGS, 500, "{\"error\":{\"message\":\"a \\\"quote\\\", "
            "a \\\\, a tab\\t, \\u0001, \\u00e9\\ud83c\\udf89 </script>\"}}");
    tap_is_str(str(j, "error.message"), "a \"quote\", a \\, a tab\t, \x01, "
               "\xc3\xa9\xf0\x9f\x8e\x89 </script>",
               "escapes and unicode survive");
    cJSON_Delete(j);

    j = txe(CHAT, MSGS, 500, "{\"error\":{\"message\":\"bad \xff\xfe "
            "\xc3 \xed\xa0\x80 \xe0\x80\xaf \xf4\x90\x80\x80 ok \xc3\xa9\"}}");
    tap_is_str(str(j, "error.message"), "bad \xef\xbf\xbd\xef\xbf\xbd "
               "\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
               "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
               "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd ok "
               "\xc3\xa9", "invalid UTF-8 replaced, byte by byte");
    cJSON_Delete(j);

    /* the bound: a message of 3-byte characters, longer than it */
    n = LLM_TX_BODY_MESSAGE_MAX * 2;
    big = malloc(n + 64);
    p = big + sprintf(big, "{\"error\":{\"message\":\"a");

    for (i = 0; i < n / 3; i++) {
        memcpy(p, "\xe2\x82\xac", 3);
        p += 3;
    }

    strcpy(p, "\"}}");

    j = txe(CHAT, MSGS, 500, big);
    p = (char *) str(j, "error.message");
    tap_ok(strlen(p) <= LLM_TX_BODY_MESSAGE_MAX
           && strlen(p) > LLM_TX_BODY_MESSAGE_MAX - 3,
           "a long message cut to the bound: %d bytes", (int) strlen(p));
    tap_ok(strlen(p) % 3 == 1 && memcmp(p + strlen(p) - 3, "\xe2\x82\xac", 3)
           == 0, "at a whole character");
    cJSON_Delete(j);

    /* exactly the bound: all of it */
    p = big + sprintf(big, "{\"error\":{\"message\":\"");
    memset(p, 'm', LLM_TX_BODY_MESSAGE_MAX);
    strcpy(p + LLM_TX_BODY_MESSAGE_MAX, "\"}}");

    j = txe(CHAT, MSGS, 500, big);
    tap_is(strlen(str(j, "error.message")), LLM_TX_BODY_MESSAGE_MAX,
           "a message of the bound whole");
    cJSON_Delete(j);

    strcpy(p + LLM_TX_BODY_MESSAGE_MAX, "m\"}}");

    j = txe(CHAT, MSGS, 500, big);
    tap_is(strlen(str(j, "error.message")), LLM_TX_BODY_MESSAGE_MAX,
           "one byte more: cut");
    cJSON_Delete(j);

    free(big);
}


/* every allocation failing in turn: -2 and nothing leaked, never a crash */

static long  fail_at, allocs;


static void *
failing_malloc(size_t n)
{
    if (++allocs == fail_at) {
        return NULL;
    }

    return malloc(n);
}


static void
test_no_memory(void)
{
    int          rc, bad;
    char        *out;
    size_t       len, i, k;
    cJSON_Hooks  hooks;

    static const char  *bodies[] = {
        CHAT_TOOLS, CHAT_BAD_ARGS, CHAT_REFUSAL, MSG_TOOLS, MSG_REFUSAL
    };

    hooks.malloc_fn = failing_malloc;
    hooks.free_fn = free;
    cJSON_InitHooks(&hooks);

    for (k = 0; k < 2 * 3; k++) {
        for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
            bad = 0;

            for (fail_at = 1; fail_at < 2000; fail_at++) {
                set_conf(i < 3 ? CHAT : MSGS, k % 3 == 0 ? CHAT
                                              : k % 3 == 1 ? MSGS : RESP);
                allocs = 0;
                out = NULL;

                if (k < 3) {
                    rc = llm_tx_body(&conf, bodies[i], strlen(bodies[i]),
                                     &out, &len);

                } else {
                    rc = llm_tx_body_error(&conf, 429, bodies[i],
                                           strlen(bodies[i]), &out, &len);
                }

                if ((rc == 0) != (out != NULL) || rc < -2 || rc > 0) {
                    bad++;
                }

                cJSON_free(out);

                if (allocs < fail_at) {
                    break;
                }
            }

            tap_ok(bad == 0 && fail_at < 2000,
                   "%s %d to %d: each of %ld allocations failing",
                   k < 3 ? "answer" : "error", (int) i, (int) (k % 3),
                   fail_at - 1);
        }
    }

    cJSON_InitHooks(NULL);
}


int
main(void)
{
    test_chat_to_messages();
    test_messages_to_chat();
    test_stop_reasons();
    test_to_responses();
    test_garbage();
    test_bounds();
    test_errors_to_anthropic();
    test_errors_to_openai();
    test_error_garbage();
    test_no_memory();

    return tap_done();
}
