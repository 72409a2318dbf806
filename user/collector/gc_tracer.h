// Puts the garbage-collection probes on each target's interpreter
// (user/sources/pygc.h): once per interpreter file and process (or for
// every process mapping the file, with --children).  A CPython built
// without its USDT probes gets the entry probe on its invoke_gc_callback
// instead; one with neither (stripped) is said once, in a note: its
// collections are then not seen.
#pragma once
#include <sys/types.h>

#include <memory>
#include <set>
#include <string>
#include <tuple>

#include "bpf/events.h"
#include "user/collector/tracer.h"

namespace lt {

class PyGcSource;

class GcTracer final : public Tracer {
 public:
  explicit GcTracer(const TracerContext& ctx);
  ~GcTracer() override;
  std::string_view name() const override { return "GC"; }
  void adopt(const python::Interpreter& interp, pid_t pid_filter) override;
  void fill_target(pid_t, lt_target& t) const override { t.flags |= LT_TARGET_GC; }
  std::size_t probes() const override;
  void detach() override;

 private:
  const TracerContext& ctx_;
  std::unique_ptr<PyGcSource> source_;
  std::set<std::tuple<unsigned long, unsigned long, pid_t>> attached_;  // (dev, inode, pid filter)
  std::set<std::tuple<unsigned long, unsigned long>> without_;          // files without the probes (said once)
};

}  // namespace lt
