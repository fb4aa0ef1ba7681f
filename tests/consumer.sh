#!/usr/bin/env bash
# tests/consumer.sh — builds examples/standalone/ as another project would, and runs it.
#
#   consumer.sh install  XGRAD_SOURCE XGRAD_BUILD WORK [COMPILER_LAUNCHER]
#       cmake --install XGRAD_BUILD into WORK/prefix, then configure the consumer with
#       -DCMAKE_PREFIX_PATH=WORK/prefix, so it finds xgrad through find_package(xgrad CONFIG)
#   consumer.sh subdir   XGRAD_SOURCE XGRAD_BUILD WORK [COMPILER_LAUNCHER]
#       configure the consumer with -DXGRAD_SOURCE_DIR=XGRAD_SOURCE, so it builds xgrad itself
#       through add_subdirectory (xgrad's tests, examples and bench are then off)
#
# Either way the consumer's two programs, standalone (float) and standalone_f64 (double), must
# build and exit 0. WORK is emptied first, so every run configures from scratch; the compiler
# launcher (ccache, if the parent build uses one) makes the repeated compiles cheap.
# Registered with ctest as consumer_find_package and consumer_add_subdirectory (tests/CMakeLists.txt).
set -euo pipefail
mode=$1 source=$2 build=$3 work=$4 launcher=${5:-}

rm -rf "$work"
mkdir -p "$work"
args=(-DCMAKE_BUILD_TYPE=Release)
[[ -n $launcher ]] && args+=("-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher")
case $mode in
  install)
    cmake --install "$build" --prefix "$work/prefix"
    args+=("-DCMAKE_PREFIX_PATH=$work/prefix") ;;
  subdir)
    # a clean build every time: xgrad's sources in batches (XGRAD_UNITY_BUILD) halve its CPU time
    args+=("-DXGRAD_SOURCE_DIR=$source" -DXGRAD_UNITY_BUILD=ON) ;;
  *) echo "consumer.sh: unknown mode '$mode' (install | subdir)" >&2; exit 2 ;;
esac

start=$SECONDS
cmake -S "$source/examples/standalone" -B "$work/build" "${args[@]}"
cmake --build "$work/build" -j "$(nproc)"
echo "consumer.sh $mode: configured and built in $((SECONDS - start)) s"
"$work/build/standalone"
"$work/build/standalone_f64"
