
/*
 * The request translator; see llm_tx_request.h for the mapping.
 */


#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cJSON.h>

#include "llm_tx_request.h"


/* OpenAI's limit of stop sequences */
#define LLM_TXR_STOP_MAX          4

/* the longest media type of a data: URL */
#define LLM_TXR_MEDIA_MAX         64

/* the longest tool call id Anthropic takes */
#define LLM_TXR_TOOL_ID_MAX       256


typedef struct {
    const llm_tx_request_conf_t  *cf;
    llm_tx_request_t             *out;
    size_t                        plen;
    int                           rc;       /* 0, -1 refused, -2 no memory */
    char                          path[LLM_TX_PARAM_MAX];
} llm_txr_t;


/* a conversation written in Messages' form, merging roles in a row */
typedef struct {
    cJSON                        *msgs;
    cJSON                        *last;
    cJSON                        *blocks;   /* its content; NULL: a string */
    const char                   *role;     /* one of the two below */
} llm_txr_conv_t;


static int llm_txr_to_messages(llm_txr_t *t, const cJSON *in, cJSON *root);
static int llm_txr_chat_check(llm_txr_t *t, const cJSON *in);
static int llm_txr_chat_messages(llm_txr_t *t, const cJSON *in, cJSON *root);
static int llm_txr_chat_system(llm_txr_t *t, const cJSON *msg, cJSON *sys,
    int *plain);
static int llm_txr_chat_user(llm_txr_t *t, const cJSON *msg,
    llm_txr_conv_t *cv);
static cJSON *llm_txr_chat_part(llm_txr_t *t, const cJSON *part);
static cJSON *llm_txr_image(llm_txr_t *t, const char *url);
static int llm_txr_chat_assistant(llm_txr_t *t, const cJSON *msg,
    llm_txr_conv_t *cv);
static cJSON *llm_txr_chat_tool_use(llm_txr_t *t, const cJSON *call);
static int llm_txr_chat_tool(llm_txr_t *t, const cJSON *msg,
    llm_txr_conv_t *cv);
static int llm_txr_chat_tools(llm_txr_t *t, const cJSON *in, cJSON *root);
static int llm_txr_chat_choice(llm_txr_t *t, const cJSON *in, cJSON *root);
static int llm_txr_chat_options(llm_txr_t *t, const cJSON *in, cJSON *root);

static int llm_txr_from_messages(llm_txr_t *t, const cJSON *in, cJSON *root);
static int llm_txr_msg_check(llm_txr_t *t, const cJSON *in);
static int llm_txr_msg_system(llm_txr_t *t, const cJSON *in, cJSON *msgs);
static int llm_txr_msg_user(llm_txr_t *t, const cJSON *msg, cJSON *msgs);
static int llm_txr_msg_result(llm_txr_t *t, const cJSON *block, cJSON *msgs);
static cJSON *llm_txr_msg_part(llm_txr_t *t, const cJSON *block);
static int llm_txr_msg_assistant(llm_txr_t *t, const cJSON *msg,
    cJSON *msgs);
static int llm_txr_msg_tools(llm_txr_t *t, const cJSON *in, cJSON *root);
static int llm_txr_msg_options(llm_txr_t *t, const cJSON *in, cJSON *root);

static int llm_txr_from_responses(llm_txr_t *t, const cJSON *in,
    cJSON *root);
static int llm_txr_resp_check(llm_txr_t *t, const cJSON *in);
static int llm_txr_resp_input(llm_txr_t *t, const cJSON *in, cJSON *msgs);
static int llm_txr_resp_message(llm_txr_t *t, const cJSON *item,
    cJSON *msgs, cJSON **asst);
static cJSON *llm_txr_resp_part(llm_txr_t *t, const cJSON *part, int user);
static int llm_txr_resp_url(llm_txr_t *t, const char *member,
    const char *url, int image);
static int llm_txr_resp_call(llm_txr_t *t, const cJSON *item, cJSON *msgs,
    cJSON **asst);
static int llm_txr_resp_output(llm_txr_t *t, const cJSON *item,
    cJSON *msgs);
static int llm_txr_resp_tools(llm_txr_t *t, const cJSON *in, cJSON *root);

static int llm_txr_model(llm_txr_t *t, const cJSON *in, cJSON *root);
static int llm_txr_chat_limit(llm_txr_t *t, cJSON *root);
static int llm_txr_stream(llm_txr_t *t, const cJSON *in, cJSON *root,
    int usage);
static int llm_txr_number(llm_txr_t *t, const cJSON *in, cJSON *root,
    const char *name, double max);
static cJSON *llm_txr_conv_blocks(llm_txr_t *t, llm_txr_conv_t *cv,
    const char *role);
static int llm_txr_conv_block(llm_txr_t *t, llm_txr_conv_t *cv,
    const char *role, cJSON *block);
static int llm_txr_conv_string(llm_txr_t *t, llm_txr_conv_t *cv,
    const char *role, const char *s);
static cJSON *llm_txr_text(llm_txr_t *t, const char *type, const char *s);
static cJSON *llm_txr_arguments(llm_txr_t *t, const cJSON *call,
    const char *name);
static char *llm_txr_texts(llm_txr_t *t, const cJSON *blocks,
    const char *sep, int assistant);
static char *llm_txr_data_url(llm_txr_t *t, const char *type,
    const char *data);
static int llm_txr_parse_data(const char *url, char *type, size_t size,
    const char **data);
static int llm_txr_known(llm_txr_t *t, const cJSON *obj,
    const char *const *names);
static int llm_txr_is(const cJSON *obj, const char *name, const char *value);
static cJSON *llm_txr_get(const cJSON *obj, const char *name);
static const char *llm_txr_str(const cJSON *obj, const char *name);
static cJSON *llm_txr_add(llm_txr_t *t, cJSON *to, const char *name,
    cJSON *item);
static cJSON *llm_txr_add_str(llm_txr_t *t, cJSON *to, const char *name,
    const char *s);
static cJSON *llm_txr_add_dup(llm_txr_t *t, cJSON *to, const char *name,
    const cJSON *item);
static size_t llm_txr_push(llm_txr_t *t, const char *name);
static size_t llm_txr_index(llm_txr_t *t, const char *name, int i);
static void llm_txr_path(llm_txr_t *t, const char *p, size_t len);
static void llm_txr_pop(llm_txr_t *t, size_t old);
static int llm_txr_foreign(llm_txr_t *t, const char *member);
static int llm_txr_tool_id(llm_txr_t *t, const char *member,
    const char *id);
static int llm_txr_bad(llm_txr_t *t, const char *member, const char *what);
static int llm_txr_fail(llm_txr_t *t, const char *member,
    const char *fmt, ...);
static int llm_txr_oom(llm_txr_t *t);
static void llm_txr_copy(char *dst, size_t size, const char *src);


static const char  llm_txr_user[] = "user";
static const char  llm_txr_assistant[] = "assistant";


static const char *const  llm_txr_chat_known[] = {
    "model", "messages", "max_tokens", "max_completion_tokens", "stream",
    "stream_options", "temperature", "top_p", "stop", "user", "tools",
    "tool_choice", "parallel_tool_calls", "n", "logprobs",
    "presence_penalty", "frequency_penalty", "response_format", "store",
    "service_tier", "logit_bias", "modalities", NULL
};

static const char *const  llm_txr_msg_known[] = {
    "model", "messages", "max_tokens", "system", "stream", "stop_sequences",
    "temperature", "top_p", "tools", "tool_choice", "metadata", "thinking",
    "service_tier", NULL
};

static const char *const  llm_txr_resp_known[] = {
    "model", "input", "instructions", "max_output_tokens", "temperature",
    "top_p", "user", "parallel_tool_calls", "tools", "tool_choice",
    "stream", "stream_options", "store", "text", "include", "truncation",
    "background", "service_tier", NULL
};

/* the image types Messages takes */
static const char *const  llm_txr_images[] = {
    "image/jpeg", "image/png", "image/gif", "image/webp", NULL
};


int
llm_tx_request_supported(llm_api_e from, llm_api_e to)
{
    return (from == LLM_API_OPENAI && to == LLM_API_ANTHROPIC)
           || (from == LLM_API_ANTHROPIC && to == LLM_API_OPENAI)
           || (from == LLM_API_RESPONSES
               && (to == LLM_API_OPENAI || to == LLM_API_ANTHROPIC));
}


int
llm_tx_request(const llm_tx_request_conf_t *cf, const char *body,
    size_t len, llm_tx_request_t *out)
{
    cJSON      *in, *root, *mid;
    llm_txr_t   t;

    memset(out, 0, sizeof(llm_tx_request_t));
    memset(&t, 0, sizeof(llm_txr_t));

    t.cf = cf;
    t.out = out;

    if (!llm_tx_request_supported(cf->from, cf->to)) {
        return llm_txr_fail(&t, NULL, "requests of this dialect cannot be "
                            "sent to a backend of that dialect");
    }

    in = cJSON_ParseWithLength(body, len);

    if (!cJSON_IsObject(in)) {
        cJSON_Delete(in);
        return -2;
    }

    root = cJSON_CreateObject();
    mid = NULL;

    if (root == NULL) {
        llm_txr_oom(&t);

    } else if (cf->from == LLM_API_OPENAI) {
        (void) llm_txr_to_messages(&t, in, root);

    } else if (cf->from == LLM_API_ANTHROPIC) {
        (void) llm_txr_from_messages(&t, in, root);

    } else if (cf->to == LLM_API_OPENAI) {
        (void) llm_txr_from_responses(&t, in, root);

    } else {
        /* Responses to Chat, then Chat to Messages */
        mid = cJSON_CreateObject();

        if (mid == NULL) {
            llm_txr_oom(&t);

        } else if (llm_txr_from_responses(&t, in, mid) == 0) {
            (void) llm_txr_to_messages(&t, mid, root);
        }
    }

    cJSON_Delete(in);
    cJSON_Delete(mid);

    if (t.rc == 0) {
        out->body = llm_tx_print(root);

        if (out->body == NULL) {
            llm_txr_oom(&t);

        } else {
            out->len = strlen(out->body);
        }
    }

    cJSON_Delete(root);

    if (t.rc != 0) {
        out->stream = 0;
    }

    return t.rc;
}


/* Chat Completions -> Messages */

static int
llm_txr_to_messages(llm_txr_t *t, const cJSON *in, cJSON *root)
{
    if (llm_txr_chat_check(t, in) != 0
        || llm_txr_model(t, in, root) != 0)
    {
        return -1;
    }

    llm_txr_add(t, root, "max_tokens",
                cJSON_CreateNumber((double) t->cf->max_tokens));

    if (t->rc != 0
        || llm_txr_chat_messages(t, in, root) != 0
        || llm_txr_chat_tools(t, in, root) != 0
        || llm_txr_chat_options(t, in, root) != 0)
    {
        return -1;
    }

    return t->rc;
}


/* the members Messages has no room for, unless they ask for nothing */

