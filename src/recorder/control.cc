// The control commands of a running recorder (control.h): the parser, and Control, which applies
// them to the segment's control page and queues their records for the recorder's loop.
#include "recorder/control.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include <fmt/format.h>

#include "base/clock.h"
#include "base/units.h"
#include "recorder/recorder.h"

namespace parmon::recorder {

namespace {

constexpr size_t kMaxCommandBytes = 4096;
constexpr size_t kMaxThreads = 256;
// The range of `parmon record -t` (sched::kMinPeriodNs, kMaxPeriodNs).
constexpr uint64_t kMinPeriodNs = 1'000'000;
constexpr uint64_t kMaxPeriodNs = 60'000'000'000;

std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;)
    words.push_back(w);
  return words;
}

StatusOr<uint32_t> ParseStreams(const std::string& list) {
  uint32_t mask = 0;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string name =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name == "all")
      mask |= kStreamAll;
    else if (name == "regions")
      mask |= kStreamRegions;
    else if (name == "mpi")
      mask |= kStreamMpi;
    else if (name == "posix")
      mask |= kStreamPosix;
    else if (name == "sched")
      mask |= kStreamSched;
    else
      return Status::Error(fmt::format(
          "unknown stream '{}': streams takes a comma-separated list of regions, mpi, posix, "
          "sched or all",
          name));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return mask;
}

StatusOr<std::vector<uint32_t>> ParseTids(const std::string& list) {
  std::vector<uint32_t> tids;
  if (list == "all")
    return tids;
  size_t start = 0;
  for (;;) {
    size_t comma = list.find(',', start);
    std::string t =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    uint64_t v = 0;
    bool ok = !t.empty() && t.size() <= 10;
    for (char c : t)
      ok = ok && std::isdigit(static_cast<unsigned char>(c));
    if (ok)
      v = std::stoull(t);
    if (!ok || v == 0 || v > 0x3fffffff)
      return Status::Error(fmt::format(
          "'{}' is not a thread id: threads takes a comma-separated list of TIDs or all", t));
    tids.push_back(static_cast<uint32_t>(v));
    if (tids.size() > kMaxThreads)
      return Status::Error(fmt::format("threads takes at most {} thread ids", kMaxThreads));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  std::sort(tids.begin(), tids.end());
  tids.erase(std::unique(tids.begin(), tids.end()), tids.end());
  return tids;
}

}  // namespace

StatusOr<ControlCommand> ParseControlCommand(const std::string& line) {
  if (line.size() > kMaxCommandBytes)
    return Status::Error("the command is longer than 4096 bytes");
  std::vector<std::string> w = Words(line);
  if (w.empty())
    return Status::Error(
        "empty command: give one of pause, resume, period DURATION, threads TIDS, streams KINDS, "
        "status");
  ControlCommand c;
  const std::string& verb = w[0];
  auto want_args = [&](size_t n, const char* usage) -> Status {
    if (w.size() != n + 1)
      return Status::Error(
          fmt::format("{} takes {}: {}", verb, n == 0 ? "no argument" : "one argument", usage));
    return Status::Ok();
  };
  if (verb == "pause" || verb == "resume" || verb == "status") {
    PARMON_RETURN_IF_ERROR(want_args(0, verb.c_str()));
    c.verb = verb == "pause"    ? ControlCommand::Verb::kPause
             : verb == "resume" ? ControlCommand::Verb::kResume
                                : ControlCommand::Verb::kStatus;
  } else if (verb == "period") {
    PARMON_RETURN_IF_ERROR(want_args(1, "period DURATION (e.g. period 5ms)"));
    PARMON_ASSIGN_OR_RETURN(c.period_ns,
                            ParseDurationInRange(w[1], "the period", kMinPeriodNs, kMaxPeriodNs));
    c.verb = ControlCommand::Verb::kPeriod;
  } else if (verb == "threads") {
    PARMON_RETURN_IF_ERROR(want_args(1, "threads TID,TID,.. or threads all"));
    PARMON_ASSIGN_OR_RETURN(c.tids, ParseTids(w[1]));
    c.verb = ControlCommand::Verb::kThreads;
  } else if (verb == "streams") {
    PARMON_RETURN_IF_ERROR(want_args(1, "streams regions,mpi,posix,sched or streams all"));
    PARMON_ASSIGN_OR_RETURN(c.streams, ParseStreams(w[1]));
    c.verb = ControlCommand::Verb::kStreams;
  } else {
    return Status::Error(fmt::format(
        "unknown command '{}': give one of pause, resume, period DURATION, threads TIDS, "
        "streams KINDS, status",
        verb.size() > 64 ? verb.substr(0, 64) + "..." : verb));
  }
  return c;
}

std::string StreamNames(uint32_t mask) {
  if ((mask & kStreamAll) == kStreamAll)
    return "all";
  std::string s;
  const std::pair<uint32_t, const char*> names[] = {{kStreamRegions, "regions"},
                                                    {kStreamMpi, "mpi"},
                                                    {kStreamPosix, "posix"},
                                                    {kStreamSched, "sched"}};
  for (const auto& [bit, name] : names)
    if (mask & bit)
      s += (s.empty() ? "" : ",") + std::string(name);
  return s.empty() ? "none" : s;
}

