#!/usr/bin/env python3
"""Golden data for anneal's Llama parity test, written by Hugging Face transformers (the oracle).

    tools/venv/bin/python tests/peers/hf_llama_golden.py --out FILE.safetensors \
        [--V 250 --maxT 32 --C 64 --H 4 --KV 2 --F 96 --L 2 --B 4 --T 16 --theta 10000 \
         --rope-factor 0 --tied 0 --seed 1234 --steps 10]

The model is transformers' own LlamaForCausalLM, built from a LlamaConfig with anneal's shapes
(attention through torch's scaled_dot_product_attention, no dropout, no biases), its weights loaded
from random fp32 values through the mapping below from anneal's canonical names
(docs/formats/checkpoint.md) to transformers' (written from its documented layout:
model.embed_tokens, model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head). q and k need no
permutation: anneal rotates halves (x_i, x_{i+hs/2}) as transformers' rotate_half does.

The file holds the same keys as tests/peers/torch_gpt2_golden.py writes (input.*, param.<name>,
f32./f64. logits, loss, grad.<name>, losses, grad_norms, final.<name>), so one C++ test
(tests/model/gpt_vs_torch_test.cc) checks both families, plus the Llama fields in __metadata__
(family KV F theta eps tied rope_factor rope_low rope_high rope_orig).

The fp64 anchor: the model is converted with .to(torch.float64). transformers' LlamaRMSNorm computes
in float32 whatever its input (a choice for bf16 training), which would make the fp64 run only as
exact as fp32 there; for the fp64 run only, RMSNorm's forward is replaced by the same formula in the
input's dtype. The rotary tables are computed in float32 in both runs, by transformers (anneal
computes them the same way, model/rope.cc). The loss is cross-entropy of the logits against the
targets as given (no shift: anneal's targets are already the next tokens).

Optimizer, each step: loss.backward(); clip_grad_norm_(all params, max_norm); torch.optim.AdamW (lr
constant, betas, eps; weight decay on params with dim >= 2).

Deterministic: one torch thread.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt2_golden import write_safetensors  # noqa: E402  (the same file format)

from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402


def canonical_shapes(a):
    """[(anneal name, transformers name, shape)] in anneal's canonical order."""
    hs = a.C // a.H
    out = [("wte.weight", "model.embed_tokens.weight", (a.V, a.C))]
    for l in range(a.L):
        p, q = "h.%d." % l, "model.layers.%d." % l
        out += [(p + "attn_norm.weight", q + "input_layernorm.weight", (a.C,)),
                (p + "attn.q.weight", q + "self_attn.q_proj.weight", (a.C, a.C)),
                (p + "attn.k.weight", q + "self_attn.k_proj.weight", (a.KV * hs, a.C)),
                (p + "attn.v.weight", q + "self_attn.v_proj.weight", (a.KV * hs, a.C)),
                (p + "attn.proj.weight", q + "self_attn.o_proj.weight", (a.C, a.C)),
                (p + "mlp_norm.weight", q + "post_attention_layernorm.weight", (a.C,)),
                (p + "mlp.gate.weight", q + "mlp.gate_proj.weight", (a.F, a.C)),
                (p + "mlp.up.weight", q + "mlp.up_proj.weight", (a.F, a.C)),
                (p + "mlp.down.weight", q + "mlp.down_proj.weight", (a.C, a.F))]
    out += [("norm_f.weight", "model.norm.weight", (a.C,))]
    if not a.tied:
        out += [("lm_head.weight", "lm_head.weight", (a.V, a.C))]
    return out


def init_params(a):
    """fp32 weights from torch's seeded generator: N(0, 0.02) matrices (residual projections
    0.02/sqrt(2L)), norm weights 1 + 0.1 N(0, 1) (so a wrong norm weight shows)."""
    params = {}
    for name, _, shape in canonical_shapes(a):
        if "norm" in name:
            t = 1.0 + 0.1 * torch.randn(shape, dtype=torch.float32)
        elif name.endswith("proj.weight") or name.endswith("down.weight"):
            t = torch.randn(shape, dtype=torch.float32) * (0.02 / (2 * a.L) ** 0.5)
        else:
            t = torch.randn(shape, dtype=torch.float32) * 0.02
        params[name] = t.contiguous()
    return params


def hf_config(a):
    rope = {"rope_type": "default", "rope_theta": a.theta}
    if a.rope_factor > 0:
        rope = {"rope_type": "llama3", "rope_theta": a.theta, "factor": a.rope_factor,
                "low_freq_factor": a.rope_low, "high_freq_factor": a.rope_high,
                "original_max_position_embeddings": a.rope_orig}
    return LlamaConfig(vocab_size=a.V, hidden_size=a.C, intermediate_size=a.F, num_hidden_layers=a.L,
                       num_attention_heads=a.H, num_key_value_heads=a.KV, head_dim=a.C // a.H,
                       max_position_embeddings=a.maxT, rms_norm_eps=a.eps_norm, rope_parameters=rope,
                       tie_word_embeddings=bool(a.tied), attention_bias=False, mlp_bias=False,
                       attention_dropout=0.0, attn_implementation="sdpa")


def rmsnorm_in_input_dtype(self, hidden_states):
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


