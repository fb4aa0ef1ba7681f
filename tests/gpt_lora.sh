#!/usr/bin/env bash
# examples/gpt fine-tuning with LoRA (--init-from a base, --lora-rank): a tiny base trained 40 steps
# on byte pairs, then adapters on every Linear (the head is tied: all = attention + mlp).
#   a. the start line counts the trainable (the adapters) and frozen parameters, and AdamW holds
#      state for the trainable ones alone (its table's total elements = the trainable count);
#   b. a LoRA run stopped after 20 steps and resumed takes the steps of an uninterrupted one:
#      loss.csv, the adapter file and the merged model.safetensors identical, byte for byte; the
#      same for adapters on the q and v parts of attn.c_attn and on the token table;
#   c. the frozen base in the LoRA run's checkpoint equals the base's weights bit for bit;
#   d. --merge-lora's model.safetensors, read by --eval-only --init-from as a plain model, gives the
#      validation loss of the unmerged adapters (--eval-only --resume), to 1e-5 relative; --init-from
#      the LoRA checkpoint with its --lora-* flags gives the unmerged figure exactly;
#   e. --lora-rank without a base, --lora-alpha without --lora-rank, an unknown target and a LoRA
#      checkpoint given to --init-from without --lora-rank are refused by name; a checkpoint whose
#      --lora-* flags (or a switch) differ from the run's, by those flags;
#   f. with MPIRUN given: 2 ranks all-reduce the adapters' gradients alone, 4 bytes (float32) per
#      trainable parameter a step, against 4 per parameter of the full model without LoRA, under
#      DDP; ZeRO (--zero 2) takes the same steps as DDP.
#   g. an earlier run's model.safetensors or adapter in --out, which this run does not write, is
#      removed; --neighbours of a LoRA checkpoint with the token table adapted are the merged model's.
# Usage: gpt_lora.sh path/to/gpt [MPIRUN [MPIRUN OPTIONS...]]
set -euo pipefail
bin=$1
shift
mpirun=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n 3000 /usr/share/dict/words > "$work/text.txt"
common=(--data "$work/text.txt" --n-layer 1 --n-head 2 --d 16 --block-size 16 --batch-size 4 --warmup 5
        --eval-every 20 --eval-batches 2 --sample 0 --tokenizer bpe --vocab-size 300)
lora=(--lora-rank 2 --lora-alpha 4 --lora-targets all)
"$bin" "${common[@]}" --steps 40 --out "$work/base" > "$work/base.log"
tune=("${common[@]}" --steps 40 --lr 0.003 "${lora[@]}" --merge-lora)

"$bin" "${tune[@]}" --init-from "$work/base/checkpoint.safetensors" --out "$work/A" > "$work/A.log"
trainable=$(sed -n 's/^lora .*trainable \([0-9]*\) parameters.*/\1/p' "$work/A.log")
frozen=$(sed -n 's/^lora .*frozen \([0-9]*\);.*/\1/p' "$work/A.log")
# d 16, V 300, L 1: every Linear (in, out) adds r·(in + out): c_attn (16, 48), c_proj (16, 16),
# c_fc (16, 64), mlp.c_proj (64, 16): 2·(64 + 32 + 80 + 80) = 512.
[ "$trainable" = 512 ] || { echo "FAIL: trainable '$trainable', expected 512"; grep '^lora' "$work/A.log"; exit 1; }
[ "$frozen" = 8368 ] || { echo "FAIL: frozen '$frozen', expected 8368"; exit 1; }
grep -q "AdamW optimizer memory: 8 parameter tensors, 512 elements" "$work/A.log" ||
    { echo "FAIL: AdamW does not hold the 8 adapter tensors alone"; grep AdamW "$work/A.log"; exit 1; }
[ -s "$work/A/adapter/adapter_model.safetensors" ] && [ -s "$work/A/adapter/adapter_config.json" ] ||
    { echo "FAIL: no adapter folder"; exit 1; }

# b. stopped and resumed: the same steps.
"$bin" "${tune[@]}" --init-from "$work/base/checkpoint.safetensors" --out "$work/B" --stop-after 20 > "$work/B1.log"
"$bin" "${tune[@]}" --resume "$work/B/checkpoint.safetensors" --out "$work/B" > "$work/B2.log"
grep -q "at step 20" "$work/B2.log" || { echo "FAIL: the LoRA run did not resume at step 20"; exit 1; }
diff "$work/A/loss.csv" "$work/B/loss.csv" || { echo "FAIL: the resumed LoRA run's losses differ"; exit 1; }
cmp "$work/A/adapter/adapter_model.safetensors" "$work/B/adapter/adapter_model.safetensors" ||
    { echo "FAIL: the resumed LoRA run's adapter differs"; exit 1; }
cmp "$work/A/model.safetensors" "$work/B/model.safetensors" || { echo "FAIL: the merged models differ"; exit 1; }

