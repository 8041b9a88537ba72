// The data views of `parmon view` end to end (docs/http-api.md, /api/data): the Jacobi example
// recorded under `parmon record` with its matrix every sweep, served by the parmon binary, each
// step fetched over HTTP and compared with the program's own figures (the sum of every step's
// elements, its corners: the counts file's "matrix_steps"), and a downsampled answer against the
// full one; then a crafted trace (a part lost, parts that do not decode) through view, dump and
// info: the view says what is missing and unreadable, dump prints one sentence, nothing crashes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/matrix.h"
#include "live/live_support.h"
#include "report/trace_builder.h"
#include "support/e2e.h"
#include "web/http_client.h"

namespace parmon::testing {
namespace {

using format::Kind;
using nlohmann::json;

// A GET's answer with its body parsed (null when it is not JSON).
struct JsonReply {
  int status = 0;
  json body;
};
JsonReply GetJson(int port, const std::string& target) {
  const Reply r = testing::Get(port, target);
  return {r.status, json::parse(r.body, nullptr, false)};
}

void ExpectSentence(const JsonReply& r, const std::string& what, const std::string& part) {
  EXPECT_EQ(r.status, 400) << what << ": " << r.body;
  ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << what << ": " << r.body;
  const std::string e = r.body["error"];
  EXPECT_TRUE(!e.empty() && e.back() == '.' && e.find(". ") == std::string::npos) << what << e;
  EXPECT_NE(e.find(part), std::string::npos) << what << ": " << e;
}

// `parmon view TRACE --port 0`, its port once it prints its URL.
class Viewer {
 public:
  Viewer(const TempDir& dir, const std::string& trace)
      : proc_(std::vector<std::string>{ParmonBin(), "view", trace, "--port", "0"},
              dir.path() + "/view.out",
              dir.path() + "/view.err") {
    WaitFor([&] { return proc_.Out().find('\n') != std::string::npos || !proc_.Running(); }, 120);
    const std::string out = proc_.Out(), prefix = "parmon view: http://127.0.0.1:";
    if (out.rfind(prefix, 0) == 0)
      port_ = std::stoi(out.substr(prefix.size()));
  }
  ~Viewer() {
    proc_.Kill(SIGTERM);
    proc_.Wait(60);
  }
  int port() const { return port_; }
  std::string err() { return proc_.Err(); }

