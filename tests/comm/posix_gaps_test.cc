// End-to-end tests of the POSIX calls added for issue 17 (item 3): sendmmsg/recvmmsg,
// sendfile/splice, stdio writes (glibc's internal write path), posix_spawn and spinlocks. Each
// runs tests/comm/programs/posix_gaps under `parmon record`; what the trace and the report say
// must be exactly what the program counted.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "comm/comm_trace.h"
#include "format/kinds.h"
#include "format/reader.h"
#include "support/e2e.h"

namespace parmon::testing {
namespace {

using format::Kind;

// One channel call as recorded: who, which fd, which function, how many bytes.
struct Call {
  uint32_t pid = 0, tid = 0;
  Kind kind{};
  uint64_t fd = 0;
  int64_t bytes = 0;
  std::string func;
};

struct Trace {
  std::vector<Call> calls;
  // (pid, fd) -> (type, local, peer) from ChanInfo
  std::map<std::pair<uint32_t, uint64_t>, std::tuple<uint64_t, uint64_t, uint64_t>> ends;
  std::map<uint32_t, std::vector<uint64_t>> forks;  // pid -> children
  // (tid, object, type) -> SyncWaits
  std::map<std::tuple<uint32_t, uint64_t, uint64_t>, uint64_t> sync_waits;
  std::string error;
};

Trace LoadTrace(const std::string& path) {
  Trace t;
  t.error = VisitEvents(path, true, [&](const format::Definitions& defs, const format::Event& e) {
    uint32_t pid = 0, tid = 0;
    if (auto it = defs.locations.find(e.location); it != defs.locations.end()) {
      pid = it->second.pid;
      tid = it->second.tid;
    }
    switch (e.kind_enum()) {
      case Kind::kChanInfo:
        t.ends[{pid, e.args[0]}] = {e.args[1], e.args[2], e.args[3]};
        break;
      case Kind::kChanRead:
      case Kind::kChanWrite:
        t.calls.push_back({pid, tid, e.kind_enum(), e.args[0], static_cast<int64_t>(e.args[1]),
                           defs.Name(static_cast<uint32_t>(e.args[3]))});
        break;
      case Kind::kFork:
        t.forks[pid].push_back(e.args[0]);
        break;
      case Kind::kSyncWait:
        t.sync_waits[{tid, e.args[0], e.args[1]}] += 1;
        break;
      default:
        break;
    }
  });
  return t;
}

// The key both ends of a channel share (docs/events.md, ChanInfo).
std::pair<uint64_t, uint64_t> KeyOf(const Trace& t, uint32_t pid, uint64_t fd) {
  auto it = t.ends.find({pid, fd});
  if (it == t.ends.end())
    return {0, 0};
  auto [type, local, peer] = it->second;
  if (type == 1 || type == 2)
    return {local, 0};
  return {std::min(local, peer), std::max(local, peer)};
}

// Calls that moved bytes, by (pid, kind, func): (calls, bytes), and the channel each used;
// only those on `only` when it is given.
struct Side {
  uint64_t calls = 0, bytes = 0;
  std::set<std::pair<uint64_t, uint64_t>> channels;
};
std::map<std::tuple<uint32_t, Kind, std::string>, Side> Sides(
    const Trace& t,
    const std::set<std::pair<uint64_t, uint64_t>>* only = nullptr) {
  std::map<std::tuple<uint32_t, Kind, std::string>, Side> out;
  for (const auto& c : t.calls) {
    if (c.bytes <= 0)
      continue;
    if (only && !only->count(KeyOf(t, c.pid, c.fd)))
      continue;
    Side& s = out[{c.pid, c.kind, c.func}];
    s.calls += 1;
    s.bytes += static_cast<uint64_t>(c.bytes);
    s.channels.insert(KeyOf(t, c.pid, c.fd));
  }
  return out;
}

// The program's output: "word N N N" lines, by word.
std::map<std::string, std::vector<uint64_t>> Oracle(const std::string& out) {
  std::map<std::string, std::vector<uint64_t>> m;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string w;
    f >> w;
    std::vector<uint64_t> v;
    std::string x;
    while (f >> x)
      if (!x.empty() && x.find_first_not_of("0123456789") == std::string::npos)
        v.push_back(std::stoull(x));  // numbers only: "wrote mmsg 12 3 4" gives {12, 3, 4}
    m[w] = v;
  }
  return m;
}

RunResult Record(const TempDir& dir, std::vector<std::string> cmd) {
  std::vector<std::string> args = {
      "record", "-q", "-o", dir.File("t.ptrace"), "--", BinDir() + "/posix_gaps"};
  args.insert(args.end(), cmd.begin(), cmd.end());
  return Parmon(args, 120);
}

// The report's channel links between two threads: (messages, bytes).
std::pair<uint64_t, uint64_t> ReportLink(const nlohmann::json& j, uint32_t from, uint32_t to) {
  std::map<int64_t, uint32_t> tid_of;
  for (const auto& l : j["locations"])
    tid_of[l["id"].get<int64_t>()] = l["tid"].get<uint32_t>();
  std::pair<uint64_t, uint64_t> sum{0, 0};
  for (const auto& k : j["links"]) {
    if (k["kind"] != "channel" || tid_of[k["from"].get<int64_t>()] != from ||
        tid_of[k["to"].get<int64_t>()] != to)
      continue;
    sum.first += k["messages"].get<uint64_t>();
    sum.second += k["bytes"].get<uint64_t>();
  }
  return sum;
}

nlohmann::json Report(const TempDir& dir) {
  auto rep = Parmon({"report", "--format", "json", dir.File("t.ptrace")});
  EXPECT_EQ(rep.exit_code, 0) << rep.err;
  return nlohmann::json::parse(rep.out, nullptr, false);
}

TEST(CommPosixGaps, SendmmsgAndRecvmmsgCountEveryMessage) {
  TempDir dir;
  constexpr int kMessages = 1001;  // not a multiple of the batch
  auto r = Record(dir, {"mmsg", std::to_string(kMessages)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto o = Oracle(r.out);
  ASSERT_EQ(o["wrote"].size(), 3u) << r.out;  // PID MESSAGES BYTES
  ASSERT_EQ(o["read"].size(), 3u) << r.out;
  Trace t = LoadTrace(dir.File("t.ptrace"));
  ASSERT_TRUE(t.error.empty()) << t.error;
  auto sides = Sides(t);
  const uint32_t writer = static_cast<uint32_t>(o["wrote"][0]);
  const uint32_t reader = static_cast<uint32_t>(o["read"][0]);
  const Side& w = sides[{writer, Kind::kChanWrite, "sendmmsg"}];
  const Side& rd = sides[{reader, Kind::kChanRead, "recvmmsg"}];
  EXPECT_EQ(w.calls, static_cast<uint64_t>(kMessages));
  EXPECT_EQ(w.calls, o["wrote"][1]);
  EXPECT_EQ(w.bytes, o["wrote"][2]);
  EXPECT_EQ(rd.calls, o["read"][1]);
  EXPECT_EQ(rd.bytes, o["read"][2]);
  ASSERT_EQ(w.channels.size(), 1u);
  EXPECT_EQ(w.channels, rd.channels) << "both ends of one socketpair";
  // The report: one link from the writer to the reader with every message and byte.
  auto j = Report(dir);
  ASSERT_TRUE(j.is_object());
  auto link = ReportLink(j, writer, reader);
  EXPECT_EQ(link.first, o["wrote"][1]);
  EXPECT_EQ(link.second, o["wrote"][2]);
}

TEST(CommPosixGaps, SendfileAndSpliceCreditTheSocketAndThePipe) {
  TempDir dir;
  constexpr long kBytes = 3 << 20;
  auto r = Record(dir, {"splice", std::to_string(kBytes)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto o = Oracle(r.out);
  ASSERT_EQ(o["sendfile"].size(), 3u) << r.out;
  ASSERT_EQ(o["splice"].size(), 3u) << r.out;
  ASSERT_EQ(o["read"].size(), 3u) << r.out;
  for (const char* w : {"sendfile", "splice", "read"})
    EXPECT_EQ(o[w][2], static_cast<uint64_t>(kBytes)) << w;
  const uint32_t sender = static_cast<uint32_t>(o["sendfile"][0]);
  const uint32_t splicer = static_cast<uint32_t>(o["splice"][0]);
  const uint32_t reader = static_cast<uint32_t>(o["read"][0]);
  Trace t = LoadTrace(dir.File("t.ptrace"));
  ASSERT_TRUE(t.error.empty()) << t.error;
  auto sides = Sides(t);
  // sendfile: the socket's side only (the file is no channel).
  const Side& sent = sides[{sender, Kind::kChanWrite, "sendfile"}];
  EXPECT_EQ(sent.calls, o["sendfile"][1]);
  EXPECT_EQ(sent.bytes, o["sendfile"][2]);
  EXPECT_EQ((sides[{sender, Kind::kChanRead, "sendfile"}].calls), 0u) << "a file read recorded";
  // splice: a read on the socket and a write on the pipe per call.
  const Side& in = sides[{splicer, Kind::kChanRead, "splice"}];
  const Side& out = sides[{splicer, Kind::kChanWrite, "splice"}];
  EXPECT_EQ(in.calls, o["splice"][1]);
  EXPECT_EQ(in.bytes, o["splice"][2]);
  EXPECT_EQ(out.calls, o["splice"][1]);
  EXPECT_EQ(out.bytes, o["splice"][2]);
  EXPECT_EQ(in.channels, sent.channels) << "splice read the socket sendfile wrote";
  const Side& got = sides[{reader, Kind::kChanRead, "read"}];
  EXPECT_EQ(got.calls, o["read"][1]);
  EXPECT_EQ(got.bytes, o["read"][2]);
  EXPECT_EQ(got.channels, out.channels) << "the reader read the pipe splice wrote";
  EXPECT_NE(in.channels, out.channels);
  // The report: sender -> splicer over the socket, splicer -> reader over the pipe.
  auto j = Report(dir);
  ASSERT_TRUE(j.is_object());
  auto a = ReportLink(j, sender, splicer);
  auto b = ReportLink(j, splicer, reader);
  EXPECT_EQ(a.first, o["sendfile"][1]);
  EXPECT_EQ(a.second, static_cast<uint64_t>(kBytes));
  EXPECT_EQ(b.first, o["splice"][1]);
  EXPECT_EQ(b.second, static_cast<uint64_t>(kBytes));
}

TEST(CommPosixGaps, StdioWritesAreCountedOnceAsTheKernelGotThem) {
  TempDir dir;
  constexpr int kMessages = 600;
  auto r = Record(dir, {"stdio", std::to_string(kMessages)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto o = Oracle(r.out);
  ASSERT_EQ(o["stdio"].size(), 3u) << r.out;
  ASSERT_EQ(o["direct"].size(), 3u) << r.out;
  ASSERT_EQ(o["read"].size(), 3u) << r.out;
  const uint32_t writer = static_cast<uint32_t>(o["stdio"][0]);
  const uint32_t reader = static_cast<uint32_t>(o["read"][0]);
  EXPECT_EQ(o["stdio"][1], static_cast<uint64_t>(kMessages + 1));  // + the flush at exit
  // What the reader got is what stdio and the one write(2) wrote.
  EXPECT_EQ(o["read"][2], o["stdio"][2] + o["direct"][2]);
  Trace t = LoadTrace(dir.File("t.ptrace"));
  ASSERT_TRUE(t.error.empty()) << t.error;
  // The pipe is the channel the reader read; the writer also printed its counts to the test
  // through stdio (dprintf), on another pipe.
  const Side got = Sides(t)[{reader, Kind::kChanRead, "read"}];
  ASSERT_EQ(got.channels.size(), 1u);
  auto sides = Sides(t, &got.channels);
  const Side& s = sides[{writer, Kind::kChanWrite, "stdio_write"}];
  const Side& d = sides[{writer, Kind::kChanWrite, "write"}];
  // One write per flush, the exit's included, each with exactly the bytes the kernel got.
  EXPECT_EQ(s.calls, o["stdio"][1]);
  EXPECT_EQ(s.bytes, o["stdio"][2]);
  EXPECT_EQ(d.calls, o["direct"][1]);
  EXPECT_EQ(d.bytes, o["direct"][2]);
  EXPECT_EQ(got.bytes, o["read"][2]);
  EXPECT_EQ(got.calls, o["read"][1]);
  EXPECT_EQ(s.channels, got.channels) << "stdout and the second FILE are the pipe";
  EXPECT_EQ(s.channels, d.channels);
  // The report's link: every byte once.
  auto j = Report(dir);
  ASSERT_TRUE(j.is_object());
  auto link = ReportLink(j, writer, reader);
  EXPECT_EQ(link.first, o["stdio"][1] + o["direct"][1]);
  EXPECT_EQ(link.second, o["read"][2]);
}

TEST(CommPosixGaps, PosixSpawnedChildIsFollowedAndNamed) {
  TempDir dir;
  constexpr int kWrites = 50, kSize = 1000;
  auto r = Record(dir, {"spawn", std::to_string(kWrites), std::to_string(kSize)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto o = Oracle(r.out);
  ASSERT_EQ(o["spawned"].size(), 1u) << r.out;
  ASSERT_EQ(o["spawnedp"].size(), 1u) << r.out;
  ASSERT_EQ(o["parent"].size(), 1u) << r.out;
  const uint32_t child = static_cast<uint32_t>(o["spawned"][0]);
  const uint32_t child_p = static_cast<uint32_t>(o["spawnedp"][0]);
  const uint32_t parent = static_cast<uint32_t>(o["parent"][0]);
  EXPECT_EQ(o["read"][2], static_cast<uint64_t>(kWrites * kSize));
  Trace t = LoadTrace(dir.File("t.ptrace"));
  ASSERT_TRUE(t.error.empty()) << t.error;
  // Fork(child) in the parent, as fork records it.
  EXPECT_EQ(t.forks[parent], (std::vector<uint64_t>{child, child_p}));
  // The child ran with libparmon_posix: its writes are recorded, on the pipe the parent read.
  auto sides = Sides(t);
  const Side& w = sides[{child, Kind::kChanWrite, "write"}];
  const Side& got = sides[{parent, Kind::kChanRead, "read"}];
  EXPECT_EQ(w.calls, static_cast<uint64_t>(kWrites));
  EXPECT_EQ(w.bytes, static_cast<uint64_t>(kWrites * kSize));
  EXPECT_EQ(got.bytes, o["read"][2]);
  EXPECT_EQ(got.calls, o["read"][1]);
  EXPECT_EQ(w.channels, got.channels);
  // Named by what they run.
  auto info = Parmon({"info", "--json", dir.File("t.ptrace")});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  auto j = nlohmann::json::parse(info.out, nullptr, false);
  ASSERT_TRUE(j.is_object());
  std::map<uint32_t, std::string> names;
  for (const auto& l : j["locations"])
    if (l.value("type", "") == "thread")
      names[l["tid"].get<uint32_t>()] = l.value("name", "");
  EXPECT_EQ(names[child], "spawn_child");
  EXPECT_EQ(names[child_p], "true");
  EXPECT_EQ(names[parent], "posix_gaps");
  // The report's link from the spawned child to its parent.
  auto rep = Report(dir);
  ASSERT_TRUE(rep.is_object());
  auto link = ReportLink(rep, child, parent);
  EXPECT_EQ(link.first, static_cast<uint64_t>(kWrites));
  EXPECT_EQ(link.second, static_cast<uint64_t>(kWrites * kSize));
}

TEST(CommPthread, SpinlockWaitsAreLockWait) {
  TempDir dir;
  constexpr int kRounds = 5;
  auto r = Record(dir, {"spin", std::to_string(kRounds)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto o = Oracle(r.out);
  ASSERT_EQ(o["spinner"].size(), 5u) << r.out;
  ASSERT_EQ(o["free"].size(), 1u) << r.out;
  const uint32_t spinner = static_cast<uint32_t>(o["spinner"][0]);
  const uint64_t lock = o["spinner"][1], free_lock = o["free"][0];
  const uint64_t measured = o["spinner"][3], min_spin = o["spinner"][4];
  Trace t = LoadTrace(dir.File("t.ptrace"));
  ASSERT_TRUE(t.error.empty()) << t.error;
  // One SyncWait (type 9, spinlock) per contended round, none for the free lock.
  EXPECT_EQ((t.sync_waits[{spinner, lock, 9}]), static_cast<uint64_t>(kRounds));
  uint64_t others = 0;
  for (const auto& [key, n] : t.sync_waits)
    if (std::get<2>(key) == 9 && (std::get<0>(key) != spinner || std::get<1>(key) != lock))
      others += n;
  EXPECT_EQ(others, 0u) << "an uncontended spinlock or another thread recorded a wait";
  (void)free_lock;
  // The report books the spinning as the spinner's lock wait: at least the CPU it spent
  // spinning (the main thread waited for that; 10% for the sampler's booking of running time),
  // at most what the spinner measured around its pthread_spin_lock calls (1% for the two
  // clocks). Neither bound depends on the machine's load.
  auto j = Report(dir);
  ASSERT_TRUE(j.is_object());
  uint64_t lock_wait = 0;
  bool found = false;
  for (const auto& l : j["locations"])
    if (l.value("tid", 0u) == spinner) {
      lock_wait = l["states_ns"]["lock_wait"].get<uint64_t>();
      found = true;
    }
  ASSERT_TRUE(found);
  EXPECT_GE(lock_wait, min_spin - min_spin / 10);
  EXPECT_LE(lock_wait, measured + measured / 100);
}

}  // namespace
}  // namespace parmon::testing
