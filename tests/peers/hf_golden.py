#!/usr/bin/env python3
"""Golden data for anneal's parity tests of both families, written by Hugging Face transformers.

    tools/venv/bin/python tests/peers/hf_golden.py --family llama --out FILE.safetensors \
        [--V 250 --maxT 32 --C 64 --H 4 --KV 2 --F 96 --L 2 --B 4 --T 16 --theta 10000 \
         --rope-factor 0 --tied 0 --seed 1234 --steps 10]
    tools/venv/bin/python tests/peers/hf_golden.py --family gpt2 --out FILE.safetensors [--V ... --T ...]

Llama: the model is transformers' own LlamaForCausalLM, built from a LlamaConfig with anneal's
shapes (attention through torch's scaled_dot_product_attention, no dropout, no biases), its weights
loaded from random fp32 values through the mapping below from anneal's canonical names
(docs/formats/checkpoint.md) to transformers' (written from its documented layout:
model.embed_tokens, model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head). q and k need no
permutation: anneal rotates halves (x_i, x_{i+hs/2}) as transformers' rotate_half does.

GPT-2: transformers' GPT2LMHeadModel from a GPT2Config of anneal's shape (gelu_new, LayerNorm eps
1e-5, no dropout, sdpa, tied head). Its linear layers are Conv1D, weights stored (in, out), and
q, k, v one fused c_attn: anneal's h.l.attn.{q,k,v}.weight (C, C) are the transposes of c_attn's
three column blocks, their biases c_attn.bias's three thirds; attn.proj, mlp.fc and mlp.proj are
c_proj, c_fc and c_proj transposed. Gradients and final parameters are mapped back the same way (an
elementwise optimizer and a global norm do not care how the values are grouped).

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
from torch_gpt2_golden import canonical_shapes as canonical_shapes_gpt2  # noqa: E402
from torch_gpt2_golden import write_safetensors  # noqa: E402  (the same file format)

from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402


def gpt2_shapes(a):
    """[(anneal name, shape)] in anneal's canonical order (GPT-2): torch_gpt2_golden's list."""
    return canonical_shapes_gpt2(a.V, a.maxT, a.C, a.L)


def gpt2_to_hf(a, t):
    """anneal tensors {name: tensor} -> GPT2LMHeadModel's {name: tensor}."""
    hf = {"transformer.wte.weight": t["wte.weight"], "transformer.wpe.weight": t["wpe.weight"],
          "transformer.ln_f.weight": t["ln_f.weight"], "transformer.ln_f.bias": t["ln_f.bias"]}
    for l in range(a.L):
        p, q = "h.%d." % l, "transformer.h.%d." % l
        for n in ("ln_1", "ln_2"):
            hf[q + n + ".weight"], hf[q + n + ".bias"] = t[p + n + ".weight"], t[p + n + ".bias"]
        hf[q + "attn.c_attn.weight"] = torch.cat([t[p + "attn.%s.weight" % n] for n in "qkv"], 0).t()
        hf[q + "attn.c_attn.bias"] = torch.cat([t[p + "attn.%s.bias" % n] for n in "qkv"], 0)
        for ours, theirs in (("attn.proj", "attn.c_proj"), ("mlp.fc", "mlp.c_fc"), ("mlp.proj", "mlp.c_proj")):
            hf[q + theirs + ".weight"] = t[p + ours + ".weight"].t()
            hf[q + theirs + ".bias"] = t[p + ours + ".bias"]
    return hf


def gpt2_from_hf(a, hf):
    """GPT2LMHeadModel's {name: tensor} -> anneal's {name: tensor} (the inverse of gpt2_to_hf)."""
    C = a.C
    t = {"wte.weight": hf["transformer.wte.weight"], "wpe.weight": hf["transformer.wpe.weight"],
         "ln_f.weight": hf["transformer.ln_f.weight"], "ln_f.bias": hf["transformer.ln_f.bias"]}
    for l in range(a.L):
        p, q = "h.%d." % l, "transformer.h.%d." % l
        for n in ("ln_1", "ln_2"):
            t[p + n + ".weight"], t[p + n + ".bias"] = hf[q + n + ".weight"], hf[q + n + ".bias"]
        w, b = hf[q + "attn.c_attn.weight"], hf[q + "attn.c_attn.bias"]
        for i, n in enumerate("qkv"):
            t[p + "attn.%s.weight" % n] = w[:, i * C:(i + 1) * C].t()
            t[p + "attn.%s.bias" % n] = b[i * C:(i + 1) * C]
        for ours, theirs in (("attn.proj", "attn.c_proj"), ("mlp.fc", "mlp.c_fc"), ("mlp.proj", "mlp.c_proj")):
            t[p + ours + ".weight"] = hf[q + theirs + ".weight"].t()
            t[p + ours + ".bias"] = hf[q + theirs + ".bias"]
    return {k: v.contiguous() for k, v in t.items()}


def canonical_shapes(a):
    """[(anneal name, transformers name, shape)] in anneal's canonical order (Llama)."""
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


def names_shapes(a):
    if a.family == "gpt2":
        return gpt2_shapes(a)
    return [(n, shape) for n, _, shape in canonical_shapes(a)]


