#include "live/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "format/chunk_stream.h"

namespace parmon::live {
namespace {

std::string Key(const std::string& session, int rank) {
  return rank < 0 ? session : fmt::format("{}/rank-{}", session, rank);
}

std::string MetaPath(const std::string& dir, const std::string& key) {
  std::string flat = key;
  for (char& c : flat)
    if (c == '/')
      c = '+';
  return fmt::format("{}/.streams/{}.meta", dir, flat);
}

// The sidecar of a stream, or an empty object.
nlohmann::json ReadMeta(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

// Opens (creating, or truncating when fresh) a stream's file and reads its size.
Status OpenFile(Stream* s, bool truncate) {
  if (s->fd >= 0)
    close(s->fd);
  int flags = O_RDWR | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0);
  s->fd = open(s->path.c_str(), flags, 0644);
  if (s->fd < 0)
    return Status::Error(fmt::format("cannot open {}: {}", s->path, strerror(errno)));
  struct stat st;
  fstat(s->fd, &st);
  s->size = static_cast<uint64_t>(st.st_size);
  return Status::Ok();
}

}  // namespace

Stream::~Stream() {
  if (fd >= 0)
    close(fd);
}

Status Stream::Append(uint64_t offset, std::string_view bytes) {
  if (offset > size)
    return Status::Error(
        fmt::format("DATA at offset {} but the collector holds {} bytes of {}", offset, size, key));
  if (offset + bytes.size() <= size)
    return Status::Ok();  // already held (a resend after a lost ACK)
  bytes.remove_prefix(size - offset);
  if (size == 0 && bytes.size() >= 8 && memcmp(bytes.data(), "PARMONTR", 8) != 0)
    return Status::Error(fmt::format("stream {} does not start with a parmon trace header", key));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n =
        pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(size + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      // Keep the file at what it held: a partial write would be resent anyway.
      if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
      }
      return Status::Error(fmt::format("cannot write {}: {}", path, strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  size += bytes.size();
  Notify();
  return Status::Ok();
}

void Stream::MarkEnded() {
  ended = true;
  lost = false;
  lost_reason.clear();
  // A sidecar that cannot be written only means a restarted collector sees the stream open.
  (void)WriteMeta(*this);
  Notify();
}

void Stream::MarkLost(std::string reason) {
  lost = true;
  lost_reason = std::move(reason);
  (void)WriteMeta(*this);  // as MarkEnded: unwritten, a restarted collector sees it open
  Notify();                // followers learn that nothing more comes
}

void Stream::ClearLost() {
  if (!lost)
    return;
  lost = false;
  lost_reason.clear();
  (void)WriteMeta(*this);
}

HeldChunks CountWholeChunks(int fd, uint64_t size) {
  HeldChunks out;
  if (fd >= 0)
    out.bytes = format::WholeChunksEnd(fd, 0, size, &out.chunks);
  return out;
}

StatusOr<std::string> Stream::Read(uint64_t offset, size_t max) const {
  if (offset >= size)
    return std::string();
  std::string out(std::min<uint64_t>(max, size - offset), '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return Status::Error(fmt::format("cannot read {}: {}", path,
                                       n == 0 ? "file shorter than held" : strerror(errno)));
    done += static_cast<size_t>(n);
  }
  return out;
}

void Stream::Notify() {
  auto run = std::move(waiters);
  waiters.clear();
  for (auto& w : run)
    w();
}

Status WriteMeta(const Stream& s) {
  nlohmann::json j = {{"session", s.session}, {"rank", s.rank}, {"stream_id", s.stream_id},
                      {"job", s.job},         {"host", s.host}, {"ranks", s.ranks},
                      {"ended", s.ended}};
  if (s.lost) {
    j["lost"] = true;
    j["lost_reason"] = s.lost_reason;
  }
  std::string tmp = s.meta_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump() << "\n";
    if (!out)
      return Status::Error(fmt::format("cannot write {}", tmp));
  }
  if (rename(tmp.c_str(), s.meta_path.c_str()) != 0)
    return Status::Error(fmt::format("cannot write {}: {}", s.meta_path, strerror(errno)));
  return Status::Ok();
}

