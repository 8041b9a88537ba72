#include "stress/stress_support.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "format/reader.h"
#include "model/merge.h"
#include "model/session.h"
#include "support/e2e.h"

namespace parmon::stress {

double Scale() {
  const char* s = getenv("PARMON_STRESS_SCALE");
  double v = s != nullptr ? atof(s) : 1.0;
  return v > 0 ? v : 1.0;
}

namespace {

// VmRSS, VmHWM and RssAnon of a live process, in KiB (0 when gone).
void ReadStatus(int pid, uint64_t* rss, uint64_t* hwm, uint64_t* anon) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    auto value = [&] { return std::strtoull(line.c_str() + line.find(':') + 1, nullptr, 10); };
    if (line.rfind("VmRSS:", 0) == 0)
      *rss = value();
    else if (line.rfind("VmHWM:", 0) == 0)
      *hwm = value();
    else if (line.rfind("RssAnon:", 0) == 0)
      *anon = value();
  }
}

}  // namespace

WatchedRun RunWatched(const std::vector<std::string>& args,
                      const std::string& scratch_dir,
                      double timeout_s,
                      int period_ms,
                      const std::function<void(int)>& on_tick) {
  WatchedRun w;
  const std::string out_path = scratch_dir + "/recorder.out",
                    err_path = scratch_dir + "/recorder.err";
  std::vector<std::string> argv = {testing::ParmonBin()};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> v;
    for (auto& a : argv)
      v.push_back(a.data());
    v.push_back(nullptr);
    execv(v[0], v.data());
    _exit(127);
  }
  if (pid < 0)
    return w;
  w.pid = pid;
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  int status = 0;
  rusage ru{};
  while (true) {
    pid_t r = wait4(pid, &status, WNOHANG, &ru);
    if (r == pid)
      break;
    MemSample s;
    s.t_s = elapsed();
    uint64_t hwm = 0;
    ReadStatus(pid, &s.rss_kib, &hwm, &s.anon_kib);
    if (s.rss_kib > 0) {
      w.samples.push_back(s);
      w.polled_hwm_kib = std::max(w.polled_hwm_kib, hwm);
      w.polled_anon_kib = std::max(w.polled_anon_kib, s.anon_kib);
    }
    if (on_tick)
      on_tick(pid);
    if (s.t_s > timeout_s && !w.timed_out) {
      w.timed_out = true;
      kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(period_ms));
  }
  w.wall_s = elapsed();
  w.rusage_maxrss_kib = static_cast<uint64_t>(ru.ru_maxrss);
  w.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  w.err = testing::ReadFile(err_path);
  return w;
}

TraceCensus TakeCensus(const std::string& trace) {
  using format::Kind;
  using format::Source;
  TraceCensus c;
  auto reader = format::TraceReader::Open(trace);
  if (!reader.ok()) {
    c.error = reader.status().message();
    return c;
  }
  const format::TraceReader& r = **reader;
  c.closed_cleanly = r.closed_cleanly();
  c.total_events = r.total_events();
  c.overwritten_events = std::stoull(r.SessionValue("overwritten_events", "0"));
  const auto& defs = r.definitions();
  for (const auto& [pid, p] : defs.processes)
    c.process_ppid[pid] = p.ppid;
  std::map<uint32_t, ThreadCensus*> by_location;
  for (const auto& [id, loc] : defs.locations) {
    if (loc.type != format::LocationType::kThread)
      continue;
    ThreadCensus& t = c.threads[loc.tid];
    t.pid = loc.pid;
    t.tid = loc.tid;
    t.name = loc.name;
    by_location[id] = &t;
  }
  auto session = model::Session::Over(r);
  if (!session.ok()) {
    c.error = session.status().message();
    return c;
  }
  model::Merge cursor(**session);
  format::Event e;
  while (cursor.Next(&e)) {
    auto it = by_location.find(e.location);
    if (it == by_location.end())
      continue;
    ThreadCensus& t = *it->second;
    const Kind k = e.kind_enum();
    if (e.source == Source::kSched)
      c.any_sched = true;
    if (k == Kind::kTaskStart)
      ++t.task_start;
    else if (k == Kind::kTaskExit)
      ++t.task_exit;
    const bool program_loss = (k == Kind::kLost || k == Kind::kRingLost) &&
                              (e.source == Source::kRuntime || e.source == Source::kRecorder);
    if (program_loss) {
      t.lost += e.args[0];
      if (k == Kind::kRingLost)
        t.evicted += e.args[0];
      if (t.first_counter >= 0)
        t.lost_after_first_counter += e.args[0];
      continue;
    }
    if (e.source != Source::kRuntime)
      continue;
    ++t.program_events;
    if (k == Kind::kRegionEnter || k == Kind::kRegionLeave)
      ++t.regions;
    else if (k == Kind::kMarker)
      ++t.markers;
    else if (k == Kind::kCounterInt) {
      ++t.counters;
      const auto v = static_cast<int64_t>(e.args[1]);
      if (t.first_counter < 0)
        t.first_counter = v;
      else if (v <= t.last_counter)
        t.counters_increase = false;
      t.last_counter = v;
    }
  }
  c.ok = true;
  return c;
}

const ThreadCensus* ThreadNamed(const TraceCensus& c, const std::string& name) {
  for (const auto& [tid, t] : c.threads)
    if (t.name == name)
      return &t;
  return nullptr;
}

std::string Prog(const std::string& name) {
  return testing::BinDir() + "/" + name;
}

std::map<std::string, long> SideValues(const std::string& path) {
  std::map<std::string, long> kv;
  std::istringstream in(testing::ReadFile(path));
  std::string word;
  while (in >> word) {
    auto eq = word.find('=');
    if (eq != std::string::npos)
      kv[word.substr(0, eq)] = std::stol(word.substr(eq + 1));
  }
  return kv;
}

std::vector<long> SideNumbers(const std::string& path) {
  std::vector<long> v;
  std::istringstream in(testing::ReadFile(path));
  std::string line;
  std::getline(in, line);  // the key=value line
  while (std::getline(in, line))
    if (!line.empty())
      v.push_back(std::stol(line));
  return v;
}

}  // namespace parmon::stress
