#include "user/collector/op_probes.h"

#include <fnmatch.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "user/core/errors.h"
#include "user/proc/procfs.h"
#include "user/sources/opprobe.h"
#include "user/torch/compiled_code.h"
#include "user/torch/op_args.h"
#include "user/torch/op_catalog.h"

namespace lt {

namespace {
// libtorch_cpu holds every at::_ops::*::call (CUDA kernels register into the
// same dispatcher; their libraries have no op entry points of their own).
bool is_libtorch_cpu(const std::string& path) {
  auto slash = path.rfind('/');
  return path.compare(slash == std::string::npos ? 0 : slash + 1, 15, "libtorch_cpu.so") == 0;
}
bool is_libtorch_python(const std::string& path) {
  auto slash = path.rfind('/');
  return path.compare(slash == std::string::npos ? 0 : slash + 1, 18, "libtorch_python.so") == 0;
}
}  // namespace

OpProbes::OpProbes(OpProbeSource& source, std::vector<std::string> filters, Emit emit)
    : source_(source), filters_(std::move(filters)), emit_(std::move(emit)) {}

bool OpProbes::selected(const std::string& name) const {
  if (filters_.empty()) return true;
  // "aten::mm" or just "mm": both spellings select the op.
  const std::string bare = name.rfind("aten::", 0) == 0 ? name.substr(6) : name;
  for (auto& f : filters_)
    if (fnmatch(f.c_str(), name.c_str(), 0) == 0 || fnmatch(f.c_str(), bare.c_str(), 0) == 0) return true;
  return false;
}

// pid's libtorch_cpu: the catalogue of its file (read once per file) and a
// path to it we can open; nullopt when not mapped (yet) or gone.
std::optional<OpProbes::Mapped> OpProbes::catalogue(pid_t pid) {
  Mapped m;
  for (auto& map : proc::read_maps(pid))
    if (is_libtorch_cpu(map.path)) {
      m.lib = map.path;
      // The file the target runs (containers, chroots, overlayfs).
      m.open_path = proc::mapped_file(pid, map);
      break;
    }
  if (m.lib.empty() || m.open_path.empty()) return std::nullopt;
  struct stat st {};
  if (stat(m.open_path.c_str(), &st) != 0) return std::nullopt;  // gone or deleted: try again later
  m.file = std::make_pair(static_cast<unsigned long>(st.st_dev), static_cast<unsigned long>(st.st_ino));
  if (probes_of_.count(m.file)) return m;
  auto t0 = std::chrono::steady_clock::now();
  OpCatalog cat = load_op_catalog(m.open_path);
  const auto first = static_cast<std::uint32_t>(ops_.size());
  libraries_[m.file] = first;
  std::vector<std::uint64_t> offsets, cookies;
  for (std::size_t i = 0; i < cat.ops.size(); ++i) {
    ops_.push_back({cat.ops[i].name, cat.ops[i].overload,
                    tensor_arg_registers(cat.ops[i].signature, cat.ops[i].schema).tensor_reg});
    if (!selected(cat.ops[i].name)) continue;
    offsets.push_back(cat.ops[i].file_offset);
    // cookie: the op index, and above bit 32 which argument registers
    // hold tensors (the shapes probe reads only those)
    std::uint64_t regs = 0;
    for (auto r : ops_.back().arg_reg)
      if (r >= 0 && r < LT_SHAPE_REGS) regs |= 1ull << r;
    cookies.push_back((first + i) | (regs << 32));
  }
  announced_.resize(ops_.size(), false);
  if (offsets.empty()) {
    std::string list;
    for (auto& f : filters_) list += (list.empty() ? "" : ",") + f;
    throw Error(ExitCode::usage, "--ops '" + list + "' matches none of the " + std::to_string(cat.ops.size()) +
                                     " aten operators of " + m.lib);
  }
  probes_of_.emplace(m.file, std::make_pair(std::move(offsets), std::move(cookies)));
  last_ = m.lib + ": " + std::to_string(cat.ops.size()) + " aten ops, " + std::to_string(cat.schemas_found) +
          " schemas, " + std::to_string(cat.unresolved) + " named by fallback";
  attach_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

bool OpProbes::attach(pid_t pid, pid_t pid_filter) {
  const auto m = catalogue(pid);
  if (!m) return false;
  if (attached_.count({m->file.first, m->file.second, pid_filter}) ||
      attached_.count({m->file.first, m->file.second, -1}))
    return true;
  auto t0 = std::chrono::steady_clock::now();
  const auto& known = probes_of_.at(m->file);
  source_.attach(m->open_path, known.first, known.second, pid_filter);
  attached_.insert({m->file.first, m->file.second, pid_filter});
  probes_ += known.first.size();
  attach_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return true;
}

std::uint32_t OpProbes::add_op(std::string name) {
  ops_.push_back({std::move(name), "", {}});
  announced_.resize(ops_.size(), false);
  return static_cast<std::uint32_t>(ops_.size() - 1);
}

void OpProbes::attach_file(const std::string& open_path, std::pair<unsigned long, unsigned long> file,
                           pid_t pid_filter) {
  if (attached_.count({file.first, file.second, pid_filter}) || attached_.count({file.first, file.second, -1})) return;
  auto& probes = probes_of_[file];
  source_.attach(open_path, probes.first, probes.second, pid_filter);
  attached_.insert({file.first, file.second, pid_filter});
  probes_ += probes.first.size();
}

std::vector<std::string> OpProbes::attach_compiled(pid_t pid, pid_t pid_filter) {
  std::vector<std::string> added;
  for (auto& m : proc::read_maps(pid)) {
    if (m.offset != 0) continue;
    const bool python = is_libtorch_python(m.path);
    if (!python && !maybe_inductor_library(m.path)) continue;
    const std::string open_path = proc::mapped_file(pid, m);
    struct stat st {};
    if (open_path.empty() || stat(open_path.c_str(), &st) != 0) continue;
    const auto file = std::make_pair(static_cast<unsigned long>(st.st_dev), static_cast<unsigned long>(st.st_ino));
    if (!probes_of_.count(file)) {
      std::pair<std::vector<std::uint64_t>, std::vector<std::uint64_t>> probes;
      if (python) {
        if (auto at = compiled_region_entry(open_path)) {
          if (region_base_ == UINT32_MAX) {
            // One block for every libtorch_python: row names are the
            // annotations, the same in every process.
            region_base_ = add_op("Torch-Compiled Region");
            for (unsigned f = 0; f < LT_REGION_FRAMES; ++f)
              for (unsigned c = 0; c < LT_REGION_COMPILES; ++c)
                add_op("Torch-Compiled Region: " + std::to_string(f) + "/" + std::to_string(c));
          }
          probes.first.push_back(*at);
          probes.second.push_back(region_base_ | LT_OP_COOKIE_REGION);
        }
      } else {
        const auto slash = m.path.rfind('/');
        if (auto k =
                inductor_kernel(open_path, proc::root_path(pid, m.path.substr(0, slash)), m.path.substr(slash + 1))) {
          std::string name = k->name.empty() ? "inductor kernel " + m.path.substr(slash + 1) : k->name;
          if (selected(name)) {
            probes.first.push_back(k->file_offset);
            probes.second.push_back(add_op(name));
            added.push_back(std::move(name));
          }
        }
      }
      probes_of_.emplace(file, std::move(probes));
    }
    attach_file(open_path, file, pid_filter);
  }
  return added;
}

std::uint64_t OpProbes::tensor_vtable(pid_t pid) const {
  for (auto& m : proc::read_maps(pid)) {
    auto slash = m.path.rfind('/');
    if (m.path.compare(slash == std::string::npos ? 0 : slash + 1, 9, "libc10.so") != 0 || m.offset != 0) continue;
    try {
      // Shared libraries link at 0: the mapping of offset 0 is the bias.
      const std::string path = proc::mapped_file(pid, m);
      if (path.empty()) return 0;
      if (auto v = dynamic_object(path, "_ZTVN3c1010TensorImplE")) return m.start + *v + 16;
    } catch (const Error&) {
    }
    return 0;
  }
  return 0;
}

std::uint32_t OpProbes::index_of(const std::string& name, const std::string& shapes) {
  std::string key = name;
  if (!shapes.empty()) (key += '\x1f') += shapes;
  if (auto it = observed_.find(key); it != observed_.end()) return it->second;
  const std::uint32_t op = selected(name) ? add_op(name) : UINT32_MAX;
  if (op != UINT32_MAX) ops_[op].shapes = shapes;
  observed_.emplace(std::move(key), op);
  return op;
}

void OpProbes::announce(std::uint32_t op) {
  if (op >= ops_.size() || announced_[op]) return;
  announced_[op] = true;
  lt_op_name_event e{};
  e.hdr.kind = LT_EV_OP_NAME;
  e.hdr.size = sizeof e;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  e.hdr.ts_ns = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
  e.op = op;
  std::strncpy(e.name, ops_[op].name.c_str(), sizeof e.name - 1);
  std::strncpy(e.overload, ops_[op].overload.c_str(), sizeof e.overload - 1);
  const auto& regs = ops_[op].arg_reg;
  e.nargs = static_cast<std::uint16_t>(std::min<std::size_t>(regs.size(), LT_OP_ARGS_MAX));
  for (std::size_t i = 0; i < LT_OP_ARGS_MAX; ++i) e.arg_reg[i] = i < e.nargs ? regs[i] : -1;
  emit_(&e, sizeof e);
  if (ops_[op].shapes.empty()) return;
  lt_op_input_shapes_event s{};
  s.hdr = e.hdr;
  s.hdr.kind = LT_EV_OP_INPUT_SHAPES;
  s.hdr.size = sizeof s;
  s.op = op;
  // A text longer than the record holds (never seen: ~40 four-dimensional
  // inputs) is cut, and says so.
  std::string text = ops_[op].shapes;
  if (text.size() > sizeof s.text) {
    text.resize(sizeof s.text - 4);
    text.append("...]");
  }
  s.len = static_cast<std::uint32_t>(text.size());
  std::memcpy(s.text, text.data(), text.size());
  emit_(&s, sizeof s);
}

}  // namespace lt
