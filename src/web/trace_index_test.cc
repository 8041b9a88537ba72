// TraceIndex and Api on small traces built here (tests/report/trace_builder.h), whose answers are
// known by construction: exact state sums per bucket at several zoom levels, slices shown or
// counted by their width, messages paired send -> receive, CPU runs from context switches, and
// the API's checks of its parameters.
#include "web/trace_index.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <array>
#include <map>
#include <string>
#include <vector>

#include "analysis/engine.h"
#include "report/trace_builder.h"
#include "web/api.h"

namespace parmon::web {
namespace {

using format::Kind;
using format::StringCategory;
using nlohmann::json;
using testing::kMs;
using testing::TraceBuilder;

constexpr uint32_t kSend = 1, kRecv = 2, kCompute = 10, kInner = 11, kBadName = 12;
constexpr int kRun = 0, kQueued = 1, kComm = 2, kLock = 3;

// Ranks 0 .. n-1: location rank + 1, the main thread of process 100 (rank + 1).
void AddRanks(TraceBuilder& b, uint32_t n) {
  for (uint32_t rank = 0; rank < n; ++rank) {
    const uint32_t loc = rank + 1, pid = 100 * loc;
    b.Process(pid, 1, "t");
    b.Thread(loc, pid, pid, "t");
    b.Ev(loc, 0, Kind::kMpiInit, {rank, n, 0});
  }
}

// Location 1 (rank 0): sampled, 10 ms running, MPI_Send 4-6 ms inside region compute (0-8 ms)
// with inner (1-1.5 ms) nested; ran on CPU 0 from 0 to 3 ms (preempted) and 5 to 9 ms.
// Location 2 (rank 1): sampled 6 ms running, 2 queued, 2 lock wait over 0-10 ms, and MPI_Recv
// 5-7 ms (the message sent at 4 ms, received at 7 ms), a region named in bad UTF-8 (8-9 ms);
// ran on CPU 1 from 1 to 2 ms.
std::unique_ptr<model::Session> Build(const std::string& path) {
  TraceBuilder b(path);
  b.Session({{"command", "t"}, {"start_ts", std::to_string(testing::kT0)}});
  b.String(kSend, StringCategory::kFunction, "MPI_Send");
  b.String(kRecv, StringCategory::kFunction, "MPI_Recv");
  b.String(kCompute, StringCategory::kRegion, "compute");
  b.String(kInner, StringCategory::kRegion, "inner");
  b.String(kBadName, StringCategory::kRegion, "bad\xff\xfe");  // not UTF-8
  AddRanks(b, 2);
  b.Ev(1, 0, Kind::kRegionEnter, {kCompute});
  b.Ev(1, 1 * kMs, Kind::kRegionEnter, {kInner});
  b.Ev(1, 1 * kMs + kMs / 2, Kind::kRegionLeave, {kInner});
  b.Ev(1, 4 * kMs, Kind::kMpiEnter, {kSend});
  b.Ev(1, 4 * kMs, Kind::kMpiSend, {1, 7, 1, 1000, 0});
  b.Ev(1, 6 * kMs, Kind::kMpiLeave, {kSend});
  b.Ev(1, 8 * kMs, Kind::kRegionLeave, {kCompute});
  b.Ev(1, 10 * kMs, Kind::kThreadEnd);
  b.Ev(2, 5 * kMs, Kind::kMpiEnter, {kRecv});
  b.Ev(2, 7 * kMs, Kind::kMpiRecv, {0, 7, 1, 1000, 0, TraceBuilder::At(5 * kMs)});
  b.Ev(2, 7 * kMs, Kind::kMpiLeave, {kRecv});
  b.Ev(2, 8 * kMs, Kind::kRegionEnter, {kBadName});
  b.Ev(2, 9 * kMs, Kind::kRegionLeave, {kBadName});
  b.Ev(2, 10 * kMs, Kind::kThreadEnd);
  b.Ev(1, 10 * kMs, Kind::kThreadStates, {10 * kMs, 0, 0, 0, 0, 0, 0, 0}, "",
       format::Source::kSampler);
  b.Ev(2, 10 * kMs, Kind::kThreadStates, {6 * kMs, 2 * kMs, 0, 2 * kMs, 0, 0, 0, 0}, "",
       format::Source::kSampler);
  const auto sched = format::Source::kSched;
  b.Ev(1, 0, Kind::kSwitchIn, {0}, "", sched);
  b.Ev(1, 3 * kMs, Kind::kSwitchOut, {0, 1}, "", sched);
  b.Ev(1, 5 * kMs, Kind::kSwitchIn, {0}, "", sched);
  b.Ev(1, 9 * kMs, Kind::kSwitchOut, {0, 0}, "", sched);
  b.Ev(2, 1 * kMs, Kind::kSwitchIn, {1}, "", sched);
  b.Ev(2, 2 * kMs, Kind::kSwitchOut, {1, 0}, "", sched);
  EXPECT_TRUE(b.Finish({{"end_ts", std::to_string(testing::kT0 + 10 * kMs)}}));
  auto s = model::Session::Open(path);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(*s);
}

class TraceIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/web_index_test_" + std::to_string(getpid()) + ".ptrace";
    session_ = Build(path_);
    auto index = TraceIndex::Build(*session_);
    ASSERT_TRUE(index.ok());
    index_ = std::move(*index);
    auto results = analysis::Analyze(*session_, {});
    ASSERT_TRUE(results.ok());
    results_ = std::move(*results);
  }
  void TearDown() override { unlink(path_.c_str()); }
  uint64_t At(uint64_t t) const { return index_->start() + t; }
  json Get(const std::string& target, int status = 200) {
    ApiResponse r = Api(*index_, results_).Handle(target);
    EXPECT_EQ(r.status, status) << target << ": " << r.body;
    return json::parse(r.body);
  }

