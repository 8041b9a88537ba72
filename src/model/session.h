// model::Session: one recorded session, whatever it was read from (a trace file, a per-rank
// directory RUN/ of rank-<K>.ptrace files, or "-" for standard input), as every consumer sees it:
// the reader's streams and definitions, the typed SESSION and END values, the clock alignment of
// a session of several recorders, every stream's first and last times on rank 0's clock, the
// session window as the analysis computes it, and locations by numeric id.
//
// Times: a per-rank session has one clock per file; Session (and model::Merge) put every time on
// rank 0's clock (clock_alignment.h). A session of one file needs no correction and its times are
// the file's own.
#ifndef PARMON_SRC_MODEL_SESSION_H_
#define PARMON_SRC_MODEL_SESSION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "format/reader.h"
#include "format/session_info.h"
#include "model/clock_alignment.h"

namespace parmon::model {

// Index into Session::streams() (and TraceReader::streams()).
using StreamIndex = uint32_t;

struct SessionOptions {
  format::OpenOptions open;
  // Put the times of a per-rank session on rank 0's clock (off: every file's own clock).
  bool align_clocks = true;
  // A per-rank session still being written, followed by Refresh(): the clock alignment grows
  // with the synchronisation rounds each refresh finds (see Refresh).
  bool follow_clocks = false;
};

class Session {
 public:
  static StatusOr<std::unique_ptr<Session>> Open(const std::string& path,
                                                 SessionOptions options = {});
  // One session from several inputs (session directories and rank files of ranks recorded on
  // different hosts): format::TraceReader::Open of the list.
  static StatusOr<std::unique_ptr<Session>> Open(const std::vector<std::string>& paths,
                                                 SessionOptions options = {});
  // A session over a reader already open (tests, or a caller that opened it itself).
  static StatusOr<std::unique_ptr<Session>> FromReader(std::unique_ptr<format::TraceReader> reader,
                                                       SessionOptions options = {});
  // A session over a reader the caller keeps (it must outlive the session): tests and tools that
  // go on using the reader itself (Refresh, problems found while merging).
  static StatusOr<std::unique_ptr<Session>> Over(const format::TraceReader& reader,
                                                 SessionOptions options = {});

  // After the reader read more of a growing trace (TraceReader::Refresh): takes its new streams,
  // SESSION and END values and window. The clock alignment stays as computed at the open (a
  // single file needs none), so a model::Merge over this session goes on across refreshes;
  // with follow_clocks, it is measured again from every round found so far (only the new chunks
  // are decoded), and each file's ClockMap object keeps its address (a Merge holds it) while its
  // samples change.
  void Refresh();
  // follow_clocks: a Refresh changed the offset of a time some stream had already been read up
  // to, so an event aligned before may have moved (offsets drift between rounds, and are held
  // constant after the last one until the next is seen). Sticky.
  bool realigned() const { return realigned_; }
  // Every event with an aligned time below it has been read: the smallest over the files of its
  // complete_until() on rank 0's clock (UINT64_MAX once all are closed; 0 when one has none).
  uint64_t complete_until() const;

  const format::TraceReader& reader() const { return *reader_; }
  const std::string& path() const { return reader_->path(); }
  const format::Definitions& definitions() const { return reader_->definitions(); }
  const std::vector<format::Stream>& streams() const { return reader_->streams(); }
  const std::vector<format::Problem>& problems() const { return reader_->problems(); }
  // Session metadata read as absent because its value was bad: one sentence per file, to print
  // once. Not damage: every event is read.
  const std::vector<std::string>& warnings() const { return reader_->warnings(); }

  // Typed SESSION and END values (the END ones are zero when the trace was not closed cleanly).
  const format::SessionInfo& info() const { return metadata_.session; }
  const format::EndInfo& totals() const { return metadata_.end; }

  // --- time ---------------------------------------------------------------------------------
  const ClockAlignment& clocks() const { return clocks_; }
  // The correction of a stream's file, or null when its times need none.
  const ClockMap* ClockOf(StreamIndex s) const;
  // t of stream s on rank 0's clock.
  uint64_t Aligned(StreamIndex s, uint64_t t) const;
  // A stream's first and last event times, aligned.
  uint64_t first_ts(StreamIndex s) const { return Aligned(s, streams()[s].first_ts); }
  uint64_t last_ts(StreamIndex s) const { return Aligned(s, streams()[s].last_ts); }
  // The session window, as `parmon report` measures it: from the recorder's start (or the first
  // event, if earlier) to its end (or the last event, if later); for a session of several
  // clocks, the span of its events on rank 0's clock.
  uint64_t start() const { return start_; }
  uint64_t end() const { return end_; }

  // --- locations by numeric id -------------------------------------------------------------
  const format::LocationDef* Location(uint32_t id) const;
  uint32_t PidOf(uint32_t id) const;
  uint32_t TidOf(uint32_t id) const;
  std::string_view NameOf(uint32_t id) const;
  bool IsCpu(uint32_t id) const;
  // The MPI rank of a location's process (from its MpiInit), or -1. The first call for a
  // session of one file reads its runtime streams once.
  int64_t RankOf(uint32_t id) const;
  // The file (index into reader().parts()) a location's events come from.
  uint32_t FileOf(uint32_t id) const;

 private:
  Session() = default;
  Status Init(const SessionOptions& options);
  void ComputeWindow();
  void EnsureRanks() const;
  // follow_clocks: the alignment from every round scanned so far, into the stable live_clocks_.
  void FollowClocks();

  std::unique_ptr<format::TraceReader> owned_;  // null for a session Over() a caller's reader
  const format::TraceReader* reader_ = nullptr;
  format::SessionMetadata metadata_;
  ClockAlignment clocks_;
  std::vector<const ClockMap*> stream_clock_;  // by stream
  std::map<uint32_t, uint32_t> file_of_location_;
  uint64_t start_ = 0;
  uint64_t end_ = 0;
  mutable std::optional<std::map<std::pair<uint32_t, uint32_t>, int64_t>> rank_by_file_pid_;
  // follow_clocks: one map per file, never reallocated (streams point at them), the scan of the
  // rounds so far, and how far each file's streams had been read when its map was last set.
  bool follow_clocks_ = false;
  std::vector<ClockMap> live_clocks_;
  MpiScanner scanner_;
  std::vector<uint64_t> read_until_;
  bool realigned_ = false;
};

}  // namespace parmon::model

#endif  // PARMON_SRC_MODEL_SESSION_H_
