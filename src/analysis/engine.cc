#include "analysis/engine.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "analysis/loop_clocks.h"

namespace parmon::analysis {

using format::Event;
using format::Kind;

const char* StateName(State s) {
  static const char* const kNames[kStateCount] = {
      "running", "runnable", "comm_wait", "lock_wait", "timer_wait", "io_wait", "other"};
  return kNames[static_cast<int>(s)];
}

const char* StateLabel(State s) {
  static const char* const kLabels[kStateCount] = {"run",   "queue", "comm", "lock",
                                                   "timer", "io",    "other"};
  return kLabels[static_cast<int>(s)];
}

uint64_t Sum(const StateTimes& t) {
  uint64_t n = 0;
  for (uint64_t v : t)
    n += v;
  return n;
}

int Results::LocationIndex(uint32_t id) const {
  for (size_t i = 0; i < locations.size(); ++i)
    if (locations[i].id == id)
      return static_cast<int>(i);
  return -1;
}

uint64_t AutoInterval(uint64_t window_ns) {
  // Round lengths 1-2-5 x 10^k ns, the smallest giving at most kAutoIntervals intervals.
  uint64_t step = 1000;  // 1 us at least
  for (;;) {
    for (uint64_t m : {1, 2, 5}) {
      uint64_t iv = step * m;
      if (window_ns / iv < kAutoIntervals)
        return iv;
    }
    step *= 10;
  }
}

std::string MpiFamily(const std::string& f) {
  std::string n = f;
  if (n.rfind("MPI_", 0) == 0 || n.rfind("PMPI_", 0) == 0)
    n = n.substr(n.find('_') + 1);
  std::string l;
  for (char c : n)
    l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto has = [&](const char* s) { return l.find(s) != std::string::npos; };
  auto starts = [&](const char* s) { return l.rfind(s, 0) == 0; };
  if (l == "init" || l == "init_thread" || l == "finalize")
    return "init";
  if (starts("file_"))
    return "io";
  if (starts("win_") || has("put") || has("get_accumulate") || l == "get" || l == "rget" ||
      has("accumulate") || l == "compare_and_swap" || l == "fetch_and_op")
    return "one-sided";
  if (starts("wait") || starts("test"))
    return "wait";
  if (l == "barrier" || l == "ibarrier" || has("bcast") || has("gather") || has("scatter") ||
      has("reduce") || has("alltoall") || l == "scan" || l == "exscan" || l == "iscan" ||
      l == "iexscan" || starts("neighbor_") || starts("ineighbor_") || has("barrier_init"))
    return "collective";
  if (has("send") || has("recv") || has("probe") || starts("start"))
    return "p2p";
  return "other";
}

bool IsNToN(const std::string& f) {
  std::string n = f.rfind("MPI_", 0) == 0 ? f.substr(4) : f;
  return n == "Barrier" || n == "Allreduce" || n == "Allgather" || n == "Allgatherv" ||
         n == "Alltoall" || n == "Alltoallv" || n == "Alltoallw" || n == "Reduce_scatter" ||
         n == "Reduce_scatter_block";
}

namespace {

constexpr uint64_t kNone = UINT64_MAX;
// Critical-path shares are tracked per location only up to this many locations (each message in
// flight carries a copy of the sender's share vector).
constexpr size_t kMaxShareLocations = 64;

State StateOfArg(int i) {
  // ThreadStates args: running, runnable, comm, lock, timer, io, stopped, other_wait.
  static const State kMap[8] = {State::kRunning,  State::kRunnable,  State::kCommWait,
                                State::kLockWait, State::kTimerWait, State::kIoWait,
                                State::kOther,    State::kOther};
  return kMap[i];
}

struct RegionAgg {
  uint64_t count = 0, inclusive = 0, exclusive = 0;
};

struct RegionFrame {
  uint32_t region;
  uint64_t enter;
  uint64_t child_ns;
};

using Shares = std::vector<uint64_t>;

// One MPI call that completed messages: a blocking send or receive, a Sendrecv, a Wait*/Test*
// completing nonblocking ones. It waited from its entry until the last partner it needed had
// arrived (a receive: its send started; a send: its receive was posted), within the call.
struct CallWaits {
  uint32_t loc = 0;  // index in locs
  uint32_t func = 0;
  uint64_t enter = 0;
  uint64_t leave = kNone;   // kNone while the call is open
  uint32_t unresolved = 0;  // sends of the call whose receive has not been seen yet
  bool done = false;
  struct Part {
    uint64_t end;  // when this message's partner arrived (clamped to the call at the end)
    size_t link;
    bool send;  // late receiver (a send) or late sender (a receive)
  };
  std::vector<Part> parts;
};

struct PendingSend {
  uint64_t ts = 0;
  uint32_t loc = 0;
  bool blocking = false;
  size_t link = 0;
  uint64_t cp = 0;
  std::shared_ptr<const Shares> shares;
  std::shared_ptr<const LoopClocks::Clock> clock;  // the sender's loop clock at the send
  // The call that completed the send (the blocking send itself, or the Wait*/Test* completing a
  // nonblocking one), and when the matching receive was posted (kNone until it is seen).
  std::shared_ptr<CallWaits> call;
  uint64_t recv_posted = kNone;
};

struct Loc {
  uint32_t id = 0;
  bool cpu = false;
  uint32_t pid = 0, tid = 0;
  uint64_t first = kNone, last = 0;
  uint64_t events = 0, lost = 0;
  bool sampled = false;
  StateTimes sampled_states{};
  StateTimes waits{};                    // inferred from instrumented calls
  uint64_t cpu_busy = 0, cpu_total = 0;  // cpu locations
  std::vector<StateTimes> iv;            // sampled states (or cpu busy/idle) per interval
  std::vector<StateTimes> iv_waits;      // inferred waits per interval
  // MPI
  bool in_mpi = false;
  uint64_t mpi_enter = 0;
  uint32_t mpi_func = 0;
  uint64_t mpi_ns = 0, mpi_calls = 0, mpi_init_ns = 0;
  std::map<std::string, CallFamilyStat> families;
  std::unordered_map<uint32_t, CallFamilyStat*> family_of_func;  // by MPI function string id
  std::vector<std::shared_ptr<PendingSend>> call_sends;
  std::shared_ptr<CallWaits> call_waits;  // of the open call, once it completes a message
  uint64_t messages_sent = 0, bytes_sent = 0, messages_received = 0, bytes_received = 0;
  uint64_t late_sender = 0, late_receiver = 0, barrier_wait = 0, collective_wait = 0;
  // Regions: dense table by region id (interned ids are small), stack of open regions.
  std::vector<RegionAgg> regions;
  std::vector<RegionFrame> stack;
  // Critical path (Hollingsworth's online algorithm): computation along the longest chain of
  // dependencies ending at this location's current time.
  uint64_t cp = 0;
  uint64_t cp_mark = kNone;  // computing since; kNone while waiting in a call
  std::shared_ptr<Shares> shares;
  uint64_t switches = 0, preempted = 0;
};

struct CollectiveInstance {
  std::vector<std::pair<uint32_t, uint64_t>> members;  // loc index, enter ts
  uint64_t max_enter = 0;
  uint64_t max_cp = 0;
  std::shared_ptr<const Shares> max_shares;
  uint32_t func = 0;
};

struct Endpoint {
  uint32_t type = 0;
  uint64_t local = 0, peer = 0;
  std::string description;
  struct Use {
    uint64_t calls = 0, bytes = 0, wait = 0;
    uint64_t closed_loop = 0;  // reads of this writer's data that closed a loop
  };
  std::map<uint32_t, Use> writers, readers;  // by loc index
  uint64_t last_write_cp = 0;
  std::shared_ptr<const Shares> last_write_shares;
  LoopClocks::Stream stream;  // of the bytes written here
};

struct LinkAgg {
  LinkResult r;
  std::vector<uint64_t> busy;   // per interval: ns either end spent in this link's calls
  std::vector<uint64_t> bytes;  // per interval
};

// One recorder's clock against rank 0's: offsets (this clock minus rank 0's) measured at the
// MpiClockSync epochs, keyed by the time on this clock, interpolated linearly between epochs
// and held constant before the first and after the last (docs/events.md, Clock alignment).
struct ClockMap {
  std::vector<std::pair<uint64_t, double>> samples;  // by time