static int
llm_txr_chat_check(llm_txr_t *t, const cJSON *in)
{
    const cJSON  *v, *m;

    if (llm_txr_known(t, in, llm_txr_chat_known) != 0) {
        return -1;
    }

    v = llm_txr_get(in, "n");

    if (v && !(cJSON_IsNumber(v) && v->valuedouble == 1)) {
        return llm_txr_foreign(t, "n");
    }

    v = llm_txr_get(in, "logprobs");

    if (v && !cJSON_IsFalse(v)) {
        return llm_txr_foreign(t, "logprobs");
    }

    v = llm_txr_get(in, "presence_penalty");

    if (v && !(cJSON_IsNumber(v) && v->valuedouble == 0)) {
        return llm_txr_foreign(t, "presence_penalty");
    }

    v = llm_txr_get(in, "frequency_penalty");

    if (v && !(cJSON_IsNumber(v) && v->valuedouble == 0)) {
        return llm_txr_foreign(t, "frequency_penalty");
    }

    v = llm_txr_get(in, "response_format");

    if (v && !(llm_txr_is(v, "type", "text")
               && cJSON_GetArraySize(v) == 1))
    {
        return llm_txr_foreign(t, "response_format");
    }

    v = llm_txr_get(in, "store");

    if (v && !cJSON_IsBool(v)) {
        return llm_txr_bad(t, "store", "a boolean");
    }

    v = llm_txr_get(in, "parallel_tool_calls");

    if (v && !cJSON_IsBool(v)) {
        return llm_txr_bad(t, "parallel_tool_calls", "a boolean");
    }

    v = llm_txr_get(in, "stream_options");

    if (v && !cJSON_IsObject(v)) {
        return llm_txr_bad(t, "stream_options", "an object");
    }

    v = llm_txr_get(in, "service_tier");

    if (v && !(cJSON_IsString(v) && strcmp(v->valuestring, "auto") == 0)) {
        return llm_txr_foreign(t, "service_tier");
    }

    v = llm_txr_get(in, "logit_bias");

    if (v && !(cJSON_IsObject(v) && v->child == NULL)) {
        return llm_txr_foreign(t, "logit_bias");
    }

    v = llm_txr_get(in, "modalities");
    m = cJSON_IsArray(v) ? v->child : NULL;

    if (v && !(m && m->next == NULL && cJSON_IsString(m)
               && strcmp(m->valuestring, "text") == 0))
    {
        return llm_txr_foreign(t, "modalities");
    }

    return 0;
}


static int
llm_txr_chat_messages(llm_txr_t *t, const cJSON *in, cJSON *root)
{
    int              i, plain;
    size_t           old;
    cJSON           *sys, *s;
    const cJSON     *list, *msg;
    const char      *role;
    llm_txr_conv_t   cv;

    list = llm_txr_get(in, "messages");

    if (!cJSON_IsArray(list)) {
        return llm_txr_bad(t, "messages", "an array");
    }

    /* in the tree at once, so that a failure frees them with it */
    sys = llm_txr_add(t, root, "system", cJSON_CreateArray());

    memset(&cv, 0, sizeof(llm_txr_conv_t));
    cv.msgs = llm_txr_add(t, root, "messages", cJSON_CreateArray());

    if (t->rc != 0) {
        return -1;
    }

    plain = 0;
    i = 0;

    cJSON_ArrayForEach(msg, list) {
        old = llm_txr_index(t, "messages", i++);

        role = llm_txr_str(msg, "role");

        if (!cJSON_IsObject(msg)) {
            return llm_txr_bad(t, NULL, "an object");
        }

        if (role == NULL) {
            return llm_txr_bad(t, "role", "a string");
        }

        if (strcmp(role, "system") == 0 || strcmp(role, "developer") == 0) {
            (void) llm_txr_chat_system(t, msg, sys, &plain);

        } else if (strcmp(role, "user") == 0) {
            (void) llm_txr_chat_user(t, msg, &cv);

        } else if (strcmp(role, "assistant") == 0) {
            (void) llm_txr_chat_assistant(t, msg, &cv);

        } else if (strcmp(role, "tool") == 0) {
            (void) llm_txr_chat_tool(t, msg, &cv);

        } else {
            return llm_txr_fail(t, "role", "'%s' messages cannot be sent "
                                "to a backend of another dialect", role);
        }

        if (t->rc != 0) {
            return -1;
        }

        llm_txr_pop(t, old);
    }

    if (cJSON_GetArraySize(cv.msgs) == 0) {
        return llm_txr_fail(t, "messages", "a conversation without a user "
                            "or assistant message cannot be sent to a "
                            "backend of another dialect");
    }

    if (sys->child == NULL) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, "system");

    } else if (plain == 1 && sys->child->next == NULL) {
        s = cJSON_CreateString(llm_txr_str(sys->child, "text"));

        if (s == NULL
            || !cJSON_ReplaceItemInObjectCaseSensitive(root, "system", s))
        {
            cJSON_Delete(s);
            return llm_txr_oom(t);
        }
    }

    return t->rc;
}


/* *plain counts the system messages that are one string */

static int
llm_txr_chat_system(llm_txr_t *t, const cJSON *msg, cJSON *sys, int *plain)
{
    int           k;
    size_t        old;
    const cJSON  *content, *part;
    const char   *s;

    static const char *const  known[] = { "role", "content", NULL };
    static const char *const  text[] = { "type", "text", NULL };

    if (llm_txr_known(t, msg, known) != 0) {
        return -1;
    }

    content = llm_txr_get(msg, "content");

    if (cJSON_IsString(content)) {
        if (content->valuestring[0] != '\0') {
            llm_txr_add(t, sys, NULL,
                        llm_txr_text(t, "text", content->valuestring));
            (*plain)++;
        }

        return t->rc;
    }

    if (!cJSON_IsArray(content)) {
        return llm_txr_bad(t, "content", "a string or an array");
    }

    k = 0;

    cJSON_ArrayForEach(part, content) {
        old = llm_txr_index(t, "content", k++);

        s = llm_txr_str(part, "text");

        if (!llm_txr_is(part, "type", "text")) {
            return llm_txr_fail(t, "type", "only text parts can be sent "
                                "as a system prompt to a backend of another "
                                "dialect");
        }

        if (llm_txr_known(t, part, text) != 0) {
            return -1;
        }

        if (s == NULL) {
            return llm_txr_bad(t, "text", "a string");
        }

        if (s[0] != '\0') {
            llm_txr_add(t, sys, NULL, llm_txr_text(t, "text", s));
        }

        llm_txr_pop(t, old);
    }

    return t->rc;
}


static int
llm_txr_chat_user(llm_txr_t *t, const cJSON *msg, llm_txr_conv_t *cv)
{
    int           k;
    size_t        old;
    cJSON        *block;
    const cJSON  *content, *part;

    static const char *const  known[] = { "role", "content", NULL };

    if (llm_txr_known(t, msg, known) != 0) {
        return -1;
    }

    content = llm_txr_get(msg, "content");

    if (content == NULL) {
        return 0;
    }

    if (cJSON_IsString(content)) {
        return llm_txr_conv_string(t, cv, llm_txr_user,
                                   content->valuestring);
    }

    if (!cJSON_IsArray(content)) {
        return llm_txr_bad(t, "content", "a string or an array");
    }

    k = 0;

    cJSON_ArrayForEach(part, content) {
        old = llm_txr_index(t, "content", k++);

        block = llm_txr_chat_part(t, part);

        if (t->rc != 0) {
            return -1;
        }

        if (block && llm_txr_conv_block(t, cv, llm_txr_user, block) != 0) {
            return -1;
        }

        llm_txr_pop(t, old);
    }

    return t->rc;
}


/* a user's part as a Messages block; NULL: nothing to send, or failed */

static cJSON *
llm_txr_chat_part(llm_txr_t *t, const cJSON *part)
{
    char          media[LLM_TXR_MEDIA_MAX];
    size_t        old;
    cJSON        *block, *src;
    const char   *type, *s, *data;
    const cJSON  *v;

    static const char *const  text[] = { "type", "text", NULL };
    static const char *const  image[] = { "type", "image_url", NULL };
    static const char *const  url[] = { "url", "detail", NULL };
    static const char *const  file[] = { "type", "file", NULL };
    static const char *const  data_[] = { "file_data", "filename", NULL };

    type = llm_txr_str(part, "type");

    if (type == NULL) {
        llm_txr_bad(t, "type", "a string");
        return NULL;
    }

    if (strcmp(type, "text") == 0) {
        s = llm_txr_str(part, "text");

        if (llm_txr_known(t, part, text) != 0) {
            return NULL;
        }

        if (s == NULL) {
            llm_txr_bad(t, "text", "a string");
            return NULL;
        }

        return s[0] ? llm_txr_text(t, "text", s) : NULL;
    }

    if (strcmp(type, "image_url") == 0) {
        v = llm_txr_get(part, "image_url");
        s = llm_txr_str(v, "url");

        if (llm_txr_known(t, part, image) != 0) {
            return NULL;
        }

        if (s == NULL) {
            llm_txr_bad(t, "image_url.url", "a string");
            return NULL;
        }

        old = llm_txr_push(t, "image_url");

        if (llm_txr_known(t, v, url) != 0) {
            return NULL;
        }

        block = llm_txr_image(t, s);
        llm_txr_pop(t, old);

        return block;
    }

    if (strcmp(type, "file") != 0) {
        llm_txr_fail(t, "type", "'%s' parts cannot be sent to a backend of "
                     "another dialect", type);
        return NULL;
    }

    v = llm_txr_get(part, "file");

    if (llm_txr_known(t, part, file) != 0) {
        return NULL;
    }

    if (!cJSON_IsObject(v)) {
        llm_txr_bad(t, "file", "an object");
        return NULL;
    }

    old = llm_txr_push(t, "file");

    if (llm_txr_known(t, v, data_) != 0) {
        return NULL;
    }

    s = llm_txr_str(v, "file_data");

    if (s == NULL) {
        llm_txr_foreign(t, "file_data");
        return NULL;
    }

    if (llm_txr_parse_data(s, media, sizeof(media), &data) != 0
        || strcmp(media, "application/pdf") != 0)
    {
        llm_txr_fail(t, "file_data", "only a PDF as a base64 data: URL can "
                     "be sent to a backend of another dialect");
        return NULL;
    }

    llm_txr_pop(t, old);

    block = llm_txr_text(t, "document", NULL);
    src = llm_txr_add(t, block, "source", cJSON_CreateObject());
    llm_txr_add_str(t, src, "type", "base64");
    llm_txr_add_str(t, src, "media_type", media);
    llm_txr_add_str(t, src, "data", data);

    if (t->rc != 0) {
        cJSON_Delete(block);
        return NULL;
    }

    return block;
}


/* an image URL as a Messages image block */

static cJSON *
llm_txr_image(llm_txr_t *t, const char *url)
{
    char         media[LLM_TXR_MEDIA_MAX];
    size_t       i;
    cJSON       *block, *src;
    const char  *data;

    block = llm_txr_text(t, "image", NULL);
    src = llm_txr_add(t, block, "source", cJSON_CreateObject());

    if (strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0) {
        llm_txr_add_str(t, src, "type", "url");
        llm_txr_add_str(t, src, "url", url);

    } else if (llm_txr_parse_data(url, media, sizeof(media), &data) == 0) {
        for (i = 0; llm_txr_images[i]; i++) {
            if (strcmp(media, llm_txr_images[i]) == 0) {
                break;
            }
        }

        if (llm_txr_images[i] == NULL) {
            llm_txr_fail(t, "url", "only JPEG, PNG, GIF and WebP images "
                         "can be sent to a backend of another dialect");
        }

        llm_txr_add_str(t, src, "type", "base64");
        llm_txr_add_str(t, src, "media_type", media);
        llm_txr_add_str(t, src, "data", data);

    } else {
        llm_txr_fail(t, "url", "only an http(s) URL or a base64 data: URL "
                     "can be sent to a backend of another dialect");
    }

    if (t->rc != 0) {
        cJSON_Delete(block);
        return NULL;
    }

    return block;
}


