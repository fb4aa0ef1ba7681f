#!/usr/bin/env bash
# examples/gpt and examples/char_mlp under mpirun (2 ranks), against 1 process:
#   a. 2 ranks × B/2, 1 rank × B and 1 rank --grad-accum 2 log the same losses and end on the same
#      weights (the summation order differs, so within a tolerance, not bit for bit); char_mlp's
#      weights are those of its checkpoint (model.*);
#   b. a checkpoint of 2 ranks resumed by 1 rank, and the reverse, continues the same run;
#   c. a rank that throws ends every rank at once: non-zero exit, its message, no hang;
#   d. ranks started with different flags refuse, with distributed::check_same_on_all_ranks's message;
#   e. without mpirun, gpt is one process as before: no "world" line unless --grad-accum > 1;
#   f. gpt --zero 1 and 2 (ZeRO) take the steps of DDP; a checkpoint saved with --zero 2 on 2 ranks
#      resumes on 1 rank without it and on 3 ranks with it, one saved without it on 2 ranks with
#      --zero 1; ranks with different --zero refuse; a rank that throws ends every rank;
#   g. a rank killed by SIGKILL in the middle of training ends the run (DDP and --zero 2): mpirun
#      exits non-zero within 60 s, naming the signal.
# Tolerances: losses 1e-5 relative; parameters |a − b| ≤ 1e-5 + 1e-5·|b| (absolute plus relative).
# Usage: mpi_examples.sh path/to/gpt path/to/char_mlp MPIRUN [MPIRUN OPTIONS...]
set -euo pipefail
gpt=$1 char_mlp=$2
shift 2
mpirun=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# train LOG COMMAND...: a run that must succeed; its stdout and stderr go to $work/LOG.log.
train() {
    local log=$work/$1.log rc=0
    shift
    "$@" > "$log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then fail "exit status $rc from: $*"; tail -n 5 "$log"; fi
}

# A small text and word list, written here: syllables make words of a-z; the text is the words
# on lines of 8 (about 20 KB, above the 10·(block + 1) characters gpt's split needs).
syllables=(ba ce di fo gu ha ke li mo nu pa re si to vu)
for a in "${syllables[@]}"; do for b in "${syllables[@]}"; do for c in ka ro ne; do
    echo "$a$b$c"
done; done; done > "$work/words.txt"
paste -d ' ' - - - - - - - - < "$work/words.txt" > "$work/text.txt"

gpt_model=(--data "$work/text.txt" --n-layer 1 --n-head 2 --d 16 --block-size 16 --warmup 5 --eval-every 2
           --eval-batches 2 --sample 0)
gpt_flags=("${gpt_model[@]}" --batch-size 4 --steps 20)
mlp_flags=(--data "$work/words.txt" --embed-dim 4 --hidden 16 --batch-size 16 --steps 40 --warmup 0
           --eval-every 5 --sample 0)

# Every float32 tensor of two safetensors files (those named model.* when the files are
# checkpoints) within |a − b| ≤ 1e-5 + 1e-5·|b|; the standard library alone reads the format:
# 8 bytes of header length, the header's JSON, then the data at the offsets it lists.
same_weights() {
    python3 - "$1" "$2" <<'EOF'
import array, json, struct, sys

def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        begin, end = t["data_offsets"]
        out[name] = array.array("f", data[begin:end])
    if any(k.startswith("model.") for k in out):
        out = {k: v for k, v in out.items() if k.startswith("model.")}
    return out

a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
if not a or a.keys() != b.keys():
    sys.exit(f"the files hold different tensors: {sorted(a)} vs {sorted(b)}")
worst = (0.0, "")
for name in sorted(a):
    for x, y in zip(a[name], b[name]):
        excess = abs(x - y) - (1e-5 + 1e-5 * abs(y))
        if excess > worst[0]:
            worst = (excess, f"{name}: {x} vs {y}")
if worst[0] > 0:
    sys.exit("parameters differ beyond 1e-5 + 1e-5·|b|: " + worst[1])
print(f"{sum(len(v) for v in a.values())} parameters within 1e-5 + 1e-5·|b|")
EOF
}

