// Fixture workload for the Nsight Compute report kinds other than kernel replay of whole
// sections: application replay, range and app-range replay, --metrics only, and whole
// CUDA graphs (--graph-profiling graph). Three small kernels, each known exactly:
//   saxpy      y = a*x + y over N floats (fp32: one FFMA per element), grid (N/256), block 256
//   dfma_loop  ITERS dependent FP64 FMAs per element of D doubles, grid (D/128), block 128
//   block_sum  the sum of each block's 512 floats through shared memory (static, 2 KiB),
//              grid (N/512), block 512, one atomicAdd per block
//
// Modes (argv[1]):
//   kernels  the three kernels once, each in NVTX push/pop ranges var/<kernel>
//   range    two ranges marked by cudaProfilerStart/Stop, each inside an NVTX push/pop
//            range of its own (step0: saxpy + block_sum; step1: dfma_loop + saxpy)
//   nvtx     the same work, the ranges marked only by NVTX push/pop (region_a, region_b)
//   graph    one saxpy launched on its own (a kernel), then a CUDA graph of saxpy ->
//            block_sum -> dfma_loop (stream capture) launched twice, inside NVTX "graph"
// Outside the profiled part each mode first runs every kernel once (module load; in the
// range modes outside any range), and checks its results on the host at the end.
//
// Build: nvcc -O2 -arch=sm_90 -lineinfo -o ncu_variants ncu_variants.cu
// (NVTX v3 is header-only in the CUDA toolkit)

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "cuda_helpers.h"
#define LAUNCHED() CHECK(cudaGetLastError())

constexpr int N = 1 << 22;        // floats for saxpy and block_sum (16 MiB)
constexpr int D = 1 << 16;        // doubles for dfma_loop
constexpr int ITERS = 256;        // FMAs per double
constexpr int SUM_BLOCK = 512;

__global__ void saxpy(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void dfma_loop(int n, double* __restrict__ d, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double v = d[i];
  for (int k = 0; k < iters; ++k) v = fma(v, 0.999, 0.001);
  d[i] = v;
}

__global__ void block_sum(const float* __restrict__ x, float* __restrict__ out, int n) {
  __shared__ float s[SUM_BLOCK];
  int i = blockIdx.x * SUM_BLOCK + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int stride = SUM_BLOCK / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, s[0]);
}

struct Bufs {
  float *x, *y, *sum;
  double* d;
};

static void run_saxpy(const Bufs& b, cudaStream_t s) {
  saxpy<<<N / 256, 256, 0, s>>>(N, 2.0f, b.x, b.y);
  LAUNCHED();
}
static void run_dfma(const Bufs& b, cudaStream_t s) {
  dfma_loop<<<D / 128, 128, 0, s>>>(D, b.d, ITERS);
  LAUNCHED();
}
static void run_sum(const Bufs& b, cudaStream_t s) {
  block_sum<<<N / SUM_BLOCK, SUM_BLOCK, 0, s>>>(b.x, b.sum, N);
  LAUNCHED();
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "kernels";
  Bufs b;
  CHECK(cudaMalloc(&b.x, N * sizeof(float)));
  CHECK(cudaMalloc(&b.y, N * sizeof(float)));
  CHECK(cudaMalloc(&b.sum, sizeof(float)));
  CHECK(cudaMalloc(&b.d, D * sizeof(double)));
  std::vector<float> hx(N), hy(N);
  for (int i = 0; i < N; ++i) {  // small integers: every sum below is exact in float
    hx[i] = static_cast<float>(i % 7 - 3);
    hy[i] = static_cast<float>(i % 5);
  }
  std::vector<double> hd(D, 0.5);
  CHECK(cudaMemcpy(b.x, hx.data(), N * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b.y, hy.data(), N * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b.d, hd.data(), D * sizeof(double), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(b.sum, 0, sizeof(float)));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  int saxpys = 0, sums = 0, dfmas = 0;  // launches, for the host check
  bool in_range = !std::strcmp(mode, "range") || !std::strcmp(mode, "nvtx");
  if (in_range || !std::strcmp(mode, "graph")) {  // warm-up, outside every range
    run_saxpy(b, s); run_sum(b, s); run_dfma(b, s);
    saxpys++; sums++; dfmas++;
    CHECK(cudaStreamSynchronize(s));
  }

  if (!std::strcmp(mode, "kernels")) {
    nvtxRangePushA("var");
    nvtxRangePushA("saxpy"); run_saxpy(b, s); nvtxRangePop();
    nvtxRangePushA("dfma_loop"); run_dfma(b, s); nvtxRangePop();
    nvtxRangePushA("block_sum"); run_sum(b, s); nvtxRangePop();
    nvtxRangePop();
    saxpys++; sums++; dfmas++;
  } else if (!std::strcmp(mode, "range")) {
    nvtxRangePushA("step0");
    CHECK(cudaProfilerStart());
    run_saxpy(b, s); run_sum(b, s);
    CHECK(cudaProfilerStop());
    nvtxRangePop();
    CHECK(cudaStreamSynchronize(s));
    nvtxRangePushA("step1");
    CHECK(cudaProfilerStart());
    run_dfma(b, s); run_saxpy(b, s);
    CHECK(cudaProfilerStop());
    nvtxRangePop();
    saxpys += 2; sums++; dfmas++;
  } else if (!std::strcmp(mode, "nvtx")) {
    nvtxRangePushA("region_a"); run_saxpy(b, s); run_sum(b, s); nvtxRangePop();
    CHECK(cudaStreamSynchronize(s));
    nvtxRangePushA("region_b"); run_dfma(b, s); run_saxpy(b, s); nvtxRangePop();
    saxpys += 2; sums++; dfmas++;
  } else if (!std::strcmp(mode, "graph")) {
    nvtxRangePushA("graph");
    nvtxRangePushA("single"); run_saxpy(b, s); nvtxRangePop();
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    run_saxpy(b, s); run_sum(b, s); run_dfma(b, s);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    nvtxRangePushA("replay");
    CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaGraphLaunch(ge, s));
    nvtxRangePop();
    nvtxRangePop();
    saxpys += 3; sums += 2; dfmas += 2;
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
  } else {
    std::fprintf(stderr, "unknown mode %s (kernels, range, nvtx, graph)\n", mode);
    return 2;
  }
  CHECK(cudaStreamSynchronize(s));

  // host check: y = y0 + 2*saxpys*x; sum = sums * sum(x); d after dfmas*ITERS FMAs
  std::vector<float> ry(N);
  float rsum;
  std::vector<double> rd(D);
  CHECK(cudaMemcpy(ry.data(), b.y, N * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&rsum, b.sum, sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(rd.data(), b.d, D * sizeof(double), cudaMemcpyDeviceToHost));
  double sx = 0;
  for (int i = 0; i < N; ++i) sx += hx[i];
  int bad = 0;
  for (int i = 0; i < N; ++i) bad += ry[i] != hy[i] + 2.0f * saxpys * hx[i];
  double v = 0.5;
  for (int k = 0; k < dfmas * ITERS; ++k) v = std::fma(v, 0.999, 0.001);
  for (int i = 0; i < D; ++i) bad += std::fabs(rd[i] - v) > 1e-12;
  bad += rsum != static_cast<float>(sums * sx);
  std::printf("ncu_variants %s: saxpy x%d, block_sum x%d, dfma_loop x%d, %s\n", mode, saxpys, sums, dfmas,
              bad ? "WRONG" : "checked");
  return bad ? 1 : 0;
}
