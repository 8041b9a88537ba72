#include "recorder/recorder.h"

#include <dirent.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "base/clock.h"
#include "base/units.h"
#include "recorder/control_socket.h"
#include "recorder/launcher.h"
#include "recorder/session_meta.h"
#include "recorder/status_line.h"

namespace parmon::recorder {

using format::Event;
using format::Source;

namespace {

uint64_t CpuTimeNs(int who) {
  rusage ru;
  getrusage(who, &ru);
  return (static_cast<uint64_t>(ru.ru_utime.tv_sec) + static_cast<uint64_t>(ru.ru_stime.tv_sec)) *
             1000000000ull +
         (static_cast<uint64_t>(ru.ru_utime.tv_usec) + static_cast<uint64_t>(ru.ru_stime.tv_usec)) *
             1000ull;
}

}  // namespace

bool ParseSize(const std::string& text, uint64_t* out) {
  auto v = parmon::ParseSize(text, "size");
  if (!v.ok())
    return false;
  *out = *v;
  return true;
}

bool ParseDuration(const std::string& text, uint64_t* out_ns) {
  auto v = parmon::ParseDuration(text, "duration");
  if (!v.ok())
    return false;
  *out_ns = *v;
  return true;
}

Recorder::Recorder(RecordOptions options) : options_(std::move(options)) {}

Recorder::~Recorder() {
  control_socket_.reset();  // its thread calls into control_
  control_ptr_.store(nullptr, std::memory_order_release);
  if (signal_fd_ >= 0)
    close(signal_fd_);
}

void Recorder::AddSource(std::unique_ptr<RecorderSource> source) {
  sources_.push_back(std::move(source));
}

uint32_t Recorder::ThreadLocation(uint32_t pid, uint32_t tid) {
  return collector_->ThreadLocation(pid, tid);
}
uint32_t Recorder::CpuLocation(uint32_t cpu) {
  return collector_->CpuLocation(cpu);
}
void Recorder::Append(uint32_t location, Source source, const Event& e) {
  // The recorder's own sources (sampler, switches) stop with the program while paused, and with
  // `streams` leaving sched out; they keep polling so the first interval after a resume does not
  // count the paused time.
  if (source != Source::kRuntime && control_ && control_->ever_changed() &&
      control_->SkipSourceAt(e.ts, clock_))
    return;
  collector_->Append(location, source, e);
}

std::string Recorder::control_socket_path() const {
  return control_socket_ ? control_socket_->path() : std::string();
}

void Recorder::RecordControlChanges() {
  if (!control_)
    return;
  for (const ControlChange& c : control_->TakeChanges()) {
    Event e;
    e.ts = clock_.ToNs(c.ticks);
    switch (c.type) {
      case ControlChange::Type::kPause:
        e.kind = static_cast<uint16_t>(format::Kind::kControlPause);
        break;
      case ControlChange::Type::kResume:
        e.kind = static_cast<uint16_t>(format::Kind::kControlResume);
        break;
      case ControlChange::Type::kPeriod:
        e.kind = static_cast<uint16_t>(format::Kind::kControlPeriod);
        e.nargs = 1;
        e.args[0] = c.value;
        for (auto& src : sources_)
          src->SetPeriod(c.value);
        break;
      case ControlChange::Type::kSelect: {
        e.kind = static_cast<uint16_t>(format::Kind::kControlSelect);
        e.nargs = 1;
        e.args[0] = c.value;
        std::string tids;
        for (uint32_t t : c.tids)
          tids += (tids.empty() ? "" : ",") + std::to_string(t);
        control_payload_ = tids;
        e.payload = control_payload_;
        break;
      }
    }
    collector_->AppendDefinition(e);
  }
}
void Recorder::AppendDefinition(const Event& e) {
  collector_->AppendDefinition(e);
}
const std::map<uint32_t, uint32_t>& Recorder::processes() const {
  return collector_->processes();
}
void Recorder::NoteProcess(uint32_t pid, uint32_t ppid, const std::string& command) {
  collector_->NoteProcess(pid, ppid, command);
}

void Recorder::RenameThread(uint32_t pid, uint32_t tid, const std::string& name, uint64_t ts) {
  collector_->RenameThread(pid, tid, name, ts);
}
void Recorder::AddEndValue(std::string key, std::string value) {
  end_values_.emplace_back(std::move(key), std::move(value));
}

void Recorder::CheckDeadThreads() {
  // A thread killed with its process never retires its ring: free rings whose thread is gone.
  for (uint32_t i = 0; i < segment_->header()->ring_count; ++i) {
    shm::RingControl& ctl = segment_->rings()[i];
    if (ctl.state.load(std::memory_order_acquire) != shm::kClaimed)
      continue;
    if (syscall(SYS_tgkill, ctl.pid, ctl.tid, 0) == 0 || errno != ESRCH)
      continue;
    collector_->RetireAbandoned(i);
  }
}

void Recorder::ReapChildren() {
  for (;;) {
    int status;
    pid_t p = waitpid(-1, &status, WNOHANG | __WALL);
    if (p <= 0)
      break;
    if (p == child_pid_) {
      child_exited_ = true;
      child_status_ = status;
      child_exit_ns_ = clock_.NowNs();
    }
  }
}

void Recorder::PrintStatus(bool final_line) {
  if (!status_line_)
    return;
  StatusFigures f;
  f.elapsed_ns = clock_.NowNs() - start_ns_;
  f.events = collector_->events_seen();
  f.bytes_written = writer_ ? writer_->bytes_written() : 0;
  f.lost = collector_->losses().total() + collector_->UnreportedDrops();
  DrawStatusLine(f, final_line);
}

// The segment (with the mode and period every process of the session reads), the trace file and
// the collector between them.
Status Recorder::Open() {
  clock_ = CalibrateClock();
  clock_first_sample_ = SampleTscAndMonotonic();
  start_ns_ = clock_.NowNs();
  start_realtime_ns_ = RealtimeNs();
  SegmentOptions so;
  so.ring_bytes = options_.ring_bytes;
  so.ring_count = options_.ring_count;
  so.overflow = options_.overflow;
  so.ticks_are_tsc = clock_.ticks_are_tsc;
  so.first_string_id = options_.first_string_id;
  so.run_mode = options_.run_mode;
  so.period_ns = options_.period_ns;
  PARMON_ASSIGN_OR_RETURN(segment_, Segment::Create(so));
  format::WriterOptions wo;
  wo.zstd_level = options_.zstd_level;
  PARMON_ASSIGN_OR_RETURN(writer_, format::TraceWriter::Create(options_.output, wo));
  CollectorOptions co;
  co.overflow = options_.overflow;
  co.flight_bytes = options_.flight_bytes;
  co.thread_name = [](uint32_t pid, uint32_t tid) {
    return ReadProcFile(fmt::format("/proc/{}/task/{}/comm", pid, tid));
  };
  collector_ = std::make_unique<Collector>(std::move(co), *segment_, *writer_, clock_);
  control_ = std::make_unique<Control>(shm::Control(segment_->header()), clock_.ticks_are_tsc);
  collector_->SetControl(control_.get());
  control_ptr_.store(control_.get(), std::memory_order_release);
  return Status::Ok();
}

Status Recorder::StartOrAttach(const std::vector<std::string>& argv) {
  if (options_.attach_pid > 0) {
    PARMON_RETURN_IF_ERROR(CheckAttachable(options_.attach_pid));
    child_pid_ = options_.attach_pid;
    return Status::Ok();
  }
  PARMON_ASSIGN_OR_RETURN(std::string preload, PreloadList(options_.extra_preload));
  auto pid = StartCommand(argv, segment_->name(), preload, [&](pid_t child) {
    for (auto& src : sources_) {
      Status s = src->ChildCreated(*this, child);
      if (!s.ok())
        fmt::print(stderr, "parmon record: {}: {}\n", src->name(), s.message());
    }
  });
  if (!pid.ok())
    return pid.status();
  child_pid_ = *pid;
  return Status::Ok();
}

void Recorder::HandleSignals() {
  signalfd_siginfo si;
  while (read(signal_fd_, &si, sizeof si) == sizeof si) {
    if (si.ssi_signo == SIGCHLD) {
      ReapChildren();
    } else if (options_.attach_pid > 0) {
      child_exited_ = true;  // attached: Ctrl-C ends the recording, not the process
      child_exit_ns_ = clock_.NowNs();
    } else if (child_pid_ > 0 && !child_exited_) {
      kill(child_pid_, static_cast<int>(si.ssi_signo));  // forward INT/TERM/HUP/QUIT
    }
  }
  ReapChildren();
  if (options_.attach_pid > 0 && !child_exited_ &&
      (!ProcessAlive(child_pid_) ||
       (options_.duration_ns && clock_.NowNs() - start_ns_ >= options_.duration_ns))) {
    child_exited_ = true;
    child_exit_ns_ = clock_.NowNs();
  }
}

// One drain window: every ring, every source, then the periodic chores. Returns the events
// drained from the rings; *now is the time the window's sources were polled at.
size_t Recorder::DrainWindow(uint64_t* now_out) {
  RecordControlChanges();
  const uint64_t drain_start = clock_.NowNs();
  const uint64_t cpu_before = ThreadCpuNs();
  size_t drained = collector_->DrainAll();
  drain_cpu_ns_ += ThreadCpuNs() - cpu_before;
  const uint64_t now = clock_.NowNs();
  *now_out = now;
  for (auto& src : sources_)
    src->Poll(*this, now);
  if (now - last_dead_check_ns_ > 100'000'000) {
    if (clock_.base == ClockBase::kMonotonic && clock_.ticks_are_tsc) {
      // Re-anchor the measured TSC rate: the baseline grows, the error near now stays small.
      TscSample s = SampleTscAndMonotonic();
      if (s.ns - clock_first_sample_.ns > 50'000'000)
        clock_ = ConversionFromSamples(clock_first_sample_, s);
    }
    CheckDeadThreads();
    last_dead_check_ns_ = now;
  }
  if (now - last_flush_ns_ > options_.flush_ns) {
    const uint64_t flush_cpu = ThreadCpuNs();
    collector_->FlushAll();
    drain_cpu_ns_ += ThreadCpuNs() - flush_cpu;
    // Every ring was drained to its head after drain_start and every encoder is flushed.
    collector_->WriteWatermark(drain_start, start_ns_);
    last_flush_ns_ = now;
  }
  if (now - last_status_ns_ > 250'000'000) {
    PrintStatus(false);
    last_status_ns_ = now;
  }
  return drained;
}

// After the command exited: follow its children until they exit too (bounded by the grace
// period).
bool Recorder::CommandDone(uint64_t now) {
  if (!child_exited_)
    return false;
  bool children_left = waitpid(-1, nullptr, WNOHANG | __WALL) == 0;
  double since = static_cast<double>(now - child_exit_ns_) / 1e9;
  if (children_left && since <= options_.children_grace_s)
    return false;
  if (children_left)
    fmt::print(stderr,
               "parmon record: the command exited; processes it left running after {:.0f} s "
               "are no longer followed\n",
               options_.children_grace_s);
  return true;
}

void Recorder::RunLoop() {
  shm::SegmentHeader* h = segment_->header();
  for (;;) {
    HandleSignals();
    // Read before the drain: a writer's request made during it ends the sleep below at once.
    const uint32_t wake_seq = h->wake_seq.load(std::memory_order_seq_cst);
    uint64_t now = 0;
    size_t drained = DrainWindow(&now);
    shm::WakeWaitingWriters(h);
    if (CommandDone(now))
      break;
    // Busy rings are drained again at once; otherwise sleep one window, or until a writer asks
    // (a ring half full, a writer waiting for space) or a signal comes.
    const uint64_t busy = segment_->ring_slots() / 8;
    if (drained < busy)
      Sleep(wake_seq);
  }
}

void Recorder::Sleep(uint32_t wake_seq) {
  shm::SegmentHeader* h = segment_->header();
  const uint64_t until = clock_.NowNs() + std::max<uint64_t>(options_.window_ns, 100'000);
  // Slices of at most 10 ms, so that a signal (Ctrl-C to forward, a child's exit) waits no
  // longer than that whatever the window.
  for (uint64_t now = clock_.NowNs(); now < until; now = clock_.NowNs()) {
    h->recorder_sleeping.store(1, std::memory_order_seq_cst);
    shm::FutexWait(&h->wake_seq, wake_seq, std::min<uint64_t>(until - now, 10'000'000));
    h->recorder_sleeping.store(0, std::memory_order_seq_cst);
    if (h->wake_seq.load(std::memory_order_relaxed) != wake_seq)
      return;
    pollfd pfd{signal_fd_, POLLIN, 0};
    if (poll(&pfd, 1, 0) > 0)
      return;
  }
}

// Every process has exited: the last drain, and rings still claimed are from threads killed with
// their process.
void Recorder::FinishRings() {
  // No control command after the last drain: the socket goes, the last changes are recorded.
  control_socket_.reset();
  control_ptr_.store(nullptr, std::memory_order_release);
  RecordControlChanges();
  segment_->header()->session_state.store(shm::kFinishing, std::memory_order_relaxed);
  CheckDeadThreads();
  const uint64_t cpu_before = ThreadCpuNs();
  collector_->DrainAll();
  drain_cpu_ns_ += ThreadCpuNs() - cpu_before;
  shm::WakeWaitingWriters(
      segment_->header());  // a writer still waiting sees kFinishing and stops waiting
  for (uint32_t i = 0; i < segment_->header()->ring_count; ++i) {
    auto& ctl = segment_->rings()[i];
    if (ctl.state.load(std::memory_order_acquire) == shm::kClaimed) {
      ctl.state.store(shm::kRetired, std::memory_order_release);
      collector_->DrainRing(i);
    }
  }
  for (auto& src : sources_)
    src->Stop(*this);
}

RecordResult Recorder::Finish() {
  RecordResult result;
  if (WIFEXITED(child_status_))
    result.exit_code = WEXITSTATUS(child_status_);
  else if (WIFSIGNALED(child_status_))
    result.exit_code = 128 + WTERMSIG(child_status_);
  // Flight recorder: the newest chunks go to the file now, oldest first.
  const uint64_t flush_cpu = ThreadCpuNs();
  collector_->FlushAll();
  drain_cpu_ns_ += ThreadCpuNs() - flush_cpu;
  collector_->WriteFlightRecorder(start_ns_);

  EndFacts end;
  end.end_ns = clock_.NowNs();
  end.exit_code = result.exit_code;
  end.lost = collector_->losses().total();
  end.lost_by_location = collector_->losses().by_location();
  end.held_by_location = collector_->held_by_location();
  end.overwritten = collector_->overwritten();
  end.unattached_lost = segment_->header()->unattached_dropped.load(std::memory_order_relaxed);
  end.ring_corruptions = collector_->corruptions();
  end.recorder_cpu_ns = CpuTimeNs(RUSAGE_SELF);
  end.children_cpu_ns = CpuTimeNs(RUSAGE_CHILDREN);
  end.extra = end_values_;
  // The drain's own rate (bench/record_loop_bench): the ring events it moved over the CPU time
  // of its drains and flushes, apart from start-up, sampling and the after-run calibration.
  end.extra.emplace_back("drain_cpu_ns", std::to_string(drain_cpu_ns_));
  end.extra.emplace_back("ring_events", std::to_string(collector_->events_seen()));
  // After a full disk the writer kept the space to close the file: the END says what was lost.
  if (writer_->can_finish()) {
    Status s = writer_->Finish(EndValues(end));
    if (!s.ok())
      collector_->NoteWriteError(s);
  }
  result.events = writer_->events_written();
  // Events that could not be written are in the ledger (end.lost) already: counted once.
  result.lost = end.lost + end.unattached_lost;
  result.bytes = writer_->bytes_written();
  PrintStatus(true);
  if (collector_->write_failed()) {
    const bool closed = writer_->space_exhausted() && writer_->can_finish();
    fmt::print(stderr, "parmon record: the trace {} {} after a write error ({})\n", options_.output,
               closed ? "is closed and consistent; its END counts what was lost"
                      : "is incomplete: readable up to its last whole chunk",
               collector_->write_error());
  }
  if (result.lost > 0) {
    std::string unwritten;
    if (collector_->events_unwritten() > 0)
      unwritten = fmt::format(", {} of them not written", collector_->events_unwritten());
    fmt::print(stderr, "parmon record: {} {} lost{} (see parmon info {})\n", result.lost,
               result.lost == 1 ? "event was" : "events were", unwritten, options_.output);
  }
  return result;
}

namespace {

// The recorder's threads run as SCHED_BATCH, at the nice value parmon was started with: the
// kernel then does not let their wake-ups preempt a running thread of the program. They still get
// their fair share of the CPUs (a drain that falls behind is not starved), but they take it when a
// CPU is free or a time slice ends instead of cutting into one. With other work on the 2 CPUs a
// traced ping-pong paid 314 instead of 423 ns per call for it; on a quiet machine the difference
// was within the noise (bench/mpi_bench.sh's trace-normal variant, docs/comm.md).
// Called after the command was forked (it keeps parmon's own policy), for every thread there is
// (`--to`'s forwarder already runs); threads made later inherit it. Nothing when parmon runs under
// a real-time or idle policy, or with PARMON_RECORDER_SCHED= normal (for A/B measurements).
void StepAsideForTheProgram() {
  if (const char* e = getenv("PARMON_RECORDER_SCHED"); e && std::string_view(e) == "normal")
    return;
  if (sched_getscheduler(0) != SCHED_OTHER)
    return;
  sched_param none{};
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) {
    sched_setscheduler(0, SCHED_BATCH, &none);
    return;
  }
  while (dirent* ent = readdir(d)) {
    const long tid = strtol(ent->d_name, nullptr, 10);
    if (tid > 0)
      sched_setscheduler(static_cast<pid_t>(tid), SCHED_BATCH, &none);
  }
  closedir(d);
}

}  // namespace

StatusOr<RecordResult> Recorder::Run(const std::vector<std::string>& argv) {
  if (argv.empty() && options_.attach_pid <= 0)
    return Status::Error("no command given: parmon record [options] -- CMD ARGS");
  PARMON_RETURN_IF_ERROR(Open());
  // Signals arrive through a signalfd; the child gets them unblocked and forwarded.
  signal_fd_ = OpenSignalChannel();
  if (Status s = StartOrAttach(argv); !s.ok()) {
    // Nothing was recorded (the command could not be started): leave no trace file behind
    // rather than one that holds only a header.
    collector_.reset();
    writer_.reset();
    struct stat st;
    if (stat(options_.output.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      unlink(options_.output.c_str());
    return s;
  }

  StepAsideForTheProgram();
  SessionFacts facts;
  facts.argv = argv;
  if (options_.attach_pid > 0) {
    // No library in it announces the process: the session names it from /proc, as it was
    // started (its command line, parent), so that info and report say what was followed.
    AttachedProcess attached = DescribeProcess(options_.attach_pid);
    std::string command;
    for (const auto& a : attached.argv)
      command += (command.empty() ? "" : " ") + a;
    collector_->NoteProcess(static_cast<uint32_t>(options_.attach_pid),
                            static_cast<uint32_t>(attached.ppid), command);
    facts.argv = std::move(attached.argv);
  }
  facts.start_realtime_ns = start_realtime_ns_;
  facts.start_ns = start_ns_;
  facts.clock = &clock_;
  facts.overflow = options_.overflow;
  facts.ring_bytes = segment_->ring_slots() * sizeof(shm::Slot);
  facts.ring_count = segment_->header()->ring_count;
  facts.extra = options_.extra_session;
  Status ws = writer_->WriteSession(SessionValues(facts));
  if (!ws.ok())
    collector_->NoteWriteError(ws);
  for (auto& src : sources_) {
    Status s = src->Start(*this);
    if (!s.ok())
      fmt::print(stderr, "parmon record: {}: {}\n", src->name(), s.message());
  }
  status_line_ = !options_.quiet && isatty(STDERR_FILENO);
  last_flush_ns_ = start_ns_;
  if (options_.control_socket) {
    auto sock =
        ControlSocket::Start([this](const std::string& line) { return ApplyControl(*this, line); });
    if (sock.ok())
      control_socket_ = std::move(*sock);
    else
      fmt::print(stderr, "parmon record: no local control (parmon ctl): {}\n",
                 sock.status().message());
  }

  RunLoop();
  FinishRings();
  return Finish();
}

}  // namespace parmon::recorder
