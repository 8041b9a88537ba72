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
#include "base/clock.h"
#include "format/reader.h"
#include "live/store_list.h"
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

std::string Render(const analysis::Results& r, const std::string& format) {
  if (format == "json")
    return analysis::DumpJson(analysis::ToJson(r), 2) + "\n";
  return analysis::RenderText(r, {});
}

// A per-rank session before it is fed: every rank's file from its start, up to what all of
// them have complete (`parmon report` of the directory so far).
StatusOr<analysis::Results> AnalyseFromStart(const std::string& dir,
                                             const std::string& session,
                                             nlohmann::json* meta) {
  auto s = model::Session::Open(dir);
  if (!s.ok()) {
    // A rank's file without its header yet reads as unreadable while the ranks start: the
    // follower asks again (as a local follower of a session directory waits).
    return Status::Error(
        fmt::format("session {} has no complete events yet ({})", session, s.status().message()));
  }
  const format::TraceReader& reader = (*s)->reader();
  analysis::Options o = ReportOptions();
  if (!reader.closed_cleanly()) {
    const uint64_t until = (*s)->complete_until();
    if (until == 0)
      return Status::Error(fmt::format("session {} has no complete events yet", session));
    const uint64_t start = (*s)->start();
    o.to_ns = until - 1 > start ? until - 1 - start : 1;
  }
  auto r = analysis::Analyze(**s, o);
  if (!r.ok())
    return r.status();
  (*meta)["ended"] = reader.closed_cleanly();
  (*meta)["incremental"] = false;
  (*meta)["analysed_events"] = r->summary.events;
  return r;
}

// The same location ids, definitions and streams in the same order (what the engine's results
// are keyed by and what the merge breaks ties by).
bool SameLayout(const format::TraceReader& a, const format::TraceReader& b) {
  if (a.streams().size() != b.streams().size() ||
      a.definitions().locations.size() != b.definitions().locations.size())
    return false;
  for (size_t i = 0; i < a.streams().size(); ++i) {
    const format::Stream &x = a.streams()[i], &y = b.streams()[i];
    if (x.location != y.location || x.source != y.source || x.chunks.size() != y.chunks.size())
      return false;
  }
  auto it = b.definitions().locations.begin();
  for (const auto& [id, x] : a.definitions().locations) {
    const format::LocationDef& y = (it++)->second;
    if (id != y.id || x.type != y.type || x.pid != y.pid || x.tid != y.tid || x.name != y.name ||
        x.first_name != y.first_name)
      return false;
  }
  return true;
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
  bool final_post_mortem = false;          // the final report was made from the stored files
  // A per-rank session is fed once every rank's file is there with its first clock round; until
  // then a question analyses the files from their start. Tries are at most kRetry apart.
  std::chrono::steady_clock::time_point next_try{};
  // The store said the session gained bytes since its files were last read. A mark that comes
  // while a bound is still being fed must not be lost: it may be the session's last (the files
  // closed), and no other would come to read them again.
  bool touched = false;
  // OpenPerRank said "not before next_try": the worker looks again then, touched or not (the
  // ranks may have written everything already).
  bool deferred = false;
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
  using Clock = std::chrono::steady_clock;
  std::map<std::string, bool> feeding;  // sessions with events left to feed (-> per rank)
  // Per-rank sessions whose opening waits for its retry time (-> per rank, when).
  std::map<std::string, std::pair<bool, Clock::time_point>> deferred;
  for (;;) {
    std::deque<Query> asked;
    std::map<std::string, bool> touched;
    {
      std::unique_lock lock(mu_);
      auto ready = [&] {
        return stop_ || !queries_.empty() || !dirty_.empty() || !feeding.empty();
      };
      if (deferred.empty()) {
        cv_.wait(lock, ready);
      } else {
        Clock::time_point wake = Clock::time_point::max();
        for (const auto& [s, d] : deferred)
          wake = std::min(wake, d.second);
        cv_.wait_until(lock, wake, ready);
      }
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
        deferred.erase(s);
        finished_order_.erase(std::remove(finished_order_.begin(), finished_order_.end(), s),
                              finished_order_.end());
      }
      forget_.clear();
    }
    for (const auto& [s, per_rank] : touched)
      if (live_.count(s) || live_.size() < kMaxLive + kMaxFinished) {
        feeding[s] = per_rank;
        Get(s, per_rank).touched = true;
      }
    const Clock::time_point now = Clock::now();
    for (auto it = deferred.begin(); it != deferred.end();) {
      if (it->second.second <= now) {
        feeding[it->first] = it->second.first;
        it = deferred.erase(it);
      } else {
        ++it;
      }
    }
    // Questions first: each is answered from what is fed now (a slice at most behind).
    for (const Query& q : asked) {
      q.done(Answer(q));
      if (Live& l = Get(q.session, q.per_rank); l.deferred) {
        l.deferred = false;
        deferred[q.session] = {q.per_rank, l.next_try};
      }
    }
    // One slice per session with work, round robin.
    for (auto it = feeding.begin(); it != feeding.end();) {
      Live& l = Get(it->first, it->second);
      if (Step(l)) {
        ++it;
        continue;
      }
      if (l.deferred) {
        l.deferred = false;
        deferred[it->first] = {it->second, l.next_try};
      }
      it = feeding.erase(it);
    }
  }
}

