// What `parmon ctl pause` costs the program (issue 14): ns per parmon_region_enter while the
// session is paused, against the same call while recording and against one rdtsc, measured in
// this run, in this thread's CPU time (median of 31 runs of 1M calls), as core_bench measures the
// hot path. Paused means the recorder's word in the segment's ControlPage (shm_abi.h) is 0: the
// call is one load of that word (mapped in place of libparmon's enabled flag) and one branch.
// Also: how long after the recorder writes the word a thread in a loop sees it (the in-process
// part of "changes take effect within 100 ms").
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "recorder/drain.h"
#include "recorder/segment.h"

namespace {

std::string g_lib_dir = PARMON_BENCH_LIB_DIR;
std::unique_ptr<parmon::recorder::Segment> g_segment;
void (*g_enter)(uint32_t) = nullptr;
int (*g_is_active)() = nullptr;
std::atomic<bool> g_stop{false};

class NullSink : public parmon::recorder::DrainSink {
 public:
  void OnCompact(uint16_t, uint64_t, uint64_t) override {}
  void OnEvent(parmon::format::Event&) override {}
};

void DrainLoop() {
  parmon::recorder::RingDrainer drainer(*g_segment);
  NullSink sink;
  parmon::TickConversion identity;
  while (!g_stop.load(std::memory_order_relaxed)) {
    for (uint32_t i = 0; i < g_segment->header()->ring_count; ++i) {
      uint32_t st = g_segment->rings()[i].state.load(std::memory_order_acquire);
      if (st == parmon::shm::kClaimed || st == parmon::shm::kRetired)
        drainer.Drain(i, identity, sink);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void SetPaused(bool paused) {
  parmon::shm::Control(g_segment->header())->enabled.store(paused ? 0 : 1,
                                                            std::memory_order_relaxed);
}

double ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

template <typename F>
double MedianNs(F f, int runs, int n) {
  std::vector<double> v;
  for (int r = 0; r < runs; ++r) {
    double t0 = ThreadCpuNs();
    for (int i = 0; i < n; ++i)
      f();
    v.push_back((ThreadCpuNs() - t0) / n);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void BM_Rdtsc(benchmark::State& state) {
  for (auto _ : state)
    benchmark::DoNotOptimize(__rdtsc());
}
BENCHMARK(BM_Rdtsc);

void BM_EnterRecording(benchmark::State& state) {
  SetPaused(false);
  for (auto _ : state)
    g_enter(1);
}
BENCHMARK(BM_EnterRecording);

void BM_EnterPaused(benchmark::State& state) {
  SetPaused(true);
  for (auto _ : state)
    g_enter(1);
  SetPaused(false);
}
BENCHMARK(BM_EnterPaused);

}  // namespace

int main(int argc, char** argv) {
  parmon::recorder::SegmentOptions so;
  so.ring_bytes = 4 << 20;
  so.ring_count = 8;
  auto seg = parmon::recorder::Segment::Create(so);
  if (!seg.ok()) {
    fprintf(stderr, "%s\n", seg.status().message().c_str());
    return 1;
  }
  g_segment = std::move(*seg);
  std::string lib = g_lib_dir + "/libparmon.so";
  setenv(parmon::shm::kEnvSegment, g_segment->name().c_str(), 1);
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  unsetenv(parmon::shm::kEnvSegment);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", lib.c_str(), dlerror());
    return 1;
  }
  g_enter = reinterpret_cast<void (*)(uint32_t)>(dlsym(h, "parmon_region_enter"));
  g_is_active = reinterpret_cast<int (*)()>(dlsym(h, "parmon_is_active"));
  if (!g_enter || !g_is_active || !g_is_active()) {
    fprintf(stderr, "libparmon did not attach to the segment\n");
    return 1;
  }
  std::thread drain(DrainLoop);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();

  const int kRuns = 31, kCalls = 1 << 20;
  double rdtsc_ns = MedianNs([] { benchmark::DoNotOptimize(__rdtsc()); }, kRuns, kCalls);
  SetPaused(false);
  double rec_ns = MedianNs([] { g_enter(1); }, kRuns, kCalls);
  SetPaused(true);
  double paused_ns = MedianNs([] { g_enter(1); }, kRuns, kCalls);
  bool paused_seen = g_is_active() == 0;
  SetPaused(false);
  bool resumed_seen = g_is_active() == 1;

  // Visibility: a spinning thread notes when it sees the word change (wall clock).
  std::vector<double> seen_us;
  for (int i = 0; i < 21; ++i) {
    std::atomic<int64_t> t_seen{0};
    std::thread t([&] {
      while (g_is_active() != 0) {
      }
      t_seen = std::chrono::steady_clock::now().time_since_epoch().count();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    int64_t t0 = std::chrono::steady_clock::now().time_since_epoch().count();
    SetPaused(true);
    t.join();
    seen_us.push_back(static_cast<double>(t_seen - t0) / 1e3);
    SetPaused(false);
  }
  std::sort(seen_us.begin(), seen_us.end());
  g_stop = true;
  drain.join();

  printf("\n== parmon ctl pause: cost per event (%u CPUs) ==\n",
         std::thread::hardware_concurrency());
  printf("rdtsc_ns                 %8.2f\n", rdtsc_ns);
  printf("recording_ns             %8.2f   (parmon_region_enter, session recording)\n", rec_ns);
  printf("paused_ns                %8.2f   (the same call, session paused: a load and a branch; "
         "%.2fx rdtsc)\n",
         paused_ns, paused_ns / rdtsc_ns);
  printf("pause_visible_us         %8.2f   (median of 21: recorder's store to a spinning "
         "thread's load; max %.2f)\n",
         seen_us[seen_us.size() / 2], seen_us.back());
  printf("flag_follows_control     %s\n", paused_seen && resumed_seen ? "yes" : "NO");
  return paused_seen && resumed_seen ? 0 : 1;
}
