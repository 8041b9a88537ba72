// The OpenMP part of the text and JSON reports (omp_views.cc); the other views call these.
#ifndef PARMON_SRC_ANALYSIS_OMP_VIEWS_H_
#define PARMON_SRC_ANALYSIS_OMP_VIEWS_H_

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/omp_results.h"

namespace parmon::analysis {

// The "OpenMP" section of the text report, "" when the trace has no OpenMP events.
std::string RenderOmpText(const OmpProfile& p);
// The report's "openmp" object (docs/report-json.md).
nlohmann::json OmpJson(const OmpProfile& p);

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_OMP_VIEWS_H_
