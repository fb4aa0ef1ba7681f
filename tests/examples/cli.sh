#!/usr/bin/env bash
# The examples' command lines, run whole: every bad flag is refused up front with a message that
# names it, as does a --data that is not a regular file and an output path in the way; a save that
# fails at the end loses only its own file; a diverged run stops without a checkpoint, a resume
# on another text is refused, gpt's default --warmup fits a short run, and an --out full of shell
# and gnuplot metacharacters still gets its pictures.
#
# A refusal must exit non-zero, print "<program>: error:" and the expected words, take no
# training step (no "step" line, no loss.csv) and return within 1 s (each run reads at most a
# 3,000-line text: the check comes before the work, not after it).
# Usage: cli.sh path/to/gpt path/to/char_mlp path/to/word2vec [path/to/gpt_sample]
set -euo pipefail
gpt=$1 char_mlp=$2 word2vec=$3 gpt_sample=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n 3000 /usr/share/dict/words > "$work/text.txt"
head -n 4000 /usr/share/dict/words > "$work/words.txt"
tac "$work/text.txt" > "$work/reversed.txt"  # the same bytes in another order
# A flag may be given once (CLI11 refuses a repeat), so these leave out what the checks vary.
gpt_model=(--n-layer 1 --n-head 2 --d 16 --block-size 16 --batch-size 4 --warmup 0 --eval-batches 2 --eval-every 5)
mlp_model=(--embed-dim 4 --hidden 16 --batch-size 16 --warmup 0 --eval-every 5)
tiny_gpt=(--data "$work/text.txt" "${gpt_model[@]}")
tiny_mlp=(--data "$work/words.txt" "${mlp_model[@]}")
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# refused "WHAT" "EXPECTED WORDS" -- program flags...   (every run gets a fresh --out)
# OUT=DIR refused ...: the run writes into DIR, which the check prepared (files in the way).
refused() {
    local what=$1 expect=$2 out=${OUT:-"$work/out$RANDOM"}
    shift 3
    local start=$EPOCHREALTIME rc=0
    timeout 20 "$@" --out "$out" > "$work/log" 2>&1 || rc=$?
    local ms=$(( (${EPOCHREALTIME/./} - ${start/./}) / 1000 ))
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then fail "$what: exit status $rc"; tail -n 3 "$work/log"; return; fi
    grep -q ": error:" "$work/log" || { fail "$what: no '<program>: error:' line"; tail -n 3 "$work/log"; return; }
    local word
    IFS='|' read -ra words <<< "$expect"
    for word in "${words[@]}"; do
        grep -qF -- "$word" "$work/log" || { fail "$what: the message lacks '$word'"; tail -n 3 "$work/log"; return; }
    done
    if grep -qE "^(step|epoch) " "$work/log" || [ -e "$out/loss.csv" ]; then fail "$what: training started"; return; fi
    if [ "$ms" -ge 1000 ]; then fail "$what: refused only after $ms ms"; return; fi
    echo "ok   $what ($ms ms): $(grep ': error:' "$work/log" | head -1)"
}

echo "---- non-finite and lenient numbers"
for flag in --lr --min-lr --beta1 --beta2 --weight-decay --grad-clip --dropout --temperature; do
    refused "gpt $flag nan" "$flag|'nan'|finite" -- "$gpt" "${tiny_gpt[@]}" --steps 3 $flag nan
done
refused "gpt --lr inf" "--lr|'inf'" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --lr inf
refused "gpt --steps 0x10" "--steps|'0x10'|[1, 2147483647]" -- "$gpt" "${tiny_gpt[@]}" --steps 0x10
refused "gpt --steps +5" "--steps|'+5'" -- "$gpt" "${tiny_gpt[@]}" --steps +5
refused "gpt --steps 1e3" "--steps|'1e3'" -- "$gpt" "${tiny_gpt[@]}" --steps 1e3
refused "gpt --seed -1" "--seed|'-1'|18446744073709551615" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --seed -1
refused "gpt --batch-size 4x" "--batch-size|'4x'" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --batch-size 4x
for flag in --lr --weight-decay; do
    refused "char_mlp $flag nan" "$flag|'nan'" -- "$char_mlp" "${tiny_mlp[@]}" --steps 3 $flag nan
