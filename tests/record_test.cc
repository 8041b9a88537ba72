// End-to-end tests of `parmon record`, `parmon info` and `parmon dump` on programs whose events
// are known by construction: exact counts, nothing lost, crash safety of program and recorder,
// exact loss accounting under overload, fork/exec, exit codes and signals.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <thread>

#include "format/reader.h"
#include "model/merge.h"
#include "model/session.h"
#include "support/e2e.h"

namespace parmon {
namespace {

using format::Kind;
using testing::BinDir;
using testing::Parmon;
using testing::ReadFile;
using testing::Run;
using testing::TempDir;
using testing::Unwrapped;

std::string Prog(const std::string& name) {
  return BinDir() + "/" + name;
}

nlohmann::json InfoJson(const std::string& trace) {
  auto r = Parmon({"info", "--json", trace});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

std::map<std::string, long> ParseSide(const std::string& path) {
  std::map<std::string, long> kv;
  std::istringstream in(ReadFile(path));
  std::string item;
  while (in >> item) {
    auto eq = item.find('=');
    if (eq != std::string::npos)
      kv[item.substr(0, eq)] = std::stol(item.substr(eq + 1));
  }
  return kv;
}

// Per location: events by kind, and lost counts from Lost/RingLost events.
struct Census {
  std::map<uint32_t, std::map<uint16_t, uint64_t>> kinds;
  std::map<uint32_t, uint64_t> lost;
  std::map<uint32_t, uint64_t> total;
};

// The events of a trace, through the one merge every consumer uses.
std::unique_ptr<model::Session> SessionOver(const format::TraceReader& r) {
  auto session = model::Session::Over(r);
  EXPECT_TRUE(session.ok()) << session.status().message();
  return session.ok() ? std::move(*session) : nullptr;
}

Census TakeCensus(const format::TraceReader& r) {
  Census c;
  auto session = SessionOver(r);
  if (!session)
    return c;
  model::Merge cursor(*session);
  format::Event e;
  while (cursor.Next(&e)) {
    c.kinds[e.location][e.kind]++;
    c.total[e.location]++;
    // Losses of the program's own events (not of the sampler's or the switch recorder's).
    if ((e.kind_enum() == Kind::kLost || e.kind_enum() == Kind::kRingLost) &&
        (e.source == format::Source::kRuntime || e.source == format::Source::kRecorder))
      c.lost[e.location] += e.args[0];
  }
  return c;
}

TEST(Record, ExactCountsPerThreadAndNothingLost) {
  TempDir dir;
  std::string trace = dir.File("t.ptrace"), side = dir.File("side");
  auto r =
      Parmon({"record", "-q", "-o", trace, "--", Prog("threads_regions"), "4", "250000", side});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto expect = ParseSide(side);
  ASSERT_EQ(expect["threads"], 4);
  nlohmann::json info = InfoJson(trace);
  EXPECT_EQ(info["lost_events"], 0);
  EXPECT_EQ(info["closed_cleanly"], true);
  EXPECT_EQ(info["processes"], 1);
  int workers = 0;
  for (const auto& loc : info["locations"]) {
    std::string name = loc["name"];
    if (name.rfind("worker-", 0) != 0)
      continue;
    ++workers;
    EXPECT_EQ(loc["events_by_source"]["runtime"].get<long>(), expect["events_per_thread"]) << name;
    EXPECT_EQ(loc["lost"], 0) << name;
  }
  EXPECT_EQ(workers, 4);
  // Two million region events compress far below the 4-byte target.
  EXPECT_LT(info["bytes_per_event"].get<double>(), 4.0);
}

TEST(Record, ProgramLinkedWithLibparmonRunsNormallyWithoutParmon) {
  TempDir dir;
  std::string side = dir.File("side");
  auto r = testing::Run({Prog("threads_regions"), "3", "1000", side});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseSide(side)["threads"], 3);
  auto k = testing::Run({Prog("all_kinds")});
  EXPECT_EQ(k.exit_code, 0) << k.out << k.err;
  EXPECT_NE(k.out.find("trace_data=1 too_large=2 active=0"), std::string::npos) << k.out;
}

TEST(Record, EveryApiCallIsRecordedWithItsValues) {
  TempDir dir;
  std::string trace = dir.File("t.ptrace");
  auto r = Parmon({"record", "-q", "-o", trace, "--", Prog("all_kinds")});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("trace_data=0 too_large=2 active=1"), std::string::npos) << r.out;
  auto reader = format::TraceReader::Open(trace);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  const auto& defs = (*reader)->definitions();
  auto session = SessionOver(**reader);
  ASSERT_TRUE(session);
  model::Merge cursor(*session);
  format::Event e;
  std::vector<std::string> seen;
  while (cursor.Next(&e)) {
    switch (e.kind_enum()) {
      case Kind::kRegionEnter:
      case Kind::kRegionLeave:
      case Kind::kMarker:
        seen.push_back(std::string((*reader)->schema().name(e.kind)) + ":" +
                       defs.Name(static_cast<uint32_t>(e.args[0])));
        break;
      case Kind::kTraceEvent:
        seen.push_back("TraceEvent:" + std::to_string(e.args[0]));
        break;
      case Kind::kTraceData: {
        ASSERT_EQ(e.payload.size(), 64u);
        double row[8];
        std::memcpy(row, e.payload.data(), 64);
        EXPECT_EQ(row[7], 8.0);
        seen.push_back("TraceData:" + std::to_string(e.args[0]));
        break;
      }
      case Kind::kCounterInt:
        EXPECT_EQ(static_cast<int64_t>(e.args[1]), -12345);
        seen.push_back("CounterInt:" + defs.Name(static_cast<uint32_t>(e.args[0])));
        break;
      case Kind::kCounterDouble: {
        double v;
        std::memcpy(&v, &e.args[1], 8);
        EXPECT_EQ(v, 2.5);
        seen.push_back("CounterDouble");
        break;
      }
      case Kind::kPause:
        seen.push_back("Pause");
        break;
      case Kind::kResume:
        seen.push_back("Resume");
        break;
      case Kind::kProcessName:
        seen.push_back("ProcessName:" + std::string(e.payload));
        break;
      default:
        break;
    }
  }
  std::vector<std::string> expected = {"ProcessName:all-kinds",
                                       "RegionEnter:outer",
                                       "TraceEvent:42",
                                       "TraceData:42",
                                       "CounterInt:items",
                                       "CounterDouble",
                                       "Marker:checkpoint",
                                       "RegionLeave:outer",
                                       "Pause",
                                       "Resume",
                                       "TraceEvent:100"};
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(defs.event_names.at(42), "matrix-row");
  bool named = false;
  for (const auto& [id, loc] : defs.locations)
    named |= loc.name == "main";
  EXPECT_TRUE(named);
}

// Finds the first child process of `pid` (the recorder's command).
// Kills a process group at scope exit, so a failed ASSERT leaves no program running.
struct GroupKiller {
  pid_t pgid;
  ~GroupKiller() {
    if (pgid > 0)
      kill(-pgid, SIGKILL);
  }
};

pid_t ChildOf(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t child = 0;
  f >> child;
  return child;
}

TEST(Record, ProgramKilledAtARandomPointLosesNoCommittedEvent) {
  std::mt19937 rng(std::random_device{}());
  for (int trial = 0; trial < 3; ++trial) {
    TempDir dir;
    std::string trace = dir.File("t.ptrace"), side = dir.File("count");
    int out_pipe[2];
    ASSERT_EQ(pipe(out_pipe), 0);
    pid_t rec = fork();
    if (rec == 0) {
      dup2(out_pipe[1], 1);
      close(out_pipe[0]);
      execl(testing::ParmonBin().c_str(), "parmon", "record", "-q", "-o", trace.c_str(), "--",
            Prog("committed_counter").c_str(), side.c_str(), (char*)nullptr);
      _exit(127);
    }
    close(out_pipe[1]);
    char buf[16] = {};
    ASSERT_GT(read(out_pipe[0], buf, sizeof buf), 0);  // "ready"
    close(out_pipe[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 150));
    pid_t prog = ChildOf(rec);
    ASSERT_GT(prog, 0);
    ASSERT_EQ(kill(prog, SIGKILL), 0);
    int status;
    ASSERT_EQ(waitpid(rec, &status, 0), rec);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 128 + SIGKILL);
    uint64_t committed = 0;
    {
      std::ifstream f(side, std::ios::binary);
      f.read(reinterpret_cast<char*>(&committed), 8);
    }
    ASSERT_GT(committed, 100000u);
    auto reader = format::TraceReader::Open(trace);
    ASSERT_TRUE(reader.ok()) << reader.status().message();
    EXPECT_TRUE((*reader)->closed_cleanly());
    Census c = TakeCensus(**reader);
    uint64_t recorded = 0;
    for (auto& [loc, kinds] : c.kinds)
      recorded += kinds[static_cast<uint16_t>(Kind::kRegionEnter)] +
                  kinds[static_cast<uint16_t>(Kind::kRegionLeave)];
    // Every committed event is there; at most the one in flight when the kill came on top.
    EXPECT_GE(recorded, committed) << "trial " << trial;
    EXPECT_LE(recorded, committed + 1) << "trial " << trial;
  }
}

