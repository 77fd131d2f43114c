#!/usr/bin/env bash
# Jobs isolated from each other and from the system that runs them (issue 36; docs/security.md's
# asset table names these checks), on the local backend with a root server, so sandboxed by default:
#   1. a running "victim" job (its secret in its environment and in a file, a file in its /tmp) and a
#      "probe" job of another user that tries to reach the server's admin.token and store, the agent's
#      folder and /proc/PID/environ, the victim's folder, file, environment and process, the victim's
#      /tmp and /dev/shm, the host's folders for writing, and root through a setuid binary: each
#      attempt is denied, asserted by its errno (the probe prints the system call's error, never a
#      message of ours); the victim's rank runs as a job uid (neither 0 nor the agent's), read from
#      outside in /proc/PID/status; `anneal exec` runs inside the victim's sandbox;
#   2. the same probe with `sandbox: false` reads what root may (an admin's job); a user's
#      `sandbox: false` is refused at submit (403);
#   3. limits: a job over resources.memory_mb ends Failed with exit cause out_of_memory (the user's,
#      not retried); a double-forked daemon is gone once its job has ended (its cgroup).
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
[ "$(id -u)" = 0 ] || skip "the job sandbox needs a root agent (this test runs as uid $(id -u))"
field() { "$ANNEAL" describe "$1" --server "$URL" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"; }
wait_status() {  # ID STATUS SECONDS
  for _ in $(seq 1 $(($3 * 10))); do
    [ "$(field "$1" status 2>/dev/null)" = "$2" ] && return 0
    sleep 0.1
  done
  return 1
}
wait_log() {  # ID PATTERN SECONDS
  for _ in $(seq 1 $(($3 * 10))); do
    "$ANNEAL" logs "$1" --server "$URL" 2>/dev/null | grep -qE "$2" && return 0
    sleep 0.1
  done
  return 1
}
SRV=$TMP/srv
"$ANNEAL" server --data-dir "$SRV" --listen 127.0.0.1:0 --heartbeat-s 0.2 --max-instances 3 >>"$SRV.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do [ -s "$SRV/server.json" ] && break; sleep 0.1; done
URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$SRV/server.json")
export ANNEAL_TOKEN_FILE="$SRV/admin.token"
cleanup() { kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
"$ANNEAL" users add alice --server "$URL" >"$TMP/alice.token" 2>/dev/null
"$ANNEAL" users add bob --server "$URL" >"$TMP/bob.token" 2>/dev/null
as() { local who=$1; shift; ANNEAL_TOKEN_FILE="$TMP/$who.token" "$@"; }

# ---- 1. the victim, then the probe ----
mkdir -p "$TMP/victim"
cat >"$TMP/victim/run.sh" <<'SH'
echo "victim-file-secret" >secret.txt
echo "victim-tmp" >/tmp/victim-tmp; echo "victim-shm" >/dev/shm/victim-shm
echo "ready $$ $PWD"
exec sleep 300
SH
cat >"$TMP/victim.yaml" <<YAML
name: victim
source: $TMP/victim
entrypoint: {command: [sh, run.sh]}
secrets: {VICTIM_KEY: victim-key-0123456789}
resources: {memory_mb: 256, cpus: 0.5}
YAML
vid=$(as alice "$ANNEAL" submit "$TMP/victim.yaml" --server "$URL")
check "the victim job is running" wait_log "$vid" '^.*ready [0-9]+ ' 90 || { tail -30 "$SRV.log"; }
read -r VPID VDIR < <(as alice "$ANNEAL" logs "$vid" --server "$URL" | sed -nE 's/.*ready ([0-9]+) (.*)$/\1 \2/p' | head -1)
VJOB=$(dirname "$VDIR")  # the victim's job folder (its code/ is the working directory)
AGENT_PID=$(pgrep -f "anneal agent .*--instance-id $vid-a0-n0" | head -1)
[ -n "$AGENT_PID" ] || AGENT_PID=$(pgrep -f "agent.*$vid" | head -1)
echo "victim pid $VPID in $VJOB, its agent $AGENT_PID"
uids=$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$VPID/status")
juid=${uids%% *}
check "the victim's rank runs as a job uid, neither 0 nor its agent's (/proc/PID/status from outside: $uids)" \
  bash -c "[ '$juid' -ge 2000000000 ] && [ '$uids' = '$juid $juid $juid $juid' ] && [ '$juid' != \"\$(awk '/^Uid:/ {print \$2}' /proc/$AGENT_PID/status)\" ]"
check "... with NoNewPrivs, outside the agent's cgroup" \
  bash -c "grep -q '^NoNewPrivs:[[:space:]]*1' /proc/$VPID/status && grep -q 'memory:/anneal/' /proc/$VPID/cgroup"

# Its limits, read from outside in its cgroup (v1 here; v2 elsewhere)
cgpath() { sed -nE "s/^[0-9]+:([^:]*,)?$1(,[^:]*)?:(.*)$/\3/p" "/proc/$VPID/cgroup" | head -1; }
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  cg=/sys/fs/cgroup$(sed -nE 's/^0::(.*)$/\1/p' "/proc/$VPID/cgroup")
  check "the victim's cgroup holds memory_mb 256 and cpus 0.5 (v2)" \
    bash -c "[ \"\$(cat $cg/memory.max)\" = $((256 << 20)) ] && [ \"\$(cat $cg/cpu.max)\" = '50000 100000' ]"
  cpustat=$cg/cpu.stat
else
  mem=/sys/fs/cgroup/memory$(cgpath memory) cpu=/sys/fs/cgroup/cpu$(cgpath cpu)
  check "the victim's cgroup holds memory_mb 256 and cpus 0.5 (v1: $mem, $cpu)" \
    bash -c "[ \"\$(cat $mem/memory.limit_in_bytes)\" = $((256 << 20)) ] && [ \"\$(cat $cpu/cpu.cfs_quota_us) \$(cat $cpu/cpu.cfs_period_us)\" = '50000 100000' ]"
  cpustat=$cpu/cpu.stat
fi

# A setuid-root program the probe can reach (a channel read in place): outside a sandbox it makes
# an unprivileged user root, which shows the probe's check can fail.
mkdir -p "$TMP/tools"
cp /usr/bin/id "$TMP/tools/suid-id"
chmod 4755 "$TMP/tools/suid-id"
check "control: the setuid program gives root to an unprivileged user outside a sandbox" \
  test "$(setpriv --reuid 65534 --regid 65534 --clear-groups "$TMP/tools/suid-id" -u)" = 0

mkdir -p "$TMP/probe"
cat >"$TMP/probe/probe.py" <<'PY'
# Each attempt prints "NAME ok" or "NAME ERRNO" (the system call's error).
import errno, os, subprocess
E = os.environ
def attempt(name, fn):
    try:
        fn()
        print(name, "ok", flush=True)
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno), flush=True)
def read(p): return lambda: open(p, "rb").read()
def write(p): return lambda: open(p, "wb").write(b"x")
attempt("admin_token", read(E["ADMIN_TOKEN"]))
attempt("store", read(E["STORE"]))
attempt("data_dir_list", lambda: os.listdir(E["DATA_DIR"]))
attempt("agent_environ", read("/proc/%s/environ" % E["AGENT_PID"]))
attempt("agent_dir_list", lambda: os.listdir(E["AGENT_DIR"]))
attempt("work_root_list", lambda: os.listdir(E["WORK_ROOT"]))
attempt("victim_file", read(E["VICTIM_DIR"] + "/code/secret.txt"))
attempt("victim_dir_list", lambda: os.listdir(E["VICTIM_DIR"]))
attempt("victim_environ", read("/proc/%s/environ" % E["VICTIM_PID"]))
attempt("victim_signal", lambda: os.kill(int(E["VICTIM_PID"]), 0))  # the permission check of a signal, without one
attempt("victim_tmp", read("/tmp/victim-tmp"))
attempt("victim_shm", read("/dev/shm/victim-shm"))
attempt("write_usr", write("/usr/local/anneal-probe"))
attempt("write_etc", write("/etc/anneal-probe"))
attempt("write_test_dir", write(E["TEST_DIR"] + "/outside"))
attempt("write_own_dir", write("own-file"))
attempt("write_tmp", write("/tmp/own-tmp"))
euid = subprocess.run([E["SUID"], "-u"], capture_output=True, text=True).stdout.strip()
print("setuid_euid", euid, flush=True)
print("uid", os.getuid(), flush=True)
PY
probe_spec() {  # NAME SANDBOX
  cat <<YAML
name: $1
source: $TMP/probe
entrypoint: {command: [/usr/bin/python3, probe.py]}
channels: [{name: tools, uri: $TMP/tools, mode: fastfile}]
environment:
  ADMIN_TOKEN: $SRV/admin.token
  STORE: $SRV/anneal.db
  DATA_DIR: $SRV
  AGENT_PID: "$AGENT_PID"
  AGENT_DIR: $(dirname "$(dirname "$VJOB")")
  WORK_ROOT: $SRV-work
  VICTIM_DIR: $VJOB
  VICTIM_PID: "$VPID"
  TEST_DIR: $TMP
  SUID: $TMP/tools/suid-id
sandbox: $2
YAML
}
probe_spec probe true >"$TMP/probe.yaml"
pid=$(as bob "$ANNEAL" submit "$TMP/probe.yaml" --server "$URL")
check "the probe job completes" wait_status "$pid" Completed 90
as bob "$ANNEAL" logs "$pid" --server "$URL" | sed -E 's/^\S+ //' >"$TMP/probe.out"
cat "$TMP/probe.out" | grep -E '^(\S+ )?[a-z_]+ ' | tail -20
got() { grep -E "(^| )$1 " "$TMP/probe.out" | tail -1 | awk '{print $NF}'; }
denied() {  # NAME WHAT ERRNO...: the probe's attempt NAME failed with one of the errnos
  local name=$1 what=$2 e; shift 2
  local v; v=$(got "$name")
  for e in "$@"; do [ "$v" = "$e" ] && { ok "denied: $what ($v)"; return 0; }; done
  bad "denied: $what (got '${v:-nothing}', want one of $*)"
}
denied admin_token "the server's admin.token" ENOENT EACCES
denied store "the server's store (anneal.db)" ENOENT EACCES
denied data_dir_list "listing the server's data folder" EACCES
denied agent_environ "the agent's /proc/PID/environ" ENOENT EACCES
denied agent_dir_list "listing the victim's agent's folder" ENOENT EACCES
denied work_root_list "listing the agents' work root" EACCES
denied victim_file "another running job's file" ENOENT EACCES
denied victim_dir_list "listing another running job's folder" ENOENT EACCES
denied victim_environ "another running job's /proc/PID/environ (its secrets)" ENOENT EACCES
denied victim_signal "signalling another job's process" EPERM
denied victim_tmp "another job's /tmp" ENOENT
denied victim_shm "another job's /dev/shm" ENOENT
denied write_usr "writing /usr" EROFS EACCES
denied write_etc "writing /etc" EROFS EACCES
denied write_test_dir "writing a folder that is not the job's" EROFS EACCES ENOENT
check "the job writes its own folder and /tmp" bash -c "[ '$(got write_own_dir)' = ok ] && [ '$(got write_tmp)' = ok ]"
check "a setuid-root program runs without root inside (euid $(got setuid_euid))" \
  bash -c "[ -n '$(got setuid_euid)' ] && [ '$(got setuid_euid)' != 0 ]"