def init_params(a):
    """fp32 weights from torch's seeded generator: N(0, 0.02) matrices (residual projections
    0.02/sqrt(2L)), norm weights 1 + 0.1 N(0, 1) and norm biases 0.1 N(0, 1) (so a wrong norm
    weight shows), linear biases N(0, 0.02)."""
    params = {}
    for name, shape in names_shapes(a):
        is_norm = "norm" in name or ".ln_" in name or name.startswith("ln_")
        if is_norm and name.endswith(".bias"):
            t = 0.1 * torch.randn(shape, dtype=torch.float32)
        elif is_norm:
            t = 1.0 + 0.1 * torch.randn(shape, dtype=torch.float32)
        elif name.endswith("proj.weight") or name.endswith("down.weight"):
            t = torch.randn(shape, dtype=torch.float32) * (0.02 / (2 * a.L) ** 0.5)
        else:
            t = torch.randn(shape, dtype=torch.float32) * 0.02
        params[name] = t.contiguous()
    return params


def gpt2_config(a):
    return GPT2Config(vocab_size=a.V, n_positions=a.maxT, n_embd=a.C, n_layer=a.L, n_head=a.H,
                      activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                      layer_norm_epsilon=1e-5, tie_word_embeddings=True, attn_implementation="sdpa",
                      bos_token_id=0, eos_token_id=0)


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
    if a.family == "gpt2":
        model = GPT2LMHeadModel(gpt2_config(a)).to(dtype)
        to_hf, from_hf = (lambda t: gpt2_to_hf(a, t)), (lambda hf: gpt2_from_hf(a, hf))
    else:
        model = LlamaForCausalLM(hf_config(a)).to(dtype)
        pairs = [(n, hf) for n, hf, _ in canonical_shapes(a)]
        to_hf = lambda t: {hf: t[n] for n, hf in pairs}  # noqa: E731
        from_hf = lambda h: {n: h[hf] for n, hf in pairs}  # noqa: E731
    model.eval()  # no dropout (there is none); gradients still flow
    state = model.state_dict()
    with torch.no_grad():
        for hf, value in to_hf({n: init[n].to(dtype) for n in init}).items():
            state[hf].copy_(value)
    names = [n for n, _ in names_shapes(a)]
    hf_param = dict(model.named_parameters())  # a tied head appears once
    params = list(hf_param.values())
    if a.tied or a.family == "gpt2":
        assert model.lm_head.weight is model.get_input_embeddings().weight
    out = {}

    def loss_of():
        logits = model(input_ids=tokens).logits
        assert logits.dtype == dtype, logits.dtype
        return logits, F.cross_entropy(logits.reshape(-1, a.V), targets.reshape(-1))

    logits, loss = loss_of()
    loss.backward()
    out["logits"] = logits.detach().clone()
    out["loss"] = loss.detach().reshape(1).clone()
    grads = from_hf({hf: p.grad.detach().clone() for hf, p in hf_param.items()})
    for n in names:
        out["grad." + n] = grads[n]
    for p in params:
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
    final = from_hf({hf: p.detach().clone() for hf, p in hf_param.items()})
    for n in names:
        out["final." + n] = final[n]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--family", choices=["gpt2", "llama"], default="llama")
    for k, v in (("V", 250), ("maxT", 32), ("C", 64), ("H", 4), ("KV", 2), ("F", 96), ("L", 2), ("B", 4),
                 ("T", 16), ("seed", 1234), ("steps", 10), ("tied", 0), ("rope-orig", 8192)):
        ap.add_argument("--" + k, type=int, default=v)
    for k, v in (("theta", 10000.0), ("eps-norm", 1e-5), ("rope-factor", 0.0), ("rope-low", 1.0),
                 ("rope-high", 4.0), ("lr", 1e-3), ("beta1", 0.9), ("beta2", 0.95), ("eps", 1e-8),
                 ("weight_decay", 0.1), ("max_norm", 1.0)):
        ap.add_argument("--" + k, type=float, default=v)
    a = ap.parse_args()
    if a.family == "gpt2":
        a.KV, a.F, a.tied = a.H, 4 * a.C, 1
    if a.C % a.H or a.H % a.KV or (a.family == "llama" and (a.C // a.H) % 2) or a.T > a.maxT:
        print("bad config: need C % H == 0, H % KV == 0, an even head size and T <= maxT", file=sys.stderr)
        return 2

    t0 = time.perf_counter()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    init = init_params(a)
    tokens = torch.randint(0, a.V, (a.B, a.T), dtype=torch.int64)
    targets = torch.randint(0, a.V, (a.B, a.T), dtype=torch.int64)
    tensors = {"input.tokens": tokens.to(torch.int32), "input.targets": targets.to(torch.int32)}
    for n, _ in names_shapes(a):
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
    meta = {"family": a.family, "V": a.V, "maxT": a.maxT, "C": a.C, "H": a.H, "KV": a.KV, "F": a.F, "L": a.L,
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
    print("wrote %s: %s, %d tensors, KV=%d tied=%d rope_factor=%g, loss %.6f -> %.6f over %d steps, "
          "f32 vs f64 max loss diff %.3e, %.2f s" % (a.out, a.family, len(tensors), a.KV, a.tied, a.rope_factor,
                                                     l64[0].item(), l64[-1].item(), a.steps,
                                                     (l32 - l64).abs().max().item(), time.perf_counter() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
