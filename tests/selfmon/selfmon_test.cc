// Self-monitoring (docs/selfmon.md) end to end, under the real `parmon record`:
//   - MatchesReport: what a program reads through parmon_monitor_read for an interval is what
//     `parmon report --format json` says of the same threads over the same window, within 2
//     points per state (tests/selfmon/selfmon_states.c: threads running, queued, sleeping,
//     waiting on a lock and on a pipe);
//   - NotRecorded: run plainly, parmon_monitor_open says PARMON_E_NOT_RECORDED;
//   - BalancedIsFaster: examples/balance, whose second worker shares its CPU with 8 spinners,
//     finishes clearly faster when the master splits the work by the CPU shares it read than
//     when it splits evenly (medians of three runs each), and it did so because of what it read:
//     the shares it read tell the workers apart, and the balanced form gave the first worker
//     more of the work.
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/e2e.h"

namespace parmon::testing {
namespace {

using nlohmann::json;

struct Figures {
  std::string name;
  int tid = 0;
  uint64_t start = 0, end = 0, elapsed = 0;
  uint64_t states[7] = {};
  uint64_t cpu_ns = 0;
  double utilisation = 0, cpu_busy = 0;
  unsigned flags = 0;
};

std::map<std::string, Figures> ParseFigures(const std::string& out, const std::string& what) {
  std::map<std::string, Figures> by_name;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string tag;
    Figures f;
    l >> tag >> f.name >> f.tid >> f.start >> f.end >> f.elapsed;
    for (uint64_t& s : f.states)
      l >> s;
    l >> f.cpu_ns >> f.utilisation >> f.cpu_busy >> f.flags;
    if (tag == what && l)
      by_name[f.name] = f;
  }
  return by_name;
}

// The "kernel NAME CPU_NS DELAY_NS" lines: each thread's schedstat gains between the reads.
std::map<std::string, std::pair<uint64_t, uint64_t>> ParseKernel(const std::string& out) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_name;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string tag, name;
    uint64_t cpu = 0, delay = 0;
    if (l >> tag >> name >> cpu >> delay && tag == "kernel")
      by_name[name] = {cpu, delay};
  }
  return by_name;
}

int AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  return CPU_COUNT(&set);
}

