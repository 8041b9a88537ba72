// libparmon_mpi's hand-written core: process state, Begin/End around every recorded call,
// MPI_Init/MPI_Finalize, periodic mode and clock alignment. See mpi_core.h for the roles,
// mpi_state.h for the other files of the hand-written half, docs/comm.md for the design.
//
// Reentrancy: pm::Begin sets the preload guard for the whole call, so MPI functions the MPI
// library or this library call internally (PMPI_* and the interposed MPI_* alike) are not
// recorded, nor are the read/write/poll calls the MPI's progress engine makes (the POSIX
// wrappers share the guard). Nothing here allocates on the hot path; tables are static.
//
// Concurrency (MPI_THREAD_MULTIPLE): the communicator, request and message tables
// (mpi_handles.cc) are open-addressing arrays whose keys are claimed with a CAS (0 or
// tombstone -> kBusy), filled, then published with a release store of the handle; readers load
// the key with acquire before reading the fields. Removal CASes the key to a tombstone and
// checks the entry's id so that a handle the MPI reused in another thread is not removed by
// mistake.
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "preload/common/preload.h"
#include "preload/mpi/mpi_core.h"
#include "preload/mpi/mpi_state.h"

namespace parmon::preload {
// One guard for all of parmon's preload libraries: the weak definition makes the dynamic linker
// bind every library's references to the first one loaded.
__attribute__((weak, visibility("default"))) __thread int t_in_wrapper
    __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace parmon::preload

namespace parmon::preload::mpi {

// ---- process state ---------------------------------------------------------------------------
std::atomic<bool> g_ready{false};
std::atomic<bool> g_thread_multiple{true};
int g_world_rank = -1;
int g_world_size = 0;
uint64_t g_world_key = 0, g_self_key = 0;
MPI_Group g_world_group;
uint64_t g_world_collectives = 0;
uint64_t g_sync_every = 1000;
uint64_t g_next_sync_at = 1000;
std::atomic<uint64_t> g_next_request{1};
std::atomic<uint64_t> g_next_local_comm{1};
uint64_t g_comm_counter = 0;
bool g_periodic = false;
std::atomic<uint32_t> g_fn_ids[1024];
__thread Stats* t_stats __attribute__((tls_model("initial-exec")));

namespace {
MPI_Comm g_sync_comm;
uint32_t g_sync_epoch = 0;
std::atomic<uint64_t> g_period_ticks{0};  // relaxed: a period change may reach threads late
// `parmon ctl period`: the recorder's current period (libparmon's control page), the period
// g_period_ticks was computed from, and the clock rate to convert a new one.
const uint64_t* g_period_flag = nullptr;
std::atomic<uint64_t> g_period_ns_seen{0};
double g_ticks_per_ns = 1;
uint64_t g_init_ticks = 0, g_init_ns = 0;
pthread_key_t g_stats_key;
std::atomic<bool> g_finalizing{false};
bool g_sync_every_fixed = false;  // PARMON_MPI_SYNC_EVERY given: no adaptation
uint64_t g_last_sync_ns = 0;      // rank 0: when the previous clock exchange began
uint64_t g_last_sync_count = 0;   // rank 0: g_world_collectives then
}  // namespace

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ---- periodic mode ---------------------------------------------------------------------------
namespace {
void FlushStats(Stats* s, uint64_t now) {
  const int n = FunctionCount();
  double ns_per_tick = 1.0;
  uint64_t mono = MonotonicNs();
  if (now > g_init_ticks && mono > g_init_ns)
    ns_per_tick = static_cast<double>(mono - g_init_ns) / static_cast<double>(now - g_init_ticks);
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
}  // namespace

// One relaxed load per MPI call in periodic mode: a new period from `parmon ctl period` is
// converted once, by whichever thread sees it first.
static void PeriodChanged() {
  if (g_period_flag == nullptr)
    return;
  const uint64_t ns = __atomic_load_n(g_period_flag, __ATOMIC_RELAXED);
  if (ns == g_period_ns_seen.load(std::memory_order_relaxed) || ns == 0)
    return;
  g_period_ns_seen.store(ns, std::memory_order_relaxed);
  g_period_ticks.store(static_cast<uint64_t>(static_cast<double>(ns) * g_ticks_per_ns),
                       std::memory_order_relaxed);
}

Stats* NewThreadStats() {
  const int n = FunctionCount();
  const int peers = g_world_size > 0 ? g_world_size : 0;
  size_t words = 3 * static_cast<size_t>(n) + 2 * static_cast<size_t>(peers);
  auto* s = static_cast<Stats*>(calloc(1, sizeof(Stats) + words * sizeof(uint64_t)));
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

namespace {
void ForgetEnterSites();  // below, with the call sites
}  // namespace

// ---- clock alignment -------------------------------------------------------------------------
namespace {
// The world collectives until the exchange after this one, as rank 0 decides it (every rank must
// agree: it travels with the exchange's last message). At least g_sync_every; more when the
// program makes collectives faster than that per kSyncSpacingNs, so that the exchange (32 round
// trips with each rank, which on an oversubscribed node cost ms) stays about one a second: a
// loop of 14 us barriers on 4 ranks paid one every 14 ms.
constexpr uint64_t kSyncSpacingNs = 1'000'000'000;
uint64_t NextSyncSpacing() {
  const uint64_t now = MonotonicNs();
  const uint64_t since = g_last_sync_ns != 0 && now > g_last_sync_ns ? now - g_last_sync_ns : 0;
  const uint64_t last = g_world_collectives - g_last_sync_count;
  g_last_sync_ns = now;
  g_last_sync_count = g_world_collectives;
  if (g_sync_every_fixed || since == 0 || last == 0)
    return g_sync_every;
  const double per_spacing =
      static_cast<double>(last) * static_cast<double>(kSyncSpacingNs) / static_cast<double>(since);
  constexpr double kMax = 1e9;
  return per_spacing <= static_cast<double>(g_sync_every)
             ? g_sync_every
             : static_cast<uint64_t>(per_spacing < kMax ? per_spacing : kMax);
}
}  // namespace

void ClockSync() {
  if (g_world_size < 2)
    return;
  constexpr int kRounds = 32;  // the least round trip of these is kept
  constexpr int kTag = 7;
  const uint32_t epoch = g_sync_epoch++;
  char dummy = 0;
  if (g_world_rank == 0) {
    const uint64_t next = NextSyncSpacing();
    g_next_sync_at = g_world_collectives + next;
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
      long long reply[2] = {best, static_cast<long long>(next)};
      PMPI_Send(reply, 2, MPI_LONG_LONG, r, kTag, g_sync_comm);
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
    long long reply[2] = {0, static_cast<long long>(g_sync_every)};
    PMPI_Recv(reply, 2, MPI_LONG_LONG, 0, kTag, g_sync_comm, MPI_STATUS_IGNORE);
    const int best = reply[0] >= 0 && reply[0] < kRounds ? static_cast<int>(reply[0]) : 0;
    g_next_sync_at = g_world_collectives + (reply[1] > 0 ? static_cast<uint64_t>(reply[1]) : 1);
    uint64_t a[4] = {0, epoch, t2[best], t1[best]};
    EmitAt(Now(), Kind::kMpiClockSync, a, 4);
  }
}

namespace {
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
  pthread_atfork(nullptr, nullptr, ForgetEnterSites);
  // The run mode comes from the session's shared-memory header (libparmon initialises first).
  uint32_t mode = 0;
  uint64_t period_ns = 0;
  g_periodic = parmon_x_session_mode(&mode, &period_ns) != 0 && mode == 1;
  g_sync_every = EnvU64("PARMON_MPI_SYNC_EVERY", 0);
  g_sync_every_fixed = g_sync_every != 0;
  if (g_sync_every == 0)
    g_sync_every = 1000;
  g_next_sync_at = g_sync_every;
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

namespace {
// A call site's id (InternCodeAddress), with a small per-thread cache that keeps dladdr and the
// intern lock off the path of a call made again from the same place. Initial-exec TLS, as every
// thread-local of the preload libraries: a plain thread_local in a shared library is reached
// through __tls_get_addr, a call into the dynamic linker, twice per MPI call.
struct SiteSlot {
  const void* pc;
  uint32_t id;
};
__thread SiteSlot t_site_ids[64] __attribute__((tls_model("initial-exec")));

// A site no module holds gets a name of its own rather than 0, which in an MpiEnter means "the
// thread's previous site for this function".
uint32_t UnknownSiteId() {
  static uint32_t id = 0;
  uint32_t v = __atomic_load_n(&id, __ATOMIC_RELAXED);
  if (v == 0) [[unlikely]] {
    v = parmon_x_intern("(unknown call site)",
                        static_cast<uint32_t>(format::StringCategory::kCallSite));
    __atomic_store_n(&id, v, __ATOMIC_RELAXED);  // racing threads intern the same id
  }
  return v;
}

uint32_t SiteId(const void* pc) {
  SiteSlot& s = t_site_ids[(reinterpret_cast<uintptr_t>(pc) * 0x9E3779B97F4A7C15ull) >> 58];
  if (s.pc != pc || s.id == 0) [[unlikely]] {
    s.id = pc != nullptr ? InternCodeAddress(pc) : 0;
    if (s.id == 0)
      s.id = UnknownSiteId();
    s.pc = pc;
  }
  return s.id;
}

// The site an MpiEnter of function `fn` carries. An MpiEnter without its site arg is a one-slot
// compact event, which the recorder drains at a fraction of the cost of a general one (perf: the
// recorder's CPU per traced MPI call is several times the wrapper's own, and the call's general
// events are most of it); a reader takes the site of that thread's previous MpiEnter of the same
// function (docs/events.md). So the site is written when it differs from the one this thread
// last wrote for `fn`, and again every kSiteRefresh calls, so that a flight recorder, which keeps
// only the newest chunks, still finds it. A direct-mapped table by function: a collision only
// costs a written site. An event that was not written (drop mode, ring full) forgets the entry.
constexpr uint32_t kSiteRefresh = 256;
struct EnterSite {
  uint32_t fn_plus_1;  // 0: empty
  uint32_t site;
  uint32_t left;  // compact enters before the site is written again
};
__thread EnterSite t_enter_sites[64] __attribute__((tls_model("initial-exec")));

// A forked child is a new location for the reader, which has seen none of its sites.
void ForgetEnterSites() {
  memset(t_enter_sites, 0, sizeof t_enter_sites);
}

void EmitEnter(uint64_t t, int fn, uint32_t site) {
  EnterSite& e = t_enter_sites[static_cast<unsigned>(fn) & 63];
  const uint32_t key = static_cast<uint32_t>(fn) + 1;
  uint64_t a[2] = {FnId(fn), site};
  if (e.fn_plus_1 == key && e.site == site && e.left > 0) [[likely]] {
    --e.left;
    parmon_x_emit_at(t, K(Kind::kMpiEnter), a, 1, nullptr, 0);
    return;
  }
  const bool written = parmon_x_emit_at(t, K(Kind::kMpiEnter), a, 2, nullptr, 0) == 0;
  e.fn_plus_1 = written ? key : 0;
  e.site = site;
  e.left = kSiteRefresh;
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
  // The thread's MPI time for self-monitoring: the run's calls, not MPI_Init (the report's
  // start-up) nor MPI_Finalize (OnFinalize takes it back: shut-down).
  if (g_ready.load(std::memory_order_relaxed) && !g_finalizing.load(std::memory_order_relaxed)) {
    c->timed = true;
    parmon_x_mpi_time(c->t0, 0);
  }
  if (!g_periodic)
    EmitEnter(c->t0, fn, SiteId(c->site));
  return true;
}

int End(Call* c, int rc) {
  if (c->timed)
    parmon_x_mpi_time(c->t0, CompletionTime(*c));
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
      PeriodChanged();
      // MPI_Finalize's own time is flushed as it returns: nothing flushes after it.
      const uint64_t period_ticks = g_period_ticks.load(std::memory_order_relaxed);
      if ((now - s->last_flush >= period_ticks && period_ticks != 0) ||
          g_finalizing.load(std::memory_order_relaxed))
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
  g_thread_multiple.store(level >= MPI_THREAD_MULTIPLE, std::memory_order_relaxed);
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
  g_period_ticks.store(static_cast<uint64_t>(static_cast<double>(period_ns) * ticks_per_ns),
                       std::memory_order_relaxed);
  g_ticks_per_ns = ticks_per_ns;
  g_period_ns_seen.store(period_ns, std::memory_order_relaxed);
  g_period_flag = parmon_x_period_flag();
  uint64_t a[3] = {static_cast<uint64_t>(g_world_rank), static_cast<uint64_t>(g_world_size),
                   static_cast<uint64_t>(level)};
  g_ready.store(true, std::memory_order_release);
  ClockSync();
  // Stamped as MPI_Init returns, after the clock exchange (rank 0 runs one with every peer, tens
  // of ms when oversubscribed): periodic mode starts a rank's run at this record.
  EmitAt(Now(), Kind::kMpiInit, a, 3);
  // The MPI library installed its own fault handlers in MPI_Init: a crash of this rank is
  // recorded before they take it (runtime/fatal_signals.cc).
  parmon_x_watch_fatal_signals();
}

void OnFinalize(Call& c) {
  if (c.timed) {
    parmon_x_mpi_time(c.t0, c.t0);  // shut-down, not the run's MPI time
    c.timed = false;
  }
  if (!g_ready.load(std::memory_order_acquire))
    return;
  ClockSync();
  if (g_periodic && t_stats != nullptr)
    FlushStats(t_stats, Now());
  g_finalizing.store(true, std::memory_order_relaxed);
}

}  // namespace parmon::preload::mpi
