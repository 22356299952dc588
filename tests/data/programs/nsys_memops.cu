// Fixture workload ``memops``: the CUDA runtime's memory operations, small.
//
// What the other fixtures lack: managed memory (Unified Memory migrations HtoD and DtoH,
// from page faults and from cudaMemPrefetchAsync, and the page faults themselves), 2D
// copies of pitched memory, a copy to a __constant__ symbol, copies and memsets on three
// streams ordered by events, and stream-ordered allocation (cudaMallocAsync/cudaFreeAsync).
//
// ITERS iterations, each an NVTX push/pop range "iteration" holding one range per phase:
//   pageable  HtoD and DtoH cudaMemcpy from/to pageable host memory around a kernel
//   pinned    cudaMemcpyAsync HtoD/DtoH from/to pinned memory on stream s0
//   copy2d    cudaMemcpy2D HtoD into a pitched allocation, a kernel, cudaMemcpy2D DtoD and DtoH
//   d2d       cudaMemcpy DtoD and cudaMemcpyAsync DtoD on s1
//   streams   on s0, s1, s2: a memset and a pinned HtoD copy of a quarter each, a kernel;
//             s0 waits for s1 and s2 (events), adds the three, copies the sum back
//   pool      cudaMallocAsync on s1, memset, kernel, cudaFreeAsync
//   managed   the host writes a managed buffer, a kernel reads it (GPU faults: HtoD
//             migrations), the host reads it (CPU faults: DtoH migrations); then
//             cudaMemPrefetchAsync to the device, a kernel, prefetch back to the host,
//             and a cudaMemset on the managed buffer plus a copy from it to device memory
// Setup copies coefficients to a __constant__ symbol (cudaMemcpyToSymbol) once.
// Managed memory stays small (two 4 MiB buffers).
//
// Build: nvcc -O2 -arch=sm_90 -o nsys_memops nsys_memops.cu
// (NVTX v3 is header-only in the CUDA toolkit)

#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "cuda_helpers.h"

static const int ITERS = 6;
static const int N = 1 << 20;        // floats per buffer (4 MiB)
static const int W = 1000, H = 512;  // 2D copies: W floats a row (not a multiple of the pitch)

__constant__ float coef[16];

__global__ void scale(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + coef[i & 15];
}

__global__ void add3(const float *a, const float *b, const float *c, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i] + c[i];
}

__global__ void scale2d(float *p, size_t pitch, int w, int h, float a) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h) reinterpret_cast<float *>(reinterpret_cast<char *>(p) + y * pitch)[x] *= a;
}

