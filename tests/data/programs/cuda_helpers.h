// What the CUDA fixture programs share: CHECK, the check of a CUDA runtime call (on an error,
// the file, the line and CUDA's message on stderr, and exit status 1), CHECK_CU the same of a
// driver API call (link with -lcuda where it is used), and prefetch, a managed buffer's
// cudaMemPrefetchAsync to the host or a device.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda.h>
#include <cuda_runtime.h>

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t err_ = (call);                                                       \
    if (err_ != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

#define CHECK_CU(call)                                                                     \
  do {                                                                                     \
    CUresult res_ = (call);                                                                \
    if (res_ != CUDA_SUCCESS) {                                                            \
      const char *msg_ = nullptr;                                                          \
      cuGetErrorString(res_, &msg_);                                                       \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, msg_ ? msg_ : "?");           \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

// CUDA 13 takes a cudaMemLocation; earlier toolkits a device number.
static inline void prefetch(const void *p, size_t bytes, bool to_host, int device, cudaStream_t s) {
#if CUDART_VERSION >= 13000
  cudaMemLocation loc = {};
  loc.type = to_host ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
  loc.id = to_host ? 0 : device;
  CHECK(cudaMemPrefetchAsync(p, bytes, loc, 0, s));
#else
  CHECK(cudaMemPrefetchAsync(p, bytes, to_host ? cudaCpuDeviceId : device, s));
#endif
}
