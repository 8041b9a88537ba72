// TraceIndex::Build: the one pass over a session's merge that gathers, per location, its sampler
// spans, MPI calls, regions and waits, the context switches and the MPI sends and receives, then
// turns them into the index's state series, slice sets and message list (trace_index.h).
#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include "format/event.h"
#include "model/merge.h"
#include "web/trace_index.h"

namespace parmon::web {

namespace {

using format::Kind;

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
  std::vector<Sample> samples;
  std::vector<Span> calls;  // MPI calls and blocking waits, in time order
  std::vector<Frame> stack;
  bool in_mpi = false;
  uint64_t mpi_enter = 0;
  uint32_t mpi_func = 0;
  uint32_t call = kNoCall;    // the open MPI call's record (IndexBuilder::calls_), once it has one
  int64_t rank = INT64_MIN;   // not looked up yet
  int64_t switched_cpu = -1;  // the CPU of the open SwitchIn
  uint64_t switched_in = 0;
  std::vector<Slice> slices;
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

constexpr int kRunning = static_cast<int>(format::ThreadState::kRunning);
constexpr int kCommWait = static_cast<int>(format::ThreadState::kCommWait);
constexpr int kLockWait = static_cast<int>(format::ThreadState::kLockWait);
constexpr int kTimerWait = static_cast<int>(format::ThreadState::kTimerWait);

StateNs OneState(int s) {
  StateNs r{};
  r[s] = 1;
  return r;
}

}  // namespace

class IndexBuilder {
 public:
  IndexBuilder(const model::Session& session, TraceIndex* index)
      : session_(session), index_(index) {}

  void Run() {
    index_->start_ = session_.start();
    index_->end_ = std::max(session_.end(), session_.start());
    model::Merge merge(session_);
    merge.Run([this](const format::Event& e, model::StreamIndex) { Consume(e); });
    FinishLocations();
    FinishCpus();
    FinishMessages();
    index_->matrices_.Finish();
  }

 private:
  // s's index in `list`, appended the first time it is seen (`ids` remembers them).
  static uint32_t Intern(const std::string& s,
                         std::map<std::string, uint32_t>& ids,
                         std::vector<std::string>& list) {
    auto [it, added] = ids.try_emplace(s, static_cast<uint32_t>(list.size()));
    if (added)
      list.push_back(s);
    return it->second;
  }
  uint32_t Name(const std::string& s) { return Intern(s, name_ids_, index_->names_); }
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
  void Wait(RawLoc& l, uint64_t begin, uint64_t end, int state, uint32_t name) {
    if (l.in_mpi)
      return;  // the MPI call already holds this time
    begin = std::min(begin, end);
    l.calls.push_back({begin, end, state});
    AddSlice(l, begin, end, name, l.stack.size(), SliceKind::kWait);
  }