  std::string path_;
  std::unique_ptr<model::Session> session_;
  std::unique_ptr<TraceIndex> index_;
  analysis::Results results_;
};

TEST_F(TraceIndexTest, StateSumsAreExactAtEveryZoom) {
  ASSERT_EQ(index_->start(), testing::kT0);
  const StateSeries& rank0 = index_->Find(1)->states;
  const StateSeries& rank1 = index_->Find(2)->states;
  // Rank 0: running but for its MPI_Send (4-6 ms), which is comm wait.
  StateNs all = rank0.Sum(At(0), At(10 * kMs));
  EXPECT_EQ(all[kRun], 8 * kMs);
  EXPECT_EQ(all[kComm], 2 * kMs);
  StateNs mid = rank0.Sum(At(3 * kMs), At(5 * kMs));
  EXPECT_EQ(mid[kRun], 1 * kMs);
  EXPECT_EQ(mid[kComm], 1 * kMs);
  // Rank 1: MPI_Recv 5-7 ms is comm wait; the other 8 ms keep the sampler's 6:2:2 split.
  all = rank1.Sum(At(0), At(10 * kMs));
  EXPECT_EQ(all[kComm], 2 * kMs);
  EXPECT_EQ(all[kRun], 4800000u);
  EXPECT_EQ(all[kQueued], 1600000u);
  EXPECT_EQ(all[kLock], 1600000u);
  // Buckets of 1 ms add up to the whole, and each outside the call is 0.6/0.2/0.2 ms.
  StateNs sum{};
  for (uint64_t i = 0; i < 10; ++i) {
    StateNs b = rank1.Sum(At(i * kMs), At((i + 1) * kMs));
    for (int s = 0; s < kStates; ++s)
      sum[s] += b[s];
    if (i < 5 || i >= 7) {
      EXPECT_EQ(b[kRun], 600000u) << i;
      EXPECT_EQ(b[kLock], 200000u) << i;
    } else {
      EXPECT_EQ(b[kComm], kMs) << i;
    }
  }
  EXPECT_EQ(sum, all);
  // Outside the trace: nothing.
  EXPECT_EQ(rank1.Sum(At(20 * kMs), At(30 * kMs)), StateNs{});
}

