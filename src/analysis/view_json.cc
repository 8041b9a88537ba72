// The JSON view: every figure of Results, with the field names documented in
// docs/report-json.md. Times are integer nanoseconds ("_ns"), fractions are 0..1.
#include "analysis/omp_views.h"
#include "analysis/views.h"

namespace parmon::analysis {
namespace {

nlohmann::json States(const StateTimes& t) {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < kStateCount; ++i)
    j[StateName(static_cast<State>(i))] = t[i];
  return j;
}

using nlohmann::json;

// MPI functions; with their spread across ranks for the run's profile.
json MpiFunctions(const std::vector<MpiFunctionStat>& fs, bool spread) {
  json a = json::array();
  for (const auto& f : fs) {
    json x = {{"name", f.name}, {"calls", f.calls}, {"ns", f.ns}};
    if (spread) {
      x["min_rank_ns"] = f.min_rank_ns;
      x["mean_rank_ns"] = f.mean_rank_ns;
      x["max_rank_ns"] = f.max_rank_ns;
      x["max_rank"] = f.max_rank;
    }
    a.push_back(std::move(x));
  }
  return a;
}

// MPI call sites; with their spread across ranks for the run's profile.
json MpiCallSites(const std::vector<MpiCallSiteStat>& cs, bool spread) {
  json a = json::array();
  for (const auto& s : cs) {
    json x = {{"site", s.site}, {"function", s.function}, {"calls", s.calls}, {"ns", s.ns}};
    if (spread) {
      x["ranks"] = s.ranks;
      x["min_rank_ns"] = s.min_rank_ns;
      x["mean_rank_ns"] = s.mean_rank_ns;
      x["max_rank_ns"] = s.max_rank_ns;
      x["max_rank"] = s.max_rank;
      x["cov"] = s.cov;
    }
    a.push_back(std::move(x));
  }
  return a;
}

// The MPI profile: the ranks' MPI share and the time per function across ranks.
json MpiJson(const MpiProfile& mp) {
  return {{"ranks", mp.ranks},
          {"mpi_ns", mp.mpi_ns},
          {"run_ns", mp.run_ns},
          {"most_rank", mp.most_rank},
          {"most_mpi_ns", mp.most_mpi_ns},
          {"most_run_ns", mp.most_run_ns},
          {"functions", MpiFunctions(mp.functions, true)},
          {"startup", MpiFunctions({mp.startup}, true)[0]},
          {"shutdown", MpiFunctions({mp.shutdown}, true)[0]},
          {"call_sites", MpiCallSites(mp.call_sites, true)}};
}

json SummaryJson(const Summary& s) {
  json sum;
  sum["file"] = s.file;
  sum["command"] = s.command;
  sum["host"] = s.host;
  sum["format_version"] = s.format_version;
  sum["closed_cleanly"] = s.closed_cleanly;
  sum["session_start_ns"] = s.session_start;
  sum["session_end_ns"] = s.session_end;
  sum["window_start_ns"] = s.window_start - s.session_start;
  sum["window_end_ns"] = s.window_end - s.session_start;
  sum["duration_ns"] = s.duration_ns;
  sum["exit_code"] = s.exit_code;
  sum["processes"] = s.processes;
  sum["threads"] = s.threads;
  sum["ranks"] = s.ranks;
  sum["cpus"] = s.cpus;
  sum["events"] = s.events;
  sum["lost_events"] = s.lost_events;
  json lost = json::object();
  for (const auto& [loc, n] : s.lost_by_location)
    lost[std::to_string(loc)] = n;
  sum["lost_by_location"] = lost;
  sum["unattached_lost_events"] = s.unattached_lost_events;
  sum["paused_ns"] = s.paused_ns;
  sum["pauses"] = s.pauses;
  sum["overwritten_events"] = s.overwritten_events;
  sum["damaged_events"] = s.damaged_events;
  if (!s.closed_cleanly)  // what came after is unknown
    sum["covered_until_ns"] =
        s.covered_until > s.session_start ? s.covered_until - s.session_start : 0;
  sum["problems"] = s.problems;
  sum["overhead"] = {{"recorder_cpu_ns", s.recorder_cpu_ns},
                     {"program_cpu_ns", s.program_cpu_ns},
                     {"in_thread_ns", s.in_thread_overhead_ns},
                     {"held_ns", s.parmon_held_ns},
                     {"event_cost_ns", s.event_cost_ns},
                     {"event_cost_source", s.event_cost_source},
                     {"in_thread_events_ns", s.in_thread_events_ns},
                     {"in_thread_switches_ns", s.in_thread_switches_ns},
                     {"switches", s.switches},
                     {"switch_record_cost_ns", s.switch_record_cost_ns},
                     {"switch_cost_source", s.switch_cost_source},
                     {"calibration_cpu_ns", s.calibration_cpu_ns},
                     {"estimated_slowdown", s.estimated_slowdown}};
  json stops = json::array();
  for (const Summary::SwitchStop& stop : s.switch_stops)
    stops.push_back({{"at_ns", stop.ts > s.session_start ? stop.ts - s.session_start : 0},
                     {"pid", stop.pid},
                     {"rank", stop.rank},
                     {"records", stop.records},
                     {"rate_per_s", stop.rate_per_s},
                     {"share", stop.share},
                     {"budget", stop.budget},
                     {"record_cost_ns", stop.cost_ns},
                     {"text", SwitchStopSentence(s, stop)}});
  sum["switch_stops"] = std::move(stops);
  sum["has_sched"] = s.has_sched;
  sum["has_comm"] = s.has_comm;
  json clocks = json::array();
  for (const auto& c : s.clock_offsets)
    clocks.push_back({{"rank", c.rank},
                      {"offset_ns", c.offset_ns},
                      {"last_offset_ns", c.last_offset_ns},
                      {"epochs", c.epochs}});
  sum["clock_offsets"] = clocks;
  sum["clocks_aligned"] = s.clocks_aligned;
  return sum;
}

json LocationJson(const LocationResult& l, const Summary& s) {
  json x;
  x["id"] = l.id;
  x["kind"] = l.kind;
  x["pid"] = l.pid;
  x["tid"] = l.tid;
  x["rank"] = l.rank;
  x["name"] = l.name;
  x["label"] = l.label;
  x["first_ns"] = l.first_ts - s.session_start;
  x["last_ns"] = l.last_ts - s.session_start;
  x["wall_ns"] = l.wall_ns;
  x["cpu_ns"] = l.cpu_ns;
  x["states_ns"] = States(l.states);
  x["state_source"] = l.state_source;
  x["events"] = l.events;
  x["lost_events"] = l.lost_events;
  x["messages_sent"] = l.messages_sent;
  x["bytes_sent"] = l.bytes_sent;
  x["messages_received"] = l.messages_received;
  x["bytes_received"] = l.bytes_received;
  x["mpi_messages_sent"] = l.mpi_messages_sent;
  x["mpi_bytes_sent"] = l.mpi_bytes_sent;
  x["mpi_messages_received"] = l.mpi_messages_received;
  x["mpi_bytes_received"] = l.mpi_bytes_received;
  x["mpi_ns"] = l.mpi_ns;
  x["mpi_calls"] = l.mpi_calls;
  x["mpi_init_ns"] = l.mpi_init_ns;
  x["mpi_startup_ns"] = l.mpi_startup_ns;
  x["mpi_shutdown_ns"] = l.mpi_shutdown_ns;
  if (l.mpi_ns)
    x["mpi_kernel_states_ns"] = States(l.mpi_kernel_states);
  json fams = json::array();
  for (const auto& f : l.mpi_families)
    fams.push_back({{"family", f.family}, {"calls", f.calls}, {"ns", f.ns}});
  x["mpi_families"] = fams;
  x["mpi_functions"] = MpiFunctions(l.mpi_functions, false);
  x["mpi_call_sites"] = MpiCallSites(l.mpi_call_sites, false);
  json regs = json::array();
  for (const auto& g : l.top_regions)
    regs.push_back({{"name", g.name},
                    {"count", g.count},
                    {"inclusive_ns", g.inclusive_ns},
                    {"exclusive_ns", g.exclusive_ns}});
  x["top_regions"] = regs;
  x["late_sender_ns"] = l.late_sender_ns;
  x["late_receiver_ns"] = l.late_receiver_ns;
  x["barrier_wait_ns"] = l.barrier_wait_ns;
  x["collective_wait_ns"] = l.collective_wait_ns;
  x["compute_ns"] = l.compute_ns;
  x["lock_calls_ns"] = l.lock_calls_ns;
  x["parmon_held_ns"] = l.parmon_held_ns;
  x["critical_path_ns"] = l.critical_path_ns;
  return x;
}

json LinksJson(const Results& r) {
  json links = json::array();
  for (const auto& k : r.links) {
    links.push_back({{"kind", k.kind},
                     {"from", k.from},
                     {"to", k.to},
                     {"from_label", k.from_label},
                     {"to_label", k.to_label},
                     {"messages", k.messages},
                     {"bytes", k.bytes},
                     {"time_ns", k.time_ns},
                     {"wait_ns", k.wait_ns},
                     {"transfer_ns", k.transfer_ns},
                     {"sender_wait_ns", k.sender_wait_ns},
                     {"receiver_wait_ns", k.receiver_wait_ns},
                     {"closed_loop_messages", k.closed_loop_messages}});
    if (!k.channel.empty())
      links.back()["channel"] = k.channel;
  }
  return links;
}

// Per interval utilisation of each location and link, and how imbalanced each interval was.
json IntervalsJson(const Results& r) {
  const Summary& s = r.summary;
  const IntervalSeries& iv = r.intervals;
  json ivj;
  ivj["interval_ns"] = iv.interval_ns;
  ivj["start_ns"] = iv.window_start - s.session_start;
  ivj["count"] = iv.count;
  json lrows = json::array();
  for (size_t k = 0; k < iv.location_utilisation.size(); ++k) {
    json states = json::array();
    for (const auto& st : iv.location_states[k]) {
      json row = json::array();
      for (uint64_t v : st)
        row.push_back(v);
      states.push_back(row);
    }
    lrows.push_back({{"location", r.locations[k].id},
                     {"label", r.locations[k].label},
                     {"utilisation", iv.location_utilisation[k]},
                     {"states_ns", states},
                     {"mean", iv.location_mean[k]},
                     {"stddev", iv.location_stddev[k]}});
  }
  ivj["state_order"] = json::array();
  for (int i = 0; i < kStateCount; ++i)
    ivj["state_order"].push_back(StateName(static_cast<State>(i)));
  ivj["locations"] = lrows;
  json krows = json::array();
  for (size_t k = 0; k < iv.link_utilisation.size(); ++k)
    krows.push_back({{"from_label", r.links[k].from_label},
                     {"to_label", r.links[k].to_label},
                     {"utilisation", iv.link_utilisation[k]},
                     {"bytes", iv.link_bytes[k]},
                     {"mean", iv.link_mean[k]},
                     {"stddev", iv.link_stddev[k]}});
  ivj["links"] = krows;
  ivj["imbalance"] = iv.imbalance;
  ivj["most_imbalanced"] = iv.most_imbalanced;
  return ivj;
}

// Wait state instances, load imbalance and the critical path.
json WaitStatesJson(const Results& r) {
  json ws = json::array();
  for (const auto& w : r.wait_states)
    ws.push_back({{"pattern", w.pattern},
                  {"location", w.location},
                  {"location_label", w.location_label},
                  {"call", w.call},
                  {"instances", w.instances},
                  {"ns", w.ns}});
  const LoadImbalance& li = r.imbalance;
  const CriticalPath& cp = r.critical_path;
  json shares = json::array();
  for (const auto& [label, ns] : cp.shares)
    shares.push_back({{"label", label}, {"ns", ns}});
  return {{"instances", ws},
          {"load_imbalance",
           {{"over", li.over},
            {"members", li.members},
            {"max_compute_ns", li.max_compute_ns},
            {"mean_compute_ns", li.mean_compute_ns},
            {"min_compute_ns", li.min_compute_ns},
            {"max_label", li.max_label},
            {"min_label", li.min_label},
            {"percent", li.percent}}},
          {"critical_path",
           {{"length_ns", cp.length_ns},
            {"wall_ns", cp.wall_ns},
            {"shares", shares},
            {"shares_kept", cp.shares_kept}}}};
}

// Processes that died of a signal, and what the others did from then on.
json DeathsJson(const Results& r) {
  json out = json::array();
  for (const ProcessDeath& d : r.deaths) {
    json others = json::array();
    for (const auto& a : d.others)
      others.push_back({{"location", a.location},
                        {"label", a.label},
                        {"mpi_call", a.mpi_call},
                        {"call_since_ns", a.call_since},
                        {"until_ns", a.until},
                        {"end_signal", a.end_signal},
                        {"end_signal_name", a.end_signal_name}});
    out.push_back({{"pid", d.pid},
                   {"rank", d.rank},
                   {"location", d.location},
                   {"label", d.label},
                   {"signal", d.signal},
                   {"signal_name", d.signal_name},
                   {"signal_meaning", d.signal_meaning},
                   {"code", d.code},
                   {"sender", d.sender},
                   {"crashed", d.crashed},
                   {"ts_ns", d.ts},
                   {"others", others}});
  }
  return out;
}

json FindingsJson(const Results& r) {
  json fs = json::array();
  for (const auto& f : r.findings)
    fs.push_back({{"id", f.id},
                  {"text", f.text},
                  {"evidence", f.evidence},
                  {"time_at_stake_ns", f.time_at_stake_ns},
                  {"thread_time_ns", f.thread_time_ns},
                  {"percent", f.percent_of_run},
                  {"subjects", f.subjects}});
  return fs;
}

}  // namespace

