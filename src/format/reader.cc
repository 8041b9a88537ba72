#include "format/reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "base/crc32c.h"
#include "base/units.h"
#include "format/chunk_stream.h"
#include "format/input.h"

namespace parmon::format {
namespace {

bool PreadAll(int fd, void* buf, size_t n, uint64_t offset) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    ssize_t r = pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

// One decompression context per thread, for every chunk of every file: ZSTD_decompress makes
// and frees a context (~100 KiB) per call, which a session of thousands of small rank files pays
// per chunk.
ZSTD_DCtx* DecompressionContext() {
  struct Holder {
    ZSTD_DCtx* ctx = ZSTD_createDCtx();
    ~Holder() { ZSTD_freeDCtx(ctx); }
  };
  thread_local Holder holder;
  return holder.ctx;
}

const char* ChunkTypeName(uint16_t t) {
  switch (static_cast<ChunkType>(t)) {
    case ChunkType::kSession:
      return "session";
    case ChunkType::kSchema:
      return "schema";
    case ChunkType::kEvents:
      return "events";
    case ChunkType::kIndex:
      return "index";
    case ChunkType::kEnd:
      return "end";
    case ChunkType::kWatermark:
      return "watermark";
  }
  return "unknown";
}

}  // namespace

std::string Definitions::Name(uint32_t id) const {
  auto it = strings.find(id);
  return it == strings.end() ? fmt::format("#{}", id) : it->second.text;
}

void Definitions::NameMainThread(LocationDef& d) {
  // A main thread whose name the recorder could not read (it had ended) goes by its command.
  if (!d.name.empty())
    return;
  auto p = processes.find(d.pid);
  if (p == processes.end() || p->second.command.empty())
    return;
  d.name = CommandName(p->second.command);
  d.name_from_command = !d.name.empty();
}

std::string CommandName(std::string_view command) {
  std::string_view first = command.substr(0, command.find_first_of(std::string_view("\0 ", 2)));
  size_t slash = first.rfind('/');
  return std::string(slash == std::string_view::npos ? first : first.substr(slash + 1));
}

void Definitions::Apply(const Event& e) {
  switch (e.kind_enum()) {
    case Kind::kDefString:
      if (static_cast<StringCategory>(e.args[1]) == StringCategory::kEvent) {
        event_names[static_cast<uint32_t>(e.args[0])] = std::string(e.payload);
        break;
      }
      strings[static_cast<uint32_t>(e.args[0])] =
          StringDef{static_cast<StringCategory>(e.args[1]), std::string(e.payload)};
      break;
    case Kind::kDefLocation: {
      if (e.args[0] > kMaxLocationId)
        break;  // damaged: consumers size tables by location id
      LocationDef& d = locations[static_cast<uint32_t>(e.args[0])];
      d.id = static_cast<uint32_t>(e.args[0]);
      d.type = static_cast<LocationType>(e.args[1]);
      d.pid = static_cast<uint32_t>(e.args[2]);
      d.tid = static_cast<uint32_t>(e.args[3]);
      if (!e.payload.empty() && (e.payload != d.name || d.name_from_command)) {
        // Defined again under a new name: the last is its name, the first is kept beside it.
        if (!d.name.empty() && !d.name_from_command && d.first_name.empty())
          d.first_name = d.name;
        d.name = std::string(e.payload);
        d.name_from_command = false;
        if (d.first_name == d.name)
          d.first_name.clear();  // back to the name it began with: no rename to show
      }
      if (d.type == LocationType::kThread && d.pid == d.tid && d.pid != 0) {
        main_threads[d.pid] = d.id;
        NameMainThread(d);
      }
      break;
    }
    case Kind::kDefProcess: {
      ProcessDef& p = processes[static_cast<uint32_t>(e.args[0])];
      p.pid = static_cast<uint32_t>(e.args[0]);
      p.ppid = static_cast<uint32_t>(e.args[1]);
      if (!e.payload.empty())
        p.command = std::string(e.payload);
      if (auto m = main_threads.find(p.pid); m != main_threads.end())
        NameMainThread(locations[m->second]);
      break;
    }
    case Kind::kControlPeriod:
    case Kind::kControlSelect:
      if (control.size() < kMaxControlMarks)
        control.push_back({e.ts, e.kind, e.nargs > 0 ? e.args[0] : 0, std::string(e.payload)});
      break;
    case Kind::kControlPause:
      // One entry per pause read, like the other definitions (a pause while paused is none).
      if (control.size() < kMaxControlMarks)
        control.push_back({e.ts, e.kind, 0, {}});
      if (paused.empty() || paused.back().second != UINT64_MAX)
        paused.emplace_back(e.ts, UINT64_MAX);
      break;
    case Kind::kSwitchesStopped:
      if (e.nargs >= 7 && switch_stops.size() < kMaxSwitchStops)
        switch_stops.push_back({e.ts, static_cast<uint32_t>(e.args[0]), e.args[1], e.args[2],
                                e.args[3], e.args[4], e.args[5], e.args[6]});
      break;
    case Kind::kControlResume:
      if (control.size() < kMaxControlMarks)
        control.push_back({e.ts, e.kind, 0, {}});
      if (!paused.empty() && paused.back().second == UINT64_MAX)
        paused.back().second = std::max(e.ts, paused.back().first);
      break;
    default:
      break;
  }
}

uint64_t Definitions::PausedWithin(uint64_t begin, uint64_t end) const {
  uint64_t total = 0;
  for (const auto& [b, e] : paused) {
    const uint64_t lo = std::max(b, begin), hi = std::min(e, end);
    if (hi > lo)
      total += hi - lo;
  }
  return total;
}

TraceReader::~TraceReader() {
  if (fd_ >= 0)
    close(fd_);
}

std::string TraceReader::SessionValue(const std::string& key, const std::string& fallback) const {
  auto it = session_.find(key);
  return it == session_.end() ? fallback : it->second;
}

uint64_t TraceReader::total_events() const {
  uint64_t n = 0;
  for (const auto& s : streams_)
    n += s.events;
  return n;
}

void TraceReader::AddProblem(Problem p, uint32_t file) const {
  if (!bad_chunks_.insert({file, p.offset}).second)
    return;
  if (parts_.size() > 1 && file < parts_.size())
    p.message = std::filesystem::path(parts_[file]).filename().string() + ": " + p.message;
  problems_.push_back(std::move(p));
}

StatusOr<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& path,
                                                         OpenOptions options) {
  struct stat dir_st;
  if (path != "-" && stat(path.c_str(), &dir_st) == 0 && S_ISDIR(dir_st.st_mode))
    return OpenDirectory(path, options);
  auto r = std::unique_ptr<TraceReader>(new TraceReader());
  r->path_ = path;
  r->parts_ = {path};
  r->options_ = options;
  const std::string name = path == "-" ? "standard input" : path;
  PARMON_ASSIGN_OR_RETURN(r->fd_, OpenTraceInput(path));
  struct stat st;
  if (fstat(r->fd_, &st) != 0)
    return Status::Error(fmt::format("cannot read {}: {}", name, strerror(errno)));
  if (S_ISREG(st.st_mode)) {
    r->file_size_ = static_cast<uint64_t>(st.st_size);
    r->refreshable_ = true;
  } else if (S_ISDIR(st.st_mode)) {
    return Status::Error(fmt::format("{} is a directory, not a parmon trace", name));
  } else {
    // A pipe, FIFO, socket or device: read it once, to its end, into a temporary file.
    auto spooled = SpoolToTempFile(r->fd_, name, &r->file_size_);
    if (!spooled.ok())
      return spooled.status();
    close(r->fd_);
    r->fd_ = *spooled;
  }
  FileHeader fh;
  if (r->file_size_ < sizeof fh || !PreadAll(r->fd_, &fh, sizeof fh, 0) ||
      std::memcmp(fh.magic, kFileMagic, sizeof fh.magic) != 0)
    return Status::Error(
        fmt::format("{} is not a parmon trace (it does not start with the parmon "
                    "trace signature)",
                    name));
  r->version_major_ = fh.version_major;
  r->version_minor_ = fh.version_minor;
  if (!ReadableMajor(fh.version_major))
    return Status::Error(fmt::format(
        "{} is a parmon trace of format version {}.{}, which this parmon (format {}.{}) cannot "
        "read; use a parmon that matches the recorder's version",
        name, fh.version_major, fh.version_minor, kVersionMajor, kVersionMinor));
  PARMON_RETURN_IF_ERROR(r->Scan());
  return r;
}