  // The offset at t; *hint is the segment last used (times of a stream mostly go forward).
  double At(uint64_t t, size_t* hint) const {
    size_t n = samples.size();
    if (t <= samples.front().first)
      return samples.front().second;
    if (t >= samples.back().first)
      return samples.back().second;
    size_t i = *hint < n - 1 && samples[*hint].first <= t ? *hint : 0;
    while (samples[i + 1].first < t)
      ++i;
    *hint = i;
    const auto& [t0, o0] = samples[i];
    const auto& [t1, o1] = samples[i + 1];
    return o0 + (o1 - o0) * static_cast<double>(t - t0) / static_cast<double>(t1 - t0);
  }
  // t on rank 0's clock.
  uint64_t Apply(uint64_t t, size_t* hint) const {
    double v = static_cast<double>(t) - At(t, hint);
    return v <= 0 ? 0 : static_cast<uint64_t>(std::llround(v));
  }
};

struct FuncInfo {
  std::string name;
  std::string family;
  bool init = false;  // family "init"
  bool n_to_n = false;
  bool barrier = false;
};

}  // namespace

struct Engine::Impl {
  const format::TraceReader& reader;
  Options options;
  const format::Definitions& defs;
  uint64_t session_start = 0, session_end = 0;
  uint64_t ws = 0, we = 0;  // window
  uint64_t iv_ns = 1;
  size_t iv_count = 0;

  std::vector<Loc> locs;
  std::vector<int32_t> loc_index;  // by location id, -1 when absent
  std::unordered_map<uint32_t, int32_t> rank_of_pid;
  uint32_t world_size = 0;
  std::unordered_map<uint64_t, uint32_t> comm_size;
  std::unordered_map<uint32_t, FuncInfo> funcs;

  // (src, dst, comm, tag) -> sends not received yet, oldest first. A vector: nearly always one
  // message per key is in flight, and a deque costs two allocations where a vector costs one.
  std::map<std::tuple<int64_t, int64_t, uint64_t, uint64_t>,
           std::vector<std::shared_ptr<PendingSend>>>
      in_flight;
  // Nonblocking sends not completed yet, by (pid, request id): request ids are per process.
  std::map<std::pair<uint32_t, uint64_t>, std::shared_ptr<PendingSend>> open_sends;
  std::map<std::pair<int64_t, int64_t>, size_t> mpi_link_index;
  std::vector<LinkAgg> links;
  std::map<std::pair<uint64_t, uint32_t>, uint64_t> coll_seq;  // (comm, loc) -> count
  std::map<std::pair<uint64_t, uint64_t>, CollectiveInstance> collectives;
  std::map<std::tuple<uint32_t, std::string, uint32_t>, WaitStateResult> wait_states;
  // AddWaitCall's recent rows per location (a location waits in few calls): finding one costs a
  // pointer and a short string compare instead of building the map's key.
  struct WaitRow {
    const char* pattern;
    std::string call;
    WaitStateResult* row;
  };
  std::vector<std::vector<WaitRow>> wait_rows;

  std::map<std::pair<uint32_t, uint64_t>, std::string> fd_endpoint;  // (pid, fd) -> endpoint key
  std::map<std::string, Endpoint> endpoints;

  uint64_t events = 0, runtime_events = 0;
  bool has_sched = false, has_comm = false;
  bool track_shares = true;
  // Per file of a multi-recorder session: its clock against rank 0's (empty: no correction).
  std::vector<ClockMap> file_clocks;
  std::vector<ClockOffset> clock_offsets;
  LoopClocks loop_clocks;

