-- wrk: one tenant's key, a streamed request (the location sets how the
-- mock paces it).

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("LLMGW_KEY")
wrk.body = '{"model":"mock-chaos","max_tokens":50,"stream":true,'
    .. '"messages":[{"role":"user","content":"hi"}]}'
