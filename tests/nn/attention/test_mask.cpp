// tests/nn/attention/test_mask.cpp — the warning for a mask in the other convention
// (nn/attention/detail/shape.cpp, check_mask). xgrad's attn_mask keeps where it is 1; a future mask
// in masked_fill's form (1 = hide, triu(ones, 1)) hides every query's own position, which a keep
// mask almost never does. Such a mask is warned about once per process on stderr; each case runs
// in a forked child whose stderr goes to a file. Shapes: q, k, v (B, H, T, hd); x (B, T, d).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

#include <xgrad/nn/attention.hpp>
#include "test_helpers.hpp"

using namespace xgrad;
using namespace xgrad::testing;
namespace F = xgrad::nn::functional;

namespace {

// What child() wrote to stderr, run in a forked copy of this process; "exit <code>" appended if
// it did not return normally (an exception: 100).
std::string stderr_of_child(const std::function<void()>& child) {
    TempDir dir;
    const std::string path = dir.file("stderr");
    std::fflush(nullptr);  // nothing buffered is written twice
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || ::dup2(fd, 2) < 0) ::_exit(101);
        int code = 0;
        try {
            child();
        } catch (...) {
            code = 100;
        }
        std::fflush(stderr);
        ::_exit(code);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    const std::string text = read_bytes(path);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? text : text + "exit " + std::to_string(status);
}

std::size_t count(const std::string& text, const std::string& word) {
    std::size_t n = 0;
    for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
    return n;
}

const char* const kWarning =
    "xgrad: warning: scaled_dot_product_attention: attn_mask hides every query's own position (its diagonal "
    "is all 0): a future mask in masked_fill's form (1 = hide)? attn_mask keeps where it is 1; for causal "
    "attention pass causal_mask(Tq, Tk) or is_causal = true, or flip a mask with eq(mask, 0). (Warned once "
    "per process.)\n";

}  // namespace

TEST_CASE("attn_mask: a mask that hides every query's own position is warned about once",
          "[nn][attention][regression]") {
    const Tensor q = randn({1, 2, 4, 3}), future = triu(ones({4, 4}), 1);  // 1 above the diagonal
    const std::string err = stderr_of_child([&] {
        F::scaled_dot_product_attention(q, q, q, future);
        F::scaled_dot_product_attention(q, q, q, future.reshape({1, 1, 4, 4}));
        const nn::CausalSelfAttention attention(/*d=*/6, /*n_head=*/2);
        attention.forward(randn({1, 4, 6}), future);
    });
    CHECK(err == kWarning);
    // The module's mask goes through the same check, and names the module.
    const std::string module_err = stderr_of_child([&] {
        const nn::CausalSelfAttention attention(/*d=*/6, /*n_head=*/2);
        attention.forward(randn({2, 4, 6}), future);
    });
    CHECK(count(module_err, "xgrad: warning: CausalSelfAttention: attn_mask hides every query's own position") == 1);
    CHECK(count(module_err, "causal_mask(Tq, Tk)") == 1);
}

TEST_CASE("attn_mask: keep masks that show a query itself are not warned about", "[nn][attention][regression]") {
    const Tensor q = randn({1, 2, 4, 3});
    const std::string err = stderr_of_child([&] {
        F::scaled_dot_product_attention(q, q, q, F::causal_mask(4, 4));
        F::scaled_dot_product_attention(q, q, q, Tensor({1, 1, 0, 1}));              // a padding row
        F::scaled_dot_product_attention(q, q, q, Tensor({{0, 1, 1, 1}, {0, 1, 1, 1}, {0, 1, 1, 1}, {0, 1, 1, 1}}));
        F::scaled_dot_product_attention(q.narrow(2, 0, 1), q.narrow(2, 0, 1), q.narrow(2, 0, 1), zeros({1, 1}));  // T = 1
        F::scaled_dot_product_attention(q, q.narrow(2, 0, 2), q.narrow(2, 0, 2), zeros({4, 2}));  // Tq ≠ Tk
    });
    CHECK(err.empty());
}
