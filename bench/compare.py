#!/usr/bin/python3
"""bench/compare.py — run xgrad and PyTorch side by side on workloads W1–W6, T1–T6 and T4gen, and xgrad
alone on W7 (bench/w7.py: the gemm libraries per product shape), T7, T8, T9, T10 (bench/data_shards:
token shards), T11 (bench/t11.py: the pool beside a busy process), T12 (bench/t12.py: a LoRA step
against a full fine-tuning step) and T14 (bench/t14.py: the profiler's cost), and print one table.

    make bench                              # builds build-bench/, then runs this with the defaults
    make bench ARGS="--threads 2"           # both sides on 2 threads
    make bench ARGS="--scaling 2"           # xgrad alone at 1 and 2 threads: its own speed-up
    /usr/bin/python3 bench/compare.py --build build-bench --repeats 3 --only W1,W5
    /usr/bin/python3 bench/compare.py --only T7,T8 --markdown bench/README.md --merge   # new rows into the page
    /usr/bin/python3 bench/compare.py --only T9 --markdown bench/README.md --merge      # ZeRO vs DDP (bench/t9.py)
    /usr/bin/python3 bench/compare.py --only T10 --markdown bench/README.md --merge     # token shards

Each repeat runs, workload by workload, xgrad's Google Benchmark binary (bench/xgrad_bench.cpp)
and then bench/torch_peer.py on the same workload, so the two figures of a ratio are measured
seconds apart under the same machine load. The table gives the median figure over the repeats,
and each ratio as median [min – max]. W6 runs the real default examples/char_mlp training and the
same run in PyTorch, and reads each process's peak RSS from the kernel (wait4's ru_maxrss).

Only the standard library is used here; torch_peer.py needs Debian's python3-torch
(`bash .ci/install-deps --bench` installs it; `make bench` does that first).
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import t9  # bench/t9.py: ZeRO against DDP under mpirun
import t11  # bench/t11.py: the pool at 1 and 2 threads, idle and beside a busy process
import t12  # bench/t12.py: a LoRA step against a full fine-tuning step, and their bytes
import t14  # bench/t14.py: the profiler's cost on T1's step, off and on
import w7  # bench/w7.py: OpenBLAS, libxsmm, BLIS and xgrad::gemm on each product shape
from page import WORKLOAD_ORDER, print_table  # bench/page.py: the results page

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"  # Debian's, which has python3-torch (a pyenv python3 on PATH may not)
MB = 1024 * 1024

# workload → (regex for xgrad_bench's --benchmark_filter, torch_peer.py --workload)
GROUPS = {
    "W1": (r"^W1_", "W1"),
    "W2": (r"^W2_", "W2"),
    "W3": (r"^W3_", "W3"),
    "W4": (r"^W4_", "W4"),
    "W5": (r"^W5_", "W5"),
    "T1": (r"^T1_", "T1"),
    "T2": (r"^T2_", "T2"),
}
W4_SIZES = (1000, 10000, 100000, 1000000)
W4_ONEHOT = (1000, 10000)
# T2: single ops, forward + backward, at the GPT example's shapes (B 12, T 64, d 128, H 4, hd 32)
T2_OPS = (("T2_gelu_none", "T2 gelu exact (12, 64, 512) fwd+bwd"),
          ("T2_gelu_tanh", "T2 gelu tanh (12, 64, 512) fwd+bwd"),
          ("T2_layer_norm", "T2 layer_norm (12, 64, 128), w and b, fwd+bwd"),
          ("T2_softmax", "T2 softmax over the last dim of (12, 4, 64, 64) fwd+bwd"),
          ("T2_sdpa_causal", "T2 causal attention q,k,v (12, 4, 64, 32) fwd+bwd"))


def run(cmd, env_extra, rusage=False):
    """Runs cmd; returns (stdout, its peak RSS in bytes if rusage else None). Exits on failure.

    The peak RSS comes from GNU time (/usr/bin/time -f %M), which forks and execs the command
    itself: Linux keeps a process's peak RSS across exec, so a child forked straight from this
    Python process would report at least this process's own size (about 13 MiB) as its peak."""
    env = dict(os.environ, **env_extra)
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        full = ["/usr/bin/time", "-f", "%M", "-o", rss.name] + cmd if rusage else cmd
        p = subprocess.run(full, capture_output=True, env=env, text=True)
        if p.returncode != 0:
            sys.exit(f"compare.py: {' '.join(cmd)} failed with exit code {p.returncode}:\n{p.stderr[-3000:]}")
        return p.stdout, (int(rss.read().split()[-1]) * 1024 if rusage else None)  # %M is in KiB


def xgrad_group(args, regex, soft=False):
    """Seconds per iteration of each xgrad_bench benchmark matching regex. soft: {} instead of
    exiting when the binary is missing, fails, or has no benchmark matching regex."""
    cmd = [os.path.join(args.build, "bench", "xgrad_bench"), "--threads", str(args.threads),
           f"--benchmark_filter={regex}", f"--benchmark_min_time={args.min_time}", "--benchmark_format=json"]
    env = {"OPENBLAS_NUM_THREADS": "1"}  # set_num_threads keeps it at 1
    if not soft:
        out, _ = run(cmd, env)
    elif not os.access(cmd[0], os.X_OK):
        return {}
    else:
        p = subprocess.run(cmd, capture_output=True, env=dict(os.environ, **env), text=True)
        out = p.stdout if p.returncode == 0 and p.stdout.strip() else '{"benchmarks": []}'
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    res = {}
    for b in json.loads(out)["benchmarks"]:
        name = re.sub(r"/iterations:\d+", "", b["name"].removesuffix("/real_time"))
        res[name] = b["real_time"] * scale[b["time_unit"]]  # seconds per step
    return res


def torch_group(args, workload):
    out, _ = run([PYTHON, os.path.join(HERE, "torch_peer.py"), "--workload", workload, "--threads",
                  str(args.threads), "--min-time", str(args.min_time)],
                 {"OMP_NUM_THREADS": str(args.threads), "OPENBLAS_NUM_THREADS": str(args.threads)})
    return {r["name"]: r["seconds_per_step"] for r in map(json.loads, out.splitlines())}


# T5: causal attention forward + backward on q, k, v (1, 4, T, 32): xgrad_bench's tiled kernel
# (T5_attention_tiled/T) and fused one (T5_attention_fused/T) against torch_peer.py's composed
# attention (nanoGPT's non-flash path), and the bytes one forward keeps for its backward
# (xgrad_bench's counter saved_bytes: malloc's bytes in use after the forward, less before, less
# the output).
T5_SIZES = (64, 256, 1024, 4096)


