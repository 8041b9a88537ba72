// mergesort: the distributed mergesort of Duato & Malumbres (seed 001, section 3).
//
// Rank 0 holds the whole list. mergesort(v, tbase) splits v in two halves; when the node
// `this ^ tbase` exists it sends the first half there (with tbase doubled) and sorts the second
// half itself by recursion, then receives the sorted first half back and merges. The work thus
// spreads over the ranks as a binary tree: 0 -> 1; 0 -> 2, 1 -> 3; 0 -> 4, 1 -> 5, ... Every
// rank other than 0 receives exactly one list from its parent and sends it back sorted.
//
// Self-check: rank 0 verifies the result is in order and is a permutation of the input (an
// order-independent hash and the length). Counts: per rank, regions ("split", "sort_local",
// "merge", "wait_child", "receive_work", "return_work"), messages and bytes per peer.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/example.h"
#include "common/mpi_example.h"
#include "mergesort/sort_common.h"

namespace {

using mergesort::Mix;
using mergesort::RegionLocal;
using mergesort::RegionMerge;
using mergesort::RegionSplit;
using mergesort::RegionWait;
using parmon_examples::Location;
using parmon_examples::Region;
using parmon_examples::Scope;

constexpr int kTagWork = 1;
constexpr int kTagSorted = 2;

// The list travels as [tbase, values...] in uint64_t words.
void Sort(Location& me, int rank, int size, std::vector<uint64_t>& v, uint64_t tbase) {
  // Split even a short list while a child node is left: every node expects one list.
  size_t k1 = (v.size() + 1) / 2;
  int child = static_cast<int>(static_cast<uint64_t>(rank) ^ tbase);
  if (child >= size || tbase >= static_cast<uint64_t>(size)) {
    Scope s(me, RegionLocal());
    std::sort(v.begin(), v.end());
    return;
  }
  std::vector<uint64_t> first, second;
  {
    Scope s(me, RegionSplit());
    first.reserve(k1 + 1);
    first.push_back(tbase << 1);
    first.insert(first.end(), v.begin(), v.begin() + static_cast<long>(k1));
    second.assign(v.begin() + static_cast<long>(k1), v.end());
    parmon_examples::Send(me, first.data(), static_cast<int>(first.size() * 8), child, kTagWork);
  }
  Sort(me, rank, size, second, tbase << 1);
  {
    Scope s(me, RegionWait());
    first.resize(k1);
    parmon_examples::Recv(me, first.data(), static_cast<int>(k1 * 8), child, kTagSorted);
  }
  Scope s(me, RegionMerge());
  std::merge(first.begin(), first.end(), second.begin(), second.end(), v.begin());
}

}  // namespace

int main(int argc, char** argv) {
  parmon_examples::Options options(
      "mergesort",
      "Distributed mergesort (seed 001): each split sends one half to node this^tbase.");
  options.AddInt("n", 4000000, 1, 400000000, "number of 64-bit keys to sort");
  options.Parse(argc, argv, parmon_examples::LauncherRank() != 0);

  Location me;
  auto mpi = parmon_examples::StartMpi(&argc, &argv, "mergesort", 1, &me);
  static const Region receive_work("receive_work"), return_work("return_work");
  parmon_examples::Report report;
  report.example = "mergesort";
  bool ok = true;
  const long n = options.Int("n");

  if (mpi.rank == 0) {
    std::vector<uint64_t> v(static_cast<size_t>(n));
    parmon_examples::Random random(2024);
    uint64_t hash_in = 0;
    for (auto& x : v) {
      x = random.Next();
      hash_in += Mix(x);
    }
    double start = parmon_examples::Now();
    Sort(me, 0, mpi.size, v, 1);
    double seconds = parmon_examples::Now() - start;
    uint64_t hash_out = 0;
    for (uint64_t x : v)
      hash_out += Mix(x);
    ok = std::is_sorted(v.begin(), v.end()) && hash_in == hash_out;
    report.params = {{"ranks", mpi.size}, {"n", n}};
    report.results = {{"seconds", seconds}, {"sorted", ok}};
    printf("mergesort: %ld keys on %d ranks in %.3f s: %s\n", n, mpi.size, seconds,
           ok ? "sorted" : "NOT SORTED");
  } else {
    // The parent is this rank without its highest set bit.
    int parent = mpi.rank & ~(1 << (31 - __builtin_clz(static_cast<unsigned>(mpi.rank))));
    MPI_Status status;
    MPI_Probe(parent, kTagWork, MPI_COMM_WORLD, &status);
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    std::vector<uint64_t> message(static_cast<size_t>(bytes) / 8);
    {
      Scope s(me, receive_work);
      parmon_examples::Recv(me, message.data(), bytes, parent, kTagWork);
    }
    uint64_t tbase = message[0];
    std::vector<uint64_t> v(message.begin() + 1, message.end());
    Sort(me, mpi.rank, mpi.size, v, tbase);
    Scope s(me, return_work);
    parmon_examples::Send(me, v.data(), static_cast<int>(v.size() * 8), parent, kTagSorted);
  }
  return parmon_examples::FinishMpi(report, me, ok, options.String("counts"));
}