done
refused "char_mlp --steps 0x10" "--steps|'0x10'" -- "$char_mlp" "${tiny_mlp[@]}" --steps 0x10
refused "char_mlp --seed -1" "--seed|'-1'" -- "$char_mlp" "${tiny_mlp[@]}" --steps 3 --seed -1
for flag in --lr --sample; do
    refused "word2vec $flag nan" "$flag|'nan'" -- "$word2vec" --corpus "$work/text.txt" $flag nan
done
refused "word2vec --min-count 0x5" "--min-count|'0x5'" -- "$word2vec" --corpus "$work/text.txt" --min-count 0x5
refused "word2vec --seed -1" "--seed|'-1'" -- "$word2vec" --corpus "$work/text.txt" --seed -1

echo "---- flags that only make sense together, or with the data"
refused "gpt --heatmap-head 7" "--heatmap-head|7|--n-head 2" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --heatmap-head 7
refused "gpt --heatmap-layer 5" "--heatmap-layer|5|--n-layer 1" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --heatmap-layer 5
refused "gpt --prompt ☃" "--prompt|vocabulary" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --prompt "☃"
refused "gpt --n-head 3 --d 16" "--n-head 3|--d 16" -- "$gpt" --data "$work/text.txt" --steps 3 --warmup 0 --n-head 3 --d 16
refused "gpt --arch llama --pos learned" "--pos learned|--arch llama|rope" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --arch llama --pos learned
refused "gpt --n-kv-head 3" "--n-kv-head 3|--n-head 2" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --n-kv-head 3
refused "gpt --ffn-hidden 64 (gpt2)" "--ffn-hidden|--arch llama" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --ffn-hidden 64
refused "gpt --kv-cache maybe" "--kv-cache|maybe" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --kv-cache maybe
refused "gpt --zero 3" "--zero|'3'|[0, 2]" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --zero 3
refused "gpt --warmup 5 --steps 3" "--warmup 5|--steps 3|--warmup 3 or less" -- "$gpt" --data "$work/text.txt" --steps 3 --warmup 5
refused "gpt --data DIR" "is a directory" -- "$gpt" --data "$work" --steps 3 --warmup 0
refused "word2vec --corpus DIR" "is a directory" -- "$word2vec" --corpus "$work"
refused "gpt --batch-size 2147483647" "--batch-size|memory" -- "$gpt" --data "$work/text.txt" --steps 3 --warmup 0 --batch-size 2147483647
refused "gpt --arch llama --ffn-hidden 2147483647" "memory|--ffn-hidden 2147483647" -- "$gpt" --data "$work/text.txt" --steps 3 --warmup 0 --arch llama --ffn-hidden 2147483647
refused "gpt --d 65536 --n-layer 256" "memory|parameters" -- "$gpt" --data "$work/text.txt" --steps 3 --warmup 0 --d 65536 --n-layer 256
refused "char_mlp --batch-size 2147483647" "--batch-size|memory" -- "$char_mlp" --data "$work/words.txt" --steps 3 --batch-size 2147483647
refused "word2vec --batch-size 1048576 --dim 4096" "--batch-size|memory" -- "$word2vec" --corpus "$work/text.txt" --min-count 1 --batch-size 1048576 --dim 4096 --negatives 100

echo "---- a --data that is not a regular file, or sizes whose per-step buffers exceed memory"
mkfifo "$work/fifo"
refused "gpt --data FIFO" "fifo'|FIFO" -- "$gpt" --data "$work/fifo" --steps 3 --warmup 0
refused "char_mlp --data FIFO" "fifo|FIFO" -- "$char_mlp" --data "$work/fifo" --steps 3
refused "word2vec --corpus FIFO" "fifo'|FIFO" -- "$word2vec" --corpus "$work/fifo"
# Under a cap of 8 GB of address space, so that a run the checks let through fails fast (bad_alloc)
# instead of filling the machine's memory. Not under AddressSanitizer, whose shadow memory alone
# reserves terabytes of address space (there the checks run uncapped: each refuses before reading).
capped=(bash -c 'ulimit -v 8000000 && exec "$@"' capped)
# An instrumented program names the runtime's entry point, __asan_init, whether it links the
# runtime dynamically (GCC) or statically (Clang).
if grep -q -a __asan_init "$gpt"; then capped=(); fi
refused "gpt --data /dev/zero" "/dev/zero|character device" -- "${capped[@]}" "$gpt" --data /dev/zero --steps 3 --warmup 0
refused "gpt --batch-size 2147483646 --grad-accum 2147483646" "--batch-size 2147483646|memory" -- "${capped[@]}" \
    "$gpt" --data "$work/text.txt" --steps 3 --warmup 0 --batch-size 2147483646 --grad-accum 2147483646
