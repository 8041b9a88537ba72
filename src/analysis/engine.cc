// The analysis engine (engine.h): construction (the session's window and its intervals), the
// event loop over the session's merge, the location table, the MPI function table, and the
// public interface over Engine::Impl (engine_impl.h).
#include "analysis/engine.h"

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
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
  if (options.growing) {
    // The window's end is not known: rows of kGrowingIntervals fine intervals from 1 us.
    ws = session_start;
    iv_ns = 1000;
    we = ws + kGrowingIntervals * iv_ns;
  }
  bins = Bins::Of(ws, we, iv_ns);
  omp.SetWindowStart(ws);
  iv_count = bins.count;
  for (const auto& [id, d] : defs.locations)
    LocFor(id);
  for (const auto& st : s.streams())
    if (st.source == format::Source::kSampler || st.source == format::Source::kSched)
      has_sched = true;
  track_shares = locs.size() <= kMaxShareLocations;
  NoteSwitchStops();
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
  if (it != defs.locations.end() && it->second.type == format::LocationType::kThread && l.tid)
    loc_of_tid[l.tid] = static_cast<uint32_t>(locs.size());
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
void Engine::Impl::PrepareFeed() {
  const auto& streams = session.streams();
  auto in_window = [&](model::StreamIndex i) {
    const format::Stream& st = streams[i];
    return st.source != format::Source::kDefinitions && st.events > 0 && session.last_ts(i) >= ws &&
           session.first_ts(i) <= we;
  };
  for (model::StreamIndex i = 0; i < streams.size(); ++i)
    if (in_window(i))
      LocFor(streams[i].location);
  loc_of_stream.assign(streams.size(), nullptr);
  for (model::StreamIndex i = 0; i < streams.size(); ++i)
    if (in_window(i))
      loc_of_stream[i] = Resolve(streams[i].location);
  DefinitionsBeforeWindow();
}

[[gnu::flatten]] void Engine::Impl::Feed() {
  PrepareFeed();
  Loc* const* loc_of = loc_of_stream.data();
  model::MergeFilter filter;
  filter.from_ts = ws;
  filter.to_ts = we;
  model::Merge merge(session, std::move(filter));
  merge.Run([&](const format::Event& e, model::StreamIndex i) { ConsumeAt(*loc_of[i], e); });
}

void Engine::Impl::MpiInit(uint32_t pid, const format::Event& e) {
  rank_of_pid[pid] = static_cast<int32_t>(e.args[0]);
  for (Loc& x : locs)
    if (x.pid == pid)
      x.rank = kRankNotLooked;
  world_size = std::max(world_size, static_cast<uint32_t>(e.args[1]));
  has_comm = true;
}

// A --from window that starts after MPI_Init still names its ranks: the MpiInit, MpiCommDef,
// ChanInfo and OmpRuntime events before the window are read (the program side's runtime streams
// only, in time order) for what they define; nothing else of them is counted.
void Engine::Impl::DefinitionsBeforeWindow() {
  if (ws <= session_start)
    return;
  model::MergeFilter filter;
  filter.sources = std::set<format::Source>{format::Source::kRuntime};
  filter.from_ts = session_start;
  filter.to_ts = ws - 1;
  model::Merge merge(session, std::move(filter));
  merge.Run([&](const format::Event& e, model::StreamIndex) {
    switch (e.kind_enum()) {
      case Kind::kMpiInit:
        MpiInit(session.PidOf(e.location), e);
        break;
      case Kind::kMpiCommDef:
        comm_size[e.args[0]] = static_cast<uint32_t>(e.args[1]);
        break;
      case Kind::kChanInfo:
        ChanInfo(session.PidOf(e.location), e);
        break;
      case Kind::kOmpRuntime:  // which OpenMP runtime a process runs
        omp.Consume(e.location, session.PidOf(e.location), session.TidOf(e.location), e);
        break;
      case Kind::kMpiEnter:  // the sites later MpiEnters of the same thread and function omit
        if (e.nargs > 1 && e.args[1] != 0)
          sites_before_window[uint64_t{e.location} << 32 | (e.args[0] & 0xffffffffu)] =
              static_cast<uint32_t>(e.args[1]);
        break;
      default:
        break;
    }
  });
}

// An MpiEnter's call site: its own, remembered for the thread and function, or, when it carries
// none (0), the one last remembered (docs/events.md, MpiEnter).
uint32_t Engine::Impl::MpiSite(Loc& l, uint32_t func, uint32_t site) {
  const uint32_t i = FuncIndex(func);
  if (i >= l.site_of_func.size())
    l.site_of_func.resize(func_list.size(), 0);
  uint32_t& known = l.site_of_func[i];  // the thread's site for func (0: none yet)
  if (known != 0) {
    if (site != 0)
      known = site;
    return known;
  }
  if (site == 0 && !sites_before_window.empty()) {
    auto it = sites_before_window.find(uint64_t{l.id} << 32 | func);
    if (it != sites_before_window.end())
      site = it->second;
  }
  known = site;
  return site;
}

