-- ngx_llm_gateway: billing.  Prices per model over time, the exact cost of
-- every usage row, llm.usage partitioned by month, the views finance reads
-- (llm.daily_usage, llm.monthly_invoice, llm.monthly_invoice_total), and a
-- reporting role per tenant that row-level security confines to the
-- tenant's own rows.
--
-- Applied once, in a single transaction, by
--     psql -v ON_ERROR_STOP=1 -1 -f sql/004_billing.sql
-- as the owner of schema llm (accountd's role), which needs CREATEROLE
-- for the group role llmgw_reporting.  It upgrades a database with rows:
-- llm.usage is rebuilt as a partitioned table and its rows moved.
--
-- Money is integers: prices in micro-dollars (µ$, 1e-6 $) per million
-- tokens, so a token at 1 µ$/Mtok costs 1e-12 $, one pico-dollar (p$), and
-- the cost of a row is an exact integer of p$.  No floating point anywhere.


-- --- prices -----------------------------------------------------------------

CREATE TABLE llm.prices (
    model                  text NOT NULL
                           CONSTRAINT prices_model_valid
                           CHECK (length(model) BETWEEN 1 AND 128),
    effective_from         timestamptz NOT NULL,
    input_per_mtok         bigint NOT NULL
                           CONSTRAINT prices_input_range
                           CHECK (input_per_mtok BETWEEN 0 AND 10000000000),
    output_per_mtok        bigint NOT NULL
                           CONSTRAINT prices_output_range
                           CHECK (output_per_mtok BETWEEN 0 AND 10000000000),
    cached_input_per_mtok  bigint NOT NULL
                           CONSTRAINT prices_cached_input_range
                           CHECK (cached_input_per_mtok
                                  BETWEEN 0 AND 10000000000),
    cache_write_per_mtok   bigint NOT NULL
                           CONSTRAINT prices_cache_write_range
                           CHECK (cache_write_per_mtok
                                  BETWEEN 0 AND 10000000000),
    created_at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, effective_from)
);

COMMENT ON TABLE llm.prices IS
    'What a model costs from effective_from on, until the model''s next '
    'row.  A usage row is costed, when it is inserted, with the row of its '
    'model effective at its ts; the model ''*'' is the price of every model '
    'that has none of its own at that time.  A price change is a new row: '
    'rows already in llm.usage keep their cost (see llm.reprice_usage).';
COMMENT ON COLUMN llm.prices.model IS
    'The model as llm.usage.model names it (exact, case-sensitive), or * '
    'for the default price.';
COMMENT ON COLUMN llm.prices.effective_from IS
    'From when this price applies, compared with llm.usage.ts.';
COMMENT ON COLUMN llm.prices.input_per_mtok IS
    'Micro-dollars per million uncached input tokens (2500000 is $2.50 per '
    'million), 0 to 1e10 ($10,000 per million).';
COMMENT ON COLUMN llm.prices.output_per_mtok IS
    'Micro-dollars per million output tokens, reasoning included.';
COMMENT ON COLUMN llm.prices.cached_input_per_mtok IS
    'Micro-dollars per million input tokens read from the prompt cache; '
    'input_per_mtok when inserted as NULL or left out.';
COMMENT ON COLUMN llm.prices.cache_write_per_mtok IS
    'Micro-dollars per million input tokens written to the prompt cache; '
    'input_per_mtok when inserted as NULL or left out.';
COMMENT ON COLUMN llm.prices.created_at IS
    'When the row was inserted.';


-- NULL (or nothing) for a cache price is "the input price", written into
-- the row so that what is stored is what is charged.

CREATE FUNCTION llm.prices_defaults() RETURNS trigger
    LANGUAGE plpgsql
AS $$
BEGIN
    NEW.cached_input_per_mtok :=
        coalesce(NEW.cached_input_per_mtok, NEW.input_per_mtok);
    NEW.cache_write_per_mtok :=
        coalesce(NEW.cache_write_per_mtok, NEW.input_per_mtok);
    RETURN NEW;
END
$$;

COMMENT ON FUNCTION llm.prices_defaults() IS
    'Sets a cache price left NULL to the input price.';

CREATE TRIGGER prices_defaults
    BEFORE INSERT OR UPDATE ON llm.prices
    FOR EACH ROW EXECUTE FUNCTION llm.prices_defaults();


