// The analysis engine (engine.h): construction (the window and its intervals), the location
// table, the MPI function table, and the public interface over Engine::Impl (engine_impl.h).
#include "analysis/engine.h"

#include <algorithm>
#include <charconv>
#include <memory>
#include <string>

#include "analysis/engine_impl.h"

namespace parmon::analysis {
namespace {

// A time from the session's key/values; 0 when absent or not a number.
uint64_t SessionU64(const format::TraceReader& reader, const char* key) {
  std::string v = reader.SessionValue(key);
  uint64_t out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() ? out : 0;
}

}  // namespace

LoopClocks loop_clocks;

Engine::Impl::Impl(const format::TraceReader& r, const Options& o)
    : reader(r),
      options(o),
      defs(r.definitions()),
      clocks(ClockAlignment::Measure(r, o.align_clocks)) {
  session_start = SessionU64(r, "start_ts");
  if (session_start == 0 || session_start > r.first_ts())
    session_start = r.first_ts();
  if (r.first_ts() == UINT64_MAX)
    session_start = 0;
  session_end = SessionU64(r, "end_ts");
  if (session_end < r.last_ts())
    session_end = r.last_ts();
  if (clocks.aligned()) {
    // Recorders' start and end times are on their own clocks: the session is the span of
    // its events on rank 0's.
    session_start = UINT64_MAX;
    session_end = 0;
    for (const auto& st : r.streams()) {
      if (st.source == format::Source::kDefinitions || st.events == 0)
        continue;
      session_start = std::min(session_start, clocks.Aligned(st, st.first_ts));
      session_end = std::max(session_end, clocks.Aligned(st, st.last_ts));
    }
    if (session_start == UINT64_MAX)
      session_start = 0;
  }
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
  iv_count = bins.count;
  for (const auto& [id, d] : defs.locations)
    LocFor(id);
  for (const auto& s : r.streams())
    if (s.source == format::Source::kSampler || s.source == format::Source::kSched)
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

Engine::Engine(const format::TraceReader& reader, const Options& options)
    : impl_(std::make_unique<Impl>(reader, options)) {}
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
  Feed(impl_->reader, impl_->clocks, impl_->ws, impl_->we, *impl_);
  return Finish();
}

StatusOr<Results> Analyze(const format::TraceReader& reader, const Options& options) {
  Engine engine(reader, options);
  return engine.Run();
}

}  // namespace parmon::analysis
