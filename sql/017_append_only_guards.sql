-- ngx_llm_gateway: the append-only rules made tighter.  The exceptions
-- the owner's own functions make (the move of a partition's rows, a batch
-- that costs its rows itself) were told by settings any session may set:
-- the move is now told by the temporary table it fills, which only the
-- owner can own, and the batch's costs count only for the owner, so that
-- a privilege granted by mistake to another role unlocks nothing.  Every
-- partition of llm.usage refuses TRUNCATE as the table does (a statement
-- trigger on a partitioned table does not fire for its partitions), and so
-- does llm.usage_request_ids, which is append-only too.  llm.adjust() may
-- say which adjustment it corrects (refers_to).  No function of the
-- owner's is anyone's to run unless granted: 013's default was per
-- schema, which cannot take back PostgreSQL's own EXECUTE for PUBLIC.
--
-- Applied once, in a single transaction, by a superuser:
--     psql -v ON_ERROR_STOP=1 -1 -f sql/017_append_only_guards.sql

SET LOCAL ROLE llmgw_owner;

ALTER DEFAULT PRIVILEGES FOR ROLE llmgw_owner
    REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;


-- --- the owner's exceptions ------------------------------------------------------

/*
 * Whether this transaction is llm.create_usage_partition() moving rows:
 * its setting, and its temporary table, created by the owner's function
 * and so the owner's.  Any session may set the setting or make a table of
 * that name, none but the owner one that is the owner's; a trigger of the
 * owner's (a definer, whose current_user is always the owner) can tell
 * the move by it.
 */

CREATE FUNCTION llm.moving_rows() RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT current_setting('llmgw.moving_rows', true) = 'on'
       AND EXISTS (SELECT FROM pg_class c
                    WHERE c.oid = to_regclass('pg_temp.llmgw_usage_moving')
                      AND c.relowner = 'llmgw_owner'::regrole)
$$;

COMMENT ON FUNCTION llm.moving_rows() IS
    'Whether llm.create_usage_partition() is moving rows in this '
    'transaction (its setting and its temporary table, the owner''s).';

CREATE OR REPLACE FUNCTION llm.append_only() RETURNS trigger
    LANGUAGE plpgsql
AS $$
BEGIN
    -- the owner's move of rows between partitions (create_usage_partition)
    IF TG_TABLE_NAME LIKE 'usage%' AND TG_TABLE_NAME <> 'usage_request_ids'
       AND current_user = 'llmgw_owner' AND llm.moving_rows()
    THEN
        RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
    END IF;

    RAISE EXCEPTION '%.% is append-only: % refused', TG_TABLE_SCHEMA,
                    TG_TABLE_NAME, TG_OP
          USING ERRCODE = 'insufficient_privilege',
                HINT = 'A correction is a row of llm.adjustments '
                       '(llm.adjust, llm.reprice_usage).';
END
$$;

-- the moved rows are no new requests and no late ones: told by the
-- move's table, not by the setting alone
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

    -- rows moved between partitions are no new requests
    IF TG_OP = 'INSERT' AND NOT llm.moving_rows() THEN
        INSERT INTO llm.usage_request_ids (request_id, ts)
        SELECT n.request_id, n.ts FROM new_rows n;
    END IF;

    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION llm.usage_late_check() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF llm.moving_rows() THEN
        RETURN NULL;
    END IF;

    INSERT INTO llm.adjustments (tenant_id, period_start, kind, model,
                                 request_id, ts, price_id, amount_pusd,
                                 reason)
    SELECT n.tenant_id, c.next_period, 'late_usage', n.model, n.request_id,
           n.ts, n.price_id, coalesce(n.cost_pusd, 0),
           'usage received ' || to_char(n.received_at AT TIME ZONE 'UTC',
                                        'YYYY-MM-DD"T"HH24:MI:SS"Z"')
           || ' for a closed period'
      FROM new_rows n
      JOIN (SELECT i.tenant_id, max(i.ends_at) AS closed_until,
                   (max(i.period_start) + interval '1 month')::date
                   AS next_period
              FROM llm.invoices i
             WHERE i.tenant_id IN (SELECT DISTINCT tenant_id FROM new_rows)
             GROUP BY i.tenant_id) c ON c.tenant_id = n.tenant_id
     WHERE n.ts < c.closed_until;

    RETURN NULL;
