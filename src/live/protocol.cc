#include "live/protocol.h"

#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/crc32c.h"

namespace parmon::live {
namespace {

void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t GetU64(std::string_view s) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | static_cast<uint8_t>(s[i]);
  return v;
}

uint32_t FrameCrc(const uint8_t* header, std::string_view payload) {
  return Crc32c(payload.data(), payload.size(), Crc32c(header, 8));
}

}  // namespace

std::string EncodeFrame(FrameType type, std::string_view payload) {
  std::string out(kFrameHeaderSize, '\0');
  auto* h = reinterpret_cast<uint8_t*>(out.data());
  PutU32(h, kFrameMagic | (static_cast<uint32_t>(type) << 24));
  PutU32(h + 4, static_cast<uint32_t>(payload.size()));
  PutU32(h + 8, FrameCrc(h, payload));
  out.append(payload);
  return out;
}

Status ParseFrameHeader(const uint8_t* header, FrameType* type, uint32_t* length) {
  uint32_t word = GetU32(header);
  if ((word & 0x00FFFFFF) != kFrameMagic)
    return Status::Error(fmt::format("bad frame magic 0x{:08x} (not a parmon live peer)", word));
  uint8_t t = static_cast<uint8_t>(word >> 24);
  if (t < static_cast<uint8_t>(FrameType::kHello) || t > static_cast<uint8_t>(FrameType::kReport))
    return Status::Error(fmt::format("unknown frame type {}", t));
  uint32_t len = GetU32(header + 4);
  if (len > kMaxFramePayload)
    return Status::Error(
        fmt::format("frame of {} bytes is over the limit of {} bytes", len, kMaxFramePayload));
  *type = static_cast<FrameType>(t);
  *length = len;
  return Status::Ok();
}

Status CheckFrameCrc(const uint8_t* header, std::string_view payload) {
  uint32_t want = GetU32(header + 8), got = FrameCrc(header, payload);
  if (want != got)
    return Status::Error(
        fmt::format("frame checksum mismatch (0x{:08x}, computed 0x{:08x})", want, got));
  return Status::Ok();
}

void FrameDecoder::Feed(const void* data, size_t size) {
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  } else if (pos_ > (1u << 16) && pos_ > buf_.size() / 2) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(static_cast<const char*>(data), size);
}

std::optional<Frame> FrameDecoder::Next() {
  if (!error_.ok() || buf_.size() - pos_ < kFrameHeaderSize)
    return std::nullopt;
  const auto* h = reinterpret_cast<const uint8_t*>(buf_.data() + pos_);
  Frame f;
  uint32_t len = 0;
  if (Status s = ParseFrameHeader(h, &f.type, &len); !s.ok()) {
    error_ = s;
    return std::nullopt;
  }
  if (buf_.size() - pos_ - kFrameHeaderSize < len)
    return std::nullopt;
  std::string_view payload(buf_.data() + pos_ + kFrameHeaderSize, len);
  if (Status s = CheckFrameCrc(h, payload); !s.ok()) {
    error_ = s;
    return std::nullopt;
  }
  f.payload.assign(payload);
  pos_ += kFrameHeaderSize + len;
  return f;
}

std::string EncodeData(uint64_t offset, std::string_view bytes) {
  std::string out;
  out.reserve(8 + bytes.size());
  PutU64(&out, offset);
  out.append(bytes);
  return out;
}

Status DecodeData(std::string_view payload, uint64_t* offset, std::string_view* bytes) {
  if (payload.size() < 8)
    return Status::Error(fmt::format("DATA frame of {} bytes has no offset", payload.size()));
  *offset = GetU64(payload);
  *bytes = payload.substr(8);
  if (*offset > (1ull << 62))
    return Status::Error(fmt::format("DATA offset {} is not a plausible offset", *offset));
  return Status::Ok();
}

std::string EncodeAck(uint64_t offset) {
  std::string out;
  PutU64(&out, offset);
  return out;
}

Status DecodeAck(std::string_view payload, uint64_t* offset) {
  if (payload.size() != 8)
    return Status::Error(fmt::format("ACK frame of {} bytes (8 expected)", payload.size()));
  *offset = GetU64(payload);
  return Status::Ok();
}

std::string EncodeHello(const Hello& h) {
  nlohmann::json j = {{"version", h.version}, {"role", h.role},           {"token", h.token},
                      {"session", h.session}, {"stream_id", h.stream_id}, {"job", h.job},
                      {"rank", h.rank},       {"ranks", h.ranks},         {"host", h.host},
                      {"pid", h.pid}};
  return j.dump();
}

