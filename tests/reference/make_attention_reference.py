#!/usr/bin/python3
"""Reference values for tests/nn/test_attention.cpp, computed with PyTorch (Debian's torch 1.13).

Run at development time, never by the tests:
    /usr/bin/python3 tests/reference/make_attention_reference.py
writes tests/reference/attention_reference.json beside this script.

torch 1.13 has no F.scaled_dot_product_attention (it came in 2.0), so attention is written out
as PyTorch 2.x documents its reference implementation:
    scores = q @ k^T * scale,  masked to -inf where a key may not be attended,
    weights = softmax(scores, -1),  out = weights @ v.
A query row whose keys are ALL masked is NaN in torch 1.13 (softmax of a row of -inf); PyTorch
>= 2.5 gives 0 there (and gradients that are finite). That case is derived by hand below: such a
row's weights are set to 0, so its output is 0 and it sends no gradient to q, k or v.

Everything is computed in float64; each case stores its inputs, the fixed weighting w of the
loss L = sum(out * w), the output, and dL/d(every input).
"""
import json
import math
import os

import torch

torch.manual_seed(0)
DT = torch.float64


def t2j(t):
    t = t.detach().to(DT)
    return {"shape": list(t.shape), "data": t.flatten().tolist()}


def attention(q, k, v, keep=None, is_causal=False, scale=None):
    """keep: 0/1 tensor broadcasting to (..., Tq, Tk), 1 = may attend (PyTorch's bool True)."""
    Tq, Tk, hd = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(hd) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale
    allowed = torch.ones(Tq, Tk, dtype=torch.bool)
    if is_causal:  # top-left aligned lower triangle, as PyTorch's is_causal
        allowed = allowed.tril(0)
    allowed = allowed.expand(scores.shape)
    if keep is not None:
        allowed = allowed & (keep != 0)
    scores = scores.masked_fill(~allowed, float("-inf"))
    # Rows with no allowed key: derived by hand (PyTorch >= 2.5): weights 0, output 0.
    empty = ~allowed.any(-1, keepdim=True)
    scores = scores.masked_fill(empty, 0.0)
    weights = torch.softmax(scores, -1).masked_fill(empty, 0.0)
    return weights @ v


def sdpa_case(name, B, H, Tq, Tk, hd, hv, keep=None, is_causal=False, scale=None):
    q = torch.randn(B, H, Tq, hd, dtype=DT, requires_grad=True)
    k = torch.randn(B, H, Tk, hd, dtype=DT, requires_grad=True)
    v = torch.randn(B, H, Tk, hv, dtype=DT, requires_grad=True)
    out = attention(q, k, v, keep, is_causal, scale)
    w = torch.rand(out.shape, dtype=DT) + 0.5
    (out * w).sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(q.grad).all()
    return {"name": name, "q": t2j(q), "k": t2j(k), "v": t2j(v),
            "mask": None if keep is None else t2j(keep), "is_causal": is_causal, "scale": scale,
            "w": t2j(w), "out": t2j(out), "dq": t2j(q.grad), "dk": t2j(k.grad), "dv": t2j(v.grad)}


def rope(x, base=10000.0):
    """Interleaved RoPE (Su et al. 2021): pairs (x[..., 2i], x[..., 2i+1]) rotated by pos * base^(-2i/hd)."""
    T, hd = x.shape[-2], x.shape[-1]
    pos = torch.arange(T, dtype=DT)[:, None]
    inv = base ** (-torch.arange(0, hd, 2, dtype=DT) / hd)
    ang = pos * inv[None, :]                      # (T, hd/2)
    c, s = torch.cos(ang), torch.sin(ang)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(-2)


def module_case(name, B, T, d, H, keep=None, use_rope=False):
    """nanoGPT's CausalSelfAttention (c_attn -> split q|k|v -> heads -> attention -> c_proj)."""
    c_attn = torch.nn.Linear(d, 3 * d).to(DT)
    c_proj = torch.nn.Linear(d, d).to(DT)
    x = torch.randn(B, T, d, dtype=DT, requires_grad=True)
    q, k, v = c_attn(x).split(d, dim=2)
    heads = lambda t: t.view(B, T, H, d // H).transpose(1, 2)   # (B, H, T, hd)
    q, k, v = heads(q), heads(k), heads(v)
    if use_rope:
        q, k = rope(q), rope(k)
    y = attention(q, k, v, keep, is_causal=True)
    y = c_proj(y.transpose(1, 2).contiguous().view(B, T, d))
    w = torch.rand(y.shape, dtype=DT) + 0.5
    (y * w).sum().backward()
    params = {"c_attn.weight": c_attn.weight, "c_attn.bias": c_attn.bias,
              "c_proj.weight": c_proj.weight, "c_proj.bias": c_proj.bias}
    return {"name": name, "d": d, "n_head": H, "rope": use_rope, "x": t2j(x),
            "mask": None if keep is None else t2j(keep),
            "state": {n: t2j(p) for n, p in params.items()},
            "w": t2j(w), "y": t2j(y), "dx": t2j(x.grad),
            "grads": {n: t2j(p.grad) for n, p in params.items()}}


sdpa = [
    sdpa_case("plain", 2, 2, 4, 4, 4, 4),
    sdpa_case("causal", 2, 2, 4, 4, 4, 4, is_causal=True),
    # keep mask (B, 1, Tq, Tk): broadcasts over heads; batch 1, query 2 has no allowed key.
    sdpa_case("mask with a fully masked row", 2, 2, 4, 4, 4, 4,
              keep=torch.tensor([[[[1, 0, 1, 1], [1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 1]]],
                                 [[[1, 1, 1, 1], [0, 1, 0, 1], [0, 0, 0, 0], [1, 0, 0, 0]]]], dtype=DT)),
    # cross-attention: Tq 3, Tk 5, value width 2, explicit scale, causal (top-left aligned)
    sdpa_case("cross causal scale 0.5", 1, 3, 3, 5, 4, 2, is_causal=True, scale=0.5),
]
pad = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=DT).view(2, 1, 1, 5)  # key padding (B, 1, 1, T)
module = [
    module_case("causal", 2, 5, 8, 2),
    module_case("causal with key padding", 2, 5, 8, 2, keep=pad),
    module_case("causal with rope", 2, 5, 8, 2, use_rope=True),
]

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention_reference.json")
with open(path, "w") as f:
    json.dump({"generator": "tests/reference/make_attention_reference.py", "torch": torch.__version__,
               "sdpa": sdpa, "module": module}, f)
    f.write("\n")
print("wrote", path)
