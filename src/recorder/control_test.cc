// The control command parser and Control::Apply on a real segment's control page: what each
// command does to the words the program reads, the replies, and one-sentence errors.
#include "recorder/control.h"

#include <gtest/gtest.h>

#include <thread>

#include "recorder/segment.h"

namespace parmon::recorder {
namespace {

TEST(ControlParse, Commands) {
  auto p = ParseControlCommand("pause");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->verb, ControlCommand::Verb::kPause);
  p = ParseControlCommand("  resume \r\n");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->verb, ControlCommand::Verb::kResume);
  p = ParseControlCommand("period 5ms");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->verb, ControlCommand::Verb::kPeriod);
  EXPECT_EQ(p->period_ns, 5'000'000u);
  p = ParseControlCommand("threads 13,12,13");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tids, (std::vector<uint32_t>{12, 13}));
  p = ParseControlCommand("threads all");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->tids.empty());
  p = ParseControlCommand("streams mpi,sched");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->streams, kStreamMpi | kStreamSched);
  EXPECT_EQ(StreamNames(p->streams), "mpi,sched");
  EXPECT_EQ(StreamNames(kStreamAll), "all");
  p = ParseControlCommand("status");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->verb, ControlCommand::Verb::kStatus);
}

// Each bad command: an error of one sentence (no newline) that names what was wrong.
TEST(ControlParse, BadCommandsAreOneSentence) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "empty command"},
      {"jump", "unknown command 'jump'"},
      {"pause now", "pause takes no argument"},
      {"period", "period takes one argument"},
      {"period fast", "the period"},
      {"period 0ms", "the period"},
      {"period 2h", "the period"},
      {"threads 12,x", "'x' is not a thread id"},
      {"threads 0", "'0' is not a thread id"},
      {"threads 99999999999", "is not a thread id"},
      {"threads ,", "is not a thread id"},
      {"streams mpi,disk", "unknown stream 'disk'"},
      {std::string(5000, 'a'), "longer than 4096 bytes"},
  };
  for (const auto& [line, want] : cases) {
    auto p = ParseControlCommand(line);
    ASSERT_FALSE(p.ok()) << line;
    const std::string& m = p.status().message();
    EXPECT_NE(m.find(want), std::string::npos) << line << " -> " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_LT(m.size(), 200u) << m;
  }
}

TEST(ControlParse, KindFamilies) {
  EXPECT_EQ(KindFamily(16), kStreamRegions);  // RegionEnter
  EXPECT_EQ(KindFamily(65), kStreamMpi);      // MpiEnter
  EXPECT_EQ(KindFamily(97), kStreamPosix);    // ChanRead
  EXPECT_EQ(KindFamily(64), 0u);              // MpiInit: ranks, never dropped
  EXPECT_EQ(KindFamily(1), 0u);               // DefString
  EXPECT_EQ(KindFamily(27), 0u);              // Lost
}

class ControlApply : public ::testing::Test {
 protected:
  void SetUp() override {
    SegmentOptions so;
    so.ring_count = 2;
    so.ring_bytes = 1 << 20;
    so.period_ns = 10'000'000;
    auto s = Segment::Create(so);
    ASSERT_TRUE(s.ok()) << s.status().message();
    seg_ = std::move(*s);
    page_ = shm::Control(seg_->header());
    control_ = std::make_unique<Control>(page_, true);
  }
  std::unique_ptr<Segment> seg_;
  shm::ControlPage* page_ = nullptr;
  std::unique_ptr<Control> control_;
};

TEST_F(ControlApply, PauseResumeFlipTheProgramsWordAndQueueTheirRecords) {
  EXPECT_EQ(page_->enabled.load(), 1);
  EXPECT_FALSE(control_->ever_changed());
  EXPECT_EQ(control_->Apply("pause"), "ok: paused");
  EXPECT_EQ(page_->enabled.load(), 0);
  EXPECT_EQ(control_->Apply("pause"), "ok: already paused");
  EXPECT_TRUE(control_->paused());
  EXPECT_EQ(control_->Apply("resume"), "ok: recording");
  EXPECT_EQ(page_->enabled.load(), 1);
  auto changes = control_->TakeChanges();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].type, ControlChange::Type::kPause);
  EXPECT_EQ(changes[1].type, ControlChange::Type::kResume);
  EXPECT_LE(changes[0].ticks, changes[1].ticks);
  EXPECT_TRUE(control_->TakeChanges().empty());
  EXPECT_TRUE(control_->ever_changed());
}

