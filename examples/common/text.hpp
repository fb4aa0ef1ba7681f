// examples/common/text.hpp — the raw text an example trains on: the King James Bible, or a file.
// word2vec splits it into words (word2vec/corpus.hpp), gpt into characters (gpt/data.hpp).
#pragma once

#include <string>

namespace examples {

// The raw text. path empty: the whole King James Bible, as the `bible` program of Debian's
// bible-kjv package prints it (`bible -f "gen1:1-rev22:21"`, read through popen(): one verse per
// line, each starting with its reference, e.g. "Ge1:1 In the beginning ..."); otherwise the bytes
// of a plain-text file. Throws std::runtime_error if the program or file cannot be read (a
// missing file, a read error), gives no text, or is not a regular file (a directory; a FIFO or a
// device such as /dev/zero, which could block or never end: refused before it is opened).
std::string read_text(const std::string& path);

}  // namespace examples
