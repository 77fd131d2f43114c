#!/usr/bin/env bash
# peers.chaos_soak: the short chaos soak (tests/chaos/soak.sh) with CI's fixed seed, then every seed
# of tests/chaos/failed_seeds.txt (that list holds every seed that ever failed; the fixed seed is the
# first of them), each with SOAK_MINUTES of faults (default 1) on jobs of 2000 steps (about 8 s each,
# clean; the long soak's are 6000), so that a run takes about 2 minutes in all.
source "$(dirname "$0")/../e2e/lib.sh"
cd "$(dirname "$0")/../.."
MINUTES=${SOAK_MINUTES:-1}
FIXED=1
seeds=$( (echo $FIXED; grep -Eo '^[0-9]+' tests/chaos/failed_seeds.txt) | awk '!seen[$0]++')
for seed in $seeds; do
  echo "chaos soak: seed $seed, $MINUTES min of faults"
  bash tests/chaos/soak.sh "$seed" "$MINUTES" "$ANNEAL" --report "$TMP/soak_$seed.md" --steps 2000 --checkpoint-every 200 \
    >"$TMP/soak_$seed.log" 2>&1
  rc=$?
  [ -f "$TMP/soak_$seed.md" ] && head -1 "$TMP/soak_$seed.md" | sed 's/^/  /'
  if [ $rc -eq 2 ]; then
    bad "seed $seed: the soak could not run: $(tail -3 "$TMP/soak_$seed.log")"
  else
    check "seed $seed: every invariant held (exit $rc)" test $rc -eq 0 || grep -E '^FAIL|kept ' "$TMP/soak_$seed.log" | sed 's/^/  /'
  fi
done
finish
