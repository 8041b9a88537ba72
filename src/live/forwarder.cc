#include "live/forwarder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include "format/chunk_stream.h"

namespace parmon::live {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

namespace {
constexpr auto kTick = std::chrono::milliseconds(20);
constexpr auto kKeepalive = std::chrono::seconds(5);
constexpr double kMaxBackoffS = 5;
}  // namespace

std::string NewStreamId() {
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
               static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  return fmt::format("{:016x}", v);
}

struct Forwarder::Impl {
  ForwardOptions o;
  std::string where;  // HOST:PORT/SESSION, for messages
  ControlHandler handler;
  asio::io_context io;
  std::unique_ptr<tcp::socket> socket;
  tcp::resolver resolver{io};
  asio::steady_timer tick{io}, retry{io}, connect_timer{io};
  std::thread thread;
  int fd = -1;
  uint64_t scan = 0;  // end of the last whole chunk in the local file (its size once final)
  uint64_t sent = 0, acked = 0, final_size = UINT64_MAX;
  uint64_t generation = 0;  // of the current connection; older handlers are stale
  bool connecting = false, connected = false, welcomed = false, writing = false;
  bool tried = false, ever_connected = false, lost = false, told_unreachable = false,
       bye_sent = false;
  double backoff_s = 0.1;
  std::deque<std::string> out;  // small frames waiting for the socket
  std::string frame;            // the frame being written
  uint64_t frame_data = 0;      // trace bytes in it
  uint8_t header[kFrameHeaderSize];
  std::string payload;
  Clock::time_point last_send = Clock::now();
  Clock::time_point linger_until;
  std::mutex m;
  std::condition_variable cv;
  bool done = false;  // guarded by m

