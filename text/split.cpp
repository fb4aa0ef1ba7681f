// text/split.cpp — the split pattern on PCRE2 (https://www.pcre.org/current/doc/html/).
#include "split.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include <xgrad/io/error.hpp>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace xgrad::text {

namespace {

std::string pcre2_message(int code) {
    PCRE2_UCHAR buffer[256];
    const int n = pcre2_get_error_message(code, buffer, sizeof buffer);
    return n < 0 ? "error " + std::to_string(code) : std::string(reinterpret_cast<const char*>(buffer), std::size_t(n));
}

using MatchData = std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)>;
using MatchContext = std::unique_ptr<pcre2_match_context, void (*)(pcre2_match_context*)>;
using JitStack = std::unique_ptr<pcre2_jit_stack, void (*)(pcre2_jit_stack*)>;

// The matching state of one split() call (match data, limits, the JIT's stack), so that threads
// can split with one Splitter at once.
class Matcher {
public:
    Matcher(const pcre2_code* code, std::string_view text, const std::string& pattern)
        : code_(code), text_(text), pattern_(pattern),
          match_(pcre2_match_data_create_from_pattern(code, nullptr), pcre2_match_data_free),
          context_(pcre2_match_context_create(nullptr), pcre2_match_context_free) {
        if (!match_ || !context_) throw OutOfMemoryError("Splitter::split: PCRE2 cannot allocate its match data");
        // PCRE2 ends a match after 10 million backtracking steps by default, a guard against
        // patterns that backtrack exponentially. GPT-4's \s*[\r\n] gives back a whitespace run one
        // character at a time before \s+(?!\S) takes it: linear work, but past that limit for a
        // run of 10 MB. The limit grows with the text, so that only a pattern that is worse than
        // linear reaches it; the interpreter's depth limit (where there is no JIT) likewise.
        const std::uint64_t limit = kBaseLimit + kStepsPerByte * std::uint64_t(text.size());
        limit_ = std::uint32_t(std::min<std::uint64_t>(UINT32_MAX, limit));
        pcre2_set_match_limit(context_.get(), limit_);
        pcre2_set_depth_limit(context_.get(), limit_);
    }

    // The span [begin, end) of the first match at or after `from`, or nothing (no match).
    std::optional<std::pair<std::size_t, std::size_t>> find(std::size_t from, std::uint32_t options) {
        const auto* subject = reinterpret_cast<PCRE2_SPTR>(text_.data());
        int rc;
        while ((rc = pcre2_match(code_, subject, text_.size(), from, options, match_.get(), context_.get())) ==
               PCRE2_ERROR_JIT_STACKLIMIT)
            grow_stack(from);
        if (rc == PCRE2_ERROR_NOMATCH) return std::nullopt;
        if (rc < 0) fail(rc, from);
        const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match_.get());
        return std::pair{std::size_t(span[0]), std::size_t(span[1])};
    }

private:
    static constexpr std::uint64_t kBaseLimit = 10'000'000, kStepsPerByte = 16;
    static constexpr std::size_t kFirstStack = std::size_t(1) << 20;  // 1 MiB

    // PCRE2's JIT keeps its backtracking points on a stack of its own, 32 KiB of the machine's
    // by default. A linear pattern needs it in proportion to the length of its match: (a|b)+
    // leaves a point per repetition, about 30 bytes per byte matched. When a match runs out of it,
    // the stack is replaced by one twice as large (the first of 1 MiB) and the match runs again
    // from the same start: the stack stays under twice what the longest match needs. It is
    // address space reserved (mmap) and touched as used, so a large maximum costs little.
    void grow_stack(std::size_t from) {
        const std::size_t size = stack_size_ == 0 ? kFirstStack : 2 * stack_size_;
        JitStack bigger(size > stack_size_ ? pcre2_jit_stack_create(32 * 1024, size, nullptr) : nullptr,
                        pcre2_jit_stack_free);
        if (!bigger)
            throw OutOfMemoryError(fmt::format(
                "Splitter::split: the pattern \"{}\" needs a JIT stack of more than {} bytes for its match from "
                "byte {} of a text of {} bytes, and the system cannot reserve {}: split the text into shorter "
                "pieces (lines, documents) first",
                pattern_, stack_size_, from, text_.size(), size));
        pcre2_jit_stack_assign(context_.get(), nullptr, bigger.get());
        stack_ = std::move(bigger);  // the old stack is freed after the context points to the new one
        stack_size_ = size;
    }

    [[noreturn]] void fail(int rc, std::size_t from) const {
        const std::string where = fmt::format("from byte {} of a text of {} bytes", from, text_.size());
        if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT)
            throw ValueError(fmt::format(
                "Splitter::split: the pattern \"{}\" backtracks past PCRE2's {} ({} steps) {}: it is worse than linear "
                "there (nested repetitions such as (a+)+ try every way to cut a run). Make its repetitions possessive "
                "(x++, (?:…)++) or atomic ((?>…)), or split the text into shorter pieces (lines, documents) first",
                pattern_, rc == PCRE2_ERROR_MATCHLIMIT ? "match limit" : "depth limit", limit_, where));
        if (rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_NOMEMORY)
            throw OutOfMemoryError(fmt::format("Splitter::split: the pattern \"{}\" runs out of memory {} ({}): split "
                                               "the text into shorter pieces (lines, documents) first",
                                               pattern_, where, pcre2_message(rc)));
        throw ValueError(fmt::format("Splitter::split: the pattern \"{}\" fails {}: {}", pattern_, where,
                                     pcre2_message(rc)));
    }

    const pcre2_code* code_;
    std::string_view text_;
    const std::string& pattern_;
    MatchData match_;
    MatchContext context_;
    JitStack stack_{nullptr, pcre2_jit_stack_free};  // none until a match outgrows the default
    std::size_t stack_size_ = 0;
    std::uint32_t limit_ = 0;  // PCRE2's match and depth limits for this text
};

}  // namespace

