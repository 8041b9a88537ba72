// The OpenMP section of the text report and the "openmp" object of the JSON report
// (docs/openmp.md, docs/report-json.md). Empty text and a null-free object with "present": false
// when the trace has no OpenMP events.
#include "analysis/omp_views.h"

#include <algorithm>

#include <fmt/format.h>

#include "analysis/units.h"

namespace parmon::analysis {
namespace {

constexpr size_t kTextRegions = 5;  // the heaviest constructs; the JSON has them all

std::string Cut(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 1) + "~";
}

void ThreadTable(const OmpProfile& p, std::string* out) {
  *out += fmt::format("{:<24} {:<6} {:>5} {:>8} {:>6} {:>6} {:>6} {:>6} {:>6}\n", "THREAD", "ROLE",
                      "RGNS", "SPAN", "work", "barr", "lock", "task", "out");
  for (const auto& t : p.threads)
    *out += fmt::format("{:<24} {:<6} {:>5} {:>8} {:>6} {:>6} {:>6} {:>6} {:>6}\n",
                        Cut(t.label, 24), t.master ? "master" : "worker", FormatCount(t.regions),
                        FormatDuration(t.span_ns), FormatPercent(t.work_ns, t.span_ns),
                        FormatPercent(t.barrier_ns, t.span_ns), FormatPercent(t.lock_ns, t.span_ns),
                        FormatPercent(t.task_ns, t.span_ns),
                        FormatPercent(t.master ? t.serial_ns : t.idle_ns, t.span_ns));
}

void RegionTable(const OmpProfile& p, std::string* out) {
  *out += fmt::format("\n{:<26} {:>6} {:>5} {:>9} {:>9} {:>9} {:>6}\n", "PARALLEL REGION", "COUNT",
                      "TEAM", "WALL", "MAX WORK", "LOST", "IMBAL");
  for (size_t i = 0; i < p.regions.size() && i < kTextRegions; ++i) {
    const auto& r = p.regions[i];
    *out += fmt::format("{:<26} {:>6} {:>5} {:>9} {:>9} {:>9} {:>6.2f}\n", Cut(r.construct, 26),
                        FormatCount(r.instances), r.team_size, FormatDuration(r.wall_ns),
                        FormatDuration(r.max_work_ns), FormatDuration(r.lost_ns), r.imbalance);
    std::string work = "  work by thread:";
    for (size_t k = 0; k < r.thread_work_ns.size() && k < 7; ++k)
      work += fmt::format(" {}", FormatDuration(r.thread_work_ns[k]));
    if (r.thread_work_ns.size() > 7)
      work += " ...";
    *out += work + "\n";
  }
  if (p.regions.size() > kTextRegions)
    *out += fmt::format("... {} more (see --format json)\n", p.regions.size() - kTextRegions);
}

}  // namespace

std::string RenderOmpText(const OmpProfile& p) {
  if (!p.ompt && !p.libgomp)
    return "";
  std::string title = "OpenMP";
  std::string out = fmt::format("\n== {} {}\n", title, std::string(76 - title.size(), '='));
  if (!p.note.empty())
    out += p.note + "\n";
  if (!p.threads.empty()) {
    ThreadTable(p, &out);
    out +=
        "(shares of each thread's span: work in regions, barrier and lock waits, explicit tasks\n"
        " (part of work), out of regions: serial on the master, idle on a worker)\n";
  }
  if (!p.regions.empty())
    RegionTable(p, &out);
  return out;
}

nlohmann::json OmpJson(const OmpProfile& p) {
  nlohmann::json j;
  j["present"] = p.ompt || p.libgomp;
  j["ompt"] = p.ompt;
  j["runtime"] = p.runtime;
  j["libgomp"] = p.libgomp;
  j["note"] = p.note;
  nlohmann::json threads = nlohmann::json::array();
  for (const auto& t : p.threads)
    threads.push_back({{"location", t.location},
                       {"label", t.label},
                       {"pid", t.pid},
                       {"tid", t.tid},
                       {"master", t.master},
                       {"regions", t.regions},
                       {"span_ns", t.span_ns},
                       {"region_ns", t.region_ns},
                       {"work_ns", t.work_ns},
                       {"barrier_ns", t.barrier_ns},
                       {"barrier_implicit_ns", t.barrier_implicit_ns},
                       {"sync_other_ns", t.sync_other_ns},
                       {"lock_ns", t.lock_ns},
                       {"task_ns", t.task_ns},
                       {"idle_ns", t.idle_ns},
                       {"serial_ns", t.serial_ns}});
  j["threads"] = threads;
  nlohmann::json regions = nlohmann::json::array();
  for (const auto& r : p.regions)
    regions.push_back({{"construct", r.construct},
                       {"pid", r.pid},
                       {"instances", r.instances},
                       {"team_size", r.team_size},
                       {"wall_ns", r.wall_ns},
                       {"max_work_ns", r.max_work_ns},
                       {"mean_work_ns", r.mean_work_ns},
                       {"imbalance", r.imbalance},
                       {"lost_ns", r.lost_ns},
                       {"thread_work_ns", r.thread_work_ns},
                       {"thread_barrier_ns", r.thread_barrier_ns},
                       {"thread_barrier_implicit_ns", r.thread_barrier_implicit_ns}});
  j["regions"] = regions;
  return j;
}

}  // namespace parmon::analysis