-- The cost of some tokens of a model at a time, in p$: the sum over the
-- kinds of tokens of tokens × µ$ per Mtok.  Uncached input is the input
-- less what was read from and written to the cache, never below 0.
--
-- The gateway clamps every figure to 1e8 and the input is at most three of
-- them, so the tokens of one row are at most 4e8 and, with prices at most
-- 1e10, its cost at most 4e18 p$: it fits a bigint (9.2e18).  Figures that
-- plain SQL made larger still are computed exactly (numeric); a cost
-- beyond a bigint is NULL, with a WARNING, never wrapped or an error.

CREATE FUNCTION llm.usage_cost(model text, ts timestamptz,
                               input_tokens bigint,
                               cached_input_tokens bigint,
                               cache_write_tokens bigint,
                               output_tokens bigint)
    RETURNS bigint
    LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
    p       llm.prices;
    n_in    numeric := coalesce($3, 0);
    n_read  numeric := coalesce($4, 0);
    n_write numeric := coalesce($5, 0);
    n_out   numeric := coalesce($6, 0);
    c       numeric;
BEGIN
    SELECT * INTO p
      FROM llm.prices r
     WHERE r.model IN ($1, '*') AND r.effective_from <= $2
     ORDER BY r.model = $1 DESC, r.effective_from DESC
     LIMIT 1;

    IF NOT FOUND THEN
        RETURN NULL;
    END IF;

    c := greatest(n_in - n_read - n_write, 0) * p.input_per_mtok
         + n_read * p.cached_input_per_mtok
         + n_write * p.cache_write_per_mtok
         + n_out * p.output_per_mtok;

    IF c > 9223372036854775807 THEN
        RAISE WARNING 'the cost of a row of "%" at % does not fit a bigint '
                      '(% p$): left NULL', $1, $2, c;
        RETURN NULL;
    END IF;

    RETURN c;
END
$$;

COMMENT ON FUNCTION llm.usage_cost(text, timestamptz, bigint, bigint, bigint,
                                   bigint) IS
    'The cost in pico-dollars of (model, ts, input, cached input, cache '
    'write, output tokens) by llm.prices: the model''s price effective at '
    'ts, else that of *, else NULL.';


-- --- llm.usage, partitioned by month ----------------------------------------

-- The table of 001 and 003 is renamed and rebuilt as a partitioned table
-- like it, with the same columns in the same order (defaults, generated
-- columns, CHECK constraints and column comments come with LIKE), then
-- the primary key, the index and the foreign key, and cost_pusd.  A
-- primary key of a partitioned table must contain the partition key:
-- (request_id, ts).  The gateway sends a replayed record with the ts it
-- first had, so a replay still conflicts and is ignored.

ALTER TABLE llm.usage RENAME TO usage_unpartitioned;
ALTER TABLE llm.usage_unpartitioned
    RENAME CONSTRAINT usage_pkey TO usage_unpartitioned_pkey;
ALTER INDEX llm.usage_tenant_id_ts_idx
    RENAME TO usage_unpartitioned_tenant_id_ts_idx;

CREATE TABLE llm.usage (
    LIKE llm.usage_unpartitioned INCLUDING ALL EXCLUDING INDEXES,
    cost_pusd  bigint
               CONSTRAINT usage_cost_pusd_nonneg CHECK (cost_pusd >= 0),
    CONSTRAINT usage_pkey PRIMARY KEY (request_id, ts),
    CONSTRAINT usage_tenant_id_fkey FOREIGN KEY (tenant_id)
        REFERENCES llm.tenants (tenant_id)
) PARTITION BY RANGE (ts);

CREATE INDEX usage_tenant_id_ts_idx ON llm.usage (tenant_id, ts);

CREATE TABLE llm.usage_default PARTITION OF llm.usage DEFAULT;

COMMENT ON TABLE llm.usage IS
    'The usage ledger: one row per request that reached the gateway''s '
    'settle step, written once by accountd (a replayed record is ignored), '
    'with its cost.  Partitioned by month of ts (UTC): llm.usage_YYYY_MM, '
    'and llm.usage_default for a month without one of its own.  Bill from '
    'this table or from llm.daily_usage and llm.monthly_invoice.';
COMMENT ON COLUMN llm.usage.request_id IS
    'The gateway''s id of the request; with ts the primary key, so a record '
    'sent twice (with its ts) is counted once.';
