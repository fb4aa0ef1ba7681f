#!/usr/bin/python3
"""bench/gpt_to_torch.py — take an xgrad GPT to PyTorch, and prove it is the same model there.

examples/gpt writes out/gpt/model.safetensors (the weights under nanoGPT's names, Linear weights
(out, in), the tied table once) and out/gpt/checkpoint.safetensors (the same under "model.", plus
AdamW's state and the run's flags in the metadata). This script reads either, with a few lines of
struct/json (no safetensors package needed), builds bench/nanogpt.py's GPT of the same shape,
load_state_dict()s the weights, evaluates the SAME validation windows examples/gpt evaluates (its
fixed set: --eval-batches batches of --batch-size windows at o_j = ⌊j·(N_val − T − 1)/n⌋, from the
same text, vocabulary and 90/10 split), and prints PyTorch's loss beside xgrad's. They must agree
to 1e-4 nats (float32 in both; the exit status is 1 otherwise).

    build/examples/gpt                                   # train in xgrad (writes out/gpt/)
    /usr/bin/python3 bench/gpt_to_torch.py out/gpt/checkpoint.safetensors
    /usr/bin/python3 bench/gpt_to_torch.py out/gpt/checkpoint.safetensors --save out/gpt/model.pt
        # then, in PyTorch: model = nanogpt.GPT(...); model.load_state_dict(torch.load("out/gpt/model.pt"))

xgrad's figure comes from the example itself: the script runs `build/examples/gpt --resume
CHECKPOINT --eval-only` with the checkpoint's flags (--xgrad-bin to point elsewhere), or takes
--xgrad-loss if you already have the number.
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nanogpt  # noqa: E402


def read_safetensors(path):
    """(tensors by name as float32 torch tensors, metadata dict)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    dtypes = {"F32": torch.float32, "F64": torch.float64}
    tensors = {}
    for name, h in header.items():
        a, b = h["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=dtypes[h["dtype"]]).reshape(h["shape"])
        tensors[name] = t.to(torch.float32)
    return tensors, meta


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", help="examples/gpt's checkpoint.safetensors (flags read from it)")
    ap.add_argument("--xgrad-bin", default="build/examples/gpt", help="the example's binary, to ask for its loss")
    ap.add_argument("--xgrad-loss", type=float, default=None, help="xgrad's loss, if known (skips the binary)")
    ap.add_argument("--save", default=None, help="also torch.save the PyTorch state_dict here")
    a = ap.parse_args()

    tensors, meta = read_safetensors(a.checkpoint)
    flag = lambda k: meta[f"flag.--{k}"]  # noqa: E731
    state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    T, B, n_batches = int(flag("block-size")), int(flag("batch-size")), int(flag("eval-batches"))
    pos, tie = flag("pos"), flag("no-tie") == "false"

    ids, chars = nanogpt.encode(nanogpt.read_text(flag("data") or None))
    _, val = nanogpt.split(ids)
    model = nanogpt.GPT(len(chars), T, int(flag("n-layer")), int(flag("n-head")), int(flag("d")), pos=pos, tie=tie)
    if tie:  # xgrad stores the tied table once, under transformer.wte.weight (nanoGPT's own
        state["lm_head.weight"] = state["transformer.wte.weight"]  # state_dict lists it twice)
    model.load_state_dict(state, strict=True)
    model.eval()
    torch_loss = nanogpt.fixed_val_loss(model, val, T, B, n_batches)

    if a.xgrad_loss is None:
        out = subprocess.run([a.xgrad_bin, "--resume", a.checkpoint, "--eval-only"] + xgrad_flags(meta),
                             check=True, stdout=subprocess.PIPE, text=True).stdout
        a.xgrad_loss = float(re.search(r"val \(fixed set\) ([0-9.]+)", out).group(1))
    diff = abs(torch_loss - a.xgrad_loss)
    print(f"validation loss on examples/gpt's fixed set ({n_batches} batches of {B} windows of {T}+1 characters)")
    print(f"  xgrad   {a.xgrad_loss:.6f} nats")
    print(f"  PyTorch {torch_loss:.6f} nats   (|difference| {diff:.2e}, must be < 1e-4)")
    if a.save:
        torch.save(model.state_dict(), a.save)
        print(f"wrote {a.save}: a PyTorch state_dict of bench/nanogpt.py's GPT")
    sys.exit(0 if diff < 1e-4 else 1)


def xgrad_flags(meta):
    """The saved run's trajectory flags, so that the binary accepts the checkpoint."""
    args = []
    for key, value in sorted(meta.items()):
        if not key.startswith("flag."):
            continue
        name = key[len("flag."):]
        if name in ("--no-tie", "--no-bias"):
            if value == "true":
                args.append(name)
        elif name == "--data" and value == "":
            continue
        else:
            args += [name, value]
    return args


if __name__ == "__main__":
    main()
