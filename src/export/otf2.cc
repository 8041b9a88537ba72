// ExportOtf2: the event pass of the OTF2 exporter (otf2_writer.h has the mapping; otf2_defs.cc
// writes the definitions). One merged pass over the window; each record goes to its location's
// OTF2 event writer, which flushes full 1 MiB chunks to the archive.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "export/otf2_writer.h"

namespace parmon::exporter {
namespace otf2 {
namespace {

using format::Kind;

OTF2_FlushType PreFlush(void*, OTF2_FileType, OTF2_LocationRef, void*, bool) {
  return OTF2_FLUSH;
}
// No post-flush callback: OTF2 then writes no BufferFlush records (a flush here is the exporter
// writing its file, not a pause of the program).
const OTF2_FlushCallbacks kFlush = {PreFlush, nullptr};

// OTF2's own chunk pool keeps every full chunk of a location in memory until the pool (128 MiB
// per writer) runs out. Ours allows kEventChunks per event writer: when they are full the
// allocation fails, which makes OTF2 flush that writer's chunks to its file, free them (FreeAll)
// and allocate again. Memory is then kEventChunks x 1 MiB per thread, whatever the trace's size.
constexpr size_t kEventChunks = 2;
struct ChunkPool {
  std::vector<void*> chunks;
};
void* Allocate(void*, OTF2_FileType type, OTF2_LocationRef, void** per_buffer, uint64_t size) {
  auto* pool = static_cast<ChunkPool*>(*per_buffer);
  if (!pool)
    *per_buffer = pool = new ChunkPool;
  if (type == OTF2_FILETYPE_EVENTS && pool->chunks.size() >= kEventChunks)
    return nullptr;  // flush first
  void* p = malloc(size);
  if (p)
    pool->chunks.push_back(p);
  return p;
}
void FreeAll(void*, OTF2_FileType, OTF2_LocationRef, void** per_buffer, bool final) {
  auto* pool = static_cast<ChunkPool*>(*per_buffer);
  if (!pool)
    return;
  for (void* p : pool->chunks)
    free(p);
  pool->chunks.clear();
  if (final) {
    delete pool;
    *per_buffer = nullptr;
  }
}
const OTF2_MemoryCallbacks kMemory = {Allocate, FreeAll};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

}  // namespace

bool CollectiveOp(std::string_view function, OTF2_CollectiveOp* op) {
  std::string f = Lower(function);
  if (f.rfind("mpi_", 0) == 0)
    f = f.substr(4);
  for (const char* suffix : {"_init", "_c"})
    if (f.size() > strlen(suffix) &&
        f.compare(f.size() - strlen(suffix), std::string::npos, suffix) == 0)
      f.resize(f.size() - strlen(suffix));
  if (!f.empty() && f[0] == 'i' && f != "iprobe")  // MPI_Iallreduce: the same operation
    f = f.substr(1);
  static const std::pair<const char*, OTF2_CollectiveOp> kOps[] = {
      {"barrier", OTF2_COLLECTIVE_OP_BARRIER},
      {"bcast", OTF2_COLLECTIVE_OP_BCAST},
      {"gather", OTF2_COLLECTIVE_OP_GATHER},
      {"gatherv", OTF2_COLLECTIVE_OP_GATHERV},
      {"scatter", OTF2_COLLECTIVE_OP_SCATTER},
      {"scatterv", OTF2_COLLECTIVE_OP_SCATTERV},
      {"allgather", OTF2_COLLECTIVE_OP_ALLGATHER},
      {"allgatherv", OTF2_COLLECTIVE_OP_ALLGATHERV},
      {"alltoall", OTF2_COLLECTIVE_OP_ALLTOALL},
      {"alltoallv", OTF2_COLLECTIVE_OP_ALLTOALLV},
      {"alltoallw", OTF2_COLLECTIVE_OP_ALLTOALLW},
      {"allreduce", OTF2_COLLECTIVE_OP_ALLREDUCE},
      {"reduce", OTF2_COLLECTIVE_OP_REDUCE},
      {"reduce_scatter", OTF2_COLLECTIVE_OP_REDUCE_SCATTER},
      {"reduce_scatter_block", OTF2_COLLECTIVE_OP_REDUCE_SCATTER_BLOCK},
      {"scan", OTF2_COLLECTIVE_OP_SCAN},
      {"exscan", OTF2_COLLECTIVE_OP_EXSCAN},
  };
  for (const auto& [name, o] : kOps)
    if (f == name) {
      *op = o;
      return true;
    }
  return false;
}

bool Writer::Check(OTF2_ErrorCode code, const char* what) {
  if (code != OTF2_SUCCESS && error_.ok())
    error_ = Status::Error(
        fmt::format("OTF2 could not {} in {}: {}", what, out_, OTF2_Error_GetDescription(code)));
  return code == OTF2_SUCCESS;
}

Status Writer::Open(const std::string& out) {
  out_ = out;
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec)
    return Status::Error(fmt::format("cannot create the directory {}: {}", out, ec.message()));
  if (std::filesystem::exists(out + "/traces.otf2"))
    return Status::Error(
        fmt::format("{} already holds an OTF2 archive (traces.otf2); remove it "
                    "or choose another directory",
                    out));
  archive_ = OTF2_Archive_Open(out.c_str(), "traces", OTF2_FILEMODE_WRITE, 1 << 20, 4 << 20,
                               OTF2_SUBSTRATE_POSIX, OTF2_COMPRESSION_NONE);
  if (!archive_)
    return Status::Error(fmt::format("OTF2 could not create an archive in {}", out));
  if (!Check(OTF2_Archive_SetFlushCallbacks(archive_, &kFlush, this), "set flush callbacks"))
    return error_;
  if (!Check(OTF2_Archive_SetMemoryCallbacks(archive_, &kMemory, nullptr), "set memory callbacks"))
    return error_;
  if (!Check(OTF2_Archive_SetSerialCollectiveCallbacks(archive_), "set collective callbacks"))
    return error_;
  if (!Check(OTF2_Archive_SetCreator(archive_, "parmon " PARMON_VERSION), "set the creator"))
    return error_;
  if (!session_.info().command.empty())
    if (!Check(OTF2_Archive_SetDescription(archive_, session_.info().command.c_str()), "describe"))
      return error_;
  if (!session_.info().host.empty())
    if (!Check(OTF2_Archive_SetMachineName(archive_, session_.info().host.c_str()),
               "name the machine"))
      return error_;
  if (!Check(OTF2_Archive_OpenEvtFiles(archive_), "open the event files"))
    return error_;

