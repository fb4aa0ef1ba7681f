#!/usr/bin/env bash
# tests/build_profile.sh: where the time of a clean build goes.
#
#   bash tests/build_profile.sh [--dir DIR] [--no-ctest] [-- CMAKE_ARGS...]
#   make build-profile                       the same, in build-profile/
#
# Builds xgrad from scratch in DIR (default build-profile/, removed first) with Ninja, one phase at
# a time, and prints the wall time of each phase:
#   configure   cmake -S . -B DIR -G Ninja -DCMAKE_BUILD_TYPE=Release CMAKE_ARGS...
#   library     the four libraries: xgrad, xgrad_f64, xgrad_distributed, xgrad_text
#   examples    every example (the examples/all target)
#   tests       the rest of `all`: test binaries, the README snippets
#   ctest       every test, as make test runs them
# then how many compiles and other steps (links, archives, custom commands) the build ran and the
# time each kind adds up to, and its 15 slowest steps, read from Ninja's log (DIR/.ninja_log:
# start and end of every step, in milliseconds).
# Ninja runs as many steps at once as there are cores, so one step's time is its wall time on a
# machine that is also running the others: the figures are for this machine as it is, and only
# comparable with figures taken on the same machine kind, idle. ccache is off (XGRAD_CCACHE=OFF,
# CCACHE_DISABLE): the figures are for a cold build, as on a fresh clone.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

dir=build-profile run_ctest=1
while (($#)); do
  case $1 in
    --dir) dir=$2; shift 2 ;;
    --no-ctest) run_ctest=0; shift ;;
    --) shift; break ;;
    *) echo "build_profile.sh: unknown argument '$1' (--dir DIR, --no-ctest, -- CMAKE_ARGS)" >&2; exit 2 ;;
  esac
done
command -v ninja >/dev/null || { echo "build_profile.sh: needs ninja (Debian's ninja-build; .ci/install-deps installs it)" >&2; exit 1; }

jobs=$(nproc)
export OPENBLAS_NUM_THREADS=1 CCACHE_DISABLE=1
rm -rf "$dir"
table=""
ms() { echo $(($(date +%s%N) / 1000000)); }
phase() {  # phase NAME COMMAND...: run COMMAND quietly (its log in DIR/NAME.log) and time it
  local name=$1 start end
  shift
  start=$(ms)
  mkdir -p "$dir"
  if ! "$@" >"$dir/$name.log.tmp" 2>&1; then
    tail -n 40 "$dir/$name.log.tmp" >&2
    echo "build_profile.sh: phase $name failed; its log is $dir/$name.log" >&2
    mv "$dir/$name.log.tmp" "$dir/$name.log"
    exit 1
  fi
  mv "$dir/$name.log.tmp" "$dir/$name.log"
  local took=$(($(ms) - start))
  table+=$(printf '| %-9s | %5d.%d |' "$name" $((took / 1000)) $((took % 1000 / 100)))$'\n'
}

total_start=$(ms)
phase configure cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DXGRAD_CCACHE=OFF "$@"
phase library   cmake --build "$dir" -j "$jobs" --target xgrad xgrad_f64 xgrad_distributed xgrad_text
phase examples  cmake --build "$dir" -j "$jobs" --target examples/all
phase tests     cmake --build "$dir" -j "$jobs"
if ((run_ctest)); then
  phase ctest   ctest --test-dir "$dir" -j "$jobs" --output-on-failure --no-tests=error
fi
total=$(($(ms) - total_start))

echo "Machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -n 1); $(date -u +%F)"
echo
echo "| phase     | wall, s |"
echo "|-----------|---------|"
printf '%s' "$table"
printf '| %-9s | %5d.%d |\n' total $((total / 1000)) $((total % 1000 / 100))
if ((run_ctest)); then
  grep -E '^[0-9]+% tests passed' "$dir/ctest.log" || true
fi
echo
# .ninja_log: a header line, then "start end mtime output hash" per step; a step run twice keeps
# its last line. Objects and precompiled headers are compiles, everything else (libraries,
# executables) is a link, an archive or a custom command.
python3 - "$dir/.ninja_log" <<'PY'
import sys
steps = {}
with open(sys.argv[1]) as log:
    for line in log:
        if line.startswith("#"):
            continue
        start, end, _mtime, output, _hash = line.rstrip("\n").split("\t")
        steps[output] = (int(end) - int(start)) / 1000.0
compiles = {o: s for o, s in steps.items() if o.endswith((".o", ".gch"))}
print(f"{len(compiles)} compiles, {sum(compiles.values()):.0f} s; "
      f"{len(steps) - len(compiles)} other steps (links, archives, custom commands), "
      f"{sum(steps.values()) - sum(compiles.values()):.0f} s")
print()
print("| the 15 slowest steps | wall, s |")
print("|---|---|")
for output, seconds in sorted(steps.items(), key=lambda kv: -kv[1])[:15]:
    name = output.replace("CMakeFiles/", "").replace(".dir/", ": ")
    print(f"| {name} | {seconds:.1f} |")
PY
