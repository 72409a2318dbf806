#include "user/model/cuda_sites.h"

#include "bpf/events.h"

namespace lt {

namespace {

constexpr CudaSite kSites[] = {
    // libcudart: what PyTorch's own kernels go through.
    {"cudaLaunchKernel", LT_API_LAUNCH, LT_LAUNCH_CUDART},
    {"cudaLaunchKernel_ptsz", LT_API_LAUNCH, LT_LAUNCH_CUDART},
    {"cudaLaunchKernelExC", LT_API_LAUNCH, LT_LAUNCH_CUDART},
    {"cudaLaunchKernelExC_ptsz", LT_API_LAUNCH, LT_LAUNCH_CUDART},
    {"cudaLaunchCooperativeKernel", LT_API_LAUNCH, LT_LAUNCH_CUDART},
    {"cudaGraphLaunch", LT_API_GRAPH_LAUNCH, LT_LAUNCH_CUDART},
    {"cudaMemcpy", LT_API_MEMCPY, LT_LAUNCH_CUDART},
    {"cudaMemcpyAsync", LT_API_MEMCPY, LT_LAUNCH_CUDART},
    {"cudaMemcpyAsync_ptsz", LT_API_MEMCPY, LT_LAUNCH_CUDART},
    {"cudaMemset", LT_API_MEMSET, LT_LAUNCH_CUDART},
    {"cudaMemsetAsync", LT_API_MEMSET, LT_LAUNCH_CUDART},
    {"cudaDeviceSynchronize", LT_API_SYNC, LT_LAUNCH_CUDART},
    {"cudaStreamSynchronize", LT_API_SYNC, LT_LAUNCH_CUDART},
    {"cudaStreamSynchronize_ptsz", LT_API_SYNC, LT_LAUNCH_CUDART},
    {"cudaEventSynchronize", LT_API_SYNC, LT_LAUNCH_CUDART},
    // libcuda: Triton, cuBLAS / cuDNN internals, anything on the driver API.
    {"cuLaunchKernel", LT_API_LAUNCH, LT_LAUNCH_LIBCUDA},
    {"cuLaunchKernel_ptsz", LT_API_LAUNCH, LT_LAUNCH_LIBCUDA},
    {"cuLaunchKernelEx", LT_API_LAUNCH, LT_LAUNCH_LIBCUDA},
    {"cuLaunchKernelEx_ptsz", LT_API_LAUNCH, LT_LAUNCH_LIBCUDA},
    {"cuLaunchCooperativeKernel", LT_API_LAUNCH, LT_LAUNCH_LIBCUDA},
    {"cuGraphLaunch", LT_API_GRAPH_LAUNCH, LT_LAUNCH_LIBCUDA},
    {"cuCtxSynchronize", LT_API_SYNC, LT_LAUNCH_LIBCUDA},
    {"cuStreamSynchronize", LT_API_SYNC, LT_LAUNCH_LIBCUDA},
    {"cuEventSynchronize", LT_API_SYNC, LT_LAUNCH_LIBCUDA},
};

}  // namespace

std::span<const CudaSite> cuda_sites() {
  return kSites;
}

const char* cuda_site_name(std::uint16_t source, std::uint32_t index) {
  if (index >= std::size(kSites) || kSites[index].source != source) return nullptr;
  return kSites[index].symbol;
}

}  // namespace lt
