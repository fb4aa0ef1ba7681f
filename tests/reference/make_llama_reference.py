#!/usr/bin/python3
"""tests/reference/make_llama_reference.py — the reference dump for examples/gpt's --arch llama.

Run at development time with Debian's python3-torch (torch 1.13); the tests never need torch:

    /usr/bin/python3 tests/reference/make_llama_reference.py

It builds the tiny llama of bench/llama.py (Meta's LLaMA layout and names: RMSNorm pre-norm,
RoPE on interleaved pairs, SwiGLU, grouped-query attention, no biases), V 17, L 2, H 4, d 16
(hd 4, F 64), block T 8, batch B 2, with weights drawn once by bench/llama.py's init in float32,
then computes in float64 with make_gpt_reference.py's dump_variant, as for GPT-2's block:
logits, loss and gradients on a fixed batch, then 10 train_steps (zero_grad; loss; backward;
clip_grad_norm_ 1.0; AdamW lr 1e-3, betas (0.9, 0.99), eps 1e-8, weight decay 0.1 on the ≥2-D
weights only, so not on the RMSNorm weights).

Three variants: "gqa" (n_kv 2, head tied to tok_embeddings), "mqa" (n_kv 1, the head its own
output.weight), "mha" (n_kv 4, tied).

Before writing, it asserts that the model is the one its docstring says:
  * RoPE's complex multiply equals a rotation of the pairs (2j, 2j+1) written out in real
    arithmetic, angle by angle;
  * with n_kv = H the logits equal a forward written out head by head (plain multi-head
    attention, RMSNorm and SwiGLU from their formulas), and the grouped-query logits equal
    multi-head attention whose K/V weights repeat each K/V head's rows H/n_kv times;
  * a checkpoint holding the tied table once (as examples/gpt writes it) loads by name.

It writes ONE file beside itself, llama_reference.safetensors (F32, ids stored as F32, exact below
2^24), in make_gpt_reference.py's layout (its write_safetensors):
    inputs (B, T), targets (B, T)                           token ids
    <variant>/weight/<Meta name>                            the initial weights (tied table once)
    <variant>/grad/<Meta name>                              dL/dθ at those weights
    <variant>/logits (B, T, V), <variant>/loss ()           nats
    <variant>/losses (10,), <variant>/grad_norms (10,)      the 10 steps, each before its update
and the shapes in "__metadata__".
"""
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
sys.path.insert(0, HERE)
import llama  # noqa: E402
from make_gpt_reference import dump_variant, write_safetensors  # noqa: E402
from make_gpt_reference import BETAS, CLIP, EPS, LR, SEED, STEPS, WEIGHT_DECAY  # noqa: E402  (its train_steps)

V, L, H, D, T, B = 17, 2, 4, 16, 8, 2
VARIANTS = {"gqa": dict(n_kv_head=2, tie=True),
            "mqa": dict(n_kv_head=1, tie=False),
            "mha": dict(n_kv_head=4, tie=True)}


def make_model(n_kv_head, tie):
    torch.manual_seed(SEED)
    return llama.Llama(llama.LlamaConfig(vocab=V, block=T, n_layer=L, n_head=H, n_kv_head=n_kv_head, d=D, tie=tie))