nlohmann::json ToJson(const Results& r) {
  json j;
  j["schema"] = "parmon-report/1";
  j["summary"] = SummaryJson(r.summary);
  const CpuAccount& a = r.cpu_account;
  j["cpu_account"] = {{"cpus", a.cpus},
                      {"capacity_ns", a.capacity_ns},
                      {"busy_ns", a.busy_ns},
                      {"steal_ns", a.steal_ns},
                      {"idle_ns", a.idle_ns},
                      {"program_running_ns", a.program_running_ns},
                      {"program_queued_ns", a.program_queued_ns},
                      {"other_work_ns", a.other_work_ns},
                      {"runnable_threads", a.runnable_threads},
                      {"queued_beside_idle_ns", a.queued_beside_idle_ns}};
  json locs = json::array();
  for (const auto& l : r.locations)
    locs.push_back(LocationJson(l, r.summary));
  j["locations"] = locs;
  j["links"] = LinksJson(r);
  j["intervals"] = IntervalsJson(r);
  j["wait_states"] = WaitStatesJson(r);
  j["diagnosis"] = FindingsJson(r);
  j["deaths"] = DeathsJson(r);
  j["mpi"] = MpiJson(r.mpi);
  j["openmp"] = OmpJson(r.omp);
  return j;
}

}  // namespace parmon::analysis
