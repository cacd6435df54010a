-- ngx_llm_gateway: periods and invoices.  A tenant's period is its
-- calendar month in its time zone (llm.tenants.time_zone), the month its
-- monthly cap counts (sql/005).  A period closes, after a grace time for
-- late records, by llm.close_period(), which writes its invoice: a stable
-- id, lines by model, price and token class, each rounded once to the
-- cent, the total the sum of the rounded lines.  An invoice never changes.
-- What arrives for a closed period (a late record, a repricing, a credit)
-- bills on the next open one, as an adjustment (sql/014).
--
-- Rounding: a line's exact amount in pico-dollars is rounded to the cent
-- (1e10 p$) half away from zero: 0.5 cent up for a charge, down for a
-- credit.  The total is the sum of the rounded lines; no other rounding.
--
-- Applied once, in a single transaction, by a superuser:
--     psql -v ON_ERROR_STOP=1 -1 -f sql/015_periods.sql

SET LOCAL ROLE llmgw_owner;


-- --- invoices -----------------------------------------------------------------

CREATE TABLE llm.invoices (
    invoice_id         text PRIMARY KEY,
    tenant_id          bigint NOT NULL REFERENCES llm.tenants (tenant_id),
    tenant             text NOT NULL,
    period_start       date NOT NULL
                       CONSTRAINT invoices_period_start_month
                       CHECK (period_start = date_trunc('month', period_start)),
    time_zone          text NOT NULL,
    starts_at          timestamptz NOT NULL,
    ends_at            timestamptz NOT NULL,
    currency           text NOT NULL DEFAULT 'USD',
    total_minor        bigint NOT NULL,
    total_pusd         numeric NOT NULL,
    requests           bigint NOT NULL,
    unpriced_requests  bigint NOT NULL,
    closed_at          timestamptz NOT NULL DEFAULT now(),
    closed_by          name NOT NULL DEFAULT session_user,
    CONSTRAINT invoices_tenant_period UNIQUE (tenant_id, period_start),
    CONSTRAINT invoices_bounds CHECK (starts_at < ends_at)
);

COMMENT ON TABLE llm.invoices IS
    'A closed period of a tenant, one row, never changed: written with its '
    'lines by llm.close_period().';
COMMENT ON COLUMN llm.invoices.invoice_id IS
    'Stable id: INV-<tenant_id>-<YYYYMM>.';
COMMENT ON COLUMN llm.invoices.tenant IS
    'The tenant''s name when the period closed.';
COMMENT ON COLUMN llm.invoices.period_start IS
    'The first day of the month, in the tenant''s time zone.';
COMMENT ON COLUMN llm.invoices.starts_at IS
    'The period''s first instant: usage with starts_at <= ts < ends_at is '
    'on this invoice.';
COMMENT ON COLUMN llm.invoices.total_minor IS
    'The total in cents: the sum of the lines'' amount_minor.';
COMMENT ON COLUMN llm.invoices.total_pusd IS
    'The sum of the lines'' exact amounts, in p$, unrounded, for '
    'reference: the bill is total_minor.';
COMMENT ON COLUMN llm.invoices.unpriced_requests IS
    'Requests of the period that had no price (lines of kind unpriced).';

CREATE TABLE llm.invoice_lines (
    invoice_id           text NOT NULL REFERENCES llm.invoices (invoice_id),
    line_no              int NOT NULL,
    kind                 text NOT NULL
                         CONSTRAINT invoice_lines_kind_valid
                         CHECK (kind IN ('usage', 'unpriced', 'adjustment')),
    model                text,
    token_class          text
                         CONSTRAINT invoice_lines_token_class_valid
                         CHECK (token_class IN ('input', 'cached_input',
                                                'cache_write', 'output')),
    adjustment_kind      text,
    price_id             bigint,
    unit_price_per_mtok  bigint,
    quantity             numeric NOT NULL,
    requests             bigint NOT NULL,
    estimated            bigint NOT NULL,
    partial              bigint NOT NULL,
    anomalous            bigint NOT NULL,
    amount_pusd          numeric NOT NULL,
    amount_minor         bigint NOT NULL,
    PRIMARY KEY (invoice_id, line_no)
);

COMMENT ON TABLE llm.invoice_lines IS
    'The lines of a closed invoice, never changed.  kind usage: a model''s '
    'tokens of one class at one price (quantity tokens at '
    'unit_price_per_mtok µ$ a million); unpriced: a model''s requests that '
    'had no price (quantity their tokens, amount 0); adjustment: the '
    'adjustments of one kind and model (quantity their number).';
