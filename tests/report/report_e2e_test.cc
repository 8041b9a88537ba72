// End-to-end tests of parmon report on real runs: the ring example in its slow and fixed forms,
// the oversubscribed-threads example, and an MPI program with a deliberate late sender. Each
// records under `parmon record`, reports with --format json and checks the findings against
// what the program is known to do. A test skips, saying what is missing, when its program or
// the preload library it needs was not built.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/e2e.h"

namespace parmon::testing {
namespace {

using nlohmann::json;

std::vector<std::string> MpiRun(int ranks) {
  return {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(ranks)};
}

// Records argv and returns the report's JSON (null on failure, with the reason in *why).
json RecordAndReport(const TempDir& dir,
                     const std::vector<std::string>& argv,
                     std::string* why,
                     std::string* text = nullptr,
                     RunResult* recorded = nullptr) {
  std::string trace = dir.File("run.ptrace");
  std::vector<std::string> args = {"record", "-q", "-o", trace, "--"};
  args.insert(args.end(), argv.begin(), argv.end());
  RunResult rec = Parmon(args, 180);
  if (recorded)
    *recorded = rec;
  if (rec.exit_code != 0) {
    *why = "parmon record failed: " + rec.err;
    return nullptr;
  }
  RunResult rep = Parmon({"report", trace, "--format", "json"});
  if (rep.exit_code != 0) {
    *why = "parmon report failed: " + rep.err;
    return nullptr;
  }
  if (text)
    *text = Parmon({"report", trace}).out;
  return json::parse(rep.out);
}

const json* Finding(const json& report, const std::string& id) {
  for (const auto& f : report["diagnosis"])
    if (f["id"] == id)
      return &f;
  return nullptr;
}

bool HasMpi() {
  return Exists(LibDir() + "/libparmon_mpi.so") && Exists(BinDir() + "/ring_search");
}

std::vector<std::string> Ring(const std::string& form) {
  auto argv = MpiRun(4);
  argv.push_back(BinDir() + "/ring_search");
  // Large enough that the ring's work, not MPI start-up, fills most of the run (about 4 s).
  for (const char* a : {"--form", form.c_str(), "--words", "200", "--db-kb", "8192"})
    argv.push_back(a);
  return argv;
}

const json* Link(const json& report, const std::string& from, const std::string& to) {
  for (const auto& k : report["links"])
    if (k["from_label"] == from && k["to_label"] == to)
      return &k;
  return nullptr;
}

// The Hathi-2 ring: in the slow form the master waits for every answer on the last link before
// it hands out the next word; the diagnosis names rank 0 and the link rank 3 -> rank 0. In the
// fixed form the ring stays full and that finding is absent. Whether it is found does not depend
// on scheduling: Open MPI's ranks spin while they wait, so on 2 CPUs rank 1 hardly ever seems to
// wait for words, but every word after the first reaches it only after its previous answer has
// come back round to rank 0 (closed_loop_messages), which the MPI events show exactly.
TEST(ReportE2E, RingSlowFormNamesTheMasterAndTheLastLink) {
  if (!HasMpi())
    GTEST_SKIP() << "needs libparmon_mpi and the ring_search example (MPI)";
  TempDir dir;
  std::string why, text;
  json slow = RecordAndReport(dir, Ring("slow"), &why, &text);
  ASSERT_FALSE(slow.is_null()) << why;
  const json* out = Link(slow, "rank 0", "rank 1");
  ASSERT_NE(out, nullptr) << text;
  EXPECT_GE((*out)["closed_loop_messages"].get<double>(), 0.9 * (*out)["messages"].get<double>())
      << text;
  const json* f = Finding(slow, "serialised-cycle");
  ASSERT_NE(f, nullptr) << text;
  EXPECT_EQ((*f)["subjects"][0], "rank 0") << text;
  EXPECT_EQ((*f)["subjects"][3], "rank 3 -> rank 0") << text;
  // Its consumer, rank 1, got its words one at a time: the loop drained for every word.
  EXPECT_EQ((*f)["subjects"][4], "rank 1") << text;
}

TEST(ReportE2E, RingFixedFormHasNoSuchFinding) {
  if (!HasMpi())
    GTEST_SKIP() << "needs libparmon_mpi and the ring_search example (MPI)";
  TempDir dir;
  std::string why, text;
  json fixed = RecordAndReport(dir, Ring("fixed"), &why, &text);
  ASSERT_FALSE(fixed.is_null()) << why;
  EXPECT_EQ(Finding(fixed, "serialised-cycle"), nullptr) << text;
  for (const auto& f : fixed["diagnosis"])
    EXPECT_EQ(f["text"].get<std::string>().find("extra synchronisation"), std::string::npos)
        << text;
  // The words were handed out ahead of the answers (the stop message is the one after them).
  const json* out = Link(fixed, "rank 0", "rank 1");
  ASSERT_NE(out, nullptr) << text;
  EXPECT_LT((*out)["closed_loop_messages"].get<double>(), 0.1 * (*out)["messages"].get<double>())
      << text;
}

// The same farm over pipes between forked processes (ring_search_pipes), read from the channel
// events: labels are "master (TID)", "worker-K (TID)".
std::vector<std::string> PipeRing(const std::string& form) {
  std::vector<std::string> argv = {BinDir() + "/ring_search_pipes"};
  for (const char* a :
       {"--form", form.c_str(), "--workers", "3", "--words", "1500", "--db-kb", "512"})
    argv.push_back(a);
  return argv;
}

bool StartsWith(const json& s, const std::string& prefix) {
  return s.is_string() && s.get<std::string>().rfind(prefix, 0) == 0;
}

TEST(ReportE2E, PipeRingSlowFormNamesTheMasterAndTheLastLink) {
  if (!Exists(LibDir() + "/libparmon_posix.so") || !Exists(BinDir() + "/ring_search_pipes"))
    GTEST_SKIP() << "needs libparmon_posix and the ring_search_pipes example";
  TempDir dir;
  std::string why, text;
  json slow = RecordAndReport(dir, PipeRing("slow"), &why, &text);
  ASSERT_FALSE(slow.is_null()) << why;
  const json* f = Finding(slow, "serialised-cycle");
  ASSERT_NE(f, nullptr) << text;
  const json& s = (*f)["subjects"];
  EXPECT_TRUE(StartsWith(s[0], "master (")) << text;
  EXPECT_TRUE(StartsWith(s[1], "worker-3 (")) << text;
  EXPECT_EQ(s[3], s[1].get<std::string>() + " -> " + s[0].get<std::string>()) << text;
  EXPECT_TRUE(StartsWith(s[4], "worker-1 (")) << text;
}

TEST(ReportE2E, PipeRingFixedFormHasNoSuchFinding) {
  if (!Exists(LibDir() + "/libparmon_posix.so") || !Exists(BinDir() + "/ring_search_pipes"))
    GTEST_SKIP() << "needs libparmon_posix and the ring_search_pipes example";
  TempDir dir;
  std::string why, text;
  json fixed = RecordAndReport(dir, PipeRing("fixed"), &why, &text);
  ASSERT_FALSE(fixed.is_null()) << why;
  EXPECT_EQ(Finding(fixed, "serialised-cycle"), nullptr) << text;
  for (const auto& f : fixed["diagnosis"])
    EXPECT_EQ(f["text"].get<std::string>().find("extra synchronisation"), std::string::npos)
        << text;
}

// More spinning threads than CPUs: the sampler sees them queued, and the diagnosis says so.
TEST(ReportE2E, OversubscribedThreadsAreQueued) {
  if (!Exists(BinDir() + "/matmul_gang"))
    GTEST_SKIP() << "needs the matmul_gang example";
  TempDir dir;
  std::string why, text;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = static_cast<int>(std::max(4L, 2 * cpus));
  json r = RecordAndReport(
      dir, {BinDir() + "/matmul_gang", "--n", "360", "--threads", std::to_string(threads)}, &why,
      &text);
  ASSERT_FALSE(r.is_null()) << why;
  if (!r["summary"]["has_sched"].get<bool>())
    GTEST_SKIP() << "the trace has no sampler data";
  const json* f = Finding(r, "queued");
  ASSERT_NE(f, nullptr) << text;
  EXPECT_NE((*f)["text"].get<std::string>().find("queued"), std::string::npos);
  EXPECT_NE(text.find("queued"), std::string::npos);
  // Issue 12: the threads' queued time summed is several times the wall time; what is at stake
  // is what the run's wall time could lose, never more than the wall time, and the report says
  // how it ranks.
  const uint64_t wall = r["summary"]["duration_ns"].get<uint64_t>();
  for (const auto& x : r["diagnosis"]) {
    EXPECT_LE(x["time_at_stake_ns"].get<uint64_t>(), wall) << x["id"];
    EXPECT_GE(x["thread_time_ns"].get<uint64_t>(), x["time_at_stake_ns"].get<uint64_t>());
  }
  std::printf("queued: %.3f s of thread time, %.3f s at stake, run %.3f s\n",
              (*f)["thread_time_ns"].get<double>() / 1e9,
              (*f)["time_at_stake_ns"].get<double>() / 1e9, static_cast<double>(wall) / 1e9);
  EXPECT_GT((*f)["thread_time_ns"].get<uint64_t>(), (*f)["time_at_stake_ns"].get<uint64_t>());
  EXPECT_NE(Unwrapped(text).find("Ranked by what each could save of the run's"), std::string::npos)
      << text;
}

// What every critical path must satisfy, whatever the program: its segments add up to its
// length, the length is within the window, and no thread's segment exceeds what that thread ran
// (its CPU time in the same report, which follows the kernel's CPU clock: issue 12 item 1; a
// rank's includes what the kernel saw it run inside MPI calls).
// Returns the path's length (0 when the report has none, after a failed expectation).
double CheckPathSegments(const json& r) {
  const json& cp = r["wait_states"]["critical_path"];
  const double length = cp["length_ns"].get<double>();
  EXPECT_GT(length, 0) << cp.dump();
  EXPECT_LE(length, cp["wall_ns"].get<double>());
  double sum = 0;
  for (const auto& s : cp["shares"])
    sum += s["ns"].get<double>();
  EXPECT_EQ(sum, length) << cp.dump();
  for (const auto& l : r["locations"]) {
    if (l["kind"] != "thread")
      continue;
    const double cpu = l["cpu_ns"].get<double>();
    std::printf("%-24s wall %.3f s cpu %.3f s on the path %.3f s\n",
                l["label"].get<std::string>().c_str(), l["wall_ns"].get<double>() / 1e9, cpu / 1e9,
                l["critical_path_ns"].get<double>() / 1e9);
    EXPECT_LE(l["critical_path_ns"].get<double>(), 1.02 * cpu + 1e6) << l["label"];
  }
  std::printf("critical path %.3f s in a window of %.3f s\n", length / 1e9,
              cp["wall_ns"].get<double>() / 1e9);
  return length;
}

const json* LocationByTid(const json& r, uint64_t tid) {
  for (const auto& l : r["locations"])
    if (l["kind"] == "thread" && l["tid"].get<uint64_t>() == tid)
      return &l;
  return nullptr;
}

// Issue 12: CPU-bound work under wrappers that only wait. `/usr/bin/time` waits in wait4 for sh,
// which waits for duty_cycle, whose two threads bounce a byte through pipes with a little work
// each turn (the pipes are the path's links) while its main thread waits in pthread_join: the
// critical path runs through the work that computed, not through a parent that waited the whole
// run (it used to be "time 100%"). Oracle: the CPU time /usr/bin/time reports for everything
// under it, which the path cannot exceed, and each location's own CPU time in the same report.
TEST(ReportE2E, CriticalPathRunsThroughTheWorkNotAWaitingParent) {
  if (!Exists("/usr/bin/time") || !Exists(LibDir() + "/libparmon_posix.so") ||
      !Exists(BinDir() + "/duty_cycle"))
    GTEST_SKIP() << "needs /usr/bin/time, the POSIX preload library and duty_cycle";
  TempDir dir;
  std::string trace = dir.File("run.ptrace");
  RunResult rec =
      Parmon({"record", "-q", "-o", trace, "--", "/usr/bin/time", "-f", "children_cpu %U %S", "sh",
              "-c", BinDir() + "/duty_cycle --rounds 100000 pingpong"},
             120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  auto at = rec.err.find("children_cpu ");
  ASSERT_NE(at, std::string::npos) << rec.err;
  double user = 0, sys = 0;
  ASSERT_EQ(std::sscanf(rec.err.c_str() + at, "children_cpu %lf %lf", &user, &sys), 2) << rec.err;
  RunResult rep = Parmon({"report", trace, "--format", "json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  json r = json::parse(rep.out);
  if (!r["summary"]["has_sched"].get<bool>())
    GTEST_SKIP() << "the trace has no sampler data";
  const double children_cpu = (user + sys) * 1e9;
  const double length = CheckPathSegments(r);
  const json* busiest = nullptr;  // the location that computed most: pinger or ponger
  double workers = 0;             // pinger and ponger
  for (const auto& l : r["locations"]) {
    if (l["kind"] != "thread")
      continue;
    if (!busiest || l["cpu_ns"].get<double>() > (*busiest)["cpu_ns"].get<double>())
      busiest = &l;
    // time and sh only start and wait: on the path with their start-up (exec, loading the
    // preload libraries: 20-40 ms of CPU each on this busy machine, against a path of about
    // 0.4 s), never their waits (CheckPathSegments: never more than their CPU time).
    if (l["name"] == "time" || l["name"] == "sh")
      EXPECT_LT(l["critical_path_ns"].get<double>(), 0.15 * length) << l["label"];
    else if (l["cpu_ns"].get<double>() > 0.05 * l["wall_ns"].get<double>())
      workers += l["critical_path_ns"].get<double>();
  }
  std::printf("path %.3f s, pinger and ponger %.3f s; /usr/bin/time: children %.2f s CPU\n",
              length / 1e9, workers / 1e9, children_cpu / 1e9);
  ASSERT_NE(busiest, nullptr);
  ASSERT_GT(length, 0);
  // The two threads that bounce the byte hold most of it, passing it to each other.
  EXPECT_GE(workers, 0.6 * length);
  // Their CPU time is mostly inside their pipe calls (the copy, waking the other), which is
  // waiting on the channel, not computation (measured 2026-11-27 under load: a path of 0.22 s
  // for 1.02 s of CPU in both, 0.20 s of it theirs); it is far from nothing.
  EXPECT_GE(length, 0.1 * (*busiest)["cpu_ns"].get<double>());
  // Computation only: no more than the CPU time of everything that ran (its counters in 10 ms
  // ticks, and a sampling period of lag).
  EXPECT_LE(length, 1.02 * children_cpu + 30e6);
}

// Issue 12 item 5: a shell runs a child whose one thread computes while its main thread waits
// in pthread_join and the shell in wait4 (the `; true` keeps sh from exec'ing the command). The
// path runs through the spinner: from sh at the fork, into the spinner at pthread_create, back
// to the main thread at its exit (the join) and to sh at the process's exit (wait4). sh and the
// main thread are on it only with what they computed before the fork and the pthread_create
// (their start-up: exec, loading the preload libraries, about 20 ms of CPU each on this busy
// machine), never with their waits. Oracle: the spinner's own CLOCK_THREAD_CPUTIME_ID, printed
// by the program in the same run.
TEST(ReportE2E, CriticalPathOfAShellAndItsComputingChild) {
  if (!Exists(BinDir() + "/duty_cycle"))
    GTEST_SKIP() << "needs duty_cycle";
  TempDir dir;
  std::string why, text;
  RunResult rec;
  json r = RecordAndReport(dir, {"sh", "-c", BinDir() + "/duty_cycle --seconds 3 spin; true"}, &why,
                           &text, &rec);
  ASSERT_FALSE(r.is_null()) << why;
  if (!r["summary"]["has_sched"].get<bool>())
    GTEST_SKIP() << "the trace has no sampler data";
  std::vector<Truth> truth = ParseTruth(rec.out);
  ASSERT_EQ(truth.size(), 1u) << rec.out;
  const double length = CheckPathSegments(r);
  const json* spinner = LocationByTid(r, truth[0].tid);
  ASSERT_NE(spinner, nullptr) << truth[0].tid;
  const double on_path = (*spinner)["critical_path_ns"].get<double>();
  const double cpu = static_cast<double>(truth[0].cpu);
  std::printf("spinner: own CPU clock %.3f s, on the path %.3f s\n", cpu / 1e9, on_path / 1e9);
  // All it computed, less at most a sampling period or two of lag at its exit, and never more.
  EXPECT_GE(on_path, 0.95 * cpu - 30e6);
  EXPECT_LE(on_path, 1.02 * cpu + 1e6);
  // The waiters (sh in wait4, duty_cycle's main thread in the join): their start-up only.
  EXPECT_GE(on_path, 0.85 * length);
  for (const auto& l : r["locations"])
    if (l["kind"] == "thread" && &l != spinner)
      EXPECT_LT(l["critical_path_ns"].get<double>(), 0.1 * length) << l["label"];
  EXPECT_NE(Unwrapped(text).find("critical path: "), std::string::npos) << text;
}

// bytes of words ("kilo417 echo33 ...") in an order a generator of known seed picks: text that
// compresses about 3:1, at a compressor's ordinary speed.
void WriteWords(const std::string& path, size_t size) {
  std::ofstream f(path);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  static const char* kWords[] = {"alpha", "bravo", "charlie", "delta",  "echo", "foxtrot",
                                 "golf",  "hotel", "india",   "juliet", "kilo", "lima"};
  std::string word;
  for (size_t bytes = 0; bytes < size;) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    word = std::string(kWords[x % 12]) + std::to_string(x % 1000) + (x % 9 ? " " : "\n");
    f << word;
    bytes += word.size();
  }
}

// A pipeline under sh: cat feeds gzip, whose output wc counts. gzip computes most of the run,
// cat and wc little, and sh only waits for them: the path is gzip's, with cat's reads before
// gzip had the data and wc's last counting after it, and sh at nothing.
TEST(ReportE2E, CriticalPathOfAPipelineIsGzip) {
  if (!Exists(LibDir() + "/libparmon_posix.so") || !Exists("/bin/gzip"))
    GTEST_SKIP() << "needs the POSIX preload library and gzip";
  TempDir dir;
  WriteWords(dir.File("in.txt"), 24u << 20);  // gzip -6 takes about a second on it
  std::string why, text;
  json r = RecordAndReport(
      dir, {"sh", "-c", "cat " + dir.File("in.txt") + " | gzip -6 | wc -c; true"}, &why, &text);
  ASSERT_FALSE(r.is_null()) << why;
  if (!r["summary"]["has_sched"].get<bool>())
    GTEST_SKIP() << "the trace has no sampler data";
  const double length = CheckPathSegments(r);
  const json* gzip = nullptr;
  for (const auto& l : r["locations"])
    if (l["kind"] == "thread" && l["name"] == "gzip")
      gzip = &l;
  ASSERT_NE(gzip, nullptr) << text;
  const double on_path = (*gzip)["critical_path_ns"].get<double>();
  // gzip's computation is its CPU time less its reads and writes (copies, waits).
  EXPECT_GE(on_path, 0.7 * (*gzip)["cpu_ns"].get<double>());
  EXPECT_GE(on_path, 0.8 * length);
  for (const auto& l : r["locations"])
    if (l["kind"] == "thread" && l["name"] != "gzip")  // sh's start-up, cat's reads, wc
      EXPECT_LT(l["critical_path_ns"].get<double>(), 0.05 * length) << l["label"];
}

// The MPI demo under mpirun: mpirun and its helper threads launch and wait, the four ranks
// compute; the path is mostly the ranks' (it used to be mpirun's, 100%). mpirun is on it with
// what it computed before it forked the ranks and after they exited (its start-up and
// tear-down: 16-18% of the demo's short path here, 160 of its 170 ms of CPU), never with its
// waits meanwhile: at most its CPU time (CheckPathSegments).
TEST(ReportE2E, CriticalPathOfTheMpiRingIsTheRanks) {
  if (!HasMpi())
    GTEST_SKIP() << "needs libparmon_mpi and the ring_search example (MPI)";
  TempDir dir;
  std::string why, text;
  json r = RecordAndReport(dir, Ring("fixed"), &why, &text);
  ASSERT_FALSE(r.is_null()) << why;
  if (!r["summary"]["has_sched"].get<bool>())
    GTEST_SKIP() << "the trace has no sampler data";
  const double length = CheckPathSegments(r);
  double ranks = 0, launcher = 0;
  for (const auto& l : r["locations"]) {
    if (l["kind"] != "thread")
      continue;
    (l["rank"].get<int>() >= 0 ? ranks : launcher) += l["critical_path_ns"].get<double>();
  }
  std::printf("ranks %.3f s, the rest (mpirun and helpers) %.3f s\n", ranks / 1e9, launcher / 1e9);
  EXPECT_GE(ranks, 0.6 * length) << text;
  EXPECT_LT(launcher, 0.3 * length) << text;
}

// The machine's CPU time so far, from /proc/stat's first line (all CPUs, clock ticks in ns).
struct ProcStat {
  uint64_t busy = 0, idle = 0, steal = 0;  // busy: user nice system irq softirq; idle: + iowait
};
ProcStat ReadProcStat() {
  std::istringstream in(ReadFile("/proc/stat"));
  std::string cpu;
  uint64_t v[8] = {};
  in >> cpu >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6] >> v[7];
  const uint64_t tick = 1'000'000'000ull / static_cast<uint64_t>(sysconf(_SC_CLK_TCK));
  return {(v[0] + v[1] + v[2] + v[5] + v[6]) * tick, (v[3] + v[4]) * tick, v[7] * tick};
}

// Issue 12 item 10: the threads' queued share and the CPUs' busy share must reconcile. Four
// spinners on this machine's CPUs (2 here, shared with other work): the report's CPU account
// says how busy the CPUs were, how much of that was the program, how many CPUs its threads
// wanted and got; what they queued is checked against each thread's schedstat run_delay (the
// kernel's own queueing clock, printed by the program), the busy and steal shares against
// /proc/stat read around the run.
TEST(ReportE2E, QueuedTimeReconcilesWithTheCpus) {
  if (!Exists(BinDir() + "/duty_cycle"))
    GTEST_SKIP() << "needs duty_cycle";
  TempDir dir;
  std::string why, text;
  RunResult rec;
  const ProcStat before = ReadProcStat();
  json r = RecordAndReport(dir, {BinDir() + "/duty_cycle", "--seconds", "2", "oversub"}, &why,
                           &text, &rec);
  const ProcStat after = ReadProcStat();
  ASSERT_FALSE(r.is_null()) << why;
  if (!r["summary"]["has_sched"].get<bool>())
    GTEST_SKIP() << "the trace has no sampler data";
  std::vector<Truth> truth = ParseTruth(rec.out);
  ASSERT_EQ(truth.size(), 4u) << rec.out;
  const json& a = r["cpu_account"];
  std::printf("%s\n", a.dump().c_str());
  ASSERT_GT(a["cpus"].get<uint64_t>(), 0u);
  const double capacity = a["capacity_ns"].get<double>();
  const double window = r["summary"]["duration_ns"].get<double>();
  // The kernel's figures for the spinners: their queueing and what they ran.
  double delay = 0, ran = 0;
  for (const Truth& t : truth) {
    delay += static_cast<double>(t.sched_delay);
    ran += static_cast<double>(t.sched_run);
  }
  const double queued = a["program_queued_ns"].get<double>();
  const double running = a["program_running_ns"].get<double>();
  std::printf("queued %.3f s (schedstat %.3f s), running %.3f s (schedstat %.3f s)\n", queued / 1e9,
              delay / 1e9, running / 1e9, ran / 1e9);
  // The main thread (in pthread_join) adds a few ms of either.
  EXPECT_NEAR(queued, delay, 0.05 * delay + 30e6);
  EXPECT_NEAR(running, ran, 0.03 * ran + 30e6);
  // The CPUs wanted and got, in CPUs on average: wanted - got is what they queued.
  const double wanted = a["runnable_threads"].get<double>();
  EXPECT_NEAR(wanted, (delay + ran) / window, 0.05 * wanted + 0.05);
  // The program cannot have run more than the CPUs were busy (10 ms ticks: a tick per CPU per
  // sample of slack), and the CPU figures follow /proc/stat over the run.
  EXPECT_LE(running, 1.02 * a["busy_ns"].get<double>() + 50e6);
  const double machine = static_cast<double>(
      (after.busy - before.busy) + (after.idle - before.idle) + (after.steal - before.steal));
  ASSERT_GT(machine, 0);
  const double busy_share = a["busy_ns"].get<double>() / capacity;
  const double steal_share = a["steal_ns"].get<double>() / capacity;
  std::printf("busy %.0f%% (/proc/stat %.0f%%), steal %.0f%% (/proc/stat %.0f%%)\n",
              100 * busy_share, 100.0 * static_cast<double>(after.busy - before.busy) / machine,
              100 * steal_share, 100.0 * static_cast<double>(after.steal - before.steal) / machine);
  EXPECT_NEAR(busy_share, static_cast<double>(after.busy - before.busy) / machine, 0.1);
  EXPECT_NEAR(steal_share, static_cast<double>(after.steal - before.steal) / machine, 0.05);
  // Four spinners on fewer CPUs want more than there are: they queued, and the line says why.
  if (a["cpus"].get<uint64_t>() < 4)
    EXPECT_GT(wanted, static_cast<double>(a["cpus"].get<uint64_t>()));
  EXPECT_NE(text.find("cpus       busy "), std::string::npos) << text;
  // The line wraps: in some runs "so they queued" is cut across two lines.
  EXPECT_NE(Unwrapped(text).find("so they queued"), std::string::npos) << text;
}

// Issue 12's golden for a real pool: pigz compressing with one thread per CPU (pigz -p 2 on
// this 2-CPU machine), whose compress threads compute nearly all the time while its writer
// thread waits on a lock for their output. It is CPU-bound on the CPUs and the report says so
// first, never that it waits on locks. On a machine busy with other work the claim can be
// legitimately false (pigz gets a part of the CPUs); then the report must put the queueing on
// that other work. Oracle: pigz's own CPU time and elapsed time from /usr/bin/time in the same
// run, as a share of the CPUs' time.
TEST(ReportE2E, PigzIsCpuBound) {
  if (!Exists("/usr/bin/pigz") || !Exists("/usr/bin/time"))
    GTEST_SKIP() << "needs pigz and /usr/bin/time (scripts/setup.sh installs them)";
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  TempDir dir;
  WriteWords(dir.File("in.txt"), 64u << 20);
  std::string trace = dir.File("run.ptrace");
  RunResult rec =
      Parmon({"record", "-q", "-o", trace, "--", "/usr/bin/time", "-f", "pigz_time %e %U %S",
              "pigz", "-p", std::to_string(cpus), "-6", "-f", dir.File("in.txt")},
             180);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  auto at = rec.err.find("pigz_time ");
  ASSERT_NE(at, std::string::npos) << rec.err;
  double elapsed = 0, user = 0, sys = 0;
  ASSERT_EQ(std::sscanf(rec.err.c_str() + at, "pigz_time %lf %lf %lf", &elapsed, &user, &sys), 3)
      << rec.err;
  ASSERT_TRUE(Exists(dir.File("in.txt.gz")));
  RunResult rep = Parmon({"report", trace, "--format", "json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const std::string text = Parmon({"report", trace}).out;
  json r = json::parse(rep.out);
  if (!r["summary"]["has_sched"].get<bool>())
    GTEST_SKIP() << "the trace has no sampler data";
  // The share of the CPUs' time pigz computed, by the kernel's count (rusage), over its own run.
  const double share = (user + sys) / (static_cast<double>(cpus) * elapsed);
  const json& findings = r["diagnosis"];
  ASSERT_FALSE(findings.empty()) << text;
  const std::string first = findings[0]["text"].get<std::string>();
  const json* bound = Finding(r, "cpu-bound");
  const json* queued = Finding(r, "queued");
  const bool other_work = queued && (*queued)["text"].get<std::string>().find(
                                        "other work on the machine") != std::string::npos;
  std::printf("pigz: %.2f s elapsed, %.2f s CPU: %.0f%% of %ld CPUs; finding 1: %s\n", elapsed,
              user + sys, 100 * share, cpus, first.c_str());
  // The writer thread's lock wait is never the headline.
  EXPECT_EQ(first.find("waiting on locks"), std::string::npos) << text;
  const std::string golden = "the program is CPU-bound on " + std::to_string(cpus) + " CPUs";
  if (share >= 0.88) {  // the CPUs were pigz's: the golden finding, first
    ASSERT_NE(bound, nullptr) << text;
    EXPECT_EQ(findings[0]["id"], "cpu-bound") << text;
    EXPECT_EQ(first.rfind(golden, 0), 0u) << first;
  } else if (share < 0.72) {  // others' work took the CPUs: said, and no CPU-bound claim
    EXPECT_EQ(bound, nullptr) << text;
    EXPECT_TRUE(other_work) << text;
  } else {  // in between: one or the other
    EXPECT_TRUE(bound != nullptr || other_work) << text;
  }
}

// Issue 12 item 3: load imbalance is a property of peers doing the same kind of work. `make -j4`
// of twelve small C files runs dozens of short processes (make, gcc, cc1, as), none of which
// lives alongside the others for the run: no imbalance finding (it used to be measured over
// every one of them, "15.2 s at stake" in a 3.6 s build), and nothing at stake beyond the wall.
TEST(ReportE2E, MakeDashJFourHasNoLoadImbalance) {
  if (!Exists("/usr/bin/make") || !Exists("/usr/bin/gcc"))
    GTEST_SKIP() << "needs make and gcc";
  TempDir dir;
  for (int i = 1; i <= 12; ++i) {
    std::ofstream c(dir.File("f" + std::to_string(i) + ".c"));
    c << "int f" << i << "(int x) { int s = 0; for (int k = 0; k < x; ++k) s += k * " << i
      << "; return s; }\n";
  }
  std::ofstream(dir.File("Makefile"))
      << "OBJS = $(patsubst %.c,%.o,$(wildcard f*.c))\nall: $(OBJS)\n%.o: %.c\n\tgcc -O2 -c $< "
         "-o $@\n";
  std::string why, text;
  json r = RecordAndReport(dir, {"/usr/bin/make", "-C", dir.path(), "-j4"}, &why, &text);
  ASSERT_FALSE(r.is_null()) << why;
  EXPECT_GE(r["summary"]["processes"].get<uint64_t>(), 12u) << text;
  EXPECT_EQ(Finding(r, "imbalance"), nullptr) << text;
  const uint64_t wall = r["summary"]["duration_ns"].get<uint64_t>();
  for (const auto& x : r["diagnosis"])
    EXPECT_LE(x["time_at_stake_ns"].get<uint64_t>(), wall) << x["id"];
  // Dozens of compilers each take make's path and hand theirs back at their exit. Beyond 64
  // locations the shares are not kept: the report says so instead of giving the whole path to
  // make, where it ends (issue 12 item 5).
  const json& cp = r["wait_states"]["critical_path"];
  if (r["locations"].size() > 64) {
    EXPECT_FALSE(cp["shares_kept"].get<bool>());
    EXPECT_TRUE(cp["shares"].empty()) << cp.dump();
    if (cp["length_ns"].get<uint64_t>())
      EXPECT_NE(Unwrapped(text).find("not kept (more than 64 locations)"), std::string::npos)
          << text;
  } else if (cp["length_ns"].get<uint64_t>()) {
    CheckPathSegments(r);
  }
}

// Peers are found: four spinners of one process (oversub, 60 ms) are the imbalance's members,
// not the main thread that joins them.
TEST(ReportE2E, ImbalanceIsMeasuredOverThePeersOfAPool) {
  if (!Exists(BinDir() + "/duty_cycle"))
    GTEST_SKIP() << "needs duty_cycle";
  TempDir dir;
  std::string why, text;
  json r =
      RecordAndReport(dir, {BinDir() + "/duty_cycle", "--seconds", "0.3", "oversub"}, &why, &text);
  ASSERT_FALSE(r.is_null()) << why;
  if (!r["summary"]["has_sched"].get<bool>())
    GTEST_SKIP() << "the trace has no sampler data";
  const json& li = r["wait_states"]["load_imbalance"];
  EXPECT_EQ(li["members"].get<uint64_t>(), 4u) << li.dump();
}

// A late sender injected by the program: rank 0 sleeps before each send that rank 1 already
// waits for. The late-sender time parmon finds on rank 1 is within 5% of what the program
// measured itself.
TEST(ReportE2E, MpiLateSenderWithinFivePercent) {
  if (!Exists(LibDir() + "/libparmon_mpi.so") || !Exists(BinDir() + "/late_sender"))
    GTEST_SKIP() << "needs libparmon_mpi and MPI";
  TempDir dir;
  std::string trace = dir.File("run.ptrace");
  std::vector<std::string> args = {"record", "-o", trace, "--"};
  for (const auto& a : MpiRun(2))
    args.push_back(a);
  args.push_back(BinDir() + "/late_sender");
  args.push_back("10");
  args.push_back("20");
  RunResult rec = Parmon(args, 120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  size_t at = rec.out.find("injected_late_sender_ns ");
  ASSERT_NE(at, std::string::npos) << rec.out;
  double injected = std::stod(rec.out.substr(at + 24));
  ASSERT_GT(injected, 10 * 19e6);  // 10 x 20 ms, less the barrier's skew
  RunResult rep = Parmon({"report", trace, "--format", "json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  json r = json::parse(rep.out);
  double found = -1;
  for (const auto& l : r["locations"])
    if (l["label"] == "rank 1")
      found = l["late_sender_ns"].get<double>();
  ASSERT_GE(found, 0) << rep.out;
  EXPECT_NEAR(found, injected, 0.05 * injected);
  // And the wait-state table names the call.
  bool named = false;
  for (const auto& w : r["wait_states"]["instances"])
    named |=
        w["pattern"] == "late sender" && w["location_label"] == "rank 1" && w["call"] == "MPI_Recv";
  EXPECT_TRUE(named);
}

// parmon scale runs the command per count and reports speedup and efficiency.
TEST(ReportE2E, ScaleRunsEachCount) {
  if (!Exists(BinDir() + "/matmul_gang"))
    GTEST_SKIP() << "needs the matmul_gang example";
  TempDir dir;
  RunResult r = Parmon({"scale", "-n", "1,2", "--dir", dir.path(), "--format", "json", "--",
                        BinDir() + "/matmul_gang", "--n", "120", "--threads", "{n}"},
                       240);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["n"], 1);
  EXPECT_DOUBLE_EQ(j["runs"][0]["speedup"].get<double>(), 1.0);
  EXPECT_GT(j["runs"][1]["duration_ns"].get<double>(), 0);
  EXPECT_TRUE(Exists(dir.File("scale-n2.ptrace")));
}

}  // namespace
}  // namespace parmon::testing
