
/*
 * OpenAI's POST /v1/embeddings: the body read as OpenAI reads it, and the
 * list of vectors it answers.  A vector is a function of its input alone
 * (the bytes of a string, or the tokens of a token array): a hash seeds a
 * generator whose first D numbers, scaled to unit length, are the vector,
 * D the model's 1,536 (3,072 for a "-large" model) or "dimensions".  A
 * shorter vector is thus the longer one cut and scaled again, as
 * OpenAI's are.  base64 is the float32s little-endian, as OpenAI sends
 * them.  The tokens: ceil(bytes / 4) of a string, as the prompts of the
 * other endpoints count their texts, and the length of a token array.
 */


#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <cJSON.h>

#include "mockllm.h"
#include "mockllm_buf.h"
#include "mockllm_embed.h"


#define MOCKLLM_EMBED_INPUTS    2048
#define MOCKLLM_EMBED_TOKENS    8192
#define MOCKLLM_EMBED_TOTAL     300000
#define MOCKLLM_EMBED_DIMS      1536
#define MOCKLLM_EMBED_DIMS_MAX  3072
#define MOCKLLM_EMBED_TOKEN_MAX 2147483647

#define MOCKLLM_EMBED_INVALID                                                 \
    "'$.input' is invalid. Please check the API reference: "                 \
    "https://platform.openai.com/docs/api-reference."


static int64_t mockllm_embed_input(mockllm_read_t *rd, cJSON *v);
static int64_t mockllm_embed_tokens(cJSON *v);
static int64_t mockllm_embed_native(cJSON *root);
static void mockllm_embed_vector(mockllm_buf_t *b, cJSON *v, int64_t dims,
    int base64);
static double mockllm_embed_sqrt(double x);
static uint64_t mockllm_embed_seed(cJSON *v);
static void mockllm_embed_base64(mockllm_buf_t *b, const unsigned char *p,
    size_t n);
static cJSON *mockllm_embed_get(cJSON *obj, const char *name);
static void mockllm_embed_refuse(mockllm_read_t *rd, const char *param,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));


static const char  *mockllm_embed_members[] = {
    "model", "input", "encoding_format", "dimensions", "user", NULL
};


void
mockllm_embed_read(mockllm_conn_t *c, cJSON *root)
{
    size_t           i;
    cJSON           *m, *v;
    int64_t          n, native;
    mockllm_read_t  *rd;

    rd = &c->rd;

    /* no output, one "choice" of none */
    rd->max = 0;
    rd->n = 0;

    cJSON_ArrayForEach(m, root) {
        for (i = 0; mockllm_embed_members[i]; i++) {
            if (strcmp(m->string, mockllm_embed_members[i]) == 0) {
                break;
            }
        }

        if (mockllm_embed_members[i] == NULL) {
            mockllm_embed_refuse(rd, m->string, "Unrecognized request "
                                 "argument supplied: %s", m->string);
        }
    }

    v = mockllm_embed_get(root, "input");

    if (v == NULL) {
        mockllm_embed_refuse(rd, "input", "Missing required parameter: "
                             "'input'.");

    } else {
        rd->messages = cJSON_IsArray(v) && !cJSON_IsNumber(v->child)
                       ? cJSON_GetArraySize(v) : 1;
        rd->prompt = mockllm_embed_input(rd, v);
    }

    v = mockllm_embed_get(root, "encoding_format");

    if (v != NULL
        && (!cJSON_IsString(v)
            || (strcmp(v->valuestring, "float") != 0
                && strcmp(v->valuestring, "base64") != 0)))
    {
        mockllm_embed_refuse(rd, "encoding_format", "Invalid value for "
                             "'encoding_format': expected 'float' or "
                             "'base64'.");
    }

    v = mockllm_embed_get(root, "dimensions");
    native = mockllm_embed_native(root);

    if (v != NULL) {
        m = mockllm_embed_get(root, "model");

        if (cJSON_IsString(m)
            && strcmp(m->valuestring, "text-embedding-ada-002") == 0)
        {
            mockllm_embed_refuse(rd, "dimensions", "This model does not "
                                 "support specifying dimensions.");

        } else if (!cJSON_IsNumber(v) || !(v->valuedouble >= 1)
                   || v->valuedouble > (double) native
                   || v->valuedouble != (double) (int64_t) v->valuedouble)
        {
            mockllm_embed_refuse(rd, "dimensions", "Invalid value for "
                                 "'dimensions': expected an integer from 1 "
                                 "to %lld.", (long long) native);
        }
    }

    v = mockllm_embed_get(root, "user");

    if (v != NULL && !cJSON_IsString(v)) {
        mockllm_embed_refuse(rd, "user", "Invalid value for 'user': "
                             "expected a string.");
    }

    n = rd->prompt;

    if (n > MOCKLLM_EMBED_TOTAL) {
        mockllm_embed_refuse(rd, "input", "Requested %lld tokens, max "
                             "%d tokens per request", (long long) n,
                             MOCKLLM_EMBED_TOTAL);
    }
}


/* the tokens of all the inputs, each held to the limits */

