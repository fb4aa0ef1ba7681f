// examples/gnuplot.hpp — run a gnuplot script if gnuplot is installed (plots are optional).
//
// Examples write their plot as a gnuplot script next to the data, then call run_gnuplot, which
// returns the line to print: where the PNG went, or why it was skipped. A missing gnuplot never
// fails a run (Debian: apt-get install gnuplot-nox).
#pragma once

#include <cstdlib>
#include <string>

namespace xgrad::examples {

inline std::string run_gnuplot(const std::string& script, const std::string& png) {
    if (std::system("command -v gnuplot > /dev/null 2>&1") != 0)
        return png + " skipped: gnuplot is not installed (apt-get install gnuplot-nox)";
    if (std::system(("gnuplot '" + script + "' 2> /dev/null").c_str()) != 0)
        return png + " skipped: gnuplot failed (see " + script + ")";
    return "wrote " + png;
}

}  // namespace xgrad::examples