# b2. the same with the q and v parts of attn.c_attn and the token table adapted (row-sparse rows
# of lora_embedding_A; no --merge-lora: the table is tied to the head).
parts=("${common[@]}" --steps 40 --lr 0.003 --lora-rank 2 --lora-targets q,v,embedding)
"$bin" "${parts[@]}" --init-from "$work/base/checkpoint.safetensors" --out "$work/P" > "$work/P.log"
"$bin" "${parts[@]}" --init-from "$work/base/checkpoint.safetensors" --out "$work/Q" --stop-after 25 > "$work/Q1.log"
"$bin" "${parts[@]}" --resume "$work/Q/checkpoint.safetensors" --out "$work/Q" > "$work/Q2.log"
diff "$work/P/loss.csv" "$work/Q/loss.csv" || { echo "FAIL: the resumed q,v,embedding run's losses differ"; exit 1; }
cmp "$work/P/adapter/adapter_model.safetensors" "$work/Q/adapter/adapter_model.safetensors" ||
    { echo "FAIL: the resumed q,v,embedding run's adapter differs"; exit 1; }

# c. the base's weights, bit for bit, inside the LoRA run's checkpoint (the standard library reads
# safetensors: 8 bytes of header length, the header's JSON, then the data at its offsets).
python3 - "$work/base/checkpoint.safetensors" "$work/A/checkpoint.safetensors" <<'EOF'
import json, struct, sys

def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items()
            if k.startswith("model.")}

base, tuned = tensors(sys.argv[1]), tensors(sys.argv[2])
adapters = [k for k in tuned if ".lora_A." in k or ".lora_B." in k]
frozen = [k for k in tuned if k not in adapters]
if sorted(frozen) != sorted(base) or len(adapters) != 8:
    sys.exit(f"FAIL: the LoRA checkpoint's tensors: {sorted(tuned)}")
changed = [k for k in frozen if tuned[k] != base[k]]
if changed:
    sys.exit(f"FAIL: frozen weights changed by the LoRA run: {changed}")
EOF

# d. the merged model against the adapters, on the fixed validation set.
val() { sed -n 's/^val (fixed set) \([0-9.]*\) nats.*/\1/p' "$1"; }
"$bin" "${common[@]}" --steps 40 --eval-only --init-from "$work/A/model.safetensors" --out "$work/E" > "$work/merged.log"
"$bin" "${tune[@]}" --eval-only --resume "$work/A/checkpoint.safetensors" --out "$work/E" > "$work/unmerged.log"
"$bin" "${common[@]}" --steps 40 --eval-only --resume "$work/base/checkpoint.safetensors" --out "$work/E" > "$work/base_eval.log"
# --init-from a LoRA run's checkpoint (with its --lora-* flags) loads the base and the adapters: the
# way to evaluate them on another text; here the same text, so the --resume figure exactly.
"$bin" "${common[@]}" --steps 40 "${lora[@]}" --eval-only --init-from "$work/A/checkpoint.safetensors" --out "$work/E" > "$work/init.log"
m=$(val "$work/merged.log") u=$(val "$work/unmerged.log") b=$(val "$work/base_eval.log") i=$(val "$work/init.log")
[ -n "$u" ] && [ "$i" = "$u" ] || { echo "FAIL: --init-from the LoRA checkpoint validates $i, --resume $u"; exit 1; }
awk -v m="$m" -v u="$u" 'BEGIN { d = m - u; if (d < 0) d = -d; exit !(m != "" && d <= 1e-5 * u) }' ||
    { echo "FAIL: merged val $m, unmerged $u"; exit 1; }
awk -v u="$u" -v b="$b" 'BEGIN { exit !(u != b) }' || { echo "FAIL: the adapters changed nothing (val $u = base $b)"; exit 1; }

# e. refusals, naming the flag.
refused() {  # refused PATTERN ARGS...: the run fails and its message matches PATTERN
    local pattern=$1
    shift
    if "$bin" "${common[@]}" --steps 10 --out "$work/R" "$@" > "$work/R.log" 2>&1; then
        echo "FAIL: accepted: $*"; exit 1
    fi
    grep -q -- "$pattern" "$work/R.log" || { echo "FAIL: the refusal of '$*' does not say '$pattern'"; cat "$work/R.log"; exit 1; }
}
refused "pass --init-from" --lora-rank 2
refused "needs --lora-rank" --lora-alpha 4 --init-from "$work/base/checkpoint.safetensors"
refused "a LoRA run's checkpoint" --init-from "$work/A/checkpoint.safetensors"
refused "unknown target 'attn'" --lora-rank 2 --lora-targets attn --init-from "$work/base/checkpoint.safetensors"
# a checkpoint whose --lora-* flags differ from the run's is refused by those flags, not by a tensor name
refused "is a full run's checkpoint, without LoRA adapters" --lora-rank 2 --resume "$work/base/checkpoint.safetensors"
refused "saved with --lora-rank 2 --lora-alpha 4 --lora-targets all: pass the same flags" \
    --resume "$work/A/checkpoint.safetensors"
