// examples/common/gnuplot.hpp — drawing a PNG with gnuplot, shared by the examples.
//
// The examples write their numbers to a data file, then a small gnuplot script that reads it
// and draws a PNG (terminal pngcairo). gnuplot is an optional run-time dependency (Debian's
// gnuplot-nox): when it is missing, nothing is drawn and the note says so. The script stays
// beside the PNG, so a reader can restyle the picture and run `gnuplot name.gp` again.
#pragma once

#include <string>

namespace examples {

// True when a `gnuplot` program is on the PATH.
bool gnuplot_available();

// Writes `script` to `script_path` (io::write_file_atomically) and runs gnuplot on it, as a
// child process given the path as its argument (no shell), so any character of the path is safe.
// The script is expected to set its own terminal and `set output` to gnuplot_quote(png_path).
// Returns the note to print:
//   "<what>: <png_path>"                                          drawn
//   "<png_path> skipped: gnuplot is not installed (...)"          no gnuplot
// Throws std::runtime_error if the script cannot be written (naming its path and the reason),
// gnuplot exits non-zero, or the PNG is missing or cut short afterwards (a full disk, a read-only
// file, a dangling link).
std::string run_gnuplot(const std::string& script_path, const std::string& script, const std::string& png_path,
                        const std::string& what);

// `text` as a single-quoted gnuplot string: a ' inside is doubled (gnuplot's one escape in single
// quotes); every other byte stands for itself (double quotes, $, `, \ and spaces too). A control
// character (a newline would end the command) cannot be quoted: std::invalid_argument.
std::string gnuplot_quote(const std::string& text);

}  // namespace examples
