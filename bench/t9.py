"""bench/t9.py — workload T9 of bench/compare.py: ZeRO against DDP at W = 2 ranks (mpirun -np 2,
1 thread each), xgrad alone.

    measure(args, rep, tools)   one repeat: three examples/gpt runs for speed, three for memory,
                                and bench/allreduce_order for the collective alone
    rows(runs, tools)           the T9 rows of the table

Legend: W = 2 ranks, Ψ the model's parameters (elements), float32 (4 B each), AdamW (exp_avg and
exp_avg_sq: 8 B per element). Bytes per rank (distributed/zero.hpp): DDP 16Ψ; ZeRO stage 1
4Ψ + 4Ψ + 8Ψ/W; stage 2 4Ψ + (4Ψ + 8Ψ)/W.

  speed    examples/gpt's default step (B 12 windows of T 64) under --zero 0 (DDP), 1 and 2, in an
           order that rotates with the repeat; tokens/s between steps 10 and steps - 10
           (compare.py's steady_rate), and the "data parallel" line each run ends with: the
           collectives' ms per step and the gradient bytes each rank contributed per step
  memory   --d 512 --n-layer 4 --n-head 8, batch 4, 5 steps, under each --zero, the two ranks
           started by one MPMD mpirun, each under GNU time (/usr/bin/time -f %M), so that both
           ranks' peak RSS is read; the optimizer memory table's total row (printed by rank 0:
           its parameter, gradient and state bytes, and under ZeRO the state on all ranks)
  collective  bench/allreduce_order: the default GPT's gradient buffer summed over the 2 ranks by
           MPI_Allreduce and by the rank-ordered reduce-scatter + all-gather, alternating

`tools` carries compare.py's helpers: run, steady_rate, fmt_range, met_at_least, MPIRUN, MPI_ENV.
Only the standard library is used.
"""
import os
import re
import statistics
import tempfile

TOKENS_PER_STEP = 12 * 64
W = 2
MEMORY_MODEL = ["--d", "512", "--n-layer", "4", "--n-head", "8", "--batch-size", "4", "--steps", "5",
                "--eval-every", "5"]
QUICK = ["--eval-batches", "1", "--sample", "0", "--threads", "1"]
SYNC_LINE = re.compile(r"^data parallel\s+.*? ([\d.]+) ms per step \(([\d.]+)% of a step\), (\d+) bytes from each rank",
                       re.M)
ORDER_LINE = re.compile(r"MPI_Allreduce ([\d.]+) us .*?, rank order ([\d.]+) us")
ZERO = (0, 1, 2)
NAME = {0: "DDP (--zero 0)", 1: "ZeRO stage 1", 2: "ZeRO stage 2"}


def total_row(stdout):
    """The optimizer memory table's total row: numel, param, grad and state bytes (rank 0's), and
    under ZeRO the state bytes on all ranks (else the same as rank 0's)."""
    cells = next(line for line in stdout.splitlines() if line.startswith("total ")).split()
    numel, param, grad, state = int(cells[1]), int(cells[2]), int(cells[3]), int(cells[7])
    every = int(cells[-1]) if cells[-1].isdigit() else state
    return {"numel": numel, "param": param, "grad": grad, "state": state, "state_all": every}


def speed_run(args, tools, gpt, tmp, zero):
    steps = args.t4_steps
    out, _ = tools["run"](tools["MPIRUN"] + ["-np", str(W), gpt, "--steps", str(steps), "--eval-every", str(steps),
                                             "--zero", str(zero), "--out", os.path.join(tmp, f"speed{zero}")] + QUICK,
                          tools["MPI_ENV"])
    sync = SYNC_LINE.search(out)
    return {"tokens": tools["steady_rate"](out, steps) * TOKENS_PER_STEP, "sync_ms": float(sync.group(1)),
            "bytes": int(sync.group(3))}


def memory_run(tools, gpt, tmp, zero):
    """One MPMD mpirun: rank r runs under /usr/bin/time -o rss<r>; returns the total row and both peaks."""
    out_dir = os.path.join(tmp, f"memory{zero}")
    rss = [os.path.join(tmp, f"rss{r}") for r in range(W)]
    cmd = list(tools["MPIRUN"])
    for r in range(W):
        cmd += (([":"] if r else []) + ["-np", "1", "/usr/bin/time", "-f", "%M", "-o", rss[r], gpt] + MEMORY_MODEL
                + QUICK + ["--zero", str(zero), "--out", out_dir])
    out, _ = tools["run"](cmd, tools["MPI_ENV"])
    r = total_row(out)
    for k, path in enumerate(rss):
        with open(path) as f:
            r[f"rss{k}"] = int(f.read().split()[-1]) * 1024  # %M is in KiB
    return r


