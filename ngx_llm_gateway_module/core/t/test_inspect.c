
/*
 * Request-body inspection: what is refused and why, the estimate, and the
 * body the upstream receives.
 */


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "llm_inspect.h"
#include "tap.h"


/* default 256, at most 4096 (refused above), depth 8, strings of 64 */
static const llm_inspect_conf_t  conf = { 256, 4096, 8, 64, 1000, 100000,
                                          0 };


static const struct {
    llm_api_e     api;
    const char   *body;
    const char   *param;       /* NULL: accepted; "" : refused, no param */
} refusals[] = {

    { LLM_API_OPENAI, "", "" },
    { LLM_API_OPENAI, "{\"model\":\"m\",", "" },
    { LLM_API_OPENAI, "[1,2]", "" },

    /* one JSON value, nothing after it but blanks */
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[]} x", "" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[]}"
                      "{\"model\":\"n\",\"messages\":[]}", "" },
    { LLM_API_OPENAI, " {\"model\":\"m\",\"messages\":[]} \r\n\t", NULL },

    { LLM_API_OPENAI, "{\"messages\":[]}", "model" },
    { LLM_API_OPENAI, "{\"model\":7,\"messages\":[]}", "model" },
    { LLM_API_OPENAI, "{\"model\":\"\",\"messages\":[]}", "model" },
    { LLM_API_OPENAI, "{\"model\":\"m\"}", "messages" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":{}}", "messages" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"max_tokens\":-1}",
      "max_tokens" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"max_tokens\":0}",
      "max_tokens" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"max_tokens\":1.5}",
      "max_tokens" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"max_tokens\":\"10\"}",
      "max_tokens" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                      "\"max_tokens\":9223372036854775808}", "max_tokens" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"max_tokens\":4097}",
      "max_tokens" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                      "\"max_completion_tokens\":0}",
      "max_completion_tokens" },

    /* one limit under two names: each side could read another */
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                      "\"max_completion_tokens\":1,\"max_tokens\":9000}",
      "max_tokens" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                      "\"max_completion_tokens\":1,\"max_tokens\":null}",
      NULL },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                      "\"max\\u005ftokens\":9000,"
                      "\"max_completion_tokens\":1}", "max_tokens" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                      "\"max_tokens\":8.0}", NULL },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                      "\"max_output_tokens\":5}", "max_output_tokens" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                      "\"system\":\"x\"}", "system" },

    /* Anthropic obeys max_tokens, and has no n */
    { LLM_API_ANTHROPIC, "{\"model\":\"m\",\"messages\":[],"
                         "\"max_completion_tokens\":1,\"max_tokens\":9000}",
      "max_completion_tokens" },
    { LLM_API_ANTHROPIC, "{\"model\":\"m\",\"messages\":[],"
                         "\"max_tokens\":10,\"n\":4}", "n" },
    { LLM_API_ANTHROPIC, "{\"model\":\"m\",\"messages\":[],"
                         "\"max_tokens\":10,\"n\":null}", NULL },
    { LLM_API_ANTHROPIC, "{\"model\":\"m\",\"messages\":[],"
                         "\"max_tokens\":10,\"max_output_tokens\":1}",
      "max_output_tokens" },

    /* n */
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"n\":0}", "n" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"n\":129}", "n" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"n\":2.5}", "n" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"n\":\"2\"}",
      "n" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"n\":128}",
      NULL },

    /* what is echoed must be safe to echo */
    { LLM_API_OPENAI, "{\"model\":\"m\\r\\nSet-Cookie: a=1\","
                      "\"messages\":[]}", "model" },
    { LLM_API_OPENAI, "{\"model\":\"m\\u001b[31m\",\"messages\":[]}",
      "model" },
    { LLM_API_OPENAI, "{\"model\":\"m\\u007f\",\"messages\":[]}",
      "model" },
    { LLM_API_OPENAI, "{\"model\":\"caf\\u00e9\",\"messages\":[]}",
      NULL },

    /* parts of types the API does not have: not read as meant */
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                      "\"content\":[{\"type\":\"video\"}]}]}",
      "messages" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                      "\"content\":[{\"type\":\"image\"}]}]}",
      "messages" },
    { LLM_API_ANTHROPIC, "{\"model\":\"m\",\"max_tokens\":1,"
                         "\"messages\":[{\"role\":\"user\",\"content\":"
                         "[{\"type\":\"image_url\"}]}]}", "messages" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[7]}", "messages" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"tools\":{}}",
      "tools" },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":[{\"type\":"
                         "\"telepathy\"}]}", "input" },
    { LLM_API_ANTHROPIC, "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[],"
                         "\"system\":[{\"type\":\"image\",\"source\":{}}]}",
      "system" },
    { LLM_API_ANTHROPIC, "{\"model\":\"m\",\"max_tokens\":2000,\"messages\":[],"
                         "\"thinking\":{\"type\":\"enabled\","
                         "\"budget_tokens\":2000}}", "thinking" },
    { LLM_API_ANTHROPIC, "{\"model\":\"m\",\"max_tokens\":2000,\"messages\":[],"
                         "\"thinking\":{\"type\":\"enabled\","
                         "\"budget_tokens\":1999}}", NULL },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":[{\"role\":\"user\","
                         "\"content\":[{\"type\":\"text\",\"text\":\"a\"}]}]}",
      "input" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"stream\":1}",
      "stream" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"stream\":true,"
                      "\"stream_options\":3}", "stream_options" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"max_tokens\":4096}",
      NULL },

    /* cJSON reads the first of a repeated member, most upstreams the last */
    { LLM_API_OPENAI, "{\"model\":\"cheap\",\"messages\":[],"
                      "\"model\":\"dear\"}", "model" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"max_tokens\":10,"
                      "\"max_tokens\":100000}", "max_tokens" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"stream\":true,"
                      "\"stream_options\":{\"include_usage\":true},"
                      "\"stream_options\":{}}", "stream_options" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"stream\":true,"
                      "\"stream_options\":{\"include_usage\":true,"
                      "\"include_usage\":false}}", "include_usage" },
    { LLM_API_ANTHROPIC, "{\"model\":\"m\",\"messages\":[],\"system\":\"a\","
                         "\"max_tokens\":1,\"system\":\"b\"}", "system" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],\"temperature\":1,"
                      "\"temperature\":2}", "temperature" },

    /* anywhere: a part read as text here and as an image there */
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                      "\"content\":[{\"type\":\"text\",\"text\":\"a\","
                      "\"type\":\"image_url\"}]}]}", "type" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                      "\"content\":\"a\",\"content\":\"b\"}]}", "content" },
    { LLM_API_ANTHROPIC, "{\"model\":\"m\",\"messages\":[],\"max_tokens\":1}",
      NULL },

    /* Responses: input, not messages; max_output_tokens */
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":\"hi\"}", NULL },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":[]}", NULL },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"messages\":[]}", "messages" },
    { LLM_API_RESPONSES, "{\"model\":\"m\"}", "input" },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"previous_response_id\":"
                         "\"resp_1\"}", NULL },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":\"a\","
                         "\"max_tokens\":5}", "max_tokens" },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":\"a\",\"n\":2}",
      "n" },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":\"a\","
                         "\"background\":true}", "background" },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":\"a\","
                         "\"background\":false}", NULL },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                      "\"service_tier\":\"priority\"}", "service_tier" },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":\"a\","
                         "\"service_tier\":\"scale\"}", "service_tier" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                      "\"service_tier\":\"flex\"}", NULL },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":7}", "input" },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":\"hi\","
                         "\"max_output_tokens\":0}", "max_output_tokens" },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":\"hi\","
                         "\"max_output_tokens\":4097}", "max_output_tokens" },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":\"a\","
                         "\"input\":\"b\"}", "input" },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":\"a\","
                         "\"max_output_tokens\":5,\"max_output_tokens\":900}",
      "max_output_tokens" },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":\"a\","
                         "\"instructions\":\"x\",\"instructions\":\"y\"}",
      "instructions" },

    /* embeddings: OpenAI's five members, and no other */
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"hi\"}", NULL },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"hi\","
                          "\"encoding_format\":\"base64\","
                          "\"dimensions\":256,\"user\":\"u-1\"}", NULL },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"hi\","
                          "\"encoding_format\":null,\"dimensions\":null,"
                          "\"user\":null}", NULL },
    { LLM_API_EMBEDDINGS, "{\"input\":\"hi\"}", "model" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"\",\"input\":\"hi\"}", "model" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\"}", "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":null}", "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"\"}", "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":[]}", "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":[\"a\",\"\"]}",
      "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":[\"a\",1]}",
      "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":[1,\"a\"]}",
      "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":[[1],[]]}",
      "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":[[1],\"a\"]}",
      "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":[[1,[2]]]}",
      "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":[{}]}", "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":{}}", "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":true}", "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":7}", "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":[1.5]}", "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":[-1]}", "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":[2147483648]}",
      "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":[2147483647,0]}",
      NULL },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":[[1.0,2e0]]}", NULL },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"a\","
                          "\"encoding_format\":\"int8\"}",
      "encoding_format" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"a\","
                          "\"encoding_format\":1}", "encoding_format" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"a\","
                          "\"dimensions\":0}", "dimensions" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"a\","
                          "\"dimensions\":1.5}", "dimensions" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"a\","
                          "\"dimensions\":\"8\"}", "dimensions" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"a\","
                          "\"user\":5}", "user" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"a\","
                          "\"messages\":[]}", "messages" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"a\","
                          "\"max_tokens\":5}", "max_tokens" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"a\","
                          "\"stream\":false}", "stream" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"a\","
                          "\"other\":null}", "other" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"a\","
                          "\"input\":\"b\"}", "input" },
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"a\","
                          "\"dimensions\":8,\"dimensions\":9}",
      "dimensions" },

    /* names that differ from a read one only in case */
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                      "\"MAX_TOKENS\":9}", "MAX_TOKENS" },
    { LLM_API_ANTHROPIC, "{\"model\":\"m\",\"max_tokens\":5,"
                         "\"messages\":[],\"Max_Tokens\":9}", "Max_Tokens" },
    { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":\"a\","
                         "\"Model\":\"n\"}", "Model" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                      "\"maxTokens\":9}", NULL },

    /* a client's name in the refusal: no quote, no backslash */
    { LLM_API_EMBEDDINGS, "{\"model\":\"m\",\"input\":\"a\","
                          "\"a\\\"b\\\\c\":1}", "a?b?c" },
    { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                      "\"q\\\"\":1,\"q\\\"\":2}", "q?" },
};


