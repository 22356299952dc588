// Fixture workload ``cpu_only``: NVTX ranges and OS runtime calls, and no CUDA at all.
//
// A request scheduler's host path, profiled with `nsys profile -t nvtx,osrt`: the export
// has NVTX_EVENTS and OSRT_API but no CUPTI table. Two threads:
//   main ("scheduler"), BATCHES batches (40; argv[1] gives another number), each: push/pop
//     ranges nested three deep in the default domain, batch > schedule > read_input (a 1 MiB
//     file read in 64 KiB reads),
//     a mark "enqueued", then a start/end range "request" started here and ended by the
//     worker (a range that crosses threads), a condition-variable signal and a 2 ms sleep;
//   worker ("server"), waits on the condition variable (pthread_cond_wait), then, in a
//     created domain "loader", push/pop "decode" (a registered string) > "parse" (text; a
//     0.5 ms sleep and a read of /proc/self/status), and ends the batch's "request".
// At the end main starts a start/end range "drain" in the "loader" domain (a registered
// string too) that the worker ends when it leaves, and joins it.
//
// Build: cc -O2 -I<CUDA toolkit>/include -o nsys_cpu_only nsys_cpu_only.c -lpthread -ldl
// Run: nsys_cpu_only [BATCHES [PARSE_US [SMALL_READS]]] (tests/data/nsys_cpu_only and
//   nsys_cpu_only_again: 40; nsys_cpu_only_more: 60). PARSE_US (default 500) is parse's sleep;
//   SMALL_READS 1 makes read_input read in 4 KiB instead of 64 KiB: nsys_cpu_only_slow plants
//   host regressions with `40 1500 1` (parse 1 ms longer, read_input in 16x as many reads).
//   (Each read has a constant size: with _FORTIFY_SOURCE a variable one calls __read_chk,
//   which nsys -t osrt does not trace.)
// (NVTX v3 is header-only; nothing here links or calls CUDA)

#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

#define BATCHES 40
#define INPUT "/tmp/nsys_cpu_only.input"
#define INPUT_BYTES (1 << 20)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static nvtxRangeId_t *requests;  // one per batch: started by main, ended by the worker
static nvtxRangeId_t drain;
static int queued = 0, quit = 0;
static long parse_us = 500;
static int small_reads = 0;

static nvtxDomainHandle_t loader;
static nvtxStringHandle_t s_decode, s_drain;

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static long read_file(const char *path) {
  static char buf[1 << 16];
  static char small[1 << 12];
  long total = 0;
  ssize_t n;
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    perror(path);
    exit(1);
  }
  if (small_reads)
    while ((n = read(fd, small, sizeof small)) > 0) total += n;
  else
    while ((n = read(fd, buf, sizeof buf)) > 0) total += n;
  close(fd);
  return total;
}

static nvtxEventAttributes_t coloured(uint32_t argb) {
  nvtxEventAttributes_t a;
  memset(&a, 0, sizeof a);
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = argb;
  return a;
}

static nvtxEventAttributes_t registered(nvtxStringHandle_t name, uint32_t argb) {
  nvtxEventAttributes_t a = coloured(argb);
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = name;
  return a;
}

static nvtxEventAttributes_t ascii(const char *name, uint32_t argb) {
  nvtxEventAttributes_t a = coloured(argb);
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  return a;
}

static void *server(void *arg) {
  (void)arg;
  int served = 0;
  long bytes = 0;
  for (;;) {
    pthread_mutex_lock(&mu);
    while (served == queued && !quit) pthread_cond_wait(&cv, &mu);
    int stop = served == queued && quit;
    pthread_mutex_unlock(&mu);
    if (stop) break;

    nvtxEventAttributes_t a = registered(s_decode, 0xFF59A14Fu);
    nvtxDomainRangePushEx(loader, &a);
    a = ascii("parse", 0xFF76B7B2u);
    nvtxDomainRangePushEx(loader, &a);
    sleep_us(parse_us);
    bytes += read_file("/proc/self/status");
    nvtxDomainRangePop(loader);
    nvtxDomainRangePop(loader);
    nvtxRangeEnd(requests[served]);
    served++;
  }
  nvtxDomainRangeEnd(loader, drain);
  printf("server: %d requests, %ld bytes of status\n", served, bytes);
  return NULL;
}

int main(int argc, char **argv) {
  const int batches = argc > 1 ? atoi(argv[1]) : BATCHES;
  if (argc > 2) parse_us = atol(argv[2]);
  if (argc > 3) small_reads = atoi(argv[3]) != 0;
  const char *input = INPUT;
  requests = calloc(batches > 0 ? batches : 1, sizeof *requests);
  loader = nvtxDomainCreateA("loader");
  s_decode = nvtxDomainRegisterStringA(loader, "decode");
  s_drain = nvtxDomainRegisterStringA(loader, "drain");

  char *block = calloc(INPUT_BYTES, 1);
  FILE *fh = fopen(input, "wb");
  if (!requests || !block || !fh || fwrite(block, 1, INPUT_BYTES, fh) != INPUT_BYTES) {
    perror(input);
    return 1;
  }
  fclose(fh);
  free(block);

  pthread_t worker;
  pthread_create(&worker, NULL, server, NULL);
  pthread_setname_np(worker, "server");
  pthread_setname_np(pthread_self(), "scheduler");

  long bytes = 0;
  for (int it = 0; it < batches; ++it) {
    nvtxRangePushA("batch");
    nvtxRangePushA("schedule");
    nvtxRangePushA("read_input");
    bytes += read_file(input);
    nvtxRangePop();
    nvtxMarkA("enqueued");
    requests[it] = nvtxRangeStartA("request");
    pthread_mutex_lock(&mu);
    queued++;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    nvtxRangePop();
    sleep_us(2000);
    nvtxRangePop();
  }
  nvtxEventAttributes_t a = registered(s_drain, 0xFFE15759u);
  drain = nvtxDomainRangeStartEx(loader, &a);
  pthread_mutex_lock(&mu);
  quit = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  pthread_join(worker, NULL);
  unlink(input);
  printf("scheduler: %d batches, %ld bytes read\n", batches, bytes);
  return 0;
}
