// The models and count_tokens endpoints through the official SDKs: node
// models.mjs SCENARIO [MODEL].  Prints one JSON line, what the client saw
// (an error as its status, body and request ids), for t/092-models.t.

import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const base = process.env.LLMGW_URL;
const key = process.env.LLMGW_KEY;
const model = process.argv[3];

const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: key,
                            maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: key,
                                  maxRetries: 0 });

const scenarios = {

    async 'openai-list'() {
        const ids = [];
        let first = null;
        for await (const m of openai.models.list()) {
            ids.push(m.id);
            first ??= m;
        }
        return { ids, first };
    },

    async 'openai-retrieve'() {
        return { model: await openai.models.retrieve(model) };
    },

    // a page of one at a time: every page after the first by after_id
    async 'anthropic-list'() {
        const ids = [];
        let first = null;
        for await (const m of anthropic.models.list({ limit: 1 })) {
            ids.push(m.id);
            first ??= m;
        }
        const page = await anthropic.models.list();
        return { ids, first, page: { has_more: page.has_more,
                                     first_id: page.first_id,
                                     last_id: page.last_id,
                                     n: page.data.length } };
    },

    async 'anthropic-retrieve'() {
        return { model: await anthropic.models.retrieve(model) };
    },

    async 'anthropic-count'() {
        const { data, response } = await anthropic.messages.countTokens({
            model, system: 'Be brief.',
            messages: [{ role: 'user', content: 'Say hello.' }],
        }).withResponse();
        return { input_tokens: data.input_tokens,
                 id: response.headers.get('x-request-id'),
                 read: response.headers.get('x-mock-read') };
    },

    async 'openai-unknown'() {
        return { got: await openai.post('/files', { body: {} }) };
    },

    async 'anthropic-unknown'() {
        return { got: await anthropic.post('/v1/files', { body: {} }) };
    },
};

try {
    console.log(JSON.stringify(await scenarios[process.argv[2]]()));
} catch (e) {
    console.log(JSON.stringify({
        status: e.status ?? null, error: e.error ?? null,
        x_request_id: e.headers?.get?.('x-request-id') ?? null,
        request_id: e.request_id ?? e.requestID ?? null,
        message: String(e.message),
    }));
}