# The same loss.csv rows (step, lr exact; train and val loss within 1e-5 relative).
same_losses() {
    python3 - "$1" "$2" <<'EOF'
import csv, sys
a, b = (list(csv.reader(open(p))) for p in sys.argv[1:3])
if len(a) != len(b) or len(a) < 5:
    sys.exit(f"{len(a)} rows against {len(b)} rows")
for ra, rb in zip(a[1:], b[1:]):
    if ra[0] != rb[0] or ra[3] != rb[3]:
        sys.exit(f"step or lr differ: {ra} vs {rb}")
    for x, y in zip(ra[1:3], rb[1:3]):
        if (x == "") != (y == "") or (x and abs(float(x) - float(y)) > 1e-5 * abs(float(y))):
            sys.exit(f"step {ra[0]}: losses differ beyond 1e-5 relative: {ra} vs {rb}")
print(f"{len(a) - 1} rows within 1e-5 relative")
EOF
}

# agree WHAT RUN_A RUN_B WEIGHTS_FILE: both runs' loss.csv and final weights agree.
agree() {
    local what=$1 a=$2 b=$3 file=$4 losses weights
    if ! losses=$(same_losses "$work/$a/loss.csv" "$work/$b/loss.csv" 2>&1); then fail "$what: loss.csv: $losses"; return; fi
    if ! weights=$(same_weights "$work/$a/$file" "$work/$b/$file" 2>&1); then fail "$what: $file: $weights"; return; fi
    echo "ok   $what: $losses, $weights"
}

echo "---- a. 2 ranks × B/2 = 1 rank × B = 1 rank × 2 micro-steps of B/2"
train gpt1 "$gpt" "${gpt_flags[@]}" --out "$work/gpt1"
train gpt2 "${mpirun[@]}" -np 2 "$gpt" "${gpt_flags[@]}" --out "$work/gpt2"
train gpt1acc "$gpt" "${gpt_flags[@]}" --grad-accum 2 --out "$work/gpt1acc"
agree "gpt 2 ranks against 1" gpt2 gpt1 model.safetensors
agree "gpt --grad-accum 2 against 1" gpt1acc gpt1 model.safetensors
grep -q "^world  2 ranks .*global batch 4 = 2 ranks × 2 windows × grad-accum 1" "$work/gpt2.log" \
    || fail "gpt 2 ranks: no world line giving the split (head of its output: $(head -n 1 "$work/gpt2.log"))"
train mlp1 "$char_mlp" "${mlp_flags[@]}" --out "$work/mlp1"
train mlp2 "${mpirun[@]}" -np 2 "$char_mlp" "${mlp_flags[@]}" --out "$work/mlp2"
train mlp1acc "$char_mlp" "${mlp_flags[@]}" --grad-accum 2 --out "$work/mlp1acc"
agree "char_mlp 2 ranks against 1" mlp2 mlp1 checkpoint.safetensors
agree "char_mlp --grad-accum 2 against 1" mlp1acc mlp1 checkpoint.safetensors

echo "---- b. a checkpoint resumes at another number of ranks"
train gpt21a "${mpirun[@]}" -np 2 "$gpt" "${gpt_flags[@]}" --stop-after 10 --out "$work/gpt21"
train gpt21 "$gpt" "${gpt_flags[@]}" --resume "$work/gpt21/checkpoint.safetensors" --out "$work/gpt21"
grep -q "at step 10" "$work/gpt21.log" || fail "gpt 2 → 1 ranks: the second run did not resume at step 10"
agree "gpt 2 ranks to step 10, then 1 rank" gpt21 gpt1 model.safetensors
train gpt12a "$gpt" "${gpt_flags[@]}" --stop-after 10 --out "$work/gpt12"
train gpt12 "${mpirun[@]}" -np 2 "$gpt" "${gpt_flags[@]}" --resume "$work/gpt12/checkpoint.safetensors" --out "$work/gpt12"
agree "gpt 1 rank to step 10, then 2 ranks" gpt12 gpt1 model.safetensors

