#include "live/analysis_service.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/engine.h"
#include "analysis/json_dump.h"
#include "analysis/views.h"
#include "format/reader.h"
#include "model/merge.h"
#include "model/session.h"

namespace parmon::live {
namespace {

// The options `parmon report` analyses with (the costs of an event and of a switch record when the
// trace does not say: analysis/engine.h), so that the final snapshot is its report.
analysis::Options ReportOptions() {
  analysis::Options o;
  o.default_event_cost_ns = analysis::kDefaultEventCostNs;
  o.default_switch_record_cost_ns = analysis::kDefaultSwitchRecordCostNs;
  return o;
}

uint64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

std::string Render(const analysis::Results& r, const std::string& format) {
  if (format == "json")
    return analysis::DumpJson(analysis::ToJson(r), 2) + "\n";
  return analysis::RenderText(r, {});
}

}  // namespace

struct AnalysisService::Live {
  std::string name, path;
  bool per_rank = false;
  std::unique_ptr<format::TraceReader> reader;
  std::unique_ptr<model::Session> session;
  std::unique_ptr<analysis::Engine> engine;
  std::unique_ptr<model::Merge> merge;
  uint64_t bound = 0;      // every event at or before it is fed (valid when has_bound)
  bool has_bound = false;  // bound is set
  uint64_t fed = 0;        // events fed to the engine
  uint64_t last_ts = 0;    // of the last event fed
  uint64_t cpu_ns = 0;     // worker CPU spent reading and feeding
  bool drained = true;     // the merge has handed out everything up to `target`
  uint64_t target = 0;     // the bound being fed
  std::string error;       // the file cannot be analysed (damage): said to every question
  std::optional<analysis::Results> final;  // once the recording has ended and all is fed
};

AnalysisService::AnalysisService(std::string store_dir)
    : store_(std::move(store_dir)), worker_([this] { Loop(); }) {}

AnalysisService::~AnalysisService() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void AnalysisService::Touch(const std::string& session, bool per_rank) {
  {
    std::lock_guard lock(mu_);
    dirty_.insert(session);
    dirty_per_rank_[session] = per_rank;
  }
  cv_.notify_one();
}

void AnalysisService::Forget(const std::string& session) {
  {
    std::lock_guard lock(mu_);
    forget_.insert(session);
  }
  cv_.notify_one();
}

bool AnalysisService::Ask(const std::string& session,
                          bool per_rank,
                          const std::string& format,
                          std::function<void(Snapshot)> done) {
  {
    std::lock_guard lock(mu_);
    if (queries_.size() >= kMaxQueries)
      return false;
    queries_.push_back(Query{session, format, per_rank, std::move(done)});
  }
  cv_.notify_one();
  return true;
}

AnalysisService::Live& AnalysisService::Get(const std::string& session, bool per_rank) {
  auto& slot = live_[session];
  if (!slot) {
    slot = std::make_unique<Live>();
    slot->name = session;
    slot->per_rank = per_rank;
    slot->path = per_rank ? fmt::format("{}/{}", store_, session)
                          : fmt::format("{}/{}.ptrace", store_, session);
  }
  return *slot;
}

void AnalysisService::Loop() {
  std::set<std::string> feeding;  // sessions with events left to feed
  for (;;) {
    std::deque<Query> asked;
    std::map<std::string, bool> touched;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock,
               [&] { return stop_ || !queries_.empty() || !dirty_.empty() || !feeding.empty(); });
      if (stop_)
        return;
      asked.swap(queries_);
      for (const auto& s : dirty_)
        touched[s] = dirty_per_rank_[s];
      dirty_.clear();
      dirty_per_rank_.clear();
      for (const auto& s : forget_) {
        live_.erase(s);
        feeding.erase(s);
        finished_order_.erase(std::remove(finished_order_.begin(), finished_order_.end(), s),
                              finished_order_.end());
      }
      forget_.clear();
    }
    for (const auto& [s, per_rank] : touched)
      if (!per_rank && (live_.count(s) || live_.size() < kMaxLive + kMaxFinished))
        feeding.insert(s);
    // Questions first: each is answered from what is fed now (a slice at most behind).
    for (const Query& q : asked)
      q.done(Answer(q));
    // One slice per session with work, round robin.
    for (auto it = feeding.begin(); it != feeding.end();) {
      Live& l = Get(*it, false);
      if (Step(l))
        ++it;
      else
        it = feeding.erase(it);
    }
  }
}

