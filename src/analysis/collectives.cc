// Collectives analyzer: the N-to-N collectives (a barrier, an all-reduce, ...) of one
// communicator are matched by their sequence number on each member; once every member has
// entered, each waited from its own entry until the last one entered (wait at barrier, wait at
// N-to-N), and every member leaves with the longest critical path among them.
#include <algorithm>
#include <memory>
#include <string>

#include "analysis/engine_impl.h"

namespace parmon::analysis {

using format::Event;
using format::Kind;

void Engine::Impl::MpiCollective(Loc& l, const Event& e) {
  has_comm = true;
  if (e.args[5] != 0 || !l.in_mpi)
    return;  // nonblocking: the wait is in Wait*, not here
  const MpiFunc& f = FuncOf(static_cast<uint32_t>(e.args[0]));
  if (!f.n_to_n)
    return;
  uint64_t comm = e.args[1];
  uint32_t size = comm == 1 ? world_size : 0;
  if (auto it = comm_size.find(comm); it != comm_size.end())
    size = it->second;
  if (size < 2)
    return;
  uint32_t li = IndexOf(l);
  uint64_t seq = coll_seq[{comm, li}]++;
  CollectiveInstance& c = collectives[{comm, seq}];
  c.func = static_cast<uint32_t>(e.args[0]);
  c.members.push_back({li, l.mpi_enter});
  if (l.mpi_enter >= c.max_enter)
    c.max_enter = l.mpi_enter;
  if (l.cp >= c.max_cp) {
    c.max_cp = l.cp;
    c.max_shares = ShareSnapshot(l);
  }
  if (c.members.size() < size)
    return;
  // Everyone has arrived: each member waited from its entry until the last one entered.
  for (auto [mi, enter] : c.members) {
    Loc& m = locs[mi];
    uint64_t w = Clip(enter, c.max_enter);
    if (f.barrier) {
      m.barrier_wait += w;
      AddWaitCall(WaitPattern::kBarrier, mi, f.name, w);
    } else {
      m.collective_wait += w;
      AddWaitCall(WaitPattern::kNToN, mi, f.name, w);
    }
    Adopt(m, c.max_cp, c.max_shares);
  }
  collectives.erase({comm, seq});
}

}  // namespace parmon::analysis