static int
llm_txr_chat_assistant(llm_txr_t *t, const cJSON *msg, llm_txr_conv_t *cv)
{
    int           k;
    size_t        old;
    const cJSON  *content, *part, *calls, *call;
    const char   *type, *s;

    static const char *const  known[] = {
        "role", "content", "tool_calls", "refusal", NULL
    };
    static const char *const  text[] = { "type", "text", NULL };
    static const char *const  refusal[] = { "type", "refusal", NULL };

    if (llm_txr_known(t, msg, known) != 0) {
        return -1;
    }

    content = llm_txr_get(msg, "content");

    if (cJSON_IsString(content)) {
        if (content->valuestring[0] != '\0') {
            llm_txr_conv_block(t, cv, llm_txr_assistant,
                               llm_txr_text(t, "text", content->valuestring));
        }

    } else if (cJSON_IsArray(content)) {
        k = 0;

        cJSON_ArrayForEach(part, content) {
            old = llm_txr_index(t, "content", k++);

            type = llm_txr_str(part, "type");

            if (type == NULL || (strcmp(type, "text") != 0
                                 && strcmp(type, "refusal") != 0))
            {
                return llm_txr_fail(t, "type", "only text and refusal parts "
                                    "of an assistant message can be sent to "
                                    "a backend of another dialect");
            }

            if (llm_txr_known(t, part, type[0] == 't' ? text : refusal)
                != 0)
            {
                return -1;
            }

            s = llm_txr_str(part, type);

            if (s == NULL) {
                return llm_txr_bad(t, type, "a string");
            }

            if (s[0] != '\0') {
                llm_txr_conv_block(t, cv, llm_txr_assistant,
                                   llm_txr_text(t, "text", s));
            }

            if (t->rc != 0) {
                return -1;
            }

            llm_txr_pop(t, old);
        }

    } else if (content != NULL) {
        return llm_txr_bad(t, "content", "a string or an array");
    }

    s = llm_txr_str(msg, "refusal");

    if (llm_txr_get(msg, "refusal") && s == NULL) {
        return llm_txr_bad(t, "refusal", "a string");
    }

    if (s && s[0] != '\0') {
        llm_txr_conv_block(t, cv, llm_txr_assistant,
                           llm_txr_text(t, "text", s));
    }

    calls = llm_txr_get(msg, "tool_calls");

    if (calls && !cJSON_IsArray(calls)) {
        return llm_txr_bad(t, "tool_calls", "an array");
    }

    k = 0;

    cJSON_ArrayForEach(call, calls) {
        old = llm_txr_index(t, "tool_calls", k++);

        if (t->rc != 0
            || llm_txr_conv_block(t, cv, llm_txr_assistant,
                                  llm_txr_chat_tool_use(t, call))
               != 0)
        {
            return -1;
        }

        llm_txr_pop(t, old);
    }

    return t->rc;
}


static cJSON *
llm_txr_chat_tool_use(llm_txr_t *t, const cJSON *call)
{
    size_t        old;
    cJSON        *block, *input;
    const cJSON  *fn;
    const char   *id, *name;

    static const char *const  known[] = { "id", "type", "function", NULL };
    static const char *const  known_fn[] = { "name", "arguments", NULL };

    if (llm_txr_known(t, call, known) != 0) {
        return NULL;
    }

    if (llm_txr_get(call, "type") && !llm_txr_is(call, "type", "function")) {
        llm_txr_foreign(t, "type");
        return NULL;
    }

    id = llm_txr_str(call, "id");
    fn = llm_txr_get(call, "function");
    name = llm_txr_str(fn, "name");

    if (id == NULL) {
        llm_txr_bad(t, "id", "a string");
        return NULL;
    }

    if (llm_txr_tool_id(t, "id", id) != 0) {
        return NULL;
    }

    if (!cJSON_IsObject(fn)) {
        llm_txr_bad(t, "function", "an object");
        return NULL;
    }

    old = llm_txr_push(t, "function");

    if (llm_txr_known(t, fn, known_fn) != 0) {
        return NULL;
    }

    if (name == NULL) {
        llm_txr_bad(t, "name", "a string");
        return NULL;
    }

    input = llm_txr_arguments(t, fn, "arguments");

    if (input == NULL) {
        return NULL;
    }

    llm_txr_pop(t, old);

    block = llm_txr_text(t, "tool_use", NULL);
    llm_txr_add_str(t, block, "id", id);
    llm_txr_add_str(t, block, "name", name);
    llm_txr_add(t, block, "input", input);

    if (t->rc != 0) {
        cJSON_Delete(block);
        return NULL;
    }

    return block;
}


static int
llm_txr_chat_tool(llm_txr_t *t, const cJSON *msg, llm_txr_conv_t *cv)
{
    int           k;
    size_t        old;
    cJSON        *block, *blocks;
    const cJSON  *content, *part;
    const char   *id, *s;

    static const char *const  known[] = {
        "role", "content", "tool_call_id", NULL
    };
    static const char *const  text[] = { "type", "text", NULL };

    if (llm_txr_known(t, msg, known) != 0) {
        return -1;
    }

    id = llm_txr_str(msg, "tool_call_id");
    content = llm_txr_get(msg, "content");

    if (id == NULL) {
        return llm_txr_bad(t, "tool_call_id", "a string");
    }

    if (llm_txr_tool_id(t, "tool_call_id", id) != 0) {
        return -1;
    }

    block = llm_txr_text(t, "tool_result", NULL);
    llm_txr_add_str(t, block, "tool_use_id", id);

    if (cJSON_IsString(content)) {
        llm_txr_add_str(t, block, "content", content->valuestring);

    } else if (cJSON_IsArray(content)) {
        blocks = llm_txr_add(t, block, "content", cJSON_CreateArray());
        k = 0;

        cJSON_ArrayForEach(part, content) {
            old = llm_txr_index(t, "content", k++);

            s = llm_txr_str(part, "text");

            if (!llm_txr_is(part, "type", "text")) {
                llm_txr_fail(t, "type", "only text parts of a tool message "
                             "can be sent to a backend of another dialect");

            } else if (llm_txr_known(t, part, text) == 0 && s == NULL) {
                llm_txr_bad(t, "text", "a string");

            } else if (s && s[0] != '\0') {
                llm_txr_add(t, blocks, NULL, llm_txr_text(t, "text", s));
            }

            if (t->rc != 0) {
                cJSON_Delete(block);
                return -1;
            }

            llm_txr_pop(t, old);
        }

    } else if (content != NULL) {
        cJSON_Delete(block);
        return llm_txr_bad(t, "content", "a string or an array");
    }

    if (t->rc != 0) {
        cJSON_Delete(block);
        return -1;
    }

    return llm_txr_conv_block(t, cv, llm_txr_user, block);
}


static int
llm_txr_chat_tools(llm_txr_t *t, const cJSON *in, cJSON *root)
{
    int           i;
    size_t        old;
    cJSON        *tools, *tool, *schema;
    const cJSON  *list, *v, *fn, *params;
    const char   *name, *desc;

    static const char *const  known[] = { "type", "function", NULL };
    static const char *const  known_fn[] = {
        "name", "description", "parameters", "strict", NULL
    };

    list = llm_txr_get(in, "tools");

    if (list && !cJSON_IsArray(list)) {
        return llm_txr_bad(t, "tools", "an array");
    }

    if (list == NULL || list->child == NULL) {
        return 0;
    }

    tools = llm_txr_add(t, root, "tools", cJSON_CreateArray());
    i = 0;

    cJSON_ArrayForEach(v, list) {
        old = llm_txr_index(t, "tools", i++);

        if (!llm_txr_is(v, "type", "function")) {
            return llm_txr_fail(t, "type", "only function tools can be sent "
                                "to a backend of another dialect");
        }

        if (llm_txr_known(t, v, known) != 0) {
            return -1;
        }

        fn = llm_txr_get(v, "function");
        name = llm_txr_str(fn, "name");
        desc = llm_txr_str(fn, "description");
        params = llm_txr_get(fn, "parameters");

        llm_txr_push(t, "function");

        if (llm_txr_known(t, fn, known_fn) != 0) {
            return -1;
        }

        if (name == NULL) {
            return llm_txr_bad(t, "name", "a string");
        }

        if (params && !cJSON_IsObject(params)) {
            return llm_txr_bad(t, "parameters", "an object");
        }

        tool = llm_txr_add(t, tools, NULL, cJSON_CreateObject());
        llm_txr_add_str(t, tool, "name", name);

        if (desc) {
            llm_txr_add_str(t, tool, "description", desc);
        }

        if (params) {
            schema = llm_txr_add_dup(t, tool, "input_schema", params);

            /* Messages requires the type OpenAI takes as implied */
            if (schema && llm_txr_get(schema, "type") == NULL) {
                cJSON_DeleteItemFromObjectCaseSensitive(schema, "type");
                llm_txr_add_str(t, schema, "type", "object");
            }

        } else {
            schema = llm_txr_add(t, tool, "input_schema",
                                 cJSON_CreateObject());
            llm_txr_add_str(t, schema, "type", "object");
            llm_txr_add(t, schema, "properties", cJSON_CreateObject());
        }

        if (t->rc != 0) {
            return -1;
        }

        llm_txr_pop(t, old);
    }

    return llm_txr_chat_choice(t, in, root);
}


static int
llm_txr_chat_choice(llm_txr_t *t, const cJSON *in, cJSON *root)
{
    cJSON        *tc;
    const cJSON  *v;
    const char   *s, *type;

    static const char *const  known[] = { "type", "function", NULL };
    static const char *const  known_fn[] = { "name", NULL };

    v = llm_txr_get(in, "tool_choice");
    type = "auto";
    s = NULL;

    if (cJSON_IsString(v)) {
        type = v->valuestring;
        type = strcmp(type, "auto") == 0 ? "auto"
               : strcmp(type, "none") == 0 ? "none"
               : strcmp(type, "required") == 0 ? "any" : NULL;

        if (type == NULL) {
            return llm_txr_bad(t, "tool_choice",
                               "'auto', 'none', 'required' or a function");
        }

    } else if (v) {
        s = llm_txr_str(llm_txr_get(v, "function"), "name");

        if (!llm_txr_is(v, "type", "function") || s == NULL) {
            return llm_txr_bad(t, "tool_choice",
                               "'auto', 'none', 'required' or a function");
        }

        llm_txr_push(t, "tool_choice");

        if (llm_txr_known(t, v, known) != 0) {
            return -1;
        }

        llm_txr_push(t, "function");

        if (llm_txr_known(t, llm_txr_get(v, "function"), known_fn) != 0) {
            return -1;
        }

        llm_txr_pop(t, 0);
        type = "tool";
    }

    v = llm_txr_get(in, "parallel_tool_calls");

    if (llm_txr_get(in, "tool_choice") == NULL && !cJSON_IsFalse(v)) {
        return 0;
    }

    tc = llm_txr_add(t, root, "tool_choice", cJSON_CreateObject());
    llm_txr_add_str(t, tc, "type", type);

    if (s) {
        llm_txr_add_str(t, tc, "name", s);
    }

    if (cJSON_IsFalse(v) && strcmp(type, "none") != 0) {
        llm_txr_add(t, tc, "disable_parallel_tool_use", cJSON_CreateTrue());
    }

    return t->rc;
}