bool AnalysisService::OpenSingle(Live& l) {
  auto r = format::TraceReader::Open(l.path);
  if (!r.ok())
    return false;  // no header yet
  auto s = model::Session::Over(**r);
  if (!s.ok()) {
    l.error = s.status().message();
    return false;
  }
  l.reader = std::move(*r);
  l.session = std::move(*s);
  return true;
}

// A per-rank session is fed from the moment every rank's file (the SESSION's mpi_size of them)
// is readable and every rank has measured its first clock offset against rank 0 (MPI_Init's
// round): from then on the alignment only gains rounds. Until then questions are answered from
// the start of the files.
bool AnalysisService::OpenPerRank(Live& l) {
  const auto now = std::chrono::steady_clock::now();
  if (now < l.next_try) {
    l.deferred = true;
    return false;
  }
  l.next_try = now + kRetry;
  auto r = format::TraceReader::Open(l.path);
  if (!r.ok())
    return false;
  const uint32_t ranks = (*r)->metadata().session.mpi_size;
  if (ranks == 0 || (*r)->parts().size() != ranks)
    return false;  // a rank's file is missing or has no header yet
  model::SessionOptions options;
  options.follow_clocks = true;
  auto s = model::Session::Over(**r, options);
  if (!s.ok() || (ranks > 1 && (*s)->clocks().offsets.size() + 1 < ranks))
    return false;
  l.reader = std::move(*r);
  l.session = std::move(*s);
  return true;
}

bool AnalysisService::Step(Live& l) {
  if (!l.error.empty() || l.final)
    return false;
  const uint64_t cpu0 = ThreadCpuNs();
  struct Account {
    Live& l;
    uint64_t cpu0;
    ~Account() { l.cpu_ns += ThreadCpuNs() - cpu0; }
  } account{l, cpu0};
  if (l.drained) {
    // Read what the file gained, and take the new bound.
    l.touched = false;
    if (!l.reader) {
      if (!(l.per_rank ? OpenPerRank(l) : OpenSingle(l)))
        return false;  // not yet: the next Touch tries again
    } else {
      if (Status s = l.reader->Refresh(); !s.ok()) {
        l.error = s.message();
        return false;
      }
      l.session->Refresh();
    }
    const uint64_t until = l.session->complete_until();
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
  // Marked while this bound was fed: read the files again.
  return l.touched;
}

// The session has ended and every event is fed: its final results, and the rest is dropped.
void AnalysisService::Retire(Live& l) {
  l.session->Refresh();
  // The engine's snapshot is the report when it saw the session as a reader opened afresh does:
  // the same window start (an event stamped before the recorder's start moves it), for a
  // per-rank session the same clock alignment for every event fed (offsets drift between rounds)
  // and the same location ids and stream order (a rank's file that gained threads after a later
  // rank's were numbered numbers them otherwise).
  std::unique_ptr<model::Session> fresh;
  bool exact = l.session->start() == l.engine->window().first && !l.session->realigned();
  if (l.per_rank) {
    auto s = model::Session::Open(l.path);
    if (!s.ok()) {
      l.error = s.status().message();
    } else {
      fresh = std::move(*s);
      exact = exact && SameLayout(fresh->reader(), *l.reader);
    }
  }
  if (l.error.empty() && exact) {
    l.final = l.engine->SnapshotUntil(l.session->end());
  } else if (l.error.empty()) {
    // Post-mortem, once (exact by construction).
    auto r = analysis::Analyze(fresh ? *fresh : *l.session, ReportOptions());
    if (r.ok())
      l.final = std::move(*r);
    else
      l.error = r.status().message();
    l.final_post_mortem = true;
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
  Live& l = Get(q.session, q.per_rank);
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
  } else if (l.per_rank && !l.engine) {
    // The ranks are not all there with their first clock round yet.
    auto r = AnalyseFromStart(l.path, q.session, &meta);
    if (!r.ok()) {
      out.status = r.status();
      return out;
    }
    results = std::move(*r);
  } else {
    out.status = Status::Error(fmt::format(
        "session {} has no complete events yet (the recorder writes them every 100 ms or so)",
        q.session));
    return out;
  }
  // The collector marked a stream lost (its recorder went without the end): nothing more comes,
  // and this snapshot is the last there will be.
  if (!l.final)
    if (auto stored = FindStored(store_, q.session); stored && !stored->lost.empty())
      meta["lost"] = stored->lost;
  if (!meta.contains("incremental")) {
    meta["ended"] = l.final.has_value();
    meta["incremental"] = true;
    meta["analysed_events"] = l.fed;
    meta["cpu_ns"] = l.cpu_ns;
    if (l.final)
      meta["final_post_mortem"] = l.final_post_mortem;
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
