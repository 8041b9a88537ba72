// parmon_matrix end to end (include/parmon/parmon.h, docs/events.md MatrixData): the programs
// tests/programs/matrix_api (C, C++) and matrix_api_f (Fortran) record matrices of every element
// type and layout whose values they know by construction; run plainly every call is a no-op
// (PARMON_E_INACTIVE) and the bad ones say why; under `parmon record` the trace holds every step
// whole, with its shape, layout, step number and values, a large matrix cut into 32 KiB parts
// of one time, and `parmon info` lists the names.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/matrix.h"
#include "format/reader.h"
#include "model/merge.h"
#include "model/session.h"
#include "parmon/parmon.h"
#include "support/e2e.h"

namespace parmon {
namespace {

using testing::BinDir;
using testing::Parmon;
using testing::TempDir;

struct Step {
  format::ElemType type;
  bool column_major;
  uint32_t rows, cols;
  std::vector<double> values;   // in storage order
  std::vector<uint64_t> times;  // of its parts
  uint64_t filled = 0;
};
using Steps = std::map<std::pair<std::string, uint64_t>, Step>;  // (name, step)

Steps ReadSteps(const std::string& trace) {
  Steps steps;
  auto reader = format::TraceReader::Open(trace);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  if (!reader.ok())
    return steps;
  auto session = model::Session::Over(**reader);
  EXPECT_TRUE(session.ok());
  model::Merge merge(**session);
  format::Event e;
  while (merge.Next(&e)) {
    if (e.kind_enum() != format::Kind::kMatrixData)
      continue;
    auto p = format::DecodeMatrixPart(e);
    EXPECT_TRUE(p.ok()) << p.status().message();
    if (!p.ok())
      continue;
    Step& s = steps[{(*reader)->definitions().Name(p->matrix), p->step}];
    s.type = p->type;
    s.column_major = p->column_major;
    s.rows = p->rows;
    s.cols = p->cols;
    s.values.resize(p->total());
    for (uint64_t i = 0; i < p->count(); ++i)
      s.values[p->offset + i] = p->At(i);
    s.filled += p->count();
    s.times.push_back(e.ts);
  }
  return steps;
}

TEST(MatrixApi, PlainRunIsANoOpAndBadCallsSayWhy) {
  auto r = testing::Run({BinDir() + "/matrix_api"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Good calls: PARMON_E_INACTIVE (1); bad type, zero rows, null data: PARMON_E_INVALID (4);
  // 32 GiB: PARMON_E_TOO_LARGE (2); a vector of the wrong size: PARMON_E_INVALID.
  EXPECT_EQ(r.out, "rc 1 1 1 1 1 1 4 4 4 2 4\n");
}

TEST(MatrixApi, EveryTypeAndLayoutIsRecordedWhole) {
  TempDir dir;
  const std::string trace = dir.File("m.ptrace");
  auto r = Parmon({"record", "-q", "-o", trace, "--", BinDir() + "/matrix_api"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "rc 0 0 0 0 0 0 4 4 4 2 4\n");
  Steps steps = ReadSteps(trace);
  ASSERT_EQ(steps.size(), 6u);  // d twice, f, i32, i64, big
  for (uint64_t k : {0, 1}) {
    const Step& d = steps.at({"d", k});
    EXPECT_EQ(d.type, format::ElemType::kDouble);
    EXPECT_FALSE(d.column_major);
    ASSERT_EQ(d.rows * d.cols, 15u);
    EXPECT_EQ(d.cols, 5u);
    for (int i = 0; i < 15; ++i)
      EXPECT_EQ(d.values[i], 0.5 * i - 3 + 100.0 * k) << i;
  }
  EXPECT_LT(steps.at({"d", 0}).times[0], steps.at({"d", 1}).times[0]);
  const Step& f = steps.at({"f", 0});
  EXPECT_EQ(f.type, format::ElemType::kFloat);
  EXPECT_TRUE(f.column_major);
  EXPECT_EQ(f.values, (std::vector<double>{0, 1, -2, -1}));
  const Step& i32 = steps.at({"i32", 0});
  EXPECT_EQ(i32.type, format::ElemType::kInt32);
  EXPECT_EQ(i32.rows, 4u);
  EXPECT_EQ(i32.values[11], -11);
  const Step& i64 = steps.at({"i64", 0});
  EXPECT_EQ(i64.type, format::ElemType::kInt64);
  EXPECT_EQ(i64.values, (std::vector<double>{1099511627776.0, -7}));
  const Step& big = steps.at({"big", 0});
  EXPECT_EQ(big.filled, 90000u);
  EXPECT_EQ(big.times.size(), 22u);  // 720,000 bytes in parts of 32 KiB
  for (uint64_t t : big.times)
    EXPECT_EQ(t, big.times[0]);  // one call: one time
  bool exact = true;
  for (size_t i = 0; i < big.values.size(); ++i)
    exact = exact && big.values[i] == static_cast<double>(i);
  EXPECT_TRUE(exact);

  auto info = Parmon({"info", "--json", trace});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  auto j = nlohmann::json::parse(info.out);
  std::vector<std::string> names = j["matrices"];
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"big", "d", "f", "i32", "i64"}));
  auto dump = Parmon({"dump", trace});
  EXPECT_NE(dump.out.find("MatrixData d double 3x5 row-major step 1 elements 0..14 of 15: 97 97.5"),
            std::string::npos)
      << dump.out.substr(0, 2000);
}

TEST(MatrixApi, FortranArraysAreRecordedColumnMajor) {
  const std::string prog = BinDir() + "/matrix_api_f";
  if (!testing::Exists(prog))
    GTEST_SKIP() << "no Fortran compiler: matrix_api_f was not built";
  TempDir dir;
  const std::string trace = dir.File("f.ptrace");
  auto r = Parmon({"record", "-q", "-o", trace, "--", prog});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("rc 0 0"), std::string::npos) << r.out;
  Steps steps = ReadSteps(trace);
  const Step& a = steps.at({"fa", 0});
  EXPECT_EQ(a.type, format::ElemType::kInt32);
  EXPECT_TRUE(a.column_major);
  ASSERT_EQ(a.rows, 3u);
  ASSERT_EQ(a.cols, 4u);
  for (uint32_t i = 0; i < 3; ++i)
    for (uint32_t k = 0; k < 4; ++k)  // a(i+1, k+1) = 10 (i+1) + k+1, at k * rows + i
      EXPECT_EQ(a.values[k * 3 + i], 10.0 * (i + 1) + (k + 1)) << i << "," << k;
  const Step& rr = steps.at({"fr", 0});
  EXPECT_EQ(rr.type, format::ElemType::kDouble);
  ASSERT_EQ(rr.rows, 2u);
  for (uint32_t i = 0; i < 2; ++i)
    for (uint32_t k = 0; k < 3; ++k)
      EXPECT_EQ(rr.values[k * 2 + i], (i + 1) + 0.5 * (k + 1));
}

}  // namespace
}  // namespace parmon
