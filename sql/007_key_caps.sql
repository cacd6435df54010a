-- ngx_llm_gateway: hard spend caps per API key, and unused leases given
-- back.
--
-- A key may have a daily and a monthly cap of its own, in its tenant's
-- time zone.  A lease for a key is taken from the key's caps and from its
-- tenant's at once, under the same row locks: the leases of a key never
-- pass its caps, and those of all the tenant's keys never pass the
-- tenant's.  A gateway that will not spend what it leased gives it back
-- with llm.return_lease(), so that another gateway may lease it.
--
-- Applied once, in a single transaction, by
--     psql -v ON_ERROR_STOP=1 -1 -f sql/007_key_caps.sql


ALTER TABLE llm.api_keys
    ADD COLUMN daily_cap_pusd    bigint NULL
        CONSTRAINT api_keys_daily_cap_nonneg CHECK (daily_cap_pusd >= 0),
    ADD COLUMN monthly_cap_pusd  bigint NULL
        CONSTRAINT api_keys_monthly_cap_nonneg CHECK (monthly_cap_pusd >= 0);

COMMENT ON COLUMN llm.api_keys.daily_cap_pusd IS
    'The most the key may spend in one of its tenant''s days (the '
    'tenant''s time zone), in pico-dollars; NULL for no cap.  The '
    'tenant''s caps apply as well.  Set with "accountd key update ID '
    '--daily-cap-usd 12.50".';
COMMENT ON COLUMN llm.api_keys.monthly_cap_pusd IS
    'The same for its tenant''s calendar month; NULL for no cap.';


-- Key 0 stands for the tenant's own caps, so that one table and one lock
-- order serve both.

ALTER TABLE llm.budget_periods
    ADD COLUMN key_id  bigint NOT NULL DEFAULT 0
        CONSTRAINT budget_periods_key_id_nonneg CHECK (key_id >= 0),
    DROP CONSTRAINT budget_periods_pkey,
    ADD CONSTRAINT budget_periods_pkey
        PRIMARY KEY (tenant_id, key_id, period, start);

COMMENT ON TABLE llm.budget_periods IS
    'Per tenant, key and period (the tenant''s local day or month), what '
    'the gateways have leased of the cap, less what they gave back.  '
    'Written by llm.take_lease() and llm.return_lease() only.';
COMMENT ON COLUMN llm.budget_periods.key_id IS
    '0 for the tenant''s caps, which every lease counts against; else the '
    'key (llm.api_keys.key_id) whose caps these are.';

ALTER TABLE llm.budget_leases
    ADD COLUMN key_id         bigint NOT NULL DEFAULT 0
        CONSTRAINT budget_leases_key_id_nonneg CHECK (key_id >= 0),
    ADD COLUMN returned_pusd  bigint NOT NULL DEFAULT 0
        CONSTRAINT budget_leases_returned_nonneg CHECK (returned_pusd >= 0),
    ADD CONSTRAINT budget_leases_leased_nonneg CHECK (leased_pusd >= 0),
    DROP CONSTRAINT budget_leases_pkey,
    ADD CONSTRAINT budget_leases_pkey
        PRIMARY KEY (tenant_id, key_id, start, gateway);

COMMENT ON TABLE llm.budget_leases IS
    'Per tenant, key, day and gateway, what the gateway has leased and '
    'not given back.';
COMMENT ON COLUMN llm.budget_leases.key_id IS
    '0 for leases of the tenant''s caps alone; else the key they were '
    'taken for.';
COMMENT ON COLUMN llm.budget_leases.leased_pusd IS
    'What the gateway leased this day, less what it gave back.';
COMMENT ON COLUMN llm.budget_leases.returned_pusd IS
    'What the gateway gave back this day (llm.return_lease), unspent.';


-- The tenant of a lease, or an error; and its key's, unless key 0.

CREATE FUNCTION llm.lease_tenant(p_tenant bigint, p_key bigint)
    RETURNS llm.tenants
    LANGUAGE plpgsql STABLE
AS $$
DECLARE
    t  llm.tenants;