check "the probe ran as a job uid ($(got uid))" bash -c "[ '$(got uid)' -ge 2000000000 ] 2>/dev/null"
check "nothing was written outside" test ! -e "$TMP/outside"
check "describe shows how its node ran it (sandbox: uid N)" \
  bash -c "'$ANNEAL' describe '$pid' --server '$URL' --json | $PY -c 'import json,sys; n = json.load(sys.stdin)[\"nodes\"]; sys.exit(0 if n and all(x.get(\"sandbox\", \"\").startswith(\"uid \") for x in n) else 1)'"
check "the victim is still running" kill -0 "$VPID"

out=$(as alice "$ANNEAL" exec "$vid" --server "$URL" -- sh -c 'id -u; cat secret.txt; cat '"$SRV/admin.token"' 2>&1 || echo "admin.token: $?"')
check "exec runs in the victim's sandbox: its uid, its file, not admin.token" \
  bash -c "grep -qx '$juid' <<<'$out' && grep -qx victim-file-secret <<<'$out' && grep -q 'admin.token: 1' <<<'$out'"

throttled() { awk '$1 == "nr_throttled" { print $2 }' "$cpustat"; }
before=$(throttled)
as alice "$ANNEAL" exec "$vid" --server "$URL" -- sh -c 'timeout 1 sh -c "while :; do :; done"; true' >/dev/null 2>&1
check "a busy loop in the job is throttled to its cpus (nr_throttled $before -> $(throttled))" \
  bash -c "[ '$(throttled)' -gt '${before:-0}' ]"

