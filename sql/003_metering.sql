-- ngx_llm_gateway: metering of every response format and every ending.
-- The OpenAI Responses API, reasoning and cache-write tokens, and the
-- flags that say how a row's figures were obtained, as columns.
--
-- Applied once, in a single transaction, by
--     psql -v ON_ERROR_STOP=1 -1 -f sql/003_metering.sql


ALTER TABLE llm.usage
    DROP CONSTRAINT usage_api_valid,
    ADD CONSTRAINT usage_api_valid
        CHECK (api IN ('openai', 'anthropic', 'responses')),
    ADD COLUMN cache_write_tokens  bigint NOT NULL DEFAULT 0
        CONSTRAINT usage_cache_write_tokens_nonneg
        CHECK (cache_write_tokens >= 0),
    ADD COLUMN reasoning_tokens    bigint NOT NULL DEFAULT 0
        CONSTRAINT usage_reasoning_tokens_nonneg
        CHECK (reasoning_tokens >= 0),
    ADD COLUMN estimated  boolean
        GENERATED ALWAYS AS (coalesce(flags & 1 <> 0, false)) STORED,
    ADD COLUMN partial    boolean
        GENERATED ALWAYS AS (coalesce(flags & 2 <> 0, false)) STORED;

ALTER TABLE llm.usage_rejected
    ADD COLUMN cache_write_tokens  bigint,
    ADD COLUMN reasoning_tokens    bigint;


COMMENT ON COLUMN llm.usage.api IS
    'The API dialect of the request: openai (Chat Completions), anthropic '
    '(Messages) or responses (OpenAI Responses).';
COMMENT ON COLUMN llm.usage.input_tokens IS
    'Prompt tokens, including cached ones and, for Anthropic, those written '
    'to the cache, as reported by the upstream (or the gateway''s estimate '
    'when estimated).';
COMMENT ON COLUMN llm.usage.output_tokens IS
    'Generated tokens, reasoning tokens included, as reported by the '
    'upstream; when estimated, counted by the gateway from the text it '
    'streamed: the larger of the delta events and ceil(bytes / 4).';
COMMENT ON COLUMN llm.usage.cache_write_tokens IS
    'The part of input_tokens written to the upstream''s prompt cache '
    '(Anthropic cache_creation_input_tokens), usually priced higher.';
COMMENT ON COLUMN llm.usage.reasoning_tokens IS
    'The part of output_tokens spent reasoning (OpenAI reasoning_tokens).';
COMMENT ON COLUMN llm.usage.finish_reason IS
    'Why generation stopped, as the upstream said (stop, length, end_turn, '
    'max_tokens, tool_calls, completed, max_output_tokens, ...), or, when '
    'the final usage never came: client_closed (the client went away) or '
    'upstream_error (the upstream failed, stalled or sent an error).';
COMMENT ON COLUMN llm.usage.flags IS
    'Bit mask: 1 = estimated, some figures are the gateway''s (see '
    'estimated); 2 = partial, the response ended early; 4 = a usage figure '
    'was out of range or not an integer and was clamped; 8 = the final '
    'usage was reported more than once, the largest figures count; 16 = an '
    'event was too large to read.';
COMMENT ON COLUMN llm.usage.estimated IS
    'flags & 1: the upstream''s final usage never came.  input_tokens is '
    'then its reported prompt size or the gateway''s estimate, and '
    'output_tokens the gateway''s count of the text it streamed; or, when '
    'the body could not be read at all, the whole reservation.';
COMMENT ON COLUMN llm.usage.partial IS
    'flags & 2: the response did not end cleanly (finish_reason says how).';
