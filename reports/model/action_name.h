// The action name carried by an lt_action_event, as UTF-8.  ASCII names
// come as text; other names as CPython's raw code units (Latin-1, UCS-2 or
// UCS-4, per the kind in the event's flags), decoded here.
#pragma once
#include <cstddef>
#include <string>

#include "bpf/events.h"

namespace lt {
std::string action_name(const lt_action_event& e);
// CPython str code units (kind 1 = Latin-1, 2 = UCS-2, 4 = UCS-4,
// little-endian) as UTF-8; a partial last unit is ignored.
std::string code_units_to_utf8(const void* data, std::size_t bytes, unsigned kind);
}  // namespace lt
