#include "user/collector/gc_tracer.h"

#include <sys/stat.h>

#include "user/proc/procfs.h"
#include "user/python/discovery.h"
#include "user/sources/pygc.h"

namespace lt {

GcTracer::GcTracer(const TracerContext& ctx) : ctx_(ctx), source_(std::make_unique<PyGcSource>(ctx.proctrack)) {}
GcTracer::~GcTracer() = default;

void GcTracer::adopt(const python::Interpreter& interp, pid_t pid_filter) {
  if (!source_) return;
  struct stat st {};
  if (stat(interp.open_path.c_str(), &st) != 0) return;  // gone: the action probes said so
  const auto file = std::make_tuple(static_cast<unsigned long>(st.st_dev), static_cast<unsigned long>(st.st_ino));
  const auto key = std::tuple_cat(file, std::make_tuple(pid_filter));
  if (without_.count(file) || attached_.count(key) || attached_.count(std::tuple_cat(file, std::make_tuple(pid_t{-1}))))
    return;
  try {
    if (source_->attach(interp.open_path, pid_filter) || source_->attach_callback(interp.open_path, pid_filter)) {
      attached_.insert(key);
      return;
    }
    if (pid_filter > 0 && !proc::exists(pid_filter)) return;  // it exited meanwhile: says nothing of the file
    without_.insert(file);
    ctx_.note("pid " + std::to_string(interp.pid) + ": " + interp.binary +
              " has no garbage-collection probes (built without --with-dtrace) and no invoke_gc_callback in its "
              "symbol table: its GC pauses are not measured");
  } catch (const Error& e) {
    if (pid_filter > 0 && !proc::exists(pid_filter)) return;
    without_.insert(file);
    ctx_.note("pid " + std::to_string(interp.pid) + ": " + e.what() + "; its GC pauses are not measured");
  }
}

std::size_t GcTracer::probes() const {
  return source_ ? source_->probes() : 0;
}

void GcTracer::detach() {
  source_.reset();
}

}  // namespace lt
