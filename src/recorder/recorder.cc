#include "recorder/recorder.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "base/varint.h"
#include "recorder/drain.h"

#include <functional>

extern char** environ;

namespace parmon::recorder {

using format::Event;
using format::Kind;
using format::Source;

namespace {

std::string ExeDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    return ".";
  buf[n] = '\0';
  std::string path(buf);
  return path.substr(0, path.rfind('/'));
}

bool FileExists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

// Where libparmon.so is: $PARMON_LIB_DIR, <exe>/../lib (build tree), <exe>/../<install libdir>,
// <exe>.
std::string LibDir() {
  if (const char* d = getenv("PARMON_LIB_DIR"))
    return d;
  std::string exe = ExeDir();
  for (const std::string& d : {exe + "/../lib", exe + "/../" PARMON_INSTALL_LIBDIR, exe})
    if (FileExists(d + "/libparmon.so"))
      return d;
  return exe + "/../lib";
}

// A /proc file of a task that may be exiting as we read it: the read then fails (ESRCH), which
// std::filebuf reports by throwing. read(2) says so with -1, and we keep what came before.
std::string ReadSmallFile(const std::string& path) {
  std::string s;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return s;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    s.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0'))
    s.pop_back();
  return s;
}

uint64_t CpuTimeNs(int who) {
  rusage ru;
  getrusage(who, &ru);
  return (static_cast<uint64_t>(ru.ru_utime.tv_sec) + static_cast<uint64_t>(ru.ru_stime.tv_sec)) *
             1000000000ull +
         (static_cast<uint64_t>(ru.ru_utime.tv_usec) + static_cast<uint64_t>(ru.ru_stime.tv_usec)) *
             1000ull;
}

std::string HumanBytes(uint64_t b) {
  if (b >= (1ull << 30))
    return fmt::format("{:.1f} GB", b / 1073741824.0);
  if (b >= (1ull << 20))
    return fmt::format("{:.1f} MB", b / 1048576.0);
  return fmt::format("{:.1f} KB", b / 1024.0);
}

std::string HumanCount(uint64_t n) {
  if (n >= 1000000)
    return fmt::format("{:.1f}M", n / 1e6);
  if (n >= 1000)
    return fmt::format("{:.1f}k", n / 1e3);
  return std::to_string(n);
}

}  // namespace

bool ParseSize(const std::string& text, uint64_t* out) {
  if (text.empty())
    return false;
  char* end = nullptr;
  double v = strtod(text.c_str(), &end);
  if (end == text.c_str() || v < 0)
    return false;
  std::string unit(end);
  uint64_t mult = 1;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "K" || unit == "KB" || unit == "k" || unit == "KiB")
    mult = 1ull << 10;
  else if (unit == "M" || unit == "MB" || unit == "m" || unit == "MiB")
    mult = 1ull << 20;
  else if (unit == "G" || unit == "GB" || unit == "g" || unit == "GiB")
    mult = 1ull << 30;
  else
    return false;
  *out = static_cast<uint64_t>(v * static_cast<double>(mult));
  return true;
}

bool ParseDuration(const std::string& text, uint64_t* out_ns) {
  if (text.empty())
    return false;
  char* end = nullptr;
  double v = strtod(text.c_str(), &end);
  if (end == text.c_str() || v < 0)
    return false;
  std::string unit(end);
  double mult;
  if (unit == "ns")
    mult = 1;
  else if (unit == "us")
    mult = 1e3;
  else if (unit == "ms")
    mult = 1e6;
  else if (unit == "s" || unit.empty())
    mult = 1e9;
  else if (unit == "m" || unit == "min")
    mult = 60e9;
  else
    return false;
  *out_ns = static_cast<uint64_t>(v * mult);
  return true;
}

Recorder::Recorder(RecordOptions options) : options_(std::move(options)) {}

Recorder::~Recorder() {
  if (signal_fd_ >= 0)
    close(signal_fd_);
}

void Recorder::AddSource(std::unique_ptr<RecorderSource> source) {
  sources_.push_back(std::move(source));
}

