# Shared by the training benchmarks (zero_memory, recompute, dp_scaling): sourced after `set -euo
# pipefail`. Sets ANNEAL (first argument or the release build) and DATA (a prepared dataset, out/kjv
# by default: `make run` prepares it), and write_config writes the YAML on standard input, with
# $DATA substituted, to a temporary file named by $cfg (removed on exit).
ANNEAL=${1:-build/release/src/anneal}
DATA=${DATA:-out/kjv}
[ -f "$DATA/dataset.json" ] || { echo "needs a prepared dataset in $DATA (make run prepares out/kjv)"; exit 2; }
cfg=$(mktemp --suffix=.yaml)
trap 'rm -f "$cfg"' EXIT
write_config() { cat >"$cfg"; }