COMMENT ON COLUMN llm.invoice_lines.requests IS
    'The requests the line''s figures come from (for usage, repeated on '
    'each token class of the model and price).';
COMMENT ON COLUMN llm.invoice_lines.estimated IS
    'Of requests, how many were estimated by the gateway (no usage came).';
COMMENT ON COLUMN llm.invoice_lines.partial IS
    'Of requests, how many ended early (client gone, upstream failed).';
COMMENT ON COLUMN llm.invoice_lines.anomalous IS
    'Of requests, how many had a usage figure clamped, repeated or too '
    'large to read (flags 4, 8, 16).';
COMMENT ON COLUMN llm.invoice_lines.amount_pusd IS
    'The exact amount, in p$.';
COMMENT ON COLUMN llm.invoice_lines.amount_minor IS
    'amount_pusd rounded once to the cent, half away from zero: what is '
    'billed.';

CREATE TRIGGER invoices_append_only
    BEFORE UPDATE OR DELETE ON llm.invoices
    FOR EACH ROW EXECUTE FUNCTION llm.append_only();
CREATE TRIGGER invoices_append_only_truncate
    BEFORE TRUNCATE ON llm.invoices
    FOR EACH STATEMENT EXECUTE FUNCTION llm.append_only();
CREATE TRIGGER invoice_lines_append_only
    BEFORE UPDATE OR DELETE ON llm.invoice_lines
    FOR EACH ROW EXECUTE FUNCTION llm.append_only();
CREATE TRIGGER invoice_lines_append_only_truncate
    BEFORE TRUNCATE ON llm.invoice_lines
    FOR EACH STATEMENT EXECUTE FUNCTION llm.append_only();


-- --- a tenant's periods ---------------------------------------------------------

-- Its last closed period's end: what has an earlier ts is on an invoice.

CREATE FUNCTION llm.closed_until(p_tenant bigint) RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT max(i.ends_at) FROM llm.invoices i WHERE i.tenant_id = p_tenant
$$;

-- The month (its first day, in the tenant's time zone) of the first
-- period not closed.  Periods close in order, from the month of the
-- tenant's first row or of its creation.

CREATE FUNCTION llm.open_period(p_tenant bigint) RETURNS date
    LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce(
        (SELECT (max(i.period_start) + interval '1 month')::date
           FROM llm.invoices i WHERE i.tenant_id = p_tenant),
        (SELECT llm.budget_start(t.time_zone, 'month',
                                 least(t.created_at,
                                       (SELECT min(u.ts) FROM llm.usage u
                                         WHERE u.tenant_id = p_tenant)))
           FROM llm.tenants t WHERE t.tenant_id = p_tenant))
$$;

-- The bounds of a period: from the end of the one before it, if closed,
-- or the month's first instant in the tenant's time zone, to the next
-- month's first instant there.

CREATE FUNCTION llm.period_starts_at(p_tenant bigint, p_month date)
    RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce(
        (SELECT i.starts_at FROM llm.invoices i
          WHERE i.tenant_id = p_tenant
            AND i.period_start = date_trunc('month', p_month)),
        (SELECT i.ends_at FROM llm.invoices i
          WHERE i.tenant_id = p_tenant
            AND i.period_start = date_trunc('month', p_month)
                                 - interval '1 month'),
        (SELECT date_trunc('month', p_month)::timestamp
                AT TIME ZONE t.time_zone
           FROM llm.tenants t WHERE t.tenant_id = p_tenant))
$$;

CREATE FUNCTION llm.period_ends_at(p_tenant bigint, p_month date)
    RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce(
        (SELECT i.ends_at FROM llm.invoices i
          WHERE i.tenant_id = p_tenant
            AND i.period_start = date_trunc('month', p_month)),
        (SELECT (date_trunc('month', p_month) + interval '1 month')::timestamp
                AT TIME ZONE t.time_zone
           FROM llm.tenants t WHERE t.tenant_id = p_tenant))
$$;

-- The period an adjustment of a thing at ts bills on: its own, or the
-- first open one if that is closed.

CREATE FUNCTION llm.billing_period(p_tenant bigint, p_ts timestamptz)
    RETURNS date
    LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN p_ts < llm.closed_until(p_tenant)
                THEN llm.open_period(p_tenant)
                ELSE (SELECT llm.budget_start(t.time_zone, 'month', p_ts)
                        FROM llm.tenants t WHERE t.tenant_id = p_tenant) END
$$;

COMMENT ON FUNCTION llm.closed_until(bigint) IS
    'The end of the tenant''s last closed period (NULL: none).';
COMMENT ON FUNCTION llm.open_period(bigint) IS
    'The first day of the tenant''s first period not closed.';
COMMENT ON FUNCTION llm.period_starts_at(bigint, date) IS
    'The first instant of the tenant''s period of that month.';
COMMENT ON FUNCTION llm.period_ends_at(bigint, date) IS
    'The instant after the tenant''s period of that month.';
COMMENT ON FUNCTION llm.billing_period(bigint, timestamptz) IS
    'The period a correction of something at ts bills on: that of ts, or '
    'the first open one if that is closed.';


-- A tenant has one billing time zone: its closed periods were cut by it.

CREATE FUNCTION llm.tenants_time_zone_check() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT FROM llm.invoices i WHERE i.tenant_id = NEW.tenant_id)
    THEN
        RAISE EXCEPTION 'tenant "%" has closed periods in time zone %: its '
                        'time zone stays', OLD.name, OLD.time_zone
              USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;

    RETURN NEW;
