-- ngx_llm_gateway: a cheaper ledger write path, every guarantee kept.
-- What a settle record cost PostgreSQL was mostly checks made twice: the
-- batch looked its request_ids up in every partition (by the primary key
-- (request_id, ts), a text compared in a collation) although
-- llm.usage_request_ids holds each request_id once, in "C"; and the
-- foreign key on price_id ran a query a row although the batch takes
-- each price_id from llm.prices itself and prices are append-only.  Now:
--
--   - a batch's replays are found by one probe of llm.usage_request_ids a
--     record, their rows by the tenant and ts of the covering index;
--   - the primary key (request_id, ts) goes: llm.usage_request_ids keeps
--     a request_id once in the whole ledger, and a BRIN index on ts finds
--     a request's row from its ts (llm.usage_request_ids has it);
--   - the foreign key on price_id becomes a check a statement, of the
--     distinct price_ids only (usage_tenants_insert);
--   - a batch's costs are computed in bigint where no product can
--     overflow, in numeric where one might, with the same result.
--
-- Applied once, in a single transaction, by a superuser:
--     psql -v ON_ERROR_STOP=1 -1 -f sql/018_ingest_path.sql

SET LOCAL ROLE llmgw_owner;


-- --- the keys ------------------------------------------------------------------

ALTER TABLE llm.usage DROP CONSTRAINT usage_pkey;
ALTER TABLE llm.usage DROP CONSTRAINT usage_price_id_fkey;

-- a request's row from its ts: the ledger is written in ts order, so a
-- range of pages holds a narrow range of ts, and a BRIN index costs an
-- insert next to nothing
CREATE INDEX usage_ts_brin ON llm.usage USING brin (ts);

COMMENT ON COLUMN llm.usage.request_id IS
    'The gateway''s id of the request, once in the whole ledger '
    '(llm.usage_request_ids, which has its ts: a request''s row is '
    'found by both, through usage_ts_brin).';

-- the batch looked a request_id up in every partition with this
DROP FUNCTION llm.usage_of_requests(text[]);


-- --- the checks a statement -----------------------------------------------------

/*
 * 017's function, and what the foreign key on price_id checked: each
 * price_id is one of llm.prices (distinct ones looked up, not every row).
 */

CREATE OR REPLACE FUNCTION llm.usage_tenants_check() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ids      bigint[];
    locked   bigint[];
    missing  bigint;
    bad      record;
BEGIN
    ids := ARRAY(SELECT DISTINCT n.tenant_id FROM new_rows n);

    locked := ARRAY(SELECT t.tenant_id FROM llm.tenants t
                     WHERE t.tenant_id = ANY (ids)
                       FOR KEY SHARE OF t);

    IF cardinality(locked) < cardinality(ids) THEN
        SELECT min(i) INTO missing FROM unnest(ids) i
         WHERE i <> ALL (locked);

        RAISE EXCEPTION 'insert or update on table "usage" violates foreign '
                        'key constraint "usage_tenant_id_fkey"'
              USING ERRCODE = 'foreign_key_violation',
                    DETAIL = format('Key (tenant_id)=(%s) is not present in '
                                    'table "tenants".', missing),
                    CONSTRAINT = 'usage_tenant_id_fkey',
                    SCHEMA = 'llm', TABLE = 'usage';
    END IF;

    SELECT k.tenant_id, k.key_id INTO bad
      FROM (SELECT DISTINCT n.tenant_id, n.key_id FROM new_rows n
             WHERE n.key_id IS NOT NULL) k
     WHERE NOT EXISTS (SELECT FROM llm.api_keys a
                        WHERE a.key_id = k.key_id
                          AND a.tenant_id = k.tenant_id)
     LIMIT 1;

    IF FOUND THEN
        RAISE EXCEPTION 'insert or update on table "usage" violates foreign '
                        'key constraint "usage_key_tenant_fkey"'
              USING ERRCODE = 'foreign_key_violation',
                    DETAIL = format('Key (key_id, tenant_id)=(%s, %s) is not '
                                    'present in table "api_keys".',
                                    bad.key_id, bad.tenant_id),
                    CONSTRAINT = 'usage_key_tenant_fkey',
                    SCHEMA = 'llm', TABLE = 'usage';
    END IF;

    SELECT p.price_id INTO missing
      FROM (SELECT DISTINCT n.price_id FROM new_rows n
             WHERE n.price_id IS NOT NULL) p
     WHERE NOT EXISTS (SELECT FROM llm.prices x
                        WHERE x.price_id = p.price_id)
     LIMIT 1;

    IF FOUND THEN
        RAISE EXCEPTION 'insert or update on table "usage" violates foreign '
                        'key constraint "usage_price_id_fkey"'
              USING ERRCODE = 'foreign_key_violation',
                    DETAIL = format('Key (price_id)=(%s) is not present in '
                                    'table "prices".', missing),
                    CONSTRAINT = 'usage_price_id_fkey',
                    SCHEMA = 'llm', TABLE = 'usage';
    END IF;

    -- rows moved between partitions are no new requests
    IF TG_OP = 'INSERT' AND NOT llm.moving_rows() THEN
        INSERT INTO llm.usage_request_ids (request_id, ts)
        SELECT n.request_id, n.ts FROM new_rows n;
    END IF;

    RETURN NULL;
END
$$;


-- --- accountd's batch ----------------------------------------------------------

/*
 * sql/016's batch, its look-ups and costs made cheaper; the same results:
 * a replay with the same figures is ignored, one with others (or of
 * another tenant, or another ts) goes to llm.usage_rejected and its
 * request_id is returned.  Its signature and grants are 016's.
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
    ), f AS MATERIALIZED (
        -- the replays: one probe of the key of every request_id
        SELECT i.request_id, i.ts
          FROM llm.usage_request_ids i
         WHERE i.request_id = ANY (request_ids::text[])
    ), e AS MATERIALIZED (
        -- their rows, if of the same tenant and ts: else they differ
        SELECT u.request_id, u.tenant_id, u.key_id, u.model, u.api,
               u.input_tokens, u.output_tokens, u.cached_input_tokens,
               u.cache_write_tokens, u.reasoning_tokens, u.reserved_tokens,
               u.finish_reason, u.status, u.flags, u.ts, u.upstream_api,
               u.backend
          FROM f JOIN r ON r.request_id = f.request_id
          JOIN LATERAL (SELECT * FROM llm.usage x
                         WHERE x.tenant_id = r.tenant_id AND x.ts = f.ts
                           AND x.request_id = f.request_id) u ON true
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
                  FROM r JOIN pm ON pm.model = r.model
                 WHERE NOT EXISTS (SELECT FROM f
                                    WHERE f.request_id = r.request_id)
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
          FROM f JOIN r ON r.request_id = f.request_id
          LEFT JOIN e u ON u.request_id = f.request_id
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