def t5(args):
    """One repeat: {"tiled"|"fused"|"torch": {T: steps/s}, "saved_tiled"|"saved_fused": {T: bytes}}."""
    cmd = [os.path.join(args.build, "bench", "xgrad_bench"), "--threads", str(args.threads),
           "--benchmark_filter=^T5_", f"--benchmark_min_time={args.min_time}", "--benchmark_format=json"]
    out, _ = run(cmd, {"OPENBLAS_NUM_THREADS": "1"})
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    r = {key: {} for key in ("tiled", "fused", "torch", "saved_tiled", "saved_fused")}
    for b in json.loads(out)["benchmarks"]:
        kind, T = re.match(r"T5_attention_(\w+)/(\d+)", b["name"]).groups()
        r[kind][int(T)] = 1 / (b["real_time"] * scale[b["time_unit"]])
        r["saved_" + kind][int(T)] = b["saved_bytes"]
    for name, seconds in torch_group(args, "T5").items():
        r["torch"][int(name.split("/")[1])] = 1 / seconds
    return r


def t5_rows(runs):
    """The T5 rows: per T, the tiled kernel against PyTorch, against the fused kernel, and the saved bytes."""
    sps = lambda v: f"{v:,.1f}"
    ratio = lambda v: f"{v:.2f}x"
    col = lambda key, T, f=sps: fmt_range([g[key][T] for g in runs], f)
    rows = []
    for T in T5_SIZES:
        vs_torch = [g["tiled"][T] / g["torch"][T] for g in runs]
        vs_fused = [g["tiled"][T] / g["fused"][T] for g in runs]
        share = [g["saved_tiled"][T] / g["saved_fused"][T] for g in runs]
        fused_target = 1.5 if T == 1024 else 1.0 if T == 64 else None
        rows += [(f"T5 causal attention (1, 4, {T}, 32) fwd+bwd: tiled vs PyTorch's composed", "steps/s",
                  col("tiled", T), col("torch", T), fmt_range(vs_torch, ratio), ">= 2x" if T == 1024 else "",
                  met_at_least(vs_torch, 2) if T == 1024 else ""),
                 (f"T5   T={T}: the fused kernel; ratio tiled / fused", "steps/s",
                  col("fused", T), "", fmt_range(vs_fused, ratio),
                  f">= {fused_target}x" if fused_target else "",
                  met_at_least(vs_fused, fused_target) if fused_target else ""),
                 (f"T5   T={T}: bytes saved for backward, tiled / fused", "KiB",
                  f"{col('saved_tiled', T, lambda v: f'{v / 1024:,.1f}')} / {col('saved_fused', T, lambda v: f'{v / 1024:,.1f}')}",
                  "", fmt_range(share, lambda v: f"1/{1 / v:,.0f}" if v > 0 else "0"),
                  "<= 1/16" if T == 1024 else "",
                  ("yes" if max(share) <= 1 / 16 else "no" if min(share) > 1 / 16 else "mixed") if T == 1024 else "")]
    return rows


def w6(args):
    """Peak RSS of the default char_mlp run in xgrad and in PyTorch, and what xgrad accounts for."""
    env = {"OPENBLAS_NUM_THREADS": str(args.threads), "OMP_NUM_THREADS": str(args.threads)}
    char_mlp = os.path.join(args.build, "examples", "char_mlp")
    stop = ["--stop-after", str(args.w6_steps)] if args.w6_steps else []
    r = {}
    _, r["xgrad_baseline"] = run([char_mlp, "--help"], env, rusage=True)
    with tempfile.TemporaryDirectory() as out_dir:
        t0 = time.perf_counter()
        _, r["xgrad_peak"] = run([char_mlp, "--out", out_dir, "--threads", str(args.threads)] + stop, env, rusage=True)
        r["xgrad_seconds"] = time.perf_counter() - t0
    _, r["torch_baseline"] = run([PYTHON, "-c", "import torch"], env, rusage=True)
    t0 = time.perf_counter()
    _, r["torch_peak"] = run([PYTHON, os.path.join(HERE, "torch_peer.py"), "--char-mlp-run", "--threads",
                              str(args.threads)] + stop, env, rusage=True)
    r["torch_seconds"] = time.perf_counter() - t0
    out, _ = run([os.path.join(args.build, "bench", "memory_accounting")], env)
    acc = json.loads(out)
    r.update(acc)
    r["budget"] = 1.3 * acc["accounted_bytes"] + r["xgrad_baseline"]
    return r


def t3(args):
    """The whole default examples/gpt run in xgrad and in PyTorch (bench/torch_gpt.py): wall time
    of each process and its peak RSS."""
    env = {"OPENBLAS_NUM_THREADS": str(args.threads), "OMP_NUM_THREADS": str(args.threads)}
    r = {}
    with tempfile.TemporaryDirectory() as out_dir:
        t0 = time.perf_counter()
        _, r["xgrad_peak"] = run([os.path.join(args.build, "examples", "gpt"), "--out", out_dir, "--threads",
                                  str(args.threads)], env, rusage=True)
        r["xgrad_seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, r["torch_peak"] = run([PYTHON, os.path.join(HERE, "torch_gpt.py"), "--threads", str(args.threads)], env,
                             rusage=True)
    r["torch_seconds"] = time.perf_counter() - t0
    return r


# T4: mpirun with Open MPI's defaults (shared memory with its single-copy mode: in containers that
# refuse it, add "--mca", "btl_vader_single_copy_mechanism", "none"), root allowed (containers, CI).
MPIRUN = ["mpirun"]
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OPENBLAS_NUM_THREADS": "1"}
STEP_LINE = re.compile(r"^step\s+(\d+)/\d+\s.*?([\d.]+) steps/s", re.M)
ALLREDUCE_LINE = re.compile(r"all-reduce ([\d.]+) ms per step \(([\d.]+)% of a step\)")


def steady_rate(stdout, steps):
    """Steps per second between the progress lines of step 10 and step `steps` - 10, so that
    neither the start (data, first allocations) nor the final evaluation is counted. Each line
    gives the mean rate since the start, r_k = k / t_k, so t_k = k / r_k."""
    rates = {int(k): float(r) for k, r in STEP_LINE.findall(stdout.replace("\r", "\n"))}  # mpirun: a tty
    a, b = 10, steps - 10
    return (b - a) / (b / rates[b] - a / rates[a])


