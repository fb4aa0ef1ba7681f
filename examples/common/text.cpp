// examples/common/text.cpp — read_text: the KJV through the `bible` program, or a file's bytes.
#include "common/text.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>

#include <xgrad/io/atomic_file.hpp>

namespace examples {

std::string read_text(const std::string& path) {
    std::string text;
    std::string source = path;
    if (path.empty()) {
        // The whole KJV, Genesis 1:1 to Revelation 22:21: one verse per line.
        source = "bible -f \"gen1:1-rev22:21\"";
        std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(source.c_str(), "r"), pclose);
        if (!pipe) throw std::runtime_error("read_text: cannot run `" + source + "`");
        char buf[1 << 16];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe.get())) > 0;) text.append(buf, n);
    } else {
        // Say what the path is before opening it: a directory opens as an ifstream and fails only
        // inside libstdc++'s first read, a FIFO blocks in open() until a writer comes, /dev/zero
        // never ends.
        const std::string kind = xgrad::io::non_regular_kind(path);
        if (kind == "a directory")
            throw std::runtime_error("read_text: '" + path + "' is a directory, not a text file");
        if (!kind.empty()) throw std::runtime_error("read_text: '" + path + "' is " + kind + ", not a regular text file");
        errno = 0;
        std::ifstream in(path, std::ios::binary);
        if (!in)
            throw std::runtime_error("read_text: cannot open text file '" + path + "' (" +
                                     (errno ? std::strerror(errno) : "missing file?") + ")");
        try {
            text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        } catch (const std::exception& e) {
            throw std::runtime_error("read_text: cannot read '" + path + "' (" + e.what() + ")");
        }
        if (in.bad()) throw std::runtime_error("read_text: cannot read '" + path + "' (a read error)");
    }
    if (text.empty())
        throw std::runtime_error("read_text: no text read from " + (path.empty() ? "`" + source + "`" : "'" + path + "'") +
                                 (path.empty() ? " (is the bible-kjv package installed? see .ci/install-deps)" : " (empty file)"));
    return text;
}

}  // namespace examples
