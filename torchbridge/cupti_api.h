// libcupti, found and dlopen()ed at run time (never linked), and every CUPTI
// function the bridge calls, resolved through dlsym into one table.
#pragma once

#include <cupti.h>

#include <string>

namespace ltb {

struct CuptiApi {
  void* handle = nullptr;
  std::string path;  // where it came from (or the soname already loaded)

  // Required.
  CUptiResult (*Subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*EnableCallback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId) = nullptr;
  CUptiResult (*GetCallbackName)(CUpti_CallbackDomain, uint32_t, const char**) = nullptr;
  CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                           CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*ActivityEnable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityDisable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityFlushAll)(uint32_t) = nullptr;
  CUptiResult (*ActivityGetNextRecord)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*GetTimestamp)(uint64_t*) = nullptr;
  // Optional.
  CUptiResult (*EnableDomain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain) = nullptr;
  CUptiResult (*ActivityRegisterTimestampCallback)(CUpti_TimestampCallbackFunc) = nullptr;
  CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*GetVersion)(uint32_t*) = nullptr;
  CUptiResult (*GetResultString)(CUptiResult, const char**) = nullptr;

  bool loaded() const { return handle != nullptr; }
  // "CUPTI_ERROR_UNKNOWN" etc., or "CUPTI error <n>".
  std::string result_string(CUptiResult r) const;
};

// Finds libcupti: sonames already loaded (RTLD_NOLOAD), the directories of
// the loaded libcudart / libcuda / libtorch_cuda and their PyPI-wheel
// siblings (nvidia/cuda_cupti/lib, nvidia/cu13/lib, ...), $LTRACE_CUPTI_PATH
// (a file or a directory), /usr/local/cuda/extras/CUPTI/lib64,
// /usr/local/cuda/lib64, then the plain sonames.  On success fills *api and
// returns true; otherwise *tried lists (briefly) what was looked at.
bool load_cupti(CuptiApi* api, std::string* tried);

// Is the CUDA driver (libcuda.so.1) already in the process?
bool cuda_driver_loaded();

}  // namespace ltb
