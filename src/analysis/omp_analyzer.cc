// OmpAnalyzer (omp_analyzer.h): per-thread and per-region bookkeeping of the OMPT events.
#include "analysis/omp_analyzer.h"

#include <algorithm>
#include <tuple>

namespace parmon::analysis {
namespace {

using format::Kind;

// OMPT's enums as libparmon_omp writes them (omp-tools.h, OpenMP 5.0/5.1).
constexpr uint64_t kThreadInitial = 1;
constexpr uint64_t kEndpointEnd = 2;
constexpr uint64_t kSyncBarrier = 1, kSyncBarrierImplicit = 2, kSyncBarrierExplicit = 3,
                   kSyncBarrierImplementation = 4, kSyncBarrierWorkshare = 8,
                   kSyncBarrierParallel = 9, kSyncBarrierTeams = 10;

}  // namespace

void OmpAnalyzer::Consume(uint32_t loc, uint32_t pid, uint32_t tid, const format::Event& e) {
  switch (e.kind_enum()) {
    case Kind::kOmpRuntime:
      if (e.args[0] != 0) {
        ompt_ = true;
        runtime_ = std::string(e.payload);
        runtime_of_pid_[pid] = runtime_.empty() ? "an OMPT runtime" : runtime_;
      } else {
        libgomp_ = true;
        runtime_of_pid_.emplace(pid, "libgomp");
      }
      return;
    case Kind::kOmpParallel: {
      // The region as its master saw it, written at its end: its members' implicit tasks have
      // ended by now, except the workers' that libomp reports late (RegionEnd).
      Instance& in = RegionEnded(pid, e.args[0], e.args[2], e.args[3], e.ts);
      // The team is the one the implicit tasks report (the runtime may give fewer threads than
      // requested); the master's has ended before its region.
      if (in.team != 0 && in.done >= in.team) {
        Fold(constructs_, pid, in);
        open_.erase({pid, e.args[0]});
      }
      break;
    }
    default:
      break;
  }
  ompt_ = true;  // OMPT events in the window, whether or not the runtime's start is in it
  Thread& t = threads_[loc];
  t.pid = pid;
  t.tid = tid;
  // The initial thread is the process's main thread (its OmpThread may be before the window).
  t.master = t.master || (tid == pid && pid != 0);
  t.first = std::min(t.first, e.ts);
  t.last = std::max(t.last, e.ts);
  switch (e.kind_enum()) {
    case Kind::kOmpThread:
      if (e.args[1] == kEndpointEnd)
        t.ended = true;
      else
        t.master = e.args[0] == kThreadInitial;
      break;
    case Kind::kOmpImplicitTask:
      TaskEnd(t, e);
      break;
    case Kind::kOmpSyncWait: {
      uint64_t k = e.args[1];
      bool implicit = k == kSyncBarrierImplicit || k == kSyncBarrierWorkshare ||
                      k == kSyncBarrierParallel || k == kSyncBarrierImplementation ||
                      k == kSyncBarrierTeams;
      WaitKind w = implicit                                         ? kBarrierImplicit
                   : k == kSyncBarrierExplicit || k == kSyncBarrier ? kBarrierExplicit
                                                                    : kSyncOther;
      Wait(t, w, e.args[2], w == kBarrierImplicit ? RegionEnd(pid, e.args[0], e.ts) : e.ts);
      break;
    }
    case Kind::kOmpMutexWait:
      Wait(t, kLock, e.args[2], e.ts);
      break;
    case Kind::kOmpTask:
      Wait(t, kTask, e.args[1], e.ts);
      break;
    case Kind::kOmpSoloRegion: {
      // A team of one: the region and its only implicit task (thread number 0) in one event,
      // with no barrier waits (there is no one to wait for).
      RegionEnded(pid, e.args[0], e.args[1], e.args[2], e.ts);
      format::Event task = e;
      task.kind = static_cast<uint16_t>(Kind::kOmpImplicitTask);
      task.nargs = 4;
      task.args[0] = e.args[0];
      task.args[1] = 0;
      task.args[2] = 1;
      task.args[3] = e.args[2];
      TaskEnd(t, task);  // folds the instance: its one member is done and it has ended
      break;
    }
    default:
      break;
  }
}

void OmpAnalyzer::Wait(Thread& t, WaitKind kind, uint64_t begin, uint64_t end) {
  begin = std::min(std::max(begin, window_start_), end);
  uint64_t ns = end - begin;
  if (kind == kBarrierImplicit || kind == kBarrierExplicit || kind == kSyncOther) {
    // Tasks this thread ran while it waited were work, not waiting.
    for (const Pending& p : t.pending)
      if (p.kind == kTask && p.begin >= begin)
        ns -= std::min(ns, p.ns);
  }
  if (t.pending.size() >= kMaxPending) {
    // A thread waiting often outside any region: its oldest waits count for the thread only.
    const Pending& old = t.pending.front();
    if (old.kind == kLock)
      t.r.lock_ns += old.ns;
    t.pending.pop_front();
  }
  t.pending.push_back({kind, begin, ns});
}

uint64_t OmpAnalyzer::RegionEnd(uint32_t pid, uint64_t region, uint64_t ts) const {
  auto it = open_.find({pid, region});
  return it != open_.end() && it->second.ended ? std::min(ts, it->second.end) : ts;
}

void OmpAnalyzer::TaskEnd(Thread& t, const format::Event& e) {
  uint64_t end = RegionEnd(t.pid, e.args[0], e.ts);
  uint64_t begin = std::min(std::max(e.args[3], window_start_), end);
  uint64_t span = end - begin;
  uint64_t barrier = 0, implicit = 0, other = 0, lock = 0, task = 0;
  for (const Pending& p : t.pending) {
    if (p.begin < begin) {
      if (p.kind == kLock)
        t.r.lock_ns += p.ns;  // outside this region: the thread's, not the region's
      continue;
    }
    switch (p.kind) {
      case kBarrierImplicit:
        implicit += p.ns;
        barrier += p.ns;
        break;
      case kBarrierExplicit:
        barrier += p.ns;
        break;
      case kSyncOther:
        other += p.ns;
        break;
      case kLock:
        lock += p.ns;
        break;
      case kTask:
        task += p.ns;
        break;
    }
  }
  t.pending.clear();
  uint64_t waits = std::min(span, barrier + other + lock);
  uint64_t work = span - waits;
  OmpThreadResult& r = t.r;
  ++r.regions;
  r.region_ns += span;
  r.work_ns += work;
  r.barrier_ns += barrier;
  r.barrier_implicit_ns += implicit;
  r.sync_other_ns += other;
  r.lock_ns += lock;
  r.task_ns += task;
  t.first = std::min(t.first, begin);
  uint32_t team = static_cast<uint32_t>(std::min<uint64_t>(e.args[2], 1024));
  uint32_t index = static_cast<uint32_t>(std::min<uint64_t>(e.args[1], 1023));
  auto key = InstanceKey{t.pid, e.args[0]};
  Instance& in = Open(t.pid, e.args[0]);
  in.team = std::max({in.team, team, index + 1});
  if (in.work.size() <= index) {
    in.work.resize(index + 1, 0);
    in.barrier.resize(index + 1, 0);
    in.implicit.resize(index + 1, 0);
  }
  in.work[index] += work;
  in.barrier[index] += barrier;
  in.implicit[index] += implicit;
  ++in.done;
  if (in.ended && in.done >= in.team) {
    Fold(constructs_, t.pid, in);
    open_.erase(key);
  }
}

OmpAnalyzer::Instance& OmpAnalyzer::RegionEnded(uint32_t pid,
                                                uint64_t region,
                                                uint64_t construct,
                                                uint64_t begin,
                                                uint64_t end) {
  Instance& in = Open(pid, region);
  in.begin = std::min(std::max(begin, window_start_), end);
  in.end = end;
  in.ended = true;
  in.construct = static_cast<uint32_t>(construct);
  return in;
}

OmpAnalyzer::Instance& OmpAnalyzer::Open(uint32_t pid, uint64_t region) {
  auto [it, added] = open_.try_emplace({pid, region});
  if (added) {
    it->second.seq = ++seq_;
    if (open_.size() > kMaxOpen) {
      // Instances whose members never all reported (lost events): fold the oldest as they are.
      auto oldest = std::min_element(open_.begin(), open_.end(), [](const auto& a, const auto& b) {
        return a.second.seq < b.second.seq;
      });
      Fold(constructs_, oldest->first.first, oldest->second);
      open_.erase(oldest);
    }
  }
  return it->second;
}

void OmpAnalyzer::Fold(std::map<ConstructKey, Construct>& constructs,
                       uint32_t pid,
                       const Instance& in) {
  if (in.work.empty())
    return;
  Construct& c = constructs[{pid, in.construct}];
  OmpRegionResult& r = c.r;
  r.pid = pid;
  ++r.instances;
  // Members that never reported (a team larger than the threads seen) count as zero work.
  uint32_t team = std::max<uint32_t>(in.team, static_cast<uint32_t>(in.work.size()));
  r.team_size = std::max(r.team_size, team);
  if (in.ended && in.end > in.begin && in.begin != 0)
    r.wall_ns += in.end - in.begin;
  uint64_t max = 0, sum = 0;
  for (uint64_t w : in.work) {
    max = std::max(max, w);
    sum += w;
  }
  double mean = static_cast<double>(sum) / team;
  r.max_work_ns += max;
  c.mean_sum += mean;
  r.lost_ns += static_cast<uint64_t>(std::max(0.0, static_cast<double>(max) - mean));
  if (r.thread_work_ns.size() < in.work.size()) {
    r.thread_work_ns.resize(in.work.size(), 0);
    r.thread_barrier_ns.resize(in.work.size(), 0);
    r.thread_barrier_implicit_ns.resize(in.work.size(), 0);
  }
  for (size_t i = 0; i < in.work.size(); ++i) {
    r.thread_work_ns[i] += in.work[i];
    r.thread_barrier_ns[i] += in.barrier[i];
    r.thread_barrier_implicit_ns[i] += in.implicit[i];
  }
}

void OmpAnalyzer::Build(const std::function<std::string(uint32_t)>& name,
                        const std::function<std::string(uint32_t)>& label,
                        const std::function<std::pair<uint64_t, uint64_t>(uint32_t)>& span,
                        OmpProfile* out) const {
  OmpProfile& p = *out;
  p.ompt = ompt_;
  p.runtime = runtime_;
  p.libgomp = libgomp_;
  p.runtime_of_pid = runtime_of_pid_;
  if (libgomp_)
    p.note =
        "This program's OpenMP runtime is GCC's libgomp, which has no OMPT (GCC 12): parmon "
        "shows its threads' states but not its parallel regions, barriers or imbalance; "
        "record it with `parmon record --libomp` to run it on LLVM's libomp instead.";
  for (const auto& [loc, t] : threads_) {
    if (t.r.regions == 0 && !t.master)
      continue;  // an OpenMP thread that never ran in a region in the window
    OmpThreadResult r = t.r;
    for (const Pending& p2 : t.pending)  // waits after its last region
      if (p2.kind == kLock)
        r.lock_ns += p2.ns;
    r.location = loc;
    r.label = label(loc);
    r.pid = t.pid;
    r.tid = t.tid;
    r.master = t.master;
    const auto [loc_first, loc_last] = span(loc);
    const uint64_t begin =
        t.master ? std::min(t.first, std::max(loc_first, window_start_)) : t.first;
    const uint64_t end = std::max(t.last, loc_last);
    r.span_ns = end > begin ? end - begin : 0;
    uint64_t outside = r.span_ns - std::min(r.span_ns, r.region_ns);
    (t.master ? r.serial_ns : r.idle_ns) = outside;
    p.threads.push_back(std::move(r));
  }
  std::sort(p.threads.begin(), p.threads.end(), [](const auto& a, const auto& b) {
    return std::make_tuple(a.pid, !a.master, a.tid) < std::make_tuple(b.pid, !b.master, b.tid);
  });
  // The instances still open (a snapshot, or members lost) count with what they have.
  std::map<ConstructKey, Construct> constructs = constructs_;
  for (const auto& [key, in] : open_)
    Fold(constructs, key.first, in);
  for (auto& [key, c] : constructs) {
    OmpRegionResult r = c.r;
    r.construct = key.second != 0 ? name(key.second) : "?";
    if (r.construct.empty())
      r.construct = "?";
    r.mean_work_ns = c.mean_sum;
    r.imbalance = c.mean_sum > 0 ? static_cast<double>(r.max_work_ns) / c.mean_sum : 1.0;
    p.regions.push_back(std::move(r));
  }
  std::sort(p.regions.begin(), p.regions.end(), [](const auto& a, const auto& b) {
    return std::tie(a.lost_ns, a.wall_ns) > std::tie(b.lost_ns, b.wall_ns);
  });
}

}  // namespace parmon::analysis
