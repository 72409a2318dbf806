#include "user/watch/watcher.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string_view>
#include <vector>

#include "user/core/clocks.h"
#include "user/core/errors.h"
#include "user/core/output_file.h"
#include "user/model/record_dispatch.h"

namespace lt {

namespace {

bool alive(std::uint32_t pid) {
  return pid && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

// Capture directories of ours: "YYYYmmddTHHMMSS.mmmZ-...", so that names
// sort by time.
bool capture_dir_name(const std::string& n) {
  return n.size() > 20 && n[8] == 'T' && n[19] == 'Z' && std::isdigit(static_cast<unsigned char>(n[0]));
}

// Host names and the like in a file name: [A-Za-z0-9._] kept, others '_'.
std::string file_safe(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_') c = '_';
  return s.substr(0, 64);
}

}  // namespace

Watcher::Watcher(WatchOptions o, OnTrigger on_trigger, OnCapture on_capture)
    : o_(std::move(o)),
      on_trigger_(std::move(on_trigger)),
      on_capture_(std::move(on_capture)),
      ring_(o_.ring),
      policy_(o_.triggers),
      realtime_offset_ns_(realtime_minus_monotonic_ns()),
      stragglers_(o_.straggler) {
  const std::string captures = o_.ring.dir + "/captures";
  make_output_dirs(captures);
  // A previous watcher's captures count against the bound too.
  if (DIR* d = opendir(captures.c_str())) {
    while (dirent* e = readdir(d))
      if (capture_dir_name(e->d_name)) kept_.push_back(captures + "/" + e->d_name);
    closedir(d);
  }
  std::sort(kept_.begin(), kept_.end());
}

Watcher::~Watcher() {
  join_renders(true);
}

void Watcher::join_renders(bool all) {
  for (auto it = renders_.begin(); it != renders_.end();) {
    if (all || it->done->load()) {
      it->thread.join();
      // The write was the watcher's own work from the window's end (its
      // reports, at nice 19, are not counted).
      own_work(it->pid, it->window_end_ns, it->began_ns + it->written_after->load());
      if (!it->ok->load()) {  // said by its thread
        ++captures_failed_;
        std::erase(kept_, it->dir);
      }
      it = renders_.erase(it);
    } else {
      ++it;
    }
  }
}

void Watcher::add(const lt_event_header& h, const std::byte* record) {
  ++records_;
  ring_.add(h, record);
  const std::uint64_t now = std::max(now_ns_, h.ts_ns);
  closed_.clear();
  steps_.add(h, record, closed_);
  on_steps(now);
  take_thrown(now);
  visit_record(h, record,
               overloaded{
                   [&](const lt_event_header& hh, const lt_proc_info_event& e) {
                     if (!(e.flags & LT_PROC_PYTHON)) return;
                     auto& p = procs_[hh.pid];
                     // A pid reused by a new process (the old one exited): a fresh start.
                     if (p.exited) p = Proc{};
                     if (!p.first_ns) p.first_ns = now;
                     if (e.rank >= 0) p.rank = e.rank;
                     p.ppid = e.ppid;
                   },
                   [&](const lt_event_header& hh, const lt_proc_env_event& e) {
                     auto it = procs_.find(hh.pid);
                     if (it == procs_.end()) return;
                     if (e.rank >= 0) it->second.rank = e.rank;
                     it->second.local_rank = e.local_rank;
                     const auto text = [](const char* s, std::size_t n) { return std::string(s, strnlen(s, n)); };
                     const std::string job = text(e.slurm_job_id, sizeof e.slurm_job_id),
                                       run = text(e.run_id, sizeof e.run_id),
                                       master = text(e.master_addr, sizeof e.master_addr);
                     // The most specific first: a job's rendezvous (one per torchrun or
                     // DDP job, even several in one Slurm allocation), then torchrun's
                     // run id (its default, "none", is none), then the Slurm job.
                     it->second.job_key = e.master_port                   ? master + ":" + std::to_string(e.master_port)
                                          : !run.empty() && run != "none" ? "run " + run
                                          : !job.empty()                  ? "slurm " + job
                                                                          : "";
                   },
                   [&](const lt_event_header& hh, const lt_proc_event& e) {
                     if (hh.kind != LT_EV_PROC_EXIT) return;
                     auto it = procs_.find(e.child_pid);
                     if (it == procs_.end() || it->second.exited) return;  // not a Python target of ours
                     it->second.exited = true;
                     it->second.exited_ns = now;
                     on_trigger(policy_.on_exit(e.child_pid, e.exit_code, hh.ts_ns, now));
                     steps_.forget(e.child_pid);
                     stragglers_.forget(e.child_pid);
                     if (o_.arrivals) o_.arrivals->gone(e.child_pid);
                   },
                   [&](const lt_event_header& hh, const lt_proc_stats_event& e) {
                     if (auto it = procs_.find(hh.pid); it != procs_.end() && !it->second.exited) {
                       it->second.rss_bytes = e.rss_bytes;
                       it->second.cpu_ns = e.cpu_ns;
                       on_trigger(policy_.on_rss(hh.pid, e.rss_bytes, hh.ts_ns, now));
                     }
                   },
                   // NVML: the GPU memory each target holds on the device (~0: unknown).
                   [&](const lt_event_header& hh, const lt_device_stats_event& e) {
                     for (unsigned i = 0; i < 4; ++i) {
                       const std::uint64_t bytes = e.proc_mem_bytes[i];
                       if (!e.proc_pid[i] || !bytes || bytes == ~0ull) continue;
                       if (auto it = procs_.find(e.proc_pid[i]); it != procs_.end() && !it->second.exited)
                         on_trigger(policy_.on_gpu_mem(e.proc_pid[i], e.device, bytes, hh.ts_ns, now));
                     }
                   },
                   // The allocator's out-of-memory hooks (watch asks for those alone).
                   [&](const lt_event_header& hh, const lt_mem_event& e) {
                     if (e.what != LT_MEM_OOM) return;
                     if (auto it = procs_.find(hh.pid); it != procs_.end() && !it->second.exited)
                       on_trigger(policy_.on_oom(hh.pid, e.bytes > 0 ? static_cast<std::uint64_t>(e.bytes) : 0,
                                                 e.device_type, e.device_index, hh.ts_ns, now));
                   },
                   [&](const lt_event_header& hh, const lt_comm_event& e) {
                     if (auto it = procs_.find(hh.pid); it != procs_.end()) ++it->second.collectives;
                     if (o_.arrivals) {
                       o_.arrivals->arrival(hh.pid, e.pg, e.seq, e.kind, hh.ts_ns);
                       return;
                     }
                     stragglers_.add(hh.pid, e.pg, e.seq, e.kind, static_cast<std::int64_t>(hh.ts_ns));
                     comm_since_check_ = true;
                   },
               });
}

// The steps just closed (closed_): counted, and judged.
void Watcher::take_thrown(std::uint64_t now_ns) {
  for (const auto& t : steps_.take_thrown(now_ns))
    if (auto it = procs_.find(t.pid); it != procs_.end() && !it->second.exited)
      on_trigger(policy_.on_exception(t.pid, t.ts_ns, t.action, now_ns));
}

void Watcher::on_steps(std::uint64_t now) {
  for (const auto& s : closed_) {
    auto& p = procs_[s.pid];
    ++p.steps;
    p.last_step_ns = s.duration_ns();
    const double d = p.last_step_ns / 1e9;
    p.step_sum_s += d;
    for (std::size_t i = 0; i < kStepBuckets.size(); ++i)
      if (d <= kStepBuckets[i]) {
        ++p.step_le[i];
        break;
      }
    // Enough to find one in any capture window: the ring's span of steps,
    // bounded in count (a 1 ms step for 10 minutes is 600 000).
    p.recent.push_back(s);
    while (p.recent.size() > 4096 ||
           (p.recent.size() > 1 && s.end_ns - p.recent.front().end_ns > o_.ring.keep_ns + o_.after_ns))
      p.recent.pop_front();
    auto t = policy_.on_step(s, now);
    if (t && t->kind == TriggerKind::slow_step && s.duration_ns() <= policy_.median_ns(s.pid) + own_work_in(s)) {
      std::cerr << "ltrace-bpf: watch: slow-step: pid " << s.pid << ": " << t->what
                << "; not a trigger: the watcher was writing a capture or changing tiers for as long as the "
                   "step's excess\n";
      policy_.refund(*t);
      ++own_work_skipped_;
      t.reset();
    }
    if (t && !steps_.numbered_from_the_start(s.pid))
      t->what += " (steps counted from the first the watcher saw: it came after the fit began)";
    on_trigger(std::move(t));
    p.median_ns = policy_.median_ns(s.pid);
  }
}

std::string Watcher::on_trigger(std::optional<Trigger> t) {
  if (!t) return "";
  // Within a pending capture of its process for the same kind (a second
  // slow step in the first one's after-window; the first's escalation may
  // be what slowed it): that capture holds it; no second one.
  // A stall of a rank whose peers' stall is being captured: that capture
  // read its threads too.
  const auto peer_of = [&t](const Capture& p) {
    return t->kind == TriggerKind::stall &&
           std::any_of(p.trigger.peers.begin(), p.trigger.peers.end(),
                       [&t](const std::pair<std::uint32_t, int>& x) { return x.first == t->pid; });
  };
  for (const auto& p : pending_)
    if ((p.trigger.pid == t->pid || peer_of(p)) && p.trigger.kind == t->kind && p.trigger.for_uid == t->for_uid &&
        t->at_ns <= p.to_ns) {
      std::cerr << "ltrace-bpf: watch: " << trigger_name(t->kind) << ": pid " << t->pid << ": " << t->what
                << "; in the capture " << p.dir << " already\n";
      policy_.refund(*t);
      ++joined_;
      return p.dir;
    }
  Capture c;
  c.trigger = std::move(*t);
  if (auto it = procs_.find(c.trigger.pid); it != procs_.end()) c.rank = it->second.rank;
  // A rank's stall: every rank of its job watched here, it among them.
  if (c.trigger.kind == TriggerKind::stall) c.trigger.peers = job_ranks(c.trigger.pid);
  // From `before` ahead of what it is about to `after` past when it was
  // found: a stall's capture holds the last progress and the whole stall.
  c.from_ns = c.trigger.at_ns > o_.before_ns ? c.trigger.at_ns - o_.before_ns : 0;
  c.to_ns = std::max(c.trigger.at_ns, c.trigger.seen_ns) + (c.trigger.after_ns ? c.trigger.after_ns : o_.after_ns);
  c.dir = o_.ring.dir + "/captures/" + capture_name(c.trigger, c.rank);
  c.trace = c.dir + "/trace.ltrace";
  add_owned(c);
  try {
    c.before = std::make_shared<WindowCopy>(ring_.take_window(c.from_ns, c.to_ns));
    // Said where the bound, not the watcher's start, cut it short.
    if (ring_.segments_dropped() && c.before->held_from_ns() > c.from_ns + 1'000'000'000)
      std::cerr << "ltrace-bpf: watch: " << c.dir << ": the ring holds "
                << (c.trigger.at_ns > c.before->held_from_ns() ? c.trigger.at_ns - c.before->held_from_ns() : 0) /
                       1'000'000
                << " ms before the trigger, not the " << (c.trigger.at_ns - c.from_ns) / 1'000'000
                << " ms of --capture-before (--keep and --keep-bytes bound it)\n";
  } catch (const std::exception&) {  // the write takes the whole window as it can
    c.before.reset();
  }
  try {
    if (on_trigger_) c.read = on_trigger_(c.trigger);
  } catch (const std::exception& e) {
    c.at_trigger = std::string("(not read: ") + e.what() + ")\n";
  }
  std::cerr << "ltrace-bpf: watch: " << trigger_name(c.trigger.kind) << ": pid " << c.trigger.pid;
  if (c.rank >= 0) std::cerr << " rank " << c.rank;
  std::cerr << ": " << c.trigger.what << "; capture " << c.dir << " after "
            << (c.trigger.after_ns ? c.trigger.after_ns : o_.after_ns) / 1'000'000'000 << " s more\n";
  pending_.push_back(std::move(c));
  return pending_.back().dir;
}

std::uint64_t Watcher::last_progress(std::uint32_t pid, Proc& p, std::uint64_t now_ns) {
  if (const std::uint64_t last = steps_.last_progress(pid)) return last;
  if (p.stuck_since || !in_a_loop_ || !p.first_ns) return p.stuck_since;
  // Nothing ended since it was first watched: asked once its stall bound
  // passed, then once per bound (a fit that begins later ends actions).
  const std::uint64_t bound = policy_.stall_after_ns(pid);
  if (!p.next_loop_ask) p.next_loop_ask = p.first_ns + bound;
  if (now_ns < p.next_loop_ask) return 0;
  p.next_loop_ask = now_ns + bound;
  try {
    if (in_a_loop_(pid)) p.stuck_since = p.first_ns;
  } catch (const std::exception&) {  // unreadable now: asked again later
  }
  return p.stuck_since;
}

void Watcher::own_work(std::uint32_t pid, std::uint64_t from_ns, std::uint64_t until_ns) {
  auto& spans = own_work_[pid];
  spans.emplace_back(from_ns, until_ns);
  while (spans.size() > 8) spans.pop_front();  // a step overlaps the last few at most
}

std::uint64_t Watcher::own_work_in(const LiveStep& s) const {
  std::uint64_t ns = 0;
  auto add = [&](std::uint64_t from, std::uint64_t until) {
    if (from < s.end_ns && s.begin_ns < until) ns += std::min(until, s.end_ns) - std::max(from, s.begin_ns);
  };
  for (const std::uint32_t pid : {s.pid, 0u})
    if (auto it = own_work_.find(pid); it != own_work_.end())
      for (const auto& [from, until] : it->second) add(from, until);
  // Captures being written now (or written, not yet joined): from their
  // window's end on.
  for (const auto& r : renders_)
    if (r.pid == s.pid || r.pid == 0) {
      const std::uint64_t after = r.written_after->load();
      add(r.window_end_ns, after ? r.began_ns + after : UINT64_MAX);
    }
  return ns;
}

void Watcher::extend(pid_t pid, std::uint64_t until_ns) {
  for (auto& c : pending_)
    if (c.trigger.pid == static_cast<std::uint32_t>(pid) || c.trigger.pid == 0 || pid == 0)
      c.to_ns = std::max(c.to_ns, until_ns);
}

AtTriggerRead at_trigger_ready(AtTrigger at) {
  std::promise<AtTrigger> p;
  p.set_value(std::move(at));
  return p.get_future().share();
}

namespace {

// The reading begun at the trigger (long done, after the capture's
// window, unless the watch is ending).
void take_read(Capture& c) {
  if (!c.read.valid()) return;
  // Half a second and the dumps, as a rule; a read stuck on a process in
  // D state is not waited for long.
  constexpr auto kReadWait = std::chrono::seconds(5);
  if (c.read.wait_for(kReadWait) != std::future_status::ready) {
    c.at_trigger = "(not read: the reads of its threads begun at the trigger had not ended 5 s after the window)\n";
    c.read = {};
    return;
  }
  try {
    AtTrigger at = c.read.get();
    c.at_trigger = std::move(at.threads);
    c.cause = std::move(at.cause);
  } catch (const std::exception& e) {
    c.at_trigger = std::string("(not read: ") + e.what() + ")\n";
  }
  c.read = {};
}

}  // namespace

std::string capture_summary(const Capture& c, const std::string& top_finding) {
  std::string s = "ltrace-bpf: watch: summary: " + std::string(trigger_name(c.trigger.kind)) + ", pid " +
                  std::to_string(c.trigger.pid);
  if (c.rank >= 0) s += ", rank " + std::to_string(c.rank);
  // The trigger's own cause when it read one (a stall: where the main
  // thread waits); else what the capture's reports put first, said as a
  // finding (the capture's, over its whole window: not necessarily why
  // this trigger fired).
  s += ": " + c.trigger.what + "; ";
  const std::string own = own_finding(c.trigger);
  if (!c.cause.empty())
    s += "top cause: " + c.cause;
  else if (c.trigger.kind == TriggerKind::slow_step && top_finding.starts_with("train step "))
    s += "top cause: " + top_finding;
  else if (!own.empty() && top_finding.starts_with(own))
    s += "top finding: " + top_finding;
  else if (!top_finding.empty())
    s += "the capture's first finding (not necessarily this trigger's cause): " + top_finding;
  else
    s += "no finding past its threshold in the capture";
  return s + " (" + c.dir + ")";
}

std::string own_finding(const Trigger& t) {
  const std::string_view kind = trigger_finding(t.kind);
  if (kind.empty()) return "";
  // A process's own: another process's outliers or growth in the window is
  // not why this one fired.
  if ((t.kind == TriggerKind::slow_step || t.kind == TriggerKind::memory) && t.pid)
    return std::string(kind) + " (pid " + std::to_string(t.pid) + ")";
  return std::string(kind);
}

std::string_view trigger_finding(TriggerKind k) {
  switch (k) {
    case TriggerKind::memory:
      return "memory growth";
    case TriggerKind::slow_step:
      return "outliers";
    case TriggerKind::straggler:
      return "straggler";
    default:
      return "";
  }
}

std::string step_taken_apart(std::string_view reports, std::uint32_t pid) {
  // "Train step N (--why-step)" then "  pid P: ..." lines up to an empty one.
  constexpr std::string_view kHead = "Train step ", kTail = " (--why-step)";
  const std::string want = "  pid " + std::to_string(pid) + ": ";
  std::string_view step;  // set inside a block
  for (std::size_t at = 0; at < reports.size();) {
    const std::size_t end = std::min(reports.find('\n', at), reports.size());
    const std::string_view line = reports.substr(at, end - at);
    at = end + 1;
    if (line.starts_with(kHead) && line.ends_with(kTail)) {
      step = line.substr(kHead.size(), line.size() - kHead.size() - kTail.size());
      continue;
    }
    if (line.empty()) step = {};
    if (!step.empty() && line.starts_with(want))
      return "train step " + std::string(step) + " taken apart: " + std::string(line.substr(want.size()));
  }
  return "";
}

std::string first_finding(std::string_view reports, std::string_view prefer, const std::set<std::uint32_t>& pids) {
  if (reports.rfind("Findings", 0) != 0) return "";
  // The findings' lines, up to the first empty one; each finding is a
  // numbered line ("  1. kind (pid 7): ...") and its evidence below it.
  std::vector<std::string_view> lines;
  for (std::size_t at = 0; at < reports.size();) {
    const auto end = std::min(reports.find('\n', at), reports.size());
    const std::string_view line = reports.substr(at, end - at);
    if (line.empty()) break;
    lines.push_back(line);
    at = end + 1;
  }
  auto numbered = [](std::string_view l) -> std::string_view {  // the text after "N. ", or ""
    while (!l.empty() && l.front() == ' ') l.remove_prefix(1);
    std::size_t d = 0;
    while (d < l.size() && l[d] >= '0' && l[d] <= '9') ++d;
    return d && l.substr(d, 2) == ". " ? l.substr(d + 2) : std::string_view{};
  };
  // "kind (pid N): ...": N, or 0 for a finding of no one process.
  auto pid_of = [](std::string_view text) -> std::uint32_t {
    const auto at = text.find(" (pid ");
    const auto colon = text.find(": ");
    if (at == std::string_view::npos || (colon != std::string_view::npos && colon < at)) return 0;
    return static_cast<std::uint32_t>(std::strtoul(std::string(text.substr(at + 6, 12)).c_str(), nullptr, 10));
  };
  std::size_t pick = lines.size();
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string_view text = numbered(lines[i]);
    if (text.empty()) continue;
    if (const std::uint32_t pid = pid_of(text); !pids.empty() && pid && !pids.count(pid)) continue;
    if (pick == lines.size()) pick = i;
    if (!prefer.empty() && text.rfind(prefer, 0) == 0) {
      pick = i;
      break;
    }
  }
  if (pick == lines.size()) return "";
  std::string out(numbered(lines[pick]));
  if (pick + 1 < lines.size() && numbered(lines[pick + 1]).empty()) {
    std::string_view evidence = lines[pick + 1];
    while (!evidence.empty() && evidence.front() == ' ') evidence.remove_prefix(1);
    if (evidence.rfind("try: ", 0) != 0) out += ": " + std::string(evidence);
  }
  return out;
}

std::string Watcher::capture_name(const Trigger& t, int rank) const {
  const std::int64_t wall = static_cast<std::int64_t>(t.at_ns) + realtime_offset_ns_;
  const time_t secs = static_cast<time_t>(wall / 1'000'000'000);
  tm utc{};
  gmtime_r(&secs, &utc);
  char when[64];
  std::snprintf(when, sizeof when, "%04d%02d%02dT%02d%02d%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday,
                utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(wall / 1'000'000 % 1000));
  std::string name = std::string(when) + "-" + file_safe(o_.host) + "-" + std::to_string(t.pid) + "-" +
                     (rank >= 0 ? "r" + std::to_string(rank) : std::string("r-")) + "-" + trigger_name(t.kind);
  // Two triggers in the same millisecond: a suffix.
  std::string unique = name;
  for (int i = 2; std::find(kept_.begin(), kept_.end(), o_.ring.dir + "/captures/" + unique) != kept_.end() ||
                  std::any_of(pending_.begin(), pending_.end(),
                              [&](const Capture& c) { return c.dir == o_.ring.dir + "/captures/" + unique; });
       ++i)
    unique = name + "-" + std::to_string(i);
  return unique;
}

std::uint64_t Watcher::next_due_ns() const {
  std::uint64_t due = ring_.next_due_ns();
  for (const auto& c : pending_) due = std::min(due, c.to_ns);
  if (!renders_.empty()) due = std::min(due, now_ns_ + 100'000'000);  // joined once done
  return due;
}

void Watcher::tick(std::uint64_t now_ns) {
  now_ns_ = now_ns;
  join_renders(false);
  keep_captures_bounded();  // those left while their reports were written
  ring_.tick(now_ns);
  for (auto& [pid, p] : procs_)
    // Between Trainer runs (after fit, before the next), no action ending
    // is no stall: the script does its own work, or exits.
    if (!p.exited && alive(pid) && !steps_.between_runs(pid)) {
      auto t = policy_.check_stall(pid, last_progress(pid, p, now_ns), now_ns);
      if (t && !steps_.last_progress(pid))
        t->what += "; none since it was first watched, inside Lightning's loop then (stuck before the watcher came)";
      on_trigger(std::move(t));
    }
  check_stragglers(now_ns);
  take_thrown(now_ns);  // an evaluation step's exception, once nothing followed it (live_steps.h)
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now_ns < it->to_ns) {
      ++it;
      continue;
    }
    Capture c = std::move(*it);
    it = pending_.erase(it);
    write_capture(c, now_ns);
  }
  forget_exited(now_ns);
}

std::vector<std::pair<std::uint32_t, int>> Watcher::job_ranks(std::uint32_t pid) const {
  const auto me = procs_.find(pid);
  if (me == procs_.end() || !me->second.collectives) return {};
  // The topmost watched ancestor (bounded: a cycle of stale ppids ends it).
  const auto root = [this](std::uint32_t p) {
    for (int hops = 0; hops < 64; ++hops) {
      const auto it = procs_.find(p);
      if (it == procs_.end() || !procs_.count(it->second.ppid) || it->second.ppid == p) break;
      p = it->second.ppid;
    }
    return p;
  };
  const std::uint32_t my_root = root(pid);
  std::vector<std::pair<std::uint32_t, int>> out;
  bool zero_taken = false;
  for (const auto& [q, p] : procs_) {
    // Keys that differ part two jobs even under one parent (a sweep driver,
    // a notebook); where either has none, the parent decides.
    const bool keys_differ = !me->second.job_key.empty() && !p.job_key.empty() && p.job_key != me->second.job_key;
    const bool same_job =
        q == pid || (!keys_differ && (root(q) == my_root || (!p.job_key.empty() && p.job_key == me->second.job_key)));
    if (!same_job || (q != pid && (p.exited || !p.collectives || !alive(q)))) continue;
    const int rank = p.rank >= 0 ? p.rank : p.local_rank;
    zero_taken |= rank == 0;
    out.emplace_back(q, rank);
  }
  if (out.size() < 2) return {};
  // Lightning's launcher runs rank 0 with no rank in its environment (its
  // children have theirs): an unlabelled one is rank 0 when no other is.
  for (auto& [q, rank] : out)
    if (rank < 0 && !zero_taken) {
      rank = 0;
      zero_taken = true;
    }
  return out;
}

// An exited process's state (its steps, its metric series) goes once no
// capture can want it: a window reaching back over its life has passed (the
// ring's keep and an after-window), and none of its captures waits. A
// watcher of --all over days keeps only what lives, or just died.
void Watcher::forget_exited(std::uint64_t now_ns) {
  for (auto it = procs_.begin(); it != procs_.end();) {
    const auto pid = it->first;
    const Proc& p = it->second;
    const bool waited_for = std::any_of(pending_.begin(), pending_.end(),
                                        [pid](const Capture& c) { return c.trigger.pid == pid || !c.trigger.pid; });
    if (p.exited && !waited_for && now_ns > p.exited_ns + o_.ring.keep_ns + o_.after_ns) {
      policy_.forget(pid);
      ring_.forget(pid, now_ns);
      it = procs_.erase(it);
      ++forgotten_;
    } else {
      ++it;
    }
  }
}

// Every 50 ms at most, when collectives came: a rank named once while it
// stays the straggler, again after it stopped being one -- for 20 checks
// in a row (each after new collectives: about a window of them), not for
// one: a rank last at 12 of 16, the bound, drops to 11 at one reordered
// arrival and is back at the next (named twice in one episode, beside
// other tests' load).
void Watcher::check_stragglers(std::uint64_t now_ns) {
  if (o_.arrivals || !comm_since_check_ || now_ns - straggler_checked_ns_ < 50'000'000) return;
  comm_since_check_ = false;
  straggler_checked_ns_ = now_ns;
  // A lateness worth a capture: 5 ms, and a tenth of the slowest rank's
  // median step (a straggler costing less is not what to look at first).
  std::uint64_t median = 0;
  for (const auto& [pid, p] : procs_)
    if (!p.exited) median = std::max(median, p.median_ns);
  const auto v = stragglers_.check(static_cast<std::int64_t>(median / 10));
  constexpr std::size_t kEpisodeEndsAfter = 20;
  if (!v) {
    if (++straggler_misses_ >= kEpisodeEndsAfter) straggler_ = 0;
    return;
  }
  straggler_misses_ = 0;
  if (v->pid == straggler_) return;
  straggler_ = v->pid;
  auto& p = procs_[v->pid];
  char what[240];
  std::snprintf(what, sizeof what,
                "the straggler: last to arrive at %zu of the last %zu %s collectives of %zu ranks that kept others "
                "waiting (%.1f ms each, median), named at its train step %llu",
                v->last, v->of, v->kind.c_str(), v->ranks, static_cast<double>(v->median_wait_ns) / 1e6,
                static_cast<unsigned long long>(p.steps));
  on_trigger(policy_.on_straggler(v->pid, now_ns, static_cast<std::uint32_t>(p.steps), what, now_ns));
}

void Watcher::name_straggler(std::uint32_t pid, const std::string& what, std::uint64_t now_ns) {
  auto it = procs_.find(pid);
  if (it == procs_.end() || it->second.exited) return;
  on_trigger(policy_.on_straggler(pid, now_ns, static_cast<std::uint32_t>(it->second.steps), what, now_ns));
}

std::vector<ProcProgress> Watcher::progress() const {
  std::vector<ProcProgress> out;
  for (const auto& [pid, p] : procs_)
    if (!p.exited) out.push_back({pid, p.rank, p.steps, p.median_ns});
  return out;
}

std::vector<std::vector<std::byte>> Watcher::step_bases(std::uint64_t from_ns, std::uint64_t to_ns) const {
  std::vector<std::vector<std::byte>> out;
  for (const auto& [pid, p] : procs_)
    for (const auto& s : p.recent) {
      if (s.begin_ns < from_ns || s.end_ns > to_ns) continue;
      lt_step_base_event e{};
      e.hdr = {LT_EV_STEP_BASE, sizeof e, pid, pid, 0, from_ns};
      e.begin_ns = s.begin_ns;
      e.end_ns = s.end_ns;
      e.index = s.index;
      std::vector<std::byte> bytes(sizeof e);
      std::memcpy(bytes.data(), &e, sizeof e);
      out.push_back(std::move(bytes));
      break;
    }
  return out;
}

Watcher::RequestOutcome Watcher::request(pid_t pid, std::uint64_t now_ns, std::optional<uid_t> for_uid,
                                         std::uint64_t after_ns) {
  const std::string why = !pid      ? "asked for, for every process"
                          : for_uid ? "asked for by uid " + std::to_string(*for_uid) + " (watch --capture-now)"
                                    : "asked for (watch --capture-now or SIGUSR1)";
  RequestOutcome out;
  if (!policy_.requests_on()) {
    out.why = "requests are off (--triggers without request)";
  } else if (const auto it = procs_.find(static_cast<std::uint32_t>(pid));
             pid && (it == procs_.end() || it->second.exited)) {
    // A capture of nothing it watches would hold nothing of it, and take a
    // place among --max-captures (an audit: pid 1, a shell's own pid).
    out.why = "pid " + std::to_string(pid) + " is not a process watched here (`ltrace-bpf ps` lists the torch jobs; " +
              "watch --pid or --all adopts them)";
  } else {
    auto t = policy_.request(static_cast<std::uint32_t>(pid), now_ns, why,
                             for_uid ? std::optional<std::uint32_t>(*for_uid) : std::nullopt);
    if (!t) {
      out.why =
          "the requests of the last 24 h are spent (--max-per-day " + std::to_string(o_.triggers.max_per_day) + ")";
    } else {
      t->after_ns = after_ns;
      out.dir = on_trigger(std::move(t));
      out.taken = !out.dir.empty();
    }
  }
  if (!out.taken) std::cerr << "ltrace-bpf: watch: a capture was " << why << ": not taken: " << out.why << "\n";
  return out;
}

// A user's capture is theirs once its files are all written.
static void give_to_requester(const Capture& c) {
  if (!c.trigger.for_uid) return;
  try {
    give_files_to(c.dir, *c.trigger.for_uid);
  } catch (const std::exception& e) {  // on the capture's thread: nothing may escape it
    std::cerr << "ltrace-bpf: watch: " << c.dir << " stays root's: " << e.what() << "\n";
  }
}

void Watcher::add_owned(Capture& c) const {
  if (!c.trigger.for_uid) return;
  c.only_pids.insert(c.trigger.pid);
  for (const auto& [pid, p] : procs_) {
    struct stat st {};
    if (stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0 && st.st_uid == *c.trigger.for_uid)
      c.only_pids.insert(pid);
  }
}

void Watcher::write_capture(Capture& c, std::uint64_t now_ns) {
  c.to_ns = std::min(c.to_ns, now_ns);
  try {
    make_output_dirs(c.dir);
    add_owned(c);  // processes adopted since the trigger too
    auto bases = step_bases(c.from_ns, c.to_ns);
    if (c.trigger.for_uid)
      std::erase_if(bases, [&](const std::vector<std::byte>& b) {
        lt_event_header h;
        std::memcpy(&h, b.data(), sizeof h);
        return !c.only_pids.count(h.pid);
      });
    // What the window holds is taken here, between drains; it is read and
    // written on a thread of its own, so that the drain goes on meanwhile
    // (an audit: a 70 s window with ops escalated, 1.8 M records, written
    // on the drain thread while the ring buffer filled and dropped records).
    WindowCopy window = ring_.take_window(c.from_ns, c.to_ns);
    if (c.before) {
      window.add_older(std::move(*c.before));
      c.before.reset();
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    auto written_after = std::make_shared<std::atomic<std::uint64_t>>(0);
    auto ok = std::make_shared<std::atomic<bool>>(false);
    const std::uint64_t began = clock_ns(CLOCK_MONOTONIC);
    renders_.push_back(
        {std::thread([this, c, window = std::move(window), bases = std::move(bases), done, written_after, ok,
                      began]() mutable { capture_thread(c, window, bases, began, *ok, *written_after, *done); }),
         done, c.trigger.pid, c.dir, c.to_ns, now_ns, written_after, ok});
    ++captures_written_;
    ++captures_kind_[c.trigger.kind];
    kept_.push_back(c.dir);
  } catch (const std::exception& e) {  // lt::Error, or no thread to be had (std::system_error)
    std::cerr << "ltrace-bpf: watch: capture " << c.dir << " not written: " << e.what() << "\n";
  }
  keep_captures_bounded();
}

void Watcher::capture_thread(Capture& c, const WindowCopy& window, const std::vector<std::vector<std::byte>>& bases,
                             std::uint64_t began, std::atomic<bool>& ok, std::atomic<std::uint64_t>& written_after,
                             std::atomic<bool>& done) {
  // At the job's own priority, not the drain's nice -10 (inherited): the
  // write takes its share of a busy job's cores, never ahead of it.
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 0);
  run_capture(c, window, bases, ok);
  written_after.store(std::max<std::uint64_t>(1, clock_ns(CLOCK_MONOTONIC) - began));
  if (ok && on_capture_) {
    try {
      const std::string top = on_capture_(c);
      std::cerr << capture_summary(c, top) + "\n";
    } catch (const std::exception& e) {
      std::cerr << "ltrace-bpf: watch: the reports of " + c.dir + " not written: " + e.what() + "\n";
    }
  }
  if (ok) give_to_requester(c);
  done.store(true);
}

void Watcher::run_capture(Capture& c, const WindowCopy& window, const std::vector<std::vector<std::byte>>& bases,
                          std::atomic<bool>& ok) {
  try {
    std::function<bool(std::uint32_t)> keep;
    if (c.trigger.for_uid) keep = [&c](std::uint32_t pid) { return c.only_pids.count(pid) > 0; };
    const std::uint64_t began = clock_ns(CLOCK_MONOTONIC);
    c.records = window.write(c.trace, bases, keep);
    const std::uint64_t took_ms = (clock_ns(CLOCK_MONOTONIC) - began) / 1'000'000;
    take_read(c);
    if (!c.at_trigger.empty()) {
      OutputFile f(c.dir + "/threads.txt");
      f.stream() << c.at_trigger;
      f.close();
    }
    ok.store(true);
    std::cerr << "ltrace-bpf: watch: wrote " + c.dir + " (" + std::to_string(c.records) + " records, " +
                     std::to_string((c.to_ns - c.from_ns) / 1'000'000) + " ms; written in " + std::to_string(took_ms) +
                     " ms)\n";
  } catch (const std::exception& e) {  // on its own thread: nothing may escape it (std::terminate)
    std::cerr << "ltrace-bpf: watch: capture " + c.dir + " not written: " + e.what() + "\n";
  }
}

void Watcher::keep_captures_bounded() {
  while (kept_.size() > o_.max_captures) {
    // Not one whose reports are still being written (--max-captures 1: the
    // new capture's own, said "not written" from a removed directory); the
    // next tick after they are done removes it.
    if (std::any_of(renders_.begin(), renders_.end(), [&](const Render& r) { return r.dir == kept_.front(); })) break;
    std::error_code ec;
    // remove_all never follows a link: it removes the link itself.
    std::filesystem::remove_all(kept_.front(), ec);
    std::cerr << "ltrace-bpf: watch: removed the oldest capture " << kept_.front() << " (at most " << o_.max_captures
              << " kept: --max-captures)\n";
    kept_.erase(kept_.begin());
    ++captures_removed_;
  }
}

void Watcher::finish(std::uint64_t now_ns) {
  now_ns_ = now_ns;
  closed_.clear();
  steps_.finish(closed_);
  on_steps(now_ns);
  for (auto& c : pending_) write_capture(c, now_ns);
  pending_.clear();
  join_renders(true);
  keep_captures_bounded();
  ring_.close();
}

std::vector<std::string> Watcher::summary() const {
  std::vector<std::string> out;
  for (const auto& [pid, p] : procs_) {
    char med[32];
    std::snprintf(med, sizeof med, "%.3f s", p.median_ns / 1e9);
    out.push_back("pid " + std::to_string(pid) + (p.rank >= 0 ? " (rank " + std::to_string(p.rank) + ")" : "") + ": " +
                  std::to_string(p.steps) + " train step(s)" +
                  (p.steps ? std::string(", median of the last ones ") + med : std::string()));
  }
  return out;
}

std::string Watcher::metrics_text(std::uint64_t now_ns) const {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  auto labels = [](std::uint32_t pid, const Proc& p) {
    return "{pid=\"" + std::to_string(pid) + "\",rank=\"" + (p.rank >= 0 ? std::to_string(p.rank) : "") + "\"}";
  };
  auto num = [](double v) {
    char b[40];
    std::snprintf(b, sizeof b, "%.9g", v);
    return std::string(b);
  };
  metric("ltrace_bpf_watch_steps_total", "counter", "Lightning training steps completed, per process.");
  for (const auto& [pid, p] : procs_)
    out += "ltrace_bpf_watch_steps_total" + labels(pid, p) + " " + num(p.steps) + "\n";
  // Every step, in buckets: a scrape every 15 s still sees the slow one.
  metric("ltrace_bpf_watch_step_seconds", "histogram", "Lightning training step durations.");
  for (const auto& [pid, p] : procs_) {
    std::string l = labels(pid, p);
    l.pop_back();  // "...}" -> "...,le=\"X\"}"
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < kStepBuckets.size(); ++i) {
      cumulative += p.step_le[i];
      out += "ltrace_bpf_watch_step_seconds_bucket" + l + ",le=\"" + num(kStepBuckets[i]) + "\"} " + num(cumulative) +
             "\n";
    }
    out += "ltrace_bpf_watch_step_seconds_bucket" + l + ",le=\"+Inf\"} " + num(p.steps) + "\n";
    out += "ltrace_bpf_watch_step_seconds_sum" + labels(pid, p) + " " + num(p.step_sum_s) + "\n";
    out += "ltrace_bpf_watch_step_seconds_count" + labels(pid, p) + " " + num(p.steps) + "\n";
  }
  metric("ltrace_bpf_watch_last_step_seconds", "gauge", "The last training step's duration.");
  for (const auto& [pid, p] : procs_)
    if (p.steps) out += "ltrace_bpf_watch_last_step_seconds" + labels(pid, p) + " " + num(p.last_step_ns / 1e9) + "\n";
  metric("ltrace_bpf_watch_step_median_seconds", "gauge", "The median of the recent training steps.");
  for (const auto& [pid, p] : procs_)
    if (const auto m = policy_.median_ns(pid))
      out += "ltrace_bpf_watch_step_median_seconds" + labels(pid, p) + " " + num(m / 1e9) + "\n";
  metric("ltrace_bpf_watch_since_progress_seconds", "gauge", "Time since any Lightning action of the process ended.");
  for (const auto& [pid, p] : procs_)
    if (const auto last = steps_.last_progress(pid); last && !p.exited && now_ns >= last)
      out += "ltrace_bpf_watch_since_progress_seconds" + labels(pid, p) + " " + num((now_ns - last) / 1e9) + "\n";
  metric("ltrace_bpf_watch_target_rss_bytes", "gauge", "Resident memory of the watched process (from /proc).");
  for (const auto& [pid, p] : procs_)
    if (p.rss_bytes && !p.exited)
      out += "ltrace_bpf_watch_target_rss_bytes" + labels(pid, p) + " " + num(p.rss_bytes) + "\n";
  metric("ltrace_bpf_watch_target_cpu_seconds_total", "counter", "CPU time of the watched process (from /proc).");
  for (const auto& [pid, p] : procs_)
    if (p.cpu_ns)
      out += "ltrace_bpf_watch_target_cpu_seconds_total" + labels(pid, p) + " " + num(p.cpu_ns / 1e9) + "\n";
  metric("ltrace_bpf_watch_collectives_total", "counter", "c10d collectives entered.");
  for (const auto& [pid, p] : procs_)
    out += "ltrace_bpf_watch_collectives_total" + labels(pid, p) + " " + num(p.collectives) + "\n";
  static constexpr TriggerKind kinds[] = {TriggerKind::slow_step, TriggerKind::stall,   TriggerKind::memory,
                                          TriggerKind::exit,      TriggerKind::request, TriggerKind::straggler};
  auto per_kind = [&](const char* name, const auto& value) {
    for (auto k : kinds) out += std::string(name) + "{trigger=\"" + trigger_name(k) + "\"} " + num(value(k)) + "\n";
  };
  metric("ltrace_bpf_watch_triggers_total", "counter", "Triggers fired, by kind.");
  per_kind("ltrace_bpf_watch_triggers_total", [&](TriggerKind k) { return policy_.fired(k); });
  metric("ltrace_bpf_watch_triggers_suppressed_total", "counter",
         "Triggers not fired: over their daily limit, or the same out-of-memory episode again.");
  per_kind("ltrace_bpf_watch_triggers_suppressed_total", [&](TriggerKind k) { return policy_.suppressed(k); });
  metric("ltrace_bpf_watch_captures_total", "counter",
         "Captures taken, by their trigger (written, or being written on a thread of their own).");
  per_kind("ltrace_bpf_watch_captures_total", [&](TriggerKind k) {
    const auto it = captures_kind_.find(k);
    return it == captures_kind_.end() ? 0 : it->second;
  });
  metric("ltrace_bpf_watch_captures_failed_total", "counter",
         "Captures taken whose trace could not be written (said on stderr).");
  out += "ltrace_bpf_watch_captures_failed_total " + num(captures_failed_) + "\n";
  metric("ltrace_bpf_watch_records_total", "counter", "Records the watcher received.");
  out += "ltrace_bpf_watch_records_total " + num(records_) + "\n";
  metric("ltrace_bpf_watch_ring_bytes", "gauge", "The flight recorder's segments, on disk and in memory.");
  out += "ltrace_bpf_watch_ring_bytes " + num(ring_.bytes()) + "\n";
  metric("ltrace_bpf_watch_ring_memory_bytes", "gauge",
         "The flight recorder's segments kept in memory because the disk refused writes.");
  out += "ltrace_bpf_watch_ring_memory_bytes " + num(ring_.memory_bytes()) + "\n";
  metric("ltrace_bpf_watch_ring_write_errors_total", "counter", "Writes of the flight recorder the disk refused.");
  out += "ltrace_bpf_watch_ring_write_errors_total " + num(ring_.write_errors()) + "\n";
  metric("ltrace_bpf_watch_ring_seconds", "gauge", "The time the flight recorder holds.");
  const auto oldest = ring_.oldest_ns();
  out += "ltrace_bpf_watch_ring_seconds " + num(oldest && now_ns > oldest ? (now_ns - oldest) / 1e9 : 0) + "\n";
  return out;
}

}  // namespace lt
