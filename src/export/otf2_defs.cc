// The OTF2 exporter's definitions, written once after the events (otf2_writer.h): clock
// properties from the aligned session clock, the system tree (machine > host), a location group
// per process, a location per thread with its event count, a region per user region and MPI
// function, and the MPI communicators (COMM_LOCATIONS: each rank's main thread; a COMM_GROUP per
// communicator in its rank order), and the metrics: the thread state and each user counter.
#include <fmt/format.h>

#include "export/otf2_writer.h"

namespace parmon::exporter::otf2 {

struct DefsWriter {
  Writer& w;
  OTF2_GlobalDefWriter* gdw = nullptr;
  std::map<std::string, OTF2_StringRef> strings;

  OTF2_StringRef Str(const std::string& s) {
    auto [it, added] = strings.try_emplace(s, static_cast<OTF2_StringRef>(strings.size()));
    if (added)
      w.Check(OTF2_GlobalDefWriter_WriteString(gdw, it->second, s.c_str()), "write a string");
    return it->second;
  }

  static OTF2_RegionRole Role(std::string_view name, bool mpi) {
    if (!mpi)
      return OTF2_REGION_ROLE_FUNCTION;
    OTF2_CollectiveOp op;
    if (CollectiveOp(name, &op)) {
      switch (op) {
        case OTF2_COLLECTIVE_OP_BARRIER:
          return OTF2_REGION_ROLE_BARRIER;
        case OTF2_COLLECTIVE_OP_BCAST:
        case OTF2_COLLECTIVE_OP_SCATTER:
        case OTF2_COLLECTIVE_OP_SCATTERV:
          return OTF2_REGION_ROLE_COLL_ONE2ALL;
        case OTF2_COLLECTIVE_OP_GATHER:
        case OTF2_COLLECTIVE_OP_GATHERV:
        case OTF2_COLLECTIVE_OP_REDUCE:
          return OTF2_REGION_ROLE_COLL_ALL2ONE;
        case OTF2_COLLECTIVE_OP_SCAN:
        case OTF2_COLLECTIVE_OP_EXSCAN:
          return OTF2_REGION_ROLE_COLL_OTHER;
        default:
          return OTF2_REGION_ROLE_COLL_ALL2ALL;
      }
    }
    std::string lower(name);
    for (char& c : lower)
      c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    for (const char* p2p : {"send", "recv", "probe"})
      if (lower.find(p2p) != std::string::npos)
        return OTF2_REGION_ROLE_POINT2POINT;
    return OTF2_REGION_ROLE_FUNCTION;
  }

  void Clock() {
    const uint64_t offset = w.first_ts_ == UINT64_MAX ? w.session_.start() : w.first_ts_;
    const uint64_t length = w.last_ts_ >= offset ? w.last_ts_ - offset : 0;
    const auto& info = w.session_.info();
    // Wall-clock time at the archive's first timestamp.
    uint64_t realtime = OTF2_UNDEFINED_TIMESTAMP;
    if (info.start_realtime_ns != 0 && offset >= info.start_ts)
      realtime = info.start_realtime_ns + (offset - info.start_ts);
    w.Check(OTF2_GlobalDefWriter_WriteClockProperties(gdw, 1000000000, offset, length, realtime),
            "write the clock properties");
  }

  // machine > one node per host (a per-rank session's files name each rank's host) > a
  // location group per process > a location per thread.
  void Tree() {
    w.Check(OTF2_GlobalDefWriter_WriteSystemTreeNode(gdw, 0, Str("machine"), Str("machine"),
                                                     OTF2_UNDEFINED_SYSTEM_TREE_NODE),
            "write the system tree");
    std::map<std::string, OTF2_SystemTreeNodeRef> nodes;
    auto node_of = [&](uint32_t file) {
      std::string host = w.session_.reader().PartHost(file);
      if (host.empty())
        host = "localhost";
      auto [it, added] = nodes.try_emplace(host, static_cast<OTF2_SystemTreeNodeRef>(1));
      if (added) {
        it->second = static_cast<OTF2_SystemTreeNodeRef>(nodes.size());
        w.Check(
            OTF2_GlobalDefWriter_WriteSystemTreeNode(gdw, it->second, Str(host), Str("node"), 0),
            "write the system tree");
      }
      return it->second;
    };
    OTF2_LocationGroupRef g = 0;
    for (const auto& [key, p] : w.processes_) {
      const OTF2_SystemTreeNodeRef node = node_of(key.first);
      w.Check(OTF2_GlobalDefWriter_WriteLocationGroup(gdw, g++, Str(p.name),
                                                      OTF2_LOCATION_GROUP_TYPE_PROCESS, node,
                                                      OTF2_UNDEFINED_LOCATION_GROUP),
              "write a location group");
    }
    if (nodes.empty())
      node_of(0);
    for (uint32_t id : w.location_order_) {
      const Location& l = w.locations_.at(id);
      w.Check(OTF2_GlobalDefWriter_WriteLocation(gdw, l.ref, Str(ThreadLabel(w.session_, id)),
                                                 OTF2_LOCATION_TYPE_CPU_THREAD, l.events, l.group),
              "write a location");
    }
  }

  void Regions() {
    for (const auto& [key, ref] : w.regions_) {
      const std::string name = NameOf(w.session_, key.first);
      const OTF2_StringRef s = Str(name);
      w.Check(OTF2_GlobalDefWriter_WriteRegion(gdw, ref, s, s, Str(""), Role(name, key.second),
                                               key.second ? OTF2_PARADIGM_MPI : OTF2_PARADIGM_USER,
                                               OTF2_REGION_FLAG_NONE, Str(""), 0, 0),
              "write a region");
    }
  }

