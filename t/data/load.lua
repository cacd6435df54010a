-- wrk: one tenant's key, a request that reserves exactly 100 tokens
-- (prompt 7 by the estimate and the mock alike, max_tokens 93, all used).

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("LLMGW_KEY")
wrk.body = '{"model":"mock-load","max_tokens":93,'
    .. '"messages":[{"role":"user","content":"hi"}]}'
