// Inside the collector (live/server.h): the connection and server classes, shared by server.cc
// (accepting, --exec consumers, control routing) and connection.cc (one peer's frames).
#ifndef PARMON_SRC_LIVE_SERVER_IMPL_H_
#define PARMON_SRC_LIVE_SERVER_IMPL_H_

#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <boost/asio.hpp>

#include "live/analysis_service.h"
#include "live/protocol.h"
#include "live/server.h"
#include "live/store.h"

namespace parmon::live {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// Frames before HELLO are small: an unauthenticated peer holds at most this much.
constexpr uint32_t kMaxPreHelloFrame = 64u << 10;

// One line on stderr, with the time.
void Log(const std::string& line);

class ServerImpl;

// One peer: a recorder streaming one stream, a consumer subscribed to one, or a control request.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ServerImpl* server, tcp::socket socket, std::string peer);
  ~Connection();
  void Start();
  // Closes the connection and logs one line: "<peer> <verb>: <reason>".
  void Close(const std::string& verb, const std::string& reason);
  // Sends BYE with the reason, then closes (a peer that speaks the protocol learns why).
  void Refuse(const std::string& reason);
  void Send(FrameType type, std::string payload);
  Stream* stream() const { return stream_; }
  const std::string& peer() const { return peer_; }

 private:
  void ReadHeader();
  void ReadPayload(FrameType type, uint32_t length);
  Status Handle(FrameType type);
  Status OnHello();
  Status OnRecorderHello(const Hello& h);
  Status OnData();
  Status OnControl();
  Status OnSubscribe();
  Status OnQuery();
  // The worker's answer to this connection's QUERY (on the io thread).
  void SendSnapshot(Snapshot s);
  void Pump();
  bool QueueSubscriberData();
  void ArmTimer(double seconds, const std::string& why);

  ServerImpl* server_;
  std::shared_ptr<int> live_;  // the server's count of connections
  tcp::socket socket_;
  asio::steady_timer timer_;
  std::string peer_;
  uint8_t header_[kFrameHeaderSize];
  std::string payload_;
  std::deque<std::string> out_;
  bool writing_ = false, closed_ = false, closing_ = false, hello_ = false;
  std::string role_;
  Stream* stream_ = nullptr;  // the recorder's stream
  uint64_t acked_ = 0;
  Stream* sub_ = nullptr;  // the subscribed stream
  uint64_t sub_offset_ = 0;
  bool follow_ = false, waiting_ = false;
  int version_ = kBaseProtocolVersion;  // the peer's HELLO
  bool querying_ = false;               // a QUERY is being answered
};

class ServerImpl final : public Server {
 public:
  explicit ServerImpl(const ServeOptions& o);
  ~ServerImpl() override;
  Status Bind();
  uint16_t port() const override { return acceptor_.local_endpoint().port(); }
  void Run() override;

  const ServeOptions& options() const { return options_; }
  SessionStore& store() { return store_; }
  AnalysisService& analysis() { return *analysis_; }
  asio::io_context& io() { return io_; }
  // Connections alive; shared with them, since the io_context destroys the last ones after the
  // server's other members are gone.
  const std::shared_ptr<int>& live() { return live_; }

  // Starts the --exec consumer of a stream, once per stream and collector process.
  void StartExec(Stream* s);
  // A consumer's CONTROL request: forwarded to every recorder of the session (or one rank).
  void RouteControl(const std::shared_ptr<Connection>& asker,
                    const std::string& session,
                    int rank,
                    const std::string& command);
  // A recorder's reply to request id.
  void ControlReplied(uint64_t id, int rank, const std::string& reply);
  // Logs a refusal, at most kMaxRefusalLines a second.
  void LogRefusal(const std::string& line);
  // A recorder's connection closed without the end of its stream (why: how it closed): unless
  // the same recording reconnects within options().lost_after_s, the stream is marked lost.
  void RecorderGone(Stream* s, const std::string& why);
  // Marks s lost in `seconds` unless a recorder takes it meanwhile; what: the sentence's start.
  void ArmLost(Stream* s, double seconds, const std::string& what);
  // At start: streams the store holds open (a recorder killed while no collector ran) are marked
  // lost unless a recorder of them comes back within --lost-after plus a recorder's reconnect.
  void ArmOpenStreams();
  // A recorder took its stream (new or reconnecting): no longer lost, nor about to be.
  void RecorderBack(Stream* s);
  // The world size of a per-rank session: the largest `ranks` its recorders said (0: unknown).
  int WorldOf(const std::string& session);

 private:
  struct PendingControl {
    std::weak_ptr<Connection> asker;
    size_t expected = 0;
    std::set<int> ranks;
    std::map<int, std::string> replies;
    std::unique_ptr<asio::steady_timer> timer;
  };

  void FinishControl(uint64_t id, bool timed_out);
  void Accept();
  void WaitChildren();

  ServeOptions options_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_;
  asio::signal_set signals_, children_;
  SessionStore store_;
  // The live analyses' worker (reset first in ~ServerImpl: it posts answers to io_).
  std::unique_ptr<AnalysisService> analysis_;
  std::shared_ptr<int> live_ = std::make_shared<int>(0);
  std::set<std::string> fed_;  // streams given to an --exec consumer
  // Per stream key: the grace timer of a recorder gone without the end (RecorderGone).
  std::map<std::string, std::unique_ptr<asio::steady_timer>> grace_;
  uint64_t next_control_ = 0;
  std::map<uint64_t, PendingControl> pending_;
  time_t refusal_second_ = 0;
  int refusal_lines_ = 0, refusals_suppressed_ = 0;
};

}  // namespace parmon::live

#endif  // PARMON_SRC_LIVE_SERVER_IMPL_H_
