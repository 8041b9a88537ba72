// TopModel's last-interval differences, the renderer's bars and widths, and the key parser.
#include <gtest/gtest.h>

#include <sstream>

#include "live_view/terminal.h"
#include "live_view/top_model.h"
#include "live_view/top_view.h"

namespace parmon::live_view {
namespace {

using analysis::State;

constexpr uint64_t kS = 1'000'000'000;

analysis::Results Snapshot(uint64_t end, uint64_t run, uint64_t comm, uint64_t bytes) {
  analysis::Results r;
  r.summary.session_start = 0;
  r.summary.window_start = 0;
  r.summary.window_end = end;
  r.summary.command = "ring";
  analysis::LocationResult t;
  t.id = 1;
  t.pid = 10;
  t.tid = 11;
  t.rank = 0;
  t.name = "master";
  t.label = "rank 0";
  t.states[static_cast<int>(State::kRunning)] = run;
  t.states[static_cast<int>(State::kCommWait)] = comm;
  r.locations.push_back(t);
  analysis::LocationResult cpu;
  cpu.id = 2;
  cpu.type = analysis::LocationKind::kCpu;
  cpu.label = "cpu 0";
  cpu.states[static_cast<int>(State::kRunning)] = run;
  cpu.states[static_cast<int>(State::kOther)] = comm;
  r.locations.push_back(cpu);
  analysis::LinkResult k;
  k.kind = "mpi";
  k.from = 0;
  k.to = 1;
  k.from_label = "rank 0";
  k.to_label = "rank 1";
  k.bytes = bytes;
  k.time_ns = comm;
  k.receiver_wait_ns = comm / 2;
  r.links.push_back(k);
  analysis::Finding f;
  f.id = "serialised-cycle";
  f.text = "The ring runs one word at a time.";
  f.subjects = {"rank 0"};
  r.findings.push_back(f);
  return r;
}

TEST(TopModel, LastIntervalIsTheDifferenceOfTwoSnapshots) {
  TopModel m;
  m.Update(Snapshot(1 * kS, kS / 2, kS / 2, 1000), false, {});
  // In the second second the thread ran 0.25 s and waited 0.75 s; 3000 bytes moved.
  m.Update(Snapshot(2 * kS, kS * 3 / 4, kS * 5 / 4, 4000), false, {});
  const Frame& f = m.frame();
  EXPECT_EQ(f.interval_ns, kS);
  ASSERT_EQ(f.threads.size(), 1u);
  EXPECT_DOUBLE_EQ(f.threads[0].Share(State::kRunning), 0.25);
  EXPECT_DOUBLE_EQ(f.threads[0].WaitShare(), 0.75);
  ASSERT_EQ(f.cpus.size(), 1u);
  EXPECT_DOUBLE_EQ(f.cpus[0].busy, 0.25);
  ASSERT_EQ(f.links.size(), 1u);
  EXPECT_DOUBLE_EQ(f.links[0].bytes_per_s, 3000);
  // The receiver waited 0.375 s of the second second.
  EXPECT_DOUBLE_EQ(f.links[0].receiver_wait, 0.375);
  EXPECT_DOUBLE_EQ(f.links[0].sender_wait, 0);
  ASSERT_EQ(f.findings.size(), 1u);
  EXPECT_EQ(f.findings[0].first_seen_ns, kS);  // first seen in the first snapshot
}

TEST(TopView, BatchShowsThreadsBarsLinksAndFindings) {
  TopModel m;
  m.Update(Snapshot(kS, kS / 2, kS / 2, 1000), false, {});
  RenderOptions o;
  o.cols = 0;
  o.batch = true;
  const std::string text = Render(m.frame(), ViewState{}, o);
  EXPECT_NE(text.find("master"), std::string::npos) << text;
  // Half running, half waiting for messages: a bar of R then C, 40 cells in all.
  EXPECT_NE(text.find("[" + std::string(20, 'R') + std::string(20, 'C')), std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 0 -> rank 1"), std::string::npos) << text;
  EXPECT_NE(text.find("[serialised-cycle]"), std::string::npos) << text;
  EXPECT_EQ(text.find('\033'), std::string::npos) << "no escapes in batch output";
}

TEST(TopView, ScreenFitsItsSizeWithColour) {
  TopModel m;
  m.Update(Snapshot(kS, kS / 2, kS / 2, 1000), false, {});
  RenderOptions o;
  o.rows = 20;
  o.cols = 60;
  o.color = true;
  const std::string screen = Render(m.frame(), ViewState{}, o);
  std::istringstream in(screen);
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    // Visible width: the line without its escape sequences.
    size_t visible = 0;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\033') {
        while (i < line.size() && line[i] != 'm')
          ++i;
        continue;
      }
      ++visible;
    }
    EXPECT_LE(visible, 60u) << line;
  }
  EXPECT_EQ(rows, 20);
  EXPECT_NE(screen.find("q quit"), std::string::npos);
}

TEST(TopView, SortAndFilter) {
  Frame f;
  for (uint32_t i = 0; i < 3; ++i) {
    ThreadRow t;
    t.pid = 100 + (i == 2);
    t.tid = 200 + i;
    t.name = std::string(1, static_cast<char>('c' - i));
    t.last[static_cast<int>(State::kRunning)] = i;
    t.last[static_cast<int>(State::kCommWait)] = 10 - i;
    t.last_ns = 10;
    f.threads.push_back(t);
  }
  ViewState v;
  v.sort = SortBy::kBusy;
  EXPECT_EQ(VisibleThreads(f, v), (std::vector<size_t>{2, 1, 0}));
  v.sort = SortBy::kName;
  EXPECT_EQ(VisibleThreads(f, v), (std::vector<size_t>{2, 1, 0}));
  v.sort = SortBy::kWait;
  EXPECT_EQ(VisibleThreads(f, v), (std::vector<size_t>{0, 1, 2}));
  v.only_pid = 100;
  EXPECT_EQ(VisibleThreads(f, v), (std::vector<size_t>{0, 1}));
}

TEST(Terminal, ParsesKeysAndArrows) {
  EXPECT_EQ(ParseKey("q"), Key::kQuit);
  EXPECT_EQ(ParseKey("p"), Key::kPause);
  EXPECT_EQ(ParseKey("+"), Key::kSlower);
  EXPECT_EQ(ParseKey("-"), Key::kFaster);
  EXPECT_EQ(ParseKey("s"), Key::kSort);
  EXPECT_EQ(ParseKey("t"), Key::kThread);
  EXPECT_EQ(ParseKey("\033[A"), Key::kUp);
  EXPECT_EQ(ParseKey("\033OB"), Key::kDown);
  EXPECT_EQ(ParseKey("\033[5~"), Key::kPageUp);
  EXPECT_EQ(ParseKey("x"), Key::kOther);
  EXPECT_EQ(ParseKey(""), Key::kNone);
}

}  // namespace
}  // namespace parmon::live_view
