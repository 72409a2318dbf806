#include "user/collector/module_namer.h"

#include <algorithm>
#include <cstring>

#include "bpf/events.h"
#include "user/collector/fixed_field.h"
#include "user/python/module_tree.h"
#include "user/python/thread_stacks.h"

namespace lt {

namespace {
constexpr const char* kRootClass = "LightningModule";
constexpr std::uint64_t kRetryNs = 20'000'000;  // between two looks for the root

}  // namespace

std::uint64_t ModuleNamer::find_root(const python::Interpreter& interp, std::uint64_t self) const {
  if (python::derives_from(interp.pid, self, kRootClass, interp.layout)) return self;
  // The innermost frame whose first local is a LightningModule, on any thread.
  for (const auto& t : python::read_thread_stacks(interp, true).threads)
    for (const auto& f : t.frames)
      if (f.first_local && python::derives_from(interp.pid, f.first_local, kRootClass, interp.layout))
        return f.first_local;
  return 0;
}

void ModuleNamer::describe(const python::Interpreter& interp, std::uint64_t self, std::uint64_t ts) {
  const pid_t pid = interp.pid;
  auto& known = known_[pid];
  auto& given_up = given_up_[pid];
  if (!self || known.count(self) || given_up.count(self)) return;
  // No LightningModule on any stack at that moment (between hooks): try
  // again on a later call, at most every kRetryNs.
  auto last = last_try_.find(pid);
  if (last != last_try_.end() && ts < last->second + kRetryNs) return;
  last_try_[pid] = ts;
  const std::uint64_t root = find_root(interp, self);
  if (!root) return;
  ++tree_reads_;
  for (const auto& m : python::read_module_tree(pid, root, interp.layout)) {
    if (!known.insert(m.addr).second) continue;
    lt_module_name_event e{};
    e.hdr.kind = LT_EV_MODULE_NAME;
    e.hdr.size = sizeof e;
    e.hdr.pid = static_cast<std::uint32_t>(pid);
    e.hdr.tid = static_cast<std::uint32_t>(pid);
    e.hdr.ts_ns = ts;
    e.module = m.addr;
    bool truncated = copy_field(e.type, sizeof e.type, m.type);  // both copied, truncated or not
    truncated |= copy_field(e.name, sizeof e.name, m.name);
    if (truncated) e.flags |= LT_MODULE_NAME_TRUNCATED;
    emit_(&e, sizeof e);
  }
  if (!known.count(self)) given_up.insert(self);
}

}  // namespace lt
