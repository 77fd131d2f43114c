#!/usr/bin/env bash
# Execution-role credentials enforced by the store itself, end to end (docs/security.md): a real
# radosgw (scripts/start_radosgw.sh, stopped at exit) with an owner user and a user per role
# (role-team-a) whose bucket policy allows only the bucket's team-a/ prefix; an anneal server with a
# roles file giving role team-a that user's keys, and no store credentials of its own.
#   1. the bucket policy itself: role-team-a reads team-a/, is refused team-b/ (curl, SigV4);
#   2. a job of alice's (role team-a): its agent copies a file channel from team-a/ and uploads its
#      output under team-a/ with the role's keys; its rank, using the AWS_* variables it received,
#      reads team-a/ and is refused team-b/ by radosgw (403); team-b's content never shows; the
#      role's secret key is *** in logs and absent from describe;
#   3. specs reaching outside the role's prefixes are refused at submit (403 naming the field).
source "$(dirname "$0")/../e2e/lib.sh"
PY=/usr/bin/python3
curl --help all 2>/dev/null | grep -q -- --aws-sigv4 || skip "this curl has no --aws-sigv4"
SERVER_PID=
read -r RGW_PORT MON_PORT <<<"$(scripts/free_port.sh 2)"
trap '[ -n "$SERVER_PID" ] && { kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; }
      scripts/start_radosgw.sh --stop "$TMP/ceph"; rm -rf "$TMP"' EXIT
env_line=$(scripts/start_radosgw.sh "$TMP/ceph" $RGW_PORT $MON_PORT) || { echo "FAIL radosgw did not start"; exit 1; }
eval "$env_line"  # AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY: the owner (user "anneal"); ANNEAL_S3_ENDPOINT
EP=$ANNEAL_S3_ENDPOINT REGION=us-east-1 B=anneal-roles
OWNER="$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
rand() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }
TA_KEY=TEAMA$(rand 6 | tr a-f A-F) TA_SECRET=teamasecret$(rand 16)
radosgw-admin -c "$RADOSGW_DIR/ceph.conf" user create --uid=role-team-a --display-name=role-team-a \
  --access-key="$TA_KEY" --secret-key="$TA_SECRET" >/dev/null 2>&1 || { echo "FAIL radosgw-admin user create"; exit 1; }
# curl signs with SigV4; radosgw also wants x-amz-content-sha256, which curl 7.88 does not send.
# Query values must be given URL-encoded (prefix=team-a%2F): curl signs the query as written.
s3() {  # KEY:SECRET CURL-ARGS...
  local who=$1; shift
  curl -s --aws-sigv4 "aws:amz:$REGION:s3" --user "$who" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"
}
code() { local who=$1; shift; s3 "$who" -o /dev/null -w '%{http_code}' "$@"; }

