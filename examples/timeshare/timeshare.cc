// timeshare: two threads time-sharing one CPU, from Lehr & Black's comparison of Mach schedulers
// on a uniprocessor (seed 003, section 3.3, Figure 5).
//
// Both threads pin themselves to one CPU (CPU 0, or the first this process may use) with
// sched_setaffinity and count the primes in their own range by trial division, in slices. A
// context-switch view shows them alternating on that CPU, one running at a time; each thread's
// wall time is about twice its CPU time.
//
// Self-check: every slice ran on the chosen CPU, and each thread's prime count equals a sieve's.
// Counts: per thread "share-<t>", the region "slice" once per slice.
#include <sched.h>
#include <time.h>

#include <cstdio>
#include <thread>
#include <vector>

#include "common/example.h"

namespace {

using parmon_examples::Location;
using parmon_examples::Region;
using parmon_examples::Scope;

bool IsPrime(long x) {
  if (x < 2)
    return false;
  for (long d = 2; d * d <= x; ++d)
    if (x % d == 0)
      return false;
  return true;
}

double ThreadCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  parmon_examples::Options options("timeshare",
                                   "Two threads pinned to one CPU, time-sharing it (seed 003).");
  options.AddInt("range", 1500000, 1000, 2000000000, "numbers each thread tests for primality");
  options.AddInt("slices", 40, 1, 100000, "slices each thread splits its range into");
  options.Parse(argc, argv);
  const long range = options.Int("range");
  const long slices = options.Int("slices");

  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    perror("timeshare: sched_getaffinity");
    return 1;
  }
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &allowed))
    ++cpu;

  struct Share {
    Location location;
    long primes = 0;
    long off_cpu_slices = 0;
    double wall = 0, cpu_seconds = 0;
    bool pinned = false;
  };
  std::vector<Share> shares(2);
  auto worker = [&](int t) {
    static const Region slice("slice");
    Share& me = shares[t];
    me.location.thread = "share-" + std::to_string(t);
    parmon_thread_name(me.location.thread.c_str());
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    me.pinned = sched_setaffinity(0, sizeof one, &one) == 0;  // 0: the calling thread
    double wall0 = parmon_examples::Now(), cpu0 = ThreadCpuSeconds();
    long begin = t * range;
    for (long k = 0; k < slices; ++k) {
      Scope s(me.location, slice);
      long lo = begin + range * k / slices, hi = begin + range * (k + 1) / slices;
      for (long x = lo; x < hi; ++x)
        me.primes += IsPrime(x);
      if (sched_getcpu() != cpu)
        ++me.off_cpu_slices;
    }
    me.wall = parmon_examples::Now() - wall0;
    me.cpu_seconds = ThreadCpuSeconds() - cpu0;
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();

  // A sieve over both ranges gives the expected counts.
  std::vector<bool> composite(static_cast<size_t>(2 * range), false);
  long expected[2] = {0, 0};
  for (long x = 2; x < 2 * range; ++x) {
    if (composite[x])
      continue;
    ++expected[x / range];
    for (long m = x * x; m < 2 * range; m += x)
      composite[m] = true;
  }
  bool ok = true;
  parmon_examples::Report report;
  report.example = "timeshare";
  report.params = {{"range", range}, {"slices", slices}, {"cpu", cpu}};
  for (int t = 0; t < 2; ++t) {
    const Share& s = shares[t];
    bool fine = s.pinned && s.off_cpu_slices == 0 && s.primes == expected[t];
    ok = ok && fine;
    report.locations.push_back(s.location.ToJson());
    report.results["share-" + std::to_string(t)] = {{"primes", s.primes},
                                                    {"expected", expected[t]},
                                                    {"wall_seconds", s.wall},
                                                    {"cpu_seconds", s.cpu_seconds},
                                                    {"slices_off_cpu", s.off_cpu_slices}};
    printf("timeshare: thread %d on CPU %d: %ld primes (%s), wall %.3f s, CPU %.3f s%s\n", t, cpu,
           s.primes, s.primes == expected[t] ? "right" : "WRONG", s.wall, s.cpu_seconds,
           s.pinned && s.off_cpu_slices == 0 ? "" : ", NOT kept on its CPU");
  }
  report.ok = ok;
  if (!report.Write(options.String("counts")))
    return 1;
  return ok ? 0 : 1;
}