  void Consume(const format::Event& e);
  void MpiLeave(RawLoc& l, uint64_t ts);
  void Switch(uint32_t loc, RawLoc& l, const format::Event& e);
  void FinishLocations();
  void Pieces(IndexedLocation& out, const RawLoc& l);
  void FinishCpus();
  void FinishMessages();
  void AttributeWaits(std::vector<WaitPart>& parts);
  uint32_t Host(const std::string& host) { return Intern(host, host_ids_, index_->hosts_); }
  // The open MPI call's record, made when it completes its first message (most calls complete
  // none or one: see FinishMessages).
  uint32_t CallOf(RawLoc& l) {
    if (l.call == kNoCall) {
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
  std::map<uint32_t, RawLoc> raw_;
  std::map<std::string, uint32_t> name_ids_;
  std::map<std::string, uint32_t> host_ids_;
  std::unordered_map<uint64_t, uint32_t> def_names_;
  uint32_t last_id_ = 0;  // the location of the previous event (the merge hands out runs)
  RawLoc* last_ = nullptr;
  std::map<uint32_t, std::vector<Slice>> cpu_runs_;
  // The sends and receives of each key, the MPI calls that completed them, and the nonblocking
  // sends not completed yet (their key's list and index in it: std::map's nodes stay put).
  std::map<MatchKey, std::pair<std::vector<SendRec>, std::vector<RecvRec>>> p2p_;
  std::vector<CallRec> calls_;
  std::map<RequestKey, std::pair<std::vector<SendRec>*, uint32_t>> open_sends_;
};

void IndexBuilder::Consume(const format::Event& e) {
  ++index_->events_;
  if (e.location == 0)
    return;
  if (!last_ || e.location != last_id_) {
    last_ = &raw_[e.location];  // std::map: the pointer stays valid
    last_id_ = e.location;
  }
  RawLoc& l = *last_;
  l.first = std::min(l.first, e.ts);
  l.last = std::max(l.last, e.ts);
  switch (e.kind_enum()) {
    case Kind::kRegionEnter:
      if (l.stack.size() < 4096)  // a runaway stack (leaves lost) stays bounded
        l.stack.push_back({DefName(e.args[0]), e.ts, SliceKind::kRegion});
      break;
    case Kind::kRegionLeave: {
      const uint32_t name = DefName(e.args[0]);
      while (!l.stack.empty()) {  // unwind to the matching enter
        Frame f = l.stack.back();
        l.stack.pop_back();
        AddSlice(l, f.enter, e.ts, f.name, l.stack.size(), SliceKind::kRegion);
        if (f.name == name)
          break;
      }
      break;
    }
    case Kind::kMpiEnter:
      if (l.in_mpi)
        MpiLeave(l, e.ts);  // the previous call's leave was lost
      l.in_mpi = true;
      l.mpi_enter = e.ts;
      l.mpi_func = static_cast<uint32_t>(e.args[0]);
      l.call = kNoCall;
      break;
    case Kind::kMpiLeave:
      if (l.in_mpi)
        MpiLeave(l, e.ts);
      break;
    case Kind::kMpiSend: {
      const bool blocking = e.args[4] == 0;
      auto& sends =
          p2p_[{RankOf(e.location, l), static_cast<int64_t>(e.args[0]), e.args[2], e.args[1]}]
              .first;
      sends.push_back({e.ts, e.args[3], e.location, blocking && l.in_mpi ? CallOf(l) : kNoCall});
      if (!blocking)  // the same request id again replaces the older send, as in the report
        open_sends_[{RankOf(e.location, l), Pid(e.location), e.args[4]}] = {
            &sends, static_cast<uint32_t>(sends.size() - 1)};
      break;
    }
    case Kind::kMpiRequestDone: {
      auto it = open_sends_.find({RankOf(e.location, l), Pid(e.location), e.args[0]});
      if (it != open_sends_.end()) {
        if (l.in_mpi)
          (*it->second.first)[it->second.second].call = CallOf(l);
        open_sends_.erase(it);
      }
      break;
    }
    case Kind::kMpiRecv:
      p2p_[{static_cast<int64_t>(e.args[0]), RankOf(e.location, l), e.args[2], e.args[1]}]
          .second.push_back(
              {e.ts, std::min(e.args[5], e.ts), e.location, l.in_mpi ? CallOf(l) : kNoCall});
      break;
    case Kind::kChanWait:
      Wait(l, e.args[3], e.ts, kCommWait, DefName(e.args[0]));
      break;
    case Kind::kSyncWait:
      Wait(l, e.args[2], e.ts, kLockWait, Name("lock wait"));
      break;
    case Kind::kTimerWait:
      Wait(l, e.args[2], e.ts, kTimerWait, DefName(e.args[0]));
      break;
    case Kind::kThreadStates: {
      Sample s{0, e.ts, {}, 0};
      for (int i = 0; i < format::kThreadStateCount; ++i) {
        s.rate[std::min(i, kStates - 1)] += e.args[i];
        s.total += e.args[i];
      }
      s.begin = e.ts > s.total ? e.ts - s.total : 0;
      if (s.total)
        l.samples.push_back(s);
      break;
    }
    case Kind::kSwitchIn:
    case Kind::kSwitchOut:
      Switch(e.location, l, e);
      break;
    case Kind::kMatrixData:
      index_->matrices_.Add(e, session_.definitions().Name(static_cast<uint32_t>(
                                   std::min<uint64_t>(e.args[0], UINT32_MAX))));
      break;
    default:
      break;
  }
}

void IndexBuilder::MpiLeave(RawLoc& l, uint64_t ts) {
  l.in_mpi = false;
  if (l.call != kNoCall)
    calls_[l.call].leave = std::max(ts, l.mpi_enter);
  l.call = kNoCall;
  const uint32_t name = DefName(l.mpi_func);
  const std::string& s = index_->names_[name];
  // Start-up and shut-down are in no state in the report; here they keep the sampler's split.
  if (s != "MPI_Init" && s != "MPI_Init_thread" && s != "MPI_Finalize")
    l.calls.push_back({l.mpi_enter, std::max(ts, l.mpi_enter), kCommWait});
  AddSlice(l, l.mpi_enter, ts, name, l.stack.size(), SliceKind::kMpi);
}

void IndexBuilder::Switch(uint32_t loc, RawLoc& l, const format::Event& e) {
  const int64_t cpu = static_cast<int64_t>(e.args[0]);
  if (e.kind_enum() == Kind::kSwitchIn) {
    l.switched_cpu = cpu;
    l.switched_in = e.ts;
    return;
  }
  if (l.switched_cpu == cpu && cpu < 4096)  // a SwitchOut without its SwitchIn is skipped
    cpu_runs_[static_cast<uint32_t>(cpu)].push_back(
        {l.switched_in, e.ts, loc, static_cast<uint8_t>(e.args[1] != 0), SliceKind::kCpu});
  l.switched_cpu = -1;
}

void IndexBuilder::Pieces(IndexedLocation& out, const RawLoc& l) {
  const std::vector<Span>& calls = l.calls;
  size_t j = 0;
  if (l.samples.empty()) {  // inferred: running outside the calls
    uint64_t t = l.first;
    for (const Span& c : calls) {
      if (c.begin > t)
        out.states.AddPiece(t, c.begin, OneState(kRunning), 1);
      out.states.AddPiece(std::max(t, c.begin), c.end, OneState(c.state), 1);
      t = std::max(t, c.end);
    }
    if (l.last > t)
      out.states.AddPiece(t, l.last, OneState(kRunning), 1);
    return;
  }
  for (const Sample& s : l.samples) {
    uint64_t t = s.begin;
    while (j < calls.size() && calls[j].end <= t)
      ++j;
    while (t < s.end) {
      if (j < calls.size() && calls[j].begin <= t) {  // inside a call: its state
        const uint64_t e = std::min(s.end, calls[j].end);
        out.states.AddPiece(t, e, OneState(calls[j].state), 1);
        t = e;
        if (calls[j].end <= t)
          ++j;
        continue;
      }
      const uint64_t e = j < calls.size() ? std::min(s.end, calls[j].begin) : s.end;
      out.states.AddPiece(t, e, s.rate, s.total);
      t = e;
    }
  }
}

void IndexBuilder::FinishLocations() {
  for (auto& [id, l] : raw_) {
    const format::LocationDef* def = session_.Location(id);
    if (def && def->type == format::LocationType::kProcess)
      continue;
    // Regions and a call still open at the end of the trace end with it.
    if (l.in_mpi)
      MpiLeave(l, l.last);
    while (!l.stack.empty()) {
      AddSlice(l, l.stack.back().enter, l.last, l.stack.back().name, l.stack.size() - 1,
               SliceKind::kRegion);
      l.stack.pop_back();
    }
    IndexedLocation out;
    out.id = id;
    out.cpu = session_.IsCpu(id);
    out.host = Host(session_.reader().PartHost(session_.FileOf(id)));
    out.first = l.first;
    out.last = l.last;
    for (const Span& c : l.calls) {
      out.comm_first = std::min(out.comm_first, c.begin);
      out.comm_last = std::max(out.comm_last, c.end);
    }
    std::sort(l.calls.begin(), l.calls.end(),
              [](const Span& a, const Span& b) { return a.begin < b.begin; });
    if (!out.cpu)
      Pieces(out, l);
    for (const Slice& s : l.slices)
      out.slices.Add(s);
    out.slices.Finish();
    index_->locations_.push_back(std::move(out));
    l = RawLoc{};  // frees the raw records as soon as they are indexed
  }
}

void IndexBuilder::FinishCpus() {
  for (auto& [cpu, runs] : cpu_runs_) {
    CpuRow row;
    row.cpu = cpu;
    std::sort(runs.begin(), runs.end(),
              [](const Slice& a, const Slice& b) { return a.begin < b.begin; });
    for (const Slice& s : runs) {
      row.runs.Add(s);
      row.busy.AddPiece(s.begin, s.end, OneState(kRunning), 1);
    }
    row.runs.Finish();
    index_->cpus_.push_back(std::move(row));
  }
}

// Each message's wait, as the report splits a completing call's time (mpi_p2p.cc): a receive
// waited from its call's entry until the send started (late sender), a send from its call's
// entry until the receive was posted (late receiver); a call that completed several messages
// (Waitall, Waitany over a send and a receive) charges each the stretch from the previous one's
// end to its own, so the charges add up to the time the call waited. A receive completed outside
// any call (MPI_Test's leave lost) waited from its posting until the send.
void IndexBuilder::FinishMessages() {
  size_t total = 0;
  for (const auto& [key, sr] : p2p_)
    total += std::min(sr.first.size(), sr.second.size());
  index_->messages_.reserve(total);
  // A call that completed one message waited for it from its entry; the others' parts are
  // attributed together (AttributeWaits).
  std::vector<WaitPart> parts;
  auto wait = [&](uint32_t call, uint64_t end, size_t mi, bool sender, Message& m) {
    const CallRec& c = calls_[call];
    if (c.messages > 1) {
      parts.push_back({call, end, mi, sender});
      return;
    }
    end = std::min(std::max(end, c.enter), c.leave);
    (sender ? m.sender_wait_ns : m.receiver_wait_ns) += end - c.enter;
  };
  for (auto& [key, sr] : p2p_) {
    auto& [sends, recvs] = sr;
    std::stable_sort(recvs.begin(), recvs.end(),
                     [](const RecvRec& a, const RecvRec& b) { return a.posted < b.posted; });
    const size_t n = std::min(sends.size(), recvs.size());
    for (size_t k = 0; k < n; ++k) {
      const SendRec& s = sends[k];
      const RecvRec& r = recvs[k];
      Message m{s.ts,    std::max(s.ts, r.ts),
                s.loc,   r.loc,
                s.bytes, static_cast<int64_t>(std::get<3>(key))};
      const size_t mi = index_->messages_.size();
      if (r.call != kNoCall)
        wait(r.call, std::min(s.ts, r.ts), mi, false, m);
      else if (s.ts > r.posted)
        m.receiver_wait_ns = std::min(s.ts, r.ts) - r.posted;
      if (s.call != kNoCall)
        wait(s.call, r.posted, mi, true, m);
      index_->longest_message_ = std::max(index_->longest_message_, m.recv - m.send);
      index_->messages_.push_back(m);
    }
    sr = {};  // frees the key's records as soon as they are matched
  }
  p2p_.clear();
  open_sends_.clear();
  AttributeWaits(parts);
  calls_ = {};
  std::sort(index_->messages_.begin(), index_->messages_.end(),
            [](const Message& a, const Message& b) { return a.send < b.send; });
}

void IndexBuilder::AttributeWaits(std::vector<WaitPart>& parts) {
  std::sort(parts.begin(), parts.end(), [](const WaitPart& a, const WaitPart& b) {
    return a.call != b.call ? a.call < b.call : a.end < b.end;
  });
  uint32_t call = kNoCall;
  uint64_t prev = 0;
  for (const WaitPart& p : parts) {
    const CallRec& c = calls_[p.call];
    if (p.call != call) {
      call = p.call;
      prev = c.enter;
    }
    const uint64_t end = std::min(std::max(p.end, c.enter), c.leave);
    const uint64_t w = end > prev ? end - prev : 0;
    prev = std::max(prev, end);
    Message& m = index_->messages_[p.message];
    (p.sender ? m.sender_wait_ns : m.receiver_wait_ns) += w;
  }
}

StatusOr<std::unique_ptr<TraceIndex>> TraceIndex::Build(const model::Session& session) {
  auto index = std::make_unique<TraceIndex>();
  IndexBuilder(session, index.get()).Run();
  return index;
}

}  // namespace parmon::web
