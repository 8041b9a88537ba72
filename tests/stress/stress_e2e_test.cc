// Stress tests of `parmon record` (issue 13), each bounded in time: a thousand threads that come
// and go, a fork/exec storm, a flight recorder wrapping many times with its memory flat, a
// program emitting faster than its output takes the trace (drop and block modes), and many
// recorders at once. Every figure is held against an oracle outside parmon: the program's own
// counts and thread/process ids (its side file), and the recorder's memory as /proc shows it.
//
// PARMON_STRESS_SCALE=K makes every run K times longer or bigger (bench/stress.sh); each test
// prints one "[stress] ..." line of figures.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include "stress/stress_support.h"
#include "support/e2e.h"

namespace parmon::stress {
namespace {

using testing::TempDir;

double MiB(uint64_t kib) {
  return kib / 1024.0;
}

void PrintFigures(const std::string& what, const WatchedRun& w, const std::string& extra) {
  std::printf(
      "[stress] %s %s wall_s=%.1f recorder_hwm_mib=%.1f recorder_anon_mib=%.1f "
      "maxrss_with_program_mib=%.1f load1=%s\n",
      what.c_str(), extra.c_str(), w.wall_s, MiB(w.polled_hwm_kib), MiB(w.polled_anon_kib),
      MiB(w.rusage_maxrss_kib), testing::ReadFile("/proc/loadavg").substr(0, 4).c_str());
  std::fflush(stdout);
}

// The recorder's own memory (RssAnon: its heap, not the shared rings of the program it maps)
// stays below 16 MiB plus 16 KiB per thread the program ever had (32 MiB for 1,000 threads).
// Measured on the 2-core test VM: 11.9 MiB for 1,000 threads; before the recorder freed an ended
// thread's encoder buffer it kept ~40 KiB per thread of this test (40.5 MiB for 1,000) and
// ~570 KiB per busy thread (442 MiB for 800 threads of 200,000 events).
uint64_t RecorderAnonBoundKib(uint64_t threads) {
  return (16 << 10) + 16 * threads;
}

// 1,000 threads (20 waves of 50) that come and go, each emitting 2,001 events: every thread is
// in the trace under its own tid and name, with its start and exit, its exact count, no loss.
TEST(Stress, ThousandThreadsComeAndGo) {
  TempDir dir;
  const int waves = static_cast<int>(20 * Scale()), per_wave = 50, iterations = 1000;
  const std::string trace = dir.File("t.ptrace"), side = dir.File("side");
  WatchedRun w =
      RunWatched({"record", "-q", "-o", trace, "--", Prog("thread_waves"), std::to_string(waves),
                  std::to_string(per_wave), std::to_string(iterations), side},
                 dir.path(), 120 * Scale());
  ASSERT_FALSE(w.timed_out) << w.err;
  ASSERT_EQ(w.exit_code, 0) << w.err;
  auto kv = SideValues(side);
  std::vector<long> tids = SideNumbers(side);
  ASSERT_EQ(kv["threads"], waves * per_wave);
  ASSERT_EQ(tids.size(), static_cast<size_t>(waves * per_wave));
  ASSERT_EQ(std::set<long>(tids.begin(), tids.end()).size(), tids.size()) << "a tid was reused";
  TraceCensus c = TakeCensus(trace);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_TRUE(c.closed_cleanly);
  uint64_t events = 0, lost = 0, missing = 0, started = 0, exited = 0;
  for (size_t i = 0; i < tids.size(); ++i) {
    auto it = c.threads.find(static_cast<uint32_t>(tids[i]));
    if (it == c.threads.end()) {
      ++missing;
      ADD_FAILURE() << "thread " << tids[i] << " (#" << i << ") is not in the trace";
      continue;
    }
    const ThreadCensus& t = it->second;
    const std::string name =
        "w" + std::to_string(i / per_wave) + "." + std::to_string(i % per_wave);
    EXPECT_EQ(t.pid, static_cast<uint32_t>(kv["pid"])) << name;
    EXPECT_EQ(t.name, name);
    EXPECT_EQ(t.program_events, static_cast<uint64_t>(kv["events_per_thread"])) << name;
    EXPECT_EQ(t.regions, 2u * iterations) << name;
    EXPECT_EQ(t.lost, 0u) << name;
    events += t.program_events;
    lost += t.lost;
    started += t.task_start > 0;
    exited += t.task_exit > 0;
  }
  // Start and exit of every thread come from the kernel's fork and exit records.
  if (c.any_sched) {
    EXPECT_EQ(started, tids.size());
    EXPECT_EQ(exited, tids.size());
  } else {
    std::cout << "no context-switch records (perf_event_open refused): start and exit of "
                 "threads that lived between two samples are not checked\n";
  }
  EXPECT_LT(w.polled_anon_kib, RecorderAnonBoundKib(tids.size()));
  PrintFigures("threads", w,
               "threads=" + std::to_string(tids.size()) + " missing=" + std::to_string(missing) +
                   " events=" + std::to_string(events) + " lost=" + std::to_string(lost) +
                   " with_start=" + std::to_string(started) +
                   " with_exit=" + std::to_string(exited));
}

// A fork/exec storm: 2,000 short processes, 8 at a time, two in three exec /bin/true and the
// third forks only, emits two events and _exits. No hang; every child is in the trace as a
// process of the program; the forked ones' events are all there; the program's exit code passes.
TEST(Stress, ForkExecStormEveryProcessIsInTheTrace) {
  TempDir dir;
  const int n = static_cast<int>(2000 * Scale());
  const std::string trace = dir.File("t.ptrace"), side = dir.File("side");
  WatchedRun w = RunWatched(
      {"record", "-q", "-o", trace, "--", Prog("exec_storm"), std::to_string(n), "8", side, "7"},
      dir.path(), 150 * Scale());
  ASSERT_FALSE(w.timed_out) << w.err;
  ASSERT_EQ(w.exit_code, 7) << w.err;
  auto kv = SideValues(side);
  std::vector<long> pids = SideNumbers(side);
  ASSERT_EQ(kv["processes"], n);
  ASSERT_EQ(kv["failed"], 0);
  ASSERT_EQ(pids.size(), static_cast<size_t>(n));
  const bool reused = std::set<long>(pids.begin(), pids.end()).size() != pids.size();
  TraceCensus c = TakeCensus(trace);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_TRUE(c.closed_cleanly);
  uint64_t found = 0, forked_events = 0, lost = 0;
  for (size_t i = 0; i < pids.size(); ++i) {
    const uint32_t pid = static_cast<uint32_t>(pids[i]);
    auto p = c.process_ppid.find(pid);
    if (p == c.process_ppid.end()) {
      ADD_FAILURE() << "child #" << i << " pid " << pid << " is not in the trace";
      continue;
    }
    ++found;
    if (!reused) {
      EXPECT_EQ(p->second, static_cast<uint32_t>(kv["pid"])) << "child #" << i;
    }
    if (i % 3 == 2 && !reused) {
      auto t = c.threads.find(pid);
      ASSERT_NE(t, c.threads.end()) << "forked child #" << i;
      EXPECT_EQ(t->second.regions, 2u) << "forked child #" << i;
      forked_events += t->second.regions;
    }
  }
  for (const auto& [tid, t] : c.threads)
    lost += t.lost;
  EXPECT_EQ(lost, 0u);
  EXPECT_LT(w.polled_anon_kib, RecorderAnonBoundKib(n));
  PrintFigures("fork_exec", w,
               "processes=" + std::to_string(n) + " in_trace=" + std::to_string(found) +
                   " forked_child_events=" + std::to_string(forked_events) +
                   " lost=" + std::to_string(lost) + " events=" + std::to_string(c.total_events) +
                   (reused ? " (pids reused)" : ""));
}

// The flight recorder at full rate for ~24 s with an 8 MiB window: the recorder's memory does not
// grow after warm-up, the file holds the newest window (a suffix of each thread's stream), and
// every event the program emitted is kept or counted lost, exactly.
// A thread that ends while its ring is full and dropping cannot report its last losses itself;
// the recorder does, when it finds the ring retired. With a flight recorder that report must come
// after the events the window kept (it once went into the final RingLost, stamped at the session's
// start, so a reader saw losses that happened after the window's events as if before them). The
// recorder is stopped (SIGSTOP) from mid-run until the program's thread has ended, so the thread
// surely ends dropping.
TEST(Stress, FlightRecorderReportsAThreadsLastLossesAfterTheWindow) {
  TempDir dir;
  const std::string trace = dir.File("t.ptrace"), side = dir.File("side");
  bool stopped = false, resumed = false;
  std::chrono::steady_clock::time_point child_seen{};
  WatchedRun w = RunWatched(
      {"record", "-q", "--overflow", "overwrite", "--flight-size", "8M", "--buffer-size", "64K",
       "-o", trace, "--", Prog("seq_emitter"), "1", "1.0", side},
      dir.path(), 120, 10, [&](int pid) {
        const auto now = std::chrono::steady_clock::now();
        if (!stopped) {
          // The program runs (its process is the recorder's child): stop the recorder 0.3 s later.
          std::ifstream children("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) +
                                 "/children");
          std::string child;
          if (child_seen == std::chrono::steady_clock::time_point{} && (children >> child))
            child_seen = now;
          if (child_seen != std::chrono::steady_clock::time_point{} &&
              now - child_seen > std::chrono::milliseconds(300)) {
            kill(pid, SIGSTOP);
            stopped = true;
          }
        } else if (!resumed && std::filesystem::exists(side)) {
          // The side file is written after the thread was joined: it has ended.
          kill(pid, SIGCONT);
          resumed = true;
        }
      });
  ASSERT_TRUE(stopped && resumed) << w.err;
  ASSERT_FALSE(w.timed_out) << w.err;
  ASSERT_EQ(w.exit_code, 0) << w.err;
  auto kv = SideValues(side);
  TraceCensus c = TakeCensus(trace);
  ASSERT_TRUE(c.ok) << c.error;
  const ThreadCensus* t = ThreadNamed(c, "seq-0");
  ASSERT_NE(t, nullptr);
  const long n = kv["seq-0"];
  ASSERT_GT(n, 0);
  EXPECT_EQ(t->program_events + t->lost, static_cast<uint64_t>(n) + 2);
  EXPECT_EQ(t->markers, 0u) << "the marker after the loop came while the ring was full";
  ASSERT_GE(t->first_counter, 0);
  // Every value from the first kept one on is kept or counted in a loss that follows it.
  EXPECT_EQ(t->counters + t->markers + t->lost_after_first_counter,
            static_cast<uint64_t>(n - t->first_counter) + 1);
}

TEST(Stress, FlightRecorderWrapsManyTimesWithMemoryFlat) {
  TempDir dir;
  const double seconds = 24 * Scale();
  const uint64_t flight = 8u << 20;
  const std::string trace = dir.File("t.ptrace"), side = dir.File("side");
  WatchedRun w = RunWatched({"record", "-q", "--overflow", "overwrite", "--flight-size", "8M", "-o",
                             trace, "--", Prog("seq_emitter"), "2", std::to_string(seconds), side},
                            dir.path(), seconds + 120, 100);
  ASSERT_FALSE(w.timed_out) << w.err;
  ASSERT_EQ(w.exit_code, 0) << w.err;
  // Warm-up: the first third of the run. Then the middle third against the last third.
  uint64_t middle = 0, last = 0, middle_anon = 0, last_anon = 0;
  for (const MemSample& s : w.samples) {
    if (s.t_s >= seconds / 3 && s.t_s < 2 * seconds / 3) {
      middle = std::max(middle, s.rss_kib);
      middle_anon = std::max(middle_anon, s.anon_kib);
    } else if (s.t_s >= 2 * seconds / 3 && s.t_s < seconds) {
      last = std::max(last, s.rss_kib);
      last_anon = std::max(last_anon, s.anon_kib);
    }
  }
  ASSERT_GT(middle, 0u);
  ASSERT_GT(last, 0u);
  // Flat: the last third may exceed the middle third by 4 MiB at most (allocator noise).
  EXPECT_LE(last, middle + 4096) << "the recorder's memory grew after warm-up";
  EXPECT_LE(last_anon, middle_anon + 4096) << "the recorder's heap grew after warm-up";
  EXPECT_LT(w.polled_anon_kib, RecorderAnonBoundKib(2));
  // The file holds about the window: its events, definitions and index.
  const uint64_t file_bytes = std::filesystem::file_size(trace);
  EXPECT_LE(file_bytes, flight + (2u << 20));
  auto kv = SideValues(side);
  TraceCensus c = TakeCensus(trace);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_TRUE(c.closed_cleanly);
  EXPECT_GT(c.overwritten_events, 0u);
  uint64_t emitted = 0, kept = 0, dropped = 0, evicted = 0;
  for (int i = 0; i < 2; ++i) {
    const std::string name = "seq-" + std::to_string(i);
    const long n = kv[name];
    ASSERT_GT(n, 0) << name;
    const ThreadCensus* t = ThreadNamed(c, name);
    ASSERT_NE(t, nullptr) << name;
    // Exact: its name, n counters and the marker, each kept or counted lost.
    EXPECT_EQ(t->program_events + t->lost, static_cast<uint64_t>(n) + 2) << name;
    // The newest window: older values were evicted, and from the first value kept to the end
    // every value is kept or counted in a loss that follows it in the stream.
    EXPECT_GT(t->first_counter, 0) << name;
    EXPECT_TRUE(t->counters_increase) << name;
    EXPECT_EQ(t->counters + t->markers + t->lost_after_first_counter,
              static_cast<uint64_t>(n - t->first_counter) + 1)
        << name;
    emitted += n + 2;
    kept += t->program_events;
    evicted += t->evicted;
    dropped += t->lost - t->evicted;
  }
  // Wrapped many times: what went through the window is several windows' worth.
  const double wraps = static_cast<double>(kept + evicted) / std::max<uint64_t>(kept, 1);
  EXPECT_GE(wraps, 3.0);
  char extra[256];
  std::snprintf(extra, sizeof extra,
                "seconds=%.0f emitted=%lu kept=%lu evicted=%lu dropped_full_ring=%lu wraps=%.1f "
                "file_mib=%.1f rss_middle_mib=%.1f rss_last_mib=%.1f",
                seconds, emitted, kept, evicted, dropped, wraps, file_bytes / 1048576.0,
                MiB(middle), MiB(last));
  PrintFigures("flight", w, extra);
}

}  // namespace
}  // namespace parmon::stress
