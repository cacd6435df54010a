// The client matrix: node matrix.mjs CASES.json
//
// Each client library as its users call it, against the gateway: the
// official SDKs (openai, @anthropic-ai/sdk), the Vercel AI SDK (ai with
// @ai-sdk/openai and @ai-sdk/anthropic) and LangChain (@langchain/openai,
// @langchain/anthropic).  CASES.json is { "base": URL, "cases": [...] };
// a case is { name, lib, op, key, model, tokens, limit, ... }.  The cases
// run one after another, and for each one JSON line is printed: what the
// library returned (text, usage as it reports it, the request id where it
// exposes one) or threw (its class, status, type, message), and what went
// over the wire (each HTTP exchange: method, path, status, x-request-id,
// request-id, x-mock-read, x-llm-max-tokens-lowered, the limits the body
// sent, the usage or error of a JSON body), for t/098 to check against
// the ledger.

import { readFileSync } from 'node:fs';

import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { generateText, streamText, embed } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { ChatOpenAI, OpenAIEmbeddings } from '@langchain/openai';
import { ChatAnthropic } from '@langchain/anthropic';

const { base, cases } = JSON.parse(readFileSync(process.argv[2], 'utf8'));

// Every library ends in the global fetch (each takes it when it sends):
// the wrapper records each exchange and adds the case's x-mock-* headers,
// so that the libraries' own code is the same as in their users' hands.
const realFetch = globalThis.fetch;
let wire = [];
let mock = {};

const LIMITS = ['max_tokens', 'max_completion_tokens', 'max_output_tokens'];

globalThis.fetch = async (input, init = {}) => {
    const url = new URL(typeof input === 'string' || input instanceof URL
                        ? input : input.url);
    const headers = new Headers(init.headers ?? input.headers);
    for (const [k, v] of Object.entries(mock)) headers.set(k, v);

    const ex = { method: init.method ?? input.method ?? 'GET',
                 path: url.pathname, sent: {} };
    try {
        const body = JSON.parse(init.body);
        for (const k of [...LIMITS, 'stream', 'model', 'encoding_format']) {
            if (k in body) ex.sent[k] = body[k];
        }
    } catch { /* not a JSON body */ }
    wire.push(ex);

    const res = await realFetch(url, { ...init, headers });

    ex.status = res.status;
    ex.x_request_id = res.headers.get('x-request-id');
    ex.request_id = res.headers.get('request-id');
    ex.mock_read = res.headers.get('x-mock-read');
    ex.lowered = res.headers.get('x-llm-max-tokens-lowered');
    ex.content_type = res.headers.get('content-type');

    // the usage in a whole JSON body, for the libraries that hide it
    if (/json/.test(ex.content_type ?? '')) {
        try {
            const j = await res.clone().json();
            ex.usage = j.usage ?? null;
            ex.error = j.error ?? null;
            ex.type = j.type ?? null;
        } catch { /* not JSON after all */ }
    }

    return res;
};

const messages = [{ role: 'user', content: 'Say hello.' }];
const prompt = 'Say hello.';

// What a library threw, in the words of each.
function thrown(e) {
    const c = e?.cause;
    return {
        class: e?.constructor?.name ?? typeof e,
        name: e?.name ?? null,
        status: e?.status ?? e?.statusCode ?? c?.status ?? null,
        type: e?.type ?? e?.error?.error?.type ?? e?.error?.type ?? null,
        code: e?.code ?? null,
        message: String(e?.message ?? e),
        api_message: e?.apiMessage ?? null,
        request_id: e?.requestID ?? null,
        response_headers: e?.responseHeaders ?? null,
        lc_error_code: e?.lc_error_code ?? null,
        cause_class: c?.constructor?.name ?? null,
    };
}

// The libraries, each as its documentation shows: one object per library
// and API, with the operations it has.  c is the case.
const retries = (c) => c.retries ?? 2;

const openaiClient = (c) => new OpenAI({
    baseURL: `${base}/v1`, apiKey: c.key, maxRetries: retries(c) });

const anthropicClient = (c) => new Anthropic({
    baseURL: base, apiKey: c.key, maxRetries: retries(c) });

