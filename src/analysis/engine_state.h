// The records the analysis engine keeps while it reads a session (engine_impl.h): per location
// (Loc: thread states, region stack, MPI call and critical-path state), per MPI message in flight
// (PendingSend) and per completing call (CallWaits), per collective instance, per POSIX channel
// endpoint and link. Plain data: the analyzers that update them are Engine::Impl's members.
#ifndef PARMON_SRC_ANALYSIS_ENGINE_STATE_H_
#define PARMON_SRC_ANALYSIS_ENGINE_STATE_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "analysis/binning.h"
#include "analysis/engine.h"
#include "analysis/loop_clocks.h"
#include "analysis/mpi_families.h"
#include "analysis/mpi_time.h"
#include "analysis/p2p_keys.h"
#include "format/thread_state.h"
#include "model/session.h"

namespace parmon::analysis {

constexpr uint64_t kNone = UINT64_MAX;
constexpr int32_t kRankNotLooked = INT32_MIN;
// Critical-path shares are tracked per location only up to this many locations (each message in
// flight carries a copy of the sender's share vector).
constexpr size_t kMaxShareLocations = 64;

// The report's state for a ThreadStates arg (format::ThreadState order): stopped and other
// waits are both "other".
inline State StateOfArg(int i) {
  return i >= static_cast<int>(State::kOther) ? State::kOther : static_cast<State>(i);
}

// A thread's last kSpells spells off a CPU of one kind, and the one still open (kNone: none).
struct OffCpuSpells {
  static constexpr size_t kSpells = 8;
  std::array<std::pair<uint64_t, uint64_t>, kSpells> spells{};
  uint8_t next = 0;
  uint64_t open = kNone;
  // The thread came back on a CPU at ts: the open spell is closed.
  void Close(uint64_t ts) {
    if (open == kNone)
      return;
    spells[next] = {open, std::max(ts, open)};
    next = static_cast<uint8_t>((next + 1) % kSpells);
    open = kNone;
  }
  // The part of [b, e) in the kept spells and the open one.
  uint64_t Within(uint64_t b, uint64_t e) const {
    uint64_t sum = 0;
    auto overlap = [&](uint64_t x, uint64_t y) {
      const uint64_t lo = std::max(x, b), hi = std::min(y, e);
      sum += hi > lo ? hi - lo : 0;
    };
    for (const auto& [x, y] : spells)
      overlap(x, y);
    if (open != kNone)
      overlap(open, e);
    return std::min(sum, e > b ? e - b : 0);
  }
};

struct RegionAgg {
  uint64_t count = 0, inclusive = 0, exclusive = 0;
};

struct RegionFrame {
  uint32_t region;
  uint64_t enter;
  uint64_t child_ns;
};

using Shares = std::vector<uint64_t>;

// One MPI call that completed messages: a blocking send or receive, a Sendrecv, a Wait*/Test*
// completing nonblocking ones. It waited from its entry until the last partner it needed had
// arrived (a receive: its send started; a send: its receive was posted), within the call. Its
// time is link time, split so that each direction gets its own: each message's link the wait
// for that message, and the rest (moving data) shared among the messages.
struct CallWaits {
  uint32_t loc = 0;  // index in locs
  uint32_t func = 0;
  uint64_t enter = 0;
  uint64_t leave = kNone;   // kNone while the call is open
  uint32_t unresolved = 0;  // sends of the call whose receive has not been seen yet
  bool done = false;
  struct Part {
    uint64_t end;  // when this message's partner arrived (clamped to the call at the end)
    size_t link;
    bool send;  // late receiver (a send) or late sender (a receive)
  };
  std::vector<Part> parts;  // kept (cleared, not freed) when the record returns to the pool
  // The link of every message the call completed (resolved or not): the call's time after its
  // last partner arrived is theirs, shared evenly (FinishCall).
  std::vector<size_t> members;
  uint32_t refs = 0;  // holders: the open call's location and the sends it completes
};

constexpr uint32_t kNoIndex = UINT32_MAX;

struct PendingSend {
  uint64_t ts = 0;
  uint32_t loc = 0;
  bool blocking = false;
  size_t link = 0;
  uint64_t cp = 0;
  std::shared_ptr<const Shares> shares;
  std::shared_ptr<const LoopClocks::Clock> clock;  // the sender's loop clock at the send
  // The call that completed the send (the blocking send itself, or the Wait*/Test* completing a
  // nonblocking one), and when the matching receive was posted (kNone until it is seen).
  uint32_t call = kNoIndex;  // in Impl::calls
  uint64_t recv_posted = kNone;
  uint32_t next = kNoIndex;  // the next send in flight on the same (src, dst, comm, tag)
  uint32_t refs = 0;         // holders: in_flight, open_sends, the completing call's call_sends
};

struct Loc {
  uint32_t id = 0;
  bool cpu = false;
  uint32_t pid = 0, tid = 0;
  int32_t rank = kRankNotLooked;  // RankOf's answer, cached by Rank()
  uint64_t first = kNone, last = 0;
  uint64_t events = 0, lost = 0;
  bool sampled = false;
  StateTimes sampled_states{};
  // The sampler's running time in the window before anything is moved out of it (MPI calls,
  // spins, parmon's holds): the thread's CPU time as the kernel counts it.
  uint64_t kernel_running = 0;
  StateTimes waits{};                    // inferred from instrumented calls
  uint64_t cpu_busy = 0, cpu_total = 0;  // cpu locations
  uint64_t cpu_steal = 0;                // of cpu_total: stolen by the hypervisor
  std::vector<StateTimes> iv;            // sampled states (or cpu busy/idle) per interval
  std::vector<StateTimes> iv_waits;      // inferred waits per interval
  // Spinlock waits (SyncWait type 9): the thread ran, so the sampler books the time as running;
  // the report moves it to lock wait. Per interval only once a spin was seen (kLockWait column).
  uint64_t spin_ns = 0;
  std::vector<StateTimes> iv_spin;
  // MPI
  bool in_mpi = false;
  uint64_t mpi_enter = 0;
  uint32_t mpi_func = 0;
  uint32_t mpi_site = 0;  // the open call's call site (string id; 0: not recorded)
  // The site of this thread's last MpiEnter of each function that carried one: an MpiEnter with
  // site 0 was made at that site (docs/events.md: the wrapper writes a site only when it changes).
  // By the function's index in the engine's func_list (FuncIndex; 0: none yet).
  std::vector<uint32_t> site_of_func;
  uint64_t mpi_ns = 0, mpi_calls = 0;  // mpi_ns: outside MPI_Init/Init_thread/Finalize
  uint64_t mpi_startup_ns = 0, mpi_shutdown_ns = 0;
  MpiTime mpi_time;  // time inside MPI against the sampled states (mpi_time.cc)
  std::array<CallFamilyStat, kMpiFamilyCount> families{};  // by MpiFamilyId; calls 0: none
  std::vector<uint32_t> call_sends;  // PendingSend indices the open call completed
  uint32_t call_waits = kNoIndex;    // of the open call, once it completes a message
  uint64_t messages_sent = 0, bytes_sent = 0, messages_received = 0, bytes_received = 0;
  // The MPI part of those (the rest: writes and reads on POSIX channels, stdout included).
  uint64_t mpi_messages_sent = 0, mpi_bytes_sent = 0, mpi_messages_received = 0,
           mpi_bytes_received = 0;
  uint64_t late_sender = 0, late_receiver = 0, barrier_wait = 0, collective_wait = 0;
  // Regions: dense table by region id (interned ids are small), stack of open regions.
  std::vector<RegionAgg> regions;
  std::vector<RegionFrame> stack;
  // Critical path (Hollingsworth's online algorithm): computation along the longest chain of
  // dependencies ending at this location's current time.
  uint64_t cp = 0;
  uint64_t cp_mark = kNone;  // computing since; kNone while waiting in a call
  // A sampled thread's running time (in the window, outside MPI calls and spin waits) already
  // put on its path: only what it ran counts as computation, not the time it was blocked
  // outside any recorded call (a parent in wait4, an idle helper thread, a pool worker parked on
  // a futex). Accrue spends the running the samples booked and this has not covered yet.
  uint64_t cp_spent = 0;
  // With context-switch records (trace mode) the thread's running is known to the nanosecond:
  // its running clock (run_clock up to its last switch-out, on_cpu since its last switch-in,
  // kNone while off a CPU) read at cp_mark (cp_run_at) and at the end of a stretch gives what
  // it ran in between, with no lag.
  bool switch_timed = false;
  uint64_t on_cpu = kNone;
  uint64_t run_clock = 0;
  uint64_t cp_run_at = 0;
  // The running clock at the thread's latest sample (ThreadStates) while timed by switch records:
  // the samples after the records stop (switch_stops.cc) hold the running since then.
  uint64_t run_at_sample = 0;
  // The thread that created this one (TaskStart's parent: the fork or pthread_create), kNoIndex
  // when not in the session: its path continues here at the start and takes this one's path
  // back at the exit (the join, the wait4 of a parent).
  uint32_t creator = kNoIndex;
  bool exited = false;
  std::shared_ptr<Shares> shares;
  uint64_t switches = 0, preempted = 0;
  // The thread's last few spells off a CPU while runnable (a switch-out that preempted it, to
  // its next switch-in), and while blocked (a switch-out that did not): time inside a channel
  // call spent queued for a CPU is not waiting for the channel's peer, and only the blocked time
  // is (ChanIo); running in it is the copy.
  OffCpuSpells preempted_spells, blocked_spells;
};

// A process that took a signal that ends it (FatalSignal), and what every other thread was
// doing at that moment (process_deaths.cc).
struct SignalDeath {
  uint32_t loc = 0;  // index in locs
  uint64_t ts = 0;
  int32_t signal = 0;
  int64_t code = 0;     // si_code: > 0 a fault, <= 0 sent by a process
  uint32_t sender = 0;  // the sending process's pid (code <= 0)
  struct Other {
    uint32_t loc = 0;
    bool in_mpi = false;
    uint32_t func = 0;  // the MPI function it was in
    uint64_t enter = 0;
  };
  std::vector<Other> others;
};

struct CollectiveInstance {
  std::vector<std::pair<uint32_t, uint64_t>> members;  // loc index, enter ts
  uint64_t max_enter = 0;
  uint64_t max_cp = 0;
  std::shared_ptr<const Shares> max_shares;
  uint32_t func = 0;
};

struct Endpoint {
  uint32_t type = 0;
  uint64_t local = 0, peer = 0;
  std::string description;
  struct Use {
    // time: the calls' time less what they spent preempted; wait: of it, blocked for the
    // partner (the time off a CPU while not runnable, from the switch records; without them,
    // all of it)
    uint64_t calls = 0, bytes = 0, time = 0, wait = 0;
    uint64_t closed_loop = 0;  // reads of this writer's data that closed a loop
  };
  std::map<uint32_t, Use> writers, readers;  // by loc index
  uint64_t last_write_cp = 0;
  std::shared_ptr<const Shares> last_write_shares;
  LoopClocks::Stream stream;  // of the bytes written here
};

struct LinkAgg {
  LinkResult r;
  std::vector<uint64_t> busy;   // per interval: ns either end spent in this link's calls
  std::vector<uint64_t> bytes;  // per interval
};

// A POSIX channel endpoint's identity: a pipe (by its inode), one end of a socket (type, local
// and peer inode), or, before the channel's ChanInfo is seen, a bare (pid, fd).
struct EndpointKey {
  enum Kind : uint8_t { kFd, kPipe, kSocket };
  uint8_t kind = kFd;
  uint64_t a = 0, b = 0, c = 0;  // fd: pid, fd; pipe: inode; socket: type, local, peer
  auto operator<=>(const EndpointKey&) const = default;
  // The key of the other end (a socket's peer; a pipe's and a bare fd's own key).
  EndpointKey Peer(const Endpoint& ep) const;
  // How reports name an endpoint with no description: "fd:41:3", "pipe:123", "sock:1:12:13".
  std::string Format() const;
};

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_ENGINE_STATE_H_