Status TraceReader::Refresh() {
  if (!part_readers_.empty()) {
    if (closed_cleanly_)
      return Status::Ok();
    for (auto& p : part_readers_)
      PARMON_RETURN_IF_ERROR(p->Refresh());
    MergeParts();
    return Status::Ok();
  }
  if (!refreshable_ || closed_cleanly_)
    return Status::Ok();
  struct stat st;
  if (fstat(fd_, &st) != 0)
    return Status::Error(fmt::format("cannot read {}: {}", path_, strerror(errno)));
  if (static_cast<uint64_t>(st.st_size) == file_size_)
    return Status::Ok();
  file_size_ = static_cast<uint64_t>(st.st_size);
  for (const Problem& p : problems_)
    if (p.tail)
      bad_chunks_.erase({0, p.offset});
  std::erase_if(problems_, [](const Problem& p) { return p.tail; });
  return Scan();
}

// Searches forward from offset+1 for the next chunk header that passes its checksum.
bool TraceReader::Resync(uint64_t offset, uint64_t* next) const {
  uint64_t at = offset + 1;
  std::vector<uint8_t> window(1 << 16);
  while (at + sizeof(ChunkHeader) <= file_size_) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(window.size(), file_size_ - at));
    if (!PreadAll(fd_, window.data(), n, at))
      return false;
    for (size_t i = 0; i + 4 <= n; ++i) {
      uint32_t m;
      std::memcpy(&m, window.data() + i, 4);
      if (m != kChunkMagic || at + i + sizeof(ChunkHeader) > file_size_)
        continue;
      ChunkHeader c;
      if (PreadAll(fd_, &c, sizeof c, at + i) && ChunkHeaderValid(c)) {
        *next = at + i;
        return true;
      }
    }
    at += n > 3 ? n - 3 : n;
  }
  return false;
}

