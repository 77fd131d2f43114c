#!/usr/bin/env bash
# bench/train_llama_cpu_vs_torch: bench/train_cpu_vs_torch for the Llama family — the llama-tiny shape
# against transformers' LlamaForCausalLM trained by torch 2 (eager and compiled), the same threads and
# memory settings on both sides (see that script).
#   bench/train_llama_cpu_vs_torch.sh [ANNEAL] [STEPS]
exec env FAMILY=llama bash "$(dirname "$0")/train_cpu_vs_torch.sh" "$@"