refused "gpt --batch-size 1048576 --grad-accum 1048576 --eval-batches 100000" "--eval-batches|memory" -- "${capped[@]}" \
    "$gpt" --data "$work/text.txt" --steps 3 --warmup 0 --batch-size 1048576 --grad-accum 1048576 --eval-batches 100000
refused "char_mlp --batch-size 2147483646 --grad-accum 2147483646" "--batch-size 2147483646|memory" -- "${capped[@]}" \
    "$char_mlp" --data "$work/words.txt" --steps 3 --batch-size 2147483646 --grad-accum 2147483646

echo "---- an output path in the way is refused before the first step"
in_the_way() {  # in_the_way NAME FILE KIND: --out DIR in which FILE is a directory, a loop or a dangling link
    local dir="$work/way-$1-$2-$3"
    mkdir -p "$dir"
    case $3 in
        dir) mkdir "$dir/$2" ;;
        dangling) ln -s "/nonexistent-dir-of-cli-sh/$2" "$dir/$2" ;;  # into a missing directory
        *) ln -s "$2" "$dir/$2" ;;
    esac
    echo "$dir"
}
OUT=$(in_the_way gpt checkpoint.safetensors dir) refused "gpt --out with checkpoint.safetensors a directory" \
    "checkpoint.safetensors'|is a directory" -- "$gpt" "${tiny_gpt[@]}" --steps 3
OUT=$(in_the_way gpt model.safetensors loop) refused "gpt --out with model.safetensors a symlink loop" \
    "model.safetensors'|symbolic links" -- "$gpt" "${tiny_gpt[@]}" --steps 3
OUT=$(in_the_way char_mlp checkpoint.safetensors dir) refused "char_mlp --out with checkpoint.safetensors a directory" \
    "checkpoint.safetensors'|is a directory" -- "$char_mlp" "${tiny_mlp[@]}" --steps 3
OUT=$(in_the_way word2vec embeddings.safetensors dir) refused "word2vec --out with embeddings.safetensors a directory" \
    "embeddings.safetensors'|is a directory" -- "$word2vec" --corpus "$work/text.txt"
OUT=$(in_the_way word2vec vocab.txt loop) refused "word2vec --out with vocab.txt a symlink loop" \
    "vocab.txt'|symbolic links" -- "$word2vec" --corpus "$work/text.txt"
for f in checkpoint.safetensors model.safetensors loss.png attention.csv; do
    OUT=$(in_the_way gpt $f dangling) refused "gpt --out with $f a link into a missing directory" \
        "$f'|/nonexistent-dir-of-cli-sh" -- "$gpt" "${tiny_gpt[@]}" --steps 3
done
OUT=$(in_the_way char_mlp checkpoint.safetensors dangling) refused \
    "char_mlp --out with checkpoint.safetensors a link into a missing directory" \
    "checkpoint.safetensors'|/nonexistent-dir-of-cli-sh" -- "$char_mlp" "${tiny_mlp[@]}" --steps 3
for f in embeddings.safetensors vocab.txt pca.png; do
    OUT=$(in_the_way word2vec $f dangling) refused "word2vec --out with $f a link into a missing directory" \
        "$f'|/nonexistent-dir-of-cli-sh" -- "$word2vec" --corpus "$work/text.txt"
done

