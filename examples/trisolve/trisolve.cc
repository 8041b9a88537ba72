// trisolve: the triangular system solver of Duato & Malumbres (seed 001, section 8, example 2),
// distributed by blocks of rows over a logical ring, with its sequential version for the speedup.
//
// Rank 0 generates the upper-triangular system U x = b row by row and sends every row to the
// rank that owns it (DISTRMATRIX: block k of `--block` rows belongs to rank k mod P), as the paper
// did; its monitor showed the nodes spent most of the run receiving the matrix. Back substitution
// then starts at the last block: its owner solves it and passes the solution to the previous
// rank in the ring; every rank that receives a block's solution updates the right-hand side of
// its own rows and passes it on, until it has gone round the ring once. Finally every rank sends
// its part of x to rank 0, which solves the system again sequentially to give the speedup.
//
// Self-check: the parallel x has a small relative residual and equals the sequential x.
// Counts: per rank, regions ("distribute", "solve", "update", "forward", "receive", "gather",
// "sequential"), messages and bytes to and from each peer.
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/example.h"
#include "common/mpi_example.h"

namespace {

using parmon_examples::Location;
using parmon_examples::Region;
using parmon_examples::Scope;

constexpr int kTagRow = 1;
constexpr int kTagSolution = 2;
constexpr int kTagGather = 3;

// Row i of U (entries i..n-1 meaningful, the rest zero) and b[i], from a generator seeded by i.
void MakeRow(int n, int i, double* row, double* b) {
  parmon_examples::Random random(static_cast<uint64_t>(i) * 7919 + 17);
  for (int j = 0; j < n; ++j)
    row[j] = j < i ? 0.0 : random.Uniform() - 0.5;
  row[i] = n * 0.05 + 1.0 + random.Uniform();  // dominant diagonal: well conditioned
  *b = random.Uniform() * 10 - 5;
}

// Back substitution on rows [first, last) of a full n x n row-major U, given x[last..n).
void SolveSequential(int n,
                     const std::vector<double>& u,
                     const std::vector<double>& b,
                     std::vector<double>& x) {
  for (int i = n - 1; i >= 0; --i) {
    double s = b[i];
    const double* row = &u[static_cast<size_t>(i) * n];
    for (int j = i + 1; j < n; ++j)
      s -= row[j] * x[j];
    x[i] = s / row[i];
  }
}

}  // namespace

