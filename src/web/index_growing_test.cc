// The growing index (index_builder.h): a generated trace fed in time slices with a Publish after
// each must end in the same index as one built after the run (every state sum, slice, CPU run
// and message), and every intermediate index must hold only what the final one holds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <future>

#include <nlohmann/json.hpp>

#include "analysis/engine.h"
#include "model/merge.h"
#include "report/trace_builder.h"
#include "web/index_builder.h"
#include "web/progressive_view.h"
#include "web/trace_index.h"

namespace parmon::web {
namespace {

using format::Kind;
using format::StringCategory;
using testing::kMs;
using testing::TraceBuilder;

constexpr uint32_t kSend = 1, kRecv = 2, kWaitFn = 3, kIsend = 4, kPoll = 5, kRegion = 10;
constexpr uint64_t kRunMs = 300;

// Two ranks (locations 1, 2) and a helper thread of rank 0 (location 3). The ranks alternate
// compute (nested regions) and blocking sends/receives or Isend + Wait, their calls crossing
// sampler periods (10 ms); the helper polls and takes a lock (waits reported at their end) and
// has no MPI. Context switches on CPUs 0 and 1.
std::unique_ptr<model::Session> Generate(const std::string& path, bool sampled) {
  TraceBuilder b(path);
  b.Session({{"command", "gen"}, {"start_ts", std::to_string(testing::kT0)}});
  b.String(kSend, StringCategory::kFunction, "MPI_Send");
  b.String(kRecv, StringCategory::kFunction, "MPI_Recv");
  b.String(kWaitFn, StringCategory::kFunction, "MPI_Wait");
  b.String(kIsend, StringCategory::kFunction, "MPI_Isend");
  b.String(kPoll, StringCategory::kFunction, "poll");
  b.String(kRegion, StringCategory::kRegion, "outer");
  b.String(kRegion + 1, StringCategory::kRegion, "inner");
  for (uint32_t rank = 0; rank < 2; ++rank) {
    b.Process(100 * (rank + 1), 1, "gen");
    b.Thread(rank + 1, 100 * (rank + 1), 100 * (rank + 1), "gen");
    b.Ev(rank + 1, 0, Kind::kMpiInit, {rank, 2, 0});
  }
  b.Thread(3, 100, 101, "helper");
  // Events are made per kind of activity and written per stream in time order, as a recorder
  // writes them.
  struct Pending {
    uint32_t loc;
    uint64_t t;
    Kind kind;
    std::vector<uint64_t> args;
    format::Source source;
  };
  std::vector<Pending> events;
  auto ev = [&](uint32_t loc, uint64_t t, Kind kind, std::vector<uint64_t> args,
                format::Source source = format::Source::kRuntime) {
    events.push_back({loc, t, kind, std::move(args), source});
  };
  std::mt19937_64 rng(42);
  auto us = [&](uint64_t lo, uint64_t hi) { return (lo + rng() % (hi - lo)) * 1000; };
  // Rank 0 sends, rank 1 receives; iteration i starts at 3 ms * i.
  uint64_t request = 1;
  for (uint64_t i = 0; i < 90; ++i) {
    const uint64_t t = 2 * kMs + i * 3 * kMs;
    const uint64_t send = t + us(100, 900), work = t + us(50, 90);
    ev(1, t, Kind::kRegionEnter, {kRegion});
    ev(1, t + us(1, 20), Kind::kRegionEnter, {kRegion + 1});
    ev(1, work, Kind::kRegionLeave, {kRegion + 1});
    ev(1, t + us(95, 99), Kind::kRegionLeave, {kRegion});
    const uint64_t posted = t + us(100, 1500), arrive = std::max(send, posted) + us(10, 500);
    if (i % 3 == 2) {  // Isend, then Wait until the receive was posted
      ev(1, send, Kind::kMpiEnter, {kIsend});
      ev(1, send, Kind::kMpiSend, {1, 7, 1, 100 + i, request});
      ev(1, send + 1000, Kind::kMpiLeave, {kIsend});
      ev(1, send + 2000, Kind::kMpiEnter, {kWaitFn});
      ev(1, std::max(arrive, send + 3000), Kind::kMpiRequestDone, {request, 0});
      ev(1, std::max(arrive, send + 3000) + 10, Kind::kMpiLeave, {kWaitFn});
      ++request;
    } else {
      ev(1, send, Kind::kMpiEnter, {kSend});
      ev(1, send, Kind::kMpiSend, {1, 7, 1, 100 + i, 0});
      ev(1, arrive, Kind::kMpiLeave, {kSend});
    }
    ev(2, posted, Kind::kMpiEnter, {kRecv});
    ev(2, arrive, Kind::kMpiRecv, {0, 7, 1, 100 + i, 0, TraceBuilder::At(posted)});
    ev(2, arrive + 20, Kind::kMpiLeave, {kRecv});
  }
  // The helper: a poll and a lock wait per 7 ms, reported at their end.
  for (uint64_t t = 1 * kMs; t + 6 * kMs < kRunMs * kMs; t += 7 * kMs) {
    const uint64_t p0 = t + us(0, 2000), p1 = p0 + us(100, 2500);
    ev(3, p1, Kind::kChanWait, {kPoll, 1, 1, TraceBuilder::At(p0)});
    const uint64_t l0 = p1 + us(10, 500), l1 = l0 + us(100, 3000);
    ev(3, l1, Kind::kSyncWait, {0x1000, 0, TraceBuilder::At(l0), 0});
  }
  const auto sampler = format::Source::kSampler, sched = format::Source::kSched;
  if (sampled)
    for (uint32_t loc = 1; loc <= 3; ++loc)
      for (uint64_t t = 10 * kMs; t <= kRunMs * kMs; t += 10 * kMs) {
        const uint64_t run = us(2000, 9000), queued = us(0, 1000);
        ev(loc, t, Kind::kThreadStates, {run, queued, 0, 10 * kMs - run - queued, 0, 0, 0, 0},
           sampler);
      }
  // Each CPU runs one thread at a time (as the kernel reports them), a thread on one CPU at a
  // time: CPU c's slot k goes to location 1 + (k + c) % 3.
  for (uint64_t c = 0; c < 2; ++c)
    for (uint64_t t = kMs + c * 500'000, k = 0; t + 2 * kMs < kRunMs * kMs; t += 2 * kMs, ++k) {
      const uint32_t loc = 1 + static_cast<uint32_t>((k + c) % 3);
      const uint64_t in = t + us(0, 300), out = in + us(200, 1600);
      ev(loc, in, Kind::kSwitchIn, {c}, sched);
      ev(loc, out, Kind::kSwitchOut, {c, out % 3 == 0}, sched);
    }
  for (uint32_t loc = 1; loc <= 3; ++loc)
    ev(loc, kRunMs * kMs, Kind::kThreadEnd, {});
  std::stable_sort(events.begin(), events.end(),
                   [](const Pending& a, const Pending& b) { return a.t < b.t; });
  for (const Pending& e : events)
    b.Ev(e.loc, e.t, e.kind, e.args, "", e.source);
  EXPECT_TRUE(b.Finish({{"end_ts", std::to_string(testing::kT0 + kRunMs * kMs)}}));
  auto s = model::Session::Open(path);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(*s);
}

using SliceKey = std::tuple<uint32_t, uint64_t, uint64_t, uint32_t, int, int>;

std::set<SliceKey> Slices(const TraceIndex& x) {
  std::set<SliceKey> out;
  bool truncated = false;
  for (const IndexedLocation& l : x.locations())
    l.slices.Query(
        0, UINT64_MAX, 0, SIZE_MAX,
        [&](const Slice& s) {
          out.insert({l.id, s.begin, s.end, s.name, s.depth, static_cast<int>(s.kind)});
        },
        &truncated);
  for (const CpuRow& c : x.cpus())
    c.runs.Query(
        0, UINT64_MAX, 0, SIZE_MAX,
        [&](const Slice& s) {
          out.insert({1000 + c.cpu, s.begin, s.end, s.name, s.depth, 3});
        },
        &truncated);
  return out;
}

void ExpectSameIndex(const TraceIndex& a, const TraceIndex& b) {
  ASSERT_EQ(a.locations().size(), b.locations().size());
  EXPECT_EQ(a.names(), b.names());
  EXPECT_EQ(a.events(), b.events());
  EXPECT_EQ(a.start(), b.start());
  EXPECT_EQ(a.end(), b.end());
  for (size_t i = 0; i < a.locations().size(); ++i) {
    const IndexedLocation &x = a.locations()[i], &y = b.locations()[i];
    ASSERT_EQ(x.id, y.id);
    EXPECT_EQ(x.first, y.first);
    EXPECT_EQ(x.last, y.last);
    EXPECT_EQ(x.comm_first, y.comm_first);
    EXPECT_EQ(x.slices.size(), y.slices.size());
    EXPECT_EQ(x.states.boundaries(), y.states.boundaries()) << "location " << x.id;
    for (uint64_t t = a.start(); t <= a.end(); t += 97'003)  // every state sum, exactly
      ASSERT_EQ(x.states.Cumulative(t), y.states.Cumulative(t))
          << "location " << x.id << " at " << t - a.start();
  }
  {
    std::set<SliceKey> sa = Slices(a), sb = Slices(b);
    int shown = 0;
    for (const SliceKey& k : sa)
      if (!sb.count(k) && shown++ < 5)
        ADD_FAILURE() << "missing " << std::get<0>(k) << " " << std::get<1>(k) - a.start() << "-"
                      << std::get<2>(k) - a.start();
    for (const SliceKey& k : sb)
      if (!sa.count(k) && shown++ < 10)
        ADD_FAILURE() << "extra " << std::get<0>(k) << " " << std::get<1>(k) - a.start() << "-"
                      << std::get<2>(k) - a.start();
  }
  ASSERT_EQ(a.cpus().size(), b.cpus().size());
  for (size_t i = 0; i < a.cpus().size(); ++i)
    for (uint64_t t = a.start(); t <= a.end(); t += 97'003)
      ASSERT_EQ(a.cpus()[i].busy.Cumulative(t), b.cpus()[i].busy.Cumulative(t))
          << "cpu " << a.cpus()[i].cpu << "/" << b.cpus()[i].cpu << " at " << t - a.start()
          << " boundaries " << a.cpus()[i].busy.boundaries() << "/"
          << b.cpus()[i].busy.boundaries();
  ASSERT_EQ(a.messages().size(), b.messages().size());
  for (size_t i = 0; i < a.messages().size(); ++i) {
    const Message &x = a.messages()[i], &y = b.messages()[i];
    EXPECT_EQ(std::tie(x.send, x.recv, x.from, x.to, x.bytes, x.sender_wait_ns, x.receiver_wait_ns),
              std::tie(y.send, y.recv, y.from, y.to, y.bytes, y.sender_wait_ns, y.receiver_wait_ns))
        << "message " << i;
  }
}

class GrowingIndexTest : public ::testing::TestWithParam<bool> {};

TEST_P(GrowingIndexTest, PublishedInSlicesEqualsBuiltAfterTheRun) {
  const std::string path = ::testing::TempDir() + "/web_growing_" + std::to_string(getpid()) +
                           (GetParam() ? "_s" : "_i") + ".ptrace";
  auto session = Generate(path, GetParam());
  auto after = TraceIndex::Build(*session);
  ASSERT_TRUE(after.ok());
  const std::set<SliceKey> final_slices = Slices(**after);
  ASSERT_GT((*after)->messages().size(), 80u);
  ASSERT_GT(final_slices.size(), 500u);

  TraceIndex grown;
  IndexBuilder builder(*session, &grown);
  model::Merge merge(*session);
  size_t last_slices = 0, last_messages = 0;
  int publishes = 0;
  for (uint64_t bound = session->start(); bound < session->end(); bound += 3'700'000 + bound % 7) {
    merge.Run([&](const format::Event& e, model::StreamIndex) { builder.Feed(e); }, bound);
    builder.Publish(false, session->start(), bound);
    ++publishes;

    // What is shown grows, and is part of what the run ends with.
    const std::set<SliceKey> now = Slices(grown);
    EXPECT_GE(now.size(), last_slices);
    for (const SliceKey& k : now)
      ASSERT_TRUE(final_slices.count(k))
          << "slice of location " << std::get<0>(k) << " not in the final index";
    EXPECT_GE(grown.messages().size(), last_messages);
    last_slices = now.size();
    last_messages = grown.messages().size();
    // States well before the bound (no open call or wait reaches back that far) are final.
    for (const IndexedLocation& l : grown.locations())
      if (bound > session->start() + 20 * kMs) {
        const uint64_t settled = bound - 20 * kMs;
        EXPECT_EQ(l.states.Cumulative(settled), (*after)->Find(l.id)->states.Cumulative(settled))
            << "location " << l.id << " at " << settled - session->start();
      }
  }
  EXPECT_GT(publishes, 50);
  merge.Run([&](const format::Event& e, model::StreamIndex) { builder.Feed(e); });
  builder.Publish(true, session->start(), session->end());
  ExpectSameIndex(**after, grown);
  unlink(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(SampledOrInferred,
                         GrowingIndexTest,
                         ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Sampled" : "Inferred"; });

// The time of a location's MPI calls and blocking waits within [a, b), from its slices (not from
// the state series the test compares).
uint64_t CallTimeIn(const IndexedLocation& l, uint64_t a, uint64_t b) {
  uint64_t sum = 0;
  bool truncated = false;
  l.slices.Query(
      a, b, 0, SIZE_MAX,
      [&](const Slice& s) {
        if (s.kind == SliceKind::kMpi || s.kind == SliceKind::kWait)
          sum += std::min(s.end, b) - std::min(std::max(s.begin, a), std::min(s.end, b));
      },
      &truncated);
  return sum;
}

// The coarse level of progressive_view.h (the sampler streams alone) against the complete index:
// per bucket the same time in states, and each state's time off by at most the time of the
// calls and waits the coarse level does not know (the complete index books them as waits).
TEST(CoarseIndexTest, SamplerLevelIsACoarseningOfTheCompleteIndex) {
  const std::string path =
      ::testing::TempDir() + "/web_coarse_" + std::to_string(getpid()) + ".ptrace";
  auto session = Generate(path, true);
  auto complete = TraceIndex::Build(*session);
  ASSERT_TRUE(complete.ok());
  std::unique_ptr<TraceIndex> coarse = BuildCoarseIndex(*session);
  EXPECT_EQ(coarse->start(), (*complete)->start());
  EXPECT_EQ(coarse->end(), (*complete)->end());
  EXPECT_EQ(coarse->messages().size(), 0u);
  EXPECT_EQ(coarse->events(), 3 * kRunMs / 10);  // one sampler record per thread per 10 ms
  int compared = 0, differing = 0;
  for (const IndexedLocation& full : (*complete)->locations()) {
    const IndexedLocation* c = coarse->Find(full.id);
    ASSERT_NE(c, nullptr) << "location " << full.id;
    EXPECT_EQ(c->slices.size(), 0u);
    for (uint64_t a = coarse->start(); a + 7 * kMs <= coarse->end(); a += 7 * kMs) {
      const uint64_t b = a + 7 * kMs;
      const StateNs x = c->states.Sum(a, b), y = full.states.Sum(a, b);
      uint64_t tx = 0, ty = 0;
      for (int s = 0; s < kStates; ++s) {
        tx += x[s];
        ty += y[s];
      }
      EXPECT_NEAR(static_cast<double>(tx), static_cast<double>(ty), 1000.0)
          << "location " << full.id << " at " << a - coarse->start();
      const uint64_t calls = CallTimeIn(full, a, b);
      for (int s = 0; s < kStates; ++s)
        EXPECT_LE(std::max(x[s], y[s]) - std::min(x[s], y[s]), calls + 1000)
            << "location " << full.id << " state " << kStateKeys[s] << " at "
            << a - coarse->start();
      differing += x != y;
      ++compared;
    }
  }
  EXPECT_GT(compared, 100);
  EXPECT_GT(differing, 10);  // the calls' time is not known at the coarse level
  unlink(path.c_str());
}

// ProgressiveView: coarse answers say so; once the complete level is swapped in, every answer is
// byte for byte that of an Api over an index built before serving.
TEST(ProgressiveViewTest, CoarseAnswersThenExactlyTheCompleteOnes) {
  const std::string path =
      ::testing::TempDir() + "/web_progressive_" + std::to_string(getpid()) + ".ptrace";
  Generate(path, true);
  auto opened = model::Session::Open(path);
  ASSERT_TRUE(opened.ok());
  auto view = ProgressiveView::Over(std::move(*opened));
  const std::vector<std::string> targets = {
      "/api/session",  "/api/timeline?t0=0&t1=300000000&px=300",
      "/api/findings", "/api/timeline?t0=12345678&t1=23456789&px=777",
      "/api/cpus",     "/api/messages?t0=0&t1=100000000",
      "/api/matrix",   "/api/graph?steps=7"};
  using nlohmann::json;
  const json coarse_session = json::parse(view->Handle("/api/session").body);
  EXPECT_EQ(coarse_session["live"]["state"], "indexing");
  EXPECT_EQ(coarse_session["index"]["complete"], false);
  const std::string coarse_timeline = view->Handle(targets[1]).body;
  EXPECT_EQ(coarse_timeline.rfind("{\"complete\":false,\"level\":\"sampler\",", 0), 0u);
  EXPECT_EQ(view->Handle("/api/timeline?t0=9&t1=3").status, 400);

  auto session = model::Session::Open(path);
  ASSERT_TRUE(session.ok());
  auto analysed = analysis::Analyze(**session, analysis::Options{});
  ASSERT_TRUE(analysed.ok());
  auto index = TraceIndex::Build(**session);
  ASSERT_TRUE(index.ok());
  const Api api(**index, *analysed);
  // The coarse rows are the complete ones, named the same.
  ASSERT_EQ(coarse_session["rows"].size(), api.rows().size());
  for (size_t i = 0; i < api.rows().size(); ++i) {
    EXPECT_EQ(coarse_session["rows"][i]["id"], api.rows()[i].id);
    EXPECT_EQ(coarse_session["rows"][i]["label"], api.rows()[i].result->label);
  }

  std::promise<Status> done;
  view->Start([&] { return analysis::Analyze(**session, analysis::Options{}); },
              [&](const Status& s, const ProgressiveView&) { done.set_value(s); });
  auto finished = done.get_future();
  ASSERT_EQ(finished.wait_for(std::chrono::seconds(120)), std::future_status::ready);
  EXPECT_TRUE(finished.get().ok());
  EXPECT_TRUE(view->complete());
  for (const std::string& t : targets) {
    const ApiResponse got = view->Handle(t), want = api.Handle(t);
    EXPECT_EQ(got.status, want.status) << t;
    EXPECT_EQ(got.body, want.body) << t;
  }
  unlink(path.c_str());
}

}  // namespace
}  // namespace parmon::web
