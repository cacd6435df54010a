
/*
 * The inspector's differential oracle, for t/test_inspect_diff.c and
 * fuzz/fuzz_inspect_diff.c: the body inspected by llm_inspect() and by the
 * reference (t/inspect_ref.c: cJSON's parse, the scan, every walk), every
 * field of the two requests compared, and what each writes upstream
 * (spliced or rebuilt, with and without an alias); and where the block
 * parser (llm_json.c) takes a body, its tree against cJSON's, node for
 * node.  inspect_diff() returns NULL if all is the same, else what
 * differs.  Static functions: included by one file of each program.
 */

#ifndef _INSPECT_DIFF_H_INCLUDED_
#define _INSPECT_DIFF_H_INCLUDED_


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "llm_inspect.h"
#include "llm_json.h"


/* the reference, under names of its own */
#define llm_inspect            llm_ref_inspect
#define llm_inspect_scan       llm_ref_inspect_scan
#define llm_inspect_max_name   llm_ref_inspect_max_name
#define llm_inspect_set_model  llm_ref_inspect_set_model
#define llm_inspect_splice     llm_ref_inspect_splice
#define llm_inspect_rebuild    llm_ref_inspect_rebuild

int llm_inspect_scan(const char *body, size_t len, size_t max_depth,
    size_t max_string, const char **what);
int llm_inspect(llm_api_e api, const char *body, size_t len,
    const llm_inspect_conf_t *cf, llm_request_t *req);
const char *llm_inspect_max_name(const llm_request_t *req);
int llm_inspect_set_model(llm_request_t *req, const char *model, size_t len);
size_t llm_inspect_splice(const char *body, size_t len,
    const llm_request_t *req, char *out, size_t cap);
char *llm_inspect_rebuild(const char *body, size_t len,
    const llm_request_t *req);

#include "inspect_ref.c"

#undef llm_inspect
#undef llm_inspect_scan
#undef llm_inspect_max_name
#undef llm_inspect_set_model
#undef llm_inspect_splice
#undef llm_inspect_rebuild


static int
inspect_diff_str(const char *a, const char *b)
{
    if (a == NULL || b == NULL) {
        return a != b;
    }

    return strcmp(a, b) != 0;
}


/* the same tree: types, names, strings, numbers to the bit, links */

static const char *
inspect_diff_tree(const cJSON *a, const cJSON *b)
{
    const char  *d;

    for ( /* void */ ; a && b; a = a->next, b = b->next) {
        if (a->type != b->type
            || inspect_diff_str(a->string, b->string)
            || inspect_diff_str(a->valuestring, b->valuestring)
            || memcmp(&a->valuedouble, &b->valuedouble, sizeof(double)) != 0
            || a->valueint != b->valueint
            || (a->child == NULL) != (b->child == NULL)
            || (a->child && (a->child->prev == NULL
                             || a->child->prev->next != NULL)))
        {
            return "the block parser's tree is not cJSON's";
        }

        d = inspect_diff_tree(a->child, b->child);
        if (d != NULL) {
            return d;
        }
    }

    return (a || b) ? "the block parser's tree has other members" : NULL;
}


static const char *
inspect_diff_parse(const char *body, size_t len,
    const llm_inspect_conf_t *cf)
{
    cJSON        *fast, *ref;
    const char   *d, *what;
    llm_json_t    js;

    fast = llm_json_parse(&js, body, len, cf->max_depth, cf->max_string);
    d = NULL;

    if (fast != NULL) {
        ref = NULL;

        if (llm_ref_inspect_scan(body, len, cf->max_depth, cf->max_string,
                                 &what)
            != 0)
        {
            d = "the block parser took what the scan refuses";

        } else if ((ref = cJSON_ParseWithLength(body, len)) == NULL) {
            d = "the block parser took what cJSON refuses";

        } else if ((d = inspect_diff_tree(fast, ref)) == NULL
                   && js.unique && llm_inspect_repeated(ref) != NULL)
        {
            d = "the block parser missed a repeated member";
        }

        cJSON_Delete(ref);
    }

    llm_json_free(&js);

    return d;
}