COMMENT ON COLUMN llm.usage.cost_pusd IS
    'The cost in pico-dollars (1e-12 $), exact: uncached input, cached '
    'input, cache-write and output tokens times their llm.prices (µ$ per '
    'million tokens) effective at ts, computed when the row is inserted.  '
    'NULL when the model had no price (nor *) at ts.';
COMMENT ON TABLE llm.usage_default IS
    'The rows of llm.usage whose month has no partition yet; '
    'llm.ensure_usage_partitions moves them when it creates it.';

-- What was granted on the old table is granted on the new one; it keeps
-- its owner.
DO $$
DECLARE
    g  record;
BEGIN
    EXECUTE format('ALTER TABLE llm.usage OWNER TO %I',
                   (SELECT pg_get_userbyid(relowner) FROM pg_class
                     WHERE oid = 'llm.usage_unpartitioned'::regclass));

    FOR g IN
        SELECT a.privilege_type, a.is_grantable,
               CASE a.grantee WHEN 0 THEN 'PUBLIC'
                    ELSE quote_ident(pg_get_userbyid(a.grantee)) END AS who
          FROM pg_class c, aclexplode(c.relacl) a
         WHERE c.oid = 'llm.usage_unpartitioned'::regclass
           AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON llm.usage TO %s%s', g.privilege_type,
                       g.who, CASE WHEN g.is_grantable
                                   THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;


CREATE FUNCTION llm.usage_set_cost() RETURNS trigger
    LANGUAGE plpgsql
AS $$
BEGIN
    NEW.cost_pusd := llm.usage_cost(NEW.model, NEW.ts, NEW.input_tokens,
                                    NEW.cached_input_tokens,
                                    NEW.cache_write_tokens,
                                    NEW.output_tokens);
    RETURN NEW;
END
$$;

COMMENT ON FUNCTION llm.usage_set_cost() IS
    'Sets llm.usage.cost_pusd from llm.prices (llm.usage_cost) whenever a '
    'row is inserted or its model, ts or tokens change.';

CREATE TRIGGER usage_cost
    BEFORE INSERT OR UPDATE OF model, ts, input_tokens, cached_input_tokens,
                               cache_write_tokens, output_tokens
    ON llm.usage
    FOR EACH ROW EXECUTE FUNCTION llm.usage_set_cost();


-- The columns of llm.usage a row is written with: all but the generated.

CREATE FUNCTION llm.usage_columns() RETURNS text
    LANGUAGE sql STABLE
AS $$
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum)
      FROM pg_attribute
     WHERE attrelid = 'llm.usage'::regclass AND attnum > 0
       AND NOT attisdropped AND attgenerated = ''
$$;

COMMENT ON FUNCTION llm.usage_columns() IS
    'The stored, non-generated columns of llm.usage, for moving rows.';


-- The partition of one month (UTC), llm.usage_YYYY_MM.  Rows that the
-- default partition took for that month meanwhile move into it (their
-- cost recomputed by the same rule): PostgreSQL cannot create a partition
-- while the default one holds rows of its range.  Writers wait meanwhile
-- (a lock on llm.usage), nothing fails.

CREATE FUNCTION llm.create_usage_partition(month date) RETURNS text
    LANGUAGE plpgsql
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
    END IF;

    RETURN 'llm.' || part;
END
$$;

COMMENT ON FUNCTION llm.create_usage_partition(date) IS
    'Creates the partition of llm.usage for the month (UTC) of its '
    'argument, moving there the rows llm.usage_default holds for it.  '
    'Returns its name, or NULL if it existed.';


CREATE FUNCTION llm.ensure_usage_partitions(months_ahead int DEFAULT 3,
                                            months_back int DEFAULT 1)
    RETURNS SETOF text
    LANGUAGE sql
AS $$
    SELECT p
      FROM generate_series(-months_back, months_ahead) AS i,
           llm.create_usage_partition(
               (date_trunc('month', now() AT TIME ZONE 'UTC')
                + i * interval '1 month')::date) AS p
     WHERE p IS NOT NULL
$$;

COMMENT ON FUNCTION llm.ensure_usage_partitions(int, int) IS
    'Creates the missing monthly partitions of llm.usage from months_back '
    'months before the current month (UTC) to months_ahead after it; '
    'returns those it created.  Run it monthly or daily (cron); without it '
    'rows still go in, to llm.usage_default.';


