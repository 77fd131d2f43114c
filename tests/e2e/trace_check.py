"""Checks of step trace files (docs/formats/trace.md) for tests/e2e/profile_test.sh.

  trace_check.py valid FILE...         every event well-formed; on every (pid, tid) the X events nest
  trace_check.py processes FILE N      the merged file has N processes, one per rank, each named
  trace_check.py has FILE CAT [NAME]   some X event of category CAT (and name NAME) exists
  trace_check.py bytes FILE TRACK OP   an X event of name OP on a track named TRACK carries bytes > 0
  trace_check.py layers FILE N         each layer h.0..h.N-1 has forward and backward spans, on one rank
  trace_check.py ontrack FILE TRACK CAT  some X event of category CAT lies on a track named TRACK
  trace_check.py shares SUMMARY FILE...  each category's share of the step time, computed here from the
                                       ranks' trace files by a sweep over time (the innermost open span
                                       owns each instant), equals `anneal profile`'s table (SUMMARY's
                                       "  compute  41.2 %" lines, the mean over ranks) within 0.5 points
Exit 1 with the reason on the first violation.
"""
import json
import sys


def events(path):
    doc = json.load(open(path))
    assert isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list), f"{path}: no traceEvents array"
    return doc["traceEvents"]


def valid(path):
    by_track = {}
    for e in events(path):
        assert isinstance(e, dict), f"{path}: an event that is no object: {e!r}"
        ph = e.get("ph")
        assert ph in ("X", "C", "M"), f"{path}: unexpected ph {ph!r}"
        assert isinstance(e.get("name"), str) and e["name"], f"{path}: event without a name: {e}"
        assert isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int), f"{path}: pid/tid not integers: {e}"
        assert isinstance(e.get("args", {}), dict), f"{path}: args not an object: {e}"
        if ph == "M":
            continue
        assert isinstance(e.get("ts"), (int, float)), f"{path}: ts missing: {e}"
        if ph == "X":
            assert isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, f"{path}: bad dur: {e}"
            by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    for track, xs in by_track.items():
        xs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in xs:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - 1.0:
                stack.pop()
            if stack:
                p = stack[-1]
                end, pend = e["ts"] + e["dur"], p["ts"] + p["dur"]
                assert end <= pend + 1.0, f"{path}: on track {track} '{e['name']}' overlaps '{p['name']}' without nesting"
            stack.append(e)
    return f"{sum(len(x) for x in by_track.values())} spans on {len(by_track)} tracks nest"


def processes(path, n):
    names = {e["pid"]: e["args"]["name"] for e in events(path) if e["ph"] == "M" and e["name"] == "process_name"}
    pids = {e["pid"] for e in events(path)}
    assert len(names) == int(n) and pids == set(names), f"{path}: processes {sorted(pids)} named {names}, want {n}"
    assert all(names[p] == f"rank {p}" for p in names), names
    return f"{n} processes: " + ", ".join(names[p] for p in sorted(names))


def has(path, cat, name=None):
    xs = [e for e in events(path) if e["ph"] == "X" and e.get("cat") == cat and (name is None or e["name"] == name)]
    assert xs, f"{path}: no span of category {cat}" + (f" named {name}" if name else "")
    return f"{len(xs)} {cat} span(s)" + (f" named {name}" if name else "")


def bytes_on(path, track, op):
    evs = events(path)
    tids = {(e["pid"], e["tid"]) for e in evs if e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"] == track}
    xs = [e for e in evs if e["ph"] == "X" and (e["pid"], e["tid"]) in tids and e["name"] == op]
    assert xs and all(e["args"].get("bytes", 0) > 0 for e in xs), f"{path}: no '{op}' with bytes on track '{track}' ({len(xs)} found)"
    return f"{len(xs)} '{op}' on '{track}', {int(xs[0]['args']['bytes'])} bytes each"


def on_track(path, track, cat):
    evs = events(path)
    tids = {(e["pid"], e["tid"]) for e in evs if e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"] == track}
    xs = [e for e in evs if e["ph"] == "X" and (e["pid"], e["tid"]) in tids and e.get("cat") == cat]
    assert xs, f"{path}: no {cat} span on a track named '{track}'"
    return f"{len(xs)} {cat} span(s) on '{track}', the first {xs[0]['dur']:.1f} us"


def layers(path, n):
    seen = {}
    for e in events(path):
        if e["ph"] == "X" and e.get("cat") in ("forward", "backward") and e["name"].startswith("h."):
            seen.setdefault(e["name"], {}).setdefault(e["cat"], set()).add(e["pid"])
    for i in range(int(n)):
        s = seen.get(f"h.{i}", {})
        assert set(s) == {"forward", "backward"} and len(s["forward"] | s["backward"]) == 1, f"layer h.{i}: {s}"
    return f"{n} layers, forward and backward each on one rank"


# docs/formats/trace.md: the span categories that count to each line of the summary; the rest is "other".
CATEGORY = {"forward": "compute", "backward": "compute", "optimizer": "compute", "comm": "communication",
            "pipeline": "pipeline idle", "data": "data", "checkpoint": "checkpoint"}


def rank_shares(path):
    """Seconds per category inside the step spans of the track that has them, by sweeping instants."""
    xs = [e for e in events(path) if e["ph"] == "X"]
    tid = next(e["tid"] for e in xs if e.get("cat") == "step")
    xs = [e for e in xs if e["tid"] == tid and e["dur"] > 0]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in xs if e.get("cat") == "step"]
    cuts = sorted({t for e in xs for t in (e["ts"], e["ts"] + e["dur"])})
    per = {}
    for a, b in zip(cuts, cuts[1:]):
        mid = (a + b) / 2
        if not any(s <= mid < t for s, t in steps):
            continue
        open_ = [e for e in xs if e["ts"] <= mid < e["ts"] + e["dur"]]
        inner = max(open_, key=lambda e: (e["ts"], -e["dur"]))  # nested: the latest start is the innermost
        c = CATEGORY.get(inner.get("cat"), "other")
        per[c] = per.get(c, 0.0) + (b - a)
    total = sum(t - s for s, t in steps)
    return {c: v / total for c, v in per.items()}


def shares(summary, *paths):
    table = {}
    for line in open(summary):
        for c in ("compute", "communication", "pipeline idle", "data", "checkpoint", "other"):
            if line.startswith(f"  {c} ") and line.split()[-1].startswith("("):
                table[c] = float(line[len(c) + 2:].split("%")[0])
    assert len(table) == 6, f"{summary}: the six category lines not found ({table})"
    ranks = [rank_shares(p) for p in paths]
    mine = {c: 100 * sum(r.get(c, 0.0) for r in ranks) / len(ranks) for c in table}
    off = {c: (table[c], round(mine[c], 2)) for c in table if abs(table[c] - mine[c]) > 0.5}
    assert not off, f"categories where `anneal profile` (first) and the trace's own sweep (second) differ: {off}"
    return "; ".join(f"{c} {table[c]} % (sweep {mine[c]:.2f})" for c in table)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    try:
        if cmd == "valid":
            print("; ".join(valid(p) for p in args))
        else:
            print({"processes": processes, "has": has, "bytes": bytes_on, "layers": layers, "ontrack": on_track,
                   "shares": shares}[cmd](*args))
    except AssertionError as e:
        print(f"trace_check: {e}")
        sys.exit(1)
