// web::IndexBuilder: what builds a TraceIndex from a session's merge (index_builder.cc), once
// after the run (Run) or as the session grows (Feed, then Publish; index_publish.cc).
//
// Growing. Feed takes the merge's events in order, up to a bound every stream has reached, and
// keeps per location its raw records (sampler spans, MPI calls and waits, the open call and
// region stack); Publish moves what they settled into the index: the slices closed since the
// last Publish are merged into their duration classes, the CPU runs ended since into their rows,
// and each location touched since has its state series cut back to the earliest time the new
// records change (a wait reported at its end may begin before the last publish; an open MPI
// call's time is shown as comm wait until it ends and is then redone) and redone from there. So
// the work of a Publish is what the file gained, not the file again; the messages are the
// exception: they are matched anew from the kept send and receive records (a receive posted
// before others completes after them, and the matching orders receives by posting). Open
// regions and a call still open are not drawn until they close; the last Publish (final) closes
// them at their location's last event, as Run does, so its index equals Run's.
//
// Threads: Feed and Publish run on one thread; readers of the index must be kept out during
// Publish only (the builder keeps its own names and counts while feeding).
#ifndef PARMON_SRC_WEB_INDEX_BUILDER_H_
#define PARMON_SRC_WEB_INDEX_BUILDER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "format/event.h"
#include "model/merge.h"
#include "model/session.h"
#include "web/trace_index.h"

namespace parmon::web {

namespace build {

constexpr uint32_t kNoCall = UINT32_MAX;

struct Sample {
  uint64_t begin, end;
  StateNs rate;
  uint64_t total;
};
struct Span {
  uint64_t begin, end;
  int state;  // the state the span puts its location in
};
struct Frame {
  uint32_t name;
  uint64_t enter;
  SliceKind kind;
};
struct RawLoc {
  bool cpu = false;
  uint64_t first = UINT64_MAX, last = 0;
  uint64_t comm_first = UINT64_MAX, comm_last = 0;
  std::vector<Sample> samples;
  std::vector<Span> calls;  // MPI calls and blocking waits, by begin once published
  std::vector<Frame> stack;
  bool in_mpi = false;
  uint64_t mpi_enter = 0;
  uint32_t mpi_func = 0;
  uint32_t call = kNoCall;    // the open MPI call's record (IndexBuilder::calls_), once it has one
  int64_t rank = INT64_MIN;   // not looked up yet
  int64_t switched_cpu = -1;  // the CPU of the open SwitchIn
  uint64_t switched_in = 0;
  std::vector<Slice> slices;  // closed and not yet published
  // Growing: what the last Publish saw (see index_builder.h's overview).
  bool touched = false;
  size_t calls_sorted = 0;        // calls[0, calls_sorted) are sorted by begin
  size_t samples_seen = 0;        // samples published
  uint64_t provisional_from = 0;  // the series after this was drawn from open records
};
struct SendRec {
  uint64_t ts;
  uint64_t bytes;
  uint32_t loc;
  uint32_t call;  // the MPI call that completed it (a blocking send's own, a Wait*'s), or kNoCall
};
struct RecvRec {
  uint64_t ts, posted;
  uint32_t loc;
  uint32_t call;  // the MPI call it completed in, or kNoCall
};
// An MPI call that completed at least one message; recorded when it completes its first.
struct CallRec {
  uint64_t enter, leave;
  uint32_t messages;  // how many it completed
};
// A stretch a call waited for one message's partner: from the call's entry (or the previous
// part's end) to `end`; see AttributeWaits.
struct WaitPart {
  uint32_t call;
  uint64_t end;
  size_t message;
  bool sender;
};
using MatchKey = std::tuple<int64_t, int64_t, uint64_t, uint64_t>;  // src, dst, comm, tag
using RequestKey = std::tuple<int64_t, uint32_t, uint64_t>;         // rank, pid, request

// The one order of spans and slices (by begin, then the rest), so that sorting all at once and
// merging sorted batches give the same sequence.
inline bool SpanBefore(const Span& a, const Span& b) {
  return std::tie(a.begin, a.end, a.state) < std::tie(b.begin, b.end, b.state);
}

}  // namespace build

class IndexBuilder {
 public:
  IndexBuilder(const model::Session& session, TraceIndex* index)
      : session_(session), index_(index) {}

  // After the run: every event of the session's merge (or of the streams `filter` selects: the
  // sampler streams alone give the coarse level of progressive_view.h), then everything
  // published.
  void Run(const model::MergeFilter& filter = {});
  // Growing: the next event of the merge (in merge order, from time 0).
  void Feed(const format::Event& e) { Consume(e); }
  // Growing: moves what the events fed so far settled into the index (see above); final closes
  // what is still open, as Run does. start and end: the index's window (session clock).
  void Publish(bool final, uint64_t start, uint64_t end);
  uint64_t fed() const { return events_; }

