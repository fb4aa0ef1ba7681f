// tests/core/child_process.hpp — running a piece of a test in a forked copy of the test program,
// with a deadline, and asking the pool how many threads serve a loop: what the pool's tests
// (test_parallel.cpp) and the fork tests (test_fork.cpp) both need.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

#include <catch2/catch.hpp>

#include <xgrad/core/parallel.hpp>

namespace xgrad::testing {

constexpr int kHung = -1;

// Runs child() in a forked copy of this process, which exits with child()'s return value (an
// exception: 100), and waits at most `deadline` for it. Returns the exit code; 128 + the signal's
// number if it died of one; kHung if it was still running at the deadline (it is then killed).
inline int exit_code_of_child(const std::function<int()>& child,
                              std::chrono::seconds deadline_after = std::chrono::seconds(5)) {
    std::fflush(nullptr);  // nothing buffered is written twice
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int code = 100;
        try {
            code = child();
        } catch (...) {
        }
        _exit(code);  // no atexit handlers, no Catch2 report from the child
    }
    const auto deadline = std::chrono::steady_clock::now() + deadline_after;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return kHung;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The number of chunks parallel_for(1000, 1, ...) runs: the number of threads actually serving it.
inline int chunks_run() {
    std::atomic<int> chunks{0};
    parallel_for(1000, 1, [&](std::size_t, std::size_t) { ++chunks; });
    return chunks.load();
}

}  // namespace xgrad::testing
