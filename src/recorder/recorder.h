// The recorder -- the Cedar paper's "snooper". It owns the session's shared-memory segment,
// starts the command with libparmon injected, drains every thread's ring by time window into
// per-stream encoders, and writes chunks to the trace file. It never makes the program wait
// unless --overflow block was asked for (and then only when a ring is full).
//
// Other event sources (the /proc sampler, perf_event_open context switches) plug in as
// RecorderSource objects: the recorder polls them from its loop and gives them locations and
// streams on the same clock.
#ifndef PARMON_SRC_RECORDER_RECORDER_H_
#define PARMON_SRC_RECORDER_RECORDER_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "format/codec.h"
#include "format/writer.h"
#include "recorder/drain.h"
#include "recorder/segment.h"

namespace parmon::recorder {

class Recorder;

// Something that adds events of its own to the session (sampler, context switches, ...).
class RecorderSource {
 public:
  virtual ~RecorderSource() = default;
  virtual const char* name() const = 0;
  // Between fork and the command's exec (the child waits meanwhile), so a source can attach to
  // the process from its first instruction. Not called when attaching to a running process.
  virtual Status ChildCreated(Recorder&, pid_t) { return Status::Ok(); }
  // After the command started (its pid is Recorder::child_pid()).
  virtual Status Start(Recorder& recorder) = 0;
  // From the recorder's loop, every iteration (at least every window).
  virtual void Poll(Recorder& recorder, uint64_t now_ns) = 0;
  // Before the file is closed: a last poll and flush.
  virtual void Stop(Recorder& recorder) = 0;
};

struct RecordOptions {
  std::string output = "parmon.ptrace";
  uint64_t ring_bytes = 4u << 20;
  uint32_t ring_count = 1024;
  shm::Overflow overflow = shm::Overflow::kBlock;
  uint64_t flight_bytes = 64u << 20;  // --overflow overwrite: newest encoded bytes kept
  uint64_t window_ns = 5'000'000;     // drain period when the rings are not filling
  uint64_t flush_ns = 500'000'000;    // longest time an event waits in the recorder's memory
  int zstd_level = 1;
  bool quiet = false;              // no status line even on a terminal
  double children_grace_s = 10.0;  // after the command exits, how long to follow its children
  std::vector<std::string> extra_preload;  // more LD_PRELOAD libraries (preload families)
  std::vector<std::pair<std::string, std::string>> extra_session;  // more SESSION key/values
  uint32_t first_string_id = 1;  // see SegmentOptions::first_string_id
  pid_t attach_pid = 0;          // -p: follow this running process instead of starting a command
  uint64_t duration_ns = 0;      // with attach_pid: stop after this long (0: until it exits)
};

struct RecordResult {
  int exit_code = 0;  // the command's, as a shell reports it (128+signal when killed)
  uint64_t events = 0;
  uint64_t lost = 0;
  uint64_t bytes = 0;
};

class Recorder {
 public:
  explicit Recorder(RecordOptions options);
  ~Recorder();

  void AddSource(std::unique_ptr<RecorderSource> source);
  // Runs argv under the recorder until it and its children exit. Errors are the recorder's own
  // (cannot create the file, cannot start the command); the command's failure is its exit code.
  StatusOr<RecordResult> Run(const std::vector<std::string>& argv);

  // --- for sources ---
  const TickConversion& clock() const { return clock_; }
  pid_t child_pid() const { return child_pid_; }
  bool attached() const { return options_.attach_pid > 0; }
  // The location of a thread (creates and defines it on first use).
  uint32_t ThreadLocation(uint32_t pid, uint32_t tid);
  // The location of a CPU (type kCpu).
  uint32_t CpuLocation(uint32_t cpu);
  // Appends an event to the (location, source) stream; e.location/e.source are taken from args.
  void Append(uint32_t location, format::Source source, const format::Event& e);
  // Appends a definition event (DefString, DefLocation, DefProcess).
  void AppendDefinition(const format::Event& e);
  // Processes known to be part of the session (seen in rings or reported by sources).
  const std::map<uint32_t, uint32_t>& processes() const { return processes_; }  // pid -> ppid
  void NoteProcess(uint32_t pid, uint32_t ppid, const std::string& command);
  void AddEndValue(std::string key, std::string value);

