
/*
 * Micro-benchmarks of the gateway's pure parts, and what a tenant costs in
 * shared memory.  Built against the module's header (nginx's include
 * paths), run by `make bench-micro`:
 *
 *   admission   llm_bucket_admit() + llm_bucket_release() of one request, the buckets
 *               refilled on a clock that moves 1 ms a request: what the
 *               zone's lock is held for
 *   pacer       llm_pacer_ask() + llm_pacer_correct() of one request
 *               starting at once, 1 ms apart, a full minute (60,000
 *               entries) in the ledger
 *   queue       a pacer's queue at its largest (queue=2000, and 10,000 to
 *               compare), every waiter held by tokens: a waiter's poll
 *               (llm_pacer_go, not its turn), a cancel at the head and an
 *               ask at the tail (each planning every waiter again), a
 *               correction (the same); what the backend's lock is held for
 *   hmac        the key's HMAC-SHA256 with the worker's keyed context, and
 *               with OpenSSL's one-shot HMAC() for comparison
 *   sse         the SSE/usage parser over a stream's delta event, whole
 *               and split, as the body filter feeds it
 *   json        llm_sse_usage_from_json() of a whole Chat Completions and
 *               Messages response as mockllm writes them (the median of
 *               31 runs), and cJSON's parse and free of the same, what
 *               the reader cost when it parsed every body
 *   translator  llm_tx_stream_event() of a text delta event, Chat to
 *               Messages and Messages to Chat, its output discarded; what
 *               a translated stream does before its first byte: the
 *               request (llm_tx_request(), a chat request with a system
 *               prompt, two turns and sampling, to Messages) and the first
 *               event of a Messages stream (message_start, the stream
 *               started anew), each also with the caches cold, as between
 *               two events of a paced stream
 *   inspect     llm_inspect() of bench/load.lua's chat request, of its
 *               stream, and of a chat of six messages with tools, tool
 *               calls and their results: the median of 201 samples of 100
 *               calls, cJSON in a pool as in nginx
 *   node        the bytes of a tenant's node, of a request in flight, and
 *               of the slab chunk that holds each
 *
 * No figure is a pass or a fail.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cJSON.h>

#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_auth.h"
#include "llm_inspect.h"
#include "llm_pacer.h"
#include "llm_tx_request.h"
#include "llm_tx_stream.h"


static int
bench_discard(void *ctx, const char *p, size_t len)
{
    *(size_t *) ctx += len;

    return 0;
}


/*
 * cJSON's memory for what nginx gives a request's pool: a bump arena,
 * freed whole between two requests, so that malloc's cost is not counted
 */

static char    bench_arena[1 << 20];
static size_t  bench_arena_used;


static void *
bench_arena_alloc(size_t size)
{
    void  *p;

    size = (size + 15) & ~(size_t) 15;

    if (size > sizeof(bench_arena) - bench_arena_used) {
        return NULL;
    }

    p = bench_arena + bench_arena_used;
    bench_arena_used += size;

    return p;
}


static void
bench_arena_free(void *p)
{
    (void) p;
}


static double
bench_now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return ts.tv_sec + ts.tv_nsec / 1e9;
}


/* the best of 5 runs of n, in ns an operation */

#define BENCH(n, body)                                                        \
    ({                                                                        \
        double  best_ = 1e9, t0_;                                             \
        long    i_, r_;                                                       \
        for (r_ = 0; r_ < 5; r_++) {                                          \
            t0_ = bench_now();                                                \
            for (i_ = 0; i_ < (n); i_++) {                                    \
                body;                                                         \
            }                                                                 \
            t0_ = (bench_now() - t0_) * 1e9 / (n);                            \
            best_ = t0_ < best_ ? t0_ : best_;                                \
        }                                                                     \
        best_;                                                                \
    })


/* the median of 31 runs of n, in ns an operation */

#define BENCH_MEDIAN(n, body)                                                 \
    ({                                                                        \
        double  t_[31], t0_;                                                  \
        long    i_, r_;                                                       \
        for (r_ = 0; r_ < 31; r_++) {                                         \
            t0_ = bench_now();                                                \
            for (i_ = 0; i_ < (n); i_++) {                                    \
                body;                                                         \
            }                                                                 \
            t_[r_] = (bench_now() - t0_) * 1e9 / (n);                         \
        }                                                                     \
        qsort(t_, 31, sizeof(double), bench_cmp);                             \
        t_[15];                                                               \
    })