def measure(args, rep, tools):
    """One repeat of T9: {"speed": {zero: ...}, "memory": {zero: ...}, "mpi_us", "ordered_us", "floats"}."""
    gpt = os.path.join(args.build, "examples", "gpt")
    order_bin = os.path.join(args.build, "bench", "allreduce_order")
    r = {"speed": {}, "memory": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for zero in ZERO[rep % 3:] + ZERO[:rep % 3]:
            r["speed"][zero] = speed_run(args, tools, gpt, tmp, zero)
        for zero in ZERO:
            r["memory"][zero] = memory_run(tools, gpt, tmp, zero)
    r["floats"] = r["speed"][0]["bytes"] // 4  # the default GPT's gradient buffer, float32
    out, _ = tools["run"](tools["MPIRUN"] + ["-np", str(W), order_bin, str(r["floats"]), "20", "20"], tools["MPI_ENV"])
    m = ORDER_LINE.search(out)
    r["mpi_us"], r["ordered_us"] = float(m.group(1)), float(m.group(2))
    return r


def speed_rows(runs, tools):
    fmt_range, met = tools["fmt_range"], tools["met_at_least"]
    tok = lambda v: f"{v:,.0f}"
    rows = [("T9 examples/gpt default step, mpirun -np 2 (1 thread each): DDP (--zero 0)", "tokens/s",
             fmt_range([g["speed"][0]["tokens"] for g in runs], tok), "", "", "", "")]
    for zero in (1, 2):
        slower = [g["speed"][0]["tokens"] / g["speed"][zero]["tokens"] for g in runs]  # step time ZeRO / DDP
        rows.append((f"T9   --zero {zero}; ratio ZeRO step time / DDP step time", "tokens/s",
                     fmt_range([g["speed"][zero]["tokens"] for g in runs], tok), "",
                     fmt_range(slower, lambda v: f"{v:.2f}x"), "<= 1.05x", met([1 / s for s in slower], 1 / 1.05)))
    ms = lambda z: fmt_range([g["speed"][z]["sync_ms"] for g in runs], lambda v: f"{v:.1f}")
    rows.append(("T9   collectives per step as gpt times them, DDP / --zero 1 / --zero 2 (ZeRO's include its "
                 "sharded AdamW step and clipping)", "ms", f"{ms(0)} / {ms(1)} / {ms(2)}", "", "", "", ""))
    sent = [[g["speed"][z]["bytes"] for z in ZERO] for g in runs]
    same = all(len(set(s)) == 1 for s in sent)
    rows.append(("T9   gradient bytes per step per rank, DDP's all-reduce / ZeRO 1 / ZeRO 2 (reduce-scatter + "
                 "all-gather); at W = 2 a rank sends 4Ψ - its segment, then its segment: 4Ψ in both", "B",
                 " / ".join(f"{b:,}" for b in sent[0]), "", "", "equal", "yes" if same else "no"))
    return rows


def memory_rows(runs, tools):
    fmt_range = tools["fmt_range"]
    mib = lambda v: f"{v / 2**20:,.2f}"
    psi = runs[0]["memory"][0]["numel"]
    expected = {0: (8 * psi, 16 * psi), 1: (8 * psi / W, 8 * psi + 8 * psi / W), 2: (8 * psi / W, 4 * psi + 12 * psi / W)}
    formula = {0: ("8Ψ", "16Ψ"), 1: ("8Ψ/W", "8Ψ + 8Ψ/W"), 2: ("8Ψ/W", "4Ψ + 12Ψ/W")}
    rows = []
    for zero in ZERO:
        m = runs[0]["memory"][zero]  # bytes are the same in every repeat; peak RSS is not
        state1 = m["state_all"] - m["state"] if zero else m["state"]
        grad1 = m["grad"] if zero < 2 else m["param"] - m["grad"]  # stage 2: rank 1's own parameters, the rest
        total = m["param"] + m["grad"] + m["state"]
        head = (f"T9 memory, --d 512 --n-layer 4 --n-head 8 (Ψ = {psi:,}), B 4, 5 steps, W 2: {NAME[zero]}"
                if zero == 0 else f"T9   memory: {NAME[zero]}")
        rows.append((f"{head}; optimizer state per rank 0 / rank 1, ratio to {formula[zero][0]} = "
                     f"{mib(expected[zero][0])} MiB", "MiB", f"{mib(m['state'])} / {mib(state1)}", "",
                     f"{m['state'] / expected[zero][0]:.3f}x", "", ""))
        rows.append((f"T9     gradients per rank 0 / rank 1 after the step; parameters + gradients + state on rank 0, "
                     f"ratio to {formula[zero][1]} = {mib(expected[zero][1])} MiB", "MiB",
                     f"{mib(m['grad'])} / {mib(grad1)}; {mib(total)}", "", f"{total / expected[zero][1]:.3f}x", "", ""))
        rows.append(("T9     peak RSS, rank 0 / rank 1 (GNU time; rank 0 also gathers and writes the checkpoint)",
                     "MiB", f"{fmt_range([g['memory'][zero]['rss0'] for g in runs], mib)} / "
                            f"{fmt_range([g['memory'][zero]['rss1'] for g in runs], mib)}", "", "", "", ""))
    return rows


def rows(runs, tools):
    """The T9 rows: speed and bytes sent, memory per rank, the collective alone."""
    fmt_range = tools["fmt_range"]
    us = lambda v: f"{v:,.0f}"
    n = runs[0]["floats"]
    ratio = [g["ordered_us"] / g["mpi_us"] for g in runs]
    return speed_rows(runs, tools) + memory_rows(runs, tools) + [
        (f"T9 the collective alone, W 2: {n:,} float32 ({4 * n / 1e6:.2f} MB, the default GPT's gradients) summed by "
         "the rank-ordered reduce-scatter + all-gather; ratio to MPI_Allreduce", "us/call",
         fmt_range([g["ordered_us"] for g in runs], us), "", fmt_range(ratio, lambda v: f"{v:.2f}x"), "", ""),
        ("T9   MPI_Allreduce, the same buffer, alternating with it (bench/allreduce_order)", "us/call",
         fmt_range([g["mpi_us"] for g in runs], us), "", "", "", "")]