TEST_F(TraceIndexTest, SlicesNarrowerThanAPixelAreCounted) {
  const SliceSet& s = index_->Find(1)->slices;
  ASSERT_EQ(s.size(), 3u);  // compute, inner, MPI_Send
  std::vector<std::string> seen;
  bool truncated = false;
  auto visit = [&](const Slice& x) { seen.push_back(index_->names()[x.name]); };
  // 1 ns per pixel: all three.
  EXPECT_EQ(s.Query(At(0), At(10 * kMs), 1, 100, visit, &truncated), 0u);
  EXPECT_EQ(seen.size(), 3u);
  // 1 ms per pixel: inner (0.5 ms) is counted, not sent.
  seen.clear();
  EXPECT_EQ(s.Query(At(0), At(10 * kMs), kMs, 100, visit, &truncated), 1u);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"MPI_Send", "compute"}));
  // A range within compute but after inner and the send: compute alone.
  seen.clear();
  EXPECT_EQ(s.Query(At(6 * kMs + 1), At(7 * kMs), 1, 100, visit, &truncated), 0u);
  EXPECT_EQ(seen, std::vector<std::string>{"compute"});
  // The limit cuts the visit short and says so.
  seen.clear();
  s.Query(At(0), At(10 * kMs), 1, 1, visit, &truncated);
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_TRUE(truncated);
}

TEST_F(TraceIndexTest, MessagesAndCpus) {
  ASSERT_EQ(index_->messages().size(), 1u);
  const Message& m = index_->messages()[0];
  EXPECT_EQ(m.from, 1u);
  EXPECT_EQ(m.to, 2u);
  EXPECT_EQ(m.send, At(4 * kMs));
  EXPECT_EQ(m.recv, At(7 * kMs));
  bool more = true;
  EXPECT_EQ(index_->MessagesIn(At(6 * kMs), At(8 * kMs), 10, &more).size(), 1u);
  EXPECT_FALSE(more);
  EXPECT_TRUE(index_->MessagesIn(At(8 * kMs), At(9 * kMs), 10, &more).empty());
  ASSERT_EQ(index_->cpus().size(), 2u);
  const CpuRow& cpu0 = index_->cpus()[0];
  EXPECT_EQ(cpu0.cpu, 0u);
  EXPECT_EQ(cpu0.runs.size(), 2u);
  EXPECT_EQ(cpu0.busy.Sum(At(0), At(10 * kMs))[kRun], 7 * kMs);
  EXPECT_EQ(cpu0.busy.Sum(At(2 * kMs), At(6 * kMs))[kRun], 2 * kMs);
  EXPECT_EQ(index_->cpus()[1].busy.Sum(At(0), At(10 * kMs))[kRun], 1 * kMs);
}

TEST_F(TraceIndexTest, ApiTimelineRunsAddUp) {
  json session = Get("/api/session");
  ASSERT_EQ(session["rows"].size(), 2u);
  // A name that is not UTF-8 is sent with replacement characters, not refused.
  const auto& names = session["names"];
  EXPECT_NE(std::find(names.begin(), names.end(), "bad\xEF\xBF\xBD\xEF\xBF\xBD"), names.end())
      << names.dump();
  EXPECT_EQ(session["end"], 10 * kMs);
  EXPECT_EQ(session["counts"]["messages"], 1);
  EXPECT_EQ(Get("/api/timeline?rows=2,2")["rows"].size(), 2u);  // a row twice: valid JSON
  json t = Get("/api/timeline?t0=0&t1=10000000&px=10&rows=2");
  ASSERT_EQ(t["rows"].size(), 1u);
  json runs = t["rows"][0]["states"];
  // Running-dominated 0-5 ms, comm wait 5-7 ms, running 7-10 ms.
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0], json::parse("[0,5000000,0,[3000000,1000000,0,1000000,0,0,0]]"));
  EXPECT_EQ(runs[1], json::parse("[5000000,7000000,2,[0,0,2000000,0,0,0,0]]"));
  EXPECT_EQ(runs[2][3][0], 1800000);
  json c = Get("/api/cpus?t0=0&t1=10000000&px=10");
  ASSERT_EQ(c["cpus"].size(), 2u);
  EXPECT_EQ(c["cpus"][0]["runs"].size(), 2u);
  json f = Get("/api/findings");
  EXPECT_TRUE(f["findings"].is_array());
  json m = Get("/api/messages?t0=0&t1=10000000");
  EXPECT_EQ(m["messages"][0], json::parse("[1,2,4000000,7000000,1000,7]"));
}