static void
test_refusals(void)
{
    int             rc;
    size_t          i;
    const char     *want;
    llm_request_t   req;

    for (i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        rc = llm_inspect(refusals[i].api, refusals[i].body,
                         strlen(refusals[i].body), &conf, &req);
        want = refusals[i].param;

        if (want == NULL) {
            tap_is(rc, 0, "accepted: %s", refusals[i].body);
            continue;
        }

        tap_is(rc, -1, "refused: %s", refusals[i].body);
        tap_is_str(req.param ? req.param : "", want, "  param names \"%s\"",
                   want);
        tap_ok(req.message != NULL, "  with a message");
    }
}


static void
test_estimate(void)
{
    const char     *b;
    llm_request_t   req;

    /* "hello" is 2, "abcdefgh" is 2, 3 a message, 3 in all */
    b = "{\"model\":\"gpt\",\"max_tokens\":100,\"messages\":["
        "{\"role\":\"user\",\"content\":\"hello\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\","
        "\"text\":\"abcdefgh\"},{\"type\":\"image_url\"}]}]}";

    tap_is(llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req), 0,
           "accepted");
    tap_is(req.prompt_tokens, 2 + 3 + 2 + 3 + 3 + 1000,
           "estimate: the image at its worst case");
    tap_is(req.max_tokens, 100, "max_tokens");
    tap_is(req.n, 1, "n is 1");
    tap_is(req.output_bound, 100, "output bound");
    tap_is(req.parts.messages, 2, "2 messages");
    tap_is(req.parts.images, 1, "1 image");
    tap_ok(req.unbounded == NULL, "bounded");
    tap_ok(req.prompt_bound >= (int64_t) strlen(b) + 1000,
           "prompt bound: the bytes and the image");
    tap_is_str(req.model, "gpt", "model");
    tap_ok(!llm_inspect_needs_rewrite(&req), "nothing to rewrite");

    b = "{\"model\":\"claude\",\"max_tokens\":10,\"system\":\"12345678\","
        "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
        "\"stream\":true}";

    tap_is(llm_inspect(LLM_API_ANTHROPIC, b, strlen(b), &conf, &req), 0,
           "anthropic accepted");
    tap_is(req.prompt_tokens, 2 + 1 + 3 + 3, "system prompt counted");
    tap_ok(req.stream && !llm_inspect_needs_rewrite(&req),
           "anthropic streams are not rewritten");

    b = "{\"model\":\"m\",\"messages\":[],\"max_completion_tokens\":7}";
    llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req);
    tap_is(req.max_tokens, 7, "max_completion_tokens read");

    /* a string input is one message: 3 + ceil(10 / 4), plus 3 */
    b = "{\"model\":\"m\",\"input\":\"Say hello.\",\"stream\":true,"
        "\"max_output_tokens\":30}";

    tap_is(llm_inspect(LLM_API_RESPONSES, b, strlen(b), &conf, &req), 0,
           "responses accepted");
    tap_is(req.prompt_tokens, 3 + 3 + 3, "responses: a string input");
    tap_is(req.max_tokens, 30, "responses: max_output_tokens");
    tap_ok(req.stream && !llm_inspect_needs_rewrite(&req),
           "responses streams carry their usage: not rewritten");

    b = "{\"model\":\"m\",\"instructions\":\"12345678\",\"input\":["
        "{\"role\":\"user\",\"content\":\"hello\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
        "\"text\":\"abcdefgh\"}]}]}";

    llm_inspect(LLM_API_RESPONSES, b, strlen(b), &conf, &req);
    tap_is(req.prompt_tokens, 2 + 3 + 2 + 3 + 2 + 3,
           "responses: input items and instructions");

    /* count_tokens: a Messages body without max_tokens, nothing written */
    b = "{\"model\":\"claude\",\"system\":\"12345678\","
        "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":5000},"
        "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";

    tap_is(llm_inspect(LLM_API_COUNT_TOKENS, b, strlen(b), &conf, &req), 0,
           "count_tokens accepted without max_tokens, whatever the budget");
    tap_is(req.prompt_tokens, 2 + 1 + 3 + 3, "count_tokens: as Messages");
    tap_ok(req.max_tokens == 0 && req.output_bound == 0
           && !llm_inspect_needs_rewrite(&req),
           "count_tokens: no output, no limit written in");
    tap_ok(req.api == LLM_API_COUNT_TOKENS, "count_tokens: its own api");

    b = "{\"model\":\"claude\",\"n\":2,\"messages\":[]}";
    tap_is(llm_inspect(LLM_API_COUNT_TOKENS, b, strlen(b), &conf, &req), -1,
           "count_tokens: a member of another API is refused");
    tap_is_str(req.param ? req.param : "", "n", "  param names \"n\"");

    b = "{\"messages\":[]}";
    tap_is(llm_inspect(LLM_API_COUNT_TOKENS, b, strlen(b), &conf, &req), -1,
           "count_tokens: model required");
}


