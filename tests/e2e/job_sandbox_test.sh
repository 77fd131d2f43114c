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
#      not retried); a double-forked daemon is gone once its job has ended (its cgroup);
#   4. image: a job in a podman container of an image imported from a local tar: the image's tree
#      only, the job's uid (from outside), no capabilities, the job's cgroup; `anneal exec` enters the
#      container; a stop removes it; over its memory it fails as out_of_memory.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/sandbox_probe.sh"
PY=/usr/bin/python3
[ "$(id -u)" = 0 ] || skip "the job sandbox needs a root agent (this test runs as uid $(id -u))"
# expect_oom ID WHAT: the job fails as out_of_memory on its first attempt (the user's: never retried)
expect_oom() {
  check "$2 fails" wait_status "$1" Failed 90
  check "... as out_of_memory, the user's: not retried (one attempt)" \
    $PY -c 'import json,sys; n=json.load(sys.stdin)["nodes"]; print("  causes", [(x.get("cause"), x.get("attempt")) for x in n]); sys.exit(0 if n and all(x.get("cause")=="out_of_memory" and x.get("attempt")==0 for x in n) else 1)' \
    < <("$ANNEAL" describe "$1" --server "$URL" --json)
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

# ---- 1. the victim, then the probe (tests/e2e/sandbox_probe.sh) ----
start_victim "resources: {memory_mb: 256, cpus: 0.5}" as alice
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

make_suid_tool
probe_spec probe true >"$TMP/probe.yaml"
pid=$(as bob "$ANNEAL" submit "$TMP/probe.yaml" --server "$URL")
check "the probe job completes" wait_status "$pid" Completed 90
as bob "$ANNEAL" logs "$pid" --server "$URL" | sed -E 's/^\S+ //' >"$TMP/probe.out"
assert_denials "$TMP/probe.out"
check "describe shows how its node ran it (sandbox: uid N)" \
  bash -c "'$ANNEAL' describe '$pid' --server '$URL' --json | $PY -c 'import json,sys; n = json.load(sys.stdin)[\"nodes\"]; sys.exit(0 if n and all(x.get(\"sandbox\", \"\").startswith(\"uid \") for x in n) else 1)'"

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
expect_oom "$mid" "a job over resources.memory_mb"
{ sed 's/^name: oom/name: oom-open/' "$TMP/oom.yaml"; echo "sandbox: false"; } >"$TMP/oom_open.yaml"
expect_oom "$("$ANNEAL" submit "$TMP/oom_open.yaml" --server "$URL")" "an admin's sandbox: false job over resources.memory_mb (its cgroup without the sandbox)"
cat >"$TMP/daemon.yaml" <<'YAML'
name: daemon
entrypoint: {command: "setsid sh -c 'sleep 600 >/dev/null 2>&1 & echo daemon $!' </dev/null; sleep 1; echo parent-done"}
YAML
did=$(as alice "$ANNEAL" submit "$TMP/daemon.yaml" --server "$URL")
check "the double-forking job completes" wait_status "$did" Completed 90 || "$ANNEAL" describe "$did" --server "$URL"
dpid=$(as alice "$ANNEAL" logs "$did" --server "$URL" | sed -nE 's/.*daemon ([0-9]+)$/\1/p' | head -1)
gone() { for _ in $(seq 1 50); do [ -d "/proc/$1" ] && [ "$(cat /proc/$1/comm 2>/dev/null)" = sleep ] || return 0; sleep 0.1; done; return 1; }
check "its double-forked daemon ($dpid) is gone with it" bash -c "[ -n '$dpid' ] && $(declare -f gone); gone '$dpid'"

# ---- 4. image: the job in a podman container of a local image (launch/container.h) ----
if ! command -v podman >/dev/null; then
  skip_part "image: jobs: podman is not installed (scripts/setup.sh installs it)"
else
  import_host_image anneal-e2e/mini:1 /bin/sh /usr/bin/id /bin/cat /bin/sleep /usr/bin/head /usr/bin/tail /bin/ls
  check "an image imported from a local tar" bash -c "podman image exists anneal-e2e/mini:1"
  cat >"$TMP/ctr.yaml" <<YAML
name: ctr
image: anneal-e2e/mini:1
entrypoint: {command: 'echo in-container >/tmp/marker; ls /usr/bin/python3 >/dev/null 2>&1 && echo tree: host || echo tree: image; cat \$ADMIN >/dev/null 2>&1 || echo "admin: denied"; echo x >own-file && echo own: written; echo ready; exec sleep 300'}
environment: {ADMIN: $SRV/admin.token}
secrets: {CTR_KEY: ctr-key-0123456789}
resources: {memory_mb: 128}
YAML
  cid=$(as alice "$ANNEAL" submit "$TMP/ctr.yaml" --server "$URL")
  check "an image: job starts" sandbox_wait_log "$cid" 'ready$' 60 as alice
  as alice "$ANNEAL" logs "$cid" --server "$URL" >"$TMP/ctr.logs"
  check "... its command sees the image's tree, not the host's, nor admin.token; writes its own folder" \
    bash -c "grep -q 'tree: image' '$TMP/ctr.logs' && grep -q 'admin: denied' '$TMP/ctr.logs' && grep -q 'own: written' '$TMP/ctr.logs'"
  cname=anneal-$cid-a0-n0-$cid-0-0
  cpid=$(podman inspect --format '{{.State.Pid}}' "$cname" 2>/dev/null)
  cuids=$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/${cpid:-0}/status" 2>/dev/null)
  check "... in container $cname, as a job uid ($cuids), NoNewPrivs, no capabilities, in the job's cgroup" \
    bash -c "[ \"\${1%% *}\" -ge 2000000000 ] && grep -q '^NoNewPrivs:[[:space:]]*1' /proc/$cpid/status &&
      grep -q '^CapEff:[[:space:]]*0000000000000000' /proc/$cpid/status && grep -qE 'memory:/anneal/$cid-a0-n0-$cid-0/libpod-' /proc/$cpid/cgroup" _ "$cuids"
  out=$(as alice "$ANNEAL" exec "$cid" --server "$URL" -- sh -c 'cat /tmp/marker; id -u; echo "key $CTR_KEY"')
  check "anneal exec enters that container (its /tmp), as its uid, with its environment" \
    bash -c "grep -qx in-container <<<'$out' && grep -qx '${cuids%% *}' <<<'$out' && grep -qx 'key ctr-key-0123456789' <<<'$out'"
  "$ANNEAL" stop "$cid" --server "$URL" >/dev/null 2>&1
  check "the image: job stops" wait_status "$cid" Stopped 60
  check "... and its container is gone" bash -c "for _ in \$(seq 1 50); do podman container exists '$cname' || exit 0; sleep 0.1; done; exit 1"
  cat >"$TMP/ctr_oom.yaml" <<'YAML'
name: ctr-oom
image: anneal-e2e/mini:1
entrypoint: {command: [sh, -c, 'head -c 400000000 /dev/zero | tail -n 1']}
resources: {memory_mb: 64}
retry: {max_attempts: 2}
YAML
  oid=$(as alice "$ANNEAL" submit "$TMP/ctr_oom.yaml" --server "$URL")
  expect_oom "$oid" "an image: job over resources.memory_mb"
  podman rmi -f anneal-e2e/mini:1 >/dev/null 2>&1
fi
finish
