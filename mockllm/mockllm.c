
/*
 * mockllm: a mock LLM upstream for the gateway's tests and benchmarks.
 *
 *     mockllm -l 127.0.0.1:PORT [-t THREADS] [-r RPM [-s MS]] [-T TPM]
 *             [-D TOKENS [-P SECONDS]] [-c N] [-d MS]
 *
 * POST /v1/chat/completions (OpenAI Chat Completions), POST /v1/responses
 * (OpenAI Responses), POST /v1/messages (Anthropic), GET /health.
 * Everything it answers is a function of the request, so that tests can
 * predict the usage to the token:
 *
 *   prompt tokens   P = 3 + sum over messages of (3 + sum of ceil(bytes / 4)
 *                   over the message's text) + sum of ceil(bytes / 4) over
 *                   the Anthropic "system" text or the Responses
 *                   "instructions".  A message's text is its "content"
 *                   string, or the "text" string of every part of an array
 *                   content; "system" is a string or such an array.  The
 *                   Responses "input" is a string, one message, or an array
 *                   of items counted as messages.  Bytes are those of the
 *                   decoded UTF-8 string.  "x-mock-prompt-tokens: N"
 *                   replaces P by N.
 *
 *   output tokens   C = "x-mock-tokens: N" or 16, capped at the output
 *                   limit it read (below), 64 when the body has none.
 *                   Chat Completions with n > 1: n choices, each its own
 *                   "tok1 ... tokC", completion_tokens n x C.  When
 *                   capped, the finish reason is "length" (OpenAI),
 *                   "max_tokens" (Anthropic), or the Responses status is
 *                   "incomplete" with incomplete_details.reason
 *                   "max_output_tokens"; otherwise "stop", "end_turn" or
 *                   "completed".
 *
 *   the text        "tok1 tok2 ... tokC ": token i is "tok" i and a space.
 *
 *   cached tokens   K = "x-mock-cached-tokens: N" or 0, at most P, reported
 *                   beside P: OpenAI's P includes them, Anthropic's
 *                   input_tokens leaves them out.
 *
 *   cache writes    W = "x-mock-cache-creation-tokens: N" or 0, at most
 *                   P - K, Anthropic only: cache_creation_input_tokens,
 *                   and left out of input_tokens, which is P - K - W.
 *
 *   reasoning       R = "x-mock-reasoning-tokens: N" or 0, at most C: part
 *                   of C, not more; the text is the same.  Responses
 *                   always report output_tokens_details.reasoning_tokens;
 *                   Chat Completions add completion_tokens_details only
 *                   when the header is given.
 *
 * The body is read as each provider reads it (mockllm_read.c, by the
 * dialect rules the gateway follows too, written apart), and what the
 * providers refuse is a 400 in the provider's own format, OpenAI's
 * {"error":{"message","type":"invalid_request_error","param","code"}}
 * with param the member, or Anthropic's {"type":"error","error":{"type":
 * "invalid_request_error","message"}}:
 *
 *   JSON            one object, RFC 8259 strictly (no raw control byte in
 *                   a string, nothing after the value, valid UTF-8, 1000
 *                   levels at most); names compared unescaped; of a
 *                   repeated name the last is read; null is absent;
 *                   a member name with U+0000 is refused
 *   model           required, a non-empty string, no control character
 *                   but \t \n \r
 *   integers        a number of an integral value (8, 8.0, 8e0), a
 *                   limit 1 to 2147483647, n 1 to 128
 *   Chat            max_completion_tokens or max_tokens, not both; n;
 *                   stream a boolean; messages required, an array of
 *                   objects; content a string or parts text, image_url,
 *                   input_audio, file; refused: max_output_tokens,
 *                   max_tokens_to_sample, system, stop_sequences, top_k,
 *                   thinking, input, instructions, previous_response_id
 *   Anthropic       max_tokens required; messages required; system a
 *                   string or text blocks; blocks text, image, document,
 *                   tool_use, tool_result (its content: text, image,
 *                   document); thinking.budget_tokens below max_tokens;
 *                   refused: n, max_completion_tokens, max_output_tokens,
 *                   max_tokens_to_sample, stream_options, input,
 *                   instructions, previous_response_id, functions
 *   Responses       max_output_tokens; input a string or items (message,
 *                   with a role or "type":"message"; function_call,
 *                   function_call_output, item_reference, reasoning),
 *                   required unless previous_response_id, conversation or
 *                   prompt is given; parts input_text, output_text,
 *                   input_image, input_file, input_audio; refused:
 *                   max_tokens, max_completion_tokens,
 *                   max_tokens_to_sample, n, messages, system,
 *                   stop_sequences, top_k, functions
 *
 * Every response to an LLM endpoint whose body is a JSON object, refused
 * or not, carries what was read:
 *
 *   x-mock-read: model=M max=L n=N stream=0|1 m=N i=N f=N a=N t=N r=N
 *
 * M the model, any byte outside 0x21-0x7e written %XX; L the output limit
 * (64 when none is given); n 1 but for Chat; "?" for a value refused;
 * m the messages (Responses: the items, a string input is one), i the
 * images, f the files, a the audio parts, t the tools (Chat: tools and
 * functions), r the references to stored context (Anthropic: mcp_servers
 * entries and a container; Responses: previous_response_id, conversation,
 * prompt and each item_reference).
 *
 * A Responses stream is the real event sequence, each event "event: TYPE"
 * and a data line with its type and sequence_number: response.created,
 * response.in_progress, response.output_item.added,
 * response.content_part.added, one response.output_text.delta per token,
 * response.output_text.done, response.content_part.done,
 * response.output_item.done, then response.completed (response.incomplete
 * when capped) with the usage; no "data: [DONE]".
 *
 * Behaviour headers, all optional:
 *
 *   x-mock-ttfb-ms: N        wait N ms before the response headers
 *   x-mock-delay-ms: N       wait N ms before each streamed token
 *                            (default: -d MS, or 0)
 *   x-mock-die-after: N      cut the response after min(N, C) tokens,
 *                            before the finishing events; a whole response
 *                            is cut there, short of its Content-Length
 *   x-mock-die-how: HOW      how it is cut: "close" (the default), "reset"
 *                            (an RST once what was sent is acknowledged,
 *                            or after 2 s), "stall" (nothing more is sent,
 *                            the connection stays open until the peer
 *                            closes it)
 *   x-mock-error-after: N    streams: after min(N, C) tokens, the
 *                            provider's in-band error event, then a clean
 *                            end without the finishing events or usage
 *   x-mock-no-usage: 1       no usage anywhere (Responses: "usage":null)
 *   x-mock-usage: JSON       a JSON object whose members replace or add
 *                            to those of the final usage (Chat: the usage
 *                            chunk or the body; Anthropic: message_delta or
 *                            the body; Responses: response.completed or the
 *                            body), written as they came: any value goes;
 *                            400 if it is not an object
 *   x-mock-usage-repeat: N   the event with the final usage (Chat: the
 *                            usage chunk; Anthropic: message_delta;
 *                            Responses: response.completed) sent N times,
 *                            identical, 0 to 1000 (default 1)
 *   x-mock-pad-bytes: N      streams: one SSE comment line, ": " and N
 *                            "x", before the first token; N at most 16 MiB
 *   x-mock-malformed: 1      one data line of invalid JSON before the
 *                            finishing events; a whole response has its
 *                            JSON cut in half
 *   x-mock-status: N         N in 400-599: the provider's error body for N,
 *                            with Retry-After: 1 on 429, 503 and 529
 *
 * A header's error is a 400 before the body's, x-mock-status comes
 * before the body's refusals, and the body is read all the same.
 *
 * A Chat stream with n > 1 sends each choice's chunks, with its index,
 * one chunk each: the role chunks, then each token of every choice in
 * turn, then the finishing chunks.
 *
 * Options but the limits:
 *
 *   -t THREADS               event loops, 1 by default
 *   -d MS                    wait MS ms before each streamed token of a
 *                            request without x-mock-delay-ms, as a model
 *                            streams (a demo stack); 0 by default
 *
 * Every response carries x-mock-request-id, the number also in the ids,
 * and x-mock-saw-request-id, the x-request-id of the request, if any.
 *
 * The limits of one provider key, all off by default:
 *
 *   -r RPM                   requests a minute, a sliding window of the
 *                            arrivals of admitted requests
 *   -c N                     requests in flight at most: one more gets
 *                            the provider's overloaded answer (503, or
 *                            Anthropic's 529) with Retry-After: 1
 *   -s MS                    and RPM * MS / 1 min (rounded up) in any MS,
 *                            as providers enforce a minute's limit in
 *                            shorter windows
 *   -T TPM                   tokens a minute, the same window: a request
 *                            is charged P + its max tokens when it arrives,
 *                            corrected to P + the tokens it sent at its end
 *   -D TOKENS, -P SECONDS    a quota of TOKENS a period (86400 s), periods
 *                            counted from the start, charged the same way
 *
 * A valid LLM request that would pass one, checked in this order, gets the
 * provider's 429 for it, with retry-after and the rate limit headers, and
 * is not counted.  With a limit on, every LLM response carries
 * x-mock-arrival-ms (since the start) and the rate limit headers;
 * GET /limits answers the counters and the fullest windows,
 * POST /limits/reset answers them and zeroes them, POST /limits/inflight/N
 * makes -c's ceiling N from now on (0: none).  See mockllm_limits.c.
 *
 * Each thread runs its own epoll loop on its own SO_REUSEPORT listener, so
 * nothing but the request counter, the tenants and the limits is shared.
 * Delays are timers in a heap per loop, never a sleep.
 */


