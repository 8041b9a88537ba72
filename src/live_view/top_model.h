// What `parmon top` shows, computed from two successive snapshots of the analysis: the engine's
// Results are totals since the session start, so the last interval of a location (its state
// split), of a CPU (its busy share) and of a link (bytes/s, wait %) is the difference between
// this snapshot and the one before. The findings are the diagnosis of the whole session so far,
// each stamped with the session time it first appeared at.
//
// Nothing here draws: top_view.h renders a Frame for a terminal or as plain text.
#ifndef PARMON_SRC_LIVE_VIEW_TOP_MODEL_H_
#define PARMON_SRC_LIVE_VIEW_TOP_MODEL_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/results.h"

namespace parmon::live_view {

struct ThreadRow {
  uint32_t id = 0;  // location id
  uint32_t pid = 0, tid = 0;
  int32_t rank = -1;
  std::string label;            // "rank 2", "pid 41/tid 43 worker" (as the report names it)
  std::string name;             // thread name
  analysis::StateTimes last{};  // ns per state in the last interval
  uint64_t last_ns = 0;         // Sum(last)
  analysis::StateTimes total{};
  uint64_t events = 0, lost = 0;
  double Share(analysis::State s) const {
    return last_ns ? static_cast<double>(last[static_cast<int>(s)]) / static_cast<double>(last_ns)
                   : 0;
  }
  // The share of the last interval spent waiting (every state but running and queued).
  double WaitShare() const;
};

struct CpuRow {
  uint32_t id = 0;
  std::string label;  // "cpu 3"
  double busy = 0;    // 0..1 over the last interval
};

struct LinkRow {
  std::string kind;  // "mpi", "channel"
  std::string from, to;
  double bytes_per_s = 0;  // over the last interval
  double messages_per_s = 0;
  // The share of the last interval the sender spent blocked in this link's sends (late
  // receiver, full pipe) and the receiver in its receives (late sender, empty pipe), 0..1.
  double sender_wait = 0, receiver_wait = 0;
  uint64_t bytes = 0;  // since the start
};

struct FindingRow {
  std::string id;
  std::string text;
  double percent_of_run = 0;
  uint64_t first_seen_ns = 0;  // session time (from its start) of the snapshot that first had it
};

struct Frame {
  std::string file, command;
  bool finished = false;     // the recorder closed the session
  uint64_t covered_ns = 0;   // session time every stream is complete up to
  uint64_t interval_ns = 0;  // the last interval's length
  uint64_t events = 0, lost = 0;
  // Pauses of the recording (`parmon ctl pause`, top's p key) so far; -1: not known.
  int64_t paused = -1;
  uint64_t paused_ns = 0;  // their total length
  bool has_sched = false;
  std::vector<ThreadRow> threads;  // in the report's order (by pid, tid)
  std::vector<CpuRow> cpus;
  std::vector<LinkRow> links;  // busiest first (bytes/s, then the longer wait)
  std::vector<FindingRow> findings;
  std::vector<std::string> problems;
};

// The figures a TopModel reads (summary, locations' states, links, findings), read back from a
// report's JSON (`parmon report --format json`; a collector's snapshot, docs/live.md). Times of
// day are from the session start (session_start 0). An unexpected shape gives what it could read.
analysis::Results ResultsFromReportJson(const nlohmann::json& report);

class TopModel {
 public:
  // Takes the next snapshot: the frame's last interval is what changed since the previous one.
  // problems: the damage to show (not the open end of a trace still being written).
  void Update(const analysis::Results& r, bool finished, std::vector<std::string> problems);
  const Frame& frame() const { return frame_; }
  size_t updates() const { return updates_; }

 private:
  using LinkKey = std::tuple<int, int64_t, int64_t>;
  struct LinkTotals {
    uint64_t bytes = 0, messages = 0, sender_wait_ns = 0, receiver_wait_ns = 0;
  };
  Frame frame_;
  size_t updates_ = 0;
  uint64_t last_end_ = 0;  // the previous snapshot's window end
  std::map<uint32_t, analysis::StateTimes> prev_states_;
  std::map<LinkKey, LinkTotals> prev_links_;
  std::map<std::string, uint64_t> first_seen_;  // finding id + subjects -> session time
};

}  // namespace parmon::live_view

#endif  // PARMON_SRC_LIVE_VIEW_TOP_MODEL_H_
