-- ngx_llm_gateway: a request whose nginx worker died (killed, crashed)
-- before settling it is settled by another worker, from what had passed;
-- its finish_reason says so.
--
-- Applied once, in a single transaction, by
--     psql -v ON_ERROR_STOP=1 -1 -f sql/009_worker_exited.sql

COMMENT ON COLUMN llm.usage.finish_reason IS
    'Why generation stopped, as the upstream said (stop, length, end_turn, '
    'max_tokens, tool_calls, completed, max_output_tokens, ...), or, when '
    'the final usage never came: client_closed (the client went away), '
    'upstream_error (the upstream failed, stalled or sent an error) or '
    'worker_exited (the nginx worker serving it died: another settled it '
    'from what had passed).';