// A header that passes its checksum but declares what its bytes cannot hold (a location id past
// kMaxLocationId, more events than raw_size can encode) is damage: the chunk is skipped.
bool TraceReader::ChunkSane(const ChunkRef& ref) {
  const ChunkHeader& h = ref.header;
  std::string why;
  if (h.type == static_cast<uint16_t>(ChunkType::kEvents) &&
      h.source != static_cast<uint8_t>(Source::kDefinitions)) {
    if (h.location > kMaxLocationId)
      why = fmt::format("declares location {}, above the largest location id {}", h.location,
                        kMaxLocationId);
    else if (h.event_count > h.raw_size / kMinEventBytes)
      why = fmt::format("declares {} events in {} bytes", h.event_count, h.raw_size);
  }
  if (why.empty())
    return true;
  AddProblem({ref.offset,
              fmt::format("chunk #{} at offset {} {}; it is skipped", h.sequence, ref.offset, why),
              -1,
              {}});
  return false;
}

Status TraceReader::Scan() {
  ScanState& st = scan_;
  std::vector<uint8_t> payload;
  uint64_t& offset = st.offset;
  while (offset < file_size_) {
    ChunkHeader h;
    if (file_size_ - offset == sizeof(Trailer) && st.have_end) {
      Trailer t;
      if (PreadAll(fd_, &t, sizeof t, offset) && t.magic == kTrailerMagic &&
          t.crc == Crc32c(&t, offsetof(Trailer, crc)))
        break;
    }
    if (file_size_ - offset < sizeof h) {
      Problem p{offset,
                fmt::format("the file ends {} bytes into a chunk header at offset {}: the "
                            "recording stopped in the middle of a write",
                            file_size_ - offset, offset),
                -1,
                {}};
      p.tail = !st.have_end;
      AddProblem(std::move(p));
      break;
    }
    if (!PreadAll(fd_, &h, sizeof h, offset))
      return Status::Error(fmt::format("cannot read {}: {}", path_, strerror(errno)));
    if (!ChunkHeaderValid(h)) {
      uint64_t next = 0;
      bool found = Resync(offset, &next);
      uint64_t skipped = (found ? next : file_size_) - offset;
      AddProblem({offset,
                  fmt::format("chunk {} at offset {} has a damaged header; {} bytes skipped{}",
                              st.chunk_number, offset, skipped,
                              found ? fmt::format(", reading resumes at offset {}", next)
                                    : ", no intact chunk follows"),
                  -1,
                  {}});
      ++st.chunk_number;
      offset = found ? next : file_size_;
      continue;
    }
    uint64_t end = offset + sizeof h + h.stored_size;
    const bool events = h.type == static_cast<uint16_t>(ChunkType::kEvents);
    if (end > file_size_) {
      // Refresh() reads this chunk again once it is whole.
      Problem p{
          offset,
          fmt::format("the file ends inside chunk {} at offset {} ({} of its {} payload "
                      "bytes present): the recording stopped in the middle of a write; "
                      "its {} events{} are lost",
                      st.chunk_number, offset, file_size_ - offset - sizeof h, h.stored_size,
                      h.event_count, events ? fmt::format(" of location {}", h.location) : ""),
          events ? h.event_count : 0, h.location};
      p.tail = true;
      AddProblem(std::move(p));
      break;
    }
    ChunkRef ref{offset, h};
    if (ChunkSane(ref))
      ScanChunk(ref, &payload);
    offset = end;
    ++st.chunk_number;
  }
  NoteEnd();
  return Status::Ok();
}