END
$$;

CREATE TRIGGER tenants_time_zone
    BEFORE UPDATE OF time_zone ON llm.tenants
    FOR EACH ROW WHEN (OLD.time_zone IS DISTINCT FROM NEW.time_zone)
    EXECUTE FUNCTION llm.tenants_time_zone_check();

COMMENT ON COLUMN llm.tenants.time_zone IS
    'Where the tenant''s days and months begin, for its caps and its '
    'invoices alike: UTC unless set; fixed once a period has closed.';


-- --- what arrives for a closed period ------------------------------------------

-- A usage row of a closed period is on no invoice: it bills on the first
-- open one, as an adjustment of kind late_usage.  After the tenants are
-- locked (usage_tenants_insert): a period closing meanwhile has either
-- committed, and is seen here, or waits for this transaction, and sees
-- the row.

CREATE FUNCTION llm.usage_late_check() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('llmgw.moving_rows', true) = 'on' THEN
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

COMMENT ON FUNCTION llm.usage_late_check() IS
    'Bills a usage row that arrives for a closed period on the first open '
    'one (an adjustment of kind late_usage).';

CREATE TRIGGER usage_tenants_late
    AFTER INSERT ON llm.usage
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION llm.usage_late_check();


-- --- a period's lines ------------------------------------------------------------

/*
 * The lines of a tenant's period, as its invoice has them: stored if it
 * is closed, else what they would be now.  One SELECT of plain SQL, so
 * that PostgreSQL inlines it and prunes llm.usage to the partitions of
 * the period (the bounds are stable: known when the plan starts).  As
 * the caller: a reporting role sees its own tenant's only.
 */

CREATE FUNCTION llm.period_lines(p_tenant bigint, p_month date)
    RETURNS TABLE (line_no int, kind text, model text, token_class text,
                   adjustment_kind text, price_id bigint,
                   unit_price_per_mtok bigint, quantity numeric,
                   requests bigint, estimated bigint, partial bigint,
                   anomalous bigint, amount_pusd numeric, amount_minor bigint)
    LANGUAGE sql STABLE
