// embeddings.create() of the official openai package against the gateway:
// node embed.mjs, the request's parameters as JSON in EMBED_BODY.  Prints
// one JSON line: the x-request-id, what the SDK returned (each embedding
// as the SDK gives it: numbers, decoded from base64 when the caller chose
// no encoding, or the base64 string when it asked for base64), or the
// error it raised, for t/093-embeddings.t to check against the ledger.

import OpenAI from 'openai';

const openai = new OpenAI({ baseURL: `${process.env.LLMGW_URL}/v1`,
                            apiKey: process.env.LLMGW_KEY, maxRetries: 0 });

try {
    const { data, response } = await openai.embeddings.create(
        JSON.parse(process.env.EMBED_BODY)).withResponse();

    console.log(JSON.stringify({
        id: response.headers.get('x-request-id'),
        object: data.object, model: data.model, usage: data.usage,
        data: data.data.map((e) => ({
            object: e.object, index: e.index,
            embedding: typeof e.embedding === 'string' ? e.embedding
                                                       : Array.from(e.embedding),
        })),
    }));

} catch (e) {
    console.log(JSON.stringify({ error: e.constructor.name, status: e.status,
                                 type: e.type, param: e.param, code: e.code,
                                 message: e.message,
                                 id: e.headers?.get?.('x-request-id') }));
}
