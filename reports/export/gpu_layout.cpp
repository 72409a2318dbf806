#include "reports/export/gpu_layout.h"

#include "reports/export/gpu_slice_kinds.h"

namespace lt {

GpuLayout::GpuLayout(const ChromeDocument& doc) : doc_(doc), listed_(doc.sources.size()) {
  for (std::size_t i = 0; i < doc.sources.size(); ++i)
    for (const auto& p : doc.sources[i].processes) listed_[i].emplace(p.proc->meta.pid, &p);
  // After every source's listing: included() reads it.
  for (std::size_t i = 0; i < doc.sources.size(); ++i) {
    const ChromeSource& src = doc.sources[i];
    if (!src.gpu) continue;
    for (const auto& s : src.gpu->slices)
      if (on_device(s) && included(i, s)) {
        place_.try_emplace({i, s.pid}, place_.size());
        if (s.correlation && s.tid) launched_.insert({i, s.pid, s.correlation});
      }
  }
}

const ChromeProcess* GpuLayout::listed(std::size_t source, std::uint32_t os_pid) const {
  const auto& m = listed_[source];
  const auto it = m.find(os_pid);
  return it == m.end() ? nullptr : it->second;
}

bool GpuLayout::included(std::size_t source, const GpuSlice& s) const {
  const ChromeSource& src = doc_.sources[source];
  return (src.unlisted_gpu || listed(source, s.pid)) && src.keeps(s);
}

GpuOwner GpuLayout::owner(std::size_t source, std::uint32_t os_pid) const {
  if (const ChromeProcess* p = listed(source, os_pid)) return {p->pid, p->gpu_label, p->sort_index};
  return {os_pid, "pid " + std::to_string(os_pid), -1};
}

std::uint64_t GpuLayout::flow_id(std::size_t source, std::uint32_t pid, std::uint32_t correlation) const {
  return (several() ? place_.at({source, pid}) << 32 : 0) + correlation;
}

bool GpuLayout::launched(std::size_t source, std::uint32_t pid, std::uint32_t correlation) const {
  return launched_.count({source, pid, correlation}) != 0;
}

}  // namespace lt
