// Fixture workload ``streams``: concurrent streams and the launch APIs the other fixtures lack.
//
// Built with --default-stream per-thread, so the runtime API calls on the default stream are
// their per-thread (_ptsz/_ptds) entry points, and each host thread has its own default stream.
// Two host threads (worker0, worker1) run ITERS iterations each, an NVTX push/pop range
// "iteration" holding one range per phase:
//   priority   a long kernel on a low-priority stream, short kernels on a high-priority one
//              launched after it (they overlap), an event recorded on each and timed
//   launch_ex  cudaLaunchKernelEx with a cluster dimension of 2 (a thread-block cluster)
//   coop       cudaLaunchCooperativeKernel
//   driver     the driver API: cuLaunchKernel (cudaGetFuncBySymbol), cuMemsetD32Async,
//              cuMemcpyDtoDAsync
//   batch      cudaMemcpyBatchAsync: three copies (pinned HtoD, DtoD, DtoH to pinned) in one call
//   pool       cudaMallocFromPoolAsync from a pool of its own, a kernel on the allocation,
//              cudaFreeAsync, and a host function (cudaLaunchHostFunc) after it
//   default    the thread's per-thread default stream: a memset, a kernel, a pageable DtoH copy
// One kernel lives in a namespace and is a template, so its demangled name has both.
//
// Build: nvcc -O2 -arch=sm_90 --default-stream per-thread -o nsys_streams nsys_streams.cu -lcuda
// (NVTX v3 is header-only in the CUDA toolkit)

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <sys/syscall.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "cuda_helpers.h"

constexpr int ITERS = 6;
constexpr int N = 1 << 20;  // floats per buffer (4 MiB)

__global__ void spin(float *x, int n, int rounds) {  // the long low-priority kernel
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  for (int r = 0; r < rounds; ++r) v = v * 0.999f + 0.001f;
  x[i] = v;
}

__global__ void axpy(float a, const float *x, float *y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] += a * x[i];
}

__global__ void cluster_sum(const float *x, float *out, int n) {  // launched with a cluster of 2
  __shared__ float part[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  part[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, part[0]);
}

__global__ void coop_scale(float *x, int n, float s) {  // launched cooperatively
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] *= s;
}

namespace fixture {
template <typename T, int UNROLL>
__global__ void scale_add(const T *x, T *y, T s, int n) {
  int base = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u)
    if (base + u < n) y[base + u] = s * x[base + u] + y[base + u];
}
}  // namespace fixture

static void host_note(void *arg) { static_cast<std::atomic<int> *>(arg)->fetch_add(1); }

struct Shared {
  cudaStream_t lo, hi;
  cudaMemPool_t pool;
  CUfunction axpy_fn;
  int coop_blocks;
  std::atomic<int> host_calls{0};
};

