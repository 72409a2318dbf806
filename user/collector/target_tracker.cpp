#include "user/collector/target_tracker.h"

#include <utility>

namespace lt {

void TargetTracker::forget(pid_t pid) {
  alive_.erase(pid);
  live_.erase(pid);
  forked_from_.erase(pid);
}

const python::Interpreter* TargetTracker::on_fork(pid_t parent, pid_t child) {
  alive_[child] = true;
  forked_from_.erase(child);  // a reused pid: not a dead worker's lineage
  auto p = live_.find(parent);
  if (p == live_.end()) return nullptr;
  python::Interpreter interp = p->second;
  interp.pid = child;
  auto& mine = live_[child] = std::move(interp);
  forked_from_[child] = parent;
  // Same memory image, so BPF starts with the parent's thread-state key;
  // CPython re-creates the key in the child after fork, so it is proven
  // again there before we rely on it.
  if (auto t = tsd_.find(parent); t != tsd_.end()) {
    tsd_[child] = t->second;
    unproven_[child] = {.tries = kTsdTries};
  }
  return &mine;
}

void TargetTracker::on_exec(pid_t pid) {
  live_.erase(pid);
  tsd_.erase(pid);
  forked_from_.erase(pid);  // a new image: nothing shared any more
  execed_.push_back(pid);
}

void TargetTracker::on_exit(pid_t pid) {
  alive_[pid] = false;
  unproven_.erase(pid);
}

std::vector<pid_t> TargetTracker::take_execed() {
  return std::exchange(execed_, {});
}

std::vector<pid_t> TargetTracker::reap(const std::function<bool(pid_t)>& exists) {
  std::vector<pid_t> gone;
  for (auto& [pid, alive] : alive_)
    if (alive && !exists(pid)) {
      alive = false;
      gone.push_back(pid);
    }
  return gone;
}

bool TargetTracker::alive(pid_t pid) const {
  auto it = alive_.find(pid);
  return it != alive_.end() && it->second;
}

bool TargetTracker::any_alive() const {
  for (auto& [pid, alive] : alive_)
    if (alive) return true;
  return false;
}

const python::Interpreter* TargetTracker::live(pid_t pid) const {
  auto it = live_.find(pid);
  return it == live_.end() ? nullptr : &it->second;
}

std::vector<pid_t> TargetTracker::live_pids() const {
  std::vector<pid_t> out;
  for (auto& [pid, interp] : live_) out.push_back(pid);
  return out;
}

std::vector<pid_t> TargetTracker::live_alive_pids() const {
  std::vector<pid_t> out;
  for (auto& [pid, interp] : live_)
    if (alive(pid)) out.push_back(pid);
  return out;
}

std::vector<pid_t> TargetTracker::ancestors(pid_t pid) const {
  std::vector<pid_t> out;
  for (auto it = forked_from_.find(pid); it != forked_from_.end() && out.size() < 8; it = forked_from_.find(it->second))
    out.push_back(it->second);
  return out;
}

const python::TsdLookup* TargetTracker::tsd(pid_t pid) const {
  auto it = tsd_.find(pid);
  return it == tsd_.end() ? nullptr : &it->second;
}

std::vector<pid_t> TargetTracker::tstate_map_targets() const {
  std::vector<pid_t> out;
  for (auto& [pid, tsd] : tsd_)
    if (tsd.by_map && live_and_alive(pid)) out.push_back(pid);
  return out;
}

std::vector<pid_t> TargetTracker::unproven() const {
  std::vector<pid_t> out;
  for (auto& [pid, tries] : unproven_) out.push_back(pid);
  return out;
}

bool TargetTracker::retry_unproven(pid_t pid, std::uint64_t now_ns, bool not_yet) {
  auto it = unproven_.find(pid);
  if (it == unproven_.end()) return false;
  if (it->second.until_ns ? not_yet || now_ns < it->second.until_ns : --it->second.tries > 0) return true;
  unproven_.erase(it);
  return false;
}

}  // namespace lt
