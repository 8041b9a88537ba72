// TraceReader: opens a trace file, checks its framing chunk by chunk, collects the session,
// schema and definitions, and lists every stream's chunks. model::Merge (src/model/merge.h) then
// hands out the events of any set of streams merged in time order, holding one decoded chunk per
// stream: memory grows with the number of streams, not events.
//
// Damage is reported, never fatal: a chunk whose header or payload fails its checksum is named in
// problems() with the number of events it held (exact when its header or the END chunk says), and
// every intact chunk is still read. A file that does not end with the END chunk and trailer (the
// recorder was killed, the disk filled, or it is still being written) is read up to its last
// whole chunk; Refresh() picks up the chunks appended since, and complete_until() says up to when
// every stream is complete (the last WATERMARK chunk).
//
// The input needs no seek: "-" (standard input), a FIFO or a socket is read to its end into an
// unlinked temporary file first (format/input.h), so memory stays bounded. Counts, ids and
// lengths read from the file are checked against what the bytes can hold before they size
// anything; a chunk that declares more is damage.
//
// A session recorded per MPI rank (`mpirun -np N parmon record -o RUN -- app`) is a directory
// RUN/ of rank-<K>.ptrace files. Open(RUN) reads them all and presents one trace: locations are
// renumbered file by file (rank 0's first), string ids are already disjoint (each rank's
// recorder interns from its own range), CPU locations are kept once per host, and the session
// values are combined (earliest start, latest end, sums of counts). docs/comm.md has the design.
#ifndef PARMON_SRC_FORMAT_READER_H_
#define PARMON_SRC_FORMAT_READER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/chunk.h"
#include "format/codec.h"
#include "format/event.h"
#include "format/session_info.h"

namespace parmon::format {

struct ChunkRef {
  uint64_t offset = 0;
  ChunkHeader header{};  // header.location is the reader's location id (renumbered when merged)
  uint32_t file = 0;     // which file of a multi-file session (index into TraceReader::parts())
};

struct Stream {
  uint32_t location = 0;
  Source source = Source::kRuntime;
  std::vector<ChunkRef> chunks;
  uint64_t events = 0;
  uint64_t first_ts = UINT64_MAX;
  uint64_t last_ts = 0;
};

struct Problem {
  uint64_t offset = 0;
  std::string message;
  int64_t events_lost = -1;  // -1: unknown
  std::optional<uint32_t> location;
  // The end of a file that was not closed (killed, or still being written): not damage inside
  // it. Refresh() replaces these.
  bool tail = false;
  // Damage to a chunk that holds no events (the index, the schema): reported, but nothing is
  // missing and a report needs no --partial for it.
  bool harmless = false;
};

struct LocationDef {
  uint32_t id = 0;
  LocationType type = LocationType::kThread;
  uint32_t pid = 0;
  uint32_t tid = 0;
  // Its final name: a thread defined again under a new name (exec, prctl) is shown by the last.
  std::string name;
  // The name it had first, when it was renamed since ("forkexec" for a child that ran
  // /bin/true); empty otherwise.
  std::string first_name;
  // The name is its process's command (argv[0]'s base name): the main thread's own was unknown.
  bool name_from_command = false;
};

struct ProcessDef {
  uint32_t pid = 0;
  uint32_t ppid = 0;
  std::string command;
};

struct StringDef {
  StringCategory category = StringCategory::kPlain;
  std::string text;
};

struct Definitions {
  std::map<uint32_t, StringDef> strings;
  std::map<uint32_t, std::string> event_names;  // program-chosen event ids (parmon_event_name)
  std::map<uint32_t, uint32_t> main_threads;    // pid -> location of its main thread (tid == pid)
  std::map<uint32_t, LocationDef> locations;
  std::map<uint32_t, ProcessDef> processes;
  // `parmon ctl pause/resume` (ControlPause/ControlResume, session clock ns): [begin, end), end
  // UINT64_MAX while the session ended paused. Time in them is neither loss nor program state.
  std::vector<std::pair<uint64_t, uint64_t>> paused;
  // Every `parmon ctl` record (ControlPause, ControlResume, ControlPeriod, ControlSelect) in
  // file order, the first kMaxControlMarks of them.
  struct ControlMark {
    uint64_t ts = 0;
    uint16_t kind = 0;
    uint64_t arg = 0;
    std::string payload;
  };
  static constexpr size_t kMaxControlMarks = 100000;
  std::vector<ControlMark> control;
  // The switch-record budget of `parmon record` stopped the context-switch records at ts
  // (SwitchesStopped, docs/events.md): from then on the threads of process pid and its
  // descendants (every thread when pid is 0) have none; their states come from the sampler.
  struct SwitchStop {
    uint64_t ts = 0;
    uint32_t pid = 0;
    uint64_t records = 0;         // records kept, all of them up to ts
    uint64_t window_records = 0;  // in the window that went over the budget
    uint64_t window_ns = 0;       // its length
    uint64_t window_cpu_ns = 0;   // the program's CPU time in it (at least window_ns)
    uint64_t cost_ns = 0;         // the cost of one record the recorder assumed
    uint64_t budget_ppm = 0;      // the budget, parts per million of window_cpu_ns
    // The share of window_cpu_ns the window's records cost.
    double share() const {
      return window_cpu_ns ? static_cast<double>(window_records) * static_cast<double>(cost_ns) /
                                 static_cast<double>(window_cpu_ns)
                           : 0;
    }
  };
  static constexpr size_t kMaxSwitchStops = 4096;  // one per recorder (per-rank sessions)
  std::vector<SwitchStop> switch_stops;

