# Quick start for xgrad. Everything real lives in CMake; this file only strings the steps together.
#   make run [ARGS="--steps 1000"]   install deps, Release build in build/, run the main example
#   make install [PREFIX=dir]        install deps, build the libraries xgrad, xgrad_f64,
#                                    xgrad_distributed and xgrad_text in build/,
#                                    install them with the headers and the CMake package under PREFIX
#                                    (default ~/.local/xgrad); works right after make run
#   make test                        install deps, Release build, run every test with ctest
#   make sanitize                    the value tests under ASan + UBSan + LeakSanitizer, in build-asan/
#   make fuzz [FUZZ_LOADS=30000]     every header bit of a real checkpoint flipped, then mutated loads,
#                                    under ASan + UBSan, in build-asan/ (tests/fuzz_checkpoint.cpp;
#                                    FUZZ_SEED=1 picks the mutations)
#   make tsan                        the tests that start threads ([threads]) under ThreadSanitizer, in build-tsan/
#   make consumer                    xgrad built inside examples/own_project through add_subdirectory,
#                                    from scratch in build-consumer/, and own_project run
#   make build-profile               a clean build in build-profile/, timed phase by phase, with its
#                                    15 slowest steps (tests/build_profile.sh)
#   make bench [ARGS="--threads 2"]  xgrad vs PyTorch on the workloads of bench/, in build-bench/
#                                    (installs Debian's python3-torch if missing; see bench/compare.py)
#   make clean                       remove the build directories

BUILD      := build
ASAN_BUILD := build-asan
TSAN_BUILD := build-tsan
BENCH_BUILD := build-bench
CONSUMER_BUILD := build-consumer
PROFILE_BUILD := build-profile
JOBS       ?= $(shell nproc)
MAKEFLAGS  += --no-print-directory
# The main job: train the character-level MLP language model (examples/char_mlp).
MAIN ?= $(BUILD)/examples/char_mlp
ARGS ?=
# Where make install puts xgrad: PREFIX/include/xgrad, PREFIX/lib, PREFIX/lib/cmake/xgrad.
PREFIX ?= $(HOME)/.local/xgrad

# Every tree is configured with Ninja (Debian's ninja-build, from .ci/install-deps). A tree that an
# older checkout configured keeps its generator and its cached options (CMake cannot switch a
# tree's generator, and an option keeps its cached value): `make clean` first, to build as the
# README's figures were measured.
configure = cmake -S . -B $(1) $(if $(wildcard $(1)/CMakeCache.txt),,-G Ninja)

# One BLAS thread per test process: ctest runs tests in parallel, and OpenBLAS threads would oversubscribe.
export OPENBLAS_NUM_THREADS := 1
CTEST = ctest --output-on-failure --no-tests=error -j $(JOBS) --test-dir

.PHONY: deps run install test sanitize fuzz tsan consumer build-profile bench clean

deps:
	@bash .ci/install-deps

run: deps
	$(call configure,$(BUILD)) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS) --target $(notdir $(MAIN))
	$(MAIN) $(ARGS)

# The install needs the four libraries (cmake/install.cmake installs xgrad_f64, xgrad_distributed
# and xgrad_text beside xgrad), and make run builds only its example, so they are built here first;
# tests/consumer.sh makes the same two calls.
install: deps
	$(call configure,$(BUILD)) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS) --target xgrad xgrad_f64 xgrad_distributed xgrad_text
	cmake --install $(BUILD) --prefix $(PREFIX)
	@echo "xgrad is installed in $(PREFIX): headers in include/xgrad, libxgrad.a, libxgrad_f64.a, libxgrad_distributed.a, libxgrad_text.a and libxgrad_io.a in lib,"
	@echo "the CMake package in lib/cmake/xgrad. A project finds it with -DCMAKE_PREFIX_PATH=$(PREFIX)."

test: deps
	$(call configure,$(BUILD)) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)
	$(CTEST) $(BUILD)

# The sanitizer trees (build-asan/, build-tsan/) are compiled with Clang, Debian's clang and its
# sanitizer runtimes (.ci/install-deps): under the same sanitizers it compiles xgrad's templates in
# far less time than GCC, and CI builds both trees from scratch. The Release tree stays on GCC.
# Debug keeps assert() on, the libraries at -O1 instead of -O0 keep the tests' loops fast under
# ASan. -g1 (line tables, enough for the sanitizers' stack traces), unity builds and the tests'
# own code at -O0 (XGRAD_TESTS_OPTIMIZE; cmake/build_speed.cmake) keep this clean build short.
# The ASan tree runs every value test of the float library and of the examples' libraries; it
# leaves to the Release tree what runs the same sources another way: the double library and its
# gradchecks (the same code with real = double), and the examples' programs run whole.
# sanitize and fuzz configure build-asan/ with these same options, so neither reconfigures it.
SANITIZER_CXX := clang++
ASAN_CMAKE_ARGS := -DCMAKE_CXX_COMPILER=$(SANITIZER_CXX) -DXGRAD_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug \
                   -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" -DXGRAD_BUILD_F64=OFF