Status SessionStore::Init() {
  std::error_code ec;
  std::filesystem::create_directories(dir_ + "/.streams", ec);
  if (ec)
    return Status::Error(fmt::format("cannot create the store {}: {}", dir_, ec.message()));
  return Status::Ok();
}

StatusOr<Stream*> SessionStore::OpenForRecorder(const Hello& hello, bool* fresh) {
  int rank = hello.rank;
  std::string key = Key(hello.session, rank);
  auto& slot = streams_[key];
  if (!slot) {
    slot = std::make_unique<Stream>();
    slot->session = hello.session;
    slot->rank = rank;
    slot->key = key;
    slot->path = rank < 0 ? fmt::format("{}/{}.ptrace", dir_, hello.session)
                          : fmt::format("{}/{}/rank-{}.ptrace", dir_, hello.session, rank);
    slot->meta_path = MetaPath(dir_, key);
    nlohmann::json meta = ReadMeta(slot->meta_path);
    slot->stream_id = JsonString(meta, "stream_id", "");
    slot->ended = JsonBool(meta, "ended", false);
    slot->lost = JsonBool(meta, "lost", false);
    slot->lost_reason = JsonString(meta, "lost_reason", "");
  }
  Stream* s = slot.get();
  *fresh = s->stream_id != hello.stream_id || (s->fd < 0 && !std::filesystem::exists(s->path));
  if (rank >= 0) {
    std::error_code ec;
    std::filesystem::create_directories(dir_ + "/" + hello.session, ec);
  }
  if (*fresh) {
    s->stream_id = hello.stream_id;
    s->ended = false;
  }
  if (*fresh || s->fd < 0)
    PARMON_RETURN_IF_ERROR(OpenFile(s, *fresh));
  s->job = hello.job;
  s->host = hello.host;
  s->ranks = hello.ranks;
  PARMON_RETURN_IF_ERROR(WriteMeta(*s));
  return s;
}

Stream* SessionStore::Find(const std::string& session, int rank) {
  if (!ValidSessionName(session))
    return nullptr;
  std::string key = Key(session, rank);
  auto it = streams_.find(key);
  if (it != streams_.end() && it->second->fd >= 0)
    return it->second.get();
  std::string path = rank < 0 ? fmt::format("{}/{}.ptrace", dir_, session)
                              : fmt::format("{}/{}/rank-{}.ptrace", dir_, session, rank);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return nullptr;
  auto s = std::make_unique<Stream>();
  s->session = session;
  s->rank = rank;
  s->key = key;
  s->path = path;
  s->meta_path = MetaPath(dir_, key);
  nlohmann::json meta = ReadMeta(s->meta_path);
  s->stream_id = JsonString(meta, "stream_id", "");
  // A file stored without a sidecar was not written by a live recorder: it is complete.
  s->ended = JsonBool(meta, "ended", meta.empty());
  s->lost = JsonBool(meta, "lost", false);
  s->lost_reason = JsonString(meta, "lost_reason", "");
  s->ranks = static_cast<int>(std::min<uint64_t>(JsonU64(meta, "ranks", 0), 1u << 30));
  if (!OpenFile(s.get(), false).ok())
    return nullptr;
  Stream* out = s.get();
  streams_[key] = std::move(s);
  return out;
}

std::vector<int> SessionStore::Ranks(const std::string& session) {
  std::vector<int> out;
  if (!ValidSessionName(session))
    return out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/" + session, ec)) {
    int k = -1;
    char tail = 0;
    std::string name = e.path().filename().string();
    if (sscanf(name.c_str(), "rank-%d.ptrac%c", &k, &tail) == 2 && tail == 'e' && k >= 0 &&
        name == fmt::format("rank-{}.ptrace", k))
      out.push_back(k);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Stream*> SessionStore::StreamsOf(const std::string& session) {
  std::vector<Stream*> out;
  for (auto& [key, s] : streams_)
    if (s->session == session)
      out.push_back(s.get());
  return out;
}

}  // namespace parmon::live
