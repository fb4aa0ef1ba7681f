#!/usr/bin/env bash
# A rank built with real = float and a rank built with real = double under one mpirun
# (element_type_peer.cpp, built on xgrad and on xgrad_f64): both refuse DistributedDataParallel
# and all_reduce with the same message naming float32 and float64; no values are summed, no hang.
# Usage: float_and_double.sh path/to/element_type_peer_f32 path/to/element_type_peer_f64 MPIRUN [OPTIONS...]
set -euo pipefail
f32=$1 f64=$2
shift 2
mpirun=("$@")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

rc=0
timeout 60 "${mpirun[@]}" -np 1 "$f32" : -np 1 "$f64" > "$out" 2>&1 || rc=$?
cat "$out"
if [ "$rc" -eq 124 ]; then fail "no exit within 60 s (a hang?)"; elif [ "$rc" -ne 0 ]; then fail "exit status $rc"; fi
ddp="line 1 is 'elements float64' on rank 1 and 'elements float32' on rank 0"
reduce="rank 0: all_reduce Sum of float32 (2), rank 1: all_reduce Sum of float64 (2)"
for r in "0 float32" "1 float64"; do
    grep -qF "rank $r: DistributedDataParallel refused: " "$out" && grep -F "rank $r: DistributedDataParallel" "$out" | grep -qF "$ddp" ||
        fail "rank $r: DistributedDataParallel not refused with \"$ddp\""
    grep -F "rank $r: all_reduce" "$out" | grep -qF "refused: all_reduce: the ranks disagree on the collective or its arguments ($reduce)" ||
        fail "rank $r: all_reduce not refused with \"$reduce\""
done
if [ "$failures" -gt 0 ]; then echo "$failures FAILED"; exit 1; fi
echo "PASS: a float32 rank and a float64 rank refuse together"
