-- ngx_llm_gateway: what reconciles the ledger with a provider's bill.
-- Each usage row says which provider key its backend used
-- (llm_gateway_backend provider_key=), the upstream's id for the response
-- and the model the upstream said made it (an alias or a role's name is
-- what the client called: llm.usage.model; the provider bills the dated
-- model it ran).  llm.provider_usage() gives the gateway's figures per
-- backend, provider key, UTC day and upstream model, to set beside the
-- provider's usage report, with the estimated rows apart: their tokens are
-- the gateway's count, the only part that may drift from the provider's.
--
-- Applied once, in a single transaction, by a superuser:
--     psql -v ON_ERROR_STOP=1 -1 -f sql/016_reconciliation.sql

SET LOCAL ROLE llmgw_owner;


-- --- the columns -------------------------------------------------------------

-- NULL on the rows before, on those no backend served and where the
-- upstream said nothing (or something that is no clean name: the gateway
-- keeps only letters, digits and -_.:/@+, at most 64 bytes)
-- The checks bind new rows (NOT VALID): the rows there are have NULL, and
-- proving it would scan the whole ledger under this statement's lock.
ALTER TABLE llm.usage
    ADD COLUMN provider_key   text,
    ADD COLUMN response_id    text,
    ADD COLUMN upstream_model text,
    ADD CONSTRAINT usage_provider_key_valid
        CHECK (octet_length(provider_key) BETWEEN 1 AND 64) NOT VALID,
    ADD CONSTRAINT usage_response_id_valid
        CHECK (octet_length(response_id) BETWEEN 1 AND 64) NOT VALID,
    ADD CONSTRAINT usage_upstream_model_valid
        CHECK (octet_length(upstream_model) BETWEEN 1 AND 64) NOT VALID;

ALTER TABLE llm.usage_rejected
    ADD COLUMN provider_key   text,
    ADD COLUMN response_id    text,
    ADD COLUMN upstream_model text;

COMMENT ON COLUMN llm.usage.provider_key IS
    'The name of the provider key the serving backend uses, as the '
    'provider''s usage report names it (llm_gateway_backend provider_key=); '
    'NULL when the backend names none or no backend served.';
COMMENT ON COLUMN llm.usage.response_id IS
    'The upstream''s id for the response ("id": chatcmpl-..., msg_..., '
    'resp_...); NULL when it gave none (embeddings, a failure, a cut stream).';
COMMENT ON COLUMN llm.usage.upstream_model IS
    'The model the upstream said made the response (its "model"), which '
    'the provider bills; llm.usage.model is the name the client called.';
COMMENT ON COLUMN llm.usage_rejected.provider_key IS 'As llm.usage''s.';
COMMENT ON COLUMN llm.usage_rejected.response_id IS 'As llm.usage''s.';
COMMENT ON COLUMN llm.usage_rejected.upstream_model IS 'As llm.usage''s.';


-- --- accountd's batch ----------------------------------------------------------

/*
 * sql/014's batch with the three columns: the records come as 20 arrays.
 * A replay is told by its figures, as before: what the upstream said is
 * not a figure, and is kept as first written.
 */

