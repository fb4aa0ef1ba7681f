#!/usr/bin/env bash
# examples/gpt/lora_psalms.sh — fine-tuning a trained GPT on the Book of Psalms, in full and with LoRA:
# the table of examples/gpt/README.md, "Fine-tuning on the Psalms".
#
#   1. The texts, from Debian's `bible` (one verse a line, led by its reference):
#        rest.txt          the KJV without the Psalms: Ge1:1-Job42:17 and Pr1:1-Rev22:21
#        psalms_train.txt  the first ceil(90%) of the Psalms' 2461 verses: 2215, Psa1:1 to Psa132:3
#        psalms_val.txt    the other 246 verses, Psa132:4 to Psa150:6
#   2. The base: the default GPT with --tokenizer bpe trained on rest.txt (its own 90/10 split).
#   3. The rows, each from the base (--init-from) on psalms_train.txt, validated on psalms_val.txt
#      (--val-data), the same --steps and schedule: full fine-tuning at lr LR_FULL; LoRA (lr LR_LORA,
#      α = r) at r 1, 4, 16 on attention (attn.c_attn, attn.c_proj) and on every Linear (all); LoRA
#      with the token table (when nn::apply_lora adapts an Embedding); and the same model trained
#      from scratch on psalms_train.txt alone (its own tokenizer, lr 1e-3, the same steps).
#   4. Each row's model (a LoRA run's checkpoint: the base and its adapters) evaluated on rest.txt's
#      validation part (--eval-only --init-from, with the row's --lora-* flags): what fine-tuning forgot.
# The markdown table goes to stdout, then the machine and the date; the progress to stderr. Exit
# status 1 if a row's run failed (its row says why).
#
# Usage: examples/gpt/lora_psalms.sh [--quick] [BUILD]   BUILD: a Release build with examples/gpt
#                                                        (default: build), or the gpt binary itself
#   --quick                a tiny model, few steps: a check of the script in seconds, not a result
#   STEPS=500 BASE_STEPS=2000 LR_FULL=3e-4 LR_LORA=1e-3   the fine-tunes' and the base's steps, the lrs
#   WORK=DIR               keep the texts, runs and logs in DIR; a DIR/base/checkpoint.safetensors
#                          already there is the base (trained by an earlier run of this script)
set -euo pipefail
quick=0
if [[ ${1:-} == --quick ]]; then quick=1; shift; fi
build=${1:-build}
gpt=$build/examples/gpt
[[ -f $build && -x $build ]] && gpt=$build
[[ -x $gpt ]] || { echo "lora_psalms.sh: $gpt is not built (cmake --build $build --target gpt)" >&2; exit 2; }
steps=${STEPS:-500} base_steps=${BASE_STEPS:-2000} lr_full=${LR_FULL:-3e-4} lr_lora=${LR_LORA:-1e-3}
model=(--tokenizer bpe --sample 0 --eval-every 100)
ranks=(1 4 16)
if (( quick )); then
    model=(--tokenizer bpe --vocab-size 400 --n-layer 1 --d 32 --n-head 2 --block-size 32 --sample 0 --eval-every 10
           --eval-batches 4)
    steps=20 base_steps=40 ranks=(1 4)
fi
work=${WORK:-$(mktemp -d)}
[[ -n ${WORK:-} ]] || trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1

bible -f "Ge1:1-Job42:17" > "$work/rest.txt"
bible -f "Pr1:1-Rev22:21" >> "$work/rest.txt"
bible -f "Ps1:1-150:6" > "$work/psalms.txt"
verses=$(wc -l < "$work/psalms.txt")
train_verses=$(( (verses * 9 + 9) / 10 ))  # ceil(0.9 · verses)
head -n "$train_verses" "$work/psalms.txt" > "$work/psalms_train.txt"
tail -n +"$((train_verses + 1))" "$work/psalms.txt" > "$work/psalms_val.txt"
if (( quick )); then  # a few thousand verses are enough to check the pipeline
    head -n 3000 "$work/rest.txt" > "$work/r" && mv "$work/r" "$work/rest.txt"
fi
echo "psalms: $verses verses: train $train_verses ($(head -c 8 "$work/psalms_train.txt" | cut -d' ' -f1) to" \
     "$(tail -n 1 "$work/psalms_train.txt" | cut -d' ' -f1)), val $((verses - train_verses))" \
     "($(head -n 1 "$work/psalms_val.txt" | cut -d' ' -f1) to $(tail -n 1 "$work/psalms_val.txt" | cut -d' ' -f1))" >&2

