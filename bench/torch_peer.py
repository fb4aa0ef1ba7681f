#!/usr/bin/python3
"""bench/torch_peer.py — PyTorch's side of the comparison.

The same workloads as bench/xgrad_bench.cpp, with the same shapes and hyperparameters, timed the
same way: build once, take a few untimed warm steps, then repeat whole training steps (forward,
backward, optimizer step, zero_grad) until at least --min-time seconds have passed, and report the
mean wall time per step. Gradients are dropped (zero_grad(set_to_none=True)), as xgrad's zero_grad
does by default.

    /usr/bin/python3 bench/torch_peer.py --workload W1 --threads 1     # one JSON line per benchmark
    /usr/bin/python3 bench/torch_peer.py --char-mlp-run --steps 30000  # W6: the default char_mlp run
    /usr/bin/python3 bench/torch_peer.py --workload T4gen              # generation, and the copy bandwidth

Needs Debian's python3-torch (`bash .ci/install-deps --bench`); the tests never import it.
Legend: B batch, V vocabulary, d width, P token IDs per step, H hidden units (W) or heads (T),
T time, hd head width.
"""
import argparse
import json
import math
import random
import statistics
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 1234
WARM_STEPS = 3  # untimed steps before timing, as in xgrad_bench.cpp
POOL = 8        # distinct batches cycled through, generated untimed


class CharMLP(nn.Module):
    """examples/char_mlp/model.hpp: Embedding → reshape → Linear → tanh → Linear."""

    def __init__(self, vocab, block, d, hidden):
        super().__init__()
        self.block, self.d = block, d
        self.emb = nn.Embedding(vocab, d)
        self.fc1 = nn.Linear(block * d, hidden)
        self.fc2 = nn.Linear(hidden, vocab)

    def forward(self, x):                                   # x (B, block) int64
        e = self.emb(x)                                     # (B, block, d)
        h1 = torch.tanh(self.fc1(e.view(-1, self.block * self.d)))  # (B, H)
        return self.fc2(h1)                                 # (B, V) logits


def char_mlp_step(block, d, hidden, B):
    torch.manual_seed(SEED)
    model = CharMLP(27, block, d, hidden)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xs = [torch.randint(0, 27, (B, block)) for _ in range(POOL)]
    ys = [torch.randint(0, 27, (B,)) for _ in range(POOL)]
    state = {"next": 0}

    def step():
        i = state["next"] % POOL
        state["next"] += 1
        logits = model(xs[i])                                # (B, V)
        loss = F.cross_entropy(logits, ys[i])                # () nats
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def embedding_step(V, d, P, sparse, one_hot=False):
    """loss = Σ E(ids) ⊙ G; sparse: row-sparse gradient and SparseAdam; one_hot: (P, V) · E."""
    torch.manual_seed(SEED)
    emb = nn.Embedding(V, d, sparse=sparse)
    opt = (torch.optim.SparseAdam if sparse else torch.optim.Adam)(emb.parameters(), lr=1e-3)
    G = torch.randn(P, d)
    ids = [torch.randint(0, V, (P,)) for _ in range(POOL)]
    state = {"next": 0}

    def step():
        x = ids[state["next"] % POOL]
        state["next"] += 1
        e = F.one_hot(x, V).float() @ emb.weight if one_hot else emb(x)  # (P, d)
        loss = (e * G).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


N, K, M = 256, 512, 512
MATMUL_FLOPS = 3.0 * 2.0 * N * K * M  # forward, dA, dB


def matmul_step():
    torch.manual_seed(SEED)
    A = torch.randn(N, K, requires_grad=True)
    B = torch.randn(K, M, requires_grad=True)
    G = torch.randn(N, M)

    def step():
        Y = A @ B
        Y.backward(G)
        A.grad = None
        B.grad = None
    return step


# ---- T2: one op, forward + backward, at the GPT example's shapes ----------------------------------
# B 12, T 64, d 128, H 4, MLP hidden 512; y = op(inputs), y.backward(G), gradients dropped.
TB, TT, TD, TH, THIDDEN = 12, 64, 128, 4, 512


