// The sampler's accounting from the context-switch records: a thread timed by its switches is
// booked from them, and read from /proc only now and then (see sampler.h).
#include "sched/sampler.h"

#include <algorithm>

#include "sched/events.h"
#include "sched/sampler_tuning.h"

namespace parmon::sched {

using format::Event;
using format::Kind;
using namespace sampler_internal;  // NOLINT: the sampler's own tuning and helpers

StateSplit SamplerCore::SplitFromRecords(Thread& t, bool read, uint64_t* wake) {
  // The wake-up delay a reread found comes out of the blocked time as it is booked.
  *wake = std::min(t.wake_delay_ns, t.blocked_ns);
  t.wake_delay_ns -= *wake;
  // CPU time the counter counted beyond the records' running (the kernel's few microseconds per
  // switch between a thread's switch records) is running too: it comes out of the time the
  // records booked as blocked, then as queued, as far as this interval holds it; the rest is
  // owed to the next intervals. Running adds up to the thread's CPU clock so.
  uint64_t blocked = t.blocked_ns - *wake;
  uint64_t queued = t.queue_ns + *wake;
  const uint64_t from_blocked = std::min(t.account.cpu_owed(), blocked);
  const uint64_t from_queued = std::min(t.account.cpu_owed() - from_blocked, queued);
  blocked -= from_blocked;
  queued -= from_queued;
  // The other way: running the records booked beyond what the counter has just shown (past its
  // lag on a CPU) was time the thread waited for its CPU to come back: queued.
  const uint64_t keep = t.rec_state == LastSwitch::kIn ? kCounterLagNs : 0;
  const uint64_t ahead = t.account.cpu_ahead();
  const uint64_t taken = read && ahead > keep ? std::min(ahead - keep, t.run_ns) : 0;
  queued += taken;
  const uint64_t running = t.run_ns - taken + from_blocked + from_queued;
  t.rec_run_ns += t.run_ns;
  t.timed_cpu_ns += running;
  StateSplit split{};
  split[static_cast<int>(ThreadState::kRunning)] = running;
  split[static_cast<int>(ThreadState::kRunnable)] = queued;
  const ThreadState wait = t.wait_known ? t.wait_state : t.account.last_wait();
  split[static_cast<int>(wait)] += blocked;
  return split;
}

uint64_t SamplerCore::BookExit(uint32_t pid,
                               uint32_t tid,
                               Thread& t,
                               uint64_t now_ns,
                               std::vector<Output>* out) {
  const uint64_t end = std::max(std::min(t.exit_ns, now_ns), t.account.last_ns());
  // Its counters are gone: what the records missed since the last reading is estimated at the
  // rate the counter showed until then (never below the records: steal can make the counter
  // fall short of them, which is no CPU time to take back), and no more than a reading would
  // have owed for the switches since (see Reread): the counter read while the thread was on a
  // CPU runs ahead of the records booked up to the pass by up to the time the read took, and
  // a ratio from 20 ms of running magnified that into milliseconds of queued time booked as
  // running.
  const uint64_t kernel_run =
      t.account.last().cpu_ns - std::min(t.account.last().cpu_ns, t.cpu_at_timing);
  if (t.rec_run_at_read >= kMinRunForRatio && kernel_run > t.rec_run_at_read) {
    const double ratio = std::min(
        kMaxCpuRatio, static_cast<double>(kernel_run) / static_cast<double>(t.rec_run_at_read));
    const uint64_t since_read = t.rec_run_ns + t.run_ns - t.rec_run_at_read;
    const auto estimate = static_cast<uint64_t>(static_cast<double>(since_read) * (ratio - 1.0));
    t.account.Owe(std::min(estimate, t.switches_since_read * kMaxMissPerSwitchNs));
  }
  uint64_t wake = 0;
  const StateSplit split = SplitFromRecords(t, false, &wake);
  t.account.Book(end, split, wake);
  if (end > 0 && t.run_ns + t.queue_ns + t.blocked_ns > 0)
    PushStates(pid, tid, end, split, out);
  // Its CPU time as the records add it up (the counters can no longer be read), with what was
  // owed and found no room before the exit and what a reading counted ahead of the records that
  // they never booked (prepaid), for `parmon info`, which takes a thread's CPU time from its last
  // ThreadSample: never less than the last reading, so that the samples never go back.
  const uint64_t cpu = std::max(t.timed_cpu_ns + t.account.cpu_owed() + t.account.cpu_prepaid(),
                                t.account.last().cpu_ns);
  PushSample(pid, tid, end, cpu, t.cpu, kNoSyscall, 'X', t.account.last().run_count, out);
  out->push_back({pid, tid, -1, MakeEvent(Kind::kTaskExit, end, {cpu})});
  return cpu;
}

void SamplerCore::Advance(Thread& t, uint64_t to_ns, LastSwitch next, uint32_t cpu) {
  const uint64_t from = std::max(t.rec_since, t.account.last_ns());
  if (to_ns > from) {
    const uint64_t d = to_ns - from;
    if (t.rec_state == LastSwitch::kIn)
      t.run_ns += d;
    else if (t.rec_state == LastSwitch::kPreempted)
      t.queue_ns += d;
    else
      t.blocked_ns += d;
    t.rec_since = to_ns;
  }
  if (next == LastSwitch::kUnknown)
    return;  // the end of a pass: the state goes on
  t.switched = true;
  ++t.pass_switches;
  ++t.switches_since_read;
  if (next == LastSwitch::kIn && t.rec_state == LastSwitch::kBlocked)
    t.woke = true;
  t.rec_state = next;
  t.cpu = static_cast<int32_t>(cpu);
  if (next == LastSwitch::kIn)
    t.ran_since_discovery = true;
  else if (next == LastSwitch::kBlocked)
    t.blocked_anew = true;
}

bool SamplerCore::BookFromRecords(uint32_t pid,
                                  uint32_t tid,
                                  Thread& t,
                                  uint64_t now_ns,
                                  std::vector<Output>* out) {
  Advance(t, now_ns, LastSwitch::kUnknown, 0);
  // A thread that switched: its counters, for the run-queue delay after its wake-ups (the
  // records show when it blocked and when it next ran, not when it woke up in between) and its
  // CPU time. One pread of schedstat, the cheapest of its files, every kCountersEvery passes
  // (spread by tid); the delay found is booked from the thread's blocked time as it comes.
  // A thread that stays on a CPU without switching is read as often: its ThreadSample carries
  // the CPU time that `parmon info` shows.
  SchedStat sched;
  t.active_since_read = t.active_since_read || t.switched || t.run_ns > 0;
  // A young thread that woke is read at once: it may not live until the next read, and its
  // wake-up delay would stay booked as blocked.
  const bool read_counters =
      t.active_since_read &&
      (pass_ >= t.read_pass + kCountersEvery || (pass_ + tid) % kCountersEvery == 0 ||
       t.pass_switches >= kBusySwitches || (t.woke && pass_ < t.born_pass + kCountersEvery));
  t.woke = false;
  t.pass_switches = 0;
  if (read_counters) {
    t.active_since_read = false;
    if (!ParseSchedStat(t.schedstat.Read(), &sched))
      return false;
    // The counters hold this pass's records too, which are booked below, after the reading;
    // and a thread on a CPU went on running from the pass to the reading, which the next
    // pass's records book.
    const uint64_t read_ns = ClockNs(CLOCK_MONOTONIC);
    const uint64_t late = read_ns - std::min(read_ns, pass_mono_ns_);
    const uint64_t pending_run = t.run_ns + (t.rec_state == LastSwitch::kIn ? late : 0);
    t.wake_delay_ns += t.account.Reread(sched, t.switches_since_read * kMaxMissPerSwitchNs,
                                        pending_run, t.queue_ns);
    t.switches_since_read = 0;
    t.rec_run_at_read = t.rec_run_ns + t.run_ns;
    t.read_pass = pass_;
    t.read_live = true;
  }
  // What a blocked thread waits in: read when not known, and again after it blocked anew, every
  // t.wait_every passes (see ReadWait). Between reads its blocked time goes where it was last
  // seen waiting.
  const bool read_wait = t.rec_state == LastSwitch::kBlocked &&
                         (!t.wait_known || (t.blocked_anew && pass_ >= t.wait_pass + t.wait_every));
  if (read_wait && !ReadWait(pid, tid, t))
    return false;
  ++(read_counters || read_wait ? reads_ : assumed_);
  uint64_t wake = 0;
  const StateSplit split = SplitFromRecords(t, read_counters, &wake);
  t.account.Book(now_ns, split, wake);
  PushStates(pid, tid, now_ns, split, out);
  const bool blocked = t.rec_state == LastSwitch::kBlocked;
  if (!blocked)
    t.state = 'R';
  else if (t.state == 'R' || t.state == '?')
    t.state = 'S';
  if (read_counters)
    PushSample(pid, tid, now_ns, sched.cpu_ns, t.cpu, blocked ? t.syscall_nr : kNoSyscall, t.state,
               sched.run_count, out);
  t.run_ns = t.queue_ns = t.blocked_ns = 0;
  t.switched = false;
  return true;
}

bool SamplerCore::ReadWait(uint32_t pid, uint32_t tid, Thread& t) {
  uint64_t nr = kNoSyscall;
  if (t.syscall_readable) {
    if (!t.syscall.is_open())
      t.syscall = ProcFile(TaskPath(pid, tid, "syscall"));
    std::string_view text = t.syscall.Read();
    if (text.empty() || !ParseSyscall(text, &nr)) {
      t.syscall_readable = false;  // no ptrace access to it (Yama): the state letter only
      nr = kNoSyscall;
    } else if (text.starts_with("running")) {
      // Runnable although its last record is a block: woken, and queued since (or switched in
      // after the records were collected, which its next record will show). Queued from now;
      // the counters' run-queue delay, read later, is credited with what is booked so.
      t.rec_state = LastSwitch::kPreempted;
      return true;
    }
  }
  // The state letter only where it matters: a call that may sleep uninterruptibly (disk, D) or
  // no call known. (A stopped process is found from its own stat letter: see SampleProcess.)
  char letter = 'S';
  if (!t.syscall_readable || MayBeUninterruptible(nr)) {
    TaskStat ts;
    if (!ParseTaskStat(t.stat.Read(), &ts))
      return false;
    if (ts.state == 'R') {
      t.rec_state = LastSwitch::kPreempted;  // woken, as above
      return true;
    }
    letter = ts.state;
  }
  t.state = letter;
  t.syscall_nr = nr;
  // A thread found in the same kind of wait again is read half as often, up to every
  // kMaxWaitEvery passes; one found in another is read again at its next block.
  const ThreadState wait = WaitState(letter, nr);
  t.wait_every =
      t.wait_known && wait == t.wait_state ? std::min(2 * t.wait_every, kMaxWaitEvery) : 1;
  t.wait_state = wait;
  t.wait_known = true;
  t.wait_pass = pass_;
  t.blocked_anew = false;
  return true;
}

bool SamplerCore::CanAssume(uint32_t tid, const Thread& t, ThreadState* state) const {
  // The latest read must have come after a complete collection, with every one since complete:
  // then no record since means no switch since that collection, so what the read saw held
  // throughout (see Sample).
  if (!switches_live_ || flowing_pass_ == 0 || !t.read_live || t.read_pass < flowing_pass_)
    return false;
  auto seen = switches_.find(tid);
  if (seen != switches_.end() && seen->second.pass == pass_)
    return false;  // switched: read it
  const LastSwitch last = seen == switches_.end() ? LastSwitch::kUnknown : seen->second.last;
  if (t.state == 'R') {
    // Running or queued: only its latest record tells which. The letter may also be one the
    // read kept from before (a thread that blocked at the very end of an interval).
    if (t.assumed_passes >= kAssumeRunningPasses)
      return false;
    if (last == LastSwitch::kIn) {
      *state = ThreadState::kRunning;
      return true;
    }
    if (last == LastSwitch::kPreempted) {
      *state = ThreadState::kRunnable;
      return true;
    }
    return false;
  }
  // Blocked when read (also a thread blocked since before the records began: no record at all).
  if (t.state == '?' || last == LastSwitch::kIn || last == LastSwitch::kPreempted ||
      t.assumed_passes >= kAssumeWaitingPasses)
    return false;
  *state = WaitState(t.state, t.syscall_nr);
  return *state != ThreadState::kRunnable && *state != ThreadState::kRunning;
}

}  // namespace parmon::sched
