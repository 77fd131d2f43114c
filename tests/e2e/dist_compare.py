#!/usr/bin/python3
"""Compares distributed training against one process (tests/e2e/dist_*_test.sh).

  dist_compare.py losses REF.log RUN.log N RTOL     the first N step losses (hex floats in the log)
  dist_compare.py params REF_CKPT RUN_CKPT          every parameter tensor: max |a-b| <= 1e-5*|a| + 1e-7*sqrt(n)
                                                    and |a-b| <= 1e-5*|a| + 1e-7*sqrt(n) over the whole
                                                    tensor (|.|: L2 norm; the floor: float noise of a
                                                    tensor that stays near 0, as attn.k.bias does)

Reads the checkpoints' manifests and safetensors files itself (numpy only), so it checks what
anneal wrote, not what anneal reads back. Prints the worst deviation; exit 1 on a mismatch.
"""
import json, math, re, struct, sys
import numpy as np


def losses(path):
    out = []
    for line in open(path):
        m = re.search(r"step\s+(\d+)/\d+ \| loss \S+ \((\S+)\)", line)
        if m:
            out.append(float.fromhex(m.group(2)))
    return out


def read_params(ckpt):
    man = json.load(open(f"{ckpt}/manifest.json"))
    files = {}
    params = {}
    for name, t in man["tensors"].items():
        if not name.startswith("param."):
            continue
        shape = t["shape"]
        full = np.zeros(shape, dtype=np.float32)
        covered = np.zeros(shape, dtype=np.int32)
        for part in t["parts"]:
            f = part["file"]
            if f not in files:
                raw = open(f"{ckpt}/{f}", "rb").read()
                n = struct.unpack("<Q", raw[:8])[0]
                files[f] = (json.loads(raw[8:8 + n]), raw[8 + n:])
            header, data = files[f]
            e = header[name]
            a, b = e["data_offsets"]
            vals = np.frombuffer(data[a:b], dtype=np.float32)
            # A box of the tensor (a slice per dimension), whole — or, ZeRO-3, a range of the box's
            # elements in row-major order.
            box = part.get("box", {"offset": [0] * len(shape), "length": shape})
            idx = tuple(slice(o, o + n) for o, n in zip(box["offset"], box["length"]))
            if "range" in part:
                start, count = part["range"]
                assert vals.size == count, (name, part)
                region, seen = full[idx].reshape(-1), covered[idx].reshape(-1)
                region[start:start + count] = vals
                seen[start:start + count] += 1
                full[idx] = region.reshape(box["length"])
                covered[idx] = seen.reshape(box["length"])
                continue
            assert vals.size == int(np.prod(box["length"])), (name, part)
            full[idx] = vals.reshape(box["length"])
            covered[idx] += 1
        assert (covered == 1).all(), f"{ckpt}: the parts of {name} do not cover it exactly once"
        params[name] = full.reshape(-1)
    return params


def main():
    mode = sys.argv[1]
    if mode == "losses":
        ref, run, n, rtol = losses(sys.argv[2]), losses(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
        if len(ref) < n or len(run) < n:
            print(f"too few losses: reference {len(ref)}, run {len(run)}, need {n}")
            return 1
        worst = max(abs(a - b) / abs(a) for a, b in zip(ref[:n], run[:n]))
        print(f"worst relative loss deviation over {n} steps: {worst:.3e} (tolerance {rtol:g})")
        return 0 if worst <= rtol else 1
    if mode == "params":
        ref, run = read_params(sys.argv[2]), read_params(sys.argv[3])
        worst, worst_name, worst_rel, rel_name, ok = 0.0, "", 0.0, "", True
        for name, a in ref.items():
            b = run[name]
            dev = float(np.max(np.abs(a - b)))
            norm = float(np.linalg.norm(a))
            tol = 1e-5 * norm + 1e-7 * math.sqrt(a.size)
            # The largest element alone allows ~1 % per element of a large tensor: the whole tensor too
            # (rel: its L2 difference as a fraction of its own bound, which must stay <= 1).
            rel = float(np.linalg.norm(a - b)) / tol
            if dev / tol > worst:
                worst, worst_name = dev / tol, name
            if rel > worst_rel:
                worst_rel, rel_name = rel, name
            if dev > tol or rel > 1:
                ok = False
                print(f"{name}: max |a-b| {dev:.3e}, |a-b| {rel * tol:.3e} (tolerance {tol:.3e} for both)")
        print(f"parameters: worst element {worst:.3f} of the tolerance ({worst_name}); worst tensor |a-b| "
              f"{worst_rel:.3f} of it ({rel_name})")
        return 0 if ok else 1
    return 2


sys.exit(main())
