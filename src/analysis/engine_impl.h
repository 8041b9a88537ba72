// The analysis engine's state and its per-event dispatch (engine.h has the public interface).
//
// Engine::Impl is the dispatcher: ConsumeAt(loc, event) hands each event to the analyzer of its
// concern. The analyzers share the per-location record (Loc) and are written one concern per
// file:
//   thread states, regions, critical path  engine_inline.h (inline: they run on nearly every event)
//   MPI point-to-point matching, waits     mpi_p2p.cc    (MpiSend/MpiRecv/MpiRequestDone/
//                                                          MpiLeave/FinishCall/AddWaitCall)
//   collectives                            collectives.cc (MpiCollective)
//   POSIX channels                         channels.cc   (ChanInfo/ChanIo, numeric endpoints)
//   interval binning                       binning.h     (Bins, used by every per-interval row)
//   the records they update                engine_state.h (Loc, PendingSend, CallWaits, ...)
//   results builder                        results_builder.cc (Finish: one part per analyzer)
// The events come from the session's merge (model::Merge, in Engine::Impl::Feed), which knows
// nothing of the analyzers: Feed maps each stream to its Loc once and calls ConsumeAt. Snapshot()
// copies the state and finishes the copy, so results can be taken at any point of the stream
// without disturbing it; Finish() is the last snapshot.
#ifndef PARMON_SRC_ANALYSIS_ENGINE_IMPL_H_
#define PARMON_SRC_ANALYSIS_ENGINE_IMPL_H_

#include <algorithm>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "analysis/engine_state.h"
#include "analysis/omp_analyzer.h"
#include "model/merge.h"
#include "model/session.h"

namespace parmon::analysis {

struct Engine::Impl {
  using Location = Loc;
  using Event = format::Event;
  using Kind = format::Kind;

  const model::Session& session;
  const format::TraceReader& reader;  // session.reader()
  Options options;
  const format::Definitions& defs;
  uint64_t session_start = 0, session_end = 0;
  uint64_t ws = 0, we = 0;  // window
  uint64_t iv_ns = 1;
  size_t iv_count = 0;
  Bins bins;  // the window's intervals (ws, we, iv_ns, iv_count)

  std::vector<Loc> locs;
  std::vector<int32_t> loc_index;                     // by location id, -1 when absent
  std::unordered_map<uint32_t, uint32_t> loc_of_tid;  // thread locations by tid
  // A path went on through another location than by a message or a channel: a thread's
  // creator took it at its exit, a condition variable's waiter from its signaller.
  bool joined_paths = false;
  // The path at the last pthread_cond_signal/broadcast of each condition variable (by address).
  struct Signal {
    uint64_t cp = 0;
    std::shared_ptr<const Shares> shares;
  };
  std::unordered_map<uint64_t, Signal> cond_signals;
  std::unordered_map<uint32_t, int32_t> rank_of_pid;
  uint32_t world_size = 0;
  std::unordered_map<uint64_t, uint32_t> comm_size;
  // Call sites of MpiEnters before a window that starts after the session's (location << 32 |
  // func -> site): an MpiEnter in the window without a site takes its thread's from there.
  std::unordered_map<uint64_t, uint32_t> sites_before_window;
  uint32_t MpiSite(Loc& l, uint32_t func, uint32_t site);
  std::unordered_map<uint32_t, MpiFunc> funcs;  // by function string id
  // The same, dense by string id (ids are small): the hot path's lookup (FuncOf).
  std::vector<int32_t> func_slot;  // index in func_list, -1 not looked up yet
  std::unordered_map<uint32_t, uint32_t> func_slot_large;  // the same for ids beyond func_slot's
  std::vector<MpiFunc> func_list;

