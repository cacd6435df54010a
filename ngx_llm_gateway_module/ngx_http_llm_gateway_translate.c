
/*
 * Translation between dialects: a request whose location speaks one
 * (Chat Completions, Messages, Responses) and whose backend another goes
 * upstream in the backend's, and its answer comes back in the client's:
 * a stream event by event as the backend sends it, a whole answer or an
 * error once it is all in.  The cores (llm_tx_*) do the writing; this file
 * gives them the request's figures and its memory.  The gateway meters the
 * backend's own bytes, before translation.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_translate.h"
#include "ngx_http_llm_gateway_backend.h"
#include "ngx_http_llm_gateway_json.h"

#include "llm_tx_request.h"
#include "llm_tx_stream.h"
#include "llm_tx_body.h"


typedef struct {
    llm_tx_stream_t              stream;
    llm_tx_conf_t                conf;

    /* the events' trees: a pool of its own, emptied after each event */
    ngx_pool_t                  *scratch;

    /* where the stream's output goes while a buffer is fed */
    llm_tx_out_pt                out;
    void                        *out_data;
    int                          rc;

    /* dialects tried (bits 1 << api), and of them those that refused */
    uint32_t                     checked;
    uint32_t                     refused;
    char                         param[LLM_TX_PARAM_MAX];
    char                         message[LLM_TX_MESSAGE_MAX];

    /* the last translation, and what it was written for */
    ngx_str_t                    body;
    llm_api_e                    body_api;
    ngx_uint_t                   body_chat_max;
    ngx_str_t                    body_model;
} ngx_http_llm_gateway_tx_t;


static ngx_http_llm_gateway_tx_t *ngx_http_llm_gateway_translate_state(
    ngx_http_request_t *r, ngx_http_llm_gateway_ctx_t *ctx);
static ngx_int_t ngx_http_llm_gateway_translate_to(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_api_e api, ngx_uint_t chat_max,
    ngx_str_t *model);
static void ngx_http_llm_gateway_translate_scratch_free(void *data);
static void ngx_http_llm_gateway_translate_event(void *data,
    const char *event, size_t event_len, const char *p, size_t len,
    unsigned skipped);
static void ngx_http_llm_gateway_translate_own_uri(ngx_http_request_t *r,
    ngx_str_t *uri);
static void ngx_http_llm_gateway_translate_conf(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_tx_conf_t *cf);


static const char  *ngx_http_llm_gateway_dialects[] = {
    "", "Chat Completions", "Messages", "Responses", "Embeddings", "", "", ""
};


/* the dialect b speaks at the location of r: its own, or the location's */

llm_api_e
ngx_http_llm_gateway_translate_api(ngx_http_request_t *r,
    ngx_http_llm_gateway_backend_t *b)
{
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    if (b == NULL || b->api == 0 || b->api == llcf->api) {
        return llcf->api;
    }

    /*
     * Passed on as they are, to a backend of their provider: embeddings
     * are OpenAI's, a token count Anthropic's.  A backend of another is
     * of another API, which a role leaves out.
     */
    if ((llcf->api == LLM_API_EMBEDDINGS
         && (b->api == LLM_API_OPENAI || b->api == LLM_API_RESPONSES))
        || (llcf->api == LLM_API_COUNT_TOKENS && b->api == LLM_API_ANTHROPIC))
    {
        return llcf->api;
    }

    return b->api;
}


/* this attempt goes to ctx->backend: in its dialect, or the client's */

void
ngx_http_llm_gateway_translate_use(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    ctx->up_api = ngx_http_llm_gateway_translate_api(r, ctx->backend);
    ctx->translated = (ctx->up_api != llcf->api);
}


/*
 * Whether the request can go to b with model: the same dialect, or one it
 * translates to.  What a dialect refuses, it refuses whatever the model:
 * each is tried once, and the last translation is kept for the attempt
 * that follows.
 */

ngx_uint_t
ngx_http_llm_gateway_translate_can(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_http_llm_gateway_backend_t *b,
    ngx_str_t *model)
{
    uint32_t                          bit;
    llm_api_e                         api;
    ngx_http_llm_gateway_tx_t        *tx;
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    api = ngx_http_llm_gateway_translate_api(r, b);

    if (api == llcf->api) {
        return 1;
    }

    tx = ngx_http_llm_gateway_translate_state(r, ctx);
    if (tx == NULL) {
        return 0;
    }

    bit = (uint32_t) 1 << api;

    if (tx->refused & bit) {
        return 0;
    }

    if (tx->checked & bit) {
        return 1;
    }

    if (!llm_tx_request_supported(llcf->api, api)) {
        tx->checked |= bit;
        tx->refused |= bit;

        if (tx->param[0] == '\0') {
            ngx_cpystrn((u_char *) tx->param, (u_char *) "model",
                        LLM_TX_PARAM_MAX);
            (void) ngx_snprintf((u_char *) tx->message, LLM_TX_MESSAGE_MAX - 1,
                                "This model is served in the %s API, which "
                                "a %s request cannot be translated to.%Z",
                                ngx_http_llm_gateway_dialects[api & 7],
                                ngx_http_llm_gateway_dialects[llcf->api & 7]);
        }

        return 0;
    }

    return ngx_http_llm_gateway_translate_to(r, ctx, api, b->chat_max_tokens,
                                             model)
           == NGX_OK;
}


