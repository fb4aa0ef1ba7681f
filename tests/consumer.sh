#!/usr/bin/env bash
# tests/consumer.sh — builds examples/own_project/ (and, installed, examples/own_gpt/) as another
# project would, and runs it.
#
#   consumer.sh install  XGRAD_SOURCE XGRAD_BUILD WORK [COMPILER_LAUNCHER]
#       the install of `make install` (Makefile: build xgrad and xgrad_f64, then cmake --install),
#       from XGRAD_BUILD into WORK/prefix; then configure the project with
#       -DCMAKE_PREFIX_PATH=WORK/prefix, so it finds xgrad through find_package(xgrad CONFIG)
#   consumer.sh subdir   XGRAD_SOURCE XGRAD_BUILD WORK [COMPILER_LAUNCHER]
#       configure the project with -DXGRAD_SOURCE_DIR=XGRAD_SOURCE, so it builds xgrad itself
#       through add_subdirectory (xgrad's tests, examples and bench are then off); only
#       own_project and the float library are built and run: own_project_f64 is compiled through
#       this route by subdir-compile, and built, linked and run through the installed route
#   consumer.sh subdir-compile  XGRAD_SOURCE XGRAD_BUILD WORK [COMPILER_LAUNCHER]
#       the same configuration, but only the project's own two files are compiled, against the
#       targets xgrad and xgrad_f64 as add_subdirectory defines them (their include path, C++17,
#       XGRAD_DOUBLE, the xsimd flags); the libraries are not built, and nothing is linked or run
#
# install (both programs) and subdir (own_project): own_project (float) and own_project_f64
# (double) must build (from an install: with -Wall -Wextra -Werror), exit 0, and print a last
# training loss below the first. install also builds own_gpt and runs it twice: the loss falls, and
# a run resumed from its mid-run state prints the whole run's later lines. WORK is emptied first,
# so every run configures from scratch.
# ctest runs install (consumer_find_package: the libraries are the tree's own, already built) and
# subdir-compile (consumer_add_subdirectory); subdir, which compiles xgrad a second time, is
# `make consumer`, a phase of its own in CI (.ci/run), run once per CI run.
set -euo pipefail
mode=$1 source=$2 build=$3 work=$4 launcher=${5:-}

rm -rf "$work"
mkdir -p "$work"
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
[[ -n $launcher ]] && args+=("-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher")
case $mode in
  install)
    cmake --build "$build" -j "$(nproc)" --target xgrad xgrad_f64 xgrad_distributed xgrad_text
    rm -rf "$work/prefix"
    cmake --install "$build" --prefix "$work/prefix"
    # Only the public headers are installed: the internal ones live under detail/.
    internal=$(find "$work/prefix/include/xgrad" -path '*/detail*')
    if [[ -n $internal ]]; then echo "consumer.sh: internal headers installed: $internal" >&2; exit 1; fi
    # The program and every xgrad header it includes compile without a warning (the headers
    # under the prefix are not system headers, so they are checked too).
    args+=("-DCMAKE_PREFIX_PATH=$work/prefix" "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror") ;;
  subdir | subdir-compile)
    # At -O1: what this route checks is that add_subdirectory's targets build, link and run, not
    # the optimiser, and -O1 compiles xgrad's templates in about three quarters of -O3's time.
    args+=("-DXGRAD_SOURCE_DIR=$source" "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG") ;;
  *) echo "consumer.sh: unknown mode '$mode' (install | subdir | subdir-compile)" >&2; exit 2 ;;
esac

cmake -S "$source/examples/own_project" -B "$work/build" "${args[@]}"
if [[ $mode == subdir-compile ]]; then
  # Ninja's targets include every output file: here the two object files of the project alone.
  cmake --build "$work/build" --target CMakeFiles/own_project.dir/main.cpp.o CMakeFiles/own_project_f64.dir/main.cpp.o
  echo "consumer.sh: own_project and own_project_f64 compile against xgrad through add_subdirectory"
  exit 0
fi
if [[ $mode == subdir ]]; then
  cmake --build "$work/build" -j "$(nproc)" --target own_project
else
  cmake --build "$work/build" -j "$(nproc)"
fi

# Runs one program with its arguments, shows its output (kept in $ran), and checks it: exit 0, and
# the loss of its last "step N  loss X nats" line below that of its first.
run() {
  local rc=0
  ran=$("$@") || rc=$?
  echo "$ran"
  if ((rc != 0)); then echo "consumer.sh: $* exited with status $rc" >&2; exit 1; fi
  awk '$1 == "step" && $3 == "loss" { if (first == "") first = $4; last = $4 }
       END { if (first == "" || !(last < first)) { print "consumer.sh: loss did not fall (first " first ", last " last ")"; exit 1 }
             print "consumer.sh: loss " first " -> " last " nats" }' <<<"$ran"
}
run "$work/build/own_project"
[[ $mode == subdir ]] || run "$work/build/own_project_f64"
[[ $mode == install ]] || exit 0

# examples/own_gpt (install only): trains on the Psalms, saving its state at a middle step; a
# second process resumes from that state and must print the whole run's lines from there on
# (its step lines, the val loss, the sample), and no line of the steps before it.
cmake -S "$source/examples/own_gpt" -B "$work/own_gpt" "${args[@]}"
cmake --build "$work/own_gpt" -j "$(nproc)"
run "$work/own_gpt/own_gpt" "$work/own_gpt/out"
whole=$ran
run "$work/own_gpt/own_gpt" "$work/own_gpt/out" --resume
results() { awk '($1 == "step" && $3 == "loss") || $1 == "val" || $1 == "sample:"'; }
n=$(results <<<"$ran" | wc -l)
if ! diff <(results <<<"$whole" | tail -n "$n") <(results <<<"$ran") ||
   (($(grep -c '^step' <<<"$ran") >= $(grep -c '^step' <<<"$whole"))); then
  echo "consumer.sh: own_gpt --resume did not continue the whole run's steps" >&2; exit 1
fi
echo "consumer.sh: own_gpt --resume printed the whole run's last $n lines"
