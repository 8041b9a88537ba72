// The text view: six sections in the order a person reads them (summary and losses first, then
// the diagnosis, then the evidence tables), every line within 80 columns.
#include <algorithm>

#include <fmt/format.h>

#include "analysis/omp_views.h"
#include "analysis/units.h"
#include "analysis/views.h"

namespace parmon::analysis {
namespace {

class Out {
 public:
  explicit Out(bool color) : color_(color) {}
  void Line(const std::string& s = "") { text_ += s + "\n"; }
  std::string Bold(const std::string& s) const { return Wrap("1", s); }
  std::string Red(const std::string& s) const { return Wrap("1;31", s); }
  std::string Yellow(const std::string& s) const { return Wrap("33", s); }
  std::string Dim(const std::string& s) const { return Wrap("2", s); }
  void Section(const std::string& title) {
    Line();
    Line(Bold(
        fmt::format("== {} {}", title, std::string(std::max<size_t>(3, 76 - title.size()), '='))));
  }
  // Words wrapped at 80 columns, later lines indented.
  void Wrapped(const std::string& first_prefix, const std::string& text, size_t indent) {
    std::string line = first_prefix;
    size_t visible = first_prefix.size();
    size_t start = 0;
    while (start < text.size()) {
      size_t sp = text.find(' ', start);
      std::string word =
          text.substr(start, sp == std::string::npos ? std::string::npos : sp - start);
      start = sp == std::string::npos ? text.size() : sp + 1;
      if (visible + word.size() + 1 > 80 && visible > indent) {
        Line(line);
        line = std::string(indent, ' ');
        visible = indent;
      }
      if (visible > indent && line.back() != ' ') {
        line += ' ';
        ++visible;
      }
      line += word;
      visible += word.size();
    }
    Line(line);
  }
  std::string& text() { return text_; }

 private:
  std::string Wrap(const char* code, const std::string& s) const {
    return color_ ? fmt::format("\033[{}m{}\033[0m", code, s) : s;
  }
  bool color_;
  std::string text_;
};

std::string Cut(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 1) + "~";
}

// A location's label cut to n: a "name (tid)" keeps its tid and loses the name's end, so two
// rows of one program ("python3 (1992~") can still be told apart: "python3-wo~ (19925)".
std::string CutLabel(const std::string& s, size_t n) {
  if (s.size() <= n)
    return s;
  size_t open = s.rfind(" (");
  if (open == std::string::npos || s.back() != ')' || s.size() - open + 2 > n)
    return Cut(s, n);
  return s.substr(0, n - (s.size() - open) - 1) + "~" + s.substr(open);
}

// The width of a column of labels: the longest, from the table's usual width up to kMaxLabel.
constexpr size_t kMaxLabel = 32;
template <typename Range, typename Get>
size_t LabelWidth(const Range& rows, size_t min_width, Get get) {
  size_t w = min_width;
  for (const auto& x : rows)
    w = std::max(w, get(x).size());
  return std::min(w, std::max(min_width, kMaxLabel));
}

std::string Sparkline(const std::vector<double>& v, size_t width) {
  static const char* const kBars[] = {" ",      "\u2581", "\u2582", "\u2583", "\u2584",
                                      "\u2585", "\u2586", "\u2587", "\u2588"};
  std::string out;
  size_t n = v.size();
  size_t cells = std::min(width, n);
  for (size_t c = 0; c < cells; ++c) {
    // Each cell averages the intervals it covers.
    size_t b = c * n / cells, e = std::max(b + 1, (c + 1) * n / cells);
    double sum = 0;
    for (size_t i = b; i < e; ++i)
      sum += v[i];
    double x = sum / static_cast<double>(e - b);
    out += kBars[std::clamp(static_cast<int>(std::lround(x * 8)), 0, 8)];
  }
  return out;
}

std::string Rel(const Summary& s, uint64_t ts) {
  return FormatDuration(ts - s.session_start);
}

// Which ranks were put on rank 0's clock, and by how much.
void TextClocks(Out& o, const Summary& s) {
  // Ranks recorded on other clocks, put on rank 0's before their messages were matched.
  auto signed_duration = [](int64_t v) {
    return (v < 0 ? "-" : "+") + FormatDuration(static_cast<uint64_t>(v < 0 ? -v : v));
  };
  std::string clocks;
  for (const auto& c : s.clock_offsets) {
    if (!c.offset_ns && !c.last_offset_ns)
      continue;
    std::string first = signed_duration(c.offset_ns), last = signed_duration(c.last_offset_ns);
    clocks += fmt::format("{}rank {} {}", clocks.empty() ? "" : ", ", c.rank, first);
    if (last != first)  // drift
      clocks += fmt::format(" to {}", last);
  }
  o.Wrapped("clocks     ", clocks + " against rank 0, aligned before matching messages", 11);
}

// Lost, overwritten and damaged events: the figures below undercount.
}  // namespace

