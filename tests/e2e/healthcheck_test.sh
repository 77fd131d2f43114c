#!/bin/bash
# Pre-start health checks (docs/health-checks.md):
#   1. `anneal healthcheck` under `anneal launch` with 2 ranks: each prints its JSON line (ok, world 2,
#      busbw = algbw for N = 2); bad options exit 2.
#   2. The agent's half of the protocol against a stub of the server's (health_stub_server.py): two
#      agents get a "health" request, report it in progress in their heartbeats, run the local checks
#      and the collective together (meeting through the rendezvous endpoint), and post their results;
#      a failing operator command fails only its own node (which still joins the collective); a peer
#      that never comes makes the collective time out.
source "$(dirname "$0")/lib.sh"
STUB="/usr/bin/python3 $(dirname "$0")/health_stub_server.py"

# 1. The collective command itself.
timeout 120 "$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" healthcheck --collective-mb 4 >"$TMP/launch.out" 2>"$TMP/launch.err"
rc=$?
check "launch of 2 healthcheck ranks exits 0 (exit $rc)" test $rc -eq 0
check "both ranks print an ok line with world 2, mb 4 and busbw = algbw" /usr/bin/python3 - "$TMP/launch.out" "$TMP/launch.err" <<'PY'
import json, sys
lines = [l.split("] ", 1)[-1] for f in sys.argv[1:] for l in open(f) if '"healthcheck"' in l]
js = [json.loads(l) for l in lines]
assert sorted(j["rank"] for j in js) == [0, 1], js
for j in js:
    assert j["healthcheck"] == "collective" and j["ok"] is True and j["world"] == 2 and j["mb"] == 4, j
    assert j["seconds"] > 0 and j["algbw_gbps"] > 0 and abs(j["busbw_gbps"] - j["algbw_gbps"]) < 1e-9 * j["algbw_gbps"] + 1e-12, j
PY
expect_exit "healthcheck --collective-mb 0 is bad input" 2 "collective-mb" "$ANNEAL" healthcheck --collective-mb 0
check "healthcheck --help describes it" bash -c "'$ANNEAL' healthcheck --help | grep -q busbw"

# 2. Agents against the stub server (which ignores the join token agents must present).
export ANNEAL_JOIN_TOKEN=stub
# run_agents NAME SCENARIO_JSON INSTANCE...: starts the stub and one agent per instance, waits for
# the agents to exit (the stub says "exit" once an instance posted).
run_agents() {
  local name=$1 scenario=$2; shift 2
  local dir="$TMP/$name"
  mkdir -p "$dir"
  echo "$scenario" >"$dir/scenario.json"
  $STUB "$dir/scenario.json" "$dir" >"$dir/port" 2>"$dir/stub.err" &
  local stub=$!
  for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
  local pids=() t0=$SECONDS
  for id in "$@"; do
    timeout 120 "$ANNEAL" agent --server "http://127.0.0.1:$(cat "$dir/port")" --instance-id "$id" --slots 1 \
      --work-dir "$dir/work-$id" --address 127.0.0.1 --heartbeat-s 0.2 --orphan-timeout-s 30 2>"$dir/agent-$id.err" &
    pids+=($!)
  done
  local i=0
  for id in "$@"; do wait "${pids[$i]}"; echo $? >"$dir/rc-$id"; i=$((i + 1)); done
  echo $((SECONDS - t0)) >"$dir/seconds"
  kill "$stub" 2>/dev/null
  wait "$stub" 2>/dev/null
}
req() {  # req NODE NNODES COMMAND TIMEOUT: one instance's health request
  printf '{"job": "job-1", "attempt": 2, "round": 1, "node": %s, "nnodes": %s, "addresses": ["127.0.0.1", "127.0.0.1"], "checks": {"min_free_memory_gb": 0.01, "min_free_disk_gb": 0.001, "collective_mb": 1, "collective_timeout_s": %s, "command": "%s"}}' "$1" "$2" "$4" "$3"
}

# The commands sleep 1 s (5 heartbeat intervals), so a heartbeat must fall inside the check: on a
# fast machine the whole check once ended within one 0.2 s interval and no heartbeat carried it.
run_agents healthy "{\"i-0\": $(req 0 2 'sleep 1 && test \"$ANNEAL_JOB/$ANNEAL_NODE\" = job-1/0 && test -n \"$ANNEAL_INSTANCE_ID\"' 60),
                     \"i-1\": $(req 1 2 'sleep 1 && test \"$ANNEAL_JOB/$ANNEAL_NODE\" = job-1/1' 60)}" i-0 i-1
