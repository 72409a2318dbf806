#include "user/sources/libload.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <elf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "libload.skel.h"
#include "user/proc/elf_image.h"
#include "user/proc/procfs.h"
#include "user/sources/bpf_errors.h"
#include "user/sources/uprobe_multi.h"

namespace lt {

template <>
void SkeletonDestroy<lt_libload>::operator()(lt_libload* s) const {
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

LibLoadSource::LibLoadSource()
    : skel_(lt_libload__open()), multi_(kernel_has_uprobe_multi() && uprobe_multi_scopes_processes()) {
  if (!skel_) throw bpf_error("open libload", errno);
  if (multi_) expect_uprobe_multi(skel_->progs.lt_dl_debug_state);
  if (int err = lt_libload__load(skel_.get())) throw bpf_error("load libload", -err);
  loads_ = ring_buffer__new(
      bpf_map__fd(skel_->maps.lt_lib_loads),
      [](void* ctx, void* data, std::size_t size) -> int {
        std::uint32_t tgid;
        if (size < sizeof tgid) return 0;
        std::memcpy(&tgid, data, sizeof tgid);
        auto& told = *static_cast<std::vector<pid_t>*>(ctx);
        const auto pid = static_cast<pid_t>(tgid);
        if (std::find(told.begin(), told.end(), pid) == told.end()) told.push_back(pid);
        return 0;
      },
      &told_, nullptr);
  if (!loads_) throw bpf_error("open the library loads' ring", errno);
  releaser_ = std::thread([this] { reap(); });
}

LibLoadSource::~LibLoadSource() {
  for (auto& [pid, probe] : probes_) {
    const std::uint32_t key = static_cast<std::uint32_t>(pid);
    bpf_map_delete_elem(bpf_map__fd(skel_->maps.lt_lib_waits), &key);
    bpf_map_delete_elem(bpf_map__fd(skel_->maps.lt_lib_notify), &key);
  }
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  releaser_.join();
  ring_buffer__free(loads_);
}

// One probe per process, whatever it is there for: two links would run the
// program twice per load (and signal a held thread twice).
bool LibLoadSource::arm(pid_t pid, bool hold) {
  auto it = probes_.find(pid);
  if (it == probes_.end()) {
    const LoaderSite site = find_loader_site(pid);
    if (site.open_path.empty()) return false;
    Probe probe;
    probe.r_debug_delta = site.r_debug_delta;
    try {
      if (multi_) {
        probe.multi = attach_uprobe_multi(skel_->progs.lt_dl_debug_state, site.open_path, {site.offset}, {0}, pid,
                                          "the loader's debugger hook");
      } else {
        LIBBPF_OPTS(bpf_uprobe_opts, opts);
        probe.perf.reset(bpf_program__attach_uprobe_opts(skel_->progs.lt_dl_debug_state, pid, site.open_path.c_str(),
                                                         site.offset, &opts));
        if (!probe.perf) return false;
      }
    } catch (const Error&) {
      return false;  // its libraries are polled for
    }
    it = probes_.emplace(pid, std::move(probe)).first;
  }
  Probe& p = it->second;
  if (hold ? p.hold : p.notify) return true;
  const std::uint32_t key = static_cast<std::uint32_t>(pid);
  const int map = bpf_map__fd(hold ? skel_->maps.lt_lib_waits : skel_->maps.lt_lib_notify);
  if (bpf_map_update_elem(map, &key, &p.r_debug_delta, BPF_ANY) != 0) {
    if (!p.hold && !p.notify) release(it);
    return false;
  }
  (hold ? p.hold : p.notify) = true;
  return true;
}

void LibLoadSource::disarm(pid_t pid, bool hold) {
  auto it = probes_.find(pid);
  if (it == probes_.end() || !(hold ? it->second.hold : it->second.notify)) return;
  const std::uint32_t key = static_cast<std::uint32_t>(pid);
  bpf_map_delete_elem(bpf_map__fd(hold ? skel_->maps.lt_lib_waits : skel_->maps.lt_lib_notify), &key);
  (hold ? it->second.hold : it->second.notify) = false;
  if (!it->second.hold && !it->second.notify) release(it);
}

void LibLoadSource::release(std::map<pid_t, Probe>::iterator it) {
  {
    std::lock_guard lock(mutex_);
    to_release_.push_back(std::move(it->second));
  }
  probes_.erase(it);
  wake_.notify_one();
}

int LibLoadSource::loads_wait_fd() const {
  return ring_buffer__epoll_fd(loads_);
}

std::vector<pid_t> LibLoadSource::take_loads() {
  told_.clear();
  ring_buffer__consume(loads_);
  return told_;
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
    wake_.wait(lock, [this] { return stopping_ || !to_release_.empty(); });
    auto batch = std::move(to_release_);
    to_release_.clear();
    lock.unlock();
    batch.clear();  // each release may wait for a grace period: never on the drain's thread
    lock.lock();
    if (stopping_ && to_release_.empty()) return;
  }
}

}  // namespace lt
