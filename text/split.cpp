// text/split.cpp — the split pattern on PCRE2 (https://www.pcre.org/current/doc/html/).
#include "split.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace xgrad::text {

namespace {

std::string pcre2_message(int code) {
    PCRE2_UCHAR buffer[256];
    const int n = pcre2_get_error_message(code, buffer, sizeof buffer);
    return n < 0 ? "error " + std::to_string(code) : std::string(reinterpret_cast<const char*>(buffer), std::size_t(n));
}

}  // namespace

struct Splitter::Compiled {
    pcre2_code* code = nullptr;
    ~Compiled() { pcre2_code_free(code); }
};

Splitter::Splitter(std::string pattern) : pattern_(std::move(pattern)), compiled_(std::make_unique<Compiled>()) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    // UTF: the subject and pattern are UTF-8. UCP: \s \w \d and [[:…:]] follow Unicode properties,
    // as Python's str patterns do. MATCH_INVALID_UTF: invalid UTF-8 in the subject is never matched
    // instead of failing the whole match.
    compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
    if (!compiled_->code)
        throw std::invalid_argument("Splitter: the pattern does not compile: " + pcre2_message(error) +
                                    " at byte " + std::to_string(offset) + " of \"" + pattern_ + "\"");
    // The just-in-time compiler makes matching several times faster; where the machine has none
    // (an unsupported CPU, or a build without it) PCRE2's interpreter runs the same pattern.
    pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

Splitter::~Splitter() = default;
Splitter::Splitter(Splitter&&) noexcept = default;
Splitter& Splitter::operator=(Splitter&&) noexcept = default;
Splitter::Splitter(const Splitter& other) : Splitter(other.pattern_) {}
Splitter& Splitter::operator=(const Splitter& other) {
    if (this != &other) *this = Splitter(other.pattern_);
    return *this;
}

std::vector<std::string_view> Splitter::split(std::string_view text) const {
    std::vector<std::string_view> chunks;
    if (text.empty()) return chunks;
    // Match data and the JIT's stack belong to one call, so that threads can split at once.
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match(
        pcre2_match_data_create_from_pattern(compiled_->code, nullptr), pcre2_match_data_free);
    std::unique_ptr<pcre2_match_context, void (*)(pcre2_match_context*)> context(pcre2_match_context_create(nullptr),
                                                                                 pcre2_match_context_free);
    std::unique_ptr<pcre2_jit_stack, void (*)(pcre2_jit_stack*)> stack(pcre2_jit_stack_create(32 * 1024, 8 << 20, nullptr),
                                                                       pcre2_jit_stack_free);
    if (!match || !context || !stack) throw std::bad_alloc();
    pcre2_jit_stack_assign(context.get(), nullptr, stack.get());
    // PCRE2 ends a match after 10 million backtracking steps by default, a guard against patterns
    // that backtrack exponentially. GPT-4's \s*[\r\n] gives back a whitespace run one character at
    // a time before \s+(?!\S) takes it: linear work, but past that limit for a run of 10 MB. The
    // limit grows with the text, so that only a pattern that is worse than linear reaches it.
    constexpr std::uint64_t kBaseLimit = 10'000'000, kStepsPerByte = 16;
    pcre2_set_match_limit(context.get(), std::uint32_t(std::min<std::uint64_t>(
                                             UINT32_MAX, kBaseLimit + kStepsPerByte * std::uint64_t(text.size()))));

    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::size_t covered = 0, from = 0;  // text[0, covered) is in chunks; the next search starts at `from`
    std::uint32_t options = 0;
    while (from < text.size()) {
        const int rc = pcre2_match(compiled_->code, subject, text.size(), from, options, match.get(), context.get());
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) throw std::runtime_error("Splitter::split: matching failed at byte " + std::to_string(from) + ": " +
                                             pcre2_message(rc));
        const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
        const std::size_t begin = span[0], end = span[1];
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
