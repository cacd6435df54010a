-- ngx_llm_gateway: hard spend caps per tenant, and the leases through
-- which gateways spend them.
--
-- A cap is a budget for a tenant's day (and optionally month), in its own
-- time zone.  A gateway never spends what it has not leased, and leases
-- are taken here with a conditional update under a row lock: the leases of
-- all gateways together never pass the cap, so neither does their spend.
--
-- Applied once, in a single transaction, by
--     psql -v ON_ERROR_STOP=1 -1 -f sql/005_caps.sql


-- A time zone PostgreSQL knows, such as 'UTC' or 'Europe/Paris'.

CREATE FUNCTION llm.time_zone_valid(tz text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
BEGIN
    PERFORM timestamptz '2000-01-01 00:00+00' AT TIME ZONE tz;
    RETURN true;
EXCEPTION WHEN invalid_parameter_value THEN
    RETURN false;
END;
$$;


-- Dollars as written ('12.50') to pico-dollars, exactly, or an error.

CREATE FUNCTION llm.usd_to_pusd(amount text) RETURNS bigint
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    v  numeric;
BEGIN
    IF amount !~ '^[0-9]{1,7}(\.[0-9]{1,12})?$' THEN
        RAISE EXCEPTION 'invalid amount "%": dollars, at most 7 digits '
                        'and 12 decimals', amount
              USING ERRCODE = 'invalid_parameter_value';
    END IF;

    v := amount::numeric * 1000000000000;

    RETURN v::bigint;
END;
$$;

COMMENT ON FUNCTION llm.usd_to_pusd(text) IS
    'An amount of dollars as text, such as 12.50, in pico-dollars (10^-12 '
    '$), exactly: 0 to 9,999,999.999999999999.';


ALTER TABLE llm.tenants
    ADD COLUMN daily_cap_pusd    bigint NULL
        CONSTRAINT tenants_daily_cap_nonneg CHECK (daily_cap_pusd >= 0),
    ADD COLUMN monthly_cap_pusd  bigint NULL
        CONSTRAINT tenants_monthly_cap_nonneg CHECK (monthly_cap_pusd >= 0),
    ADD COLUMN time_zone         text NOT NULL DEFAULT 'UTC'
        CONSTRAINT tenants_time_zone_valid CHECK (llm.time_zone_valid(time_zone)),
    ADD COLUMN soft_cap_pct      int NOT NULL DEFAULT 80
        CONSTRAINT tenants_soft_cap_pct_valid
        CHECK (soft_cap_pct BETWEEN 1 AND 100);

COMMENT ON COLUMN llm.tenants.daily_cap_pusd IS
    'The most the tenant may spend in one of its days, in pico-dollars; '
    'NULL for no cap.  Set with "accountd tenant update --name N '
    '--daily-cap-usd 12.50".';
COMMENT ON COLUMN llm.tenants.monthly_cap_pusd IS
    'The same for its calendar month; NULL for no cap.';
COMMENT ON COLUMN llm.tenants.time_zone IS
    'Where the tenant''s days and months begin: UTC unless set.';
COMMENT ON COLUMN llm.tenants.soft_cap_pct IS
    'When leases reach this share of a cap, PostgreSQL notifies '
    'llmgw_budget and logs it, once a period.';


-- What has been leased of each period's cap, all gateways together.

CREATE TABLE llm.budget_periods (
    tenant_id     bigint NOT NULL REFERENCES llm.tenants (tenant_id),
    period        text NOT NULL
                  CONSTRAINT budget_periods_period_valid
                  CHECK (period IN ('day', 'month')),
    start         date NOT NULL,
    leased_pusd   bigint NOT NULL DEFAULT 0
                  CONSTRAINT budget_periods_leased_nonneg
                  CHECK (leased_pusd >= 0),
    notified      boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, period, start)
);

COMMENT ON TABLE llm.budget_periods IS
    'Per tenant and period (its local day or month), what the gateways '
    'have leased of its cap.  Written by llm.take_lease() only.';


-- And what each gateway holds.

CREATE TABLE llm.budget_leases (
    tenant_id     bigint NOT NULL REFERENCES llm.tenants (tenant_id),
    start         date NOT NULL,
    gateway       text NOT NULL,
    leased_pusd   bigint NOT NULL DEFAULT 0,
    leases        int NOT NULL DEFAULT 0,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, start, gateway)
);

COMMENT ON TABLE llm.budget_leases IS
    'Per tenant, day and gateway, what the gateway has leased.';


-- The tenant's period that holds a time: its local day or month.

CREATE FUNCTION llm.budget_start(p_tz text, p_period text, p_at timestamptz)
    RETURNS date
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
AS $$
    SELECT CASE p_period
           WHEN 'day' THEN (p_at AT TIME ZONE p_tz)::date
           ELSE date_trunc('month', p_at AT TIME ZONE p_tz)::date END
$$;


/*
 * Leases up to p_want pico-dollars of a tenant's budget for the period
 * holding p_at, to the gateway p_gateway: as much as its day and month
 * caps leave, all of it if it has none.  The periods' rows are locked, so
 * that concurrent leases, from any number of gateways, never pass a cap.
 * Returns what was granted, what is left after it (NULL: no cap), and
 * when the day (or the month, if that is what binds) begins again.
 */

CREATE FUNCTION llm.take_lease(p_tenant bigint, p_gateway text,
                               p_want bigint, p_at timestamptz DEFAULT now())
    RETURNS TABLE (granted_pusd bigint, remaining_pusd bigint,
                   resets_at timestamptz)
    LANGUAGE plpgsql
