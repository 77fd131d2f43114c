#!/usr/bin/env bash
# peers.ui: the dashboard (/ui) in a real browser — Debian's chromium driven headless at 1366x768 by
# playwright-core (npm, tools/npm) through tests/peers/ui_browser.mjs — against a real server (local
# backend) running two short shell jobs whose lines match their metric_definitions:
#   A (user uma) logs 40 steps of loss, lr, grad norm, tokens/s, MFU, a custom metric and val loss, then
#     waits for the test's go file and prints a line after the page was opened, then waits to be stopped;
#   B (admin) logs 25 steps and `<img src=x onerror=window.__pwned=1>`, and completes; its only metric
#     definition is its loss (no `step`), so its points carry no step: plotted over "point #";
#   C (admin) is the built-in trainer with NO metric_definitions (8 steps, a step line every 2, validation
#     every 4) and train.profile_steps, then waits to be stopped: its metrics come from the trainer itself
#     ($ANNEAL_PROGRESS_DIR/metrics-<RANK>), over its real steps; its page shows the step profile's summary.
# The browser checks: a wrong token's sign-in page shows the API's reason; the jobs page lists both and
# filters by user and status; job A's page plots as many loss points as the API returns, its other
# metrics and the instance's samples, the timeline, and the log viewer shows the late line; B's page
# shows the markup as text and runs no script; C's row shows its step and tokens/s, C's page plots loss,
# validation loss, lr, grad norm, tokens/s, MFU and peak RSS at x = the steps its log lines print, with the
# values they print (the loss bit for bit, from its hex float), the x axis named "step", and shows the
# step profile rank 0 logged; compare overlays A, B and C (axis "step or point #"), then A and C over
# steps (axis "step"); a viewer's stop is refused
# (403, shown on the page); a revoked token returns to the sign-in page with the reason; every /ui
# answer has the CSP; no page is wider than the window; no console error or failed request beyond the
# expected 401s and 403. Screenshots: out/ui-screenshots/*.png.
source "$(dirname "$0")/../e2e/lib.sh"
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
SERVER_PID=""
T0=$(date +%s.%N)
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
[ -x /usr/bin/chromium ] || { bad "/usr/bin/chromium is installed (scripts/setup.sh)"; finish; exit 1; }
[ -f tools/npm/node_modules/playwright-core/package.json ] ||
  { bad "playwright-core is installed in tools/npm (scripts/setup.sh)"; finish; exit 1; }

"$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --max-instances 3 --heartbeat-s 0.2 >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do [ -s "$TMP/srv/server.json" ] && break; sleep 0.1; done
URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$TMP/srv/server.json")
export ANNEAL_TOKEN_FILE="$TMP/srv/admin.token"
"$ANNEAL" users add uma --server "$URL" >"$TMP/uma.token" 2>/dev/null
"$ANNEAL" users add vera --role viewer --server "$URL" >"$TMP/vera.token" 2>/dev/null
"$ANNEAL" users add rita --role viewer --server "$URL" >"$TMP/rita.token" 2>/dev/null
check "three users made (uma, vera and rita, viewers)" test -s "$TMP/uma.token" -a -s "$TMP/vera.token" -a -s "$TMP/rita.token"

$PY - "$TMP" <<'PY'
import math, sys
d = sys.argv[1]
with open(f"{d}/a.txt", "w") as f:
    for i in range(1, 41):
        f.write(f"step {i}/40 | loss {3 + 5 * math.exp(-i / 8) + 0.2 * math.sin(i):.4f} | lr {3e-3 * min(1, i / 5):.3e} | "
                f"grad norm {1 + 2 * math.exp(-i / 6):.3f} | {9000 + 37 * i} tok/s | MFU {30 + i % 7 * 0.5:.1f}% | acc {i / 50:.3f}\n")
        if i % 10 == 0:
            f.write(f"step {i} | val loss {3.2 + 4 * math.exp(-i / 9):.4f}\n")
with open(f"{d}/b.txt", "w") as f:
    for i in range(1, 26):
        f.write(f"step {i}/25 | loss {2.8 + 5.5 * math.exp(-i / 6):.4f}\n")
        if i == 12:
            f.write("<img src=x onerror=window.__pwned=1>\n")
PY
DEFS="[{name: step, regex: 'step ([0-9]+)/'}, {name: train_loss, regex: '\\| loss ([0-9.]+)'}, {name: val_loss, regex: 'val loss ([0-9.]+)'},
  {name: lr, regex: 'lr ([0-9.e+-]+)'}, {name: grad_norm, regex: 'grad norm ([0-9.]+)'}, {name: tokens_per_s, regex: '([0-9]+) tok/s'},
  {name: mfu, regex: 'MFU ([0-9.]+)%'}, {name: accuracy, regex: 'acc ([0-9.]+)'}]"
