
/*
 * What the gateway says of itself, from shared memory, as stub_status
 * serves nginx's:
 *
 *   llm_gateway_metrics   the Prometheus text format: the journal, each
 *                         worker's connection to accountd, the backends,
 *                         each zone's capacity and backpressure, and each
 *                         tenant's requests, refusals, tokens, cost,
 *                         reservations, concurrency and share
 *   llm_gateway_status    the same as JSON (a URI ending in ".json"), or
 *                         a page that shows it live
 *
 * The counters are bumped under the zone's lock the request path takes
 * anyway (admission, settling); the handlers copy what they show under
 * that lock and format it after.
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_metrics.h"
#include "ngx_http_llm_gateway_accountd.h"
#include "ngx_http_llm_gateway_auth.h"
#include "ngx_http_llm_gateway_backend.h"
#include "ngx_http_llm_gateway_budget.h"
#include "ngx_http_llm_gateway_clock.h"
#include "ngx_http_llm_gateway_journal.h"
#include "ngx_http_llm_gateway_zone.h"


/* a worker not heard of for this long (ms) has exited */
#define NGX_HTTP_LLM_GATEWAY_WORKER_GONE   3000

/*
 * The text of the gateway as a whole; a tenant's lines, as many as the
 * families have series, are counted with their labels and the longest
 * line's other bytes
 */
#define NGX_HTTP_LLM_GATEWAY_METRICS_FIXED  8192
#define NGX_HTTP_LLM_GATEWAY_METRICS_LINE   96

/*
 * A zone's capacity lines, its name (64 bytes at most) escaped in each,
 * and their HELP and TYPE lines, once
 */
#define NGX_HTTP_LLM_GATEWAY_METRICS_ZONE   2048
#define NGX_HTTP_LLM_GATEWAY_METRICS_ZONES  1024

/* a tenant's JSON but for its names, escaped at most 6 times as long */
#define NGX_HTTP_LLM_GATEWAY_JSON_TENANT    2048


/* a tenant as shown: a copy made under its zone's lock */
typedef struct {
    ngx_str_t                      zone;
    int64_t                        id;
    ngx_http_llm_gateway_stats_t   stats;
    int64_t                        inflight;
    int64_t                        reserved;    /* tokens, in flight */
    int64_t                        tpm_available;
    int64_t                        rpm_available;   /* -1: no limit */
    llm_limits_t                   limits;      /* this gateway's share */
    int64_t                        budget;      /* pico-dollars leased */
    int64_t                        budget_resets;   /* ms, wall */
    u_char                         name_len;
    u_char                         tier_len;
    u_char                         name[LLM_KEY_TENANT_MAX];
    u_char                         tier[LLM_KEY_TIER_MAX];
    int64_t                        share;       /* tokens a minute */
    unsigned                       limited:1;   /* its tier is known here */
    unsigned                       shared:1;    /* its zone has capacity= */
    unsigned                       capped:1;
    unsigned                       spent:1;
} ngx_http_llm_gateway_view_t;


/* a zone's capacity and backpressure as shown (llm_gateway_zone) */
typedef struct {
    ngx_str_t                      name;
    int64_t                        capacity;     /* configured, tokens/min */
    int64_t                        capacity_now;
    int64_t                        inflight;     /* the ceiling configured */
    int64_t                        ceiling;      /* now */
    int64_t                        flights;
    int64_t                        active;       /* tenants */
    int64_t                        weights;      /* millionths */
    uint64_t                       reductions;
    uint64_t                       suppressed[2];  /* address, tenant */
    unsigned                       shared:1;   /* capacity= or inflight= */
} ngx_http_llm_gateway_zone_view_t;


typedef struct {
    ngx_array_t                           tenants;   /* of views */
    ngx_array_t                           zones;     /* of zones with
                                                        capacity= or
                                                        inflight= */
    ngx_http_llm_gateway_worker_t         workers[NGX_HTTP_LLM_GATEWAY_WORKERS
                                                  + 1];
    ngx_uint_t                            nworkers;
    ngx_http_llm_gateway_journal_stats_t  journal;
    uint64_t                              pending;   /* records unsent */
    uint64_t                              sent;      /* and unacknowledged */
    int64_t                               now;       /* ms, wall */
} ngx_http_llm_gateway_snapshot_t;


/* a request in flight, as the snapshot counts it */
typedef struct {
    int64_t                        tenant_id;
    int64_t                        reserved;
} ngx_http_llm_gateway_held_t;


typedef enum {
    ngx_http_llm_gateway_text = 0,          /* the Prometheus format */
    ngx_http_llm_gateway_json_doc,
    ngx_http_llm_gateway_page_doc
} ngx_http_llm_gateway_doc_e;


static ngx_int_t ngx_http_llm_gateway_metrics_answer(ngx_http_request_t *r,
    ngx_http_llm_gateway_doc_e doc);
static ngx_int_t ngx_http_llm_gateway_snapshot_zone(
    ngx_http_llm_gateway_snapshot_t *snap, ngx_http_llm_gateway_zone_t *zone,
    ngx_http_llm_gateway_loc_conf_t *llcf, ngx_array_t *held, int64_t now);
static ngx_int_t ngx_http_llm_gateway_snapshot(ngx_http_request_t *r,
    ngx_http_llm_gateway_snapshot_t *snap);
static ngx_int_t ngx_http_llm_gateway_zone_view(
    ngx_http_llm_gateway_snapshot_t *snap, ngx_http_llm_gateway_zone_t *zone,
    int64_t now);
static u_char *ngx_http_llm_gateway_zones(u_char *p,
    ngx_http_llm_gateway_snapshot_t *snap, ngx_uint_t json);
static void ngx_http_llm_gateway_view(ngx_http_llm_gateway_loc_conf_t *llcf,
    ngx_http_llm_gateway_node_t *node, int64_t now,
    ngx_http_llm_gateway_view_t *v);
static ngx_uint_t ngx_http_llm_gateway_series(void);
static int ngx_libc_cdecl ngx_http_llm_gateway_cmp_held(const void *one,
    const void *two);
static u_char *ngx_http_llm_gateway_labels(u_char *p,
    ngx_http_llm_gateway_view_t *v);
static u_char *ngx_http_llm_gateway_escape(u_char *p, u_char *s, size_t len,
    ngx_uint_t json);
static ngx_buf_t *ngx_http_llm_gateway_prometheus(ngx_http_request_t *r,
    ngx_http_llm_gateway_snapshot_t *snap);
static ngx_buf_t *ngx_http_llm_gateway_json(ngx_http_request_t *r,
    ngx_http_llm_gateway_snapshot_t *snap);
static u_char *ngx_http_llm_gateway_backend_line(u_char *p, ngx_uint_t k,
    u_char *name, ngx_http_llm_gateway_backend_snap_t *s);
static u_char *ngx_http_llm_gateway_backends(ngx_http_request_t *r,
    u_char *p, ngx_uint_t json);
static size_t ngx_http_llm_gateway_backends_size(ngx_http_request_t *r);
static u_char *ngx_http_llm_gateway_addrs(u_char *p);
static size_t ngx_http_llm_gateway_addrs_size(void);
static ngx_int_t ngx_http_llm_gateway_send_buf(ngx_http_request_t *r,
    ngx_buf_t *b, char *type, size_t type_len);


/*
 * A tenant's families: each series a label of its own and where its value
 * is in a view (an int64_t or a uint64_t below 2^63).
 */
typedef struct {
    const char                    *label;
    size_t                         offset;
} ngx_http_llm_gateway_series_t;

