// Fixture workload ``registered_nvtx``: every NVTX name is a registered string.
//
// C++ programs using NVTX v3 often register their range names once
// (nvtxDomainRegisterStringA) and pass the handle in the event attributes
// (NVTX_MESSAGE_TYPE_REGISTERED). nsys then stores no inline text in NVTX_EVENTS: the
// name is in StringIds, reached through NVTX_EVENTS.textId.
//
// Per iteration (ITERS of them), in the named domain "tracekit" and in the default domain
// (NULL), push/pop ranges nested three deep:
//   default:  iteration > stage > {copy_in, compute, copy_out}
//   tracekit: request > layer > attention
// With --default-domain-only, no domain is created and the "tracekit" ranges, marks and
// strings go to the default domain too (then nested five deep). nsys stores a created
// domain's name inline (NVTX_EVENTS.text of its DomainCreate row), so only that variant
// has NVTX_EVENTS.text NULL in every row.
// plus a start/end range per iteration in each domain ("inflight" across two kernels
// and a copy, "pipeline" in tracekit), and a mark every iteration ("checkpoint" /
// "tick"). Kernels (scale, saxpy, reduce) and memcpys (HtoD, DtoH, DtoD) are launched
// inside the ranges.
//
// Build: nvcc -O2 -arch=sm_90 -o nsys_registered_nvtx nsys_registered_nvtx.cu -ldl
// (NVTX v3 is header-only in the CUDA toolkit)

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "cuda_helpers.h"

static const int ITERS = 200;
static const int N = 1 << 20;

__global__ void scale(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

__global__ void saxpy(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void reduce(const float *x, float *out, int n) {
  __shared__ float buf[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, buf[0]);
}

// Event attributes naming a registered string, with a colour (nsys keeps it).
static nvtxEventAttributes_t attr(nvtxStringHandle_t name, uint32_t argb) {
  nvtxEventAttributes_t a = {};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = argb;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = name;
  return a;
}

int main(int argc, char **argv) {
  const bool named = !(argc > 1 && std::strcmp(argv[1], "--default-domain-only") == 0);
  nvtxDomainHandle_t dom = named ? nvtxDomainCreateA("tracekit") : nullptr;
  // default domain (NULL): registered strings too
  nvtxStringHandle_t s_iteration = nvtxDomainRegisterStringA(nullptr, "iteration");
  nvtxStringHandle_t s_stage = nvtxDomainRegisterStringA(nullptr, "stage");
  nvtxStringHandle_t s_copy_in = nvtxDomainRegisterStringA(nullptr, "copy_in");
  nvtxStringHandle_t s_compute = nvtxDomainRegisterStringA(nullptr, "compute");
  nvtxStringHandle_t s_copy_out = nvtxDomainRegisterStringA(nullptr, "copy_out");
  nvtxStringHandle_t s_inflight = nvtxDomainRegisterStringA(nullptr, "inflight");
  nvtxStringHandle_t s_tick = nvtxDomainRegisterStringA(nullptr, "tick");
  // the named domain (or the default one with --default-domain-only)
  nvtxStringHandle_t s_request = nvtxDomainRegisterStringA(dom, "request");
  nvtxStringHandle_t s_layer = nvtxDomainRegisterStringA(dom, "layer");
  nvtxStringHandle_t s_attention = nvtxDomainRegisterStringA(dom, "attention");
  nvtxStringHandle_t s_pipeline = nvtxDomainRegisterStringA(dom, "pipeline");
  nvtxStringHandle_t s_checkpoint = nvtxDomainRegisterStringA(dom, "checkpoint");

  const int threads = 256, blocks = (N + threads - 1) / threads;
  std::vector<float> host(N, 1.0f);
  float *x, *y, *z, *sum;
  CHECK(cudaMalloc(&x, N * sizeof(float)));
  CHECK(cudaMalloc(&y, N * sizeof(float)));
  CHECK(cudaMalloc(&z, N * sizeof(float)));
  CHECK(cudaMalloc(&sum, sizeof(float)));
  float result = 0.0f;

  for (int it = 0; it < ITERS; ++it) {
    nvtxEventAttributes_t a;
    a = attr(s_iteration, 0xFF4E79A7u);
    nvtxDomainRangePushEx(nullptr, &a);  // default domain, depth 0
    a = attr(s_inflight, 0xFFF28E2Bu);
    nvtxRangeId_t inflight = nvtxDomainRangeStartEx(nullptr, &a);
    a = attr(s_stage, 0xFFE15759u);
    nvtxDomainRangePushEx(nullptr, &a);  // depth 1

    a = attr(s_copy_in, 0xFF76B7B2u);
    nvtxDomainRangePushEx(nullptr, &a);  // depth 2
    CHECK(cudaMemcpy(x, host.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    nvtxDomainRangePop(nullptr);

    a = attr(s_compute, 0xFF59A14Fu);
    nvtxDomainRangePushEx(nullptr, &a);
    scale<<<blocks, threads>>>(x, 1.0001f, N);
    CHECK(cudaMemcpy(y, x, N * sizeof(float), cudaMemcpyDeviceToDevice));
    nvtxDomainRangePop(nullptr);
    nvtxDomainRangeEnd(nullptr, inflight);

    // the named domain, nested three deep, inside the default domain's "stage"
    a = attr(s_pipeline, 0xFFEDC948u);
    nvtxRangeId_t pipeline = nvtxDomainRangeStartEx(dom, &a);
    a = attr(s_request, 0xFFB07AA1u);
    nvtxDomainRangePushEx(dom, &a);
    a = attr(s_layer, 0xFFFF9DA7u);
    nvtxDomainRangePushEx(dom, &a);
    a = attr(s_attention, 0xFF9C755Fu);
    nvtxDomainRangePushEx(dom, &a);
    saxpy<<<blocks, threads>>>(x, y, 0.5f, N);
    saxpy<<<blocks, threads>>>(y, z, 2.0f, N);
    nvtxDomainRangePop(dom);
    CHECK(cudaMemsetAsync(sum, 0, sizeof(float)));
    reduce<<<blocks, threads>>>(z, sum, N);
    nvtxDomainRangePop(dom);
    a = attr(s_checkpoint, 0xFFBAB0ACu);
    nvtxDomainMarkEx(dom, &a);
    nvtxDomainRangePop(dom);
    nvtxDomainRangeEnd(dom, pipeline);

    a = attr(s_copy_out, 0xFF76B7B2u);
    nvtxDomainRangePushEx(nullptr, &a);
    CHECK(cudaMemcpy(&result, sum, sizeof(float), cudaMemcpyDeviceToHost));
    nvtxDomainRangePop(nullptr);

    nvtxDomainRangePop(nullptr);  // stage
    a = attr(s_tick, 0xFF4E79A7u);
    nvtxDomainMarkEx(nullptr, &a);
    nvtxDomainRangePop(nullptr);  // iteration
  }
  CHECK(cudaDeviceSynchronize());
  std::printf("registered_nvtx done: %d iterations, %s, last sum %.1f\n", ITERS,
              named ? "domains tracekit and default" : "default domain only", result);
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  CHECK(cudaFree(z));
  CHECK(cudaFree(sum));
  if (named) nvtxDomainDestroy(dom);
  return 0;
}
