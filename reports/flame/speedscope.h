// speedscope's JSON file format (https://www.speedscope.app/file-format-schema.json):
// one "sampled" profile per NamedProfile over a shared frame table, so
// switching profiles in speedscope keeps frame identities.
#pragma once
#include <ostream>
#include <vector>

#include "reports/flame/named_profile.h"

namespace lt {

// Profile name: root, or the StackProfile's name when root is empty.  Frames
// are {name: function, file, line} (line omitted when unknown or native),
// deduplicated across profiles; samples are root-first frame indices; unit
// "none" for sample counts, "nanoseconds" for blocked time.
void write_speedscope(const std::vector<NamedProfile>& profiles, std::ostream& out);

}  // namespace lt
