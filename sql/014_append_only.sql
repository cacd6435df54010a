-- ngx_llm_gateway: an append-only ledger.  A usage row, once written,
-- never changes; a correction is a new, signed row of llm.adjustments that
-- says what it corrects, why and who.  Prices are an insert-only history,
-- and each usage row keeps the id of the price it was costed with, so that
-- llm.cost_errors() can prove every stored cost.  And the constraints that
-- say what a row may be: its cost by the database alone, cached and
-- cache-write tokens within the input, reasoning within the output, its
-- key one of its tenant's, its ts near when it was received, and its
-- request_id once in the whole ledger, whatever the month.
--
-- Applied once, in a single transaction, by a superuser:
--     psql -v ON_ERROR_STOP=1 -1 -f sql/014_append_only.sql
-- It upgrades a ledger with rows: each gets the id of the price its cost
-- came from; a stored cost that no price explains (a price edited in
-- place, a row repriced by hand) is kept as billed, by an adjustment of
-- kind 'migration' for the difference, and a request_id billed twice (in
-- two months) is credited back, once, by one of kind 'duplicate'.


-- made as the owner (sql/013), so that everything here is its
SET LOCAL ROLE llmgw_owner;


-- --- prices: an insert-only history -------------------------------------------

ALTER TABLE llm.prices
    ADD COLUMN price_id bigint GENERATED ALWAYS AS IDENTITY,
    ADD CONSTRAINT prices_price_id_key UNIQUE (price_id);

COMMENT ON TABLE llm.prices IS
    'What a model costs from effective_from on, until the model''s next '
    'row: an insert-only history (a row is never changed nor deleted).  A '
    'usage row is costed, when it is inserted, with the row of its model '
    'effective at its ts, else that of model ''*'', and keeps its price_id.  '
    'A price entered late, effective in the past, changes no stored cost: '
    'llm.reprice_usage() then writes the difference as adjustments.';
COMMENT ON COLUMN llm.prices.price_id IS
    'Stable id of the price; llm.usage.price_id refers to it.';

CREATE FUNCTION llm.append_only() RETURNS trigger
    LANGUAGE plpgsql
AS $$
BEGIN
    -- the owner's move of rows between partitions (create_usage_partition)
    IF TG_TABLE_NAME LIKE 'usage%'
       AND current_setting('llmgw.moving_rows', true) = 'on'
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

COMMENT ON FUNCTION llm.append_only() IS
    'Refuses UPDATE, DELETE and TRUNCATE on the tables of the books.';

CREATE TRIGGER prices_append_only
    BEFORE UPDATE OR DELETE ON llm.prices
    FOR EACH ROW EXECUTE FUNCTION llm.append_only();
CREATE TRIGGER prices_append_only_truncate
    BEFORE TRUNCATE ON llm.prices
    FOR EACH STATEMENT EXECUTE FUNCTION llm.append_only();

DROP TRIGGER prices_defaults ON llm.prices;
CREATE TRIGGER prices_defaults
    BEFORE INSERT ON llm.prices
    FOR EACH ROW EXECUTE FUNCTION llm.prices_defaults();


-- The cost of some tokens at one price (by its id), in p$; NULL without.

CREATE FUNCTION llm.cost_at(p_price_id bigint, input_tokens bigint,
                            cached_input_tokens bigint,
                            cache_write_tokens bigint, output_tokens bigint)
    RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN c <= 9223372036854775807 THEN c::bigint END
      FROM (SELECT llm.cost_numeric(p, input_tokens, cached_input_tokens,
                                    cache_write_tokens, output_tokens) AS c
              FROM llm.prices p WHERE p.price_id = p_price_id) x
$$;

COMMENT ON FUNCTION llm.cost_at(bigint, bigint, bigint, bigint, bigint) IS
    'The cost in p$ of (input, cached input, cache write, output tokens) '
    'at the price of this price_id; NULL for none.';

GRANT EXECUTE ON FUNCTION llm.cost_at(bigint, bigint, bigint, bigint, bigint)
    TO PUBLIC;


