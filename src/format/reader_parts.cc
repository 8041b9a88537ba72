// TraceReader, the parts of a session recorded per MPI rank: Open(RUN/) reads every
// rank-<K>.ptrace file of the directory and Merge() presents them as one trace (locations
// renumbered file by file, CPU locations kept once per host, session values combined). Kept apart
// from reader.cc, which reads one file or stream. docs/comm.md has the design.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

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
  complete_until_ = UINT64_MAX;
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
    complete_until_ = std::min(complete_until_, p.complete_until());
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

}  // namespace parmon::format
