"""bench/page.py — the results page of bench/compare.py: the table, the runs it came from, bench/README.md.

    print_table(args, title, load, header, rows, date)   prints a run's table; with --markdown PATH
                                                         writes the page, with --merge into PATH's

A row is a tuple of cells; its workload is the first word of its first cell ("T4gen   xgrad
recompute ..." is T4gen's). With --merge the page keeps the rows of every workload this run did not
measure and the runs they came from; this run's rows replace its workloads' rows. The page lists
each run (title, machine, date, command) under the workloads whose rows it wrote:

    - Rows T7, T8:
      - Run: xgrad alone, 1 thread(s), ...
      - Date: ...

Only the standard library is used.
"""
import os
import re
import shlex
import sys


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return re.sub(r"\s+", " ", line.split(":", 1)[1].strip())
    except OSError:
        pass
    return "unknown CPU"


def table_lines(header, rows):
    """rows as a Markdown table, columns padded to their widest cell."""
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"
    return [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows]


def machine(load):
    return (f"{cpu_name()}, {os.cpu_count()} cores; load average (1 min) {load[0][0]:.2f} at start, "
            f"{load[1][0]:.2f} at end")


# Static text, not remade by this script: where T1's profile is (examples/gpt's --profile), and
# measurements made by hand (T1 at 2 threads, the AVX-512 builds, T2's layer_norm and softmax by perf).
T1_PROFILE = [
    "## T1 profile",
    "",
    "Where T1's step (the default examples/gpt model) spends its time, op by op, is measured by xgrad's",
    "own profiler: examples/gpt/README.md, \"Where a step's time goes: `--profile N`\", made by",
    "`examples/gpt/profile_table.sh` (with T 1,024 beside it, and the step's FLOPs over W5's sgemm rate).",
    "",
    "At 2 threads T1's step runs 1.78x [1.69x – 1.80x] as fast as at 1 (`bench/compare.py --only T1",
    "--scaling 2`, 3 repeats, Intel Xeon with AVX-512, 2 cores, 2026-12-04 23:13 UTC, load 1.0): a",
    "Linear's bias copy into each row of y, db's column sums and the residual add are cut over the",
    "pool's threads too.",
    "",
    "nn/activation.cpp and nn/attention/tiled.cpp are compiled for AVX-512 where the machine has it",
    "(CMakeLists.txt). Their AVX2 builds against the AVX-512 ones, alternating binaries on that Intel",
    "Xeon (1 thread, 2026-12-04 22:35-23:00 UTC): T2 gelu exact fwd+bwd 580 and 587 us → 441 and 447 us;",
    "T5's tiled kernel at T 1,024 10.28, 10.03, 10.02 ms → 9.66, 9.41, 9.32 ms.",
    "",
    "T2 layer_norm, by `perf record -g` on xgrad_bench (AMD EPYC, 2026-12-02): its forward rows 33%, the",
    "backward's dL/dw and dL/db column sums 30%, the backward's dL/dx rows 18%, the row mean",
    "(sum_double) 10%. T2 softmax: softmax_row 71% (most of it xsimd's exp), softmax_backward_row 22%.",
]


