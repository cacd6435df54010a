
/*
 * What the gateway answers from its configuration: the models a key may
 * call (GET /v1/models and /v1/models/{id}), in OpenAI's shape, or in
 * Anthropic's when the request carries anthropic-version; and the 404 of
 * a path that no API has.  Admission (admit.c) authenticates the key and
 * takes its request from the tier's requests a minute first.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_models.h"
#include "ngx_http_llm_gateway_auth.h"
#include "ngx_http_llm_gateway_backend.h"
#include "ngx_http_llm_gateway_reply.h"
#include "ngx_http_llm_gateway_request.h"


/* the most of a client's path, or model id, a 404 quotes */
#define NGX_HTTP_LLM_GATEWAY_PATH_MAX      128

/* Anthropic's page: 20 models unless asked, 1000 at most */
#define NGX_HTTP_LLM_GATEWAY_PAGE          20
#define NGX_HTTP_LLM_GATEWAY_PAGE_MAX      1000

/* one model object, but its id (twice, escaped) */
#define NGX_HTTP_LLM_GATEWAY_MODEL_LEN     160

#define NGX_HTTP_LLM_GATEWAY_OWNER         "llm-gateway"


typedef struct {
    ngx_str_t                   *ids;
    ngx_uint_t                   n;
    ngx_uint_t                   anthropic;
    ngx_uint_t                   has_more;
} ngx_http_llm_gateway_page_t;


static ngx_int_t ngx_http_llm_gateway_models_collect(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_array_t *ids);
static ngx_int_t ngx_http_llm_gateway_models_add_list(
    ngx_http_llm_gateway_ctx_t *ctx, ngx_array_t *ids, u_char *list);
static ngx_int_t ngx_http_llm_gateway_models_add(
    ngx_http_llm_gateway_ctx_t *ctx, ngx_array_t *ids, u_char *name,
    size_t len);
static ngx_uint_t ngx_http_llm_gateway_models_callable(
    ngx_http_llm_gateway_ctx_t *ctx, u_char *name, size_t len);
static ngx_int_t ngx_http_llm_gateway_models_page(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_array_t *ids,
    ngx_http_llm_gateway_page_t *page);
static ngx_int_t ngx_http_llm_gateway_models_cursor(ngx_http_request_t *r,
    char *name, size_t len, ngx_array_t *ids, ngx_int_t *at);
static u_char *ngx_http_llm_gateway_models_object(u_char *p, ngx_str_t *id,
    ngx_uint_t anthropic);
static ngx_int_t ngx_http_llm_gateway_models_reply(ngx_http_request_t *r,
    ngx_buf_t *b);


/* the time the configuration was read: the "created" of every model */
static time_t  ngx_http_llm_gateway_models_loaded;
static u_char  ngx_http_llm_gateway_models_date[sizeof("1970-01-01T00:00:00Z")];


void
ngx_http_llm_gateway_models_init(void)
{
    ngx_tm_t  tm;

    ngx_http_llm_gateway_models_loaded = ngx_time();

    ngx_gmtime(ngx_http_llm_gateway_models_loaded, &tm);

    (void) ngx_sprintf(ngx_http_llm_gateway_models_date,
                       "%4d-%02d-%02dT%02d:%02d:%02dZ%Z",
                       tm.ngx_tm_year, tm.ngx_tm_mon, tm.ngx_tm_mday,
                       tm.ngx_tm_hour, tm.ngx_tm_min, tm.ngx_tm_sec);
}


/*
 * The path a models location serves: its own name, the list (id empty),
 * or the name, a slash and an id.  NGX_DECLINED: no such path.
 */

ngx_int_t
ngx_http_llm_gateway_models_path(ngx_http_request_t *r, ngx_str_t *id)
{
    ngx_str_t                  base;
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    base = clcf->name;

    if (base.len && base.data[base.len - 1] == '/') {
        base.len--;
    }

    ngx_str_null(id);

    if (r->uri.len < base.len
        || ngx_strncmp(r->uri.data, base.data, base.len) != 0)
    {
        return NGX_DECLINED;
    }

    if (r->uri.len == base.len) {
        return NGX_OK;
    }

    if (r->uri.len < base.len + 2 || r->uri.data[base.len] != '/') {
        return NGX_DECLINED;
    }

    /* an id may have slashes: the SDKs send them as %2F */
    id->data = r->uri.data + base.len + 1;
    id->len = r->uri.len - base.len - 1;

    return NGX_OK;
}


