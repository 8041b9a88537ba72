// What the communication wrappers (issue 5) add to the calls they interpose, measured in one
// run and printed next to the uninstrumented cost measured in the same run:
//   mpi_call_*         MPI calls on one rank (MPI_Comm_rank; MPI_Sendrecv of 0 bytes to itself):
//                      PMPI called directly, the wrapper while recording is paused, recording.
//                      The calling thread's own cost: the recorder runs on the other CPU.
//   mpi_pingpong       0-byte ping-pong between ranks 0 and 1, paused vs recording; the median
//                      round trip (scheduling noise on a shared machine hits the mean, not the
//                      median), and the added cost per MPI call = added round trip / 2 (a round
//                      trip has 4 calls, each partly overlapped by the message in flight).
//                      With two busy-polling ranks on a 2-CPU machine the recorder competes for
//                      a CPU with them, so this figure includes its draining.
//   posix_write_read   write + read of 1 byte on a pipe (2 wrapped calls): libc directly, paused,
//                      recording; added per call.
//   mutex_uncontended  pthread_mutex_lock + unlock of a free mutex: direct, paused, recording.
// Run it plainly: it runs itself twice under `parmon record -- mpirun -np 2`, once with
// --mode trace and once with --mode periodic (the MPI figures differ; POSIX ones do not), and
// each run prints its table. Each figure is the best of several alternating blocks of
// paused/recording calls, so slow phases of a busy machine hit both sides alike.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "parmon/parmon.h"

