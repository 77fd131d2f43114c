#!/usr/bin/python3
"""Golden data for anneal's GPT-2 parity test, written by PyTorch (the oracle).

    /usr/bin/python3 tests/peers/torch_gpt2_golden.py --out FILE.safetensors \
        [--V 250 --maxT 32 --C 64 --H 4 --L 2 --B 4 --T 16 --seed 1234 --steps 10]

Writes one safetensors file (written by hand: u64 LE header length, JSON header, data buffer
starting 8-byte aligned; see docs/formats/ for the grammar) holding:

  __metadata__            the config (V maxT C H L B T seed steps lr beta1 beta2 eps weight_decay
                          max_norm clip_eps) as strings, plus torch_version
  input.tokens   I32 (B, T)   random ids in [0, V)
  input.targets  I32 (B, T)   random ids in [0, V)
  param.<name>   F32          initial weights, every canonical name (below)
  for P in f32 (stored F32) and f64 (stored F64), both started from the SAME fp32 initial weights:
    P.logits       (B, T, V)  at the initial weights
    P.loss         [1]        mean cross-entropy over all B*T positions
    P.grad.<name>             d loss / d param at the initial weights, before clipping
    P.losses       [steps]    loss at each step, before that step's update (P.losses[0] == P.loss)
    P.grad_norms   [steps]    global L2 norm of all gradients at each step, before clipping
    P.final.<name>            parameters after `steps` AdamW steps on the same batch

Model (GPT-2, tied embeddings, no dropout), per block l, x: (B, T, C):
  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x));  then ln_f, logits = x @ wte^T.
  LayerNorm eps 1e-5. attn: separate q, k, v Linear(C, C); H heads of hs = C/H; causal softmax of
  q k^T / sqrt(hs); heads concatenated; proj Linear(C, C). mlp: fc Linear(C, 4C), GELU (tanh
  approximation), proj Linear(4C, C). Linear weights are torch's (out, in).

Optimizer, each step: loss.backward(); norm = clip_grad_norm_(all params, max_norm) (torch 1.13:
  norm = ||(||g_i||_2)_i||_2, and when norm > max_norm every grad is scaled by
  max_norm / (norm + 1e-6), the clip_eps in the metadata); then torch.optim.AdamW (lr constant,
  betas, eps; weight decay only on params with dim >= 2): p *= 1 - lr*wd; m = b1 m + (1-b1) g;
  v = b2 v + (1-b2) g^2; p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).

Initialization (torch.manual_seed(seed), params drawn in canonical order, then tokens, targets):
  weights and embeddings N(0, 0.02); attn.proj.weight and mlp.proj.weight N(0, 0.02/sqrt(2L));
  Linear biases N(0, 0.02); LayerNorm weight 1 + 0.1 N(0,1), LayerNorm bias 0.1 N(0,1).

Note for comparisons: d loss / d attn.k.bias is exactly zero in exact arithmetic (a key bias adds
the same q.b_k to every score of a query row, which softmax cancels), so P.grad.*.attn.k.bias is
rounding noise (~1e-20 in f64, ~1e-11 in f32) and Adam turns that noise into tiny updates
(|f32.final - f64.final| ~ 3e-6 there): compare those tensors with an absolute tolerance, not a
relative one.

Deterministic: one torch thread. Runs in a few seconds at the default sizes.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def canonical_shapes(V, maxT, C, L):
    """[(name, shape)] in canonical order."""
    out = [("wte.weight", (V, C)), ("wpe.weight", (maxT, C))]
    for l in range(L):
        p = "h.%d." % l
        out += [(p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,))]
        for n in ("q", "k", "v", "proj"):
            out += [(p + "attn.%s.weight" % n, (C, C)), (p + "attn.%s.bias" % n, (C,))]
        out += [(p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,))]
        out += [(p + "mlp.fc.weight", (4 * C, C)), (p + "mlp.fc.bias", (4 * C,))]
        out += [(p + "mlp.proj.weight", (C, 4 * C)), (p + "mlp.proj.bias", (C,))]
    out += [("ln_f.weight", (C,)), ("ln_f.bias", (C,))]
    return out


def init_params(V, maxT, C, L):
    """fp32 initial weights, drawn from torch's global (already seeded) generator."""
    params = {}
    proj_std = 0.02 / math.sqrt(2 * L)
    for name, shape in canonical_shapes(V, maxT, C, L):
        if ".ln_" in name or name.startswith("ln_"):
            if name.endswith(".weight"):
                t = 1.0 + 0.1 * torch.randn(shape, dtype=torch.float32)
            else:
                t = 0.1 * torch.randn(shape, dtype=torch.float32)
        elif name.endswith("proj.weight"):
            t = torch.randn(shape, dtype=torch.float32) * proj_std
        else:  # embeddings, q/k/v/fc weights, and every Linear bias
            t = torch.randn(shape, dtype=torch.float32) * 0.02
        params[name] = t.contiguous()
    return params


