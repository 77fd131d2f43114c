#!/usr/bin/env node
// Oracle for anneal's GPT-2 tokenizer: OpenAI's tiktoken (npm, WASM build).
//
//   tiktoken_oracle.js [--encoding NAME] ...      the encoding (default gpt2; cl100k_base, o200k_base)
//   tiktoken_oracle.js [--probe] FILE           FILE holds one JSON string per line; prints one
//                                               line of space-separated ids per non-empty input
//                                               line (the format of `anneal tokenize --json-lines`)
//   tiktoken_oracle.js [--probe] --whole FILE   the whole file is one text; prints one line of ids
//                                               (the format of `anneal tokenize FILE`)
//   tiktoken_oracle.js --gen N SEED OUT         writes N deterministic pseudo-random strings as
//                                               JSON lines (see gen_strings.js)
//   tiktoken_oracle.js --all-codepoints OUT     writes one JSON line per Unicode scalar value
//   tiktoken_oracle.js --probe-vocab DIR        writes the class-probe vocabulary (encoder.json,
//                                               vocab.bpe) that --probe encodes with
//   tiktoken_oracle.js --compare NAME MODE INPUT EXPECTED ACTUAL [--probe] [--by-codepoint]
//                                               compares two id files (MODE: lines | whole), prints
//                                               `case NAME: N texts, M tokens, K mismatches` and the
//                                               first mismatch; exits 1 on any mismatch.
//                                               --by-codepoint: texts are --all-codepoints contexts;
//                                               list the mismatching code points as ranges (with
//                                               both sides' classes when --probe)
//
// Text is encoded with enc.encode(text, [], []): no special token is allowed, so `<|endoftext|>`
// is ordinary text (what `anneal tokenize` does).
//
// The probe encoding uses GPT-2's pre-tokenizer regex (tiktoken's own engine) with a synthetic
// vocabulary: the 256 single bytes, then for each context byte x in {'a', '1', '!', '\t'} and
// each byte b the two-byte token x+b. A pair x+b merges only when both characters land in the
// same pre-token, so for a code point c the ids of "a"+c, "1"+c, "!"+c and "\t"+c (at the end of
// a text) reveal whether the regex put c in \p{L}, \p{N}, [^\s\p{L}\p{N}] or \s. Comparing
// anneal (loaded with the same vocabulary through --tokenizer DIR) against it checks anneal's
// character classes for every code point exactly, even where GPT-2's own merges could not
// tell the classes apart.
'use strict';

const fs = require('fs');
const path = require('path');

// tiktoken from the project's npm folder (tools/npm), else from wherever node finds it.
function tiktokenDir() {
  const local = path.join(__dirname, '..', '..', 'tools', 'npm', 'node_modules', 'tiktoken');
  if (fs.existsSync(path.join(local, 'package.json'))) return local;
  try {
    return path.dirname(require.resolve('tiktoken/package.json'));
  } catch (e) {
    throw new Error('tiktoken is not installed: run scripts/setup.sh (npm install under tools/npm)');
  }
}

function requireTiktoken() {
  return require(tiktokenDir());
}

const PROBE_CONTEXT = ['a', '1', '!', '\t'];

// Tokens of the probe vocabulary, as latin1 strings (one char per byte), in rank order.
function probeTokens() {
  const toks = [];
  for (let b = 0; b < 256; b++) toks.push(String.fromCharCode(b));
  for (const x of PROBE_CONTEXT)
    for (let b = 0; b < 256; b++) toks.push(x + String.fromCharCode(b));
  return toks;
}

// The encoding of the non-probe runs: gpt2 unless `--encoding NAME` comes first (cl100k_base, o200k_base).
let ENCODING = 'gpt2';

function makeEncoder(probe) {
  const tk = requireTiktoken();
  if (!probe) return tk.get_encoding(ENCODING);
  const gpt2 = require(path.join(tiktokenDir(), 'encoders', 'gpt2.json'));
  const ranks = probeTokens().map((t) => Buffer.from(t, 'latin1').toString('base64'));
  return new tk.Tiktoken('! 0 ' + ranks.join(' '), {}, gpt2.pat_str);
}

