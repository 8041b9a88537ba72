// libparmon_mpi's handle tables: communicators (ids agreed among the members, world ranks of
// every member), requests (what a completion call completes) and matched-probe messages
// (MPI_Mprobe -> MPI_Mrecv). Fixed-size open-addressing tables with atomic keys; the publish
// protocol is described atop mpi_core.cc. Allocation happens only when a communicator is
// created or first seen, never per message.
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "preload/common/preload.h"
#include "preload/mpi/mpi_core.h"
#include "preload/mpi/mpi_state.h"

namespace parmon::preload::mpi {

// ---- communicators ---------------------------------------------------------------------------
CommInfo g_world_info{1, 0, 0, nullptr, false};
CommInfo g_self_info{2, 1, 0, nullptr, false};

namespace {
struct CommSlot {
  std::atomic<uint64_t> key;
  std::atomic<CommInfo*> info;
};
constexpr uint32_t kCommSlots = 4096;
constinit CommSlot g_comms[kCommSlots]{};  // constant: no start-up code touches its pages

CommInfo* BuildInfo(MPI_Comm comm) {
  auto* info = static_cast<CommInfo*>(calloc(1, sizeof(CommInfo)));
  if (info == nullptr)
    return nullptr;
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  info->inter = inter != 0;
  PMPI_Comm_size(comm, &info->size);
  PMPI_Comm_rank(comm, &info->rank);
  MPI_Group group;
  int n = 0;
  if (inter ? PMPI_Comm_remote_group(comm, &group) : PMPI_Comm_group(comm, &group))
    return info;
  PMPI_Group_size(group, &n);
  int* ranks = static_cast<int*>(malloc(sizeof(int) * static_cast<size_t>(n > 0 ? n : 1)));
  int* world = static_cast<int*>(malloc(sizeof(int) * static_cast<size_t>(n > 0 ? n : 1)));
  if (ranks && world) {
    for (int i = 0; i < n; ++i)
      ranks[i] = i;
    if (PMPI_Group_translate_ranks(group, n, ranks, g_world_group, world) == MPI_SUCCESS) {
      info->world = world;
      world = nullptr;
    }
  }
  free(ranks);
  free(world);
  PMPI_Group_free(&group);
  if (inter)
    info->size = n;
  return info;
}

void Publish(uint64_t key, CommInfo* info) {
  uint32_t i = static_cast<uint32_t>((key >> 3) % kCommSlots);
  for (uint32_t probe = 0; probe < kCommSlots; ++probe, i = (i + 1) % kCommSlots) {
    uint64_t k = g_comms[i].key.load(std::memory_order_relaxed);
    if (k == key) {  // a handle reused after MPI_Comm_free we did not see
      g_comms[i].info.store(info, std::memory_order_release);
      return;
    }
    if ((k == 0 || k == kTomb) &&
        g_comms[i].key.compare_exchange_strong(k, kBusy, std::memory_order_acquire)) {
      g_comms[i].info.store(info, std::memory_order_relaxed);
      // Release: a reader that sees the key sees info and everything it points to.
      g_comms[i].key.store(key, std::memory_order_release);
      return;
    }
  }
}

CommInfo* FindComm(uint64_t key) {
  uint32_t i = static_cast<uint32_t>((key >> 3) % kCommSlots);
  for (uint32_t probe = 0; probe < 64; ++probe, i = (i + 1) % kCommSlots) {
    uint64_t k = g_comms[i].key.load(std::memory_order_acquire);  // pairs with Publish
    if (k == key)
      return g_comms[i].info.load(std::memory_order_acquire);
    if (k == 0)
      return nullptr;
  }
  return nullptr;
}

void EmitCommDef(const CommInfo* info) {
  if (info->world == nullptr)
    return;
  uint32_t ranks[256];
  int n = info->size < 256 ? info->size : 256;  // the payload limit keeps the first 256
  for (int i = 0; i < n; ++i)
    ranks[i] = static_cast<uint32_t>(info->world[i]);
  uint64_t a[3] = {info->id, static_cast<uint64_t>(info->size), info->inter ? 1u : 0u};
  parmon_x_emit_at(Now(), K(Kind::kMpiCommDef), a, 3, ranks,
                   static_cast<uint32_t>(n * sizeof(uint32_t)));
}

}  // namespace

CommInfo* CommSlow(MPI_Comm comm) {
  uint64_t key = Key(comm);
  if (comm == MPI_COMM_NULL || !g_ready.load(std::memory_order_relaxed))
    return nullptr;
  if (key == g_self_key)
    return &g_self_info;
  if (CommInfo* info = FindComm(key))
    return info;
  // Created where we could not agree on an id with the other members (MPI_Comm_idup, a
  // communicator from before recording): a per-process id.
  CommInfo* info = BuildInfo(comm);
  if (info == nullptr)
    return nullptr;
  info->id = 1ull << 63 | static_cast<uint64_t>(g_world_rank + 1) << 32 |
             g_next_local_comm.fetch_add(1, std::memory_order_relaxed);
  Publish(key, info);
  EmitCommDef(info);
  return info;
}

void OnNewComm(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL || !g_ready.load(std::memory_order_acquire))
    return;
  CommInfo* info = BuildInfo(comm);
  if (info == nullptr)
    return;
  if (info->inter) {
    info->id = 1ull << 63 | static_cast<uint64_t>(g_world_rank + 1) << 32 |
               g_next_local_comm.fetch_add(1, std::memory_order_relaxed);
    Publish(Key(comm), info);
    EmitCommDef(info);
    return;
  }
  // All members are in this call: rank 0 picks the id and tells the others.
  uint64_t id = 0;
  if (info->rank == 0)
    id = static_cast<uint64_t>(g_world_rank + 1) << 32 | ++g_comm_counter;
  PMPI_Bcast(&id, 8, MPI_BYTE, 0, comm);
  info->id = id;
  Publish(Key(comm), info);
  if (info->rank == 0)
    EmitCommDef(info);
}

