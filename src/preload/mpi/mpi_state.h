// libparmon_mpi's internal state, shared by the files of its hand-written half (not by the
// generated wrappers, which see only mpi_core.h):
//
//   mpi_core.cc         process state, Begin/End, MPI_Init/Finalize, periodic mode, clock sync
//   mpi_handles.cc      the communicator, request and matched-probe tables
//   mpi_p2p.cc          point-to-point hooks, statuses, request completion
//   mpi_collectives.cc  collective hooks: bytes from each collective's shape
//   mpi_rma_io.cc       one-sided and MPI-IO hooks, the window table
//
// The helpers every hook calls on its hot path (the clock, Emit, the function id, the world
// communicator, the per-thread periodic tables) are inline here with their rare cases out of
// line, so splitting the library into files costs no call. Everything declared here has hidden
// visibility (the pragma also covers the extern declarations, so globals are addressed directly,
// not through the GOT). Concurrency and reentrancy rules: mpi_core.cc's opening comment.
#ifndef PARMON_SRC_PRELOAD_MPI_MPI_STATE_H_
#define PARMON_SRC_PRELOAD_MPI_MPI_STATE_H_

#include <mpi.h>
#include <stdint.h>
#include <string.h>

#include <atomic>

#include "preload/common/preload.h"
#include "preload/mpi/mpi_core.h"

#pragma GCC visibility push(hidden)

