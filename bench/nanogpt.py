"""bench/nanogpt.py — examples/gpt's model and data pipeline in PyTorch (nanoGPT's layout).

The PyTorch twin of examples/gpt/{model,data}.cpp, shared by three scripts that run where
Debian's python3-torch is installed (the tests never import it):

    tests/reference/make_gpt_reference.py   the tiny-GPT reference dump the ctest case checks
    bench/gpt_to_torch.py                   loads an xgrad checkpoint, evaluates the same val batches
    bench/torch_gpt.py                      the default training run in PyTorch (the peer)

Legend: B batch, T time (block), V vocabulary, d width, H heads, hd = d / H head width,
        L blocks. The state_dict names are nanoGPT's (transformer.wte.weight, transformer.h.0.
        attn.c_attn.weight, ...), so an xgrad checkpoint loads with load_state_dict.

The model (Radford et al. 2019, GPT-2; Karpathy's nanoGPT model.py):
    x = wte[idx] + wpe[0..T)                 (B, T, d)   (no wpe for --pos rope / none)
    L times:  x = x + attn(ln_1(x))          pre-LayerNorm residual blocks
              x = x + mlp(ln_2(x))           mlp: d → 4d → GELU (exact erf form) → d
    logits = ln_f(x) · wteᵀ                  (B, T, V)   head tied to wte (or its own with tie=False)
torch 1.13 has no F.scaled_dot_product_attention, so attention is written out:
    q, k, v = split(c_attn(x), d)            each (B, T, d) → (B, H, T, hd)
    scores  = q · kᵀ / √hd                   (B, H, T, T), -inf above the diagonal
    y       = softmax(scores) · v            (B, H, T, hd) → (B, T, d) → c_proj
"""
import math
import subprocess

import torch
import torch.nn as nn
import torch.nn.functional as F

KJV_COMMAND = ["bible", "-f", "gen1:1-rev22:21"]


# ---- positions -------------------------------------------------------------------------------------
def sinusoidal_positions(T, d, dtype=torch.float32):
    """(T, d): PE[t, 2i] = sin(t / 10000^(2i/d)), PE[t, 2i+1] = cos(...) (Vaswani et al. 2017)."""
    pos = torch.arange(T, dtype=torch.float64).unsqueeze(1)           # (T, 1)
    inv = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    pe = torch.zeros(T, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * inv)
    pe[:, 1::2] = torch.cos(pos * inv)[:, : d // 2]
    return pe.to(dtype)


def apply_rotary(x, base=10000.0):
    """RoPE (Su et al. 2021) with INTERLEAVED pairs (x[..., 2i], x[..., 2i+1]) rotated by the angle
    t · base^(-2i/hd); x (..., T, hd), positions 0..T-1."""
    T, hd = x.shape[-2], x.shape[-1]
    t = torch.arange(T, dtype=torch.float64).unsqueeze(1)                    # (T, 1)
    inv = base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)        # (hd/2,)
    ang = (t * inv).to(x.dtype)                                              # (T, hd/2)
    cos, sin = torch.cos(ang), torch.sin(ang)
    x0, x1 = x[..., 0::2], x[..., 1::2]                                      # (..., T, hd/2)
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out