BEGIN
    IF p_tenant IS NULL OR p_key IS NULL OR p_key < 0 THEN
        RAISE EXCEPTION 'a lease of tenant % and key %', p_tenant, p_key
              USING ERRCODE = 'invalid_parameter_value';
    END IF;

    SELECT * INTO t FROM llm.tenants WHERE tenant_id = p_tenant;

    IF NOT FOUND THEN
        RAISE EXCEPTION 'no tenant %', p_tenant
              USING ERRCODE = 'foreign_key_violation';
    END IF;

    IF p_key > 0 AND NOT EXISTS (SELECT FROM llm.api_keys
                                  WHERE key_id = p_key
                                    AND tenant_id = p_tenant)
    THEN
        RAISE EXCEPTION 'no key % of tenant %', p_key, p_tenant
              USING ERRCODE = 'foreign_key_violation';
    END IF;

    RETURN t;
END;
$$;

COMMENT ON FUNCTION llm.lease_tenant(bigint, bigint) IS
    'The row of the tenant of a lease, for llm.take_lease() and '
    'llm.return_lease(); an error if there is none, or if the key (0: '
    'none) is not one of its keys.';


/*
 * Locks the period rows of a lease, always in one order, the tenant's day
 * and month, then the key's (p_key > 0), so that concurrent leases and
 * returns never pass a cap nor deadlock; returns what each has leased
 * (NULL: no row).  The locks last until the caller's transaction ends.
 */

CREATE FUNCTION llm.lock_budget(p_tenant bigint, p_key bigint, p_day date,
                                p_month date,
                                OUT td_used bigint, OUT tm_used bigint,
                                OUT kd_used bigint, OUT km_used bigint)
    LANGUAGE plpgsql
AS $$
BEGIN
    SELECT p.leased_pusd INTO td_used FROM llm.budget_periods p
     WHERE p.tenant_id = p_tenant AND p.key_id = 0
       AND p.period = 'day' AND p.start = p_day
       FOR UPDATE;
    SELECT p.leased_pusd INTO tm_used FROM llm.budget_periods p
     WHERE p.tenant_id = p_tenant AND p.key_id = 0
       AND p.period = 'month' AND p.start = p_month
       FOR UPDATE;

    IF p_key > 0 THEN
        SELECT p.leased_pusd INTO kd_used FROM llm.budget_periods p
         WHERE p.tenant_id = p_tenant AND p.key_id = p_key
           AND p.period = 'day' AND p.start = p_day
           FOR UPDATE;
        SELECT p.leased_pusd INTO km_used FROM llm.budget_periods p
         WHERE p.tenant_id = p_tenant AND p.key_id = p_key
           AND p.period = 'month' AND p.start = p_month
           FOR UPDATE;
    END IF;
END;
$$;


/*
 * The soft threshold of a daily cap (the tenant's, key 0, or a key's):
 * once the leases of the day reach soft_cap_pct of it, a NOTIFY
 * llmgw_budget and a log line for operators to hook, once a day.
 * Numeric, as a cap times 100 may not fit a bigint.
 */

CREATE FUNCTION llm.budget_notify(t llm.tenants, p_key bigint, p_day date,
                                  p_leased bigint, p_cap bigint)
    RETURNS void
    LANGUAGE plpgsql
AS $$
BEGIN
    IF p_cap IS NULL OR p_cap = 0
       OR p_leased::numeric * 100 < p_cap::numeric * t.soft_cap_pct
    THEN
        RETURN;
    END IF;

    UPDATE llm.budget_periods p SET notified = true
     WHERE p.tenant_id = t.tenant_id AND p.key_id = p_key
       AND p.period = 'day' AND p.start = p_day AND NOT p.notified;

    IF NOT FOUND THEN
        RETURN;
    END IF;

    PERFORM pg_notify('llmgw_budget',
                      json_build_object('tenant', t.name,
                                        'tenant_id', t.tenant_id,
                                        'key_id', p_key,
                                        'period', 'day',
                                        'start', p_day,
                                        'leased_pusd', p_leased,
                                        'cap_pusd', p_cap)::text);

    IF p_key = 0 THEN
        RAISE LOG 'llmgw: tenant % has leased % percent of its daily cap',
                  t.name, t.soft_cap_pct;
    ELSE
        RAISE LOG 'llmgw: key % of tenant % has leased % percent of its '
                  'daily cap', p_key, t.name, t.soft_cap_pct;
    END IF;
END;
$$;