def t4(args, rep):
    """examples/gpt's default step as tokens/s: 1 process on 1 thread, mpirun -np 2 (1 thread
    each), 1 process on 2 threads, and the machine's ceiling: two independent 1-process runs at
    once (their aggregate). The order of the four rotates with the repeat."""
    gpt = os.path.join(args.build, "examples", "gpt")
    steps, tokens_per_step = args.t4_steps, 12 * 64  # the default batch: B 12 windows of T 64
    with tempfile.TemporaryDirectory() as tmp:
        def cmd(threads, out):
            return [gpt, "--steps", str(steps), "--eval-every", str(steps), "--eval-batches", "1", "--sample", "0",
                    "--threads", str(threads), "--out", os.path.join(tmp, out)]

        def one():
            return steady_rate(run(cmd(1, "one"), MPI_ENV)[0], steps)

        def two_threads():
            return steady_rate(run(cmd(2, "two_threads"), MPI_ENV)[0], steps)

        def two_ranks():
            out = run(MPIRUN + ["-np", "2"] + cmd(1, "mpi"), MPI_ENV)[0]
            share = ALLREDUCE_LINE.search(out)
            return steady_rate(out, steps), float(share.group(2)) / 100 if share else float("nan")

        def ceiling():
            env = dict(os.environ, **MPI_ENV)
            procs = [subprocess.Popen(cmd(1, f"alone{i}"), stdout=subprocess.PIPE, text=True, env=env) for i in range(2)]
            outs = [p.communicate()[0] for p in procs]
            if any(p.returncode for p in procs):
                sys.exit("compare.py: T4's side-by-side gpt runs failed")
            return sum(steady_rate(o, steps) for o in outs)

        r = {}
        cases = [("one", one), ("two_threads", two_threads), ("two_ranks", two_ranks), ("ceiling", ceiling)]
        for name, f in cases[rep % 4:] + cases[:rep % 4]:
            r[name] = f()
        r["two_ranks"], r["allreduce_share"] = r["two_ranks"]
        return {k: (v * tokens_per_step if k != "allreduce_share" else v) for k, v in r.items()}


# T4gen: generating n tokens after a 64-token prompt, B 1, with the model of torch_peer.py's
# t4gen() (nanoGPT's layout, L 4, H 4, d 128, block 512, V 65). n = 512 is the workload (PyTorch
# runs it too); it passes the block after 448 tokens, from where an exact cache is rebuilt every
# token (examples/gpt/generate.hpp), so xgrad also runs n = 448, which ends at the block.
T4GEN_NEW, T4GEN_IN_BLOCK, T4GEN_PROMPT, T4GEN_BLOCK = 512, 448, 64, 512


def mean_cached_positions(prompt, new, block):
    """New token k (k = 0..new-1) is sampled after attending over n_k = min(prompt + k, block)
    positions; a KV cache reads the keys and values of all n_k. Returns the mean of n_k."""
    return sum(min(prompt + k, block) for k in range(new)) / new


def t4gen(args):
    """xgrad_bench's T4gen_kv_cache/n and T4gen_recompute/n (one generation of n tokens per
    iteration; None while the binary has no such benchmark), then torch_peer.py --workload T4gen:
    nanoGPT's generate, the model's byte counts and the copy bandwidth, in one process.

    The bandwidth bound of a cached token: it must read every weight once and the keys and values
    of every cached position, bytes = weights + kv_per_position · mean cached length, so at most
    bandwidth / bytes tokens per second come out of memory. Its n is 448: a token past the block
    reruns the whole window, which no cache avoids."""
    xg = xgrad_group(args, r"^T4gen_", soft=True)
    out, _ = run([PYTHON, os.path.join(HERE, "torch_peer.py"), "--workload", "T4gen", "--threads",
                  str(args.threads), "--min-time", str(args.min_time)],
                 {"OMP_NUM_THREADS": str(args.threads), "OPENBLAS_NUM_THREADS": str(args.threads)})
    peer = {r["name"]: r for r in map(json.loads, out.splitlines())}
    gen, copy = peer["T4gen_torch_recompute"], peer["T4gen_copy_bandwidth"]
    mean_cached = mean_cached_positions(T4GEN_PROMPT, T4GEN_IN_BLOCK, T4GEN_BLOCK)
    kv_bytes = gen["kv_bytes_per_position"] * mean_cached
    bytes_per_token = gen["weight_bytes"] + kv_bytes
    r = {f"xgrad_{k}_{n}": (n / xg[f"T4gen_{k}/{n}"] if f"T4gen_{k}/{n}" in xg else None)
         for k in ("kv_cache", "recompute") for n in (T4GEN_NEW, T4GEN_IN_BLOCK)}
    r.update(torch_recompute=T4GEN_NEW / gen["seconds_per_step"], bandwidth=copy["bytes_per_s"],
             copy_bytes=copy["copy_bytes"], weight_bytes=gen["weight_bytes"], kv_bytes=kv_bytes,
             kv_bytes_per_position=gen["kv_bytes_per_position"], mean_cached=mean_cached,
             bound=copy["bytes_per_s"] / bytes_per_token)
    return r


def t4gen_rows(runs):
    """The T4gen rows of the table; xgrad's cells read "not built" while its benchmarks are missing."""
    tok = lambda v: f"{v:,.1f}"
    ratio = lambda v: f"{v:.2f}x"
    built = lambda key: all(g[key] is not None for g in runs)
    col = lambda key, f=tok: fmt_range([g[key] for g in runs], f) if built(key) else "not built"
    div = lambda a, b, f=ratio, missing="": (fmt_range([g[a] / g[b] for g in runs], f) if built(a) and built(b)
                                             else missing)
    met = lambda a, b, target: (met_at_least([g[a] / g[b] for g in runs], target) if built(a) and built(b) else "")
    g0 = runs[0]
    n, m = T4GEN_NEW, T4GEN_IN_BLOCK
    rows = [(f"T4gen generate {n} after 64 tokens (L4 H4 d128 block 512 V65): KV cache vs nanoGPT's generate",
             "tokens/s", col(f"xgrad_kv_cache_{n}"), col("torch_recompute"),
             div(f"xgrad_kv_cache_{n}", "torch_recompute"), "", ""),
            ("T4gen   xgrad recompute vs PyTorch", "tokens/s", col(f"xgrad_recompute_{n}"), col("torch_recompute"),
             div(f"xgrad_recompute_{n}", "torch_recompute"), "", ""),
            (f"T4gen   xgrad KV cache / xgrad recompute, {n} tokens (the last 64 rebuild the cache)", "ratio",
             div(f"xgrad_kv_cache_{n}", f"xgrad_recompute_{n}", missing="not built"), "", "",
             ">= 10x", met(f"xgrad_kv_cache_{n}", f"xgrad_recompute_{n}", 10)),
            (f"T4gen   xgrad KV cache / xgrad recompute, {m} tokens (ending at the block)", "ratio",
             div(f"xgrad_kv_cache_{m}", f"xgrad_recompute_{m}", missing="not built"), "", "",
             ">= 10x", met(f"xgrad_kv_cache_{m}", f"xgrad_recompute_{m}", 10)),
            (f"T4gen   copy bandwidth: {g0['copy_bytes'] // MB} MiB numpy copy, 1 thread, bytes read + written",
             "GB/s", col("bandwidth", lambda v: f"{v / 1e9:.1f}"), "", "", "", ""),
            (f"T4gen   bound, {m} tokens: bandwidth / (weights {g0['weight_bytes'] / 1e6:.2f} MB + KV cache "
             f"{g0['kv_bytes_per_position']:,} B x {g0['mean_cached']:.1f} mean cached positions)",
             "tokens/s", col("bound"), "", "", "", ""),
            (f"T4gen   xgrad KV cache / bound, {m} tokens", "ratio",
             div(f"xgrad_kv_cache_{m}", "bound", lambda v: f"{100 * v:.0f}%", "not built"),
             "", "", ">= 50%", met(f"xgrad_kv_cache_{m}", "bound", 0.5))]
    return rows