END
$$;


-- a row's cost is the database's unless the owner's batch computed it
DROP TRIGGER usage_cost_insert ON llm.usage;

CREATE TRIGGER usage_cost_insert
    BEFORE INSERT ON llm.usage
    FOR EACH ROW
    WHEN (current_setting('llmgw.cost_computed', true) IS DISTINCT FROM 'on'
          OR current_user <> 'llmgw_owner')
    EXECUTE FUNCTION llm.usage_set_cost();


-- --- TRUNCATE, partition by partition ---------------------------------------------

CREATE FUNCTION llm.usage_partition_guard(part regclass) RETURNS void
    LANGUAGE plpgsql
AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_trigger
                    WHERE tgrelid = part
                      AND tgname = 'usage_append_only_truncate')
    THEN
        EXECUTE format('CREATE TRIGGER usage_append_only_truncate'
                       ' BEFORE TRUNCATE ON %s'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION'
                       ' llm.append_only()', part);
    END IF;
END
$$;

COMMENT ON FUNCTION llm.usage_partition_guard(regclass) IS
    'Gives a partition of llm.usage the TRUNCATE trigger of the table.';

SELECT llm.usage_partition_guard(i.inhrelid::regclass)
  FROM pg_inherits i
 WHERE i.inhparent = 'llm.usage'::regclass;

CREATE OR REPLACE FUNCTION llm.create_usage_partition(month date)
    RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m     date := date_trunc('month', month)::date;
    part  text := 'usage_' || to_char(m, 'YYYY_MM');
    lo    text := to_char(m, 'YYYY-MM-DD') || ' 00:00:00+00';
    hi    text := to_char(m + interval '1 month', 'YYYY-MM-DD')
                  || ' 00:00:00+00';
    cols  text;
    moved boolean;
BEGIN
    IF to_regclass(format('llm.%I', part)) IS NOT NULL THEN
        RETURN NULL;
    END IF;

    LOCK TABLE llm.usage IN SHARE ROW EXCLUSIVE MODE;

    EXECUTE format('SELECT EXISTS (SELECT FROM llm.usage_default'
                   ' WHERE ts >= %L AND ts < %L)', lo, hi) INTO moved;

    IF moved THEN
        PERFORM set_config('llmgw.moving_rows', 'on', true),
                set_config('llmgw.cost_computed', 'on', true);
        cols := llm.usage_columns();
        EXECUTE format('CREATE TEMP TABLE llmgw_usage_moving ON COMMIT DROP AS'
                       ' SELECT %s FROM llm.usage_default'
                       ' WHERE ts >= %L AND ts < %L', cols, lo, hi);
        EXECUTE format('DELETE FROM llm.usage_default'
                       ' WHERE ts >= %L AND ts < %L', lo, hi);
    END IF;

    EXECUTE format('CREATE TABLE llm.%I PARTITION OF llm.usage'
                   ' FOR VALUES FROM (%L) TO (%L)', part, lo, hi);
    PERFORM llm.usage_partition_guard(('llm.' || quote_ident(part))::regclass);

    IF moved THEN
        EXECUTE format('INSERT INTO llm.usage (%s) SELECT %s'
                       ' FROM pg_temp.llmgw_usage_moving', cols, cols);
        DROP TABLE pg_temp.llmgw_usage_moving;
        PERFORM set_config('llmgw.moving_rows', 'off', true),
                set_config('llmgw.cost_computed', 'off', true);
    END IF;

    RETURN 'llm.' || part;
END
$$;



CREATE TRIGGER usage_request_ids_append_only
    BEFORE UPDATE OR DELETE ON llm.usage_request_ids
    FOR EACH ROW EXECUTE FUNCTION llm.append_only();
CREATE TRIGGER usage_request_ids_append_only_truncate
    BEFORE TRUNCATE ON llm.usage_request_ids
    FOR EACH STATEMENT EXECUTE FUNCTION llm.append_only();


-- --- a correction that says what it corrects ----------------------------------------