TEST_F(TraceIndexTest, FindingsSpanTheirRowsCommunication) {
  // Rank 0's MPI_Send 4-6 ms, rank 1's MPI_Recv 5-7 ms.
  EXPECT_EQ(index_->Find(1)->comm_first, At(4 * kMs));
  EXPECT_EQ(index_->Find(1)->comm_last, At(6 * kMs));
  EXPECT_EQ(index_->Find(2)->comm_first, At(5 * kMs));
  EXPECT_EQ(index_->Find(2)->comm_last, At(7 * kMs));
  const uint64_t begin[] = {0, 4 * kMs, 5 * kMs}, end[] = {0, 6 * kMs, 7 * kMs};
  for (const json& f : Get("/api/findings")["findings"]) {
    if (f["rows"].empty())
      continue;
    uint64_t b = UINT64_MAX, e = 0;
    for (const json& id : f["rows"]) {
      b = std::min(b, begin[id.get<int>()]);
      e = std::max(e, end[id.get<int>()]);
    }
    EXPECT_EQ(f["t0"], b) << f.dump();
    EXPECT_EQ(f["t1"], e) << f.dump();
  }
}

TEST_F(TraceIndexTest, ApiRefusesBadParameters) {
  const char* bad[] = {"/api/timeline?t0=5&t1=5",
                       "/api/timeline?px=0",
                       "/api/timeline?px=8193",
                       "/api/timeline?t0=-1",
                       "/api/timeline?t0=1e3",
                       "/api/timeline?rows=1,99",
                       "/api/timeline?rows=abc",
                       "/api/timeline?px=10&px=20",
                       "/api/timeline?colour=red",
                       "/api/messages?limit=0",
                       "/api/timeline?t1=99999999999999999999999",
                       "/api/session?x=1",
                       "/api/cpus?t0=10&t1=2"};
  for (const char* target : bad) {
    json j = Get(target, 400);
    const std::string e = j["error"];
    EXPECT_EQ(e.back(), '.') << target;
    EXPECT_EQ(e.find(". "), std::string::npos) << target << ": " << e;  // one sentence
  }
  Get("/api/nothing", 404);
  Get("/api/timeline?rows=1,2,1,2", 400);  // more rows than the trace has
}