COMMENT ON FUNCTION llm.budget_notify(llm.tenants, bigint, date, bigint,
                                      bigint) IS
    'For llm.take_lease(): notifies llmgw_budget, and logs, once a day, '
    'when the leases of a daily cap (key 0: the tenant''s) reach the '
    'tenant''s soft_cap_pct of it.';


/*
 * Leases up to p_want pico-dollars to the gateway p_gateway for the
 * periods holding p_at: as much as the tenant's day and month caps leave,
 * and, for a key (p_key > 0), the key's too.  The period rows are locked
 * always in one order, the tenant's day and month, then the key's day and
 * month, so that concurrent leases never pass a cap nor deadlock.
 *
 * lease_until is when the grant stops being spendable: the end of the day
 * if a daily cap applies, else of the month.  Spent on a later day, a
 * budget leased under a monthly cap could pass a daily one.
 */

CREATE FUNCTION llm.take_lease(p_tenant bigint, p_key bigint,
                               p_gateway text, p_want bigint,
                               p_at timestamptz DEFAULT now())
    RETURNS TABLE (granted_pusd bigint, remaining_pusd bigint,
                   resets_at timestamptz, lease_until timestamptz)
    LANGUAGE plpgsql
AS $$
DECLARE
    t         llm.tenants;
    k         llm.api_keys;
    day       date;
    month     date;
    day_end   timestamptz;
    mon_end   timestamptz;
    td_used   bigint;
    tm_used   bigint;
    kd_used   bigint;
    km_used   bigint;
    td_left   bigint;
    tm_left   bigint;
    kd_left   bigint;
    km_left   bigint;
    grant_    bigint;
BEGIN
    IF p_want IS NULL OR p_want < 0 OR p_gateway IS NULL OR p_at IS NULL
    THEN
        RAISE EXCEPTION 'a lease of % pico-dollars to gateway % at %',
                        p_want, p_gateway, p_at
              USING ERRCODE = 'invalid_parameter_value';
    END IF;

    t := llm.lease_tenant(p_tenant, p_key);

    -- for key 0, no row: its caps are NULL, none
    SELECT * INTO k FROM llm.api_keys WHERE key_id = p_key;

    day := llm.budget_start(t.time_zone, 'day', p_at);
    month := llm.budget_start(t.time_zone, 'month', p_at);
    day_end := (day + 1)::timestamp AT TIME ZONE t.time_zone;
    mon_end := (month + interval '1 month')::timestamp AT TIME ZONE t.time_zone;

    -- in the lock order: concurrent first inserts wait in it too
    INSERT INTO llm.budget_periods (tenant_id, key_id, period, start)
    SELECT p_tenant, v.key_id, v.period, v.start
      FROM (VALUES (1, 0::bigint, 'day', day), (2, 0, 'month', month),
                   (3, p_key, 'day', day), (4, p_key, 'month', month))
           AS v (n, key_id, period, start)
     WHERE v.n <= 2 OR p_key > 0
     ORDER BY v.n
    ON CONFLICT DO NOTHING;

    SELECT b.td_used, b.tm_used, b.kd_used, b.km_used
      INTO td_used, tm_used, kd_used, km_used
      FROM llm.lock_budget(p_tenant, p_key, day, month) b;

    -- NULL where there is no cap (greatest() would make it 0)
    td_left := CASE WHEN t.daily_cap_pusd IS NOT NULL
                    THEN greatest(t.daily_cap_pusd - td_used, 0) END;
    tm_left := CASE WHEN t.monthly_cap_pusd IS NOT NULL
                    THEN greatest(t.monthly_cap_pusd - tm_used, 0) END;
    kd_left := CASE WHEN k.daily_cap_pusd IS NOT NULL
                    THEN greatest(k.daily_cap_pusd - kd_used, 0) END;
    km_left := CASE WHEN k.monthly_cap_pusd IS NOT NULL
                    THEN greatest(k.monthly_cap_pusd - km_used, 0) END;

    grant_ := least(p_want, td_left, tm_left, kd_left, km_left);

    IF grant_ > 0 THEN
        UPDATE llm.budget_periods p SET leased_pusd = p.leased_pusd + grant_
         WHERE p.tenant_id = p_tenant AND p.key_id IN (0, p_key)
           AND ((p.period = 'day' AND p.start = day)
                OR (p.period = 'month' AND p.start = month));
    END IF;

    INSERT INTO llm.budget_leases AS l
           (tenant_id, key_id, start, gateway, leased_pusd, leases)
    VALUES (p_tenant, p_key, day, p_gateway, grant_, 1)
    ON CONFLICT (tenant_id, key_id, start, gateway) DO UPDATE
       SET leased_pusd = l.leased_pusd + excluded.leased_pusd,
           leases = l.leases + 1, updated_at = now();

    PERFORM llm.budget_notify(t, 0, day, td_used + grant_, t.daily_cap_pusd);

    IF p_key > 0 THEN
        PERFORM llm.budget_notify(t, p_key, day, kd_used + grant_,
                                  k.daily_cap_pusd);
    END IF;

    granted_pusd := grant_;
    remaining_pusd := least(td_left, tm_left, kd_left, km_left) - grant_;

    -- the binding period is the one with the least left; a tie, the day
    resets_at := CASE WHEN least(tm_left, km_left)
                           < coalesce(least(td_left, kd_left),
                                      9223372036854775807)
                      THEN mon_end ELSE day_end END;

    lease_until := CASE WHEN t.daily_cap_pusd IS NULL
                             AND k.daily_cap_pusd IS NULL
                             AND (t.monthly_cap_pusd IS NOT NULL
                                  OR k.monthly_cap_pusd IS NOT NULL)
                        THEN mon_end ELSE day_end END;

    RETURN NEXT;
