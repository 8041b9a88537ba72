// ring_search: the free-text retrieval processor farm on a unidirectional ring of MPI ranks, from
// the case study of Aspnäs & Långbacka, "A Monitoring System for a Transputer-Based
// Multiprocessor" (seed 004, section 5).
//
// Rank 0 is the master (the paper's host); ranks 1..P-1 are the workers, linked in a ring
// 0 -> 1 -> 2 -> ... -> P-1 -> 0. The master scatters the text database evenly over the workers,
// then hands out search words to worker 1. Every worker forwards each word to its successor,
// searches its share of the text, and sends its result (hit count and first hit positions) on;
// it also forwards the results of the workers before it. The last worker's output link goes to
// the master. Links are synchronous (MPI_Ssend, like transputer links), so a worker that cannot
// hand its message on waits on its output link.
//
// --form slow has the master's logical error: after every word it waits on the last link for all
// P-1 answers before handing out the next word, an extra synchronisation that drains the ring
// for every word. The workers then queue behind each other to send: the first worker's output
// link waits most of the time, less and less further along the ring (the paper's Table 4).
// --form fixed keeps handing out words while it collects answers, so the ring stays full.
//
// Self-check: for every word, the hits summed over the workers equal the occurrences the master
// counted while generating the text, and every reported hit position holds the word.
// Counts: per rank, regions entered ("receive", "search", "forward" on workers; "distribute",
// "hand_out", "collect", "wait", "verify" on the master), point-to-point messages and bytes to
// and from each peer, and collective calls.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/example.h"
#include "common/mpi_example.h"
#include "ring_search/farm.h"

