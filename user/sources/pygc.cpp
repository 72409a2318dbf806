#include "user/sources/pygc.h"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "pygc.skel.h"
#include "user/proc/elf_image.h"
#include "user/sources/bpf_errors.h"

namespace lt {

template <>
void SkeletonDestroy<lt_pygc>::operator()(lt_pygc* s) const {
  lt_pygc__destroy(s);
}

PyGcSource::PyGcSource(const ProcTrackSource& shared) : skel_(lt_pygc__open()) {
  if (!skel_) throw bpf_error("open pygc", errno);
  if (int err = shared.share_with(skel_->obj)) throw bpf_error("share maps with pygc", -err);
  entries_.prepare(skel_->progs.lt_gc_callback);
  if (int err = lt_pygc__load(skel_.get())) throw bpf_error("load pygc", -err);
}

PyGcSource::~PyGcSource() {
  links_.clear();
}

std::optional<std::uint64_t> gc_callback_offset(const std::string& path) {
  const elf::ElfImage file(path);
  if (!file.ok()) return std::nullopt;
  std::optional<std::uint64_t> vaddr;
  file.for_each_symbol([&](const elf::SymbolEntry& s) {
    if (vaddr || !s.defined() || s.value == 0 || s.type != STT_FUNC) return;
    const std::string_view name = s.name;
    constexpr std::string_view base = "invoke_gc_callback";
    if (name.substr(0, base.size()) != base) return;
    const std::string_view rest = name.substr(base.size());
    if (rest.empty() || rest.starts_with(".isra.") || rest.starts_with(".constprop.")) vaddr = s.value;
  });
  return vaddr ? file.file_offset(*vaddr, true) : std::nullopt;
}

bool PyGcSource::attach_callback(const std::string& path, pid_t pid) {
  const auto offset = gc_callback_offset(path);
  if (!offset) return false;
  entries_.attach(skel_->progs.lt_gc_callback, path, {*offset}, {0}, pid, "invoke_gc_callback");
  return true;
}

bool PyGcSource::attach(const std::string& path, pid_t pid) {
  // libbpf finds the notes, the semaphore (the kernel raises it in each
  // process the probe is in) and the arguments' locations.
  LinkPtr start(bpf_program__attach_usdt(skel_->progs.lt_gc_start, pid, path.c_str(), "python", "gc__start", nullptr));
  if (!start) {
    const int err = errno;
    if (err == ENOENT || err == EINVAL) return false;  // no such note in this build
    throw bpf_error("attach USDT python:gc__start in " + path, err);
  }
  LinkPtr done(bpf_program__attach_usdt(skel_->progs.lt_gc_done, pid, path.c_str(), "python", "gc__done", nullptr));
  if (!done) {
    const int err = errno;
    throw bpf_error("attach USDT python:gc__done in " + path, err);
  }
  links_.push_back(std::move(start));
  links_.push_back(std::move(done));
  return true;
}

}  // namespace lt
