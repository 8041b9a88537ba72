// The analysis engine (engine.h): construction (the session's window and its intervals), the
// event loop over the session's merge, the location table, the MPI function table, and the
// public interface over Engine::Impl (engine_impl.h).
#include "analysis/engine.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "analysis/engine_impl.h"

namespace parmon::analysis {

LoopClocks loop_clocks;

Engine::Impl::Impl(const model::Session& s, const Options& o)
    : session(s), reader(s.reader()), options(o), defs(s.definitions()) {
  // The session's window (model::Session::start/end): on rank 0's clock for a per-rank session.
  session_start = s.start();
  session_end = s.end();
  periodic_session = s.info().mode == "periodic";
  if (session_end < session_start)
    session_end = session_start;
  ws = session_start + std::min(options.from_ns, session_end - session_start);
  we = options.to_ns == UINT64_MAX
           ? session_end
           : session_start + std::min(options.to_ns, session_end - session_start);
  if (we < ws)
    we = ws;
  iv_ns = options.interval_ns ? options.interval_ns : AutoInterval(we - ws);
  bins = Bins::Of(ws, we, iv_ns);
  omp.SetWindowStart(ws);
  iv_count = bins.count;
  for (const auto& [id, d] : defs.locations)
    LocFor(id);
  for (const auto& st : s.streams())
    if (st.source == format::Source::kSampler || st.source == format::Source::kSched)
      has_sched = true;
  track_shares = locs.size() <= kMaxShareLocations;
}

int32_t Engine::Impl::LocFor(uint32_t id) {
  if (id >= loc_index.size())
    loc_index.resize(id + 1, -1);
  if (loc_index[id] >= 0)
    return loc_index[id];
  Loc l;
  l.id = id;
  auto it = defs.locations.find(id);
  if (it != defs.locations.end()) {
    l.cpu = it->second.type == format::LocationType::kCpu;
    l.pid = it->second.pid;
    l.tid = it->second.tid;
  }
  l.iv.resize(iv_count);
  if (!l.cpu)
    l.iv_waits.resize(iv_count);
  loc_index[id] = static_cast<int32_t>(locs.size());
  locs.push_back(std::move(l));
  if (locs.size() > kMaxShareLocations)
    track_shares = false;
  return loc_index[id];
}

const MpiFunc& Engine::Impl::Func(uint32_t id) {
  auto it = funcs.find(id);
  if (it != funcs.end())
    return it->second;
  MpiFunc f;
  f.name = defs.Name(id);
  MpiFunctionInfo info = FindMpiFunction(f.name);
  f.family = info.family;
  f.n_to_n = info.n_to_n;
  f.barrier = info.barrier;
  return funcs.emplace(id, std::move(f)).first->second;
}

// The event loop: Merge::Run is a template, inlined here with ConsumeAt and the decoder into one
// loop (flatten), which saves about a tenth of the CPU time per event (bench/report_bench).
[[gnu::flatten]] void Engine::Impl::Feed() {
  const auto& streams = session.streams();
  // Every stream with events in the window gets its location before the first event, so the
  // table does not grow (and these pointers stay valid) while events are consumed.
  auto in_window = [&](model::StreamIndex i) {
    const format::Stream& st = streams[i];
    return st.source != format::Source::kDefinitions && st.events > 0 && session.last_ts(i) >= ws &&
           session.first_ts(i) <= we;
  };
  for (model::StreamIndex i = 0; i < streams.size(); ++i)
    if (in_window(i))
      LocFor(streams[i].location);
  std::vector<Loc*> loc_of(streams.size(), nullptr);
  for (model::StreamIndex i = 0; i < streams.size(); ++i)
    if (in_window(i))
      loc_of[i] = Resolve(streams[i].location);
  model::MergeFilter filter;
  filter.from_ts = ws;
  filter.to_ts = we;
  model::Merge merge(session, std::move(filter));
  merge.Run([&](const format::Event& e, model::StreamIndex i) { ConsumeAt(*loc_of[i], e); });
}

Engine::Engine(const model::Session& session, const Options& options)
    : impl_(std::make_unique<Impl>(session, options)) {}
Engine::~Engine() = default;

void Engine::Consume(const format::Event& e) {
  impl_->Consume(e);
}

Results Engine::Snapshot() const {
  // The analyzers' state is copied and the copy finished: the engine goes on as if nothing had
  // been asked. Shared records (share vectors, loop clocks) are copy-on-write; calls waiting for
  // a partner are finished on copies (FlushOpenCalls); the wait-row cache points into the
  // original's table, so the copy starts without it.
  Impl copy(*impl_);
  copy.wait_rows.clear();
  return copy.Finish();
}

Results Engine::Finish() {
  return Snapshot();
}

std::pair<uint64_t, uint64_t> Engine::window() const {
  return {impl_->ws, impl_->we};
}

Results Engine::Run() {
  impl_->Feed();
  return Finish();
}

StatusOr<Results> Analyze(const model::Session& session, const Options& options) {
  Engine engine(session, options);
  return engine.Run();
}

}  // namespace parmon::analysis