def op_step(shapes, y_shape, op):
    torch.manual_seed(SEED)
    inputs = [torch.randn(*s, requires_grad=True) for s in shapes]
    G = torch.randn(*y_shape)  # dL/dy

    def step():
        y = op(*inputs)
        y.backward(G)
        for t in inputs:
            t.grad = None
    return step


def sdpa_causal(q, k, v):
    """Causal attention as nanoGPT's slow path (torch 1.13 has no F.scaled_dot_product_attention):
    softmax(q·kᵀ/√hd masked above the diagonal) · v; q, k, v (B, H, T, hd)."""
    T = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))  # (B, H, T, T)
    att = att.masked_fill(torch.ones(T, T).tril() == 0, float("-inf"))
    return F.softmax(att, dim=-1) @ v                                     # (B, H, T, hd)


# ---- T1: one GPT training step at examples/gpt's defaults -----------------------------------------
# bench/nanogpt.py's model (the layout and init of examples/gpt): L 4, H 4, d 128, block 64, batch
# 12, V 73 (the KJV's characters), AdamW (1e-3, betas (0.9, 0.99), weight decay 0.1 on ≥2-D
# weights), clip_grad_norm_ 1.0. One step: forward, loss, zero_grad, backward, clip, step.
GPT_V, GPT_T, GPT_B = 73, 64, 12


def gpt_step():
    import nanogpt  # bench/nanogpt.py, beside this file
    torch.manual_seed(SEED)
    model = nanogpt.GPT(GPT_V, GPT_T, 4, 4, 128, pos="learned", tie=True)
    opt = nanogpt.adamw(model, 1e-3, (0.9, 0.99), 0.1)
    xs = [torch.randint(0, GPT_V, (GPT_B, GPT_T)) for _ in range(POOL)]
    ys = [torch.randint(0, GPT_V, (GPT_B, GPT_T)) for _ in range(POOL)]
    state = {"next": 0}

    def step():
        i = state["next"] % POOL
        state["next"] += 1
        loss = nanogpt.loss_fn(model(xs[i]), ys[i])   # () nats
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return step


# ---- T4-gen: generation by nanoGPT's generate loop (the whole window recomputed per token) -----------
# bench/nanogpt.py's model at block 512, L 4, H 4, d 128, V 65, learned positions, tied head, eval
# mode (it has no dropout). Prompt: 64 random ids, B 1; then 512 new tokens, each sampled from
# softmax(logits of the last position / temperature 1), no top-k. The context is cropped to its last
# `block` tokens: after 448 new tokens it fills the block, and from the 450th on the window slides,
# so every position's embedding changes from one token to the next.
GEN_V, GEN_BLOCK, GEN_L, GEN_H, GEN_D, GEN_PROMPT, GEN_NEW = 65, 512, 4, 4, 128, 64, 512


class LastPosition(nn.Module):
    """nanoGPT's forward at inference (no targets) applies lm_head to the last position only:
    (B, T, d) → (B, 1, V). Wrapping the head keeps its weight tied to wte."""

    def __init__(self, head):
        super().__init__()
        self.head = head

    def forward(self, x):
        return self.head(x[:, [-1], :])


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None):
    """nanoGPT's GPT.generate: idx (B, t) int64 → (B, t + max_new_tokens)."""
    for _ in range(max_new_tokens):
        idx_cond = idx if idx.size(1) <= model.block else idx[:, -model.block:]   # (B, ≤ block)
        logits = model(idx_cond)[:, -1, :] / temperature                          # (B, V)
        if top_k is not None:
            v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
            logits[logits < v[:, [-1]]] = -float("Inf")
        probs = F.softmax(logits, dim=-1)
        idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)    # (B, t + 1)
    return idx


