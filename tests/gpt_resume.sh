#!/usr/bin/env bash
# A resumed examples/gpt run takes exactly the steps of an uninterrupted one (as char_mlp_resume.sh).
#
# Run A trains a tiny GPT 60 steps in one go. Run B stops after 30 steps (saving model and
# AdamW state, the step and the batch sampler's state), a second process logs 10 more steps and
# is lost before saving, and a third resumes from step 30. A and B write loss.csv (step,
# minibatch loss, val loss on the fixed set, lr); the files must be identical, byte for byte (no
# step logged twice), and so must the final weights. The same holds with byte-pair tokens and the
# row-sparse token table (run P against Q). Then --init-from starts a new run from A's weights, and
# gpt_sample, given A's and P's checkpoints, prints the samples A and P printed at their end.
# Usage: gpt_resume.sh path/to/gpt path/to/gpt_sample
set -euo pipefail
bin=$1 sampler=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n 3000 /usr/share/dict/words > "$work/text.txt"
common=(--data "$work/text.txt" --n-layer 1 --n-head 2 --d 16 --block-size 16 --batch-size 4 --steps 60
        --warmup 5 --eval-every 20 --eval-batches 2)

"$bin" "${common[@]}" --out "$work/A" --sample 80 --prompt "and" > "$work/A.log"
"$bin" "${common[@]}" --sample 0 --out "$work/B" --stop-after 30 > "$work/B1.log"
cp "$work/B/checkpoint.safetensors" "$work/B30.safetensors"
# A run that logged steps 31-40 and died before its checkpoint replaced the one of step 30: played
# by a resume that stops at step 40; B2 then resumes from the copy of step 30 and must not log
# those steps twice.
"$bin" "${common[@]}" --sample 0 --out "$work/B" --resume "$work/B/checkpoint.safetensors" --stop-after 10 > "$work/B1b.log"
# The second half recomputes its blocks (--checkpoint-blocks): not a trajectory flag, so the resume
# takes it and the steps stay identical.
"$bin" "${common[@]}" --sample 0 --out "$work/B" --resume "$work/B30.safetensors" --checkpoint-blocks > "$work/B2.log"

lines=$(wc -l < "$work/A/loss.csv")
if [ "$lines" -lt 7 ]; then echo "FAIL: loss.csv has only $lines lines"; exit 1; fi
if ! diff "$work/A/loss.csv" "$work/B/loss.csv"; then
    echo "FAIL: the resumed run's loss trajectory differs from the uninterrupted one"
    exit 1
fi
cmp "$work/A/model.safetensors" "$work/B/model.safetensors" || { echo "FAIL: the final weights differ"; exit 1; }
grep -q "at step 30" "$work/B2.log" || { echo "FAIL: the second run did not resume at step 30"; exit 1; }
# A resume with another trajectory flag is refused, naming the flag.
if "$bin" "${common[@]}" --sample 0 --out "$work/B" --lr 0.002 --resume "$work/B/checkpoint.safetensors" > "$work/C.log" 2>&1; then
    echo "FAIL: a resume with another --lr was accepted"; exit 1
fi
grep -q -- "--lr" "$work/C.log" || { echo "FAIL: the refusal does not name --lr"; cat "$work/C.log"; exit 1; }

# Byte-pair tokens (300: 44 merges learnt on the train text) with the untied, row-sparse token table
# and AdamW's lazy update: the resumed run reads tokenizer.bpe beside the checkpoint instead of
# learning it again and takes the same steps; loss.csv (with val_nats_per_char), the weights and the
# tokenizer are identical.
bpe=("${common[@]}" --tokenizer bpe --vocab-size 300 --no-tie --sparse-embedding)
"$bin" "${bpe[@]}" --out "$work/P" --sample 30 --prompt "the" --top-k 20 > "$work/P.log"
"$bin" "${bpe[@]}" --sample 0 --out "$work/Q" --stop-after 30 > "$work/Q1.log"
"$bin" "${bpe[@]}" --sample 0 --out "$work/Q" --resume "$work/Q/checkpoint.safetensors" > "$work/Q2.log"
grep -q "read from $work/Q/tokenizer.bpe" "$work/Q2.log" ||
    { echo "FAIL: the byte-pair resume did not read the saved tokenizer"; head -n 3 "$work/Q2.log"; exit 1; }
[ "$(head -n 1 "$work/P/loss.csv")" = "step,train_loss,val_loss,lr,val_nats_per_char" ] ||
    { echo "FAIL: the byte-pair loss.csv has no val_nats_per_char column"; head -n 2 "$work/P/loss.csv"; exit 1; }
