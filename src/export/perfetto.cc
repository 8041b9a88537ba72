// ExportPerfetto: a session as a Perfetto protobuf trace (Trace { repeated TracePacket packet = 1
// }, the file ui.perfetto.dev and trace_processor open). Written with libprotobuf from
// perfetto_trace.proto (the subset of Perfetto's public schema used here).
//
// What maps to what:
// - one process track per (file, pid) and one thread track per thread location, with pid, tid and
//   names (TrackDescriptor with ProcessDescriptor / ThreadDescriptor), all written first;
// - RegionEnter/Leave and MpiEnter/Leave: TYPE_SLICE_BEGIN/END on the thread's track (names from
//   the session's definitions: the region, or the MPI function as recorded);
// - MpiSend/MpiRecv: instant events "send"/"recv" inside the call's slice, joined by a flow: the
//   k-th send from rank A to rank B on (comm, tag) and the k-th receive of it on B get the same
//   flow id (a hash of the five), flow_ids on the send, terminating_flow_ids on the receive;
// - Marker, TraceEvent, Lost: instant events;
// - SwitchIn/SwitchOut: ftrace sched_switch events in FtraceEventBundle packets per CPU, from which
//   trace_processor builds its CPU tracks and thread states (other processes are not recorded:
//   between two of the session's threads a CPU shows as idle);
// - CpuSample: a counter track per CPU (utilisation in %, from the interval's start);
//   CounterInt/CounterDouble: a counter track per (thread, counter) under the thread's track.
//
// Streaming: each packet is serialized and appended as it is made (field 1 of Trace, length
// delimited) into a 1 MiB buffer written out when full. State is per location, per CPU, per
// counter and per (sender, receiver, comm, tag) of messages: flat in the event count. Slices a
// --from/--to window cuts are handled: an end without its begin is dropped, slices still open at
// the window's end are closed at the last time seen.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>

#include "export/export.h"
#include "model/merge.h"
#include "perfetto_trace.pb.h"

namespace parmon::exporter {
namespace {

namespace pb = parmon::pftrace;
using format::Kind;

constexpr uint32_t kTrackSequence = 1;   // trusted_packet_sequence_id of the track events
constexpr uint32_t kFtraceSequence = 2;  // and of the ftrace bundles
constexpr size_t kBundleEvents = 512;    // sched_switch events per FtraceEventBundle
constexpr size_t kFlushBytes = 1 << 20;
// Track uuids: a thread's is its location id (events name their track: a short varint); process
// and counter tracks sit above every location id.
constexpr uint64_t kProcessUuids = 1ull << 60;
constexpr uint64_t kCounterUuids = 1ull << 40;

uint64_t Mix(uint64_t h, uint64_t v) {  // splitmix64 step over a running hash
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// Appends packets to the output file as Trace.packet (field 1, length delimited).
class PacketWriter {
 public:
  explicit PacketWriter(FILE* f) : f_(f) {}
  void Write(const pb::TracePacket& p) {
    const size_t n = p.ByteSizeLong();
    uint8_t head[11];
    size_t h = 0;
    head[h++] = 0x0a;  // field 1, wire type 2
    for (uint64_t v = n;; v >>= 7) {
      head[h++] = static_cast<uint8_t>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
      if (v < 0x80)
        break;
    }
    const size_t old = buf_.size();
    buf_.resize(old + h + n);
    std::memcpy(&buf_[old], head, h);
    p.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(&buf_[old + h]));
    ++packets_;
    if (buf_.size() >= kFlushBytes)
      Flush();
  }
  void Flush() {
    if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size())
      failed_ = true;
    buf_.clear();
  }
  bool failed() const { return failed_; }
  uint64_t packets() const { return packets_; }

 private:
  FILE* f_;
  std::string buf_;
  uint64_t packets_ = 0;
  bool failed_ = false;
};

struct Thread {
  uint64_t uuid = 0;
  uint64_t process_uuid = 0;
  int32_t pid = 0;  // as written (see AssignPids)
  int32_t tid = 0;
  int64_t rank = -1;
  uint32_t depth = 0;  // open slices
  std::string comm;    // name as the kernel would show it (15 chars)
};

struct Cpu {
  int32_t running = 0;  // tid running as far as the export knows, 0 = none of the session's
  std::string running_comm;
  pb::FtraceEventBundle bundle;
};

class Exporter {
 public:
  Exporter(const model::Session& session, FILE* f) : session_(session), out_(f) {}
  void WriteDescriptors();
  void Consume(const format::Event& e);
  void Finish();
  const PacketWriter& writer() const { return out_; }
  uint64_t records() const { return records_; }

