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
--                    reporting roles.  No login role has CREATEROLE: on
--                    PostgreSQL 15 it may grant itself any role that is
--                    not a superuser, llmgw_owner included.  Reporting
--                    roles are made by llm.create_reporting_role(), which
--                    runs as the owner, the one role with CREATEROLE.
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


-- accountd's one way into llm.usage, llm.ingest_batch(), is sql/014's:
-- it stores the price each row was costed with.


-- --- operators: llmgw_admin ---------------------------------------------------

GRANT USAGE ON SCHEMA llm TO llmgw_admin;
GRANT SELECT ON ALL TABLES IN SCHEMA llm TO llmgw_admin;
GRANT INSERT, UPDATE ON llm.tenants, llm.api_keys TO llmgw_admin;
GRANT INSERT ON llm.prices TO llmgw_admin;
GRANT INSERT, DELETE ON llm.reporting_roles TO llmgw_admin;
GRANT EXECUTE ON FUNCTION llm.create_reporting_role(text, text)
    TO llmgw_admin;

-- the roles the operators need made, made by the owner for them: a role
-- with CREATEROLE may grant itself the owner
RESET ROLE;
ALTER ROLE llmgw_owner CREATEROLE;
SET LOCAL ROLE llmgw_owner;
ALTER FUNCTION llm.create_reporting_role(text, text)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION llm.reporting_role_login(p_role text, p_password text)
    RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM llm.reporting_roles r WHERE r.role = p_role)
    THEN
        RAISE EXCEPTION 'role "%" is not a reporting role', p_role
              USING ERRCODE = 'insufficient_privilege';
    END IF;

    IF p_password IS NULL THEN
        EXECUTE format('ALTER ROLE %I NOLOGIN PASSWORD NULL', p_role);
    ELSE
        EXECUTE format('ALTER ROLE %I LOGIN PASSWORD %L', p_role,
                       p_password);
    END IF;
END
$$;

COMMENT ON FUNCTION llm.reporting_role_login(text, text) IS
    'Gives a reporting role (of llm.reporting_roles, no other) a login '
    'with that password, or, with NULL, takes it away.';

REVOKE EXECUTE ON FUNCTION llm.reporting_role_login(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm.reporting_role_login(text, text)
    TO llmgw_admin;


-- --- reporting roles: unchanged (sql/004), and the functions they read --------

GRANT EXECUTE ON FUNCTION llm.reporting_tenant() TO llmgw_reporting;
