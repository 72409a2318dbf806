// What the op observer (torchbridge/op_observer.cpp) must know of the job's
// torch, as data: at::RecordFunctionCallback's layout per torch version, and
// the three libtorch_cpu symbols it calls.  A version outside the table, or
// a library without the symbols, is refused (the op probes stay the path).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "bpf/opobserver_shm.h"

namespace lt {

struct ObserverLayoutRow {
  int first_major, first_minor;  // the first torch version this row holds for
  int last_major, last_minor;    // and the last one checked
  lt_obs_layout layout;
};

// The layout for a torch version as torch.__version__ or libtorch reports
// it ("2.15.0+cpu", "1.13.1"), nullopt when no row holds it.
std::optional<lt_obs_layout> observer_layout(const std::string& torch_version);

// Where a torch version keeps what input shapes are read from
// (--group-by-input-shapes with the observer): at::RecordFunction's
// inputs_ (c10::ArrayRef<const c10::IValue>), c10::IValue's size, tag and
// Tag::Tensor, and c10::TensorImpl's SizesAndStrides (its 8-byte word).
struct ObserverShapes {
  std::uint32_t off_inputs, ivalue_size, ivalue_tag, tag_tensor, sizes_word;
};
// nullopt for a version outside the table.  `cxx11_abi`: the library was
// built with the cxx11 string ABI (uses_cxx11_abi).
std::optional<ObserverShapes> observer_shapes_layout(const std::string& torch_version, bool cxx11_abi);
// Whether libtorch_cpu (a path we can open) exports symbols of the cxx11
// string ABI (std::__cxx11::basic_string), which sizes std::string.
bool uses_cxx11_abi(const std::string& libtorch_cpu);

// The symbols the observer resolves in libtorch_cpu.so.
inline constexpr const char* kObserverSymbols[] = {
    "_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE",  // at::addGlobalCallback(RecordFunctionCallback)
    "_ZN2at14removeCallbackEm",                                // at::removeCallback(CallbackHandle)
    "_ZNK2at14RecordFunction4nameEv",                          // at::RecordFunction::name() const
};

// "" when `libtorch_cpu` (a path we can open) exports all of them, else
// which is missing.
std::string missing_observer_symbol(const std::string& libtorch_cpu);

}  // namespace lt
