#include "live/server.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "live/server_impl.h"

extern char** environ;

namespace parmon::live {
namespace {

// Refusals logged per second at most; the rest are counted in one line.
constexpr int kMaxRefusalLines = 20;

std::string ControlReply(const std::string& key, const std::string& value) {
  return nlohmann::json{{key, value}}.dump();
}

// Feeds one stream to `sh -c CMD` on its standard input, reading the store file at its pace.
class ExecFeeder : public std::enable_shared_from_this<ExecFeeder> {
 public:
  ExecFeeder(asio::io_context& io, Stream* s, int fd, pid_t pid)
      : pipe_(io, fd), stream_(s), pid_(pid) {}
  void Pump() {
    if (writing_ || done_)
      return;
    auto bytes = stream_->Read(offset_, 256u << 10);
    if (!bytes.ok() || bytes->empty()) {
      if (!bytes.ok() || stream_->ended || stream_->lost) {
        done_ = true;
        pipe_.close();  // end of input for the consumer
        return;
      }
      // The waiter owns the feeder while it waits: nothing else holds it then.
      stream_->waiters.push_back([self = shared_from_this()] {
        asio::post(self->pipe_.get_executor(), [self] { self->Pump(); });
      });
      return;
    }
    buf_ = std::move(*bytes);
    writing_ = true;
    asio::async_write(pipe_, asio::buffer(buf_),
                      [self = shared_from_this()](error_code ec, size_t n) {
                        self->writing_ = false;
                        if (ec) {
                          Log(fmt::format("--exec consumer of {} (pid {}) stopped reading: {}",
                                          self->stream_->key, self->pid_, ec.message()));
                          self->done_ = true;
                          self->pipe_.close();
                          return;
                        }
                        self->offset_ += n;
                        self->Pump();
                      });
  }

 private:
  asio::posix::stream_descriptor pipe_;
  Stream* stream_;
  pid_t pid_;
  uint64_t offset_ = 0;
  std::string buf_;
  bool writing_ = false, done_ = false;
};

}  // namespace

void Log(const std::string& line) {
  char when[32];
  time_t now = time(nullptr);
  struct tm tm;
  strftime(when, sizeof when, "%H:%M:%S", localtime_r(&now, &tm));
  fmt::print(stderr, "parmon serve: {} {}\n", when, line);
}

bool IsLoopback(const std::string& host) {
  if (host == "localhost")
    return true;
  error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  return !ec && addr.is_loopback();
}

ServerImpl::ServerImpl(const ServeOptions& o)
    : options_(o),
      acceptor_(io_),
      retry_(io_),
      signals_(io_, SIGINT, SIGTERM),
      children_(io_, SIGCHLD),
      store_(o.store),
      analysis_(std::make_unique<AnalysisService>(o.store)) {}

ServerImpl::~ServerImpl() {
  analysis_.reset();  // joins the worker before the io_context goes
}

Status ServerImpl::Bind() {
  PARMON_RETURN_IF_ERROR(store_.Init());
  error_code ec;
  std::string host = options_.host == "localhost" ? "127.0.0.1" : options_.host;
  auto addr = asio::ip::make_address(host, ec);
  if (ec)
    return Status::Error(fmt::format("'{}' is not an IP address to listen on", options_.host));
  tcp::endpoint ep(addr, options_.port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec)
    acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec)
    acceptor_.bind(ep, ec);
  if (!ec)
    acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return Status::Error(
        fmt::format("cannot listen on {}:{}: {}", options_.host, options_.port, ec.message()));
  return Status::Ok();
}

void ServerImpl::Run() {
  signal(SIGPIPE, SIG_IGN);
  signals_.async_wait([this](error_code ec, int sig) {
    if (!ec) {
      Log(fmt::format("stopping on signal {}", sig));
      io_.stop();
    }
  });
  WaitChildren();
  ArmOpenStreams();
  Accept();
  io_.run();
}

