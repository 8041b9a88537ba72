// jacobi: the Jacobi eigenvalue iteration of the Cedar monitor's MatVu case study (Sharma,
// Malony, Berry, Sinvhal-Sharma, seed 002, section 4), parallel over threads.
//
// The symmetric matrix A = Q D Q^T has eigenvalues D in four tight clusters and a random
// orthogonal Q. Every sweep applies the n(n-1)/2 plane rotations of the parallel (round-robin)
// ordering: n-1 rounds of n/2 disjoint pairs; the threads share each round's pairs, computing
// the angles, then rotating rows, then columns, with a barrier between phases. After every sweep
// thread 0 sends the magnitudes of the off-diagonal blocks (log10 of each block's norm, a 16x16
// grid of floats) with parmon_trace_data, event id 1 "offdiag_log10", so a data view can show
// the matrix decoupling into diagonal blocks per cluster as MatVu did. It also records the whole
// matrix A with parmon_matrix (name "A", n x n doubles, row-major) after every --matrix-every'th
// sweep (default every sweep, 0 never), and writes, per recorded step, the sum of its elements in
// row-major order and its corner elements to the counts file ("matrix_steps"): the oracle the
// tests compare the recorded matrix with. Recording does not change the iteration.
//
// Self-check: the iteration converges, and the sorted diagonal equals the sorted D.
// Counts: per thread "jacobi-<t>", regions ("angles", "rows", "columns", "wait" per round and
// phase, "measure" per sweep on thread 0) and trace_data events by id.
#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include <parmon/parmon.hpp>

#include "common/example.h"

namespace {

using parmon_examples::Location;
using parmon_examples::Region;
using parmon_examples::Scope;

constexpr uint32_t kOffDiagonalEvent = 1;
constexpr int kGrid = 16;
constexpr int kMaxSweeps = 40;

struct Problem {
  int n = 0;
  std::vector<double> a;                   // row-major n x n
  std::vector<double> eigenvalues;         // D, sorted
  std::vector<std::pair<int, int>> pairs;  // (n-1) rounds of n/2 pairs
  std::vector<double> c, s;                // this round's rotations, per pair slot
  pthread_barrier_t barrier;
  int threads = 1;
  bool done = false;
  int sweeps = 0;
  int matrix_every = 1;
  std::vector<double> off_per_sweep;
  nlohmann::json matrix_steps = nlohmann::json::array();
  std::vector<Location> locations;
};

double& At(Problem& p, int i, int j) {
  return p.a[static_cast<size_t>(i) * p.n + j];
}

void MakeMatrix(Problem& p) {
  const int n = p.n;
  parmon_examples::Random random(1990);
  p.eigenvalues.resize(n);
  for (int i = 0; i < n; ++i)
    p.eigenvalues[i] = 1.0 + (i % 4) + 1e-3 * random.Uniform();
  std::sort(p.eigenvalues.begin(), p.eigenvalues.end());
  p.a.assign(static_cast<size_t>(n) * n, 0.0);
  // Shuffle the diagonal so clusters are interleaved, then A <- H A H for three reflections.
  std::vector<double> d = p.eigenvalues;
  for (int i = n - 1; i > 0; --i)
    std::swap(d[i], d[random.Below(i + 1)]);
  for (int i = 0; i < n; ++i)
    At(p, i, i) = d[i];
  std::vector<double> v(n), av(n);
  for (int r = 0; r < 3; ++r) {
    double norm = 0;
    for (auto& x : v) {
      x = random.Uniform() - 0.5;
      norm += x * x;
    }
    for (auto& x : v)
      x /= std::sqrt(norm);
    double vav = 0;
    for (int i = 0; i < n; ++i) {
      av[i] = 0;
      for (int j = 0; j < n; ++j)
        av[i] += At(p, i, j) * v[j];
      vav += v[i] * av[i];
    }
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        At(p, i, j) += -2 * v[i] * av[j] - 2 * av[i] * v[j] + 4 * vav * v[i] * v[j];
  }
  // The circle method: player 0 stays, the others rotate one place per round.
  std::vector<int> pos(n);
  for (int i = 0; i < n; ++i)
    pos[i] = i;
  for (int round = 0; round < n - 1; ++round) {
    for (int i = 0; i < n / 2; ++i)
      p.pairs.emplace_back(pos[i], pos[n - 1 - i]);
    std::rotate(pos.begin() + 1, pos.end() - 1, pos.end());
  }
  p.c.resize(n / 2);
  p.s.resize(n / 2);
}

double OffDiagonal(Problem& p, std::vector<float>* grid) {
  const int n = p.n, g = std::min(kGrid, n);
  std::vector<double> block(static_cast<size_t>(g) * g, 0.0);
  double total = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (i == j)
        continue;
      double x = At(p, i, j) * At(p, i, j);
      total += x;
      block[static_cast<size_t>(i * g / n) * g + j * g / n] += x;
    }
  grid->resize(block.size());
  for (size_t k = 0; k < block.size(); ++k)
    (*grid)[k] = static_cast<float>(std::log10(std::sqrt(block[k]) + 1e-300));
  return std::sqrt(total);
}