/*
 * 404 for a path no API has, as OpenAI words it.  The path is the
 * client's: escaped and bounded before it is quoted.
 */

void
ngx_http_llm_gateway_models_unknown(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char     *p;
    ngx_str_t   method, path;

    (void) ngx_http_llm_gateway_reply_safe(r->pool, r->method_name.data,
                                           r->method_name.len,
                                           NGX_HTTP_LLM_GATEWAY_SAFE_MAX,
                                           &method);
    (void) ngx_http_llm_gateway_reply_safe(r->pool, r->uri.data, r->uri.len,
                                           NGX_HTTP_LLM_GATEWAY_PATH_MAX,
                                           &path);

    p = ngx_pnalloc(r->pool, method.len + path.len + 80);
    if (p != NULL) {
        ngx_sprintf(p, "Unknown request URL: %V %V. Please check the URL "
                    "for typos.%Z", &method, &path);
    }

    ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_NOT_FOUND,
                                      "invalid_request_error", "unknown_url",
                                      NULL, (char *) p);
}


/*
 * The list, or the model id names, sent.  NGX_DECLINED: refused (a model
 * the key may not call is not found, as one that does not exist), ctx
 * says why; else what the request finalizes with.
 */

ngx_int_t
ngx_http_llm_gateway_models_send(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *id)
{
    u_char                       *p;
    size_t                        len;
    ngx_buf_t                    *b;
    ngx_str_t                    *s, name, have;
    ngx_uint_t                    i;
    ngx_array_t                   ids;
    ngx_http_llm_gateway_page_t   page;

    if (ngx_array_init(&ids, r->pool, 16, sizeof(ngx_str_t)) != NGX_OK
        || ngx_http_llm_gateway_models_collect(r, ctx, &ids) != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_memzero(&page, sizeof(ngx_http_llm_gateway_page_t));

    /* the list's shape is the refusals': one decision for the request */
    page.anthropic = (ngx_http_llm_gateway_reply_dialect(r, ctx)
                      == NGX_HTTP_LLM_GATEWAY_ANTHROPIC);

    if (id->len) {
        s = ids.elts;

        for (i = 0; i < ids.nelts; i++) {
            if (s[i].len == id->len
                && ngx_strncmp(s[i].data, id->data, id->len) == 0)
            {
                break;
            }
        }

        if (i == ids.nelts) {
            (void) ngx_http_llm_gateway_reply_safe(r->pool, id->data,
                                                id->len,
                                                NGX_HTTP_LLM_GATEWAY_PATH_MAX,
                                                &name);

            p = ngx_pnalloc(r->pool, name.len + 40);
            if (p != NULL) {
                ngx_sprintf(p, "The model '%V' does not exist%Z", &name);
            }

            ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_NOT_FOUND,
                                              "invalid_request_error",
                                              "model_not_found", "model",
                                              (char *) p);
            return NGX_DECLINED;
        }

        have = s[i];

        len = NGX_HTTP_LLM_GATEWAY_MODEL_LEN
              + 2 * (have.len + ngx_escape_json(NULL, have.data, have.len));

        b = ngx_create_temp_buf(r->pool, len);
        if (b == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        b->last = ngx_http_llm_gateway_models_object(b->last, &have,
                                                     page.anthropic);
        *b->last++ = '\n';

        return ngx_http_llm_gateway_models_reply(r, b);
    }

    if (ngx_http_llm_gateway_models_page(r, ctx, &ids, &page) != NGX_OK) {
        return ctx->err_status ? NGX_DECLINED
                               : NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    len = sizeof("{\"object\":\"list\",\"data\":[],\"has_more\":false,"
                 "\"first_id\":\"\",\"last_id\":\"\"}\n");

    /* each id twice in its object, and maybe as first_id and last_id */
    for (i = 0; i < page.n; i++) {
        len += NGX_HTTP_LLM_GATEWAY_MODEL_LEN
               + 4 * (page.ids[i].len + ngx_escape_json(NULL, page.ids[i].data,
                                                        page.ids[i].len));
    }

    b = ngx_create_temp_buf(r->pool, len);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = b->last;

    p = page.anthropic ? ngx_cpymem(p, "{\"data\":[", sizeof("{\"data\":[") - 1)
                       : ngx_cpymem(p, "{\"object\":\"list\",\"data\":[",
                                    sizeof("{\"object\":\"list\",\"data\":[")
                                    - 1);

    for (i = 0; i < page.n; i++) {
        if (i) {
            *p++ = ',';
        }

        p = ngx_http_llm_gateway_models_object(p, &page.ids[i],
                                               page.anthropic);
    }

    *p++ = ']';

    if (page.anthropic) {
        p = ngx_sprintf(p, ",\"has_more\":%s,\"first_id\":",
                        page.has_more ? "true" : "false");

        if (page.n) {
            *p++ = '"';
            p = (u_char *) ngx_escape_json(p, page.ids[0].data,
                                           page.ids[0].len);
            p = ngx_cpymem(p, "\",\"last_id\":\"",
                           sizeof("\",\"last_id\":\"") - 1);
            p = (u_char *) ngx_escape_json(p, page.ids[page.n - 1].data,
                                           page.ids[page.n - 1].len);
            *p++ = '"';

        } else {
            p = ngx_cpymem(p, "null,\"last_id\":null",
                           sizeof("null,\"last_id\":null") - 1);
        }
    }

    p = ngx_cpymem(p, "}\n", 2);

    b->last = p;

    return ngx_http_llm_gateway_models_reply(r, b);
}


static ngx_int_t
ngx_http_llm_gateway_models_reply(ngx_http_request_t *r, ngx_buf_t *b)
{
    ngx_int_t    rc;
    ngx_chain_t  out;

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    b->last_buf = 1;
    b->last_in_chain = 1;

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = b->last - b->pos;
    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


/* one model: OpenAI's object, or Anthropic's */

static u_char *
ngx_http_llm_gateway_models_object(u_char *p, ngx_str_t *id,
    ngx_uint_t anthropic)
{
    if (anthropic) {
        p = ngx_cpymem(p, "{\"type\":\"model\",\"id\":\"",
                       sizeof("{\"type\":\"model\",\"id\":\"") - 1);
        p = (u_char *) ngx_escape_json(p, id->data, id->len);
        p = ngx_cpymem(p, "\",\"display_name\":\"",
                       sizeof("\",\"display_name\":\"") - 1);
        p = (u_char *) ngx_escape_json(p, id->data, id->len);

        return ngx_sprintf(p, "\",\"created_at\":\"%s\"}",
                           ngx_http_llm_gateway_models_date);
    }

    p = ngx_cpymem(p, "{\"id\":\"", sizeof("{\"id\":\"") - 1);
    p = (u_char *) ngx_escape_json(p, id->data, id->len);

    return ngx_sprintf(p, "\",\"object\":\"model\",\"created\":%T,"
                       "\"owned_by\":\"" NGX_HTTP_LLM_GATEWAY_OWNER "\"}",
                       ngx_http_llm_gateway_models_loaded);
}


/*
 * Anthropic's page of the list: limit, after_id, before_id, as its API
 * reads them; OpenAI's list has no pages.  A cursor that is not in the
 * list gives an empty page.
 */

static ngx_int_t
ngx_http_llm_gateway_models_page(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_array_t *ids,
    ngx_http_llm_gateway_page_t *page)
{
    ngx_int_t   limit, after, before, from, to;
    ngx_str_t   v;

    page->ids = ids->elts;
    page->n = ids->nelts;

    if (!page->anthropic) {
        return NGX_OK;
    }

    limit = NGX_HTTP_LLM_GATEWAY_PAGE;

    if (ngx_http_arg(r, (u_char *) "limit", 5, &v) == NGX_OK) {
        limit = ngx_atoi(v.data, v.len);

        if (limit < 1 || limit > NGX_HTTP_LLM_GATEWAY_PAGE_MAX) {
            ngx_http_llm_gateway_reply_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                              "invalid_request_error",
                                              "invalid_value", "limit",
                                              "limit: Input should be an "
                                              "integer from 1 to 1000");
            return NGX_DECLINED;
        }
    }

    if (ngx_http_llm_gateway_models_cursor(r, "after_id", 8, ids, &after)
           != NGX_OK
        || ngx_http_llm_gateway_models_cursor(r, "before_id", 9, ids, &before)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    from = 0;
    to = (ngx_int_t) ids->nelts;

    if (after != NGX_DECLINED) {
        from = (after == NGX_ERROR) ? to : after + 1;
    }

    if (before != NGX_DECLINED) {
        to = (before == NGX_ERROR) ? from : ngx_min(before, to);

        /* the page just before the cursor */
        if (after == NGX_DECLINED && to - from > limit) {
            from = to - limit;
            page->has_more = 1;
        }
    }

    if (from > to) {
        from = to;
    }

    if (to - from > limit) {
        to = from + limit;
        page->has_more = 1;
    }

    page->ids += from;
    page->n = to - from;

    return NGX_OK;
}


/*
 * *at: where the cursor's id is in the list, NGX_DECLINED: no such
 * argument, NGX_ERROR: an id not in it.
 */

static ngx_int_t
ngx_http_llm_gateway_models_cursor(ngx_http_request_t *r, char *name,
    size_t len, ngx_array_t *ids, ngx_int_t *at)
{
    u_char      *dst, *src;
    ngx_str_t    v, *s;
    ngx_uint_t   i;

    *at = NGX_DECLINED;

    if (ngx_http_arg(r, (u_char *) name, len, &v) != NGX_OK) {
        return NGX_OK;
    }

    dst = ngx_pnalloc(r->pool, v.len + 1);
    if (dst == NULL) {
        return NGX_ERROR;
    }

    src = v.data;
    v.data = dst;
    ngx_unescape_uri(&dst, &src, v.len, NGX_UNESCAPE_URI);
    v.len = dst - v.data;

    *at = NGX_ERROR;
    s = ids->elts;

    for (i = 0; i < ids->nelts; i++) {
        if (s[i].len == v.len && ngx_strncmp(s[i].data, v.data, v.len) == 0) {
            *at = (ngx_int_t) i;
            break;
        }
    }

    return NGX_OK;
}


/*
 * What the key may call: the names its models and its tier's list, the
 * aliases and roles (under their own names), the models they stand for,
 * and, for a key and a tier that allow any model, the models the
 * configuration names (every tier's list here, the sunsets), each once
 * and only if a request for it would be admitted as such.  Any other
 * model is callable then too, but no list can say which.
 */

static ngx_int_t
ngx_http_llm_gateway_models_collect(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_array_t *ids)
{
    ngx_uint_t                         i, j;
    ngx_http_llm_gateway_role_t       *role;
    ngx_http_llm_gateway_tier_t       *tier;
    ngx_http_llm_gateway_alias_t      *alias;
    ngx_http_llm_gateway_member_t     *m;
    ngx_http_llm_gateway_sunset_t     *sn;
    ngx_http_llm_gateway_loc_conf_t   *llcf;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);
    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    if (ngx_http_llm_gateway_models_add_list(ctx, ids, ctx->key->models.data)
        != NGX_OK
        || ngx_http_llm_gateway_models_add_list(ctx, ids, ctx->tier->models)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (llcf->aliases) {
        alias = llcf->aliases->elts;

        for (i = 0; i < llcf->aliases->nelts; i++) {
            if (ngx_http_llm_gateway_models_add(ctx, ids, alias[i].name.data,
                                                alias[i].name.len)
                != NGX_OK
                || ngx_http_llm_gateway_models_add(ctx, ids,
                                                   alias[i].model.data,
                                                   alias[i].model.len)
                   != NGX_OK)
            {
                return NGX_ERROR;
            }
        }
    }

    if (lmcf->roles) {
        role = lmcf->roles->elts;

        for (i = 0; i < lmcf->roles->nelts; i++) {
            if (ngx_http_llm_gateway_models_add(ctx, ids, role[i].name.data,
                                                role[i].name.len)
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            m = role[i].members.elts;

            for (j = 0; j < role[i].members.nelts; j++) {
                if (m[j].model.len
                    && ngx_http_llm_gateway_models_add(ctx, ids,
                                                       m[j].model.data,
                                                       m[j].model.len)
                       != NGX_OK)
                {
                    return NGX_ERROR;
                }
            }
        }
    }

    tier = llcf->tiers->elts;

    for (i = 0; i < llcf->tiers->nelts; i++) {
        if (ngx_http_llm_gateway_models_add_list(ctx, ids, tier[i].models)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    if (llcf->sunsets) {
        sn = llcf->sunsets->elts;

        for (i = 0; i < llcf->sunsets->nelts; i++) {
            if (ngx_http_llm_gateway_models_add(ctx, ids, sn[i].model.data,
                                                sn[i].model.len)
                != NGX_OK)
            {
                return NGX_ERROR;
            }
        }
    }

    return NGX_OK;
}


/* the names of a models list ("*": none), NUL-terminated */

static ngx_int_t
ngx_http_llm_gateway_models_add_list(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_array_t *ids, u_char *list)
{
    u_char  *p, *end;

    if (list == NULL || (list[0] == '*' && list[1] == '\0')) {
        return NGX_OK;
    }

    for (p = list; *p; p = (*end == ',') ? end + 1 : end) {
        end = (u_char *) ngx_strchr(p, ',');

        if (end == NULL) {
            end = p + ngx_strlen(p);
        }

        if (end > p
            && ngx_http_llm_gateway_models_add(ctx, ids, p, end - p)
               != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_gateway_models_add(ngx_http_llm_gateway_ctx_t *ctx,
    ngx_array_t *ids, u_char *name, size_t len)
{
    ngx_str_t   *s;
    ngx_uint_t   i;

    if (len == 0 || len >= LLM_RECORD_MODEL_MAX) {
        return NGX_OK;
    }

    s = ids->elts;

    for (i = 0; i < ids->nelts; i++) {
        if (s[i].len == len && ngx_strncmp(s[i].data, name, len) == 0) {
            return NGX_OK;
        }
    }

    if (!ngx_http_llm_gateway_models_callable(ctx, name, len)) {
        return NGX_OK;
    }

    s = ngx_array_push(ids);
    if (s == NULL) {
        return NGX_ERROR;
    }

    s->data = name;
    s->len = len;

    return NGX_OK;
}


/*
 * As admission decides (admit.c, route.c): a role if the key and its tier
 * allow its name or the model of one of its backends; an alias if they
 * allow it or the model it stands for; any other name if they allow it.
 */

static ngx_uint_t
ngx_http_llm_gateway_models_callable(ngx_http_llm_gateway_ctx_t *ctx,
    u_char *name, size_t len)
{
    ngx_uint_t                         i;
    ngx_http_request_t                *r;
    ngx_http_llm_gateway_role_t       *role;
    ngx_http_llm_gateway_alias_t      *alias;
    ngx_http_llm_gateway_member_t     *m;
    ngx_http_llm_gateway_loc_conf_t   *llcf;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    if (ngx_http_llm_gateway_auth_model_allowed(ctx, (char *) name, len)) {
        return 1;
    }

    r = ctx->request;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    role = ngx_http_llm_gateway_backend_role_find(lmcf, name, len);

    if (role != NULL) {
        m = role->members.elts;

        for (i = 0; i < role->members.nelts; i++) {
            if (m[i].model.len
                && ngx_http_llm_gateway_auth_model_allowed(
                       ctx, (char *) m[i].model.data, m[i].model.len))
            {
                return 1;
            }
        }

        return 0;
    }

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    alias = ngx_http_llm_gateway_request_find_alias(llcf, (char *) name, len);

    return alias != NULL
           && ngx_http_llm_gateway_auth_model_allowed(
                  ctx, (char *) alias->model.data, alias->model.len);
}
