#!/usr/bin/env bash
# The job API under closed-loop load from wrk (Debian's wrk, 2 threads, 16 connections, 10 s per
# endpoint) on loopback, against `anneal server --backend static` (no agents: submitted jobs stay
# Pending, so the store keeps every one). Measured, one after another in this run:
#   health    GET /v1/health — the HTTP layer alone (cpp-httplib): the ceiling the others are held to
#   submit    POST /v1/jobs — parse and validate a spec, a unique Idempotency-Key (as anneal submit
#             sends), the job synced to disk (WAL, synchronous=FULL, group commit) before the 201
#   describe  GET /v1/jobs/<id> — job, history, instances, node reports, rank means
#   list      GET /v1/jobs?limit=100, with at least 10,000 jobs in the store
# Prints 2xx answers per second (an error answer is counted apart, never as throughput), p50 and p99
# latency, the errors (non-2xx answers and socket errors), and each endpoint's ratio to health.
# BENCH_SMOKE=1: 1 s per endpoint (API_LOAD_SECONDS still wins); the store topped up once, by 1 s of submits,
# over what the submit measurement left: figures mean nothing.
set -euo pipefail
ANNEAL=$(readlink -f "${1:-build/release/src/anneal}")
if [ "${BENCH_SMOKE:-}" = 1 ]; then
  DUR=${API_LOAD_SECONDS:-1} STORED= TOPUP_S=1  # (STORED: one more than the submits left)
else
  DUR=${API_LOAD_SECONDS:-10} STORED=10000 TOPUP_S=2