typedef struct {
    const char                    *name;
    const char                    *type;
    const char                    *help;
    ngx_uint_t                     limited;   /* the tier known here only,
                                                 or 2: a zone's share */
    ngx_http_llm_gateway_series_t  series[8];     /* with the last, NULL */
} ngx_http_llm_gateway_family_t;

#define ngx_http_llm_gateway_at(field)                                        \
    offsetof(ngx_http_llm_gateway_view_t, field)

static ngx_http_llm_gateway_family_t  ngx_http_llm_gateway_families[] = {

    { "llmgw_requests_total", "counter",
      "Requests of a tenant by the class of the status sent.", 0,
      { { ",status=\"1xx\"", ngx_http_llm_gateway_at(stats.requests[0]) },
        { ",status=\"2xx\"", ngx_http_llm_gateway_at(stats.requests[1]) },
        { ",status=\"3xx\"", ngx_http_llm_gateway_at(stats.requests[2]) },
        { ",status=\"4xx\"", ngx_http_llm_gateway_at(stats.requests[3]) },
        { ",status=\"5xx\"", ngx_http_llm_gateway_at(stats.requests[4]) },
        { NULL, 0 } } },

    { "llmgw_rejected_total", "counter",
      "Requests of a tenant the gateway refused, by the limit that refused "
      "them: 429 but for saturation, 503 (the upstream pushed back).", 0,
      { { ",reason=\"requests\"",
          ngx_http_llm_gateway_at(stats.rejected[1]) },
        { ",reason=\"tokens\"", ngx_http_llm_gateway_at(stats.rejected[2]) },
        { ",reason=\"concurrency\"",
          ngx_http_llm_gateway_at(stats.rejected[3]) },
        { ",reason=\"quota\"", ngx_http_llm_gateway_at(stats.rejected[4]) },
        { ",reason=\"capacity\"",
          ngx_http_llm_gateway_at(stats.rejected[5]) },
        { ",reason=\"saturation\"",
          ngx_http_llm_gateway_at(stats.rejected[6]) },
        { NULL, 0 } } },

    { "llmgw_tokens_total", "counter",
      "Tokens a tenant's requests were settled at: input (cached included), "
      "output, cached input.", 0,
      { { ",kind=\"input\"", ngx_http_llm_gateway_at(stats.input_tokens) },
        { ",kind=\"output\"", ngx_http_llm_gateway_at(stats.output_tokens) },
        { ",kind=\"cached\"", ngx_http_llm_gateway_at(stats.cached_tokens) },
        { NULL, 0 } } },

    { "llmgw_cost_picodollars_total", "counter",
      "What a tenant's requests cost at the prices the gateway leased with "
      "its spend cap (0 without a cap; llm.usage has every cost).", 0,
      { { "", ngx_http_llm_gateway_at(stats.cost) }, { NULL, 0 } } },

    { "llmgw_usage_over_bound_total", "counter",
      "Requests of a tenant whose upstream reported more than the request "
      "could cost (n times its output limit, its prompt's bound); settled "
      "at the bound.", 0,
      { { "", ngx_http_llm_gateway_at(stats.over_bound) }, { NULL, 0 } } },
    { "llmgw_unpriced_total", "counter",
      "A tenant's requests, and their tokens (input and output), on models "
      "accountd had no price for: free to a tenant without a spend cap.", 0,
      { { ",kind=\"requests\"",
          ngx_http_llm_gateway_at(stats.unpriced_requests) },
        { ",kind=\"tokens\"",
          ngx_http_llm_gateway_at(stats.unpriced_tokens) },
        { NULL, 0 } } },

    { "llmgw_reserved_tokens", "gauge",
      "Tokens reserved for a tenant's requests in flight.", 0,
      { { "", ngx_http_llm_gateway_at(reserved) }, { NULL, 0 } } },

    { "llmgw_concurrency", "gauge",
      "A tenant's requests in flight.", 0,
      { { "", ngx_http_llm_gateway_at(inflight) }, { NULL, 0 } } },

    { "llmgw_tokens_available", "gauge",
      "Tokens a tenant's TPM bucket holds now, on this gateway.", 1,
      { { "", ngx_http_llm_gateway_at(tpm_available) }, { NULL, 0 } } },

    { "llmgw_capacity_share_tokens_per_minute", "gauge",
      "A tenant's share of its zone's capacity now: its minimum and its "
      "weight's part of the rest among the active tenants; 0 while idle.",
      2,
      { { "", ngx_http_llm_gateway_at(share) }, { NULL, 0 } } },

    { NULL, NULL, NULL, 0, { { NULL, 0 } } }
};


/*
 * The page of llm_gateway_status: no external assets; it asks for the
 * same URI with ".json" once a second and draws what comes.
 */