-- Every month the old rows are in gets its partition, and the months
-- around now; then the rows move, costed by the trigger (there is no price
-- yet: NULL, until llm.reprice_usage).

DO $$
BEGIN
    PERFORM llm.create_usage_partition(m)
       FROM (SELECT DISTINCT date_trunc('month', ts AT TIME ZONE 'UTC')::date
               FROM llm.usage_unpartitioned) AS d (m);

    PERFORM llm.ensure_usage_partitions();

    EXECUTE format('INSERT INTO llm.usage (%1$s) SELECT %1$s'
                   ' FROM llm.usage_unpartitioned',
                   (SELECT string_agg(quote_ident(attname), ', '
                                      ORDER BY attnum)
                      FROM pg_attribute
                     WHERE attrelid = 'llm.usage_unpartitioned'::regclass
                       AND attnum > 0 AND NOT attisdropped
                       AND attgenerated = ''));
END
$$;

DROP TABLE llm.usage_unpartitioned;

ANALYZE llm.usage;


-- Prices changed or added after rows were costed: cost them again.

CREATE FUNCTION llm.reprice_usage(from_ts timestamptz, to_ts timestamptz)
    RETURNS bigint
    LANGUAGE plpgsql
AS $$
DECLARE
    n  bigint;
BEGIN
    WITH c AS (
        SELECT request_id, ts,
               llm.usage_cost(model, ts, input_tokens, cached_input_tokens,
                              cache_write_tokens, output_tokens) AS cost,
               cost_pusd
          FROM llm.usage
         WHERE ts >= from_ts AND ts < to_ts
    )
    UPDATE llm.usage u SET cost_pusd = c.cost
      FROM c
     WHERE u.request_id = c.request_id AND u.ts = c.ts
       AND c.cost IS DISTINCT FROM c.cost_pusd;

    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

COMMENT ON FUNCTION llm.reprice_usage(timestamptz, timestamptz) IS
    'Recomputes cost_pusd from llm.prices for the rows with from_ts <= ts '
    '< to_ts; returns how many changed.  For prices added after the fact '
    '(rows from before 004, a price entered late); it rewrites history.';


-- --- the views finance reads ------------------------------------------------

-- security_invoker: the caller's privileges and row-level security apply
-- to llm.usage and llm.tenants, so that a reporting role sees its own
-- tenant's figures only.  Days and months are UTC whatever the session's
-- TimeZone.  cost_usd is numeric with 12 decimals, exact; it leaves out
-- the unpriced rows (counted in unpriced) and is NULL if all are.

CREATE VIEW llm.daily_usage
    WITH (security_barrier = true, security_invoker = true)
AS
SELECT u.tenant_id,
       t.name                                         AS tenant,
       (u.ts AT TIME ZONE 'UTC')::date                AS day,
       u.model,
       count(*)                                       AS requests,
       sum(u.input_tokens)                            AS input_tokens,
       sum(u.output_tokens)                           AS output_tokens,
       sum(u.cached_input_tokens)                     AS cached_input_tokens,
       sum(u.cache_write_tokens)                      AS cache_write_tokens,
       sum(u.reasoning_tokens)                        AS reasoning_tokens,
       sum(u.cost_pusd) * 0.000000000001              AS cost_usd,
       count(*) FILTER (WHERE u.cost_pusd IS NULL)    AS unpriced,
       count(*) FILTER (WHERE u.estimated)            AS estimated,
       count(*) FILTER (WHERE u.partial)              AS partial
  FROM llm.usage u
  JOIN llm.tenants t ON t.tenant_id = u.tenant_id
 GROUP BY u.tenant_id, t.name, (u.ts AT TIME ZONE 'UTC')::date, u.model;

COMMENT ON VIEW llm.daily_usage IS
    'Requests, tokens and cost per tenant, day (UTC) and model.  cost_usd '
    'is exact (numeric, 12 decimals) over the priced rows; unpriced, '
    'estimated and partial count rows.';

CREATE VIEW llm.monthly_invoice
    WITH (security_barrier = true, security_invoker = true)
