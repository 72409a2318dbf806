// Where a sample's stack is cut so that an action's table starts where the
// action starts: AdvancedProfiler's cProfile is enabled at the action's
// start, so it sees only calls made inside the action, the frames below the
// one that opened it (the frame holding the `with`).  Pure: on the raw
// frames of a sample, before they are named.
#pragma once
#include <cstdint>

#include "reports/aggregate/actions.h"
#include "user/model/trace.h"

namespace lt {

enum class CutHow {
  none,       // no opening frame known: the whole stack is kept
  at_depth,   // found at its recorded depth from the root (the exact match)
  by_code,    // found by code object: the outermost frame running it (a
              // truncated stack, or a depth that did not match)
  not_found,  // known, but no frame of this stack runs its code: all kept
};

struct StackCut {
  unsigned keep = 0;  // frames[0 .. keep) (leaf first) are the action's
  CutHow how = CutHow::none;
  bool cut() const { return how == CutHow::at_depth || how == CutHow::by_code; }
};

// frames[keep] is the opening frame; keep 0: the sample ran in the opening
// frame's own code.
StackCut cut_at_origin(const lt_py_sample_event& e, const ActionOrigin& origin);

}  // namespace lt