  Impl(const format::TraceReader& r, const Options& o)
      : reader(r), options(o), defs(r.definitions()) {
    MeasureClocks();
    session_start = std::stoull(r.SessionValue("start_ts", "0"));
    if (session_start == 0 || session_start > r.first_ts())
      session_start = r.first_ts();
    if (r.first_ts() == UINT64_MAX)
      session_start = 0;
    session_end = std::stoull(r.SessionValue("end_ts", "0"));
    if (session_end < r.last_ts())
      session_end = r.last_ts();
    if (!file_clocks.empty()) {
      // Recorders' start and end times are on their own clocks: the session is the span of
      // its events on rank 0's.
      session_start = UINT64_MAX;
      session_end = 0;
      for (const auto& st : r.streams()) {
        if (st.source == format::Source::kDefinitions || st.events == 0)
          continue;
        session_start = std::min(session_start, Aligned(st, st.first_ts));
        session_end = std::max(session_end, Aligned(st, st.last_ts));
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
    iv_count = std::max<size_t>(1, static_cast<size_t>((we - ws + iv_ns - 1) / iv_ns));
    for (const auto& [id, d] : defs.locations)
      LocFor(id);
    for (const auto& s : r.streams())
      if (s.source == format::Source::kSampler || s.source == format::Source::kSched)
        has_sched = true;
    track_shares = locs.size() <= kMaxShareLocations;
  }

  // --- clocks -------------------------------------------------------------------------------
  // A session of several recorders (one file per rank, maybe on several hosts) has one clock
  // per file. The MpiClockSync ping-pongs between rank 0 and each rank give each file's offset
  // against rank 0 (docs/events.md); reading them costs one extra decoding pass over the
  // runtime streams, so it is done only when there are several files. One file has one clock.
  void MeasureClocks() {
    size_t files = reader.parts().size();
    if (!options.align_clocks || files < 2)
      return;
    struct Sync {
      uint32_t file;
      int64_t peer;
      uint64_t epoch, t_send, t_recv;
    };
    std::vector<Sync> syncs;
    std::vector<int64_t> file_rank(files, -1);
    format::DecodedChunk chunk;
    for (const auto& st : reader.streams()) {
      if (st.source != format::Source::kRuntime)
        continue;
      for (const auto& ref : st.chunks) {
        // A damaged chunk is recorded in reader.problems(); what decoded is still used.
        (void)reader.ReadChunk(ref, &chunk);
        for (const auto& e : chunk.events) {
          if (e.kind_enum() == Kind::kMpiInit) {
            auto rank = static_cast<int64_t>(e.args[0]);
            if (file_rank[ref.file] < 0 || rank < file_rank[ref.file])
              file_rank[ref.file] = rank;
          } else if (e.kind_enum() == Kind::kMpiClockSync) {
            syncs.push_back(
                {ref.file, static_cast<int64_t>(e.args[0]), e.args[1], e.args[2], e.args[3]});
          }
        }
      }
    }
    // Rank 0's side of each ping-pong, by (peer, epoch).
    std::map<std::pair<int64_t, uint64_t>, const Sync*> rank0;
    for (const auto& x : syncs)
      if (file_rank[x.file] == 0)
        rank0[{x.peer, x.epoch}] = &x;
    std::vector<ClockMap> clocks(files);
    for (const auto& x : syncs) {
      int64_t rank = file_rank[x.file];
      if (rank <= 0 || x.peer != 0)
        continue;
      auto it = rank0.find({rank, x.epoch});
      if (it == rank0.end())
        continue;
      const Sync& z = *it->second;
      auto d = [](uint64_t v) { return static_cast<double>(v); };
      double offset = (d(x.t_recv) + d(x.t_send) - d(z.t_send) - d(z.t_recv)) / 2;
      double uncertainty = ((d(z.t_recv) - d(z.t_send)) - (d(x.t_send) - d(x.t_recv))) / 2;
      // Within its own uncertainty an offset is noise: ranks sharing a clock always measure one.
      if (offset <= uncertainty && offset >= -uncertainty)
        offset = 0;
      clocks[x.file].samples.emplace_back(x.t_recv, offset);
    }
    bool any = false;
    for (uint32_t f = 0; f < files; ++f) {
      auto& v = clocks[f].samples;
      if (v.empty())
        continue;
      std::sort(v.begin(), v.end());
      clock_offsets.push_back(
          {static_cast<int32_t>(file_rank[f]), static_cast<int64_t>(std::llround(v.front().second)),
           static_cast<int64_t>(std::llround(v.back().second)), static_cast<uint32_t>(v.size())});
      bool zero = std::all_of(v.begin(), v.end(), [](const auto& p) { return p.second == 0; });
      if (zero)
        v.clear();
      any |= !zero;
    }
    std::sort(clock_offsets.begin(), clock_offsets.end(),
              [](const auto& a, const auto& b) { return a.rank < b.rank; });
    if (any)
      file_clocks = std::move(clocks);
  }
  // The clock correction of a stream's file, or null.
  const ClockMap* ClockOf(const format::Stream& st) const {
    if (file_clocks.empty() || st.chunks.empty())
      return nullptr;
    const ClockMap& c = file_clocks[st.chunks.front().file];
    return c.samples.empty() ? nullptr : &c;
  }
  uint64_t Aligned(const format::Stream& st, uint64_t t) const {
    size_t hint = 0;
    const ClockMap* c = ClockOf(st);
    return c ? c->Apply(t, &hint) : t;
  }

  int32_t LocFor(uint32_t id) {
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

  const FuncInfo& Func(uint32_t id) {
    auto it = funcs.find(id);
    if (it != funcs.end())
      return it->second;
    FuncInfo f;
    f.name = defs.Name(id);
    f.family = MpiFamily(f.name);
    f.init = f.family == "init";
    f.n_to_n = IsNToN(f.name);
    f.barrier = f.name == "MPI_Barrier";
    return funcs.emplace(id, std::move(f)).first->second;
  }

  // Adds [b, e) (clipped to the window) of state s to a per-interval row.
  void AddSpan(std::vector<StateTimes>& row, State s, uint64_t b, uint64_t e) {
    b = std::max(b, ws);
    e = std::min(e, we);
    if (e <= b)
      return;
    size_t i = static_cast<size_t>((b - ws) / iv_ns);
    while (b < e && i < iv_count) {
      uint64_t iv_end = ws + (i + 1) * iv_ns;
      uint64_t stop = std::min(e, iv_end);
      row[i][static_cast<int>(s)] += stop - b;
      b = stop;
      ++i;
    }
  }
  // Adds a quantity spread evenly over [b, e) (clipped) to a per-interval row of one state.
  void AddSpread(std::vector<StateTimes>& row, State s, uint64_t amount, uint64_t b, uint64_t e) {
    if (e <= b) {
      if (e >= ws && e < we)
        row[std::min(iv_count - 1, static_cast<size_t>((e - ws) / iv_ns))][static_cast<int>(s)] +=
            amount;
      return;
    }
    double per_ns = static_cast<double>(amount) / static_cast<double>(e - b);
    uint64_t cb = std::max(b, ws), ce = std::min(e, we);
    if (ce <= cb)
      return;
    size_t i = static_cast<size_t>((cb - ws) / iv_ns);
    while (cb < ce && i < iv_count) {
      uint64_t stop = std::min(ce, ws + (i + 1) * iv_ns);
      row[i][static_cast<int>(s)] +=
          static_cast<uint64_t>(std::llround(per_ns * static_cast<double>(stop - cb)));
      cb = stop;
      ++i;
    }
  }
  // The part of [b, e) inside the window.
  uint64_t Clip(uint64_t b, uint64_t e) const {
    b = std::max(b, ws);
    e = std::min(e, we);
    return e > b ? e - b : 0;
  }

  int32_t RankOf(const Loc& l) const {
    auto it = rank_of_pid.find(l.pid);
    return it == rank_of_pid.end() ? -1 : it->second;
  }

  // --- critical path -------------------------------------------------------------------------
  void Accrue(Loc& l, uint64_t t) {
    if (l.cp_mark == kNone || t <= l.cp_mark) {
      if (l.cp_mark != kNone)
        l.cp_mark = std::max(l.cp_mark, t);
      return;
    }
    uint64_t d = Clip(l.cp_mark, t);
    l.cp += d;
    if (track_shares && d) {
      Own(l);
      (*l.shares)[static_cast<size_t>(&l - locs.data())] += d;
    }
    l.cp_mark = t;
  }
  void Own(Loc& l) {
    if (!l.shares)
      l.shares = std::make_shared<Shares>(locs.size(), 0);
    else if (l.shares.use_count() > 1)
      l.shares = std::make_shared<Shares>(*l.shares);
    if (l.shares->size() < locs.size())
      l.shares->resize(locs.size(), 0);
  }
  std::shared_ptr<const Shares> Snapshot(Loc& l) {
    if (!track_shares)
      return nullptr;
    Own(l);
    // Copy-on-write: the snapshot and the location share one vector until either changes.
    return l.shares;
  }
  void Adopt(Loc& l, uint64_t cp, const std::shared_ptr<const Shares>& shares) {
    if (cp <= l.cp)
      return;
    l.cp = cp;
    if (track_shares && shares)
      l.shares = std::make_shared<Shares>(*shares);
  }

  // --- wait states ---------------------------------------------------------------------------
  void AddWaitCall(const char* pattern, uint32_t loc_index, const std::string& call, uint64_t ns) {
    if (!ns)
      return;
    if (wait_rows.size() <= loc_index)
      wait_rows.resize(loc_index + 1);
    for (WaitRow& r : wait_rows[loc_index])
      if (r.pattern == pattern && r.call == call) {
        ++r.row->instances;
        r.row->ns += ns;
        return;
      }
    auto key = std::make_tuple(loc_index, std::string(pattern) + "\x1f" + call, 0u);
    auto& w = wait_states[key];
    if (wait_rows[loc_index].size() < 16)
      wait_rows[loc_index].push_back({pattern, call, &w});
    if (w.instances == 0) {
      w.pattern = pattern;
      w.location = locs[loc_index].id;
      w.call = call;
    }
    ++w.instances;
    w.ns += ns;
  }

  size_t MpiLink(int64_t from, int64_t to) {
    auto [it, inserted] = mpi_link_index.emplace(std::make_pair(from, to), links.size());
    if (inserted) {
      LinkAgg a;
      a.r.kind = "mpi";
      a.r.from = from;
      a.r.to = to;
      a.busy.resize(iv_count);
      a.bytes.resize(iv_count);
      links.push_back(std::move(a));
    }
    return it->second;
  }
  void LinkBusy(LinkAgg& a, uint64_t b, uint64_t e) {
    b = std::max(b, ws);
    e = std::min(e, we);
    size_t i = b < e ? static_cast<size_t>((b - ws) / iv_ns) : 0;
    while (b < e && i < iv_count) {
      uint64_t stop = std::min(e, ws + (i + 1) * iv_ns);
      a.busy[i] += stop - b;
      b = stop;
      ++i;
    }
  }
  size_t IntervalOf(uint64_t t) const {
    if (t <= ws)
      return 0;
    return std::min(iv_count - 1, static_cast<size_t>((t - ws) / iv_ns));
  }

  // --- events --------------------------------------------------------------------------------
  void Consume(const Event& e) {
    if (e.ts < ws || e.ts > we)
      return;
    ConsumeAt(locs[LocFor(e.location)], e);
  }
  // l is e's location, resolved by the caller (once per stream in Run).
  void ConsumeAt(Loc& l, const Event& e) {
    ++events;
    ++l.events;
    if (l.first == kNone) {
      l.first = e.ts;
      l.cp_mark = e.ts;
    }
    l.last = e.ts;
    if (e.source == format::Source::kRuntime)
      ++runtime_events;
    switch (e.kind_enum()) {
      case Kind::kRegionEnter:
        l.stack.push_back({static_cast<uint32_t>(e.args[0]), e.ts, 0});
        break;
      case Kind::kRegionLeave:
        RegionLeave(l, static_cast<uint32_t>(e.args[0]), e.ts);
        break;
      case Kind::kLost:
      case Kind::kRingLost:
        l.lost += e.args[0];
        break;
      case Kind::kMpiInit:
        rank_of_pid[l.pid] = static_cast<int32_t>(e.args[0]);
        world_size = std::max(world_size, static_cast<uint32_t>(e.args[1]));
        has_comm = true;
        break;
      case Kind::kMpiCommDef:
        comm_size[e.args[0]] = static_cast<uint32_t>(e.args[1]);
        break;
      case Kind::kMpiEnter:
        if (l.call_waits) {  // the previous call's leave is missing (lost)
          l.call_waits->leave = e.ts;
          FinishCall(*l.call_waits);
          l.call_waits.reset();
        }
        l.call_sends.clear();
        Accrue(l, e.ts);
        l.cp_mark = kNone;
        l.in_mpi = true;
        l.mpi_enter = e.ts;
        l.mpi_func = static_cast<uint32_t>(e.args[0]);
        has_comm = true;
        break;
      case Kind::kMpiLeave:
        MpiLeave(l, e);
        break;
      case Kind::kMpiSend:
        MpiSend(l, e);
        break;
      case Kind::kMpiRecv:
        MpiRecv(l, e);
        break;
      case Kind::kMpiRequestDone:
        MpiRequestDone(l, e);
        break;
      case Kind::kMpiCollective:
        MpiCollective(l, e);
        break;
      case Kind::kChanInfo:
        ChanInfo(l, e);
        break;
      case Kind::kChanRead:
      case Kind::kChanWrite:
        ChanIo(l, e);
        break;
      case Kind::kChanWait:
        BlockingCall(l, State::kCommWait, e.args[3], e.ts);
        break;
      case Kind::kSyncWait:
        BlockingCall(l, State::kLockWait, e.args[2], e.ts);
        break;
      case Kind::kTimerWait:
        BlockingCall(l, State::kTimerWait, e.args[2], e.ts);
        break;
      case Kind::kThreadStates: {
        uint64_t total = 0;
        for (int i = 0; i < 8; ++i)
          total += e.args[i];
        uint64_t begin = e.ts > total ? e.ts - total : 0;
        // Clip a sample that straddles the window's start proportionally.
        uint64_t inside = Clip(begin, e.ts);
        for (int i = 0; i < 8; ++i) {
          if (!e.args[i])
            continue;
          uint64_t part = total ? static_cast<uint64_t>(std::llround(
                                      static_cast<double>(e.args[i]) * static_cast<double>(inside) /
                                      static_cast<double>(total)))
                                : 0;
          l.sampled_states[static_cast<int>(StateOfArg(i))] += part;
          AddSpread(l.iv, StateOfArg(i), e.args[i], begin, e.ts);
        }
        l.sampled = true;
        if (begin < l.first)
          l.first = std::max(begin, ws);
        has_sched = true;
        break;
      }
      case Kind::kCpuSample: {
        uint64_t busy = e.args[0];
        uint64_t total = e.args[0] + e.args[1] + e.args[2] + e.args[3];
        uint64_t begin = e.ts > total ? e.ts - total : 0;
        l.cpu_busy += busy;
        l.cpu_total += total;
        AddSpread(l.iv, State::kRunning, busy, begin, e.ts);
        AddSpread(l.iv, State::kOther, total - busy, begin, e.ts);
        has_sched = true;
        break;
      }
      case Kind::kSwitchOut:
        ++l.switches;
        l.preempted += e.args[1] != 0;
        has_sched = true;
        break;
      case Kind::kSwitchCounts:
        l.switches += e.args[0];
        l.preempted += e.args[1];
        has_sched = true;
        break;
      default:
        break;
    }
  }

  void RegionLeave(Loc& l, uint32_t region, uint64_t ts) {
    // Unwind to the matching enter (a leave without enter, e.g. before the window, is ignored).
    while (!l.stack.empty()) {
      RegionFrame f = l.stack.back();
      l.stack.pop_back();
      uint64_t incl = ts - f.enter;
      if (f.region >= l.regions.size())
        l.regions.resize(std::max<size_t>(f.region + 1, l.regions.size() * 2));
      RegionAgg& a = l.regions[f.region];
      ++a.count;
      a.inclusive += incl;
      a.exclusive += incl > f.child_ns ? incl - f.child_ns : 0;
      if (!l.stack.empty())
        l.stack.back().child_ns += incl;
      if (f.region == region)
        break;
    }
  }

  void AddWaitState(Loc& l, State s, uint64_t b, uint64_t e) {
    uint64_t d = Clip(b, e);
    if (!d || l.cpu)
      return;
    l.waits[static_cast<int>(s)] += d;
    AddSpan(l.iv_waits, s, b, e);
  }

  void BlockingCall(Loc& l, State s, uint64_t begin, uint64_t end) {
    if (l.in_mpi)
      return;  // the MPI call already counts this time
    if (begin > end)
      begin = end;
    Accrue(l, begin);
    AddWaitState(l, s, begin, end);
    l.cp_mark = end;
  }

  [[gnu::noinline]] void MpiLeave(Loc& l, const Event& e) {
    if (!l.in_mpi)
      return;  // entered before the window
    l.in_mpi = false;
    const FuncInfo& f = Func(l.mpi_func);
    uint64_t d = Clip(l.mpi_enter, e.ts);
    l.mpi_ns += d;
    ++l.mpi_calls;
    if (f.init)
      l.mpi_init_ns += d;
    CallFamilyStat*& cached = l.family_of_func[l.mpi_func];
    if (!cached) {
      cached = &l.families[f.family];  // map nodes stay put
      cached->family = f.family;
    }
    CallFamilyStat& fam = *cached;
    ++fam.calls;
    fam.ns += d;
    AddWaitState(l, State::kCommWait, l.mpi_enter, e.ts);
    // The call's time is link time of the sends it completed (a blocking send, or nonblocking
    // ones completed in a Wait*/Test*); a nonblocking send's own call is not.
    for (auto& s : l.call_sends) {
      LinkAgg& a = links[s->link];
      uint64_t from = std::max(s->ts, l.mpi_enter);
      a.r.time_ns += Clip(from, e.ts);
      LinkBusy(a, from, e.ts);
    }
    l.call_sends.clear();
    if (l.call_waits) {
      l.call_waits->leave = e.ts;
      FinishCall(*l.call_waits);
      l.call_waits.reset();
    }
    l.cp_mark = e.ts;
  }

  // The record of the open MPI call's message waits, created when it first completes one.
  CallWaits& CurrentCall(Loc& l) {
    if (!l.call_waits) {
      l.call_waits = std::make_shared<CallWaits>();
      l.call_waits->loc = static_cast<uint32_t>(&l - locs.data());
      l.call_waits->func = l.mpi_func;
      l.call_waits->enter = l.mpi_enter;
    }
    return *l.call_waits;
  }

  // A call's waits, once it has returned and the receive of every send it completed is known.
  // Every message's wait starts at the call's entry (a receive was posted, a send started, at
  // or before it) and ends when its partner arrived; the call waited until the last of them.
  // Sorted by that end, each message is charged the stretch from the previous end to its own:
  // the time the call waited for it alone, so the charges add up to the call's wait.
  [[gnu::noinline]] void FinishCall(CallWaits& c) {
    if (c.done || c.leave == kNone || c.unresolved > 0)
      return;
    c.done = true;
    std::sort(c.parts.begin(), c.parts.end(),
              [](const CallWaits::Part& a, const CallWaits::Part& b) { return a.end < b.end; });
    uint64_t prev = c.enter, late_sender = 0, late_receiver = 0;
    for (const auto& p : c.parts) {
      uint64_t end = std::min(std::max(p.end, c.enter), c.leave);
      uint64_t w = end > prev ? Clip(prev, end) : 0;
      prev = std::max(prev, end);
      if (!w)
        continue;
      LinkAgg& a = links[p.link];
      (p.send ? a.r.sender_wait_ns : a.r.receiver_wait_ns) += w;
      a.r.wait_ns += w;
      (p.send ? late_receiver : late_sender) += w;
    }
    Loc& l = locs[c.loc];
    const std::string& call = Func(c.func).name;
    l.late_sender += late_sender;
    l.late_receiver += late_receiver;
    AddWaitCall("late sender", c.loc, call, late_sender);
    AddWaitCall("late receiver", c.loc, call, late_receiver);
    c.parts.clear();
  }

  [[gnu::noinline]] void MpiSend(Loc& l, const Event& e) {
    int32_t rank = RankOf(l);
    int64_t peer = static_cast<int64_t>(e.args[0]);
    auto s = std::make_shared<PendingSend>();
    s->ts = e.ts;
    s->loc = static_cast<uint32_t>(&l - locs.data());
    s->blocking = e.args[4] == 0;
    s->link = MpiLink(rank, peer);
    s->cp = l.cp + (l.cp_mark != kNone && e.ts > l.cp_mark ? Clip(l.cp_mark, e.ts) : 0);
    s->shares = Snapshot(l);
    s->clock = loop_clocks.Send(s->loc);
    LinkAgg& a = links[s->link];
    ++a.r.messages;
    a.r.bytes += e.args[3];
    a.bytes[IntervalOf(e.ts)] += e.args[3];
    ++l.messages_sent;
    l.bytes_sent += e.args[3];
    in_flight[{rank, peer, e.args[2], e.args[1]}].push_back(s);
    if (s->blocking && l.in_mpi) {
      ++CurrentCall(l).unresolved;
      s->call = l.call_waits;
      l.call_sends.push_back(s);
    } else if (!s->blocking) {
      open_sends[{l.pid, e.args[4]}] = s;
    }
    has_comm = true;
  }

  // A nonblocking send (or collective, RMA request: not in open_sends) completed in this call.
  [[gnu::noinline]] void MpiRequestDone(Loc& l, const Event& e) {
    auto it = open_sends.find({l.pid, e.args[0]});
    if (it == open_sends.end())
      return;
    std::shared_ptr<PendingSend> s = std::move(it->second);
    open_sends.erase(it);
    if (!l.in_mpi)
      return;
    CallWaits& c = CurrentCall(l);
    s->call = l.call_waits;
    l.call_sends.push_back(s);
    if (s->recv_posted != kNone)
      c.parts.push_back({s->recv_posted, s->link, true});
    else
      ++c.unresolved;
  }

  [[gnu::noinline]] void MpiRecv(Loc& l, const Event& e) {
    int32_t rank = RankOf(l);
    int64_t peer = static_cast<int64_t>(e.args[0]);
    uint64_t posted = std::min(e.args[5], e.ts);
    ++l.messages_received;
    l.bytes_received += e.args[3];
    has_comm = true;
    auto it = in_flight.find({peer, rank, e.args[2], e.args[1]});
    if (it == in_flight.end() || it->second.empty())
      return;  // its send is outside the window
    std::shared_ptr<PendingSend> s = std::move(it->second.front());
    it->second.erase(it->second.begin());
    if (it->second.empty())
      in_flight.erase(it);
    LinkAgg& a = links[s->link];
    // The receive's link time is the completing call's (for MPI_Recv it was posted at entry; a
    // nonblocking receive completes in a Wait*/Test* entered after it was posted).
    uint64_t from = l.in_mpi ? std::max(posted, l.mpi_enter) : posted;
    a.r.time_ns += Clip(from, e.ts);
    LinkBusy(a, from, e.ts);
    // Late sender: the call waited from its entry until the send started.
    if (l.in_mpi) {
      CurrentCall(l).parts.push_back({std::min(s->ts, e.ts), s->link, false});
    } else if (s->ts > posted) {
      uint64_t late_sender = Clip(posted, std::min(s->ts, e.ts));
      l.late_sender += late_sender;
      AddWaitCall("late sender", static_cast<uint32_t>(&l - locs.data()), "MPI", late_sender);
      a.r.receiver_wait_ns += late_sender;
      a.r.wait_ns += late_sender;
    }
    // Late receiver: the call completing the send waited until this receive was posted.
    if (s->call) {
      s->call->parts.push_back({posted, s->link, true});
      --s->call->unresolved;
      FinishCall(*s->call);
    } else {
      s->recv_posted = posted;  // a nonblocking send not completed yet
    }
    if (loop_clocks.Receive(static_cast<size_t>(&l - locs.data()), s->clock))
      ++a.r.closed_loop_messages;
    Adopt(l, s->cp, s->shares);
  }

  [[gnu::noinline]] void MpiCollective(Loc& l, const Event& e) {
    has_comm = true;
    if (e.args[5] != 0 || !l.in_mpi)
      return;  // nonblocking: the wait is in Wait*, not here
    const FuncInfo& f = Func(static_cast<uint32_t>(e.args[0]));
    if (!f.n_to_n)
      return;
    uint64_t comm = e.args[1];
    uint32_t size = comm == 1 ? world_size : 0;
    if (auto it = comm_size.find(comm); it != comm_size.end())
      size = it->second;
    if (size < 2)
      return;
    uint32_t li = static_cast<uint32_t>(&l - locs.data());
    uint64_t seq = coll_seq[{comm, li}]++;
    CollectiveInstance& c = collectives[{comm, seq}];
    c.func = static_cast<uint32_t>(e.args[0]);
    c.members.push_back({li, l.mpi_enter});
    if (l.mpi_enter >= c.max_enter)
      c.max_enter = l.mpi_enter;
    if (l.cp >= c.max_cp) {
      c.max_cp = l.cp;
      c.max_shares = Snapshot(l);
    }
    if (c.members.size() < size)
      return;
    // Everyone has arrived: each member waited from its entry until the last one entered.
    for (auto [mi, enter] : c.members) {
      Loc& m = locs[mi];
      uint64_t w = Clip(enter, c.max_enter);
      if (f.barrier) {
        m.barrier_wait += w;
        AddWaitCall("wait at barrier", mi, f.name, w);
      } else {
        m.collective_wait += w;
        AddWaitCall("wait at N-to-N", mi, f.name, w);
      }
      Adopt(m, c.max_cp, c.max_shares);
    }
    collectives.erase({comm, seq});
  }

  static std::string EndpointKey(uint32_t pid,
                                 uint64_t fd,
                                 uint64_t type,
                                 uint64_t local,
                                 uint64_t peer) {
    if (local == 0)
      return fmt::format("fd:{}:{}", pid, fd);
    if (type == 1 || type == 2)
      return fmt::format("pipe:{}", local);
    return fmt::format("sock:{}:{}:{}", type, local, peer);
  }
  static std::string PeerKey(const std::string& key, const Endpoint& ep) {
    if (key.rfind("sock:", 0) == 0 && ep.peer != 0)
      return fmt::format("sock:{}:{}:{}", ep.type, ep.peer, ep.local);
    return key;
  }

  [[gnu::noinline]] void ChanInfo(Loc& l, const Event& e) {
    std::string key = EndpointKey(l.pid, e.args[0], e.args[1], e.args[2], e.args[3]);
    Endpoint& ep = endpoints[key];
    ep.type = static_cast<uint32_t>(e.args[1]);
    ep.local = e.args[2];
    ep.peer = e.args[3];
    if (ep.description.empty())
      ep.description = std::string(e.payload);
    fd_endpoint[{l.pid, e.args[0]}] = key;
  }

  [[gnu::noinline]] void ChanIo(Loc& l, const Event& e) {
    has_comm = true;
    bool write = e.kind_enum() == Kind::kChanWrite;
    uint64_t begin = std::min(e.args[2], e.ts);
    int64_t bytes = static_cast<int64_t>(e.args[1]);
    uint32_t li = static_cast<uint32_t>(&l - locs.data());
    uint64_t wait = Clip(begin, e.ts);
    if (!l.in_mpi) {
      Accrue(l, begin);
      AddWaitState(l, State::kCommWait, begin, e.ts);
      l.cp_mark = e.ts;
    }
    auto fit = fd_endpoint.find({l.pid, e.args[0]});
    std::string key =
        fit != fd_endpoint.end() ? fit->second : EndpointKey(l.pid, e.args[0], 0, 0, 0);
    Endpoint& ep = endpoints[key];
    auto& use = write ? ep.writers[li] : ep.readers[li];
    ++use.calls;
    use.wait += wait;
    if (bytes > 0)
      use.bytes += static_cast<uint64_t>(bytes);
    if (write) {
      if (bytes > 0) {
        ++l.messages_sent;
        l.bytes_sent += static_cast<uint64_t>(bytes);
      }
      ep.last_write_cp = l.cp;
      ep.last_write_shares = Snapshot(l);
      if (bytes > 0)
        loop_clocks.StreamWrite(ep.stream, li, static_cast<uint64_t>(bytes),
                                [&](uint32_t w) { ++ep.writers[w].closed_loop; });
    } else if (bytes > 0) {
      ++l.messages_received;
      l.bytes_received += static_cast<uint64_t>(bytes);
      auto pit = endpoints.find(PeerKey(key, ep));
      if (pit != endpoints.end()) {
        Adopt(l, pit->second.last_write_cp, pit->second.last_write_shares);
        Endpoint& from = pit->second;
        loop_clocks.StreamRead(from.stream, li, static_cast<uint64_t>(bytes),
                               [&](uint32_t w) { ++from.writers[w].closed_loop; });
      }
      // Blocking time of a read that returned data is waiting for the writer (an empty channel).
    }
    const char* fname = write ? "write" : "read";
    std::string call = defs.Name(static_cast<uint32_t>(e.args[3]));
    if (call.empty() || call[0] == '#')
      call = fname;
    // A blocked channel call is a wait for the partner: the writer waits on a full channel (the
    // reader is late), the reader on an empty one (the writer is late).
    if (wait > 0)
      AddWaitCall(write ? "blocked send" : "blocked receive", li, call, wait);
    pending_channel_busy.push_back({key, li, write, begin, e.ts});
    if (pending_channel_busy.size() > 4096)
      FlushChannelBusy();
  }

  // Channel calls are attributed to links only at the end (the link needs both ends known), but
  // their per-interval busy time is folded into per-endpoint rows as they come.
  struct ChannelCall {
    std::string key;
    uint32_t loc;
    bool write;
    uint64_t begin, end;
  };
  std::vector<ChannelCall> pending_channel_busy;
  std::map<std::pair<std::string, uint32_t>, std::vector<uint64_t>> endpoint_busy;  // (key, loc)
  std::map<std::pair<std::string, uint32_t>, std::vector<uint64_t>> endpoint_bytes;
  void FlushChannelBusy() {
    for (const auto& c : pending_channel_busy) {
      auto& row = endpoint_busy[{c.key + (c.write ? ">w" : ">r"), c.loc}];
      if (row.empty())
        row.resize(iv_count);
      uint64_t b = std::max(c.begin, ws), e = std::min(c.end, we);
      size_t i = b < e ? static_cast<size_t>((b - ws) / iv_ns) : 0;
      while (b < e && i < iv_count) {
        uint64_t stop = std::min(e, ws + (i + 1) * iv_ns);
        row[i] += stop - b;
        b = stop;
        ++i;
      }
    }
    pending_channel_busy.clear();
  }

  std::string Label(const Loc& l) const {
    if (l.cpu) {
      auto it = defs.locations.find(l.id);
      return it != defs.locations.end() && !it->second.name.empty() ? it->second.name
                                                                    : fmt::format("cpu{}", l.tid);
    }
    int32_t rank = RankOf(l);
    std::string name;
    if (auto it = defs.locations.find(l.id); it != defs.locations.end())
      name = it->second.name;
    if (rank >= 0) {
      // The rank's main thread is "rank r"; its other threads carry their tid.
      if (l.tid == l.pid || l.tid == 0)
        return fmt::format("rank {}", rank);
      return fmt::format("rank {} tid {}", rank, l.tid);
    }
    if (name.empty())
      return fmt::format("tid {}", l.tid);
    return fmt::format("{} ({})", name, l.tid);
  }

  Results Finish();
  Results Run();
};

Results Engine::Impl::Finish() {
  FlushChannelBusy();
  // Calls still open at the end of the window, and calls whose sends were never received in it:
  // what they waited for what was seen.
  auto flush = [&](const std::shared_ptr<CallWaits>& c) {
    if (!c || c->done)
      return;
    c->unresolved = 0;
    if (c->leave == kNone)
      c->leave = locs[c->loc].last;
    FinishCall(*c);
  };
  for (auto& [key, queue] : in_flight)
    for (auto& s : queue)
      flush(s->call);
  for (auto& l : locs)
    flush(l.call_waits);
  Results res;
  Summary& s = res.summary;
  s.file = reader.path();
  s.command = reader.SessionValue("command");
  s.host = reader.SessionValue("host");
  s.format_version = fmt::format("{}.{}", reader.version_major(), reader.version_minor());
  s.closed_cleanly = reader.closed_cleanly();
  s.session_start = session_start;
  s.session_end = session_end;
  s.window_start = ws;
  s.window_end = we;
  s.duration_ns = we - ws;
  s.exit_code = std::stoi(reader.SessionValue("exit_code", "-1"));
  s.processes = static_cast<uint32_t>(defs.processes.size());
  s.cpus = static_cast<uint32_t>(std::stoul(reader.SessionValue("cpus", "0")));
  s.events = events;
  s.unattached_lost_events = std::stoull(reader.SessionValue("unattached_lost_events", "0"));
  s.overwritten_events = std::stoull(reader.SessionValue("overwritten_events", "0"));
  for (const auto& p : reader.problems()) {
    s.problems.push_back(p.message);
    if (p.events_lost > 0)
      s.damaged_events += static_cast<uint64_t>(p.events_lost);
  }
  s.recorder_cpu_ns = std::stoull(reader.SessionValue("recorder_cpu_ns", "0"));
  s.program_cpu_ns = std::stoull(reader.SessionValue("children_cpu_ns", "0"));
  std::string cost = reader.SessionValue("event_cost_ns");
  if (!cost.empty()) {
    s.event_cost_ns = std::stod(cost);
    s.event_cost_source = "measured";
  } else {
    s.event_cost_ns = options.default_event_cost_ns;
    s.event_cost_source = "estimate";
  }
  s.in_thread_overhead_ns =
      static_cast<uint64_t>(std::llround(s.event_cost_ns * static_cast<double>(runtime_events)));
  s.has_sched = has_sched;
  s.has_comm = has_comm;
  s.clock_offsets = clock_offsets;
  s.clocks_aligned = !file_clocks.empty();

  // Locations: threads (pid, tid order), then CPUs. Locations with no events in the window and
  // no definition-time presence are dropped.
  std::vector<size_t> order;
  for (size_t i = 0; i < locs.size(); ++i)
    if (locs[i].events > 0)
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Loc& x = locs[a];
    const Loc& y = locs[b];
    if (x.cpu != y.cpu)
      return !x.cpu;
    int32_t rx = RankOf(x), ry = RankOf(y);
    if (rx != ry)
      return (rx < 0 ? INT32_MAX : rx) < (ry < 0 ? INT32_MAX : ry);
    if (x.pid != y.pid)
      return x.pid < y.pid;
    return x.tid < y.tid;
  });
  std::vector<int> result_index(locs.size(), -1);
  std::map<int32_t, bool> ranks;
  auto& iv = res.intervals;
  iv.interval_ns = iv_ns;
  iv.window_start = ws;
  iv.count = iv_count;
  for (size_t oi : order) {
    Loc& l = locs[oi];
    Accrue(l, l.last);
    LocationResult r;
    r.id = l.id;
    r.kind = l.cpu ? "cpu" : "thread";
    r.pid = l.pid;
    r.tid = l.tid;
    r.rank = RankOf(l);
    if (auto it = defs.locations.find(l.id); it != defs.locations.end())
      r.name = it->second.name;
    r.label = Label(l);
    r.first_ts = l.first;
    r.last_ts = l.last;
    r.wall_ns = l.last > l.first ? l.last - l.first : 0;
    r.events = l.events;
    r.lost_events = l.lost;
    std::vector<StateTimes> row(iv_count);
    if (l.cpu) {
      r.states[static_cast<int>(State::kRunning)] = l.cpu_busy;
      r.states[static_cast<int>(State::kOther)] = l.cpu_total - l.cpu_busy;
      r.cpu_ns = l.cpu_busy;
      r.state_source = "sampled";
      row = l.iv;
    } else if (l.sampled) {
      r.states = l.sampled_states;
      r.state_source = "sampled";
      r.cpu_ns = l.sampled_states[static_cast<int>(State::kRunning)];
      r.wall_ns = std::max(r.wall_ns, Sum(l.sampled_states));
      row = l.iv;
    } else {
      // Inferred: the location's life minus the instrumented waits is running.
      r.states = l.waits;
      uint64_t waits = Sum(l.waits);
      r.states[static_cast<int>(State::kRunning)] = r.wall_ns > waits ? r.wall_ns - waits : 0;
      r.cpu_ns = 0;  // unknown without the sampler
      for (size_t i = 0; i < iv_count; ++i) {
        uint64_t b = ws + i * iv_ns, e = std::min(we, b + iv_ns);
        uint64_t alive = 0;
        if (l.last > l.first) {
          uint64_t ab = std::max(b, l.first), ae = std::min(e, l.last);
          alive = ae > ab ? ae - ab : 0;
        }
        row[i] = l.iv_waits[i];
        uint64_t w = Sum(row[i]);
        row[i][static_cast<int>(State::kRunning)] = alive > w ? alive - w : 0;
      }
    }
    r.messages_sent = l.messages_sent;
    r.bytes_sent = l.bytes_sent;
    r.messages_received = l.messages_received;
    r.bytes_received = l.bytes_received;
    r.mpi_ns = l.mpi_ns;
    r.mpi_calls = l.mpi_calls;
    r.mpi_init_ns = l.mpi_init_ns;
    for (auto& [name, f] : l.families)
      r.mpi_families.push_back(f);
    std::sort(r.mpi_families.begin(), r.mpi_families.end(), [](const auto& a, const auto& b) {
      return a.ns != b.ns ? a.ns > b.ns : a.family < b.family;
    });
    // Regions still open at the end of the window count up to the location's last event.
    while (!l.stack.empty())
      RegionLeave(l, l.stack.front().region, l.last);
    for (size_t id = 0; id < l.regions.size(); ++id) {
      const RegionAgg& a = l.regions[id];
      if (!a.count)
        continue;
      r.top_regions.push_back(
          {defs.Name(static_cast<uint32_t>(id)), a.count, a.inclusive, a.exclusive});
    }
    std::sort(r.top_regions.begin(), r.top_regions.end(), [](const auto& a, const auto& b) {
      return a.inclusive_ns != b.inclusive_ns ? a.inclusive_ns > b.inclusive_ns : a.name < b.name;
    });
    if (r.top_regions.size() > options.top_regions)
      r.top_regions.resize(options.top_regions);
    r.late_sender_ns = l.late_sender;
    r.late_receiver_ns = l.late_receiver;
    r.barrier_wait_ns = l.barrier_wait;
    r.collective_wait_ns = l.collective_wait;
    uint64_t waited = Sum(l.waits);
    if (l.sampled) {
      uint64_t not_running = 0;
      for (int st = 1; st < kStateCount; ++st)
        not_running += l.sampled_states[st];
      waited = std::max(waited, not_running);
    }
    r.compute_ns = l.cpu ? l.cpu_busy : (r.wall_ns > waited ? r.wall_ns - waited : 0);
    if (!l.cpu) {
      ++(r.rank >= 0 ? s.ranks : s.threads);
      if (r.rank >= 0)
        ranks[r.rank] = true;
    }
    result_index[oi] = static_cast<int>(res.locations.size());
    iv.location_states.push_back(row);
    std::vector<double> util(iv_count);
    for (size_t i = 0; i < iv_count; ++i) {
      uint64_t b = ws + i * iv_ns, e = std::min(we, b + iv_ns);
      uint64_t len = e > b ? e - b : 1;
      util[i] =
          static_cast<double>(row[i][static_cast<int>(State::kRunning)]) / static_cast<double>(len);
      util[i] = std::min(1.0, util[i]);
    }
    iv.location_utilisation.push_back(std::move(util));
    res.locations.push_back(std::move(r));
  }
  // Threads of rank processes were counted as ranks; count ranks once and every thread as one.
  s.threads = 0;
  for (const auto& r : res.locations)
    s.threads += r.kind == "thread";
  s.ranks = static_cast<uint32_t>(ranks.size());
  if (s.cpus == 0)
    for (const auto& r : res.locations)
      s.cpus += r.kind == "cpu";

  // Lost events: the END chunk's exact per-location totals when the file was closed, else the
  // Lost events read.
  std::map<uint32_t, uint64_t> lost;
  for (const auto& r : res.locations)
    if (r.lost_events)
      lost[r.id] += r.lost_events;
  if (reader.closed_cleanly() && options.from_ns == 0 && options.to_ns == UINT64_MAX) {
    std::map<uint32_t, uint64_t> from_end;
    std::string list = reader.SessionValue("lost_by_location");
    size_t pos = 0;
    while (pos < list.size()) {
      size_t semi = list.find(';', pos);
      std::string item =
          list.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
      unsigned loc;
      unsigned long long n;
      if (sscanf(item.c_str(), "%u:%llu", &loc, &n) == 2)
        from_end[loc] += n;
      pos = semi == std::string::npos ? list.size() : semi + 1;
    }
    for (auto& [loc, n] : from_end)
      lost[loc] = std::max(lost[loc], n);
  }
  s.lost_by_location = lost;
  for (auto& [loc, n] : lost)
    s.lost_events += n;
  s.lost_events += s.unattached_lost_events;
  for (auto& r : res.locations)
    if (auto it = lost.find(r.id); it != lost.end())
      r.lost_events = it->second;

  // Channel links: writes on an endpoint reach the readers of its peer endpoint.
  for (auto& [key, ep] : endpoints) {
    if (ep.writers.empty())
      continue;
    auto pit = endpoints.find(PeerKey(key, ep));
    const Endpoint* peer = pit != endpoints.end() ? &pit->second : nullptr;
    uint32_t main_reader = UINT32_MAX;
    uint64_t best = 0;
    if (peer)
      for (const auto& [li, u] : peer->readers)
        if (u.bytes >= best) {
          best = u.bytes;
          main_reader = li;
        }
    uint32_t main_writer = ep.writers.begin()->first;
    best = 0;
    for (const auto& [li, u] : ep.writers)
      if (u.bytes >= best) {
        best = u.bytes;
        main_writer = li;
      }
    for (const auto& [wli, u] : ep.writers) {
      LinkAgg a;
      a.r.kind = "channel";
      a.r.from = locs[wli].id;
      a.r.to = main_reader == UINT32_MAX ? -1 : locs[main_reader].id;
      a.r.messages = u.calls;
      a.r.bytes = u.bytes;
      a.r.sender_wait_ns = u.wait;
      a.r.closed_loop_messages = u.closed_loop;
      a.busy.assign(iv_count, 0);
      a.bytes.assign(iv_count, 0);
      if (auto bit = endpoint_busy.find({key + ">w", wli}); bit != endpoint_busy.end())
        for (size_t i = 0; i < iv_count; ++i)
          a.busy[i] += bit->second[i];
      if (wli == main_writer && peer) {
        for (const auto& [rli, ru] : peer->readers) {
          a.r.receiver_wait_ns += ru.wait;
          if (auto bit = endpoint_busy.find({PeerKey(key, ep) + ">r", rli});
              bit != endpoint_busy.end())
            for (size_t i = 0; i < iv_count; ++i)
              a.busy[i] += bit->second[i];
        }
      }
      // Channel calls' time is all blocking: counted as waiting (the copy is negligible).
      a.r.wait_ns = a.r.sender_wait_ns + a.r.receiver_wait_ns;
      a.r.time_ns = a.r.wait_ns;
      a.r.from_label = Label(locs[wli]);
      a.r.to_label = main_reader == UINT32_MAX ? (ep.description.empty() ? key : ep.description)
                                               : Label(locs[main_reader]);
      links.push_back(std::move(a));
    }
  }
  for (auto& a : links) {
    if (a.r.kind == "mpi") {
      a.r.from_label = fmt::format("rank {}", a.r.from);
      a.r.to_label = fmt::format("rank {}", a.r.to);
      a.r.transfer_ns = a.r.time_ns > a.r.wait_ns ? a.r.time_ns - a.r.wait_ns : 0;
    }
  }
  std::vector<size_t> link_order(links.size());
  for (size_t i = 0; i < links.size(); ++i)
    link_order[i] = i;
  std::stable_sort(link_order.begin(), link_order.end(), [&](size_t a, size_t b) {
    const auto& x = links[a].r;
    const auto& y = links[b].r;
    if (x.kind != y.kind)
      return x.kind == "mpi";
    if (x.from != y.from)
      return x.from < y.from;
    return x.to < y.to;
  });
  for (size_t li : link_order) {
    res.links.push_back(links[li].r);
    std::vector<double> u(iv_count);
    for (size_t i = 0; i < iv_count; ++i) {
      uint64_t b = ws + i * iv_ns, e = std::min(we, b + iv_ns);
      // Both ends may be busy at once; a link is in use at most the whole interval.
      u[i] = std::min(
          1.0, static_cast<double>(links[li].busy[i]) / static_cast<double>(e > b ? e - b : 1));
    }
    iv.link_utilisation.push_back(std::move(u));
    iv.link_bytes.push_back(links[li].bytes);
  }

  // Means and standard deviations over the window, and each interval's imbalance across thread
  // locations (max - min utilisation among those alive in it).
  auto stats = [&](const std::vector<double>& v, double* mean, double* sd) {
    double m = 0;
    for (double x : v)
      m += x;
    m /= static_cast<double>(std::max<size_t>(1, v.size()));
    double var = 0;
    for (double x : v)
      var += (x - m) * (x - m);
    *mean = m;
    *sd = v.size() > 1 ? std::sqrt(var / static_cast<double>(v.size())) : 0;
  };
  for (const auto& u : iv.location_utilisation) {
    double m, sd;
    stats(u, &m, &sd);
    iv.location_mean.push_back(m);
    iv.location_stddev.push_back(sd);
  }
  for (const auto& u : iv.link_utilisation) {
    double m, sd;
    stats(u, &m, &sd);
    iv.link_mean.push_back(m);
    iv.link_stddev.push_back(sd);
  }
  iv.imbalance.assign(iv_count, 0);
  for (size_t i = 0; i < iv_count; ++i) {
    double lo = 2, hi = -1;
    uint64_t b = ws + i * iv_ns, e = std::min(we, b + iv_ns);
    for (size_t k = 0; k < res.locations.size(); ++k) {
      const auto& r = res.locations[k];
      if (r.kind != "thread" || r.last_ts <= b || r.first_ts >= e)
        continue;
      lo = std::min(lo, iv.location_utilisation[k][i]);
      hi = std::max(hi, iv.location_utilisation[k][i]);
    }
    iv.imbalance[i] = hi >= lo ? hi - lo : 0;
  }
  std::vector<size_t> worst(iv_count);
  for (size_t i = 0; i < iv_count; ++i)
    worst[i] = i;
  std::stable_sort(worst.begin(), worst.end(),
                   [&](size_t a, size_t b) { return iv.imbalance[a] > iv.imbalance[b]; });
  for (size_t i = 0; i < worst.size() && i < 5; ++i)
    if (iv.imbalance[worst[i]] > 0)
      iv.most_imbalanced.push_back(worst[i]);

  // Wait states, largest first.
  for (auto& [key, w] : wait_states) {
    w.location_label = Label(locs[std::get<0>(key)]);
    res.wait_states.push_back(w);
  }
  std::stable_sort(res.wait_states.begin(), res.wait_states.end(),
                   [](const auto& a, const auto& b) { return a.ns > b.ns; });

  // Load imbalance: over ranks' main threads when there are ranks, else over threads.
  {
    std::vector<const LocationResult*> members;
    bool by_rank = s.ranks > 1;
    // Without ranks: the worker threads. A process's main thread that started others mostly
    // waits for them, so it would always look like the least loaded.
    std::map<uint32_t, int> threads_per_pid;
    for (const auto& r : res.locations)
      if (r.kind == "thread")
        ++threads_per_pid[r.pid];
    for (const auto& r : res.locations) {
      if (r.kind != "thread")
        continue;
      if (by_rank && !(r.rank >= 0 && r.label == fmt::format("rank {}", r.rank)))
        continue;
      if (!by_rank && r.tid == r.pid && threads_per_pid[r.pid] > 1)
        continue;
      members.push_back(&r);
    }
    LoadImbalance& li = res.imbalance;
    li.over = by_rank ? "ranks" : "threads";
    li.members = members.size();
    if (!members.empty()) {
      uint64_t sum = 0;
      li.min_compute_ns = UINT64_MAX;
      for (const auto* m : members) {
        sum += m->compute_ns;
        if (m->compute_ns >= li.max_compute_ns) {
          li.max_compute_ns = m->compute_ns;
          li.max_label = m->label;
        }
        if (m->compute_ns < li.min_compute_ns) {
          li.min_compute_ns = m->compute_ns;
          li.min_label = m->label;
        }
      }
      li.mean_compute_ns = sum / members.size();
      li.percent = li.max_compute_ns
                       ? 100.0 * static_cast<double>(li.max_compute_ns - li.mean_compute_ns) /
                             static_cast<double>(li.max_compute_ns)
                       : 0;
    }
  }

  // Critical path: the longest chain of computation through messages ends at the location with
  // the largest path value.
  {
    CriticalPath& cp = res.critical_path;
    cp.wall_ns = we - ws;
    const Loc* end = nullptr;
    for (size_t oi : order)
      if (!locs[oi].cpu && (!end || locs[oi].cp > end->cp))
        end = &locs[oi];
    // Without messages every location is its own path: there is nothing to report.
    if (end && !links.empty()) {
      cp.length_ns = end->cp;
      if (end->shares) {
        for (size_t i = 0; i < end->shares->size() && i < locs.size(); ++i) {
          uint64_t v = (*end->shares)[i];
          if (!v)
            continue;
          cp.shares.push_back({Label(locs[i]), v});
          if (result_index[i] >= 0)
            res.locations[result_index[i]].critical_path_ns = v;
        }
        std::stable_sort(cp.shares.begin(), cp.shares.end(),
                         [](const auto& a, const auto& b) { return a.second > b.second; });
      } else {
        cp.shares.push_back({Label(*end), end->cp});
      }
    }
  }
  Diagnose(&res);
  return res;
}

Engine::Engine(const format::TraceReader& reader, const Options& options)
    : impl_(std::make_unique<Impl>(reader, options)) {}
Engine::~Engine() = default;
void Engine::Consume(const format::Event& e) {
  impl_->Consume(e);
}
Results Engine::Finish() {
  return impl_->Finish();
}
std::pair<uint64_t, uint64_t> Engine::window() const {
  return {impl_->ws, impl_->we};
}
Results Engine::Run() {
  return impl_->Run();
}

StatusOr<Results> Analyze(const format::TraceReader& reader, const Options& options) {
  Engine engine(reader, options);
  return engine.Run();
}

// Inlining the decoder and the event dispatch into the merge loop saves about a tenth of the
// CPU time per event (bench/report_bench).
[[gnu::flatten]] Results Engine::Impl::Run() {
  // The engine's own k-way merge, in format::MergeCursor's order (time, then stream, then
  // position), tuned for throughput: each stream keeps its decompressed chunk and decodes only
  // its next event (no chunk of 96-byte Events is materialised: memory per stream is one raw
  // chunk), the heads sit in a flat array where a linear scan for the minimum beats a heap for
  // the few to few hundred streams of a trace, and the second-smallest head bounds a run of
  // events taken from one stream without looking at the others again.
  uint64_t from = ws, to = we;
  struct Head {
    const format::Stream* stream;
    Loc* loc = nullptr;
    size_t next_chunk = 0;
    std::vector<uint8_t> raw;
    format::EventDecoder decoder;
    format::Event event;
    const ClockMap* clock = nullptr;  // its file's clock against rank 0's, if not the same
    size_t clock_hint = 0;
  };
  std::vector<std::unique_ptr<Head>> heads;
  for (const auto& s : reader.streams()) {
    if (s.source == format::Source::kDefinitions || s.events == 0)
      continue;
    if (Aligned(s, s.last_ts) < from || Aligned(s, s.first_ts) > to)
      continue;
    heads.push_back(std::make_unique<Head>());
    heads.back()->stream = &s;
    heads.back()->clock = ClockOf(s);
  }
  const format::KindSchema& schema = reader.schema();
  // An event of another recorder's file, its time and the times in its args put on rank 0's
  // clock.
  auto align = [&](Head & h) __attribute__((noinline)) {
    format::Event& e = h.event;
    e.ts = h.clock->Apply(e.ts, &h.clock_hint);
    uint32_t mask = schema.time_mask(e.kind);
    for (int i = 0; mask && i < e.nargs; ++i, mask >>= 1)
      if ((mask & 1) && e.args[i] != 0 && e.args[i] != UINT64_MAX)
        e.args[i] = h.clock->Apply(e.args[i], &h.clock_hint);
  };
  auto chunk_ts = [&](Head& h, uint64_t t) {
    return h.clock ? h.clock->Apply(t, &h.clock_hint) : t;
  };
  // Loads the next event of a stream into h.event (skipping events before the window).
  // Moves h to its stream's next chunk in the window: false at the end (kept out of the merge
  // loop's code, which it would only make slower).
  auto next_chunk = [&](Head & h) __attribute__((noinline)) {
    for (;;) {
      if (!h.decoder.error().empty()) {
        // Let the reader record the damaged chunk as a problem, as MergeCursor would.
        format::DecodedChunk scratch;
        (void)reader.ReadChunk(h.stream->chunks[h.next_chunk - 1], &scratch);
      }
      const format::ChunkRef* ref = nullptr;
      while (h.next_chunk < h.stream->chunks.size()) {
        const format::ChunkRef& r = h.stream->chunks[h.next_chunk++];
        if (chunk_ts(h, r.header.last_ts) < from)
          continue;
        if (chunk_ts(h, r.header.first_ts) > to)
          return false;
        ref = &r;
        break;
      }
      if (!ref)
        return false;
      // A chunk whose payload is damaged is recorded in reader.problems() and skipped.
      if (!reader.ReadRawPayload(*ref, &h.raw).ok()) {
        h.decoder = {};
        continue;
      }
      h.decoder =
          format::EventDecoder(h.raw.data(), h.raw.size(), ref->header.location,
                               static_cast<format::Source>(ref->header.source), &reader.schema());
      return true;
    }
  };
  auto advance = [&](Head& h) {
    do {
      while (h.decoder.Next(&h.event)) {
        if (h.clock) [[unlikely]]
          align(h);
        if (h.event.ts >= from) [[likely]]
          return true;
      }
    } while (next_chunk(h));
    return false;
  };
  // Every stream's location exists before the first event, so locs does not grow (and these
  // pointers stay valid) while events are consumed.
  for (auto& h : heads)
    LocFor(h->stream->location);
  for (auto& h : heads)
    h->loc = &locs[loc_index[h->stream->location]];
  std::vector<Head*> live;
  std::vector<uint64_t> live_ts;  // live[i]->event.ts, packed: the scan reads one cache line
  for (auto& h : heads)
    if (advance(*h)) {
      live.push_back(h.get());
      live_ts.push_back(h->event.ts);
    }
  while (!live.empty()) {
    // The smallest head and the bound set by the second smallest.
    size_t best = 0;
    uint64_t best_ts = live_ts[0];
    uint64_t bound = UINT64_MAX;
    size_t bound_index = SIZE_MAX;
    for (size_t i = 1; i < live_ts.size(); ++i) {
      uint64_t t = live_ts[i];
      if (t < bound) [[unlikely]] {  // (bound >= best_ts: one compare for most heads)
        if (t < best_ts) {
          bound = best_ts;
          bound_index = best;
          best_ts = t;
          best = i;
        } else {
          bound = t;
          bound_index = i;
        }
      }
    }
    Head& h = *live[best];
    // Take events while they sort before the bound (ties go to the earlier stream).
    bool earlier = best < bound_index;
    bool more;
    do {
      if (h.event.ts > to) {
        more = false;
        break;
      }
      ConsumeAt(*h.loc, h.event);
      more = advance(h);
    } while (more && (h.event.ts < bound || (h.event.ts == bound && earlier)));
    if (more) {
      live_ts[best] = h.event.ts;
    } else {
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(best));
      live_ts.erase(live_ts.begin() + static_cast<std::ptrdiff_t>(best));
    }
  }
  return Finish();
}

}  // namespace parmon::analysis
