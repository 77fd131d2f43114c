#!/usr/bin/env bash
# make run: the main job through the path users take. Prepare the demo corpus (the King James
# Bible, data/kjv/, one document per book) into token shards, check it, train a small GPT on it for a
# few minutes on this machine's cores (validation loss printed beside the corpus's unigram entropy),
# then sample from the checkpoint. Re-running continues from the newest checkpoint (resume: auto);
# `rm -rf out/kjv_ckpt` starts over. DEMO_SECONDS sets the training time (default 240; the config's 600 steps take about 3 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
ANNEAL=${1:-build/release/src/anneal}
SECONDS_BUDGET=${DEMO_SECONDS:-240}
echo "== anneal prep: data/kjv -> out/kjv"
"$ANNEAL" prep --input data/kjv --output out/kjv --tokenizer gpt2 --val-fraction 0.05 --unit-mb 1 --workers 2
echo "== anneal dataset out/kjv"
"$ANNEAL" dataset out/kjv --seq-len 128
echo "== anneal train --config examples/kjv_tiny.yaml (up to ${SECONDS_BUDGET} s)"
"$ANNEAL" train --config examples/kjv_tiny.yaml --set train.max_seconds="$SECONDS_BUDGET"
echo "== anneal sample --checkpoint out/kjv_ckpt"
"$ANNEAL" sample --checkpoint out/kjv_ckpt --prompt "And God said" --max-tokens 60 --temperature 0.8 --top-k 40 --seed 1
