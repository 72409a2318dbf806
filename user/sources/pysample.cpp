#include "user/sources/pysample.h"

#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <utility>

#include "bpf/events.h"
#include "pysample.skel.h"
#include "user/sources/bpf_errors.h"

namespace lt {

namespace {
int open_cpu_clock(int cpu, std::uint64_t period_ns) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  // A fixed period (not a frequency): every sample then stands for the
  // same CPU time, which is what the estimated seconds are made of.
  attr.sample_period = period_ns;
  attr.freq = 0;
  return static_cast<int>(syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}
}  // namespace

template <>
void SkeletonDestroy<lt_pysample>::operator()(lt_pysample* s) const {
  lt_pysample__destroy(s);
}

PySampleSource::PySampleSource(const ProcTrackSource& shared, unsigned rate_hz, bool off_cpu, int op_stacks_fd,
                               unsigned full_rate_hz)
    : skel_(lt_pysample__open()) {
  if (!skel_) throw bpf_error("open pysample", errno);
  // Without the shared maps the sampler would run on private ones and
  // silently see no targets: fail instead.
  if (int err = shared.share_with(skel_->obj)) throw bpf_error("share maps with pysample", -err);
  // The op stacks are written by the op probes: samples read which ops run.
  if (op_stacks_fd >= 0)
    if (int err = bpf_map__reuse_fd(skel_->maps.lt_op_stacks, op_stacks_fd))
      throw bpf_error("share op stacks with pysample", -err);
  // A program we will not attach is not loaded either: sched_switch runs on
  // every context switch of the machine.
  bpf_program__set_autoload(skel_->progs.lt_switch, off_cpu);
  bpf_program__set_autoload(skel_->progs.lt_sample, rate_hz > 0);
  if (int err = lt_pysample__load(skel_.get())) throw bpf_error("load pysample", -err);
  if (rate_hz > 0) {
    period_ns_ = 1'000'000'000ull / rate_hz;
    if (full_rate_hz > rate_hz) {
      // One unit of weight is the full rate's period; the cheap events tick
      // at a whole number of them (19 Hz under 99 Hz: 5, so 19.8 Hz).
      full_rate_ = true;
      period_ns_ = 1'000'000'000ull / full_rate_hz;
      cheap_weight_ = std::clamp<unsigned>(
          static_cast<unsigned>(std::lround(static_cast<double>(full_rate_hz) / rate_hz)), 1, 0xffff);
    }
    cheap_ = open_per_cpu(period_ns_ * cheap_weight_, cheap_weight_);
  }
  if (off_cpu) {
    LinkPtr link(bpf_program__attach(skel_->progs.lt_switch));
    if (!link) throw bpf_error("attach sched_switch", errno);
    links_.push_back(std::move(link));
  }
}

std::vector<LinkPtr> PySampleSource::open_per_cpu(std::uint64_t period_ns, std::uint64_t cookie) {
  std::vector<LinkPtr> out;
  const int ncpu = libbpf_num_possible_cpus();
  for (int cpu = 0; cpu < ncpu; ++cpu) {
    const int fd = open_cpu_clock(cpu, period_ns);
    if (fd < 0) {
      if (errno == ENODEV) continue;  // possible but offline
      const int err = errno;
      throw bpf_error("open a cpu-clock perf event on CPU " + std::to_string(cpu), err);
    }
    OwnedFd owned(fd);
    bpf_perf_event_opts opts{};
    opts.sz = sizeof opts;
    opts.bpf_cookie = cookie;
    LinkPtr link(bpf_program__attach_perf_event_opts(skel_->progs.lt_sample, fd, &opts));
    if (!link) {
      const int err = errno;
      throw bpf_error("attach the stack sampler on CPU " + std::to_string(cpu), err);
    }
    owned.release();  // the link's now: bpf_link__destroy closes it
    out.push_back(std::move(link));
  }
  return out;
}

void PySampleSource::set_full_rate(bool on) {
  if (!full_rate_ || on == !full_.empty()) return;
  if (on)
    full_ = open_per_cpu(period_ns_, 1 | LT_SAMPLE_COOKIE_FULL);
  else
    full_.clear();
}

PySampleSource::~PySampleSource() = default;

}  // namespace lt
