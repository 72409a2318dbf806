#include "user/torch/compiled_code.h"

#include <dirent.h>

#include <fstream>
#include <sstream>

#include "user/proc/elf_image.h"

namespace lt {

namespace {

std::string read_text(const std::string& path, std::size_t max = 16u << 20) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::string s(max, '\0');
  in.read(s.data(), static_cast<std::streamsize>(max));
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

std::string_view trim(std::string_view s) {
  const auto ws = " \t\r\n";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// The defined dynamic symbols of `path` we look for, as file offsets.
struct Exports {
  std::optional<std::uint64_t> kernel, region;
  bool pyinit = false;
};
Exports exports_of(const std::string& path) {
  Exports e;
  const elf::ElfImage file(path);
  if (!file.ok() || !file.is_elf64()) return e;
  file.for_each_symbol(
      [&](const elf::SymbolEntry& s) {
        if (!s.defined() || s.value == 0) return;
        const std::string_view n = s.name;
        if (n == "kernel")
          e.kernel = file.file_offset(s.value, true);
        else if (n == "PyInit_kernel")
          e.pyinit = true;
        else if (n == "dynamo_eval_custom_code")
          e.region = file.file_offset(s.value, true);
      },
      elf::ElfImage::Tables::dynamic_only);
  return e;
}

}  // namespace

namespace compiled_code_detail {

std::vector<std::pair<std::string, std::string>> pybinding_kernels(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  static constexpr std::string_view kCall = " = async_compile.cpp_pybinding(";
  for (std::size_t at = text.find(kCall); at != std::string_view::npos; at = text.find(kCall, at + 1)) {
    const auto line = text.rfind('\n', at);
    const auto name = trim(text.substr(line == std::string_view::npos ? 0 : line + 1, at - (line + 1)));
    const auto open = text.find("r'''", at);
    if (open == std::string_view::npos) break;
    const auto close = text.find("'''", open + 4);
    if (close == std::string_view::npos) break;
    if (!name.empty() && name.find_first_of(" =()") == std::string_view::npos)
      out.emplace_back(std::string(name), std::string(trim(text.substr(open + 4, close - open - 4))));
  }
  return out;
}

std::string kernel_name_for(std::string_view cpp_text,
                            const std::vector<std::pair<std::string, std::string>>& kernels) {
  std::string best;
  for (auto& [name, source] : kernels)
    if (!source.empty() && cpp_text.find(source) != std::string_view::npos && (best.empty() || name < best))
      best = name;
  return best;
}

}  // namespace compiled_code_detail

std::optional<std::uint64_t> compiled_region_entry(const std::string& path) {
  return exports_of(path).region;
}

bool maybe_inductor_library(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos || slash < 3 || path[slash - 3] != '/') return false;
  return path.size() > slash + 4 && path[slash + 1] == 'c' && path.compare(path.size() - 3, 3, ".so") == 0;
}

std::optional<InductorKernel> inductor_kernel(const std::string& path, const std::string& dir_path,
                                              const std::string& file_name) {
  const Exports e = exports_of(path);
  if (!e.kernel || !e.pyinit) return std::nullopt;
  InductorKernel k{*e.kernel, ""};
  // <cache>/<xx>/<hash>.main.so: the source beside it, the generated
  // modules in the cache's other two-character directories.
  std::string stem = file_name;
  if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".so") == 0) stem.resize(stem.size() - 3);
  const std::string cpp = read_text(dir_path + "/" + stem + ".cpp");
  if (cpp.empty()) return k;
  const std::string cache = dir_path + "/..";
  std::vector<std::pair<std::string, std::string>> kernels;
  if (DIR* d = opendir(cache.c_str())) {
    while (dirent* sub = readdir(d)) {
      if (std::string_view(sub->d_name).size() != 2 || sub->d_name[0] == '.') continue;
      const std::string subdir = cache + "/" + sub->d_name;
      DIR* s = opendir(subdir.c_str());
      if (!s) continue;
      while (dirent* f = readdir(s)) {
        const std::string_view n = f->d_name;
        if (n.size() < 4 || n.substr(n.size() - 3) != ".py") continue;
        const std::string text = read_text(subdir + "/" + std::string(n));
        if (text.find("cpp_pybinding") == std::string::npos) continue;
        for (auto& kv : compiled_code_detail::pybinding_kernels(text)) kernels.push_back(std::move(kv));
      }
      closedir(s);
    }
    closedir(d);
  }
  k.name = compiled_code_detail::kernel_name_for(cpp, kernels);
  return k;
}

}  // namespace lt