# ---- 2. sandbox: false ----
probe_spec open false >"$TMP/open.yaml"
expect_exit "a user's sandbox: false is refused (403)" 2 "HTTP 403.*sandbox" \
  env ANNEAL_TOKEN_FILE="$TMP/bob.token" "$ANNEAL" submit "$TMP/open.yaml" --server "$URL"
oid=$("$ANNEAL" submit "$TMP/open.yaml" --server "$URL")
check "an admin's sandbox: false job completes" wait_status "$oid" Completed 90
check "... and describe says its sandbox was off" \
  bash -c "'$ANNEAL' describe '$oid' --server '$URL' | grep -q 'sandbox: off: the job.s sandbox: false'"
"$ANNEAL" logs "$oid" --server "$URL" | sed -E 's/^\S+ //' >"$TMP/probe.out"
check "... and reads admin.token, the store and the victim's file and environment, as root" \
  bash -c "[ '$(got admin_token) $(got store) $(got victim_file) $(got victim_environ) $(got victim_signal) $(got uid)' = 'ok ok ok ok ok 0' ]"
"$ANNEAL" stop "$vid" --server "$URL" >/dev/null 2>&1
check "the victim stops" wait_status "$vid" Stopped 60 || { "$ANNEAL" describe "$vid" --server "$URL"; tail -20 "$SRV.log"; }