# ---- 1. the bucket, its objects and its policy, as the owner ----
TEAM_B_CONTENT="team-b-only-$(rand 8)"
echo "hello from team-a" >"$TMP/ok.txt"
echo "$TEAM_B_CONTENT" >"$TMP/secret.txt"
check "the owner creates the bucket and both objects" test "$(code "$OWNER" -X PUT "$EP/$B") \
$(code "$OWNER" -T "$TMP/ok.txt" "$EP/$B/team-a/ok.txt") $(code "$OWNER" -T "$TMP/secret.txt" "$EP/$B/team-b/secret.txt")" = "200 200 200"
"$ANNEAL" prep --input data/kjv/08_Ruth.txt --output "$TMP/ds" --quiet >/dev/null || { echo "FAIL prep"; exit 1; }
up=
for f in "$TMP"/ds/*; do up+="$(code "$OWNER" -T "$f" "$EP/$B/team-a/ds/$(basename "$f")") "; done
check "the owner uploads a dataset under team-a/ds/" test "$up" = "200 200 "
check "without a policy role-team-a is refused even team-a/ (403)" \
  test "$(code "$TA_KEY:$TA_SECRET" "$EP/$B/team-a/ok.txt")" = 403
cat >"$TMP/policy.json" <<JSON
{"Version": "2012-10-17", "Statement": [
  {"Sid": "team-a-objects", "Effect": "Allow", "Principal": {"AWS": ["arn:aws:iam:::user/role-team-a"]},
   "Action": ["s3:GetObject", "s3:PutObject"], "Resource": ["arn:aws:s3:::$B/team-a/*"]},
  {"Sid": "team-a-list", "Effect": "Allow", "Principal": {"AWS": ["arn:aws:iam:::user/role-team-a"]},
   "Action": ["s3:ListBucket"], "Resource": ["arn:aws:s3:::$B"],
   "Condition": {"StringLike": {"s3:prefix": ["team-a/*"]}}}]}
JSON
check "the owner puts the bucket policy (204)" test "$(code "$OWNER" -X PUT -T "$TMP/policy.json" "$EP/$B?policy=")" = 204
TA="$TA_KEY:$TA_SECRET"
check "role-team-a reads team-a/ok.txt (200)" test "$(code "$TA" "$EP/$B/team-a/ok.txt")" = 200
check "role-team-a is refused team-b/secret.txt (403)" test "$(code "$TA" "$EP/$B/team-b/secret.txt")" = 403
check "role-team-a lists team-a/ (200), not team-b/ or the bucket (403)" test "$(code "$TA" "$EP/$B?list-type=2&prefix=team-a%2F") \
$(code "$TA" "$EP/$B?list-type=2&prefix=team-b%2F") $(code "$TA" "$EP/$B?list-type=2")" = "200 403 403"
check "role-team-a writes under team-a/ (200), not team-b/ (403)" test "$(code "$TA" -T "$TMP/ok.txt" "$EP/$B/team-a/probe.txt") \
$(code "$TA" -T "$TMP/ok.txt" "$EP/$B/team-b/probe.txt")" = "200 403"

# ---- 2. anneal: a server without store credentials, a role with role-team-a's ----
cat >"$TMP/roles.yaml" <<YAML
roles:
  team-a:
    prefixes: [s3://$B/team-a/]
    users: [alice]
    credentials: {access_key_id: $TA_KEY, secret_access_key: $TA_SECRET}
YAML
mkdir -p "$TMP/srv"
env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE \
  AWS_SHARED_CREDENTIALS_FILE="$TMP/no-credentials" AWS_CONFIG_FILE="$TMP/no-config" \
  ANNEAL_S3_ENDPOINT="$EP" AWS_REGION=$REGION \
  "$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --heartbeat-s 0.2 --max-instances 2 \
  --execution-roles "$TMP/roles.yaml" >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do [ -s "$TMP/srv/server.json" ] && break; sleep 0.1; done
[ -s "$TMP/srv/server.json" ] || { echo "FAIL the server did not start: $(tail -3 "$TMP/server.log")"; exit 1; }
URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$TMP/srv/server.json")
export ANNEAL_TOKEN_FILE="$TMP/srv/admin.token"
"$ANNEAL" users add alice --server "$URL" >"$TMP/alice.token" 2>/dev/null
check "alice added, her token printed" grep -q '^ann_' "$TMP/alice.token"
alice() { ANNEAL_TOKEN_FILE="$TMP/alice.token" "$@"; }
field() { alice "$ANNEAL" describe "$1" --server "$URL" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"; }
wait_status() {  # ID STATUS SECONDS: gives up early on another final status
  local end=$((SECONDS + $3)) st
  while [ $SECONDS -lt $end ]; do
    st=$(field "$1" status 2>/dev/null)
    [ "$st" = "$2" ] && return 0
    case "$st" in Completed|Failed|Stopped) return 1;; esac
    sleep 0.2
  done
  return 1
}

mkdir -p "$TMP/job"
cat >"$TMP/job/run.sh" <<'SH'
# The rank: the store calls use only the credentials the agent gave it.
s3() { curl -s --aws-sigv4 "aws:amz:$REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"; }
echo "rank key id: $AWS_ACCESS_KEY_ID"
echo "rank secret: $AWS_SECRET_ACCESS_KEY"
echo "team-a object: $(s3 "$ANNEAL_S3_ENDPOINT/$BUCKET/team-a/ok.txt")"
echo "team-a HTTP $(s3 -o /dev/null -w '%{http_code}' "$ANNEAL_S3_ENDPOINT/$BUCKET/team-a/ok.txt")"
echo "team-b answer: $(s3 "$ANNEAL_S3_ENDPOINT/$BUCKET/team-b/secret.txt" | head -c 120)"
echo "team-b HTTP $(s3 -o /dev/null -w '%{http_code}' "$ANNEAL_S3_ENDPOINT/$BUCKET/team-b/secret.txt")"
echo "team-b list HTTP $(s3 -o /dev/null -w '%{http_code}' "$ANNEAL_S3_ENDPOINT/$BUCKET?list-type=2&prefix=team-b%2F")"
echo "team-b put HTTP $(s3 -o /dev/null -w '%{http_code}' -T run.sh "$ANNEAL_S3_ENDPOINT/$BUCKET/team-b/from-rank.txt")"
echo "channel files: $(cd "$ANNEAL_CHANNEL_TRAIN" && ls | tr '\n' ' ')"
echo "written by the rank of $ANNEAL_JOB" >"$ANNEAL_OUTPUT_DIR/result.txt"
SH
cat >"$TMP/job/job.yaml" <<YAML
name: role-storage
role: team-a
source: .
entrypoint: {command: [bash, run.sh]}
channels: [{name: train, uri: s3://$B/team-a/ds, mode: file}]
output: {uri: s3://$B/team-a/out}
environment: {BUCKET: $B, REGION: $REGION}
stopping: {max_runtime_s: 120}
YAML
jid=$(alice "$ANNEAL" submit "$TMP/job/job.yaml" --server "$URL")
check "alice's job is accepted ($jid)" test -n "$jid"
check "... and completes" wait_status "$jid" Completed 120
alice "$ANNEAL" logs "$jid" --server "$URL" >"$TMP/job.logs" 2>&1
alice "$ANNEAL" describe "$jid" --server "$URL" --json >"$TMP/job.json"
if [ "$(field "$jid" status)" != Completed ]; then
  $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print("  status", d["status"], d["secondary_status"], d["failure_reason"][:600]);
[print("  history", h["secondary_status"], h["message"][:300]) for h in d["history"][-6:]]' "$TMP/job.json"
  sed 's/^/  | /' "$TMP/job.logs" | tail -20
fi
check "the rank received the role's access key id" grep -q "rank key id: $TA_KEY" "$TMP/job.logs"
check "the rank read team-a/ok.txt with it" grep -q "team-a object: hello from team-a" "$TMP/job.logs"
check "... (HTTP 200)" grep -q "team-a HTTP 200" "$TMP/job.logs"
check "radosgw refused the rank team-b/secret.txt (403 AccessDenied)" \
  bash -c "grep -q 'team-b HTTP 403' '$TMP/job.logs' && grep -q 'team-b answer: .*AccessDenied' '$TMP/job.logs'"
check "... and listing team-b/ (403)" grep -q "team-b list HTTP 403" "$TMP/job.logs"
check "... and writing under team-b/ (403)" grep -q "team-b put HTTP 403" "$TMP/job.logs"
check "team-b's content appears nowhere in the logs" bash -c "! grep -q '$TEAM_B_CONTENT' '$TMP/job.logs'"
check "the agent copied the file channel from team-a/ds with the role's keys" \
  grep -q "channel files: dataset.json train_000000.bin" "$TMP/job.logs"
alice "$ANNEAL" metrics "$jid" --server "$URL" --json >"$TMP/job.metrics"
check "the agent's S3 requests are the job's s3_* metrics (channel download, output upload; none throttled)" \
  $PY -c 'import json,sys
p=json.load(open(sys.argv[1]))["points"]
last={x["name"]: x["value"] for x in p if x["name"].startswith("s3_")}
assert last.get("s3_requests", 0) >= 3 and last.get("s3_bytes_received", 0) > 0 and last.get("s3_bytes_sent", 0) > 0, last
assert last.get("s3_throttled", -1) == 0 and last.get("s3_failures", -1) == 0, last
print("  ", last)' "$TMP/job.metrics"
check "the rank's echo of the role's secret key is masked (***)" grep -q "rank secret: \*\*\*$" "$TMP/job.logs"
check "the role's secret key is in neither logs nor describe" bash -c "! grep -q '$TA_SECRET' '$TMP/job.logs' '$TMP/job.json'"
check "... nor in the server's store or log" bash -c "! grep -rqa '$TA_SECRET' '$TMP/srv' '$TMP/server.log'"
# Written by role-team-a, the object is role-team-a's, with its default private ACL: radosgw (like S3
# with ACLs) lets the bucket's owner list it but not read it; the role reads it back.
out=$(s3 "$TA" "$EP/$B/team-a/out/$jid/output/result.txt")
check "the agent uploaded the output under team-a/out/$jid/output/" test "$out" = "written by the rank of $jid"
[ "$out" = "written by the rank of $jid" ] || { echo "  got: ${out:0:300}"; echo "  under team-a/out/: $(s3 "$OWNER" "$EP/$B?list-type=2&prefix=team-a%2Fout%2F" \
  | grep -oE '<Key>[^<]*</Key>' | tr '\n' ' ')"; }
echo "  (the bucket's owner reading it: HTTP $(code "$OWNER" "$EP/$B/team-a/out/$jid/output/result.txt"))"
radosgw-admin -c "$RADOSGW_DIR/ceph.conf" object stat --bucket="$B" --object="team-a/out/$jid/output/result.txt" \
  >"$TMP/stat.json" 2>/dev/null
check "... as role-team-a (the object's owner; the server has no store keys)" \
  $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); o=d["policy"]["owner"]; assert o["id"] == "role-team-a", o' "$TMP/stat.json"
check "nothing was written under team-b/ by the job" \
  bash -c "! curl -s --aws-sigv4 'aws:amz:$REGION:s3' --user '$OWNER' -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
           '$EP/$B?list-type=2&prefix=team-b%2F' | grep -q from-rank"

# ---- 3. specs outside the role's prefixes: refused at submit ----
sed "s#uri: s3://$B/team-a/out#uri: s3://$B/team-b/out#" "$TMP/job/job.yaml" >"$TMP/job/outside.yaml"
expect_exit "an output under team-b/ is refused at submit (403, output.uri)" 2 "HTTP 403.*output.uri" \
  env ANNEAL_TOKEN_FILE="$TMP/alice.token" "$ANNEAL" submit "$TMP/job/outside.yaml" --server "$URL"
sed "s#uri: s3://$B/team-a/ds#uri: s3://$B/team-b/ds#" "$TMP/job/job.yaml" >"$TMP/job/outside2.yaml"
expect_exit "a channel under team-b/ is refused at submit (403, channels[0].uri)" 2 "HTTP 403.*channels\[0\].uri" \
  env ANNEAL_TOKEN_FILE="$TMP/alice.token" "$ANNEAL" submit "$TMP/job/outside2.yaml" --server "$URL"
sed "s#uri: s3://$B/team-a/out#uri: s3://$B/team-ab/out#" "$TMP/job/job.yaml" >"$TMP/job/outside3.yaml"
expect_exit "... and team-ab/ (a prefix by text only)" 2 "HTTP 403.*output.uri" \
  env ANNEAL_TOKEN_FILE="$TMP/alice.token" "$ANNEAL" submit "$TMP/job/outside3.yaml" --server "$URL"
finish
