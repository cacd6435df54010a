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
-- changes.  Costs and results are the same at any size.
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
