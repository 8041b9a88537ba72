// The live protocol between a recorder (`parmon record --to`), the collector (`parmon serve`)
// and its consumers (`parmon fetch`, `parmon ctl`, `parmon top`). See docs/live.md.
//
// The data are parmon's own trace bytes (docs/format.md: file header, then chunks), byte for
// byte as the recorder writes its local file; the protocol only frames them. Every message is a
// frame: a 12-byte header [u32 magic+type, u32 payload length, u32 CRC-32C] and the payload. The
// CRC covers the first 8 header bytes and the payload, so a forged type or length fails it too.
// A frame longer than kMaxFramePayload is refused before anything is allocated for it: a
// receiver holds at most one frame per connection. Control frames carry JSON; DATA and ACK carry
// little-endian offsets, so the stream offset of every byte is stated and resuming after a cut
// can neither lose nor duplicate a byte.
#ifndef PARMON_SRC_LIVE_PROTOCOL_H_
#define PARMON_SRC_LIVE_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"

namespace parmon::live {

// Version 2 adds QUERY and REPORT (the collector's live analysis); a peer that says version 1
// speaks everything else unchanged, so recorders and fetches still send 1 (and so keep working
// with a version-1 collector). Only a consumer that queries says 2.
constexpr int kProtocolVersion = 2;
constexpr int kBaseProtocolVersion = 1;
// Bytes 0-2 of every frame: "PML" (parmon live); byte 3 is the frame type.
constexpr uint32_t kFrameMagic = 0x004C4D50;
constexpr size_t kFrameHeaderSize = 12;
constexpr uint32_t kMaxFramePayload = 1u << 20;
// DATA payloads the sender cuts: an 8-byte offset and at most this many trace bytes.
constexpr uint32_t kMaxDataBytes = kMaxFramePayload - 8;
constexpr uint16_t kDefaultPort = 7878;

enum class FrameType : uint8_t {
  kHello = 1,      // peer -> collector, JSON: version, role, token, session, stream id, rank...
  kWelcome = 2,    // collector -> peer, JSON: recorder: resume offset; consumer: what it gets
  kData = 3,       // u64 stream offset, then trace bytes (either direction)
  kAck = 4,        // collector -> recorder: u64 bytes of the stream written to the store
  kControl = 5,    // JSON: a command and its reply (docs/live.md, "Control")
  kSubscribe = 6,  // consumer -> collector, JSON: session, rank, offset, follow
  kBye = 7,        // the sender is done (recorder: every byte sent); optional JSON reason
  // Version 2: a consumer asks the collector's live analysis of a session for its snapshot,
  // JSON {session, format: "json"|"text"}; the answer is a WELCOME (JSON: what the snapshot
  // covers) then REPORT frames, or a BYE {error}. Several QUERYs per connection, one at a time.
  kQuery = 8,
  // collector -> consumer: u8 flags (1: the last piece), then a piece of the rendered report.
  kReport = 9,
};
// REPORT pieces: the flag byte and at most this many bytes of the report.
constexpr uint32_t kMaxReportBytes = kMaxFramePayload - 1;

struct Frame {
  FrameType type = FrameType::kBye;
  std::string payload;
};

// The 12 header bytes and the payload of one frame (payload at most kMaxFramePayload).
std::string EncodeFrame(FrameType type, std::string_view payload);

// Checks a frame header. On success *type and *length are set; otherwise one sentence naming
// what is wrong (bad magic, unknown type, oversized).
Status ParseFrameHeader(const uint8_t* header, FrameType* type, uint32_t* length);
// Checks the CRC of a frame whose header passed ParseFrameHeader.
Status CheckFrameCrc(const uint8_t* header, std::string_view payload);

// Incremental decoder for byte streams (tests, blocking clients): Feed bytes, then Next until it
// returns nullopt. A bad frame makes error() non-ok and every later Next return nullopt.
class FrameDecoder {
 public:
  void Feed(const void* data, size_t size);
  std::optional<Frame> Next();
  const Status& error() const { return error_; }
  // Bytes of an unfinished frame held (at most one frame).
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  size_t pos_ = 0;
  Status error_;
};

// DATA and ACK payloads.
std::string EncodeData(uint64_t offset, std::string_view bytes);
Status DecodeData(std::string_view payload, uint64_t* offset, std::string_view* bytes);
std::string EncodeAck(uint64_t offset);
Status DecodeAck(std::string_view payload, uint64_t* offset);

// HELLO: who the peer is.
struct Hello {
  int version = kBaseProtocolVersion;
  std::string role = "recorder";  // or "consumer"
  std::string token;
  std::string session;    // recorder: the session's name
  std::string stream_id;  // recorder: random per recording, tells a resume from a new run
  std::string job;        // MPI per-rank sessions: the launcher's job id
  int rank = -1, ranks = 0;
  std::string host;
  int64_t pid = 0;
};
std::string EncodeHello(const Hello& h);
StatusOr<Hello> DecodeHello(std::string_view payload);

// A session name is also a file name under the store: 1-128 of [A-Za-z0-9._-], not starting
// with '.'.
bool ValidSessionName(std::string_view name);
// `app-1234`-style names from anything (a command, a job id): other characters become '_'.
std::string SanitizeSessionName(std::string_view text);

// "HOST:PORT[/NAME]" -> host, port and the optional name; "[::1]:7878" for IPv6.
struct Endpoint {
  std::string host;
  uint16_t port = kDefaultPort;
  std::string session;
};
StatusOr<Endpoint> ParseEndpoint(std::string_view text);

// Typed fields of a JSON payload a peer sent: the default when j is not an object, or the field
// is absent or of another type (nlohmann's value() throws on a type mismatch: a peer's
// {"follow": 1} must not end the collector).
bool JsonBool(const nlohmann::json& j, const char* key, bool def);
uint64_t JsonU64(const nlohmann::json& j, const char* key, uint64_t def);
std::string JsonString(const nlohmann::json& j, const char* key, const std::string& def);

// Compares two secrets in time independent of where they differ.
bool ConstantTimeEqual(std::string_view a, std::string_view b);

// The recorder's answer to a CONTROL command ("pause", "period 5ms", ...): one line, e.g. "ok"
// or "unknown command 'x'". Called on the streaming client's thread; must not block for long.
using ControlHandler = std::function<std::string(const std::string& command)>;

}  // namespace parmon::live

#endif  // PARMON_SRC_LIVE_PROTOCOL_H_
