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

ALTER FUNCTION llm.ingest_batch(text[], bigint[], bigint[], text[], text[],
                                bigint[], bigint[], bigint[], bigint[],
                                bigint[], bigint[], text[], int[], int[],
                                bigint[], text[], text[], text[], text[],
                                text[])
    SET enable_seqscan = off;

-- and planned once a connection: left to choose, PostgreSQL planned the
-- batch's statement again at every call (its estimate for a generic plan
-- is of ten records a batch, a custom plan's of the batch's own), which
-- cost more than writing a small batch (1.9 ms a call of one record
-- against 0.75 ms); the generic plan is the custom one's equal at 1,000
ALTER FUNCTION llm.ingest_batch(text[], bigint[], bigint[], text[], text[],
                                bigint[], bigint[], bigint[], bigint[],
                                bigint[], bigint[], text[], int[], int[],
                                bigint[], text[], text[], text[], text[],
                                text[])
    SET plan_cache_mode = force_generic_plan;

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