int main(int argc, char** argv) {
  parmon_examples::Options options(
      "trisolve",
      "Upper-triangular solver by blocks of rows over a logical ring of MPI ranks (seed 001),\n"
      "with the sequential solve on rank 0 for the speedup.");
  options.AddInt("n", 1200, 2, 20000, "number of equations");
  options.AddInt("block", 10, 1, 10000, "rows per block (blocks go to ranks cyclically)");
  options.Parse(argc, argv, parmon_examples::LauncherRank() != 0);

  Location me;
  auto mpi = parmon_examples::StartMpi(&argc, &argv, "trisolve", 2, &me);
  static const Region distribute("distribute"), solve("solve"), update("update"),
      forward("forward"), receive("receive"), gather("gather"), sequential("sequential");
  const int n = static_cast<int>(options.Int("n"));
  const int bs = static_cast<int>(options.Int("block"));
  const int blocks = (n + bs - 1) / bs;
  const int p = mpi.size, rank = mpi.rank;
  auto owner = [&](int block) { return block % p; };
  auto block_begin = [&](int block) { return block * bs; };
  auto block_end = [&](int block) { return std::min(n, (block + 1) * bs); };

  // This rank's rows, in order, stored full width; row_index maps global row -> local slot.
  std::vector<int> row_index(static_cast<size_t>(n), -1);
  int local_rows = 0;
  for (int k = 0; k < blocks; ++k)
    if (owner(k) == rank)
      for (int i = block_begin(k); i < block_end(k); ++i)
        row_index[i] = local_rows++;
  std::vector<double> u(static_cast<size_t>(local_rows) * n), b(static_cast<size_t>(local_rows));

  double t0 = parmon_examples::Now();
  {
    Scope s(me, distribute);
    std::vector<double> message(static_cast<size_t>(n) + 1);
    for (int i = 0; i < n; ++i) {
      int to = owner(i / bs);
      if (rank == 0) {
        MakeRow(n, i, message.data(), &message[n]);
        if (to != 0)
          parmon_examples::Send(me, message.data(), (n + 1) * 8, to, kTagRow);
      } else if (to == rank) {
        parmon_examples::Recv(me, message.data(), (n + 1) * 8, 0, kTagRow);
      }
      if (to == rank) {
        std::copy(message.begin(), message.begin() + n,
                  u.begin() + static_cast<long>(row_index[i]) * n);
        b[row_index[i]] = message[n];
      }
    }
  }
  double t_distributed = parmon_examples::Now();

  // Back substitution around the ring: solutions travel to the previous rank.
  std::vector<double> x(static_cast<size_t>(n), 0.0);
  const int previous = (rank - 1 + p) % p, next = (rank + 1) % p;
  for (int k = blocks - 1; k >= 0; --k) {
    const int first = block_begin(k), last = block_end(k), width = last - first;
    if (owner(k) == rank) {
      Scope s(me, solve);
      for (int i = last - 1; i >= first; --i) {
        const double* row = &u[static_cast<size_t>(row_index[i]) * n];
        double sum = b[row_index[i]];
        for (int j = i + 1; j < last; ++j)
          sum -= row[j] * x[j];
        x[i] = sum / row[i];
      }
    } else {
      Scope s(me, receive);
      parmon_examples::Recv(me, &x[first], width * 8, next, kTagSolution);
    }
    // Pass it on unless the previous rank is the block's owner (it has gone round the ring).
    if (previous != owner(k)) {
      Scope s(me, forward);
      parmon_examples::Send(me, &x[first], width * 8, previous, kTagSolution);
    }
    Scope s(me, update);
    for (int kk = 0; kk < k; ++kk) {
      if (owner(kk) != rank)
        continue;
      for (int i = block_begin(kk); i < block_end(kk); ++i) {
        const double* row = &u[static_cast<size_t>(row_index[i]) * n];
        double sum = 0;
        for (int j = first; j < last; ++j)
          sum += row[j] * x[j];
        b[row_index[i]] -= sum;
      }
    }
  }
  double t_solved = parmon_examples::Now();

  // Every rank sends its blocks of x to rank 0.
  {
    Scope s(me, gather);
    for (int k = 0; k < blocks; ++k) {
      int width = block_end(k) - block_begin(k);
      if (owner(k) == 0)
        continue;
      if (rank == owner(k))
        parmon_examples::Send(me, &x[block_begin(k)], width * 8, 0, kTagGather);
      else if (rank == 0)
        parmon_examples::Recv(me, &x[block_begin(k)], width * 8, owner(k), kTagGather);
    }
  }
  double t_end = parmon_examples::Now();

  bool ok = true;
  parmon_examples::Report report;
  report.example = "trisolve";
  if (rank == 0) {
    Scope s(me, sequential);
    std::vector<double> full(static_cast<size_t>(n) * n), rhs(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
      MakeRow(n, i, &full[static_cast<size_t>(i) * n], &rhs[i]);
    std::vector<double> xs(static_cast<size_t>(n));
    double s0 = parmon_examples::Now();
    SolveSequential(n, full, rhs, xs);
    double t_sequential = parmon_examples::Now() - s0;
    double residual = 0, norm_b = 0, difference = 0;
    for (int i = 0; i < n; ++i) {
      double r = -rhs[i];
      for (int j = i; j < n; ++j)
        r += full[static_cast<size_t>(i) * n + j] * x[j];
      residual = std::max(residual, std::fabs(r));
      norm_b = std::max(norm_b, std::fabs(rhs[i]));
      difference = std::max(difference, std::fabs(x[i] - xs[i]));
    }
    double relative = residual / norm_b;
    ok = relative < 1e-10 && difference < 1e-8;
    double t_parallel = t_solved - t_distributed;
    report.params = {{"ranks", p}, {"n", n}, {"block", bs}};
    report.results = {{"distribute_seconds", t_distributed - t0},
                      {"solve_seconds", t_parallel},
                      {"gather_seconds", t_end - t_solved},
                      {"sequential_seconds", t_sequential},
                      {"speedup_solve", t_parallel > 0 ? t_sequential / t_parallel : 0.0},
                      {"speedup_total", t_sequential / (t_end - t0)},
                      {"relative_residual", relative},
                      {"max_difference_from_sequential", difference}};
    printf(
        "trisolve: n=%d block=%d on %d ranks: distribute %.3f s, solve %.3f s, gather %.3f s; "
        "sequential solve %.3f s (speedup %.2f for the solve, %.2f overall); residual %.1e %s\n",
        n, bs, p, t_distributed - t0, t_parallel, t_end - t_solved, t_sequential,
        t_parallel > 0 ? t_sequential / t_parallel : 0.0, t_sequential / (t_end - t0), relative,
        ok ? "ok" : "WRONG");
  }
  return parmon_examples::FinishMpi(report, me, ok, options.String("counts"));
}
