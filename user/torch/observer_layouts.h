// What the op observer (torchbridge/op_observer.cpp) must know of the job's
// torch, as data: at::RecordFunctionCallback's layout per torch version, and
// the three libtorch_cpu symbols it calls.  A version outside the table, or
// a library without the symbols, is refused (the op probes stay the path).
#pragma once
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
