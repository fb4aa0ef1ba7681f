// text/split.hpp — the first step of a tokenizer: text → chunks, with a regular expression.
//
// A byte-pair tokenizer never merges across chunk boundaries. The split decides what a token can
// span: GPT-2's and GPT-4's patterns keep letters, digits, punctuation and whitespace apart, so
// " the" can become one token but "the." cannot. The chunks of "In the beginning, God" under
// GPT-4's pattern are
//
//   "In" | " the" | " beginning" | "," | " God"
//
// The patterns are Python `regex` syntax: Unicode classes (\p{L} letters, \p{N} numbers),
// possessive quantifiers (?+ ++) and a case-insensitive group (?i:…). PCRE2 reads that syntax as
// is; it is compiled once, with PCRE2's just-in-time compiler where the machine has one.
//
// Legend: bytes are UTF-8; a chunk is a std::string_view into the caller's text.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <xgrad/io/error.hpp>  // ValueError, IndexError, OutOfMemoryError: xgrad's, also core's

namespace xgrad::text {

// GPT-2's split (OpenAI's gpt-2 encoder.py; tiktoken's "gpt2"): contractions, optional space +
// letters, optional space + numbers, optional space + other symbols, whitespace.
inline constexpr std::string_view kGpt2Pattern =
    R"('(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// GPT-4's split (tiktoken's "cl100k_base", as karpathy/minbpe regex.py gives it): contractions in
// any case, letters after at most one non-letter, numbers of 1 to 3 digits, symbols with the line
// breaks that follow them, line breaks with the whitespace before them, and whitespace, of which
// the last space is left to the word that follows ("\s+(?!\S)").
inline constexpr std::string_view kGpt4Pattern =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";

// A compiled split pattern. Thread-safe: split() may be called from several threads at once.
class Splitter {
public:
    // Compiles `pattern` (UTF-8, Unicode properties on: \s, \w, \d and \p{…} follow Unicode, as in
    // Python's `regex`, but for U+180E MONGOLIAN VOWEL SEPARATOR, which PCRE2's \s counts as
    // space, and for characters newer than the Unicode version of the PCRE2 library). Throws
    // ValueError (xgrad's, io/error.hpp) with PCRE2's message and the byte offset of the error,
    // e.g. for "(?" or an unknown property.
    explicit Splitter(std::string pattern = std::string(kGpt4Pattern));
    // A moved-from Splitter (the source of a move) throws ValueError from split() and pattern(),
    // saying so; assigning it a Splitter makes it usable again. A copy of one is moved-from too.
    ~Splitter();
    Splitter(Splitter&&) noexcept;
    Splitter& operator=(Splitter&&) noexcept;
    Splitter(const Splitter& other);             // recompiles other's pattern
    Splitter& operator=(const Splitter& other);

    // The chunks of `text`, in order, as views into it; their concatenation is `text`.
    //   - Matches are found as Python's re.findall finds them: the leftmost match, then the next
    //     from where it ended; an empty match is skipped, and the next may start at the same
    //     character if it is not empty.
    //   - What no match covers becomes a chunk of its own, so nothing is lost. On valid UTF-8 and
    //     GPT-2's or GPT-4's pattern that never happens (every character is a letter, a number,
    //     whitespace or another symbol); it does for invalid UTF-8, which Python's str cannot
    //     hold and PCRE2 never matches (PCRE2_MATCH_INVALID_UTF), and for patterns that do not
    //     cover every character (Python's findall drops those characters).
    // A pattern that is linear in the text matches a text of any length: PCRE2's JIT stack grows
    // with the longest match ((a|b)+ takes about 30 bytes of it per byte matched), within the
    // memory the system gives (else OutOfMemoryError naming the pattern and the text's length).
    // Throws ValueError naming the pattern, the text's length and the way out (possessive or
    // atomic repetitions, a shorter text) for a pattern that backtracks worse than linearly from
    // one start, past PCRE2's match limit (here 10 million + 16 steps per byte of text), as
    // "(x+x+)+y" does on "xx…xzy". The limit holds for each start position, so a pattern that
    // scans to the end of the text from every start before failing there, as "(a|b)*?c|(a|b)*d"
    // on a run of a's, is not stopped: its time grows with the square of the text (as in
    // Python's `re`).
    std::vector<std::string_view> split(std::string_view text) const;

    const std::string& pattern() const;
    // True for the source of a move: split() and pattern() then throw ValueError.
    bool moved_from() const noexcept { return compiled_ == nullptr; }

private:
    struct Compiled;  // PCRE2's code, kept out of this header
    static std::unique_ptr<Compiled> compile(const std::string& pattern);  // throws ValueError
    void check_not_moved_from(const char* op) const;
    std::string pattern_;
    std::unique_ptr<Compiled> compiled_;  // null only in a moved-from Splitter
};

}  // namespace xgrad::text
