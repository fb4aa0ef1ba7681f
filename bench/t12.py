"""bench/t12.py — workload T12 of bench/compare.py: a LoRA step against a full fine-tuning step.

    rows(runs, tools)   the T12 rows of the table, from compare.py's runs of xgrad_bench's ^T12_

T1's GPT step (L 4, H 4, d 128, B 12 windows of T 64, V 73, AdamW, clip 1.0) three ways, timed in
the same process, xgrad alone (bench/xgrad_bench.cpp): _full, every parameter trained; _lora,
nn::apply_lora with r 8, α 16 on every block's attn.c_attn, attn.c_proj, mlp.c_fc and mlp.c_proj,
the rest frozen; _frozen, the bound LoRA approaches as r → 0 (no adapter, every parameter frozen but
wpe: dX through every layer, no dW). The memory is the optimizer's report after the timed steps,
exact bytes (counters opt_state_bytes: AdamW's m, v and step counts; param_grad_bytes: parameters
and their gradients). Target: LoRA at least 1.3x the full step's steps/s.

`tools` carries compare.py's helpers: fmt_range, met_at_least. Only the standard library is used.
"""


def rows(runs, tools):
    """The T12 rows: full, LoRA and the frozen bound in steps/s with their ratios to full, then the bytes."""
    fmt_range, met_at_least = tools["fmt_range"], tools["met_at_least"]
    full = [1 / r["T12_gpt_step_full"]["seconds"] for r in runs]
    lora = [1 / r["T12_gpt_step_lora"]["seconds"] for r in runs]
    frozen = [1 / r["T12_gpt_step_frozen"]["seconds"] for r in runs]
    ratio = [x / f for x, f in zip(lora, full)]
    f0, l0 = runs[0]["T12_gpt_step_full"], runs[0]["T12_gpt_step_lora"]
    sps = lambda v: f"{v:,.1f}"
    nbytes = lambda v: f"{v:,.0f}"
    return [("T12 GPT step (T1's model: L4 H4 d128 T64 B12 V73, AdamW, clip), full fine-tuning", "steps/s",
             fmt_range(full, sps), "", "", "", ""),
            (f"T12   LoRA r 8 on attention + MLP ({l0['trainable']:,.0f} of {l0['parameters']:,.0f} parameters "
             f"trainable, {100 * l0['trainable'] / l0['parameters']:.1f}%); ratio LoRA / full", "steps/s",
             fmt_range(lora, sps), "", fmt_range(ratio, lambda v: f"{v:.2f}x"), ">= 1.3x", met_at_least(ratio, 1.3)),
            ("T12   the bound: no adapter, every parameter frozen but wpe (dX through every layer, no dW); ratio to full",
             "steps/s", fmt_range(frozen, sps), "", fmt_range([x / f for x, f in zip(frozen, full)], lambda v: f"{v:.2f}x"),
             "", ""),
            ("T12   AdamW state (m, v, t), full fine-tuning / LoRA", "B", nbytes(f0["opt_state_bytes"]), "",
             f"{l0['opt_state_bytes']:,.0f} ({l0['opt_state_bytes'] / f0['opt_state_bytes'] * 100:.1f}%)", "", ""),
            ("T12   parameters + gradients, full fine-tuning / LoRA", "B", nbytes(f0["param_grad_bytes"]), "",
             f"{l0['param_grad_bytes']:,.0f} ({l0['param_grad_bytes'] / f0['param_grad_bytes'] * 100:.1f}%)", "", "")]