check "healthy: both instances post ok results with every check, the collective across 2" \
  /usr/bin/python3 - "$TMP/healthy" <<'PY'
import json, sys
d = sys.argv[1]
rs = {r["instance"]: r for r in map(json.loads, open(d + "/results.jsonl"))}
assert sorted(rs) == ["i-0", "i-1"], rs
for iid, r in rs.items():
    assert r["ok"] is True and r["attempt"] == 2 and r["round"] == 1 and r["job"] == "job-1", r
    assert r["node"] == int(iid[-1]), r
    res = r["result"]
    assert res["ok"] is True and res["seconds"] > 0, res
    assert [c["name"] for c in res["checks"]] == ["cpu", "memory", "disk", "gpu", "command", "collective"], res
    col = res["checks"][-1]
    assert col["ok"] and col["world"] == 2 and col["algbw_gbps"] > 0, col
    assert res["checks"][4]["exit_code"] == 0, res["checks"][4]
PY
check "healthy: heartbeats carry the check in progress" \
  grep -q '"health": {"attempt": 2, "job": "job-1", "round": 1}' "$TMP/healthy/heartbeats.jsonl"
check "healthy: the agents exit 0 when released" test "$(cat "$TMP/healthy/rc-i-0" "$TMP/healthy/rc-i-1" | tr -d '\n')" = 00

run_agents badcmd "{\"i-0\": $(req 0 2 'true' 60), \"i-1\": $(req 1 2 'echo ib0 is down; exit 3' 60)}" i-0 i-1
check "a failing command fails only its node, which still joins the collective" \
  /usr/bin/python3 - "$TMP/badcmd" <<'PY'
import json, sys
rs = {r["instance"]: r for r in map(json.loads, open(sys.argv[1] + "/results.jsonl"))}
assert rs["i-0"]["ok"] is True, rs["i-0"]
bad = rs["i-1"]
assert bad["ok"] is False and bad["result"]["ok"] is False, bad
cmd = {c["name"]: c for c in bad["result"]["checks"]}
assert cmd["command"]["ok"] is False and cmd["command"]["exit_code"] == 3, cmd["command"]
assert "exit code 3" in cmd["command"]["detail"] and "ib0 is down" in cmd["command"]["detail"], cmd["command"]
assert cmd["collective"]["ok"] is True, cmd["collective"]
PY

run_agents lonely "{\"i-0\": $(req 0 2 '' 3)}" i-0
check "a peer that never comes: the collective times out after 3 s" \
  /usr/bin/python3 - "$TMP/lonely" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1] + "/results.jsonl")][0]
assert r["ok"] is False, r
col = r["result"]["checks"][-1]
assert col["name"] == "collective" and col["ok"] is False, col
assert col["detail"].startswith("collective timed out after 3 s: a peer instance or the network"), col
assert col["seconds"] < 20, col
assert all(c["ok"] for c in r["result"]["checks"][:-1]), r
PY

run_agents stopped "{\"i-0\": $(req 0 2 '' 60), \"stop_after_s\": {\"i-0\": 1.5}}" i-0
check "a stop while the collective waits abandons it: nothing posted, the agent released at once" \
  /usr/bin/python3 - "$TMP/stopped" <<'PY'
import json, os, sys
d = sys.argv[1]
assert not os.path.exists(d + "/results.jsonl"), open(d + "/results.jsonl").read()
assert open(d + "/rc-i-0").read().strip() == "0"
beats = [json.loads(l) for l in open(d + "/heartbeats.jsonl")]
assert any(b["health"] for b in beats), beats
err = open(d + "/agent-i-0.err").read()
assert "health checks abandoned" in err, err
PY
check "... within seconds, not the 60 s collective timeout" test "$(cat "$TMP/stopped/seconds")" -lt 20
# Node 1 alone, node 0's ports published but nothing listening: its launcher keeps trying the store
# until the stop comes.
dead_port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
run_agents stopped1 "{\"i-1\": $(req 1 2 '' 60), \"stop_after_s\": {\"i-1\": 1.5},
  \"rendezvous\": {\"job-1/2/1\": {\"master_addr\": \"127.0.0.1\", \"master_port\": $dead_port, \"store_port\": $dead_port}}}" i-1
check "a stop while node 1's launcher waits for node 0's store: released within seconds" \
  bash -c "test \$(cat '$TMP/stopped1/seconds') -lt 20 && grep -q 'health checks abandoned' '$TMP/stopped1/agent-i-1.err' && test ! -e '$TMP/stopped1/results.jsonl'"
finish