-- --- corrections --------------------------------------------------------------

CREATE TABLE llm.adjustments (
    adjustment_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id          bigint NOT NULL REFERENCES llm.tenants (tenant_id),
    period_start       date NOT NULL
                       CONSTRAINT adjustments_period_start_month
                       CHECK (period_start = date_trunc('month', period_start)),
    kind               text NOT NULL
                       CONSTRAINT adjustments_kind_valid
                       CHECK (kind IN ('reprice', 'late_usage', 'credit',
                                       'charge', 'duplicate', 'migration')),
    model              text
                       CONSTRAINT adjustments_model_valid
                       CHECK (length(model) BETWEEN 1 AND 128),
    request_id         text,
    ts                 timestamptz,
    refers_to          bigint REFERENCES llm.adjustments (adjustment_id),
    price_id           bigint REFERENCES llm.prices (price_id),
    previous_price_id  bigint REFERENCES llm.prices (price_id),
    amount_pusd        bigint NOT NULL,
    reason             text NOT NULL
                       CONSTRAINT adjustments_reason_valid
                       CHECK (length(reason) BETWEEN 1 AND 500),
    created_by         name NOT NULL DEFAULT session_user,
    created_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT adjustments_request_ts
        CHECK ((request_id IS NULL) = (ts IS NULL)),
    CONSTRAINT adjustments_kind_refers
        CHECK (kind IN ('credit', 'charge') OR request_id IS NOT NULL)
);

CREATE INDEX adjustments_tenant_period_idx
    ON llm.adjustments (tenant_id, period_start);
CREATE INDEX adjustments_request_idx
    ON llm.adjustments (request_id) WHERE request_id IS NOT NULL;

COMMENT ON TABLE llm.adjustments IS
    'Corrections of the books, signed, never changed: a repricing of a '
    'usage row, a row that arrived for a period already closed, a credit '
    'or a charge.  Each bills on one period of its tenant (period_start) '
    'and says what it corrects (request_id and ts, or refers_to), why '
    '(reason) and who (created_by).';
COMMENT ON COLUMN llm.adjustments.period_start IS
    'The first day of the tenant''s month (its time zone) whose invoice '
    'carries it: the period of the corrected row, or the next open one if '
    'that is closed.';
COMMENT ON COLUMN llm.adjustments.kind IS
    'reprice (a usage row at a price entered after it was costed), '
    'late_usage (a usage row that arrived after its period closed), credit '
    'and charge (by hand), duplicate (a request billed twice, credited), '
    'migration (a cost stored before price history, kept as billed).';
COMMENT ON COLUMN llm.adjustments.model IS
    'The model of the corrected row, for the invoice''s lines; NULL for a '
    'credit or charge of no model.';
COMMENT ON COLUMN llm.adjustments.request_id IS
    'The usage row corrected (with ts), or NULL.';
COMMENT ON COLUMN llm.adjustments.refers_to IS
    'The adjustment this one corrects, or NULL.';
COMMENT ON COLUMN llm.adjustments.price_id IS
    'For a reprice or late_usage: the price the row is billed at now.';
COMMENT ON COLUMN llm.adjustments.previous_price_id IS
    'For a reprice: the price it was billed at before (NULL: unpriced).';
COMMENT ON COLUMN llm.adjustments.amount_pusd IS
    'Pico-dollars added to the bill (negative: taken off).';
COMMENT ON COLUMN llm.adjustments.reason IS
    'Why, in words.';
COMMENT ON COLUMN llm.adjustments.created_by IS
    'The role that logged in to make it (session_user).';

CREATE TRIGGER adjustments_append_only
    BEFORE UPDATE OR DELETE ON llm.adjustments
    FOR EACH ROW EXECUTE FUNCTION llm.append_only();
CREATE TRIGGER adjustments_append_only_truncate
    BEFORE TRUNCATE ON llm.adjustments
    FOR EACH STATEMENT EXECUTE FUNCTION llm.append_only();


