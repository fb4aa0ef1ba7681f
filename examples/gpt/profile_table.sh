#!/usr/bin/env bash
# examples/gpt/profile_table.sh — where the default GPT's training step goes, at T 64 and T 1,024,
# from xgrad's profiler: the tables of examples/gpt/README.md, "Where a step's time goes".
#
#   1. The default model (L 4, H 4, d 128, B 12 windows, the KJV's characters, AdamW, clipping,
#      1 thread) at --block-size 64 and 1,024: STEPS steps, of which PROFILE after the 5 warm-up
#      steps go through the profiler (--profile), each run's log kept.
#   2. The machine's single-core sgemm rate: bench's W5 row, three raw cblas_sgemm of (256 × 512)
#      and (512 × 512) shapes (xgrad_bench --benchmark_filter=W5_matmul_raw_sgemm), 3 repetitions
#      before the runs and 3 after, the best of them; and W5's other row, the same products through
#      xgrad's matmul; when BUILD/bench/xgrad_bench exists (cmake -DXGRAD_BUILD_BENCH=ON), else
#      SGEMM_GFLOPS, if given.
#   3. Two markdown tables: ms per step and share by op category side by side, with the step's
#      time, its counted FLOPs (products 2·M·N·K, elementwise ops one a value), their rate and
#      MFU = that rate / the sgemm rate (and over xgrad's matmul rate); then the events of the largest self time (trace.json's
#      main thread: ops, backward closures, the engine, the regions' own code), share by share.
#      Then the machine, the load and the date.
# Usage: examples/gpt/profile_table.sh [--quick] [BUILD]   BUILD: a Release build with examples/gpt
#                                                          (default: build), or the gpt binary in it
#   --quick               a tiny model at T 16 and 64, 2 profiled steps: a check of the script
#   PROFILE=10 STEPS=16   profiled steps, steps in each run (at least PROFILE + 5)
#   WORK=DIR              keep the runs' logs, traces and pictures in DIR
set -euo pipefail
quick=0
if [[ ${1:-} == --quick ]]; then quick=1; shift; fi
build=${1:-build}
gpt=$build/examples/gpt
if [[ -f $build && -x $build ]]; then gpt=$build build=$(dirname "$(dirname "$build")"); fi
[[ -x $gpt ]] || { echo "profile_table.sh: $gpt is not built (cmake --build $build --target gpt)" >&2; exit 2; }
profile=${PROFILE:-10}
steps=${STEPS:-$((profile + 6))}
model=() short=64 long=1024 bench_time=1
if (( quick )); then
    model=(--data /usr/share/dict/words --n-layer 1 --n-head 2 --d 16 --batch-size 4)
    profile=2 steps=8 short=16 long=64 bench_time=0.05
fi
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
[[ -n ${WORK:-} ]] || trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
load_start=$(cut -d' ' -f1 /proc/loadavg)

