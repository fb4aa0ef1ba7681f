#!/usr/bin/python3
"""Fits the polynomial that nn/activation.cpp uses for the exact GELU's normal CDF in float.

Run at development time, never by the tests or the build (numpy only):
    /usr/bin/python3 tests/reference/fit_gelu_mills_ratio.py [degree] [p]
It prints the coefficients as a C++ array, pasted into nn/activation.cpp under a comment naming
this script, and the errors measured below. Defaults: degree 10, p = 0.5.

What is fitted. With z = |x|/√2 and e = exp(-z²), the scaled complementary error function
(a Mills ratio of the normal distribution)
    R(z) = erfc(z) · exp(z²)            smooth and bounded on [0, ∞): R(0) = 1, R(z) ~ 1/(√π z)
gives Φ(-|x|) = ½ e R(z) for every x, one formula. In the bounded variable
    t = 1 / (1 + p z)                   t ∈ (0, 1]: t = 1 at z = 0, t → 0 as z → ∞
R is approximated as t · P(t) with P a polynomial of the given degree: the factor t carries the
1/z decay (P(0) = p/√π makes t P(t) ~ 1/(√π z)), P only the slow rest. P is fitted for RELATIVE
error over all t ∈ [0, 1], i.e. all z ≥ 0 (relative, because in the left tail Φ itself is tiny):
weighted least squares in a Chebyshev basis, then Lawson's iteration (reweighting by |error|)
toward the minimax fit. The coefficients are then rounded to float, as the C++ code holds them.

Reference: R(z) from Python's double math.erfc(z) · exp(z²) for z < 5 (erfc keeps its relative
accuracy there); for z ≥ 5 from the continued fraction of Abramowitz & Stegun 7.1.14,
    √π R(z) = 1/(z + (1/2)/(z + 1/(z + (3/2)/(z + 2/(z + ...))))),
200 terms deep (at z = 3, 4, 5, 6 the two agree to 2e-16).

Measured with the defaults (degree 10, p = 0.5), this script's output (it generated the
coefficients in nn/activation.cpp):
    max relative error of t·P(t) against R, float coefficients, double arithmetic:
        4.3e-08 on z ∈ [0, 12], 5.2e-08 on t ∈ [0, 0.2] (z ≥ 8 up to ∞)
        (1.1e-08 before the coefficients are rounded to float)
    the same, every step rounded to float (t, Horner with fma, t·P): 2.9e-07
(the float rounding of t = 1/(1 + p z) dominates: near z = 0, R's relative change is about
2.3 times t's). Degree 9 (p = 0.6) measured 1.1e-07 and 3.9e-07. tests/nn/test_activation.cpp measures
what the C++ gelu reaches: max |error| 3.8e-7 for y and 1.8e-7 for dy/dx on [-10, 10], relative
error of y at most 3.9e-6 on [-12, -3].
"""
import math
import sys

import numpy as np

SQRT_PI = math.sqrt(math.pi)


def mills_r(z):
    """R(z) = erfc(z) exp(z²) in double, z ≥ 0."""
    if z < 5:
        return math.erfc(z) * math.exp(z * z)
    f = z
    for k in range(200, 0, -1):
        f = z + (k / 2) / f
    return 1 / (SQRT_PI * f)


def target(t, p):
    """P's target R(z(t)) / t, with z = (1/t - 1)/p; at t = 0 its limit p/√π."""
    out = np.empty_like(t)
    for i, ti in enumerate(t):
        out[i] = p / SQRT_PI if ti == 0 else mills_r((1 / ti - 1) / p) / ti
    return out


def fit(degree, p, n=8001, iterations=300):
    """Near-minimax relative fit of P on t ∈ [0, 1]; returns monomial coefficients c0..c_degree."""
    t = np.linspace(0.0, 1.0, n)
    f = target(t, p)
    basis = np.polynomial.chebyshev.chebvander(2 * t - 1, degree)  # Chebyshev on [0, 1]
    w = np.full(n, 1.0 / n)
    best = (math.inf, None)
    for _ in range(iterations):
        sw = np.sqrt(w)
        a = np.linalg.lstsq(basis * (sw / f)[:, None], sw, rcond=None)[0]
        err = basis @ a / f - 1
        m = np.max(np.abs(err))
        if m < best[0]:
            best = (m, a)
        w = w * np.abs(err)  # Lawson: weight where the error is large
        w /= w.sum()
    cheb = np.polynomial.Chebyshev(best[1], domain=[0, 1])
    return cheb.convert(kind=np.polynomial.Polynomial).coef


def horner(c, t):
    acc = np.full_like(t, c[-1])
    for ck in c[-2::-1]:
        acc = acc * t + ck
    return acc


def horner_f32(c, t):
    """Horner with one rounding to float per fma (a float product is exact in double)."""
    acc = np.full_like(t, c[-1], dtype=np.float32)
    for ck in c[-2::-1]:
        acc = (acc.astype(np.float64) * t.astype(np.float64) + np.float64(ck)).astype(np.float32)
    return acc


def main():
    degree = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    p = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
    c = fit(degree, p)
    c32 = np.array(c, dtype=np.float32)
    tf = np.linspace(0.0, 1.0, 100001)
    rel_fit = np.max(np.abs(horner(c, tf) / target(tf, p) - 1))

    # Check on z ∈ [0, 12] (past z ≈ 10.1, e = exp(-z²) is 0 in float) and on t ∈ [0, 0.2].
    z = np.linspace(0.0, 12.0, 240001)
    ref = np.array([mills_r(v) for v in z])
    t = 1 / (1 + p * z)
    rel = np.max(np.abs(t * horner(c32.astype(np.float64), t) / ref - 1))
    tt = np.linspace(0.0, 0.2, 20001)
    rel_far = np.max(np.abs(horner(c32.astype(np.float64), tt) / target(tt, p) - 1))
    # Every step in float, as the C++ code does it.
    z32 = z.astype(np.float32)
    t32 = (np.float32(1) / (np.float32(1) + np.float32(p) * z32)).astype(np.float32)
    r32 = (t32 * horner_f32(c32, t32)).astype(np.float32)
    rel32 = np.max(np.abs(r32 / np.array([mills_r(float(v)) for v in z32]) - 1))

    print(f"// degree {degree}, p = {p}")
    print(f"// max relative error of the fit itself (double coefficients), t in [0, 1]: {rel_fit:.2e}")
    print(f"// max relative error, float coefficients in double arithmetic: z in [0, 12] {rel:.2e}, "
          f"t in [0, 0.2] {rel_far:.2e}")
    print(f"// max relative error, every step rounded to float, z in [0, 12]: {rel32:.2e}")
    body = ",\n    ".join(f"Batch({float(v):.9e}f)" for v in c32)
    print(f"const Batch kMillsP[{degree + 1}] = {{\n    {body}}};")


if __name__ == "__main__":
    main()
