#!/usr/bin/python3
"""PyTorch's half of bench train_cpu_vs_torch: GPT-2 (or Llama) training steps per second on the CPU.

    OMP_NUM_THREADS=N OPENBLAS_NUM_THREADS=N PYTHON bench/train_cpu_vs_torch_torch.py \
        --threads N [--steps 20 --warmup 3 --V 50257 --maxT 1024 --C 256 --H 4 --L 4 --B 8 --T 256]
        [--compile] [--keep-memory]

PYTHON is Debian's /usr/bin/python3 (torch 1.13, GEMMs in OpenBLAS) or tools/venv/bin/python
(torch 2 from PyPI, GEMMs in oneDNN/MKL). With torch 2 AdamW runs fused (fused=True, its fastest
CPU implementation); torch 1.13 has no fused or CPU-worthwhile foreach path and runs the plain loop.
--compile (torch 2 only) runs the model's forward and backward through torch.compile (inductor,
default mode, C++/OpenMP kernels on the CPU); the warmup steps include the compilation, whose time is
printed as compile_s.

The model is the one anneal trains (tests/peers/torch_gpt2_golden.py has the same definition):
tied wte/wpe embeddings, L pre-LayerNorm blocks with separate q/k/v Linear layers, manual causal
softmax attention, GELU (tanh) MLP, ln_f, logits = x @ wte^T; fp32; mean cross-entropy. A step is
forward, backward, clip_grad_norm_(1.0), AdamW (lr 3e-4, betas (0.9, 0.95), eps 1e-8, weight decay
0.1 on 2-D params only, fused/foreach off), zero_grad. Every step uses the same seeded random batch.

Debian's torch runs its GEMMs in OpenBLAS, whose thread count comes from OPENBLAS_NUM_THREADS, so
the caller must export OMP_NUM_THREADS and OPENBLAS_NUM_THREADS equal to --threads (a warning is
printed otherwise).

--keep-memory re-executes this script with glibc told never to return memory to the kernel
(MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_ huge), so torch's large per-step buffers (the (B*T, V)
logits and their gradient, ~400 MB each at the default sizes) are reused instead of being unmapped
and page-faulted in again every step. On this project's VMs faulting in fresh memory is slow (the
host takes freed pages back), and it dominates torch's step time: measured here at 1 thread,
~200 tokens/s by default against ~710 with --keep-memory. Default torch behaviour is what users get;
--keep-memory is the stronger peer. The RESULT line says which one ran (malloc=default|keep).

--family llama (torch 2, tools/venv): the model is transformers' own LlamaForCausalLM built from a
LlamaConfig of the same shape (--KV key/value heads, --F the SwiGLU width, tied embeddings, rope
theta 10000, RMSNorm eps 1e-5, no biases) with attn_implementation="sdpa" (torch's fused scaled
dot-product attention: transformers' fastest CPU path), its default initialization; the loss is
cross-entropy of its logits against the targets, as for GPT-2.

--fsdp (torch 2, started by torchrun: bench/zero3_vs_fsdp.sh): data parallelism over gloo with
PyTorch's own sharding, FSDP2's fully_shard on every block and then on the root (wte, wpe, ln_f: the
tied head in the root), reshard_after_forward=True — ZeRO-3's peer: parameters gathered per block
before its forward and again before its backward, gradients reduce-scattered, AdamW on the shard.
Every rank builds the same initial model (one seed) and draws its own batch (seed + rank); rank 0
prints the RESULT lines.

Prints:
  RESULT side=torch params=<count>
  RESULT side=torch threads=N tokens_per_s=... step_ms=... peak_rss_mb=... malloc=default|keep
         torch=VERSION mode=eager|compiled adamw=loop|fused compile_s=...
tokens_per_s = B*T / mean step time over the timed steps (after `warmup` untimed steps).
"""
import argparse
import math
import os
import resource
import sys
import time

KEEP_MEMORY_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "1000000000000", "MALLOC_TOP_PAD_": "0"}


def reexec_keeping_memory():
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, **KEEP_MEMORY_ENV))


# --keep-memory re-executes before torch is imported (importing it takes ~1 s); main() does it for
# an abbreviated flag.
if __name__ == "__main__" and "--keep-memory" in sys.argv[1:] and os.environ.get("MALLOC_MMAP_MAX_") != "0":
    reexec_keeping_memory()

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = nn.Module()
        self.attn.q = nn.Linear(C, C)
        self.attn.k = nn.Linear(C, C)
        self.attn.v = nn.Linear(C, C)
        self.attn.proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.mlp = nn.Module()
        self.mlp.fc = nn.Linear(C, 4 * C)
        self.mlp.proj = nn.Linear(4 * C, C)

    def forward(self, x, mask):  # x: (B, T, C); mask: (T, T) bool, True where allowed
        B, T, C = x.shape
        H, hs = self.H, C // self.H
        a = self.ln_1(x)
        q = self.attn.q(a).view(B, T, H, hs).transpose(1, 2)  # (B, H, T, hs)
        k = self.attn.k(a).view(B, T, H, hs).transpose(1, 2)
        v = self.attn.v(a).view(B, T, H, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, H, T, T)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attn.proj(y)
        m = F.gelu(self.mlp.fc(self.ln_2(x)), approximate="tanh")  # (B, T, 4C)
        return x + self.mlp.proj(m)