static int64_t
mockllm_embed_input(mockllm_read_t *rd, cJSON *v)
{
    int64_t   n, total, inputs;
    cJSON    *first, *e;

    if (cJSON_IsString(v)) {
        if (v->valuestring[0] == '\0') {
            mockllm_embed_refuse(rd, "input", MOCKLLM_EMBED_INVALID);
            return 0;
        }

        n = mockllm_embed_tokens(v);

        if (n > MOCKLLM_EMBED_TOKENS) {
            mockllm_embed_refuse(rd, "input", "This model's maximum context "
                                 "length is %d tokens, however you "
                                 "requested %lld tokens (%lld in your "
                                 "prompt; 0 for the completion). Please "
                                 "reduce your prompt; or completion length.",
                                 MOCKLLM_EMBED_TOKENS, (long long) n,
                                 (long long) n);
        }

        return n;
    }

    first = cJSON_IsArray(v) ? v->child : NULL;

    if (first == NULL || cJSON_GetArraySize(v) > MOCKLLM_EMBED_INPUTS) {
        mockllm_embed_refuse(rd, "input", MOCKLLM_EMBED_INVALID);
        return 0;
    }

    if (cJSON_IsNumber(first)) {
        /* one input of tokens */
        n = mockllm_embed_tokens(v);

        if (n < 0 || n > MOCKLLM_EMBED_TOKENS) {
            mockllm_embed_refuse(rd, "input", MOCKLLM_EMBED_INVALID);
            return 0;
        }

        return n;
    }

    total = 0;
    inputs = 0;

    cJSON_ArrayForEach(e, v) {
        inputs++;

        if ((cJSON_IsString(first) && !cJSON_IsString(e))
            || (cJSON_IsArray(first) && !cJSON_IsArray(e))
            || (!cJSON_IsString(first) && !cJSON_IsArray(first)))
        {
            mockllm_embed_refuse(rd, "input", "Invalid value for 'input': "
                                 "expected a string, an array of strings, "
                                 "an array of integers or an array of "
                                 "integer arrays.");
            return 0;
        }

        n = mockllm_embed_tokens(e);

        if (n <= 0 || n > MOCKLLM_EMBED_TOKENS) {
            if (n > MOCKLLM_EMBED_TOKENS && cJSON_IsString(e)) {
                mockllm_embed_refuse(rd, "input", "This model's maximum "
                                     "context length is %d tokens, however "
                                     "you requested %lld tokens in input "
                                     "%lld.", MOCKLLM_EMBED_TOKENS,
                                     (long long) n, (long long) inputs - 1);

            } else {
                mockllm_embed_refuse(rd, "input", MOCKLLM_EMBED_INVALID);
            }

            return 0;
        }

        total += n;
    }

    return total;
}


/* a string's ceil(bytes / 4), a token array's length; -1: not tokens */

static int64_t
mockllm_embed_tokens(cJSON *v)
{
    int64_t   n;
    cJSON    *t;

    if (cJSON_IsString(v)) {
        return ((int64_t) strlen(v->valuestring) + 3) / 4;
    }

    n = 0;

    cJSON_ArrayForEach(t, v) {
        if (!cJSON_IsNumber(t) || !(t->valuedouble >= 0)
            || t->valuedouble > (double) MOCKLLM_EMBED_TOKEN_MAX
            || t->valuedouble != (double) (int64_t) t->valuedouble)
        {
            return -1;
        }

        n++;
    }

    return n;
}


static int64_t
mockllm_embed_native(cJSON *root)
{
    cJSON  *m;

    m = mockllm_embed_get(root, "model");

    if (cJSON_IsString(m) && strstr(m->valuestring, "-large") != NULL) {
        return MOCKLLM_EMBED_DIMS_MAX;
    }

    return MOCKLLM_EMBED_DIMS;
}


/*
 * The answer, but for its usage and closing brace:
 * {"object":"list","data":[{"object":"embedding","index":0,
 * "embedding":[...]},...],"model":"M"
 */

void
mockllm_embed_data(mockllm_conn_t *c, mockllm_buf_t *b)
{
    int       base64;
    cJSON    *root, *input, *v, *e;
    int64_t   dims, i;

    mockllm_buf_adds(b, "{\"object\":\"list\",\"data\":[");

    root = cJSON_ParseWithLength(c->in.data + c->body_start, c->body_len);

    input = mockllm_embed_get(root, "input");
    v = mockllm_embed_get(root, "encoding_format");
    base64 = cJSON_IsString(v) && strcmp(v->valuestring, "base64") == 0;

    v = mockllm_embed_get(root, "dimensions");
    dims = cJSON_IsNumber(v) ? (int64_t) v->valuedouble
                             : mockllm_embed_native(root);

    i = 0;

    if (cJSON_IsArray(input) && !cJSON_IsNumber(input->child)) {
        cJSON_ArrayForEach(e, input) {
            if (i) {
                mockllm_buf_adds(b, ",");
            }

            mockllm_buf_adds(b, "{\"object\":\"embedding\",\"index\":");
            mockllm_buf_add_num(b, i);
            mockllm_buf_adds(b, ",\"embedding\":");
            mockllm_embed_vector(b, e, dims, base64);
            mockllm_buf_adds(b, "}");
            i++;
        }

    } else if (input != NULL) {
        mockllm_buf_adds(b, "{\"object\":\"embedding\",\"index\":0,"
                            "\"embedding\":");
        mockllm_embed_vector(b, input, dims, base64);
        mockllm_buf_adds(b, "}");
    }

    cJSON_Delete(root);

    mockllm_buf_adds(b, "],\"model\":\"");
    mockllm_buf_add(b, c->model.data, c->model.len);
    mockllm_buf_adds(b, "\"");
}


