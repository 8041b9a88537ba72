// libparmon_mpi's hand-written core: state, tables, hooks, clock alignment, periodic mode.
// See mpi_core.h for the roles; docs/comm.md for the design.
//
// Reentrancy: pm::Begin sets the preload guard for the whole call, so MPI functions the MPI
// library or this file call internally (PMPI_* and the interposed MPI_* alike) are not
// recorded, nor are the read/write/poll calls the MPI's progress engine makes (the POSIX
// wrappers share the guard). Nothing here allocates on the hot path; tables are static.
//
// Concurrency (MPI_THREAD_MULTIPLE): the communicator, request and message tables are
// open-addressing arrays whose keys are claimed with a CAS (0 or tombstone -> kBusy), filled,
// then published with a release store of the handle; readers load the key with acquire before
// reading the fields. Removal CASes the key to a tombstone and checks the entry's id so that a
// handle the MPI reused in another thread is not removed by mistake.
#include "preload/mpi/mpi_core.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "preload/common/preload.h"

namespace parmon::preload {
// One guard for all of parmon's preload libraries: the weak definition makes the dynamic linker
// bind every library's references to the first one loaded.
__attribute__((weak, visibility("default"))) __thread int t_in_wrapper
    __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace parmon::preload

namespace parmon::preload::mpi {

const char* FunctionName(int fn);  // mpi_wrappers.cc (generated table)
int FunctionCount();

namespace {

using format::Kind;

constexpr uint64_t kNone = ~0ull;  // -1 in an event arg
constexpr uint64_t kBusy = 1, kTomb = 2;

// ---- process state ---------------------------------------------------------------------------
std::atomic<bool> g_ready{false};  // MPI initialised and world state below valid
int g_world_rank = -1;
int g_world_size = 0;
uint64_t g_world_key = 0, g_self_key = 0;
MPI_Comm g_sync_comm;
MPI_Group g_world_group;
uint32_t g_sync_epoch = 0;
uint64_t g_world_collectives = 0;
uint64_t g_sync_every = 1000;  // world collectives between clock syncs (PARMON_MPI_SYNC_EVERY)
std::atomic<uint64_t> g_next_request{1};
std::atomic<uint64_t> g_next_local_comm{1};
uint64_t g_comm_counter = 0;  // ids of communicators this rank is rank 0 of
uint64_t g_skew_ticks = 0;    // test only: PARMON_MPI_CLOCK_SKEW_NS
bool g_periodic = false;
uint64_t g_period_ticks = 0;
uint64_t g_init_ticks = 0, g_init_ns = 0;
std::atomic<uint32_t> g_fn_ids[1024];

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t Now() {
  return parmon_x_now() + g_skew_ticks;
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

// ---- communicators ---------------------------------------------------------------------------
struct CommInfo {
  uint64_t id;
  int size;    // local group
  int rank;    // this process's rank in it
  int* world;  // world rank of each rank (remote group for an intercommunicator); null: identity
  bool inter;
};
CommInfo g_world_info{1, 0, 0, nullptr, false};
CommInfo g_self_info{2, 1, 0, nullptr, false};

struct CommSlot {
  std::atomic<uint64_t> key;
  std::atomic<CommInfo*> info;
};
constexpr uint32_t kCommSlots = 4096;
CommSlot g_comms[kCommSlots];

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

CommInfo* Comm(MPI_Comm comm) {
  uint64_t key = Key(comm);
  if (key == g_world_key) [[likely]]
    return &g_world_info;
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

inline uint64_t WorldRank(const CommInfo* info, int rank) {
  if (rank < 0)
    return static_cast<uint64_t>(static_cast<int64_t>(rank));
  if (info == nullptr || info->world == nullptr)
    return static_cast<uint64_t>(rank);
  if (rank >= info->size)
    return kNone;
  return static_cast<uint64_t>(static_cast<int64_t>(info->world[rank]));
}

// ---- requests --------------------------------------------------------------------------------
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
constexpr uint32_t kReqSlots = 1u << 15;
ReqSlot g_reqs[kReqSlots];
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

uint64_t TrackRequest(MPI_Request req,
                      uint8_t kind,
                      uint64_t posted,
                      CommInfo* comm,
                      bool persistent) {
  if (req == MPI_REQUEST_NULL)
    return 0;
  uint64_t key = Key(req);
  // A completed request we never saw complete (MPI_Request_get_status, ...) may still be here.
  if (ReqSlot* old = FindReq(key))
    old->key.store(kTomb, std::memory_order_release);
  ReqSlot* s = ClaimReq(key);
  uint64_t id = g_next_request.fetch_add(1, std::memory_order_relaxed);
  if (s == nullptr)
    return id;
  s->id = id;
  s->posted = posted;
  s->comm = comm;
  s->kind = kind;
  s->persistent = persistent;
  s->active = !persistent;
  s->key.store(key, std::memory_order_release);  // publish: pairs with FindReq's acquire
  return id;
}

// ---- matched probes (MPI_Mprobe -> MPI_Mrecv) ------------------------------------------------
struct MsgSlot {
  std::atomic<uint64_t> key;
  MPI_Comm comm;
};
constexpr uint32_t kMsgSlots = 1024;
MsgSlot g_msgs[kMsgSlots];

// ---- periodic mode ---------------------------------------------------------------------------
struct Stats {
  uint64_t last_flush;
  int peers;
  uint64_t* calls;
  uint64_t* ticks;
  uint64_t* bytes;
  uint64_t* peer_msgs;
  uint64_t* peer_bytes;
};
__thread Stats* t_stats __attribute__((tls_model("initial-exec")));
pthread_key_t g_stats_key;

void FlushStats(Stats* s, uint64_t now) {
  const int n = FunctionCount();
  double ns_per_tick = 1.0;
  uint64_t mono = MonotonicNs();
  if (now > g_init_ticks + g_skew_ticks && mono > g_init_ns)
    ns_per_tick = static_cast<double>(mono - g_init_ns) /
                  static_cast<double>(now - g_skew_ticks - g_init_ticks);
  for (int fn = 0; fn < n; ++fn) {
    if (s->calls[fn] == 0)
      continue;
    uint64_t a[4] = {FnId(fn), s->calls[fn],
                     static_cast<uint64_t>(static_cast<double>(s->ticks[fn]) * ns_per_tick),
                     s->bytes[fn]};
    EmitAt(now, Kind::kMpiStats, a, 4);
    s->calls[fn] = s->ticks[fn] = s->bytes[fn] = 0;
  }
  for (int p = 0; p < s->peers; ++p) {
    if (s->peer_msgs[p] == 0)
      continue;
    uint64_t a[3] = {static_cast<uint64_t>(p), s->peer_msgs[p], s->peer_bytes[p]};
    EmitAt(now, Kind::kMpiPeerStats, a, 3);
    s->peer_msgs[p] = s->peer_bytes[p] = 0;
  }
  s->last_flush = now;
}

void StatsThreadExit(void* p) {
  auto* s = static_cast<Stats*>(p);
  if (parmon_x_enabled())
    FlushStats(s, Now());
}

Stats* ThreadStats() {
  Stats* s = t_stats;
  if (s != nullptr) [[likely]]
    return s;
  const int n = FunctionCount();
  const int peers = g_world_size > 0 ? g_world_size : 0;
  size_t words = 3 * static_cast<size_t>(n) + 2 * static_cast<size_t>(peers);
  s = static_cast<Stats*>(calloc(1, sizeof(Stats) + words * sizeof(uint64_t)));
  if (s == nullptr)
    return nullptr;
  auto* w = reinterpret_cast<uint64_t*>(s + 1);
  s->calls = w;
  s->ticks = w + n;
  s->bytes = w + 2 * n;
  s->peer_msgs = w + 3 * n;
  s->peer_bytes = w + 3 * n + peers;
  s->peers = peers;
  s->last_flush = Now();
  t_stats = s;
  pthread_setspecific(g_stats_key, s);
  return s;
}

void CountPeer(uint64_t peer, uint64_t bytes) {
  Stats* s = ThreadStats();
  if (s == nullptr || peer >= static_cast<uint64_t>(s->peers))
    return;
  s->peer_msgs[peer] += 1;
  s->peer_bytes[peer] += bytes;
}

// ---- clock alignment -------------------------------------------------------------------------
void ClockSync() {
  if (g_world_size < 2)
    return;
  constexpr int kRounds = 32;  // the least round trip of these is kept
  constexpr int kTag = 7;
  const uint32_t epoch = g_sync_epoch++;
  char dummy = 0;
  if (g_world_rank == 0) {
    for (int r = 1; r < g_world_size; ++r) {
      uint64_t t0[kRounds], t3[kRounds];
      int best = 0;
      for (int k = 0; k < kRounds; ++k) {
        t0[k] = Now();
        PMPI_Send(&dummy, 1, MPI_BYTE, r, kTag, g_sync_comm);
        PMPI_Recv(&dummy, 1, MPI_BYTE, r, kTag, g_sync_comm, MPI_STATUS_IGNORE);
        t3[k] = Now();
        if (t3[k] - t0[k] < t3[best] - t0[best])
          best = k;
      }
      PMPI_Send(&best, 1, MPI_INT, r, kTag, g_sync_comm);
      uint64_t a[4] = {static_cast<uint64_t>(r), epoch, t0[best], t3[best]};
      EmitAt(Now(), Kind::kMpiClockSync, a, 4);
    }
  } else {
    uint64_t t1[kRounds], t2[kRounds];
    for (int k = 0; k < kRounds; ++k) {
      PMPI_Recv(&dummy, 1, MPI_BYTE, 0, kTag, g_sync_comm, MPI_STATUS_IGNORE);
      t1[k] = Now();
      t2[k] = Now();
      PMPI_Send(&dummy, 1, MPI_BYTE, 0, kTag, g_sync_comm);
    }
    int best = 0;
    PMPI_Recv(&best, 1, MPI_INT, 0, kTag, g_sync_comm, MPI_STATUS_IGNORE);
    if (best < 0 || best >= kRounds)
      best = 0;
    uint64_t a[4] = {0, epoch, t2[best], t1[best]};
    EmitAt(Now(), Kind::kMpiClockSync, a, 4);
  }
}

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0')
    return fallback;
  char* end = nullptr;
  unsigned long long x = strtoull(v, &end, 10);
  return (end && *end == '\0') ? x : fallback;
}

__attribute__((constructor)) void Setup() {
  pthread_key_create(&g_stats_key, StatsThreadExit);
  // The run mode comes from the session's shared-memory header (libparmon initialises first).
  uint32_t mode = 0;
  uint64_t period_ns = 0;
  g_periodic = parmon_x_session_mode(&mode, &period_ns) != 0 && mode == 1;
  g_sync_every = EnvU64("PARMON_MPI_SYNC_EVERY", 1000);
  if (g_sync_every == 0)
    g_sync_every = 1000;
  // Test hook: pretend this process's clock is off by a known amount (ns), to check that the
  // clock alignment removes it. Converted to ticks with a 20 ms calibration.
  if (const char* skew = getenv("PARMON_MPI_CLOCK_SKEW_NS"); skew && *skew) {
    long long ns = strtoll(skew, nullptr, 10);
    uint64_t n0 = MonotonicNs(), t0 = parmon_x_now(), n1, t1;
    do {
      n1 = MonotonicNs();
      t1 = parmon_x_now();
    } while (n1 - n0 < 20'000'000);
    double ticks_per_ns = static_cast<double>(t1 - t0) / static_cast<double>(n1 - n0);
    g_skew_ticks =
        static_cast<uint64_t>(static_cast<long long>(static_cast<double>(ns) * ticks_per_ns));
  }
}

}  // namespace

// ---- calls -----------------------------------------------------------------------------------
// The time source costs more than everything else a wrapper does (rdtsc is ~20 ns on the
// virtual machines we measure on), so a call reads the clock twice at most: at entry (MpiEnter,
// sends, posted times) and at completion (receives, MpiLeave).
namespace {
// Whether the MPI this process runs is the one this library was compiled for (OpenMPI and MPICH
// differ in handle types and MPI_Status). When it is not -- an MPICH program started with
// libparmon_mpi.so preloaded, say -- every wrapper only passes its call through, which is safe
// whatever the ABI (arguments are forwarded untouched in the same registers and stack slots).
// 0: not checked yet, 1: same MPI, 2: another MPI.
std::atomic<int> g_abi{0};

[[gnu::cold]] bool CheckAbi() {
  static char version[8192];  // MPICH's MPI_MAX_LIBRARY_VERSION_STRING, the larger one
  int len = 0;
  bool ok = &PMPI_Get_library_version != nullptr &&
            PMPI_Get_library_version(version, &len) == MPI_SUCCESS;
#if defined(OPEN_MPI)
  constexpr const char* kBuiltFor = "Open MPI";
#elif defined(MPICH)
  constexpr const char* kBuiltFor = "MPICH";
#else
  constexpr const char* kBuiltFor = "";
#endif
  ok = ok && strstr(version, kBuiltFor) != nullptr;
  g_abi.store(ok ? 1 : 2, std::memory_order_relaxed);
  if (!ok) {
    // Once per process: the user asked for MPI monitoring and gets none.
    char msg[256];
    int n = snprintf(msg, sizeof msg,
                     "parmon: this program's MPI is not %s, which this libparmon_mpi was built "
                     "for: its MPI calls are not recorded (set PARMON_MPI=mpich or openmpi)\n",
                     kBuiltFor);
    if (n > 0)
      (void)!write(2, msg, static_cast<size_t>(n < 256 ? n : 255));
  }
  return ok;
}
}  // namespace

bool BeginRecording(Call* c, int fn) {
  if (int abi = g_abi.load(std::memory_order_relaxed); abi != 1) [[unlikely]] {
    if (abi == 2)
      return false;
    t_in_wrapper = 1;  // the check's own MPI call is not recorded
    bool ok = CheckAbi();
    t_in_wrapper = 0;
    if (!ok)
      return false;
  }
  t_in_wrapper = 1;
  c->fn = fn;
  c->t0 = Now();
  if (!g_periodic) {
    uint64_t a = FnId(fn);
    EmitAt(c->t0, Kind::kMpiEnter, &a, 1);
  }
  return true;
}

inline uint64_t CompletionTime(Call& c) {
  if (c.t1 == 0)
    c.t1 = Now();
  return c.t1;
}

int End(Call* c, int rc) {
  if (rc != MPI_SUCCESS) {
    uint64_t a[2] = {FnId(c->fn), static_cast<uint64_t>(static_cast<int64_t>(rc))};
    EmitAt(CompletionTime(*c), Kind::kMpiError, a, 2);
  }
  if (g_periodic) {
    if (Stats* s = ThreadStats()) {
      uint64_t now = CompletionTime(*c);
      s->calls[c->fn] += 1;
      s->ticks[c->fn] += now - c->t0;
      s->bytes[c->fn] += c->bytes;
      if (now - s->last_flush >= g_period_ticks && g_period_ticks != 0)
        FlushStats(s, now);
    }
  } else {
    uint64_t a = FnId(c->fn);
    EmitAt(CompletionTime(*c), Kind::kMpiLeave, &a, 1);
  }
  t_in_wrapper = 0;
  return rc;
}

void OnInit(Call& c, int rc) {
  (void)c;
  if (rc != MPI_SUCCESS)
    return;
  PMPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &g_world_size);
  g_world_info.size = g_world_size;
  g_world_info.rank = g_world_rank;
  g_self_info.id = 2;
  g_world_key = Key(MPI_COMM_WORLD);
  g_self_key = Key(MPI_COMM_SELF);
  PMPI_Comm_group(MPI_COMM_WORLD, &g_world_group);
  int level = 0;
  PMPI_Query_thread(&level);
  g_init_ticks = parmon_x_now();
  g_init_ns = MonotonicNs();
  // Periodic flushes: the session's period (default 100 ms) in ticks, rate measured over the run.
  uint32_t mode = 0;
  uint64_t period_ns = 100'000'000;
  parmon_x_session_mode(&mode, &period_ns);
  uint64_t n0 = MonotonicNs(), t0 = parmon_x_now();
  PMPI_Comm_dup(MPI_COMM_WORLD, &g_sync_comm);
  PMPI_Barrier(g_sync_comm);
  uint64_t n1 = MonotonicNs(), t1 = parmon_x_now();
  double ticks_per_ns = n1 > n0 ? static_cast<double>(t1 - t0) / static_cast<double>(n1 - n0) : 1;
  if (ticks_per_ns < 0.1 || ticks_per_ns > 100)
    ticks_per_ns = 1;  // too short to measure
  g_period_ticks = static_cast<uint64_t>(static_cast<double>(period_ns) * ticks_per_ns);
  uint64_t a[3] = {static_cast<uint64_t>(g_world_rank), static_cast<uint64_t>(g_world_size),
                   static_cast<uint64_t>(level)};
  EmitAt(Now(), Kind::kMpiInit, a, 3);
  g_ready.store(true, std::memory_order_release);
  ClockSync();
}

void OnFinalize(Call& c) {
  (void)c;
  if (!g_ready.load(std::memory_order_acquire))
    return;
  ClockSync();
  if (g_periodic && t_stats != nullptr)
    FlushStats(t_stats, Now());
}

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
  uint64_t id = TrackRequest(req, kReqSend, c.t0, info, persistent);
  if (persistent) {
    if (ReqSlot* s = FindReq(Key(req))) {
      s->peer = dest == MPI_PROC_NULL ? kNone : WorldRank(info, dest);
      s->tag = static_cast<uint64_t>(static_cast<int64_t>(tag));
      s->bytes = Bytes(count, type);
    }
    return;
  }
  OnSend(c, count, type, dest, tag, comm, id);
}

void OnNewRecv(Call& c, MPI_Request req, MPI_Comm comm, bool persistent) {
  TrackRequest(req, kReqRecv, c.t0, Comm(comm), persistent);
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

// ---- statuses --------------------------------------------------------------------------------
namespace {
__thread MPI_Status t_cstatus;
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
  uint8_t kind;  // 0: not tracked
  bool persistent;
  uint8_t pad[6];
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
}

Completion::~Completion() {
  if (entries_ != small_)
    free(entries_);
}

void Completion::Done(Call& c, int i, const MPI_Status* st) {
  if (i < 0 || i >= n_ || entries_[i].kind == 0)
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

// ---- collectives -----------------------------------------------------------------------------
uint64_t NewCollRequest(Call& c, MPI_Request req) {
  return TrackRequest(req, kReqOther, c.t0, nullptr, false);
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
  if (info == &g_world_info && request == 0 && ++g_world_collectives % g_sync_every == 0)
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

// ---- one-sided, I/O, communicators -----------------------------------------------------------
namespace {
struct WinSlot {
  std::atomic<uint64_t> key;
  CommInfo* info;  // the window's group as world ranks (id = window id)
};
constexpr uint32_t kWinSlots = 512;
WinSlot g_wins[kWinSlots];

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

}  // namespace parmon::preload::mpi