AS $$
    WITH u AS (
        SELECT u.model, u.price_id, u.cost_pusd, u.flags,
               coalesce(u.input_tokens, 0) AS input_tokens,
               coalesce(u.cached_input_tokens, 0) AS cached_input_tokens,
               coalesce(u.cache_write_tokens, 0) AS cache_write_tokens,
               coalesce(u.output_tokens, 0) AS output_tokens
          FROM llm.usage u
         WHERE u.tenant_id = p_tenant
           AND u.ts >= llm.period_starts_at(p_tenant, p_month)
           AND u.ts < llm.period_ends_at(p_tenant, p_month)
           AND NOT EXISTS (SELECT FROM llm.invoices i
                            WHERE i.tenant_id = p_tenant
                              AND i.period_start
                                  = date_trunc('month', p_month))
    ), g AS (
        SELECT u.model, u.price_id, u.cost_pusd IS NULL AS unpriced,
               count(*) AS requests,
               count(*) FILTER (WHERE u.flags & 1 <> 0) AS estimated,
               count(*) FILTER (WHERE u.flags & 2 <> 0) AS partial,
               count(*) FILTER (WHERE u.flags & 28 <> 0) AS anomalous,
               sum(greatest(u.input_tokens::numeric - u.cached_input_tokens
                            - u.cache_write_tokens, 0)) AS input_q,
               sum(u.cached_input_tokens::numeric) AS cached_q,
               sum(u.cache_write_tokens::numeric) AS write_q,
               sum(u.output_tokens::numeric) AS output_q
          FROM u
         GROUP BY u.model, u.price_id, u.cost_pusd IS NULL
    ), l AS (
        SELECT 1 AS ord, c.class_no AS cls, 'usage' AS kind, g.model,
               c.token_class,
               NULL::text AS adjustment_kind, g.price_id, c.unit, c.q,
               g.requests, g.estimated, g.partial, g.anomalous,
               c.q * c.unit AS amount
          FROM g
          JOIN llm.prices p ON p.price_id = g.price_id
          CROSS JOIN LATERAL (VALUES
              (1, 'input', p.input_per_mtok, g.input_q),
              (2, 'cached_input', p.cached_input_per_mtok, g.cached_q),
              (3, 'cache_write', p.cache_write_per_mtok, g.write_q),
              (4, 'output', p.output_per_mtok, g.output_q))
              AS c (class_no, token_class, unit, q)
         WHERE NOT g.unpriced AND (c.q <> 0 OR c.class_no = 4)
        UNION ALL
        SELECT 2, 0, 'unpriced', g.model, NULL, NULL, NULL, NULL,
               sum(g.input_q + g.cached_q + g.write_q + g.output_q),
               sum(g.requests), sum(g.estimated), sum(g.partial),
               sum(g.anomalous), 0
          FROM g
         WHERE g.unpriced
         GROUP BY g.model
        UNION ALL
        SELECT 3, 0, 'adjustment', a.model, NULL, a.kind, NULL, NULL,
               count(*), count(a.request_id), 0, 0, 0,
               sum(a.amount_pusd)
          FROM llm.adjustments a
         WHERE a.tenant_id = p_tenant
           AND a.period_start = date_trunc('month', p_month)
           AND NOT EXISTS (SELECT FROM llm.invoices i
                            WHERE i.tenant_id = p_tenant
                              AND i.period_start
                                  = date_trunc('month', p_month))
         GROUP BY a.model, a.kind
    ), live AS (
        SELECT (row_number() OVER (ORDER BY l.ord, l.model, l.price_id,
                                  l.cls, l.adjustment_kind))::int,
               l.kind, l.model, l.token_class, l.adjustment_kind,
               l.price_id, l.unit, l.q, l.requests, l.estimated,
               l.partial, l.anomalous, l.amount,
               (sign(l.amount)
                * div(abs(l.amount) + 5000000000, 10000000000))::bigint
          FROM l
    )
    SELECT * FROM live
    UNION ALL
    SELECT s.line_no, s.kind, s.model, s.token_class, s.adjustment_kind,
           s.price_id, s.unit_price_per_mtok, s.quantity, s.requests,
           s.estimated, s.partial, s.anomalous, s.amount_pusd,
           s.amount_minor
      FROM llm.invoices i
      JOIN llm.invoice_lines s ON s.invoice_id = i.invoice_id
     WHERE i.tenant_id = p_tenant
       AND i.period_start = date_trunc('month', p_month)
$$;

COMMENT ON FUNCTION llm.period_lines(bigint, date) IS
    'The invoice lines of the tenant''s period holding that month: those '
    'of its invoice if closed, else as they are so far (month to date).  '
    'Reads only the partitions of the period.';


-- A month's revenue by model and day (UTC), all tenants: the cost of the
-- priced rows, and how many had none.

CREATE FUNCTION llm.revenue_by_model_day(p_month date)
    RETURNS TABLE (day date, model text, requests bigint, cost_pusd numeric,
                   cost_usd numeric, unpriced bigint, estimated bigint,
                   partial bigint, anomalous bigint)
    LANGUAGE sql STABLE
AS $$
    SELECT (u.ts AT TIME ZONE 'UTC')::date, u.model, count(*),
           sum(u.cost_pusd), sum(u.cost_pusd) * 0.000000000001,
           count(*) FILTER (WHERE u.cost_pusd IS NULL),
           count(*) FILTER (WHERE u.flags & 1 <> 0),
           count(*) FILTER (WHERE u.flags & 2 <> 0),
           count(*) FILTER (WHERE u.flags & 28 <> 0)
      FROM llm.usage u
     WHERE u.ts >= date_trunc('month', p_month)::timestamp AT TIME ZONE 'UTC'
       AND u.ts < (date_trunc('month', p_month) + interval '1 month')
                  ::timestamp AT TIME ZONE 'UTC'
     GROUP BY 1, 2
