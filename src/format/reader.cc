#include "format/reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "base/crc32c.h"

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

bool HeaderValid(const ChunkHeader& h) {
  return h.magic == kChunkMagic && h.header_crc == Crc32c(&h, offsetof(ChunkHeader, header_crc)) &&
         h.stored_size <= kMaxChunkPayload && h.raw_size <= kMaxChunkPayload;
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
  }
  return "unknown";
}

}  // namespace

std::string Definitions::Name(uint32_t id) const {
  auto it = strings.find(id);
  return it == strings.end() ? fmt::format("#{}", id) : it->second.text;
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
      LocationDef& d = locations[static_cast<uint32_t>(e.args[0])];
      d.id = static_cast<uint32_t>(e.args[0]);
      d.type = static_cast<LocationType>(e.args[1]);
      d.pid = static_cast<uint32_t>(e.args[2]);
      d.tid = static_cast<uint32_t>(e.args[3]);
      if (!e.payload.empty())
        d.name = std::string(e.payload);
      break;
    }
    case Kind::kDefProcess: {
      ProcessDef& p = processes[static_cast<uint32_t>(e.args[0])];
      p.pid = static_cast<uint32_t>(e.args[0]);
      p.ppid = static_cast<uint32_t>(e.args[1]);
      if (!e.payload.empty())
        p.command = std::string(e.payload);
      break;
    }
    default:
      break;
  }
}

TraceReader::~TraceReader() {
  if (fd_ >= 0)
    close(fd_);
  for (int fd : part_fds_)
    close(fd);
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
  if (stat(path.c_str(), &dir_st) == 0 && S_ISDIR(dir_st.st_mode))
    return OpenDirectory(path, options);
  auto r = std::unique_ptr<TraceReader>(new TraceReader());
  r->path_ = path;
  r->parts_ = {path};
  r->fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (r->fd_ < 0)
    return Status::Error(fmt::format("cannot open {}: {}", path, strerror(errno)));
  struct stat st;
  if (fstat(r->fd_, &st) != 0 || !S_ISREG(st.st_mode))
    return Status::Error(fmt::format("{} is not a regular file", path));
  r->file_size_ = static_cast<uint64_t>(st.st_size);
  FileHeader fh;
  if (r->file_size_ < sizeof fh || !PreadAll(r->fd_, &fh, sizeof fh, 0) ||
      std::memcmp(fh.magic, kFileMagic, sizeof fh.magic) != 0)
    return Status::Error(
        fmt::format("{} is not a parmon trace (it does not start with the parmon "
                    "trace signature)",
                    path));
  r->version_major_ = fh.version_major;
  r->version_minor_ = fh.version_minor;
  if (fh.version_major != kVersionMajor)
    return Status::Error(fmt::format(
        "{} is a parmon trace of format version {}.{}, which this parmon (format {}.{}) cannot "
        "read; use a parmon that matches the recorder's version",
        path, fh.version_major, fh.version_minor, kVersionMajor, kVersionMinor));
  PARMON_RETURN_IF_ERROR(r->Scan(options));
  return r;
}