StatusOr<Hello> DecodeHello(std::string_view payload) {
  auto j = nlohmann::json::parse(payload, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::Error("HELLO is not a JSON object");
  Hello h;
  auto str = [&](const char* key, std::string* out) {
    if (j.contains(key) && j[key].is_string())
      *out = j[key].get<std::string>();
  };
  // Integers are read as int64 and range-checked before they narrow; others count as absent.
  bool in_range = true;
  auto num = [&](const char* key, auto* out) {
    using T = std::remove_pointer_t<decltype(out)>;
    if (!j.contains(key) || !j[key].is_number_integer())
      return;
    int64_t v = j[key].get<int64_t>();
    if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max())
      in_range = false;
    else
      *out = static_cast<T>(v);
  };
  if (!j.contains("version") || !j["version"].is_number_integer())
    return Status::Error("HELLO has no protocol version");
  num("version", &h.version);
  str("role", &h.role);
  str("token", &h.token);
  str("session", &h.session);
  str("stream_id", &h.stream_id);
  str("job", &h.job);
  str("host", &h.host);
  num("rank", &h.rank);
  num("ranks", &h.ranks);
  num("pid", &h.pid);
  if (!in_range)
    return Status::Error("HELLO has a number out of range");
  if (h.version < kBaseProtocolVersion || h.version > kProtocolVersion)
    return Status::Error(fmt::format("protocol version {} (this collector speaks {} to {})",
                                     h.version, kBaseProtocolVersion, kProtocolVersion));
  if (h.role != "recorder" && h.role != "consumer")
    return Status::Error(fmt::format("HELLO role '{}' is neither recorder nor consumer", h.role));
  if (h.role == "recorder") {
    if (!ValidSessionName(h.session))
      return Status::Error(fmt::format("session name '{}' is not 1-128 of [A-Za-z0-9._-]",
                                       h.session.substr(0, 200)));
    if (h.stream_id.empty() || h.stream_id.size() > 64 || !ValidSessionName(h.stream_id))
      return Status::Error("HELLO of a recorder has no valid stream id");
    if (h.rank < -1 || h.rank > (1 << 20) || h.ranks < 0 || h.ranks > (1 << 20))
      return Status::Error(fmt::format("HELLO rank {} of {} is out of range", h.rank, h.ranks));
  }
  return h;
}

bool ValidSessionName(std::string_view name) {
  if (name.empty() || name.size() > 128 || name[0] == '.')
    return false;
  for (char c : name)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return false;
  return true;
}

std::string SanitizeSessionName(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 128))
    out.push_back(isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '_');
  while (!out.empty() && out[0] == '.')
    out[0] = '_';
  return out.empty() ? "session" : out;
}

StatusOr<Endpoint> ParseEndpoint(std::string_view text) {
  Endpoint ep;
  std::string_view rest = text;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    ep.session = std::string(rest.substr(slash + 1));
    rest = rest.substr(0, slash);
    if (!ValidSessionName(ep.session))
      return Status::Error(
          fmt::format("'{}': the session name after '/' must be 1-128 of [A-Za-z0-9._-]", text));
  }
  std::string_view port;
  if (!rest.empty() && rest[0] == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos)
      return Status::Error(fmt::format("'{}': missing ']' after the IPv6 address", text));
    ep.host = std::string(rest.substr(1, close - 1));
    rest = rest.substr(close + 1);
    if (!rest.empty() && rest[0] == ':')
      port = rest.substr(1);
  } else if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    ep.host = std::string(rest.substr(0, colon));
    port = rest.substr(colon + 1);
  } else {
    ep.host = std::string(rest);
  }
  if (ep.host.empty())
    return Status::Error(fmt::format("'{}' names no host (HOST:PORT, e.g. 127.0.0.1:7878)", text));
  if (!port.empty()) {
    unsigned long p = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || p > 65535)
        return Status::Error(fmt::format("'{}': port '{}' is not a number", text, port));
      p = p * 10 + (c - '0');
    }
    if (p > 65535)
      return Status::Error(fmt::format("'{}': port {} is above 65535", text, p));
    ep.port = static_cast<uint16_t>(p);
  }
  return ep;
}

bool JsonBool(const nlohmann::json& j, const char* key, bool def) {
  if (!j.is_object())
    return def;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : def;
}

uint64_t JsonU64(const nlohmann::json& j, const char* key, uint64_t def) {
  if (!j.is_object())
    return def;
  auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>() : def;
}

std::string JsonString(const nlohmann::json& j, const char* key, const std::string& def) {
  if (!j.is_object())
    return def;
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : def;
}

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  // The length is not secret enough to hide; the contents are compared without early exit.
  volatile uint8_t diff = a.size() == b.size() ? 0 : 1;
  size_t n = a.size() < b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i)
    diff = diff | (static_cast<uint8_t>(a[i]) ^ static_cast<uint8_t>(b[i]));
  return diff == 0;
}

}  // namespace parmon::live