# A static measurement, not remade by this script: where T12's LoRA step spends the time its frozen
# base saves, by `perf record` on xgrad_bench (see the command in the text).
T12_PROFILE = [
    "## T12 profile",
    "",
    "Measured once by hand (AMD EPYC, 2 cores, beside other builds, load 4, 2026-12-05 16:30 UTC), not by",
    "this script: `OPENBLAS_NUM_THREADS=1 perf record -F 4000 build/bench/xgrad_bench --threads 1",
    "--benchmark_filter=T12_gpt_step_X/ --benchmark_min_time=3` for X = lora and frozen, then `perf report",
    "--no-children -n`, each symbol's samples over the timed steps. With the adapter composed (LoRA::apply:",
    "a sum, a scale and two Linear products), LoRA's step took 143 samples, the",
    "bound's (the same frozen base, no adapter) 110: the adapter costs the 33 more, 23% of LoRA's step.",
    "",
    "| what the adapter adds per step (r 8 on 16 Linears, B·T = 768 rows) | samples |",
    "|---|---|",
    "| its products: x·Aᵀ, h·Bᵀ and the four of backward, skinny (r = 8 on one side; libxsmm, OpenBLAS) | 15 |",
    "| the sum y + s·B(A x) on (B·T, out), and of the two paths' gradients of x on (B·T, in) | 6.5 |",
    "| the scale by s of B's full (B·T, out) output, and its backward | 6.4 |",
    "| copies and += of gradients; page faults on the fresh (B·T, out) arrays | 4.7; 1.7 |",
    "",
    "At d 128 the dW products a frozen base skips are small (the bound is about 1.4-1.5x the full step),",
    "so the composed adapter's own passes over (B·T, out) arrays take back most of it (LoRA about 1.1x",
    "composed). nn/lora_linear.cpp computes a",
    "Linear and its adapter as one op, `functional::lora_linear`: s is the alpha of B's gemm and every sum",
    "a gemm's beta = 1, forward and backward (dX = G W + (s·G B) A in two gemms into one array), so that",
    "the adapter adds its six skinny products and nothing else; the composed form stays, for parts and",
    "dropout, and as the tests' oracle. Measured (AMD EPYC, 2 cores, 2026-12-05 17:46 UTC, load 1.3-1.5,",
    "CPU time, three alternating runs of 1 s each of two builds of xgrad_bench, one with the fused op, one",
    "with the composed form): LoRA's step 25.5 ms composed, 23.8 ms fused (medians), 7% less; the full",
    "step, the same code in both, took 25.5-27.7 ms in one build and 29.6-31.3 ms in the other, so a",
    "ratio of separate runs moves by as much as the change. The rows above (fused) put LoRA at 1.24x",
    "[1.17x - 1.29x], 91% of the bound's steps/s in the same runs (1.36x [1.36x - 1.46x]): at d 128 even a",
    "free adapter would reach 1.3x only in the bound's better runs. What remains of the adapter is its",
    "skinny (r = 8) products, at r/d = 1/16 of their layer's product in flops but far below its speed",
    "(BLAS kernels run narrow shapes at a fraction of peak), and H = X Aᵀ saved per layer. Not measured",
    "here, for want of time: a wider model (d 256 or 384), where the dW products a frozen base skips grow",
    "as d² beside the adapter's d·r, which should move both LoRA and the bound further from the full step.",
]

# Not measured by this script: llm.c's figure for T13's shape, as the issue that set T13's goal
# reported it (llm.c's code is not ours to run in the bench), and where each run's peak lives.
T13_NOTE = [
    "## T13 memory",
    "",
    "At the same shape llm.c's train_gpt2.c peaked at 1,740 MiB while training, quoted from the issue's",
    "measurement (not measured on a machine of ours; this script does not run llm.c). xgrad's whole-run",
    "peak is its training peak: the parameters, their gradients and AdamW's moments (1,346.6 MiB) and the",
    "step's graph. The checkpoint is written tensor by tensor from the live parameters and moments",
    "(`train::save` of a `TrainingState` made from the optimizer). Saved from a copy of the moments",
    "instead (`TrainingState(model, opt.state_dict())`), the copy (673 MiB) sits beside them: the whole",
    "run then peaks at 2,111 MiB against 1,588 MiB by the last step (measured once by hand, AMD EPYC,",
    "2 cores, 2026-12-05 19:24 UTC, load 3.0, 3 steps, examples/gpt's end-of-run defaults).",
    "Where the training peak lives, from the profiler's memory timeline (`examples/gpt` at this shape",
    "with `--steps 6 --profile 1`, AMD EPYC, 2 cores, 2026-12-05 20:48 UTC, load 1.3): 1,518.6 MiB live",
    "in Arrays, 1,386 ms into the 1,485 ms step, allocated by a `linear backward` inside",
    "`loss.backward()`: the parameters, gradients and moments, with the last layers' gradients arriving",
    "while the first blocks' activations are still held; the run's peak RSS was 1,588.5 MiB.",
]

# The page's workloads in table order; a row's workload is the first word of its first cell.
WORKLOAD_ORDER = ("W1", "W2", "W3", "W4", "W5", "W6", "W7", "T1", "T2", "T3", "T4", "T4gen", "T5", "T6", "T7", "T8", "T9", "T10", "T11", "T12",
                  "T13", "T14")


def workload_of(row):
    return str(row[0]).split()[0]


def workload_rank(w):
    return WORKLOAD_ORDER.index(w) if w in WORKLOAD_ORDER else len(WORKLOAD_ORDER)


def in_table_order(rows):
    """rows sorted by workload (WORKLOAD_ORDER, unknown ones last); a workload's rows keep their order."""
    return sorted(rows, key=lambda r: workload_rank(workload_of(r)))


RUN_LIST = re.compile(r"^- Rows (.+):$")
RUN_FIELD = re.compile(r"^  - ([^:]+): (.*)$")
OLD_RUN_FIELD = re.compile(r"^- (Run|Machine|Date|Command[^:]*): (.*)$")  # a page of one run