const libs = {

    openai: {
        async chat(c) {
            const { data, response } = await openaiClient(c).chat.completions
                .create({ model: c.model, messages, max_tokens: c.limit })
                .withResponse();
            return { text: data.choices[0].message.content,
                     input: data.usage.prompt_tokens,
                     output: data.usage.completion_tokens,
                     id: data._request_id,
                     header_id: response.headers.get('x-request-id') };
        },

        async stream(c) {
            const { data: stream, request_id } = await openaiClient(c).chat
                .completions.create({
                    model: c.model, messages, max_tokens: c.limit,
                    stream: true, stream_options: { include_usage: true } })
                .withResponse();
            let text = '', usage = null;
            for await (const chunk of stream) {
                text += chunk.choices[0]?.delta?.content ?? '';
                usage = chunk.usage ?? usage;
            }
            return { text, input: usage.prompt_tokens,
                     output: usage.completion_tokens, id: request_id };
        },

        async models(c) {
            const ids = [];
            for await (const m of openaiClient(c).models.list()) ids.push(m.id);
            return { ids };
        },

        async retrieve(c) {
            const m = await openaiClient(c).models.retrieve(c.model);
            return { ids: [m.id], object: m.object, id: m._request_id };
        },

        async embed(c) {
            const r = await openaiClient(c).embeddings.create({
                model: c.model, input: prompt });
            return { vector: r.data[0].embedding.length,
                     numbers: r.data[0].embedding.every(Number.isFinite),
                     input: r.usage.prompt_tokens, id: r._request_id };
        },

        async unknown(c) {
            await openaiClient(c).get('/no-such-endpoint');
            return {};
        },
    },

    'openai-responses': {
        async chat(c) {
            const r = await openaiClient(c).responses.create({
                model: c.model, input: prompt, max_output_tokens: c.limit });
            return { text: r.output_text, input: r.usage.input_tokens,
                     output: r.usage.output_tokens, id: r._request_id };
        },

        async stream(c) {
            const { data: stream, request_id } = await openaiClient(c)
                .responses.create({
                    model: c.model, input: prompt, max_output_tokens: c.limit,
                    stream: true })
                .withResponse();
            let text = '', usage = null;
            for await (const ev of stream) {
                if (ev.type === 'response.output_text.delta') text += ev.delta;
                if (ev.type === 'response.completed') usage = ev.response.usage;
            }
            return { text, input: usage.input_tokens,
                     output: usage.output_tokens, id: request_id };
        },
    },

    anthropic: {
        async chat(c) {
            const m = await anthropicClient(c).messages.create({
                model: c.model, messages, max_tokens: c.limit });
            return { text: m.content.map((b) => b.text ?? '').join(''),
                     input: m.usage.input_tokens,
                     output: m.usage.output_tokens, id: m._request_id };
        },

        // the stream helper, as its README shows it
        async stream(c) {
            const stream = anthropicClient(c).messages.stream({
                model: c.model, messages, max_tokens: c.limit });
            let text = '';
            stream.on('text', (t) => { text += t; });
            const m = await stream.finalMessage();
            return { text, input: m.usage.input_tokens,
                     output: m.usage.output_tokens, id: stream.request_id };
        },

        async models(c) {
            const ids = [];
            for await (const m of anthropicClient(c).models.list()) {
                ids.push(m.id);
            }
            return { ids };
        },

        async retrieve(c) {
            const m = await anthropicClient(c).models.retrieve(c.model);
            return { ids: [m.id], object: m.type, id: m._request_id };
        },

        async count(c) {
            const r = await anthropicClient(c).messages.countTokens({
                model: c.model, messages });
            return { input: r.input_tokens, id: r._request_id };
        },

        async unknown(c) {
            await anthropicClient(c).get('/v1/no-such-endpoint');
            return {};
        },
    },

    'aisdk-openai-chat': aisdk((c) => createOpenAI({
        baseURL: `${base}/v1`, apiKey: c.key }).chat(c.model)),

    'aisdk-openai-responses': aisdk((c) => createOpenAI({
        baseURL: `${base}/v1`, apiKey: c.key }).responses(c.model)),

    'aisdk-anthropic': aisdk((c) => createAnthropic({
        baseURL: `${base}/v1`, apiKey: c.key })(c.model)),

    'langchain-openai': langchain((c) => new ChatOpenAI({
        model: c.model, apiKey: c.key, maxTokens: c.limit,
        maxRetries: c.retries ?? 6, configuration: { baseURL: `${base}/v1` },
    })),

    'langchain-openai-responses': langchain((c) => new ChatOpenAI({
        model: c.model, apiKey: c.key, maxTokens: c.limit,
        maxRetries: c.retries ?? 6, useResponsesApi: true,
        configuration: { baseURL: `${base}/v1` },
    })),

    'langchain-anthropic': langchain((c) => new ChatAnthropic({
        model: c.model, apiKey: c.key, maxTokens: c.limit,
        maxRetries: c.retries ?? 6, anthropicApiUrl: base,
    })),
};

