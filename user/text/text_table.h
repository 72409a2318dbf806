// A plain text table for the smaller reports (comm, memory): columns two
// spaces apart, each row indented, widths counted in code points (names may
// hold any Unicode, or bytes shown escaped).
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace lt {

struct TextTable {
  std::vector<std::vector<std::string>> rows;  // rows[0]: the header
  std::string align = "l";                     // per column 'l' or 'r'; columns past it are right-aligned
  void write(std::ostream& out, const std::string& indent = "  ") const;
};

}  // namespace lt
