// The results builder: Finish turns the analyzers' state into Results, one part per analyzer
// (summary, locations with their states, regions, MPI totals and waits, lost events, links,
// interval statistics, wait states, load imbalance, critical path), then the diagnosis.
//
// Finish changes the state it reads (open regions and calls are closed at the window's end), so
// the engine runs it on a copy: Engine::Snapshot.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/call_sites.h"
#include "analysis/engine_impl.h"

namespace parmon::analysis {
namespace {

// Mean and standard deviation of a series.
void Stats(const std::vector<double>& v, double* mean, double* sd) {
  double m = 0;
  for (double x : v)
    m += x;
  m /= static_cast<double>(std::max<size_t>(1, v.size()));
  double var = 0;
  for (double x : v)
    var += (x - m) * (x - m);
  *mean = m;
  *sd = v.size() > 1 ? std::sqrt(var / static_cast<double>(v.size())) : 0;
}

// Load imbalance: over ranks' main threads when there are ranks, else over threads.
// Without ranks, imbalance is a property of peers doing the same kind of work: the threads of a
// pool or the processes of a farm. Peers here share a name and live together: each member lives
// at least half of its group's span, which covers at least a quarter of the run. A thread that
// computed less than a tenth of its life waits for work (a writer, a dispatcher): idle, not a
// peer. `make -j4` was measured over its 128 short-lived compiler processes and its `sh`
// wrappers ("15.2 s at stake" in a 3.6 s build); pigz over its writer thread.
std::vector<const LocationResult*> ThreadPeers(const Results& res,
                                               const std::vector<const LocationResult*>& threads) {
  std::map<std::string, std::vector<const LocationResult*>> by_name;
  for (const auto* t : threads)
    if (t->compute_ns * 10 >= t->wall_ns && t->wall_ns > 0)
      by_name[t->name].push_back(t);
  std::vector<const LocationResult*> best;
  uint64_t best_compute = 0;
  for (auto& [name, group] : by_name) {
    uint64_t from = UINT64_MAX, to = 0;
    for (const auto* t : group) {
      from = std::min(from, t->first_ts);
      to = std::max(to, t->last_ts);
    }
    const uint64_t span = to > from ? to - from : 0;
    if (span * 4 < res.summary.duration_ns)
      continue;
    std::vector<const LocationResult*> peers;
    uint64_t compute = 0;
    for (const auto* t : group)
      if (t->wall_ns * 2 >= span) {
        peers.push_back(t);
        compute += t->compute_ns;
      }
    if (peers.size() >= 2 && compute > best_compute) {
      best = std::move(peers);
      best_compute = compute;
    }
  }
  return best;
}

void BuildImbalance(Results* res) {
  std::vector<const LocationResult*> members;
  bool by_rank = res->summary.ranks > 1;
  // Without ranks: the worker threads. A process's main thread that started others mostly
  // waits for them, so it would always look like the least loaded.
  std::map<uint32_t, int> threads_per_pid;
  for (const auto& r : res->locations)
    if (r.type == LocationKind::kThread)
      ++threads_per_pid[r.pid];
  for (const auto& r : res->locations) {
    if (r.type != LocationKind::kThread)
      continue;
    if (by_rank && !r.main_thread)
      continue;
    if (!by_rank && r.tid == r.pid && threads_per_pid[r.pid] > 1)
      continue;
    members.push_back(&r);
  }
  if (!by_rank)
    members = ThreadPeers(*res, members);
  LoadImbalance& li = res->imbalance;
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

}  // namespace

std::string Engine::Impl::Label(const Loc& l) const {
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

Results Engine::Impl::Finish() {
  FlushChannelBusy();
  CloseOpenMpiCalls();
  FlushOpenCalls();
  FinishPeriodicMpi();
  Results res;
  BuildSummary(&res.summary);
  std::vector<size_t> order;
  std::vector<int> result_index;
  BuildLocations(&res, &order, &result_index);
  for (const LocationResult& l : res.locations)
    res.summary.parmon_held_ns += l.parmon_held_ns;
  BuildLost(&res);
  BuildDeaths(&res);
  AddChannelLinks();
  BuildLinks(&res);
  BuildIntervalStats(&res);
  BuildWaitStates(&res);
  BuildImbalance(&res);
  BuildMpiProfile(&res);
  BuildCriticalPath(&res, order, result_index);
  BuildCpuAccount(&res);
  BuildOverhead(&res);
  BuildSwitchStops(&res);
  omp.Build([this](uint32_t id) { return defs.Name(id); },
            [this](uint32_t id) { return Label(*Resolve(id)); },
            [this](uint32_t id) {
              const Loc& l = *Resolve(id);
              return std::make_pair(l.first, l.last);
            },
            &res.omp);
  ResolveOmpConstructs(&res.omp);
  Diagnose(&res);
  return res;
}

void Engine::Impl::BuildSummary(Summary* out) const {
  Summary& s = *out;
  s.file = reader.path();
  const format::SessionInfo& info = session.info();
  const format::EndInfo& totals = session.totals();
  s.command = info.command;
  s.host = info.host;
  s.format_version = fmt::format("{}.{}", reader.version_major(), reader.version_minor());
  s.closed_cleanly = reader.closed_cleanly();
  if (!s.closed_cleanly)
    s.covered_until = reader.complete_until();
  s.session_start = session_start;
  s.session_end = session_end;
  s.window_start = ws;
  s.window_end = we;
  s.duration_ns = we - ws;
  s.exit_code = totals.exit_code.value_or(-1);
  s.processes = static_cast<uint32_t>(defs.processes.size());
  s.cpus = info.cpus;
  s.events = events;
  s.unattached_lost_events = totals.unattached_lost_events;
  s.overwritten_events = totals.overwritten_events;
  s.paused_ns = defs.PausedWithin(ws, we);
  for (const auto& [b, e] : defs.paused)
    if (b < we && e > ws)
      ++s.pauses;
  for (const auto& p : reader.problems()) {
    s.problems.push_back(p.message);
    if (p.events_lost > 0)
      s.damaged_events += static_cast<uint64_t>(p.events_lost);
  }
  s.recorder_cpu_ns = totals.recorder_cpu_ns;
  s.program_cpu_ns = totals.children_cpu_ns;
  s.has_sched = has_sched;
  s.has_comm = has_comm;
  // The clock offsets the session measured and applied (model/clock_alignment.h).
  for (const model::RankClockOffset& c : session.clocks().offsets)
    s.clock_offsets.push_back({c.rank, c.offset_ns, c.last_offset_ns, c.epochs});
  s.clocks_aligned = !session.clocks().empty();
}

void Engine::Impl::BuildLocations(Results* res,
                                  std::vector<size_t>* order_out,
                                  std::vector<int>* result_index_out) {
  Summary& s = res->summary;
  std::vector<size_t>& order = *order_out;
  // Locations: threads (pid, tid order), then CPUs. Locations with no events in the window and
  // no definition-time presence are dropped.
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
  std::vector<int>& result_index = *result_index_out;
  result_index.assign(locs.size(), -1);
  std::map<int32_t, bool> ranks;
  auto& iv = res->intervals;
  iv.interval_ns = iv_ns;
  iv.window_start = ws;
  iv.count = iv_count;
  for (size_t oi : order) {
    std::vector<StateTimes> row;
    LocationResult r = BuildLocation(locs[oi], &row);
    if (r.rank >= 0 && !locs[oi].cpu)
      ranks[r.rank] = true;
    result_index[oi] = static_cast<int>(res->locations.size());
    std::vector<double> util(iv_count);
    for (size_t i = 0; i < iv_count; ++i)
      util[i] = std::min(1.0, static_cast<double>(row[i][static_cast<int>(State::kRunning)]) /
                                  static_cast<double>(bins.Span(i)));
    iv.location_states.push_back(std::move(row));
    iv.location_utilisation.push_back(std::move(util));
    res->locations.push_back(std::move(r));
  }
  // Threads of rank processes were counted as ranks; count ranks once and every thread as one.
  s.threads = 0;
  for (const auto& r : res->locations)
    s.threads += r.type == LocationKind::kThread;
  s.ranks = static_cast<uint32_t>(ranks.size());
  if (s.cpus == 0)
    for (const auto& r : res->locations)
      s.cpus += r.type == LocationKind::kCpu;
}

// Lost events: the END chunk's exact per-location totals when the file was closed, else the
// Lost events read.
void Engine::Impl::BuildLost(Results* res) const {
  Summary& s = res->summary;
  std::map<uint32_t, uint64_t> lost;
  for (const auto& r : res->locations)
    if (r.lost_events)
      lost[r.id] += r.lost_events;
  if (reader.closed_cleanly() && options.from_ns == 0 && options.to_ns == UINT64_MAX) {
    for (const auto& [loc, n] : session.totals().lost_by_location)
      lost[loc] = std::max(lost[loc], n);
  }
  s.lost_by_location = lost;
  for (auto& [loc, n] : lost)
    s.lost_events += n;
  s.lost_events += s.unattached_lost_events;
  for (auto& r : res->locations)
    if (auto it = lost.find(r.id); it != lost.end())
      r.lost_events = it->second;
}

// Links in report order (MPI by ranks, then channels), with their per-interval use.
void Engine::Impl::BuildLinks(Results* res) {
  auto& iv = res->intervals;
  std::map<int64_t, int64_t> main_thread_of_rank;  // rank -> location id
  for (const auto& r : res->locations)
    if (r.main_thread)
      main_thread_of_rank.emplace(r.rank, r.id);
  for (auto& a : links) {
    if (a.r.type == LinkKind::kMpi) {
      auto from = main_thread_of_rank.find(a.r.from), to = main_thread_of_rank.find(a.r.to);
      a.r.from_location = from == main_thread_of_rank.end() ? -1 : from->second;
      a.r.to_location = to == main_thread_of_rank.end() ? -1 : to->second;
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
      return x.type == LinkKind::kMpi;
    if (x.from != y.from)
      return x.from < y.from;
    return x.to < y.to;
  });
  for (size_t li : link_order) {
    res->links.push_back(links[li].r);
    std::vector<double> u(iv_count);
    for (size_t i = 0; i < iv_count; ++i) {
      // Both ends may be busy at once; a link is in use at most the whole interval.
      u[i] =
          std::min(1.0, static_cast<double>(links[li].busy[i]) / static_cast<double>(bins.Span(i)));
    }
    iv.link_utilisation.push_back(std::move(u));
    iv.link_bytes.push_back(links[li].bytes);
  }
}

// Means and standard deviations over the window, and each interval's imbalance across thread
// locations (max - min utilisation among those alive in it).
void Engine::Impl::BuildIntervalStats(Results* res) const {
  auto& iv = res->intervals;
  for (const auto& u : iv.location_utilisation) {
    double m, sd;
    Stats(u, &m, &sd);
    iv.location_mean.push_back(m);
    iv.location_stddev.push_back(sd);
  }
  for (const auto& u : iv.link_utilisation) {
    double m, sd;
    Stats(u, &m, &sd);
    iv.link_mean.push_back(m);
    iv.link_stddev.push_back(sd);
  }
  iv.imbalance.assign(iv_count, 0);
  for (size_t i = 0; i < iv_count; ++i) {
    double lo = 2, hi = -1;
    uint64_t b = bins.Begin(i), e = bins.End(i);
    for (size_t k = 0; k < res->locations.size(); ++k) {
      const auto& r = res->locations[k];
      if (r.type != LocationKind::kThread || r.last_ts <= b || r.first_ts >= e)
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
}

// Wait states, largest first.
void Engine::Impl::BuildWaitStates(Results* res) {
  for (auto& [key, w] : wait_states) {
    w.location_label = Label(locs[std::get<0>(key)]);
    res->wait_states.push_back(w);
  }
  std::stable_sort(res->wait_states.begin(), res->wait_states.end(),
                   [](const auto& a, const auto& b) { return a.ns > b.ns; });
}

// Critical path: the longest chain of computation through messages ends at the location with
// the largest path value.
void Engine::Impl::BuildCriticalPath(Results* res,
                                     const std::vector<size_t>& order,
                                     const std::vector<int>& result_index) const {
  CriticalPath& cp = res->critical_path;
  cp.wall_ns = we - ws;
  const Loc* end = nullptr;
  for (size_t oi : order)
    if (!locs[oi].cpu && (!end || locs[oi].cp > end->cp))
      end = &locs[oi];
  // Without messages, and with no path that went on through another location (a creator at
  // a thread's exit, a condition variable's signal), every location is its own path: there is
  // nothing to report.
  if (end && (!links.empty() || joined_paths)) {
    cp.length_ns = end->cp;
    if (end->shares) {
      for (size_t i = 0; i < end->shares->size() && i < locs.size(); ++i) {
        uint64_t v = (*end->shares)[i];
        if (!v)
          continue;
        cp.shares.push_back({Label(locs[i]), v});
        if (result_index[i] >= 0)
          res->locations[result_index[i]].critical_path_ns = v;
      }
      std::stable_sort(cp.shares.begin(), cp.shares.end(),
                       [](const auto& a, const auto& b) { return a.second > b.second; });
    } else {
      // Shares are not kept beyond kMaxShareLocations: the location where the path ends (often
      // a parent that took its children's paths at their exits) is not where it ran.
      cp.shares_kept = false;
    }
  }
}

// The CPUs' busy, idle and stolen time (/proc/stat) beside the program's threads' running and
// queued time, and the queued time that fell in intervals with CPU time to spare.
void Engine::Impl::BuildCpuAccount(Results* res) const {
  CpuAccount& a = res->cpu_account;
  for (const Loc& l : locs) {
    if (!l.cpu || !l.cpu_total)
      continue;
    ++a.cpus;
    a.capacity_ns += l.cpu_total;
    a.busy_ns += l.cpu_busy;
    a.steal_ns += l.cpu_steal;
  }
  if (!a.cpus)
    return;
  a.idle_ns = a.capacity_ns - std::min(a.capacity_ns, a.busy_ns + a.steal_ns);
  const IntervalSeries& iv = res->intervals;
  std::vector<uint64_t> spare(iv.count, 0), queued(iv.count, 0);
  constexpr int kRun = static_cast<int>(State::kRunning),
                kQueue = static_cast<int>(State::kRunnable);
  for (size_t k = 0; k < res->locations.size(); ++k) {
    const LocationResult& l = res->locations[k];
    const bool cpu = l.type == LocationKind::kCpu;
    if (!cpu && (l.type != LocationKind::kThread || !l.sampled))
      continue;
    if (!cpu) {  // what the kernel saw: a spinlock's spin and a rank's polling in MPI ran
      a.program_running_ns += l.cpu_ns;
      a.program_queued_ns += l.states[kQueue] + l.mpi_kernel_states[kQueue];
    }
    if (k >= iv.location_states.size())
      continue;
    const auto& row = iv.location_states[k];
    for (size_t i = 0; i < iv.count && i < row.size(); ++i) {
      if (cpu)
        spare[i] += Sum(row[i]) - std::min(Sum(row[i]), row[i][kRun]);
      else
        queued[i] += row[i][kQueue];
    }
  }
  // An interval's CPU time not busy is idle or stolen; /proc/stat's ticks are too coarse to
  // split it per interval, so each gets the window's idle share of it.
  const double idle_share =
      a.idle_ns ? static_cast<double>(a.idle_ns) / static_cast<double>(a.idle_ns + a.steal_ns) : 0;
  for (size_t i = 0; i < iv.count; ++i)
    a.queued_beside_idle_ns +=
        std::min(static_cast<uint64_t>(idle_share * static_cast<double>(spare[i])), queued[i]);
  a.other_work_ns = a.busy_ns - std::min(a.busy_ns, a.program_running_ns);
  if (we > ws)
    a.runnable_threads = static_cast<double>(a.program_running_ns + a.program_queued_ns) /
                         static_cast<double>(we - ws);
}

}  // namespace parmon::analysis
