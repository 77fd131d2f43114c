#!/usr/bin/env bash
# peers.prometheus: a real Prometheus 2.42 (Debian's) scrapes `anneal server`'s /metrics:
#   1. /metrics needs a token that reads every job: none -> 401, a user's -> 403, a viewer's -> 200;
#      the exposition passes `promtool check metrics`; the example alerting rules pass
#      `promtool check rules`;
#   2. Prometheus, configured with the viewer's token file and the example rules, scrapes the server
#      (up == 1) while a 2-instance job runs, and a query through its HTTP API returns the job's
#      newest train_loss on both ranks, a value the job printed; the rules are loaded.
source "$(dirname "$0")/../e2e/lib.sh"
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
PROM_PID=""
SERVER_PID=""
cleanup() {
  [ -n "$PROM_PID" ] && kill "$PROM_PID" 2>/dev/null && wait "$PROM_PID" 2>/dev/null
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
command -v prometheus >/dev/null && command -v promtool >/dev/null ||
  { bad "prometheus and promtool are installed (scripts/setup.sh)"; finish; exit 1; }

"$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --max-instances 2 --heartbeat-s 0.2 >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do [ -s "$TMP/srv/server.json" ] && break; sleep 0.1; done
URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$TMP/srv/server.json")
export ANNEAL_TOKEN_FILE="$TMP/srv/admin.token"
"$ANNEAL" users add prom --role viewer --server "$URL" >"$TMP/viewer.token" 2>/dev/null
"$ANNEAL" users add uma --server "$URL" >"$TMP/user.token" 2>/dev/null
scrape() { curl -s -o "$TMP/scrape.txt" -w '%{http_code}' ${1:+-H "Authorization: Bearer $(cat "$1")"} "$URL/metrics"; }

# ---- 1. who may scrape, and the format ----
check "/metrics without a token: 401" test "$(scrape)" = 401
check "... with a user's token: 403 (it shows every job)" test "$(scrape "$TMP/user.token")" = 403
check "... naming the fix" grep -q "viewer" "$TMP/scrape.txt"
check "... with a viewer's token: 200" test "$(scrape "$TMP/viewer.token")" = 200
cat >"$TMP/loss.yaml" <<'YAML'
name: loss
entrypoint: {command: 'for i in $(seq 10 99); do echo "step $i/99 | loss 2.$i"; sleep 0.2; done'}
resources: {instance_count: 2}
metric_definitions: [{name: train_loss, regex: 'step +[0-9]+/[0-9]+ \| loss ([0-9.]+)'}]
YAML
id=$("$ANNEAL" submit "$TMP/loss.yaml" --server "$URL")
for _ in $(seq 1 100); do
  scrape "$TMP/viewer.token" >/dev/null
  grep -q "anneal_job=\"$id\".*name=\"train_loss\"" "$TMP/scrape.txt" && break
  sleep 0.1
done
check "the scrape has the running job's train_loss, labelled anneal_job, node, rank" \
  grep -qE "^anneal_job_metric\{anneal_job=\"$id\",node=\"[01]\",rank=\"[01]\",name=\"train_loss\"\} 2\.[0-9]+$" "$TMP/scrape.txt"
for m in anneal_jobs anneal_queue_length anneal_queue_oldest_pending_seconds anneal_scheduler_pass_seconds_count \
  anneal_http_request_duration_seconds_bucket anneal_instances anneal_instance_heartbeat_age_seconds; do
  check "... and $m" grep -q "^$m" "$TMP/scrape.txt"
done
check "... which passes promtool check metrics" bash -c "promtool check metrics <'$TMP/scrape.txt'"
check "the example alerting rules pass promtool check rules" promtool check rules examples/prometheus/anneal.rules.yml

# ---- 2. a real Prometheus ----
PPORT=$(scripts/free_port.sh)
cat >"$TMP/prometheus.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: ["$PWD/examples/prometheus/anneal.rules.yml"]
scrape_configs:
  - job_name: anneal
    authorization: {type: Bearer, credentials_file: "$TMP/viewer.token"}
    static_configs: [{targets: ["${URL#http://}"]}]
YAML
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" --web.listen-address="127.0.0.1:$PPORT" \
  >"$TMP/prometheus.log" 2>&1 &
PROM_PID=$!
P="http://127.0.0.1:$PPORT"
query() { curl -s --max-time 5 --data-urlencode "query=$1" "$P/api/v1/query"; }
for _ in $(seq 1 100); do curl -s "$P/-/ready" >/dev/null 2>&1 && break; sleep 0.1; done
check "Prometheus is ready" curl -sf "$P/-/ready"
wait_query() {  # QUERY PYTHON-CHECK: polls until the check holds on the answer's result list
  for _ in $(seq 1 150); do
    query "$1" >"$TMP/q.json"
    $PY -c "import json,sys; r=json.load(open(sys.argv[1]))['data']['result']; sys.exit(0 if ($2) else 1)" "$TMP/q.json" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
check "Prometheus scrapes the server (up == 1)" wait_query 'up{job="anneal"}' 'len(r) == 1 and r[0]["value"][1] == "1"'
check "a query returns the running job's train_loss on both ranks" \
  wait_query "anneal_job_metric{anneal_job=\"$id\",name=\"train_loss\"}" 'sorted(x["metric"]["rank"] for x in r) == ["0", "1"]'
# Compared as numbers, not as text: the job prints "loss 2.10", Prometheus answers "2.1". Exactly:
# the value is the double the agent parsed from the printed decimal, carried unchanged (anneal's
# exposition writes the shortest text that reads back, Prometheus holds float64s), so float() of
# both sides is the same double — any difference is a changed value, not a rounding.
"$ANNEAL" logs "$id" --server "$URL" >"$TMP/loss.logs" 2>&1
check "... each rank's value is a loss the job printed (compared as numbers, exactly)" $PY - "$TMP/q.json" "$TMP/loss.logs" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))["data"]["result"]
printed = {float(m.group(1)) for m in (re.search(r"\| loss ([0-9.]+)$", l.rstrip("\n")) for l in open(sys.argv[2])) if m}
got = {x["metric"]["rank"]: x["value"][1] for x in r}
print("  Prometheus:", got, "- %d losses printed" % len(printed))
missing = {k: v for k, v in got.items() if float(v) not in printed}
assert printed and not missing, "not a printed loss: %s (printed %s)" % (missing, sorted(printed)[:5])
PY
curl -s "$P/api/v1/rules" >"$TMP/rules.json"
check "... and the example rules are loaded" \
  $PY -c 'import json,sys; g={x["name"] for x in json.load(open(sys.argv[1]))["data"]["groups"]}; assert g == {"anneal-training", "anneal-control-plane"}, g' "$TMP/rules.json"
"$ANNEAL" stop "$id" --server "$URL" >/dev/null 2>&1
finish