AS
SELECT u.tenant_id,
       t.name                                         AS tenant,
       date_trunc('month', u.ts AT TIME ZONE 'UTC')::date AS month,
       u.model,
       count(*)                                       AS requests,
       sum(u.input_tokens)                            AS input_tokens,
       sum(u.output_tokens)                           AS output_tokens,
       sum(u.cached_input_tokens)                     AS cached_input_tokens,
       sum(u.cache_write_tokens)                      AS cache_write_tokens,
       sum(u.reasoning_tokens)                        AS reasoning_tokens,
       sum(u.cost_pusd) * 0.000000000001              AS cost_usd,
       count(*) FILTER (WHERE u.cost_pusd IS NULL)    AS unpriced,
       count(*) FILTER (WHERE u.estimated)            AS estimated,
       count(*) FILTER (WHERE u.partial)              AS partial
  FROM llm.usage u
  JOIN llm.tenants t ON t.tenant_id = u.tenant_id
 GROUP BY u.tenant_id, t.name,
          date_trunc('month', u.ts AT TIME ZONE 'UTC')::date, u.model;

COMMENT ON VIEW llm.monthly_invoice IS
    'The lines of a month''s invoice: per tenant, month (UTC, its first '
    'day) and model, as llm.daily_usage.  llm.monthly_invoice_total has '
    'the total.';

CREATE VIEW llm.monthly_invoice_total
    WITH (security_barrier = true, security_invoker = true)
AS
SELECT u.tenant_id,
       t.name                                         AS tenant,
       date_trunc('month', u.ts AT TIME ZONE 'UTC')::date AS month,
       count(*)                                       AS requests,
       sum(u.input_tokens)                            AS input_tokens,
       sum(u.output_tokens)                           AS output_tokens,
       sum(u.cached_input_tokens)                     AS cached_input_tokens,
       sum(u.cache_write_tokens)                      AS cache_write_tokens,
       sum(u.reasoning_tokens)                        AS reasoning_tokens,
       sum(u.cost_pusd) * 0.000000000001              AS cost_usd,
       count(*) FILTER (WHERE u.cost_pusd IS NULL)    AS unpriced,
       count(*) FILTER (WHERE u.estimated)            AS estimated,
       count(*) FILTER (WHERE u.partial)              AS partial
  FROM llm.usage u
  JOIN llm.tenants t ON t.tenant_id = u.tenant_id
 GROUP BY u.tenant_id, t.name,
          date_trunc('month', u.ts AT TIME ZONE 'UTC')::date;

COMMENT ON VIEW llm.monthly_invoice_total IS
    'The total of a month''s invoice per tenant, all models: the sum of its '
    'llm.monthly_invoice lines.';


-- --- reporting roles and row-level security ---------------------------------

-- A reporting role belongs to one tenant (llm.reporting_roles) and to the
-- group llmgw_reporting, which holds the privileges: USAGE on schema llm,
-- SELECT on llm.usage and the views, on llm.tenants (tenant_id, name) and
-- on llm.reporting_roles.  Each of those tables has row-level security,
-- forced (the owner too is subject to it), with two policies:
--
--   <table>_all:     permissive, everyone: every row.  What a role may
--                    read or write is what it was granted, as before 004:
--                    accountd (owner, or any role it runs as) and finance
--                    analysts see everything.
--   <table>_tenant:  restrictive, members of llmgw_reporting: only the
--                    rows of their own tenant (llm.reporting_tenant()),
--                    none if they have none.
--
-- Superusers and BYPASSRLS roles skip row-level security altogether.
-- Partitions have no grants: a reporting role reads through llm.usage.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'llmgw_reporting') THEN
        CREATE ROLE llmgw_reporting NOLOGIN;
    END IF;
END
$$;

COMMENT ON ROLE llmgw_reporting IS
    'ngx_llm_gateway: the group of the tenants'' reporting roles '
    '(llm.create_reporting_role); row-level security confines each to its '
    'tenant''s rows.';


