-- ngx_llm_gateway: least privilege.  Who may do what to the ledger.
--
--   llmgw_owner      NOLOGIN.  Owns schema llm and everything in it.  No
--                    daemon and no person logs in as it; a superuser acts
--                    as it (SET ROLE) for the maintenance doc/ledger.md
--                    describes, and the SECURITY DEFINER functions below
--                    run as it.
--   llmgw_writer     NOLOGIN, the group of accountd's login role.  Writes
--                    usage only through llm.ingest_batch(), which costs
--                    every row itself (a writer cannot supply a cost),
--                    and the records PostgreSQL refused into
--                    llm.usage_rejected; reads the tenants, keys and
--                    prices its look-ups need; leases and shares through
--                    their functions.  Nothing else: no UPDATE, DELETE or
--                    TRUNCATE anywhere, no DDL, no roles.
--   llmgw_admin      NOLOGIN, the group of the operators' login role (the
--                    "accountd tenant|key|price|period|invoice" commands):
--                    tenants, keys, prices (insert only), closing periods,
--                    reporting roles (the login role itself has
--                    CREATEROLE for those: accountd's never has).
--   llmgw_reporting  (sql/004) the tenants' read-only reporting roles.
--
-- UPDATE, DELETE and TRUNCATE of llm.usage and llm.prices are revoked
-- from every role; the owner alone keeps them, for maintenance.
--
-- Applied once, in a single transaction, by a superuser:
--     psql -v ON_ERROR_STOP=1 -1 -f sql/013_least_privilege.sql
-- It upgrades a database whose schema a daemon's role owned (the Debian
-- package's accountd, with CREATEROLE): that role becomes a member of
-- llmgw_writer and loses CREATEROLE; the database, the schema, its
-- objects and public.llmgw_migrations pass to llmgw_owner.


DO $$
BEGIN
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        RAISE EXCEPTION 'sql/013 is applied by a superuser, not by "%"',
                        current_user
              USING HINT = 'runuser -u postgres -- psql -d llmgw ...';
    END IF;

    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'llmgw_owner') THEN
        CREATE ROLE llmgw_owner NOLOGIN;
    END IF;

    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'llmgw_writer') THEN
        CREATE ROLE llmgw_writer NOLOGIN;
    END IF;

    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'llmgw_admin') THEN
        CREATE ROLE llmgw_admin NOLOGIN;
    END IF;
END
$$;

COMMENT ON ROLE llmgw_owner IS
    'ngx_llm_gateway: owns schema llm; no one logs in as it.';
COMMENT ON ROLE llmgw_writer IS
    'ngx_llm_gateway: accountd''s privileges: inserts usage through '
    'llm.ingest_batch(), reads tenants, keys and prices.';
COMMENT ON ROLE llmgw_admin IS
    'ngx_llm_gateway: the operators'' privileges: tenants, keys, prices, '
    'periods, invoices.';


-- --- the owner ----------------------------------------------------------------

DO $$
DECLARE
    old   name := (SELECT pg_get_userbyid(nspowner) FROM pg_namespace
                    WHERE nspname = 'llm');
    o     record;
BEGIN
    FOR o IN
        SELECT c.oid::regclass AS rel, c.relkind
          FROM pg_class c
         WHERE c.relnamespace = 'llm'::regnamespace
           AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO llmgw_owner',
                       CASE o.relkind WHEN 'v' THEN 'VIEW'
                                      WHEN 'm' THEN 'MATERIALIZED VIEW'
                                      WHEN 'f' THEN 'FOREIGN TABLE'
                                      ELSE 'TABLE' END, o.rel);
    END LOOP;

    FOR o IN
        SELECT p.oid::regprocedure AS f FROM pg_proc p
         WHERE p.pronamespace = 'llm'::regnamespace
    LOOP
        EXECUTE format('ALTER ROUTINE %s OWNER TO llmgw_owner', o.f);
    END LOOP;

    ALTER SCHEMA llm OWNER TO llmgw_owner;

    IF to_regclass('public.llmgw_migrations') IS NOT NULL THEN
        ALTER TABLE public.llmgw_migrations OWNER TO llmgw_owner;
    END IF;

    -- a daemon's role that owned it all: a writer now, and nothing more
    IF old IS NOT NULL AND old <> 'llmgw_owner'
       AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = old)
    THEN
        EXECUTE format('GRANT llmgw_writer TO %I', old);
        EXECUTE format('ALTER ROLE %I NOCREATEROLE', old);

        IF (SELECT pg_get_userbyid(datdba) FROM pg_database
             WHERE datname = current_database()) = old
        THEN
            EXECUTE format('ALTER DATABASE %I OWNER TO llmgw_owner',
                           current_database());
        END IF;

        RAISE NOTICE 'role "%" owned schema llm: it is a member of '
                     'llmgw_writer now, without CREATEROLE', old;
    END IF;
END
$$;


-- --- nothing changes the ledger, but its owner --------------------------------

-- Whatever was granted on the ledger, to anyone, and PUBLIC's defaults.
DO $$
DECLARE
    g  record;
