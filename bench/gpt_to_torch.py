#!/usr/bin/python3
"""bench/gpt_to_torch.py — take an xgrad GPT or LLaMA to PyTorch, and prove it is the same model there.

examples/gpt writes out/gpt/model.safetensors (the weights alone, Linear weights (out, in), a tied
table once) and out/gpt/checkpoint.safetensors (the same under "model.", plus AdamW's state and the
run's flags in the metadata). This script reads the checkpoint with a few lines of struct/json (no
safetensors package needed) and builds the PyTorch model of its --arch, of the same shape:
    gpt2  (the default; checkpoints older than --arch are gpt2): bench/nanogpt.py's GPT, nanoGPT's names;
    llama: bench/llama.py's Llama, Meta's names (facebookresearch/llama), with the checkpoint's
           --n-kv-head (0: --n-head) and --ffn-hidden (0: LLaMA's rule, 8d/3 rounded up to 64).
It load_state_dict()s the weights by name (strict), evaluates the SAME validation windows
examples/gpt evaluates (its fixed set: --eval-batches batches of --batch-size windows at
o_j = ⌊j·(N_val − T − 1)/n⌋, from the same text, vocabulary and 90/10 split), and prints PyTorch's
loss beside xgrad's. They must agree to 1e-4 nats (float32 in both; the exit status is 1 otherwise).

    build/examples/gpt                                   # train in xgrad (writes out/gpt/)
    /usr/bin/python3 bench/gpt_to_torch.py out/gpt/checkpoint.safetensors
    /usr/bin/python3 bench/gpt_to_torch.py out/gpt/checkpoint.safetensors --save out/gpt/model.pt
        # then, in PyTorch: build the model the script prints, model.load_state_dict(torch.load(...))

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
import llama  # noqa: E402
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


def torch_model(flag, state, vocab):
    """(the checkpoint's model in PyTorch, its weights loaded by name with strict=True, in eval mode;
    the constructor call that rebuilds it). flag(name) is the run's --name as a string. A tied head is
    stored once, under the token table's name: Llama.load_checkpoint points output.weight at it, and
    lm_head.weight is pointed at transformer.wte.weight here (torch's state_dict lists both names)."""
    T, L, H, d = (int(flag(k)) for k in ("block-size", "n-layer", "n-head", "d"))
    tie = flag("no-tie") == "false"
    if flag("arch") == "llama":
        cfg = llama.LlamaConfig(vocab=vocab, block=T, n_layer=L, n_head=H, n_kv_head=int(flag("n-kv-head")) or H,
                                d=d, tie=tie, ffn_hidden=int(flag("ffn-hidden")))
        model = llama.Llama(cfg)
        model.load_checkpoint(state)
        return model.eval(), f"llama.Llama(llama.{cfg})"
    kv = int(flag("n-kv-head") or 0)
    if kv not in (0, H):
        sys.exit(f"--arch gpt2 --n-kv-head {kv}: nanoGPT's attention has no grouped-query form, so this "
                 f"checkpoint has no PyTorch model here (--arch llama has one: bench/llama.py)")
    model = nanogpt.GPT(vocab, T, L, H, d, pos=flag("pos"), tie=tie)
    if tie:
        state = dict(state, **{"lm_head.weight": state["transformer.wte.weight"]})
    model.load_state_dict(state, strict=True)
    return model.eval(), (f"nanogpt.GPT(vocab={vocab}, block={T}, n_layer={L}, n_head={H}, d={d}, "
                          f"pos={flag('pos')!r}, tie={tie})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", help="examples/gpt's checkpoint.safetensors (flags read from it)")
    ap.add_argument("--xgrad-bin", default="build/examples/gpt", help="the example's binary, to ask for its loss")
    ap.add_argument("--xgrad-loss", type=float, default=None, help="xgrad's loss, if known (skips the binary)")
    ap.add_argument("--save", default=None, help="also torch.save the PyTorch state_dict here")
    a = ap.parse_args()

    tensors, meta = read_safetensors(a.checkpoint)
    if "flag.--block-size" not in meta:
        sys.exit(f"{a.checkpoint} records no run flags: pass examples/gpt's checkpoint.safetensors, "
                 f"not model.safetensors")

    def flag(name):
        return meta.get(f"flag.--{name}", "gpt2" if name == "arch" else None)

    if flag("tokenizer") == "bpe":
        sys.exit(f"{a.checkpoint} is a --tokenizer bpe run: nanogpt.py reads characters only")

    state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    T, B, n_batches = int(flag("block-size")), int(flag("batch-size")), int(flag("eval-batches"))
    ids, chars = nanogpt.encode(nanogpt.read_text(flag("data") or None))
    _, val = nanogpt.split(ids)
    model, built = torch_model(flag, state, len(chars))
    print(f"PyTorch: {built}, loaded by name (strict)")
    with torch.no_grad():
        torch_loss = nanogpt.fixed_val_loss(model, val, T, B, n_batches)

    if a.xgrad_loss is None:
        run = subprocess.run([a.xgrad_bin, "--resume", a.checkpoint, "--eval-only"] + xgrad_flags(meta),
                             stdout=subprocess.PIPE, text=True)
        if run.returncode != 0:  # its own message is on stderr, above
            sys.exit(f"{a.xgrad_bin} --eval-only failed (exit status {run.returncode}); "
                     f"pass --xgrad-loss if you have its figure")
        a.xgrad_loss = float(re.search(r"val \(fixed set\) ([0-9.]+)", run.stdout).group(1))
    diff = abs(torch_loss - a.xgrad_loss)
    print(f"validation loss on examples/gpt's fixed set ({n_batches} batches of {B} windows of {T}+1 characters)")
    print(f"  xgrad   {a.xgrad_loss:.6f} nats")
    print(f"  PyTorch {torch_loss:.6f} nats   (|difference| {diff:.2e}, must be < 1e-4)")
    if a.save:
        torch.save(model.state_dict(), a.save)
        print(f"wrote {a.save}: the state_dict of {built}")
    sys.exit(0 if diff < 1e-4 else 1)


def xgrad_flags(meta):
    """The saved run's trajectory flags, so that the binary accepts the checkpoint."""
    args = []
    for key, value in sorted(meta.items()):
        if not key.startswith("flag."):
            continue
        name = key[len("flag."):]
        if name in ("--no-tie", "--no-bias", "--sparse-embedding"):
            if value == "true":
                args.append(name)
        elif name == "--data" and value == "":
            continue
        else:
            args += [name, value]
    return args


if __name__ == "__main__":
    main()
