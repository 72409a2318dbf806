// The action name carried by an lt_action_event, as UTF-8.  ASCII names
// come as text; other names as CPython's raw code units (Latin-1, UCS-2 or
// UCS-4, per the kind in the event's flags), decoded here.
#pragma once
#include <string>

#include "bpf/events.h"

namespace lt {
std::string action_name(const lt_action_event& e);
}
