// libparmon_mpi's collective hooks. Each overload of OnCollective serves one argument shape
// (the generator's COLL table picks it, docs/events.md lists the shapes) and works out the bytes
// this rank sends and receives from the counts, types and root; nonblocking and persistent
// forms carry the request that completes them. A blocking collective on the world communicator
// also counts towards the next clock synchronisation (mpi_core.cc).
#include <atomic>

#include "preload/common/preload.h"
#include "preload/mpi/mpi_core.h"
#include "preload/mpi/mpi_state.h"

namespace parmon::preload::mpi {

// ---- collectives -----------------------------------------------------------------------------
namespace {
// A nonblocking collective MPI completed inside the call (NewCollRequest): EmitColl reports its
// completion right after its MpiCollective, so the trace stays in time order.
__thread uint64_t t_done_now __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace

uint64_t NewCollRequest(Call& c, MPI_Request req) {
  NewRequest r = TrackRequest(req, kReqOther, c.t0, nullptr, false, MPI_STATUS_IGNORE);
  if (r.done) [[unlikely]]
    t_done_now = r.id;
  return r.id;
}

namespace {
inline bool InPlace(const void* p) {
  return p == MPI_IN_PLACE;
}

uint64_t Sum(const int* counts, int n, int skip) {
  uint64_t s = 0;
  for (int i = 0; i < n; ++i)
    if (i != skip && counts[i] > 0)
      s += static_cast<uint64_t>(counts[i]);
  return s;
}

void NeighborCounts(MPI_Comm comm, int* in, int* out) {
  int topo = MPI_UNDEFINED;
  *in = *out = 0;
  PMPI_Topo_test(comm, &topo);
  if (topo == MPI_CART) {
    int nd = 0;
    PMPI_Cartdim_get(comm, &nd);
    *in = *out = 2 * nd;
  } else if (topo == MPI_GRAPH) {
    int me = 0, n = 0;
    PMPI_Comm_rank(comm, &me);
    PMPI_Graph_neighbors_count(comm, me, &n);
    *in = *out = n;
  } else if (topo == MPI_DIST_GRAPH) {
    int weighted = 0;
    PMPI_Dist_graph_neighbors_count(comm, in, out, &weighted);
  }
}

void EmitColl(Call& c, uint64_t request, CommInfo* info, int root, uint64_t sent, uint64_t recv) {
  c.bytes += sent + recv;
  if (info == &g_world_info && request == 0 && ++g_world_collectives == g_next_sync_at)
    ClockSync();
  if (g_periodic)
    return;
  uint64_t a[6] = {FnId(c.fn),
                   info ? info->id : 0,
                   root == MPI_UNDEFINED ? kNone : WorldRank(info, root),
                   sent,
                   recv,
                   request};
  EmitAt(c.t0, Kind::kMpiCollective, a, 6);
  if (request != 0 && request == t_done_now) [[unlikely]] {
    t_done_now = 0;
    uint64_t d[2] = {request, c.t0};
    EmitAt(CompletionTime(c), Kind::kMpiRequestDone, d, 2);
  }
}

struct Me {
  CommInfo* info;
  int n, rank;
};
Me Who(MPI_Comm comm) {
  CommInfo* info = Comm(comm);
  Me m{info, 0, 0};
  if (info) {
    m.n = info->size;
    m.rank = info->rank;
  }
  return m;
}
}  // namespace

// barrier
void OnCollective(Call& c, Coll, uint64_t request, MPI_Comm comm) {
  EmitColl(c, request, Comm(comm), MPI_UNDEFINED, 0, 0);
}
// bcast
void OnCollective(Call& c,
                  Coll,
                  uint64_t request,
                  int count,
                  MPI_Datatype type,
                  int root,
                  MPI_Comm comm) {
  Me m = Who(comm);
  uint64_t b = Bytes(count, type);
  bool is_root = m.rank == root;
  EmitColl(c, request, m.info, root, is_root ? b * static_cast<uint64_t>(m.n - 1) : 0,
           is_root ? 0 : b);
}
// reduce
void OnCollective(Call& c,
                  Coll,
                  uint64_t request,
                  const void*,
                  int count,
                  MPI_Datatype type,
                  int root,
                  MPI_Comm comm) {
  Me m = Who(comm);
  uint64_t b = Bytes(count, type);
  bool is_root = m.rank == root;
  EmitColl(c, request, m.info, root, is_root ? 0 : b,
           is_root ? b * static_cast<uint64_t>(m.n - 1) : 0);
}
// allreduce, scan, exscan, reduce_scatter_block
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  const void*,
                  int count,
                  MPI_Datatype type,
                  MPI_Comm comm) {
  Me m = Who(comm);
  uint64_t b = Bytes(count, type);
  if (shape == Coll::k_redscat_block)
    EmitColl(c, request, m.info, MPI_UNDEFINED, b * static_cast<uint64_t>(m.n), b);
  else
    EmitColl(c, request, m.info, MPI_UNDEFINED, b, b);
}
// reduce_scatter
void OnCollective(Call& c,
                  Coll,
                  uint64_t request,
                  const void*,
                  const int* counts,
                  MPI_Datatype type,
                  MPI_Comm comm) {
  Me m = Who(comm);
  uint64_t ts = static_cast<uint64_t>(TypeSize(type));
  uint64_t mine = m.rank < m.n && counts[m.rank] > 0 ? static_cast<uint64_t>(counts[m.rank]) : 0;
  EmitColl(c, request, m.info, MPI_UNDEFINED, Sum(counts, m.n, -1) * ts, mine * ts);
}
// gather
void OnCollective(Call& c,
                  Coll,
                  uint64_t request,
                  const void*,
                  int scount,
                  MPI_Datatype stype,
                  int rcount,
                  MPI_Datatype rtype,
                  int root,
                  MPI_Comm comm) {
  Me m = Who(comm);
  if (m.rank == root)
    EmitColl(c, request, m.info, root, 0, Bytes(rcount, rtype) * static_cast<uint64_t>(m.n - 1));
  else
    EmitColl(c, request, m.info, root, Bytes(scount, stype), 0);
}
// scatter
void OnCollective(Call& c,
                  Coll,
                  uint64_t request,
                  int scount,
                  MPI_Datatype stype,
                  const void*,
                  int rcount,
                  MPI_Datatype rtype,
                  int root,
                  MPI_Comm comm) {
  Me m = Who(comm);
  if (m.rank == root)
    EmitColl(c, request, m.info, root, Bytes(scount, stype) * static_cast<uint64_t>(m.n - 1), 0);
  else
    EmitColl(c, request, m.info, root, 0, Bytes(rcount, rtype));
}
// allgather, alltoall
void OnCollective(Call& c,
                  Coll,
                  uint64_t request,
                  const void* sendbuf,
                  int scount,
                  MPI_Datatype stype,
                  int rcount,
                  MPI_Datatype rtype,
                  MPI_Comm comm) {
  Me m = Who(comm);
  uint64_t r = Bytes(rcount, rtype);
  uint64_t s = InPlace(sendbuf) ? r : Bytes(scount, stype);
  uint64_t others = static_cast<uint64_t>(m.n > 0 ? m.n - 1 : 0);
  EmitColl(c, request, m.info, MPI_UNDEFINED, s * others, r * others);
}
// gatherv
void OnCollective(Call& c,
                  Coll,
                  uint64_t request,
                  const void*,
                  int scount,
                  MPI_Datatype stype,
                  const int* rcounts,
                  MPI_Datatype rtype,
                  int root,
                  MPI_Comm comm) {
  Me m = Who(comm);
  if (m.rank == root)
    EmitColl(c, request, m.info, root, 0,
             Sum(rcounts, m.n, m.rank) * static_cast<uint64_t>(TypeSize(rtype)));
  else
    EmitColl(c, request, m.info, root, Bytes(scount, stype), 0);
}
// scatterv
void OnCollective(Call& c,
                  Coll,
                  uint64_t request,
                  const int* scounts,
                  MPI_Datatype stype,
                  const void*,
                  int rcount,
                  MPI_Datatype rtype,
                  int root,
                  MPI_Comm comm) {
  Me m = Who(comm);
  if (m.rank == root)
    EmitColl(c, request, m.info, root,
             Sum(scounts, m.n, m.rank) * static_cast<uint64_t>(TypeSize(stype)), 0);
  else
    EmitColl(c, request, m.info, root, 0, Bytes(rcount, rtype));
}
// allgatherv
void OnCollective(Call& c,
                  Coll,
                  uint64_t request,
                  const void* sendbuf,
                  int scount,
                  MPI_Datatype stype,
                  const int* rcounts,
                  MPI_Datatype rtype,
                  MPI_Comm comm) {
  Me m = Who(comm);
  uint64_t rts = static_cast<uint64_t>(TypeSize(rtype));
  uint64_t s = InPlace(sendbuf) ? (m.rank < m.n ? static_cast<uint64_t>(rcounts[m.rank]) * rts : 0)
                                : Bytes(scount, stype);
  EmitColl(c, request, m.info, MPI_UNDEFINED, s * static_cast<uint64_t>(m.n > 0 ? m.n - 1 : 0),
           Sum(rcounts, m.n, m.rank) * rts);
}
// alltoallv
void OnCollective(Call& c,
                  Coll,
                  uint64_t request,
                  const void* sendbuf,
                  const int* scounts,
                  MPI_Datatype stype,
                  const int* rcounts,
                  MPI_Datatype rtype,
                  MPI_Comm comm) {
  Me m = Who(comm);
  uint64_t rts = static_cast<uint64_t>(TypeSize(rtype));
  uint64_t r = Sum(rcounts, m.n, m.rank) * rts;
  uint64_t s =
      InPlace(sendbuf) ? r : Sum(scounts, m.n, m.rank) * static_cast<uint64_t>(TypeSize(stype));
  EmitColl(c, request, m.info, MPI_UNDEFINED, s, r);
}
// alltoallw
void OnCollective(Call& c,
                  Coll,
                  uint64_t request,
                  const void* sendbuf,
                  const int* scounts,
                  TypeArray stypes,
                  const int* rcounts,
                  TypeArray rtypes,
                  MPI_Comm comm) {
  Me m = Who(comm);
  uint64_t s = 0, r = 0;
  for (int i = 0; i < m.n; ++i) {
    if (i == m.rank)
      continue;
    r += Bytes(rcounts[i], rtypes.At(i));
    if (!InPlace(sendbuf))
      s += Bytes(scounts[i], stypes.At(i));
  }
  if (InPlace(sendbuf))
    s = r;
  EmitColl(c, request, m.info, MPI_UNDEFINED, s, r);
}
// neighbor_allgather, neighbor_alltoall
void OnCollective(Call& c,
                  Coll,
                  uint64_t request,
                  int scount,
                  MPI_Datatype stype,
                  int rcount,
                  MPI_Datatype rtype,
                  MPI_Comm comm) {
  int in = 0, out = 0;
  NeighborCounts(comm, &in, &out);
  EmitColl(c, request, Comm(comm), MPI_UNDEFINED, Bytes(scount, stype) * static_cast<uint64_t>(out),
           Bytes(rcount, rtype) * static_cast<uint64_t>(in));
}
// neighbor_allgatherv
void OnCollective(Call& c,
                  Coll,
                  uint64_t request,
                  int scount,
                  MPI_Datatype stype,
                  const int* rcounts,
                  MPI_Datatype rtype,
                  MPI_Comm comm) {
  int in = 0, out = 0;
  NeighborCounts(comm, &in, &out);
  EmitColl(c, request, Comm(comm), MPI_UNDEFINED, Bytes(scount, stype) * static_cast<uint64_t>(out),
           Sum(rcounts, in, -1) * static_cast<uint64_t>(TypeSize(rtype)));
}
// neighbor_alltoallv
void OnCollective(Call& c,
                  Coll,
                  uint64_t request,
                  const int* scounts,
                  MPI_Datatype stype,
                  const int* rcounts,
                  MPI_Datatype rtype,
                  MPI_Comm comm) {
  int in = 0, out = 0;
  NeighborCounts(comm, &in, &out);
  EmitColl(c, request, Comm(comm), MPI_UNDEFINED,
           Sum(scounts, out, -1) * static_cast<uint64_t>(TypeSize(stype)),
           Sum(rcounts, in, -1) * static_cast<uint64_t>(TypeSize(rtype)));
}
// neighbor_alltoallw
void OnCollective(Call& c,
                  Coll,
                  uint64_t request,
                  const int* scounts,
                  TypeArray stypes,
                  const int* rcounts,
                  TypeArray rtypes,
                  MPI_Comm comm) {
  int in = 0, out = 0;
  NeighborCounts(comm, &in, &out);
  uint64_t s = 0, r = 0;
  for (int i = 0; i < out; ++i)
    s += Bytes(scounts[i], stypes.At(i));
  for (int i = 0; i < in; ++i)
    r += Bytes(rcounts[i], rtypes.At(i));
  EmitColl(c, request, Comm(comm), MPI_UNDEFINED, s, r);
}
}  // namespace parmon::preload::mpi