format::StreamEncoder* Recorder::EncoderFor(uint32_t location, Source source) {
  uint64_t key = uint64_t{location} << 8 | static_cast<uint8_t>(source);
  auto& slot = encoders_[key];
  if (!slot)
    slot = std::make_unique<format::StreamEncoder>(location, source);
  return slot.get();
}

uint32_t Recorder::ThreadLocation(uint32_t pid, uint32_t tid) {
  auto [it, inserted] = thread_locations_.emplace(std::make_pair(pid, tid), next_location_);
  if (!inserted)
    return it->second;
  uint32_t loc = next_location_++;
  std::string name = ReadSmallFile(fmt::format("/proc/{}/task/{}/comm", pid, tid));
  Event d;
  d.kind = static_cast<uint16_t>(Kind::kDefLocation);
  d.nargs = 4;
  d.args[0] = loc;
  d.args[1] = static_cast<uint64_t>(format::LocationType::kThread);
  d.args[2] = pid;
  d.args[3] = tid;
  d.payload = name;
  d.ts = clock_.NowNs();
  AppendDefinition(d);
  return loc;
}

uint32_t Recorder::CpuLocation(uint32_t cpu) {
  auto [it, inserted] = cpu_locations_.emplace(cpu, next_location_);
  if (!inserted)
    return it->second;
  uint32_t loc = next_location_++;
  std::string name = fmt::format("cpu{}", cpu);
  Event d;
  d.kind = static_cast<uint16_t>(Kind::kDefLocation);
  d.nargs = 4;
  d.args[0] = loc;
  d.args[1] = static_cast<uint64_t>(format::LocationType::kCpu);
  d.args[2] = 0;
  d.args[3] = cpu;
  d.payload = name;
  d.ts = clock_.NowNs();
  AppendDefinition(d);
  return loc;
}

void Recorder::NoteProcess(uint32_t pid, uint32_t ppid, const std::string& command) {
  auto [it, inserted] = processes_.emplace(pid, ppid);
  if (!inserted && command.empty())
    return;
  Event d;
  d.kind = static_cast<uint16_t>(Kind::kDefProcess);
  d.nargs = 2;
  d.args[0] = pid;
  d.args[1] = ppid;
  d.payload = command;
  d.ts = clock_.NowNs();
  AppendDefinition(d);
}

void Recorder::AddEndValue(std::string key, std::string value) {
  end_values_.emplace_back(std::move(key), std::move(value));
}

void Recorder::Append(uint32_t location, Source source, const Event& e) {
  ++events_seen_;
  EncoderFor(location, source)->Append(e);
}

void Recorder::AppendDefinition(const Event& e) {
  defs_.Append(e);
}

void Recorder::NoteWriteError(const Status& s) {
  if (write_failed_)
    return;
  write_failed_ = true;
  write_error_ = s.message();
  fmt::print(stderr,
             "\nparmon record: {}\nparmon record: the program keeps running; what was written "
             "before this point is intact, and the events from here on are counted as lost\n",
             s.message());
}

void Recorder::FlushEncoder(format::StreamEncoder* enc) {
  if (enc->count() == 0)
    return;
  if (write_failed_) {
    events_unwritten_ += enc->count();
    if (enc->source() != Source::kDefinitions)
      lost_by_location_[enc->location()] += enc->count();
    enc->Reset();
    return;
  }
  if (options_.overflow == shm::Overflow::kOverwrite && enc->source() != Source::kDefinitions) {
    // Flight recorder: keep the newest encoded bytes in memory; write them at the end.
    Held h{enc->location(),
           enc->source(),
           enc->first_ts(),
           enc->last_ts(),
           enc->count(),
           lost_in_encoder_[enc].count,
           lost_in_encoder_[enc].records,
           std::vector<uint8_t>(enc->bytes().data(), enc->bytes().data() + enc->bytes().size())};
    lost_in_encoder_[enc] = PendingLost{};
    held_bytes_ += h.bytes.size();
    held_.push_back(std::move(h));
    // Evict the chunks whose data starts earliest until the newest data fits the budget.
    while (held_bytes_ > options_.flight_bytes && held_.size() > 1) {
      auto oldest = std::min_element(held_.begin(), held_.end(), [](const Held& a, const Held& b) {
        return a.first_ts < b.first_ts;
      });
      const uint64_t events = oldest->count - oldest->lost_records;
      overwritten_[{oldest->location, oldest->source}] += events;
      lost_by_location_[oldest->location] += events;
      evicted_lost_[{oldest->location, oldest->source}] += oldest->lost_inside;
      held_bytes_ -= oldest->bytes.size();
      held_.erase(oldest);
    }
    enc->Reset();
    return;
  }
  Status s = writer_->Flush(enc);
  if (!s.ok())
    NoteWriteError(s);
}

