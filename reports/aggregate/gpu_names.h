// Names the GPU records refer to by id (kernels, CUDA APIs, NVTX domains and
// strings), assembled from GPU_NAME chunks, per process.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "bpf/events.h"

namespace lt {

class GpuNameTable {
 public:
  void add(std::uint32_t pid, const lt_gpu_name& chunk);
  // nullptr until the name's first chunk is in.
  const std::string* find(std::uint32_t pid, std::uint16_t kind, std::uint32_t id) const;
  // The name, or `fallback` + id.
  std::string get(std::uint32_t pid, std::uint16_t kind, std::uint32_t id, const char* fallback) const;

 private:
  std::map<std::tuple<std::uint32_t, std::uint16_t, std::uint32_t>, std::string> names_;
};

}  // namespace lt
