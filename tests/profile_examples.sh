#!/usr/bin/env bash
# --profile N in examples/gpt and examples/char_mlp: a tiny run of each profiles steps 6 and 7
# (after 5 warm-up steps) and
#   a. writes trace.json, which parses back (python3 json.load) with "X" events ProfilerStep#0 and
#      ProfilerStep#1 on the main thread, each step's user regions nested inside its step (gpt:
#      "forward + loss" holding "block 0" and "block 1", "loss.backward()" holding the engine's
#      "backward"; char_mlp: "forward + loss"), the optimizer's AdamW.step once a step;
#   b. prints the table (its "other (between ops)" and "profiled wall" lines), the time per step by
#      category, whose shares add up to 100% (to rounding), the counted FLOPs and the memory peak;
#   c. draws profile.png, a whole PNG (or says that gnuplot is missing);
#   d. refuses a window the run cannot hold, naming --profile and --steps.
# Usage: profile_examples.sh path/to/gpt path/to/char_mlp
set -euo pipefail
gpt=$1
char_mlp=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n 3000 /usr/share/dict/words > "$work/text.txt"

"$gpt" --data "$work/text.txt" --n-layer 2 --n-head 2 --d 16 --block-size 16 --batch-size 4 --steps 8 \
       --eval-every 8 --eval-batches 2 --sample 0 --profile 2 --out "$work/gpt" > "$work/gpt.log"
"$char_mlp" --data "$work/text.txt" --steps 8 --embed-dim 4 --hidden 16 --batch-size 16 --eval-every 8 --sample 0 \
            --profile 2 --out "$work/char_mlp" > "$work/char_mlp.log"

# a. the trace: events, steps, nesting (a child lies within its parent's interval, on one thread)
check_trace() {  # trace.json, then the names that must nest in "forward + loss" and "loss.backward()"
    python3 - "$@" <<'EOF'
import json, sys
path, inside_forward, inside_backward = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
events = json.load(open(path))["traceEvents"]
x = [e for e in events if e["ph"] == "X"]
steps = sorted(e["name"] for e in x if e["name"].startswith("ProfilerStep#"))
assert steps == ["ProfilerStep#0", "ProfilerStep#1"], f"{path}: steps {steps}"
def named(n): return [e for e in x if e["name"] == n]
def within(inner, outer):
    return inner["tid"] // 4 == outer["tid"] // 4 and outer["ts"] <= inner["ts"] and \
           inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1e-3
for region, inside in (("forward + loss", inside_forward), ("loss.backward()", inside_backward)):
    outers = named(region)
    assert len(outers) == 2, f"{path}: {len(outers)} '{region}' events, expected 2"
    for outer in outers:
        assert any(within(outer, s) for s in named("ProfilerStep#0") + named("ProfilerStep#1")), f"'{region}' outside the steps"
        for name in filter(None, inside):
            assert any(within(e, outer) for e in named(name)), f"{path}: no '{name}' inside '{region}'"
assert len(named("AdamW.step")) == 2, f"{path}: {len(named('AdamW.step'))} AdamW.step events, expected 2"
print(f"{path}: {len(x)} X events")
EOF
}
check_trace "$work/gpt/trace.json" "block 0,block 1" "backward" ||
    { echo "FAIL: gpt's trace.json"; exit 1; }
check_trace "$work/char_mlp/trace.json" "" "backward" || { echo "FAIL: char_mlp's trace.json"; exit 1; }

# b. the table and the categories
for name in gpt char_mlp; do
    log="$work/$name.log"
    grep -q "^profile of steps 6..7 (after 5 warm-up steps of this run)" "$log" || { echo "FAIL: $name: no profile heading"; cat "$log"; exit 1; }
    grep -q "^other (between ops)" "$log" && grep -q "^profiled wall" "$log" || { echo "FAIL: $name: no table"; exit 1; }
    grep -q "^counted FLOPs [0-9.]* GFLOP per step" "$log" || { echo "FAIL: $name: no FLOPs line"; exit 1; }
    grep -q "^peak [0-9.]* MiB live in Arrays, .* allocated by " "$log" || { echo "FAIL: $name: no peak line"; exit 1; }
    total=$(sed -n '/^time per step by category/,/^counted FLOPs/p' "$log" | grep -o '[0-9.]*%$' | tr -d % |
            awk '{s += $1} END {printf "%.1f", s}')
    awk -v t="$total" 'BEGIN {exit !(t >= 99.5 && t <= 100.5)}' ||
        { echo "FAIL: $name: the categories add up to $total%"; exit 1; }
    # c. the picture
    if command -v gnuplot > /dev/null; then
        python3 -c "import sys; d = open(sys.argv[1], 'rb').read(); sys.exit(not (d[:8] == b'\x89PNG\r\n\x1a\n' and d.endswith(b'IEND\xaeB\x60\x82')))" \
            "$work/$name/profile.png" || { echo "FAIL: $name: profile.png is not a whole PNG"; exit 1; }
    else
        grep -q "profile.png skipped: gnuplot is not installed" "$log" || { echo "FAIL: $name: no note on gnuplot"; exit 1; }
    fi
done

# d. a window past the run's end
if "$gpt" --data "$work/text.txt" --n-layer 1 --d 16 --n-head 2 --block-size 16 --steps 6 --profile 2 \
          --out "$work/refused" > "$work/refused.log" 2>&1; then
    echo "FAIL: gpt ran a --profile window longer than the run"; exit 1
fi
grep -q -- "--profile 2 profiles steps 6..7 of this run, after 5 warm-up steps, but the run takes 6 steps (1..6): give --steps room for 7 steps" "$work/refused.log" ||
    { echo "FAIL: gpt's refusal"; cat "$work/refused.log"; exit 1; }
if "$char_mlp" --data "$work/text.txt" --steps 20 --stop-after 6 --profile 2 --out "$work/refused" > "$work/refused.log" 2>&1; then
    echo "FAIL: char_mlp ran a --profile window past --stop-after"; exit 1
fi
grep -q -- "give --stop-after room for 7 steps" "$work/refused.log" || { echo "FAIL: char_mlp's refusal"; cat "$work/refused.log"; exit 1; }
echo "profile_examples: ok"
