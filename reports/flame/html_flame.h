// An interactive flame graph (icicle: root on top) as an HTML fragment for
// the HTML report: a <select> per profile (one per action), click a frame to
// zoom, hover for label/weight/share, a search box that highlights matching
// frames and sums their share.  Vanilla inline JS, no external resources.
#pragma once
#include <string>
#include <vector>

#include "reports/flame/named_profile.h"

namespace lt {

// Every element id starts with id_prefix (the <section> has id_prefix itself),
// so several sections can share a page; pass distinct, id-safe prefixes.
// Profiles are named root, or the StackProfile's name when root is empty.
// Frames under 0.01% of their profile are left out of the embedded data.
std::string html_flame_section(const std::vector<NamedProfile>& profiles, const std::string& id_prefix);

}  // namespace lt
