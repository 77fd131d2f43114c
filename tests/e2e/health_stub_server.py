#!/usr/bin/python3
"""The server's half of the pre-start health-check protocol (docs/health-checks.md), as little as
`anneal agent` needs to run it, for tests/e2e/healthcheck_test.sh: agents register as the ids in the
scenario; a heartbeat without a result for that instance is answered with its "health" request
(unless the heartbeat already reports that request in progress); once its result is posted, "exit".
The rendezvous endpoint (/v1/jobs/<job>/rendezvous/<attempt>/<round>) keeps the first value PUT
under a key. Every heartbeat's "health" field and
every posted result is appended to OUT_DIR/heartbeats.jsonl and OUT_DIR/results.jsonl.

usage: health_stub_server.py SCENARIO.json OUT_DIR   (prints the port it listens on, then serves)
SCENARIO.json: {"<instance id>": <the heartbeat's "health" object for it>, ...,
                "stop_after_s": {"<instance id>": seconds}}   (optional: "stop" that long after
                the first "health" answer to the instance, then "exit"),
                "rendezvous": {"<job>/<attempt>/<round>": value}}   (optional: values already published)
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

scenario = json.load(open(sys.argv[1]))
stop_after = scenario.pop("stop_after_s", {})
asked_at = {}      # instance -> when it was first sent its request
out_dir = sys.argv[2]
lock = threading.Lock()
results = {}       # instance -> posted body
rendezvous = {tuple(k.split("/", 1)): v for k, v in scenario.pop("rendezvous", {}).items()}  # (job, "a/r") -> value
next_id = [0]


def append(name, obj):
    with lock, open(f"{out_dir}/{name}", "a") as f:
        f.write(json.dumps(obj) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length", "0"))
        return json.loads(self.rfile.read(n) or b"{}")

    def do_POST(self):
        parts = self.path.strip("/").split("/")
        b = self.body()
        if parts == ["v1", "agents"]:
            iid = b.get("id") or sorted(scenario)[next_id[0]]
            next_id[0] += 1
            return self.reply(200, {"id": iid})
        if len(parts) == 4 and parts[:2] == ["v1", "agents"] and parts[3] == "heartbeat":
            iid = parts[2]
            append("heartbeats.jsonl", {"instance": iid, "health": b.get("health")})
            with lock:
                done = iid in results
            if done or iid not in scenario:
                return self.reply(200, {"action": "exit"})
            req = scenario[iid]
            if iid in stop_after and iid in asked_at:
                stopped = time.monotonic() - asked_at[iid] > stop_after[iid]
                if stopped and b.get("health"):
                    return self.reply(200, {"action": "stop", "next_s": 0.2})
                if stopped:
                    return self.reply(200, {"action": "exit"})
            asked_at.setdefault(iid, time.monotonic())
            running = b.get("health")
            if running and [running.get(k) for k in ("job", "attempt", "round")] == [req[k] for k in ("job", "attempt", "round")]:
                return self.reply(200, {"action": "none", "next_s": 0.2})
            return self.reply(200, {"action": "health", "health": req, "next_s": 0.2})
        if len(parts) == 4 and parts[:2] == ["v1", "jobs"] and parts[3] == "health":
            b["job"] = parts[2]
            with lock:
                results[b["instance"]] = b
            append("results.jsonl", b)
            return self.reply(200, {"ok": True})
        self.reply(404, {"error": "no route " + self.path})

    def do_PUT(self):
        parts = self.path.strip("/").split("/")
        if len(parts) == 6 and parts[3] == "rendezvous":
            b = self.body()
            with lock:
                v = rendezvous.setdefault((parts[2], parts[4] + "/" + parts[5]), b)
            return self.reply(200, v)
        self.reply(404, {"error": "no route " + self.path})

    def do_GET(self):
        parts = self.path.strip("/").split("/")
        if len(parts) == 6 and parts[3] == "rendezvous":
            with lock:
                v = rendezvous.get((parts[2], parts[4] + "/" + parts[5]))
            return self.reply(200, v) if v is not None else self.reply(404, {"error": "not yet"})
        self.reply(404, {"error": "no route " + self.path})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
