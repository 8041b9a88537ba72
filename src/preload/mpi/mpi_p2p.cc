// libparmon_mpi's point-to-point hooks: sends (MpiSend at the call's entry time), receives
// (MpiRecv at completion, with the posted time so the analysis sees late senders and late
// receivers), persistent requests, and the completion calls (MPI_Wait*, MPI_Test*,
// MPI_Request_free) that finish nonblocking requests. Statuses the program asked to ignore are
// replaced by our own (StatusArray) so sources and sizes can still be read.
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "preload/common/preload.h"
#include "preload/mpi/mpi_core.h"
#include "preload/mpi/mpi_state.h"

namespace parmon::preload::mpi {

// ---- point to point --------------------------------------------------------------------------
void OnSend(Call& c,
            int count,
            MPI_Datatype type,
            int dest,
            int tag,
            MPI_Comm comm,
            uint64_t request) {
  if (dest == MPI_PROC_NULL)
    return;
  CommInfo* info = Comm(comm);
  uint64_t bytes = Bytes(count, type);
  uint64_t peer = WorldRank(info, dest);
  c.bytes += bytes;
  if (g_periodic) {
    CountPeer(peer, bytes);
    return;
  }
  uint64_t a[5] = {peer, static_cast<uint64_t>(static_cast<int64_t>(tag)), info ? info->id : 0,
                   bytes, request};
  EmitAt(c.t0, Kind::kMpiSend, a, 5);
}

void OnNewSend(Call& c,
               MPI_Request req,
               int count,
               MPI_Datatype type,
               int dest,
               int tag,
               MPI_Comm comm,
               bool persistent) {
  if (dest == MPI_PROC_NULL && !persistent)
    return;
  CommInfo* info = Comm(comm);
  NewRequest r = TrackRequest(req, kReqSend, c.t0, info, persistent, MPI_STATUS_IGNORE);
  if (persistent) {
    if (ReqSlot* s = FindReq(Key(req))) {
      s->peer = dest == MPI_PROC_NULL ? kNone : WorldRank(info, dest);
      s->tag = static_cast<uint64_t>(static_cast<int64_t>(tag));
      s->bytes = Bytes(count, type);
    }
    return;
  }
  OnSend(c, count, type, dest, tag, comm, r.id);
  if (r.done && !g_periodic) [[unlikely]] {
    uint64_t a[2] = {r.id, c.t0};
    EmitAt(CompletionTime(c), Kind::kMpiRequestDone, a, 2);
  }
}

namespace {
void RecvDone(Call& c, uint64_t posted, CommInfo* info, const MPI_Status* st, uint64_t request);
}  // namespace

void OnNewRecv(Call& c, MPI_Request req, MPI_Comm comm, bool persistent) {
  CommInfo* info = Comm(comm);
  MPI_Status st;
  NewRequest r = TrackRequest(req, kReqRecv, c.t0, info, persistent, &st);
  if (r.done && r.has_status) [[unlikely]]
    RecvDone(c, c.t0, info, &st, r.id);
}

namespace {
void RecvDone(Call& c, uint64_t posted, CommInfo* info, const MPI_Status* st, uint64_t request) {
  if (st == nullptr || st->MPI_SOURCE == MPI_PROC_NULL || st->MPI_SOURCE == MPI_ANY_SOURCE)
    return;
  int n = 0;
  PMPI_Get_count(st, MPI_BYTE, &n);
  uint64_t bytes = n > 0 ? static_cast<uint64_t>(n) : 0;
  c.bytes += bytes;
  if (g_periodic)
    return;
  uint64_t a[6] = {WorldRank(info, st->MPI_SOURCE),
                   static_cast<uint64_t>(static_cast<int64_t>(st->MPI_TAG)),
                   info ? info->id : 0,
                   bytes,
                   request,
                   posted};
  EmitAt(CompletionTime(c), Kind::kMpiRecv, a, 6);
}
}  // namespace

void OnRecvDone(Call& c, uint64_t posted, MPI_Comm comm, const MPI_Status* st, uint64_t request) {
  RecvDone(c, posted, comm == MPI_COMM_NULL ? nullptr : Comm(comm), st, request);
}

void OnStart(Call& c, MPI_Request req) {
  ReqSlot* s = FindReq(Key(req));
  if (s == nullptr)
    return;
  s->active = true;
  s->posted = c.t0;
  s->id = g_next_request.fetch_add(1, std::memory_order_relaxed);
  if (s->kind == kReqSend && s->peer != kNone) {
    c.bytes += s->bytes;
    if (g_periodic) {
      CountPeer(s->peer, s->bytes);
      return;
    }
    uint64_t a[5] = {s->peer, s->tag, s->comm ? s->comm->id : 0, s->bytes, s->id};
    EmitAt(c.t0, Kind::kMpiSend, a, 5);
  }
}

void OnStartAll(Call& c, int n, const MPI_Request* creqs, const MPI_Fint* freqs) {
  for (int i = 0; i < n; ++i)
    OnStart(c, creqs ? creqs[i] : PMPI_Request_f2c(freqs[i]));
}

// ---- statuses --------------------------------------------------------------------------------
namespace {
__thread MPI_Status t_cstatus __attribute__((tls_model("initial-exec")));
constexpr int kFortranStride = static_cast<int>(sizeof(MPI_Status) / sizeof(MPI_Fint));
}  // namespace

bool FortranStatusIgnored(const void* fstatus) {
  return fstatus == MPI_F_STATUS_IGNORE;
}

const MPI_Status* CStatus(const MPI_Fint* fstatus) {
  PMPI_Status_f2c(fstatus, &t_cstatus);
  return &t_cstatus;
}

StatusArray::StatusArray(int n, void* program_array, bool fortran)
    : arg_(program_array), fortran_(fortran), owned_(false) {
  bool ignored =
      fortran ? program_array == MPI_F_STATUSES_IGNORE : program_array == MPI_STATUSES_IGNORE;
  if (!ignored || n <= 0)
    return;
  if (n <= 8) {
    arg_ = fortran ? static_cast<void*>(small_f_) : static_cast<void*>(small_);
    return;
  }
  arg_ = malloc(static_cast<size_t>(n) *
                (fortran ? kFortranStride * sizeof(MPI_Fint) : sizeof(MPI_Status)));
  owned_ = arg_ != nullptr;
  if (!owned_)
    arg_ = program_array;  // no memory: record without sources, change nothing
}

StatusArray::~StatusArray() {
  if (owned_)
    free(arg_);
}

const MPI_Status* StatusArray::At(int i) {
  if (arg_ == MPI_STATUSES_IGNORE || (fortran_ && arg_ == MPI_F_STATUSES_IGNORE))
    return nullptr;
  if (!fortran_)
    return static_cast<const MPI_Status*>(arg_) + i;
  PMPI_Status_f2c(static_cast<const MPI_Fint*>(arg_) + i * kFortranStride, &converted_);
  return &converted_;
}

// ---- completion ------------------------------------------------------------------------------
struct Completion::Entry {
  uint64_t key;
  uint64_t id;
  uint64_t posted;
  CommInfo* comm;
  uint8_t kind;  // 0: not tracked (or a repeat of entry `first`)
  bool persistent;
  bool removed;  // taken out of the table before the call (put back if it did not complete)
  uint8_t pad;
  int32_t first;  // >= 0: the same handle as this earlier entry
};
static_assert(sizeof(Completion::Entry) == 40 || sizeof(Completion::Entry) <= 48);

Completion::Completion(int n, const MPI_Request* creqs, const MPI_Fint* freqs)
    : n_(n > 0 ? n : 0), entries_(nullptr) {
  small_ = reinterpret_cast<Entry*>(storage_);
  entries_ =
      n_ <= 8 ? small_ : static_cast<Entry*>(malloc(sizeof(Entry) * static_cast<size_t>(n_)));
  if (entries_ == nullptr) {
    n_ = 0;
    return;
  }
  for (int i = 0; i < n_; ++i) {
    Entry& e = entries_[i];
    e.kind = 0;
    e.first = -1;
    e.removed = false;
    MPI_Request r = creqs ? creqs[i] : PMPI_Request_f2c(freqs[i]);
    if (r == MPI_REQUEST_NULL)
      continue;
    e.key = Key(r);
    ReqSlot* s = FindReq(e.key);
    if (s == nullptr || !s->active)
      continue;
    e.id = s->id;
    e.posted = s->posted;
    e.comm = s->comm;
    e.kind = s->kind;
    e.persistent = s->persistent;
  }
  DropDuplicates();
  // Below MPI_THREAD_MULTIPLE no other thread calls MPI before this call's wrapper returns, so the
  // entries stay in the table: Done takes out those that completed. A polling loop (MPI_Testany
  // of nothing yet) then costs no compare-exchange per request and call.
  if (!g_thread_multiple.load(std::memory_order_relaxed))
    return;
  // MPI_THREAD_MULTIPLE: once the call below completes a (non-persistent) request, MPI frees
  // its handle and another thread's MPI_Irecv or MPI_Isend may get the same handle before this
  // thread is back here to untrack it; the table would then still hold this request under that
  // handle, and the other thread's new request would be taken for a completed one sharing it.
  // So the entries are taken out of the table now, while the handles are still this thread's,
  // and those that did not complete are put back when the call has returned (~Completion).
  for (int i = 0; i < n_; ++i) {
    Entry& e = entries_[i];
    if (e.kind == 0 || e.persistent)
      continue;
    ReqSlot* s = FindReq(e.key);
    uint64_t k = e.key;
    if (s != nullptr && s->id == e.id &&
        s->key.compare_exchange_strong(k, kTomb, std::memory_order_acq_rel))
      e.removed = true;
  }
}

// One handle twice in the array (a request object MPI shares among requests it completed at
// once; TrackRequest reported all but the first already): its request completes once, when
// MPI first reports any of its entries (Done redirects a repeat to the first entry).
// Small arrays compare pairwise; large ones sort (key, index) pairs once.
void Completion::DropDuplicates() {
  if (n_ <= 32) {
    for (int i = 1; i < n_; ++i) {
      if (entries_[i].kind == 0)
        continue;
      for (int j = 0; j < i; ++j)
        if (entries_[j].kind != 0 && entries_[j].key == entries_[i].key) {
          entries_[i].kind = 0;
          entries_[i].first = j;
          break;
        }
    }
    return;
  }
  auto* order = static_cast<std::pair<uint64_t, int>*>(
      malloc(sizeof(std::pair<uint64_t, int>) * static_cast<size_t>(n_)));
  if (order == nullptr)
    return;
  int m = 0;
  for (int i = 0; i < n_; ++i)
    if (entries_[i].kind != 0)
      order[m++] = {entries_[i].key, i};
  std::sort(order, order + m);
  for (int k = 1, head = 0; k < m; ++k) {
    if (order[k].first != order[head].first) {
      head = k;
      continue;
    }
    entries_[order[k].second].kind = 0;
    entries_[order[k].second].first = order[head].second;
  }
  free(order);
}

Completion::~Completion() {
  for (int i = 0; i < n_; ++i) {
    const Entry& e = entries_[i];
    if (e.kind != 0 && e.removed)
      RetrackRequest(e.key, e.id, e.posted, e.comm, e.kind);
  }
  if (entries_ != small_)
    free(entries_);
}

void Completion::Done(Call& c, int i, const MPI_Status* st) {
  if (i < 0 || i >= n_)
    return;
  if (entries_[i].kind == 0 && entries_[i].first >= 0)
    i = entries_[i].first;
  if (entries_[i].kind == 0)
    return;
  Entry& e = entries_[i];
  ReqSlot* s = FindReq(e.key);
  if (s != nullptr && s->id == e.id) {
    if (e.persistent) {
      s->active = false;
    } else {
      uint64_t k = e.key;
      s->key.compare_exchange_strong(k, kTomb, std::memory_order_acq_rel);
    }
  }
  if (e.kind == kReqRecv) {
    RecvDone(c, e.posted, e.comm, st, e.id);
  } else if (!g_periodic) {
    uint64_t a[2] = {e.id, e.posted};
    EmitAt(CompletionTime(c), Kind::kMpiRequestDone, a, 2);
  }
  e.kind = 0;
}

void Completion::All(Call& c, StatusArray& sa) {
  for (int i = 0; i < n_; ++i)
    if (entries_[i].kind != 0)
      Done(c, i, sa.At(i));
}

void Completion::Any(Call& c, int index, const MPI_Status* st, bool fortran) {
  if (index == MPI_UNDEFINED)
    return;
  Done(c, fortran ? index - 1 : index, st);
}

void Completion::Some(Call& c, int outcount, const int* indices, StatusArray& sa, bool fortran) {
  if (outcount == MPI_UNDEFINED)
    return;
  for (int k = 0; k < outcount; ++k)
    Done(c, fortran ? indices[k] - 1 : indices[k], sa.At(k));
}

void Completion::Freed(Call& c, int i) {
  if (i < 0 || i >= n_)
    return;
  Entry& e = entries_[i];
  // Freeing an active request: it still completes, but nobody will see it; report it now.
  if (e.kind != 0) {
    e.kind = kReqOther;
    e.persistent = false;
    Done(c, i, nullptr);
    return;
  }
  // An inactive persistent request: forget it.
  MPI_Request dummy = MPI_REQUEST_NULL;
  (void)dummy;
}
}  // namespace parmon::preload::mpi