void Recorder::FlushAll() {
  // Definitions first, so a reader of a file cut short has the names its events refer to.
  FlushEncoder(&defs_);
  for (auto& [key, enc] : encoders_)
    FlushEncoder(enc.get());
}

void Recorder::HandleSpecial(RingCursor& cur, shm::RingControl& ctl, Event& e) {
  switch (e.kind_enum()) {
    case Kind::kDefString:
      AppendDefinition(e);
      break;
    case Kind::kThreadName: {
      Event d;
      d.kind = static_cast<uint16_t>(Kind::kDefLocation);
      d.nargs = 4;
      d.args[0] = cur.location;
      d.args[1] = static_cast<uint64_t>(format::LocationType::kThread);
      d.args[2] = ctl.pid;
      d.args[3] = ctl.tid;
      d.payload = e.payload;
      d.ts = e.ts;
      AppendDefinition(d);
      cur.encoder->Append(e);
      break;
    }
    case Kind::kProcessBegin:
      NoteProcess(static_cast<uint32_t>(e.args[0]), static_cast<uint32_t>(e.args[1]),
                  std::string(e.payload));
      cur.encoder->Append(e);
      break;
    case Kind::kLost:
      cur.lost_reported += e.args[0];
      lost_by_location_[cur.location] += e.args[0];
      lost_in_encoder_[cur.encoder].count += e.args[0];
      lost_in_encoder_[cur.encoder].records += 1;
      cur.encoder->Append(e);
      break;
    default:
      cur.encoder->Append(e);
      break;
  }
}

namespace {

// Routes drained events to the thread's stream, cutting a chunk whenever the stream's encoded
// bytes reach the limit (a single drain may move a whole ring); definitions and names go to the
// definitions stream through `special`.
template <typename Special, typename Cut>
class RecorderSink {
 public:
  RecorderSink(format::StreamEncoder* encoder, uint64_t limit, Special special, Cut cut)
      : encoder_(encoder), limit_(limit), special_(special), cut_(cut) {}
  void OnCompact(uint16_t kind, uint64_t ts, uint64_t arg) {
    encoder_->AppendOneArg(kind, ts, arg);
    if (encoder_->raw_size() >= limit_) [[unlikely]]
      cut_();
  }
  void OnEvent(Event& e) {
    special_(e);
    if (encoder_->raw_size() >= limit_)
      cut_();
  }

 private:
  format::StreamEncoder* encoder_;
  uint64_t limit_;
  Special special_;
  Cut cut_;
};

}  // namespace

size_t Recorder::DrainRing(uint32_t index) {
  shm::RingControl& ctl = segment_->rings()[index];
  // Acquire pairs with the producer's release store of Claimed/Retired: pid/tid are visible, and
  // after Retired the head we load next is final.
  uint32_t state = ctl.state.load(std::memory_order_acquire);
  RingCursor& cur = cursors_[index];
  if (state == shm::kFree || state == shm::kClaiming)
    return 0;
  if (!cur.active || cur.generation != ctl.generation) {
    cur = RingCursor{};
    cur.generation = ctl.generation;
    cur.active = true;
    cur.location = ThreadLocation(ctl.pid, ctl.tid);
    cur.encoder = EncoderFor(cur.location, Source::kRuntime);
  }
  RecorderSink sink(
      cur.encoder, chunk_bytes_,
      [&](Event& e) {
        e.location = cur.location;
        e.source = Source::kRuntime;
        HandleSpecial(cur, ctl, e);
      },
      [&] {
        FlushEncoder(&defs_);
        FlushEncoder(cur.encoder);
      });
  uint64_t corrupt_before = drainer_->corruptions();
  size_t n = drainer_->Drain(index, clock_, sink);
  if (drainer_->corruptions() != corrupt_before)
    lost_by_location_[cur.location] += drainer_->corruptions() - corrupt_before;
  events_seen_ += n;
  if (state == shm::kRetired)
    RetireRing(index);
  return n;
}

