// What `parmon view` and `parmon serve --http` share: a stored trace analysed as `parmon report`
// does (the rows' labels, ranks and findings) and indexed once for the web UI.
#ifndef PARMON_SRC_CLI_VIEW_COMMON_H_
#define PARMON_SRC_CLI_VIEW_COMMON_H_

#include <memory>
#include <string>

#include "base/status.h"
#include "cli/report_common.h"
#include "web/stored_view.h"

namespace parmon::cli {

// The analysis, then the index; *analysed_s (when given) is the time the analysis took.
// *usage_error as LoadResults sets it.
StatusOr<std::unique_ptr<web::StoredView>> OpenStoredView(const std::string& path,
                                                          const ReportInputOptions& in,
                                                          bool* usage_error = nullptr,
                                                          double* analysed_s = nullptr);

}  // namespace parmon::cli

#endif  // PARMON_SRC_CLI_VIEW_COMMON_H_