echo "---- byte-pair tokens: --tokenizer, --vocab-size, --sparse-embedding, and the tokenizer beside a checkpoint"
refused "gpt --tokenizer bpr" "--tokenizer|bpr" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --tokenizer bpr
refused "gpt --vocab-size 255" "--vocab-size|'255'|[256, 2147483647]" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --tokenizer bpe --vocab-size 255
refused "gpt --vocab-size with --tokenizer char" "--vocab-size 300|--tokenizer bpe" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --vocab-size 300
refused "gpt --sparse-embedding with the tied head" "--sparse-embedding|--no-tie" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --sparse-embedding
refused "gpt --vocab-size 2147483647" "memory|--vocab-size 2147483647|token table" -- "$gpt" "${tiny_gpt[@]}" --steps 3 \
    --tokenizer bpe --vocab-size 2147483647
head -c 3000 "$work/text.txt" > "$work/short.txt"  # its merges run out within milliseconds
refused "gpt --vocab-size 100000 on a short text" "--vocab-size 100000|merges" -- "$gpt" --data "$work/short.txt" \
    "${gpt_model[@]}" --steps 3 --tokenizer bpe --vocab-size 100000
OUT=$(in_the_way gpt tokenizer.bpe dir) refused "gpt --out with tokenizer.bpe a directory" \
    "tokenizer.bpe'|is a directory" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --tokenizer bpe --vocab-size 300
"$gpt" "${tiny_gpt[@]}" --tokenizer bpe --vocab-size 300 --steps 6 --stop-after 3 --sample 0 --out "$work/bpe" > /dev/null
"$gpt" "${tiny_gpt[@]}" --steps 6 --stop-after 3 --sample 0 --out "$work/char" > /dev/null
refused "gpt --tokenizer bpe --resume of a character run" "--resume|tokenizer.bpe|--tokenizer" -- "$gpt" "${tiny_gpt[@]}" \
    --steps 6 --tokenizer bpe --vocab-size 300 --resume "$work/char/checkpoint.safetensors"
refused "gpt --tokenizer bpe --resume of a missing checkpoint" "--resume|$work/nowhere/checkpoint.safetensors|no such file" \
    -- "$gpt" "${tiny_gpt[@]}" --steps 6 --tokenizer bpe --vocab-size 300 --resume "$work/nowhere/checkpoint.safetensors"
# A byte-pair sample is printed, prompt and all, with U+FFFD for ill-formed UTF-8: not the raw byte 0xFF.
"$gpt" "${tiny_gpt[@]}" --tokenizer bpe --vocab-size 300 --steps 1 --sample 1 --prompt $'\xff' --out "$work/bpe-ff" \
    > "$work/log" 2>&1 || fail "gpt --tokenizer bpe --prompt 0xFF: exit status $?"
if LC_ALL=C grep -q $'\xff' "$work/log" || [ "$(sed -n '/after the prompt:/{n;p}' "$work/log" | head -c 3)" != $'\xEF\xBF\xBD' ]; then
    fail "gpt --tokenizer bpe --prompt 0xFF: the byte is printed raw, not as U+FFFD"
else
    echo "ok   gpt --tokenizer bpe --prompt 0xFF prints U+FFFD"
fi
# A sample of byte tokens after one step holds control bytes (ESC, NUL, BEL, CR): the terminal gets
# them as \uXXXX, as minbpe's render_token writes them, and sample.txt the bytes as sampled.
"$gpt" "${tiny_gpt[@]}" --tokenizer bpe --vocab-size 300 --steps 1 --sample 200 --prompt $'\e[2J' --out "$work/bpe-esc" \
    > "$work/log" 2>&1 || fail "gpt --tokenizer bpe --prompt ESC[2J: exit status $?"
if LC_ALL=C grep -qaP '[\x00-\x08\x0b-\x1f\x7f]' "$work/log" || ! grep -qF '\u001b[2J' "$work/log" ||
    [ "$(head -c 4 "$work/bpe-esc/sample.txt")" != $'\e[2J' ] ||
    ! LC_ALL=C grep -qaP '[\x00-\x08\x0b-\x1f\x7f]' <(tail -c +5 "$work/bpe-esc/sample.txt") ||
    ! grep -qF "the bytes in $work/bpe-esc/sample.txt" "$work/log"; then
    fail "gpt --tokenizer bpe --prompt ESC[2J: control bytes printed raw, or sample.txt not the bytes as sampled"
else
    echo "ok   gpt --tokenizer bpe --prompt ESC[2J prints \\u001b[2J, writes the bytes to sample.txt"