def forward(params, tokens, targets, H, L):
    """tokens, targets: (B, T) int64. Returns logits (B, T, V) and the mean loss."""
    B, T = tokens.shape
    wte = params["wte.weight"]  # (V, C)
    V, C = wte.shape
    hs = C // H
    x = wte[tokens] + params["wpe.weight"][:T]  # (B, T, C)
    mask = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T), True where t' <= t
    for l in range(L):
        p = "h.%d." % l
        g = lambda n: params[p + n]
        a = F.layer_norm(x, (C,), g("ln_1.weight"), g("ln_1.bias"), 1e-5)
        q = F.linear(a, g("attn.q.weight"), g("attn.q.bias")).view(B, T, H, hs).transpose(1, 2)
        k = F.linear(a, g("attn.k.weight"), g("attn.k.bias")).view(B, T, H, hs).transpose(1, 2)
        v = F.linear(a, g("attn.v.weight"), g("attn.v.bias")).view(B, T, H, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, H, T, T)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        x = x + F.linear(y, g("attn.proj.weight"), g("attn.proj.bias"))
        m = F.layer_norm(x, (C,), g("ln_2.weight"), g("ln_2.bias"), 1e-5)
        m = F.gelu(F.linear(m, g("mlp.fc.weight"), g("mlp.fc.bias")), approximate="tanh")
        x = x + F.linear(m, g("mlp.proj.weight"), g("mlp.proj.bias"))
    x = F.layer_norm(x, (C,), params["ln_f.weight"], params["ln_f.bias"], 1e-5)
    logits = x @ wte.t()  # (B, T, V), tied
    loss = F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T))
    return logits, loss


def run_precision(init, dtype, tokens, targets, a, names):
    """Initial logits/loss/grads, then `a.steps` clipped AdamW steps. Returns {key: tensor}."""
    params = {n: init[n].detach().to(dtype).clone().requires_grad_(True) for n in names}
    out = {}
    logits, loss = forward(params, tokens, targets, a.H, a.L)
    loss.backward()
    out["logits"] = logits.detach().clone()
    out["loss"] = loss.detach().reshape(1).clone()
    for n in names:
        out["grad." + n] = params[n].grad.detach().clone()
        params[n].grad = None

    plist = [params[n] for n in names]
    decay = [p for p in plist if p.dim() >= 2]
    no_decay = [p for p in plist if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": a.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)
    losses, norms = [], []
    for _ in range(a.steps):
        opt.zero_grad(set_to_none=True)
        _, loss = forward(params, tokens, targets, a.H, a.L)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(plist, a.max_norm)
        opt.step()
        losses.append(loss.detach().item())
        norms.append(float(norm))
    out["losses"] = torch.tensor(losses, dtype=dtype)
    out["grad_norms"] = torch.tensor(norms, dtype=dtype)
    for n in names:
        out["final." + n] = params[n].detach().clone()
    return out


_DTYPES = {torch.float32: ("F32", "<f4"), torch.float64: ("F64", "<f8"),
           torch.int32: ("I32", "<i4")}


def write_safetensors(path, tensors, metadata):
    """tensors: ordered {name: torch tensor (f32/f64/i32)}; metadata: {str: str}."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        st_dtype, np_dtype = _DTYPES[t.dtype]
        b = np.ascontiguousarray(t.detach().cpu().numpy()).astype(np_dtype, copy=False).tobytes()
        header[name] = {"dtype": st_dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((-(8 + len(h))) % 8)  # data starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--V", type=int, default=250)
    ap.add_argument("--maxT", type=int, default=32)
    ap.add_argument("--C", type=int, default=64)
    ap.add_argument("--H", type=int, default=4)
    ap.add_argument("--L", type=int, default=2)
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--T", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight_decay", type=float, default=0.1)
    ap.add_argument("--max_norm", type=float, default=1.0)
    a = ap.parse_args()
    if a.C % a.H != 0 or a.T > a.maxT or min(a.V, a.maxT, a.C, a.H, a.L, a.B, a.T) <= 0:
        print("bad config: need C %% H == 0, 0 < T <= maxT and positive sizes", file=sys.stderr)
        return 2

    t0 = time.perf_counter()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    init = init_params(a.V, a.maxT, a.C, a.L)
    names = [n for n, _ in canonical_shapes(a.V, a.maxT, a.C, a.L)]
    tokens = torch.randint(0, a.V, (a.B, a.T), dtype=torch.int64)
    targets = torch.randint(0, a.V, (a.B, a.T), dtype=torch.int64)

    tensors = {"input.tokens": tokens.to(torch.int32), "input.targets": targets.to(torch.int32)}
    for n in names:
        tensors["param." + n] = init[n]
    results = {}
    for prec, dtype in (("f32", torch.float32), ("f64", torch.float64)):
        results[prec] = run_precision(init, dtype, tokens, targets, a, names)
        for k, v in results[prec].items():
            tensors[prec + "." + k] = v.to(dtype).contiguous()

    meta = {k: str(getattr(a, k)) for k in ("V", "maxT", "C", "H", "L", "B", "T", "seed", "steps",
                                             "lr", "beta1", "beta2", "eps", "weight_decay",
                                             "max_norm")}
    meta["clip_eps"] = "1e-06"
    meta["torch_version"] = torch.__version__
    write_safetensors(a.out, tensors, meta)

    l32 = results["f32"]["losses"].double()
    l64 = results["f64"]["losses"]
    dmax = (l32 - l64).abs().max().item()
    print("wrote %s: %d tensors, loss %.6f -> %.6f over %d steps, f32 vs f64 max loss diff %.3e "
          "(rel %.3e), %.2f s" % (a.out, len(tensors), l64[0].item(), l64[-1].item(), a.steps,
                                  dmax, dmax / l64.abs().max().item(), time.perf_counter() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