# Any finding fails the run: UBSan is built with -fno-sanitize-recover, ASan and LSan halt.
# allocator_may_return_null: a too-large malloc fails as in a release build (OutOfMemoryError).
sanitize: export ASAN_OPTIONS  := detect_leaks=1:halt_on_error=1:abort_on_error=0:allocator_may_return_null=1
sanitize: export UBSAN_OPTIONS := halt_on_error=1:print_stacktrace=1
sanitize: deps
	$(call configure,$(ASAN_BUILD)) $(ASAN_CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	$(CTEST) $(ASAN_BUILD)

# The checkpoint fuzzer (tests/fuzz_checkpoint.cpp) in the sanitizer tree, loading altered copies of
# a char_mlp checkpoint (model + AdamW state) into a live model and optimizer: first every bit of
# its header flipped alone (each must be refused or load a bit-identical state: 0 silent changes),
# then FUZZ_LOADS random mutants, half re-stamped with a valid checksum so that they reach the
# parser; every refused load must leave the model and optimizer bit-identical. It prints the counts
# of both phases. Seeded, so a failure reproduces with the same FUZZ_SEED. When make sanitize has
# run first, only the fuzzer itself is compiled.
FUZZ_LOADS ?= 30000
FUZZ_SEED  ?= 1
fuzz: export ASAN_OPTIONS  := detect_leaks=1:halt_on_error=1:abort_on_error=0
fuzz: export UBSAN_OPTIONS := halt_on_error=1:print_stacktrace=1
fuzz: deps
	$(call configure,$(ASAN_BUILD)) $(ASAN_CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target fuzz_checkpoint
	$(ASAN_BUILD)/tests/fuzz_checkpoint --iterations $(FUZZ_LOADS) --seed $(FUZZ_SEED)

# ThreadSanitizer (a separate tree: it cannot be combined with ASan). Only the binary of
# tests/core/test_parallel.cpp, test_fork.cpp, test_threads.cpp and test_autograd_threads.cpp is
# built, and only its [threads] tests run: the thread pool of core/parallel.hpp, fork(), the ops
# and optimizer at 1 and 2 threads, and the global generator and module construction used from
# several threads at once. Any report
# fails the run. die_after_fork=0: the pool's fork tests start threads in a forked child, which
# TSan refuses by default in a process that had threads when it forked.
# This tree compiles every library source alone, without a precompiled header or a unity batch
# (cmake/build_speed.cmake): a source that lacks an #include, which the others would hide, fails
# here, once per CI run.
tsan: export TSAN_OPTIONS := halt_on_error=1:second_deadlock_stack=1:die_after_fork=0
tsan: deps
	$(call configure,$(TSAN_BUILD)) -DCMAKE_CXX_COMPILER=$(SANITIZER_CXX) -DXGRAD_TSAN=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" \
	      -DXGRAD_BUILD_EXAMPLES=OFF -DXGRAD_BUILD_BENCH=OFF -DXGRAD_PRECOMPILED_HEADERS=OFF -DXGRAD_UNITY_BUILD=OFF
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target xgrad_threads_tests
	$(TSAN_BUILD)/tests/xgrad_threads_tests "[threads]"

# The add_subdirectory route of a project of the user's own (tests/consumer.sh subdir): xgrad
# compiled inside the project, own_project linked and run. ctest checks only that the
# project's files compile through that route (consumer_add_subdirectory), so that the Release
# tree is not built twice; CI runs this target once, as a phase of its own.
consumer: deps
	bash tests/consumer.sh subdir "$(CURDIR)" "$(BUILD)" "$(CURDIR)/$(CONSUMER_BUILD)"

build-profile: deps
	bash tests/build_profile.sh --dir $(PROFILE_BUILD)

# Release build with the benchmarks on; compare.py runs xgrad_bench and bench/torch_peer.py side by
# side and prints the table. Debian's python (/usr/bin/python3) is the one that has python3-torch.
# gemm_shapes (W7) exists once install-deps --bench has put libxsmm and BLIS in place;
# allreduce_order (T9) in a build with MPI, which install-deps installs.
bench:
	@bash .ci/install-deps --bench
	$(call configure,$(BENCH_BUILD)) -DCMAKE_BUILD_TYPE=Release -DXGRAD_BUILD_BENCH=ON
	cmake --build $(BENCH_BUILD) -j $(JOBS) --target xgrad_bench memory_accounting char_mlp gpt gemm_shapes allreduce_order
	/usr/bin/python3 bench/compare.py --build $(BENCH_BUILD) $(ARGS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(BENCH_BUILD) $(CONSUMER_BUILD) $(PROFILE_BUILD)