fi
refused "gpt --resume of a byte-pair run without --tokenizer bpe" "saved with --tokenizer bpe|--tokenizer char" -- \
    "$gpt" "${tiny_gpt[@]}" --steps 6 --resume "$work/bpe/checkpoint.safetensors"
refused "gpt --resume of a byte-pair run with another --vocab-size" "has 300 tokens|pass --vocab-size 300" -- \
    "$gpt" "${tiny_gpt[@]}" --steps 6 --tokenizer bpe --vocab-size 400 --resume "$work/bpe/checkpoint.safetensors"
# Another tokenizer of the same size beside the checkpoint: learnt on the text reversed.
"$gpt" --data "$work/reversed.txt" "${gpt_model[@]}" --tokenizer bpe --vocab-size 300 --steps 1 --sample 0 \
    --out "$work/bpe-other" > /dev/null
cp "$work/bpe-other/tokenizer.bpe" "$work/bpe/tokenizer.bpe"
refused "gpt --resume with another tokenizer.bpe beside the checkpoint" "tokenizer mismatch" -- \
    "$gpt" "${tiny_gpt[@]}" --steps 6 --tokenizer bpe --vocab-size 300 --resume "$work/bpe/checkpoint.safetensors"

echo "---- a save that fails at the end (here: a file-size limit, as a full disk) loses only its own file"
# ulimit -f 30: files up to 30 KiB; the tiny GPT's model.safetensors fits, its checkpoint (with
# AdamW's two moments, 3 times as large) does not. SIGXFSZ ignored: the write fails with EFBIG.
rc=0
(trap '' XFSZ; ulimit -f 30; exec "$gpt" "${tiny_gpt[@]}" --steps 3 --sample 0 --out "$work/full") > "$work/log" 2>&1 || rc=$?
if [ "$rc" -eq 0 ] || ! grep -qF "not written: $work/full/checkpoint.safetensors" "$work/log" ||
    ! grep -qF "written: $work/full/model.safetensors" "$work/log" || [ ! -s "$work/full/model.safetensors" ] ||
    [ ! -s "$work/full/loss.csv" ]; then
    fail "gpt with a failing checkpoint save: exit $rc"; tail -n 4 "$work/log"; ls -l "$work/full"
else
    echo "ok   gpt with a failing checkpoint save: exit $rc, $(grep ': error:' "$work/log")"
fi

# The same limit with SIGXFSZ at its default action, as a shell gives it, which ends a process at
# its first write past the limit (exit 153): the run names the file and the limit on its last line,
# leaves no temporary behind and keeps model.safetensors, which fits.
rc=0
(ulimit -f 30; exec env --default-signal=XFSZ "$gpt" "${tiny_gpt[@]}" --steps 3 --sample 0 --out "$work/fsize") \
    > "$work/log" 2>&1 || rc=$?
last=$(tail -n 1 "$work/log")
expected="gpt: error: not written: $work/fsize/checkpoint.safetensors (save_safetensors: writing '$work/fsize/checkpoint.safetensors' failed (the file size limit (ulimit -f / RLIMIT_FSIZE) of 30720 bytes was reached)"
if [ "$rc" -ne 1 ] || [ "${last#"$expected"}" = "$last" ] || [ ! -s "$work/fsize/model.safetensors" ] ||
    compgen -G "$work/fsize/*.tmp-*" > /dev/null; then
    fail "gpt under ulimit -f with SIGXFSZ at its default: exit $rc"; tail -n 2 "$work/log"; ls -l "$work/fsize"
else
    echo "ok   gpt under ulimit -f with SIGXFSZ at its default: exit 1, no temporary left, $(head -c 100 <<< "$last")..."
fi

echo "---- output that cannot be written (stdout and stderr on /dev/full) ends the run with status 1, not an abort"
for prog in gpt char_mlp; do
    rc=0
    if [ $prog = gpt ]; then flags=("${tiny_gpt[@]}"); else flags=("${tiny_mlp[@]}"); fi
    "${!prog}" "${flags[@]}" --steps 3 --out "$work/full-$prog" > /dev/full 2> /dev/full || rc=$?
    if [ "$rc" -ne 1 ]; then fail "$prog with stdout and stderr on /dev/full: exit $rc"; else echo "ok   $prog with stdout and stderr on /dev/full: exit 1"; fi
