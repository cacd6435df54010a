// Tool calls through translating roles: node tools.mjs CASES.json
//
// Each library as its users call it with a tool: the openai SDK's stream
// helper, the Anthropic SDK's, and the AI SDK's streamText, whose loop
// runs the tool and sends its result.  CASES.json is { "base": URL,
// "cases": [...] }, a case { name, lib, key, model, tokens, calls }.  For
// each case one JSON line: the tool calls the library saw (name,
// arguments as a JSON string, id), the final answer's text, and the
// x-request-id of each exchange, for t/100 to check against the mock and
// the ledger; or what it threw.

import { readFileSync } from 'node:fs';

import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { streamText, tool, jsonSchema, stepCountIs } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';

const { base, cases } = JSON.parse(readFileSync(process.argv[2], 'utf8'));

// the mock's controls and the request ids, added and read in the fetch
// every library ends in, so that their own code is as their users have it
const realFetch = globalThis.fetch;
let mock = {};
let ids = [];

globalThis.fetch = async (input, init = {}) => {
    const url = typeof input === 'string' || input instanceof URL
                ? input : input.url;
    const headers = new Headers(init.headers ?? input.headers);
    for (const [k, v] of Object.entries(mock)) headers.set(k, v);
    const res = await realFetch(url, { ...init, headers });
    ids.push(res.headers.get('x-request-id'));
    return res;
};

const schema = {
    type: 'object',
    properties: { city: { type: 'string', description: 'A city' } },
    required: ['city'],
};
const description = 'The weather of a city';
const question = 'What is the weather in Paris?';
const answer = 'Sunny, 21 C.';

const libs = {
    // the stream helper, which joins the calls' argument deltas
    async openai(c) {
        const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: c.key,
                                    maxRetries: 0 });
        const tools = [{ type: 'function',
                         function: { name: 'get_weather', description,
                                     parameters: schema } }];
        const messages = [{ role: 'user', content: question }];

        const first = await client.chat.completions.stream({
            model: c.model, messages, tools, max_tokens: 100 })
            .finalChatCompletion();
        const m = first.choices[0].message;
        const calls = (m.tool_calls ?? []).map((t) => ({
            id: t.id, name: t.function.name, args: t.function.arguments }));

        messages.push(m);
        for (const t of calls) {
            messages.push({ role: 'tool', tool_call_id: t.id,
                            content: answer });
        }

        const last = await client.chat.completions.stream({
            model: c.model, messages, tools, max_tokens: 100 })
            .finalChatCompletion();
        return { calls, finish: first.choices[0].finish_reason,
                 text: last.choices[0].message.content };
    },

    // the stream helper, which parses the input_json_delta pieces
    async anthropic(c) {
        const client = new Anthropic({ baseURL: base, apiKey: c.key,
                                       maxRetries: 0 });
        const tools = [{ name: 'get_weather', description,
                         input_schema: schema }];
        const messages = [{ role: 'user', content: question }];

        const first = await client.messages.stream({
            model: c.model, messages, tools, max_tokens: 100 })
            .finalMessage();
        const uses = first.content.filter((b) => b.type === 'tool_use');
        const calls = uses.map((b) => ({
            id: b.id, name: b.name, args: JSON.stringify(b.input) }));

        messages.push({ role: 'assistant', content: first.content });
        messages.push({ role: 'user', content: uses.map((b) => ({
            type: 'tool_result', tool_use_id: b.id, content: answer })) });

        const last = await client.messages.stream({
            model: c.model, messages, tools, max_tokens: 100 })
            .finalMessage();
        return { calls, finish: first.stop_reason,
                 text: last.content.filter((b) => b.type === 'text')
                     .map((b) => b.text).join('') };
    },

    'aisdk-openai-chat': (c) => aisdk(c, createOpenAI({
        baseURL: `${base}/v1`, apiKey: c.key }).chat(c.model)),

    'aisdk-openai-responses': (c) => aisdk(c, createOpenAI({
        baseURL: `${base}/v1`, apiKey: c.key }).responses(c.model)),

    'aisdk-anthropic': (c) => aisdk(c, createAnthropic({
        baseURL: `${base}/v1`, apiKey: c.key })(c.model)),
};

// streamText with a tool the SDK runs: a step of calls, then the answer
async function aisdk(c, model) {
    const calls = [];
    let error = null;
    const r = streamText({
        model, prompt: question, maxOutputTokens: 100, maxRetries: 0,
        tools: {
            get_weather: tool({
                description, inputSchema: jsonSchema(schema),
                execute: async (input, { toolCallId }) => {
                    calls.push({ id: toolCallId, name: 'get_weather',
                                 args: JSON.stringify(input) });
                    return answer;
                },
            }),
        },
        stopWhen: stepCountIs(3),
        onError: ({ error: e }) => { error = e; },
    });
    let text = '';
    for await (const t of r.textStream) text += t;
    if (error) throw error;
    const steps = await r.steps;
    return { calls, finish: steps[0]?.finishReason, steps: steps.length,
             text: steps[steps.length - 1].text };
}

for (const c of cases) {
    mock = { 'x-mock-tokens': String(c.tokens),
             'x-mock-tool-calls': String(c.calls) };
    ids = [];
    let out;
    try {
        out = { name: c.name, ok: true, ...(await libs[c.lib](c)) };
    } catch (e) {
        out = { name: c.name, ok: false, class: e?.constructor?.name,
                status: e?.status ?? e?.statusCode ?? null,
                message: String(e?.message ?? e) };
    }
    out.ids = ids;
    console.log(JSON.stringify(out));
}