static u_char  ngx_http_llm_gateway_page[] =
"<!DOCTYPE html>\n"
"<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
"<title>llm gateway status</title>\n"
"<style>\n"
"body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\n"
"h1{font-size:1.3em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.2em 0 .4em}\n"
"table{border-collapse:collapse}th,td{padding:.25em .7em;"
"border-bottom:1px solid #ddd;text-align:right}\n"
"th{background:#f3f3f3}td.l,th.l{text-align:left}\n"
".bar{display:inline-block;height:.7em;background:#4a8;vertical-align:middle}"
"\n.spent{color:#b00;font-weight:bold}.off{color:#b00}.on{color:#080}\n"
"#err{color:#b00}\n"
"</style></head><body>\n"
"<h1>llm gateway</h1>\n"
"<div id=\"head\">loading...</div><div id=\"err\"></div>\n"
"<h2>Journal and accountd</h2><table id=\"journal\"></table>\n"
"<h2>Backends</h2><table id=\"backends\"></table>\n"
"<h2>Capacity</h2><table id=\"zones\"></table>\n"
"<h2>Tenants</h2><table id=\"tenants\"></table>\n"
"<script>\n"
"'use strict';\n"
"const url = location.pathname.replace(/\\/+$/, '') + '.json';\n"
"const fmt = n => Number(n).toLocaleString('en-US');\n"
"const esc = s => String(s).replace(/[&<>\"]/g,\n"
"  c => ({'&':'&amp;','<':'&lt;','>':'&gt;','\"':'&quot;'}[c]));\n"
"function row(cells, th) {\n"
"  const t = th ? 'th' : 'td';\n"
"  return '<tr>' + cells.map((c, i) => '<' + t + (i ? '' : ' class=\"l\"')\n"
"    + '>' + c + '</' + t + '>').join('') + '</tr>';\n"
"}\n"
"function bar(v, max) {\n"
"  const w = max > 0 ? Math.round(60 * Math.min(v, max) / max) : 0;\n"
"  return '<span class=\"bar\" style=\"width:' + w + 'px\"></span> ';\n"
"}\n"
"function draw(s) {\n"
"  const j = s.journal;\n"
"  document.getElementById('head').textContent = 'nginx ' + s.nginx\n"
"    + ', module ' + s.version + ', pid ' + s.pid + ', '\n"
"    + new Date(s.time_ms).toISOString();\n"
"  let h = row(['', 'written', 'acknowledged', 'pending', 'sent',\n"
"    'lost', 'refused', 'bytes used', 'bytes held', 'size'], true);\n"
"  h += row(['records', fmt(j.written), fmt(j.acknowledged),\n"
"    fmt(j.pending), fmt(j.sent), fmt(j.lost), fmt(j.refused),\n"
"    fmt(j.used), fmt(j.held), fmt(j.size)]);\n"
"  h += row(['worker', 'accountd'], true);\n"
"  for (const w of s.workers)\n"
"    h += row([w.pid, w.connected ? '<span class=\"on\">connected</span>'\n"
"      : '<span class=\"off\">not connected</span>']);\n"
"  document.getElementById('journal').innerHTML = h;\n"
"  h = row(['backend', 'RPM', 'TPM', 'requests', 'waited', 'wait ms',\n"
"    'refused', 'busy', 'spent', 'failed', 'failovers', 'queue',\n"
"    'minute: requests', 'minute: tokens', 'out for', 'breaker'], true);\n"
"  for (const b of s.backends || []) {\n"
"    const out = Math.max(b.spent_ms, b.busy_ms);\n"
"    h += row([esc(b.name), b.rpm ? fmt(b.rpm) : '', b.tpm ? fmt(b.tpm)\n"
"      : '', fmt(b.requests), fmt(b.waited), fmt(b.wait_ms),\n"
"      fmt(b.refused), fmt(b.busy), fmt(b.spent), fmt(b.failed),\n"
"      fmt(b.failovers), fmt(b.queue), fmt(b.window_requests),\n"
"      fmt(b.window_tokens), out ? '<span class=\"spent\">'\n"
"      + (out / 1000).toFixed(1) + ' s</span>' : '',\n"
"      b.open ? '<span class=\"off\">open</span>'\n"
"      : '<span class=\"on\">closed</span>']);\n"
"  }\n"
"  document.getElementById('backends').innerHTML = h;\n"
"  h = row(['zone', 'TPM', 'TPM now', 'in flight', 'ceiling',\n"
"    'ceiling now', 'active tenants', 'weights', 'reductions'], true);\n"
"  for (const z of s.zones || []) {\n"
"    const low = z.capacity_now < z.capacity\n"
"      || z.inflight_ceiling < z.inflight_limit;\n"
"    h += row([esc(z.name), z.capacity ? fmt(z.capacity) : '',\n"
"      z.capacity ? (low ? '<span class=\"spent\">' : '')\n"
"      + bar(z.capacity_now, z.capacity) + fmt(z.capacity_now)\n"
"      + (low ? '</span>' : '') : '', fmt(z.inflight),\n"
"      z.inflight_limit ? fmt(z.inflight_limit) : '',\n"
"      z.inflight_limit ? fmt(z.inflight_ceiling) : '',\n"
"      fmt(z.active_tenants), fmt(z.weights), fmt(z.reductions)]);\n"
"  }\n"
"  document.getElementById('zones').innerHTML = h;\n"
"  h = row(['tenant', 'zone', 'tier', 'requests', '2xx', '4xx', '5xx',\n"
"    '429 requests', '429 tokens', '429 concurrency', '429 quota',\n"
"    '429 capacity', '503 saturation', 'share TPM',\n"
"    'tokens in', 'tokens out', 'cached', 'cost $', 'TPM available',\n"
"    'in flight', 'reserved', 'budget $'], true);\n"
"  for (const t of s.tenants) {\n"
"    const r = t.requests, x = t.rejected;\n"
"    const total = r['1xx'] + r['2xx'] + r['3xx'] + r['4xx'] + r['5xx'];\n"
"    const tpm = t.tpm ? bar(t.tpm.available, t.tpm.burst)\n"
"      + fmt(t.tpm.available) + ' / ' + fmt(t.tpm.burst) : '';\n"
"    const conc = fmt(t.inflight) + (t.concurrency_limit ?\n"
"      ' / ' + fmt(t.concurrency_limit) : '');\n"
"    const budget = !t.budget ? '' : t.budget.spent\n"
"      ? '<span class=\"spent\">spent</span>'\n"
"      : (t.budget.picodollars / 1e12).toFixed(6);\n"
"    h += row([esc(t.name || t.id), esc(t.zone), esc(t.tier), fmt(total),\n"
"      fmt(r['2xx']), fmt(r['4xx']), fmt(r['5xx']), fmt(x.requests),\n"
"      fmt(x.tokens), fmt(x.concurrency), fmt(x.quota),\n"
"      fmt(x.capacity), fmt(x.saturation),\n"
"      t.share_tpm === undefined ? '' : fmt(t.share_tpm),\n"
"      fmt(t.tokens.input), fmt(t.tokens.output), fmt(t.tokens.cached),\n"
"      (t.cost_picodollars / 1e12).toFixed(6), tpm, conc,\n"
"      fmt(t.reserved_tokens), budget]);\n"
"  }\n"
"  document.getElementById('tenants').innerHTML = h;\n"
"}\n"
"async function tick() {\n"
"  try {\n"
"    const r = await fetch(url, {cache: 'no-store'});\n"
"    if (!r.ok) throw new Error(url + ': ' + r.status);\n"
"    draw(await r.json());\n"
"    document.getElementById('err').textContent = '';\n"
"  } catch (e) {\n"
"    document.getElementById('err').textContent = String(e);\n"
"  }\n"
"  setTimeout(tick, 1000);\n"
"}\n"
"tick();\n"
"</script></body></html>\n";


ngx_int_t
ngx_http_llm_gateway_metrics_handler(ngx_http_request_t *r)
{
    return ngx_http_llm_gateway_metrics_answer(r, ngx_http_llm_gateway_text);
}


ngx_int_t
ngx_http_llm_gateway_metrics_status_handler(ngx_http_request_t *r)
{
    ngx_http_llm_gateway_doc_e  doc;

    doc = ngx_http_llm_gateway_page_doc;

    if (r->uri.len >= 5
        && ngx_strncmp(r->uri.data + r->uri.len - 5, ".json", 5) == 0)
    {
        doc = ngx_http_llm_gateway_json_doc;
    }

    return ngx_http_llm_gateway_metrics_answer(r, doc);
}


/* what the two handlers answer GET with, in one of three forms */

