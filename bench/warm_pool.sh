#!/usr/bin/env bash
# Warm pools (issue 9): a job's start-up on a warm pool (resources.keep_alive_s: the previous job's
# instances, agents registered and idle) against a cold start (fresh instances: agents started by the
# local backend, registering), in one run on this machine. Jobs of 2 instances x 1 rank running
# `date +%s.%N`; start-up = from `anneal submit` to the rank's first instruction (its own clock),
# median of 5 each, with the pre-start health checks on (both pay them: every start checks again)
# and with them off. The job's history splits it: obtaining the instances (Starting -> Downloading,
# registration and health checks) and the agents' preparation (Downloading -> Training).
# BENCH_SMOKE=1: 1 start of each (and the one that leaves the warm pool) per setting: figures mean nothing.
set -euo pipefail
ANNEAL=$(readlink -f "${1:-build/release/src/anneal}")
PY=/usr/bin/python3
REPS=5; [ "${BENCH_SMOKE:-}" = 1 ] && REPS=1
# need NAME...: fails, naming them, unless every variable has a value (no RESULT with empty fields)
need() { for v in "$@"; do [ -n "${!v:-}" ] || { echo "warm_pool: no figure for $v" >&2; exit 1; }; done; }
TMP=$(mktemp -d /var/tmp/anneal_warm_pool.XXXXXX); chmod 711 "$TMP"  # its jobs read files in it (tests/e2e/lib.sh)
source "$(dirname "$0")/server_lib.sh"  # running, stop_server
trap 'stop_server; rm -rf "$TMP"' EXIT
start_server() {
  stop_server
  rm -rf "$TMP/srv"
  "$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --max-instances 4 "$@" >>"$TMP/server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 1 100); do [ -s "$TMP/srv/server.json" ] && break; sleep 0.1; done
  URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$TMP/srv/server.json")
  export ANNEAL_TOKEN_FILE="$TMP/srv/admin.token"
}
spec() {  # KEEP_ALIVE_S
  cat >"$TMP/job.yaml" <<YAML
name: wp
entrypoint: {command: 'date +%s.%N'}
resources: {instance_count: 2, keep_alive_s: $1}
YAML
}
# run_one: submits, waits for the rank's first line and the job's end; appends "latency obtain prepare reused"
run_one() {
  local t0 id line
  t0=$(date +%s.%N)
  id=$("$ANNEAL" submit "$TMP/job.yaml" --server "$URL")
  for _ in $(seq 1 1000); do
    line=$("$ANNEAL" logs "$id" --server "$URL" --rank 0)
    line=${line%%$'\n'*}
    [ -n "$line" ] && break
    sleep 0.01
  done
  local d
  for _ in $(seq 1 300); do
    d=$("$ANNEAL" describe "$id" --server "$URL" --json)  # (not piped into grep -q: SIGPIPE under pipefail)
    [[ "$d" == *'"status": "Completed"'* ]] && break
    sleep 0.05
  done
  "$ANNEAL" describe "$id" --server "$URL" --json | $PY -c '
import json, sys
t0, first = float(sys.argv[1]), float(sys.argv[2])
j = json.load(sys.stdin); h = {}
for x in j["history"]: h.setdefault(x["secondary_status"], x)
reused = "reusing the warm pool" in h["Starting"]["message"]
print("%.4f %.4f %.4f %d" % (first - t0, h["Downloading"]["at"] - h["Starting"]["at"], h["Training"]["at"] - h["Downloading"]["at"], reused))' "$t0" "${line##* }"
}
stats() {  # FILE -> "median obtain prepare reused_count"
  sort -n "$1" | awk '{ v[NR] = $1; o += $2; p += $3; r += $4 } END { printf "%.3f %.3f %.3f %d", v[int((NR + 1) / 2)], o / NR, p / NR, r }'
}
for health in on off; do
  flags=(); [ "$health" = off ] && flags=(--no-health-checks)
  start_server "${flags[@]}"
  spec 0
  : >"$TMP/cold"; for _ in $(seq 1 $REPS); do run_one >>"$TMP/cold"; sleep 0.3; done
  spec 120
  run_one >/dev/null  # leaves the first warm pool
  : >"$TMP/warm"; for _ in $(seq 1 $REPS); do run_one >>"$TMP/warm"; done
  read -r cm co cp cr <<<"$(stats "$TMP/cold")"
  read -r wm wo wp wr <<<"$(stats "$TMP/warm")"
  need cm co cp cr wm wo wp wr
  echo "health checks $health (median of $REPS, 2 instances):"
  printf "  %-48s %7.3f s  (obtaining %.3f, preparing %.3f)\n" "cold start: fresh instances (peer)" "$cm" "$co" "$cp"
  printf "  %-48s %7.3f s  (obtaining %.3f, preparing %.3f; %d of %d reused)\n" "warm start: the previous job's warm pool" "$wm" "$wo" "$wp" "$wr" $REPS
  saved=$(echo "$cm - $wm" | bc -l | cut -c1-6); ratio=$(echo "$cm / $wm" | bc -l | cut -c1-5); need saved ratio
  echo "RESULT health=$health cold_s=$cm warm_s=$wm saved_s=$saved ratio=$ratio"
done
