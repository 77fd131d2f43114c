#!/usr/bin/env bash
# Golden parity with Hugging Face transformers for both families: writes golden files with
# transformers' own models (tools/venv, scripts/setup.sh installs it; tests/peers/hf_golden.py) —
# GPT2LMHeadModel, and LlamaForCausalLM for three shapes: n_kv_head = n_head (classic attention)
# with an untied head, n_kv_head 2 with Llama 3's rope scaling and theta 500000, n_kv_head 1
# (multi-query) with tied embeddings — then runs the C++ comparison (tests/model/gpt_vs_torch_test.cc)
# on both host backends.
#   tests/peers/models_vs_hf.sh PEER_TEST_BINARY
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-build/release/tests/anneal_peer_tests}
PY=tools/venv/bin/python
"$PY" -c 'import transformers' 2>/dev/null || { echo "missing: transformers in tools/venv (scripts/setup.sh installs it)" >&2; exit 2; }
TMP=$(mktemp -d /tmp/anneal_golden.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
G="$TMP/gpt2_hf.safetensors:$TMP/llama_kv4.safetensors:$TMP/llama_kv2_rope3.safetensors:$TMP/llama_kv1_tied.safetensors"
"$PY" tests/peers/hf_golden.py --family gpt2 --out "$TMP/gpt2_hf.safetensors"
"$PY" tests/peers/hf_golden.py --family llama --out "$TMP/llama_kv4.safetensors" --KV 4
"$PY" tests/peers/hf_golden.py --family llama --out "$TMP/llama_kv2_rope3.safetensors" --KV 2 --theta 500000 \
  --maxT 128 --rope-factor 8 --rope-low 1 --rope-high 4 --rope-orig 64
"$PY" tests/peers/hf_golden.py --family llama --out "$TMP/llama_kv1_tied.safetensors" --KV 1 --tied 1 --F 80
source tests/testing/gtest_run.sh
ANNEAL_GOLDEN="$G" OMP_NUM_THREADS=2 gtest_run "$BIN" 'Backends/GptVsTorch.*'
