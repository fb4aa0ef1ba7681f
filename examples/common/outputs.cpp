// examples/common/outputs.cpp — output paths checked up front, final saves one by one (see outputs.hpp).
#include "common/outputs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <xgrad/io/atomic_file.hpp>

namespace examples {

void check_output_files(const std::string& dir, const std::vector<std::string>& names, const std::string& flag) {
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
        throw std::runtime_error(fmt::format("{} {}: cannot write into the directory ({})", flag, dir,
                                             std::strerror(errno)));
    for (const std::string& name : names) {
        const std::string path = (std::filesystem::path(dir) / name).string();
        struct stat st {};
        const bool exists = ::stat(path.c_str(), &st) == 0;
        if (!exists && errno != ENOENT)
            throw std::runtime_error(fmt::format("{} {}: '{}' cannot be resolved ({}), so the run could not write "
                                                 "it at its end: remove it or choose another {}",
                                                 flag, dir, path, std::strerror(errno), flag));
        const std::string target = exists ? path : xgrad::io::resolve_target(path);  // a new file, or a dangling link's target
        const std::string target_dir = std::filesystem::path(target).parent_path().string();
        if (target != path && ::access(target_dir.c_str(), W_OK | X_OK) != 0)
            throw std::runtime_error(fmt::format("{} {}: '{}' is a symlink to '{}', which cannot be created ({}): "
                                                 "remove it or choose another {}", flag, dir, path, target,
                                                 std::strerror(errno), flag));
        const std::string kind = xgrad::io::non_regular_kind(path);
        if (!kind.empty())
            throw std::runtime_error(fmt::format("{} {}: '{}' is {}, where the run writes a file at its end: remove "
                                                 "it or choose another {}", flag, dir, path, kind, flag));
    }
}

void FinalSaves::attempt(const std::string& path, const std::function<void()>& save) {
    try {
        save();
        written_.push_back(path);
    } catch (const std::exception& e) {
        failed_.push_back(fmt::format("{} ({})", path, e.what()));
        std::fflush(stdout);  // this line after what was printed so far
        fmt::print(stderr, "cannot write {}: {}; the run goes on to write its other files\n", path, e.what());
    }
}

void FinalSaves::check() const {
    if (failed_.empty()) return;
    throw std::runtime_error(fmt::format("not written: {}; written: {}", fmt::join(failed_, ", "),
                                         written_.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(written_, ", "))));
}

}  // namespace examples
