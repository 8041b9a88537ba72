// The exporters' shared pieces (export_common.h).
#include "export/export_common.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/utf8.h"

namespace parmon::exporter {

model::MergeFilter WindowFilter(const model::Session& session, const ExportOptions& options) {
  model::MergeFilter filter;
  const uint64_t start = session.start();
  filter.from_ts = options.from_ns > UINT64_MAX - start ? UINT64_MAX : start + options.from_ns;
  filter.to_ts = options.to_ns > UINT64_MAX - start ? UINT64_MAX : start + options.to_ns;
  return filter;
}

OutFile::~OutFile() {
  if (f_)
    fclose(f_);
}

Status OutFile::Open(const std::string& path) {
  path_ = path;
  f_ = path == "-" ? stdout : fopen(path.c_str(), "wb");
  if (!f_)
    return Status::Error(fmt::format("cannot create {}: {}", path, strerror(errno)));
  buf_.reserve(1u << 21);
  return Status::Ok();
}

void OutFile::Drain() {
  if (!f_ || buf_.empty())
    return;
  if (fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size())
    failed_ = true;
  buf_.clear();
}

Status OutFile::Close() {
  Drain();
  if (f_) {
    if (f_ == stdout) {
      if (fflush(f_) != 0)
        failed_ = true;
    } else if (fclose(f_) != 0) {
      failed_ = true;
    }
    f_ = nullptr;
  }
  if (failed_)
    return Status::Error(fmt::format("writing {} failed: {}", path_, strerror(errno)));
  return Status::Ok();
}

void AppendJsonString(std::string* out, std::string_view s) {
  std::string valid;
  if (!IsValidUtf8(s)) {
    valid = ValidUtf8(s);
    s = valid;
  }
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\r':
        *out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          *out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        else
          out->push_back(c);
    }
  }
  out->push_back('"');
}

void AppendCsvField(std::string* out, std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) {
    out->append(s);
    return;
  }
  out->push_back('"');
  for (char c : s) {
    if (c == '"')
      out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

uint64_t MessageIds::Id(int64_t from, int64_t to, uint64_t comm, uint64_t tag, uint64_t k) {
  // FNV-1a over the five values.
  uint64_t h = 1469598103934665603ull;
  for (uint64_t v : {static_cast<uint64_t>(from), static_cast<uint64_t>(to), comm, tag, k})
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  return h & ((uint64_t{1} << 53) - 1);
}

std::string ProcessLabel(const model::Session& session, uint32_t location) {
  const uint32_t pid = session.PidOf(location);
  const int64_t rank = session.RankOf(location);
  if (rank >= 0)
    return fmt::format("rank {} (pid {})", rank, pid);
  auto it = session.definitions().processes.find(pid);
  if (it != session.definitions().processes.end() && !it->second.command.empty())
    return fmt::format("pid {}: {}", pid, it->second.command);
  return fmt::format("pid {}", pid);
}

std::string ThreadLabel(const model::Session& session, uint32_t location) {
  std::string_view name = session.NameOf(location);
  if (!name.empty())
    return std::string(name);
  return fmt::format("thread {}", session.TidOf(location));
}

}  // namespace parmon::exporter
