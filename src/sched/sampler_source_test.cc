// The sampler as a source behind recorder::SourceSink: driven by a fake sink that only collects
// what it is given (no shared memory, no trace file, no child process), it samples this test
// process and hands back thread and CPU samples on locations it defined through the sink.
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "recorder/source_sink.h"
#include "sched/sampler.h"

namespace parmon::sched {
namespace {

class FakeSink : public recorder::SourceSink {
 public:
  FakeSink() : clock_(CalibrateClock()) {}
  const TickConversion& clock() const override { return clock_; }
  pid_t child_pid() const override { return getpid(); }
  bool attached() const override { return true; }
  uint32_t ThreadLocation(uint32_t pid, uint32_t tid) override {
    auto [it, inserted] = threads_.emplace(std::make_pair(pid, tid), next_);
    if (inserted)
      ++next_;
    return it->second;
  }
  uint32_t CpuLocation(uint32_t cpu) override {
    auto [it, inserted] = cpus_.emplace(cpu, next_);
    if (inserted)
      ++next_;
    return it->second;
  }
  void Append(uint32_t location, format::Source source, const format::Event& e) override {
    events_.push_back({location, source, e.kind_enum()});
  }
  void AppendDefinition(const format::Event&) override { ++definitions_; }
  const std::map<uint32_t, uint32_t>& processes() const override { return processes_; }
  void NoteProcess(uint32_t pid, uint32_t ppid, const std::string&) override {
    processes_[pid] = ppid;
  }
  void AddEndValue(std::string key, std::string value) override { end_[key] = value; }

  struct Appended {
    uint32_t location;
    format::Source source;
    format::Kind kind;
  };
  TickConversion clock_;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> threads_;
  std::map<uint32_t, uint32_t> cpus_;
  std::map<uint32_t, uint32_t> processes_;
  std::vector<Appended> events_;
  std::map<std::string, std::string> end_;
  uint32_t next_ = 1;
  int definitions_ = 0;
};

TEST(SamplerSource, EmitsThreadAndCpuSamplesThroughTheSink) {
  FakeSink sink;
  SamplerOptions options;
  options.period_ns = 1'000'000;
  options.attached = true;
  ProcSampler sampler(options);
  ASSERT_TRUE(sampler.Start(sink).ok());
  // Sample until the sink has a CPU sample (CPU figures need two passes of /proc/stat), at most
  // a few seconds on a loaded machine.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  const auto at_least = std::chrono::steady_clock::now() + std::chrono::milliseconds(60);
  volatile uint64_t spin = 0;
  auto has_cpu_sample = [&] {
    for (const auto& e : sink.events_)
      if (e.kind == format::Kind::kCpuSample)
        return true;
    return false;
  };
  while (std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 100000; ++i)
      spin = spin + 1;
    sampler.Poll(sink, sink.clock().NowNs());
    if (std::chrono::steady_clock::now() > at_least && has_cpu_sample())
      break;
  }
  sampler.Stop(sink);

  const uint32_t me = static_cast<uint32_t>(getpid());
  const uint32_t my_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  ASSERT_TRUE(sink.threads_.count({me, my_tid})) << "the main thread was never given a location";
  const uint32_t my_loc = sink.threads_.at({me, my_tid});
  int my_samples = 0, cpu_samples = 0;
  for (const auto& e : sink.events_) {
    EXPECT_EQ(e.source, format::Source::kSampler);
    if (e.location == my_loc && e.kind == format::Kind::kThreadSample)
      ++my_samples;
    if (e.kind == format::Kind::kCpuSample)
      ++cpu_samples;
  }
  EXPECT_GT(my_samples, 0);
  EXPECT_GT(cpu_samples, 0);
  ASSERT_TRUE(sink.end_.count("sampler_passes"));
  EXPECT_GT(std::stoull(sink.end_["sampler_passes"]), 1u);
}

}  // namespace
}  // namespace parmon::sched
