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

size_t Engine::Impl::MpiLink(int64_t from, int64_t to) {
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
  return it->second;
}
void Engine::Impl::LinkBusy(LinkAgg& a, uint64_t b, uint64_t e) {
  bins.Split(b, e, [&](size_t i, uint64_t ns) { a.busy[i] += ns; });
}

void Engine::Impl::MpiLeave(Loc& l, const Event& e) {
  if (!l.in_mpi)
    return;  // entered before the window
  l.in_mpi = false;
  const MpiFunc& f = Func(l.mpi_func);
  uint64_t d = Clip(l.mpi_enter, e.ts);
  l.mpi_ns += d;
  ++l.mpi_calls;
  if (f.family == MpiFamilyId::kInit)
    l.mpi_init_ns += d;
  CallFamilyStat& fam = l.families[static_cast<size_t>(f.family)];
  ++fam.calls;
  fam.ns += d;
  AddWaitState(l, State::kCommWait, l.mpi_enter, e.ts);
  // The call's time is link time of the sends it completed (a blocking send, or nonblocking
  // ones completed in a Wait*/Test*); a nonblocking send's own call is not.
  for (auto& s : l.call_sends) {
    LinkAgg& a = links[s->link];
    uint64_t from = std::max(s->ts, l.mpi_enter);
    a.r.time_ns += Clip(from, e.ts);
    LinkBusy(a, from, e.ts);
  }
  l.call_sends.clear();
  if (l.call_waits) {
    l.call_waits->leave = e.ts;
    FinishCall(*l.call_waits);
    l.call_waits.reset();
  }
  l.cp_mark = e.ts;
}

// The record of the open MPI call's message waits, created when it first completes one.
CallWaits& Engine::Impl::CurrentCall(Loc& l) {
  if (!l.call_waits) {
    l.call_waits = std::make_shared<CallWaits>();
    l.call_waits->loc = IndexOf(l);
    l.call_waits->func = l.mpi_func;
    l.call_waits->enter = l.mpi_enter;
  }
  return *l.call_waits;
}

// A call's waits, once it has returned and the receive of every send it completed is known.
// Every message's wait starts at the call's entry (a receive was posted, a send started, at
// or before it) and ends when its partner arrived; the call waited until the last of them.
// Sorted by that end, each message is charged the stretch from the previous end to its own:
// the time the call waited for it alone, so the charges add up to the call's wait.
void Engine::Impl::FinishCall(CallWaits& c) {
  if (c.done || c.leave == kNone || c.unresolved > 0)
    return;
  c.done = true;
  std::sort(c.parts.begin(), c.parts.end(),
            [](const CallWaits::Part& a, const CallWaits::Part& b) { return a.end < b.end; });
  uint64_t prev = c.enter, late_sender = 0, late_receiver = 0;
  for (const auto& p : c.parts) {
    uint64_t end = std::min(std::max(p.end, c.enter), c.leave);
    uint64_t w = end > prev ? Clip(prev, end) : 0;
    prev = std::max(prev, end);
    if (!w)
      continue;
    LinkAgg& a = links[p.link];
    (p.send ? a.r.sender_wait_ns : a.r.receiver_wait_ns) += w;
    a.r.wait_ns += w;
    (p.send ? late_receiver : late_sender) += w;
  }
  Loc& l = locs[c.loc];
  const std::string& call = Func(c.func).name;
  l.late_sender += late_sender;
  l.late_receiver += late_receiver;
  AddWaitCall(WaitPattern::kLateSender, c.loc, call, late_sender);
  AddWaitCall(WaitPattern::kLateReceiver, c.loc, call, late_receiver);
  c.parts.clear();
}