 private:
  const std::string& Name(uint64_t id);
  pb::TrackEvent* NewEvent(uint64_t ts, uint64_t track, pb::TrackEvent::Type type);
  void EmitEvent() {
    out_.Write(packet_);
    ++records_;
  }
  void Slice(const format::Event& e, Thread& t, bool begin, const char* category);
  void Instant(const format::Event& e, Thread& t, const std::string& name, const char* category);
  void Message(const format::Event& e, Thread& t, bool send);
  void Switch(const format::Event& e, Thread& t, bool in);
  void SchedSwitch(uint64_t ts,
                   uint32_t cpu,
                   Cpu& c,
                   int32_t next,
                   const std::string& next_comm,
                   int64_t prev_state);
  void FlushBundle(uint32_t cpu, Cpu& c);
  void LinkCounter(const format::Event& e, const Thread& t, int64_t to);
  void CounterTrack(uint64_t uuid,
                    uint64_t parent,
                    const std::string& name,
                    pb::CounterDescriptor::Unit unit);
  void CpuCounter(const format::Event& e);
  void UserCounter(const format::Event& e, Thread& t);

  const model::Session& session_;
  PacketWriter out_;
  pb::TracePacket packet_;  // reused: cleared messages keep their allocations
  std::unordered_map<uint32_t, Thread> threads_;
  std::map<uint32_t, Cpu> cpus_;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> counter_tracks_;  // (location, id) -> uuid
  std::map<std::tuple<int64_t, int64_t, uint64_t, uint64_t>, uint64_t> sent_, received_;
  std::map<std::pair<int64_t, int64_t>, std::pair<uint64_t, uint64_t>> links_;  // uuid, bytes
  std::unordered_map<uint64_t, std::string> missing_names_;
  uint64_t next_counter_uuid_ = kCounterUuids;
  uint64_t last_ts_ = 0;
  uint64_t records_ = 0;
};

const std::string& Exporter::Name(uint64_t id) {
  const auto& strings = session_.definitions().strings;
  auto it = strings.find(static_cast<uint32_t>(id));
  if (it != strings.end())
    return it->second.text;
  auto [m, inserted] = missing_names_.try_emplace(id);
  if (inserted)
    m->second.append("#").append(std::to_string(id));
  return m->second;
}

// Process and thread tracks. Pids of different files (ranks on other nodes) can collide; a
// colliding one is written as pid + (file << 22) (above Linux's pid_max), its threads likewise,
// so that Perfetto keeps them apart.
void Exporter::WriteDescriptors() {
  const auto& defs = session_.definitions();
  std::map<std::pair<uint32_t, uint32_t>, int32_t> pid_of;  // (file, pid) -> pid written
  std::map<int32_t, uint32_t> file_of_pid;
  bool first = true;
  auto write = [&]() {
    packet_.set_trusted_packet_sequence_id(kTrackSequence);
    if (first)
      packet_.set_sequence_flags(1);  // SEQ_INCREMENTAL_STATE_CLEARED
    first = false;
    out_.Write(packet_);
    ++records_;
  };
  for (const auto& [id, l] : defs.locations) {
    if (l.type == format::LocationType::kCpu)
      continue;
    const uint32_t file = session_.FileOf(id);
    auto [it, fresh] = pid_of.try_emplace({file, l.pid}, static_cast<int32_t>(l.pid));
    const uint64_t process_uuid = kProcessUuids | (uint64_t{file} << 32) | l.pid;
    if (fresh) {
      if (auto used = file_of_pid.find(it->second);
          used != file_of_pid.end() && used->second != file)
        it->second = static_cast<int32_t>(l.pid + (file << 22));
      file_of_pid[it->second] = file;
      packet_.Clear();
      auto* td = packet_.mutable_track_descriptor();
      td->set_uuid(process_uuid);
      auto* pd = td->mutable_process();
      pd->set_pid(it->second);
      std::string name;
      if (auto p = defs.processes.find(l.pid); p != defs.processes.end()) {
        std::string cmd = p->second.command;
        std::replace(cmd.begin(), cmd.end(), '\0', ' ');
        pd->add_cmdline(cmd);
        name = format::CommandName(p->second.command);
      }
      if (int64_t rank = session_.RankOf(id); rank >= 0)
        name += " [rank " + std::to_string(rank) + "]";
      if (!name.empty())
        pd->set_process_name(name);
      write();
    }
    if (l.type != format::LocationType::kThread)
      continue;
    Thread& t = threads_[id];
    t.uuid = id;  // small: every event names its track
    t.process_uuid = process_uuid;
    t.pid = it->second;
    t.tid = static_cast<int32_t>(it->second == static_cast<int32_t>(l.pid) ? l.tid
                                                                           : l.tid + (file << 22));
    t.rank = session_.RankOf(id);
    t.comm = l.name.substr(0, 15);
    packet_.Clear();
    auto* td = packet_.mutable_track_descriptor();
    td->set_uuid(t.uuid);
    td->set_parent_uuid(process_uuid);
    auto* thd = td->mutable_thread();
    thd->set_pid(t.pid);
    thd->set_tid(t.tid);
    if (!l.name.empty())
      thd->set_thread_name(l.name);
    write();
  }
}

pb::TrackEvent* Exporter::NewEvent(uint64_t ts, uint64_t track, pb::TrackEvent::Type type) {
  packet_.Clear();
  packet_.set_timestamp(ts);
  packet_.set_trusted_packet_sequence_id(kTrackSequence);
  pb::TrackEvent* te = packet_.mutable_track_event();
  te->set_type(type);
  te->set_track_uuid(track);
  return te;
}

void Exporter::Slice(const format::Event& e, Thread& t, bool begin, const char* category) {
  if (!begin && t.depth == 0)
    return;  // its begin was before the window
  pb::TrackEvent* te = NewEvent(
      e.ts, t.uuid, begin ? pb::TrackEvent::TYPE_SLICE_BEGIN : pb::TrackEvent::TYPE_SLICE_END);
  if (begin) {
    te->set_name(Name(e.args[0]));
    te->add_categories(category);
    ++t.depth;
  } else {
    --t.depth;
  }
  EmitEvent();
}

void Exporter::Instant(const format::Event& e,
                       Thread& t,
                       const std::string& name,
                       const char* category) {
  pb::TrackEvent* te = NewEvent(e.ts, t.uuid, pb::TrackEvent::TYPE_INSTANT);
  te->set_name(name);
  te->add_categories(category);
  if (e.kind_enum() == Kind::kLost || e.kind_enum() == Kind::kRingLost) {
    auto* a = te->add_debug_annotations();
    a->set_name("count");
    a->set_uint_value(e.args[0]);
  }
  EmitEvent();
}

// A send or receive as an instant event carrying the message's flow id (see the file comment).
void Exporter::Message(const format::Event& e, Thread& t, bool send) {
  static const std::string kSend = "send", kRecv = "recv";
  pb::TrackEvent* te = NewEvent(e.ts, t.uuid, pb::TrackEvent::TYPE_INSTANT);
  te->set_name(send ? kSend : kRecv);
  te->add_categories("mpi");
  const int64_t peer = static_cast<int64_t>(e.args[0]);
  const uint64_t tag = e.args[1], comm = e.args[2];
  auto annotate = [&](const char* name, int64_t v) {
    auto* a = te->add_debug_annotations();
    a->set_name(name);
    a->set_int_value(v);
  };
  annotate(send ? "to" : "from", peer);
  annotate("tag", static_cast<int64_t>(tag));
  annotate("comm", static_cast<int64_t>(comm));
  annotate("bytes", static_cast<int64_t>(e.args[3]));
  if (t.rank >= 0) {
    const int64_t from = send ? t.rank : peer, to = send ? peer : t.rank;
    uint64_t& k = (send ? sent_ : received_)[{from, to, comm, tag}];
    uint64_t id = Mix(
        Mix(Mix(Mix(Mix(0, static_cast<uint64_t>(from)), static_cast<uint64_t>(to)), comm), tag),
        k++);
    id = id ? id : 1;
    if (send)
      te->add_flow_ids(id);
    else
      te->add_terminating_flow_ids(id);
  }
  EmitEvent();
  if (send && t.rank >= 0)
    LinkCounter(e, t, peer);
}

void Exporter::FlushBundle(uint32_t cpu, Cpu& c) {
  if (c.bundle.event_size() == 0)
    return;
  packet_.Clear();
  packet_.set_trusted_packet_sequence_id(kFtraceSequence);
  packet_.mutable_ftrace_events()->Swap(&c.bundle);
  packet_.mutable_ftrace_events()->set_cpu(cpu);
  out_.Write(packet_);
  c.bundle.Clear();
}

void Exporter::SchedSwitch(uint64_t ts,
                           uint32_t cpu,
                           Cpu& c,
                           int32_t next,
                           const std::string& next_comm,
                           int64_t prev_state) {
  static const std::string kIdle = "swapper";
  pb::FtraceEvent* fe = c.bundle.add_event();
  fe->set_timestamp(ts);
  fe->set_pid(static_cast<uint32_t>(c.running));
  pb::SchedSwitchFtraceEvent* s = fe->mutable_sched_switch();
  s->set_prev_pid(c.running);
  s->set_prev_comm(c.running ? c.running_comm : kIdle);
  s->set_prev_prio(120);
  s->set_prev_state(c.running ? prev_state : 0);
  s->set_next_pid(next);
  s->set_next_comm(next ? next_comm : kIdle);
  s->set_next_prio(120);
  c.running = next;
  c.running_comm = next ? next_comm : std::string();
  ++records_;
  if (static_cast<size_t>(c.bundle.event_size()) >= kBundleEvents)
    FlushBundle(cpu, c);
}

// SwitchIn(cpu): the CPU switches from what ran there (none of ours: idle) to the thread.
// SwitchOut(cpu, preempt): from the thread to idle, its state R (preempted) or S (blocked); a
// switch-out the CPU's next switch-in (same time, merged first) already covered is dropped.
void Exporter::Switch(const format::Event& e, Thread& t, bool in) {
  const uint32_t cpu = static_cast<uint32_t>(e.args[0]);
  Cpu& c = cpus_[cpu];
  if (in) {
    SchedSwitch(e.ts, cpu, c, t.tid, t.comm, 0);
    return;
  }
  if (c.running != 0 && c.running != t.tid)
    return;
  if (c.running == 0) {  // switched in before the window: it ran until now
    c.running = t.tid;
    c.running_comm = t.comm;
  }
  SchedSwitch(e.ts, cpu, c, 0, {}, e.args[1] ? 0 : 1);
}

void Exporter::CounterTrack(uint64_t uuid,
                            uint64_t parent,
                            const std::string& name,
                            pb::CounterDescriptor::Unit unit) {
  packet_.Clear();
  packet_.set_trusted_packet_sequence_id(kTrackSequence);
  auto* td = packet_.mutable_track_descriptor();
  td->set_uuid(uuid);
  if (parent)
    td->set_parent_uuid(parent);
  td->set_name(name);
  td->mutable_counter()->set_unit(unit);
  EmitEvent();
}

// Bytes sent from one rank to another, cumulative (the UI's rate view shows bytes/s per link),
// under the sending process.
void Exporter::LinkCounter(const format::Event& e, const Thread& t, int64_t to) {
  auto [it, fresh] = links_.try_emplace({t.rank, to}, next_counter_uuid_, 0);
  if (fresh) {
    ++next_counter_uuid_;
    std::string name = "MPI bytes ";
    name.append(std::to_string(t.rank)).append(" -> ").append(std::to_string(to));
    CounterTrack(it->second.first, t.process_uuid, name, pb::CounterDescriptor::UNIT_SIZE_BYTES);
  }
  it->second.second += e.args[3];
  pb::TrackEvent* te = NewEvent(e.ts, it->second.first, pb::TrackEvent::TYPE_COUNTER);
  te->set_counter_value(static_cast<int64_t>(it->second.second));
  EmitEvent();
}

void Exporter::CpuCounter(const format::Event& e) {
  const uint64_t total = e.args[0] + e.args[1] + e.args[2] + e.args[3];
  if (total == 0)
    return;
  auto [it, fresh] = counter_tracks_.try_emplace({e.location, UINT64_MAX}, next_counter_uuid_);
  if (fresh) {
    ++next_counter_uuid_;
    CounterTrack(it->second, 0, std::string(session_.NameOf(e.location)) + " utilisation %",
                 pb::CounterDescriptor::UNIT_UNSPECIFIED);
  }
  // The sample covers the interval ending at ts: the value holds from its start.
  const uint64_t at = e.ts > total ? e.ts - total : e.ts;
  pb::TrackEvent* te = NewEvent(at, it->second, pb::TrackEvent::TYPE_COUNTER);
  te->set_double_counter_value(100.0 * static_cast<double>(e.args[0]) / static_cast<double>(total));
  EmitEvent();
}

void Exporter::UserCounter(const format::Event& e, Thread& t) {
  auto [it, fresh] = counter_tracks_.try_emplace({e.location, e.args[0]}, next_counter_uuid_);
  if (fresh) {
    ++next_counter_uuid_;
    CounterTrack(it->second, t.uuid, Name(e.args[0]), pb::CounterDescriptor::UNIT_UNSPECIFIED);
  }
  pb::TrackEvent* te = NewEvent(e.ts, it->second, pb::TrackEvent::TYPE_COUNTER);
  if (e.kind_enum() == Kind::kCounterInt) {
    te->set_counter_value(static_cast<int64_t>(e.args[1]));
  } else {
    double v;
    std::memcpy(&v, &e.args[1], sizeof v);
    te->set_double_counter_value(v);
  }
  EmitEvent();
}

void Exporter::Consume(const format::Event& e) {
  last_ts_ = std::max(last_ts_, e.ts);
  if (e.kind_enum() == Kind::kCpuSample) {
    CpuCounter(e);
    return;
  }
  auto found = threads_.find(e.location);
  if (found == threads_.end())
    return;  // CPU or process locations: nothing else of theirs has a place here
  Thread& t = found->second;
  switch (e.kind_enum()) {
    case Kind::kRegionEnter:
    case Kind::kRegionLeave:
      Slice(e, t, e.kind_enum() == Kind::kRegionEnter, "region");
      break;
    case Kind::kMpiEnter:
    case Kind::kMpiLeave:
      Slice(e, t, e.kind_enum() == Kind::kMpiEnter, "mpi");
      break;
    case Kind::kMpiSend:
    case Kind::kMpiRecv:
      Message(e, t, e.kind_enum() == Kind::kMpiSend);
      break;
    case Kind::kMarker:
      Instant(e, t, Name(e.args[0]), "marker");
      break;
    case Kind::kTraceEvent:
    case Kind::kTraceData: {
      const auto& names = session_.definitions().event_names;
      auto n = names.find(static_cast<uint32_t>(e.args[0]));
      if (n != names.end()) {
        Instant(e, t, n->second, "event");
      } else {
        std::string name = "event ";
        Instant(e, t, name.append(std::to_string(e.args[0])), "event");
      }
      break;
    }
    case Kind::kLost:
    case Kind::kRingLost:
      Instant(e, t, "events lost", "parmon");
      break;
    case Kind::kCounterInt:
    case Kind::kCounterDouble:
      UserCounter(e, t);
      break;
    case Kind::kSwitchIn:
    case Kind::kSwitchOut:
      Switch(e, t, e.kind_enum() == Kind::kSwitchIn);
      break;
    default:
      break;
  }
}

void Exporter::Finish() {
  // Slices the window's end cut stay open in the data: close them where the export stops.
  for (auto& [id, t] : threads_) {
    while (t.depth > 0) {
      NewEvent(last_ts_, t.uuid, pb::TrackEvent::TYPE_SLICE_END);
      EmitEvent();
      --t.depth;
    }
  }
  for (auto& [cpu, c] : cpus_)
    FlushBundle(cpu, c);
  out_.Flush();
}

}  // namespace

StatusOr<ExportStats> ExportPerfetto(const model::Session& session,
                                     const ExportOptions& options,
                                     const std::string& out) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(out.c_str(), "wb"), &std::fclose);
  if (!f)
    return Status::Error("cannot write " + out + ": " + std::strerror(errno));
  model::MergeFilter filter;
  filter.from_ts = session.start() + options.from_ns;
  if (options.to_ns != UINT64_MAX)
    filter.to_ts = session.start() + options.to_ns;
  Exporter exporter(session, f.get());
  exporter.WriteDescriptors();
  ExportStats stats;
  model::Merge merge(session, filter);
  merge.Run([&](const format::Event& e, model::StreamIndex) {
    ++stats.events_read;
    exporter.Consume(e);
  });
  exporter.Finish();
  if (exporter.writer().failed() || std::fflush(f.get()) != 0)
    return Status::Error("cannot write " + out + ": " + std::strerror(errno));
  stats.records_written = exporter.records();
  return stats;
}

}  // namespace parmon::exporter
