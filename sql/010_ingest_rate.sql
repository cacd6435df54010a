-- ngx_llm_gateway: the ledger's write path, cheaper per row.
--
-- accountd's batch statement (accountd/ingest.c) works on a batch as a set:
-- the price once per model of the batch, the request_id look-up as one
-- index scan per partition.  What it still paid for, row by row or for
-- nothing, here:
--
--   the foreign key to llm.tenants: a query through SPI for every row
--   inserted, 6 to 10 µs of PostgreSQL's CPU a row, a quarter of it.  The
--   same rule is kept by triggers: a statement that writes llm.usage
--   checks (and locks, as the foreign key does) the distinct tenants of
--   all its rows at once; deleting a tenant, changing its id or
--   truncating llm.tenants is refused while llm.usage has rows of it.  The
--   errors are the foreign key's (SQLSTATE 23503, same constraint name).
--
--   the cost trigger, for a row whose model has no price: accountd
--   inserts such a row with cost_pusd NULL, which made the trigger look
--   the price up again, in PL/pgSQL, to find none (more than half of
--   PostgreSQL's time a row when nothing was priced).  A session that
--   computes the cost of what it inserts, NULL included, says so with
--   llmgw.cost_computed = on (accountd does); in any other, a row
--   inserted without a cost gets it from the trigger, as before.
--
--   the look-up of a batch's request_ids in llm.usage went through every
--   partition, empty ones too, with a plan that could go stale: see
--   llm.usage_of_requests().
--
-- Applied once, in a single transaction, by
--     psql -v ON_ERROR_STOP=1 -1 -f sql/010_ingest_rate.sql


-- --- llm.usage.tenant_id references llm.tenants -----------------------------

ALTER TABLE llm.usage DROP CONSTRAINT usage_tenant_id_fkey;


-- Every tenant of the statement's rows, locked FOR KEY SHARE as the
-- foreign key's check does, so that none can go until this commits; one
-- that is not there (or went before the lock) is an error.  The distinct
-- tenants first: locking rows of a join would copy every row of the
-- statement whole, for a recheck.  As the owner: the foreign key too
-- looks past the writer's privileges and row-level security.

CREATE FUNCTION llm.usage_tenants_check() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ids      bigint[];
    locked   bigint[];
    missing  bigint;
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

    RETURN NULL;
END
$$;

COMMENT ON FUNCTION llm.usage_tenants_check() IS
    'llm.usage.tenant_id references llm.tenants: checks the rows a '
    'statement wrote, all at once, and locks their tenants.';

CREATE TRIGGER usage_tenants_insert
    AFTER INSERT ON llm.usage
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION llm.usage_tenants_check();

-- a row moved to another partition by an UPDATE is in its new rows too
CREATE TRIGGER usage_tenants_update
    AFTER UPDATE ON llm.usage
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION llm.usage_tenants_check();


-- A tenant that llm.usage refers to stays.  The look-up sees every row
-- committed before it (the writers' lock makes a delete wait for them),
-- under READ COMMITTED; a transaction's older snapshot would not see rows
-- committed since, which the foreign key caught with a snapshot of its
-- own that a trigger cannot take: under REPEATABLE READ or SERIALIZABLE
-- the change is refused.

CREATE FUNCTION llm.tenants_usage_check() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    id  bigint;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        SELECT u.tenant_id INTO id FROM llm.usage u LIMIT 1;

    ELSIF EXISTS (SELECT FROM llm.usage u
                   WHERE u.tenant_id = OLD.tenant_id)
    THEN
        id := OLD.tenant_id;
    END IF;

    IF id IS NOT NULL THEN
        RAISE EXCEPTION 'update or delete on table "tenants" violates '
                        'foreign key constraint "usage_tenant_id_fkey" on '
                        'table "usage"'
              USING ERRCODE = 'foreign_key_violation',
                    DETAIL = format('Key (tenant_id)=(%s) is still '
                                    'referenced from table "usage".', id),
                    CONSTRAINT = 'usage_tenant_id_fkey',
                    SCHEMA = 'llm', TABLE = 'tenants';
    END IF;

    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'a tenant is deleted, or its id changed, under '
                        'READ COMMITTED only'
              USING ERRCODE = 'feature_not_supported',
                    HINT = 'llm.usage rows committed since this '
                           'transaction''s snapshot would not be seen.';
    END IF;

    RETURN NULL;
END
$$;

COMMENT ON FUNCTION llm.tenants_usage_check() IS
    'Refuses to delete, renumber or truncate away a tenant that llm.usage '
    'refers to (the other half of llm.usage_tenants_check).';

CREATE TRIGGER tenants_usage_delete
    AFTER DELETE ON llm.tenants
    FOR EACH ROW EXECUTE FUNCTION llm.tenants_usage_check();

CREATE TRIGGER tenants_usage_update
    AFTER UPDATE OF tenant_id ON llm.tenants
    FOR EACH ROW WHEN (OLD.tenant_id IS DISTINCT FROM NEW.tenant_id)
    EXECUTE FUNCTION llm.tenants_usage_check();

CREATE TRIGGER tenants_usage_truncate
    AFTER TRUNCATE ON llm.tenants
    FOR EACH STATEMENT EXECUTE FUNCTION llm.tenants_usage_check();

COMMENT ON COLUMN llm.usage.tenant_id IS
    'The tenant billed (llm.tenants.tenant_id: the triggers '
    'usage_tenants_* and tenants_usage_* keep it there).';


-- --- the cost of a row inserted without one ----------------------------------

DROP TRIGGER usage_cost_insert ON llm.usage;

CREATE TRIGGER usage_cost_insert
    BEFORE INSERT ON llm.usage
    FOR EACH ROW
    WHEN (NEW.cost_pusd IS NULL
          AND current_setting('llmgw.cost_computed', true)
              IS DISTINCT FROM 'on')
    EXECUTE FUNCTION llm.usage_set_cost();

COMMENT ON FUNCTION llm.usage_set_cost() IS
    'Sets llm.usage.cost_pusd from llm.prices (llm.usage_cost) when a row '
    'is inserted without one (unless the session computed it: '
    'llmgw.cost_computed = on), or its model, ts or tokens change.';


-- --- the rows of some request_ids -------------------------------------------

-- The rows llm.usage has for any of these request_ids, whatever their ts:
-- one scan of the primary key of each partition that has any row, for all
-- of them.  Through llm.usage, one plan went into every partition, those
-- that ensure_usage_partitions() made for the months ahead too, at two
-- page reads a request_id for each empty one (a fifth of PostgreSQL's CPU
-- a row); and a plan kept from when a partition was empty scanned it
-- sequentially after it filled, comparing each of its rows with every
-- request_id, until something made PostgreSQL plan again.  Here each
-- partition is planned when it is read, always through its index (the
-- request_ids hidden from the planner: estimating a thousand of them
-- costs more than reading them), and an empty one is not read: a row is
-- written to its relation before its transaction commits, so an empty
-- relation has none that any snapshot sees.  If the caller may not read
-- some partition directly (another role made it), all are read through
-- llm.usage, as before.  STABLE: it sees what the statement calling it
-- sees.

CREATE FUNCTION llm.usage_of_requests(request_ids text[])
    RETURNS TABLE (request_id text, tenant_id bigint, key_id bigint,
                   model text, api text, input_tokens bigint,
                   output_tokens bigint, cached_input_tokens bigint,
                   cache_write_tokens bigint, reasoning_tokens bigint,
                   reserved_tokens bigint, finish_reason text, status int,
                   flags int, ts timestamptz)
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
                   u.ts
              FROM llm.usage u
             WHERE u.request_id = ANY (request_ids);
        RETURN;
    END IF;

    FOREACH part IN ARRAY coalesce(parts, '{}') LOOP
        RETURN QUERY EXECUTE format(
            'SELECT request_id, tenant_id, key_id, model, api, input_tokens,'
            ' output_tokens, cached_input_tokens, cache_write_tokens,'
            ' reasoning_tokens, reserved_tokens, finish_reason, status,'
            ' flags, ts FROM %s WHERE request_id = ANY ((SELECT $1)::text[])',
            part)
            USING request_ids;
    END LOOP;
END
$$;

COMMENT ON FUNCTION llm.usage_of_requests(text[]) IS
    'The llm.usage rows of these request_ids, any ts: through the primary '
    'key of each partition that has rows (accountd''s look-up of a '
    'batch).';
