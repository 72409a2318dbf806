// Python's format(x, ".5") and math.fsum, which SimpleProfiler's report uses.
#pragma once
#include <string>
#include <vector>

namespace lt {

// format(x, ".5"): five significant digits, 'g'-like, but fixed-point keeps
// at least one digit after the point and switches to exponent form when the
// rounded decimal exponent is >= 4 or < -4 (spec §4.3).
std::string python_format_5(double x);

// math.fsum: the correctly rounded sum (Shewchuk's partials, as CPython).
double python_fsum(const std::vector<double>& xs);

// str.expandtabs(8)
std::string expand_tabs(const std::string& s, int tabsize = 8);

}  // namespace lt
