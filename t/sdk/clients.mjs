// The official SDKs against the gateway: node clients.mjs SCENARIO.
// Prints one JSON line: what the client saw, for t/050-sdk.t to check
// against the ledger.  The gateway's URL and key come from the environment.

import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const base = process.env.LLMGW_URL;
const key = process.env.LLMGW_KEY;
const headers = { 'x-mock-tokens': process.env.MOCK_TOKENS ?? '5' };
const messages = [{ role: 'user', content: 'Say hello.' }];

const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: key,
                            defaultHeaders: headers, maxRetries: 2 });
const anthropic = new Anthropic({ baseURL: base, apiKey: key,
                                  defaultHeaders: headers, maxRetries: 2 });

const scenarios = {

    async 'openai-json'() {
        const { data, response } = await openai.chat.completions.create({
            model: 'mock-gpt-4o-mini', messages, max_tokens: 20,
        }).withResponse();

        return { id: response.headers.get('x-request-id'),
                 text: data.choices[0].message.content,
                 input: data.usage.prompt_tokens,
                 output: data.usage.completion_tokens };
    },

    async 'openai-stream'() {
        const { data: stream, response } = await openai.chat.completions.create({
            model: 'mock-gpt-4o-mini', messages, max_tokens: 20, stream: true,
            stream_options: { include_usage: true },
        }).withResponse();

        let text = '', usage = null;
        for await (const chunk of stream) {
            text += chunk.choices[0]?.delta?.content ?? '';
            usage = chunk.usage ?? usage;
        }

        return { id: response.headers.get('x-request-id'), text,
                 input: usage.prompt_tokens, output: usage.completion_tokens };
    },

    async 'anthropic-stream'() {
        const { data: stream, response } = await anthropic.messages.create({
            model: 'mock-claude-3-5-haiku', messages, max_tokens: 20,
            stream: true,
        }).withResponse();

        let text = '', input = 0, output = 0;
        for await (const ev of stream) {
            if (ev.type === 'message_start') input = ev.message.usage.input_tokens;
            if (ev.type === 'content_block_delta') text += ev.delta.text;
            if (ev.type === 'message_delta') output = ev.usage.output_tokens;
        }

        return { id: response.headers.get('x-request-id'), text, input,
                 output };
    },

    // A whole message: the SDK's _request_id is its request-id header.
    async 'anthropic-json'() {
        const { data, response } = await anthropic.messages.create({
            model: 'mock-claude-3-5-haiku', messages, max_tokens: 20,
        }).withResponse();

        return { id: response.headers.get('x-request-id'),
                 request_id: data._request_id ?? null,
                 text: data.content[0].text,
                 input: data.usage.input_tokens,
                 output: data.usage.output_tokens };
    },

    // A refusal as the Anthropic SDK reads it.
    async 'anthropic-error'() {
        try {
            await anthropic.messages.create({
                model: 'mock-claude-3-5-haiku', messages,
                max_tokens: Number(process.env.MAX_TOKENS ?? 20),
            });
            return { error: null };
        } catch (e) {
            return { status: e.status, type: e.type ?? null,
                     error_code: e.errorCode ?? null,
                     request_id: e.requestID ?? null,
                     id: e.headers?.get('x-request-id') ?? null,
                     message: String(e.message),
                     name: e.constructor.name };
        }
    },

    async 'responses-json'() {
        const { data, response } = await openai.responses.create({
            model: 'mock-gpt-4o-mini', input: 'Say hello.',
            max_output_tokens: 20,
        }).withResponse();

        return { id: response.headers.get('x-request-id'),
                 text: data.output_text, input: data.usage.input_tokens,
                 output: data.usage.output_tokens };
    },

    async 'responses-stream'() {
        const { data: stream, response } = await openai.responses.create({
            model: 'mock-gpt-4o-mini', input: 'Say hello.',
            max_output_tokens: 20, stream: true,
        }).withResponse();

        let text = '', usage = null;
        for await (const ev of stream) {
            if (ev.type === 'response.output_text.delta') text += ev.delta;
            if (ev.type === 'response.completed') usage = ev.response.usage;
        }

        return { id: response.headers.get('x-request-id'), text,
                 input: usage.input_tokens, output: usage.output_tokens };
    },

    // The upstream dies mid-stream (MOCK_DIE_HOW after 2 tokens): each
    // SDK must raise the gateway's error event, not end quietly.
    async 'stream-dies'() {
        const die = { 'x-mock-die-after': '2',
                      'x-mock-die-how': process.env.MOCK_DIE_HOW ?? 'close' };
        const api = process.env.API;
        let text = '';

        try {
            if (api === 'anthropic') {
                const stream = await anthropic.messages.create({
                    model: 'mock-claude', messages, max_tokens: 20,
                    stream: true }, { headers: die });
                for await (const ev of stream) {
                    if (ev.type === 'content_block_delta') text += ev.delta.text;
                }

            } else if (api === 'responses') {
                const stream = await openai.responses.create({
                    model: 'mock-gpt-4o-mini', input: 'Say hello.',
                    max_output_tokens: 20, stream: true }, { headers: die });
                for await (const ev of stream) {
                    if (ev.type === 'response.output_text.delta') text += ev.delta;
                }

            } else {
                const stream = await openai.chat.completions.create({
                    model: 'mock-gpt-4o-mini', messages, max_tokens: 20,
                    stream: true }, { headers: die });
                for await (const chunk of stream) {
                    text += chunk.choices[0]?.delta?.content ?? '';
                }
            }

            return { text, error: null };

        } catch (e) {
            return { text, error: e.constructor.name,
                     message: String(e.message) };
        }
    },

    async 'openai-error'() {
        try {
            await openai.chat.completions.create({
                model: 'mock-gpt-4o-mini', messages,
                max_tokens: Number(process.env.MAX_TOKENS ?? 20),
            });
            return { error: null };
        } catch (e) {
            return { status: e.status, code: e.code, type: e.type,
                     name: e.constructor.name };
        }
    },

    // Two requests that each use most of a small bucket: the second meets
    // a 429 and the client, with its default retries, waits and succeeds.
    async 'openai-retry'() {
        const ask = () => openai.chat.completions.create({
            model: 'mock-gpt-4o-mini', messages, max_tokens: 50,
        }).withResponse();

        await ask();

        const start = Date.now();
        const { data, response } = await ask();

        return { output: data.usage.completion_tokens,
                 id: response.headers.get('x-request-id'),
                 elapsed_ms: Date.now() - start };
    },
};

const result = await scenarios[process.argv[2]]();
console.log(JSON.stringify(result));
