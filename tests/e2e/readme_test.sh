#!/usr/bin/env bash
# README.md cannot drift from the binary: `make install` puts anneal on a PATH, and the commands of
# README.md's "A real example" run as written (in a scratch folder holding the checkout's data/ and
# examples/), each printing what README.md shows (tests/e2e/readme_check.py says how lines compare;
# it first proves that it catches a wrong count, word or missing line).
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
check "the matcher catches a wrong count, word, missing or extra line" $PY tests/e2e/readme_check.py --self-test

BUILD=$(dirname "$(dirname "$ANNEAL")")
make -s install PREFIX="$TMP/bin" BUILD="$BUILD" >"$TMP/install.log" 2>&1
check "make install PREFIX=DIR copies anneal there" test -x "$TMP/bin/anneal"
check "... saying so, and that DIR is not on PATH" grep -q "installed $TMP/bin/anneal ($TMP/bin is not on PATH" "$TMP/install.log"
check "... a working copy" bash -c "'$TMP/bin/anneal' --version | grep -q '^anneal '"

mkdir -p "$TMP/work"
ln -s "$PWD/data" "$TMP/work/data"
ln -s "$PWD/examples" "$TMP/work/examples"
PATH="$TMP/bin:$PATH" $PY tests/e2e/readme_check.py README.md "$TMP/work" | tee "$TMP/readme.out"
check "every README example command prints what README.md shows" test "${PIPESTATUS[0]}" -eq 0
check "... and the example wrote its files where README says (out/kjv, out/kjv_ckpt)" \
  test -f "$TMP/work/out/kjv/dataset.json" -a -f "$TMP/work/out/kjv_ckpt/step-00000002/manifest.json"
finish
