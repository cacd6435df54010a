
/*
 * llm_gateway_metrics: the gateway's counters in the Prometheus text
 * format, from shared memory, as stub_status serves nginx's.  Nothing here
 * is on the request path of the gateway's locations.
 */


#include "ngx_http_llm_gateway_module.h"


/* the longest text of the metrics below */
#define NGX_HTTP_LLM_GATEWAY_METRICS_MAX   4096


ngx_int_t
ngx_http_llm_gateway_metrics_handler(ngx_http_request_t *r)
{
    u_char                               *p;
    ngx_int_t                             rc;
    ngx_buf_t                            *b;
    ngx_chain_t                           out;
    ngx_http_llm_gateway_main_conf_t     *lmcf;
    ngx_http_llm_gateway_journal_stats_t  st;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    ngx_http_llm_gateway_journal_stats(lmcf, &st);

    b = ngx_create_temp_buf(r->pool, NGX_HTTP_LLM_GATEWAY_METRICS_MAX);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = b->last;

    p = ngx_sprintf(p,
        "# HELP llmgw_journal_written_total Settle records written to the "
        "journal.\n"
        "# TYPE llmgw_journal_written_total counter\n"
        "llmgw_journal_written_total %uL\n"
        "# HELP llmgw_journal_acknowledged_total Records accountd "
        "acknowledged: committed to PostgreSQL.\n"
        "# TYPE llmgw_journal_acknowledged_total counter\n"
        "llmgw_journal_acknowledged_total %uL\n"
        "# HELP llmgw_journal_lost_total Records that found the journal "
        "full and were lost (full=admit).\n"
        "# TYPE llmgw_journal_lost_total counter\n"
        "llmgw_journal_lost_total %uL\n"
        "# HELP llmgw_journal_unacknowledged Records written and not yet "
        "acknowledged by accountd.\n"
        "# TYPE llmgw_journal_unacknowledged gauge\n"
        "llmgw_journal_unacknowledged %uL\n"
        "# HELP llmgw_journal_refused_total Requests refused with 503 "
        "because the journal was full (full=refuse).\n"
        "# TYPE llmgw_journal_refused_total counter\n"
        "llmgw_journal_refused_total %uL\n"
        "# HELP llmgw_journal_bytes The journal's size, the bytes its "
        "records take, and those held for requests in flight.\n"
        "# TYPE llmgw_journal_bytes gauge\n"
        "llmgw_journal_bytes{kind=\"size\"} %uz\n"
        "llmgw_journal_bytes{kind=\"used\"} %uz\n"
        "llmgw_journal_bytes{kind=\"held\"} %uz\n"
        "# HELP llmgw_accountd_connected Whether the worker that answered "
        "is connected to accountd.\n"
        "# TYPE llmgw_accountd_connected gauge\n"
        "llmgw_accountd_connected{pid=\"%P\"} %ui\n",
        st.journal.written, st.journal.acked, st.journal.lost,
        st.journal.written - st.journal.acked, st.journal.refused,
        st.journal.size, st.journal.used, st.journal.held,
        ngx_pid, st.connected);

    b->last = p;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = b->last - b->pos;

    ngx_str_set(&r->headers_out.content_type,
                "text/plain; version=0.0.4; charset=utf-8");
    r->headers_out.content_type_len = sizeof("text/plain") - 1;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}
