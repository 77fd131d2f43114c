#!/usr/bin/python3
"""Writes small llm.c token-shard folders for tests (docs/formats/shard.md).

  scripts/make_fixtures.py OUT_DIR

OUT_DIR/u16/       tiny_train_000000.bin, tiny_train_000001.bin, tiny_val_000000.bin
                   (magic 20240520, version 1, uint16 tokens, GPT-2 ids, each document after 50256)
OUT_DIR/u32/       big_train_000000.bin (magic 20240801, version 7, uint32 ids above 65,535)
OUT_DIR/truncated/ tiny_train_000000.bin whose body is 10 bytes short of its header's count
OUT_DIR/badmagic/  tiny_train_000000.bin with a wrong magic number
Standard library only; the content is a fixed function of the position, so runs are identical.
"""
import os
import struct
import sys

EOT = 50256


def shard(path, tokens, wide=False, magic=None, cut=0):
    header = [0] * 256
    header[0] = magic if magic is not None else (20240801 if wide else 20240520)
    header[1] = 7 if wide else 1
    header[2] = len(tokens)
    body = struct.pack("<%d%s" % (len(tokens), "I" if wide else "H"), *tokens)
    data = struct.pack("<256i", *header) + body
    if cut:
        data = data[:-cut]
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, path)


def doc_tokens(seed, docs, length):
    out = []
    for d in range(docs):
        out.append(EOT)
        out.extend((seed * 7919 + d * 104729 + i * 31) % 50000 for i in range(length))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_fixtures.py OUT_DIR")
    root = sys.argv[1]
    for sub in ("u16", "u32", "truncated", "badmagic"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    shard(os.path.join(root, "u16", "tiny_train_000000.bin"), doc_tokens(1, 8, 300))
    shard(os.path.join(root, "u16", "tiny_train_000001.bin"), doc_tokens(2, 5, 200))
    shard(os.path.join(root, "u16", "tiny_val_000000.bin"), doc_tokens(3, 2, 150))
    shard(os.path.join(root, "u32", "big_train_000000.bin"),
          [70000 + (i * 13) % 30000 for i in range(3000)], wide=True)
    shard(os.path.join(root, "truncated", "tiny_train_000000.bin"), doc_tokens(4, 3, 100), cut=10)
    shard(os.path.join(root, "badmagic", "tiny_train_000000.bin"), doc_tokens(5, 3, 100), magic=12345)


if __name__ == "__main__":
    main()