-- --- usage: the price it was costed with, and what a row may be ---------------

ALTER TABLE llm.usage
    ADD COLUMN price_id bigint;

COMMENT ON COLUMN llm.usage.price_id IS
    'The llm.prices row cost_pusd was computed with (the model''s, or *''s, '
    'effective at ts when the row was written); NULL: unpriced.';
COMMENT ON COLUMN llm.usage.cost_pusd IS
    'The cost in pico-dollars (1e-12 $), exact: uncached input, cached '
    'input, cache-write and output tokens times the prices of price_id (µ$ '
    'per million tokens), computed by the database when the row is '
    'written, never supplied.  NULL when unpriced.  What is billed is this '
    'and the row''s adjustments.';


-- Each existing row's price: the one effective at its ts, if it explains
-- the stored cost; a cost it does not explain is kept as billed.
DO $$
DECLARE
    n  bigint;
BEGIN
    CREATE TEMP TABLE llmgw_priced ON COMMIT DROP AS
    SELECT u.request_id, u.ts, u.tenant_id, u.model, u.cost_pusd AS old,
           p.price_id,
           llm.cost_at(p.price_id, u.input_tokens, u.cached_input_tokens,
                       u.cache_write_tokens, u.output_tokens) AS new
      FROM llm.usage u
      LEFT JOIN LATERAL llm.price_at(u.model, u.ts) p ON true
     WHERE u.cost_pusd IS NOT NULL;

    UPDATE llm.usage u
       SET price_id = c.price_id, cost_pusd = c.new
      FROM llmgw_priced c
     WHERE u.request_id = c.request_id AND u.ts = c.ts;

    INSERT INTO llm.adjustments (tenant_id, period_start, kind, model,
                                 request_id, ts, price_id, amount_pusd,
                                 reason)
    SELECT c.tenant_id,
           llm.budget_start(t.time_zone, 'month', c.ts), 'migration',
           c.model, c.request_id, c.ts, c.price_id,
           c.old - coalesce(c.new, 0),
           'sql/014: the cost stored before price history, kept as billed'
      FROM llmgw_priced c JOIN llm.tenants t USING (tenant_id)
     WHERE c.new IS DISTINCT FROM c.old;

    GET DIAGNOSTICS n = ROW_COUNT;

    IF n > 0 THEN
        RAISE NOTICE '% rows had a cost no price explains: kept as billed, '
                     'by adjustments of kind migration', n;
    END IF;
END
$$;


-- Every request_id once, whatever its month: the primary key of llm.usage
-- is (request_id, ts), unique within a partition only.

CREATE TABLE llm.usage_request_ids (
    request_id  text COLLATE "C" PRIMARY KEY,
    ts          timestamptz NOT NULL
);

COMMENT ON TABLE llm.usage_request_ids IS
    'Every request_id of llm.usage, once (with the ts of its row): a '
    'second row of one, in any month, is refused.  Written by the trigger '
    'usage_tenants_insert.';

DO $$
DECLARE
    n  bigint;
BEGIN
    INSERT INTO llm.usage_request_ids (request_id, ts)
    SELECT DISTINCT ON (request_id) request_id, ts
      FROM llm.usage ORDER BY request_id, ts;

    -- the later rows of a request_id billed twice: credited back
    INSERT INTO llm.adjustments (tenant_id, period_start, kind, model,
                                 request_id, ts, price_id, amount_pusd,
                                 reason)
    SELECT u.tenant_id, llm.budget_start(t.time_zone, 'month', u.ts),
           'duplicate', u.model, u.request_id, u.ts, u.price_id,
           -- what it was billed: its cost and what kept that as billed
           -coalesce(u.cost_pusd, 0)
           - coalesce((SELECT sum(m.amount_pusd) FROM llm.adjustments m
                        WHERE m.request_id = u.request_id AND m.ts = u.ts
                          AND m.kind = 'migration'), 0),
           'sql/014: this request_id is billed by an earlier row'
      FROM llm.usage u
      JOIN llm.usage_request_ids f ON f.request_id = u.request_id
      JOIN llm.tenants t ON t.tenant_id = u.tenant_id
     WHERE u.ts <> f.ts;

    GET DIAGNOSTICS n = ROW_COUNT;

    IF n > 0 THEN
        RAISE NOTICE '% rows repeated a request_id of an earlier month: '
                     'credited, by adjustments of kind duplicate', n;
    END IF;
