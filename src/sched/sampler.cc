#include "sched/sampler.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <chrono>

#include "base/clock.h"
#include "sched/events.h"
#include "sched/sampler_tuning.h"

namespace parmon::sched {

using format::Event;
using format::Kind;
using namespace sampler_internal;  // NOLINT: the sampler's own tuning and helpers

SamplerCore::SamplerCore(SamplerOptions options, uint64_t session_start_ns)
    : options_(std::move(options)), session_start_ns_(session_start_ns), proc_stat_("/proc/stat") {
  boot_minus_now_ns_ =
      static_cast<int64_t>(ClockNs(CLOCK_BOOTTIME)) - static_cast<int64_t>(MonotonicNs());
}

void SamplerCore::AddProcess(uint32_t pid) {
  if (pid == 0 || ended_.count(pid))
    return;
  auto [it, inserted] = processes_.try_emplace(pid);
  if (inserted)
    it->second.stat = ProcFile(fmt::format("/proc/{}/stat", pid));
}

size_t SamplerCore::thread_count() const {
  size_t n = 0;
  for (const auto& [pid, p] : processes_)
    n += p.threads.size();
  return n;
}

uint64_t SamplerCore::StartTimeNs(uint64_t start_ticks) const {
  int64_t t = static_cast<int64_t>(start_ticks * NsPerClockTick()) - boot_minus_now_ns_;
  return t > 0 ? static_cast<uint64_t>(t) : 0;
}

void SamplerCore::DiscoverChildren() {
  // Only a thread that ran since the last look can have started a process.
  std::vector<uint32_t> found;
  for (auto& [pid, p] : processes_)
    for (auto& [tid, t] : p.threads) {
      if (!t.ran_since_discovery && pass_ > 1)
        continue;
      t.ran_since_discovery = false;
      for (uint32_t child : ListChildren(pid, tid))
        found.push_back(child);
    }
  for (uint32_t child : found)
    AddProcess(child);
}

void SamplerCore::Sample(uint64_t now_ns, std::vector<Output>* out) {
  ++pass_;
  pass_mono_ns_ = ClockNs(CLOCK_MONOTONIC);
  // Collected before any thread is read, so a switch after this shows up at the next pass and
  // the thread is read then: no switch between two collections means the state a read saw
  // between them held all along.
  switches_live_ = false;
  bool any_gone = false;  // an EXIT record this pass
  if (!options_.activity)
    last_unlive_pass_ = pass_;
  if (options_.activity) {
    // Records stamped after now_ns wait for the next pass: the sampler's thread may be held up
    // between taking now_ns and collecting (12 ms under load), and records booked at now_ns
    // instead of their time lost whatever they timed in between (a spinner's 8 ms on a CPU).
    changes_.clear();
    changes_.swap(later_);
    const size_t held = changes_.size();
    switches_live_ = options_.activity->Collect(&changes_);
    if (!switches_live_) {
      changes_.clear();
      switches_.clear();  // records lost: what we knew may be stale
      last_unlive_pass_ = pass_;
    }
    auto by_ts = [](const SwitchChange& x, const SwitchChange& y) { return x.ts < y.ts; };
    if (held > 0 && held < changes_.size())
      std::inplace_merge(changes_.begin(), changes_.begin() + static_cast<ptrdiff_t>(held),
                         changes_.end(), by_ts);
    auto later = std::upper_bound(changes_.begin(), changes_.end(), now_ns,
                                  [](uint64_t ts, const SwitchChange& c) { return ts < c.ts; });
    later_.assign(later, changes_.end());
    changes_.erase(later, changes_.end());
    // Events opened with enable_on_exec record nothing before the exec: a read before the first
    // record may predate them.
    if (switches_live_ && !changes_.empty() && flowing_pass_ == 0)
      flowing_pass_ = pass_;
    // One walk over the records, all stamped up to now_ns. A thread timed from them books the
    // time up to each; for the others the latest record is kept for CanAssume and StartTiming.
    uint32_t last_pid = 0;
    Process* last_process = nullptr;
    for (const SwitchChange& c : changes_) {
      any_gone = any_gone || c.last == LastSwitch::kGone;
      if (c.pid != last_pid || !last_process) {
        auto p = processes_.find(c.pid);
        // A thread of a process we do not know: the recorder follows every process the session
        // creates (inherited events), so this is a new child, found without a scan.
        if (p == processes_.end() && c.last != LastSwitch::kGone) {
          AddProcess(c.pid);
          p = processes_.find(c.pid);
        }
        last_pid = c.pid;
        last_process = p == processes_.end() ? nullptr : &p->second;
      }
      if (c.last == LastSwitch::kUnknown) {  // a FORK record: a new thread to list
        if (last_process) {
          last_process->forked = true;
          if (switches_live_)
            Born(c.pid, *last_process, c.tid, c.ts, now_ns, out);
        }
      } else if (last_process) {
        auto t = last_process->threads.find(c.tid);
        if (t != last_process->threads.end() && t->second.timed) {
          Advance(t->second, std::min(c.ts, now_ns), c.last, c.cpu);
          if (c.last == LastSwitch::kGone)
            t->second.exit_ns = std::max<uint64_t>(std::min(c.ts, now_ns), 1);
          else
            continue;
        }
      }
      SwitchSeen& seen = switches_[c.tid];
      seen.pass = pass_;
      if (c.ts >= seen.ts) {
        seen.ts = c.ts;
        seen.last = c.last;
      }
    }
    if (!switches_live_)
      for (auto& [pid, p] : processes_)
        for (auto& [tid, t] : p.threads)
          t.timed = false;
  }
  // Scanning every thread's children file costs more than the rest of a pass. The records
  // show each process the session creates; scan only until they flow, or after some were lost.
  if (!switches_live_ || flowing_pass_ == 0)
    scan_children_ = true;
  if (pass_ == 1 || (pass_ % kDiscoverEvery == 0 && scan_children_)) {
    DiscoverChildren();
    scan_children_ = !switches_live_ || flowing_pass_ == 0;
  }
  for (auto it = processes_.begin(); it != processes_.end();) {
    SampleProcess(it->first, it->second, now_ns, out);
    if (it->second.threads.empty() && pass_ > 1 && !it->second.stat.Read().data()) {
      ended_.insert(it->first);
      it = processes_.erase(it);
    } else {
      ++it;
    }
  }
  // Children found now are sampled from the next pass, with their start time as the interval start.
  if (pass_ == 1)
    DiscoverChildren();
  // (A walk over every thread's entry: only after an EXIT record.)
  if (any_gone)
    std::erase_if(switches_, [](const auto& kv) { return kv.second.last == LastSwitch::kGone; });
  // /proc/stat counts in clock ticks (10 ms) and costs ~15 us: read it every 50 ms at most.
  if (cpu_prev_.empty() || now_ns - cpu_prev_ns_ >= 50'000'000)
    SampleCpus(now_ns, out);
  prev_pass_ns_ = now_ns;
}

void SamplerCore::SampleProcess(uint32_t pid,
                                Process& p,
                                uint64_t now_ns,
                                std::vector<Output>* out) {
  // Listing the task directory costs as much as reading ten threads' schedstat; its link count
  // (threads + 2) is one stat() call. List again only when that count changed or a thread we
  // know could not be read (it ended; another may have started in its place).
  if (p.task_dir.empty())
    p.task_dir = fmt::format("/proc/{}/task", pid);
  // With complete switch records since a listing (made after they began to flow), FORK records
  // name every thread created since, so not even the stat() is needed.
  const bool records_tell = switches_live_ && flowing_pass_ != 0 && p.listed_pass != 0 &&
                            p.listed_pass >= flowing_pass_ && p.listed_pass > last_unlive_pass_;
  bool relist = pass_ == 1 || p.lost_one || p.forked || p.listed_pass == 0;
  if (!relist && !records_tell) {
    struct stat st;
    relist = stat(p.task_dir.c_str(), &st) != 0 || st.st_nlink != p.listed + 2;
  }
  p.lost_one = false;
  p.forked = false;
  // A thread listed for the first time while the records flow was most likely created since
  // the last collection: its FORK record comes with the next one, and it is timed from that
  // rather than from a guess (see Born). One made before the records began (rare after the
  // first pass) waits that one pass and is then read as new. At the first pass of a program
  // parmon started, every thread but the main one was created after the exec that enabled the
  // records, so it has a FORK record too: one created between this pass's collection and its
  // listing (a late first pass on a loaded machine) would otherwise be booked from a start
  // time in clock ticks, before it existed.
  const bool fork_coming = switches_live_ && flowing_pass_ != 0 && pass_ > 1;
  const bool first_fork_coming = switches_live_ && pass_ == 1 && !options_.attached;
  if (relist) {
    std::vector<uint32_t> tids = ListTasks(pid);
    p.listed = tids.size();
    p.listed_pass = pass_;
    for (uint32_t tid : tids) {
      if (!Wanted(tid))
        continue;
      auto [it, inserted] = p.threads.try_emplace(tid);
      if (inserted) {
        it->second.fresh = true;
        it->second.born_pass = pass_;
        it->second.await_fork = fork_coming || (first_fork_coming && tid != pid);
        it->second.schedstat = ProcFile(TaskPath(pid, tid, "schedstat"));
        it->second.stat = ProcFile(TaskPath(pid, tid, "stat"));
      }
    }
  }
  uint64_t live_cpu = 0;
  for (auto it = p.threads.begin(); it != p.threads.end();) {
    Thread& t = it->second;
    if (t.await_fork) {
      if (t.born_pass == pass_) {
        ++it;  // its FORK record comes with the next collection (see Born)
        continue;
      }
      t.await_fork = false;  // none came: a guess at its start after all
    }
    bool is_new = t.fresh;
    t.fresh = false;
    if (t.timed && t.exit_ns != 0) {
      // Ended, as its EXIT record says: booked up to then from the records, nothing to read.
      p.exited_cpu_seen += BookExit(pid, it->first, t, now_ns, out);
      switches_.erase(it->first);
      it = p.threads.erase(it);
      continue;
    }
    const bool present = !is_new && t.timed ? BookFromRecords(pid, it->first, t, now_ns, out)
                                            : SampleUntimed(pid, it->first, t, is_new, now_ns, out);
    if (present) {
      live_cpu += t.account.last().cpu_ns;
      ++it;
      continue;
    }
    // Gone: what we saw of its CPU time moves to the process's exited threads.
    p.lost_one = true;
    uint64_t cpu = t.account.last().cpu_ns;
    p.exited_cpu_seen += cpu;
    switches_.erase(it->first);
    if (!is_new)
      out->push_back({pid, it->first, -1, MakeEvent(Kind::kTaskExit, now_ns, {cpu})});
    it = p.threads.erase(it);
  }
  // The process's own counters (every thread that ever ran, in clock ticks) cost a walk over all
  // its threads in the kernel: read them every kProcessEvery passes only.
  if (pass_ % kProcessEvery != 1 && kProcessEvery != 1)
    return;
  TaskStat ps;
  if (ParseTaskStat(p.stat.Read(), &ps)) {
    if (ps.state == 'T' || ps.state == 't') {
      // Stopped (SIGSTOP, a debugger): a group stop stops every thread, each inside whatever
      // call it was in, which is all its syscall file shows. The timed ones that are blocked
      // wait as stopped from now; each is read afresh at its next block after it resumes.
      for (auto& [tid, t] : p.threads)
        if (t.timed && t.rec_state == LastSwitch::kBlocked) {
          t.wait_state = ThreadState::kStopped;
          t.wait_known = true;
          t.state = ps.state;
          t.wait_every = 1;
          t.wait_pass = pass_;
        }
    }
    uint64_t cpu = (ps.utime_ticks + ps.stime_ticks) * NsPerClockTick();
    uint64_t seen = live_cpu + p.exited_cpu_seen;
    uint64_t unseen = cpu > seen ? cpu - seen : 0;
    uint32_t main_tid = pid;
    if (Wanted(main_tid))
      out->push_back({pid, main_tid, -1,
                      MakeEvent(Kind::kProcessSample, now_ns, {cpu, ps.num_threads, unseen})});
  }
}

bool SamplerCore::SampleUntimed(uint32_t pid,
                                uint32_t tid,
                                Thread& t,
                                bool is_new,
                                uint64_t now_ns,
                                std::vector<Output>* out) {
  ThreadState assumed;
  if (!is_new && CanAssume(tid, t, &assumed)) {
    ++t.assumed_passes;
    ++assumed_;
    if (assumed == ThreadState::kRunning)
      t.ran_since_discovery = true;
    PushStates(pid, tid, now_ns, t.account.Assume(now_ns, assumed), out);
    StartTiming(tid, t, now_ns);
    return true;
  }
  t.assumed_passes = 0;
  // A thread that has not run for kIdlePasses passes is read every kIdleEvery passes only
  // (spread over passes by tid); its next ThreadStates covers the longer interval.
  // (Without complete switch records only: with them, CanAssume above decides.)
  if (!is_new && !switches_live_ && t.idle_passes >= kIdlePasses && (pass_ + tid) % kIdleEvery != 0)
    return true;
  if (!SampleThread(pid, tid, t, is_new, now_ns, out))
    return false;
  StartTiming(tid, t, now_ns);
  return true;
}

void SamplerCore::StartTiming(uint32_t tid, Thread& t, uint64_t now_ns) {
  // The state at now_ns must be known, and every record after it will be collected.
  if (!switches_live_ || flowing_pass_ == 0 || !t.read_live || t.read_pass < flowing_pass_ ||
      t.account.last_ns() != now_ns)
    return;
  auto seen = switches_.find(tid);
  const LastSwitch last = seen == switches_.end() ? LastSwitch::kUnknown : seen->second.last;
  if (t.state != 'R' && t.state != '?') {
    // Seen blocked by a read after the latest collection: blocked from now until its next record.
    t.rec_state = LastSwitch::kBlocked;
    t.wait_state = WaitState(t.state, t.syscall_nr);
    t.wait_known = true;
    t.wait_pass = pass_;
  } else if (t.state == 'R' && (last == LastSwitch::kIn || last == LastSwitch::kPreempted)) {
    t.rec_state = last;  // runnable: the latest record says on a CPU or queued
  } else {
    return;  // runnable, but whether on a CPU or queued only its next record will tell
  }
  t.timed = true;
  t.timed_cpu_ns = t.cpu_at_timing = t.account.last().cpu_ns;
  t.rec_run_ns = t.rec_run_at_read = 0;
  t.pass_switches = 0;
  t.switches_since_read = 0;
  t.rec_since = now_ns;
  t.run_ns = t.queue_ns = t.blocked_ns = 0;
  t.switched = false;
  t.blocked_anew = false;
}

void SamplerCore::Born(uint32_t pid,
                       Process& p,
                       uint32_t tid,
                       uint64_t ts,
                       uint64_t now_ns,
                       std::vector<Output>* out) {
  if (!Wanted(tid))
    return;
  auto [it, inserted] = p.threads.try_emplace(tid);
  Thread& t = it->second;
  if (!inserted && !t.await_fork)
    return;  // listed and sampled before its record came
  if (inserted) {
    t.schedstat = ProcFile(TaskPath(pid, tid, "schedstat"));
    t.stat = ProcFile(TaskPath(pid, tid, "stat"));
  }
  t.await_fork = false;
  t.fresh = false;
  t.born_pass = pass_;
  const uint64_t start = std::min(ts, now_ns);
  t.account.Begin(start, SchedStat{});
  t.state = 'R';
  // A new task is put on a run queue: queued until its first switch-in. Its counters are read
  // in this pass (a baseline for the wake-up delays to come) only if it ran, see BookFromRecords.
  t.timed = true;
  t.timed_cpu_ns = t.cpu_at_timing = 0;
  t.rec_run_ns = t.rec_run_at_read = 0;
  t.pass_switches = 0;
  t.switches_since_read = 0;
  t.rec_state = LastSwitch::kPreempted;
  t.rec_since = start;
  t.read_pass = pass_;
  t.read_live = true;
  out->push_back({pid, tid, -1, MakeEvent(Kind::kTaskStart, now_ns, {0})});
}

bool SamplerCore::SampleThread(uint32_t pid,
                               uint32_t tid,
                               Thread& t,
                               bool is_new,
                               uint64_t now_ns,
                               std::vector<Output>* out) {
  ++reads_;
  t.read_pass = pass_;
  t.read_live = switches_live_;
  Reading r;
  r.now_ns = now_ns;
  if (!ParseSchedStat(t.schedstat.Read(), &r.sched))
    return false;
  const bool ran = is_new || r.sched.run_count != t.account.last().run_count ||
                   r.sched.cpu_ns != t.account.last().cpu_ns;
  t.idle_passes = ran ? 0 : t.idle_passes + 1;
  t.ran_since_discovery = t.ran_since_discovery || ran;
  // A thread whose interval its counters already explain (it ran or queued all along) keeps its
  // state: the letter would only split an empty rest.
  const uint64_t interval = now_ns - t.account.last_ns();
  const uint64_t cpu_delta = r.sched.cpu_ns - std::min(r.sched.cpu_ns, t.account.last().cpu_ns);
  const uint64_t delay_delta =
      r.sched.run_delay_ns - std::min(r.sched.run_delay_ns, t.account.last().run_delay_ns);
  const bool explained = cpu_delta + delay_delta + interval / 50 >= interval;
  // (Guessing that a thread seen blocked that ran briefly is back in the same call would save a
  // read, but mislabels waits by several points when threads are preempted often.)
  // The switch records say it blocked, yet the letter we kept says running: look again, or it
  // could neither be booked from the records nor have its wait classified.
  auto seen = switches_.find(tid);
  const bool recheck = switches_live_ && seen != switches_.end() &&
                       seen->second.last == LastSwitch::kBlocked && t.state == 'R';
  if (ran && !recheck && !is_new && pass_ % kStatEvery != 0 && explained && t.state == 'R') {
    // keep t.state, t.syscall_nr
  } else if (ran || recheck) {
    // Only a thread that ran can have changed state; an idle one costs the one read above.
    // syscall (1-2 us) says "running" or the call a sleeping thread is in; stat (~10 us) is read
    // only when the letter matters (a call that may sleep uninterruptibly, or stopped), for a
    // new thread's start time, and every kStatEvery passes for the CPU it last ran on.
    bool need_stat = is_new || !t.syscall_readable || pass_ % kStatEvery == 0;
    if (t.syscall_readable) {
      if (!t.syscall.is_open())
        t.syscall = ProcFile(TaskPath(pid, tid, "syscall"));
      std::string_view text = t.syscall.Read();
      uint64_t nr = kNoSyscall;
      if (text.empty() || !ParseSyscall(text, &nr)) {
        t.syscall_readable = false;  // no ptrace access to it (Yama): the state letter only
        need_stat = true;
      } else if (text.starts_with("running")) {
        t.state = 'R';
        t.syscall_nr = kNoSyscall;
      } else {
        t.state = 'S';
        t.syscall_nr = nr;
        need_stat = need_stat || MayBeUninterruptible(nr);
      }
    }
    if (need_stat) {
      TaskStat ts;
      if (!ParseTaskStat(t.stat.Read(), &ts))
        return false;
      t.state = ts.state;
      t.cpu = ts.processor;
      if (ts.comm != t.comm) {
        // A process found by the sampler may have been listed before its exec: its own name.
        t.comm = ts.comm;
        out->push_back({pid, tid, -1, MakeEvent(Kind::kThreadName, now_ns, {}), t.comm});
      }
      if (!t.syscall_readable)
        t.syscall_nr = kNoSyscall;
      if (is_new) {
        if (options_.attached && pass_ == 1) {
          // Already running when we attached: its past is not ours to split.
          t.account.Begin(now_ns, r.sched);
        } else {
          uint64_t start =
              std::max({session_start_ns_, prev_pass_ns_, StartTimeNs(ts.start_ticks)});
          t.account.Begin(std::min(start, now_ns), SchedStat{});
          out->push_back({pid, tid, -1, MakeEvent(Kind::kTaskStart, now_ns, {0})});
        }
      }
    }
  }
  r.state = t.state;
  r.syscall = t.syscall_nr;
  auto blocked = [&] {
    // Reading status is dearer than the rest; only asked for a runnable thread with time
    // unaccounted for: did it block since (voluntary switches grew)?
    if (!t.status.is_open())
      t.status = ProcFile(TaskPath(pid, tid, "status"));
    SwitchCounters now;
    if (!ParseStatusSwitches(t.status.Read(), &now))
      return false;
    bool grew = t.switches_known && now.voluntary != t.switches.voluntary;
    t.switches = now;
    t.switches_known = true;
    return grew;
  };
  const bool first_of_attached = is_new && options_.attached && pass_ == 1;
  StateSplit split = t.account.Update(r, blocked);
  if (!first_of_attached)
    PushStates(pid, tid, now_ns, split, out);
  PushSample(pid, tid, now_ns, r.sched.cpu_ns, t.cpu, t.state == 'R' ? kNoSyscall : t.syscall_nr,
             t.state, r.sched.run_count, out);
  return true;
}

void SamplerCore::SampleCpus(uint64_t now_ns, std::vector<Output>* out) {
  std::vector<CpuTimes> cur;
  if (!ParseProcStat(proc_stat_.Read(), &cur))
    return;
  if (!cpu_prev_.empty()) {
    const uint64_t tick = NsPerClockTick();
    for (const CpuTimes& c : cur) {
      auto prev = std::find_if(cpu_prev_.begin(), cpu_prev_.end(),
                               [&](const CpuTimes& p) { return p.cpu == c.cpu; });
      if (prev == cpu_prev_.end())
        continue;  // came online: from the next pass
      auto d = [&](uint64_t now, uint64_t before) {
        return now > before ? (now - before) * tick : 0;
      };
      out->push_back({0, 0, static_cast<int32_t>(c.cpu),
                      MakeEvent(Kind::kCpuSample, now_ns,
                                {d(c.busy, prev->busy), d(c.idle, prev->idle),
                                 d(c.iowait, prev->iowait), d(c.steal, prev->steal)})});
    }
  }
  cpu_prev_ = std::move(cur);
  cpu_prev_ns_ = now_ns;
}

}  // namespace parmon::sched
