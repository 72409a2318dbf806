// `ltrace-bpf diff A B --html FILE` (issue 34): one self-contained page
// with the diff's table (as `diff` prints it) and a differential flame
// graph of the train steps' on-CPU Python stacks, in the manner of Brendan
// Gregg's: B's stacks at their widths (time per train step), each frame
// coloured by the change of its own time (the samples whose innermost frame
// it is) from A, red where B spends more, blue less, white under the
// table's effect floor; then A's stacks coloured the same way, where a
// frame gone from B still shows. Hover a frame for both sides' times.
// Sampled estimates: the colours show a change, the table says which
// changes are significant.
#pragma once
#include <ostream>
#include <string>

#include "reports/diff/diff_flame.h"
#include "reports/diff/step_diff.h"

namespace lt {

void write_diff_html(const StepDiff& d, const DiffFlame& flame, const std::string& label_a, const std::string& label_b,
                     std::ostream& out);

// A frame's fill for a change of `delta` seconds per step: white within
// `floor`, else red (slower) or blue (faster), fuller as |delta| nears
// `largest`. "#rrggbb".
std::string diff_colour(double delta, double floor, double largest);

}  // namespace lt
