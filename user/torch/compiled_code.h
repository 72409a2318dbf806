// What torch.compile leaves in a process that probes can reach from outside
// (docs/design-compile.md):
//  - compiled regions: libtorch_python's dynamo_eval_custom_code(tstate,
//    frame, code, trace_annotation, throw_flag) runs a cache entry's
//    compiled code; its 4th argument is the annotation torch.profiler
//    records ("Torch-Compiled Region: 0/0").
//  - inductor's CPU kernels: one shared library per fused kernel, built at
//    run time in inductor's cache directory (<cache>/<2 chars>/<hash>.main.so,
//    exporting `kernel` and `PyInit_kernel`); the name torch.profiler gives
//    it (cpp_fused_relu_0) is only in the graph's generated Python module,
//    `cpp_fused_relu_0 = async_compile.cpp_pybinding([...], r'''SOURCE''')`,
//    whose SOURCE the library's <hash>.main.cpp holds.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lt {

// The file offset of dynamo_eval_custom_code in a libtorch_python file, if
// it exports one (torch >= 2.5; earlier: none, no region rows).
std::optional<std::uint64_t> compiled_region_entry(const std::string& path);

// Inductor names its kernel libraries <cache>/<2 chars>/c<hash>[.main].so;
// only paths of that shape are worth reading as one (every other library
// of a process would cost an ELF read for nothing).
bool maybe_inductor_library(const std::string& path);

struct InductorKernel {
  std::uint64_t file_offset = 0;  // of `kernel`
  std::string name;               // "cpp_fused_relu_0"; "" when no generated module names it
};

// The kernel of an inductor kernel library at `path` (a path we can open,
// e.g. /proc/PID/map_files/...; `dir_path`: its directory as we can open it,
// for the .cpp beside it and the cache's generated modules; `file_name`:
// its name there, "c<hash>.main.so").  nullopt: not an inductor kernel library.
std::optional<InductorKernel> inductor_kernel(const std::string& path, const std::string& dir_path,
                                              const std::string& file_name);

namespace compiled_code_detail {
// Each `NAME = async_compile.cpp_pybinding([...], r'''SOURCE''')` of a
// generated module: (NAME, SOURCE).  Pure, for unit tests.
std::vector<std::pair<std::string, std::string>> pybinding_kernels(std::string_view module_text);
// The name whose SOURCE (trimmed) `cpp_text` holds; "" if none.  Several
// modules may hold one kernel under different names: the smallest name wins
// (deterministic).
std::string kernel_name_for(std::string_view cpp_text, const std::vector<std::pair<std::string, std::string>>& kernels);
}  // namespace compiled_code_detail

}  // namespace lt