done
# Files of at most 1 KiB (SIGXFSZ ignored): the log's own write fails mid-run, then the error's.
rc=0
(trap '' XFSZ; ulimit -f 1; exec "$gpt" "${tiny_gpt[@]}" --steps 400 --out "$work/tiny-limit" > "$work/limited.log" 2>&1) || rc=$?
if [ "$rc" -ne 1 ]; then fail "gpt with files limited to 1 KiB: exit $rc"; else echo "ok   gpt with files limited to 1 KiB: exit 1"; fi

# ulimit -f 1 (1 KiB): loss.csv of 3 steps fits; attention.csv, the PNGs and the checkpoints do
# not. A picture not written is named in the final line, and no "loss curve:" line claims it.
if command -v gnuplot > /dev/null 2>&1; then
    # The output goes through a pipe: a log file would be held to 1 KiB too.
    (trap '' XFSZ; ulimit -f 1; s=0; "$gpt" "${tiny_gpt[@]}" --steps 3 --sample 0 --out "$work/full1" || s=$?; echo $s > "$work/rc") 2>&1 |
        cat > "$work/log"
    rc=$(cat "$work/rc")
    if [ "$rc" -eq 0 ] || ! grep -q "not written: .*$work/full1/loss.png" "$work/log" ||
        ! grep -q "not written: .*$work/full1/attention.png" "$work/log" ||
        grep -qE "^(loss curve|attention heatmap):" "$work/log"; then
        fail "gpt with pictures that cannot be written: exit $rc"; tail -n 6 "$work/log"
    else
        echo "ok   gpt with pictures that cannot be written: exit $rc, named in 'not written'"
    fi
fi

# loss.csv outgrows 1 KiB within the 600 steps: the run says so once on stderr, trains on to its
# last step, and names loss.csv in the final line.
(trap '' XFSZ; ulimit -f 1; s=0; "$char_mlp" "${tiny_mlp[@]}" --steps 600 --out "$work/full2" 2>&3 || s=$?
    echo $s > "$work/rc") 3> >(cat > "$work/err") | cat > "$work/log"
rc=$(cat "$work/rc")
sleep 0.2  # the stderr pipe's cat finishes
if [ "$rc" -eq 0 ] || [ "$(grep -c "loss.csv: rows from step .* training goes on" "$work/err")" -ne 1 ] ||
    ! grep -q "not written: .*$work/full2/loss.csv (rows from step" "$work/err" || ! grep -q "step *600/600" "$work/log"; then
    fail "char_mlp with a loss.csv that stops growing: exit $rc"; tail -n 4 "$work/err"
else
    echo "ok   char_mlp with a loss.csv that stops growing: exit $rc, $(head -c 120 "$work/err" | tr '\n' ' ')"
fi

echo "---- a diverged run stops, non-zero, and keeps the last good checkpoint"
diverge() {  # diverge NAME "BAD FLAGS" PROGRAM FLAGS...   (BAD FLAGS split on spaces)
    local name=$1 out="$work/$1-diverge" bad=($2)
    shift 2
    "$@" --steps 2 --out "$out" > /dev/null
    cp "$out/checkpoint.safetensors" "$work/good.safetensors"
    local rc=0
    "$@" --steps 2 "${bad[@]}" --out "$out" > "$work/log" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then fail "$name ${bad[*]}: exit status 0"; tail -3 "$work/log"; return; fi
    grep -q "diverged" "$work/log" || { fail "$name ${bad[*]}: no 'diverged' message"; tail -3 "$work/log"; return; }
    cmp -s "$out/checkpoint.safetensors" "$work/good.safetensors" ||
        { fail "$name ${bad[*]} replaced the good checkpoint"; return; }
    echo "ok   $name ${bad[*]}: $(grep ': error:' "$work/log")"
}
# --lr 1e300: the first training loss is already inf. A huge --weight-decay: the update of the
# last step ruins the weights after its (finite) training loss, so only the validation loss of
# that step can tell, and it must, before the checkpoint is written. char_mlp's needs weights
# that overflow to inf (1e30): after 1e20 its validation loss can stay finite (about 4e34 nats
# on some CPUs' kernels), large but no proof of divergence.
diverge gpt "--lr 1e300" "$gpt" "${tiny_gpt[@]}"
diverge char_mlp "--lr 1e300" "$char_mlp" "${tiny_mlp[@]}"
diverge gpt "--weight-decay 1e20" "$gpt" "${tiny_gpt[@]}"
diverge char_mlp "--weight-decay 1e30" "$char_mlp" "${tiny_mlp[@]}"