void ServerImpl::StartExec(Stream* s) {
  if (options_.exec.empty() || fed_.count(s->key))
    return;
  fed_.insert(s->key);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    Log(fmt::format("cannot start --exec for {}: {}", s->key, strerror(errno)));
    return;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[0], 0);
  std::vector<std::string> env_store = {"PARMON_SESSION=" + s->session,
                                        "PARMON_RANK=" + std::to_string(s->rank),
                                        "PARMON_STREAM_FILE=" + s->path};
  std::vector<char*> env;
  for (char** e = environ; *e; ++e)
    env.push_back(*e);
  for (auto& e : env_store)
    env.push_back(e.data());
  env.push_back(nullptr);
  const char* argv[] = {"/bin/sh", "-c", options_.exec.c_str(), nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, "/bin/sh", &fa, nullptr, const_cast<char**>(argv), env.data());
  posix_spawn_file_actions_destroy(&fa);
  close(fds[0]);
  if (rc != 0) {
    close(fds[1]);
    Log(fmt::format("cannot start --exec for {}: {}", s->key, strerror(rc)));
    return;
  }
  Log(fmt::format("--exec consumer of {} started (pid {})", s->key, pid));
  std::make_shared<ExecFeeder>(io_, s, fds[1], pid)->Pump();
}

void ServerImpl::RouteControl(const std::shared_ptr<Connection>& asker,
                              const std::string& session,
                              int rank,
                              const std::string& command) {
  std::vector<Connection*> targets;
  for (Stream* s : store_.StreamsOf(session))
    if (s->producer && (rank < 0 || s->rank == rank))
      targets.push_back(static_cast<Connection*>(s->producer));
  if (targets.empty()) {
    asker->Send(
        FrameType::kControl,
        ControlReply("error", fmt::format("no recorder of session {} is connected", session)));
    return;
  }
  uint64_t id = ++next_control_;
  auto& p = pending_[id];
  p.asker = asker;
  p.expected = targets.size();
  p.timer = std::make_unique<asio::steady_timer>(io_);
  p.timer->expires_after(
      std::chrono::milliseconds(static_cast<int64_t>(options_.control_timeout_s * 1000)));
  p.timer->async_wait([this, id](error_code ec) {
    if (!ec)
      FinishControl(id, true);
  });
  for (Connection* c : targets) {
    p.ranks.insert(c->stream()->rank);
    c->Send(FrameType::kControl, nlohmann::json{{"id", id}, {"command", command}}.dump());
  }
  Log(fmt::format("{} control '{}' for session {} sent to {} recorder(s)", asker->peer(), command,
                  session, targets.size()));
}

void ServerImpl::ControlReplied(uint64_t id, int rank, const std::string& reply) {
  auto it = pending_.find(id);
  if (it == pending_.end())
    return;
  it->second.replies[rank] = reply;
  if (it->second.replies.size() >= it->second.expected)
    FinishControl(id, false);
}

void ServerImpl::LogRefusal(const std::string& line) {
  time_t now = time(nullptr);
  if (now != refusal_second_) {
    if (refusals_suppressed_ > 0)
      Log(fmt::format("{} more refusals not shown", refusals_suppressed_));
    refusal_second_ = now;
    refusal_lines_ = 0;
    refusals_suppressed_ = 0;
  }
  if (++refusal_lines_ <= kMaxRefusalLines)
    Log(line);
  else
    ++refusals_suppressed_;
}

namespace {

// The time now as HH:MM:SS UTC, for the sentences of lost streams.
std::string UtcNow() {
  char when[32];
  const time_t now = time(nullptr);
  struct tm tm;
  strftime(when, sizeof when, "%H:%M:%S UTC", gmtime_r(&now, &tm));
  return when;
}

}  // namespace

void ServerImpl::RecorderGone(Stream* s, const std::string& why) {
  ArmLost(s, options_.lost_after_s,
          fmt::format("its recorder went without closing the recording: the connection closed at "
                      "{} ({}) and did not come back within {} s (killed?)",
                      UtcNow(), why, options_.lost_after_s));
}