void Recorder::RetireRing(uint32_t index) {
  shm::RingControl& ctl = segment_->rings()[index];
  RingCursor& cur = cursors_[index];
  uint64_t dropped = ctl.dropped.load(std::memory_order_relaxed);
  if (dropped > cur.lost_reported) {
    // The thread ended while still dropping: the recorder reports the rest.
    const uint64_t n = dropped - cur.lost_reported;
    lost_by_location_[cur.location] += n;
    if (options_.overflow == shm::Overflow::kOverwrite) {
      // A flight recorder might evict this report with its chunk: it joins the final RingLost.
      evicted_lost_[{cur.location, Source::kRuntime}] += n;
      overwritten_[{cur.location, Source::kRuntime}] += 0;
    } else {
      Event e;
      e.kind = static_cast<uint16_t>(Kind::kRingLost);
      e.nargs = 2;
      e.args[0] = n;
      e.args[1] = 0;
      e.ts = clock_.NowNs();
      EncoderFor(cur.location, Source::kRecorder)->Append(e);
      ++events_seen_;
    }
  }
  FlushEncoder(&defs_);
  FlushEncoder(cur.encoder);
  cur.active = false;
  // Release: the next claimer's acquire CAS sees our final tail.
  ctl.state.store(shm::kFree, std::memory_order_release);
}

size_t Recorder::DrainAll() {
  size_t n = 0;
  for (uint32_t i = 0; i < segment_->header()->ring_count; ++i)
    n += DrainRing(i);
  return n;
}

void Recorder::CheckDeadThreads() {
  // A thread killed with its process never retires its ring: free rings whose thread is gone.
  for (uint32_t i = 0; i < segment_->header()->ring_count; ++i) {
    shm::RingControl& ctl = segment_->rings()[i];
    if (ctl.state.load(std::memory_order_acquire) != shm::kClaimed)
      continue;
    if (syscall(SYS_tgkill, ctl.pid, ctl.tid, 0) == 0 || errno != ESRCH)
      continue;
    DrainRing(i);
    if (ctl.state.load(std::memory_order_acquire) == shm::kClaimed) {
      // The thread is gone for good; its committed events are drained above.
      ctl.state.store(shm::kRetired, std::memory_order_release);
      DrainRing(i);
    }
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

Status Recorder::StartChild(const std::vector<std::string>& argv) {
  std::string lib_dir = LibDir();
  std::string preload = lib_dir + "/libparmon.so";
  if (!FileExists(preload))
    return Status::Error(
        fmt::format("cannot find libparmon.so (looked in {}); set PARMON_LIB_DIR "
                    "to the directory that holds it",
                    lib_dir));
  for (const auto& extra : options_.extra_preload) {
    std::string p = extra.find('/') == std::string::npos ? lib_dir + "/" + extra : extra;
    if (!FileExists(p)) {
      // The communication libraries are optional (libparmon_mpi needs an MPI at build time).
      if (extra.rfind("libparmon_", 0) == 0)
        continue;
      return Status::Error(fmt::format("cannot find preload library {}", p));
    }
    preload = p + ":" + preload;
  }
  if (const char* old = getenv("LD_PRELOAD"); old && *old)
    preload += std::string(":") + old;
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0)
    return Status::Error(fmt::format("cannot create a pipe: {}", strerror(errno)));
  int go_pipe[2];  // the child execs once the sources have seen it (ChildCreated)
  if (pipe2(go_pipe, O_CLOEXEC) != 0) {
    close(err_pipe[0]);
    close(err_pipe[1]);
    return Status::Error(fmt::format("cannot create a pipe: {}", strerror(errno)));
  }
  std::vector<char*> cargv;
  for (const auto& a : argv)
    cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::string seg_name = segment_->name();
  pid_t pid = fork();
  if (pid < 0)
    return Status::Error(fmt::format("cannot fork: {}", strerror(errno)));
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    setenv(shm::kEnvSegment, seg_name.c_str(), 1);
    setenv("LD_PRELOAD", preload.c_str(), 1);
    close(go_pipe[1]);
    char go;
    while (read(go_pipe[0], &go, 1) < 0 && errno == EINTR) {
    }
    execvp(cargv[0], cargv.data());
    int e = errno;
    ssize_t w = write(err_pipe[1], &e, sizeof e);
    (void)w;
    _exit(127);
  }
  close(err_pipe[1]);
  close(go_pipe[0]);
  for (auto& src : sources_) {
    Status s = src->ChildCreated(*this, pid);
    if (!s.ok())
      fmt::print(stderr, "parmon record: {}: {}\n", src->name(), s.message());
  }
  close(go_pipe[1]);  // end of file: the child goes on to exec
  int child_errno = 0;
  ssize_t r;
  do {
    r = read(err_pipe[0], &child_errno, sizeof child_errno);
  } while (r < 0 && errno == EINTR);
  close(err_pipe[0]);
  child_pid_ = pid;
  if (r == sizeof child_errno) {
    waitpid(pid, nullptr, 0);
    return Status::Error(fmt::format("cannot run {}: {}", argv[0], strerror(child_errno)));
  }
  return Status::Ok();
}