namespace {

constexpr char kChildEnv[] = "PARMON_COMM_BENCH_CHILD";
int g_rank = 0, g_size = 1;

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ns per call of one block of n calls. Of several blocks the best is kept: on a shared machine a
// block that was preempted or migrated only loses.
template <typename F>
double BestNs(F&& body, int n) {
  uint64_t t0 = NowNs();
  body(n);
  return static_cast<double>(NowNs() - t0) / n;
}

struct Three {
  double direct = 1e30, paused = 1e30, recorded = 1e30;
};

// Alternating blocks: direct (the real function), paused wrapper, recording wrapper.
template <typename Direct, typename Wrapped>
Three Compare(Direct&& direct, Wrapped&& wrapped, int n, int blocks) {
  Three t;
  for (int b = 0; b < blocks; ++b) {
    parmon_pause();
    t.direct = std::min(t.direct, BestNs(direct, n));
    t.paused = std::min(t.paused, BestNs(wrapped, n));
    parmon_resume();
    t.recorded = std::min(t.recorded, BestNs(wrapped, n));
  }
  return t;
}

// Figures per call for the summary printed after the benchmarks.
struct Figure {
  std::string what;
  double direct, paused_added, recorded_added;
};
std::vector<Figure> g_figures;

void Report(benchmark::State& state, const char* what, const Three& t, double calls_per_op) {
  g_figures.push_back({what, t.direct / calls_per_op, (t.paused - t.direct) / calls_per_op,
                       (t.recorded - t.direct) / calls_per_op});
  state.counters["direct_ns"] = t.direct / calls_per_op;
  state.counters["paused_added_ns"] = (t.paused - t.direct) / calls_per_op;
  state.counters["recorded_added_ns"] = (t.recorded - t.direct) / calls_per_op;
}

// ---- MPI on one rank -----------------------------------------------------------------------
void BM_MpiCommRank(benchmark::State& state) {
  for (auto _ : state) {
    int r;
    Three t = Compare(
        [&](int n) {
          for (int i = 0; i < n; ++i)
            PMPI_Comm_rank(MPI_COMM_WORLD, &r);
        },
        [&](int n) {
          for (int i = 0; i < n; ++i)
            MPI_Comm_rank(MPI_COMM_WORLD, &r);
        },
        50000, 11);
    Report(state, "MPI_Comm_rank", t, 1);
  }
}

void BM_MpiSendrecvSelf(benchmark::State& state) {
  char a = 0, b = 0;
  for (auto _ : state) {
    Three t = Compare(
        [&](int n) {
          for (int i = 0; i < n; ++i)
            PMPI_Sendrecv(&a, 0, MPI_BYTE, g_rank, 0, &b, 0, MPI_BYTE, g_rank, 0, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE);
        },
        [&](int n) {
          for (int i = 0; i < n; ++i)
            MPI_Sendrecv(&a, 0, MPI_BYTE, g_rank, 0, &b, 0, MPI_BYTE, g_rank, 0, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
        },
        20000, 11);
    Report(state, "MPI_Sendrecv, 0 bytes to itself", t, 1);
  }
}

// ---- MPI ping-pong between ranks 0 and 1 -----------------------------------------------------
enum Command { kDone = 0, kPingPong = 1 };
constexpr int kRoundTrips = 20000, kPingPongBlocks = 5, kCommandTag = 99;

// Median round trip of one block; rank 1 mirrors rank 0.
double PingPongBlock() {
  char b = 0;
  std::vector<uint32_t> rt(kRoundTrips);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < kRoundTrips; ++i) {
    uint64_t t0 = NowNs();
    if (g_rank == 0) {
      MPI_Send(&b, 0, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(&b, 0, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&b, 0, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&b, 0, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
    rt[i] = static_cast<uint32_t>(std::min<uint64_t>(NowNs() - t0, UINT32_MAX));
  }
  std::nth_element(rt.begin(), rt.begin() + kRoundTrips / 2, rt.end());
  return rt[kRoundTrips / 2];
}

std::pair<double, double> PingPong() {
  double off = 1e30, on = 1e30;
  for (int b = 0; b < kPingPongBlocks; ++b) {
    parmon_pause();
    off = std::min(off, PingPongBlock());
    parmon_resume();
    on = std::min(on, PingPongBlock());
  }
  return {off, on};
}

void BM_MpiPingPong(benchmark::State& state) {
  for (auto _ : state) {
    if (g_size < 2) {
      state.SkipWithError("needs 2 ranks");
      break;
    }
    int command = kPingPong;
    MPI_Send(&command, 1, MPI_INT, 1, kCommandTag, MPI_COMM_WORLD);
    auto [off, on] = PingPong();
    state.counters["uninstrumented_rt_ns"] = off;
    state.counters["recorded_rt_ns"] = on;
    state.counters["recorded_added_ns"] = (on - off) / 2;
    g_figures.push_back(
        {"0-byte ping-pong, 2 ranks (median round trip / 2)", off / 2, 0, (on - off) / 2});
  }
}

// Rank 1: waits for rank 0's commands asleep (not busy-polling a CPU rank 0 is measuring on).
void FollowRankZero() {
  for (;;) {
    int command = kDone;
    MPI_Request req;
    PMPI_Irecv(&command, 1, MPI_INT, 0, kCommandTag, MPI_COMM_WORLD, &req);
    for (int done = 0; !done;) {
      PMPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (!done)
        usleep(1000);
    }
    if (command != kPingPong)
      return;
    PingPong();
  }
}

// ---- POSIX -----------------------------------------------------------------------------------
template <typename F>
F Libc(const char* name) {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  return reinterpret_cast<F>(libc ? dlsym(libc, name) : nullptr);
}

void BM_PosixPipeWriteRead(benchmark::State& state) {
  int fds[2];
  if (pipe(fds) != 0) {
    state.SkipWithError("pipe");
    return;
  }
  auto real_write = Libc<ssize_t (*)(int, const void*, size_t)>("write");
  auto real_read = Libc<ssize_t (*)(int, void*, size_t)>("read");
  char c = 'x';
  for (auto _ : state) {
    Three t = Compare(
        [&](int n) {
          for (int i = 0; i < n; ++i) {
            benchmark::DoNotOptimize(real_write(fds[1], &c, 1));
            benchmark::DoNotOptimize(real_read(fds[0], &c, 1));
          }
        },
        [&](int n) {
          for (int i = 0; i < n; ++i) {
            benchmark::DoNotOptimize(write(fds[1], &c, 1));
            benchmark::DoNotOptimize(read(fds[0], &c, 1));
          }
        },
        2000, 41);  // system calls on a shared VM are noisy: many short blocks, the best kept
    Report(state, "write/read 1 byte on a pipe (per call)", t, 2);
  }
  close(fds[0]);
  close(fds[1]);
}

void BM_MutexUncontended(benchmark::State& state) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  auto real_lock = Libc<int (*)(pthread_mutex_t*)>("pthread_mutex_lock");
  auto real_unlock = Libc<int (*)(pthread_mutex_t*)>("pthread_mutex_unlock");
  for (auto _ : state) {
    Three t = Compare(
        [&](int n) {
          for (int i = 0; i < n; ++i) {
            real_lock(&m);
            real_unlock(&m);
          }
        },
        [&](int n) {
          for (int i = 0; i < n; ++i) {
            pthread_mutex_lock(&m);
            pthread_mutex_unlock(&m);
          }
        },
        200000, 11);
    Report(state, "pthread_mutex_lock, free mutex (+ unlock)", t, 1);
  }
}

BENCHMARK(BM_MpiPingPong)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MpiCommRank)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MpiSendrecvSelf)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PosixPipeWriteRead)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MutexUncontended)->Iterations(1)->Unit(benchmark::kMillisecond);

