#include "user/collector/gpu_tracer.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "user/core/errors.h"
#include "user/inject/inject_library.h"
#include "user/model/cuda_sites.h"
#include "user/proc/procfs.h"
#include "user/python/elf_file.h"
#include "user/sources/gpu.h"

namespace lt {

namespace {

bool is_lib(const std::string& path, const char* stem) {
  auto slash = path.rfind('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return base.rfind(stem, 0) == 0;
}

// The memfd name an injected bridge gets: its mapping reads
// "/memfd:libltrace-bridge.so (deleted)" in /proc/PID/maps.
constexpr const char* kBridgeMemfdName = "libltrace-bridge.so";

bool is_bridge(const std::string& path) {
  const std::string_view p = path;
  return is_lib(path, "libltrace-bridge") || (p.starts_with("/memfd:") && p.substr(7).starts_with(kBridgeMemfdName));
}

}  // namespace

std::string find_bridge_library() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("LTRACE_BRIDGE"); env && *env) return fs::exists(env) ? env : "";
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (auto candidate : {exe.parent_path() / "libltrace-bridge.so",
                         exe.parent_path().parent_path() / "lib" / "ltrace-bpf" / "libltrace-bridge.so"})
    if (fs::exists(candidate, ec)) return fs::canonical(candidate, ec).string();
  return "";
}

GpuTracer::GpuTracer(std::function<GpuSource&()> source, GpuTracerOptions opts, Note note)
    : source_(source), opts_(std::move(opts)), note_(std::move(note)) {}

std::string GpuTracer::describe(pid_t pid) const {
  auto it = how_.find(pid);
  std::string out = "GPU: ";
  out += it == how_.end() ? std::string_view("no CUDA") : std::string_view(it->second);
  return out;
}

bool GpuTracer::attach(pid_t pid, pid_t) {
  // CUDA is in use once the driver library is mapped (libcudart loads it at
  // the first CUDA call).  A CUDA build of torch maps libcudart at import,
  // so libcudart alone says nothing: a CPU-only job stays untouched.
  // LTRACE_GPU_WITHOUT_DRIVER=1 (tests on machines without a GPU) accepts
  // libcudart alone.
  static const bool without_driver = std::getenv("LTRACE_GPU_WITHOUT_DRIVER") != nullptr;
  std::string bridge, cuda;
  for (const auto& m : proc::read_maps(pid)) {
    if (m.path.empty() || m.path[0] != '/') continue;
    if (is_bridge(m.path) && bridge.empty()) bridge = proc::mapped_file(pid, m);
    if (is_lib(m.path, "libcuda.so") || (without_driver && is_lib(m.path, "libcudart.so"))) cuda = m.path;
  }
  try {
    if (!bridge.empty()) {
      source_().attach_bridge(bridge);
      how_[pid] = "CUPTI bridge (loaded at launch)";
      return true;
    }
    if (cuda.empty()) return false;  // no CUDA yet: poll again
    // Launched with a CUDA injection library (ours from `run`, or another
    // tool's): the driver loads it itself; never inject on top of it.
    auto env = proc::read_environ(pid);
    if (auto it = env.find("CUDA_INJECTION64_PATH"); it != env.end() && !it->second.empty()) {
      if (it->second.find("libltrace-bridge") != std::string::npos) return false;  // ours: it maps soon
      fall_back_to_uprobes(pid, "CUDA_INJECTION64_PATH names another tool (" + it->second + ")");
      return true;
    }
    if (!opts_.inject || opts_.bridge_path.empty()) {
      fall_back_to_uprobes(pid, opts_.inject ? "libltrace-bridge.so not found next to ltrace-bpf" : "--no-inject");
      return true;
    }
    // The bridge goes in as a memfd: the target may be in a container that
    // does not see our file, and nothing is left in its file system.  The
    // probes go on that very file before the dlopen, so the bridge finds its
    // semaphores set at once.
    GpuSource& source = source_();  // loaded before the target's thread is stopped
    inject::InjectOptions io;
    io.handoff = inject::Handoff::memfd_or_path;
    io.memfd_name = kBridgeMemfdName;
    io.before_dlopen = [&source](const std::string& file) { source.attach_bridge(file); };
    auto r = inject::inject_library(pid, opts_.bridge_path, io);
    how_[pid] = "CUPTI bridge (injected into the running process)";
    injected_.insert(pid);
    note_("pid " + std::to_string(pid) + ": GPU: injected " + opts_.bridge_path +
          (r.memfd ? " (as a memfd: nothing written to its file system)" : " (by its path)") +
          " (CUPTI from now on; NVTX ranges cannot be captured from a process attached late: launch it with "
          "`ltrace-bpf run -- ...` or NVTX_INJECTION64_PATH for those)");
    if (opts_.verbose) note_("pid " + std::to_string(pid) + ": GPU: " + r.detail);
  } catch (const Error& e) {
    fall_back_to_uprobes(pid, e.what());
  }
  return true;
}

void GpuTracer::expect_bridge(const std::string& path) {
  try {
    source_().attach_bridge(path);
  } catch (const Error& e) {
    note_(std::string("GPU: ") + e.what());
  }
}

void GpuTracer::on_status(pid_t pid, const lt_gpu_status& s) {
  std::string detail(s.detail, strnlen(s.detail, sizeof s.detail));
  switch (s.state) {
    case LT_BRIDGE_CUPTI_BUSY:
    case LT_BRIDGE_NO_CUPTI:
    case LT_BRIDGE_CUPTI_ERROR:
      fall_back_to_uprobes(pid, detail.empty() ? "CUPTI unavailable" : detail);
      break;
    default:
      break;
  }
}

void GpuTracer::fall_back_to_uprobes(pid_t pid, const std::string& why) {
  if (!uprobed_.insert(pid).second) return;
  std::size_t n = 0;
  std::set<std::string> done;
  for (const auto& m : proc::read_maps(pid)) {
    if (m.path.empty() || m.path[0] != '/' || !done.insert(m.path).second) continue;
    const bool cudart = is_lib(m.path, "libcudart.so"), libcuda = is_lib(m.path, "libcuda.so");
    if (!cudart && !libcuda) continue;
    const std::string path = proc::root_path(pid, m.path);
    try {
      elf::ElfFile f(path);
      std::vector<GpuSource::Site> sites;
      auto all = cuda_sites();
      for (std::uint32_t i = 0; i < all.size(); ++i) {
        if (all[i].source != (cudart ? LT_LAUNCH_CUDART : LT_LAUNCH_LIBCUDA)) continue;
        auto sym = f.symbol(all[i].symbol);
        if (!sym || !sym->value) continue;
        auto off = f.file_offset(sym->value);
        if (off) sites.push_back({*off, all[i].api, all[i].source, i});
      }
      n += source_().attach_entries(path, pid, sites);
    } catch (const Error&) {
    }
  }
  how_[pid] = "uprobes on libcudart/libcuda (" + std::to_string(n) + " sites; no GPU times)";
  note_("pid " + std::to_string(pid) + ": GPU: " + why + "; falling back to " + std::to_string(n) +
        " entry uprobes on libcudart/libcuda: launches, copies and syncs are counted and joined to ops, stacks and "
        "actions, without GPU times");
}

}  // namespace lt