void TraceReader::ScanChunk(const ChunkRef& ref, std::vector<uint8_t>* payload) {
  ScanState& st = scan_;
  const ChunkHeader& h = ref.header;
  auto type = static_cast<ChunkType>(h.type);
  bool is_defs =
      type == ChunkType::kEvents && h.source == static_cast<uint8_t>(Source::kDefinitions);
  bool need_payload = type != ChunkType::kEvents || is_defs || options_.verify_payloads;
  if (need_payload && !ReadPayload(ref, payload).ok()) {
    if (type == ChunkType::kEvents)
      st.reported_damaged[{h.location, h.source}] += h.event_count;
    return;  // ReadPayload recorded the problem
  }
  switch (type) {
    case ChunkType::kSession:
    case ChunkType::kEnd: {
      std::vector<std::pair<std::string, std::string>> kv;
      if (!DecodeKeyValues(payload->data(), payload->size(), &kv)) {
        AddProblem(
            {ref.offset,
             fmt::format("{} chunk at offset {} is malformed", ChunkTypeName(h.type), ref.offset),
             0,
             {}});
        break;
      }
      for (auto& [k, v] : kv)
        raw_session_[k] = v;
      if (type == ChunkType::kEnd)
        st.have_end = true;
      break;
    }
    case ChunkType::kSchema: {
      // Decoded into a copy; a file written by this parmon shares the compiled-in table.
      auto decoded = std::make_shared<KindSchema>(*schema_);
      if (!DecodeSchema(payload->data(), payload->size(), decoded.get()))
        AddProblem(
            {ref.offset, fmt::format("schema chunk at offset {} is malformed", ref.offset), 0, {}});
      if (!(*decoded == *schema_))
        schema_ = std::move(decoded);
      break;
    }
    case ChunkType::kEvents:
      if (is_defs) {
        std::vector<Event> events;
        std::string error;
        if (!DecodeEvents(payload->data(), payload->size(), 0, Source::kDefinitions, *schema_,
                          &events, &error, ChunkCoding(ref.header)))
          AddProblem({ref.offset,
                      fmt::format("definition chunk at offset {}: {}", ref.offset, error),
                      -1,
                      {}});
        for (const auto& e : events)
          defs_.Apply(e);
      } else {
        auto key = std::make_pair(h.location, h.source);
        auto it = st.stream_index.find(key);
        if (it == st.stream_index.end()) {
          it = st.stream_index.emplace(key, streams_.size()).first;
          Stream s;
          s.location = h.location;
          s.source = static_cast<Source>(h.source);
          streams_.push_back(std::move(s));
        }
        Stream& s = streams_[it->second];
        s.chunks.push_back(ref);
        s.events += h.event_count;
        s.first_ts = std::min(s.first_ts, h.first_ts);
        s.last_ts = std::max(s.last_ts, h.last_ts);
        st.min_ts = std::min(st.min_ts, h.first_ts);
        last_ts_ = std::max(last_ts_, h.last_ts);
      }
      break;
    case ChunkType::kWatermark:
      complete_until_ = std::max(complete_until_, h.first_ts);
      break;
    case ChunkType::kIndex:
      break;
    default:
      // A chunk type from a newer minor version: skip it.
      break;
  }
}