$$;

COMMENT ON FUNCTION llm.revenue_by_model_day(date) IS
    'The usage of the month (UTC) holding p_month by day and model: '
    'requests, cost (p$ and $) of the priced, and counts of the unpriced, '
    'estimated, partial and anomalous.  Reads only that month''s '
    'partition.';


-- --- closing ---------------------------------------------------------------------

/*
 * Closes the tenant's periods up to the one of p_month, in order, each
 * once it has been over for p_grace (late records within it still
 * count); returns the invoice of p_month's.  Closing a closed period
 * returns its invoice, nothing else.  The tenant's row is locked first:
 * its inserts (usage_tenants_insert) wait, and those already made are
 * committed before the lines are read, so that every row is on this
 * invoice or, arriving after, a late_usage adjustment on the next.
 */

CREATE FUNCTION llm.close_period(p_tenant bigint, p_month date,
                                 p_grace interval DEFAULT '3 days',
                                 p_at timestamptz DEFAULT now())
    RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t      llm.tenants;
    m      date := date_trunc('month', p_month)::date;
    open_  date;
    id     text;
    lo     timestamptz;
    hi     timestamptz;
BEGIN
    -- against reprices and adjustments choosing their period meanwhile;
    -- first, as they take it before the tenant's row (their foreign key)
    LOCK TABLE llm.invoices IN SHARE ROW EXCLUSIVE MODE;

    SELECT * INTO t FROM llm.tenants WHERE tenant_id = p_tenant FOR UPDATE;

    IF NOT FOUND THEN
        RAISE EXCEPTION 'no tenant %', p_tenant
              USING ERRCODE = 'no_data_found';
    END IF;

    SELECT i.invoice_id INTO id FROM llm.invoices i
     WHERE i.tenant_id = p_tenant AND i.period_start = m;

    IF FOUND THEN
        RETURN id;
    END IF;

    LOOP
        open_ := llm.open_period(p_tenant);

        IF open_ > m THEN
            RAISE EXCEPTION 'tenant "%" has no period %', t.name, m
                  USING ERRCODE = 'invalid_parameter_value',
                        HINT = 'Its first period is that of its first row.';
        END IF;

        lo := llm.period_starts_at(p_tenant, open_);
        hi := llm.period_ends_at(p_tenant, open_);

        IF hi + p_grace > p_at THEN
            RAISE EXCEPTION 'the period % of tenant "%" ends at %, and '
                            'closes % later', open_, t.name, hi, p_grace
                  USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;

        id := format('INV-%s-%s', p_tenant, to_char(open_, 'YYYYMM'));

        CREATE TEMP TABLE llmgw_lines ON COMMIT DROP AS
            SELECT * FROM llm.period_lines(p_tenant, open_);

        INSERT INTO llm.invoices (invoice_id, tenant_id, tenant, period_start,
                                  time_zone, starts_at, ends_at, total_minor,
                                  total_pusd, requests, unpriced_requests)
        SELECT id, p_tenant, t.name, open_, t.time_zone, lo, hi,
               coalesce(sum(l.amount_minor), 0),
               coalesce(sum(l.amount_pusd), 0),
               coalesce((SELECT count(*) FROM llm.usage u
                          WHERE u.tenant_id = p_tenant
                            AND u.ts >= lo AND u.ts < hi), 0),
               coalesce(sum(l.requests) FILTER (WHERE l.kind = 'unpriced'),
                        0)
          FROM pg_temp.llmgw_lines l;

        INSERT INTO llm.invoice_lines (invoice_id, line_no, kind, model,
                                       token_class, adjustment_kind,
                                       price_id, unit_price_per_mtok,
                                       quantity, requests, estimated,
                                       partial, anomalous, amount_pusd,
                                       amount_minor)
        SELECT id, l.line_no, l.kind, l.model, l.token_class,
               l.adjustment_kind, l.price_id, l.unit_price_per_mtok,
               l.quantity, l.requests, l.estimated, l.partial, l.anomalous,
               l.amount_pusd, l.amount_minor
          FROM pg_temp.llmgw_lines l;

        DROP TABLE pg_temp.llmgw_lines;

        RAISE LOG 'llmgw: period % of tenant % closed: invoice %', open_,
                  t.name, id;

        EXIT WHEN open_ = m;
    END LOOP;

    RETURN id;