fi
# need NAME...: fails, naming them, unless every variable has a value (no RESULT with empty fields)
need() { for v in "$@"; do [ -n "${!v:-}" ] || { echo "api_load: no figure for $v" >&2; exit 1; }; done; }
command -v wrk >/dev/null || { echo "wrk not installed: run scripts/setup.sh"; exit 1; }
TMP=$(mktemp -d /var/tmp/anneal_api_load.XXXXXX); chmod 711 "$TMP"  # its jobs read files in it (tests/e2e/lib.sh)
"$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --backend static >"$TMP/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; rm -rf "$TMP"' EXIT  # (no agents: static backend)
for _ in $(seq 1 100); do [ -s "$TMP/srv/server.json" ] && break; sleep 0.1; done
URL=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' "$TMP/srv/server.json")
export ANNEAL_TOKEN_FILE="$TMP/srv/admin.token"  # the admin token the server created
cat >"$TMP/submit.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"name":"load","entrypoint":{"command":["anneal","train","--config","x.yaml"],"hyperparameters":{"train.steps":"100"}},"resources":{"instance_count":2,"procs_per_instance":2},"metric_definitions":[{"name":"loss","regex":"loss ([0-9.]+)"}]}'
-- A key per request, unique across wrk's threads (each has its own Lua state) and runs.
local threads, n = 0, 0
function setup(thread) threads = threads + 1; thread:set("tid", threads) end
function request()
  n = n + 1
  local h = {}
  for k, v in pairs(wrk.headers) do h[k] = v end  -- (wrk.format's headers replace wrk.headers)
  h["Idempotency-Key"] = string.format("k%d-%d-%d", os.time(), tid or 0, n)
  return wrk.format(nil, nil, h)
end
LUA
# run NAME PATH [SCRIPT]: prints "rps p50_ms p99_ms errors": rps counts only 2xx answers (wrk's own
# Requests/sec counts every answer, an error page too); errors = non-2xx answers + socket errors.
run() {
  local out
  out=$(wrk -t2 -c16 -d"${DUR}s" --latency -H "Authorization: Bearer $(cat "$ANNEAL_TOKEN_FILE")" ${3:+-s "$3"} "$URL$2" 2>&1)
  local rps p50 p99 errors
  # "  41234 requests in 10.00s, 9.1MB read" / "  Non-2xx or 3xx responses: 12" / "  Socket errors: connect 0, read 3, write 0, timeout 0"
  read -r rps errors < <(awk '/ requests in / { n = $1; t = $4; sub(/,$/, "", t)
      if (t ~ /ms$/) t = substr(t, 1, length(t) - 2) / 1000; else if (t ~ /m$/) t = substr(t, 1, length(t) - 1) * 60
      else if (t ~ /h$/) t = substr(t, 1, length(t) - 1) * 3600; else sub(/s$/, "", t) } /Non-2xx or 3xx responses:/ { e = $NF }
    /Socket errors:/ { for (i = 3; i <= NF; i += 2) { v = $(i + 1); sub(/,/, "", v); s += v } }
    END { if (n > 0 && t > 0) printf "%.2f %d\n", (n - e) / t, e + s }' <<<"$out")
  p50=$(awk '$1 == "50%" { print $2 }' <<<"$out")
  p99=$(awk '$1 == "99%" { print $2 }' <<<"$out")
  # (a broken run fails here: no figures, or not one request answered 2xx)
  if [ -z "$rps" ] || [ -z "$p50" ] || [ -z "$p99" ] || awk -v r="$rps" 'BEGIN { exit !(r <= 0) }'; then
    echo "api_load: $1 ($2) measured nothing:" >&2; echo "$out" >&2; return 1
  fi
  [ "$errors" -eq 0 ] || echo "api_load: $1 ($2): $errors answer(s) were not 2xx or failed on the socket:
$(grep -E 'Non-2xx|Socket errors' <<<"$out")" >&2
  echo "$rps $(ms "$p50") $(ms "$p99") $errors"
}
ms() { awk -v v="$1" 'BEGIN { u = v; sub(/[0-9.]+/, "", u); n = v + 0; if (u == "us") n /= 1000; else if (u == "s") n *= 1000; printf "%.2f", n }'; }
count() { curl -s -H "Authorization: Bearer $(cat "$ANNEAL_TOKEN_FILE")" "$URL/v1/jobs?limit=1" | sed -n 's/.*"id":"load-\([0-9]*\)".*/\1/p' | sed 's/^0*//'; }

printf "%-48s %10s %9s %9s %9s\n" endpoint "req/s" "p50 ms" "p99 ms" "vs health"
read -r h_rps h50 h99 h_err <<<"$(run health /v1/health)"; need h_rps h50 h99 h_err
printf "%-48s %10.0f %9s %9s %9s\n" "GET /v1/health (HTTP layer)" "$h_rps" "$h50" "$h99" 1.00
read -r s_rps s50 s99 s_err <<<"$(run submit /v1/jobs "$TMP/submit.lua")"; need s_rps s50 s99 s_err
printf "%-48s %10.0f %9s %9s %9.2f\n" "POST /v1/jobs (submit)" "$s_rps" "$s50" "$s99" "$(echo "$s_rps / $h_rps" | bc -l)"
# Top the store up to 10,000 jobs for the list measurement.
jobs=$(count); need jobs
STORED=${STORED:-$((jobs + 1))}
while [ "$jobs" -lt $STORED ]; do
  wrk -t2 -c16 -d${TOPUP_S}s -H "Authorization: Bearer $(cat "$ANNEAL_TOKEN_FILE")" -s "$TMP/submit.lua" "$URL/v1/jobs" >/dev/null 2>&1
  jobs=$(count); need jobs
done
read -r d_rps d50 d99 d_err <<<"$(run describe /v1/jobs/load-0001)"; need d_rps d50 d99 d_err
printf "%-48s %10.0f %9s %9s %9.2f\n" "GET /v1/jobs/{id} (describe)" "$d_rps" "$d50" "$d99" "$(echo "$d_rps / $h_rps" | bc -l)"
read -r l_rps l50 l99 l_err <<<"$(run list '/v1/jobs?limit=100')"; need l_rps l50 l99 l_err
printf "%-48s %10.0f %9s %9s %9.2f\n" "GET /v1/jobs?limit=100 ($jobs jobs stored)" "$l_rps" "$l50" "$l99" "$(echo "$l_rps / $h_rps" | bc -l)"
echo "RESULT api_health_rps=$h_rps api_health_p99_ms=$h99 api_health_errors=$h_err"
echo "RESULT api_submit_rps=$s_rps api_submit_p99_ms=$s99 api_submit_errors=$s_err"
echo "RESULT api_describe_rps=$d_rps api_describe_p99_ms=$d99 api_describe_errors=$d_err"
echo "RESULT api_list100_rps=$l_rps api_list100_p99_ms=$l99 api_list100_errors=$l_err jobs_stored=$jobs"
