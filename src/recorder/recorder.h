// The recorder -- the Cedar paper's "snooper". It owns the session's shared-memory segment, has
// the launcher start (or follow) the command, and runs the drain-window loop: the collector
// drains every thread's ring into per-stream encoders and writes chunks to the trace file. It
// never makes the program wait unless --overflow block was asked for (and then only when a ring
// is full).
//
// Pieces: collector.h (events -> chunks, flight recorder, loss ledger), launcher.h and
// mpi_launch.h (processes), session_meta.h (SESSION/END values), status_line.h. Other event
// sources (the /proc sampler, perf_event_open context switches) plug in as RecorderSource
// objects talking to the SourceSink interface (source_sink.h), which the Recorder implements.
#ifndef PARMON_SRC_RECORDER_RECORDER_H_
#define PARMON_SRC_RECORDER_RECORDER_H_

#include <sys/types.h>

#include <atomic>
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
#include "recorder/collector.h"
#include "recorder/control.h"
#include "recorder/segment.h"
#include "recorder/source_sink.h"

namespace parmon::recorder {

class ControlSocket;

struct RecordOptions {
  std::string output = "parmon.ptrace";
  uint64_t ring_bytes = 4u << 20;
  uint32_t ring_count = 1024;
  shm::Overflow overflow = shm::Overflow::kBlock;
  uint64_t flight_bytes = 64u << 20;  // --overflow overwrite: newest encoded bytes kept
  uint64_t window_ns = 5'000'000;     // drain period when the rings are not filling
  uint64_t flush_ns = 100'000'000;    // longest time an event waits in the recorder's memory
  int zstd_level = 1;
  bool quiet = false;              // no status line even on a terminal
  double children_grace_s = 10.0;  // after the command exits, how long to follow its children
  std::vector<std::string> extra_preload;  // more LD_PRELOAD libraries (preload families)
  std::vector<std::pair<std::string, std::string>> extra_session;  // more SESSION key/values
  uint32_t first_string_id = 1;  // see SegmentOptions::first_string_id
  pid_t attach_pid = 0;          // -p: follow this running process instead of starting a command
  uint64_t duration_ns = 0;      // with attach_pid: stop after this long (0: until it exits)
  // --mode and -t, told to the program's preload families through the segment header.
  shm::RunMode run_mode = shm::RunMode::kTrace;
  uint64_t period_ns = 10'000'000;
  // `parmon ctl`: listen on a local unix socket (control_socket.h) for control commands.
  bool control_socket = true;
};

struct RecordResult {
  int exit_code = 0;  // the command's, as a shell reports it (128+signal when killed)
  uint64_t events = 0;
  uint64_t lost = 0;
  uint64_t bytes = 0;
};

class Recorder final : public SourceSink {
 public:
  explicit Recorder(RecordOptions options);
  ~Recorder() override;

  void AddSource(std::unique_ptr<RecorderSource> source);
  // Runs argv under the recorder until it and its children exit. Errors are the recorder's own
  // (cannot create the file, cannot start the command); the command's failure is its exit code.
  StatusOr<RecordResult> Run(const std::vector<std::string>& argv);

  // `parmon ctl`: the session's control (control.h), null before Run opened the session and
  // after it ended. Any thread may call it meanwhile (ApplyControl does).
  Control* control() const { return control_ptr_.load(std::memory_order_acquire); }
  // The local control socket's path while it listens ("" otherwise).
  std::string control_socket_path() const;

  // --- SourceSink, for the sources ---
  const TickConversion& clock() const override { return clock_; }
  pid_t child_pid() const override { return child_pid_; }
  bool attached() const override { return options_.attach_pid > 0; }
  uint32_t ThreadLocation(uint32_t pid, uint32_t tid) override;
  uint32_t CpuLocation(uint32_t cpu) override;
  void Append(uint32_t location, format::Source source, const format::Event& e) override;
  void AppendDefinition(const format::Event& e) override;
  const std::map<uint32_t, uint32_t>& processes() const override;
  void NoteProcess(uint32_t pid, uint32_t ppid, const std::string& command) override;
  void RenameThread(uint32_t pid, uint32_t tid, const std::string& name, uint64_t ts) override;
  void AddEndValue(std::string key, std::string value) override;
  shm::MonitorTable* monitor_table() override {
    return segment_ ? shm::Monitor(segment_->header()) : nullptr;
  }
  const shm::SegmentHeader* segment_header() override {
    return segment_ ? segment_->header() : nullptr;
  }

 private:
  Status Open();
  Status StartOrAttach(const std::vector<std::string>& argv);
  void HandleSignals();
  bool CommandDone(uint64_t now);
  size_t DrainWindow(uint64_t* now);
  void RunLoop();
  // Sleeps one drain window, or until a writer bumps wake_seq past the value given, or a signal.
  void Sleep(uint32_t wake_seq);
  void FinishRings();
  RecordResult Finish();
  void CheckDeadThreads();
  void ReapChildren();
  void PrintStatus(bool final_line);
  // Writes the records of the control changes made since the last call (recorder thread).
  void RecordControlChanges();

  RecordOptions options_;
  TickConversion clock_;
  TscSample clock_first_sample_;  // measured-rate clocks: the start of the rate's baseline
  std::unique_ptr<Segment> segment_;
  std::unique_ptr<format::TraceWriter> writer_;
  std::unique_ptr<Collector> collector_;
  std::vector<std::unique_ptr<RecorderSource>> sources_;
  std::unique_ptr<Control> control_;
  std::atomic<Control*> control_ptr_{nullptr};
  std::unique_ptr<ControlSocket> control_socket_;
  std::string control_payload_;  // the payload of the ControlSelect being appended
  std::vector<std::pair<std::string, std::string>> end_values_;
  uint64_t drain_cpu_ns_ = 0;  // this thread's CPU time in ring drains and encoder flushes
  pid_t child_pid_ = -1;
  int child_status_ = 0;
  bool child_exited_ = false;
  uint64_t child_exit_ns_ = 0;
  int signal_fd_ = -1;
  uint64_t start_ns_ = 0;
  uint64_t start_realtime_ns_ = 0;
  uint64_t last_flush_ns_ = 0;
  uint64_t last_status_ns_ = 0;
  uint64_t last_dead_check_ns_ = 0;
  bool status_line_ = false;
};

// Parses sizes (4M, 512K, 1G, 4096) and durations (10ms, 2.5s): the bool forms of
// base/units.h's ParseSize / ParseDuration, kept for the subcommands that call them.
bool ParseSize(const std::string& text, uint64_t* out);
bool ParseDuration(const std::string& text, uint64_t* out_ns);

}  // namespace parmon::recorder

#endif  // PARMON_SRC_RECORDER_RECORDER_H_