END
$$;

COMMENT ON FUNCTION llm.close_period(bigint, date, interval, timestamptz) IS
    'Closes the tenant''s periods up to that of p_month, in order, each '
    'p_grace after it ended, writing their invoices; returns the invoice '
    'id of p_month''s.  Again: nothing, the id.';


/*
 * Every tenant's periods (or one tenant's) that ended p_grace ago or
 * more: what a daily job runs ("accountd period close").  Returns the
 * invoices written.
 */

CREATE FUNCTION llm.close_periods(p_grace interval DEFAULT '3 days',
                                  p_at timestamptz DEFAULT now(),
                                  p_tenant bigint DEFAULT NULL)
    RETURNS SETOF text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t     record;
    m     date;
BEGIN
    FOR t IN SELECT tenant_id FROM llm.tenants
              WHERE p_tenant IS NULL OR tenant_id = p_tenant
              ORDER BY tenant_id
    LOOP
        LOOP
            m := llm.open_period(t.tenant_id);
            EXIT WHEN m IS NULL
                   OR llm.period_ends_at(t.tenant_id, m) + p_grace > p_at;
            RETURN NEXT llm.close_period(t.tenant_id, m, p_grace, p_at);
        END LOOP;
    END LOOP;
END
$$;

COMMENT ON FUNCTION llm.close_periods(interval, timestamptz, bigint) IS
    'Closes every period of every tenant (or of p_tenant) that ended '
    'p_grace before p_at; returns the invoice ids written.';


-- --- corrections -----------------------------------------------------------------

-- sql/004's function rewrote costs in place.  Now: a row whose price
-- (with its reprices) is no longer the one effective at its ts gets an
-- adjustment of the difference, on its period or the first open one.

DROP FUNCTION llm.reprice_usage(timestamptz, timestamptz);

CREATE FUNCTION llm.reprice_usage(from_ts timestamptz, to_ts timestamptz,
                                  reason text DEFAULT
                                      'a price entered after the row was '
                                      'costed')
    RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n  bigint;
BEGIN
    LOCK TABLE llm.invoices IN SHARE ROW EXCLUSIVE MODE;

    INSERT INTO llm.adjustments (tenant_id, period_start, kind, model,
                                 request_id, ts, price_id,
                                 previous_price_id, amount_pusd, reason)
    SELECT c.tenant_id, llm.billing_period(c.tenant_id, c.ts), 'reprice',
           c.model, c.request_id, c.ts, c.new_price, c.cur_price,
           llm.cost_at(c.new_price, c.input_tokens, c.cached_input_tokens,
                       c.cache_write_tokens, c.output_tokens)
           - coalesce(llm.cost_at(c.cur_price, c.input_tokens,
                                  c.cached_input_tokens,
                                  c.cache_write_tokens, c.output_tokens), 0),
           reprice_usage.reason
      FROM (SELECT u.*, p.price_id AS new_price,
                   coalesce((SELECT a.price_id FROM llm.adjustments a
                              WHERE a.request_id = u.request_id
                                AND a.ts = u.ts AND a.kind = 'reprice'
                              ORDER BY a.adjustment_id DESC LIMIT 1),
                            u.price_id) AS cur_price
              FROM llm.usage u
              JOIN LATERAL llm.price_at(u.model, u.ts) p ON true
             WHERE u.ts >= from_ts AND u.ts < to_ts
               AND NOT EXISTS (SELECT FROM llm.adjustments d
                                WHERE d.request_id = u.request_id
                                  AND d.ts = u.ts AND d.kind = 'duplicate')
            ) c
     WHERE c.new_price IS DISTINCT FROM c.cur_price
       AND llm.cost_at(c.new_price, c.input_tokens, c.cached_input_tokens,
                       c.cache_write_tokens, c.output_tokens) IS NOT NULL;

    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

COMMENT ON FUNCTION llm.reprice_usage(timestamptz, timestamptz, text) IS
    'For the rows with from_ts <= ts < to_ts whose price is no longer the '
    'one effective at their ts (a price entered late): an adjustment of '
    'kind reprice each, of the difference, on the row''s period or, if '
    'closed, the first open one.  No stored cost changes.  Returns how '
    'many.';


-- A credit (negative) or a charge, by hand.