TEST(SelfMonitoring, NotRecorded) {
  RunResult r = parmon::testing::Run({BinDir() + "/selfmon_states", "10"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("not recorded 5"), std::string::npos) << r.out;  // PARMON_E_NOT_RECORDED
}

TEST(SelfMonitoring, MatchesReport) {
  TempDir dir;
  const std::string trace = dir.File("states.ptrace");
  RunResult rec = Parmon({"record", "-q", "-o", trace, "--", BinDir() + "/selfmon_states", "1500"});
  ASSERT_EQ(rec.exit_code, 0) << rec.out << rec.err;
  const auto figures = ParseFigures(rec.out, "figures");
  ASSERT_EQ(figures.size(), 6u) << rec.out;
  // The window the figures cover: one publication, so the same sampler passes for every thread
  // (with context-switch records every thread is booked every pass; without them an idle one
  // may be booked a few passes later, hence the slack).
  const Figures& any = figures.at("spin");
  for (const auto& [name, f] : figures) {
    EXPECT_EQ(f.flags, 0u) << name;
    EXPECT_NEAR(static_cast<double>(f.start), static_cast<double>(any.start), 50e6) << name;
    EXPECT_NEAR(static_cast<double>(f.end), static_cast<double>(any.end), 50e6) << name;
    EXPECT_EQ(f.elapsed, f.end - f.start);
    uint64_t sum = 0;
    for (uint64_t s : f.states)
      sum += s;
    EXPECT_NEAR(static_cast<double>(sum), static_cast<double>(f.elapsed), 1e6) << name;
    EXPECT_GT(f.elapsed, 1'000'000'000u) << name;
    EXPECT_EQ(f.cpu_ns, f.states[0]) << name;
  }
  RunResult whole = Parmon({"report", trace, "--format", "json"});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const uint64_t session_start = json::parse(whole.out)["summary"]["session_start_ns"];
  ASSERT_GT(any.start, session_start);
  RunResult rep = Parmon({"report", trace, "--format", "json", "--from",
                          std::to_string(any.start - session_start) + "ns", "--to",
                          std::to_string(any.end - session_start) + "ns"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const json report = json::parse(rep.out);
  const double window = static_cast<double>(report["summary"]["duration_ns"].get<uint64_t>());
  EXPECT_NEAR(window, static_cast<double>(any.elapsed), 1e3);
  const char* const kStates[7] = {"running",    "runnable", "comm_wait", "lock_wait",
                                  "timer_wait", "io_wait",  "other"};
  int compared = 0;
  for (const json& loc : report["locations"]) {
    if (loc["kind"] != "thread")
      continue;
    const int tid = loc["tid"];
    auto it = std::find_if(figures.begin(), figures.end(),
                           [&](const auto& kv) { return kv.second.tid == tid; });
    if (it == figures.end())
      continue;
    const Figures& f = it->second;
    ++compared;
    for (int s = 0; s < 7; ++s) {
      const double read_pct = 100.0 * static_cast<double>(f.states[s]) / f.elapsed;
      const double report_pct = 100.0 * loc["states_ns"][kStates[s]].get<double>() / window;
      EXPECT_NEAR(read_pct, report_pct, 2.0) << f.name << " " << kStates[s];
    }
  }
  EXPECT_EQ(compared, 6);
  // The states are the ones each thread was put in (the sampler's, which the report trusts too).
  auto pct = [&](const char* name, int s) {
    const Figures& f = figures.at(name);
    return 100.0 * static_cast<double>(f.states[s]) / f.elapsed;
  };
  // A blocked thread is in its wait state whenever the kernel says it was neither on a CPU nor
  // queued for one (its schedstat over the same interval): on a quiet machine nearly all the
  // time; on a busy one each wake-up of the sleeper (every 2 ms) queues, and that is runnable.
  const auto kernel = ParseKernel(rec.out);
  for (const auto& [name, s] :
       {std::pair<const char*, int>{"sleeper", 4}, {"locker", 3}, {"reader", 2}}) {
    const Figures& f = figures.at(name);
    const auto& [cpu, delay] = kernel.at(name);
    const double blocked = 100.0 * (1.0 - static_cast<double>(cpu + delay) / f.elapsed);
    std::printf("%s: %s %.1f%%, kernel: blocked %.1f%% (on a CPU %.1f%%, queued %.1f%%)\n", name,
                kStates[s], pct(name, s), blocked, 100.0 * static_cast<double>(cpu) / f.elapsed,
                100.0 * static_cast<double>(delay) / f.elapsed);
    EXPECT_GT(pct(name, s), blocked - 5.0) << name;
    EXPECT_GT(pct(name, s), 20.0) << name;
  }
  // The spinners run or queue all the time (how much of each depends on the machine's load).
  for (const char* name : {"spin", "pair-0", "pair-1"})
    EXPECT_GT(pct(name, 0) + pct(name, 1), 90.0) << name;
  EXPECT_GT(pct("pair-0", 1) + pct("pair-1", 1), 50.0);  // two spinners on one CPU
  // The last interval alone: one sampler period or so, within the span read.
  const auto last = ParseFigures(rec.out, "last");
  ASSERT_EQ(last.size(), 6u);
  for (const auto& [name, f] : last) {
    EXPECT_GT(f.elapsed, 0u) << name;
    EXPECT_LT(f.elapsed, 200'000'000u) << name;
    EXPECT_LE(f.end, any.end) << name;
  }
}

// The Fortran module (include/parmon/parmon.f90) against the same library: a program that watches
// itself and its process and computes for 300 ms reads that it was running most of it.
TEST(SelfMonitoring, Fortran) {
  if (!Exists(BinDir() + "/selfmon_f"))
    GTEST_SKIP() << "no Fortran compiler";
  RunResult plain = parmon::testing::Run({BinDir() + "/selfmon_f"});
  EXPECT_NE(plain.out.find("fortran 5"), std::string::npos) << plain.out;  // not recorded
  TempDir dir;
  RunResult r = Parmon({"record", "-q", "-o", dir.File("f.ptrace"), "--", BinDir() + "/selfmon_f"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::istringstream in(r.out.substr(r.out.find("fortran ")));
  std::string tag;
  uint64_t n = 0, flags = 9, elapsed = 0, running = 0, cpu = 0, threads = 0;
  in >> tag >> n >> flags >> elapsed >> running >> cpu >> threads;
  EXPECT_EQ(n, 2u) << r.out;
  EXPECT_EQ(flags, 0u) << r.out;
  EXPECT_GT(elapsed, 250'000'000u) << r.out;
  EXPECT_GT(running, elapsed / 5) << r.out;
  EXPECT_EQ(cpu, running) << r.out;
  EXPECT_GE(threads, 1u) << r.out;
}

// Runs examples/balance under parmon record and returns its counts file. 8 spinner processes
// (sessions of their own) on the second worker's CPU: the kernel's balancer moves other sessions'
// threads off that CPU onto the first worker's, and with 4 spinners and three other sessions'
// builds on the machine the two workers' shares came out within 1.3x of each other (a ratio of
// 0.84 between the forms); with 8 the second worker's share stays well below the first's.
json RecordBalance(const TempDir& dir, const std::string& form, int run) {
  const std::string counts = dir.File(form + std::to_string(run) + ".json");
  RunResult r = Parmon({"record", "-q", "-o", dir.File(form + std::to_string(run) + ".ptrace"),
                        "--", BinDir() + "/balance", "--form", form, "--spinners", "8", "--units",
                        "3000", "--counts", counts});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return json::parse(ReadFile(counts));
}

TEST(SelfMonitoring, BalancedIsFaster) {
  if (!Exists(BinDir() + "/balance"))
    GTEST_SKIP() << "examples not built";
  if (AllowedCpus() < 2)
    GTEST_SKIP() << "needs two CPUs";
  TempDir dir;
  std::vector<double> fixed, balanced;
  json last_balanced;
  for (int run = 0; run < 3; ++run) {
    json s = RecordBalance(dir, "static", run);
    json b = RecordBalance(dir, "balanced", run);
    ASSERT_TRUE(s["ok"].get<bool>() && b["ok"].get<bool>());
    ASSERT_TRUE(b["results"]["recorded"].get<bool>());
    fixed.push_back(s["results"]["seconds"]);
    balanced.push_back(b["results"]["seconds"]);
    last_balanced = b;
  }
  std::sort(fixed.begin(), fixed.end());
  std::sort(balanced.begin(), balanced.end());
  const double ratio = balanced[1] / fixed[1];
  RecordProperty("static_median_s", std::to_string(fixed[1]));
  RecordProperty("balanced_median_s", std::to_string(balanced[1]));
  printf("balance: static median %.3f s, balanced median %.3f s (ratio %.2f)\n", fixed[1],
         balanced[1], ratio);
  EXPECT_LT(ratio, 0.8);
  // Because of what it read: the shares read in the rounds tell the workers apart, and the
  // balanced form gave the first worker (alone on its CPU) most of the work.
  const json& rows = last_balanced["results"]["shares_read"];
  double share0 = 0, share1 = 0;
  int rows_used = 0;
  for (const json& row : rows) {
    if (row.size() != 2 || row[0].get<double>() < 0 || row[1].get<double>() < 0)
      continue;
    share0 += row[0].get<double>();
    share1 += row[1].get<double>();
    ++rows_used;
  }
  ASSERT_GT(rows_used, 3);
  EXPECT_GT(share0 / rows_used, 1.5 * share1 / rows_used);
  const json& units = last_balanced["results"]["units"];
  EXPECT_GT(units[0].get<double>(), 1.5 * units[1].get<double>());
}

}  // namespace
}  // namespace parmon::testing