static int
llm_txr_chat_options(llm_txr_t *t, const cJSON *in, cJSON *root)
{
    int           i;
    size_t        old;
    cJSON        *stop, *md;
    const cJSON  *v, *s;
    const char   *user;

    v = llm_txr_get(in, "stop");

    if (v && !cJSON_IsString(v) && !cJSON_IsArray(v)) {
        return llm_txr_bad(t, "stop", "a string or an array");
    }

    /* an empty sequence stops nothing, and Messages refuses it */
    stop = NULL;
    i = 0;

    for (s = cJSON_IsArray(v) ? v->child : v; s; s = s->next) {
        old = llm_txr_index(t, "stop", i++);

        if (!cJSON_IsString(s)) {
            return llm_txr_bad(t, NULL, "a string");
        }

        if (s->valuestring[0] != '\0') {
            if (stop == NULL) {
                stop = llm_txr_add(t, root, "stop_sequences",
                                   cJSON_CreateArray());
            }

            llm_txr_add_str(t, stop, NULL, s->valuestring);
        }

        llm_txr_pop(t, old);

        if (v == s) {
            break;
        }
    }

    if (llm_txr_number(t, in, root, "temperature", 1) != 0
        || llm_txr_number(t, in, root, "top_p", 1) != 0)
    {
        return -1;
    }

    user = llm_txr_str(in, "user");

    if (llm_txr_get(in, "user") && user == NULL) {
        return llm_txr_bad(t, "user", "a string");
    }

    if (user) {
        md = llm_txr_add(t, root, "metadata", cJSON_CreateObject());
        llm_txr_add_str(t, md, "user_id", user);
    }

    if (t->rc != 0) {
        return -1;
    }

    return llm_txr_stream(t, in, root, 0);
}


/* Messages -> Chat Completions */

static int
llm_txr_from_messages(llm_txr_t *t, const cJSON *in, cJSON *root)
{
    int           i;
    size_t        old;
    cJSON        *msgs;
    const cJSON  *list, *msg;
    const char   *role;

    static const char *const  known[] = { "role", "content", NULL };

    if (llm_txr_msg_check(t, in) != 0 || llm_txr_model(t, in, root) != 0) {
        return -1;
    }

    list = llm_txr_get(in, "messages");

    if (!cJSON_IsArray(list)) {
        return llm_txr_bad(t, "messages", "an array");
    }

    msgs = llm_txr_add(t, root, "messages", cJSON_CreateArray());

    if (llm_txr_msg_system(t, in, msgs) != 0) {
        return -1;
    }

    i = 0;

    cJSON_ArrayForEach(msg, list) {
        old = llm_txr_index(t, "messages", i++);

        role = llm_txr_str(msg, "role");

        if (!cJSON_IsObject(msg)) {
            return llm_txr_bad(t, NULL, "an object");
        }

        if (llm_txr_known(t, msg, known) != 0) {
            return -1;
        }

        if (role && strcmp(role, "user") == 0) {
            (void) llm_txr_msg_user(t, msg, msgs);

        } else if (role && strcmp(role, "assistant") == 0) {
            (void) llm_txr_msg_assistant(t, msg, msgs);

        } else {
            return llm_txr_bad(t, "role", "'user' or 'assistant'");
        }

        if (t->rc != 0) {
            return -1;
        }

        llm_txr_pop(t, old);
    }

    if (llm_txr_chat_limit(t, root) != 0
        || llm_txr_msg_tools(t, in, root) != 0
        || llm_txr_msg_options(t, in, root) != 0)
    {
        return -1;
    }

    return t->rc;
}


static int
llm_txr_msg_check(llm_txr_t *t, const cJSON *in)
{
    const cJSON  *v;

    static const char *const  metadata[] = { "user_id", NULL };
    static const char *const  thinking[] = { "type", NULL };

    if (llm_txr_known(t, in, llm_txr_msg_known) != 0) {
        return -1;
    }

    v = llm_txr_get(in, "thinking");

    if (v) {
        if (!llm_txr_is(v, "type", "disabled")) {
            return llm_txr_foreign(t, "thinking");
        }

        llm_txr_push(t, "thinking");

        if (llm_txr_known(t, v, thinking) != 0) {
            return -1;
        }

        llm_txr_pop(t, 0);
    }

    v = llm_txr_get(in, "service_tier");

    if (v && !(cJSON_IsString(v) && strcmp(v->valuestring, "auto") == 0)) {
        return llm_txr_foreign(t, "service_tier");
    }

    v = llm_txr_get(in, "metadata");

    if (v) {
        if (!cJSON_IsObject(v)) {
            return llm_txr_bad(t, "metadata", "an object");
        }

        llm_txr_push(t, "metadata");

        if (llm_txr_known(t, v, metadata) != 0) {
            return -1;
        }

        if (llm_txr_get(v, "user_id") && !llm_txr_str(v, "user_id")) {
            return llm_txr_bad(t, "user_id", "a string");
        }

        llm_txr_pop(t, 0);
    }

    return 0;
}


static int
llm_txr_msg_system(llm_txr_t *t, const cJSON *in, cJSON *msgs)
{
    int           k;
    size_t        old;
    cJSON        *m, *parts;
    const cJSON  *sys, *block;
    const char   *s;

    static const char *const  text[] = {
        "type", "text", "cache_control", NULL
    };

    sys = llm_txr_get(in, "system");

    /* OpenAI refuses a message of no parts */
    if (sys == NULL || (cJSON_IsArray(sys) && sys->child == NULL)) {
        return 0;
    }

    if (!cJSON_IsString(sys) && !cJSON_IsArray(sys)) {
        return llm_txr_bad(t, "system", "a string or an array");
    }

    m = llm_txr_add(t, msgs, NULL, cJSON_CreateObject());
    llm_txr_add_str(t, m, "role", "system");

    if (cJSON_IsString(sys)) {
        llm_txr_add_str(t, m, "content", sys->valuestring);
        return t->rc;
    }

    parts = llm_txr_add(t, m, "content", cJSON_CreateArray());
    k = 0;

    cJSON_ArrayForEach(block, sys) {
        old = llm_txr_index(t, "system", k++);

        s = llm_txr_str(block, "text");

        if (!llm_txr_is(block, "type", "text")) {
            return llm_txr_bad(t, "type", "'text'");
        }

        if (llm_txr_known(t, block, text) != 0) {
            return -1;
        }

        if (s == NULL) {
            return llm_txr_bad(t, "text", "a string");
        }

        llm_txr_add(t, parts, NULL, llm_txr_text(t, "text", s));
        llm_txr_pop(t, old);
    }

    return t->rc;
}


/* a user message: its tool results first, each a tool message, then it */

static int
llm_txr_msg_user(llm_txr_t *t, const cJSON *msg, cJSON *msgs)
{
    int           k;
    size_t        old;
    cJSON        *parts, *part, *m;
    const cJSON  *content, *block;

    content = llm_txr_get(msg, "content");

    if (cJSON_IsString(content)) {
        m = llm_txr_add(t, msgs, NULL, cJSON_CreateObject());
        llm_txr_add_str(t, m, "role", "user");
        llm_txr_add_str(t, m, "content", content->valuestring);
        return t->rc;
    }

    if (!cJSON_IsArray(content)) {
        return llm_txr_bad(t, "content", "a string or an array");
    }

    k = 0;

    cJSON_ArrayForEach(block, content) {
        old = llm_txr_index(t, "content", k++);

        if (llm_txr_is(block, "type", "tool_result")
            && llm_txr_msg_result(t, block, msgs) != 0)
        {
            return -1;
        }

        llm_txr_pop(t, old);
    }

    parts = cJSON_CreateArray();

    if (parts == NULL) {
        return llm_txr_oom(t);
    }

    k = 0;

    cJSON_ArrayForEach(block, content) {
        old = llm_txr_index(t, "content", k++);

        if (!llm_txr_is(block, "type", "tool_result")) {
            part = llm_txr_msg_part(t, block);
            llm_txr_add(t, parts, NULL, part);
        }

        if (t->rc != 0) {
            cJSON_Delete(parts);
            return -1;
        }

        llm_txr_pop(t, old);
    }

    if (parts->child == NULL) {
        cJSON_Delete(parts);
        return 0;
    }

    m = llm_txr_add(t, msgs, NULL, cJSON_CreateObject());
    llm_txr_add_str(t, m, "role", "user");

    if (m == NULL) {
        cJSON_Delete(parts);
        return -1;
    }

    llm_txr_add(t, m, "content", parts);

    return t->rc;
}


static int
llm_txr_msg_result(llm_txr_t *t, const cJSON *block, cJSON *msgs)
{
    char         *s;
    size_t        old;
    cJSON        *m;
    const cJSON  *content;
    const char   *id;

    static const char *const  known[] = {
        "type", "tool_use_id", "content", "is_error", "cache_control", NULL
    };

    if (llm_txr_known(t, block, known) != 0) {
        return -1;
    }

    id = llm_txr_str(block, "tool_use_id");
    content = llm_txr_get(block, "content");

    if (id == NULL) {
        return llm_txr_bad(t, "tool_use_id", "a string");
    }

    m = llm_txr_add(t, msgs, NULL, cJSON_CreateObject());
    llm_txr_add_str(t, m, "role", "tool");
    llm_txr_add_str(t, m, "tool_call_id", id);

    if (content == NULL) {
        llm_txr_add_str(t, m, "content", "");

    } else if (cJSON_IsString(content)) {
        llm_txr_add_str(t, m, "content", content->valuestring);

    } else if (cJSON_IsArray(content)) {
        old = llm_txr_push(t, "content");

        s = llm_txr_texts(t, content, "\n", 0);

        if (s == NULL) {
            return -1;
        }

        llm_txr_pop(t, old);
        llm_txr_add_str(t, m, "content", s);
        cJSON_free(s);

    } else {
        return llm_txr_bad(t, "content", "a string or an array");
    }

    return t->rc;
}


/* a user's block as a Chat part */