/* accept4() */
#define _GNU_SOURCE

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <linux/sockios.h>

#include "mockllm.h"


#define MOCKLLM_THREADS_MAX  64
#define MOCKLLM_RPM_MAX      1000000
#define MOCKLLM_LIMIT_MAX    1000000000000LL

/* mockllm_options(): -h, nothing more to do */
#define MOCKLLM_DONE         1


typedef struct {
    char                *addr;
    long                 threads;
    int64_t              rpm;
    int64_t              tpm;
    int64_t              quota;
    int64_t              period;
    int64_t              short_ms;
    int64_t              inflight;
} mockllm_opts_t;


static int mockllm_options(int argc, char **argv, mockllm_opts_t *o);
static int mockllm_listen(struct sockaddr_storage *sa, socklen_t len,
    int reuseport);
static int mockllm_parse_addr(const char *s, struct sockaddr_storage *sa,
    socklen_t *len);
static void mockllm_raise_nofile(void);
static int64_t mockllm_parse_num(const char *s, int64_t max);
static void mockllm_usage(void);


int
main(int argc, char **argv)
{
    int                      i, n, fd, sig, rc;
    sigset_t                 set;
    socklen_t                len;
    mockllm_opts_t           o;
    mockllm_loop_t          *loops;
    struct sockaddr_storage  sa;

    rc = mockllm_options(argc, argv, &o);
    if (rc != MOCKLLM_OK) {
        return rc == MOCKLLM_DONE ? 0 : 2;
    }

    if (mockllm_parse_addr(o.addr, &sa, &len) != MOCKLLM_OK) {
        return 2;
    }

    mockllm_limits_spent = mockllm_llm_spent;

    if (mockllm_limits_init(o.rpm, o.tpm, o.quota, o.period, o.short_ms,
                            o.inflight)
        != MOCKLLM_OK)
    {
        return 1;
    }

    /*
     * The signals are taken by sigwait() in the main thread only; the
     * threads inherit the mask.  Writes to a closed peer are errors, never
     * signals.
     */

    signal(SIGPIPE, SIG_IGN);

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    mockllm_raise_nofile();

    loops = calloc(o.threads, sizeof(mockllm_loop_t));
    if (loops == NULL) {
        mockllm_log("calloc() failed");
        return 1;
    }

    n = (int) o.threads;

    for (i = 0; i < n; i++) {
        fd = mockllm_listen(&sa, len, n > 1);
        if (fd == -1) {
            return 1;
        }

        if (mockllm_loop_init(&loops[i], fd) != MOCKLLM_OK) {
            return 1;
        }
    }

    for (i = 0; i < n; i++) {
        if (pthread_create(&loops[i].tid, NULL, mockllm_loop_run, &loops[i])
            != 0)
        {
            mockllm_log("pthread_create() failed");
            return 1;
        }
    }

    for ( ;; ) {
        if (sigwait(&set, &sig) == 0) {
            break;
        }
    }

    for (i = 0; i < n; i++) {
        (void) mockllm_loop_stop(&loops[i]);
    }

    for (i = 0; i < n; i++) {
        pthread_join(loops[i].tid, NULL);
        mockllm_loop_free(&loops[i]);
    }

    free(loops);

    return mockllm_failed ? 1 : 0;
}


