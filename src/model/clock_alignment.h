// Clock alignment of a session recorded by several recorders (one file per MPI rank, maybe on
// several hosts, each with its own clock). The MPI wrapper ping-pongs between rank 0 and every
// other rank at a few epochs (MpiClockSync events, docs/events.md, Clock alignment); each
// ping-pong gives that rank's clock offset against rank 0's with an uncertainty of half the
// round trip. A ClockMap holds one file's offsets keyed by the time on its own clock,
// interpolated linearly between epochs and held constant before the first and after the last;
// an offset within its own uncertainty is noise and counts as zero (ranks sharing one clock
// always measure a little).
//
// Computing the maps (AlignClocks) is separate from reading the events (MeasureClocks) so the
// arithmetic is unit-tested on hand-made ping-pongs.
#ifndef PARMON_SRC_MODEL_CLOCK_ALIGNMENT_H_
#define PARMON_SRC_MODEL_CLOCK_ALIGNMENT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace parmon::format {
class TraceReader;
}

namespace parmon::model {

// One recorder's clock against rank 0's.
struct ClockMap {
  // (time on this clock, this clock minus rank 0's in ns), by time.
  std::vector<std::pair<uint64_t, double>> samples;

  // The offset at t; *hint is the segment last used (times of a stream mostly go forward). No
  // samples: no offset (a session still being read may not have measured one yet).
  double At(uint64_t t, size_t* hint) const {
    size_t n = samples.size();
    if (n == 0)
      return 0;
    if (t <= samples.front().first)
      return samples.front().second;
    if (t >= samples.back().first)
      return samples.back().second;
    size_t i = *hint < n - 1 && samples[*hint].first <= t ? *hint : 0;
    while (samples[i + 1].first < t)
      ++i;
    *hint = i;
    const auto& [t0, o0] = samples[i];
    const auto& [t1, o1] = samples[i + 1];
    return o0 + (o1 - o0) * static_cast<double>(t - t0) / static_cast<double>(t1 - t0);
  }
  // t on rank 0's clock.
  uint64_t Apply(uint64_t t, size_t* hint) const;
};

// Whether two maps give every time in [0, until] the same offset (both are piecewise linear: equal
// at every sample time of either up to `until`, and at `until`).
bool SameOffsets(const ClockMap& a, const ClockMap& b, uint64_t until);

// One half of a ping-pong, as the MpiClockSync event of one file records it.
struct ClockSync {
  uint32_t file = 0;  // index into TraceReader::parts()
  int64_t peer = 0;   // the other rank
  uint64_t epoch = 0;
  uint64_t t_send = 0;  // this side's send, on its clock
  uint64_t t_recv = 0;  // this side's receive, on its clock
};

// A rank's measured offset, for the report.
struct RankClockOffset {
  int32_t rank = -1;
  int64_t offset_ns = 0;       // at the first epoch
  int64_t last_offset_ns = 0;  // at the last epoch
  uint32_t epochs = 0;
};

struct ClockAlignment {
  // Per file (TraceReader::parts()); empty when no file needs a correction.
  std::vector<ClockMap> file_clocks;
  // Every rank other than 0 that measured an offset, by rank (zero offsets included).
  std::vector<RankClockOffset> offsets;

  bool empty() const { return file_clocks.empty(); }
  // The correction of one file, or null when it needs none.
  const ClockMap* ForFile(uint32_t file) const {
    if (file >= file_clocks.size() || file_clocks[file].samples.empty())
      return nullptr;
    return &file_clocks[file];
  }
};

// The alignment from the ping-pongs. file_rank[f]: the MPI rank of file f (-1: unknown).
ClockAlignment AlignClocks(const std::vector<int64_t>& file_rank,
                           const std::vector<ClockSync>& syncs);

// What one decoding pass over the runtime streams finds about MPI: every file's rank (its
// lowest MpiInit rank), each (file, pid)'s rank, and the ping-pongs. Damaged chunks are
// recorded in reader.problems(); what decoded is still used.
struct MpiScan {
  std::vector<int64_t> file_rank;  // by file, -1 when the file has no MpiInit
  std::map<std::pair<uint32_t, uint32_t>, int64_t> rank_by_file_pid;
  std::vector<ClockSync> syncs;
};
MpiScan ScanMpi(const format::TraceReader& reader);

// ScanMpi in steps, for a session still being read: each Scan decodes only the runtime chunks
// the reader found since the last one and adds what they hold to result().
class MpiScanner {
 public:
  void Scan(const format::TraceReader& reader);
  const MpiScan& result() const { return out_; }

 private:
  MpiScan out_;
  std::vector<size_t> chunks_seen_;  // by stream
};

// ScanMpi and AlignClocks for a session of several files (one file has one clock: nothing is
// read then).
ClockAlignment MeasureClocks(const format::TraceReader& reader);

}  // namespace parmon::model

#endif  // PARMON_SRC_MODEL_CLOCK_ALIGNMENT_H_
