// data/text_source.hpp — the raw text a run trains on: a file's bytes, or the King James Bible.
//
// Legend: N bytes of text (a byte is a character for the ASCII KJV).
//
//   read_text_file(path)   the N bytes of a regular file, unchanged
//   read_bible(range)      the verses of `range` as Debian's bible-kjv prints them, one per line,
//                          each led by its reference: "Ge1:1 In the beginning God created ..."
// Next: vocab.hpp makes ids of the bytes, shards.hpp stores them, sampler.hpp cuts windows.
#pragma once

#include <string>

namespace xgrad::data {

// The N bytes of the plain-text file at `path`. Throws std::runtime_error naming "read_text_file"
// and the path when it is not a regular file (a directory; a FIFO or a device such as /dev/zero,
// which could block or never end: refused before it is opened), cannot be opened or read, or is empty.
std::string read_text_file(const std::string& path);

// The whole King James Bible, Genesis 1:1 to Revelation 22:21 (about 4.4 MB).
inline const char* const kWholeBible = "gen1:1-rev22:21";

// The verses of `range` as `bible -f "<range>"` prints them (Debian's bible-kjv, run through
// popen(3)), e.g. "psa1:1-psa150:6" for the Psalms, "gen1:1,gen1:3" for two verses.
// The command goes through a shell, so `range` is checked before anything runs: it must be
// non-empty, hold only letters, digits, ':', '-', ',' and spaces, and not start with '-' (an option
// of bible's).
// Throws std::invalid_argument naming "read_bible", the range and the first refused character
// (a quote, ';', '$', '`', ...) or a leading '-'; std::runtime_error when the program cannot run or prints no verse
// for the range (an unknown book, or bible-kjv not installed: the message says which package).
std::string read_bible(const std::string& range = kWholeBible);

}  // namespace xgrad::data