static void
test_bounds(void)
{
    int             i;
    char            big[2048];
    const char     *b;
    llm_request_t   req;

    /* every choice is generated and billed */
    b = "{\"model\":\"m\",\"messages\":[],\"max_tokens\":100,\"n\":5}";
    tap_is(llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req), 0,
           "n=5 accepted");
    tap_is(req.n, 5, "n read");
    tap_is(req.output_bound, 500, "output bound: n x max_tokens");

    b = "{\"model\":\"m\",\"messages\":[],\"n\":2.0}";
    llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req);
    tap_is(req.output_bound, 2 * 256, "n=2.0 with the default limit");

    /* tool definitions are prompt */
    b = "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[],\"tools\":"
        "[{\"type\":\"function\",\"function\":{\"name\":\"lookup\","
        "\"description\":\"0123456789012345678901234567890123456789\"}}]}";
    tap_is(llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req), 0,
           "tools accepted");
    tap_is(req.parts.tools, 1, "1 tool");
    tap_ok(req.prompt_tokens >= 3 + 40 / 4 + 6 / 4,
           "the tool's text is in the estimate (%lld)",
           (long long) req.prompt_tokens);
    tap_ok(req.prompt_bound >= (int64_t) strlen(b) + LLM_INSPECT_TOOLS_PROMPT,
           "and the providers' tool prompt in the bound");
    tap_ok(req.unbounded == NULL, "a function tool is bounded");

    /* a tool the provider runs brings what it found */
    b = "{\"model\":\"m\",\"input\":\"x\",\"tools\":"
        "[{\"type\":\"web_search\"}]}";
    llm_inspect(LLM_API_RESPONSES, b, strlen(b), &conf, &req);
    tap_ok(req.unbounded != NULL, "web_search: unbounded");
    tap_ok(req.prompt_tokens >= 100000, "reserved as the context");

    /* files, audio and stored context: not bounded by their bytes */
    b = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
        "[{\"type\":\"file\",\"file\":{\"file_id\":\"f\"}},"
        "{\"type\":\"input_audio\",\"input_audio\":{}},"
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"u\"}},"
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"v\"}}]}]}";
    tap_is(llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req), 0,
           "chat parts accepted");
    tap_ok(req.parts.files == 1 && req.parts.audio == 1
           && req.parts.images == 2, "1 file, 1 audio, 2 images");
    tap_is_str(req.unbounded ? req.unbounded : "", "file",
               "the file makes it unbounded");
    tap_ok(req.prompt_tokens >= 100000 && req.prompt_bound >= 100000 + 2000,
           "the context and the images reserved");

    b = "{\"model\":\"m\",\"previous_response_id\":\"resp_1\",\"input\":"
        "[{\"type\":\"item_reference\",\"id\":\"msg_1\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"input_image\","
        "\"image_url\":\"u\"},{\"type\":\"input_file\","
        "\"file_id\":\"f\"}]}]}";
    tap_is(llm_inspect(LLM_API_RESPONSES, b, strlen(b), &conf, &req), 0,
           "responses parts accepted");
    tap_ok(req.parts.refs == 2 && req.parts.messages == 2
           && req.parts.images == 1 && req.parts.files == 1,
           "2 references, 2 items, 1 image, 1 file");
    tap_is_str(req.unbounded ? req.unbounded : "", "previous_response_id",
               "previous_response_id makes it unbounded");

    b = "{\"model\":\"m\",\"max_tokens\":5,\"system\":[{\"type\":\"text\","
        "\"text\":\"12345678\"}],\"messages\":[{\"role\":\"user\","
        "\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\","
        "\"content\":[{\"type\":\"image\",\"source\":{}},"
        "{\"type\":\"document\",\"source\":{}}]}]}],"
        "\"mcp_servers\":[{\"url\":\"u\"},{\"url\":\"v\"}]}";
    tap_is(llm_inspect(LLM_API_ANTHROPIC, b, strlen(b), &conf, &req), 0,
           "anthropic parts accepted");
    tap_ok(req.parts.images == 1 && req.parts.files == 1
           && req.parts.refs == 2, "tool_result's image and document, 2 "
           "mcp servers");

    /* a repeat in an object of many members is found as in a small one */
    strcpy(big, "{\"model\":\"m\",\"messages\":[],\"metadata\":{");

    for (i = 0; i < 40; i++) {
        sprintf(big + strlen(big), "\"k%d\":1,", i);
    }

    strcat(big, "\"k7\":2}}");
    tap_is(llm_inspect(LLM_API_OPENAI, big, strlen(big), &conf, &req), -1,
           "a repeat among 41 members: refused");
    tap_is_str(req.param ? req.param : "", "k7", "  names it");

    /* raw control bytes are not JSON */
    b = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
        "\"content\":\"a\001b\"}]}";
    tap_is(llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req), -1,
           "a raw control byte in a string: refused");
}