AS $$
DECLARE
    t         llm.tenants;
    day       date;
    month     date;
    day_used  bigint;
    mon_used  bigint;
    day_left  bigint;
    mon_left  bigint;
    grant_    bigint;
    left_     bigint;
    binds     text;
BEGIN
    IF p_want < 0 THEN
        RAISE EXCEPTION 'a lease of % pico-dollars', p_want
              USING ERRCODE = 'invalid_parameter_value';
    END IF;

    SELECT * INTO t FROM llm.tenants WHERE tenant_id = p_tenant;

    IF NOT FOUND THEN
        RAISE EXCEPTION 'no tenant %', p_tenant
              USING ERRCODE = 'foreign_key_violation';
    END IF;

    day := llm.budget_start(t.time_zone, 'day', p_at);
    month := llm.budget_start(t.time_zone, 'month', p_at);

    INSERT INTO llm.budget_periods (tenant_id, period, start)
    VALUES (p_tenant, 'day', day), (p_tenant, 'month', month)
    ON CONFLICT DO NOTHING;

    -- the conditional part: one lease at a time per tenant
    SELECT leased_pusd INTO day_used FROM llm.budget_periods
     WHERE tenant_id = p_tenant AND period = 'day' AND start = day
       FOR UPDATE;
    SELECT leased_pusd INTO mon_used FROM llm.budget_periods
     WHERE tenant_id = p_tenant AND period = 'month' AND start = month
       FOR UPDATE;

    -- NULL where there is no cap (greatest() would make it 0)
    day_left := CASE WHEN t.daily_cap_pusd IS NOT NULL
                     THEN greatest(t.daily_cap_pusd - day_used, 0) END;
    mon_left := CASE WHEN t.monthly_cap_pusd IS NOT NULL
                     THEN greatest(t.monthly_cap_pusd - mon_used, 0) END;

    grant_ := least(p_want, day_left, mon_left);   -- NULLs are ignored
    left_ := least(day_left, mon_left) - grant_;
    binds := CASE WHEN mon_left IS NOT NULL
                       AND (day_left IS NULL OR mon_left < day_left)
                  THEN 'month' ELSE 'day' END;

    UPDATE llm.budget_periods SET leased_pusd = leased_pusd + grant_
     WHERE tenant_id = p_tenant
       AND ((period = 'day' AND start = day)
            OR (period = 'month' AND start = month));

    INSERT INTO llm.budget_leases AS l
           (tenant_id, start, gateway, leased_pusd, leases)
    VALUES (p_tenant, day, p_gateway, grant_, 1)
    ON CONFLICT (tenant_id, start, gateway) DO UPDATE
       SET leased_pusd = l.leased_pusd + excluded.leased_pusd,
           leases = l.leases + 1, updated_at = now();

    -- the soft threshold, once a period: for operators to hook
    IF t.daily_cap_pusd > 0
       AND (day_used + grant_) * 100 >= t.daily_cap_pusd * t.soft_cap_pct
    THEN
        UPDATE llm.budget_periods SET notified = true
         WHERE tenant_id = p_tenant AND period = 'day' AND start = day
           AND NOT notified;

        IF FOUND THEN
            PERFORM pg_notify('llmgw_budget',
                              json_build_object('tenant', t.name,
                                                'tenant_id', p_tenant,
                                                'period', 'day',
                                                'start', day,
                                                'leased_pusd',
                                                day_used + grant_,
                                                'cap_pusd',
                                                t.daily_cap_pusd)::text);
            RAISE LOG 'llmgw: tenant % has leased % percent of its daily '
                      'cap', t.name, t.soft_cap_pct;
        END IF;
    END IF;

    granted_pusd := grant_;
    remaining_pusd := left_;
    resets_at := CASE binds
                 WHEN 'month' THEN ((month + interval '1 month')::timestamp
                                    AT TIME ZONE t.time_zone)
                 ELSE ((day + 1)::timestamp AT TIME ZONE t.time_zone) END;

    RETURN NEXT;
END;
$$;

COMMENT ON FUNCTION llm.take_lease(bigint, text, bigint, timestamptz) IS
    'Leases up to p_want pico-dollars of the tenant''s current day and '
    'month caps to a gateway; returns the grant (0 when a cap is spent), '
    'what is left, and when the binding period begins again.';


-- Today, per tenant: the cap, what is leased, what was spent.

CREATE VIEW llm.budget_today WITH (security_invoker = true) AS
SELECT t.tenant_id, t.name AS tenant, t.time_zone,
       llm.budget_start(t.time_zone, 'day', now()) AS day,
       t.daily_cap_pusd * 0.000000000001 AS daily_cap_usd,
       coalesce(p.leased_pusd, 0) * 0.000000000001 AS leased_usd,
       coalesce((SELECT sum(u.cost_pusd) FROM llm.usage u
                  WHERE u.tenant_id = t.tenant_id
                    AND u.ts >= llm.budget_start(t.time_zone, 'day', now())
                                ::timestamp AT TIME ZONE t.time_zone),
                0) * 0.000000000001 AS spent_usd
  FROM llm.tenants t
  LEFT JOIN llm.budget_periods p
         ON p.tenant_id = t.tenant_id AND p.period = 'day'
        AND p.start = llm.budget_start(t.time_zone, 'day', now());

COMMENT ON VIEW llm.budget_today IS
    'Each tenant''s day so far, in its time zone: its cap, what the '
    'gateways leased of it, and what was spent (the cost of its rows).';