static cJSON *
llm_txr_msg_part(llm_txr_t *t, const cJSON *block)
{
    char         *url;
    size_t        old;
    cJSON        *part, *v;
    const cJSON  *src;
    const char   *type, *s, *media;

    static const char *const  text[] = {
        "type", "text", "cache_control", NULL
    };
    static const char *const  known[] = {
        "type", "source", "cache_control", NULL
    };
    static const char *const  base64[] = {
        "type", "media_type", "data", NULL
    };
    static const char *const  link[] = { "type", "url", NULL };

    type = llm_txr_str(block, "type");

    if (type && strcmp(type, "text") == 0) {
        s = llm_txr_str(block, "text");

        if (llm_txr_known(t, block, text) != 0) {
            return NULL;
        }

        if (s == NULL) {
            llm_txr_bad(t, "text", "a string");
            return NULL;
        }

        return llm_txr_text(t, "text", s);
    }

    if (type == NULL
        || (strcmp(type, "image") != 0 && strcmp(type, "document") != 0))
    {
        llm_txr_fail(t, "type", "'%s' blocks cannot be sent to a backend of "
                     "another dialect", type ? type : "untyped");
        return NULL;
    }

    src = llm_txr_get(block, "source");

    if (llm_txr_known(t, block, known) != 0) {
        return NULL;
    }

    old = llm_txr_push(t, "source");

    media = llm_txr_str(src, "media_type");
    s = llm_txr_str(src, llm_txr_is(src, "type", "url") ? "url" : "data");

    if (llm_txr_is(src, "type", "url") && type[0] == 'i') {
        if (llm_txr_known(t, src, link) != 0) {
            return NULL;
        }

        if (s == NULL) {
            llm_txr_bad(t, "url", "a string");
            return NULL;
        }

        url = NULL;

    } else if (llm_txr_is(src, "type", "base64")
               && (type[0] == 'i' || llm_txr_is(src, "media_type",
                                                "application/pdf")))
    {
        if (llm_txr_known(t, src, base64) != 0) {
            return NULL;
        }

        if (media == NULL || s == NULL) {
            llm_txr_bad(t, media ? "data" : "media_type", "a string");
            return NULL;
        }

        url = llm_txr_data_url(t, media, s);

        if (url == NULL) {
            return NULL;
        }

        s = url;

    } else {
        llm_txr_fail(t, "type", "this source of %s cannot be sent to a "
                     "backend of another dialect",
                     type[0] == 'i' ? "an image" : "a document");
        return NULL;
    }

    llm_txr_pop(t, old);

    part = llm_txr_text(t, type[0] == 'i' ? "image_url" : "file", NULL);
    v = llm_txr_add(t, part, type[0] == 'i' ? "image_url" : "file",
                    cJSON_CreateObject());

    if (type[0] == 'i') {
        llm_txr_add_str(t, v, "url", s);

    } else {
        llm_txr_add_str(t, v, "filename", "document.pdf");
        llm_txr_add_str(t, v, "file_data", s);
    }

    cJSON_free(url);

    if (t->rc != 0) {
        cJSON_Delete(part);
        return NULL;
    }

    return part;
}


static int
llm_txr_msg_assistant(llm_txr_t *t, const cJSON *msg, cJSON *msgs)
{
    int           k;
    char         *s, *args;
    size_t        old;
    cJSON        *m, *calls, *call, *fn;
    const cJSON  *content, *block, *input;
    const char   *id, *name;

    static const char *const  known[] = {
        "type", "id", "name", "input", "cache_control", NULL
    };

    content = llm_txr_get(msg, "content");
    m = llm_txr_add(t, msgs, NULL, cJSON_CreateObject());
    llm_txr_add_str(t, m, "role", "assistant");

    if (cJSON_IsString(content)) {
        llm_txr_add_str(t, m, "content", content->valuestring);
        return t->rc;
    }

    if (!cJSON_IsArray(content)) {
        return llm_txr_bad(t, "content", "a string or an array");
    }

    /* the texts; any block but text and tool_use is refused there */
    old = llm_txr_push(t, "content");

    s = llm_txr_texts(t, content, "", 1);

    if (s == NULL) {
        return -1;
    }

    llm_txr_pop(t, old);

    /* null is for a message of tool calls alone */
    cJSON_ArrayForEach(block, content) {
        if (llm_txr_is(block, "type", "tool_use")) {
            break;
        }
    }

    llm_txr_add(t, m, "content", (s[0] || block == NULL)
                                 ? cJSON_CreateString(s) : cJSON_CreateNull());
    cJSON_free(s);

    calls = NULL;
    k = 0;

    cJSON_ArrayForEach(block, content) {
        old = llm_txr_index(t, "content", k++);

        if (!llm_txr_is(block, "type", "tool_use")) {
            llm_txr_pop(t, old);
            continue;
        }

        if (llm_txr_known(t, block, known) != 0) {
            return -1;
        }

        id = llm_txr_str(block, "id");
        name = llm_txr_str(block, "name");
        input = llm_txr_get(block, "input");

        if (id == NULL || name == NULL) {
            return llm_txr_bad(t, id ? "name" : "id", "a string");
        }

        if (input && !cJSON_IsObject(input)) {
            return llm_txr_bad(t, "input", "an object");
        }

        args = input ? llm_tx_print(input) : NULL;

        if (input && args == NULL) {
            return llm_txr_oom(t);
        }

        if (calls == NULL) {
            calls = llm_txr_add(t, m, "tool_calls", cJSON_CreateArray());
        }

        call = llm_txr_add(t, calls, NULL, cJSON_CreateObject());
        llm_txr_add_str(t, call, "id", id);
        llm_txr_add_str(t, call, "type", "function");
        fn = llm_txr_add(t, call, "function", cJSON_CreateObject());
        llm_txr_add_str(t, fn, "name", name);
        llm_txr_add_str(t, fn, "arguments", args ? args : "{}");
        cJSON_free(args);

        if (t->rc != 0) {
            return -1;
        }

        llm_txr_pop(t, old);
    }

    return t->rc;
}


static int
llm_txr_msg_tools(llm_txr_t *t, const cJSON *in, cJSON *root)
{
    int           i;
    size_t        old;
    cJSON        *tools, *tool, *fn;
    const cJSON  *list, *v, *tc, *schema;
    const char   *name, *desc, *type;

    /* eager_input_streaming: how soon the arguments stream, not what */
    static const char *const  known[] = {
        "type", "name", "description", "input_schema", "cache_control",
        "eager_input_streaming", NULL
    };
    static const char *const  known_tc[] = {
        "type", "name", "disable_parallel_tool_use", NULL
    };

    list = llm_txr_get(in, "tools");

    if (list && !cJSON_IsArray(list)) {
        return llm_txr_bad(t, "tools", "an array");
    }

    if (list == NULL || list->child == NULL) {
        return 0;
    }

    tools = llm_txr_add(t, root, "tools", cJSON_CreateArray());
    i = 0;

    cJSON_ArrayForEach(v, list) {
        old = llm_txr_index(t, "tools", i++);

        if (llm_txr_get(v, "type") && !llm_txr_is(v, "type", "custom")) {
            return llm_txr_fail(t, "type", "server tools cannot be sent to "
                                "a backend of another dialect");
        }

        if (llm_txr_known(t, v, known) != 0) {
            return -1;
        }

        name = llm_txr_str(v, "name");
        desc = llm_txr_str(v, "description");
        schema = llm_txr_get(v, "input_schema");

        if (name == NULL) {
            return llm_txr_bad(t, "name", "a string");
        }

        if (!cJSON_IsObject(schema)) {
            return llm_txr_bad(t, "input_schema", "an object");
        }

        tool = llm_txr_add(t, tools, NULL, cJSON_CreateObject());
        llm_txr_add_str(t, tool, "type", "function");
        fn = llm_txr_add(t, tool, "function", cJSON_CreateObject());
        llm_txr_add_str(t, fn, "name", name);

        if (desc) {
            llm_txr_add_str(t, fn, "description", desc);
        }

        llm_txr_add_dup(t, fn, "parameters", schema);

        if (t->rc != 0) {
            return -1;
        }

        llm_txr_pop(t, old);
    }

    tc = llm_txr_get(in, "tool_choice");

    if (tc == NULL) {
        return 0;
    }

    type = llm_txr_str(tc, "type");
    name = llm_txr_str(tc, "name");

    if (type == NULL
        || (strcmp(type, "tool") == 0 ? name == NULL
            : strcmp(type, "auto") != 0 && strcmp(type, "any") != 0
              && strcmp(type, "none") != 0))
    {
        return llm_txr_bad(t, "tool_choice",
                           "'auto', 'any', 'tool' with a name or 'none'");
    }

    llm_txr_push(t, "tool_choice");

    if (llm_txr_known(t, tc, known_tc) != 0) {
        return -1;
    }

    llm_txr_pop(t, 0);

    if (strcmp(type, "tool") == 0) {
        tool = llm_txr_add(t, root, "tool_choice", cJSON_CreateObject());
        llm_txr_add_str(t, tool, "type", "function");
        fn = llm_txr_add(t, tool, "function", cJSON_CreateObject());
        llm_txr_add_str(t, fn, "name", name);

    } else {
        llm_txr_add_str(t, root, "tool_choice",
                        type[1] == 'n' ? "required" : type);
    }

    if (cJSON_IsTrue(llm_txr_get(tc, "disable_parallel_tool_use"))) {
        llm_txr_add(t, root, "parallel_tool_calls", cJSON_CreateFalse());
    }

    return t->rc;
}


static int
llm_txr_msg_options(llm_txr_t *t, const cJSON *in, cJSON *root)
{
    int           i;
    size_t        old;
    const cJSON  *v, *s;

    v = llm_txr_get(in, "stop_sequences");

    if (v && !cJSON_IsArray(v)) {
        return llm_txr_bad(t, "stop_sequences", "an array");
    }

    i = 0;

    cJSON_ArrayForEach(s, v) {
        old = llm_txr_index(t, "stop_sequences", i++);

        if (!cJSON_IsString(s)) {
            return llm_txr_bad(t, NULL, "a string");
        }

        llm_txr_pop(t, old);
    }

    if (i > LLM_TXR_STOP_MAX) {
        return llm_txr_fail(t, "stop_sequences", "more than 4 stop sequences "
                            "cannot be sent to a backend of another "
                            "dialect");
    }

    if (i > 0) {
        llm_txr_add_dup(t, root, "stop", v);
    }

    if (llm_txr_number(t, in, root, "temperature", 1) != 0
        || llm_txr_number(t, in, root, "top_p", 1) != 0)
    {
        return -1;
    }

    v = llm_txr_get(llm_txr_get(in, "metadata"), "user_id");

    if (v) {
        llm_txr_add_str(t, root, "user", v->valuestring);
    }

    if (t->rc != 0) {
        return -1;
    }

    return llm_txr_stream(t, in, root, 1);
}


/* Responses -> Chat Completions */

static int
llm_txr_from_responses(llm_txr_t *t, const cJSON *in, cJSON *root)
{
    cJSON        *msgs;
    const cJSON  *v;
    const char   *user;

    if (llm_txr_resp_check(t, in) != 0 || llm_txr_model(t, in, root) != 0) {
        return -1;
    }

    msgs = llm_txr_add(t, root, "messages", cJSON_CreateArray());

    if (msgs == NULL || llm_txr_resp_input(t, in, msgs) != 0
        || llm_txr_chat_limit(t, root) != 0
        || llm_txr_resp_tools(t, in, root) != 0)
    {
        return -1;
    }

    v = llm_txr_get(in, "parallel_tool_calls");

    if (v && !cJSON_IsBool(v)) {
        return llm_txr_bad(t, "parallel_tool_calls", "a boolean");
    }

    if (cJSON_IsFalse(v) && llm_txr_get(root, "tools")) {
        llm_txr_add(t, root, "parallel_tool_calls", cJSON_CreateFalse());
    }

    /* Messages' range, named here rather than in the Chat body */
    if (llm_txr_number(t, in, root, "temperature",
                       t->cf->to == LLM_API_ANTHROPIC ? 1 : 2) != 0
        || llm_txr_number(t, in, root, "top_p", 1) != 0)
    {
        return -1;
    }

    user = llm_txr_str(in, "user");

    if (llm_txr_get(in, "user") && user == NULL) {
        return llm_txr_bad(t, "user", "a string");
    }

    if (user) {
        llm_txr_add_str(t, root, "user", user);
    }

    if (t->rc != 0) {
        return -1;
    }

    return llm_txr_stream(t, in, root, 1);
}