TEST_F(TraceIndexTest, MatrixAndGraphOfTheOneMessage) {
  // The send waited from its call's entry (4 ms) until the receive was posted (5 ms).
  ASSERT_EQ(index_->messages().size(), 1u);
  EXPECT_EQ(index_->messages()[0].sender_wait_ns, 1 * kMs);
  EXPECT_EQ(index_->messages()[0].receiver_wait_ns, 0u);
  json m = Get("/api/matrix");
  EXPECT_EQ(m["rows"], json::parse("[1,2]"));
  EXPECT_EQ(m["cells"], json::parse("[[1,2,1,1000,1000000,1000000,0]]"));
  // A range is the messages sent in it.
  EXPECT_TRUE(Get("/api/matrix?t0=4000001&t1=10000000")["cells"].empty());
  EXPECT_EQ(Get("/api/matrix?t0=4000000&t1=4000001")["cells"].size(), 1u);
  // Ten steps of 1 ms: the message in step 4, rank 1's comm wait in steps 5 and 6.
  json g = Get("/api/graph?t0=0&t1=10000000&steps=10");
  ASSERT_EQ(g["bounds"].size(), 11u);
  EXPECT_EQ(g["bounds"][4], 4 * kMs);
  ASSERT_EQ(g["links"].size(), 1u);
  EXPECT_EQ(g["links"][0]["messages"], json::parse("[0,0,0,0,1,0,0,0,0,0]"));
  EXPECT_EQ(g["links"][0]["bytes"][4], 1000);
  EXPECT_EQ(g["links"][0]["wait_ns"][4], 1 * kMs);
  ASSERT_EQ(g["nodes"].size(), 2u);
  EXPECT_EQ(g["nodes"][1]["id"], 2);
  EXPECT_EQ(g["nodes"][1]["states"][5][kComm], 1 * kMs);
  EXPECT_EQ(g["nodes"][1]["states"][0][kRun], 600000);
  for (const char* bad : {"/api/graph?steps=0", "/api/graph?steps=1001", "/api/matrix?t0=9&t1=9",
                          "/api/matrix?steps=2"})
    Get(bad, 400);
}

// Three ranks: rank 0 sends to ranks 1 and 2 with MPI_Isend and completes both in one
// MPI_Waitall (2-8 ms) while rank 1 posts its receive at 5 ms and rank 2 had posted its own
// (MPI_Irecv) at 0; then rank 2 sends to rank 0 (MPI_Send 9-9.2 ms), which waits in MPI_Recv
// from 8.5 ms. The matrix's figures are checked against the report's links, an independent
// computation of the same split, and against what the trace was built to hold.
// The index and the report's analysis of the trace at `path`, which is then removed.
void IndexAndAnalyse(const std::string& path,
                     std::unique_ptr<TraceIndex>* index,
                     analysis::Results* results) {
  auto session = model::Session::Open(path);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto built = TraceIndex::Build(**session);
  ASSERT_TRUE(built.ok());
  auto analysed = analysis::Analyze(**session, {});
  ASSERT_TRUE(analysed.ok());
  unlink(path.c_str());
  *index = std::move(*built);
  *results = std::move(*analysed);
}