void OnCommFree(MPI_Comm comm) {
  uint64_t key = Key(comm);
  uint32_t i = static_cast<uint32_t>((key >> 3) % kCommSlots);
  for (uint32_t probe = 0; probe < 64; ++probe, i = (i + 1) % kCommSlots) {
    uint64_t k = g_comms[i].key.load(std::memory_order_acquire);
    if (k == key) {
      g_comms[i].key.store(kTomb, std::memory_order_release);  // the info stays (readers)
      return;
    }
    if (k == 0)
      return;
  }
}

// ---- requests --------------------------------------------------------------------------------
namespace {
constexpr uint32_t kReqSlots = 1u << 15;
constinit ReqSlot g_reqs[kReqSlots]{};  // 2 MiB: constant, so no start-up code touches it
std::atomic<uint64_t> g_untracked{0};

ReqSlot* ClaimReq(uint64_t key) {
  uint32_t i = static_cast<uint32_t>((key >> 3) % kReqSlots);
  for (uint32_t probe = 0; probe < 256; ++probe, i = (i + 1) % kReqSlots) {
    uint64_t k = g_reqs[i].key.load(std::memory_order_relaxed);
    if ((k == 0 || k == kTomb) &&
        g_reqs[i].key.compare_exchange_strong(k, kBusy, std::memory_order_acquire))
      return &g_reqs[i];
  }
  g_untracked.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}
}  // namespace

ReqSlot* FindReq(uint64_t key) {
  uint32_t i = static_cast<uint32_t>((key >> 3) % kReqSlots);
  for (uint32_t probe = 0; probe < 256; ++probe, i = (i + 1) % kReqSlots) {
    uint64_t k = g_reqs[i].key.load(std::memory_order_acquire);  // pairs with the publish
    if (k == key)
      return &g_reqs[i];
    if (k == 0)
      return nullptr;
  }
  return nullptr;
}

