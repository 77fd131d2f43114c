#!/usr/bin/env node
// Oracle for anneal's llama3 encoding: npm llama3-tokenizer-js (a JavaScript reimplementation of
// Llama 3's tokenizer from Meta's tokenizer.json, its own BPE and JavaScript's regex engine).
//
//   llama3_js_oracle.mjs --whole FILE    the whole file is one text: one line of ids
//   llama3_js_oracle.mjs FILE            one JSON string a line: one line of ids per non-empty line
//
// Encoded without <|begin_of_text|> or <|end_of_text|>. The package treats Llama 3's special-token
// texts in the input as special tokens; anneal treats all text as ordinary text, so inputs for this
// oracle must not contain them (the corpora the peers tier uses do not).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const pkg = path.join(here, '..', '..', 'tools', 'npm', 'node_modules', 'llama3-tokenizer-js',
                      'bundle', 'llama3-tokenizer-with-baked-data.js');
const { default: llama3Tokenizer } = await import(pathToFileURL(pkg).href);

const args = process.argv.slice(2);
const whole = args[0] === '--whole';
const file = whole ? args[1] : args[0];
if (!file) {
  process.stderr.write('usage: llama3_js_oracle.mjs [--whole] FILE\n');
  process.exit(2);
}
const data = fs.readFileSync(file, 'utf8');
const texts = whole ? [data] : data.split('\n').filter((l) => l.trim().length > 0).map((l) => JSON.parse(l));
const out = [];
for (const t of texts) out.push(llama3Tokenizer.encode(t, { bos: false, eos: false }).join(' '));
fs.writeSync(1, out.join('\n') + '\n');
