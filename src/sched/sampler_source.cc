// ProcSampler: the sampler as a recorder source, sampling on its own thread (see sampler.h).
#include "sched/sampler.h"

#include <algorithm>
#include <chrono>

#include "sched/events.h"
#include "sched/monitor.h"
#include "sched/sampler_tuning.h"

namespace parmon::sched {

using format::Event;
using format::Kind;
using namespace sampler_internal;  // NOLINT: the sampler's own tuning and helpers

// --- ProcSampler ---

ProcSampler::ProcSampler(SamplerOptions options)
    : options_(std::move(options)), period_ns_(options_.period_ns) {}

void ProcSampler::SetPeriod(uint64_t period_ns) {
  period_ns_.store(period_ns, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();  // the next pass on the new period's grid, not after the old period
}

ProcSampler::~ProcSampler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

Status ProcSampler::Start(recorder::SourceSink& recorder) {
  clock_ = recorder.clock();
  if (clock_.base != ClockBase::kMonotonic && !clock_.ticks_are_tsc)
    return Status::Error("the session clock cannot be read from here; sampling is off");
  core_ = std::make_unique<SamplerCore>(options_, SessionNow());
  if (shm::MonitorTable* table = recorder.monitor_table())
    monitor_ = std::make_unique<MonitorPublisher>(table, recorder.segment_header(), clock_);
  if (recorder.child_pid() > 0) {
    core_->AddProcess(static_cast<uint32_t>(recorder.child_pid()));
    known_pids_.insert(static_cast<uint32_t>(recorder.child_pid()));
  }
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

uint64_t ProcSampler::SessionNow() const {
  return clock_.base == ClockBase::kMonotonic ? MonotonicNs() : clock_.NowNs();
}

void ProcSampler::Pass() {
  std::vector<SamplerCore::Output> batch;
  const uint64_t now = SessionNow();
  core_->Sample(now, &batch);
  // The program's watched threads see this pass before the recorder's loop delivers it.
  if (monitor_)
    monitor_->Publish(batch, now, period_ns_.load(std::memory_order_relaxed));
  passes_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  ready_.insert(ready_.end(), batch.begin(), batch.end());
}

void ProcSampler::Loop() {
  uint64_t next_ns = MonotonicNs();
  for (;;) {
    std::set<uint32_t> pids;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_)
        break;
      pids.swap(new_pids_);
    }
    for (uint32_t pid : pids)
      core_->AddProcess(pid);
    Pass();
    cpu_ns_.store(ClockNs(CLOCK_THREAD_CPUTIME_ID), std::memory_order_relaxed);
    // The next pass on the period's grid; a pass that overran skips the slots it missed.
    const uint64_t period = period_ns_.load(std::memory_order_relaxed);
    if (period != options_.period_ns) {  // `parmon ctl period`: a new grid from now
      options_.period_ns = period;
      next_ns = MonotonicNs();
    }
    next_ns += period;
    uint64_t mono = MonotonicNs();
    if (next_ns <= mono) {
      overruns_.fetch_add(1, std::memory_order_relaxed);
      next_ns = mono + period - (mono - next_ns) % period;
    }
    // steady_clock is CLOCK_MONOTONIC on Linux; waiting on the condition lets Stop end it at once.
    std::unique_lock<std::mutex> lock(mu_);
    auto deadline = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(next_ns));
    cv_.wait_until(lock, deadline, [&] {
      return stop_ || period_ns_.load(std::memory_order_relaxed) != options_.period_ns;
    });
    if (stop_)
      break;
  }
}

void ProcSampler::Deliver(recorder::SourceSink& recorder) {
  std::vector<SamplerCore::Output> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(ready_);
    for (const auto& [pid, ppid] : recorder.processes())
      if (known_pids_.insert(pid).second)
        new_pids_.insert(pid);
  }
  for (const auto& o : batch) {
    if (!o.name.empty()) {
      recorder.RenameThread(o.pid, o.tid, o.name, o.event.ts);
      continue;
    }
    uint32_t loc = o.tid != 0 ? recorder.ThreadLocation(o.pid, o.tid)
                              : recorder.CpuLocation(static_cast<uint32_t>(o.cpu));
    recorder.Append(loc, format::Source::kSampler, o.event);
  }
}

void ProcSampler::Poll(recorder::SourceSink& recorder, uint64_t) {
  Deliver(recorder);
}

void ProcSampler::Stop(recorder::SourceSink& recorder) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
  // One last pass: it books the timed threads up to their EXIT records (the program has usually
  // ended by now), so a run's last partial period is not lost. The switch recorder stops after
  // us: its buffers are still there to collect.
  if (core_)
    Pass();
  Deliver(recorder);
  recorder.AddEndValue("sampler_passes", std::to_string(passes_.load()));
  recorder.AddEndValue("sampler_overruns", std::to_string(overruns_.load()));
  recorder.AddEndValue("sampler_cpu_ns", std::to_string(cpu_ns_.load()));
}

}  // namespace parmon::sched
