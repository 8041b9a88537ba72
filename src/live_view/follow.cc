// LiveTrace (follow.h): waiting for a trace to appear, refreshing it, and analysing what is
// complete so far; the stop flag the followers share.
#include "live_view/follow.h"

#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "base/clock.h"
#include "format/chunk.h"
#include "live/fetch.h"

namespace parmon::live_view {
namespace {

constexpr uint64_t kPollNs = 50'000'000;

// How long a followed per-rank directory may hold fewer rank files than its world, every one of
// them closed, before the follow ends without the rest (a rank whose recorder never started):
// 20 s, or PARMON_FOLLOW_RANK_WAIT seconds.
uint64_t MissingRankWaitNs() {
  const char* e = getenv("PARMON_FOLLOW_RANK_WAIT");
  char* end = nullptr;
  const double s = e && *e ? strtod(e, &end) : 20;
  return e && *e && (end == e || *end != '\0' || !(s >= 0 && s < 1e6))
             ? 20'000'000'000ull
             : static_cast<uint64_t>(s * 1e9);
}

// Whether a path is not a trace yet but may become one: absent, or a regular file shorter than
// its header (the recorder created it and has not written the header yet).
bool NotWrittenYet(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return errno == ENOENT;
  return S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) < sizeof(format::FileHeader);
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Whether the recorder that writes a local trace has gone: the session names its pid and host;
// on this host, a pid that no longer exists, is a zombie or runs something other than parmon
// (reused) is a recorder gone. On another host (a file on a shared file system) nothing can be
// known: false, the follower waits.
bool RecorderGone(const format::SessionInfo& s) {
  char host[256] = {};
  if (s.recorder_pid == 0 || s.host.empty() || gethostname(host, sizeof host - 1) != 0 ||
      s.host != host)
    return false;
  std::ifstream stat_file(fmt::format("/proc/{}/stat", s.recorder_pid));
  std::string stat;
  if (!std::getline(stat_file, stat))
    return true;
  // "pid (comm) state ...": comm may hold spaces and parentheses, the last ')' ends it.
  const size_t open = stat.find('('), close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 >= stat.size())
    return true;
  const std::string comm = stat.substr(open + 1, close - open - 1);
  const char state = stat[close + 2];
  return state == 'Z' || state == 'X' || comm.rfind("parmon", 0) != 0;
}

std::atomic<int> stop_requests{0};

void OnStopSignal(int) {
  // A second Ctrl-C while a follower is stuck ends the process the usual way.
  if (stop_requests.fetch_add(1, std::memory_order_relaxed) >= 1) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    raise(SIGINT);
  }
}

}  // namespace

