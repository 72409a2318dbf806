// The action name carried by an lt_action_event, as UTF-8.  ASCII names
// come as text; other names as CPython's raw code units (Latin-1, UCS-2 or
// UCS-4, per the kind in the event's flags), decoded here.  A name longer
// than the event holds continues in ACTION_NAME_TAIL records sent just
// before its BEGIN on the same thread; ActionNameAssembler joins them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "bpf/events.h"

namespace lt {

// The head only: what the BEGIN itself carries.
std::string action_name(const lt_action_event& e);
// CPython str code units (kind 1 = Latin-1, 2 = UCS-2, 4 = UCS-4,
// little-endian) as UTF-8; a partial last unit is ignored.  A lone
// surrogate stays a surrogate, in generalized UTF-8 (ED A0..BF xx, as
// Python's "surrogatepass" writes it), not valid UTF-8: every writer turns
// it into `\udcff` (user/text/utf8_text.h), so the name can be told
// apart from others and given back as the target's str.
std::string code_units_to_utf8(const void* data, std::size_t bytes, unsigned kind);
// What stands for the missing middle of a name longer than the tails reach
// (or whose tails were lost): `prefix` + marker + `suffix`.  The full length
// is part of the marker, so distinct names merge only when they share
// prefix, length and end.
std::string cut_name_marker(std::uint32_t code_points);

class ActionNameAssembler {
 public:
  void add_tail(const lt_event_header& h, const lt_action_name_tail_event& t);
  struct Name {
    std::string text;
    bool complete = true;  // every code point is in `text` (else it carries the cut marker)
  };
  // The whole name of an ACTION_BEGIN (or DIRECT_START/STOP): its head plus
  // the tails its thread sent for the same key just before.
  Name name(const lt_event_header& h, const lt_action_event& e);

 private:
  struct Pending {
    std::uint64_t key = 0;
    std::uint32_t start = 0;  // byte offset of units[0] in the name
    std::string units;        // code units from `start`, contiguous
    std::uint32_t end_offset = 0;
    std::string end_units;                // the name's last bytes, after a gap
    bool broken = false;                  // a piece unreadable or lost
    std::uint32_t pieces = 0, first = 0;  // tails seen, the first one's offset
  };
  std::unordered_map<std::uint64_t, Pending> pending_;  // (pid << 32 | tid) -> tails so far
};

}  // namespace lt
