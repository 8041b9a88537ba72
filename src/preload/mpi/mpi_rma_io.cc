// libparmon_mpi's one-sided (MPI_Put/Get/Accumulate and friends) and MPI-IO hooks. A window's
// group is translated to world ranks once, the first time the window is used, and kept in a
// small table keyed by the handle (the publish protocol of mpi_core.cc).
#include <stdlib.h>

#include <atomic>

#include "preload/common/preload.h"
#include "preload/mpi/mpi_core.h"
#include "preload/mpi/mpi_state.h"

namespace parmon::preload::mpi {

// ---- one-sided, I/O --------------------------------------------------------------------------
namespace {
struct WinSlot {
  std::atomic<uint64_t> key;
  CommInfo* info;  // the window's group as world ranks (id = window id)
};
constexpr uint32_t kWinSlots = 512;
constinit WinSlot g_wins[kWinSlots]{};

CommInfo* WinInfo(MPI_Win win) {
  uint64_t key = Key(win);
  uint32_t i = static_cast<uint32_t>((key >> 3) % kWinSlots);
  for (uint32_t probe = 0; probe < kWinSlots; ++probe, i = (i + 1) % kWinSlots) {
    uint64_t k = g_wins[i].key.load(std::memory_order_acquire);
    if (k == key)
      return g_wins[i].info;
    if (k == 0) {
      if (!g_wins[i].key.compare_exchange_strong(k, kBusy, std::memory_order_acquire))
        continue;
      MPI_Group group;
      auto* info = static_cast<CommInfo*>(calloc(1, sizeof(CommInfo)));
      if (info && PMPI_Win_get_group(win, &group) == MPI_SUCCESS) {
        PMPI_Group_size(group, &info->size);
        info->world = static_cast<int*>(malloc(sizeof(int) * static_cast<size_t>(info->size + 1)));
        int* ranks = static_cast<int*>(malloc(sizeof(int) * static_cast<size_t>(info->size + 1)));
        if (info->world && ranks) {
          for (int r = 0; r < info->size; ++r)
            ranks[r] = r;
          PMPI_Group_translate_ranks(group, info->size, ranks, g_world_group, info->world);
        } else {
          free(info->world);
          info->world = nullptr;
        }
        free(ranks);
        PMPI_Group_free(&group);
        info->id = g_next_local_comm.fetch_add(1, std::memory_order_relaxed);
      }
      g_wins[i].info = info;
      g_wins[i].key.store(key, std::memory_order_release);
      return info;
    }
  }
  return nullptr;
}

std::atomic<uint64_t> g_next_file{1};
}  // namespace

void OnRma(Call& c, int count, MPI_Datatype type, int target, MPI_Win win) {
  CommInfo* info = WinInfo(win);
  uint64_t bytes = Bytes(count, type);
  c.bytes += bytes;
  if (g_periodic || target == MPI_PROC_NULL)
    return;
  uint64_t a[4] = {FnId(c.fn), WorldRank(info, target), info ? info->id : 0, bytes};
  EmitAt(c.t0, Kind::kMpiRma, a, 4);
}

void OnIo(Call& c, MPI_File file, int count, MPI_Datatype type) {
  uint64_t bytes = Bytes(count, type);
  c.bytes += bytes;
  if (g_periodic)
    return;
  // File ids: the handle value is stable while the file is open; hash it into a small number.
  uint64_t a[3] = {FnId(c.fn), Key(file) & 0xffffffffu, bytes};
  EmitAt(Now(), Kind::kMpiIo, a, 3);
  (void)g_next_file;
}

}  // namespace parmon::preload::mpi