// A process we did not start: followed until it is gone (or a zombie nobody reaped yet).
static bool ProcessAlive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno != EPERM)
    return false;
  std::string stat = ReadSmallFile(fmt::format("/proc/{}/stat", pid));
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

Status Recorder::AttachTo(pid_t pid) {
  if (pid == getpid())
    return Status::Error("parmon cannot follow itself");
  if (kill(pid, 0) != 0) {
    if (errno == ESRCH)
      return Status::Error(fmt::format("there is no process {}", pid));
    if (errno == EPERM)
      return Status::Error(
          fmt::format("process {} belongs to another user; run parmon as that "
                      "user or as root",
                      pid));
  }
  if (!ProcessAlive(pid))
    return Status::Error(fmt::format("process {} has already exited", pid));
  child_pid_ = pid;
  return Status::Ok();
}

std::vector<std::pair<std::string, std::string>> Recorder::SessionValues(
    const std::vector<std::string>& argv) const {
  std::string command;
  for (const auto& a : argv) {
    if (!command.empty())
      command += ' ';
    command += a.find(' ') == std::string::npos ? a : "'" + a + "'";
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const char* overflow = options_.overflow == shm::Overflow::kBlock  ? "block"
                         : options_.overflow == shm::Overflow::kDrop ? "drop"
                                                                     : "overwrite";
  std::vector<std::pair<std::string, std::string>> kv = {
      {"parmon_version", PARMON_VERSION},
      {"command", command},
      {"host", host},
      {"start_realtime_ns", std::to_string(start_realtime_ns_)},
      {"start_ts", std::to_string(start_ns_)},
      {"clock", clock_.Describe()},
      {"clock_base", clock_.base == ClockBase::kPerf ? "perf" : "monotonic"},
      {"recorder_pid", std::to_string(getpid())},
      {"overflow", overflow},
      {"ring_bytes", std::to_string(segment_->ring_slots() * sizeof(shm::Slot))},
      {"ring_count", std::to_string(segment_->header()->ring_count)},
      {"cpus", std::to_string(sysconf(_SC_NPROCESSORS_ONLN))},
  };
  for (const auto& kv2 : options_.extra_session)
    kv.push_back(kv2);
  return kv;
}

void Recorder::PrintStatus(bool final_line) {
  if (!status_line_)
    return;
  uint64_t lost = 0;
  for (const auto& [loc, n] : lost_by_location_)
    lost += n;
  for (uint32_t i = 0; i < segment_->header()->ring_count; ++i) {
    const auto& ctl = segment_->rings()[i];
    if (ctl.state.load(std::memory_order_relaxed) == shm::kClaimed && cursors_[i].active) {
      uint64_t d = ctl.dropped.load(std::memory_order_relaxed);
      if (d > cursors_[i].lost_reported)
        lost += d - cursors_[i].lost_reported;
    }
  }
  double elapsed = static_cast<double>(clock_.NowNs() - start_ns_) / 1e9;
  fmt::print(stderr, "\r\033[Kparmon: {:.1f} s  {} events  {} written  {} lost{}", elapsed,
             HumanCount(events_seen_), HumanBytes(writer_ ? writer_->bytes_written() : 0), lost,
             final_line ? "\n" : "");
  fflush(stderr);
}

StatusOr<RecordResult> Recorder::Run(const std::vector<std::string>& argv) {
  if (argv.empty() && options_.attach_pid <= 0)
    return Status::Error("no command given: parmon record [options] -- CMD ARGS");
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
  PARMON_ASSIGN_OR_RETURN(segment_, Segment::Create(so));
  cursors_.resize(so.ring_count);
  // A flight recorder evicts whole chunks: keep them small against its budget.
  chunk_bytes_ = 256u << 10;
  if (options_.overflow == shm::Overflow::kOverwrite)
    chunk_bytes_ = std::clamp<uint64_t>(options_.flight_bytes / 16, 4096, chunk_bytes_);
  drainer_ = std::make_unique<RingDrainer>(*segment_);
  format::WriterOptions wo;
  wo.zstd_level = options_.zstd_level;
  PARMON_ASSIGN_OR_RETURN(writer_, format::TraceWriter::Create(options_.output, wo));

  // Signals arrive through a signalfd; the child gets them unblocked and forwarded.
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT})
    sigaddset(&mask, s);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  signal_fd_ = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  // Orphaned grandchildren come to us, so the session follows every process the command starts.
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  PARMON_RETURN_IF_ERROR(options_.attach_pid > 0 ? AttachTo(options_.attach_pid)
                                                 : StartChild(argv));
  Status ws = writer_->WriteSession(SessionValues(argv));
  if (!ws.ok())
    NoteWriteError(ws);
  for (auto& src : sources_) {
    Status s = src->Start(*this);
    if (!s.ok())
      fmt::print(stderr, "parmon record: {}: {}\n", src->name(), s.message());
  }
  status_line_ = !options_.quiet && isatty(STDERR_FILENO);
  last_flush_ns_ = start_ns_;

  bool stopping = false;
  while (!stopping) {
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
    const uint64_t drain_start = clock_.NowNs();
    size_t drained = DrainAll();
    uint64_t now = clock_.NowNs();
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
      FlushAll();
      // Every ring was drained to its head after drain_start and every encoder is flushed: all
      // events before it are in the file, but for a producer that read the clock and had not yet
      // committed (the slack). A flight recorder holds chunks back, so it promises nothing.
      constexpr uint64_t kWatermarkSlackNs = 50'000'000;
      if (options_.overflow != shm::Overflow::kOverwrite && !write_failed_ &&
          drain_start > start_ns_ + kWatermarkSlackNs) {
        Status s = writer_->WriteWatermark(drain_start - kWatermarkSlackNs);
        if (!s.ok())
          NoteWriteError(s);
      }
      last_flush_ns_ = now;
    }
    if (now - last_status_ns_ > 250'000'000) {
      PrintStatus(false);
      last_status_ns_ = now;
    }
    if (child_exited_) {
      // Follow the command's children until they exit too (bounded by the grace period).
      bool children_left = waitpid(-1, nullptr, WNOHANG | __WALL) == 0;
      double since = static_cast<double>(now - child_exit_ns_) / 1e9;
      if (!children_left || since > options_.children_grace_s) {
        if (children_left)
          fmt::print(stderr,
                     "parmon record: the command exited; processes it left running after {:.0f} s "
                     "are no longer followed\n",
                     options_.children_grace_s);
        stopping = true;
        break;
      }
    }
    // Busy rings are drained again at once; otherwise sleep one window or until a signal.
    const uint64_t busy = segment_->ring_slots() / 8;
    if (drained < busy) {
      pollfd pfd{signal_fd_, POLLIN, 0};
      int timeout_ms = static_cast<int>(std::max<uint64_t>(1, options_.window_ns / 1'000'000));
      poll(&pfd, 1, timeout_ms);
    }
  }

  segment_->header()->session_state.store(shm::kFinishing, std::memory_order_relaxed);
  CheckDeadThreads();
  DrainAll();
  // Every process has exited: rings still claimed are from threads killed with their process.
  for (uint32_t i = 0; i < segment_->header()->ring_count; ++i) {
    auto& ctl = segment_->rings()[i];
    if (ctl.state.load(std::memory_order_acquire) == shm::kClaimed) {
      ctl.state.store(shm::kRetired, std::memory_order_release);
      DrainRing(i);
    }
  }
  for (auto& src : sources_)
    src->Stop(*this);

  RecordResult result;
  if (WIFEXITED(child_status_))
    result.exit_code = WEXITSTATUS(child_status_);
  else if (WIFSIGNALED(child_status_))
    result.exit_code = 128 + WTERMSIG(child_status_);

  // Flight recorder: the newest chunks go to the file now, oldest first.
  FlushAll();
  if (options_.overflow == shm::Overflow::kOverwrite) {
    for (auto& h : held_) {
      Status s = writer_->WriteEncoded(h.location, h.source, h.first_ts, h.last_ts, h.count,
                                       h.bytes.data(), h.bytes.size());
      if (!s.ok()) {
        NoteWriteError(s);
        break;
      }
    }
    for (const auto& [key, n] : overwritten_) {
      const auto [loc, source] = key;
      Event e;
      e.kind = static_cast<uint16_t>(Kind::kRingLost);
      e.nargs = 2;
      e.args[0] = n + evicted_lost_[key];
      e.args[1] = 0;
      e.ts = start_ns_;
      // Losses of the program's own events go to the recorder's stream of the location, those of
      // the recorder's sources (sampler, switches) to that source's stream.
      format::StreamEncoder enc(loc, source == Source::kRuntime ? Source::kRecorder : source);
      enc.Append(e);
      if (!write_failed_) {
        Status s = writer_->Flush(&enc);
        if (!s.ok())
          NoteWriteError(s);
      }
    }
  }

  uint64_t lost = 0;
  std::string lost_list;
  for (const auto& [loc, n] : lost_by_location_) {
    lost += n;
    lost_list += fmt::format("{}:{};", loc, n);
  }
  uint64_t overwritten = 0;
  for (const auto& [key, n] : overwritten_)
    overwritten += n;
  uint64_t unattached = segment_->header()->unattached_dropped.load(std::memory_order_relaxed);
  uint64_t end_ns = clock_.NowNs();
  std::vector<std::pair<std::string, std::string>> end_kv = {
      {"end_ts", std::to_string(end_ns)},
      {"exit_code", std::to_string(result.exit_code)},
      {"lost_events", std::to_string(lost)},
      {"lost_by_location", lost_list},
      {"overwritten_events", std::to_string(overwritten)},
      {"unattached_lost_events", std::to_string(unattached)},
      {"ring_corruptions", std::to_string(drainer_->corruptions())},
      {"recorder_cpu_ns", std::to_string(CpuTimeNs(RUSAGE_SELF))},
      {"children_cpu_ns", std::to_string(CpuTimeNs(RUSAGE_CHILDREN))},
  };
  for (auto& kv : end_values_)
    end_kv.push_back(kv);
  if (!write_failed_) {
    Status s = writer_->Finish(end_kv);
    if (!s.ok())
      NoteWriteError(s);
  }
  result.events = writer_->events_written();
  result.lost = lost + unattached + events_unwritten_;
  result.bytes = writer_->bytes_written();
  PrintStatus(true);
  if (write_failed_) {
    fmt::print(stderr,
               "parmon record: the trace {} is incomplete: {} (readable up to the last whole "
               "chunk; {} events could not be written)\n",
               options_.output, write_error_, events_unwritten_);
  }
  if (result.lost > 0)
    fmt::print(stderr, "parmon record: {} events were lost (see parmon info {})\n", result.lost,
               options_.output);
  return result;
}

}  // namespace parmon::recorder