 private:
  struct RingCursor {
    uint32_t generation = 0;
    bool active = false;
    uint32_t location = 0;
    format::StreamEncoder* encoder = nullptr;
    uint64_t lost_reported = 0;  // sum of Lost counts seen in this claim
  };
  struct Held {  // overwrite mode: encoded chunks kept in memory, newest last
    uint32_t location;
    format::Source source;
    uint64_t first_ts, last_ts;
    uint32_t count;
    uint64_t lost_inside;   // counts of the Lost events among them
    uint64_t lost_records;  // how many Lost events are among them
    std::vector<uint8_t> bytes;
  };

  Status StartChild(const std::vector<std::string>& argv);
  Status AttachTo(pid_t pid);
  size_t DrainAll();
  size_t DrainRing(uint32_t index);
  void HandleSpecial(RingCursor& cur, shm::RingControl& ctl, format::Event& e);
  void RetireRing(uint32_t index);
  void CheckDeadThreads();
  format::StreamEncoder* EncoderFor(uint32_t location, format::Source source);
  void FlushEncoder(format::StreamEncoder* enc);
  void FlushAll();
  void NoteWriteError(const Status& s);
  void ReapChildren();
  void PrintStatus(bool final_line);
  std::vector<std::pair<std::string, std::string>> SessionValues(
      const std::vector<std::string>& argv) const;

  RecordOptions options_;
  TickConversion clock_;
  TscSample clock_first_sample_;  // measured-rate clocks: the start of the rate's baseline
  std::unique_ptr<Segment> segment_;
  std::unique_ptr<RingDrainer> drainer_;
  std::unique_ptr<format::TraceWriter> writer_;
  std::vector<std::unique_ptr<RecorderSource>> sources_;
  std::vector<RingCursor> cursors_;
  std::unordered_map<uint64_t, std::unique_ptr<format::StreamEncoder>> encoders_;
  format::StreamEncoder defs_{0, format::Source::kDefinitions};
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> thread_locations_;  // (pid,tid) -> location
  std::map<uint32_t, uint32_t> cpu_locations_;
  std::map<uint32_t, uint32_t> processes_;
  std::map<uint32_t, uint64_t> lost_by_location_;
  std::vector<std::pair<std::string, std::string>> end_values_;
  std::vector<Held> held_;
  uint64_t chunk_bytes_ = 256u << 10;  // encoded bytes per stream before a chunk is cut
  // Counts of the Lost events in each encoder's pending bytes (overwrite mode must not lose them).
  struct PendingLost {
    uint64_t count = 0;    // sum of their counts
    uint64_t records = 0;  // number of Lost events
  };
  std::unordered_map<const format::StreamEncoder*, PendingLost> lost_in_encoder_;
  uint64_t held_bytes_ = 0;
  // Flight recorder, per (location, source): events evicted, and the counts of Lost events that
  // were among them (both go into one RingLost event per stream at the end).
  std::map<std::pair<uint32_t, format::Source>, uint64_t> overwritten_;
  std::map<std::pair<uint32_t, format::Source>, uint64_t> evicted_lost_;
  uint32_t next_location_ = 1;
  pid_t child_pid_ = -1;
  int child_status_ = 0;
  bool child_exited_ = false;
  uint64_t child_exit_ns_ = 0;
  int signal_fd_ = -1;
  bool write_failed_ = false;
  std::string write_error_;
  uint64_t events_seen_ = 0;
  uint64_t events_unwritten_ = 0;  // decoded after a write error
  uint64_t start_ns_ = 0;
  uint64_t start_realtime_ns_ = 0;
  uint64_t last_flush_ns_ = 0;
  uint64_t last_status_ns_ = 0;
  uint64_t last_dead_check_ns_ = 0;
  bool status_line_ = false;
};

// Parses sizes such as 4M, 512K, 1G, 4096.
bool ParseSize(const std::string& text, uint64_t* out);
// Parses durations such as 10ms, 1s, 500us, 2.5s.
bool ParseDuration(const std::string& text, uint64_t* out_ns);

}  // namespace parmon::recorder

#endif  // PARMON_SRC_RECORDER_RECORDER_H_