// Growing window. A live session's end is unknown while it runs, and the report's interval
// length is picked from the window (AutoInterval: 1-2-5 x 10^k ns, at most kAutoIntervals of
// them). A growing engine bins into kGrowingIntervals intervals of g = 10^k ns instead, and when
// an event falls past them multiplies g by 10, adding each group of ten intervals into one.
// g only grows once the window holds 400 g, so the window's AutoInterval (more than a
// fortieth of it) is at least g, and being 1, 2 or 5 x 10^j with 10^j >= g, a multiple of it: a
// snapshot adds the fine intervals up into the report's intervals exactly (CloseWindow). Clipping
// at the window's end changes nothing meanwhile: every span the analyzers book ends at or before
// the event that closes it. Memory: the same records as a post-mortem engine, with rows of 400
// intervals instead of at most 40.
void Engine::Impl::Coarsen(uint64_t t) {
  while (t >= bins.end) {
    auto shrink = [](auto& row) {
      if (row.empty())
        return;
      using Cell = std::decay_t<decltype(row[0])>;
      for (size_t i = 0; i < kGrowingIntervals / 10; ++i) {
        Cell sum{};
        for (size_t j = 10 * i; j < 10 * i + 10 && j < row.size(); ++j) {
          if constexpr (std::is_same_v<Cell, StateTimes>) {
            for (int k = 0; k < kStateCount; ++k)
              sum[k] += row[j][k];
          } else {
            sum += row[j];
          }
        }
        row[i] = sum;
      }
      std::fill(row.begin() + std::min(row.size(), kGrowingIntervals / 10), row.end(), Cell{});
    };
    for (Loc& l : locs) {
      shrink(l.iv);
      shrink(l.iv_waits);
    }
    for (LinkAgg& a : links) {
      shrink(a.busy);
      shrink(a.bytes);
    }
    for (auto& [key, row] : endpoint_busy)
      shrink(row);
    iv_ns *= 10;
    we = ws + kGrowingIntervals * iv_ns;
    bins = Bins::Of(ws, we, iv_ns);
  }
}

void Engine::Impl::CloseWindow(uint64_t end) {
  const uint64_t fine = iv_ns;
  // The session as it stands now (its end grows; the END values come last).
  session_end = std::max(session.end(), session_start);
  we = std::max(end, ws);
  uint64_t length = AutoInterval(we - ws);
  if (length % fine != 0)  // a window shorter than the events fed (not a report's)
    length = (length / fine + 1) * fine;
  const size_t factor = static_cast<size_t>(length / fine);
  const Bins coarse = Bins::Of(ws, we, length);
  auto regroup = [&](auto& row) {
    if (row.empty())
      return;
    using Cell = std::decay_t<decltype(row[0])>;
    std::vector<Cell> out(coarse.count, Cell{});
    for (size_t j = 0; j < row.size(); ++j) {
      Cell& to = out[std::min(coarse.count - 1, j / factor)];
      if constexpr (std::is_same_v<Cell, StateTimes>) {
        for (int k = 0; k < kStateCount; ++k)
          to[k] += row[j][k];
      } else {
        to += row[j];
      }
    }
    row = std::move(out);
  };
  for (Loc& l : locs) {
    regroup(l.iv);
    regroup(l.iv_waits);
  }
  for (LinkAgg& a : links) {
    regroup(a.busy);
    regroup(a.bytes);
  }
  for (auto& [key, row] : endpoint_busy)
    regroup(row);
  iv_ns = length;
  bins = coarse;
  iv_count = coarse.count;
  // What the post-mortem engine sets up from the whole session at its start.
  for (const auto& [id, d] : defs.locations)
    LocFor(id);
  for (const auto& st : session.streams())
    if (st.source == format::Source::kSampler || st.source == format::Source::kSched)
      has_sched = true;
}

void Engine::ConsumeLive(const format::Event& e, model::StreamIndex s) {
  Impl& m = *impl_;
  if (e.ts < m.ws)
    return;
  if (e.ts >= m.bins.end) [[unlikely]]
    m.Coarsen(e.ts);
  if (s >= m.live_loc_of_stream.size())
    m.live_loc_of_stream.resize(s + 1, -1);
  int32_t& li = m.live_loc_of_stream[s];
  if (li < 0) [[unlikely]]
    li = m.LocFor(m.session.streams()[s].location);
  if (m.defs.switch_stops.size() != m.switch_stops_noted) [[unlikely]]
    m.NoteSwitchStops();
  m.ConsumeAt(m.locs[static_cast<size_t>(li)], e);
}

Results Engine::SnapshotUntil(uint64_t end) const {
  Impl copy(*impl_);
  copy.wait_rows.clear();
  copy.CloseWindow(end);
  return copy.Finish();
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

void Engine::BeginFeed() {
  impl_->PrepareFeed();
}

bool Engine::Feed(const format::Event& e, model::StreamIndex s) {
  if (s >= impl_->loc_of_stream.size() || !impl_->loc_of_stream[s]) [[unlikely]]
    return false;
  impl_->ConsumeAt(*impl_->loc_of_stream[s], e);
  return true;
}

StatusOr<Results> Analyze(const model::Session& session, const Options& options) {
  Engine engine(session, options);
  return engine.Run();
}

}  // namespace parmon::analysis
