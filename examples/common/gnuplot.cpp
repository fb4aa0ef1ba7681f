// examples/common/gnuplot.cpp — drawing a PNG with gnuplot (see gnuplot.hpp).
#include "gnuplot.hpp"

#include <cstdlib>
#include <fstream>

namespace examples {

bool gnuplot_available() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }

std::string gnuplot_quote(const std::string& text) {
    std::string quoted = "'";
    for (char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
    return quoted + "'";
}

std::string run_gnuplot(const std::string& script_path, const std::string& script, const std::string& png_path,
                        const std::string& what) {
    if (!gnuplot_available())
        return png_path + " skipped: gnuplot is not installed (apt-get install gnuplot-nox)";
    std::ofstream(script_path) << script;
    if (std::system(("gnuplot " + gnuplot_quote(script_path) + " 2> /dev/null").c_str()) != 0)
        return png_path + " skipped: gnuplot failed (see " + script_path + ")";
    return what + ": " + png_path;
}

}  // namespace examples
