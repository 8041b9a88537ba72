// The OTF2 exporter's state (otf2.cc writes events, otf2_defs.cc the definitions at the end).
//
// Mapping (docs/export.md has the table): every thread location is an OTF2 location
// (CPU_THREAD), grouped into a location group per process (PROCESS) under a system tree node per
// host; user regions and every MPI function are OTF2 regions (paradigm USER / MPI); MpiSend and
// MpiRecv become MpiSend/MpiIsend(+MpiIsendComplete) and MpiRecv records with communicator, tag
// and bytes, peers as ranks in their communicator; MpiCollective becomes MpiCollectiveBegin (at
// the event) and MpiCollectiveEnd (at the call's leave). Context switches become a Metric record
// of the "thread state" class (members "thread state": 2 running, 1 preempted and runnable,
// 0 blocked; "cpu": the CPU it runs on, -1 off CPU); each user counter is a metric class of its
// own. Times are aligned ns (resolution 1e9).
//
// Streaming: OTF2 buffers each location's events in chunks of kChunk bytes and flushes full
// chunks to its file, so memory is (threads x 1 MiB) plus the definitions, not the event count.
// Definitions (strings, regions, communicators, counts per location) are collected while the
// events go by and written once at the end.
#ifndef PARMON_SRC_EXPORT_OTF2_WRITER_H_
#define PARMON_SRC_EXPORT_OTF2_WRITER_H_

#include <otf2/otf2.h>

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "export/export.h"
#include "export/export_common.h"

namespace parmon::exporter::otf2 {

struct Location {
  uint32_t parmon_id = 0;
  OTF2_LocationRef ref = 0;
  OTF2_LocationGroupRef group = 0;
  OTF2_EvtWriter* writer = nullptr;  // opened at its first event
  uint64_t events = 0;
  uint64_t last_ts = 0;
  // An MpiCollective seen inside the current MPI call: its end goes before the call's leave.
  bool collective_open = false;
  OTF2_CollectiveOp op = OTF2_COLLECTIVE_OP_BARRIER;
  OTF2_CommRef comm = 0;
  uint32_t root = OTF2_UNDEFINED_UINT32;
  uint64_t sent = 0, received = 0;
};

struct Process {
  std::string name;
  int64_t rank = -1;
  OTF2_LocationRef main = OTF2_UNDEFINED_LOCATION;  // the rank's location in COMM_LOCATIONS
};

// The thread-state metric: class and member refs 0 and 1; counters come after.
constexpr OTF2_MetricRef kStateClass = 0;
constexpr OTF2_MetricMemberRef kStateMember = 0, kCpuMember = 1;
constexpr int64_t kRunning = 2, kPreempted = 1, kBlocked = 0;

// A user counter's metric: its class holds the one member.
struct CounterMetric {
  OTF2_MetricRef cls = 0;
  OTF2_MetricMemberRef member = 0;
  uint32_t name = 0;  // the counter's string id
  bool is_double = false;
};

struct Comm {
  OTF2_CommRef ref = 0;
  uint64_t parmon_id = 0;
  std::vector<uint32_t> members;  // world ranks in communicator order (empty: not defined)
  std::unordered_map<uint32_t, uint32_t> rank_of;  // world rank -> rank in the communicator
};

class Writer {
 public:
  Writer(const model::Session& session, const ExportOptions& options)
      : session_(session), filter_(WindowFilter(session, options)) {}
  Status Open(const std::string& out);
  Status Events(ExportStats* stats);
  // Definitions, then closes the archive (otf2_defs.cc).
  Status Finish();

 private:
  friend struct DefsWriter;
  void Event(const format::Event& e);
  void CommDef(const format::Event& e);
  void Mpi(Location& l, const format::Event& e);
  void Metric(Location& l, const format::Event& e);
  OTF2_EvtWriter* WriterOf(Location& l);
  OTF2_RegionRef RegionOf(const Frame& f);
  Comm& CommOf(uint64_t parmon_comm);
  uint32_t RankIn(const Comm& c, int64_t world_rank) const;
  void Leave(Location& l, const Frame& f, uint64_t ts);
  // Records the first error (error_); true when code is OTF2_SUCCESS.
  bool Check(OTF2_ErrorCode code, const char* what);

  const model::Session& session_;
  model::MergeFilter filter_;
  OTF2_Archive* archive_ = nullptr;
  std::string out_;
  std::unordered_map<uint32_t, Location> locations_;            // by parmon location id
  std::vector<uint32_t> location_order_;                        // parmon ids in OTF2 ref order
  std::map<std::pair<uint32_t, uint32_t>, Process> processes_;  // by (file, pid); ref = index
  std::map<std::pair<uint32_t, bool>, OTF2_RegionRef> regions_;
  std::map<uint64_t, Comm> comms_;
  uint32_t world_size_ = 0;
  bool state_metric_ = false;                                    // a switch was written
  std::map<std::pair<uint32_t, bool>, CounterMetric> counters_;  // by (name id, double)
  Nesting nesting_;
  // Nonblocking sends in flight: (location, request) -> true.
  std::map<std::pair<uint32_t, uint64_t>, bool> isends_;
  uint64_t first_ts_ = UINT64_MAX, last_ts_ = 0;
  uint64_t records_ = 0;
  Status error_ = Status::Ok();
};

// The collective operation of an MPI function name ("MPI_Iallreduce" -> ALLREDUCE), false when
// OTF2 has none (neighbourhood collectives).
bool CollectiveOp(std::string_view function, OTF2_CollectiveOp* op);

}  // namespace parmon::exporter::otf2

#endif  // PARMON_SRC_EXPORT_OTF2_WRITER_H_
