// io/atomic_file.hpp — the one way xgrad writes a file: whole or not at all.
//
// Every file xgrad saves (checkpoints and training states, the tokenizer, token shards, loss.csv,
// the data behind the pictures) goes through AtomicFile, so one set of rules holds for all:
//
//   path ──resolve symlinks──▶ target ──create "<target>.tmp-<pid>-<n>" (O_EXCL, beside it)──▶
//        write … ──fsync──▶ rename over target ──fsync the directory
//
//   * a reader, a crash or a full disk sees the old file or the new one, never a part;
//   * a symbolic link is written through, as open(2) writes: its target gets the bytes and the
//     link stays a link (rename(2) alone would replace the link by a regular file);
//   * a replaced file keeps its permission bits; a new one gets 0666 less the umask;
//   * a target that exists and is not a regular file (a directory, FIFO, device) is refused;
//   * a temporary left by a process that died is removed by the next save to the same target;
//   * a file-size limit (ulimit -f) fails the save as a full disk does: write() blocks SIGXFSZ in
//     its thread around write(2) and takes back the signal a write past the limit raised, so that
//     its default action does not end the process; the process's disposition is left alone.
// Errors name the path the caller gave (not the temporary) and what is wrong with it: a missing
// directory, no permission, a read-only file system, a full disk, the file-size limit.
// This folder depends on no other xgrad folder, so every library (core, nn, text, data) can use it.
// ref: POSIX rename(2), fsync(2); the durability recipe of SQLite's and Git's lock files.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace xgrad::io {

// A file being written; it replaces its target only at commit().
//   io::AtomicFile f("out/loss.csv");
//   f.write("step,loss\n");
//   f.commit();          // without it, the destructor removes the temporary and the target stays as it was
class AtomicFile {
public:
    // Resolves `path` and creates the temporary. `op` prefixes every error message (the caller's
    // function, e.g. "save_safetensors"). Throws std::runtime_error naming `path` and the reason:
    // an empty path, its directory is missing or is not a directory, no permission, a read-only
    // file system, the target is not a regular file, a symlink loop (over 40 links).
    explicit AtomicFile(const std::string& path, std::string op = "io::AtomicFile");
    ~AtomicFile();  // not committed: the temporary is removed, the target untouched
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    // Appends n bytes. Throws std::runtime_error naming the path and the reason: a full disk, or
    // "the file size limit (ulimit -f / RLIMIT_FSIZE) of <n> bytes was reached".
    void write(const void* data, std::size_t n);
    void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
    // Flushes, fsyncs and renames the temporary over the target, then fsyncs the directory. Throws
    // std::runtime_error naming the path and the reason; the target is then left as it was, except
    // when only the directory's fsync failed (the message says so: the file is written).
    void commit();

    const std::string& path() const { return path_; }      // as the caller gave it
    const std::string& target() const { return target_; }  // the file it replaces: symlinks followed
    std::size_t bytes_written() const { return written_; }

private:
    [[noreturn]] void fail(const std::string& what, int err);
    void discard() noexcept;

    std::string path_, target_, tmp_, op_;
    int fd_ = -1;
    std::size_t written_ = 0;
    bool committed_ = false;
};

// The whole file at once: AtomicFile(path, op), write(bytes), commit(). The same errors.
void write_file_atomically(const std::string& path, std::string_view bytes,
                           const std::string& op = "write_file_atomically");

// The file a write to `path` reaches, as open(2) resolves it: symlinks of the last component
// followed (a relative link target is taken from the link's directory), up to 40; the file need
// not exist. Throws std::runtime_error naming `path` for a longer chain (a loop).
std::string resolve_target(const std::string& path);

// What `path` is, symlinks followed, when it exists and is not a regular file: "a directory",
// "a FIFO (named pipe)", "a character device", "a block device", "a socket"; "" for a regular file
// and for a path stat(2) cannot resolve (opening it then says why).
std::string non_regular_kind(const std::string& path);

}  // namespace xgrad::io