DROP FUNCTION llm.adjust(text, text, text, text, timestamptz);

CREATE FUNCTION llm.adjust(p_tenant text, p_amount_usd text, p_reason text,
                           p_request_id text DEFAULT NULL,
                           p_at timestamptz DEFAULT now(),
                           p_refers_to bigint DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tid    bigint;
    neg    boolean := p_amount_usd LIKE '-%';
    amt    bigint;
    r_ts   timestamptz;
    model  text;
    ref_model text;
    id     bigint;
BEGIN
    SELECT t.tenant_id INTO tid FROM llm.tenants t WHERE t.name = p_tenant;

    IF NOT FOUND THEN
        RAISE EXCEPTION 'no tenant "%"', p_tenant
              USING ERRCODE = 'no_data_found';
    END IF;

    amt := llm.usd_to_pusd(ltrim(p_amount_usd, '-'));
    amt := CASE WHEN neg THEN -amt ELSE amt END;

    IF p_request_id IS NOT NULL THEN
        SELECT x.ts, x.model INTO r_ts, model FROM llm.usage_request_ids r
          JOIN llm.usage x ON x.request_id = r.request_id AND x.ts = r.ts
         WHERE r.request_id = p_request_id AND x.tenant_id = tid;

        IF NOT FOUND THEN
            RAISE EXCEPTION 'tenant "%" has no request "%"', p_tenant,
                            p_request_id
                  USING ERRCODE = 'no_data_found';
        END IF;
    END IF;

    -- a correction of a correction: the tenant's own, and of its model
    IF p_refers_to IS NOT NULL THEN
        SELECT a.model INTO ref_model FROM llm.adjustments a
         WHERE a.adjustment_id = p_refers_to AND a.tenant_id = tid;

        IF NOT FOUND THEN
            RAISE EXCEPTION 'tenant "%" has no adjustment %', p_tenant,
                            p_refers_to
                  USING ERRCODE = 'no_data_found';
        END IF;

        model := coalesce(model, ref_model);
    END IF;

    LOCK TABLE llm.invoices IN SHARE ROW EXCLUSIVE MODE;

    INSERT INTO llm.adjustments (tenant_id, period_start, kind, model,
                                 request_id, ts, refers_to, amount_pusd,
                                 reason)
    VALUES (tid, llm.billing_period(tid, coalesce(r_ts, p_at)),
            CASE WHEN amt < 0 THEN 'credit' ELSE 'charge' END, model,
            p_request_id, r_ts, p_refers_to, amt, p_reason)
    RETURNING adjustment_id INTO id;

    RETURN id;
END
$$;

COMMENT ON FUNCTION llm.adjust(text, text, text, text, timestamptz, bigint)
    IS
    'A credit (amount negative, in dollars: ''-12.50'') or a charge for a '
    'tenant, with its reason, of one request or none, correcting another '
    'adjustment of the tenant''s or none (p_refers_to); on the period of '
    'the request (or of p_at), or the first open one.  Returns its id.';

GRANT EXECUTE ON FUNCTION
    llm.adjust(text, text, text, text, timestamptz, bigint)
    TO llmgw_admin;


-- --- privileges -------------------------------------------------------------------

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA llm FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm.moving_rows(),
                          llm.models_valid(text[]), llm.time_zone_valid(text),
                          llm.usd_to_pusd(text),
                          llm.budget_start(text, text, timestamptz),
                          llm.price_at(text, timestamptz),
                          llm.cost_numeric(llm.prices, bigint, bigint, bigint,
                                           bigint),
                          llm.usage_cost(text, timestamptz, bigint, bigint,
                                         bigint, bigint),
                          llm.cost_at(bigint, bigint, bigint, bigint, bigint),
                          llm.reporting_tenant(),
                          llm.closed_until(bigint), llm.open_period(bigint),
                          llm.period_starts_at(bigint, date),
                          llm.period_ends_at(bigint, date),
                          llm.billing_period(bigint, timestamptz),
                          llm.period_lines(bigint, date),
                          llm.revenue_by_model_day(date),
                          llm.csv_field(text), llm.invoice_csv(text)
    TO PUBLIC;