cat >"$TMP/a.yaml" <<YAML
name: ui-a
entrypoint: {command: 'while read -r l; do echo "\$l"; sleep 0.01; done < $TMP/a.txt; for k in \$(seq 1 600); do [ -s $TMP/go ] && break; sleep 0.05; done; echo "late line \$(cat $TMP/go)"; for k in \$(seq 1 1200); do sleep 0.05; done'}
metric_definitions: $DEFS
YAML
cat >"$TMP/b.yaml" <<YAML
name: ui-b
entrypoint: {command: 'while read -r l; do echo "\$l"; done < $TMP/b.txt; echo "a line on stderr" >&2'}
metric_definitions: [{name: train_loss, regex: '\\| loss ([0-9.]+)'}]
YAML
# C: the built-in trainer, 4 steps with steps 2-3 profiled: rank 0 logs the step profile's summary.
"$ANNEAL" prep --input data/kjv --output "$TMP/ds" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
cat >"$TMP/c_cfg.yaml" <<YAML
model: {vocab_size: 50257, max_seq_len: 16, n_layer: 1, n_head: 2, n_embd: 16}
data: {dir: $TMP/ds, seq_len: 16, batch_size: 2, seed: 5}
train: {steps: 8, log_every: 2, eval_every: 4, eval_batches: 1, threads: 1, peak_gflops: 100, resume: none,
        profile_steps: [2, 3]}  # traces in the job's output folder (profile/): a sandboxed job writes only its own folders
YAML
cat >"$TMP/c.yaml" <<YAML
name: ui-c
entrypoint: {command: 'anneal train --config $TMP/c_cfg.yaml && for k in \$(seq 1 1200); do sleep 0.05; done'}
YAML
A=$(ANNEAL_TOKEN_FILE="$TMP/uma.token" "$ANNEAL" submit "$TMP/a.yaml" --server "$URL")
B=$("$ANNEAL" submit "$TMP/b.yaml" --server "$URL")
C=$("$ANNEAL" submit "$TMP/c.yaml" --server "$URL")
check "jobs A ($A, uma), B ($B, admin) and C ($C, the trainer, profiled) submitted" test -n "$A" -a -n "$B" -a -n "$C"
api() { curl -s -H "Authorization: Bearer $(cat "$TMP/srv/admin.token")" "$URL$1"; }
count() { api "/v1/jobs/$1/metrics?name=$2&limit=100000" | $PY -c 'import json,sys; print(len(json.load(sys.stdin)["points"]))'; }
status() { api "/v1/jobs/$1" | $PY -c 'import json,sys; print(json.load(sys.stdin)["status"])'; }
# C has trained once its last points are stored: 4 losses, 2 validations, 4 + 1 peak RSS (the end's).
c_done() { [ "$(count "$C" train_loss)" = 4 ] && [ "$(count "$C" val_loss)" = 2 ] && [ "$(count "$C" peak_rss_mb)" = 5 ]; }
for _ in $(seq 1 300); do [ "$(status "$B")" = Completed ] && c_done && [ "$(count "$A" train_loss)" = 40 ] && break; sleep 0.1; done
check "B completed" test "$(status "$B")" = Completed
check "C trained its 8 steps (4 train_loss, 2 val_loss, 5 peak_rss_mb points) and waits" c_done
check "... C is running" test "$(status "$C")" = InProgress
check "A logged its 40 losses and is running" test "$(count "$A" train_loss)" = 40 -a "$(status "$A")" = InProgress

mkdir -p out/ui-screenshots
rm -f out/ui-screenshots/*.png
UI_URL="$URL" JOB_A="$A" JOB_B="$B" JOB_C="$C" GO_FILE="$TMP/go" SHOTS="$PWD/out/ui-screenshots" ANNEAL="$ANNEAL" \
  ADMIN_TOKEN="$(cat "$TMP/srv/admin.token")" VIEWER_TOKEN="$(cat "$TMP/vera.token")" REVOKED_TOKEN="$(cat "$TMP/rita.token")" \
  timeout 45 node tests/peers/ui_browser.mjs >"$TMP/browser.out" 2>&1
rc=$?
cat "$TMP/browser.out"
PASS=$((PASS + $(grep -c '^ok ' "$TMP/browser.out")))
FAIL=$((FAIL + $(grep -c '^FAIL ' "$TMP/browser.out")))
check "the browser script ran to its end (exit $rc)" test "$rc" = 0
check "A was not stopped by the viewer" test "$(status "$A")" = InProgress
"$ANNEAL" stop "$A" --server "$URL" >/dev/null 2>&1
"$ANNEAL" stop "$C" --server "$URL" >/dev/null 2>&1
for _ in $(seq 1 100); do [ "$(status "$A")" = Stopped ] && [ "$(status "$C")" = Stopped ] && break; sleep 0.1; done
check "A stopped by its admin" test "$(status "$A")" = Stopped
check "C stopped" test "$(status "$C")" = Stopped
for p in signin jobs job job-b job-builtin-plots job-profile compare viewer-stop; do check "screenshot out/ui-screenshots/$p.png" test -s "out/ui-screenshots/$p.png"; done
echo "wall time: $($PY -c "import time; print(round(time.time() - $T0, 1))") s"
finish