BEGIN
    FOR g IN
        SELECT c.oid::regclass AS rel, a.privilege_type,
               CASE a.grantee WHEN 0 THEN 'PUBLIC'
                    ELSE quote_ident(pg_get_userbyid(a.grantee)) END AS who
          FROM pg_class c, aclexplode(c.relacl) a
         WHERE c.relnamespace = 'llm'::regnamespace
           AND c.relkind IN ('r', 'p')
           AND a.grantee <> c.relowner
           AND (c.oid IN (SELECT relid FROM pg_partition_tree('llm.usage'))
                OR c.oid = 'llm.prices'::regclass)
           AND a.privilege_type IN ('UPDATE', 'DELETE', 'TRUNCATE', 'INSERT',
                                    'REFERENCES', 'TRIGGER')
    LOOP
        EXECUTE format('REVOKE %s ON %s FROM %s', g.privilege_type, g.rel,
                       g.who);
    END LOOP;
END
$$;

REVOKE ALL ON SCHEMA llm FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA llm FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA llm FROM PUBLIC;
ALTER DEFAULT PRIVILEGES FOR ROLE llmgw_owner IN SCHEMA llm
    REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- the functions every role may call (none writes, none is a definer's)
GRANT EXECUTE ON FUNCTION llm.models_valid(text[]), llm.time_zone_valid(text),
                          llm.usd_to_pusd(text),
                          llm.budget_start(text, text, timestamptz),
                          llm.price_at(text, timestamptz),
                          llm.cost_numeric(llm.prices, bigint, bigint, bigint,
                                           bigint),
                          llm.usage_cost(text, timestamptz, bigint, bigint,
                                         bigint, bigint),
                          llm.reporting_tenant()
    TO PUBLIC;


-- What follows is the owner's: made as it, owned by it.
SET LOCAL ROLE llmgw_owner;


-- --- accountd: llmgw_writer ---------------------------------------------------

/*
 * The leases and shares write tables no writer may touch: they run as
 * their owner, with a search path that nothing a caller made can shadow
 * (every name in them is qualified).
 */

ALTER FUNCTION llm.take_lease(bigint, bigint, text, bigint, timestamptz)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION llm.take_lease(bigint, text, bigint, timestamptz)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION llm.return_lease(bigint, bigint, text, bigint, timestamptz,
                                timestamptz)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION llm.take_share(bigint, text, bigint)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

GRANT USAGE ON SCHEMA llm TO llmgw_writer;
GRANT SELECT ON llm.tenants, llm.api_keys, llm.prices TO llmgw_writer;
-- ON CONFLICT (request_id) needs to read the column it arbitrates on
GRANT INSERT, SELECT (request_id) ON llm.usage_rejected TO llmgw_writer;
GRANT EXECUTE ON FUNCTION
    llm.take_lease(bigint, bigint, text, bigint, timestamptz),
    llm.take_lease(bigint, text, bigint, timestamptz),
    llm.return_lease(bigint, bigint, text, bigint, timestamptz, timestamptz),
    llm.take_share(bigint, text, bigint)
    TO llmgw_writer;


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

CREATE FUNCTION llm.ingest_batch(request_ids text[], tenant_ids bigint[],
                                 key_ids bigint[], models text[],
                                 apis text[], input_tokens bigint[],
                                 output_tokens bigint[],
                                 cached_input_tokens bigint[],
                                 cache_write_tokens bigint[],
                                 reasoning_tokens bigint[],
                                 reserved_tokens bigint[],
                                 finish_reasons text[], statuses int[],
                                 flags int[], ts_ms bigint[],
                                 upstream_apis text[], backends text[])
    RETURNS SETOF text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
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
                               upstream_api, backend, cost_pusd)
        SELECT c.request_id, c.tenant_id, c.key_id, c.model, c.api,
               c.input_tokens, c.output_tokens, c.cached_input_tokens,
               c.cache_write_tokens, c.reasoning_tokens, c.reserved_tokens,
               c.finish_reason, c.status, c.flags, c.ts, c.upstream_api,
               c.backend,
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
END
$$;

COMMENT ON FUNCTION llm.ingest_batch(text[], bigint[], bigint[], text[],
                                     text[], bigint[], bigint[], bigint[],
                                     bigint[], bigint[], bigint[], text[],
                                     int[], int[], bigint[], text[], text[]) IS
    'Writes a batch of settle records (a column an array) into llm.usage, '
    'costed here; a replay with the same figures is ignored, one with '
    'others goes to llm.usage_rejected and its request_id is returned.  '
    'accountd''s only way into llm.usage.';

GRANT EXECUTE ON FUNCTION llm.ingest_batch(text[], bigint[], bigint[], text[],
                                           text[], bigint[], bigint[],
                                           bigint[], bigint[], bigint[],
                                           bigint[], text[], int[], int[],
                                           bigint[], text[], text[])
    TO llmgw_writer;


-- --- operators: llmgw_admin ---------------------------------------------------

GRANT USAGE ON SCHEMA llm TO llmgw_admin;
GRANT SELECT ON ALL TABLES IN SCHEMA llm TO llmgw_admin;
GRANT INSERT, UPDATE ON llm.tenants, llm.api_keys TO llmgw_admin;
GRANT INSERT ON llm.prices TO llmgw_admin;
GRANT INSERT, DELETE ON llm.reporting_roles TO llmgw_admin;
GRANT EXECUTE ON FUNCTION llm.create_reporting_role(text, text)
    TO llmgw_admin;


-- --- reporting roles: unchanged (sql/004), and the functions they read --------

GRANT EXECUTE ON FUNCTION llm.reporting_tenant() TO llmgw_reporting;
