// Fuzz target: the live protocol (docs/live.md) as a hostile network peer speaks it, both ways.
//
// Byte 0 of the input chooses the mode; the rest is cut into up to four connections at each
// "\n--conn--\n" separator.
//   bit 1 clear: parmon serve's side. A real collector (live::Server, Boost.Asio, on 127.0.0.1
//     port 0 with a store of its own) runs on a thread; each part is written to it over its own
//     loopback TCP connection, in order, the connections held open until the last has been
//     written and the collector's answers read. Then every session the collector stored is read
//     back by every consumer (fuzz::ConsumeSession): what a peer sends must never crash, hang or
//     bloat the collector, nor leave a stored file that breaks a reader.
//   bit 1 set: the consumer's side. A fake collector on loopback answers `parmon fetch`
//     (live::FetchSession) with the parts as its replies, one part per connection the fetch
//     opens, and the fetched copy is then read by every consumer.
//   bit 0 set: each part's frames get their CRC-32C made right before they are sent (walking the
//     frames by their stated lengths), so that mutations reach what lies behind the checksum.
// Every part also goes through the in-process decoders (FrameDecoder and each frame payload's
// decoder).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/crc32c.h"
#include "fuzz/fuzz_common.h"
#include "live/client.h"
#include "live/fetch.h"
#include "live/protocol.h"
#include "live/server_impl.h"

namespace {

using namespace parmon;
namespace fs = std::filesystem;

constexpr std::string_view kSeparator = "\n--conn--\n";
constexpr int kMaxParts = 4;

uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian host, as the protocol
}

// Rewrites the CRC field of every whole frame in part (header bytes 8-11).
void FixCrcs(std::string* part) {
  size_t pos = 0;
  while (part->size() - pos >= live::kFrameHeaderSize) {
    const uint32_t length = GetU32(part->data() + pos + 4);
    if (length > part->size() - pos - live::kFrameHeaderSize)
      break;
    const auto* header = reinterpret_cast<const uint8_t*>(part->data() + pos);
    uint32_t crc = Crc32c(header, 8);
    crc = Crc32c(part->data() + pos + live::kFrameHeaderSize, length, crc);
    std::memcpy(part->data() + pos + 8, &crc, 4);
    pos += live::kFrameHeaderSize + length;
  }
}

void DecodeInProcess(const std::string& part) {
  live::FrameDecoder decoder;
  decoder.Feed(part.data(), part.size());
  while (auto frame = decoder.Next()) {
    uint64_t offset = 0;
    std::string_view bytes;
    (void)live::DecodeData(frame->payload, &offset, &bytes);
    (void)live::DecodeAck(frame->payload, &offset);
    (void)live::DecodeHello(frame->payload);
    (void)live::PeerError(*frame);
  }
  (void)live::ParseEndpoint(std::string_view(part).substr(0, 80));
  (void)live::ValidSessionName(std::string_view(part).substr(0, 200));
}

int Connect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads what the peer says until it is quiet for quiet_ms, closes, or has sent max bytes.
void Drain(int fd, int quiet_ms, size_t max = 8u << 20) {
  char buf[65536];
  size_t got = 0;
  while (got < max) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, quiet_ms) <= 0)
      return;
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0)
      return;
    got += static_cast<size_t>(n);
  }
}

void SendAll(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0)
      return;  // the collector closed on us: a refusal is a fine answer
    off += static_cast<size_t>(n);
  }
}

// Every stored session of the store: single-process files and per-rank directories.
void ConsumeStore(const std::string& store) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(store, ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.')
      continue;
    fuzz::ConsumeSession(e.path().string());
  }
}

void AgainstTheCollector(const std::vector<std::string>& parts) {
  const std::string store = fuzz::ScratchDir() + "/store";
  std::error_code ec;
  fs::remove_all(store, ec);
  live::ServeOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.store = store;
  o.max_connections = kMaxParts;
  o.handshake_timeout_s = 0.5;
  o.idle_timeout_s = 0.5;
  o.control_timeout_s = 0.2;
  auto server = live::Server::Create(o);
  if (!server.ok())
    return;  // no port to be had: nothing to fuzz this time
  auto* impl = static_cast<live::ServerImpl*>(server->get());
  std::thread serving([impl] { impl->Run(); });
  std::vector<int> fds;
  for (const std::string& part : parts) {
    int fd = Connect(impl->port());
    if (fd < 0)
      continue;
    fds.push_back(fd);
    SendAll(fd, part);
    Drain(fd, 5);
  }
  for (int fd : fds) {
    shutdown(fd, SHUT_WR);
    Drain(fd, 5);
    close(fd);
  }
  impl->io().stop();
  serving.join();
  server->reset();
  ConsumeStore(store);
}

void AgainstTheConsumer(const std::vector<std::string>& parts) {
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0)
    return;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(listener, 8) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(listener);
    return;
  }
  std::atomic<bool> stop{false};
  std::thread collector([&] {
    // One part per connection the fetch opens, then no more answers.
    for (size_t i = 0; i < parts.size() && !stop.load(); ++i) {
      pollfd p{listener, POLLIN, 0};
      if (poll(&p, 1, 2000) <= 0)
        break;
      int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0)
        break;
      Drain(fd, 2, 1u << 16);  // its HELLO and SUBSCRIBE
      SendAll(fd, parts[i]);
      shutdown(fd, SHUT_WR);
      Drain(fd, 5);
      close(fd);
    }
    close(listener);
  });
  // The listener goes with the last answer, so a fetch that opens more connections than there
  // are parts is refused at once instead of waiting on a backlog nobody serves.
  const std::string out = fuzz::ScratchDir() + "/fetched";
  std::error_code ec;
  fs::remove_all(out, ec);
  fs::remove(out + ".ptrace", ec);
  auto fetched = live::FetchSession(fmt::format("127.0.0.1:{}", ntohs(a.sin_port)), "fuzz", out,
                                    /*follow=*/false, &stop);
  stop = true;
  collector.join();
  if (fetched.ok())
    fuzz::ConsumeSession(fetched->path);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  const uint8_t mode = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::string> parts;
  while (!rest.empty() && parts.size() < kMaxParts) {
    size_t at = parts.size() + 1 < kMaxParts ? rest.find(kSeparator) : std::string_view::npos;
    parts.emplace_back(rest.substr(0, at));
    rest = at == std::string_view::npos ? std::string_view() : rest.substr(at + kSeparator.size());
  }
  for (std::string& part : parts) {
    if (mode & 1)
      FixCrcs(&part);
    DecodeInProcess(part);
  }
  if (mode & 2)
    AgainstTheConsumer(parts);
  else
    AgainstTheCollector(parts);
  return 0;
}
