// Token counts of t/data/estimate-corpus.json by a real tokenizer (o200k,
// gpt-4o's), framed as OpenAI counts chat messages: 3 per message, 3 for
// the reply's priming.  Prints one JSON line: [ { name, tokens }, ... ].

import { readFileSync } from 'node:fs';
import { encode } from 'gpt-tokenizer/encoding/o200k_base';

const corpus = JSON.parse(readFileSync(process.argv[2], 'utf8'));

const text = (c) => typeof c === 'string' ? c
    : c.map((p) => p.text ?? '').join('');

console.log(JSON.stringify(corpus.map((e) => ({
    name: e.name,
    tokens: e.messages.reduce((n, m) => n + 3 + encode(text(m.content)).length,
                              3),
}))));
