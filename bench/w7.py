"""bench/w7.py — workload W7 of bench/compare.py: every matrix-product shape of T1, T5 and the BPE
model's head on four libraries, xgrad alone (bench/gemm_shapes.cpp, which says what is timed).

    measure(args, tools)   one repeat: the whole of bench/gemm_shapes, GFLOP/s by library and shape
    rows(runs, tools)      the W7 rows of the table, one per shape

Legend: M × N × K with C (M, N) = op(A) (M, K) · op(B) (K, N); NT = A·Bᵀ (a Linear's forward,
attention's q·kᵀ), NN = A·B, TN = Aᵀ·B (a weight's gradient). GFLOP/s count 2·M·N·K per call.
One row per shape: xgrad::gemm's GFLOP/s in the xgrad column; the medians of OpenBLAS, libxsmm
and BLIS in the next; then the fastest library's name and its GFLOP/s over xgrad's.

Each of the 168 benchmarks (42 shapes, 4 libraries) runs --min-time / 4 seconds: a repeat takes
a little over a minute at the default --min-time of 1 s, the check of every product against a
double-precision one included. `tools` carries compare.py's helpers: run and fmt_range.
Only the standard library is used.
"""
import json
import os
import re
import statistics

LIBRARIES = ("openblas", "libxsmm", "blis")
NAMES = {"openblas": "OpenBLAS", "libxsmm": "libxsmm", "blis": "BLIS", "xgrad": "xgrad"}
BENCH_NAME = re.compile(r"^W7/(\w+)/(\d+x\d+x\d+_[NT]{2})")


def measure(args, tools):
    """One repeat: {shape: {"uses": label, library: GFLOP/s}} over every shape of gemm_shapes."""
    binary = os.path.join(args.build, "bench", "gemm_shapes")
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"compare.py: W7 needs {binary}: install libxsmm-dev and libblis-dev "
                         "(bash .ci/install-deps --bench) and rebuild with -DXGRAD_BUILD_BENCH=ON")
    out, _ = tools["run"]([binary, f"--benchmark_min_time={args.min_time / 4}", "--benchmark_format=json"],
                          {"OPENBLAS_NUM_THREADS": "1", "BLIS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    res = {}
    for b in json.loads(out)["benchmarks"]:
        lib, shape = BENCH_NAME.match(b["name"]).groups()
        res.setdefault(shape, {"uses": b.get("label", "")})[lib] = b["GFLOPs"]
    return res


def rows(runs, tools):
    """One W7 row per shape, in gemm_shapes' order."""
    fmt_range = tools["fmt_range"]
    gf = lambda v: f"{v:.1f}"
    out = []
    for shape, first in runs[0].items():
        med = {lib: statistics.median(r[shape][lib] for r in runs) for lib in LIBRARIES}
        best = max(LIBRARIES, key=med.get)
        m, n, k = shape.split("_")[0].split("x")
        ops = shape.split("_")[1]
        out.append((f"W7 gemm {m} x {n} x {k} {ops}: {first['uses']}", "GFLOP/s",
                    fmt_range([r[shape]["xgrad"] for r in runs], gf),
                    " / ".join(f"{NAMES[lib]} {gf(med[lib])}" for lib in LIBRARIES),
                    f"{NAMES[best]} " + fmt_range([r[shape][best] / r[shape]["xgrad"] for r in runs],
                                                   lambda v: f"{v:.2f}x"), "", ""))
    return out
