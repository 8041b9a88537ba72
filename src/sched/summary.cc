#include "sched/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "model/merge.h"
#include "sched/classify.h"

namespace parmon::sched {

using format::Kind;

SchedSummary Summarize(const model::Session& session) {
  SchedSummary s;
  // Attached to a running process: a thread that was there before gets its CPU time of the
  // recorded window (its last reading less its first), as the report's states give it, not of
  // its whole life. One started while recorded has a TaskStart before its first reading.
  const bool attached = session.info().extra.count("attached_pid") != 0;
  std::map<uint32_t, uint64_t> first_cpu;  // by location: the first reading, when pre-existing
  std::set<uint32_t> born;                 // locations with a TaskStart before any reading
  model::MergeFilter f;
  f.sources = std::set<format::Source>{format::Source::kSched, format::Source::kSampler};
  model::Merge merge(session, f);
  merge.Run([&](const format::Event& e, model::StreamIndex) {
    switch (e.kind_enum()) {
      case Kind::kThreadStates: {
        auto& t = s.threads[e.location];
        for (int i = 0; i < kThreadStateCount && i < e.nargs; ++i)
          t.state_ns[i] += e.args[i];
        break;
      }
      case Kind::kThreadSample: {
        uint64_t base = 0;
        if (attached && !born.count(e.location))
          base = first_cpu.emplace(e.location, e.args[0]).first->second;
        s.threads[e.location].cpu_time_ns = e.args[0] - std::min(e.args[0], base);
        break;
      }
      case Kind::kTaskStart:
        if (!first_cpu.count(e.location))
          born.insert(e.location);
        break;
      case Kind::kSwitchOut:
        ++(e.args[1] ? s.threads[e.location].switches_preempted
                     : s.threads[e.location].switches_blocked);
        break;
      case Kind::kMigrate:
        ++s.threads[e.location].migrations;
        break;
      case Kind::kSwitchCounts: {
        auto& t = s.threads[e.location];
        t.switches_preempted += e.args[1];
        t.switches_blocked += e.args[2];
        t.migrations += e.args[3];
        break;
      }
      case Kind::kCpuSample: {
        auto& c = s.cpus[e.location];
        c.busy_ns += e.args[0];
        c.idle_ns += e.args[1];
        c.iowait_ns += e.args[2];
        c.steal_ns += e.args[3];
        break;
      }
      case Kind::kSchedLost:
        s.lost_switch_records += e.args[0];
        break;
      default:
        break;
    }
  });
  return s;
}

namespace {

double Percent(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0;
}

}  // namespace

void PrintSummary(const model::Session& session, const SchedSummary& s) {
  if (s.empty())
    return;
  fmt::print("\nthread states (% of sampled time; switches: blocked/preempted)\n");
  fmt::print(
      "{:>5} {:>8} {:<16} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>9} {:>13} {:>6}\n",
      "LOC", "TID", "NAME", "RUN", "QUEUE", "COMM", "LOCK", "TIMER", "IO", "STOP", "OTHER",
      "CPU(s)", "SWITCHES", "MIGR");
  for (const auto& [loc, t] : s.threads) {
    const format::LocationDef* l = session.Location(loc);
    uint64_t total = 0;
    for (uint64_t v : t.state_ns)
      total += v;
    std::string row =
        fmt::format("{:>5} {:>8} {:<16}", loc, l ? l->tid : 0, l ? l->name.substr(0, 16) : "");
    for (uint64_t v : t.state_ns)
      row += fmt::format(" {:>6.1f}", Percent(v, total));
    fmt::print("{} {:>9.3f} {:>13} {:>6}\n", row, static_cast<double>(t.cpu_time_ns) / 1e9,
               fmt::format("{}/{}", t.switches_blocked, t.switches_preempted), t.migrations);
  }
  if (!s.cpus.empty()) {
    fmt::print("\ncpu utilisation (whole machine, from /proc/stat)\n");
    fmt::print("{:>5} {:<8} {:>7} {:>7} {:>7} {:>7}\n", "LOC", "CPU", "BUSY%", "IDLE%", "IOWAIT%",
               "STEAL%");
    for (const auto& [loc, c] : s.cpus) {
      const format::LocationDef* l = session.Location(loc);
      uint64_t total = c.busy_ns + c.idle_ns + c.iowait_ns + c.steal_ns;
      fmt::print("{:>5} {:<8} {:>7.1f} {:>7.1f} {:>7.1f} {:>7.1f}\n", loc, l ? l->name : "",
                 Percent(c.busy_ns, total), Percent(c.idle_ns, total), Percent(c.iowait_ns, total),
                 Percent(c.steal_ns, total));
    }
  }
  if (s.lost_switch_records)
    fmt::print("\ncontext-switch records lost by the kernel: {}\n", s.lost_switch_records);
}

nlohmann::json SummaryJson(const model::Session& session, const SchedSummary& s) {
  nlohmann::json j;
  nlohmann::json threads = nlohmann::json::array();
  for (const auto& [loc, t] : s.threads) {
    const format::LocationDef* l = session.Location(loc);
    nlohmann::json tj{{"location", loc}, {"tid", l ? l->tid : 0}, {"pid", l ? l->pid : 0}};
    for (int i = 0; i < kThreadStateCount; ++i)
      tj["state_ns"][ThreadStateName(static_cast<ThreadState>(i))] = t.state_ns[i];
    tj["cpu_time_ns"] = t.cpu_time_ns;
    tj["switches_blocked"] = t.switches_blocked;
    tj["switches_preempted"] = t.switches_preempted;
    tj["migrations"] = t.migrations;
    threads.push_back(tj);
  }
  nlohmann::json cpus = nlohmann::json::array();
  for (const auto& [loc, c] : s.cpus) {
    const format::LocationDef* l = session.Location(loc);
    cpus.push_back({{"location", loc},
                    {"cpu", l ? l->tid : 0},
                    {"busy_ns", c.busy_ns},
                    {"idle_ns", c.idle_ns},
                    {"iowait_ns", c.iowait_ns},
                    {"steal_ns", c.steal_ns}});
  }
  j["threads"] = threads;
  j["cpus"] = cpus;
  j["lost_switch_records"] = s.lost_switch_records;
  return j;
}

}  // namespace parmon::sched
