#!/usr/bin/env bash
# examples/ddp_basics (distributed/README.md's whole program), alone and under mpirun:
#   a. alone and with 2 ranks it prints 10 loss lines, the same to 1e-5 relative;
#   b. with 3 ranks, which do not divide B = 8, every rank refuses: non-zero exit within 60 s,
#      the refusal on stderr once per rank, no loss line.
# Usage: ddp_basics.sh path/to/ddp_basics MPIRUN [MPIRUN OPTIONS...]
set -euo pipefail
program=$1
shift
mpirun=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

echo "---- a. 1 process and 2 ranks: the same losses"
"$program" > "$work/one.out" 2>&1 || fail "alone: exit status $? ($(tail -n 2 "$work/one.out"))"
"${mpirun[@]}" -np 2 "$program" > "$work/two.out" 2>&1 || fail "2 ranks: exit status $? ($(tail -n 2 "$work/two.out"))"
if same=$(python3 - "$work/one.out" "$work/two.out" <<'EOF'
import re, sys
a, b = ([float(m) for m in re.findall(r"^step \d+ loss (\S+)$", open(p).read(), re.M)] for p in sys.argv[1:3])
if len(a) != 10 or len(b) != 10:
    sys.exit(f"{len(a)} and {len(b)} loss lines, not 10 each")
for step, (x, y) in enumerate(zip(a, b)):
    if abs(x - y) > 1e-5 * abs(x):
        sys.exit(f"step {step}: loss {x} alone, {y} on 2 ranks")
print(f"10 losses within 1e-5 relative, {a[0]:.4f} to {a[-1]:.4f}")
EOF
); then echo "ok   $same"; else fail "$same"; fi

echo "---- b. 3 ranks do not divide B = 8: every rank refuses"
rc=0
start=$SECONDS
timeout 60 "${mpirun[@]}" -np 3 "$program" > "$work/three.out" 2> "$work/three.err" || rc=$?
took=$((SECONDS - start))
refusal="rows does not split into 3 equal slices; run with -np 1, 2, 4 or 8"
if [ "$rc" -eq 0 ]; then
    fail "3 ranks: mpirun exited 0"
elif [ "$rc" -eq 124 ]; then
    fail "3 ranks: no exit within 60 s (a hang?)"
elif [ "$(grep -cF -- "$refusal" "$work/three.err")" -ne 3 ]; then
    fail "3 ranks: stderr does not hold the refusal once per rank:"; cat "$work/three.err"
elif grep -q "^step" "$work/three.out"; then
    fail "3 ranks: a step was taken: $(head -n 1 "$work/three.out")"
else
    echo "ok   3 ranks: exit $rc after $took s: $(grep -F "rank 0 " "$work/three.err")"
fi

if [ "$failures" -gt 0 ]; then echo "$failures FAILED"; exit 1; fi
echo "PASS: ddp_basics"
