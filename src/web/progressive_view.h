// web::ProgressiveView: `parmon view` of a large stored trace, answering at once and then
// exactly (docs/web.md, "A large trace").
//
// Design. The complete index (trace_index.h) of a trace of hundreds of millions of events takes
// minutes to build, and the report's analysis (the rows' labels, the findings) seconds. So the
// view serves in two levels:
//  1. Coarse, ready before the URL is printed: the sampler streams only (Source::kSampler, one
//     record per thread per period that gives the thread's state split directly). The chunk
//     headers name each stream's source, so these streams are read without decoding the runtime
//     and context-switch streams that hold nearly all the events. Their index is the complete
//     one's state series without the MPI calls and blocking waits (which the complete index books
//     as comm, lock or timer wait): the time per bucket is the same where the sampler covers it,
//     its split differs by at most the time of those calls. No slices, CPU rows or messages yet;
//     the rows are the trace's threads, named as the report names them (a rank from the MpiInit
//     in the first chunk of its runtime stream). No findings.
//  2. Complete: the report's analysis and the complete index, built on two background threads
//     (one each: this VM has 2 cores), then swapped in under the lock. From then on every answer
//     is byte for byte that of an index built before serving (api.h).
// While coarse, /api/session carries a `live` object (state "indexing", the live view's loop in
// web/ui/live.ts re-asks until it is gone) and an `index` object ({"complete": false, "level":
// "sampler"}), and every other answer begins with "complete":false,"level":"sampler".
//
// Threads: the HTTP threads answer under a shared lock; the builders' thread takes it
// exclusively only for the swap.
#ifndef PARMON_SRC_WEB_PROGRESSIVE_VIEW_H_
#define PARMON_SRC_WEB_PROGRESSIVE_VIEW_H_

#include <atomic>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>

#include "analysis/results.h"
#include "base/status.h"
#include "model/session.h"
#include "web/api.h"
#include "web/trace_index.h"

namespace parmon::web {

// The rows of the coarse level: every thread location that has a stream, as the report labels
// and orders them (rank, then pid, then tid), with no figures.
analysis::Results CoarseResults(const model::Session& session);
// The coarse index: the sampler streams alone.
std::unique_ptr<TraceIndex> BuildCoarseIndex(const model::Session& session);

class ProgressiveView {
 public:
  using Analyse = std::function<StatusOr<analysis::Results>()>;
  // Called on the builders' thread once the complete level is served (ok), or when it could not
  // be built (the sentence).
  using Done = std::function<void(const Status&, const ProgressiveView&)>;

  // The coarse level of an opened trace, served at once (the view keeps the session for the
  // complete level).
  static std::unique_ptr<ProgressiveView> Over(std::unique_ptr<model::Session> session);
  ~ProgressiveView();
  // Builds the complete level in the background: `analyse` is the report's analysis of the
  // same trace.
  void Start(Analyse analyse, Done done);
  ApiResponse Handle(std::string_view target) const;
  bool complete() const { return complete_.load(std::memory_order_acquire); }
  // Valid once complete() (the figures the CLI prints).
  const TraceIndex& index() const { return *index_; }
  const Api& api() const { return *api_; }
  double coarse_seconds() const { return coarse_s_; }

 private:
  ProgressiveView() = default;
  void BuildComplete(const Analyse& analyse, const Done& done);

  std::string path_;
  std::unique_ptr<model::Session> session_;  // the builders' (the coarse level's first)
  double coarse_s_ = 0;

  mutable std::shared_mutex mu_;
  std::unique_ptr<TraceIndex> index_;
  std::unique_ptr<analysis::Results> results_;
  std::unique_ptr<Api> api_;
  // Set (release) after the swap, under mu_; read (acquire) by complete() without it.
  std::atomic<bool> complete_{false};
  std::thread thread_;
};

}  // namespace parmon::web

#endif  // PARMON_SRC_WEB_PROGRESSIVE_VIEW_H_