  Pool<PendingSend> sends;
  Pool<CallWaits> calls;
  // (src, dst, comm, tag) -> sends not received yet, oldest first: a list through
  // PendingSend::next. Emptied entries stay (keys repeat: the same few pairs and tags) unless
  // there are many.
  struct Queue {
    uint32_t head = kNoIndex, tail = kNoIndex;
  };
  absl::flat_hash_map<MatchKey, Queue> in_flight;
  // Receives seen before their send: on rank 0's clock a receive can come before its send when a
  // rank's clock offset is known only to within more than the message's latency (per-rank
  // recorders on hosts whose clocks differ). MPI's non-overtaking rule pairs the k-th send with
  // the k-th receive whatever the clocks say, so such a receive waits here, by the same key,
  // for the next send, if it comes within kEarlyReceiveSlack; the call that completed it stays
  // unresolved meanwhile. Only when the window starts at the session's start: a window cut later
  // has receives whose sends are before it, which must not take a later send's place.
  struct EarlyReceive {
    uint32_t loc = 0;
    uint64_t ts = 0, posted = 0;
    uint64_t from = 0;         // the receive's link time starts here
    uint32_t call = kNoIndex;  // the open MPI call that completed it, held (refs, unresolved)
  };
  static constexpr uint64_t kEarlyReceiveSlack = 10'000'000;  // 10 ms
  std::unordered_map<MatchKey, std::deque<EarlyReceive>, MatchKeyHash> early_receives;
  // Nonblocking sends not completed yet, by (pid, request id) -> PendingSend index; in
  // open_order oldest first (entries already completed are skipped lazily), so that beyond
  // kMaxOpenSends the oldest is dropped.
  absl::flat_hash_map<RequestKey, uint32_t> open_sends;
  std::deque<std::pair<RequestKey, uint32_t>> open_order;
  uint64_t open_sends_dropped = 0;
  std::map<std::pair<int64_t, int64_t>, size_t> mpi_link_index;
  // The same for ranks 0 <= from, to < link_dim: link index + 1 at from * link_dim + to, 0 none.
  std::vector<uint32_t> link_grid;
  size_t link_dim = 0;
  std::vector<LinkAgg> links;
  // Periodic mode: messages and bytes sent to each rank (its receives), from MpiPeerStats.
  std::map<int64_t, std::pair<uint64_t, uint64_t>> periodic_received;
  std::map<std::pair<uint64_t, uint32_t>, uint64_t> coll_seq;  // (comm, loc) -> count
  std::map<std::pair<uint64_t, uint64_t>, CollectiveInstance> collectives;
  std::map<std::tuple<uint32_t, std::string, uint32_t>, WaitStateResult> wait_states;
  // AddWaitCall's recent rows per location (a location waits in few calls): finding one costs a
  // pointer and a short string compare instead of building the map's key.
  struct WaitRow {
    WaitPattern pattern;
    std::string call;
    WaitStateResult* row;
  };
  std::vector<std::vector<WaitRow>> wait_rows;

  std::map<std::pair<uint32_t, uint64_t>, EndpointKey> fd_endpoint;  // (pid, fd) -> endpoint
  std::map<EndpointKey, Endpoint> endpoints;
  // Channel calls are attributed to links only at the end (the link needs both ends known), but
  // their per-interval busy time is folded into per-endpoint rows as they come.
  struct ChannelCall {
    EndpointKey key;
    uint32_t loc;
    bool write;
    uint64_t begin, end;
  };
  std::vector<ChannelCall> pending_channel_busy;
  // (endpoint, written (else read), loc index) -> busy ns per interval.
  std::map<std::tuple<EndpointKey, bool, uint32_t>, std::vector<uint64_t>> endpoint_busy;

  uint64_t events = 0, runtime_events = 0;
  bool has_sched = false, has_comm = false;
  bool periodic_session = false;  // --mode periodic: MPI time comes per flush (mpi_time.cc)
  bool track_shares = true;
  std::vector<std::shared_ptr<Shares>> spare_shares;  // freed by messages, for CopyShares
  LoopClocks loop_clocks;
  OmpAnalyzer omp;                  // OpenMP (OMPT) events
  std::vector<SignalDeath> deaths;  // processes ended by a signal (process_deaths.cc)

  // Growing window (Options::growing): the location of each stream by stream index (-1: not
  // looked up yet).
  std::vector<int32_t> live_loc_of_stream;

  Impl(const model::Session& s, const Options& o);
  // Growing window: multiplies the fine interval length by 10 until t is inside the rows.
  void Coarsen(uint64_t t);
  // Growing window, on a copy: the rows added up into the intervals of the window [ws, end].
  void CloseWindow(uint64_t end);
  // Every event of the window, from the session's merge, to ConsumeAt (engine.cc).
  void Feed();
  // The definitions made before a window that starts after the session's (ranks, communicators,
  // channels, OpenMP runtimes), so that ranks and links keep their names in any window.
  void DefinitionsBeforeWindow();
  void MpiInit(uint32_t pid, const format::Event& e);  // process pid is MPI rank e.args[0]
  // The location of each stream with events in the window (null for the others), and the
  // definitions before the window: set up before the first event so that the table does not
  // grow (and the pointers stay valid) while events are consumed.
  void PrepareFeed();
  std::vector<Loc*> loc_of_stream;
  int32_t LocFor(uint32_t id);
  Loc* Resolve(uint32_t id) { return &locs[static_cast<size_t>(LocFor(id))]; }
  const MpiFunc& Func(uint32_t id);
  // The MPI function of a string id, and its dense index in func_list (per-thread tables by
  // function use it). References into func_list last until the next new function.
  const MpiFunc& FuncOf(uint32_t id) { return func_list[FuncIndex(id)]; }
  uint32_t FuncIndex(uint32_t id) {
    if (id < func_slot.size() && func_slot[id] >= 0)
      return static_cast<uint32_t>(func_slot[id]);
    return FuncIndexSlow(id);
  }
  uint32_t FuncIndexSlow(uint32_t id);
  uint32_t IndexOf(const Loc& l) const { return static_cast<uint32_t>(&l - locs.data()); }

