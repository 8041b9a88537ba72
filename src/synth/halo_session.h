// A generator of synthetic per-rank sessions: the directory RUN/ of rank-<K>.ptrace files that
// `mpirun -np N parmon record -o RUN -- app` writes, for an application that does a halo exchange
// on a ring (each iteration: compute, MPI_Irecv from both neighbours, MPI_Isend to both,
// MPI_Waitall) in which chosen ranks compute longer in chosen iterations (late senders), recorded
// by one recorder per rank whose clocks differ by a known offset per host.
//
// The files are genuine: written by format::TraceWriter with the SESSION values, definitions
// (string ids from each rank's own range, as mpi_launch.cc assigns them), event kinds and clock
// ping-pongs (MpiClockSync at MPI_Init and MPI_Finalize) that the real recorder and MPI wrappers
// write, so `parmon report RUN/` reads them as it reads a real session. Tests and benchmarks of
// thousands of ranks use it: no machine runs 4,096 real ranks.
//
// The run is simulated first on one global time base, iteration by iteration for all ranks (a
// rank's Waitall ends when both neighbours' sends have arrived), which gives the exact answers a
// report must find (HaloTruth): late-sender time per rank as the analysis defines it (the time a
// Waitall waited from its entry for the last message's send), and message counts. Then each rank's
// file is written on its own clock (global time + its host's offset). Memory is a few words per
// rank and iteration; files are written one at a time (or by `threads` writers at once).
#ifndef PARMON_SRC_SYNTH_HALO_SESSION_H_
#define PARMON_SRC_SYNTH_HALO_SESSION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace parmon::synth {

struct LateSend {
  uint32_t rank = 0;
  uint32_t iteration = 0;
  uint64_t extra_ns = 0;  // computed longer than usual by this much
};

struct HaloOptions {
  uint32_t ranks = 16;
  uint32_t iterations = 100;
  uint64_t compute_ns = 200000;  // every rank's compute per iteration
  uint64_t bytes = 4096;         // per halo message
  // Every `late_every` iterations (0: never) one rank, chosen round-robin with a stride, computes
  // `late_ns` longer. `late` adds explicit ones.
  uint32_t late_every = 5;
  uint64_t late_ns = 2000000;
  std::vector<LateSend> late;
  // Ranks per host (host h holds ranks h*ranks_per_host ...); host h > 0's clock is offset from
  // host 0's by host_offset_ns * (1 + (h-1) mod 5), ahead for odd h and behind for even h (so
  // up to +-5 steps), plus extra_offset_ns[h] when given.
  uint32_t ranks_per_host = 8;
  int64_t host_offset_ns = 3000000;
  std::vector<int64_t> extra_offset_ns;
  uint64_t latency_ns = 2000;  // one way, for messages and clock ping-pongs
  // The clock ping-pong's way out (rank 0 to the peer) takes this much longer than its way back:
  // the alignment, which takes both ways as equal, then errs by half of it for every rank not on
  // host 0 (ahead of its true offset). Larger than latency_ns, it puts receives before their
  // sends on rank 0's clock, as a clock offset measured under load does.
  uint64_t sync_asymmetry_ns = 0;
  uint32_t chunk_bytes = 256u << 10;  // encoded bytes per chunk, as the recorder cuts them
  uint32_t threads = 1;               // files written at once
};

// What a report of the session must find.
struct HaloTruth {
  std::vector<uint64_t> late_sender_ns;  // per rank: waiting in MPI_Waitall for a late send
  std::vector<uint64_t> messages_sent;   // per rank
  std::vector<int64_t> clock_offset_ns;  // per rank: its clock minus rank 0's
  uint64_t total_messages = 0;
  uint64_t total_late_sender_ns = 0;
  uint64_t events = 0;  // runtime events in all files
};

// The host a rank's clock belongs to, and that host's offset from host 0 (ns).
int64_t HostOffset(const HaloOptions& o, uint32_t host);

// Simulates the run and computes what a report must find, without writing anything.
StatusOr<HaloTruth> SimulateHalo(const HaloOptions& options);

// Writes the session into dir (created if needed; rank-<K>.ptrace files) and returns the truth.
StatusOr<HaloTruth> WriteHaloSession(const std::string& dir, const HaloOptions& options);

}  // namespace parmon::synth

#endif  // PARMON_SRC_SYNTH_HALO_SESSION_H_
