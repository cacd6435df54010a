-- wrk: the request of bench/load.pl (and bench/peers.pl), the same to
-- every target, and its figures as one line of JSON for the script to read.
--
--   BENCH_MODE     json (a chat completion) or sse (the same, streamed)
--   LLMGW_KEY      the tenant's key (mockllm ignores it)
--   BENCH_HEADERS  more headers, "Name: value" a line: what a target needs
--                  besides the request (Portkey: its upstream)

local stream = os.getenv("BENCH_MODE") == "sse"

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. (os.getenv("LLMGW_KEY") or "")
wrk.headers["x-mock-tokens"] = "16"
wrk.body = '{"model":"mock-bench","max_tokens":64,'
    .. (stream and '"stream":true,' or '')
    .. '"messages":[{"role":"user","content":"Say hello to the gateway."}]}'

local more = os.getenv("BENCH_HEADERS") or ""
for name, value in more:gmatch("([^:\n]+):%s*([^\n]*)") do
    wrk.headers[name] = value
end

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        'BENCH {"requests":%d,"duration_us":%d,"bytes":%d,'
        .. '"errors":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,'
        .. '"mean_us":%.1f}\n',
        summary.requests, summary.duration, summary.bytes,
        e.connect + e.read + e.write + e.status + e.timeout,
        latency:percentile(50), latency:percentile(90),
        latency:percentile(99), latency.mean))
end
