#include "sched/switches.h"

#include <fmt/format.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "sched/events.h"
#include "sched/proc.h"
#include "sched/switch_cost.h"

namespace parmon::sched {

using format::Event;
using format::Kind;

namespace {

// PERF_RECORD_MISC_SWITCH_OUT_PREEMPT arrived in Linux 4.17; older headers lack it.
#ifndef PERF_RECORD_MISC_SWITCH_OUT_PREEMPT
#define PERF_RECORD_MISC_SWITCH_OUT_PREEMPT (1 << 14)
#endif

struct SampleId {  // sample_id_all trailer for sample_type = TID | TIME | CPU
  uint32_t pid, tid;
  uint64_t time;
  uint32_t cpu, reserved;
};
static_assert(sizeof(SampleId) == 24);

long PerfEventOpen(perf_event_attr* attr, pid_t pid, int cpu) {
  return syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

std::string RefusalMessage(int err) {
  std::string paranoid = ReadProcFile("/proc/sys/kernel/perf_event_paranoid");
  while (!paranoid.empty() && (paranoid.back() == '\n' || paranoid.back() == ' '))
    paranoid.pop_back();
  if (err == EACCES || err == EPERM)
    return fmt::format(
        "not recorded: the kernel refused perf_event_open ({}; "
        "kernel.perf_event_paranoid = {}); sampling goes on without them",
        strerror(err), paranoid.empty() ? "?" : paranoid);
  if (err == ENOSYS)
    return "not recorded: this kernel has no perf_event_open; sampling goes on without them";
  if (err == EINVAL)
    return "not recorded: this kernel has no context-switch records (they need Linux 4.3); "
           "sampling goes on without them";
  return fmt::format("not recorded: perf_event_open failed ({}); sampling goes on without them",
                     strerror(err));
}

SwitchBudgetOptions BudgetOptions(const SwitchOptions& o) {
  SwitchBudgetOptions b;
  b.share = o.periodic ? 0 : o.budget;  // periodic mode records switches only when asked
  b.cost_ns = o.record_cost_ns;
  b.window_ns = o.budget_window_ns;
  return b;
}

}  // namespace

SwitchRecorder::SwitchRecorder(SwitchOptions options)
    : options_(std::move(options)), budget_(BudgetOptions(options_)) {
  if (!options_.activity)
    options_.activity = std::make_shared<SwitchActivity>();
  std::lock_guard<std::mutex> lock(options_.activity->mu_);
  options_.activity->recorder_ = this;
}

SwitchRecorder::~SwitchRecorder() {
  {
    std::lock_guard<std::mutex> lock(options_.activity->mu_);
    options_.activity->recorder_ = nullptr;
  }
  for (auto& b : buffers_)
    if (b.base)
      munmap(b.base, b.size);
  for (int fd : fds_)
    close(fd);
}

bool SwitchRecorder::Wanted(uint32_t tid) const {
  return options_.only_tids.empty() || options_.only_tids.count(tid) != 0;
}

Status SwitchRecorder::Open(const std::vector<pid_t>& tasks,
                            bool inherit,
                            bool enable_on_exec,
                            bool monotonic_clock) {
  std::lock_guard<std::mutex> lock(options_.activity->mu_);
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;  // Linux 3.12: an event that only carries side-band records
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
  attr.sample_id_all = 1;
  attr.context_switch = 1;  // Linux 4.3
  attr.task = 1;
  attr.comm = 1;  // COMM records: a thread renamed by exec or prctl(PR_SET_NAME) takes the name
  attr.inherit = inherit ? 1 : 0;
  attr.exclude_kernel = 1;  // what perf_event_paranoid 2 allows; switch records still come
  attr.exclude_hv = 1;
  attr.disabled = enable_on_exec ? 1 : 0;
  attr.enable_on_exec = enable_on_exec ? 1 : 0;
  if (monotonic_clock) {
    attr.use_clockid = 1;  // Linux 4.1: stamp records with the session's clock
    attr.clockid = CLOCK_MONOTONIC;
  }
  const long page = sysconf(_SC_PAGESIZE);
  const int ncpu = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (buffers_.empty())
    buffers_.resize(static_cast<size_t>(ncpu));
  for (pid_t task : tasks) {
    for (int cpu = 0; cpu < ncpu; ++cpu) {
      int fd = static_cast<int>(PerfEventOpen(&attr, task, cpu));
      if (fd < 0) {
        int err = errno;
        if (err == ESRCH)
          break;  // the thread ended meanwhile
        return Status::Error(RefusalMessage(err));
      }
      fds_.push_back(fd);
      Buffer& b = buffers_[static_cast<size_t>(cpu)];
      if (b.fd >= 0) {
        if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, b.fd) != 0)
          return Status::Error(
              fmt::format("not recorded: cannot share a CPU buffer ({})", strerror(errno)));
        continue;
      }
      // Smaller buffers when the locked-memory allowance (perf_event_mlock_kb) is short.
      for (uint32_t pages = options_.buffer_pages; pages >= 4; pages /= 2) {
        size_t size = static_cast<size_t>(page) * (1 + pages);
        void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
          b = Buffer{cpu, fd, p, size};
          break;
        }
      }
      if (!b.base)
        return Status::Error(
            fmt::format("not recorded: cannot map a perf buffer ({})", strerror(errno)));
    }
  }
  opened_ = true;
  return Status::Ok();
}