 private:
  using RawLoc = build::RawLoc;
  // s's index in `list`, appended the first time it is seen (`ids` remembers them).
  static uint32_t Intern(const std::string& s,
                         std::map<std::string, uint32_t>& ids,
                         std::vector<std::string>& list) {
    auto [it, added] = ids.try_emplace(s, static_cast<uint32_t>(list.size()));
    if (added)
      list.push_back(s);
    return it->second;
  }
  uint32_t Name(const std::string& s) { return Intern(s, name_ids_, names_); }
  // A defined string's name index, looked up once per string id (it is asked for per event).
  uint32_t DefName(uint64_t id) {
    auto [it, added] = def_names_.try_emplace(id, 0);
    if (added)
      it->second = Name(session_.definitions().Name(static_cast<uint32_t>(id)));
    return it->second;
  }
  int64_t RankOf(uint32_t id, RawLoc& l) {
    if (l.rank == INT64_MIN)
      l.rank = session_.RankOf(id);
    return l.rank;
  }
  void AddSlice(RawLoc& l, uint64_t b, uint64_t e, uint32_t name, size_t depth, SliceKind k) {
    l.slices.push_back(
        {b, std::max(b, e), name, static_cast<uint8_t>(std::min<size_t>(depth, 255)), k});
  }
  void AddCall(RawLoc& l, uint64_t begin, uint64_t end, int state) {
    l.calls.push_back({begin, end, state});
    l.comm_first = std::min(l.comm_first, begin);
    l.comm_last = std::max(l.comm_last, end);
  }
  void Wait(RawLoc& l, uint64_t begin, uint64_t end, int state, uint32_t name) {
    if (l.in_mpi)
      return;  // the MPI call already holds this time
    begin = std::min(begin, end);
    AddCall(l, begin, end, state);
    AddSlice(l, begin, end, name, l.stack.size(), SliceKind::kWait);
  }

  void Consume(const format::Event& e);
  void Reserve(uint32_t id, RawLoc& l);
  void MpiLeave(RawLoc& l, uint64_t ts);
  void Switch(uint32_t loc, RawLoc& l, const format::Event& e);
  // Closes an open call and open regions at the location's last event (the end of the trace).
  void CloseOpen(RawLoc& l);
  // index_publish.cc: one location's, the CPUs' and the names' part of Publish.
  void PublishLocation(uint32_t id, RawLoc& l, bool final);
  // The state pieces of l from the boundary `from` of out's series on (all of them from 0).
  void Pieces(IndexedLocation& out, RawLoc& l, uint64_t from, bool final);
  void PublishCpus();
  void PublishNames();
  // keep: the send and receive records stay (growing), and the messages are matched anew.
  void FinishMessages(bool keep);
  void AttributeWaits(std::vector<build::WaitPart>& parts);
  uint32_t Host(const std::string& host) { return Intern(host, host_ids_, index_->hosts_); }
  // The open MPI call's record, made when it completes its first message (most calls complete
  // none or one: see FinishMessages).
  uint32_t CallOf(RawLoc& l) {
    if (l.call == build::kNoCall) {
      l.call = static_cast<uint32_t>(calls_.size());
      calls_.push_back({l.mpi_enter, UINT64_MAX, 0});
    }
    ++calls_[l.call].messages;
    return l.call;
  }
  uint32_t Pid(uint32_t loc) {
    const format::LocationDef* def = session_.Location(loc);
    return def ? def->pid : 0;
  }

  const model::Session& session_;
  TraceIndex* index_;
  uint64_t events_ = 0;
  // The recorded matrices (parmon_matrix), handed to the index at the final publish only: a
  // session followed live shows them once it has ended.
  MatrixIndex matrices_;
  std::vector<std::string> names_;  // copied into the index by Publish
  std::map<uint32_t, RawLoc> raw_;
  std::map<std::string, uint32_t> name_ids_;
  std::map<std::string, uint32_t> host_ids_;
  std::unordered_map<uint64_t, uint32_t> def_names_;
  // Runtime events per location, from the chunk headers (Reserve).
  std::optional<std::unordered_map<uint32_t, uint64_t>> stream_events_;
  uint32_t last_id_ = 0;  // the location of the previous event (the merge hands out runs)
  RawLoc* last_ = nullptr;
  std::map<uint32_t, std::vector<Slice>> cpu_runs_;  // ended and not yet published
  // The sends and receives of each key, the MPI calls that completed them, and the nonblocking
  // sends not completed yet (their key's list and index in it: std::map's nodes stay put).
  std::map<build::MatchKey, std::pair<std::vector<build::SendRec>, std::vector<build::RecvRec>>>
      p2p_;
  std::vector<build::CallRec> calls_;
  std::map<build::RequestKey, std::pair<std::vector<build::SendRec>*, uint32_t>> open_sends_;
  bool messages_changed_ = false;  // a send or receive was fed since the last match
};

}  // namespace parmon::web

#endif  // PARMON_SRC_WEB_INDEX_BUILDER_H_