  // Thread locations, in definition order (rank 0's file first), grouped by process.
  for (const auto& [id, def] : session_.definitions().locations) {
    if (def.type != format::LocationType::kThread)
      continue;
    const auto key = std::make_pair(session_.FileOf(id), def.pid);
    auto [it, added] = processes_.try_emplace(key);
    Process& p = it->second;
    const OTF2_LocationRef ref = static_cast<OTF2_LocationRef>(location_order_.size());
    if (added) {
      p.name = ProcessLabel(session_, id);
      p.rank = session_.RankOf(id);
      if (p.rank >= 0)
        world_size_ = std::max<uint32_t>(world_size_, static_cast<uint32_t>(p.rank) + 1);
    }
    if (p.main == OTF2_UNDEFINED_LOCATION || def.tid == def.pid)
      p.main = ref;
    Location& l = locations_[id];
    l.parmon_id = id;
    l.ref = ref;
    l.group = static_cast<OTF2_LocationGroupRef>(std::distance(processes_.begin(), it));
    location_order_.push_back(id);
  }
  // Groups are indexed by position in processes_, which only grows at its end when keys come in
  // order; recompute to be safe now that every process is in.
  for (auto& [id, l] : locations_) {
    const auto key = std::make_pair(session_.FileOf(id), session_.PidOf(id));
    l.group =
        static_cast<OTF2_LocationGroupRef>(std::distance(processes_.begin(), processes_.find(key)));
  }
  // A writer for every location, so that each has its event file even with no event in the
  // window (readers open every location's file).
  for (auto& [id, l] : locations_)
    if (!WriterOf(l))
      return error_;
  return Status::Ok();
}

OTF2_EvtWriter* Writer::WriterOf(Location& l) {
  if (!l.writer) {
    l.writer = OTF2_Archive_GetEvtWriter(archive_, l.ref);
    if (!l.writer && error_.ok())
      error_ = Status::Error(fmt::format("OTF2 could not open an event writer in {}", out_));
  }
  return l.writer;
}

OTF2_RegionRef Writer::RegionOf(const Frame& f) {
  auto [it, added] = regions_.try_emplace({f.name, f.mpi}, 0);
  if (added)
    it->second = static_cast<OTF2_RegionRef>(regions_.size() - 1);
  return it->second;
}

Comm& Writer::CommOf(uint64_t parmon_comm) {
  auto [it, added] = comms_.try_emplace(parmon_comm);
  if (added) {
    it->second.ref = static_cast<OTF2_CommRef>(comms_.size() - 1);
    it->second.parmon_id = parmon_comm;
  }
  return it->second;
}

uint32_t Writer::RankIn(const Comm& c, int64_t world_rank) const {
  if (c.parmon_id == 2)  // MPI_COMM_SELF
    return 0;
  auto it = c.rank_of.find(static_cast<uint32_t>(world_rank));
  return it == c.rank_of.end() ? static_cast<uint32_t>(world_rank) : it->second;
}

void Writer::Leave(Location& l, const Frame& f, uint64_t ts) {
  OTF2_EvtWriter* w = WriterOf(l);
  if (!w)
    return;
  if (f.mpi && l.collective_open) {
    l.collective_open = false;
    Check(OTF2_EvtWriter_MpiCollectiveEnd(w, nullptr, ts, l.op, l.comm, l.root, l.sent, l.received),
          "write a collective end");
    ++l.events;
  }
  Check(OTF2_EvtWriter_Leave(w, nullptr, ts, RegionOf(f)), "write a leave");
  ++l.events;
}

void Writer::Mpi(Location& l, const format::Event& e) {
  OTF2_EvtWriter* w = WriterOf(l);
  if (!w)
    return;
  switch (e.kind_enum()) {
    case Kind::kMpiSend:
    case Kind::kMpiRecv: {
      const Comm& c = CommOf(e.args[2]);
      const uint32_t peer = RankIn(c, static_cast<int64_t>(e.args[0]));
      const uint32_t tag = static_cast<uint32_t>(e.args[1]);
      if (e.kind_enum() == Kind::kMpiRecv) {
        Check(OTF2_EvtWriter_MpiRecv(w, nullptr, e.ts, peer, c.ref, tag, e.args[3]),
              "write a receive");
      } else if (e.args[4] == 0) {
        Check(OTF2_EvtWriter_MpiSend(w, nullptr, e.ts, peer, c.ref, tag, e.args[3]),
              "write a send");
      } else {
        isends_[{l.parmon_id, e.args[4]}] = true;
        Check(OTF2_EvtWriter_MpiIsend(w, nullptr, e.ts, peer, c.ref, tag, e.args[3], e.args[4]),
              "write a send");
      }
      ++l.events;
      break;
    }
    case Kind::kMpiRequestDone:
      if (isends_.erase({l.parmon_id, e.args[0]})) {
        Check(OTF2_EvtWriter_MpiIsendComplete(w, nullptr, e.ts, e.args[0]),
              "write a send completion");
        ++l.events;
      }
      break;
    case Kind::kMpiCollective: {
      OTF2_CollectiveOp op;
      if (l.collective_open || !CollectiveOp(NameOf(session_, e.args[0]), &op))
        break;
      const Comm& c = CommOf(e.args[1]);
      const int64_t root = static_cast<int64_t>(e.args[2]);
      l.collective_open = true;
      l.op = op;
      l.comm = c.ref;
      l.root = root < 0 ? OTF2_UNDEFINED_UINT32 : RankIn(c, root);
      l.sent = e.args[3];
      l.received = e.args[4];
      Check(OTF2_EvtWriter_MpiCollectiveBegin(w, nullptr, e.ts), "write a collective begin");
      ++l.events;
      break;
    }
    default:
      break;
  }
}

// A switch in or out, or a user counter's value, as a Metric record of the location.
void Writer::Metric(Location& l, const format::Event& e) {
  OTF2_EvtWriter* w = WriterOf(l);
  if (!w)
    return;
  if (e.kind_enum() == Kind::kSwitchIn || e.kind_enum() == Kind::kSwitchOut) {
    const bool in = e.kind_enum() == Kind::kSwitchIn;
    const OTF2_Type types[2] = {OTF2_TYPE_INT64, OTF2_TYPE_INT64};
    OTF2_MetricValue values[2];
    values[0].signed_int = in ? kRunning : e.args[1] ? kPreempted : kBlocked;
    values[1].signed_int = in ? static_cast<int64_t>(e.args[0]) : -1;
    state_metric_ = true;
    Check(OTF2_EvtWriter_Metric(w, nullptr, e.ts, kStateClass, 2, types, values),
          "write a thread state");
  } else {
    const bool is_double = e.kind_enum() == Kind::kCounterDouble;
    auto [it, added] =
        counters_.try_emplace({static_cast<uint32_t>(e.args[0]), is_double}, CounterMetric{});
    if (added) {
      it->second.cls = static_cast<OTF2_MetricRef>(kStateClass + counters_.size());
      it->second.member = static_cast<OTF2_MetricMemberRef>(kCpuMember + counters_.size());
      it->second.name = static_cast<uint32_t>(e.args[0]);
      it->second.is_double = is_double;
    }
    const OTF2_Type type = is_double ? OTF2_TYPE_DOUBLE : OTF2_TYPE_INT64;
    OTF2_MetricValue value;
    if (is_double)
      std::memcpy(&value.floating_point, &e.args[1], sizeof(double));
    else
      value.signed_int = static_cast<int64_t>(e.args[1]);
    Check(OTF2_EvtWriter_Metric(w, nullptr, e.ts, it->second.cls, 1, &type, &value),
          "write a counter");
  }
  ++l.events;
}

void Writer::CommDef(const format::Event& e) {
  if (e.nargs < 3 || (e.args[2] & 1) != 0)
    return;  // intercommunicators: members are the remote group's, ranks stay world ranks
  // Members in communicator order (world ranks, u32 little-endian).
  Comm& c = CommOf(e.args[0]);
  const size_t n = std::min<size_t>(e.args[1], e.payload.size() / 4);
  if (!c.members.empty())
    return;
  for (size_t i = 0; i < n; ++i) {
    uint32_t r;
    std::memcpy(&r, e.payload.data() + 4 * i, 4);
    c.rank_of.emplace(r, static_cast<uint32_t>(c.members.size()));
    c.members.push_back(r);
  }
}

void Writer::Event(const format::Event& event) {
  if (event.kind_enum() == Kind::kMpiCommDef) {
    CommDef(event);
    return;
  }
  auto it = locations_.find(event.location);
  if (it == locations_.end())
    return;  // CPU locations and session-wide events have no OTF2 location
  Location& l = it->second;
  // OTF2 takes a location's records in time order only; a thread's own events can step back a
  // few ns (TSCs of two cores after a migration): such an event is written at its predecessor's
  // time.
  format::Event copy;
  const format::Event* ep = &event;
  if (event.ts < l.last_ts) [[unlikely]] {
    copy = event;
    copy.ts = l.last_ts;
    ep = &copy;
  }
  const format::Event& e = *ep;
  first_ts_ = std::min(first_ts_, e.ts);
  last_ts_ = std::max(last_ts_, e.ts);
  l.last_ts = e.ts;
  switch (e.kind_enum()) {
    case Kind::kRegionEnter:
    case Kind::kMpiEnter: {
      const Frame f{static_cast<uint32_t>(e.args[0]), e.kind_enum() == Kind::kMpiEnter};
      if (OTF2_EvtWriter* w = WriterOf(l)) {
        nesting_.Enter(e.location, f);
        Check(OTF2_EvtWriter_Enter(w, nullptr, e.ts, RegionOf(f)), "write an enter");
        ++l.events;
      }
      break;
    }
    case Kind::kRegionLeave:
    case Kind::kMpiLeave: {
      const Frame f{static_cast<uint32_t>(e.args[0]), e.kind_enum() == Kind::kMpiLeave};
      nesting_.Leave(e.location, f, [&](const Frame& g) { Leave(l, g, e.ts); });
      break;
    }
    case Kind::kMpiSend:
    case Kind::kMpiRecv:
    case Kind::kMpiRequestDone:
    case Kind::kMpiCollective:
      Mpi(l, e);
      break;
    case Kind::kSwitchIn:
    case Kind::kSwitchOut:
    case Kind::kCounterInt:
    case Kind::kCounterDouble:
      Metric(l, e);
      break;
    default:
      break;
  }
}

Status Writer::Events(ExportStats* stats) {
  if (filter_.from_ts > session_.start()) {
    // Communicators created before the window still name the ranks of messages inside it.
    model::MergeFilter before;
    before.to_ts = filter_.from_ts - 1;
    model::Merge defs(session_, before);
    defs.Run([&](const format::Event& e, model::StreamIndex) {
      if (e.kind_enum() == Kind::kMpiCommDef)
        CommDef(e);
    });
  }
  model::Merge merge(session_, filter_);
  merge.Run([&](const format::Event& e, model::StreamIndex) {
    ++stats->events_read;
    Event(e);
  });
  // What is still open at the end of the window closes at the last exported time.
  nesting_.CloseAll([&](uint32_t loc, const Frame& f) { Leave(locations_[loc], f, last_ts_); });
  for (auto& [id, l] : locations_) {
    records_ += l.events;
    if (l.writer)
      Check(OTF2_Archive_CloseEvtWriter(archive_, l.writer), "close an event writer");
    l.writer = nullptr;
  }
  stats->records_written = records_;
  return error_;
}

}  // namespace otf2

StatusOr<ExportStats> ExportOtf2(const model::Session& session,
                                 const ExportOptions& options,
                                 const std::string& out) {
  otf2::Writer writer(session, options);
  ExportStats stats;
  Status s = writer.Open(out);
  if (s.ok())
    s = writer.Events(&stats);
  Status closed = writer.Finish();  // closes the archive even after an error
  if (!s.ok())
    return s;
  if (!closed.ok())
    return closed;
  return stats;
}

}  // namespace parmon::exporter
