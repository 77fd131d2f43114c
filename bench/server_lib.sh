# Shared by the benchmarks that start `anneal server` with the local backend (job_latency, recovery,
# warm_pool): sourced after TMP (the run's folder; the server's data dir is $TMP/srv) is set. SERVER
# is the server's pid (empty when none runs).
# shellcheck shell=bash
SERVER=${SERVER:-}
# await_server: waits for the server's $TMP/srv/server.json (up to 10 s), then sets URL and exports
# ANNEAL_TOKEN_FILE (the admin token the server created).
await_server() {
  for _ in $(seq 1 100); do [ -s "$TMP/srv/server.json" ] && break; sleep 0.1; done
  URL=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$TMP/srv/server.json")
  export ANNEAL_TOKEN_FILE="$TMP/srv/admin.token"
}
# running PID: alive and not a zombie (an exited agent stays one until the server reaps it)
running() { [[ $(ps -o stat= -p "$1") == [^Z]* ]]; }
# stop_server: the local backend's agents (the server's children, which outlive it: a warm pool's idle
# ones too) first, while the server can still hear them stop (their ranks go with them), then the
# server. Safe to call when none runs, and on any exit path.
stop_server() {
  local agents pid left=
  [ -n "$SERVER" ] || return 0
  for _ in 1 2 3; do  # (a job with retries left gets a fresh instance meanwhile: again, until none)
    agents=$(for pid in $(pgrep -P "$SERVER"); do ! running "$pid" || echo "$pid"; done)
    [ -n "$agents" ] || break
    for pid in $agents; do kill "$pid" 2>/dev/null || true; done
    for pid in $agents; do
      for _ in $(seq 1 100); do running "$pid" || break; sleep 0.05; done
      ! running "$pid" || left+=" $pid"
    done
  done
  kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true
  for pid in $left; do kill -9 "$pid" 2>/dev/null || true; done
  # one the server started as it stopped: never assigned a job (no ranks), it would wait for it 10 minutes
  pkill -9 -f -- "--work-dir $TMP/srv/instances/" || true
  SERVER=
}
