// Puts the garbage-collection probes on each target's interpreter
// (user/sources/pygc.h): once per interpreter file and process (or for
// every process mapping the file, with --children).  A CPython built
// without its USDT probes gets the entry probe on its invoke_gc_callback
// instead.  One with neither (stripped; 3.14+ built without the probes)
// has its collections estimated from its stack samples where the stack
// sampler runs and its layout says where the collector's flag is
// (LT_TARGET_GC_SAMPLED: BPF marks the samples taken inside a collection),
// and is said once, in a note, either way.
#pragma once
#include <sys/types.h>

#include <map>
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
  void fill_target(pid_t pid, lt_target& t) const override;
  void forget(pid_t pid) override;
  std::size_t probes() const override;
  void detach() override;

 private:
  static lt_target sampled_fields(const python::Interpreter& interp);

  const TracerContext& ctx_;
  std::unique_ptr<PyGcSource> source_;
  std::set<std::tuple<unsigned long, unsigned long, pid_t>> attached_;  // (dev, inode, pid filter)
  std::set<std::tuple<unsigned long, unsigned long>> without_;          // files without the probes (said once)
  std::set<std::tuple<unsigned long, unsigned long>> sampled_;          // ...of those, the ones sampled instead
  std::map<pid_t, lt_target> sampled_at_;  // adopted processes of those: their gc_* fields (adopt() comes first)
};

}  // namespace lt
