// FetchSession against a collector played by the test on 127.0.0.1: the list of ranks a
// collector states is checked before it sizes anything (threads, files), and a per-rank session
// larger than the fetch's pool of workers is still copied whole.
#include "live/fetch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "live/protocol.h"

namespace parmon::live {
namespace {

// Answers each connection with reply(subscribe request) until stopped.
class FakeCollector {
 public:
  explicit FakeCollector(std::function<std::string(const nlohmann::json&)> reply)
      : reply_(std::move(reply)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd_, 64), 0);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~FakeCollector() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  std::string Addr() const { return fmt::format("127.0.0.1:{}", port_); }
  int connections() const { return connections_.load(); }

 private:
  void Loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0)
        continue;
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0)
        continue;
      ++connections_;
      // HELLO then SUBSCRIBE: read frames until the SUBSCRIBE has come.
      FrameDecoder d;
      nlohmann::json sub;
      char buf[4096];
      bool got = false;
      while (!got) {
        ssize_t n = recv(c, buf, sizeof buf, 0);
        if (n <= 0)
          break;
        d.Feed(buf, static_cast<size_t>(n));
        while (auto f = d.Next())
          if (f->type == FrameType::kSubscribe) {
            sub = nlohmann::json::parse(f->payload, nullptr, false);
            got = true;
          }
      }
      std::string out = reply_(sub);
      send(c, out.data(), out.size(), MSG_NOSIGNAL);
      shutdown(c, SHUT_WR);
      while (recv(c, buf, sizeof buf, 0) > 0) {
      }
      close(c);
    }
  }

  std::function<std::string(const nlohmann::json&)> reply_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

std::string RanksWelcome(const nlohmann::json& ranks) {
  return EncodeFrame(FrameType::kWelcome,
                     nlohmann::json{{"session", "s"}, {"ranks", ranks}}.dump()) +
         EncodeFrame(FrameType::kBye, "");
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          fmt::format("parmon-fetch-test-{}-{}", getpid(), name))
      .string();
}

TEST(Fetch, RepeatedOrNegativeRanksAreRefused) {
  for (const char* list : {"[0, 1, 1]", "[-1, 0]"}) {
    const std::string welcome = RanksWelcome(nlohmann::json::parse(list));
    FakeCollector c([&](const nlohmann::json&) { return welcome; });
    auto r = FetchSession(c.Addr(), "s", TempPath("bad"), false);
    ASSERT_FALSE(r.ok()) << list;
    EXPECT_NE(r.status().message().find("not valid"), std::string::npos) << r.status().message();
    EXPECT_EQ(c.connections(), 1) << list;
  }
}

TEST(Fetch, FollowingMoreRanksThanAThreadEachCanHoldIsRefused) {
  nlohmann::json ranks = nlohmann::json::array();
  for (int k = 0; k < 100'000; ++k)  // as many as one frame can list
    ranks.push_back(k);
  const std::string welcome = RanksWelcome(ranks);
  FakeCollector c([&](const nlohmann::json&) { return welcome; });
  const std::string out = TempPath("follow");
  auto r = FetchSession(c.Addr(), "s", out, /*follow=*/true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("100000 ranks: following more than 4096"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(c.connections(), 1);  // no rank was asked for, no thread started for one
  EXPECT_FALSE(std::filesystem::exists(out));
}

// 40 ranks, more than the pool's 16 workers: every rank's bytes land in its own file.
TEST(Fetch, PerRankSessionLargerThanThePoolIsCopiedWhole) {
  constexpr int kRanks = 40;
  nlohmann::json ranks = nlohmann::json::array();
  for (int k = 0; k < kRanks; ++k)
    ranks.push_back(k);
  FakeCollector c([&](const nlohmann::json& sub) {
    if (!sub.is_object() || !sub.contains("rank"))
      return RanksWelcome(ranks);
    const int k = sub["rank"].get<int>();
    const std::string bytes = fmt::format("bytes of rank {}", k);
    return EncodeFrame(FrameType::kWelcome,
                       nlohmann::json{
                           {"session", "s"}, {"rank", k}, {"size", bytes.size()}, {"ended", true}}
                           .dump()) +
           EncodeFrame(FrameType::kData, EncodeData(0, bytes)) + EncodeFrame(FrameType::kBye, "");
  });
  const std::string out = TempPath("whole");
  auto r = FetchSession(c.Addr(), "s", out, false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->per_rank);
  EXPECT_TRUE(r->complete);
  EXPECT_EQ(c.connections(), kRanks + 1);
  for (int k = 0; k < kRanks; ++k) {
    std::ifstream in(fmt::format("{}/rank-{}.ptrace", out, k));
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(ss.str(), fmt::format("bytes of rank {}", k));
  }
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace parmon::live
