#!/usr/bin/env node
// Deterministic pseudo-random strings for tokenizer cross-checks.
//
//   gen_strings.js N SEED OUT     writes N strings, one JSON string per line, to OUT
//
// Each string is 1..60 code points, assembled from pieces drawn from: any Unicode scalar value of
// any of the 17 planes (unassigned and private use included, surrogates excluded), whitespace
// runs (ASCII and Unicode spaces, \r\n, U+0085, U+2028...), digits of several scripts and other
// numbers, punctuation, apostrophe contractions (lower and upper case, and look-alikes), emoji
// with ZWJ, skin tones and variation selectors, CJK / kana / Hangul, letters of other scripts,
// combining marks, English words, and the literal `<|endoftext|>` (and pieces of it).
// Every fourth line is written with all non-ASCII characters as \uXXXX escapes (surrogate pairs
// for the astral planes), so both JSON spellings are exercised.
'use strict';

const fs = require('fs');

function mulberry32(seed) {
  let a = seed >>> 0;
  return function () {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const cp = (...xs) => String.fromCodePoint(...xs);
const range = (lo, hi) => {
  const r = [];
  for (let c = lo; c <= hi; c++) r.push(cp(c));
  return r;
};

const WHITESPACE = [
  ' ', ' ', ' ', ' ', '  ', '   ', '\t', '\n', '\n\n', '\r\n', '\r', '\u000b', '\u000c',
  '\u00a0', '\u0085', '\u1680', '\u2000', '\u2001', '\u2002', '\u2003', '\u2007', '\u2009',
  '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000',
  // Not White_Space, but easy to mistake for it:
  '\u200b', '\u200c', '\u200d', '\u2060', '\ufeff', '\u180e', '\u001c', '\u001f',
];

const DIGITS = [
  ...range(0x30, 0x39), // ASCII
  ...range(0x660, 0x669), // Arabic-Indic
  ...range(0x6f0, 0x6f9), // Extended Arabic-Indic
  ...range(0x966, 0x96f), // Devanagari
  ...range(0x9e6, 0x9ef), // Bengali
  ...range(0xbe6, 0xbf2), // Tamil digits and numbers
  ...range(0xe50, 0xe59), // Thai
  ...range(0xff10, 0xff19), // fullwidth
  ...range(0x1d7ce, 0x1d7ff), // mathematical digits
  ...range(0x2160, 0x2188), // Roman numerals (Nl)
  ...range(0x2460, 0x249b), // circled / parenthesized (No)
  '\u00b2', '\u00b3', '\u00b9', '\u00bc', '\u00bd', '\u00be', '\u2070', '\u2074', '\u2075',
  '\u2080', '\u2081', '\u3007', '\u3021', '\u3022', cp(0x12400), cp(0x10107), cp(0x1f100), cp(0x1f10a),
];

const PUNCT = [
  ...'!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~',
  '\u00a1', '\u00bf', '\u00ab', '\u00bb', '\u00a7', '\u00b6', '\u00b7', '\u2010', '\u2013',
  '\u2014', '\u2018', '\u2019', '\u201c', '\u201d', '\u2026', '\u2030', '\u2032', '\u203d',
  '\u3001', '\u3002', '\u300c', '\u300d', '\u300e', '\u300f', '\uff01', '\uff1f', '\uff08',
  '\uff09', '\u060c', '\u061f', '\u05be', '\u0964', '\u0e2f', '\u00a9', '\u00ae', '\u2122',
  '\u20ac', '\u00a3', '\u00a5', '\u2190', '\u2192', '\u221e', '\u2211', '\u00d7', '\u00f7',
  '\u00b0', '\u2022', '\u25cf', '\u2605', '\u266a', '\u00ac', '\u00a6', '\u00af', '\u02c6',
  '\u02dc', '\u0f04', '\u2e3a', '\ufe10', '\u0021\u0021\u0021', '...', '--', '?!', '://',
];

const CONTRACTIONS = [
  "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D",
  "'Re", "'rE", "'Ll", "'x", "'", "''", "'''s", "\u2019s", "\u2019t", "\u02bcs", "\uff07s",
  "don't", "it's", "I'm", "we're", "they've", "you'll", "he'd", "DON'T", "IT'S", "Tom's",
  "o'clock", "rock'n'roll", "'99", "'s'", " 's", "''s", "'ss", "'tt", "'lll", "'mm",
  "'\u017f", "'\u017fs", "DON'\u017f", "'\u212a", "HELLO'S", "Hello'Re", "x'LL",
];

const EMOJI = [
  '\u{1f600}', '\u{1f602}', '\u{1f60d}', '\u{1f914}', '\u{1f44d}', '\u{1f44d}\u{1f3fd}',
  '\u{1f44b}\u{1f3ff}', '\u{1f9d1}\u{1f3fb}\u200d\u{1f4bb}', '\u{1f468}\u200d\u{1f469}\u200d\u{1f467}\u200d\u{1f466}',
  '\u{1f3f3}\ufe0f\u200d\u{1f308}', '\u{1f3f4}\u200d\u2620\ufe0f', '\u2764\ufe0f', '\u2764\ufe0f\u200d\u{1f525}',
  '\u{1f1ef}\u{1f1f5}', '\u{1f1fa}\u{1f1f8}', '\u{1f1e9}\u{1f1ea}', '1\ufe0f\u20e3', '#\ufe0f\u20e3',
  '\u263a', '\u263a\ufe0f', '\u2728', '\u{1f525}', '\u{1f680}', '\u{1f40d}', '\u{1fae0}', '\u{1f977}\u{1f3fe}',
  '\u{1f3f4}\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}', '\u{1f469}\u{1f3fc}\u200d\u2764\ufe0f\u200d\u{1f468}\u{1f3fd}',
];

const COMBINING = [
  ...range(0x300, 0x36f), '\u0483', '\u0591', '\u05b0', '\u05bc', '\u064b', '\u064e', '\u0651',
  '\u093e', '\u093f', '\u094d', '\u0902', '\u09bc', '\u0e31', '\u0e48', '\u1ab0', '\u1dc0',
  '\u20d0', '\u20e3', '\ufe0f', '\ufe0e', '\ufe20', '\u302a', '\u3099', cp(0x1d165), cp(0x1e000),
];

const WORDS = [
  'the', 'The', 'THE', 'hello', 'world', 'Hello', 'tokenizer', 'GPT', 'anneal', 'a', 'I',
  'quick', 'brown', 'fox', 'jumps', 'over', 'lazy', 'dog', 'and', 'of', 'in', 'to', 'is',
  'unbelievable', 'supercalifragilistic', 'x86_64', 'int32_t', 'foo.bar', 'https', 'www',
  'caf\u00e9', 'na\u00efve', 'r\u00e9sum\u00e9', 'Stra\u00dfe', '\u00fcber', 'se\u00f1or', 'fa\u00e7ade',
  '\u041f\u0440\u0438\u0432\u0435\u0442', '\u043c\u0438\u0440', '\u0395\u03bb\u03bb\u03ac\u03b4\u03b1',
  '\u05e9\u05dc\u05d5\u05dd', '\u0645\u0631\u062d\u0628\u0627', '\u0928\u092e\u0938\u094d\u0924\u0947',
  '\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35', '\u4f60\u597d', '\u4e16\u754c', '\u3053\u3093\u306b\u3061\u306f',
  '\u30ab\u30bf\u30ab\u30ca', '\ud55c\uad6d\uc5b4', '\u1e9e', '\u0130stanbul', '\u0131', 'Ǆ', 'ǅ', 'ǆ',
  '\u{1d400}\u{1d401}', '\u2160\u2161', 'ﬁ', 'ﬀ', '\u00aa', '\u00ba', '\u02b0', '\u3005',
  // letter case changes inside a word (o200k_base splits at them), titlecase and modifier letters
  'HelloWorld', 'iPhone', 'XMLHttpRequest', "McDONALD'S", '\u01c5emal', '\u03a3\u038a\u03a3\u03a5\u03a6\u039f\u03a3',
  '\u02b0ello', 'a\u02b0B', 'ABCdef', 'abcDEF', 'path/to/file/', 'a//b', '=/\n', 'e\u0301E\u0301',
];

const ENDOFTEXT = [
  '<|endoftext|>', '<|endoftext|>', '<|endoftext', 'endoftext|>', '<|', '|>', '<|endoftext|><|endoftext|>',
  ' <|endoftext|>', '<|endoftext|> ', '<|ENDOFTEXT|>', '<|fim_prefix|>', '<|im_start|>',
];

function anyScalar(rnd) {
  // Uniform over planes first (so the astral planes are not drowned by the BMP's share).
  for (;;) {
    const plane = Math.floor(rnd() * 17);
    const c = plane * 0x10000 + Math.floor(rnd() * 0x10000);
    if (c >= 0xd800 && c <= 0xdfff) continue;
    return cp(c);
  }
}

function pick(rnd, arr) {
  return arr[Math.floor(rnd() * arr.length)];
}

function cjk(rnd) {
  const r = rnd();
  if (r < 0.5) return cp(0x4e00 + Math.floor(rnd() * (0x9fff - 0x4e00 + 1)));
  if (r < 0.65) return cp(0x3041 + Math.floor(rnd() * 0x56)); // hiragana
  if (r < 0.8) return cp(0x30a1 + Math.floor(rnd() * 0x5a)); // katakana
  if (r < 0.95) return cp(0xac00 + Math.floor(rnd() * (0xd7a3 - 0xac00 + 1))); // Hangul
  return cp(0x20000 + Math.floor(rnd() * 0xa6e0)); // CJK Extension B
}

function piece(rnd) {
  const r = rnd();
  if (r < 0.14) return anyScalar(rnd);
  if (r < 0.26) {
    let s = '';
    const n = 1 + Math.floor(rnd() * 3);
    for (let i = 0; i < n; i++) s += pick(rnd, WHITESPACE);
    return s;
  }
  if (r < 0.36) {
    let s = '';
    const n = 1 + Math.floor(rnd() * 4);
    for (let i = 0; i < n; i++) s += pick(rnd, DIGITS);
    return s;
  }
  if (r < 0.46) return pick(rnd, PUNCT);
  if (r < 0.54) return pick(rnd, CONTRACTIONS);
  if (r < 0.61) return pick(rnd, EMOJI);
  if (r < 0.68) return cjk(rnd);
  if (r < 0.74) {
    // a base letter with one to three combining marks (sometimes with no base)
    let s = rnd() < 0.9 ? pick(rnd, ['a', 'e', 'o', 'Z', '\u0905', '\u05d0', '\u0628', 'x', ' ']) : '';
    const n = 1 + Math.floor(rnd() * 3);
    for (let i = 0; i < n; i++) s += pick(rnd, COMBINING);
    return s;
  }
  if (r < 0.92) return (rnd() < 0.5 ? ' ' : '') + pick(rnd, WORDS);
  if (r < 0.96) return pick(rnd, ENDOFTEXT);
  // a lone ASCII character of any kind, controls included
  return cp(Math.floor(rnd() * 128));
}

function makeString(rnd) {
  const len = 1 + Math.floor(rnd() * 60);
  let cps = [];
  while (cps.length < len) cps = cps.concat(Array.from(piece(rnd)));
  return cps.slice(0, len).join('');
}

function asciiJson(s) {
  return JSON.stringify(s).replace(/[\u007f-\uffff]/g, (ch) => '\\u' + ch.charCodeAt(0).toString(16).padStart(4, '0'));
}

function writeStrings(n, seed, file) {
  if (!(n >= 0) || !Number.isInteger(seed)) throw new Error('gen_strings: N and SEED must be integers');
  const rnd = mulberry32(seed);
  const fd = fs.openSync(file, 'w');
  let buf = [];
  for (let i = 0; i < n; i++) {
    const s = makeString(rnd);
    buf.push(i % 4 === 3 ? asciiJson(s) : JSON.stringify(s));
    if (buf.length >= 10000) {
      fs.writeSync(fd, buf.join('\n') + '\n');
      buf = [];
    }
  }
  if (buf.length) fs.writeSync(fd, buf.join('\n') + '\n');
  fs.closeSync(fd);
}

if (require.main === module) {
  const a = process.argv.slice(2);
  if (a.length !== 3) {
    process.stderr.write('usage: gen_strings.js N SEED OUT\n');
    process.exit(2);
  }
  writeStrings(Number(a[0]), Number(a[1]), a[2]);
}

module.exports = { writeStrings, makeString, mulberry32 };
