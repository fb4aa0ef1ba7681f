#!/usr/bin/python3
"""tests/reference/make_gpt_reference.py — the reference dump for examples/gpt's model.

Run at development time with Debian's python3-torch (torch 1.13); the tests never need torch:

    /usr/bin/python3 tests/reference/make_gpt_reference.py

It builds a tiny GPT of examples/gpt's architecture in PyTorch (bench/nanogpt.py: nanoGPT's
layout and names), V 17, L 2, H 2, d 16, block T 8, batch B 2, with weights drawn once by the
issue's init (N(0, 0.02), zero biases, c_proj N(0, 0.02/√(2L))) in float32, then computes in
float64 (the exact answer for those float32 weights):

  1. logits (B, T, V) and the mean cross-entropy loss on a fixed batch, and the gradient of
     every parameter (before clipping);
  2. 10 training steps on that same batch, each exactly examples/gpt's train_step:
        zero_grad; loss = CE(model(x), y); backward; clip_grad_norm_(1.0); AdamW step
     with lr 1e-3 (constant: no schedule here), betas (0.9, 0.99), eps 1e-8, weight decay 0.1
     on the ≥2-D weights only (nanoGPT's two groups). losses[k] is the loss of step k, before
     its update; grad_norms[k] its gradient norm before clipping.

For three variants: "learned" (learned positions, head tied to wte), "rope" (RoPE, interleaved
pairs, on q and k; no wpe), "notie" (learned positions, the head its own Linear, no bias).

It writes ONE file beside itself, gpt_reference.safetensors (F32 everywhere; xgrad's loader
reads F32 and F64, so the token ids are stored as F32, exact for ids < 2^24):
    inputs (B, T), targets (B, T)                           token ids
    <variant>/weight/<nanoGPT name>                         the initial weights (tied table once)
    <variant>/grad/<nanoGPT name>                           dL/dθ at those weights
    <variant>/logits (B, T, V), <variant>/loss ()           nats
    <variant>/losses (10,), <variant>/grad_norms (10,)      the 10 steps
and the shape in "__metadata__". The ctest case is tests/examples/test_gpt.cpp.
"""
import json
import os
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import nanogpt  # noqa: E402

V, L, H, D, T, B = 17, 2, 2, 16, 8, 2
STEPS, LR, BETAS, WEIGHT_DECAY, EPS, CLIP = 10, 1e-3, (0.9, 0.99), 0.1, 1e-8, 1.0
SEED = 1337
VARIANTS = {"learned": dict(pos="learned", tie=True),
            "rope": dict(pos="rope", tie=True),
            "notie": dict(pos="learned", tie=False)}


def write_safetensors(path, tensors, metadata):
    """safetensors by hand (no pip package here): u64 header length, JSON header padded with
    spaces to a multiple of 8, then the raw little-endian float32 bytes back to back."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def run_variant(prefix, cfg, x, y, out):
    torch.manual_seed(SEED)
    dump_variant(prefix, nanogpt.GPT(V, T, L, H, D, **cfg), x, y, out)   # float32 init


def dump_variant(prefix, model, x, y, out):
    """Stores under prefix/ the float32 weights of model, then, in float64, its logits, loss and
    gradients on (x, y) and the 10 train_steps; also used by make_llama_reference.py."""
    for name, p in model.named_parameters():           # the tied table is listed once
        out[f"{prefix}/weight/{name}"] = p.detach().clone()
    model = model.double()                             # compute in float64

    logits = model(x)
    loss = nanogpt.loss_fn(logits, y)
    loss.backward()
    out[f"{prefix}/logits"] = logits.detach()
    out[f"{prefix}/loss"] = loss.detach()
    for name, p in model.named_parameters():
        out[f"{prefix}/grad/{name}"] = p.grad.detach().clone()

    model.zero_grad(set_to_none=True)
    opt = nanogpt.adamw(model, LR, BETAS, WEIGHT_DECAY, EPS)
    losses, norms = [], []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = nanogpt.loss_fn(model(x), y)
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP).item())
        opt.step()
        losses.append(loss.item())
    out[f"{prefix}/losses"] = torch.tensor(losses)
    out[f"{prefix}/grad_norms"] = torch.tensor(norms)
    print(f"{prefix:8s} loss {losses[0]:.6f} -> {losses[-1]:.6f}   grad norms {norms[0]:.3f} .. {norms[-1]:.3f}")


def main():
    g = torch.Generator().manual_seed(SEED)
    x = torch.randint(0, V, (B, T), generator=g)
    y = torch.randint(0, V, (B, T), generator=g)
    out = {"inputs": x.float(), "targets": y.float()}
    for prefix, cfg in VARIANTS.items():
        run_variant(prefix, cfg, x, y, out)
    meta = {"script": "tests/reference/make_gpt_reference.py", "torch": torch.__version__,
            "vocab": str(V), "n_layer": str(L), "n_head": str(H), "d": str(D), "block": str(T),
            "batch": str(B), "steps": str(STEPS), "lr": str(LR), "beta1": str(BETAS[0]),
            "beta2": str(BETAS[1]), "eps": str(EPS), "weight_decay": str(WEIGHT_DECAY), "clip": str(CLIP),
            "seed": str(SEED)}
    path = os.path.join(HERE, "gpt_reference.safetensors")
    write_safetensors(path, out, meta)
    print(f"wrote {path}: {len(out)} tensors, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