struct Splitter::Compiled {
    pcre2_code* code = nullptr;
    ~Compiled() { pcre2_code_free(code); }
};

std::unique_ptr<Splitter::Compiled> Splitter::compile(const std::string& pattern) {
    auto compiled = std::make_unique<Compiled>();
    int error = 0;
    PCRE2_SIZE offset = 0;
    // UTF: the subject and pattern are UTF-8. UCP: \s \w \d and [[:…:]] follow Unicode properties,
    // as Python's str patterns do. MATCH_INVALID_UTF: invalid UTF-8 in the subject is never matched
    // instead of failing the whole match.
    compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
    if (!compiled->code)
        throw ValueError(fmt::format("Splitter: the pattern does not compile: {} at byte {} of \"{}\"",
                                     pcre2_message(error), offset, pattern));
    // The just-in-time compiler makes matching several times faster; where the machine has none
    // (an unsupported CPU, or a build without it) PCRE2's interpreter runs the same pattern.
    pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);
    return compiled;
}

Splitter::Splitter(std::string pattern) : pattern_(std::move(pattern)), compiled_(compile(pattern_)) {}
Splitter::~Splitter() = default;
Splitter::Splitter(Splitter&&) noexcept = default;
Splitter& Splitter::operator=(Splitter&&) noexcept = default;
Splitter::Splitter(const Splitter& other)
    : pattern_(other.pattern_), compiled_(other.moved_from() ? nullptr : compile(pattern_)) {}
Splitter& Splitter::operator=(const Splitter& other) {
    if (this != &other) *this = Splitter(other);
    return *this;
}

// As Python's ValueError for an operation on a closed file.
void Splitter::check_not_moved_from(const char* op) const {
    if (moved_from())
        throw ValueError(fmt::format("Splitter::{}: this Splitter was moved from (std::move gave its compiled "
                                     "pattern to another); assign it a Splitter before using it again",
                                     op));
}

const std::string& Splitter::pattern() const {
    check_not_moved_from("pattern");
    return pattern_;
}

std::vector<std::string_view> Splitter::split(std::string_view text) const {
    check_not_moved_from("split");
    std::vector<std::string_view> chunks;
    if (text.empty()) return chunks;
    Matcher matcher(compiled_->code, text, pattern_);
    std::size_t covered = 0, from = 0;  // text[0, covered) is in chunks; the next search starts at `from`
    std::uint32_t options = 0;
    while (from < text.size()) {
        const auto span = matcher.find(from, options);
        if (!span) break;
        const auto [begin, end] = *span;
        if (end > begin) {
            if (begin > covered) chunks.push_back(text.substr(covered, begin - covered));  // not matched: kept
            chunks.push_back(text.substr(begin, end - begin));
            covered = from = end;
            options = 0;
        } else {  // an empty match is skipped; as in findall, the next may start here if it is not empty
            from = begin;
            options = PCRE2_NOTEMPTY_ATSTART;
        }
    }
    if (covered < text.size()) chunks.push_back(text.substr(covered));
    return chunks;
}

}  // namespace xgrad::text
