// Python measures, pads and slices str by code points, not bytes: the
// renderers that reproduce Python-made tables (torch's op table, nsys's
// stats, SimpleProfiler's) count UTF-8 text the same way so non-ASCII names
// line up.
#pragma once
#include <cstddef>
#include <string>

namespace lt {

// len(s) in Python terms: UTF-8 code points.  Bytes that are not UTF-8 are
// measured as the writers print them (utf8_text.h): a stray byte as `\xNN`
// (4 columns), a lone surrogate as `\uXXXX` (6), so a table padded with it
// still lines up once written.
std::size_t cp_len(const std::string& s);
// s[:n] in Python terms.
std::string cp_prefix(const std::string& s, std::size_t n);
// s.rjust(width) / "{: >W}": never truncates (an over-long value pushes the row out).
std::string pad_left(const std::string& s, std::size_t width);
// s.ljust(width) / "{: <W}": never truncates.
std::string pad_right(const std::string& s, std::size_t width);

}  // namespace lt
