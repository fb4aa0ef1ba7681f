// data/text_source.cpp — a file's bytes, and the KJV through the `bible` program.
#include <xgrad/data/text_source.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include <xgrad/io/atomic_file.hpp>  // non_regular_kind

namespace xgrad::data {

std::string read_text_file(const std::string& path) {
    // Say what the path is before opening it: a directory opens as an ifstream and fails only
    // inside libstdc++'s first read, a FIFO blocks in open() until a writer comes, /dev/zero
    // never ends.
    const std::string kind = io::non_regular_kind(path);
    if (kind == "a directory")
        throw std::runtime_error("read_text_file: '" + path + "' is a directory, not a text file");
    if (!kind.empty())
        throw std::runtime_error("read_text_file: '" + path + "' is " + kind + ", not a regular text file");
    errno = 0;
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw std::runtime_error("read_text_file: cannot open text file '" + path + "' (" +
                                 (errno ? std::strerror(errno) : "missing file?") + ")");
    std::string text;
    try {
        text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } catch (const std::exception& e) {
        throw std::runtime_error("read_text_file: cannot read '" + path + "' (" + e.what() + ")");
    }
    if (in.bad()) throw std::runtime_error("read_text_file: cannot read '" + path + "' (a read error)");
    if (text.empty()) throw std::runtime_error("read_text_file: no text read from '" + path + "' (empty file)");
    return text;
}

// A range reaches /bin/sh inside double quotes, where '"', '$', '`' and '\' still act, and ';',
// '|', '&' end the command if a quote is closed first: only the characters of a verse list pass.
static void check_bible_range(const std::string& range) {
    if (range.find_first_not_of(' ') == std::string::npos)
        throw std::invalid_argument("read_bible: the range is empty; give one such as \"psa1:1-psa150:6\"");
    if (range[range.find_first_not_of(' ')] == '-')
        throw std::invalid_argument(fmt::format("read_bible: range {:?} starts with '-', which bible would take for an "
                                                "option; a range starts with a book, such as \"psa1:1\"", range));
    for (std::size_t i = 0; i < range.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(range[i]);
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
                        c == '-' || c == ',' || c == ' ';
        if (!ok)
            throw std::invalid_argument(fmt::format(
                "read_bible: range {:?}: character {:?} (byte {}) at position {} is refused; a range holds only "
                "letters, digits, ':', '-', ',' and spaces (it is passed to a shell)",
                range, std::string(1, char(c)), int(c), i));
    }
}

std::string read_bible(const std::string& range) {
    check_bible_range(range);
    const std::string command = "bible -f \"" + range + "\"";
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
    if (!pipe) throw std::runtime_error("read_bible: cannot run `" + command + "` (" + std::strerror(errno) + ")");
    std::string text;
    char buf[1 << 16];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe.get())) > 0;) text.append(buf, n);
    if (text.empty())
        throw std::runtime_error(fmt::format("read_bible: `{}` printed no verse for the range {:?} (an unknown book "
                                             "or verse? is the bible-kjv package installed? see .ci/install-deps)",
                                             command, range));
    return text;
}

}  // namespace xgrad::data
