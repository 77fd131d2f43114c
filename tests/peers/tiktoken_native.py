"""Oracle: OpenAI's tiktoken, native (its Rust core, the PyPI wheel in tools/venv), with the rank
files of the npm tiktoken package under tools/npm (encoders/NAME.json) — loaded through tiktoken's
own Encoding constructor, so nothing is fetched at run time.

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

NPM_ENCODERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "npm",
                            "node_modules", "tiktoken", "encoders")


def load_encoding(name):
    """tiktoken.Encoding from npm tiktoken's encoders/NAME.json: its bpe_ranks are lines of
    'PREFIX OFFSET TOKEN TOKEN ...' (base64 tokens ranked OFFSET, OFFSET+1, ...)."""
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