# T6: long context. examples/gpt at block 1,024 and batch 4 for 50 steps (warmup 0: the default 100
# is longer than the run; 1 evaluation batch, no sampling, so that the steps dominate), with and
# without --checkpoint-blocks, and bench/torch_gpt.py's same run; then one step at the default
# block 64 and batch 12 for the graph report alone.
T6_STEPS = 50
GRAPH_RATIO = re.compile(r"the graph is ([\d.]+)x the parameters")


def t6(args):
    """steps/s (between steps 10 and 40: steady_rate), peak RSS (bytes) and the graph report's
    graph / parameter bytes of each examples/gpt run; PyTorch's steps/s and peak RSS."""
    env = {"OPENBLAS_NUM_THREADS": str(args.threads), "OMP_NUM_THREADS": str(args.threads)}
    gpt = os.path.join(args.build, "examples", "gpt")
    quick = ["--warmup", "0", "--sample", "0", "--eval-batches", "1", "--threads", str(args.threads)]
    r = {}
    for name, flag in (("plain", []), ("ckpt", ["--checkpoint-blocks"])):
        with tempfile.TemporaryDirectory() as out_dir:
            out, r[f"{name}_peak"] = run([gpt, "--out", out_dir, "--block-size", "1024", "--batch-size", "4",
                                          "--steps", str(T6_STEPS)] + quick + flag, env, rusage=True)
            r[f"{name}_rate"] = steady_rate(out, T6_STEPS)
            r[f"{name}_graph_1024"] = float(GRAPH_RATIO.search(out).group(1))
            out, _ = run([gpt, "--out", out_dir, "--steps", "1"] + quick + flag, env)
            r[f"{name}_graph_64"] = float(GRAPH_RATIO.search(out).group(1))
    out, r["torch_peak"] = run([PYTHON, os.path.join(HERE, "torch_gpt.py"), "--block-size", "1024", "--batch-size",
                                "4", "--iters", str(T6_STEPS), "--warmup", "0", "--eval-batches", "1", "--threads",
                                str(args.threads)], env, rusage=True)
    r["torch_rate"] = json.loads(out.splitlines()[-1])["steps_per_s"]
    return r


def t6_rows(runs):
    """The T6 rows: speed and peak RSS against PyTorch, graph memory, the price of recomputing."""
    col = lambda key, f: fmt_range([r[key] for r in runs], f)
    rate, mib, times = (lambda v: f"{v:.3f}"), (lambda v: f"{v / MB:.1f}"), (lambda v: f"{v:.2f}x")
    rows = [("T6 examples/gpt block 1024 B4, 50 steps: steps/s", "steps/s", col("plain_rate", rate),
             col("torch_rate", rate), fmt_range([r["plain_rate"] / r["torch_rate"] for r in runs], times), "", ""),
            ("T6   --checkpoint-blocks", "steps/s", col("ckpt_rate", rate), col("torch_rate", rate),
             fmt_range([r["ckpt_rate"] / r["torch_rate"] for r in runs], times), "", "")]
    for name, label in (("plain", "T6   peak RSS"), ("ckpt", "T6   peak RSS, --checkpoint-blocks")):
        ratio = [r[f"{name}_peak"] / r["torch_peak"] for r in runs]
        rows.append((label, "MiB", col(f"{name}_peak", mib), col("torch_peak", mib), fmt_range(ratio, times),
                     "< 1x" if name == "ckpt" else "", ("yes" if max(ratio) < 1 else "no" if min(ratio) >= 1 else "mixed")
                     if name == "ckpt" else ""))
    for T, B in ((64, 12), (1024, 4)):
        for name, flag in (("plain", ""), ("ckpt", ", --checkpoint-blocks")):
            v = [r[f"{name}_graph_{T}"] for r in runs]
            goal = T == 64 and name == "ckpt"
            rows.append((f"T6   graph after the first forward / parameters, block {T} B{B}{flag}", "ratio",
                         fmt_range(v, lambda x: f"{x:.1f}x"), "", "", "<= 6x" if goal else "",
                         ("yes" if max(v) <= 6 else "no" if min(v) > 6 else "mixed") if goal else ""))
    slow = [r["plain_rate"] / r["ckpt_rate"] for r in runs]
    rows.append(("T6   checkpointed step time / plain step time, block 1024", "ratio", fmt_range(slow, times), "", "",
                 "<= 1.4x", "yes" if max(slow) <= 1.4 else "no" if min(slow) > 1.4 else "mixed"))
    return rows


# T7: an untied embedding step (V 8,192, d 128, AdamW) on 12 windows of 64 IDs of the KJV under an
# 8,192-token BPE, the row-sparse gradient with the lazy AdamW against the dense gradient; xgrad
# alone (xgrad_bench's T7_embedding_dense and T7_embedding_sparse, counter rows_touched).
# T8: the byte-pair tokenizer (text/) on the whole KJV, xgrad alone: the fast trainer at 4,096
# tokens, the lesson's trainer for a = 16 and b = 32 merges, encode and decode (counters
# text_bytes and tokens). The lesson's time for all M = 3,840 merges is extrapolated from t_a and
# t_b, its times for a and b merges (the split included), two ways:
#   per merge:        t_a + (M − a) · (t_b − t_a) / (b − a)
#   per token read:   t_a + (R_M − R_a) · (t_b − t_a) / (R_b − R_a)
# where R_m = Σ n_i over rounds i < m, n_i the text's length in tokens when round i counts its
# pairs (xgrad_bench's counters tokens_read and tokens_read_all). Each round reads the whole text,
# which shrinks as merges are made, so the first way overestimates; the second weighs each round
# by the tokens it reads.
T8_MERGES, T8_LESSON_MERGES = 4096 - 256, (16, 32)


