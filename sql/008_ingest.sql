-- ngx_llm_gateway: the ledger's write path, set-based.
--
-- accountd writes each batch of records with one prepared statement over
-- arrays, and computes their cost in that statement: one price lookup a
-- row in a plan made once, where the row trigger of 004 ran a PL/pgSQL
-- function and a query for each row (about half of PostgreSQL's time per
-- record; see "Benchmarks" in the README).  The trigger still computes the
-- cost of a row inserted without one (plain SQL), and again whenever an
-- UPDATE changes what it depends on.  The formula is written once, in
-- llm.cost_numeric(), and the price lookup once, in llm.price_at().
--
-- Applied once, in a single transaction, by
--     psql -v ON_ERROR_STOP=1 -1 -f sql/008_ingest.sql


-- The price of a model at a time: its own, else that of '*'; none if
-- neither has one yet.  Inlined where it is used in FROM: two backward
-- scans of the primary key, the second only if the first finds nothing.

CREATE FUNCTION llm.price_at(p_model text, p_ts timestamptz)
    RETURNS SETOF llm.prices
    LANGUAGE sql STABLE PARALLEL SAFE ROWS 1
AS $$
    SELECT *
      FROM ((SELECT * FROM llm.prices r
              WHERE r.model = p_model AND r.effective_from <= p_ts
              ORDER BY r.effective_from DESC LIMIT 1)
            UNION ALL
            (SELECT * FROM llm.prices r
              WHERE r.model = '*' AND r.effective_from <= p_ts
              ORDER BY r.effective_from DESC LIMIT 1)) p
     LIMIT 1
$$;

COMMENT ON FUNCTION llm.price_at(text, timestamptz) IS
    'The llm.prices row that prices a model at a time: the model''s own '
    'latest effective by then, else that of "*"; no row if neither.';


-- The cost of some tokens at a price, in p$, exactly; NULL without a
-- price.  One expression, so that PostgreSQL inlines it.

CREATE FUNCTION llm.cost_numeric(p llm.prices, input_tokens bigint,
                                 cached_input_tokens bigint,
                                 cache_write_tokens bigint,
                                 output_tokens bigint)
    RETURNS numeric
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT greatest(coalesce(input_tokens, 0)::numeric
                    - coalesce(cached_input_tokens, 0)
                    - coalesce(cache_write_tokens, 0), 0) * p.input_per_mtok
           + coalesce(cached_input_tokens, 0)::numeric
             * p.cached_input_per_mtok
           + coalesce(cache_write_tokens, 0)::numeric
             * p.cache_write_per_mtok
           + coalesce(output_tokens, 0)::numeric * p.output_per_mtok
$$;

COMMENT ON FUNCTION llm.cost_numeric(llm.prices, bigint, bigint, bigint,
                                     bigint) IS
    'Uncached input, cached input, cache-write and output tokens times '
    'their prices (µ$ per million tokens): the cost in p$, exactly.';


-- 004's function, on the two above: the same answers.

CREATE OR REPLACE FUNCTION llm.usage_cost(model text, ts timestamptz,
                                          input_tokens bigint,
                                          cached_input_tokens bigint,
                                          cache_write_tokens bigint,
                                          output_tokens bigint)
    RETURNS bigint
    LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
    p  llm.prices;
    c  numeric;
BEGIN
    SELECT * INTO p FROM llm.price_at($1, $2);

    IF NOT FOUND THEN
        RETURN NULL;
    END IF;

    c := llm.cost_numeric(p, $3, $4, $5, $6);

    IF c > 9223372036854775807 THEN
        RAISE WARNING 'the cost of a row of "%" at % does not fit a bigint '
                      '(% p$): left NULL', $1, $2, c;
        RETURN NULL;
    END IF;

    RETURN c;
END
$$;


-- The row trigger: an insert that brings its cost keeps it (accountd
-- computes it with the functions above); an update recomputes it.

DROP TRIGGER usage_cost ON llm.usage;

CREATE TRIGGER usage_cost_insert
    BEFORE INSERT ON llm.usage
    FOR EACH ROW WHEN (NEW.cost_pusd IS NULL)
    EXECUTE FUNCTION llm.usage_set_cost();

CREATE TRIGGER usage_cost_update
    BEFORE UPDATE OF model, ts, input_tokens, cached_input_tokens,
                     cache_write_tokens, output_tokens
    ON llm.usage
    FOR EACH ROW EXECUTE FUNCTION llm.usage_set_cost();

COMMENT ON FUNCTION llm.usage_set_cost() IS
    'Sets llm.usage.cost_pusd from llm.prices (llm.usage_cost) when a row '
    'is inserted without one, or its model, ts or tokens change.';
