// Rule: a process crashed (a fault, or a signal it sent itself: abort, raise). What matters to
// the user is which rank died of what and when, and what the others did from then on: in an MPI
// job they wait in their MPI calls for it until the launcher tears them down, time the report
// would otherwise show as theirs.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/rules/rules.h"
#include "analysis/units.h"

namespace parmon::analysis::rules {
namespace {

// "rank 0 waited in MPI_Barrier for 1.1 s until SIGTERM ended it"
std::string Afterwards(const ProcessDeath& d, const ProcessDeath::After& a) {
  const uint64_t after = a.until > d.ts ? a.until - d.ts : 0;
  std::string s =
      a.mpi_call.empty()
          ? fmt::format("{} went on for {}", a.label, FormatDuration(after))
          : fmt::format("{} waited in {} for {}", a.label, a.mpi_call, FormatDuration(after));
  if (a.end_signal)
    s += fmt::format(" until {} ended it", a.end_signal_name);
  return s;
}

}  // namespace

void CrashRule(const Results& r, const Graph&, std::vector<Finding>* out) {
  const Summary& s = r.summary;
  for (const ProcessDeath& d : r.deaths) {
    if (!d.crashed)
      continue;
    const std::string& meaning = d.signal_meaning;
    Finding f;
    f.id = "crash";
    f.text = fmt::format("{} (pid {}) crashed at {}: {}{}", d.label, d.pid,
                         FormatDuration(d.ts - std::min(d.ts, s.session_start)), d.signal_name,
                         meaning.empty() ? "" : " (" + meaning + ")");
    uint64_t stake = 0;
    std::string after, evidence;
    for (size_t i = 0; i < d.others.size(); ++i) {
      const ProcessDeath::After& a = d.others[i];
      stake = std::max(stake, a.until > d.ts ? a.until - d.ts : 0);
      if (i < 4)
        after += (after.empty() ? "" : "; ") + Afterwards(d, a);
      evidence += fmt::format(
          "{}{}: {}{}, last event at {}", evidence.empty() ? "" : "; ", a.label,
          a.mpi_call.empty()
              ? "outside MPI"
              : "in " + a.mpi_call + " since " +
                    FormatDuration(a.call_since - std::min(a.call_since, s.session_start)),
          a.end_signal ? ", ended by " + a.end_signal_name : "",
          FormatDuration(a.until - std::min(a.until, s.session_start)));
    }
    if (d.others.size() > 4)
      after += fmt::format("; {} more", d.others.size() - 4);
    if (!after.empty())
      f.text += "; afterwards " + after;
    f.evidence = fmt::format("signal {}, si_code {} ({}); at the crash: {}", d.signal, d.code,
                             d.code > 0 ? "a fault, from the kernel" : "sent by the process itself",
                             evidence.empty() ? "no other process recorded" : evidence);
    // What the run spent after the crash: the others' time until they ended (the run's end
    // when none is recorded).
    f.time_at_stake_ns = stake ? stake : (s.window_end > d.ts ? s.window_end - d.ts : 0);
    f.thread_time_ns = f.time_at_stake_ns;
    f.subjects = {d.label};
    out->push_back(std::move(f));
  }
}

}  // namespace parmon::analysis::rules