// Records A as a matrix step and keeps what the program knows of it (the oracle, see above).
void RecordMatrix(Problem& p) {
  static const parmon::Matrix matrix("A");
  const int rc = matrix.Record(p.a.data(), static_cast<uint32_t>(p.n), static_cast<uint32_t>(p.n));
  double sum = 0;
  for (double x : p.a)
    sum += x;
  const size_t last = p.a.size() - 1;
  p.matrix_steps.push_back({{"step", p.matrix_steps.size()},
                            {"sweep", p.sweeps},
                            {"result", rc},
                            {"sum", sum},
                            {"first", p.a[0]},
                            {"second", p.a[1]},
                            {"last", p.a[last]}});
}

void Worker(Problem& p, int t) {
  static const Region angles("angles"), rows("rows"), columns("columns"), wait("wait"),
      measure("measure");
  Location& me = p.locations[t];
  parmon_thread_name(me.thread.c_str());
  const int n = p.n, half = n / 2;
  auto barrier = [&] {
    Scope s(me, wait);
    pthread_barrier_wait(&p.barrier);
  };
  double norm = 0;
  for (double x : p.a)
    norm += x * x;
  norm = std::sqrt(norm);
  while (!p.done) {
    for (int round = 0; round < n - 1; ++round) {
      const std::pair<int, int>* pairs = &p.pairs[static_cast<size_t>(round) * half];
      {
        Scope s(me, angles);
        for (int k = t; k < half; k += p.threads) {
          auto [i, j] = pairs[k];
          double apq = At(p, i, j);
          if (std::fabs(apq) < 1e-300) {
            p.c[k] = 1;
            p.s[k] = 0;
            continue;
          }
          double theta = (At(p, j, j) - At(p, i, i)) / (2 * apq);
          double tt = (theta >= 0 ? 1 : -1) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
          p.c[k] = 1 / std::sqrt(tt * tt + 1);
          p.s[k] = tt * p.c[k];
        }
      }
      barrier();
      {
        Scope s(me, rows);
        for (int k = t; k < half; k += p.threads) {
          auto [i, j] = pairs[k];
          double c = p.c[k], sn = p.s[k];
          double* ri = &At(p, i, 0);
          double* rj = &At(p, j, 0);
          for (int col = 0; col < n; ++col) {
            double x = ri[col], y = rj[col];
            ri[col] = c * x - sn * y;
            rj[col] = sn * x + c * y;
          }
        }
      }
      barrier();
      {
        // Columns by row stripes: every thread owns rows t, t+T, ... and rotates all pairs there.
        Scope s(me, columns);
        for (int r = t; r < n; r += p.threads) {
          double* row = &At(p, r, 0);
          for (int k = 0; k < half; ++k) {
            auto [i, j] = pairs[k];
            double c = p.c[k], sn = p.s[k];
            double x = row[i], y = row[j];
            row[i] = c * x - sn * y;
            row[j] = sn * x + c * y;
          }
        }
      }
      barrier();
    }
    if (t == 0) {
      Scope s(me, measure);
      std::vector<float> grid;
      double off = OffDiagonal(p, &grid);
      p.off_per_sweep.push_back(off);
      parmon_trace_data(kOffDiagonalEvent, grid.data(), grid.size() * sizeof(float));
      ++me.trace_data[kOffDiagonalEvent];
      ++p.sweeps;
      if (p.matrix_every > 0 && p.sweeps % p.matrix_every == 0)
        RecordMatrix(p);
      p.done = off < 1e-13 * norm || p.sweeps >= kMaxSweeps;
    }
    barrier();
  }
}

}  // namespace