  // The string's text, or "#<id>" when it was never defined.
  std::string Name(uint32_t id) const;
  // Paused time within [begin, end) (an open range ends at end).
  uint64_t PausedWithin(uint64_t begin, uint64_t end) const;
  // Applies one definition event.
  void Apply(const Event& e);

 private:
  void NameMainThread(LocationDef& d);
};

// The base name of a command line's first word ("/usr/bin/python3 -c ..." -> "python3").
std::string CommandName(std::string_view command);

struct DecodedChunk {
  std::vector<uint8_t> raw;  // decompressed payload; events' payload views point here
  std::vector<Event> events;
};

struct OpenOptions {
  // Check every payload's checksum at open (reads the whole file). Otherwise payloads are checked
  // as they are read.
  bool verify_payloads = false;
};

class TraceReader {
 public:
  static StatusOr<std::unique_ptr<TraceReader>> Open(const std::string& path,
                                                     OpenOptions options = {});
  // One session from several inputs: the rank files of session directories and single rank
  // files, from different hosts (each recorder wrote its own rank's file on its node). One
  // path is Open(path).
  static StatusOr<std::unique_ptr<TraceReader>> Open(const std::vector<std::string>& paths,
                                                     OpenOptions options = {});
  ~TraceReader();

  const std::string& path() const { return path_; }
  // The files read: the trace itself, or each rank's file of a session directory.
  const std::vector<std::string>& parts() const { return parts_; }
  // The host that wrote part `file` (its session's host; "" when unknown).
  std::string PartHost(uint32_t file) const {
    if (part_hosts_.empty())
      return metadata_.session.host;
    return file < part_hosts_.size() ? part_hosts_[file] : std::string();
  }
  uint64_t file_size() const { return file_size_; }
  uint16_t version_major() const { return version_major_; }
  uint16_t version_minor() const { return version_minor_; }
  // Session key/values (command, host, start_realtime_ns, clock, ...), END key/values appended.
  // A value that is not what its key promises is left out (read as absent) and named in
  // warnings().
  const std::map<std::string, std::string>& session() const { return session_; }
  // The same values typed (format/session_info.h): the one decoding of the session metadata.
  const SessionMetadata& metadata() const { return metadata_; }
  // Sentences about metadata read as absent (one per file at most): not damage, every event is
  // still read. Consumers print them once.
  const std::vector<std::string>& warnings() const { return warnings_; }
  std::string SessionValue(const std::string& key, const std::string& fallback = "") const;
  const Definitions& definitions() const { return defs_; }
  const std::vector<Stream>& streams() const { return streams_; }
  const KindSchema& schema() const { return *schema_; }
  // Damage found so far (at open, and by ReadChunk calls since).
  const std::vector<Problem>& problems() const { return problems_; }
  // Damage another reader of the same files found (a process of the parallel report that
  // decoded some of this session's streams), recorded as it was found there.
  void AddFoundProblem(Problem p) const { problems_.push_back(std::move(p)); }
  bool closed_cleanly() const { return closed_cleanly_; }
  // Every event with ts < complete_until() of every stream has been read: UINT64_MAX for a file
  // closed cleanly, the last WATERMARK of one still being written, 0 when it has none. For a
  // per-rank session, the smallest over its files.
  uint64_t complete_until() const { return closed_cleanly_ ? UINT64_MAX : complete_until_; }
  // Reads the chunks appended to a file still being written since it was opened or last
  // refreshed (streams gain chunks; problems marked tail are replaced). No-op for a file closed
  // cleanly or a stream read from a pipe. For a per-rank session, each rank's file is refreshed:
  // its streams gain chunks and its new locations and streams come after every one known so far
  // (so ids and stream order match a reader opened afresh only while no file but the last gains
  // any; model::Session and the collector's live analysis check that at the end).
  Status Refresh();
  // complete_until() of one file of a per-rank session (on that file's own clock).
  uint64_t PartCompleteUntil(uint32_t file) const {
    if (file >= part_readers_.size())
      return complete_until();
    return part_readers_[file]->complete_until();
  }
  uint64_t total_events() const;  // events in intact chunks (not definitions)
  uint64_t first_ts() const { return first_ts_; }
  uint64_t last_ts() const { return last_ts_; }