Status SwitchRecorder::ChildCreated(recorder::SourceSink& recorder, pid_t pid) {
  if (opened_ || !open_error_.empty())
    return Status::Ok();
  // The child waits for us before exec: enable_on_exec starts the records at its first
  // instruction, and inherit follows every thread and process it creates.
  Status s = Open({pid}, true, true, recorder.clock().base == ClockBase::kMonotonic);
  if (!s.ok())
    open_error_ = s.message();
  return Status::Ok();
}

Status SwitchRecorder::Start(recorder::SourceSink& recorder) {
  if (!open_error_.empty())
    return Status::Error(open_error_);
  if (opened_)
    return Status::Ok();
  pid_t pid = recorder.child_pid();
  if (pid <= 0)
    return Status::Error("not recorded: no process to follow");
  std::vector<pid_t> tasks;
  for (uint32_t tid : ListTasks(static_cast<uint32_t>(pid)))
    if (Wanted(tid))
      tasks.push_back(static_cast<pid_t>(tid));
  if (tasks.empty())
    return Status::Error("not recorded: none of the selected threads exist");
  // Attached to a running process: one event per thread and CPU; threads they create inherit
  // them. With --threads only the chosen threads, and nothing they create.
  Status s = Open(tasks, options_.only_tids.empty(), false,
                  recorder.clock().base == ClockBase::kMonotonic);
  if (!s.ok()) {
    open_error_ = s.message();
    return s;
  }
  return Status::Ok();
}