std::string LostSentence(uint64_t lost_events) {
  return lost_events == 1 ? "1 event was lost"
                          : fmt::format("{} events were lost", FormatCount(lost_events));
}

std::string SwitchStopSentence(const Summary& s, const Summary::SwitchStop& stop) {
  std::string who;
  if (s.switch_stops.size() > 1)
    who = stop.rank >= 0 ? fmt::format("rank {}: ", stop.rank)
                         : fmt::format("process {}: ", stop.pid);
  return fmt::format(
      "{}context-switch records stopped at {} after {} records: at {} a second they would have "
      "cost ~{:.0f}% of the program's CPU time (budget {:.4g}%, {:.0f} ns a record); thread "
      "states after that come from /proc samples",
      who, Rel(s, stop.ts), FormatCount(stop.records),
      FormatCount(static_cast<uint64_t>(std::llround(stop.rate_per_s))), stop.share * 100,
      stop.budget * 100, stop.cost_ns);
}

std::string DamageSentence(const Summary& s) {
  const std::string missing =
      s.damaged_events == 1
          ? "1 event in damaged chunks is missing"
          : fmt::format("{} events in damaged chunks are missing", FormatCount(s.damaged_events));
  if (s.closed_cleanly)
    return s.damaged_events ? fmt::format("the trace has damaged chunks; {}.", missing) : "";
  std::string covers =
      s.covered_until > s.session_start
          ? fmt::format(
                "it covers the run up to {} (its last watermark); what came after is "
                "unknown",
                FormatDuration(s.covered_until - s.session_start))
          : "it holds no watermark, so no part of the run is known to be complete";
  return fmt::format("the trace was not closed cleanly: {}{}.", covers,
                     s.damaged_events ? "; " + missing : "");
}

