#!/usr/bin/python3
"""bench/torch_gpt.py — examples/gpt's default training run in PyTorch: the loss and speed peer.

The same data (the raw `bible -f "gen1:1-rev22:21"` text, characters as tokens, first 90% train,
last 10% validation), the same model (bench/nanogpt.py: nanoGPT's layout, the issue's init),
the same optimizer, schedule and clipping as examples/gpt's defaults:

    L 4, H 4, d 128, block 64, batch 12, 2,000 iterations, dropout 0, biases on, head tied
    AdamW lr 1e-3, betas (0.9, 0.99), eps 1e-8, weight decay 0.1 on ≥2-D weights only
    100 warmup iterations, then cosine decay to 1e-4 (xgrad's CosineWithWarmup formula)
    clip_grad_norm_ 1.0 before every step

Training batches are B windows at offsets torch.randint(N_train − T, (B,)) (nanoGPT's get_batch);
PyTorch's generator is not xgrad's, so the batches differ from the C++ run's, as they would
between any two seeds. At the end it reports two validation losses:
    random   the mean over 50 random validation batches (nanoGPT's estimate_loss; the issue's
             1.688 was measured this way)
    fixed    the mean over examples/gpt's fixed set (nanogpt.val_offsets: 50 batches of 12
             evenly spaced windows), the figure examples/gpt prints
and the training speed in steps/s (wall time of the training loop / iterations, evals excluded) and
the process's peak RSS (resource.getrusage ru_maxrss, MiB).

    /usr/bin/python3 bench/torch_gpt.py                     # the defaults, 1 thread, seed 1337
    /usr/bin/python3 bench/torch_gpt.py --pos rope --seed 2 # another position scheme or seed
    /usr/bin/python3 bench/torch_gpt.py --block-size 1024 --batch-size 4 --iters 50 --warmup 0 --eval-batches 1
                                                            # compare.py's T6: long context
    /usr/bin/python3 bench/torch_gpt.py --n-layer 12 --n-head 12 --d 768 --batch-size 4 --vocab-size 4096 \
        --iters 3 --warmup 0 --eval-batches 5 --checkpoint /tmp/ckpt.pt   # bench/t13.py: GPT-2 small's memory

--vocab-size V gives the token table V rows while the ids stay characters: the memory and time of a
V-token model (examples/gpt --tokenizer bpe --vocab-size V), not its losses. --checkpoint PATH saves,
after training, what nanoGPT's train.py saves: {"model": state_dict, "optimizer": state_dict, ...}
with torch.save; the JSON line then has the peak RSS by the last step beside the whole run's.

The last line is one JSON object with every number, for bench/compare.py-style tooling.
"""
import argparse
import json
import resource
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import nanogpt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--d", type=int, default=128, help="width (n_embd)")
    ap.add_argument("--block-size", type=int, default=64, help="T, characters of context")
    ap.add_argument("--batch-size", type=int, default=12)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.99)
    ap.add_argument("--grad-clip", type=float, default=1.0, help="0: no clipping")
    ap.add_argument("--pos", default="learned", choices=["learned", "sinusoidal", "rope", "none"])
    ap.add_argument("--no-tie", action="store_true")
    ap.add_argument("--eval-batches", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", default=None, help="a text file instead of the KJV")
    ap.add_argument("--save", default=None, help="write the trained state_dict here (torch.save)")
    ap.add_argument("--vocab-size", type=int, default=0, help="rows of the token table (0: the characters')")
    ap.add_argument("--checkpoint", default=None, help="save model and optimizer state here after training")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    ids, chars = nanogpt.encode(nanogpt.read_text(a.data))
    train, val = nanogpt.split(ids)
    T, B = a.block_size, a.batch_size
    print(f"data   {len(ids)} characters, V {len(chars)}: train {len(train)} / val {len(val)}")

    if a.vocab_size and a.vocab_size < len(chars):
        sys.exit(f"torch_gpt.py: --vocab-size {a.vocab_size} is below the text's {len(chars)} characters")
    vocab = a.vocab_size or len(chars)
    model = nanogpt.GPT(vocab, T, a.n_layer, a.n_head, a.d, pos=a.pos, tie=not a.no_tie)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model  {n_params} parameters (pos {a.pos}, {'untied' if a.no_tie else 'tied'} head)")
    opt = nanogpt.adamw(model, a.lr, (a.beta1, a.beta2), a.weight_decay)

    def batch(data, gen=None):
        offs = torch.randint(len(data) - T, (B,), generator=gen)
        return nanogpt.windows(data, offs.tolist(), T)

    train_time, t0 = 0.0, time.perf_counter()
    for it in range(a.iters):
        lr = nanogpt.cosine_with_warmup(it, a.lr, a.warmup, a.iters, a.min_lr)
        for g in opt.param_groups:
            g["lr"] = lr
        s = time.perf_counter()
        x, y = batch(train)
        loss = nanogpt.loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        train_time += time.perf_counter() - s
        if (it + 1) % 100 == 0 or it + 1 == a.iters:
            print(f"step {it + 1:5d}/{a.iters}  loss {loss.item():.4f} nats  lr {lr:.2e}  "
                  f"{(it + 1) / train_time:6.2f} steps/s", flush=True)
    wall = time.perf_counter() - t0
    train_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MiB, by the last step
    if a.checkpoint:  # nanoGPT's train.py: the model's and the optimizer's state_dicts in one file
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "iter_num": a.iters}, a.checkpoint)

    model.eval()
    gen = torch.Generator().manual_seed(a.seed + 1)
    with torch.no_grad():
        random_val = sum(nanogpt.loss_fn(model(x), y).item()
                         for x, y in (batch(val, gen) for _ in range(a.eval_batches))) / a.eval_batches
        random_train = sum(nanogpt.loss_fn(model(x), y).item()
                           for x, y in (batch(train, gen) for _ in range(a.eval_batches))) / a.eval_batches
    fixed_val = nanogpt.fixed_val_loss(model, val, T, B, a.eval_batches)
    print(f"\nval loss (nats)  random {a.eval_batches} batches {random_val:.4f}   "
          f"fixed set {fixed_val:.4f}   (train, random batches {random_train:.4f})")
    print(f"speed            {a.iters / train_time:.2f} steps/s at {a.threads} thread(s); "
          f"wall {wall:.1f} s; seed {a.seed}")
    if a.save:
        torch.save(model.state_dict(), a.save)
    print(json.dumps(dict(workload="gpt_default", pos=a.pos, tie=not a.no_tie, seed=a.seed, threads=a.threads,
                          iters=a.iters, val_random=random_val, val_fixed=fixed_val, train_random=random_train,
                          steps_per_s=a.iters / train_time, wall_s=wall, params=n_params, vocab=vocab,
                          block=T, batch=B, train_peak_rss_mib=train_peak,
                          peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))


if __name__ == "__main__":
    main()
