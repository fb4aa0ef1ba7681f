// examples/common/gnuplot.cpp — drawing a PNG with gnuplot (see gnuplot.hpp).
#include "gnuplot.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include <xgrad/core/parse.hpp>
#include <xgrad/io/atomic_file.hpp>

extern char** environ;

namespace examples {

namespace {
// Runs `argv` (argv[0] looked up on the PATH) with its stdout and stderr sent to /dev/null and
// returns its exit status, or -1 if it could not be started. No shell: the arguments reach the
// program as they are, whatever quotes, '$', '`' or spaces they hold.
int run_quietly(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    const int err = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) return -1;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
}  // namespace

bool gnuplot_available() { return run_quietly({"gnuplot", "--version"}) == 0; }

std::string gnuplot_quote(const std::string& text) {
    for (char c : text)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
            throw std::invalid_argument("gnuplot_quote: a control character (newline, tab, ...) cannot be quoted "
                                        "in a gnuplot script: " + xgrad::quoted_text(text));
    std::string quoted = "'";
    for (char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
    return quoted + "'";
}

std::string run_gnuplot(const std::string& script_path, const std::string& script, const std::string& png_path,
                        const std::string& what) {
    if (!gnuplot_available())
        return png_path + " skipped: gnuplot is not installed (apt-get install gnuplot-nox)";
    xgrad::io::write_file_atomically(script_path, script, "run_gnuplot");
    if (run_quietly({"gnuplot", script_path}) != 0)
        throw std::runtime_error(fmt::format("gnuplot failed (see {})", script_path));
    // A whole PNG ends with its IEND chunk: length 0, "IEND", CRC AE 42 60 82. gnuplot exits 0
    // even when its writes failed (a full disk), leaving the file empty or cut short.
    static const std::string kIend("\0\0\0\0IEND\xAE\x42\x60\x82", 12);
    std::ifstream png(png_path, std::ios::binary | std::ios::ate);
    std::string tail(kIend.size(), '\0');
    const bool whole = png && png.tellg() >= std::streamoff(kIend.size()) &&
                       png.seekg(-std::streamoff(kIend.size()), std::ios::end).read(&tail[0], std::streamsize(tail.size())) &&
                       tail == kIend;
    if (!whole) throw std::runtime_error(fmt::format("gnuplot left {} missing or cut short (see {})", png_path, script_path));
    return what + ": " + png_path;
}

}  // namespace examples
