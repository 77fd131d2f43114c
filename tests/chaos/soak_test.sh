#!/usr/bin/env bash
# peers.chaos_soak: the short chaos soak (tests/chaos/soak.sh) with CI's fixed seed, then every seed
# of tests/chaos/failed_seeds.txt (that list holds every seed that ever failed; the fixed seed is the
# first of them), one set-up for all: each seed's schedule in turn, SOAK_MINUTES of faults each
# (default 0.5), on jobs of 2000 steps (about 8 s each, clean; the long soak's are 6000), so that the
# test takes about 2 minutes in all.
source "$(dirname "$0")/../e2e/lib.sh"
cd "$(dirname "$0")/../.."
MINUTES=${SOAK_MINUTES:-0.5}
FIXED=1
seeds=$( (echo $FIXED; grep -Eo '^[0-9]+' tests/chaos/failed_seeds.txt) | awk '!seen[$0]++' | paste -sd, -)
echo "chaos soak: seeds $seeds, $MINUTES min of faults each"
bash tests/chaos/soak.sh "$seeds" "$MINUTES" "$ANNEAL" --report "$TMP/soak.md" --steps 2000 --checkpoint-every 200 \
  >"$TMP/soak.log" 2>&1
rc=$?
[ -f "$TMP/soak.md" ] && head -1 "$TMP/soak.md" | sed 's/^/  /'
if [ $rc -eq 2 ]; then
  bad "the soak could not run: $(tail -3 "$TMP/soak.log")"
else
  check "seeds $seeds: every invariant held (exit $rc)" test $rc -eq 0 || grep -E '^FAIL|kept ' "$TMP/soak.log" | sed 's/^/  /'
fi
finish