if ! diff "$work/P/loss.csv" "$work/Q/loss.csv"; then
    echo "FAIL: the resumed byte-pair run's loss trajectory differs from the uninterrupted one"
    exit 1
fi
cmp "$work/P/model.safetensors" "$work/Q/model.safetensors" || { echo "FAIL: the byte-pair final weights differ"; exit 1; }
cmp "$work/P/tokenizer.bpe" "$work/Q/tokenizer.bpe" || { echo "FAIL: the saved tokenizers differ"; exit 1; }
bpe_lines=$(wc -l < "$work/P/loss.csv")

# --init-from: a new run of 10 steps from A's final weights (a fresh AdamW and schedule, loss.csv
# from step 10) validates lower at step 10 than A did from random weights, and a checkpoint of
# another width or vocabulary is refused, naming the flag or the character.
init=(--n-layer 1 --n-head 2 --block-size 16 --batch-size 4 --steps 10 --eval-every 10
      --eval-batches 2 --sample 0)
"$bin" "${init[@]}" --data "$work/text.txt" --d 16 --init-from "$work/A/checkpoint.safetensors" --out "$work/D" > "$work/D.log"
grep -q "the weights after its step 60" "$work/D.log" || { echo "FAIL: --init-from did not say what it loaded"; cat "$work/D.log"; exit 1; }
val_fresh=$(awk -F, '$1 == 20 { print $3 }' "$work/A/loss.csv")
val_init=$(awk -F, 'NR == 2 && $1 == 10 { print $3 }' "$work/D/loss.csv")
awk -v a="$val_init" -v b="$val_fresh" 'BEGIN { exit !(a != "" && b != "" && a < b - 0.01) }' ||
    { echo "FAIL: --init-from's val loss at its step 10 ($val_init) is not below A's at step 20 ($val_fresh)"; exit 1; }
if "$bin" "${init[@]}" --data "$work/text.txt" --d 32 --init-from "$work/A/checkpoint.safetensors" --out "$work/E" > "$work/E.log" 2>&1; then
    echo "FAIL: --init-from a checkpoint of --d 16 into --d 32 was accepted"; exit 1
fi
grep -q -- "--d 16" "$work/E.log" || { echo "FAIL: the refusal does not name --d 16"; cat "$work/E.log"; exit 1; }
tr q '~' < "$work/text.txt" > "$work/other.txt"
if "$bin" "${init[@]}" --data "$work/other.txt" --d 16 --init-from "$work/A/checkpoint.safetensors" --out "$work/E" > "$work/E.log" 2>&1; then
    echo "FAIL: --init-from on a text of another vocabulary was accepted"; exit 1
fi
grep -q "vocabulary mismatch" "$work/E.log" || { echo "FAIL: the refusal does not say vocabulary"; cat "$work/E.log"; exit 1; }
# gpt_sample rebuilds the model from the flags a checkpoint records and samples with the run's
# seed and settings: its first sample is the one the run printed (the lines after "after the
# prompt:" and before the blank line ahead of "sampling").
run_sample() { awk '/after the prompt:$/ { f = 1; next } /^sampling  / { f = 0 } f' "$1" | sed '$d'; }
tool_sample() { awk '/^model  / { f = 1; next } /^---------------$/ { exit } f' "$1"; }
"$sampler" --checkpoint "$work/A/checkpoint.safetensors" --prompt "and" --max-new-tokens 80 > "$work/SA.log"
"$sampler" --checkpoint "$work/P/checkpoint.safetensors" --prompt "the" --max-new-tokens 30 --top-k 20 > "$work/SP.log"
for pair in "A SA" "P SP"; do
    set -- $pair
    if ! diff <(run_sample "$work/$1.log") <(tool_sample "$work/$2.log"); then
        echo "FAIL: gpt_sample on $1's checkpoint printed another sample than the run"; cat "$work/$2.log"; exit 1
    fi
    [ -n "$(run_sample "$work/$1.log")" ] || { echo "FAIL: no sample found in $1.log"; exit 1; }
done
echo "PASS: $((lines - 1)) logged steps and the final weights identical after resuming at step 30" \
     "(and $((bpe_lines - 1)) with byte pairs and the sparse token table);" \
     "--init-from trains on from them (val $val_init at its step 10, against $val_fresh at A's step 20);" \
     "gpt_sample repeats the runs' samples"