// GPT-2's reversible byte -> printable-character map (the encoding of encoder.json's keys).
function bytesToUnicode() {
  const bs = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n++;
    }
  }
  const map = new Array(256);
  bs.forEach((b, i) => (map[b] = String.fromCodePoint(cs[i])));
  return map;
}

function writeProbeVocab(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const b2u = bytesToUnicode();
  const toks = probeTokens();
  const enc = {};
  const merges = ['#version: 0.2'];
  toks.forEach((t, id) => {
    const s = Array.from(t, (ch) => b2u[ch.charCodeAt(0)]).join('');
    enc[s] = id;
    if (t.length === 2) merges.push(b2u[t.charCodeAt(0)] + ' ' + b2u[t.charCodeAt(1)]);
  });
  enc['<|endoftext|>'] = toks.length;
  fs.writeFileSync(path.join(dir, 'encoder.json'), JSON.stringify(enc));
  fs.writeFileSync(path.join(dir, 'vocab.bpe'), merges.join('\n') + '\n');
}

// Writes text to a file descriptor in pieces (the outputs run to tens of MB).
class Out {
  constructor(fd) {
    this.fd = fd;
    this.parts = [];
    this.size = 0;
  }
  write(s) {
    this.parts.push(s);
    this.size += s.length;
    if (this.size > 1 << 20) this.flush();
  }
  flush() {
    if (this.parts.length) fs.writeSync(this.fd, this.parts.join(''));
    this.parts = [];
    this.size = 0;
  }
}

function encodeFile(file, whole, probe) {
  const enc = makeEncoder(probe);
  const out = new Out(1);
  const data = fs.readFileSync(file === '-' ? 0 : file, 'utf8');
  if (whole) {
    out.write(enc.encode(data, [], []).join(' ') + '\n');
  } else {
    let start = 0;
    while (start < data.length) {
      let nl = data.indexOf('\n', start);
      if (nl < 0) nl = data.length;
      if (nl > start) {
        const text = JSON.parse(data.slice(start, nl));
        out.write(enc.encode(text, [], []).join(' ') + '\n');
      }
      start = nl + 1;
    }
  }
  out.flush();
  enc.free();
}

// ---------------------------------------------------------------------------------------------
// Exhaustive code point contexts.
//
// For code point c the text is   c + "a" + c + "1" + c + "!" + c + "  " + c + "'s\t" + c
//   "a"+c, "1"+c, "!"+c   c joins the pre-token of its left neighbour only when it is a letter,
//                         a number or "other" respectively (what the probe vocabulary sees, and
//                         GPT-2's ids where a merge crosses the two characters);
//   "  "+c+"'s"           when c is whitespace the two spaces stay one pre-token ("  "); when it
//                         is not, the second space goes with c (" " + c): GPT-2 ids differ.
//                         When c is "other" the apostrophe joins its run and "'s" is no longer a
//                         contraction (" c'" "s" instead of " c" "'s"): this catches other <->
//                         letter/number confusions even where no merge crosses c;
//   "\t"+c at the end     whitespace that runs to the end of the text (\s+(?!\S));
//   c at the start        no left context.
// Letter <-> number confusions of a character whose bytes never merge with a neighbour's are
// invisible in GPT-2's ids (both runs behave alike); the probe vocabulary catches those.
function codepointContext(c) {
  return c + 'a' + c + '1' + c + '!' + c + '  ' + c + "'s\t" + c;
}

function writeAllCodepoints(file) {
  const fd = fs.openSync(file, 'w');
  const out = new Out(fd);
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    out.write(JSON.stringify(codepointContext(String.fromCodePoint(cp))) + '\n');
  }
  out.flush();
  fs.closeSync(fd);
}

// ---------------------------------------------------------------------------------------------
// Comparison of two id files.

function escapeText(s, max) {
  let r = JSON.stringify(s).replace(/[\u007f-\uffff]/g, (ch) => {
    return '\\u' + ch.charCodeAt(0).toString(16).padStart(4, '0');
  });
  if (max && r.length > max) r = r.slice(0, max) + '...';
  return r;
}

