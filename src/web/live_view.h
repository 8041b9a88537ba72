// web::LiveView: `parmon view --follow` — the web UI's index and answers for a session that is
// still being written: a local trace file a recorder writes, or a collector's session
// (HOST:PORT/SESSION, copied as it grows by live_view::ResolveLiveSource's fetch).
//
// Design. One thread refreshes the trace about once a period (live_view::LiveTrace reads only
// the chunks appended since), feeds the events every stream has complete into one model::Merge
// that goes on across refreshes, and hands each event to the index builder (index_builder.h:
// it indexes what the file gained, not the file again) and to a growing analysis engine (the
// rows' labels and the findings: a snapshot per refresh, as the collector's live analysis
// does). The HTTP threads answer from the index and the last snapshot under a shared lock; the
// refresh holds it exclusively only while it publishes. When the recorder closes the session,
// the last refresh publishes everything (open regions closed as after the run) and the results
// are the post-mortem analysis of the file, read once more: the answers are then those of
// `parmon view` on the stored file. A session whose recorder went without closing it ("lost"),
// or whose file cannot be read further, keeps what was indexed and says so in /api/session.
// A per-rank session directory is opened again on every refresh (its reader cannot grow), so
// its index is rebuilt whenever it changed: not incremental.
#ifndef PARMON_SRC_WEB_LIVE_VIEW_H_
#define PARMON_SRC_WEB_LIVE_VIEW_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "analysis/engine.h"
#include "base/status.h"
#include "live_view/follow.h"
#include "web/api.h"

namespace parmon::live_view {
class LiveTrace;
}
namespace parmon::model {
class Merge;
class Session;
}  // namespace parmon::model

namespace parmon::web {

class IndexBuilder;

class LiveView : public ServedSession {
 public:
  // A view of `name` (a local trace file or per-rank directory that exists, or
  // HOST:PORT/SESSION); analysis: the report's options. It is opened by Start's thread, which
  // waits for it (while it answers "waiting"). `source`, when given, is what to follow instead
  // of live_view::ResolveLiveSource(name) (`parmon serve --http`: the store's file, complete when
  // the collector says so); name is then only what the page shows.
  static StatusOr<std::unique_ptr<LiveView>> Open(
      const std::string& name,
      const analysis::Options& analysis,
      uint64_t period_ns,
      std::function<StatusOr<live_view::LiveSource>()> source = nullptr);
  ~LiveView();
  // Starts following (the refresh thread).
  void Start();
  // The API answer (api.h), with /api/session's "live" fields (docs/http-api.md).
  ApiResponse Handle(std::string_view target) const override;
  // Ended: the session closed, its recorder gone, or its file unreadable.
  bool ended() const;

 private:
  LiveView() = default;
  bool OpenTrace();
  void Loop();
  void Step();
  // Feeds the events up to the bound every stream has reached; true when it fed any.
  bool Feed(uint64_t bound);
  void Publish(uint64_t bound, bool final);
  void Rebuild();

  std::string name_;
  std::function<StatusOr<live_view::LiveSource>()> source_;
  analysis::Options options_;
  uint64_t period_ns_ = 1'000'000'000;
  std::unique_ptr<live_view::LiveTrace> trace_;
  // The refresh thread's: a session over the trace's reader, refreshed with it.
  std::unique_ptr<model::Session> session_;
  std::unique_ptr<model::Merge> merge_;
  std::unique_ptr<analysis::Engine> engine_;
  std::unique_ptr<IndexBuilder> builder_;
  std::unique_ptr<TraceIndex> next_index_;  // what builder_ fills until its first Publish
  uint64_t generation_ = 0;
  uint64_t engine_from_ = 0;
  uint64_t published_bound_ = UINT64_MAX - 1;  // the bound of the last Publish
  bool behind_ = false;    // the last Step fed less than every stream has complete
  bool reopened_ = false;  // the trace was opened again (a per-rank directory): no slices

  // What the HTTP threads read, under mu_.
  mutable std::shared_mutex mu_;
  std::unique_ptr<TraceIndex> index_;
  std::unique_ptr<analysis::Results> results_;
  std::unique_ptr<Api> api_;
  std::string state_ = "waiting";      // waiting, live, ended, lost, failed
  std::string lost_;                   // what was lost, or why the follow ended early
  std::vector<std::string> problems_;  // the reader's damage found so far
  uint64_t refreshes_ = 0;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::atomic<bool> stopping_{false};  // read by the source's stop while it is being opened
  std::thread thread_;
};

}  // namespace parmon::web

#endif  // PARMON_SRC_WEB_LIVE_VIEW_H_
