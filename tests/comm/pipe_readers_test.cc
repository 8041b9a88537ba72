// End-to-end test of a pipe with several readers (a pool fed through one pipe): the report
// credits each reader with the bytes it read, as each reader counted them itself, and no
// finding names one reader as the bottleneck of the others' work.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <sstream>
#include <string>

#include "support/e2e.h"

namespace parmon::testing {
namespace {

TEST(CommPosix, EachReaderOfOnePipeIsCreditedWithWhatItRead) {
  TempDir dir;
  const std::string trace = dir.File("t.ptrace");
  auto r = Parmon({"record", "-q", "-o", trace, "--", BinDir() + "/pipe_readers", "3"}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The oracle: "reader PID BYTES" per reader, "writer PID BYTES".
  std::map<uint32_t, uint64_t> readers;
  uint32_t writer = 0;
  uint64_t written = 0;
  std::istringstream in(r.out);
  std::string role;
  uint32_t pid;
  uint64_t bytes;
  while (in >> role >> pid >> bytes) {
    if (role == "reader") {
      readers[pid] = bytes;
    } else {
      writer = pid;
      written = bytes;
    }
  }
  ASSERT_EQ(readers.size(), 3u) << r.out;
  ASSERT_EQ(written, 3u << 20);

  auto rep = Parmon({"report", "--format", "json", trace});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  auto j = nlohmann::json::parse(rep.out, nullptr, false);
  ASSERT_TRUE(j.is_object());
  std::map<int64_t, uint32_t> tid_of;  // location id -> tid
  std::map<uint32_t, std::string> label_of;
  for (const auto& l : j["locations"]) {
    tid_of[l["id"].get<int64_t>()] = l["tid"].get<uint32_t>();
    label_of[l["tid"].get<uint32_t>()] = l["label"].get<std::string>();
  }
  std::map<uint32_t, uint64_t> credited;  // reader tid -> bytes on links from the writer
  for (const auto& k : j["links"]) {
    if (k["kind"] != "channel" || tid_of[k["from"].get<int64_t>()] != writer)
      continue;
    credited[tid_of[k["to"].get<int64_t>()]] += k["bytes"].get<uint64_t>();
  }
  for (const auto& [reader, n] : readers) {
    EXPECT_GT(n, 0u) << "reader " << reader << " read nothing: the test shows nothing";
    EXPECT_EQ(credited[reader], n) << "reader " << reader;
  }
  // A finding may call the readers together the bottleneck, never one of them alone (the
  // writer, which does nothing but write, waits for them most of its run).
  int bottleneck_findings = 0;
  for (const auto& f : j["diagnosis"]) {
    const std::string text = f["text"].get<std::string>();
    if (text.find("bottleneck") == std::string::npos)
      continue;
    ++bottleneck_findings;
    int named = 0;
    for (const auto& [reader, n] : readers)
      named += text.find(label_of[reader]) != std::string::npos;
    EXPECT_EQ(named, 3) << text;
  }
  EXPECT_EQ(bottleneck_findings, 1) << rep.out;
}

}  // namespace
}  // namespace parmon::testing
