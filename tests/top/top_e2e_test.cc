// End-to-end tests of the live consumers on a recording still being written: the pipe form of
// the ring example (ring_search_pipes, slow form: a few seconds, and the serialised-ring finding)
// recorded by `parmon record -o` while `parmon report --follow`, `parmon dump --follow` and
// `parmon top` read the same file; and `parmon top -- CMD` in a real terminal (tmux), driven
// with send-keys and read with capture-pane. Every wait polls with a generous deadline: the
// machine may be a busy 2-core one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support/e2e.h"

namespace parmon::testing {
namespace {

bool HavePipeRing() {
  return Exists(LibDir() + "/libparmon_posix.so") && Exists(BinDir() + "/ring_search_pipes");
}

// The slow ring over pipes: about 3 s on an idle 2-core machine (longer when busy), and its report
// names the serialised ring.
std::vector<std::string> PipeRing() {
  return {BinDir() + "/ring_search_pipes",
          "--form",
          "slow",
          "--workers",
          "3",
          "--words",
          "4000",
          "--db-kb",
          "512"};
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

// A dump with "[pid/tid name]" turned into "[pid/tid]".
std::string WithoutNames(const std::string& dump) {
  std::string out;
  out.reserve(dump.size());
  size_t at = 0;
  while (at < dump.size()) {
    size_t open = dump.find(" [", at), close = std::string::npos, space = std::string::npos;
    if (open != std::string::npos) {
      close = dump.find(']', open);
      space = dump.find(' ', open + 2);
    }
    if (open == std::string::npos || close == std::string::npos) {
      out.append(dump, at, std::string::npos);
      break;
    }
    out.append(dump, at, std::min(space, close) - at);
    out += ']';
    const size_t eol = dump.find('\n', close);
    out.append(dump, close + 1, eol == std::string::npos ? std::string::npos : eol + 1 - close - 1);
    at = eol == std::string::npos ? dump.size() : eol + 1;
  }
  return out;
}

// `parmon record -o trace -- PipeRing()` on a thread; running() until it has exited.
class Recording {
 public:
  explicit Recording(const std::string& trace) {
    std::vector<std::string> args = {ParmonBin(), "record", "-q", "-o", trace, "--"};
    for (const auto& a : PipeRing())
      args.push_back(a);
    thread_ = std::thread([this, args] {
      result_ = Run(args, {}, 300);
      done_ = true;
    });
  }
  ~Recording() {
    if (thread_.joinable())
      thread_.join();
  }
  bool running() const { return !done_; }
  const RunResult& Wait() {
    thread_.join();
    return result_;
  }

 private:
  std::thread thread_;
  std::atomic<bool> done_{false};
  RunResult result_;
};

// Polls cond every 100 ms for up to timeout_s.
template <typename Cond>
bool WaitFor(Cond cond, double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (cond())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return cond();
}

// (a) Interim reports while the file is written, then a final report equal to the post-mortem
// `parmon report FILE`, byte for byte.
TEST(FollowE2E, ReportFollowEndsWithThePostMortemReport) {
  if (!HavePipeRing())
    GTEST_SKIP() << "needs libparmon_posix and the ring_search_pipes example";
  TempDir dir;
  const std::string trace = dir.File("live.ptrace");
  Recording rec(trace);  // the follower may start before the file exists: it waits for it
  RunResult follow = Parmon({"report", "--follow", "--period", "200ms", trace}, 300);
  const RunResult& recorded = rec.Wait();
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  ASSERT_EQ(follow.exit_code, 0) << follow.err;
  EXPECT_GE(Count(follow.out, "still being written ==="), 1u) << follow.out.substr(0, 2000);
  const std::string end_line = "=== parmon report " + trace + ": the recording has ended ===\n";
  const size_t at = follow.out.rfind(end_line);
  ASSERT_NE(at, std::string::npos) << follow.out.substr(0, 2000);
  RunResult post = Parmon({"report", trace});
  ASSERT_EQ(post.exit_code, 0) << post.err;
  EXPECT_EQ(follow.out.substr(at + end_line.size()), post.out);
  // The post-mortem report names the serialised ring (the text view's wording of the
  // serialised-cycle finding); so, being equal, did the followed one's final report.
  EXPECT_NE(Unwrapped(post.out).find("one item at a time"), std::string::npos) << post.out;
}

// A per-rank directory where one rank's recorder never started (rank 1 runs `true` under
// mpirun, not `parmon record`): once the files there are closed and no other comes for the wait
// (PARMON_FOLLOW_RANK_WAIT, 2 s here), report, dump and top end with what there is and say which
// ranks' files they had, instead of waiting for ever.
TEST(FollowE2E, APerRankDirectoryMissingARankEndsAfterTheWait) {
  if (access("/usr/bin/mpirun", X_OK) != 0)
    GTEST_SKIP() << "no mpirun";
  TempDir dir;
  const std::string run = dir.File("run");
  RunResult mpi =
      testing::Run({"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "1", ParmonBin(),
                    "record", "-q", "-o", run, "--", "sleep", "0.2", ":", "-np", "1", "true"},
                   {}, 180);
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  ASSERT_TRUE(Exists(run + "/rank-0.ptrace"));
  ASSERT_FALSE(Exists(run + "/rank-1.ptrace"));
  const std::string said =
      "holds the files of 1 of the 2 ranks, every one closed, and no other "
      "came in 2 s";
  const auto start = std::chrono::steady_clock::now();
  RunResult report = testing::Run({ParmonBin(), "report", "--follow", "--period", "200ms", run},
                                  {"PARMON_FOLLOW_RANK_WAIT=2"}, 120);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(report.exit_code, 128 + SIGKILL) << "still waiting after 120 s";
  EXPECT_NE(report.err.find(said), std::string::npos) << report.err;
  EXPECT_NE(report.out.find("command    sleep 0.2"), std::string::npos)
      << report.out.substr(0, 2000);
  EXPECT_GE(waited, 2.0);
  RunResult dump =
      testing::Run({ParmonBin(), "dump", "--follow", run}, {"PARMON_FOLLOW_RANK_WAIT=2"}, 120);
  EXPECT_EQ(dump.exit_code, 3) << dump.err;
  EXPECT_NE(dump.err.find(said), std::string::npos) << dump.err;
  EXPECT_NE(dump.out.find("ProcessBegin"), std::string::npos) << dump.out.substr(0, 2000);
}

// (b) dump --follow, started while the recording runs, prints every event the dump of the
// finished file prints, in the same order with the same times.
TEST(FollowE2E, DumpFollowPrintsEveryEventOfThePostMortemDump) {
  if (!HavePipeRing())
    GTEST_SKIP() << "needs libparmon_posix and the ring_search_pipes example";
  TempDir dir;
  const std::string trace = dir.File("live.ptrace");
  Recording rec(trace);
  ASSERT_TRUE(WaitFor([&] { return Exists(trace); }, 60)) << "the recorder wrote no file";
  const bool started_while_recording = rec.running();
  RunResult follow = Parmon({"dump", "--follow", trace}, 300);
  const RunResult& recorded = rec.Wait();
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  EXPECT_TRUE(started_while_recording) << "the program ended before the follower started";
  ASSERT_EQ(follow.exit_code, 0) << follow.err;
  RunResult post = Parmon({"dump", trace});
  ASSERT_EQ(post.exit_code, 0) << post.err;
  EXPECT_GT(Count(post.out, "\n"), 1000u);
  EXPECT_EQ(Count(follow.out, "\n"), Count(post.out, "\n"));
  // Line for line the same but for thread names: a thread that renames itself (the farm's
  // processes call themselves master and worker-K after they start) is printed live with the
  // name it had then, and post-mortem with its last one.
  EXPECT_TRUE(WithoutNames(follow.out) == WithoutNames(post.out))
      << "the followed dump differs from the post-mortem one";
}

// (c) top --batch on a running recording: several refreshes, and the serialised ring among the
// findings (the diagnosis' id, as `parmon report` names it).
TEST(TopE2E, BatchShowsRefreshesAndTheSerialisedRing) {
  if (!HavePipeRing())
    GTEST_SKIP() << "needs libparmon_posix and the ring_search_pipes example";
  TempDir dir;
  std::vector<std::string> args = {
      "top", "--batch", "--period", "300ms", "-o", dir.File("top.ptrace"), "--"};
  for (const auto& a : PipeRing())
    args.push_back(a);
  RunResult top = Parmon(args, 300);
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_GE(Count(top.out, " parmon top "), 2u) << top.out.substr(0, 3000);
  EXPECT_NE(top.out.find("master"), std::string::npos) << top.out.substr(0, 3000);
  EXPECT_NE(top.out.find("[serialised-cycle]"), std::string::npos)
      << top.out.substr(top.out.size() > 4000 ? top.out.size() - 4000 : 0);
  // The last screen is the ended session's.
  EXPECT_NE(top.out.rfind(" ended "), std::string::npos);
}

// The demo's ring on MPI ranks (`parmon demo`'s example, 4 ranks): the serialised ring is among
// the findings on a screen taken while the program still runs, not only on the last one.
TEST(TopE2E, MpiRingFindingAppearsWhileItRuns) {
  if (!Exists(LibDir() + "/libparmon_mpi.so") || !Exists(BinDir() + "/ring_search") ||
      parmon::testing::Run({"sh", "-c", "command -v mpirun"}).exit_code != 0)
    GTEST_SKIP() << "needs libparmon_mpi, the ring_search example and mpirun (MPI)";
  TempDir dir;
  RunResult top =
      Parmon({"top", "--batch", "--period", "500ms", "-o", dir.File("mpi.ptrace"), "--", "mpirun",
              "--allow-run-as-root", "--oversubscribe", "-np", "4", BinDir() + "/ring_search",
              "--form", "slow", "--words", "200", "--db-kb", "8192"},
             300);
  ASSERT_EQ(top.exit_code, 0) << top.err;
  // The screens, each starting with its header line; the last one is the ended session's.
  std::vector<std::string> screens;
  for (size_t at = top.out.find(" parmon top "); at != std::string::npos;) {
    const size_t next = top.out.find("\n parmon top ", at + 1);
    screens.push_back(top.out.substr(at, next == std::string::npos ? next : next + 1 - at));
    at = next == std::string::npos ? next : next + 1;
  }
  ASSERT_GE(screens.size(), 2u) << top.out;
  bool live_finding = false;
  for (const auto& screen : screens) {
    const std::string header = screen.substr(0, screen.find('\n'));
    if (header.find(" recording ") != std::string::npos &&
        screen.find("[serialised-cycle] (since") != std::string::npos)
      live_finding = true;
  }
  EXPECT_TRUE(live_finding) << top.out;
  EXPECT_NE(screens.back().find("[serialised-cycle]"), std::string::npos) << screens.back();
  EXPECT_NE(screens.back().find("rank 3 -> rank 0"), std::string::npos) << screens.back();
}

// A recorder killed mid-run leaves its trace unclosed: top shows what it wrote, says so and
// ends instead of waiting for an end that will not come.
TEST(TopE2E, BatchEndsWhenTheRecorderIsKilled) {
  TempDir dir;
  RunResult top = Parmon({"top", "--batch", "--period", "200ms", "-o", dir.File("k.ptrace"), "--",
                          "sh", "-c", "sleep 1.5; kill -9 $PPID; sleep 1"},
                         300);
  EXPECT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.err.find("ended without closing"), std::string::npos) << top.err;
  EXPECT_GE(Count(top.out, " parmon top "), 1u) << top.out;
  EXPECT_NE(top.out.find("sleep"), std::string::npos) << top.out;
}

// A tmux server of the test's own (-L), so that the user's sessions are not touched; whatever
// fails, the server and the top in it do not outlive the test.
class Tmux {
 public:
  explicit Tmux(const std::string& tag) : sock_("parmon-" + tag + "-" + std::to_string(getpid())) {}
  ~Tmux() { (*this)({"kill-server"}); }
  RunResult operator()(std::vector<std::string> args) const {
    args.insert(args.begin(), {"tmux", "-L", sock_});
    return parmon::testing::Run(args, {}, 30);
  }

