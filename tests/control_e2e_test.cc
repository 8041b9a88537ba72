// `parmon ctl` end to end: a real recorder running the pipeline example (docs/examples.md),
// steered through its control socket while it runs. Pause/resume leaves no event of the program
// or of the recorder's own sources inside the recorded paused range, whose length the test holds
// against its own clock; the report says paused and lost 0; a period change shows in the
// spacing of the sampler's records; a thread selection keeps only that thread's events; bad
// commands and dead recorders get one-sentence errors and harm nothing.
#include <dirent.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "format/reader.h"
#include "model/merge.h"
#include "model/session.h"
#include "recorder/control.h"
#include "recorder/control_socket.h"
#include "support/e2e.h"

namespace parmon {
namespace {

using format::Kind;
using nlohmann::json;
using testing::BinDir;
using testing::Parmon;
using testing::TempDir;
using Clock = std::chrono::steady_clock;

// A `parmon record` of the pipeline example, long enough to be steered (ended with Ctrl-C).
class Recording {
 public:
  Recording(const TempDir& dir, std::vector<std::string> record_options) {
    trace_ = dir.File("run.ptrace");
    std::vector<std::string> argv = {testing::ParmonBin(), "record", "-q", "-o", trace_};
    argv.insert(argv.end(), record_options.begin(), record_options.end());
    for (const char* a : {"--", "", "--blocks", "1000000", "--rounds", "2"})
      argv.push_back(a);
    argv[argv.size() - 5] = BinDir() + "/pipeline";
    const std::string err = dir.File("record.err");
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = freopen(err.c_str(), "w", stderr);
      (void)f;
      std::vector<char*> a;
      for (auto& s : argv)
        a.push_back(s.data());
      a.push_back(nullptr);
      execv(a[0], a.data());
      _exit(127);
    }
  }
  ~Recording() {
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  const std::string& trace() const { return trace_; }
  // Its control socket appears once the command runs.
  bool WaitReady() {
    auto until = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < until) {
      if (testing::Exists(recorder::ControlSocketPath(pid_)) && Program() > 0)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // The program (the recorder's child) has at least `n` threads.
  bool WaitThreads(int n) {
    auto until = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < until) {
      if (const pid_t p = Program(); p > 0) {
        int tasks = 0;
        if (DIR* d = opendir(("/proc/" + std::to_string(p) + "/task").c_str())) {
          while (dirent* de = readdir(d))
            tasks += de->d_name[0] != '.';
          closedir(d);
        }
        if (tasks >= n)
          return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  pid_t Program() const {
    std::string children = testing::ReadFile("/proc/" + std::to_string(pid_) + "/task/" +
                                             std::to_string(pid_) + "/children");
    return static_cast<pid_t>(atoi(children.c_str()));
  }
  // Ctrl-C: the recorder forwards it to the program and closes the trace.
  int Stop() {
    kill(pid_, SIGINT);
    int status = 0;
    waitpid(pid_, &status, 0);
    waited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  bool waited_ = false;
  std::string trace_;
};

testing::RunResult Ctl(pid_t pid, const std::vector<std::string>& words) {
  std::vector<std::string> args = {"ctl", std::to_string(pid)};
  args.insert(args.end(), words.begin(), words.end());
  return Parmon(args, 60);
}

void Sleep(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

double Ns(Clock::time_point a, Clock::time_point b) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

struct Events {
  std::unique_ptr<format::TraceReader> reader;
  std::unique_ptr<model::Session> session;
  std::vector<format::Event> all;  // payloads not kept
};

Events ReadEvents(const std::string& trace) {
  Events ev;
  auto r = format::TraceReader::Open(trace);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok())
    return ev;
  ev.reader = std::move(*r);
  auto s = model::Session::Over(*ev.reader);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok())
    return ev;
  ev.session = std::move(*s);
  model::Merge merge(*ev.session);
  format::Event e;
  while (merge.Next(&e)) {
    e.payload = {};
    ev.all.push_back(e);
  }
  return ev;
}

// Ends the recording with Ctrl-C (forwarded to the program) and reads its events.
Events StopAndRead(Recording& rec) {
  EXPECT_EQ(rec.Stop(), 128 + SIGINT);
  return ReadEvents(rec.trace());
}

bool IsThread(const format::Definitions& d, uint32_t loc) {
  auto it = d.locations.find(loc);
  return it != d.locations.end() && it->second.type == format::LocationType::kThread;
}

TEST(ControlE2e, PauseLeavesAnExactHoleThatIsNeitherLossNorState) {
  TempDir dir;
  Recording rec(dir, {});
  ASSERT_TRUE(rec.WaitReady()) << testing::ReadFile(dir.File("record.err"));
  // The pipeline's stages run before the pause (a loaded machine may take seconds to start them).
  ASSERT_TRUE(rec.WaitThreads(5)) << testing::ReadFile(dir.File("record.err"));
  Sleep(800);
  // Sends one command; the times just before it and just after its reply.
  auto timed = [&](const std::string& command, const std::string& reply) {
    const auto before = Clock::now();
    auto res = Ctl(rec.pid(), {command});
    const auto after = Clock::now();
    EXPECT_EQ(res.exit_code, 0) << res.err;
    EXPECT_EQ(res.out, reply);
    return std::make_pair(before, after);
  };
  const auto [t0, t1] = timed("pause", "ok: paused\n");
  Sleep(900);
  auto st = Ctl(rec.pid(), {"status"});
  EXPECT_EQ(st.out.rfind("ok: paused", 0), 0u) << st.out << st.err;
  const auto [t2, t3] = timed("resume", "ok: recording\n");
  Sleep(800);
  EXPECT_EQ(rec.Stop(), 128 + SIGINT);
  EXPECT_FALSE(testing::Exists(recorder::ControlSocketPath(rec.pid())))
      << "the socket is removed at exit";

  Events ev = ReadEvents(rec.trace());
  ASSERT_TRUE(ev.session);
  const auto& defs = ev.reader->definitions();
  ASSERT_EQ(defs.paused.size(), 1u);
  const auto [b, e] = defs.paused[0];
  ASSERT_NE(e, UINT64_MAX) << "the resume is recorded";
  // The pause was made between sending it and its reply, the resume likewise: the recorded
  // range lies within what the test saw (2% for the clocks' rates, 1 ms for rounding).
  const double len = static_cast<double>(e - b);
  EXPECT_LE(len, Ns(t0, t3) * 1.02 + 1e6);
  EXPECT_GE(len, Ns(t1, t2) * 0.98 - 1e6);
  uint64_t inside = 0, before = 0, after = 0, sources_inside = 0;
  std::string inside_kinds;
  for (const auto& x : ev.all) {
    if (x.source == format::Source::kRuntime && IsThread(defs, x.location)) {
      // The kinds a pause keeps (a thread's begin and name, definitions; docs/control.md) may
      // lie inside; a thread preempted between its load of the enabled word and its stamp made
      // the others there, and the drain drops them.
      if (x.ts > b && x.ts < e && recorder::KindFamily(x.kind) != 0) {
        ++inside;
        inside_kinds += fmt::format(" {}@+{}ns", x.kind, x.ts - b);
      } else if (x.ts <= b)
        ++before;
      else
        ++after;
    }
    if ((x.source == format::Source::kSampler || x.source == format::Source::kSched) && x.ts > b &&
        x.ts < e)
      ++sources_inside;
  }
  EXPECT_EQ(inside, 0u) << "no program event inside the paused range:" << inside_kinds;
  EXPECT_EQ(sources_inside, 0u) << "the sampler and the switch recorder pause too";
  EXPECT_GT(before, 20u);
  EXPECT_GT(after, 20u) << "recording resumed";

  auto js = Parmon({"report", "--format", "json", rec.trace()});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  json j = json::parse(js.out);
  EXPECT_EQ(j["summary"]["pauses"], 1);
  EXPECT_EQ(j["summary"]["paused_ns"].get<uint64_t>(), e - b);
  EXPECT_EQ(j["summary"]["lost_events"], 0);
  // No thread's states hold the paused time: each thread's states fit in its life less it (a
  // sampled thread's sampler interval that ends after the resume may reach back into the pause:
  // one period, 10 ms, of slack).
  int threads_checked = 0;
  for (const auto& l : j["locations"]) {
    const uint64_t wall = l["wall_ns"].get<uint64_t>();
    const uint64_t start = j["summary"]["session_start_ns"].get<uint64_t>();
    if (l["kind"] != "thread" || start + l["first_ns"].get<uint64_t>() >= b ||
        start + l["last_ns"].get<uint64_t>() <= e)
      continue;  // the threads that live through the pause
    uint64_t sum = 0;
    for (const auto& [k, v] : l["states_ns"].items())
      sum += v.get<uint64_t>();
    const uint64_t slack = l["state_source"] == "inferred" ? 1000 : 11'000'000;
    EXPECT_LE(sum, wall - (e - b) + slack) << l["label"] << " " << l["state_source"];
    ++threads_checked;
  }
  EXPECT_GE(threads_checked, 4);
  auto text = Parmon({"report", rec.trace()});
  EXPECT_NE(testing::Unwrapped(text.out).find("paused "), std::string::npos) << text.out;
  EXPECT_NE(testing::Unwrapped(text.out).find("in 1 pause"), std::string::npos) << text.out;
  auto dump = Parmon({"dump", rec.trace()});
  EXPECT_NE(dump.out.find("ControlPause"), std::string::npos);
  EXPECT_NE(dump.out.find("ControlResume"), std::string::npos);
}

// The change is made by the time the reply comes: round trips of the local channel, in process.
TEST(ControlE2e, CommandsTakeEffectWithin100Ms) {
  TempDir dir;
  Recording rec(dir, {});
  ASSERT_TRUE(rec.WaitReady()) << testing::ReadFile(dir.File("record.err"));
  const std::string sock = recorder::ControlSocketPath(rec.pid());
  std::vector<double> ms;
  for (int i = 0; i < 10; ++i) {
    for (const char* c : {"pause", "resume"}) {
      auto t0 = Clock::now();
      auto reply = recorder::SendControlCommand(sock, c, 10000);
      ms.push_back(Ns(t0, Clock::now()) / 1e6);
      ASSERT_TRUE(reply.ok()) << reply.status().message();
      EXPECT_EQ(reply->rfind("ok: ", 0), 0u) << *reply;
    }
    Sleep(20);
  }
  std::sort(ms.begin(), ms.end());
  printf("control round trip: median %.3f ms, max %.3f ms (20 pause/resume)\n", ms[ms.size() / 2],
         ms.back());
  EXPECT_LE(ms[ms.size() / 2], 100.0) << "median round trip";
  Events ev = StopAndRead(rec);
  ASSERT_TRUE(ev.session);
  EXPECT_EQ(ev.reader->definitions().paused.size(), 10u);
}

// Median gap between a location's sampler records in [from, to).
double MedianGapMs(const std::vector<format::Event>& all, uint64_t from, uint64_t to) {
  std::map<std::pair<uint32_t, uint16_t>, std::vector<uint64_t>> times;
  for (const auto& x : all)
    if (x.source == format::Source::kSampler && x.ts >= from && x.ts < to)
      times[{x.location, x.kind}].push_back(x.ts);
  std::vector<double> gaps;
  for (auto& [k, t] : times)
    for (size_t i = 1; i < t.size(); ++i)
      gaps.push_back(static_cast<double>(t[i] - t[i - 1]) / 1e6);
  if (gaps.empty())
    return 0;
  std::sort(gaps.begin(), gaps.end());
  return gaps[gaps.size() / 2];
}

TEST(ControlE2e, PeriodChangeShowsInThePeriodicRecordsSpacing) {
  TempDir dir;
  Recording rec(dir, {"--mode", "periodic", "-t", "20ms"});
  ASSERT_TRUE(rec.WaitReady()) << testing::ReadFile(dir.File("record.err"));
  Sleep(1000);
  auto p = Ctl(rec.pid(), {"period", "100ms"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(p.out, "ok: period 100 ms\n");
  Sleep(1500);
  Events ev = StopAndRead(rec);
  ASSERT_TRUE(ev.session);
  const auto& marks = ev.reader->definitions().control;
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0].kind, static_cast<uint16_t>(Kind::kControlPeriod));
  EXPECT_EQ(marks[0].arg, 100'000'000u);
  const uint64_t at = marks[0].ts;
  double before = MedianGapMs(ev.all, 0, at);
  double after = MedianGapMs(ev.all, at + 150'000'000, UINT64_MAX);
  EXPECT_GE(before, 10.0);
  EXPECT_LE(before, 40.0);
  EXPECT_GE(after, 70.0);
  EXPECT_LE(after, 200.0);
}

TEST(ControlE2e, ThreadSelectionKeepsOnlyThatThread) {
  TempDir dir;
  Recording rec(dir, {});
  ASSERT_TRUE(rec.WaitReady()) << testing::ReadFile(dir.File("record.err"));
  const pid_t prog = rec.Program();
  // The pipeline's four stage threads.
  std::vector<pid_t> tids;
  for (int i = 0; i < 500 && tids.size() < 4; ++i) {
    tids.clear();
    if (DIR* d = opendir(("/proc/" + std::to_string(prog) + "/task").c_str())) {
      while (dirent* x = readdir(d))
        if (atoi(x->d_name) > 0 && atoi(x->d_name) != prog)
          tids.push_back(atoi(x->d_name));
      closedir(d);
    }
    Sleep(10);
  }
  ASSERT_GE(tids.size(), 4u);
  std::sort(tids.begin(), tids.end());
  const pid_t chosen = tids[1];
  Sleep(300);
  auto s = Ctl(rec.pid(), {"threads", std::to_string(chosen)});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("threads " + std::to_string(chosen)), std::string::npos) << s.out;
  Sleep(800);
  auto a = Ctl(rec.pid(), {"threads", "all"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  Sleep(400);

  Events ev = StopAndRead(rec);
  ASSERT_TRUE(ev.session);
  const auto& defs = ev.reader->definitions();
  ASSERT_EQ(defs.control.size(), 2u);
  EXPECT_EQ(defs.control[0].payload, std::to_string(chosen));
  EXPECT_EQ(defs.control[1].payload, "");
  // Events are kept or dropped by their own time: the selection holds exactly between the two
  // records, whenever the recorder drained the events.
  const uint64_t from = defs.control[0].ts, to = defs.control[1].ts;
  std::map<uint32_t, uint64_t> regions_inside, regions_after;
  for (const auto& x : ev.all) {
    if (x.source != format::Source::kRuntime ||
        (x.kind_enum() != Kind::kRegionEnter && x.kind_enum() != Kind::kRegionLeave))
      continue;
    uint32_t tid = defs.locations.at(x.location).tid;
    if (x.ts > from && x.ts < to)
      ++regions_inside[tid];
    if (x.ts > defs.control[1].ts + 50'000'000)
      ++regions_after[tid];
  }
  for (const auto& [tid, n] : regions_inside)
    EXPECT_EQ(tid, static_cast<uint32_t>(chosen)) << n << " events of unselected thread " << tid;
  EXPECT_GT(regions_inside[chosen], 10u);
  EXPECT_GE(regions_after.size(), 3u) << "every stage records again after threads all";
  auto js = Parmon({"report", "--format", "json", rec.trace()});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  EXPECT_EQ(json::parse(js.out)["summary"]["lost_events"], 0) << "deselection is not loss";
}

TEST(ControlE2e, StreamSelectionDropsTheFamiliesLeftOut) {
  TempDir dir;
  Recording rec(dir, {});
  ASSERT_TRUE(rec.WaitReady()) << testing::ReadFile(dir.File("record.err"));
  Sleep(300);
  auto s = Ctl(rec.pid(), {"streams", "sched"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("streams sched"), std::string::npos) << s.out;
  Sleep(800);
  ASSERT_EQ(Ctl(rec.pid(), {"streams", "all"}).exit_code, 0);
  Sleep(400);
  Events ev = StopAndRead(rec);
  ASSERT_TRUE(ev.session);
  const auto& marks = ev.reader->definitions().control;
  ASSERT_EQ(marks.size(), 2u);
  EXPECT_EQ(marks[0].arg, 8u);   // sched
  EXPECT_EQ(marks[1].arg, 15u);  // all
  const uint64_t from = marks[0].ts, to = marks[1].ts;
  uint64_t regions = 0, sampler = 0, regions_after = 0;
  for (const auto& x : ev.all) {
    const bool region = x.kind_enum() == Kind::kRegionEnter || x.kind_enum() == Kind::kRegionLeave;
    if (x.ts > from && x.ts < to) {
      regions += region;
      sampler += x.source == format::Source::kSampler;
    }
    regions_after += region && x.ts > marks[1].ts + 50'000'000;
  }
  EXPECT_EQ(regions, 0u) << "regions were left out";
  EXPECT_GT(sampler, 0u) << "the sampler's records were kept";
  EXPECT_GT(regions_after, 10u) << "streams all records regions again";
}

TEST(ControlE2e, BadCommandsAreOneSentenceAndHarmNothing) {
  TempDir dir;
  Recording rec(dir, {});
  ASSERT_TRUE(rec.WaitReady()) << testing::ReadFile(dir.File("record.err"));
  // Checked by parmon ctl before sending: usage error.
  auto bad = Ctl(rec.pid(), {"jump"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  EXPECT_NE(bad.err.find("unknown command 'jump'"), std::string::npos) << bad.err;
  // Sent as is to the socket: the recorder answers with one error line.
  const std::string sock = recorder::ControlSocketPath(rec.pid());
  const std::vector<std::string> bad_lines = {"jump", "period -3", "threads 1,,2",
                                              std::string(3000, 'x'), "streams \x01\x02"};
  for (const std::string& line : bad_lines) {
    auto reply = recorder::SendControlCommand(sock, line, 10000);
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_EQ(reply->rfind("error: ", 0), 0u) << *reply;
  }
  // A client that never sends its line, and one that sends 64 KiB without a newline.
  auto silent = recorder::SendControlCommand(sock, "", 100);  // sends just "\n": an error
  ASSERT_TRUE(silent.ok());
  EXPECT_EQ(silent->rfind("error: empty command", 0), 0u) << *silent;
  auto huge = recorder::SendControlCommand(sock, std::string(65536, 'y'), 10000);
  EXPECT_TRUE(!huge.ok() || huge->rfind("error: ", 0) == 0);
  auto status = Ctl(rec.pid(), {"status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(status.out.rfind("ok: recording", 0), 0u) << status.out;
  auto list = Parmon({"ctl", "--list"});
  EXPECT_NE(list.out.find(std::to_string(rec.pid())), std::string::npos) << list.out;
  EXPECT_EQ(rec.Stop(), 128 + SIGINT);
  auto js = Parmon({"report", "--format", "json", rec.trace()});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  EXPECT_EQ(json::parse(js.out)["summary"]["pauses"], 0);
}

TEST(ControlE2e, DeadOrMissingRecorderIsOneSentence) {
  TempDir dir;
  // A pid that is no process (pid_max is at most 2^22).
  auto none = Parmon({"ctl", "99999999", "pause"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_EQ(std::count(none.err.begin(), none.err.end(), '\n'), 1) << none.err;
  EXPECT_NE(none.err.find("no process 99999999"), std::string::npos) << none.err;
  // A live process that is not a recorder (this test).
  auto notrec = Parmon({"ctl", std::to_string(getpid()), "status"});
  EXPECT_EQ(notrec.exit_code, 1);
  EXPECT_NE(notrec.err.find("is not a parmon recorder"), std::string::npos) << notrec.err;
  // The same, when a recorder that was killed left its socket file under this pid: nothing
  // listens there, and this process is still not a recorder.
  {
    const std::string path = recorder::ControlSocketPath(getpid());
    mkdir(recorder::ControlSocketDir().c_str(), 0700);
    struct stat st;
    const bool existed = stat(path.c_str(), &st) == 0;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    if (!existed) {
      ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << path;
    }
    close(fd);  // bound, never listened: the file stays, as a killed recorder leaves it
    auto stale = Parmon({"ctl", std::to_string(getpid()), "status"});
    unlink(path.c_str());
    EXPECT_EQ(stale.exit_code, 1);
    EXPECT_EQ(std::count(stale.err.begin(), stale.err.end(), '\n'), 1) << stale.err;
    EXPECT_NE(stale.err.find("is not a parmon recorder"), std::string::npos) << stale.err;
  }
  // A socket path nobody listens on.
  auto gone = Parmon({"ctl", dir.File("gone.ctl"), "status"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.err.find("no recorder listens on"), std::string::npos) << gone.err;
  auto usage = Parmon({"ctl", "12"});
  EXPECT_EQ(usage.exit_code, 2);
  auto remote = Parmon({"ctl", "127.0.0.1:1", "s1", "pause"});
  EXPECT_EQ(remote.exit_code, 1);
  EXPECT_EQ(std::count(remote.err.begin(), remote.err.end(), '\n'), 1) << remote.err;
}

}  // namespace
}  // namespace parmon