void ServerImpl::ArmLost(Stream* s, double seconds, const std::string& what) {
  if (s->ended || s->lost)
    return;
  auto& timer = grace_[s->key];
  if (!timer)
    timer = std::make_unique<asio::steady_timer>(io_);
  timer->expires_after(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  timer->async_wait([this, s, what](error_code ec) {
    if (ec || s->producer || s->ended || s->lost)
      return;  // re-armed, cancelled, or the recorder is back
    const HeldChunks held = CountWholeChunks(s->fd, s->size);
    std::string tail;
    if (held.bytes < s->size)
      tail = fmt::format(" and {} bytes of an unfinished chunk", s->size - held.bytes);
    s->MarkLost(fmt::format("{}; the collector keeps the {} bytes it holds, {} whole chunks{}",
                            what, s->size, held.chunks, tail));
    Log(fmt::format("{} lost: {}", s->key, s->lost_reason));
    analysis_->Touch(s->session, s->rank >= 0);
  });
}

void ServerImpl::ArmOpenStreams() {
  // A recorder reaches a restarted collector within its backoff (at most 5 s) plus one connect
  // attempt (at most 5 s): that long is added to the grace.
  const double seconds = options_.lost_after_s + 10;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(store_.dir() + "/.streams", ec)) {
    if (e.path().extension() != ".meta")
      continue;
    std::ifstream in(e.path());
    const auto meta = nlohmann::json::parse(in, nullptr, false, true);
    if (!meta.is_object() || JsonBool(meta, "ended", false) || JsonBool(meta, "lost", false))
      continue;
    const int64_t rank = meta.contains("rank") && meta["rank"].is_number_integer()
                             ? meta["rank"].get<int64_t>()
                             : -1;
    Stream* s =
        store_.Find(JsonString(meta, "session", ""), rank < 0 ? -1 : static_cast<int>(rank));
    if (!s)
      continue;
    ArmLost(s, seconds,
            fmt::format("it was open when the collector started at {} and no recorder of it came "
                        "back within {} s (killed while the collector was down?)",
                        UtcNow(), seconds));
  }
}

void ServerImpl::RecorderBack(Stream* s) {
  if (auto it = grace_.find(s->key); it != grace_.end())
    it->second->cancel();
  if (s->lost)
    Log(fmt::format("{} is no longer lost: a recorder took it up again", s->key));
  s->ClearLost();
}

int ServerImpl::WorldOf(const std::string& session) {
  int world = 0;
  for (int k : store_.Ranks(session))
    if (const Stream* s = store_.Find(session, k))
      world = std::max(world, s->ranks);
  return world;
}

void ServerImpl::FinishControl(uint64_t id, bool timed_out) {
  auto it = pending_.find(id);
  if (it == pending_.end())
    return;
  PendingControl& p = it->second;
  std::string text;
  bool single = p.ranks.size() == 1;
  for (int rank : p.ranks) {
    auto r = p.replies.find(rank);
    std::string line = r != p.replies.end()
                           ? r->second
                           : fmt::format("no reply within {} s", options_.control_timeout_s);
    text += single && rank < 0 ? line : fmt::format("rank {}: {}", rank, line);
    text += "\n";
  }
  if (!text.empty())
    text.pop_back();
  if (auto asker = p.asker.lock())
    asker->Send(FrameType::kControl, ControlReply(timed_out ? "error" : "reply", text));
  p.timer->cancel();
  pending_.erase(it);
}

void ServerImpl::Accept() {
  acceptor_.async_accept([this](error_code ec, tcp::socket socket) {
    if (ec) {
      // Out of file descriptors or the like: try again shortly instead of spinning.
      Log(fmt::format("accept failed: {}", ec.message()));
      retry_.expires_after(std::chrono::milliseconds(100));
      retry_.async_wait([this](error_code) { Accept(); });
      return;
    }
    error_code pec;
    auto ep = socket.remote_endpoint(pec);
    std::string peer = pec ? "?" : fmt::format("{}:{}", ep.address().to_string(), ep.port());
    if (*live_ >= options_.max_connections) {
      LogRefusal(
          fmt::format("{} refused: {} connections already (--max-connections)", peer, *live_));
      socket.close(pec);
    } else {
      std::make_shared<Connection>(this, std::move(socket), peer)->Start();
    }
    Accept();
  });
}

void ServerImpl::WaitChildren() {
  children_.async_wait([this](error_code ec, int) {
    if (ec)
      return;
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
      Log(fmt::format("--exec consumer pid {} exited with status {}", pid,
                      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)));
    WaitChildren();
  });
}

StatusOr<std::unique_ptr<Server>> Server::Create(const ServeOptions& options) {
  if (!IsLoopback(options.host) && options.token.empty())
    return Status::Error(fmt::format(
        "listening on {} (not loopback) needs --token-file: every recorder and consumer must "
        "then present the token",
        options.host));
  if (options.max_connections < 1)
    return Status::Error("--max-connections must be at least 1");
  auto s = std::make_unique<ServerImpl>(options);
  PARMON_RETURN_IF_ERROR(s->Bind());
  return std::unique_ptr<Server>(std::move(s));
}

}  // namespace parmon::live
