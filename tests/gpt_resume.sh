#!/usr/bin/env bash
# A resumed examples/gpt run takes exactly the steps of an uninterrupted one (as char_mlp_resume.sh).
#
# Run A trains a tiny GPT 60 steps in one go. Run B stops after 30 steps (saving model and
# AdamW state, the step and the batch sampler's state), then a second process resumes. Both
# write loss.csv (step, minibatch loss, val loss on the fixed set, lr); the files must be
# identical, byte for byte, and so must the final weights.
# Usage: gpt_resume.sh path/to/gpt
set -euo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n 3000 /usr/share/dict/words > "$work/text.txt"
common=(--data "$work/text.txt" --n-layer 1 --n-head 2 --d 16 --block-size 16 --batch-size 4 --steps 60
        --warmup 5 --eval-every 20 --eval-batches 2 --sample 0)

"$bin" "${common[@]}" --out "$work/A" > "$work/A.log"
"$bin" "${common[@]}" --out "$work/B" --stop-after 30 > "$work/B1.log"
# The second half recomputes its blocks (--checkpoint-blocks): not a trajectory flag, so the resume
# takes it and the steps stay identical.
"$bin" "${common[@]}" --out "$work/B" --resume "$work/B/checkpoint.safetensors" --checkpoint-blocks > "$work/B2.log"

lines=$(wc -l < "$work/A/loss.csv")
if [ "$lines" -lt 7 ]; then echo "FAIL: loss.csv has only $lines lines"; exit 1; fi
if ! diff "$work/A/loss.csv" "$work/B/loss.csv"; then
    echo "FAIL: the resumed run's loss trajectory differs from the uninterrupted one"
    exit 1
fi
cmp "$work/A/model.safetensors" "$work/B/model.safetensors" || { echo "FAIL: the final weights differ"; exit 1; }
grep -q "at step 30" "$work/B2.log" || { echo "FAIL: the second run did not resume at step 30"; exit 1; }
# A resume with another trajectory flag is refused, naming the flag.
if "$bin" "${common[@]}" --out "$work/B" --lr 0.002 --resume "$work/B/checkpoint.safetensors" > "$work/C.log" 2>&1; then
    echo "FAIL: a resume with another --lr was accepted"; exit 1
fi
grep -q -- "--lr" "$work/C.log" || { echo "FAIL: the refusal does not name --lr"; cat "$work/C.log"; exit 1; }
echo "PASS: $((lines - 1)) logged steps and the final weights identical after resuming at step 30"