static int
mockllm_options(int argc, char **argv, mockllm_opts_t *o)
{
    int    ch;
    char  *end;

    o->addr = NULL;
    o->threads = 1;
    o->rpm = 0;
    o->short_ms = 0;
    o->inflight = 0;
    o->tpm = 0;
    o->quota = 0;
    o->period = 86400;

    while ((ch = getopt(argc, argv, "l:t:r:s:c:T:D:P:d:h")) != -1) {
        switch (ch) {

        case 'l':
            o->addr = optarg;
            break;

        case 't':
            errno = 0;
            o->threads = strtol(optarg, &end, 10);

            if (errno || *end != '\0' || o->threads < 1
                || o->threads > MOCKLLM_THREADS_MAX)
            {
                mockllm_log("invalid thread count \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        case 'r':
            o->rpm = mockllm_parse_num(optarg, MOCKLLM_RPM_MAX);

            if (o->rpm < 1) {
                mockllm_log("invalid requests per minute \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        case 'c':
            o->inflight = mockllm_parse_num(optarg, 1000000);

            if (o->inflight < 1) {
                mockllm_log("invalid requests in flight \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        case 's':
            o->short_ms = mockllm_parse_num(optarg, 60000);

            if (o->short_ms < 1) {
                mockllm_log("invalid short window \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        case 'T':
            o->tpm = mockllm_parse_num(optarg, MOCKLLM_LIMIT_MAX);

            if (o->tpm < 1) {
                mockllm_log("invalid tokens per minute \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        case 'D':
            o->quota = mockllm_parse_num(optarg, MOCKLLM_LIMIT_MAX);

            if (o->quota < 1) {
                mockllm_log("invalid token quota \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        case 'P':
            o->period = mockllm_parse_num(optarg, MOCKLLM_LIMIT_MAX / 1000);

            if (o->period < 1) {
                mockllm_log("invalid quota period \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        case 'd':
            /* 0 is the default, and may be given */
            mockllm_http_delay = strcmp(optarg, "0") == 0
                            ? 0 : mockllm_parse_num(optarg, MOCKLLM_DELAY_MAX);

            if (mockllm_http_delay < 0) {
                mockllm_log("invalid token delay \"%s\"", optarg);
                return MOCKLLM_ERROR;
            }

            break;

        default:
            mockllm_usage();
            return ch == 'h' ? MOCKLLM_DONE : MOCKLLM_ERROR;
        }
    }

    if (o->addr == NULL || optind != argc) {
        mockllm_usage();
        return MOCKLLM_ERROR;
    }

    return MOCKLLM_OK;
}


/* a positive decimal number up to max, or -1 */

static int64_t
mockllm_parse_num(const char *s, int64_t max)
{
    char       *end;
    long long   v;

    errno = 0;
    v = strtoll(s, &end, 10);

    if (errno || end == s || *end != '\0' || v < 1 || v > max) {
        return -1;
    }

    return v;
}


static void
mockllm_usage(void)
{
    fprintf(stderr, "usage: mockllm -l ADDR:PORT [-t THREADS] [-r RPM "
                    "[-s MS]] [-T TPM] [-D TOKENS [-P SECONDS]] [-c N] "
                    "[-d MS]\n"
                    "  ADDR is a loopback address: 127.0.0.1, [::1]\n"
                    "  -r, -T: requests, tokens a minute (sliding)\n"
                    "  -s: RPM also in any MS, pro rata\n"
                    "  -c: requests in flight at most (503 beyond)\n"
                    "  -D, -P: a quota of TOKENS each SECONDS (86400)\n"
                    "  -d: ms before each streamed token (x-mock-delay-ms "
                    "wins)\n");
}


static int
mockllm_parse_addr(const char *s, struct sockaddr_storage *sa,
    socklen_t *len)
{
    char                 host[64], *end;
    long                 port;
    const char          *colon;
    size_t               n;
    struct sockaddr_in  *sin;
    struct sockaddr_in6 *sin6;

    memset(sa, 0, sizeof(struct sockaddr_storage));

    colon = strrchr(s, ':');

    if (colon == NULL) {
        goto invalid;
    }

    errno = 0;
    port = strtol(colon + 1, &end, 10);

    if (errno || end == colon + 1 || *end != '\0' || port < 1
        || port > 65535)
    {
        goto invalid;
    }

    n = colon - s;

    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
        s++;
        n -= 2;
    }

    if (n == 0 || n >= sizeof(host)) {
        goto invalid;
    }

    memcpy(host, s, n);
    host[n] = '\0';

    if (strcmp(host, "localhost") == 0) {
        strcpy(host, "127.0.0.1");
    }

    sin = (struct sockaddr_in *) sa;
    sin6 = (struct sockaddr_in6 *) sa;

    if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t) port);
        *len = sizeof(struct sockaddr_in);

        if ((ntohl(sin->sin_addr.s_addr) >> 24) != 127) {
            goto remote;
        }

        return MOCKLLM_OK;
    }

    if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t) port);
        *len = sizeof(struct sockaddr_in6);

        if (!IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr)) {
            goto remote;
        }

        return MOCKLLM_OK;
    }

invalid:

    mockllm_log("invalid listen address \"%s\"", s);
    return MOCKLLM_ERROR;

remote:

    /* a mock must never be reachable from another machine */
    mockllm_log("\"%s\" is not a loopback address", host);
    return MOCKLLM_ERROR;
}


static int
mockllm_listen(struct sockaddr_storage *sa, socklen_t len, int reuseport)
{
    int  fd, on;

    fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        mockllm_log("socket() failed: %s", strerror(errno));
        return -1;
    }

    on = 1;

    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) == -1
        || (reuseport
            && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on))
               == -1))
    {
        mockllm_log("setsockopt() failed: %s", strerror(errno));
        close(fd);
        return -1;
    }

    if (bind(fd, (struct sockaddr *) sa, len) == -1) {
        mockllm_log("bind() failed: %s", strerror(errno));
        close(fd);
        return -1;
    }

    if (listen(fd, 4096) == -1) {
        mockllm_log("listen() failed: %s", strerror(errno));
        close(fd);
        return -1;
    }

    return fd;
}


/* thousands of paced streams need more than the usual 1024 descriptors */

static void
mockllm_raise_nofile(void)
{
    struct rlimit  rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;

        if (setrlimit(RLIMIT_NOFILE, &rl) == -1) {
            mockllm_log("setrlimit(RLIMIT_NOFILE) failed: %s",
                        strerror(errno));
        }
    }
}


