#include "user/sources/proctrack.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "proctrack.skel.h"
#include "user/core/errors.h"
#include "user/sources/bpf_errors.h"

namespace lt {

template <>
void SkeletonDestroy<lt_proctrack>::operator()(lt_proctrack* s) const {
  lt_proctrack__destroy(s);
}

ProcTrackSource::ProcTrackSource() : skel_(lt_proctrack__open()) {
  if (!skel_) throw bpf_error("open proctrack", errno);
  if (int err = lt_proctrack__load(skel_.get())) throw bpf_error("load proctrack", -err);
  if (int err = lt_proctrack__attach(skel_.get())) throw bpf_error("attach sched tracepoints", -err);
}

ProcTrackSource::~ProcTrackSource() = default;

int ProcTrackSource::targets_fd() const {
  return bpf_map__fd(skel_->maps.lt_targets);
}
int ProcTrackSource::follow_fd() const {
  return bpf_map__fd(skel_->maps.lt_follow);
}
int ProcTrackSource::events_fd() const {
  return bpf_map__fd(skel_->maps.lt_events);
}
int ProcTrackSource::exec_wakeup_fd() const {
  return bpf_map__fd(skel_->maps.lt_exec_wakeups);
}
int ProcTrackSource::exec_skip_fd() const {
  return bpf_map__fd(skel_->maps.lt_exec_skip);
}
void ProcTrackSource::watch_every_exec() {
  const std::uint32_t zero = 0, on = 1;
  if (bpf_map__update_elem(skel_->maps.lt_exec_watch, &zero, sizeof zero, &on, sizeof on, BPF_ANY) != 0)
    throw bpf_error("watch every exec (--all)", errno);
}
int ProcTrackSource::drops_fd() const {
  return bpf_map__fd(skel_->maps.lt_drops);
}

int ProcTrackSource::share_with(bpf_object* other) const {
  // Every map of ours that the other object declares too (common.bpf.h),
  // by name: a map added there is shared without touching each source.
  bpf_map* ours;
  bpf_object__for_each_map(ours, skel_->obj) {
    if (bpf_map__is_internal(ours)) continue;  // .rodata/.bss: each object its own
    bpf_map* theirs = bpf_object__find_map_by_name(other, bpf_map__name(ours));
    if (!theirs || bpf_map__type(theirs) != bpf_map__type(ours)) continue;
    if (int err = bpf_map__reuse_fd(theirs, bpf_map__fd(ours))) return err;
  }
  return 0;
}

void ProcTrackSource::set_thread_states(pid_t pid,
                                        const std::vector<std::pair<std::uint32_t, std::uint64_t>>& threads) {
  const int fd = bpf_map__fd(skel_->maps.lt_tstates);
  auto& known = tstate_tids_[pid];
  std::set<std::uint32_t> now;
  for (auto [tid, ts] : threads) {
    now.insert(tid);
    bpf_map_update_elem(fd, &tid, &ts, BPF_ANY);
  }
  for (std::uint32_t tid : known)
    if (!now.count(tid)) bpf_map_delete_elem(fd, &tid);
  if (now.empty())
    tstate_tids_.erase(pid);
  else
    known = std::move(now);
}

void ProcTrackSource::follow(pid_t pid, std::uint32_t flags) {
  std::uint32_t key = static_cast<std::uint32_t>(pid);
  bpf_map_update_elem(follow_fd(), &key, &flags, BPF_ANY);
}

void ProcTrackSource::set_target(pid_t pid, const lt_target& t) {
  std::uint32_t key = static_cast<std::uint32_t>(pid);
  if (bpf_map_update_elem(targets_fd(), &key, &t, BPF_ANY) != 0)
    throw bpf_error("register target " + std::to_string(pid), errno);
}

bool ProcTrackSource::update_target(pid_t pid, const lt_target& t) {
  std::uint32_t key = static_cast<std::uint32_t>(pid);
  if (bpf_map_update_elem(targets_fd(), &key, &t, BPF_EXIST) == 0) return true;
  if (errno == ENOENT) return false;
  throw bpf_error("update target " + std::to_string(pid), errno);
}

void ProcTrackSource::drop_target(pid_t pid) {
  std::uint32_t key = static_cast<std::uint32_t>(pid);
  bpf_map_delete_elem(targets_fd(), &key);
}

void ProcTrackSource::forget(pid_t pid) {
  std::uint32_t key = static_cast<std::uint32_t>(pid);
  bpf_map_delete_elem(targets_fd(), &key);
  bpf_map_delete_elem(follow_fd(), &key);
  set_thread_states(pid, {});
}

lt_drop_counters ProcTrackSource::drops() const {
  int ncpu = libbpf_num_possible_cpus();
  std::vector<lt_drop_counters> per(ncpu > 0 ? ncpu : 1);
  std::uint32_t zero = 0;
  lt_drop_counters total{};
  if (bpf_map_lookup_elem(drops_fd(), &zero, per.data()) == 0) {
    for (auto& d : per) {
      total.ringbuf_full += d.ringbuf_full;
      total.read_faults += d.read_faults;
      total.unreadable += d.unreadable;
    }
  }
  return total;
}

std::vector<LossCount> ProcTrackSource::losses() const {
  std::vector<LossCount> out;
  const int fd = bpf_map__fd(skel_->maps.lt_losses);
  lt_loss_key key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    std::uint64_t n = 0;
    if (bpf_map_lookup_elem(fd, &next, &n) == 0 && n) out.push_back({next, n});
    key = next;
    prev = &key;
  }
  return out;
}

}  // namespace lt