/* what the last dialect that refused the request said */

void
ngx_http_llm_gateway_translate_refusal(ngx_http_llm_gateway_ctx_t *ctx,
    const char **param, const char **message)
{
    ngx_http_llm_gateway_tx_t  *tx = ctx->tx;

    if (tx == NULL || tx->param[0] == '\0') {
        *param = NULL;
        *message = "The request cannot be translated for its backend.";
        return;
    }

    *param = tx->param;
    *message = tx->message;
}


/*
 * The body for this attempt's backend, in its dialect, with its model and
 * the output limit admitted.  NGX_DECLINED: the dialect cannot take the
 * request (translate_refusal() says why).
 */

ngx_int_t
ngx_http_llm_gateway_translate_request(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *out)
{
    ngx_int_t                   rc;
    ngx_str_t                   model;
    ngx_uint_t                  chat_max;
    ngx_http_llm_gateway_tx_t  *tx;

    tx = ngx_http_llm_gateway_translate_state(r, ctx);
    if (tx == NULL) {
        return NGX_ERROR;
    }

    model.data = (u_char *) ctx->req.model;
    model.len = ctx->req.model_len;
    chat_max = ctx->backend->chat_max_tokens;

    if (tx->body.len == 0
        || tx->body_api != ctx->up_api
        || tx->body_chat_max != chat_max
        || tx->body_model.len != model.len
        || ngx_strncmp(tx->body_model.data, model.data, model.len) != 0)
    {
        rc = ngx_http_llm_gateway_translate_to(r, ctx, ctx->up_api, chat_max,
                                               &model);
        if (rc != NGX_OK) {
            return rc;
        }
    }

    *out = tx->body;

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_gateway_translate_to(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_api_e api, ngx_uint_t chat_max,
    ngx_str_t *model)
{
    int                               rc;
    uint32_t                          bit;
    ngx_pool_t                       *prev;
    llm_tx_request_t                  out;
    llm_tx_request_conf_t             cf;
    ngx_http_llm_gateway_tx_t        *tx;
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);
    tx = ctx->tx;
    bit = (uint32_t) 1 << api;

    ngx_memzero(&cf, sizeof(llm_tx_request_conf_t));
    ngx_memzero(&out, sizeof(llm_tx_request_t));

    cf.from = llcf->api;
    cf.to = api;
    cf.model = (const char *) model->data;
    cf.model_len = model->len;
    cf.max_tokens = ctx->req.max_tokens;
    cf.chat_max_tokens = chat_max ? 1 : 0;

    prev = ngx_http_llm_gateway_json_pool(r->pool);
    rc = llm_tx_request(&cf, (const char *) ctx->body.data, ctx->body.len,
                        &out);
    (void) ngx_http_llm_gateway_json_pool(prev);

    tx->checked |= bit;

    if (rc == -1) {
        tx->refused |= bit;

        ngx_memcpy(tx->param, out.param, LLM_TX_PARAM_MAX);
        ngx_memcpy(tx->message, out.message, LLM_TX_MESSAGE_MAX);
        tx->param[LLM_TX_PARAM_MAX - 1] = '\0';
        tx->message[LLM_TX_MESSAGE_MAX - 1] = '\0';

        return NGX_DECLINED;
    }

    if (rc != 0) {
        return NGX_ERROR;
    }

    tx->body.data = (u_char *) out.body;
    tx->body.len = out.len;
    tx->body_api = api;
    tx->body_chat_max = chat_max;

    tx->body_model.data = ngx_pnalloc(r->pool, model->len + 1);
    if (tx->body_model.data == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(tx->body_model.data, model->data, model->len);
    tx->body_model.len = model->len;

    return NGX_OK;
}


static ngx_http_llm_gateway_tx_t *
ngx_http_llm_gateway_translate_state(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    if (ctx->tx == NULL) {
        ctx->tx = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_gateway_tx_t));
    }

    return ctx->tx;
}


/*
 * The location's path as the upstream reads it: nginx's, normalised and
 * decoded, escaped again (a decoded CR or LF would end the request line),
 * and the arguments as they came.
 */