static ngx_int_t
ngx_http_llm_gateway_metrics_answer(ngx_http_request_t *r,
    ngx_http_llm_gateway_doc_e doc)
{
    ngx_int_t                         rc;
    ngx_buf_t                        *b;
    ngx_http_llm_gateway_snapshot_t  *snap;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    if (doc == ngx_http_llm_gateway_page_doc) {
        b = ngx_calloc_buf(r->pool);
        if (b == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        b->pos = ngx_http_llm_gateway_page;
        b->last = b->pos + sizeof(ngx_http_llm_gateway_page) - 1;
        b->memory = 1;

        return ngx_http_llm_gateway_send_buf(r, b, "text/html; charset=utf-8",
                                             sizeof("text/html") - 1);
    }

    snap = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_gateway_snapshot_t));
    if (snap == NULL
        || ngx_http_llm_gateway_snapshot(r, snap) != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (doc == ngx_http_llm_gateway_json_doc) {
        b = ngx_http_llm_gateway_json(r, snap);

        return b ? ngx_http_llm_gateway_send_buf(r, b, "application/json",
                                             sizeof("application/json") - 1)
                 : NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b = ngx_http_llm_gateway_prometheus(r, snap);

    return b ? ngx_http_llm_gateway_send_buf(r, b,
                             "text/plain; version=0.0.4; charset=utf-8",
                             sizeof("text/plain") - 1)
             : NGX_HTTP_INTERNAL_SERVER_ERROR;
}


static ngx_int_t
ngx_http_llm_gateway_snapshot(ngx_http_request_t *r,
    ngx_http_llm_gateway_snapshot_t *snap)
{
    int64_t                            now;
    uint64_t                           unacked;
    ngx_uint_t                         i, k, first, n;
    ngx_array_t                        held;
    ngx_list_part_t                   *part;
    ngx_http_llm_gateway_held_t       *h, *hs;
    ngx_http_llm_gateway_view_t       *vs;
    ngx_http_llm_gateway_zone_t       *zone;
    ngx_http_llm_gateway_worker_t     *w;
    ngx_http_llm_gateway_loc_conf_t   *llcf;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);
    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_gateway_module);

    now = ngx_http_llm_gateway_clock_now_ms();
    snap->now = ngx_http_llm_gateway_clock_wall_ms();

    ngx_http_llm_gateway_journal_stats(lmcf, &snap->journal);

    if (lmcf->journal_data) {
        snap->journal.connected = ngx_http_llm_gateway_accountd_up();
    }

    if (ngx_array_init(&snap->tenants, r->pool, 16,
                       sizeof(ngx_http_llm_gateway_view_t))
        != NGX_OK
        || ngx_array_init(&snap->zones, r->pool, 2,
                          sizeof(ngx_http_llm_gateway_zone_view_t))
           != NGX_OK
        || ngx_array_init(&held, r->pool, 64,
                          sizeof(ngx_http_llm_gateway_held_t))
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    part = &((ngx_cycle_t *) ngx_cycle)->shared_memory.part;
    i = 0;

    while ((zone = ngx_http_llm_gateway_zone_next(lmcf, &part, &i))) {

        first = snap->tenants.nelts;
        held.nelts = 0;

        if (ngx_http_llm_gateway_snapshot_zone(snap, zone, llcf, &held, now)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        /* the reservations of the requests in flight, by tenant */

        n = snap->tenants.nelts - first;
        vs = (ngx_http_llm_gateway_view_t *) snap->tenants.elts + first;
        hs = held.elts;

        ngx_qsort(vs, n, sizeof(ngx_http_llm_gateway_view_t),
                  ngx_http_llm_gateway_cmp_held);
        ngx_qsort(hs, held.nelts, sizeof(ngx_http_llm_gateway_held_t),
                  ngx_http_llm_gateway_cmp_held);

        for (k = 0, h = hs; h < hs + held.nelts; h++) {
            while (k < n && vs[k].id < h->tenant_id) {
                k++;
            }

            if (k < n && vs[k].id == h->tenant_id) {
                vs[k].reserved += h->reserved;
            }
        }
    }

    /* this worker as it is now, said by the reaper or not yet */

    for (k = 0; k < snap->nworkers; k++) {
        if (snap->workers[k].pid == ngx_pid) {
            break;
        }
    }

    if (k == snap->nworkers) {
        snap->nworkers++;
    }

    w = &snap->workers[k];
    w->pid = ngx_pid;
    w->connected = ngx_http_llm_gateway_accountd_up();
    w->sent = ngx_http_llm_gateway_accountd_sent();
    w->seen = now;

    /*
     * What is in the workers' windows was sent; the rest of what is not
     * acknowledged waits (or was sent by a worker that died, until the
     * others take it back).  Counting the journal itself would walk it
     * under the lock every record takes.
     */

    unacked = snap->journal.journal.written - snap->journal.journal.acked;

    for (k = 0; k < snap->nworkers; k++) {
        snap->sent += snap->workers[k].sent;
    }

    snap->sent = ngx_min(snap->sent, unacked);
    snap->pending = unacked - snap->sent;

    return NGX_OK;
}


/* under the zone's lock: its tenants, the requests in flight, the workers */

static ngx_int_t
ngx_http_llm_gateway_snapshot_zone(ngx_http_llm_gateway_snapshot_t *snap,
    ngx_http_llm_gateway_zone_t *zone, ngx_http_llm_gateway_loc_conf_t *llcf,
    ngx_array_t *held, int64_t now)
{
    ngx_uint_t                      k;
    ngx_queue_t                    *q;
    ngx_http_llm_gateway_held_t    *h;
    ngx_http_llm_gateway_view_t    *v;
    ngx_http_llm_gateway_node_t    *node;
    ngx_http_llm_gateway_flight_t  *f;
    ngx_http_llm_gateway_worker_t  *w;

    ngx_shmtx_lock(&zone->shpool->mutex);

    if (ngx_http_llm_gateway_zone_view(snap, zone, now) != NGX_OK) {
        ngx_shmtx_unlock(&zone->shpool->mutex);
        return NGX_ERROR;
    }

    for (q = ngx_queue_head(&zone->sh->queue);
         q != ngx_queue_sentinel(&zone->sh->queue);
         q = ngx_queue_next(q))
    {
        node = ngx_queue_data(q, ngx_http_llm_gateway_node_t, queue);

        /* a key's own budget is its tenant's business */
        if (node->tenant_id <= 0) {
            continue;
        }

        v = ngx_array_push(&snap->tenants);
        if (v == NULL) {
            ngx_shmtx_unlock(&zone->shpool->mutex);
            return NGX_ERROR;
        }

        ngx_http_llm_gateway_view(llcf, node, now, v);
        v->zone = zone->name;

        if (zone->capacity) {
            /* idle since: no longer active, as admission would find */
            (void) llm_fair_expire(&zone->sh->fair, &node->fair, now);

            v->shared = 1;
            v->share = llm_fair_rate(&zone->sh->fair, &node->fair);
        }
    }

    for (q = ngx_queue_head(&zone->sh->flights);
         q != ngx_queue_sentinel(&zone->sh->flights);
         q = ngx_queue_next(q))
    {
        f = ngx_queue_data(q, ngx_http_llm_gateway_flight_t, queue);

        h = ngx_array_push(held);
        if (h == NULL) {
            ngx_shmtx_unlock(&zone->shpool->mutex);
            return NGX_ERROR;
        }

        h->tenant_id = f->tenant_id;
        h->reserved = f->reserved;
    }

    /* the workers of this cycle write every zone: one is enough */
    if (snap->nworkers == 0) {
        for (k = 0; k < NGX_HTTP_LLM_GATEWAY_WORKERS; k++) {
            w = &zone->sh->workers[k];

            if (w->pid && now - w->seen < NGX_HTTP_LLM_GATEWAY_WORKER_GONE)
            {
                snap->workers[snap->nworkers++] = *w;
            }
        }
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    return NGX_OK;
}


/* under the zone's lock: its capacity, backpressure applied now */

static ngx_int_t
ngx_http_llm_gateway_zone_view(ngx_http_llm_gateway_snapshot_t *snap,
    ngx_http_llm_gateway_zone_t *zone, int64_t now)
{
    llm_fair_t                        *f;
    ngx_http_llm_gateway_zone_view_t  *p;

    p = ngx_array_push(&snap->zones);
    if (p == NULL) {
        return NGX_ERROR;
    }

    f = &zone->sh->fair;

    p->name = zone->name;
    p->capacity_now = llm_fair_capacity(f, now);
    p->ceiling = llm_fair_ceiling(f, now);
    p->capacity = f->conf.capacity;
    p->inflight = f->conf.inflight;
    p->flights = f->flights;
    p->active = f->active;
    /* the weights as counted by demand: a trickle's are fractions */
    p->weights = f->weights;
    p->reductions = f->reductions;
    p->suppressed[0] = zone->sh->log_suppressed[0];
    p->suppressed[1] = zone->sh->log_suppressed[1];
    p->shared = (zone->capacity || zone->inflight) ? 1 : 0;

    return NGX_OK;
}


/* under the zone's lock */

static void
ngx_http_llm_gateway_view(ngx_http_llm_gateway_loc_conf_t *llcf,
    ngx_http_llm_gateway_node_t *node, int64_t now,
    ngx_http_llm_gateway_view_t *v)
{
    ngx_uint_t                    i;
    llm_bucket_t                  b;
    ngx_http_llm_gateway_tier_t  *tier;

    ngx_memzero(v, sizeof(ngx_http_llm_gateway_view_t));

    v->id = node->tenant_id;
    v->stats = node->stats;
    v->inflight = node->state.inflight;
    v->name_len = node->name_len;
    v->tier_len = node->tier_len;
    ngx_memcpy(v->name, node->name, node->name_len);
    ngx_memcpy(v->tier, node->tier, node->tier_len);

    v->capped = node->capped;
    v->spent = node->spent;
    v->budget = node->budget;
    v->budget_resets = node->budget_resets;

    /* the buckets now, as the tier of its name refills them */

    tier = NULL;

    if (llcf->tiers && node->state.tpm.last_ms != -1) {
        tier = llcf->tiers->elts;

        for (i = 0; i < llcf->tiers->nelts; i++) {
            if (tier[i].name.len == node->tier_len
                && ngx_memcmp(tier[i].name.data, node->tier,
                              node->tier_len) == 0)
            {
                break;
            }
        }

        tier = (i < llcf->tiers->nelts) ? &tier[i] : NULL;
    }

    v->rpm_available = -1;

    if (tier == NULL) {
        return;
    }

    v->limited = 1;
    ngx_http_llm_gateway_budget_share_limits(node, &tier->limits, &v->limits);

    b = node->state.tpm;
    llm_bucket_refill(&b, &v->limits.tpm, now);
    v->tpm_available = llm_bucket_available(&b);

    if (v->limits.rpm.rate) {
        b = node->state.rpm;
        llm_bucket_refill(&b, &v->limits.rpm, now);
        v->rpm_available = llm_bucket_available(&b);
    }
}


/* a tenant's lines at most: the series of every family */

static ngx_uint_t
ngx_http_llm_gateway_series(void)
{
    ngx_uint_t                      n;
    ngx_http_llm_gateway_series_t  *se;
    ngx_http_llm_gateway_family_t  *f;

    n = 0;

    for (f = ngx_http_llm_gateway_families; f->name; f++) {
        for (se = f->series; se->label; se++) {
            n++;
        }
    }

    return n;
}


/* views and requests in flight alike begin with a tenant's id */

static int ngx_libc_cdecl
ngx_http_llm_gateway_cmp_held(const void *one, const void *two)
{
    int64_t  a, b;

    a = *(const int64_t *) one;
    b = *(const int64_t *) two;

    return (a > b) - (a < b);
}


static ngx_buf_t *
ngx_http_llm_gateway_prometheus(ngx_http_request_t *r,
    ngx_http_llm_gateway_snapshot_t *snap)
{
    u_char                                *p, *lp, labels[512];
    size_t                                 size;
    ngx_buf_t                             *b;
    ngx_uint_t                             i, k, lines;
    llm_journal_stats_t                   *js;
    ngx_http_llm_gateway_view_t           *v;
    ngx_http_llm_gateway_series_t         *se;
    ngx_http_llm_gateway_family_t         *f;

    v = snap->tenants.elts;
    size = NGX_HTTP_LLM_GATEWAY_METRICS_FIXED
           + ngx_http_llm_gateway_backends_size(r)
           + ngx_http_llm_gateway_addrs_size()
           + snap->zones.nelts * NGX_HTTP_LLM_GATEWAY_METRICS_ZONE
           + NGX_HTTP_LLM_GATEWAY_METRICS_ZONES;

    lines = ngx_http_llm_gateway_series();

    for (i = 0; i < snap->tenants.nelts; i++) {
        lp = ngx_http_llm_gateway_labels(labels, &v[i]);
        size += lines
                * (lp - labels + NGX_HTTP_LLM_GATEWAY_METRICS_LINE);
    }

    b = ngx_create_temp_buf(r->pool, size);
    if (b == NULL) {
        return NULL;
    }

    js = &snap->journal.journal;
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
        "# HELP llmgw_journal_records Records not yet acknowledged: waiting "
        "to be sent, or in a worker's window of sent ones (as each worker "
        "said within the last second).\n"
        "# TYPE llmgw_journal_records gauge\n"
        "llmgw_journal_records{state=\"pending\"} %uL\n"
        "llmgw_journal_records{state=\"sent\"} %uL\n"
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
        "# HELP llmgw_accountd_connected Whether each worker is connected "
        "to accountd, as it said within the last second or so.\n"
        "# TYPE llmgw_accountd_connected gauge\n",
        js->written, js->acked, js->lost, js->written - js->acked,
        snap->pending, snap->sent, js->refused,
        js->size, js->used, js->held);

    for (k = 0; k < snap->nworkers; k++) {
        p = ngx_sprintf(p, "llmgw_accountd_connected{pid=\"%P\"} %ui\n",
                        snap->workers[k].pid, snap->workers[k].connected);
    }

    p = ngx_http_llm_gateway_backends(r, p, 0);
    p = ngx_http_llm_gateway_zones(p, snap, 0);
    p = ngx_http_llm_gateway_addrs(p);

    if (snap->tenants.nelts == 0) {
        b->last = p;
        return b;
    }

    for (f = ngx_http_llm_gateway_families; f->name; f++) {

        p = ngx_sprintf(p, "# HELP %s %s\n# TYPE %s %s\n",
                        f->name, f->help, f->name, f->type);

        for (i = 0; i < snap->tenants.nelts; i++) {

            if ((f->limited == 1 && !v[i].limited)
                || (f->limited == 2 && !v[i].shared))
            {
                continue;
            }

            lp = ngx_http_llm_gateway_labels(labels, &v[i]);

            for (se = f->series; se->label; se++) {
                p = ngx_sprintf(p, "%s{%*s%s} %L\n", f->name, lp - labels,
                                labels, se->label,
                                *(int64_t *) ((u_char *) &v[i] + se->offset));
            }
        }
    }

    b->last = p;

    return b;
}


/* zone="...",tenant="...",tier="..." */

static u_char *
ngx_http_llm_gateway_labels(u_char *p, ngx_http_llm_gateway_view_t *v)
{
    p = ngx_cpymem(p, "zone=\"", sizeof("zone=\"") - 1);
    p = ngx_http_llm_gateway_escape(p, v->zone.data,
                                    ngx_min(v->zone.len, 64), 0);
    p = ngx_cpymem(p, "\",tenant=\"", sizeof("\",tenant=\"") - 1);

    if (v->name_len) {
        p = ngx_http_llm_gateway_escape(p, v->name, v->name_len, 0);

    } else {
        p = ngx_sprintf(p, "%L", v->id);
    }

    p = ngx_cpymem(p, "\",tier=\"", sizeof("\",tier=\"") - 1);
    p = ngx_http_llm_gateway_escape(p, v->tier, v->tier_len, 0);
    *p++ = '"';

    return p;
}


/*
 * A name in a label (\\, \" and \n escaped) or a JSON string (control
 * characters too): at most twice its length, six times for JSON.
 */

static u_char *
ngx_http_llm_gateway_escape(u_char *p, u_char *s, size_t len, ngx_uint_t json)
{
    u_char  *end;

    for (end = s + len; s < end; s++) {

        if (*s == '\\' || *s == '"') {
            *p++ = '\\';
            *p++ = *s;

        } else if (*s == '\n') {
            *p++ = '\\';
            *p++ = 'n';

        } else if (json && *s < 0x20) {
            p = ngx_sprintf(p, "\\u%04xi", (ngx_int_t) *s);

        } else {
            *p++ = *s;
        }
    }

    return p;
}


static ngx_buf_t *
ngx_http_llm_gateway_json(ngx_http_request_t *r,
    ngx_http_llm_gateway_snapshot_t *snap)
{
    u_char                                *p;
    size_t                                 size;
    ngx_buf_t                             *b;
    ngx_uint_t                             i, k;
    ngx_http_llm_gateway_view_t           *v;
    llm_journal_stats_t                   *js;

    v = snap->tenants.elts;
    size = NGX_HTTP_LLM_GATEWAY_METRICS_FIXED
           + ngx_http_llm_gateway_backends_size(r)
           + snap->zones.nelts * NGX_HTTP_LLM_GATEWAY_METRICS_ZONE;

    for (i = 0; i < snap->tenants.nelts; i++) {
        size += NGX_HTTP_LLM_GATEWAY_JSON_TENANT
                + 6 * (ngx_min(v[i].zone.len, 64) + v[i].name_len
                       + v[i].tier_len);
    }

    b = ngx_create_temp_buf(r->pool, size);
    if (b == NULL) {
        return NULL;
    }

    js = &snap->journal.journal;

    p = ngx_sprintf(b->last,
                    "{\"version\":\"%s\",\"nginx\":\"%s\",\"pid\":%P,"
                    "\"time_ms\":%L,"
                    "\"journal\":{\"written\":%uL,\"acknowledged\":%uL,"
                    "\"lost\":%uL,\"refused\":%uL,\"pending\":%uL,"
                    "\"sent\":%uL,\"size\":%uz,\"used\":%uz,\"held\":%uz},"
                    "\"workers\":[",
                    NGX_HTTP_LLM_GATEWAY_VERSION, NGINX_VERSION, ngx_pid,
                    snap->now, js->written, js->acked, js->lost, js->refused,
                    snap->pending, snap->sent, js->size,
                    js->used, js->held);

    for (k = 0; k < snap->nworkers; k++) {
        p = ngx_sprintf(p, "%s{\"pid\":%P,\"connected\":%s}",
                        k ? "," : "", snap->workers[k].pid,
                        snap->workers[k].connected ? "true" : "false");
    }

    p = ngx_cpymem(p, "],\"backends\":[", sizeof("],\"backends\":[") - 1);
    p = ngx_http_llm_gateway_backends(r, p, 1);
    p = ngx_cpymem(p, "],\"zones\":[", sizeof("],\"zones\":[") - 1);
    p = ngx_http_llm_gateway_zones(p, snap, 1);
    p = ngx_cpymem(p, "],\"tenants\":[", sizeof("],\"tenants\":[") - 1);

    for (i = 0; i < snap->tenants.nelts; i++, v++) {
        p = ngx_sprintf(p, "%s{\"zone\":\"", i ? "," : "");
        p = ngx_http_llm_gateway_escape(p, v->zone.data,
                                        ngx_min(v->zone.len, 64), 1);
        p = ngx_sprintf(p, "\",\"id\":%L,\"name\":\"", v->id);
        p = ngx_http_llm_gateway_escape(p, v->name, v->name_len, 1);
        p = ngx_cpymem(p, "\",\"tier\":\"", sizeof("\",\"tier\":\"") - 1);
        p = ngx_http_llm_gateway_escape(p, v->tier, v->tier_len, 1);

        p = ngx_sprintf(p,
                "\",\"requests\":{\"1xx\":%uL,\"2xx\":%uL,\"3xx\":%uL,"
                "\"4xx\":%uL,\"5xx\":%uL},"
                "\"rejected\":{\"requests\":%uL,\"tokens\":%uL,"
                "\"concurrency\":%uL,\"quota\":%uL,\"capacity\":%uL,"
                "\"saturation\":%uL},"
                "\"tokens\":{\"input\":%uL,\"output\":%uL,\"cached\":%uL},"
                "\"cost_picodollars\":%uL,\"inflight\":%L,"
                "\"concurrency_limit\":%L,\"reserved_tokens\":%L",
                v->stats.requests[0], v->stats.requests[1],
                v->stats.requests[2], v->stats.requests[3],
                v->stats.requests[4],
                v->stats.rejected[ngx_http_llm_gateway_by_requests],
                v->stats.rejected[ngx_http_llm_gateway_by_tokens],
                v->stats.rejected[ngx_http_llm_gateway_by_concurrency],
                v->stats.rejected[ngx_http_llm_gateway_by_quota],
                v->stats.rejected[ngx_http_llm_gateway_by_capacity],
                v->stats.rejected[ngx_http_llm_gateway_by_saturation],
                v->stats.input_tokens, v->stats.output_tokens,
                v->stats.cached_tokens, v->stats.cost, v->inflight,
                v->limited ? v->limits.concurrency : 0, v->reserved);

        if (v->limited) {
            p = ngx_sprintf(p, ",\"tpm\":{\"available\":%L,\"burst\":%L,"
                            "\"rate\":%L}",
                            v->tpm_available, v->limits.tpm.burst,
                            v->limits.tpm.rate);

            if (v->rpm_available >= 0) {
                p = ngx_sprintf(p, ",\"rpm\":{\"available\":%L,"
                                "\"burst\":%L,\"rate\":%L}",
                                v->rpm_available, v->limits.rpm.burst,
                                v->limits.rpm.rate);
            }
        }

        if (v->shared) {
            p = ngx_sprintf(p, ",\"share_tpm\":%L", v->share);
        }

        if (v->capped) {
            p = ngx_sprintf(p, ",\"budget\":{\"picodollars\":%L,"
                            "\"spent\":%s,\"resets_ms\":%L}",
                            v->budget, v->spent ? "true" : "false",
                            v->budget_resets);
        }

        *p++ = '}';
    }

    p = ngx_cpymem(p, "]}\n", 3);

    b->last = p;

    return b;
}


/*
 * Each zone's capacity (llm_gateway_zone capacity= inflight=): as
 * configured and as admitted now, backpressure applied.
 */

static u_char  ngx_http_llm_gateway_zones_help[] =
    "# HELP llmgw_capacity_tokens_per_minute A zone's capacity: as "
    "configured, and as admitted now (less while the upstream pushes back, "
    "recovering).\n"
    "# TYPE llmgw_capacity_tokens_per_minute gauge\n"
    "# HELP llmgw_capacity_inflight A zone's requests in flight, its "
    "ceiling as configured and as admitted now.\n"
    "# TYPE llmgw_capacity_inflight gauge\n"
    "# HELP llmgw_capacity_active_tenants Tenants that asked within the "
    "last 10 s, and the sum of their weights as counted by their "
    "demand.\n"
    "# TYPE llmgw_capacity_active_tenants gauge\n"
    "# HELP llmgw_capacity_reductions_total Times the upstream pushed back "
    "and the zone admitted less.\n"
    "# TYPE llmgw_capacity_reductions_total counter\n";


/* every zone's: the refusals its locations left out of the log */

static u_char  ngx_http_llm_gateway_suppressed_help[] =
    "# HELP llmgw_log_suppressed_total Refusals not logged: past "
    "llm_gateway_reject_log_rate for a client address or a tenant.\n"
    "# TYPE llmgw_log_suppressed_total counter\n";


static u_char *
ngx_http_llm_gateway_zones(u_char *p, ngx_http_llm_gateway_snapshot_t *snap,
    ngx_uint_t json)
{
    u_char                            *lp, labels[160];
    ngx_uint_t                         i, n;
    ngx_http_llm_gateway_zone_view_t  *z;

    z = snap->zones.elts;
    n = 0;

    for (i = 0; i < snap->zones.nelts; i++) {

        if (!z[i].shared) {
            continue;
        }

        if (json) {
            p = ngx_sprintf(p, "%s{\"name\":\"", n++ ? "," : "");
            p = ngx_http_llm_gateway_escape(p, z[i].name.data,
                                            ngx_min(z[i].name.len, 64), 1);
            p = ngx_sprintf(p, "\",\"capacity\":%L,\"capacity_now\":%L,"
                            "\"inflight_limit\":%L,\"inflight_ceiling\":%L,"
                            "\"inflight\":%L,\"active_tenants\":%L,"
                            "\"weights\":%L.%06L,\"reductions\":%uL}",
                            z[i].capacity, z[i].capacity_now, z[i].inflight,
                            z[i].ceiling, z[i].flights, z[i].active,
                            z[i].weights / LLM_FAIR_WHOLE,
                            z[i].weights % LLM_FAIR_WHOLE,
                            z[i].reductions);
            continue;
        }

        if (n++ == 0) {
            p = ngx_cpymem(p, ngx_http_llm_gateway_zones_help,
                           sizeof(ngx_http_llm_gateway_zones_help) - 1);
        }

        lp = ngx_cpymem(labels, "zone=\"", sizeof("zone=\"") - 1);
        lp = ngx_http_llm_gateway_escape(lp, z[i].name.data,
                                         ngx_min(z[i].name.len, 64), 0);
        *lp++ = '"';

        p = ngx_sprintf(p,
            "llmgw_capacity_tokens_per_minute{%*s,kind=\"configured\"} %L\n"
            "llmgw_capacity_tokens_per_minute{%*s,kind=\"now\"} %L\n"
            "llmgw_capacity_inflight{%*s,kind=\"current\"} %L\n"
            "llmgw_capacity_inflight{%*s,kind=\"configured\"} %L\n"
            "llmgw_capacity_inflight{%*s,kind=\"ceiling\"} %L\n"
            "llmgw_capacity_active_tenants{%*s,kind=\"tenants\"} %L\n"
            "llmgw_capacity_active_tenants{%*s,kind=\"weights\"} %L.%06L\n"
            "llmgw_capacity_reductions_total{%*s} %uL\n",
            lp - labels, labels, z[i].capacity,
            lp - labels, labels, z[i].capacity_now,
            lp - labels, labels, z[i].flights,
            lp - labels, labels, z[i].inflight,
            lp - labels, labels, z[i].ceiling,
            lp - labels, labels, z[i].active,
            lp - labels, labels, z[i].weights / LLM_FAIR_WHOLE,
            z[i].weights % LLM_FAIR_WHOLE,
            lp - labels, labels, z[i].reductions);
    }

    if (json || snap->zones.nelts == 0) {
        return p;
    }

    p = ngx_cpymem(p, ngx_http_llm_gateway_suppressed_help,
                   sizeof(ngx_http_llm_gateway_suppressed_help) - 1);

    for (i = 0; i < snap->zones.nelts; i++) {
        lp = ngx_cpymem(labels, "zone=\"", sizeof("zone=\"") - 1);
        lp = ngx_http_llm_gateway_escape(lp, z[i].name.data,
                                         ngx_min(z[i].name.len, 64), 0);
        *lp++ = '"';

        p = ngx_sprintf(p,
            "llmgw_log_suppressed_total{%*s,by=\"address\"} %uL\n"
            "llmgw_log_suppressed_total{%*s,by=\"tenant\"} %uL\n",
            lp - labels, labels, z[i].suppressed[0],
            lp - labels, labels, z[i].suppressed[1]);
    }

    return p;
}


/* the bad-key stores (llm_gateway_bad_keys zone=): how full, evicting */

static u_char  ngx_http_llm_gateway_addrs_help[] =
    "# HELP llmgw_bad_key_addresses Client addresses (IPv6 prefixes) a "
    "bad-key store counts.\n"
    "# TYPE llmgw_bad_key_addresses gauge\n"
    "# HELP llmgw_bad_key_evictions_total Addresses a full bad-key store "
    "gave up for others, least recently seen first: the limit counted them "
    "less precisely.\n"
    "# TYPE llmgw_bad_key_evictions_total counter\n";


/* a store's two lines, its name (64 bytes at most) escaped in each */
#define NGX_HTTP_LLM_GATEWAY_METRICS_ADDRS  1024


static size_t
ngx_http_llm_gateway_addrs_size(void)
{
    size_t            size;
    ngx_uint_t        i;
    ngx_list_part_t  *part;

    size = sizeof(ngx_http_llm_gateway_addrs_help);
    part = &((ngx_cycle_t *) ngx_cycle)->shared_memory.part;
    i = 0;

    while (ngx_http_llm_gateway_auth_addrs_next(&part, &i)) {
        size += NGX_HTTP_LLM_GATEWAY_METRICS_ADDRS;
    }

    return size;
}


static u_char *
ngx_http_llm_gateway_addrs(u_char *p)
{
    u_char                        *lp, labels[512];
    uint64_t                       evictions;
    ngx_uint_t                     i, n, count;
    ngx_list_part_t               *part;
    ngx_http_llm_gateway_addrs_t  *addrs;

    part = &((ngx_cycle_t *) ngx_cycle)->shared_memory.part;
    i = 0;
    n = 0;

    while ((addrs = ngx_http_llm_gateway_auth_addrs_next(&part, &i))) {

        ngx_shmtx_lock(&addrs->shpool->mutex);
        count = addrs->sh->count;
        evictions = addrs->sh->evictions;
        ngx_shmtx_unlock(&addrs->shpool->mutex);

        if (n++ == 0) {
            p = ngx_cpymem(p, ngx_http_llm_gateway_addrs_help,
                           sizeof(ngx_http_llm_gateway_addrs_help) - 1);
        }

        lp = ngx_cpymem(labels, "zone=\"", sizeof("zone=\"") - 1);
        lp = ngx_http_llm_gateway_escape(lp, addrs->name.data,
                                         ngx_min(addrs->name.len, 64), 0);
        *lp++ = '"';

        p = ngx_sprintf(p,
            "llmgw_bad_key_addresses{%*s} %ui\n"
            "llmgw_bad_key_evictions_total{%*s} %uL\n",
            lp - labels, labels, count, lp - labels, labels, evictions);
    }

    return p;
}


/* the upstream side: each backend's pacer, answers and breaker */

static size_t
ngx_http_llm_gateway_backends_size(ngx_http_request_t *r)
{
    size_t                             size;
    ngx_uint_t                         i;
    ngx_http_llm_gateway_backend_t   **b;
    ngx_http_llm_gateway_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    if (lmcf->backends == NULL) {
        return 0;
    }

    /* the families' help, then each backend's lines with its name */
    size = 4096;
    b = lmcf->backends->elts;

    for (i = 0; i < lmcf->backends->nelts; i++) {
        size += 1024 + 16 * 6 * b[i]->name.len;
    }

    return size;
}


static u_char *
ngx_http_llm_gateway_backends(ngx_http_request_t *r, u_char *p,
    ngx_uint_t json)
{
    u_char                               name[256], *e;
    size_t                               len;
    ngx_uint_t                           i, k;
    ngx_http_llm_gateway_backend_t     **b;
    ngx_http_llm_gateway_backend_snap_t  s[NGX_HTTP_LLM_GATEWAY_BACKENDS];
    ngx_http_llm_gateway_main_conf_t    *lmcf;

    static const char  *families[] = {
        "llmgw_backend_requests_total counter Requests sent to the backend.",
        "llmgw_backend_waited_total counter Requests that waited in its "
        "pacer's queue before they were sent.",
        "llmgw_backend_wait_milliseconds_total counter The time they "
        "waited, in all.",
        "llmgw_backend_refused_total counter Requests its pacer refused: "
        "queue full, wait too long, or too large for its TPM.",
        "llmgw_backend_answers_total counter Its refusals and failures by "
        "kind: busy (rate limited, overloaded), spent (quota), failed "
        "(5xx, no answer).",
        "llmgw_backend_failovers_total counter Requests it refused or "
        "failed that another backend of the role took.",
        "llmgw_backend_breaker_opened_total counter Times its circuit "
        "breaker opened.",
        "llmgw_backend_queue gauge Requests waiting in its pacer's queue.",
        "llmgw_backend_window gauge The requests and tokens of its pacer's "
        "last minute.",
        "llmgw_backend_unavailable_milliseconds gauge How long it stays out "
        "of the candidates: its quota spent, or it said it is busy.",
        "llmgw_backend_open gauge Whether its circuit breaker is open or "
        "half-open.",
        "llmgw_backend_tenant_limited_total counter Times a tenant was "
        "limited on it by its own failures in a row.",
        NULL
    };

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_gateway_module);

    if (lmcf->backends == NULL) {
        return p;
    }

    b = lmcf->backends->elts;

    for (i = 0; i < lmcf->backends->nelts; i++) {
        ngx_http_llm_gateway_backend_snapshot(b[i], &s[i]);
    }

    if (json) {
        for (i = 0; i < lmcf->backends->nelts; i++) {
            p = ngx_sprintf(p, "%s{\"name\":\"", i ? "," : "");
            p = ngx_http_llm_gateway_escape(p, b[i]->name.data,
                                            ngx_min(b[i]->name.len, 64), 1);
            p = ngx_sprintf(p, "\",\"rpm\":%L,\"tpm\":%L,\"requests\":%uL,"
                    "\"waited\":%uL,\"wait_ms\":%uL,\"refused\":%uL,"
                    "\"busy\":%uL,\"spent\":%uL,\"failed\":%uL,"
                    "\"failovers\":%uL,\"breaker_opened\":%uL,"
                    "\"queue\":%L,\"window_requests\":%L,"
                    "\"window_tokens\":%L,\"spent_ms\":%L,\"busy_ms\":%L,"
                    "\"open\":%s}",
                    b[i]->pacer.rpm, b[i]->pacer.tpm, s[i].stats.started,
                    s[i].stats.waited, s[i].stats.waited_ms,
                    s[i].stats.refused, s[i].stats.busy, s[i].stats.spent,
                    s[i].stats.failed, s[i].stats.failovers,
                    s[i].stats.opened, s[i].queue, s[i].window_requests,
                    s[i].window_tokens, s[i].spent_ms, s[i].busy_ms,
                    s[i].open ? "true" : "false");
        }

        return p;
    }

    for (k = 0; families[k]; k++) {
        e = (u_char *) ngx_strchr(families[k], ' ');
        len = e - (u_char *) families[k];
        e = (u_char *) ngx_strchr(e + 1, ' ');

        p = ngx_sprintf(p, "# HELP %*s %s\n# TYPE %*s %*s\n",
                        len, families[k], e + 1, len, families[k],
                        e - (u_char *) families[k] - len - 1,
                        families[k] + len + 1);

        for (i = 0; i < lmcf->backends->nelts; i++) {
            e = ngx_http_llm_gateway_escape(name, b[i]->name.data,
                                            ngx_min(b[i]->name.len, 40), 0);
            *e = '\0';

            p = ngx_http_llm_gateway_backend_line(p, k, name, &s[i]);
        }
    }

    return p;
}


