// Live monitoring end to end (docs/live.md): real `parmon serve` and `parmon record --to`
// processes on 127.0.0.1, port 0, with the tree's programs. Each fault of issue 14 is a test:
// two sessions at once, the collector killed and restarted, the recorder killed, the network
// cut, hostile frames, a flood of connections, tokens.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "live/client.h"
#include "live/fetch.h"
#include "live/live_support.h"
#include "live/protocol.h"
#include "support/e2e.h"

namespace parmon {
namespace {

using testing::BinDir;
using testing::Collector;
using testing::Parmon;
using testing::ParmonBin;
using testing::Process;
using testing::ReadFile;
using testing::Record;
using testing::SizeOf;
using testing::TempDir;
using testing::WaitFor;

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// The stored session equals the recorder's own copy, byte for byte, and reports the same.
void ExpectSameSession(const std::string& stored, const std::string& local) {
  ASSERT_TRUE(WaitFor([&] { return SizeOf(stored) == SizeOf(local) && SizeOf(local) > 0; }, 30))
      << stored << " " << SizeOf(stored) << " vs " << local << " " << SizeOf(local);
  EXPECT_TRUE(ReadFile(stored) == ReadFile(local)) << stored << " differs from " << local;
  auto a = Parmon({"report", stored});
  auto b = Parmon({"report", local});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(Replace(a.out, stored, "X"), Replace(b.out, local, "X"));
}

TEST(LiveE2e, TwoProgramsStreamAtOnceIntoTwoSessions) {
  TempDir dir;
  Collector c(dir.File("store"), dir.File("serve.log"));
  ASSERT_GT(c.port(), 0) << c.Log();
  auto one = Record(dir, "one", c.Addr() + "/one", {BinDir() + "/threads_regions", "3", "300000"},
                    {"-o", dir.File("one.ptrace")});
  auto two = Record(dir, "two", c.Addr() + "/two", {BinDir() + "/pipeline"},
                    {"-o", dir.File("two.ptrace")});
  ASSERT_EQ(one->Wait(120), 0) << one->Err();
  ASSERT_EQ(two->Wait(120), 0) << two->Err();
  ExpectSameSession(dir.File("store/one.ptrace"), dir.File("one.ptrace"));
  ExpectSameSession(dir.File("store/two.ptrace"), dir.File("two.ptrace"));
  // A consumer gets the stored bytes, and an --exec-less collector logged both sessions.
  auto fetched = live::FetchSession(c.Addr(), "one", dir.File("fetched.ptrace"), false);
  ASSERT_TRUE(fetched.ok()) << fetched.status().message();
  EXPECT_TRUE(fetched->complete);
  EXPECT_TRUE(ReadFile(dir.File("fetched.ptrace")) == ReadFile(dir.File("one.ptrace")));
  auto cli = Parmon({"fetch", c.Addr() + "/two", "-o", dir.File("fetched2.ptrace")});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_TRUE(ReadFile(dir.File("fetched2.ptrace")) == ReadFile(dir.File("two.ptrace")));
  EXPECT_NE(c.Log().find("recorder of one"), std::string::npos) << c.Log();
  EXPECT_NE(c.Log().find("recorder of two"), std::string::npos) << c.Log();
}

TEST(LiveE2e, WithoutOutputTheSpoolIsRemovedOnceDelivered) {
  TempDir dir;
  Collector c(dir.File("store"), dir.File("serve.log"));
  std::filesystem::create_directories(dir.File("tmp"));
  auto r = testing::Run({ParmonBin(), "record", "-q", "--to", c.Addr() + "/s", "--",
                         BinDir() + "/threads_regions", "2", "1000"},
                        {"TMPDIR=" + dir.File("tmp")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(SizeOf(dir.File("store/s.ptrace")), 100u);
  EXPECT_TRUE(std::filesystem::is_empty(dir.File("tmp")));
  EXPECT_EQ(Parmon({"info", dir.File("store/s.ptrace")}).exit_code, 0);
}

TEST(LiveE2e, CollectorKilledAndRestartedLosesNothing) {
  TempDir dir;
  auto c = std::make_unique<Collector>(dir.File("store"), dir.File("serve1.log"));
  int port = c->port();
  ASSERT_GT(port, 0);
  auto rec =
      Record(dir, "rec", c->Addr() + "/k", {BinDir() + "/duty_cycle", "--seconds", "5", "basic"},
             {"-o", dir.File("local.ptrace")});
  ASSERT_TRUE(WaitFor([&] { return SizeOf(dir.File("store/k.ptrace")) > 1000; }, 30));
  c->process().Kill(SIGKILL);
  c->process().Wait(10);
  ASSERT_TRUE(
      WaitFor([&] { return rec->Err().find("lost the collector") != std::string::npos; }, 30))
      << rec->Err();
  c = std::make_unique<Collector>(dir.File("store"), dir.File("serve2.log"),
                                  std::vector<std::string>{}, port);
  ASSERT_EQ(c->port(), port) << c->Log();
  ASSERT_EQ(rec->Wait(120), 0) << rec->Err();
  EXPECT_NE(rec->Err().find("reached again"), std::string::npos) << rec->Err();
  EXPECT_NE(c->Log().find("resuming at byte"), std::string::npos) << c->Log();
  ExpectSameSession(dir.File("store/k.ptrace"), dir.File("local.ptrace"));
}

TEST(LiveE2e, RecorderKilledLeavesTheStoredSessionReadable) {
  TempDir dir;
  Collector c(dir.File("store"), dir.File("serve.log"));
  auto rec = Record(dir, "rec", c.Addr() + "/dead",
                    {BinDir() + "/duty_cycle", "--seconds", "20", "basic"});
  ASSERT_TRUE(WaitFor([&] { return SizeOf(dir.File("store/dead.ptrace")) > 2000; }, 60));
  rec->Kill(SIGKILL);
  rec->Wait(10);
  ASSERT_TRUE(WaitFor([&] { return c.Log().find("disconnected") != std::string::npos; }, 30));
  auto info = Parmon({"info", dir.File("store/dead.ptrace")});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE((info.out + info.err).find("the trace was not closed"), std::string::npos)
      << info.out << info.err;
  EXPECT_EQ(Parmon({"report", "--partial", dir.File("store/dead.ptrace")}).exit_code, 0);
}

// `dump --follow` of a local file whose recorder is killed: the follower sees from the session's
// recorder pid that nothing more will come, prints every event that was written (the same lines
// as the post-mortem dump), says so in one sentence and ends with status 3, instead of waiting
// for a Ctrl-C.
TEST(LiveE2e, FollowOfALocalFileEndsWhenItsRecorderIsKilled) {
  TempDir dir;
  const std::string trace = dir.File("local.ptrace");
  Process rec({ParmonBin(), "record", "-q", "-o", trace, "--", BinDir() + "/duty_cycle",
               "--seconds", "6", "basic"},
              dir.File("rec.out"), dir.File("rec.err"));
  ASSERT_TRUE(WaitFor([&] { return SizeOf(trace) > 2000; }, 60));
  Process follow({ParmonBin(), "dump", "--follow", trace}, dir.File("follow.out"),
                 dir.File("follow.err"));
  ASSERT_TRUE(WaitFor([&] { return !follow.Out().empty(); }, 60)) << follow.Err();
  rec.Kill(SIGKILL);
  rec.Wait(10);
  EXPECT_EQ(follow.Wait(60), 3) << follow.Err();
  EXPECT_NE(follow.Err().find("ended without closing it"), std::string::npos) << follow.Err();
  auto post = Parmon({"dump", trace});
  EXPECT_EQ(post.exit_code, 3) << post.err;
  EXPECT_EQ(follow.Out(), post.out);
}

TEST(LiveE2e, NetworkCutIsSpooledAndResent) {
  TempDir dir;
  Collector c(dir.File("store"), dir.File("serve.log"));
  testing::Relay relay(c.port());
  auto rec = Record(dir, "rec", "127.0.0.1:" + std::to_string(relay.port()) + "/cut",
                    {BinDir() + "/duty_cycle", "--seconds", "6", "basic"},
                    {"-o", dir.File("local.ptrace")});
  ASSERT_TRUE(WaitFor([&] { return SizeOf(dir.File("store/cut.ptrace")) > 1000; }, 30));
  relay.Cut();
  ASSERT_TRUE(
      WaitFor([&] { return rec->Err().find("lost the collector") != std::string::npos; }, 30))
      << rec->Err();
  uint64_t during = SizeOf(dir.File("store/cut.ptrace"));
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the program runs on meanwhile
  EXPECT_EQ(SizeOf(dir.File("store/cut.ptrace")), during);
  EXPECT_GT(SizeOf(dir.File("local.ptrace")), during);
  relay.Restore();
  ASSERT_EQ(rec->Wait(120), 0) << rec->Err();
  EXPECT_NE(rec->Err().find("reached again"), std::string::npos) << rec->Err();
  ExpectSameSession(dir.File("store/cut.ptrace"), dir.File("local.ptrace"));
}

// The sidecar of a stored stream, as JSON (an empty object when there is none).
nlohmann::json Meta(const std::string& store, const std::string& key) {
  auto j = nlohmann::json::parse(ReadFile(store + "/.streams/" + key + ".meta"), nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

// A cut longer than the collector's grace (--lost-after 1): the stream is marked lost in its
// sidecar (a follower is told and ends), then the recorder, still alive, reconnects, resumes at
// the byte the collector holds, and the stream ends whole and no longer lost (docs/live.md).
TEST(LiveE2e, ARecorderBackAfterItsStreamWasMarkedLostResumes) {
  TempDir dir;
  const std::string store = dir.File("store");
  Collector c(store, dir.File("serve.log"), {"--lost-after", "1"});
  testing::Relay relay(c.port());
  auto rec = Record(dir, "rec", "127.0.0.1:" + std::to_string(relay.port()) + "/back",
                    {BinDir() + "/duty_cycle", "--seconds", "8", "basic"},
                    {"-o", dir.File("local.ptrace")});
  ASSERT_TRUE(WaitFor([&] { return SizeOf(store + "/back.ptrace") > 1000; }, 30));
  // A follower: it ends when the stream is marked lost, with the collector's sentence.
  std::atomic<bool> stop{false}, done{false};
  StatusOr<live::FetchResult> followed = Status::Error("not run");
  std::thread follower([&] {
    followed = live::FetchSession(c.Addr(), "back", dir.File("followed.ptrace"), true, &stop);
    done = true;
  });
  relay.Cut();
  ASSERT_TRUE(WaitFor([&] { return Meta(store, "back").value("lost", false); }, 30)) << c.Log();
  const std::string reason = Meta(store, "back").value("lost_reason", "");
  EXPECT_NE(reason.find("did not come back within 1 s"), std::string::npos) << reason;
  EXPECT_NE(reason.find(fmt::format("keeps the {} bytes", SizeOf(store + "/back.ptrace"))),
            std::string::npos)
      << reason;
  const bool ended = WaitFor([&] { return done.load(); }, 30);
  stop = true;
  follower.join();
  ASSERT_TRUE(ended) << "the follower did not end when the stream was marked lost";
  ASSERT_TRUE(followed.ok()) << followed.status().message();
  EXPECT_FALSE(followed->complete);
  EXPECT_EQ(followed->lost, reason);
  EXPECT_EQ(SizeOf(dir.File("followed.ptrace")), SizeOf(store + "/back.ptrace"));
  relay.Restore();
  ASSERT_EQ(rec->Wait(120), 0) << rec->Err();
  EXPECT_NE(rec->Err().find("reached again"), std::string::npos) << rec->Err();
  ExpectSameSession(store + "/back.ptrace", dir.File("local.ptrace"));
  ASSERT_TRUE(WaitFor([&] { return Meta(store, "back").value("ended", false); }, 30));
  EXPECT_FALSE(Meta(store, "back").value("lost", false)) << Meta(store, "back").dump();
  EXPECT_NE(c.Log().find("back is no longer lost"), std::string::npos) << c.Log();
}

// The collector killed, then the recorder killed while no collector runs: the collector started
// again finds the stream open in its store and, no recorder of it coming back within --lost-after
// plus a recorder's reconnect time (1 + 10 s here), marks it lost with what it holds.
TEST(LiveE2e, AStreamLeftOpenByACollectorRestartIsMarkedLost) {
  TempDir dir;
  const std::string store = dir.File("store");
  auto c = std::make_unique<Collector>(store, dir.File("serve1.log"));
  const int port = c->port();
  auto rec = Record(dir, "rec", c->Addr() + "/orphan",
                    {BinDir() + "/duty_cycle", "--seconds", "30", "basic"});
  ASSERT_TRUE(WaitFor([&] { return SizeOf(store + "/orphan.ptrace") > 1000; }, 30));
  c->process().Kill(SIGKILL);
  c->process().Wait(10);
  rec->Kill(SIGKILL);
  rec->Wait(10);
  c = std::make_unique<Collector>(store, dir.File("serve2.log"),
                                  std::vector<std::string>{"--lost-after", "1"}, port);
  ASSERT_GT(c->port(), 0) << c->Log();
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return Meta(store, "orphan").value("lost", false); }, 60)) << c->Log();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_GE(seconds, 10.0);
  const std::string reason = Meta(store, "orphan").value("lost_reason", "");
  EXPECT_NE(reason.find("was open when the collector started"), std::string::npos) << reason;
  EXPECT_NE(reason.find(fmt::format("keeps the {} bytes", SizeOf(store + "/orphan.ptrace"))),
            std::string::npos)
      << reason;
  // A follower started now ends at once with the sentence.
  auto fetched = live::FetchSession(c->Addr(), "orphan", dir.File("copy.ptrace"), true);
  ASSERT_TRUE(fetched.ok()) << fetched.status().message();
  EXPECT_EQ(fetched->lost, reason);
  EXPECT_FALSE(fetched->complete);
}

// Sends bytes on a fresh connection and expects the collector to drop it.
void ExpectDropped(int port, const std::string& bytes) {
  int fd = testing::ConnectTo(port);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  EXPECT_TRUE(testing::ReadUntilClosed(fd, 20));
  close(fd);
}

TEST(LiveE2e, HostileFramesAreDroppedAndOtherSessionsUnharmed) {
  TempDir dir;
  Collector c(dir.File("store"), dir.File("serve.log"));
  auto rec =
      Record(dir, "rec", c.Addr() + "/good", {BinDir() + "/duty_cycle", "--seconds", "4", "basic"},
             {"-o", dir.File("local.ptrace")});
  ASSERT_TRUE(WaitFor([&] { return SizeOf(dir.File("store/good.ptrace")) > 0; }, 30));
  int silent = testing::ConnectTo(c.port());  // says nothing: dropped after 10 s
  using live::EncodeFrame;
  using live::FrameType;
  live::Hello hello;
  hello.session = "evil";
  hello.stream_id = "abc";
  std::string good_hello = EncodeFrame(FrameType::kHello, live::EncodeHello(hello));
  ExpectDropped(c.port(), std::string(64, 'x'));  // not the protocol
  std::string bad_crc = EncodeFrame(FrameType::kHello, live::EncodeHello(hello));
  bad_crc[20] ^= 1;
  ExpectDropped(c.port(), bad_crc);
  std::string oversized = EncodeFrame(FrameType::kData, "");
  oversized[6] = 0x7f;  // length 0x7f0000
  ExpectDropped(c.port(), good_hello + oversized);
  ExpectDropped(c.port(), EncodeFrame(FrameType::kData, live::EncodeData(0, "PARMONTR")));
  std::string truncated = EncodeFrame(FrameType::kData, live::EncodeData(0, std::string(500, 'a')));
  {
    live::Hello other = hello;
    other.session = "evil2";  // its own stream: the next connection does not replace it
    std::string half =
        EncodeFrame(FrameType::kHello, live::EncodeHello(other)) + truncated.substr(0, 100);
    int fd = testing::ConnectTo(c.port());
    ASSERT_EQ(write(fd, half.data(), half.size()), static_cast<ssize_t>(half.size()));
    close(fd);
    ASSERT_TRUE(WaitFor([&] { return c.Log().find("inside a frame") != std::string::npos; }, 30))
        << c.Log();
  }
  // Bytes that are no trace, at a gap, and a recorder trying to take over the good session.
  ExpectDropped(c.port(), good_hello + EncodeFrame(FrameType::kData,
                                                   live::EncodeData(0, "NOTATRACE-NOTATRACE")));
  ExpectDropped(c.port(),
                good_hello + EncodeFrame(FrameType::kData, live::EncodeData(1 << 20, "x")));
  live::Hello thief = hello;
  thief.session = "good";
  ExpectDropped(c.port(), EncodeFrame(FrameType::kHello, live::EncodeHello(thief)));
  ASSERT_EQ(rec->Wait(120), 0) << rec->Err();
  ExpectSameSession(dir.File("store/good.ptrace"), dir.File("local.ptrace"));
  std::string log = c.Log();
  for (const char* why :
       {"bad frame magic", "checksum mismatch", "over the limit", "first frame has type",
        "inside a frame", "parmon trace header", "DATA at offset 1048576", "another recording"})
    EXPECT_NE(log.find(why), std::string::npos) << why << "\n" << log;
  EXPECT_EQ(rec->Err().find("lost the collector"), std::string::npos) << rec->Err();
  EXPECT_TRUE(testing::ReadUntilClosed(silent, 30));
  close(silent);
  EXPECT_NE(c.Log().find("idle for 10 s (sent no HELLO)"), std::string::npos) << c.Log();
}

TEST(LiveE2e, FloodOfConnectionsIsBounded) {
  TempDir dir;
  Collector c(dir.File("store"), dir.File("serve.log"), {"--max-connections", "16"});
  std::vector<int> fds;
  for (int i = 0; i < 300; ++i) {
    int fd = testing::ConnectTo(c.port());
    if (fd >= 0)
      fds.push_back(fd);
  }
  ASSERT_TRUE(WaitFor(
      [&] { return c.Log().find("refused: 16 connections already") != std::string::npos; }, 30))
      << c.Log();
  EXPECT_TRUE(c.process().Running());
  EXPECT_LT(testing::RssKib(c.process().pid()), 64 * 1024);
  for (int fd : fds)
    close(fd);
  // Alive and serving once the flood is gone.
  std::string local = dir.File("after.ptrace");
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r =
            testing::Run({ParmonBin(), "record", "-q", "-o", local, "--to-linger", "5s", "--to",
                          c.Addr() + "/after", "--", BinDir() + "/threads_regions", "1", "1000"});
        return r.exit_code == 0 && SizeOf(dir.File("store/after.ptrace")) == SizeOf(local);
      },
      60));
}

