#include "reports/aggregate/duration_stat.h"

namespace lt {

std::string memcpy_operation_name(std::uint8_t copy_kind) {
  static const char* const kNames[] = {
      "Unknown",         "Host-to-Device",  "Device-to-Host",   "Host-to-Array", "Array-to-Host", "Array-to-Array",
      "Array-to-Device", "Device-to-Array", "Device-to-Device", "Host-to-Host",  "Peer-to-Peer",
  };
  const char* kind = copy_kind < sizeof kNames / sizeof kNames[0] ? kNames[copy_kind] : kNames[0];
  return std::string("[CUDA memcpy ") + kind + "]";
}

std::string memset_operation_name() {
  return "[CUDA memset]";
}

}  // namespace lt
