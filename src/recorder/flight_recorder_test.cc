// The flight recorder's bookkeeping: which chunks are evicted, and the exact counts of
// overwritten events and evicted loss reports per stream.
#include "recorder/flight_recorder.h"

#include <gtest/gtest.h>

namespace parmon::recorder {
namespace {

using format::Source;

HeldChunk Chunk(uint32_t loc,
                uint64_t first_ts,
                uint32_t count,
                size_t bytes,
                uint64_t lost_inside = 0,
                uint64_t lost_records = 0,
                Source source = Source::kRuntime) {
  HeldChunk c;
  c.location = loc;
  c.source = source;
  c.first_ts = first_ts;
  c.last_ts = first_ts + 10;
  c.count = count;
  c.lost_inside = lost_inside;
  c.lost_records = lost_records;
  c.bytes.assign(bytes, 0xab);
  return c;
}

TEST(FlightRecorder, KeepsEverythingWithinBudget) {
  FlightRecorder fr(1000);
  LossLedger ledger;
  fr.Hold(Chunk(1, 100, 10, 400), &ledger);
  fr.Hold(Chunk(2, 50, 20, 600), &ledger);
  EXPECT_EQ(fr.held().size(), 2u);
  EXPECT_EQ(fr.held_bytes(), 1000u);
  EXPECT_EQ(fr.overwritten_total(), 0u);
  EXPECT_TRUE(fr.losses().empty());
  EXPECT_EQ(ledger.total(), 0u);
}

TEST(FlightRecorder, EvictsEarliestStartingChunkFirst) {
  FlightRecorder fr(1000);
  LossLedger ledger;
  fr.Hold(Chunk(1, 300, 10, 400), &ledger);
  fr.Hold(Chunk(2, 100, 20, 400), &ledger);  // starts earliest though held second
  fr.Hold(Chunk(1, 500, 30, 400), &ledger);  // 1200 bytes: one must go
  ASSERT_EQ(fr.held().size(), 2u);
  EXPECT_EQ(fr.held()[0].first_ts, 300u);
  EXPECT_EQ(fr.held()[1].first_ts, 500u);
  EXPECT_EQ(fr.held_bytes(), 800u);
  EXPECT_EQ(fr.overwritten_total(), 20u);
  EXPECT_EQ(fr.losses().at({2, Source::kRuntime}).overwritten, 20u);
  EXPECT_EQ(ledger.of(2), 20u);
  EXPECT_EQ(ledger.of(1), 0u);
}

TEST(FlightRecorder, LostEventsAreNotCountedAsOverwrittenEvents) {
  FlightRecorder fr(100);
  LossLedger ledger;
  // 12 events of which 2 are Lost reports carrying 7 and 5 earlier losses.
  fr.Hold(Chunk(3, 10, 12, 80, /*lost_inside=*/12, /*lost_records=*/2), &ledger);
  fr.Hold(Chunk(3, 20, 5, 80), &ledger);
  const auto& loss = fr.losses().at({3, Source::kRuntime});
  EXPECT_EQ(loss.overwritten, 10u);
  EXPECT_EQ(loss.lost_counts, 12u);
  EXPECT_EQ(ledger.of(3), 10u);  // the 12 were already in the ledger when reported
}

TEST(FlightRecorder, NewestChunkStaysEvenAboveBudget) {
  FlightRecorder fr(100);
  LossLedger ledger;
  fr.Hold(Chunk(1, 10, 4, 50), &ledger);
  fr.Hold(Chunk(1, 20, 6, 500), &ledger);
  ASSERT_EQ(fr.held().size(), 1u);
  EXPECT_EQ(fr.held()[0].count, 6u);
  EXPECT_EQ(fr.overwritten_total(), 4u);
}

TEST(FlightRecorder, LateLossMakesAStreamEntryWithoutOverwrites) {
  FlightRecorder fr(100);
  fr.NoteLateLoss(4, Source::kRuntime, 9, 700);
  fr.NoteLateLoss(4, Source::kRuntime, 2, 650);
  const auto& loss = fr.losses().at({4, Source::kRuntime});
  EXPECT_EQ(loss.overwritten, 0u);
  EXPECT_EQ(loss.lost_counts, 0u);
  // Kept apart from the window's evictions, with the time of the newest report: its RingLost
  // comes after every chunk the window kept, not at the session's start.
  EXPECT_EQ(loss.late, 11u);
  EXPECT_EQ(loss.late_ts, 700u);
  EXPECT_EQ(fr.overwritten_total(), 0u);
}

TEST(FlightRecorder, StreamsOfOneLocationAreKeptApart) {
  FlightRecorder fr(10);
  LossLedger ledger;
  fr.Hold(Chunk(1, 1, 3, 10, 0, 0, Source::kSampler), &ledger);
  fr.Hold(Chunk(1, 2, 4, 10), &ledger);
  fr.Hold(Chunk(1, 3, 5, 10), &ledger);
  EXPECT_EQ(fr.losses().at({1, Source::kSampler}).overwritten, 3u);
  EXPECT_EQ(fr.losses().at({1, Source::kRuntime}).overwritten, 4u);
  EXPECT_EQ(ledger.of(1), 7u);
}

}  // namespace
}  // namespace parmon::recorder