namespace parmon::preload::mpi {

const char* FunctionName(int fn);  // mpi_wrappers.cc (generated table)
int FunctionCount();

using format::Kind;

constexpr uint64_t kNone = ~0ull;  // -1 in an event arg
constexpr uint64_t kBusy = 1, kTomb = 2;

// ---- process state (mpi_core.cc) -------------------------------------------------------------
extern std::atomic<bool> g_ready;  // MPI initialised and world state below valid
// The thread level MPI gave is MPI_THREAD_MULTIPLE (true until MPI_Init says otherwise): only
// then may another thread's call reuse a request handle while this thread's completion call is
// still in its wrapper (Completion).
extern std::atomic<bool> g_thread_multiple;
extern int g_world_rank;
extern int g_world_size;
extern uint64_t g_world_key, g_self_key;
extern MPI_Group g_world_group;
extern uint64_t g_world_collectives;
extern uint64_t g_sync_every;    // world collectives between clock syncs (PARMON_MPI_SYNC_EVERY)
extern uint64_t g_next_sync_at;  // the g_world_collectives of the next one (rank 0 decides)
extern std::atomic<uint64_t> g_next_request;
extern std::atomic<uint64_t> g_next_local_comm;
extern uint64_t g_comm_counter;  // ids of communicators this rank is rank 0 of
extern bool g_periodic;
extern std::atomic<uint32_t> g_fn_ids[1024];

uint64_t MonotonicNs();

inline uint64_t Now() {
  return parmon_x_now();
}

inline void EmitAt(uint64_t t, Kind k, const uint64_t* a, unsigned n) {
  parmon_x_emit_at(t, K(k), a, n, nullptr, 0);
}

inline uint32_t FnId(int fn) {
  uint32_t id = g_fn_ids[fn].load(std::memory_order_relaxed);
  if (id == 0) [[unlikely]] {
    id =
        parmon_x_intern(FunctionName(fn), static_cast<uint32_t>(format::StringCategory::kFunction));
    g_fn_ids[fn].store(id, std::memory_order_relaxed);
  }
  return id;
}

template <typename H>
uint64_t Key(H h) {
  uint64_t k = 0;
  static_assert(sizeof(H) <= sizeof(k));
  memcpy(&k, &h, sizeof h);
  return k + 16;  // never 0, kBusy or kTomb (handles are pointers or small ints)
}

inline int TypeSize(MPI_Datatype t) {
  int s = 0;
  if (PMPI_Type_size(t, &s) != MPI_SUCCESS || s < 0)
    return 0;
  return s;
}
inline uint64_t Bytes(int count, MPI_Datatype t) {
  return count > 0 ? static_cast<uint64_t>(count) * static_cast<uint64_t>(TypeSize(t)) : 0;
}

inline uint64_t CompletionTime(Call& c) {
  if (c.t1 == 0)
    c.t1 = Now();
  return c.t1;
}

// Clock alignment with rank 0 (MpiClockSync events), at MPI_Init, MPI_Finalize and every
// g_sync_every collectives on the world communicator, or more so that they stay about a second
// apart (rank 0 decides and tells the others in the exchange).
void ClockSync();

// ---- communicators (mpi_handles.cc) ----------------------------------------------------------
struct CommInfo {
  uint64_t id;
  int size;    // local group
  int rank;    // this process's rank in it
  int* world;  // world rank of each rank (remote group for an intercommunicator); null: identity
  bool inter;
};
extern CommInfo g_world_info;
extern CommInfo g_self_info;

CommInfo* CommSlow(MPI_Comm comm);  // any communicator but the world
inline CommInfo* Comm(MPI_Comm comm) {
  if (Key(comm) == g_world_key) [[likely]]
    return &g_world_info;
  return CommSlow(comm);
}

inline uint64_t WorldRank(const CommInfo* info, int rank) {
  if (rank < 0)
    return static_cast<uint64_t>(static_cast<int64_t>(rank));
  if (info == nullptr || info->world == nullptr)
    return static_cast<uint64_t>(rank);
  if (rank >= info->size)
    return kNone;
  return static_cast<uint64_t>(static_cast<int64_t>(info->world[rank]));
}

// ---- requests (mpi_handles.cc) ---------------------------------------------------------------
enum ReqKind : uint8_t { kReqSend = 1, kReqRecv = 2, kReqOther = 3 };
struct ReqSlot {
  std::atomic<uint64_t> key;
  uint64_t id;
  uint64_t posted;
  CommInfo* comm;
  uint64_t peer, tag, bytes;  // persistent sends: what each MPI_Start sends
  uint8_t kind;
  bool persistent;
  bool active;
};
ReqSlot* FindReq(uint64_t key);
// A new request's id; `done`: MPI completed it inside the call that made it and returned
// MPI_REQUEST_NULL or a handle shared with a live request (Open MPI's static empty request,
// MPICH's built-in completed ones), so the caller reports its completion at once and no
// completion call will. The handle is then not tracked: every request completes once.
struct NewRequest {
  uint64_t id;
  bool done;
  bool has_status;  // done and *st holds its status (only a shared handle has one)
};
// Tracked when the table has room. `st` (may be MPI_STATUS_IGNORE) receives the status of a
// request that is done.
NewRequest TrackRequest(MPI_Request req,
                        uint8_t kind,
                        uint64_t posted,
                        CommInfo* comm,
                        bool persistent,
                        MPI_Status* st);

// Puts back a request a completion call took out of the table before it ran and that did not
// complete (a test that found it unfinished): its handle is still the program's.
void RetrackRequest(uint64_t key, uint64_t id, uint64_t posted, CommInfo* comm, uint8_t kind);

// ---- periodic mode (mpi_core.cc) -------------------------------------------------------------
struct Stats {
  uint64_t last_flush;
  int peers;
  uint64_t* calls;
  uint64_t* ticks;
  uint64_t* bytes;
  uint64_t* peer_msgs;
  uint64_t* peer_bytes;
};
extern __thread Stats* t_stats __attribute__((tls_model("initial-exec")));

Stats* NewThreadStats();  // this thread's first periodic call
inline Stats* ThreadStats() {
  Stats* s = t_stats;
  if (s != nullptr) [[likely]]
    return s;
  return NewThreadStats();
}

inline void CountPeer(uint64_t peer, uint64_t bytes) {
  Stats* s = ThreadStats();
  if (s == nullptr || peer >= static_cast<uint64_t>(s->peers))
    return;
  s->peer_msgs[peer] += 1;
  s->peer_bytes[peer] += bytes;
}

}  // namespace parmon::preload::mpi

#pragma GCC visibility pop

#endif  // PARMON_SRC_PRELOAD_MPI_MPI_STATE_H_