END;
$$;

COMMENT ON FUNCTION
    llm.take_lease(bigint, bigint, text, bigint, timestamptz) IS
    'Leases up to p_want pico-dollars of the current day and month caps of '
    'the tenant and, if p_key is not 0, of its key p_key, to a gateway; '
    'returns the grant (0 when a cap is spent), what is left, when the '
    'binding period begins again, and until when the grant may be spent.';


/*
 * 005's call, for the callers that know no keys: a lease of the tenant's
 * caps alone.  Its p_gateway, a text where the other has the key, keeps
 * calls with typed arguments apart; four untyped parameters fit both, so
 * type at least the gateway: llm.take_lease($1, $2::text, $3, $4).
 * Replaced, not dropped: its prepared callers and grants stay valid.
 */

CREATE OR REPLACE FUNCTION llm.take_lease(p_tenant bigint, p_gateway text,
                               p_want bigint, p_at timestamptz DEFAULT now())
    RETURNS TABLE (granted_pusd bigint, remaining_pusd bigint,
                   resets_at timestamptz)
    LANGUAGE sql
AS $$
    SELECT l.granted_pusd, l.remaining_pusd, l.resets_at
      FROM llm.take_lease(p_tenant, 0::bigint, p_gateway, p_want, p_at) l
$$;

COMMENT ON FUNCTION llm.take_lease(bigint, text, bigint, timestamptz) IS
    'Leases up to p_want pico-dollars of the tenant''s current day and '
    'month caps to a gateway (llm.take_lease with key 0); returns the '
    'grant, what is left, and when the binding period begins again.';


/*
 * Gives back up to p_amount pico-dollars that a gateway leased for the
 * tenant and key (0: the tenant alone) and will not spend, to the periods
 * holding p_at: at most what the gateway leased that day, and never so
 * much that a period would have leased less than nothing.  A lease whose
 * p_until (its lease_until) has passed is of a period that is over: there
 * is nothing to give back to.  Returns what was taken back.
 */

CREATE FUNCTION llm.return_lease(p_tenant bigint, p_key bigint,
                                 p_gateway text, p_amount bigint,
                                 p_until timestamptz,
                                 p_at timestamptz DEFAULT now())
    RETURNS bigint
    LANGUAGE plpgsql
AS $$
DECLARE
    t         llm.tenants;
    day       date;
    month     date;
    held      bigint;
    td_used   bigint;
    tm_used   bigint;
    kd_used   bigint;
    km_used   bigint;
    back      bigint;
