// Stress tests of `parmon record` against its surroundings: an output that takes the trace more
// slowly than the program emits it, and many recorders running at once.
//
// The slow output is a FIFO as the trace path, read by the test at a fixed byte rate into a
// regular file (the disk as the recorder sees it: writes that block until the bytes are taken).
// The recorder writes on the thread that drains, so a slow output stalls draining, rings fill,
// and --overflow decides: drop counts every event it could not take, block holds the program.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "stress/stress_support.h"
#include "support/e2e.h"

namespace parmon::stress {
namespace {

using testing::TempDir;

// Reads `fifo` at `bytes_per_s` into `out` until the writer closes it.
class SlowReader {
 public:
  SlowReader(std::string fifo, std::string out, double bytes_per_s)
      : thread_([this, fifo, out, bytes_per_s] { Run(fifo, out, bytes_per_s); }) {}
  ~SlowReader() { thread_.join(); }
  uint64_t bytes() const { return bytes_; }

 private:
  void Run(const std::string& fifo, const std::string& out, double rate) {
    int in = open(fifo.c_str(), O_RDONLY);  // waits for the recorder to open it
    int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const auto t0 = std::chrono::steady_clock::now();
    char buf[16384];
    while (in >= 0 && fd >= 0) {
      const double allowed =
          rate * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (allowed < bytes_ + sizeof buf) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      ssize_t n = read(in, buf, sizeof buf);
      if (n <= 0)
        break;
      if (write(fd, buf, static_cast<size_t>(n)) != n)
        break;
      bytes_ += static_cast<uint64_t>(n);
    }
    if (in >= 0)
      close(in);
    if (fd >= 0)
      close(fd);
  }

