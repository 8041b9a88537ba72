// saturation: the network-saturation program of Duato & Malumbres, "Monitoring Tool for Parallel
// Programs in Transputer-Based Multicomputers" (seed 001, section 8, example 1).
//
// In every round, each rank in turn sends one message to every other rank while all the others
// receive from it: for k rounds, for i over the ranks, rank i sends to all, the rest receive from
// i. The paper's point is the cost of each pair's communication under a flooded network; here
// every pair's messages and bytes are known exactly, which makes it the reference for checking
// parmon's per-peer message counts.
//
// Self-check: every received message carries (round, sender, receiver) and a checksum of its
// payload, all verified. Counts: per rank, "send" and "receive" regions (one per message),
// messages and bytes to and from each peer.
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/example.h"
#include "common/mpi_example.h"

namespace {

using parmon_examples::Location;
using parmon_examples::Region;
using parmon_examples::Scope;

constexpr int kTag = 7;
constexpr int kHeader = 4;  // int32 round, sender, receiver, checksum

int32_t Checksum(const int32_t* words, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ static_cast<uint32_t>(words[i])) * 16777619u;
  return static_cast<int32_t>(h);
}

void Fill(std::vector<int32_t>& m, int round, int from, int to) {
  parmon_examples::Random random(static_cast<uint64_t>(round) * 1000003u + from * 1009u + to);
  m[0] = round;
  m[1] = from;
  m[2] = to;
  for (size_t i = kHeader; i < m.size(); ++i)
    m[i] = static_cast<int32_t>(random.Next());
  m[3] = Checksum(m.data() + kHeader, m.size() - kHeader);
}

}  // namespace

int main(int argc, char** argv) {
  parmon_examples::Options options(
      "saturation",
      "Network saturation (seed 001): in every round each rank in turn sends a message to\n"
      "every other rank while the others receive from it.");
  options.AddInt("rounds", 100, 1, 1000000, "rounds (every rank sends to all others once each)");
  options.AddInt("bytes", 1024, 16, 64 << 20, "message size in bytes (rounded up to 4)");
  options.AddInt("delay-us", 0, 0, 1000000, "pause before each message, as the paper's Delay()");
  options.Parse(argc, argv, parmon_examples::LauncherRank() != 0);

  Location me;
  auto mpi = parmon_examples::StartMpi(&argc, &argv, "saturation", 2, &me);
  static const Region send("send"), receive("receive");
  const long rounds = options.Int("rounds");
  const size_t words = std::max<size_t>(kHeader + 1, (options.Int("bytes") + 3) / 4);
  const long delay_us = options.Int("delay-us");
  std::vector<int32_t> out(words), in(words);
  long bad = 0;

  double start = parmon_examples::Now();
  for (long k = 0; k < rounds; ++k) {
    for (int i = 0; i < mpi.size; ++i) {
      if (i == mpi.rank) {
        for (int j = 0; j < mpi.size; ++j) {
          if (j == mpi.rank)
            continue;
          Fill(out, static_cast<int>(k), mpi.rank, j);
          if (delay_us)
            parmon_examples::SleepMicroseconds(delay_us);
          Scope s(me, send);
          parmon_examples::Send(me, out.data(), static_cast<int>(words * 4), j, kTag);
        }
      } else {
        if (delay_us)
          parmon_examples::SleepMicroseconds(delay_us);
        Scope s(me, receive);
        int got = parmon_examples::Recv(me, in.data(), static_cast<int>(words * 4), i, kTag);
        bool fine = got == static_cast<int>(words * 4) && in[0] == k && in[1] == i &&
                    in[2] == mpi.rank && in[3] == Checksum(in.data() + kHeader, words - kHeader);
        if (!fine)
          ++bad;
      }
    }
  }
  double seconds = parmon_examples::Now() - start;

  parmon_examples::Report report;
  report.example = "saturation";
  report.params = {
      {"ranks", mpi.size}, {"rounds", rounds}, {"bytes", words * 4}, {"delay_us", delay_us}};
  report.results = {{"seconds", seconds},
                    {"messages_per_rank", rounds * (mpi.size - 1)},
                    {"corrupt_messages_on_rank_0", bad}};
  if (mpi.rank == 0)
    printf("saturation: %d ranks, %ld rounds of %zu-byte messages: %.3f s\n", mpi.size, rounds,
           words * 4, seconds);
  if (bad)
    fprintf(stderr, "saturation: rank %d received %ld corrupt messages\n", mpi.rank, bad);
  return parmon_examples::FinishMpi(report, me, bad == 0, options.String("counts"));
}
