// Where a document's GPU slices go, for both trace writers (Chrome JSON and
// Perfetto protobuf), so that the two agree: which processes the document
// lists, which GPU slices it takes, whose rows a slice goes under, and the
// ids of the launch -> kernel flows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "reports/export/chrome_trace.h"

namespace lt {

// A GPU slice's process as the document shows it: listed, or (unlisted_gpu)
// under its OS pid.
struct GpuOwner {
  std::uint64_t pid = 0;
  std::string label;
  int sort_index = -1;
};

class GpuLayout {
 public:
  // Indexes every source of doc (which must outlive the layout).
  explicit GpuLayout(const ChromeDocument& doc);

  // The source's process of this OS pid, if the document lists it.
  const ChromeProcess* listed(std::size_t source, std::uint32_t os_pid) const;
  // A GPU slice goes in when its process is listed (or unlisted ones go in)
  // and the source's range keeps it.
  bool included(std::size_t source, const GpuSlice& s) const;
  GpuOwner owner(std::size_t source, std::uint32_t os_pid) const;
  // More than one process has device slices in the document.
  bool several() const { return place_.size() > 1; }
  // The CUPTI correlation id, plus 2^32 * the process's place among the
  // GPU processes (in document order) when there are several: correlation
  // ids are per process.
  std::uint64_t flow_id(std::size_t source, std::uint32_t pid, std::uint32_t correlation) const;
  // A kernel, copy or set of this launch is in the document (the flow's other end).
  bool launched(std::size_t source, std::uint32_t pid, std::uint32_t correlation) const;

 private:
  const ChromeDocument& doc_;
  std::vector<std::unordered_map<std::uint32_t, const ChromeProcess*>> listed_;  // per source, by OS pid
  std::map<std::pair<std::size_t, std::uint32_t>, std::uint64_t> place_;         // (source, OS pid) -> place
  std::set<std::tuple<std::size_t, std::uint32_t, std::uint32_t>> launched_;     // (source, pid, correlation)
};

}  // namespace lt
