# Part 3 of bench/job_latency.sh: a 2-instance job's start, which is where the instances meet (the
# pre-start health round's collective, then the start itself: docs/health-checks.md, issue 35). Sourced
# by job_latency.sh after server_lib.sh; uses its TMP, PY, REPS, median and need.
#   multi_start BIN [BEFORE_BIN]: one server of each binary (local backend, --max-instances 2, the
#   default health checks: the collective on), their jobs submitted alternately (BIN, BEFORE_BIN, BIN,
#   ...); prints the median from `anneal submit` to the later of the two ranks' first instruction, and
#   the job's phases; with BEFORE_BIN, the ratio after/before.
# shellcheck shell=bash

# multi_server NAME BIN: starts BIN's server in $TMP/NAME; sets MS_URL_<NAME>, MS_PID_<NAME>
multi_server() {
  "$2" server --data-dir "$TMP/$1/srv" --listen 127.0.0.1:0 --max-instances 2 >"$TMP/$1.log" 2>&1 &
  printf -v "MS_PID_$1" %s "$!"
  for _ in $(seq 1 100); do [ -s "$TMP/$1/srv/server.json" ] && break; sleep 0.1; done
  printf -v "MS_URL_$1" %s "$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$TMP/$1/srv/server.json")"
}
# multi_stop NAME: stop_server on that server (its agents first)
multi_stop() {
  local pid="MS_PID_$1"
  [ -n "${!pid:-}" ] || return 0
  (TMP="$TMP/$1" SERVER="${!pid}"; stop_server)
  printf -v "MS_PID_$1" %s ""
}
# multi_job NAME BIN: one 2-instance job on that server; appends "latency starting_s downloading_s" to $TMP/NAME.lat
multi_job() {
  local url="MS_URL_$1" t0 id l0 l1
  export ANNEAL_TOKEN_FILE="$TMP/$1/srv/admin.token"
  t0=$(date +%s.%N)
  id=$("$2" submit "$TMP/hello2.yaml" --server "${!url}")
  for _ in $(seq 1 1500); do
    l0=$("$2" logs "$id" --server "${!url}" --rank 0 | head -1)
    l1=$("$2" logs "$id" --server "${!url}" --rank 1 | head -1)
    [ -n "$l0" ] && [ -n "$l1" ] && break
    sleep 0.02
  done
  need l0 l1
  for _ in $(seq 1 600); do
    [ "$("$2" describe "$id" --server "${!url}" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["status"])')" = Completed ] && break
    sleep 0.05
  done
  "$2" describe "$id" --server "${!url}" --json | $PY -c '
import json, sys
t0, a, b = map(float, sys.argv[1:4])
j = json.load(sys.stdin); h = {x["secondary_status"]: x["at"] for x in j["history"]}
print("%.4f %.4f %.4f" % (max(a, b) - t0, h["Downloading"] - h["Starting"], h["Training"] - h["Downloading"]))' \
    "$t0" "${l0##* }" "${l1##* }" >>"$TMP/$1.lat"
}
multi_start() {
  local names=(after) bins=("$1") i
  [ -z "${2:-}" ] || { names+=(before); bins+=("$(readlink -f "$2")"); }
  cat >"$TMP/hello2.yaml" <<'YAML'
name: hello2
resources: {instance_count: 2, procs_per_instance: 1}
entrypoint: {command: 'date +%s.%N'}
YAML
  for i in "${!names[@]}"; do multi_server "${names[$i]}" "${bins[$i]}"; : >"$TMP/${names[$i]}.lat"; done
  echo "2-instance start (median of $REPS; health round with its collective, then the start):"
  for _ in $(seq 1 "$REPS"); do
    for i in "${!names[@]}"; do multi_job "${names[$i]}" "${bins[$i]}"; sleep 0.5; done
  done
  local result="RESULT"
  for i in "${!names[@]}"; do
    local n=${names[$i]} s d r
    s=$(cut -d' ' -f1 "$TMP/$n.lat" | median); d=$(cut -d' ' -f2 "$TMP/$n.lat" | median); r=$(cut -d' ' -f3 "$TMP/$n.lat" | median)
    need s d r
    printf "  %-58s %8.3f s\n" "$n (${bins[$i]}): submit -> both ranks' first instruction" "$s"
    printf "  %-58s %8.3f s\n" "  Starting -> Downloading (instances, health round)" "$d"
    printf "  %-58s %8.3f s\n" "  Downloading -> Training (agent: package, meeting, launch)" "$r"
    result+=" multi_start_${n}_s=$s multi_health_${n}_s=$d multi_prepare_${n}_s=$r"
    multi_stop "$n"
  done
  if [ -n "${2:-}" ]; then
    result+=" ratio_after_before=$(awk -v a="$(cut -d' ' -f1 "$TMP/after.lat" | median)" -v b="$(cut -d' ' -f1 "$TMP/before.lat" | median)" 'BEGIN { printf "%.3f", a / b }')"
  fi
  echo "$result"
}