CREATE FUNCTION llm.ingest_batch(request_ids text[],
                                            tenant_ids bigint[],
                                            key_ids bigint[], models text[],
                                            apis text[],
                                            input_tokens bigint[],
                                            output_tokens bigint[],
                                            cached_input_tokens bigint[],
                                            cache_write_tokens bigint[],
                                            reasoning_tokens bigint[],
                                            reserved_tokens bigint[],
                                            finish_reasons text[],
                                            statuses int[], flags int[],
                                            ts_ms bigint[],
                                            upstream_apis text[],
                                            backends text[],
                                            provider_keys text[],
                                            response_ids text[],
                                            upstream_models text[])
    RETURNS SETOF text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- this statement costs its rows; none of them is moved
    PERFORM set_config('llmgw.cost_computed', 'on', true),
            set_config('llmgw.moving_rows', 'off', true);

    RETURN QUERY
    WITH r AS MATERIALIZED (
        SELECT a.*,
               timestamptz 'epoch' + a.ts_ms * interval '1 millisecond' AS ts
          FROM (SELECT unnest(request_ids) AS request_id,
                       unnest(tenant_ids) AS tenant_id,
                       unnest(key_ids) AS key_id,
                       unnest(models) AS model, unnest(apis) AS api,
                       unnest(input_tokens) AS input_tokens,
                       unnest(output_tokens) AS output_tokens,
                       unnest(cached_input_tokens) AS cached_input_tokens,
                       unnest(cache_write_tokens) AS cache_write_tokens,
                       unnest(reasoning_tokens) AS reasoning_tokens,
                       unnest(reserved_tokens) AS reserved_tokens,
                       unnest(finish_reasons) AS finish_reason,
                       unnest(statuses) AS status, unnest(flags) AS flags,
                       unnest(ts_ms) AS ts_ms,
                       unnest(upstream_apis) AS upstream_api,
                       unnest(backends) AS backend,
                       unnest(provider_keys) AS provider_key,
                       unnest(response_ids) AS response_id,
                       unnest(upstream_models) AS upstream_model) a
    ), e AS MATERIALIZED (
        SELECT u.request_id, u.tenant_id, u.key_id, u.model, u.api,
               u.input_tokens, u.output_tokens, u.cached_input_tokens,
               u.cache_write_tokens, u.reasoning_tokens, u.reserved_tokens,
               u.finish_reason, u.status, u.flags, u.ts, u.upstream_api,
               u.backend
          FROM llm.usage_of_requests(request_ids) u
    ), pm AS MATERIALIZED (
        SELECT m.model, lo.*::llm.prices AS price,
               (lo.model, lo.effective_from)
               IS NOT DISTINCT FROM (hi.model, hi.effective_from) AS same
          FROM (SELECT r.model, min(r.ts) AS lo_ts, max(r.ts) AS hi_ts
                  FROM r GROUP BY r.model) m
          LEFT JOIN LATERAL llm.price_at(m.model, m.lo_ts) lo ON true
          LEFT JOIN LATERAL llm.price_at(m.model, m.hi_ts) hi ON true
    ), ins AS (
        INSERT INTO llm.usage (request_id, tenant_id, key_id, model, api,
                               input_tokens, output_tokens,
                               cached_input_tokens, cache_write_tokens,
                               reasoning_tokens, reserved_tokens,
                               finish_reason, status, flags, ts,
                               upstream_api, backend, provider_key,
                               response_id, upstream_model, price_id,
                               cost_pusd)
        SELECT c.request_id, c.tenant_id, c.key_id, c.model, c.api,
               c.input_tokens, c.output_tokens, c.cached_input_tokens,
               c.cache_write_tokens, c.reasoning_tokens, c.reserved_tokens,
               c.finish_reason, c.status, c.flags, c.ts, c.upstream_api,
               c.backend, c.provider_key, c.response_id, c.upstream_model,
               (c.price).price_id,
               CASE WHEN c.c <= 9223372036854775807 THEN c.c::bigint END
          FROM (SELECT q.*,
                       llm.cost_numeric(q.price, q.input_tokens,
                                        q.cached_input_tokens,
                                        q.cache_write_tokens,
                                        q.output_tokens) AS c
                  FROM (SELECT r.*,
                               CASE WHEN pm.same THEN pm.price
                               ELSE (SELECT x.*::llm.prices
                                       FROM llm.price_at(r.model, r.ts) x)
                               END AS price
                          FROM r LEFT JOIN pm ON pm.model = r.model
                         WHERE NOT EXISTS (SELECT FROM e
                                            WHERE e.request_id = r.request_id)
                        OFFSET 0) q
                OFFSET 0) c
    ), rej AS (
        INSERT INTO llm.usage_rejected (request_id, tenant_id, key_id, model,
                                        api, input_tokens, output_tokens,
                                        cached_input_tokens,
                                        cache_write_tokens, reasoning_tokens,
                                        reserved_tokens, finish_reason,
                                        status, flags, ts_ms, upstream_api,
                                        backend, provider_key, response_id,
                                        upstream_model, error)
        SELECT r.request_id, r.tenant_id, r.key_id, r.model, r.api,
               r.input_tokens, r.output_tokens, r.cached_input_tokens,
               r.cache_write_tokens, r.reasoning_tokens, r.reserved_tokens,
               r.finish_reason, r.status, r.flags, r.ts_ms, r.upstream_api,
               r.backend, r.provider_key, r.response_id, r.upstream_model,
               'llm.usage has this request_id already, with other figures'
          FROM r JOIN e u ON u.request_id = r.request_id
         WHERE (u.tenant_id, u.key_id, u.model, u.api, u.input_tokens,
                u.output_tokens, u.cached_input_tokens, u.cache_write_tokens,
                u.reasoning_tokens, u.reserved_tokens, u.finish_reason,
                u.status, u.flags, u.ts, u.upstream_api, u.backend)
               IS DISTINCT FROM
               (r.tenant_id, r.key_id, r.model, r.api, r.input_tokens,
                r.output_tokens, r.cached_input_tokens, r.cache_write_tokens,
                r.reasoning_tokens, r.reserved_tokens, r.finish_reason,
                r.status, r.flags, r.ts, r.upstream_api, r.backend)
        ON CONFLICT (request_id) DO NOTHING
        RETURNING request_id
    )
    SELECT rej.request_id FROM rej;

    PERFORM set_config('llmgw.cost_computed', 'off', true);
END
$$;

COMMENT ON FUNCTION llm.ingest_batch(text[], bigint[], bigint[], text[],
                                     text[], bigint[], bigint[], bigint[],
                                     bigint[], bigint[], bigint[], text[],
                                     int[], int[], bigint[], text[], text[],
                                     text[], text[], text[]) IS
    'Writes a batch of settle records (a column an array) into llm.usage, '
    'costed here with the price id it keeps; a replay with the same figures '
    'is ignored, one with others goes to llm.usage_rejected and its '
    'request_id is returned.  accountd''s only way into llm.usage.';

