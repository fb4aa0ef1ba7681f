"""bench/llama.py — examples/gpt's `--arch llama` model in PyTorch (Meta's LLaMA layout and names).

The PyTorch twin of the llama block, used by tests/reference/make_llama_reference.py for the
reference dump that the ctest case checks (the tests never import torch).

Legend: B batch, T time (≤ block), V vocabulary, d width, H query heads, n_kv K/V heads
        (H % n_kv == 0; 1 = multi-query, H = multi-head), hd = d / H head width, L blocks,
        F = the feed-forward's hidden width.

The model (Touvron et al. 2023, LLaMA; Meta's facebookresearch/llama model.py, without its
model-parallel layers and without its inference cache):
    x = tok_embeddings[idx]                         (B, T, d)      no position table: RoPE
    L times:  h = x + attention(attention_norm(x))  pre-RMSNorm residual blocks
              x = h + feed_forward(ffn_norm(h))
    logits = output(norm(x))                        (B, T, V)      output.weight may be tok_embeddings.weight
RMSNorm (Zhang & Sennrich 2019):  y = x / √(mean(x², -1) + eps) · weight,  eps 1e-5.
Attention, grouped-query (Ainslie et al. 2023):
    q = wq x (B, T, H, hd),  k = wk x, v = wv x (B, T, n_kv, hd)
    q, k ← RoPE: pairs (2i, 2i+1) rotated by the angle t · 10000^(−2i/hd) (Su et al. 2021)
    query head h reads K/V head h // (H / n_kv)     (Meta's repeat_kv)
    y = softmax(q kᵀ / √hd, -inf above the diagonal) v  (B, H, T, hd) → (B, T, H·hd) → wo
Feed-forward, SwiGLU (Shazeer 2020):  w2(silu(w1 x) ⊙ w3 x),  F = 64 · ⌈int(2 · 4d / 3) / 64⌉
(or LlamaConfig.ffn_hidden when set).
Every Linear is bias-free and stores its weight (out, in), as torch.nn.Linear does.

State dict: Meta's names, so a checkpoint written by examples/gpt --arch llama loads by name
(Llama.load_checkpoint: load_state_dict, with the tied head stored once):
    tok_embeddings.weight (V, d)
    layers.{i}.attention_norm.weight (d,)              layers.{i}.ffn_norm.weight (d,)
    layers.{i}.attention.wq.weight (H·hd, d)           .wk.weight, .wv.weight (n_kv·hd, d)
    layers.{i}.attention.wo.weight (d, H·hd)
    layers.{i}.feed_forward.w1.weight, .w3.weight (F, d)    .w2.weight (d, F)
    norm.weight (d,)                                   output.weight (V, d), absent when tied
Hugging Face's LlamaForCausalLM names the same tensors otherwise (model.embed_tokens,
self_attn.q_proj/k_proj/v_proj/o_proj, mlp.gate_proj/up_proj/down_proj for w1/w3/w2,
input_layernorm, post_attention_layernorm, model.norm, lm_head) and pairs RoPE's dimensions
as halves (i, i + hd/2) (rotate_half), not interleaved. Its checkpoints therefore load here
only after Meta's permutation of the rows of wq and wk within each head, the inverse of what
transformers' convert_llama_weights_to_hf.py applies: rows (head, pair i, 2) ↔ (head, 2, pair i).
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class LlamaConfig:
    vocab: int            # V
    block: int            # the longest T; RoPE's angles are precomputed for positions 0..block-1
    n_layer: int          # L
    n_head: int           # H query heads
    n_kv_head: int        # n_kv K/V heads, dividing H
    d: int                # width, divisible by H
    tie: bool = True      # output.weight is tok_embeddings.weight
    ffn_hidden: int = 0   # F; 0: LLaMA's rule, ffn_hidden(d, multiple_of) (examples/gpt's --ffn-hidden)
    multiple_of: int = 64  # F is rounded up to a multiple of this (Meta's ModelArgs.multiple_of)
    eps: float = 1e-5     # RMSNorm's eps, inside the root (Meta's ModelArgs.norm_eps)

    def __post_init__(self):
        if self.d % self.n_head or self.n_head % self.n_kv_head or (self.d // self.n_head) % 2:
            raise ValueError(f"LlamaConfig: need d % n_head == 0, n_head % n_kv_head == 0 and an even head "
                             f"width; got d {self.d}, n_head {self.n_head}, n_kv_head {self.n_kv_head}")
        if self.ffn_hidden < 0:
            raise ValueError(f"LlamaConfig: ffn_hidden must be >= 0 (0: LLaMA's rule); got {self.ffn_hidden}")


def ffn_hidden(d, multiple_of=64):
    """LLaMA's SwiGLU width: two thirds of GPT-2's 4d (the three matrices then hold about as many
    weights as GPT-2's two), rounded up to a multiple: F = m · ⌈int(2 · 4d / 3) / m⌉."""
    hidden = int(2 * 4 * d / 3)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


# ---- RoPE ---------------------------------------------------------------------------------------
def rope_angles(hd, block, base=10000.0):
    """(block, hd/2) complex128 e^{i·t·θ_j}, θ_j = base^(−2j/hd), t = 0..block-1: Meta's
    precompute_freqs_cis, its angles taken in float64."""
    theta = base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)       # (hd/2,)
    angles = torch.outer(torch.arange(block, dtype=torch.float64), theta)     # (block, hd/2)
    return torch.polar(torch.ones_like(angles), angles)