namespace {

void TextLosses(Out& o, const Results& r) {
  const Summary& s = r.summary;
  if (s.lost_events) {
    std::string where;
    size_t shown = 0;
    for (const auto& [loc, n] : s.lost_by_location) {
      if (++shown > 4) {
        where += ", ...";
        break;
      }
      int idx = r.LocationIndex(loc);
      where += fmt::format("{}{} {}", where.empty() ? "" : ", ",
                           idx >= 0 ? r.locations[idx].label : fmt::format("location {}", loc),
                           FormatCount(n));
    }
    if (s.unattached_lost_events)
      where += fmt::format("{}{} from threads without a ring", where.empty() ? "" : ", ",
                           FormatCount(s.unattached_lost_events));
    o.Wrapped(o.Red("LOST       "),
              fmt::format("{} ({}): figures for these locations undercount.",
                          LostSentence(s.lost_events), where),
              11);
  }
  if (s.overwritten_events)
    o.Line(o.Red(fmt::format("OVERWRITTEN {} older events (flight recorder)",
                             FormatCount(s.overwritten_events))));
  if (!s.closed_cleanly || s.damaged_events)
    o.Wrapped(o.Red("DAMAGED    "), DamageSentence(s), 11);
}

// Section 1: what ran, for how long, and what the trace may be missing.
// The CPUs' time beside the program's threads: what reconciles the threads' queued share with
// the CPUs' busy share (queued = wanted - got, in CPUs on average).
void TextCpuAccount(Out& o, const Results& r) {
  const CpuAccount& a = r.cpu_account;
  const uint64_t wall = r.summary.duration_ns;
  if (!a.cpus || !a.capacity_ns || !wall || !r.summary.has_sched)
    return;
  const double got = static_cast<double>(a.program_running_ns) / static_cast<double>(wall);
  std::string line = fmt::format(
      "busy {} of {} CPUs (the program's threads {}, other work {}), steal {}, idle {}; its "
      "threads wanted {:.1f} CPUs on average and got {:.1f}, so they queued {}",
      FormatPercent(a.busy_ns, a.capacity_ns), a.cpus,
      FormatPercent(a.program_running_ns, a.capacity_ns),
      FormatPercent(a.other_work_ns, a.capacity_ns), FormatPercent(a.steal_ns, a.capacity_ns),
      FormatPercent(a.idle_ns, a.capacity_ns), a.runnable_threads, got,
      FormatDuration(a.program_queued_ns));
  // Queued beside idle CPU time: no CPU was short, the thread waited to be taken (a wake-up's
  // delay, on a virtual machine an IPI to a halted CPU), or bursts shorter than an interval.
  if (a.program_queued_ns && a.queued_beside_idle_ns * 10 >= a.program_queued_ns)
    line += fmt::format(
        " ({} of it beside idle CPU time: wake-ups waiting for a CPU to take them, or bursts "
        "shorter than the {} intervals)",
        FormatDuration(a.queued_beside_idle_ns), FormatDuration(r.intervals.interval_ns));
  o.Wrapped("cpus       ", line, 11);
}

void TextSummary(Out& o, const Results& r) {
  const Summary& s = r.summary;
  o.Line(o.Bold(fmt::format("parmon report: {}", s.file)));
  o.Wrapped("command    ", s.command.empty() ? "?" : s.command, 11);
  std::string window =
      s.window_start == s.session_start && s.window_end == s.session_end
          ? "whole run"
          : fmt::format("window {} to {}", Rel(s, s.window_start), Rel(s, s.window_end));
  o.Line(fmt::format("duration   {} ({}){}", FormatDuration(s.duration_ns), window,
                     s.exit_code >= 0 ? fmt::format(", exit code {}", s.exit_code) : ""));
  o.Line(fmt::format("processes  {}   threads {}   ranks {}   cpus {}   events {}", s.processes,
                     s.threads, s.ranks, s.cpus, FormatCount(s.events)));
  if (s.clocks_aligned)
    TextClocks(o, s);
  if (s.lost_events || s.damaged_events || !s.closed_cleanly || s.overwritten_events)
    TextLosses(o, r);
  if (s.pauses)
    o.Wrapped("paused     ",
              fmt::format("{} in {} (parmon ctl): not recorded, counted neither as lost nor "
                          "as any thread's state; lost {}",
                          FormatDuration(s.paused_ns),
                          s.pauses == 1 ? "1 pause" : fmt::format("{} pauses", s.pauses),
                          FormatCount(s.lost_events)),
              11);
  std::string overhead = fmt::format("recorder CPU {}", FormatDuration(s.recorder_cpu_ns));
  if (s.program_cpu_ns)
    overhead +=
        fmt::format(" ({} of the program's {})", FormatPercent(s.recorder_cpu_ns, s.program_cpu_ns),
                    FormatDuration(s.program_cpu_ns));
  if (s.calibration_cpu_ns)
    overhead += fmt::format(", {} of it after the run measuring the switch-record cost",
                            FormatDuration(s.calibration_cpu_ns));
  const bool measured =
      s.event_cost_source == "measured" && (s.switches == 0 || s.switch_cost_source == "measured");
  overhead += fmt::format("; in the program's threads {}{}: events {} ({:.0f} ns each, {})",
                          measured ? "" : "~", FormatDuration(s.in_thread_overhead_ns),
                          FormatDuration(s.in_thread_events_ns), s.event_cost_ns,
                          s.event_cost_source == "measured" ? "measured" : "estimated");
  if (s.switches)
    overhead += fmt::format(", context-switch records {} ({} switches x 2 x {:.0f} ns, {})",
                            FormatDuration(s.in_thread_switches_ns), FormatCount(s.switches),
                            s.switch_record_cost_ns,
                            s.switch_cost_source == "measured" ? "measured" : "estimated");
  if (s.estimated_slowdown > 0)
    overhead +=
        fmt::format("; cost to the program ~{:.1f}% of its run time", s.estimated_slowdown * 100);
  if (s.parmon_held_ns)
    overhead += fmt::format(
        "; parmon held them {} while their rings were full (--overflow block; in no state of "
        "theirs)",
        FormatDuration(s.parmon_held_ns));
  o.Wrapped("overhead   ", overhead, 11);
  for (const Summary::SwitchStop& stop : s.switch_stops)
    o.Wrapped("switches   ", SwitchStopSentence(s, stop), 11);
  TextCpuAccount(o, r);
  std::string ended;  // processes that died of a signal
  for (const ProcessDeath& d : r.deaths)
    ended += fmt::format("{}{} (pid {}) {} at {}{}", ended.empty() ? "" : "; ", d.label, d.pid,
                         d.signal_name, Rel(s, d.ts),
                         d.crashed  ? " (crashed)"
                         : d.sender ? fmt::format(" (sent by pid {})", d.sender)
                                    : "");
  if (!ended.empty())
    o.Wrapped("signals    ", ended, 11);
  if (!s.has_sched)
    o.Wrapped(o.Dim("note       "),
              o.Dim("no sampler data: states are inferred from instrumented calls (time in none "
                    "counts as running)."),
              11);
}

// Section 6, shown second: the findings, read first.
void TextDiagnosis(Out& o, const Results& r) {
  o.Section("Diagnosis");
  if (r.findings.empty())
    o.Line("No bottleneck found: no wait, queueing or imbalance above 10%.");
  else
    o.Line(fmt::format("Ranked by what each could save of the run's {} wall time.",
                       FormatDuration(r.summary.duration_ns)));
  for (size_t i = 0; i < r.findings.size(); ++i) {
    const Finding& f = r.findings[i];
    o.Wrapped(fmt::format("{}. ", i + 1),
              o.Yellow(f.text) + fmt::format(" [{} of the wall time at stake]",
                                             FormatDuration(f.time_at_stake_ns)),
              3);
    o.Wrapped("   ", o.Dim(f.evidence), 3);
  }
}

// MPI messages and POSIX channel traffic (pipes, sockets, the program's stdout) in two tables:
// a rank's printf is not an MPI message.
void TextCommTable(Out& o, const Results& r) {
  bool any_mpi = false, any_channel = false;
  for (const auto& l : r.locations) {
    any_mpi |= l.mpi_messages_sent || l.mpi_messages_received || l.mpi_calls;
    any_channel |=
        l.messages_sent > l.mpi_messages_sent || l.messages_received > l.mpi_messages_received;
  }
  if (any_mpi) {
    o.Line();
    o.Line(fmt::format("{:<16} {:>9} {:>9} {:>9} {:>9} {:>8} {}", "LOCATION", "MPI OUT",
                       "BYTES OUT", "MPI IN", "BYTES IN", "MPI", "MPI FAMILIES"));
    for (const auto& l : r.locations) {
      if (!(l.mpi_messages_sent || l.mpi_messages_received || l.mpi_calls))
        continue;
      std::string fams;
      for (const auto& f : l.mpi_families) {
        if (fams.size() > 14)
          break;
        fams += fmt::format("{}{} {}", fams.empty() ? "" : ", ", f.family,
                            FormatPercent(f.ns, l.mpi_ns));
      }
      o.Line(fmt::format("{:<16} {:>9} {:>9} {:>9} {:>9} {:>8} {}", CutLabel(l.label, 16),
                         FormatCount(l.mpi_messages_sent), FormatBytes(l.mpi_bytes_sent),
                         FormatCount(l.mpi_messages_received), FormatBytes(l.mpi_bytes_received),
                         FormatDuration(l.mpi_ns), Cut(fams, 13)));
    }
  }
  if (!any_channel)
    return;
  o.Line();
  o.Line(fmt::format("{:<16} {:>9} {:>9} {:>9} {:>9}  {}", "LOCATION", "WRITES", "BYTES OUT",
                     "READS", "BYTES IN", "(POSIX channels: pipes, sockets, stdout)"));
  for (const auto& l : r.locations) {
    const uint64_t writes = l.messages_sent - std::min(l.messages_sent, l.mpi_messages_sent);
    const uint64_t reads =
        l.messages_received - std::min(l.messages_received, l.mpi_messages_received);
    if (!writes && !reads)
      continue;
    o.Line(fmt::format(
        "{:<16} {:>9} {:>9} {:>9} {:>9}", CutLabel(l.label, 16), FormatCount(writes),
        FormatBytes(l.bytes_sent - std::min(l.bytes_sent, l.mpi_bytes_sent)), FormatCount(reads),
        FormatBytes(l.bytes_received - std::min(l.bytes_received, l.mpi_bytes_received))));
  }
}

// What an mpiP user reads first: the ranks' MPI share, then the time per MPI function with its
// spread across ranks; start-up and shut-down close the table, apart from the MPI time.
void TextMpiProfile(Out& o, const MpiProfile& mp) {
  o.Line();
  std::string head =
      fmt::format("MPI {} of the ranks' run time", FormatPercent(mp.mpi_ns, mp.run_ns));
  if (mp.most_rank >= 0 && mp.ranks > 1)
    head += fmt::format(", rank {} most ({})", mp.most_rank,
                        FormatPercent(mp.most_mpi_ns, mp.most_run_ns));
  o.Wrapped("", head + " (a rank's run: from MPI_Init's return to MPI_Finalize's call)", 0);
  auto row = [&](const std::string& name, const MpiFunctionStat& f) {
    o.Line(fmt::format("{:<20} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}", Cut(name, 20),
                       FormatCount(f.calls), FormatDuration(f.ns), FormatDuration(f.min_rank_ns),
                       FormatDuration(static_cast<uint64_t>(f.mean_rank_ns)),
                       FormatDuration(f.max_rank_ns), fmt::format("rank {}", f.max_rank)));
  };
  o.Line(fmt::format("{:<20} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}", "MPI FUNCTION", "CALLS", "TIME",
                     "MIN/RANK", "MEAN/RANK", "MAX/RANK", "MAX AT"));
  for (size_t i = 0; i < mp.functions.size() && i < 10; ++i)
    row(mp.functions[i].name, mp.functions[i]);
  if (mp.startup.calls)
    row("start-up (Init)", mp.startup);
  if (mp.shutdown.calls)
    row("shut-down (Finalize)", mp.shutdown);
  if (mp.call_sites.empty())
    return;
  // The top call sites (trace mode): where in the program the MPI time is spent.
  o.Line();
  o.Line(fmt::format("{:<30} {:<14} {:>7} {:>9} {:>9} {:>9} {:>5}", "MPI CALL SITE", "FUNCTION",
                     "CALLS", "TIME", "MEAN/RANK", "MAX/RANK", "COV"));
  for (size_t i = 0; i < mp.call_sites.size() && i < 20; ++i) {
    const MpiCallSiteStat& s = mp.call_sites[i];
    o.Line(fmt::format("{:<30} {:<14} {:>7} {:>9} {:>9} {:>9} {:>5.2f}", Cut(s.site, 30),
                       Cut(s.function, 14), FormatCount(s.calls), FormatDuration(s.ns),
                       FormatDuration(static_cast<uint64_t>(s.mean_rank_ns)),
                       FormatDuration(s.max_rank_ns), s.cov));
  }
  if (mp.call_sites.size() > 20)
    o.Line(fmt::format("... {} more call sites (see --format json)", mp.call_sites.size() - 20));
}

void TextRegionTable(Out& o, const Results& r) {
  o.Line();
  o.Line(fmt::format("{:<16} {:<28} {:>9} {:>10} {:>10}", "LOCATION", "TOP REGIONS", "COUNT",
                     "INCLUSIVE", "EXCLUSIVE"));
  for (const auto& l : r.locations)
    for (size_t i = 0; i < l.top_regions.size(); ++i) {
      const auto& g = l.top_regions[i];
      o.Line(fmt::format("{:<16} {:<28} {:>9} {:>10} {:>10}", i == 0 ? CutLabel(l.label, 16) : "",
                         Cut(g.name, 28), FormatCount(g.count), FormatDuration(g.inclusive_ns),
                         FormatDuration(g.exclusive_ns)));
    }
}

// Section 2: per location states, then its traffic and its top regions when there are any.
void TextLocations(Out& o, const Results& r, const TextOptions& options) {
  o.Section("Locations");
  const size_t lw = LabelWidth(
      r.locations, 16, [](const LocationResult& l) -> const std::string& { return l.label; });
  o.Line(fmt::format("{:<{}} {:>8} {:>8} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5}", "LOCATION", lw,
                     "WALL", "CPU", "run", "queue", "comm", "lock", "timer", "io", "other"));
  size_t shown = 0;
  for (const auto& l : r.locations) {
    if (++shown > options.max_locations) {
      o.Line(fmt::format("... {} more (see --format json)",
                         r.locations.size() - options.max_locations));
      break;
    }
    uint64_t total = Sum(l.states);
    std::string row =
        fmt::format("{:<{}} {:>8} {:>8}", CutLabel(l.label, lw), lw, FormatDuration(l.wall_ns),
                    l.state_source == "sampled" ? FormatDuration(l.cpu_ns) : "-");
    for (int i = 0; i < kStateCount; ++i)
      row += fmt::format(" {:>5}", FormatPercent(l.states[i], total));
    o.Line(row + (l.state_source == "sampled" ? "" : o.Dim(" *")));
  }
  bool any_comm = false, any_regions = false;
  for (const auto& l : r.locations) {
    any_comm |= l.messages_sent || l.messages_received || l.mpi_calls;
    any_regions |= !l.top_regions.empty();
  }
  if (any_comm)
    TextCommTable(o, r);
  if (r.mpi.ranks)
    TextMpiProfile(o, r.mpi);
  if (any_regions)
    TextRegionTable(o, r);
  if (!r.summary.has_sched)
    o.Line(o.Dim("* states inferred from instrumented calls, not sampled"));
}

// Section 3: the communication matrix.
void TextCommunication(Out& o, const Results& r) {
  o.Section("Communication");
  if (r.links.empty())
    o.Line("No messages or channel traffic recorded.");
  else {
    // Both columns as wide as the longest label (to a limit): rows of one program's workers
    // differ only in their tids.
    const size_t lw =
        std::max(LabelWidth(r.links, 14,
                            [](const LinkResult& k) -> const std::string& { return k.from_label; }),
                 LabelWidth(r.links, 14,
                            [](const LinkResult& k) -> const std::string& { return k.to_label; }));
    o.Line(fmt::format("{:<{}} {:<{}} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6}", "FROM", lw, "TO", lw,
                       "MSGS", "BYTES", "TIME", "WAIT", "S.WAIT", "R.WAIT"));
    for (const auto& k : r.links)
      o.Line(fmt::format("{:<{}} {:<{}} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6}",
                         CutLabel(k.from_label, lw), lw, CutLabel(k.to_label, lw), lw,
                         FormatCount(k.messages), FormatBytes(k.bytes), FormatDuration(k.time_ns),
                         FormatDuration(k.wait_ns), FormatPercent(k.sender_wait_ns, k.time_ns),
                         FormatPercent(k.receiver_wait_ns, k.time_ns)));
    o.Wrapped("",
              o.Dim("WAIT = waiting for the partner (S. by the sender, R. by the receiver, "
                    "as % of TIME); the rest of TIME is transfer."),
              0);
  }
}

// Section 4: utilisation over time.
void TextIntervals(Out& o, const Results& r, const TextOptions& options) {
  const Summary& s = r.summary;
  const IntervalSeries& iv = r.intervals;
  o.Section(fmt::format("Intervals ({} x {})", iv.count, FormatDuration(iv.interval_ns)));
  o.Line(fmt::format("{:<16} {:>5} {:>6}  {}", "UTILISATION", "MEAN", "STDDEV", "OVER TIME"));
  size_t shown = 0;
  for (size_t k = 0; k < iv.location_utilisation.size(); ++k) {
    if (++shown > options.max_locations)
      break;
    o.Line(fmt::format("{:<16} {:>5} {:>6}  {}", CutLabel(r.locations[k].label, 16),
                       fmt::format("{:.0f}%", iv.location_mean[k] * 100),
                       fmt::format("{:.0f}%", iv.location_stddev[k] * 100),
                       Sparkline(iv.location_utilisation[k], 50)));
  }
  for (size_t k = 0; k < iv.link_utilisation.size() && k < 32; ++k)
    o.Line(fmt::format(
        "{:<16} {:>5} {:>6}  {}", Cut(r.links[k].from_label + ">" + r.links[k].to_label, 16),
        fmt::format("{:.0f}%", iv.link_mean[k] * 100),
        fmt::format("{:.0f}%", iv.link_stddev[k] * 100), Sparkline(iv.link_utilisation[k], 50)));
  if (!iv.most_imbalanced.empty()) {
    std::string worst;
    for (size_t i : iv.most_imbalanced)
      worst += fmt::format("{}#{} at {} ({:.0f} points)", worst.empty() ? "" : ", ", i,
                           FormatDuration(iv.window_start + i * iv.interval_ns - s.session_start),
                           iv.imbalance[i] * 100);
    o.Wrapped("most imbalanced: ", worst, 17);
  }
}

// Section 5: wait states, load imbalance and the critical path.
void TextWaitStates(Out& o, const Results& r) {
  o.Section("Wait states");
  if (r.wait_states.empty())
    o.Line("No time lost waiting for a partner.");
  else {
    o.Line(fmt::format("{:<16} {:<16} {:<22} {:>9} {:>10}", "PATTERN", "LOCATION", "CALL", "COUNT",
                       "TIME"));
    size_t shown = 0;
    for (const auto& w : r.wait_states) {
      if (++shown > 20) {
        o.Line(fmt::format("... {} more", r.wait_states.size() - 20));
        break;
      }
      o.Line(fmt::format("{:<16} {:<16} {:<22} {:>9} {:>10}", Cut(w.pattern, 16),
                         CutLabel(w.location_label, 16), Cut(w.call, 22), FormatCount(w.instances),
                         FormatDuration(w.ns)));
    }
  }
  const LoadImbalance& li = r.imbalance;
  if (li.members > 1)
    o.Wrapped("load imbalance: ",
              fmt::format("{:.0f}% over {} {} (compute max {} {}, mean {}, min {} {})", li.percent,
                          li.members, li.over, FormatDuration(li.max_compute_ns), li.max_label,
                          FormatDuration(li.mean_compute_ns), FormatDuration(li.min_compute_ns),
                          li.min_label),
              16);
  const CriticalPath& cp = r.critical_path;
  if (cp.length_ns) {
    std::string shares;
    for (size_t i = 0; i < cp.shares.size() && i < 4; ++i)
      shares += fmt::format("{}{} {}", shares.empty() ? "" : ", ", cp.shares[i].first,
                            FormatPercent(cp.shares[i].second, cp.length_ns));
    if (!cp.shares_kept)
      shares = "not kept (more than 64 locations)";
    o.Wrapped(
        "critical path: ",
        fmt::format("{} of computation through messages, forks and exits ({} of the window); "
                    "share of the path: {}",
                    FormatDuration(cp.length_ns), FormatPercent(cp.length_ns, cp.wall_ns), shares),
        15);
  }
}

}  // namespace

std::string RenderText(const Results& r, const TextOptions& options) {
  Out o(options.color);
  TextSummary(o, r);
  TextDiagnosis(o, r);
  TextLocations(o, r, options);
  TextCommunication(o, r);
  TextIntervals(o, r, options);
  TextWaitStates(o, r);
  o.text() += RenderOmpText(r.omp);
  return std::move(o.text());
}

}  // namespace parmon::analysis