TEST(TraceIndexMatrix, AgreesWithTheReportsLinks) {
  const std::string path =
      ::testing::TempDir() + "/web_matrix_test_" + std::to_string(getpid()) + ".ptrace";
  constexpr uint32_t kWaitall = 3, kSendFn = 4, kRecvFn = 5, kWait = 6;
  {
    TraceBuilder b(path);
    b.Session({{"command", "t"}, {"start_ts", std::to_string(testing::kT0)}});
    b.String(kWaitall, StringCategory::kFunction, "MPI_Waitall");
    b.String(kSendFn, StringCategory::kFunction, "MPI_Send");
    b.String(kRecvFn, StringCategory::kFunction, "MPI_Recv");
    b.String(kWait, StringCategory::kFunction, "MPI_Wait");
    AddRanks(b, 3);
    const uint64_t us = kMs / 1000;
    b.Ev(1, 1 * kMs, Kind::kMpiSend, {1, 5, 1, 100, 11});
    b.Ev(1, 1 * kMs, Kind::kMpiSend, {2, 5, 1, 300, 12});
    b.Ev(1, 2 * kMs, Kind::kMpiEnter, {kWaitall});
    b.Ev(1, 6 * kMs, Kind::kMpiRequestDone, {11, 0});
    b.Ev(1, 8 * kMs, Kind::kMpiRequestDone, {12, 0});
    b.Ev(1, 8 * kMs, Kind::kMpiLeave, {kWaitall});
    b.Ev(1, 8500 * us, Kind::kMpiEnter, {kRecvFn});
    b.Ev(1, 9500 * us, Kind::kMpiRecv, {2, 6, 1, 50, 0, TraceBuilder::At(8500 * us)});
    b.Ev(1, 9500 * us, Kind::kMpiLeave, {kRecvFn});
    b.Ev(1, 10 * kMs, Kind::kThreadEnd);
    b.Ev(2, 5 * kMs, Kind::kMpiEnter, {kRecvFn});
    b.Ev(2, 5500 * us, Kind::kMpiRecv, {0, 5, 1, 100, 0, TraceBuilder::At(5 * kMs)});
    b.Ev(2, 5500 * us, Kind::kMpiLeave, {kRecvFn});
    b.Ev(2, 10 * kMs, Kind::kThreadEnd);
    b.Ev(3, 7 * kMs, Kind::kMpiEnter, {kWait});
    b.Ev(3, 7500 * us, Kind::kMpiRecv, {0, 5, 1, 300, 21, TraceBuilder::At(0)});
    b.Ev(3, 7500 * us, Kind::kMpiLeave, {kWait});
    b.Ev(3, 9 * kMs, Kind::kMpiEnter, {kSendFn});
    b.Ev(3, 9 * kMs, Kind::kMpiSend, {0, 6, 1, 50, 0});
    b.Ev(3, 9200 * us, Kind::kMpiLeave, {kSendFn});
    b.Ev(3, 10 * kMs, Kind::kThreadEnd);
    ASSERT_TRUE(b.Finish({{"end_ts", std::to_string(testing::kT0 + 10 * kMs)}}));
  }
  std::unique_ptr<TraceIndex> index;
  analysis::Results results;
  ASSERT_NO_FATAL_FAILURE(IndexAndAnalyse(path, &index, &results));
  json m = json::parse(Api(*index, results).Handle("/api/matrix").body);
  ASSERT_EQ(m["cells"].size(), 3u) << m.dump();
  // By construction: 0 -> 1 waited 3 ms in the Waitall (entry 2 ms, receive posted 5 ms; the
  // 0 -> 2 receive was posted before the entry), 2 -> 0's receiver 0.5 ms (8.5 to 9 ms).
  EXPECT_EQ(m["cells"][0], json::parse("[1,2,1,100,3000000,3000000,0]"));
  EXPECT_EQ(m["cells"][1], json::parse("[1,3,1,300,0,0,0]"));
  EXPECT_EQ(m["cells"][2], json::parse("[3,1,1,50,500000,0,500000]"));
  EXPECT_EQ(m["totals"]["bytes"], 450);
  // The report's links, by rank (location = rank + 1 here).
  ASSERT_EQ(results.links.size(), 3u);
  for (const analysis::LinkResult& k : results.links) {
    const json* cell = nullptr;
    for (const json& c : m["cells"])
      if (c[0] == k.from + 1 && c[1] == k.to + 1)
        cell = &c;
    ASSERT_NE(cell, nullptr) << k.from << " -> " << k.to;
    EXPECT_EQ((*cell)[2], k.messages) << k.from << " -> " << k.to;
    EXPECT_EQ((*cell)[3], k.bytes) << k.from << " -> " << k.to;
    EXPECT_EQ((*cell)[5], k.sender_wait_ns) << k.from << " -> " << k.to;
    EXPECT_EQ((*cell)[6], k.receiver_wait_ns) << k.from << " -> " << k.to;
  }
  // The graph's steps add up to the matrix, and its nodes' steps to the whole range's states.
  json g = json::parse(Api(*index, results).Handle("/api/graph?steps=7").body);
  uint64_t messages = 0, bytes = 0, wait = 0;
  for (const json& k : g["links"])
    for (int i = 0; i < 7; ++i) {
      messages += k["messages"][i].get<uint64_t>();
      bytes += k["bytes"][i].get<uint64_t>();
      wait += k["wait_ns"][i].get<uint64_t>();
    }
  EXPECT_EQ(messages, m["totals"]["messages"]);
  EXPECT_EQ(bytes, m["totals"]["bytes"]);
  EXPECT_EQ(wait, m["totals"]["wait_ns"]);
  for (const json& n : g["nodes"]) {
    const StateNs whole = index->Find(n["id"])->states.Sum(index->start(), index->end());
    for (int s = 0; s < kStates; ++s) {
      uint64_t sum = 0;
      for (const json& step : n["states"])
        sum += step[s].get<uint64_t>();
      EXPECT_EQ(sum, whole[s]) << n["id"] << " state " << s;
    }
  }
}

