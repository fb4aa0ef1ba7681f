#!/usr/bin/python3
"""Reference values for tests/core/test_slicing.cpp, test_masking.cpp, test_math_ops.cpp, test_reduction.cpp,
test_shape.cpp and test_selection.cpp, computed by PyTorch in float64.

Run at development time (Debian's python3-torch, torch 1.13):
    /usr/bin/python3 tests/reference/make_core_ops_reference.py
It writes tests/reference/core_ops_reference.hpp, a committed C++ header of named tensors
(name, shape, row-major values), so the tests themselves never need torch.

Every input is built from fixed formulas here (no random numbers), and each gradient is that of
L = sum(w * y) for a fixed weight tensor w, or the stated scalar loss.
"""
import math
import os

import torch

torch.set_default_dtype(torch.float64)
cases = []  # (name, tensor)


def add(name, t):
    cases.append((name, t.detach().to(torch.float64).contiguous()))


def ramp(*shape, scale=0.25, shift=-1.5):
    """Deterministic, irregular values: sin-scrambled ramp so no two entries are equal."""
    n = math.prod(shape)
    return (torch.sin(torch.arange(n) * 1.7 + 0.3) * 2 + torch.arange(n) * scale / n + shift).reshape(shape)


# ---- masked_fill: a (3, 4) causal-style mask and a (2, 1, 4) mask, both broadcast over x (2, 3, 4)
x = ramp(2, 3, 4).requires_grad_()
w = ramp(2, 3, 4, scale=1.0, shift=0.5)
add("masked_fill.x", x)
add("masked_fill.w", w)
mask_a = torch.triu(torch.ones(3, 4), 1)               # 1 above the diagonal: the future
mask_b = torch.tensor([[[1.0, 0, 0, 1]], [[0, 2.0, 0, 0]]])   # nonzero (not only 1) means True
add("masked_fill.mask_a", mask_a)
add("masked_fill.mask_b", mask_b)
for tag, mask, value in [("a", mask_a, -math.inf), ("b", mask_b, 7.5)]:
    x.grad = None
    y = x.masked_fill(mask != 0, value)
    (y.masked_fill(mask != 0, 0.0) * w).sum().backward()   # -inf * w would be -inf/NaN; filled entries carry weight 0 anyway
    add(f"masked_fill.y_{tag}", y)
    add(f"masked_fill.dx_{tag}", x.grad)
# softmax over a -inf-masked row: the attention use; masked keys get weight exactly 0
x.grad = None
p = torch.softmax(x.masked_fill(mask_a != 0, -math.inf), dim=-1)
(p * w).sum().backward()
add("masked_fill.softmax_a", p)
add("masked_fill.softmax_dx_a", x.grad)

# ---- tril / triu with offsets on x (2, 3, 4)
x = ramp(2, 3, 4)
add("tri.x", x)
for k in (-1, 0, 2):
    add(f"tri.tril_{k}", torch.tril(x, k))
    add(f"tri.triu_{k}", torch.triu(x, k))

# ---- var on x (3, 4): unbiased/biased, with and without keepdim
x = (ramp(3, 4) * 3 + 100).requires_grad_()   # a large mean: tests the two-pass sum
add("var.x", x)
w1 = ramp(3, scale=1.0, shift=0.5)
w0 = ramp(1, 4, scale=1.0, shift=0.5)
add("var.w1", w1)
add("var.w0", w0)
for unbiased in (True, False):
    tag = "unbiased" if unbiased else "biased"
    x.grad = None
    y = torch.var(x, 1, unbiased=unbiased)
    (y * w1).sum().backward()
    add(f"var.y1_{tag}", y)
    add(f"var.dx1_{tag}", x.grad)
    x.grad = None
    y = torch.var(x, 0, keepdim=True, unbiased=unbiased)
    (y * w0).sum().backward()
    add(f"var.y0_{tag}", y)
    add(f"var.dx0_{tag}", x.grad)