def xgrad_benchmarks(args, regex, binary="xgrad_bench"):
    """The benchmarks of bench/`binary` matching regex, by name: each its JSON record (counters
    included) plus "seconds", the real time of one iteration. Exits naming a benchmark skipped with
    an error (T7 and T8 when the KJV cannot be read). Only xgrad_bench takes --threads: data_shards
    runs on one thread."""
    path = os.path.join(args.build, "bench", binary)
    if not os.access(path, os.X_OK):
        sys.exit(f"compare.py: no {path}: build it (cmake --build {args.build} --target {binary})")
    threads = ["--threads", str(args.threads)] if binary == "xgrad_bench" else []
    cmd = [path] + threads + [f"--benchmark_filter={regex}", f"--benchmark_min_time={args.min_time}",
                              "--benchmark_format=json"]
    out, _ = run(cmd, {"OPENBLAS_NUM_THREADS": "1"})
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    res = {}
    for b in json.loads(out)["benchmarks"]:
        name = re.sub(r"/iterations:\d+", "", b["name"].removesuffix("/real_time"))
        if b.get("error_occurred"):
            sys.exit(f"compare.py: {binary} {name} was skipped: {b.get('error_message', '(no message)')}")
        res[name] = dict(b, seconds=b["real_time"] * scale[b["time_unit"]])
    if not res:
        sys.exit(f"compare.py: {binary} has no benchmark matching {regex} (xgrad_bench built without examples/?)")
    return res


def t7_rows(runs):
    """The T7 rows: the dense step, then the sparse one with the ratio sparse / dense."""
    dense = [1 / r["T7_embedding_dense"]["seconds"] for r in runs]
    sparse = [1 / r["T7_embedding_sparse"]["seconds"] for r in runs]
    ratio = [s / d for s, d in zip(sparse, dense)]
    k = statistics.median(r["T7_embedding_sparse"]["rows_touched"] for r in runs)
    sps = lambda v: f"{v:,.1f}"
    return [("T7 embedding V8192 d128 untied, 12 x 64 IDs of the KJV (8,192-token BPE), AdamW: dense gradient",
             "steps/s", fmt_range(dense, sps), "", "", "", ""),
            (f"T7   row-sparse gradient ({k:,.1f} of 8,192 rows per batch) + lazy AdamW; ratio sparse / dense",
             "steps/s", fmt_range(sparse, sps), "", fmt_range(ratio, lambda v: f"{v:.2f}x"), ">= 3x",
             met_at_least(ratio, 3))]


def t8_rows(runs):
    """The T8 rows: training (fast; the lesson's, extrapolated two ways), encoding and decoding speed."""
    a, b = T8_LESSON_MERGES
    r0 = runs[0]["T8_train_fast"]
    mb, tokens = r0["text_bytes"] / 1e6, r0["tokens"]
    fast = [r["T8_train_fast"]["seconds"] for r in runs]
    ta = [r[f"T8_train_lesson/{a}"]["seconds"] for r in runs]
    tb = [r[f"T8_train_lesson/{b}"]["seconds"] for r in runs]
    reads = lambda r, m: r[f"T8_train_lesson/{m}"]["tokens_read"]
    per_merge = [x + (T8_MERGES - a) * (y - x) / (b - a) for x, y in zip(ta, tb)]
    per_token = [x + (r[f"T8_train_lesson/{a}"]["tokens_read_all"] - reads(r, a)) * (y - x) / (reads(r, b) - reads(r, a))
                 for x, y, r in zip(ta, tb, runs)]
    speed = lambda name: [r[name]["text_bytes"] / 1e6 / r[name]["seconds"] for r in runs]
    enc, dec = speed("T8_encode"), speed("T8_decode")
    sec = lambda v: f"{v:,.3f}" if v < 10 else f"{v:,.1f}"
    mbs = lambda v: f"{v:,.1f}"
    of_fast = lambda xs: fmt_range([x / f for x, f in zip(xs, fast)], lambda v: f"{v:,.0f}x")
    return [(f"T8 tokenizer: train 4,096 tokens on the KJV ({mb:.2f} MB, GPT-4's split), fast trainer", "s",
             fmt_range(fast, sec), "", "", "<= 2 s", "yes" if max(fast) <= 2 else "no" if min(fast) > 2 else "mixed"),
            (f"T8   the lesson's trainer: {a} and {b} merges timed, per merge to {T8_MERGES:,}; ratio to the fast one", "s",
             fmt_range(per_merge, sec), "", of_fast(per_merge), "", ""),
            (f"T8   the same, per token read (the text shrinks from {mb:.2f} M to {tokens / 1e6:.2f} M tokens)",
             "s", fmt_range(per_token, sec), "", of_fast(per_token), "", ""),
            (f"T8   encode the KJV ({tokens:,.0f} tokens, {r0['text_bytes'] / tokens:.2f} bytes per token)", "MB/s",
             fmt_range(enc, mbs), "", "", ">= 20 MB/s", met_at_least(enc, 20)),
            ("T8   decode those tokens", "MB/s", fmt_range(dec, mbs), "", "", "", "")]


# T10: token data (data/) on the whole KJV, xgrad alone (bench/data_shards.cpp). The text to llm.c
# shards: text::train_tokenizer at V 4,096 (3 iterations), its encode of the whole KJV (3), and
# data::write_train_val_shards writing train.bin and val.bin (uint16 ids after a 1,024-byte header,
# nanoGPT's 90/10 split, through io::AtomicFile with its fsyncs, in the temporary directory; 5); the
# goal, train + encode + write <= 1 s, is on the sum of the three means. Then
# data::WindowSampler::next() on the memory-mapped train.bin, which the process wrote just before
# (so it is in the page cache), at B 12 T 64 (examples/gpt's default) and B 64 T 1,024: its bytes
# are the int64 ids of x and y it delivers, 2·B·T·8 per call, over the call's real time (the
# binary's own bytes_per_second is over CPU time), against the goal of 1 GB/s on one core.
T10_SAMPLER_SHAPES = ((12, 64), (64, 1024))
T10_HEADER_BYTES = 256 * 4  # llm.c's shard header: 256 int32


