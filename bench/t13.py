"""bench/t13.py — workload T13 of bench/compare.py: memory at GPT-2 small's shape, xgrad against PyTorch.

    measure(args, rep, tools)   one repeat: both runs, their peaks in MiB
    rows(runs, tools)           the T13 rows of the table

L 12, H 12, d 768, T 64, B 4, V 4,096 (88.25 million parameters), AdamW, one thread, STEPS steps:
examples/gpt --tokenizer bpe --vocab-size 4096 (train, save checkpoint.safetensors and
model.safetensors, evaluate, sample), and bench/torch_gpt.py at the same shape (--vocab-size 4096:
the token table's rows; its ids stay characters) saving nanoGPT's checkpoint with torch.save. Each
side reports two peaks of resident memory (getrusage ru_maxrss): by the last step, and the whole
run's; GNU time's %M checks the second from outside. The parameters, their gradients and AdamW's
two moments are 4 × 336.65 MiB = 1,346.6 MiB of it. Target: the whole run's peak at the training
peak (within 1%): saving the state costs no memory beyond the state.
"""
import json
import os
import re
import tempfile

STEPS = 3
SHAPE = ["--n-layer", "12", "--n-head", "12", "--d", "768", "--block-size", "64", "--batch-size", "4"]
PEAKS = re.compile(r"^peak RSS ([\d.]+) MiB .*; ([\d.]+) MiB by the last step$", re.M)


def measure(args, rep, tools):
    """Both runs of one repeat: {"xgrad_train", "xgrad_whole", "xgrad_time", "torch_train", "torch_whole",
    "torch_time"}, MiB (the _time figures: GNU time's peak of the same process)."""
    run = tools["run"]
    env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    here = os.path.dirname(os.path.abspath(__file__))
    r = {}
    with tempfile.TemporaryDirectory() as out_dir:
        out, peak = run([os.path.join(args.build, "examples", "gpt"), "--out", out_dir, "--threads", "1",
                         "--tokenizer", "bpe", "--vocab-size", "4096", "--steps", str(STEPS), "--eval-batches", "5",
                         "--sample", "20"] + SHAPE, env, rusage=True)
        m = PEAKS.search(out)
        r["xgrad_whole"], r["xgrad_train"], r["xgrad_time"] = float(m.group(1)), float(m.group(2)), peak / 2**20
    with tempfile.TemporaryDirectory() as out_dir:
        out, peak = run(["/usr/bin/python3", os.path.join(here, "torch_gpt.py"), "--vocab-size", "4096", "--iters",
                         str(STEPS), "--warmup", "0", "--eval-batches", "5", "--threads", "1",
                         "--checkpoint", os.path.join(out_dir, "ckpt.pt")] + SHAPE, env, rusage=True)
        j = json.loads(out.splitlines()[-1])
        r["torch_whole"], r["torch_train"], r["torch_time"] = j["peak_rss_mib"], j["train_peak_rss_mib"], peak / 2**20
    return r


def rows(runs, tools):
    """The T13 rows: each side's training peak, whole-run peak, and whole / training."""
    fmt_range = tools["fmt_range"]
    mib = lambda v: f"{v:,.1f}"
    col = lambda key: fmt_range([r[key] for r in runs], mib)
    ratio = lambda a, b: fmt_range([r[a] / r[b] for r in runs], lambda v: f"{v:.2f}x")
    whole_over_train = [r["xgrad_whole"] / r["xgrad_train"] for r in runs]
    return [(f"T13 GPT-2 small's shape (L12 H12 d768 T64 B4 V4096, AdamW, 1 thread, {STEPS} steps): peak RSS "
             "by the last step", "MiB", col("xgrad_train"), col("torch_train"), ratio("xgrad_train", "torch_train"),
             "", ""),
            ("T13   peak RSS of the whole run (training, checkpoint saved, evaluation, samples)", "MiB",
             col("xgrad_whole"), col("torch_whole"), ratio("xgrad_whole", "torch_whole"), "< 1x",
             "yes" if all(r["xgrad_whole"] < r["torch_whole"] for r in runs) else "no"),
            ("T13   the whole run's peak / the peak by the last step", "ratio", fmt_range(whole_over_train,
             lambda v: f"{v:.3f}x"), fmt_range([r["torch_whole"] / r["torch_train"] for r in runs], lambda v: f"{v:.3f}x"),
             "", "<= 1.01x", "yes" if max(whole_over_train) <= 1.01 else "no" if min(whole_over_train) > 1.01 else "mixed"),
            ("T13   the whole run's peak, GNU time's %M (from outside the process)", "MiB", col("xgrad_time"),
             col("torch_time"), "", "", "")]
