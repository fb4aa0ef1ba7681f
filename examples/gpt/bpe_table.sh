#!/usr/bin/env bash
# examples/gpt/bpe_table.sh — characters against byte-pair tokens at the default model, each trained
# for the same wall-clock time: the table of examples/gpt/README.md, "Byte-pair tokens".
#
# For each row (--tokenizer char, then --tokenizer bpe at each --vocab-size of VOCABS):
#   1. a short run of MEASURE steps gives its steps/s (the progress line at step MEASURE);
#   2. its --steps = round(STEPS · its steps/s / the char run's steps/s), so that every row trains
#      as many seconds as the char run's STEPS steps, and its warmup and cosine decay complete;
#   3. that run gives the parameters, the characters per token, the rows a batch looks up (k of V)
#      and the validation loss per character (and per token) on the fixed set.
# The markdown table goes to stdout, then the machine (lscpu's model name), the cores and the date;
# the progress to stderr.
#
# Usage: examples/gpt/bpe_table.sh [BUILD]        BUILD: a Release build with examples/gpt (default:
#                                                 build), or the gpt binary itself
#   STEPS=2000  MEASURE=50       the char run's steps, the steps of each measuring run
#   SCALE=0.01                   multiplies STEPS and MEASURE (at least 10 each): a trial in seconds
#   VOCABS="1024 4096 8192"      the byte-pair rows' --vocab-size
#   DATA=FILE                    train on FILE instead of the KJV
#   EXTRA="--d 16 ..."           flags added to every run (tests/gpt_bpe_table.sh: a tiny model)
set -euo pipefail
build=${1:-build}
gpt=$build/examples/gpt
[[ -f $build && -x $build ]] && gpt=$build
[[ -x $gpt ]] || { echo "bpe_table.sh: $gpt is not built (cmake --build $build --target gpt)" >&2; exit 2; }
scale=${SCALE:-1}
scaled() { awk -v n="$1" -v s="$scale" 'BEGIN { v = int(n * s + 0.5); print (v < 10 ? 10 : v) }'; }
steps=$(scaled "${STEPS:-2000}")
measure=$(scaled "${MEASURE:-50}")
read -r -a vocabs <<< "${VOCABS:-1024 4096 8192}"
read -r -a extra <<< "${EXTRA:-}"
data=()
[[ -n ${DATA:-} ]] && data=(--data "$DATA")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1

# run NAME FLAGS...: examples/gpt with the common flags, its output in $work/NAME.log.
run() {
    local name=$1
    shift
    echo "bpe_table.sh: examples/gpt ${data[*]} ${extra[*]} $* (${name})" >&2
    "$gpt" "${data[@]}" "${extra[@]}" --sample 0 --out "$work/$name" "$@" > "$work/$name.log"
}
# value LOG PERL-REGEX: the first capture of the last line of LOG that matches.
value() { perl -ne "print \"\$1\\n\" if /$2/" "$1" | tail -n 1; }

# steps/s of a row: MEASURE steps, read at step MEASURE, before the final evaluation of step MEASURE + 10.
rate() {
    local name=$1
    shift
    run "measure-$name" --steps $((measure + 10)) --warmup 0 --eval-every 1000000 "$@"
    value "$work/measure-$name.log" "^step +$measure\/\d+ .* ([0-9.]+) steps\/s"
}

rows=("char")
for v in "${vocabs[@]}"; do rows+=("bpe-$v"); done
flags_of() { if [[ $1 == char ]]; then echo ""; else echo "--tokenizer bpe --vocab-size ${1#bpe-}"; fi; }

declare -A rate_of
for row in "${rows[@]}"; do
    read -r -a f <<< "$(flags_of "$row")"
    rate_of[$row]=$(rate "$row" "${f[@]}")
    [[ -n ${rate_of[$row]} ]] || { echo "bpe_table.sh: no steps/s measured for $row" >&2; exit 1; }
done

echo "| tokens | parameters | characters per token | rows a batch looks up (k of V) | steps/s | steps | val nats/char | val nats/token |"
echo "|---|---|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
    read -r -a f <<< "$(flags_of "$row")"
    n=$(awk -v s="$steps" -v r="${rate_of[$row]}" -v c="${rate_of[char]}" 'BEGIN { printf "%d", s * r / c + 0.5 }')
    run "$row" --steps "$n" "${f[@]}"
    log=$work/$row.log
    params=$(value "$log" ": (\d+) parameters")
    if [[ $row == char ]]; then
        name="characters (V $(value "$log" ", V (\d+) →"))"
        per_char="1.00"
        k="≤ $(value "$log" ", V (\d+) →") of $(value "$log" ", V (\d+) →")"
        val_char=$(value "$log" "^loss \(nats\) +train [0-9.]+ +val ([0-9.]+)")
        val_token=$val_char
    else
        name="byte pairs, V ${row#bpe-}"
        per_char=$(value "$log" ", ([0-9.]+) characters per token")
        k="$(value "$log" "looks up k = (\d+) distinct") of ${row#bpe-}"
        val_char=$(value "$log" "^loss \(nats\/char\) +train [0-9.]+ +val ([0-9.]+)")
        val_token=$(value "$log" "^loss \(nats\/token\) +train [0-9.]+ +val ([0-9.]+)")
    fi
    echo "| $name | $params | $per_char | $k | ${rate_of[$row]} | $n | $val_char | $val_token |"
done
echo
echo "Measured on $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M') UTC:" \
     "\`${SCALE:+SCALE=$SCALE }examples/gpt/bpe_table.sh\`, each row trained as long as the char run's $steps steps" \
     "(its steps/s from $measure steps)."