class GPT(nn.Module):
    def __init__(self, V, maxT, C, H, L):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(maxT, C)
        self.h = nn.ModuleList([Block(C, H) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        proj_std = 0.02 / math.sqrt(2 * L)
        for name, p in self.named_parameters():  # GPT-2 style
            if name.endswith("proj.weight"):
                nn.init.normal_(p, 0.0, proj_std)
            elif p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif ".ln_" in name or name.startswith("ln_"):
                nn.init.ones_(p) if name.endswith("weight") else nn.init.zeros_(p)
            else:
                nn.init.zeros_(p)

    def forward(self, tokens, targets):  # tokens, targets: (B, T) int64
        B, T = tokens.shape
        x = self.wte(tokens) + self.wpe.weight[:T]  # (B, T, C)
        mask = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()
        for blk in self.h:
            x = blk(x, mask)
        logits = self.ln_f(x) @ self.wte.weight.t()  # (B, T, V), tied
        return F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))


class LlamaLoss(nn.Module):
    """transformers' LlamaForCausalLM and the mean cross-entropy of its logits against the targets."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens, targets):
        logits = self.model(input_ids=tokens).logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def llama(a):
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=a.V, hidden_size=a.C, intermediate_size=a.F or 4 * a.C, num_hidden_layers=a.L,
                      num_attention_heads=a.H, num_key_value_heads=a.KV or a.H, head_dim=a.C // a.H,
                      max_position_embeddings=a.maxT, rms_norm_eps=1e-5,
                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                      tie_word_embeddings=True, attention_bias=False, mlp_bias=False, attention_dropout=0.0,
                      attn_implementation="sdpa", use_cache=False)
    m = LlamaForCausalLM(cfg)
    m.train()
    return LlamaLoss(m), "transformers=" + transformers.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--V", type=int, default=50257)
    ap.add_argument("--maxT", type=int, default=1024)
    ap.add_argument("--C", type=int, default=256)
    ap.add_argument("--H", type=int, default=4)
    ap.add_argument("--L", type=int, default=4)
    ap.add_argument("--B", type=int, default=8)
    ap.add_argument("--T", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--family", default="gpt2", choices=["gpt2", "llama"])
    ap.add_argument("--KV", type=int, default=0, help="llama: key/value heads (0 = H)")
    ap.add_argument("--F", type=int, default=0, help="llama: the SwiGLU width (0 = 4C)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (torch 2)")
    ap.add_argument("--fsdp", action="store_true", help="torch 2 under torchrun: fully_shard over gloo")
    ap.add_argument("--keep-memory", action="store_true",
                    help="re-exec with glibc malloc never returning memory to the kernel")
    a = ap.parse_args()
    if a.keep_memory and os.environ.get("MALLOC_MMAP_MAX_") != "0":
        reexec_keeping_memory()
    if a.C % a.H != 0 or a.T > a.maxT or a.steps <= 0 or a.threads <= 0 or a.warmup < 1:
        print("bad config: need C %% H == 0, T <= maxT, steps > 0, threads > 0, warmup >= 1", file=sys.stderr)
        return 2
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        if os.environ.get(var) != str(a.threads):
            print("warning: %s=%s, expected %d (export it before starting python)"
                  % (var, os.environ.get(var), a.threads), file=sys.stderr)

    torch2 = int(torch.__version__.split(".")[0]) >= 2
    if a.compile and not torch2:
        print("--compile needs torch 2 (this is %s)" % torch.__version__, file=sys.stderr)
        return 2
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    version = "transformers=-"
    if a.family == "llama":
        model, version = llama(a)
    else:
        model = GPT(a.V, a.maxT, a.C, a.H, a.L)
    nparams = sum(p.numel() for p in model.parameters())
    rank = 0
    if a.fsdp:
        if not torch2:
            print("--fsdp needs torch 2 (this is %s)" % torch.__version__, file=sys.stderr)
            return 2
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        blocks = model.model.model.layers if a.family == "llama" else model.h
        for blk in blocks:
            fully_shard(blk, reshard_after_forward=True)
        fully_shard(model, reshard_after_forward=True)
        version += " fsdp=fully_shard world=%d" % dist.get_world_size()
        torch.manual_seed(a.seed + rank)  # each rank its own batch
    run = torch.compile(model) if a.compile else model
    if rank == 0:
        print("RESULT side=torch params=%d" % nparams, flush=True)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt_kwargs = dict(lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    impl = dict(fused=True) if torch2 else dict(foreach=False)  # torch 1.13 has no CPU fused AdamW
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], **impl, **opt_kwargs)
    tokens = torch.randint(0, a.V, (a.B, a.T), dtype=torch.int64)
    targets = torch.randint(0, a.V, (a.B, a.T), dtype=torch.int64)

    def step():
        loss = run(tokens, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    t_warm = time.perf_counter()
    step()  # the first step compiles (--compile)
    compile_s = time.perf_counter() - t_warm if a.compile else 0.0
    for _ in range(a.warmup - 1):
        step()
    times = []
    loss = float("nan")
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
    mean_s = sum(times) / len(times)
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    if rank != 0:
        return 0
    st = sorted(times)
    print("torch %s: %d timed steps of %d tokens, step ms min %.1f median %.1f max %.1f, "
          "last loss %.4f" % (torch.__version__, a.steps, a.B * a.T, st[0] * 1000.0,
                              st[len(st) // 2] * 1000.0, st[-1] * 1000.0, loss))
    print("RESULT side=torch threads=%d tokens_per_s=%.1f step_ms=%.1f peak_rss_mb=%.0f malloc=%s "
          "torch=%s mode=%s adamw=%s compile_s=%.1f %s"
          % (a.threads, a.B * a.T / mean_s, mean_s * 1000.0, peak_rss_mb,
             "keep" if a.keep_memory else "default", torch.__version__.split("+")[0],
             "compiled" if a.compile else "eager", "fused" if torch2 else "loop", compile_s, version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
