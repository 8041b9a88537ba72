// TraceIndex::Build: the one pass over a session's merge that gathers, per location, its sampler
// spans, MPI calls, regions and waits, the context switches and the MPI sends and receives, then
// turns them into the index's state series, slice sets and message list (trace_index.h).
#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include "format/event.h"
#include "model/merge.h"
#include "web/index_builder.h"

namespace parmon::web {

namespace {

using format::Kind;
using namespace build;

constexpr int kCommWait = static_cast<int>(format::ThreadState::kCommWait);
constexpr int kLockWait = static_cast<int>(format::ThreadState::kLockWait);
constexpr int kTimerWait = static_cast<int>(format::ThreadState::kTimerWait);

}  // namespace

void IndexBuilder::Run(const model::MergeFilter& filter) {
  model::Merge merge(session_, filter);
  merge.Run([this](const format::Event& e, model::StreamIndex) { Consume(e); });
  Publish(true, session_.start(), session_.end());
}

// Room for a location's records from its streams' event counts (the chunk headers'): its slices
// and calls take at most one per two runtime events but for waits (one event each), so half of
// them; pages reserved and never written cost no memory. Growing a vector of millions by
// doubling copied it over and again (perf: a quarter of the build in memmove and page faults).
void IndexBuilder::Reserve(uint32_t id, RawLoc& l) {
  if (!stream_events_) {
    stream_events_.emplace();
    for (const format::Stream& st : session_.streams())
      if (st.source == format::Source::kRuntime)
        (*stream_events_)[st.location] += st.events;
  }
  auto it = stream_events_->find(id);
  if (it == stream_events_->end())
    return;
  const size_t half = static_cast<size_t>(std::min<uint64_t>(it->second / 2, 1u << 28));
  l.slices.reserve(half);
  l.calls.reserve(half);
}

void IndexBuilder::Consume(const format::Event& e) {
  ++events_;
  if (e.location == 0)
    return;
  if (!last_ || e.location != last_id_) {
    auto [it, added] = raw_.try_emplace(e.location);
    last_ = &it->second;  // std::map: the pointer stays valid
    last_id_ = e.location;
    if (added)
      Reserve(e.location, *last_);
  }
  RawLoc& l = *last_;
  l.touched = true;
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
      messages_changed_ = true;
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
      messages_changed_ = true;
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
      matrices_.Add(e, session_.definitions().Name(
                           static_cast<uint32_t>(std::min<uint64_t>(e.args[0], UINT32_MAX))));
      break;
    default:
      break;
  }
}

void IndexBuilder::MpiLeave(RawLoc& l, uint64_t ts) {
  l.in_mpi = false;
  if (l.call != kNoCall) {
    calls_[l.call].leave = std::max(ts, l.mpi_enter);
    messages_changed_ = true;
  }
  l.call = kNoCall;
  const uint32_t name = DefName(l.mpi_func);
  const std::string& s = names_[name];
  // Start-up and shut-down are in no state in the report; here they keep the sampler's split.
  if (s != "MPI_Init" && s != "MPI_Init_thread" && s != "MPI_Finalize")
    AddCall(l, l.mpi_enter, std::max(ts, l.mpi_enter), kCommWait);
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

// Each message's wait, as the report splits a completing call's time (mpi_p2p.cc): a receive
// waited from its call's entry until the send started (late sender), a send from its call's
// entry until the receive was posted (late receiver); a call that completed several messages
// (Waitall, Waitany over a send and a receive) charges each the stretch from the previous one's
// end to its own, so the charges add up to the time the call waited. A receive completed outside
// any call (MPI_Test's leave lost) waited from its posting until the send. A call still open
// (growing) waits until now.
void IndexBuilder::FinishMessages(bool keep) {
  messages_changed_ = false;
  index_->messages_.clear();
  index_->longest_message_ = 0;
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
    if (!keep)
      sr = {};  // frees the key's records as soon as they are matched
  }
  AttributeWaits(parts);
  if (!keep) {
    p2p_.clear();
    open_sends_.clear();
    calls_ = {};
  }
  std::sort(index_->messages_.begin(), index_->messages_.end(),
            [](const Message& a, const Message& b) { return a.send < b.send; });
  index_->link_checkpoints_.Build(index_->messages_);
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
