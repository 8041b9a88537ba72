// LiveTrace on a file that grows under it: a recorded trace (the fuzz seed pipeline.ptrace) is
// written out in two parts, cut inside a chunk; the follower sees the first part, not ended, and
// once the rest is appended the finished trace, whose analysis is the post-mortem one. A trace
// whose writer goes without closing it ends the follow (abandoned) instead of waiting forever.
#include "live_view/follow.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "analysis/views.h"

namespace parmon::live_view {
namespace {

std::vector<char> Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void Spit(const std::string& path, const char* data, size_t n, bool append) {
  std::ofstream out(path, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  out.write(data, static_cast<std::streamsize>(n));
}

struct TempFile {
  std::string path;
  TempFile() {
    char tmpl[] = "/tmp/parmon-follow-test-XXXXXX";
    int fd = mkstemp(tmpl);
    close(fd);
    path = tmpl;
  }
  ~TempFile() { unlink(path.c_str()); }
};

const std::string kSeed = std::string(PARMON_SOURCE_DIR) + "/fuzz/corpus/trace/pipeline.ptrace";

TEST(LiveTrace, FollowsAGrowingFileToThePostMortemAnalysis) {
  const std::vector<char> data = Slurp(kSeed);
  ASSERT_GT(data.size(), 4096u) << kSeed;
  TempFile f;
  const size_t cut = data.size() / 2 + 37;  // inside some chunk
  Spit(f.path, data.data(), cut, false);
  auto live = LiveTrace::Follow(f.path);
  ASSERT_TRUE(live.ok()) << live.status().message();
  EXPECT_FALSE((*live)->finished());
  EXPECT_FALSE((*live)->ended());
  const uint64_t events_before = (*live)->reader().total_events();
  EXPECT_GT(events_before, 0u);
  Spit(f.path, data.data() + cut, data.size() - cut, true);
  ASSERT_TRUE((*live)->Refresh().ok());
  EXPECT_TRUE((*live)->finished());
  EXPECT_TRUE((*live)->ended());
  EXPECT_FALSE((*live)->abandoned());
  EXPECT_EQ((*live)->complete(), UINT64_MAX);
  EXPECT_GT((*live)->reader().total_events(), events_before);
  // The analysis of the followed trace is the analysis of the file read at once.
  analysis::Options options;
  auto followed = (*live)->Analyze(options);
  ASSERT_TRUE(followed.ok()) << followed.status().message();
  auto whole = model::Session::Open(kSeed);
  ASSERT_TRUE(whole.ok());
  auto post = analysis::Analyze(**whole, options);
  ASSERT_TRUE(post.ok());
  auto without_file = [](analysis::Results r) {
    r.summary.file.clear();
    return analysis::ToJson(r).dump();
  };
  EXPECT_EQ(without_file(*followed), without_file(*post));
}

TEST(LiveTrace, AWriterGoneWithoutClosingEndsTheFollow) {
  const std::vector<char> data = Slurp(kSeed);
  TempFile f;
  Spit(f.path, data.data(), data.size() / 2, false);
  bool gone = false;
  LiveSource source;
  source.path = f.path;
  source.writer_gone = [&gone] { return gone; };
  auto live = LiveTrace::Open(source);
  ASSERT_TRUE(live.ok()) << live.status().message();
  ASSERT_TRUE((*live)->Refresh().ok());
  EXPECT_FALSE((*live)->ended());
  gone = true;
  ASSERT_TRUE((*live)->Refresh().ok());
  EXPECT_TRUE((*live)->abandoned());
  EXPECT_TRUE((*live)->ended());
  EXPECT_FALSE((*live)->finished());
}

TEST(LiveTrace, WaitsForAFileThatIsNotWrittenYetUntilItsWriterIsGone) {
  TempFile f;
  unlink(f.path.c_str());
  int asked = 0;
  LiveSource source;
  source.path = f.path;
  source.writer_gone = [&asked] { return ++asked >= 3; };  // gone at the third look
  auto live = LiveTrace::Open(source);
  ASSERT_FALSE(live.ok());
  EXPECT_NE(live.status().message().find("was never written"), std::string::npos)
      << live.status().message();
  EXPECT_EQ(asked, 3);
  EXPECT_FALSE(ResolveLiveSource("-").ok());  // standard input cannot be followed
}

}  // namespace
}  // namespace parmon::live_view