/* one backend's line, or lines, of the k-th family */

static u_char *
ngx_http_llm_gateway_backend_line(u_char *p, ngx_uint_t k, u_char *name,
    ngx_http_llm_gateway_backend_snap_t *s)
{
    switch (k) {

    case 0:
        p = ngx_sprintf(p, "llmgw_backend_requests_total"
                        "{backend=\"%s\"} %uL\n",
                        name, s->stats.started);
        break;

    case 1:
        p = ngx_sprintf(p, "llmgw_backend_waited_total"
                        "{backend=\"%s\"} %uL\n",
                        name, s->stats.waited);
        break;

    case 2:
        p = ngx_sprintf(p, "llmgw_backend_wait_milliseconds_total"
                        "{backend=\"%s\"} %uL\n",
                        name, s->stats.waited_ms);
        break;

    case 3:
        p = ngx_sprintf(p, "llmgw_backend_refused_total"
                        "{backend=\"%s\"} %uL\n",
                        name, s->stats.refused);
        break;

    case 4:
        p = ngx_sprintf(p, "llmgw_backend_answers_total"
                        "{backend=\"%s\",kind=\"busy\"} %uL\n"
                        "llmgw_backend_answers_total"
                        "{backend=\"%s\",kind=\"spent\"} %uL\n"
                        "llmgw_backend_answers_total"
                        "{backend=\"%s\",kind=\"failed\"} %uL\n",
                        name, s->stats.busy, name, s->stats.spent,
                        name, s->stats.failed);
        break;

    case 5:
        p = ngx_sprintf(p, "llmgw_backend_failovers_total"
                        "{backend=\"%s\"} %uL\n",
                        name, s->stats.failovers);
        break;

    case 6:
        p = ngx_sprintf(p, "llmgw_backend_breaker_opened_total"
                        "{backend=\"%s\"} %uL\n",
                        name, s->stats.opened);
        break;

    case 7:
        p = ngx_sprintf(p, "llmgw_backend_queue{backend=\"%s\"} %L\n",
                        name, s->queue);
        break;

    case 8:
        p = ngx_sprintf(p, "llmgw_backend_window"
                        "{backend=\"%s\",kind=\"requests\"} %L\n"
                        "llmgw_backend_window"
                        "{backend=\"%s\",kind=\"tokens\"} %L\n",
                        name, s->window_requests,
                        name, s->window_tokens);
        break;

    case 9:
        p = ngx_sprintf(p, "llmgw_backend_unavailable_milliseconds"
                        "{backend=\"%s\",reason=\"spent\"} %L\n"
                        "llmgw_backend_unavailable_milliseconds"
                        "{backend=\"%s\",reason=\"busy\"} %L\n",
                        name, s->spent_ms, name, s->busy_ms);
        break;

    case 10:
        p = ngx_sprintf(p, "llmgw_backend_open{backend=\"%s\"} %ui\n",
                        name, s->open);
        break;

    default:
        p = ngx_sprintf(p, "llmgw_backend_tenant_limited_total"
                        "{backend=\"%s\"} %uL\n",
                        name, s->stats.limited);
    }

    return p;
}


static ngx_int_t
ngx_http_llm_gateway_send_buf(ngx_http_request_t *r, ngx_buf_t *b,
    char *type, size_t type_len)
{
    ngx_int_t         rc;
    ngx_chain_t       out;
    ngx_table_elt_t  *cc;

    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = b->last - b->pos;

    r->headers_out.content_type.data = (u_char *) type;
    r->headers_out.content_type.len = ngx_strlen(type);
    r->headers_out.content_type_len = type_len;

    /* live figures: never from a cache */
    cc = ngx_list_push(&r->headers_out.headers);
    if (cc == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cc->hash = 1;
    ngx_str_set(&cc->key, "Cache-Control");
    ngx_str_set(&cc->value, "no-store");

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}