def run_precision(init, dtype, tokens, targets, a):
    """Initial logits/loss/grads, then `a.steps` clipped AdamW steps. Returns {key: tensor}."""
    model = LlamaForCausalLM(hf_config(a)).to(dtype)
    model.eval()  # no dropout (there is none); gradients still flow
    state = model.state_dict()
    with torch.no_grad():
        for name, hf, _ in canonical_shapes(a):
            state[hf].copy_(init[name].to(dtype))
    names = [n for n, _, _ in canonical_shapes(a)]
    hf_param = dict(model.named_parameters())
    params = [hf_param[hf] for _, hf, _ in canonical_shapes(a)]
    if a.tied:
        assert model.lm_head.weight is model.model.embed_tokens.weight
    out = {}

    def loss_of():
        logits = model(input_ids=tokens).logits
        assert logits.dtype == dtype, logits.dtype
        return logits, F.cross_entropy(logits.reshape(-1, a.V), targets.reshape(-1))

    logits, loss = loss_of()
    loss.backward()
    out["logits"] = logits.detach().clone()
    out["loss"] = loss.detach().reshape(1).clone()
    for n, p in zip(names, params):
        out["grad." + n] = p.grad.detach().clone()
        p.grad = None
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)
    losses, norms = [], []
    for _ in range(a.steps):
        opt.zero_grad(set_to_none=True)
        _, loss = loss_of()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, a.max_norm)
        opt.step()
        losses.append(loss.detach().item())
        norms.append(float(norm))
    out["losses"] = torch.tensor(losses, dtype=dtype)
    out["grad_norms"] = torch.tensor(norms, dtype=dtype)
    for n, p in zip(names, params):
        out["final." + n] = p.detach().clone()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    for k, v in (("V", 250), ("maxT", 32), ("C", 64), ("H", 4), ("KV", 2), ("F", 96), ("L", 2), ("B", 4),
                 ("T", 16), ("seed", 1234), ("steps", 10), ("tied", 0), ("rope-orig", 8192)):
        ap.add_argument("--" + k, type=int, default=v)
    for k, v in (("theta", 10000.0), ("eps-norm", 1e-5), ("rope-factor", 0.0), ("rope-low", 1.0),
                 ("rope-high", 4.0), ("lr", 1e-3), ("beta1", 0.9), ("beta2", 0.95), ("eps", 1e-8),
                 ("weight_decay", 0.1), ("max_norm", 1.0)):
        ap.add_argument("--" + k, type=float, default=v)
    a = ap.parse_args()
    if a.C % a.H or a.H % a.KV or (a.C // a.H) % 2 or a.T > a.maxT:
        print("bad config: need C % H == 0, H % KV == 0, an even head size and T <= maxT", file=sys.stderr)
        return 2

    t0 = time.perf_counter()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    init = init_params(a)
    tokens = torch.randint(0, a.V, (a.B, a.T), dtype=torch.int64)
    targets = torch.randint(0, a.V, (a.B, a.T), dtype=torch.int64)
    tensors = {"input.tokens": tokens.to(torch.int32), "input.targets": targets.to(torch.int32)}
    for n, _, _ in canonical_shapes(a):
        tensors["param." + n] = init[n]
    results = {}
    plain_rmsnorm = modeling_llama.LlamaRMSNorm.forward
    for prec, dtype in (("f32", torch.float32), ("f64", torch.float64)):
        modeling_llama.LlamaRMSNorm.forward = rmsnorm_in_input_dtype if dtype == torch.float64 else plain_rmsnorm
        results[prec] = run_precision(init, dtype, tokens, targets, a)
        for k, v in results[prec].items():
            tensors[prec + "." + k] = v.to(dtype).contiguous()
    modeling_llama.LlamaRMSNorm.forward = plain_rmsnorm

    import transformers
    meta = {"family": "llama", "V": a.V, "maxT": a.maxT, "C": a.C, "H": a.H, "KV": a.KV, "F": a.F, "L": a.L,
            "B": a.B, "T": a.T, "seed": a.seed, "steps": a.steps, "lr": a.lr, "beta1": a.beta1,
            "beta2": a.beta2, "eps": a.eps, "weight_decay": a.weight_decay, "max_norm": a.max_norm,
            "theta": a.theta, "norm_eps": a.eps_norm, "tied": a.tied, "rope_factor": a.rope_factor,
            "rope_low": a.rope_low, "rope_high": a.rope_high, "rope_orig": a.rope_orig}
    meta = {k: str(v) for k, v in meta.items()}
    meta["clip_eps"] = "1e-06"
    meta["torch_version"] = torch.__version__
    meta["transformers_version"] = transformers.__version__
    write_safetensors(a.out, tensors, meta)
    l32, l64 = results["f32"]["losses"].double(), results["f64"]["losses"]
    print("wrote %s: %d tensors, KV=%d tied=%d rope_factor=%g, loss %.6f -> %.6f over %d steps, "
          "f32 vs f64 max loss diff %.3e, %.2f s" % (a.out, len(tensors), a.KV, a.tied, a.rope_factor,
                                                     l64[0].item(), l64[-1].item(), a.steps,
                                                     (l32 - l64).abs().max().item(), time.perf_counter() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
