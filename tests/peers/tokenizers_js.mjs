#!/usr/bin/env node
// A second peer for exported tokenizer files: Tokenizers.js (npm @huggingface/tokenizers, a pure
// JavaScript implementation of the tokenizers library) loads DIR/tokenizer.json and
// DIR/tokenizer_config.json and prints FILE's ids as one line (anneal tokenize's format).
//
//   tokenizers_js.mjs DIR FILE [--plain]
//
// --plain: no special token added (Llama 3's <|begin_of_text|>). Tokenizers.js always treats the
// special tokens' texts in FILE as special tokens, so FILE should not contain them.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const pkg = path.join(here, '..', '..', 'tools', 'npm', 'node_modules', '@huggingface', 'tokenizers', 'dist',
                      'tokenizers.mjs');
const { Tokenizer } = await import(pathToFileURL(pkg).href);
const [dir, file] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
if (!dir || !file) {
  process.stderr.write('usage: tokenizers_js.mjs DIR FILE [--plain]\n');
  process.exit(2);
}
const read = (name) => JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8'));
const tok = new Tokenizer(read('tokenizer.json'), read('tokenizer_config.json'));
const text = fs.readFileSync(file, 'utf8');
const ids = tok.encode(text, { add_special_tokens: !process.argv.includes('--plain') }).ids;
fs.writeSync(1, ids.join(' ') + '\n');