# ---- narrow / split / chunk gradients on x (4, 5): L = sum_k (k + 1) * sum(piece_k ** 2)
x = ramp(4, 5).requires_grad_()
add("slice.x", x)
x.grad = None
(torch.narrow(x, 1, -4, 3) ** 2).sum().backward()
add("slice.narrow_dx", x.grad)
for name, pieces in [("split", lambda: torch.split(x, 2, -1)), ("chunk", lambda: torch.chunk(x, 3, 0))]:
    x.grad = None
    ps = pieces()
    sum((k + 1) * (p ** 2).sum() for k, p in enumerate(ps)).backward()
    add(f"slice.{name}_dx", x.grad)
    add(f"slice.{name}_sizes", torch.tensor([float(p.shape[-1] if name == "split" else p.shape[0]) for p in ps]))

# ---- sqrt / rsqrt: values and dL/dx for L = sum(w * y)
x = (ramp(2, 3) + 3).requires_grad_()
w = ramp(2, 3, scale=1.0, shift=0.5)
add("root.x", x)
add("root.w", w)
for name, f in [("sqrt", torch.sqrt), ("rsqrt", torch.rsqrt)]:
    x.grad = None
    y = f(x)
    (y * w).sum().backward()
    add(f"root.{name}_y", y)
    add(f"root.{name}_dx", x.grad)


# ---- abs / clamp / minimum / maximum: values and dL/dx for L = sum(w * y)
x = ramp(3, 4).requires_grad_()
w = ramp(3, 4, scale=1.0, shift=0.5)
add("piecewise.x", x)
add("piecewise.w", w)
for name, f in [("abs", torch.abs), ("clamp", lambda t: torch.clamp(t, -1.0, 0.5)),
                ("clamp_min", lambda t: torch.clamp(t, min=-1.0)), ("clamp_max", lambda t: torch.clamp(t, max=0.5))]:
    x.grad = None
    y = f(x)
    (y * w).sum().backward()
    add(f"piecewise.{name}_y", y)
    add(f"piecewise.{name}_dx", x.grad)
b = ramp(4, scale=0.5, shift=-1.0).requires_grad_()   # (4,), broadcast against x (3, 4)
add("piecewise.b", b)
for name, f in [("maximum", torch.maximum), ("minimum", torch.minimum)]:
    x.grad = None
    b.grad = None
    y = f(x, b)
    (y * w).sum().backward()
    add(f"piecewise.{name}_y", y)
    add(f"piecewise.{name}_dx", x.grad)
    add(f"piecewise.{name}_db", b.grad)

# ---- cumsum on x (3, 4) along dim 1 and dim -2
x = ramp(3, 4).requires_grad_()
w = ramp(3, 4, scale=1.0, shift=0.5)
add("cumsum.x", x)
add("cumsum.w", w)
for dim in (1, -2):
    x.grad = None
    y = torch.cumsum(x, dim)
    (y * w).sum().backward()
    add(f"cumsum.y_{dim}", y)
    add(f"cumsum.dx_{dim}", x.grad)

# ---- stack of three (2, 3) tensors at dim 1 and at dim -1
xs = [ramp(2, 3, shift=float(k)).requires_grad_() for k in range(3)]
for k, t in enumerate(xs):
    add(f"stack.x{k}", t)
for dim in (1, -1):
    y = torch.stack(xs, dim)
    wy = ramp(*y.shape, scale=1.0, shift=0.5)
    for t in xs:
        t.grad = None
    (y * wy).sum().backward()
    add(f"stack.y_{dim}", y)
    add(f"stack.w_{dim}", wy)
    for k, t in enumerate(xs):
        add(f"stack.dx{k}_{dim}", t.grad)

# ---- where: cond (3, 1), x (3, 4), y (4,) broadcast together
cond = torch.tensor([[1.0], [0.0], [1.0]])
x = ramp(3, 4).requires_grad_()
yy = ramp(4, shift=2.0).requires_grad_()
w = ramp(3, 4, scale=1.0, shift=0.5)
add("where.cond", cond)
add("where.x", x)
add("where.y", yy)
add("where.w", w)
out = torch.where(cond != 0, x, yy)
(out * w).sum().backward()
add("where.out", out)
add("where.dx", x.grad)
add("where.dy", yy.grad)

