#!/usr/bin/env bash
# tests/quickstart_times.sh: the build times the README quotes, measured as a newcomer meets them.
#
#   bash tests/quickstart_times.sh [WORK]    WORK: an empty folder to work in (default: a new
#                                            temporary one, removed at the end)
#
# Clones this repository's HEAD twice into WORK and times, cold (ccache off), each from its own
# fresh clone:
#   make run     the quick start's first command: the build, then the default 30,000-step run
#   make test    the build of everything, then every test
# then, in the second clone, the README's "Adding an op" loop: `square` declared in core/ops.hpp,
# defined in core/math_ops.cpp and gradchecked in tests/core/gradcheck_math_ops.cpp, then
#   cmake --build build -j2 --target gradcheck_math_ops && build/tests/gradcheck_math_ops "square: gradcheck"
# It prints the three wall times in seconds, with the machine and the date. Run it on an idle
# machine: the figures are wall times.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${1:-}
if [[ -z $work ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT  # on success only: a failure below clears the trap, keeping its log
fi
mkdir -p "$work"
work=$(cd "$work" && pwd)
export CCACHE_DISABLE=1
ms() { echo $(($(date +%s%N) / 1000000)); }
seconds() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }

timed() {  # timed NAME DIR COMMAND...: run COMMAND in DIR, its output in WORK/NAME.log; its time in $took
  local name=$1 dir=$2 start rc=0
  shift 2
  start=$(ms)
  (cd "$dir" && "$@") >"$work/$name.log" 2>&1 </dev/null || rc=$?
  if ((rc != 0)); then
    tail -n 30 "$work/$name.log" >&2
    echo "quickstart_times.sh: $name failed (exit $rc); its log is $work/$name.log" >&2
    trap - EXIT
    exit 1
  fi
  took=$(seconds $(($(ms) - start)))
}

git clone -q "$root" "$work/run"
git clone -q "$root" "$work/test"
timed make-run "$work/run" make run
t_run=$took
timed make-test "$work/test" make test
t_test=$took

# The op of the README's "Adding an op", in the three files it names.
cd "$work/test"
sed -i 's|^// CMakeLists.txt); once library code calls it, move the declaration into the topic.s header.$|&\nTensor square(const Tensor\& x);|' core/ops.hpp
grep -q '^Tensor square' core/ops.hpp || { echo "quickstart_times.sh: core/ops.hpp has no 'ops of your own' section" >&2; exit 1; }
cat >>core/math_ops.cpp <<'EOF'

namespace xgrad {
Tensor square(const Tensor& x) {
    Array y = x.data() * x.data();
    return make_result(std::move(y), "square", {x},
        [x](const Array& grad_out, const Array& /*y*/) {
            return make_grads(Array(2 * x.data() * grad_out));
        });
}
}  // namespace xgrad
EOF
cat >>tests/core/gradcheck_math_ops.cpp <<'EOF'

TEST_CASE("square: gradcheck") {
    Tensor x = randn({3, 4}, /*requires_grad=*/true);
    GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return square(in[0]); }, {x});
    INFO(r.message);
    REQUIRE(r.ok);
}
EOF
timed op-loop "$work/test" bash -c \
  'cmake --build build -j2 --target gradcheck_math_ops && build/tests/gradcheck_math_ops "square: gradcheck"'
t_loop=$took

echo "Machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -n 1); $(date -u '+%F %H:%M') UTC"
echo "make run (fresh clone, build + default run): ${t_run} s"
echo "make test (fresh clone): ${t_test} s"
echo "Adding an op (rebuild + run the gradcheck): ${t_loop} s"