int main() {
  int device = 0, concurrent_managed = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&concurrent_managed, cudaDevAttrConcurrentManagedAccess, device));
  const int threads = 256, blocks = (N + threads - 1) / threads, q = N / 4;
  const size_t bytes = N * sizeof(float);

  nvtxRangePushA("setup");
  std::vector<float> pageable(N, 1.0f);
  float *pinned, *x, *y, *z, *sum, *pitched, *pitched2, *m, *mout;
  size_t pitch = 0, pitch2 = 0;
  CHECK(cudaMallocHost(&pinned, bytes));
  for (int i = 0; i < N; ++i) pinned[i] = 0.5f;
  CHECK(cudaMalloc(&x, bytes));
  CHECK(cudaMalloc(&y, bytes));
  CHECK(cudaMalloc(&z, bytes));
  CHECK(cudaMalloc(&sum, bytes));
  CHECK(cudaMallocPitch(&pitched, &pitch, W * sizeof(float), H));
  CHECK(cudaMallocPitch(&pitched2, &pitch2, W * sizeof(float), H));
  CHECK(cudaMallocManaged(&m, bytes));
  CHECK(cudaMallocManaged(&mout, bytes));
  cudaStream_t s[3];
  cudaEvent_t done[3];
  for (int k = 0; k < 3; ++k) {
    CHECK(cudaStreamCreateWithFlags(&s[k], cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&done[k], cudaEventDisableTiming));
  }
  float host_coef[16];
  for (int i = 0; i < 16; ++i) host_coef[i] = 0.001f * i;
  CHECK(cudaMemcpyToSymbol(coef, host_coef, sizeof(host_coef)));
  nvtxRangePop();

  double check = 0.0;
  for (int it = 0; it < ITERS; ++it) {
    nvtxRangePushA("iteration");

    nvtxRangePushA("pageable");
    CHECK(cudaMemcpy(x, pageable.data(), bytes, cudaMemcpyHostToDevice));
    scale<<<blocks, threads>>>(x, 1.5f, N);
    CHECK(cudaMemcpy(pageable.data(), x, bytes, cudaMemcpyDeviceToHost));
    nvtxRangePop();

    nvtxRangePushA("pinned");
    CHECK(cudaMemcpyAsync(y, pinned, bytes, cudaMemcpyHostToDevice, s[0]));
    scale<<<blocks, threads, 0, s[0]>>>(y, 2.0f, N);
    CHECK(cudaMemcpyAsync(pinned, y, bytes, cudaMemcpyDeviceToHost, s[0]));
    CHECK(cudaStreamSynchronize(s[0]));
    nvtxRangePop();

    nvtxRangePushA("copy2d");
    CHECK(cudaMemcpy2D(pitched, pitch, pageable.data(), W * sizeof(float), W * sizeof(float), H,
                       cudaMemcpyHostToDevice));
    scale2d<<<dim3((W + threads - 1) / threads, H), threads>>>(pitched, pitch, W, H, 0.5f);
    CHECK(cudaMemcpy2D(pitched2, pitch2, pitched, pitch, W * sizeof(float), H,
                       cudaMemcpyDeviceToDevice));
    CHECK(cudaMemcpy2D(pinned, W * sizeof(float), pitched2, pitch2, W * sizeof(float), H,
                       cudaMemcpyDeviceToHost));
    nvtxRangePop();

    nvtxRangePushA("d2d");
    CHECK(cudaMemcpy(z, x, bytes, cudaMemcpyDeviceToDevice));
    CHECK(cudaMemcpyAsync(sum, y, bytes / 2, cudaMemcpyDeviceToDevice, s[1]));
    CHECK(cudaStreamSynchronize(s[1]));
    nvtxRangePop();

    nvtxRangePushA("streams");
    float *parts[3] = {x, y, z};
    for (int k = 0; k < 3; ++k) {
      CHECK(cudaMemsetAsync(parts[k] + q, 0, q * sizeof(float), s[k]));
      CHECK(cudaMemcpyAsync(parts[k], pinned + k * q, q * sizeof(float), cudaMemcpyHostToDevice, s[k]));
      scale<<<blocks, threads, 0, s[k]>>>(parts[k], 1.0f + k, N);
      CHECK(cudaEventRecord(done[k], s[k]));
    }
    CHECK(cudaStreamWaitEvent(s[0], done[1], 0));
    CHECK(cudaStreamWaitEvent(s[0], done[2], 0));
    add3<<<blocks, threads, 0, s[0]>>>(x, y, z, sum, N);
    CHECK(cudaMemcpyAsync(pinned, sum, bytes, cudaMemcpyDeviceToHost, s[0]));
    CHECK(cudaStreamSynchronize(s[0]));
    nvtxRangePop();

    nvtxRangePushA("pool");
    float *tmp = nullptr;
    CHECK(cudaMallocAsync(&tmp, bytes, s[1]));
    CHECK(cudaMemsetAsync(tmp, 0, bytes, s[1]));
    scale<<<blocks, threads, 0, s[1]>>>(tmp, 3.0f, N);
    CHECK(cudaMemcpyAsync(z, tmp, bytes, cudaMemcpyDeviceToDevice, s[1]));
    CHECK(cudaFreeAsync(tmp, s[1]));
    CHECK(cudaStreamSynchronize(s[1]));
    nvtxRangePop();

    nvtxRangePushA("managed");
    for (int i = 0; i < N; ++i) m[i] = 1.0f + (i & 7);  // host writes: pages move to the host
    scale<<<blocks, threads>>>(m, 2.0f, N);             // GPU faults: HtoD migrations
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < N; i += 1024) check += m[i];    // CPU faults: DtoH migrations
    if (concurrent_managed) {
      prefetch(m, bytes, false, device, s[2]);
      scale<<<blocks, threads, 0, s[2]>>>(m, 0.5f, N);
      prefetch(m, bytes, true, device, s[2]);
      CHECK(cudaStreamSynchronize(s[2]));
    }
    CHECK(cudaMemset(mout, 0, bytes));
    CHECK(cudaMemcpy(x, m, bytes, cudaMemcpyDefault));
    scale<<<blocks, threads>>>(mout, 1.0f, N);
    CHECK(cudaDeviceSynchronize());
    check += mout[N - 1];
    nvtxRangePop();

    nvtxRangePop();  // iteration
  }
  CHECK(cudaDeviceSynchronize());
  std::printf("memops done: %d iterations, concurrentManagedAccess %d, pitch %zu, check %.1f\n",
              ITERS, concurrent_managed, pitch, check);
  for (int k = 0; k < 3; ++k) {
    CHECK(cudaEventDestroy(done[k]));
    CHECK(cudaStreamDestroy(s[k]));
  }
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  CHECK(cudaFree(z));
  CHECK(cudaFree(sum));
  CHECK(cudaFree(pitched));
  CHECK(cudaFree(pitched2));
  CHECK(cudaFree(m));
  CHECK(cudaFree(mout));
  CHECK(cudaFreeHost(pinned));
  return 0;
}
