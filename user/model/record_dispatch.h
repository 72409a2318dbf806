// Typed dispatch from the record catalogue (bpf/record_kinds.h): a record
// is decoded once, one way, and handed to the handler overload that takes
// its struct.
//
//   visit_record(h, p, overloaded{
//       [&](const lt_event_header& h, const lt_py_code_event& e) { ... },
//       [&](const lt_event_header& h, const lt_proc_event& e) { ... }});
//
// A handler subscribes to kinds by the structs it takes; kinds it has no
// overload for are skipped. Kinds that share a struct (the five action
// kinds, the stack kinds, fork/exec/exit) reach the same overload: it
// reads h.kind.
//
// The size rule is the catalogue's: an LT_SIZE_EXACT kind decodes only at
// exactly sizeof(struct) (the collector drops any other size); an
// LT_SIZE_READER kind decodes at sizeof(struct) or more (a newer writer's
// longer record keeps its known part). A record too short, or of a kind
// the catalogue does not know, reaches no handler.
#pragma once
#include <cstring>
#include <type_traits>

#include "bpf/events.h"

namespace lt {

// Several lambdas as one overload set.
template <class... F>
struct overloaded : F... {
  using F::operator()...;
};
template <class... F>
overloaded(F...) -> overloaded<F...>;

// Decodes the record as R by the size rule; false if it does not fit.
template <typename R>
bool decode_record(const lt_event_header& h, const std::byte* p, bool exact, R& out) {
  if (exact ? h.size != sizeof(R) : h.size < sizeof(R)) return false;
  std::memcpy(&out, p, sizeof(R));
  return true;
}

// True when the kind was known, fit its rule and the handler took it.
template <class Handler>
bool visit_record(const lt_event_header& h, const std::byte* p, Handler&& handler) {
  switch (h.kind) {
#define LT_VISIT_KIND(NAME, NUM, STRUCT, RULE, ...)                                              \
  case LT_EV_##NAME:                                                                             \
    if constexpr (std::is_invocable_v<Handler&, const lt_event_header&, const struct STRUCT&>) { \
      struct STRUCT r;                                                                           \
      if (!decode_record(h, p, (RULE) == LT_SIZE_EXACT, r)) return false;                        \
      handler(h, static_cast<const struct STRUCT&>(r));                                          \
      return true;                                                                               \
    } else {                                                                                     \
      return false;                                                                              \
    }
    LT_RECORD_KINDS(LT_VISIT_KIND)
#undef LT_VISIT_KIND
    default:
      return false;
  }
}

}  // namespace lt