/*
 * Tools: their definitions, calls and results are data, counted by runs of
 * letters, digits and punctuation, each at least a token; a prompt with
 * tools adds the provider's tool prompt.
 */

static void
test_tools(void)
{
    int                  i;
    char                *big, *p;
    size_t               len;
    const char          *b;
    llm_request_t        req;
    llm_inspect_conf_t   cf;

    /*
     * {"a":12345} is 6: {" a ": 123 45 }; bytes / 4 made it 3.  The id
     * "c1" is 2, the message 3, the reply's priming 3.
     */
    b = "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"tool\","
        "\"tool_call_id\":\"c1\",\"content\":\"{\\\"a\\\":12345}\"}]}";
    tap_is(llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req), 0,
           "chat: a tool message accepted");
    tap_is(req.prompt_tokens, 3 + 2 + 6 + 3, "chat: a tool's result as data");

    b = "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"tool\","
        "\"tool_call_id\":\"c1\",\"content\":[{\"type\":\"text\","
        "\"text\":\"{\\\"a\\\":12345}\"}]}]}";
    llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req);
    tap_is(req.prompt_tokens, 3 + 2 + 6 + 3, "chat: and in text parts");

    /*
     * The call: { 1, "id" 2, "c1" 3, "function" 3, { 1, "name" 2, "f" 2,
     * "arguments" 3, "{}" 2.
     */
    b = "{\"model\":\"m\",\"max_tokens\":1,\"messages\":["
        "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c1\","
        "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}";
    llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req);
    tap_is(req.prompt_tokens, 3 + (1 + 2 + 3 + 3 + 1 + 2 + 2 + 3 + 2) + 3,
           "chat: a tool call as JSON");

    b = "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\","
        "\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"c1\","
        "\"content\":\"{\\\"a\\\":12345}\"}]}]}";
    tap_is(llm_inspect(LLM_API_ANTHROPIC, b, strlen(b), &conf, &req), 0,
           "anthropic: a tool_result accepted");
    tap_is(req.prompt_tokens, 3 + 2 + 6 + 3,
           "anthropic: a tool_result's string as data");

    b = "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\","
        "\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"c1\","
        "\"content\":[{\"type\":\"text\",\"text\":\"{\\\"a\\\":12345}\"},"
        "{\"type\":\"image\",\"source\":{}}]},"
        "{\"type\":\"text\",\"text\":\"{\\\"a\\\":12345}\"}]}]}";
    llm_inspect(LLM_API_ANTHROPIC, b, strlen(b), &conf, &req);
    tap_is(req.prompt_tokens, 3 + 2 + 6 + 1000 + 3 + 3,
           "anthropic: its blocks as data, its image as an image, the text "
           "after it as prose");

    b = "{\"model\":\"m\",\"input\":[{\"type\":\"function_call_output\","
        "\"call_id\":\"c1\",\"output\":\"{\\\"a\\\":12345}\"},"
        "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\","
        "\"arguments\":\"{}\"}]}";
    tap_is(llm_inspect(LLM_API_RESPONSES, b, strlen(b), &conf, &req), 0,
           "responses: a call and its output accepted");
    tap_is(req.prompt_tokens, 3 + 2 + 6 + 3 + 2 + 1 + 1 + 3,
           "responses: the output and the arguments as data");

    /*
     * A definition: { name f } 4, input_schema {} 6 (input _ schema is 4,
     * its colon 1, the object 1), the object 1; the tool-use prompt.
     */
    b = "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[],"
        "\"tools\":[{\"name\":\"f\",\"input_schema\":{}}]}";
    tap_is(llm_inspect(LLM_API_ANTHROPIC, b, strlen(b), &conf, &req), 0,
           "anthropic: a tool accepted");
    tap_is(req.prompt_tokens, 1 + 4 + 6 + LLM_INSPECT_TOOLS_ANTHROPIC + 3,
           "anthropic: a tool's JSON and the tool-use system prompt");
    tap_ok(req.prompt_bound >= req.prompt_tokens
           && req.prompt_bound >= (int64_t) strlen(b)
                                  + LLM_INSPECT_TOOLS_PROMPT,
           "  within the bound");

    b = "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[],"
        "\"functions\":[{\"name\":\"f\",\"parameters\":{}}]}";
    llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req);
    tap_is(req.prompt_tokens, 1 + 4 + 4 + LLM_INSPECT_TOOLS_OPENAI + 3,
           "chat: legacy functions, and OpenAI's framing");

    /*
     * 5 kB of numbers, [1000,1001,...,0]: 100 0 , is 3 a number as in o200k,
     * where bytes / 4 made it 1251 in all.
     */
    cf = conf;
    cf.max_string = 1 << 20;

    big = malloc(8192);
    if (big == NULL) {
        tap_ok(0, "memory");
        return;
    }

    p = big + sprintf(big, "{\"model\":\"m\",\"max_tokens\":1,"
                      "\"messages\":[{\"role\":\"tool\",\"content\":\"[");

    for (i = 0; i < 1000; i++) {
        p += sprintf(p, "%d,", 1000 + i);
    }

    p += sprintf(p, "0]\"}]}");
    len = p - big;

    tap_is(llm_inspect(LLM_API_OPENAI, big, len, &cf, &req), 0,
           "chat: a 5 kB tool result accepted");
    tap_is(req.prompt_tokens, 3 + 1 + 1000 * 3 + 2 + 3,
           "chat: its 1000 numbers 3 each (%lld)",
           (long long) req.prompt_tokens);

    /* never more than one a byte: a1a1... is a run a byte */
    p = big + sprintf(big, "{\"model\":\"m\",\"max_tokens\":1,"
                      "\"messages\":[{\"role\":\"tool\",\"content\":\"");

    for (i = 0; i < 1000; i++) {
        p += sprintf(p, "a1");
    }

    p += sprintf(p, "\"}]}");
    len = p - big;

    llm_inspect(LLM_API_OPENAI, big, len, &cf, &req);
    tap_is(req.prompt_tokens, 3 + 2000 + 3, "one token a byte at most");

    free(big);
}


