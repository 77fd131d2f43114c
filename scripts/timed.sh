#!/usr/bin/env bash
# timed.sh NAME COMMAND...: runs COMMAND and records its wall time as "NAME SECONDS" in
# build/step_times.tsv (one line per NAME, the latest run's), which scripts/run_tests.sh prints at the
# end of `make test` beside the tiers' times. Exits with COMMAND's status.
name=$1; shift
start=$EPOCHREALTIME
"$@"
rc=$?
secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
mkdir -p build
f=build/step_times.tsv
tmp=$(mktemp "$f.XXXXXX")  # make -j: two steps may finish at once
{ [ -f "$f" ] && grep -v "^$name	" "$f"; printf '%s\t%s\n' "$name" "$secs"; } >"$tmp" && mv "$tmp" "$f"
exit $rc
