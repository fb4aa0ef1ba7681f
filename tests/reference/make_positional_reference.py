#!/usr/bin/python3
"""Reference values for nn/positional (tests/nn/test_positional.cpp), from PyTorch.

Run at development time with Debian's python3-torch (torch 1.13):
    /usr/bin/python3 tests/reference/make_positional_reference.py
It writes tests/reference/positional_reference.json beside itself; the tests read that file
and never need torch.

  sinusoidal  the PositionalEncoding table of the PyTorch tutorial "Language Modeling with
              nn.Transformer" (pe[:, 0::2] = sin(position * div_term), pe[:, 1::2] = cos(...)),
              in float64. For odd d the tutorial's cos assignment fails; the odd case uses
              div_term[: d // 2] for the cosines, the usual fix, which is the formula evaluated
              at every column that exists.
  rope        rotary embeddings with interleaved pairs, computed as Meta's LLaMA reference code
              does it (facebookresearch/llama model.py, apply_rotary_emb): pairs (2i, 2i+1)
              viewed as complex numbers and multiplied by exp(1j * pos * theta_i), with
              theta_i = base ** (-(2i) / hd). The gradient of sum(y * w) for a fixed w gives dL/dx.
"""
import json
import math
import os

import torch

torch.manual_seed(0)


def tutorial_pe(T, d):
    position = torch.arange(T, dtype=torch.float64).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(10000.0) / d))
    pe = torch.zeros(T, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term[: d // 2])
    return pe


def llama_rope(x, positions, base):
    hd = x.shape[-1]
    theta = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))  # (hd/2,)
    angles = torch.outer(positions.to(torch.float64), theta)                   # (T, hd/2)
    freqs_cis = torch.polar(torch.ones_like(angles), angles)                   # exp(i a)
    x_ = torch.view_as_complex(x.reshape(*x.shape[:-1], hd // 2, 2))
    return torch.view_as_real(x_ * freqs_cis).flatten(-2)


def flat(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


out = {"sinusoidal": [], "rope": []}
for T, d in [(6, 8), (50, 16), (5, 5)]:
    out["sinusoidal"].append({"T": T, "d": d, "pe": flat(tutorial_pe(T, d))})

for shape, positions, base in [((2, 2, 3, 6), [0, 1, 2], 10000.0),
                               ((3, 4), [5, 0, 1000], 10000.0),
                               ((2, 4, 8), [7, 3, 3, 12], 100.0)]:
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    w = torch.randn(*shape, dtype=torch.float64)
    y = llama_rope(x, torch.tensor(positions), base)
    (y * w).sum().backward()
    out["rope"].append({"shape": list(shape), "positions": positions, "base": base,
                        "x": flat(x), "w": flat(w), "y": flat(y), "dx": flat(x.grad)})

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "positional_reference.json")
with open(path, "w") as f:
    json.dump(out, f)
print("wrote", path, "with torch", torch.__version__)
