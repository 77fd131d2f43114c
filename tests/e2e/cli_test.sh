#!/usr/bin/env bash
# The command line as users meet it: help, version, exit codes, tokenize.
source "$(dirname "$0")/lib.sh"

"$ANNEAL" --help >"$TMP/help" 2>&1
check "--help exits 0" test $? -eq 0
check "--help lists tokenize, prep, dataset" grep -q tokenize "$TMP/help"
check "--help lists prep" grep -q prep "$TMP/help"
for c in tokenize prep dataset; do
  check "$c --help" bash -c "\"$ANNEAL\" $c --help >/dev/null"
done
v=$("$ANNEAL" --version)
check "--version names a commit" grep -qE '^anneal [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]{7,}' <<<"$v"
expect_exit "unknown command is exit 2" 2 "" "$ANNEAL" frobnicate
expect_exit "unknown option is exit 2" 2 "" "$ANNEAL" tokenize --no-such-flag

ids=$(printf 'Hello world! The quick brown fox.' | "$ANNEAL" tokenize)
check "tokenize gives tiktoken's ids" test "$ids" = "15496 995 0 383 2068 7586 21831 13"
ids=$(printf '<|endoftext|>' | "$ANNEAL" tokenize)
check "<|endoftext|> in text is ordinary text" test "$ids" = "27 91 437 1659 5239 91 29"
printf 'caf\xe9' >"$TMP/latin1.txt"
# No GPU here: the CUDA backend is refused before any work, naming why and the fix.
if ! nvidia-smi -L >/dev/null 2>&1; then
  expect_exit "train.device=cuda without a GPU is exit 2 naming the reason and the fix" 2 \
    "train.device = cuda but .*train.device=cpu" "$ANNEAL" train --config examples/kjv_tiny.yaml --set train.device=cuda
  expect_exit "train.device=cuda with train.kernels=ref is exit 2 naming both keys" 2 \
    "train.kernels = ref runs on the CPU but train.device = cuda" \
    "$ANNEAL" train --config examples/kjv_tiny.yaml --set train.device=cuda --set train.kernels=ref
else
  echo "SKIP (not counted as passed): train.kernels=cuda without a GPU — this machine has one"
fi
# A job of several instances given each instance's own checkpoint folder could never commit a
# checkpoint (rank 0 waits for every rank's files there): refused at the start, naming the fix.
expect_exit "train.checkpoint_dir = \$ANNEAL_CHECKPOINT_DIR across instances is exit 2 naming the fix" 2 \
  "a folder of this instance's own.*leave train.checkpoint_dir unset" \
  env RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=1 ANNEAL_CHECKPOINT_DIR="$TMP/node_ckpt" \
  "$ANNEAL" train --config examples/kjv_tiny.yaml --set train.checkpoint_dir="$TMP/node_ckpt"
expect_exit "invalid UTF-8 rejected with offset and fix" 2 "offset 3.*--invalid-utf8 replace" \
  "$ANNEAL" tokenize "$TMP/latin1.txt"
ids=$("$ANNEAL" tokenize --invalid-utf8 replace "$TMP/latin1.txt")
check "invalid UTF-8 replaced by U+FFFD" test "$ids" = "66 1878 4210"
expect_exit "missing file is exit 2 naming it" 2 "nope.txt" "$ANNEAL" tokenize "$TMP/nope.txt"
printf '"a b"\n"\\u00e9t\\u00e9"\n' >"$TMP/lines.jsonl"
out=$("$ANNEAL" tokenize --json-lines "$TMP/lines.jsonl" | wc -l)
check "--json-lines prints one line per string" test "$out" -eq 2
n1=$("$ANNEAL" tokenize --count data/kjv.txt)
n2=$("$ANNEAL" tokenize --count --threads 2 data/kjv.txt)
check "2 threads give the same tokens as 1 ($n1)" test "$n1" = "$n2"
expect_exit "anneal ckpt on a folder that does not exist" 2 "no checkpoint folder" "$ANNEAL" ckpt ls "$TMP/none"
check "... and it was not created" test ! -e "$TMP/none"
expect_exit "anneal ckpt rm needs a step" 2 "needs --step N or --incomplete" "$ANNEAL" ckpt rm "$TMP"
finish
