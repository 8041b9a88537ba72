// web::TraceIndex: what `parmon view` answers the browser from, built once per trace in one pass
// over the session's merge (on rank 0's clock, as `parmon report` reads it) and kept in memory.
//
// Design. The browser never receives the trace: every query names a time range and a pixel width,
// and the answer holds at most about one entry per pixel per row.
//  - States: per location a piecewise-linear cumulative function F_s(t) (ns spent in state s
//    before t), stored at the boundaries of its pieces (sampler spans cut at MPI call edges). The
//    time of any state in any bucket [a, b) is F_s(b) - F_s(a): two binary searches, exact at
//    every zoom level, so the level-of-detail "pyramid" is implicit and costs one record per
//    boundary. Inside MPI calls (but MPI_Init/Finalize) a thread is in comm wait, as the report
//    counts it; outside them the sampler's split of its span is spread evenly over the span; a
//    location without sampler data is running outside its calls (the report's "inferred" split).
//  - Slices (user regions, MPI calls, blocking waits) and CPU intervals (which thread ran) are kept
//    per location in duration classes (class c: durations in [2^c, 2^(c+1))), each sorted by start:
//    a query visits only the classes at least one pixel wide, and counts the narrower slices
//    starting in the range with two binary searches instead of visiting them.
//  - Messages: MPI point-to-point sends paired with their receives (docs/events.md's matching:
//    k-th send A->B on (comm, tag) with the k-th receive posted), sorted by send time, each with
//    the time its two ends waited for each other as `parmon report` splits its calls' time (late
//    sender, late receiver). The communication matrix and the process graph of a time range sum
//    the messages sent in it: per-link sums kept at every stride-th message (LinkCheckpoints)
//    make that two binary searches and two short scans, whatever the range holds.
// Memory: 36 bytes per state boundary (F as 32-bit offsets from a base per block of boundaries;
// 64 before), 24 per slice, 56 per message (docs/web.md has view_bench's bytes per event).
#ifndef PARMON_SRC_WEB_TRACE_INDEX_H_
#define PARMON_SRC_WEB_TRACE_INDEX_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "format/thread_state.h"
#include "model/session.h"
#include "web/matrix_index.h"

namespace parmon::web {

constexpr int kStates = format::kReportStateCount;
using StateNs = std::array<uint64_t, kStates>;
// The API's state keys, in format::ThreadState order (the report's seven states).
extern const char* const kStateKeys[kStates];

enum class SliceKind : uint8_t { kRegion = 0, kMpi = 1, kWait = 2, kCpu = 3 };
extern const char* const kSliceKindKeys[4];

// A span of a location's time: a region, an MPI call, a blocking wait, or (in a CPU's set) a
// thread's stay on the CPU (name = the thread's location id, depth 1 when it was preempted).
struct Slice {
  uint64_t begin = 0, end = 0;
  uint32_t name = 0;  // index into TraceIndex::names(), or a location id for kCpu
  uint8_t depth = 0;
  SliceKind kind = SliceKind::kRegion;
};

// The one order of slices in a class: by begin, then the rest (so a set sorted at once and one
// grown by sorted batches hold the same sequence).
bool SliceBefore(const Slice& a, const Slice& b);

class SliceSet {
 public:
  void Add(const Slice& s);
  // Add of each, each class's room made first.
  void AddAll(const std::vector<Slice>& all);
  void Finish();  // sorts; call once after the last Add
  // A growing set: adds a batch (in any order) to a finished set, merging each class's new
  // slices into place (work in the batch and the classes it touches, not the whole trace).
  void Merge(const std::vector<Slice>& batch);
  size_t size() const { return size_; }
  // Visits the slices overlapping [t0, t1) at least min_ns long (at most `limit` of them, in no
  // particular order); returns how many narrower slices start in [t0, t1). *truncated is set
  // when the limit cut the visit short.
  uint64_t Query(uint64_t t0,
                 uint64_t t1,
                 uint64_t min_ns,
                 size_t limit,
                 const std::function<void(const Slice&)>& fn,
                 bool* truncated) const;