TEST(Record, RecorderKilledLeavesAReadableFileThatSaysWhatIsMissing) {
  TempDir dir;
  std::string trace = dir.File("t.ptrace");
  pid_t rec = fork();
  if (rec == 0) {
    setpgid(0, 0);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    execl(testing::ParmonBin().c_str(), "parmon", "record", "-q", "-o", trace.c_str(), "--",
          Prog("threads_regions").c_str(), "2", "20000000", (char*)nullptr);
    _exit(127);
  }
  // Let it write a few chunks (the recorder flushes every 256 KiB of encoded events per thread).
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::error_code ec;
    auto size = std::filesystem::file_size(trace, ec);  // (uintmax_t)-1 while it does not exist
    if (!ec && size > 200000)
      break;
  }
  ASSERT_EQ(kill(rec, SIGKILL), 0);
  int status;
  waitpid(rec, &status, 0);
  // The program notices its recorder is gone and runs on unrecorded; end it.
  kill(-rec, SIGKILL);
  auto info = Parmon({"info", trace});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(testing::Unwrapped(info.out).find("NOT closed cleanly"), std::string::npos) << info.out;
  EXPECT_NE(testing::Unwrapped(info.out).find("the trace was not closed"), std::string::npos)
      << info.out;
  auto reader = format::TraceReader::Open(trace);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_GT((*reader)->total_events(), 10000u);
  // Every event in a whole chunk reads back, in order.
  Census c = TakeCensus(**reader);
  uint64_t n = 0;
  for (auto& [loc, t] : c.total)
    n += t;
  EXPECT_EQ(n, (*reader)->total_events());
}