# ---- gather along dim 1 (repeated indices) and dim 0 of x (3, 4); scatter_add along dim 0
x = ramp(3, 4).requires_grad_()
add("gather.x", x)
index1 = torch.tensor([[0, 3, 3], [2, 1, 0]])        # (2, 3): smaller than x at dim 0, repeats
index0 = torch.tensor([[2, 0, 1, 2], [0, 0, 2, 1]])  # (2, 4)
add("gather.index1", index1.double())
add("gather.index0", index0.double())
for tag, dim, index in [("1", 1, index1), ("0", -2, index0)]:
    x.grad = None
    y = torch.gather(x, dim, index)
    wy = ramp(*y.shape, scale=1.0, shift=0.5)
    (y * wy).sum().backward()
    add(f"gather.y_{tag}", y)
    add(f"gather.w_{tag}", wy)
    add(f"gather.dx_{tag}", x.grad)
src = ramp(3, 5, shift=1.0).requires_grad_()        # (3, 5): larger than index0 (2, 4)
add("scatter_add.src", src)
x.grad = None
y = torch.scatter_add(x, 0, index0, src[:2, :4])     # torch's backward needs src of index's shape
w = ramp(3, 4, scale=1.0, shift=0.5)
(y * w).sum().backward()
add("scatter_add.y", y)
add("scatter_add.w", w)
add("scatter_add.dx", x.grad)
add("scatter_add.dsrc", src.grad)                   # 0 outside the (2, 4) corner

# ---- topk on x (3, 5) without ties (torch's order of equal values is unspecified; xgrad's
# lower-index-first rule is tested by hand), sort on x (3, 5) with ties and a NaN (stable=True)
x = ramp(3, 5).requires_grad_()
add("order.topk_x", x)
wv = ramp(3, 3, scale=1.0, shift=0.5)
add("order.topk_w", wv)
for largest in (True, False):
    tag = "largest" if largest else "smallest"
    x.grad = None
    values, indices = torch.topk(x, 3, dim=-1, largest=largest)
    (values * wv).sum().backward()
    add(f"order.topk_{tag}_values", values)
    add(f"order.topk_{tag}_indices", indices.double())
    add(f"order.topk_{tag}_dx", x.grad)
x = torch.tensor([[3.0, 1.0, 3.0, -2.0, 0.5],
                  [math.nan, 2.0, -1.0, 2.0, 7.0],
                  [0.0, 0.0, 0.0, -0.5, 4.0]])
add("order.sort_x", x)
for descending in (False, True):
    tag = "descending" if descending else "ascending"
    for dim in (1, 0):
        values, indices = torch.sort(x, dim=dim, descending=descending, stable=True)
        add(f"order.sort_{tag}_{dim}_values", values)
        add(f"order.sort_{tag}_{dim}_indices", indices.double())


def cpp_number(v):
    if math.isnan(v):
        return "NAN_"
    if math.isinf(v):
        return "INF_" if v > 0 else "-INF_"
    return repr(v)


here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "core_ops_reference.hpp"), "w") as f:
    f.write("// tests/reference/core_ops_reference.hpp — GENERATED by make_core_ops_reference.py\n")
    f.write(f"// (torch {torch.__version__}, float64). Do not edit; rerun the script.\n")
    f.write("#pragma once\n\n#include <cstddef>\n#include <limits>\n#include <vector>\n\n")
    f.write("namespace core_ops_reference {\n\n")
    f.write("constexpr double INF_ = std::numeric_limits<double>::infinity();\n")
    f.write("constexpr double NAN_ = std::numeric_limits<double>::quiet_NaN();\n\n")
    f.write("struct Entry {\n    const char* name;\n    std::vector<std::size_t> shape;\n    std::vector<double> values;\n};\n\n")
    f.write("inline const std::vector<Entry>& entries() {\n    static const std::vector<Entry> e = {\n")
    for name, t in cases:
        shape = ", ".join(str(s) for s in t.shape)
        vals = ", ".join(cpp_number(v) for v in t.reshape(-1).tolist())
        f.write(f'        {{"{name}", {{{shape}}}, {{{vals}}}}},\n')
    f.write("    };\n    return e;\n}\n\n}  // namespace core_ops_reference\n")
print(f"wrote {len(cases)} tensors")