bool AnalysisService::Step(Live& l) {
  if (l.per_rank || !l.error.empty() || l.final)
    return false;
  const uint64_t cpu0 = ThreadCpuNs();
  struct Account {
    Live& l;
    uint64_t cpu0;
    ~Account() { l.cpu_ns += ThreadCpuNs() - cpu0; }
  } account{l, cpu0};
  if (l.drained) {
    // Read what the file gained, and take the new bound.
    if (!l.reader) {
      auto r = format::TraceReader::Open(l.path);
      if (!r.ok())
        return false;  // no header yet: the next Touch tries again
      l.reader = std::move(*r);
      auto s = model::Session::Over(*l.reader);
      if (!s.ok()) {
        l.error = s.status().message();
        return false;
      }
      l.session = std::move(*s);
    } else {
      if (Status s = l.reader->Refresh(); !s.ok()) {
        l.error = s.message();
        return false;
      }
      l.session->Refresh();
    }
    const uint64_t until = l.reader->complete_until();
    if (until == 0)
      return false;  // no stream complete anywhere yet
    if (!l.engine) {
      analysis::Options o = ReportOptions();
      o.growing = true;
      l.engine = std::make_unique<analysis::Engine>(*l.session, o);
      model::MergeFilter f;
      f.from_ts = l.engine->window().first;
      l.merge = std::make_unique<model::Merge>(*l.session, std::move(f));
    }
    l.target = until == UINT64_MAX ? UINT64_MAX : until - 1;
    l.drained = false;
  }
  format::Event e;
  model::StreamIndex stream = 0;
  size_t n = 0;
  while (n < kSliceEvents && l.merge->Next(&e, l.target, &stream)) {
    l.engine->ConsumeLive(e, stream);
    l.last_ts = e.ts;
    ++n;
  }
  l.fed += n;
  if (n == kSliceEvents)
    return true;  // more to feed at this bound
  l.drained = true;
  l.bound = l.target;
  l.has_bound = true;
  if (l.reader->closed_cleanly()) {
    Retire(l);
    return false;
  }
  return false;
}

// The session has ended and every event is fed: its final results, and the rest is dropped.
void AnalysisService::Retire(Live& l) {
  l.session->Refresh();
  if (l.session->start() == l.engine->window().first) {
    l.final = l.engine->SnapshotUntil(l.session->end());
  } else {
    // The recorder's start moved after the engine was set up (an event before it): the window
    // differs, so the final report is made post-mortem (exact by construction).
    auto r = analysis::Analyze(*l.session, ReportOptions());
    if (r.ok())
      l.final = std::move(*r);
    else
      l.error = r.status().message();
  }
  l.merge.reset();
  l.engine.reset();
  l.session.reset();
  l.reader.reset();
  finished_order_.push_back(l.name);
  while (finished_order_.size() > kMaxFinished) {
    live_.erase(finished_order_.front());
    finished_order_.pop_front();
  }
}

Snapshot AnalysisService::Answer(const Query& q) {
  const auto t0 = std::chrono::steady_clock::now();
  Snapshot out;
  nlohmann::json meta = {{"session", q.session}, {"format", q.format}};
  std::optional<analysis::Results> results;
  if (q.per_rank) {
    // Every rank's file from the start, up to what all of them have complete.
    auto s = model::Session::Open(fmt::format("{}/{}", store_, q.session));
    if (!s.ok()) {
      // A rank's file without its header yet reads as unreadable while the ranks start: the
      // follower asks again (as a local follower of a session directory waits).
      out.status = Status::Error(fmt::format("session {} has no complete events yet ({})",
                                             q.session, s.status().message()));
      return out;
    }
    const format::TraceReader& reader = (*s)->reader();
    analysis::Options o = ReportOptions();
    if (!reader.closed_cleanly()) {
      const uint64_t until = reader.complete_until();
      if (until == 0) {
        out.status = Status::Error(fmt::format("session {} has no complete events yet", q.session));
        return out;
      }
      const uint64_t start = (*s)->start();
      o.to_ns = until - 1 > start ? until - 1 - start : 1;
    }
    auto r = analysis::Analyze(**s, o);
    if (!r.ok()) {
      out.status = r.status();
      return out;
    }
    results = std::move(*r);
    meta["ended"] = reader.closed_cleanly();
    meta["incremental"] = false;
    meta["analysed_events"] = results->summary.events;
  } else {
    Live& l = Get(q.session, false);
    if (!l.final && !l.engine) {
      // Not seen since this collector started (or not begun): read what the store holds.
      while (Step(l)) {
      }
    }
    if (!l.error.empty()) {
      out.status = Status::Error(fmt::format("session {}: {}", q.session, l.error));
      return out;
    }
    if (l.final) {
      results = *l.final;
    } else if (l.engine && (l.has_bound || l.fed > 0)) {
      // At the bound fed; mid-slice, at the last event fed (the merge is in time order).
      results = l.engine->SnapshotUntil(std::max(l.has_bound ? l.bound : 0, l.last_ts));
    } else {
      out.status = Status::Error(fmt::format(
          "session {} has no complete events yet (the recorder writes them every 100 ms or so)",
          q.session));
      return out;
    }
    meta["ended"] = l.final.has_value();
    meta["incremental"] = true;
    meta["analysed_events"] = l.fed;
    meta["cpu_ns"] = l.cpu_ns;
  }
  meta["events"] = results->summary.events;
  // From the session start, as the report's JSON counts it.
  meta["window_end_ns"] = results->summary.window_end - results->summary.session_start;
  meta["duration_ns"] = results->summary.duration_ns;
  out.body = Render(*results, q.format);
  meta["snapshot_ns"] =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  out.meta = meta.dump();
  return out;
}

}  // namespace parmon::live
