#!/usr/bin/env bash
# peers.api_schema: schemathesis (PyPI, in tools/venv) drives a running `anneal server` from
# docs/api/openapi.yaml (issue 37): every route and every documented parameter, in its examples,
# coverage (boundary and negative cases), fuzzing and stateful phases (links between operations: a
# user, its token, a job, its stop), with the admin's token; then again, the coverage phase alone
# with an agent's registration credentials (the join token) and with a registered agent's own token
# (its job placed on it) for the agents' routes. It fails on any
# 5xx (not_a_server_error), a status the document does not list for the operation, an answer whose
# content type or body does not match the document, or a server that stops answering. The seed is
# fixed (ST_SEED, printed) so a failure reproduces; `st replay` reproduces one case.
#   ST_SECONDS (default 40): the first run's time budget.
source "$(dirname "$0")/../e2e/lib.sh"
cd "$(dirname "$0")/../.."
ST=tools/venv/bin/st
SEED=${ST_SEED:-20261206}
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
[ -x "$ST" ] || { bad "schemathesis is installed in tools/venv (scripts/setup.sh)"; finish; exit 1; }

# The static backend with no agent: submitted jobs stay Pending, nothing is started on this machine.
"$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --backend static >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do [ -s "$TMP/srv/server.json" ] && break; sleep 0.1; done
URL=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$TMP/srv/server.json")
CHECKS=not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance
echo "schemathesis $("$ST" --version 2>&1 | tail -1) against $URL, seed $SEED"
run_st() {  # LABEL TOKEN_FILE PHASES SECONDS [st options...]
  local label=$1 token=$2 phases=$3 secs=$4
  shift 4
  "$ST" run docs/api/openapi.yaml --url "$URL" -H "Authorization: Bearer $(head -1 "$token")" --checks "$CHECKS" \
    --phases "$phases" --max-time "$secs" --max-examples 25 --seed "$SEED" --workers 1 --request-timeout 10 \
    --no-color --suppress-health-check all "$@" >"$TMP/st-$label.log" 2>&1
}
# The first failure of a run, in a few words ("GET /v1/jobs/{id}: Undocumented status code"), for
# the check's own line: a CI log that keeps only its last lines still says what failed.
first_failure() {
  sed -n '/FAILURES/,/SUMMARY/p' "$1" | awk '/^_+ .* _+$/ && !op {gsub(/^_+ | _+$/, ""); op=$0; next}
    op && /^- / {sub(/^- (ST[0-9]+ )?/, ""); print ": " op ": " $0; exit}'
}
t0=$(date +%s)
run_st admin "$TMP/srv/admin.token" examples,coverage,fuzzing,stateful "${ST_SECONDS:-40}" \
  --exclude-operation-id uploadPackage
rc=$?
sed -n '/SUMMARY/,$p' "$TMP/st-admin.log"
check "schemathesis with the admin's token: no 5xx, every status, type and body as documented (exit $rc$(first_failure "$TMP/st-admin.log"))" test "$rc" = 0 ||
  sed -n '/FAILURES/,/SUMMARY/p' "$TMP/st-admin.log" | head -150
run_st agents "$TMP/srv/join.token" coverage 10 --include-tag agents
rc=$?
check "... and with the join token on the agents' routes (exit $rc$(first_failure "$TMP/st-agents.log"))" test "$rc" = 0 ||
  sed -n '/FAILURES/,/SUMMARY/p' "$TMP/st-agents.log" | head -100
# A real agent's credentials: an instance registered with the join token (its token, valid for its
# own heartbeat and the jobs it serves) and a job the static backend placed on it, whose logs,
# metrics, reports and package routes the agent may use.
reg=$(curl -sf -X POST -H "Authorization: Bearer $(head -1 "$TMP/srv/join.token")" -H 'Content-Type: application/json' \
  -d '{"address": "127.0.0.1", "slots": 1, "id": "st-agent"}' "$URL/v1/agents")
/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["token"])' "$reg" >"$TMP/agent.token" 2>/dev/null
check "an instance registered with the join token and got its own token" test -s "$TMP/agent.token"
curl -sf -X POST -H "Authorization: Bearer $(head -1 "$TMP/srv/admin.token")" -H 'Content-Type: application/json' \
  -d '{"name": "st-job", "entrypoint": {"command": "true"}}' "$URL/v1/jobs" >/dev/null
run_st agent "$TMP/agent.token" coverage 10 --include-tag agents
rc=$?
check "... and with that agent's token on the agents' routes (exit $rc$(first_failure "$TMP/st-agent.log"))" test "$rc" = 0 ||
  sed -n '/FAILURES/,/SUMMARY/p' "$TMP/st-agent.log" | head -100
echo "   ($(( $(date +%s) - t0 )) s of schemathesis)"
check "the server still answers after both runs" \
  bash -c "curl -sf -H 'Authorization: Bearer $(head -1 "$TMP/srv/admin.token")' '$URL/v1/health' >/dev/null"
check "... and is still running" kill -0 "$SERVER_PID"
finish
