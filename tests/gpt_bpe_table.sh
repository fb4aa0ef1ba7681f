#!/usr/bin/env bash
# examples/gpt/bpe_table.sh at a tiny scale (SCALE=0.01: 20 steps for the char row, a model of
# d 16, byte pairs of 300 and 400 tokens, a 3,000-word text): every row of the table is filled,
# the char row takes the 20 steps, and a row's steps follow its measured steps/s.
# Usage: gpt_bpe_table.sh path/to/gpt
set -euo pipefail
bin=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n 3000 /usr/share/dict/words > "$work/text.txt"
SCALE=0.01 DATA="$work/text.txt" VOCABS="300 400" \
    EXTRA="--n-layer 1 --n-head 2 --d 16 --block-size 16 --batch-size 4 --eval-batches 2" \
    "$here/../examples/gpt/bpe_table.sh" "$bin" > "$work/table.md" 2> "$work/log"
cat "$work/table.md"
rows=$(grep -c '^| \(characters\|byte pairs\)' "$work/table.md")
[ "$rows" -eq 3 ] || { echo "FAIL: $rows rows instead of 3"; cat "$work/log"; exit 1; }
# Every cell holds something; the columns: name, parameters, chars/token, k, steps/s, steps, nats/char, nats/token.
if awk -F'|' '/^\| (characters|byte pairs)/ { for (i = 2; i <= 9; i++) if ($i ~ /^ *$/) bad = 1 } END { exit !bad }' \
    "$work/table.md"; then
    echo "FAIL: an empty cell"; exit 1
fi
awk -F'|' '/^\| characters/ { exit !($7 + 0 == 20 && $4 + 0 == 1) }' "$work/table.md" ||
    { echo "FAIL: the char row does not take 20 steps at 1.00 characters per token"; exit 1; }
# steps = round(20 · rate / rate_char) for every row.
awk -F'|' '/^\| characters/ { c = $6 } /^\| (characters|byte pairs)/ { if (int(20 * $6 / c + 0.5) != $7 + 0) bad = 1 }
           END { exit bad }' "$work/table.md" || { echo "FAIL: a row's steps do not follow its steps/s"; exit 1; }
grep -q "^Measured on .*cores" "$work/table.md" || { echo "FAIL: no machine line"; exit 1; }
echo "PASS: 3 rows, each trained for the char run's time"
