// GPU memory under nsys (--cuda-memory-usage=true) from the allocators that are not cudaMalloc:
// what a PyTorch caching allocator with expandable segments, a CUDA graph or a custom pool
// does. Each is a phase in an NVTX push/pop range of its own, on the main thread:
//   vmm     the driver's virtual memory management (what expandable segments use): 256 MiB of
//           address space reserved, four 32 MiB chunks created and mapped into it, a kernel over
//           them, then the last chunk unmapped and released (the segment shrinks); the other three
//           stay until release
//   graph   a CUDA graph with two memory nodes: a stream capture of cudaMallocAsync (32 MiB and
//           8 MiB), a kernel over each and cudaFreeAsync, launched 3 times; the device's graph memory
//           trimmed, the graph launched once more (its memory allocated again), then destroyed and
//           the graph memory trimmed again
//   pool    an explicit stream-ordered pool (cudaMemPoolCreate, release threshold: never): four
//           cudaMallocFromPoolAsync of 16 MiB, freed, the pool trimmed and destroyed
//   pitch   cudaMallocPitch of 1000 rows of 1000 bytes (the rows padded to the pitch)
//   host    cudaHostAlloc (mapped, 4 MiB) and cudaHostRegister of 4 MiB of malloc'd memory
//   release every buffer still held freed
// At the end the program prints what it asked for, phase by phase (the ground truth).
//
// Build: nvcc -O2 -arch=sm_90 -o nsys_mem_odd nsys_mem_odd.cu -lcuda

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "cuda_helpers.h"

static const size_t MiB = 1 << 20;

__global__ void touch(char *p, size_t n) {
  size_t i = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4096;  // one byte a page
  if (i < n) p[i] = char(i >> 12);
}

static void run_touch(void *p, size_t bytes, cudaStream_t s) {
  const int threads = 256;
  size_t pages = (bytes + 4095) / 4096;
  touch<<<unsigned((pages + threads - 1) / threads), threads, 0, s>>>(static_cast<char *>(p), bytes);
  CHECK(cudaGetLastError());
}

int main() {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaFree(nullptr));  // the primary context, current for the driver calls below

  nvtxRangePushA("vmm");
  const size_t chunk = 32 * MiB, reserved = 256 * MiB;
  const int chunks = 4;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUdeviceptr base = 0;
  CHECK_CU(cuMemAddressReserve(&base, reserved, 0, 0, 0));
  CUmemGenericAllocationHandle handle[chunks];
  for (int k = 0; k < chunks; ++k) {
    CHECK_CU(cuMemCreate(&handle[k], chunk, &prop, 0));
    CHECK_CU(cuMemMap(base + k * chunk, chunk, 0, handle[k], 0));
  }
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK_CU(cuMemSetAccess(base, chunks * chunk, &access, 1));
  run_touch(reinterpret_cast<void *>(base), chunks * chunk, s);
  CHECK(cudaStreamSynchronize(s));
  CHECK_CU(cuMemUnmap(base + (chunks - 1) * chunk, chunk));  // the segment shrinks by its last chunk
  CHECK_CU(cuMemRelease(handle[chunks - 1]));
  nvtxRangePop();

  nvtxRangePushA("graph");
  const size_t graph_bytes[2] = {32 * MiB, 8 * MiB};
  const int launches = 3;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  void *gp[2] = {nullptr, nullptr};
  for (int k = 0; k < 2; ++k) {
    CHECK(cudaMallocAsync(&gp[k], graph_bytes[k], s));
    run_touch(gp[k], graph_bytes[k], s);
  }
  for (int k = 0; k < 2; ++k) CHECK(cudaFreeAsync(gp[k], s));
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int k = 0; k < launches; ++k) CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaDeviceGraphMemTrim(0));
  CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaDeviceGraphMemTrim(0));
  nvtxRangePop();

  nvtxRangePushA("pool");
  const size_t pool_bytes = 16 * MiB;
  const int pool_allocs = 4;
  cudaMemPoolProps pp = {};
  pp.allocType = cudaMemAllocationTypePinned;
  pp.location.type = cudaMemLocationTypeDevice;
  pp.location.id = 0;
  cudaMemPool_t pool;
  CHECK(cudaMemPoolCreate(&pool, &pp));
  uint64_t never = UINT64_MAX;
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &never));
  void *pa[pool_allocs];
  for (int k = 0; k < pool_allocs; ++k) {
    CHECK(cudaMallocFromPoolAsync(&pa[k], pool_bytes, pool, s));
    run_touch(pa[k], pool_bytes, s);
  }
  for (int k = 0; k < pool_allocs; ++k) CHECK(cudaFreeAsync(pa[k], s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaMemPoolTrimTo(pool, 0));
  CHECK(cudaMemPoolDestroy(pool));
  nvtxRangePop();

  nvtxRangePushA("pitch");
  void *pitched = nullptr;
  size_t pitch = 0;
  CHECK(cudaMallocPitch(&pitched, &pitch, 1000, 1000));
  run_touch(pitched, pitch * 1000, s);
  CHECK(cudaStreamSynchronize(s));
  nvtxRangePop();

  nvtxRangePushA("host");
  void *mapped = nullptr;
  CHECK(cudaHostAlloc(&mapped, 4 * MiB, cudaHostAllocMapped));
  void *registered = std::malloc(4 * MiB);
  std::memset(registered, 1, 4 * MiB);
  CHECK(cudaHostRegister(registered, 4 * MiB, cudaHostRegisterDefault));
  CHECK(cudaMemcpyAsync(pitched, registered, 4096, cudaMemcpyHostToDevice, s));
  CHECK(cudaStreamSynchronize(s));
  nvtxRangePop();

  nvtxRangePushA("release");
  for (int k = 0; k < chunks - 1; ++k) {
    CHECK_CU(cuMemUnmap(base + k * chunk, chunk));
    CHECK_CU(cuMemRelease(handle[k]));
  }
  CHECK_CU(cuMemAddressFree(base, reserved));
  CHECK(cudaFree(pitched));
  CHECK(cudaFreeHost(mapped));
  CHECK(cudaHostUnregister(registered));
  std::free(registered);
  nvtxRangePop();
  CHECK(cudaDeviceSynchronize());

  std::printf("vmm: %zu bytes of address space reserved; %d chunks of %zu bytes created and mapped "
              "(%zu bytes), the last released in vmm, the others in release\n",
              reserved, chunks, chunk, chunks * chunk);
  std::printf("graph: memory nodes of %zu and %zu bytes, the graph launched %d times, its memory trimmed, launched "
              "once more and trimmed again\n", graph_bytes[0], graph_bytes[1], launches);
  std::printf("pool: %d allocations of %zu bytes from a pool of its own (%zu bytes at its largest)\n",
              pool_allocs, pool_bytes, pool_allocs * pool_bytes);
  std::printf("pitch: 1000 rows of 1000 bytes, pitch %zu: %zu bytes\n", pitch, pitch * 1000);
  std::printf("host: cudaHostAlloc %zu bytes, cudaHostRegister %zu bytes\n", 4 * MiB, 4 * MiB);
  return 0;
}
