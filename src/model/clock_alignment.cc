#include "model/clock_alignment.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "format/reader.h"

namespace parmon::model {

uint64_t ClockMap::Apply(uint64_t t, size_t* hint) const {
  if (samples.empty())
    return t;
  double v = static_cast<double>(t) - At(t, hint);
  return v <= 0 ? 0 : static_cast<uint64_t>(std::llround(v));
}

ClockAlignment AlignClocks(const std::vector<int64_t>& file_rank,
                           const std::vector<ClockSync>& syncs) {
  const size_t files = file_rank.size();
  // Rank 0's side of each ping-pong, by (peer, epoch).
  std::map<std::pair<int64_t, uint64_t>, const ClockSync*> rank0;
  for (const auto& x : syncs)
    if (x.file < files && file_rank[x.file] == 0)
      rank0[{x.peer, x.epoch}] = &x;
  ClockAlignment out;
  std::vector<ClockMap> clocks(files);
  for (const auto& x : syncs) {
    if (x.file >= files)
      continue;
    int64_t rank = file_rank[x.file];
    if (rank <= 0 || x.peer != 0)
      continue;
    auto it = rank0.find({rank, x.epoch});
    if (it == rank0.end())
      continue;
    const ClockSync& z = *it->second;
    auto d = [](uint64_t v) { return static_cast<double>(v); };
    double offset = (d(x.t_recv) + d(x.t_send) - d(z.t_send) - d(z.t_recv)) / 2;
    double uncertainty = ((d(z.t_recv) - d(z.t_send)) - (d(x.t_send) - d(x.t_recv))) / 2;
    // Within its own uncertainty an offset is noise: ranks sharing a clock always measure one.
    if (offset <= uncertainty && offset >= -uncertainty)
      offset = 0;
    clocks[x.file].samples.emplace_back(x.t_recv, offset);
  }
  bool any = false;
  for (size_t f = 0; f < files; ++f) {
    auto& v = clocks[f].samples;
    if (v.empty())
      continue;
    std::sort(v.begin(), v.end());
    out.offsets.push_back(
        {static_cast<int32_t>(file_rank[f]), static_cast<int64_t>(std::llround(v.front().second)),
         static_cast<int64_t>(std::llround(v.back().second)), static_cast<uint32_t>(v.size())});
    bool zero = std::all_of(v.begin(), v.end(), [](const auto& p) { return p.second == 0; });
    if (zero)
      v.clear();
    any |= !zero;
  }
  std::sort(out.offsets.begin(), out.offsets.end(),
            [](const auto& a, const auto& b) { return a.rank < b.rank; });
  if (any)
    out.file_clocks = std::move(clocks);
  return out;
}

bool SameOffsets(const ClockMap& a, const ClockMap& b, uint64_t until) {
  size_t ha = 0, hb = 0;
  auto same_at = [&](uint64_t t) { return a.At(t, &ha) == b.At(t, &hb); };
  for (const auto* m : {&a, &b})
    for (const auto& [t, offset] : m->samples) {
      if (t > until)
        break;
      ha = hb = 0;
      if (!same_at(t))
        return false;
    }
  ha = hb = 0;
  return same_at(until);
}

MpiScan ScanMpi(const format::TraceReader& reader) {
  MpiScanner scanner;
  scanner.Scan(reader);
  return scanner.result();
}

void MpiScanner::Scan(const format::TraceReader& reader) {
  out_.file_rank.resize(reader.parts().size(), -1);
  const auto& locations = reader.definitions().locations;
  const auto& streams = reader.streams();
  chunks_seen_.resize(streams.size(), 0);
  format::DecodedChunk chunk;
  for (size_t i = 0; i < streams.size(); ++i) {
    const format::Stream& st = streams[i];
    if (st.source != format::Source::kRuntime)
      continue;
    auto loc = locations.find(st.location);
    const uint32_t pid = loc == locations.end() ? 0 : loc->second.pid;
    for (; chunks_seen_[i] < st.chunks.size(); ++chunks_seen_[i]) {
      const format::ChunkRef& ref = st.chunks[chunks_seen_[i]];
      (void)reader.ReadChunk(ref, &chunk);
      for (const auto& e : chunk.events) {
        if (e.kind_enum() == format::Kind::kMpiInit) {
          auto rank = static_cast<int64_t>(e.args[0]);
          int64_t& fr = out_.file_rank.at(ref.file);
          if (fr < 0 || rank < fr)
            fr = rank;
          out_.rank_by_file_pid.emplace(std::make_pair(ref.file, pid), rank);
        } else if (e.kind_enum() == format::Kind::kMpiClockSync) {
          out_.syncs.push_back(
              {ref.file, static_cast<int64_t>(e.args[0]), e.args[1], e.args[2], e.args[3]});
        }
      }
    }
  }
}

ClockAlignment MeasureClocks(const format::TraceReader& reader) {
  if (reader.parts().size() < 2)
    return {};
  MpiScan scan = ScanMpi(reader);
  return AlignClocks(scan.file_rank, scan.syncs);
}

}  // namespace parmon::model