CREATE TABLE llm.reporting_roles (
    role        name PRIMARY KEY,
    tenant_id   bigint NOT NULL REFERENCES llm.tenants (tenant_id),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX reporting_roles_tenant_id_idx ON llm.reporting_roles (tenant_id);

COMMENT ON TABLE llm.reporting_roles IS
    'Which tenant''s rows a reporting role (a member of llmgw_reporting) '
    'sees.  Made by llm.create_reporting_role.';
COMMENT ON COLUMN llm.reporting_roles.role IS
    'The PostgreSQL role, as current_user names it.';
COMMENT ON COLUMN llm.reporting_roles.tenant_id IS
    'The tenant whose rows it sees.';
COMMENT ON COLUMN llm.reporting_roles.created_at IS
    'When the role was made a reporting role.';


CREATE FUNCTION llm.reporting_tenant() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT tenant_id FROM llm.reporting_roles WHERE role = current_user
$$;

COMMENT ON FUNCTION llm.reporting_tenant() IS
    'The tenant of the current role if it is a reporting role, else NULL.';


CREATE FUNCTION llm.create_reporting_role(tenant text,
                                          role_name text DEFAULT NULL)
    RETURNS name
    LANGUAGE plpgsql
AS $$
DECLARE
    tid    bigint;
    r      text := coalesce(role_name, 'llmgw_report_' || tenant);
    other  bigint;
BEGIN
    SELECT t.tenant_id INTO tid FROM llm.tenants t WHERE t.name = tenant;

    IF NOT FOUND THEN
        RAISE EXCEPTION 'no tenant "%"', tenant
              USING ERRCODE = 'no_data_found';
    END IF;

    IF octet_length(r) > 63 THEN
        RAISE EXCEPTION 'role name "%" is longer than 63 bytes', r
              USING HINT = 'Give a shorter one as the second argument.';
    END IF;

    SELECT rr.tenant_id INTO other FROM llm.reporting_roles rr
     WHERE rr.role = r;

    IF FOUND THEN
        IF other <> tid THEN
            RAISE EXCEPTION 'role "%" reports on another tenant (%)', r,
                  other;
        END IF;
        RETURN r;
    END IF;

    IF EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
        RAISE EXCEPTION 'role "%" exists and is not a reporting role', r;
    END IF;

    EXECUTE format('CREATE ROLE %I NOLOGIN IN ROLE llmgw_reporting', r);
    EXECUTE format('COMMENT ON ROLE %I IS %L', r,
                   'ngx_llm_gateway: reads the ledger of tenant ' || tenant);

    INSERT INTO llm.reporting_roles (role, tenant_id) VALUES (r, tid);

    RETURN r;
END
$$;

REVOKE EXECUTE ON FUNCTION llm.create_reporting_role(text, text) FROM PUBLIC;

COMMENT ON FUNCTION llm.create_reporting_role(text, text) IS
    'Creates the NOLOGIN role llmgw_report_<tenant> (or role_name), a '
    'member of llmgw_reporting that sees the tenant''s rows only; returns '
    'its name.  Again for the same tenant: nothing, the name.  Give it a '
    'login with ALTER ROLE ... LOGIN PASSWORD.';


GRANT USAGE ON SCHEMA llm TO llmgw_reporting;
GRANT SELECT ON llm.usage, llm.daily_usage, llm.monthly_invoice,
                llm.monthly_invoice_total, llm.reporting_roles
    TO llmgw_reporting;
GRANT SELECT (tenant_id, name) ON llm.tenants TO llmgw_reporting;


ALTER TABLE llm.usage ENABLE ROW LEVEL SECURITY;
ALTER TABLE llm.usage FORCE ROW LEVEL SECURITY;

CREATE POLICY usage_all ON llm.usage
    USING (true) WITH CHECK (true);
CREATE POLICY usage_tenant ON llm.usage AS RESTRICTIVE TO llmgw_reporting
    USING (tenant_id = (SELECT llm.reporting_tenant()));

ALTER TABLE llm.tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE llm.tenants FORCE ROW LEVEL SECURITY;

CREATE POLICY tenants_all ON llm.tenants
    USING (true) WITH CHECK (true);
CREATE POLICY tenants_tenant ON llm.tenants AS RESTRICTIVE TO llmgw_reporting
    USING (tenant_id = (SELECT llm.reporting_tenant()));

ALTER TABLE llm.reporting_roles ENABLE ROW LEVEL SECURITY;
ALTER TABLE llm.reporting_roles FORCE ROW LEVEL SECURITY;

CREATE POLICY reporting_roles_all ON llm.reporting_roles
    USING (true) WITH CHECK (true);
CREATE POLICY reporting_roles_tenant ON llm.reporting_roles
    AS RESTRICTIVE TO llmgw_reporting
    USING (role = current_user);