def t4gen(min_time):
    """T4-gen's PyTorch figure, nanoGPT's generate (median seconds per 512 new tokens over the timed
    generations; one short generation first, untimed), with what the bandwidth bound needs:
    the bytes of float32 weights a new token reads (every parameter, but of wpe only its one
    row: the tied head reads all of wte), and the KV cache's bytes per cached position,
    2 (K and V) · L · n_kv · hd · 4 B, n_kv = H here."""
    import nanogpt  # bench/nanogpt.py, beside this file
    torch.manual_seed(SEED)
    model = nanogpt.GPT(GEN_V, GEN_BLOCK, GEN_L, GEN_H, GEN_D, pos="learned", tie=True).eval()
    model.lm_head = LastPosition(model.lm_head)
    prompt = torch.randint(0, GEN_V, (1, GEN_PROMPT))
    generate(model, prompt, 8)
    times = []
    start = time.perf_counter()
    while not times or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        out = generate(model, prompt, GEN_NEW)
        times.append(time.perf_counter() - t0)
    assert out.shape == (1, GEN_PROMPT + GEN_NEW)
    seconds = statistics.median(times)
    n_weights = sum(p.numel() for p in model.parameters()) - (GEN_BLOCK - 1) * GEN_D
    return {"name": "T4gen_torch_recompute", "seconds_per_step": seconds, "iterations": len(times),
            "tokens": GEN_NEW, "tokens_per_s": GEN_NEW / seconds, "threads": torch.get_num_threads(),
            "weight_bytes": 4 * n_weights, "kv_bytes_per_position": 2 * GEN_L * GEN_D * 4}