def apply_rope(x, freqs):
    """Meta's apply_rotary_emb on one tensor: the interleaved pairs (x[..., 2j], x[..., 2j+1]) as the
    complex number x_2j + i·x_2j+1, times freqs[t, j]. x (B, T, heads, hd), freqs (T, hd/2)."""
    B, T, heads, hd = x.shape
    xc = torch.view_as_complex(x.reshape(B, T, heads, hd // 2, 2).contiguous())  # (B, T, heads, hd/2)
    rot = freqs.to(xc.dtype).view(1, T, 1, hd // 2)
    return torch.view_as_real(xc * rot).reshape(B, T, heads, hd).to(x.dtype)


def repeat_kv(x, n_rep):
    """(B, T, n_kv, hd) → (B, T, n_kv · n_rep, hd), K/V head g copied to heads g·n_rep .. g·n_rep + n_rep-1,
    so query head h reads K/V head h // n_rep (Meta's repeat_kv)."""
    if n_rep == 1:
        return x
    B, T, n_kv, hd = x.shape
    return x[:, :, :, None, :].expand(B, T, n_kv, n_rep, hd).reshape(B, T, n_kv * n_rep, hd)


# ---- the model ----------------------------------------------------------------------------------
class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):                                                      # x (..., d)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head, self.n_kv = cfg.n_head, cfg.n_kv_head
        self.hd = cfg.d // cfg.n_head
        self.wq = nn.Linear(cfg.d, self.n_head * self.hd, bias=False)
        self.wk = nn.Linear(cfg.d, self.n_kv * self.hd, bias=False)
        self.wv = nn.Linear(cfg.d, self.n_kv * self.hd, bias=False)
        self.wo = nn.Linear(self.n_head * self.hd, cfg.d, bias=False)

    def forward(self, x, freqs):                                               # x (B, T, d)
        B, T, _ = x.shape
        q = apply_rope(self.wq(x).view(B, T, self.n_head, self.hd), freqs)    # (B, T, H, hd)
        k = apply_rope(self.wk(x).view(B, T, self.n_kv, self.hd), freqs)      # (B, T, n_kv, hd)
        v = self.wv(x).view(B, T, self.n_kv, self.hd)
        k, v = repeat_kv(k, self.n_head // self.n_kv), repeat_kv(v, self.n_head // self.n_kv)  # (B, T, H, hd)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)     # (B, H, T, hd)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.hd)                  # (B, H, T, T)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        att = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, self.n_head * self.hd)    # (B, T, H·hd)
        return self.wo(y)


class FeedForward(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.w1 = nn.Linear(d, hidden, bias=False)   # gate
        self.w2 = nn.Linear(hidden, d, bias=False)   # down
        self.w3 = nn.Linear(d, hidden, bias=False)   # up

    def forward(self, x):                                                      # (B, T, d) → (B, T, d)
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention = Attention(cfg)
        self.feed_forward = FeedForward(cfg.d, cfg.ffn_hidden or ffn_hidden(cfg.d, cfg.multiple_of))
        self.attention_norm = RMSNorm(cfg.d, cfg.eps)
        self.ffn_norm = RMSNorm(cfg.d, cfg.eps)

    def forward(self, x, freqs):
        h = x + self.attention(self.attention_norm(x), freqs)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    """Meta's Transformer at a small shape, trained from scratch. Init (GPT-2's, applied to these
    names; Meta publishes none for training): every weight N(0, 0.02) except the residual output
    projections wo and w2, N(0, 0.02/√(2L)); RMSNorm weights 1; drawn in named_parameters order."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab, cfg.d)
        self.layers = nn.ModuleList([TransformerBlock(cfg) for _ in range(cfg.n_layer)])
        self.norm = RMSNorm(cfg.d, cfg.eps)
        self.output = nn.Linear(cfg.d, cfg.vocab, bias=False)
        if cfg.tie:
            self.output.weight = self.tok_embeddings.weight   # one tensor, listed once, as tok_embeddings.weight
        self.register_buffer("freqs", rope_angles(cfg.d // cfg.n_head, cfg.block), persistent=False)
        for name, p in self.named_parameters():
            if name.endswith(("wo.weight", "w2.weight")):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg.n_layer))
            elif name.endswith("norm.weight"):
                nn.init.ones_(p)
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def load_checkpoint(self, state):
        """load_state_dict(strict=True) of a checkpoint that stores a tied head once, as
        tok_embeddings.weight (examples/gpt's does; torch's own state_dict lists it under both names)."""
        state = dict(state)
        if self.cfg.tie:
            state.setdefault("output.weight", state["tok_embeddings.weight"])
        self.load_state_dict(state, strict=True)

    def forward(self, idx):                                                    # idx (B, T) int64
        T = idx.shape[1]
        if T > self.cfg.block:
            raise ValueError(f"Llama: sequence length {T} exceeds block {self.cfg.block}")
        x = self.tok_embeddings(idx)                                           # (B, T, d)
        for layer in self.layers:
            x = layer(x, self.freqs[:T])
        return self.output(self.norm(x))                                       # (B, T, V)
