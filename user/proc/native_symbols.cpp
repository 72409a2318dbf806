#include "user/proc/native_symbols.h"

#include <cxxabi.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <system_error>

#include "bpf/events.h"
#include "user/proc/symbol_index.h"

namespace lt::proc {

namespace {

std::string demangle(const std::string& name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (!d) return name;
  std::string out = status == 0 ? d : name;
  std::free(d);
  return out;
}

std::string base_name(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

NativeNamer::NativeNamer(std::chrono::milliseconds index_wait, Loader load)
    : index_wait_(index_wait), load_(std::move(load)) {
  if (!load_) load_ = [](const std::string& path) { return std::make_shared<const SymbolIndex>(path); };
}
// Each reader thread still running is waited for (a shared future from
// std::async joins its thread when the last copy goes).
NativeNamer::~NativeNamer() = default;

const Mapping* NativeNamer::mapping_of(pid_t pid, std::uint64_t ip) {
  auto find = [ip](const std::vector<Mapping>& maps) -> const Mapping* {
    for (auto& m : maps)
      if (ip >= m.start && ip < m.end) return &m;
    return nullptr;
  };
  auto it = maps_.find(pid);
  if (it != maps_.end())
    if (auto* m = find(it->second)) return m;
  // New library since we last looked (or first time): read the maps again.
  maps_[pid] = read_maps(pid);
  return find(maps_[pid]);
}

std::optional<NativeName> NativeNamer::name(pid_t pid, std::uint64_t ip) {
  if (!ip) return std::nullopt;
  const Mapping* m = mapping_of(pid, ip);
  if (!m || m->path.empty() || m->path[0] != '/') return std::nullopt;
  NativeName out;
  out.path = m->path;
  out.map_start = m->start;
  out.map_end = m->end;
  out.dso = base_name(m->path);
  std::string path = mapped_file(pid, *m);
  // One index per file, whoever maps it (every forked worker maps the same
  // libraries): keyed by device and inode, not by the per-pid path.
  struct stat st {};
  if (path.empty() || stat(path.c_str(), &st) != 0) return std::nullopt;
  auto f = files_.find({st.st_dev, st.st_ino});
  // Unreadable or not ELF: an empty index, and the frame is named by its file.
  if (f == files_.end()) {
    std::shared_future<std::shared_ptr<const SymbolIndex>> ready;
    try {
      ready = std::async(std::launch::async, load_, path).share();
    } catch (const std::system_error&) {  // no thread to be had: read it here
      std::promise<std::shared_ptr<const SymbolIndex>> now;
      now.set_value(load_(path));
      ready = now.get_future().share();
    }
    f = files_.emplace(std::make_pair(st.st_dev, st.st_ino), std::move(ready)).first;
  }
  if (index_wait_ < std::chrono::milliseconds::zero())
    f->second.wait();
  else if (f->second.wait_for(index_wait_) != std::future_status::ready) {
    out.loading = true;
    out.function = "[" + out.dso + "]";
    return out;
  }
  const std::shared_ptr<const SymbolIndex>& index = f->second.get();
  std::uint64_t b = 0, e = 0;
  if (const char* sym = index ? index->function_at(ip - m->start + m->offset, b, e) : nullptr)
    out.function = demangle(sym);
  // The addresses with the same name in this process: the function's
  // extent, or the gap between symbols where there is none ("[dso]").
  if (e > b && b >= m->offset) {
    out.start = std::max(m->start, b - m->offset + m->start);
    out.end = std::min(m->end, e - m->offset + m->start);
  }
  if (!(out.start <= ip && ip < out.end)) out.start = out.end = 0;  // no extent known: this address alone
  if (out.function.empty()) out.function = "[" + out.dso + "]";
  return out;
}

void NativeNamer::forget(pid_t pid) {
  maps_.erase(pid);
}

NativeSymbols::NativeSymbols(Emit emit, Renamer rename, std::chrono::milliseconds index_wait, NativeNamer::Loader load)
    : emit_(std::move(emit)), rename_(std::move(rename)), namer_(index_wait, std::move(load)) {}
NativeSymbols::~NativeSymbols() = default;

bool NativeSymbols::describe(pid_t pid, std::uint64_t ip, const std::string& skip_file, std::uint64_t ts) {
  if (!ip) return true;
  if (auto s = skipped_.find(pid); s != skipped_.end())
    for (const auto& [b, e] : s->second)
      if (ip >= b && ip < e) return true;
  if (done_.count({pid, ip})) return true;
  auto& ranges = named_[pid];
  if (auto r = ranges.upper_bound(ip); r != ranges.begin() && ip < std::prev(r)->second) return true;
  auto n = namer_.name(pid, ip);
  if (n && n->path == skip_file) {
    skipped_[pid].emplace_back(n->map_start, n->map_end);
    return true;
  }
  if (!n) {
    if (done_.size() >= kMaxDone) done_.clear();
    done_.emplace(pid, ip);
    return true;
  }
  if (n->loading) return false;
  if (rename_)
    if (auto better = rename_(pid, *n)) n->function = std::move(*better);
  // One record for every address of the function (or of a mapping
  // without symbols): what a long recording keeps grows with the
  // functions it ran, not with the addresses sampled.
  if (n->start < n->end && ranges.size() < kMaxRanges) {
    ranges.emplace(n->start, n->end);
    lt_native_func_event f{};
    f.hdr.kind = LT_EV_NATIVE_FUNC;
    f.hdr.size = sizeof f;
    f.hdr.pid = f.hdr.tid = static_cast<std::uint32_t>(pid);
    f.hdr.ts_ns = ts;
    f.start = n->start;
    f.end = n->end;
    std::strncpy(f.dso, n->dso.c_str(), sizeof f.dso - 1);
    std::strncpy(f.name, n->function.c_str(), sizeof f.name - 1);
    emit_(&f, sizeof f);
    return true;
  }
  if (done_.size() >= kMaxDone) done_.clear();
  done_.emplace(pid, ip);
  lt_native_sym_event e{};
  e.hdr.kind = LT_EV_NATIVE_SYM;
  e.hdr.size = sizeof e;
  e.hdr.pid = e.hdr.tid = static_cast<std::uint32_t>(pid);
  e.hdr.ts_ns = ts;
  e.ip = ip;
  std::strncpy(e.dso, n->dso.c_str(), sizeof e.dso - 1);
  std::strncpy(e.name, n->function.c_str(), sizeof e.name - 1);
  emit_(&e, sizeof e);
  return true;
}

void NativeSymbols::forget(pid_t pid) {
  namer_.forget(pid);
  skipped_.erase(pid);
  named_.erase(pid);
  done_.erase(done_.lower_bound({pid, 0}), done_.lower_bound({pid + 1, 0}));
}

}  // namespace lt::proc