function codepointsOf(s) {
  return Array.from(s, (ch) => 'U+' + ch.codePointAt(0).toString(16).toUpperCase().padStart(4, '0'));
}

function readLines(file) {
  const data = fs.readFileSync(file, 'latin1');
  const lines = data.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

function countTokens(line) {
  if (line.length === 0) return 0;
  let n = 1;
  for (let i = 0; i < line.length; i++) if (line.charCodeAt(i) === 32) n++;
  return n;
}

// The class the probe vocabulary's ids show for code point c: which context bytes ('a' letter,
// '1' number, '!' other, '\t' whitespace) merged with c's first byte.
function probeClasses(ids, c) {
  const lead = Buffer.from(c, 'utf8')[0];
  const names = ['letter', 'number', 'other', 'whitespace'];
  const seen = new Set();
  for (const t of ids.split(' ')) {
    const id = Number(t);
    if (id >= 256 && id < 256 * (1 + PROBE_CONTEXT.length) && (id - 256) % 256 === lead)
      seen.add(names[Math.floor((id - 256) / 256)]);
  }
  return [...seen].sort().join('+') || 'none';
}

function rangesOf(cps) {
  const hex = (c) => c.toString(16).toUpperCase().padStart(4, '0');
  const out = [];
  let lo = -1;
  let hi = -1;
  for (const c of cps) {
    if (c === hi + 1) {
      hi = c;
      continue;
    }
    if (lo >= 0) out.push(lo === hi ? hex(lo) : hex(lo) + '-' + hex(hi));
    lo = hi = c;
  }
  if (lo >= 0) out.push(lo === hi ? hex(lo) : hex(lo) + '-' + hex(hi));
  return out;
}

// opts.probe: the ids are the probe vocabulary's; opts.byCodepoint: each text is the context of
// the code point it starts with (the exhaustive cases): summarise mismatches by code point.
function compare(name, mode, inputFile, expectedFile, actualFile, opts) {
  const expected = readLines(expectedFile);
  const actual = readLines(actualFile);
  let inputs = null; // texts
  const loadInputs = () => {
    if (inputs) return inputs;
    const data = fs.readFileSync(inputFile, 'utf8');
    if (mode === 'whole') inputs = [data];
    else inputs = data.split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l));
    return inputs;
  };
  const n = Math.max(expected.length, actual.length);
  let tokens = 0;
  const bad = [];
  for (let i = 0; i < n; i++) {
    const e = expected[i];
    if (e !== undefined) tokens += countTokens(e);
    if (e !== actual[i]) bad.push(i);
  }
  const texts = mode === 'whole' ? 1 : expected.length;
  const mismatches = mode === 'whole' ? (bad.length ? 1 : 0) : bad.length;
  console.log(`case ${name}: ${texts} texts, ${tokens} tokens, ${mismatches} mismatches`);
  if (expected.length !== actual.length)
    console.log(`  line counts differ: tiktoken ${expected.length}, anneal ${actual.length}`);
  if (bad.length === 0) return true;
  const first = bad[0];
  const e = (expected[first] || '').split(' ');
  const a = (actual[first] || '').split(' ');
  if (mode === 'whole') {
    let k = 0;
    while (k < e.length && k < a.length && e[k] === a[k]) k++;
    const lo = Math.max(0, k - 8);
    const text = loadInputs()[0];
    // Where in the text the first difference falls: decode the common prefix.
    let offset = -1;
    try {
      const enc = makeEncoder(!!opts.probe);
      offset = new TextDecoder().decode(enc.decode(Uint32Array.from(e.slice(0, k).map(Number)))).length;
      enc.free();
    } catch (err) {
      offset = -1;
    }
    console.log(`  first difference at token ${k}` + (offset >= 0 ? ` (text offset ~${offset} UTF-16 units)` : ''));
    if (offset >= 0) console.log(`  input near it: ${escapeText(text.slice(Math.max(0, offset - 40), offset + 40))}`);
    console.log(`  tiktoken ids[${lo}..]: ${e.slice(lo, k + 12).join(' ')}`);
    console.log(`  anneal   ids[${lo}..]: ${a.slice(lo, k + 12).join(' ')}`);
    return false;
  }
  const all = loadInputs();
  const text = all[first];
  console.log(`  first mismatch: text #${first + 1}: ${escapeText(text === undefined ? '' : text, 400)}`);
  if (text !== undefined && text.length <= 60) console.log(`  code points: ${codepointsOf(text).join(' ')}`);
  console.log(`  tiktoken: ${expected[first] === undefined ? '(none)' : expected[first]}`);
  console.log(`  anneal:   ${actual[first] === undefined ? '(none)' : actual[first]}`);
  if (opts.byCodepoint) {
    // Group the mismatching code points by (tiktoken's class -> anneal's class) where the probe
    // shows classes, and print them as ranges.
    const groups = new Map();
    for (const i of bad) {
      if (all[i] === undefined || expected[i] === undefined || actual[i] === undefined) continue;
      const c = String.fromCodePoint(all[i].codePointAt(0));
      const key = opts.probe
        ? `tiktoken ${probeClasses(expected[i], c)}, anneal ${probeClasses(actual[i], c)}`
        : 'ids differ';
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(c.codePointAt(0));
    }
    for (const [key, cps] of groups) {
      const r = rangesOf(cps);
      const shown = r.length > 60 ? r.slice(0, 60).join(' ') + ` ... (${r.length - 60} more ranges)` : r.join(' ');
      console.log(`  ${cps.length} code points (${key}): ${shown}`);
    }
  } else if (bad.length > 1) {
    const more = bad.slice(1, 11).map((i) => '#' + (i + 1));
    console.log(`  other mismatching texts: ${more.join(' ')}${bad.length > 11 ? ' ...' : ''}`);
  }
  return false;
}

