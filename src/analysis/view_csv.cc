// The CSV view: one table per section, each introduced by "# table: NAME" and a header row, so a
// spreadsheet or a script can pick the table it wants.
#include <fmt/format.h>

#include "analysis/views.h"

namespace parmon::analysis {
namespace {

std::string Field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos)
    return s;
  std::string out = "\"";
  for (char c : s)
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

std::string RenderCsv(const Results& r) {
  std::string o;
  const Summary& s = r.summary;
  o += "# table: summary\nkey,value\n";
  auto kv = [&](const char* k, const std::string& v) { o += fmt::format("{},{}\n", k, Field(v)); };
  kv("file", s.file);
  kv("command", s.command);
  kv("duration_ns", std::to_string(s.duration_ns));
  kv("processes", std::to_string(s.processes));
  kv("threads", std::to_string(s.threads));
  kv("ranks", std::to_string(s.ranks));
  kv("cpus", std::to_string(s.cpus));
  kv("events", std::to_string(s.events));
  kv("lost_events", std::to_string(s.lost_events));
  kv("damaged_events", std::to_string(s.damaged_events));
  kv("recorder_cpu_ns", std::to_string(s.recorder_cpu_ns));
  kv("in_thread_overhead_ns", std::to_string(s.in_thread_overhead_ns));
  kv("in_thread_switches_ns", std::to_string(s.in_thread_switches_ns));
  kv("estimated_slowdown", fmt::format("{:.4f}", s.estimated_slowdown));

  o += "\n# table: locations\nid,kind,label,pid,tid,rank,wall_ns,cpu_ns";
  for (int i = 0; i < kStateCount; ++i)
    o += fmt::format(",{}_ns", StateName(static_cast<State>(i)));
  o += ",state_source,events,lost_events,messages_sent,bytes_sent,messages_received,bytes_received,"
       "mpi_ns,mpi_calls,late_sender_ns,late_receiver_ns,barrier_wait_ns,collective_wait_ns,"
       "compute_ns,critical_path_ns,mpi_messages_sent,mpi_bytes_sent,mpi_messages_received,"
       "mpi_bytes_received\n";
  for (const auto& l : r.locations) {
    o += fmt::format("{},{},{},{},{},{},{},{}", l.id, l.kind, Field(l.label), l.pid, l.tid, l.rank,
                     l.wall_ns, l.cpu_ns);
    for (uint64_t v : l.states)
      o += fmt::format(",{}", v);
    o += fmt::format(",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", l.state_source,
                     l.events, l.lost_events, l.messages_sent, l.bytes_sent, l.messages_received,
                     l.bytes_received, l.mpi_ns, l.mpi_calls, l.late_sender_ns, l.late_receiver_ns,
                     l.barrier_wait_ns, l.collective_wait_ns, l.compute_ns, l.critical_path_ns,
                     l.mpi_messages_sent, l.mpi_bytes_sent, l.mpi_messages_received,
                     l.mpi_bytes_received);
  }

  o += "\n# table: regions\nlocation,label,region,count,inclusive_ns,exclusive_ns\n";
  for (const auto& l : r.locations)
    for (const auto& g : l.top_regions)
      o += fmt::format("{},{},{},{},{},{}\n", l.id, Field(l.label), Field(g.name), g.count,
                       g.inclusive_ns, g.exclusive_ns);

  o += "\n# table: links\nkind,from,to,from_label,to_label,messages,bytes,time_ns,wait_ns,"
       "transfer_ns,sender_wait_ns,receiver_wait_ns\n";
  for (const auto& k : r.links)
    o += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", k.kind, k.from, k.to,
                     Field(k.from_label), Field(k.to_label), k.messages, k.bytes, k.time_ns,
                     k.wait_ns, k.transfer_ns, k.sender_wait_ns, k.receiver_wait_ns);

  const IntervalSeries& iv = r.intervals;
  o += "\n# table: intervals\ninterval,start_ns,subject,utilisation\n";
  for (size_t i = 0; i < iv.count; ++i) {
    uint64_t start = iv.window_start + i * iv.interval_ns - s.session_start;
    for (size_t k = 0; k < iv.location_utilisation.size(); ++k)
      o += fmt::format("{},{},{},{:.6f}\n", i, start, Field(r.locations[k].label),
                       iv.location_utilisation[k][i]);
    for (size_t k = 0; k < iv.link_utilisation.size(); ++k)
      o += fmt::format("{},{},{},{:.6f}\n", i, start,
                       Field(r.links[k].from_label + " -> " + r.links[k].to_label),
                       iv.link_utilisation[k][i]);
  }

  o += "\n# table: wait_states\npattern,location,label,call,instances,ns\n";
  for (const auto& w : r.wait_states)
    o += fmt::format("{},{},{},{},{},{}\n", Field(w.pattern), w.location, Field(w.location_label),
                     Field(w.call), w.instances, w.ns);

  // The MPI profile (mpiP's tables): per function and per call site, with the spread over ranks.
  o +=
      "\n# table: mpi_functions\nfunction,calls,ns,min_rank_ns,mean_rank_ns,max_rank_ns,max_rank\n";
  for (const auto& f : r.mpi.functions)
    o += fmt::format("{},{},{},{},{:.0f},{},{}\n", Field(f.name), f.calls, f.ns, f.min_rank_ns,
                     f.mean_rank_ns, f.max_rank_ns, f.max_rank);
  o += "\n# table: mpi_call_sites\nsite,function,calls,ns,ranks,min_rank_ns,mean_rank_ns,"
       "max_rank_ns,max_rank,cov\n";
  for (const auto& c : r.mpi.call_sites)
    o += fmt::format("{},{},{},{},{},{},{:.0f},{},{},{:.4f}\n", Field(c.site), Field(c.function),
                     c.calls, c.ns, c.ranks, c.min_rank_ns, c.mean_rank_ns, c.max_rank_ns,
                     c.max_rank, c.cov);

  o += "\n# table: diagnosis\nrank,id,time_at_stake_ns,text,evidence\n";
  for (size_t i = 0; i < r.findings.size(); ++i)
    o += fmt::format("{},{},{},{},{}\n", i + 1, r.findings[i].id, r.findings[i].time_at_stake_ns,
                     Field(r.findings[i].text), Field(r.findings[i].evidence));
  return o;
}

}  // namespace parmon::analysis