run() {  # run NAME FLAGS...: examples/gpt, its output in $work/NAME.log
    local name=$1
    shift
    echo "$name: $gpt $*" >&2
    "$gpt" "$@" --out "$work/$name" > "$work/$name.log" 2>&1 || { echo "$name failed:" >&2; tail -n 5 "$work/$name.log" >&2; return 1; }
}
psalms=(--data "$work/psalms_train.txt" --val-data "$work/psalms_val.txt")
base=$work/base/checkpoint.safetensors
[[ -f $base ]] || run base "${model[@]}" --data "$work/rest.txt" --steps "$base_steps"
# nats/char on the fixed validation set of an --eval-only log
per_char() { sed -n 's/^val (fixed set) .*(\([0-9.]*\) nats\/char)$/\1/p' "$1"; }
run base_on_psalms "${model[@]}" "${psalms[@]}" --eval-only --init-from "$base"
run base_on_rest "${model[@]}" --data "$work/rest.txt" --eval-only --init-from "$base"
before=$(per_char "$work/base_on_psalms.log")

echo "| row | trainable parameters | optimizer state (B) | peak RSS (MiB) | ms/step | Psalms val nats/char before → after | rest of the KJV val nats/char after | adapter (B) |"
echo "|---|---:|---:|---:|---:|---|---:|---:|"
params=$(sed -n 's/^model .*: \([0-9]*\) parameters.*/\1/p' "$work/base_on_psalms.log")
echo "| base model, no training | 0 of $params | 0 | $(sed -n 's/^peak RSS \([0-9.]*\) MiB.*/\1/p' "$work/base_on_psalms.log") | – | $before | $(per_char "$work/base_on_rest.log") | – |"

row() {  # row LABEL NAME "LORA FLAGS" FLAGS...: train, evaluate on the rest of the KJV, print the table's row
    local label=$1 name=$2
    read -r -a adapters <<< "$3"
    shift 3
    if ! run "$name" "${model[@]}" "$@" "${adapters[@]}" --steps "$steps"; then
        echo "| $label | refused: $(grep -m1 'error' "$work/$name.log" | cut -c1-160) | | | | | | |"
        failed=$((failed + 1))
        return
    fi
    # the trained model (a LoRA run's: the base and its adapters, unmerged) on rest.txt's validation part
    run "${name}_on_rest" "${model[@]}" --data "$work/rest.txt" --eval-only --init-from "$work/$name/checkpoint.safetensors" \
        "${adapters[@]}"
    local log=$work/$name.log trainable total
    total=$(sed -n 's/^model .*: \([0-9]*\) parameters.*/\1/p' "$log")
    trainable=$(sed -n 's/^lora .*trainable \([0-9]*\) parameters.*/\1/p' "$log")
    [[ -n $trainable ]] || trainable=$total
    local frozen=$((total - trainable))
    local state rss ms after rest adapter
    state=$(awk '$1 == "total" { v = $8 } END { print v }' "$log")  # the optimizer table's total row
    rss=$(sed -n 's/^peak RSS \([0-9.]*\) MiB.*/\1/p' "$log")
    # the median of the progress lines' steps/s (evaluations fall between them), as ms per step
    ms=$(sed -n 's/^step .* \([0-9.]*\) steps\/s.*/\1/p' "$log" | sort -g |
         awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f", 1000 / m }')
    after=$(sed -n 's/^loss (nats\/char) .* val \([0-9.]*\) .*/\1/p' "$log")
    rest=$(per_char "$work/${name}_on_rest.log")
    adapter=$(sed -n 's/^adapter .* \([0-9]*\) bytes.*/\1/p' "$log")
    local pct
    pct=$(awk -v t="$trainable" -v n="$((frozen + trainable))" 'BEGIN { printf "%.2f", 100 * t / n }')
    echo "| $label | $trainable ($pct%) | $state | $rss | $ms | $before → $after | $rest | ${adapter:-–} |"
}
failed=0  # rows whose run failed: the exit status
tune=("${psalms[@]}" --init-from "$base")
row "full fine-tune (lr $lr_full)" full "" "${tune[@]}" --lr "$lr_full" --min-lr "$(awk -v l="$lr_full" 'BEGIN { print l / 10 }')"
lora_lr=(--lr "$lr_lora" --min-lr "$(awk -v l="$lr_lora" 'BEGIN { print l / 10 }')")
for targets in attention all; do
    for r in "${ranks[@]}"; do
        row "LoRA r $r, $targets" "lora_${targets}_$r" "--lora-rank $r --lora-targets $targets" "${tune[@]}" "${lora_lr[@]}"
    done
done
r=${ranks[-1]}
row "LoRA r $r, all + token table" lora_emb "--lora-rank $r --lora-targets all,embedding" "${tune[@]}" "${lora_lr[@]}"
row "from scratch on the Psalms (lr 1e-3)" scratch "" "${psalms[@]}"
echo
echo "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), 1 thread, $(date -u +%Y-%m-%d); fine-tunes $steps steps" \
     "(batch 12 × 64 tokens, warmup $((steps / 10)), cosine to lr/10), the base $base_steps steps"
exit $(( failed > 0 ))
