#include "user/model/record_kinds.h"

#include <array>
#include <type_traits>

namespace lt {

namespace {

#define LT_RECORD_KIND_ROW(name, number, type, rule, text, dump, keep) \
  RecordKind{number,                                                   \
             #name,                                                    \
             sizeof(type),                                             \
             (rule) == LT_SIZE_EXACT,                                  \
             text,                                                     \
             dump,                                                     \
             static_cast<KeepInWindow>(keep),                          \
             std::is_same_v<type, lt_py_sample_event>},
constexpr RecordKind kKinds[] = {LT_RECORD_KINDS(LT_RECORD_KIND_ROW)};
#undef LT_RECORD_KIND_ROW

// A record's size travels in its header's u16.
#define LT_RECORD_KIND_FITS(name, number, type, ...) \
  static_assert(sizeof(type) <= UINT16_MAX, "record " #name " does not fit its header's size field");
LT_RECORD_KINDS(LT_RECORD_KIND_FITS)
#undef LT_RECORD_KIND_FITS

// Numbers index a table: the catalogue is checked to be unique at build time.
constexpr std::array<const RecordKind*, 256> index_kinds() {
  std::array<const RecordKind*, 256> by{};
  for (const RecordKind& k : kKinds) by[k.kind] = &k;
  return by;
}
constexpr auto kByNumber = index_kinds();

constexpr bool numbers_unique() {
  for (std::size_t i = 0; i < std::size(kKinds); ++i) {
    if (kKinds[i].kind == 0 || kKinds[i].kind > 255) return false;
    for (std::size_t j = 0; j < i; ++j)
      if (kKinds[i].kind == kKinds[j].kind) return false;
  }
  return true;
}
static_assert(numbers_unique(), "bpf/record_kinds.h: a kind number is 0, over 255 or used twice");

}  // namespace

std::span<const RecordKind> record_kinds() {
  return kKinds;
}

const RecordKind* record_kind(std::uint16_t kind) {
  return kind < kByNumber.size() ? kByNumber[kind] : nullptr;
}

std::size_t exact_record_size(std::uint16_t kind) {
  const RecordKind* k = record_kind(kind);
  return k && k->exact ? k->size : 0;
}

std::string record_text_name(std::uint16_t kind) {
  if (kind == LT_EV_NONE) return "generator resume";
  const RecordKind* k = record_kind(kind);
  return k ? k->text : "kind " + std::to_string(kind);
}

KeepInWindow keep_in_window(std::uint16_t kind) {
  const RecordKind* k = record_kind(kind);
  return k ? k->keep : KeepInWindow::event;
}

bool carries_stack(std::uint16_t kind) {
  const RecordKind* k = record_kind(kind);
  return k && k->stack;
}

const char* record_dump_name(std::uint16_t kind) {
  const RecordKind* k = record_kind(kind);
  return k ? k->dump : "unknown";
}

}  // namespace lt