void SwitchRecorder::ReadBuffer(Buffer& b) {
  auto* meta = static_cast<perf_event_mmap_page*>(b.base);
  const long page = sysconf(_SC_PAGESIZE);
  const uint8_t* data = static_cast<const uint8_t*>(b.base) + page;
  const uint64_t data_size = b.size - static_cast<size_t>(page);
  // data_head pairs with the kernel's release after writing records; data_tail's release tells
  // the kernel it may overwrite what we read.
  uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = meta->data_tail;
  while (tail < head) {
    perf_event_header hdr;
    auto copy = [&](uint64_t at, void* dst, size_t n) {
      size_t off = static_cast<size_t>(at % data_size);
      size_t first = std::min<size_t>(n, data_size - off);
      std::memcpy(dst, data + off, first);
      std::memcpy(static_cast<uint8_t*>(dst) + first, data, n - first);
    };
    copy(tail, &hdr, sizeof hdr);
    if (hdr.size < sizeof hdr || tail + hdr.size > head)
      break;
    scratch_.resize(hdr.size);
    copy(tail, scratch_.data(), hdr.size);
    tail += hdr.size;
    if (hdr.size < sizeof hdr + sizeof(SampleId))
      continue;
    SampleId id;
    std::memcpy(&id, scratch_.data() + hdr.size - sizeof id, sizeof id);
    Record r{id.time, id.pid, id.tid, id.cpu, static_cast<uint16_t>(hdr.type), hdr.misc, 0, 0};
    const uint8_t* body = scratch_.data() + sizeof hdr;
    switch (hdr.type) {
      case PERF_RECORD_SWITCH:
        break;
      case PERF_RECORD_LOST: {
        uint64_t v[2];
        std::memcpy(v, body, sizeof v);
        r.a = v[1];
        r.cpu = static_cast<uint32_t>(b.cpu);
        break;
      }
      case PERF_RECORD_FORK:
      case PERF_RECORD_EXIT: {
        uint32_t v[4];  // pid, ppid, tid, ptid
        std::memcpy(v, body, sizeof v);
        r.pid = v[0];
        r.tid = v[2];
        r.a = v[1];
        r.b = v[3];
        break;
      }
      case PERF_RECORD_COMM: {
        // pid, tid, then the name (at most 16 bytes with its NUL, padded to 8): carried in a, b.
        const size_t body_size = hdr.size - sizeof hdr - sizeof(SampleId);
        if (body_size < 8)
          continue;
        uint32_t v[2];
        std::memcpy(v, body, sizeof v);
        r.pid = v[0];
        r.tid = v[1];
        char name[16] = {};
        std::memcpy(name, body + 8, std::min(sizeof name, body_size - 8));
        std::memcpy(&r.a, name, 8);
        std::memcpy(&r.b, name + 8, 8);
        pending_.push_back(r);  // not a switch: neither counted nor the sampler's business
        continue;
      }
      default:
        continue;
    }
    ++records_;
    pending_.push_back(r);
    if (r.type == PERF_RECORD_LOST) {
      options_.activity->lost_ = true;
    } else if (r.tid != 0 && Wanted(r.tid)) {
      LastSwitch last = r.type == PERF_RECORD_EXIT                       ? LastSwitch::kGone
                        : r.type == PERF_RECORD_FORK                     ? LastSwitch::kUnknown
                        : !(r.misc & PERF_RECORD_MISC_SWITCH_OUT)        ? LastSwitch::kIn
                        : (r.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) ? LastSwitch::kPreempted
                                                                         : LastSwitch::kBlocked;
      options_.activity->changes_.push_back({r.ts, r.pid, r.tid, r.cpu, last});
    }
  }
  __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

void SwitchRecorder::ReadBuffers() {
  // Each buffer's records are in time order: each read appends one sorted run of changes.
  auto& runs = options_.activity->run_ends_;
  for (auto& b : buffers_)
    if (b.base) {
      ReadBuffer(b);
      if (runs.empty() || runs.back() != options_.activity->changes_.size())
        runs.push_back(options_.activity->changes_.size());
      if (pending_run_ends_.empty() || pending_run_ends_.back() != pending_.size())
        pending_run_ends_.push_back(pending_.size());
    }
}

void SwitchRecorder::Drain(recorder::SourceSink* recorder, uint64_t until_ns) {
  std::vector<Record> ready;
  {
    // Handled outside the lock: the sampler's thread waits on it only for the buffer reading.
    std::lock_guard<std::mutex> lock(options_.activity->mu_);
    ReadBuffers();
    // pending_ is the sorted records held back from the last drain, then one run per buffer read
    // since, each in time order: merged run by run, so the held-back ones are not sorted again at
    // every drain (a full sort of them was the recorder's dearest step on a switch-heavy program).
    auto by_ts = [](const Record& x, const Record& y) { return x.ts < y.ts; };
    size_t sorted = pending_sorted_;
    for (size_t end : pending_run_ends_) {
      if (end <= sorted)
        continue;
      const auto b = pending_.begin();
      if (!std::is_sorted(b + static_cast<ptrdiff_t>(sorted), b + static_cast<ptrdiff_t>(end),
                          by_ts))
        std::stable_sort(b + static_cast<ptrdiff_t>(sorted), b + static_cast<ptrdiff_t>(end),
                         by_ts);
      std::inplace_merge(b, b + static_cast<ptrdiff_t>(sorted), b + static_cast<ptrdiff_t>(end),
                         by_ts);
      sorted = end;
    }
    pending_run_ends_.clear();
    size_t n = 0;
    while (n < pending_.size() && pending_[n].ts < until_ns)
      ++n;
    ready.assign(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(n));
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(n));
    pending_sorted_ = pending_.size();
  }
  for (const Record& r : ready)
    Handle(recorder, r);
}