// After a scan: the file's state at its end (closed, or not yet), and what the END totals say
// damaged chunks lost.
void TraceReader::NoteEnd() {
  ScanState& st = scan_;
  DecodeMetadata();
  closed_cleanly_ = st.have_end;
  first_ts_ = st.min_ts == UINT64_MAX ? 0 : st.min_ts;
  if (!st.have_end) {
    // What the file covers: every event before the last WATERMARK is in it (the recorder
    // promised so); after it, events may be missing and nobody can say how many.
    const uint64_t start = metadata_.session.start_ts ? metadata_.session.start_ts : first_ts_;
    std::string covers;
    if (complete_until_ > start)
      covers = fmt::format(
          "it covers the run up to {:.3f} s (its last watermark); what came after is unknown",
          static_cast<double>(complete_until_ - start) / 1e9);
    else
      covers = "it holds no watermark, so no part of the run is known to be complete";
    Problem p{file_size_,
              fmt::format("the trace was not closed (the recorder was killed, could not finish "
                          "writing, or is still writing): read up to byte {}, every whole chunk "
                          "is intact; {}",
                          st.offset, covers),
              -1,
              {}};
    p.tail = true;
    AddProblem(std::move(p));
    return;
  }
  // Chunks with damaged headers: the END chunk's per-stream totals say exactly what is missing,
  // so their counts are no longer unknown (the per-location problems below carry them).
  if (!metadata_.end.stream_totals.empty())
    for (auto& p : problems_)
      if (p.events_lost < 0 && !p.tail)
        p.events_lost = 0;
  for (const auto& [stream, expected] : metadata_.end.stream_totals) {
    if (stream.second == Source::kDefinitions)
      continue;
    const std::pair<uint32_t, uint8_t> key(stream.first, static_cast<uint8_t>(stream.second));
    auto it = st.stream_index.find(key);
    uint64_t have = it == st.stream_index.end() ? 0 : streams_[it->second].events;
    have += st.reported_damaged[key];
    if (have < expected) {
      AddProblem({UINT64_MAX - key.first * 256ull - key.second,
                  fmt::format("location {} is missing {} of its {} in damaged chunks", key.first,
                              expected - have, Plural(expected, "event")),
                  static_cast<int64_t>(expected - have), key.first});
    }
  }
}

// The typed metadata, decoded once from what the SESSION and END chunks hold; bad values are
// left out of session() so that no consumer parses them.
void TraceReader::DecodeMetadata() {
  metadata_ = DecodeSessionMetadata(raw_session_);
  session_ = raw_session_;
  for (const auto& key : metadata_.bad_keys)
    session_.erase(key);
  warnings_.clear();
  if (!metadata_.warning.empty())
    warnings_.push_back(metadata_.warning);
}

