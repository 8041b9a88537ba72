// One collector connection (live/server_impl.h): reads one frame at a time into one buffer,
// checks it, and acts on it; writes queued small frames (WELCOME, ACK, CONTROL, BYE) and, for a
// subscriber, the next DATA frame read from the store when the socket is free. A peer that sends
// anything malformed is dropped with one log line saying what was wrong.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "live/server_impl.h"

namespace parmon::live {
namespace {

const char* RoleName(const std::string& role) {
  return role.empty() ? "peer" : role.c_str();
}

}  // namespace

Connection::Connection(ServerImpl* server, tcp::socket socket, std::string peer)
    : server_(server),
      live_(server->live()),
      socket_(std::move(socket)),
      timer_(server->io()),
      peer_(std::move(peer)) {
  ++*live_;
}

Connection::~Connection() {
  --*live_;
}

void Connection::Start() {
  Log(fmt::format("{} connected ({} connections)", peer_, *live_));
  ArmTimer(server_->options().handshake_timeout_s, "sent no HELLO");
  ReadHeader();
}

void Connection::Close(const std::string& verb, const std::string& reason) {
  if (closed_)
    return;
  closed_ = true;
  std::string what;
  if (stream_)
    what = fmt::format(" (session {}, {} bytes held{})", stream_->key, stream_->size,
                       stream_->ended ? ", complete" : "");
  Log(fmt::format("{} {} {}: {}{}", peer_, RoleName(role_), verb, reason, what));
  if (stream_ && stream_->producer == this) {
    stream_->producer = nullptr;
    if (!stream_->ended)  // killed, cut or dropped: lost unless it comes back in time
      server_->RecorderGone(stream_, fmt::format("{}: {}", verb, reason));
  }
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  timer_.cancel();
}

void Connection::Refuse(const std::string& reason) {
  if (closed_ || closing_)
    return;
  server_->LogRefusal(fmt::format("{} refused: {}", peer_, reason));
  Send(FrameType::kBye, nlohmann::json{{"error", reason}}.dump());
  closing_ = true;  // closed once the BYE is out (or by the timer)
  ArmTimer(2, "refused");
}

void Connection::Send(FrameType type, std::string payload) {
  if (closed_)
    return;
  if (out_.size() > 64) {  // a peer that does not read its replies
    Close("dropped", "does not read what the collector sends");
    return;
  }
  out_.push_back(EncodeFrame(type, payload));
  Pump();
}

void Connection::ArmTimer(double seconds, const std::string& why) {
  timer_.expires_after(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  timer_.async_wait([self = shared_from_this(), seconds, why](error_code ec) {
    if (!ec)
      self->Close(self->closing_ ? "closed" : "dropped",
                  self->closing_ ? why : fmt::format("idle for {} s ({})", seconds, why));
  });
}

void Connection::ReadHeader() {
  asio::async_read(
      socket_, asio::buffer(header_), [self = shared_from_this()](error_code ec, size_t) {
        if (self->closed_)
          return;
        if (ec) {
          self->Close("disconnected",
                      ec == asio::error::eof ? "peer closed the connection" : ec.message());
          return;
        }
        FrameType type;
        uint32_t length = 0;
        if (Status s = ParseFrameHeader(self->header_, &type, &length); !s.ok())
          return self->Close("dropped", s.message());
        if (!self->hello_ && length > kMaxPreHelloFrame)
          return self->Close("dropped", fmt::format("a {}-byte frame before HELLO", length));
        self->ReadPayload(type, length);
      });
}

void Connection::ReadPayload(FrameType type, uint32_t length) {
  payload_.resize(length);
  asio::async_read(
      socket_, asio::buffer(payload_), [self = shared_from_this(), type](error_code ec, size_t) {
        if (self->closed_)
          return;
        if (ec)
          return self->Close("disconnected", fmt::format("inside a frame: {}", ec.message()));
        Status s = CheckFrameCrc(self->header_, self->payload_);
        if (s.ok())
          s = self->Handle(type);
        if (!s.ok())
          return self->Close("dropped", s.message());
        if (self->payload_.capacity() > (64u << 10) && !self->stream_)
          std::string().swap(self->payload_);
        if (!self->closed_ && !self->closing_)
          self->ReadHeader();
      });
}

Status Connection::Handle(FrameType type) {
  if (!hello_ && type != FrameType::kHello)
    return Status::Error(fmt::format("first frame has type {}, not HELLO", static_cast<int>(type)));
  switch (type) {
    case FrameType::kHello:
      if (hello_)
        return Status::Error("a second HELLO");
      return OnHello();
    case FrameType::kData:
      return OnData();
    case FrameType::kControl:
      return OnControl();
    case FrameType::kSubscribe:
      return OnSubscribe();
    case FrameType::kQuery:
      return OnQuery();
    case FrameType::kBye:
      if (stream_) {
        stream_->MarkEnded();
        server_->analysis().Touch(stream_->session, stream_->rank >= 0);
        Close("disconnected", "recorder finished");
      } else {
        Close("disconnected", "said BYE");
      }
      return Status::Ok();
    default:
      return Status::Error(
          fmt::format("a {} may not send frame type {}", RoleName(role_), static_cast<int>(type)));
  }
}

Status Connection::OnHello() {
  auto hello = DecodeHello(payload_);
  if (!hello.ok())
    return hello.status();
  const std::string& token = server_->options().token;
  if (!token.empty() && !ConstantTimeEqual(hello->token, token)) {
    Refuse(hello->token.empty() ? "no token (this collector requires --token-file's token)"
                                : "bad token");
    return Status::Ok();
  }
  hello_ = true;
  role_ = hello->role;
  version_ = hello->version;
  if (role_ == "recorder")
    return OnRecorderHello(*hello);
  return Status::Ok();  // a consumer: SUBSCRIBE or CONTROL comes next, within the timer
}

Status Connection::OnRecorderHello(const Hello& h) {
  // A stream with another recording's connection alive keeps it; the same recording
  // reconnecting (its old connection not yet seen dead) takes over.
  std::string key = h.rank < 0 ? h.session : fmt::format("{}/rank-{}", h.session, h.rank);
  for (Stream* s : server_->store().StreamsOf(h.session)) {
    if (s->key != key || !s->producer)
      continue;
    auto* old = static_cast<Connection*>(s->producer);
    if (s->stream_id != h.stream_id) {
      Refuse(
          fmt::format("session {} is being streamed by {} (another recording)", key, old->peer()));
      return Status::Ok();
    }
    old->Close("dropped", fmt::format("replaced by {}, the same recording reconnecting", peer_));
  }
  bool fresh = false;
  auto stream = server_->store().OpenForRecorder(h, &fresh);
  if (!stream.ok()) {
    Refuse(stream.status().message());
    return Status::Ok();
  }
  stream_ = *stream;
  stream_->producer = this;
  server_->RecorderBack(stream_);
  if (fresh)  // a new recording under the name: the old one's analysis is stale
    server_->analysis().Forget(stream_->session);
  acked_ = stream_->size;
  Log(fmt::format("{} recorder of {} (host {}, pid {}{}): {}", peer_, stream_->key, h.host, h.pid,
                  h.job.empty() ? "" : ", job " + h.job,
                  fresh ? "new stream" : fmt::format("resuming at byte {}", stream_->size)));
  Send(FrameType::kWelcome,
       nlohmann::json{{"offset", stream_->size}, {"path", stream_->path}}.dump());
  ArmTimer(server_->options().idle_timeout_s, "no DATA or keepalive");
  server_->StartExec(stream_);
  return Status::Ok();
}

Status Connection::OnData() {
  if (!stream_)
    return Status::Error("DATA from a peer that is not a recorder");
  uint64_t offset = 0;
  std::string_view bytes;
  PARMON_RETURN_IF_ERROR(DecodeData(payload_, &offset, &bytes));
  if (stream_->ended && offset + bytes.size() > stream_->size)
    return Status::Error(fmt::format("DATA past the end of the finished stream {}", stream_->key));
  const uint64_t before = stream_->size;
  PARMON_RETURN_IF_ERROR(stream_->Append(offset, bytes));
  if (stream_->size != before)
    server_->analysis().Touch(stream_->session, stream_->rank >= 0);
  ArmTimer(server_->options().idle_timeout_s, "no DATA or keepalive");
  Pump();  // the ACK goes out when the socket is free
  return Status::Ok();
}

Status Connection::OnControl() {
  auto j = nlohmann::json::parse(payload_, nullptr, false);
  if (!j.is_object())
    return Status::Error("CONTROL is not a JSON object");
  if (stream_) {  // a recorder's reply
    if (!j.contains("id") || !j["id"].is_number_unsigned() || !j.contains("reply") ||
        !j["reply"].is_string())
      return Status::Error("CONTROL reply without id and reply");
    server_->ControlReplied(j["id"].get<uint64_t>(), stream_->rank, j["reply"].get<std::string>());
    return Status::Ok();
  }
  if (!j.contains("session") || !j["session"].is_string() || !j.contains("command") ||
      !j["command"].is_string())
    return Status::Error("CONTROL request without session and command");
  std::string command = j["command"].get<std::string>();
  if (command.size() > 1024 || command.find('\n') != std::string::npos)
    return Status::Error("CONTROL command is not one line of at most 1024 bytes");
  int rank = j.contains("rank") && j["rank"].is_number_integer() ? j["rank"].get<int>() : -1;
  timer_.cancel();
  ArmTimer(server_->options().control_timeout_s + 5, "control request not collected");
  server_->RouteControl(shared_from_this(), j["session"].get<std::string>(), rank, command);
  return Status::Ok();
}

Status Connection::OnSubscribe() {
  if (stream_ || sub_)
    return Status::Error("SUBSCRIBE from a recorder or a second time");
  auto j = nlohmann::json::parse(payload_, nullptr, false);
  if (!j.is_object() || !j.contains("session") || !j["session"].is_string())
    return Status::Error("SUBSCRIBE without a session");
  std::string session = j["session"].get<std::string>();
  int rank = j.contains("rank") && j["rank"].is_number_integer() ? j["rank"].get<int>() : -1;
  follow_ = JsonBool(j, "follow", true);
  uint64_t offset =
      j.contains("offset") && j["offset"].is_number_unsigned() ? j["offset"].get<uint64_t>() : 0;
  Stream* s = server_->store().Find(session, rank);
  timer_.cancel();
  if (!s && rank < 0) {
    auto ranks = server_->store().Ranks(session);
    if (!ranks.empty()) {  // a per-rank session: the consumer subscribes to each rank
      // world: how many ranks the recorders said the job has, so that a follower waits for
      // the ranks that have not reached the collector yet.
      Send(FrameType::kWelcome,
           nlohmann::json{
               {"session", session}, {"ranks", ranks}, {"world", server_->WorldOf(session)}}
               .dump());
      Send(FrameType::kBye, "");
      closing_ = true;
      return Status::Ok();
    }
  }
  if (!s) {
    Refuse(fmt::format("no session {}{} in the store", session,
                       rank < 0 ? "" : fmt::format(" rank {}", rank)));
    return Status::Ok();
  }
  sub_ = s;
  sub_offset_ = offset;
  Log(fmt::format("{} consumer subscribed to {} from byte {}{}", peer_, s->key, offset,
                  follow_ ? ", following" : ""));
  Send(FrameType::kWelcome, nlohmann::json{{"session", session},
                                           {"rank", rank},
                                           {"size", s->size},
                                           {"ended", s->ended},
                                           {"lost", s->lost}}
                                .dump());
  return Status::Ok();
}

// QUERY: the live analysis' snapshot of a session. Whatever is wrong with the question is
// answered with a BYE saying what (then the connection closes); other sessions and connections
// are not concerned.
Status Connection::OnQuery() {
  if (stream_ || sub_)
    return Status::Error("QUERY from a recorder or a subscriber");
  if (version_ < 2) {
    Refuse(fmt::format("QUERY needs protocol version 2 in HELLO (the peer said {})", version_));
    return Status::Ok();
  }
  if (querying_) {
    Refuse("a second QUERY before the answer to the first");
    return Status::Ok();
  }
  auto j = nlohmann::json::parse(payload_, nullptr, false);
  if (!j.is_object() || !j.contains("session") || !j["session"].is_string()) {
    Refuse("QUERY is not a JSON object with a session name");
    return Status::Ok();
  }
  std::string session = j["session"].get<std::string>();
  std::string format = "json";
  if (j.contains("format")) {
    if (!j["format"].is_string() ||
        (j["format"].get<std::string>() != "json" && j["format"].get<std::string>() != "text")) {
      Refuse("QUERY format must be \"json\" or \"text\"");
      return Status::Ok();
    }
    format = j["format"].get<std::string>();
  }
  if (!ValidSessionName(session)) {
    Refuse("QUERY names no valid session (1-128 of [A-Za-z0-9._-], not starting with '.')");
    return Status::Ok();
  }
  const bool single = server_->store().Find(session, -1) != nullptr;
  const bool per_rank = !single && !server_->store().Ranks(session).empty();
  if (!single && !per_rank) {
    Refuse(fmt::format("no session {} in the store", session));
    return Status::Ok();
  }
  timer_.cancel();
  querying_ = true;
  std::weak_ptr<Connection> weak = shared_from_this();
  asio::io_context& io = server_->io();
  bool queued = server_->analysis().Ask(session, per_rank, format, [weak, &io](Snapshot s) {
    asio::post(io, [weak, s = std::move(s)]() mutable {
      if (auto self = weak.lock())
        self->SendSnapshot(std::move(s));
    });
  });
  if (!queued)
    Refuse("the collector's analysis is busy (too many questions waiting); ask again later");
  return Status::Ok();
}

void Connection::SendSnapshot(Snapshot s) {
  querying_ = false;
  if (closed_ || closing_)
    return;
  if (!s.status.ok()) {
    Refuse(s.status.message());
    return;
  }
  out_.push_back(EncodeFrame(FrameType::kWelcome, s.meta));
  // The report in pieces (the one reply that may exceed a frame; it is bounded by the session's
  // locations and links, not its events).
  size_t at = 0;
  do {
    const size_t n = std::min<size_t>(kMaxReportBytes, s.body.size() - at);
    std::string piece(1, static_cast<char>(at + n == s.body.size() ? 1 : 0));
    piece.append(s.body, at, n);
    out_.push_back(EncodeFrame(FrameType::kReport, piece));
    at += n;
  } while (at < s.body.size());
  ArmTimer(server_->options().idle_timeout_s, "no QUERY after the last answer");
  Pump();
}

// Queues the subscriber's next DATA frame, or BYE at the end; false when there is nothing to
// send yet (then a waiter on the stream calls Pump at its next append).
bool Connection::QueueSubscriberData() {
  if (sub_offset_ < sub_->size) {
    auto bytes = sub_->Read(sub_offset_, kMaxDataBytes);
    if (!bytes.ok()) {
      Close("dropped", bytes.status().message());
      return false;
    }
    out_.push_back(EncodeFrame(FrameType::kData, EncodeData(sub_offset_, *bytes)));
    sub_offset_ += bytes->size();
    return true;
  }
  if (sub_->ended || sub_->lost || !follow_) {
    // A lost stream's BYE says so: the consumer has all there is, and it is not the whole run.
    out_.push_back(
        EncodeFrame(FrameType::kBye, sub_->lost ? nlohmann::json{{"lost", sub_->lost_reason}}.dump()
                                                : std::string()));
    closing_ = true;
    sub_ = nullptr;
    return true;
  }
  if (!waiting_) {
    waiting_ = true;
    std::weak_ptr<Connection> weak = shared_from_this();
    sub_->waiters.push_back([weak] {
      if (auto self = weak.lock())
        asio::post(self->socket_.get_executor(), [self] {
          self->waiting_ = false;
          self->Pump();
        });
    });
  }
  return false;
}

void Connection::Pump() {
  if (writing_ || closed_)
    return;
  if (out_.empty() && stream_ && acked_ < stream_->size) {
    acked_ = stream_->size;  // one ACK for everything written since the last one
    out_.push_back(EncodeFrame(FrameType::kAck, EncodeAck(acked_)));
  }
  if (out_.empty() && sub_ && !QueueSubscriberData())
    return;
  if (out_.empty()) {
    if (closing_)
      Close("closed", "done");
    return;
  }
  writing_ = true;
  asio::async_write(socket_, asio::buffer(out_.front()),
                    [self = shared_from_this()](error_code ec, size_t) {
                      self->writing_ = false;
                      if (self->closed_)
                        return;
                      if (ec)
                        return self->Close("disconnected", ec.message());
                      self->out_.pop_front();
                      self->Pump();
                    });
}

}  // namespace parmon::live
