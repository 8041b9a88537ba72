// perfetto_test: records real programs with `parmon record` (threads with regions; an MPI program
// under mpirun), exports them with ExportPerfetto and decodes the file with libprotobuf against
// perfetto_trace.proto (Perfetto's field numbers). The facts checked are counted independently
// from the session through model::Merge: slice begins/ends per thread equal the RegionEnter/
// MpiEnter and RegionLeave/MpiLeave counts, slice names equal the recorded names, slices nest,
// thread and process descriptors carry the recorded pids, tids and names, every message's flow
// has exactly one send and one receive end, one sched_switch per SwitchIn, one counter value per
// CpuSample, and a --from/--to window yields balanced slices inside the window.
#include <gtest/gtest.h>

#include <unistd.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "export/export.h"
#include "model/merge.h"
#include "model/session.h"
#include "perfetto_trace.pb.h"
#include "support/e2e.h"

namespace parmon::exporter {
namespace {

namespace pb = parmon::pftrace;
namespace e2e = parmon::testing;
using format::Kind;

// What the session holds, per thread id, counted through model::Merge.
struct Expected {
  std::map<uint32_t, uint64_t> begins, ends, switch_ins;
  std::map<std::pair<uint32_t, std::string>, uint64_t> names;  // (tid, slice name) -> begins
  std::map<uint32_t, std::string> thread_names;                // tid -> name
  std::map<std::string, int64_t> link_bytes;                   // "MPI bytes A -> B" -> bytes sent
  uint64_t sends = 0, recvs = 0, cpu_samples = 0, ranked_sends = 0;
};

Expected Count(const model::Session& s) {
  Expected x;
  for (const auto& [id, l] : s.definitions().locations)
    if (l.type == format::LocationType::kThread)
      x.thread_names[l.tid] = l.name;
  model::Merge merge(s);
  format::Event e;
  while (merge.Next(&e)) {
    const uint32_t tid = s.TidOf(e.location);
    switch (e.kind_enum()) {
      case Kind::kRegionEnter:
      case Kind::kMpiEnter:
        ++x.begins[tid];
        ++x.names[{tid, s.definitions().Name(static_cast<uint32_t>(e.args[0]))}];
        break;
      case Kind::kRegionLeave:
      case Kind::kMpiLeave:
        ++x.ends[tid];
        break;
      case Kind::kMpiSend:
        ++x.sends;
        if (int64_t rank = s.RankOf(e.location); rank >= 0) {
          ++x.ranked_sends;
          x.link_bytes["MPI bytes " + std::to_string(rank) + " -> " +
                       std::to_string(static_cast<int64_t>(e.args[0]))] +=
              static_cast<int64_t>(e.args[3]);
        }
        break;
      case Kind::kMpiRecv:
        ++x.recvs;
        break;
      case Kind::kSwitchIn:
        ++x.switch_ins[tid];
        break;
      case Kind::kCpuSample:
        if (e.args[0] + e.args[1] + e.args[2] + e.args[3] > 0)
          ++x.cpu_samples;
        break;
      default:
        break;
    }
  }
  return x;
}

// What the export holds, decoded.
struct Decoded {
  std::map<uint64_t, pb::TrackDescriptor> tracks;
  std::map<uint32_t, uint64_t> begins, ends, switch_ins;  // by tid
  std::map<std::pair<uint32_t, std::string>, uint64_t> names;
  std::map<uint64_t, int> flow_starts, flow_ends;  // flow id -> events carrying it
  std::map<uint64_t, int64_t> last_counter;        // counter track uuid -> last integer value
  uint64_t send_instants = 0, recv_instants = 0, counter_values = 0;
  bool nested = true;
  uint64_t min_slice_ts = UINT64_MAX, max_slice_ts = 0;
};

Decoded Decode(const std::string& path) {
  Decoded d;
  pb::Trace trace;
  EXPECT_TRUE(trace.ParseFromString(e2e::ReadFile(path))) << path;
  for (const auto& p : trace.packet())
    if (p.has_track_descriptor())
      d.tracks[p.track_descriptor().uuid()] = p.track_descriptor();
  std::map<uint64_t, int64_t> depth;
  for (const auto& p : trace.packet()) {
    for (const auto& fe : p.ftrace_events().event())
      if (fe.has_sched_switch() && fe.sched_switch().next_pid() != 0)
        ++d.switch_ins[static_cast<uint32_t>(fe.sched_switch().next_pid())];
    if (!p.has_track_event())
      continue;
    const pb::TrackEvent& te = p.track_event();
    auto track = d.tracks.find(te.track_uuid());
    EXPECT_NE(track, d.tracks.end()) << "event on an undescribed track " << te.track_uuid();
    if (track == d.tracks.end())
      continue;
    const uint32_t tid = static_cast<uint32_t>(track->second.thread().tid());
    switch (te.type()) {
      case pb::TrackEvent::TYPE_SLICE_BEGIN:
        ++d.begins[tid];
        ++d.names[{tid, te.name()}];
        ++depth[te.track_uuid()];
        break;
      case pb::TrackEvent::TYPE_SLICE_END:
        ++d.ends[tid];
        if (--depth[te.track_uuid()] < 0)
          d.nested = false;
        break;
      case pb::TrackEvent::TYPE_INSTANT:
        d.send_instants += te.name() == "send";
        d.recv_instants += te.name() == "recv";
        break;
      case pb::TrackEvent::TYPE_COUNTER:
        ++d.counter_values;
        if (te.has_counter_value())
          d.last_counter[te.track_uuid()] = te.counter_value();
        break;
      default:
        break;
    }
    if (te.type() == pb::TrackEvent::TYPE_SLICE_BEGIN ||
        te.type() == pb::TrackEvent::TYPE_SLICE_END) {
      d.min_slice_ts = std::min<uint64_t>(d.min_slice_ts, p.timestamp());
      d.max_slice_ts = std::max<uint64_t>(d.max_slice_ts, p.timestamp());
    }
    for (uint64_t id : te.flow_ids())
      ++d.flow_starts[id];
    for (uint64_t id : te.terminating_flow_ids())
      ++d.flow_ends[id];
  }
  for (const auto& [uuid, n] : depth)
    if (n != 0)
      d.nested = false;
  return d;
}

std::unique_ptr<model::Session> Open(const std::string& path) {
  auto s = model::Session::Open(path);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.status().message());
  return s.ok() ? std::move(*s) : nullptr;
}

// The export equals the session in every fact the two can be compared on.
// *links: the last value of each "MPI bytes A -> B" counter.
void CheckExport(const model::Session& session,
                 const std::string& out,
                 std::map<std::string, int64_t>* links = nullptr) {
  auto stats = ExportPerfetto(session, {}, out);
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_GT(stats->events_read, 0u);
  const Expected x = Count(session);
  const Decoded d = Decode(out);
  EXPECT_EQ(d.begins, x.begins);
  EXPECT_EQ(d.ends, x.ends);
  EXPECT_EQ(d.names, x.names);
  EXPECT_TRUE(d.nested);
  // Threads: one track each, with the recorded tid, its process's pid and its name.
  std::map<uint32_t, std::string> thread_names;
  std::set<int32_t> process_pids;
  for (const auto& [uuid, t] : d.tracks) {
    if (t.has_thread()) {
      thread_names[static_cast<uint32_t>(t.thread().tid())] = t.thread().thread_name();
      EXPECT_TRUE(d.tracks.count(t.parent_uuid()) && d.tracks.at(t.parent_uuid()).has_process());
    }
    if (t.has_process())
      process_pids.insert(t.process().pid());
  }
  EXPECT_EQ(thread_names, x.thread_names);
  for (const auto& [id, l] : session.definitions().locations) {
    if (l.type == format::LocationType::kThread) {
      EXPECT_TRUE(process_pids.count(static_cast<int32_t>(l.pid))) << l.pid;
    }
  }
  // Messages: one instant each, and every flow joins exactly one send to one receive.
  EXPECT_EQ(d.send_instants, x.sends);
  EXPECT_EQ(d.recv_instants, x.recvs);
  for (const auto& [id, n] : d.flow_ends) {
    EXPECT_EQ(n, 1) << "flow " << id;
    EXPECT_EQ(d.flow_starts.count(id) ? d.flow_starts.at(id) : 0, 1) << "flow " << id;
  }
  // Scheduling and counters: CPU utilisation per sample, cumulative bytes per link per send.
  EXPECT_EQ(d.switch_ins, x.switch_ins);
  EXPECT_EQ(d.counter_values, x.cpu_samples + x.ranked_sends);
  std::map<std::string, int64_t> link_bytes;
  for (const auto& [uuid, v] : d.last_counter)
    if (d.tracks.at(uuid).name().rfind("MPI bytes ", 0) == 0)
      link_bytes[d.tracks.at(uuid).name()] = v;
  EXPECT_EQ(link_bytes, x.link_bytes);
  if (links)
    *links = link_bytes;
}

// threads_regions THREADS ITERATIONS under `parmon record`, opened (null on failure).
std::unique_ptr<model::Session> RecordThreads(const e2e::TempDir& dir,
                                              const std::string& threads,
                                              const std::string& iterations) {
  const std::string trace = dir.File("run.ptrace");
  auto r = e2e::Parmon(
      {"record", "-q", "-o", trace, "--", e2e::BinDir() + "/threads_regions", threads, iterations});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? Open(trace) : nullptr;
}

TEST(PerfettoExport, ThreadsWithRegions) {
  e2e::TempDir dir;
  auto session = RecordThreads(dir, "3", "20000");
  ASSERT_TRUE(session);
  CheckExport(*session, dir.File("out.pftrace"));
  const Expected x = Count(*session);
  // The program's own facts: three workers named by it, 20000 "work" slices each.
  int workers = 0;
  for (const auto& [key, n] : x.names)
    if (key.second == "work") {
      EXPECT_EQ(n, 20000u);
      EXPECT_EQ(x.thread_names.at(key.first).rfind("worker-", 0), 0u);
      ++workers;
    }
  EXPECT_EQ(workers, 3);
  // An output that cannot be written: one sentence, no crash.
  auto bad = ExportPerfetto(*session, {}, dir.File("no/such/dir/out.pftrace"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cannot write"), std::string::npos);
}

TEST(PerfettoExport, WindowCutsSlicesCleanly) {
  e2e::TempDir dir;
  auto session = RecordThreads(dir, "2", "200000");
  ASSERT_TRUE(session);
  const uint64_t span = session->end() - session->start();
  ExportOptions window{span / 3, 2 * span / 3};
  auto stats = ExportPerfetto(*session, window, dir.File("w.pftrace"));
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  const Decoded d = Decode(dir.File("w.pftrace"));
  EXPECT_TRUE(d.nested);
  EXPECT_EQ(d.begins, d.ends);
  EXPECT_GE(d.min_slice_ts, session->start() + window.from_ns);
  EXPECT_LE(d.max_slice_ts, session->start() + window.to_ns);
  auto all = ExportPerfetto(*session, {}, dir.File("all.pftrace"));
  ASSERT_TRUE(all.ok());
  EXPECT_LT(stats->events_read, all->events_read);
}

// The export of an mpi_patterns run (recorded as `trace`, one file or a per-rank directory),
// checked against the session and against the program's own output `said_text` (`pairs` pairs
// of ranks that exchange messages).
void CheckMpi(const std::string& trace,
              const std::string& said_text,
              const e2e::TempDir& dir,
              size_t pairs_expected) {
  auto session = Open(trace);
  ASSERT_TRUE(session);
  std::map<std::string, int64_t> links;
  CheckExport(*session, dir.File("out.pftrace"), &links);
  const Expected x = Count(*session);
  const Decoded d = Decode(dir.File("out.pftrace"));
  EXPECT_GT(x.sends, 0u);
  // The program's own account: "sent FROM TO MESSAGES BYTES" per pair.
  std::istringstream said(said_text);
  std::string word;
  size_t pairs = 0;
  while (said >> word) {
    if (word != "sent")
      continue;
    int64_t from, to, messages, bytes;
    said >> from >> to >> messages >> bytes;
    EXPECT_EQ(links["MPI bytes " + std::to_string(from) + " -> " + std::to_string(to)], bytes);
    ++pairs;
  }
  EXPECT_EQ(pairs, pairs_expected);
  EXPECT_EQ(links.size(), pairs_expected);
  // mpi_patterns receives every message it sends: every flow is complete.
  EXPECT_EQ(x.sends, x.recvs);
  EXPECT_EQ(d.flow_starts.size(), x.sends);
  EXPECT_EQ(d.flow_ends.size(), x.recvs);
  bool mpi_send = false;
  for (const auto& [key, n] : x.names)
    mpi_send |=
        key.second == "MPI_Send" || key.second == "MPI_Sendrecv" || key.second == "MPI_Isend";
  EXPECT_TRUE(mpi_send);
}

std::vector<std::string> MpiRun() {
  return {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "3"};
}

TEST(PerfettoExport, MpiMessagesBecomeFlows) {
  const std::string prog = e2e::BinDir() + "/mpi_patterns";
  if (access(prog.c_str(), X_OK) != 0)
    GTEST_SKIP() << "mpi_patterns not built (no MPI)";
  e2e::TempDir dir;
  std::vector<std::string> args = {"record", "-q", "-o", dir.File("run.ptrace"), "--"};
  for (const auto& a : MpiRun())
    args.push_back(a);
  args.push_back(prog);
  args.push_back("ring");
  auto r = e2e::Parmon(args, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CheckMpi(dir.File("run.ptrace"), r.out, dir, 3);
}

// One recorder per rank (mpirun ... parmon record -o RUN): a session of three files whose times
// are aligned on rank 0's clock. Ping-pong repeats each (sender, receiver, tag): the flows must
// join the k-th send to the k-th receive.
TEST(PerfettoExport, MpiPerRankSession) {
  const std::string prog = e2e::BinDir() + "/mpi_patterns";
  if (access(prog.c_str(), X_OK) != 0)
    GTEST_SKIP() << "mpi_patterns not built (no MPI)";
  e2e::TempDir dir;
  std::vector<std::string> argv = MpiRun();
  for (const std::string& a :
       {e2e::ParmonBin(), std::string("record"), std::string("-q"), std::string("-o"),
        dir.File("run"), std::string("--"), prog, std::string("pingpong")})
    argv.push_back(a);
  auto r = e2e::Run(argv, {}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(e2e::Exists(dir.File("run/rank-2.ptrace")));
  CheckMpi(dir.File("run"), r.out, dir, 2);
}

}  // namespace
}  // namespace parmon::exporter
