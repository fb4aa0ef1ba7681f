#!/usr/bin/env python3
"""bench/gpt_arch.py — examples/gpt's GPT-2 block against LLaMA's, at the defaults: the table of
examples/gpt/README.md ("GPT-2's block and LLaMA's").

Runs build/examples/gpt once per row (the defaults: 2,000 steps, L 4, H 4, d 128, block 64,
batch 12, seed 1337, one thread), one after the other, and prints a Markdown table with, per row:
    parameters        from the run's "model" line
    val / train       the final losses (nats; val on the fixed set)
    steps/s           2,000 steps / the wall time of the training loop as the last progress
                      line reports it
    peak RSS          the process's maximum resident set (getrusage ru_maxrss), MiB
    KV cache / token  2 (k, v) · L · Hkv · hd · 4 B, the bytes generation caches per position
then the machine (CPU model, cores) and the date. Run from the repository root:

    python3 bench/gpt_arch.py [--build build] [--steps 2000] [--rows gpt2,llama,...]
"""
import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from page import cpu_name, table_lines  # noqa: E402  (bench/page.py)

# row name → (flags, what the row changes)
ROWS = {
    "gpt2": ([], "GPT-2: LayerNorm, GELU MLP (4d), learned positions, biases"),
    "llama": (["--arch", "llama"], "LLaMA: RMSNorm, SwiGLU (F 384), rope, no biases"),
    "llama-352": (["--arch", "llama", "--ffn-hidden", "352"], "LLaMA, F 352: GPT-2's parameter count"),
    "llama-gqa2": (["--arch", "llama", "--n-kv-head", "2"], "LLaMA, 2 K/V heads (grouped-query)"),
    "llama-mqa": (["--arch", "llama", "--n-kv-head", "1"], "LLaMA, 1 K/V head (multi-query)"),
}
L, H, D = 4, 4, 128


def run(build, flags, steps):
    with tempfile.TemporaryDirectory() as out:
        cmd = [os.path.join(build, "examples", "gpt"), "--steps", str(steps), "--sample", "0", "--out", out, *flags]
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        text = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        if status != 0:
            sys.exit(f"{' '.join(cmd)} failed:\n{text}")
    params = int(re.search(r"^model .*: (\d+) parameters", text, re.M).group(1))
    train, val = map(float, re.search(r"^loss \(nats\)\s+train ([\d.]+)\s+val ([\d.]+)", text, re.M).groups())
    rates = re.findall(r"^step +\d+/\d+ .* ([\d.]+) steps/s", text, re.M)
    return {"params": params, "train": train, "val": val, "steps_s": float(rates[-1]),
            "rss_mib": usage.ru_maxrss / 1024, "cmd": " ".join(["examples/gpt", *flags])}


def kv_bytes(flags):
    kv = int(flags[flags.index("--n-kv-head") + 1]) if "--n-kv-head" in flags else H
    return 2 * L * kv * (D // H) * 4


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--rows", default=",".join(ROWS))
    args = ap.parse_args()
    rows, load_start = [], os.getloadavg()[0]
    for name in args.rows.split(","):
        flags, what = ROWS[name]
        print(f"gpt_arch.py: {name}: examples/gpt {' '.join(flags)}", file=sys.stderr, flush=True)
        r = run(args.build, flags, args.steps)
        rows.append([f"`{r['cmd']}`", what, f"{r['params']:,}", f"**{r['val']:.4f}**", f"{r['train']:.4f}",
                     f"{r['steps_s']:.2f}", f"{r['rss_mib']:.0f}", f"{kv_bytes(flags):,} B"])
    header = ["run", "block", "parameters", "val", "train", "steps/s", "peak RSS, MiB", "KV cache per token"]
    print("\n".join(table_lines(header, rows)))
    print(f"\nMeasured on {cpu_name()}, {os.cpu_count()} cores (load average {load_start:.2f} at start, "
          f"{os.getloadavg()[0]:.2f} at end), {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC: "
          f"`python3 bench/gpt_arch.py --steps {args.steps}`.")


if __name__ == "__main__":
    main()
