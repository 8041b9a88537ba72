// A per-rank session followed while its files grow (TraceReader::Refresh of a multi-part reader,
// Session with follow_clocks, one model::Merge across the refreshes), against the same session
// read afresh once complete: every event is handed out once, on the same clock, with the same
// location ids; and Session::realigned() says when an event was aligned with an offset the later
// rounds changed. The session is a synthetic halo exchange on two hosts (parmon_synth), whose
// ranks' clocks differ by a known offset.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>
#include <vector>

#include "format/reader.h"
#include "model/merge.h"
#include "model/session.h"
#include "synth/halo_session.h"

namespace parmon::model {
namespace {

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/parmon_follow_test_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

using Key = std::tuple<uint64_t, uint32_t, uint16_t, uint64_t, uint64_t>;

Key KeyOf(const format::Event& e) {
  return {e.ts, e.location, e.kind, e.nargs > 0 ? e.args[0] : 0, e.nargs > 1 ? e.args[1] : 0};
}

std::vector<Key> AllEvents(const Session& s) {
  std::vector<Key> out;
  Merge m(s);
  format::Event e;
  while (m.Next(&e))
    out.push_back(KeyOf(e));
  return out;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Rank files copied into `to` a share at a time (cut anywhere, mid-chunk included).
class Growing {
 public:
  Growing(const std::string& from, const std::string& to, uint32_t ranks) : to_(to) {
    for (uint32_t k = 0; k < ranks; ++k)
      whole_.push_back(Slurp(from + "/rank-" + std::to_string(k) + ".ptrace"));
    held_.assign(ranks, 0);
  }
  // Every file up to `share` of its size.
  void GrowTo(double share) {
    for (size_t k = 0; k < whole_.size(); ++k)
      GrowFile(k, static_cast<size_t>(share * static_cast<double>(whole_[k].size())));
  }
  // File k up to `bytes`.
  void GrowFile(size_t k, size_t bytes) {
    const size_t want = std::max(held_[k], std::min(whole_[k].size(), bytes));
    std::ofstream out(to_ + "/rank-" + std::to_string(k) + ".ptrace",
                      std::ios::binary | std::ios::app);
    out.write(whole_[k].data() + held_[k], static_cast<std::streamsize>(want - held_[k]));
    held_[k] = want;
  }

 private:
  std::string to_;
  std::vector<std::string> whole_;
  std::vector<size_t> held_;
};

synth::HaloOptions Halo() {
  synth::HaloOptions o;
  o.ranks = 4;
  o.ranks_per_host = 2;  // ranks 2 and 3 on a clock 3 ms ahead
  o.iterations = 300;
  o.chunk_bytes = 2048;  // many chunks per file
  return o;
}

// Follows the growing copy from `first` of each file in steps of `step`; the merged events.
std::vector<Key> Follow(const std::string& whole,
                        const std::string& dir,
                        double first,
                        double step,
                        bool* realigned,
                        size_t* locations) {
  Growing g(whole, dir, Halo().ranks);
  g.GrowTo(first);
  auto reader = format::TraceReader::Open(dir);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  SessionOptions options;
  options.follow_clocks = true;
  auto session = Session::Over(**reader, options);
  EXPECT_TRUE(session.ok());
  Merge m(**session);
  std::vector<Key> out;
  format::Event e;
  for (double share = first;; share += step) {
    // Up to the last event read so far on rank 0's clock (a merge takes a new look at the
    // streams when its bound moves), everything once all is read.
    const uint64_t until = share >= 1 ? UINT64_MAX : (*session)->end();
    while (m.Next(&e, until))
      out.push_back(KeyOf(e));
    if (share >= 1)
      break;
    g.GrowTo(share + step);
    EXPECT_TRUE((*reader)->Refresh().ok());
    (*session)->Refresh();
  }
  EXPECT_TRUE((*reader)->closed_cleanly());
  EXPECT_EQ((*session)->complete_until(), UINT64_MAX);
  *realigned = (*session)->realigned();
  *locations = (*reader)->definitions().locations.size();
  return out;
}

TEST(FollowSessionTest, GrowingRankFilesGiveTheEventsOfTheWholeSessionOnRankZerosClock) {
  TempDir whole, grown;
  auto truth = synth::WriteHaloSession(whole.path, Halo());
  ASSERT_TRUE(truth.ok()) << truth.status().message();
  auto fresh = Session::Open(whole.path);
  ASSERT_TRUE(fresh.ok());
  ASSERT_FALSE((*fresh)->clocks().empty());  // a real offset to apply
  std::vector<Key> expected = AllEvents(**fresh);
  ASSERT_EQ(expected.size(), truth->events);
  // From 45% of each file (every rank's first round is in it: since format 4.0 made the events
  // smaller, the first third no longer holds it), in eighths.
  bool realigned = true;
  size_t locations = 0;
  std::vector<Key> got = Follow(whole.path, grown.path, 0.45, 0.125, &realigned, &locations);
  // The offset is the same at every round: nothing fed moved.
  EXPECT_FALSE(realigned);
  EXPECT_EQ(locations, (*fresh)->definitions().locations.size());
  std::sort(got.begin(), got.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);
}

TEST(FollowSessionTest, EventsReadBeforeTheFirstRoundAreSaidToBeRealigned) {
  TempDir whole, grown;
  ASSERT_TRUE(synth::WriteHaloSession(whole.path, Halo()).ok());
  // Rank 0's file up to its first events (no round yet), the others whole: ranks 2 and 3 are
  // read with no offset, which the first round then changes.
  auto rank0 = format::TraceReader::Open(whole.path + "/rank-0.ptrace");
  ASSERT_TRUE(rank0.ok());
  uint64_t first_events = UINT64_MAX;
  for (const format::Stream& st : (*rank0)->streams())
    if (st.source == format::Source::kRuntime)
      first_events = std::min(first_events, st.chunks.front().offset);
  Growing g(whole.path, grown.path, Halo().ranks);
  g.GrowFile(0, first_events);
  for (size_t k = 1; k < Halo().ranks; ++k)
    g.GrowFile(k, SIZE_MAX);
  auto reader = format::TraceReader::Open(grown.path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  SessionOptions options;
  options.follow_clocks = true;
  auto session = Session::Over(**reader, options);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->clocks().empty());
  EXPECT_FALSE((*session)->realigned());
  g.GrowTo(1);
  ASSERT_TRUE((*reader)->Refresh().ok());
  (*session)->Refresh();
  EXPECT_FALSE((*session)->clocks().empty());
  EXPECT_TRUE((*session)->realigned());
}

}  // namespace
}  // namespace parmon::model