  // --- interval binning (binning.h) ------------------------------------------------------------
  // Adds [b, e) (clipped to the window) of state s to a per-interval row.
  void AddSpan(std::vector<StateTimes>& row, State s, uint64_t b, uint64_t e) const {
    bins.Split(b, e, [&](size_t i, uint64_t ns) { row[i][static_cast<int>(s)] += ns; });
  }
  // Adds a quantity spread evenly over [b, e) (clipped) to a per-interval row of one state.
  void AddSpread(std::vector<StateTimes>& row,
                 State s,
                 uint64_t amount,
                 uint64_t b,
                 uint64_t e) const {
    if (e <= b) {
      if (e >= ws && e < we)
        row[bins.IntervalOf(e)][static_cast<int>(s)] += amount;
      return;
    }
    double per_ns = static_cast<double>(amount) / static_cast<double>(e - b);
    bins.Split(b, e, [&](size_t i, uint64_t ns) {
      row[i][static_cast<int>(s)] +=
          static_cast<uint64_t>(std::llround(per_ns * static_cast<double>(ns)));
    });
  }
  // The part of [b, e) inside the window.
  uint64_t Clip(uint64_t b, uint64_t e) const { return bins.Clip(b, e); }
  size_t IntervalOf(uint64_t t) const { return bins.IntervalOf(t); }

  int32_t RankOf(const Loc& l) const {
    auto it = rank_of_pid.find(l.pid);
    return it == rank_of_pid.end() ? -1 : it->second;
  }
  // The same, cached in the location (the per-message analyzers ask on every message).
  int32_t Rank(Loc& l) const {
    if (l.rank == kRankNotLooked)
      l.rank = RankOf(l);
    return l.rank;
  }

  // --- critical path -------------------------------------------------------------------------
  // Computation from l.cp_mark to t goes on l's path: what the thread ran in between. With
  // context-switch records that is its running clock's advance. Without them (periodic mode,
  // --no-switches) it is the running its samples booked (outside MPI calls and spin waits) that
  // earlier stretches have not taken: samples lag by up to a period, so a stretch shorter than
  // that may take running an earlier stretch did, and a later one what this one did. Either way
  // what the path gets of a thread never exceeds what it ran.
  void Accrue(Loc& l, uint64_t t);
  // The thread computes from t on (a call returned, its first event).
  void Mark(Loc& l, uint64_t t);
  static uint64_t RunClock(const Loc& l, uint64_t t);
  void SwitchIn(Loc& l, uint64_t ts);
  // The part of [b, e) the thread spent preempted (runnable, off a CPU), from its last spells.
  static uint64_t PreemptedWithin(const Loc& l, uint64_t b, uint64_t e);
  // The part of [b, e) the thread spent blocked (off a CPU, not runnable).
  static uint64_t BlockedWithin(const Loc& l, uint64_t b, uint64_t e);
  void SwitchOut(Loc& l, uint64_t ts);
  // A thread or process starts (TaskStart): its path continues its creator's at the fork.
  void TaskStarts(Loc& l, const Event& e);
  // It ends (TaskExit): its creator, which a join or wait4 held until now, takes its path (a
  // creator that went on computing meanwhile keeps its own when that is longer).
  void TaskEnds(Loc& l, const Event& e);
  // A condition variable: the signaller's path so far, for the waiter it wakes.
  void CondSignal(Loc& l, const Event& e);
  // A wait on a condition variable returned: it waited for the last signal on it.
  void CondWoken(Loc& l, const Event& e);
  void Own(Loc& l);
  std::shared_ptr<const Shares> ShareSnapshot(Loc& l);
  void Adopt(Loc& l, uint64_t cp, const std::shared_ptr<const Shares>& shares);
  // A copy of a share vector, in one freed by a message when there is one (no allocation).
  std::shared_ptr<Shares> CopyShares(const Shares& from);
  void RecycleShares(std::shared_ptr<const Shares>& v);