def t10_rows(runs):
    """The T10 rows: tokenize + write against 1 s, then the sampler's GB/s per shape against 1 GB/s."""
    r0 = runs[0]
    mb, tokens = r0["Tokenize_train"]["bytes_of_text"] / 1e6, int(r0["Tokenize_encode"]["tokens"])
    train_tokens = 9 * tokens // 10
    secs = lambda name: [r[name]["seconds"] for r in runs]
    train, encode, write = secs("Tokenize_train"), secs("Tokenize_encode"), secs("Shards_write")
    total = [a + b + c for a, b, c in zip(train, encode, write)]
    sec = lambda v: f"{v:.3f}"
    rows = [(f"T10 token shards: the KJV ({mb:.2f} MB) to llm.c shards, V 4,096: train the tokenizer + encode + "
             "write train.bin and val.bin", "s", fmt_range(total, sec), "", "", "<= 1 s",
             "yes" if max(total) <= 1 else "no" if min(total) > 1 else "mixed"),
            ("T10   of which: train the tokenizer (GPT-4's split)", "s", fmt_range(train, sec), "", "", "", ""),
            (f"T10   encode the KJV ({tokens:,} tokens)", "s", fmt_range(encode, sec), "", "", "", ""),
            ("T10   write the shards (uint16 ids, 90/10 split, fsyncs included)", "s", fmt_range(write, sec), "", "", "",
             "")]
    for i, (B, T) in enumerate(T10_SAMPLER_SHAPES):
        gbs = [2 * B * T * 8 / r[f"Sampler/{B}/{T}"]["seconds"] / 1e9 for r in runs]
        label = (f"T10 WindowSampler::next, B {B} T {T:,}, from the memory-mapped train.bin "
                 f"({(T10_HEADER_BYTES + 2 * train_tokens) / 1e6:.2f} MB, in the page cache): int64 ids of x and y "
                 "delivered, 1 thread" if i == 0 else f"T10   B {B} T {T:,}, the same")
        rows.append((label, "GB/s", fmt_range(gbs, lambda v: f"{v:,.1f}"), "", "", ">= 1 GB/s", met_at_least(gbs, 1)))
    return rows


def met_at_least(values, target):
    """yes when every repeat reaches target, no when none does, mixed otherwise."""
    return "yes" if min(values) >= target else "no" if max(values) < target else "mixed"


def met_at_most(values, target):
    """yes when every repeat stays at or below target, no when none does, mixed otherwise."""
    return "yes" if max(values) <= target else "no" if min(values) > target else "mixed"


