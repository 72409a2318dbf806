#include "torchbridge/cupti_api.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "torchbridge/util.h"

namespace ltb {
namespace {

constexpr const char* kSonames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};

template <class F>
bool sym(void* h, const char* name, F* out) {
  void* p = dlsym(h, name);
  *out = reinterpret_cast<F>(p);
  return p != nullptr;
}

bool resolve(void* h, CuptiApi* api) {
  bool ok = true;
  ok &= sym(h, "cuptiSubscribe", &api->Subscribe);
  ok &= sym(h, "cuptiUnsubscribe", &api->Unsubscribe);
  ok &= sym(h, "cuptiEnableCallback", &api->EnableCallback);
  ok &= sym(h, "cuptiGetCallbackName", &api->GetCallbackName);
  ok &= sym(h, "cuptiActivityRegisterCallbacks", &api->ActivityRegisterCallbacks);
  ok &= sym(h, "cuptiActivityEnable", &api->ActivityEnable);
  ok &= sym(h, "cuptiActivityDisable", &api->ActivityDisable);
  ok &= sym(h, "cuptiActivityFlushAll", &api->ActivityFlushAll);
  ok &= sym(h, "cuptiActivityGetNextRecord", &api->ActivityGetNextRecord);
  ok &= sym(h, "cuptiGetTimestamp", &api->GetTimestamp);
  sym(h, "cuptiEnableDomain", &api->EnableDomain);
  sym(h, "cuptiActivityRegisterTimestampCallback", &api->ActivityRegisterTimestampCallback);
  sym(h, "cuptiActivityGetNumDroppedRecords", &api->ActivityGetNumDroppedRecords);
  sym(h, "cuptiGetVersion", &api->GetVersion);
  sym(h, "cuptiGetResultString", &api->GetResultString);
  return ok;
}

bool try_open(const std::string& path, int flags, CuptiApi* api) {
  void* h = dlopen(path.c_str(), flags);
  if (h == nullptr) return false;
  CuptiApi t;
  if (!resolve(h, &t)) {
    debug("%s: missing CUPTI functions, skipped", path.c_str());
    dlclose(h);
    return false;
  }
  t.handle = h;
  t.path = path;
  *api = t;
  debug("libcupti: %s", path.c_str());
  return true;
}

bool file_exists(const std::string& p) {
  return access(p.c_str(), R_OK) == 0;
}

std::string dir_of(std::string_view path) {
  std::size_t s = path.rfind('/');
  return s == std::string_view::npos ? std::string() : std::string(path.substr(0, s));
}

std::string_view base_of(std::string_view path) {
  std::size_t s = path.rfind('/');
  return s == std::string_view::npos ? path : path.substr(s + 1);
}

// Directories of loaded CUDA libraries, the runtime first.
int collect_dir(dl_phdr_info* info, size_t, void* data) {
  auto* dirs = static_cast<std::vector<std::string>*>(data);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == 0) return 0;
  std::string_view name = info->dlpi_name;
  std::string_view base = base_of(name);
  bool cuda = base.substr(0, 12) == "libcudart.so" || base.substr(0, 11) == "libcuda.so." ||
              base.substr(0, 16) == "libtorch_cuda.so" || base.substr(0, 9) == "libcupti";
  if (!cuda) return 0;
  std::string d = dir_of(name);
  if (d.empty()) return 0;
  for (const std::string& x : *dirs)
    if (x == d) return 0;
  if (base.substr(0, 12) == "libcudart.so")
    dirs->insert(dirs->begin(), d);
  else
    dirs->push_back(d);
  return 0;
}

void append_tried(std::string* tried, std::string_view what) {
  if (!tried->empty()) tried->append("; ");
  tried->append(what);
}

}  // namespace

std::string CuptiApi::result_string(CUptiResult r) const {
  const char* s = nullptr;
  if (GetResultString && GetResultString(r, &s) == CUPTI_SUCCESS && s != nullptr) return s;
  return "CUPTI error " + std::to_string(static_cast<int>(r));
}

bool load_cupti(CuptiApi* api, std::string* tried) {
  tried->clear();
  // 1. Already in the process (torch's kineto links it).
  for (const char* so : kSonames)
    if (try_open(so, RTLD_NOW | RTLD_NOLOAD, api)) return true;
  append_tried(tried, "loaded");

  // 2. Next to the CUDA libraries the process uses, and the PyPI wheels'
  //    layout: site-packages/nvidia/{cuda_runtime,cuda_cupti}/lib (CUDA 12),
  //    site-packages/nvidia/cu13/lib (CUDA 13), torch/lib.
  std::vector<std::string> dirs;
  dl_iterate_phdr(collect_dir, &dirs);
  std::vector<std::string> cands;
  for (const std::string& d : dirs) {
    cands.push_back(d);
    cands.push_back(d + "/../../cuda_cupti/lib");
    cands.push_back(d + "/../../nvidia/cuda_cupti/lib");
    cands.push_back(d + "/../../nvidia/cu13/lib");
    cands.push_back(d + "/../../nvidia/cu12/lib");
    cands.push_back(d + "/../extras/CUPTI/lib64");
  }
  for (const std::string& d : cands)
    for (const char* so : kSonames) {
      std::string p = d + "/" + so;
      if (file_exists(p) && try_open(p, RTLD_NOW | RTLD_LOCAL, api)) return true;
    }
  if (!dirs.empty()) append_tried(tried, std::to_string(dirs.size()) + " CUDA lib dir(s)+wheels");

  // 3. $LTRACE_CUPTI_PATH: a file or a directory.
  if (const char* env = getenv("LTRACE_CUPTI_PATH"); env != nullptr && env[0] != 0) {
    std::string e = env;
    if (file_exists(e) && try_open(e, RTLD_NOW | RTLD_LOCAL, api)) return true;
    for (const char* so : kSonames) {
      std::string p = e + "/" + so;
      if (file_exists(p) && try_open(p, RTLD_NOW | RTLD_LOCAL, api)) return true;
    }
    append_tried(tried, "LTRACE_CUPTI_PATH=" + e);
  }

  // 4. The toolkit.
  for (const char* d : {"/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/lib64"})
    for (const char* so : kSonames) {
      std::string p = std::string(d) + "/" + so;
      if (file_exists(p) && try_open(p, RTLD_NOW | RTLD_LOCAL, api)) return true;
    }
  append_tried(tried, "/usr/local/cuda");

  // 5. The loader's search path.
  for (const char* so : kSonames)
    if (try_open(so, RTLD_NOW | RTLD_LOCAL, api)) return true;
  append_tried(tried, "ld path");
  return false;
}

bool cuda_driver_loaded() {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return false;
  dlclose(h);  // drops only the reference NOLOAD took
  return true;
}

}  // namespace ltb