# expect_refusal WHAT "EXPECTED TEXT" -- mpirun arguments: non-zero exit within 60 s, the text on stderr.
expect_refusal() {
    local what=$1 expect=$2 rc=0
    shift 3
    local start=$SECONDS
    timeout 60 "${mpirun[@]}" "$@" > "$work/refusal.out" 2> "$work/refusal.err" || rc=$?
    local took=$((SECONDS - start))
    if [ "$rc" -eq 0 ]; then fail "$what: mpirun exited 0"; return; fi
    if [ "$rc" -eq 124 ] || [ "$took" -ge 60 ]; then fail "$what: took $took s (a hang?)"; return; fi
    grep -qF -- "$expect" "$work/refusal.err" || { fail "$what: stderr lacks '$expect'"; tail -n 5 "$work/refusal.err"; return; }
    echo "ok   $what: exit $rc after $took s: $(grep -F -- "$expect" "$work/refusal.err" | head -n 1)"
}

echo "---- c. a rank that throws ends every rank"
expect_refusal "gpt, rank 0 cannot create --out" "gpt: error on rank 0 of 2: --out /dev/null/x" -- \
    -np 1 "$gpt" "${gpt_flags[@]}" --out /dev/null/x : -np 1 "$gpt" "${gpt_flags[@]}" --out "$work/good"
echo "---- d. ranks with different flags refuse"
expect_refusal "gpt --steps 20 on rank 0, 21 on rank 1" "flags and data: rank 1 differs from rank 0: line 24 is '--steps 21' on rank 1 and '--steps 20' on rank 0" -- \
    -np 1 "$gpt" "${gpt_model[@]}" --batch-size 4 --steps 20 --out "$work/d0" : \
    -np 1 "$gpt" "${gpt_model[@]}" --batch-size 4 --steps 21 --out "$work/d1"
expect_refusal "gpt --batch-size 3 on 2 ranks" "--batch-size 3 is not divisible by 2 ranks × --grad-accum 1" -- \
    -np 2 "$gpt" "${gpt_model[@]}" --batch-size 3 --steps 20 --out "$work/d2"

echo "---- e. without mpirun: one process, as before"
if grep -q "^world" "$work/gpt1.log"; then fail "gpt alone printed a world line: $(grep '^world' "$work/gpt1.log")"; fi
grep -q "^world  1 process (not started by mpirun), 1 thread: global batch 4 = 1 rank × 2 windows × grad-accum 2" \
    "$work/gpt1acc.log" || fail "gpt alone with --grad-accum 2: no world line naming 1 process and the split"
grep -q "^data " "$work/gpt1.log" || fail "gpt alone: the first line is not the data line"

echo "---- f. ZeRO (--zero 1, 2): the steps of DDP, the same checkpoint at any number of ranks"
train gpt2z1 "${mpirun[@]}" -np 2 "$gpt" "${gpt_flags[@]}" --zero 1 --out "$work/gpt2z1"
train gpt2z2 "${mpirun[@]}" -np 2 "$gpt" "${gpt_flags[@]}" --zero 2 --out "$work/gpt2z2"
agree "gpt --zero 1 on 2 ranks against DDP" gpt2z1 gpt2 model.safetensors
agree "gpt --zero 2 on 2 ranks against DDP" gpt2z2 gpt2 model.safetensors
grep -q "^ZeRO   stage 2: each rank keeps the optimizer state and the reduced gradients" "$work/gpt2z2.log" \
    || fail "gpt --zero 2: no ZeRO line"
grep -q "^AdamW optimizer memory on rank 0 of 2 (ZeRO stage 2" "$work/gpt2z2.log" \
    || fail "gpt --zero 2: the memory report is not rank 0's share"