  // Decodes one chunk. On damage returns an error naming the chunk and records a Problem.
  Status ReadChunk(const ChunkRef& ref, DecodedChunk* out) const;
  // Reads one chunk's payload, checked and decompressed, for decoding with EventDecoder (damage
  // is recorded as by ReadChunk).
  Status ReadRawPayload(const ChunkRef& ref, std::vector<uint8_t>* out) const {
    return ReadPayload(ref, out);
  }

 private:
  TraceReader() = default;
  Status Scan();
  // Scan's pieces: one chunk whose framing is intact; the problems at the end of the file.
  void ScanChunk(const ChunkRef& ref, std::vector<uint8_t>* payload);
  bool ChunkSane(const ChunkRef& ref);
  bool Resync(uint64_t offset, uint64_t* next) const;
  void NoteEnd();
  void DecodeMetadata();
  Status ReadPayload(const ChunkRef& ref, std::vector<uint8_t>* out) const;
  void AddProblem(Problem p, uint32_t file = 0) const;
  static StatusOr<std::unique_ptr<TraceReader>> OpenDirectory(const std::string& path,
                                                              OpenOptions options);
  static StatusOr<std::unique_ptr<TraceReader>> OpenParts(const std::string& path,
                                                          std::vector<std::string> files,
                                                          OpenOptions options);
  void Merge(std::vector<std::unique_ptr<TraceReader>> parts);
  // Takes what the parts gained since the last call (all of them the first time): chunks of known
  // streams, new streams and locations (numbered after the known ones), definitions, problems.
  void MergeParts();
  // The session values, definitions and problems of the parts combined (MergeParts' second half).
  void CombineParts();

  int fd_ = -1;  // the file (-1 for a per-rank session: each part holds its own)
  // A per-rank session's files, each read (and refreshed) on its own; the merged streams point
  // into them by ChunkRef::file. Their streams' chunk lists are emptied once merged.
  std::vector<std::unique_ptr<TraceReader>> part_readers_;
  struct PartMerge {
    std::map<uint32_t, uint32_t> remap;  // the part's location id -> the merged one
    std::set<uint32_t> dropped;          // CPU locations another part of the host describes
    std::vector<size_t> stream_of;       // the part's stream -> the merged one
    size_t problems_taken = 0;           // the part's non-tail problems already merged
    bool keep_cpus = false;
  };
  std::vector<PartMerge> part_merge_;
  uint32_t next_location_ = 1;
  std::vector<std::string> parts_;
  std::vector<std::string> part_hosts_;  // by part, for a session of several files
  std::string path_;
  uint64_t file_size_ = 0;
  uint16_t version_major_ = 0;
  uint16_t version_minor_ = 0;
  std::map<std::string, std::string> raw_session_;  // as read, bad values included
  std::map<std::string, std::string> session_;      // raw_session_ without the bad values
  SessionMetadata metadata_;
  std::vector<std::string> warnings_;
  Definitions defs_;
  std::vector<Stream> streams_;
  // The compiled-in table, shared by every reader, unless the file's SCHEMA chunk differs.
  std::shared_ptr<const KindSchema> schema_ = KindSchema::Builtin();
  mutable std::vector<Problem> problems_;
  mutable std::set<std::pair<uint32_t, uint64_t>> bad_chunks_;  // (file, offset) reported
  bool closed_cleanly_ = false;
  bool refreshable_ = false;  // a single regular file
  OpenOptions options_;
  // Where the scan stands, kept so that Refresh() continues it.
  struct ScanState {
    uint64_t offset = sizeof(FileHeader);  // the next chunk (or the partial one at the end)
    uint64_t chunk_number = 0;
    bool have_end = false;
    std::map<std::pair<uint32_t, uint8_t>, size_t> stream_index;
    // Events in chunks already reported as damaged (so the END totals do not report them twice).
    std::map<std::pair<uint32_t, uint8_t>, uint64_t> reported_damaged;
    uint64_t min_ts = UINT64_MAX;
  } scan_;
  uint64_t complete_until_ = 0;
  uint64_t first_ts_ = UINT64_MAX;
  uint64_t last_ts_ = 0;
};

}  // namespace parmon::format

#endif  // PARMON_SRC_FORMAT_READER_H_
