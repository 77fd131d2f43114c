#!/usr/bin/env bash
# Shard folders written by scripts/make_fixtures.py (llm.c's own format, both magics, no
# dataset.json) as anneal's loader reads them; damaged shards are refused with exit 2.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 scripts/make_fixtures.py "$TMP/fx"
out=$("$ANNEAL" dataset "$TMP/fx/u16" --seq-len 64 --vocab-size 50257)
check "uint16 llm.c folder reads" grep -q "train 2 shards, 3413 tokens" <<<"$out"
check "uint16 llm.c val split" grep -q "val   1 shards, 302 tokens" <<<"$out"
out=$("$ANNEAL" dataset "$TMP/fx/u32" --seq-len 64 --vocab-size 100277)
check "uint32 llm.c folder reads" grep -q "train 1 shards, 3000 tokens" <<<"$out"
expect_exit "uint32 ids refused for a GPT-2 model" 2 "another tokenizer" \
  "$ANNEAL" dataset "$TMP/fx/u32" --vocab-size 50257
expect_exit "truncated shard named with the fix" 2 "tiny_train_000000.bin.*truncated.*anneal prep" \
  "$ANNEAL" dataset "$TMP/fx/truncated"
expect_exit "bad magic" 2 "magic 12345" "$ANNEAL" dataset "$TMP/fx/badmagic"

# A prepared dataset with one flipped byte: the checksum in dataset.json catches it.
"$ANNEAL" prep --input data/kjv/01_Genesis.txt --output "$TMP/ds" --quiet >/dev/null
printf '\x00' | dd of="$TMP/ds/train_000000.bin" bs=1 seek=5000 conv=notrunc 2>/dev/null
expect_exit "flipped byte caught by checksum" 2 "train_000000.bin is corrupt.*XXH64" "$ANNEAL" dataset "$TMP/ds"
expect_exit "a dataset of another vocabulary" 2 "vocabulary 50257.*32000" \
  "$ANNEAL" dataset "$TMP/ds" --vocab-size 32000 --no-verify
finish
