#!/usr/bin/python3
"""Reference values for tests/nn/test_activation.cpp and tests/nn/test_normalization.cpp (GELU and layer norm), computed with PyTorch.

Run at development time with Debian's torch 1.13, never by the tests:
    /usr/bin/python3 tests/reference/make_layers_reference.py
It prints C++ initializer lists; they are pasted into tests/nn/test_activation.cpp and test_normalization.cpp, each block under a
comment naming this script. Everything is computed in float64. The inputs are made from
closed-form expressions that the C++ test repeats, so only the outputs are pasted.
"""
import math

import torch
import torch.nn.functional as F

DT = torch.float64


def cpp(name, t):
    vals = ", ".join(f"{v:.10g}" for v in t.detach().flatten().tolist())
    print(f"// {name}: shape {tuple(t.shape)}")
    print(f"const std::vector<double> {name} = {{{vals}}};")


# ---- GELU, both forms, at fixed points; y and dy/dx --------------------------------------------
gelu_x = [-6, -3, -1.5, -1, -0.5, -0.1, 0, 0.1, 0.5, 1, 1.5, 3, 6]
for approximate in ["none", "tanh"]:
    x = torch.tensor(gelu_x, dtype=DT, requires_grad=True)
    y = F.gelu(x, approximate=approximate)
    y.backward(torch.ones_like(y))
    cpp(f"gelu_{approximate}_y", y)
    cpp(f"gelu_{approximate}_dy", x.grad)


# ---- layer norm ----------------------------------------------------------------------------------
# x (2, 3, 4): x[i] = 2 sin(0.7 i + 0.3) + 0.1 i over the flat index i, and the row x[1, 2, :] set
# to 0.7 everywhere (variance 0: there eps dominates and x̂ = 0, so y = bias).
# weight[j] = 1 + 0.1 cos(j), bias[j] = 0.05 j - 0.1 over the flat index j of normalized_shape.
# The loss is L = Σ y · g with g[i] = cos(0.37 i); the gradients are dL/dx, dL/dweight, dL/dbias.
def make_x():
    x = torch.tensor([2 * math.sin(0.7 * i + 0.3) + 0.1 * i for i in range(24)], dtype=DT).reshape(2, 3, 4)
    x[1, 2, :] = 0.7
    return x


def affine(shape):
    n = math.prod(shape)
    w = torch.tensor([1 + 0.1 * math.cos(j) for j in range(n)], dtype=DT).reshape(shape)
    b = torch.tensor([0.05 * j - 0.1 for j in range(n)], dtype=DT).reshape(shape)
    return w, b


g = torch.tensor([math.cos(0.37 * i) for i in range(24)], dtype=DT).reshape(2, 3, 4)

# Case 1: normalized_shape (4,), with weight and bias, eps 1e-5 (PyTorch's default).
x = make_x().requires_grad_()
w, b = affine((4,))
w.requires_grad_()
b.requires_grad_()
y = F.layer_norm(x, (4,), w, b, eps=1e-5)
(y * g).sum().backward()
cpp("ln4_y", y)
cpp("ln4_dx", x.grad)
cpp("ln4_dw", w.grad)
cpp("ln4_db", b.grad)

# Case 2: normalized_shape (3, 4), no affine, eps 1e-3.
x = make_x().requires_grad_()
y = F.layer_norm(x, (3, 4), None, None, eps=1e-3)
(y * g).sum().backward()
cpp("ln34_y", y)
cpp("ln34_dx", x.grad)
