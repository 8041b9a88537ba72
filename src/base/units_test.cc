// The command line's unit convention: binary sizes, ns..min durations, one sentence on bad input.
#include "base/units.h"

#include <gtest/gtest.h>

namespace parmon {
namespace {

uint64_t Size(const char* s) {
  auto v = ParseSize(s, "--buffer-size");
  EXPECT_TRUE(v.ok()) << s << ": " << v.status().message();
  return v.ok() ? *v : 0;
}

uint64_t Dur(const char* s) {
  auto v = ParseDuration(s, "--window");
  EXPECT_TRUE(v.ok()) << s << ": " << v.status().message();
  return v.ok() ? *v : 0;
}

TEST(Units, SizesAreBinaryWhateverTheSpelling) {
  EXPECT_EQ(Size("4096"), 4096u);
  EXPECT_EQ(Size("4096B"), 4096u);
  EXPECT_EQ(Size("64K"), 65536u);
  EXPECT_EQ(Size("64k"), 65536u);
  EXPECT_EQ(Size("64KB"), 65536u);
  EXPECT_EQ(Size("64KiB"), 65536u);
  EXPECT_EQ(Size("4M"), 4u << 20);
  EXPECT_EQ(Size("4MB"), 4u << 20);
  EXPECT_EQ(Size("4MiB"), 4u << 20);
  EXPECT_EQ(Size("1.5G"), 3ull << 29);
  EXPECT_EQ(Size("1GiB"), 1ull << 30);
}

TEST(Units, BadSizesSayWhy) {
  for (const char* bad : {"", "lots", "M", "4T", "-1", "4 M", "1.2.3K"}) {
    auto v = ParseSize(bad, "--buffer-size");
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_NE(v.status().message().find("--buffer-size"), std::string::npos);
  }
}

TEST(Units, Durations) {
  EXPECT_EQ(Dur("10ms"), 10'000'000u);
  EXPECT_EQ(Dur("500us"), 500'000u);
  EXPECT_EQ(Dur("250ns"), 250u);
  EXPECT_EQ(Dur("2.5s"), 2'500'000'000u);
  EXPECT_EQ(Dur("3"), 3'000'000'000u);
  EXPECT_EQ(Dur("1m"), 60'000'000'000u);
  EXPECT_EQ(Dur("2min"), 120'000'000'000u);
  EXPECT_EQ(Dur("10MS"), 10'000'000u);
  EXPECT_FALSE(ParseDuration("5h", "-t").ok());
  EXPECT_FALSE(ParseDuration("ms", "-t").ok());
}

TEST(Units, RangesRejectSillyValuesInOneSentence) {
  const uint64_t kMin = 64 << 10, kMax = 1ull << 30;
  for (const char* silly : {"0", "1", "100", "63K"}) {
    auto v = ParseSizeInRange(silly, "--buffer-size", kMin, kMax);
    ASSERT_FALSE(v.ok()) << silly;
    EXPECT_EQ(v.status().message(),
              std::string("--buffer-size '") + silly + "' is outside 64.0 KiB to 1.0 GiB");
  }
  EXPECT_EQ(*ParseSizeInRange("64K", "--buffer-size", kMin, kMax), kMin);
  EXPECT_FALSE(ParseDurationInRange("0", "--window", 1000, 1'000'000'000).ok());
  EXPECT_EQ(*ParseDurationInRange("1ms", "--window", 1000, 1'000'000'000), 1'000'000u);
}

TEST(Units, Formatting) {
  EXPECT_EQ(FormatBytes(100), "100 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(4u << 20), "4.0 MiB");
  EXPECT_EQ(FormatBytes(3ull << 30), "3.0 GiB");
  EXPECT_EQ(FormatDuration(250), "250 ns");
  EXPECT_EQ(FormatDuration(1'500'000), "1.5 ms");
  EXPECT_EQ(FormatDuration(2'000'000'000), "2 s");
  EXPECT_EQ(FormatDuration(60'000'000'000), "1 min");
  EXPECT_EQ(FormatCount(999), "999");
  EXPECT_EQ(FormatCount(1500), "1.5k");
  EXPECT_EQ(FormatCount(1'234'567), "1.2M");
}

}  // namespace
}  // namespace parmon

namespace parmon {
namespace {
TEST(Units, PluralIsSingularForOne) {
  EXPECT_EQ(Plural(1, "event"), "1 event");
  EXPECT_EQ(Plural(0, "event"), "0 events");
  EXPECT_EQ(Plural(2, "event"), "2 events");
  EXPECT_EQ(Plural(1, "process", "processes"), "1 process");
  EXPECT_EQ(Plural(5, "process", "processes"), "5 processes");
}
}  // namespace
}  // namespace parmon