echo "---- an --out with a newline is refused before it reaches a gnuplot script"
for program in "$gpt" "$char_mlp" "$word2vec"; do
    rc=0
    "$program" --out "$work/o"$'\n'"!touch $work/PWNED"$'\n' > "$work/log" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ] || [ -e "$work/PWNED" ] || ! grep -q "control character" "$work/log"; then
        fail "$(basename "$program") --out with a newline: exit $rc"; tail -n 3 "$work/log"
    else
        echo "ok   $(basename "$program") --out with a newline: $(grep ': error:' "$work/log" | head -1)"
    fi
done

echo "---- a resume on another text of the same length is refused"
resume_refused() {  # resume_refused NAME EXPECTED SAME_LENGTH_TEXT PROGRAM FLAGS...
    local name=$1 expect=$2 other=$3 program=$4
    shift 4
    local data="$work/$name-data.txt" out="$work/$name-resume"
    cp "$work/text.txt" "$data"
    "$program" "$@" --data "$data" --steps 6 --stop-after 3 --out "$out" > /dev/null
    cp "$other" "$data"
    refused "$name --resume on $(basename "$other")" "$expect" -- "$program" "$@" --data "$data" --steps 6 \
        --resume "$out/checkpoint.safetensors"
}
tr 'q' '~' < "$work/text.txt" > "$work/q-to-tilde.txt"  # the same length and V; the id of 'q' means 'r'
resume_refused gpt "vocabulary mismatch|'q'|'r'" "$work/q-to-tilde.txt" "$gpt" "${gpt_model[@]}"
resume_refused gpt "text mismatch" "$work/reversed.txt" "$gpt" "${gpt_model[@]}"
resume_refused char_mlp "text mismatch" "$work/reversed.txt" "$char_mlp" "${mlp_model[@]}"

echo "---- gpt without --warmup adapts it to a short run (min(100, steps/10)); --init-from with --resume is refused"
rc=0
"$gpt" --data "$work/text.txt" --n-layer 1 --n-head 2 --d 16 --block-size 16 --batch-size 4 --eval-batches 2 \
    --sample 0 --steps 8 --out "$work/short" > "$work/log" 2>&1 || rc=$?
[ "$rc" -eq 0 ] && grep -q "^step      8/8" "$work/log" && echo "ok   gpt --steps 8 without --warmup trains" ||
    { fail "gpt --steps 8 without --warmup: exit $rc"; tail -n 3 "$work/log"; }
refused "gpt --init-from ''" "--init-from|an empty path" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --init-from ""
refused "gpt --resume ''" "--resume|an empty path" -- "$gpt" "${tiny_gpt[@]}" --steps 3 --resume ""
refused "char_mlp --resume ''" "--resume|an empty path" -- "$char_mlp" "${tiny_mlp[@]}" --steps 3 --resume ""
refused "gpt --init-from with --resume" "--resume|--init-from|one of them" -- "$gpt" "${tiny_gpt[@]}" --steps 3 \
    --resume "$work/short/checkpoint.safetensors" --init-from "$work/short/checkpoint.safetensors"

echo "---- an --out with quotes, \$, \` and a space"
if command -v gnuplot > /dev/null 2>&1; then
    odd="$work/it's a \"test\" \$HOME \`x\`"
    "$gpt" "${tiny_gpt[@]}" --steps 5 --out "$odd" > "$work/log" 2>&1 || { fail "gpt with an odd --out"; tail -n 3 "$work/log"; }
    for png in loss.png attention.png; do
        [ -s "$odd/$png" ] && echo "ok   $png under $odd" || { fail "no $png under $odd"; grep png "$work/log"; }
    done
else
    echo "SKIP: gnuplot is not installed, the pictures under an odd --out are not checked"
fi