int main(int argc, char** argv) {
  parmon_examples::Options options(
      "jacobi",
      "Parallel Jacobi eigenvalue iteration on a matrix with four clusters of eigenvalues\n"
      "(seed 002); sends the off-diagonal block magnitudes with parmon_trace_data every sweep.");
  options.AddInt("n", 256, 4, 4096, "matrix order (even)");
  options.AddInt("threads", 2, 1, 256, "worker threads");
  options.AddInt("matrix-every", 1, 0, 1000000,
                 "record the matrix with parmon_matrix every this many sweeps (0: never)");
  options.Parse(argc, argv);
  Problem p;
  p.n = static_cast<int>(options.Int("n"));
  if (p.n % 2) {
    fprintf(stderr, "jacobi: '--n' must be even, not %d (see jacobi --help)\n", p.n);
    return 2;
  }
  p.threads = static_cast<int>(std::min<long>(options.Int("threads"), p.n / 2));
  p.matrix_every = static_cast<int>(options.Int("matrix-every"));
  MakeMatrix(p);
  parmon_event_name(kOffDiagonalEvent, "offdiag_log10");
  p.locations.resize(p.threads);
  for (int t = 0; t < p.threads; ++t)
    p.locations[t].thread = "jacobi-" + std::to_string(t);
  pthread_barrier_init(&p.barrier, nullptr, static_cast<unsigned>(p.threads));

  double start = parmon_examples::Now();
  std::vector<std::thread> threads;
  for (int t = 0; t < p.threads; ++t)
    threads.emplace_back(Worker, std::ref(p), t);
  for (auto& th : threads)
    th.join();
  double seconds = parmon_examples::Now() - start;
  pthread_barrier_destroy(&p.barrier);

  std::vector<double> diagonal(p.n);
  for (int i = 0; i < p.n; ++i)
    diagonal[i] = At(p, i, i);
  std::sort(diagonal.begin(), diagonal.end());
  double error = 0;
  for (int i = 0; i < p.n; ++i)
    error = std::max(error, std::fabs(diagonal[i] - p.eigenvalues[i]));
  bool converged = p.sweeps < kMaxSweeps;
  bool ok = converged && error < 1e-9;

  parmon_examples::Report report;
  report.example = "jacobi";
  report.ok = ok;
  report.params = {{"n", p.n}, {"threads", p.threads}, {"matrix_every", p.matrix_every}};
  report.results = {{"seconds", seconds},
                    {"sweeps", p.sweeps},
                    {"off_norm_per_sweep", p.off_per_sweep},
                    {"max_eigenvalue_error", error},
                    {"matrix_steps", p.matrix_steps}};
  for (const Location& l : p.locations)
    report.locations.push_back(l.ToJson());
  printf("jacobi: n=%d on %d threads: %d sweeps in %.3f s, max eigenvalue error %.1e: %s\n", p.n,
         p.threads, p.sweeps, seconds, error, ok ? "ok" : "WRONG");
  if (!report.Write(options.String("counts")))
    return 1;
  return ok ? 0 : 1;
}
