"""bench/t11.py — workload T11 of bench/compare.py: xgrad's pool on a machine another process shares.

    measure(args, rep, tools)   one repeat: examples/gpt at --threads 1 and 2, side by side, first
                                as the machine is, then while a busy process takes one core
    rows(runs, tools)           the T11 rows of the table

examples/gpt's default step (L 4, H 4, d 128, B 12 windows of T 64), args.t4_steps steps, steps/s
between steps 10 and steps - 10 (compare.py's steady_rate). The busy process is a Python loop
(`while True: pass`) started here before the pair and killed after it: on a 2-core machine it
takes one core, so one thread has a core of its own and two threads share what is left with it.
The two runs of a pair follow each other; which one goes first alternates with the repeat.
Targets: two threads at least 1.7x one on the machine as it is (run it idle), and at least 0.9x
one beside the busy process (a second thread must not cost more than it brings).

`tools` carries compare.py's helpers: run, steady_rate, fmt_range, met_at_least.
Only the standard library is used.
"""
import os
import subprocess
import sys
import tempfile
import time

CASES = (("idle", "T11 examples/gpt default step, the machine as it is: 1 thread", 1.7),
         ("busy", "T11 the same beside a busy process on one core: 1 thread", 0.9))


def gpt_rate(args, tools, gpt, out_dir, threads):
    steps = args.t4_steps
    out, _ = tools["run"]([gpt, "--steps", str(steps), "--eval-every", str(steps), "--eval-batches", "1",
                           "--sample", "0", "--threads", str(threads), "--out", out_dir], {"OPENBLAS_NUM_THREADS": "1"})
    return tools["steady_rate"](out, steps)


def measure(args, rep, tools):
    """{"idle_1", "idle_2", "busy_1", "busy_2": steps/s}."""
    gpt = os.path.join(args.build, "examples", "gpt")
    if not os.access(gpt, os.X_OK):
        sys.exit(f"compare.py: T11 needs {gpt} (cmake --build {args.build} --target gpt)")
    r = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case, _, _ in CASES:
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if case == "busy" else None
            try:
                time.sleep(0.5)  # the busy loop is running before the first step
                for threads in ((1, 2) if rep % 2 == 0 else (2, 1)):
                    r[f"{case}_{threads}"] = gpt_rate(args, tools, gpt, os.path.join(tmp, f"{case}{threads}"), threads)
            finally:
                if busy:
                    busy.kill()
                    busy.wait()
    return r


def rows(runs, tools):
    fmt_range, met = tools["fmt_range"], tools["met_at_least"]
    sps = lambda v: f"{v:,.1f}"
    out = []
    for case, label, target in CASES:
        one = [r[f"{case}_1"] for r in runs]
        two = [r[f"{case}_2"] for r in runs]
        ratio = [b / a for a, b in zip(one, two)]
        out.append((label, "steps/s", fmt_range(one, sps), "", "", "", ""))
        out.append(("T11   2 threads; ratio to 1 thread", "steps/s", fmt_range(two, sps), "",
                    fmt_range(ratio, lambda v: f"{v:.2f}x of 1"), f">= {target}x", met(ratio, target)))
    return out