 private:
  Process proc_;
  int port_ = 0;
};

TEST(ViewData, JacobiMatrixEverySweepMatchesTheProgram) {
  const std::string jacobi = BinDir() + "/jacobi";
  if (!Exists(jacobi))
    GTEST_SKIP() << "the jacobi example is not built";
  signal(SIGPIPE, SIG_IGN);
  TempDir dir;
  const std::string trace = dir.File("jacobi.ptrace"), counts = dir.File("counts.json");
  constexpr int kN = 128;  // 128 x 128 doubles: 4 parts of 32 KiB per step
  RunResult rec = Parmon({"record", "-q", "-o", trace, "--", jacobi, "--n", std::to_string(kN),
                          "--threads", "2", "--counts", counts},
                         300);
  ASSERT_EQ(rec.exit_code, 0) << rec.out << rec.err;
  const json program = json::parse(ReadFile(counts));
  const json& oracle = program["results"]["matrix_steps"];
  ASSERT_EQ(oracle.size(), program["results"]["sweeps"].get<size_t>());
  ASSERT_GT(oracle.size(), 3u);

  Viewer viewer(dir, trace);
  ASSERT_GT(viewer.port(), 0) << viewer.err();
  const int port = viewer.port();
  JsonReply list = GetJson(port, "/api/data");
  ASSERT_EQ(list.status, 200) << list.body;
  ASSERT_EQ(list.body["matrices"].size(), 1u) << list.body;
  const json& m = list.body["matrices"][0];
  EXPECT_EQ(m["name"], "A");
  EXPECT_EQ(m["type"], "double");
  EXPECT_EQ(m["layout"], "row-major");
  EXPECT_EQ(m["rows"], kN);
  EXPECT_EQ(m["cols"], kN);
  EXPECT_EQ(m["label"].get<std::string>().rfind("jacobi-0", 0), 0u) << m["label"];  // "(tid)"
  EXPECT_EQ(m["incomplete_steps"], 0);
  EXPECT_EQ(list.body["unreadable_parts"], 0);
  ASSERT_EQ(m["steps"], oracle.size());
  uint64_t previous = 0;
  for (size_t k = 0; k < oracle.size(); ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(m["calls"][k], oracle[k]["step"]);
    const uint64_t t = m["times"][k];
    EXPECT_GT(t, previous);  // one step per sweep, in order
    previous = t;
    // At full resolution every block is one element: the values are the program's.
    JsonReply full = GetJson(port, "/api/data/step?matrix=0&step=" + std::to_string(k) +
                                       "&w=" + std::to_string(kN) + "&h=" + std::to_string(kN));
    ASSERT_EQ(full.status, 200) << full.body;
    ASSERT_EQ(full.body["block_rows"], 1);
    ASSERT_EQ(full.body["out_cols"], kN);
    EXPECT_FALSE(full.body.contains("min"));  // one element per block: the mean alone
    EXPECT_EQ(full.body["missing"], 0);
    EXPECT_TRUE(full.body["complete"].get<bool>());
    const json& v = full.body["mean"];
    ASSERT_EQ(v.size(), static_cast<size_t>(kN * kN));
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    for (const json& x : v) {
      const double d = x.get<double>();
      sum += d;
      lo = std::min(lo, d);
      hi = std::max(hi, d);
    }
    EXPECT_EQ(sum, oracle[k]["sum"].get<double>());
    EXPECT_EQ(v[0].get<double>(), oracle[k]["first"].get<double>());
    EXPECT_EQ(v[1].get<double>(), oracle[k]["second"].get<double>());
    EXPECT_EQ(v[kN * kN - 1].get<double>(), oracle[k]["last"].get<double>());
    EXPECT_EQ(full.body["range"]["min"].get<double>(), lo);
    EXPECT_EQ(full.body["range"]["max"].get<double>(), hi);
    // Downsampled to 10 x 10 blocks of 13 x 13 (the last 11 wide): each block's min, max and
    // mean are those of its elements in the full answer.
    JsonReply small =
        GetJson(port, "/api/data/step?matrix=0&step=" + std::to_string(k) + "&w=10&h=10");
    ASSERT_EQ(small.status, 200) << small.body;
    ASSERT_EQ(small.body["block_cols"], 13);
    ASSERT_EQ(small.body["out_rows"], 10);
    for (int br = 0; br < 10; ++br)
      for (int bc = 0; bc < 10; ++bc) {
        double bsum = 0, bmin = INFINITY, bmax = -INFINITY;
        int n = 0;
        for (int r = br * 13; r < std::min(kN, br * 13 + 13); ++r)
          for (int c = bc * 13; c < std::min(kN, bc * 13 + 13); ++c) {
            const double d = v[r * kN + c].get<double>();
            bsum += d;
            bmin = std::min(bmin, d);
            bmax = std::max(bmax, d);
            ++n;
          }
        const size_t cell = br * 10 + bc;
        EXPECT_EQ(small.body["min"][cell].get<double>(), bmin);
        EXPECT_EQ(small.body["max"][cell].get<double>(), bmax);
        EXPECT_NEAR(small.body["mean"][cell].get<double>(), bsum / n, 1e-12 * (1 + bmax - bmin));
      }
  }
  // The off-diagonal mass shrinks: the last step is closer to diagonal than the first.
  EXPECT_LT(program["results"]["off_norm_per_sweep"].back().get<double>(),
            program["results"]["off_norm_per_sweep"][0].get<double>());

  ExpectSentence(GetJson(port, "/api/data/step?matrix=1&step=0"), "unknown matrix",
                 "between 0 and 0");
  ExpectSentence(GetJson(port, "/api/data/step?matrix=0&step=" + std::to_string(oracle.size())),
                 "step out of range", "'step' must be between");
  ExpectSentence(GetJson(port, "/api/data/step?matrix=0&step=0&w=0"), "zero width", "'w'");
  ExpectSentence(GetJson(port, "/api/data/step?matrix=0&step=0&h=99999"), "huge height", "'h'");
  ExpectSentence(GetJson(port, "/api/data/step?matrix=0&step=-1"), "negative step", "'step'");
  ExpectSentence(GetJson(port, "/api/data/step?step=0"), "no matrix", "needs 'matrix'");
  ExpectSentence(GetJson(port, "/api/data/step?matrix=0&step=0&x=1"), "unknown parameter", "'x'");
  EXPECT_EQ(GetJson(port, "/api/data").status, 200);  // still answering
}

// A 2 x 3 int32 matrix (column-major, as Fortran stores it) in two parts per step; step 1 lost
// its second part; two parts that do not decode (a truncated element, an unknown type).
TEST(ViewData, CraftedPartsAreCountedAndMissingElementsShown) {
  signal(SIGPIPE, SIG_IGN);
  TempDir dir;
  const std::string trace = dir.File("m.ptrace");
  {
    TraceBuilder b(trace);
    b.Session({{"command", "m"}, {"start_ts", std::to_string(kT0)}});
    b.String(20, format::StringCategory::kMatrix, "grid");
    b.Process(100, 1, "m");
    b.Thread(1, 100, 100, "m");
    auto ints = [](std::vector<int32_t> v) {
      return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    };
    const uint64_t type = 1 | format::kColumnMajor;
    // Column-major: element (r, c) at c * 2 + r; values 10 r + c.
    b.Ev(1, 1 * kMs, Kind::kMatrixData, {20, type, 2, 3, 0, 0}, ints({0, 10, 1, 11}));
    b.Ev(1, 1 * kMs, Kind::kMatrixData, {20, type, 2, 3, 0, 4}, ints({2, 12}));
    b.Ev(1, 2 * kMs, Kind::kMatrixData, {20, type, 2, 3, 1, 0}, ints({-5, 15, 6, 16}));
    b.Ev(1, 3 * kMs, Kind::kMatrixData, {20, type, 2, 3, 2, 0}, "\x01\x02\x03");
    b.Ev(1, 3 * kMs, Kind::kMatrixData, {20, 9, 2, 3, 2, 0}, ints({1, 2}));
    ASSERT_TRUE(b.Finish({{"end_ts", std::to_string(kT0 + 4 * kMs)}}));
  }
  Viewer viewer(dir, trace);
  ASSERT_GT(viewer.port(), 0) << viewer.err();
  JsonReply list = GetJson(viewer.port(), "/api/data");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.body["unreadable_parts"], 2);
  EXPECT_NE(list.body["first_problem"].get<std::string>().find("not a whole number"),
            std::string::npos);
  const json& m = list.body["matrices"][0];
  EXPECT_EQ(m["name"], "grid");
  EXPECT_EQ(m["layout"], "column-major");
  EXPECT_EQ(m["steps"], 2);
  EXPECT_EQ(m["incomplete_steps"], 1);
  EXPECT_EQ(m["times"], json::parse("[1000000,2000000]"));
  JsonReply s0 = GetJson(viewer.port(), "/api/data/step?matrix=0&step=0");
  ASSERT_EQ(s0.status, 200) << s0.body;
  EXPECT_EQ(s0.body["mean"], json::parse("[0,1,2,10,11,12]"));  // shown row by row
  EXPECT_EQ(s0.body["range"]["min_abs_nonzero"], 1);
  JsonReply s1 = GetJson(viewer.port(), "/api/data/step?matrix=0&step=1");
  ASSERT_EQ(s1.status, 200) << s1.body;
  EXPECT_EQ(s1.body["mean"], json::parse("[-5,6,null,15,16,null]"));
  EXPECT_EQ(s1.body["missing"], 2);
  EXPECT_FALSE(s1.body["complete"].get<bool>());
  EXPECT_EQ(s1.body["range"]["min"], -5);
  JsonReply one = GetJson(viewer.port(), "/api/data/step?matrix=0&step=1&w=1&h=1");
  EXPECT_EQ(one.body["mean"], json::parse("[8]"));  // (-5 + 15 + 6 + 16) / 4

  RunResult dump = Parmon({"dump", trace});
  EXPECT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_NE(
      dump.out.find("MatrixData grid int32 2x3 column-major step 0 elements 0..3 of 6: 0 10 1 11"),
      std::string::npos)
      << dump.out;
  EXPECT_NE(dump.out.find("MatrixData (unreadable: a MatrixData event carries 3 bytes"),
            std::string::npos)
      << dump.out;
  RunResult info = Parmon({"info", trace});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("matrices    1 (grid)"), std::string::npos) << info.out;
  RunResult report = Parmon({"report", trace});
  EXPECT_EQ(report.exit_code, 0) << report.err;

  // A matrix index past the list: one sentence.
  ExpectSentence(GetJson(viewer.port(), "/api/data/step?matrix=5&step=0"), "matrix out of range",
                 "between 0 and 0");
}

}  // namespace
}  // namespace parmon::testing
