#!/usr/bin/env bash
# make run: the main job through the path users take. Prepare the demo corpus (the King James
# Bible, data/kjv/, one document per book) into token shards, check it, submit the training job
# (examples/jobs/kjv_tiny.yaml) with `anneal submit --local` — an embedded server and the local
# backend start an agent, which copies the dataset channel, runs the built-in trainer as rank 0 and
# ships its logs and metrics — for a few minutes on this machine's cores (validation loss printed
# beside the corpus's unigram entropy), show the job's metrics, then sample from the checkpoint. Re-running continues from the newest checkpoint (resume: auto);
# `rm -rf out/kjv_ckpt` starts over. DEMO_SECONDS sets the training time (default 240; the config's 600 steps take about 3 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
ANNEAL=${1:-build/release/src/anneal}
SECONDS_BUDGET=${DEMO_SECONDS:-240}
echo "== anneal prep: data/kjv -> out/kjv"
"$ANNEAL" prep --input data/kjv --output out/kjv --tokenizer gpt2 --val-fraction 0.05 --unit-mb 1 --workers 2
echo "== anneal dataset out/kjv"
"$ANNEAL" dataset out/kjv --seq-len 128
echo "== anneal submit examples/jobs/kjv_tiny.yaml --local (training up to ${SECONDS_BUDGET} s)"
export ANNEAL_HOME=${ANNEAL_HOME:-$PWD/out/anneal_home}
mkdir -p out
"$ANNEAL" submit examples/jobs/kjv_tiny.yaml --local -H train.max_seconds="$SECONDS_BUDGET" | tee out/submit.log
job=$(head -1 out/submit.log)   # submit prints the job id first, then the job's log lines
echo "== anneal metrics $job --local"
"$ANNEAL" metrics "$job" --local
echo "== anneal sample --checkpoint out/kjv_ckpt"
"$ANNEAL" sample --checkpoint out/kjv_ckpt --prompt "And God said" --max-tokens 60 --temperature 0.8 --top-k 40 --seed 1
