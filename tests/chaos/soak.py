#!/usr/bin/env python3
"""The chaos soak (tests/chaos/soak.sh SEED MINUTES calls this; docs in tests/chaos/README.md).

A server with the local backend runs 2-instance training jobs, one after another, whose ranks
checkpoint to a real radosgw through the project's S3 fault proxy (anneal_fault_proxy), on agents
whose work folders (the jobs' folders, the shippers' spools) lie on a small tmpfs, while a schedule drawn from SEED injects faults in combination
every few seconds for MINUTES minutes. Then the faults stop, the last job finishes, and the
invariants are checked (not printed): see check_* below. The report is a markdown table of every
event with when it was met or detected, how long recovery took and the steps re-done.

Exit 0: every invariant held; 1: one failed (each failure names its invariant); 2: bad arguments
or the machine cannot run it (not root: the tmpfs mount; a missing peer: run scripts/setup.sh).
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing"))
from gpt2_bytes import bytes_to_unicode  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HB_S, HB_TIMEOUT_S, HANG_S = 0.5, 6, 8
TMPFS_MB = 160
IN_FLIGHT_S = 0.05  # a line printed this close before its agent's SIGKILL may still be in the pipe
SKEW_S = 30
# kind: (weight, min duration s, max duration s); a duration of 0 is an instant event.
KINDS = {
    "rank_kill": (3, 0, 0),
    "rank_stop": (2, 1, 12),     # SIGSTOP, SIGCONT after the duration (a hang past HANG_S restarts)
    "agent_kill": (2, 0, 0),
    "agent_stop": (1, 9, 12),    # longer than the heartbeat timeout: that agent must be declared lost
    "server_kill": (2, 1, 4),    # SIGKILL, restarted after the duration
    "s3_503": (2, 3, 10),
    "s3_reset": (2, 3, 10),
    "s3_stall": (1, 3, 8),
    "s3_drop": (1, 3, 8),
    "disk_full": (2, 3, 10),
    "clock_skew": (2, 0, 0),     # the next agent the server starts runs SKEW_S fast or slow
}
# Drawn from a stream of its own (so the kinds above keep each seed's schedule as it was): the store
# refuses the PUT of every other object but never a manifest.json (the proxy's "torn" mode) for the
# duration, then a rank of the job is SIGKILLed before the store heals. A checkpoint written meanwhile
# is left with some of its files and no manifest: the attempt after it must resume from a whole one
# (the protections that written-manifest-last and resume-from-the-newest-complete give).
TORN = (3, 8)        # its duration, s
TORN_EVERY = (8, 20)  # s between two of them (and before the first)


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)



def schedule(seeds, minutes):
    """The whole schedule from the seeds alone: [(t, kind, duration, pick, arg)]. Several seeds (one
    set-up for several: CI's) run one after another, MINUTES each, each its own schedule as it is
    alone, shifted."""
    out = []
    for i, seed in enumerate(seeds):
        out += [(round(ev[0] + i * minutes * 60, 1),) + ev[1:] for ev in one_schedule(seed, minutes)]
    return out


def one_schedule(seed, minutes):
    rnd = random.Random(seed)
    names = sorted(KINDS)
    weights = [KINDS[k][0] for k in names]
    out, t = [], 8.0
    while t < minutes * 60:
        kind = rnd.choices(names, weights)[0]
        lo, hi = KINDS[kind][1:]
        dur = round(rnd.uniform(lo, hi), 1) if hi else 0.0
        arg = rnd.choice(["+30s", "-30s"]) if kind == "clock_skew" else ""
        out.append((round(t, 1), kind, dur, rnd.randrange(1 << 30), arg))
        t += rnd.uniform(2.0, 6.0)
    torn, t = random.Random(f"torn {seed}"), 8.0
    t += torn.uniform(*TORN_EVERY)
    while t < minutes * 60:
        out.append((round(t, 1), "ckpt_torn", round(torn.uniform(*TORN), 1), torn.randrange(1 << 30), ""))
        t += torn.uniform(*TORN_EVERY)
    return sorted(out, key=lambda ev: ev[0])


def byte_tokenizer(folder):
    """A tokenizer of the 256 bytes and <|endoftext|> (GPT-2's byte-to-character map, no merges): a
    257-token vocabulary keeps each checkpoint at 1.5 MB, where GPT-2's 50257 would make it 40 MB."""
    enc = {c: b for b, c in bytes_to_unicode().items()}
    enc["<|endoftext|>"] = 256
    os.makedirs(folder)
    with open(f"{folder}/encoder.json", "w") as f:
        json.dump(enc, f)
    return folder


def proc_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def proc_env(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    except OSError:
        return {}


def pids():
    return sorted(int(p) for p in os.listdir("/proc") if p.isdigit())


class Soak:
    def __init__(self, a):
        self.a = a
        self.anneal = os.path.abspath(a.anneal)
        self.dir = tempfile.mkdtemp(prefix="anneal_soak.", dir=a.tmp)
        os.chmod(self.dir, 0o755)  # sandboxed ranks read the dataset and write truth/ as nobody
        self.failures = []
        self.excused = 0      # lines printed within IN_FLIGHT_S of (or after) their agent's SIGKILL, not stored
        self.events = []      # dicts: the report's rows
        self.jobs = []        # job ids, in order
        self.names = {}       # job id -> (name, checkpoint prefix)
        self.server = None
        self.proxy = None
        self.mounted = False
        self.t0 = None
        self.tag = a.seed.replace(",", "-")  # in job names

    # ---------------------------------------------------------------- set-up
    def sh(self, *cmd, **kw):
        return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout

    def setup(self):
        d = self.dir
        # The dataset and the job's source folder.
        self.sh(self.anneal, "prep", "--input", f"{ROOT}/data/kjv", "--output", f"{d}/ds", "--val-fraction", "0.05",
                "--unit-mb", "1", "--quiet", "--tokenizer", byte_tokenizer(f"{d}/bytes"))
        os.makedirs(f"{d}/src")
        with open(f"{d}/src/cfg.yaml", "w") as f:
            f.write(f"""model: {{vocab_size: 257, max_seq_len: 64, n_layer: 2, n_head: 2, n_embd: 64}}
data: {{dir: {d}/ds, seq_len: 64, batch_size: 4, seed: 3}}
optim: {{lr: 3.0e-3, warmup_steps: 2}}
train: {{steps: {self.a.steps}, log_every: 1, eval_every: 0, eval_batches: 1, checkpoint_every: {self.a.checkpoint_every}, seed: 11,
        peak_gflops: 100, threads: 1}}
dist: {{timeout_s: 20}}
""")
        # Each rank's own record of every line it printed, each with the moment it was printed
        # (CLOCK_MONOTONIC, which the soak's clock skew leaves alone), beside the copy the agent ships.
        # A rank killed by a signal is re-raised on this script, so the agent sees the signal too.
        with open(f"{d}/src/run.sh", "w") as f:
            f.write(f"""#!/bin/bash
"$@" 2>&1 | perl -MTime::HiRes=clock_gettime,CLOCK_MONOTONIC -e '
  open(my $f, ">>", $ARGV[0]) or die "truth: $!"; select($f); $| = 1; select(STDOUT); $| = 1;
  while (my $l = <STDIN>) {{ printf $f "%.6f %s", clock_gettime(CLOCK_MONOTONIC), $l; print $l }}' \\
  "{d}/truth/$ANNEAL_JOB.$ANNEAL_ATTEMPT.$RANK"
rc=${{PIPESTATUS[0]}}
if [ "$rc" -gt 128 ]; then kill -$((rc - 128)) $$; fi
exit "$rc"
""")
        ref = self.start_reference()  # beside radosgw's start, which mostly waits
        rgw, mon, self.port = map(int, self.sh(f"{ROOT}/scripts/free_port.sh", "3").split())
        log(f"work folder {d}; radosgw on {rgw}, server on {self.port}")
        env_line = self.sh(f"{ROOT}/scripts/start_radosgw.sh", f"{d}/ceph", str(rgw), str(mon),
                           env=dict(os.environ, RADOSGW_MEMSTORE_MB=str(self.a.memstore_mb)))
        self.s3env = dict(kv.split("=", 1) for kv in env_line.replace("export ", "").split())
        self.rgw = rgw
        self.s3cmd = ["s3cmd", f"--access_key={self.s3env['AWS_ACCESS_KEY_ID']}",
                      f"--secret_key={self.s3env['AWS_SECRET_ACCESS_KEY']}", f"--host=127.0.0.1:{rgw}",
                      f"--host-bucket=127.0.0.1:{rgw}", "--no-ssl", "--region=us-east-1", "-c", "/dev/null"]
        self.sh(*self.s3cmd, "mb", "s3://soak")
        self.mode_file = f"{d}/s3_mode"
        open(self.mode_file, "w").write("forward\n")
        self.proxy_log = open(f"{d}/proxy.log", "w")
        self.proxy = subprocess.Popen([self.a.proxy, "127.0.0.1", str(rgw), self.mode_file], stdout=subprocess.PIPE,
                                      text=True)
        first = self.proxy.stdout.readline().split()
        self.proxy_port = int(first[1])
        self.proxy_lines = []
        import threading
        threading.Thread(target=self._read_proxy, daemon=True).start()
        # The agents' work root, with every job's checkpoint folder, on a small file system of its own.
        self.work = f"{d}/work"
        os.makedirs(self.work)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MB}m,mode=0755", "tmpfs", self.work], check=True)
        self.mounted = True
        os.makedirs(f"{d}/truth")
        os.chmod(f"{d}/truth", 0o1777)
        # The agent program: anneal, under faketime when the soak queued a clock skew for the next start.
        self.skew_file = f"{d}/next_skew"
        wrapper = f"{d}/agent.sh"
        with open(wrapper, "w") as f:
            f.write(f"""#!/bin/sh
# The chaos soak's agent: a queued skew (one line, +30s or -30s) is taken by the next agent started.
skew=""
if mv "{self.skew_file}" "{self.skew_file}.$$" 2>/dev/null; then skew=$(cat "{self.skew_file}.$$"); rm -f "{self.skew_file}.$$"; fi
if [ -n "$skew" ]; then echo "$skew $*" >>"{d}/skewed_agents"; echo "soak: this agent's clock is $skew off" >&2; exec env FAKETIME_DONT_FAKE_MONOTONIC=1 faketime -f "$skew" "{self.anneal}" "$@"; fi
exec "{self.anneal}" "$@"
""")
        os.chmod(wrapper, 0o755)
        self.wrapper = wrapper
        self.finish_reference(ref)
        self.start_server()

    def _read_proxy(self):
        for line in self.proxy.stdout:
            self.proxy_lines.append((time.time(), line.rstrip("\n")))
            self.proxy_log.write(line)
            self.proxy_log.flush()

    def start_reference(self):
        log("the uninterrupted reference run (2 ranks, no faults)")
        return subprocess.Popen([self.anneal, "launch", "--nproc-per-node", "2", "--", self.anneal, "train", "--config",
                                 f"{self.dir}/src/cfg.yaml", "--set", f"train.checkpoint_dir={self.dir}/ref_ckpt"],
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=dict(os.environ, OMP_NUM_THREADS="1"))

    def finish_reference(self, ref):
        out = ref.communicate()[0]
        m = re.findall(r"state hash[^:]*: ([0-9a-f]+)", out)
        if ref.returncode != 0 or not m:
            sys.exit(f"soak: the reference run failed (exit {ref.returncode}): {out[-2000:]}")
        self.ref_hash = m[-1]
        log(f"reference state hash {self.ref_hash}")

    def start_server(self):
        env = dict(os.environ, OMP_NUM_THREADS="1", ANNEAL_S3_ENDPOINT=f"http://127.0.0.1:{self.proxy_port}",
                   AWS_ACCESS_KEY_ID=self.s3env["AWS_ACCESS_KEY_ID"],
                   AWS_SECRET_ACCESS_KEY=self.s3env["AWS_SECRET_ACCESS_KEY"])
        env.pop("ANNEAL_TOKEN", None)
        logf = open(f"{self.dir}/server.log", "a")
        self.server = subprocess.Popen(
            [self.anneal, "server", "--data-dir", f"{self.dir}/srv", "--listen", f"127.0.0.1:{self.port}",
             "--max-instances", "4", "--heartbeat-s", str(HB_S), "--heartbeat-timeout-s", str(HB_TIMEOUT_S),
             "--work-root", self.work, "--agent-binary", self.wrapper, "--health-min-free-disk-gb", "0.05"],
            stdout=logf, stderr=subprocess.STDOUT, env=env)
        self.url = f"http://127.0.0.1:{self.port}"
        for _ in range(200):
            try:
                self.token = open(f"{self.dir}/srv/admin.token").read().strip()
                self.api("GET", "/v1/jobs")
                return
            except Exception:
                time.sleep(0.1)
        sys.exit(f"soak: the server did not start: {open(self.dir + '/server.log').read()[-2000:]}")

    def api(self, method, path, timeout=10):
        req = urllib.request.Request(self.url + path, method=method, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.load(r)

    # ---------------------------------------------------------------- the jobs
    def submit(self):
        k = len(self.jobs)
        spec = f"{self.dir}/job{k}.yaml"
        with open(spec, "w") as f:
            f.write(f"""name: soak-{self.tag}-{k}
entrypoint:
  command: [bash, run.sh, anneal, train, --config, cfg.yaml]
source: src
sandbox: false  # so that each rank's own record of its lines (truth/) can lie outside its job's folder
checkpoint: {{uri: "s3://soak/job{k}", sync: false}}  # the trainer writes there itself, through the proxy
resources: {{instance_count: 2}}
retry: {{max_attempts: 100}}
stopping: {{hang_timeout_s: {HANG_S}, hang_startup_s: 120, grace_period_s: 10}}
environment: {{OMP_NUM_THREADS: "1"}}
""")
        env = dict(os.environ, ANNEAL_TOKEN_FILE=f"{self.dir}/srv/admin.token")
        for _ in range(60):  # the server may be down for a moment (a server_kill event)
            r = subprocess.run([self.anneal, "submit", spec, "--server", self.url], text=True, capture_output=True,
                               env=env)
            if r.returncode == 0:
                self.jobs.append(r.stdout.strip())
                self.names[self.jobs[-1]] = (f"soak-{self.tag}-{k}", f"job{k}")
                log(f"submitted {self.jobs[-1]}")
                return
            time.sleep(0.5)
        self.fail("submit", f"anneal submit kept failing: {r.stderr.strip()}")

    def describe(self, job):
        try:
            return self.api("GET", f"/v1/jobs/{job}")
        except Exception:
            return None

    def current_pids(self, job, what):
        """Processes of the job: 'rank' (anneal train) or 'agent' (its instances' agents)."""
        out = []
        for p in pids():
            c = proc_cmdline(p)
            if len(c) < 2 or not c[0].endswith(b"anneal"):
                continue
            if what == "rank" and c[1] == b"train" and proc_env(p).get(b"ANNEAL_JOB", b"") == job.encode():
                out.append(p)
            elif what == "agent" and c[1] == b"agent" and any(x.startswith(job.encode() + b"-a") for x in c):
                out.append(p)
        return out

    # ---------------------------------------------------------------- the faults
    def fail(self, invariant, why):
        self.failures.append((invariant, why))
        log(f"FAIL [{invariant}] {why}")

    def inject(self, ev, job):
        t, kind, dur, pick, arg = ev
        row = {"t": t, "kind": kind, "dur": dur, "job": job, "target": "", "note": "", "at": time.time(),
               "mono": time.monotonic(),
               "attempt": (self.describe(job) or {}).get("attempt")}
        undo = None
        if kind in ("rank_kill", "rank_stop", "agent_kill", "agent_stop"):
            procs = self.current_pids(job, kind.split("_")[0])
            attempt = row["attempt"]
            mine = [p for p in procs if kind.startswith("rank") or
                    any(re.match(rf"{re.escape(job)}-a{attempt}-n", x.decode(errors="replace")) for x in proc_cmdline(p))]
            procs = mine or procs
            if not procs:
                row["note"] = "no such process running now: nothing injected"
            else:
                pid = procs[pick % len(procs)]
                row["target"] = f"pid {pid}"
                cmd = proc_cmdline(pid)
                row["instance"] = next((x.decode() for x in cmd if x.startswith(job.encode() + b"-a")), "")
                if row["instance"]:
                    row["target"] = row["instance"]
                if kind.endswith("kill"):
                    os.kill(pid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGSTOP)
                    undo = lambda: os.kill(pid, signal.SIGCONT)
        elif kind == "server_kill" and self.server.poll() is not None:
            row["note"] = "the server is down already: nothing injected"
        elif kind == "server_kill":
            row["target"] = f"pid {self.server.pid}"
            self.server.kill()
            self.server.wait()

            def undo(row=row):
                self.start_server()
                row["restarted"] = time.time()
                row["recovered"] = f"answering {time.time() - row['at']:.1f} s after the kill"
        elif kind.startswith("s3_"):
            open(self.mode_file, "w").write(kind[3:] + "\n")
            undo = lambda: open(self.mode_file, "w").write("forward\n")
        elif kind == "ckpt_torn":
            open(self.mode_file, "w").write("torn\n")

            def undo(row=row, job=job, pick=pick):
                ranks = self.current_pids(job, "rank")
                if ranks:
                    pid = ranks[pick % len(ranks)]
                    os.kill(pid, signal.SIGKILL)
                    row["target"] = f"rank pid {pid} killed after"
                else:
                    row["note"] = "no rank running at the end: none killed"
                open(self.mode_file, "w").write("forward\n")
        elif kind == "disk_full":
            st = os.statvfs(self.work)
            free = st.f_bavail * st.f_frsize
            filler = f"{self.work}/soak_filler.{len(self.events)}"
            subprocess.run(["fallocate", "-l", str(max(free - 4096, 4096)), filler], check=False)
            row["target"] = f"{free >> 20} MB filled"
            undo = lambda: os.path.exists(filler) and os.remove(filler)
        elif kind == "clock_skew":
            if os.path.exists(self.skew_file) and self.events:  # no agent started since the last one
                last = max(i for i, e in enumerate(self.events) if e["kind"] == "clock_skew")
                self.events[last]["superseded"] = True
            open(self.skew_file, "w").write(arg + "\n")
            row["target"] = f"next agent {arg}"
        self.events.append(row)
        log(f"event {len(self.events)}: {kind} {row['target']} {row['note']} for {dur} s on {job}")
        return undo

    def run(self):
        sched = schedule(self.a.seeds, self.a.minutes)
        log(f"seed {self.a.seed}: {len(sched)} events in {self.a.minutes} min" + (" per seed" if len(self.a.seeds) > 1 else ""))
        self.t0 = time.time()
        self.submit()
        pending = []  # (time, undo)
        i = 0
        while i < len(sched) or pending:
            now = time.time() - self.t0
            for item in [p for p in pending if p[0] <= now]:
                pending.remove(item)
                try:
                    item[1]()
                except Exception as e:  # a process that already ended cannot be continued
                    log(f"undo: {e}")
            if i < len(sched) and sched[i][0] <= now:
                job = self.jobs[-1]
                undo = self.inject(sched[i], job)
                if undo:
                    pending.append((now + max(sched[i][2], 0.5), undo))
                i += 1
            self.next_job_if_done()
            time.sleep(0.1)
        log("faults over: waiting for the last job to end")
        self.wait_done(self.jobs[-1], 600)

    def next_job_if_done(self):
        d = self.describe(self.jobs[-1])
        if d and d.get("status") in ("Completed", "Failed", "Stopped"):
            log(f"{self.jobs[-1]}: {d['status']} ({d.get('secondary_status')}) after attempt {d.get('attempt')}")
            self.submit()

    def wait_done(self, job, timeout):
        end = time.time() + timeout
        while time.time() < end:
            d = self.describe(job)
            if d and d.get("status") in ("Completed", "Failed", "Stopped"):
                return d
            time.sleep(0.5)
        return self.describe(job)

    # ---------------------------------------------------------------- the invariants
    def lines(self, job):
        out, after = [], 0
        while True:
            r = self.api("GET", f"/v1/jobs/{job}/logs?after={after}&limit=10000")
            got = r.get("lines", [])
            out += got
            if not got:
                return out
            after = r.get("next", got[-1].get("id"))

    def check_job(self, job):
        d = self.wait_done(job, 10)
        if not d or d.get("status") != "Completed":
            self.fail("completed", f"{job} ended {d and d.get('status')} ({d and d.get('failure_reason', '')[:300]})")
            return
        lines = self.lines(job)
        # The attempt that completed prints the final hash; an earlier one stopped by SIGTERM prints
        # its own, which may arrive later (a gone agent's spool is delivered when it is found).
        final = d.get("attempt")
        hashes = [m.group(1) for ln in lines if ln.get("rank") == 0 and ln.get("attempt") == final
                  for m in [re.search(r"state hash[^:]*: ([0-9a-f]+)", ln.get("text", ""))] if m]
        if not hashes or hashes[-1] != self.ref_hash:
            self.fail("state hash", f"{job}: {hashes[-1] if hashes else 'none'} != the uninterrupted run's {self.ref_hash}")
        # Every line a rank printed (its tee), exactly once, in order, per attempt.
        by = {}
        for ln in lines:
            if ln.get("rank", -1) >= 0:
                by.setdefault((ln["attempt"], ln["rank"]), []).append(ln["text"])
        name, prefix = job, self.names[job][1]  # truth/ files are named by $ANNEAL_JOB, the job's id
        for f in os.listdir(f"{self.dir}/truth"):
            if not f.startswith(name + "."):
                continue
            a, r = map(int, f[len(name) + 1:].split("."))
            truth = [ln.split(" ", 1) for ln in open(f"{self.dir}/truth/{f}", errors="replace").read().splitlines()]
            want = [t for _, t in truth]
            got = by.get((a, r), [])
            if got == want:
                continue
            if len(got) != len(set(got)):
                self.fail("log lines exactly once", f"{job} attempt {a} rank {r}: {len(got) - len(set(got))} line(s) stored twice")
            # A line missing is excused only when it was printed after (or within IN_FLIGHT_S before) its
            # agent was SIGKILLed: it was then at most in the pipe the dead agent never read.
            kill = self.agent_dead_from(job, a, r)
            gotset = set(got)
            lost = [(float(ts), t) for ts, t in truth if t not in gotset and float(ts) < kill - IN_FLIGHT_S]
            excused = sum(1 for ts, t in truth if t not in gotset) - len(lost)
            self.excused += excused
            if lost:
                self.fail("log lines exactly once",
                          f"{job} attempt {a} rank {r}: {len(lost)} line(s) printed and never stored"
                          f"{f' ({kill - lost[0][0]:.2f} s before its agent was killed)' if kill < float('inf') else ''},"
                          f" first: {lost[0][1][:100]!r}")
        # What each attempt resumed from: a checkpoint whose manifest the object store holds.
        for ln in lines:
            m = re.search(r"resumed from (\S+)/(step-\d+) at step", ln.get("text", ""))
            if m:
                step = str(int(m.group(2)[len("step-"):]))
                r = subprocess.run([self.anneal, "ckpt", "verify", f"s3://soak/{prefix}", "--step", step],
                                   text=True, capture_output=True,
                                   env=dict(os.environ, ANNEAL_S3_ENDPOINT=f"http://127.0.0.1:{self.rgw}", **self.s3keys()))
                if r.returncode != 0:
                    self.fail("loaded checkpoints are whole", f"{job} attempt {ln['attempt']} resumed from {m.group(2)}, "
                              f"which does not verify in the store: {r.stderr.strip()[:300]}")

    def agent_dead_from(self, job, attempt, node):
        """When the agent of (job, attempt, node) stopped reading its ranks' output for good: its SIGKILL,
        or the SIGSTOP before it when it was killed while stopped (inf: never)."""
        mine = [e for e in self.events if re.fullmatch(rf"{re.escape(job)}-a{attempt}-n{node}(-h\d+)?", e.get("instance", ""))]
        kills = [e["mono"] for e in mine if e["kind"] == "agent_kill"]
        if not kills:
            return float("inf")
        kill = min(kills)
        stops = [e["mono"] for e in mine if e["kind"] == "agent_stop" and e["mono"] < kill < e["mono"] + e["dur"]]
        return min(stops + [kill])

    def s3keys(self):
        return {k: self.s3env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}

    def check_instances(self):
        """No healthy agent declared lost; every agent stopped past the heartbeat timeout declared lost
        (unless its attempt ended first for another reason, which releases it)."""
        lost, ends = set(), {}
        for job in self.jobs:
            for h in (self.describe(job) or {}).get("history", []):
                lost.update(re.findall(r"instance (\S+) \([^)]*\) lost", h.get("message", "")))
                if h["secondary_status"] in ("Restarting", "Completed", "Failed", "Stopped"):
                    ends.setdefault(job, []).append(h["at"])
        hurt = {e["instance"] for e in self.events if e["kind"] in ("agent_kill", "agent_stop") and e.get("instance")}
        for inst in sorted(lost - hurt):
            self.fail("no healthy agent lost", f"instance {inst} was declared lost, but the soak neither stopped nor killed it")
        for e in self.events:
            if e["kind"] != "agent_stop" or not e.get("instance") or e["instance"] in lost:
                continue
            if any(e["at"] < t < e["at"] + e["dur"] for t in ends.get(e["job"], [])):
                continue  # its attempt ended (and released it) while it was stopped
            # A server restarted meanwhile counts heartbeats again from its start: the agent must have
            # been silent past the timeout after the last restart.
            up = max([r["restarted"] for r in self.events if r["kind"] == "server_kill" and "restarted" in r
                      and e["at"] < r["restarted"] < e["at"] + e["dur"]] + [e["at"]])
            if e["at"] + e["dur"] - up < HB_TIMEOUT_S + 1:
                continue
            self.fail("a stopped agent is lost", f"instance {e['instance']} was stopped {e['dur']} s "
                      f"(heartbeat timeout {HB_TIMEOUT_S} s) and never declared lost")

    def check_store(self):
        out = subprocess.run(self.s3cmd + ["multipart", "s3://soak"], text=True, capture_output=True).stdout
        # s3cmd prints the bucket, a header (Initiated, Path, Id), then one tab-separated row per upload.
        open_uploads = [ln for ln in out.splitlines() if "\t" in ln and not ln.startswith("Initiated")]
        if open_uploads:
            self.fail("no orphaned multipart uploads", f"{len(open_uploads)} still open: {open_uploads[:2]}")
        r = subprocess.run(["sqlite3", f"{self.dir}/srv/anneal.db", "PRAGMA integrity_check"], text=True, capture_output=True)
        if r.stdout.strip() != "ok":
            self.fail("store integrity", f"PRAGMA integrity_check: {r.stdout.strip()[:300]} {r.stderr.strip()[:200]}")

    def job_processes(self):
        """Every process left of the soak's jobs: their ranks (and run.sh, perl: whatever carries
        ANNEAL_JOB) and their instances' agents."""
        ids = {j.encode() for j in self.jobs}
        left = []
        for p in pids():
            c = proc_cmdline(p)
            if proc_env(p).get(b"ANNEAL_JOB") in ids or (len(c) > 1 and c[1] == b"agent" and
                                                        any(x.startswith(j + b"-a") for x in c for j in ids)):
                left.append(f"pid {p} ({b' '.join(c[:2]).decode(errors='replace')})")
        return left

    def check_no_processes(self):
        # Released agents exit on their next heartbeat; the local backend kills one still running 30 s later.
        for _ in range(45):
            left = self.job_processes()
            if not left:
                return
            time.sleep(1)
        self.fail("no process left", ", ".join(left[:5]))

    # ---------------------------------------------------------------- the report and the end
    def report(self):
        rows = ["| # | t (s) | event | target | for (s) | job, attempt | met / detected after (s) | recovered after (s) |",
                "|---|---|---|---|---|---|---|---|"]
        for n, e in enumerate(self.events, 1):
            rows.append(f"| {n} | {e['t']} | {e['kind']} | {e['target'] or e['note']} | {e['dur'] or ''} | "
                        f"{e['job']}, {e['attempt']} | {e.get('detected', '')} | {e.get('recovered', '')} |")
        return "\n".join(rows)

    def attribute(self):
        """Detection and recovery per event, from each job's history and the proxy's fault lines."""
        hist = []
        for job in self.jobs:
            for h in (self.describe(job) or {}).get("history", []):
                hist.append((h["at"], job, h["secondary_status"], h.get("message", "")))
        hist.sort()
        for e in self.events:
            if e["kind"] == "clock_skew":
                took = [ln.split() for ln in open(f"{self.dir}/skewed_agents").read().splitlines()] \
                    if os.path.exists(f"{self.dir}/skewed_agents") else []
                n = sum(1 for x in self.events[:self.events.index(e) + 1] if x["kind"] == "clock_skew" and not x.get("superseded"))
                if e.get("superseded"):
                    e["detected"] = "replaced by the next clock_skew before any agent started"
                elif n <= len(took):
                    inst = next((took[n - 1][i + 1] for i, w in enumerate(took[n - 1]) if w == "--instance-id"), "?")
                    e["detected"] = f"applied to {inst} ({took[n - 1][0]}); never declared lost" if not any(
                        f["kind"] == "agent_kill" and f.get("instance") == inst for f in self.events) else f"applied to {inst}"
                continue
            if e["kind"].startswith("s3_") or e["kind"] == "ckpt_torn":
                met = [t for t, ln in self.proxy_lines if e["at"] <= t <= e["at"] + e["dur"] + 1]
                e["detected"] = f"{len(met)} request(s) met it" + (f", first {met[0] - e['at']:.1f}" if met else "")
                if e["kind"] != "ckpt_torn":
                    continue
            later = [h for h in hist if h[0] >= e["at"] and h[1] == e["job"] and h[2] in ("Restarting", "Failed")]
            if later and e["target"]:
                e["detected"] = (f"{e['detected']}; " if e.get("detected") else "") + \
                    f"{later[0][0] - e['at']:.1f} ({later[0][3].splitlines()[0][:80]})"
                back = [h for h in hist if h[0] > later[0][0] and h[1] == e["job"] and h[2] == "Training"]
                if back and "recovered" not in e:
                    e["recovered"] = f"{back[0][0] - later[0][0]:.1f}"

    def steps_redone(self):
        total = 0
        for job in self.jobs:
            last, resumed = {}, {}
            for ln in self.lines(job):
                if ln.get("rank") != 0:
                    continue
                m = re.match(r"\s*step\s+(\d+)/", ln.get("text", ""))
                if m:
                    last[ln["attempt"]] = max(last.get(ln["attempt"], 0), int(m.group(1)))
                m = re.search(r"resumed from .* at step (\d+)", ln.get("text", ""))
                if m:
                    resumed[ln["attempt"]] = int(m.group(1))
            for a in sorted(last):
                if a + 1 in last:
                    total += max(0, last[a] - resumed.get(a + 1, 0))
        return total

    def finish(self):
        # Everything settles first: every agent gone (a gone one's spool is delivered by the server's
        # next passes), then what the store holds is checked.
        self.check_no_processes()
        time.sleep(2)  # the scheduler passes at least once a second
        for job in self.jobs:
            self.check_job(job)
        self.check_instances()
        self.check_store()
        self.attribute()
        redone = self.steps_redone()
        injected = sum(1 for e in self.events if not e["note"])
        summary = (f"seed {self.a.seed}, {self.a.minutes} min{' each' if len(self.a.seeds) > 1 else ''}: {injected} events injected "
                   f"({len(self.events) - injected} found nothing to hit), {len(self.jobs)} jobs, "
                   f"{redone} steps re-done, {self.excused} line(s) printed as their agent was killed and lost, "
                   f"{len(self.failures)} invariant(s) failed")
        table = self.report()
        if self.a.report:
            with open(self.a.report, "w") as f:
                f.write(summary + "\n\n" + table + "\n")
        print(table)
        log(summary)
        for inv, why in self.failures:
            print(f"FAIL [{inv}] {why}")
        return 1 if self.failures else 0

    def cleanup(self):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup short
        for p in (self.server, self.proxy):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        for job in self.jobs:
            for what in ("agent", "rank"):
                for p in self.current_pids(job, what):
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass
        subprocess.run([f"{ROOT}/scripts/start_radosgw.sh", "--stop", f"{self.dir}/ceph"], capture_output=True)
        if self.mounted:  # the agents' own logs (<work root>/<id>.log) outlive the tmpfs
            os.makedirs(f"{self.dir}/agent_logs", exist_ok=True)
            for f in os.listdir(self.work):
                if f.endswith(".log"):
                    shutil.copy(f"{self.work}/{f}", f"{self.dir}/agent_logs/{f}")
            subprocess.run(["umount", "-l", self.work])
        if not self.a.keep and not self.failures:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            log(f"kept {self.dir}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", required=True, help="N, or N,M,... (each seed's schedule in turn, MINUTES each)")
    p.add_argument("--minutes", type=float, required=True)
    p.add_argument("--anneal", default=f"{ROOT}/build/release/src/anneal")
    p.add_argument("--proxy", default=f"{ROOT}/build/release/tests/anneal_fault_proxy")
    p.add_argument("--report", help="write the summary and the event table here (markdown)")
    p.add_argument("--memstore-mb", type=int, default=2048)
    p.add_argument("--steps", type=int, default=6000, help="each job's training steps (about 4 ms each)")
    p.add_argument("--checkpoint-every", type=int, default=500)
    p.add_argument("--tmp", default="/tmp", help="where the work folder goes")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    p.add_argument("--print-schedule", action="store_true", help="print the schedule SEED gives and exit")
    a = p.parse_args()
    try:
        a.seeds = [int(x) for x in a.seed.split(",")]
    except ValueError:
        p.error(f"--seed {a.seed!r}: give a number or numbers separated by commas")
    if a.print_schedule:
        for ev in schedule(a.seeds, a.minutes):
            print(*ev)
        return 0
    if os.geteuid() != 0:
        print("soak: needs root (it mounts a size-limited tmpfs for the checkpoint folders)", file=sys.stderr)
        return 2
    for tool in ("faketime", "s3cmd", "sqlite3", "fallocate"):
        if not shutil.which(tool):
            print(f"soak: {tool} is missing: run scripts/setup.sh", file=sys.stderr)
            return 2
    s = Soak(a)
    # SIGTERM (ctest's timeout, kill) ends the soak through the cleanup below, like Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        s.setup()
        s.run()
        return s.finish()
    finally:
        s.cleanup()


if __name__ == "__main__":
    sys.exit(main())