static void
mockllm_embed_vector(mockllm_buf_t *b, cJSON *v, int64_t dims, int base64)
{
    int             n;
    char            num[32];
    float           f;
    double          x, sum, *d;
    int64_t         k;
    uint32_t        w;
    uint64_t        s, z;
    unsigned char  *raw;

    d = malloc(dims * sizeof(double));
    raw = malloc(dims * 4);

    if (d == NULL || raw == NULL) {
        free(d);
        free(raw);
        b->oom = 1;
        return;
    }

    s = mockllm_embed_seed(v);
    sum = 0;

    /* splitmix64: each number in [-1, 1) */
    for (k = 0; k < dims; k++) {
        s += 0x9e3779b97f4a7c15ULL;
        z = s;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;

        x = (double) (z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
        d[k] = x;
        sum += x * x;
    }

    sum = mockllm_embed_sqrt(sum);

    if (base64) {
        for (k = 0; k < dims; k++) {
            f = (float) (d[k] / sum);
            memcpy(&w, &f, 4);

            /* little-endian, whatever the host */
            raw[4 * k] = (unsigned char) (w & 0xff);
            raw[4 * k + 1] = (unsigned char) ((w >> 8) & 0xff);
            raw[4 * k + 2] = (unsigned char) ((w >> 16) & 0xff);
            raw[4 * k + 3] = (unsigned char) ((w >> 24) & 0xff);
        }

        mockllm_buf_adds(b, "\"");
        mockllm_embed_base64(b, raw, dims * 4);
        mockllm_buf_adds(b, "\"");

    } else {
        mockllm_buf_adds(b, "[");

        for (k = 0; k < dims; k++) {
            f = (float) (d[k] / sum);
            n = snprintf(num, sizeof(num), k ? ",%.9g" : "%.9g", (double) f);
            mockllm_buf_add(b, num, n);
        }

        mockllm_buf_adds(b, "]");
    }

    free(d);
    free(raw);
}


/* Newton's, from above: x is the sum of squares of numbers in [-1, 1) */

static double
mockllm_embed_sqrt(double x)
{
    int     i;
    double  r;

    if (x <= 0) {
        return 1;
    }

    r = x > 1 ? x : 1;

    for (i = 0; i < 64; i++) {
        r = (r + x / r) / 2;
    }

    return r;
}


/* FNV-1a of a string's bytes, or of a token array's tokens as 4 bytes each */

static uint64_t
mockllm_embed_seed(cJSON *v)
{
    int             i;
    cJSON          *t;
    uint32_t        tok;
    uint64_t        h;
    const char     *p;

    h = 0xcbf29ce484222325ULL;

    if (cJSON_IsString(v)) {
        for (p = v->valuestring; *p; p++) {
            h = (h ^ (unsigned char) *p) * 0x100000001b3ULL;
        }

        return h;
    }

    cJSON_ArrayForEach(t, v) {
        tok = (uint32_t) t->valuedouble;

        for (i = 0; i < 4; i++) {
            h = (h ^ ((tok >> (8 * i)) & 0xff)) * 0x100000001b3ULL;
        }
    }

    /* a token array is never the same input as a string */
    return h ^ 0x746f6b656e73ULL;
}


static void
mockllm_embed_base64(mockllm_buf_t *b, const unsigned char *p, size_t n)
{
    char     out[4];
    size_t   i;
    uint32_t w;

    static const char  abc[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    for (i = 0; i + 2 < n; i += 3) {
        w = (uint32_t) p[i] << 16 | (uint32_t) p[i + 1] << 8 | p[i + 2];
        out[0] = abc[w >> 18];
        out[1] = abc[(w >> 12) & 0x3f];
        out[2] = abc[(w >> 6) & 0x3f];
        out[3] = abc[w & 0x3f];
        mockllm_buf_add(b, out, 4);
    }

    if (i < n) {
        w = (uint32_t) p[i] << 16 | (i + 1 < n ? (uint32_t) p[i + 1] << 8 : 0);
        out[0] = abc[w >> 18];
        out[1] = abc[(w >> 12) & 0x3f];
        out[2] = (i + 1 < n) ? abc[(w >> 6) & 0x3f] : '=';
        out[3] = '=';
        mockllm_buf_add(b, out, 4);
    }
}


/* of a repeated name the last counts; null is absent */

static cJSON *
mockllm_embed_get(cJSON *obj, const char *name)
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


/* the first reason to refuse is the one given */

static void
mockllm_embed_refuse(mockllm_read_t *rd, const char *param, const char *fmt,
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
