
/*
 * The first gate: the API key, from "Authorization: Bearer" or (for
 * Anthropic clients) "x-api-key", hashed with HMAC-SHA256 under the
 * server-side secret and looked up in the snapshot's sorted array.
 * Nothing of the key is ever logged.
 */


#include "ngx_http_llm_gateway_module.h"


static ngx_int_t ngx_http_llm_gateway_get_key(ngx_http_request_t *r,
    ngx_str_t *key);
static ngx_http_llm_gateway_key_t *ngx_http_llm_gateway_find_key(
    ngx_http_llm_gateway_main_conf_t *lmcf, u_char *hash);


ngx_int_t
ngx_http_llm_gateway_auth(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char                             hash[LLM_KEY_HASH_LEN];
    ngx_str_t                          key;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    if (ngx_http_llm_gateway_get_key(r, &key) != NGX_OK) {
        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_UNAUTHORIZED,
                                    "invalid_request_error",
                                    "invalid_api_key", NULL,
                                    "You didn't provide an API key. Send it "
                                    "as \"Authorization: Bearer KEY\".");
        return NGX_DECLINED;
    }

    /* a malformed key costs no HMAC and no lookup */
    if (lmcf->secret_len == 0
        || !llm_key_well_formed((char *) key.data, key.len)
        || llm_key_hmac(lmcf->secret, lmcf->secret_len, (char *) key.data,
                        key.len, hash)
           != 0
        || (ctx->key = ngx_http_llm_gateway_find_key(lmcf, hash)) == NULL)
    {
        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_UNAUTHORIZED,
                                    "invalid_request_error",
                                    "invalid_api_key", NULL,
                                    "Incorrect API key provided.");
        return NGX_DECLINED;
    }

    ngx_explicit_memzero(hash, sizeof(hash));

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_gateway_get_key(ngx_http_request_t *r, ngx_str_t *key)
{
    ngx_str_t         name = ngx_string("x-api-key");
    ngx_table_elt_t  *h;

    h = r->headers_in.authorization;

    if (h != NULL) {
        if (h->value.len > sizeof("Bearer ") - 1
            && ngx_strncasecmp(h->value.data, (u_char *) "Bearer ",
                               sizeof("Bearer ") - 1)
               == 0)
        {
            key->data = h->value.data + sizeof("Bearer ") - 1;
            key->len = h->value.len - (sizeof("Bearer ") - 1);

            while (key->len && *key->data == ' ') {
                key->data++;
                key->len--;
            }

            return key->len ? NGX_OK : NGX_DECLINED;
        }

        return NGX_DECLINED;
    }

    h = ngx_http_llm_gateway_find_header(r, &name);

    if (h != NULL && h->value.len) {
        *key = h->value;
        return NGX_OK;
    }

    return NGX_DECLINED;
}


ngx_table_elt_t *
ngx_http_llm_gateway_find_header(ngx_http_request_t *r, ngx_str_t *name)
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


static ngx_http_llm_gateway_key_t *
ngx_http_llm_gateway_find_key(ngx_http_llm_gateway_main_conf_t *lmcf,
    u_char *hash)
{
    ngx_int_t                    rc;
    ngx_uint_t                   lo, hi, mid;
    ngx_http_llm_gateway_key_t  *keys;

    keys = lmcf->keys.elts;
    lo = 0;
    hi = lmcf->keys.nelts;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;

        rc = ngx_memcmp(hash, keys[mid].hash, LLM_KEY_HASH_LEN);

        if (rc == 0) {
            return &keys[mid];
        }

        if (rc < 0) {
            hi = mid;

        } else {
            lo = mid + 1;
        }
    }

    return NULL;
}