END
$$;


ALTER TABLE llm.usage
    ADD CONSTRAINT usage_cache_within_input
        CHECK (coalesce(cached_input_tokens, 0) + cache_write_tokens
               <= input_tokens) NOT VALID,
    ADD CONSTRAINT usage_reasoning_within_output
        CHECK (reasoning_tokens <= coalesce(output_tokens, 0)) NOT VALID,
    ADD CONSTRAINT usage_ts_sane
        CHECK (ts >= received_at - interval '35 days'
               AND ts <= received_at + interval '5 minutes') NOT VALID,
    ADD CONSTRAINT usage_price_id_fkey FOREIGN KEY (price_id)
        REFERENCES llm.prices (price_id);

-- checked on the rows there are, where they hold; those of a ledger older
-- than the rule stay as they were written, the rule binds new rows
DO $$
DECLARE
    c  text;
BEGIN
    FOREACH c IN ARRAY ARRAY['usage_cache_within_input',
                             'usage_reasoning_within_output',
                             'usage_ts_sane']
    LOOP
        BEGIN
            EXECUTE format('ALTER TABLE llm.usage VALIDATE CONSTRAINT %I', c);
        EXCEPTION WHEN check_violation THEN
            RAISE NOTICE 'llm.usage has rows from before constraint %, '
                         'which binds new rows only', c;
        END;
    END LOOP;
END
$$;

COMMENT ON CONSTRAINT usage_ts_sane ON llm.usage IS
    'A row is of the last 35 days or of the next 5 minutes (clock skew) '
    'when it is received: a gateway''s journal older than that is a '
    'human''s (llm.usage_rejected).';


-- The covering index of invoices and month-to-date figures: a tenant's
-- rows of a period, read from the index alone once vacuumed.

DROP INDEX llm.usage_tenant_id_ts_idx;

CREATE INDEX usage_tenant_id_ts_idx ON llm.usage (tenant_id, ts)
    INCLUDE (model, price_id, cost_pusd, input_tokens, cached_input_tokens,
             cache_write_tokens, output_tokens, reasoning_tokens, flags);


-- --- the row triggers ---------------------------------------------------------

DROP TRIGGER usage_cost_insert ON llm.usage;
DROP TRIGGER usage_cost_update ON llm.usage;

CREATE OR REPLACE FUNCTION llm.usage_set_cost() RETURNS trigger
    LANGUAGE plpgsql
AS $$
DECLARE
    p  llm.prices;
BEGIN
    SELECT * INTO p FROM llm.price_at(NEW.model, NEW.ts);

    NEW.price_id := p.price_id;
    NEW.cost_pusd := llm.cost_at(p.price_id, NEW.input_tokens,
                                 NEW.cached_input_tokens,
                                 NEW.cache_write_tokens, NEW.output_tokens);

    IF p.price_id IS NOT NULL AND NEW.cost_pusd IS NULL THEN
        RAISE WARNING 'the cost of a row of "%" at % does not fit a bigint: '
                      'left NULL', NEW.model, NEW.ts;
    END IF;

    RETURN NEW;
END
$$;

COMMENT ON FUNCTION llm.usage_set_cost() IS
    'Sets llm.usage.price_id and cost_pusd from llm.prices, whatever the '
    'insert said, unless llm.ingest_batch() (which computes them) or the '
    'move of a partition''s rows inserts it.';

