// End-to-end tests of libparmon_posix and libparmon_pthread: a five-process pipeline over a
// pipe, a unix socket, TCP and a FIFO, and threads handing a token over with condition
// variables, run under `parmon record`. What was recorded per (writer, reader) pair and per
// thread must be exactly what the programs report they did.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "format/kinds.h"
#include "format/reader.h"
#include "model/merge.h"
#include "model/session.h"
#include "support/e2e.h"

namespace parmon::testing {
namespace {

using format::Kind;

struct Ev {
  uint32_t pid = 0, tid = 0;
  format::Event e;
  std::string payload;
};

struct Loaded {
  std::vector<Ev> events;
  std::string error;
};

Loaded Load(const std::string& path) {
  Loaded l;
  auto reader = format::TraceReader::Open(path);
  if (!reader.ok()) {
    l.error = reader.status().message();
    return l;
  }
  const auto& defs = (*reader)->definitions();
  auto session = model::Session::Over(**reader);
  if (!session.ok()) {
    l.error = session.status().message();
    return l;
  }
  model::Merge cursor(**session);
  format::Event e;
  while (cursor.Next(&e)) {
    uint16_t k = e.kind;
    if (k < 96 && k != static_cast<uint16_t>(Kind::kFork) &&
        k != static_cast<uint16_t>(Kind::kProcessExit))
      continue;
    if (k > 103)
      continue;
    Ev ev;
    auto it = defs.locations.find(e.location);
    if (it != defs.locations.end()) {
      ev.pid = it->second.pid;
      ev.tid = it->second.tid;
    }
    ev.e = e;
    ev.payload.assign(reinterpret_cast<const char*>(e.payload.data()), e.payload.size());
    l.events.push_back(std::move(ev));
  }
  return l;
}

// A channel end as ChanInfo describes it.
struct End {
  uint32_t pid;
  uint64_t fd;
  uint64_t type, local, peer;
};

// The key both ends of one channel share (docs/events.md, ChanInfo).
std::pair<uint64_t, uint64_t> ChannelKey(const End& e) {
  if (e.type == 1 || e.type == 2)
    return {e.local, 0};
  return {std::min(e.local, e.peer), std::max(e.local, e.peer)};
}

const char* TypeName(uint64_t type) {
  switch (type) {
    case 1:
      return "pipe";
    case 2:
      return "fifo";
    case 3:
      return "unix";
    case 5:
      return "tcp";
    default:
      return "other";
  }
}

TEST(CommPosix, PipelineOverPipeUnixSocketTcpAndFifo) {
  TempDir dir;
  constexpr int kMessages = 300;
  RunResult run = Parmon({"record", "-q", "-o", dir.File("run.ptrace"), "--",
                          BinDir() + "/chan_pipeline", std::to_string(kMessages)},
                         60);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  Loaded l = Load(dir.File("run.ptrace"));
  ASSERT_TRUE(l.error.empty()) << l.error;

  // What the program says: (channel, verb) -> (pid, calls, bytes); polls, sleeps, forks per pid.
  std::map<std::pair<std::string, std::string>, std::tuple<uint32_t, uint64_t, uint64_t>> want;
  std::map<std::string, std::pair<uint32_t, uint64_t>> counts;
  std::istringstream in(run.out);
  std::string verb;
  while (in >> verb) {
    if (verb == "wrote" || verb == "read") {
      std::string chan;
      uint32_t pid;
      uint64_t calls, bytes;
      in >> chan >> pid >> calls >> bytes;
      want[{chan, verb}] = {pid, calls, bytes};
    } else {
      uint32_t pid;
      uint64_t n;
      in >> pid >> n;
      counts[verb] = {pid, n};
    }
  }
  ASSERT_EQ(want.size(), 8u) << run.out;

  // Channel ends, then reads and writes per end.
  std::map<std::pair<uint32_t, uint64_t>, End> ends;  // (pid, fd) -> end
  for (const auto& ev : l.events)
    if (ev.e.kind_enum() == Kind::kChanInfo)
      ends[{ev.pid, ev.e.args[0]}] = {ev.pid, ev.e.args[0], ev.e.args[1], ev.e.args[2],
                                      ev.e.args[3]};
  struct Side {
    std::set<uint32_t> pids;
    uint64_t calls = 0, bytes = 0;
  };
  // (channel key) -> name, writers, readers
  std::map<std::pair<uint64_t, uint64_t>, std::tuple<std::string, Side, Side>> channels;
  std::map<uint32_t, uint64_t> polls, sleeps, forks;
  for (const auto& ev : l.events) {
    Kind k = ev.e.kind_enum();
    if (k == Kind::kChanWait)
      polls[ev.pid] += 1;
    if (k == Kind::kTimerWait)
      sleeps[ev.pid] += 1;
    if (k == Kind::kFork)
      forks[ev.pid] += 1;
    if (k != Kind::kChanRead && k != Kind::kChanWrite)
      continue;
    // The program's own report, printed to the test's pipe on stdout (stdio writes are
    // recorded): not one of the pipeline's channels, which are all on fds above 2.
    if (ev.e.args[0] <= 2)
      continue;
    auto end = ends.find({ev.pid, ev.e.args[0]});
    ASSERT_NE(end, ends.end()) << "a read or write on fd " << ev.e.args[0] << " of process "
                               << ev.pid << " without its ChanInfo";
    int64_t bytes = static_cast<int64_t>(ev.e.args[1]);
    EXPECT_GE(ev.e.ts, ev.e.args[2]) << "a call that ended before it began";
    if (bytes <= 0)
      continue;  // end of file, errors
    auto& [name, writers, readers] = channels[ChannelKey(end->second)];
    name = TypeName(end->second.type);
    Side& side = k == Kind::kChanWrite ? writers : readers;
    side.pids.insert(ev.pid);
    side.calls += 1;
    side.bytes += static_cast<uint64_t>(bytes);
  }
  std::set<std::string> seen;
  for (const auto& [key, c] : channels) {
    const auto& [name, writers, readers] = c;
    if (!want.count({name, "wrote"}))
      continue;  // the test harness's own stdout, ...
    seen.insert(name);
    auto [wpid, wcalls, wbytes] = want[{name, "wrote"}];
    auto [rpid, rcalls, rbytes] = want[{name, "read"}];
    EXPECT_EQ(writers.pids, std::set<uint32_t>{wpid}) << name;
    EXPECT_EQ(readers.pids, std::set<uint32_t>{rpid}) << name;
    EXPECT_EQ(writers.calls, wcalls) << name;
    EXPECT_EQ(writers.bytes, wbytes) << name;
    EXPECT_EQ(readers.calls, rcalls) << name;
    EXPECT_EQ(readers.bytes, rbytes) << name;
    // Every byte written was read: each write is matched by the reads covering its bytes.
    EXPECT_EQ(writers.bytes, readers.bytes) << name;
  }
  EXPECT_EQ(seen, (std::set<std::string>{"pipe", "unix", "tcp", "fifo"}));
  EXPECT_EQ(polls[counts["polls"].first], counts["polls"].second);
  EXPECT_EQ(sleeps[counts["sleeps"].first], counts["sleeps"].second);
  EXPECT_EQ(forks[counts["forks"].first], counts["forks"].second);
}

// A channel call waits for its partner only while it is blocked off a CPU (the switch records
// say when): 50,000 writes of 64 KiB to /dev/null never block, so that link's time is all copy
// and none of it waiting, while a cat blocked 300 ms reading an empty pipe waits that long for
// its writer. That writer is a subshell of dash (/bin/sh), whose builtin echo was lost when dash
// ran `sleep` from a vfork child (the preload serves vfork by fork).
TEST(CommPosix, OnlyTimeBlockedInAChannelCallWaitsForThePartner) {
  TempDir dir;
  RunResult run = Parmon({"record", "-q", "-o", dir.File("run.ptrace"), "--", "sh", "-c",
                          "dd if=/dev/zero of=/dev/null bs=64k count=50000 status=none; "
                          "(sleep 0.3; echo x) | cat >/dev/null"},
                         120);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  RunResult rep = Parmon({"report", "--format", "json", dir.File("run.ptrace")});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const nlohmann::json j = nlohmann::json::parse(rep.out);
  const nlohmann::json* dd = nullptr;
  const nlohmann::json* pipe = nullptr;
  for (const auto& k : j["links"]) {
    if (k["kind"] != "channel")
      continue;
    const std::string from = k["from_label"], to = k["to_label"];
    if (from.find("dd") != std::string::npos && to == "/dev/null")
      dd = &k;
    if (from.find("sh") != std::string::npos && to.find("cat") != std::string::npos &&
        k["bytes"] == 2)
      pipe = &k;
  }
  ASSERT_NE(dd, nullptr) << j["links"].dump();
  EXPECT_EQ((*dd)["messages"], 50000);
  EXPECT_EQ((*dd)["bytes"], 50000ull * 65536);
  EXPECT_GT((*dd)["time_ns"].get<uint64_t>(), 0u);
  EXPECT_LE((*dd)["wait_ns"].get<uint64_t>(), (*dd)["time_ns"].get<uint64_t>() / 100) << dd->dump();
  ASSERT_NE(pipe, nullptr) << j["links"].dump();
  EXPECT_GE((*pipe)["receiver_wait_ns"].get<uint64_t>(), 250'000'000u) << pipe->dump();
}

TEST(CommPthread, HandOffsBarriersJoinsAndAContendedMutex) {
  TempDir dir;
  constexpr int kRounds = 2000;
  RunResult run = Parmon({"record", "-q", "-o", dir.File("run.ptrace"), "--",
                          BinDir() + "/sync_handoff", std::to_string(kRounds)},
                         60);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  Loaded l = Load(dir.File("run.ptrace"));
  ASSERT_TRUE(l.error.empty()) << l.error;

  struct Cond {
    uint32_t signaller, waiter;
    uint64_t signals, waits;
  };
  std::vector<Cond> conds;
  std::map<uint32_t, uint64_t> barrier_want;
  uint64_t contended_object = 0, cond_objects[2] = {0, 0};
  uint32_t contender = 0, main_tid = 0;
  uint64_t joins_want = 0;
  std::istringstream in(run.out);
  std::string word;
  while (in >> word) {
    if (word == "cond") {
      std::string name;
      Cond c;
      in >> name >> c.signaller >> c.waiter >> c.signals >> c.waits;
      conds.push_back(c);
    } else if (word == "barrier") {
      uint32_t tid;
      uint64_t n;
      in >> tid >> n;
      barrier_want[tid] = n;
    } else if (word == "contended") {
      in >> contended_object >> contender;
    } else if (word == "conds") {
      in >> cond_objects[0] >> cond_objects[1];
    } else if (word == "joins") {
      in >> main_tid >> joins_want;
    }
  }
  ASSERT_EQ(conds.size(), 2u) << run.out;
  EXPECT_EQ(conds[0].signals, static_cast<uint64_t>(kRounds));

  // (object, type, tid) -> count
  std::map<std::tuple<uint64_t, uint64_t, uint32_t>, uint64_t> waits, signals;
  std::map<std::pair<uint64_t, uint32_t>, uint64_t> waits_by_type;  // (type, tid)
  for (const auto& ev : l.events) {
    if (ev.e.kind_enum() == Kind::kSyncWait) {
      waits[{ev.e.args[0], ev.e.args[1], ev.tid}] += 1;
      waits_by_type[{ev.e.args[1], ev.tid}] += 1;
      EXPECT_GE(ev.e.ts, ev.e.args[2]);
      // 0, or PTHREAD_BARRIER_SERIAL_THREAD (-1) for one thread per barrier round.
      int64_t result = static_cast<int64_t>(ev.e.args[3]);
      EXPECT_TRUE(result == 0 || (ev.e.args[1] == 5 && result == -1)) << "a wait that failed";
    } else if (ev.e.kind_enum() == Kind::kSyncSignal) {
      signals[{ev.e.args[0], ev.e.args[1], ev.tid}] += 1;
    }
  }
  for (int i = 0; i < 2; ++i) {
    const Cond& c = conds[i];
    uint64_t object = cond_objects[i];
    EXPECT_EQ((signals[{object, 4, c.signaller}]), c.signals) << "cond " << i;
    EXPECT_EQ((waits[{object, 4, c.waiter}]), c.waits) << "cond " << i;
    // Nobody else used it.
    uint64_t others = 0;
    for (const auto& [key, n] : signals)
      if (std::get<0>(key) == object && std::get<2>(key) != c.signaller)
        others += n;
    for (const auto& [key, n] : waits)
      if (std::get<0>(key) == object && std::get<2>(key) != c.waiter)
        others += n;
    EXPECT_EQ(others, 0u) << "cond " << i;
  }
  for (const auto& [tid, n] : barrier_want)
    EXPECT_EQ((waits_by_type[{5, tid}]), n) << tid;
  EXPECT_EQ((waits[{contended_object, 1, contender}]), 1u);
  EXPECT_EQ((waits_by_type[{6, main_tid}]), joins_want);
}

TEST(CommPosix, WrappersKeepErrnoAndReturnValues) {
  // The program checks itself while recorded: errno survives successful wrapped calls, failing
  // ones report their own errno, a blocking semaphore wait and a relocked error-checking mutex
  // behave as without parmon. Its events prove the wrappers were really in the way.
  TempDir dir;
  RunResult run =
      Parmon({"record", "-q", "-o", dir.File("run.ptrace"), "--", BinDir() + "/posix_errno"}, 60);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.out, "ok\n");
  Loaded l = Load(dir.File("run.ptrace"));
  ASSERT_TRUE(l.error.empty()) << l.error;
  std::map<Kind, int> kinds;
  for (const auto& ev : l.events)
    kinds[ev.e.kind_enum()] += 1;
  EXPECT_GE(kinds[Kind::kChanWrite], 1);
  EXPECT_GE(kinds[Kind::kChanRead], 1);
  EXPECT_GE(kinds[Kind::kChanWait], 1);
  EXPECT_GE(kinds[Kind::kTimerWait], 1);
  EXPECT_GE(kinds[Kind::kSyncWait], 2);  // the semaphore and the join
}

}  // namespace
}  // namespace parmon::testing
