-- ngx_llm_gateway: the batch's plans stay index look-ups however the
-- ledger grows.  PL/pgSQL keeps a statement's generic plan for the life
-- of the connection, made from the sizes its tables had when it was made:
-- on a new ledger (or a new month's partition, or a stack's first
-- minutes) llm.usage_request_ids is empty, a sequential scan filtered by
-- request_id = ANY (request_ids) is the cheapest plan, and accountd then
-- runs it on every batch: a scan of every request_id so far, each compared
-- with every request_id of the batch.  Measured: a batch of 1,000 records
-- took 1.2 s once the ledger held 100,000 rows, where the index takes a few
-- milliseconds.  The replays' rows (by the tenant and ts of the covering
-- index), the tenants, keys and prices a batch checks and the invoices
-- that say a period is closed had plans of the same kind.
--
-- The functions of the write path plan without sequential scans: a
-- relation with an index is read through it, whatever its size; where a
-- relation has none (a batch's own rows, transition tables), nothing
-- changes.  Costs and results are the same at any size.  And what was
-- planned again at every call is planned once a connection: the batch's
-- statement, the tenants' check, llm.moving_rows().
--
-- Applied once, in a single transaction, by a superuser:
--     psql -v ON_ERROR_STOP=1 -1 -f sql/019_stable_plans.sql

SET LOCAL ROLE llmgw_owner;

/*
 * 018's batch, the same results, with plans that hold at any size of the
 * ledger and of the batch.  Planned once a connection (left to choose,
 * PostgreSQL planned the statement again at every call: 2.1 ms a call of
 * one record, 0.8 ms with the plan kept), so with a generic plan's
 * estimates: ten records a batch, whatever it holds.  No step may then
 * depend on a join between the batch's own lists: 018's replays (its CTE
 * f) were joined with the records and their rows, which that plan made
 * nested loops, a batch of 4,000 replays (the journal sent again after a
 * reconnection) taking 3.2 s.  Each record now looks its request_id up by
 * itself (s) and each replay its row; the new records are those not
 * found.
 */

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
                                            backends text[],
                                            provider_keys text[],
                                            response_ids text[],
                                            upstream_models text[])
    RETURNS SETOF text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    -- the lock the insert takes, before the look-up of the replays reads
    -- the table: a partition created meanwhile (AccessExclusive) waits
    -- for the batch, instead of both waiting for each other
    LOCK TABLE llm.usage IN ROW EXCLUSIVE MODE;

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
    ), s AS MATERIALIZED (
        -- each record's probe of the request_ids so far: its ts if there
        -- (a replay), a look-up a record whatever the plan's estimates
        SELECT r.*,
               (SELECT i.ts FROM llm.usage_request_ids i
                 WHERE i.request_id = r.request_id) AS seen_ts
          FROM r
    ), pm AS MATERIALIZED (
        SELECT m.model, lo.price_id, lo.input_per_mtok, lo.output_per_mtok,
               lo.cached_input_per_mtok, lo.cache_write_per_mtok,
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
        SELECT q.request_id, q.tenant_id, q.key_id, q.model, q.api,
               q.input_tokens, q.output_tokens, q.cached_input_tokens,
               q.cache_write_tokens, q.reasoning_tokens, q.reserved_tokens,
               q.finish_reason, q.status, q.flags, q.ts, q.upstream_api,
               q.backend, q.provider_key, q.response_id, q.upstream_model,
               q.price_id,
               -- in bigint where it cannot overflow (tokens up to 2e8
               -- at prices up to 1e10), else in numeric, as cost_numeric
               CASE WHEN q.price_id IS NULL THEN NULL
                    WHEN least(q.i, q.k, q.w, q.o) >= 0
                         AND greatest(q.i, q.k, q.w, q.o) <= 200000000 THEN
                        greatest(q.i - q.k - q.w, 0) * q.ip + q.k * q.kp
                        + q.w * q.wp + q.o * q.op
                    ELSE (SELECT CASE WHEN c <= 9223372036854775807
                                      THEN c::bigint END
                            FROM (SELECT greatest(q.i::numeric - q.k - q.w, 0)
                                         * q.ip + q.k::numeric * q.kp
                                         + q.w::numeric * q.wp
                                         + q.o::numeric * q.op AS c) n)
               END
          FROM (SELECT q0.*,
                       CASE WHEN q0.same THEN q0.pm_ip
                            ELSE (SELECT p.input_per_mtok FROM llm.prices p
                                   WHERE p.price_id = q0.price_id) END AS ip,
                       CASE WHEN q0.same THEN q0.pm_kp
                            ELSE (SELECT p.cached_input_per_mtok
                                    FROM llm.prices p
                                   WHERE p.price_id = q0.price_id) END AS kp,
                       CASE WHEN q0.same THEN q0.pm_wp
                            ELSE (SELECT p.cache_write_per_mtok
                                    FROM llm.prices p
                                   WHERE p.price_id = q0.price_id) END AS wp,
                       CASE WHEN q0.same THEN q0.pm_op
                            ELSE (SELECT p.output_per_mtok FROM llm.prices p
                                   WHERE p.price_id = q0.price_id) END AS op
          FROM (SELECT r.*,
                       coalesce(r.input_tokens, 0) AS i,
                       coalesce(r.cached_input_tokens, 0) AS k,
                       coalesce(r.cache_write_tokens, 0) AS w,
                       coalesce(r.output_tokens, 0) AS o,
                       CASE WHEN pm.same THEN pm.price_id
                            ELSE (SELECT x.price_id
                                    FROM llm.price_at(r.model, r.ts) x)
                       END AS price_id,
                       pm.same, pm.input_per_mtok AS pm_ip,
                       pm.cached_input_per_mtok AS pm_kp,
                       pm.cache_write_per_mtok AS pm_wp,
                       pm.output_per_mtok AS pm_op
                  FROM s r JOIN pm ON pm.model = r.model
                 WHERE r.seen_ts IS NULL
                OFFSET 0) q0
                OFFSET 0) q
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
          FROM s r
          -- the replay's row, if of the same tenant and ts (else they
          -- differ): a look-up a replay, the subquery kept whole
          LEFT JOIN LATERAL (SELECT * FROM llm.usage x
                              WHERE x.tenant_id = r.tenant_id
                                AND x.ts = r.seen_ts
                                AND x.request_id = r.request_id
                             OFFSET 0) u ON true
         WHERE r.seen_ts IS NOT NULL
           AND (u.tenant_id, u.key_id, u.model, u.api, u.input_tokens,
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

-- the statement triggers of an insert into llm.usage; the tenants' look-up
-- by an array was planned again at every call too
ALTER FUNCTION llm.usage_tenants_check() SET enable_seqscan = off;
ALTER FUNCTION llm.usage_tenants_check()
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION llm.usage_late_check() SET enable_seqscan = off;

-- the triggers ask it once a statement: as SQL, it was planned again at
-- every call (PostgreSQL keeps no plan of a SQL function that it cannot
-- inline, and a SET clause forbids that); the setting first, as a simple
-- expression, the catalog only while a move is on
CREATE OR REPLACE FUNCTION llm.moving_rows() RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('llmgw.moving_rows', true) IS DISTINCT FROM 'on' THEN
        RETURN false;
    END IF;

    RETURN EXISTS (SELECT FROM pg_class c
                    WHERE c.oid = to_regclass('pg_temp.llmgw_usage_moving')
                      AND c.relowner = 'llmgw_owner'::regrole);
END
$$;
