"""Oracle: OpenAI's tiktoken, native (its Rust core, the PyPI wheel in tools/venv), with the rank
files of the npm tiktoken package under tools/npm (encoders/NAME.json) — loaded through tiktoken's
own Encoding constructor, so nothing is fetched at run time. --encoding llama3 is Llama 3's
tokenizer as Meta's reference code builds it (a tiktoken Encoding with Meta's pattern and 256
special tokens from 128,000), its ranks the vocabulary npm llama3-tokenizer-js ships.

    tools/venv/bin/python tests/peers/tiktoken_native.py [--encoding gpt2] --whole FILE
        the whole file is one text; prints one line of ids (the format of `anneal tokenize FILE`)
    tools/venv/bin/python tests/peers/tiktoken_native.py [--encoding gpt2] FILE
        FILE holds one JSON string per line; prints one line of ids per non-empty input line (the
        format of `anneal tokenize --json-lines`)
    tools/venv/bin/python tests/peers/tiktoken_native.py [--encoding gpt2] --bench FILE RUNS [THREADS]
        the best of RUNS encode calls of the whole file (encode_ordinary on 1 thread; with THREADS,
        encode_ordinary_batch on that many threads over the file cut at line ends into 64 pieces of
        about equal size): prints JSON {"seconds", "tokens"}

Files are read as they are (no newline translation: a "\r\n" stays two characters). Text is encoded with encode_ordinary: no special token is recognised, so `<|endoftext|>` is
ordinary text (what `anneal tokenize` does).
"""
import base64
import json
import os
import sys
import time

import tiktoken

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing"))
from gpt2_bytes import bytes_to_unicode  # noqa: E402

NPM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "npm", "node_modules")
NPM_ENCODERS = os.path.join(NPM, "tiktoken", "encoders")
LLAMA3_DATA = os.path.join(NPM, "llama3-tokenizer-js", "src", "data-converted.js")
# Meta's Llama 3 pattern (its tokenizer.py) and special tokens (Llama 3.1's names).
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPECIALS = (["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                    "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
                    "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"] +
                   [f"<|reserved_special_token_{i}|>" for i in range(3, 248)])


def byte_decoder():
    """GPT-2's bytes_to_unicode, inverted: each character of a byte-level token -> its byte."""
    return {c: b for b, c in bytes_to_unicode().items()}


def load_llama3():
    """Llama 3's ranks from llama3-tokenizer-js's data: base64 of the byte-level tokens, one a line,
    in id order (an id is its rank)."""
    js = open(LLAMA3_DATA, encoding="utf-8").read()
    start = js.index('llama_vocab_base64 = "') + len('llama_vocab_base64 = "')
    vocab = base64.b64decode(js[start:js.index('"', start)]).decode("utf-8").split("\n")
    dec = byte_decoder()
    ranks = {bytes(dec[ch] for ch in tok): i for i, tok in enumerate(vocab)}
    assert len(ranks) == 128000, len(ranks)
    specials = {name: 128000 + i for i, name in enumerate(LLAMA3_SPECIALS)}
    return tiktoken.Encoding("llama3", pat_str=LLAMA3_PATTERN, mergeable_ranks=ranks, special_tokens=specials)


def load_encoding(name):
    """tiktoken.Encoding from npm tiktoken's encoders/NAME.json: its bpe_ranks are lines of
    'PREFIX OFFSET TOKEN TOKEN ...' (base64 tokens ranked OFFSET, OFFSET+1, ...)."""
    if name == "llama3":
        return load_llama3()
    with open(os.path.join(NPM_ENCODERS, name + ".json")) as f:
        spec = json.load(f)
    ranks = {}
    for line in spec["bpe_ranks"].split("\n"):
        if not line:
            continue
        fields = line.split(" ")
        offset = int(fields[1])
        for i, tok in enumerate(fields[2:]):
            ranks[base64.b64decode(tok)] = offset + i
    return tiktoken.Encoding(name, pat_str=spec["pat_str"], mergeable_ranks=ranks,
                             special_tokens=spec["special_tokens"],
                             explicit_n_vocab=spec.get("explicit_n_vocab"))


def split_at_lines(text, n):
    """text cut into about n pieces of about equal size, each ending at a line end."""
    pieces, start, size = [], 0, max(1, len(text) // n)
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        pieces.append(text[start:end])
        start = end
    return pieces


def main(argv):
    name = "gpt2"
    if argv[:1] == ["--encoding"]:
        name, argv = argv[1], argv[2:]
    enc = load_encoding(name)
    out = sys.stdout
    if argv[:1] == ["--bench"]:
        text = open(argv[1], encoding="utf-8", newline="").read()
        runs, threads = int(argv[2]), int(argv[3]) if len(argv) > 3 else 0
        pieces = split_at_lines(text, 64) if threads else None
        best, n = float("inf"), -1
        for _ in range(runs):
            t0 = time.perf_counter()
            if threads:
                n = sum(len(ids) for ids in enc.encode_ordinary_batch(pieces, num_threads=threads))
            else:
                n = len(enc.encode_ordinary(text))
            best = min(best, time.perf_counter() - t0)
        print(json.dumps({"seconds": best, "tokens": n}))
        return 0
    if argv[:1] == ["--whole"]:
        text = open(argv[1], encoding="utf-8", newline="").read()
        out.write(" ".join(map(str, enc.encode_ordinary(text))) + "\n")
        return 0
    with open(argv[0], encoding="utf-8", newline="") as f:
        for line in f:
            if line.strip():
                out.write(" ".join(map(str, enc.encode_ordinary(json.loads(line)))) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
