// The event stream in memory: fixed-size records, exactly as they came off
// the ring buffer (plus the few that user space adds).  Live mode fills it
// while attached; the trace file is this byte stream on disk.  Reports are
// pure functions of a Trace.
#pragma once
#include <cstddef>
#include <cstring>
#include <vector>

#include "bpf/events.h"

namespace lt {

class Trace {
 public:
  // Appends one record; `size` must equal the header's size.
  void append(const void* record, std::size_t size) {
    auto p = static_cast<const std::byte*>(record);
    bytes_.insert(bytes_.end(), p, p + size);
    ++count_;
  }
  template <typename Record>
  void append(const Record& r) {
    append(&r, sizeof r);
  }
  std::size_t count() const { return count_; }
  const std::vector<std::byte>& bytes() const { return bytes_; }

  // Calls f(const lt_event_header&, const std::byte* record) for each record.
  // A record whose size is malformed ends the walk (never reads past the end).
  template <typename F>
  void for_each(F&& f) const {
    std::size_t at = 0;
    while (at + sizeof(lt_event_header) <= bytes_.size()) {
      lt_event_header h;
      std::memcpy(&h, bytes_.data() + at, sizeof h);
      if (h.size < sizeof h || at + h.size > bytes_.size()) return;
      f(h, bytes_.data() + at);
      at += h.size;
    }
  }

 private:
  std::vector<std::byte> bytes_;
  std::size_t count_ = 0;
};

}  // namespace lt