static int
llm_txr_resp_check(llm_txr_t *t, const cJSON *in)
{
    const cJSON  *v, *f;

    static const char *const  text[] = { "format", NULL };

    if (llm_txr_known(t, in, llm_txr_resp_known) != 0) {
        return -1;
    }

    v = llm_txr_get(in, "text");

    if (v) {
        llm_txr_push(t, "text");

        if (!cJSON_IsObject(v)) {
            return llm_txr_bad(t, NULL, "an object");
        }

        if (llm_txr_known(t, v, text) != 0) {
            return -1;
        }

        f = llm_txr_get(v, "format");

        if (f && !(llm_txr_is(f, "type", "text")
                   && cJSON_GetArraySize(f) == 1))
        {
            return llm_txr_foreign(t, "format");
        }

        llm_txr_pop(t, 0);
    }

    v = llm_txr_get(in, "include");

    if (v && !(cJSON_IsArray(v) && v->child == NULL)) {
        return llm_txr_foreign(t, "include");
    }

    v = llm_txr_get(in, "truncation");

    if (v && !(cJSON_IsString(v) && strcmp(v->valuestring, "disabled") == 0))
    {
        return llm_txr_foreign(t, "truncation");
    }

    v = llm_txr_get(in, "background");

    if (v && !cJSON_IsFalse(v)) {
        return llm_txr_foreign(t, "background");
    }

    v = llm_txr_get(in, "service_tier");

    if (v && !(cJSON_IsString(v) && strcmp(v->valuestring, "auto") == 0)) {
        return llm_txr_foreign(t, "service_tier");
    }

    v = llm_txr_get(in, "store");

    if (v && !cJSON_IsBool(v)) {
        return llm_txr_bad(t, "store", "a boolean");
    }

    v = llm_txr_get(in, "stream_options");

    if (v && !cJSON_IsObject(v)) {
        return llm_txr_bad(t, "stream_options", "an object");
    }

    return 0;
}


static int
llm_txr_resp_input(llm_txr_t *t, const cJSON *in, cJSON *msgs)
{
    int           k;
    size_t        old;
    cJSON        *m, *asst;
    const cJSON  *v, *item;
    const char   *type;

    v = llm_txr_get(in, "instructions");

    if (v && !cJSON_IsString(v)) {
        return llm_txr_bad(t, "instructions", "a string");
    }

    if (v) {
        m = llm_txr_add(t, msgs, NULL, cJSON_CreateObject());
        llm_txr_add_str(t, m, "role", "system");
        llm_txr_add_str(t, m, "content", v->valuestring);
    }

    v = llm_txr_get(in, "input");

    if (cJSON_IsString(v)) {
        m = llm_txr_add(t, msgs, NULL, cJSON_CreateObject());
        llm_txr_add_str(t, m, "role", "user");
        llm_txr_add_str(t, m, "content", v->valuestring);
        return t->rc;
    }

    if (!cJSON_IsArray(v)) {
        return llm_txr_bad(t, "input", "a string or an array");
    }

    asst = NULL;
    k = 0;

    cJSON_ArrayForEach(item, v) {
        old = llm_txr_index(t, "input", k++);

        if (!cJSON_IsObject(item)) {
            return llm_txr_bad(t, NULL, "an object");
        }

        type = llm_txr_str(item, "type");

        if (type == NULL && llm_txr_get(item, "type") == NULL
            && llm_txr_get(item, "role"))
        {
            type = "message";
        }

        if (type && strcmp(type, "message") == 0) {
            (void) llm_txr_resp_message(t, item, msgs, &asst);

        } else if (type && strcmp(type, "function_call") == 0) {
            (void) llm_txr_resp_call(t, item, msgs, &asst);

        } else if (type && strcmp(type, "function_call_output") == 0) {
            (void) llm_txr_resp_output(t, item, msgs);
            asst = NULL;

        } else {
            return llm_txr_fail(t, "type", "'%s' items cannot be sent to a "
                                "backend of another dialect",
                                type ? type : "untyped");
        }

        if (t->rc != 0) {
            return -1;
        }

        llm_txr_pop(t, old);
    }

    return t->rc;
}


static int
llm_txr_resp_message(llm_txr_t *t, const cJSON *item, cJSON *msgs,
    cJSON **asst)
{
    int           k, user;
    size_t        old;
    cJSON        *m, *parts;
    const cJSON  *content, *part;
    const char   *role;

    static const char *const  known[] = {
        "type", "role", "content", "id", "status", NULL
    };

    if (llm_txr_known(t, item, known) != 0) {
        return -1;
    }

    role = llm_txr_str(item, "role");
    content = llm_txr_get(item, "content");

    if (role == NULL
        || (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0
            && strcmp(role, "system") != 0 && strcmp(role, "developer") != 0))
    {
        return llm_txr_bad(t, "role",
                           "'user', 'assistant', 'system' or 'developer'");
    }

    if (!cJSON_IsString(content) && !cJSON_IsArray(content)) {
        return llm_txr_bad(t, "content", "a string or an array");
    }

    m = llm_txr_add(t, msgs, NULL, cJSON_CreateObject());
    llm_txr_add_str(t, m, "role", role);

    *asst = (strcmp(role, "assistant") == 0) ? m : NULL;

    if (cJSON_IsString(content)) {
        llm_txr_add_str(t, m, "content", content->valuestring);
        return t->rc;
    }

    parts = llm_txr_add(t, m, "content", cJSON_CreateArray());
    user = (strcmp(role, "user") == 0);
    k = 0;

    cJSON_ArrayForEach(part, content) {
        old = llm_txr_index(t, "content", k++);

        llm_txr_add(t, parts, NULL, llm_txr_resp_part(t, part, user));

        if (t->rc != 0) {
            return -1;
        }

        llm_txr_pop(t, old);
    }

    return t->rc;
}


/* a content part as Chat's; images and files in user messages only */

static cJSON *
llm_txr_resp_part(llm_txr_t *t, const cJSON *part, int user)
{
    cJSON        *p, *v;
    const char   *type, *s, *d;

    static const char *const  text[] = { "type", "text", NULL };
    static const char *const  output[] = {
        "type", "text", "annotations", "logprobs", NULL
    };
    static const char *const  refusal[] = { "type", "refusal", NULL };
    static const char *const  image[] = {
        "type", "image_url", "detail", NULL
    };
    static const char *const  file[] = {
        "type", "file_data", "filename", NULL
    };

    type = llm_txr_str(part, "type");

    if (type == NULL) {
        llm_txr_bad(t, "type", "a string");
        return NULL;
    }

    if (strcmp(type, "input_text") == 0 || strcmp(type, "output_text") == 0
        || strcmp(type, "refusal") == 0)
    {
        s = llm_txr_str(part, type[0] == 'r' ? "refusal" : "text");

        if (llm_txr_known(t, part, type[0] == 'r' ? refusal
                                   : type[0] == 'o' ? output : text)
            != 0)
        {
            return NULL;
        }

        if (s == NULL) {
            llm_txr_bad(t, type[0] == 'r' ? "refusal" : "text", "a string");
            return NULL;
        }

        return llm_txr_text(t, "text", s);
    }

    if (!user
        || (strcmp(type, "input_image") != 0
            && strcmp(type, "input_file") != 0))
    {
        llm_txr_fail(t, "type", "'%s' parts cannot be sent to a backend of "
                     "another dialect", type);
        return NULL;
    }

    s = llm_txr_str(part, type[6] == 'i' ? "image_url" : "file_data");

    if (llm_txr_known(t, part, type[6] == 'i' ? image : file) != 0) {
        return NULL;
    }

    if (s == NULL) {
        llm_txr_foreign(t, type[6] == 'i' ? "image_url" : "file_data");
        return NULL;
    }

    if (t->cf->to == LLM_API_ANTHROPIC
        && llm_txr_resp_url(t, type[6] == 'i' ? "image_url" : "file_data",
                            s, type[6] == 'i')
           != 0)
    {
        return NULL;
    }

    p = llm_txr_text(t, type[6] == 'i' ? "image_url" : "file", NULL);
    v = llm_txr_add(t, p, type[6] == 'i' ? "image_url" : "file",
                    cJSON_CreateObject());

    if (type[6] == 'i') {
        llm_txr_add_str(t, v, "url", s);

        /* Chat's too: it decides what the image costs */
        d = llm_txr_str(part, "detail");

        if (llm_txr_get(part, "detail")
            && (d == NULL || (strcmp(d, "low") != 0 && strcmp(d, "high") != 0
                              && strcmp(d, "auto") != 0)))
        {
            llm_txr_bad(t, "detail", "one of 'low', 'high', 'auto'");
            cJSON_Delete(p);
            return NULL;
        }

        if (d) {
            llm_txr_add_str(t, v, "detail", d);
        }

    } else {
        if (llm_txr_str(part, "filename")) {
            llm_txr_add_str(t, v, "filename", llm_txr_str(part, "filename"));
        }

        llm_txr_add_str(t, v, "file_data", s);
    }

    if (t->rc != 0) {
        cJSON_Delete(p);
        return NULL;
    }

    return p;
}


/*
 * What Messages takes of an image or a file, said in the client's terms
 * rather than in those of the Chat body the second step reads.
 */

static int
llm_txr_resp_url(llm_txr_t *t, const char *member, const char *url,
    int image)
{
    char         media[LLM_TXR_MEDIA_MAX];
    size_t       i;
    const char  *data;

    if (image
        && (strncmp(url, "http://", 7) == 0
            || strncmp(url, "https://", 8) == 0))
    {
        return 0;
    }

    if (llm_txr_parse_data(url, media, sizeof(media), &data) != 0) {
        return llm_txr_fail(t, member, "only %s can be sent to a backend of "
                            "another dialect",
                            image ? "an http(s) URL or a base64 data: URL"
                                  : "a PDF as a base64 data: URL");
    }

    for (i = 0; image && llm_txr_images[i]; i++) {
        if (strcmp(media, llm_txr_images[i]) == 0) {
            return 0;
        }
    }

    if (!image && strcmp(media, "application/pdf") == 0) {
        return 0;
    }

    return llm_txr_fail(t, member, "only %s can be sent to a backend of "
                        "another dialect",
                        image ? "JPEG, PNG, GIF and WebP images"
                              : "a PDF as a base64 data: URL");
}


/* a function call: a tool call of the assistant message before, or a new */

static int
llm_txr_resp_call(llm_txr_t *t, const cJSON *item, cJSON *msgs,
    cJSON **asst)
{
    cJSON        *calls, *call, *fn, *input;
    const char   *id, *name, *args;

    static const char *const  known[] = {
        "type", "call_id", "name", "arguments", "id", "status", NULL
    };

    if (llm_txr_known(t, item, known) != 0) {
        return -1;
    }

    id = llm_txr_str(item, "call_id");
    name = llm_txr_str(item, "name");
    args = llm_txr_str(item, "arguments");

    if (id == NULL || name == NULL || args == NULL) {
        return llm_txr_bad(t, id == NULL ? "call_id"
                              : name == NULL ? "name" : "arguments",
                           "a string");
    }

    /* Messages takes an object alone: said here, in the client's terms */
    if (t->cf->to == LLM_API_ANTHROPIC) {

        if (llm_txr_tool_id(t, "call_id", id) != 0) {
            return -1;
        }

        input = llm_txr_arguments(t, item, "arguments");

        if (input == NULL) {
            return -1;
        }

        cJSON_Delete(input);
    }

    if (*asst == NULL) {
        *asst = llm_txr_add(t, msgs, NULL, cJSON_CreateObject());
        llm_txr_add_str(t, *asst, "role", "assistant");
        llm_txr_add(t, *asst, "content", cJSON_CreateNull());

        if (t->rc != 0) {
            return -1;
        }
    }

    calls = cJSON_GetObjectItemCaseSensitive(*asst, "tool_calls");

    if (calls == NULL) {
        calls = llm_txr_add(t, *asst, "tool_calls", cJSON_CreateArray());
    }

    call = llm_txr_add(t, calls, NULL, cJSON_CreateObject());
    llm_txr_add_str(t, call, "id", id);
    llm_txr_add_str(t, call, "type", "function");
    fn = llm_txr_add(t, call, "function", cJSON_CreateObject());
    llm_txr_add_str(t, fn, "name", name);
    llm_txr_add_str(t, fn, "arguments", args);

    return t->rc;
}