# ---- 3. limits ----
cat >"$TMP/oom.yaml" <<'YAML'
name: oom
entrypoint: {command: [/usr/bin/python3, -c, "import time; b = b'x' * (400 << 20); print('allocated'); time.sleep(5)"]}
resources: {memory_mb: 64}
retry: {max_attempts: 2}
YAML
mid=$(as alice "$ANNEAL" submit "$TMP/oom.yaml" --server "$URL")
check "a job over resources.memory_mb fails" wait_status "$mid" Failed 90
"$ANNEAL" describe "$mid" --server "$URL" --json >"$TMP/oom.json"
check "... as out_of_memory, the user's: not retried (one attempt)" $PY - "$TMP/oom.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
nodes = j.get("nodes", [])
causes, attempts = [n.get("cause") for n in nodes], sorted({n.get("attempt") for n in nodes})
print("causes", causes, "attempts", attempts)
sys.exit(0 if causes and all(c == "out_of_memory" for c in causes) and attempts == [0] else 1)
PY
cat >"$TMP/daemon.yaml" <<'YAML'
name: daemon
entrypoint: {command: "setsid sh -c 'sleep 600 >/dev/null 2>&1 & echo daemon $!' </dev/null; sleep 1; echo parent-done"}
YAML
did=$(as alice "$ANNEAL" submit "$TMP/daemon.yaml" --server "$URL")
check "the double-forking job completes" wait_status "$did" Completed 90 || "$ANNEAL" describe "$did" --server "$URL"
dpid=$(as alice "$ANNEAL" logs "$did" --server "$URL" | sed -nE 's/.*daemon ([0-9]+)$/\1/p' | head -1)
gone() { for _ in $(seq 1 50); do [ -d "/proc/$1" ] && [ "$(cat /proc/$1/comm 2>/dev/null)" = sleep ] || return 0; sleep 0.1; done; return 1; }
check "its double-forked daemon ($dpid) is gone with it" bash -c "[ -n '$dpid' ] && $(declare -f gone); gone '$dpid'"
finish