# B = 6 divides among 1, 2 and 3 ranks. A resumed run continues a copy of the saved run's --out,
# so that its loss.csv holds the rows before the checkpoint too.
zero_flags=("${gpt_model[@]}" --batch-size 6 --steps 20)
train gpt6 "$gpt" "${zero_flags[@]}" --out "$work/gpt6"
train gpt6z2 "${mpirun[@]}" -np 2 "$gpt" "${zero_flags[@]}" --zero 2 --stop-after 10 --out "$work/gpt6z2"
cp -r "$work/gpt6z2" "$work/gpt6z21" && cp -r "$work/gpt6z2" "$work/gpt6z23"
train gpt6z21 "$gpt" "${zero_flags[@]}" --resume "$work/gpt6z2/checkpoint.safetensors" --out "$work/gpt6z21"
agree "gpt --zero 2 on 2 ranks to step 10, then 1 rank without --zero" gpt6z21 gpt6 model.safetensors
train gpt6z23 "${mpirun[@]}" -np 3 "$gpt" "${zero_flags[@]}" --zero 2 --resume "$work/gpt6z2/checkpoint.safetensors" \
    --out "$work/gpt6z23"
agree "gpt --zero 2 on 2 ranks to step 10, then --zero 2 on 3 ranks" gpt6z23 gpt6 model.safetensors
train gpt6d2 "${mpirun[@]}" -np 2 "$gpt" "${zero_flags[@]}" --stop-after 10 --out "$work/gpt6d2"
train gpt6d2z1 "${mpirun[@]}" -np 2 "$gpt" "${zero_flags[@]}" --zero 1 --resume "$work/gpt6d2/checkpoint.safetensors" \
    --out "$work/gpt6d2"
agree "gpt DDP on 2 ranks to step 10, then --zero 1 on 2 ranks" gpt6d2 gpt6 model.safetensors
expect_refusal "gpt --zero 1 on rank 0, 2 on rank 1" "is '--zero 2' on rank 1 and '--zero 1' on rank 0" -- \
    -np 1 "$gpt" "${gpt_flags[@]}" --zero 1 --out "$work/f0" : -np 1 "$gpt" "${gpt_flags[@]}" --zero 2 --out "$work/f1"
expect_refusal "gpt --zero 2, rank 0 cannot create --out" "gpt: error on rank 0 of 2: --out /dev/null/x" -- \
    -np 1 "$gpt" "${gpt_flags[@]}" --zero 2 --out /dev/null/x : -np 1 "$gpt" "${gpt_flags[@]}" --zero 2 --out "$work/good"

echo "---- g. a rank killed (SIGKILL) in the middle of training ends every rank, DDP and ZeRO alike"
# killed WHAT DIR [FLAGS...]: a 2-rank run of many steps; once rank 0 has written loss.csv, the
# last rank mpirun started is killed; mpirun must exit non-zero within 60 s, naming the signal.
killed() {
    local what=$1 out=$2 rc=0
    shift 2
    "${mpirun[@]}" -np 2 "$gpt" "${gpt_model[@]}" --batch-size 4 --steps 1000000 "$@" --out "$out" \
        > "$work/killed.log" 2>&1 &
    local runner=$! start=$SECONDS
    for _ in $(seq 300); do [ -s "$out/loss.csv" ] && break; sleep 0.1; done
    local victim
    victim=$(pgrep -P "$runner" | tail -n 1)
    if [ -z "$victim" ]; then fail "$what: no rank process under mpirun $runner"; kill "$runner" 2>/dev/null; return; fi
    kill -9 "$victim"
    while kill -0 "$runner" 2>/dev/null && [ $((SECONDS - start)) -lt 60 ]; do sleep 0.2; done
    if kill -0 "$runner" 2>/dev/null; then
        fail "$what: mpirun still running 60 s after rank pid $victim was killed (a hang)"
        kill -9 "$runner" 2>/dev/null
        return
    fi
    wait "$runner" || rc=$?
    if [ "$rc" -eq 0 ]; then fail "$what: mpirun exited 0"; return; fi
    grep -q "signal 9" "$work/killed.log" || { fail "$what: mpirun did not name the signal"; tail -n 5 "$work/killed.log"; return; }
    echo "ok   $what: exit $rc after $((SECONDS - start)) s: $(grep -m 1 "signal 9" "$work/killed.log" | sed 's/^ *//')"
}
killed "gpt DDP, a rank killed" "$work/k0"
killed "gpt --zero 2, a rank killed" "$work/k2" --zero 2

if [ "$failures" -gt 0 ]; then echo "$failures FAILED"; exit 1; fi
echo "PASS: data parallelism under mpirun"