refused "this run has --lora-rank 2 --lora-alpha 4 --lora-targets attention: pass the saved flags" \
    --lora-rank 2 --lora-alpha 4 --init-from "$work/A/checkpoint.safetensors"
refused "give it if saved true, leave it out if false" --no-tie --init-from "$work/base/checkpoint.safetensors"

# g. an earlier run's merged model in --out is not left beside this run's adapter (a LoRA run
#    without --merge-lora writes none), nor an earlier LoRA run's adapter beside a full run's model.
cp -r "$work/A" "$work/S"
"$bin" "${common[@]}" --steps 10 "${lora[@]}" --init-from "$work/base/checkpoint.safetensors" --out "$work/S" > "$work/S.log"
[ ! -e "$work/S/model.safetensors" ] && grep -q "removed $work/S/model.safetensors" "$work/S.log" ||
    { echo "FAIL: the earlier run's model.safetensors stayed beside the LoRA run's adapter"; exit 1; }
"$bin" "${common[@]}" --steps 10 --init-from "$work/base/checkpoint.safetensors" --out "$work/S" > "$work/S2.log"
[ ! -e "$work/S/adapter/adapter_model.safetensors" ] || { echo "FAIL: the earlier LoRA run's adapter stayed"; exit 1; }
untied=("${common[@]}" --no-tie --eval-only --neighbours 3)
"$bin" "${common[@]}" --no-tie --steps 20 --out "$work/NT" > /dev/null
"$bin" "${common[@]}" --no-tie --steps 20 --lr 0.05 --lora-rank 2 --lora-alpha 8 --lora-targets embedding --merge-lora \
    --init-from "$work/NT/checkpoint.safetensors" --out "$work/NTL" > /dev/null
"$bin" "${untied[@]}" --lora-rank 2 --lora-alpha 8 --lora-targets embedding \
    --init-from "$work/NTL/checkpoint.safetensors" --out "$work/E1" | awk '/^nearest/ { on = 1; next } on && /^  /' > "$work/n1"
"$bin" "${untied[@]}" --init-from "$work/NTL/model.safetensors" --out "$work/E2" | awk '/^nearest/ { on = 1; next } on && /^  /' > "$work/n2"
"$bin" "${untied[@]}" --init-from "$work/NT/checkpoint.safetensors" --out "$work/E3" | awk '/^nearest/ { on = 1; next } on && /^  /' > "$work/n3"
[ -s "$work/n1" ] && cmp -s "$work/n1" "$work/n2" && ! cmp -s "$work/n1" "$work/n3" ||
    { echo "FAIL: --neighbours with the table's adapter are not the merged model's"; paste "$work/n1" "$work/n2" "$work/n3"; exit 1; }

# f. 2 ranks: the bytes each rank sends per step.
traffic=""
if [ ${#mpirun[@]} -gt 0 ]; then
    bytes() { sed -n 's/.* \([0-9]*\) bytes from each rank per step.*/\1/p' "$1"; }
    "${mpirun[@]}" -np 2 "$bin" "${common[@]}" --steps 10 --init-from "$work/base/checkpoint.safetensors" \
        --out "$work/F" > "$work/full2.log" 2>&1
    "${mpirun[@]}" -np 2 "$bin" "${common[@]}" --steps 10 "${lora[@]}" --merge-lora \
        --init-from "$work/base/checkpoint.safetensors" --out "$work/L2" > "$work/lora2.log" 2>&1
    "${mpirun[@]}" -np 2 "$bin" "${common[@]}" --steps 10 "${lora[@]}" --merge-lora --zero 2 \
        --init-from "$work/base/checkpoint.safetensors" --out "$work/Z2" > "$work/zero2.log" 2>&1
    full=$(bytes "$work/full2.log") adapted=$(bytes "$work/lora2.log")
    [ "$full" = $((4 * 8368)) ] || { echo "FAIL: full fine-tune all-reduce $full bytes, expected $((4 * 8368))"; exit 1; }
    [ "$adapted" = $((4 * 512)) ] || { echo "FAIL: LoRA all-reduce $adapted bytes, expected $((4 * 512))"; exit 1; }
    diff <(cut -d, -f1-3 "$work/L2/loss.csv") <(cut -d, -f1-3 "$work/Z2/loss.csv") ||
        { echo "FAIL: LoRA under --zero 2 took other steps than under DDP"; exit 1; }
    traffic="; 2 ranks all-reduce $adapted bytes a step with LoRA, $full without"
fi
echo "PASS: $trainable trainable, $frozen frozen; the resumed LoRA run identical; the base unchanged bit for bit;" \
     "merged val $m = unmerged $u (base $b)$traffic"
