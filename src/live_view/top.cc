// RunTop (top.h): the refresh loop, batch and on a terminal, and what the keys do.
#include "live_view/top.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/units.h"
#include "live/client.h"
#include "live/protocol.h"
#include "live_view/follow.h"
#include "live_view/terminal.h"
#include "live_view/top_model.h"
#include "live_view/top_view.h"

namespace parmon::live_view {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kMinPeriodNs = 100'000'000;     // 100 ms
constexpr uint64_t kMaxPeriodNs = 60'000'000'000;  // 1 min
constexpr uint64_t kKeyPollNs = 250'000'000;       // redraws (resize, keys) at least this often

uint64_t Since(Clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

// The follower's state across refreshes: a local trace (or a fetched copy) analysed here, or a
// collector's session whose live analysis answers (QUERY, docs/live.md).
struct Follower {
  LiveTrace* live = nullptr;
  live::SnapshotClient* remote = nullptr;
  std::string remote_name, remote_session;
  const TopOptions& options;
  TopModel model;
  bool ended = false;     // nothing more will come (closed, or its writer gone)
  std::string ended_why;  // set when the writer went without closing the trace
  uint64_t took_ns = 0;   // the last analysis

  std::string name() const { return live ? live->path() : remote_name; }

  // Reads what was appended and, when something is complete, takes the next snapshot.
  Status Step() {
    if (remote)
      return RemoteStep();
    PARMON_RETURN_IF_ERROR(live->Refresh());
    if (live->complete()) {
      const auto t0 = Clock::now();
      auto results = live->Analyze(options.analysis);
      took_ns = Since(t0);
      if (!results.ok())
        return results.status();
      std::vector<std::string> problems;
      for (const auto& p : live->reader().problems())
        if (!p.tail)  // the open end of a trace still being written is no damage
          problems.push_back(p.message);
      model.Update(*results, live->finished(), std::move(problems));
    }
    ended = live->ended();
    if (live->abandoned())
      ended_why = live->WhyAbandoned();
    return Status::Ok();
  }
  // The collector's snapshot: nothing is read or analysed here.
  Status RemoteStep() {
    const auto t0 = Clock::now();
    auto snap = remote->Ask(remote_session, "json");
    took_ns = Since(t0);
    if (!snap.ok()) {
      // Before the recorder's first chunk: wait as for a local file not written yet.
      if (live::NotYetThere(snap.status()))
        return Status::Ok();
      return snap.status();
    }
    auto j = nlohmann::json::parse(snap->body, nullptr, false);
    if (!j.is_object())
      return Status::Error(
          fmt::format("{}: the collector's snapshot is not a report", remote_name));
    // The collector is a peer: a report of another shape gets one sentence, not an exception.
    analysis::Results r;
    std::vector<std::string> problems;
    try {
      r = ResultsFromReportJson(j);
      const auto& summary = j["summary"];
      if (summary.is_object() && summary.contains("problems") && summary["problems"].is_array())
        for (const auto& p : summary["problems"])
          if (p.is_string())
            problems.push_back(p.get<std::string>());
    } catch (const nlohmann::json::exception&) {
      return Status::Error(
          fmt::format("{}: the collector's snapshot is not a report parmon writes", remote_name));
    }
    // An open end of a session still arriving is no damage (as for a local trace).
    if (!snap->ended)
      problems.clear();
    // A stream the collector marked lost: this snapshot, of what it holds, is the last.
    const bool last = snap->ended || !snap->lost.empty();
    model.Update(r, last, std::move(problems));
    ended = last;
    if (!snap->ended && !snap->lost.empty())
      ended_why = fmt::format("the collector says of {}: {}", remote_name, snap->lost);
    return Status::Ok();
  }
  // The wait before the next refresh: the period, or three times the last analysis when that is
  // longer (each snapshot analyses the events so far again).
  uint64_t Wait(uint64_t period_ns) const { return std::max(period_ns, 3 * took_ns); }
};

int RunBatch(Follower& f, const TopOptions& o) {
  ViewState view;
  view.period_ns = o.period_ns;
  RenderOptions ro;
  ro.cols = 0;
  ro.batch = true;
  ro.color = false;
  uint64_t printed = 0, seen = 0;
  while (!StopRequested()) {
    if (Status s = f.Step(); !s.ok()) {
      fmt::print(stderr, "parmon top: {}\n", s.message());
      return 1;
    }
    if (f.model.updates() > seen) {
      seen = f.model.updates();
      std::string text = Render(f.model.frame(), view, ro) + "\n";
      fwrite(text.data(), 1, text.size(), stdout);
      fflush(stdout);
      ++printed;
    }
    if (f.ended || (o.iterations && printed >= o.iterations))
      break;
    SleepUnlessStopped(f.Wait(view.period_ns));
  }
  if (!f.ended_why.empty())
    fmt::print(stderr, "parmon top: {}\n", f.ended_why);
  return 0;
}

// Moves the cursor by delta rows (clamped) and scrolls so that it stays on the screen.
void MoveCursor(ViewState& v, const Frame& frame, long delta, int page) {
  const long n = static_cast<long>(VisibleThreads(frame, v).size());
  long c = std::clamp(static_cast<long>(v.cursor) + delta, 0L, std::max(0L, n - 1));
  v.cursor = static_cast<size_t>(c);
  if (v.cursor < v.scroll)
    v.scroll = v.cursor;
  if (page > 0 && v.cursor >= v.scroll + static_cast<size_t>(page))
    v.scroll = v.cursor - static_cast<size_t>(page) + 1;
}

// Applies one key to the view; false for quit.
bool HandleKey(Key key, ViewState& v, const Frame& frame, int page, const TopOptions& o) {
  switch (key) {
    case Key::kQuit:
      return false;
    case Key::kPause: {
      v.paused = !v.paused;
      if (o.on_pause) {
        Status s = o.on_pause(v.paused);
        v.message = s.ok() ? (v.paused ? "recording and display paused" : "resumed") : s.message();
      } else {
        v.message = v.paused ? "display paused (the recording goes on: no control path to it)"
                             : "display resumed";
      }
      break;
    }
    case Key::kSlower:
    case Key::kFaster:
      v.period_ns = key == Key::kSlower ? std::min(kMaxPeriodNs, v.period_ns * 2)
                                        : std::max(kMinPeriodNs, v.period_ns / 2);
      v.message = "refresh every " + analysis::FormatDuration(v.period_ns);
      break;
    case Key::kSort:
      v.sort = static_cast<SortBy>((static_cast<int>(v.sort) + 1) % 4);
      v.message = std::string("sorted by ") + SortName(v.sort);
      break;
    case Key::kThread: {
      const std::vector<size_t> order = VisibleThreads(frame, v);
      if (v.only_pid) {
        v.only_pid.reset();
        v.message = "all threads";
      } else if (v.cursor < order.size()) {
        v.only_pid = frame.threads[order[v.cursor]].pid;
        v.message = fmt::format("only process {}", *v.only_pid);
      }
      v.cursor = v.scroll = 0;
      break;
    }
    case Key::kUp:
      MoveCursor(v, frame, -1, page);
      break;
    case Key::kDown:
      MoveCursor(v, frame, 1, page);
      break;
    case Key::kPageUp:
      MoveCursor(v, frame, -std::max(1, page), page);
      break;
    case Key::kPageDown:
      MoveCursor(v, frame, std::max(1, page), page);
      break;
    case Key::kHome:
      MoveCursor(v, frame, -(1L << 30), page);
      break;
    case Key::kEnd:
      MoveCursor(v, frame, 1L << 30, page);
      break;
    case Key::kNone:
    case Key::kOther:
      break;
  }
  return true;
}

// The loop on a terminal; an error is returned, to be said once the screen is restored.
Status TerminalLoop(Follower& f, const TopOptions& o) {
  Terminal term;
  ViewState view;
  view.period_ns = o.period_ns;
  view.message = fmt::format("waiting for the first complete events of {}", f.name());
  std::optional<Clock::time_point> next = Clock::now();
  bool first = true;
  while (!StopRequested()) {
    if (!view.paused && !f.ended && next && Clock::now() >= *next) {
      PARMON_RETURN_IF_ERROR(f.Step());
      if (first && f.model.updates() > 0) {
        first = false;
        view.message.clear();
      }
      if (f.ended)
        view.message =
            f.ended_why.empty() ? "the recording has ended (q quits)" : f.ended_why + " (q quits)";
      next = Clock::now() + std::chrono::nanoseconds(f.Wait(view.period_ns));
    }
    RenderOptions ro;
    term.Size(&ro.rows, &ro.cols);
    ro.color = o.color;
    const Frame& frame = f.model.frame();
    term.Draw(Render(frame, view, ro));
    uint64_t wait = kKeyPollNs;
    if (next && !view.paused && !f.ended) {
      const auto now = Clock::now();
      wait =
          *next > now
              ? std::min<uint64_t>(
                    kKeyPollNs,
                    static_cast<uint64_t>(
                        std::chrono::duration_cast<std::chrono::nanoseconds>(*next - now).count()))
              : 0;
    }
    const Key key = term.ReadKey(wait);
    if (!HandleKey(key, view, frame, ThreadRows(frame, view, ro), o))
      break;
    if (key == Key::kSlower || key == Key::kFaster)
      next = Clock::now() + std::chrono::nanoseconds(view.period_ns);
  }
  return Status::Ok();
}

int RunTerminal(Follower& f, const TopOptions& o) {
  Status s = TerminalLoop(f, o);
  if (!s.ok()) {
    fmt::print(stderr, "parmon top: {}\n", s.message());
    return 1;
  }
  if (!f.ended_why.empty())
    fmt::print(stderr, "parmon top: {}\n", f.ended_why);
  return 0;
}

}  // namespace

int RunTop(const LiveSource& source, const TopOptions& options) {
  StopOnInterrupt();
  auto opened = LiveTrace::Open(source);
  if (!opened.ok()) {
    fmt::print(stderr, "parmon top: {}\n", opened.status().message());
    return 1;
  }
  Follower f{.live = opened->get(), .options = options};
  const bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  return options.batch || !tty ? RunBatch(f, options) : RunTerminal(f, options);
}

int RunTopRemote(const std::string& name, const TopOptions& options) {
  StopOnInterrupt();
  auto endpoint = live::ParseEndpoint(name);
  auto client = endpoint.ok() ? live::SnapshotClient::Open(name)
                              : StatusOr<std::unique_ptr<live::SnapshotClient>>(endpoint.status());
  if (!client.ok()) {
    fmt::print(stderr, "parmon top: {}\n", client.status().message());
    return 1;
  }
  Follower f{.remote = client->get(),
             .remote_name = name,
             .remote_session = endpoint->session,
             .options = options};
  const bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  return options.batch || !tty ? RunBatch(f, options) : RunTerminal(f, options);
}

}  // namespace parmon::live_view
