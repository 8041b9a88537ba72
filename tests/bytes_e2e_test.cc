// Names and arguments are bytes: a Latin-1 argument and a program whose file name is not UTF-8
// go through every output. JSON (info, report, diff, scale's input) stays well-formed and keeps
// each stray byte as `\xNN`; the HTML report embeds that JSON; text and CSV print what was there.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "support/e2e.h"

namespace parmon {
namespace {

using nlohmann::json;
using testing::Parmon;
using testing::TempDir;

TEST(BytesE2e, NonUtf8NamesAndArgumentsInEveryOutput) {
  TempDir dir;
  // A program called "ech\xE9" (a copy of /bin/echo) given a Latin-1 argument.
  const std::string program = dir.File("ech\xE9");
  std::filesystem::copy_file("/bin/echo", program);
  const std::string trace = dir.File("b.ptrace");
  auto rec = Parmon({"record", "-q", "-o", trace, "--", program, "caf\xE9"});
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  EXPECT_EQ(rec.out, "caf\xE9\n");  // the program itself saw its bytes

  auto info = Parmon({"info", "--json", trace});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  json j = json::parse(info.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << info.out;
  EXPECT_NE(info.out.find("caf\\\\xE9"), std::string::npos) << info.out;  // "\\xE9" in JSON

  auto report = Parmon({"report", "--format", "json", trace});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  j = json::parse(report.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_NE(report.out.find("ech\\\\xE9"), std::string::npos);

  auto html = Parmon({"report", "--format", "html", "-o", dir.File("r.html"), trace});
  ASSERT_EQ(html.exit_code, 0) << html.err;
  EXPECT_GT(std::filesystem::file_size(dir.File("r.html")), 1000u);

  auto diff = Parmon({"diff", "--format", "json", trace, trace});
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_FALSE(json::parse(diff.out, nullptr, false).is_discarded());

  for (const char* format : {"text", "csv"}) {
    auto out = Parmon({"report", "--format", format, trace});
    EXPECT_EQ(out.exit_code, 0) << format << ": " << out.err;
  }
  auto dump = Parmon({"dump", trace});
  EXPECT_EQ(dump.exit_code, 0) << dump.err;
}

}  // namespace
}  // namespace parmon
