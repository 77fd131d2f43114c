#!/usr/bin/env bash
# e2e.submit_crash: a submit answered 2xx is durable, and a retry never makes a second job.
#   1. The Idempotency-Key header over HTTP: the same key again answers 200 with the same job, the
#      same key with another spec 409, a malformed key 400.
#   2. 20 rounds: 4 clients each run `anneal submit` 8 times in a row (the CLI sends a random key and
#      retries with it while the server gives no answer) while the server is SIGKILLed at a random
#      moment and restarted on the same port. After each round: every job a client was answered for
#      is in the store, and the store holds exactly one job per submit (none lost, none twice: a
#      retry after a lost answer got the job its first try created). CRASH_SEED picks the moments.
# The server runs the static backend with no agents: the jobs stay Pending, nothing else runs.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
SEED=${CRASH_SEED:-$RANDOM}
echo "CRASH_SEED=$SEED (rerun with CRASH_SEED=$SEED to draw the same kill moments)"
RANDOM=$SEED
DATA=$TMP/srv
SERVER=
cleanup() { [ -n "$SERVER" ] && kill -9 "$SERVER" 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
start_server() {  # LISTEN
  "$ANNEAL" server --data-dir "$DATA" --listen "$1" --backend static >>"$TMP/server.log" 2>&1 &
  SERVER=$!
}
healthy() { curl -sf "$URL/v1/health" >/dev/null; }
wait_healthy() { for _ in $(seq 1 200); do healthy && return 0; sleep 0.05; done; return 1; }

start_server 127.0.0.1:0
for _ in $(seq 1 100); do [ -s "$DATA/server.json" ] && break; sleep 0.1; done
URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$DATA/server.json")
PORT=${URL##*:}
check "the server answers at $URL" wait_healthy
export ANNEAL_TOKEN_FILE=$DATA/admin.token
cat >"$TMP/job.yaml" <<'YAML'
name: crash
entrypoint: {command: ["true"]}
YAML

# ---- 1. the header ----
post() {  # KEY SPEC_JSON -> "HTTP_CODE BODY"
  curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$URL/v1/jobs" -H "Authorization: Bearer $(cat "$ANNEAL_TOKEN_FILE")" \
    -H "Content-Type: application/json" -H "Idempotency-Key: $1" -d "$2"
  echo " $(cat "$TMP/body")"
}
spec='{"name": "hdr", "entrypoint": {"command": ["true"]}}'
first=$(post key-1 "$spec")
again=$(post key-1 "$spec")
id1=$($PY -c 'import json,sys; print(json.loads(sys.argv[1].split(" ",1)[1])["id"])' "$first")
check "a new key creates a job (201)" test "${first%% *}" = 201
check "the same key again: 200 and the same job $id1" \
  $PY -c 'import json,sys; c,b=sys.argv[1].split(" ",1); b=json.loads(b); sys.exit(not (c=="200" and b["id"]==sys.argv[2] and b["existed"]))' "$again" "$id1"
other=$(post key-1 '{"name": "hdr", "entrypoint": {"command": ["false"]}}')
check "the same key with another spec: 409 naming the job" bash -c "[[ '${other%% *}' == 409 && '$other' == *$id1* ]]"
badkey=$(post 'bad key!' "$spec")
check "a malformed key: 400 naming the header" bash -c "[[ '${badkey%% *}' == 400 && '$badkey' == *Idempotency-Key* ]]"
check "the key is shown by describe" bash -c "'$ANNEAL' describe $id1 --server '$URL' --json | grep -q '\"idempotency_key\": \"key-1\"'"

# ---- 2. crashes during submits ----
stored() { "$ANNEAL" jobs --server "$URL" --limit 10000 --json | $PY -c 'import json,sys; [print(j["id"]) for j in json.load(sys.stdin)["jobs"] if j["name"]=="crash"]' | sort; }
client() {  # ROUND CLIENT: 8 submits in a row; each answered id to acked.ROUND.CLIENT
  for i in $(seq 1 8); do
    if id=$("$ANNEAL" submit "$TMP/job.yaml" --server "$URL" --retry-s 30 2>>"$TMP/clients.err"); then
      echo "$id" >>"$TMP/acked.$1.$2"
    else
      echo "round $1 client $2 submit $i: not answered" >>"$TMP/lost"
    fi
  done
}
ROUNDS=20 bad_rounds=0 total=0 retried=0
for r in $(seq 1 $ROUNDS); do
  pids=()
  for c in 1 2 3 4; do client "$r" "$c" & pids+=($!); done
  sleep "0.$(printf '%03d' $((RANDOM % 400 + 20)))"  # 0.02-0.42 s into the round
  kill -9 "$SERVER"; wait "$SERVER" 2>/dev/null
  sleep "0.$(printf '%03d' $((RANDOM % 300)))"
  start_server "127.0.0.1:$PORT"
  wait_healthy || bad "round $r: the restarted server never answered (see $TMP/server.log)"
  for p in "${pids[@]}"; do wait "$p"; done
  total=$((total + 32))
  cat "$TMP"/acked.*.* | sort >"$TMP/acked"
  stored >"$TMP/stored"
  if [ "$(wc -l <"$TMP/acked")" -ne "$total" ] || ! cmp -s "$TMP/acked" "$TMP/stored"; then
    bad_rounds=$((bad_rounds + 1))
    echo "round $r: $(wc -l <"$TMP/acked") of $total submits answered, $(wc -l <"$TMP/stored") jobs stored;" \
         "answered but not stored: $(comm -23 "$TMP/acked" "$TMP/stored" | tr '\n' ' ')" \
         "stored but not answered (a second job): $(comm -13 "$TMP/acked" "$TMP/stored" | tr '\n' ' ')"
  fi
done
retried=$(grep -c "retrying for up to" "$TMP/clients.err" 2>/dev/null || true)
echo "$ROUNDS rounds, $total submits, $(wc -l <"$TMP/stored") jobs stored; $retried submits retried after getting no answer"
check "every answered submit stored, one job per submit, in all $ROUNDS rounds" test "$bad_rounds" -eq 0
check "no submit went unanswered (each retried until the restarted server answered)" test ! -s "$TMP/lost"
check "the kills hit submits in flight (some retried)" test "$retried" -gt 0
finish
