// Fixture workload ``copies_only``: a data-staging process that moves batches to the GPU
// and back and launches no kernel (CUDA API calls, copies and memsets, no kernel at all).
//
// What the other fixtures lack: a run whose capture traced CUDA and recorded API calls,
// copies and memsets but not one kernel, so that a question about kernels (top-kernels,
// kernel-exec, launch-overhead) has nothing to answer although CUDA's API was busy.
//
// Setup (NVTX push/pop "setup"): pinned and pageable host buffers, four device buffers,
// two non-blocking streams. Then BATCHES batches, each a push/pop range "batch" holding
//   upload    cudaMemcpyAsync HtoD of a pinned 4 MiB batch on stream s0, and a pageable
//             1 MiB cudaMemcpy HtoD (synchronous)
//   scrub     cudaMemsetAsync of the 4 MiB staging buffer on s1, after s0 (an event), and a
//             cudaMemset of a 1 MiB scratch buffer (synchronous)
//   shuffle   cudaMemcpyAsync DtoD of the batch, then of the side input, into the staging
//             buffer on s1
//   download  cudaMemcpyAsync DtoH of the staging buffer into pinned memory on s1, and a
//             cudaStreamSynchronize of s1
// Teardown frees everything ("teardown").
//
// Build: nvcc -O2 -arch=sm_90 -o nsys_copies_only nsys_copies_only.cu
// (NVTX v3 is header-only in the CUDA toolkit)

#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "cuda_helpers.h"

static const int BATCHES = 24;
static const size_t BIG = size_t(4) << 20;    // bytes of a batch
static const size_t SMALL = size_t(1) << 20;  // bytes of the pageable side input

int main(int argc, char **argv) {
  const int batches = argc > 1 ? std::atoi(argv[1]) : BATCHES;

  nvtxRangePushA("setup");
  std::vector<char> pageable(SMALL, 3);
  char *pinned_in, *pinned_out, *batch, *staging, *side, *scratch;
  CHECK(cudaMallocHost(&pinned_in, BIG));
  CHECK(cudaMallocHost(&pinned_out, BIG));
  for (size_t i = 0; i < BIG; ++i) pinned_in[i] = char(i);
  CHECK(cudaMalloc(&batch, BIG));
  CHECK(cudaMalloc(&staging, BIG));
  CHECK(cudaMalloc(&side, SMALL));
  CHECK(cudaMalloc(&scratch, SMALL));
  cudaStream_t s0, s1;
  cudaEvent_t uploaded;
  CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming));
  nvtxRangePop();

  for (int b = 0; b < batches; ++b) {
    nvtxRangePushA("batch");
    nvtxRangePushA("upload");
    CHECK(cudaMemcpyAsync(batch, pinned_in, BIG, cudaMemcpyHostToDevice, s0));
    CHECK(cudaEventRecord(uploaded, s0));
    CHECK(cudaMemcpy(side, pageable.data(), SMALL, cudaMemcpyHostToDevice));
    nvtxRangePop();
    nvtxRangePushA("scrub");
    CHECK(cudaStreamWaitEvent(s1, uploaded, 0));
    CHECK(cudaMemsetAsync(staging, 0, BIG, s1));
    CHECK(cudaMemset(scratch, b & 0xff, SMALL));
    nvtxRangePop();
    nvtxRangePushA("shuffle");
    CHECK(cudaMemcpyAsync(staging, batch, BIG, cudaMemcpyDeviceToDevice, s1));
    CHECK(cudaMemcpyAsync(staging, side, SMALL, cudaMemcpyDeviceToDevice, s1));
    nvtxRangePop();
    nvtxRangePushA("download");
    CHECK(cudaMemcpyAsync(pinned_out, staging, BIG, cudaMemcpyDeviceToHost, s1));
    CHECK(cudaStreamSynchronize(s1));
    nvtxRangePop();
    nvtxRangePop();
  }

  nvtxRangePushA("teardown");
  CHECK(cudaEventDestroy(uploaded));
  CHECK(cudaStreamDestroy(s0));
  CHECK(cudaStreamDestroy(s1));
  CHECK(cudaFree(batch));
  CHECK(cudaFree(staging));
  CHECK(cudaFree(side));
  CHECK(cudaFree(scratch));
  CHECK(cudaFreeHost(pinned_in));
  nvtxRangePop();
  // (the side input over the batch's first MiB, the batch after it)
  const bool ok = pinned_out[1] == 3 && pinned_out[SMALL + 1] == char(SMALL + 1);
  CHECK(cudaFreeHost(pinned_out));
  return ok ? 0 : 2;
}
