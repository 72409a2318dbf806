// Names the bridge hands to the tracer through ltrace:name: kernel names
// interned to small ids, and the split of any name into LT_GPU_NAME_CHUNK
// pieces.  Pure code (no CUPTI, no threads): linked into the unit tests too.
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "bpf/events.h"

namespace ltb {

// Longest name the bridge sends; longer ones are cut (total_len says the cut
// length).  Mangled kernel names of heavily templated code reach a few KiB.
inline constexpr std::size_t kNameMax = 64 * 1024;

// (pointer, text) -> id.  CUPTI hands the same `const char *` for every launch
// of one kernel, so the pointer is the fast key; the text is compared on a
// pointer hit (a pointer may be reused for another name after CUPTI is
// released and subscribed again) and is the real key: one text, one id.
// Ids start at 1 (0 = no name).  Thread safe.
class NameInterner {
 public:
  struct Result {
    lt::u32 id = 0;
    bool fresh = false;  // first time this text was seen: announce it
  };

  Result intern(const char* text);  // nullptr -> {0, false}
  Result intern_text(std::string_view text);

  // The text of an id ("" when unknown).  The view stays valid for the
  // interner's lifetime.
  std::string_view text(lt::u32 id) const;
  std::size_t size() const;

  // Calls fn(id, text) for every name in id order (replay on attach).
  template <class F>
  void for_each(F&& fn) const {
    std::size_t n = size();
    for (std::size_t i = 0; i < n; ++i) fn(static_cast<lt::u32>(i + 1), text(static_cast<lt::u32>(i + 1)));
  }

  // For fork(): a child must not inherit a mutex held by another thread.
  void lock_for_fork() { mu_.lock(); }
  void unlock_after_fork() { mu_.unlock(); }

 private:
  Result intern_locked(std::string_view text);

  mutable std::mutex mu_;
  std::deque<std::string> texts_;  // id - 1 -> text; a deque never moves its elements
  std::unordered_map<std::string_view, lt::u32> by_text_;
  std::unordered_map<const void*, lt::u32> by_ptr_;
};

// Splits `text` (cut at kNameMax) into lt_gpu_name chunks and calls
// emit(chunk) for each, in offset order.  An empty name is one chunk with
// len 0.  Returns the number of chunks.
using NameChunkFn = void (*)(const lt::lt_gpu_name& chunk, void* ctx);
std::size_t split_name(lt::u16 kind, lt::u32 id, std::string_view text, NameChunkFn emit, void* ctx);

// An API name as CUPTI spells it ("cudaLaunchKernel_v7000",
// "cuMemcpyHtoDAsync_v2_ptsz") -> the name users know: the runtime's
// CUDA-version tag (_v followed by 4+ digits) is dropped, everything else is
// kept ("cudaLaunchKernel", "cuMemcpyHtoDAsync_v2_ptsz").
std::string display_api_name(std::string_view cupti_name);

// The function family of an API name: per-thread-stream suffixes and every
// version tag stripped ("cuMemcpyHtoD_v2_ptds" -> "cuMemcpyHtoD").
std::string api_base_name(std::string_view cupti_name);

}  // namespace ltb
