// LiveView (live_view.h): the refresh thread of `parmon view --follow` and its answers.
#include "web/live_view.h"

#include <sys/stat.h>

#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "live/fetch.h"
#include "live_view/follow.h"
#include "model/merge.h"
#include "model/session.h"
#include "web/index_builder.h"

namespace parmon::web {

using json = nlohmann::json;

namespace {

// The session time fed per refresh while catching up (see Step).
constexpr uint64_t kCatchUpNs = 250'000'000;

}  // namespace

StatusOr<std::unique_ptr<LiveView>> LiveView::Open(
    const std::string& name,
    const analysis::Options& analysis,
    uint64_t period_ns,
    std::function<StatusOr<live_view::LiveSource>()> source) {
  struct stat st;
  if (!source && !live::IsRemoteSession(name) && stat(name.c_str(), &st) != 0)
    return Status::Error(fmt::format(
        "{} does not exist (start the recording first, or name a collector's session as "
        "HOST:PORT/SESSION)",
        name));
  auto view = std::unique_ptr<LiveView>(new LiveView());
  view->name_ = name;
  view->source_ = std::move(source);
  view->options_ = analysis;
  view->period_ns_ = period_ns;
  view->index_ = std::make_unique<TraceIndex>();
  view->results_ = std::make_unique<analysis::Results>();
  view->api_ = std::make_unique<Api>(*view->index_, *view->results_);
  return view;
}

// On the refresh thread: waits for the session (a collector's session not there yet is asked
// for again for up to a minute; a local file waits for its header), then reads what it holds.
bool LiveView::OpenTrace() {
  auto source = source_ ? source_() : live_view::ResolveLiveSource(name_);
  if (source.ok())
    source->stop = [this] { return stopping_.load(std::memory_order_relaxed); };
  StatusOr<std::unique_ptr<live_view::LiveTrace>> trace =
      source.ok() ? live_view::LiveTrace::Open(std::move(*source))
                  : StatusOr<std::unique_ptr<live_view::LiveTrace>>(source.status());
  if (trace.ok()) {
    trace_ = std::move(*trace);
    Rebuild();
  }
  if (!trace.ok() || !session_) {
    std::unique_lock lock(mu_);
    state_ = "failed";
    lost_ = trace.ok() ? lost_ : std::string(trace.status().message());
    return false;
  }
  return true;
}

LiveView::~LiveView() {
  stopping_.store(true, std::memory_order_relaxed);  // a LiveTrace::Open still waiting gives up
  {
    std::lock_guard lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void LiveView::Start() {
  thread_ = std::thread([this] {
    if (OpenTrace())
      Loop();
  });
}

bool LiveView::ended() const {
  std::shared_lock lock(mu_);
  return state_ != "waiting" && state_ != "live";
}

void LiveView::Loop() {
  Step();  // what is there already
  std::unique_lock lock(stop_mu_);
  while (!stop_ && !ended()) {
    if (!behind_)  // catching up: no pause between the slices of what is there already
      stop_cv_.wait_for(lock, std::chrono::nanoseconds(period_ns_), [this] { return stop_; });
    if (stop_)
      break;
    lock.unlock();
    Step();
    lock.lock();
  }
}

// A new session over the trace's reader, and everything fed from it started again (the first
// open, and a per-rank directory opened again).
void LiveView::Rebuild() {
  merge_.reset();
  engine_.reset();
  builder_.reset();
  model::SessionOptions so;
  so.follow_clocks = true;  // a per-rank session: its alignment grows with each clock round
  auto session = model::Session::Over(trace_->reader(), so);
  if (!session.ok()) {
    session_.reset();
    lost_ = session.status().message();
    return;
  }
  session_ = std::move(*session);
  generation_ = trace_->generation();
  published_bound_ = UINT64_MAX - 1;
  analysis::Options o = options_;
  o.growing = true;
  engine_ = std::make_unique<analysis::Engine>(*session_, o);
  engine_from_ = engine_->window().first;
  merge_ = std::make_unique<model::Merge>(*session_);
  // Built aside: the answers stay those of the last index until the new one is published.
  next_index_ = std::make_unique<TraceIndex>();
  builder_ = std::make_unique<IndexBuilder>(*session_, next_index_.get());
}

bool LiveView::Feed(uint64_t bound) {
  const uint64_t before = builder_->fed();
  merge_->Run(
      [this](const format::Event& e, model::StreamIndex s) {
        builder_->Feed(e);
        if (e.ts >= engine_from_)
          engine_->ConsumeLive(e, s);
      },
      bound);
  return builder_->fed() != before;
}

void LiveView::Step() {
  Status s = trace_->Refresh();
  if (s.ok() && trace_->generation() != generation_) {
    reopened_ = true;  // a per-rank directory: indexed again from its start on every refresh
    Rebuild();
  } else if (s.ok() && session_)
    session_->Refresh();
  if (!s.ok() || !session_) {
    std::unique_lock lock(mu_);
    state_ = "failed";
    lost_ = fmt::format("{} could not be read further: {}", name_,
                        s.ok() ? lost_ : std::string(s.message()));
    return;
  }
  const uint64_t until = session_->complete_until();
  const bool closed = trace_->finished();
  if (until == 0 && !closed && !trace_->abandoned())
    return;  // no stream complete anywhere yet
  // Every file read is closed but the source does not vouch for the end yet (a per-rank
  // session whose other ranks are still to come): complete up to the session's end so far.
  const uint64_t complete = closed                ? UINT64_MAX
                            : until == 0          ? 0
                            : until == UINT64_MAX ? std::max(session_->end(), session_->start())
                                                  : until - 1;
  // A long stretch not yet fed (a view started late, a recorder faster than the view) is fed
  // in slices of session time, each published, so that the page shows it growing meanwhile.
  const uint64_t from = published_bound_ >= UINT64_MAX - 1 ? session_->start() : published_bound_;
  const uint64_t target = closed ? std::max(session_->end(), from) : complete;
  const uint64_t bound =
      !reopened_ && target > from && target - from > kCatchUpNs ? from + kCatchUpNs : complete;
  behind_ = bound != complete;
  const bool fed = Feed(bound);
  if (!fed && bound == published_bound_ && !trace_->ended())
    return;  // nothing new: the answers stay as they are
  published_bound_ = bound;
  Publish(bound, trace_->ended() && !behind_);
}

void LiveView::Publish(uint64_t bound, bool final) {
  std::unique_ptr<analysis::Results> results;
  uint64_t start = session_->start();
  uint64_t end = std::max(start, bound == UINT64_MAX ? session_->end() : bound);
  if (final && trace_->finished()) {
    // The post-mortem analysis of the closed file (a session over it as a fresh open sees it).
    auto fresh = model::Session::Over(trace_->reader());
    auto r = fresh.ok() ? analysis::Analyze(**fresh, options_)
                        : StatusOr<analysis::Results>(fresh.status());
    if (r.ok()) {
      results = std::make_unique<analysis::Results>(std::move(*r));
      start = (*fresh)->start();
      end = (*fresh)->end();
    }
  }
  if (!results)
    results = std::make_unique<analysis::Results>(engine_->SnapshotUntil(end));
  std::vector<std::string> problems;
  for (const format::Problem& p : trace_->reader().problems())
    if (!p.harmless)
      problems.push_back(p.message);
  std::unique_lock lock(mu_);
  problems_ = std::move(problems);
  if (next_index_) {
    api_.reset();  // it points into the index it answers from
    index_ = std::move(next_index_);
  }
  builder_->Publish(final, start, end);
  results_ = std::move(results);
  api_ = std::make_unique<Api>(*index_, *results_);
  ++refreshes_;
  if (!final) {
    state_ = "live";
  } else if (trace_->finished()) {
    state_ = "ended";
  } else {
    state_ = "lost";
    lost_ = fmt::format("{}; what was recorded after {:.3f} s is lost", trace_->WhyAbandoned(),
                        static_cast<double>(end - start) / 1e9);
  }
}

ApiResponse LiveView::Handle(std::string_view target) const {
  std::shared_lock lock(mu_);
  ApiResponse r = api_->Handle(target);
  if (r.status != 200 || target.substr(0, target.find('?')) != "/api/session")
    return r;
  json body = json::parse(r.body);
  body["file"] = name_;  // not the private copy a collector's session is fetched into
  // Per row, the time up to which its states are known (its sampler's last span may lag the
  // complete-until time: the rest of the row is drawn when the next sample comes).
  for (json& row : body["rows"]) {
    const IndexedLocation* l = index_->Find(row["id"].get<uint32_t>());
    const uint64_t until = l ? l->states.until() : 0;
    row["states_until"] = until > index_->start() ? until - index_->start() : 0;
  }
  body["live"] = {{"following", name_},
                  {"state", state_},
                  {"growing", state_ == "waiting" || state_ == "live"},
                  {"complete_until", index_->end() - index_->start()},
                  {"refreshes", refreshes_},
                  {"lost", lost_},
                  {"problems", problems_}};
  r.body = body.dump();
  return r;
}

}  // namespace parmon::web