// Runs this program under `parmon record --mode <mode> -- mpirun -np 2`.
int RunRecorded(const char* self, const char* mode, int argc, char** argv) {
  std::string dir = self;
  dir = dir.substr(0, dir.rfind('/'));
  std::string trace = "/tmp/parmon_comm_bench." + std::to_string(getpid()) + ".ptrace";
  std::vector<std::string> args = {dir + "/parmon",
                                   "record",
                                   "-q",
                                   "--mode",
                                   mode,
                                   "--buffer-size",
                                   "64M",
                                   "-o",
                                   trace,
                                   "--",
                                   "mpirun",
                                   "--allow-run-as-root",
                                   "--oversubscribe",
                                   "-np",
                                   "2",
                                   self};
  for (int i = 1; i < argc; ++i)
    args.emplace_back(argv[i]);
  std::printf("== parmon record --mode %s -- mpirun -np 2 comm_bench ==\n", mode);
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    setenv(kChildEnv, mode, 1);
    std::vector<char*> cargs;
    for (auto& a : args)
      cargs.push_back(a.data());
    cargs.push_back(nullptr);
    execv(cargs[0], cargs.data());
    std::perror("comm_bench: cannot run parmon");
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  unlink(trace.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (getenv(kChildEnv) == nullptr) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
      std::fprintf(stderr, "comm_bench: cannot find its own executable\n");
      return 1;
    }
    self[n] = '\0';
    int rc = RunRecorded(self, "trace", argc, argv);
    int rc2 = RunRecorded(self, "periodic", argc, argv);
    return rc != 0 ? rc : rc2;
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (g_rank == 0 && !parmon_is_active())
    std::fprintf(stderr, "comm_bench: not recorded (is libparmon_mpi built?)\n");
  if (g_rank == 0) {
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    const char* mode = getenv(kChildEnv);
    std::printf("\nadded ns per call, %s mode (uninstrumented cost measured in this run):\n", mode);
    for (const auto& f : g_figures)
      std::printf("  %-52s uninstrumented %8.1f  paused %+7.1f  recording %+7.1f\n", f.what.c_str(),
                  f.direct, f.paused_added, f.recorded_added);
    std::printf("  targets: MPI <= %d ns per call recording\n\n",
                std::string(mode) == "periodic" ? 50 : 100);
    std::fflush(stdout);
    int command = kDone;
    for (int r = 1; r < g_size; ++r)
      MPI_Send(&command, 1, MPI_INT, r, kCommandTag, MPI_COMM_WORLD);
  } else if (g_rank == 1) {
    FollowRankZero();
  }
  MPI_Finalize();
  return 0;
}