echo "---- gpt_sample: hostile prompts, a foreign tokenizer.bpe, a checkpoint of char_mlp"
# sample_refused "WHAT" "EXPECTED WORDS" -- flags...: exits non-zero with "gpt_sample: error:" and the
# words, before the model is built (no "model" line).
sample_refused() {
    local what=$1 expect=$2 rc=0
    shift 3
    timeout 20 "$gpt_sample" "$@" > "$work/log" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then fail "$what: exit status $rc"; tail -n 3 "$work/log"; return; fi
    local word
    IFS='|' read -ra words <<< "gpt_sample: error:|$expect"
    for word in "${words[@]}"; do
        grep -qF -- "$word" "$work/log" || { fail "$what: the message lacks '$word'"; tail -n 3 "$work/log"; return; }
    done
    if grep -q "^model " "$work/log"; then fail "$what: the model was built first"; return; fi
    echo "ok   $what: $(grep ': error:' "$work/log" | head -1)"
}
if [ -n "$gpt_sample" ]; then
    bpe_flags=(--tokenizer bpe --steps 3 --sample 0)
    "$gpt" "${tiny_gpt[@]}" --steps 3 --sample 0 --out "$work/s-char" > /dev/null
    "$gpt" "${tiny_gpt[@]}" "${bpe_flags[@]}" --vocab-size 300 --out "$work/s-bpe" > /dev/null
    "$gpt" "${tiny_gpt[@]}" "${bpe_flags[@]}" --vocab-size 280 --out "$work/s-bpe280" > /dev/null
    "$char_mlp" "${tiny_mlp[@]}" --steps 3 --out "$work/s-mlp" > /dev/null
    sample_refused "gpt_sample --prompt outside the vocabulary" "--prompt|byte 255|not in the vocabulary" -- \
        --checkpoint "$work/s-char/checkpoint.safetensors" --prompt $'ab\xff'
    cp "$work/s-bpe280/tokenizer.bpe" "$work/s-bpe/tokenizer.bpe"
    sample_refused "gpt_sample with another run's tokenizer.bpe" "tokenizer.bpe has 280 tokens|records --vocab-size 300|another run's" -- \
        --checkpoint "$work/s-bpe/checkpoint.safetensors"
    sample_refused "gpt_sample with a char_mlp checkpoint" "checkpoint.safetensors|records no gpt flag|char_mlp" -- \
        --checkpoint "$work/s-mlp/checkpoint.safetensors"
    sample_refused "gpt_sample --save a directory" "--save $work: '$work' is a directory" -- \
        --checkpoint "$work/s-char/checkpoint.safetensors" --save "$work"
    # The run's sample of control bytes again (its seed and settings): \uXXXX on the terminal, and
    # with --save the bytes as sampled, the run's sample.txt and the separator line.
    rc=0
    "$gpt_sample" --checkpoint "$work/bpe-esc/checkpoint.safetensors" --prompt $'\e[2J' --max-new-tokens 200 \
        --save "$work/samples.txt" > "$work/log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ] || LC_ALL=C grep -qaP '[\x00-\x08\x0b-\x1f\x7f]' "$work/log" || ! grep -qF '\u001b[2J' "$work/log" ||
        ! cmp -s "$work/samples.txt" <(cat "$work/bpe-esc/sample.txt"; printf '\n---------------\n') ||
        ! grep -qF "wrote $work/samples.txt" "$work/log"; then
        fail "gpt_sample --prompt ESC[2J --save: exit $rc, control bytes printed raw or samples.txt not the run's bytes"
    else
        echo "ok   gpt_sample --prompt ESC[2J prints \\u001b[2J, --save writes the bytes the run sampled"
    fi
    rc=0
    "$gpt_sample" --checkpoint "$work/s-char/checkpoint.safetensors" --prompt "ab" --max-new-tokens 0 > "$work/log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] && grep -qx "ab" "$work/log" && echo "ok   gpt_sample --max-new-tokens 0 prints the prompt alone" ||
        { fail "gpt_sample --max-new-tokens 0: exit $rc"; tail -n 3 "$work/log"; }
fi

if [ "$failures" -gt 0 ]; then echo "FAIL: $failures check(s)"; exit 1; fi
echo "PASS"
