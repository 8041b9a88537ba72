// The analysis engine: one pass over a session's events in time order (model::Merge, the one
// k-way merge, with the clock alignment of a per-rank session built in), feeding per-location state
// machines, message matching, interval aggregation, wait-state patterns and the critical path;
// Snapshot() turns the state into Results and a diagnosis at any point of the stream, and Finish()
// is the last snapshot. The parts are described in engine_impl.h.
//
// Memory: per location (call stack, region table, state totals, one row of intervals, a share
// vector for the critical path) and per message in flight (sends not yet received, collective
// instances not yet complete). Nothing is kept per event, so a 100-million-event trace needs no
// more memory than a 1000-event one with the same locations.
//
// Rank/location identity, message matching and wait/transfer splits follow docs/events.md.
#ifndef PARMON_SRC_ANALYSIS_ENGINE_H_
#define PARMON_SRC_ANALYSIS_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "analysis/results.h"
#include "base/status.h"
#include "format/event.h"
#include "format/session_info.h"
#include "model/session.h"

namespace parmon::analysis {

// Cost of one event in the program's thread when the trace does not record it: the runtime's
// hot path is one timestamp and a few stores (measured by bench/ at 10-20 ns on x86-64).
inline constexpr double kDefaultEventCostNs = 15;
// Cost of one context-switch record in the switching thread when the trace does not record it
// (traces before the recorder measured it): format/session_info.h.
inline constexpr double kDefaultSwitchRecordCostNs = format::kDefaultSwitchRecordCostNs;

struct Options {
  // Window, in ns from the session start; UINT64_MAX = to the end.
  uint64_t from_ns = 0;
  uint64_t to_ns = UINT64_MAX;
  // Interval length; 0 picks a round length giving at most kAutoIntervals intervals.
  uint64_t interval_ns = 0;
  size_t top_regions = 5;
  // Cost of one recorded event in the program's thread, when the trace does not say (ns).
  double default_event_cost_ns = 0;
  // The same for one context-switch record (the kernel writes it on the switching thread's time).
  double default_switch_record_cost_ns = 0;
  // (The clock alignment of a per-rank session is the session's: model::SessionOptions.)
  // A live engine (the collector's, docs/live.md): the window starts at the session's start and
  // grows with the events fed through ConsumeLive; each SnapshotUntil fixes its end. from_ns,
  // to_ns and interval_ns are ignored. See "Growing window" in engine.cc.
  bool growing = false;
};

// A growing engine keeps its per-interval rows at a fine length g = 10^k ns (from 1 us) in this
// many intervals, and multiplies g by 10 (adding up groups of ten) when the window outgrows them.
// Every round length AutoInterval picks for the window so far is a multiple of g, so a snapshot
// adds fine intervals up into exactly the report's intervals.
constexpr size_t kGrowingIntervals = 400;

constexpr size_t kAutoIntervals = 40;
// The interval length Analyze picks for a window when Options::interval_ns is 0.
uint64_t AutoInterval(uint64_t window_ns);

class Engine {
 public:
  // The session must outlive the engine. Its window, clocks and metadata are read here.
  Engine(const model::Session& session, const Options& options);
  ~Engine();
  // Consumes one event (in time order across all locations, on the session's aligned clock).
  void Consume(const format::Event& e);
  // The results of the events consumed so far, as if the window ended after them; the engine's
  // state is not changed (a live view may take one after every batch of events).
  Results Snapshot() const;
  // The results of every event consumed: the last snapshot.
  Results Finish();
  // Reads every event of the window from the session's merge (in time order) and finishes.
  Results Run();
  // The same events fed from elsewhere (the parallel report, src/parallel: other processes
  // decode the streams and their merges are merged here): BeginFeed() once, then Feed(e, s) for
  // every event of the window in the order of model::Merge over the whole session (time, then
  // stream index, then the order in the stream), then Finish(). Run() is BeginFeed() and the
  // session's own merge. Feed returns false (and ignores the event) for a stream that has no
  // event in the window: its sender did not select the streams this engine did.
  void BeginFeed();
  bool Feed(const format::Event& e, model::StreamIndex s);
  // Growing engines (Options::growing): consumes the next event of the session's merge (in merge
  // order, from a model::Merge over the session with from_ts at window().first) from stream s.
  // Streams, locations and definitions may appear as the session grows (model::Session::Refresh).
  void ConsumeLive(const format::Event& e, model::StreamIndex s);
  // Growing engines: the results as if the window ended at end (at least the last event fed):
  // the report of a trace cut there; with end = session().end() of the finished session, the
  // post-mortem report's figures (per-interval rows of sampled quantities may differ by the
  // rounding of the spread of a sample over the fine intervals, a few ns).
  Results SnapshotUntil(uint64_t end) const;
  // The window in session-clock ns [first, second].
  std::pair<uint64_t, uint64_t> window() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reads the whole window of a session and analyses it.
StatusOr<Results> Analyze(const model::Session& session, const Options& options);

// Ranks findings from Results (called by Engine::Finish; exposed for tests).
void Diagnose(Results* results);

// MPI function family by name ("p2p", "wait", "collective", "one-sided", "io", "init", "other"),
// from the wrapper generator's table (mpi_families.h).
std::string MpiFamily(const std::string& function);
// True for the collectives where every member waits for the last to arrive.
bool IsNToN(const std::string& function);

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_ENGINE_H_
