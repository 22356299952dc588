// Unified Memory under nsys: what nsys_memops has of it once, here in the shapes a managed-memory
// program takes, for the twins of nsys's um_sum, um_total_sum and um_cpu_page_faults_sum.
//
// Each iteration (an NVTX push/pop range) runs these phases, each a range of its own:
//   gpu_read    a kernel reads the managed buffer `a` the host wrote (GPU read faults,
//               Host-to-Device migrations by page fault)
//   gpu_write   a kernel writes `b` (GPU write faults)
//   atomics     a kernel adds into 256 managed counters with atomics (GPU atomic faults), then
//               the host sums them (CPU faults on one page)
//   host_check  the host reads `b` (CPU faults in check_host, Device-to-Host migrations)
//   prefetch    `c` prefetched to the GPU, written there, prefetched back, read on the host (User
//               prefetch migrations both ways, no fault)
//   host_touch  the host writes `a` again (CPU faults in fill_host: `a`'s pages bounce between
//               CPU and GPU every iteration)
// The host functions are not inlined, so that each fault names the function that made it
// (nsys resolves the faulting instruction to a function; -g gives it the source line too).
// With --prefetch (the fix a diff should see), each buffer is prefetched to where it is used
// next (cudaMemPrefetchAsync) before the kernel or the host touches it: migrations by prefetch
// instead of by fault.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "cuda_helpers.h"

static const int ITERS = 4;
static const size_t N = size_t(1) << 22;  // floats per buffer (16 MiB)
static const int BINS = 256;

__global__ void read_sum(const float *a, float *out, size_t n) {
  float s = 0.f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) s += a[i];
  atomicAdd(out, s);
}

__global__ void write_scale(float *b, size_t n, float k) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    b[i] = float(i % 1009) * k;
}

__global__ void histogram(const float *a, unsigned *bins, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    atomicAdd(&bins[unsigned(a[i]) & (BINS - 1)], 1u);
}

__attribute__((noinline)) void fill_host(float *a, size_t n, int it) {
  for (size_t i = 0; i < n; ++i) a[i] = float((i + it) % 251);
}

__attribute__((noinline)) double check_host(const float *b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += b[i];
  return s;
}

__attribute__((noinline)) unsigned long long read_bins(const unsigned *bins) {
  unsigned long long s = 0;
  for (int i = 0; i < BINS; ++i) s += bins[i];
  return s;
}

int main(int argc, char **argv) {
  int device = 0, concurrent = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device));
  const bool ahead = argc > 1 && std::strcmp(argv[1], "--prefetch") == 0 && concurrent;
  float *a, *b, *c, *out;
  unsigned *bins;
  const size_t bytes = N * sizeof(float);
  CHECK(cudaMallocManaged(&a, bytes));
  CHECK(cudaMallocManaged(&b, bytes));
  CHECK(cudaMallocManaged(&c, bytes));
  CHECK(cudaMallocManaged(&out, sizeof(float)));
  CHECK(cudaMallocManaged(&bins, BINS * sizeof(unsigned)));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  nvtxRangePushA("setup");
  fill_host(a, N, 0);
  *out = 0.f;
  for (int i = 0; i < BINS; ++i) bins[i] = 0;
  nvtxRangePop();
  double total = 0;
  for (int it = 0; it < ITERS; ++it) {
    nvtxRangePushA("iteration");
    nvtxRangePushA("gpu_read");
    if (ahead) prefetch(a, bytes, false, device, s);
    read_sum<<<264, 256, 0, s>>>(a, out, N);
    CHECK(cudaStreamSynchronize(s));
    nvtxRangePop();
    nvtxRangePushA("gpu_write");
    if (ahead) prefetch(b, bytes, false, device, s);
    write_scale<<<264, 256, 0, s>>>(b, N, 0.5f + it);
    CHECK(cudaStreamSynchronize(s));
    nvtxRangePop();
    nvtxRangePushA("atomics");
    histogram<<<264, 256, 0, s>>>(a, bins, N);
    CHECK(cudaStreamSynchronize(s));
    total += double(read_bins(bins));
    nvtxRangePop();
    nvtxRangePushA("host_check");
    if (ahead) {
      prefetch(b, bytes, true, device, s);
      CHECK(cudaStreamSynchronize(s));
    }
    total += check_host(b, N);
    nvtxRangePop();
    nvtxRangePushA("prefetch");
    if (concurrent) prefetch(c, bytes, false, device, s);
    write_scale<<<264, 256, 0, s>>>(c, N, 2.0f);
    if (concurrent) prefetch(c, bytes, true, device, s);
    CHECK(cudaStreamSynchronize(s));
    total += check_host(c, N);
    nvtxRangePop();
    nvtxRangePushA("host_touch");
    if (ahead) {
      prefetch(a, bytes, true, device, s);
      CHECK(cudaStreamSynchronize(s));
    }
    fill_host(a, N, it + 1);
    nvtxRangePop();
    nvtxRangePop();
  }
  CHECK(cudaDeviceSynchronize());
  std::printf("prefetch %d, concurrent managed access %d, checksum %.1f, out %.1f\n", int(ahead), concurrent, total, double(*out));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
  CHECK(cudaFree(out));
  CHECK(cudaFree(bins));
  CHECK(cudaStreamDestroy(s));
  return 0;
}