StatusOr<LiveSource> ResolveLiveSource(const std::string& name) {
  if (name == "-")
    return Status::Error("--follow needs a file or a session directory, not standard input");
  LiveSource source;
  source.path = name;
  if (!live::IsRemoteSession(name))
    return source;
  // HOST:PORT/SESSION: the collector's copy is fetched into a private temporary directory as it
  // grows (a file, or a directory of rank files), and followed like a local recording; the fetch
  // ending (the session complete, or the collector gone) is the writer being gone.
  const char* tmp = getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/parmon-follow-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr)
    return Status::Error(fmt::format(
        "cannot create a temporary directory in which to follow {}: {}", name, strerror(errno)));
  auto fetch = live::BackgroundFetch::Start(name, dir + "/session.ptrace", true);
  if (!fetch.ok()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return fetch.status();
  }
  struct Remote {
    std::shared_ptr<live::BackgroundFetch> fetch;
    std::string dir;
    ~Remote() {
      fetch.reset();  // stops the fetch and removes its copy
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  auto remote = std::make_shared<Remote>();  // built in place: a temporary would remove dir
  remote->fetch = *fetch;
  remote->dir = dir;
  source.path = (*fetch)->path();
  source.writer_gone = [f = remote->fetch.get()] { return f->done(); };
  // The collector's word on the end, as for `parmon serve --http`: complete once every stream
  // of the session (per-rank: every rank of the world) has ended and is copied, not when every
  // file copied so far is closed (a rank's file may close before the next rank has arrived).
  source.complete = [f = remote->fetch.get()] { return f->done() && f->complete(); };
  source.why_gone = [f = remote->fetch.get(), name] {
    const Status s = f->status();
    if (!s.ok())
      return fmt::format("following {}: {}", name, s.message());
    const std::string lost = f->lost();
    return lost.empty() ? std::string() : fmt::format("the collector says of {}: {}", name, lost);
  };
  source.keep_alive = remote;
  return source;
}

StatusOr<std::unique_ptr<LiveTrace>> LiveTrace::Open(LiveSource source) {
  auto t = std::unique_ptr<LiveTrace>(new LiveTrace());
  const std::string path = source.path;
  const std::function<bool()> give_up = source.writer_gone;
  t->source_ = std::move(source);
  t->path_ = path;
  for (;;) {
    Status s = Status::Ok();
    if (!NotWrittenYet(path)) {
      t->directory_ = IsDirectory(path);
      t->complete_ = !t->source_.complete || t->source_.complete();
      s = t->OpenNow();
      if (s.ok()) {
        t->WatchLocalRecorder();
        return t;
      }
      // A session directory before its first rank has written a header reads as unreadable.
      if (!t->directory_)
        return s;
    }
    if (StopRequested() || (t->source_.stop && t->source_.stop()) || (give_up && give_up())) {
      const std::string why = t->source_.why_gone ? t->source_.why_gone() : std::string();
      if (!why.empty())
        return Status::Error(why);
      return Status::Error(s.ok() ? fmt::format("{} was never written", path) : s.message());
    }
    SleepUnlessStopped(kPollNs);
  }
}

StatusOr<std::unique_ptr<LiveTrace>> LiveTrace::Follow(const std::string& name) {
  StopOnInterrupt();
  auto source = ResolveLiveSource(name);
  if (!source.ok())
    return source.status();
  return Open(std::move(*source));
}

void LiveTrace::WatchLocalRecorder() {
  if (source_.writer_gone || directory_ || !reader_ || reader_->closed_cleanly())
    return;
  const format::SessionInfo info = reader_->metadata().session;
  if (info.recorder_pid == 0)
    return;
  source_.writer_gone = [info] { return RecorderGone(info); };
  source_.why_gone = [info, path = path_] {
    return fmt::format("the recorder of {} (pid {}) ended without closing it (killed?)", path,
                       info.recorder_pid);
  };
}

std::string LiveTrace::WhyAbandoned() const {
  if (!ranks_missing_.empty())
    return ranks_missing_;
  const std::string why = source_.why_gone ? source_.why_gone() : std::string();
  return why.empty() ? fmt::format("the recording ended without closing {} (killed?)", path_) : why;
}

Status LiveTrace::OpenNow() {
  auto reader = format::TraceReader::Open(path_);
  if (!reader.ok())
    return reader.status();
  auto session = model::Session::Over(**reader);
  if (!session.ok())
    return session.status();
  // The old session (if any) points into the old reader: replace both together.
  session_ = std::move(*session);
  reader_ = std::move(*reader);
  ++generation_;
  complete_ = complete_ && EveryRankRead();
  return Status::Ok();
}

bool LiveTrace::EveryRankRead() const {
  if (!directory_ || source_.complete)
    return true;  // a single file, or a collector's session: the source says
  const format::SessionInfo& s = reader_->metadata().session;
  return s.session_files >= s.mpi_size;
}

Status LiveTrace::Refresh() {
  if (ended())
    return Status::Ok();
  // Asked before reading, so that whatever the writer wrote before it went is read now.
  const bool gone = source_.writer_gone && source_.writer_gone();
  complete_ = !source_.complete || source_.complete();
  if (directory_) {
    // Keep what was read when a rank's file is mid-write and the directory cannot be read now.
    Status s = OpenNow();
    if (!s.ok() && !reader_)
      return s;
    if (!s.ok())  // (OpenNow checks a directory it has read)
      complete_ = complete_ && EveryRankRead();
  } else {
    PARMON_RETURN_IF_ERROR(reader_->Refresh());
  }
  abandoned_ = (gone || RanksNeverCame()) && !finished();
  return Status::Ok();
}

bool LiveTrace::RanksNeverCame() {
  if (!directory_ || source_.complete || !reader_->closed_cleanly() || EveryRankRead()) {
    missing_since_ns_ = 0;
    return false;
  }
  // Every rank file there is closed and some rank's is not there: wait a while for it (a rank
  // that starts late), then end with what there is.
  const format::SessionInfo& s = reader_->metadata().session;
  const uint64_t now = MonotonicNs();
  if (missing_since_ns_ == 0 || s.session_files != files_when_missing_) {
    missing_since_ns_ = now;
    files_when_missing_ = s.session_files;
  }
  static const uint64_t wait = MissingRankWaitNs();  // the environment's, read once
  if (now - missing_since_ns_ < wait)
    return false;
  ranks_missing_ = fmt::format(
      "{} holds the files of {} of the {} ranks, every one closed, and no other came in {:.0f} s "
      "(a rank whose recorder never started?)",
      path_, s.session_files, s.mpi_size, static_cast<double>(wait) / 1e9);
  return true;
}

std::optional<uint64_t> LiveTrace::complete() const {
  if (finished())
    return UINT64_MAX;
  const uint64_t until = reader_->complete_until();  // events at ts < until are all read
  if (until == 0)
    return std::nullopt;
  return until - 1;
}

uint64_t LiveTrace::bytes() const {
  return reader_->file_size();
}

StatusOr<analysis::Results> LiveTrace::Analyze(analysis::Options options) const {
  // A session of now: the window and the END values as the reader has them after its refresh.
  auto session = model::Session::Over(*reader_);
  if (!session.ok())
    return session.status();
  if (!finished()) {
    std::optional<uint64_t> until = complete();
    if (!until)
      return Status::Error(
          fmt::format("{} has no complete events yet (the recorder writes them every 100 ms "
                      "or so)",
                      path_));
    const uint64_t start = (*session)->start();
    const uint64_t end = *until > start ? *until - start : 0;
    options.to_ns = std::min(options.to_ns, std::max<uint64_t>(end, options.from_ns + 1));
  }
  return analysis::Analyze(**session, options);
}

void StopOnInterrupt() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool StopRequested() {
  return stop_requests.load(std::memory_order_relaxed) > 0;
}

void RequestStop() {
  stop_requests.fetch_add(1, std::memory_order_relaxed);
}

void SleepUnlessStopped(uint64_t ns) {
  constexpr uint64_t kSliceNs = 10'000'000;
  while (ns > 0 && !StopRequested()) {
    const uint64_t slice = std::min(ns, kSliceNs);
    timespec ts{static_cast<time_t>(slice / 1'000'000'000),
                static_cast<long>(slice % 1'000'000'000)};
    nanosleep(&ts, nullptr);
    ns -= slice;
  }
}

}  // namespace parmon::live_view
