#!/usr/bin/python3
"""tests/reference/make_lora_reference.py — a GPT with a LoRA adapter in PyTorch, applied by hand.

Run at development time where torch is installed (.ci/install-deps --bench: Debian's python3-torch);
the tests never need torch:

    /usr/bin/python3 tests/reference/make_lora_reference.py                       # writes the reference
    /usr/bin/python3 tests/reference/make_lora_reference.py --base B --adapter DIR --tokens 1,2,3
        # any base checkpoint (PyTorch's names, e.g. examples/gpt's model.safetensors) and any
        # adapter folder (e.g. one nn::save_adapter wrote): prints the adapted logits of those tokens

The model is examples/gpt's GPT (bench/nanogpt.py: nanoGPT's layout and names), V 17, L 2, H 2,
d 16, block T 8, learned positions, the head tied to wte, biases drawn away from zero. The adapter
is in Hugging Face PEFT's folder layout (PEFT is not packaged for Debian, so it is read by hand):

    adapter_model.safetensors   base_model.model.<path>.lora_A.weight (r, in)
                                base_model.model.<path>.lora_B.weight (out, r)
    adapter_config.json         r, lora_alpha, use_rslora, target_modules, ...

and applied as PEFT merges it:  W' = W + s·B·A,  s = lora_alpha / r  (use_rslora: lora_alpha / √r),
on every c_attn, attn.c_proj, c_fc and mlp.c_proj, with B NOT zero (a zero B proves nothing).

It writes beside itself, every tensor F32:
    lora_base.safetensors              the base's weights, nanoGPT's names (the tied table once)
    lora_adapter/, lora_adapter_rslora/  two adapters (r 2, α 4; s = 2 and s = 2√2), the same A and B
    lora_reference.safetensors         inputs (B, T) token ids as F32, base/logits (B, T, V), and
                                       <adapter>/logits (B, T, V), computed in float64
The adapter files also carry the two metadata strings xgrad's loader checks (its file checksum
"xgrad.crc32", and "xgrad.adapter_config_crc32", the CRC-32 of the config's bytes); PEFT ignores
metadata. The ctest case, tests/examples/test_lora_reference.cpp, loads the base and each adapter
through nn::load_adapter into examples/gpt's GPT and holds xgrad's logits to these within 1e-5.
"""
import argparse
import json
import math
import os
import struct
import sys
import zlib

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import nanogpt  # noqa: E402

V, L, H, D, T, B = 17, 2, 2, 16, 8, 2
RANK, ALPHA, SEED = 2, 4.0, 2024
TARGETS = ["attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"]
PREFIX = "base_model.model."


