// web::StoredView: a stored trace's UI answers, the trace analysed (by the caller, as `parmon
// report` does) and indexed once, every request then answered from memory: what `parmon view
// FILE|DIR` serves, and `parmon serve --http` for each ended session of its store.
#ifndef PARMON_SRC_WEB_STORED_VIEW_H_
#define PARMON_SRC_WEB_STORED_VIEW_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/results.h"
#include "base/status.h"
#include "web/api.h"
#include "web/trace_index.h"

namespace parmon::web {

class StoredView : public ServedSession {
 public:
  // Indexes `path` (a trace file or per-rank directory) whose analysis is `results`. The reader's
  // damage (a trace served --partial) is listed in /api/session's `problems`.
  static StatusOr<std::unique_ptr<StoredView>> Build(const std::string& path,
                                                     analysis::Results results);
  ApiResponse Handle(std::string_view target) const override;
  const TraceIndex& index() const { return *index_; }
  const Api& api() const { return *api_; }
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  StoredView() = default;
  analysis::Results results_;
  std::unique_ptr<TraceIndex> index_;
  std::unique_ptr<Api> api_;
  std::vector<std::string> problems_;
};

}  // namespace parmon::web

#endif  // PARMON_SRC_WEB_STORED_VIEW_H_
