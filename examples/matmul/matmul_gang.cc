// matmul_gang: the matrix multiply with more threads than CPUs from Lehr & Black, "Mach Kernel
// Monitor (with applications using the PIE environment)" (seed 003, section 3.2, gang
// scheduling).
//
// C = A B with the rows of C split statically and evenly over `--threads` threads (by default
// twice the CPUs this process may use, plus one), so the threads cannot all run at once: the
// computation finishes only when the last descheduled thread has had its turn, which is what a
// context-switch view (PIE's execution and CPU barscopes) makes visible.
//
// Self-check: C x equals A (B x) for a random vector x (Freivalds' test). Counts: per thread
// "mm-<t>", the region "multiply" once per block of rows it computed.
#include <sched.h>

#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "common/example.h"

namespace {

using parmon_examples::Location;
using parmon_examples::Region;
using parmon_examples::Scope;

constexpr int kRowsPerBlock = 8;

}  // namespace

int main(int argc, char** argv) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  int cpus = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 1;
  parmon_examples::Options options(
      "matmul_gang", "Matrix multiply with more threads than CPUs (seed 003, gang scheduling).");
  options.AddInt("n", 800, 8, 8192, "matrix order");
  options.AddInt("threads", 2 * cpus + 1, 1, 1024, "threads (default: twice the CPUs, plus one)");
  options.Parse(argc, argv);
  const int n = static_cast<int>(options.Int("n"));
  const int nthreads = static_cast<int>(options.Int("threads"));

  std::vector<double> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size(), 0.0);
  parmon_examples::Random random(3);
  for (auto& x : a)
    x = random.Uniform() - 0.5;
  for (auto& x : b)
    x = random.Uniform() - 0.5;

  std::vector<Location> locations(nthreads);
  auto worker = [&](int t) {
    static const Region multiply("multiply");
    Location& me = locations[t];
    me.thread = "mm-" + std::to_string(t);
    parmon_thread_name(me.thread.c_str());
    int first = static_cast<int>(static_cast<long>(n) * t / nthreads);
    int last = static_cast<int>(static_cast<long>(n) * (t + 1) / nthreads);
    for (int r0 = first; r0 < last; r0 += kRowsPerBlock) {
      Scope s(me, multiply);
      for (int i = r0; i < std::min(last, r0 + kRowsPerBlock); ++i) {
        double* ci = &c[static_cast<size_t>(i) * n];
        for (int k = 0; k < n; ++k) {
          double aik = a[static_cast<size_t>(i) * n + k];
          const double* bk = &b[static_cast<size_t>(k) * n];
          for (int j = 0; j < n; ++j)
            ci[j] += aik * bk[j];
        }
      }
    }
  };
  double start = parmon_examples::Now();
  std::vector<std::thread> threads;
  for (int t = 0; t < nthreads; ++t)
    threads.emplace_back(worker, t);
  for (auto& th : threads)
    th.join();
  double seconds = parmon_examples::Now() - start;

  // Freivalds: C x == A (B x).
  std::vector<double> x(n), bx(n, 0.0), abx(n, 0.0), cx(n, 0.0);
  for (auto& v : x)
    v = random.Uniform() - 0.5;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      bx[i] += b[static_cast<size_t>(i) * n + j] * x[j];
      cx[i] += c[static_cast<size_t>(i) * n + j] * x[j];
    }
  double error = 0, scale = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j)
      abx[i] += a[static_cast<size_t>(i) * n + j] * bx[j];
    error = std::max(error, std::fabs(abx[i] - cx[i]));
    scale = std::max(scale, std::fabs(abx[i]));
  }
  bool ok = error <= 1e-10 * std::max(1.0, scale);

  parmon_examples::Report report;
  report.example = "matmul_gang";
  report.ok = ok;
  report.params = {{"n", n}, {"threads", nthreads}, {"cpus", cpus}};
  report.results = {{"seconds", seconds},
                    {"freivalds_error", error},
                    {"mflops", 2.0 * n * n * n / seconds / 1e6}};
  for (const Location& l : locations)
    report.locations.push_back(l.ToJson());
  printf("matmul_gang: n=%d, %d threads on %d CPUs: %.3f s (%.0f Mflop/s), check %s\n", n, nthreads,
         cpus, seconds, 2.0 * n * n * n / seconds / 1e6, ok ? "ok" : "WRONG");
  if (!report.Write(options.String("counts")))
    return 1;
  return ok ? 0 : 1;
}