TEST(LiveE2e, NonLoopbackWithoutTokenIsRefusedAtStart) {
  TempDir dir;
  auto r = Parmon({"serve", "--listen", "0.0.0.0:0", "--store", dir.File("store")}, 30);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("needs --token-file"), std::string::npos) << r.err;
}

TEST(LiveE2e, BadTokenIsRefusedAndTheRightOneAccepted) {
  TempDir dir;
  std::ofstream(dir.File("token")) << "correct-horse-battery-staple\n";
  std::ofstream(dir.File("wrong")) << "incorrect-horse-battery\n";
  Collector c(dir.File("store"), dir.File("serve.log"), {"--token-file", dir.File("token")});
  auto bad = Parmon({"record", "-q", "-o", dir.File("bad.ptrace"), "--to-linger", "2s",
                     "--token-file", dir.File("wrong"), "--to", c.Addr() + "/t", "--",
                     BinDir() + "/threads_regions", "1", "100"});
  EXPECT_EQ(bad.exit_code, 0) << bad.err;  // the program ran; the local copy is kept
  EXPECT_NE(bad.err.find("bad token"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("the whole session is in " + dir.File("bad.ptrace")), std::string::npos)
      << bad.err;
  EXPECT_NE(c.Log().find("refused: bad token"), std::string::npos) << c.Log();
  EXPECT_FALSE(testing::Exists(dir.File("store/t.ptrace")));
  auto good =
      Parmon({"record", "-q", "-o", dir.File("good.ptrace"), "--token-file", dir.File("token"),
              "--to", c.Addr() + "/t", "--", BinDir() + "/threads_regions", "1", "100"});
  EXPECT_EQ(good.exit_code, 0) << good.err;
  ExpectSameSession(dir.File("store/t.ptrace"), dir.File("good.ptrace"));
  // A consumer without the token gets nothing.
  auto fetched = live::FetchSession(c.Addr(), "t", dir.File("f.ptrace"), false);
  EXPECT_FALSE(fetched.ok());
}

TEST(LiveE2e, ExecConsumerFollowAndControlRouting) {
  TempDir dir;
  Collector c(dir.File("store"), dir.File("serve.log"),
              {"--exec", "cat > " + dir.path() + "/exec-$PARMON_SESSION.ptrace"});
  // In the background, as followers use it, started before the session exists: done once the
  // session is complete.
  EXPECT_TRUE(live::IsRemoteSession(c.Addr() + "/live"));
  EXPECT_FALSE(live::IsRemoteSession(dir.File("store")));
  auto background = live::BackgroundFetch::Start(c.Addr() + "/live", dir.File("bg.ptrace"));
  ASSERT_TRUE(background.ok()) << background.status().message();
  auto rec =
      Record(dir, "rec", c.Addr() + "/live", {BinDir() + "/duty_cycle", "--seconds", "3", "basic"},
             {"-o", dir.File("local.ptrace")});
  ASSERT_TRUE(WaitFor([&] { return SizeOf(dir.File("store/live.ptrace")) > 0; }, 30));
  // The recorder answers a control command routed through the collector.
  auto reply = live::SendControl(c.Addr(), "live", "frobnicate");
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_NE(reply->find("unknown command"), std::string::npos) << *reply;
  EXPECT_FALSE(live::SendControl(c.Addr(), "nosuch", "pause").ok());
  // A follower started mid-run ends with the whole session.
  auto followed = live::FetchSession(c.Addr(), "live", dir.File("followed.ptrace"), true);
  ASSERT_TRUE(followed.ok()) << followed.status().message();
  EXPECT_TRUE(followed->complete);
  ASSERT_EQ(rec->Wait(120), 0) << rec->Err();
  EXPECT_TRUE(ReadFile(dir.File("followed.ptrace")) == ReadFile(dir.File("local.ptrace")));
  ASSERT_TRUE(WaitFor([&] { return (*background)->done(); }, 30));
  EXPECT_TRUE((*background)->status().ok()) << (*background)->status().message();
  EXPECT_TRUE(ReadFile(dir.File("bg.ptrace")) == ReadFile(dir.File("local.ptrace")));
  ASSERT_TRUE(WaitFor(
      [&] { return SizeOf(dir.File("exec-live.ptrace")) == SizeOf(dir.File("local.ptrace")); },
      30));
  EXPECT_TRUE(ReadFile(dir.File("exec-live.ptrace")) == ReadFile(dir.File("local.ptrace")));
}

// A collector that welcomes the recorder and then never reads: the socket fills, the program
// runs on at its own pace, and the recorder ends after --to-linger saying where the session is.
TEST(LiveE2e, StalledCollectorNeverBlocksTheProgram) {
  TempDir dir;
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t len = sizeof a;
  getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  std::atomic<bool> done{false};
  std::thread stalled([&] {
    int fd = accept(listener, nullptr, nullptr);
    std::string welcome = live::EncodeFrame(live::FrameType::kWelcome, R"({"offset":0})");
    if (fd >= 0 && write(fd, welcome.data(), welcome.size()) < 0)
      ADD_FAILURE() << "cannot welcome the recorder";
    while (!done)  // holds the connection and reads nothing
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    close(fd);
  });
  std::string to = "127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/stall";
  auto r = Parmon({"record", "-q", "-o", dir.File("local.ptrace"), "--to-linger", "1s", "--to", to,
                   "--", BinDir() + "/threads_regions", "2", "4000000"},
                  120);
  done = true;
  stalled.join();
  close(listener);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // More than the loopback socket holds unread (the trace is ~0.13 B/event: 16 M events).
  EXPECT_GT(SizeOf(dir.File("local.ptrace")), 1u << 20);
  EXPECT_NE(r.err.find("holds 0 of the"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the whole session is in " + dir.File("local.ptrace")), std::string::npos)
      << r.err;
  EXPECT_EQ(Parmon({"info", dir.File("local.ptrace")}).exit_code, 0);
}

// `mpirun -np 3 parmon record --to`: one stream per rank, one session named after the job,
// stored as the directory of rank files `record -o` writes, and reported the same.
TEST(LiveE2e, MpiRanksStreamIntoOneSession) {
  if (access((BinDir() + "/ring_search").c_str(), X_OK) != 0 || access("/usr/bin/mpirun", X_OK))
    GTEST_SKIP() << "no MPI example or mpirun";
  TempDir dir;
  Collector c(dir.File("store"), dir.File("serve.log"));
  auto r = testing::Run({"mpirun",
                         "--allow-run-as-root",
                         "--oversubscribe",
                         "-np",
                         "3",
                         ParmonBin(),
                         "record",
                         "-q",
                         "-o",
                         dir.File("run"),
                         "--to",
                         c.Addr(),
                         "--",
                         BinDir() + "/ring_search",
                         "--form",
                         "slow",
                         "--words",
                         "40",
                         "--db-kb",
                         "64"},
                        {}, 240);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> sessions;
  for (const auto& e : std::filesystem::directory_iterator(dir.File("store")))
    if (e.path().filename().string()[0] != '.')
      sessions.push_back(e.path().string());
  ASSERT_EQ(sessions.size(), 1u) << c.Log();
  EXPECT_TRUE(std::filesystem::is_directory(sessions[0]));
  EXPECT_NE(sessions[0].find("ring_search-"), std::string::npos) << sessions[0];
  for (int k = 0; k < 3; ++k) {
    std::string name = "/rank-" + std::to_string(k) + ".ptrace";
    ASSERT_TRUE(
        WaitFor([&] { return SizeOf(sessions[0] + name) == SizeOf(dir.File("run") + name); }, 30));
    EXPECT_TRUE(ReadFile(sessions[0] + name) == ReadFile(dir.File("run") + name)) << k;
  }
  auto a = Parmon({"report", sessions[0]});
  auto b = Parmon({"report", dir.File("run")});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(Replace(a.out, sessions[0], "X"), Replace(b.out, dir.File("run"), "X"));
  // A consumer fetches the per-rank session as a directory of rank files.
  std::string session = std::filesystem::path(sessions[0]).filename().string();
  auto fetched = live::FetchSession(c.Addr(), session, dir.File("fetched"), false);
  ASSERT_TRUE(fetched.ok()) << fetched.status().message();
  EXPECT_TRUE(fetched->per_rank);
  EXPECT_TRUE(fetched->complete);
  EXPECT_TRUE(ReadFile(dir.File("fetched/rank-2.ptrace")) ==
              ReadFile(dir.File("run/rank-2.ptrace")));
  // The collector's analysis of the per-rank session (its ranks assembled under the job's name):
  // once every rank has ended, its snapshot is the report of the stored directory.
  auto client = live::SnapshotClient::Open(c.Addr());
  ASSERT_TRUE(client.ok()) << client.status().message();
  auto snap = (*client)->Ask(session, "text");
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  EXPECT_TRUE(snap->ended) << snap->meta;
  EXPECT_EQ(snap->body, a.out);
}

}  // namespace
}  // namespace parmon

namespace parmon {
namespace {

// The live consumers on a session held by the collector (HOST:PORT/SESSION): `parmon top` and
// `parmon report --follow`, both started before the recorder, follow the collector's copy as it
// grows; top shows the ring example's finding and the followed report's last one equals the
// report of the recorder's local copy.
TEST(LiveE2e, TopAndReportFollowASessionOnTheCollector) {
  TempDir dir;
  Collector c(dir.File("store"), dir.File("serve.log"));
  ASSERT_GT(c.port(), 0) << c.Log();
  const std::string remote = c.Addr() + "/ring";
  Process top({ParmonBin(), "top", "--batch", "--period", "200ms", remote}, dir.File("top.out"),
              dir.File("top.err"));
  Process follow({ParmonBin(), "report", "--follow", "--period", "200ms", remote},
                 dir.File("follow.out"), dir.File("follow.err"));
  auto rec = Record(dir, "rec", remote, {BinDir() + "/ring_search_pipes"},
                    {"-o", dir.File("local.ptrace")});
  ASSERT_EQ(rec->Wait(120), 0) << rec->Err();
  ASSERT_EQ(follow.Wait(120), 0) << follow.Err();
  ASSERT_EQ(top.Wait(120), 0) << top.Err();
  const std::string top_out = ReadFile(dir.File("top.out"));
  EXPECT_NE(top_out.find("[serialised-cycle]"), std::string::npos) << top_out;
  const std::string followed = ReadFile(dir.File("follow.out"));
  const std::string end_line = ": the recording has ended ===\n";
  const size_t at = followed.rfind(end_line);
  ASSERT_NE(at, std::string::npos) << followed.substr(0, 2000) << ReadFile(dir.File("follow.err"));
  auto post = Parmon({"report", dir.File("local.ptrace")});
  ASSERT_EQ(post.exit_code, 0) << post.err;
  // The reports name their input: the followed one the collector's stored file (its live
  // analysis answers `report --follow`), or a temporary copy of it (PARMON_FOLLOW_LOCAL).
  std::string last =
      Replace(followed.substr(at + end_line.size()), dir.File("store/ring.ptrace"), "TRACE");
  const std::string tmp_prefix = "/parmon-follow-";
  std::string local = Replace(post.out, dir.File("local.ptrace"), "TRACE");
  for (size_t p = last.find(tmp_prefix); p != std::string::npos; p = last.find(tmp_prefix)) {
    size_t b = last.rfind(' ', p) + 1, e = last.find("session.ptrace", p);
    ASSERT_NE(e, std::string::npos);
    last.replace(b, e + 14 - b, "TRACE");
  }
  EXPECT_EQ(last, local);
  EXPECT_NE(local.find("one item at a time"), std::string::npos) << local;
}

// The demo's example (scripts/demo.sh: the slow ring farm under mpirun, one recorder) streamed to
// the collector: `parmon top` on the collector's session shows the serialised ring while the
// program still runs, and the stored session reports as the recorder's local copy does.
TEST(LiveE2e, DemoRingStreamedToTheCollectorShowsItsFindingWhileItRuns) {
  if (access((BinDir() + "/ring_search").c_str(), X_OK) != 0 || access("/usr/bin/mpirun", X_OK))
    GTEST_SKIP() << "no MPI example or mpirun";
  TempDir dir;
  Collector c(dir.File("store"), dir.File("serve.log"));
  ASSERT_GT(c.port(), 0) << c.Log();
  const std::string remote = c.Addr() + "/demo";
  Process top({ParmonBin(), "top", "--batch", "--period", "200ms", remote}, dir.File("top.out"),
              dir.File("top.err"));
  auto rec =
      Record(dir, "rec", remote,
             {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4",
              BinDir() + "/ring_search", "--form", "slow", "--words", "3000", "--db-kb", "256"},
             {"-o", dir.File("local.ptrace")});
  ASSERT_EQ(rec->Wait(300), 0) << rec->Err();
  ASSERT_EQ(top.Wait(120), 0) << top.Err();
  // Screens are separated by their title line; the ones taken while recording say so.
  const std::string out = ReadFile(dir.File("top.out"));
  bool live_finding = false;
  for (size_t at = out.find(" parmon top "); at != std::string::npos;) {
    const size_t next = out.find(" parmon top ", at + 1);
    const std::string screen = out.substr(at, next == std::string::npos ? next : next - at);
    const std::string title = screen.substr(0, screen.find('\n'));
    if (title.find(" recording ") != std::string::npos &&
        screen.find("[serialised-cycle]") != std::string::npos)
      live_finding = true;
    at = next;
  }
  EXPECT_TRUE(live_finding) << out.substr(0, 4000);
  ExpectSameSession(dir.File("store/demo.ptrace"), dir.File("local.ptrace"));
}

// `parmon ctl HOST:PORT SESSION pause|resume` through the collector reaches the recorder (and
// through the segment, the program's runtime): the stored session has one pause, as long as the
// test held it (within the time the commands took), nothing lost; a bad command is one sentence.
TEST(LiveE2e, CtlThroughTheCollectorPausesTheRecording) {
  TempDir dir;
  Collector c(dir.File("store"), dir.File("serve.log"));
  ASSERT_GT(c.port(), 0) << c.Log();
  auto rec =
      Record(dir, "rec", c.Addr() + "/steer", {BinDir() + "/duty_cycle", "--seconds", "4", "basic"},
             {"-o", dir.File("local.ptrace")});
  ASSERT_TRUE(WaitFor([&] { return SizeOf(dir.File("store/steer.ptrace")) > 1000; }, 60));
  const auto t0 = std::chrono::steady_clock::now();
  auto paused = Parmon({"ctl", c.Addr(), "steer", "pause"});
  const auto t1 = std::chrono::steady_clock::now();
  ASSERT_EQ(paused.exit_code, 0) << paused.err;
  EXPECT_NE(paused.out.find("ok: paused"), std::string::npos) << paused.out;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto t2 = std::chrono::steady_clock::now();
  auto resumed = Parmon({"ctl", c.Addr(), "steer", "resume"});
  const auto t3 = std::chrono::steady_clock::now();
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  auto bad = Parmon({"ctl", c.Addr(), "steer", "frobnicate"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("unknown command"), std::string::npos) << bad.err;
  ASSERT_EQ(rec->Wait(120), 0) << rec->Err();
  ExpectSameSession(dir.File("store/steer.ptrace"), dir.File("local.ptrace"));
  auto json = Parmon({"report", "--format", "json", dir.File("store/steer.ptrace")});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j["summary"]["pauses"].get<int>(), 1) << json.out.substr(0, 2000);
  // The pause began inside the first command's round trip and ended inside the second's.
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  const double paused_ms = j["summary"]["paused_ns"].get<double>() / 1e6;
  EXPECT_GE(paused_ms, ms(t2 - t1)) << paused_ms;
  EXPECT_LE(paused_ms, ms(t3 - t0)) << paused_ms;
  EXPECT_EQ(j["summary"]["lost_events"].get<uint64_t>(), 0u);
}

}  // namespace
}  // namespace parmon
