// Kernel names as profilers show them.  CUPTI reports a kernel by its mangled
// (Itanium C++ ABI) name; torch.profiler/kineto and nsys show it demangled
// ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>,
// std::array<char*, 1ul> >(int, ...)"), and nsys's "base" reports the short
// name ("vectorized_elementwise_kernel").  Pure functions: no I/O.
#pragma once
#include <string>

namespace lt {

// The demangled name (abi::__cxa_demangle, the text c++filt prints) when
// `mangled` is a C++ mangled name ("_Z..."); anything else (extern "C"
// kernels such as "ampere_sgemm_128x64_tn", Triton's "triton_poi_fused_add_0",
// text that does not demangle) comes back unchanged.
std::string demangle_kernel(const std::string& mangled);

// nsys's short name idea: the function's own name, without return type,
// namespaces/classes, template arguments or parameters:
//   "void at::native::(anonymous namespace)::reduce_kernel<512, 1, ...>(...)"
//   -> "reduce_kernel".
// A name with nothing to strip ("ampere_sgemm_128x64_tn"), or with brackets
// that do not balance, comes back unchanged; "" stays "".  Meant for kernel
// names: other text with parentheses ("Memcpy HtoD (Pageable -> Device)") is
// not a signature and should not be passed.
std::string short_kernel_name(const std::string& demangled);

}  // namespace lt