static void
test_rewrite(void)
{
    char           *s, out[512];
    size_t          n;
    const char     *b;
    llm_request_t   req;
    cJSON          *j;

    b = " {\"model\":\"m\",\"messages\":[],\"stream\":true}";
    llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req);

    tap_ok(req.add_include_usage && req.max_tokens_missing && !req.rebuild,
           "stream without options and max_tokens: splice");

    n = llm_inspect_splice(b, strlen(b), &req, out, sizeof(out));
    out[n] = '\0';
    tap_is_str(out, " {\"stream_options\":{\"include_usage\":true},"
               "\"max_completion_tokens\":256,\"model\":\"m\","
               "\"messages\":[],\"stream\":true}",
               "spliced body: Chat's default as max_completion_tokens");

    j = cJSON_Parse(out);
    tap_ok(j != NULL, "spliced body is JSON");
    cJSON_Delete(j);

    tap_is(llm_inspect_splice(b, strlen(b), &req, out, strlen(b) + 10), 0,
           "too small an output is refused");

    b = "{\"model\":\"m\",\"messages\":[],\"stream\":true,\"max_tokens\":9,"
        "\"stream_options\":{\"include_usage\":false}}";
    llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req);
    tap_ok(req.rebuild && req.add_include_usage, "usage refused: rebuild");

    s = llm_inspect_rebuild(b, strlen(b), &req);
    tap_is_str(s ? s : "", "{\"model\":\"m\",\"messages\":[],\"stream\":true,"
               "\"max_tokens\":9,\"stream_options\":{\"include_usage\":true}}",
               "rebuilt body");
    cJSON_free(s);

    b = "{\"model\":\"m\",\"messages\":[],\"stream\":true,"
        "\"stream_options\":{\"include_usage\":true},\"max_tokens\":9}";
    llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req);
    tap_ok(!llm_inspect_needs_rewrite(&req), "usage already asked for");

    /* a null is replaced, never followed by a second member */
    b = "{\"model\":\"m\",\"max_tokens\":null,\"messages\":[],"
        "\"stream\":true,\"stream_options\":null}";
    llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req);
    tap_ok(req.rebuild && req.add_include_usage && req.max_tokens_missing,
           "nulls: rebuild");

    s = llm_inspect_rebuild(b, strlen(b), &req);
    tap_is_str(s ? s : "", "{\"model\":\"m\",\"messages\":[],\"stream\":true,"
               "\"stream_options\":{\"include_usage\":true},"
               "\"max_completion_tokens\":256}",
               "nulls replaced once each, the limit by its Chat name");
    cJSON_free(s);

    /* an alias resolved to its pinned model */
    b = "{\"model\":\"chat-default\",\"max_tokens\":5,\"messages\":[]}";
    llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req);
    tap_ok(!llm_inspect_needs_rewrite(&req), "no rewrite before the alias");
    tap_is(llm_inspect_set_model(&req, "gpt-x-2024", 10), 0, "alias set");
    tap_ok(llm_inspect_needs_rewrite(&req) && req.rebuild, "then a rebuild");
    tap_is_str(req.model, "gpt-x-2024", "the model is the pinned one");

    s = llm_inspect_rebuild(b, strlen(b), &req);
    tap_is_str(s ? s : "", "{\"model\":\"gpt-x-2024\",\"max_tokens\":5,"
               "\"messages\":[]}", "the upstream gets the pinned model");
    cJSON_free(s);

    b = "{\"model\":\"m\",\"input\":\"x\"}";
    llm_inspect(LLM_API_RESPONSES, b, strlen(b), &conf, &req);
    n = llm_inspect_splice(b, strlen(b), &req, out, sizeof(out));
    out[n] = '\0';
    tap_is_str(out, "{\"max_output_tokens\":256,\"model\":\"m\","
               "\"input\":\"x\"}", "responses: the default max_output_tokens");

    b = "{\"model\":\"m\",\"max_output_tokens\":null,\"input\":\"x\"}";
    llm_inspect(LLM_API_RESPONSES, b, strlen(b), &conf, &req);
    s = llm_inspect_rebuild(b, strlen(b), &req);
    tap_is_str(s ? s : "", "{\"model\":\"m\",\"input\":\"x\","
               "\"max_output_tokens\":256}", "responses: a null one replaced");
    cJSON_free(s);

    b = "{\"model\":\"m\",\"max_tokens\":null,\"messages\":[]}";
    llm_inspect(LLM_API_ANTHROPIC, b, strlen(b), &conf, &req);
    s = llm_inspect_rebuild(b, strlen(b), &req);
    tap_is_str(s ? s : "", "{\"model\":\"m\",\"messages\":[],"
               "\"max_tokens\":256}", "anthropic: only max_tokens rewritten");
    cJSON_free(s);
}


/* above the maximum: the field as sent, its value and the maximum */