void Engine::Impl::MpiSend(Loc& l, const Event& e) {
  int32_t rank = RankOf(l);
  int64_t peer = static_cast<int64_t>(e.args[0]);
  auto s = std::make_shared<PendingSend>();
  s->ts = e.ts;
  s->loc = IndexOf(l);
  s->blocking = e.args[4] == 0;
  s->link = MpiLink(rank, peer);
  s->cp = l.cp + (l.cp_mark != kNone && e.ts > l.cp_mark ? Clip(l.cp_mark, e.ts) : 0);
  s->shares = ShareSnapshot(l);
  s->clock = loop_clocks.Send(s->loc);
  LinkAgg& a = links[s->link];
  ++a.r.messages;
  a.r.bytes += e.args[3];
  a.bytes[IntervalOf(e.ts)] += e.args[3];
  ++l.messages_sent;
  l.bytes_sent += e.args[3];
  in_flight[{rank, peer, e.args[2], e.args[1]}].push_back(s);
  if (s->blocking && l.in_mpi) {
    ++CurrentCall(l).unresolved;
    s->call = l.call_waits;
    l.call_sends.push_back(s);
  } else if (!s->blocking) {
    open_sends[{l.pid, e.args[4]}] = s;
  }
  has_comm = true;
}

// A nonblocking send (or collective, RMA request: not in open_sends) completed in this call.
void Engine::Impl::MpiRequestDone(Loc& l, const Event& e) {
  auto it = open_sends.find({l.pid, e.args[0]});
  if (it == open_sends.end())
    return;
  std::shared_ptr<PendingSend> s = std::move(it->second);
  open_sends.erase(it);
  if (!l.in_mpi)
    return;
  CallWaits& c = CurrentCall(l);
  s->call = l.call_waits;
  l.call_sends.push_back(s);
  if (s->recv_posted != kNone)
    c.parts.push_back({s->recv_posted, s->link, true});
  else
    ++c.unresolved;
}

void Engine::Impl::MpiRecv(Loc& l, const Event& e) {
  int32_t rank = RankOf(l);
  int64_t peer = static_cast<int64_t>(e.args[0]);
  uint64_t posted = std::min(e.args[5], e.ts);
  ++l.messages_received;
  l.bytes_received += e.args[3];
  has_comm = true;
  auto it = in_flight.find({peer, rank, e.args[2], e.args[1]});
  if (it == in_flight.end() || it->second.empty())
    return;  // its send is outside the window
  std::shared_ptr<PendingSend> s = std::move(it->second.front());
  it->second.erase(it->second.begin());
  if (it->second.empty())
    in_flight.erase(it);
  LinkAgg& a = links[s->link];
  // The receive's link time is the completing call's (for MPI_Recv it was posted at entry; a
  // nonblocking receive completes in a Wait*/Test* entered after it was posted).
  uint64_t from = l.in_mpi ? std::max(posted, l.mpi_enter) : posted;
  a.r.time_ns += Clip(from, e.ts);
  LinkBusy(a, from, e.ts);
  // Late sender: the call waited from its entry until the send started.
  if (l.in_mpi) {
    CurrentCall(l).parts.push_back({std::min(s->ts, e.ts), s->link, false});
  } else if (s->ts > posted) {
    uint64_t late_sender = Clip(posted, std::min(s->ts, e.ts));
    l.late_sender += late_sender;
    AddWaitCall(WaitPattern::kLateSender, IndexOf(l), "MPI", late_sender);
    a.r.receiver_wait_ns += late_sender;
    a.r.wait_ns += late_sender;
  }
  // Late receiver: the call completing the send waited until this receive was posted.
  if (s->call) {
    s->call->parts.push_back({posted, s->link, true});
    --s->call->unresolved;
    FinishCall(*s->call);
  } else {
    s->recv_posted = posted;  // a nonblocking send not completed yet
  }
  if (loop_clocks.Receive(IndexOf(l), s->clock))
    ++a.r.closed_loop_messages;
  Adopt(l, s->cp, s->shares);
}

// Calls still open at the end of the window, and calls whose sends were never received in it:
// what they waited for what was seen. The calls are shared with the engine a snapshot was copied
// from, so each is finished on a copy of its record.
void Engine::Impl::FlushOpenCalls() {
  std::set<const CallWaits*> seen;
  auto flush = [&](const std::shared_ptr<CallWaits>& c) {
    if (!c || c->done || !seen.insert(c.get()).second)
      return;
    CallWaits call = *c;
    call.unresolved = 0;
    if (call.leave == kNone)
      call.leave = locs[call.loc].last;
    FinishCall(call);
  };
  for (auto& [key, queue] : in_flight)
    for (auto& s : queue)
      flush(s->call);
  for (auto& l : locs)
    flush(l.call_waits);
}

}  // namespace parmon::analysis
