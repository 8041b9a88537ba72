// ListStore and FindStored (store_list.h): the store's files and sidecars read from disk.
#include "live/store_list.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "live/protocol.h"

namespace parmon::live {
namespace {

// A stream's file and sidecar; false when the file is not a regular file.
bool ReadStream(const std::string& dir, const std::string& key, StoredStream* s) {
  struct stat st;
  if (stat(s->path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return false;
  s->size = static_cast<uint64_t>(st.st_size);
  s->mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  std::string flat = key;
  std::replace(flat.begin(), flat.end(), '/', '+');
  std::ifstream in(fmt::format("{}/.streams/{}.meta", dir, flat));
  std::stringstream text;
  text << in.rdbuf();
  const auto meta = nlohmann::json::parse(text.str(), nullptr, false);
  s->has_meta = meta.is_object();
  s->ended = !s->has_meta || JsonBool(meta, "ended", false);
  s->ranks = static_cast<int>(std::min<uint64_t>(JsonU64(meta, "ranks", 0), 1u << 30));
  s->lost = s->has_meta && !s->ended && JsonBool(meta, "lost", false);
  s->lost_reason = s->lost ? JsonString(meta, "lost_reason", "") : std::string();
  return true;
}

// The rank files of a session directory, as the collector names them.
std::vector<int> RankFiles(const std::string& path) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = e.path().filename().string();
    int k = -1;
    char tail = 0;
    if (sscanf(name.c_str(), "rank-%d.ptrac%c", &k, &tail) == 2 && tail == 'e' && k >= 0 &&
        name == fmt::format("rank-{}.ptrace", k))
      out.push_back(k);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

uint64_t StoredSession::bytes() const {
  uint64_t n = 0;
  for (const StoredStream& s : streams)
    n += s.size;
  return n;
}

std::string StoredSession::signature() const {
  std::string out;
  for (const StoredStream& s : streams)
    out += fmt::format("{}:{}:{}:{}:{};", s.rank, s.size, s.mtime_ns, s.ended, s.lost);
  return out;
}

std::optional<StoredSession> FindStored(const std::string& dir, const std::string& name) {
  if (!ValidSessionName(name))
    return std::nullopt;
  StoredSession out;
  out.name = name;
  StoredStream single;
  single.path = fmt::format("{}/{}.ptrace", dir, name);
  if (ReadStream(dir, name, &single)) {
    out.path = single.path;
    out.streams.push_back(single);
    out.complete = single.ended || single.lost;
    if (single.lost)
      out.lost = single.lost_reason;
    return out;
  }
  out.path = fmt::format("{}/{}", dir, name);
  out.per_rank = true;
  bool any_meta = false;
  for (int k : RankFiles(out.path)) {
    StoredStream s;
    s.rank = k;
    s.path = fmt::format("{}/rank-{}.ptrace", out.path, k);
    if (!ReadStream(dir, fmt::format("{}/rank-{}", name, k), &s))
      continue;
    any_meta |= s.has_meta;
    out.ranks_expected = std::max(out.ranks_expected, s.ranks);
    out.streams.push_back(s);
  }
  if (out.streams.empty())
    return std::nullopt;
  std::vector<int> lost_ranks;
  for (const StoredStream& s : out.streams)
    if (s.lost)
      lost_ranks.push_back(s.rank);
  out.complete = std::all_of(out.streams.begin(), out.streams.end(),
                             [](const StoredStream& s) { return s.ended || s.lost; }) &&
                 (!any_meta || !lost_ranks.empty() ||
                  static_cast<int>(out.streams.size()) >= out.ranks_expected);
  if (!lost_ranks.empty()) {
    const StoredStream& first = *std::find_if(out.streams.begin(), out.streams.end(),
                                              [](const StoredStream& s) { return s.lost; });
    out.lost = fmt::format("{} of {} rank(s) lost (rank {}: {})", lost_ranks.size(),
                           std::max<size_t>(out.ranks_expected, out.streams.size()), first.rank,
                           first.lost_reason);
    if (out.ranks_expected > static_cast<int>(out.streams.size()))
      out.lost += fmt::format("; {} rank(s) never reached the collector",
                              out.ranks_expected - static_cast<int>(out.streams.size()));
  }
  return out;
}

std::vector<StoredSession> ListStore(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (e.is_directory(ec)) {
      names.push_back(name);
    } else if (name.size() > 7 && name.compare(name.size() - 7, 7, ".ptrace") == 0) {
      name.resize(name.size() - 7);
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<StoredSession> out;
  for (const std::string& name : names)
    if (auto s = FindStored(dir, name))
      out.push_back(std::move(*s));
  return out;
}

}  // namespace parmon::live