Status TraceReader::Scan(const OpenOptions& options) {
  std::map<std::pair<uint32_t, uint8_t>, size_t> stream_index;
  std::map<std::pair<uint32_t, uint8_t>, uint64_t> end_totals;
  // Events in chunks already reported as damaged (so the END totals do not report them twice).
  std::map<std::pair<uint32_t, uint8_t>, uint64_t> reported_damaged;
  bool have_end = false;
  uint64_t offset = sizeof(FileHeader);
  std::vector<uint8_t> payload;
  uint64_t chunk_number = 0;
  while (offset < file_size_) {
    ChunkHeader h;
    if (file_size_ - offset == sizeof(Trailer) && have_end) {
      Trailer t;
      if (PreadAll(fd_, &t, sizeof t, offset) && t.magic == kTrailerMagic &&
          t.crc == Crc32c(&t, offsetof(Trailer, crc)))
        break;
    }
    if (file_size_ - offset < sizeof h) {
      AddProblem({offset,
                  fmt::format("the file ends {} bytes into a chunk header at offset {}: the "
                              "recording stopped in the middle of a write",
                              file_size_ - offset, offset),
                  -1,
                  {}});
      break;
    }
    if (!PreadAll(fd_, &h, sizeof h, offset))
      return Status::Error(fmt::format("cannot read {}: {}", path_, strerror(errno)));
    if (!HeaderValid(h)) {
      // Resynchronise: look for the next header that passes its checksum.
      uint64_t next = offset + 1;
      bool found = false;
      std::vector<uint8_t> window(1 << 16);
      while (!found && next + sizeof h <= file_size_) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(window.size(), file_size_ - next));
        if (!PreadAll(fd_, window.data(), n, next))
          break;
        for (size_t i = 0; i + 4 <= n; ++i) {
          uint32_t m;
          std::memcpy(&m, window.data() + i, 4);
          if (m != kChunkMagic || next + i + sizeof h > file_size_)
            continue;
          ChunkHeader c;
          if (PreadAll(fd_, &c, sizeof c, next + i) && HeaderValid(c)) {
            next += i;
            found = true;
            break;
          }
        }
        if (!found)
          next += n > 3 ? n - 3 : n;
      }
      uint64_t skipped = (found ? next : file_size_) - offset;
      AddProblem({offset,
                  fmt::format("chunk {} at offset {} has a damaged header; {} bytes skipped{}",
                              chunk_number, offset, skipped,
                              found ? fmt::format(", reading resumes at offset {}", next)
                                    : ", no intact chunk follows"),
                  -1,
                  {}});
      ++chunk_number;
      if (!found)
        break;
      offset = next;
      continue;
    }
    uint64_t end = offset + sizeof h + h.stored_size;
    if (end > file_size_) {
      AddProblem({offset,
                  fmt::format("the file ends inside chunk {} at offset {} ({} of its {} payload "
                              "bytes present): the recording stopped in the middle of a write; "
                              "its {} events{} are lost",
                              chunk_number, offset, file_size_ - offset - sizeof h, h.stored_size,
                              h.event_count,
                              h.type == static_cast<uint16_t>(ChunkType::kEvents)
                                  ? fmt::format(" of location {}", h.location)
                                  : ""),
                  h.type == static_cast<uint16_t>(ChunkType::kEvents) ? h.event_count : 0,
                  h.location});
      break;
    }
    ChunkRef ref{offset, h};
    auto type = static_cast<ChunkType>(h.type);
    bool is_defs =
        type == ChunkType::kEvents && h.source == static_cast<uint8_t>(Source::kDefinitions);
    bool need_payload = type != ChunkType::kEvents || is_defs || options.verify_payloads;
    if (need_payload) {
      Status s = ReadPayload(ref, &payload);
      if (!s.ok()) {
        if (type == ChunkType::kEvents)
          reported_damaged[{h.location, h.source}] += h.event_count;
        offset = end;
        ++chunk_number;
        continue;  // ReadPayload recorded the problem
      }
    }
    switch (type) {
      case ChunkType::kSession:
      case ChunkType::kEnd: {
        std::vector<std::pair<std::string, std::string>> kv;
        if (!DecodeKeyValues(payload.data(), payload.size(), &kv)) {
          AddProblem(
              {offset,
               fmt::format("{} chunk at offset {} is malformed", ChunkTypeName(h.type), offset),
               0,
               {}});
          break;
        }
        for (auto& [k, v] : kv)
          session_[k] = v;
        if (type == ChunkType::kEnd) {
          have_end = true;
          std::istringstream totals(session_["stream_totals"]);
          std::string item;
          while (std::getline(totals, item, ';')) {
            unsigned loc, src;
            unsigned long long n;
            if (sscanf(item.c_str(), "%u:%u:%llu", &loc, &src, &n) == 3)
              end_totals[{loc, static_cast<uint8_t>(src)}] = n;
          }
        }
        break;
      }
      case ChunkType::kSchema:
        if (!DecodeSchema(payload.data(), payload.size(), &schema_))
          AddProblem(
              {offset, fmt::format("schema chunk at offset {} is malformed", offset), 0, {}});
        break;
      case ChunkType::kEvents:
        if (is_defs) {
          std::vector<Event> events;
          std::string error;
          if (!DecodeEvents(payload.data(), payload.size(), 0, Source::kDefinitions, schema_,
                            &events, &error))
            AddProblem(
                {offset, fmt::format("definition chunk at offset {}: {}", offset, error), -1, {}});
          for (const auto& e : events)
            defs_.Apply(e);
        } else {
          auto key = std::make_pair(h.location, h.source);
          auto it = stream_index.find(key);
          if (it == stream_index.end()) {
            it = stream_index.emplace(key, streams_.size()).first;
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
          first_ts_ = std::min(first_ts_, h.first_ts);
          last_ts_ = std::max(last_ts_, h.last_ts);
        }
        break;
      case ChunkType::kIndex:
        break;
      default:
        // A chunk type from a newer minor version: skip it.
        break;
    }
    offset = end;
    ++chunk_number;
  }
  closed_cleanly_ = have_end;
  if (!have_end) {
    AddProblem({file_size_,
                "the trace was not closed (the recorder was killed or could not finish writing): "
                "everything up to the last whole chunk is intact; events still buffered in the "
                "recorder at that moment are missing",
                -1,
                {}});
  } else {
    // Chunks with damaged headers: the END chunk's per-stream totals say exactly what is missing.
    for (const auto& [key, expected] : end_totals) {
      if (key.second == static_cast<uint8_t>(Source::kDefinitions))
        continue;
      auto it = stream_index.find(key);
      uint64_t have = it == stream_index.end() ? 0 : streams_[it->second].events;
      have += reported_damaged[key];
      if (have < expected) {
        AddProblem({UINT64_MAX - key.first * 256ull - key.second,
                    fmt::format("location {} is missing {} of its {} events in damaged chunks",
                                key.first, expected - have, expected),
                    static_cast<int64_t>(expected - have), key.first});
      }
    }
  }
  if (first_ts_ == UINT64_MAX)
    first_ts_ = 0;
  return Status::Ok();
}