Control::Control(shm::ControlPage* page, bool ticks_are_tsc)
    : page_(page), ticks_are_tsc_(ticks_are_tsc) {}

uint64_t Control::NowTicks() const {
  return ticks_are_tsc_ ? ReadTsc() : MonotonicNs();
}

std::string Control::Status() const {
  std::string tids = "all";
  if (!tids_.empty()) {
    tids.clear();
    for (uint32_t t : tids_)
      tids += (tids.empty() ? "" : ",") + std::to_string(t);
  }
  return fmt::format("{}, period {}, threads {}, streams {}, pauses {}",
                     paused_ ? "paused" : "recording",
                     FormatDuration(page_->period_ns.load(std::memory_order_relaxed)), tids,
                     StreamNames(streams_), pauses_);
}

std::string Control::Apply(const std::string& command) {
  auto parsed = ParseControlCommand(command);
  if (!parsed.ok())
    return "error: " + parsed.status().message();
  const ControlCommand& c = *parsed;
  std::lock_guard<std::mutex> lock(mu_);
  ControlChange ch;
  switch (c.verb) {
    case ControlCommand::Verb::kStatus:
      return "ok: " + Status();
    case ControlCommand::Verb::kPause:
      if (paused_)
        return "ok: already paused";
      // First: a drain that reads false began before this pause (collector.cc DrainRing).
      ever_paused_.store(true);
      page_->enabled.store(0, std::memory_order_relaxed);
      page_->change_seq.fetch_add(1, std::memory_order_release);
      // After the store: no event of a thread that saw 0 can be stamped later than this.
      ch.type = ControlChange::Type::kPause;
      ch.ticks = paused_since_ = NowTicks();
      paused_ = true;
      ++pauses_;
      changes_.push_back(ch);
      return "ok: paused";
    case ControlCommand::Verb::kResume: {
      if (!paused_)
        return "ok: already recording";
      // Before the store: no event of a thread that sees 1 can be stamped earlier than this.
      ch.type = ControlChange::Type::kResume;
      ch.ticks = NowTicks();
      page_->enabled.store(1, std::memory_order_relaxed);
      page_->change_seq.fetch_add(1, std::memory_order_release);
      last_begin_ = paused_since_;
      last_end_ = ch.ticks;
      paused_ = false;
      changes_.push_back(ch);
      return "ok: recording";
    }
    case ControlCommand::Verb::kPeriod:
      page_->period_ns.store(c.period_ns, std::memory_order_relaxed);
      page_->change_seq.fetch_add(1, std::memory_order_release);
      ch.type = ControlChange::Type::kPeriod;
      ch.ticks = NowTicks();
      ch.value = c.period_ns;
      changes_.push_back(ch);
      return "ok: period " + FormatDuration(c.period_ns);
    case ControlCommand::Verb::kThreads:
    case ControlCommand::Verb::kStreams:
      before_tids_ = tids_;
      before_streams_ = streams_;
      if (c.verb == ControlCommand::Verb::kThreads)
        tids_ = c.tids;
      else
        streams_ = c.streams;
      // The drain filters while either selection leaves something out: events made before
      // this change may still be drained after it.
      selecting_.store(!tids_.empty() || streams_ != kStreamAll || !before_tids_.empty() ||
                           before_streams_ != kStreamAll,
                       std::memory_order_relaxed);
      ch.type = ControlChange::Type::kSelect;
      ch.ticks = select_ticks_ = NowTicks();
      ch.value = streams_;
      ch.tids = tids_;
      changes_.push_back(ch);
      return "ok: " + Status();
  }
  return "error: unknown command";
}

std::vector<ControlChange> Control::TakeChanges() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ControlChange> out;
  out.swap(changes_);
  return out;
}

bool Control::paused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return paused_;
}

bool Control::SkipSourceAt(uint64_t ts_ns, const TickConversion& clock) const {
  std::lock_guard<std::mutex> lock(mu_);
  if ((streams_ & kStreamSched) == 0)
    return true;
  if (paused_ && ts_ns >= clock.ToNs(paused_since_))
    return true;
  return last_end_ != 0 && ts_ns >= clock.ToNs(last_begin_) && ts_ns < clock.ToNs(last_end_);
}

Control::ThreadSelection Control::SelectionFor(uint32_t tid, const TickConversion& clock) const {
  auto in = [tid](const std::vector<uint32_t>& tids) {
    return tids.empty() || std::binary_search(tids.begin(), tids.end(), tid);
  };
  std::lock_guard<std::mutex> lock(mu_);
  ThreadSelection s;
  s.before_selected = in(before_tids_);
  s.before_streams = before_streams_;
  s.selected = in(tids_);
  s.streams = streams_;
  s.since_ns = clock.ToNs(select_ticks_);
  if (paused_)
    s.paused_from_ns = clock.ToNs(paused_since_);
  if (last_end_ != 0) {
    s.last_paused_begin_ns = clock.ToNs(last_begin_);
    s.last_paused_end_ns = clock.ToNs(last_end_);
  }
  return s;
}

std::string ApplyControl(Recorder& r, const std::string& command) {
  Control* c = r.control();
  if (c == nullptr)
    return "error: the recorder is not recording a session (not started yet, or finished)";
  return c->Apply(command);
}

}  // namespace parmon::recorder