# ---- the model -----------------------------------------------------------------------------------------
class CausalSelfAttention(nn.Module):
    def __init__(self, d, n_head, rope):
        super().__init__()
        self.n_head, self.rope = n_head, rope
        self.c_attn = nn.Linear(d, 3 * d)   # [q | k | v] along the output dim
        self.c_proj = nn.Linear(d, d)

    def weights_and_values(self, x):
        B, T, d = x.shape
        H = self.n_head
        q, k, v = self.c_attn(x).split(d, dim=2)                      # each (B, T, d)
        q = q.view(B, T, H, d // H).transpose(1, 2)                   # (B, H, T, hd)
        k = k.view(B, T, H, d // H).transpose(1, 2)
        v = v.view(B, T, H, d // H).transpose(1, 2)
        if self.rope:
            q, k = apply_rotary(q), apply_rotary(k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // H)          # (B, H, T, T)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        att = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        return att, v

    def forward(self, x):
        B, T, d = x.shape
        att, v = self.weights_and_values(x)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, d)      # (B, T, d)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))                      # exact (erf) GELU


class Block(nn.Module):
    def __init__(self, d, n_head, rope):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=1e-5)
        self.attn = CausalSelfAttention(d, n_head, rope)
        self.ln_2 = nn.LayerNorm(d, eps=1e-5)
        self.mlp = MLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """pos: 'learned' | 'sinusoidal' | 'rope' | 'none'. Only 'learned' has transformer.wpe."""

    def __init__(self, vocab, block, n_layer, n_head, d, pos="learned", tie=True):
        super().__init__()
        self.block, self.pos = block, pos
        modules = dict(wte=nn.Embedding(vocab, d))
        if pos == "learned":
            modules["wpe"] = nn.Embedding(block, d)
        modules["h"] = nn.ModuleList([Block(d, n_head, pos == "rope") for _ in range(n_layer)])
        modules["ln_f"] = nn.LayerNorm(d, eps=1e-5)
        self.transformer = nn.ModuleDict(modules)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        if tie:
            self.lm_head.weight = self.transformer.wte.weight
        if pos == "sinusoidal":
            self.register_buffer("pe", sinusoidal_positions(block, d), persistent=False)
        # Init of the issue (GPT-2's): N(0, 0.02) weights, zero biases, and the two residual
        # output projections per block N(0, 0.02/√(2L)). LayerNorm: weight 1, bias 0.
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))
            elif name.endswith(".bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):                                           # idx (B, T) int64
        T = idx.shape[1]
        x = self.transformer.wte(idx)                                 # (B, T, d)
        if self.pos == "learned":
            x = x + self.transformer.wpe(torch.arange(T))
        elif self.pos == "sinusoidal":
            x = x + self.pe[:T].to(x.dtype)
        for blk in self.transformer.h:
            x = blk(x)
        return self.lm_head(self.transformer.ln_f(x))                 # (B, T, V)


def loss_fn(logits, targets):
    """Mean cross-entropy over all B·T positions, in nats."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def adamw(model, lr, betas, weight_decay, eps=1e-8):
    """nanoGPT's two groups: weight decay on every parameter of 2 or more dims (embeddings and
    Linear weights, the tied table once), none on biases and LayerNorm weights."""
    params = [p for p in model.parameters() if p.requires_grad]      # tied table listed once
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=betas, eps=eps)


def cosine_with_warmup(step, lr, warmup, total, min_lr):
    """xgrad's optim::CosineWithWarmup: lr·t/W while t < W, then cosine from lr to min_lr at t = total."""
    if step < warmup:
        return lr * step / warmup
    if step > total:
        return min_lr
    progress = (step - warmup) / max(1, total - warmup)
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


# ---- data (examples/gpt/data.cpp) ----------------------------------------------------------------------
def read_text(path=None):
    """The raw bytes of `bible -f "gen1:1-rev22:21"` (verse references included), or of a file."""
    if path:
        with open(path, "rb") as f:
            raw = f.read()
    else:
        raw = subprocess.run(KJV_COMMAND, check=True, stdout=subprocess.PIPE).stdout
    return raw.decode("latin-1")  # one character per byte, as the C++ side reads it


def encode(text):
    """Vocabulary = the sorted set of characters (bytes); returns (ids (N,) int64, chars)."""
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    return torch.tensor([stoi[c] for c in text], dtype=torch.int64), chars


def split(ids):
    """First 90% train, last 10% validation: n_train = ⌊9N/10⌋."""
    n_train = len(ids) * 9 // 10
    return ids[:n_train], ids[n_train:]


def val_offsets(n_val, block, n_windows):
    """The fixed validation windows: start o_j = ⌊j · (N_val − T − 1) / n⌋, j = 0..n−1, i.e.
    n evenly spaced windows of T+1 characters over the validation split."""
    return [j * (n_val - block - 1) // n_windows for j in range(n_windows)]


def windows(data, offsets, block):
    """x (n, T) = data[o : o+T], y (n, T) = data[o+1 : o+T+1] for each offset o."""
    x = torch.stack([data[o:o + block] for o in offsets])
    y = torch.stack([data[o + 1:o + block + 1] for o in offsets])
    return x, y


@torch.no_grad()
def fixed_val_loss(model, val, block, batch, n_batches):
    """Mean over n_batches batches of `batch` fixed windows (val_offsets), as examples/gpt reports."""
    offs = val_offsets(len(val), block, batch * n_batches)
    total = 0.0
    for b in range(n_batches):
        x, y = windows(val, offs[b * batch:(b + 1) * batch], block)
        total += loss_fn(model(x), y).item()
    return total / n_batches