def fmt_range(values, f):
    vals = sorted(values)
    med = statistics.median(vals)
    return f(med) if len(vals) == 1 else f"{f(med)} [{f(vals[0])} – {f(vals[-1])}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build-bench"), help="CMake build dir with bench/ built")
    ap.add_argument("--threads", type=int, default=1, help="threads for both sides (default 1)")
    ap.add_argument("--repeats", type=int, default=3, help="full repeats; ratios get min and max (default 3)")
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds of timed steps per benchmark (default 1)")
    ap.add_argument("--only", default="W1,W2,W3,W4,W5,W6,W7,T1,T2,T3,T4,T4gen,T5,T6,T7,T8,T9,T10,T11,T12,T14",
                    help="comma-separated workloads (default all)")
    ap.add_argument("--baseline-build", metavar="DIR",
                    help="T14: a build of the tree before the profiler, whose T1 is timed beside this one's")
    ap.add_argument("--t4-steps", type=int, default=200, help="T4, T9: steps of each examples/gpt run (default 200)")
    ap.add_argument("--w6-steps", type=int, default=0,
                    help="W6: stop both char_mlp runs after this many steps (default 0: the whole default run)")
    ap.add_argument("--json", help="also write every raw measurement to this file")
    ap.add_argument("--markdown", metavar="PATH",
                    help="also write the whole results page to PATH (bench/README.md is written this way)")
    ap.add_argument("--merge", action="store_true",
                    help="with --markdown: keep PATH's rows of the workloads not in --only, and their runs")
    ap.add_argument("--scaling", type=int, default=0, metavar="N",
                    help="instead: xgrad alone at 1 and at N threads, side by side (see scaling())")
    args = ap.parse_args()
    only = [w.strip() for w in args.only.split(",") if w.strip()]
    if unknown := [w for w in only if w not in WORKLOAD_ORDER]:
        sys.exit(f"compare.py: --only names unknown workloads {', '.join(unknown)}; known: {', '.join(WORKLOAD_ORDER)}")
    if args.merge and (not args.markdown or args.scaling):
        sys.exit("compare.py: --merge needs --markdown PATH, and not --scaling")
    if args.scaling:
        if args.scaling < 2:
            sys.exit("compare.py: --scaling N needs N >= 2 (it compares N threads with 1)")
        return scaling(args, only)

    date, load_start = datetime.datetime.now(datetime.timezone.utc), os.getloadavg()
    xg = [dict() for _ in range(args.repeats)]  # per repeat: benchmark name → seconds per step
    pt = [dict() for _ in range(args.repeats)]
    mem, gpt_runs, dp_runs, gen_runs = [], [], [], []
    attention_runs, t6_runs, t7_runs, t8_runs, t9_runs, t10_runs, t11_runs, w7_runs = [], [], [], [], [], [], [], []
    t12_runs, t14_runs = [], []
    tools = dict(run=run, steady_rate=steady_rate, fmt_range=fmt_range, met_at_least=met_at_least, met_at_most=met_at_most,
                 xgrad_benchmarks=xgrad_benchmarks, MPIRUN=MPIRUN, MPI_ENV=MPI_ENV)
    for rep in range(args.repeats):
        for w in only:
            print(f"[repeat {rep + 1}/{args.repeats}] {w} (load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
            if w == "W6":
                mem.append(w6(args))
                continue
            if w == "T4":
                dp_runs.append(t4(args, rep))
                continue
            if w == "T4gen":
                gen_runs.append(t4gen(args))
                continue
            if w == "T5":
                attention_runs.append(t5(args))
                continue
            if w == "T6":
                t6_runs.append(t6(args))
                continue
            if w == "T7":
                t7_runs.append(xgrad_benchmarks(args, "^T7_"))
                continue
            if w == "T8":
                t8_runs.append(xgrad_benchmarks(args, "^T8_"))
                continue
            if w == "T12":
                t12_runs.append(xgrad_benchmarks(args, "^T12_"))
                continue
            if w == "T14":
                t14_runs.append(t14.measure(args, tools))
                continue
            if w == "T9":
                t9_runs.append(t9.measure(args, rep, tools))
                continue
            if w == "T10":
                t10_runs.append(xgrad_benchmarks(args, ".", binary="data_shards"))
                continue
            if w == "T11":
                t11_runs.append(t11.measure(args, rep, tools))
                continue
            if w == "W7":
                w7_runs.append(w7.measure(args, tools))
                continue
            if w == "T3":
                if os.path.exists(os.path.join(args.build, "examples", "gpt")):
                    gpt_runs.append(t3(args))
                else:
                    print("T3 skipped: no examples/gpt in the build", file=sys.stderr)
                continue
            regex, peer = GROUPS[w]
            xg[rep].update(xgrad_group(args, regex))
            pt[rep].update(torch_group(args, peer))
    load_end = os.getloadavg()

    rows = []  # (workload, metric, xgrad, pytorch, ratio, target, met)

    def speed_row(label, name, target=None):
        """steps/s of both sides; ratio = xgrad steps/s over PyTorch's."""
        xs = [1 / r[name] for r in xg]
        ps = [1 / r[name] for r in pt]
        ratios = [x / p for x, p in zip(xs, ps)]
        met = "" if target is None else met_at_least(ratios, target)
        rows.append((label, "steps/s", fmt_range(xs, lambda v: f"{v:,.1f}"), fmt_range(ps, lambda v: f"{v:,.1f}"),
                     fmt_range(ratios, lambda v: f"{v:.2f}x"), "" if target is None else f">= {target}x", met))

    if "W1" in only:
        speed_row("W1 char-MLP small (V27 b3 d10 h200 B32, Adam)", "W1_char_mlp_small", 10)
    if "W2" in only:
        speed_row("W2 char-MLP medium (V27 b8 d64 h512 B256, Adam)", "W2_char_mlp_medium", 1.0)
    if "W3" in only:
        speed_row("W3 embedding V50257 d768 P512, dense Adam", "W3_embedding_dense", 2)
        speed_row("W3 embedding V50257 d768 P512, sparse: lazy Adam vs SparseAdam", "W3_embedding_sparse", 2)
    if "W4" in only:
        for V in W4_SIZES:
            speed_row(f"W4 sparse step d256 P512, V={V:,}", f"W4_sparse_vs_V/{V}")
        for V in W4_ONEHOT:
            speed_row(f"W4 one-hot reference path, V={V:,}", f"W4_onehot_vs_V/{V}")
        # Against V = 1e5, not 1e3: at V = 1e3 the whole table (θ, m, v: 3 MiB) sits in cache, so a
        # ratio against it would measure the cache, not the algorithm.
        scale_x = [r["W4_sparse_vs_V/1000000"] / r["W4_sparse_vs_V/100000"] for r in xg]
        scale_p = [r["W4_sparse_vs_V/1000000"] / r["W4_sparse_vs_V/100000"] for r in pt]
        rows.append(("W4 step time at V=1e6 / at V=1e5", "time ratio", fmt_range(scale_x, lambda v: f"{v:.2f}"),
                     fmt_range(scale_p, lambda v: f"{v:.2f}"), "", "xgrad <= 1.3",
                     "yes" if max(scale_x) <= 1.3 else "no" if min(scale_x) > 1.3 else "mixed"))
    if "W5" in only:
        flops = 3.0 * 2.0 * 256 * 512 * 512
        gx = [flops / r["W5_matmul_xgrad"] / 1e9 for r in xg]
        graw = [flops / r["W5_matmul_raw_sgemm"] / 1e9 for r in xg]
        gp = [flops / r["W5_matmul"] / 1e9 for r in pt]
        rows.append(("W5 matmul (256x512)(512x512) fwd+bwd", "GFLOP/s", fmt_range(gx, lambda v: f"{v:.1f}"),
                     fmt_range(gp, lambda v: f"{v:.1f}"), fmt_range([x / p for x, p in zip(gx, gp)], lambda v: f"{v:.2f}x"),
                     "", ""))
        eff = [x / r for x, r in zip(gx, graw)]
        rows.append(("W5 xgrad matmul / raw cblas_sgemm (same process)", "GFLOP/s", fmt_range(graw, lambda v: f"raw {v:.1f}"),
                     "", fmt_range(eff, lambda v: f"{100 * v:.0f}%"), ">= 85%",
                     met_at_least(eff, 0.85)))
    if "T1" in only and all("T1_gpt_step" in r for r in xg) and all("T1_gpt_step" in r for r in pt):
        speed_row("T1 GPT training step (L4 H4 d128 T64 B12 V73, AdamW, clip)", "T1_gpt_step", 1.3)
    if "T2" in only:
        for name, label in T2_OPS:
            if all(name in r for r in xg) and all(name in r for r in pt):
                speed_row(label, name, 1.5)
    if mem:
        rows.append(("W6 char_mlp default run: peak RSS", "MiB", fmt_range([m["xgrad_peak"] / MB for m in mem], lambda v: f"{v:.1f}"),
                     fmt_range([m["torch_peak"] / MB for m in mem], lambda v: f"{v:.1f}"),
                     fmt_range([m["xgrad_peak"] / m["torch_peak"] for m in mem], lambda v: f"{v:.2f}x"), "< 1x",
                     "yes" if all(m["xgrad_peak"] < m["torch_peak"] for m in mem) else "no"))
        rows.append(("W6   process baseline (xgrad: char_mlp --help; PyTorch: import torch)", "MiB",
                     fmt_range([m["xgrad_baseline"] / MB for m in mem], lambda v: f"{v:.1f}"),
                     fmt_range([m["torch_baseline"] / MB for m in mem], lambda v: f"{v:.1f}"), "", "", ""))
        m0 = mem[0]
        rows.append(("W6   accounted: data {:.1f} + model {:.2f} + activations {:.1f} MiB".format(
                        m0["data_bytes"] / MB, (m0["param_bytes"] + m0["grad_bytes"] + m0["state_bytes"]) / MB,
                        max(m0["train_activation_bytes"], m0["eval_activation_bytes"]) / MB),
                     "MiB", f"{m0['accounted_bytes'] / MB:.1f}", "", "", "", ""))
        fit = [m["xgrad_peak"] / m["budget"] for m in mem]
        rows.append(("W6   peak RSS / (1.3 x accounted + baseline)", "ratio", fmt_range(fit, lambda v: f"{v:.2f}"), "", "",
                     "<= 1", "yes" if max(fit) <= 1 else "no" if min(fit) > 1 else "mixed"))
        rows.append(("W6   wall time of the run", "s", fmt_range([m["xgrad_seconds"] for m in mem], lambda v: f"{v:.1f}"),
                     fmt_range([m["torch_seconds"] for m in mem], lambda v: f"{v:.1f}"), "", "", ""))

    if w7_runs:
        rows += w7.rows(w7_runs, tools)
    if gpt_runs:
        speed = [g["torch_seconds"] / g["xgrad_seconds"] for g in gpt_runs]
        rows.append(("T3 examples/gpt default run (2,000 steps): wall time", "s",
                     fmt_range([g["xgrad_seconds"] for g in gpt_runs], lambda v: f"{v:.1f}"),
                     fmt_range([g["torch_seconds"] for g in gpt_runs], lambda v: f"{v:.1f}"),
                     fmt_range(speed, lambda v: f"{v:.2f}x faster"), "> 1x faster",
                     "yes" if min(speed) > 1 else "no" if max(speed) <= 1 else "mixed"))
        rss = [g["xgrad_peak"] / g["torch_peak"] for g in gpt_runs]
        rows.append(("T3   peak RSS", "MiB", fmt_range([g["xgrad_peak"] / MB for g in gpt_runs], lambda v: f"{v:.1f}"),
                     fmt_range([g["torch_peak"] / MB for g in gpt_runs], lambda v: f"{v:.1f}"),
                     fmt_range(rss, lambda v: f"{v:.2f}x"), "< 1x",
                     "yes" if max(rss) < 1 else "no" if min(rss) >= 1 else "mixed"))
    if dp_runs:
        tok = lambda v: f"{v:,.0f}"
        base = [d["one"] for d in dp_runs]
        for key, label in (("one", "T4 examples/gpt step, 1 process x 1 thread"),
                           ("two_threads", "T4   1 process x 2 threads"),
                           ("two_ranks", "T4   mpirun -np 2, 1 thread each"),
                           ("ceiling", "T4   ceiling: 2 independent 1-process runs at once (sum)")):
            vals = [d[key] for d in dp_runs]
            rows.append((label, "tokens/s", fmt_range(vals, tok), "",
                         "" if key == "one" else fmt_range([v / b for v, b in zip(vals, base)], lambda v: f"{v:.2f}x of 1"),
                         "", ""))
        eff = [d["two_ranks"] / d["ceiling"] for d in dp_runs]
        rows.append(("T4   mpirun -np 2 / ceiling", "ratio", fmt_range(eff, lambda v: f"{100 * v:.0f}%"), "", "",
                     ">= 90%", met_at_least(eff, 0.9)))
        rows.append(("T4   gradient all-reduce's share of a 2-rank step", "%",
                     fmt_range([100 * d["allreduce_share"] for d in dp_runs], lambda v: f"{v:.1f}%"), "", "", "", ""))
    if gen_runs:
        rows += t4gen_rows(gen_runs)
    if attention_runs:
        rows += t5_rows(attention_runs)
    if t6_runs:
        rows += t6_rows(t6_runs)
    if t7_runs:
        rows += t7_rows(t7_runs)
    if t8_runs:
        rows += t8_rows(t8_runs)
    if t9_runs:
        rows += t9.rows(t9_runs, tools)
    if t10_runs:
        rows += t10_rows(t10_runs)
    if t11_runs:
        rows += t11.rows(t11_runs, tools)
    if t12_runs:
        rows += t12.rows(t12_runs, tools)
    if t14_runs:
        rows += t14.rows(t14_runs, tools)
    sides = "xgrad alone" if set(only) <= {"W7", "T7", "T8", "T9", "T10", "T11", "T12", "T14"} else f"xgrad vs PyTorch {pt_version()}"
    print_table(args, f"{sides}, {args.threads} thread(s), {args.repeats} repeat(s), "
                f"{args.min_time:g} s of timed steps per benchmark; median [min – max] over the repeats",
                (load_start, load_end), ("workload", "unit", "xgrad", "PyTorch", "xgrad/PyTorch", "target", "met"),
                rows, date)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "xgrad": xg, "pytorch": pt, "w6": mem, "t3": gpt_runs, "t4": dp_runs,
                       "t4gen": gen_runs, "t5": attention_runs, "t6": t6_runs, "t7": t7_runs, "t8": t8_runs,
                       "t9": t9_runs, "t10": t10_runs, "t11": t11_runs, "t12": t12_runs, "t14": t14_runs, "w7": w7_runs, "load": [load_start, load_end]}, f, indent=1)