bool SwitchActivity::Collect(std::vector<SwitchChange>* changes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!recorder_ || !recorder_->opened_ || stopped_)
    return false;
  recorder_->ReadBuffers();
  if (lost_) {
    lost_ = false;
    changes_.clear();
    run_ends_.clear();
    return false;
  }
  // Each CPU's buffer is in time order, not the batch: a thread's switch-out on one CPU and its
  // switch-in on another must come out in the order they happened. Merging the sorted runs
  // costs a fraction of sorting the whole.
  auto by_ts = [](const SwitchChange& x, const SwitchChange& y) { return x.ts < y.ts; };
  for (size_t i = 1; i < run_ends_.size(); ++i)
    std::inplace_merge(changes_.begin(),
                       changes_.begin() + static_cast<ptrdiff_t>(run_ends_[i - 1]),
                       changes_.begin() + static_cast<ptrdiff_t>(run_ends_[i]), by_ts);
  run_ends_.clear();
  changes->insert(changes->end(), changes_.begin(), changes_.end());
  changes_.clear();
  return true;
}

void SwitchRecorder::Handle(recorder::SourceSink* recorder, const Record& r) {
  if (options_.periodic) {
    if (interval_start_ == 0)
      interval_start_ = r.ts;
    while (r.ts >= interval_start_ + options_.period_ns)
      FlushInterval(recorder, interval_start_ + options_.period_ns);
  }
  auto emit = [&](uint32_t pid, uint32_t tid, const Event& e) {
    if (recorder)
      recorder->Append(recorder->ThreadLocation(pid, tid), format::Source::kSched, e);
  };
  if (r.type == PERF_RECORD_LOST) {
    lost_ += r.a;
    if (recorder)
      recorder->Append(recorder->CpuLocation(r.cpu), format::Source::kSched,
                       MakeEvent(Kind::kSchedLost, r.ts, {r.a}));
    return;
  }
  if (r.tid == 0 || !Wanted(r.tid))
    return;  // the idle task; threads not selected
  if (r.type == PERF_RECORD_FORK) {
    if (r.pid != r.a && recorder)
      recorder->NoteProcess(r.pid, static_cast<uint32_t>(r.a), "");
    emit(r.pid, r.tid, MakeEvent(Kind::kTaskStart, r.ts, {r.b}));
    return;
  }
  if (r.type == PERF_RECORD_EXIT) {
    budget_.Exit(r.ts, r.tid);
    emit(r.pid, r.tid, MakeEvent(Kind::kTaskExit, r.ts, {0}));
    return;
  }
  if (r.type == PERF_RECORD_COMM) {
    char name[17] = {};
    std::memcpy(name, &r.a, 8);
    std::memcpy(name + 8, &r.b, 8);
    if (recorder)
      recorder->RenameThread(r.pid, r.tid, name, r.ts);
    return;
  }
  budget_.Switch(r.ts, r.tid, (r.misc & PERF_RECORD_MISC_SWITCH_OUT) != 0);
  ThreadTrack& t = threads_[r.tid];
  t.pid = r.pid;
  t.active = true;
  if (r.misc & PERF_RECORD_MISC_SWITCH_OUT) {
    bool preempt = (r.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0;
    if (t.on_cpu)
      t.on_cpu_ns += r.ts - std::max(t.in_ts, interval_start_);
    t.on_cpu = false;
    t.last_cpu = static_cast<int32_t>(r.cpu);
    ++(preempt ? t.preempted : t.blocked);
    if (!options_.periodic)
      emit(r.pid, r.tid, MakeEvent(Kind::kSwitchOut, r.ts, {r.cpu, preempt}));
  } else {
    if (t.last_cpu >= 0 && static_cast<uint32_t>(t.last_cpu) != r.cpu) {
      ++t.migrations;
      if (!options_.periodic)
        emit(r.pid, r.tid,
             MakeEvent(Kind::kMigrate, r.ts, {static_cast<uint64_t>(t.last_cpu), r.cpu}));
    }
    t.on_cpu = true;
    t.in_ts = r.ts;
    t.last_cpu = static_cast<int32_t>(r.cpu);
    ++t.switch_ins;
    if (!options_.periodic)
      emit(r.pid, r.tid, MakeEvent(Kind::kSwitchIn, r.ts, {r.cpu}));
  }
}

void SwitchRecorder::FlushInterval(recorder::SourceSink* recorder, uint64_t end_ns) {
  for (auto it = threads_.begin(); it != threads_.end();) {
    ThreadTrack& t = it->second;
    if (t.on_cpu)
      t.on_cpu_ns += end_ns - std::max(t.in_ts, interval_start_);
    if ((t.active || t.on_cpu) && recorder)
      recorder->Append(
          recorder->ThreadLocation(t.pid, it->first), format::Source::kSched,
          MakeEvent(Kind::kSwitchCounts, end_ns,
                    {t.switch_ins, t.preempted, t.blocked, t.migrations, t.on_cpu_ns}));
    t.switch_ins = t.preempted = t.blocked = t.migrations = t.on_cpu_ns = 0;
    // Memory stays bounded: a thread quiet and off the CPU for a whole interval is forgotten
    // (all that is lost is its last CPU, so its next migration goes uncounted).
    if (!t.active && !t.on_cpu) {
      it = threads_.erase(it);
      continue;
    }
    t.active = false;
    ++it;
  }
  interval_start_ = end_ns;
}

void SwitchRecorder::Poll(recorder::SourceSink& recorder, uint64_t now_ns) {
  if (!opened_ || stopped_ns_ != 0)
    return;
  // Another CPU's buffer may still be receiving records a few microseconds old; 20 ms is ample.
  constexpr uint64_t kHoldBack = 20'000'000;
  if (now_ns > kHoldBack)
    Drain(&recorder, now_ns - kHoldBack);
  if (budget_.exceeded())
    StopForBudget(recorder);
}

void SwitchRecorder::Enable(bool on) {
  // An ioctl on an inherit event applies to the events the kernel made from it in the threads
  // and processes created since (perf_event_for_each_child), and one created later copies the
  // event's state, off once disabled; enable_on_exec was spent at the command's exec.
  for (int fd : fds_)
    ioctl(fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
}

void SwitchRecorder::StopForBudget(recorder::SourceSink& recorder) {
  Enable(false);
  // Every record the kernel wrote is in the buffers once the ioctls returned: read them all.
  stopped_ns_ = std::max<uint64_t>(recorder.clock().NowNs(), 1);
  Drain(&recorder, ~uint64_t{0});
  {
    // From now on the sampler reads every thread's /proc files, as without records.
    std::lock_guard<std::mutex> lock(options_.activity->mu_);
    options_.activity->stopped_ = true;
    options_.activity->changes_.clear();
    options_.activity->run_ends_.clear();
  }
  const BudgetWindow& w = budget_.over();
  const pid_t root = recorder.child_pid();
  format::Event e = MakeEvent(
      Kind::kSwitchesStopped, stopped_ns_,
      {static_cast<uint64_t>(root > 0 ? root : 0), records_.load(), w.records, w.length_ns,
       w.cpu_ns, static_cast<uint64_t>(std::llround(options_.record_cost_ns)),
       static_cast<uint64_t>(std::llround(options_.budget * 1e6))});
  recorder.AppendDefinition(e);
}

void SwitchRecorder::Stop(recorder::SourceSink& recorder) {
  if (!opened_)
    return;
  Drain(&recorder, ~uint64_t{0});
  if (options_.periodic && interval_start_ != 0) {
    uint64_t last = interval_start_;
    for (const auto& [tid, t] : threads_)
      last = std::max(last, t.in_ts);
    FlushInterval(&recorder, std::max(last, interval_start_ + 1));
  }
  if (stopped_ns_ != 0)
    recorder.AddEndValue("switch_records_stopped_ns", std::to_string(stopped_ns_));
  recorder.AddEndValue("switch_records", std::to_string(records_));
  recorder.AddEndValue("switch_records_lost", std::to_string(lost_));
  // What each record cost the program's threads (the report's overhead line), measured now that
  // the program has ended, so the measurement takes nothing from it. The measurement takes about
  // 0.1 s: a run with fewer records than kMeasureCostFrom, whose records cost it under a
  // millisecond at any cost this VM or a real machine has shown (150-500 ns), keeps the build's
  // estimate instead, so that a short command under `parmon record` ends as fast as it ran.
  constexpr uint64_t kMeasureCostFrom = 2000;
  if (records_ >= kMeasureCostFrom) {
    auto cost = MeasureSwitchRecordCost();
    if (cost.ok()) {
      recorder.AddEndValue("switch_record_cost_ns", fmt::format("{:.1f}", cost->ns_per_record));
      recorder.AddEndValue("calibration_cpu_ns", std::to_string(cost->cpu_ns));
    }
  }
}

}  // namespace parmon::sched