# ---- self-checks ----------------------------------------------------------------------------------
def rope_by_hand(x):
    """x (B, T, heads, hd): out[.., t, .., 2j] = x_2j cos a − x_2j+1 sin a, out[.., 2j+1] = x_2j sin a + x_2j+1 cos a,
    a = t · 10000^(−2j/hd), one angle at a time with math.cos / math.sin."""
    out = x.clone()
    hd = x.shape[-1]
    for t in range(x.shape[1]):
        for j in range(hd // 2):
            a = t * 10000.0 ** (-2 * j / hd)
            x0, x1 = x[:, t, :, 2 * j], x[:, t, :, 2 * j + 1]
            out[:, t, :, 2 * j] = x0 * math.cos(a) - x1 * math.sin(a)
            out[:, t, :, 2 * j + 1] = x0 * math.sin(a) + x1 * math.cos(a)
    return out


def forward_by_hand(sd, idx, n_kv, tie):
    """The whole forward from the state dict, one query head at a time: head h uses K/V head h // (H/n_kv)."""
    hd = D // H
    rms = lambda x, w: x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w
    x = sd["tok_embeddings.weight"][idx]                                   # (B, T, d)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(L):
        p = f"layers.{i}."
        a = rms(x, sd[p + "attention_norm.weight"])
        q = rope_by_hand((a @ sd[p + "attention.wq.weight"].T).view(B, T, H, hd))
        k = rope_by_hand((a @ sd[p + "attention.wk.weight"].T).view(B, T, n_kv, hd))
        v = (a @ sd[p + "attention.wv.weight"].T).view(B, T, n_kv, hd)
        heads = []
        for h in range(H):
            g = h // (H // n_kv)
            s = q[:, :, h] @ k[:, :, g].transpose(1, 2) / math.sqrt(hd)     # (B, T, T)
            heads.append(torch.softmax(s.masked_fill(~causal, float("-inf")), -1) @ v[:, :, g])
        x = x + torch.cat(heads, -1) @ sd[p + "attention.wo.weight"].T
        f = rms(x, sd[p + "ffn_norm.weight"])
        gate, up = f @ sd[p + "feed_forward.w1.weight"].T, f @ sd[p + "feed_forward.w3.weight"].T
        x = x + (gate * torch.sigmoid(gate) * up) @ sd[p + "feed_forward.w2.weight"].T
    head = sd["tok_embeddings.weight" if tie else "output.weight"]
    return rms(x, sd["norm.weight"]) @ head.T


def self_check(x):
    g = torch.Generator().manual_seed(SEED)
    q = torch.randn(B, T, H, D // H, dtype=torch.float64, generator=g)
    err = (llama.apply_rope(q, llama.rope_angles(D // H, T)) - rope_by_hand(q)).abs().max().item()
    assert err < 1e-14, f"RoPE: complex multiply differs from the pair rotation by {err}"

    for n_kv, tie in ((H, True), (2, False), (1, True)):
        model = make_model(n_kv, tie).double()
        with torch.no_grad():
            err = (model(x) - forward_by_hand(model.state_dict(), x, n_kv, tie)).abs().max().item()
        assert err < 1e-12, f"n_kv {n_kv}: the model differs from the forward by hand by {err}"

    gqa = make_model(2, True).double()                      # the same weights, K/V rows repeated
    mha = llama.Llama(llama.LlamaConfig(vocab=V, block=T, n_layer=L, n_head=H, n_kv_head=H, d=D)).double()
    sd = gqa.state_dict()
    for name, w in sd.items():
        if name.endswith(("wk.weight", "wv.weight")):      # (n_kv·hd, d) → (H·hd, d)
            sd[name] = w.view(2, 1, D // H, D).expand(2, H // 2, D // H, D).reshape(D, D)
    mha.load_state_dict(sd)
    with torch.no_grad():
        err = (gqa(x) - mha(x)).abs().max().item()
    assert err < 1e-12, f"GQA differs from MHA with repeated K/V weights by {err}"

    fresh = llama.Llama(llama.LlamaConfig(vocab=V, block=T, n_layer=L, n_head=H, n_kv_head=2, d=D)).double()
    fresh.load_checkpoint({name: p for name, p in gqa.named_parameters()})   # the tied table once
    with torch.no_grad():
        assert torch.equal(fresh(x), gqa(x)), "load_checkpoint: a tied checkpoint did not load whole"
    print("self-check: RoPE = pair rotation; model = forward by hand (n_kv 4, 2, 1); GQA = MHA with repeated K/V; "
          "a tied checkpoint loads by name")


def main():
    g = torch.Generator().manual_seed(SEED)
    x = torch.randint(0, V, (B, T), generator=g)
    y = torch.randint(0, V, (B, T), generator=g)
    self_check(x)
    out = {"inputs": x.float(), "targets": y.float()}
    for prefix, cfg in VARIANTS.items():
        dump_variant(prefix, make_model(**cfg), x, y, out)   # make_gpt_reference.py's dump and train_steps
    meta = {"script": "tests/reference/make_llama_reference.py", "torch": torch.__version__,
            "vocab": str(V), "n_layer": str(L), "n_head": str(H), "d": str(D), "block": str(T),
            "batch": str(B), "ffn_hidden": str(llama.ffn_hidden(D)), "rms_eps": "1e-05", "rope_base": "10000",
            "n_kv_head": ",".join(f"{k}:{v['n_kv_head']}" for k, v in VARIANTS.items()),
            "tie": ",".join(f"{k}:{int(v['tie'])}" for k, v in VARIANTS.items()),
            "steps": str(STEPS), "lr": str(LR), "beta1": str(BETAS[0]), "beta2": str(BETAS[1]), "eps": str(EPS),
            "weight_decay": str(WEIGHT_DECAY), "clip": str(CLIP), "seed": str(SEED)}
    path = os.path.join(HERE, "llama_reference.safetensors")
    write_safetensors(path, out, meta)
    print(f"wrote {path}: {len(out)} tensors, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
