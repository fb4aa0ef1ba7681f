// io/atomic_file.cpp — the temporary, the rename and the syncs (the rules: atomic_file.hpp).
#include <xgrad/io/atomic_file.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <vector>

#include <fmt/format.h>

namespace xgrad::io {

namespace fs = std::filesystem;

namespace {

// A save's temporary is "<target>.tmp-<pid>-<n>", n counting this process's saves: unique per
// save, even for threads saving to one target; O_EXCL refuses a name that exists.
std::atomic<std::uint64_t> g_save_count{0};

fs::path directory_of(const std::string& path) {
    const fs::path dir = fs::path(path).parent_path();
    return dir.empty() ? fs::path(".") : dir;
}

const char* kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

// A positive decimal integer, all of `s`.
bool parse_count(std::string_view s, long long& value) {
    if (s.empty() || s[0] == '-' || s[0] == '+') return false;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    return ec == std::errc() && end == s.data() + s.size();
}

// Removes "<target>.tmp-<pid>[-<n>]" files whose process has died (kill(pid, 0) fails with ESRCH);
// this process's and live processes' temporaries are kept. Assumes the writers share this
// machine's pid namespace. Errors are ignored: cleaning never fails a save.
void remove_stale_temps(const std::string& target) {
    const std::string prefix = fs::path(target).filename().string() + ".tmp-";
    std::vector<fs::path> stale;
    std::error_code ec;
    for (fs::directory_iterator it(directory_of(target), ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.compare(0, prefix.size(), prefix) != 0) continue;
        const std::string_view rest = std::string_view(name).substr(prefix.size());
        const std::size_t dash = rest.find('-');
        long long pid = 0, n = 0;  // "<pid>-<n>" or "<pid>"
        if (!parse_count(rest.substr(0, dash), pid) ||
            (dash != std::string_view::npos && !parse_count(rest.substr(dash + 1), n)) || pid <= 0 ||
            pid > INT_MAX || pid == ::getpid())
            continue;
        if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to ask
        stale.push_back(it->path());
    }
    for (const fs::path& p : stale) fs::remove(p, ec);
}

// Makes a rename durable. True on success, and where a directory cannot be synced (EINVAL).
bool fsync_directory(const fs::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::fsync(fd) == 0 || errno == EINVAL;
    ::close(fd);
    return ok;
}

// SIGXFSZ held off in the calling thread while it lives. A write(2) that would grow a file past
// RLIMIT_FSIZE raises SIGXFSZ, whose default action ends the process; while the signal is blocked
// the write fails with EFBIG instead (POSIX write(2)), and the signal waits, pending on this
// thread. take_pending() removes it before the old mask returns, so that it is never delivered:
// the limit is then a failed save, as a full disk is. The process's disposition of SIGXFSZ (a
// handler, SIG_IGN, SIG_DFL) and other threads' masks are left as they are. A thread that blocked
// SIGXFSZ itself keeps whatever is pending for it.
class XfszHeld {
public:
    XfszHeld() {
        sigemptyset(&xfsz_);
        sigaddset(&xfsz_, SIGXFSZ);
        held_ = ::pthread_sigmask(SIG_BLOCK, &xfsz_, &old_) == 0 && !sigismember(&old_, SIGXFSZ);
    }
    ~XfszHeld() {
        if (held_) ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    XfszHeld(const XfszHeld&) = delete;
    XfszHeld& operator=(const XfszHeld&) = delete;
    void take_pending() {
        const timespec now{0, 0};
        while (held_ && ::sigtimedwait(&xfsz_, nullptr, &now) == SIGXFSZ) {}
    }

private:
    sigset_t xfsz_, old_;
    bool held_ = false;
};

// The reason a write failed, in words a user acts on; `err` is write(2)'s errno.
std::string why_not_written(int err) {
    if (err == ENOSPC || err == EDQUOT) return "no space left on the device";
    struct rlimit limit {};
    if (err == EFBIG && ::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
        return fmt::format("the file size limit (ulimit -f / RLIMIT_FSIZE) of {} bytes was reached", limit.rlim_cur);
    return std::strerror(err);
}

// Why a file cannot be created in `dir`, in words a user acts on; `err` is open(2)'s errno.
std::string why_not_created(const fs::path& dir, int err) {
    struct stat st {};
    if (err == ENOENT) {
        if (::stat(dir.c_str(), &st) != 0) return fmt::format("its directory '{}' does not exist", dir.string());
    }
    if (err == ENOTDIR) return fmt::format("'{}' is not a directory", dir.string());
    if (err == EACCES || err == EPERM) return fmt::format("no permission to create a file in '{}'", dir.string());
    if (err == EROFS) return fmt::format("'{}' is on a read-only file system", dir.string());
    if (err == ENOSPC || err == EDQUOT) return "no space left on the device";
    return std::strerror(err);
}

}  // namespace

std::string resolve_target(const std::string& path) {
    fs::path p(path);
    for (int links = 0;; ++links) {
        struct stat st {};
        if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p.string();
        if (links == 40) throw std::runtime_error(fmt::format("'{}': too many levels of symbolic links (a loop?)", path));
        std::error_code ec;
        const fs::path next = fs::read_symlink(p, ec);
        if (ec) return p.string();  // removed meanwhile: the rename creates the name itself
        p = next.is_absolute() ? next : p.parent_path() / next;
    }
}

std::string non_regular_kind(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return "";
    return kind_of(st.st_mode);
}

AtomicFile::AtomicFile(const std::string& path, std::string op) : path_(path), op_(std::move(op)) {
    if (path.empty()) throw std::runtime_error(fmt::format("{}: cannot write '': an empty path", op_));
    try {
        target_ = resolve_target(path);
    } catch (const std::runtime_error& e) {
        throw std::runtime_error(fmt::format("{}: cannot write {}", op_, e.what()));
    }
    struct stat st {};
    const bool exists = ::stat(target_.c_str(), &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) {
        const std::string via = target_ == path ? "" : fmt::format(" (through symlinks, '{}')", target_);
        throw std::runtime_error(fmt::format("{}: cannot write '{}'{}: it is {}; a save replaces only a regular file "
                                             "or creates a new one", op_, path, via, kind_of(st.st_mode)));
    }
    remove_stale_temps(target_);
    for (int attempt = 0; fd_ < 0 && attempt < 100; ++attempt) {  // a name left by a dead process's save
        tmp_ = fmt::format("{}.tmp-{}-{}", target_, ::getpid(), g_save_count.fetch_add(1));
        fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // 0666 & ~umask
        if (fd_ < 0 && errno != EEXIST) break;
    }
    if (fd_ < 0) {
        const int err = errno;
        throw std::runtime_error(fmt::format("{}: cannot write '{}': {}", op_, path, why_not_created(directory_of(target_), err)));
    }
    if (exists) (void)::fchmod(fd_, st.st_mode & 07777);  // best effort, as cp -p
}

AtomicFile::~AtomicFile() {
    if (!committed_) discard();
}

void AtomicFile::discard() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (!tmp_.empty()) std::remove(tmp_.c_str());
    tmp_.clear();
}

void AtomicFile::fail(const std::string& what, int err) {
    discard();
    throw std::runtime_error(fmt::format("{}: {} '{}' failed ({}); the file is left as it was", op_, what, path_,
                                         why_not_written(err)));
}

void AtomicFile::write(const void* data, std::size_t n) {
    if (fd_ < 0) throw std::logic_error(fmt::format("{}: '{}' was already committed or failed", op_, path_));
    const char* p = static_cast<const char*>(data);
    XfszHeld xfsz;  // past the file-size limit: EFBIG, not the end of the process
    while (n > 0) {
        const ssize_t w = ::write(fd_, p, n);
        const int err = w < 0 ? errno : 0;
        if (err == EINTR) continue;
        if (err == EFBIG) xfsz.take_pending();
        if (w <= 0) fail("writing", w == 0 ? ENOSPC : err);  // 0 bytes written: no room
        p += w;
        n -= std::size_t(w);
        written_ += std::size_t(w);
    }
}

void AtomicFile::commit() {
    if (fd_ < 0) throw std::logic_error(fmt::format("{}: '{}' was already committed or failed", op_, path_));
    if (::fsync(fd_) != 0) fail("writing", errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("writing", errno);
    if (std::rename(tmp_.c_str(), target_.c_str()) != 0) fail("replacing", errno);
    tmp_.clear();
    committed_ = true;
    if (!fsync_directory(directory_of(target_)))
        throw std::runtime_error(fmt::format("{}: '{}' was written, but syncing its directory failed ({}): the new "
                                             "file may not survive a power cut", op_, path_, std::strerror(errno)));
}

void write_file_atomically(const std::string& path, std::string_view bytes, const std::string& op) {
    AtomicFile file(path, op);
    file.write(bytes);
    file.commit();
}

}  // namespace xgrad::io