static void
ngx_http_llm_gateway_translate_own_uri(ngx_http_request_t *r,
    ngx_str_t *uri)
{
    u_char     *p;
    uintptr_t   n;

    n = ngx_escape_uri(NULL, r->uri.data, r->uri.len, NGX_ESCAPE_URI);

    if (n == 0 && r->args.len == 0) {
        *uri = r->uri;
        return;
    }

    p = ngx_pnalloc(r->pool, r->uri.len + 2 * n + 1 + r->args.len);
    if (p == NULL) {
        ngx_str_null(uri);
        return;
    }

    uri->data = p;
    p = (u_char *) ngx_escape_uri(p, r->uri.data, r->uri.len, NGX_ESCAPE_URI);

    if (r->args.len) {
        *p++ = '?';
        p = ngx_cpymem(p, r->args.data, r->args.len);
    }

    uri->len = p - uri->data;
}


/* $llm_upstream_uri: the path of the backend's dialect, or the location's */

void
ngx_http_llm_gateway_translate_uri(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *uri)
{
    if (ctx == NULL || !ctx->translated) {
        ngx_http_llm_gateway_translate_own_uri(r, uri);
        return;
    }

    switch (ctx->up_api) {

    case LLM_API_ANTHROPIC:
        ngx_str_set(uri, "/v1/messages");
        break;

    case LLM_API_RESPONSES:
        ngx_str_set(uri, "/v1/responses");
        break;

    default:
        ngx_str_set(uri, "/v1/chat/completions");
        break;
    }
}


static void
ngx_http_llm_gateway_translate_conf(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, llm_tx_conf_t *cf)
{
    ngx_http_llm_gateway_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    ngx_memzero(cf, sizeof(llm_tx_conf_t));

    /* the client's, as inspected: an error page's location has its own */
    cf->from = ctx->up_api;
    cf->to = ctx->req.api;

    /* the name the client called: a role's, or the model itself */
    if (ctx->role) {
        cf->model = (const char *) ctx->role_name.data;
        cf->model_len = ctx->role_name.len;

    } else {
        cf->model = ctx->req.model;
        cf->model_len = ctx->req.model_len;
    }

    cf->id = (const char *) ctx->request_id.data;
    cf->id_len = ctx->request_id.len;
    cf->created = (int64_t) ngx_time();
    cf->est_input = ctx->req.prompt_tokens;
    cf->max_tokens = ctx->req.max_tokens;
    cf->grow = ngx_http_llm_gateway_json_grow;
    cf->grow_ctx = r->pool;
    cf->max = llcf->response_buffer;

    /* the stream's figures as metered and bounded: what is billed */
    cf->meter = &ctx->sse.usage;
    cf->output_bound = ctx->req.output_bound;

    /* a Chat client that asked for the usage chunk gets it */
    cf->include_usage = (ctx->req.api == LLM_API_OPENAI
                         && !ctx->req.add_include_usage);
}


/* a translated stream: each event the parser reads goes to the translator */

ngx_int_t
ngx_http_llm_gateway_translate_stream_init(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_pool_cleanup_t         *cln;
    ngx_http_llm_gateway_tx_t  *tx;

    tx = ngx_http_llm_gateway_translate_state(r, ctx);
    if (tx == NULL) {
        return NGX_ERROR;
    }

    tx->scratch = ngx_create_pool(NGX_DEFAULT_POOL_SIZE, r->connection->log);
    if (tx->scratch == NULL) {
        return NGX_ERROR;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        ngx_destroy_pool(tx->scratch);
        return NGX_ERROR;
    }

    cln->handler = ngx_http_llm_gateway_translate_scratch_free;
    cln->data = tx->scratch;

    ngx_http_llm_gateway_translate_conf(r, ctx, &tx->conf);
    llm_tx_stream_init(&tx->stream, &tx->conf);

    ctx->sse.on_event = ngx_http_llm_gateway_translate_event;
    ctx->sse.event_ctx = tx;

    return NGX_OK;
}


/*
 * Bytes of the backend's stream, all of them or (one) up to the end of the
 * first event in them (*used says how many): what the client gets of
 * them, to out.  NGX_DECLINED: the translator failed with them (its
 * memory, a write): the caller ends the client's stream with the
 * gateway's error event.
 */

ngx_int_t
ngx_http_llm_gateway_translate_stream(ngx_http_llm_gateway_ctx_t *ctx,
    u_char *p, size_t len, ngx_uint_t one, size_t *used, llm_tx_out_pt out,
    void *data)
{
    ngx_uint_t                  failed;
    ngx_http_llm_gateway_tx_t  *tx = ctx->tx;

    tx->out = out;
    tx->out_data = data;

    failed = (tx->rc != 0);

    /* fed on once the translator failed: the metering goes on */
    ctx->sse.yield = one ? 1 : 0;
    *used = llm_sse_feed(&ctx->sse, (const char *) p, len);
    ctx->sse.yield = 0;

    return (tx->rc && !failed) ? NGX_DECLINED : NGX_OK;
}