  // Advances scan over the whole chunks now in the file.
  void Scan() {
    if (fd < 0) {
      fd = open(o.path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        return;
    }
    struct stat st;
    if (fstat(fd, &st) != 0)
      return;
    uint64_t size = static_cast<uint64_t>(st.st_size);
    if (final_size != UINT64_MAX) {
      scan = final_size;
      return;
    }
    scan = format::WholeChunksEnd(fd, scan, size);
  }

  void Say(const std::string& line) { fmt::print(stderr, "parmon record: {}\n", line); }

  void Connect() {
    if (connecting || connected || scan == 0)
      return;  // nothing to say before the file header exists
    connecting = true;
    uint64_t gen = ++generation;
    socket = std::make_unique<tcp::socket>(io);
    connect_timer.expires_after(std::chrono::seconds(5));
    connect_timer.async_wait([this, gen](error_code ec) {
      if (!ec && gen == generation && !connected)
        Lost(gen, "no answer within 5 s");
    });
    resolver.async_resolve(
        o.endpoint.host, std::to_string(o.endpoint.port),
        [this, gen](error_code ec, tcp::resolver::results_type results) {
          if (gen != generation)
            return;
          if (ec)
            return Lost(gen, ec.message());
          asio::async_connect(*socket, results, [this, gen](error_code ec, const tcp::endpoint&) {
            if (gen != generation)
              return;
            if (ec)
              return Lost(gen, ec.message());
            connecting = false;
            connected = true;
            connect_timer.cancel();
            error_code ignored;
            socket->set_option(tcp::no_delay(true), ignored);
            out.push_back(EncodeFrame(FrameType::kHello, EncodeHello(o.hello)));
            ReadHeader(gen);
            Pump();
          });
        });
  }

  void Lost(uint64_t gen, const std::string& reason) {
    if (gen != generation)
      return;
    if (bye_sent)  // the collector holds everything and closes after our BYE
      return Done();
    ++generation;
    error_code ec;
    if (socket)
      socket->close(ec);
    bool was_welcomed = welcomed;
    connecting = connected = welcomed = writing = false;
    out.clear();
    if (was_welcomed && !lost) {
      Say(fmt::format("lost the collector {} ({}); spooling to {} and retrying", where, reason,
                      o.path));
      lost = true;
    } else if (!ever_connected && !told_unreachable) {
      Say(fmt::format("cannot reach the collector {} ({}); recording to {} and retrying", where,
                      reason, o.path));
      told_unreachable = lost = true;
    }
    retry.expires_after(std::chrono::milliseconds(static_cast<int64_t>(backoff_s * 1000)));
    backoff_s = std::min(backoff_s * 2, kMaxBackoffS);
    retry.async_wait([this](error_code ec) {
      if (!ec)
        Connect();
    });
  }

  void ReadHeader(uint64_t gen) {
    asio::async_read(*socket, asio::buffer(header), [this, gen](error_code ec, size_t) {
      if (gen != generation)
        return;
      if (ec)
        return Lost(gen, ec == asio::error::eof ? "connection closed" : ec.message());
      FrameType type;
      uint32_t length = 0;
      if (Status s = ParseFrameHeader(header, &type, &length); !s.ok())
        return Lost(gen, s.message());
      payload.resize(length);
      asio::async_read(*socket, asio::buffer(payload), [this, gen, type](error_code ec, size_t) {
        if (gen != generation)
          return;
        if (ec)
          return Lost(gen, ec.message());
        Status s = CheckFrameCrc(header, payload);
        if (s.ok())
          s = Handle(type);
        if (!s.ok())
          return Lost(gen, s.message());
        ReadHeader(gen);
      });
    });
  }

  Status Handle(FrameType type) {
    auto j = nlohmann::json::parse(payload, nullptr, false);
    switch (type) {
      case FrameType::kWelcome: {
        if (!j.is_object() || !j.contains("offset") || !j["offset"].is_number_unsigned())
          return Status::Error("WELCOME without an offset");
        sent = acked = j["offset"].get<uint64_t>();
        welcomed = true;
        backoff_s = 0.1;
        if (lost)
          Say(fmt::format("{} the collector {}, sending from byte {}",
                          ever_connected ? "reached again" : "reached", where, sent));
        lost = false;
        ever_connected = true;
        Pump();
        return Status::Ok();
      }
      case FrameType::kAck:
        PARMON_RETURN_IF_ERROR(DecodeAck(payload, &acked));
        Pump();
        return Status::Ok();
      case FrameType::kControl: {
        if (!j.is_object() || !j.contains("command") || !j["command"].is_string())
          return Status::Error("CONTROL without a command");
        std::string command = j["command"].get<std::string>();
        std::string reply =
            handler ? handler(command) : fmt::format("unknown command '{}'", command);
        out.push_back(
            EncodeFrame(FrameType::kControl,
                        nlohmann::json{{"id", JsonU64(j, "id", 0)}, {"reply", reply}}.dump()));
        Pump();
        return Status::Ok();
      }
      case FrameType::kBye:
        return Status::Error(j.is_object() && j.contains("error") && j["error"].is_string()
                                 ? "refused: " + j["error"].get<std::string>()
                                 : std::string("the collector said BYE"));
      default:
        return Status::Error(fmt::format("unexpected frame type {}", static_cast<int>(type)));
    }
  }

  // The next frame to write: replies first, then trace bytes, then BYE once all is held.
  bool NextFrame() {
    frame_data = 0;
    if (!out.empty()) {
      frame = std::move(out.front());
      out.pop_front();
      return true;
    }
    if (!welcomed)
      return false;
    if (sent < scan) {
      std::string bytes(std::min<uint64_t>(kMaxDataBytes, scan - sent), '\0');
      ssize_t n = pread(fd, bytes.data(), bytes.size(), static_cast<off_t>(sent));
      if (n <= 0)
        return false;
      bytes.resize(static_cast<size_t>(n));
      frame = EncodeFrame(FrameType::kData, EncodeData(sent, bytes));
      frame_data = static_cast<uint64_t>(n);
      return true;
    }
    if (final_size != UINT64_MAX && acked >= final_size && !bye_sent) {
      frame = EncodeFrame(FrameType::kBye, "");
      bye_sent = true;
      return true;
    }
    if (Clock::now() - last_send > kKeepalive) {  // an empty DATA keeps the connection alive
      frame = EncodeFrame(FrameType::kData, EncodeData(sent, ""));
      return true;
    }
    return false;
  }

  void Pump() {
    if (!connected || writing || !NextFrame())
      return;
    writing = true;
    last_send = Clock::now();
    uint64_t gen = generation;
    asio::async_write(*socket, asio::buffer(frame), [this, gen](error_code ec, size_t) {
      if (gen != generation)
        return;
      writing = false;
      if (ec)
        return Lost(gen, ec.message());
      sent += frame_data;
      if (bye_sent && out.empty() && final_size != UINT64_MAX && acked >= final_size)
        return Done();
      Pump();
    });
  }

  void Done() {
    std::lock_guard<std::mutex> lock(m);
    done = true;
    cv.notify_all();
  }

  void Tick() {
    Scan();
    if (!tried && scan > 0) {  // the first attempt; Lost() schedules the later ones
      tried = true;
      Connect();
    }
    Pump();
    tick.expires_after(kTick);
    tick.async_wait([this](error_code ec) {
      if (!ec)
        Tick();
    });
  }
};

Forwarder::Forwarder(ForwardOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->o = std::move(options);
  if (!impl_->o.endpoint.session.empty())
    impl_->o.hello.session = impl_->o.endpoint.session;
  impl_->o.hello.role = "recorder";
  impl_->o.hello.stream_id = NewStreamId();
  impl_->where = fmt::format("{}:{}/{}", impl_->o.endpoint.host, impl_->o.endpoint.port,
                             impl_->o.hello.session);
}

Forwarder::~Forwarder() {
  impl_->io.stop();
  if (impl_->thread.joinable())
    impl_->thread.join();
  if (impl_->fd >= 0)
    close(impl_->fd);
}

void Forwarder::SetControlHandler(ControlHandler handler) {
  impl_->handler = std::move(handler);
}

const std::string& Forwarder::session() const {
  return impl_->o.hello.session;
}

void Forwarder::Start() {
  Impl* p = impl_.get();
  p->thread = std::thread([p] {
    // The recorder takes its signals (SIGINT, SIGTERM, SIGCHLD...) through a signalfd of the
    // main thread; none may be delivered to this thread instead.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    p->Tick();
    p->io.run();
  });
}

Status Forwarder::Finish() {
  Impl* p = impl_.get();
  asio::post(p->io, [p] {
    p->Scan();  // opens the file if it was never opened
    struct stat st;
    p->final_size = p->fd >= 0 && fstat(p->fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    p->scan = p->final_size;
    if (p->final_size == 0)
      return p->Done();  // the recording never started: nothing to deliver
    p->tried = true;
    if (!p->connected && !p->connecting) {
      p->retry.cancel();
      p->backoff_s = 0.1;
      p->Connect();
    }
    p->Pump();
  });
  bool all = false;
  {
    std::unique_lock<std::mutex> lock(p->m);
    all =
        p->cv.wait_for(lock, std::chrono::milliseconds(static_cast<int64_t>(p->o.linger_s * 1000)),
                       [p] { return p->done; });
  }
  p->io.stop();
  if (p->thread.joinable())
    p->thread.join();
  if (all)
    return Status::Ok();
  return Status::Error(fmt::format(
      "the collector {} holds {} of the {} bytes after {} s; the whole session is in {}", p->where,
      p->acked, p->final_size, p->o.linger_s, p->o.path));
}

}  // namespace parmon::live
