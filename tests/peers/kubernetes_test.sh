#!/usr/bin/env bash
# peers.kubernetes: `anneal kubernetes render` against the official Kubernetes API schemas
# (kubernetes-models from npm, tests/peers/kubernetes_validate.mjs), offline — no API server can run
# here, so no backend that talks to one is claimed:
#   1. a CPU job and a GPU job (with an instance types file) render a Service and an Indexed Job that
#      validate; the YAML form reads back as the JSON form;
#   2. what the manifests say: instance_count pods, one agent each with the spec's type and slots, the
#      join token as a Secret volume (never in the environment), the requests from the types file;
#   3. a broken field (a count as text, a pod without containers) is caught by the validator, naming it;
#   4. bad input: no --server, an unknown instance-types key: exit 2 naming it.
source "$(dirname "$0")/../e2e/lib.sh"
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
[ -f tools/npm/node_modules/kubernetes-models/package.json ] || { bad "kubernetes-models is installed (scripts/setup.sh)"; finish; exit 1; }
validate() { node tests/peers/kubernetes_validate.mjs "$1"; }
cat >"$TMP/cpu.yaml" <<'YAML'
name: cpu-job
entrypoint: {command: [anneal, train, --config, cfg.yaml]}
resources: {instance_count: 3, procs_per_instance: 2}
YAML
cat >"$TMP/gpu.yaml" <<'YAML'
name: gpu-job
entrypoint: {command: [anneal, train, --config, cfg.yaml]}
resources: {instance_type: h100x8, instance_count: 4, procs_per_instance: 8}
YAML
printf 'h100x8: {cpu: "96", memory: 1500Gi, gpus: 8}\n' >"$TMP/types.yaml"
R=("$ANNEAL" kubernetes render --server http://anneal.ml.svc:8470 --image registry.example/anneal:0.1)
"${R[@]}" "$TMP/cpu.yaml" --format json -o "$TMP/cpu.json"
check "a CPU job renders" test -s "$TMP/cpu.json"
"${R[@]}" "$TMP/gpu.yaml" --instance-types "$TMP/types.yaml" --format json >"$TMP/gpu.json"
"${R[@]}" "$TMP/gpu.yaml" --instance-types "$TMP/types.yaml" >"$TMP/gpu.yaml.out"
for f in cpu gpu; do
  validate "$TMP/$f.json" >"$TMP/$f.valid" 2>&1
  check "the $f job's manifests validate against the Kubernetes schemas: $(tr '\n' ' ' <"$TMP/$f.valid")" \
    test "$(grep -c '^valid: ' "$TMP/$f.valid")" -eq 2
done
check "the YAML form reads back as the JSON form" \
  $PY -c 'import json,sys,yaml; a=list(yaml.safe_load_all(open(sys.argv[1]))); b=json.load(open(sys.argv[2])); assert a==b, (a, b)' "$TMP/gpu.yaml.out" "$TMP/gpu.json"
check "a headless Service and an Indexed Job of instance_count pods, one agent each with the type and slots" $PY - "$TMP/gpu.json" <<'PY'
import json, sys
svc, job = json.load(open(sys.argv[1]))
assert svc["kind"] == "Service" and svc["spec"]["clusterIP"] == "None", svc
s = job["spec"]
assert job["kind"] == "Job" and s["completionMode"] == "Indexed" and s["completions"] == s["parallelism"] == 4, s
assert s["backoffLimit"] == 0 and s["template"]["spec"]["subdomain"] == svc["metadata"]["name"], s
assert svc["spec"]["selector"].items() <= s["template"]["metadata"]["labels"].items()
c = s["template"]["spec"]["containers"][0]
args = dict(zip(c["args"][::2], c["args"][1::2]))
assert c["command"] == ["anneal", "agent"] and args["--instance-type"] == "h100x8" and args["--slots"] == "8", c
assert args["--server"] == "http://anneal.ml.svc:8470", args
PY
check "the join token is a Secret volume read as a file, never in the environment" $PY - "$TMP/gpu.json" <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))[1]
pod = job["spec"]["template"]["spec"]
c = pod["containers"][0]
vol = {v["name"]: v for v in pod["volumes"]}["join-token"]["secret"]
assert vol["secretName"] == "anneal-join-token" and vol["defaultMode"] == 0o400, vol
mount = {m["name"]: m for m in c["volumeMounts"]}["join-token"]
assert c["args"][c["args"].index("--join-token-file") + 1].startswith(mount["mountPath"] + "/"), (c["args"], mount)
assert not any("TOKEN" in e["name"] for e in c.get("env", [])) and "envFrom" not in c, c.get("env")
PY
check "the GPU type's requests and limits come from the instance types file; a CPU job asks one CPU per rank" $PY - "$TMP/gpu.json" "$TMP/cpu.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[1]["spec"]["template"]["spec"]["containers"][0]["resources"]
assert r == {"requests": {"cpu": "96", "memory": "1500Gi", "nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}, r
r = json.load(open(sys.argv[2]))[1]["spec"]["template"]["spec"]["containers"][0]["resources"]
assert r == {"requests": {"cpu": "2"}}, r
PY
# A broken field is caught, naming it.
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); d[1]["spec"]["completions"]="four"; json.dump(d, open(sys.argv[2], "w"))' "$TMP/gpu.json" "$TMP/broken1.json"
validate "$TMP/broken1.json" >"$TMP/broken1.out" 2>&1
check "a count written as text is caught: $(grep invalid "$TMP/broken1.out")" grep -q 'invalid: Job/anneal-gpu-job: .*spec/completions must be integer' "$TMP/broken1.out"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); del d[1]["spec"]["template"]["spec"]["containers"]; json.dump(d, open(sys.argv[2], "w"))' "$TMP/gpu.json" "$TMP/broken2.json"
validate "$TMP/broken2.json" >"$TMP/broken2.out" 2>&1
check "a pod without containers is caught: $(grep invalid "$TMP/broken2.out")" grep -q "must have required property 'containers'\|must have required property containers" "$TMP/broken2.out"
expect_exit "no --server: exit 2 naming it" 2 "server" "$ANNEAL" kubernetes render "$TMP/cpu.yaml"
printf 'h100x8: {cpus: 4}\n' >"$TMP/badtypes.yaml"
expect_exit "an unknown instance-types key: exit 2 naming it" 2 "unknown key h100x8.cpus" \
  "${R[@]}" "$TMP/gpu.yaml" --instance-types "$TMP/badtypes.yaml"
finish
