// live::AnalysisService against a store file written here, chunk by chunk: the bookkeeping of
// which session to read again, which the end-to-end tests exercise only as timing allows.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "format/codec.h"
#include "format/writer.h"
#include "live/analysis_service.h"
#include "report/trace_builder.h"
#include "support/e2e.h"

namespace parmon {
namespace {

using format::Kind;
using live::AnalysisService;
using nlohmann::json;

constexpr uint64_t kStart = 1'000'000'000;
constexpr uint32_t kRegion = 1;

// A one-thread trace in the store, written as a recorder writes it: chunks, then a watermark.
class GrowingTrace {
 public:
  explicit GrowingTrace(const std::string& path) {
    auto w = format::TraceWriter::Create(path);
    EXPECT_TRUE(w.ok()) << w.status().message();
    w_ = std::move(*w);
    EXPECT_TRUE(w_->WriteSession({{"command", "grow"}, {"start_ts", std::to_string(kStart)}}).ok());
    format::StreamEncoder defs(0, format::Source::kDefinitions);
    Def(&defs, Kind::kDefString, {kRegion, uint64_t(format::StringCategory::kRegion)}, "work");
    Def(&defs, Kind::kDefLocation, {1, uint64_t(format::LocationType::kThread), 7, 7}, "grow");
    EXPECT_TRUE(w_->Flush(&defs).ok());
  }
  // `pairs` region enter/leave pairs, 1 us apart, in chunks of 16 Ki events; then a watermark.
  void Append(uint64_t pairs) {
    format::StreamEncoder enc(1, format::Source::kRuntime);
    for (uint64_t i = 0; i < pairs; ++i) {
      for (Kind k : {Kind::kRegionEnter, Kind::kRegionLeave}) {
        format::Event e;
        e.ts = kStart + 1000 * ++tick_;
        e.location = 1;
        e.kind = static_cast<uint16_t>(k);
        e.nargs = 1;
        e.args[0] = kRegion;
        enc.Append(e);
        ++events_;
      }
      if (enc.count() >= 16384) {
        EXPECT_TRUE(w_->Flush(&enc).ok());
      }
    }
    if (enc.count()) {
      EXPECT_TRUE(w_->Flush(&enc).ok());
    }
    EXPECT_TRUE(w_->WriteWatermark(kStart + 1000 * (tick_ + 1)).ok());
  }
  void Finish() { EXPECT_TRUE(w_->Finish().ok()); }
  uint64_t events() const { return events_; }

 private:
  static void Def(format::StreamEncoder* enc,
                  Kind kind,
                  std::vector<uint64_t> args,
                  const std::string& payload) {
    enc->Append(testing::DefinitionEvent(kind, args, payload, kStart));
  }

  std::unique_ptr<format::TraceWriter> w_;
  uint64_t tick_ = 0, events_ = 0;
};

// The service's answer to one question, with its meta parsed (null when it is an error).
struct Answer {
  std::string error;
  json meta;
};
Answer Ask(AnalysisService& svc, const std::string& session) {
  auto done = std::make_shared<std::promise<live::Snapshot>>();
  std::future<live::Snapshot> f = done->get_future();
  EXPECT_TRUE(svc.Ask(session, false, "json", [done](live::Snapshot s) { done->set_value(s); }));
  live::Snapshot s = f.get();
  if (!s.status.ok())
    return {s.status.message(), nullptr};
  return {"", json::parse(s.meta)};
}

// The recording's last bytes came (and with them its last mark) while the worker was still
// feeding what it had read before: the session must be read again and end, not wait for a mark
// that will never come. Before the fix it stayed "not ended" for good (seen once as a 60 s
// timeout in LivePerRankE2e).
TEST(AnalysisService, TheLastTouchWhileABoundIsFedIsNotLost) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("store"));
  GrowingTrace t(dir.File("store/s.ptrace"));
  // Many slices to feed: the last mark comes while they are fed.
  t.Append(32 * AnalysisService::kSliceEvents);
  AnalysisService svc(dir.File("store"));
  svc.Touch("s", false);
  // A question is answered between two slices: once one says the feed is under way, the rest
  // of the recording comes, with its mark. (A question that comes before the mark is taken
  // feeds the session whole at once: the first is asked a little after.)
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  uint64_t fed_at_mark = 0;
  for (int i = 0; i < 3000; ++i) {
    Answer a = Ask(svc, "s");
    if (!a.meta.is_null() && a.meta["analysed_events"].get<uint64_t>() > 0) {
      fed_at_mark = a.meta["analysed_events"].get<uint64_t>();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GT(fed_at_mark, 0u) << "the service never fed the session";
  t.Append(1000);
  t.Finish();
  svc.Touch("s", false);
  const uint64_t total = t.events();
  std::printf("fed %llu of %llu events when the last mark came\n",
              static_cast<unsigned long long>(fed_at_mark), static_cast<unsigned long long>(total));
  // Only questions from here: nothing else would make the service look at the file again.
  Answer last;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    last = Ask(svc, "s");
    if (!last.meta.is_null() && last.meta["ended"].get<bool>())
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(last.meta.is_null()) << last.error;
  ASSERT_TRUE(last.meta["ended"].get<bool>()) << last.meta.dump();
  EXPECT_EQ(last.meta["events"].get<uint64_t>(), total) << last.meta.dump();
  EXPECT_EQ(last.meta["analysed_events"].get<uint64_t>(), total) << last.meta.dump();
  EXPECT_TRUE(last.meta["incremental"].get<bool>()) << last.meta.dump();
}

}  // namespace
}  // namespace parmon
