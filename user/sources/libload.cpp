#include "user/sources/libload.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <elf.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "libload.skel.h"
#include "user/proc/elf_image.h"
#include "user/proc/procfs.h"
#include "user/sources/bpf_errors.h"

namespace lt {

void SkeletonDestroy::operator()(lt_libload* s) const {
  lt_libload__destroy(s);
}

namespace {

// AT_BASE of /proc/PID/auxv: where the loader is mapped (0: none).
std::uint64_t loader_base(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/auxv", std::ios::binary);
  std::uint64_t pair[2];
  while (in.read(reinterpret_cast<char*>(pair), sizeof pair)) {
    if (pair[0] == AT_NULL) break;
    if (pair[0] == AT_BASE) return pair[1];
  }
  return 0;
}

}  // namespace

LoaderSite find_loader_site(pid_t pid) {
  const std::uint64_t base = loader_base(pid);
  if (!base) return {};
  for (const auto& m : proc::read_maps(pid)) {
    if (m.start != base || m.offset != 0 || m.path.empty() || m.path[0] != '/') continue;
    LoaderSite site{proc::mapped_file(pid, m)};
    if (site.open_path.empty()) return {};
    elf::ElfImage image(site.open_path);
    if (!image.ok()) return {};
    std::uint64_t state = 0, r_debug = 0;
    image.for_each_symbol([&](const elf::SymbolEntry& s) {
      if (!s.defined()) return;
      if (!state && std::strcmp(s.name, "_dl_debug_state") == 0) state = s.value;
      if (!r_debug && std::strcmp(s.name, "_r_debug") == 0) r_debug = s.value;
    });
    const auto off = state ? image.file_offset(state, true) : std::nullopt;
    if (!off) return {};
    site.offset = *off;
    site.r_debug_delta = r_debug ? static_cast<std::int64_t>(r_debug - state) : 0;
    return site;
  }
  return {};
}

LibLoadSource::LibLoadSource() : skel_(lt_libload__open_and_load()) {
  if (!skel_) throw bpf_error("load libload", errno);
  closer_ = std::thread([this] { reap(); });
}

LibLoadSource::~LibLoadSource() {
  for (auto& [pid, link] : links_) {
    const std::uint32_t key = static_cast<std::uint32_t>(pid);
    bpf_map_delete_elem(bpf_map__fd(skel_->maps.lt_lib_waits), &key);
  }
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  closer_.join();
}

bool LibLoadSource::watch(pid_t pid) {
  if (links_.count(pid)) return true;
  const LoaderSite site = find_loader_site(pid);
  if (site.open_path.empty()) return false;
  LIBBPF_OPTS(bpf_uprobe_opts, opts);
  LinkPtr link(
      bpf_program__attach_uprobe_opts(skel_->progs.lt_dl_debug_state, pid, site.open_path.c_str(), site.offset, &opts));
  if (!link) return false;
  const std::uint32_t key = static_cast<std::uint32_t>(pid);
  const std::int64_t delta = site.r_debug_delta;
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.lt_lib_waits), &key, &delta, BPF_ANY) != 0) return false;
  links_[pid] = std::move(link);
  return true;
}

void LibLoadSource::unwatch(pid_t pid) {
  auto it = links_.find(pid);
  if (it == links_.end()) return;
  const std::uint32_t key = static_cast<std::uint32_t>(pid);
  bpf_map_delete_elem(bpf_map__fd(skel_->maps.lt_lib_waits), &key);
  {
    std::lock_guard lock(mutex_);
    to_close_.push_back(std::move(it->second));
  }
  links_.erase(it);
  wake_.notify_one();
}

int LibLoadSource::wakeup_fd() const {
  return bpf_map__fd(skel_->maps.lt_lib_wakeups);
}

int LibLoadSource::signalled_fd() const {
  return bpf_map__fd(skel_->maps.lt_lib_signalled);
}

void LibLoadSource::reap() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !to_close_.empty(); });
    auto batch = std::move(to_close_);
    to_close_.clear();
    lock.unlock();
    batch.clear();  // each release waits for a grace period: not on the drain's thread
    lock.lock();
    if (stopping_ && to_close_.empty()) return;
  }
}

}  // namespace lt
