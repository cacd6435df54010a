-- wrk script for mockllm: a small non-streaming chat completion.
--
--   taskset -c 0 build/mockllm -l 127.0.0.1:18080 &
--   taskset -c 1 wrk -t1 -c32 -d5s -s bench/mockllm.lua \
--       http://127.0.0.1:18080/v1/chat/completions

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"gpt-mock","max_tokens":64,'
    .. '"messages":[{"role":"user","content":"Say hello to the gateway."}]}'