# The targets for xgrad's own speed-up at 2 threads: T1 and W2 at least 1.5x their
# 1-thread steps/s, and no workload slower than at 1 thread.
SCALING_TARGETS = {"T1_gpt_step": 1.5, "W2_char_mlp_medium": 1.5}


def scaling(args, only):
    """xgrad at 1 thread and at N threads (`--threads`, i.e. set_num_threads: xgrad's pool, with
    OpenBLAS on one thread), every group of xgrad_bench in --only (W6 and T3, whole runs, are
    left out), the two runs of a group one right after the other in each repeat. Prints
    steps/s at each count and the speed-up with its target."""
    groups = [w for w in only if w in GROUPS]
    runs = {1: [dict() for _ in range(args.repeats)], args.scaling: [dict() for _ in range(args.repeats)]}
    date, load_start = datetime.datetime.now(datetime.timezone.utc), os.getloadavg()
    for rep in range(args.repeats):
        for w in groups:
            print(f"[repeat {rep + 1}/{args.repeats}] {w} at 1 and {args.scaling} threads (load {os.getloadavg()[0]:.1f})",
                  file=sys.stderr, flush=True)
            # alternate which count runs first, so that neither always gets the fresher machine
            for t in (list(runs) if rep % 2 == 0 else list(runs)[::-1]):
                runs[t][rep].update(xgrad_group(argparse.Namespace(**{**vars(args), "threads": t}), GROUPS[w][0]))
    load_end = os.getloadavg()
    one, many = runs[1], runs[args.scaling]
    names = [n for n in one[0] if all(n in r for r in one + many)]
    rows = []
    for name in names:
        s1 = [1 / r[name] for r in one]
        sn = [1 / r[name] for r in many]
        ratios = [b / a for a, b in zip(s1, sn)]
        target = SCALING_TARGETS.get(name, 1.0)
        met = met_at_least(ratios, target)
        rows.append((name, fmt_range(s1, lambda v: f"{v:,.1f}"), fmt_range(sn, lambda v: f"{v:,.1f}"),
                     fmt_range(ratios, lambda v: f"{v:.2f}x"), f">= {target}x", met))
    print_table(args, f"xgrad at 1 and {args.scaling} threads, {args.repeats} repeat(s), {args.min_time:g} s of timed steps "
                f"per benchmark; median [min – max] over the repeats", (load_start, load_end),
                ("xgrad_bench benchmark", "steps/s, 1 thread", f"steps/s, {args.scaling} threads",
                 f"{args.scaling} threads / 1", "target", "met"), rows, date)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"scaling": args.scaling, "runs": {str(t): r for t, r in runs.items()},
                       "load": [load_start, load_end]}, f, indent=1)


def pt_version():
    out = subprocess.run([PYTHON, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    return out.stdout.strip() or "(not importable)"


if __name__ == "__main__":
    main()