static int
llm_txr_resp_output(llm_txr_t *t, const cJSON *item, cJSON *msgs)
{
    int           k;
    size_t        old;
    cJSON        *m, *parts;
    const cJSON  *out, *part;
    const char   *id, *s;

    static const char *const  known[] = {
        "type", "call_id", "output", "id", "status", NULL
    };
    static const char *const  text[] = { "type", "text", NULL };

    if (llm_txr_known(t, item, known) != 0) {
        return -1;
    }

    id = llm_txr_str(item, "call_id");
    out = llm_txr_get(item, "output");

    if (id == NULL) {
        return llm_txr_bad(t, "call_id", "a string");
    }

    if (t->cf->to == LLM_API_ANTHROPIC
        && llm_txr_tool_id(t, "call_id", id) != 0)
    {
        return -1;
    }

    if (!cJSON_IsString(out) && !cJSON_IsArray(out)) {
        return llm_txr_bad(t, "output", "a string or an array");
    }

    m = llm_txr_add(t, msgs, NULL, cJSON_CreateObject());
    llm_txr_add_str(t, m, "role", "tool");
    llm_txr_add_str(t, m, "tool_call_id", id);

    if (cJSON_IsString(out)) {
        llm_txr_add_str(t, m, "content", out->valuestring);
        return t->rc;
    }

    parts = llm_txr_add(t, m, "content", cJSON_CreateArray());
    k = 0;

    cJSON_ArrayForEach(part, out) {
        old = llm_txr_index(t, "output", k++);

        s = llm_txr_str(part, "text");

        if (!llm_txr_is(part, "type", "input_text")) {
            return llm_txr_fail(t, "type", "only text parts of a function's "
                                "output can be sent to a backend of another "
                                "dialect");
        }

        if (llm_txr_known(t, part, text) != 0) {
            return -1;
        }

        if (s == NULL) {
            return llm_txr_bad(t, "text", "a string");
        }

        llm_txr_add(t, parts, NULL, llm_txr_text(t, "text", s));
        llm_txr_pop(t, old);
    }

    return t->rc;
}


static int
llm_txr_resp_tools(llm_txr_t *t, const cJSON *in, cJSON *root)
{
    int           i;
    size_t        old;
    cJSON        *tools, *tool, *fn, *tc;
    const cJSON  *list, *v, *params;
    const char   *name, *s;

    static const char *const  known[] = {
        "type", "name", "description", "parameters", "strict", NULL
    };
    static const char *const  known_tc[] = { "type", "name", NULL };

    list = llm_txr_get(in, "tools");

    if (list && !cJSON_IsArray(list)) {
        return llm_txr_bad(t, "tools", "an array");
    }

    if (list == NULL || list->child == NULL) {
        return 0;
    }

    tools = llm_txr_add(t, root, "tools", cJSON_CreateArray());
    i = 0;

    cJSON_ArrayForEach(v, list) {
        old = llm_txr_index(t, "tools", i++);

        if (!llm_txr_is(v, "type", "function")) {
            return llm_txr_fail(t, "type", "built-in tools cannot be sent to "
                                "a backend of another dialect");
        }

        if (llm_txr_known(t, v, known) != 0) {
            return -1;
        }

        name = llm_txr_str(v, "name");
        params = llm_txr_get(v, "parameters");

        if (name == NULL) {
            return llm_txr_bad(t, "name", "a string");
        }

        if (params && !cJSON_IsObject(params)) {
            return llm_txr_bad(t, "parameters", "an object");
        }

        if (llm_txr_get(v, "strict") && !cJSON_IsBool(llm_txr_get(v,
                                                                  "strict")))
        {
            return llm_txr_bad(t, "strict", "a boolean");
        }

        tool = llm_txr_add(t, tools, NULL, cJSON_CreateObject());
        llm_txr_add_str(t, tool, "type", "function");
        fn = llm_txr_add(t, tool, "function", cJSON_CreateObject());
        llm_txr_add_str(t, fn, "name", name);

        s = llm_txr_str(v, "description");

        if (s) {
            llm_txr_add_str(t, fn, "description", s);
        }

        if (params) {
            llm_txr_add_dup(t, fn, "parameters", params);
        }

        /* Responses' functions are strict unless said not, Chat's not */
        llm_txr_add(t, fn, "strict",
                    cJSON_CreateBool(!cJSON_IsFalse(llm_txr_get(v,
                                                                "strict"))));

        if (t->rc != 0) {
            return -1;
        }

        llm_txr_pop(t, old);
    }

    v = llm_txr_get(in, "tool_choice");

    if (v == NULL) {
        return 0;
    }

    s = cJSON_IsString(v) ? v->valuestring : NULL;
    name = llm_txr_str(v, "name");

    if (s && (strcmp(s, "auto") == 0 || strcmp(s, "none") == 0
              || strcmp(s, "required") == 0))
    {
        llm_txr_add_str(t, root, "tool_choice", s);
        return t->rc;
    }

    if (!llm_txr_is(v, "type", "function") || name == NULL) {
        return llm_txr_bad(t, "tool_choice",
                           "'auto', 'none', 'required' or a function");
    }

    llm_txr_push(t, "tool_choice");

    if (llm_txr_known(t, v, known_tc) != 0) {
        return -1;
    }

    llm_txr_pop(t, 0);

    tc = llm_txr_add(t, root, "tool_choice", cJSON_CreateObject());
    llm_txr_add_str(t, tc, "type", "function");
    fn = llm_txr_add(t, tc, "function", cJSON_CreateObject());
    llm_txr_add_str(t, fn, "name", name);

    return t->rc;
}


/* what every translation writes */

static int
llm_txr_model(llm_txr_t *t, const cJSON *in, cJSON *root)
{
    char         *name;
    const char   *model;

    if (t->cf->model == NULL) {
        model = llm_txr_str(in, "model");

        if (model == NULL) {
            return llm_txr_bad(t, "model", "a string");
        }

        llm_txr_add_str(t, root, "model", model);
        return t->rc;
    }

    name = cJSON_malloc(t->cf->model_len + 1);

    if (name == NULL) {
        return llm_txr_oom(t);
    }

    memcpy(name, t->cf->model, t->cf->model_len);
    name[t->cf->model_len] = '\0';

    llm_txr_add_str(t, root, "model", name);
    cJSON_free(name);

    return t->rc;
}


static int
llm_txr_chat_limit(llm_txr_t *t, cJSON *root)
{
    llm_txr_add(t, root, t->cf->chat_max_tokens ? "max_tokens"
                                                : "max_completion_tokens",
                cJSON_CreateNumber((double) t->cf->max_tokens));

    return t->rc;
}


/* usage: to Chat, whose stream carries usage only when asked */

static int
llm_txr_stream(llm_txr_t *t, const cJSON *in, cJSON *root, int usage)
{
    cJSON        *opts;
    const cJSON  *v;

    v = llm_txr_get(in, "stream");

    if (v && !cJSON_IsBool(v)) {
        return llm_txr_bad(t, "stream", "a boolean");
    }

    if (!cJSON_IsTrue(v)) {
        return 0;
    }

    t->out->stream = 1;

    llm_txr_add(t, root, "stream", cJSON_CreateTrue());

    if (usage) {
        opts = llm_txr_add(t, root, "stream_options", cJSON_CreateObject());
        llm_txr_add(t, opts, "include_usage", cJSON_CreateTrue());
    }

    return t->rc;
}


static int
llm_txr_number(llm_txr_t *t, const cJSON *in, cJSON *root,
    const char *name, double max)
{
    const cJSON  *v;

    v = llm_txr_get(in, name);

    if (v == NULL) {
        return 0;
    }

    if (!cJSON_IsNumber(v)) {
        return llm_txr_bad(t, name, "a number");
    }

    if (!(v->valuedouble >= 0 && v->valuedouble <= max)) {
        return llm_txr_fail(t, name, "'%s' above %d or below 0 cannot be "
                            "sent to a backend of another dialect", name,
                            (int) max);
    }

    llm_txr_add(t, root, name, cJSON_CreateNumber(v->valuedouble));

    return t->rc;
}


static cJSON *
llm_txr_conv_blocks(llm_txr_t *t, llm_txr_conv_t *cv, const char *role)
{
    cJSON        *m, *blocks;
    const cJSON  *s;

    if (t->rc != 0) {
        return NULL;
    }

    if (cv->last == NULL || cv->role != role) {
        m = llm_txr_add(t, cv->msgs, NULL, cJSON_CreateObject());
        llm_txr_add_str(t, m, "role", role);
        cv->blocks = llm_txr_add(t, m, "content", cJSON_CreateArray());
        cv->last = m;
        cv->role = role;

        return cv->blocks;
    }

    if (cv->blocks != NULL) {
        return cv->blocks;
    }

    /* a string content, now the first of more blocks */
    s = cJSON_GetObjectItemCaseSensitive(cv->last, "content");

    blocks = cJSON_CreateArray();
    llm_txr_add(t, blocks, NULL, llm_txr_text(t, "text", s->valuestring));

    if (t->rc != 0
        || !cJSON_ReplaceItemInObjectCaseSensitive(cv->last, "content",
                                                   blocks))
    {
        cJSON_Delete(blocks);
        llm_txr_oom(t);
        return NULL;
    }

    cv->blocks = blocks;

    return blocks;
}


/* takes the block, NULL when its making failed */

static int
llm_txr_conv_block(llm_txr_t *t, llm_txr_conv_t *cv, const char *role,
    cJSON *block)
{
    if (block == NULL) {
        return t->rc ? t->rc : llm_txr_oom(t);
    }

    llm_txr_add(t, llm_txr_conv_blocks(t, cv, role), NULL, block);

    return t->rc;
}


static int
llm_txr_conv_string(llm_txr_t *t, llm_txr_conv_t *cv, const char *role,
    const char *s)
{
    cJSON  *m;

    if (s[0] == '\0') {
        return 0;
    }

    if (cv->last != NULL && cv->role == role) {
        return llm_txr_conv_block(t, cv, role, llm_txr_text(t, "text", s));
    }

    m = llm_txr_add(t, cv->msgs, NULL, cJSON_CreateObject());
    llm_txr_add_str(t, m, "role", role);
    llm_txr_add_str(t, m, "content", s);

    cv->last = m;
    cv->blocks = NULL;
    cv->role = role;

    return t->rc;
}


/* {"type": type, "text": s}, or {"type": type} with s NULL */

