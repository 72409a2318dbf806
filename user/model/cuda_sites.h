// The libcudart / libcuda entry points ltrace-bpf probes when CUPTI is not
// available to it (another client holds it, no libcupti, or --no-inject):
// launches, copies and host synchronisation.  The index of a site is what
// its GPU_LAUNCH records carry in `cbid`, so the table is the names' key
// for live and offline reports alike: append, never reorder.
#pragma once
#include <cstdint>
#include <span>

namespace lt {

struct CudaSite {
  const char* symbol;    // exported function name
  std::uint16_t api;     // LT_API_*
  std::uint16_t source;  // LT_LAUNCH_CUDART / LT_LAUNCH_LIBCUDA
};

std::span<const CudaSite> cuda_sites();
// The probed function's name for a record's (source, cbid), or nullptr.
const char* cuda_site_name(std::uint16_t source, std::uint32_t index);

}  // namespace lt
