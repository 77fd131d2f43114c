#!/usr/bin/env bash
# anneal prep as users run it: byte-identical shards for any worker count, a kill -9 followed by a
# re-run that finishes only what was missing, and bad input refused with exit 2.
source "$(dirname "$0")/lib.sh"

shards_equal() { for f in "$1"/*.bin; do cmp -s "$f" "$2/$(basename "$f")" || return 1; done
                 [ "$(ls "$1"/*.bin | wc -l)" = "$(ls "$2"/*.bin | wc -l)" ]; }

"$ANNEAL" prep --input data/kjv --output "$TMP/w1" --workers 1 --val-fraction 0.1 --unit-mb 0.25 --quiet >/dev/null
check "prep with 1 worker" test -f "$TMP/w1/dataset.json"
"$ANNEAL" prep --input data/kjv --output "$TMP/w2" --workers 2 --val-fraction 0.1 --unit-mb 0.25 --quiet >/dev/null
check "2 workers write byte-identical shards" shards_equal "$TMP/w1" "$TMP/w2"
check "dataset.json identical but for created_by" \
  diff <(grep -v created_by "$TMP/w1/dataset.json") <(grep -v created_by "$TMP/w2/dataset.json")
check "dataset verifies" "$ANNEAL" dataset "$TMP/w1" --seq-len 64

# Kill -9 mid-run (once the first unit is recorded), then re-run: only the missing units are done.
big="$TMP/big"; mkdir -p "$big"
for i in 1 2 3; do cp -r data/kjv "$big/copy$i"; done
"$ANNEAL" prep --input "$big" --output "$TMP/killed" --workers 1 --unit-mb 0.1 --quiet >/dev/null &
pid=$!
for _ in $(seq 1 2000); do
  # a completed record, not the temporary a record is written to before its rename
  ls "$TMP/killed/.units" 2>/dev/null | grep -qv '\.tmp\.' && break; sleep 0.005
done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
check "killed run left no dataset.json" test ! -f "$TMP/killed/dataset.json"
out=$("$ANNEAL" prep --input "$big" --output "$TMP/killed" --workers 2 --unit-mb 0.1 --quiet)
echo "  re-run: $out"
check "re-run skipped the recorded units" grep -qE '\(([0-9]+) done now, [1-9][0-9]* already done\)' <<<"$out"
"$ANNEAL" prep --input "$big" --output "$TMP/clean" --workers 2 --unit-mb 0.1 --quiet >/dev/null
check "resumed shards equal a clean run's" shards_equal "$TMP/killed" "$TMP/clean"
check "no temporary files left" test -z "$(ls "$TMP/killed" | grep '\.tmp\.' || true)"

# JSON Lines, gzip.
printf '{"text":"first doc"}\n{"text":"second \\u00e9"}\n' | gzip >"$TMP/docs.jsonl.gz"
"$ANNEAL" prep --input "$TMP/docs.jsonl.gz" --output "$TMP/gz" --quiet >"$TMP/gz.out"
check "gzipped JSON Lines: 2 docs" grep -q "2 docs" "$TMP/gz.out"

# Another encoding: Llama 3's 128,256 ids need uint32 shards (magic 20240801); each document starts
# with <|begin_of_text|>; workers still do not change a byte; a model of another vocabulary is refused.
"$ANNEAL" prep --tokenizer llama3 --input data/kjv --output "$TMP/l1" --workers 1 --unit-mb 0.25 --quiet >/dev/null
"$ANNEAL" prep --tokenizer llama3 --input data/kjv --output "$TMP/l2" --workers 2 --unit-mb 0.25 --quiet >/dev/null
check "llama3: 2 workers write byte-identical shards" shards_equal "$TMP/l1" "$TMP/l2"
first=$(ls "$TMP/l1"/train_*.bin | head -1)
check "llama3: uint32 shards (magic 20240801), <|begin_of_text|> (128000) first" test \
  "$(od -An -tu4 -N4 "$first" | tr -d ' ')/$(od -An -tu4 -j1024 -N4 "$first" | tr -d ' ')" = "20240801/128000"
check "llama3: dataset.json names the tokenizer, its vocabulary and 4-byte ids" grep -qzE \
  '"token_bytes": 4.*"tokenizer": "llama3".*"vocab_size": 128256' "$TMP/l1/dataset.json"
check "llama3: the dataset verifies against its own vocabulary" "$ANNEAL" dataset "$TMP/l1" --seq-len 64
cat >"$TMP/gpt2_on_llama3.yaml" <<YAML
model: {vocab_size: 50257, max_seq_len: 64, n_layer: 1, n_head: 2, n_embd: 16}
data: {dir: $TMP/l1, seq_len: 16, batch_size: 2}
train: {steps: 1}
YAML
expect_exit "a dataset of another vocabulary at train time" 2 "tokenized with 'llama3' \(vocabulary 128256\).*vocabulary is 50257" \
  "$ANNEAL" train --config "$TMP/gpt2_on_llama3.yaml"
expect_exit "an unknown tokenizer" 2 "unknown tokenizer 'llama4'.*cl100k_base" \
  "$ANNEAL" prep --tokenizer llama4 --input data/kjv --output "$TMP/o0"

# Bad input: exit 2, a message naming the problem, no dataset.json.
: >"$TMP/empty.txt"
expect_exit "empty input" 2 "empty.txt is empty" "$ANNEAL" prep --input "$TMP/empty.txt" --output "$TMP/o1"
expect_exit "missing input" 2 "does not exist" "$ANNEAL" prep --input "$TMP/none" --output "$TMP/o2"
printf '{"body":"x"}\n' >"$TMP/notext.jsonl"
expect_exit "JSON Lines without text" 2 'no "text" field' "$ANNEAL" prep --input "$TMP/notext.jsonl" --output "$TMP/o3"
printf 'caf\xe9\n' >"$TMP/latin1.txt"
expect_exit "invalid UTF-8" 2 "not valid UTF-8.*offset 3" "$ANNEAL" prep --input "$TMP/latin1.txt" --output "$TMP/o4"
check "no dataset.json after a rejected input" test ! -f "$TMP/o4/dataset.json"
check "no shard after a rejected input" test -z "$(ls "$TMP/o4" 2>/dev/null | grep .bin || true)"
printf 'not gzip' >"$TMP/bad.txt.gz"
expect_exit "corrupt gzip" 2 "not valid gzip" "$ANNEAL" prep --input "$TMP/bad.txt.gz" --output "$TMP/o5"
expect_exit "bad --val-fraction" 2 "" "$ANNEAL" prep --input data/kjv --output "$TMP/o6" --val-fraction 2
finish
