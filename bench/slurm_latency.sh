#!/usr/bin/env bash
# Start latency on Slurm (issue 21), side by side in one run on a real Slurm 22.05 of two virtual nodes
# (scripts/start_slurm.sh), median of 5:
#   - job: from the moment `anneal submit` is invoked to the rank's first instruction (the rank prints
#     its own clock), a 1-instance job on `anneal server --backend slurm` (health checks on, as the
#     server runs by default);
#   - peer: `sbatch --wrap` of the same command alone, from the moment sbatch is invoked to the same
#     instruction (Slurm's own scheduling and launch, the floor any Slurm backend sits on);
#   - warm: the same job reusing the previous job's warm pool (keep_alive_s), its allocation kept.
# BENCH_SMOKE=1: one of each (figures mean nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
ANNEAL=$(readlink -f "${1:-build/release/src/anneal}")
PY=/usr/bin/python3
REPS=5
[ "${BENCH_SMOKE:-0}" = 1 ] && REPS=1
need() { for v in "$@"; do [ -n "${!v:-}" ] || { echo "slurm_latency: no figure for $v" >&2; exit 1; }; done; }
TMP=$(mktemp -d /var/tmp/anneal_slurm_latency.XXXXXX); chmod 711 "$TMP"  # its jobs read files in it (tests/e2e/lib.sh)
SERVER=""
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  bash scripts/start_slurm.sh --stop "$TMP/slurm"
  pkill -9 -f -- "--work-dir $TMP/" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
eval "$(bash scripts/start_slurm.sh "$TMP/slurm")"
"$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --backend slurm >"$TMP/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 1 150); do [ -s "$TMP/srv/server.json" ] && break; sleep 0.1; done
URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$TMP/srv/server.json")
export ANNEAL_TOKEN_FILE="$TMP/srv/admin.token"
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
since() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f\n", b - a }'; }
idle() { for _ in $(seq 1 300); do [ -z "$(squeue -h)" ] && return 0; sleep 0.05; done; return 1; }
# first_line ID: the rank's first line (its clock), waiting for it
first_line() {
  local line=""
  for _ in $(seq 1 1500); do
    line=$("$ANNEAL" logs "$1" --server "$URL" --rank 0 | head -1)
    [ -n "$line" ] && break
    sleep 0.02
  done
  echo "${line##* }"
}
job_yaml() {  # KEEP_ALIVE_S
  printf 'name: hello\nentrypoint: {command: "date +%%s.%%N"}\nresources: {instance_count: 1, keep_alive_s: %s}\n' "$1" >"$TMP/hello.yaml"
}
: >"$TMP/job.lat"; : >"$TMP/sbatch.lat"; : >"$TMP/warm.lat"
for i in $(seq 1 "$REPS"); do
  idle
  job_yaml 0
  t0=$(date +%s.%N)
  id=$("$ANNEAL" submit "$TMP/hello.yaml" --server "$URL")
  t1=$(first_line "$id"); need t1
  since "$t0" "$t1" >>"$TMP/job.lat"
  idle
  t0=$(date +%s.%N)
  sbatch --parsable --nodes=1 --output="$TMP/peer-$i.out" --wrap 'date +%s.%N' >/dev/null
  for _ in $(seq 1 1500); do [ -s "$TMP/peer-$i.out" ] && break; sleep 0.02; done
  t1=$(head -1 "$TMP/peer-$i.out"); need t1
  since "$t0" "$t1" >>"$TMP/sbatch.lat"
done
# Warm: a first job leaves its instance (and allocation) as a warm pool; each next one reuses it.
idle
job_yaml 60
id=$("$ANNEAL" submit "$TMP/hello.yaml" --server "$URL"); first_line "$id" >/dev/null
for i in $(seq 1 "$REPS"); do
  for _ in $(seq 1 300); do
    [ "$("$ANNEAL" describe "$id" --server "$URL" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["status"])')" = Completed ] && break
    sleep 0.05
  done
  t0=$(date +%s.%N)
  id=$("$ANNEAL" submit "$TMP/hello.yaml" --server "$URL")
  t1=$(first_line "$id"); need t1
  since "$t0" "$t1" >>"$TMP/warm.lat"
done
reused=$("$ANNEAL" describe "$id" --server "$URL" --json | grep -c 'warm pool' || true)
job=$(median <"$TMP/job.lat"); peer=$(median <"$TMP/sbatch.lat"); warm=$(median <"$TMP/warm.lat")
need job peer warm
printf "start latency on Slurm, median of %d (2 virtual nodes, loopback):\n" "$REPS"
printf "  %-58s %8.3f s\n" "anneal submit -> first rank instruction (cold)" "$job"
printf "  %-58s %8.3f s\n" "sbatch --wrap -> the same instruction (peer)" "$peer"
printf "  %-58s %8.3f s\n" "anneal submit -> first rank instruction (warm pool)" "$warm"
ratio=$(echo "$job / $peer" | bc -l | cut -c1-5); warm_ratio=$(echo "$warm / $peer" | bc -l | cut -c1-5)
need ratio warm_ratio
[ "$reused" -gt 0 ] || { echo "slurm_latency: the last job did not reuse the warm pool" >&2; exit 1; }
echo "RESULT bench=slurm_latency job_start_s=$job sbatch_start_s=$peer warm_start_s=$warm ratio=$ratio warm_ratio=$warm_ratio"