 private:
  std::string sock_;
};

// (d) top -- CMD in a terminal: the bars and thread names on the screen, q ends it.
TEST(TopE2E, TerminalShowsBarsAndQuitsOnQ) {
  if (parmon::testing::Run({"sh", "-c", "command -v tmux"}).exit_code != 0)
    GTEST_SKIP() << "tmux is not installed (apt-get install tmux)";
  if (!HavePipeRing())
    GTEST_SKIP() << "needs libparmon_posix and the ring_search_pipes example";
  TempDir dir;
  const Tmux tmux("top-test");
  const std::string name = "top";
  std::string cmd = ParmonBin() + " top -o " + dir.File("top.ptrace") + " --";
  for (const auto& a : PipeRing())
    cmd += " " + a;
  RunResult started = tmux({"new-session", "-d", "-x", "160", "-y", "50", "-s", name, cmd});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  std::string screen;
  const bool shown = WaitFor(
      [&] {
        screen = tmux({"capture-pane", "-p", "-t", name}).out;
        return screen.find("THREAD") != std::string::npos &&
               screen.find("master") != std::string::npos && screen.find("[|") != std::string::npos;
      },
      120);
  EXPECT_TRUE(shown) << screen;
  EXPECT_NE(screen.find("q quit"), std::string::npos) << screen;
  // A key that changes the view: s sorts by the running share, and the key line says so.
  tmux({"send-keys", "-t", name, "s"});
  EXPECT_TRUE(WaitFor(
      [&] {
        screen = tmux({"capture-pane", "-p", "-t", name}).out;
        return screen.find("sort: running") != std::string::npos;
      },
      30))
      << screen;
  tmux({"send-keys", "-t", name, "q"});
  // The pane's process exits, and with it the session.
  const bool gone = WaitFor([&] { return tmux({"has-session", "-t", name}).exit_code != 0; }, 60);
  EXPECT_TRUE(gone) << tmux({"capture-pane", "-p", "-t", name}).out;
}

// p in the terminal pauses the recording itself (through the recorder's control socket, as
// `parmon ctl` does) and p again resumes it: the trace top wrote holds exactly that one pause.
TEST(TopE2E, PKeyPausesAndResumesTheRecording) {
  if (parmon::testing::Run({"sh", "-c", "command -v tmux"}).exit_code != 0)
    GTEST_SKIP() << "tmux is not installed (apt-get install tmux)";
  TempDir dir;
  const Tmux tmux("top-ptest");
  const std::string name = "top";
  const std::string trace = dir.File("top.ptrace");
  std::string cmd =
      ParmonBin() + " top -o " + trace + " -- " + BinDir() + "/duty_cycle --seconds 60 basic";
  RunResult started = tmux({"new-session", "-d", "-x", "160", "-y", "50", "-s", name, cmd});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  std::string screen;
  auto shows = [&](const std::string& text) {
    return WaitFor(
        [&] {
          screen = tmux({"capture-pane", "-p", "-t", name}).out;
          return screen.find(text) != std::string::npos;
        },
        60);
  };
  ASSERT_TRUE(shows("THREAD")) << screen;
  tmux({"send-keys", "-t", name, "p"});
  EXPECT_TRUE(shows("recording and display paused")) << screen;
  usleep(300'000);
  tmux({"send-keys", "-t", name, "p"});
  // Resumed: the display runs again (its "resumed" note may last one frame only).
  EXPECT_TRUE(WaitFor(
      [&] {
        screen = tmux({"capture-pane", "-p", "-t", name}).out;
        return screen.find("THREAD") != std::string::npos &&
               screen.find("[display paused]") == std::string::npos;
      },
      60))
      << screen;
  tmux({"send-keys", "-t", name, "q"});
  ASSERT_TRUE(WaitFor(
      [&] {
        return tmux({"has-session", "-t", name}).exit_code != 0;
      },
      60))
      << tmux({"capture-pane", "-p", "-t", name}).out;
  RunResult json = Parmon({"report", "--format", "json", trace});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"pauses\": 1"), std::string::npos) << json.out.substr(0, 3000);
}

}  // namespace
}  // namespace parmon::testing
