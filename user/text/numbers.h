// Numbers as text, the one set every report and message uses.  Each says
// which printf / Python format it reproduces byte for byte: glibc's printf,
// Python's "%.Nf" and libfmt all round the exact binary value (ties to
// even), so the reports match the Python tools they imitate.  Python's
// repr()-style shortest numbers are reports/simple/number_format.h.
#pragma once
#include <cstdint>
#include <string>

namespace lt {

// "%.Nf" / "{:.Nf}".
std::string fixed(double v, int decimals);
// "%+.Nf": always a sign.
std::string signed_fixed(double v, int decimals);
// "%.Nf%%": v is already in percent.
std::string percent(double v, int decimals);
// Python's "{:,}" of an integer: "1,234,567".
std::string grouped(std::uint64_t v);
// Python's "{:,.Nf}" (for non-negative v): "1,234,567.50".
std::string grouped_fixed(double v, int decimals);
// A duration in nanoseconds as milliseconds / seconds, "%.Nf" (no unit).
std::string ns_as_ms(double ns, int decimals);
std::string ns_as_s(double ns, int decimals);

enum class HexCase { lower, upper };
// "%llx", zero-padded to at least `digits` ("%0*llx"); no "0x".
std::string hex(std::uint64_t v, int digits = 0, HexCase letters = HexCase::lower);

}  // namespace lt