// The per-link checkpoints (LinkCheckpoints, every 4,096th message here): on a ring of 3 ranks
// with 30,000 messages of varied sizes, the matrix and the graph of random ranges, some holding
// many strides of messages, some a few messages, equal the sums of the index's own messages in
// them, counted here one by one.
TEST(TraceIndexMatrix, CheckpointedSumsEqualThePassOverTheMessages) {
  const std::string path =
      ::testing::TempDir() + "/web_checkpoints_test_" + std::to_string(getpid()) + ".ptrace";
  constexpr uint64_t kIterations = 10000;
  const uint64_t us = kMs / 1000;
  {
    TraceBuilder b(path);
    b.Session({{"command", "t"}, {"start_ts", std::to_string(testing::kT0)}});
    AddRanks(b, 3);
    for (uint32_t r = 0; r < 3; ++r)
      for (uint64_t i = 0; i < kIterations; ++i) {
        const uint64_t t = (10 + i * 10) * us, from = (r + 2) % 3;
        b.Ev(r + 1, t + r * 100, Kind::kMpiSend, {(r + 1) % 3, 7, 1, 1 + (i * 37 + r) % 1000, 0});
        b.Ev(r + 1, t + 5 * us + (i % 7) * 100, Kind::kMpiRecv,
             {from, 7, 1, 1 + (i * 37 + from) % 1000, 0, TraceBuilder::At(t + 2 * us)});
      }
    for (uint32_t r = 0; r < 3; ++r)
      b.Ev(r + 1, (20 + kIterations * 10) * us, Kind::kThreadEnd);
    ASSERT_TRUE(
        b.Finish({{"end_ts", std::to_string(testing::kT0 + (30 + kIterations * 10) * us)}}));
  }
  std::unique_ptr<TraceIndex> index;
  analysis::Results results;
  ASSERT_NO_FATAL_FAILURE(IndexAndAnalyse(path, &index, &results));
  const std::vector<Message>& all = index->messages();
  ASSERT_EQ(all.size(), 3 * kIterations);
  ASSERT_EQ(index->link_checkpoints().stride(), 4096u);
  const uint64_t origin = index->start(), span = index->end() - origin;
  const Api api(*index, results);
  uint64_t x = 12345;
  auto next = [&x] { return x = x * 6364136223846793005ull + 1442695040888963407ull, x >> 20; };
  for (int q = 0; q < 60; ++q) {
    const uint64_t width = q == 0 ? span : std::max<uint64_t>(1, span >> (next() % 14));
    const uint64_t t0 = q == 0 ? 0 : next() % (span - std::min(span - 1, width)), t1 = t0 + width;
    const uint64_t steps = 1 + next() % 20;
    std::map<std::pair<uint32_t, uint32_t>, std::array<uint64_t, 4>> cells;  // msgs, bytes, sw, rw
    std::map<std::pair<uint32_t, uint32_t>, std::vector<uint64_t>> step_messages, step_bytes;
    size_t in_range = 0;
    for (const Message& m : all) {
      if (m.send < origin + t0 || m.send >= origin + t1)
        continue;
      ++in_range;
      auto& c = cells[{m.from, m.to}];
      c[0] += 1;
      c[1] += m.bytes;
      c[2] += m.sender_wait_ns;
      c[3] += m.receiver_wait_ns;
      auto& sm = step_messages[{m.from, m.to}];
      auto& sb = step_bytes[{m.from, m.to}];
      sm.resize(steps);
      sb.resize(steps);
      // The step whose [edge_i, edge_i+1) holds the send (edges as docs/http-api.md cuts them).
      uint64_t i = 0;
      while (i + 1 < steps &&
             t0 + static_cast<uint64_t>(static_cast<unsigned __int128>(width) * (i + 1) / steps) <=
                 m.send - origin)
        ++i;
      ++sm[i];
      sb[i] += m.bytes;
    }
    const std::string range = "t0=" + std::to_string(t0) + "&t1=" + std::to_string(t1);
    json matrix = json::parse(api.Handle("/api/matrix?" + range).body);
    ASSERT_EQ(matrix["cells"].size(), cells.size()) << range << ": " << in_range << " messages";
    size_t k = 0;
    for (const auto& [link, c] : cells) {
      const json& cell = matrix["cells"][k++];
      EXPECT_EQ(cell, json::array({link.first, link.second, c[0], c[1], c[2] + c[3], c[2], c[3]}))
          << range;
    }
    json graph =
        json::parse(api.Handle("/api/graph?" + range + "&steps=" + std::to_string(steps)).body);
    ASSERT_EQ(graph["links"].size(), step_messages.size()) << range;
    k = 0;
    for (const auto& [link, sm] : step_messages) {
      const json& l = graph["links"][k++];
      EXPECT_EQ(l["from"], link.first);
      EXPECT_EQ(l["to"], link.second);
      EXPECT_EQ(l["messages"], json(sm)) << range << " steps " << steps;
      EXPECT_EQ(l["bytes"], json(step_bytes[link])) << range << " steps " << steps;
    }
  }
}

