// CPU sampling under nsys: a host-bound inference-style loop whose host functions take planted
// shares of the CPU, for the CPU-sample queries (cpu-hotspots, cpu-stacks) and a diff of two
// captures of it.
//
// The main thread runs ITERS iterations, each an NVTX push/pop range `step` holding three:
//   prepare   prepare_batch(): 2 units of work in itself (one before and one after its call of
//             mix_row), and 2 more in mix_row()
//   pack      pack_inputs(): 1 unit (3 with --slow-pack: the planted regression)
//   launch    8 small kernels on one stream, then cudaStreamSynchronize
// A second thread, named "hasher", runs background_hash() (1 unit) then sleeps 2 ms, until the
// main loop ends. A unit is the same fixed count of dependent floating-point operations
// everywhere, so on a thread's samples the shares are planted: prepare_batch's own samples equal
// mix_row's, prepare_batch's inclusive samples are four times pack_inputs' (4:3 with --slow-pack),
// and every one of the hasher's samples in user code is in background_hash.
// The functions are not inlined, so that each sample names the function it hit.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "cuda_helpers.h"

static const int ITERS = 600;
static const long UNIT = 400000;  // dependent multiply-adds in a unit of work (about 1 ms)
static volatile float sink;       // what the work leaves, so that the compiler keeps it

__global__ void scale(float *x, int n, float k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * k + 1.f;
}

// `units` units of dependent multiply-adds, in the function that calls it (inlined on purpose:
// the samples name the caller)
static inline __attribute__((always_inline)) float work(float x, long units) {
  for (long i = 0; i < units * UNIT; ++i) x = x * 0.9999999f + 0.5f;
  return x;
}

__attribute__((noinline)) float mix_row(float x) { return work(x, 2); }

__attribute__((noinline)) float prepare_batch(float x) {
  x = work(x, 1);
  x = mix_row(x);   // (not its last call: a tail call would leave prepare_batch off mix_row's stack)
  return work(x, 1);
}

__attribute__((noinline)) float pack_inputs(float x, long units) { return work(x, units); }

__attribute__((noinline)) float background_hash(float x) { return work(x, 1); }

static std::atomic<bool> done(false);

static void *hasher(void *) {
  float x = 2.f;
  while (!done.load()) {
    x = background_hash(x);
    usleep(2000);
  }
  sink = x;
  return nullptr;
}

int main(int argc, char **argv) {
  long pack_units = (argc > 1 && std::strcmp(argv[1], "--slow-pack") == 0) ? 3 : 1;
  const int n = 1 << 16;
  float *d;
  cudaStream_t s;
  CHECK(cudaMalloc(&d, n * sizeof(float)));
  CHECK(cudaMemset(d, 0, n * sizeof(float)));
  CHECK(cudaStreamCreate(&s));
  pthread_t bg;
  pthread_create(&bg, nullptr, hasher, nullptr);
  pthread_setname_np(bg, "hasher");
  float x = 1.f;
  for (int it = 0; it < ITERS; ++it) {
    nvtxRangePushA("step");
    nvtxRangePushA("prepare");
    x = prepare_batch(x);
    nvtxRangePop();
    nvtxRangePushA("pack");
    x = pack_inputs(x, pack_units);
    nvtxRangePop();
    nvtxRangePushA("launch");
    for (int k = 0; k < 8; ++k) scale<<<n / 256, 256, 0, s>>>(d, n, 0.5f);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(s));
    nvtxRangePop();
    nvtxRangePop();
  }
  done.store(true);
  pthread_join(bg, nullptr);
  sink = x;
  CHECK(cudaFree(d));
  std::printf("%d iterations, pack %ld unit(s), %f\n", ITERS, pack_units, double(sink));
  return 0;
}
