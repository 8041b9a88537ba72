// `parmon view` end to end over real sockets on 127.0.0.1: a trace built here (known content) is
// served by the parmon binary; the test checks the API's answers, then what a hostile or broken
// client gets (oversized header and body, other methods, garbage, bad parameters, unknown paths,
// more connections than the server takes, a client that sends half a request) — a 4xx with one
// sentence each, and the server still answering afterwards — and that SIGTERM ends it with 0.
// With --progressive on, the answers end byte for byte as those of an index built before serving,
// and damage found behind the coarse level is one sentence and exit status 1.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <fstream>

#include "format/reader.h"
#include "live/live_support.h"
#include "report/trace_builder.h"
#include "support/e2e.h"
#include "web/http_client.h"

namespace parmon::testing {
namespace {

using format::Kind;
using nlohmann::json;

// Two threads of one process, each with a region, and a sampled state split.
void BuildTrace(const std::string& path) {
  TraceBuilder b(path);
  b.Session({{"command", "t"}, {"start_ts", std::to_string(kT0)}});
  b.String(10, format::StringCategory::kRegion, "work");
  b.Process(100, 1, "t");
  for (uint32_t loc : {1u, 2u}) {
    b.Thread(loc, 100, 99 + loc, "t");
    b.Ev(loc, loc * kMs, Kind::kRegionEnter, {10});
    b.Ev(loc, 8 * kMs, Kind::kRegionLeave, {10});
    b.Ev(loc, 10 * kMs, Kind::kThreadStates, {7 * kMs, 3 * kMs, 0, 0, 0, 0, 0, 0}, "",
         format::Source::kSampler);
  }
  ASSERT_TRUE(b.Finish({{"end_ts", std::to_string(kT0 + 10 * kMs)}}));
}

// The answer is a JSON error of one sentence.
void ExpectSentence(const Reply& r, int status, const std::string& what) {
  EXPECT_EQ(r.status, status) << what << ": " << r.body;
  auto j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("error")) << what << ": " << r.body;
  const std::string e = j["error"];
  EXPECT_TRUE(!e.empty() && e.back() == '.' && e.find(". ") == std::string::npos)
      << what << ": " << e;
}

class ViewHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);  // the server may close before reading all of a refused request
    trace_ = dir_.path() + "/t.ptrace";
    BuildTrace(trace_);
    proc_ = std::make_unique<Process>(
        std::vector<std::string>{ParmonBin(), "view", trace_, "--port", "0"}, dir_.path() + "/out",
        dir_.path() + "/err");
    ASSERT_TRUE(WaitFor(
        [&] { return proc_->Out().find('\n') != std::string::npos || !proc_->Running(); }, 120))
        << proc_->Err();
    const std::string out = proc_->Out();
    const std::string prefix = "parmon view: http://127.0.0.1:";
    ASSERT_EQ(out.rfind(prefix, 0), 0u) << out << proc_->Err();
    port_ = std::stoi(out.substr(prefix.size()));
  }

  TempDir dir_;
  std::string trace_;
  std::unique_ptr<Process> proc_;
  int port_ = 0;
};

TEST_F(ViewHttpTest, AnswersTheApiAndRefusesWhatItShould) {
  Reply s = Get(port_, "/api/session");
  ASSERT_EQ(s.status, 200) << s.body;
  json session = json::parse(s.body);
  ASSERT_EQ(session["rows"].size(), 2u);
  EXPECT_EQ(session["end"], 10 * kMs);
  Reply t = Get(port_, "/api/timeline?t0=0&t1=10000000&px=5&rows=1");
  ASSERT_EQ(t.status, 200) << t.body;
  json tl = json::parse(t.body);
  // One run of running-dominated buckets: 7 ms running and 3 ms queued.
  EXPECT_EQ(tl["rows"][0]["states"], json::parse("[[0,10000000,0,[7000000,3000000,0,0,0,0,0]]]"));
  EXPECT_EQ(tl["rows"][0]["slices"].size(), 1u);
  EXPECT_EQ(Get(port_, "/").status, 200);

  ExpectSentence(Get(port_, "/api/timeline?t0=9&t1=3"), 400, "t0 > t1");
  ExpectSentence(Get(port_, "/api/timeline?px=100000"), 400, "px too large");
  ExpectSentence(Get(port_, "/api/timeline?rows=7"), 400, "unknown row");
  ExpectSentence(Get(port_, "/api/timeline?t0=%00%ff"), 400, "bytes in a number");
  ExpectSentence(Get(port_, "/api/nothing"), 404, "unknown query");
  ExpectSentence(Get(port_, "/etc/passwd"), 404, "unknown file");
  ExpectSentence(
      Send(port_, "GET /api/session HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n"), 431,
      "huge header");
  ExpectSentence(Send(port_, "POST /api/session HTTP/1.1\r\nContent-Length: 5000000\r\n\r\n" +
                                 std::string(100000, 'x')),
                 413, "huge body");
  ExpectSentence(Send(port_,
                      "GET /api/session HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "100000\r\n" +
                          std::string(70000, 'x')),
                 413, "huge chunked body");
  ExpectSentence(Send(port_, "DELETE /api/session HTTP/1.1\r\nConnection: close\r\n\r\n"), 405,
                 "other method");
  ExpectSentence(Send(port_, "\x16\x03\x01 garbage\r\n\r\n"), 400, "not HTTP");
  // Still answering.
  EXPECT_EQ(Get(port_, "/api/findings").status, 200);
}