static void
test_limit_refused(void)
{
    size_t          i;
    llm_request_t   req;

    static const struct {
        llm_api_e     api;
        const char   *body;
        const char   *param;
        const char   *message;
    } above[] = {
        { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                          "\"max_completion_tokens\":64000}",
          "max_completion_tokens",
          "max_completion_tokens is 64000; this tier allows at most 4096." },
        { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                          "\"max_tokens\":4097}",
          "max_tokens", "max_tokens is 4097; this tier allows at most 4096." },
        { LLM_API_ANTHROPIC, "{\"model\":\"m\",\"messages\":[],"
                             "\"max_tokens\":8192}",
          "max_tokens", "max_tokens is 8192; this tier allows at most 4096." },
        { LLM_API_RESPONSES, "{\"model\":\"m\",\"input\":\"a\","
                             "\"max_output_tokens\":9007199254740992}",
          "max_output_tokens", "max_output_tokens is 9007199254740992; "
          "this tier allows at most 4096." },

        /* OpenAI's own refusal of the two names at once */
        { LLM_API_OPENAI, "{\"model\":\"m\",\"messages\":[],"
                          "\"max_completion_tokens\":5,\"max_tokens\":5}",
          "max_tokens", "Setting 'max_tokens' and 'max_completion_tokens' "
          "at the same time is not supported." },
    };

    for (i = 0; i < sizeof(above) / sizeof(above[0]); i++) {
        tap_is(llm_inspect(above[i].api, above[i].body, strlen(above[i].body),
                           &conf, &req), -1, "refused: %s", above[i].body);
        tap_is_str(req.param ? req.param : "", above[i].param,
                   "  param %s", above[i].param);
        tap_is_str(req.message ? req.message : "", above[i].message,
                   "  message");
    }
}


/* a tier that lowers: the maximum, under the member the client sent */

static void
test_limit_lowered(void)
{
    char                *s, body[128];
    size_t               i;
    const char          *b;
    llm_request_t        req;
    llm_inspect_conf_t   low;

    static const char  *bad[] = {
        "64000.5", "-64000", "\"64000\"", "9007199254740993", "1e400",
        "true", "[64000]", "0"
    };

    low = conf;
    low.lower = 1;

    b = "{\"model\":\"m\",\"messages\":[],\"max_completion_tokens\":64000,"
        "\"n\":2}";
    tap_is(llm_inspect(LLM_API_OPENAI, b, strlen(b), &low, &req), 0,
           "lower: 64000 accepted");
    tap_ok(req.max_tokens_lowered && req.rebuild, "  lowered, rebuilt");
    tap_is(req.max_tokens, 4096, "  to the maximum");
    tap_is(req.max_tokens_asked, 64000, "  what was asked is kept");
    tap_is(req.output_bound, 2 * 4096, "  the bound: n x the lowered limit");
    tap_is_str(llm_inspect_max_name(&req), "max_completion_tokens",
               "  under the client's name");

    /* a backend that wants max_tokens changes only the default's name */
    req.chat_max_tokens = 1;
    s = llm_inspect_rebuild(b, strlen(b), &req);
    tap_is_str(s ? s : "", "{\"model\":\"m\",\"messages\":[],\"n\":2,"
               "\"max_completion_tokens\":4096}", "  the upstream's body");
    cJSON_free(s);

    b = "{\"model\":\"m\",\"max_tokens\":64000,\"messages\":[],"
        "\"max_completion_tokens\":null}";
    tap_is(llm_inspect(LLM_API_OPENAI, b, strlen(b), &low, &req), 0,
           "lower: max_tokens beside a null max_completion_tokens");
    s = llm_inspect_rebuild(b, strlen(b), &req);
    tap_is_str(s ? s : "", "{\"model\":\"m\",\"messages\":[],"
               "\"max_tokens\":4096}", "  one limit, the client's name");
    cJSON_free(s);

    b = "{\"model\":\"m\",\"max_tokens\":8192,\"messages\":[]}";
    tap_is(llm_inspect(LLM_API_ANTHROPIC, b, strlen(b), &low, &req), 0,
           "lower: anthropic");
    s = llm_inspect_rebuild(b, strlen(b), &req);
    tap_is_str(s ? s : "", "{\"model\":\"m\",\"messages\":[],"
               "\"max_tokens\":4096}", "  max_tokens lowered");
    cJSON_free(s);

    /* a thinking budget that fitted what was asked, not the maximum */
    b = "{\"model\":\"m\",\"max_tokens\":64000,\"messages\":[],"
        "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":10000}}";
    tap_is(llm_inspect(LLM_API_ANTHROPIC, b, strlen(b), &low, &req), -1,
           "lower: a thinking budget above the lowered limit refused");
    tap_is_str(req.message ? req.message : "", "thinking.budget_tokens must "
               "be below max_tokens, which this tier lowers to 4096.",
               "  saying why");

    b = "{\"model\":\"m\",\"input\":\"a\",\"max_output_tokens\":1e6}";
    tap_is(llm_inspect(LLM_API_RESPONSES, b, strlen(b), &low, &req), 0,
           "lower: responses, 1e6");
    tap_is(req.max_tokens_asked, 1000000, "  asked 1000000");
    s = llm_inspect_rebuild(b, strlen(b), &req);
    tap_is_str(s ? s : "", "{\"model\":\"m\",\"input\":\"a\","
               "\"max_output_tokens\":4096}", "  max_output_tokens lowered");
    cJSON_free(s);

    b = "{\"model\":\"m\",\"messages\":[],\"max_tokens\":4096}";
    tap_is(llm_inspect(LLM_API_OPENAI, b, strlen(b), &low, &req), 0,
           "lower: the maximum itself");
    tap_ok(!req.max_tokens_lowered && !llm_inspect_needs_rewrite(&req),
           "  is not lowered, the body passes as sent");

    /* what is not a positive integer is refused, lowering or not */
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(body, sizeof(body), "{\"model\":\"m\",\"messages\":[],"
                 "\"max_completion_tokens\":%s}", bad[i]);
        tap_is(llm_inspect(LLM_API_OPENAI, body, strlen(body), &low, &req),
               -1, "lower: %s refused", bad[i]);
        tap_is_str(req.param ? req.param : "", "max_completion_tokens",
                   "  param as sent");
    }

    /* a member twice: refused before its value is read */
    b = "{\"model\":\"m\",\"messages\":[],\"max_tokens\":5,"
        "\"max_tokens\":64000}";
    tap_is(llm_inspect(LLM_API_OPENAI, b, strlen(b), &low, &req), -1,
           "lower: max_tokens twice refused");

    b = "{\"model\":\"m\",\"messages\":[],\"max_tokens\":64000,"
        "\"max_completion_tokens\":64000}";
    tap_is(llm_inspect(LLM_API_OPENAI, b, strlen(b), &low, &req), -1,
           "lower: both names refused");
}