NewRequest TrackRequest(MPI_Request req,
                        uint8_t kind,
                        uint64_t posted,
                        CommInfo* comm,
                        bool persistent,
                        MPI_Status* st) {
  if (req == MPI_REQUEST_NULL) {
    if (persistent)
      return {0, false, false};
    return {g_next_request.fetch_add(1, std::memory_order_relaxed), true, false};
  }
  uint64_t key = Key(req);
  if (ReqSlot* old = FindReq(key)) [[unlikely]] {
    // The handle of a live request: either MPI shares one completed request object among the
    // requests it finished at once (then the new one is complete and the old one still needs
    // its completion call), or the old entry is stale (its completion happened where we did not
    // record it, e.g. while paused) and MPI reused the handle. Only the first is complete now;
    // asking costs a call, but only here.
    if (old->active && !persistent) {
      int flag = 0;
      if (PMPI_Request_get_status(req, &flag, st) == MPI_SUCCESS && flag != 0)
        return {g_next_request.fetch_add(1, std::memory_order_relaxed), true,
                st != MPI_STATUS_IGNORE};
    }
    old->key.store(kTomb, std::memory_order_release);
  }
  ReqSlot* s = ClaimReq(key);
  uint64_t id = g_next_request.fetch_add(1, std::memory_order_relaxed);
  if (s == nullptr)
    return {id, false, false};
  s->id = id;
  s->posted = posted;
  s->comm = comm;
  s->kind = kind;
  s->persistent = persistent;
  s->active = !persistent;
  s->key.store(key, std::memory_order_release);  // publish: pairs with FindReq's acquire
  return {id, false, false};
}

void RetrackRequest(uint64_t key, uint64_t id, uint64_t posted, CommInfo* comm, uint8_t kind) {
  ReqSlot* s = ClaimReq(key);
  if (s == nullptr)
    return;
  s->id = id;
  s->posted = posted;
  s->comm = comm;
  s->kind = kind;
  s->persistent = false;
  s->active = true;
  s->key.store(key, std::memory_order_release);  // publish: pairs with FindReq's acquire
}

// ---- matched probes (MPI_Mprobe -> MPI_Mrecv) ------------------------------------------------
namespace {
struct MsgSlot {
  std::atomic<uint64_t> key;
  MPI_Comm comm;
};
constexpr uint32_t kMsgSlots = 1024;
constinit MsgSlot g_msgs[kMsgSlots]{};
}  // namespace

void OnMessage(MPI_Message msg, MPI_Comm comm) {
  if (msg == MPI_MESSAGE_NULL || msg == MPI_MESSAGE_NO_PROC)
    return;
  uint64_t key = Key(msg);
  uint32_t i = static_cast<uint32_t>((key >> 3) % kMsgSlots);
  for (uint32_t probe = 0; probe < kMsgSlots; ++probe, i = (i + 1) % kMsgSlots) {
    uint64_t k = g_msgs[i].key.load(std::memory_order_relaxed);
    if ((k == 0 || k == kTomb) &&
        g_msgs[i].key.compare_exchange_strong(k, kBusy, std::memory_order_acquire)) {
      g_msgs[i].comm = comm;
      g_msgs[i].key.store(key, std::memory_order_release);
      return;
    }
  }
}

MPI_Comm TakeMessage(MPI_Message msg) {
  uint64_t key = Key(msg);
  uint32_t i = static_cast<uint32_t>((key >> 3) % kMsgSlots);
  for (uint32_t probe = 0; probe < kMsgSlots; ++probe, i = (i + 1) % kMsgSlots) {
    uint64_t k = g_msgs[i].key.load(std::memory_order_acquire);
    if (k == key) {
      MPI_Comm comm = g_msgs[i].comm;
      g_msgs[i].key.store(kTomb, std::memory_order_release);
      return comm;
    }
    if (k == 0)
      break;
  }
  return MPI_COMM_NULL;
}

}  // namespace parmon::preload::mpi