Status TraceReader::ReadPayload(const ChunkRef& ref, std::vector<uint8_t>* out) const {
  const ChunkHeader& h = ref.header;
  const int fd = part_readers_.empty() ? fd_ : part_readers_.at(ref.file)->fd_;
  // A compressed payload is read into a buffer kept per thread, not into a new vector zeroed
  // for each chunk (that zeroing was 4% of `parmon report`'s cycles on a recorded MPI trace);
  // a raw one straight into the vector handed out.
  const bool raw = h.codec == static_cast<uint16_t>(Codec::kRaw);
  thread_local std::unique_ptr<uint8_t[]> scratch;
  thread_local size_t scratch_size = 0;
  uint8_t* stored = nullptr;
  if (raw) {
    out->resize(h.stored_size);
    stored = out->data();
  } else {
    if (scratch_size < h.stored_size) {
      scratch_size = std::max<size_t>(h.stored_size, 2 * scratch_size);
      scratch.reset(new uint8_t[scratch_size]);
    }
    stored = scratch.get();
  }
  auto fail = [&](const std::string& why) {
    bool events = h.type == static_cast<uint16_t>(ChunkType::kEvents) &&
                  h.source != static_cast<uint8_t>(Source::kDefinitions);
    std::string msg = fmt::format(
        "chunk #{} at offset {} ({}{}): {}{}", h.sequence, ref.offset, ChunkTypeName(h.type),
        events ? fmt::format(", location {}", h.location) : "", why,
        events ? fmt::format("; its {} {} skipped", Plural(h.event_count, "event"),
                             h.event_count == 1 ? "is" : "are")
               : "");
    Problem p{ref.offset, msg, events ? static_cast<int64_t>(h.event_count) : 0,
              events ? std::optional<uint32_t>(h.location) : std::nullopt};
    p.harmless = h.type == static_cast<uint16_t>(ChunkType::kIndex) ||
                 h.type == static_cast<uint16_t>(ChunkType::kSchema);
    AddProblem(std::move(p), ref.file);
    return Status::Error(msg);
  };
  if (!PreadAll(fd, stored, h.stored_size, ref.offset + sizeof(ChunkHeader)))
    return fail("cannot read payload");
  if (Crc32c(stored, h.stored_size) != h.payload_crc)
    return fail("payload checksum mismatch");
  if (h.codec == static_cast<uint16_t>(Codec::kZstd)) {
    out->resize(h.raw_size);
    ZSTD_DCtx* ctx = DecompressionContext();
    size_t n = ctx ? ZSTD_decompressDCtx(ctx, out->data(), out->size(), stored, h.stored_size)
                   : ZSTD_decompress(out->data(), out->size(), stored, h.stored_size);
    if (ZSTD_isError(n) || n != h.raw_size)
      return fail(fmt::format("cannot decompress ({})",
                              ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size mismatch"));
  } else if (!raw) {
    return fail(fmt::format("unknown codec {}", h.codec));
  }
  return Status::Ok();
}

Status TraceReader::ReadChunk(const ChunkRef& ref, DecodedChunk* out) const {
  out->events.clear();
  PARMON_RETURN_IF_ERROR(ReadPayload(ref, &out->raw));
  std::string error;
  // The header's count is a hint only: never more than the payload can hold.
  out->events.reserve(std::min<size_t>(ref.header.event_count, out->raw.size() / kMinEventBytes));
  if (!DecodeEvents(out->raw.data(), out->raw.size(), ref.header.location,
                    static_cast<Source>(ref.header.source), *schema_, &out->events, &error,
                    ChunkCoding(ref.header))) {
    int64_t lost =
        static_cast<int64_t>(ref.header.event_count) - static_cast<int64_t>(out->events.size());
    std::string msg =
        fmt::format("chunk #{} at offset {} (location {}): {}; {} events lost", ref.header.sequence,
                    ref.offset, ref.header.location, error, lost);
    AddProblem({ref.offset, msg, lost, ref.header.location}, ref.file);
    return Status::Error(msg);
  }
  return Status::Ok();
}

}  // namespace parmon::format
