// examples/common/outputs.hpp — the files a run writes into --out: checked before the first step,
// so that a bad path is refused at once and not after hours of training; and saved one by one at
// the end, so that one failed save (a full disk) loses only its own file. Each file is written
// with io::write_file_atomically or io::AtomicFile (io/atomic_file.hpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace examples {

// Throws std::runtime_error, naming `flag` and the path, if dir/name for one of `names` exists and
// is not a regular file once symlinks are followed (a directory, a FIFO, a device), cannot be
// resolved (a symlink loop, a component that is not a directory), is a dangling symlink whose
// target's directory is missing or not writable, or if `dir` is not a writable directory. A
// missing file is fine: the run creates it. `dir` must exist (create it first).
void check_output_files(const std::string& dir, const std::vector<std::string>& names,
                        const std::string& flag = "--out");

// The saves at a run's end. Each attempt runs its save; one that throws a std::exception is
// reported on stderr at once ("cannot write <path>: <why>") and the next save still runs.
class FinalSaves {
public:
    void attempt(const std::string& path, const std::function<void()>& save);
    // Throws std::runtime_error "not written: <path> (<why>), ...; written: <path>, ..." if an
    // attempt failed (main then exits with status 1); returns otherwise.
    void check() const;
    bool all_written() const { return failed_.empty(); }

private:
    std::vector<std::string> written_, failed_;  // paths; failed_ with the reason
};

}  // namespace examples
