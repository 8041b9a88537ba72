// parmon diff and parmon scale: views over several Results.
#ifndef PARMON_SRC_ANALYSIS_COMPARE_H_
#define PARMON_SRC_ANALYSIS_COMPARE_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/results.h"

namespace parmon::analysis {

// The same run before (a) and after (b) a change, matched by location label and link ends.
nlohmann::json CompareJson(const Results& a, const Results& b);
std::string CompareText(const Results& a, const Results& b, bool color);

struct ScalePoint {
  int n = 0;
  std::string trace;
  int exit_code = 0;
  Results results;
};

// Where each run's location time went, as fractions of all thread time (running, queued,
// communication incl. MPI, lock, other waits).
struct TimeSplit {
  double running = 0, queued = 0, comm = 0, lock = 0, other = 0;
};
TimeSplit SplitTime(const Results& r);

nlohmann::json ScaleJson(const std::vector<ScalePoint>& points);
std::string ScaleText(const std::vector<ScalePoint>& points);

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_COMPARE_H_
