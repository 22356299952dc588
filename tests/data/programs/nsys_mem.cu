// GPU memory usage under nsys (--cuda-memory-usage=true): an inference-style program whose
// allocations have planted sizes and lifetimes, for the GPU memory queries and a diff of two
// captures of it.
//
// NVTX push/pop ranges on the main thread:
//   load      the weights: cudaMalloc of 64 MiB, 32 MiB and 16 MiB + 1000 B (an odd size: does
//             nsys record the bytes asked for?); a pinned staging buffer (cudaMallocHost, 8 MiB)
//             and a managed one (cudaMallocManaged, 4 MiB)
//   step      ITERS times, holding
//     forward   activations (cudaMalloc, 24 MiB) and a workspace from the stream-ordered pool
//               (cudaMallocAsync, 48 MiB; 96 MiB with --big-workspace), a kernel over each, the
//               workspace freed (cudaFreeAsync), the stream synchronized, the activations freed;
//               with --leak also a 2 MiB scratch buffer that is never freed (the planted leak)
//     cache     one 4 MiB block of a growing KV cache (cudaMalloc), kept until unload
//   unload    every buffer freed but the leaked ones; the pool trimmed
// A __device__ table (256 KiB) is the module's static device memory.
// At the end the program prints what it asked for (the ground truth of the queries): each
// kind's allocations and bytes, the device memory (cudaMalloc and cudaMallocAsync) live at its
// peak, in the range it peaked in, and what it left allocated.
//
// Build: nvcc -O2 -arch=sm_90 -o nsys_mem nsys_mem.cu

#include <cstdio>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "cuda_helpers.h"

static const int ITERS = 8;
static const size_t MiB = 1 << 20;

__device__ float table[1 << 16];  // 256 KiB of static device memory

__global__ void touch(char *p, size_t n, const float *t) {
  size_t i = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4096;  // one byte a page
  if (i < n) p[i] = char(i) + char(t[i & 0xffff]);
}

// the program's own accounting of device memory (cudaMalloc and cudaMallocAsync)
static size_t live = 0, peak = 0, allocations = 0, allocated = 0;
static const char *peak_range = "";

static void *device_alloc(size_t bytes, const char *range, cudaStream_t s = nullptr, bool pool = false) {
  void *p = nullptr;
  if (pool) CHECK(cudaMallocAsync(&p, bytes, s));
  else CHECK(cudaMalloc(&p, bytes));
  live += bytes, allocated += bytes, ++allocations;
  if (live > peak) peak = live, peak_range = range;
  return p;
}

static void device_free(void *p, size_t bytes, cudaStream_t s = nullptr, bool pool = false) {
  if (pool) CHECK(cudaFreeAsync(p, s));
  else CHECK(cudaFree(p));
  live -= bytes;
}

static void run_touch(void *p, size_t bytes, cudaStream_t s) {
  const int threads = 256;
  size_t pages = (bytes + 4095) / 4096;
  float *t = nullptr;
  CHECK(cudaGetSymbolAddress(reinterpret_cast<void **>(&t), table));
  touch<<<unsigned((pages + threads - 1) / threads), threads, 0, s>>>(static_cast<char *>(p), bytes, t);
  CHECK(cudaGetLastError());
}

int main(int argc, char **argv) {
  bool leak = false, big = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--leak")) leak = true;
    else if (!std::strcmp(argv[i], "--big-workspace")) big = true;
    else { std::fprintf(stderr, "usage: %s [--leak] [--big-workspace]\n", argv[0]); return 2; }
  }
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaFree(nullptr));  // the context (and the module's static memory) before the first range

  nvtxRangePushA("load");
  const size_t wsizes[3] = {64 * MiB, 32 * MiB, 16 * MiB + 1000};
  void *w[3];
  for (int k = 0; k < 3; ++k) w[k] = device_alloc(wsizes[k], "load");
  void *pinned = nullptr, *managed = nullptr;
  CHECK(cudaMallocHost(&pinned, 8 * MiB));
  CHECK(cudaMallocManaged(&managed, 4 * MiB));
  std::memset(pinned, 1, 8 * MiB);
  CHECK(cudaMemcpy(w[0], pinned, 8 * MiB, cudaMemcpyHostToDevice));
  nvtxRangePop();

  const size_t act_bytes = 24 * MiB, ws_bytes = (big ? 96 : 48) * MiB, scratch_bytes = 2 * MiB, kv_bytes = 4 * MiB;
  std::vector<void *> kv;
  int leaked = 0;
  for (int it = 0; it < ITERS; ++it) {
    nvtxRangePushA("step");
    nvtxRangePushA("forward");
    void *act = device_alloc(act_bytes, "forward");
    void *ws = device_alloc(ws_bytes, "forward", s, true);
    if (leak) {
      void *scratch = device_alloc(scratch_bytes, "forward");
      run_touch(scratch, scratch_bytes, s);
      ++leaked;
    }
    run_touch(act, act_bytes, s);
    run_touch(ws, ws_bytes, s);
    device_free(ws, ws_bytes, s, true);
    CHECK(cudaStreamSynchronize(s));
    device_free(act, act_bytes);
    nvtxRangePop();
    nvtxRangePushA("cache");
    kv.push_back(device_alloc(kv_bytes, "cache"));
    run_touch(kv.back(), kv_bytes, s);
    CHECK(cudaStreamSynchronize(s));
    nvtxRangePop();
    nvtxRangePop();
  }

  nvtxRangePushA("unload");
  for (void *p : kv) device_free(p, kv_bytes);
  for (int k = 0; k < 3; ++k) device_free(w[k], wsizes[k]);
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaFree(managed));
  cudaMemPool_t pool;
  CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  CHECK(cudaMemPoolTrimTo(pool, 0));
  nvtxRangePop();
  CHECK(cudaDeviceSynchronize());

  std::printf("device: %zu allocations, %zu bytes (cudaMalloc %zu, cudaMallocAsync %d)\n", allocations, allocated,
              allocations - ITERS, ITERS);
  std::printf("device peak: %zu bytes live, in %s\n", peak, peak_range);
  std::printf("device live at exit: %zu bytes (%d leaked scratch buffers)\n", live, leaked);
  std::printf("pinned: 1 allocation, %zu bytes; managed: 1 allocation, %zu bytes; static: table, %zu bytes\n",
              8 * MiB, 4 * MiB, sizeof(float) * (1 << 16));
  return 0;
}
