-- ngx_llm_gateway: tenants, API keys and the usage ledger.
--
-- Applied once, in a single transaction, by
--     psql -v ON_ERROR_STOP=1 -1 -f sql/001_schema.sql
-- Token counts are integers and times are timestamptz: no floating point
-- anywhere, so that sums over the ledger are exact.

CREATE SCHEMA llm;

COMMENT ON SCHEMA llm IS
    'ngx_llm_gateway: tenants, their API keys, and one usage row per '
    'request, written by accountd.';


CREATE TABLE llm.tenants (
    tenant_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL UNIQUE
                CONSTRAINT tenants_name_valid
                CHECK (name ~ '^[A-Za-z0-9_.-]{1,63}$'),
    tier        text NOT NULL
                CONSTRAINT tenants_tier_valid
                CHECK (tier ~ '^[A-Za-z0-9_.-]{1,31}$'),
    created_at  timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE llm.tenants IS
    'A customer of the gateway.  Limits and prices are per tier.  Created '
    'with "accountd tenant create".';
COMMENT ON COLUMN llm.tenants.tenant_id IS
    'Stable numeric id; llm.usage.tenant_id refers to it.';
COMMENT ON COLUMN llm.tenants.name IS
    'Unique short name, letters, digits, "_", "." and "-", at most 63.';
COMMENT ON COLUMN llm.tenants.tier IS
    'The default tier of the tenant''s new keys (e.g. free, pro).';
COMMENT ON COLUMN llm.tenants.created_at IS
    'When the tenant was created.';


CREATE TABLE llm.api_keys (
    key_id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id       bigint NOT NULL REFERENCES llm.tenants (tenant_id),
    key_hash        bytea NOT NULL UNIQUE
                    CONSTRAINT api_keys_hash_len
                    CHECK (length(key_hash) = 32),
    display_prefix  text NOT NULL,
    tier            text NOT NULL
                    CONSTRAINT api_keys_tier_valid
                    CHECK (tier ~ '^[A-Za-z0-9_.-]{1,31}$'),
    created_at      timestamptz NOT NULL DEFAULT now(),
    revoked_at      timestamptz NULL,
    expires_at      timestamptz NULL
);

CREATE INDEX api_keys_tenant_id_idx ON llm.api_keys (tenant_id);

COMMENT ON TABLE llm.api_keys IS
    'API keys.  The key itself is shown once, when it is created, and is '
    'never stored: only its HMAC-SHA256 under the gateway''s secret.';
COMMENT ON COLUMN llm.api_keys.key_id IS
    'Stable numeric id; llm.usage.key_id refers to it.';
COMMENT ON COLUMN llm.api_keys.tenant_id IS
    'The tenant the key bills to.';
COMMENT ON COLUMN llm.api_keys.key_hash IS
    'HMAC-SHA256 of the key under the secret in accountd''s key_secret_file '
    '(32 bytes).  Useless without that secret.';
COMMENT ON COLUMN llm.api_keys.display_prefix IS
    'The first 15 characters of the key (e.g. llmgw_live_Ab3x), safe to '
    'show, to tell keys apart.';
COMMENT ON COLUMN llm.api_keys.tier IS
    'The tier whose limits apply to requests made with this key.';
COMMENT ON COLUMN llm.api_keys.created_at IS
    'When the key was created.';
COMMENT ON COLUMN llm.api_keys.revoked_at IS
    'When the key was revoked; NULL while it is valid.';
COMMENT ON COLUMN llm.api_keys.expires_at IS
    'When the key stops working; NULL for never.';


CREATE TABLE llm.usage (
    request_id           text PRIMARY KEY,
    tenant_id            bigint NOT NULL REFERENCES llm.tenants (tenant_id),
    key_id               bigint,
    model                text NOT NULL,
    api                  text NOT NULL
                         CONSTRAINT usage_api_valid
                         CHECK (api IN ('openai', 'anthropic')),
    input_tokens         bigint NOT NULL
                         CONSTRAINT usage_input_tokens_nonneg
                         CHECK (input_tokens >= 0),
    output_tokens        bigint
                         CONSTRAINT usage_output_tokens_nonneg
                         CHECK (output_tokens >= 0),
    cached_input_tokens  bigint
                         CONSTRAINT usage_cached_input_tokens_nonneg
                         CHECK (cached_input_tokens >= 0),
    reserved_tokens      bigint
                         CONSTRAINT usage_reserved_tokens_nonneg
                         CHECK (reserved_tokens >= 0),
    finish_reason        text,
    status               int,
    flags                int,
    ts                   timestamptz NOT NULL,
    received_at          timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX usage_tenant_id_ts_idx ON llm.usage (tenant_id, ts);

COMMENT ON TABLE llm.usage IS
    'The usage ledger: one row per request that reached the gateway''s '
    'settle step, written once by accountd (a replayed record is ignored).  '
    'Bill from this table: sum the token columns per tenant and model over '
    'a range of ts.';
COMMENT ON COLUMN llm.usage.request_id IS
    'The gateway''s id of the request; unique, so a record sent twice is '
    'counted once.';
COMMENT ON COLUMN llm.usage.tenant_id IS
    'The tenant billed.';
COMMENT ON COLUMN llm.usage.key_id IS
    'The API key used (llm.api_keys.key_id); NULL if the gateway did not '
    'know it.';
COMMENT ON COLUMN llm.usage.model IS
    'The model as the client asked for it (at most 128 bytes; bytes other '
    'than printable ASCII are replaced by "?").';
COMMENT ON COLUMN llm.usage.api IS
    'The API dialect of the request: openai (Chat Completions) or '
    'anthropic (Messages).';
COMMENT ON COLUMN llm.usage.input_tokens IS
    'Prompt tokens, including cached ones, as reported by the upstream '
    '(or estimated by the gateway when flags has bit 1, no usage).';
COMMENT ON COLUMN llm.usage.output_tokens IS
    'Completion tokens generated, including those of an aborted stream.';
COMMENT ON COLUMN llm.usage.cached_input_tokens IS
    'The part of input_tokens served from the upstream''s prompt cache, '
    'usually priced lower.';
COMMENT ON COLUMN llm.usage.reserved_tokens IS
    'Tokens the rate limiter reserved at admission (input estimate plus '
    'max_tokens); the difference to the actual use was refunded.  Not '
    'billed; useful to tune limits.';
COMMENT ON COLUMN llm.usage.finish_reason IS
    'Why generation stopped (stop, length, content_filter, tool_calls, '
    'error, ...); NULL if the upstream did not say.';
COMMENT ON COLUMN llm.usage.status IS
    'The HTTP status the gateway sent to the client.';
COMMENT ON COLUMN llm.usage.flags IS
    'Bit mask: 1 = the upstream sent no usage, token counts are the '
    'gateway''s estimate; 2 = the response ended early (client abort, '
    'upstream failure); 4 = a usage figure was out of range and clamped.';
COMMENT ON COLUMN llm.usage.ts IS
    'When the request finished, by the gateway''s clock.  Bill by this.';
COMMENT ON COLUMN llm.usage.received_at IS
    'When accountd wrote the row; later than ts when the database was '
    'unreachable for a while.';


-- A record that PostgreSQL refused (an unknown tenant, an impossible
-- time) is kept here rather than lost, and acknowledged to the gateway
-- so that it is not sent forever.

CREATE TABLE llm.usage_rejected (
    request_id           text PRIMARY KEY,
    tenant_id            bigint,
    key_id               bigint,
    model                text,
    api                  text,
    input_tokens         bigint,
    output_tokens        bigint,
    cached_input_tokens  bigint,
    reserved_tokens      bigint,
    finish_reason        text,
    status               int,
    flags                int,
    ts_ms                bigint,
    error                text NOT NULL,
    received_at          timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE llm.usage_rejected IS
    'Usage records that could not go into llm.usage, with the database''s '
    'reason.  Normally empty: anything here needs a human, then can be '
    'moved into llm.usage by hand.';
COMMENT ON COLUMN llm.usage_rejected.request_id IS
    'As llm.usage.request_id.';
COMMENT ON COLUMN llm.usage_rejected.ts_ms IS
    'The completion time as sent, in milliseconds since 1970-01-01 UTC.';
COMMENT ON COLUMN llm.usage_rejected.error IS
    'The SQLSTATE and message PostgreSQL gave for llm.usage.';
COMMENT ON COLUMN llm.usage_rejected.received_at IS
    'When accountd wrote the row.';