 private:
  static int ClassOf(uint64_t d);
  std::array<std::vector<Slice>, 64> by_class_;
  size_t size_ = 0;
};

// F_s(t) of one location (see above).
class StateSeries {
 public:
  // Appends a piece [begin, end) whose state time grows at rate[s] / total per ns (rate sums to
  // total, or to less when part of the span is in no state). Pieces come in time order; a gap
  // between pieces is time in no state.
  void AddPiece(uint64_t begin, uint64_t end, const StateNs& rate, uint64_t total);
  // Time per state in [a, b).
  StateNs Sum(uint64_t a, uint64_t b) const;
  void Reserve(size_t boundaries) {
    ts_.reserve(boundaries);
    delta_.reserve(boundaries);
  }
  StateNs Cumulative(uint64_t t) const;
  // The same, for a rising sequence of times: *hint (0 at first) carries the place found.
  StateNs Cumulative(uint64_t t, size_t* hint) const;
  // A growing series: drops the boundaries after t, and returns the last one kept (the time
  // from which pieces are to be added again; 0 when none is left).
  uint64_t TruncateTo(uint64_t t);
  size_t boundaries() const { return ts_.size(); }
  // The time up to which the series has pieces (0 when empty).
  uint64_t until() const { return ts_.empty() ? 0 : ts_.back(); }
  bool empty() const { return ts_.empty(); }

 private:
  using Delta = std::array<uint32_t, kStates>;
  // F at boundary k: its block's base plus its delta.
  StateNs At(size_t k) const;
  void Push(uint64_t t, const StateNs& cum);

  // F is kept at each boundary as 32-bit offsets from the base of its block (a run of
  // boundaries whose offsets fit; a new block starts where one would not, about every 4.3 s of
  // a state's time): 8 + 28 bytes per boundary instead of 8 + 56.
  std::vector<uint64_t> ts_;
  std::vector<Delta> delta_;
  std::vector<size_t> block_first_;  // the first boundary of each block
  std::vector<StateNs> block_base_;
  StateNs last_{};  // F at the last boundary
};

struct Message {
  uint64_t send = 0, recv = 0;  // the send's start, the receive's completion
  uint32_t from = 0, to = 0;    // location ids
  uint64_t bytes = 0;
  int64_t tag = 0;
  uint64_t sender_wait_ns =
      0;  // the call completing the send waited for the receive (late receiver)
  uint64_t receiver_wait_ns =
      0;  // the call completing the receive waited for the send (late sender)
};

// A directed link's messages over some range: what the matrix shows per cell.
struct LinkSum {
  uint32_t from = 0, to = 0;  // location ids
  uint64_t messages = 0, bytes = 0, sender_wait_ns = 0, receiver_wait_ns = 0;
  void Add(const Message& m) {
    ++messages;
    bytes += m.bytes;
    sender_wait_ns += m.sender_wait_ns;
    receiver_wait_ns += m.receiver_wait_ns;
  }
  void Remove(const Message& m) {
    --messages;
    bytes -= m.bytes;
    sender_wait_ns -= m.sender_wait_ns;
    receiver_wait_ns -= m.receiver_wait_ns;
  }
  // The sums of the messages in this and not in `before` (sums of a prefix of them).
  LinkSum Since(const LinkSum& before) const {
    return {from,
            to,
            messages - before.messages,
            bytes - before.bytes,
            sender_wait_ns - before.sender_wait_ns,
            receiver_wait_ns - before.receiver_wait_ns};
  }
};

// The messages' sums per directed link at every stride-th message by send time (a checkpoint),
// so that the sums of any range of messages cost two checkpoint copies and scans of at most half
// a stride, however many messages the range holds (the matrix and graph of a whole large run).
// The stride grows with the number of links so that the checkpoints take under a byte per
// message.
class LinkCheckpoints {
 public:
  void Build(const std::vector<Message>& messages);
  // The links with messages, by (from, to); sums are indexed like this list.
  const std::vector<std::pair<uint32_t, uint32_t>>& links() const { return links_; }
  // *sums[l] = the sums of link l over messages[0, k), for k <= messages.size().
  void Before(const std::vector<Message>& messages, size_t k, std::vector<LinkSum>* sums) const;
  // Adds messages[b, e) to their links' sums.
  void Add(const std::vector<Message>& messages,
           size_t b,
           size_t e,
           std::vector<LinkSum>* sums) const;
  size_t stride() const { return stride_; }

