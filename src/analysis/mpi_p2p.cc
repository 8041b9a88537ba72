// MPI point-to-point analyzer: matches sends and receives by (source, destination,
// communicator, tag) in order (MPI's non-overtaking rule), follows nonblocking sends to the
// Wait*/Test* that completes them, and splits each completing call's time into waiting for the
// partner (late sender, late receiver) and moving data (docs/events.md). Also the wait-state rows
// every analyzer adds to (AddWaitCall) and the per-location MPI call totals by family.
#include <algorithm>
#include <memory>
#include <set>
#include <string>

#include "analysis/engine_impl.h"

namespace parmon::analysis {

using format::Event;
using format::Kind;

// Adds ns of waiting in `call` to the wait-state row (pattern, location, call).
void Engine::Impl::AddWaitCall(WaitPattern pattern,
                               uint32_t loc_index,
                               const std::string& call,
                               uint64_t ns) {
  if (!ns)
    return;
  if (wait_rows.size() <= loc_index)
    wait_rows.resize(loc_index + 1);
  for (WaitRow& r : wait_rows[loc_index])
    if (r.pattern == pattern && r.call == call) {
      ++r.row->instances;
      r.row->ns += ns;
      return;
    }
  auto key = std::make_tuple(loc_index, std::string(WaitPatternName(pattern)) + "\x1f" + call, 0u);
  auto& w = wait_states[key];
  if (wait_rows[loc_index].size() < 16)
    wait_rows[loc_index].push_back({pattern, call, &w});
  if (w.instances == 0) {
    w.kind = pattern;
    w.pattern = WaitPatternName(pattern);
    w.location = locs[loc_index].id;
    w.call = call;
  }
  ++w.instances;
  w.ns += ns;
}

// A function's first look-up: it gets the next index in func_list, found again by id through
// func_slot when the id is small (string ids are dense), else through func_slot_large.
uint32_t Engine::Impl::FuncIndexSlow(uint32_t id) {
  constexpr uint32_t kMaxDenseId = 1u << 20;
  const auto index = static_cast<uint32_t>(func_list.size());
  if (id >= kMaxDenseId) {
    auto [it, added] = func_slot_large.try_emplace(id, index);
    if (!added)
      return it->second;
  } else {
    if (id >= func_slot.size())
      func_slot.resize(std::max<size_t>(id + 1, func_slot.size() * 2), -1);
    func_slot[id] = static_cast<int32_t>(index);
  }
  func_list.push_back(Func(id));
  return index;
}

// Links between ranks are also kept in a dense grid (MpiLink) once the world size is known.
size_t Engine::Impl::MpiLinkSlow(int64_t from, int64_t to) {
  constexpr size_t kMaxGridRanks = 1024;
  size_t dim = std::min<size_t>(world_size, kMaxGridRanks);
  if (dim > link_dim) {  // (re)build the grid from the map
    link_dim = dim;
    link_grid.assign(dim * dim, 0);
    for (const auto& [key, index] : mpi_link_index)
      if (key.first >= 0 && key.second >= 0 && static_cast<uint64_t>(key.first) < dim &&
          static_cast<uint64_t>(key.second) < dim)
        link_grid[static_cast<size_t>(key.first) * dim + static_cast<size_t>(key.second)] =
            static_cast<uint32_t>(index + 1);
  }
  auto [it, inserted] = mpi_link_index.emplace(std::make_pair(from, to), links.size());
  if (inserted) {
    LinkAgg a;
    a.r.type = LinkKind::kMpi;
    a.r.kind = "mpi";
    a.r.from = from;
    a.r.to = to;
    a.busy.resize(iv_count);
    a.bytes.resize(iv_count);
    links.push_back(std::move(a));
  }
  if (from >= 0 && to >= 0 && static_cast<uint64_t>(from) < link_dim &&
      static_cast<uint64_t>(to) < link_dim)
    link_grid[static_cast<size_t>(from) * link_dim + static_cast<size_t>(to)] =
        static_cast<uint32_t>(it->second + 1);
  return it->second;
}
void Engine::Impl::LinkBusy(LinkAgg& a, uint64_t b, uint64_t e) {
  bins.Split(b, e, [&](size_t i, uint64_t ns) { a.busy[i] += ns; });
}

void Engine::Impl::MpiLeave(Loc& l, const Event& e) {
  if (!l.in_mpi)
    return;  // entered before the window
  l.in_mpi = false;
  const MpiFunc& f = FuncOf(l.mpi_func);
  uint64_t d = Clip(l.mpi_enter, e.ts);
  ++l.mpi_calls;
  // MPI_Init/Init_thread/Finalize are start-up and shut-down, not communication: apart from
  // the MPI time and out of the thread's states (mpi_time.h).
  uint64_t span = e.ts > l.mpi_enter ? e.ts - l.mpi_enter : 0;
  if (f.family == MpiFamilyId::kInit) {
    (f.name == "MPI_Finalize" ? l.mpi_shutdown_ns : l.mpi_startup_ns) += d;
    if (f.name == "MPI_Finalize")
      l.mpi_time.finalize_left = e.ts;
    l.mpi_time.init += span;
  } else {
    l.mpi_ns += d;
    l.mpi_time.comm += span;
    AddWaitState(l, State::kCommWait, l.mpi_enter, e.ts);
  }
  CallFamilyStat& fam = l.families[static_cast<size_t>(f.family)];
  ++fam.calls;
  fam.ns += d;
  AddFuncTime(l.mpi_time, l.mpi_func, 1, d);
  if (l.mpi_site && f.family != MpiFamilyId::kInit) {
    MpiFuncAgg& at = l.mpi_time.by_site[(uint64_t{l.mpi_site} << 32) | l.mpi_func];
    ++at.calls;
    at.ns += d;
  }
  // The call's time is link time of the messages it completed (FinishCall); a nonblocking
  // send's or receive's own call is not.
  ReleaseCallSends(l);
  if (l.call_waits != kNoIndex) {
    calls[l.call_waits].leave = e.ts;
    FinishCall(calls[l.call_waits]);
    ReleaseCall(l.call_waits);
    l.call_waits = kNoIndex;
  }
  Mark(l, e.ts);
}

// The record of the open MPI call's message waits, created when it first completes one.
CallWaits& Engine::Impl::CurrentCall(Loc& l) {
  if (l.call_waits == kNoIndex) {
    l.call_waits = calls.Take();
    CallWaits& c = calls[l.call_waits];
    c.loc = IndexOf(l);
    c.func = l.mpi_func;
    c.enter = l.mpi_enter;
    c.leave = kNone;
    c.unresolved = 0;
    c.done = false;
    c.parts.clear();
    c.members.clear();
    c.refs = 1;
  }
  return calls[l.call_waits];
}

// A holder lets go of a send or call record; the last one returns it to its pool.
void Engine::Impl::ReleaseSend(uint32_t i) {
  PendingSend& s = sends[i];
  if (--s.refs)
    return;
  RecycleShares(s.shares);
  loop_clocks.Recycle(s.clock);
  if (s.call != kNoIndex)
    ReleaseCall(s.call);
  sends.free.push_back(i);
}
void Engine::Impl::ReleaseCall(uint32_t i) {
  if (--calls[i].refs == 0)
    calls.free.push_back(i);
}

// A call's waits, once it has returned and the receive of every send it completed is known.
// Every message's wait starts at the call's entry (a receive was posted, a send started, at
// or before it) and ends when its partner arrived; the call waited until the last of them.
// Sorted by that end, each message is charged the stretch from the previous end to its own:
// the time the call waited for it alone, so the charges add up to the call's wait. The call's
// time is its links' time: each message's link gets that wait, and the rest of the call, from
// the last partner's arrival to the return (moving data), is shared evenly by its messages. So
// a Sendrecv or Waitall that waited for the receive puts that wait on the receive's link only,
// never as transfer on the other direction, and the links' times add up to the call's.
void Engine::Impl::FinishCall(CallWaits& c) {
  if (c.done || c.leave == kNone || c.unresolved > 0)
    return;
  c.done = true;
  // At the same end a receive goes first: a Sendrecv whose partner posted its receive as it
  // sent (one call) waited for that message to come, not for its own send to be taken.
  std::sort(c.parts.begin(), c.parts.end(), [](const CallWaits::Part& a, const CallWaits::Part& b) {
    return a.end != b.end ? a.end < b.end : a.send < b.send;
  });
  uint64_t prev = c.enter, late_sender = 0, late_receiver = 0;
  for (const auto& p : c.parts) {
    uint64_t end = std::min(std::max(p.end, c.enter), c.leave);
    uint64_t w = end > prev ? Clip(prev, end) : 0;
    LinkAgg& a = links[p.link];
    if (end > prev)
      LinkBusy(a, prev, end);
    prev = std::max(prev, end);
    if (!w)
      continue;
    (p.send ? a.r.sender_wait_ns : a.r.receiver_wait_ns) += w;
    a.r.wait_ns += w;
    a.r.time_ns += w;
    (p.send ? late_receiver : late_sender) += w;
  }
  if (!c.members.empty() && c.leave > prev) {
    const uint64_t n = c.members.size(), span = c.leave - prev;
    for (uint64_t k = 0; k < n; ++k) {
      const uint64_t b = prev + span * k / n, e = prev + span * (k + 1) / n;
      LinkAgg& a = links[c.members[k]];
      a.r.time_ns += Clip(b, e);
      LinkBusy(a, b, e);
    }
  }
  Loc& l = locs[c.loc];
  const std::string& call = FuncOf(c.func).name;
  l.late_sender += late_sender;
  l.late_receiver += late_receiver;
  AddWaitCall(WaitPattern::kLateSender, c.loc, call, late_sender);
  AddWaitCall(WaitPattern::kLateReceiver, c.loc, call, late_receiver);
  c.parts.clear();
}

void Engine::Impl::MpiSend(Loc& l, const Event& e) {
  int32_t rank = Rank(l);
  int64_t peer = static_cast<int64_t>(e.args[0]);
  uint32_t si = sends.Take();
  PendingSend& s = sends[si];
  s.ts = e.ts;
  s.loc = IndexOf(l);
  s.blocking = e.args[4] == 0;
  s.link = MpiLink(rank, peer);
  Accrue(l, e.ts);  // (a send outside any recorded call: its computation up to now)
  s.cp = l.cp;
  s.shares = ShareSnapshot(l);
  s.clock = loop_clocks.Send(s.loc);
  s.call = kNoIndex;
  s.recv_posted = kNone;
  s.next = kNoIndex;
  s.refs = 1;  // in_flight
  LinkAgg& a = links[s.link];
  ++a.r.messages;
  a.r.bytes += e.args[3];
  a.bytes[IntervalOf(e.ts)] += e.args[3];
  ++l.messages_sent;
  l.bytes_sent += e.args[3];
  ++l.mpi_messages_sent;
  l.mpi_bytes_sent += e.args[3];
  Queue& q = in_flight.try_emplace(MatchKey{rank, peer, e.args[2], e.args[1]}).first->second;
  if (q.tail == kNoIndex)
    q.head = si;
  else
    sends[q.tail].next = si;
  q.tail = si;
  if (s.blocking && l.in_mpi) {
    CallWaits& c = CurrentCall(l);
    c.members.push_back(s.link);
    ++c.unresolved;
    ++c.refs;
    s.call = l.call_waits;
    ++s.refs;
    l.call_sends.push_back(si);
  } else if (!s.blocking) {
    const RequestKey request{l.pid, e.args[4]};
    auto [held, inserted] = open_sends.try_emplace(request, si);
    if (!inserted)
      ReleaseSend(held->second);  // the same request id again: the older send is replaced
    held->second = si;
    ++s.refs;
    open_order.emplace_back(request, si);
    if (open_sends.size() > kMaxOpenSends || open_order.size() > 2 * kMaxOpenSends)
      DropOldestOpenSends();
  }
  has_comm = true;
  // A receive seen before this send (clock error, EarlyReceive) takes it now: it is the head of
  // the queue, since early receives wait only while no send is in flight on their key.
  if (!early_receives.empty()) {
    auto er = early_receives.find(MatchKey{rank, peer, e.args[2], e.args[1]});
    if (er != early_receives.end()) {
      auto& waiting = er->second;
      DropStaleEarlyReceives(waiting, e.ts);
      if (!waiting.empty() && q.head == si) {
        EarlyReceive r = waiting.front();
        waiting.pop_front();
        q.head = q.tail = kNoIndex;
        ReceiveMatched(r, si, true);
      }
      if (waiting.empty())
        early_receives.erase(er);
    }
  }
}

// Keeps open_sends bounded: drops the oldest sends beyond kMaxOpenSends (counted in
// open_sends_dropped), and forgets order entries of sends completed since.
void Engine::Impl::DropOldestOpenSends() {
  auto live = [&](const std::pair<RequestKey, uint32_t>& o) {
    auto held = open_sends.find(o.first);
    return held != open_sends.end() && held->second == o.second;
  };
  while (open_sends.size() > kMaxOpenSends && !open_order.empty()) {
    auto o = open_order.front();
    open_order.pop_front();
    if (!live(o))
      continue;
    open_sends.erase(o.first);
    ReleaseSend(o.second);
    ++open_sends_dropped;
  }
  if (open_order.size() > 2 * kMaxOpenSends) {
    std::deque<std::pair<RequestKey, uint32_t>> kept;
    for (const auto& o : open_order)
      if (live(o))
        kept.push_back(o);
    open_order.swap(kept);
  }
}

// A nonblocking send (or collective, RMA request: not in open_sends) completed in this call.
void Engine::Impl::MpiRequestDone(Loc& l, const Event& e) {
  const RequestKey request{l.pid, e.args[0]};
  auto held = open_sends.find(request);
  if (held == open_sends.end())
    return;
  uint32_t si = held->second;
  open_sends.erase(held);
  if (!l.in_mpi) {
    ReleaseSend(si);
    return;
  }
  CallWaits& c = CurrentCall(l);
  PendingSend& s = sends[si];
  c.members.push_back(s.link);
  if (s.call != kNoIndex)
    ReleaseCall(s.call);
  s.call = l.call_waits;
  ++c.refs;
  l.call_sends.push_back(si);  // takes open_sends' hold
  if (s.recv_posted != kNone)
    c.parts.push_back({s.recv_posted, s.link, true});
  else
    ++c.unresolved;
}

void Engine::Impl::MpiRecv(Loc& l, const Event& e) {
  int32_t rank = Rank(l);
  int64_t peer = static_cast<int64_t>(e.args[0]);
  uint64_t posted = std::min(e.args[5], e.ts);
  ++l.messages_received;
  l.bytes_received += e.args[3];
  ++l.mpi_messages_received;
  l.mpi_bytes_received += e.args[3];
  has_comm = true;
  // The receive's link time is the completing call's (for MPI_Recv it was posted at entry; a
  // nonblocking receive completes in a Wait*/Test* entered after it was posted).
  EarlyReceive r{IndexOf(l), e.ts, posted, l.in_mpi ? std::max(posted, l.mpi_enter) : posted,
                 kNoIndex};
  const MatchKey key{peer, rank, e.args[2], e.args[1]};
  if (l.in_mpi)  // the call's time is this link's too, whether its send is seen or not
    CurrentCall(l).members.push_back(MpiLink(peer, rank));
  auto found = in_flight.find(key);
  Queue* queue = found == in_flight.end() ? nullptr : &found->second;
  if (!queue || queue->head == kNoIndex) {
    if (ws != session_start)
      return;  // its send is outside the window
    // Its send may come next on rank 0's clock (EarlyReceive): wait for it.
    auto& waiting = early_receives[key];
    DropStaleEarlyReceives(waiting, e.ts);
    if (l.in_mpi) {
      CallWaits& c = CurrentCall(l);
      ++c.unresolved;
      ++c.refs;
      r.call = l.call_waits;
    }
    waiting.push_back(r);
    return;
  }
  uint32_t si = queue->head;
  queue->head = sends[si].next;
  if (queue->head == kNoIndex) {
    queue->tail = kNoIndex;
    if (in_flight.size() > 4096)
      in_flight.erase(found);
  }
  if (l.in_mpi) {
    CurrentCall(l);
    r.call = l.call_waits;
  }
  ReceiveMatched(r, si, false);
}

void Engine::Impl::ReceiveMatched(const EarlyReceive& r, uint32_t si, bool deferred) {
  Loc& l = locs[r.loc];
  PendingSend& s = sends[si];
  LinkAgg& a = links[s.link];
  // Late sender: the call waited from its entry until the send started.
  if (r.call != kNoIndex) {
    CallWaits& c = calls[r.call];
    c.parts.push_back({std::min(s.ts, r.ts), s.link, false});
    if (deferred) {
      --c.unresolved;
      FinishCall(c);
      ReleaseCall(r.call);
    }
  } else {
    // A receive outside any MPI call: its own span is the link's time.
    a.r.time_ns += Clip(r.from, r.ts);
    LinkBusy(a, r.from, r.ts);
    if (s.ts > r.posted) {
      uint64_t late_sender = Clip(r.posted, std::min(s.ts, r.ts));
      l.late_sender += late_sender;
      AddWaitCall(WaitPattern::kLateSender, r.loc, "MPI", late_sender);
      a.r.receiver_wait_ns += late_sender;
      a.r.wait_ns += late_sender;
    }
  }
  // Late receiver: the call completing the send waited until this receive was posted.
  if (s.call != kNoIndex) {
    CallWaits& c = calls[s.call];
    c.parts.push_back({r.posted, s.link, true});
    --c.unresolved;
    FinishCall(c);
  } else {
    s.recv_posted = r.posted;  // a nonblocking send not completed yet
  }
  if (loop_clocks.Receive(r.loc, s.clock))
    ++a.r.closed_loop_messages;
  Adopt(l, s.cp, s.shares);
  ReleaseSend(si);  // in_flight's hold
}

void Engine::Impl::DropStaleEarlyReceives(std::deque<EarlyReceive>& waiting, uint64_t now) {
  while (!waiting.empty() && waiting.front().ts + kEarlyReceiveSlack < now) {
    const EarlyReceive& r = waiting.front();
    if (r.call != kNoIndex) {  // its call is resolved without it
      CallWaits& c = calls[r.call];
      --c.unresolved;
      FinishCall(c);
      ReleaseCall(r.call);
    }
    waiting.pop_front();
  }
}

// Calls still open at the end of the window, and calls whose sends were never received in it:
// what they waited for what was seen. The calls are shared with the engine a snapshot was copied
// from, so each is finished on a copy of its record.
void Engine::Impl::FlushOpenCalls() {
  std::set<uint32_t> seen;
  auto flush = [&](uint32_t c) {
    if (c == kNoIndex || calls[c].done || !seen.insert(c).second)
      return;
    CallWaits call = calls[c];
    call.unresolved = 0;
    if (call.leave == kNone)
      call.leave = locs[call.loc].last;
    FinishCall(call);
  };
  for (const auto& [key, queue] : in_flight)
    for (uint32_t s = queue.head; s != kNoIndex; s = sends[s].next)
      flush(sends[s].call);
  for (auto& l : locs)
    flush(l.call_waits);
  for (auto& [key, waiting] : early_receives)
    for (const EarlyReceive& r : waiting)
      flush(r.call);
}

}  // namespace parmon::analysis
