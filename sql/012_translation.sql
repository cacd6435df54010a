-- ngx_llm_gateway: translated requests in the ledger.  A client speaks
-- the dialect of its location (api); the backend that served it may speak
-- another, the gateway translating between them.  A row says which
-- backend served (backend, its llm_gateway_backend name) and in which
-- dialect (upstream_api): a Chat Completions request served by a Messages
-- backend is api 'openai', upstream_api 'anthropic', backend 'claude-a'.
-- Both are NULL for a request that reached no backend, and for the rows
-- of an older gateway (a settle record of version 2), which did not say.
--
-- Applied once, in a single transaction, by
--     psql -v ON_ERROR_STOP=1 -1 -f sql/012_translation.sql
-- before an accountd built with it starts, whose statement writes the new
-- columns; an older accountd works on it as before, its rows NULL in them.


ALTER TABLE llm.usage
    ADD COLUMN upstream_api  text
        CONSTRAINT usage_upstream_api_valid
        CHECK (upstream_api IN ('openai', 'anthropic', 'responses',
                                'embeddings')),
    ADD COLUMN backend       text
        CONSTRAINT usage_backend_valid
        CHECK (octet_length(backend) BETWEEN 1 AND 64);

ALTER TABLE llm.usage_rejected
    ADD COLUMN upstream_api  text,
    ADD COLUMN backend       text;


COMMENT ON COLUMN llm.usage.api IS
    'The API dialect the client spoke: openai (Chat Completions), anthropic '
    '(Messages), responses (OpenAI Responses) or embeddings (OpenAI '
    'Embeddings, input tokens only).  The token columns mean what this '
    'dialect says.';
COMMENT ON COLUMN llm.usage.upstream_api IS
    'The API dialect of the backend that served the request, named as in '
    'api; another than api when the gateway translated between them.  NULL '
    'when no backend served it (refused, failed before one answered) or '
    'the gateway did not say (before version 3 of its record).';
COMMENT ON COLUMN llm.usage.backend IS
    'The name of the llm_gateway_backend that served the request (at most '
    '64 bytes; a byte that is not UTF-8, or a control character, as "?").  '
    'NULL as upstream_api.';
COMMENT ON COLUMN llm.usage_rejected.upstream_api IS
    'As llm.usage.upstream_api.';
COMMENT ON COLUMN llm.usage_rejected.backend IS
    'As llm.usage.backend.';


-- accountd's look-up of a batch (sql/010) returns the new columns too, so
-- that a replay with another backend is refused as one with other figures.
-- The same function otherwise; its result type changes, so it is made
-- anew.

DROP FUNCTION llm.usage_of_requests(text[]);

CREATE FUNCTION llm.usage_of_requests(request_ids text[])
    RETURNS TABLE (request_id text, tenant_id bigint, key_id bigint,
                   model text, api text, input_tokens bigint,
                   output_tokens bigint, cached_input_tokens bigint,
                   cache_write_tokens bigint, reasoning_tokens bigint,
                   reserved_tokens bigint, finish_reason text, status int,
                   flags int, ts timestamptz, upstream_api text,
                   backend text)
    LANGUAGE plpgsql STABLE SET enable_seqscan = off
AS $$
DECLARE
    parts  regclass[];
    part   regclass;
BEGIN
    SELECT array_agg(t.relid) INTO parts
      FROM pg_partition_tree('llm.usage') t
     WHERE t.isleaf AND pg_relation_size(t.relid) > 0;

    IF EXISTS (SELECT FROM unnest(parts) p
                WHERE NOT has_table_privilege(p, 'SELECT'))
    THEN
        RETURN QUERY
            SELECT u.request_id, u.tenant_id, u.key_id, u.model, u.api,
                   u.input_tokens, u.output_tokens, u.cached_input_tokens,
                   u.cache_write_tokens, u.reasoning_tokens,
                   u.reserved_tokens, u.finish_reason, u.status, u.flags,
                   u.ts, u.upstream_api, u.backend
              FROM llm.usage u
             WHERE u.request_id = ANY (request_ids);
        RETURN;
    END IF;

    FOREACH part IN ARRAY coalesce(parts, '{}') LOOP
        RETURN QUERY EXECUTE format(
            'SELECT request_id, tenant_id, key_id, model, api, input_tokens,'
            ' output_tokens, cached_input_tokens, cache_write_tokens,'
            ' reasoning_tokens, reserved_tokens, finish_reason, status,'
            ' flags, ts, upstream_api, backend FROM %s'
            ' WHERE request_id = ANY ((SELECT $1)::text[])',
            part)
            USING request_ids;
    END LOOP;
END
$$;

COMMENT ON FUNCTION llm.usage_of_requests(text[]) IS
    'The llm.usage rows of these request_ids, any ts: through the primary '
    'key of each partition that has rows (accountd''s look-up of a '
    'batch).';