 private:
  uint32_t LinkOf(const Message& m) const;
  std::vector<std::pair<uint32_t, uint32_t>> links_;
  std::unordered_map<uint64_t, uint32_t> link_of_;  // from << 32 | to -> index into links_
  size_t stride_ = 1;
  std::vector<LinkSum> checkpoints_;  // checkpoint c: links_.size() sums over [0, c * stride_)
};

struct IndexedLocation {
  uint32_t id = 0;
  bool cpu = false;
  uint32_t host = 0;  // index into TraceIndex::hosts(): the host whose recorder wrote it
  StateSeries states;
  SliceSet slices;
  uint64_t first = UINT64_MAX, last = 0;
  // The span of its MPI calls (but MPI_Init/Finalize) and blocking waits: where a finding about
  // its communication happens. comm_first > comm_last when it has none.
  uint64_t comm_first = UINT64_MAX, comm_last = 0;
};

struct CpuRow {
  uint32_t cpu = 0;  // the CPU number of the context-switch records
  SliceSet runs;     // kCpu slices: name = the thread's location id
  StateSeries busy;  // state 0 (running) = some recorded thread was on the CPU
};

class TraceIndex {
 public:
  // One pass over the whole session.
  static StatusOr<std::unique_ptr<TraceIndex>> Build(const model::Session& session);

  uint64_t start() const { return start_; }  // session clock ns of time 0 of the API
  uint64_t end() const { return end_; }
  const std::vector<IndexedLocation>& locations() const { return locations_; }
  const IndexedLocation* Find(uint32_t id) const;
  const std::vector<CpuRow>& cpus() const { return cpus_; }
  const std::vector<Message>& messages() const { return messages_; }  // by send time
  uint64_t longest_message() const { return longest_message_; }
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<std::string>& hosts() const { return hosts_; }
  uint64_t events() const { return events_; }
  // The matrices recorded with parmon_matrix (matrix_index.h).
  const MatrixIndex& matrices() const { return matrices_; }

  // The messages in flight during [t0, t1) (send < t1, recv >= t0), the first `limit` by send
  // time; *more is set when there are others (they are not counted: that would visit them all).
  std::vector<const Message*> MessagesIn(uint64_t t0, uint64_t t1, size_t limit, bool* more) const;
  // The messages sent in [t0, t1) (session clock), by send time.
  std::span<const Message> SentIn(uint64_t t0, uint64_t t1) const;
  // Their sums per directed pair of locations, by (from, to): the links with messages in range.
  std::vector<LinkSum> LinksIn(uint64_t t0, uint64_t t1) const;
  // The sums of each link (link_checkpoints().links() order) over the messages sent before each
  // time of the rising sequence `edges`: out[i] for edges[i].
  std::vector<std::vector<LinkSum>> LinksBefore(const std::vector<uint64_t>& edges) const;
  const LinkCheckpoints& link_checkpoints() const { return link_checkpoints_; }

 private:
  friend class IndexBuilder;
  uint64_t start_ = 0, end_ = 0, events_ = 0, longest_message_ = 0;
  std::vector<IndexedLocation> locations_;  // by id
  std::vector<CpuRow> cpus_;                // by cpu number
  std::vector<Message> messages_;
  LinkCheckpoints link_checkpoints_;  // over messages_, rebuilt with it
  std::vector<std::string> names_;
  std::vector<std::string> hosts_;
  MatrixIndex matrices_;
};

}  // namespace parmon::web

#endif  // PARMON_SRC_WEB_TRACE_INDEX_H_