static void worker(Shared *sh, int id) {
  CHECK(cudaSetDevice(0));
  char name[32];
  std::snprintf(name, sizeof name, "worker%d", id);
  nvtxNameOsThreadA(static_cast<uint32_t>(syscall(SYS_gettid)), name);
  float *x, *y, *z, *sum, *h_pin, *h_pin_back;
  CHECK(cudaMalloc(&x, N * sizeof(float)));
  CHECK(cudaMalloc(&y, N * sizeof(float)));
  CHECK(cudaMalloc(&z, N * sizeof(float)));
  CHECK(cudaMalloc(&sum, sizeof(float)));
  CHECK(cudaMallocHost(&h_pin, N * sizeof(float)));
  CHECK(cudaMallocHost(&h_pin_back, N * sizeof(float)));
  std::vector<float> pageable(N / 4);
  for (int i = 0; i < N; ++i) h_pin[i] = 1.0f + (i % 7) * 0.25f;
  CHECK(cudaMemcpy(x, h_pin, N * sizeof(float), cudaMemcpyHostToDevice));  // default stream (ptds)
  CHECK(cudaMemset(y, 0, N * sizeof(float)));
  cudaEvent_t lo_done, hi_done, t0;
  CHECK(cudaEventCreate(&lo_done));
  CHECK(cudaEventCreate(&hi_done));
  CHECK(cudaEventCreate(&t0));
  float elapsed_total = 0.f;

  for (int it = 0; it < ITERS; ++it) {
    nvtxRangePushA("iteration");

    nvtxRangePushA("priority");
    CHECK(cudaEventRecord(t0, sh->lo));
    spin<<<N / 256, 256, 0, sh->lo>>>(z, N, 2000);
    CHECK(cudaGetLastError());
    for (int k = 0; k < 4; ++k) {
      axpy<<<264, 256, 0, sh->hi>>>(0.5f, x, y, N);
      CHECK(cudaGetLastError());
    }
    CHECK(cudaEventRecord(hi_done, sh->hi));
    CHECK(cudaEventRecord(lo_done, sh->lo));
    CHECK(cudaStreamWaitEvent(sh->hi, lo_done, 0));
    CHECK(cudaEventSynchronize(lo_done));
    float ms = 0.f;
    CHECK(cudaEventElapsedTime(&ms, t0, lo_done));
    elapsed_total += ms;
    (void)cudaEventQuery(hi_done);
    nvtxRangePop();

    nvtxRangePushA("launch_ex");
    {
      CHECK(cudaMemsetAsync(sum, 0, sizeof(float), sh->hi));
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(N / 256);
      cfg.blockDim = dim3(256);
      cfg.stream = sh->hi;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = 2;
      attr[0].val.clusterDim.y = 1;
      attr[0].val.clusterDim.z = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      CHECK(cudaLaunchKernelEx(&cfg, cluster_sum, (const float *)x, sum, N));
    }
    nvtxRangePop();

    nvtxRangePushA("coop");
    {
      float s = 1.0001f;
      int n = N;
      void *args[] = {&z, &n, &s};
      CHECK(cudaLaunchCooperativeKernel((void *)coop_scale, dim3(sh->coop_blocks), dim3(256), args, 0, sh->lo));
    }
    nvtxRangePop();

    nvtxRangePushA("driver");
    {
      float a = 0.25f;
      int n = N;
      void *args[] = {&a, &x, &z, &n};
      CHECK_CU(cuLaunchKernel(sh->axpy_fn, 528, 1, 1, 256, 1, 1, 0, (CUstream)sh->lo, args, nullptr));
      CHECK_CU(cuMemsetD32Async((CUdeviceptr)y, 0, N / 2, (CUstream)sh->lo));
      CHECK_CU(cuMemcpyDtoDAsync((CUdeviceptr)(y + N / 2), (CUdeviceptr)z, N / 2 * sizeof(float), (CUstream)sh->lo));
    }
    nvtxRangePop();

    nvtxRangePushA("batch");
    {
      void *dsts[3] = {y, z, h_pin_back};
      const void *srcs[3] = {h_pin, x, y};
      size_t sizes[3] = {N / 4 * sizeof(float), N / 4 * sizeof(float), N / 4 * sizeof(float)};
      cudaMemcpyAttributes attrs = {};
      attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      size_t idx = 0;
      CHECK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 3, &attrs, &idx, 1, sh->hi));
    }
    nvtxRangePop();

    nvtxRangePushA("pool");
    {
      float *tmp = nullptr;
      CHECK(cudaMallocFromPoolAsync(reinterpret_cast<void **>(&tmp), N * sizeof(float), sh->pool, sh->hi));
      CHECK(cudaMemsetAsync(tmp, 0, N * sizeof(float), sh->hi));
      fixture::scale_add<float, 4><<<N / 4 / 256, 256, 0, sh->hi>>>(x, tmp, 2.0f, N);
      CHECK(cudaGetLastError());
      CHECK(cudaMemcpyAsync(z, tmp, N * sizeof(float), cudaMemcpyDeviceToDevice, sh->hi));
      CHECK(cudaFreeAsync(tmp, sh->hi));
      CHECK(cudaLaunchHostFunc(sh->hi, host_note, &sh->host_calls));
    }
    nvtxRangePop();

    nvtxRangePushA("default");
    {
      CHECK(cudaStreamSynchronize(sh->hi));
      CHECK(cudaStreamSynchronize(sh->lo));
      CHECK(cudaMemsetAsync(y, 0, N / 4 * sizeof(float), 0));  // the thread's default stream
      fixture::scale_add<double, 2><<<N / 2 / 2 / 256, 256>>>((const double *)x, (double *)y, 0.5, N / 2);
      CHECK(cudaGetLastError());
      CHECK(cudaMemcpy(pageable.data(), y, N / 4 * sizeof(float), cudaMemcpyDeviceToHost));
    }
    nvtxRangePop();

    nvtxRangePop();  // iteration
  }
  CHECK(cudaDeviceSynchronize());
  std::printf("worker%d: %.3f ms of low-priority work, first value %.3f\n", id, elapsed_total, pageable[0]);
  CHECK(cudaEventDestroy(lo_done));
  CHECK(cudaEventDestroy(hi_done));
  CHECK(cudaEventDestroy(t0));
  CHECK(cudaFreeHost(h_pin));
  CHECK(cudaFreeHost(h_pin_back));
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  CHECK(cudaFree(z));
  CHECK(cudaFree(sum));
}

int main() {
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(nullptr));  // create the context before the threads start
  Shared sh;
  int least, greatest;
  CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CHECK(cudaStreamCreateWithPriority(&sh.lo, cudaStreamNonBlocking, least));
  CHECK(cudaStreamCreateWithPriority(&sh.hi, cudaStreamNonBlocking, greatest));
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  CHECK(cudaMemPoolCreate(&sh.pool, &props));
  unsigned long long keep = 64ull << 20;
  CHECK(cudaMemPoolSetAttribute(sh.pool, cudaMemPoolAttrReleaseThreshold, &keep));
  cudaFunction_t fn;
  CHECK(cudaGetFuncBySymbol(&fn, (const void *)axpy));
  sh.axpy_fn = (CUfunction)fn;
  int per_sm = 0, sms = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, coop_scale, 256, 0));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  sh.coop_blocks = per_sm * sms;

  nvtxRangePushA("streams");
  std::thread t0(worker, &sh, 0), t1(worker, &sh, 1);
  t0.join();
  t1.join();
  nvtxRangePop();

  CHECK(cudaMemPoolTrimTo(sh.pool, 0));
  CHECK(cudaMemPoolDestroy(sh.pool));
  CHECK(cudaStreamDestroy(sh.lo));
  CHECK(cudaStreamDestroy(sh.hi));
  std::printf("streams done: %d host functions ran\n", sh.host_calls.load());
  return 0;
}
