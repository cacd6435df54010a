-- ngx_llm_gateway: the OpenAI Embeddings API in the ledger.  An embeddings
-- request bills its input alone: its row has output_tokens 0, and its
-- cost is input_tokens at the model's input price, as llm.usage_cost()
-- computes any row's.
--
-- Applied once, in a single transaction, by
--     psql -v ON_ERROR_STOP=1 -1 -f sql/011_embeddings.sql


ALTER TABLE llm.usage
    DROP CONSTRAINT usage_api_valid,
    ADD CONSTRAINT usage_api_valid
        CHECK (api IN ('openai', 'anthropic', 'responses', 'embeddings'));


COMMENT ON COLUMN llm.usage.api IS
    'The API dialect of the request: openai (Chat Completions), anthropic '
    '(Messages), responses (OpenAI Responses) or embeddings (OpenAI '
    'Embeddings, input tokens only).';