TEST_F(ViewHttpTest, ManyConnectionsAndHalfRequestsDoNotStopIt) {
  // More idle connections than the server takes (128): the extra ones are answered 503.
  std::vector<int> fds;
  for (int i = 0; i < 200; ++i) {
    int fd = ConnectTo(port_);
    if (fd >= 0)
      fds.push_back(fd);
  }
  ASSERT_GT(fds.size(), 150u);
  int refused = 0;
  for (size_t i = 128; i < fds.size(); ++i) {
    char buf[512];
    pollfd p{fds[i], POLLIN, 0};
    if (poll(&p, 1, 20000) > 0 && read(fds[i], buf, sizeof buf) > 12 &&
        std::string(buf, 12) == "HTTP/1.1 503")
      ++refused;
  }
  EXPECT_GT(refused, 0);
  // Half a request on the rest; then they are all closed and the server answers again.
  for (size_t i = 0; i < 128 && i < fds.size(); ++i)
    ASSERT_GT(write(fds[i], "GET /api/ses", 12), 0);
  for (int fd : fds)
    close(fd);
  EXPECT_TRUE(WaitFor([&] { return Get(port_, "/api/session").status == 200; }, 60));
  proc_->Kill(SIGTERM);
  EXPECT_EQ(proc_->Wait(60), 0) << proc_->Err();
}

TEST(ViewCli, BadInputIsOneSentence) {
  TempDir dir;
  const std::string bad = dir.path() + "/bad.ptrace";
  {
    FILE* f = fopen(bad.c_str(), "w");
    fputs("not a trace", f);
    fclose(f);
  }
  RunResult r = Parmon({"view", bad, "--exit-after", "1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.rfind("parmon view: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  RunResult missing = Parmon({"view", dir.path() + "/none.ptrace"});
  EXPECT_NE(missing.exit_code, 0);
  RunResult port = Parmon({"view", bad, "--port", "99999"});
  EXPECT_EQ(port.exit_code, 2) << port.err;
}

// --progressive on (web/progressive_view.h): once its /api/session has no "live" object, every
// answer is byte for byte that of --progressive off; until then every answer says it is coarse.
TEST(ViewCli, ProgressiveEndsWithTheAnswersOfTheIndexBuiltBeforeServing) {
  TempDir dir;
  const std::string trace = dir.path() + "/t.ptrace";
  BuildTrace(trace);
  View on_view = StartView(dir, "on", {"view", trace, "--port", "0", "--progressive", "on"});
  View off_view = StartView(dir, "off", {"view", trace, "--port", "0", "--progressive", "off"});
  auto& on = on_view.proc;
  auto& off = off_view.proc;
  const int on_port = on_view.port, off_port = off_view.port;
  ASSERT_NE(on_port, 0) << on->Err();
  ASSERT_NE(off_port, 0) << off->Err();
  Reply session;
  ASSERT_TRUE(WaitFor(
      [&] {
        session = Get(on_port, "/api/session");
        if (session.body.find("\"live\"") != std::string::npos) {
          EXPECT_NE(session.body.find("\"state\":\"indexing\""), std::string::npos);
          EXPECT_EQ(Get(on_port, "/api/timeline?px=10").body.rfind("{\"complete\":false,", 0), 0u);
        }
        return session.status == 200 && session.body.find("\"live\"") == std::string::npos;
      },
      60));
  for (const char* t :
       {"/api/session", "/api/timeline?px=10", "/api/timeline?t0=1000&t1=9000000&px=77",
        "/api/cpus?px=5", "/api/messages", "/api/findings", "/api/matrix", "/api/graph?steps=3",
        "/api/data", "/api/timeline?t0=9&t1=3"}) {
    const Reply a = Get(on_port, t), b = Get(off_port, t);
    EXPECT_EQ(a.status, b.status) << t;
    EXPECT_EQ(a.body, b.body) << t;
  }
  EXPECT_NE(on->Err().find("coarse level (sampler streams) ready"), std::string::npos) << on->Err();
  on->Kill(SIGTERM);
  off->Kill(SIGTERM);
  EXPECT_EQ(on->Wait(60), 0) << on->Err();
  EXPECT_EQ(off->Wait(60), 0) << off->Err();
}

// A payload damaged where the open does not look (its checksum is checked as it is read): the
// coarse level is served, the complete one finds the damage, says it in one sentence and exits 1.
TEST(ViewCli, ProgressiveDamageFoundBehindTheCoarseLevelIsOneSentence) {
  TempDir dir;
  const std::string trace = dir.path() + "/t.ptrace";
  BuildTrace(trace);
  uint64_t at = 0;
  {
    auto reader = format::TraceReader::Open(trace);
    ASSERT_TRUE(reader.ok());
    for (const format::Stream& st : (*reader)->streams())
      if (st.source == format::Source::kRuntime && !st.chunks.empty())
        at = st.chunks.front().offset + sizeof(format::ChunkHeader) +
             st.chunks.front().header.stored_size / 2;
  }
  ASSERT_GT(at, 0u);
  {
    std::fstream f(trace, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(at));
    f.put(static_cast<char>(c ^ 0x5a));
  }
  RunResult r = Parmon({"view", trace, "--progressive", "on", "--port", "0"}, 60);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("parmon view: coarse level (sampler streams) ready", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("parmon view: " + trace + " is damaged"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.back(), '\n');
  // The sentence is the last line, and there is one of it.
  EXPECT_EQ(r.err.find("is damaged"), r.err.rfind("is damaged")) << r.err;
}

}  // namespace
}  // namespace parmon::testing
