// The record catalogue (bpf/record_kinds.h) as data for user space: a
// kind's struct size, size rule and names, looked up by number.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "bpf/events.h"

namespace lt {

// What a window of the stream takes of a kind (bpf/record_kinds.h).
enum class KeepInWindow : std::uint8_t {
  event = LT_KEEP_EVENT,
  name = LT_KEEP_NAME,
  frame = LT_KEEP_FRAME,
  segment = LT_KEEP_SEGMENT,
};

struct RecordKind {
  std::uint16_t kind;
  const char* enum_name;  // "ACTION_BEGIN"
  std::size_t size;       // sizeof its struct
  bool exact;             // LT_SIZE_EXACT: a record of another size is dropped
  const char* text;       // in loss notes: "lost 12 action start record(s)"
  const char* dump;       // in `dump` lines: "action_begin"
  KeepInWindow keep;      // event: when in the window; name: always; frame: never; segment: with its segment
  bool stack;             // its struct is lt_py_sample_event: it carries a Python stack
};

// Every kind, in the catalogue's order.
std::span<const RecordKind> record_kinds();
// The kind numbered `kind`; nullptr if the catalogue has none (a newer
// writer's kind, or damage).
const RecordKind* record_kind(std::uint16_t kind);
// The size a record of `kind` must have, or 0 when its readers check it.
std::size_t exact_record_size(std::uint16_t kind);
// Names for people: "memory"; "generator resume" for LT_EV_NONE in loss
// counts; "kind 200" for a number the catalogue does not know.
std::string record_text_name(std::uint16_t kind);
// How a window keeps `kind`: an unknown kind counts as an event.
KeepInWindow keep_in_window(std::uint16_t kind);
// Does a record of `kind` carry a Python stack (lt_py_sample_event)?  The
// catalogue's struct column says, so a new stack-carrying kind is
// normalised, symbolized and cut like the others with no list to edit.
bool carries_stack(std::uint16_t kind);
// Names in `dump` lines: "mem"; "unknown" for a number it does not know.
const char* record_dump_name(std::uint16_t kind);

}  // namespace lt
