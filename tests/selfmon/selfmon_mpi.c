/* selfmon_mpi: MPI ranks that watch themselves and each other through parmon's self-monitoring
 * API (parmon.h), held by tests/selfmon against `parmon report` and against their own timings.
 *
 * Each rank exchanges pids (MPI_Allgather), watches its own main thread (PARMON_SELF) and every
 * other rank's (parmon_monitor_watch_pid: pid, tid == pid), reads a baseline, then runs ROUNDS
 * rounds of computing (rank r spins (r + 1) * UNIT_MS of wall time) and an MPI_Barrier (the faster
 * ranks wait there for the slowest), timing both with MPI_Wtime, and reads again
 * (PARMON_SINCE_LAST_READ). It writes OUT_DIR/rank-R.txt:
 *   truth RANK PID LOOP_NS COMPUTE_NS MPI_NS
 *   watch RANK OF_RANK RC                      (RC of watching OF_RANK's main thread)
 *   figures RANK OF_RANK TID START END ELAPSED S0 .. S6 CPU_NS FLAGS   (one per watched rank)
 * Not recorded, it writes "not recorded ERROR" and exits 3.
 * Arguments: OUT_DIR [ROUNDS (12)] [UNIT_MS (25)]. */
#include <mpi.h>
#include <parmon/parmon.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { kMaxRanks = 16 };

static void Spin(double seconds) {
  const double until = MPI_Wtime() + seconds;
  volatile unsigned long x = 0;
  while (MPI_Wtime() < until)
    ++x;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 2 || size > kMaxRanks) {
    if (rank == 0)
      fprintf(stderr, "usage: selfmon_mpi OUT_DIR [ROUNDS] [UNIT_MS] (at most %d ranks)\n",
              kMaxRanks);
    MPI_Finalize();
    return 2;
  }
  const int rounds = argc > 2 ? atoi(argv[2]) : 12;
  const double unit = (argc > 3 ? atoi(argv[3]) : 25) / 1e3;
  char path[4096];
  snprintf(path, sizeof path, "%s/rank-%d.txt", argv[1], rank);
  FILE* out = fopen(path, "w");
  if (out == NULL) {
    perror(path);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int32_t pid = (int32_t)getpid(), pids[kMaxRanks];
  MPI_Allgather(&pid, 1, MPI_INT32_T, pids, 1, MPI_INT32_T, MPI_COMM_WORLD);

  parmon_monitor* m = NULL;
  int rc = parmon_monitor_open(&m);
  if (rc != PARMON_OK) {
    fprintf(out, "not recorded %d\n", rc);
    fclose(out);
    MPI_Finalize();
    return 3;
  }
  /* Output slot k: rank of_rank[k]. */
  int of_rank[kMaxRanks], watched = 0;
  for (int r = 0; r < size; ++r) {
    int index = -1;
    rc = r == rank ? parmon_monitor_watch(m, PARMON_SELF, &index)
                   : parmon_monitor_watch_pid(m, pids[r], pids[r], &index);
    fprintf(out, "watch %d %d %d\n", rank, r, rc);
    if (rc == PARMON_OK)
      of_rank[watched++] = r;
  }
  /* Settle (a few sampler passes see every watched thread), then the baseline. */
  MPI_Barrier(MPI_COMM_WORLD);
  Spin(0.1);
  MPI_Barrier(MPI_COMM_WORLD);
  parmon_thread_figures f[kMaxRanks];
  parmon_monitor_read(m, PARMON_SINCE_LAST_READ, f, watched);

  double compute = 0, mpi = 0;
  const double loop0 = MPI_Wtime();
  for (int i = 0; i < rounds; ++i) {
    const double t0 = MPI_Wtime();
    Spin((rank + 1) * unit);
    const double t1 = MPI_Wtime();
    MPI_Barrier(MPI_COMM_WORLD);
    const double t2 = MPI_Wtime();
    compute += t1 - t0;
    mpi += t2 - t1;
  }
  const double loop = MPI_Wtime() - loop0;
  const int n = parmon_monitor_read(m, PARMON_SINCE_LAST_READ, f, watched);
  fprintf(out, "truth %d %d %.0f %.0f %.0f\n", rank, (int)pid, loop * 1e9, compute * 1e9,
          mpi * 1e9);
  for (int k = 0; k < n; ++k) {
    fprintf(out, "figures %d %d %d %llu %llu %llu", rank, of_rank[k], f[k].tid,
            (unsigned long long)f[k].start_ns, (unsigned long long)f[k].end_ns,
            (unsigned long long)f[k].elapsed_ns);
    for (int s = 0; s < PARMON_STATE_COUNT; ++s)
      fprintf(out, " %llu", (unsigned long long)f[k].states_ns[s]);
    fprintf(out, " %llu %u\n", (unsigned long long)f[k].cpu_ns, f[k].flags);
  }
  fclose(out);
  parmon_monitor_close(m);
  MPI_Finalize();
  return 0;
}