  // --- events --------------------------------------------------------------------------------
  void Consume(const Event& e);
  // l is e's location, resolved by the caller (once per stream in Run).
  void ConsumeAt(Loc& l, const Event& e);
  void MpiEnter(Loc& l, const Event& e);
  void SyncWait(Loc& l, const Event& e);
  void SwitchOutRecord(Loc& l, const Event& e);

  // --- thread states -----------------------------------------------------------------------------
  // A sampler interval: ns per state (format::ThreadState order) ending at e.ts. Time inside MPI
  // calls is the call's, whatever the kernel saw the thread do in it (mpi_time.cc).
  void ThreadStates(Loc& l, const format::Event& e);
  // The part of `ns` of a sample spanning [begin, ts) (`total` long) that lies in the window: a
  // sample that straddles the window's start is clipped proportionally, and what of it the
  // session spent paused (`parmon ctl`) is in no state.
  uint64_t WindowPart(uint64_t ns, uint64_t begin, uint64_t ts, uint64_t total) const;
  // `total` is the sample's span; MPI start-up time moved out of `args` is in none of its states.
  void ApplySample(Loc& l, uint64_t ts, uint64_t total, const uint64_t* args);
  // A CPU's busy and idle time over the sample's span.
  void CpuSample(Loc& l, const format::Event& e);

  void RegionLeave(Loc& l, uint32_t region, uint64_t ts);

  void AddWaitState(Loc& l, State s, uint64_t b, uint64_t e);

  // SyncWait's type for pthread_spin_lock (docs/events.md).
  static constexpr uint64_t kSyncSpin = 9;
  static constexpr uint64_t kSyncCond = 4;  // a condition variable's wait
  void SpinWait(Loc& l, uint64_t begin, uint64_t end);

  void BlockingCall(Loc& l, State s, uint64_t begin, uint64_t end);

  // --- MPI point-to-point and wait states (mpi_p2p.cc) -----------------------------------------
  void AddWaitCall(WaitPattern pattern, uint32_t loc_index, const std::string& call, uint64_t ns);
  size_t MpiLink(int64_t from, int64_t to) {
    if (from >= 0 && to >= 0 && static_cast<uint64_t>(from) < link_dim &&
        static_cast<uint64_t>(to) < link_dim) {
      uint32_t& g = link_grid[static_cast<size_t>(from) * link_dim + static_cast<size_t>(to)];
      if (g)
        return g - 1;
    }
    return MpiLinkSlow(from, to);
  }
  size_t MpiLinkSlow(int64_t from, int64_t to);
  void ReleaseSend(uint32_t i);
  void ReleaseCall(uint32_t i);
  void ReleaseCallSends(Loc& l) {
    for (uint32_t s : l.call_sends)
      ReleaseSend(s);
    l.call_sends.clear();
  }
  void DropOldestOpenSends();
  void LinkBusy(LinkAgg& a, uint64_t b, uint64_t e);
  [[gnu::noinline]] void MpiLeave(Loc& l, const format::Event& e);
  CallWaits& CurrentCall(Loc& l);
  [[gnu::noinline]] void FinishCall(CallWaits& c);
  [[gnu::noinline]] void MpiSend(Loc& l, const format::Event& e);
  [[gnu::noinline]] void MpiRequestDone(Loc& l, const format::Event& e);
  [[gnu::noinline]] void MpiRecv(Loc& l, const format::Event& e);
  // The receive r of send si (in_flight's hold on si is given up here).
  void ReceiveMatched(const EarlyReceive& r, uint32_t si, bool deferred);
  // Early receives whose send did not come within kEarlyReceiveSlack of them by `now`: their
  // calls are resolved without them.
  void DropStaleEarlyReceives(std::deque<EarlyReceive>& waiting, uint64_t now);
  // Finishes, without changing this engine, the calls still waiting at the end (snapshot).
  void FlushOpenCalls();

  // --- MPI time against thread states, periodic-mode MpiStats/MpiPeerStats (mpi_time.cc) ------
  void MpiShareOfSample(Loc& l, uint64_t ts, uint64_t* args);  // trace mode
  void MpiRunStarts(Loc& l, uint32_t func);  // its first MPI_Init call: the run starts
  void HoldSample(Loc& l, uint64_t ts, uint64_t span, const uint64_t* args);  // periodic mode
  void ApplyMpiCells(Loc& l, bool all);
  [[gnu::noinline]] void PeriodicMpi(Loc& l, const format::Event& e);
  void FinishPeriodicMpi();  // the samples still held, with what is known of their MPI time

