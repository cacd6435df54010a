-- ngx_llm_gateway: rate limits shared by the gateways of one database.
--
-- Each gateway's accountd says, about every second, how many tokens a
-- second each active tenant asked of it, and learns the share of the
-- tenant's limits it may admit: its part of the recent demand of all the
-- gateways.  N gateways then admit about the configured limit together,
-- not N times it.  A gateway alone keeps the whole limit.
--
-- Applied once, in a single transaction, by
--     psql -v ON_ERROR_STOP=1 -1 -f sql/006_shares.sql


CREATE TABLE llm.gateway_demand (
    tenant_id     bigint NOT NULL REFERENCES llm.tenants (tenant_id),
    gateway       text NOT NULL,
    tokens        bigint NOT NULL
                  CONSTRAINT gateway_demand_tokens_nonneg CHECK (tokens >= 0),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, gateway)
);

COMMENT ON TABLE llm.gateway_demand IS
    'Per tenant and gateway, the tokens a second it was last asked for; '
    'rows older than 3 s do not count.  Written by llm.take_share().';


/*
 * Records p_tokens as the gateway's demand for the tenant and returns its
 * share of the tenant's limits in parts per million: its demand over the
 * demand of every gateway heard from in the last 3 s, each share at least
 * a quarter of an even split (so that a gateway can show new demand), and
 * all of them scaled to add up to one.
 */

CREATE FUNCTION llm.take_share(p_tenant bigint, p_gateway text,
                               p_tokens bigint)
    RETURNS int
    LANGUAGE plpgsql
AS $$
DECLARE
    n       int;
    floor_  numeric;
    mine    numeric;
    total   numeric;
BEGIN
    INSERT INTO llm.gateway_demand AS d (tenant_id, gateway, tokens)
    VALUES (p_tenant, p_gateway, greatest(p_tokens, 0))
    ON CONFLICT (tenant_id, gateway) DO UPDATE
       SET tokens = excluded.tokens, updated_at = now();

    SELECT count(*) INTO n FROM llm.gateway_demand
     WHERE tenant_id = p_tenant
       AND updated_at > now() - interval '3 seconds';

    IF n <= 1 THEN
        RETURN 1000000;
    END IF;

    floor_ := 1.0 / (4 * n);

    SELECT sum(greatest(tokens::numeric / nullif(s.all_, 0), floor_))
      INTO total
      FROM llm.gateway_demand,
           (SELECT sum(tokens) AS all_ FROM llm.gateway_demand
             WHERE tenant_id = p_tenant
               AND updated_at > now() - interval '3 seconds') s
     WHERE tenant_id = p_tenant
       AND updated_at > now() - interval '3 seconds';

    SELECT greatest(tokens::numeric / nullif(s.all_, 0), floor_)
      INTO mine
      FROM llm.gateway_demand,
           (SELECT sum(tokens) AS all_ FROM llm.gateway_demand
             WHERE tenant_id = p_tenant
               AND updated_at > now() - interval '3 seconds') s
     WHERE tenant_id = p_tenant AND gateway = p_gateway;

    -- no demand anywhere: an even split
    IF total IS NULL OR mine IS NULL THEN
        RETURN (1000000 / n)::int;
    END IF;

    RETURN least(1000000, greatest(1, round(mine / total * 1000000)))::int;
END;
$$;

COMMENT ON FUNCTION llm.take_share(bigint, text, bigint) IS
    'A gateway''s share of a tenant''s rate limits, in parts per million, '
    'from the demand every gateway reported in the last 3 s.';
