
/*
 * The first gate: the API key, from "Authorization: Bearer", "x-api-key"
 * (Anthropic clients) or "api-key" (Azure clients), hashed with HMAC-SHA256
 * under the server-side secret and looked up in the snapshot's sorted
 * array.  Every refusal has the same body, so that it tells an attacker
 * nothing; nothing of a key is ever logged, and the key headers never
 * reach the upstream, whose credential the location sets.
 */


#include "ngx_http_llm_gateway_module.h"


static ngx_int_t ngx_http_llm_gateway_get_key(ngx_http_request_t *r,
    ngx_str_t *key);
static void ngx_http_llm_gateway_hide_keys(ngx_http_request_t *r);
static ngx_uint_t ngx_http_llm_gateway_key_header(ngx_str_t *key);
static ngx_http_llm_gateway_key_t *ngx_http_llm_gateway_find_key(
    ngx_http_llm_gateway_main_conf_t *lmcf, u_char *hash);


ngx_int_t
ngx_http_llm_gateway_auth(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    u_char                             hash[LLM_KEY_HASH_LEN];
    ngx_int_t                          rc;
    ngx_str_t                          key;
    ngx_http_llm_gateway_key_t        *k;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    k = NULL;

    /* a malformed key (its checksum) costs no HMAC and no lookup */
    if (ngx_http_llm_gateway_get_key(r, &key) == NGX_OK
        && lmcf->secret_len
        && llm_key_well_formed((char *) key.data, key.len)
        && llm_key_hmac(lmcf->secret, lmcf->secret_len, (char *) key.data,
                        key.len, hash)
           == 0)
    {
        k = ngx_http_llm_gateway_find_key(lmcf, hash);
        ngx_explicit_memzero(hash, sizeof(hash));
    }

    ngx_http_llm_gateway_hide_keys(r);

    /* expired keys, rotated ones past their grace, stop by themselves */
    if (k == NULL || (k->expires && ngx_time() >= k->expires)) {
        ngx_http_llm_gateway_refuse(ctx, NGX_HTTP_UNAUTHORIZED,
                                    "invalid_request_error",
                                    "invalid_api_key", NULL,
                                    "Invalid API key.");
        rc = NGX_DECLINED;

    } else {
        ctx->key = k;
        rc = NGX_OK;
    }

    return rc;
}


static ngx_str_t  ngx_http_llm_gateway_key_headers[] = {
    ngx_string("x-api-key"),
    ngx_string("api-key"),
    ngx_null_string
};


static ngx_int_t
ngx_http_llm_gateway_get_key(ngx_http_request_t *r, ngx_str_t *key)
{
    ngx_str_t        *name;
    ngx_table_elt_t  *h;

    h = r->headers_in.authorization;

    if (h != NULL) {
        if (h->value.len <= sizeof("Bearer ") - 1
            || ngx_strncasecmp(h->value.data, (u_char *) "Bearer ",
                               sizeof("Bearer ") - 1)
               != 0)
        {
            return NGX_DECLINED;
        }

        key->data = h->value.data + sizeof("Bearer ") - 1;
        key->len = h->value.len - (sizeof("Bearer ") - 1);

        while (key->len && *key->data == ' ') {
            key->data++;
            key->len--;
        }

        return key->len ? NGX_OK : NGX_DECLINED;
    }

    for (name = ngx_http_llm_gateway_key_headers; name->len; name++) {
        h = ngx_http_llm_gateway_find_header(r, name);

        if (h != NULL && h->value.len) {
            *key = h->value;
            return NGX_OK;
        }
    }

    return NGX_DECLINED;
}


/*
 * The client's key must not travel on: each key header becomes an empty
 * "TE", a name the proxy module always drops from client headers (it sets
 * its own), and nobody reads it again.  The element stays where it is, so
 * that the pointers r->headers_in keeps into the list stay right.
 */

static void
ngx_http_llm_gateway_hide_keys(ngx_http_request_t *r)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    part = &r->headers_in.headers.part;
    h = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                break;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (!ngx_http_llm_gateway_key_header(&h[i].key)) {
            continue;
        }

        ngx_str_set(&h[i].key, "TE");
        ngx_str_set(&h[i].value, "");
        h[i].lowcase_key = (u_char *) "te";
        h[i].hash = ngx_hash_key(h[i].lowcase_key, 2);
    }

    r->headers_in.authorization = NULL;
}


static ngx_uint_t
ngx_http_llm_gateway_key_header(ngx_str_t *key)
{
    ngx_str_t  *name;

    if (key->len == sizeof("authorization") - 1
        && ngx_strncasecmp(key->data, (u_char *) "authorization",
                           sizeof("authorization") - 1)
           == 0)
    {
        return 1;
    }

    for (name = ngx_http_llm_gateway_key_headers; name->len; name++) {
        if (key->len == name->len
            && ngx_strncasecmp(key->data, name->data, name->len) == 0)
        {
            return 1;
        }
    }

    return 0;
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
