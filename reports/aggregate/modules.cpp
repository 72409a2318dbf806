#include "reports/aggregate/modules.h"

#include <cstring>

namespace lt {

void ModuleAggregator::add(const lt_event_header& h, const std::byte* record) {
  if (h.kind == LT_EV_MODULE_CALL && h.size >= sizeof(lt_module_call_event)) {
    lt_module_call_event e;
    std::memcpy(&e, record, sizeof e);
    auto [it, fresh] = procs_.try_emplace(h.pid);
    if (fresh) pids_.push_back(h.pid);
    auto [m, first] = it->second.modules.try_emplace(e.self);
    if (first || m->second.calls == 0) it->second.order.push_back(e.self);
    m->second.calls++;
  } else if (h.kind == LT_EV_MODULE_NAME && h.size >= sizeof(lt_module_name_event)) {
    lt_module_name_event e;
    std::memcpy(&e, record, sizeof e);
    Module& m = procs_[h.pid].modules[e.module];
    if (m.named) return;  // named once per process (the first name: named_modules() order)
    m.named = true;
    m.type.assign(e.type, strnlen(e.type, sizeof e.type));
    m.name.assign(e.name, strnlen(e.name, sizeof e.name));
  }
}

std::vector<ProcessModules> ModuleAggregator::finish() const {
  std::vector<ProcessModules> out;
  for (std::uint32_t pid : pids_) {
    const Process& p = procs_.at(pid);
    ProcessModules pm;
    pm.pid = pid;
    std::map<std::string, std::size_t> row_of;
    for (std::uint64_t addr : p.order) {
      const Module& m = p.modules.at(addr);
      if (!m.named || m.name.empty()) {
        pm.unnamed_calls += m.calls;
        continue;
      }
      std::string name = "[pl][module]" + m.type + ": " + m.name;
      auto [r, fresh] = row_of.try_emplace(name, pm.rows.size());
      if (fresh) pm.rows.push_back({name, 0});
      pm.rows[r->second].calls += m.calls;
    }
    out.push_back(std::move(pm));
  }
  return out;
}

}  // namespace lt
