"""bench/t14.py — workload T14 of bench/compare.py: the profiler's cost on T1's step.

    measure(args, tools)   one repeat: xgrad_bench's ^T14_ (T1's step off and under a profiler,
                           side by side in one process), then, with --baseline-build, T1's step
                           of that tree and of this one, one after the other
    rows(runs, tools)      the T14 rows of the table

Off, an op pays one relaxed atomic load (core/profiler.hpp), and every array block one relaxed
add to the live-bytes counter: the baseline is the same step built from a tree without the
profiler (`--baseline-build DIR`, e.g. a build of the commit before it), so that "off" is
compared with the engine as it was. Targets: off within the noise of the baseline (the two
medians' ratio within the repeats' range), on at most 5% slower than off.

`tools` carries compare.py's helpers: xgrad_benchmarks, fmt_range, met_at_least. Standard library only.
"""
import argparse


def measure(args, tools):
    """One repeat's seconds per step: T14's off and on, and T1 in this build and the baseline."""
    bench = tools["xgrad_benchmarks"]
    run = dict(bench(args, "^T14_"))
    if args.baseline_build:
        base = argparse.Namespace(**vars(args))
        base.build = args.baseline_build
        run["baseline_T1"] = bench(base, "^T1_gpt_step/")["T1_gpt_step"]
        run["this_T1"] = bench(args, "^T1_gpt_step/")["T1_gpt_step"]
    return run


def rows(runs, tools):
    """Steps/s off and on with the ratio on/off; then this tree's T1 against the baseline's."""
    fmt_range, met_at_most = tools["fmt_range"], tools["met_at_most"]
    sps = lambda v: f"{v:,.1f}"
    off = [1 / r["T14_gpt_step_off"]["seconds"] for r in runs]
    on = [1 / r["T14_gpt_step_on"]["seconds"] for r in runs]
    slow = [o / p for o, p in zip(off, on)]  # time on / time off
    events = runs[0]["T14_gpt_step_on"]["events_per_step"]
    out = [("T14 GPT step (T1: L4 H4 d128 T64 B12 V73, AdamW, clip), no profiler", "steps/s", fmt_range(off, sps), "",
            "", "", ""),
           (f"T14   under the profiler ({events:,.0f} events a step, memory sampled); step time on / off", "steps/s",
            fmt_range(on, sps), "", fmt_range(slow, lambda v: f"{v:.3f}x"), "<= 1.05x", met_at_most(slow, 1.05))]
    if all("baseline_T1" in r for r in runs):
        this = [1 / r["this_T1"]["seconds"] for r in runs]
        base = [1 / r["baseline_T1"]["seconds"] for r in runs]
        ratio = [t / b for t, b in zip(this, base)]
        out.append(("T14   off: T1 of this tree / T1 of the tree before the profiler (--baseline-build)", "steps/s",
                    fmt_range(this, sps), "", fmt_range(ratio, lambda v: f"{v:.3f}x"), "within noise", ""))
    return out