// A small file system that fills while the program runs: the program runs on, and the trace
// ends consistent (END, index, trailer in the space kept back) with the exact loss.
TEST(Record, DiskFullEndsTheTraceConsistentWithTheExactLoss) {
  TempDir dir;
  const std::string mnt = dir.File("small");
  std::filesystem::create_directory(mnt);
  if (geteuid() != 0 || mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=4m") != 0)
    GTEST_SKIP() << "cannot mount a 4 MiB tmpfs (needs root and mount permission): "
                 << strerror(errno);
  struct Unmount {
    std::string path;
    ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
  } unmount{mnt};
  const std::string trace = mnt + "/t.ptrace", side = dir.File("count");
  const std::string err_path = dir.File("err");
  int out_pipe[2];
  ASSERT_EQ(pipe(out_pipe), 0);
  pid_t rec = fork();
  if (rec == 0) {
    setpgid(0, 0);
    dup2(out_pipe[1], 1);
    close(out_pipe[0]);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(err, 2);
    // No sampler or switch events to speak of: the losses are the program's events.
    execl(testing::ParmonBin().c_str(), "parmon", "record", "-q", "--no-switches", "-t", "60s",
          "-o", trace.c_str(), "--", Prog("committed_counter").c_str(), side.c_str(),
          (char*)nullptr);
    _exit(127);
  }
  GroupKiller killer{rec};
  close(out_pipe[1]);
  char buf[16] = {};
  ASSERT_GT(read(out_pipe[0], buf, sizeof buf), 0);  // "ready"
  close(out_pipe[0]);
  // Until the recorder says the disk is full, then some more events that cannot be written.
  for (int i = 0; i < 600 && ReadFile(err_path).find("no space") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_NE(ReadFile(err_path).find("no space"), std::string::npos) << ReadFile(err_path);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  pid_t prog = ChildOf(rec);
  ASSERT_GT(prog, 0);
  ASSERT_EQ(kill(prog, SIGKILL), 0);
  int status;
  ASSERT_EQ(waitpid(rec, &status, 0), rec);
  uint64_t committed = 0;
  {
    std::ifstream f(side, std::ios::binary);
    f.read(reinterpret_cast<char*>(&committed), 8);
  }
  const std::string err = ReadFile(err_path);
  auto reader = format::TraceReader::Open(trace);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_TRUE((*reader)->closed_cleanly()) << err;
  EXPECT_TRUE((*reader)->problems().empty()) << (*reader)->problems().front().message;
  Census c = TakeCensus(**reader);
  // The program's thread: the one location with region events.
  uint64_t recorded = 0, program_location = 0;
  for (auto& [loc, kinds] : c.kinds) {
    const uint64_t n = kinds[static_cast<uint16_t>(Kind::kRegionEnter)] +
                       kinds[static_cast<uint16_t>(Kind::kRegionLeave)];
    if (n > recorded) {
      recorded = n;
      program_location = loc;
    }
  }
  nlohmann::json j = InfoJson(trace);
  const uint64_t lost = j.value("lost_events", uint64_t{0});
  uint64_t program_lost = 0;
  for (const auto& l : j["locations"])
    if (l.value("location", uint64_t{0}) == program_location)
      program_lost = l.value("lost", uint64_t{0});
  std::cout << "disk full: committed " << committed << ", written " << recorded
            << ", lost on the program's thread " << program_lost << ", lost in all " << lost
            << "\n";
  EXPECT_GT(program_lost, 0u);
  // The sampler's one record of the thread after its start (-t 60s) is its TaskExit at the end:
  // written when it fitted in the space kept back, else lost on the same location.
  const uint64_t exit_lost = c.kinds[program_location][static_cast<uint16_t>(Kind::kTaskExit)] == 0;
  std::cout << "  of which the thread's TaskExit " << exit_lost << "\n";
  // Every committed event is written or counted lost, once; the one in flight at the kill may
  // be on top.
  EXPECT_GE(recorded + program_lost, committed + exit_lost) << err << j["locations"].dump();
  EXPECT_LE(recorded + program_lost, committed + exit_lost + 1) << err << j["locations"].dump();
  // The recorder says the loss once, with the same figure.
  EXPECT_NE(err.find(std::to_string(lost) + " events were lost"), std::string::npos) << err;
  EXPECT_EQ(err.find("could not be written"), std::string::npos) << err;
}

// A recorder killed with SIGKILL: the file covers the run up to its last watermark, info says
// so, and every event the program committed well before the kill (more than the flush period
// plus the watermark slack) is in the file.
TEST(Record, RecorderKilledFileSaysWhatItCoversAndHoldsEverythingBefore) {
  TempDir dir;
  const std::string trace = dir.File("t.ptrace"), side = dir.File("count");
  int out_pipe[2];
  ASSERT_EQ(pipe(out_pipe), 0);
  pid_t rec = fork();
  if (rec == 0) {
    setpgid(0, 0);
    dup2(out_pipe[1], 1);
    close(out_pipe[0]);
    execl(testing::ParmonBin().c_str(), "parmon", "record", "-q", "-o", trace.c_str(), "--",
          Prog("committed_counter").c_str(), side.c_str(), (char*)nullptr);
    _exit(127);
  }
  GroupKiller killer{rec};
  close(out_pipe[1]);
  char buf[16] = {};
  ASSERT_GT(read(out_pipe[0], buf, sizeof buf), 0);  // "ready"
  close(out_pipe[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto read_count = [&] {
    uint64_t n = 0;
    std::ifstream f(side, std::ios::binary);
    f.read(reinterpret_cast<char*>(&n), 8);
    return n;
  };
  // Committed 100 ms flush + 50 ms slack + 250 ms of margin (a loaded machine) before the kill.
  const uint64_t committed_before = read_count();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ASSERT_EQ(kill(rec, SIGKILL), 0);
  const uint64_t committed_at_kill = read_count();
  int status;
  waitpid(rec, &status, 0);
  kill(-rec, SIGKILL);
  auto info = Parmon({"info", trace});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(testing::Unwrapped(info.out).find("it covers the run up to"), std::string::npos)
      << info.out;
  EXPECT_NE(testing::Unwrapped(info.out).find("what came after is unknown"), std::string::npos)
      << info.out;
  auto reader = format::TraceReader::Open(trace);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_FALSE((*reader)->closed_cleanly());
  Census c = TakeCensus(**reader);
  uint64_t recorded = 0;
  for (auto& [loc, kinds] : c.kinds)
    recorded += kinds[static_cast<uint16_t>(Kind::kRegionEnter)] +
                kinds[static_cast<uint16_t>(Kind::kRegionLeave)];
  std::cout << "recorder killed: committed " << committed_before << " 400 ms before the kill, "
            << committed_at_kill << " at the kill; in the file " << recorded << "\n";
  EXPECT_GE(recorded, committed_before);
  EXPECT_LE(recorded, committed_at_kill + 1);
  auto report = Parmon({"report", "--partial", trace});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(testing::Unwrapped(report.out).find("it covers the run up to"), std::string::npos)
      << report.out;
  EXPECT_EQ(testing::Unwrapped(report.out).find("0 events in damaged chunks"), std::string::npos)
      << report.out;
}

// --interval has a lower bound through the number of intervals: one sentence, exit 2, at
// once (no allocation of billions of intervals).
TEST(Report, TooShortAnIntervalIsOneSentenceAndExit2) {
  TempDir dir;
  const std::string trace = dir.File("t.ptrace");
  auto r = Parmon({"record", "-q", "-o", trace, "--", "/bin/sleep", "0.3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* interval : {"1ns", "10ns", "100ns", "1us"}) {
    auto t0 = std::chrono::steady_clock::now();
    auto rep = Parmon({"report", "--interval", interval, trace}, 30);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(rep.exit_code, 2) << interval << ": " << rep.err;
    EXPECT_EQ(std::count(rep.err.begin(), rep.err.end(), '\n'), 1) << rep.err;
    EXPECT_EQ(rep.err.rfind("parmon report: --interval ", 0), 0u) << rep.err;
    EXPECT_NE(rep.err.find("at most 100000"), std::string::npos) << rep.err;
    EXPECT_LT(s, 10) << interval;
  }
  auto ok = Parmon({"report", "--interval", "10ms", trace});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  // Many threads: fewer intervals, since each costs memory for every thread.
  const std::string many = dir.File("many.ptrace");
  r = Parmon({"record", "-q", "-o", many, "--", Prog("threads_regions"), "100", "100"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rep = Parmon({"report", "--interval", "1ns", many}, 30);
  EXPECT_EQ(rep.exit_code, 2) << rep.err;
  EXPECT_NE(rep.err.find("threads and CPUs"), std::string::npos) << rep.err;
  EXPECT_EQ(rep.err.find("at most 100000"), std::string::npos) << rep.err;
}

// Usage errors: one line with the subcommand's prefix, exit 2; a misspelled option of record
// is not run as the program.
TEST(CommandLine, UsageErrorsAreOneLineAndExit2) {
  TempDir dir;
  auto r = Parmon({"record", "--outptu", dir.File("x"), "--", "true"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, "parmon record: unknown option --outptu (did you mean --output?)\n");
  EXPECT_FALSE(testing::Exists(dir.File("x")));
  const std::vector<std::vector<std::string>> bad = {
      {"record", "--buffer-sise", "4M", "--", "true"},
      {"dump", "--fromm", "1s", "t.ptrace"},
      {"dump"},
      {"report", "--intervl", "1s", "t.ptrace"},
      {"report", "--format", "xml", "t.ptrace"},
      {"diff", "a.ptrace"},
      {"diff", "--colour", "never", "a.ptrace", "b.ptrace"},
      {"scale", "--count", "1", "--", "true"},
      {"demo", "--rank", "2"},
      {"info", "--jsn", "t.ptrace"},
      {"record", "--buffer-size", "0", "--", "true"},
      {"record", "--buffer-size", "1", "--", "true"},
      {"record", "--buffer-size", "100", "--", "true"},
      {"record", "--max-threads", "0", "--", "true"},
      {"record", "--max-threads", "100000000", "--", "true"},
      {"record", "--zstd-level", "99", "--", "true"},
      {"record", "-p", "-5"},
      {"record", "--flush", "1ms", "--", "true"},
      {"record", "--flush", "1h", "--", "true"},
  };
  for (const auto& args : bad) {
    auto e = Parmon(args);
    EXPECT_EQ(e.exit_code, 2) << args[0] << " " << args[1] << ": " << e.err;
    EXPECT_EQ(e.err.rfind("parmon " + args[0] + ": ", 0), 0u) << e.err;
    EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << e.err;
  }
  auto cmd = Parmon({"recrod", "--", "true"});
  EXPECT_EQ(cmd.exit_code, 2);
  EXPECT_EQ(cmd.err,
            "parmon: 'recrod' is not a parmon command (did you mean record? 'parmon --help' "
            "lists them)\n");
  auto dump = Parmon({"dump", "--fromm", "1s", "t.ptrace"});
  EXPECT_NE(dump.err.find("did you mean --from?"), std::string::npos) << dump.err;
  auto pid0 = Parmon({"record", "-p", "0"});
  EXPECT_EQ(pid0.exit_code, 2);
  EXPECT_EQ(pid0.err, "parmon record: -p 0 is not a valid process id\n");
}

TEST(CommandLine, FailedLaunchLeavesNoTraceAndScaleCreatesItsDirectory) {
  TempDir dir;
  auto r = Parmon({"record", "-q", "-o", dir.File("t.ptrace"), "--", "/nonexistent/program"});
  EXPECT_EQ(r.exit_code, 127) << r.err;
  EXPECT_NE(r.err.find("cannot run /nonexistent/program"), std::string::npos) << r.err;
  EXPECT_FALSE(testing::Exists(dir.File("t.ptrace")));
  const std::string fresh = dir.File("new/deeper");
  auto s = Parmon({"scale", "-n", "1", "--dir", fresh, "--", "true"});
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_TRUE(testing::Exists(fresh + "/scale-n1.ptrace")) << s.err;
}

// Damage to the index loses no event: the report needs no --partial, and the JSON does not say
// the damage is of unknown extent.
TEST(Info, DamagedIndexOrSchemaLosesNothingAndCountsAreExact) {
  TempDir dir;
  const std::string trace = dir.File("t.ptrace");
  auto r = Parmon({"record", "-q", "-o", trace, "--", Prog("threads_regions"), "2", "20000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  uint64_t index_offset = 0;
  {
    auto reader = format::TraceReader::Open(trace);
    ASSERT_TRUE(reader.ok());
    index_offset = std::stoull((*reader)->session().at("index_offset"));
  }
  const uint64_t events = InfoJson(trace).value("events", uint64_t{0});
  ASSERT_GT(events, 80000u);
  // The schema chunk follows the file header; a byte of each chunk's payload is flipped.
  for (uint64_t chunk : {index_offset, uint64_t{sizeof(format::FileHeader)}}) {
    const std::string damaged = dir.File("damaged.ptrace");
    std::filesystem::copy_file(trace, damaged, std::filesystem::copy_options::overwrite_existing);
    {
      const auto at = static_cast<std::streamoff>(chunk + sizeof(format::ChunkHeader) + 2);
      std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(at);
      char c = 0;
      f.read(&c, 1);
      c ^= 0x5a;
      f.seekp(at);
      f.write(&c, 1);
    }
    nlohmann::json j = InfoJson(damaged);
    EXPECT_FALSE(j.value("damaged_events_unknown", true)) << chunk << j.dump();
    EXPECT_EQ(j.value("damaged_events", uint64_t{1}), 0u) << chunk;
    EXPECT_EQ(j.value("events", uint64_t{0}), events) << chunk;
    EXPECT_FALSE(j["problems"].empty()) << chunk;
    auto rep = Parmon({"report", damaged});
    EXPECT_EQ(rep.exit_code, 0) << chunk << ": " << rep.err;
  }
}

// Issue 12 item 6: in --overflow block a thread whose ring is full waits for the recorder. That
// time is parmon's: the workers' states show no wait they did not make (they only compute and
// emit; the report called it "37% sleeping" of a program that never sleeps), the overhead line
// says how long parmon held them (the END values' held_by_location), and the program's own event
// counts stay exact.
TEST(Record, BlockModeHoldIsParmonsNotTheProgramsWait) {
  TempDir dir;
  std::string trace = dir.File("t.ptrace"), side = dir.File("side");
  auto r = Parmon({"record", "-q", "--overflow", "block", "--buffer-size", "64K", "-o", trace, "--",
                   Prog("threads_regions"), "2", "2000000", side});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const long per_thread = ParseSide(side)["events_per_thread"];
  auto reader = format::TraceReader::Open(trace);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  Census c = TakeCensus(**reader);
  for (const auto& [id, loc] : (*reader)->definitions().locations) {
    auto& k = c.kinds[id];
    if (loc.name.rfind("worker-", 0) != 0)
      continue;
    EXPECT_EQ(k[static_cast<uint16_t>(Kind::kRegionEnter)] +
                  k[static_cast<uint16_t>(Kind::kRegionLeave)] +
                  k[static_cast<uint16_t>(Kind::kThreadName)],
              static_cast<uint64_t>(per_thread))
        << loc.name;
  }
  auto rep = Parmon({"report", trace, "--format", "json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  auto j = nlohmann::json::parse(rep.out);
  const uint64_t held = j["summary"]["overhead"]["held_ns"].get<uint64_t>();
  std::printf("held %.3f s\n", static_cast<double>(held) / 1e9);
  if (held == 0)
    GTEST_SKIP() << "the 64 KiB rings never filled on this machine";
  EXPECT_NE(Unwrapped(Parmon({"report", trace}).out).find("parmon held them"), std::string::npos);
  for (const auto& l : j["locations"]) {
    if (l["label"].get<std::string>().find("worker-") == std::string::npos ||
        l["state_source"] != "sampled")
      continue;
    const auto& st = l["states_ns"];
    double wall = 0;
    for (const auto& [name, ns] : st.items())
      wall += ns.get<double>();
    const double waited =
        st["lock_wait"].get<double>() + st["timer_wait"].get<double>() + st["other"].get<double>();
    std::printf("%s: held %.3f s, waits left %.3f s of %.3f s\n",
                l["label"].get<std::string>().c_str(), l["parmon_held_ns"].get<double>() / 1e9,
                waited / 1e9, wall / 1e9);
    EXPECT_LT(waited, 0.05 * wall + 20e6) << l["label"];
  }
}

TEST(Record, DropModeUnderOverloadCountsEveryLostEventExactly) {
  TempDir dir;
  std::string trace = dir.File("t.ptrace"), side = dir.File("side");
  auto r = Parmon({"record", "-q", "--overflow", "drop", "--buffer-size", "64K", "-o", trace, "--",
                   Prog("threads_regions"), "2", "1000000", side});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  long per_thread = ParseSide(side)["events_per_thread"];
  auto reader = format::TraceReader::Open(trace);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  Census c = TakeCensus(**reader);
  int workers = 0;
  uint64_t lost_total = 0;
  for (const auto& [id, loc] : (*reader)->definitions().locations) {
    if (loc.name.rfind("worker-", 0) != 0)
      continue;
    ++workers;
    auto& k = c.kinds[id];
    uint64_t kept = k[static_cast<uint16_t>(Kind::kRegionEnter)] +
                    k[static_cast<uint16_t>(Kind::kRegionLeave)] +
                    k[static_cast<uint16_t>(Kind::kThreadName)];
    EXPECT_EQ(kept + c.lost[id], static_cast<uint64_t>(per_thread)) << loc.name;
    lost_total += c.lost[id];
  }
  EXPECT_EQ(workers, 2);
  EXPECT_GT(lost_total, 0u) << "a 64 KiB ring at full speed should overflow";
  nlohmann::json info = InfoJson(trace);
  EXPECT_EQ(info["lost_events"].get<uint64_t>(), lost_total);
  EXPECT_NE(r.err.find("events were lost"), std::string::npos) << r.err;
}

TEST(Record, OverwriteModeKeepsTheNewestEventsAndCountsTheRest) {
  TempDir dir;
  std::string trace = dir.File("t.ptrace"), side = dir.File("side");
  auto r = Parmon({"record", "-q", "--overflow", "overwrite", "--flight-size", "256K", "-o", trace,
                   "--", Prog("threads_regions"), "1", "2000000", side});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto reader = format::TraceReader::Open(trace);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  uint64_t overwritten = std::stoull((*reader)->SessionValue("overwritten_events", "0"));
  EXPECT_GT(overwritten, 0u);  // (this figure includes evicted sampler events)
  Census c = TakeCensus(**reader);
  uint32_t worker = 0;
  for (const auto& [id, loc] : (*reader)->definitions().locations)
    if (loc.name == "worker-0")
      worker = id;
  ASSERT_NE(worker, 0u);
  auto& k = c.kinds[worker];
  uint64_t kept =
      k[static_cast<uint16_t>(Kind::kRegionEnter)] + k[static_cast<uint16_t>(Kind::kRegionLeave)];
  // Lost: what the flight recorder overwrote, plus what a full ring could not take (counted by
  // the thread, as in drop mode). Kept + lost is everything the worker emitted (its name too).
  EXPECT_GT(c.lost[worker], 0u);
  EXPECT_LT(kept, 4000000u);
  EXPECT_EQ(kept + k[static_cast<uint16_t>(Kind::kThreadName)] + c.lost[worker], 4000001u);
  // The newest events are the ones kept: the very last region leave of the run is there.
  auto session = SessionOver(**reader);
  ASSERT_TRUE(session);
  model::Merge cursor(*session);
  format::Event e, last_region;
  while (cursor.Next(&e))
    if (e.kind_enum() == Kind::kRegionLeave)
      last_region = e;
  EXPECT_EQ(last_region.kind_enum(), Kind::kRegionLeave);
}

TEST(Record, FollowsForkAndExec) {
  TempDir dir;
  std::string trace = dir.File("t.ptrace");
  auto r = Parmon({"record", "-q", "-o", trace, "--", Prog("fork_exec")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto reader = format::TraceReader::Open(trace);
  ASSERT_TRUE(reader.ok());
  const auto& defs = (*reader)->definitions();
  EXPECT_EQ(defs.processes.size(), 2u);  // the parent, and the child (before and after exec)
  Census c = TakeCensus(**reader);
  std::map<std::string, uint64_t> by_region;
  auto session = SessionOver(**reader);
  ASSERT_TRUE(session);
  model::Merge cursor(*session);
  format::Event e;
  while (cursor.Next(&e))
    if (e.kind_enum() == Kind::kRegionEnter)
      by_region[defs.Name(static_cast<uint32_t>(e.args[0]))]++;
  EXPECT_EQ(by_region["parent"], 500u);
  EXPECT_EQ(by_region["child"], 500u);
  EXPECT_EQ(by_region["work"], 1000u);  // threads_regions 2 500 after the exec
  bool exec_image = false;
  for (const auto& [pid, p] : defs.processes)
    exec_image |= p.command.find("threads_regions 2 500") != std::string::npos;
  EXPECT_TRUE(exec_image);
}

TEST(Record, ExitCodesAndSignalsPassThrough) {
  TempDir dir;
  auto r = Parmon({"record", "-q", "-o", dir.File("a"), "--", "sh", "-c", "exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  r = Parmon({"record", "-q", "-o", dir.File("b"), "--", "sh", "-c", "kill -9 $$"});
  EXPECT_EQ(r.exit_code, 128 + 9);
  r = Parmon({"record", "-q", "-o", dir.File("c"), "--", "/nonexistent/program"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("cannot run /nonexistent/program: No such file or directory"),
            std::string::npos)
      << r.err;
  r = Parmon({"record", "-q", "-o", "/nonexistent-dir/x.ptrace", "--", "true"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cannot create trace file"), std::string::npos) << r.err;
  r = Parmon({"record", "--buffer-size", "lots", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is not a size"), std::string::npos) << r.err;
}

TEST(Record, ForwardsSigintAndClosesTheFile) {
  TempDir dir;
  std::string trace = dir.File("t.ptrace");
  pid_t rec = fork();
  if (rec == 0) {
    execl(testing::ParmonBin().c_str(), "parmon", "record", "-q", "-o", trace.c_str(), "--",
          "sleep", "30", (char*)nullptr);
    _exit(127);
  }
  // Wait until the command runs, then interrupt the recorder.
  for (int i = 0; i < 200 && ChildOf(rec) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto t0 = std::chrono::steady_clock::now();
  kill(rec, SIGINT);
  int status;
  waitpid(rec, &status, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT);
  auto reader = format::TraceReader::Open(trace);
  ASSERT_TRUE(reader.ok());
  EXPECT_TRUE((*reader)->closed_cleanly());
}

TEST(Info, DamagedFilesGetAClearSentence) {
  TempDir dir;
  std::string junk = dir.File("junk");
  std::ofstream(junk) << "this is not a trace";
  auto r = Parmon({"info", junk});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("is not a parmon trace"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  std::string trace = dir.File("t.ptrace");
  ASSERT_EQ(
      Parmon({"record", "-q", "-o", trace, "--", Prog("threads_regions"), "2", "300000"}).exit_code,
      0);
  auto size = std::filesystem::file_size(trace);
  std::filesystem::resize_file(trace, size * 2 / 3);
  r = Parmon({"info", trace});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ends inside chunk"), std::string::npos) << r.out << r.err;
  auto d = Parmon({"dump", trace});
  EXPECT_NE(d.exit_code, 0) << d.err;
  EXPECT_NE(d.err.find("ends inside chunk"), std::string::npos) << d.err;
  EXPECT_GT(std::count(d.out.begin(), d.out.end(), '\n'), 1000) << d.err;
}

TEST(Dump, FiltersByThreadAndTime) {
  TempDir dir;
  std::string trace = dir.File("t.ptrace");
  ASSERT_EQ(
      Parmon({"record", "-q", "-o", trace, "--", Prog("threads_regions"), "2", "1000"}).exit_code,
      0);
  auto reader = format::TraceReader::Open(trace);
  ASSERT_TRUE(reader.ok());
  uint32_t tid = 0;
  for (const auto& [id, loc] : (*reader)->definitions().locations)
    if (loc.name == "worker-1")
      tid = loc.tid;
  ASSERT_NE(tid, 0u);
  auto d = Parmon({"dump", trace, "--tid", std::to_string(tid)});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  size_t lines = 0, regions = 0;
  std::istringstream in(d.out);
  for (std::string line; std::getline(in, line); ++lines)
    regions += line.find(" Region") != std::string::npos;
  EXPECT_EQ(regions, 2000u);
  EXPECT_GE(lines, 2001u);
  EXPECT_EQ(d.out.find("worker-0"), std::string::npos);
  auto none = Parmon({"dump", trace, "--from", "100s"});
  EXPECT_EQ(none.out, "");
}

}  // namespace
}  // namespace parmon
