-- wrk: the streams of the fault scenarios (t/lib/Chaos.pm), on one
-- tenant's key (LLMGW_KEY): the prompt "hi" (7 tokens by the estimate and
-- the mock alike), max_tokens 50, LLMGW_TOKENS tokens (20) sent
-- LLMGW_DELAY_MS ms (20) apart by the mock.

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("LLMGW_KEY")
wrk.headers["x-mock-tokens"] = os.getenv("LLMGW_TOKENS") or "20"
wrk.headers["x-mock-delay-ms"] = os.getenv("LLMGW_DELAY_MS") or "20"
wrk.body = '{"model":"mock-chaos","max_tokens":50,"stream":true,'
    .. '"messages":[{"role":"user","content":"hi"}]}'
