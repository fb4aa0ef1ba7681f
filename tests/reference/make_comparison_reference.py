#!/usr/bin/python3
"""Reference values for tests/core/test_comparison.cpp (eq ne lt le gt ge, allclose, equal), computed with PyTorch.

Run at development time with Debian's torch 1.13, never by the tests:
    /usr/bin/python3 tests/reference/make_comparison_reference.py
It prints C++ initializer lists; they are pasted into tests/core/test_comparison.cpp under a comment
naming this script. Everything is float32, as xgrad_tests: where |a - b| sits next to allclose's
tolerance, the answer depends on the dtype's rounding. Inputs are printed with 9 significant digits,
which give back the same float32; NaN and ±inf are printed as the tests' kNaN and kInf.
"""
import math

import torch

DT = torch.float32
NAN, INF = math.nan, math.inf


def literal(v):
    if math.isnan(v):
        return "kNaN"
    if math.isinf(v):
        return "kInf" if v > 0 else "-kInf"
    if v == 0 and math.copysign(1, v) < 0:
        return "-0.0"  # the C++ literal -0 is the integer 0, +0.0 as a double
    return f"{v:.9g}"


def cpp(name, t):
    vals = ", ".join(literal(float(v)) for v in t.flatten().tolist())
    print(f"// {name}: shape {tuple(t.shape)}")
    print(f"const std::vector<double> {name} = {{{vals}}};")


OPS = ["eq", "ne", "lt", "le", "gt", "ge"]


def cpp_ops(name, left, right):
    """One row of 0/1 per op, in the order of OPS, each the flat (row-major) result."""
    rows = [getattr(torch, op)(left, right) for op in OPS]
    print(f"// {name}: one row per op ({' '.join(OPS)}), each of shape {tuple(rows[0].shape)}")
    print(f"const std::vector<std::vector<double>> {name} = {{")
    for row in rows:
        print(f"    {{{', '.join(str(int(v)) for v in row.flatten().tolist())}}},")
    print("};")


# ---- element-wise, same shape: every pair of special values once ----------------------------------
x = torch.tensor([0.0, -0.0, 1, NAN, INF, -INF, 2.5, -3, NAN, INF], dtype=DT)
y = torch.tensor([-0.0, 0.0, 1.5, NAN, INF, INF, 2.5, NAN, 1, 1e30], dtype=DT)
cpp("cmp_x", x)
cpp("cmp_y", y)
cpp_ops("cmp_xy", x, y)

# ---- element-wise, broadcast: a (2, 1) against b (3,) gives (2, 3) ---------------------------------
a = torch.tensor([[1.0], [NAN]], dtype=DT)
b = torch.tensor([0.5, 1.0, INF], dtype=DT)
cpp("cmp_a", a)
cpp("cmp_b", b)
cpp_ops("cmp_ab", a, b)

# ---- element-wise against a number: x OP 2.5, x OP inf, x OP nan -----------------------------------
for tag, v in [("2p5", 2.5), ("inf", INF), ("nan", NAN)]:
    cpp_ops(f"cmp_x_{tag}", x, v)

# ---- allclose, one pair at a time (torch.isclose): just inside and just outside the tolerance ------
# Defaults rtol 1e-5, atol 1e-8: allowed |p - q| = 1e-8 + 1e-5·|q|, about 1.001e-5 at q = 1.
p = torch.tensor([1 + 0.9e-5, 1 + 1.1e-5, 100.0009, 100.0011, 0.9e-8, 1.1e-8, -1 - 0.9e-5, -1 - 1.1e-5,
                  NAN, NAN, INF, -INF, INF, INF, 3.4e38], dtype=DT)
q = torch.tensor([1.0, 1.0, 100.0, 100.0, 0.0, 0.0, -1.0, -1.0,
                  NAN, 1.0, INF, -INF, -INF, 3.4e38, INF], dtype=DT)
cpp("close_p", p)
cpp("close_q", q)
cpp("isclose_pq", torch.isclose(p, q).to(DT))
cpp("isclose_pq_equal_nan", torch.isclose(p, q, equal_nan=True).to(DT))
print(f"// allclose(p, q) = {torch.allclose(p, q)}; allclose(p[:8:2], q[:8:2]) = {torch.allclose(p[:8:2], q[:8:2])}")

# Not symmetric: |b| scales the tolerance, so with rtol 0.5, atol 0: 2 is close to 4, not 4 to 2.
two, four = torch.tensor([2.0], dtype=DT), torch.tensor([4.0], dtype=DT)
print(f"// allclose(2, 4, 0.5, 0) = {torch.allclose(two, four, 0.5, 0)}; "
      f"allclose(4, 2, 0.5, 0) = {torch.allclose(four, two, 0.5, 0)}")

# Broadcast: rows (2, 1) against (3,), with the second row NaN-free.
r = torch.tensor([[1.0], [2.0]], dtype=DT)
s = torch.tensor([1.000005, 1.0, 0.999995], dtype=DT)
print(f"// allclose(r (2, 1), s (3,)) = {torch.allclose(r, s)}; allclose(r[:1], s) = {torch.allclose(r[:1], s)}")
print(f"// allclose of two empty (0,) tensors = {torch.allclose(torch.empty(0), torch.empty(0))}")

# ---- equal ------------------------------------------------------------------------------------------
print(f"// equal(x, clone of x) = {torch.equal(x, x.clone())}   (x holds NaN)")
print(f"// equal(x[:3], clone of x[:3]) = {torch.equal(x[:3], x[:3].clone())}   (0, -0, 1)")
print(f"// equal(x[:2], y[:2]) = {torch.equal(x[:2], y[:2])}   (0, -0 against -0, 0)")
print(f"// equal((3,), (1, 3) of the same values) = {torch.equal(x[:3], x[:3].reshape(1, 3))}")
print(f"// equal(int64 [1, 2, 3], [1, 2, 3]) = {torch.equal(torch.tensor([1, 2, 3]), torch.tensor([1, 2, 3]))}; "
      f"equal([1, 2, 3], [1, 2, 4]) = {torch.equal(torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4]))}")
