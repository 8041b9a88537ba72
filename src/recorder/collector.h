// The collector: the part of the recorder that turns drained events into a trace. It drains the
// session's rings by time window into per-(location, source) stream encoders, cuts a chunk when a
// stream's encoded bytes reach the limit, keeps the definitions stream (locations, processes,
// strings) ahead of the events that refer to them, holds the newest chunks in a flight recorder
// in --overflow overwrite mode, and keeps the loss ledger.
//
// It knows nothing of processes: who runs the command, how signals travel and when the session
// ends are the launcher's and the Recorder's business. Its only ties to the outside are the
// shared-memory segment it drains, the session clock and the writer its chunks go to (the
// writer's Flush / WriteEncoded; a later ChunkSink can stand in for the file).
#ifndef PARMON_SRC_RECORDER_COLLECTOR_H_
#define PARMON_SRC_RECORDER_COLLECTOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "format/codec.h"
#include "format/writer.h"
#include "recorder/control.h"
#include "recorder/drain.h"
#include "recorder/flight_recorder.h"
#include "recorder/loss_ledger.h"
#include "recorder/segment.h"

namespace parmon::recorder {

struct CollectorOptions {
  shm::Overflow overflow = shm::Overflow::kBlock;
  uint64_t flight_bytes = 64u << 20;  // overwrite mode: newest encoded bytes kept
  // The name a thread's location is defined with (the recorder reads /proc/PID/task/TID/comm).
  std::function<std::string(uint32_t pid, uint32_t tid)> thread_name;
};

class Collector {
 public:
  Collector(CollectorOptions options,
            Segment& segment,
            format::TraceWriter& writer,
            const TickConversion& clock);

  // `parmon ctl threads|streams`: the selection drained events are filtered with (null: none).
  void SetControl(const Control* control) { control_ = control; }

  // Drains every ring once; returns the events moved.
  size_t DrainAll();
  // Drains one ring (and frees it when its thread retired it).
  size_t DrainRing(uint32_t index);
  // A ring whose thread is gone for good but never retired it: drained, then freed.
  void RetireAbandoned(uint32_t index);

  uint32_t ThreadLocation(uint32_t pid, uint32_t tid);
  uint32_t CpuLocation(uint32_t cpu);
  void Append(uint32_t location, format::Source source, const format::Event& e);
  void AppendDefinition(const format::Event& e) { defs_.Append(e); }
  const std::map<uint32_t, uint32_t>& processes() const { return processes_; }
  void NoteProcess(uint32_t pid, uint32_t ppid, const std::string& command);
  // The kernel's name of the thread was `name` at `ts` (it may have changed by exec, prctl,
  // pthread_setname_np): when that is a change, the location is defined again with the new name,
  // which readers take as its name (docs/events.md). An empty name, the kernel name it had, or a
  // name older than the one it has changes nothing.
  void RenameThread(uint32_t pid, uint32_t tid, const std::string& name, uint64_t ts);

  // Cuts a chunk of every stream with events (definitions first).
  void FlushAll();
  // After a window drained at `drained_at` and FlushAll: a WATERMARK promising that every event
  // before it (less a slack for producers that read the clock but had not yet committed) is in
  // the file. A flight recorder holds chunks back, so it promises nothing.
  void WriteWatermark(uint64_t drained_at, uint64_t session_start);
  // Overwrite mode: writes the held chunks, oldest first, and one RingLost per stream that lost
  // events to eviction (stamped `start_ns`). No-op in the other modes.
  void WriteFlightRecorder(uint64_t start_ns);
  // The first write error stops writing; later events are counted as lost.
  void NoteWriteError(const Status& s);

  bool write_failed() const { return write_failed_; }
  const std::string& write_error() const { return write_error_; }
  uint64_t events_seen() const { return events_seen_; }
  // Events (not definitions) that could not be written after a write error: already in losses().
  uint64_t events_unwritten() const { return events_unwritten_; }
  uint64_t definitions_unwritten() const { return definitions_unwritten_; }
  uint64_t corruptions() const { return drainer_.corruptions(); }
  const LossLedger& losses() const { return ledger_; }
  // Per location, ns its thread waited for room in a full ring (--overflow block).
  const std::map<uint32_t, uint64_t>& held_by_location() const { return held_by_location_; }
  uint64_t overwritten() const { return flight_.overwritten_total(); }
  // Events the rings' producers dropped that no Lost event has reported yet (status line).
  uint64_t UnreportedDrops() const;

 private:
  struct RingCursor {
    uint32_t generation = 0;
    bool active = false;
    uint32_t location = 0;
    format::StreamEncoder* encoder = nullptr;
    uint64_t lost_reported = 0;  // sum of Lost counts seen in this claim
    uint64_t held_seen = 0;      // the ring's held_ticks already counted (held_by_location_)
  };
  // Counts of the Lost events in an encoder's pending bytes (overwrite mode must not lose them).
  struct PendingLost {
    uint64_t count = 0;    // sum of their counts
    uint64_t records = 0;  // number of Lost events
  };

  format::StreamEncoder* EncoderFor(uint32_t location, format::Source source);
  void FlushEncoder(format::StreamEncoder* enc);
  void HandleSpecial(RingCursor& cur, shm::RingControl& ctl, format::Event& e);
  // Names a thread from its process's ProcessBegin (at fork and after each exec).
  void NameAnnouncedProcess(uint32_t pid, uint32_t tid, uint32_t location, const format::Event& e);
  void RetireRing(uint32_t index);
  uint32_t DefineLocation(format::LocationType type, uint32_t pid, uint32_t id, std::string name);

  CollectorOptions options_;
  const Control* control_ = nullptr;
  Segment& segment_;
  format::TraceWriter& writer_;
  const TickConversion& clock_;
  RingDrainer drainer_;
  FlightRecorder flight_;
  LossLedger ledger_;
  std::map<uint32_t, uint64_t> held_by_location_;
  // Books the events of a chunk that could not be written as lost (definitions apart).
  void CountUnwritten(uint32_t location, format::Source source, uint64_t count);
  // The Lost records the encoder holds since its last chunk (then forgets them).
  uint64_t TakeLostRecords(const format::StreamEncoder* enc);

  std::vector<RingCursor> cursors_;
  std::unordered_map<uint64_t, std::unique_ptr<format::StreamEncoder>> encoders_;
  std::unordered_map<const format::StreamEncoder*, PendingLost> lost_in_encoder_;
  format::StreamEncoder defs_{0, format::Source::kDefinitions};
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> thread_locations_;  // (pid,tid) -> location
  std::map<uint32_t, uint32_t> cpu_locations_;
  struct NameAt {
    std::string shown;   // the name defined last (the kernel's, or the program's own choice)
    std::string kernel;  // the kernel's name as last known
    uint64_t ts = 0;     // when the thread had it (session ns)
  };
  std::map<uint32_t, NameAt> thread_names_;   // location -> the name defined last
  std::map<uint32_t, std::string> commands_;  // pid -> the command line it announced last
  std::map<uint32_t, uint32_t> processes_;    // pid -> ppid
  uint32_t next_location_ = 1;
  uint64_t chunk_bytes_ = 256u << 10;  // encoded bytes per stream before a chunk is cut
  uint64_t events_seen_ = 0;
  uint64_t events_unwritten_ = 0;       // decoded after a write error (also in ledger_)
  uint64_t definitions_unwritten_ = 0;  // definitions decoded after a write error
  bool write_failed_ = false;
  std::string write_error_;
};

}  // namespace parmon::recorder

#endif  // PARMON_SRC_RECORDER_COLLECTOR_H_
