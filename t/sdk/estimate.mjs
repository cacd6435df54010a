// Token counts by a real tokenizer (o200k, gpt-4o's) of
// t/data/estimate-corpus.json, framed as OpenAI counts chat messages: 3 per
// message, 3 for the reply's priming; and of t/data/estimate-tools.json,
// whose entries are whole bodies of a dialect ({ name, api, body }), with
// tools framed as each provider puts them before the model:
//   openai, responses: the functions rendered as OpenAI renders them (a
//     TypeScript namespace in the system message, keywords as comments);
//   anthropic: the tools' JSON after the tool-use system prompt (346
//     tokens for tool_choice auto on its current models).
// Prints one JSON line: [ { name, api, tokens }, ... ].

import { readFileSync } from 'node:fs';
import { encode } from 'gpt-tokenizer/encoding/o200k_base';

const corpus = JSON.parse(readFileSync(process.argv[2], 'utf8'));

const ANTHROPIC_TOOL_PROMPT = 346;

const n = (s) => encode(s ?? '').length;

const text = (c) => c == null ? '' : typeof c === 'string' ? c
    : c.map((p) => p.text ?? '').join('');

// a JSON schema as a TypeScript type, as OpenAI shows functions
const keywords = (s) => Object.entries(s)
    .filter(([k]) => !['type', 'description', 'properties', 'items',
                       'required', 'enum'].includes(k))
    .map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join(', ');

const type = (s) => s.enum ? s.enum.map((e) => JSON.stringify(e)).join(' | ')
    : s.type === 'integer' ? 'number'
    : s.type === 'array' ? type(s.items ?? {}) + '[]'
    : s.type === 'object' ? '{\n' + props(s) + '}'
    : (s.type ?? 'any');

const props = (s) => Object.entries(s.properties ?? {}).map(([k, p]) =>
    (p.description ? `// ${p.description}\n` : '')
    + (keywords(p) ? `// ${keywords(p)}\n` : '')
    + k + ((s.required ?? []).includes(k) ? '' : '?') + ': ' + type(p)
    + ',\n').join('');

const render = (fns) => '# Tools\n\n## functions\n\nnamespace functions {\n\n'
    + fns.map((f) => (f.description ? `// ${f.description}\n` : '')
        + `type ${f.name} = (_: {\n${props(f.parameters ?? {})}}) => any;\n\n`)
        .join('')
    + '} // namespace functions';

const openai = (b) => {
    const fns = (b.tools ?? []).map((t) => t.function ?? t)
        .concat(b.functions ?? []);

    return b.messages.reduce((k, m) => k + 3 + n(text(m.content))
        + (m.tool_calls ?? []).reduce((c, t) => c + 3 + n(t.function.name)
                                      + n(t.function.arguments), 0), 3)
        + (fns.length ? 3 + n(render(fns)) : 0);
};

const responses = (b) => {
    const items = typeof b.input === 'string'
        ? [{ role: 'user', content: b.input }] : b.input;

    return items.reduce((k, i) => k + 3
        + (i.type === 'function_call' ? n(i.name) + n(i.arguments)
           : i.type === 'function_call_output' ? n(text(i.output))
           : n(text(i.content))), 3)
        + n(b.instructions)
        + ((b.tools ?? []).length ? 3 + n(render(b.tools)) : 0);
};

const block = (p) => p.type === 'text' ? n(p.text)
    : p.type === 'tool_use' ? 3 + n(p.name) + n(JSON.stringify(p.input))
    : p.type === 'tool_result' ? 3 + (typeof p.content === 'string'
        ? n(p.content) : (p.content ?? []).reduce((k, q) => k + block(q), 0))
    : 0;

const anthropic = (b) => b.messages.reduce((k, m) => k + 3
        + (typeof m.content === 'string' ? n(m.content)
           : m.content.reduce((c, p) => c + block(p), 0)), 3)
    + n(text(b.system))
    + ((b.tools ?? []).length
       ? ANTHROPIC_TOOL_PROMPT + n(JSON.stringify(b.tools)) : 0);

const count = (e) => !e.api ? openai({ messages: e.messages })
    : e.api === 'anthropic' ? anthropic(e.body)
    : e.api === 'responses' ? responses(e.body)
    : openai(e.body);

console.log(JSON.stringify(corpus.map((e) => ({
    name: e.name,
    api: e.api ?? 'openai',
    tokens: count(e),
}))));
