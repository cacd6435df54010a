-- ngx_llm_gateway: key lifecycle.  Keys limited to some models, keys that
-- replace others, and a notification on every change of keys or tenants,
-- so that accountd rewrites the key snapshot even after plain SQL.
--
-- Applied once, in a single transaction, by
--     psql -v ON_ERROR_STOP=1 -1 -f sql/002_key_lifecycle.sql


-- One model name as llm_key.h takes it, and a whole list: not empty, no
-- NULL, one dimension, and at most 1023 characters once joined with
-- commas, the <models> field of the snapshot.

CREATE FUNCTION llm.models_valid(models text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT cardinality(models) > 0
           AND coalesce(array_ndims(models) = 1, false)
           AND length(array_to_string(models, ',')) < 1024
           AND NOT EXISTS (SELECT FROM unnest(models) AS m (name)
                            WHERE m.name IS NULL
                               OR m.name !~ '^[A-Za-z0-9_.:/@+-]{1,127}$')
$$;

COMMENT ON FUNCTION llm.models_valid(text[]) IS
    'Whether a list of model names fits the key snapshot: 1 to 127 of '
    'A-Z a-z 0-9 _ . : / @ + - each, at most 1023 characters in all.';


ALTER TABLE llm.api_keys
    ADD COLUMN models        text[] NULL
                             CONSTRAINT api_keys_models_valid
                             CHECK (llm.models_valid(models)),
    ADD COLUMN rotated_from  bigint NULL
                             REFERENCES llm.api_keys (key_id);

COMMENT ON COLUMN llm.api_keys.models IS
    'The models the key may call, as the client names them (exact, '
    'case-sensitive); NULL for any model.';
COMMENT ON COLUMN llm.api_keys.rotated_from IS
    'The key this one replaced ("accountd key rotate"); NULL for a key '
    'made by "key create".  The old key keeps working until its '
    'expires_at, the grace period.';


-- NOTIFY is delivered at commit, once per transaction and payload:
-- a statement-level trigger is enough, and a rolled-back change says
-- nothing.

CREATE FUNCTION llm.keys_changed() RETURNS trigger
    LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM pg_notify('llmgw_keys', '');
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION llm.keys_changed() IS
    'Tells accountd (LISTEN llmgw_keys) that keys or tenants changed, so '
    'that it rewrites the key snapshot.';

CREATE TRIGGER api_keys_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON llm.api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION llm.keys_changed();

CREATE TRIGGER tenants_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON llm.tenants
    FOR EACH STATEMENT EXECUTE FUNCTION llm.keys_changed();