/*
 * The backend's stream ended: its last event if unterminated.  *done: how
 * the client's stream ended (translate_stream_done()); if not,
 * translate_stream_fail() ends it.
 */

ngx_int_t
ngx_http_llm_gateway_translate_stream_end(ngx_http_llm_gateway_ctx_t *ctx,
    llm_tx_out_pt out, void *data, ngx_uint_t *done)
{
    ngx_http_llm_gateway_tx_t  *tx = ctx->tx;

    tx->out = out;
    tx->out_data = data;

    llm_sse_finish(&ctx->sse);

    *done = ngx_http_llm_gateway_translate_stream_done(ctx);

    return tx->rc ? NGX_DECLINED : NGX_OK;
}


/*
 * The client's stream did not end: what it left open is closed and the
 * gateway's error event follows, in its dialect.  NGX_DECLINED: the
 * translator cannot write any more (the caller writes the event itself).
 */

ngx_int_t
ngx_http_llm_gateway_translate_stream_fail(ngx_http_llm_gateway_ctx_t *ctx,
    const char *message, llm_tx_out_pt out, void *data)
{
    ngx_http_llm_gateway_tx_t  *tx = ctx->tx;

    if (tx->rc != 0
        || llm_tx_stream_fail(&tx->stream, message, out, data) != 0)
    {
        tx->rc = -1;
        return NGX_DECLINED;
    }

    return NGX_OK;
}


/*
 * How the client's stream ended: 1 complete, 2 with an error event (the
 * backend's or the translator's), 0 not (a failed translator included).
 */

ngx_uint_t
ngx_http_llm_gateway_translate_stream_done(ngx_http_llm_gateway_ctx_t *ctx)
{
    ngx_http_llm_gateway_tx_t  *tx = ctx->tx;

    if (tx->rc != 0 || !llm_tx_stream_done(&tx->stream)) {
        return 0;
    }

    return llm_tx_stream_errored(&tx->stream) ? 2 : 1;
}


static void
ngx_http_llm_gateway_translate_event(void *data, const char *event,
    size_t event_len, const char *p, size_t len, unsigned skipped)
{
    ngx_pool_t                 *prev;
    ngx_http_llm_gateway_tx_t  *tx = data;

    if (tx->rc != 0) {
        return;
    }

    /*
     * The event's tree lives within this call: in the scratch pool, reset
     * after it, not in the request pool, which would keep each one for the
     * stream's whole length.
     */
    prev = ngx_http_llm_gateway_json_pool(tx->scratch);

    if (llm_tx_stream_event(&tx->stream, event, event_len, p, len, skipped,
                            tx->out, tx->out_data)
        != 0)
    {
        tx->rc = -1;
    }

    (void) ngx_http_llm_gateway_json_pool(prev);
    ngx_reset_pool(tx->scratch);
}


static void
ngx_http_llm_gateway_translate_scratch_free(void *data)
{
    ngx_destroy_pool(data);
}



/*
 * A whole answer of the backend, held until its end (ctx->json): in the
 * client's dialect, a success as a success, an error as an error of the
 * same status.  One that cannot be read, or that did not fit, is the
 * gateway's 502.
 */

ngx_int_t
ngx_http_llm_gateway_translate_body(ngx_http_request_t *r,
    ngx_http_llm_gateway_ctx_t *ctx, ngx_str_t *body)
{
    int            rc;
    char          *out;
    size_t         out_len;
    ngx_uint_t     status;
    llm_tx_conf_t  cf;

    ngx_http_llm_gateway_translate_conf(r, ctx, &cf);

    status = r->headers_out.status;
    out = NULL;
    out_len = 0;

    if (status < NGX_HTTP_SPECIAL_RESPONSE) {
        rc = -1;

        if (!ctx->json_overflow) {
            rc = llm_tx_body(&cf, (const char *) ctx->json, ctx->json_len,
                             &out, &out_len);
        }

        if (rc == -1) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "llm gateway: the answer of backend \"%V\" "
                          "could not be translated",
                          &ctx->backend->name);

            status = NGX_HTTP_BAD_GATEWAY;
            r->headers_out.status = status;
            r->headers_out.status_line.len = 0;
            rc = llm_tx_body_error(&cf, status, "", 0, &out, &out_len);
        }

    } else {
        rc = llm_tx_body_error(&cf, status,
                               ctx->json_overflow ? NULL
                                                  : (const char *) ctx->json,
                               ctx->json_overflow ? 0 : ctx->json_len,
                               &out, &out_len);
    }

    if (rc != 0 || out == NULL) {
        return NGX_ERROR;
    }

    body->data = (u_char *) out;
    body->len = out_len;

    return NGX_OK;
}