BEGIN
    IF p_amount IS NULL OR p_amount < 0 OR p_gateway IS NULL
       OR p_until IS NULL OR p_at IS NULL
    THEN
        RAISE EXCEPTION 'a return of % pico-dollars from gateway % at % '
                        'of a lease until %', p_amount, p_gateway, p_at,
                        p_until
              USING ERRCODE = 'invalid_parameter_value';
    END IF;

    t := llm.lease_tenant(p_tenant, p_key);

    IF p_at >= p_until OR p_amount = 0 THEN
        RETURN 0;
    END IF;

    day := llm.budget_start(t.time_zone, 'day', p_at);
    month := llm.budget_start(t.time_zone, 'month', p_at);

    -- take_lease's lock order, its lease row last as it takes it
    SELECT b.td_used, b.tm_used, b.kd_used, b.km_used
      INTO td_used, tm_used, kd_used, km_used
      FROM llm.lock_budget(p_tenant, p_key, day, month) b;

    SELECT l.leased_pusd INTO held FROM llm.budget_leases l
     WHERE l.tenant_id = p_tenant AND l.key_id = p_key
       AND l.start = day AND l.gateway = p_gateway
       FOR UPDATE;

    -- a row that is missing has nothing leased (least() skips NULLs)
    back := least(p_amount, coalesce(held, 0), coalesce(td_used, 0),
                  coalesce(tm_used, 0),
                  CASE WHEN p_key > 0 THEN coalesce(kd_used, 0) END,
                  CASE WHEN p_key > 0 THEN coalesce(km_used, 0) END);

    IF back = 0 THEN
        RETURN 0;
    END IF;

    UPDATE llm.budget_periods p SET leased_pusd = p.leased_pusd - back
     WHERE p.tenant_id = p_tenant AND p.key_id IN (0, p_key)
       AND ((p.period = 'day' AND p.start = day)
            OR (p.period = 'month' AND p.start = month));

    UPDATE llm.budget_leases l
       SET leased_pusd = l.leased_pusd - back,
           returned_pusd = l.returned_pusd + back, updated_at = now()
     WHERE l.tenant_id = p_tenant AND l.key_id = p_key
       AND l.start = day AND l.gateway = p_gateway;

    RETURN back;
END;
$$;

COMMENT ON FUNCTION
    llm.return_lease(bigint, bigint, text, bigint, timestamptz, timestamptz)
    IS
    'Gives back to the current periods up to p_amount pico-dollars that the '
    'gateway leased today for the tenant and key (0: the tenant) and will '
    'not spend; 0 once p_until, the lease''s lease_until, has passed.  '
    'Returns what was taken back.';


-- Today, per tenant: its own caps only, now that keys have theirs.

CREATE OR REPLACE VIEW llm.budget_today WITH (security_invoker = true) AS
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
         ON p.tenant_id = t.tenant_id AND p.key_id = 0 AND p.period = 'day'
        AND p.start = llm.budget_start(t.time_zone, 'day', now());


-- And per key with a cap of its own.

CREATE VIEW llm.key_budget_today WITH (security_invoker = true) AS
SELECT k.key_id, k.display_prefix AS prefix, t.tenant_id, t.name AS tenant,
       t.time_zone, llm.budget_start(t.time_zone, 'day', now()) AS day,
       k.daily_cap_pusd * 0.000000000001 AS daily_cap_usd,
       k.monthly_cap_pusd * 0.000000000001 AS monthly_cap_usd,
       coalesce(p.leased_pusd, 0) * 0.000000000001 AS leased_usd,
       coalesce((SELECT sum(u.cost_pusd) FROM llm.usage u
                  WHERE u.tenant_id = k.tenant_id AND u.key_id = k.key_id
                    AND u.ts >= llm.budget_start(t.time_zone, 'day', now())
                                ::timestamp AT TIME ZONE t.time_zone),
                0) * 0.000000000001 AS spent_usd
  FROM llm.api_keys k
  JOIN llm.tenants t ON t.tenant_id = k.tenant_id
  LEFT JOIN llm.budget_periods p
         ON p.tenant_id = k.tenant_id AND p.key_id = k.key_id
        AND p.period = 'day'
        AND p.start = llm.budget_start(t.time_zone, 'day', now())
 WHERE k.daily_cap_pusd IS NOT NULL OR k.monthly_cap_pusd IS NOT NULL;

COMMENT ON VIEW llm.key_budget_today IS
    'Each capped key''s day so far, in its tenant''s time zone: its caps, '
    'what the gateways leased of its daily cap, and what was spent with it '
    '(the cost of its rows).';