def read_page(path, header):
    """(runs, rows) of a page this script wrote: runs as [workloads, [(label, value), ...]], rows as
    tuples of cells. Exits when the page has no table with `header`."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        sys.exit(f"compare.py: --merge cannot read {path}: {e.strerror}")
    runs, rows, in_table, old_fields = [], [], False, []
    for line in lines:
        if m := RUN_LIST.match(line):
            runs.append([[w.strip() for w in m.group(1).split(",")], []])
        elif (m := RUN_FIELD.match(line)) and runs:
            runs[-1][1].append((m.group(1), m.group(2)))
        elif m := OLD_RUN_FIELD.match(line):
            old_fields.append((m.group(1), m.group(2)))
        elif line.startswith("| "):
            cells = tuple(c.strip() for c in line.strip()[1:-1].split("|"))
            if cells == tuple(header):
                in_table = True
            elif in_table:
                rows.append(cells)
        elif in_table and not line.startswith("|"):
            in_table = False
    if not rows:
        sys.exit(f"compare.py: --merge found no table with the columns {', '.join(header)} in {path}")
    if old_fields and not runs:
        runs = [[sorted({workload_of(r) for r in rows}, key=workload_rank), old_fields]]
    return runs, rows


def merged(args, header, rows, run):
    """With --merge: the page's rows and runs with this run's workloads replaced by `rows` and `run`;
    otherwise this run alone."""
    if not args.merge:
        return rows, [run]
    old_runs, old_rows = read_page(args.markdown, header)
    mine = set(run[0])
    runs = [[[w for w in ws if w not in mine], fields] for ws, fields in old_runs]
    runs = [r for r in runs if r[0]] + [run]
    return in_table_order([r for r in old_rows if workload_of(r) not in mine] + rows), runs


# A static measurement, not remade by this script: the lesson's trainer run whole once, against which
# T8's two extrapolations can be read.
T8_LESSON_WHOLE = [
    "T8's lesson trainer run whole, once by hand (Intel Xeon, 2 cores, 2026-12-04 16:33 UTC, load 1.5-1.8,",
    "not by this script): `OPENBLAS_NUM_THREADS=1 build-bench/bench/xgrad_bench --benchmark_filter=T8whole`",
    "trained all 3,840 merges the lesson's way in 50.2 s: both extrapolations above overestimate it, the",
    "one per token read by about a fifth.",
]


def print_table(args, title, load, header, rows, date):
    """Prints the run's title, the machine and its load (start, end), then rows as a Markdown table;
    with --markdown PATH also writes PATH whole: bench/README.md is this function's output. With
    --merge, PATH keeps the rows of the workloads this run did not measure, and the runs they came
    from, each run listed with its workloads."""
    print(title)
    print(f"machine: {machine(load)}")
    print("\n".join(table_lines(header, rows)))
    if not args.markdown:
        return
    command = shlex.join(["bench/compare.py"] + sys.argv[1:])
    workloads = sorted({workload_of(r) for r in rows}, key=workload_rank)
    run = [workloads, [("Run", title), ("Machine", machine(load)), ("Date", f"{date:%Y-%m-%d %H:%M} UTC"),
                       (f"Command, from the repository root after `make bench` built `{args.build}`", f"`{command}`")]]
    rows, runs = merged(args, header, rows, run)
    run_lines = []
    for ws, fields in runs:
        run_lines.append(f"- Rows {', '.join(ws)}:")
        run_lines += [f"  - {label}: {value}" for label, value in fields]
    text = [
        "# xgrad's benchmarks: measured speed and memory",
        "",
        "Written whole by `bench/compare.py --markdown` from the runs described below; never edited by",
        "hand. A run with `--merge` replaces the rows of the workloads it measured and keeps the others'",
        "rows and runs: a row's first word, its workload, names the run it comes from. The workloads are",
        "defined in `bench/xgrad_bench.cpp` and `bench/torch_peer.py` (W6: the default `examples/char_mlp`",
        "run; W7: each matrix-product shape of T1, T5 and the BPE model's head as one call on OpenBLAS,",
        "libxsmm, BLIS and `xgrad::gemm`, each timed for --min-time / 4, xgrad alone, `bench/gemm_shapes.cpp`",
        "and `bench/w7.py`; T3: the default `examples/gpt` run and `bench/torch_gpt.py`; T4: examples/gpt's",
        "default step in several processes, `t4()` in `bench/compare.py`; T4gen:",
        "generation with and without the KV cache, `t4gen()` in `bench/compare.py` and `bench/torch_peer.py`;",
        "T5: causal attention alone, the tiled kernel against the fused one and PyTorch's composed form;",
        "T6: examples/gpt at block 1,024 with and without `--checkpoint-blocks`, and `bench/torch_gpt.py`,",
        "`t6()` in `bench/compare.py`; T7: the row-sparse embedding update against the dense one, and T8:",
        "the byte-pair tokenizer of `text/` on the whole KJV, xgrad alone, `t7_rows()` and `t8_rows()` in",
        "`bench/compare.py`; T9: ZeRO stages 1 and 2 against DDP at 2 ranks under mpirun, xgrad alone:",
        "examples/gpt's step, the bytes each rank sends, the memory per rank, and the all-reduce alone",
        "(`bench/allreduce_order.cpp`), `bench/t9.py`; T10: the KJV tokenized and written as llm.c token",
        "shards, and training windows read from the memory-mapped shard, xgrad alone, `bench/data_shards.cpp`",
        "and `t10_rows()` in `bench/compare.py`; T11: examples/gpt's default step at 1 and 2 threads, on the",
        "machine as it is and beside a busy process on one core, xgrad alone, `bench/t11.py`; T12: T1's step",
        "with LoRA (r 8 on attention and MLP, the rest frozen) beside the full fine-tuning step, and the",
        "optimizer report's bytes of each, xgrad alone, `bench/t12.py`; T13: examples/gpt at GPT-2 small's",
        "shape, 3 steps, and `bench/torch_gpt.py` at the same shape, each process's peak memory by its last",
        "step and over the whole run, saving included, `bench/t13.py`; T14: T1's step with no profiler beside",
        "the same step under core/profiler.hpp's Profiler, and with --baseline-build T1 of a tree built before",
        "the profiler beside this tree's, xgrad alone, `bench/t14.py`).",
        "",
        *run_lines,
        "",
        *table_lines(header, rows),
        "",
        "Units: steps/s are the workload's steps per second, higher is better (W1-W4, T1, T7, T11 and T12: a",
        "training step, forward, backward and update; T2: one op's forward and backward); tokens/s are T4's",
        "characters trained per second (12 windows of 64 per step, between steps 10 and steps - 10), T4gen's",
        "new tokens generated per second (512 or 448 per generation; PyTorch's 512); GB/s and MB are 10^9",
        "bytes/s and 10^6 bytes; W5's GFLOP/s count 2·m·k·n per matmul, W7's 2·M·N·K per gemm call (its",
        "PyTorch column holds the three libraries' medians, its ratio the fastest one's over xgrad's);",
        "MiB are 2^20 bytes of peak resident",
        "memory (GNU time's %M, W6 and T6; T13: getrusage's ru_maxrss read inside each process); T5's KiB",
        "are 2^10 bytes saved for backward by one forward",
        "(malloc's bytes in use after it, minus before, minus the output); MB/s are 10^6 bytes of text per",
        "second (T8: the KJV's bytes over the time of one whole encoding or decoding); s are seconds of",
        "wall time (T8: one whole training, split included; T10: one whole training, encoding and write,",
        "summed); T10's GB/s are the int64 ids of x and y a sampler call delivers (2·B·T·8 bytes) over",
        "its wall time; ms are T9's milliseconds per step, us/call",
        "microseconds per collective call, B bytes. A ratio is xgrad's figure over PyTorch's, or",
        "over the figure the row names (for time ratios, the lower the better). A cell gives the median",
        "over the repeats and [min – max].",
        "\"met\" is yes when every repeat reaches the target, no when none does, mixed otherwise.",
        "",
        "T4gen at 512 tokens: the last 64 pass the block, where the cropped window moves every token and",
        "an exact cache must rerun all of it (examples/gpt/generate.hpp). Counting positions run through",
        "the model, recompute runs 161,568 and any exact cache at least 33,279 (the prompt, 447 single",
        "tokens, 64 windows of 512), so no exact cache reaches more than 4.9x recompute on this workload;",
        "at 448 tokens, which end at the block, the bound is 252x.",
        "",
        *T8_LESSON_WHOLE,
        "",
        *T1_PROFILE,
        "",
        *T12_PROFILE,
        "",
        *T13_NOTE,
    ]
    with open(args.markdown, "w") as f:
        f.write("\n".join(text) + "\n")
    print(f"compare.py: wrote {args.markdown}", file=sys.stderr)
