#!/usr/bin/env bash
# Job policies and security end to end on the local backend (a server, agents and ranks as processes):
#   1. users and tokens: no token -> 401; another user's job -> 404; a viewer cannot submit (403);
#      a storage prefix outside the job's execution role -> 403 at submit; a secret never printed
#      (describe, logs, events); an agent without the join token is refused;
#   2. a failing pre-start health check (the operator's command) -> the instance is replaced before
#      the job starts, and the job completes; the results are in describe;
#   3. warm pools: a finished job's instances are reused by the next matching job and not by a
#      non-matching one; statuses Available -> InUse -> Reused, and Terminated on expiry or when an
#      idle pool is evicted to make room for a waiting job;
#   4. quotas hold under 20 concurrent submissions by two users; jobs over the per-job or the user
#      quota, which can never fit, are refused at submit;
#   5. webhooks: every status change POSTed in order, HMAC-signed, retried through a receiver's errors;
#   6. TLS: the server serves https with a certificate made here; clients verify it;
#   7. stopping rules: a loss that goes NaN stops a 2-instance job (Failed, never retried, the rule
#      named in its reason and history); no_output with action retry fails each attempt, retried;
#   8. anneal exec into a running 2-instance job: output, standard error and exit code; -i and -t;
#      another user 403, an admin may; every use recorded in the job.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
field() { "$ANNEAL" describe "$1" --server "$URL" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"; }
wait_status() {  # ID STATUS SECONDS
  for _ in $(seq 1 $(($3 * 10))); do
    [ "$(field "$1" status 2>/dev/null)" = "$2" ] && return 0
    sleep 0.1
  done
  return 1
}
start_server() {  # DIR ARGS...: sets URL, SERVER_PID, ANNEAL_TOKEN_FILE
  local dir=$1; shift
  "$ANNEAL" server --data-dir "$dir" --listen 127.0.0.1:0 --heartbeat-s 0.2 "$@" >>"$dir.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 100); do [ -s "$dir/server.json" ] && break; sleep 0.1; done
  URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$dir/server.json")
  export ANNEAL_TOKEN_FILE="$dir/admin.token"
}
stop_server() { kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; }

# The webhook receiver: records every request; answers 500 to the first two.
cat >"$TMP/hook.py" <<'PY'
import http.server, json, sys
calls = {"n": 0}
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        calls["n"] += 1
        if calls["n"] <= 2:
            self.send_response(500); self.end_headers(); return
        with open(sys.argv[2], "a") as f:
            f.write(json.dumps({"headers": dict(self.headers), "body": body.decode()}) + "\n")
        self.send_response(200); self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
$PY "$TMP/hook.py" "$TMP/hook.port" "$TMP/hook.jsonl" &
HOOK_PID=$!
for _ in $(seq 1 50); do [ -s "$TMP/hook.port" ] && break; sleep 0.1; done
echo "whsec-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$TMP/hook.secret"
mkdir -p "$TMP/data/team-a" "$TMP/data/team-b"
cat >"$TMP/roles.yaml" <<YAML
roles:
  team-a:
    prefixes: [$TMP/data/team-a]
    users: [alice, bob]
YAML

# ---- 1. users, tokens, roles, secrets ----
start_server "$TMP/srv" --max-instances 3 --execution-roles "$TMP/roles.yaml" \
  --webhook "http://127.0.0.1:$(cat "$TMP/hook.port")/events" --webhook-secret-file "$TMP/hook.secret" \
  --health-check-command 'case "$ANNEAL_INSTANCE_ID" in health-*-a0-n1) echo "fan 3 stopped" >&2; exit 1;; esac'
echo "server at $URL"
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/jobs")
check "no token: 401" test "$code" = 401
check "the health check needs no token" test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/health")" = 200
"$ANNEAL" users add alice --server "$URL" >"$TMP/alice.token" 2>/dev/null
"$ANNEAL" users add bob --server "$URL" >"$TMP/bob.token" 2>/dev/null
"$ANNEAL" users add vera --role viewer --server "$URL" >"$TMP/vera.token" 2>/dev/null
check "users listed with roles" bash -c "'$ANNEAL' users list --server '$URL' | grep -qE '^vera +viewer'"
as() { local who=$1; shift; ANNEAL_TOKEN_FILE="$TMP/$who.token" "$@"; }
cat >"$TMP/secret.yaml" <<YAML
name: secret
role: team-a
entrypoint: {command: 'echo "the token is \$HF_TOKEN"; echo done'}
output: {uri: $TMP/data/team-a/out}
secrets: {HF_TOKEN: hf_VerySecret123}
YAML
sid=$(as alice "$ANNEAL" submit "$TMP/secret.yaml" --server "$URL")
check "alice's job completes" wait_status "$sid" Completed 60
as alice "$ANNEAL" logs "$sid" --server "$URL" >"$TMP/secret.logs" 2>&1
check "the rank saw the secret (masked in its logs)" grep -q 'the token is \*\*\*' "$TMP/secret.logs"
as alice "$ANNEAL" describe "$sid" --server "$URL" --json >"$TMP/secret.describe"
check "the secret is in neither logs nor describe" bash -c "! grep -q hf_VerySecret123 '$TMP/secret.logs' '$TMP/secret.describe'"
expect_exit "another user's job is not found (404, exit 2)" 2 "HTTP 404" \
  env ANNEAL_TOKEN_FILE="$TMP/bob.token" "$ANNEAL" describe "$sid" --server "$URL"
check "... nor listed" bash -c "! ANNEAL_TOKEN_FILE='$TMP/bob.token' '$ANNEAL' jobs --server '$URL' | grep -q '$sid'"
expect_exit "a viewer cannot submit (403)" 2 "HTTP 403" \
  env ANNEAL_TOKEN_FILE="$TMP/vera.token" "$ANNEAL" submit "$TMP/secret.yaml" --server "$URL"
sed "s#$TMP/data/team-a/out#$TMP/data/team-b/out#" "$TMP/secret.yaml" >"$TMP/outside.yaml"
expect_exit "a prefix outside the execution role is refused (403, naming the field)" 2 "HTTP 403.*output.uri" \
  env ANNEAL_TOKEN_FILE="$TMP/alice.token" "$ANNEAL" submit "$TMP/outside.yaml" --server "$URL"
expect_exit "an agent without the join token is refused" 2 "join token" \
  env -u ANNEAL_JOIN_TOKEN "$ANNEAL" agent --server "$URL" --work-dir "$TMP/rogue"
echo "not-the-token-0123456789" >"$TMP/wrong.join"
expect_exit "... and one with a wrong join token" 2 "refused to register" \
  "$ANNEAL" agent --server "$URL" --work-dir "$TMP/rogue" --join-token-file "$TMP/wrong.join"
check "token files are private (0600)" test "$(stat -c %a "$TMP/srv/admin.token") $(stat -c %a "$TMP/srv/join.token")" = "600 600"

# ---- 2. a failing health check: the instance is replaced before the start ----
cat >"$TMP/health.yaml" <<YAML
name: health
role: team-a
entrypoint: {command: 'echo "node \$ANNEAL_INSTANCE_ID ran"'}
resources: {instance_count: 2}
YAML
hid=$("$ANNEAL" submit "$TMP/health.yaml" --server "$URL")
check "the job completes after the replacement" wait_status "$hid" Completed 90
"$ANNEAL" describe "$hid" --server "$URL" --json >"$TMP/health.json"
check "node 1 failed its check and was replaced before the start" \
  grep -q "instance $hid-a0-n1 (node 1) failed its health check: command: .*fan 3 stopped.*replaced by $hid-a0-n1-h1 before the start" "$TMP/health.json"
check "the attempt count did not move (no retry spent)" test "$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["attempt"])' "$TMP/health.json")" = 0
check "describe shows each instance's checks, the collective's bandwidth among them" $PY - "$TMP/health.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
hc = d["health_checks"]
last = max(h["result"]["round"] for h in hc)
now = [h for h in hc if h["result"]["round"] == last]
assert last == 1 and len(now) == 2 and all(h["ok"] for h in now), hc
assert any(not h["ok"] and h["instance"].endswith("-a0-n1") for h in hc), hc  # round 0's failure is kept
names = {c["name"] for c in now[0]["result"]["checks"]}
assert {"cpu", "memory", "disk", "command", "collective"} <= names, names
bw = [c for c in now[0]["result"]["checks"] if c["name"] == "collective"][0]
assert bw["busbw_gbps"] > 0, bw
print("  collective busbw %.2f GB/s" % bw["busbw_gbps"])
PY

# ---- 3. warm pools ----
pool() {  # NAME COUNT KEEP
  cat >"$TMP/$1.yaml" <<YAML
name: $1
role: team-a
entrypoint: {command: 'echo "on \$ANNEAL_INSTANCE_ID"'}
resources: {instance_count: $2, keep_alive_s: $3}
YAML
  "$ANNEAL" submit "$TMP/$1.yaml" --server "$URL"
}
wp() { "$ANNEAL" describe "$1" --server "$URL" --json | $PY -c 'import json,sys; print(json.load(sys.stdin).get("warm_pool", {}).get("status", "-"))'; }
a=$(pool warm-a 1 30)
check "job A completes" wait_status "$a" Completed 60
check "its instance is kept: Available" test "$(wp "$a")" = Available
c=$(pool warm-c 2 0)
check "a non-matching job (2 instances) completes" wait_status "$c" Completed 60
check "... on fresh instances, leaving A's pool alone" bash -c "'$ANNEAL' describe '$c' --server '$URL' --json | grep -q 'obtaining 2 instance' && [ \"\$('$ANNEAL' describe '$a' --server '$URL' --json | grep -c reused_by)\" = 0 ]"
b=$(pool warm-b 1 0)
check "a matching job B completes" wait_status "$b" Completed 60
check "... on A's instance (reused)" bash -c "'$ANNEAL' logs '$b' --server '$URL' | grep -q 'on $a-a0-n0'"
check "A's pool: Reused once B ended" test "$(wp "$a")" = Reused
d=$(pool warm-d 1 1)
check "job D completes" wait_status "$d" Completed 60
sleep 2.5
check "D's pool expires: Terminated" test "$(wp "$d")" = Terminated
g=$(pool warm-g 1 60)
check "job G completes, its pool Available" bash -c "for _ in \$(seq 1 600); do [ \"\$('$ANNEAL' describe '$g' --server '$URL' --json | grep -c '\"status\": \"Available\"')\" = 1 ] && exit 0; sleep 0.1; done; exit 1"
h=$(pool warm-h 3 0)
check "a 3-instance job needing the room completes" wait_status "$h" Completed 60
check "... after G's idle pool was evicted for it (Terminated)" bash -c "'$ANNEAL' describe '$g' --server '$URL' --json | grep -q 'made room for $h'"
stop_server

# ---- 4. quotas under 20 concurrent submissions ----
start_server "$TMP/q" --max-instances 4 --quota-running-instances 3 --quota-user-instances 2 --quota-instances-per-job 3 \
  --no-health-checks
"$ANNEAL" users add alice --server "$URL" >"$TMP/qa.token" 2>/dev/null
"$ANNEAL" users add bob --server "$URL" >"$TMP/qb.token" 2>/dev/null
cat >"$TMP/q.yaml" <<'YAML'
name: q
entrypoint: {command: 'sleep 0.3'}
YAML
sed 's/^name: q$/name: q2/; $a resources: {instance_count: 2}' "$TMP/q.yaml" >"$TMP/q2.yaml"
sed -i 's/instance_count: 2/instance_count: 4/' "$TMP/q2.yaml"
expect_exit "a job over the per-job quota is refused at submit" 2 "resources.instance_count.*per-job quota is 3" \
  env ANNEAL_TOKEN_FILE="$TMP/qa.token" "$ANNEAL" submit "$TMP/q2.yaml" --server "$URL"
sed -i 's/instance_count: 4/instance_count: 3/' "$TMP/q2.yaml"
expect_exit "a job over the user quota can never fit: refused at submit" 2 "resources.instance_count.*quota of user alice" \
  env ANNEAL_TOKEN_FILE="$TMP/qa.token" "$ANNEAL" submit "$TMP/q2.yaml" --server "$URL"
sed -i 's/instance_count: 3/instance_count: 2/' "$TMP/q2.yaml"
$PY - "$URL" "$TMP" >"$TMP/quota.out" 2>&1 <<'PY'
import http.client, json, sys, threading, time, urllib.error, urllib.request
url, tmp = sys.argv[1], sys.argv[2]
tok = {u: open(f"{tmp}/q{u[0]}.token").read().strip() for u in ("alice", "bob")}
admin = open(f"{tmp}/q/admin.token").read().strip()
def call(method, path, token, body=None, headers={}):
    req = urllib.request.Request(url + path, method=method, data=body,
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/yaml", **headers})
    return json.load(urllib.request.urlopen(req, timeout=30))
ids, lock, failed = [], threading.Lock(), []
def submit(i):
    # One try each, no retry: 20 clients at once is a load the server must answer. A connection reset,
    # refused or closed without an answer is a failed submit (counted, printed, and checked below),
    # not an event to retry past; so is an HTTP error.
    user = ("alice", "bob")[i % 2]
    spec = open(f"{tmp}/q2.yaml" if i % 3 == 0 else f"{tmp}/q.yaml", "rb").read()
    try:
        r = call("POST", "/v1/jobs", tok[user], spec, {"Idempotency-Key": f"quota-{i}"})
    except urllib.error.HTTPError as e:
        with lock: failed.append(f"submit {i}: HTTP {e.code}: {e.read()[:200]!r}")
        return
    except (OSError, http.client.HTTPException) as e:  # ConnectionResetError, RemoteDisconnected, URLError, timeouts
        with lock: failed.append(f"submit {i}: the connection failed: {e!r}")
        return
    with lock: ids.append(r["id"])
threads = [threading.Thread(target=submit, args=(i,)) for i in range(20)]
[t.start() for t in threads]; [t.join() for t in threads]
print("failed submits:", len(failed))
for f in failed: print("  " + f)
assert len(set(ids)) == len(ids), ids  # the answered submits, each its own job, are watched below
worst_total, worst_user, reasons = 0, 0, set()
deadline = time.time() + 240
while time.time() < deadline:
    jobs = call("GET", "/v1/jobs?limit=100", admin)["jobs"]
    run = [j for j in jobs if j["status"] in ("InProgress", "Stopping") and j["secondary_status"] != "Pending"]
    total = sum(j["instance_count"] for j in run)
    per = {}
    for j in run: per[j["owner"]] = per.get(j["owner"], 0) + j["instance_count"]
    worst_total = max(worst_total, total); worst_user = max([worst_user] + list(per.values()))
    for j in jobs:
        if j.get("pending_reason"): reasons.add(j["pending_reason"].split(":")[0])
    if all(j["status"] == "Completed" for j in jobs if j["id"] in ids): break
    time.sleep(0.05)
done = [j for j in call("GET", "/v1/jobs?limit=100", admin)["jobs"] if j["id"] in ids]
print("completed", sum(j["status"] == "Completed" for j in done), "worst_total", worst_total, "worst_user", worst_user)
print("reasons", sorted(reasons))
PY
cat "$TMP/quota.out"
check "each of the 20 concurrent submits was answered at its one try (no connection reset or refused, no HTTP error)" \
  grep -qx "failed submits: 0" "$TMP/quota.out"
check "all 20 concurrent jobs completed" grep -q "^completed 20 " "$TMP/quota.out"
check "never more than 3 instances running (overall quota)" grep -qE "worst_total [0-3] " "$TMP/quota.out"
check "never more than 2 per user (user quota)" grep -qE "worst_user [0-2]$" "$TMP/quota.out"
check "waiting jobs showed the quota as their reason" grep -q "waiting for the quota of user" "$TMP/quota.out"
stop_server

# ---- 5. webhooks (from part 1's server) ----
sleep 1
check "webhook events arrived, signed, in order, through two receiver errors, no secret" $PY - "$TMP/hook.jsonl" "$TMP/hook.secret" "$sid" "$hid" <<'PY'
import hashlib, hmac, json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
secret = open(sys.argv[2]).read().strip().encode()
ids = []
for l in lines:
    h = {k.lower(): v for k, v in l["headers"].items()}
    want = "sha256=" + hmac.new(secret, (h["x-anneal-timestamp"] + "." + l["body"]).encode(), hashlib.sha256).hexdigest()
    assert hmac.compare_digest(h["x-anneal-signature"], want), "bad signature"
    assert "hf_VerySecret123" not in l["body"]
    ids.append(int(h["x-anneal-event-id"]))
assert ids == sorted(ids) and len(set(ids)) == len(ids), ids
for job in sys.argv[3:5]:
    seq = [json.loads(l["body"])["secondary_status"] for l in lines if json.loads(l["body"])["job"] == job]
    assert seq[0] == "Pending" and seq[-1] == "Completed" and "Training" in seq, (job, seq)
print("  %d events, all signed" % len(lines))
PY
kill "$HOOK_PID" 2>/dev/null

# ---- 6. TLS ----
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=anneal-test" -addext "subjectAltName=IP:127.0.0.1" \
  -keyout "$TMP/tls.key" -out "$TMP/tls.crt" >/dev/null 2>&1
start_server "$TMP/tls" --max-instances 1 --tls-cert "$TMP/tls.crt" --tls-key "$TMP/tls.key"
check "the server serves https" bash -c "[[ '$URL' == https://* ]]"
expect_exit "a client without the CA refuses the certificate" 3 "certificate is not trusted.*ANNEAL_CA_CERT" \
  env -u ANNEAL_CA_CERT "$ANNEAL" jobs --server "$URL"
cat >"$TMP/tls.yaml" <<'YAML'
name: tls
entrypoint: {command: 'echo over tls'}
YAML
export ANNEAL_CA_CERT="$TMP/tls.crt"
check "with the CA a job runs over https, agents included" bash -c "'$ANNEAL' submit '$TMP/tls.yaml' --server '$URL' --wait | grep -q 'over tls'"
unset ANNEAL_CA_CERT
stop_server

# ---- 7. stopping rules ----
start_server "$TMP/rules" --max-instances 2
# A 2-instance job whose loss goes NaN at step 6 (as a diverging PyTorch script's would): the rule
# stops it at once (not after its 60 s), Failed, the rule named in the reason and the history.
cat >"$TMP/nan.yaml" <<'YAML'
name: nan
entrypoint:
  command: 'for i in 1 2 3 4 5; do echo "step $i | loss 3.$i"; sleep 0.2; done; echo "step 6 | loss nan"; sleep 60'
resources: {instance_count: 2}
metric_definitions: [{name: train_loss, regex: 'step [0-9]+ \| loss ([^ ]+)'}]
stopping: {grace_period_s: 5, rules: [{when: no_improvement, metric: train_loss, steps: 50}, {when: non_finite, metric: train_loss}]}
retry: {max_attempts: 3}
YAML
id=$("$ANNEAL" submit "$TMP/nan.yaml" --server "$URL")
t0=$(date +%s.%N)
check "a job whose loss goes NaN ends Failed (stopping rule non_finite)" wait_status "$id" Failed 40
echo "  ended $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s after its submit"
reason=$(field "$id" failure_reason)
check "... the reason names the rule and the value" \
  bash -c 'grep -q "user_error: node [01]: stopping rule 2 (non_finite train_loss, action stop): rank [01] logged train_loss = nan" <<<"$1"' _ "$reason"
check "... not retried (action stop), though retry.max_attempts is 3" test "$(field "$id" attempt)" = 0
"$ANNEAL" describe "$id" --server "$URL" --json >"$TMP/nan.json"
check "... and the history (what events and webhooks carry) names it" \
  $PY -c 'import json,sys; h=json.load(open(sys.argv[1]))["history"]; assert "stopping rule 2 (non_finite train_loss" in h[-1]["message"], h[-1]' "$TMP/nan.json"
# no_output with action retry: each attempt is an infrastructure failure, retried until none are left.
cat >"$TMP/quiet.yaml" <<'YAML'
name: quiet
entrypoint: {command: 'echo "loading"; sleep 60'}
stopping: {grace_period_s: 2, rules: [{when: no_output, for_s: 2, action: retry}]}
retry: {max_attempts: 2}
YAML
id=$("$ANNEAL" submit "$TMP/quiet.yaml" --server "$URL")
check "a silent job under no_output (action retry) ends Failed" wait_status "$id" Failed 60
reason=$(field "$id" failure_reason)
check "... after 2 attempts, each ended by the rule" \
  bash -c 'grep -q "infrastructure: node 0: stopping rule 1 (no_output for 2 s, action retry): no rank printed a line for" <<<"$1" &&
    grep -q "no attempts left: retry.max_attempts 2" <<<"$1"' _ "$reason"
check "... the second being attempt 1" test "$(field "$id" attempt)" = 1

# ---- 8. anneal exec ----
"$ANNEAL" users add carol --server "$URL" >"$TMP/carol.token" 2>/dev/null
"$ANNEAL" users add dave --server "$URL" >"$TMP/dave.token" 2>/dev/null
cat >"$TMP/exec.yaml" <<'YAML'
name: exec
entrypoint: {command: 'echo started; sleep 60'}
resources: {instance_count: 2}
environment: {MY_SETTING: "from-the-spec"}
YAML
id=$(ANNEAL_TOKEN_FILE="$TMP/carol.token" "$ANNEAL" submit "$TMP/exec.yaml" --server "$URL")
check "a 2-instance job for exec is Training" bash -c "for _ in \$(seq 1 100); do [ \"\$('$ANNEAL' describe $id --server $URL --json | $PY -c 'import json,sys; print(json.load(sys.stdin)[\"secondary_status\"])')\" = Training ] && exit 0; sleep 0.1; done; exit 1"
carol() { ANNEAL_TOKEN_FILE="$TMP/carol.token" "$@"; }
carol "$ANNEAL" exec "$id" --node 1 --server "$URL" -- sh -c 'hostname; pwd; env | grep RANK; echo "setting $MY_SETTING"; echo oops >&2; exit 7' \
  >"$TMP/exec.out" 2>"$TMP/exec.err"
rc=$?
check "exec on node 1: the command's exit code (7)" test "$rc" -eq 7
check "... its output: the host, node 1's job folder, the contract, the spec's environment" \
  bash -c "grep -qx '$(hostname)' '$TMP/exec.out' && grep -qx '.*/$id-a0-n1/jobs/$id/code' '$TMP/exec.out' &&
    grep -qx 'GROUP_RANK=1' '$TMP/exec.out' && grep -qx 'setting from-the-spec' '$TMP/exec.out'"
check "... and its standard error apart" grep -qx oops "$TMP/exec.err"
out=$(printf 'one\ntwo\n' | carol "$ANNEAL" exec "$id" -i --server "$URL" -- sh -c 'wc -l')
check "exec -i: the command reads this process's standard input to its end (2 lines)" test "$(echo $out)" = 2
out=$( (sleep 0.5; echo typed) | carol "$ANNEAL" exec "$id" -t --server "$URL" -- sh -c 'test -t 0 && echo on-a-tty; read x; echo "got $x"' | tr -d '\r')
check "exec -t: the command runs on a terminal and reads from it" bash -c "grep -qx on-a-tty <<<'$out' && grep -qx 'got typed' <<<'$out'"
expect_exit "another user: 404, as for a missing job (its owner not named)" 2 "no job $id" \
  env ANNEAL_TOKEN_FILE="$TMP/dave.token" "$ANNEAL" exec "$id" --server "$URL" -- true
check "an admin may" "$ANNEAL" exec "$id" --server "$URL" -- true
"$ANNEAL" describe "$id" --server "$URL" --json >"$TMP/exec.json"
check "each use is recorded in the job (describe: execs, with user, node, command, exit code)" \
  $PY -c 'import json,sys; e=json.load(open(sys.argv[1]))["execs"]; assert len(e) == 4 and e[0]["user"] == "carol" and e[0]["node"] == 1 and e[0]["exit_code"] == 7 and e[-1]["user"] == "admin", e' "$TMP/exec.json"
carol "$ANNEAL" stop "$id" --server "$URL" >/dev/null
expect_exit "exec into an ended job: refused (409)" 2 "needs it running" \
  bash -c "sleep 3; ANNEAL_TOKEN_FILE='$TMP/carol.token' '$ANNEAL' exec '$id' --server '$URL' -- true"
stop_server
finish
