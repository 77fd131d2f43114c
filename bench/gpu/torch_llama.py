#!/usr/bin/env python3
"""The PyTorch side of bench/gpu/device_check.sh's llama stage: the Llama 3.2 1B shape (anneal's
llama stage: the preset llama-3.2-1b's shape with GPT-2's vocabulary, V=50257, 16 layers, 32 query and 8 key/value heads, C=2048, SwiGLU 8192, tied
embeddings, RMSNorm eps 1e-5, rotary theta 500000 with Llama 3's frequency scaling) written in plain
PyTorch — RMSNorm, rotate-half rotary embeddings, SwiGLU, grouped-query attention through
scaled_dot_product_attention(is_causal=True, enable_gqa=True) — trained with torch.compile, bf16
autocast and fused AdamW on random token batches of B x T. Plain PyTorch rather than transformers'
LlamaForCausalLM: the device machine has torch but may lack transformers, and this is the same
computation (tests/peers/hf_golden.py holds anneal to transformers' own module on the CPU).
Prints one RESULT line: tokens/s over the timed steps (CUDA events), torch's peak allocation.

usage: torch_llama.py [--batch 4] [--seq 1024] [--steps 8] [--warmup 3]
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt2 import bench  # noqa: E402

V, L, H, KV, C, FF, THETA = 50257, 16, 32, 8, 2048, 8192, 500000.0  # GPT-2's vocabulary, as anneal's side


def inv_freq(hs):
    inv = 1.0 / (THETA ** (torch.arange(0, hs, 2, dtype=torch.float32) / hs))
    factor, low, high, orig = 32.0, 1.0, 4.0, 8192  # Llama 3's scaling
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > orig / low, inv / factor, inv)
    smooth = (orig / wavelen - low) / (high - low)
    medium = ~(wavelen < orig / high) & ~(wavelen > orig / low)
    return torch.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)


def rotate(x, cos, sin):  # x (B, H, T, hs); cos, sin (T, hs/2)
    a, b = x.chunk(2, dim=-1)
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        hs = C // H
        self.n1, self.n2 = nn.RMSNorm(C, eps=1e-5), nn.RMSNorm(C, eps=1e-5)
        self.q, self.k, self.v = nn.Linear(C, C, bias=False), nn.Linear(C, KV * hs, bias=False), nn.Linear(C, KV * hs, bias=False)
        self.o = nn.Linear(C, C, bias=False)
        self.gate, self.up, self.down = nn.Linear(C, FF, bias=False), nn.Linear(C, FF, bias=False), nn.Linear(FF, C, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        hs = C // H
        a = self.n1(x)
        q = rotate(self.q(a).view(B, T, H, hs).transpose(1, 2), cos, sin)
        k = rotate(self.k(a).view(B, T, KV, hs).transpose(1, 2), cos, sin)
        v = self.v(a).view(B, T, KV, hs).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.o(y)
        m = self.n2(x)
        return x + self.down(F.silu(self.gate(m)) * self.up(m))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.h = nn.ModuleList(Block() for _ in range(L))
        self.norm = nn.RMSNorm(C, eps=1e-5)
        self.register_buffer("inv", inv_freq(C // H), persistent=False)

    def forward(self, idx, targets):
        T = idx.shape[1]
        ang = torch.arange(T, device=idx.device, dtype=torch.float32)[:, None] * self.inv[None, :]
        cos, sin = ang.cos(), ang.sin()
        x = self.wte(idx)
        for b in self.h:
            x = b(x, cos, sin)
        logits = self.norm(x) @ self.wte.weight.t()  # tied
        return F.cross_entropy(logits.float().view(-1, V), targets.view(-1))


def main():
    torch.manual_seed(0)
    bench(Llama(), 3e-4, (L, C), 4, 8)  # the loop and the RESULT line: torch_gpt2.py's


if __name__ == "__main__":
    main()