  void Member(OTF2_MetricMemberRef ref,
              const std::string& name,
              const char* description,
              OTF2_Type type) {
    w.Check(OTF2_GlobalDefWriter_WriteMetricMember(
                gdw, ref, Str(name), Str(description), OTF2_METRIC_TYPE_USER,
                OTF2_METRIC_ABSOLUTE_POINT, type, OTF2_BASE_DECIMAL, 0, Str("")),
            "write a metric member");
  }

  void Class(OTF2_MetricRef ref, const std::vector<OTF2_MetricMemberRef>& members) {
    w.Check(OTF2_GlobalDefWriter_WriteMetricClass(gdw, ref, static_cast<uint8_t>(members.size()),
                                                  members.data(), OTF2_METRIC_ASYNCHRONOUS,
                                                  OTF2_RECORDER_KIND_ABSTRACT),
            "write a metric class");
  }

  void Metrics() {
    // Class refs must be defined for every ref used: the state class is written when a switch
    // was, or when counters (whose refs follow it) were.
    if (w.state_metric_ || !w.counters_.empty()) {
      Member(kStateMember, "thread state", "2 running, 1 preempted (runnable), 0 blocked",
             OTF2_TYPE_INT64);
      Member(kCpuMember, "cpu", "the CPU the thread runs on, -1 off CPU", OTF2_TYPE_INT64);
      Class(kStateClass, {kStateMember, kCpuMember});
    }
    for (const auto& [key, c] : w.counters_) {
      Member(c.member, NameOf(w.session_, c.name), "a counter of the program",
             c.is_double ? OTF2_TYPE_DOUBLE : OTF2_TYPE_INT64);
      Class(c.cls, {c.member});
    }
  }

  void Comms() {
    if (w.comms_.empty())
      return;
    // COMM_LOCATIONS: rank r's main thread at index r.
    std::vector<uint64_t> by_rank(w.world_size_, OTF2_UNDEFINED_LOCATION);
    for (const auto& [key, p] : w.processes_)
      if (p.rank >= 0 && static_cast<uint64_t>(p.rank) < by_rank.size())
        by_rank[p.rank] = p.main;
    for (auto& loc : by_rank)  // a rank whose process was not recorded: some location
      if (loc == OTF2_UNDEFINED_LOCATION)
        loc = 0;
    OTF2_GroupRef next = 0;
    const OTF2_GroupRef locations = next++;
    w.Check(OTF2_GlobalDefWriter_WriteGroup(
                gdw, locations, Str("MPI ranks"), OTF2_GROUP_TYPE_COMM_LOCATIONS, OTF2_PARADIGM_MPI,
                OTF2_GROUP_FLAG_NONE, static_cast<uint32_t>(by_rank.size()), by_rank.data()),
            "write a group");
    std::vector<uint64_t> world(w.world_size_);
    for (uint32_t r = 0; r < w.world_size_; ++r)
      world[r] = r;
    for (const auto& [id, c] : w.comms_) {
      std::string name = id == 1   ? "MPI_COMM_WORLD"
                         : id == 2 ? "MPI_COMM_SELF"
                                   : fmt::format("comm {:#x}", id);
      const OTF2_GroupRef group = next++;
      if (id == 2) {
        w.Check(
            OTF2_GlobalDefWriter_WriteGroup(gdw, group, Str(name), OTF2_GROUP_TYPE_COMM_SELF,
                                            OTF2_PARADIGM_MPI, OTF2_GROUP_FLAG_NONE, 0, nullptr),
            "write a group");
      } else {
        std::vector<uint64_t> members(c.members.begin(), c.members.end());
        if (members.empty())  // MPI_COMM_WORLD, or a communicator whose definition was not seen
          members = world;
        w.Check(OTF2_GlobalDefWriter_WriteGroup(
                    gdw, group, Str(name), OTF2_GROUP_TYPE_COMM_GROUP, OTF2_PARADIGM_MPI,
                    OTF2_GROUP_FLAG_NONE, static_cast<uint32_t>(members.size()), members.data()),
                "write a group");
      }
      w.Check(OTF2_GlobalDefWriter_WriteComm(gdw, c.ref, Str(name), group, OTF2_UNDEFINED_COMM,
                                             OTF2_COMM_FLAG_NONE),
              "write a communicator");
    }
  }
};

Status Writer::Finish() {
  if (!archive_)
    return error_;
  for (auto& [id, l] : locations_)
    if (l.writer) {
      OTF2_Archive_CloseEvtWriter(archive_, l.writer);
      l.writer = nullptr;
    }
  Check(OTF2_Archive_CloseEvtFiles(archive_), "close the event files");
  // Local definition files (empty: every reference is global) for every location.
  if (Check(OTF2_Archive_OpenDefFiles(archive_), "open the definition files")) {
    for (uint32_t id : location_order_) {
      OTF2_DefWriter* d = OTF2_Archive_GetDefWriter(archive_, locations_.at(id).ref);
      if (d)
        Check(OTF2_Archive_CloseDefWriter(archive_, d), "close a definition writer");
    }
    Check(OTF2_Archive_CloseDefFiles(archive_), "close the definition files");
  }
  DefsWriter defs{*this};
  defs.gdw = OTF2_Archive_GetGlobalDefWriter(archive_);
  if (!defs.gdw) {
    Check(OTF2_ERROR_INVALID, "open the global definition writer");
  } else {
    defs.Clock();
    defs.Tree();
    defs.Regions();
    defs.Comms();
    defs.Metrics();
  }
  Check(OTF2_Archive_Close(archive_), "close the archive");
  archive_ = nullptr;
  return error_;
}

}  // namespace parmon::exporter::otf2