static const char *
inspect_diff_req(const llm_request_t *a, const llm_request_t *b)
{
    if (a->api != b->api || a->model_len != b->model_len
        || strcmp(a->model, b->model) != 0
        || a->max_tokens != b->max_tokens
        || a->max_tokens_asked != b->max_tokens_asked
        || a->n != b->n || a->output_bound != b->output_bound
        || a->prompt_tokens != b->prompt_tokens
        || a->prompt_bound != b->prompt_bound
        || memcmp(&a->parts, &b->parts, sizeof(llm_parts_t)) != 0)
    {
        return "another request: model, limits, estimate or parts";
    }

    if (inspect_diff_str(a->unbounded, b->unbounded)
        || a->stream != b->stream
        || a->max_tokens_missing != b->max_tokens_missing
        || a->max_tokens_lowered != b->max_tokens_lowered
        || a->chat_max_tokens != b->chat_max_tokens
        || a->add_include_usage != b->add_include_usage
        || a->rebuild != b->rebuild
        || a->model_changed != b->model_changed
        || inspect_diff_str(a->max_name, b->max_name))
    {
        return "another request: flags";
    }

    if (inspect_diff_str(a->param, b->param)
        || inspect_diff_str(a->message, b->message)
        || strcmp(a->text, b->text) != 0
        || strcmp(a->name, b->name) != 0)
    {
        return "another refusal";
    }

    return NULL;
}


/* what goes upstream, spliced or rebuilt */

static const char *
inspect_diff_upstream(const char *body, size_t len, const llm_request_t *a,
    const llm_request_t *b)
{
    char        *x, *y;
    size_t       n, m, cap;
    const char  *d;

    if (llm_inspect_needs_rewrite(a) != llm_inspect_needs_rewrite(b)) {
        return "one rewrites the body, the other does not";
    }

    if (!llm_inspect_needs_rewrite(a)) {
        return NULL;
    }

    d = NULL;

    if (a->rebuild) {
        x = llm_inspect_rebuild(body, len, a);
        y = llm_ref_inspect_rebuild(body, len, b);

        if (inspect_diff_str(x, y)) {
            d = "another body rebuilt";
        }

        cJSON_free(x);
        cJSON_free(y);

        return d;
    }

    cap = len + LLM_INSPECT_SPLICE_MAX;
    x = malloc(cap);
    y = malloc(cap);

    if (x == NULL || y == NULL) {
        abort();
    }

    n = llm_inspect_splice(body, len, a, x, cap);
    m = llm_ref_inspect_splice(body, len, b, y, cap);

    if (n != m || memcmp(x, y, n) != 0) {
        d = "another body spliced";
    }

    free(x);
    free(y);

    return d;
}


static const char *
inspect_diff(llm_api_e api, const char *body, size_t len,
    const llm_inspect_conf_t *cf, unsigned alias)
{
    int             rc, ref;
    const char     *d;
    llm_request_t   a, b;

    static const char  *aliases[] = {
        "gpt-4o-mini-2024-07-18", "q\"b\\s/\xc3\xa9", "x"
    };

    d = inspect_diff_parse(body, len, cf);
    if (d != NULL) {
        return d;
    }

    rc = llm_inspect(api, body, len, cf, &a);
    ref = llm_ref_inspect(api, body, len, cf, &b);

    if (rc != ref) {
        return "one accepts, the other refuses";
    }

    d = inspect_diff_req(&a, &b);

    if (d != NULL || rc != 0) {
        return d;
    }

    /* Chat's default under max_tokens, as a backend may want it */
    a.chat_max_tokens = b.chat_max_tokens = alias & 1;

    d = inspect_diff_upstream(body, len, &a, &b);

    if (d != NULL || alias < 2) {
        return d;
    }

    alias = (alias >> 1) % 3;

    if (llm_inspect_set_model(&a, aliases[alias], strlen(aliases[alias]))
        != llm_ref_inspect_set_model(&b, aliases[alias],
                                     strlen(aliases[alias])))
    {
        return "an alias taken by one only";
    }

    return inspect_diff_upstream(body, len, &a, &b);
}


#endif /* _INSPECT_DIFF_H_INCLUDED_ */
