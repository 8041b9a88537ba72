// TraceReader, the parts of a session recorded per MPI rank: Open(RUN/) reads every
// rank-<K>.ptrace file of the directory and Merge() presents them as one trace (locations
// renumbered file by file, CPU locations kept once per host, session values combined). Kept apart
// from reader.cc, which reads one file or stream. docs/comm.md has the design. Each rank's file
// stays open as a reader of its own, so Refresh() follows files still being written (the
// collector's live analysis of a per-rank session): MergeParts() takes what each gained.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <type_traits>

#include <fmt/format.h>

#include "format/reader.h"

namespace parmon::format {
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

// The END counts that add up over the files of a session.
constexpr uint64_t EndInfo::*kSummed[] = {
    &EndInfo::children_cpu_ns,    &EndInfo::events,          &EndInfo::lost_events,
    &EndInfo::overwritten_events, &EndInfo::recorder_cpu_ns, &EndInfo::unattached_lost_events,
    &EndInfo::ring_corruptions,   &EndInfo::sampler_cpu_ns,  &EndInfo::sampler_overruns,
    &EndInfo::sampler_passes,     &EndInfo::switch_records,  &EndInfo::switch_records_lost};

// The earliest of two start times, 0 being absent.
uint64_t Earliest(uint64_t a, uint64_t b) {
  return a == 0 ? b : b == 0 ? a : std::min(a, b);
}

// Adds one more file's typed values to the session's: counts summed, earliest start, latest end,
// the first failure's exit code.
void Combine(const SessionMetadata& part, SessionMetadata* m) {
  for (auto field : kSummed)
    m->end.*field += part.end.*field;
  m->session.start_ts = Earliest(m->session.start_ts, part.session.start_ts);
  m->session.start_realtime_ns =
      Earliest(m->session.start_realtime_ns, part.session.start_realtime_ns);
  m->end.end_ts = std::max(m->end.end_ts, part.end.end_ts);
  if (part.end.exit_code && (!m->end.exit_code || *m->end.exit_code == 0))
    m->end.exit_code = part.end.exit_code;
}

// A file's per-location counts with the location ids renumbered (dropped when unknown).
template <class Key>
void AddRemapped(const std::map<Key, uint64_t>& counts,
                 const std::map<uint32_t, uint32_t>& remap,
                 std::map<Key, uint64_t>* out) {
  for (const auto& [key, n] : counts) {
    Key k = key;
    uint32_t* loc;
    if constexpr (std::is_same_v<Key, uint32_t>)
      loc = &k;
    else
      loc = &k.first;
    auto it = remap.find(*loc);
    if (it == remap.end())
      continue;
    *loc = it->second;
    (*out)[k] += n;
  }
}

// The .ptrace files of a session directory, in no particular order.
Status ListParts(const std::string& path, std::vector<std::string>* files) {
  std::error_code ec;
  size_t before = files->size();
  for (const auto& entry : std::filesystem::directory_iterator(path, ec))
    if (entry.path().extension() == ".ptrace" && entry.is_regular_file(ec))
      files->push_back(entry.path().string());
  if (ec)
    return Status::Error(fmt::format("cannot list {}: {}", path, ec.message()));
  if (files->size() == before)
    return Status::Error(
        fmt::format("{} is a directory without .ptrace files (a session recorded "
                    "per rank holds rank-<K>.ptrace files)",
                    path));
  return Status::Ok();
}

// Every rank file stays open while the session is read: a session of more files than the soft
// limit of open files (often 1,024) raises it towards the hard limit.
void AllowOpenFiles(size_t files) {
  rlimit lim{};
  const rlim_t want = static_cast<rlim_t>(files) + 64;
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= want)
    return;
  lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? want : std::min(want, lim.rlim_max);
  (void)setrlimit(RLIMIT_NOFILE, &lim);
}

}  // namespace

StatusOr<std::unique_ptr<TraceReader>> TraceReader::OpenDirectory(const std::string& path,
                                                                  OpenOptions options) {
  std::vector<std::string> files;
  PARMON_RETURN_IF_ERROR(ListParts(path, &files));
  return OpenParts(path, std::move(files), options);
}

StatusOr<std::unique_ptr<TraceReader>> TraceReader::Open(const std::vector<std::string>& paths,
                                                         OpenOptions options) {
  if (paths.size() == 1)
    return Open(paths.front(), options);
  if (paths.empty())
    return Status::Error("no trace file or session directory given");
  std::vector<std::string> files;
  std::string name;
  for (const auto& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec))
      PARMON_RETURN_IF_ERROR(ListParts(p, &files));
    else
      files.emplace_back(p);
    name += (name.empty() ? "" : " ") + p;
  }
  return OpenParts(name, std::move(files), options);
}

