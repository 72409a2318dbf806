// A self-contained SVG flame graph in the manner of flamegraph.pl: the
// merged stacks of every profile above one "all" frame, root at the bottom,
// siblings in alphabetical order, width proportional to weight.  Hover shows
// "label (N unit, P%)"; click zooms into a frame, "Reset Zoom" (or the bottom
// frame) zooms out.  Opens in any browser; no network.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "reports/flame/named_profile.h"

namespace lt {

// unit_label names the weight in tooltips ("samples", "ns").  Frames under
// 0.1% of the total are left out, as flamegraph.pl leaves out sub-pixel ones.
void write_flamegraph_svg(const std::vector<NamedProfile>& profiles, const std::string& title,
                          const std::string& unit_label, std::ostream& out);

}  // namespace lt