CREATE FUNCTION llm.adjust(p_tenant text, p_amount_usd text, p_reason text,
                           p_request_id text DEFAULT NULL,
                           p_at timestamptz DEFAULT now())
    RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tid    bigint;
    neg    boolean := p_amount_usd LIKE '-%';
    amt    bigint;
    r_ts   timestamptz;
    model  text;
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

    LOCK TABLE llm.invoices IN SHARE ROW EXCLUSIVE MODE;

    INSERT INTO llm.adjustments (tenant_id, period_start, kind, model,
                                 request_id, ts, amount_pusd, reason)
    VALUES (tid, llm.billing_period(tid, coalesce(r_ts, p_at)),
            CASE WHEN amt < 0 THEN 'credit' ELSE 'charge' END, model,
            p_request_id, r_ts, amt, p_reason)
    RETURNING adjustment_id INTO id;

    RETURN id;
END
$$;

COMMENT ON FUNCTION llm.adjust(text, text, text, text, timestamptz) IS
    'A credit (amount negative, in dollars: ''-12.50'') or a charge for a '
    'tenant, with its reason, of one request or none; on the period of '
    'the request (or of p_at), or the first open one.  Returns its id.';


-- --- the CSV of an invoice ----------------------------------------------------------

-- A field as CSV quotes it; a client's string (a model name) that a
-- spreadsheet would run as a formula gets a leading quote.
CREATE FUNCTION llm.csv_field(v text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN v IS NULL THEN ''
           ELSE '"' || replace(CASE WHEN v ~ '^[=+@\t\r-]' THEN '''' || v
                                    ELSE v END, '"', '""') || '"' END
$$;

CREATE FUNCTION llm.invoice_csv(p_invoice_id text) RETURNS SETOF text
    LANGUAGE sql STABLE
AS $$
    SELECT x.line FROM (
        SELECT 0 AS n, 'invoice_id,tenant,period_start,line_no,kind,model,'
               'token_class,adjustment_kind,price_id,unit_price_per_mtok,'
               'quantity,requests,estimated,partial,anomalous,amount_pusd,'
               'amount' AS line
        UNION ALL
        SELECT l.line_no,
               concat_ws(',', llm.csv_field(i.invoice_id),
                         llm.csv_field(i.tenant), i.period_start, l.line_no,
                         l.kind, llm.csv_field(l.model),
                         coalesce(l.token_class, ''),
                         coalesce(l.adjustment_kind, ''),
                         coalesce(l.price_id::text, ''),
                         coalesce(l.unit_price_per_mtok::text, ''),
                         l.quantity, l.requests, l.estimated, l.partial,
                         l.anomalous, l.amount_pusd,
                         (l.amount_minor::numeric / 100)::numeric(20, 2))
          FROM llm.invoices i
          JOIN llm.invoice_lines l ON l.invoice_id = i.invoice_id
         WHERE i.invoice_id = p_invoice_id
        UNION ALL
        SELECT 2147483647,
               concat_ws(',', llm.csv_field(i.invoice_id),
                         llm.csv_field(i.tenant), i.period_start, '', 'total',
                         '', '', '', '', '', '', i.requests, '', '', '',
                         i.total_pusd,
                         (i.total_minor::numeric / 100)::numeric(20, 2))
          FROM llm.invoices i
         WHERE i.invoice_id = p_invoice_id) x
     ORDER BY x.n
$$;

COMMENT ON FUNCTION llm.invoice_csv(text) IS
    'A closed invoice as CSV lines: a header, one line per invoice line, '
    'and the total (amount in dollars, two decimals: amount_minor / 100).';


-- --- the views of sql/004, by the tenant's time zone -------------------------------

CREATE OR REPLACE VIEW llm.daily_usage
    WITH (security_barrier = true, security_invoker = true)
AS
SELECT u.tenant_id,
       t.name                                         AS tenant,
       (u.ts AT TIME ZONE t.time_zone)::date          AS day,
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
       count(*) FILTER (WHERE u.partial)              AS partial,
       count(*) FILTER (WHERE u.flags & 28 <> 0)      AS anomalous
  FROM llm.usage u
  JOIN llm.tenants t ON t.tenant_id = u.tenant_id
 GROUP BY u.tenant_id, t.name, (u.ts AT TIME ZONE t.time_zone)::date,
          u.model;

COMMENT ON VIEW llm.daily_usage IS
    'Requests, tokens and cost per tenant, day (the tenant''s time zone) '
    'and model, over all the ledger; for a period, llm.period_lines() '
    'reads its partitions only.  cost_usd is exact over the priced rows; '
    'unpriced, estimated, partial and anomalous count rows.';

CREATE OR REPLACE VIEW llm.monthly_invoice
    WITH (security_barrier = true, security_invoker = true)
AS
SELECT u.tenant_id,
       t.name                                         AS tenant,
       date_trunc('month', u.ts AT TIME ZONE t.time_zone)::date AS month,
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
       count(*) FILTER (WHERE u.partial)              AS partial,
       count(*) FILTER (WHERE u.flags & 28 <> 0)      AS anomalous
  FROM llm.usage u
  JOIN llm.tenants t ON t.tenant_id = u.tenant_id
 GROUP BY u.tenant_id, t.name,
          date_trunc('month', u.ts AT TIME ZONE t.time_zone)::date, u.model;

COMMENT ON VIEW llm.monthly_invoice IS
    'Usage per tenant, month (the tenant''s time zone, its first day) and '
    'model, before adjustments and rounding.  The bill of a period is '
    'llm.period_lines() (and, closed, llm.invoices).';

CREATE OR REPLACE VIEW llm.monthly_invoice_total
    WITH (security_barrier = true, security_invoker = true)
AS
SELECT u.tenant_id,
       t.name                                         AS tenant,
       date_trunc('month', u.ts AT TIME ZONE t.time_zone)::date AS month,
       count(*)                                       AS requests,
       sum(u.input_tokens)                            AS input_tokens,
       sum(u.output_tokens)                           AS output_tokens,
       sum(u.cached_input_tokens)                     AS cached_input_tokens,
       sum(u.cache_write_tokens)                      AS cache_write_tokens,
       sum(u.reasoning_tokens)                        AS reasoning_tokens,
       sum(u.cost_pusd) * 0.000000000001              AS cost_usd,
       count(*) FILTER (WHERE u.cost_pusd IS NULL)    AS unpriced,
       count(*) FILTER (WHERE u.estimated)            AS estimated,
       count(*) FILTER (WHERE u.partial)              AS partial,
       count(*) FILTER (WHERE u.flags & 28 <> 0)      AS anomalous
  FROM llm.usage u
  JOIN llm.tenants t ON t.tenant_id = u.tenant_id
 GROUP BY u.tenant_id, t.name,
          date_trunc('month', u.ts AT TIME ZONE t.time_zone)::date;

COMMENT ON VIEW llm.monthly_invoice_total IS
    'The usage of a month per tenant, all models: the sum of its '
    'llm.monthly_invoice lines.';


-- --- privileges -------------------------------------------------------------------

REVOKE ALL ON llm.invoices, llm.invoice_lines FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA llm FROM PUBLIC;
GRANT EXECUTE ON FUNCTION llm.models_valid(text[]), llm.time_zone_valid(text),
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

GRANT SELECT ON llm.invoices, llm.invoice_lines
    TO llmgw_admin, llmgw_reporting;
-- what a reporting role's period_lines() reads
GRANT SELECT ON llm.prices TO llmgw_reporting;
GRANT SELECT (time_zone, created_at) ON llm.tenants TO llmgw_reporting;
GRANT EXECUTE ON FUNCTION
    llm.close_period(bigint, date, interval, timestamptz),
    llm.close_periods(interval, timestamptz, bigint),
    llm.reprice_usage(timestamptz, timestamptz, text),
    llm.adjust(text, text, text, text, timestamptz)
    TO llmgw_admin;

ALTER TABLE llm.invoices ENABLE ROW LEVEL SECURITY;
ALTER TABLE llm.invoices FORCE ROW LEVEL SECURITY;
CREATE POLICY invoices_all ON llm.invoices USING (true) WITH CHECK (true);
CREATE POLICY invoices_tenant ON llm.invoices AS RESTRICTIVE TO llmgw_reporting
    USING (tenant_id = (SELECT llm.reporting_tenant()));

ALTER TABLE llm.invoice_lines ENABLE ROW LEVEL SECURITY;
ALTER TABLE llm.invoice_lines FORCE ROW LEVEL SECURITY;
CREATE POLICY invoice_lines_all ON llm.invoice_lines
    USING (true) WITH CHECK (true);
CREATE POLICY invoice_lines_tenant ON llm.invoice_lines
    AS RESTRICTIVE TO llmgw_reporting
    USING (EXISTS (SELECT FROM llm.invoices i
                    WHERE i.invoice_id = invoice_lines.invoice_id
                      AND i.tenant_id = (SELECT llm.reporting_tenant())));