/* the default's name: the one the upstream's API wants */

static void
test_limit_name(void)
{
    char           *s, out[256];
    size_t          n;
    const char     *b;
    llm_request_t   req;

    b = "{\"model\":\"m\",\"messages\":[]}";
    llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req);
    tap_is_str(llm_inspect_max_name(&req), "max_completion_tokens",
               "chat default: max_completion_tokens");

    req.chat_max_tokens = 1;
    n = llm_inspect_splice(b, strlen(b), &req, out, sizeof(out));
    out[n] = '\0';
    tap_is_str(out, "{\"max_tokens\":256,\"model\":\"m\",\"messages\":[]}",
               "chat default for a backend that wants max_tokens");

    /* a null under either name goes: one limit, under the one name */
    b = "{\"model\":\"m\",\"messages\":[],\"max_tokens\":null}";
    llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req);
    tap_ok(req.rebuild && req.max_tokens_missing, "a null max_tokens: rebuild");
    s = llm_inspect_rebuild(b, strlen(b), &req);
    tap_is_str(s ? s : "", "{\"model\":\"m\",\"messages\":[],"
               "\"max_completion_tokens\":256}", "  replaced by the default");
    cJSON_free(s);

    b = "{\"model\":\"m\",\"messages\":[],\"max_completion_tokens\":null,"
        "\"max_tokens\":null}";
    llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req);
    req.chat_max_tokens = 1;
    s = llm_inspect_rebuild(b, strlen(b), &req);
    tap_is_str(s ? s : "", "{\"model\":\"m\",\"messages\":[],"
               "\"max_tokens\":256}", "  both nulls: one max_tokens");
    cJSON_free(s);

    b = "{\"model\":\"m\",\"messages\":[]}";
    llm_inspect(LLM_API_ANTHROPIC, b, strlen(b), &conf, &req);
    tap_is_str(llm_inspect_max_name(&req), "max_tokens",
               "anthropic default: max_tokens");

    b = "{\"model\":\"m\",\"messages\":[],\"max_completion_tokens\":7}";
    llm_inspect(LLM_API_OPENAI, b, strlen(b), &conf, &req);
    req.chat_max_tokens = 1;
    tap_is_str(llm_inspect_max_name(&req), "max_completion_tokens",
               "a limit sent keeps its name");
}


static void
test_scan(void)
{
    char         b[256];
    const char  *what;

    tap_is(llm_inspect_scan("[[[[[[[[]]]]]]]]", 16, 8, 64, &what), 0,
           "8 levels deep: within 8");
    tap_is(llm_inspect_scan("[[[[[[[[[]]]]]]]]]", 18, 8, 64, &what), -1,
           "9 levels deep: refused");
    tap_ok(strstr(what, "nested") != NULL, "  says so");

    /* brackets inside strings, escaped quotes, are not structure */
    tap_is(llm_inspect_scan("[\"[[[[[[[[[[\\\"{{{{{{\"]", 22, 1, 64, &what),
           0, "brackets and escaped quotes inside a string");

    memset(b, 'a', sizeof(b));
    b[0] = '"';
    b[65] = '"';
    tap_is(llm_inspect_scan(b, 66, 8, 64, &what), 0,
           "a string of 64 bytes");
    b[65] = 'a';
    b[66] = '"';
    tap_is(llm_inspect_scan(b, 67, 8, 64, &what), -1,
           "a string of 65 bytes: refused");
    tap_ok(strstr(what, "string") != NULL, "  says so");

    snprintf(b, sizeof(b), "{\"model\":\"m\",\"messages\":[[[[[[[[[]]]]]]]]]}");
    tap_is(llm_inspect_scan(b, strlen(b), 8, 64, &what), -1,
           "a deep body");

    /* what cJSON would read differently from an upstream: refused */
    b[0] = '\0';
    strcat(b, "{\"model\":\"gpt-4o-mini\\u0000gpt-4o\",\"messages\":[]}");
    tap_is(llm_inspect_scan(b, strlen(b), 8, 64, &what), -1,
           "\\u0000 in a string: refused");
    tap_ok(strstr(what, "u0000") != NULL, "  says so");
    tap_is(llm_inspect_scan("{\"a\":\"\\\\u0000\"}", 14, 8, 64, &what),
           0, "an escaped backslash, then u0000: text");
    tap_is(llm_inspect_scan("{\"a\":\"\\u0041\"}", 13, 8, 64, &what), 0,
           "\\u0041: fine");

    tap_is(llm_inspect_scan("{\"m\":[]} {\"m\":1}", 17, 8, 64, &what), -1,
           "text after the JSON value: refused");
    tap_ok(strstr(what, "after") != NULL, "  says so");
    tap_is(llm_inspect_scan("{\"m\":[]} \r\n\t", 12, 8, 64, &what), 0,
           "whitespace after it: fine");

    tap_is(llm_inspect_scan("\x01{\"m\":[]}", 10, 8, 64, &what), -1,
           "a control byte before it: refused");
    tap_is(llm_inspect_scan("{\x0b\"m\":[]}", 10, 8, 64, &what), -1,
           "a vertical tab between members: refused");
    tap_ok(strstr(what, "control") != NULL, "  says so");
}


/* a body of n inputs: strings "ab", or token arrays of k tokens */

static size_t
embed_body(char *buf, size_t cap, int n, int k, int last)
{
    int     i, j;
    size_t  len;

    len = (size_t) snprintf(buf, cap, "{\"model\":\"m\",\"input\":[");

    for (i = 0; i < n; i++) {
        if (k == 0) {
            len += (size_t) snprintf(buf + len, cap - len, "%s\"ab\"",
                                     i ? "," : "");
            continue;
        }

        len += (size_t) snprintf(buf + len, cap - len, "%s[", i ? "," : "");

        for (j = 0; j < ((i == n - 1) ? last : k); j++) {
            len += (size_t) snprintf(buf + len, cap - len, "%s7",
                                     j ? "," : "");
        }

        len += (size_t) snprintf(buf + len, cap - len, "]");
    }

    len += (size_t) snprintf(buf + len, cap - len, "]}");

    return len;
}


