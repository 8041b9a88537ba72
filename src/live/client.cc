#include "live/client.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <vector>

#include <fmt/format.h>
#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

namespace parmon::live {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

struct Channel::Impl {
  asio::io_context io;
  tcp::socket socket{io};
  std::string name;
  FrameDecoder decoder;  // holds at most one frame and one read block
  std::vector<uint8_t> block = std::vector<uint8_t>(64u << 10);
  bool timed_out = false;

  // Runs the io_context until *done or the timeout; cancels what is pending on a timeout.
  bool RunUntil(const bool* done, double timeout_s) {
    io.restart();
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    while (!*done && (timeout_s < 0 || std::chrono::steady_clock::now() < deadline)) {
      if (timeout_s < 0)
        io.run_one();
      else
        io.run_one_until(deadline);
    }
    if (!*done) {
      error_code ec;
      socket.cancel(ec);
      io.restart();
      io.run();
    }
    return *done;
  }
};

Channel::Channel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Channel::~Channel() = default;

StatusOr<std::unique_ptr<Channel>> Channel::Open(const Endpoint& endpoint,
                                                 const std::string& token,
                                                 double timeout_s,
                                                 int version) {
  auto impl = std::make_unique<Impl>();
  impl->name = fmt::format("{}:{}", endpoint.host, endpoint.port);
  error_code ec;
  tcp::resolver resolver(impl->io);
  auto results = resolver.resolve(endpoint.host, std::to_string(endpoint.port), ec);
  if (ec)
    return Status::Error(fmt::format("cannot resolve {}: {}", endpoint.host, ec.message()));
  bool done = false;
  error_code result;
  asio::async_connect(impl->socket, results, [&](error_code e, const tcp::endpoint&) {
    result = e;
    done = true;
  });
  if (!impl->RunUntil(&done, timeout_s))
    return Status::Error(fmt::format("no answer from {} within {} s", impl->name, timeout_s));
  if (result)
    return Status::Error(fmt::format("cannot connect to {}: {}", impl->name, result.message()));
  impl->socket.set_option(tcp::no_delay(true), ec);
  std::unique_ptr<Channel> ch(new Channel(std::move(impl)));
  Hello h;
  h.role = "consumer";
  h.token = token;
  h.version = version;
  PARMON_RETURN_IF_ERROR(ch->Write(FrameType::kHello, EncodeHello(h), timeout_s));
  return ch;
}

Status Channel::Write(FrameType type, std::string_view payload, double timeout_s) {
  std::string frame = EncodeFrame(type, payload);
  bool done = false;
  error_code result;
  asio::async_write(impl_->socket, asio::buffer(frame), [&](error_code e, size_t) {
    result = e;
    done = true;
  });
  if (!impl_->RunUntil(&done, timeout_s))
    return Status::Error(
        fmt::format("{} took more than {} s to accept a frame", impl_->name, timeout_s));
  if (result)
    return Status::Error(fmt::format("lost {}: {}", impl_->name, result.message()));
  return Status::Ok();
}

StatusOr<Frame> Channel::Read(double timeout_s) {
  Impl& c = *impl_;
  c.timed_out = false;
  auto start = std::chrono::steady_clock::now();
  while (true) {
    if (auto f = c.decoder.Next())
      return std::move(*f);
    if (!c.decoder.error().ok())
      return c.decoder.error();
    double left = -1;
    if (timeout_s >= 0) {
      left = timeout_s -
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (left <= 0) {
        c.timed_out = true;
        return Status::Error(fmt::format("nothing from {} within {} s", c.name, timeout_s));
      }
    }
    bool done = false;
    size_t got = 0;
    error_code result;
    // read_some: a read cancelled by the timeout consumes nothing, so no frame is cut.
    c.socket.async_read_some(asio::buffer(c.block), [&](error_code e, size_t n) {
      result = e;
      got = n;
      done = true;
    });
    if (!c.RunUntil(&done, left) || result == asio::error::operation_aborted) {
      c.timed_out = true;
      return Status::Error(fmt::format("nothing from {} within {} s", c.name, timeout_s));
    }
    if (result)
      return Status::Error(
          fmt::format("{} closed the connection ({})", c.name,
                      result == asio::error::eof ? "end of stream" : result.message()));
    c.decoder.Feed(c.block.data(), got);
  }
}

bool Channel::timed_out() const {
  return impl_->timed_out;
}

StatusOr<std::string> ReadToken(const std::string& token_file) {
  std::string path = token_file;
  if (path.empty()) {
    const char* env = getenv("PARMON_TOKEN_FILE");
    if (env == nullptr || *env == '\0')
      return std::string();
    path = env;
  }
  std::ifstream in(path);
  std::string token;
  if (!in || !std::getline(in, token))
    return Status::Error(fmt::format("cannot read the token file {}", path));
  while (!token.empty() && (token.back() == '\r' || token.back() == ' '))
    token.pop_back();
  if (token.size() < 8)
    return Status::Error(
        fmt::format("the token in {} is shorter than 8 characters; use a long random one", path));
  return token;
}

// The error a collector states in a BYE or CONTROL payload, if any.
std::string PeerError(const Frame& f) {
  auto j = nlohmann::json::parse(f.payload, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string())
    return j["error"].get<std::string>();
  return "";
}

StatusOr<std::string> SendControl(const std::string& host_port,
                                  const std::string& session,
                                  const std::string& command,
                                  int rank,
                                  const std::string& token_file) {
  PARMON_ASSIGN_OR_RETURN(Endpoint ep, ParseEndpoint(host_port));
  PARMON_ASSIGN_OR_RETURN(std::string token, ReadToken(token_file));
  PARMON_ASSIGN_OR_RETURN(auto ch, Channel::Open(ep, token));
  nlohmann::json req = {{"session", session}, {"command", command}};
  if (rank >= 0)
    req["rank"] = rank;
  PARMON_RETURN_IF_ERROR(ch->Write(FrameType::kControl, req.dump()));
  PARMON_ASSIGN_OR_RETURN(Frame f, ch->Read(30));
  std::string error = PeerError(f);
  if (!error.empty())
    return Status::Error(error);
  auto j = nlohmann::json::parse(f.payload, nullptr, false);
  if (f.type != FrameType::kControl || !j.is_object() || !j.contains("reply") ||
      !j["reply"].is_string())
    return Status::Error("the collector's answer is not a CONTROL reply");
  (void)ch->Write(FrameType::kBye, "", 1);  // a courtesy: the answer is in
  return j["reply"].get<std::string>();
}

bool NotYetThere(const Status& status) {
  const std::string& m = status.message();
  return m.find("no complete events yet") != std::string::npos ||
         (m.find("no session ") != std::string::npos &&
          m.find(" in the store") != std::string::npos);
}

StatusOr<std::unique_ptr<SnapshotClient>> SnapshotClient::Open(const std::string& host_port,
                                                               const std::string& token_file) {
  auto c = std::make_unique<SnapshotClient>();
  PARMON_ASSIGN_OR_RETURN(c->endpoint_, ParseEndpoint(host_port));
  PARMON_ASSIGN_OR_RETURN(c->token_, ReadToken(token_file));
  return c;
}

StatusOr<RemoteSnapshot> SnapshotClient::Ask(const std::string& session,
                                             const std::string& format,
                                             double timeout_s) {
  // A kept connection may have been closed by the collector (idle, an error answer): one retry
  // on a fresh one.
  for (int attempt = 0;; ++attempt) {
    const bool reused = channel_ != nullptr;
    if (!channel_) {
      PARMON_ASSIGN_OR_RETURN(channel_, Channel::Open(endpoint_, token_, 10, kProtocolVersion));
    }
    nlohmann::json req = {{"session", session}, {"format", format}};
    Status w = channel_->Write(FrameType::kQuery, req.dump());
    StatusOr<Frame> f = w.ok() ? channel_->Read(timeout_s) : StatusOr<Frame>(w);
    if (!f.ok() || (f->type == FrameType::kBye && PeerError(*f).empty())) {
      channel_.reset();
      if (reused && attempt == 0)
        continue;
      return f.ok() ? Status::Error("the collector closed the connection") : f.status();
    }
    std::string error = PeerError(*f);
    if (!error.empty()) {
      channel_.reset();
      return Status::Error(error);
    }
    if (f->type != FrameType::kWelcome) {
      channel_.reset();
      return Status::Error("the collector's answer to QUERY is not a snapshot");
    }
    RemoteSnapshot out;
    out.meta = f->payload;
    auto meta = nlohmann::json::parse(out.meta, nullptr, false);
    out.ended = meta.is_object() && meta.value("ended", false);
    out.lost = meta.is_object() ? JsonString(meta, "lost", "") : std::string();
    for (;;) {
      auto piece = channel_->Read(timeout_s);
      if (!piece.ok()) {
        channel_.reset();
        return piece.status();
      }
      if (piece->type != FrameType::kReport || piece->payload.empty()) {
        channel_.reset();
        std::string e = PeerError(*piece);
        return Status::Error(e.empty() ? "the collector's snapshot was cut" : e);
      }
      out.body.append(piece->payload, 1, std::string::npos);
      if (piece->payload[0] & 1)
        return out;
    }
  }
}

}  // namespace parmon::live