# ---- safetensors, by hand (no pip package here) ------------------------------------------------------
def safetensors_bytes(tensors, metadata, xgrad_checksum=False):
    """u64 header length, JSON header padded with spaces to a multiple of 8, raw little-endian F32.
    xgrad_checksum: "xgrad.crc32" first in __metadata__, the CRC-32 of every byte but its own 8 hex
    digits (bytes [40, 48)), as nn/serialize.hpp writes it."""
    header, blobs, offset = {}, [], 0
    meta = {"xgrad.crc32": "00000000"} if xgrad_checksum else {}
    meta.update(metadata)
    header["__metadata__"] = meta
    for name, t in tensors.items():
        data = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    out = bytearray(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    if xgrad_checksum:
        assert out[8:40] == b'{"__metadata__":{"xgrad.crc32":"'
        out[40:48] = b"%08x" % zlib.crc32(bytes(out[:40] + out[48:]))
    return bytes(out)


def read_safetensors(path):
    """(tensors by name as float32, metadata)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    dtypes = {"F32": torch.float32, "F64": torch.float64}
    return {name: torch.frombuffer(bytearray(data[h["data_offsets"][0]:h["data_offsets"][1]]),
                                   dtype=dtypes[h["dtype"]]).reshape(h["shape"]).to(torch.float32)
            for name, h in header.items()}, meta


# ---- PEFT's adapter folder ------------------------------------------------------------------------------
def write_adapter(folder, adapters, use_rslora):
    """adapters: {module path: (A (r, in), B (out, r))}."""
    os.makedirs(folder, exist_ok=True)
    config = json.dumps({"peft_type": "LORA", "r": RANK, "lora_alpha": ALPHA, "lora_dropout": 0.0,
                         "use_rslora": use_rslora, "target_modules": list(adapters), "fan_in_fan_out": False,
                         "bias": "none", "inference_mode": True}, indent=2).encode() + b"\n"
    tensors = {}
    for path, (a, b) in adapters.items():
        tensors[f"{PREFIX}{path}.lora_A.weight"] = a
        tensors[f"{PREFIX}{path}.lora_B.weight"] = b
    blob = safetensors_bytes(tensors, {"xgrad.adapter_config_crc32": "%08x" % zlib.crc32(config)}, xgrad_checksum=True)
    with open(os.path.join(folder, "adapter_config.json"), "wb") as f:
        f.write(config)
    with open(os.path.join(folder, "adapter_model.safetensors"), "wb") as f:
        f.write(blob)


def merged_state(base, folder):
    """The base's weights with every adapter of `folder` merged: W + s·B·A (float64)."""
    with open(os.path.join(folder, "adapter_config.json")) as f:
        config = json.load(f)
    r, alpha = config["r"], config["lora_alpha"]
    s = alpha / math.sqrt(r) if config.get("use_rslora", False) else alpha / r
    tensors, _ = read_safetensors(os.path.join(folder, "adapter_model.safetensors"))
    state = {k: v.double() for k, v in base.items()}
    for name, a in tensors.items():
        if not name.endswith(".lora_A.weight"):
            continue
        path = name[len(PREFIX):-len(".lora_A.weight")]
        b = tensors[f"{PREFIX}{path}.lora_B.weight"]
        w = state[path + ".weight"]                                  # (out, in)
        assert a.shape == (r, w.shape[1]) and b.shape == (w.shape[0], r), (path, a.shape, b.shape, w.shape)
        state[path + ".weight"] = w + s * (b.double() @ a.double())  # W + s·B (out, r)·A (r, in)
    return state


def logits_of(state, idx, vocab, block, n_layer, n_head, d):
    """The GPT's logits (B, T, V) in float64 with these weights (strict load: every name, no other)."""
    model = nanogpt.GPT(vocab, block, n_layer, n_head, d).double()
    model.load_state_dict({**state, "lm_head.weight": state["transformer.wte.weight"]}, strict=True)
    with torch.no_grad():
        return model(idx)


# ---- the reference -----------------------------------------------------------------------------------------
def make_reference():
    torch.manual_seed(SEED)
    model = nanogpt.GPT(V, T, L, H, D)
    with torch.no_grad():                      # biases away from zero, so the frozen biases count too
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0.0, 0.1)
    base = {n: p.detach().clone() for n, p in model.named_parameters()}   # the tied table once
    adapters = {}
    for i in range(L):
        for target in TARGETS:
            path = f"transformer.h.{i}.{target}"
            w = base[path + ".weight"]
            adapters[path] = (torch.randn(RANK, w.shape[1]) * 0.3, torch.randn(w.shape[0], RANK) * 0.3)
    g = torch.Generator().manual_seed(SEED)
    idx = torch.randint(0, V, (B, T), generator=g)

    with open(os.path.join(HERE, "lora_base.safetensors"), "wb") as f:
        f.write(safetensors_bytes(base, {"script": "tests/reference/make_lora_reference.py"}))
    out = {"inputs": idx.float(), "base/logits": logits_of(base, idx, V, T, L, H, D)}
    for folder, rslora in (("lora_adapter", False), ("lora_adapter_rslora", True)):
        write_adapter(os.path.join(HERE, folder), adapters, rslora)
        out[f"{folder}/logits"] = logits_of(merged_state(base, os.path.join(HERE, folder)), idx, V, T, L, H, D)
        moved = (out[f"{folder}/logits"] - out["base/logits"]).abs().max().item()
        print(f"{folder:20s} s = {ALPHA / math.sqrt(RANK) if rslora else ALPHA / RANK:.4f}   "
              f"max |adapted − base| logits {moved:.4f}")
    meta = {"script": "tests/reference/make_lora_reference.py", "torch": torch.__version__, "vocab": str(V),
            "n_layer": str(L), "n_head": str(H), "d": str(D), "block": str(T), "batch": str(B), "r": str(RANK),
            "lora_alpha": str(ALPHA), "targets": ",".join(TARGETS), "seed": str(SEED)}
    path = os.path.join(HERE, "lora_reference.safetensors")
    with open(path, "wb") as f:
        f.write(safetensors_bytes(out, meta))
    print(f"wrote {path} and lora_base.safetensors, lora_adapter/, lora_adapter_rslora/")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", help="a base checkpoint with PyTorch's names (a GPT-2-shaped model)")
    ap.add_argument("--adapter", help="a PEFT adapter folder")
    ap.add_argument("--tokens", default="0", help="comma-separated token ids, one sequence")
    ap.add_argument("--n-head", type=int, default=H)
    args = ap.parse_args()
    if not args.base:
        make_reference()
        return
    base, _ = read_safetensors(args.base)
    base = {k[len("model."):] if k.startswith("model.") else k: v for k, v in base.items()}
    vocab, d = base["transformer.wte.weight"].shape
    block = base["transformer.wpe.weight"].shape[0]
    n_layer = len({k.split(".")[2] for k in base if k.startswith("transformer.h.")})
    idx = torch.tensor([[int(t) for t in args.tokens.split(",")]])
    state = merged_state(base, args.adapter) if args.adapter else base
    torch.set_printoptions(precision=6, linewidth=140)
    print(logits_of(state, idx, vocab, block, n_layer, args.n_head, d)[0])


if __name__ == "__main__":
    main()