REVOKE EXECUTE ON FUNCTION llm.ingest_batch(text[], bigint[], bigint[],
                                            text[], text[], bigint[],
                                            bigint[], bigint[], bigint[],
                                            bigint[], bigint[], text[],
                                            int[], int[], bigint[], text[],
                                            text[], text[], text[], text[])
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm.ingest_batch(text[], bigint[], bigint[], text[],
                                           text[], bigint[], bigint[],
                                           bigint[], bigint[], bigint[],
                                           bigint[], text[], int[], int[],
                                           bigint[], text[], text[], text[],
                                           text[], text[])
    TO llmgw_writer;

-- an accountd from before the upgrade sends 17 arrays until it restarts
CREATE OR REPLACE FUNCTION llm.ingest_batch(request_ids text[],
                                            tenant_ids bigint[],
                                            key_ids bigint[], models text[],
                                            apis text[],
                                            input_tokens bigint[],
                                            output_tokens bigint[],
                                            cached_input_tokens bigint[],
                                            cache_write_tokens bigint[],
                                            reasoning_tokens bigint[],
                                            reserved_tokens bigint[],
                                            finish_reasons text[],
                                            statuses int[], flags int[],
                                            ts_ms bigint[],
                                            upstream_apis text[],
                                            backends text[])
    RETURNS SETOF text
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT llm.ingest_batch(request_ids, tenant_ids, key_ids, models, apis,
                            input_tokens, output_tokens, cached_input_tokens,
                            cache_write_tokens, reasoning_tokens,
                            reserved_tokens, finish_reasons, statuses, flags,
                            ts_ms, upstream_apis, backends, NULL::text[],
                            NULL::text[], NULL::text[])
$$;


-- --- the provider's view -------------------------------------------------------

/*
 * The gateway's figures for [from_day, to_day), UTC days as the providers'
 * reports have them, per backend, provider key, day and the model the
 * upstream named (the client's where it named none).  The rows whose
 * tokens are the provider's (exact) and those the gateway counted itself
 * (estimated: the stream ended without its usage) are apart: the
 * provider's figure minus exact_* is what the estimates stand for, and
 * their difference to estimated_* is the drift.  It reads only the
 * partitions of the range.  The operators' (llmgw_admin): the backends and
 * keys are theirs, not a tenant's.
 */

CREATE FUNCTION llm.provider_usage(from_day date, to_day date)
    RETURNS TABLE (backend text, provider_key text, day date, model text,
                   requests bigint, input_tokens numeric,
                   cached_input_tokens numeric, cache_write_tokens numeric,
                   output_tokens numeric, reasoning_tokens numeric,
                   exact_requests bigint, exact_input_tokens numeric,
                   exact_output_tokens numeric,
                   estimated_requests bigint, estimated_input_tokens numeric,
                   estimated_output_tokens numeric, partial_requests bigint,
                   anomalous_requests bigint, without_id bigint,
                   cost_usd numeric)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT u.backend, u.provider_key,
           (u.ts AT TIME ZONE 'UTC')::date AS day,
           coalesce(u.upstream_model, u.model) AS model,
           count(*),
           sum(u.input_tokens), sum(u.cached_input_tokens),
           sum(u.cache_write_tokens), sum(u.output_tokens),
           sum(u.reasoning_tokens),
           count(*) FILTER (WHERE u.flags & 1 = 0),
           coalesce(sum(u.input_tokens) FILTER (WHERE u.flags & 1 = 0), 0),
           coalesce(sum(u.output_tokens) FILTER (WHERE u.flags & 1 = 0), 0),
           count(*) FILTER (WHERE u.flags & 1 <> 0),
           coalesce(sum(u.input_tokens) FILTER (WHERE u.flags & 1 <> 0), 0),
           coalesce(sum(u.output_tokens) FILTER (WHERE u.flags & 1 <> 0), 0),
           count(*) FILTER (WHERE u.flags & 2 <> 0),
           count(*) FILTER (WHERE u.flags & 28 <> 0),
           count(*) FILTER (WHERE u.response_id IS NULL),
           sum(u.cost_pusd) / 1e12
      FROM llm.usage u
     WHERE u.ts >= from_day::timestamp AT TIME ZONE 'UTC'
       AND u.ts < to_day::timestamp AT TIME ZONE 'UTC'
       AND u.backend IS NOT NULL
     GROUP BY 1, 2, 3, 4
$$;

COMMENT ON FUNCTION llm.provider_usage(date, date) IS
    'The gateway''s figures per backend, provider key, UTC day and upstream '
    'model for [from_day, to_day), to set beside the provider''s usage '
    'report: exact (the provider''s figures) and estimated (the gateway''s '
    'count) apart, the drift being in the latter.';

REVOKE EXECUTE ON FUNCTION llm.provider_usage(date, date) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm.provider_usage(date, date) TO llmgw_admin;
