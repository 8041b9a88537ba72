// ProgressiveView (progressive_view.h): the coarse level of a large stored trace, served at once,
// and the complete level built behind it.
#include "web/progressive_view.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "format/reader.h"
#include "model/merge.h"
#include "web/index_builder.h"

namespace parmon::web {

namespace {

using json = nlohmann::json;

// The MPI rank of each pid from the MpiInit in the first chunk of its runtime streams (MPI_Init
// comes first in a rank's main thread; a rank whose MpiInit lies further in is labelled by its
// thread until the complete level comes).
std::map<uint32_t, int32_t> RanksFromFirstChunks(const model::Session& session) {
  std::map<uint32_t, int32_t> ranks;
  const auto& locations = session.definitions().locations;
  format::DecodedChunk chunk;
  for (const format::Stream& st : session.streams()) {
    if (st.source != format::Source::kRuntime || st.chunks.empty())
      continue;
    auto loc = locations.find(st.location);
    if (loc == locations.end() || !session.reader().ReadChunk(st.chunks.front(), &chunk).ok())
      continue;
    for (const format::Event& e : chunk.events)
      if (e.kind_enum() == format::Kind::kMpiInit) {
        ranks.emplace(loc->second.pid, static_cast<int32_t>(e.args[0]));
        break;
      }
  }
  return ranks;
}

// A label as the report gives a thread (analysis' Engine::Impl::Label).
std::string ThreadLabel(int32_t rank, const format::LocationDef& d) {
  if (rank >= 0)
    return d.tid == d.pid || d.tid == 0 ? fmt::format("rank {}", rank)
                                        : fmt::format("rank {} tid {}", rank, d.tid);
  return d.name.empty() ? fmt::format("tid {}", d.tid) : fmt::format("{} ({})", d.name, d.tid);
}

}  // namespace

analysis::Results CoarseResults(const model::Session& session) {
  analysis::Results r;
  r.summary.file = session.path();
  r.summary.command = session.info().command;
  r.summary.host = session.info().host;
  const std::map<uint32_t, int32_t> ranks = RanksFromFirstChunks(session);
  std::set<uint32_t> sampled, seen;
  for (const format::Stream& st : session.streams()) {
    seen.insert(st.location);
    if (st.source == format::Source::kSampler)
      sampled.insert(st.location);
  }
  for (uint32_t id : seen) {
    const format::LocationDef* d = session.Location(id);
    if (!d || d->type != format::LocationType::kThread || session.IsCpu(id))
      continue;
    analysis::LocationResult l;
    l.id = id;
    l.kind = "thread";
    l.pid = d->pid;
    l.tid = d->tid;
    auto rank = ranks.find(d->pid);
    l.rank = rank == ranks.end() ? -1 : rank->second;
    l.main_thread = l.rank >= 0 && (l.tid == l.pid || l.tid == 0);
    l.name = d->name;
    l.label = ThreadLabel(l.rank, *d);
    l.sampled = sampled.count(id) > 0;
    l.state_source = l.sampled ? "sampled" : "inferred";
    r.locations.push_back(std::move(l));
  }
  // The report's order: by rank (none last), pid, tid.
  std::sort(r.locations.begin(), r.locations.end(),
            [](const analysis::LocationResult& x, const analysis::LocationResult& y) {
              auto key = [](const analysis::LocationResult& l) {
                return std::make_tuple(l.rank < 0 ? INT32_MAX : l.rank, l.pid, l.tid);
              };
              return key(x) < key(y);
            });
  return r;
}

std::unique_ptr<TraceIndex> BuildCoarseIndex(const model::Session& session) {
  auto index = std::make_unique<TraceIndex>();
  model::MergeFilter sampler;
  sampler.sources = std::set<format::Source>{format::Source::kSampler};
  IndexBuilder(session, index.get()).Run(sampler);
  return index;
}

std::unique_ptr<ProgressiveView> ProgressiveView::Over(std::unique_ptr<model::Session> session) {
  const auto begun = std::chrono::steady_clock::now();
  auto view = std::unique_ptr<ProgressiveView>(new ProgressiveView());
  view->path_ = session->path();
  view->session_ = std::move(session);
  view->index_ = BuildCoarseIndex(*view->session_);
  view->results_ = std::make_unique<analysis::Results>(CoarseResults(*view->session_));
  view->api_ = std::make_unique<Api>(*view->index_, *view->results_);
  view->coarse_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count();
  return view;
}

ProgressiveView::~ProgressiveView() {
  if (thread_.joinable())
    thread_.join();
}

void ProgressiveView::Start(Analyse analyse, Done done) {
  thread_ = std::thread([this, analyse = std::move(analyse), done = std::move(done)] {
    BuildComplete(analyse, done);
  });
}

namespace {

// The calling thread yields the CPU to the HTTP threads and the browser: the builders take what
// is left (Linux's nice value is per thread).
void Background() {
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);
}

}  // namespace

void ProgressiveView::BuildComplete(const Analyse& analyse, const Done& done) {
  // The analysis opens the trace itself; the index is built from the coarse level's session.
  Background();
  std::optional<StatusOr<analysis::Results>> results;
  std::thread analysing([&] {
    Background();
    results.emplace(analyse());
  });
  auto index = TraceIndex::Build(*session_);
  analysing.join();
  session_.reset();  // the index keeps what it needs
  if (!results->ok() || !index.ok()) {
    done(results->ok() ? index.status() : results->status(), *this);
    return;
  }
  {
    std::unique_lock lock(mu_);
    api_.reset();  // it points into the index and results it answers from
    index_ = std::move(*index);
    results_ = std::make_unique<analysis::Results>(std::move(**results));
    api_ = std::make_unique<Api>(*index_, *results_);
    complete_.store(true, std::memory_order_release);  // pairs with complete()'s acquire
  }
  done(Status::Ok(), *this);
}

ApiResponse ProgressiveView::Handle(std::string_view target) const {
  std::shared_lock lock(mu_);
  ApiResponse r = api_->Handle(target);
  if (complete() || r.status != 200 || r.content_type != "application/json" || r.body.empty() ||
      r.body.front() != '{')
    return r;
  if (target.substr(0, target.find('?')) != "/api/session") {
    r.body.insert(1, "\"complete\":false,\"level\":\"sampler\",");
    return r;
  }
  json body = json::parse(r.body);
  body["index"] = {{"complete", false}, {"level", "sampler"}, {"indexed_until", 0}};
  // The live view's loop (web/ui/live.ts) asks again until this is gone.
  body["live"] = {{"following", path_},       {"state", "indexing"},
                  {"growing", true},          {"complete_until", index_->end() - index_->start()},
                  {"refreshes", 0},           {"lost", ""},
                  {"problems", json::array()}};
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

}  // namespace parmon::web
