#include "reports/aggregate/stack_cut.h"

#include <algorithm>

namespace lt {

StackCut cut_at_origin(const lt_py_sample_event& e, const ActionOrigin& origin) {
  const unsigned n = std::min<unsigned>(e.nframes, LT_STACK_MAX);
  if (!origin.known()) return {n, CutHow::none};
  auto runs = [&](unsigned i) { return e.frames[i].code == origin.code && e.frames[i].checksum == origin.checksum; };
  // A whole stack (root included) places the opening frame exactly: the
  // depth tells recursion of the same function apart.
  const bool whole = !(e.flags & (LT_SAMPLE_TRUNCATED | LT_SAMPLE_READ_FAULT));
  if (whole && origin.depth != 0 && n >= origin.depth && runs(n - origin.depth))
    return {n - origin.depth, CutHow::at_depth};
  // Otherwise the outermost frame running its code: with the root side
  // missing the depth says nothing, and cutting at the outermost match
  // keeps every frame that may be inside the action.
  for (unsigned i = n; i-- > 0;)
    if (runs(i)) return {i, CutHow::by_code};
  return {n, CutHow::not_found};
}

}  // namespace lt