// ---------------------------------------------------------------------------------------------

function usage() {
  process.stderr.write(
    'usage: tiktoken_oracle.js [--encoding NAME] [--probe] [--whole] FILE | --gen N SEED OUT | --all-codepoints OUT |\n' +
      '       --probe-vocab DIR | --compare NAME lines|whole INPUT EXPECTED ACTUAL [--probe] [--by-codepoint]\n',
  );
  process.exit(2);
}

function main(argv) {
  if (argv[0] === '--encoding') {
    if (argv.length < 2) usage();
    ENCODING = argv[1];
    argv = argv.slice(2);
  }
  if (argv[0] === '--gen') {
    if (argv.length !== 4) usage();
    require('./gen_strings.js').writeStrings(Number(argv[1]), Number(argv[2]), argv[3]);
    return 0;
  }
  if (argv[0] === '--all-codepoints') {
    if (argv.length !== 2) usage();
    writeAllCodepoints(argv[1]);
    return 0;
  }
  if (argv[0] === '--probe-vocab') {
    if (argv.length !== 2) usage();
    writeProbeVocab(argv[1]);
    return 0;
  }
  if (argv[0] === '--compare') {
    const opts = { probe: false, byCodepoint: false };
    const rest = [];
    for (const a of argv.slice(1)) {
      if (a === '--probe') opts.probe = true;
      else if (a === '--by-codepoint') opts.byCodepoint = true;
      else rest.push(a);
    }
    if (rest.length !== 5 || (rest[1] !== 'lines' && rest[1] !== 'whole')) usage();
    return compare(rest[0], rest[1], rest[2], rest[3], rest[4], opts) ? 0 : 1;
  }
  let whole = false;
  let probe = false;
  const files = [];
  for (const a of argv) {
    if (a === '--whole') whole = true;
    else if (a === '--probe') probe = true;
    else if (a.startsWith('--')) usage();
    else files.push(a);
  }
  if (files.length !== 1) usage();
  encodeFile(files[0], whole, probe);
  return 0;
}

if (require.main === module) process.exitCode = main(process.argv.slice(2));

module.exports = { codepointContext, writeProbeVocab, probeTokens };
