#!/usr/bin/env python3
"""The PyTorch side of bench/gpu/device_check.sh's bench stage: GPT-2 124M (tied embeddings, the same
shapes as anneal's preset gpt2: V=50257 padded to 50304, T=1024, 12 layers, 12 heads, C=768) trained
with torch.compile, scaled_dot_product_attention(is_causal=True), bf16 autocast and fused AdamW on
random token batches of B x T. Prints one RESULT line: tokens/s over the timed steps (CUDA events),
and torch's own peak allocation (the script's caller also polls NVML for the process's memory).

usage: torch_gpt2.py [--batch 16] [--seq 1024] [--steps 12] [--warmup 3]
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fc_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.H = H

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V=50304, T=1024, L=12, H=12, C=768):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.h:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def bench(model, lr, layers_dim, default_batch, default_steps):
    """Trains `model` (a module returning the loss of (idx, targets)) as the module docstring says,
    on random batches of GPT-2 ids, and prints the RESULT line. layers_dim = (L, C) for the 6 L T C
    attention FLOPs. Shared with bench/gpu/torch_llama.py."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=default_batch)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=default_steps)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    dev = "cuda"
    model = model.to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    step = torch.compile(model)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(a.warmup + a.steps):
        idx = torch.randint(0, 50257, (a.batch, a.seq), device=dev)
        tgt = torch.randint(0, 50257, (a.batch, a.seq), device=dev)
        start.record()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        end.record()
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    med = times[len(times) // 2]
    tps = a.batch * a.seq / med
    L, C = layers_dim
    flops_per_token = 6 * n_params + 6 * L * C * a.seq
    print(f"RESULT side=torch tokens_per_s={tps:.0f} step_ms={med * 1e3:.1f} params={n_params} "
          f"mfu_989={100 * tps * flops_per_token / 989e12:.1f} torch_peak_alloc_mb={torch.cuda.max_memory_allocated() / 2**20:.0f} "
          f"loss={loss.item():.4f}", flush=True)


def main():
    torch.manual_seed(0)
    bench(GPT(), 6e-4, (12, 768), 16, 12)


if __name__ == "__main__":
    main()