// F as 32-bit offsets from a base per block (trace_index.h): a series far longer than 2^32 ns
// in one state, with gaps and a piece of 9 s, against the sum of its pieces computed here; the
// same after cutting it back mid-way and adding the rest again (a growing series).
TEST(StateSeriesTest, OffsetsPastFourSecondsStayExact) {
  struct Piece {
    uint64_t begin, end;
    int state;
  };
  std::vector<Piece> pieces;
  uint64_t t = 1'000'000'000'000;
  for (int i = 0; i < 40; ++i, t += 750'000'000)  // 700 ms pieces, 50 ms gaps
    pieces.push_back({t, t + 700'000'000, i % 3 == 2 ? 2 : 0});
  pieces.push_back({t, t + 9'000'000'000, 0});
  const uint64_t first = pieces.front().begin, last = pieces.back().end;
  auto oracle = [&](uint64_t at) {
    StateNs f{};
    for (const Piece& p : pieces)
      if (at > p.begin)
        f[p.state] += std::min(at, p.end) - p.begin;
    return f;
  };
  StateNs one_hot[kStates] = {};
  for (int s = 0; s < kStates; ++s)
    one_hot[s][s] = 1;
  StateSeries x;
  for (const Piece& p : pieces)
    x.AddPiece(p.begin, p.end, one_hot[p.state], 1);
  ASSERT_GT(oracle(last)[0], uint64_t{3} << 32);  // past several blocks' reach
  size_t hint = 0;
  for (uint64_t at = first - 5; at <= last + 5; at += 13'000'017) {
    ASSERT_EQ(x.Cumulative(at), oracle(at)) << at - first;
    ASSERT_EQ(x.Cumulative(at, &hint), oracle(at)) << at - first;
  }
  const uint64_t cut = first + 20'123'456'789;
  const uint64_t from = x.TruncateTo(cut);
  ASSERT_LE(from, cut);
  for (const Piece& p : pieces)
    if (p.end > from)
      x.AddPiece(std::max(p.begin, from), p.end, one_hot[p.state], 1);
  for (uint64_t at = first; at <= last + 5; at += 7'000'003)
    ASSERT_EQ(x.Cumulative(at), oracle(at)) << "after the cut, at " << at - first;
  EXPECT_EQ(x.Sum(first, last), oracle(last));
}

}  // namespace
}  // namespace parmon::web
