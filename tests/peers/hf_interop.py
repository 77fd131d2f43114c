#!/usr/bin/env python3
"""transformers' side of tests/peers/hf_interop_test.sh (tools/venv: torch, transformers, safetensors).

    hf_interop.py greedy DIR PROMPT N [--dtype f32|bf16] [--auto-tokenizer]
        loads DIR with AutoModelForCausalLM.from_pretrained and prints the greedy continuation of
        PROMPT (N new tokens, GPT-2's encoding from tools/npm; --auto-tokenizer: DIR's own tokenizer
        files through AutoTokenizer, no special token added) as one line of text
    hf_interop.py tokenize DIR FILE [--fast] [--plain]
        AutoTokenizer.from_pretrained(DIR)'s ids of FILE's text, one line (anneal tokenize's format);
        --fast: the tokenizers library's Tokenizer.from_file(DIR/tokenizer.json) instead; --plain:
        without the special tokens the tokenizer adds (Llama 3's <|begin_of_text|>), and with the
        special tokens' texts in FILE encoded as ordinary text (anneal tokenize's ids)
    hf_interop.py make gpt2|llama OUT --dtype f32|bf16 [--shard 100KB] [--kv 2] [--tied 0|1] [--rope 0|1]
        a tiny random model made by transformers itself, saved with save_pretrained (safetensors,
        sharded at --shard)
    hf_interop.py shard OUT N SEED V
        an llm.c uint16 token shard of N random ids below V
    hf_interop.py loss DIR SHARD T [--dtype bf16]
        transformers' mean cross-entropy of SHARD's first T+1 ids (inputs 0..T-1, targets 1..T)
    hf_interop.py same-tensors A B
        every tensor of folder A equals B's bit for bit (same names, dtypes, shapes, bytes); prints
        the count
    hf_interop.py rounded A_F32 B_BF16
        every tensor of B (bf16) is A's (f32) rounded to nearest even; prints the count
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402


def tensors(folder):
    """{name: tensor} of every safetensors file in folder."""
    out = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(folder, f), framework="pt") as st:
                for k in st.keys():
                    out[k] = st.get_tensor(k)
    return out


def main():
    cmd = sys.argv[1]
    if cmd == "greedy":
        from tiktoken_native import load_encoding
        from transformers import AutoModelForCausalLM
        folder, prompt, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
        dtype = torch.bfloat16 if "--dtype" in sys.argv and sys.argv[sys.argv.index("--dtype") + 1] == "bf16" else torch.float32
        m = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
        if "--auto-tokenizer" in sys.argv:  # the folder's own tokenizer files, no special token added
            from transformers import AutoTokenizer
            tok = AutoTokenizer.from_pretrained(folder)
            encode = lambda t: tok(t, add_special_tokens=False)["input_ids"]  # noqa: E731
            decode = lambda ids: tok.decode(ids, clean_up_tokenization_spaces=False)  # noqa: E731
        else:
            enc = load_encoding("gpt2")
            encode, decode = enc.encode_ordinary, enc.decode
        ids = torch.tensor([encode(prompt)])
        out = m.generate(ids, max_new_tokens=n, do_sample=False, min_new_tokens=n, eos_token_id=None, pad_token_id=0)
        print(decode(out[0].tolist()))
    elif cmd == "tokenize":
        text = open(sys.argv[3], encoding="utf-8", newline="").read()
        # --plain: anneal tokenize's ids — no special token added, and special-token texts in the text
        # ("<|endoftext|>") encoded as ordinary text (tiktoken's encode_ordinary)
        plain = "--plain" in sys.argv
        if "--fast" in sys.argv:  # the tokenizers library (Rust) on tokenizer.json alone
            from tokenizers import Tokenizer
            tok = Tokenizer.from_file(os.path.join(sys.argv[2], "tokenizer.json"))
            tok.encode_special_tokens = plain
            ids = tok.encode(text, add_special_tokens=not plain).ids
        else:
            from transformers import AutoTokenizer
            tok = AutoTokenizer.from_pretrained(sys.argv[2])
            ids = tok(text, add_special_tokens=not plain, split_special_tokens=plain)["input_ids"]
        print(" ".join(str(i) for i in ids))
    elif cmd == "make":
        from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
        family, out = sys.argv[2], sys.argv[3]
        arg = lambda k, d: sys.argv[sys.argv.index(k) + 1] if k in sys.argv else d  # noqa: E731
        dtype = torch.bfloat16 if arg("--dtype", "f32") == "bf16" else torch.float32
        torch.manual_seed(7)
        if family == "gpt2":
            m = GPT2LMHeadModel(GPT2Config(vocab_size=50257, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                                           resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
        else:
            rope = {"rope_type": "default", "rope_theta": 10000.0}
            if arg("--rope", "0") == "1":
                rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                        "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
            m = LlamaForCausalLM(LlamaConfig(vocab_size=50257, hidden_size=32, intermediate_size=80,
                                             num_hidden_layers=2, num_attention_heads=4,
                                             num_key_value_heads=int(arg("--kv", "2")), head_dim=8,
                                             max_position_embeddings=64, rms_norm_eps=1e-5,
                                             rope_parameters=rope, tie_word_embeddings=arg("--tied", "0") == "1"))
        with torch.no_grad():  # norm weights away from 1, so a wrong mapping shows
            for name, p in m.named_parameters():
                if p.dim() == 1:
                    p.add_(0.1 * torch.randn_like(p))
        m.to(dtype).save_pretrained(out, safe_serialization=True, max_shard_size=arg("--shard", "5GB"))
        print("made", out, sorted(os.listdir(out)))
    elif cmd == "shard":  # shard OUT N SEED V: an llm.c uint16 shard of N random ids below V
        out, n, seed, v = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, v, (n,), generator=g, dtype=torch.int64)
        header = torch.zeros(256, dtype=torch.int32)
        header[0], header[1], header[2] = 20240520, 1, n
        with open(out, "wb") as f:
            f.write(header.numpy().tobytes())
            f.write(ids.to(torch.int32).numpy().astype("<u2").tobytes())
    elif cmd == "loss":  # loss DIR SHARD T [--dtype bf16]: mean cross-entropy of the shard's first T+1 ids
        folder, shard, T = sys.argv[2], sys.argv[3], int(sys.argv[4])
        from transformers import AutoModelForCausalLM
        dtype = torch.bfloat16 if "--dtype" in sys.argv and sys.argv[sys.argv.index("--dtype") + 1] == "bf16" else torch.float32
        m = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
        raw = open(shard, "rb").read()[1024:]
        ids = torch.frombuffer(bytearray(raw[:2 * (T + 1)]), dtype=torch.int16).to(torch.int64) & 0xFFFF
        with torch.no_grad():
            logits = m(ids[None, :T]).logits.float()
        loss = torch.nn.functional.cross_entropy(logits[0], ids[1:T + 1])
        print("%.9g" % loss.item())
    elif cmd == "same-tensors":
        a, b = tensors(sys.argv[2]), tensors(sys.argv[3])
        if set(a) - set(b) - {"lm_head.weight"}:
            sys.exit("missing from %s: %s" % (sys.argv[3], sorted(set(a) - set(b))[:5]))
        for k, t in b.items():
            if k not in a or t.dtype != a[k].dtype or t.shape != a[k].shape or not torch.equal(t.view(-1).view(torch.uint8) if t.dtype != torch.bool else t, a[k].view(-1).view(torch.uint8) if t.dtype != torch.bool else a[k]):
                sys.exit("tensor %s differs" % k)
        print("%d tensors equal bit for bit" % len(b))
    elif cmd == "rounded":
        a, b = tensors(sys.argv[2]), tensors(sys.argv[3])
        for k, t in b.items():
            if t.dtype != torch.bfloat16 or not torch.equal(a[k].to(torch.bfloat16), t):
                sys.exit("tensor %s is not the f32 export rounded to bf16" % k)
        print("%d tensors are the f32 export rounded to bf16" % len(b))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