// The rank files of one session, from one directory or several (ranks that wrote on their own
// hosts): read one by one, then merged. Files are ordered by rank (rank-<K>.ptrace), whatever
// directory holds them, so that rank 0's comes first.
StatusOr<std::unique_ptr<TraceReader>> TraceReader::OpenParts(const std::string& path,
                                                              std::vector<std::string> files,
                                                              OpenOptions options) {
  std::stable_sort(files.begin(), files.end(), [](const std::string& a, const std::string& b) {
    return PartBefore(std::filesystem::path(a), std::filesystem::path(b));
  });
  // A file named twice (its directory and itself) is read once.
  std::set<std::string> seen;
  std::erase_if(files, [&](const std::string& f) {
    std::error_code ec;
    return !seen.insert(std::filesystem::weakly_canonical(f, ec).string()).second;
  });
  AllowOpenFiles(files.size());
  std::vector<std::unique_ptr<TraceReader>> parts;
  std::vector<Problem> unreadable;
  for (const auto& f : files) {
    auto part = Open(f, options);
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
  part_readers_ = std::move(parts);
  part_merge_.resize(part_readers_.size());
  std::set<std::string> hosts_with_cpus;
  for (uint32_t k = 0; k < part_readers_.size(); ++k) {
    TraceReader& p = *part_readers_[k];
    parts_.push_back(p.path_);
    part_hosts_.push_back(p.metadata_.session.host);
    // CPU locations describe the machine: keep one file's per host.
    part_merge_[k].keep_cpus = hosts_with_cpus.insert(p.metadata_.session.host).second;
  }
  version_major_ = part_readers_.front()->version_major_;
  version_minor_ = part_readers_.front()->version_minor_;
  schema_ = part_readers_.front()->schema_;
  MergeParts();
  if (closed_cleanly_)
    for (auto& p : part_readers_)  // never refreshed: the merged copy is all that is read
      p->defs_ = {};
}

void TraceReader::MergeParts() {
  for (uint32_t k = 0; k < part_readers_.size(); ++k) {
    TraceReader& p = *part_readers_[k];
    PartMerge& pm = part_merge_[k];
    // Locations first (by the part's id), then streams of locations never defined.
    for (const auto& [id, loc] : p.defs_.locations) {
      if (pm.remap.count(id) || pm.dropped.count(id))
        continue;
      if (loc.type == LocationType::kCpu && !pm.keep_cpus)
        pm.dropped.insert(id);
      else
        pm.remap[id] = next_location_++;
    }
    for (size_t i = 0; i < p.streams_.size(); ++i) {
      Stream& s = p.streams_[i];
      if (i == pm.stream_of.size()) {
        if (pm.dropped.count(s.location)) {
          pm.stream_of.push_back(SIZE_MAX);
        } else {
          auto it = pm.remap.find(s.location);
          if (it == pm.remap.end())
            it = pm.remap.emplace(s.location, next_location_++).first;
          Stream m;
          m.location = it->second;
          m.source = s.source;
          pm.stream_of.push_back(streams_.size());
          streams_.push_back(std::move(m));
        }
      }
      const size_t to = pm.stream_of[i];
      if (to != SIZE_MAX) {
        Stream& m = streams_[to];
        for (ChunkRef c : s.chunks) {
          c.file = k;
          c.header.location = m.location;
          m.chunks.push_back(c);
        }
        m.events = s.events;
        m.first_ts = s.first_ts;
        m.last_ts = s.last_ts;
      }
      // Merged: the part keeps only what it needs to go on scanning (counts and times).
      std::vector<ChunkRef>().swap(s.chunks);
    }
  }
  CombineParts();
}

void TraceReader::CombineParts() {
  // Session values: the first file's, then combined with the others' (typed; the first file's
  // text values, and keys only later files have).
  SessionMetadata combined = part_readers_.front()->metadata_;
  combined.end.lost_by_location.clear();
  combined.end.held_by_location.clear();
  combined.end.stream_totals.clear();
  defs_ = {};
  session_.clear();
  warnings_.clear();
  file_size_ = 0;
  closed_cleanly_ = true;
  complete_until_ = UINT64_MAX;
  std::erase_if(problems_, [](const Problem& p) { return p.tail; });
  const size_t n = part_readers_.size();
  for (uint32_t k = 0; k < n; ++k) {
    TraceReader& p = *part_readers_[k];
    const PartMerge& pm = part_merge_[k];
    if (k > 0)
      Combine(p.metadata_, &combined);
    // The first file's values; keys it lacks from the later ones.
    session_.insert(p.session_.begin(), p.session_.end());
    file_size_ += p.file_size_;
    closed_cleanly_ = closed_cleanly_ && p.closed_cleanly_;
    complete_until_ = std::min(complete_until_, p.complete_until());
    for (const auto& [id, loc] : p.defs_.locations) {
      auto it = pm.remap.find(id);
      if (it == pm.remap.end())
        continue;
      LocationDef d = loc;
      d.id = it->second;
      defs_.locations[d.id] = std::move(d);
    }
    for (const auto& [id, s] : p.defs_.strings)
      defs_.strings.emplace(id, s);
    for (const auto& [id, s] : p.defs_.event_names)
      defs_.event_names.emplace(id, s);
    for (const auto& [pid, proc] : p.defs_.processes)
      defs_.processes.emplace(pid, proc);
    // Each rank's recorder keeps its own budget: its stop, once (the parts are merged afresh at
    // every refresh of a growing session).
    for (const Definitions::SwitchStop& stop : p.defs_.switch_stops)
      if (std::none_of(defs_.switch_stops.begin(), defs_.switch_stops.end(),
                       [&](const Definitions::SwitchStop& x) {
                         return x.pid == stop.pid && x.ts == stop.ts;
                       }))
        defs_.switch_stops.push_back(stop);
    // The part's problems not merged yet, and its tail ones (replaced at each refresh).
    size_t non_tail = 0;
    for (Problem pr : p.problems_) {
      if (!pr.tail && non_tail++ < pm.problems_taken)
        continue;
      if (pr.location) {
        auto it = pm.remap.find(*pr.location);
        pr.location = it == pm.remap.end() ? std::nullopt : std::optional<uint32_t>(it->second);
      }
      if (n > 1)
        pr.message = std::filesystem::path(p.path_).filename().string() + ": " + pr.message;
      if (!pr.tail)
        bad_chunks_.insert({k, pr.offset});
      problems_.push_back(std::move(pr));
    }
    part_merge_[k].problems_taken = non_tail;
    AddRemapped(p.metadata_.end.lost_by_location, pm.remap, &combined.end.lost_by_location);
    AddRemapped(p.metadata_.end.held_by_location, pm.remap, &combined.end.held_by_location);
    AddRemapped(p.metadata_.end.stream_totals, pm.remap, &combined.end.stream_totals);
    for (const std::string& w : p.warnings_)
      warnings_.push_back(n > 1 ? std::filesystem::path(p.path_).filename().string() + ": " + w
                                : w);
  }
  // The combined numbers, written with the one encoder, for the keys some file has.
  static const std::set<std::string> kCombined = {"start_ts",         "start_realtime_ns",
                                                  "end_ts",           "exit_code",
                                                  "children_cpu_ns",  "events",
                                                  "lost_events",      "overwritten_events",
                                                  "recorder_cpu_ns",  "unattached_lost_events",
                                                  "ring_corruptions", "sampler_cpu_ns",
                                                  "sampler_overruns", "sampler_passes",
                                                  "switch_records",   "switch_records_lost"};
  KeyValues encoded = EncodeSession(combined.session);
  for (auto& kv : EncodeEnd(combined.end))
    encoded.push_back(std::move(kv));
  for (const auto& [key, value] : encoded)
    if (kCombined.count(key) && session_.count(key))
      session_[key] = value;
  session_["lost_by_location"] = EncodeLostByLocation(combined.end.lost_by_location);
  if (!combined.end.held_by_location.empty())
    session_["held_by_location"] = EncodeLostByLocation(combined.end.held_by_location);
  session_["stream_totals"] = EncodeStreamTotals(combined.end.stream_totals);
  session_.erase("index_offset");
  session_.erase("mpi_rank");
  session_["session_files"] = std::to_string(n);
  raw_session_ = session_;
  metadata_ = DecodeSessionMetadata(session_);  // the parts' warnings are kept above
  first_ts_ = UINT64_MAX;
  last_ts_ = 0;
  for (const Stream& m : streams_) {
    first_ts_ = std::min(first_ts_, m.first_ts);
    last_ts_ = std::max(last_ts_, m.last_ts);
  }
  if (first_ts_ == UINT64_MAX)
    first_ts_ = 0;
}

}  // namespace parmon::format