/*
 * The same with the caches cold, as between two events of a paced stream,
 * where other processes ran meanwhile: the median of n, each after a walk
 * over more memory than the last-level cache holds.
 */

#define BENCH_COLD_BYTES  (64 << 20)

static char  *bench_evict;


static int
bench_cmp(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y;
}


#define BENCH_COLD(n, body)                                                   \
    ({                                                                        \
        double  t_[n], t0_;                                                   \
        size_t  k_;                                                           \
        long    i_;                                                           \
        for (i_ = 0; i_ < (n); i_++) {                                        \
            for (k_ = 0; k_ < BENCH_COLD_BYTES; k_ += 64) {                   \
                bench_evict[k_]++;                                            \
            }                                                                 \
            t0_ = bench_now();                                                \
            body;                                                             \
            t_[i_] = (bench_now() - t0_) * 1e9;                               \
        }                                                                     \
        qsort(t_, (n), sizeof(double), bench_cmp);                            \
        t_[(n) / 2];                                                          \
    })


/*
 * A queue of n waiters of two tenants, each held by tokens (tpm 1,000,000,
 * 1,000 each: a minute's worth every 1,000), the worst for the plans.
 */

static void
bench_queue(uint32_t n)
{
    void              *mem;
    double             ns, fill;
    int64_t            at, now;
    uint32_t           i;
    uint64_t           ticket, last, first, started;
    llm_pacer_t       *p;
    llm_pacer_conf_t   pc = { 1000, 1000000, 3600000, n, 3000 };
    volatile int64_t   sink;

    now = 1;
    sink = 0;

    mem = malloc(llm_pacer_size(llm_pacer_entries(&pc)));
    p = mem ? llm_pacer_init(mem, llm_pacer_size(llm_pacer_entries(&pc)),
                             &pc, now)
            : NULL;

    if (p == NULL) {
        free(mem);
        return;
    }

    (void) llm_pacer_ask_for(p, 1, 1000, now, &at, &started);

    fill = bench_now();
    last = 0;

    for (i = 0; i < n; i++) {
        (void) llm_pacer_ask_for(p, i % 2 + 1, 1000, now, &at, &last);
    }

    fill = (bench_now() - fill) * 1e9 / n;

    ns = BENCH(n < 20000 ? 2000 : 200, {
        (void) llm_pacer_go(p, &last, now, &at);
        sink += at;
    });

    /* each waiter asks every 250 ms */
    printf("queue %6u      %8.1f ns  a waiter's poll (llm_pacer_go), "
           "%u waiting: their polls hold the lock %.0f ms a second\n",
           n, ns, p->waiting, ns * p->waiting * 4 / 1e6);

    ns = BENCH(n < 20000 ? 500 : 50, {
        (void) llm_pacer_next(p, now, &first, &at);
        (void) llm_pacer_cancel(p, first, now);
        (void) llm_pacer_ask_for(p, 1, 1000, now, &at, &ticket);
        sink += at;
    });

    printf("queue %6u      %8.1f ns  cancel at the head + ask at the "
           "tail, all planned again\n", n, ns / 2);

    ns = BENCH(n < 20000 ? 500 : 50, {
        (void) llm_pacer_correct(p, started, 1000 - (sink & 1), now);
        sink++;
    });

    printf("queue %6u      %8.1f ns  a correction, all planned again; "
           "%.1f ns an ask while filling it\n", n, ns, fill);

    free(mem);
}