static void
test_embeddings(void)
{
    char           *big, *out;
    size_t          n, cap;
    const char     *b;
    llm_request_t   req, up;

    /* "hello" is 5 bytes: 2 estimated, 5 at most; no output at all */
    b = "{\"model\":\"text-embedding-3-small\",\"input\":\"hello\"}";

    tap_is(llm_inspect(LLM_API_EMBEDDINGS, b, strlen(b), &conf, &req), 0,
           "embeddings: a string");
    tap_is(req.prompt_tokens, 2, "  estimate ceil(5 / 4)");
    tap_is(req.prompt_bound, 5, "  bound: its bytes");
    tap_ok(req.max_tokens == 0 && req.output_bound == 0 && req.n == 1,
           "  no output");
    tap_ok(!req.stream && !llm_inspect_needs_rewrite(&req),
           "  not a stream, nothing to write in");
    tap_is_str(req.model, "text-embedding-3-small", "  model");

    /* "abcd" 1, "abcde" 2; "\u00e9" is two bytes decoded */
    b = "{\"model\":\"m\",\"input\":[\"abcd\",\"abcde\",\"\\u00e9\"]}";

    tap_is(llm_inspect(LLM_API_EMBEDDINGS, b, strlen(b), &conf, &req), 0,
           "embeddings: strings");
    tap_is(req.prompt_tokens, 1 + 2 + 1, "  estimate: each string's");
    tap_is(req.prompt_bound, 4 + 5 + 2, "  bound: their decoded bytes");

    b = "{\"model\":\"m\",\"input\":[15339,1917,0]}";

    tap_is(llm_inspect(LLM_API_EMBEDDINGS, b, strlen(b), &conf, &req), 0,
           "embeddings: tokens");
    tap_ok(req.prompt_tokens == 3 && req.prompt_bound == 3,
           "  exactly their number, estimate and bound");

    b = "{\"model\":\"m\",\"input\":[[1,2],[3],[4,5,6,7]]}";

    tap_is(llm_inspect(LLM_API_EMBEDDINGS, b, strlen(b), &conf, &req), 0,
           "embeddings: token arrays");
    tap_ok(req.prompt_tokens == 7 && req.prompt_bound == 7,
           "  exactly their tokens, estimate and bound");

    /* an alias: the body is rebuilt, and reads as the same request */
    tap_is(llm_inspect_set_model(&req, "text-embedding-3-large", 22), 0,
           "embeddings: an alias resolved");
    out = llm_inspect_rebuild(b, strlen(b), &req);
    tap_ok(out != NULL
           && llm_inspect(LLM_API_EMBEDDINGS, out, strlen(out), &conf, &up)
              == 0
           && strcmp(up.model, "text-embedding-3-large") == 0
           && up.prompt_tokens == 7 && !llm_inspect_needs_rewrite(&up),
           "  the rebuilt body is the same request for the new model");
    cJSON_free(out);

    /* OpenAI's limits, at their edges */
    cap = 4 * 1024 * 1024;
    big = malloc(cap);
    if (big == NULL) {
        abort();
    }

    n = embed_body(big, cap, 2048, 0, 0);
    tap_is(llm_inspect(LLM_API_EMBEDDINGS, big, n, &conf, &req), 0,
           "embeddings: 2048 inputs");
    tap_is(req.prompt_tokens, 2048, "  each one token");

    n = embed_body(big, cap, 2049, 0, 0);
    tap_is(llm_inspect(LLM_API_EMBEDDINGS, big, n, &conf, &req), -1,
           "embeddings: 2049 inputs refused");
    tap_is_str(req.param ? req.param : "", "input", "  param input");

    n = embed_body(big, cap, 2049, 1, 1);
    tap_is(llm_inspect(LLM_API_EMBEDDINGS, big, n, &conf, &req), -1,
           "embeddings: 2049 token arrays refused");

    n = embed_body(big, cap, 1, 8192, 8192);
    tap_is(llm_inspect(LLM_API_EMBEDDINGS, big, n, &conf, &req), 0,
           "embeddings: a token array of 8192");
    tap_is(req.prompt_tokens, 8192, "  8192 tokens");

    n = embed_body(big, cap, 1, 8193, 8193);
    tap_is(llm_inspect(LLM_API_EMBEDDINGS, big, n, &conf, &req), -1,
           "embeddings: a token array of 8193 refused");

    /* one input of tokens: {"model":"m","input":[7,7,...]} */
    n = embed_body(big, cap, 1, 8193, 8193);
    memmove(big + 22, big + 23, n - 23);
    big[n - 3] = '}';
    n -= 2;
    tap_is(llm_inspect(LLM_API_EMBEDDINGS, big, n, &conf, &req), -1,
           "embeddings: 8193 tokens as one input refused");
    tap_ok(req.message && strstr(req.message, "8192") != NULL,
           "  the message gives the limit");

    n = embed_body(big, cap, 1, 8192, 8192);
    memmove(big + 22, big + 23, n - 23);
    big[n - 3] = '}';
    n -= 2;
    tap_is(llm_inspect(LLM_API_EMBEDDINGS, big, n, &conf, &req), 0,
           "embeddings: 8192 tokens as one input");

    /* 36 of 8192 and one of 5088: 300000 in all */
    n = embed_body(big, cap, 37, 8192, 5088);
    tap_is(llm_inspect(LLM_API_EMBEDDINGS, big, n, &conf, &req), 0,
           "embeddings: 300000 tokens in all");
    tap_is(req.prompt_tokens, 300000, "  300000 tokens");

    n = embed_body(big, cap, 37, 8192, 5089);
    tap_is(llm_inspect(LLM_API_EMBEDDINGS, big, n, &conf, &req), -1,
           "embeddings: 300001 tokens in all refused");
    tap_ok(req.message && strstr(req.message, "300000") != NULL,
           "  the message gives the limit");

    free(big);
}


int
main(void)
{
    test_scan();
    test_refusals();
    test_estimate();
    test_bounds();
    test_tools();
    test_rewrite();
    test_limit_refused();
    test_limit_lowered();
    test_limit_name();
    test_embeddings();

    return tap_done();
}