def copy_bandwidth(mib=256, repeats=5):
    """Memory bandwidth as one thread sees it: numpy's copy (one thread) of `mib` MiB of float32
    into a buffer already written once, so no page is first touched while timed. Counts the
    bytes read plus the bytes written; returns the best of `repeats` copies, as STREAM does."""
    src = np.ones(mib * 2**20 // 4, dtype=np.float32)
    dst = np.empty_like(src)
    dst.fill(0.0)
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = max(best, 2 * src.nbytes / (time.perf_counter() - t0))
    return {"name": "T4gen_copy_bandwidth", "bytes_per_s": best, "copy_bytes": src.nbytes, "repeats": repeats}


def time_steps(step, min_time):
    """Mean seconds per warm step over at least min_time seconds."""
    for _ in range(WARM_STEPS):
        step()
    n, start = 0, time.perf_counter()
    while True:
        step()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / n, n


# Benchmark names match xgrad_bench.cpp's, so compare.py can pair them.
WORKLOADS = {
    "W1": [("W1_char_mlp_small", lambda: char_mlp_step(3, 10, 200, 32))],
    "W2": [("W2_char_mlp_medium", lambda: char_mlp_step(8, 64, 512, 256))],
    "W3": [("W3_embedding_dense", lambda: embedding_step(50257, 768, 512, sparse=False)),
           ("W3_embedding_sparse", lambda: embedding_step(50257, 768, 512, sparse=True))],
    "W4": [(f"W4_sparse_vs_V/{V}", lambda V=V: embedding_step(V, 256, 512, sparse=True))
           for V in (1000, 10000, 100000, 1000000)]
          + [(f"W4_onehot_vs_V/{V}", lambda V=V: embedding_step(V, 256, 512, sparse=False, one_hot=True))
             for V in (1000, 10000)],
    "W5": [("W5_matmul", matmul_step)],
    "T2": [("T2_gelu_none", lambda: op_step([(TB, TT, THIDDEN)], (TB, TT, THIDDEN),
                                            lambda x: F.gelu(x, approximate="none"))),
           ("T2_gelu_tanh", lambda: op_step([(TB, TT, THIDDEN)], (TB, TT, THIDDEN),
                                            lambda x: F.gelu(x, approximate="tanh"))),
           ("T2_layer_norm", lambda: op_step([(TB, TT, TD), (TD,), (TD,)], (TB, TT, TD),
                                             lambda x, w, b: F.layer_norm(x, (TD,), w, b))),
           ("T2_softmax", lambda: op_step([(TB, TH, TT, TT)], (TB, TH, TT, TT),
                                          lambda x: F.softmax(x, dim=-1))),
           ("T2_sdpa_causal", lambda: op_step([(TB, TH, TT, TD // TH)] * 3, (TB, TH, TT, TD // TH), sdpa_causal))],
    "T1": [("T1_gpt_step", gpt_step)],
    # T5: causal attention fwd+bwd on q, k, v (1, 4, T, 32), nanoGPT's non-flash path (sdpa_causal)
    "T5": [(f"T5_attention_torch/{T}", lambda T=T: op_step([(1, TH, T, TD // TH)] * 3, (1, TH, T, TD // TH),
                                                           sdpa_causal))
           for T in (64, 256, 1024, 4096)],
}
WORKLOADS["W3_dense"] = WORKLOADS["W3"][:1]
WORKLOADS["W3_sparse"] = WORKLOADS["W3"][1:]


# ---- W6: the default examples/char_mlp run ------------------------------------------------------
# Same data (the word list, a–z words, deduplicated, 80/10/10 split), model, AdamW with a cosine
# schedule after a linear warmup, batches of 128 drawn with replacement, and a validation pass in
# chunks of 8192 every 2000 steps. compare.py reads this process's peak RSS.
def char_mlp_run(args):
    torch.manual_seed(args.seed)
    words, seen = [], set()
    with open(args.data) as f:
        for line in f:
            w = line.strip().lower()
            if w and all("a" <= c <= "z" for c in w) and w not in seen:
                seen.add(w)
                words.append(w)
    random.Random(args.seed).shuffle(words)
    n_train, n_val = int(0.8 * len(words)), int(0.1 * len(words))
    splits = words[:n_train], words[n_train:n_train + n_val], words[n_train + n_val:]

    def examples(ws):
        xs, ys = [], []
        for w in ws:
            context = [0] * args.block_size
            for ch in w + ".":
                nxt = 0 if ch == "." else ord(ch) - ord("a") + 1
                xs.append(context)
                ys.append(nxt)
                context = context[1:] + [nxt]
        return torch.tensor(xs, dtype=torch.int64), torch.tensor(ys, dtype=torch.int64)

    (Xtr, Ytr), (Xva, Yva), _ = [examples(s) for s in splits]
    model = CharMLP(27, args.block_size, args.embed_dim, args.hidden)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    warmup, total, min_lr = 500, args.steps, args.lr / 20

    def lr_at(t):
        if t < warmup:
            return args.lr * t / warmup
        return min_lr + (args.lr - min_lr) * 0.5 * (1 + math.cos(math.pi * (t - warmup) / max(1, total - warmup)))

    @torch.no_grad()
    def evaluate(X, Y):
        total_loss = 0.0
        for b in range(0, len(Y), 8192):
            total_loss += F.cross_entropy(model(X[b:b + 8192]), Y[b:b + 8192], reduction="sum").item()
        return total_loss / len(Y)

    end = min(args.steps, args.stop_after) if args.stop_after else args.steps
    start = time.perf_counter()
    for step in range(end):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        rows = torch.randint(0, len(Ytr), (args.batch_size,))
        loss = F.cross_entropy(model(Xtr[rows]), Ytr[rows])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if (step + 1) % 2000 == 0 or step + 1 == args.steps:
            val = evaluate(Xva, Yva)
    print(json.dumps({"name": "W6_char_mlp_run", "steps": end, "seconds": time.perf_counter() - start,
                      "final_loss": loss.item(), "val_loss": val if end >= 2000 else None}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=sorted(WORKLOADS) + ["T4gen"], action="append",
                    help="workload to time (repeatable); default: all")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds of timed steps per benchmark")
    ap.add_argument("--char-mlp-run", action="store_true", help="W6: run the default char_mlp training")
    ap.add_argument("--data", default="/usr/share/dict/words")
    ap.add_argument("--steps", type=int, default=30000)
    ap.add_argument("--stop-after", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--block-size", type=int, default=5)
    ap.add_argument("--embed-dim", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    if args.char_mlp_run:
        char_mlp_run(args)
        return
    for w in args.workload or ["W1", "W2", "W3", "W4", "W5", "T1", "T2", "T4gen"]:
        if w == "T4gen":
            print(json.dumps(t4gen(args.min_time)), flush=True)
            print(json.dumps(copy_bandwidth()), flush=True)
            continue
        for name, make in WORKLOADS[w]:
            seconds, n = time_steps(make(), args.min_time)
            out = {"name": name, "seconds_per_step": seconds, "iterations": n, "threads": torch.get_num_threads()}
            if name == "W5_matmul":
                out["gflops"] = MATMUL_FLOPS / seconds / 1e9
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