// The AI SDK: generateText, streamText and embed over a provider's model.
// limit null leaves maxOutputTokens out: the provider's default goes.
function aisdk(model) {
    const opts = (c) => ({ model: model(c), prompt, maxRetries: retries(c),
                           ...(c.limit == null ? {}
                               : { maxOutputTokens: c.limit }) });
    return {
        async chat(c) {
            const r = await generateText(opts(c));
            return { text: r.text, input: r.usage.inputTokens,
                     output: r.usage.outputTokens,
                     id: r.response.headers?.['x-request-id'] };
        },

        async stream(c) {
            let error = null;
            const r = streamText({ ...opts(c),
                                   onError: ({ error: e }) => { error = e; } });
            let text = '';
            for await (const t of r.textStream) text += t;
            if (error) throw error;
            const usage = await r.usage;
            const response = await r.response;
            return { text, input: usage.inputTokens,
                     output: usage.outputTokens,
                     id: response.headers?.['x-request-id'] };
        },

        async embed(c) {
            const r = await embed({
                model: createOpenAI({ baseURL: `${base}/v1`, apiKey: c.key })
                    .embedding(c.model),
                value: prompt, maxRetries: retries(c) });
            return { vector: r.embedding.length,
                     numbers: r.embedding.every(Number.isFinite),
                     input: r.usage.tokens,
                     id: r.response?.headers?.['x-request-id'] };
        },
    };
}

// LangChain: invoke and stream a chat model, usage_metadata as it reads
// it; embedQuery of OpenAIEmbeddings.
function langchain(model) {
    return {
        async chat(c) {
            const m = await model(c).invoke(messages);
            return { text: m.text, input: m.usage_metadata?.input_tokens,
                     output: m.usage_metadata?.output_tokens };
        },

        async stream(c) {
            let all = null;
            for await (const chunk of await model(c).stream(messages)) {
                all = all ? all.concat(chunk) : chunk;
            }
            return { text: all.text, input: all.usage_metadata?.input_tokens,
                     output: all.usage_metadata?.output_tokens };
        },

        async embed(c) {
            const e = new OpenAIEmbeddings({
                model: c.model, apiKey: c.key, maxRetries: retries(c),
                configuration: { baseURL: `${base}/v1` } });
            const v = await e.embedQuery(prompt);
            return { vector: v.length, numbers: v.every(Number.isFinite) };
        },
    };
}

// A case with steps ["chat", "chat"] makes those calls in turn (a rate
// limit's first and second) and prints each with its own exchanges.
async function run(c, call) {
    const f = libs[c.lib]?.[call];
    if (!f) {
        return { error: { class: 'NoSuchCall', message: `${c.lib} ${call}` } };
    }
    wire = [];
    let out;
    try {
        out = { ...await f(c) };
    } catch (e) {
        out = { error: thrown(e) };
    }
    return { ...out, wire };
}

for (const c of cases) {
    mock = c.mock ?? {};
    const out = { name: c.name };

    if (c.steps) {
        out.steps = [];
        for (const call of c.steps) out.steps.push(await run(c, call));
    } else {
        Object.assign(out, await run(c, c.op));
    }

    console.log(JSON.stringify(out));
}
