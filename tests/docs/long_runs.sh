#!/usr/bin/env bash
# Reruns the long runs and rewrites every <!-- long-run: NAME --> region of README.md and
# examples/**/README.md with the new output (the region's choice of lines is kept; see
# tests/docs/long_runs.py) and a last line giving the machine, the date and the command.
#
#   tests/docs/long_runs.sh [NAME...]     default: every NAME that has a region
#   BUILD=dir                             a Release build directory with the examples (default build/)
#   READMES="a.md b.md"                   rewrite these instead (the checkers' fixtures)
#
# Each command runs from BUILD with one OpenBLAS thread, as the READMEs' runs do: a program of the
# build, or a script of the source tree (NAME.sh, given BUILD as ".").
set -euo pipefail
declare -A COMMANDS=(
  [char_mlp]="examples/char_mlp"            # the default char_mlp run
  [gpt]="examples/gpt"                      # the default gpt run
  [gpt_bpe]="examples/gpt --tokenizer bpe --neighbours 8"  # the same on byte pairs (V 4,096)
  [word2vec]="examples/word2vec"            # the default word2vec run
  [gpt_bpe_table]="examples/gpt/bpe_table.sh ."  # characters against byte pairs for the same time
  [tensor_basics]="examples/tensor_basics"  # seconds: for trying this script on a fixture
)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD == /* ]] || BUILD="$ROOT/$BUILD"
read -r -a readmes <<< "${READMES:-}"
names=("$@")
if ((${#names[@]} == 0)); then
  mapfile -t names < <(python3 "$ROOT/tests/docs/long_runs.py" names "${readmes[@]}")
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for name in "${names[@]}"; do
  cmd=${COMMANDS[$name]:-}
  [[ -n $cmd ]] || { echo "long_runs.sh: no command for $name (known: ${!COMMANDS[*]})" >&2; exit 2; }
  run=$cmd
  if [[ ${cmd%% *} == *.sh ]]; then
    run="$ROOT/$cmd"
  else
    [[ -x $BUILD/${cmd%% *} ]] || { echo "long_runs.sh: $BUILD/${cmd%% *} is not built" >&2; exit 2; }
  fi
  echo "long_runs.sh: $name: running $cmd in $BUILD" >&2
  (cd "$BUILD" && OPENBLAS_NUM_THREADS=1 $run) > "$out"
  python3 "$ROOT/tests/docs/long_runs.py" rewrite "$name" "$out" "OPENBLAS_NUM_THREADS=1 $cmd" "${readmes[@]}"
done