# W5's two rows, GFLOP/s of each repetition: raw cblas_sgemm into $work/w5_NAME.txt, xgrad's matmul
# (the same three products through xgrad::gemm) into $work/w5x_NAME.txt
sgemm_rate() {
    [[ -x $bench && -z ${SGEMM_GFLOPS:-} ]] || return 0
    "$bench" --benchmark_filter='^W5_' --benchmark_repetitions=3 --benchmark_format=json \
             --benchmark_min_time="$bench_time" 2> /dev/null > "$work/w5_$1.json"
    for row in raw_sgemm:w5 xgrad:w5x; do
        python3 -c "import json, sys
print('\n'.join(str(b['GFLOPs']) for b in json.load(open(sys.argv[1]))['benchmarks']
                if b.get('run_type') == 'iteration' and b['name'].startswith('W5_matmul_' + sys.argv[2] + '/')))" \
            "$work/w5_$1.json" "${row%%:*}" > "$work/${row##*:}_$1.txt"
    done
}
bench=$build/bench/xgrad_bench
sgemm_rate before
for T in "$short" "$long"; do
    echo "profiling T $T: $steps steps, steps 6..$((profile + 5)) profiled" >&2
    "$gpt" "${model[@]}" --block-size "$T" --steps "$steps" --profile "$profile" --eval-every "$steps" \
           --eval-batches 1 --sample 0 --threads 1 --out "$work/T$T" > "$work/T$T.log"
done
sgemm_rate after
sgemm=${SGEMM_GFLOPS:-} sgemm_note="no sgemm rate (no $bench): no MFU."
[[ -z $sgemm ]] || sgemm_note="sgemm $sgemm GFLOP/s (SGEMM_GFLOPS)."
if [[ -z $sgemm && -s $work/w5_before.txt ]]; then  # the best of the 6 repetitions: the least disturbed by a shared machine
    sgemm=$(sort -g "$work/w5_before.txt" "$work/w5_after.txt" | tail -n 1 | awk '{printf "%.1f", $1}')
    sgemm_note="sgemm $sgemm GFLOP/s, the best of W5's raw cblas_sgemm before and after the runs:"
    sgemm_note+=" $(awk '{printf "%s%.1f", (NR > 1 ? ", " : ""), $1}' "$work/w5_before.txt" "$work/w5_after.txt");"
    matmul=$(sort -g "$work/w5x_before.txt" "$work/w5x_after.txt" | tail -n 1 | awk '{printf "%.1f", $1}')
    sgemm_note+=" xgrad's matmul on W5's products: $(awk '{printf "%s%.1f", (NR > 1 ? ", " : ""), $1}' \
        "$work/w5x_before.txt" "$work/w5x_after.txt")."
fi

python3 - "$work" "$short" "$long" "${sgemm:-}" "${matmul:-}" <<'EOF'
import json, re, sys
work, short, long, sgemm, matmul = sys.argv[1:6]

def read(T):  # the log's categories, step time and FLOPs; the trace's self time by event name
    text = open(f"{work}/T{T}.log").read()
    block = text[text.index("\ntime per step by category"):text.index("\ncounted FLOPs")]
    cats = re.findall(r"^  (.+?)\s+([\d.]+) ms\s+([\d.]+)%$", block, re.M)
    step_ms = float(re.search(r"^time per step by category \(\d+ steps, ([\d.]+) ms a step\)", text, re.M)[1])
    gflop = float(re.search(r"^counted FLOPs ([\d.]+) GFLOP per step", text, re.M)[1])
    events = [e for e in json.load(open(f"{work}/T{T}/trace.json"))["traceEvents"] if e["ph"] == "X"]
    wall = sum(e["args"]["self_us"] for e in events if e["tid"] // 4 == 0)  # the main thread's lanes
    self_us = {}
    for e in events:
        if e["tid"] // 4 == 0 and not e["name"].startswith("ProfilerStep#"):
            self_us[e["name"]] = self_us.get(e["name"], 0) + e["args"]["self_us"]
    ops = sorted(((n, 100 * us / wall) for n, us in self_us.items()), key=lambda x: -x[1])
    return {name: (float(ms), float(pct)) for name, ms, pct in cats}, step_ms, gflop, ops

(c1, ms1, g1, ops1), (c2, ms2, g2, ops2) = read(short), read(long)
print(f"| the step's time by category | T {int(short):,}: ms per step | share | T {int(long):,}: ms per step | share |")
print("|---|---:|---:|---:|---:|")
for name in c1:
    print(f"| {name} | {c1[name][0]:.2f} | {c1[name][1]:.1f}% | {c2[name][0]:.2f} | {c2[name][1]:.1f}% |")
    if name == "products":  # the attention kernels, forward and backward, apart
        a1, a2 = (sum(p for n, p in ops if "causal_attention" in n) for ops in (ops1, ops2))
        print(f"| &nbsp;&nbsp;of which the attention kernels | {a1 * ms1 / 100:.2f} | {a1:.1f}% | {a2 * ms2 / 100:.2f} | {a2:.1f}% |")
print(f"| **the step** | **{ms1:.2f}** | 100% | **{ms2:.2f}** | 100% |")
rate1, rate2 = g1 / ms1 * 1e3, g2 / ms2 * 1e3
print(f"| counted FLOPs per step (GFLOP) | {g1:.3f} | | {g2:.3f} | |")
print(f"| their rate (GFLOP/s) | {rate1:.1f} | | {rate2:.1f} | |")
if sgemm:
    s = float(sgemm)
    print(f"| MFU: the rate over sgemm's {s:.1f} GFLOP/s (W5, raw cblas_sgemm) | {100 * rate1 / s:.1f}% | | {100 * rate2 / s:.1f}% | |")
if matmul:
    m = float(matmul)
    print(f"| the rate over xgrad's matmul on W5's products, {m:.1f} GFLOP/s | {100 * rate1 / m:.1f}% | | {100 * rate2 / m:.1f}% | |")
print()
print(f"| event (self time: an op, its backward closure, a region's own code) | T {int(short):,}: share | T {int(long):,}: share |")
print("|---|---:|---:|")
top = [n for n, _ in ops1[:10]]
top += [n for n, _ in ops2[:10] if n not in top]
d1, d2 = dict(ops1), dict(ops2)
for n in top:
    f = lambda d: f"{d[n]:.1f}%" if n in d else "-"
    print(f"| {n} | {f(d1)} | {f(d2)} |")
EOF
echo
echo "Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores, 1 thread;" \
     "load average (1 min) $load_start at start, $(cut -d' ' -f1 /proc/loadavg) at end; $(date -u '+%Y-%m-%d %H:%M UTC');" \
     "$profile profiled steps of $steps a run;" \
     "$sgemm_note"