Status TraceReader::ReadPayload(const ChunkRef& ref, std::vector<uint8_t>* out) const {
  const ChunkHeader& h = ref.header;
  const int fd = ref.file == 0 ? fd_ : part_fds_.at(ref.file - 1);
  std::vector<uint8_t> stored(h.stored_size);
  auto fail = [&](const std::string& why) {
    bool events = h.type == static_cast<uint16_t>(ChunkType::kEvents) &&
                  h.source != static_cast<uint8_t>(Source::kDefinitions);
    std::string msg =
        fmt::format("chunk #{} at offset {} ({}{}): {}{}", h.sequence, ref.offset,
                    ChunkTypeName(h.type), events ? fmt::format(", location {}", h.location) : "",
                    why, events ? fmt::format("; its {} events are skipped", h.event_count) : "");
    AddProblem({ref.offset, msg, events ? static_cast<int64_t>(h.event_count) : 0,
                events ? std::optional<uint32_t>(h.location) : std::nullopt},
               ref.file);
    return Status::Error(msg);
  };
  if (!PreadAll(fd, stored.data(), stored.size(), ref.offset + sizeof(ChunkHeader)))
    return fail("cannot read payload");
  if (Crc32c(stored.data(), stored.size()) != h.payload_crc)
    return fail("payload checksum mismatch");
  if (h.codec == static_cast<uint16_t>(Codec::kRaw)) {
    *out = std::move(stored);
  } else if (h.codec == static_cast<uint16_t>(Codec::kZstd)) {
    out->resize(h.raw_size);
    size_t n = ZSTD_decompress(out->data(), out->size(), stored.data(), stored.size());
    if (ZSTD_isError(n) || n != h.raw_size)
      return fail(fmt::format("cannot decompress ({})",
                              ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size mismatch"));
  } else {
    return fail(fmt::format("unknown codec {}", h.codec));
  }
  return Status::Ok();
}

Status TraceReader::ReadChunk(const ChunkRef& ref, DecodedChunk* out) const {
  out->events.clear();
  PARMON_RETURN_IF_ERROR(ReadPayload(ref, &out->raw));
  std::string error;
  out->events.reserve(ref.header.event_count);
  if (!DecodeEvents(out->raw.data(), out->raw.size(), ref.header.location,
                    static_cast<Source>(ref.header.source), schema_, &out->events, &error)) {
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

// ---- sessions recorded per rank: a directory of rank-<K>.ptrace files ---------------------------
namespace {

// rank-<K>.ptrace sorts by K; other names after them, by name.
bool PartBefore(const std::filesystem::path& a, const std::filesystem::path& b) {
  int ka = -1, kb = -1;
  sscanf(a.filename().c_str(), "rank-%d.ptrace", &ka);
  sscanf(b.filename().c_str(), "rank-%d.ptrace", &kb);
  if ((ka >= 0) != (kb >= 0))
    return ka >= 0;
  if (ka != kb)
    return ka < kb;
  return a.filename() < b.filename();
}

// "loc:n;..." or "loc:src:n;..." with the location ids renumbered (dropped when unknown).
std::string RemapCounts(const std::string& list, const std::map<uint32_t, uint32_t>& remap) {
  std::string out;
  std::istringstream in(list);
  std::string item;
  while (std::getline(in, item, ';')) {
    size_t colon = item.find(':');
    if (colon == std::string::npos)
      continue;
    auto it = remap.find(static_cast<uint32_t>(std::strtoul(item.c_str(), nullptr, 10)));
    if (it == remap.end())
      continue;
    out += std::to_string(it->second) + item.substr(colon) + ";";
  }
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<TraceReader>> TraceReader::OpenDirectory(const std::string& path,
                                                                  OpenOptions options) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec))
    if (entry.path().extension() == ".ptrace" && entry.is_regular_file(ec))
      files.push_back(entry.path());
  if (ec)
    return Status::Error(fmt::format("cannot list {}: {}", path, ec.message()));
  if (files.empty())
    return Status::Error(
        fmt::format("{} is a directory without .ptrace files (a session recorded "
                    "per rank holds rank-<K>.ptrace files)",
                    path));
  std::sort(files.begin(), files.end(), PartBefore);
  std::vector<std::unique_ptr<TraceReader>> parts;
  std::vector<Problem> unreadable;
  for (const auto& f : files) {
    auto part = Open(f.string(), options);
    if (!part.ok()) {
      unreadable.push_back({0, part.status().message(), -1, {}});
      continue;
    }
    parts.push_back(std::move(*part));
  }
  if (parts.empty())
    return Status::Error(unreadable.front().message);
  auto r = std::unique_ptr<TraceReader>(new TraceReader());
  r->path_ = path;
  r->Merge(std::move(parts));
  for (auto& p : unreadable)
    r->problems_.push_back(std::move(p));
  return r;
}

void TraceReader::Merge(std::vector<std::unique_ptr<TraceReader>> parts) {
  // Session values: the first file's, then combined with the others'.
  static const std::set<std::string> kSums = {
      "children_cpu_ns",    "events",          "lost_events",
      "overwritten_events", "recorder_cpu_ns", "unattached_lost_events",
      "ring_corruptions",   "sampler_cpu_ns",  "sampler_overruns",
      "sampler_passes",     "switch_records",  "switch_records_lost"};
  auto number = [](const std::string& s) { return std::strtoull(s.c_str(), nullptr, 10); };
  std::set<std::string> hosts_with_cpus;
  std::string lost_by_location, stream_totals;
  uint32_t next_location = 1;
  closed_cleanly_ = true;
  for (uint32_t k = 0; k < parts.size(); ++k) {
    TraceReader& p = *parts[k];
    if (k == 0) {
      fd_ = p.fd_;
      version_major_ = p.version_major_;
      version_minor_ = p.version_minor_;
      schema_ = p.schema_;
      session_ = p.session_;
    } else {
      part_fds_.push_back(p.fd_);
      for (const auto& [key, value] : p.session_) {
        auto it = session_.find(key);
        if (it == session_.end()) {
          session_[key] = value;
        } else if (kSums.count(key)) {
          it->second = std::to_string(number(it->second) + number(value));
        } else if (key == "start_ts" || key == "start_realtime_ns") {
          if (number(value) < number(it->second))
            it->second = value;
        } else if (key == "end_ts") {
          if (number(value) > number(it->second))
            it->second = value;
        } else if (key == "exit_code") {
          if (it->second == "0")
            it->second = value;  // the first failure
        }
      }
    }
    p.fd_ = -1;
    parts_.push_back(p.path_);
    file_size_ += p.file_size_;
    closed_cleanly_ = closed_cleanly_ && p.closed_cleanly_;
    // CPU locations describe the machine: keep one file's per host.
    const bool keep_cpus = hosts_with_cpus.insert(p.SessionValue("host")).second;
    std::map<uint32_t, uint32_t> remap;
    std::set<uint32_t> dropped;
    for (const auto& [id, loc] : p.defs_.locations) {
      if (loc.type == LocationType::kCpu && !keep_cpus) {
        dropped.insert(id);
        continue;
      }
      LocationDef d = loc;
      d.id = next_location++;
      remap[id] = d.id;
      defs_.locations[d.id] = std::move(d);
    }
    for (const auto& [id, s] : p.defs_.strings)
      defs_.strings.emplace(id, s);
    for (const auto& [id, s] : p.defs_.event_names)
      defs_.event_names.emplace(id, s);
    for (const auto& [pid, proc] : p.defs_.processes)
      defs_.processes.emplace(pid, proc);
    for (const auto& s : p.streams_) {
      if (dropped.count(s.location))
        continue;
      auto it = remap.find(s.location);
      if (it == remap.end())
        it = remap.emplace(s.location, next_location++).first;
      Stream m = s;
      m.location = it->second;
      for (auto& c : m.chunks) {
        c.file = k;
        c.header.location = it->second;
      }
      first_ts_ = std::min(first_ts_, m.first_ts);
      last_ts_ = std::max(last_ts_, m.last_ts);
      streams_.push_back(std::move(m));
    }
    for (Problem pr : p.problems_) {
      if (pr.location) {
        auto it = remap.find(*pr.location);
        pr.location = it == remap.end() ? std::nullopt : std::optional<uint32_t>(it->second);
      }
      if (parts.size() > 1)
        pr.message = std::filesystem::path(p.path_).filename().string() + ": " + pr.message;
      problems_.push_back(std::move(pr));
      bad_chunks_.insert({k, problems_.back().offset});
    }
    lost_by_location += RemapCounts(p.SessionValue("lost_by_location"), remap);
    stream_totals += RemapCounts(p.SessionValue("stream_totals"), remap);
  }
  session_["lost_by_location"] = lost_by_location;
  session_["stream_totals"] = stream_totals;
  session_.erase("index_offset");
  session_.erase("mpi_rank");
  session_["session_files"] = std::to_string(parts.size());
  if (first_ts_ == UINT64_MAX)
    first_ts_ = 0;
}

MergeCursor::MergeCursor(const TraceReader& reader, CursorFilter filter)
    : reader_(reader), filter_(std::move(filter)) {
  for (const auto& s : reader_.streams()) {
    if (filter_.locations && !filter_.locations->count(s.location))
      continue;
    if (filter_.sources && !filter_.sources->count(s.source))
      continue;
    if (s.last_ts < filter_.from_ts || s.first_ts > filter_.to_ts)
      continue;
    states_.push_back(StreamState{&s});
  }
  for (size_t i = 0; i < states_.size(); ++i)
    if (Refill(&states_[i]))
      heap_.push({states_[i].chunk.events[0].ts, i});
}

bool MergeCursor::Refill(StreamState* s) {
  // Loads the next chunk with events in the window; skips damaged chunks (recorded as problems).
  while (s->next_chunk < s->stream->chunks.size()) {
    const ChunkRef& ref = s->stream->chunks[s->next_chunk++];
    if (ref.header.last_ts < filter_.from_ts)
      continue;
    if (ref.header.first_ts > filter_.to_ts)
      return false;
    Status st = reader_.ReadChunk(ref, &s->chunk);
    // A chunk that decodes partly still hands out what it decoded.
    s->pos = 0;
    while (s->pos < s->chunk.events.size() && s->chunk.events[s->pos].ts < filter_.from_ts)
      ++s->pos;
    if (s->pos < s->chunk.events.size())
      return true;
  }
  return false;
}

bool MergeCursor::Next(Event* out) {
  if (pending_) {
    size_t i = *pending_;
    pending_.reset();
    StreamState& s = states_[i];
    ++s.pos;
    bool more = s.pos < s.chunk.events.size() || Refill(&s);
    if (more)
      heap_.push({s.chunk.events[s.pos].ts, i});
  }
  if (heap_.empty())
    return false;
  auto [ts, i] = heap_.top();
  if (ts > filter_.to_ts)
    return false;
  heap_.pop();
  StreamState& s = states_[i];
  *out = s.chunk.events[s.pos];
  pending_ = i;
  return true;
}

}  // namespace parmon::format
