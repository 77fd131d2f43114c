#!/usr/bin/env bash
# make run: the main job through the same path users take. Today that is the data pipeline: prepare
# the demo corpus (the King James Bible, data/kjv/, one document per book) into token shards, check
# the dataset as training will read it, and show a sample. Training joins here with the CPU engine.
set -euo pipefail
cd "$(dirname "$0")/.."
ANNEAL=${1:-build/release/src/anneal}
OUT=out/kjv
echo "== anneal prep: data/kjv -> $OUT"
"$ANNEAL" prep --input data/kjv --output "$OUT" --tokenizer gpt2 --val-fraction 0.05 --unit-mb 1 --workers 2
echo "== anneal dataset: $OUT"
"$ANNEAL" dataset "$OUT" --seq-len 256 --show 48 --seed 1
echo "== anneal tokenize"
echo -n "In the beginning God created the heaven and the earth." | "$ANNEAL" tokenize