// A thread that loaded the enabled word just before a pause and was preempted before stamping
// its event stamps it inside the paused range: the drain judges every event against the current
// and the last paused range and drops the program's events inside them (never definitions).
TEST_F(ControlApply, EventsStampedInsideAPausedRangeAreDropped) {
  TickConversion clock;  // identity: ticks are ns
  EXPECT_FALSE(control_->filtering());
  EXPECT_EQ(control_->Apply("pause"), "ok: paused");
  EXPECT_TRUE(control_->filtering());
  EXPECT_FALSE(control_->selecting()) << "a pause selects nothing";
  auto s = control_->SelectionFor(8, clock);
  ASSERT_NE(s.paused_from_ns, UINT64_MAX);
  EXPECT_TRUE(s.Keep(16, s.paused_from_ns)) << "the bound itself is outside the range";
  EXPECT_FALSE(s.Keep(16, s.paused_from_ns + 1));
  EXPECT_FALSE(s.Keep(65, s.paused_from_ns + 1));
  EXPECT_TRUE(s.Keep(1, s.paused_from_ns + 1)) << "definitions always";
  const uint64_t begin = s.paused_from_ns;
  EXPECT_EQ(control_->Apply("resume"), "ok: recording");
  s = control_->SelectionFor(8, clock);
  EXPECT_EQ(s.paused_from_ns, UINT64_MAX);
  EXPECT_EQ(s.last_paused_begin_ns, begin);
  EXPECT_GT(s.last_paused_end_ns, begin);
  EXPECT_FALSE(s.Keep(16, begin + 1)) << "drained after the resume, stamped inside";
  EXPECT_TRUE(s.Keep(16, begin));
  EXPECT_TRUE(s.Keep(16, s.last_paused_end_ns));
  EXPECT_TRUE(control_->filtering());
}

TEST_F(ControlApply, PeriodAndSelection) {
  EXPECT_EQ(page_->period_ns.load(), 10'000'000u) << "starts as the session's period";
  EXPECT_EQ(control_->Apply("period 5ms"), "ok: period 5 ms");
  EXPECT_EQ(page_->period_ns.load(), 5'000'000u);
  EXPECT_FALSE(control_->selecting());
  std::string r = control_->Apply("threads 7,9");
  EXPECT_EQ(r.rfind("ok: ", 0), 0u) << r;
  EXPECT_TRUE(control_->selecting());
  TickConversion clock;  // identity: ticks are ns
  EXPECT_TRUE(control_->SelectionFor(9, clock).selected);
  auto s8 = control_->SelectionFor(8, clock);
  EXPECT_FALSE(s8.selected);
  EXPECT_TRUE(s8.before_selected);
  EXPECT_EQ(s8.streams, kStreamAll);
  // Events are judged by their own time: before the change thread 8 recorded, from it not.
  EXPECT_TRUE(s8.Keep(16, s8.since_ns - 1));
  EXPECT_FALSE(s8.Keep(16, s8.since_ns));
  EXPECT_TRUE(s8.Keep(1, s8.since_ns));  // definitions always
  control_->Apply("streams mpi");
  control_->Apply("threads all");
  s8 = control_->SelectionFor(8, clock);
  EXPECT_TRUE(s8.selected);
  EXPECT_EQ(s8.streams, kStreamMpi);
  EXPECT_TRUE(s8.Keep(65, s8.since_ns));   // MpiEnter
  EXPECT_FALSE(s8.Keep(16, s8.since_ns));  // RegionEnter
  EXPECT_TRUE(control_->selecting());
  EXPECT_NE(control_->Apply("status").find("streams mpi"), std::string::npos);
  control_->Apply("streams all");
  EXPECT_TRUE(control_->selecting()) << "events from before may still be drained";
  control_->Apply("streams all");
  EXPECT_FALSE(control_->selecting());
  EXPECT_EQ(control_->Apply("period x").rfind("error: ", 0), 0u);
  EXPECT_EQ(page_->period_ns.load(), 5'000'000u);  // a bad command changes nothing
}

// Apply from several threads at once while the loop's thread takes the changes (TSan builds
// check the locking).
TEST_F(ControlApply, ConcurrentCommands) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        control_->Apply(i % 2 ? "resume" : "pause");
        control_->Apply("status");
      }
    });
  size_t taken = 0;
  for (int i = 0; i < 100; ++i)
    taken += control_->TakeChanges().size();
  for (auto& t : threads)
    t.join();
  taken += control_->TakeChanges().size();
  control_->Apply("resume");
  EXPECT_EQ(page_->enabled.load(), 1);
  EXPECT_GT(taken, 0u);
}

}  // namespace
}  // namespace parmon::recorder
