
/*
 * The request as the gateway holds it: the body read in memory, the model
 * it names resolved through the location's aliases and tiers, the body
 * rewritten for the upstream, and the request prepared again for another
 * upstream after a failover.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_request.h"
#include "ngx_http_llm_gateway_backend.h"
#include "ngx_http_llm_gateway_json.h"
#include "ngx_http_llm_gateway_reply.h"
#include "ngx_http_llm_gateway_translate.h"


/*
 * The usage is read from the bytes as they pass: the upstream must not
 * compress them.  nginx's own gzip filter may still compress for the
 * client, after the metering filter has seen them.
 */

ngx_int_t
ngx_http_llm_gateway_request_identity(ngx_http_request_t *r)
{
    ngx_str_t         name = ngx_string("accept-encoding");
    ngx_table_elt_t  *h;

    h = ngx_http_llm_gateway_request_find_header(r, &name);

    if (h != NULL) {
        ngx_str_set(&h->value, "identity");
    }

    return NGX_OK;
}


/* the body as one piece of memory */

ngx_int_t
ngx_http_llm_gateway_request_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *body)
{
    u_char       *p;
    size_t        len;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    if (r->request_body == NULL || r->request_body->bufs == NULL) {
        ngx_str_set(body, "");
        return NGX_OK;
    }

    if (r->request_body->temp_file) {
        ngx_http_llm_gateway_reply_too_large(ctx);
        return NGX_DECLINED;
    }

    cl = r->request_body->bufs;

    if (cl->next == NULL) {
        b = cl->buf;

        /* an empty chunked body is a last buffer without memory */
        if (b->pos == b->last) {
            ngx_str_set(body, "");
            return NGX_OK;
        }

        body->data = b->pos;
        body->len = b->last - b->pos;
        return NGX_OK;
    }

    len = 0;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        len += cl->buf->last - cl->buf->pos;
    }

    p = ngx_pnalloc(r->pool, len);
    if (p == NULL) {
        return NGX_ERROR;
    }

    body->data = p;
    body->len = len;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        /* the last buffer of a chunked body may have no memory */
        if (cl->buf->pos != cl->buf->last) {
            p = ngx_cpymem(p, cl->buf->pos, cl->buf->last - cl->buf->pos);
        }
    }

    return NGX_OK;
}


/*
 * The member the output limit goes upstream in: the client's, or for the
 * default the one this attempt's backend wants (Chat: limit_param=).
 */

const char *
ngx_http_llm_gateway_request_limit_name(ngx_http_llm_gateway_ctx_t *ctx)
{
    ctx->req.chat_max_tokens = (ctx->backend != NULL
                                && ctx->backend->chat_max_tokens);

    return llm_inspect_max_name(&ctx->req);
}


/*
 * The upstream gets what the gateway needs: usage in every stream and an
 * output limit that bounds the reservation, lowered where the tier lowers.
 * The proxy module sends r->request_body->bufs with
 * headers_in.content_length_n as its length.
 */

