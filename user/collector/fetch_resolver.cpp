#include "user/collector/fetch_resolver.h"

#include "user/proc/procfs.h"

namespace lt {

namespace {
bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}
}  // namespace

std::optional<std::string> read_py_ascii(pid_t pid, const python::Layout& layout, std::uint64_t str) {
  if (!str) return std::nullopt;
  auto len = proc::read_value<std::int64_t>(pid, str + 16);
  auto state = proc::read_value<std::uint32_t>(pid, str + 32);
  if (!len || !state || *len < 0 || *len > 4096) return std::nullopt;
  if (!((*state >> 5) & 1) || !((*state >> 6) & 1)) return std::nullopt;  // compact ASCII only
  std::string s(static_cast<std::size_t>(*len), '\0');
  if (!s.empty() && !proc::read_memory(pid, str + layout.bpf.str_ascii_data, s.data(), s.size())) return std::nullopt;
  return s;
}

std::optional<FetchResolver::CodeInfo> FetchResolver::code_info(pid_t pid, const python::Layout& layout,
                                                                std::uint64_t code) {
  auto key = std::make_pair(pid, code);
  if (auto it = code_cache_.find(key); it != code_cache_.end()) return it->second;
  std::optional<CodeInfo> info;
  auto name_ptr = proc::read_value<std::uint64_t>(pid, code + layout.bpf.code_name);
  auto file_ptr = proc::read_value<std::uint64_t>(pid, code + layout.bpf.code_filename);
  if (name_ptr && file_ptr) {
    auto name = read_py_ascii(pid, layout, *name_ptr);
    auto file = read_py_ascii(pid, layout, *file_ptr);
    if (name && file) info = CodeInfo{*name, *file};
  }
  code_cache_[key] = info;
  return info;
}

std::optional<std::string> FetchResolver::type_name(pid_t pid, const python::Layout& layout, std::uint64_t obj) {
  auto type = proc::read_value<std::uint64_t>(pid, obj + layout.object_type);
  if (!type) return std::nullopt;
  auto tp_name = proc::read_value<std::uint64_t>(pid, *type + layout.type_tp_name);
  if (!tp_name) return std::nullopt;
  auto name = proc::read_cstring(pid, *tp_name, 200);
  if (!name) return std::nullopt;
  // Static types carry "module.Name"; heap types (Python classes) just "Name".
  auto dot = name->rfind('.');
  return dot == std::string::npos ? *name : name->substr(dot + 1);
}

std::optional<std::string> FetchResolver::resolve(pid_t pid, const python::Layout& layout, const lt_fetch_event& e) {
  // The profiled window is CombinedLoader.__next__ called by the fetcher;
  // the mode iterators' __next__ (same file) are called by it, not by the
  // fetcher, and are skipped here.
  auto first = code_info(pid, layout, e.caller_code[0]);
  if (!first || !ends_with(first->filename, "loops/fetchers.py")) return std::nullopt;
  bool via_fetcher = false;
  for (int i = 0; i < LT_CALLER_DEPTH; ++i) {
    if (!e.caller_code[i]) break;
    auto info = code_info(pid, layout, e.caller_code[i]);
    if (!info) continue;  // shim/entry frames and the like
    if (ends_with(info->filename, "loops/fetchers.py")) {
      via_fetcher = true;
      continue;
    }
    const char* suffix = nullptr;
    if (info->name == "advance" && ends_with(info->filename, "loops/training_epoch_loop.py"))
      suffix = "train_dataloader_next";
    else if (info->name == "run" && ends_with(info->filename, "loops/evaluation_loop.py"))
      suffix = "{eval}_next";
    else if (info->name == "run" && ends_with(info->filename, "loops/prediction_loop.py"))
      suffix = "predict_next";
    if (!suffix) continue;
    if (!via_fetcher) return std::nullopt;
    auto loop = type_name(pid, layout, e.caller_self[i]);
    if (!loop) return std::nullopt;
    return "[" + *loop + "]." + suffix;
  }
  return std::nullopt;
}

}  // namespace lt
