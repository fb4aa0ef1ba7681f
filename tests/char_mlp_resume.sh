#!/usr/bin/env bash
# A resumed char_mlp run takes exactly the steps of an uninterrupted one.
#
# Run A trains 300 steps in one go. Run B stops after 150 steps (saving a checkpoint), a second
# process logs 50 more steps and is lost before saving, and a third resumes from step 150. A and
# B write loss.csv (step, minibatch loss, val loss, lr); the files must be identical, byte for
# byte (no step logged twice).
# Usage: char_mlp_resume.sh path/to/char_mlp
set -euo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n 4000 /usr/share/dict/words > "$work/words.txt"
common=(--data "$work/words.txt" --steps 300 --warmup 20 --eval-every 100 --embed-dim 4 --hidden 32
        --batch-size 32 --sample 0)

"$bin" "${common[@]}" --out "$work/A" > "$work/A.log"
"$bin" "${common[@]}" --out "$work/B" --stop-after 150 > "$work/B1.log"
cp "$work/B/checkpoint.safetensors" "$work/B150.safetensors"
# A run that logged steps 151-200 and died before its checkpoint: played by a resume that stops
# at step 200; the last run resumes from the copy of step 150 and must not log those steps twice.
"$bin" "${common[@]}" --out "$work/B" --resume "$work/B/checkpoint.safetensors" --stop-after 50 > "$work/B1b.log"
"$bin" "${common[@]}" --out "$work/B" --resume "$work/B150.safetensors" > "$work/B2.log"

lines=$(wc -l < "$work/A/loss.csv")
if [ "$lines" -lt 31 ]; then echo "FAIL: loss.csv has only $lines lines"; exit 1; fi
if ! diff "$work/A/loss.csv" "$work/B/loss.csv"; then
    echo "FAIL: the resumed run's loss trajectory differs from the uninterrupted one"
    exit 1
fi
grep -q "at step 150" "$work/B2.log" || { echo "FAIL: the second run did not resume at step 150"; exit 1; }
echo "PASS: $((lines - 1)) logged steps identical after resuming at step 150"