static cJSON *
llm_txr_text(llm_txr_t *t, const char *type, const char *s)
{
    cJSON  *block;

    block = cJSON_CreateObject();

    if (block == NULL) {
        llm_txr_oom(t);
        return NULL;
    }

    if (cJSON_AddStringToObject(block, "type", type) == NULL
        || (s && cJSON_AddStringToObject(block, "text", s) == NULL))
    {
        cJSON_Delete(block);
        llm_txr_oom(t);
        return NULL;
    }

    return block;
}


/* a call's arguments as the object Messages wants: "" is {} */

static cJSON *
llm_txr_arguments(llm_txr_t *t, const cJSON *call, const char *name)
{
    cJSON        *input;
    const char   *s, *p, *end;

    s = llm_txr_str(call, name);

    if (s == NULL) {
        llm_txr_bad(t, name, "a string");
        return NULL;
    }

    for (p = s; *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'; p++) {
        /* void */
    }

    if (*p == '\0') {
        input = cJSON_CreateObject();

        if (input == NULL) {
            llm_txr_oom(t);
        }

        return input;
    }

    input = cJSON_ParseWithOpts(p, &end, 1);

    if (!cJSON_IsObject(input)) {
        cJSON_Delete(input);
        llm_txr_fail(t, name, "'%s' must be a JSON object to be sent to a "
                     "backend of another dialect", name);
        return NULL;
    }

    return input;
}


/*
 * The texts of text blocks joined with sep, from cJSON's allocator; of an
 * assistant's content, its tool_use blocks are skipped; any other block is
 * refused.
 */

static char *
llm_txr_texts(llm_txr_t *t, const cJSON *blocks, const char *sep,
    int assistant)
{
    int           k;
    char         *s, *p;
    size_t        n, old, seplen;
    const cJSON  *b;
    const char   *text;

    static const char *const  known[] = {
        "type", "text", "cache_control", NULL
    };

    seplen = strlen(sep);
    n = 1;
    k = 0;

    cJSON_ArrayForEach(b, blocks) {
        old = llm_txr_index(t, NULL, k++);

        text = llm_txr_str(b, "text");

        if (assistant && llm_txr_is(b, "type", "tool_use")) {
            llm_txr_pop(t, old);
            continue;
        }

        if (!llm_txr_is(b, "type", "text")) {
            llm_txr_fail(t, "type", "only %s can be sent to a backend of "
                         "another dialect",
                         assistant ? "text and tool_use blocks of an "
                                     "assistant message"
                                   : "text blocks of a tool result");
            return NULL;
        }

        if (llm_txr_known(t, b, known) != 0) {
            return NULL;
        }

        if (text == NULL) {
            llm_txr_bad(t, "text", "a string");
            return NULL;
        }

        n += strlen(text) + seplen;
        llm_txr_pop(t, old);
    }

    s = cJSON_malloc(n);

    if (s == NULL) {
        llm_txr_oom(t);
        return NULL;
    }

    p = s;

    cJSON_ArrayForEach(b, blocks) {
        if (!llm_txr_is(b, "type", "text")) {
            continue;
        }

        if (p != s) {
            memcpy(p, sep, seplen);
            p += seplen;
        }

        text = llm_txr_str(b, "text");
        n = strlen(text);
        memcpy(p, text, n);
        p += n;
    }

    *p = '\0';

    return s;
}


static char *
llm_txr_data_url(llm_txr_t *t, const char *type, const char *data)
{
    char    *url;
    size_t   n, m;

    n = strlen(type);
    m = strlen(data);

    url = cJSON_malloc(sizeof("data:;base64,") + n + m);

    if (url == NULL) {
        llm_txr_oom(t);
        return NULL;
    }

    memcpy(url, "data:", 5);
    memcpy(url + 5, type, n);
    memcpy(url + 5 + n, ";base64,", 8);
    memcpy(url + 13 + n, data, m + 1);

    return url;
}


/* "data:<type>;base64,<data>": 0 with the type copied, else -1 */

static int
llm_txr_parse_data(const char *url, char *type, size_t size,
    const char **data)
{
    size_t       n;
    const char  *p;

    if (strncmp(url, "data:", 5) != 0) {
        return -1;
    }

    p = strstr(url + 5, ";base64,");

    if (p == NULL) {
        return -1;
    }

    n = p - (url + 5);

    if (n == 0 || n >= size) {
        return -1;
    }

    memcpy(type, url + 5, n);
    type[n] = '\0';
    *data = p + 8;

    return 0;
}


/* every member not null is one of names, else refused */

static int
llm_txr_known(llm_txr_t *t, const cJSON *obj, const char *const *names)
{
    size_t        i;
    const cJSON  *m;

    for (m = obj ? obj->child : NULL; m; m = m->next) {
        if (cJSON_IsNull(m) || m->string == NULL) {
            continue;
        }

        for (i = 0; names[i]; i++) {
            if (m->string[0] == names[i][0]
                && strcmp(m->string, names[i]) == 0)
            {
                break;
            }
        }

        if (names[i] == NULL) {
            return llm_txr_foreign(t, m->string);
        }
    }

    return 0;
}


static int
llm_txr_is(const cJSON *obj, const char *name, const char *value)
{
    const char  *s;

    s = llm_txr_str(obj, name);

    return s != NULL && strcmp(s, value) == 0;
}


/* a member, NULL when absent or null (cJSON reads the first of repeats) */

static cJSON *
llm_txr_get(const cJSON *obj, const char *name)
{
    cJSON  *v;

    if (!cJSON_IsObject(obj)) {
        return NULL;
    }

    /* cJSON_GetObjectItemCaseSensitive()'s first match, the first byte
       compared before the rest: most members differ in it */
    for (v = obj->child; v; v = v->next) {
        if (v->string && v->string[0] == name[0]
            && strcmp(v->string, name) == 0)
        {
            break;
        }
    }

    return cJSON_IsNull(v) ? NULL : v;
}


static const char *
llm_txr_str(const cJSON *obj, const char *name)
{
    cJSON  *v;

    v = llm_txr_get(obj, name);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}


/* adds item to an object (name) or an array; frees it if it cannot */

static cJSON *
llm_txr_add(llm_txr_t *t, cJSON *to, const char *name, cJSON *item)
{
    cJSON_bool  ok;

    if (item == NULL) {
        llm_txr_oom(t);
        return NULL;
    }

    if (to == NULL) {
        cJSON_Delete(item);
        llm_txr_oom(t);
        return NULL;
    }

    /* every name is a literal: held, not copied */
    ok = name ? cJSON_AddItemToObjectCS(to, name, item)
              : cJSON_AddItemToArray(to, item);

    if (!ok) {
        cJSON_Delete(item);
        llm_txr_oom(t);
        return NULL;
    }

    return item;
}


static cJSON *
llm_txr_add_str(llm_txr_t *t, cJSON *to, const char *name, const char *s)
{
    return llm_txr_add(t, to, name, cJSON_CreateString(s));
}


static cJSON *
llm_txr_add_dup(llm_txr_t *t, cJSON *to, const char *name,
    const cJSON *item)
{
    return llm_txr_add(t, to, name, cJSON_Duplicate(item, 1));
}


/* the path of a refusal: push returns the length to pop back to */

static size_t
llm_txr_push(llm_txr_t *t, const char *name)
{
    size_t  old;

    old = t->plen;

    if (old) {
        llm_txr_path(t, ".", 1);
    }

    llm_txr_path(t, name, strlen(name));

    return old;
}


static size_t
llm_txr_index(llm_txr_t *t, const char *name, int i)
{
    char    num[LLM_TX_INT_LEN];
    size_t  old;

    old = t->plen;

    if (name) {
        (void) llm_txr_push(t, name);
    }

    llm_txr_path(t, "[", 1);
    llm_txr_path(t, num, llm_tx_int(num, i));
    llm_txr_path(t, "]", 1);

    return old;
}


/* cut where the path is full, as snprintf() would, NUL-terminated */

static void
llm_txr_path(llm_txr_t *t, const char *p, size_t len)
{
    size_t  room;

    room = sizeof(t->path) - 1 - t->plen;

    if (len > room) {
        len = room;
    }

    memcpy(t->path + t->plen, p, len);
    t->plen += len;
    t->path[t->plen] = '\0';
}


static void
llm_txr_pop(llm_txr_t *t, size_t old)
{
    if (old < t->plen) {
        t->plen = old;
        t->path[old] = '\0';
    }
}


/* the message names the member by its whole path */

static int
llm_txr_foreign(llm_txr_t *t, const char *member)
{
    char  buf[LLM_TX_MESSAGE_MAX];

    if (t->rc != 0) {
        return -1;
    }

    (void) llm_txr_fail(t, member, "cannot be sent");

    if (snprintf(buf, sizeof(buf), "'%s' cannot be sent to a backend of "
                 "another dialect", t->out->param)
        > 0)
    {
        llm_txr_copy(t->out->message, sizeof(t->out->message), buf);
    }

    return -1;
}


static int
llm_txr_bad(llm_txr_t *t, const char *member, const char *what)
{
    if (member == NULL) {
        return llm_txr_fail(t, NULL, "this member must be %s", what);
    }

    return llm_txr_fail(t, member, "'%s' must be %s", member, what);
}


/*
 * A tool call's id as Anthropic takes it: ^[a-zA-Z0-9_-]+$, at most 256
 * bytes (OpenAI's "call_..." and Anthropic's "toolu_..." both fit); any
 * other the backend would refuse after admission, under its own name.
 */

static int
llm_txr_tool_id(llm_txr_t *t, const char *member, const char *id)
{
    size_t  n;

    for (n = 0; id[n] != '\0'; n++) {
        if (!((id[n] >= 'a' && id[n] <= 'z') || (id[n] >= 'A' && id[n] <= 'Z')
              || (id[n] >= '0' && id[n] <= '9') || id[n] == '_'
              || id[n] == '-'))
        {
            break;
        }
    }

    if (n > 0 && n <= LLM_TXR_TOOL_ID_MAX && id[n] == '\0') {
        return 0;
    }

    return llm_txr_fail(t, member, "'%s' must be 1 to %d letters, digits, "
                        "'_' or '-' to be sent to a Messages backend",
                        member, LLM_TXR_TOOL_ID_MAX);
}


/* the first refusal stays; a refusal after a failed allocation is none */

static int
llm_txr_fail(llm_txr_t *t, const char *member, const char *fmt, ...)
{
    int      n;
    char     buf[LLM_TX_MESSAGE_MAX];
    va_list  ap;

    if (t->rc != 0) {
        return -1;
    }

    t->rc = -1;

    n = snprintf(buf, sizeof(buf), "%s%s%s", t->path,
                 (member && t->plen) ? "." : "", member ? member : "");

    if (n >= 0) {
        llm_txr_copy(t->out->param, sizeof(t->out->param), buf);
    }

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);

    if (n >= 0) {
        llm_txr_copy(t->out->message, sizeof(t->out->message), buf);
    }

    return -1;
}


static int
llm_txr_oom(llm_txr_t *t)
{
    if (t->rc == 0) {
        t->rc = -2;
    }

    return -1;
}


/* fit for a JSON string and a log line: what is not is '?' */

static void
llm_txr_copy(char *dst, size_t size, const char *src)
{
    size_t  i;

    for (i = 0; src[i] && i < size - 1; i++) {
        dst[i] = (src[i] >= 0x20 && src[i] < 0x7f && src[i] != '"'
                  && src[i] != '\\')
                 ? src[i] : '?';
    }

    dst[i] = '\0';
}
