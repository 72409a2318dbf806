#include "user/text/text_table.h"

#include <algorithm>

#include "user/text/code_points.h"

namespace lt {

void TextTable::write(std::ostream& out, const std::string& indent) const {
  std::vector<std::size_t> w;
  for (auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (w.size() <= i) w.push_back(0);
      w[i] = std::max(w[i], cp_len(r[i]));
    }
  for (auto& r : rows) {
    std::string line = indent;
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (i) line += "  ";
      const bool left = i < align.size() && align[i] == 'l';
      // The last column, left-aligned, is not padded: no trailing blanks.
      line += left ? (i + 1 == r.size() ? r[i] : pad_right(r[i], w[i])) : pad_left(r[i], w[i]);
    }
    out << line << "\n";
  }
}

}  // namespace lt
