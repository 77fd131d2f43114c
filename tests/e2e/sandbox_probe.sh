# A job that tries to reach what a sandboxed job must not, and the checks of what it got (issue 36;
# docs/security.md's asset table). Sourced after lib.sh by e2e.job_sandbox (local backend) and
# peers.slurm (two Slurm nodes); needs ANNEAL, URL, TMP and SRV (the server's data folder, its work
# root at SRV-work). The probe prints "NAME ERRNO" (the system call's error) or "NAME ok" per attempt,
# so a denial is asserted by its errno, never by a message of ours.

# sandbox_wait_log ID PATTERN SECONDS [as WHO]
sandbox_wait_log() {
  local id=$1 pat=$2 secs=$3; shift 3
  for _ in $(seq 1 $((secs * 10))); do
    "$@" "$ANNEAL" logs "$id" --server "$URL" 2>/dev/null | grep -qE "$pat" && return 0
    sleep 0.1
  done
  return 1
}

# start_victim EXTRA_SPEC [as WHO]: a job with a secret in its environment and in a file, files in its
# /tmp and /dev/shm, sleeping. Sets vid, VPID (its rank), VJOB (its folder), AGENT_PID, juid (its uid),
# and checks from outside (/proc/PID/status) that it runs as a job uid with NoNewPrivs.
start_victim() {
  local extra=$1; shift
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
$extra
YAML
  vid=$("$@" "$ANNEAL" submit "$TMP/victim.yaml" --server "$URL")
  check "the victim job is running" sandbox_wait_log "$vid" '^.*ready [0-9]+ ' 90 "$@"
  read -r VPID VDIR < <("$@" "$ANNEAL" logs "$vid" --server "$URL" | sed -nE 's/.*ready ([0-9]+) (.*)$/\1 \2/p' | head -1)
  VJOB=$(dirname "$VDIR")  # its code/ is the working directory
  AGENT_PID=$(pgrep -f -- "agent .*--instance-id $vid-a0-n0( |$)" | head -1)
  echo "victim pid $VPID in $VJOB, its agent $AGENT_PID"
  local uids
  uids=$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$VPID/status")
  juid=${uids%% *}
  check "the victim's rank runs as a job uid, neither 0 nor its agent's (/proc/PID/status from outside: $uids)" \
    bash -c "[ '$juid' -ge 2000000000 ] && [ '$uids' = '$juid $juid $juid $juid' ] && [ '$juid' != \"\$(awk '/^Uid:/ {print \$2}' /proc/$AGENT_PID/status)\" ]"
  check "... with NoNewPrivs, in a job's cgroup" \
    bash -c "grep -q '^NoNewPrivs:[[:space:]]*1' /proc/$VPID/status && grep -q 'memory:/anneal/' /proc/$VPID/cgroup"
}

# make_suid_tool: a setuid-root program the probe can reach (a channel read in place); outside a
# sandbox it makes an unprivileged user root, which shows the probe's check can fail.
make_suid_tool() {
  mkdir -p "$TMP/tools"
  cp /usr/bin/id "$TMP/tools/suid-id"
  chmod 4755 "$TMP/tools/suid-id"
  check "control: the setuid program gives root to an unprivileged user outside a sandbox" \
    test "$(setpriv --reuid 65534 --regid 65534 --clear-groups "$TMP/tools/suid-id" -u)" = 0
}

# probe_spec NAME SANDBOX [EXTRA_SPEC]: the probe job's spec, aimed at the victim's paths and pids.
probe_spec() {
  mkdir -p "$TMP/probe"
  cat >"$TMP/probe/probe.py" <<'PY'
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
attempt("victim_signal", lambda: os.kill(int(E["VICTIM_PID"]), 0))  # a signal's permission check, without one
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
  WORK_ROOT: $(dirname "$(dirname "$(dirname "$VJOB")")")
  VICTIM_DIR: $VJOB
  VICTIM_PID: "$VPID"
  TEST_DIR: $TMP
  SUID: $TMP/tools/suid-id
sandbox: $2
${3:-}
YAML
}

# got NAME: what the probe's attempt NAME got (in PROBE_OUT)
got() { grep -E "(^| )$1 " "$PROBE_OUT" | tail -1 | awk '{print $NF}'; }
# denied NAME WHAT ERRNO...: the attempt failed with one of the errnos
denied() {
  local name=$1 what=$2 e v; shift 2
  v=$(got "$name")
  for e in "$@"; do [ "$v" = "$e" ] && { ok "denied: $what ($v)"; return 0; }; done
  bad "denied: $what (got '${v:-nothing}', want one of $*)"
}

# assert_denials FILE: the probe's lines (its job's logs) show every attempt denied, and what a job
# may do done.
assert_denials() {
  PROBE_OUT=$1
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
  check "the victim is still running" kill -0 "$VPID"
}

# import_host_image: scripts/host_image.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/host_image.sh"
