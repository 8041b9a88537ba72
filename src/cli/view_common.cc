// OpenStoredView (view_common.h).
#include "cli/view_common.h"

#include <chrono>

namespace parmon::cli {

StatusOr<std::unique_ptr<web::StoredView>> OpenStoredView(const std::string& path,
                                                          const ReportInputOptions& in,
                                                          bool* usage_error,
                                                          double* analysed_s) {
  const auto begun = std::chrono::steady_clock::now();
  auto results = LoadResults(path, in, usage_error);
  if (!results.ok())
    return results.status();
  if (analysed_s)
    *analysed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count();
  return web::StoredView::Build(path, std::move(*results));
}

}  // namespace parmon::cli