CREATE TRIGGER usage_cost_insert
    BEFORE INSERT ON llm.usage
    FOR EACH ROW
    WHEN (current_setting('llmgw.cost_computed', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION llm.usage_set_cost();

CREATE TRIGGER usage_append_only
    BEFORE UPDATE OR DELETE ON llm.usage
    FOR EACH ROW EXECUTE FUNCTION llm.append_only();
CREATE TRIGGER usage_append_only_truncate
    BEFORE TRUNCATE ON llm.usage
    FOR EACH STATEMENT EXECUTE FUNCTION llm.append_only();


/*
 * The rules a statement's rows must keep together, checked once a
 * statement: their tenants exist (locked, as a foreign key would), their
 * keys are of their tenants, and their request_ids are new to the whole
 * ledger.  As the owner: the writer reads none of it.
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

    -- rows moved between partitions are no new requests
    IF TG_OP = 'INSERT'
       AND current_setting('llmgw.moving_rows', true) IS DISTINCT FROM 'on'
    THEN
        INSERT INTO llm.usage_request_ids (request_id, ts)
        SELECT n.request_id, n.ts FROM new_rows n;
    END IF;

    RETURN NULL;
END
$$;

COMMENT ON FUNCTION llm.usage_tenants_check() IS
    'llm.usage.tenant_id references llm.tenants, (key_id, tenant_id) '
    'llm.api_keys, and request_id is unique in all of llm.usage: checks '
    'the rows a statement wrote, all at once, and locks their tenants.';


-- --- the owner's move of rows out of the default partition --------------------

-- As before (sql/004), and the rows keep what they were written with:
-- cost, price and request_id.

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

ALTER FUNCTION llm.ensure_usage_partitions(int, int)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION llm.usage_columns() SET search_path = pg_catalog, pg_temp;

GRANT EXECUTE ON FUNCTION llm.create_usage_partition(date),
                          llm.ensure_usage_partitions(int, int)
    TO llmgw_writer, llmgw_admin;


-- --- accountd's batch ----------------------------------------------------------

/*
 * A batch of settle records into llm.usage: accountd's one statement
 * (accountd/ingest.c), as a function of the owner's, so that the writer
 * needs no privilege on llm.usage and the database alone costs a row.
 * The records come as 17 arrays, a column each, and everything is done
 * for the whole batch at once:
 *
 *   r:   the records, the arrays unnested side by side;
 *   e:   the rows llm.usage has already for the batch's request_ids
 *        (llm.usage_of_requests);
 *   pm:  the price of each model of the batch at its earliest and latest
 *        ts in the batch: the same row at both means no price change
 *        between them, and every record of that model gets it; otherwise
 *        each is looked up at its own ts;
 *   ins: the records whose request_id is new, with their cost;
 *   and a record whose request_id is there already is a replay, ignored
 *        if its figures are the same, and refused into llm.usage_rejected
 *        if they are not: its request_id is returned.
 *
 * Nothing in a batch may share a request_id (the look-up sees only what
 * was there before); the primary key has the last word on what another
 * writer inserted meanwhile (a unique violation: the caller retries).
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
                                            backends text[])
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
                       unnest(backends) AS backend) a
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
                               upstream_api, backend, price_id, cost_pusd)
        SELECT c.request_id, c.tenant_id, c.key_id, c.model, c.api,
               c.input_tokens, c.output_tokens, c.cached_input_tokens,
               c.cache_write_tokens, c.reasoning_tokens, c.reserved_tokens,
               c.finish_reason, c.status, c.flags, c.ts, c.upstream_api,
               c.backend, (c.price).price_id,
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
                                        backend, error)
        SELECT r.request_id, r.tenant_id, r.key_id, r.model, r.api,
               r.input_tokens, r.output_tokens, r.cached_input_tokens,
               r.cache_write_tokens, r.reasoning_tokens, r.reserved_tokens,
               r.finish_reason, r.status, r.flags, r.ts_ms, r.upstream_api,
               r.backend,
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
                                     int[], int[], bigint[], text[], text[]) IS
    'Writes a batch of settle records (a column an array) into llm.usage, '
    'costed here with the price id it keeps; a replay with the same figures is ignored, one with '
    'others goes to llm.usage_rejected and its request_id is returned.  '
    'accountd''s only way into llm.usage.';

GRANT EXECUTE ON FUNCTION llm.ingest_batch(text[], bigint[], bigint[], text[],
                                           text[], bigint[], bigint[],
                                           bigint[], bigint[], bigint[],
                                           bigint[], text[], int[], int[],
                                           bigint[], text[], text[])
    TO llmgw_writer;


-- --- the proof ----------------------------------------------------------------

CREATE FUNCTION llm.cost_errors(from_ts timestamptz DEFAULT '-infinity',
                                to_ts timestamptz DEFAULT 'infinity')
    RETURNS TABLE (what text, request_id text, ts timestamptz,
                   adjustment_id bigint, stored bigint, computed bigint)
    LANGUAGE sql STABLE
AS $$
    SELECT 'usage', u.request_id, u.ts, NULL::bigint, u.cost_pusd,
           llm.cost_at(u.price_id, u.input_tokens, u.cached_input_tokens,
                       u.cache_write_tokens, u.output_tokens)
      FROM llm.usage u
     WHERE u.ts >= from_ts AND u.ts < to_ts
       AND u.cost_pusd IS DISTINCT FROM
           llm.cost_at(u.price_id, u.input_tokens, u.cached_input_tokens,
                       u.cache_write_tokens, u.output_tokens)
    UNION ALL
    SELECT 'adjustment', a.request_id, a.ts, a.adjustment_id, a.amount_pusd,
           c.computed
      FROM llm.adjustments a
      JOIN llm.usage u ON u.request_id = a.request_id AND u.ts = a.ts
      CROSS JOIN LATERAL (
          SELECT CASE a.kind
                 WHEN 'reprice' THEN
                     coalesce(llm.cost_at(a.price_id, u.input_tokens,
                                          u.cached_input_tokens,
                                          u.cache_write_tokens,
                                          u.output_tokens), 0)
                     - coalesce(llm.cost_at(a.previous_price_id,
                                            u.input_tokens,
                                            u.cached_input_tokens,
                                            u.cache_write_tokens,
                                            u.output_tokens), 0)
                 ELSE coalesce(llm.cost_at(a.price_id, u.input_tokens,
                                           u.cached_input_tokens,
                                           u.cache_write_tokens,
                                           u.output_tokens), 0)
                 END AS computed) c
     WHERE a.kind IN ('reprice', 'late_usage')
       AND a.ts >= from_ts AND a.ts < to_ts
       AND a.amount_pusd <> c.computed
$$;

COMMENT ON FUNCTION llm.cost_errors(timestamptz, timestamptz) IS
    'The proof of the costs: every usage row (from_ts <= ts < to_ts) whose '
    'cost_pusd is not its price_id''s prices applied to its tokens, and '
    'every reprice or late_usage adjustment whose amount is not what its '
    'prices make of its row''s tokens.  No rows: every cost holds.';

GRANT EXECUTE ON FUNCTION llm.cost_errors(timestamptz, timestamptz)
    TO llmgw_admin, llmgw_reporting;


-- --- privileges ---------------------------------------------------------------

REVOKE ALL ON llm.adjustments, llm.usage_request_ids FROM PUBLIC;
GRANT SELECT ON llm.adjustments, llm.usage_request_ids TO llmgw_admin;
GRANT SELECT ON llm.adjustments TO llmgw_reporting;

ALTER TABLE llm.adjustments ENABLE ROW LEVEL SECURITY;
ALTER TABLE llm.adjustments FORCE ROW LEVEL SECURITY;

CREATE POLICY adjustments_all ON llm.adjustments
    USING (true) WITH CHECK (true);
CREATE POLICY adjustments_tenant ON llm.adjustments
    AS RESTRICTIVE TO llmgw_reporting
    USING (tenant_id = (SELECT llm.reporting_tenant()));