  // --- collectives (collectives.cc) -------------------------------------------------------------
  [[gnu::noinline]] void MpiCollective(Loc& l, const format::Event& e);

  // --- POSIX channels (channels.cc) -------------------------------------------------------------
  // What fd e.args[0] of process pid is (a definition: also read before the window).
  [[gnu::noinline]] void ChanInfo(uint32_t pid, const format::Event& e);
  [[gnu::noinline]] void ChanIo(Loc& l, const format::Event& e);
  void FlushChannelBusy();
  // Channel links: writes on an endpoint reach the readers of its peer endpoint.
  void AddChannelLinks();
  // One link from writer wli to reader rli (ru null: to the channel itself), its writer-side
  // figures scaled by part() to the reader's share.
  template <typename Part>
  void AddChannelLink(const EndpointKey& key,
                      const Endpoint& ep,
                      uint32_t wli,
                      const Endpoint::Use& u,
                      uint32_t rli,
                      const Endpoint::Use* ru,
                      bool main_writer,
                      Part part);

  // --- the switch-record budget's stops (switch_stops.cc) ----------------------------------------
  // The stops applied so far, by (pid, time): a growing per-rank session combines its files'
  // definitions afresh at every refresh, in file order, so a stop's place in defs.switch_stops
  // changes when an earlier rank's stop comes later. How many stops defs held when last noted,
  // and the earliest time of one not applied yet (UINT64_MAX: none).
  std::vector<std::pair<uint32_t, uint64_t>> switch_stops_applied;
  size_t switch_stops_noted = 0;
  uint64_t next_switch_stop = UINT64_MAX;
  bool SwitchStopApplied(const format::Definitions::SwitchStop& stop) const;
  // A stop's time on the session's time line: its recorder's clock, aligned as that process's
  // events are (a per-rank session of several hosts).
  uint64_t SwitchStopTime(const format::Definitions::SwitchStop& stop) const;
  // Takes the stops defs holds (again as a growing session's definitions grow).
  void NoteSwitchStops();
  // The stops up to ts: their threads go on without switch records from each stop's time.
  void ApplySwitchStops(uint64_t ts);
  // Thread l has no switch record from t on: its running, the critical path and the channel
  // waits go on from the sampler's samples, as in a trace without switch records.
  void StopSwitchTiming(Loc& l, uint64_t t);
  // Whether process pid is root or one of its descendants (root 0: every process).
  bool InProcessTree(uint32_t pid, uint32_t root) const;
  void BuildSwitchStops(Results* res) const;

  // --- processes ended by a signal (process_deaths.cc) -----------------------------------------
  [[gnu::noinline]] void FatalSignal(Loc& l, const format::Event& e);
  // MPI calls still open at the end (a rank torn down inside MPI_Barrier): MPI time up to the
  // location's last event.
  void CloseOpenMpiCalls();
  void BuildDeaths(Results* res) const;

  // --- results builder (results_builder.cc) -----------------------------------------------------
  std::string Label(const Loc& l) const;
  // Turns the state into results; changes the state (call it on a copy: Snapshot).
  Results Finish();
  void BuildSummary(Summary* s) const;
  void BuildLocations(Results* res, std::vector<size_t>* order, std::vector<int>* result_index);
  LocationResult BuildLocation(Loc& l, std::vector<StateTimes>* row);
  // --- one location's result (results_location.cc) --------------------------------------------
  void CpuStates(const Loc& l, LocationResult* r, std::vector<StateTimes>* row) const;
  void SampledStates(const Loc& l,
                     uint64_t held,
                     LocationResult* r,
                     std::vector<StateTimes>* row) const;
  void InferredStates(const Loc& l,
                      uint64_t held,
                      LocationResult* r,
                      std::vector<StateTimes>* row) const;
  void LocationMessagesAndMpi(const Loc& l, LocationResult* r);
  void LocationRegions(Loc& l, LocationResult* r);
  void LocationWaitsAndCompute(const Loc& l, LocationResult* r) const;
  void BuildLost(Results* res) const;
  void BuildLinks(Results* res);
  void BuildIntervalStats(Results* res) const;
  void BuildWaitStates(Results* res);
  void BuildCpuAccount(Results* res) const;
  void BuildOverhead(Results* res) const;  // overhead.cc
  void BuildCriticalPath(Results* res,
                         const std::vector<size_t>& order,
                         const std::vector<int>& result_index) const;
};

}  // namespace parmon::analysis

#include "analysis/engine_inline.h"  // IWYU pragma: export

#endif  // PARMON_SRC_ANALYSIS_ENGINE_IMPL_H_
