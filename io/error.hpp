// io/error.hpp — the classes of xgrad's errors, one definition for every folder.
//
//   ValueError  (a std::invalid_argument)  wrong shapes, bad dims, bad options, a malformed file,
//                                          misuse of an object (autograd, a moved-from tokenizer)
//   IndexError  (a std::out_of_range)      an index or ID outside its valid range
//   OutOfMemoryError (a std::bad_alloc)    an array the system cannot allocate, naming the bytes
//
// They sit in io/, the folder beneath all others, so that core/ (core/error.hpp adds the check
// helpers) and text/, which uses no other folder, throw the same classes: a script's
// catch (const xgrad::ValueError&) catches a tensor op's error and the tokenizer's alike. A file
// that cannot be opened, read or written (missing, no permission, a full disk) is a
// std::runtime_error, as io::AtomicFile throws.
#pragma once

#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace xgrad {

struct ValueError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

struct IndexError : std::out_of_range {
    using std::out_of_range::out_of_range;
};

class OutOfMemoryError : public std::bad_alloc {
public:
    explicit OutOfMemoryError(std::string what) : what_(std::move(what)) {}
    const char* what() const noexcept override { return what_.c_str(); }

private:
    std::string what_;
};

}  // namespace xgrad
