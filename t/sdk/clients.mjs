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