  std::atomic<uint64_t> bytes_{0};
  std::thread thread_;
};

struct SlowRun {
  WatchedRun w;
  TraceCensus c;
  std::map<std::string, long> side;
  uint64_t bytes = 0;
};

SlowRun RecordThroughSlowOutput(const TempDir& dir,
                                const std::string& overflow,
                                long events,
                                double rate) {
  SlowRun r;
  const std::string fifo = dir.File(overflow + ".fifo"), copy = dir.File(overflow + ".ptrace");
  const std::string side = dir.File(overflow + ".side");
  EXPECT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  {
    SlowReader reader(fifo, copy, rate);
    r.w = RunWatched({"record", "-q", "--overflow", overflow, "--buffer-size", "1M", "-o", fifo,
                      "--", Prog("seq_emitter"), "2", "EVENTS:" + std::to_string(events), side},
                     dir.path(), 150 * Scale());
    r.bytes = reader.bytes();
    if (r.w.timed_out) {  // the reader waits for a writer that is gone: let it see the end
      int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0)
        close(fd);
    }
  }
  r.side = SideValues(side);
  r.c = TakeCensus(copy);
  return r;
}

// Program events of a seq_emitter thread (its name, counters, marker) kept and lost.
void ExpectExact(const SlowRun& r, uint64_t* kept, uint64_t* lost) {
  *kept = *lost = 0;
  for (int i = 0; i < 2; ++i) {
    const std::string name = "seq-" + std::to_string(i);
    const long n = r.side.at(name);
    const ThreadCensus* t = ThreadNamed(r.c, name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->program_events + t->lost, static_cast<uint64_t>(n) + 2) << name;
    EXPECT_TRUE(t->counters_increase) << name;
    *kept += t->program_events;
    *lost += t->lost;
  }
}

// 2 x 1,000,000 counter events (a few MB of trace) through an output that takes 1 MiB/s.
TEST(Stress, FasterThanTheOutputDropCountsExactlyBlockLosesNothing) {
  TempDir dir;
  const long events = static_cast<long>(1000000 * Scale());
  const double rate = 1 << 20;
  for (const std::string mode : {"drop", "block"}) {
    SCOPED_TRACE(mode);
    SlowRun r = RecordThroughSlowOutput(dir, mode, events, rate);
    ASSERT_FALSE(r.w.timed_out) << r.w.err;
    ASSERT_EQ(r.w.exit_code, 0) << r.w.err;
    ASSERT_TRUE(r.c.ok) << r.c.error;
    EXPECT_TRUE(r.c.closed_cleanly);
    ASSERT_EQ(r.side.size(), 3u);  // pid, seq-0, seq-1
    uint64_t kept = 0, lost = 0;
    ExpectExact(r, &kept, &lost);
    if (mode == "drop") {
      EXPECT_GT(lost, 0u) << "an output at 1 MiB/s should not keep up with two threads";
      EXPECT_NE(r.w.err.find(std::to_string(lost) + " events were lost"), std::string::npos)
          << "lost " << lost << "; " << r.w.err;
    } else {
      EXPECT_EQ(lost, 0u);
      EXPECT_EQ(kept, 2u * events + 4);
      // The output was the bottleneck: the run lasted about as long as the bytes took.
      EXPECT_GE(r.w.wall_s, 0.8 * r.bytes / rate);
    }
    char extra[200];
    std::snprintf(extra, sizeof extra,
                  "mode=%s emitted=%lu kept=%lu lost=%lu output_rate_mib_s=%.1f trace_mib=%.2f",
                  mode.c_str(), 2 * events + 4, kept, lost, rate / 1048576.0, r.bytes / 1048576.0);
    std::printf(
        "[stress] slow_output %s wall_s=%.1f recorder_hwm_mib=%.1f recorder_anon_mib=%.1f\n", extra,
        r.w.wall_s, r.w.polled_hwm_kib / 1024.0, r.w.polled_anon_kib / 1024.0);
    std::fflush(stdout);
  }
}

// 12 recorders at once, each of a program that waits, once its events are emitted, until the
// test has reached every recorder through its own control socket. Every trace is complete and
// holds its own program only; no shared-memory segment is left behind.
TEST(Stress, ManyRecordersAtOnceDoNotInterfere) {
  TempDir dir;
  const int k = static_cast<int>(12 * Scale());
  const long events = 200000;
  const std::string release = dir.File("release");
  std::vector<std::unique_ptr<TempDir>> dirs;
  std::vector<std::atomic<int>> pids(k);
  std::vector<WatchedRun> runs(k);
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < k; ++i) {
    dirs.push_back(std::make_unique<TempDir>());
    const TempDir& d = *dirs.back();
    threads.emplace_back(
        [&, i, trace = d.File("t.ptrace"), side = d.File("side"), path = d.path()] {
          runs[i] = RunWatched({"record", "-q", "-o", trace, "--", Prog("seq_emitter"), "2",
                                "EVENTS:" + std::to_string(events), side, release},
                               path, 240, 100, [&pids, i](int pid) { pids[i] = pid; });
        });
  }
  // Every program has written its side file: all recorders run at once now.
  bool all = false;
  for (int tries = 0; tries < 2400 && !all; ++tries) {
    all = true;
    for (int i = 0; i < k; ++i)
      all = all && pids[i] > 0 && testing::Exists(dirs[i]->File("side"));
    if (!all)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(all) << "not every program finished its events within 120 s";
  int answered = 0;
  for (int i = 0; i < k && all; ++i) {
    auto r = testing::Parmon({"ctl", std::to_string(pids[i].load()), "status"}, 30);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    answered += r.out.rfind("ok: recording", 0) == 0;
  }
  std::FILE* f = std::fopen(release.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  for (auto& t : threads)
    t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(answered, all ? k : 0);
  uint64_t total = 0, lost = 0, peak_anon = 0;
  for (int i = 0; i < k; ++i) {
    SCOPED_TRACE("recorder " + std::to_string(i));
    const WatchedRun& w = runs[i];
    ASSERT_FALSE(w.timed_out) << w.err;
    ASSERT_EQ(w.exit_code, 0) << w.err;
    peak_anon = std::max(peak_anon, w.polled_anon_kib);
    auto side = SideValues(dirs[i]->File("side"));
    TraceCensus c = TakeCensus(dirs[i]->File("t.ptrace"));
    ASSERT_TRUE(c.ok) << c.error;
    EXPECT_TRUE(c.closed_cleanly);
    // Its own program, and nothing of the eleven others.
    ASSERT_EQ(c.process_ppid.size(), 1u);
    EXPECT_EQ(c.process_ppid.begin()->first, static_cast<uint32_t>(side["pid"]));
    for (const auto& [tid, t] : c.threads)
      EXPECT_EQ(t.pid, static_cast<uint32_t>(side["pid"])) << "thread " << tid;
    for (int j = 0; j < 2; ++j) {
      const std::string name = "seq-" + std::to_string(j);
      const ThreadCensus* t = ThreadNamed(c, name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(side[name], events);
      EXPECT_EQ(t->counters, static_cast<uint64_t>(events)) << name;
      EXPECT_EQ(t->markers, 1u) << name;
      EXPECT_EQ(t->lost, 0u) << name;
      total += t->program_events;
      lost += t->lost;
    }
    // The recorder's shared-memory segment is gone.
    const std::string prefix = "parmon-" + std::to_string(w.pid) + "-";
    for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
      EXPECT_NE(e.path().filename().string().rfind(prefix, 0), 0u) << e.path();
  }
  std::printf(
      "[stress] many_recorders recorders=%d answered_ctl=%d events=%lu lost=%lu wall_s=%.1f "
      "recorder_anon_mib_max=%.1f load1=%s\n",
      k, answered, total, lost, wall, peak_anon / 1024.0,
      testing::ReadFile("/proc/loadavg").substr(0, 4).c_str());
  std::fflush(stdout);
}

// Whether /dev/shm holds a segment of the recorder with this pid.
bool HasSegment(int pid) {
  const std::string prefix = "parmon-" + std::to_string(pid) + "-";
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
    if (e.path().filename().string().rfind(prefix, 0) == 0)
      return true;
  return false;
}

// A recorder killed with SIGKILL cannot remove its shared-memory segment (its touched ring pages
// stay in memory until the machine restarts: 103 of them, 508 MB, were on the test VM after a
// day of tests). The next recorder removes the segments of recorders that are gone, and no
// other.
TEST(Stress, SegmentOfAKilledRecorderIsRemovedByTheNextOne) {
  TempDir dir;
  const std::string release = dir.File("release"), side = dir.File("side");
  std::atomic<int> pid{0};
  WatchedRun killed;
  std::thread t([&] {
    killed = RunWatched({"record", "-q", "-o", dir.File("k.ptrace"), "--", Prog("seq_emitter"), "1",
                         "EVENTS:1000", side, release},
                        dir.path(), 120, 20, [&](int p) { pid = p; });
  });
  for (int i = 0; i < 2400 && (pid == 0 || !testing::Exists(side)); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const bool started = pid > 0 && testing::Exists(side);
  if (started) {
    EXPECT_TRUE(HasSegment(pid));
    kill(pid, SIGKILL);
  }
  std::FILE* f = std::fopen(release.c_str(), "w");  // the program ends, unrecorded
  if (f != nullptr)
    std::fclose(f);
  t.join();
  ASSERT_TRUE(started);
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL);
  ASSERT_TRUE(HasSegment(pid)) << "the killed recorder's segment should still be there";
  // A name of a live process (ours) is not a stale one.
  const std::string live = "/dev/shm/parmon-" + std::to_string(getpid()) + "-0badf00d";
  std::FILE* l = std::fopen(live.c_str(), "w");
  ASSERT_NE(l, nullptr);
  std::fclose(l);
  auto r = testing::Parmon({"record", "-q", "-o", dir.File("next.ptrace"), "--", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(HasSegment(pid));
  EXPECT_TRUE(testing::Exists(live));
  std::remove(live.c_str());
}

}  // namespace
}  // namespace parmon::stress
