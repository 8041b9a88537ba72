// POSIX channel analyzer: pipes and sockets between recorded threads and processes. Endpoints
// are keyed by numbers (a pipe's inode, a socket's type and inodes, or a bare (pid, fd) until
// its ChanInfo is seen); reads on one end are matched with the writes on its peer for the
// critical path and the loop clocks, and each call's blocking time is a wait for the partner.
#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "analysis/engine_impl.h"

namespace parmon::analysis {

using format::Event;
using format::Kind;

EndpointKey EndpointKey::Peer(const Endpoint& ep) const {
  if (kind == kSocket && ep.peer != 0)
    return {kSocket, ep.type, ep.peer, ep.local};
  return *this;
}

std::string EndpointKey::Format() const {
  switch (kind) {
    case kFd:
      return fmt::format("fd:{}:{}", a, b);
    case kPipe:
      return fmt::format("pipe:{}", a);
    default:
      return fmt::format("sock:{}:{}:{}", a, b, c);
  }
}

namespace {

// The endpoint a ChanInfo (or, with type = local = peer = 0, a bare fd) describes.
EndpointKey KeyOf(uint32_t pid, uint64_t fd, uint64_t type, uint64_t local, uint64_t peer) {
  if (local == 0)
    return {EndpointKey::kFd, pid, fd, 0};
  if (type == 1 || type == 2)
    return {EndpointKey::kPipe, local, 0, 0};
  return {EndpointKey::kSocket, type, local, peer};
}

}  // namespace

void Engine::Impl::ChanInfo(uint32_t pid, const Event& e) {
  EndpointKey key = KeyOf(pid, e.args[0], e.args[1], e.args[2], e.args[3]);
  Endpoint& ep = endpoints[key];
  ep.type = static_cast<uint32_t>(e.args[1]);
  ep.local = e.args[2];
  ep.peer = e.args[3];
  if (ep.description.empty())
    ep.description = std::string(e.payload);
  fd_endpoint[{pid, e.args[0]}] = key;
}

void Engine::Impl::ChanIo(Loc& l, const Event& e) {
  has_comm = true;
  bool write = e.kind_enum() == Kind::kChanWrite;
  uint64_t begin = std::min(e.args[2], e.ts);
  int64_t bytes = static_cast<int64_t>(e.args[1]);
  uint32_t li = IndexOf(l);
  // The call's time, less what the thread spent preempted in it (queued for a CPU, from the
  // context-switch records): that is the CPUs' doing, not the peer's. Of the rest, with switch
  // records, only the time blocked off a CPU waits for the peer: running is the copy (a write to
  // /dev/null or into a pipe with room never waits); without them all of it is counted waiting.
  uint64_t time = Clip(begin, e.ts);
  time -= std::min(time, PreemptedWithin(l, begin, e.ts));
  const uint64_t wait = l.switch_timed ? std::min(time, BlockedWithin(l, begin, e.ts)) : time;
  if (!l.in_mpi) {
    Accrue(l, begin);
    AddWaitState(l, State::kCommWait, begin, e.ts);
    Mark(l, e.ts);
  }
  auto fit = fd_endpoint.find({l.pid, e.args[0]});
  EndpointKey key = fit != fd_endpoint.end() ? fit->second : KeyOf(l.pid, e.args[0], 0, 0, 0);
  Endpoint& ep = endpoints[key];
  auto& use = write ? ep.writers[li] : ep.readers[li];
  ++use.calls;
  use.time += time;
  use.wait += wait;
  if (bytes > 0)
    use.bytes += static_cast<uint64_t>(bytes);
  if (write) {
    if (bytes > 0) {
      ++l.messages_sent;
      l.bytes_sent += static_cast<uint64_t>(bytes);
    }
    ep.last_write_cp = l.cp;
    ep.last_write_shares = ShareSnapshot(l);
    if (bytes > 0)
      loop_clocks.StreamWrite(ep.stream, li, static_cast<uint64_t>(bytes),
                              [&](uint32_t w) { ++ep.writers[w].closed_loop; });
  } else if (bytes > 0) {
    ++l.messages_received;
    l.bytes_received += static_cast<uint64_t>(bytes);
    auto pit = endpoints.find(key.Peer(ep));
    if (pit != endpoints.end()) {
      Adopt(l, pit->second.last_write_cp, pit->second.last_write_shares);
      Endpoint& from = pit->second;
      loop_clocks.StreamRead(from.stream, li, static_cast<uint64_t>(bytes),
                             [&](uint32_t w) { ++from.writers[w].closed_loop; });
    }
    // Blocking time of a read that returned data is waiting for the writer (an empty channel).
  }
  const char* fname = write ? "write" : "read";
  std::string call = defs.Name(static_cast<uint32_t>(e.args[3]));
  if (call.empty() || call[0] == '#')
    call = fname;
  // A blocked channel call is a wait for the partner: the writer waits on a full channel (the
  // reader is late), the reader on an empty one (the writer is late).
  if (wait > 0)
    AddWaitCall(write ? WaitPattern::kBlockedSend : WaitPattern::kBlockedReceive, li, call, wait);
  pending_channel_busy.push_back({key, li, write, begin, e.ts});
  if (pending_channel_busy.size() > 4096)
    FlushChannelBusy();
}

void Engine::Impl::FlushChannelBusy() {
  for (const auto& c : pending_channel_busy) {
    auto& row = endpoint_busy[{c.key, c.write, c.loc}];
    if (row.empty())
      row.resize(iv_count);
    bins.Split(c.begin, c.end, [&](size_t i, uint64_t ns) { row[i] += ns; });
  }
  pending_channel_busy.clear();
}

void Engine::Impl::AddChannelLinks() {
  // Channel links: writes on an endpoint reach the readers of its peer endpoint. Which reader
  // got which writer's bytes is not recorded (a pipe's bytes are anonymous), but each reader's
  // own count is: with several readers (a pool reading one pipe) each writer's link to each
  // reader carries the reader's share of what was read, so every reader is credited with what
  // it read and none stands for the others. The readers' waits and busy time go on the links
  // of the writer that wrote most (as with one reader).
  for (auto& [key, ep] : endpoints) {
    if (ep.writers.empty())
      continue;
    auto pit = endpoints.find(key.Peer(ep));
    const Endpoint* peer = pit != endpoints.end() ? &pit->second : nullptr;
    uint64_t read_total = 0;
    std::vector<uint32_t> readers;
    if (peer)
      for (const auto& [li, u] : peer->readers)
        read_total += u.bytes;
    if (peer)
      for (const auto& [li, u] : peer->readers)
        if (u.bytes > 0 || read_total == 0)
          readers.push_back(li);
    if (readers.empty())
      readers.push_back(UINT32_MAX);  // nobody recorded reading: the link ends at the channel
    uint32_t main_writer = ep.writers.begin()->first;
    uint64_t best = 0;
    for (const auto& [li, u] : ep.writers)
      if (u.bytes >= best) {
        best = u.bytes;
        main_writer = li;
      }
    for (const auto& [wli, u] : ep.writers)
      for (uint32_t rli : readers) {
        const Endpoint::Use* ru = rli == UINT32_MAX ? nullptr : &peer->readers.at(rli);
        // This reader's share of what was read (1 with one reader; evenly when none read).
        auto part = [&](uint64_t v) -> uint64_t {
          if (readers.size() == 1)
            return v;
          if (read_total == 0)
            return v / readers.size();
          return static_cast<uint64_t>(static_cast<unsigned __int128>(v) * ru->bytes / read_total);
        };
        AddChannelLink(key, ep, wli, u, rli, ru, wli == main_writer, part);
      }
  }
}

template <typename Part>
void Engine::Impl::AddChannelLink(const EndpointKey& key,
                                  const Endpoint& ep,
                                  uint32_t wli,
                                  const Endpoint::Use& u,
                                  uint32_t rli,
                                  const Endpoint::Use* ru,
                                  bool main_writer,
                                  Part part) {
  LinkAgg a;
  a.r.type = LinkKind::kChannel;
  a.r.kind = "channel";
  a.r.from = locs[wli].id;
  a.r.to = ru ? locs[rli].id : -1;
  a.r.from_location = a.r.from;
  a.r.to_location = a.r.to;
  a.r.messages = part(u.calls);
  a.r.bytes = part(u.bytes);
  a.r.sender_wait_ns = part(u.wait);
  a.r.time_ns = part(u.time);
  a.r.closed_loop_messages = part(u.closed_loop);
  a.busy.assign(iv_count, 0);
  a.bytes.assign(iv_count, 0);
  if (auto bit = endpoint_busy.find({key, true, wli}); bit != endpoint_busy.end())
    for (size_t i = 0; i < iv_count; ++i)
      a.busy[i] += part(bit->second[i]);
  if (main_writer && ru) {
    a.r.receiver_wait_ns += ru->wait;
    a.r.time_ns += ru->time;
    if (auto bit = endpoint_busy.find({key.Peer(ep), false, rli}); bit != endpoint_busy.end())
      for (size_t i = 0; i < iv_count; ++i)
        a.busy[i] += bit->second[i];
  }
  // TIME is the calls' time (less preemption), WAIT its part blocked for the partner; the rest
  // is the copy (transfer).
  a.r.wait_ns = a.r.sender_wait_ns + a.r.receiver_wait_ns;
  a.r.channel = key.Format();
  a.r.from_label = Label(locs[wli]);
  a.r.to_label = ru ? Label(locs[rli]) : (ep.description.empty() ? key.Format() : ep.description);
  links.push_back(std::move(a));
}

}  // namespace parmon::analysis
