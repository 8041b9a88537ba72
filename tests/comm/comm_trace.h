// Test support for the communication tests: loads the MPI, channel and sync events of a trace
// and pairs sends with receives (the rule in docs/events.md: k-th send from A to B on
// (comm, tag) in send order with the k-th receive on B from A in posted order). Kept small on
// purpose; parmon report has the full analysis.
#ifndef PARMON_TESTS_COMM_COMM_TRACE_H_
#define PARMON_TESTS_COMM_COMM_TRACE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace parmon::format {
struct Definitions;
struct Event;
}  // namespace parmon::format

namespace parmon::testing {

// Reads every event of the trace (file or per-rank directory) at `path` in time order and hands
// it with the trace's definitions to `visit`; with `align_clocks` off, each file keeps its own
// clock. Returns why the trace could not be read, or "".
std::string VisitEvents(
    const std::string& path,
    bool align_clocks,
    const std::function<void(const format::Definitions&, const format::Event&)>& visit);

struct MpiMessageEnd {
  int64_t rank = -1;  // the world rank that recorded it
  int64_t peer = -1;
  int64_t tag = 0;
  uint64_t comm = 0, bytes = 0, request = 0;
  uint64_t ts = 0;      // send: start; receive: completion (rank 0's time base)
  uint64_t posted = 0;  // receive: when posted
};

struct MpiCollectiveCall {
  int64_t rank = -1;
  std::string func;
  uint64_t sent = 0, recv = 0;
};

struct CommTrace {
  std::map<uint32_t, int64_t> rank_of_pid;
  std::vector<MpiMessageEnd> sends, recvs;
  std::vector<MpiCollectiveCall> collectives;
  std::map<std::string, uint64_t> calls;  // MpiEnter per function name
  // Periodic mode: (rank, peer) -> (messages, bytes) summed over MpiPeerStats; calls per
  // function summed over MpiStats.
  std::map<std::pair<int64_t, int64_t>, std::pair<uint64_t, uint64_t>> peer_stats;
  std::map<std::string, uint64_t> stats_calls;
  std::map<int64_t, double> clock_offset_ns;  // rank -> offset at the first sync epoch
  std::string error;                          // non-empty when the trace could not be read
};

// Reads the trace; when `align` is set, MPI times are moved to rank 0's time base using the
// MpiClockSync events (offset interpolated between epochs).
CommTrace LoadCommTrace(const std::string& path, bool align = true);

struct Matching {
  size_t matched = 0;
  std::vector<std::string> problems;  // unmatched ends, receive-before-send
  // (sender, receiver) -> (messages, bytes) of matched messages
  std::map<std::pair<int64_t, int64_t>, std::pair<uint64_t, uint64_t>> pairs;
};
Matching MatchMessages(const CommTrace& t);

}  // namespace parmon::testing

#endif  // PARMON_TESTS_COMM_COMM_TRACE_H_
