#include "format/matrix.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace parmon::format {
namespace {

// An event as the runtime writes it: args from MatrixArgs, the elements as the payload.
template <typename T>
Event Part(const std::vector<T>& elements,
           ElemType type,
           uint32_t rows,
           uint32_t cols,
           uint64_t step,
           uint64_t offset,
           std::string* storage,
           uint64_t layout = 0) {
  storage->assign(reinterpret_cast<const char*>(elements.data()), elements.size() * sizeof(T));
  Event e;
  e.kind = static_cast<uint16_t>(Kind::kMatrixData);
  e.nargs = kMatrixArgs;
  MatrixArgs(e.args, 7, static_cast<uint64_t>(type) | layout, rows, cols, step, offset);
  e.payload = *storage;
  return e;
}

TEST(MatrixFormat, EveryTypeDecodesToItsValues) {
  std::string s;
  auto d = DecodeMatrixPart(Part<double>({1.5, -2.25, 1e300}, ElemType::kDouble, 1, 3, 4, 0, &s));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->matrix, 7u);
  EXPECT_EQ(d->rows, 1u);
  EXPECT_EQ(d->cols, 3u);
  EXPECT_EQ(d->step, 4u);
  EXPECT_EQ(d->count(), 3u);
  EXPECT_FALSE(d->column_major);
  EXPECT_EQ(d->At(0), 1.5);
  EXPECT_EQ(d->At(1), -2.25);
  EXPECT_EQ(d->At(2), 1e300);

  auto f = DecodeMatrixPart(Part<float>({0.5f, 3.0f}, ElemType::kFloat, 2, 2, 0, 2, &s));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->offset, 2u);
  EXPECT_EQ(f->At(1), 3.0);

  auto i = DecodeMatrixPart(
      Part<int32_t>({-7, 2147483647}, ElemType::kInt32, 2, 1, 9, 0, &s, kColumnMajor));
  ASSERT_TRUE(i.ok()) << i.status().message();
  EXPECT_TRUE(i->column_major);
  EXPECT_EQ(i->At(0), -7);
  EXPECT_EQ(i->At(1), 2147483647.0);

  auto l = DecodeMatrixPart(Part<int64_t>({-(int64_t{1} << 40)}, ElemType::kInt64, 1, 1, 0, 0, &s));
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->At(0), -1099511627776.0);
  EXPECT_EQ(DescribeMatrixPart(*l, "m"),
            "m int64 1x1 row-major step 0 elements 0..0 of 1: -1.09951e+12");
}

// Each crafted event is refused with one sentence, never read past its payload.
TEST(MatrixFormat, CraftedEventsAreRefusedWithOneSentence) {
  std::string s;
  const std::vector<double> two = {1, 2};
  struct Case {
    const char* what;
    std::function<void(Event&)> mangle;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"wrong kind", [](Event& e) { e.kind = static_cast<uint16_t>(Kind::kTraceData); },
       "not a MatrixData"},
      {"too few args", [](Event& e) { e.nargs = 5; }, "has 5 args, not 6"},
      {"unknown type", [](Event& e) { e.args[1] = 9; }, "not a type"},
      {"stray flag bits", [](Event& e) { e.args[1] |= 0x400; }, "not a type"},
      {"zero rows", [](Event& e) { e.args[2] = 0; }, "matrix 7 of 0 x 2"},
      {"rows over 32 bits", [](Event& e) { e.args[2] = uint64_t{1} << 33; }, "elements"},
      {"oversized", [](Event& e) { e.args[2] = e.args[3] = 1 << 20; }, "over 268435456 bytes"},
      {"truncated element", [](Event& e) { e.payload = e.payload.substr(0, 12); },
       "not a whole number of 8-byte elements"},
      {"empty payload", [](Event& e) { e.payload = {}; }, "carries 0 bytes"},
      {"past the end", [](Event& e) { e.args[5] = 1; }, "elements 1..2 run past the end"},
      {"offset far beyond", [](Event& e) { e.args[5] = UINT64_MAX; }, "run past the end"},
  };
  for (const Case& c : cases) {
    Event e = Part<double>(two, ElemType::kDouble, 1, 2, 0, 0, &s);
    c.mangle(e);
    auto d = DecodeMatrixPart(e);
    ASSERT_FALSE(d.ok()) << c.what;
    const std::string& m = d.status().message();
    EXPECT_NE(m.find(c.expect), std::string::npos) << c.what << ": " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << c.what;
  }
}

}  // namespace
}  // namespace parmon::format
