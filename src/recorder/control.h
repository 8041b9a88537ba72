// Steering a running recorder: `parmon ctl pause|resume|period 5ms|threads TID,..|streams KINDS|
// status`. One command line in, one reply line out ("ok: paused", "error: <sentence>").
//
// Design. A Control belongs to one Recorder (Recorder::control()) and is the only object other
// threads of the recorder touch: the local control socket's thread (control_socket.h) and the
// collector client's thread (the CONTROL frame of src/live/) call Apply() while the recorder's
// loop drains. Apply() does the part that must take effect at once itself -- the program's
// enabled word and period in the segment's ControlPage (shm_abi.h), the selection the collector
// filters with -- under one mutex, and queues the record of the change (a ControlPause,
// ControlResume, ControlPeriod or ControlSelect event for the definitions stream) with the raw
// clock ticks it was made at. The recorder's loop takes the queue each window (at most a few ms
// later) and writes the records; only that thread touches the collector and the trace file.
//
// The pause range is stamped so that no program event can fall inside it: the pause's time is
// read after the enabled word is cleared, the resume's before it is set (a thread that loaded
// the word just before the pause commits its event within nanoseconds, see docs/control.md).
#ifndef PARMON_SRC_RECORDER_CONTROL_H_
#define PARMON_SRC_RECORDER_CONTROL_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "runtime/shm_abi.h"

namespace parmon::recorder {

class Recorder;

// Event families `streams` selects (a bit each).
enum StreamBits : uint32_t {
  kStreamRegions = 1,  // the program's own API events: regions, markers, counters, trace events
  kStreamMpi = 2,      // MPI wrappers
  kStreamPosix = 4,    // POSIX channels, pthread sync, timers
  kStreamSched = 8,    // the recorder's sampler and context switches
  kStreamAll = 15,
};

struct ControlCommand {
  enum class Verb { kPause, kResume, kPeriod, kThreads, kStreams, kStatus };
  Verb verb = Verb::kStatus;
  uint64_t period_ns = 0;         // kPeriod
  std::vector<uint32_t> tids;     // kThreads; empty: all threads
  uint32_t streams = kStreamAll;  // kStreams
};

// Parses one command line. Errors are one sentence naming what was wrong.
StatusOr<ControlCommand> ParseControlCommand(const std::string& line);
// "mpi,sched" for a mask; "all" for kStreamAll.
std::string StreamNames(uint32_t mask);
// The family (StreamBits) of a runtime event kind that selection may drop; 0 for the kinds it
// always keeps (definitions, names, process and thread life, losses).
inline uint32_t KindFamily(uint16_t kind) {
  // MpiInit, MpiCommDef, MpiClockSync and ChanInfo define ranks, communicators, clocks and
  // channels that later events refer to: never dropped.
  if (kind == 64 || kind == 71 || kind == 72 || kind == 96)
    return 0;
  if (kind >= 16 && kind <= 22)
    return kStreamRegions;
  if (kind >= 64 && kind <= 95)
    return kStreamMpi;
  if (kind >= 96 && kind <= 127)
    return kStreamPosix;
  return 0;
}

// One change made by Apply, for the recorder's loop to record (ticks: the session's raw clock).
struct ControlChange {
  enum class Type { kPause, kResume, kPeriod, kSelect };
  Type type = Type::kPause;
  uint64_t ticks = 0;
  uint64_t value = 0;          // kPeriod: ns; kSelect: the streams mask
  std::vector<uint32_t> tids;  // kSelect: selected threads (empty: all)
};

class Control {
 public:
  // page: the segment's ControlPage. ticks_are_tsc: the session clock's ticks (as the runtime's).
  Control(shm::ControlPage* page, bool ticks_are_tsc);

  // Parses and applies one command; thread-safe. Returns one line without a newline.
  std::string Apply(const std::string& command);

  // --- the recorder's loop thread ---
  std::vector<ControlChange> TakeChanges();
  // True when an event of the recorder's own sources (sampler, switches) at `ticks` is not to be
  // recorded: inside the current or the last paused range, or its family deselected.
  bool SkipSourceAt(uint64_t ts_ns, const TickConversion& clock) const;
  // The program-side selection the collector filters drained events with (cheap, lock-free).
  bool selecting() const { return selecting_.load(std::memory_order_relaxed); }
  // Whether the drain must judge events at all: a selection, or a pause ever made (a thread that
  // loaded the enabled word just before a pause and was preempted before stamping its event
  // stamps it inside the paused range; the drain drops it).
  bool filtering() const { return selecting() || ever_paused_.load(std::memory_order_relaxed); }
  // For one thread's drain: whether the thread is selected and the stream families recorded,
  // before and from the last selection change (events are kept by their own time, so the change
  // applies exactly at the time it was made, whenever the recorder drains them).
  struct ThreadSelection {
    bool before_selected = true, selected = true;
    uint32_t before_streams = kStreamAll, streams = kStreamAll;
    uint64_t since_ns = 0;  // of the last change
    // The paused ranges an event is dropped in (ns, exclusive of their bounds): the current
    // pause from paused_from_ns on (UINT64_MAX when recording), and the last closed one.
    uint64_t paused_from_ns = UINT64_MAX;
    uint64_t last_paused_begin_ns = 0, last_paused_end_ns = 0;
    bool Keep(uint16_t kind, uint64_t ts) const {
      const uint32_t family = KindFamily(kind);
      if (family == 0)
        return true;
      if (ts > paused_from_ns || (ts > last_paused_begin_ns && ts < last_paused_end_ns))
        return false;
      return ts < since_ns ? before_selected && (before_streams & family) != 0
                           : selected && (streams & family) != 0;
    }
  };
  ThreadSelection SelectionFor(uint32_t tid, const TickConversion& clock) const;
  bool paused() const;
  // False until the first command that changed anything (the fast path of the recorder's checks).
  bool ever_changed() const {
    return page_->change_seq.load(std::memory_order_relaxed) != 0 || selecting();
  }
  // The ticks of the raw clock now (what the runtime stamps events with).
  uint64_t NowTicks() const;

 private:
  std::string Status() const;  // with mu_ held

  shm::ControlPage* page_;
  bool ticks_are_tsc_;
  mutable std::mutex mu_;
  bool paused_ = false;
  uint64_t paused_since_ = 0;               // ticks, while paused
  uint64_t last_begin_ = 0, last_end_ = 0;  // the last closed range, ticks
  uint32_t pauses_ = 0;
  std::vector<uint32_t> tids_;  // sorted; empty: all
  uint32_t streams_ = kStreamAll;
  std::vector<uint32_t> before_tids_;  // the selection before the last change
  uint32_t before_streams_ = kStreamAll;
  uint64_t select_ticks_ = 0;  // when the last change was made
  std::atomic<bool> selecting_{false};
  std::atomic<bool> ever_paused_{false};
  std::vector<ControlChange> changes_;
};

// The entry point the collector client's CONTROL frame calls (and the control socket): applies
// `command` to the recorder's Control. Callable from any thread of the recorder process while the
// Recorder object lives; before Run opened the session, and once its last drain began, it replies
// "error: ...". The caller stops calling before the Recorder is destroyed (Run has returned).
std::string ApplyControl(Recorder& r, const std::string& command);

}  // namespace parmon::recorder

#endif  // PARMON_SRC_RECORDER_CONTROL_H_