namespace {

using parmon_examples::Location;
using parmon_examples::Region;
using parmon_examples::Scope;
using ring_search::Database;
using ring_search::MakeDatabase;
using ring_search::MakeSearchList;
using ring_search::ResultMessage;
using ring_search::Search;
using ring_search::SearchList;
using ring_search::Split;
using ring_search::VerifyResults;
using ring_search::WordMessage;

constexpr int kTagWord = 1;
constexpr int kTagResult = 2;
constexpr int kTagStop = 3;
int RunWorker(Location& me, int rank, int size) {
  static const Region receive("receive"), search("search"), forward("forward");
  int previous = rank - 1;
  int next = rank + 1 < size ? rank + 1 : 0;
  bool last = next == 0;

  // This worker's share of the database, and where it starts in the whole text.
  int64_t base = 0;
  MPI_Scatter(nullptr, 1, MPI_LONG_LONG, &base, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  int length = 0;
  MPI_Scatter(nullptr, 1, MPI_INT, &length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string share(static_cast<size_t>(length), '\0');
  MPI_Scatterv(nullptr, nullptr, nullptr, MPI_CHAR, share.data(), length, MPI_CHAR, 0,
               MPI_COMM_WORLD);
  me.collectives["MPI_Scatter"] += 2;
  ++me.collectives["MPI_Scatterv"];
  if (!share.empty() && share.back() == ' ')
    share.pop_back();

  union {
    WordMessage word;
    ResultMessage result;
  } message;
  for (;;) {
    MPI_Status status;
    {
      Scope s(me, receive);
      parmon_examples::Recv(me, &message, sizeof message, previous, MPI_ANY_TAG, &status);
    }
    if (status.MPI_TAG == kTagStop) {
      Scope s(me, forward);
      parmon_examples::Ssend(me, nullptr, 0, next, kTagStop);
      break;
    }
    if (status.MPI_TAG == kTagResult) {
      Scope s(me, forward);
      parmon_examples::Ssend(me, &message.result, sizeof message.result, next, kTagResult);
      continue;
    }
    WordMessage word = message.word;
    if (!last) {
      Scope s(me, forward);
      parmon_examples::Ssend(me, &word, sizeof word, next, kTagWord);
    }
    ResultMessage result;
    {
      Scope s(me, search);
      result = Search(share, base, word);
      result.worker = rank;
    }
    Scope s(me, forward);
    parmon_examples::Ssend(me, &result, sizeof result, next, kTagResult);
  }
  return 0;
}

bool RunMaster(Location& me,
               int size,
               const parmon_examples::Options& options,
               parmon_examples::Report& report) {
  static const Region distribute("distribute"), hand_out("hand_out"), collect("collect"),
      wait("wait"), verify("verify");
  const int workers = size - 1;
  const long words = options.Int("words");
  const bool slow = options.String("form") == "slow";
  Database db = MakeDatabase(options.Int("db-kb") * 1024);

  {
    Scope s(me, distribute);
    std::vector<int> cut = Split(db.text, workers);
    std::vector<long long> bases(static_cast<size_t>(size), 0);
    std::vector<int> lengths(static_cast<size_t>(size), 0), offsets(static_cast<size_t>(size), 0);
    for (int w = 0; w < workers; ++w) {
      bases[w + 1] = cut[w];
      offsets[w + 1] = cut[w];
      lengths[w + 1] = cut[w + 1] - cut[w] - (w + 1 == workers ? 1 : 0);
    }
    long long unused_base = 0;
    int unused_length = 0;
    MPI_Scatter(bases.data(), 1, MPI_LONG_LONG, &unused_base, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    MPI_Scatter(lengths.data(), 1, MPI_INT, &unused_length, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Scatterv(db.text.data(), lengths.data(), offsets.data(), MPI_CHAR, nullptr, 0, MPI_CHAR, 0,
                 MPI_COMM_WORLD);
    me.collectives["MPI_Scatter"] += 2;
    ++me.collectives["MPI_Scatterv"];
  }

  SearchList search_list = MakeSearchList(db, words);
  std::vector<WordMessage>& list = search_list.words;
  std::vector<ResultMessage> results;
  results.reserve(static_cast<size_t>(words * workers));
  const int last = size - 1;

  double start = parmon_examples::Now();
  if (slow) {
    // The logical error: every word waits for all its answers before the next is handed out.
    for (long i = 0; i < words; ++i) {
      {
        Scope s(me, hand_out);
        parmon_examples::Ssend(me, &list[i], sizeof list[i], 1, kTagWord);
      }
      Scope s(me, collect);
      for (int k = 0; k < workers; ++k) {
        ResultMessage r;
        parmon_examples::Recv(me, &r, sizeof r, last, kTagResult);
        results.push_back(r);
      }
    }
  } else {
    // Hand out the next word as soon as worker 1 takes the previous one, and take every answer
    // as it arrives: a send and a receive are always pending.
    long next_word = 0;
    long expected = words * workers;
    ResultMessage incoming;
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    auto hand_out_next = [&] {
      Scope s(me, hand_out);
      MPI_Issend(&list[next_word], sizeof list[next_word], MPI_BYTE, 1, kTagWord, MPI_COMM_WORLD,
                 &requests[0]);
      me.CountSend(1, sizeof list[next_word]);
    };
    auto collect_next = [&] {
      Scope s(me, collect);
      MPI_Irecv(&incoming, sizeof incoming, MPI_BYTE, last, kTagResult, MPI_COMM_WORLD,
                &requests[1]);
    };
    if (words > 0)
      hand_out_next();
    if (expected > 0)
      collect_next();
    while (requests[0] != MPI_REQUEST_NULL || requests[1] != MPI_REQUEST_NULL) {
      int which = 0;
      MPI_Status status;
      {
        Scope s(me, wait);
        MPI_Waitany(2, requests, &which, &status);
      }
      if (which == 0) {
        if (++next_word < words)
          hand_out_next();
      } else {
        parmon_examples::CountReceived(me, status);
        results.push_back(incoming);
        if (static_cast<long>(results.size()) < expected)
          collect_next();
      }
    }
  }
  double seconds = parmon_examples::Now() - start;

  {
    Scope s(me, hand_out);
    parmon_examples::Ssend(me, nullptr, 0, 1, kTagStop);
  }
  {
    Scope s(me, collect);
    parmon_examples::Recv(me, nullptr, 0, last, kTagStop);
  }

  Scope s(me, verify);
  return VerifyResults(db, search_list, results, workers, seconds, options.String("form"), report);
}

}  // namespace

int main(int argc, char** argv) {
  parmon_examples::Options options(
      "ring_search",
      "Free-text retrieval processor farm on a unidirectional ring of MPI ranks (seed 004):\n"
      "rank 0 hands out search words, ranks 1..P-1 search their share of the text.");
  options.AddChoice("form", "slow", {"slow", "fixed"},
                    "slow: the master waits for every answer before the next word; fixed: not");
  options.AddInt("words", 1500, 1, 10000000, "number of search words");
  options.AddInt("db-kb", 512, 1, 1 << 20, "size of the text database in KiB");
  options.Parse(argc, argv, parmon_examples::LauncherRank() != 0);

  Location me;
  parmon_examples::MpiSetup mpi = parmon_examples::StartMpi(&argc, &argv, "ring_search", 2, &me);
  parmon_examples::Report report;
  report.example = "ring_search";
  bool ok = true;
  if (mpi.rank == 0)
    ok = RunMaster(me, mpi.size, options, report);
  else
    ok = RunWorker(me, mpi.rank, mpi.size) == 0;
  return parmon_examples::FinishMpi(report, me, ok, options.String("counts"));
}