/* a chat an SDK sends in an agent's loop: tools, a call, its result */
static const char  bench_chat_tools[] =
    "{\"model\":\"gpt-4o-mini\",\"temperature\":0.2,\"max_tokens\":1024,"
    "\"stream\":true,\"stream_options\":{\"include_usage\":true},"
    "\"messages\":["
    "{\"role\":\"system\",\"content\":\"You are a helpful assistant for a "
    "travel agency. Answer briefly; use the tools for anything that "
    "changes.\"},"
    "{\"role\":\"user\",\"content\":\"What is the weather in Paris, and "
    "is there a flight to Lisbon tomorrow morning?\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":["
    "{\"id\":\"call_9aK2mZ\",\"type\":\"function\",\"function\":{\"name\":"
    "\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\","
    "\\\"unit\\\":\\\"celsius\\\"}\"}},"
    "{\"id\":\"call_7bQ4xY\",\"type\":\"function\",\"function\":{\"name\":"
    "\"find_flights\",\"arguments\":\"{\\\"from\\\":\\\"PAR\\\","
    "\\\"to\\\":\\\"LIS\\\",\\\"date\\\":\\\"2025-06-02\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_9aK2mZ\",\"content\":"
    "\"{\\\"temp\\\":21,\\\"sky\\\":\\\"clear\\\",\\\"wind_kmh\\\":9}\"},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_7bQ4xY\",\"content\":"
    "\"[{\\\"flight\\\":\\\"TP433\\\",\\\"dep\\\":\\\"07:05\\\"},"
    "{\\\"flight\\\":\\\"AF1024\\\",\\\"dep\\\":\\\"09:40\\\"}]\"},"
    "{\"role\":\"assistant\",\"content\":\"It is 21 \\u00b0C and clear in "
    "Paris. TP433 leaves at 07:05 and AF1024 at 09:40.\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Book "
    "the first one, window seat please.\"}]}],"
    "\"tools\":["
    "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"description\":\"The current weather of a city\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
    "\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]}},"
    "\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"find_flights\","
    "\"description\":\"Flights between two airports on a day\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"from\":"
    "{\"type\":\"string\"},\"to\":{\"type\":\"string\"},\"date\":"
    "{\"type\":\"string\",\"format\":\"date\"}},\"required\":[\"from\","
    "\"to\",\"date\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"book_flight\","
    "\"description\":\"Books a seat on a flight\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"flight\":{\"type\":\"string\"},"
    "\"seat\":{\"type\":\"string\",\"enum\":[\"window\",\"aisle\","
    "\"middle\"]}},\"required\":[\"flight\"]}}}],"
    "\"tool_choice\":\"auto\",\"parallel_tool_calls\":true}";


/* the median of 201 samples of 100 calls, in ns a call */

static void
bench_inspect(const char *name, llm_api_e api, const char *body)
{
    int                  rc;
    double               t[201], t0;
    size_t               i, k, len;
    llm_request_t        req;
    llm_inspect_conf_t   cf = { 256, 4096, 64, 1 << 20, 1000, 128000, 0 };

    len = strlen(body);
    rc = 0;

    for (i = 0; i < 201; i++) {
        t0 = bench_now();

        for (k = 0; k < 100; k++) {
            bench_arena_used = 0;
            rc |= llm_inspect(api, body, len, &cf, &req);
        }

        t[i] = (bench_now() - t0) * 1e9 / 100;
    }

    qsort(t, 201, sizeof(double), bench_cmp);

    printf("inspect, %-20s %8.1f ns  llm_inspect() of %zu bytes%s\n", name,
           t[100], len, rc ? " (refused)" : "");
}


int
main(void)
{
    size_t              size, chunk;
    double              ns;
    int64_t             now;
    uint8_t             out[LLM_KEY_HASH_LEN];
    llm_admit_t         adm;
    llm_limits_t        l;
    llm_tenant_t        t;
    llm_key_mac_t      *m;
    volatile int64_t    sink;
    static const char   secret[] = "0123456789abcdef0123456789abcdef";
    static const char   key[] = "llmgw_live_0123456789abcdefghijABCDEFGHIJ01234a";

    ngx_memzero(&l, sizeof(l));
    l.tpm.rate = 600000000;
    l.tpm.burst = 900000000;
    l.rpm.rate = 6000000;
    l.rpm.burst = 6000000;
    l.concurrency = 1000;

    now = 1;
    llm_bucket_tenant_init(&t, &l, now);
    sink = 0;

    ns = BENCH(10000000, {
        now++;
        if (llm_bucket_admit(&t, &l, 100, now, &adm) == LLM_BUCKET_OK) {
            llm_bucket_release(&t, &l, 100, 60, now);
        }
        sink += t.inflight;
    });

    printf("admission        %8.1f ns  llm_bucket_admit + llm_bucket_release, "
           "three limits\n", ns);

    /* 60,000 a minute: 1 ms apart, as the clock moves */
    {
        void              *mem;
        int64_t            at;
        uint64_t           ticket;
        llm_pacer_t       *p;
        llm_pacer_conf_t   pc = { 60000, 600000000, 60000, 16 };

        mem = malloc(llm_pacer_size(llm_pacer_entries(&pc)));
        p = mem ? llm_pacer_init(mem, llm_pacer_size(llm_pacer_entries(&pc)),
                                 &pc, now)
                : NULL;

        if (p != NULL) {
            ns = BENCH(1000000, {
                now++;
                if (llm_pacer_ask(p, 100, now, &at, &ticket) == LLM_PACER_GO) {
                    (void) llm_pacer_correct(p, ticket, 60, now);
                }
                sink += p->started;
            });

            printf("pacer            %8.1f ns  llm_pacer_ask + "
                   "llm_pacer_correct, %u in the minute\n", ns, p->started);
        }

        free(mem);
    }

    bench_queue(LLM_PACER_QUEUE_MAX);
    bench_queue(10000);

    m = llm_key_mac_new((const uint8_t *) secret, sizeof(secret) - 1);

    if (m != NULL) {
        ns = BENCH(200000, {
            llm_key_mac(m, key, sizeof(key) - 1, out);
            sink += out[0];
        });
        printf("hmac, keyed once %8.1f ns  llm_key_mac (what a request "
               "costs)\n", ns);
        llm_key_mac_free(m);
    }

    ns = BENCH(200000, {
        llm_key_hmac((const uint8_t *) secret, sizeof(secret) - 1, key,
                     sizeof(key) - 1, out);
        sink += out[0];
    });
    printf("hmac, one-shot   %8.1f ns  OpenSSL's HMAC()\n", ns);

    /*
     * A stream's events as they come, one a read: an OpenAI delta chunk,
     * and the same split in two.
     */
    {
        llm_sse_t          sse;
        static char        buf[16384];
        static const char  ev[] =
            "data: {\"id\":\"chatcmpl-1234567890\",\"object\":"
            "\"chat.completion.chunk\",\"created\":1700000000,\"model\":"
            "\"gpt-4o-mini-2024-07-18\",\"system_fingerprint\":\"fp_0123\","
            "\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok12\"},"
            "\"logprobs\":null,\"finish_reason\":null}]}\n\n";

        llm_sse_init(&sse, LLM_API_OPENAI, buf, sizeof(buf));

        ns = BENCH(1000000, {
            (void) llm_sse_feed(&sse, ev, sizeof(ev) - 1);
        });

        sink += sse.usage.delta_events;

        printf("sse event        %8.1f ns  llm_sse_feed, an OpenAI delta "
               "chunk of %zu bytes\n", ns, sizeof(ev) - 1);

        ns = BENCH(1000000, {
            (void) llm_sse_feed(&sse, ev, 60);
            (void) llm_sse_feed(&sse, ev + 60, sizeof(ev) - 1 - 60);
        });

        sink += sse.usage.delta_events;

        printf("sse event, split %8.1f ns  the same in two reads\n", ns);
    }

    /*
     * A whole JSON response, as the body filter reads it at its end:
     * mockllm's Chat Completions and Messages answers of 16 tokens.
     */
    {
        size_t             i;
        cJSON             *root;
        llm_usage_t        u;
        static const char *names[] = { "chat", "messages" };
        static const char  chat[] =
            "{\"id\":\"chatcmpl-mock-1\",\"object\":\"chat.completion\","
            "\"created\":1796315280,\"model\":\"gpt-4o-mini\",\"choices\":"
            "[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
            "\"tok1 tok2 tok3 tok4 tok5 tok6 tok7 tok8 tok9 tok10 tok11 "
            "tok12 tok13 tok14 tok15 tok16 \"},\"finish_reason\":\"stop\"}],"
            "\"usage\":{\"prompt_tokens\":14,\"completion_tokens\":16,"
            "\"total_tokens\":30,\"prompt_tokens_details\":"
            "{\"cached_tokens\":0}}}";
        static const char  msg[] =
            "{\"id\":\"msg_mock_2\",\"type\":\"message\",\"role\":"
            "\"assistant\",\"model\":\"claude-3-5-haiku\",\"content\":[{"
            "\"type\":\"text\",\"text\":\"tok1 tok2 tok3 tok4 tok5 tok6 "
            "tok7 tok8 tok9 tok10 tok11 tok12 tok13 tok14 tok15 tok16 \"}],"
            "\"stop_reason\":\"end_turn\",\"stop_sequence\":null,"
            "\"usage\":{\"input_tokens\":14,\"output_tokens\":16,"
            "\"cache_read_input_tokens\":0,"
            "\"cache_creation_input_tokens\":0}}";
        static const char *bodies[] = { chat, msg };
        static const size_t lens[] = { sizeof(chat) - 1, sizeof(msg) - 1 };
        static const llm_api_e apis[] = { LLM_API_OPENAI,
                                          LLM_API_ANTHROPIC };

        for (i = 0; i < 2; i++) {
            ns = BENCH_MEDIAN(20000, {
                sink += llm_sse_usage_from_json(apis[i], bodies[i], lens[i],
                                                &u);
            });

            printf("json %-11s %8.1f ns  llm_sse_usage_from_json, %zu "
                   "bytes (median)\n", names[i], ns, lens[i]);

            ns = BENCH_MEDIAN(20000, {
                root = cJSON_ParseWithLength(bodies[i], lens[i]);
                sink += (root != NULL);
                cJSON_Delete(root);
            });

            printf("json %-11s %8.1f ns  cJSON's parse and free of it "
                   "(median)\n", names[i], ns);
        }
    }

    /*
     * The translator, one text delta event at a time, the stream started
     * and its text block open: what a translated stream adds an event.
     */
    {
        size_t             out;
        llm_tx_conf_t      cf;
        llm_tx_stream_t    tx;
        static const char  chat[] =
            "{\"id\":\"chatcmpl-1234567890\",\"object\":"
            "\"chat.completion.chunk\",\"created\":1700000000,\"model\":"
            "\"gpt-4o-mini-2024-07-18\",\"system_fingerprint\":\"fp_0123\","
            "\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok12\"},"
            "\"logprobs\":null,\"finish_reason\":null}]}";
        static const char  start[] =
            "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\","
            "\"type\":\"message\",\"role\":\"assistant\",\"model\":"
            "\"claude-sonnet-4-5\",\"content\":[],\"usage\":"
            "{\"input_tokens\":20,\"output_tokens\":1}}}";
        static const char  block[] =
            "{\"type\":\"content_block_start\",\"index\":0,"
            "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}";
        static const char  delta[] =
            "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
            "{\"type\":\"text_delta\",\"text\":\" tok12\"}}";

        memset(&cf, 0, sizeof(llm_tx_conf_t));
        cf.from = LLM_API_OPENAI;
        cf.to = LLM_API_ANTHROPIC;
        cf.model = "gpt-4o-mini";
        cf.model_len = 11;
        cf.id = "0123456789abcdef0123456789abcdef";
        cf.id_len = 32;
        cf.created = 1700000000;
        out = 0;

        llm_tx_stream_init(&tx, &cf);

        ns = BENCH(1000000, {
            (void) llm_tx_stream_event(&tx, "", 0, chat, sizeof(chat) - 1,
                                       0, bench_discard, &out);
        });

        printf("translator, ns per event, Chat to Messages %8.1f ns  "
               "a text delta chunk of %zu bytes\n", ns, sizeof(chat) - 1);

        cf.from = LLM_API_ANTHROPIC;
        cf.to = LLM_API_OPENAI;

        llm_tx_stream_init(&tx, &cf);
        (void) llm_tx_stream_event(&tx, "message_start", 13, start,
                                   sizeof(start) - 1, 0, bench_discard, &out);
        (void) llm_tx_stream_event(&tx, "content_block_start", 19, block,
                                   sizeof(block) - 1, 0, bench_discard, &out);

        ns = BENCH(1000000, {
            (void) llm_tx_stream_event(&tx, "content_block_delta", 19, delta,
                                       sizeof(delta) - 1, 0, bench_discard,
                                       &out);
        });

        printf("translator, ns per event, Messages to Chat %8.1f ns  "
               "a text_delta event of %zu bytes\n", ns, sizeof(delta) - 1);

        ns = BENCH(200000, {
            llm_tx_stream_init(&tx, &cf);
            (void) llm_tx_stream_event(&tx, "message_start", 13, start,
                                       sizeof(start) - 1, 0, bench_discard,
                                       &out);
        });

        printf("translator, first event, Messages to Chat %8.1f ns  "
               "message_start (%zu bytes) to the first chunk\n", ns,
               sizeof(start) - 1);

        bench_evict = calloc(1, BENCH_COLD_BYTES);

        if (bench_evict) {
            ns = BENCH_COLD(101, {
                llm_tx_stream_init(&tx, &cf);
                (void) llm_tx_stream_event(&tx, "message_start", 13, start,
                                           sizeof(start) - 1, 0,
                                           bench_discard, &out);
            });

            printf("translator, first event, cold  %8.1f ns  the same, "
                   "the caches cold (median)\n", ns);
        }

        sink += out;
    }

    /*
     * The request of a translated stream, before anything goes upstream:
     * a chat request as an SDK sends it, to Messages.
     */
    {
        llm_tx_request_t       rq;
        llm_tx_request_conf_t  rcf;
        static const char      body[] =
            "{\"model\":\"gpt-4o-mini\",\"stream\":true,"
            "\"stream_options\":{\"include_usage\":true},"
            "\"max_tokens\":256,\"temperature\":0.7,\"top_p\":1,"
            "\"messages\":[{\"role\":\"system\",\"content\":"
            "\"You are a helpful assistant.\"},{\"role\":\"user\","
            "\"content\":\"Say hello to the gateway.\"},{\"role\":"
            "\"assistant\",\"content\":\"Hello, gateway.\"},{\"role\":"
            "\"user\",\"content\":\"Once more, with feeling.\"}]}";

        memset(&rcf, 0, sizeof(llm_tx_request_conf_t));
        rcf.from = LLM_API_OPENAI;
        rcf.to = LLM_API_ANTHROPIC;
        rcf.model = "claude-haiku-4-5";
        rcf.model_len = 16;
        rcf.max_tokens = 256;

        cJSON_InitHooks(&(cJSON_Hooks) { bench_arena_alloc,
                                         bench_arena_free });

        ns = BENCH(100000, {
            bench_arena_used = 0;

            if (llm_tx_request(&rcf, body, sizeof(body) - 1, &rq) == 0) {
                sink += rq.len;
            }
        });

        printf("translator, request, Chat to Messages %8.1f ns  "
               "a chat request of %zu bytes, 4 messages, in a pool\n", ns,
               sizeof(body) - 1);

        if (bench_evict) {
            ns = BENCH_COLD(101, {
                bench_arena_used = 0;

                if (llm_tx_request(&rcf, body, sizeof(body) - 1, &rq) == 0) {
                    sink += rq.len;
                }
            });

            printf("translator, request, cold     %8.1f ns  the same, the "
                   "caches cold (median)\n", ns);
        }

        cJSON_InitHooks(NULL);
        free(bench_evict);
    }

    /* what admission reads of a request body, before anything else */
    cJSON_InitHooks(&(cJSON_Hooks) { bench_arena_alloc, bench_arena_free });

    bench_inspect("load.lua", LLM_API_OPENAI,
                  "{\"model\":\"mock-bench\",\"max_tokens\":64,"
                  "\"messages\":[{\"role\":\"user\",\"content\":"
                  "\"Say hello to the gateway.\"}]}");

    bench_inspect("load.lua, stream", LLM_API_OPENAI,
                  "{\"model\":\"mock-bench\",\"max_tokens\":64,"
                  "\"stream\":true,\"messages\":[{\"role\":\"user\","
                  "\"content\":\"Say hello to the gateway.\"}]}");

    bench_inspect("chat with tools", LLM_API_OPENAI, bench_chat_tools);

    cJSON_InitHooks(NULL);

    /* the slab rounds a chunk up to a power of two, 8 bytes at least */
    size = sizeof(ngx_http_llm_gateway_node_t);

    for (chunk = 8; chunk < size; chunk <<= 1) { /* void */ }

    printf("tenant node      %8zu B   in a %zu-byte slab chunk: %zu "
           "tenants a megabyte\n", size, chunk, (size_t) 1048576 / chunk);

    /* with a request id of 32 bytes and a model name of 24 */
    size = offsetof(ngx_http_llm_gateway_flight_t, data) + 32 + 24;

    for (chunk = 8; chunk < size; chunk <<= 1) { /* void */ }

    printf("request in flight %7zu B   in a %zu-byte slab chunk: %zu "
           "requests a megabyte\n", size, chunk, (size_t) 1048576 / chunk);

    size = sizeof(ngx_http_llm_gateway_addr_t);

    for (chunk = 8; chunk < size; chunk <<= 1) { /* void */ }

    printf("bad-key address  %8zu B   in a %zu-byte slab chunk\n", size,
           chunk);

    return sink == 42;
}