ngx_int_t
ngx_http_llm_gateway_request_rewrite_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *body)
{
    u_char       *p, *s;
    size_t        len;
    ngx_str_t     tx;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    (void) ngx_http_llm_gateway_request_limit_name(ctx);

    if (ctx->translated) {
        /* the backend's dialect, written from the client's body */
        if (ngx_http_llm_gateway_translate_request(r, ctx, &tx) != NGX_OK) {
            return NGX_ERROR;
        }

        p = tx.data;
        len = tx.len;

    } else if (!llm_inspect_needs_rewrite(&ctx->req)) {
        /* the client's own: an attempt after a translated one */
        p = body->data;
        len = body->len;

    } else if (ctx->req.rebuild) {
        ngx_http_llm_gateway_json_pool(r->pool);
        s = (u_char *) llm_inspect_rebuild((char *) body->data, body->len,
                                           &ctx->req);
        ngx_http_llm_gateway_json_pool(NULL);

        if (s == NULL) {
            return NGX_ERROR;
        }

        p = s;
        len = ngx_strlen(s);

    } else {
        p = ngx_pnalloc(r->pool, body->len + LLM_INSPECT_SPLICE_MAX);
        if (p == NULL) {
            return NGX_ERROR;
        }

        len = llm_inspect_splice((char *) body->data, body->len, &ctx->req,
                                 (char *) p,
                                 body->len + LLM_INSPECT_SPLICE_MAX);
        if (len == 0) {
            return NGX_ERROR;
        }
    }

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->pos = p;
    b->last = p + len;
    b->start = p;
    b->end = p + len;
    b->temporary = 1;
    b->last_buf = 1;
    b->last_in_chain = 1;

    cl = ngx_alloc_chain_link(r->pool);
    if (cl == NULL) {
        return NGX_ERROR;
    }

    cl->buf = b;
    cl->next = NULL;

    r->request_body->bufs = cl;
    r->headers_in.content_length_n = len;

    if (r->headers_in.content_length) {
        s = ngx_pnalloc(r->pool, NGX_OFF_T_LEN);
        if (s == NULL) {
            return NGX_ERROR;
        }

        r->headers_in.content_length->value.data = s;
        r->headers_in.content_length->value.len = ngx_sprintf(s, "%uz", len)
                                                  - s;
    }

    return NGX_OK;
}


ngx_http_llm_gateway_alias_t *
ngx_http_llm_gateway_request_find_alias(ngx_http_llm_gateway_loc_conf_t *llcf,
    char *model, size_t len)
{
    ngx_uint_t                     i;
    ngx_http_llm_gateway_alias_t  *a;

    if (llcf->aliases == NULL) {
        return NULL;
    }

    a = llcf->aliases->elts;

    for (i = 0; i < llcf->aliases->nelts; i++) {
        if (a[i].name.len == len
            && ngx_strncmp(a[i].name.data, model, len) == 0)
        {
            return &a[i];
        }
    }

    return NULL;
}


ngx_http_llm_gateway_tier_t *
ngx_http_llm_gateway_request_find_tier(ngx_http_llm_gateway_loc_conf_t *llcf,
    ngx_str_t *name)
{
    ngx_uint_t                    i;
    ngx_http_llm_gateway_tier_t  *t;

    t = llcf->tiers->elts;

    for (i = 0; i < llcf->tiers->nelts; i++) {
        if (t[i].name.len == name->len
            && ngx_strncmp(t[i].name.data, name->data, name->len) == 0)
        {
            return &t[i];
        }
    }

    return NULL;
}


/*
 * A request that fails over to another backend: its body is written again
 * for that backend's model and dialect (the last attempt's may have been
 * another's), and its flight says the model it now calls.
 */

ngx_int_t
ngx_http_llm_gateway_request_reprepare(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_http_llm_gateway_zone_t    *zone;
    ngx_http_llm_gateway_flight_t  *f;

    if (ngx_http_llm_gateway_request_rewrite_body(r, ctx, &ctx->body)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    f = ctx->flight;

    if (f == NULL) {
        return NGX_OK;
    }

    zone = ctx->zone;

    ngx_shmtx_lock(&zone->shpool->mutex);

    /* a role's flight has room for any model (flight_start()) */
    f->model_len = (u_char) ngx_min(ctx->req.model_len, LLM_RECORD_MODEL_MAX);
    ngx_memcpy(f->data + f->request_id_len, ctx->req.model, f->model_len);

    ngx_shmtx_unlock(&zone->shpool->mutex);

    return NGX_OK;
}


ngx_table_elt_t *
ngx_http_llm_gateway_request_find_header(ngx_http_request_t *r, ngx_str_t *name)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    part = &r->headers_in.headers.part;
    h = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                return NULL;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].key.len == name->len
            && ngx_strncasecmp(h[i].key.data, name->data, name->len) == 0)
        {
            return &h[i];
        }
    }
}
